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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accounting import (
    HOST,
    Accountant,
    BasicAccountant,
    Ledger,
    LedgerEntry,
    NothingProtectedWarning,
    PrivacyContext,
    accountant_name,
    at_least,
)
from .claims import KAnonymity, ProbabilisticKAnonymity
from .components import capability, dp_outputs
from .errors import PrivclustError
from .specs import nested_components

__all__ = ["snapshot", "verdict", "verify"]

def exact_codes(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Each column's values as exact identity codes (a float array; a missing
    value is NaN): two records share a code exactly when their values are
    equal (-0.0 and 0.0: one value). Not the values themselves as doubles:
    integers beyond 2^53 round together there, and six distinct ids would
    count as one group."""
    out = np.empty((len(frame), len(columns)))
    for j, column in enumerate(columns):
        codes = pd.factorize(frame[column])[0]
        out[:, j] = np.where(codes < 0, np.nan, codes)
    return out


def _same(original: pd.DataFrame, released: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Per record: are all of ``columns`` released exactly as in the original, at that record's position?"""
    if not columns:
        return np.ones(len(original), dtype=bool)
    same = np.ones(len(original), dtype=bool)
    for c in columns:
        same &= values_equal(original[c], released[c])
    return same


def _verbatim(original: pd.DataFrame, released: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Per released record: is it an original record released verbatim, that
    is equal on all of ``columns`` to *some* record of the original, wherever
    it stands (a missing value equal to a missing value)? Counted by content,
    not by position: a release that swaps records releases every original
    record verbatim. Values are compared exactly (an integer beyond 2^53 is
    not equal to its nearest double)."""
    n = len(released)
    if not columns:
        return np.ones(n, dtype=bool)
    keys = np.empty((len(original) + n, len(columns)), dtype=np.int64)
    for j, c in enumerate(columns):
        keys[:, j] = _joint_codes(original[c], released[c])
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    return np.isin(inverse[len(original):], inverse[:len(original)])


def _joint_codes(a: Any, b: Any) -> np.ndarray:
    """Codes of the values of ``a`` followed by those of ``b``: equal exactly
    when the values are (a missing value has a code of its own; an integer
    and a double compared exactly; cells that are not single values by their
    text)."""
    x, y = (pd.Series(v).reset_index(drop=True) if isinstance(v, pd.Series) else pd.Series(np.asarray(v))
            for v in (a, b))
    if x.dtype != y.dtype:
        x, y = x.astype(object), y.astype(object)
    both = pd.concat([x, y], ignore_index=True)
    try:
        codes = pd.factorize(both)[0]
    except TypeError:  # unhashable cells (lists, arrays): compared by their type and whole text
        text = both.map(lambda v: f"{type(v).__name__}:{v.tolist() if isinstance(v, np.ndarray) else v!r}")
        codes = pd.factorize(text.where(both.notna(), None))[0]
    return np.where(codes < 0, codes.max(initial=0) + 1, codes)


def values_equal(a: Any, b: Any) -> np.ndarray:
    """Element-wise equality, a missing value equal to a missing value; exact
    for integers against doubles, and for any dtype (nullable booleans and
    integers with missing values, categories, cells holding arrays)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype.kind in "iufb" and (x.dtype == y.dtype or x.dtype.kind == y.dtype.kind == "f"):
        same = np.asarray(x == y, dtype=bool)
        if x.dtype.kind == "f":
            same |= np.isnan(x) & np.isnan(y)
        return same
    codes = _joint_codes(a, b)
    return codes[:len(x)] == codes[len(x):]


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


def _groups_of(released: pd.DataFrame, columns: Sequence[str], extra: Sequence[str]) -> tuple[np.ndarray, int]:
    """:func:`_groups` over ``columns``, within each value of the public ``extra`` columns."""
    if not extra:
        return _groups(released, columns)
    codes = pd.factorize(pd.MultiIndex.from_frame(released.loc[:, list(extra)].astype(str)))[0] \
        if len(extra) > 1 else pd.factorize(released[extra[0]].astype(str))[0]
    keyed = released.loc[:, list(columns)].assign(**{"\0part": codes.astype(float)})
    return _groups(keyed, [*columns, "\0part"])


def _step_values(outcomes: Sequence[Any], outcome: Any, original: pd.DataFrame,
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


def _k_check(frame: pd.DataFrame, columns: Sequence[str], extra: Sequence[str], k: int | None) -> dict[str, Any]:
    """Groups of identical rows of ``columns`` (within each value of
    ``extra``) and, when some record is in a group smaller than ``k`` and a
    value is missing, sdcMicro's matching count (a missing value matches any
    value). ``holds``: k-anonymity with ``k`` under one of the two."""
    sizes, n_groups = _groups_of(frame, columns, extra)
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


def _kind_of_claim(entry: LedgerEntry) -> str | None:
    """``"k-anonymity"`` or ``"probabilistic k-anonymity"`` for the claims the
    host checks (the entry's typed fact), else ``None``."""
    return entry.fact.name if isinstance(entry.fact, KAnonymity | ProbabilisticKAnonymity) else None


def _claimed_k(entry: LedgerEntry) -> int | None:
    """The k a k-anonymity claim is checked at: its typed fact's
    (:attr:`KAnonymity.k`), never words. ``None``: it states none."""
    return entry.fact.k if isinstance(entry.fact, KAnonymity | ProbabilisticKAnonymity) else None


def _claim_columns(entry: LedgerEntry, step_columns: Sequence[str], frame: pd.DataFrame) -> tuple[str, ...]:
    """The columns a claim is checked on: those its typed fact names when they
    are among the step's own columns (a claim about a column the step did
    not release protects nothing of its work), else all the step's columns."""
    cols = entry.fact.columns if isinstance(entry.fact, KAnonymity | ProbabilisticKAnonymity) else None
    if cols and all(c in frame.columns and c in step_columns for c in cols):
        return tuple(cols)
    return tuple(step_columns)


def _records(count: int) -> str:
    return f"{count} record is" if count == 1 else f"{count} records are"


def _cols(columns: Sequence[str]) -> str:
    return ", ".join(columns) if columns else "(none)"


def verify(context: PrivacyContext, original: pd.DataFrame, released: pd.DataFrame, outcomes: Sequence[Any], *,
           label_columns: Sequence[str] = (), strata: Sequence[str] = (), keys: Sequence[str] = (),
           broken_rules: Sequence[tuple[str, frozenset[str], int, int]] = ()) -> dict[str, Any]:
    """Measure the release, write the host's ``verified`` entries, and settle
    the components' claims. Returns the measurements (also kept by the
    Release as ``release.verification``).

    ``broken_rules``: the edit rules the released file violates, as (text,
    columns, violating records, records judged); a claim of a step over all
    of a rule's columns is followed by the host's word that the rule does
    not hold on the released file (a claim that the step's values satisfy
    the rules speaks of its output, before a later step or the host's
    rounding of integer columns).

    With ``strata``, the public stratum columns are released beside every
    step's columns, so groups of identical rows are counted over the step's
    columns *and* them (a combination is shared only within a stratum).

    A step's k-anonymity claim is checked on the values that step released
    (:func:`_step_values`), never on a later step's; the whole released file
    is checked too (``whole_file``): groups of identical rows over every
    released column that depends on the original values (the columns the
    steps worked on, the label columns, the declared ``keys`` and
    ``strata``), at the largest k a step claims."""
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
    for o in outcomes:
        columns = tuple(o.columns)
        if o.kind == "clusterers":
            # a clusterer releases labels and leaves its columns as it found them: as the last earlier step that
            # wrote each of them left it (a clusterer after a noise step found, and left, noisy values; every
            # record was counted as left with its original values)
            left = {c: next((e.result.data[c] for e in reversed(outcomes)
                             if e.index < o.index and e.kind != "clusterers" and c in e.columns),
                            original[c]).to_numpy() for c in columns}
            step_out = int(_verbatim(original, pd.DataFrame(left, index=original.index), columns).sum())
        else:  # what the step itself released, before any later step
            step_out = int(_verbatim(original, o.result.data, columns).sum())
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
                        f"{s['verbatim_released']} of {n} records are, and {groups}.")
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

    by_step = {s["step"]: s for s in steps}
    for entry in list(context.ledger):
        if entry.kind != "guarantee" or entry.status != "claimed":
            continue
        who = entry.component or "a component"
        claim = entry.claim or entry.statement
        s = by_step.get(entry.step) if entry.step is not None else None
        record: dict[str, Any] = {"seq": entry.seq, "component": who,
                                  "guarantee": _kind_of_claim(entry) or entry.mechanism}
        if nothing:
            status = "void"
            text = (f"{who} claims: {claim} Host check: the release changes no column, so every original value is "
                    "released; this claim protects nothing.")
        elif _kind_of_claim(entry) is not None and s is not None:
            k = _claimed_k(entry)
            columns = _claim_columns(entry, s["columns"], original)
            own_outcome = next(o for o in outcomes if o.index == entry.step)
            # the claim is the step's: checked on the values it released, never on a later step's
            # a step run within groups (``within``) is checked within them, as within strata
            groups = getattr(own_outcome, "within_groups", None)
            grouped = {} if groups is None else {"\0within": groups}
            at = (*extra, *grouped)
            own = _k_check(_step_values(outcomes, own_outcome, original, released, extra).assign(**grouped),
                           columns, at, k)
            on_file = _k_check(released.assign(**grouped), columns, at, k)
            smallest, small = own["min_group_size"], own["records_in_small_groups"]
            verbatim = int(_verbatim(original, released, columns).sum())
            later = on_file["holds"] != own["holds"] or on_file["min_group_size"] != smallest
            # the words say which values were judged when they are not the released file's
            on = f"the values step {entry.step} released" if later else "the released data"
            rows = f"identical rows of the values step {entry.step} released" if later else "identical released rows"
            record.update(k=k, columns=list(columns), min_group_size=smallest, records_in_small_groups=small,
                          checked_on=on)
            if later:  # a later step or the host's rounding changed them: what the released file holds
                record.update(released_min_group_size=on_file["min_group_size"],
                              released_records_in_small_groups=on_file["records_in_small_groups"],
                              holds_on_released_file=on_file["holds"])
            if not dp_release:
                record["verbatim_records"] = verbatim
            holes = own["_holes"]
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
                            f"values of {_cols(columns)} are missing across the released file, every stratum "
                            f"included): every released record agrees, on the columns both observe, with at least "
                            f"{matching} released records (k = {k}). Counting identical rows only (the "
                            f"missingness pattern as part of the row), the smallest group has {smallest} record(s): "
                            "which values are missing is released and is not protected." + after)
                elif own["holds"]:
                    status = "verified"
                    text = (f"{who} claims: {claim} Verified by the host"
                            + (f" on the values step {entry.step} released: every combination" if later else
                               ": every released combination")
                            + f" of {_cols(columns)} is shared by at least {smallest} records (k = {k})"
                            + (f", a missing value counted as a value of its own ({holes} are missing across the released file)"
                               if holes else "") + "." + after)
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
        broken = [(rule, bad, judged) for rule, columns, bad, judged in broken_rules
                  if s is not None and columns and columns <= set(s["columns"])]
        if broken and status != "void":
            text += (" Host check of the edit rules over these columns on the released file: "
                     + "; ".join(f"{rule!r} is violated by {bad} of {judged} released records"
                                 for rule, bad, judged in broken)
                     + " (see the host's edit-rule entries): whatever this claim says of these rules does not hold "
                       "on the released file.")
            record["violated_rules"] = [rule for rule, _, _ in broken]
        record["status"] = status
        checks["claims"].append(record)
        context.ledger._replace(attrs.evolve(entry, statement=text, status=status))

    return checks


