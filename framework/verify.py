"""What the host checks on the released data, and the one-sentence verdict.

After the last step the runner measures, on the released frame itself:

* which columns changed at all (by content, whatever was spent), and which
  label columns were added;
* per step and overall, how many records were released *verbatim* (every one
  of the step's columns equal to the original value);
* the groups of identical released rows over each step's columns: how many,
  the smallest, and how many records sit in a group smaller than a claimed k;
* the same over the whole file's quasi-identifiers (the steps' columns, the
  label columns, the declared keys and strata), at the largest claimed k.

These measurements are written in the ledger as ``verified`` entries (the
host's, with exact numbers). A component's ``guarantee`` entry is a claim:
k-anonymity is checked on the values its step released (never on a later
step's) and marked ``verified`` or ``refuted``; probabilistic k-anonymity
gets the verbatim count appended; any other claim is presented as
"<component> claims: ...". When the release changes no column, every claim
is marked ``void`` and a :class:`~privclust.NothingProtectedWarning` is
raised.

The verdict is computed from the ledger: "epsilon-differentially private
(...) under <relation> for <what>; not covered: ..." or "No
differential-privacy guarantee: <reasons>", followed by what the host
verified (first, when the whole file is not k-anonymous at the claimed k).
Differential privacy is decided per released column: a step's value or
label column is covered only when its DP entries are declared to cover that
output (``dp_output``, :func:`~privclust.components.dp_outputs`).

This module runs the checks (:func:`verify`); each lives in the module of
its job: :mod:`~privclust.comparison` (values compared exactly),
:mod:`~privclust.kanonymity` (groups, k-anonymity, the key figures),
:mod:`~privclust.coverage` (what differential privacy covers),
:mod:`~privclust.verdict` (the verdict's sentence) and
:mod:`~privclust.provenance` (:func:`snapshot`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from ._optional import deferred
from .accounting import NothingProtectedWarning, PrivacyContext
from .comparison import exact_codes, joint_codes, values_equal
from .comparison import same_values as _same
from .comparison import verbatim as _verbatim
from .coverage import COMPARED, dp_claimants, guarantees_dp, no_guarantee_reasons, post_processed
from .coverage import dp_structured as _dp_structured
from .coverage import qualify_dp_inputs as _qualify_dp_inputs
from .coverage import qualify_vacuous_delta as _qualify_vacuous_delta
from .coverage import shown as _shown
from .kanonymity import DEFAULT_KEY_K, UNDECIDED_MATCHING, WHOLE_FILE_SCOPE, key_figures, key_figures_text
from .kanonymity import claim_columns as _claim_columns
from .kanonymity import claimed_k as _claimed_k
from .kanonymity import groups_of as _groups_of
from .kanonymity import k_check as _k_check
from .kanonymity import kind_of_claim as _kind_of_claim
from .kanonymity import step_values as _step_values
from .provenance import snapshot
from .verdict import (
    ASSESSMENT,
    DERIVED,
    DERIVED_R2,
    OTHER_RELEASES,
    SEEDED_CAVEAT,
    SEEDED_ORDER,
    UNCHANGED_CHECK,
    derived_text,
    random_step_names,
    repeated_draws,
    seeded_draws,
    verdict,
    whole_file_relation,
)
from .wording import column_list as _cols
from .wording import records_are as _records

# The checks verify() runs live in their own modules (the names above taken under the private names verify() has
# always called them by); verify re-exports what callers import from it.
__all__ = [
    "ASSESSMENT",
    "COMPARED",
    "DEFAULT_KEY_K",
    "DERIVED",
    "DERIVED_R2",
    "DERIVED_RECORDS",
    "KEYS_BACK_MIN_CELLS",
    "KEYS_BACK_SHARE",
    "OTHER_RELEASES",
    "SEEDED_CAVEAT",
    "SEEDED_ORDER",
    "UNCHANGED_CHECK",
    "UNDECIDED_MATCHING",
    "WHOLE_FILE_SCOPE",
    "derived_columns",
    "dp_claimants",
    "exact_codes",
    "guarantees_dp",
    "key_figures",
    "keys_given_back",
    "key_figures_text",
    "no_guarantee_reasons",
    "post_processed",
    "random_step_names",
    "repeated_draws",
    "seeded_draws",
    "snapshot",
    "values_equal",
    "verdict",
    "verify",
    "whole_file_relation",
]


#: At most this many records enter the check of derived columns (:func:`derived_columns`), taken at evenly spaced
#: positions of the file (no random draw): memory and time stay bounded whatever the file's size.
DERIVED_RECORDS = 20_000
#: The most columns released as in the original that :func:`derived_columns` combines to predict one changed column.
DERIVED_MAX_COLUMNS = 3
#: The R^2 one column must reach alone before :func:`derived_columns` tries it with others.
DERIVED_INFORMATIVE = 0.1
#: The fewest records (with no missing value among the columns compared) the check of derived columns judges on.
DERIVED_MIN_RECORDS = 20


def _numeric(frame: pd.DataFrame, column: str) -> bool:
    dtype = frame[column].dtype
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))


def _local_linear(fit_x: np.ndarray, fit_y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Nearest-neighbour regression of ``fit_y`` on ``fit_x`` at the points ``at``: a linear fit to the 2 d + 2
    nearest training records of each point (scipy's ``cKDTree``), clipped to the training range (a rounding, a rank
    or a sum is predicted exactly between neighbours, not only as their mean)."""
    d = fit_x.shape[1]
    k = min(2 * d + 2, len(fit_y))
    if d == 1 and len(fit_y) >= 2 * k:  # on a line: the k nearest among the 2 k around each point's place in order
        order = np.argsort(fit_x[:, 0], kind="stable")
        line = fit_x[order, 0]
        start = np.clip(np.searchsorted(line, at[:, 0]) - k, 0, len(line) - 2 * k)
        window = start[:, None] + np.arange(2 * k)
        pick = np.argpartition(np.abs(line[window] - at[:, :1]), k - 1, axis=1)[:, :k]
        near = order[np.take_along_axis(window, pick, axis=1)]
    else:
        _, near = deferred("scipy.spatial").cKDTree(fit_x).query(at, k=k)
        near = near.reshape(len(at), k)
    ys = fit_y[near]
    if d == 1:  # the least-squares line through the neighbours, in closed form, taken at the point
        offsets = fit_x[near, 0] - at[:, :1]
        mean_o, mean_y = offsets.mean(axis=1), ys.mean(axis=1)
        spread = (offsets * offsets).mean(axis=1) - mean_o * mean_o
        slope = np.divide((offsets * ys).mean(axis=1) - mean_o * mean_y, spread,
                          out=np.zeros(len(at)), where=spread > 1e-12)
        value = mean_y - slope * mean_o
    else:
        offsets = fit_x[near] - at[:, None, :]
        design = np.concatenate([np.ones((len(at), k, 1)), offsets], axis=2)
        gram = design.transpose(0, 2, 1) @ design + 1e-9 * np.eye(d + 1)
        value = np.linalg.solve(gram, (design.transpose(0, 2, 1) @ ys[..., None]))[:, 0, 0]
    return np.clip(value, fit_y.min(), fit_y.max())


