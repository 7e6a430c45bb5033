"""The release's verdict in one sentence, computed from the ledger and the
host's checks: "ε-differentially private (...) under <relation> for <what>;
not covered: ..." or "No differential-privacy guarantee: <reasons>",
followed by what the host verified (first, when the whole file is not
k-anonymous at the claimed k). Differential privacy is decided per released
column (:mod:`~privclust.coverage`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .accountants import ADD_REMOVE, Accountant, BasicAccountant, accountant_name, group_delta, relation_kind
from .coverage import dp_claimants, no_guarantee_reasons, post_processed, post_processed_steps
from .kanonymity import UNDECIDED_MATCHING, WHOLE_FILE_SCOPE, key_figures_text
from .ledger import Ledger, LedgerEntry, Origin, at_least
from .wording import column_list as _cols
from .wording import joined as _joined
from .wording import records_are as _records

__all__ = [
    "ASSESSMENT",
    "DERIVED",
    "DERIVED_CLOSER",
    "DERIVED_CLOSER_R2",
    "DERIVED_R2",
    "OTHER_RELEASES",
    "SEEDED_CAVEAT",
    "SEEDED_ORDER",
    "SEED_ADVICE",
    "whole_file_relation",
    "UNCHANGED_CHECK",
    "derived_found",
    "derived_text",
    "given_back",
    "random_step_names",
    "repeated_draws",
    "seeded_draws",
    "verdict",
]

#: The verdict of a recipe without steps (an assessment of the original file).
ASSESSMENT = ("ASSESSMENT ONLY, NOTHING PROTECTED: the recipe has no steps, so the release holds every original "
              "record unchanged and no guarantee of any kind is claimed; the figures measure the original's risk.")

#: In a DP verdict's "not covered": the host decides which columns changed by content (a release equal to its
#: input is never called private), one fact about the original values that no DP statement covers.
UNCHANGED_CHECK = ("the host's check of which columns the release changed (a column is changed when some released "
                   "value differs from the original one; a release that changes none is never called private)")

#: The last of a DP verdict's "not covered": the epsilon is this run's; releases of the same records compose.
OTHER_RELEASES = "any other release made from the same records (the epsilons of all of them add up)"

#: What a seeded run's verdict says of the released rows' order: the host draws it from the run's randomness, so the
#: seed redraws it, and with it every record's input position.
SEEDED_ORDER = ("the order of the released rows, putting every record back at its input position (which links each "
                "row to its record, or gives its rank when the input was sorted by a column)")

#: The advice that closes a seeded run's sentence.
SEED_ADVICE = ("publish only a release made without a seed, or keep the seed secret like a key (a random one: a small "
               "seed is found by trying seeds in turn)")

#: What a seeded run's DP verdict adds: the noise and the rows' order are functions of the seed, so its secrecy is
#: the guarantee's.
SEEDED_CAVEAT = ("The run was seeded: these statements hold only while the seed stays secret and cannot be guessed, "
                 "since anyone who has it can draw the same noise again and subtract it, and redraw "
                 f"{SEEDED_ORDER}; {SEED_ADVICE}.")


#: The mechanism of the host's ``verified`` entry on columns released as in the original that give back the original
#: values of a changed column (:func:`privclust.verify.derived_columns`); the verdict reads its details.
DERIVED = "derived columns"

#: The R^2 (cross-fitted nearest-neighbour regression) at or above which columns released as in the original are
#: said to give back a changed column's original values.
DERIVED_R2 = 0.99
#: The second tier (red-team audit rt22 F3): columns released as in the original that predict a changed column's
#: original values with R^2 of at least :data:`DERIVED_CLOSER_R2` and an RMS error below :data:`DERIVED_CLOSER` times
#: the RMS error of its released values against them give it back closer than the release does.
DERIVED_CLOSER = 0.5
#: The R^2 the second tier (:data:`DERIVED_CLOSER`) asks for besides.
DERIVED_CLOSER_R2 = 0.9


def _r2(value: float) -> str:
    """An R^2 to three decimals, rounded down (0.9996 reads 0.999, never 1)."""
    return f"{math.floor(value * 1000) / 1000:.3f}"


def _errors(values: float | Sequence[float]) -> str:
    """An RMS error to three significant digits (``"4.08"``, ``"276"``), or the range of those of the strata
    (``"3.9 to 4.2"``)."""
    def one(x: float) -> str:
        if x == 0.0 or not math.isfinite(x):
            return f"{x:g}"
        digits = max(0, 2 - math.floor(math.log10(abs(x))))
        return f"{x:.{digits}f}"
    if isinstance(values, (int, float)):
        return one(float(values))
    low, high = one(min(values)), one(max(values))
    return low if low == high else f"{low} to {high}"


def derived_found(entries: Sequence[LedgerEntry]) -> list[dict[str, Any]]:
    """The changed columns whose original values columns released as in the original give back, from the host's
    :data:`DERIVED` entries (one of :func:`privclust.run`; one a stratum of :func:`privclust.run_dataset`): per
    column, the columns that give it back and the lowest and highest R^2 measured (a numeric column), or the
    changed cells and those given back, added over the entries (a key's suppressed or replaced cells read off the
    released rows: :func:`privclust.verify.keys_given_back`), in the order first found."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.kind != "verified" or entry.mechanism != DERIVED or entry.origin is not Origin.HOST:
            continue
        for found in entry.details.get("derived", ()):
            item = merged.setdefault(found["column"], {"column": found["column"], "given_back_by": [],
                                                       "r2": [], "parts": 0})
            item["given_back_by"] += [c for c in found["given_back_by"] if c not in item["given_back_by"]]
            if "r2" in found:
                item["r2"].append(float(found["r2"]))
                if "rms" in found:  # given back closer than the release (below DERIVED_R2)
                    item.setdefault("rms", []).append(float(found["rms"]))
                    item.setdefault("released_rms", []).append(float(found["released_rms"]))
            else:
                item["cells"] = item.get("cells", 0) + int(found["cells"])
                item["given_back"] = item.get("given_back", 0) + int(found["given_back"])
                if "read_by" in found and found["read_by"] not in item.setdefault("read_by", []):
                    item["read_by"].append(found["read_by"])
                changes = [*item.get("changes", []), *str(found["change"]).split(" or ")]
                item["changes"] = list(dict.fromkeys(changes))
            item["parts"] += 1
    out = []
    for item in merged.values():
        if item["r2"]:
            item.update(r2_low=min(item["r2"]), r2_high=max(item["r2"]))
        if "cells" in item:
            item.update(share=item["given_back"] / item["cells"], change=" or ".join(item.pop("changes")))
        if not item["r2"]:
            del item["r2"]
        out.append(item)
    return out


