"""Groups of identical released rows and the host's k-anonymity checks.

Per record, how many released records share its combination of some columns
(a missing value equal to a missing value; within each value of the public
stratum columns), sdcMicro's matching count (a missing value matching any
value), the check of a k-anonymity claim at its k (:func:`k_check`), what a
claim states (:func:`kind_of_claim`, :func:`claimed_k`,
:func:`claim_columns`, read from its typed fact, never from words), the
values a step released (:func:`step_values`), and the risk figures of the
declared keys (:func:`key_figures`, :func:`key_figures_text`).
:func:`~privclust.verify.verify` runs these on a release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .claims import KAnonymity, ProbabilisticKAnonymity
from .comparison import exact_codes
from .ledger import LedgerEntry
from .wording import column_list as _cols

__all__ = [
    "DEFAULT_KEY_K",
    "UNDECIDED_MATCHING",
    "WHOLE_FILE_SCOPE",
    "claim_columns",
    "claimed_k",
    "groups_of",
    "k_check",
    "key_figures",
    "key_figures_text",
    "kind_of_claim",
    "step_values",
]


def _keys(values: np.ndarray) -> np.ndarray:
    """Rows as comparable keys: a missing value is a value of its own (equal
    to another missing value, whatever NaN's bits), not equal to anything
    else."""
    nan = np.isnan(values)
    if not nan.any():
        return values
    return np.hstack([np.where(nan, 0.0, values), nan.astype(float)])


def _groups(released: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, int]:
    """Per record, how many released records share its combination of
    ``columns`` (identical rows; a missing value equals a missing value);
    and the number of distinct combinations."""
    values = _keys(exact_codes(released, columns))
    _, inverse, counts = np.unique(values, axis=0, return_inverse=True, return_counts=True)
    return counts[np.asarray(inverse).ravel()], int(len(counts))


#: Above this many missingness patterns the matching count is not computed.
_MAX_PATTERNS = 64


def _matching(released: pd.DataFrame, columns: Sequence[str], extra: Sequence[str]) -> np.ndarray | None:
    """Per record, how many released records *match* it on ``columns`` with
    a missing value counted as matching any value (sdcMicro's convention for
    k-anonymity): records that agree on every column both observe (within
    the same value of the public ``extra`` columns). ``None`` when there are
    more than :data:`_MAX_PATTERNS` missingness patterns (not computed)."""
    values = exact_codes(released, columns)
    if extra:
        codes = pd.factorize(pd.MultiIndex.from_frame(released.loc[:, list(extra)].astype(str)))[0] \
            if len(extra) > 1 else pd.factorize(released[extra[0]].astype(str))[0]
        values = np.hstack([values, codes.astype(float)[:, None]])
    observed = ~np.isnan(values)
    patterns, of = np.unique(observed, axis=0, return_inverse=True)
    of = np.asarray(of).ravel()
    if len(patterns) > _MAX_PATTERNS:
        return None
    sizes = np.zeros(len(values), dtype=np.int64)
    rows = [np.flatnonzero(of == a) for a in range(len(patterns))]
    for a, pa in enumerate(patterns):
        for b, pb in enumerate(patterns):
            common = pa & pb
            if not common.any():
                sizes[rows[a]] += len(rows[b])
                continue
            ka, kb = values[np.ix_(rows[a], common)], values[np.ix_(rows[b], common)]
            _, inverse = np.unique(np.vstack([kb, ka]), axis=0, return_inverse=True)
            inverse = np.asarray(inverse).ravel()
            counts = np.bincount(inverse[:len(kb)], minlength=int(inverse.max()) + 1)
            sizes[rows[a]] += counts[inverse[len(kb):]]
    return sizes


def groups_of(released: pd.DataFrame, columns: Sequence[str], extra: Sequence[str]) -> tuple[np.ndarray, int]:
    """:func:`_groups` over ``columns``, within each value of the public ``extra`` columns."""
    if not extra:
        return _groups(released, columns)
    codes = pd.factorize(pd.MultiIndex.from_frame(released.loc[:, list(extra)].astype(str)))[0] \
        if len(extra) > 1 else pd.factorize(released[extra[0]].astype(str))[0]
    keyed = released.loc[:, list(columns)].assign(**{"\0part": codes.astype(float)})
    return _groups(keyed, [*columns, "\0part"])


def step_values(outcomes: Sequence[Any], outcome: Any, original: pd.DataFrame,
                 released: pd.DataFrame, extra: Sequence[str]) -> pd.DataFrame:
    """The values of a step's columns as that step released them, before any
    later step and the host's rounding: a masker's or noise step's output; a
    clusterer's columns as it found and left them (as the last earlier step
    that wrote each left it, else the original). The public ``extra`` (strata)
    columns are the released ones. A step's claim is checked on these."""
    out: dict[str, Any] = {}
    for c in outcome.columns:
        if outcome.kind != "clusterers":
            out[c] = outcome.result.data[c].to_numpy()
            continue
        found = next((e.result.data[c] for e in reversed(outcomes)
                      if e.index < outcome.index and e.kind != "clusterers" and c in e.columns), None)
        out[c] = (original[c] if found is None else found).to_numpy()
    frame = pd.DataFrame(out, index=released.index)
    for c in extra:
        if c not in frame.columns:
            frame[c] = released[c].to_numpy()
    return frame


