"""Conformance checks any plugin author can run on their components.

::

    import privclust.testing as pt

    @pt.parametrize_components(MyMasker(k=3), data=my_frame)
    def test_conformance(component, check):
        check(component)

or simply ``pt.check_component(MyMasker(k=3), data=my_frame)``.

The checks (each raises ``AssertionError`` with a message saying what to fix):

``params_round_trip``
    every parameter survives ``ComponentSpec.of(c)``, a TOML round trip and
    re-creation through a registry; the instance is frozen.
``deterministic_under_seed``
    two runs with the same seed give identical results; different seeds
    are allowed to differ.
``never_mutates_input``
    the data frame handed to the component is unchanged afterwards.
``spends_before_release``
    a component that records differential-privacy releases calls
    ``context.spend`` before it draws any randomness.
``refuses_exhausted_budget``
    with the budget already spent, a DP component raises
    :class:`~privclust.BudgetExceededError` and draws nothing.

Components that record no DP release pass the last two checks trivially
(the check says so).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accounting import PrivacyContext
from .components import KIND_METHODS, KINDS, EvaluationInputs, Masked, Partition
from .errors import BudgetExceededError
from .hookspecs import hookimpl
from .recipe import Budget, ComponentSpec, dumps_toml
from .registry import Registry, get_registry

__all__ = [
    "CHECKS",
    "check_component",
    "component_checks",
    "example_frame",
    "kind_of",
    "parametrize_components",
]


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


class _TracingContext(PrivacyContext):
    """A context that records the order of spends and random draws."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.events: list[str] = []

    @property
    def rng(self) -> np.random.Generator:
        self.events.append("rng")
        return super().rng

    def spawn(self, n: int) -> list[np.random.Generator]:
        self.events.append("rng")
        return super().spawn(n)

    def spend(self, **kwargs: Any) -> Any:
        self.events.append("spend")
        return super().spend(**kwargs)


