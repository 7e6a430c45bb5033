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
    the data frame handed to the component is unchanged afterwards. Every
    check gets its own fresh copy of the data, and this one compares with a
    pristine copy taken before any check ran.
``spends_before_release``
    a component that records differential-privacy releases calls
    ``context.spend`` before it draws any randomness.
``refuses_exhausted_budget``
    with the budget already spent, a DP component raises
    :class:`~privclust.BudgetExceededError` and draws nothing.

``privacy_audit``
    the empirical privacy auditor (below) finds no lower bound on epsilon
    above what the ledger charges: for a noise mechanism, its ``release``
    on 0 against 1 (300 runs each, float-support events included), and for
    any DP component, its run on one neighbouring pair of frames (200 runs
    each; its released labels and its own ``Generator.laplace`` draws from
    ``context.rng`` or ``context.spawn`` included). When a run released more
    values than the audit keeps, or a masker audited through its own draws
    took seeds with ``context.spawn_seeds`` (draws from them are not
    recorded), the check warns (:class:`~privclust.PrivclustWarning`,
    INCONCLUSIVE) naming what it did not see. Its result is remembered for the same component (pickled
    state), data and component tables in a process: a suite that checks one
    DP component in several tests audits it once.

``optional_capabilities``
    each optional member the component has (``planned_cost``,
    ``min_records``, ``uses_constraints``... :data:`privclust.CAPABILITIES`)
    has the declared form and applies to its kind (for a constraint handler,
    ``round_integers`` of the rules it binds to the data's columns is run on
    a few rows); a near-miss name
    (``min_record``) is reported.

Components that record no DP release pass ``spends_before_release``,
``refuses_exhausted_budget`` and ``privacy_audit`` trivially,
and so do components whose ledger records a leak for ``privacy_audit``.
Evaluators get the data as ``original`` and a release that differs from it
as ``protected``. :func:`parametrize_components` names its tests
``<name>-<check>`` (``rounding.2-<check>`` for a second instance).

The empirical privacy auditor (:mod:`privclust.audit`, its names re-exported here): :func:`audit_mechanism`,
:func:`audit_component` and :func:`audit_recipe` run a mechanism, a
component or a recipe's DP steps many times on neighbouring inputs and
return an :class:`AuditResult` whose ``epsilon_lower_bound`` holds at the
stated confidence (Clopper-Pearson bounds on an event, and for a component
a neighbouring pair, chosen on separate runs); ``passed`` is false when it
exceeds the epsilon charged. A component's audit covers its mechanisms'
releases, its released table, its released labels (:data:`LABEL_STATISTICS`
of the records the two inputs share) and its own ``laplace`` draws
(float-support and lattice events), those made with ``Generator.laplace``
from ``context.rng`` or ``context.spawn`` only: noise built any other way
(exponentials, uniforms, another library, generators made of
``context.spawn_seeds`` seeds) is audited only through the released values.
A component's audit samples the first values of *every* release of a run
(:data:`AUDIT_VALUES` in all); when some released values could not be kept,
``unseen`` names them and ``verdict`` is ``"INCONCLUSIVE"`` instead of
``"PASSED"``.
"""

from __future__ import annotations

import difflib
import hashlib
import pickle
import tomllib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import pandas as pd

from ._optional import optional
from .audit import (
    AUDIT_VALUES as AUDIT_VALUES,  # re-exported (its old place)
)
from .audit import (
    COMPONENT_TRIALS as COMPONENT_TRIALS,  # re-exported (its old place)
)
from .audit import (
    KIT_MECHANISM_TRIALS,
    KIT_TRIALS,
    SPAWNED_UNSEEN,
    AuditResult,
    Event,
    NeighbourPair,
    RecipeAudit,
    StepAudit,
    assert_audit_passes,
    audit_component,
    audit_mechanism,
    audit_recipe,
    clopper_pearson,
    empty_region_pairs,
    float_laplace_reachable,
    neighbour_pairs,
)
from .audit import (
    LABEL_STATISTICS as LABEL_STATISTICS,  # re-exported (its old place)
)
from .audit import (
    MECHANISM_TRIALS as MECHANISM_TRIALS,  # re-exported (its old place)
)
from .audit import (
    TABLE_COVER as TABLE_COVER,  # re-exported (its old place)
)
from .components import CAPABILITIES, KINDS, Masked, Partition
from .context import PrivacyContext
from .errors import BudgetExceededError, PrivclustError, PrivclustWarning
from .harness import example_frame, kind_of
from .harness import execute as _execute
from .harness import protected_for_evaluation as _protected_for_evaluation  # also its old name here
from .hookspecs import hookimpl
from .recipe import Budget, ComponentSpec, dumps_toml
from .registry import Registry, get_registry

__all__ = [
    "CHECKS",
    "AuditResult",
    "Event",
    "NeighbourPair",
    "assert_audit_passes",
    "audit_component",
    "audit_mechanism",
    "audit_recipe",
    "check_component",
    "check_id",
    "clopper_pearson",
    "empty_region_pairs",
    "float_laplace_reachable",
    "neighbour_pairs",
    "component_checks",
    "example_frame",
    "kind_of",
    "parametrize_components",
    "StepAudit",
    "RecipeAudit",
]


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

    def spawn_seeds(self, n: int) -> list[Any]:  # seeds a generator is made from: a draw too
        self.events.append("rng")
        return super().spawn_seeds(n)

    def spend(self, **kwargs: Any) -> Any:
        self.events.append("spend")
        return super().spend(**kwargs)




def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Partition) and isinstance(b, Partition):
        return _same(a.labels, b.labels) and _same(a.centres, b.centres)
    if isinstance(a, Masked) and isinstance(b, Masked):  # its partition too (one drawn outside the context differed)
        return a.data.equals(b.data) and _same(a.partition, b.partition)
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


def check_never_mutates_input(component: Any, data: pd.DataFrame, kind: str, registry: Registry,
                              pristine: pd.DataFrame | None = None) -> None:
    # component_checks hands every check a fresh copy of the input and this
    # one the pristine copy taken before any check ran too, so a modification
    # made during another check cannot hide one made here.
    reference = pristine if pristine is not None else data.copy(deep=True)
    given = data.copy(deep=True)
    # an evaluator's release too: one that wrote into it rewrote the checked file (a red-team audit)
    released = _protected_for_evaluation(given) if kind == "evaluators" else None
    released_before = released.copy(deep=True) if released is not None else None
    _execute(component, kind, given, _context(registry, seed=7), protected=released)
    assert _frames_identical(given, reference), (
        f"{type(component).name}: the data frame was modified; work on copies (e.g. data.to_numpy(dtype=float, "
        "copy=True) or data.copy())")
    assert released is None or released_before is None or _frames_identical(released, released_before), (
        f"{type(component).name}: the released frame (inputs.protected) was modified; an evaluator reads it, "
        "work on copies")


def _frames_identical(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Same values, dtypes, index and columns (NaN equal to NaN)."""
    return (a.shape == b.shape and list(a.columns) == list(b.columns) and a.index.equals(b.index)
            and list(a.dtypes) == list(b.dtypes) and a.equals(b))


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