def k_check(frame: pd.DataFrame, columns: Sequence[str], extra: Sequence[str], k: int | None) -> dict[str, Any]:
    """Groups of identical rows of ``columns`` (within each value of
    ``extra``) and, when some record is in a group smaller than ``k`` and a
    value is missing, sdcMicro's matching count (a missing value matches any
    value). ``holds``: k-anonymity with ``k`` under one of the two."""
    sizes, n_groups = groups_of(frame, columns, extra)
    n = len(frame)
    smallest = int(sizes.min()) if n else 0
    out: dict[str, Any] = {"groups": n_groups, "min_group_size": smallest,
                           "unique_records": int((sizes == 1).sum()),
                           "records_in_small_groups": int((sizes < k).sum()) if k else 0, "_sizes": sizes}
    holes = int(frame.loc[:, list(columns)].isna().to_numpy().sum()) if columns else 0
    out["holds"] = k is not None and smallest >= k
    out["_holes"] = holes
    if holes and k is not None and smallest < k:
        found = _matching(frame, columns, extra)
        if found is not None:
            out.update(identical_min_group_size=smallest, min_matching_records=int(found.min()),
                       records_with_few_matches=int((found < k).sum()), missing_values=holes)
            out["holds"] = int(found.min()) >= k
        else:  # sdcMicro's matching count not computed: undecided, neither verified nor refuted
            out["holds"] = None
            out["matching_patterns_over"] = _MAX_PATTERNS
    return out


#: Why a k-anonymity check with missing values is undecided (the matching count was not computed).
UNDECIDED_MATCHING = (f"the released values hold more than {_MAX_PATTERNS} patterns of missing values, and the host "
                      "did not compute sdcMicro's count of matching records (a missing value matching any value) "
                      "there, so it can neither verify nor refute k-anonymity under that convention")


def kind_of_claim(entry: LedgerEntry) -> str | None:
    """``"k-anonymity"`` or ``"probabilistic k-anonymity"`` for the claims the
    host checks (the entry's typed fact), else ``None``."""
    return entry.fact.name if isinstance(entry.fact, KAnonymity | ProbabilisticKAnonymity) else None


def claimed_k(entry: LedgerEntry) -> int | None:
    """The k a k-anonymity claim is checked at: its typed fact's
    (:attr:`KAnonymity.k`), never words. ``None``: it states none."""
    return entry.fact.k if isinstance(entry.fact, KAnonymity | ProbabilisticKAnonymity) else None


def claim_columns(entry: LedgerEntry, step_columns: Sequence[str], frame: pd.DataFrame) -> tuple[str, ...]:
    """The columns a claim is checked on: those its typed fact names when they
    are among the step's own columns (a claim about a column the step did
    not release protects nothing of its work), else all the step's columns."""
    cols = entry.fact.columns if isinstance(entry.fact, KAnonymity | ProbabilisticKAnonymity) else None
    if cols and all(c in frame.columns and c in step_columns for c in cols):
        return tuple(cols)
    return tuple(step_columns)


