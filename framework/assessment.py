"""Risk before and after: which evaluation figures measure disclosure risk,
their values on the original file ("before"), and the short table of
headline figures the CLI summary prints.

A recipe without steps is an *assessment*: the evaluators run on the
original file, the release holds every original record unchanged and the verdict says
that nothing was protected. After a run with steps, every figure of a risk
evaluator is also computed with the original file in place of the released
one (its value before protection) and shown beside its value after.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .components import EvaluationInputs
from .constraints import ConstraintSet, integer_flags, judge
from .errors import DataError, PrivclustError
from .plots import RISK_HINTS

__all__ = ["HEADLINE_METRICS", "RISK_EVALUATOR_HINTS", "figure_rows", "headline_rows", "is_risk_evaluator",
           "measure_before", "occurrences", "rule_breaks", "rule_breaks_lines", "summary_table", "with_before"]

#: The words in an evaluator's name that make its figures risk figures (the
#: map's :data:`~privclust.plots.RISK_HINTS`, and the key-variable measures).
RISK_EVALUATOR_HINTS = (*RISK_HINTS, "key-frequencies", "group-sizes", "suda", "diversity", "household")
#: The figures the CLI summary shows of an evaluator that has them; an
#: evaluator with none of them shows its first figure.
HEADLINE_METRICS = ("sample_uniques", "records_below_k", "expected_reidentifications", "max_risk", "dbrl",
                    "key_dbrl", "sse_sst", "il1s", "min_size", "max_posterior_bound")
#: The columns of an evaluations table.
EVALUATION_COLUMNS = ["evaluator", "metric", "value", "columns"]


def is_risk_evaluator(name: str) -> bool:
    """Whether the figures of the evaluator ``name`` measure disclosure risk
    (its name holds one of :data:`RISK_EVALUATOR_HINTS`); the others measure
    information loss or utility."""
    return any(hint in name.lower() for hint in RISK_EVALUATOR_HINTS)


def figure_rows(use: str, figures: Mapping[str, Any], on: str) -> list[dict[str, Any]]:
    """An evaluator's figures as rows of the evaluations table (a figure
    that is not finite is NaN).

    :raises PrivclustError: for a figure that is not a number (a bug in the
        evaluator's plugin)."""
    rows = []
    for metric, value in dict(figures).items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise PrivclustError(f"evaluator {use!r} returned a non-numeric value for {metric!r}: {value!r} "
                                 "(a bug in its plugin)") from None
        rows.append({"evaluator": use, "metric": str(metric), "value": number if math.isfinite(number) else np.nan,
                     "columns": on})
    return rows


def measure_before(risky: Sequence[tuple[str, Any, EvaluationInputs, str]],
                   original: pd.DataFrame) -> list[dict[str, Any]]:
    """Each risk evaluator ``(use, evaluator, inputs, on)`` run as if nothing
    had been applied: the original file in place of the released one, no
    step outcomes and no label columns. An evaluator whose figures describe
    a step's output (the groups a masker formed: ``group-sizes``,
    ``transparency-risk``) refuses that with a :class:`DataError` and has no
    figure before."""
    rows: list[dict[str, Any]] = []
    for use, evaluator, inputs, on in risky:
        untouched = attrs.evolve(inputs, protected=original, outcomes=(), labels=pd.DataFrame(index=original.index))
        try:
            figures = evaluator.evaluate(untouched)
        except DataError:
            continue
        rows += figure_rows(use, figures, on)
    return rows


def occurrences(rows: Iterable[Mapping[str, Any]]) -> list[int]:
    """Per row, how many rows of the same evaluator and metric came before it: 0 for the first ``[[evaluate]]``
    entry of an evaluator, 1 for its second... (an evaluator given twice, with k = 3 and k = 20, has two rows of
    each metric)."""
    seen: dict[tuple[Any, Any], int] = {}
    out = []
    for r in rows:
        key = (r["evaluator"], r["metric"])
        out.append(seen.get(key, 0))
        seen[key] = seen.get(key, 0) + 1
    return out


def with_before(rows: Iterable[dict[str, Any]], before: pd.DataFrame) -> list[dict[str, Any]]:
    """Report rows (evaluator, metric, value, ...) with the figure's value on
    the original file as ``before`` where one was measured (risk figures),
    matched entry by entry (an evaluator given twice got each other's
    "before": a red-team audit)."""
    records = before.to_dict(orient="records")
    measured = {(r["evaluator"], r["metric"], n): r["value"] for r, n in zip(records, occurrences(records),
                                                                             strict=True)}
    rows = [dict(row) for row in rows]
    for row, n in zip(rows, occurrences(rows), strict=True):
        key = (row["evaluator"], row["metric"], n)
        if key in measured:
            value = measured[key]
            row["before"] = None if isinstance(value, float) and np.isnan(value) else value
    return rows


def headline_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows of :data:`HEADLINE_METRICS` of each evaluator, or its first
    row when it has none of them, in the table's order."""
    by_evaluator: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_evaluator.setdefault(row["evaluator"], []).append(row)
    out = []
    for group in by_evaluator.values():
        chosen = [r for r in group if r["metric"] in HEADLINE_METRICS]
        out.extend(chosen or group[:1])
    return out


def _number(value: Any) -> str:
    """A figure as the summary prints it (``nan``: measured, not a number)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "nan"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def summary_table(rows: Sequence[Mapping[str, Any]], *, assessment: bool = False) -> list[str]:
    """The CLI summary's table of headline figures: figure, before, after
    (``-``: not measured on the original, an information-loss figure;
    ``nan``: measured, not a number); of an
    assessment, each figure's value on the original."""
    shown = headline_rows(rows)
    if not shown:
        return []
    names = [f"{r['evaluator']}.{r['metric']}" for r in shown]
    width = max(len("figure"), *map(len, names))
    if assessment:
        lines = [f"{'figure':<{width}}  original"]
        lines += [f"{name:<{width}}  {_number(r['value'])}" for name, r in zip(names, shown, strict=True)]
        return lines
    before = [_number(r["before"]) if "before" in r else "-" for r in shown]
    after = [_number(r["value"]) for r in shown]
    w1 = max(len("before"), *map(len, before))
    lines = [f"{'figure':<{width}}  {'before':>{w1}}  after"]
    lines += [f"{name:<{width}}  {b:>{w1}}  {a}" for name, b, a in zip(names, before, after, strict=True)]
    return lines


def rule_breaks(frame: pd.DataFrame, rules: ConstraintSet | None) -> list[dict[str, Any]]:
    """For each edit rule, how the records of ``frame`` (the original, before
    any step enforces the rules) stand, as :func:`~privclust.judge` says:
    ``broken`` records and ``judged`` records (the others miss a value of the
    rule's columns or cannot be decided in double precision), and of the
    broken ones the largest and the total residual (by how much the rule
    fails, in the units of its columns)."""
    if rules is None or not rules.rules:
        return []
    status = judge(rules, frame.loc[:, list(rules.columns)].to_numpy(dtype=float, na_value=np.nan),
                   integer=integer_flags(frame, rules.columns))
    out = []
    for r, text in enumerate(rules.rules):
        bad = status.violated[:, r]
        residuals = status.residuals[bad, r]
        out.append({"rule": str(text), "broken": int(bad.sum()), "judged": int((~status.undecided[:, r]).sum()),
                    "max_residual": float(residuals.max()) if bad.any() else 0.0,
                    "total_residual": float(residuals.sum()) if bad.any() else 0.0,
                    "evaluated_by": "" if rules.host_evaluated[r] else (rules.rule_handlers[r] or "its plugin")})
    return out


def rule_breaks_lines(breaks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The CLI's lines on the rules the original breaks (:func:`rule_breaks`)."""
    if not breaks:
        return []
    lines = ["edit rules on the original data, before any step enforces them:"]
    for b in breaks:
        by = f" (as its constraint handler {b['evaluated_by']!r} evaluates it)" if b.get("evaluated_by") else ""
        if b["broken"] and b["max_residual"] is None:  # a non-disclosive run: no residual of a record
            lines.append(f"  {b['rule']!r}: broken by {b['broken']} of {b['judged']} records judged{by}")
        elif b["broken"]:
            lines.append(f"  {b['rule']!r}: broken by {b['broken']} of {b['judged']} records judged (largest "
                         f"residual {b['max_residual']:.6g}, total {b['total_residual']:.6g}){by}")
        else:
            lines.append(f"  {b['rule']!r}: holds on all {b['judged']} records judged{by}")
    return lines