#: The k of the key figures when no step claims one (sdcMicro's freqCalc reports cells below 2, 3 and 5).
DEFAULT_KEY_K = 3
#: The verdict of a recipe without steps (an assessment of the original file).
ASSESSMENT = ("ASSESSMENT ONLY, NOTHING PROTECTED: the recipe has no steps, so the release is the original file "
              "unchanged and no guarantee of any kind is claimed; the figures measure the original's risk.")


def key_figures(released: pd.DataFrame, keys: Sequence[str], strata: Sequence[str], k: int) -> dict[str, Any]:
    """The risk figures of the declared keys on the released file, measured
    by the host: key cells are the combinations of ``keys`` within each
    stratum; ``sample_uniques`` the records alone in their cell,
    ``records_below_k`` the records in a cell smaller than ``k`` (a missing
    value counted as a value of its own, with sdcMicro's matching count
    beside it when a value is missing), and ``expected_reidentifications``
    the sum over records of ``1 / f_k`` (``f_k`` the records sharing the
    record's cell: the number of cells), the expected number of records an
    intruder who knows who is in the file re-identifies by matching their
    keys; no sampling weights are used (the ``individual-risk`` evaluator
    gives sdcMicro's weighted estimate)."""
    keys = [str(c) for c in keys]
    checked = _k_check(released, keys, tuple(strata), k)
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
    expected = (f"expected re-identifications by an intruder who knows who is in the file: "
                f"{figures['expected_reidentifications']:.6g} (the sum over records of 1/f, f the records sharing "
                "the record's keys; no sampling weights)")
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
                       "(columns released as in the original without a role, and ids, are not counted).")
    return text + (f". The released file is NOT k-anonymous with k = {k} (the largest k a step claims): "
                   f"{whole['records_in_small_groups']} of {n} records are in groups smaller than {k}"
                   + (f" (with a missing value counted as matching any value, {whole['records_with_few_matches']} "
                      f"match fewer than {k})" if "records_with_few_matches" in whole else "") + ".")