#: The k of the key figures when no step claims one (sdcMicro's freqCalc reports cells below 2, 3 and 5).
DEFAULT_KEY_K = 3


def key_figures(released: pd.DataFrame, keys: Sequence[str], strata: Sequence[str], k: int) -> dict[str, Any]:
    """The risk figures of the declared keys on the released file, measured
    by the host: key cells are the combinations of ``keys`` within each
    stratum; ``sample_uniques`` the records alone in their cell,
    ``records_below_k`` the records in a cell smaller than ``k`` (a missing
    value counted as a value of its own, with sdcMicro's matching count
    beside it when a value is missing), and ``expected_reidentifications``
    the sum over records of ``1 / f_k`` (``f_k`` the records sharing the
    record's cell), the expected number of records an intruder who knows
    who is in the file re-identifies by matching their keys: the number of
    cells, and the text says so; no sampling weights are used (the
    ``individual-risk`` evaluator gives sdcMicro's weighted estimate, at most
    this figure on the same keys)."""
    keys = [str(c) for c in keys]
    checked = k_check(released, keys, tuple(strata), k)
    out = {"columns": keys, "strata": [str(c) for c in strata], "k": k, "records": int(len(released)),
           "cells": int(checked["groups"]), "min_cell_size": int(checked["min_group_size"]),
           "sample_uniques": int(checked["unique_records"]),
           "records_below_k": int(checked["records_in_small_groups"]),
           # the sum over records of 1/f is the number of cells, exactly (a float sum of 1/f gave 411.99999999999994)
           "expected_reidentifications": float(checked["groups"]), "missing_values": int(checked["_holes"]),
           "holds": checked["holds"]}
    if "records_with_few_matches" in checked:
        out["records_with_few_matches"] = int(checked["records_with_few_matches"])
    return out


def key_figures_text(figures: Mapping[str, Any]) -> str:
    """The verdict's sentence on the declared keys (:func:`key_figures`)."""
    k, n = figures["k"], figures["records"]
    within = f" within each stratum of {_cols(figures['strata'])}" if figures["strata"] else ""
    where = f"the declared keys ({_cols(figures['columns'])}){within}"
    own = "counting a missing value as a value of its own, " if figures["missing_values"] else ""
    counts = (f"the released file leaves {figures['sample_uniques']} of {n} records unique (sample uniques) and "
              f"{figures['records_below_k']} of {n} in key cells smaller than k = {k}")
    cells = "key cells" + (" (a missing value counted as a value of its own)" if figures["missing_values"] else "")
    expected = (f"expected re-identifications by an intruder who knows who is in the file: "
                f"{figures['expected_reidentifications']:.6g}, the number of {cells} (picking one of the f "
                "records that share a person's keys is right with probability 1/f, so each cell adds exactly one, "
                "whatever its size; unweighted: the estimate of the individual-risk and global-risk evaluators from "
                "the sampling weights, for an intruder who does not know who was sampled, is at most this on the "
                "same keys)")
    few = figures.get("records_with_few_matches")
    if figures["records_below_k"] == 0:
        return (f"Keys: on {where}, every released record shares its combination with at least "
                f"{figures['min_cell_size']} records (k = {k} holds{', ' + own.rstrip(', ') if own else ''}); "
                f"{expected}.")
    if few == 0:
        return (f"Keys: on {where}, with a missing value matching any value (sdcMicro's convention), every released "
                f"record matches at least {k} records (k = {k} holds); {own}{counts}; {expected}.")
    matching = (f"; with a missing value matching any value (sdcMicro), {few} match fewer than {k}"
                if few is not None else "")
    return f"Keys: on {where}, {own}{counts}{matching}; {expected}."


#: The columns the host's check of the whole file counts groups over.
WHOLE_FILE_SCOPE = "the columns the steps worked on, the label columns and the declared keys and strata"
