"""Running one component once, outside a recipe, as the conformance kit
(:mod:`privclust.testing`) and the auditor (:mod:`privclust.audit`) do: an
example frame, the kind of a component, and one call of its kind's method in
a step of a context."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .components import KIND_METHODS, EvaluationInputs
from .context import PrivacyContext

__all__ = ["example_frame", "execute", "kind_of", "protected_for_evaluation"]


def example_frame(n: int = 60, d: int = 3, *, seed: int = 0) -> pd.DataFrame:
    """A small numeric frame (columns ``a``, ``b``, ``c``...) with clusters."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, size=(4, d))
    values = centres[rng.integers(0, 4, size=n)] + rng.normal(0, 0.5, size=(n, d))
    return pd.DataFrame(values, columns=[chr(ord("a") + j) for j in range(d)])


def kind_of(component: Any) -> str:
    """The component kind, from the methods the class has."""
    cls = type(component)
    for kind in ("evaluators", "constraint_handlers", "noise_mechanisms", "maskers", "clusterers"):
        if all(callable(getattr(cls, m, None)) for m in KIND_METHODS[kind]):
            return kind
    raise AssertionError(f"{cls.__qualname__} has none of the methods of a component kind: {KIND_METHODS}")


def execute(component: Any, kind: str, data: pd.DataFrame, context: PrivacyContext,
            protected: pd.DataFrame | None = None) -> Any:
    """Run ``component`` of ``kind`` on ``data`` as a step of a run would; an evaluator is given ``data`` as the
    original and ``protected`` (default :func:`protected_for_evaluation` of it) as the release."""
    with context.step(0, "check", type(component).name):
        if kind == "clusterers":
            return component.fit(data, context)
        if kind == "maskers":
            return component.mask(data, context)
        if kind == "noise_mechanisms":
            return component.perturb(data, context)
        if kind == "evaluators":
            inputs = EvaluationInputs(original=data,
                                      protected=protected if protected is not None else protected_for_evaluation(data),
                                      columns=tuple(data.columns), labels=pd.DataFrame(index=data.index),
                                      rng=context.rng, registry=context.registry)
            return dict(component.evaluate(inputs))
        if kind == "constraint_handlers":
            bound = component.bind(tuple(data.columns))
            return bound.project(data.to_numpy(dtype=float))
    raise AssertionError(f"unknown kind {kind!r}")


def protected_for_evaluation(data: pd.DataFrame) -> pd.DataFrame:
    """What the kit hands an evaluator as the release: the data with every
    numeric value moved by a fixed, data-independent amount (a tenth of its
    column's standard deviation, up or down by record), so that an evaluator
    that confuses ``original`` and ``protected`` (or never looks at one of
    them) is run on data where the difference shows. The shifts are drawn
    from a fixed seed, not from the context, so they are the same in every
    check."""
    protected = data.copy(deep=True)
    signs = np.where(np.random.default_rng(20261201).random(len(data)) < 0.5, -1.0, 1.0)
    for column in data.columns:
        values = data[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            numbers = values.to_numpy(dtype=float)
            spread = float(np.nanstd(numbers)) if len(numbers) else 0.0
            protected[column] = numbers + signs * (0.1 * spread if spread > 0 else 1.0)
    return protected
