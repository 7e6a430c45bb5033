"""Which released columns differential privacy covers.

A step's value or label column is covered only when its DP entries are
declared to cover that output (``dp_output``,
:func:`~privclust.components.dp_outputs`), or when the step computed it from
DP-released values alone (post-processing). From these the host decides
whether a release is differentially private (:func:`no_guarantee_reasons`,
:func:`guarantees_dp`: the one place it is decided), whose statements a
guarantee rests on and the plugins they come from (:func:`dp_claimants`),
and qualifies the DP statements of a step whose input or output another
step touched without differential privacy (:func:`qualify_dp_inputs`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .accountants import ADD_REMOVE, Accountant, group_delta, relation_kind
from .components import dp_outputs
from .context import PrivacyContext
from .ledger import LedgerEntry, at_least, exact
from .wording import column_list as _cols
from .wording import joined as _joined

__all__ = [
    "COMPARED",
    "dp_claimants",
    "dp_structured",
    "guarantees_dp",
    "name_text",
    "no_guarantee_reasons",
    "post_processed",
    "post_processed_steps",
    "qualify_dp_inputs",
    "qualify_vacuous_delta",
    "shown",
    "vacuous_delta",
]


#: A name the verdict shows as it is: letters, digits and ``_ . : -``.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:-]+")


def name_text(name: Any) -> str:
    """A plugin's or component's name as the verdict and the reports show it:
    as it is when it is a plain identifier-like token (ASCII letters, digits,
    ``_ . : -``), else quoted (Python ``repr``), so that nothing in a name
    (a parenthesis, a comma, a newline: ``"x), step 7 (gaussian"``) can
    read as the host's words or break a line. Plugin names are not checked
    when a plugin registers (a red-team audit)."""
    text = str(name)
    return text if _PLAIN_NAME.fullmatch(text) else repr(text)


def _written(outcome: Any) -> set[str]:
    """The columns a step wrote: a masker's or noise step's columns, a clusterer's label column."""
    if outcome.kind == "clusterers":
        return {str(outcome.output)} if getattr(outcome, "output", None) else set()
    return {str(c) for c in outcome.columns}


def qualify_dp_inputs(context: PrivacyContext, outcomes: Sequence[Any]) -> None:
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


#: What the host measures by comparing released with original values: kept in
#: ``release.verification`` for the caller, left out of every statement and
#: report of a differentially private release.
COMPARED = ("verbatim_by_step", "verbatim_released", "verbatim_records")


def shown(measured: Mapping[str, Any], dp_release: bool) -> dict[str, Any]:
    """``measured`` without the counts that compare released with original
    values when the release is differentially private (and without private keys)."""
    return {k: v for k, v in measured.items() if not k.startswith("_") and not (dp_release and k in COMPARED)}


def dp_structured(entries: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> bool:
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
    view; no weight, the strata public by declaration) and forms its groups
    within its ``within`` columns (:func:`_read` counts them as read), so
    its output is a function of DP releases and public facts:
    post-processing, covered by the statements of the steps it read (a
    clusterer's labels on columns a noise step wrote first, a
    microaggregation of noisy values)."""
    if not outcomes or not outcome.columns:
        return False
    for c in _read(outcome):
        writer = _last_writer(outcomes, str(c), outcome.index)
        if writer is None or not _covered(writer, dp, outcomes):
            return False
    return True


def _read(outcome: Any) -> tuple[str, ...]:
    """The columns a step's output depends on: its own columns and its ``within`` columns (it forms its groups
    inside each value of those: a microaggregation of noisy values within an original key column changes its groups
    when one record's key changes, a red-team audit)."""
    within = tuple(str(c) for c in (getattr(outcome, "within", ()) or ()) if str(c) not in map(str, outcome.columns))
    return tuple(str(c) for c in outcome.columns) + within


