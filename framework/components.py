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
numeric and finite (the runner checks this before any component sees it);
a step whose component declares a missing-value policy (the
``missing_values`` capability) may also receive missing values (NaN), never
infinite ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np
import pandas as pd

from .claims import ADD_REMOVE, REPLACE_ONE, Relation
from .errors import ConstraintError, DataError
from .ledger import Sensitivity as Sensitivity  # defined with the ledger that records it; re-exported
from .params import DataLeak
from .specs import component_params, stated_params

if TYPE_CHECKING:  # pragma: no cover
    from .context import PrivacyContext
    from .ledger import Ledger

__all__ = [
    "CAPABILITIES",
    "KINDS",
    "BoundConstraints",
    "Capability",
    "Clusterer",
    "ConstraintHandler",
    "EvaluationInputs",
    "Evaluator",
    "FuzzyClusterer",
    "Masked",
    "Masker",
    "NoiseMechanism",
    "Partition",
    "Sensitivity",
    "TopMemberships",
    "capability",
    "component_params",
    "data_matrix",
    "is_real_column",
    "linear_form",
    "linear_residuals",
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


def is_real_column(values: Any) -> bool:
    """Whether a column (a Series, array or dtype) holds real numbers: a
    numeric dtype that is neither boolean nor complex (a complex column cast
    to float would lose its imaginary part without a word)."""
    dtype = getattr(values, "dtype", values)
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
                and not pd.api.types.is_complex_dtype(dtype))


def data_matrix(data: pd.DataFrame, who: str, *, missing: bool = False) -> np.ndarray:
    """The step's data as a float matrix, a fresh copy (``(N, d)``, the
    columns in order): what a component computes on.

    Inside a recipe the runner has already checked that the data are a
    frame of numeric, finite columns with records; this makes the same
    checks, so a component used on its own fails the same way, with a
    :class:`~privclust.DataError` naming ``who`` and the columns at fault.
    One helper for every component instead of a validation of its own.

    :param missing: ``True`` for a component that handles missing values
        itself: NaN passes through (infinite values are still refused, and so
        is a column with no observed value at all); ``False``: any NaN is
        refused."""
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"{who}: the data must be a pandas DataFrame; got {type(data).__name__}")
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise DataError(f"{who}: the data have no records or no columns")
    bad = [str(c) for c in data.columns if not is_real_column(data[c])]
    if bad:
        raise DataError(f"{who}: column(s) {', '.join(bad)} are not numeric; convert them or leave them out "
                        "of the step's columns")
    values = data.to_numpy(dtype=float, na_value=np.nan, copy=True)
    finite = np.isfinite(values)
    if finite.all():
        return values
    nan = np.isnan(values)
    if missing:
        infinite = [str(data.columns[j]) for j in np.flatnonzero((~finite & ~nan).any(axis=0))]
        if infinite:
            raise DataError(f"{who}: column(s) {', '.join(infinite)} hold infinite values; replace them (e.g. by "
                            "NaN, a missing value) or drop those records")
        empty = [str(data.columns[j]) for j in np.flatnonzero(nan.all(axis=0))]
        if empty:
            raise DataError(f"{who}: column(s) {', '.join(empty)} have no observed value at all (every value is "
                            "missing); leave them out of the step's columns")
        return values
    cols = [str(data.columns[j]) for j in np.flatnonzero(~finite.all(axis=0))]
    counts = ", ".join(f"{c!r}: {int(nan[:, list(map(str, data.columns)).index(c)].sum())} missing" for c in cols)
    raise DataError(f"{who}: column(s) {', '.join(cols)} hold NaN or infinite values ({counts}) and {who} computes "
                    "on complete records only; impute or drop those records first, or leave those columns out of "
                    "its columns")


def readonly(array: Any) -> Any:
    """A read-only view of an array (``None`` passes through)."""
    if array is None:
        return None
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


def _freeze_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