def _written(outcome: Any) -> set[str]:
    """The columns a step wrote: a masker's or noise step's columns, a clusterer's label column."""
    if outcome.kind == "clusterers":
        return {str(outcome.output)} if getattr(outcome, "output", None) else set()
    return {str(c) for c in outcome.columns}


def _qualify_dp_inputs(context: PrivacyContext, outcomes: Sequence[Any]) -> None:
    """Qualify the DP statements of a step whose input or output another step
    touched without differential privacy. A DP statement is about its step:
    its input (neighbouring inputs differ in one row) and what it released.

    * When an earlier step that no DP statement covers wrote a column the
      step reads (a microaggregation's group means, say), one original record
      can change many rows of that input, so the statement does not hold
      between data sets that differ in one record.
    * When a later such step rewrote a column the step released, the
      released file holds that step's values, not this one's (a
      microaggregation grouping on a column released as in the original
      makes each noisy value depend on other records' original values).

    The host says so in the entry (the verdict already gives no DP guarantee
    for such a release)."""
    dp = [e for e in context.ledger.entries if e.kind == "dp"]

    def named(steps: Sequence[Any]) -> str:
        return ", ".join(f"step {o.index} ({o.name})" if o.id == o.name else f"step {o.index} ({o.id}, {o.name})"
                         for o in steps)

    for entry in dp:
        own = next((o for o in outcomes if o.index == entry.step), None) if entry.step is not None else None
        if own is None:
            continue
        read = {str(c) for c in own.columns}
        note = ""
        if not _covered(own, dp, outcomes):
            what = (f"the label column {own.output!r}" if own.kind == "clusterers"
                    else f"the values of {_cols([str(c) for c in own.columns])}")
            note += (f" Host note: this statement does not cover {what} that this step released ({own.name} "
                     f"declares that its DP entries do not cover its {_output_kind(own)}), so the released file is "
                     "not differentially private; the statement holds for what it names only.")
        earlier = [o for o in outcomes if o.index < own.index and _written(o) & read and not _covered(o, dp, outcomes)]
        if earlier:
            columns = [str(c) for c in own.columns if any(str(c) in _written(o) for o in earlier)]
            note += (f" Host note: the values of {_cols(columns)} this step was given were written by {named(earlier)} "
                     "without differential privacy, so this statement holds between inputs of this step that differ "
                     "in one row, not between data sets that differ in one original record: a value computed from "
                     "several records (such as a group mean) can change in many rows when one record changes.")
        wrote = set() if own.kind == "clusterers" else read
        later = [o for o in outcomes if o.index > own.index and o.kind != "clusterers" and _written(o) & wrote
                 and not _covered(o, dp, outcomes)]
        if later:
            columns = [str(c) for c in own.columns if any(str(c) in _written(o) for o in later)]
            note += (f" Host note: {named(later)} then replaced the values of {_cols(columns)} without differential "
                     "privacy, so the released file holds that step's values of them: this statement is about the "
                     "values this step released, not about the released file's.")
        if note:
            context.ledger._replace(attrs.evolve(entry, statement=(entry.statement or "") + note))


