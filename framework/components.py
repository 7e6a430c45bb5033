"""The five component kinds and the frozen results they return.

A component is a frozen, keyword-only attrs class whose fields are its
hyper-parameters (see :mod:`privclust.params`) and whose class attribute
``name`` is the name recipes use. Its methods take ``(data, context)`` and
return one of the frozen result types below; they never mutate their inputs
and never keep the context.

=====================  =================================================
kind                   method
=====================  =================================================
clusterers             ``fit(data, context) -> Partition``
maskers                ``mask(data, context) -> Masked``
noise_mechanisms       ``release(values, *, sensitivity, epsilon, delta,
                       context, relation, covers, ...) -> ndarray`` and, as
                       a step, ``perturb(data, context) -> Masked``
constraint_handlers    ``variables()``, ``check(columns)``,
                       ``bind(columns, rules=None) -> BoundConstraints``
evaluators             ``evaluate(inputs) -> Mapping[str, float]``
=====================  =================================================

``data`` is a :class:`pandas.DataFrame` holding only the step's columns, all
numeric and finite (the runner checks this before any component sees it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np

from .specs import component_params, stated_params

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .accounting import Ledger, PrivacyContext

__all__ = [
    "KINDS",
    "BoundConstraints",
    "Clusterer",
    "ConstraintHandler",
    "EvaluationInputs",
    "Evaluator",
    "Masked",
    "Masker",
    "NoiseMechanism",
    "Partition",
    "Sensitivity",
    "TopMemberships",
    "component_params",
    "readonly",
    "stated_params",
]

#: The component kinds, in the order the docs list them.
KINDS: tuple[str, ...] = ("clusterers", "maskers", "noise_mechanisms", "constraint_handlers", "evaluators")

#: The method each kind must have (checked when a plugin registers a class).
KIND_METHODS: dict[str, tuple[str, ...]] = {
    "clusterers": ("fit",),
    "maskers": ("mask",),
    "noise_mechanisms": ("release", "perturb"),
    "constraint_handlers": ("variables", "check", "bind"),
    "evaluators": ("evaluate",),
}


def readonly(array: Any) -> Any:
    """A read-only view of an array (``None`` passes through)."""
    if array is None:
        return None
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


def _freeze_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


def _thawed(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def _rebuild(cls: type, values: dict[str, Any]) -> Any:
    return cls(**values)


class _Picklable:
    """Pickling for frozen results whose mappings are read-only proxies: the
    object is rebuilt through its constructor (which freezes them again)."""

    __slots__ = ()

    def __reduce__(self):
        values = {f.name: _thawed(getattr(self, f.name)) for f in attrs.fields(type(self)) if f.init}
        return (_rebuild, (type(self), values))


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TopMemberships:
    """Memberships kept for each record's nearest centres only.

    With ``c = N / k`` clusters the dense ``N x c`` matrix does not fit in
    memory; each record keeps its ``p`` largest memberships. ``dropped`` is
    the probability mass each record lost to the truncation (0 when exact).

    :ivar indices: ``(N, p)`` centre indices, best first.
    :ivar values: ``(N, p)`` memberships of those centres (renormalised to sum
        to 1 per record).
    :ivar dropped: ``(N,)`` the mass left out before renormalising.
    :ivar n_centres: the total number of centres ``c``.
    """

    indices: np.ndarray = attrs.field(converter=readonly)
    values: np.ndarray = attrs.field(converter=readonly)
    dropped: np.ndarray = attrs.field(converter=readonly)
    n_centres: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.indices.shape[0], self.n_centres)

    def to_dense(self) -> np.ndarray:
        """The ``N x c`` matrix (only for small problems)."""
        n, _ = self.indices.shape
        dense = np.zeros((n, self.n_centres))
        np.put_along_axis(dense, self.indices, self.values, axis=1)
        return dense

    def column_sums(self) -> np.ndarray:
        """Expected cluster sizes ``sum_k u_ki``."""
        return np.bincount(self.indices.ravel(), weights=self.values.ravel(), minlength=self.n_centres)


@attrs.frozen(kw_only=True)
class Partition(_Picklable):
    """What a clusterer returns.

    :ivar labels: ``(N,)`` integer labels (the crisp assignment; ``-1`` for
        records left unassigned, e.g. noise or halo).
    :ivar centres: ``(c, d)`` centres in the data's units, or ``None``.
    :ivar memberships: ``(N, c)`` array, :class:`TopMemberships` or ``None``
        for crisp methods.
    :ivar columns: the columns the partition was computed on.
    :ivar diagnostics: anything else worth reporting (iterations, objective,
        densities...). Values should be JSON-serialisable scalars, lists or
        arrays.
    """

    labels: np.ndarray = attrs.field(converter=readonly)
    centres: np.ndarray | None = attrs.field(default=None, converter=readonly)
    memberships: Any = attrs.field(default=None)
    columns: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    diagnostics: Mapping[str, Any] = attrs.field(factory=dict, converter=_freeze_mapping)

    @memberships.validator
    def _check_memberships(self, attribute: attrs.Attribute, value: Any) -> None:
        if isinstance(value, np.ndarray):
            value.flags.writeable = False

    @property
    def n_clusters(self) -> int:
        valid = self.labels[self.labels >= 0]
        return int(np.unique(valid).size)


@attrs.frozen(kw_only=True)
class Masked(_Picklable):
    """What a masker (or a noise mechanism used as a step) returns.

    :ivar data: the protected values of the step's columns, same index and
        column order as the data it was given.
    :ivar partition: the partition the masker used, if any.
    :ivar diagnostics: anything else worth reporting.
    """

    data: pd.DataFrame
    partition: Partition | None = None
    diagnostics: Mapping[str, Any] = attrs.field(factory=dict, converter=_freeze_mapping)


@attrs.frozen(kw_only=True)
class Sensitivity:
    """The sensitivity of a released vector: its L1 and L2 bounds.

    A noise mechanism takes the norm it needs (Laplace and geometric: L1;
    Gaussian: L2). A plain number passed where a Sensitivity is expected is
    an L1 bound, and serves as the (conservative) L2 bound too.
    """

    l1: float
    l2: float | None = None

    @classmethod
    def of(cls, value: float | Sensitivity) -> Sensitivity:
        return value if isinstance(value, Sensitivity) else cls(l1=float(value), l2=float(value))

    @property
    def l2_bound(self) -> float:
        return self.l1 if self.l2 is None else self.l2


@attrs.frozen(kw_only=True)
class EvaluationInputs:
    """Everything an evaluator may look at.

    :ivar original: the input frame, untouched.
    :ivar protected: the released frame (label columns included).
    :ivar columns: the columns this evaluation is about (the entry's
        ``columns``, or by default every column a step changed).
    :ivar labels: the label columns the clusterer steps released.
    :ivar outcomes: each step's :class:`~privclust.StepOutcome`.
    :ivar constraints: the recipe's edit rules bound to all columns, or ``None``.
    :ivar ledger: a copy of the run's ledger so far (changing it changes nothing).
    :ivar rng: a random generator for evaluators that sample.
    """

    original: pd.DataFrame
    protected: pd.DataFrame
    columns: tuple[str, ...]
    labels: pd.DataFrame
    outcomes: tuple[Any, ...] = ()
    constraints: BoundConstraints | None = None
    ledger: Ledger | None = None
    rng: np.random.Generator | None = None

    def partitions(self) -> list[tuple[Any, Partition]]:
        """The (outcome, partition) pairs of the steps that produced one."""
        out = []
        for o in self.outcomes:
            part = getattr(o, "partition", None)
            if part is not None:
                out.append((o, part))
        return out


# ---------------------------------------------------------------------------
# Protocols
# ---------------------------------------------------------------------------


@runtime_checkable
class Clusterer(Protocol):
    name: ClassVar[str]

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition: ...


@runtime_checkable
class Masker(Protocol):
    name: ClassVar[str]

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked: ...


@runtime_checkable
class NoiseMechanism(Protocol):
    name: ClassVar[str]

    def release(
        self,
        values: Any,
        *,
        sensitivity: float | Sensitivity,
        epsilon: float,
        delta: float = 0.0,
        context: PrivacyContext,
        relation: str,
        covers: str,
        not_covered: str = "",
        **ledger: Any,
    ) -> np.ndarray: ...

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked: ...


@runtime_checkable
class BoundConstraints(Protocol):
    """Edit rules bound to an ordered list of columns."""

    columns: tuple[str, ...]
    rules: tuple[str, ...]

    def project(self, points: np.ndarray, *, scale: np.ndarray | None = None) -> np.ndarray:
        """Project each row onto the feasible set (Euclidean after dividing
        each column by ``scale``); never modifies ``points``."""
        ...

    def violations(self, points: np.ndarray) -> np.ndarray:
        """``(n, n_rules)`` non-negative amounts by which each row violates
        each rule (0 where satisfied)."""
        ...


@runtime_checkable
class ConstraintHandler(Protocol):
    name: ClassVar[str]

    def variables(self) -> tuple[frozenset[str], ...]:
        """The column names each rule uses, one set per rule."""
        ...

    def describe(self) -> tuple[str, ...]:
        """Each rule as text."""
        ...

    def check(self, columns: Sequence[str]) -> Sequence[Any]:
        """Problems (unknown columns, contradictions, infeasibility) found
        before any data is touched."""
        ...

    def bind(self, columns: Sequence[str], rules: Sequence[int] | None = None) -> BoundConstraints: ...


@runtime_checkable
class Evaluator(Protocol):
    name: ClassVar[str]

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]: ...


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
