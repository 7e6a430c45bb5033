"""How the host's statements (ledger entries, the verdict) name lists of
columns, counts of records and lists of clauses."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["column_list", "counted", "joined", "records_are"]


def records_are(count: int) -> str:
    """``"1 record is"``, ``"3 records are"``."""
    return f"{count} record is" if count == 1 else f"{count} records are"


def column_list(columns: Sequence[str]) -> str:
    """``"a, b"``; ``"(none)"`` for no column."""
    return ", ".join(columns) if columns else "(none)"


def joined(items: Sequence[str]) -> str:
    """The non-blank ``items``, each once, without a final full stop, joined by ``"; "``."""
    seen: list[str] = []
    for item in items:
        item = (item or "").strip().rstrip(".")
        if item and item not in seen:
            seen.append(item)
    return "; ".join(seen)


def counted(n: int, noun: str) -> str:
    """``"1 record"``, ``"12 records"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