#: The kit's audits already run in this process: (what was audited) -> (the registry's component tables it
#: resolved through, the result). The kit's audits have fixed seeds, so the same component (the same pickled
#: state) on the same data through the same tables gives the same result: a suite that checks one DP component in
#: several tests runs its audit once. Tables rebuilt (a plugin registered, blocked or swapped) audit again.
_AUDITS: dict[tuple[Any, ...], tuple[Any, AuditResult]] = {}


def _fingerprint(value: Any) -> str | None:
    """A digest of ``value``'s pickled state, or ``None`` when it cannot be pickled (then it is not remembered)."""
    try:
        return hashlib.sha256(pickle.dumps(value, protocol=5)).hexdigest()
    except Exception:  # noqa: BLE001 - any failure to pickle only means the audit is not remembered
        return None


def _audit_once(what: str, component: Any, data: pd.DataFrame | None, kind: str, registry: Registry,
               audit: Callable[[], AuditResult]) -> AuditResult:
    """``audit()``, or the result the kit's audit ``what`` of the same
    component, data and kind through the same component tables gave earlier
    in this process (:data:`_AUDITS`)."""
    state = _fingerprint((type(component).__module__, type(component).__qualname__, component))
    frame = None if data is None else _fingerprint(data)
    if state is None or (data is not None and frame is None):
        return audit()
    key = (what, kind, state, frame)
    tables = registry.tables
    seen = _AUDITS.get(key)
    if seen is not None and seen[0] is tables:
        return seen[1]
    result = audit()
    _AUDITS[key] = (tables, result)
    return result


