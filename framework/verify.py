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
:mod:`~privclust.given_back` (columns that give back changed values),
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

from .accounting import NothingProtectedWarning, PrivacyContext
from .comparison import exact_codes, values_equal
from .comparison import same_values as _same
from .comparison import verbatim as _verbatim
from .coverage import COMPARED, dp_claimants, guarantees_dp, no_guarantee_reasons, post_processed
from .coverage import dp_structured as _dp_structured
from .coverage import qualify_dp_inputs as _qualify_dp_inputs
from .coverage import qualify_vacuous_delta as _qualify_vacuous_delta
from .coverage import shown as _shown
from .given_back import DERIVED_RECORDS, KEYS_BACK_MIN_CELLS, KEYS_BACK_SHARE, derived_columns, keys_given_back
from .given_back import numeric as _numeric
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
    # Every column released as in the original is a source, whatever its role: the weight, the ids and the strata
    # (a design weight with one value per region gives back every suppressed region: a red-team audit, rt21 F1) and
    # the keys too. A key released unchanged is counted in the k-anonymity of the keys, but that figure says nothing
    # of what the key tells of the other columns: `birth_year` declared a key gave back the DP `age` exactly, and an
    # unchanged key `region_code` a suppressed `region`, with no word in the verdict (rt22 F1). No role is left out:
    # a column is never its own source (the changed and the unchanged columns are disjoint), and what a source
    # tells of a target is the same whatever the recipe calls it.
    sources = list(unchanged)
    checks["derived"] = derived_columns(original, [c for c in changed if c in protected], sources, released)
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
