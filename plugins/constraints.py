"""Built-in constraint handler ``linear``: linear edit rules over named columns.

Rules are text over column names, e.g. ``"total = 1.16*exp16 + 1.07*exp7"``,
``"tax <= 0.5*gross"``, ``"age >= 0"`` or ``"`net income` >= 0"``, parsed by
a small grammar of its own (never ``eval``; see :mod:`._linear`). The
handler checks the rules before any data is read (syntax, redundant or
contradictory equalities, an empty feasible set, unknown columns), projects
points onto the feasible polyhedron (in the metric where column ``j`` is
divided by ``scale[j]``) and measures each rule's violations.

>>> import numpy as np
>>> from privclust_plugins.constraints import LinearConstraints
>>> rules = LinearConstraints(rules=["total = 1.16*exp16 + 1.07*exp7", "exp16 >= 0"])
>>> bound = rules.bind(["exp16", "exp7", "total"])
>>> x = bound.project(np.array([[13.0, 100.0, 125.56]]))
>>> bool(abs(1.16 * x[0, 0] + 1.07 * x[0, 1] - x[0, 2]) < 1e-9)
True
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

import privclust
from privclust import ConstraintError, param

from . import _linear, _rounding
from ._linear import ParsedRule, RuleSyntaxError

__version__ = "0.1.0"


def _as_rules(value: Any) -> Any:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


#: The most rules one ``linear`` handler takes (its consistency checks solve
#: one linear programme per rule when the rules contradict each other).
MAX_RULES = 1_000


def _check_rules(value: Any) -> str | None:
    if len(value) == 0:
        return "needs at least one rule, e.g. rules = [\"total = a + b\"]"
    if len(value) > MAX_RULES:
        return f"has {len(value):,} rules, more than the limit of {MAX_RULES:,}; keep the rules that bind"
    bad = [r for r in value if not isinstance(r, str)]
    if bad:
        return f"must be rule texts (strings); {bad[0]!r} is not"
    return None


def _parse_all(rules: Sequence[str]) -> tuple[ParsedRule, ...]:
    parsed, errors = [], []
    for text in rules:
        try:
            rule = _linear.parse_rule(text)
        except RuleSyntaxError as err:
            errors.append(str(err))
            continue
        if not (math.isfinite(rule.rhs) and all(math.isfinite(a) for _, a in rule.coefs)):
            errors.append(f"edit rule {text!r}: a coefficient or constant overflows (beyond {sys.float_info.max:.3g}, "
                          "the largest floating-point number); rescale the rule, e.g. divide both sides by a power "
                          "of ten")
            continue
        parsed.append(rule)
    if errors:
        raise ConstraintError("\n".join(errors))
    return tuple(parsed)



@attrs.frozen(kw_only=True)
class LinearConstraints:
    """Linear edit rules (equalities and inequalities) over named columns.

    Projection: the Euclidean projection onto ``{x : C x = b, G x <= h}``
    after dividing column ``j`` by ``scale[j]``; equalities in closed form,
    inequalities exactly by active-set enumeration (few of them) or by a
    dual accelerated gradient method whose active sets are solved exactly and
    verified against the KKT conditions (many of them).
    """

    name: ClassVar[str] = "linear"

    rules: tuple[str, ...] = param(tuple, converter=_as_rules, check=_check_rules,
                                   doc='edit rules over column names, e.g. ["total = a + b", "tax <= 0.5*gross"]')
    tol: float = param(float, role="plain", default=1e-13, ge=1e-15, lt=privclust.RULE_RTOL,
                       doc="feasibility and multiplier tolerance of the projection, relative to the size of each "
                           "rule's terms at the row, sum_j |a_j x_j| + |b| (below the host's RULE_RTOL)")
    max_iter: int = param(int, default=10_000, ge=25,
                          doc="iteration cap of the dual method used when there are many inequalities")
    max_active_sets: int = param(int, default=256, ge=1,
                                 doc="enumerate up to this many candidate active sets exactly; beyond, the dual method")

    _parsed: tuple[ParsedRule, ...] = attrs.field(init=False, eq=False, repr=False, default=())

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_parsed", _parse_all(self.rules))

    # -- the handler protocol ------------------------------------------------------

    def variables(self) -> tuple[frozenset[str], ...]:
        """The columns each rule constrains (non-zero coefficients)."""
        return tuple(p.variables for p in self._parsed)

    def describe(self) -> tuple[str, ...]:
        return tuple(self.rules)

    def parsed(self) -> tuple[ParsedRule, ...]:
        """Each rule in normal form (``a.x = b`` or ``a.x <= b``)."""
        return self._parsed

    def check(self, columns: Sequence[str] | None) -> list[str]:
        """Problems found without data: unknown columns (when ``columns`` is
        given), redundant or contradictory equalities, and rule sets no point
        satisfies (an LP feasibility check with scipy's HiGHS)."""
        problems: list[str] = []
        if columns is not None:
            known = [str(c) for c in columns]
            known_set = set(known)
            for i, p in enumerate(self._parsed):
                for name in p.names:
                    if name not in known_set:
                        close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
                        fix = ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else (
                            "the data's columns are " + ", ".join(known[:12]) + (" ..." if len(known) > 12 else ""))
                        problems.append(f"rule {i + 1} {p.text!r} names column {name!r}, which is not in the data "
                                        f"({fix})")
        problems.extend(self._system_problems(range(len(self._parsed))))
        return problems

    def _system(self, chosen: Sequence[int]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                      list[int], list[int]]:
        rules = [self._parsed[i] for i in chosen]
        names = list(dict.fromkeys(n for p in rules for n, _ in p.coefs))
        index = {n: j for j, n in enumerate(names)}
        eq = [i for i in chosen if self._parsed[i].kind == "eq"]
        le = [i for i in chosen if self._parsed[i].kind == "le"]
        d = len(names)
        E = np.array([self._parsed[i].row(index, d) for i in eq]).reshape(len(eq), d)
        f = np.array([self._parsed[i].rhs for i in eq], dtype=float)
        A = np.array([self._parsed[i].row(index, d) for i in le]).reshape(len(le), d)
        c = np.array([self._parsed[i].rhs for i in le], dtype=float)
        return names, E, f, A, c, eq, le

    def _system_problems(self, chosen: Sequence[int], *, labels: Sequence[str] | None = None,
                         redundant: bool = True) -> list[str]:
        """Redundant (unless ``redundant`` is false) and contradictory
        equalities among the ``chosen`` rules, and rules no point satisfies
        together; each rule named ``labels[i]`` (default ``rule i+1 'text'``)."""
        chosen = list(chosen)
        if not chosen:
            return []
        _, E, f, A, c, eq, le = self._system(chosen)
        problems = []

        def label(i: int) -> str:
            return labels[i] if labels is not None else f"rule {i + 1} {self.rules[i]!r}"

        def show(ids: Sequence[int]) -> str:
            return ", ".join(label(i) for i in ids)

        contradictory = False
        for what, row, deps in _linear.equality_problems(E, f):
            i, others = eq[row], [eq[j] for j in deps]
            if what == "redundant":
                if redundant:
                    problems.append(f"{label(i)} follows from {show(others)}: the equalities are rank-deficient "
                                    "(remove the redundant rule)")
            else:
                contradictory = True
                problems.append(f"{label(i)} contradicts {show(others)}: no record can satisfy them all (fix a "
                                "coefficient or a constant, or drop one of them)")
        if not contradictory:
            iis = _linear.infeasible_subset(E, f, A, c)
            if iis is not None:
                ids = sorted([eq[j] for j in iis[0]] + [le[j] for j in iis[1]])
                problems.append(f"{show(ids)} cannot all hold at once: no record satisfies them together "
                                "(the feasible set is empty; relax or remove one of them)")
        return problems

    def bind(self, columns: Sequence[str], rules: Sequence[int] | None = None) -> BoundLinear:
        """The rules (all, or those numbered in ``rules``, 0-based) over an
        ordered list of columns.

        :raises ConstraintError: when a rule names a column not in
            ``columns``, or the chosen rules contradict each other.
        """
        columns = tuple(str(c) for c in columns)
        chosen = list(range(len(self._parsed))) if rules is None else [int(r) for r in rules]
        for r in chosen:
            if not 0 <= r < len(self._parsed):
                raise ConstraintError(f"linear: rule number {r} does not exist; there are {len(self._parsed)} rules")
        index = {c: j for j, c in enumerate(columns)}
        for r in chosen:
            missing = [n for n in self._parsed[r].names if n in self._parsed[r].variables and n not in index]
            if missing:
                close = difflib.get_close_matches(missing[0], list(columns), n=2, cutoff=0.6)
                hint = (" (did you mean " + " or ".join(repr(c) for c in close) + "?)") if close else ""
                raise ConstraintError(f"edit rule {self.rules[r]!r} names {', '.join(map(repr, missing))}, not among "
                                      f"the columns {list(columns)}{hint}")
        problems = self._system_problems(chosen)
        if problems:
            raise ConstraintError("; ".join(problems))
        return BoundLinear(self, columns, chosen)


#: How many times :meth:`BoundLinear.project` projects again the rows that
#: the host's check (:func:`privclust.judge`) would still call violated after
#: a projection.
REPROJECTIONS = 2


class BoundLinear:
    """Linear edit rules bound to an ordered list of columns.

    :ivar columns: the columns, in the order of the points' coordinates.
    :ivar rules: the rule texts, in the order of the violations' columns.
    :ivar rule_columns: per rule, the columns it uses (a non-zero
        coefficient), in the order of :attr:`columns`: the host and
        :func:`privclust.judge` evaluate each rule on these alone.
    """

    def __init__(self, handler: LinearConstraints, columns: tuple[str, ...], chosen: Sequence[int]):
        self.handler = handler
        self.columns = columns
        self.chosen = tuple(chosen)
        parsed = [handler.parsed()[i] for i in self.chosen]
        self.rules: tuple[str, ...] = tuple(p.text for p in parsed)
        self.rule_columns: tuple[tuple[str, ...], ...] = tuple(tuple(c for c in columns if c in p.variables)
                                                               for p in parsed)
        index = {c: j for j, c in enumerate(columns)}
        d = len(columns)
        self._kinds = np.array([p.kind == "eq" for p in parsed], dtype=bool)
        self._matrix = np.array([p.row(index, d) for p in parsed]).reshape(len(parsed), d)
        self._rhs = np.array([p.rhs for p in parsed], dtype=float)
        self._exact = [p.exact_row(index, d) for p in parsed]  # for the integer checks, exactly as written
        involved = np.flatnonzero(np.any(self._matrix != 0.0, axis=0))
        self.involved = involved
        # bounds (one column, inequality): after a projection, values within rounding of a bound are set
        # onto it, so that e.g. "amount >= 0" never leaves -1e-16 in a released file
        single = (np.count_nonzero(self._matrix, axis=1) == 1) & ~self._kinds
        self._bounds: list[tuple[int, float, bool]] = []  # (column, limit, is an upper bound)
        for i in np.flatnonzero(single):
            j = int(np.flatnonzero(self._matrix[i])[0])
            a = float(self._matrix[i, j])
            self._bounds.append((j, float(self._rhs[i]) / a, a > 0))
        #: The method and iterations of the last projection (for diagnostics).
        self.last_stats: _linear.ProjectionStats | None = None

    def __repr__(self) -> str:
        return f"<linear rules {list(self.rules)} over {list(self.columns)}>"

    def _points(self, points: Any) -> np.ndarray:
        arr = np.asarray(points, dtype=float)
        one = arr.ndim == 1
        arr = arr.reshape(1, -1) if one else arr
        if arr.ndim != 2 or arr.shape[1] != len(self.columns):
            raise ConstraintError(f"linear: points must have {len(self.columns)} columns ({', '.join(self.columns)}); "
                                  f"got shape {np.shape(points)}")
        return arr

    def violations(self, points: Any) -> np.ndarray:
        """``(n, n_rules)``: ``|a.x - b|`` for equalities, ``max(0, a.x - b)``
        for inequalities (in the data's units)."""
        X = self._points(points)
        g = X @ self._matrix.T - self._rhs
        return np.where(self._kinds, np.abs(g), np.maximum(g, 0.0))

    def linear_form(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``linear_form`` capability: the rules as the parser read them,
        ``(matrix, rhs, equality)`` over :attr:`columns` (rule ``r``:
        ``matrix[r] . x == rhs[r]`` where ``equality[r]``, else ``<=``; a
        ``>=`` rule is stored negated), from which the host evaluates the
        rules on the released file itself."""
        return self._matrix.copy(), self._rhs.copy(), self._kinds.copy()

    def _slack_scale(self, X: np.ndarray) -> np.ndarray:
        """Per row and rule, the size of the terms: ``|a| . |x| + |b|``."""
        return np.abs(X) @ np.abs(self._matrix.T) + np.abs(self._rhs)

    def magnitudes(self, points: Any) -> np.ndarray:
        """The ``magnitudes`` capability: ``(n, n_rules)``, the size of the
        terms of each rule at each row, ``sum_j |a_j x_j| + |b|`` (the scale
        of the floating-point error of evaluating it); the host judges a
        released record against the rule within a small multiple of it."""
        return self._slack_scale(self._points(points))

    def project(self, points: Any, *, scale: Any = None) -> np.ndarray:
        """Project each row onto the feasible set, nearest in the metric
        ``sum_j ((x_j - y_j) / scale_j)^2``; never modifies ``points``.

        Columns no rule involves are returned unchanged, and so are rows
        that already satisfy every rule to float rounding (``1e-13`` of the
        size of the rule's terms, ``sum_j |a_j x_j| + |b|``). A projected
        row that the host's check would still call violated (beyond
        :data:`privclust.RULE_RTOL` of the size of the rule's terms) is
        projected again from where it is, up to :data:`REPROJECTIONS` times.
        """
        X = self._points(points)
        out = np.array(X, dtype=float, copy=True)
        if not self.rules or X.shape[0] == 0:
            return out if np.ndim(points) == 2 else out[0]
        s = np.ones(len(self.columns)) if scale is None else np.asarray(scale, dtype=float).reshape(-1)
        if s.shape != (len(self.columns),) or not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ConstraintError(f"linear: scale must hold {len(self.columns)} finite positive numbers; got {scale!r}")
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is no pass: such a row is projected
            slack = self._slack_scale(X)
            ok = np.all(np.isfinite(slack) & (self.violations(X) <= 1e-13 * slack), axis=1)
        rows = np.flatnonzero(~ok)
        for _ in range(1 + REPROJECTIONS):
            if not rows.size:
                break
            out[rows] = self._project_rows(out[rows], s)
            # rows the host's check (privclust.judge, RULE_RTOL of the rule's terms) would still call violated are
            # projected again from where they are (float error of a far-away start point, or a bound's snap)
            with np.errstate(over="ignore", invalid="ignore"):
                Y = out[rows]
                still = np.any(self.violations(Y) > privclust.RULE_RTOL * self._slack_scale(Y), axis=1)
            rows = rows[still]
        return out if np.ndim(points) == 2 else out[0]

    def _project_rows(self, X: np.ndarray, s: np.ndarray) -> np.ndarray:
        """``X`` (rows to project, in the order of :attr:`columns`)
        projected in the metric of ``s``, then snapped onto the bounds."""
        out = X.copy()
        J = self.involved
        sj = s[J]
        Z = X[:, J] / sj
        M = self._matrix[:, J] * sj  # the rules in z-space
        # each rule divided by its largest coefficient: the same rule, and 1e299*a <= 1e299*b no longer
        # overflows (its rows were skipped and released broken: a red-team audit)
        norm = np.abs(M).max(axis=1, initial=0.0)
        norm = np.where(norm > 0, norm, 1.0)
        M, rhs = M / norm[:, None], self._rhs / norm
        eq = self._kinds
        proj, stats = _linear.project_polyhedron(
            Z, M[eq], rhs[eq], M[~eq], rhs[~eq], rtol=self.handler.tol,
            max_iter=self.handler.max_iter, max_active_sets=self.handler.max_active_sets)
        self.last_stats = stats
        out[:, J] = proj * sj
        for j, limit, upper in self._bounds:
            out[:, j] = np.minimum(out[:, j], limit) if upper else np.maximum(out[:, j], limit)
        return out

    def round_integers(self, values: Any, integer: Any, fixed: Any = None) -> np.ndarray:
        """Controlled rounding (the ``round_integers`` capability): each row
        with its ``integer`` columns rounded to whole numbers, keeping every
        rule that held on the row wherever the rules' structure allows.

        :param values: ``(n, d)`` values in the order of :attr:`columns`; NaN
            for a missing value, which stays missing.
        :param integer: ``(d,)`` booleans, the columns to release as whole
            numbers.
        :param fixed: ``(d,)`` booleans, the columns that must not change
            (``None``: none).
        :returns: a new float array. Equalities over integer columns with
            integer coefficients are solved exactly on the integers (together
            where they share columns) for columns whose solution is always an
            integer, e.g. a column with coefficient +-1 after dividing by the
            gcd of the coefficients; an equality with a non-integer column
            that may change is solved for that column; inequalities and bounds
            broken by the rounding are repaired by rounding down or up
            instead. What still fails is for the caller to report. See
            :func:`privclust_plugins._rounding.controlled_rounding` and
            :meth:`rounding_plan`.
        """
        X = self._points(values)
        d = len(self.columns)
        integer = np.asarray(integer, dtype=bool).reshape(-1)
        fixed = np.zeros(d, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool).reshape(-1)
        if integer.shape != (d,) or fixed.shape != (d,):
            raise ConstraintError(f"linear: integer and fixed must hold {d} booleans, one per column "
                                  f"({', '.join(self.columns)})")
        plan = self.rounding_plan(integer, fixed)
        out = _rounding.controlled_rounding(X, self._matrix, self._rhs, self._kinds, integer, fixed, plan)
        return out if np.ndim(values) == 2 else out[0]

    def joined_with(self, other: Any) -> BoundLinear | None:
        """The ``joined_with`` capability: these rules and ``other``'s as one
        set over the same columns (``None`` unless ``other`` is linear rules
        bound to the same columns), so that controlled rounding solves the
        equalities of two ``[[constraints]]`` tables together and repairs
        every table's inequalities, and the host checks that the tables'
        rules can hold together when it compiles a recipe.

        :raises ConstraintError: when the joined rules contradict each other
            (an equality of one contradicts those of the other) or no point
            satisfies them together, naming the rules by their text. An
            equality that merely repeats one of the other set is allowed:
            each table was checked on its own.
        """
        if not isinstance(other, BoundLinear) or tuple(other.columns) != tuple(self.columns):
            return None
        handler = attrs.evolve(self.handler, rules=(*self.rules, *other.rules))
        everything = range(len(handler.rules))
        problems = handler._system_problems(everything, labels=[f"edit rule {t!r}" for t in handler.rules],
                                            redundant=False)
        if problems:
            raise ConstraintError("; ".join(problems))
        return BoundLinear(handler, self.columns, everything)

    def integer_problems(self, integer: Any) -> list[str]:
        """The rules no record of whole numbers satisfies when the
        ``integer`` columns (``(d,)`` booleans in the order of
        :attr:`columns`) hold whole numbers, decided from the rules alone,
        exactly as written (``0.1`` is 1/10, not its double): an equality
        over integer columns that, multiplied by the lowest common multiple
        of its coefficients' denominators, has whole coefficients whose gcd
        does not divide its constant (``2*x == 1``, ``x + y == 1.5``,
        ``0.5*t == 0.5*a + 0.25``). The host asks before any step runs,
        where the data say which columns are integers."""
        integer = np.asarray(integer, dtype=bool).reshape(-1)
        return [f"edit rule {self.rules[i]!r}: {why}"
                for i, why in _rounding.integer_infeasible(self._matrix, self._rhs, self._kinds, integer,
                                                            self._exact)]

    def rounding_plan(self, integer: Any, fixed: Any = None) -> _rounding.RoundingPlan:
        """Which equality is solved for which columns, and which equalities
        cannot be kept exactly (with the reason), for these integer and
        fixed columns; decided from the rules alone."""
        d = len(self.columns)
        integer = np.asarray(integer, dtype=bool).reshape(-1)
        fixed = np.zeros(d, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool).reshape(-1)
        return _rounding.rounding_plan(self._matrix, self._rhs, self._kinds, integer, fixed, self._exact)

    def satisfied(self, points: Any, *, tol: float = privclust.RULE_RTOL) -> np.ndarray:
        """Per row, whether every rule holds, as :func:`privclust.judge` says
        (``tol``: its ``rtol``, the host's tolerance unless given)."""
        return privclust.judge(self, self._points(points), rtol=tol).holds()


@privclust.hookimpl
def privclust_register_constraint_handlers(register):
    register(LinearConstraints)