def _execute(component: Any, kind: str, data: pd.DataFrame, context: PrivacyContext) -> Any:
    with context.step(0, "check", type(component).name):
        if kind == "clusterers":
            return component.fit(data, context)
        if kind == "maskers":
            return component.mask(data, context)
        if kind == "noise_mechanisms":
            return component.perturb(data, context)
        if kind == "evaluators":
            inputs = EvaluationInputs(original=data, protected=data.copy(), columns=tuple(data.columns),
                                      labels=pd.DataFrame(index=data.index), rng=context.rng)
            return dict(component.evaluate(inputs))
        if kind == "constraint_handlers":
            bound = component.bind(tuple(data.columns))
            return bound.project(data.to_numpy(dtype=float))
    raise AssertionError(f"unknown kind {kind!r}")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Partition) and isinstance(b, Partition):
        return _same(a.labels, b.labels) and _same(a.centres, b.centres)
    if isinstance(a, Masked) and isinstance(b, Masked):
        return a.data.equals(b.data)
    if isinstance(a, pd.DataFrame):
        return a.equals(b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if a is None or b is None:
            return a is b
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return a == b


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------


def check_params_round_trip(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    cls = type(component)
    assert attrs.has(cls), f"{cls.__qualname__} must be an attrs class (@attrs.frozen(kw_only=True))"
    name = getattr(cls, "name", None)
    assert isinstance(name, str) and name, f"{cls.__qualname__} needs a class attribute name = '...'"
    first = attrs.fields(cls)[0] if attrs.fields(cls) else None
    if first is not None:
        try:
            setattr(component, first.name, getattr(component, first.name))
        except attrs.exceptions.FrozenInstanceError:
            pass
        else:
            raise AssertionError(f"{name}: instances must be frozen (use @attrs.frozen)")
    # TOML has no null: a parameter left at None ("not set") is written by
    # leaving it out, which reads back as not set.
    plain = _without_none(ComponentSpec.of(component).to_dict())
    text = dumps_toml({"component": plain})
    back = ComponentSpec.from_mapping(tomllib.loads(text)["component"])
    assert _without_none(back.to_dict()) == plain, (
        f"{name}: parameters do not survive a TOML round trip: {plain} -> {back.to_dict()}")
    if name in registry.tables.get(kind, {}) and registry.get(kind, name) is cls:
        creator = registry
    else:
        creator = Registry(plugins=[_OneComponent(kind, cls)], entry_points=[], use_env=False)
    again = creator.create(kind, back)
    # Nested components given by name are resolved into instances on creation;
    # resolve the component's own the same way before comparing.
    component = creator.create(kind, component)
    assert again == component, (
        f"{name}: re-creating the component from its parameters gives {again!r}, not {component!r}; "
        "every hyper-parameter must be an init field, and derived state must not be a field"
    )


def _without_none(value: Any) -> Any:
    """A parameter dict with None-valued entries left out, recursively."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


class _OneComponent:
    def __init__(self, kind: str, cls: type):
        self.kind = kind
        self.cls = cls
        self.plugin_name = f"check:{cls.__qualname__}"

    def _register(self, register: Callable[[type], None]) -> None:
        register(self.cls)

    @hookimpl
    def privclust_register_clusterers(self, register: Callable[[type], None]) -> None:
        if self.kind == "clusterers":
            self._register(register)

    @hookimpl
    def privclust_register_maskers(self, register: Callable[[type], None]) -> None:
        if self.kind == "maskers":
            self._register(register)

    @hookimpl
    def privclust_register_noise_mechanisms(self, register: Callable[[type], None]) -> None:
        if self.kind == "noise_mechanisms":
            self._register(register)

    @hookimpl
    def privclust_register_constraint_handlers(self, register: Callable[[type], None]) -> None:
        if self.kind == "constraint_handlers":
            self._register(register)

    @hookimpl
    def privclust_register_evaluators(self, register: Callable[[type], None]) -> None:
        if self.kind == "evaluators":
            self._register(register)


def _context(registry: Registry, *, seed: int, budget: Budget | None = None, tracing: bool = False) -> PrivacyContext:
    cls = _TracingContext if tracing else PrivacyContext
    return cls(budget, seed=seed, registry=registry)


def check_deterministic_under_seed(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    first = _execute(component, kind, data, _context(registry, seed=12345))
    second = _execute(component, kind, data, _context(registry, seed=12345))
    assert _same(first, second), (
        f"{type(component).name}: two runs with the same seed differ; take all randomness from context.rng "
        "or context.spawn(), never from numpy.random or random"
    )


def check_never_mutates_input(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    given = data.copy(deep=True)
    _execute(component, kind, given, _context(registry, seed=7))
    assert given.equals(data), f"{type(component).name}: the data frame was modified; work on copies"


def _is_dp(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> tuple[bool, _TracingContext]:
    context = _context(registry, seed=3, tracing=True)
    _execute(component, kind, data, context)
    assert isinstance(context, _TracingContext)
    return bool(context.ledger.of_kind("dp")), context


def check_spends_before_release(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    dp, context = _is_dp(component, data, kind, registry)
    if not dp:
        return
    events = context.events
    first_spend = events.index("spend")
    assert "rng" not in events[:first_spend], (
        f"{type(component).name}: it draws randomness before its first context.spend(); spend first, so that a "
        "refused spend draws nothing"
    )


def check_refuses_exhausted_budget(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    dp, _ = _is_dp(component, data, kind, registry)
    if not dp:
        return
    context = _context(registry, seed=5, budget=Budget(epsilon=1e-9), tracing=True)
    assert isinstance(context, _TracingContext)
    try:
        _execute(component, kind, data, context)
    except BudgetExceededError:
        pass
    else:
        raise AssertionError(f"{type(component).name}: ran to the end on an exhausted budget; spend through "
                             "context.spend(), which refuses")
    assert not context.ledger.of_kind("dp"), f"{type(component).name}: recorded a spend the budget refused"
    assert "rng" not in context.events, f"{type(component).name}: drew randomness before the refused spend"


#: Every check, by name.
CHECKS: dict[str, Callable[[Any, pd.DataFrame, str, Registry], None]] = {
    "params_round_trip": check_params_round_trip,
    "deterministic_under_seed": check_deterministic_under_seed,
    "never_mutates_input": check_never_mutates_input,
    "spends_before_release": check_spends_before_release,
    "refuses_exhausted_budget": check_refuses_exhausted_budget,
}


def component_checks(component: Any, data: pd.DataFrame | None = None, *, kind: str | None = None,
                     registry: Registry | None = None) -> Iterator[tuple[str, Callable[[Any], None]]]:
    """Yield ``(name, check)`` pairs; ``check(component)`` raises on failure."""
    frame = example_frame() if data is None else data
    kind = kind or kind_of(component)
    assert kind in KINDS, f"unknown kind {kind!r}"
    reg = registry if registry is not None else get_registry()
    for name, fn in CHECKS.items():
        def check(c: Any, _fn: Any = fn) -> None:
            _fn(c, frame, kind, reg)

        check.__name__ = name
        yield name, check


def check_component(component: Any, data: pd.DataFrame | None = None, *, kind: str | None = None,
                    registry: Registry | None = None) -> None:
    """Run every conformance check on a component instance."""
    for _, check in component_checks(component, data, kind=kind, registry=registry):
        check(component)


def parametrize_components(*components: Any, data: pd.DataFrame | None = None,
                           registry: Registry | None = None) -> Callable[[Callable[..., Any]], Any]:
    """A pytest decorator: one test per (component, check) pair, with ids
    like ``laplace-deterministic_under_seed``."""
    import pytest

    params = []
    for component in components:
        for name, check in component_checks(component, data, registry=registry):
            params.append(pytest.param(component, check, id=f"{type(component).name}-{name}"))
    return pytest.mark.parametrize(("component", "check"), params)