def given_back(found: Sequence[Mapping[str, Any]]) -> str:
    """``"a (R^2 0.999 by nearest neighbours) and b (R^2 0.998)"``; a key read off the released rows:
    ``"region (18 of 18 suppressed values, a share of 1.000, read off the released rows that show it)"``, or
    ``"region (at least 71 of 135 suppressed values, a share of at least 0.525, read off the released rows that
    show it, through hid // 100000)"``: a reading off the released rows reads no category that no released row
    shows, so short of every cell the count is a lower bound."""
    parts = []
    first_r2 = True
    for item in found:
        where = f" in {item['parts']} strata" if item.get("parts", 1) > 1 else ""
        if "r2" not in item and "r2_low" not in item:
            bound = "at least " if item["given_back"] < item["cells"] else ""
            read_by = item.get("read_by") or []  # one part of an identifier (a record), or those of the strata
            through = f", through {_cols([read_by] if isinstance(read_by, str) else read_by)}" if read_by else ""
            parts.append(f"{item['column']} ({bound}{item['given_back']} of {item['cells']} {item['change']} values, "
                         f"a share of {bound}{_r2(item['share'])}, read off the released rows that show it"
                         f"{through}{where})")
            continue
        low, high = item.get("r2_low", item.get("r2")), item.get("r2_high", item.get("r2"))
        figure = _r2(low) if _r2(low) == _r2(high) else f"{_r2(low)} to {_r2(high)}"
        if "rms" in item:  # the second tier: closer than the released values, both errors stated
            parts.append(f"{item['column']} to an RMS error of {_errors(item['rms'])} (R^2 {figure}"
                         f"{' by nearest neighbours' if first_r2 else ''}{where}), closer than the released "
                         f"{item['column']} (RMS error {_errors(item['released_rms'])})")
        else:
            parts.append(f"{item['column']} (R^2 {figure}{' by nearest neighbours' if first_r2 else ''}{where})")
        first_r2 = False
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _sources(found: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> list[str]:
    """The columns that give back any of ``found``, in the order of ``order`` (the file's) where they are in it."""
    named = list(dict.fromkeys(c for item in found for c in item["given_back_by"]))
    return [c for c in order if c in named] + [c for c in named if c not in order]


def derived_text(found: Sequence[Mapping[str, Any]], order: Sequence[str] = ()) -> str:
    """The host's words (its ledger entry, the verdict's first sentence) on columns released as in the original
    that give back the original values of changed columns (``order``: the columns in the file's order)."""
    targets = [item["column"] for item in found]
    sources = _sources(found, order)
    return (f"THE FILE GIVES BACK ORIGINAL VALUES: the column{'s' if len(sources) > 1 else ''} released as in the "
            f"original ({_cols(sources)}) give{'' if len(sources) > 1 else 's'} back the original "
            f"{given_back(found)}; whatever this release states of {_cols(targets)} holds for the released values "
            f"only, not for the original values {'these columns disclose' if len(sources) > 1 else 'it discloses'}: "
            f"remove or protect {'those columns' if len(sources) > 1 else 'it'}.")


def seeded_draws(steps: str = "") -> str:
    """What the verdict of a seeded run without a DP guarantee adds: whoever
    has the seed can redraw the random choices of ``steps`` (when any drew
    randomness) and, always, the order of the released rows."""
    choices = (f"the random choices of {steps}, such as noise or a fuzzy microaggregation's draw of centres, which "
               "the statements above take to be unknown, and " if steps else "")
    return f"The run was seeded: whoever has the seed can redraw {choices}{SEEDED_ORDER}; {SEED_ADVICE}."


def repeated_draws(steps: str) -> str:
    """What the verdict of a release without a DP guarantee adds when
    ``steps`` drew randomness (a DP verdict lists :data:`OTHER_RELEASES`
    among what it does not cover): each release is one draw, and draws
    combine."""
    return (f"Not covered: any other release made from the same records with other random draws of {steps}; lined "
            "up record by record (through the columns released as in the original, or an identifier), such releases "
            "combined (a majority vote over each record's categories, an average of its values) undo the random "
            "part: the protection stated here holds for this one release only.")


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


def _weight_extras(checks: Mapping[str, Any]) -> list[str]:
    """What the verdict adds when the sampling weight, released as in the
    original, leaves records below the k the whole file holds (a file that
    does not hold it is already said to be NOT k-anonymous): sdcMicro's
    convention does not count a weight as a quasi-identifier, but an intruder
    who reads the file sees it (``whole_file["weight"]``, rt21 F1)."""
    whole = checks.get("whole_file") or {}
    weight, k = whole.get("weight"), whole.get("k")
    if not whole.get("holds") or not weight or not weight.get("records_in_small_groups") or k is None:
        return []
    how = ("match fewer than" if weight.get("matching") else "are in groups of identical rows smaller than")
    return [f"Not counted in that k: the sampling weight {_cols(weight['columns'])}, released as in the original "
            f"(sdcMicro's convention leaves weights out); counted with the file's columns, "
            f"{weight['records_in_small_groups']} of {checks['records']} records {how} {k} records: mask or "
            "remove it if an intruder could know the weights."]


def _claim_scope(claim: Mapping[str, Any], broken_file: bool, strata: Sequence[str] = ()) -> str:
    """Where a verified claim holds, as the verdict says it: on the values its
    step released when a later step changed them, for its columns only when
    the whole file is not k-anonymous, and in the strata whose step made it
    when some stratum's made none."""
    if claim.get("holds_on_released_file") is False:
        return (f" on {claim.get('checked_on')} only (a later step or the host's rounding changed them: NOT on the "
                "released file)")
    where = f" on {claim.get('checked_on')}" if "holds_on_released_file" in claim else ""
    return where + (" for these columns only" if broken_file else "") + _strata_scope(claim, strata)


def _strata_scope(claim: Mapping[str, Any], strata: Sequence[str], *, holds: bool = True) -> str:
    """``", in the stratum region = 'b' only (...)"`` (``holds``) or ``" of the stratum region = 'b' (...)"``: a
    claim some strata's step did not make is about the records of those that made it
    (:func:`privclust.verify.claimed_in`)."""
    made = claim.get("claimed_in")
    if not made:
        return ""
    label = ", ".join(strata) or "the strata"
    which = " or ".join(repr(t) for t in made)
    noun = "stratum" if len(made) == 1 else "strata"
    others = ", ".join(repr(t) for t in claim.get("not_claimed_in", ()))
    return (f", in the {noun} {label} = {which} only (the step made no such claim in {others})" if holds else
            f" of the {noun} {label} = {which} (the step made no such claim in {others})")


def _there(claim: Mapping[str, Any]) -> str:
    return " there" if claim.get("claimed_in") else ""


def _verbatim_scope(checks: Mapping[str, Any]) -> str:
    """Which original records a released record is compared with to count it verbatim: any (``privclust.run``),
    or those of its stratum (:func:`privclust.run_dataset`, whose tasks each see one stratum)."""
    scope = checks.get("verbatim_scope")
    return f" {scope}" if scope else ""



def whole_file_relation(epsilon: float, delta: float, relation: str) -> tuple[float, float, str]:
    """The (epsilon, delta) and relation of a DP verdict on the released
    file (docs/decisions.md, decision 24). The file has one row per record, so
    it publishes the exact number of records, which is private under
    add/remove one record: releases stated under add/remove hold beside it
    only under replace-one (n public), where an (epsilon, delta) add/remove
    guarantee is a (2 epsilon, (1 + e^epsilon) delta) one (group privacy for
    two records: replacing a record is removing it and adding another).
    Other relations are returned as they are."""
    if relation_kind(relation) != ADD_REMOVE:
        return epsilon, delta, relation
    return (2.0 * epsilon, group_delta(epsilon, delta),
            f"replace-one (the released file shows its number of records, which is private under add/remove: the "
            f"steps' add/remove statements, epsilon {at_least(epsilon, 6)} and delta {at_least(delta, 3)} "
            "together, hold for it under replace-one, counted twice)")


def _undone(derived: Sequence[Mapping[str, Any]], left: Sequence[str]) -> str:
    """What the verdict adds to the columns released as in the original
    (``left``) when some give back the original values of changed columns:
    ``", which give back the original a (R^2 ...): remove or protect them"``
    (or ``", of which rank_a, ratio give back ..."``); empty when none do."""
    sources = [c for c in _sources(derived, left) if c in left]
    if not sources:
        return ""
    which = ", which" if set(sources) == set(left) else f", of which {_cols(sources)}"
    verb = "give" if len(sources) > 1 or which == ", which" else "gives"
    return f"{which} {verb} back the original {given_back(derived)}: remove or protect them"


def verdict(ledger: Ledger, accountant: Accountant, outcomes: Sequence[Any], checks: Mapping[str, Any], *,
            strata: Sequence[str] = (), seeded: bool = False, randomised: Sequence[str] = (),
            provenance: Mapping[str, Any] | None = None) -> str:
    """The release's verdict in one sentence (plus what the host verified).

    ``provenance``: the run's :func:`~privclust.provenance.snapshot`; with
    it, a DP verdict names the plugin of every component that is not a
    built-in among those that may have written its DP statements (the step's
    own and the ones nested in it, such as its noise mechanism:
    :func:`~privclust.coverage.dp_claimants`).

    ``seeded``: the run drew its randomness from a given seed; a DP verdict
    then says that it holds only while the seed stays secret
    (:data:`SEEDED_CAVEAT`), any other verdict that whoever has the seed can
    redraw the random choices of the ``randomised`` steps (named
    ``"step i (component)"``, :func:`seeded_draws`); both, that it redraws
    the released rows' order (:data:`SEEDED_ORDER`), which the host draws
    from the run whatever the steps do.

    ``randomised``: the steps that drew from the run's randomness
    (:attr:`~privclust.PrivacyContext.random_steps`); a verdict without a DP
    guarantee says that other releases of the same records with other draws
    are not covered (:func:`repeated_draws`)."""
    entries = ledger.entries
    dp = [e for e in entries if e.kind == "dp"]
    derived = derived_found(entries) if checks.get("changed_columns") else []
    reasons = no_guarantee_reasons(entries, outcomes, checks, spent=accountant.total(entries))
    extras = _whole_file_extras(checks)
    broken_file = bool(extras)
    for claim in checks.get("claims", ()):
        where = _claim_scope(claim, broken_file, strata)
        if claim.get("guarantee") == "k-anonymity" and claim.get("status") == "verified" \
                and "min_matching_records" in claim:
            extras.append(f"Verified by the host{where}: k-anonymity with k = {claim['k']} of "
                          f"{_cols(claim['columns'])} with a missing value counted as matching any value (sdcMicro's "
                          f"convention: every released record{_there(claim)} matches at least "
                          f"{claim['min_matching_records']} "
                          "records; "
                          f"identical rows, the missingness pattern included, form groups of "
                          f"{claim['identical_min_group_size']} or more).")
        elif claim.get("guarantee") == "k-anonymity" and claim.get("status") == "verified":
            extras.append(f"Verified by the host{where}: k-anonymity with k = {claim['k']} of "
                          f"{_cols(claim['columns'])} (every "
                          + ("" if "holds_on_released_file" in claim else "released ") + "combination"
                          + _there(claim) + " is shared by at least "
                          f"{claim['min_group_size']} records).")
        elif claim.get("guarantee") == "k-anonymity" and claim.get("status") == "refuted" and claim.get("k") is None:
            extras.append(f"{claim['component']} claims k-anonymity without a k the host can check: not verified.")
        elif claim.get("guarantee") == "k-anonymity" and claim.get("status") == "refuted":
            scope = _strata_scope(claim, strata, holds=False)
            extras.append(f"{claim['component']} claims k-anonymity with k = {claim.get('k')}, which does NOT hold "
                          f"on {claim.get('checked_on', 'the released data')}{scope} "
                          f"({claim['records_in_small_groups']} records in smaller groups).")
        elif claim.get("guarantee") == "probabilistic k-anonymity" and claim.get("status") == "claimed":
            extras.append(f"{claim['component']} claims probabilistic k-anonymity"
                          + (f" (k = {claim['k']})" if claim.get("k") is not None else " without a k")
                          + (f"; {claim['verbatim_records']} of {checks['records']} records are released verbatim"
                             + (f" (identical to an original record{_verbatim_scope(checks)})"
                                if _verbatim_scope(checks) else "") + "."
                             if "verbatim_records" in claim else "."))
    extras += _weight_extras(checks)
    stated = {c.get("verbatim_records") for c in checks.get("claims", ())
              if c.get("guarantee") == "probabilistic k-anonymity" and c.get("status") == "claimed"}
    # a differentially private release states nothing that compares released with original values
    if not checks.get("dp_release") and checks.get("changed_columns") and checks.get("verbatim_records") \
            and checks.get("verbatim_records") not in stated:
        extras.append(f"{checks['verbatim_records']} of {checks['records']} records are released verbatim (identical "
                      f"on the columns the steps worked on to an original record{_verbatim_scope(checks)}, its own "
                      "or another's).")
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
            text += f" Released as in the original: {_cols(left)}{_undone(derived, left)}."
        steps = _joined(list(randomised)).replace("; ", ", ")
        if randomised:
            extras.append(repeated_draws(steps))
        if seeded:
            extras.append(seeded_draws(steps))
    else:
        eps, delta = accountant.total(entries)
        relation_of = getattr(accountant, "relation", None)
        relation = relation_of(entries) if callable(relation_of) else None
        relation = relation or _joined([e.relation or "" for e in dp]) or "the relation each entry states"
        eps, delta, relation = whole_file_relation(eps, delta, relation)
        if strata:
            relation += f" (with the public stratum column(s) {_cols(strata)} fixed)"
        covers = _joined([e.covers or "" for e in dp] + post_processed(entries, outcomes))
        # a step whose release is covered as post-processing (a DP clusterer on columns a noise step wrote): its own
        # "not covered" speaks of the records it was given, DP values here (the verdict called its labels DP, then
        # not DP: a red-team audit); its ledger entries keep the text in full
        after = {o.index for o in post_processed_steps(entries, outcomes)}
        not_covered = [e.not_covered or "" for e in dp if e.step not in after]
        left = [c for c in checks.get("unchanged_columns", ()) if c not in strata]
        if left:
            not_covered.append(f"the columns released as in the original ({_cols(left)})" + _undone(derived, left))
        if strata:
            not_covered.append(f"the public stratum column(s) {_cols(strata)}, their values and the size of each "
                               "stratum")
        not_covered += [UNCHANGED_CHECK, OTHER_RELEASES]
        # the host composes the entries; what each states (sensitivity, relation, coverage) is its component's
        who = dp_claimants(dp, outcomes, provenance)
        composer = ("the host composes them but" if type(accountant) is BasicAccountant else
                    f"the plugin accountant {accountant_name(accountant)} composes them (the total is its claim too), "
                    "and the host")
        text = (f"ε-differentially private (ε = {at_least(eps, 6)}, δ = {at_least(delta, 3)}) under {relation} "
                f"for {covers}; "
                f"not covered: {_joined(not_covered) or 'nothing else is released'}. These DP statements are the "
                f"claims of {who}: {composer} cannot check a sensitivity (privclust audit tests one empirically).")
        if seeded:
            text += " " + SEEDED_CAVEAT
    # the declared keys first (how people are re-identified in a survey file), except before a DP guarantee; first of
    # all, that columns released as in the original give back what the rest of the verdict calls protected
    opening = [text, *keys] if not reasons else [*keys, text]
    if derived:
        opening.insert(0, derived_text(derived, checks.get("unchanged_columns", ())))
    return " ".join(dict.fromkeys([*opening, *extras]))
