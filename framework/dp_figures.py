"""Which evaluation figures read a column a differentially private step released.

A release that is not differentially private as a whole (a DP step beside a
non-DP one) may still hold DP columns; a figure computed on their original
values (a relative change of the mean, a record linkage on them) would give
back what their DP statements protect. The non-disclosive report withholds
such figures (red-team audit rt21 F4): :func:`dp_released_columns` names the
columns, :func:`figure_columns` reads the columns an evaluation row is
computed on, :func:`reads_dp_columns` decides, :func:`dp_columns_note` says
what was left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .coverage import post_processed_steps

__all__ = ["DP_COLUMNS_EVALUATIONS_NOTE", "dp_columns_note", "dp_released_columns", "figure_columns",
           "reads_dp_columns"]

#: In a release that is not differentially private as a whole, the figures on the columns a DP step released.
DP_COLUMNS_EVALUATIONS_NOTE = ("the evaluation figures that read the original values of a column a differentially "
                               "private step released ({columns}), or whose columns are not known (they are "
                               "computed from the original data and are not differentially private: with the "
                               "released values they would give back what the DP statements protect, such as "
                               "moments' relative change of the mean, which gives the original mean): {figures}")


def dp_released_columns(entries: Sequence[Any], outcomes: Sequence[Any]) -> frozenset[str] | None:
    """The columns released by a step that has differential-privacy entries
    in the ledger (whether or not they cover what it wrote, and whatever the
    verdict on the whole release) or that computed them from DP releases
    only (post-processing): its values, or a clusterer's label column.
    ``None`` when a DP entry names no step of the run (its columns are not
    known: every figure may read them)."""
    dp = [e for e in entries if e.kind == "dp"]
    steps = {o.index for o in outcomes}
    if any(e.step not in steps for e in dp):
        return None
    charged = {e.step for e in dp} | {o.index for o in post_processed_steps(entries, outcomes)}
    out: set[str] = set()
    for o in outcomes:
        if o.index in charged:
            if o.kind == "clusterers":
                out |= {str(o.output)} if getattr(o, "output", None) else set()
            else:
                out |= {str(c) for c in o.columns}
    return frozenset(out)


def figure_columns(on: Any, names: set[str]) -> frozenset[str] | None:
    """The columns an evaluation row is computed on (its ``columns``: the
    names joined by ", ", then "; weighted by <weight>" when weighted),
    read against the known column ``names``: every name of every way the
    text splits into them (a name may hold ", "). ``None`` when it names no
    known column or does not split into known names (not known)."""
    if isinstance(on, list | tuple) and all(isinstance(c, str) for c in on):
        return frozenset(on) if on and set(on) <= names else None
    if not isinstance(on, str) or not on:
        return None
    weighted = "; weighted by "
    if not any(", " in n or weighted in n for n in names):  # one way to split it
        head, by, weight = on.rpartition(weighted)
        columns = (head if by else on).split(", ") + ([weight] if by else [])
        return frozenset(columns) if all(c in names for c in columns) else None
    # a name holds a separator: every split, from the end (no recursion: an evaluation may read 10,000 columns)
    cut = re.compile(", |" + re.escape(weighted))
    by_head: dict[str, list[str]] = {}
    for name in names:
        by_head.setdefault(cut.split(name, maxsplit=1)[0], []).append(name)
    cuts = list(cut.finditer(on))
    starts = [(0, cuts[0].start() if cuts else len(on))] + [
        (m.end(), cuts[k + 1].start() if k + 1 < len(cuts) else len(on))
        for k, m in enumerate(cuts) if m.group() == ", "]  # (where a name may start, where its first part ends)
    # each way on from a start: the names read there and the next start (None: the end of the text)
    ways: dict[int, list[tuple[tuple[str, ...], int | None]]] = {}
    for i, first in starts:
        ways[i] = []
        for name in by_head.get(on[i:first], ()):
            j = i + len(name)
            if not on.startswith(name, i):
                continue
            if j == len(on):
                ways[i].append(((name,), None))
            elif on.startswith(", ", j):
                ways[i].append(((name,), j + 2))
            elif on.startswith(weighted, j) and on[j + len(weighted):] in names:
                ways[i].append(((name, on[j + len(weighted):]), None))
    ends: set[int] = set()  # the starts from which the rest of the text splits into names
    for i, _ in reversed(starts):
        if any(after is None or after in ends for _, after in ways[i]):
            ends.add(i)
    if 0 not in ends:
        return None
    found: set[str] = set()
    todo, seen = [0], {0}
    while todo:
        for read, after in ways[todo.pop()]:
            if after is None or after in ends:
                found.update(read)
                if after is not None and after not in seen:
                    seen.add(after)
                    todo.append(after)
    return frozenset(found)


def reads_dp_columns(on: Any, dp_columns: frozenset[str] | None, names: set[str]) -> bool:
    """Whether an evaluation row computed on ``on`` (its ``columns``) may read
    the original values of a column in ``dp_columns`` (:func:`dp_released_columns`):
    it names one, or its columns are not known (unless no column is DP)."""
    if dp_columns is not None and not dp_columns:
        return False
    read = figure_columns(on, names)
    return read is None or dp_columns is None or bool(read & dp_columns)


def dp_columns_note(rows: Sequence[Mapping[str, Any]], dp_columns: frozenset[str] | None) -> str:
    """What a non-disclosive report says it left out: the figures (``rows``) on DP-released columns."""
    columns = ", ".join(sorted(dp_columns)) if dp_columns else "a step the ledger does not name"
    groups: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        groups.setdefault((str(r["evaluator"]), str(r.get("columns") or "columns not named")), []).append(
            str(r["metric"]))
    figures = "; ".join(f"{evaluator} on {on} ({', '.join(metrics)})" for (evaluator, on), metrics in groups.items())
    return DP_COLUMNS_EVALUATIONS_NOTE.format(columns=columns, figures=figures)