def _joined(items: Sequence[str]) -> str:
    seen: list[str] = []
    for item in items:
        item = (item or "").strip().rstrip(".")
        if item and item not in seen:
            seen.append(item)
    return "; ".join(seen)


#: What the host measures by comparing released with original values: kept in
#: ``release.verification`` for the caller, left out of every statement and
#: report of a differentially private release.
COMPARED = ("verbatim_by_step", "verbatim_released", "verbatim_records")


def _shown(measured: Mapping[str, Any], dp_release: bool) -> dict[str, Any]:
    """``measured`` without the counts that compare released with original
    values when the release is differentially private (and without private keys)."""
    return {k: v for k, v in measured.items() if not k.startswith("_") and not (dp_release and k in COMPARED)}


def _dp_structured(entries: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> bool:
    """Whether the verdict can call the release differentially private, from
    the ledger and the steps alone (never from the values): some DP entry, no
    leak, and every step spent through the accountant."""
    dp = [e for e in entries if e.kind == "dp"]
    return bool(dp) and not any(e.kind == "leak" for e in entries) and all(_covered(o, dp, outcomes) for o in outcomes)


def _output_kind(outcome: Any) -> str:
    """What a step releases into the file: ``"labels"`` (a clusterer's label
    column) or ``"values"`` (the columns a masker or noise step writes)."""
    return "labels" if outcome.kind == "clusterers" else "values"


def _covered(outcome: Any, dp: Sequence[LedgerEntry], outcomes: Sequence[Any] = ()) -> bool:
    """Whether the columns a step released are ones its DP entries speak for:
    it made some, and its component declares that they cover what it
    releases (``dp_output``, :func:`~privclust.components.dp_outputs`): the
    labels for a clusterer, the values for a masker or noise step. Not
    microaggregation's group means (computed from the records whatever a
    nested DP clusterer spent), nor dp-dpcl's labels (computed from raw
    distances whatever its density vector spent). Or the step is
    post-processing (:func:`_post_processing`)."""
    return ((any(e.step == outcome.index for e in dp) and _output_kind(outcome) in dp_outputs(outcome.component))
            or _post_processing(outcome, dp, outcomes))


def _last_writer(outcomes: Sequence[Any], column: str, before: int) -> Any:
    """The last step before step ``before`` that wrote ``column`` (values or a label column), or ``None``."""
    return next((o for o in reversed(outcomes) if o.index < before and column in _written(o)), None)


def _post_processing(outcome: Any, dp: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> bool:
    """Whether a step computed what it released from DP-released values
    alone: every column it reads was last written, before it, by a step whose
    release is covered. A step is given only its own columns (the runner's
    view; no weight, the strata public by declaration), so its output is a
    function of DP releases and public facts: post-processing, covered by
    the statements of the steps it read (a clusterer's labels on columns a
    noise step wrote first, a microaggregation of noisy values)."""
    if not outcomes or not outcome.columns:
        return False
    for c in outcome.columns:
        writer = _last_writer(outcomes, str(c), outcome.index)
        if writer is None or not _covered(writer, dp, outcomes):
            return False
    return True


def post_processed(entries: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> list[str]:
    """The releases of steps covered only as post-processing of earlier DP
    releases, as the verdict names them (``"the label column 'cluster' of
    step 1 (dpc), computed from those DP values only"``)."""
    dp = [e for e in entries if e.kind == "dp"]
    out = []
    for o in outcomes:
        if _post_processing(o, dp, outcomes) and not (any(e.step == o.index for e in dp)
                                                       and _output_kind(o) in dp_outputs(o.component)):
            what = (f"the label column {o.output!r}" if o.kind == "clusterers"
                    else f"the values of {_cols([str(c) for c in o.columns])}")
            out.append(f"{what} of step {o.index} ({o.name}), computed from those DP values only (post-processing)")
    return out


def _uncovered_reason(outcome: Any, dp: Sequence[LedgerEntry]) -> str:
    """Why the columns a step released carry no differential privacy, naming them."""
    o = outcome
    what = (f"the label column {o.output!r}" if o.kind == "clusterers" else f"the values of {_cols(o.columns)}")
    own = [e for e in dp if e.step == o.index]
    text = f"step {o.index} ({o.id}, {o.name}) released {what} without differential privacy"
    if not own:
        return text
    covers = _joined([e.covers or "" for e in own])
    outside = _joined([e.not_covered or "" for e in own])
    thing = "labels" if o.kind == "clusterers" else "values it writes"
    return text + (f" (its DP statements cover {covers or 'what they name'}, not the {thing}, which {o.name} "
                   "computes from the records themselves" + (f"; they state as not covered: {outside}"
                                                              if outside else "") + ")")


def no_guarantee_reasons(entries: Sequence[LedgerEntry], outcomes: Sequence[Any],
                         checks: Mapping[str, Any], *, spent: tuple[float, float]) -> list[str]:
    """Why the release is not differentially private, one reason a clause
    (empty: the verdict states the composed DP guarantee). The one place the
    host decides it: the verdict and ``privclust compare`` read it.
    ``spent`` is the accountant's composed (epsilon, delta) of ``entries``:
    an infinite epsilon, or a delta of 1 or more, guarantees nothing."""
    dp = [e for e in entries if e.kind == "dp"]
    leaks = [e for e in entries if e.kind == "leak"]
    reasons: list[str] = []
    if not checks.get("changed_columns"):
        reasons.append("the release changes no column, so every original value is released")
    if not dp:
        reasons.append("no step is differentially private")
    if leaks:
        names = _joined([e.mechanism or "a parameter" for e in leaks]).replace("; ", ", ")
        reasons.append(f"parameters were taken from the data without spending budget ({names}), which voids "
                       "differential privacy")
    if dp:
        eps, delta = spent
        if not math.isfinite(eps):
            reasons.append(f"the composed epsilon is {eps!r} (the steps' epsilons add up beyond the largest "
                           "floating-point number), which bounds nothing")
        if not delta < 1:
            reasons.append(f"the composed delta is {at_least(delta)}, not below 1 (the bound holds with probability "
                           "at most 1 - delta), which guarantees nothing")
        reasons += [_uncovered_reason(o, dp) for o in outcomes if not _covered(o, dp, outcomes)]
    return reasons


def guarantees_dp(entries: Sequence[LedgerEntry], accountant: Accountant, outcomes: Sequence[Any],
                  checks: Mapping[str, Any]) -> bool:
    """Whether the verdict on these entries is a differential-privacy
    guarantee (no reason of :func:`no_guarantee_reasons` applies): what the
    reports and ``privclust compare`` say about the spent epsilon."""
    return not no_guarantee_reasons(entries, outcomes, checks, spent=accountant.total(entries))


def dp_claimants(entries: Sequence[LedgerEntry]) -> str:
    """Whose DP statements a guarantee rests on, as the verdict names them:
    ``"step 0 (laplace), step 2 (gaussian)"`` (the host composes them but
    cannot check a sensitivity). ``privclust compare``'s ``dp_claimed_by``
    column reads it too."""
    return _joined([f"step {e.step} ({e.component})" if e.step is not None else (e.component or "a component")
                    for e in entries if e.kind == "dp"]).replace("; ", ", ")


#: In a DP verdict's "not covered": the host decides which columns changed by content (a release equal to its
#: input is never called private), one fact about the original values that no DP statement covers.
UNCHANGED_CHECK = ("the host's check of which columns the release changed (a column is changed when some released "
                   "value differs from the original one; a release that changes none is never called private)")

#: The last of a DP verdict's "not covered": the epsilon is this run's; releases of the same records compose.
OTHER_RELEASES = "any other release made from the same records (the epsilons of all of them add up)"

#: What a seeded run's DP verdict adds: the noise is a function of the seed, so its secrecy is the guarantee's.
SEEDED_CAVEAT = ("The run was seeded: these statements hold only while the seed stays secret and cannot be guessed, "
                 "since anyone who has it can draw the same noise again and subtract it (a small seed is found by "
                 "trying seeds in turn); publish only a release made without a seed, or with a secret random one.")


def seeded_draws(steps: str) -> str:
    """What the verdict of a seeded run without a DP guarantee adds when
    ``steps`` drew randomness."""
    return (f"The run was seeded: whoever has the seed can redraw the random choices of {steps}, such as noise or a "
            "fuzzy microaggregation's draw of centres, which the statements above take to be unknown; publish only "
            "a release made without a seed, or with a secret random one.")


def random_step_names(outcomes: Sequence[Any], indices: Sequence[int]) -> tuple[str, ...]:
    """``"step i (component)"`` for the steps among ``outcomes`` that drew randomness."""
    chosen = set(indices)
    return tuple(f"step {o.index} ({o.name})" for o in outcomes if o.index in chosen)


def _whole_file_extras(checks: Mapping[str, Any]) -> list[str]:
    """The verdict's first words after its DP sentence when the whole released
    file is not k-anonymous at the largest k a step claims: no k-anonymity of
    some columns is stated before it."""
    whole = checks.get("whole_file") or {}
    k = whole.get("k")
    if k is None or whole.get("holds") or not checks.get("changed_columns"):
        return []
    if whole.get("holds") is None:
        return [f"Whether the released file is k-anonymous with k = {k} is undecided: over {WHOLE_FILE_SCOPE} "
                f"({_cols(whole['columns'])}), counting identical rows, {whole['records_in_small_groups']} of "
                f"{checks['records']} records are in groups smaller than {k}, but {UNDECIDED_MATCHING}."]
    smallest = int(whole.get("min_group_size") or 0)
    if smallest >= 2:  # what the file does hold, before what it does not (a step run within the keys' groups)
        return [f"The released file is k-anonymous with k = {smallest}, verified by the host over {WHOLE_FILE_SCOPE} "
                f"({_cols(whole['columns'])}: every combination is shared by at least {smallest} records), but NOT "
                f"with k = {k}, the largest k a step claims: {whole['records_in_small_groups']} of "
                f"{checks['records']} records are in groups of identical rows smaller than {k}."]
    return [f"The released file is NOT k-anonymous with k = {k}: over {WHOLE_FILE_SCOPE} "
            f"({_cols(whole['columns'])}), {whole['records_in_small_groups']} of {checks['records']} "
            f"records are in groups of identical rows smaller than {k} ({_records(whole['unique_records'])} unique)"
            + (f"; with a missing value counted as matching any value, {whole['records_with_few_matches']} match "
               f"fewer than {k}" if "records_with_few_matches" in whole else "") + "."]


def _claim_scope(claim: Mapping[str, Any], broken_file: bool) -> str:
    """Where a verified claim holds, as the verdict says it: on the values its
    step released when a later step changed them, and for its columns only
    when the whole file is not k-anonymous."""
    if claim.get("holds_on_released_file") is False:
        return (f" on {claim.get('checked_on')} only (a later step or the host's rounding changed them: NOT on the "
                "released file)")
    where = f" on {claim.get('checked_on')}" if "holds_on_released_file" in claim else ""
    return where + (" for these columns only" if broken_file else "")


def verdict(ledger: Ledger, accountant: Accountant, outcomes: Sequence[Any], checks: Mapping[str, Any], *,
            strata: Sequence[str] = (), seeded: bool = False, randomised: Sequence[str] = ()) -> str:
    """The release's verdict in one sentence (plus what the host verified).

    ``seeded``: the run drew its randomness from a given seed; a DP verdict
    then says that it holds only while the seed stays secret
    (:data:`SEEDED_CAVEAT`), any other verdict that whoever has the seed can
    redraw the random choices of the ``randomised`` steps (named
    ``"step i (component)"``, :func:`seeded_draws`)."""
    entries = ledger.entries
    dp = [e for e in entries if e.kind == "dp"]
    reasons = no_guarantee_reasons(entries, outcomes, checks, spent=accountant.total(entries))
    extras = _whole_file_extras(checks)
    broken_file = bool(extras)
    for claim in checks.get("claims", ()):
        where = _claim_scope(claim, broken_file)
        if claim.get("guarantee") == "k-anonymity" and claim.get("status") == "verified" \
                and "min_matching_records" in claim:
            extras.append(f"Verified by the host{where}: k-anonymity with k = {claim['k']} of "
                          f"{_cols(claim['columns'])} with a missing value counted as matching any value (sdcMicro's "
                          f"convention: every released record matches at least {claim['min_matching_records']} records; "
                          f"identical rows, the missingness pattern included, form groups of "
                          f"{claim['identical_min_group_size']} or more).")
        elif claim.get("guarantee") == "k-anonymity" and claim.get("status") == "verified":
            extras.append(f"Verified by the host{where}: k-anonymity with k = {claim['k']} of "
                          f"{_cols(claim['columns'])} (every "
                          + ("" if "holds_on_released_file" in claim else "released ") + "combination is "
                          "shared by at least "
                          f"{claim['min_group_size']} records).")
        elif claim.get("guarantee") == "k-anonymity" and claim.get("status") == "refuted" and claim.get("k") is None:
            extras.append(f"{claim['component']} claims k-anonymity without a k the host can check: not verified.")
        elif claim.get("guarantee") == "k-anonymity" and claim.get("status") == "refuted":
            extras.append(f"{claim['component']} claims k-anonymity with k = {claim.get('k')}, which does NOT hold "
                          f"on {claim.get('checked_on', 'the released data')} ({claim['records_in_small_groups']} "
                          "records in smaller groups).")
        elif claim.get("guarantee") == "probabilistic k-anonymity" and claim.get("status") == "claimed":
            extras.append(f"{claim['component']} claims probabilistic k-anonymity"
                          + (f" (k = {claim['k']})" if claim.get("k") is not None else " without a k")
                          + (f"; {claim['verbatim_records']} of {checks['records']} records are released verbatim."
                             if "verbatim_records" in claim else "."))
    stated = {c.get("verbatim_records") for c in checks.get("claims", ())
              if c.get("guarantee") == "probabilistic k-anonymity" and c.get("status") == "claimed"}
    # a differentially private release states nothing that compares released with original values
    if not checks.get("dp_release") and checks.get("changed_columns") and checks.get("verbatim_records") \
            and checks.get("verbatim_records") not in stated:
        extras.append(f"{checks['verbatim_records']} of {checks['records']} records are released verbatim (identical "
                      f"on the columns the steps worked on to an original record, its own or another's).")
    kept_missing = checks.get("missing_values", 0) - checks.get("values_set_missing", 0)
    if kept_missing:
        extras.append(f"{kept_missing} values are released missing as in the original: the missingness "
                      "pattern is not protected.")
    if checks.get("values_set_missing"):
        extras.append(f"{checks['values_set_missing']} values were set missing by the steps (suppressed).")
    keys = [key_figures_text(checks["keys"])] if checks.get("keys") else []
    if checks.get("assessment"):  # a recipe without steps: the original unchanged, and its key figures
        return " ".join([ASSESSMENT, *keys])
    if reasons:
        text = "No differential-privacy guarantee: " + "; ".join(reasons) + "."
        left = [c if c not in strata else f"{c} (a public stratum column)"
                for c in checks.get("unchanged_columns", ())]
        if left and checks.get("changed_columns"):
            text += f" Released as in the original: {_cols(left)}."
        if seeded and randomised:
            extras.append(seeded_draws(_joined(list(randomised)).replace("; ", ", ")))
    else:
        eps, delta = accountant.total(entries)
        relation_of = getattr(accountant, "relation", None)
        relation = relation_of(entries) if callable(relation_of) else None
        relation = relation or _joined([e.relation or "" for e in dp]) or "the relation each entry states"
        if strata:
            relation += f" (with the public stratum column(s) {_cols(strata)} fixed)"
        covers = _joined([e.covers or "" for e in dp] + post_processed(entries, outcomes))
        not_covered = [e.not_covered or "" for e in dp]
        left = [c for c in checks.get("unchanged_columns", ()) if c not in strata]
        if left:
            not_covered.append(f"the columns released as in the original ({_cols(left)})")
        if strata:
            not_covered.append(f"the public stratum column(s) {_cols(strata)}, their values and the size of each "
                               "stratum")
        not_covered += [UNCHANGED_CHECK, OTHER_RELEASES]
        # the host composes the entries; what each states (sensitivity, relation, coverage) is its component's
        who = dp_claimants(dp)
        composer = ("the host composes them but" if type(accountant) is BasicAccountant else
                    f"the plugin accountant {accountant_name(accountant)} composes them (the total is its claim too), "
                    "and the host")
        text = (f"ε-differentially private (ε = {at_least(eps, 6)}, δ = {at_least(delta, 3)}) under {relation} "
                f"for {covers}; "
                f"not covered: {_joined(not_covered) or 'nothing else is released'}. These DP statements are the "
                f"claims of {who}: {composer} cannot check a sensitivity (privclust audit tests one empirically).")
        if seeded:
            text += " " + SEEDED_CAVEAT
    # the declared keys first (how people are re-identified in a survey file), except before a DP guarantee
    opening = [text, *keys] if not reasons else [*keys, text]
    return " ".join(dict.fromkeys([*opening, *extras]))


def snapshot(registry: Any, outcomes: Sequence[Any], constraints: Sequence[Any],
             evaluations: pd.DataFrame) -> dict[str, Any]:
    """Provenance at run time: which plugin, distribution and version provided
    each component, the installed plugins, each evaluator's disclosive
    metrics and the explanations and units of their figures. The Release
    reports these, never the live registry."""
    def info(kind: str, cls: type) -> dict[str, str]:
        found = registry.provider(kind, cls)  # by class: a replaced component chosen back is credited rightly
        if found is None:
            return {"plugin": "?", "distribution": "?", "version": "?"}
        return {"plugin": found.plugin, "distribution": found.distribution, "version": found.version}

    disclosive: dict[str, list[str]] = {}
    descriptions: dict[str, dict[str, list[str]]] = {}
    for name in dict.fromkeys(evaluations["evaluator"]) if len(evaluations) else ():
        try:
            cls = registry.get("evaluators", name)
        except PrivclustError:
            continue
        disclosive[str(name)] = [str(p) for p in capability(cls, "disclosive_metrics") or ()]
        described = capability(cls, "metric_descriptions") or {}
        if isinstance(described, Mapping):
            descriptions[str(name)] = {str(k): [str(x) for x in v] for k, v in described.items()
                                       if isinstance(v, tuple | list) and len(v) == 2}
    def step_info(o: Any) -> dict[str, Any]:
        out: dict[str, Any] = info(o.kind, type(o.component))
        inner = {location: {"component": getattr(type(c), "name", type(c).__name__), **info(kind, type(c))}
                 for location, kind, c in nested_components(o.component)}
        if inner:  # the components it ran inside it, each credited to the plugin that provided it
            out["nested"] = inner
        return out

    return {
        "steps": [step_info(o) for o in outcomes],
        "constraints": [{"rules": list(h.describe()), **info("constraint_handlers", type(h))}
                        for h in constraints],
        "plugins": [attrs.asdict(p) for p in registry.plugins()],
        "disclosive": disclosive,
        "metric_descriptions": descriptions,
        "host": HOST,
    }