def _names(value: Iterable[str]) -> tuple[str, ...]:
    # ``converter=tuple`` gives type checkers no element type for the attrs-made __init__.
    return tuple(value)


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
    columns: tuple[str, ...] = attrs.field(default=(), converter=_names)
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
    :ivar registry: the run's :class:`~privclust.Registry` (``None``: the
        session registry, ``privclust.get_registry()``); an evaluator that
        needs another component (a constraint handler to parse rules of its
        own) resolves it through this one, so that a blocked or swapped
        component is honoured.
    :ivar roles: the recipe's :class:`~privclust.Roles` (``None`` outside a
        run): evaluators of key variables and weighted figures take the
        ``keys`` and ``weight`` roles when their own parameters are not set.
    :ivar columns_named: ``True`` when the evaluation entry named its
        ``columns``, ``False`` when they are the host's default (the columns
        the steps changed), ``None`` when not known (outside a run): an
        evaluator may widen a default (``dbrl`` links on the unchanged
        numeric columns too), never columns a user named.
    """

    original: pd.DataFrame
    protected: pd.DataFrame
    columns: tuple[str, ...]
    labels: pd.DataFrame
    outcomes: tuple[Any, ...] = ()
    constraints: BoundConstraints | None = None
    ledger: Ledger | None = None
    rng: np.random.Generator | None = None
    registry: Any = None
    roles: Any = None
    columns_named: bool | None = None

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
class FuzzyClusterer(Protocol):
    """A clusterer of ``n_clusters`` clusters whose :class:`Partition` has centres and
    memberships set by a fuzzifier: the protocol a fuzzy masker
    (``fuzzy-microaggregation``) needs of its clusterer, whatever its class.

    ``fuzzifier_param`` is the recipe key of the fuzzifier and says which
    memberships it governs: ``"m"`` for fuzzy c-means memberships
    ``u_ki = 1 / sum_j (D_ki / D_kj)^(1/(m-1))``, ``"lambda"`` for entropy
    memberships ``softmax(-lambda D_k.)``. The masker sets ``n_clusters`` and
    the fuzzifier on a copy of the clusterer (``attrs.evolve``), so both must be
    init fields (``None`` meaning "not set"); ``fit`` returns the centres in
    the data's units."""

    name: ClassVar[str]
    fuzzifier_param: ClassVar[str]
    n_clusters: int | None

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


# ---------------------------------------------------------------------------
# Optional capabilities
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Capability:
    """An optional member a component may have, which the host uses when it
    is there (like scikit-learn's estimator tags, in one table:
    :data:`CAPABILITIES`).

    :ivar name: the member's name on the component class.
    :ivar member: ``"method"`` or ``"class attribute"``.
    :ivar signature: how it is called or what it holds.
    :ivar kinds: the component kinds it applies to.
    :ivar used_for: what the host does with it.
    :ivar default: what the host assumes when a component does not have it.
    :ivar bound: the member belongs to the object a constraint handler's
        ``bind()`` returns (its rules over named columns), not to the
        handler itself.
    """

    name: str
    member: str
    signature: str
    kinds: tuple[str, ...]
    used_for: str
    default: Any = None
    problem: Callable[[Any, Any], str | None] = attrs.field(default=None, repr=False, eq=False)
    bound: bool = False

    def check(self, component: Any, n_columns: int = 1) -> str | None:
        """What is wrong with the component's member (``None`` when it is
        fine or absent): a method that raises or returns the wrong type, an
        attribute of the wrong type. For a ``bound`` member, ``component`` is
        the object ``bind()`` returned."""
        if not hasattr(type(component), self.name):
            return None
        value = getattr(component, self.name)
        if self.member == "method":
            if not callable(value):
                return f"{self.name} must be a method {self.signature}; got {value!r}"
            if self.bound:  # a method of the bound rules: its check calls it on points of its own
                return self.problem(component, value) if self.problem is not None else None
            if self.name in ("evaluated_on", "data_problems"):  # need a run's data: the host checks the answer
                return None
            try:
                value = value(*_PROBE_ARGUMENTS.get(self.name, ()), n_columns) if self.name in _PROBE_ARGUMENTS \
                    else value()
            except Exception as err:  # noqa: BLE001 - reported to the plugin author
                return f"{self.signature} raised {type(err).__name__}: {err}"
        return self.problem(value, n_columns) if self.problem is not None else None


