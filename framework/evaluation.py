"""The evaluations of a release (``[[evaluate]]``): run last, on a copy of
the run's ledger, each figure with what it was computed on."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from .accounting import Ledger, PrivacyContext
from .assessment import EVALUATION_COLUMNS, figure_rows, is_risk_evaluator, measure_before
from .compiling import CompiledRecipe, StepOutcome
from .components import EvaluationInputs, capability
from .constraints import ConstraintSet
from .errors import DataError, PrivclustError
from .preflight import check_columns

__all__ = ["evaluate_release"]

def evaluate_release(compiled: CompiledRecipe, original: pd.DataFrame, protected: pd.DataFrame, labels: pd.DataFrame,
              outcomes: Sequence[StepOutcome], constraints: ConstraintSet | None, context: PrivacyContext,
              default_columns: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The evaluations table, and the risk figures measured on the original file (before protection)."""
    rows: list[dict[str, Any]] = []
    risky: list[tuple[str, Any, EvaluationInputs, str]] = []
    ledger = Ledger(copy.deepcopy(context.ledger.entries))  # evaluators read a copy; the run's ledger is the host's
    with context.step(-1, "evaluate", "evaluate"):
        rng = context.rng
        for i, ev in enumerate(compiled.evaluations):
            columns = ev.spec.columns if ev.spec.columns is not None else tuple(default_columns)
            problems = check_columns(original, columns, f"evaluate[{i}] ({ev.spec.use})", missing="observed")
            if problems:
                raise DataError("; ".join(problems))
            # copies: an evaluator that wrote into the frames it was given rewrote the checked release (the file
            # written was the input, "verified" k beside it) and the caller's data, and skewed the evaluators after it
            # (a red-team audit)
            inputs = EvaluationInputs(original=original.copy(deep=True), protected=protected.copy(deep=True),
                                      columns=tuple(columns), labels=labels.copy(deep=True),
                                      outcomes=tuple(outcomes), constraints=constraints, ledger=ledger,
                                      rng=rng, registry=compiled.registry, roles=compiled.recipe.roles,
                                      columns_named=ev.spec.columns is not None)
            on = _evaluated_on(ev, inputs)
            rows += figure_rows(ev.spec.use, ev.evaluator.evaluate(inputs), on)
            if is_risk_evaluator(ev.spec.use):
                risky.append((ev.spec.use, ev.evaluator, inputs, on))
        # risk before: of an assessment, the risk figures as measured
        before = measure_before(risky, original) if outcomes else \
            [r for r in rows if is_risk_evaluator(r["evaluator"])]
    return pd.DataFrame(rows, columns=EVALUATION_COLUMNS), pd.DataFrame(before, columns=EVALUATION_COLUMNS)


def _evaluated_on(ev: Any, inputs: EvaluationInputs) -> str:
    """What an evaluator's figures are computed on, as the evaluation table
    names it: the evaluation's columns, or what the evaluator's
    ``evaluated_on`` says (its key variables, its sampling weight)."""
    method = capability(ev.evaluator, "evaluated_on")
    if method is None:
        return ", ".join(inputs.columns)
    said = method(inputs)
    columns = said.get("columns") if isinstance(said, Mapping) else None
    weight = said.get("weight") if isinstance(said, Mapping) else None
    if not isinstance(columns, Sequence) or isinstance(columns, str) or not all(isinstance(c, str) for c in columns) \
            or (weight is not None and not isinstance(weight, str)):
        raise PrivclustError(f"evaluator {ev.spec.use!r}: evaluated_on() must return {{'columns': [column names], "
                             f"'weight': a column name or None}}; got {said!r} (a bug in its plugin)")
    return ", ".join(columns) + (f"; weighted by {weight}" if weight else "")