#: The columns, best first by :func:`_binned_share`, that :func:`derived_columns` fits by nearest neighbours (and
#: any other whose binned share is 0.9 or more).
DERIVED_POOL = 8


def _quantile_bins(x: np.ndarray) -> np.ndarray:
    """Each value's quantile bin (at most 200 bins of at least 20 records; -1 for a missing value), for
    :func:`_binned_share`."""
    ok = ~np.isnan(x)
    m = int(ok.sum())
    bins = max(2, min(200, m // 20))
    bin_of = np.full(x.size, -1, dtype=np.int64)
    where = np.flatnonzero(ok)
    bin_of[where[np.argsort(x[ok], kind="stable")]] = np.arange(m) * bins // max(m, 1)
    return bin_of


def _binned_share(bin_of: np.ndarray, y: np.ndarray) -> float:
    """The share of ``y``'s variance between the quantile bins of a column (``bin_of``, :func:`_quantile_bins`):
    the correlation ratio, about bins / n for an unrelated column and near 1 when ``y`` is a function of it; a
    screen for :func:`derived_columns`."""
    ok = (bin_of >= 0) & ~np.isnan(y)
    bin_of, y = bin_of[ok], y[ok]
    total = float(((y - y.mean()) ** 2).sum()) if y.size else 0.0
    if total == 0.0:
        return 0.0
    count = np.bincount(bin_of)
    mean = np.bincount(bin_of, weights=y) / np.maximum(count, 1)
    return float((count * (mean - y.mean()) ** 2).sum() / total)


def _cross_fitted_r2(x: np.ndarray, y: np.ndarray) -> float:
    """R^2 of predicting ``y`` from ``x`` (standardised) by :func:`_local_linear`, cross-fitted: the records at even
    positions predict those at odd ones and the other way round; when every value is positive, also on the
    logarithms (a ratio or a product is then a sum) and the better of the two."""
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0.0:
        return float("nan")
    halves = (np.arange(0, len(y), 2), np.arange(1, len(y), 2))
    best = -np.inf
    spaces = [(x, y, False)]
    if (x > 0).all() and (y > 0).all():
        spaces.append((np.log(x), np.log(y), True))
    for xs, ys, logged in spaces:
        spread = xs.std(axis=0)
        xs = (xs - xs.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
        predicted = np.empty(len(y))
        for fit, score in (halves, halves[::-1]):
            predicted[score] = _local_linear(xs[fit], ys[fit], xs[score])
        if logged:
            predicted = np.exp(predicted)
        best = max(best, 1.0 - float(((y - predicted) ** 2).sum()) / total)
        if best >= DERIVED_R2:
            break
    return best


def derived_columns(original: pd.DataFrame, changed: Sequence[str], unchanged: Sequence[str]) -> list[dict[str, Any]]:
    """Whether the columns released as in the original (``unchanged``: the
    numeric ones are used) give back the original values of a changed column
    (``changed``: the numeric ones are judged).

    For each changed column, a cross-fitted nearest-neighbour regression
    (:func:`_cross_fitted_r2`) on at most :data:`DERIVED_RECORDS` records at
    evenly spaced positions: the unchanged column that predicts its original
    values best, then the one that adds most while it takes a fifth of the
    error left away, up to :data:`DERIVED_MAX_COLUMNS` columns (only when the
    best predicts some of it alone, :data:`DERIVED_INFORMATIVE`). R^2 of at
    least :data:`DERIVED_R2` flags the changed column, named with the columns
    of that set and every one that does as well in place of one of them (a
    rank and a rounding of the same column). A flagged column counts as known
    for the others (a ratio b = a / r gives b back once a rank gives a back),
    named by the columns that gave it back.

    Returns one record per flagged column, in the order of ``changed``:
    ``{"column", "given_back_by", "r2", "records"}``, ``given_back_by`` in
    the order of ``unchanged``. No random draw; ``original`` is not
    changed."""
    targets = [c for c in changed if c in original.columns and _numeric(original, c)]
    sources = [c for c in unchanged if c in original.columns and _numeric(original, c)]
    n = len(original)
    if not targets or not sources or n < DERIVED_MIN_RECORDS:
        return []
    m = min(n, DERIVED_RECORDS)
    rows = np.unique(np.arange(m) * n // m)
    values = {c: original[c].iloc[rows].to_numpy(dtype=float, na_value=np.nan) for c in {*targets, *sources}}
    sources = [c for c in sources if np.nanstd(values[c]) > 0]  # a constant column predicts nothing
    known: dict[str, list[str]] = {c: [c] for c in sources}  # a usable column -> the released columns it stands for

    measured: dict[tuple[str, tuple[str, ...]], float] = {}
    binned: dict[str, np.ndarray] = {}

    def bins_of(column: str) -> np.ndarray:
        if column not in binned:
            binned[column] = _quantile_bins(values[column])
        return binned[column]

    def r2(target: str, columns: Sequence[str]) -> float:
        key = (target, tuple(sorted(columns)))
        if key not in measured:
            measured[key] = fitted(target, key[1])
        return measured[key]

    def fitted(target: str, columns: Sequence[str]) -> float:
        x = np.column_stack([values[c] for c in columns])
        y = values[target]
        ok = ~np.isnan(y) & ~np.isnan(x).any(axis=1)
        if ok.sum() < DERIVED_MIN_RECORDS:
            return -np.inf
        got = _cross_fitted_r2(x[ok], y[ok])
        return -np.inf if np.isnan(got) else got

    def given_back(target: str) -> tuple[float, list[str]]:
        usable = list(known)
        # a cheap screen first (the share of the target's variance between quantile bins of each column, O(n)), so
        # that the nearest-neighbour fits run on the few best columns only: one fit a column cost 6 s with 60
        # unrelated columns beside 5 changed ones at 100,000 records
        screen = {c: _binned_share(bins_of(c), values[target]) for c in usable}
        ranked = sorted(usable, key=lambda c: -screen[c])
        if screen[ranked[0]] < DERIVED_INFORMATIVE / 2:  # no column predicts any of it (unrelated ones: bins / n)
            return -np.inf, []
        pool = ranked[:DERIVED_POOL]
        single = {c: r2(target, [c]) for c in [*pool, *(c for c in ranked[DERIVED_POOL:] if screen[c] >= 0.9)]}
        ranked = sorted(single, key=lambda c: -single[c])
        chosen, best = [ranked[0]], single[ranked[0]]
        # columns that together give back a value each predict part of it (R^2 about 1/2 each for a sum or a ratio
        # of two): when none predicts any of it, no combination is tried (unrelated columns cost a fit each); a
        # column is added while it takes a fifth of the error left away, past R^2 0.99 too up to 0.999 (a rounding
        # beside a rank)
        while DERIVED_INFORMATIVE < best < 0.999 and len(chosen) < DERIVED_MAX_COLUMNS:
            tried = {c: r2(target, [*chosen, c]) for c in pool if c not in chosen}
            column = max(tried, key=lambda c: tried[c], default=None)
            if column is None or not 1.0 - tried[column] < 0.8 * (1.0 - best):
                break
            chosen.append(column)
            best = tried[column]
        if best < DERIVED_R2:
            return best, []
        # every column that gives it back in place of one of the set found, alone or with the others (a rank and
        # a rounding of the same column), among the best predictors alone
        taking_part = [c for c in usable if c in chosen or single.get(c, -np.inf) >= DERIVED_R2
                       or (c in pool and len(chosen) > 1
                       and any(r2(target, [*(k for k in chosen if k != member), c]) >= DERIVED_R2
                               for member in chosen))]
        return best, list(dict.fromkeys(s for c in taking_part for s in known[c]))

    found: dict[str, dict[str, Any]] = {}
    left = list(targets) if sources else []
    while left:
        new: dict[str, dict[str, Any]] = {}
        for target in left:
            best, columns = given_back(target)
            if columns:
                new[target] = {"column": target, "given_back_by": [c for c in sources if c in columns],
                               "r2": float(best), "records": int(len(rows))}
        if not new:
            break
        found.update(new)
        known.update({t: item["given_back_by"] for t, item in new.items()})
        left = [t for t in left if t not in new]
    return [found[t] for t in targets if t in found]


#: The share of the changed cells of a key (suppressed, or replaced by a recode or PRAM) a column released as in the
#: original reads a value for that it must read right (the original value) for :func:`keys_given_back` to flag it.
KEYS_BACK_SHARE = 0.9
#: The fewest changed cells of one kind (suppressed, or replaced) a column must give back exactly for
#: :func:`keys_given_back` to flag it: fewer flag nothing (a handful of cells read right by chance is not a column
#: that gives the key back).
KEYS_BACK_MIN_CELLS = 10


def _modes(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct ``source`` code (sorted) and the ``target`` code most of its records hold (the lowest code on
    a tie): the map an intruder reads off the released rows."""
    width, height = int(target.max()) + 1, int(source.max()) + 1
    if width * height <= 4_000_000:  # a table of counts, no sort
        table = np.bincount(source * width + target, minlength=width * height).reshape(height, width)
        seen = np.flatnonzero(table.any(axis=1))
        return seen, table[seen].argmax(axis=1)
    pairs, counts = np.unique(source * width + target, return_counts=True)  # one int64 per (source, target) pair
    sources, targets = pairs // width, pairs % width
    # for each source value, its most frequent target: order by source, then by count descending
    order = np.lexsort((targets, -counts, sources))
    sources, targets = sources[order], targets[order]
    first = np.ones(len(sources), dtype=bool)
    first[1:] = sources[1:] != sources[:-1]
    return sources[first], targets[first]


def _read_off(source: np.ndarray, numbers: np.ndarray | None, released: np.ndarray, learn: np.ndarray,
              at: np.ndarray) -> np.ndarray:
    """The released key value (a code; -1: none) a column gives each record of ``at``: the value most released rows
    with the same source value hold (``learn``: the rows whose key is released, not missing); for a numeric source
    (``numbers``, its values) whose value no such row holds, the value of the rows nearest below and above it when
    both hold the same."""
    ok = learn & (source >= 0)
    out = np.full(int(at.sum()), -1, dtype=np.int64)
    if not ok.any():
        return out
    values, modes = _modes(source[ok], released[ok])
    wanted = source[at]
    place = np.clip(np.searchsorted(values, wanted), 0, len(values) - 1)
    exact = (values[place] == wanted) & (wanted >= 0)
    out[exact] = modes[place[exact]]
    if numbers is not None:
        # the numeric values of the source's distinct codes, in order of value, and their modes
        value_of = np.full(int(source.max()) + 1, np.nan)
        value_of[source[source >= 0]] = numbers[source >= 0]
        line = value_of[values]
        order = np.argsort(line, kind="stable")
        line, line_modes = line[order], modes[order]
        x = numbers[at]
        rest = ~exact & ~np.isnan(x)
        above = np.searchsorted(line, x[rest])
        inside = (above > 0) & (above < len(line))
        below_mode = line_modes[np.clip(above - 1, 0, len(line) - 1)]
        above_mode = line_modes[np.clip(above, 0, len(line) - 1)]
        agree = inside & (below_mode == above_mode)
        got = np.full(int(rest.sum()), -1, dtype=np.int64)
        got[agree] = below_mode[agree]
        out[rest] = got
    return out


def keys_given_back(original: pd.DataFrame, released: pd.DataFrame, targets: Sequence[str],
                    sources: Sequence[str]) -> list[dict[str, Any]]:
    """Whether the columns released as in the original (``sources``) give
    back the original values of the cells a step changed in ``targets``
    (changed columns that are not numeric, and changed keys): as an
    intruder reads them off the released file.

    For each source column, the map "source value -> released key value"
    is learned from the released rows whose key is not missing (the value
    most of them hold); a numeric source's value that no such row holds
    takes the value of the rows nearest below and above it when both agree
    (a band read off a numeric column). The map is applied to the changed
    cells, suppressed (released missing) and replaced (released as another
    value: a recode, PRAM) judged apart, and compared with the original
    values. A kind of cell is given back when the source gives back at
    least :data:`KEYS_BACK_MIN_CELLS` of them exactly, reads right at least
    :data:`KEYS_BACK_SHARE` of those it reads a value for (an intruder knows
    which: a value no released row shows is not read), more of them than
    guessing the most frequent released value does, and misses at most half
    as many as that guess. One source at a time (no combinations); on at
    most :data:`DERIVED_RECORDS` records at evenly spaced positions; no
    random draw.

    Returns one record per flagged column, in the order of ``targets``:
    ``{"column", "given_back_by", "share", "cells", "given_back", "read",
    "change", "records"}``: the sources that give it back (in the order of
    ``sources``); for the one that gives back most, the ``cells`` changed
    of the kind(s) ``change`` ("suppressed", "replaced" or "suppressed or
    replaced"), those it reads a value for and those it ``given_back``
    exactly, their ``share`` of the cells; and the records judged."""
    n = len(original)
    if not targets or not sources or n < DERIVED_MIN_RECORDS:
        return []
    m = min(n, DERIVED_RECORDS)
    rows = np.unique(np.arange(m) * n // m)
    before, after = original.iloc[rows], released.iloc[rows]
    codes = {c: pd.factorize(before[c])[0].astype(np.int64) for c in sources}
    numbers = {c: before[c].to_numpy(dtype=float, na_value=np.nan) if _numeric(before, c) else None
               for c in sources}
    found = []
    for target in targets:
        was, now = joint_codes(before[target], after[target])
        had = before[target].notna().to_numpy()
        shown = after[target].notna().to_numpy()
        changed = had & ~values_equal(before[target], after[target])
        kinds = [(name, changed & which) for name, which in (("suppressed", ~shown), ("replaced", shown))]
        kinds = [(name, cells) for name, cells in kinds if cells.sum() >= KEYS_BACK_MIN_CELLS]
        if not kinds or not shown.any():
            continue
        values, counts = np.unique(now[shown], return_counts=True)
        guess = values[np.argmax(counts)]  # the most frequent released value: what a guess without a source gives
        flagged: dict[str, tuple[int, int, int]] = {}  # a source -> (given back, cells, read), over its kinds
        by: dict[str, list[str]] = {}
        every = np.zeros(len(rows), dtype=bool)
        for _, cells in kinds:
            every |= cells
        reads_of = {source: _read_off(codes[source], numbers[source], now, shown, every) for source in sources}
        for name, cells in kinds:
            truth, total = was[cells], int(cells.sum())
            for source in sources:
                read = reads_of[source][cells[every]]
                on = read >= 0  # the cells the source reads a value for (an intruder knows which)
                hits, reads = int((read[on] == truth[on]).sum()), int(on.sum())
                guessed = int((truth[on] == guess).sum())
                if hits >= KEYS_BACK_MIN_CELLS and hits >= KEYS_BACK_SHARE * reads and hits > guessed \
                        and reads - hits <= 0.5 * (reads - guessed):
                    got, of, seen = flagged.get(source, (0, 0, 0))
                    flagged[source] = (got + hits, of + total, seen + reads)
                    by.setdefault(source, []).append(name)
        if flagged:
            best = max(flagged, key=lambda s: (flagged[s][0], -flagged[s][2]))
            hits, total, reads = flagged[best]
            found.append({"column": target, "given_back_by": [s for s in sources if s in flagged],
                          "share": hits / total, "cells": total, "given_back": hits, "read": reads,
                          "change": " or ".join(by[best]), "records": int(len(rows))})
    return found


def _after_step(s: Mapping[str, Any], after: Mapping[int, tuple[list[Any], list[str]]],
                original: pd.DataFrame) -> str:
    """Why a step's verbatim count and the released file's differ, as a parenthesis (empty when they agree): the
    step's count is of its own output, before the later steps over its columns and the host's rounding of the
    integer columns (a red-team audit: the two counts read as a contradiction with no later step)."""
    if s["verbatim_by_step"] == s["verbatim_released"]:
        return ""
    later, touched = after.get(s["step"], ([], []))
    causes = []
    rounded = [c for c in touched if pd.api.types.is_integer_dtype(original[c].dtype)]
    if rounded:
        causes.append(f"the host's rounding of the integer column(s) {_cols(rounded)} after the steps")
    if len(touched) > len(rounded):
        causes.append(f"the host's changes to {_cols([c for c in touched if c not in rounded])} after the steps")
    if later:
        causes.append("the later step(s) " + ", ".join(f"{e.index} ({e.id})" for e in later))
    return (" (the step's own count is of its values, before " + " and ".join(causes) + ")") if causes else ""


def verify(context: PrivacyContext, original: pd.DataFrame, released: pd.DataFrame, outcomes: Sequence[Any], *,
           label_columns: Sequence[str] = (), strata: Sequence[str] = (), keys: Sequence[str] = (),
           broken_rules: Sequence[tuple[str, frozenset[str], int, int, str]] = (),
           parts: Sequence[tuple[str, np.ndarray]] | None = None, role_columns: Sequence[str] = (),
           weight: Sequence[str] = ()) -> dict[str, Any]:
    """Measure the release, write the host's ``verified`` entries, and settle
    the components' claims. Returns the measurements (also kept by the
    Release as ``release.verification``).

    ``broken_rules``: the edit rules the released file violates, and those
    the host could not check, as (text, columns, violating records, records
    judged, the handler whose own evaluation it is or ""); a claim of a step over all
    of a rule's columns is followed by the host's word that the rule does
    not hold on the released file (a claim that the step's values satisfy
    the rules speaks of its output, before a later step or the host's
    rounding of integer columns).

    With ``strata``, the public stratum columns are released beside every
    step's columns, so groups of identical rows are counted over the step's
    columns *and* them (a combination is shared only within a stratum).
    ``parts`` (the strata, as text and record positions): a claim a step
    made in one stratum (its entry tagged with that stratum) is checked on
    that stratum's records alone and its words name the stratum; the
    release's ``claims`` state each step's claim over every stratum
    (:func:`merged_claim`).

    A step's k-anonymity claim is checked on the values that step released
    (:func:`_step_values`), never on a later step's; the whole released file
    is checked too (``whole_file``): groups of identical rows over every
    released column that depends on the original values (the columns the
    steps worked on, the label columns, the declared ``keys`` and
    ``strata``), at the largest k a step claims.

    The columns released as in the original, the ids, the weight and the
    strata among them (not the ``keys``), are asked whether they give back
    the original values of a changed column: a numeric one by regression
    (:func:`derived_columns`), a text column or a key by reading its
    suppressed or replaced cells off the released rows
    (:func:`keys_given_back`); those that do are written in a host entry
    (:data:`~privclust.verdict.DERIVED`) and the verdict opens with them.

    ``weight``: the sampling weight (``[roles] weight``); released as in
    the original beside a claimed k, the records it leaves below k when
    counted with the whole file's columns are measured
    (``whole_file["weight"]``) and stated in the host's sentence."""
    extra = tuple(strata)
    n = int(len(original))
    # A release the verdict can call differentially private: nothing the host writes about it (verdict, ledger,
    # report) may compare released with original values in counts of records, which the DP statements do not
    # cover (one record's value can decide them).
    dp_release = _dp_structured(context.ledger.entries, outcomes)
    # Changed columns by content, whatever was spent: a column whose released values all equal the original's
    # (NaN equal to NaN, 3 equal to 3.0) is released as in the original, and a release that changes no column
    # protects nothing (a DP entry of a step that returned its input unchanged does not make it private).
    changed = [str(c) for c in original.columns if not _same(original, released, [c]).all()]
    unchanged = [str(c) for c in original.columns if c not in changed]
    protected = [c for c in original.columns if any(c in o.columns for o in outcomes)]
    protected = [str(c) for c in protected]
    steps: list[dict[str, Any]] = []
    touched_after: dict[int, tuple[list[Any], list[str]]] = {}
    for o in outcomes:
        columns = tuple(o.columns)
        if o.kind == "clusterers":
            # a clusterer releases labels and leaves its columns as it found them: as the last earlier step that
            # wrote each of them left it (a clusterer after a noise step found, and left, noisy values; every
            # record was counted as left with its original values)
            left = {c: next((e.result.data[c] for e in reversed(outcomes)
                             if e.index < o.index and e.kind != "clusterers" and c in e.columns),
                            original[c]).to_numpy() for c in columns}
            own = pd.DataFrame(left, index=original.index)
        else:  # what the step itself released, before any later step
            own = o.result.data
        step_out = int(_verbatim(original, own, columns).sum())
        # why the released file's count can differ from the step's (rt14: "0 of 60 ... ; in the released file 1 of
        # 60" with no later step, the host's rounding unnamed): the later steps over these columns, and the columns
        # the host changed after the steps (it rounds integer columns)
        later = [e for e in outcomes if e.index > o.index and e.kind != "clusterers"
                 and any(c in e.columns for c in columns)]
        touched_after[o.index] = (later, [c for c in columns if not any(c in e.columns for e in later)
                                  and not _same(own, released, [c]).all()])
        sizes, n_groups = _groups_of(released, columns, extra)
        steps.append({
            "step": o.index, "id": o.id, "component": o.name, "columns": list(columns),
            "verbatim_by_step": step_out,
            "verbatim_released": int(_verbatim(original, released, columns).sum()),
            "groups": n_groups,
            "min_group_size": int(sizes.min()) if n else 0,
            "unique_records": int((sizes == 1).sum()),
        })
    overall_same = _verbatim(original, released, protected)
    checks: dict[str, Any] = {
        "records": n,
        "dp_release": dp_release,
        "changed_columns": changed,
        "unchanged_columns": unchanged,
        "label_columns": [str(c) for c in label_columns],
        "protected_columns": protected,
        "verbatim_records": int(overall_same.sum()) if protected else n,
        "missing_values": int(released.loc[:, protected].isna().to_numpy().sum()) if protected else 0,
        # values a step (a key masker's suppressions) set missing where the original has a value
        "values_set_missing": int((released.loc[:, protected].isna().to_numpy()
                                   & original.loc[:, protected].notna().to_numpy()).sum()) if protected else 0,
        "steps": steps,
        "claims": [],
    }
    if not outcomes:  # a recipe without steps: an assessment of the original file
        checks["assessment"] = True
    # Columns released as in the original that give back a changed column's original values (a rank, a rounding, a
    # ratio beside its numerator): the rule that such columns are not counted as quasi-identifiers stays, but the
    # release says when they undo the protection (a red-team audit, rt20 F1)
    # The role columns released as in the original (the weight, the ids, the strata) are released too and serve as
    # sources: a design weight with one value per region gives back every suppressed region (a red-team audit, rt21
    # F1). The keys stay targets only: a key released unchanged is counted in the k-anonymity of the keys already.
    sources = [c for c in unchanged if c not in set(map(str, keys))]
    checks["derived"] = derived_columns(original, [c for c in changed if c in protected], sources)
    # text columns, and keys whatever their type, that a step changed (suppressed, recoded, PRAM): read off the
    # released rows by a column released as in the original
    numeric_found = {item["column"] for item in checks["derived"]}
    key_targets = [c for c in changed if c in protected and c not in numeric_found
                   and (c in set(map(str, keys)) or not _numeric(original, c))]
    checks["derived"] += keys_given_back(original, released, key_targets, sources)
    checks["derived"].sort(key=lambda item: changed.index(item["column"]))
    # The whole released file: every released column that identifies records by original values (its
    # quasi-identifiers): the steps' columns, the labels computed from them, the declared keys and strata.
    depends = {*protected, *map(str, label_columns), *map(str, keys), *map(str, strata)}
    whole_columns = [str(c) for c in released.columns if str(c) in depends]
    # at the largest k a step claims, probabilistic k-anonymity's included: a verdict that names "k = 5" of some
    # columns says first when the released file leaves records in smaller groups
    file_k = max((k for e in context.ledger.entries if e.kind == "guarantee" and e.status == "claimed"
                  and _kind_of_claim(e) is not None and (k := _claimed_k(e)) is not None),
                 default=None)
    whole = {"columns": whole_columns, "k": file_k,
             **(_k_check(released, whole_columns, (), file_k) if whole_columns and n else
                {"groups": 0, "min_group_size": 0, "unique_records": 0, "records_in_small_groups": 0,
                 "holds": False})}
    whole.pop("_sizes", None)
    whole.pop("_holes", None)
    # the sampling weight is not counted as a quasi-identifier (sdcMicro's convention), but it is released: how many
    # records it leaves below k when counted with those columns is measured and stated (a red-team audit, rt21 F1:
    # 60 unique weights beside "k-anonymity with k = 3", and the sentence said only that a weight "can" do it)
    released_weight = [str(c) for c in weight if str(c) in unchanged and str(c) not in whole_columns]
    if released_weight and whole_columns and file_k is not None and n:
        with_weight = _k_check(released, [*whole_columns, *released_weight], (), file_k)
        whole["weight"] = {"columns": released_weight,
                           "records_in_small_groups": int(with_weight.get("records_with_few_matches",
                                                                          with_weight["records_in_small_groups"])),
                           "matching": "records_with_few_matches" in with_weight,
                           "holds": with_weight["holds"]}
    checks["whole_file"] = whole
    if keys and n:
        checks["keys"] = key_figures(released, keys, strata, file_k or DEFAULT_KEY_K)

    # One host entry per step, then one for the release.
    for s in steps:
        with context.step(s["step"], s["id"], s["component"]):
            cols = _cols(s["columns"])
            clusterer = any(o.index == s["step"] and o.kind == "clusterers" for o in outcomes)
            within = f" within each stratum of {_cols(strata)}" if strata else ""
            groups = (f"the released combinations of these columns form {s['groups']} groups of identical "
                      f"rows{within}, the smallest of {s['min_group_size']} record(s) "
                      f"({_records(s['unique_records'])} unique{within})")
            if dp_release:
                text = (f"Host check on the released data: step {s['step']} ({s['id']}) "
                        + ("left the values of " if clusterer else "wrote ") + f"{cols}; {groups}. In a "
                        "differentially private release the host does not count the records released with their "
                        "original values: that count is not covered by the DP statements.")
            else:
                text = (f"Host check on the released data: step {s['step']} ({s['id']}) "
                        f"{'left' if clusterer else 'released'} {s['verbatim_by_step']} of {n} records verbatim "
                        f"(identical on {cols} to an original record, its own or another's); in the released file "
                        f"{s['verbatim_released']} of {n} records are{_after_step(s, touched_after, original)}, and "
                        f"{groups}.")
            context._record_host("verified", text, mechanism="release check",
                                 details=_shown(s, dp_release))
    added = f"; label column(s) added: {_cols(checks['label_columns'])}" if label_columns else ""
    kept_missing = checks["missing_values"] - checks["values_set_missing"]
    missing = (f" {kept_missing} values of these columns are released missing as in the original (a missing value "
               "that stays missing counts as kept); which of the original values are missing is released and is not "
               "protected." if kept_missing else "") + (
        f" {checks['values_set_missing']} values of these columns were set missing by the steps (suppressed)."
        if checks["values_set_missing"] else "")
    if dp_release:
        text = (f"Host check of the release: columns changed: {_cols(changed)}; columns released as in the "
                f"original: {_cols(unchanged)}{added}. The host does not count the records that keep their original "
                f"values (every step released through its differential-privacy mechanisms, which do not cover that "
                f"count).{missing}")
    else:
        text = (f"Host check of the release: columns changed: {_cols(changed)}; columns released as in the original: "
                f"{_cols(unchanged)}{added}. {checks['verbatim_records']} of {n} records are released verbatim "
                f"(identical on the columns the steps worked on, {_cols(protected)}, to an original record, its own "
                f"or another's).{missing}")
    if whole_columns and n:
        text += " " + _whole_file_text(whole, n)
    context._record_host("verified", text, mechanism="release check",
                         details=_shown({k: v for k, v in checks.items() if k not in ("steps", "claims", "keys")},
                                        dp_release))
    if checks["derived"]:
        context._record_host("verified", "Host check of the columns released as in the original: "
                             + derived_text(checks["derived"], unchanged), mechanism=DERIVED,
                             details={"derived": checks["derived"]})
    if "keys" in checks:
        context._record_host("verified", "Host check of the declared keys on the released file. "
                             + key_figures_text(checks["keys"]), mechanism="key risk", details=dict(checks["keys"]))

    nothing = not changed
    if nothing and not outcomes:
        warnings.warn(NothingProtectedWarning(ASSESSMENT + " Every original value of "
                                              + _cols([str(c) for c in original.columns]) + " is released."),
                      stacklevel=3)
    elif nothing:
        warnings.warn(NothingProtectedWarning(
            "THE RELEASE CHANGES NO COLUMN: every original value of " + _cols([str(c) for c in original.columns])
            + " is released unchanged" + (f" (the steps only added the label column(s) {_cols(label_columns)})"
                                          if label_columns else "")
            + ". No guarantee is claimed for it. "
            + ("A clusterer step forms groups without replacing any value: to protect the data use a masker (e.g. "
               "microaggregation for k-anonymity) or a noise step." if any(o.kind == "clusterers" for o in outcomes)
               else "The steps returned every value as they received it; check their parameters (a masker or a "
                    "noise step that changes nothing protects nothing).")),
            stacklevel=3)

    _qualify_dp_inputs(context, outcomes)
    _qualify_vacuous_delta(context, n)

    by_step = {s["step"]: s for s in steps}
    every_part, label = original, released
    n_all = n
    stratum_rows = {text: rows for text, rows in parts} if parts is not None and len(parts) > 1 else {}
    for entry in list(context.ledger):
        if entry.kind != "guarantee" or entry.status != "claimed" or entry.step is None:
            # a claim no step made (a constraint handler's own evaluation of its edit rules, which the rule check
            # relays) protects nothing by itself: it is not settled as a step's protection claim
            continue
        who = entry.component or "a component"
        claim = entry.claim or entry.statement
        s = by_step.get(entry.step) if entry.step is not None else None  # type: ignore[assignment]
        record: dict[str, Any] = {"seq": entry.seq, "component": who,
                                  "guarantee": _kind_of_claim(entry) or entry.mechanism}
        # a claim made in one stratum is about its records: checked on them alone (a red-team audit: stratum a's
        # k = 10 was refuted by stratum b's groups of 7, which b's own claim of k = 7 covered)
        in_stratum = stratum_rows.get(entry.partition[1]) if entry.partition is not None else None
        if in_stratum is not None:
            record["stratum"] = entry.partition[1]  # type: ignore[index]
            original, released, n = every_part.iloc[in_stratum], label.iloc[in_stratum], int(len(in_stratum))
        else:
            original, released, n = every_part, label, n_all
        if _kind_of_claim(entry) is not None and s is not None:
            k = _claimed_k(entry)
            columns = _claim_columns(entry, s["columns"], original)
            own_outcome = next(o for o in outcomes if o.index == entry.step)
            # the claim is the step's: checked on the values it released, never on a later step's
            # a step run within groups (``within``) is checked within them, as within strata
            groups = getattr(own_outcome, "within_groups", None)  # type: ignore[assignment]
            grouped = {} if groups is None else {"\0within": groups}
            at = (*extra, *grouped)
            if in_stratum is not None:
                grouped = {key: np.asarray(value)[in_stratum] for key, value in grouped.items()}
                values = _step_values(outcomes, own_outcome, every_part, label, extra).iloc[in_stratum]
            else:
                values = _step_values(outcomes, own_outcome, original, released, extra)
            own = _k_check(values.assign(**grouped), columns, at, k)
            on_file = _k_check(released.assign(**grouped), columns, at, k)
            smallest, small = own["min_group_size"], own["records_in_small_groups"]
            verbatim = int(_verbatim(original, released, columns).sum())
            later = on_file["holds"] != own["holds"] or on_file["min_group_size"] != smallest
            # the words say which values were judged when they are not the released file's
            on = f"the values step {entry.step} released" if later else "the released data"
            rows = f"identical rows of the values step {entry.step} released" if later else "identical released rows"
            record.update(k=k, columns=list(columns), min_group_size=smallest, records_in_small_groups=small,
                          checked_on=on)
            if k is not None and small:  # the records below k by the size of their group: the count at any k' <= k
                below = own["_sizes"][own["_sizes"] < k]
                sizes, counts = np.unique(below, return_counts=True)
                record["small_groups"] = {int(a): int(b) for a, b in zip(sizes, counts, strict=True)}
            if later:  # a later step or the host's rounding changed them: what the released file holds
                record.update(released_min_group_size=on_file["min_group_size"],
                              released_records_in_small_groups=on_file["records_in_small_groups"],
                              holds_on_released_file=on_file["holds"])
            if not dp_release:
                record["verbatim_records"] = verbatim
            holes = own["_holes"]
            # the claim is checked on its stratum's records alone, or on the whole file's
            across = ("in the stratum's released records" if in_stratum is not None
                      else "across the released file, every stratum included" if strata
                      else "across the released file")
            matching = own.get("min_matching_records") if _kind_of_claim(entry) == "k-anonymity" else None
            if matching is not None:
                record.update({key: own[key] for key in ("identical_min_group_size", "min_matching_records",
                                                         "records_with_few_matches", "missing_values")})
            after = ""
            if later:
                after = (f" A later step or the host's rounding of integer columns changed these values afterwards: "
                         f"on the released file the smallest group of identical rows of {_cols(columns)} has "
                         f"{on_file['min_group_size']} record(s)"
                         + (f" and {on_file['records_in_small_groups']} records are in groups smaller than {k}"
                            if k else "") + (", so the claim does NOT hold on the released file."
                                             if k and on_file["holds"] is False else
                                             f"; whether the claim holds there is undecided: {UNDECIDED_MATCHING}."
                                             if k and on_file["holds"] is None else "."))
            if _kind_of_claim(entry) == "k-anonymity":
                if matching is not None and own["holds"]:
                    status = "verified"
                    record.update(min_group_size=matching, records_in_small_groups=own["records_with_few_matches"])
                    text = (f"{who} claims: {claim} Verified by the host"
                            + (f" on the values step {entry.step} released" if later else "")
                            + f" with a missing value counted as matching any value (sdcMicro's convention; {holes} "
                            f"values of {_cols(columns)} are missing {across}): every released record agrees, "
                            "on the columns both observe, with at least "
                            f"{matching} released records (k = {k}). Counting identical rows only (the "
                            f"missingness pattern as part of the row), the smallest group has {smallest} record(s): "
                            "which values are missing is released and is not protected." + after)
                elif own["holds"]:
                    status = "verified"
                    text = (f"{who} claims: {claim} Verified by the host"
                            + (f" on the values step {entry.step} released: every combination" if later else
                               ": every released combination")
                            + f" of {_cols(columns)} is shared by at least {smallest} records (k = {k})"
                            + (f", a missing value counted as a value of its own ({holes} are missing "
                               f"{across})" if holes else "") + "." + after)
                elif own["holds"] is None:
                    status = "claimed"
                    text = (f"Claimed by {who}, not verified: k-anonymity with k = {k} of {_cols(columns)}. On {on}, "
                            f"counting identical rows (the missingness pattern as part of the row), {small} of {n} "
                            f"records are in groups smaller than {k}; but {UNDECIDED_MATCHING}. The claim was: {claim}"
                            + after)
                elif k is None:
                    status = "refuted"
                    text = (f"Claimed by {who}, not verified: the k-anonymity claim names no k the host can check "
                            f"(a component states it as claim=KAnonymity(k, columns)); on {on} the smallest group "
                            f"of identical rows of {_cols(columns)} has {smallest} record(s). The claim was: {claim}")
                else:
                    status = "refuted"
                    clusterer = own_outcome.kind == "clusterers"
                    text = (f"Claimed by {who}, does NOT hold: k-anonymity with k = {k} of {_cols(columns)}. On "
                            f"{on}"
                            + (" (a clusterer leaves its columns as it found them; it releases labels)"
                               if clusterer else "")
                            + f" {small} of {n} records share their combination of these columns with fewer than "
                            f"{k - 1} other record(s) (the smallest group has {smallest}"
                            + (f"; with a missing value counted as matching any value, "
                               f"{record['records_with_few_matches']} records match fewer than {k}, the fewest "
                               f"{matching}" if matching is not None else "") + "); "
                            + ("" if dp_release else f"{verbatim} records are released verbatim. ")
                            + f"The claim was: {claim}")
            else:
                status = "claimed"
                text = (f"{who} claims: {claim} Host check: "
                        + ("" if dp_release else f"{verbatim} of {n} records were released verbatim (identical on "
                           f"{_cols(columns)} to an original record, its own or another's); ")
                        + (f"{_records(small)} in a group of {rows} smaller than k = {k}; the smallest group has "
                           f"{smallest}." if k is not None else
                           f"the claim names no k; the smallest group of {rows} has {smallest}.") + after)
        else:
            status = "claimed"
            text = f"{who} claims: {claim}"
        if nothing:
            # settled on the released values all the same (``status_if_changed``, with the figures): a stratum
            # of run_dataset that changes nothing is released beside strata that do, and the release then states
            # the claim over every stratum as privclust.run does (merged_claim; a red-team audit)
            record["status_if_changed"] = status
            status = "void"
            text = (f"{who} claims: {claim} Host check: the release changes no column, so every original value is "
                    "released; this claim protects nothing.")
        over = [(rule, bad, judged, own) for rule, columns, bad, judged, own in broken_rules
                if s is not None and columns and columns <= set(s["columns"])]
        broken = [b for b in over if b[1]]
        unchecked = [rule for rule, bad, _, own in over if own and not bad]
        if unchecked and status != "void":
            text += (" The host could not check the edit rule(s) " + ", ".join(map(repr, unchecked)) + " over these "
                     "columns (their constraint handler states no coefficients; see its own entries): whatever this "
                     "claim says of them is not verified.")
            record["unchecked_rules"] = unchecked
        if broken and status != "void":
            text += (" Host check of the edit rules over these columns on the released file: "
                     + "; ".join(f"{rule!r} is violated by {bad} of {judged} released records"
                                 + (f" as its constraint handler {own!r} evaluates it" if own else "")
                                 for rule, bad, judged, own in broken)
                     + " (see the host's edit-rule entries): whatever this claim says of these rules does not hold "
                       "on the released file.")
            record["violated_rules"] = [rule for rule, *_ in broken]
        record["status"] = status
        checks["claims"].append(record)
        if in_stratum is not None:
            text = f"Stratum {_cols(strata)} = {entry.partition[1]!r}: {text}"  # type: ignore[index]
        context.ledger._replace(attrs.evolve(entry, statement=text, status=status))
    original, released, n = every_part, label, n_all

    if stratum_rows:  # each step's claims of every stratum, stated once for the release
        checks["claims"] = _claims_over_strata(checks["claims"], context, list(stratum_rows))
    return checks


def claimed_in(merged: dict[str, Any], made: Sequence[str], strata: Sequence[str]) -> None:
    """In place: a claim merged over the strata ``made`` (those whose step
    made it) of all ``strata`` names them when some stratum made none: the
    claim is about those strata's records only, and the verdict says so (a
    red-team audit: "every released combination is shared by at least 6
    records" of a claim one stratum made, beside a stratum of unique
    records)."""
    if len(set(made)) < len(strata):
        merged["claimed_in"] = [t for t in strata if t in set(made)]
        merged["not_claimed_in"] = [t for t in strata if t not in set(made)]


def _claims_over_strata(records: Sequence[dict[str, Any]], context: PrivacyContext,
                        strata: Sequence[str]) -> list[dict[str, Any]]:
    """The claims a step made in each stratum (``strata``: every stratum, as
    text), the j-th of every stratum merged into one (:func:`merged_claim`);
    a claim made outside the strata stays as it is."""
    entries = {e.seq: e for e in context.ledger.entries}
    groups: dict[Any, list[dict[str, Any]]] = {}
    seen: dict[Any, int] = {}
    for r in records:
        if "stratum" not in r:
            groups[("own", r["seq"])] = [r]
            continue
        step = entries[r["seq"]].step
        j = seen.get((step, r["stratum"]), 0)
        seen[(step, r["stratum"])] = j + 1
        groups.setdefault(("strata", step, j), []).append(r)
    out = []
    for key, each in groups.items():
        if key[0] == "own":
            out.append(each[0])
            continue
        merged = merged_claim(each[0], each, [r["stratum"] for r in each])
        merged.pop("stratum", None)
        claimed_in(merged, [r["stratum"] for r in each], strata)
        out.append(merged)
    return out


def merged_claim(first: Mapping[str, Any], each: Sequence[Mapping[str, Any]],
                 strata: Sequence[str], *, settle_void: bool = False) -> dict[str, Any]:
    """One step's claim over every stratum from each stratum's settling of
    it (``strata``: the stratum of each, as text). A claim whose k is taken
    from the data (a clusterer's smallest group) can differ between strata:
    the release's claim is then settled at the smallest k any stratum claims
    (the k every stratum's claim covers), ``k_by_stratum`` beside it, and
    whether it holds is decided again against that k from each stratum's
    smallest group; its counts are those below that k (a stratum's small
    groups by size), never counts taken at different k added up (a red-team
    audit).

    A stratum whose release changes no column settles its claim ``void``
    by itself; beside strata that change something, its claim is settled as
    :func:`privclust.run` settles it on the same data, from the stratum's
    own released groups (``status_if_changed``, with the figures beside it);
    ``settle_void``: the release changes some column in a stratum that made no
    such claim (every stratum that made it changed nothing)."""
    if settle_void or any(e["status"] != "void" for e in each):
        each = [{**e, "status": e.get("status_if_changed", "claimed")} if e["status"] == "void" else e
                for e in each]
        first = each[0] if first["status"] == "void" else first
    statuses = {e["status"] for e in each}
    merged: dict[str, Any] = dict(first)
    if statuses != {"void"}:
        merged.pop("status_if_changed", None)
    ks = [e.get("k") for e in each]
    same_k = all(k == ks[0] for k in ks)
    if same_k:
        status = ("refuted" if "refuted" in statuses else "verified" if statuses == {"verified"}
                  else "void" if statuses == {"void"} else "claimed")
        for key in ("records_in_small_groups", "verbatim_records"):
            if any(key in e for e in each):
                merged[key] = sum(e.get(key, 0) for e in each)
        if any("small_groups" in e for e in each):
            merged["small_groups"] = _added([e.get("small_groups") or {} for e in each], None)
    else:
        k = min(int(x) for x in ks if x is not None) if all(x is not None for x in ks) else None
        merged["k"] = k
        merged["k_by_stratum"] = dict(zip(strata, ks, strict=True))
        if "verbatim_records" in first:
            merged["verbatim_records"] = sum(e.get("verbatim_records", 0) for e in each)
        if k is not None:  # the records below the stated k, stratum by stratum (identical rows)
            merged["small_groups"] = _added([e.get("small_groups") or {} for e in each], k)
            merged["records_in_small_groups"] = sum(merged["small_groups"].values())
        status = _status_at(merged, each, k, statuses)
    merged["status"] = status
    if any("min_group_size" in e for e in each):
        merged["min_group_size"] = min(e["min_group_size"] for e in each if "min_group_size" in e)
    if any("holds_on_released_file" in e for e in each):  # a later step changed some stratum's values
        later = [e for e in each if "holds_on_released_file" in e]
        merged["checked_on"] = later[0]["checked_on"]
        merged["released_min_group_size"] = min(e.get("released_min_group_size", e.get("min_group_size", 0))
                                                for e in each)
        if same_k:
            merged["released_records_in_small_groups"] = sum(
                e.get("released_records_in_small_groups", e.get("records_in_small_groups", 0)) for e in each)
            merged["holds_on_released_file"] = (
                False if any(e.get("holds_on_released_file") is False for e in later) else
                None if any(e.get("holds_on_released_file") is None for e in later) else True)
        else:  # counted at each stratum's own k: not a count at the stated k
            merged.pop("released_records_in_small_groups", None)
            merged["holds_on_released_file"] = (None if merged.get("k") is None
                                                else merged["released_min_group_size"] >= merged["k"])
    if any("min_matching_records" in e for e in each):
        # some stratum was checked with a missing value matching any value (sdcMicro's convention): the
        # whole release states both counts, each the smallest of any stratum under its own convention (a
        # stratum without missing values has its identical rows as its matches)
        merged["min_matching_records"] = min(e.get("min_matching_records", e.get("min_group_size", 0))
                                             for e in each)
        merged["identical_min_group_size"] = min(e.get("identical_min_group_size", e.get("min_group_size", 0))
                                                 for e in each)
        merged["missing_values"] = sum(int(e.get("missing_values", 0)) for e in each)
        if same_k:
            merged["records_with_few_matches"] = sum(e.get("records_with_few_matches", e.get(
                "records_in_small_groups", 0)) for e in each)
        else:  # counted at each stratum's own k: not a count at the stated k
            merged.pop("records_with_few_matches", None)
    return merged


def _added(histograms: Sequence[Mapping[Any, int]], below: int | None) -> dict[int, int]:
    """Records by the size of their group, added over the strata (sizes below ``below`` only, when given)."""
    out: dict[int, int] = {}
    for h in histograms:
        for size, records in h.items():
            if below is None or int(size) < below:
                out[int(size)] = out.get(int(size), 0) + int(records)
    return dict(sorted(out.items()))


def _status_at(merged: Mapping[str, Any], each: Sequence[Mapping[str, Any]], k: int | None,
               statuses: set[str]) -> str:
    """A claim's status over every stratum at one stated ``k`` (the smallest
    any stratum claims): verified where every stratum's smallest group (its
    matching count, under sdcMicro's convention) reaches ``k``."""
    if statuses == {"void"}:
        return "void"
    if merged.get("guarantee") != "k-anonymity":
        return "refuted" if "refuted" in statuses else "claimed"
    if k is None:
        return "refuted"  # some stratum's claim names no k the host can check
    held: list[bool | None] = []
    for e in each:
        if e["status"] == "verified":
            held.append(True)  # verified at its own k, at least the stated one
        elif e["status"] == "claimed":  # undecided (missing values, the matching count not computed)
            held.append(None if e.get("min_group_size", 0) < k else True)
        else:
            held.append(e.get("min_matching_records", e.get("min_group_size", 0)) >= k)
    return "refuted" if False in held else "claimed" if None in held else "verified"


def _whole_file_text(whole: Mapping[str, Any], n: int) -> str:
    """The host's words on k-anonymity over the whole released file."""
    k = whole.get("k")
    text = (f"Over {WHOLE_FILE_SCOPE} ({_cols(whole['columns'])}), the released records "
            f"form {whole['groups']} groups of identical rows, the smallest of {whole['min_group_size']} record(s); "
            f"{_records(whole['unique_records'])} unique")
    if k is None:
        return text + "."
    if whole.get("holds") is None:
        return text + (f". Whether together these columns are k-anonymous with k = {k} (the largest k a step claims) "
                       f"is undecided: counting identical rows, {whole['records_in_small_groups']} of {n} records are "
                       f"in groups smaller than {k}, but {UNDECIDED_MATCHING}.")
    if whole.get("holds"):
        how = (f" (a missing value counted as matching any value: every record matches at least "
               f"{whole['min_matching_records']})" if "min_matching_records" in whole else "")
        return text + (f". Together these columns are k-anonymous with k = {k}, the largest k a step claims{how} "
                       "(ids, the sampling weight and the columns released as in the original without a role are "
                       f"not counted{_weight_text(whole.get('weight'), k, n)}).")
    return text + (f". The released file is NOT k-anonymous with k = {k} (the largest k a step claims): "
                   f"{whole['records_in_small_groups']} of {n} records are in groups smaller than {k}"
                   + (f" (with a missing value counted as matching any value, {whole['records_with_few_matches']} "
                      f"match fewer than {k})" if "records_with_few_matches" in whole else "") + ".")


def _weight_text(weight: Mapping[str, Any] | None, k: int, n: int) -> str:
    """What the released sampling weight, counted with the whole file's columns, does to k-anonymity with ``k``
    (``weight``: ``whole_file["weight"]``), as the end of the parenthesis of :func:`_whole_file_text`."""
    if not weight:
        return ""
    small = weight["records_in_small_groups"]
    counted = f"; the released weight {_cols(weight['columns'])}, counted with them, leaves "
    if weight.get("holds") is None:
        return counted + f"{small} of {n} records in groups of identical rows smaller than {k} ({UNDECIDED_MATCHING})"
    if weight.get("matching"):
        return counted + (f"{small} of {n} records matching fewer than {k} records, a missing value matching any "
                          "value" if small else f"every record matching at least {k} records")
    return counted + (f"{small} of {n} records in groups smaller than {k}" if small
                      else f"every record in a group of at least {k}")