#: The arguments before ``n_columns`` with which :meth:`Capability.check` calls a method that takes them.
_PROBE_ARGUMENTS: dict[str, tuple[Any, ...]] = {"min_records": (), "size_problems": (1,)}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def _cost_problem(value: Any, _: int) -> str | None:
    if value is None:
        return None
    if (not isinstance(value, tuple | list) or len(value) != 2 or not all(_is_number(v) for v in value)
            or any(not v >= 0 for v in value)):
        return f"planned_cost() must return None or (epsilon, delta), two numbers >= 0; got {value!r}"
    if not math.isfinite(float(value[0])):
        return f"planned_cost() returned epsilon = {value[0]!r}; a step's privacy cost must be finite"
    return None


def _texts_problem(what: str) -> Callable[[Any, int], str | None]:
    def problem(value: Any, _: int) -> str | None:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset | tuple):
            return f"{what} must be a list of texts; got {value!r}"
        bad = [v for v in value if not isinstance(v, str)]
        return f"{what} must hold texts only; got {bad!r}" if bad else None
    return problem


def _min_records_problem(value: Any, n_columns: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        return f"min_records({n_columns}) must return None or an integer >= 1; got {value!r}"
    return None


def _bool_problem_of(name: str) -> Callable[[Any, Any], str | None]:
    def problem(value: Any, _: int) -> str | None:
        return None if isinstance(value, bool) else f"{name} must be True or False; got {value!r}"
    return problem


_bool_problem = _bool_problem_of("uses_constraints")


#: What a step's DP entries can cover of what it releases (``dp_output``):
#: the values it writes (a masker's or noise step's columns) and the labels
#: (a clusterer's label column).
DP_OUTPUTS = ("values", "labels")


def dp_outputs(component: Any) -> frozenset[str]:
    """What of its release a component's DP ledger entries cover, from its
    ``dp_output`` declaration: ``True`` (the default) everything it releases,
    ``False`` nothing, a tuple of :data:`DP_OUTPUTS` those outputs only. A
    declaration that is none of these covers nothing."""
    value = capability(component, "dp_output")
    if value is True:
        return frozenset(DP_OUTPUTS)
    if isinstance(value, tuple | list | frozenset | set) and all(v in DP_OUTPUTS for v in value):
        return frozenset(value)
    return frozenset()


def _dp_output_problem(value: Any, _: int) -> str | None:
    if isinstance(value, bool) or (isinstance(value, tuple) and all(v in DP_OUTPUTS for v in value)):
        return None
    return (f"dp_output must be True, False or a tuple of {', '.join(map(repr, DP_OUTPUTS))} (what of the step's "
            f"release its DP entries cover); got {value!r}")


def _missing_problem(value: Any, _: int) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return None
    return f"missing_values() must return None (missing values refused) or a non-empty text; got {value!r}"


def _leaks_problem(value: Any, _: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence | tuple):
        return f"data_leaks() must return a list of privclust.DataLeak; got {value!r}"
    bad = [v for v in value if not isinstance(v, DataLeak)]
    return f"data_leaks() must return privclust.DataLeak objects only; got {bad!r}" if bad else None


def _renamed_problem(value: Any, _: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return f"renamed_params must be a table {{old name: new name}} of texts; got {value!r}"
    return None


def _rounding_problem(bound: Any, method: Callable[..., Any]) -> str | None:
    """``round_integers`` on a few non-integer rows (one value missing):
    the same shape back, whole numbers in the integer columns, the missing
    value still missing, the fixed column unchanged, and what the host checks
    at run time (:func:`rounding_moves`): outside the columns of equality
    rules, integers moved by less than 1 and nothing else moved."""
    columns = tuple(getattr(bound, "columns", ()))
    d = len(columns)
    if d == 0:
        return None
    values = np.linspace(0.3, 7.7, 5 * d).reshape(5, d)
    values[1, 0] = np.nan
    integer = np.ones(d, dtype=bool)
    fixed = np.zeros(d, dtype=bool)
    if d > 1:
        integer[-1] = False
        fixed[-1] = True
    try:
        out = np.asarray(method(values.copy(), integer, fixed), dtype=float)
    except Exception as err:  # noqa: BLE001 - reported to the plugin author
        return f"round_integers(values, integer, fixed) raised {type(err).__name__}: {err}"
    if out.shape != values.shape:
        return f"round_integers must return an array of the values' shape {values.shape}; got {out.shape}"
    if not np.isnan(out[1, 0]):
        return "round_integers must leave a missing value (NaN) missing"
    whole = out[:, integer]
    if not np.all(np.isnan(whole) | (whole == np.round(whole))):
        return "round_integers left non-integer values in a column marked integer"
    if not np.array_equal(out[:, fixed], values[:, fixed], equal_nan=True):
        return "round_integers changed a column marked fixed"
    try:
        return rounding_moves(bound, columns, values, out, integer, fixed)[1]
    except ConstraintError:  # a malformed linear_form: reported by that capability's own check
        return None


def rounding_moves(bound: Any, columns: Sequence[str], before: np.ndarray, after: np.ndarray, integer: np.ndarray,
                   fixed: np.ndarray) -> tuple[dict[str, float], str | None]:
    """What a constraint handler's ``round_integers`` did to ``before``
    (rows by ``columns``, the columns of its bound rules ``bound``), giving
    ``after``: the largest change of each column not ``fixed`` that it moved,
    and the problem, if any, in the words the host refuses a run with and the
    conformance kit reports (the host adds that nothing was released).
    Outside the columns of the rules' equalities
    (their ``linear_form``; none when they state none), each ``integer``
    value may move by less than 1 (a rounding down or up) and no other value
    may move. Raises :class:`ConstraintError` when the rules' ``linear_form``
    is malformed."""
    form = linear_form(bound)
    in_equality = (np.abs(form[0][form[2]]) > 0).any(axis=0) if form is not None else np.zeros(len(columns), bool)
    moved = np.abs(after - before)
    moved[np.isnan(before) & np.isnan(after)] = 0.0
    moved = np.where(np.isnan(moved), np.inf, moved)  # a value made missing, or filled, moved without bound
    largest = moved.max(axis=0, initial=0.0)
    limit = np.where(integer, 1.0, 0.0)
    bad = ~fixed & ~in_equality & ((largest >= limit) & (largest > 0))
    changes = {c: float(largest[j]) for j, c in enumerate(columns) if not fixed[j] and largest[j] > 0}
    if not bad.any():
        return changes, None
    j = int(np.flatnonzero(bad)[0])
    c = columns[j]
    if integer[j]:
        rows = int(np.count_nonzero(moved[:, j] >= 1.0))
        what = (f"moved {rows} value(s) of the integer column {c!r} by 1 or more (up to {largest[j]:.6g}), which "
                "is no rounding (a value rounded down or up moves by less than 1)")
    else:
        rows = int(np.count_nonzero(moved[:, j] > 0))
        what = f"changed {rows} value(s) of column {c!r} (by up to {largest[j]:.6g}), which is not an integer column"
    return changes, (f"round_integers {what}, and {c!r} is in no equality rule of its rules (only an equality may "
                     "need other columns moved to keep it): a bug in its plugin, which must round each integer value "
                     "down or up and leave the other columns as they are (or state its equalities with linear_form)")


def _magnitudes_problem(bound: Any, method: Callable[..., Any]) -> str | None:
    """``magnitudes`` on a few rows: one non-negative finite size per row and rule."""
    d, rules = len(getattr(bound, "columns", ())), len(getattr(bound, "rules", ()))
    if d == 0:
        return None
    points = np.linspace(-3.3, 7.7, 5 * d).reshape(5, d)
    try:
        out = np.asarray(method(points.copy()), dtype=float)
    except Exception as err:  # noqa: BLE001 - reported to the plugin author
        return f"magnitudes(points) raised {type(err).__name__}: {err}"
    if out.shape != (5, rules):
        return f"magnitudes must return an array of shape (rows, rules) = (5, {rules}); got {out.shape}"
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        return "magnitudes must be finite and non-negative"
    return None


def linear_form(bound: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The coefficients of bound rules that state them (the ``linear_form``
    capability: ``(matrix, rhs, equality)``, rule ``r`` reading ``matrix[r]
    . x == rhs[r]`` where ``equality[r]``, else ``matrix[r] . x <= rhs[r]``,
    over the bound columns), checked: finite numbers, one row per rule and
    one coefficient per column. ``None`` when the rules do not state them.
    Raises :class:`ConstraintError` naming the rules when the form is
    malformed (a bug in their plugin)."""
    method = getattr(bound, "linear_form", None)
    if not callable(method):
        return None
    d, k = len(bound.columns), len(bound.rules)
    try:
        matrix, rhs, equality = method()
        matrix = np.array(matrix, dtype=float).reshape(k, d) if np.size(matrix) == k * d else None
        rhs = np.array(rhs, dtype=float).reshape(-1)
        equality = np.array(equality, dtype=bool).reshape(-1)
    except Exception as err:  # noqa: BLE001 - reported to the plugin author
        raise ConstraintError(f"bound rules {bound!r}: linear_form() failed ({type(err).__name__}: {err}); it must "
                              "return (matrix, rhs, equality) (a bug in their plugin)") from err
    if matrix is None or rhs.shape != (k,) or equality.shape != (k,):
        raise ConstraintError(f"bound rules {bound!r}: linear_form() must return a ({k}, {d}) matrix, one coefficient "
                              f"per rule and column, and {k} right-hand sides and equality flags (a bug in their "
                              "plugin)")
    if not (np.isfinite(matrix).all() and np.isfinite(rhs).all()):
        raise ConstraintError(f"bound rules {bound!r}: linear_form() gave a coefficient or right-hand side that is "
                              "not a finite number (a bug in their plugin)")
    return matrix, rhs, equality


def linear_residuals(form: tuple[np.ndarray, np.ndarray, np.ndarray], points: np.ndarray) -> np.ndarray:
    """``(n, n_rules)``: by how much each row of ``points`` violates each rule of a :func:`linear_form`, the host's
    own arithmetic: ``|a.x - b|`` for an equality, ``max(0, a.x - b)`` for an inequality."""
    matrix, rhs, equality = form
    g = np.asarray(points, dtype=float) @ matrix.T - rhs
    return np.where(equality, np.abs(g), np.maximum(g, 0.0))


def _linear_form_problem(bound: Any, method: Callable[..., Any]) -> str | None:
    """``linear_form()``: one finite coefficient per rule and column, one finite right-hand side and one equality
    flag per rule; and the rules' own ``violations()`` on a few rows agree with the residuals of that form."""
    try:
        form = linear_form(bound)
    except ConstraintError as err:
        return str(err)
    d = len(getattr(bound, "columns", ()))
    if form is None or d == 0:
        return None
    matrix, rhs, _ = form
    points = np.linspace(-3.3, 7.7, 5 * d).reshape(5, d)
    residuals = linear_residuals(form, points)
    try:
        own = np.asarray(bound.violations(points.copy()), dtype=float).reshape(residuals.shape)
    except Exception as err:  # noqa: BLE001 - reported to the plugin author
        return f"violations(points) raised {type(err).__name__}: {err}"
    size = np.abs(points) @ np.abs(matrix.T) + np.abs(rhs)
    if not np.allclose(own, residuals, rtol=0.0, atol=1e-9 * float(np.max(size, initial=1.0))):
        return ("violations(points) disagrees with the residuals of linear_form() (|a.x - b| for an equality, "
                "max(0, a.x - b) for an inequality): the host evaluates the rules from the form, the handler's "
                "projection and the steps from violations()")
    return None


def _descriptions_problem(value: Any, _: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return ("metric_descriptions must map a metric name (or shell pattern) to (explanation, unit); got "
                f"{value!r}")
    bad = {k: v for k, v in value.items() if not isinstance(k, str) or not isinstance(v, tuple | list)
           or len(v) != 2 or not all(isinstance(x, str) for x in v)}
    return (f"metric_descriptions must map texts to (explanation, unit), two texts (unit \"\" for a plain "
            f"number); got {bad!r}") if bad else None


_STEP_KINDS = ("clusterers", "maskers", "noise_mechanisms")


def _relation_problem(value: Any, _: int) -> str | None:
    kind = value.kind if isinstance(value, Relation) else value
    return None if kind in (ADD_REMOVE, REPLACE_ONE) else (
        "privacy_relation must be privclust.Relation.ADD_REMOVE or privclust.Relation.REPLACE_ONE (or their "
        f"words \"add/remove\", \"replace-one\"); got {value!r}")


#: The optional members of components, by name: the one place they are
#: declared. The host reads them through :func:`capability`, and the
#: conformance kit (``privclust.testing``, check ``optional_capabilities``)
#: checks the ones a component has.
CAPABILITIES: Mapping[str, Capability] = MappingProxyType({c.name: c for c in (
    Capability(name="planned_cost", member="method", signature="planned_cost() -> (epsilon, delta) or None",
               kinds=_STEP_KINDS, problem=_cost_problem,
               used_for="the budget the step needs (it may spend less, as idp-kmeans stopping early, or more "
                        "where the cost depends on the data, as dp-dpcl's, checked as it runs); a recipe whose "
                        "steps ask for more than its [privacy] budget is refused when it is compiled"),
    Capability(name="privacy_relation", member="class attribute",
               signature="privacy_relation: ClassVar[Relation]", kinds=_STEP_KINDS, problem=_relation_problem,
               used_for="the neighbouring relation its DP releases are stated under (privclust.Relation.ADD_REMOVE "
                        "or Relation.REPLACE_ONE; the words \"add/remove\" and \"replace-one\" are read the "
                        "same): when a recipe mixes them, the compile-time budget check converts the add/remove "
                        "costs as the accountant will (2 epsilon); a costed step without it counts as possibly "
                        "replace-one"),
    Capability(name="step_problems", member="method", signature="step_problems() -> list[str]",
               kinds=_STEP_KINDS, problem=_texts_problem("step_problems()"), default=(),
               used_for="checks that only matter when the component runs as a step (a noise mechanism needs "
                        "epsilon and bounds as a step, not when another component calls it): a recipe step, or a "
                        "clusterer or masker nested in a component that declares no step_problems (microaggregation "
                        "fits its clusterer as a step), checked when the recipe is compiled; a component that "
                        "declares them speaks for the components it nests"),
    Capability(name="min_records", member="method", signature="min_records(n_columns) -> int or None",
               kinds=_STEP_KINDS, problem=_min_records_problem,
               used_for="the run is refused with a DataError if the data (or a stratum of [roles] strata) "
                        "have fewer records"),
    Capability(name="size_problems", member="method",
               signature="size_problems(n_records, n_columns) -> list[str]",
               kinds=_STEP_KINDS, problem=_texts_problem("size_problems()"), default=(),
               used_for="what is wrong with running the step on the whole data of that many records, each text "
                        "naming the parameter at fault and the values that work: the run (and privclust check "
                        "--input) is refused with a DataError carrying these texts, in place of min_records' "
                        "generic 'needs at least N records'"),
    Capability(name="data_problems", member="method", signature="data_problems(data) -> list[str]",
               kinds=_STEP_KINDS, problem=_texts_problem("data_problems()"), default=(),
               used_for="the step's own checks of the values of its columns (data: those columns of the input, as "
                        "the step would be given them), each text naming the column, the value at fault and the "
                        "fix (a key masker's key that holds fractions, a PRAM category without a row in its "
                        "matrix): the run (and privclust check --input) is refused with a DataError carrying these "
                        "texts, located at the step, before any step runs. Asked only of a step whose columns no "
                        "earlier step changes, and on the whole data: check per value, not per stratum or group"),
    Capability(name="uses_constraints", member="class attribute", signature="uses_constraints: ClassVar[bool]",
               kinds=_STEP_KINDS, problem=_bool_problem, default=True,
               used_for="False if the component ignores edit rules, so a rule need not lie wholly inside or "
                        "outside its columns (read for maskers: a clusterer or a noise step never has to)"),
    Capability(name="key_masker", member="class attribute", signature="key_masker: ClassVar[bool]",
               kinds=("maskers",), problem=_bool_problem_of("key_masker"), default=False,
               used_for="True if the masker treats categorical key variables (local suppression, PRAM): its step may "
                        "name [roles] keys columns, of any dtype (text, categories, integer codes), and may release "
                        "a key value missing where the original has one (a suppression, released missing and "
                        "counted by the host's missing-value checks); every other step naming a key is refused"),
    Capability(name="dp_output", member="class attribute",
               signature="dp_output: ClassVar[bool | tuple[str, ...]]",
               kinds=_STEP_KINDS, problem=_dp_output_problem, default=True,
               used_for="what of the step's release its DP ledger entries cover: True (default) everything, False "
                        "nothing, or a tuple of \"values\" (the columns a masker or noise step writes) and "
                        "\"labels\" (a clusterer's label column). The host decides per released column: a column "
                        "its step's DP entries do not cover (microaggregation's group means, computed from the "
                        "records whatever a nested DP clusterer spent; dp-dpcl's labels, computed from raw "
                        "distances whatever its density vector spent) voids the verdict's DP guarantee, naming "
                        "the column"),
    Capability(name="data_leaks", member="method", signature="data_leaks() -> list[privclust.DataLeak]",
               kinds=_STEP_KINDS, problem=_leaks_problem, default=(),
               used_for="parameters the component would take from the data, read before any data are seen: the "
                        "recipe is refused at compile time unless [privacy] allow_leaks names them"),
    Capability(name="leak_names", member="class attribute", signature="leak_names: ClassVar[tuple[str, ...]]",
               kinds=_STEP_KINDS, problem=_texts_problem("leak_names"), default=(),
               used_for="leak names of its own (beyond privclust.KNOWN_LEAKS) that context.record_leak may use "
                        "and [privacy] allow_leaks may name"),
    Capability(name="missing_values", member="method", signature="missing_values() -> str or None",
               kinds=_STEP_KINDS, problem=_missing_problem,
               used_for="the step's missing-value policy: None (or no such method) and the run is refused before any "
                        "step runs if the step's columns hold a missing value (NaN), naming the step, the columns and "
                        "the counts; a text (what the step does with them, e.g. 'distances over the observed "
                        "variables; missing values released missing') and the step receives NaN, released NaN in the "
                        "same cells, and the host writes the counts and the text in the ledger"),
    Capability(name="round_integers", member="method", bound=True, problem=_rounding_problem,
               signature="round_integers(values, integer, fixed) -> values", kinds=("constraint_handlers",),
               used_for="(a method of the rules bind() returns) controlled rounding of the integer columns after "
                        "the steps, keeping the rules that held; without it the host rounds each value to the "
                        "nearest integer and reports the rules the rounding broke. Outside the columns of the rules' "
                        "equalities, integers may move by less than 1 and nothing else may move: the host refuses "
                        "the run otherwise, and the conformance kit checks the same on a few rows"),
    Capability(name="joined_with", member="method", bound=True,
               signature="joined_with(other_bound_rules) -> bound rules or None", kinds=("constraint_handlers",),
               used_for="(a method of the rules bind() returns) the rules of two [[constraints]] tables as one set "
                        "(both bound to the same columns; None when it cannot join them): the host rounds the "
                        "integer columns for the joined rules at once, so a rule of a later table is kept like one "
                        "of the first; without it each table's rules are rounded after the earlier ones, which "
                        "cannot move the columns those rounded. When the recipe is compiled, the host joins the "
                        "rules of all the tables: a ConstraintError raised by joined_with (rules that contradict "
                        "each other or cannot hold together) refuses the recipe"),
    Capability(name="magnitudes", member="method", bound=True, problem=_magnitudes_problem,
               signature="magnitudes(points) -> array (rows, rules)", kinds=("constraint_handlers",),
               used_for="(a method of the rules bind() returns) the size of the terms each rule sums at each row "
                        "(for a linear rule, sum |a_j x_j| + |b|): the host judges a released record against the "
                        "rule within 1e-11 times this size; without it (and without linear_form), the largest "
                        "absolute value of the rule's columns"),
    Capability(name="linear_form", member="method", bound=True, problem=_linear_form_problem,
               signature="linear_form() -> (matrix, rhs, equality)", kinds=("constraint_handlers",),
               used_for="(a method of the rules bind() returns) the rules as coefficients over the bound columns: "
                        "rule r reads matrix[r] . x == rhs[r] where equality[r], else matrix[r] . x <= rhs[r]. The "
                        "host then evaluates the rules itself (residuals and the size of their terms) wherever it "
                        "judges them, and its ledger entry on each rule is its own verification, with the form it "
                        "evaluated in the entry's details; where the rules' own violations() disagree with the form "
                        "on a released record, the entry says the host cannot check the rule (status refuted); "
                        "without it the residuals are the handler's violations(), and the rule's entry is the "
                        "handler's evaluation, in its name (status claimed)"),
    Capability(name="disclosive_metrics", member="class attribute",
               signature="disclosive_metrics: ClassVar[tuple[str, ...]]", kinds=("evaluators",),
               problem=_texts_problem("disclosive_metrics"), default=(),
               used_for="metrics (names or shell patterns) computed from original values, withheld from the "
                        "public report"),
    Capability(name="renamed_params", member="class attribute",
               signature="renamed_params: ClassVar[Mapping[str, str]]", kinds=KINDS,
               problem=_renamed_problem, default=MappingProxyType({}),
               used_for="parameters renamed in a new version, {old recipe key: new key}: a recipe that still "
                        "writes an old key is refused with an error naming the new one, and so is a Python "
                        "constructor given the old keyword (the class's and its subclasses', once the registry "
                        "has loaded the class: privclust.params.RenamedParameterError)"),
    Capability(name="metric_descriptions", member="class attribute",
               signature="metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]]", kinds=("evaluators",),
               problem=_descriptions_problem, default=MappingProxyType({}),
               used_for="metric (name or shell pattern) -> (one-line explanation, unit): the report shows them "
                        "beside each figure"),
    Capability(name="evaluated_on", member="method",
               signature="evaluated_on(inputs) -> {'columns': [...], 'weight': str or None}", kinds=("evaluators",),
               used_for="the columns (and the sampling weight) the figures are actually computed on, when they are "
                        "not the evaluation's columns (key variables, a weight): the evaluation table and the report "
                        "name them beside the figures"),
)})


def capability(component: Any, name: str) -> Any:
    """A component's optional member ``name`` (one of :data:`CAPABILITIES`),
    or the capability's default when the component does not have it: a
    method comes back bound (call it), an attribute as its value."""
    declared = CAPABILITIES[name]
    value = getattr(component, name, None)
    if value is None:
        return None if declared.member == "method" else declared.default
    if declared.member == "method" and not callable(value):
        return None
    return value