def post_processed_steps(entries: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> list[Any]:
    """The steps whose releases are covered only as post-processing of earlier DP releases (their own DP entries,
    if any, do not cover them: a DP clusterer's labels on columns a noise step wrote first)."""
    dp = [e for e in entries if e.kind == "dp"]
    return [o for o in outcomes if _post_processing(o, dp, outcomes) and not (
        any(e.step == o.index for e in dp) and _output_kind(o) in dp_outputs(o.component))]


def post_processed(entries: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> list[str]:
    """The releases of steps covered only as post-processing of earlier DP
    releases, as the verdict names them (``"the label column 'cluster' of
    step 1 (dpc), computed from those DP values only"``)."""
    out = []
    for o in post_processed_steps(entries, outcomes):
        what = (f"the label column {o.output!r}" if o.kind == "clusterers"
                else f"the values of {_cols([str(c) for c in o.columns])}")
        out.append(f"{what} of step {o.index} ({o.name}), computed from those DP values only (post-processing)")
    return out


def _uncovered_reason(outcome: Any, dp: Sequence[LedgerEntry], outcomes: Sequence[Any]) -> str:
    """Why the columns a step released carry no differential privacy, naming them."""
    o = outcome
    what = (f"the label column {o.output!r}" if o.kind == "clusterers" else f"the values of {_cols(o.columns)}")
    own = [e for e in dp if e.step == o.index]
    text = f"step {o.index} ({o.id}, {o.name}) released {what} without differential privacy"
    within = [c for c in _read(o) if c not in map(str, o.columns)
              and ((w := _last_writer(outcomes, c, o.index)) is None or not _covered(w, dp, outcomes))]
    if within:  # its groups follow these columns (see _read); name them
        text += (f" (it formed its groups within {_cols(within)}, which no step released with differential "
                 "privacy, so one record's value there can change them)")
    if not own:
        return text
    covers = _joined([e.covers or "" for e in own])
    outside = _joined([e.not_covered or "" for e in own])
    thing = "labels" if o.kind == "clusterers" else "values it writes"
    return text + (f" (its DP statements cover {covers or 'what they name'}, not the {thing}, which {o.name} "
                   "computes from the records themselves" + (f"; they state as not covered: {outside}"
                                                              if outside else "") + ")")


def _deltas(dp: Sequence[LedgerEntry]) -> str:
    """``"step 0 (gaussian): delta 0.9999999"``, each step's delta once, exactly as spent."""
    return ", ".join(dict.fromkeys(f"step {e.step} ({name_text(e.component)}): delta {exact(e.delta)}"
                                   if e.step is not None else f"{name_text(e.component)}: delta {exact(e.delta)}"
                                   for e in dp if e.delta > 0))


def stated_delta(dp: Sequence[LedgerEntry], epsilon: float, delta: float) -> float:
    """The delta the verdict states for the released file from the composed (``epsilon``, ``delta``): under
    replace-one, counted twice, when every release is stated under add/remove (the file shows its number of records:
    ``(1 + e^epsilon) delta``, :func:`privclust.verdict.whole_file_relation`), else ``delta``."""
    if dp and all(relation_kind(e.relation or "") == ADD_REMOVE for e in dp):
        return group_delta(epsilon, delta)
    return delta


def vacuous_delta(delta: float, n: int, dp: Sequence[LedgerEntry]) -> str:
    """Why a delta of at least 1/``n`` (``n`` records) guarantees nothing, naming each step's delta: the verdict's
    reason (:func:`no_guarantee_reasons`) and the host's note on the DP entries (:func:`qualify_vacuous_delta`)."""
    steps = _deltas(dp)
    return (f"the delta stated for the file is {exact(delta)}" + (f" (steps' deltas: {steps})" if steps else "")
            + f", at least 1/n = 1/{n} for the {n} records: an (epsilon, delta) guarantee with delta of 1/n or more "
            "allows publishing records in the clear (releasing one record chosen at random satisfies it), so it "
            "protects no record in particular")


def vacuous(dp: Sequence[LedgerEntry], spent: tuple[float, float], n: int) -> float | None:
    """The file's stated delta (:func:`stated_delta`) when it is at least 1/``n``, else ``None``."""
    if not dp or n <= 0 or not all(math.isfinite(v) for v in spent):
        return None
    delta = stated_delta(dp, *spent)
    return delta if delta >= 1 / n else None


def qualify_vacuous_delta(context: PrivacyContext, n: int) -> None:
    """The host's note on every DP entry that spent a delta when the file's stated delta is at least 1/``n``
    (``n`` records): the verdict then gives no DP guarantee (:func:`vacuous_delta`),
    and the ledger says why beside the statement (a red-team audit: "(1, 1)-DP" read as a guarantee). The entries'
    parameters are kept: a recipe that ran keeps running."""
    dp = [e for e in context.ledger.entries if e.kind == "dp"]
    delta = vacuous(dp, context.accountant.total(context.ledger.entries), n)
    if delta is None:
        return
    why = vacuous_delta(delta, n, dp)
    note = f" Host note: {why[0].upper()}{why[1:]}; the release is not called differentially private."
    for entry in dp:
        if entry.delta > 0:
            context.ledger._replace(attrs.evolve(entry, statement=(entry.statement or "") + note))


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
        if math.isnan(eps) or math.isnan(delta):
            reasons.append(f"the accountant's composed total is not a number (epsilon {eps!r}, delta {delta!r}), "
                           "which bounds nothing")
        elif not math.isfinite(eps):
            reasons.append(f"the composed epsilon is {eps!r} (the steps' epsilons add up beyond the largest "
                           "floating-point number), which bounds nothing")
        elif eps < 0 or delta < 0:
            # a plugin accountant's epsilon = -1 was printed as the guarantee (a red-team audit); a total below one
            # release's own epsilon is left to the accountant (a tighter accounting of the same mechanisms can be)
            reasons.append(f"the accountant's composed total (epsilon {eps!r}, delta {delta!r}) is negative, which "
                           "no composition can give: it bounds nothing")
        if not delta < 1:
            reasons.append(f"the composed delta is {at_least(delta)}, not below 1 (the bound holds with probability "
                           "at most 1 - delta), which guarantees nothing")
        elif (stated := vacuous(dp, spent, n := int(checks.get("records") or 0))) is not None:
            reasons.append(vacuous_delta(stated, n, dp))
        reasons += [_uncovered_reason(o, dp, outcomes) for o in outcomes if not _covered(o, dp, outcomes)]
    return reasons


def guarantees_dp(entries: Sequence[LedgerEntry], accountant: Accountant, outcomes: Sequence[Any],
                  checks: Mapping[str, Any]) -> bool:
    """Whether the verdict on these entries is a differential-privacy
    guarantee (no reason of :func:`no_guarantee_reasons` applies): what the
    reports and ``privclust compare`` say about the spent epsilon."""
    return not no_guarantee_reasons(entries, outcomes, checks, spent=accountant.total(entries))


def dp_claimants(entries: Sequence[LedgerEntry], outcomes: Sequence[Any] = (),
                 provenance: Mapping[str, Any] | None = None) -> str:
    """Whose DP statements a guarantee rests on, as the verdict names them:
    ``"step 0 (laplace), step 2 (gaussian)"`` (the host composes them but
    cannot check a sensitivity). The verdict of :func:`privclust.run` and of
    :func:`privclust.run_dataset`, and ``privclust compare``'s
    ``dp_claimed_by`` column, all read it.

    ``provenance``: the run's :func:`~privclust.provenance.snapshot` (its
    ``steps`` in the order of ``outcomes``); with it, the plugin of each
    component that is not a built-in among those that wrote a step's DP
    statements is named: "step 1 (idp-kmeans, whose noise is laplace from
    plugin x.Noise)", "step 2 (dp-x from plugin acme.Plugin)". The entries
    carry the step's name whichever of its components spent (a third-party
    ``laplace`` nested in the built-in ``idp-kmeans`` wrote its DP statements
    under "step 1 (idp-kmeans)": a red-team audit), so the step's own
    component and every one nested in it are named. A built-in's text is
    the same with or without ``provenance``."""
    dp = [e for e in entries if e.kind == "dp"]
    if provenance is None:
        return _joined([f"step {e.step} ({name_text(e.component)})" if e.step is not None
                        else (name_text(e.component) if e.component else "a component")
                        for e in dp]).replace("; ", ", ")
    builtin = {p.get("name") for p in provenance.get("plugins", ()) if p.get("builtin")}
    steps = {o.index: info for o, info in zip(outcomes, provenance.get("steps", ()), strict=False)}

    def named(e: LedgerEntry) -> str:
        info = steps.get(e.step) if e.step is not None else None
        if info is None:
            return dp_claimants([e])
        own = "" if info.get("plugin") in builtin else f" from plugin {name_text(info.get('plugin'))}"
        nested = [f"whose {name_text(location).replace('.', ' ')} is {name_text(n.get('component'))} from plugin "
                  f"{name_text(n.get('plugin'))}"
                  for location, n in (info.get("nested") or {}).items() if n.get("plugin") not in builtin]
        return f"step {e.step} ({', '.join([f'{name_text(e.component)}{own}', *nested])})"

    return ", ".join(dict.fromkeys(named(e) for e in dp))
