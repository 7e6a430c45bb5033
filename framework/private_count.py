"""The number of records of a release whose differential-privacy statements
are all stated under add/remove one record, where that number is itself
private (docs/decisions.md, decision 24): what a non-disclosive report shows
in its place (a step's noisy count, or nothing) and how the host's counting
statements are left out of it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .accountants import ADD_REMOVE, relation_kind
from .ledger import at_least
from .wording import counted

__all__ = ["COUNT_NOTE", "COUNT_WITHHELD", "NOISY_RECORDS", "count_free_statements", "count_is_private",
           "hide_private_count", "noisy_records", "records_text", "uncounted"]


# -- the number of records under add/remove (docs/decisions.md, decision 24) ---------------------------------------

#: The key of a step result's ``diagnostics`` under which a step that released
#: a differentially private count of its records gives it: ``{"value": the noisy
#: count, "epsilon": what it was charged}``. Under add/remove the exact number
#: of records is private; a non-disclosive report shows this noisy count in its
#: place, said to be the noisy one (:func:`count_is_private`).
NOISY_RECORDS = "noisy_records"
"""The diagnostics key of a step's DP count of its records (see above)."""

#: What a non-disclosive report says it left out when the number of records is private.
COUNT_NOTE = ("the exact number of records, and every figure of the host that counts records or values (its "
              "measurements of the released file, the counts in its statements and in the verdict): every "
              "differential-privacy statement of this release is stated under add/remove one record, where the "
              "number of records is itself private; where a step released a DP count of the records, it is shown "
              "as the noisy count it is (data.records_noisy)")
#: What a non-disclosive report shows in place of a host statement that counts records.
COUNT_WITHHELD = ("left out of this non-disclosive report: the host's measurement counts the records, whose exact "
                  "number is private under add/remove (the relation of every DP statement of this release)")
#: A host-written count of records or values: "2000 records", "1 record", "12 of 2000 records", "167 values".
_COUNTED = re.compile(r"\b\d+ of \d+ (records?|values?)\b|\b\d+ (records?|values?|groups?)\b")


def count_is_private(entries: Sequence[Any]) -> bool:
    """Whether the release's exact number of records is private: it has
    differential-privacy entries and every one of them is stated under
    add/remove one record (two neighbouring data sets differ in their number
    of records, so publishing it exactly beside these releases voids them).
    With a replace-one entry among them the number of records is public (the
    accountant states the total under replace-one)."""
    kinds = {relation_kind(e.relation) for e in entries if e.kind == "dp"}
    return kinds == {ADD_REMOVE}


def noisy_records(outcomes: Sequence[Any], entries: Sequence[Any]) -> dict[str, Any] | None:
    """The first DP count of the records a step released (its diagnostics
    under :data:`NOISY_RECORDS`), from a step that has differential-privacy
    entries in the ledger (a step without any cannot have released a DP
    count); ``None`` when no step did."""
    charged = {e.step for e in entries if e.kind == "dp"}
    for o in outcomes:
        found = (o.diagnostics or {}).get(NOISY_RECORDS)
        if o.index not in charged or not isinstance(found, Mapping):
            continue
        try:
            value, epsilon = float(found["value"]), float(found["epsilon"])
        except (KeyError, TypeError, ValueError):
            continue
        if np.isfinite(value) and np.isfinite(epsilon) and epsilon > 0:
            return {"value": value, "epsilon": epsilon, "step": o.index,
                    "note": f"a noisy count (Laplace noise, epsilon {at_least(epsilon, 6)}, charged in the ledger by "
                            f"step {o.index}), not the exact number of records"}
    return None


def uncounted(text: str) -> str:
    """``text`` without the host's counts of records, values and groups
    ("clustered 2000 records" -> "clustered the records"; a rule on the
    host's wording, never on the numbers' values)."""
    return _COUNTED.sub(lambda m: "the " + (m.group(1) or m.group(2)).rstrip("s") + "s", text)


def count_free_statements(entries: Sequence[Any]) -> dict[int, str]:
    """For a non-disclosive report of a release whose number of records is
    private (:func:`count_is_private`), by ledger ``seq``: the host's
    statements without its counts. The host's measurements of the released
    file (``verified``) are left out, its record of each step (``process``)
    and its checks appended to a claim lose their counts. A component's own
    statements are its own (the built-in ones state no count of records)."""
    out: dict[int, str] = {}
    for e in entries:
        if e.kind == "verified":
            out[e.seq] = COUNT_WITHHELD
        elif e.kind == "process" and e.by_host:
            out[e.seq] = uncounted(e.statement)
        elif e.kind == "guarantee" and e.claim is not None and " Host check" in e.statement:
            head, _, check = e.statement.partition(" Host check")
            out[e.seq] = head + " Host check" + uncounted(check)
    return out


def _numbers_left_out(value: Any) -> Any:
    """The host's measurements without any number (they count records, values
    and groups of the data): booleans and names stay."""
    if isinstance(value, Mapping):
        return {k: _numbers_left_out(v) for k, v in value.items()
                if isinstance(v, bool) or not isinstance(v, int | float | np.number)}
    if isinstance(value, list | tuple):
        return [_numbers_left_out(v) for v in value
                if isinstance(v, bool) or not isinstance(v, int | float | np.number)]
    return value


def hide_private_count(rep: dict[str, Any], release: Any) -> None:
    """Make a non-disclosive report ``rep`` of ``release`` free of the exact
    number of records when it is private (:func:`count_is_private`), in
    place: ``data.records`` is ``None`` and ``data.records_noisy`` the noisy
    count a step released, if any; the host's counts leave its measurements,
    its statements and the verdict; ``left_out`` says so."""
    entries = release.ledger.entries
    if not count_is_private(entries):
        return
    rep["data"]["records"] = None
    rep["data"]["records_noisy"] = noisy_records(release.outcomes, entries)
    rep["verdict"] = uncounted(rep["verdict"])
    rep["verification"] = _numbers_left_out(rep["verification"])
    replaced = count_free_statements(entries)
    for entry in rep["ledger"]:
        if entry["seq"] in replaced and not entry["statement"].startswith("left out"):
            entry["statement"] = replaced[entry["seq"]]
    rep.setdefault("left_out", []).append(COUNT_NOTE)


def records_text(release: Any, non_disclosive: bool) -> str:
    """The report's words for the number of records: the exact count, or,
    in a non-disclosive report where it is private, the noisy count a step
    released (said to be noisy) or none."""
    entries = release.ledger.entries
    if not (non_disclosive and count_is_private(entries)):
        return counted(release.data.shape[0], "record")
    noisy = noisy_records(release.outcomes, entries)
    if noisy is None:
        return "The number of records is left out (private under add/remove)"
    return (f"About {max(noisy['value'], 0.0):.0f} records ({noisy['note']}; the exact number is private under "
            "add/remove)")
