"""Edit rules as the runner hands them to a step.

A recipe's ``[[constraints]]`` entries are constraint-handler components (the
built-in one is ``linear``). For each step the runner binds the rules whose
columns all lie in the step's columns and hands the step a
:class:`ConstraintSet` through ``context.constraints``. A rule that mixes the
step's columns with others is a recipe error: the step could not satisfy it.

With one handler the set delegates to it. With several, the projection onto
the intersection of their (convex) feasible sets uses Dykstra's alternating
projections, which converge to the exact Euclidean projection (Boyle &
Dykstra 1986).

Whether a record satisfies a rule has one answer, :func:`judge`, which the
host's check of the released file, the handlers' ``satisfied``, the
``edit-violations`` evaluator and the CLI demo all ask. Where the bound rules
state their coefficients (the ``linear_form`` capability), the host evaluates
the rules itself from them; for the rules of a handler that does not, the
residuals are the handler's own (``violations()``), and what the host says of
them is the handler's evaluation (:attr:`ConstraintSet.host_evaluated`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .components import BoundConstraints, linear_form, linear_residuals
from .errors import ConstraintError

__all__ = ["RULE_RTOL", "ConstraintSet", "RuleStatus", "integer_flags", "integer_rule_tolerance", "judge"]

#: A record satisfies an edit rule when the rule's violation is at most this
#: times the size of the rule's terms in the record
#: (:meth:`ConstraintSet.magnitudes`: for a linear rule ``sum_j |a_j x_j| +
#: |b|``; for a handler that does not state it, the largest absolute value of
#: the rule's own columns). Floating-point error, some 10^4 times a double's
#: 2.2e-16, and far below a real violation: a tolerance of 1e-6 of the largest
#: value passed a violation of 1.5 near 1e6, and one of 1e-9 passed 85 near
#: 1e12 and a rule "staff <= 0.00001 turnover" broken by 0.37 with turnover
#: near 1e9.
RULE_RTOL = 1e-11


def integer_flags(frame: Any, columns: Sequence[str]) -> list[bool]:
    """Per column of ``columns``, whether ``frame`` holds it as whole numbers
    (an integer dtype: numpy ``int*`` and ``uint*``, pandas nullable ``Int*``
    and ``UInt*``, not bool; a column the frame lacks is not): the
    ``integer`` flags of :func:`judge`, so that every place that judges a
    file's rules (the host's check, the CLI's lines on the original data,
    ``edit-violations``) judges a rule over integer columns alike."""
    return [c in frame.columns and pd.api.types.is_integer_dtype(frame[c]) and not pd.api.types.is_bool_dtype(
        frame[c]) for c in columns]


def integer_rule_tolerance(sizes: Any, n_terms: Any) -> Any:
    """The tolerance of a rule whose columns all hold whole numbers (the
    released integer columns): the error of evaluating it in double
    precision, ``(n_terms + 1)`` times a double's epsilon (2^-52) times
    the size of its terms, and nothing for an iterative projection's
    inaccuracy, which rounded values no longer carry. :data:`RULE_RTOL`
    there passed ``a <= 2*b`` broken by 1 with a and b near 1e12 (its
    tolerance was about 20; this one is 7e-4). Above 2^52 / (n_terms + 1)
    it is 1 or more: double precision cannot tell a violation by 1 there,
    and the rule's check says it is within this tolerance, not that it
    holds exactly."""
    return (np.asarray(n_terms, dtype=float) + 1.0) * np.finfo(float).eps * np.asarray(sizes, dtype=float)


@dataclass(frozen=True, eq=False)
class RuleStatus:
    """What :func:`judge` says of each record and rule, each ``(n, n_rules)``.

    :ivar violated: the rule's residual exceeds the tolerance.
    :ivar undecided: the rule cannot be judged on the record: it misses a
        value of the rule's columns (``missing``), or double precision
        cannot decide it (a value of its columns is infinite, its residual
        is not finite, or the size of its terms overflows and the residual
        is above the smallest tolerance they could give). An undecided
        record neither satisfies nor violates the rule.
    :ivar residuals: by how much the record violates the rule (``|a.x - b|``
        for a linear equality, ``max(0, a.x - b)`` for an inequality),
        computed on the rule's own columns; NaN where ``missing``.
    :ivar missing: the part of ``undecided`` due to a missing value (NaN) of
        the rule's columns.
    """

    violated: np.ndarray
    undecided: np.ndarray
    residuals: np.ndarray
    missing: np.ndarray

    @property
    def satisfied(self) -> np.ndarray:
        """``(n, n_rules)``: decided and not violated."""
        return ~self.violated & ~self.undecided

    def holds(self) -> np.ndarray:
        """Per record, whether it satisfies every rule (an undecided rule is
        not satisfied)."""
        return np.all(self.satisfied, axis=1)


def judge(rules: Any, values: Any, *, rtol: float = RULE_RTOL, integer: Sequence[bool] | np.ndarray | None = None,
          ) -> RuleStatus:
    """The one answer to "does this record satisfy this edit rule?".

    ``rules`` is a :class:`ConstraintSet` or the rules a constraint handler's
    ``bind()`` returns; ``values`` is ``(n, len(rules.columns))`` in the
    order of ``rules.columns``, NaN for a missing value. A record violates a
    rule when the rule's residual exceeds ``rtol`` (the host's
    :data:`RULE_RTOL`) times the size of the rule's terms
    (:meth:`ConstraintSet.magnitudes`); each rule is evaluated on its own
    columns (:attr:`ConstraintSet.rule_columns`), so a missing or infinite
    value of another column does not touch it. ``integer`` (one flag per
    column): the columns that hold whole numbers; a rule over such columns
    only is judged with :func:`integer_rule_tolerance` instead. See
    :class:`RuleStatus` for the records it leaves undecided."""
    rules = rules if isinstance(rules, ConstraintSet) else ConstraintSet(rules.columns, [rules])
    values = np.asarray(values, dtype=float)
    d, k = len(rules.columns), len(rules.rules)
    if values.ndim != 2 or values.shape[1] != d:
        raise ConstraintError(f"judge: values must have one column per rule column ({', '.join(rules.columns)}); "
                              f"got shape {values.shape}")
    own = rules.rule_positions
    nan = np.isnan(values)
    filled = np.where(nan, 0.0, values)
    with np.errstate(invalid="ignore", over="ignore"):
        residuals = np.array(rules.violations(filled), dtype=float).reshape(values.shape[0], k)
        sizes = np.array(rules.magnitudes(filled, own), dtype=float).reshape(values.shape[0], k)
        rows = np.flatnonzero(np.isinf(filled).any(axis=1))
        for r, used in enumerate(own if rows.size else ()):
            # an infinite value of another column must not spoil a rule (inf * 0 is NaN)
            alone = np.zeros((rows.size, d))
            alone[:, used] = filled[np.ix_(rows, used)]
            residuals[rows, r] = np.asarray(rules.violations(alone), dtype=float)[:, r]
            sizes[rows, r] = np.asarray(rules.magnitudes(alone, own), dtype=float)[:, r]
        bound = rtol * sizes  # relative only: a floor in the data's units passed any violation of small terms
        if integer is not None:
            whole = np.asarray(integer, dtype=bool)
            for r, used in enumerate(own):
                if len(used) and whole[list(used)].all():
                    bound[:, r] = integer_rule_tolerance(sizes[:, r], len(used))
    missing = np.zeros((values.shape[0], k), dtype=bool)
    infinite = np.zeros_like(missing)
    for r, used in enumerate(own):
        missing[:, r] = nan[:, used].any(axis=1)
        infinite[:, r] = np.isinf(filled[:, used]).any(axis=1)
    # terms whose size overflows: the residual itself may have overflowed and been clipped to 0 (an inequality's
    # max(0, -inf)), so double precision decides nothing there (a red-team audit: 1e299*a <= 1e299*b read held)
    undecided = missing | infinite | ~np.isfinite(residuals) | ~np.isfinite(sizes)
    violated = ~undecided & (residuals > bound)
    return RuleStatus(violated=violated, undecided=undecided, residuals=np.where(missing, np.nan, residuals),
                      missing=missing)


class ConstraintSet:
    """Several bound constraint handlers over the same ordered columns.

    ``handlers``: the name of each part's constraint handler (for the
    ledger's words). ``forms=False``: ignore the parts' :func:`linear_form`
    and evaluate every rule's residuals by its handler's own
    ``violations()`` (:meth:`handlers_own`)."""

    def __init__(self, columns: Sequence[str], parts: Sequence[BoundConstraints], *,
                 max_iter: int = 500, tol: float = 1e-10, variables: Sequence[Iterable[str]] | None = None,
                 handlers: Sequence[str] | None = None, forms: bool = True):
        self.columns = tuple(columns)
        self.parts = tuple(parts)
        for p in self.parts:
            if tuple(p.columns) != self.columns:
                raise ConstraintError(
                    f"bound constraints over {list(p.columns)} cannot join a set over {list(self.columns)}"
                )
        self.rules: tuple[str, ...] = tuple(r for p in self.parts for r in p.rules)
        self._handlers = handlers
        stated = [linear_form(p) for p in self.parts]
        # the sizes of the terms come from a stated form either way: the handlers' own residuals are judged against
        # the same tolerance as the host's (handlers_own)
        self._size_forms = stated
        self._forms = stated if forms else [None] * len(self.parts)
        self._rule_forms: list[tuple[np.ndarray, float, bool] | None] = [
            None if form is None else (form[0][i], float(form[1][i]), bool(form[2][i]))
            for p, form in zip(self.parts, self._forms, strict=True) for i in range(len(p.rules))]
        #: Per rule, whether the host evaluates it itself, from the coefficients its bound rules state
        #: (:func:`~privclust.components.linear_form`); where not, its residuals and sizes are its handler's own.
        self.host_evaluated: tuple[bool, ...] = tuple(form is not None for form in self._rule_forms)
        #: Per rule, the name of the constraint handler it came from ("" when the set was built from bound rules
        #: alone).
        self.rule_handlers: tuple[str, ...] = tuple(
            str(handlers[i]) if handlers is not None else "" for i, p in enumerate(self.parts) for _ in p.rules)
        #: Per rule, the columns it uses, in the order of :attr:`columns`: the
        #: ``rule_columns`` of the bound rules when they state them, else
        #: ``variables`` (one set of names per rule, e.g. the handlers'
        #: ``variables()``), else every column; with every column of a
        #: non-zero coefficient of a stated :func:`linear_form` added (the
        #: host evaluates the rule on these).
        self.rule_columns: tuple[tuple[str, ...], ...] = tuple(
            cols if form is None else tuple(c for j, c in enumerate(self.columns) if c in cols or form[0][j] != 0.0)
            for cols, form in zip(self._rule_columns(variables), self._rule_forms, strict=True))
        index = {c: j for j, c in enumerate(self.columns)}
        #: :attr:`rule_columns` as positions in :attr:`columns`.
        self.rule_positions: list[list[int]] = [[index[c] for c in cols] for cols in self.rule_columns]
        self.max_iter = max_iter
        self.tol = tol

    @classmethod
    def of(cls, handlers: Sequence[Any], columns: Sequence[str]) -> ConstraintSet | None:
        """Every rule of ``handlers`` bound to the columns the rules use, in
        the order of ``columns`` (``None`` without handlers)."""
        if not handlers:
            return None
        variables = [frozenset(v) for h in handlers for v in h.variables()]
        used = set().union(*variables)
        ordered = tuple(str(c) for c in columns if c in used)
        return cls(ordered, [h.bind(ordered) for h in handlers], variables=variables,
                   handlers=[str(getattr(h, "name", type(h).__name__)) for h in handlers])

    def _rule_columns(self, variables: Sequence[Iterable[str]] | None) -> tuple[tuple[str, ...], ...]:
        given = [set(map(str, v)) for v in variables] if variables is not None else None
        if given is not None and len(given) != len(self.rules):
            given = None
        out: list[tuple[str, ...]] = []
        for p in self.parts:
            stated = getattr(p, "rule_columns", None)
            if stated is not None and len(stated) != len(p.rules):
                raise ConstraintError(f"bound rules {p!r}: rule_columns lists {len(stated)} rule(s) for "
                                      f"{len(p.rules)} rule(s) (a bug in its plugin)")
            for r in range(len(p.rules)):
                names = set(map(str, stated[r])) if stated is not None else \
                    given[len(out)] if given is not None else set(self.columns)
                unknown = sorted(names - set(self.columns))
                if unknown:
                    raise ConstraintError(f"edit rule {p.rules[r]!r} uses column(s) {unknown}, which are not among "
                                          f"the bound columns {list(self.columns)}")
                out.append(tuple(c for c in self.columns if c in names))
        return tuple(out)

    def handlers_own(self) -> ConstraintSet:
        """The same rules evaluated by their handlers alone (each part's
        ``violations()``; the sizes of their terms still from a stated
        :func:`linear_form`, so both are judged with one tolerance): the
        host's check compares the two, so that a stated form which is not
        what the handler evaluates is found (a red-team audit: a plugin
        stated ``x <= 1e6`` for its rule ``x <= 10``)."""
        return ConstraintSet(self.columns, self.parts, max_iter=self.max_iter, tol=self.tol,
                             variables=self.rule_columns, handlers=self._handlers, forms=False)

    def rule_form(self, r: int) -> tuple[np.ndarray, float, bool] | None:
        """Rule ``r`` as the host evaluates it: its coefficients over :attr:`columns`, its right-hand side and
        whether it is an equality (else ``<=``); ``None`` for a rule whose handler states no ``linear_form``."""
        return self._rule_forms[r]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __repr__(self) -> str:
        return f"<ConstraintSet {len(self.rules)} rules over {list(self.columns)}>"

    def project(self, points: np.ndarray, *, scale: np.ndarray | None = None) -> np.ndarray:
        """Project each row of ``points`` onto the feasible set, in the metric
        where each column is divided by ``scale`` (``None``: Euclidean)."""
        points = np.asarray(points, dtype=float)
        if not self.parts:
            return points.copy()
        if len(self.parts) == 1:
            return self.parts[0].project(points, scale=scale)
        # Dykstra's algorithm, in scaled coordinates.
        s = np.ones(points.shape[-1]) if scale is None else np.asarray(scale, dtype=float)
        x = points / s
        increments = [np.zeros_like(x) for _ in self.parts]
        for _ in range(self.max_iter):
            previous = x
            for j, part in enumerate(self.parts):
                y = (x + increments[j])
                projected = part.project(y * s, scale=scale) / s
                increments[j] = y - projected
                x = projected
            if np.max(np.abs(x - previous), initial=0.0) <= self.tol * (1 + np.max(np.abs(x), initial=0.0)):
                break
        return x * s

    def violations(self, points: np.ndarray) -> np.ndarray:
        """``(n, n_rules)`` amounts by which each row violates each rule:
        computed by the host from the coefficients of the rules that state
        them (:func:`~privclust.components.linear_form`; ``|a.x - b|`` for an equality, ``max(0,
        a.x - b)`` for an inequality), the handler's ``violations()`` for the
        others."""
        points = np.asarray(points, dtype=float)
        if not self.parts:
            return np.zeros((points.shape[0], 0))
        out = []
        for p, form in zip(self.parts, self._forms, strict=True):
            if form is None:
                out.append(np.asarray(p.violations(points), dtype=float).reshape(points.shape[0], len(p.rules)))
                continue
            out.append(linear_residuals(form, points))  # the host's own arithmetic on the rules' coefficients
        return np.concatenate(out, axis=1)

    def magnitudes(self, points: np.ndarray, columns_of: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """``(n, n_rules)``: the size of the terms each rule sums at each row
        (for a linear rule ``a . x = b``, ``sum_j |a_j x_j| + |b|``), the
        scale of its floating-point error: computed by the host for the rules
        that state their coefficients (:func:`~privclust.components.linear_form`), else as a handler
        states it with the ``magnitudes`` capability of its bound rules. For
        the rules of a handler that states neither, the largest absolute value of the rule's own
        columns (``columns_of[r]``, positions in :attr:`columns`; all of
        them when not given). A missing value (NaN) counts as 0."""
        points = np.where(np.isnan(np.asarray(points, dtype=float)), 0.0, points)
        out = []
        for p, form in zip(self.parts, self._size_forms, strict=True):
            method = getattr(p, "magnitudes", None)
            if form is not None:  # the host's own: sum_j |a_j x_j| + |b|
                out.append(np.abs(points) @ np.abs(form[0].T) + np.abs(form[1]))
            else:
                out.append(np.asarray(method(points), dtype=float) if callable(method)
                           else np.full((points.shape[0], len(p.rules)), np.nan))
        size = np.concatenate(out, axis=1) if out else np.zeros((points.shape[0], 0))
        for r in np.flatnonzero(np.isnan(size).any(axis=0)).tolist():
            used = np.asarray(list(columns_of[r]) if columns_of is not None else range(points.shape[1]), dtype=np.intp)
            rows = np.isnan(size[:, r])  # only where unstated (a row's inf elsewhere gave inf * 0 = NaN in one row,
            # and the whole column took the fallback: whether a record was decided depended on another record)
            size[rows, r] = np.max(np.abs(points[np.ix_(rows, used)]), axis=1, initial=0.0)
        return size

    def satisfied(self, points: np.ndarray, *, tol: float = RULE_RTOL) -> np.ndarray:
        """Per row, whether every rule holds (:func:`judge`, with ``tol`` as
        its ``rtol``): a record a rule cannot be decided on (a missing or
        infinite value, an overflow) does not satisfy it."""
        return judge(self, points, rtol=tol).holds()
