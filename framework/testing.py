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
    each; its released labels and its own ``laplace`` draws included). When a
    run released more values than the audit keeps, the check warns
    (:class:`~privclust.PrivclustWarning`, INCONCLUSIVE) naming the values it
    did not see.

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

The empirical privacy auditor: :func:`audit_mechanism`,
:func:`audit_component` and :func:`audit_recipe` run a mechanism, a
component or a recipe's DP steps many times on neighbouring inputs and
return an :class:`AuditResult` whose ``epsilon_lower_bound`` holds at the
stated confidence (Clopper-Pearson bounds on an event, and for a component
a neighbouring pair, chosen on separate runs); ``passed`` is false when it
exceeds the epsilon charged. A component's audit covers its mechanisms'
releases, its released table, its released labels (:data:`LABEL_STATISTICS`
of the records the two inputs share) and its own ``rng.laplace`` draws
(float-support and lattice events).
A component's audit samples the first values of *every* release of a run
(:data:`AUDIT_VALUES` in all); when some released values could not be kept,
``unseen`` names them and ``verdict`` is ``"INCONCLUSIVE"`` instead of
``"PASSED"``.
"""

from __future__ import annotations

import difflib
import math
import tomllib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from ._optional import deferred, optional
from .accounting import ADD_REMOVE, PrivacyContext, _exact, at_least, at_most, relation_kind
from .components import (
    CAPABILITIES,
    KIND_METHODS,
    KINDS,
    EvaluationInputs,
    Masked,
    Partition,
    Sensitivity,
    capability,
)
from .errors import (
    BudgetExceededError,
    ParameterError,
    PrivclustError,
    PrivclustWarning,
)
from .hookspecs import hookimpl
from .recipe import Budget, ComponentSpec, dumps_toml
from .registry import Registry, get_registry, known_leak_names
from .runner import _check_frame, check_data, compile

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
    "float_laplace_reachable",
    "neighbour_pairs",
    "component_checks",
    "example_frame",
    "kind_of",
    "parametrize_components",
    "StepAudit",
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
            inputs = EvaluationInputs(original=data, protected=_protected_for_evaluation(data),
                                      columns=tuple(data.columns), labels=pd.DataFrame(index=data.index),
                                      rng=context.rng, registry=context.registry)
            return dict(component.evaluate(inputs))
        if kind == "constraint_handlers":
            bound = component.bind(tuple(data.columns))
            return bound.project(data.to_numpy(dtype=float))
    raise AssertionError(f"unknown kind {kind!r}")


def _protected_for_evaluation(data: pd.DataFrame) -> pd.DataFrame:
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


def check_never_mutates_input(component: Any, data: pd.DataFrame, kind: str, registry: Registry,
                              pristine: pd.DataFrame | None = None) -> None:
    # component_checks hands every check a fresh copy of the input and this
    # one the pristine copy taken before any check ran too, so a modification
    # made during another check cannot hide one made here.
    reference = pristine if pristine is not None else data.copy(deep=True)
    given = data.copy(deep=True)
    _execute(component, kind, given, _context(registry, seed=7))
    assert _frames_identical(given, reference), (
        f"{type(component).name}: the data frame was modified; work on copies (e.g. data.to_numpy(dtype=float, "
        "copy=True) or data.copy())")


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


# ---------------------------------------------------------------------------
# The empirical privacy auditor
# ---------------------------------------------------------------------------
#
# A DP claim says: for every pair of neighbouring inputs D, D' and every set
# E of outputs, P[M(D) in E] <= e^eps P[M(D') in E] + delta. The auditor runs
# the mechanism on one pair many times, chooses an event E on a first half of
# the outputs (selection), counts how often E happens on a fresh second half
# (estimation), and turns the counts into one-sided Clopper-Pearson bounds
# p_low <= P[M(D) in E] and q_high >= P[M(D') in E]. Then
# eps >= ln((p_low - delta) / q_high) holds with the stated confidence: a
# statistically valid lower bound on the epsilon the mechanism provides
# (StatDP, Ding et al. 2018; Jagielski et al. 2020; DP-Sniper, Bichsel et al.
# 2021). Because the event is chosen on other samples than those it is
# measured on, only the final statement needs a confidence level: the two
# bounds of each audited pair share alpha (Bonferroni), and so do the pairs.

#: Default number of runs on each input (half for selection, half for estimation).
MECHANISM_TRIALS = 20_000
COMPONENT_TRIALS = 400
#: Runs per input of the conformance kit's ``privacy_audit`` check.
KIT_TRIALS = 200
#: Runs per input of the kit's audit of a noise mechanism's ``release``.
KIT_MECHANISM_TRIALS = 300

#: Values kept per run of a component, shared over every release of the run
#: (each release keeps its first values; a release smaller than its share
#: keeps everything and leaves the rest to the others, see
#: :func:`_allocate`): an event on part of the output is an event on the
#: output, so the bound stays valid and the audit's memory is about runs x
#: AUDIT_VALUES whatever the component releases. Values beyond the share are
#: not audited, and the result says so (``unseen``; verdict INCONCLUSIVE).
AUDIT_VALUES = 4096
#: Releases of a run that get a projection of their own (the sum of their values).
_SLOT_PROJECTIONS = 16

_TWO53 = float(2**53)


@attrs.frozen(eq=False)
class Event:
    """A set of outputs, chosen on the selection half: ``contains(outputs)``
    says, for each run (a row of ``outputs``), whether its output is in the set."""

    family: str
    description: str
    test: Callable[[np.ndarray], np.ndarray] = attrs.field(repr=False)

    def contains(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(self.test(outputs), dtype=bool)


@attrs.frozen(kw_only=True)
class NeighbourPair:
    """Two neighbouring inputs: frames (for a component) or values (for a
    mechanism's ``release``), and how they differ."""

    first: Any
    second: Any
    description: str


@attrs.frozen(kw_only=True)
class AuditResult:
    """What an audit found.

    ``epsilon_lower_bound`` holds with probability at least ``confidence``
    (over the auditor's own randomness) for the mechanism's real privacy
    loss: if the mechanism were ``claimed_epsilon``-DP (with
    ``claimed_delta``), a bound above ``claimed_epsilon`` would happen with
    probability at most ``1 - confidence``. ``passed`` is
    ``epsilon_lower_bound <= claimed_epsilon`` on the values audited.
    ``unseen`` describes released values the audit did not see (a run
    released more than :data:`AUDIT_VALUES`); they are also among the
    ``notes``. ``verdict`` is ``"FAILED"`` when the bound exceeds the claim,
    ``"INCONCLUSIVE"`` when it does not but some values were not seen (no
    evidence either way about them), else ``"PASSED"``.
    """

    subject: str
    audited: str
    neighbours: str
    epsilon_lower_bound: float
    claimed_epsilon: float
    claimed_delta: float
    event: str
    direction: str
    counts: tuple[int, int]
    trials: int
    p_lower: float
    q_upper: float
    confidence: float
    passed: bool
    notes: tuple[str, ...] = ()
    unseen: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every value the runs released was audited."""
        return not self.unseen

    @property
    def verdict(self) -> str:
        """``"FAILED"``, ``"INCONCLUSIVE"`` (not failed, but some released values unseen) or ``"PASSED"``."""
        if not self.passed:
            return "FAILED"
        return "INCONCLUSIVE" if self.unseen else "PASSED"

    def shown_figures(self) -> tuple[str, str]:
        """The lower bound and the charge (``"epsilon 1, delta 1e-06"``) as
        the audit prints them: the charge rounded **up**, the lower bound
        **down** (neither shown figure says more than what holds), with 4
        significant digits, or more when a failed audit's bound and charge
        would otherwise read the wrong way round."""
        for digits in range(4, 18):
            lower = at_most(self.epsilon_lower_bound, digits)
            charged = at_least(self.claimed_epsilon, digits)
            if self.passed or not (math.isfinite(self.epsilon_lower_bound) and math.isfinite(self.claimed_epsilon)) \
                    or float(lower) > float(charged):
                break
        delta = f", delta {at_least(self.claimed_delta, 3)}" if self.claimed_delta else ""
        return lower, f"epsilon {charged}{delta}"

    def __str__(self) -> str:
        verdict = self.verdict
        if verdict == "INCONCLUSIVE":
            verdict += " (no evidence against the charge in the values audited; some released values were not seen)"
        lower, claim = self.shown_figures()
        sign = "<=" if self.passed else ">"
        lines = [
            f"privacy audit of {self.subject}: {verdict}",
            f"  epsilon lower bound {lower} {sign} charged {claim} "
            f"({self.confidence:.0%} confidence{'; on the values audited' if self.unseen else ''})",
            f"  audited: {self.audited}",
            f"  neighbours: {self.neighbours}",
            f"  event: {self.event}",
            f"  {self.direction}: {self.counts[0]} and {self.counts[1]} of {self.trials} fresh runs each "
            f"(p >= {self.p_lower:.4g}, q <= {self.q_upper:.4g})",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# -- statistics ---------------------------------------------------------------------


def clopper_pearson(hits: int | np.ndarray, n: int, alpha: float) -> tuple[Any, Any]:
    """One-sided Clopper-Pearson bounds: ``(low, high)`` with
    ``P[p >= low] >= 1 - alpha`` and ``P[p <= high] >= 1 - alpha``."""
    beta = deferred("scipy.stats").beta  # heavy: imported when an audit first computes a bound
    k = np.asarray(hits, dtype=float)
    with np.errstate(all="ignore"):
        low = np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)
        high = np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)
    return low, high


def _epsilon_bound(p_low: Any, q_high: Any, delta: float) -> Any:
    """``ln((p_low - delta) / q_high)``: ``-inf`` when ``p_low <= delta``
    (negative values mean no evidence; the result is clamped at 0)."""
    with np.errstate(all="ignore"):
        return np.log(np.maximum(np.asarray(p_low, dtype=float) - delta, 0.0) / np.asarray(q_high, dtype=float))


# -- event families ------------------------------------------------------------------


def _threshold_and_bin_events(values_a: np.ndarray, values_b: np.ndarray, label: str,
                              project: Callable[[np.ndarray], np.ndarray]) -> list[Event]:
    """Threshold events ``v > t`` / ``v <= t`` and unions of histogram bins
    on a 1-D statistic ``v = project(outputs)``."""
    pooled = np.concatenate([values_a, values_b])
    pooled = pooled[np.isfinite(pooled)]
    events: list[Event] = []
    if pooled.size == 0:
        return events
    distinct = np.unique(pooled)
    if distinct.size <= 64:  # discrete outputs: one bin per value
        edges = distinct
        def bin_of(v: np.ndarray, _e: np.ndarray = edges) -> np.ndarray:
            i = np.searchsorted(_e, v)
            i = np.minimum(i, _e.size - 1)
            return np.where(np.isfinite(v) & (_e[i] == v), i, -1)
        n_bins = edges.size
        thresholds = distinct[:-1]
    else:
        cuts = np.unique(np.quantile(pooled, np.linspace(0, 1, 33)[1:-1]))
        def bin_of(v: np.ndarray, _c: np.ndarray = cuts) -> np.ndarray:
            return np.where(np.isfinite(v), np.searchsorted(_c, v, side="right"), -1)
        n_bins = cuts.size + 1
        thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, 101)[1:-1]))
    for t in thresholds:
        t = float(t)
        events.append(Event("threshold", f"{label} > {t:.6g}",
                            lambda X, _t=t: project(X) > _t))
        events.append(Event("threshold", f"{label} <= {t:.6g}",
                            lambda X, _t=t: project(X) <= _t))
    ca = np.bincount(bin_of(values_a)[bin_of(values_a) >= 0], minlength=n_bins)
    cb = np.bincount(bin_of(values_b)[bin_of(values_b) >= 0], minlength=n_bins)
    for ratio, name in (((ca + 1) / (cb + 1), "first"), ((cb + 1) / (ca + 1), "second")):
        order = np.argsort(-ratio, kind="stable")
        for j in range(1, min(n_bins, 16) + 1):
            chosen = np.sort(order[:j])
            events.append(Event(
                "histogram", f"{label} in {j} histogram bin(s) more likely from the {name} input "
                             f"(bins {chosen.tolist()} of {n_bins})",
                lambda X, _c=chosen: np.isin(bin_of(project(X)), _c)))
    return events


def _granularity_log2(x: np.ndarray) -> np.ndarray:
    """log2 of the largest power of two that divides each finite nonzero x
    (``+inf`` for 0, ``nan`` for non-finite values)."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, np.nan)
    ok = np.isfinite(x) & (x != 0)
    m, e = np.frexp(np.abs(x[ok]))
    mant = (m * _TWO53).astype(np.uint64)  # an integer below 2^53
    tz = np.zeros(mant.shape, dtype=np.int64)
    rest = mant.copy()
    for _ in range(53):
        even = (rest & np.uint64(1)) == 0
        if not even.any():
            break
        tz += even
        rest = np.where(even, rest >> np.uint64(1), rest)
    out[ok] = (e - 53 + tz).astype(float)
    out[np.isfinite(x) & (x == 0)] = np.inf
    return out


def _lattice_events(values_a: np.ndarray, values_b: np.ndarray, anchors: Sequence[float]) -> list[Event]:
    """``(x - anchor)`` is a multiple of 2^k, for the finest lattice each
    input's selection outputs lie on."""
    events: list[Event] = []
    ks = set()
    for values in (values_a, values_b):
        g = _granularity_log2(values)
        g = g[np.isfinite(g)]
        if g.size:
            ks.add(int(g.min()))
    for anchor in dict.fromkeys(float(a) for a in anchors):
        for k in sorted(ks):
            step = math.ldexp(1.0, k)
            events.append(Event(
                "lattice", f"output - {anchor:g} is a multiple of 2^{k}",
                lambda X, _s=step, _a=anchor: np.fmod(X[:, 0] - _a, _s) == 0))
    return events


def float_laplace_reachable(x: Any, loc: float, scale: float, *, window: int = 3, limit: int = 256) -> np.ndarray:
    """Whether each ``x`` is an output ``loc + noise`` that the textbook
    floating-point Laplace sampler (numpy's ``Generator.laplace(0, scale)``)
    can produce from ``loc``.

    numpy draws ``U = j 2^-53`` (``0 < j < 2^53``) and returns
    ``0 - scale log(2 - U - U)`` for ``U >= 0.5``, else ``0 + scale log(U + U)``
    (libm ``log``). The check inverts that map (``U`` from ``x - loc``), tries
    the grid points ``j`` around the inverse that rounding allows, recomputes
    the forward map exactly and compares ``fl(loc + noise)`` with ``x``
    (Mironov 2012). Where more than ``limit`` grid points are possible the
    output counts as reachable. The answer is a fixed function of ``x``, so
    it is a valid event whatever its rounding slack.
    """
    x = np.atleast_1d(np.asarray(x, dtype=float))
    out = np.zeros(x.shape, dtype=bool)
    n_est = x - loc
    y = n_est / scale
    with np.errstate(all="ignore"):
        u = np.where(y < 0, 0.5 * np.exp(y), 1.0 - 0.5 * np.exp(-y))
        side = np.where(y < 0, u, 1.0 - u)  # dU/dy
        slack = (np.spacing(np.abs(x)) + np.spacing(np.abs(n_est)) + np.spacing(np.abs(loc))) / scale
        du = side * (slack + (np.abs(y) + 4.0) * 2.0**-50) + 2.0**-53
        klo = np.floor((u - du) * _TWO53) - window
        khi = np.ceil((u + du) * _TWO53) + window
    finite = np.isfinite(klo) & np.isfinite(khi)
    klo = np.clip(np.where(finite, klo, 1.0), 1.0, _TWO53 - 1)
    khi = np.clip(np.where(finite, khi, 0.0), 0.0, _TWO53 - 1)
    width = khi - klo + 1
    out[finite & (width > limit)] = True
    todo = np.flatnonzero(finite & (width >= 1) & (width <= limit))
    log = math.log
    for i in todo:
        xi = float(x[i])
        for j in range(int(klo[i]), int(khi[i]) + 1):
            U = j / _TWO53
            noise = (0.0 - scale * log(2.0 - U - U)) if U >= 0.5 else (0.0 + scale * log(U + U))
            if loc + noise == xi:
                out[i] = True
                break
    return out


def _float_support_events(inputs: Sequence[float], scale: float) -> list[Event]:
    return [Event("float-support",
                  f"the output is reproducible by numpy's floating-point Laplace sampler (scale {scale:.6g}) "
                  f"from the input {a:g}",
                  lambda X, _a=float(a): float_laplace_reachable(X[:, 0], _a, scale))
            for a in inputs]


# -- projections of vector outputs ------------------------------------------------------


def _projections(A: np.ndarray, B: np.ndarray) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    """1-D statistics of the outputs, chosen on the selection half."""
    m = A.shape[1]
    if m == 1:
        return [("the output", lambda X: X[:, 0])]
    out: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ma, mb = np.nanmean(A, axis=0), np.nanmean(B, axis=0)
        sd = np.sqrt(0.5 * (np.nanvar(A, axis=0) + np.nanvar(B, axis=0)))
        diff = np.nan_to_num(ma - mb)
        z = np.nan_to_num(np.abs(diff) / np.where(sd > 0, sd, np.inf))
    w = np.nan_to_num(diff / np.where(sd > 0, sd ** 2, np.inf))
    if np.any(w != 0):
        out.append(("the projection of the output on its mean difference (weights chosen on the selection half)",
                    lambda X, _w=w: np.nan_to_num(X) @ _w))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ca, cb = np.nanmedian(A, axis=0), np.nanmedian(B, axis=0)
        spread = np.nanmedian(np.abs(np.concatenate([A - ca, B - cb])), axis=0)
    moved = np.isfinite(ca) & np.isfinite(cb) & (ca != cb)
    if moved.any():
        spread = np.where(np.isfinite(spread) & (spread > 0), spread, 1.0)

        def laplace_ratio(X: np.ndarray, _a: np.ndarray = ca, _b: np.ndarray = cb, _s: np.ndarray = spread,
                          _m: np.ndarray = moved) -> np.ndarray:
            Z = np.nan_to_num(X[:, _m] if X.shape[1] >= _m.size else np.full((X.shape[0], int(_m.sum())), np.nan))
            return np.sum((np.abs(Z - _b[_m]) - np.abs(Z - _a[_m])) / _s[_m], axis=1)

        out.append(("the Laplace log-likelihood ratio of the output between the two inputs' medians (chosen on the "
                    "selection half)", laplace_ratio))
    out.append(("the sum of the output's values", lambda X: np.nansum(X, axis=1)))
    for j in np.argsort(-z, kind="stable")[:3]:
        if z[j] > 0:
            out.append((f"value {int(j)} of the output", lambda X, _j=int(j): X[:, _j]))
    if np.isnan(A).any() or np.isnan(B).any():
        out.append(("the number of values released", lambda X: np.sum(~np.isnan(X), axis=1).astype(float)))
    return out


def _candidate_events(A: np.ndarray, B: np.ndarray, extra: Sequence[Event]) -> list[Event]:
    events = list(extra)
    for label, project in _projections(A, B):
        events += _threshold_and_bin_events(project(A), project(B), label, project)
    return events


# -- the audit of one pair ------------------------------------------------------------------


@attrs.frozen
class _PairOutcome:
    bound: float
    event: Event
    forward: bool
    counts: tuple[int, int]
    n: int
    p_low: float
    q_high: float


def _padded(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = max(A.shape[1], B.shape[1])  # runs may release different numbers of values: pad with NaN
    pad = ((0, 0), (0, width - A.shape[1])), ((0, 0), (0, width - B.shape[1]))
    return np.pad(A, pad[0], constant_values=np.nan), np.pad(B, pad[1], constant_values=np.nan)


def _select(A_sel: np.ndarray, B_sel: np.ndarray, delta: float, alpha: float,
            extra: Callable[[np.ndarray, np.ndarray], Sequence[Event]]) -> tuple[Event, bool, float]:
    """Choose an event on selection runs: their first part builds the
    candidate events (thresholds, bins, projections fitted to those
    outputs), their second part scores them, so that an event fitted to
    noise does not win the selection. Returns the event, its direction and
    its score (the bound it gives on the scoring part)."""
    A_sel, B_sel = _padded(A_sel, B_sel)
    build = min(A_sel.shape[0], B_sel.shape[0]) // 2
    events = _candidate_events(A_sel[:build], B_sel[:build], extra(A_sel[:build], B_sel[:build]))
    A_choose, B_choose = A_sel[build:], B_sel[build:]
    ka = np.array([int(e.contains(A_choose).sum()) for e in events])
    kb = np.array([int(e.contains(B_choose).sum()) for e in events])
    low_a, high_a = clopper_pearson(ka, A_choose.shape[0], alpha)
    low_b, high_b = clopper_pearson(kb, B_choose.shape[0], alpha)
    scores = np.concatenate([_epsilon_bound(low_a, high_b, delta), _epsilon_bound(low_b, high_a, delta)])
    scores = np.where(np.isnan(scores), -np.inf, scores)
    best = int(np.argmax(scores))  # the first of the best: events are listed in a fixed order
    return events[best % len(events)], best < len(events), float(scores[best])


def _audit_pair(A: np.ndarray, B: np.ndarray, delta: float, alpha: float,
                extra: Callable[[np.ndarray, np.ndarray], Sequence[Event]], selection: int | None = None
                ) -> _PairOutcome:
    """Select an event on the first ``selection`` rows of each sample (half
    by default; :func:`_select`), measure it on the rest."""
    A, B = _padded(A, B)
    rows = min(A.shape[0], B.shape[0])
    half = rows // 2 if selection is None else selection
    n = rows - half if selection is not None else half
    A_est, B_est = A[half:half + n], B[half:half + n]
    event, forward, _ = _select(A[:half], B[:half], delta, alpha, extra)
    ka, kb = int(event.contains(A_est).sum()), int(event.contains(B_est).sum())
    hits = (ka, kb) if forward else (kb, ka)
    p_low, _ = clopper_pearson(hits[0], n, alpha)
    _, q_high = clopper_pearson(hits[1], n, alpha)
    bound = max(0.0, float(_epsilon_bound(p_low, q_high, delta)))
    return _PairOutcome(bound, event, forward, hits, n, float(p_low), float(q_high))


def _finish(subject: str, audited: str, pairs: Sequence[NeighbourPair], outcomes: Sequence[_PairOutcome],
            claimed: tuple[float, float], confidence: float, notes: Sequence[str],
            unseen: Sequence[str] = ()) -> AuditResult:
    k = int(np.argmax([o.bound for o in outcomes]))
    o, pair = outcomes[k], pairs[k]
    direction = ("p = P[M(D) in E], q = P[M(D') in E]" if o.forward
                 else "p = P[M(D') in E], q = P[M(D) in E]")
    eps, delta = claimed
    passed = o.bound <= eps * (1 + 1e-9)
    return AuditResult(
        subject=subject, audited=audited,
        neighbours=pair.description + (f" (the worst of {len(pairs)} pairs)" if len(pairs) > 1 else ""),
        epsilon_lower_bound=o.bound, claimed_epsilon=eps, claimed_delta=delta,
        event=f"{o.event.description} [{o.event.family}]", direction=direction, counts=o.counts, trials=o.n,
        p_lower=o.p_low, q_upper=o.q_high, confidence=confidence, passed=passed,
        notes=(*notes, *(f"not audited (INCONCLUSIVE for these values): {u}" for u in unseen)),
        unseen=tuple(unseen))


def _stack(outputs: Sequence[np.ndarray]) -> np.ndarray:
    """Runs' outputs as rows (shorter outputs padded with NaN)."""
    width = max((o.size for o in outputs), default=0)
    X = np.full((len(outputs), max(width, 1)), np.nan)
    for i, o in enumerate(outputs):
        X[i, :o.size] = o
    return X


# -- mechanisms -------------------------------------------------------------------------------


def audit_mechanism(mechanism: Any, *, epsilon: float = 1.0, delta: float = 0.0, sensitivity: float = 1.0,
                    pairs: Sequence[tuple[Any, Any]] | None = None, trials: int = MECHANISM_TRIALS,
                    seed: int = 0, alpha: float = 0.05, registry: Registry | None = None) -> AuditResult:
    """Audit a noise mechanism's ``release``.

    Each run is one call ``mechanism.release(value, sensitivity=...,
    epsilon=..., delta=...)`` through a fresh :class:`PrivacyContext` whose
    seed is spawned from ``seed``; ``trials`` runs on each input of each pair
    (half to choose the event, half to measure it). The default pair is
    ``0`` against ``sensitivity``; ``pairs`` gives others, as ``(value,
    value)`` tuples (scalars or arrays whose L1 distance is at most the
    sensitivity). The claim is what the runs charged (``context.spent``).
    """
    reg = registry if registry is not None else get_registry()
    if isinstance(mechanism, str | ComponentSpec):
        mechanism = reg.create("noise_mechanisms", mechanism)
    name = getattr(type(mechanism), "name", type(mechanism).__qualname__)
    if trials < 20:
        raise ParameterError(f"audit_mechanism: trials must be at least 20; got {trials}")
    given = list(pairs) if pairs is not None else [(0.0, float(sensitivity))]
    neighbour_pairs = [NeighbourPair(first=a, second=b, description=f"the value {_show(a)} against {_show(b)}")
                       for a, b in given]
    root = np.random.SeedSequence(seed)
    kwargs: dict[str, Any] = {"sensitivity": sensitivity, "epsilon": epsilon}
    if delta:
        kwargs["delta"] = delta
    charged = [0.0, 0.0]
    share = alpha / (2 * len(neighbour_pairs))
    outcomes = []
    for pair, seeds in zip(neighbour_pairs, root.spawn(len(neighbour_pairs)), strict=True):
        samples = []
        for value, side in zip((pair.first, pair.second), seeds.spawn(2), strict=True):
            rows = []
            for child in side.spawn(trials):
                context = PrivacyContext(seed=child, registry=reg)
                out = mechanism.release(np.array(value, dtype=float, ndmin=1), context=context,
                                        relation="replace-one (the audited pair)", covers="the audited value",
                                        **kwargs)
                rows.append(np.asarray(out, dtype=float).ravel())
                spent = context.spent
                charged = [max(charged[0], spent[0]), max(charged[1], spent[1])]
            samples.append(_stack(rows))
        A, B = samples
        scalar = A.shape[1] == 1 and np.ndim(pair.first) == 0 and np.ndim(pair.second) == 0

        def extra(A_sel: np.ndarray, B_sel: np.ndarray, _p: NeighbourPair = pair, _s: bool = scalar) -> list[Event]:
            if not _s:
                return []
            inputs = (float(_p.first), float(_p.second))
            return (_float_support_events(inputs, float(sensitivity) / float(epsilon))
                    + _lattice_events(A_sel[:, 0], B_sel[:, 0], (0.0, *inputs)))

        outcomes.append(_audit_pair(A, B, charged[1], share, extra))
    return _finish(f"the {name} mechanism (release with sensitivity {sensitivity:g}, epsilon {_exact(epsilon)}"
                   + (f", delta {_exact(delta)}" if delta else "") + ")",
                   "the released value of each run", neighbour_pairs, outcomes, (charged[0], charged[1]),
                   1 - alpha, [])


def _show(value: Any) -> str:
    arr = np.asarray(value)
    return f"{float(arr):g}" if arr.ndim == 0 else np.array2string(arr, precision=4, threshold=6)


# -- components -------------------------------------------------------------------------------


class _Recorder:
    """A noise mechanism that also keeps what it releases."""

    def __init__(self, mechanism: Any, sink: list[np.ndarray], counts: list[int]):
        self._mechanism = mechanism
        self._sink = sink
        self.counts = counts
        self._inputs: list[tuple[np.ndarray, float]] = []
        self._covers: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mechanism, name)

    def release(self, values: Any, *args: Any, **kwargs: Any) -> Any:
        out = self._mechanism.release(values, *args, **kwargs)
        released = np.asarray(out, dtype=float).ravel()
        self.counts.append(released.size)
        # Every release keeps its first AUDIT_VALUES values (the run's share of each is fixed when the run
        # ends, _allocate): a large early release cannot crowd out the later ones.
        self._sink.append(released[:AUDIT_VALUES].copy())
        try:
            scale = Sensitivity.of(kwargs["sensitivity"]).l1 / float(kwargs["epsilon"])
        except Exception:  # a mechanism with another signature: no float-support event
            scale = math.nan
        self._inputs.append((np.array(values, dtype=float, copy=True).ravel()[:AUDIT_VALUES], scale))
        self._covers.append(str(kwargs.get("covers", "") or ""))
        return out


class _RecordingGenerator(np.random.Generator):
    """A generator on the same bit stream as the step's (so the run draws
    exactly what it would draw unaudited) that also keeps what its
    ``laplace`` calls return, with their ``loc`` and ``scale``: the step's
    own floating-point draws, which the float-support event is tried on."""

    def __init__(self, bit_generator: Any, sink: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None):
        super().__init__(bit_generator)
        self._sink = sink

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        out = super().laplace(loc, scale, size)
        sink = getattr(self, "_sink", None)
        if sink is not None and sum(d[2].size for d in sink) < AUDIT_VALUES:
            drawn = np.asarray(out, dtype=float)
            sink.append((np.broadcast_to(np.asarray(loc, dtype=float), drawn.shape).ravel().copy(),
                         np.broadcast_to(np.asarray(scale, dtype=float), drawn.shape).ravel().copy(),
                         drawn.ravel().copy()))
        return out


class _AuditContext(PrivacyContext):
    """A context whose noise mechanisms record every value they release
    (and the values and Laplace scale they were given), and whose
    generators record the step's own ``laplace`` draws."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.releases: list[np.ndarray] = []
        self.release_sizes: list[int] = []
        self.inputs: list[tuple[np.ndarray, float]] = []
        self.covers: list[str] = []
        self.draws: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._wrapped: tuple[Any, np.random.Generator] | None = None

    def mechanism(self, value: Any = "laplace") -> Any:
        recorder = _Recorder(super().mechanism(value), self.releases, self.release_sizes)
        recorder._inputs = self.inputs
        recorder._covers = self.covers
        return recorder

    @property
    def rng(self) -> np.random.Generator:
        base = super().rng
        if self._wrapped is None or self._wrapped[0] is not base:
            self._wrapped = (base, _RecordingGenerator(base.bit_generator, self.draws))
        return self._wrapped[1]

    def spawn(self, n: int) -> list[np.random.Generator]:
        return [_RecordingGenerator(g.bit_generator, self.draws) for g in super().spawn(n)]


def neighbour_pairs(data: pd.DataFrame, relation: str = "replace-one", *, record: int = 0,
                    bounds: Any = None) -> list[NeighbourPair]:
    """Neighbouring frames the auditor builds from ``data``.

    ``replace-one``: the record at position ``record`` moved to the opposite
    corner of the box (each column's low or high end, whichever is farther
    from the record's value); the box is the public ``bounds``
    (``{column: [low, high]}``) where given, else the data's range.
    ``add/remove``: the data, against the data with that corner added as one
    more record.
    """
    values, low, high = _box(data, bounds)
    row = values[record]
    corner = np.where(np.abs(row - low) >= np.abs(high - row), low, high)
    moved = _placed(data, record, corner)
    corner_text = ", ".join(f"{c} = {v:g}" for c, v in zip(data.columns, corner, strict=True))
    if relation_kind(relation) == ADD_REMOVE:
        extra = moved.iloc[[record]].copy()
        extra.index = [_fresh_label(data.index)]
        bigger = pd.concat([data, extra])
        return [NeighbourPair(first=data, second=bigger,
                              description=f"the data ({len(data)} records) against the data plus one record at "
                                          f"({corner_text}) (add/remove)")]
    return [NeighbourPair(first=data, second=moved,
                          description=f"the data ({len(data)} records) against the same with record {record} "
                                      f"moved to ({corner_text}) (replace-one)")]


#: Largest number of candidate points :func:`empty_region_pairs` scores (corners, then a grid of 5 per column).
EMPTY_CANDIDATES = 4096


def empty_region_pairs(data: pd.DataFrame, bounds: Any = None) -> list[NeighbourPair]:
    """An add/remove neighbour that changes a data-adaptive partition: the
    data against the data plus one record at the point of the box (the
    public ``bounds`` where given, else the data's range) farthest from
    every record, each column scaled by its range (among the box's corners
    and a grid of 5 points per column, at most :data:`EMPTY_CANDIDATES` of
    them). A record there lands in empty space: a tree that splits cells
    holding records (PrivTree, a grid, a k-d tree) splits there only with
    it, so a partition whose structure is not noised differs between the
    two inputs, while a record added among others (the corner of a box the
    data fill) may change no cell's split."""
    values, low, high = _box(data, bounds)
    d = values.shape[1]
    span = np.where(high > low, high - low, 1.0)
    candidates = []
    if 2 ** d <= EMPTY_CANDIDATES:
        candidates.append(np.array(np.meshgrid(*[[0.0, 1.0]] * d, indexing="ij")).reshape(d, -1).T)
    if 5 ** d <= EMPTY_CANDIDATES:
        candidates.append(np.array(np.meshgrid(*[np.linspace(0.0, 1.0, 5)] * d, indexing="ij")).reshape(d, -1).T)
    if not candidates:  # many columns: the corner opposite the data's mean
        mean = np.nanmean((values - low) / span, axis=0)
        candidates.append((mean < 0.5).astype(float)[None, :])
    points = np.unique(np.concatenate(candidates), axis=0)
    X = np.nan_to_num((np.clip(values, low, high) - low) / span, nan=0.5)
    nearest = np.full(points.shape[0], np.inf)
    for start in range(0, X.shape[0], 2048):  # candidates x records in blocks
        block = X[start:start + 2048]
        gaps = np.sqrt(((points[:, None, :] - block[None, :, :]) ** 2).sum(axis=2))
        nearest = np.minimum(nearest, gaps.min(axis=1))
    unit = points[int(np.argmax(nearest))]
    point = np.where(unit == 1.0, high, low + unit * (high - low))  # a corner exactly (low + 1 * span may round)
    extra = _placed(data.iloc[[0]], 0, point)
    extra.index = [_fresh_label(data.index)]
    text = ", ".join(f"{c} = {v:g}" for c, v in zip(data.columns, point, strict=True))
    return [NeighbourPair(first=data, second=pd.concat([data, extra]),
                          description=f"the data ({len(data)} records) against the data plus one record in empty "
                                      f"space at ({text}), the point of the box farthest from every record "
                                      "(add/remove)")]


def _box(data: pd.DataFrame, bounds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data's values and the box records move in: the public ``bounds`` where given, else the data's range."""
    values = data.to_numpy(dtype=float)
    low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    if isinstance(bounds, dict):
        for j, column in enumerate(data.columns):
            if column in bounds:
                low[j], high[j] = float(bounds[column][0]), float(bounds[column][1])
    return values, low, high


def _placed(data: pd.DataFrame, record: int, point: np.ndarray) -> pd.DataFrame:
    """A copy of ``data`` with the record at position ``record`` put at ``point`` (rounded in integer columns)."""
    moved = data.copy(deep=True)
    for j, column in enumerate(data.columns):
        value = point[j]
        if pd.api.types.is_integer_dtype(data[column]):
            value = int(round(value))
        moved.iloc[record, j] = value
    return moved


def _public_bounds(component: Any) -> dict[str, Any] | None:
    bounds = getattr(component, "bounds", None)
    try:
        return {str(k): (float(v[0]), float(v[1])) for k, v in dict(bounds).items()} if bounds else None
    except (TypeError, ValueError, IndexError):
        return None


def _fresh_label(index: pd.Index) -> Any:
    if pd.api.types.is_integer_dtype(index):
        return int(index.max()) + 1 if len(index) else 0
    return "__audit_extra__"


def _run_component(component: Any, kind: str, data: pd.DataFrame, reg: Registry, seed: Any
                   ) -> tuple[Any, _AuditContext]:
    # The audit runs a component whose parameters come from the data too: its
    # leak entries are then noted (the release makes no DP claim), not refused.
    leaks = (*known_leak_names(reg), *(capability(type(component), "leak_names") or ()))
    context = _AuditContext(Budget(allow_leaks=leaks), seed=seed, registry=reg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _execute(component, kind, data, context)
    return result, context


def _allocate(sizes: Sequence[int], budget: int = AUDIT_VALUES) -> list[int]:
    """How many of its first values each release keeps: everything when the
    run released at most ``budget`` values, else a max-min fair share (a
    release smaller than the common level keeps all its values, the others
    keep the level; what rounding leaves goes one each to the first of
    them). Every release keeps at least one value as long as there are at
    most ``budget`` releases."""
    s = np.asarray(sizes, dtype=np.int64)
    if int(s.sum()) <= budget:
        return [int(v) for v in s]
    low, high = 0, int(s.max())  # the largest level whose total fits the budget
    while low < high:
        mid = (low + high + 1) // 2
        if int(np.minimum(s, mid).sum()) <= budget:
            low = mid
        else:
            high = mid - 1
    keep = np.minimum(s, low)
    left = budget - int(keep.sum())
    for i in np.flatnonzero(s > low)[:left]:
        keep[i] += 1
    return [int(v) for v in keep]


@attrs.frozen
class _RunValues:
    """What one run released, release by release (each cut to its share)."""

    parts: tuple[np.ndarray, ...]
    sizes: tuple[int, ...]
    inputs: tuple[tuple[np.ndarray, float], ...] | None
    covers: tuple[str, ...]
    what: str


#: What the audit says of a masker's released table whose values are not all values its mechanisms released.
TABLE_COVER = "the table the step released (not all of its values are values its noise mechanisms released)"


def _released(result: Any, context: _AuditContext) -> _RunValues:
    if context.releases:
        releases, sizes, covers = list(context.releases), list(context.release_sizes), list(context.covers)
        # A masker publishes its table: when a value of it is none of the values its mechanisms released, the
        # table is not (only) what the mechanisms drew, and it is audited as a release of its own (a step that
        # charges the budget for a noisy release and returns the raw values is caught here).
        table = result.data.to_numpy(dtype=float).ravel() if isinstance(result, Masked) else None
        extra = table is not None and table.size > 0 and not bool(np.isin(table, np.concatenate(releases)).all())
        if extra:
            releases.append(table)
            sizes.append(table.size)
            covers.append(TABLE_COVER)
        keep = _allocate(sizes)
        inputs = (tuple((v[:k], sc) for (v, sc), k in zip(context.inputs, keep, strict=False))
                  if len(context.inputs) == len(context.release_sizes) and not extra else None)
        return _RunValues(parts=tuple(r[:k] for r, k in zip(releases, keep, strict=True)),
                          sizes=tuple(sizes), inputs=inputs, covers=tuple(covers), what="mechanisms")
    if isinstance(result, Masked):
        values, what = result.data.to_numpy(dtype=float).ravel(), "the released table"
    elif isinstance(result, Partition):
        if result.centres is not None:
            values, what = np.asarray(result.centres, dtype=float).ravel(), "the released centres"
        else:
            values, what = np.asarray(result.labels, dtype=float).ravel(), "the released labels"
    else:
        values, what = np.asarray(result, dtype=float).ravel(), "the component's output"
    return _RunValues(parts=(values[:AUDIT_VALUES],), sizes=(values.size,), inputs=None, covers=("",), what=what)


def _slot_widths(runs: Sequence[_RunValues]) -> list[int]:
    """The columns given to each release (by its position in the run): the
    most values any run kept of it, so that a column holds the same value of
    the same release in every run (NaN where a run kept fewer)."""
    widths: list[int] = []
    for run in runs:
        for r, part in enumerate(run.parts):
            if r == len(widths):
                widths.append(0)
            widths[r] = max(widths[r], part.size)
    return widths


def _laid_out(parts: Sequence[np.ndarray], widths: Sequence[int]) -> np.ndarray:
    row = np.full(max(sum(widths), 1), np.nan)
    start = 0
    for r, width in enumerate(widths):
        if r < len(parts):
            row[start:start + parts[r].size] = parts[r]
        start += width
    return row


def _audited_text(runs: Sequence[_RunValues], widths: Sequence[int]) -> tuple[str, list[str]]:
    """What the audit saw, and what it did not (one line per release cut
    short, the first few of them, then one line for the rest)."""
    totals = [sum(run.sizes) for run in runs]
    cut_runs: dict[int, list[int]] = {}  # release -> [runs cut, fewest kept, most released]
    for run in runs:
        kept = np.fromiter((p.size for p in run.parts), dtype=np.int64, count=len(run.parts))
        sizes = np.asarray(run.sizes, dtype=np.int64)
        for r in np.flatnonzero(kept < sizes).tolist():
            entry = cut_runs.setdefault(r, [0, int(kept[r]), int(sizes[r])])
            entry[0] += 1
            entry[1] = min(entry[1], int(kept[r]))
            entry[2] = max(entry[2], int(sizes[r]))
    unseen: list[str] = []
    cut = sorted(cut_runs)
    for r in cut[:8]:
        count, kept_r, size = cut_runs[r]
        cover = next((run.covers[r] for run in runs if r < len(run.covers) and run.covers[r]), "")
        name = (f"release {r + 1} of each run" if runs[0].what == "mechanisms" else runs[0].what) + \
            (f" ({cover[:120]}{'...' if len(cover) > 120 else ''})" if cover else "")
        unseen.append(f"{name}: {count} of {len(runs)} runs released more of it than the audit keeps "
                      f"({AUDIT_VALUES} values a run, shared over its releases); "
                      + (f"only its first {kept_r} of up to {size} values were audited" if kept_r else
                         f"none of its up to {size} values was audited"))
    if len(cut) > 8:
        unseen.append(f"{len(cut) - 8} more releases of each run (releases {cut[8] + 1} to {cut[-1] + 1} among "
                      f"them) were cut short the same way")
    if runs[0].what != "mechanisms":
        text = runs[0].what + (f" (its first {widths[0]} of up to {max(totals)} values)" if unseen else
                               " (every value)")
        return text, unseen
    share = ""
    if unseen:
        share = (f" (the first values of each of the up to {len(widths)} releases of a run, {AUDIT_VALUES} values "
                 f"in all, of the up to {max(totals)} values a run released)")
    table = any(TABLE_COVER in run.covers for run in runs)
    return ("the values released by the component's noise mechanisms" + share + " (what its ledger's DP entries "
            "cover)" + (", and " + TABLE_COVER if table else
                        "; the auditor does not check that the component's other outputs are computed from them")
            ), unseen


def _slot_projections(widths: Sequence[int]) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    """The sum of each release's values (for the first few releases of more
    than one value), when a run makes several releases."""
    if len(widths) < 2:
        return []
    out: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(int)
    for r, (start, width) in enumerate(zip(starts[:_SLOT_PROJECTIONS], widths[:_SLOT_PROJECTIONS], strict=False)):
        if width < 2:  # one value: already a value of the output
            continue
        out.append((f"the sum of the values of release {r + 1} of the run",
                    lambda X, _a=int(start), _b=int(start + width): np.nansum(X[:, _a:_b], axis=1)))
    return out


#: Largest number of released values the float-support event checks (one log per candidate).
_FLOAT_SUPPORT_LIMIT = 512


def _fixed_inputs(given: Sequence[tuple[np.ndarray, np.ndarray]], trials: int
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The values a component handed its mechanisms, when every run handed
    the same ones (the noise-free part of the release is then fixed). Laid
    out like the released values: NaN where no value was handed."""
    if len(given) != trials or not given:
        return None
    values, scales = given[0]
    there = ~np.isnan(values)
    if int(there.sum()) > _FLOAT_SUPPORT_LIMIT or not np.all(np.isfinite(scales[there])) \
            or not np.all(scales[there] > 0):
        return None
    if all(np.array_equal(v, values, equal_nan=True) and np.array_equal(s, scales, equal_nan=True)
           for v, s in given[1:]):
        return values, scales
    return None


def _laplace_ratio(first: np.ndarray, second: np.ndarray, scales: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The log-likelihood ratio of Laplace noise around ``first`` against
    ``second`` (the most powerful test statistic when the noise is Laplace)."""
    moved = ~np.isnan(first) & ~np.isnan(second) & (first != second)

    def project(X: np.ndarray) -> np.ndarray:
        if X.shape[1] < first.size:
            return np.full(X.shape[0], np.nan)
        Z = X[:, :first.size][:, moved]
        return np.sum((np.abs(Z - second[moved]) - np.abs(Z - first[moved])) / scales[moved], axis=1)

    return project


def _vector_float_support(values: np.ndarray, scales: np.ndarray, which: str) -> Event:
    def test(X: np.ndarray) -> np.ndarray:
        if X.shape[1] < values.size:
            return np.zeros(X.shape[0], dtype=bool)
        ok = np.ones(X.shape[0], dtype=bool)
        for j in np.flatnonzero(~np.isnan(values)):
            rows = np.flatnonzero(ok)
            if rows.size == 0:
                break
            ok[rows] = float_laplace_reachable(X[rows, j], float(values[j]), float(scales[j]))
        return ok

    return Event("float-support", f"every released value is reproducible by numpy's floating-point Laplace "
                                  f"sampler from the values the {which} input hands the mechanism", test)


# -- what a step releases besides its mechanisms' values: labels and its own draws ------------------


#: Records near the moved one whose co-clustering the label statistics follow.
_NEAR_RECORDS = 8
#: The label statistics (one value each per run), in the order of their columns.
LABEL_STATISTICS = (
    "the number of clusters among the records the two inputs share",
    "whether the records the two inputs share all have one label (1) or not (0)",
    "the share of pairs of shared records that have one label",
    "the size of the largest cluster among the shared records",
    "the number of shared records left unassigned (label -1)",
    f"whether the (up to {_NEAR_RECORDS}) records nearest the moved record all have one label",
    f"the share of pairs of the (up to {_NEAR_RECORDS}) records nearest the moved record that have one label",
)


def _labels_of(result: Any) -> np.ndarray | None:
    """The per-record labels a step released (a clusterer's, or a masker's partition's)."""
    partition = result if isinstance(result, Partition) else getattr(result, "partition", None)
    if isinstance(partition, Partition) and partition.labels is not None:
        return np.asarray(partition.labels)
    return None


@attrs.frozen
class _Shared:
    """Which records of a pair's two inputs are the same record (by position:
    ``first_rows[i]`` of the first input is ``second_rows[i]`` of the second),
    and the positions (in the first input) of the shared records nearest to
    the record that differs. The moved record's own label is its own data
    (a record's label says where that record is) and is left out: the label
    statistics speak only of the records the two inputs share."""

    first_rows: np.ndarray
    second_rows: np.ndarray
    near: np.ndarray  # indices into first_rows / second_rows


def _shared_records(pair: NeighbourPair) -> _Shared | None:
    first, second = pair.first, pair.second
    if not isinstance(first, pd.DataFrame) or not isinstance(second, pd.DataFrame) or first.shape[1] != second.shape[1]:
        return None
    try:
        a, b = first.to_numpy(dtype=float), second.to_numpy(dtype=float)
    except (TypeError, ValueError):
        return None
    n = min(len(a), len(b))
    if len(a) == len(b):
        same = np.all((a == b) | (np.isnan(a) & np.isnan(b)), axis=1)
        rows = np.flatnonzero(same)
        moved = [b[i] for i in np.flatnonzero(~same)] + [a[i] for i in np.flatnonzero(~same)]
        first_rows = second_rows = rows
    else:  # add/remove: the larger input's records beyond the smaller's are the added ones
        first_rows = second_rows = np.arange(n)
        moved = list((a if len(a) > len(b) else b)[n:])
    if first_rows.size < 2:
        return None
    near = np.arange(0)
    if moved:
        shared = a[first_rows]
        dist = np.min([np.nansum((shared - m) ** 2, axis=1) for m in moved], axis=0)
        near = np.argsort(dist, kind="stable")[:_NEAR_RECORDS]
    return _Shared(first_rows=first_rows, second_rows=second_rows, near=near)


def _co_clustered_share(labels: np.ndarray) -> float:
    n = labels.size
    if n < 2:
        return 1.0
    _, counts = np.unique(labels, return_counts=True)
    return float(np.sum(counts * (counts - 1.0)) / (n * (n - 1.0)))


def _label_statistics(labels: np.ndarray, rows: np.ndarray, near: np.ndarray) -> np.ndarray:
    """The :data:`LABEL_STATISTICS` of one run's labels on the shared records ``rows``."""
    out = np.full(len(LABEL_STATISTICS), np.nan)
    if labels.shape[0] <= (int(rows.max()) if rows.size else -1):
        return out
    lab = labels[rows]
    _, counts = np.unique(lab, return_counts=True)
    out[0] = float(np.unique(lab[lab >= 0]).size) if np.issubdtype(lab.dtype, np.number) else float(counts.size)
    out[1] = float(counts.size == 1)
    out[2] = _co_clustered_share(lab)
    out[3] = float(counts.max())
    out[4] = float(np.sum(lab < 0)) if np.issubdtype(lab.dtype, np.number) else 0.0
    if near.size >= 2:
        out[5] = float(np.unique(lab[near]).size == 1)
        out[6] = _co_clustered_share(lab[near])
    return out


@attrs.frozen
class _OwnDraws:
    """What a step's own ``laplace`` draws say about one input, from its
    selection runs: for each value of the table (in row order), the scale
    and the candidate noise-free values ``table - noise`` (most frequent
    first), and the released values of those runs."""

    scales: np.ndarray
    candidates: tuple[np.ndarray, ...]
    released: np.ndarray  # runs x values

    @property
    def locations(self) -> np.ndarray:
        return np.array([c[0] for c in self.candidates])

    def location(self, j: int) -> float:
        """The candidate under which most of the runs' value ``j`` is an
        output of numpy's sampler (``fl(fl(v + n) - n)`` is ``v`` but for
        rounding, so the most frequent estimate may be a neighbour of ``v``)."""
        options = self.candidates[j][:4]
        if options.size == 1:
            return float(options[0])
        shares = [float(np.mean(float_laplace_reachable(self.released[:, j], float(c), float(self.scales[j]))))
                  for c in options]
        return float(options[int(np.argmax(shares))])


def _own_draw_locations(runs: Sequence[Any]) -> _OwnDraws | None:
    """Where a step's own ``laplace`` draws were added: for a step whose table
    is ``values + rng.laplace(0, scale)`` (value by value, in the table's row
    or column order), the noise-free values and scales, when every run gives
    the same ones but for rounding (the input is fixed); else ``None``.
    Estimated from the selection runs only (the events built from them are
    then fixed sets of outputs for the estimation runs)."""
    if not runs or any(r.table is None or r.draws is None for r in runs):
        return None
    shape = runs[0].table.shape
    if any(r.table.shape != shape for r in runs):
        return None
    released = np.vstack([r.table.ravel() for r in runs])
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for order in ("C", "F"):
        locs, scales = [], []
        for r in runs:
            loc_arg, scale, drawn = r.draws
            table = r.table.ravel(order=order)  # type: ignore[call-overload]
            if drawn.size != table.size:
                return None
            locs.append(table - (drawn - loc_arg))
            scales.append(scale)
        L, S = np.vstack(locs), np.vstack(scales)
        if order == "F":  # back to the table's row order (the order of the audited values)
            L = L.reshape(len(runs), shape[1], shape[0]).transpose(0, 2, 1).reshape(len(runs), -1)
            S = S.reshape(len(runs), shape[1], shape[0]).transpose(0, 2, 1).reshape(len(runs), -1)
        if not np.all(S == S[0]) or not np.all(np.isfinite(S[0])) or not np.all(S[0] > 0):
            continue
        centre = np.median(L, axis=0)
        spread = float(np.max(np.abs(L - centre) / (1.0 + np.abs(centre)))) if L.size else math.inf
        if spread < 1e-9 and (best is None or spread < best[0]):
            best = (spread, L, S[0].copy())
    if best is None:
        return None
    _, L, scales = best
    candidates = []
    for j in range(L.shape[1]):
        found, counts = np.unique(L[:, j], return_counts=True)
        candidates.append(found[np.argsort(-counts, kind="stable")])
    return _OwnDraws(scales=scales, candidates=tuple(candidates), released=released)


def _moved_values(first: _OwnDraws | None, second: _OwnDraws | None, limit: int) -> np.ndarray:
    """The table values whose noise-free value differs between the inputs by
    more than rounding (at most ``limit`` of them)."""
    if first is None or second is None or first.scales.size != second.scales.size:
        return np.arange(0)
    la, lb = first.locations, second.locations
    tolerance = 1e-9 * (1.0 + np.maximum(np.abs(la), np.abs(lb)))
    return np.flatnonzero(np.isfinite(la) & np.isfinite(lb) & (np.abs(la - lb) > tolerance))[:limit]


def _own_draw_events(first: _OwnDraws | None, second: _OwnDraws | None, width: int) -> list[Event]:
    """Float-support events on the values of a step's table whose noise-free
    value differs between the two inputs (at most 16 of them)."""
    moved = _moved_values(first, second, 16)
    if moved.size == 0 or first is None or second is None or first.scales.size > width:
        return []
    events = []
    for which, own in (("first", first), ("second", second)):
        locs = {int(j): own.location(int(j)) for j in moved}

        def test(X: np.ndarray, _l: dict[int, float] = locs, _s: np.ndarray = own.scales) -> np.ndarray:
            ok = np.ones(X.shape[0], dtype=bool)
            for j, loc in _l.items():
                rows = np.flatnonzero(ok)
                if rows.size == 0:
                    break
                ok[rows] = float_laplace_reachable(X[rows, j], loc, float(_s[j]))
            return ok

        events.append(Event("float-support", f"the released values whose noise-free value differs between the "
                                             f"inputs ({moved.size}) are all reproducible by numpy's floating-point "
                                             f"Laplace sampler (the step's own draws) from the {which} input's", test))
    return events


def _own_draw_lattice_events(first: _OwnDraws | None, second: _OwnDraws | None,
                             A_sel: np.ndarray, B_sel: np.ndarray) -> list[Event]:
    """Lattice events on (up to 4 of) the table values whose noise-free value
    differs between the inputs, anchored at both noise-free values."""
    events = []
    for j in _moved_values(first, second, 4):
        if j >= A_sel.shape[1] or first is None or second is None:
            break
        anchors = (float(first.locations[j]), float(second.locations[j]))
        for e in _lattice_events(A_sel[:, j], B_sel[:, j], anchors):
            events.append(Event(e.family, f"released value {int(j)}: {e.description}",
                                lambda X, _e=e, _j=int(j): _e.test(X[:, [_j]])))
    return events


@attrs.frozen
class _Run:
    """One run of a component: what it released, its label statistics, its
    table (row and column order) and its own ``laplace`` draws."""

    values: _RunValues
    labels: np.ndarray | None
    table: np.ndarray | None  # the released table (records x columns) of a step that drew laplace itself
    draws: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    spent: tuple[float, float]


def _runs(component: Any, kind: str, frame: pd.DataFrame, reg: Registry, seeds: Sequence[Any],
          statistic: Callable[[Any, Sequence[np.ndarray]], Any] | None, rows: np.ndarray | None,
          near: np.ndarray) -> list[_Run]:
    out = []
    for child in seeds:
        result, context = _run_component(component, kind, frame, reg, child)
        if statistic is not None:
            values = np.asarray(statistic(result, tuple(context.releases)), dtype=float).ravel()
            run_values = _RunValues(parts=(values,), sizes=(values.size,), inputs=None, covers=("",),
                                    what="the statistic given by the caller")
        else:
            run_values = _released(result, context)
        labels = _labels_of(result) if statistic is None and rows is not None else None
        stats = None if labels is None else _label_statistics(labels, rows, near)  # type: ignore[arg-type]
        table = draws = None
        if statistic is None and isinstance(result, Masked) and not context.releases and context.draws:
            try:
                matrix = result.data.to_numpy(dtype=float)
            except (TypeError, ValueError):
                matrix = None
            if matrix is not None:
                table = matrix
                draws = tuple(np.concatenate([d[i] for d in context.draws]) for i in range(3))
        out.append(_Run(values=run_values, labels=stats, table=table, draws=draws,  # type: ignore[arg-type]
                        spent=context.spent))
    return out


def _central_record(values: np.ndarray, pool: int = 1000) -> int:
    """The record (among the first ``pool``) with the most others close by
    (within the median distance to a record's 5th nearest neighbour, each
    column scaled by its range): a record in the thick of a cluster, or one
    that bridges two, whose move changes how the others cluster."""
    X = np.nan_to_num(values[:pool].astype(float))
    if X.shape[0] < 3:
        return 0
    span = X.max(axis=0) - X.min(axis=0)
    X = X / np.where(span > 0, span, 1.0)
    squares = np.einsum("ij,ij->i", X, X)  # distances without a pool x pool x columns array
    D = np.sqrt(np.maximum(squares[:, None] + squares[None, :] - 2.0 * (X @ X.T), 0.0))
    k = min(5, X.shape[0] - 1)
    radius = float(np.median(np.sort(D, axis=1)[:, k]))
    return int(np.argmax((D <= radius * (1 + 1e-9) + 1e-12).sum(axis=1)))  # ties within rounding count


def _candidate_pairs(data: pd.DataFrame, relation: str, bounds: Any) -> list[NeighbourPair]:
    """The neighbouring pairs the auditor tries (it measures the one whose
    selection runs show the most evidence): record 0 moved to the farthest
    corner of the box (:func:`neighbour_pairs`); record 0 at the corner
    nearest to it against the opposite corner (the largest change a record
    can make to a bounded sum, a full range in every column); the most
    central record (:func:`_central_record`) moved to its farthest corner
    (add/remove: the data without it against the data); under add/remove,
    one record added in empty space (:func:`empty_region_pairs`)."""
    pairs = list(neighbour_pairs(data, relation, bounds=bounds))
    if len(data) < 2:
        return pairs
    add_remove = relation_kind(relation) == ADD_REMOVE
    if not add_remove:
        values, low, high = _box(data, bounds)
        row = values[0]
        nearest = np.where(np.abs(row - low) >= np.abs(high - row), high, low)
        if not np.array_equal(nearest, row):
            first = _placed(data, 0, nearest)
            text = ", ".join(f"{c} = {v:g}" for c, v in zip(data.columns, nearest, strict=True))
            pairs.append(NeighbourPair(first=first, second=pairs[0].second,
                                       description=f"the data ({len(data)} records) with record 0 at the corner "
                                                   f"({text}) against the same with it at the opposite corner "
                                                   "(replace-one)"))
    if add_remove:  # a record added where none is: it changes a data-adaptive partition
        pairs += empty_region_pairs(data, bounds)
    central = _central_record(data.to_numpy(dtype=float))
    if central != 0:
        if add_remove:
            without = data.iloc[np.r_[0:central, central + 1:len(data)]]  # by position: labels may repeat
            pairs.append(NeighbourPair(first=without, second=pd.concat([without, data.iloc[[central]]]),
                                       description=f"the data without record {central} (its most central record, "
                                                   f"{len(data) - 1} records) against the data (add/remove)"))
        else:
            (moved,) = neighbour_pairs(data, relation, record=central, bounds=bounds)
            pairs.append(attrs.evolve(moved, description=moved.description.replace(
                f"record {central}", f"record {central} (its most central record)")))
    return pairs


def audit_component(component: Any, data: pd.DataFrame | None = None, *, pairs: Sequence[Any] | None = None,
                    trials: int = COMPONENT_TRIALS, seed: int = 0, alpha: float = 0.05, kind: str | None = None,
                    registry: Registry | None = None,
                    statistic: Callable[[Any, Sequence[np.ndarray]], Any] | None = None,
                    float_support: bool = True, search: bool = True) -> AuditResult:
    """Audit a DP component (a masker, clusterer or noise-mechanism step).

    The component runs ``trials`` times on each input of a neighbouring pair,
    each run through a fresh :class:`PrivacyContext` seeded from ``seed``.
    What is audited, in order of preference: ``statistic(result, releases)``
    if given; else every value its noise mechanisms
    (``context.mechanism(...)``) released during the run; else its output
    (a masker's table, a clusterer's centres or labels). Of the released
    values each run keeps :data:`AUDIT_VALUES`, the first ones of *every*
    release (a fair share each, :func:`_allocate`); each release gets its own
    columns in the same place in every run, and its own projection (the sum
    of its values). Values not kept are listed in the result's ``unseen``
    (and notes), and its ``verdict`` is then INCONCLUSIVE rather than
    PASSED. Besides these, every run's released **labels** (a clusterer's,
    or a masker's partition's) are audited through
    :data:`LABEL_STATISTICS` of the records the two inputs share, and a
    step that draws ``laplace`` from its own generator (``context.rng``)
    is audited with float-support and lattice events on those draws.

    The pairs: ``pairs`` may give ``(frame, frame)`` tuples or
    :class:`NeighbourPair` objects; by default (``search``) the candidates
    of :func:`_candidate_pairs` under the relation the component's ledger
    states, or with ``search=False`` (the conformance kit's cheaper
    setting) only one: under add/remove :func:`empty_region_pairs`' (a
    record added in empty space, which changes a data-adaptive partition),
    else :func:`neighbour_pairs`'. With several pairs, each gets
    ``trials // 2`` selection runs per input; the pair and event with the
    most evidence on them are measured on ``trials`` fresh runs per input
    (so the confidence is not split over the pairs); with one pair, half the
    ``trials`` choose the event and half measure it. With
    ``float_support`` (and when every run hands its mechanisms the same
    values) the float-support event is tried on the mechanisms' released
    values too. The claim is the largest ``context.spent`` of the runs.
    Raises :class:`~privclust.ParameterError` for a component that records
    no DP release (there is nothing to audit).
    """
    reg = registry if registry is not None else get_registry()
    frame = example_frame() if data is None else data
    kind = kind or kind_of(component)
    name = getattr(type(component), "name", type(component).__qualname__)
    if trials < 20:
        raise ParameterError(f"audit_component: trials must be at least 20; got {trials}")
    root = np.random.SeedSequence(seed)
    probe_seed, run_seeds = root.spawn(2)
    _, probe = _run_component(component, kind, frame, reg, probe_seed)
    dp = probe.ledger.of_kind("dp")
    if not dp:
        raise ParameterError(f"{name} records no differentially private release on these data: nothing to audit")
    # the relation the charge is composed under (a mix of add/remove and replace-one releases is charged under
    # replace-one, each add/remove release counting twice): the neighbours the claim speaks of
    relation = probe.accountant.relation(dp) or dp[0].relation or "replace-one"
    notes = []
    if probe.ledger.of_kind("leak"):
        notes.append("the component recorded leak entries (parameters taken from the data): its ledger makes no "
                     "DP claim for this release, and the auditor's neighbours, which move a record within the "
                     "data's range, may leave those parameters unchanged, so this audit says nothing about them")
    if pairs is None and _public_bounds(component) is None:
        notes.append("the component states no public bounds the auditor can read: its neighbours move a record "
                     "within the data's own range only, so noise scaled to the data's range, or a sensitivity "
                     "wrong only for values beyond that range, goes unseen")
    if pairs is None:
        bounds = _public_bounds(component)
        chosen = (_candidate_pairs(frame, relation, bounds) if search
                  else empty_region_pairs(frame, bounds) if relation_kind(relation) == ADD_REMOVE
                  else neighbour_pairs(frame, relation, bounds=bounds))
    else:
        chosen = [p if isinstance(p, NeighbourPair) else NeighbourPair(first=p[0], second=p[1],
                                                                      description="a pair given by the caller")
                  for p in pairs]
    half = trials // 2
    share = alpha / 2  # one pair is measured: its two bounds share alpha
    trial_runs = []
    for pair, seeds in zip(chosen, run_seeds.spawn(len(chosen)), strict=True):
        shared = _shared_records(pair)
        sel_a, sel_b, est_a, est_b = seeds.spawn(4)
        sides = [_runs(component, kind, frame_in, reg, side.spawn(half), statistic,
                       None if shared is None else rows, np.arange(0) if shared is None else shared.near)
                 for frame_in, side, rows in ((pair.first, sel_a, None if shared is None else shared.first_rows),
                                              (pair.second, sel_b, None if shared is None else shared.second_rows))]
        trial_runs.append((pair, shared, sides, (est_a, est_b)))
    charged = (max(r.spent[0] for _, _, sides, _ in trial_runs for runs in sides for r in runs),
               max(r.spent[1] for _, _, sides, _ in trial_runs for runs in sides for r in runs))
    k = 0
    if len(trial_runs) > 1:  # the pair with the most evidence on its selection runs (never on the fresh ones)
        scores = []
        for _, _, sides, _ in trial_runs:
            A, B, events, _, _ = _samples(sides, statistic, float_support)
            scores.append(_select(A, B, charged[1], share, events)[2])
        k = int(np.argmax(scores))
    pair, shared, sel, (est_a, est_b) = trial_runs[k]
    # with several pairs the selection runs are spread over them: the chosen one is measured on `trials` fresh runs
    measure = trials if len(trial_runs) > 1 else half
    est = [_runs(component, kind, frame_in, reg, side.spawn(measure), statistic,
                 None if shared is None else rows, np.arange(0) if shared is None else shared.near)
           for frame_in, side, rows in ((pair.first, est_a, None if shared is None else shared.first_rows),
                                        (pair.second, est_b, None if shared is None else shared.second_rows))]
    charged = (max(charged[0], *(r.spent[0] for runs in est for r in runs)),
               max(charged[1], *(r.spent[1] for runs in est for r in runs)))
    A, B, events, audited, unseen = _samples([sel[0] + est[0], sel[1] + est[1]], statistic, float_support, half)
    outcome = _audit_pair(A, B, charged[1], share, events, selection=half)
    if len(chosen) > 1:
        pair = attrs.evolve(pair, description=pair.description + f" (chosen among {len(chosen)} pairs on the "
                                                                  "selection runs)")
    return _finish(f"{name} ({kind[:-1].replace('_', ' ')})", audited, [pair], [outcome], charged,
                   1 - alpha, notes, unseen)


def _samples(sides: Sequence[Sequence[_Run]], statistic: Any, float_support: bool, selection: int | None = None
             ) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray, np.ndarray], list[Event]], str, list[str]]:
    """The runs of the two inputs as rows of two matrices (each release in
    its own columns, then the label statistics), the events to try (a
    function of the selection rows) and what was audited. Event parameters
    that come from the runs themselves (the fixed inputs, the noise-free
    values of a step's own draws) are taken from the first ``selection``
    runs of each input only."""
    selection = len(sides[0]) if selection is None else selection
    values = [[r.values for r in runs] for runs in sides]
    widths = _slot_widths([v for vs in values for v in vs])
    samples = [np.vstack([_laid_out(v.parts, widths) for v in vs]) for vs in values]
    label_rows = [[r.labels for r in runs] for runs in sides]
    labelled = all(x is not None for rows in label_rows for x in rows)
    if labelled:
        samples = [np.hstack([s, np.vstack(rows)]) for s, rows in zip(samples, label_rows, strict=True)]
    supports: list[tuple[np.ndarray, np.ndarray] | None] = []
    for vs in values:
        given = [(_laid_out([v for v, _ in run.inputs], widths),
                  _laid_out([np.full(v.size, sc) for v, sc in run.inputs], widths))
                 for run in vs[:selection] if run.inputs]  # selection runs only
        supports.append(_fixed_inputs(given, selection))
    own = [_own_draw_locations(runs[:selection]) for runs in sides]
    if statistic is not None:
        audited, unseen = "the statistic given by the caller", []
    else:
        audited, unseen = _audited_text([v for vs in values for v in vs], widths)
        if labelled:
            audited += (f"; and the released labels, through {len(LABEL_STATISTICS)} statistics of the labels of "
                        "the records the two inputs share (the moved record's own label is left out)")
        if own[0] is not None:
            audited += "; with float-support and lattice events on the step's own laplace draws"
    slots = _slot_projections(widths) if statistic is None else []
    start = sum(widths) if sum(widths) else 1
    label_columns = [(f"label statistic: {text}", start + i) for i, text in enumerate(LABEL_STATISTICS)] \
        if labelled else []
    extra: list[Event] = []
    if float_support:
        extra += [_vector_float_support(v, sc, which)
                  for (v, sc), which in ((s, w) for s, w in zip(supports, ("first", "second"), strict=True)
                                         if s is not None)]
    extra += _own_draw_events(own[0], own[1], widths[0] if widths else 0)

    def events(A_sel: np.ndarray, B_sel: np.ndarray) -> list[Event]:
        out = list(extra)
        out += _own_draw_lattice_events(own[0], own[1], A_sel, B_sel)
        for label, project in slots:  # each release on its own: a small one is not drowned by a large one
            out += _threshold_and_bin_events(project(A_sel), project(B_sel), label, project)
        for label, column in label_columns:
            def project(X: np.ndarray, _c: int = column) -> np.ndarray:
                return X[:, _c] if X.shape[1] > _c else np.full(X.shape[0], np.nan)
            out += _threshold_and_bin_events(project(A_sel), project(B_sel), label, project)
        if supports[0] is not None and supports[1] is not None and supports[0][0].size == supports[1][0].size:
            project = _laplace_ratio(supports[0][0], supports[1][0], supports[0][1])
            out += _threshold_and_bin_events(
                project(A_sel), project(B_sel),
                "the Laplace log-likelihood ratio of the release between the values the two inputs hand the "
                "mechanisms", project)
        return out

    return samples[0], samples[1], events, audited, unseen


@attrs.frozen(kw_only=True)
class StepAudit:
    """The audit of one DP step of a recipe."""

    index: int
    step_id: str
    component: str
    result: AuditResult


def audit_recipe(recipe: Any, data: pd.DataFrame | None = None, *, trials: int = COMPONENT_TRIALS, seed: int = 0,
                 alpha: float = 0.05, registry: Registry | None = None) -> list[StepAudit]:
    """Audit every DP step of a recipe (the steps whose run records a DP
    release), each on its own columns of ``data`` (the input as given, not
    the output of earlier steps: each step's claim is about its own input)
    or of :func:`example_frame` when no data are given. The steps get
    independent seeds spawned from ``seed``."""
    compiled = recipe if hasattr(recipe, "steps") and hasattr(recipe, "registry") else compile(recipe, registry)
    reg = compiled.registry
    frame = _check_frame(example_frame() if data is None else data)
    step_columns = check_data(compiled, frame)
    out = []
    seeds = np.random.SeedSequence(seed).spawn(len(compiled.steps))
    for cs, columns, child in zip(compiled.steps, step_columns, seeds, strict=True):
        view = frame.loc[:, list(columns)].copy()
        _, probe = _run_component(cs.component, cs.kind, view, reg, child.spawn(1)[0])
        if not probe.ledger.of_kind("dp"):
            continue
        result = audit_component(cs.component, view, trials=trials, seed=int(child.generate_state(1)[0]),
                                 alpha=alpha, kind=cs.kind, registry=reg)
        out.append(StepAudit(index=cs.index, step_id=cs.id, component=type(cs.component).name, result=result))
    return out


def assert_audit_passes(result: AuditResult, *, allow_inconclusive: bool = False) -> None:
    """Raise ``AssertionError`` (with the audit's report) when the lower bound
    exceeds the claim, and when the audit is inconclusive (released values
    it did not see) unless ``allow_inconclusive``."""
    if not result.passed:
        raise AssertionError(f"the empirical privacy audit found more privacy loss than charged:\n{result}")
    if result.unseen and not allow_inconclusive:
        raise AssertionError(
            "the empirical privacy audit is INCONCLUSIVE: some released values were not audited (audit them with "
            "statistic=..., or pass allow_inconclusive=True to accept an audit of the values seen only):\n"
            f"{result}")


def check_privacy_audit(component: Any, data: pd.DataFrame, kind: str, registry: Registry) -> None:
    name = type(component).name
    if kind == "noise_mechanisms":  # the release itself, 0 against 1, float-support events included
        try:
            result = audit_mechanism(component, trials=KIT_MECHANISM_TRIALS, seed=13, registry=registry)
        except PrivclustError:  # e.g. a mechanism that needs a delta
            result = audit_mechanism(component, delta=1e-6, trials=KIT_MECHANISM_TRIALS, seed=13, registry=registry)
        assert result.passed, (
            f"{name}: the empirical privacy audit of release() found a lower bound on epsilon above what it "
            f"charges; check the sensitivity, the noise scale and the sampler (a floating-point sampler is "
            f"distinguishable by the set of doubles it can produce)\n{result}")
    dp, context = _is_dp(component, data, kind, registry)
    if not dp or context.ledger.of_kind("leak"):
        return  # no DP claim to audit (or one the ledger already voids)
    # The float-support events of components would test the host's mechanisms again (audited above, by kind).
    result = audit_component(component, data, trials=KIT_TRIALS, seed=11, kind=kind, registry=registry,
                             float_support=False, search=False)
    assert result.passed, (
        f"{name}: the empirical privacy audit's lower bound on epsilon exceeds what the ledger charges; check the "
        f"sensitivity and the noise scale\n{result}")
    if result.unseen:  # not a failure of the component, but not a pass for the values the audit could not keep
        warnings.warn(PrivclustWarning(
            f"{name}: the privacy_audit check is INCONCLUSIVE for released values it did not see: "
            + "; ".join(result.unseen) + ". Audit them with pt.audit_component(..., statistic=...)."), stacklevel=2)


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