def check_privacy_audit(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    """The empirical privacy audit of a DP component (and of a noise
    mechanism's ``release``), run once per component, data and component
    tables in a process (:func:`_audit_once`)."""
    name = type(component).name
    if kind == "noise_mechanisms":  # the release itself, 0 against 1, float-support events included
        result = _audit_once("release", component, None, kind, registry, lambda: _audit_release(component, registry))
        assert result.passed, (
            f"{name}: the empirical privacy audit of release() found a lower bound on epsilon above what it "
            f"charges; check the sensitivity, the noise scale and the sampler (a floating-point sampler is "
            f"distinguishable by the set of doubles it can produce)\n{result}")
    dp, context = _is_dp(component, data, kind, registry)
    if not dp or context.ledger.of_kind("leak"):
        return  # no DP claim to audit (or one the ledger already voids)
    # The float-support events of components would test the host's mechanisms again (audited above, by kind).
    result = _audit_once("component", component, data, kind, registry, lambda: audit_component(
        component, data, trials=KIT_TRIALS, seed=11, kind=kind, registry=registry, float_support=False, search=False))
    assert result.passed, (
        f"{name}: the empirical privacy audit's lower bound on epsilon exceeds what the ledger charges; check the "
        f"sensitivity and the noise scale\n{result}")
    if result.unseen:  # not a failure of the component, but not a pass for the values the audit could not keep
        warnings.warn(PrivclustWarning(
            f"{name}: the privacy_audit check is INCONCLUSIVE for released values it did not see: "
            + "; ".join(result.unseen) + "." + ("" if set(result.unseen) <= {SPAWNED_UNSEEN} else
                                                " Audit them with pt.audit_component(..., statistic=...).")),
            stacklevel=2)


def _audit_release(component: Any, registry: Registry) -> AuditResult:
    try:
        return audit_mechanism(component, trials=KIT_MECHANISM_TRIALS, seed=13, registry=registry)
    except PrivclustError:  # e.g. a mechanism that needs a delta
        return audit_mechanism(component, delta=1e-6, trials=KIT_MECHANISM_TRIALS, seed=13, registry=registry)


def check_optional_capabilities(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    """Each optional member the component has (:data:`privclust.CAPABILITIES`)
    is of the declared form and applies to its kind; a public member whose
    name is a near miss of one (``min_record``) is reported, since the host
    would silently ignore it."""
    cls = type(component)
    name = getattr(cls, "name", cls.__qualname__)
    problems = []
    for declared in CAPABILITIES.values():
        if declared.bound:  # a member of the rules bind() returns
            if kind == "constraint_handlers":
                problem = declared.check(component.bind(tuple(data.columns)), data.shape[1])
                if problem:
                    problems.append(problem)
            continue
        if not hasattr(cls, declared.name):
            continue
        if kind not in declared.kinds:
            problems.append(f"{declared.name} applies to {', '.join(k.replace('_', ' ') for k in declared.kinds)}, "
                            f"not to {kind.replace('_', ' ')}: the host never reads it here")
            continue
        problem = declared.check(component, data.shape[1])
        if problem:
            problems.append(problem)
    fields = {f.name for f in attrs.fields(cls)} if attrs.has(cls) else set()
    for member in dir(cls):
        if member.startswith("_") or member in CAPABILITIES or member in fields:
            continue
        close = difflib.get_close_matches(member, list(CAPABILITIES), n=1, cutoff=0.85)
        if close:
            problems.append(f"{member!r} looks like the optional member {close[0]!r} "
                            f"({CAPABILITIES[close[0]].signature}), which the host would use; rename it")
    assert not problems, f"{name}: " + "; ".join(problems)


#: Every check, by name.
CHECKS: dict[str, Callable[[Any, pd.DataFrame, str, Registry], None]] = {
    "params_round_trip": check_params_round_trip,
    "deterministic_under_seed": check_deterministic_under_seed,
    "never_mutates_input": check_never_mutates_input,
    "spends_before_release": check_spends_before_release,
    "refuses_exhausted_budget": check_refuses_exhausted_budget,
    "privacy_audit": check_privacy_audit,
    "optional_capabilities": check_optional_capabilities,
}


def component_checks(component: Any, data: pd.DataFrame | None = None, *, kind: str | None = None,
                     registry: Registry | None = None) -> Iterator[tuple[str, Callable[[Any], None]]]:
    """Yield ``(name, check)`` pairs; ``check(component)`` raises on failure."""
    # A pristine copy is taken now, before any check runs; each check gets a
    # fresh copy of it, so no check sees what another let the component do
    # to its input, and never_mutates_input compares against the pristine one.
    pristine = (example_frame() if data is None else data).copy(deep=True)
    kind = kind or kind_of(component)
    assert kind in KINDS, f"unknown kind {kind!r}"
    reg = registry if registry is not None else get_registry()
    for name, fn in CHECKS.items():
        def check(c: Any, _fn: Any = fn) -> None:
            fresh = pristine.copy(deep=True)
            if _fn is check_never_mutates_input:
                _fn(c, fresh, kind, reg, pristine=pristine)
            else:
                _fn(c, fresh, kind, reg)

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
    pytest = optional("pytest", "parametrize_components needs pytest: pip install pytest")
    params = []
    seen: dict[str, int] = {}
    for component in components:
        label = check_id(component, seen)
        for name, check in component_checks(component, data, registry=registry):
            params.append(pytest.param(component, check, id=f"{label}-{name}"))
    return pytest.mark.parametrize(("component", "check"), params)


def check_id(component: Any, seen: dict[str, int] | None = None) -> str:
    """The label of a component in the test ids of :func:`parametrize_components`:
    its ``name`` (``rounding``), then ``rounding.2``, ``rounding.3``... for
    further instances of the same component, counted in ``seen``."""
    name = str(getattr(type(component), "name", type(component).__qualname__))
    if seen is None:
        return name
    seen[name] = seen.get(name, 0) + 1
    return name if seen[name] == 1 else f"{name}.{seen[name]}"
