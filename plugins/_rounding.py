"""Controlled rounding for the ``linear`` constraint handler: integer columns
rounded so that the integer equalities still hold (a pivot column per rule,
solved exactly), and the checks that say when no integer point can hold
them. Pure functions on arrays, decided from the rules' structure, never
from the data; the handler in :mod:`privclust_plugins.constraints` calls
them, and the rule parser and projection are in
:mod:`privclust_plugins._linear`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

import privclust

__all__ = ["RoundingPlan", "controlled_rounding", "integer_infeasible", "rounding_plan"]

#: A rule "held" on a record before rounding when its violation is at most
#: this, relative to the size of the rule's terms in the record,
#: ``sum_j |a_j x_j| + |b|`` (the tolerance with which the host records
#: whether a released file satisfies a rule).
HELD_RTOL = privclust.RULE_RTOL


@dataclass(frozen=True)
class RoundingPlan:
    """How the equalities are kept through rounding, decided once from the
    rules' structure (never from the data).

    ``order`` lists ``(rules, pivot sets)`` in the order they are solved:
    the rules (row numbers) solved together and the candidate sets of
    columns to solve them for (one column per rule; each record takes one
    set). ``unsolved`` lists the equalities that have no pivot, with the
    reason; they are kept only where plain rounding happens to keep them."""

    order: tuple[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], ...]
    unsolved: tuple[tuple[int, str], ...]


#: The most column sets :func:`rounding_plan` tries for one group of integer
#: equalities, and the most it keeps as candidates.
MAX_PIVOT_SEARCH = 4096
MAX_PIVOT_SETS = 16


def _integral(values: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values))
                and np.all(np.abs(values) < 2.0**53))


def _integral_sets(E: np.ndarray, f: np.ndarray, columns: list[int]) -> list[tuple[int, ...]]:
    """Sets ``P`` of ``columns`` (one per row of ``E``) for which solving
    ``E x = f`` for ``x_P`` gives integers whatever integers the other columns
    hold: ``E[:, P]`` is invertible and ``E[:, P]^-1 [E f]`` is an integer
    matrix (so ``x_P = T f - T_N x_N``). A determinant of +-1 is enough; a
    single equality needs a coefficient +-1 (after dividing by the gcd)."""
    m = E.shape[0]
    if len(columns) < m or math.comb(len(columns), m) > MAX_PIVOT_SEARCH:
        return []
    both = np.column_stack([E, f])
    found = []
    for P in itertools.combinations(columns, m):
        EP = E[:, list(P)]
        if abs(np.linalg.det(EP)) < 0.5:  # integer matrices: a non-zero determinant is at least 1
            continue
        T = np.linalg.solve(EP, both)
        if np.all(np.abs(T - np.round(T)) < 1e-9):
            found.append(tuple(int(j) for j in P))
            if len(found) >= MAX_PIVOT_SETS:
                break
    return found


def _number(value: float) -> str:
    """A constant of a rule as written: ``1`` for 1.0, ``1.5``, every digit otherwise."""
    return str(int(value)) if value == int(value) else repr(value)


def integer_infeasible(M: np.ndarray, rhs: np.ndarray, is_eq: np.ndarray, integer: np.ndarray,
                       exact: Sequence[tuple[Sequence[Fraction], Fraction]] | None = None) -> list[tuple[int, str]]:
    """The equalities no integer record satisfies, decided from the rules
    alone, with the reason: every column of the rule is an ``integer``
    column; multiplied by the lowest common multiple of the denominators of
    its coefficients, the rule has whole coefficients, so its left side is a
    multiple of their gcd, and the constant is not
    (``2*x == 1``, ``x + y == 1.5``, ``0.5*t == 0.5*a + 0.25``).

    :param exact: per rule, its coefficients (one per column) and constant
        as exact fractions (the decimals of the rule's text; ``0.1`` is
        1/10). Without it the doubles of ``M`` and ``rhs`` are used, and only
        rules whose coefficients are whole numbers are tested.
    """
    out = []
    for i in np.flatnonzero(is_eq).tolist():
        row = M[i]
        cols = np.flatnonzero(row != 0.0)
        if not cols.size or not integer[cols].all():
            continue
        if exact is not None:
            why = _exact_integer_infeasible([exact[i][0][j] for j in cols.tolist()], exact[i][1])
            if why:
                out.append((i, why))
            continue
        if not _integral(row[cols]):
            continue
        b = float(rhs[i])
        if not (math.isfinite(b) and abs(b) < 2.0**53):
            continue
        g = float(np.gcd.reduce(np.abs(row[cols]).astype(np.int64)))
        if b % g != 0.0:
            out.append((i, _infeasible_reason(int(g), _number(b))))
    return out


def _infeasible_reason(g: int, constant: str, scaled_by: int = 1) -> str:
    if scaled_by == 1:
        return (f"no integer record satisfies it: its columns hold whole numbers and its coefficients are whole "
                f"numbers, so its left side is a multiple of {g} (their gcd), and the constant {constant} is not")
    return (f"no integer record satisfies it: its columns hold whole numbers; multiplied by {scaled_by} (the lowest "
            f"common multiple of the denominators of its coefficients) its coefficients are whole numbers, so its "
            f"left side is a multiple of {g} (their gcd), and the constant, {constant} once multiplied, is not")


def _exact_integer_infeasible(coefs: Sequence[Fraction], b: Fraction) -> str | None:
    """The reason no integers satisfy ``sum_j coefs[j] x_j == b`` (exact
    fractions), or ``None`` when some do: multiplied by the lowest common
    multiple ``L`` of the coefficients' denominators, the coefficients are
    integers with gcd ``g``; integers satisfy the rule exactly when ``L*b``
    is a multiple of ``g`` (Bezout)."""
    scale = math.lcm(*(a.denominator for a in coefs))
    g = math.gcd(*(int(a * scale) for a in coefs))
    constant = b * scale
    if (constant / g).denominator == 1:
        return None
    shown = str(constant.numerator) if constant.denominator == 1 else _number(float(constant))
    return _infeasible_reason(g, shown, scale)


def rounding_plan(M: np.ndarray, rhs: np.ndarray, is_eq: np.ndarray, integer: np.ndarray,
                  fixed: np.ndarray, exact: Sequence[tuple[Sequence[Fraction], Fraction]] | None = None
                  ) -> RoundingPlan:
    """Choose which columns each equality is solved for.

    * An equality over integer columns only, with integer coefficients and
      constant, is first divided by the gcd of its coefficients
      (``2*t = 2*a + 2*b`` is ``t = a + b``; if the constant is not a
      multiple of the gcd, no integer record satisfies it). Such equalities
      that share columns are solved **together**, as one small integer
      system per record, for a set ``P`` of movable integer columns (one per
      equality) whose solution is an integer combination of the other
      columns and the constants (``E_P^-1 [E f]`` is an integer matrix, e.g.
      a determinant of +-1; for a single equality, a column with coefficient
      +-1): it is then an integer for any rounded values of the other
      columns. Up to :data:`MAX_PIVOT_SETS` such sets are candidates. Where no set exists (or
      the search would exceed :data:`MAX_PIVOT_SEARCH` sets), the equalities
      of the group are solved one after the other instead, each for a column
      with coefficient +-1 that no equality solved before it uses.
    * An equality with a column that is neither integer nor fixed is solved,
      after the integer equalities, for such a column (any coefficient): it
      then holds to float rounding whatever the integers became. Several of
      them are solved one after the other, never for a column of one solved
      before.
    * Any other equality (a non-integer coefficient on an integer column, no
      usable pivot, every column fixed) is not solved.
    """
    movable_int = integer & ~fixed
    movable_float = ~integer & ~fixed
    unsolved: list[tuple[int, str]] = []
    ints: dict[int, np.ndarray] = {}  # integer equalities, each divided by its gcd
    floats: dict[int, tuple[int, ...]] = {}
    impossible = dict(integer_infeasible(M, rhs, is_eq, integer, exact))
    for i in np.flatnonzero(is_eq).tolist():
        row = M[i]
        cols = np.flatnonzero(row != 0.0)
        float_cols = cols[movable_float[cols]]
        if float_cols.size:
            floats[i] = tuple(int(j) for j in float_cols)
            continue
        if not integer[cols].all():
            unsolved.append((i, "a column of the rule is neither an integer column nor changed by a step"))
            continue
        if i in impossible:
            unsolved.append((i, impossible[i]))
            continue
        if not (_integral(row[cols]) and _integral(np.array([rhs[i]]))):
            unsolved.append((i, "a coefficient or the constant is not an integer"))
            continue
        g = float(np.gcd.reduce(np.abs(row[cols]).astype(np.int64)))
        if not movable_int[cols].any():
            unsolved.append((i, "no column of the rule was changed by a step"))
            continue
        ints[i] = np.append(row / g, rhs[i] / g)  # the coefficients and the constant

    order: list[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]] = []
    ints_rows = {i: r[:-1] for i, r in ints.items()}
    for group in _groups(ints_rows):  # integer equalities that share columns
        E = np.array([ints[i][:-1] for i in group])
        f = np.array([ints[i][-1] for i in group])
        group_cols = [int(j) for j in np.flatnonzero(np.any(E != 0.0, axis=0) & movable_int)]
        sets = _integral_sets(E, f, group_cols)
        if sets:
            order.append((tuple(group), tuple(sets)))
            continue
        candidates = {i: tuple(j for j in group_cols if abs(ints[i][j]) == 1.0) for i in group}
        solved, left = _one_by_one(candidates, {i: ints_rows[i] for i in group}, set())
        order.extend(((i,), tuple((p,) for p in pivots)) for i, pivots in solved)
        unsolved.extend((i, "no column changed by a step has coefficient +1 or -1 once the coefficients are "
                            "divided by their gcd" if len(group) == 1 else
                            "the integer equalities sharing its columns have no set of columns to solve for that "
                            "always gives integers, and it has no column with coefficient +-1 left")
                        for i in left)
    used = {int(j) for i in ints for j in np.flatnonzero(M[i] != 0.0)}
    solved, left = _one_by_one(floats, {i: M[i] for i in floats}, used)
    order.extend(((i,), tuple((p,) for p in pivots)) for i, pivots in solved)
    unsolved.extend((i, "every column it could be solved for is in an equality solved before it") for i in left)
    return RoundingPlan(tuple(order), tuple(sorted(unsolved)))


def _groups(rows: dict[int, np.ndarray]) -> list[list[int]]:
    """The rules of ``rows`` in groups that share columns (connected
    components), each in rule order."""
    parent = {i: i for i in rows}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for i, row in rows.items():
        for j in np.flatnonzero(row != 0.0):
            if int(j) in owner:
                parent[root(i)] = root(owner[int(j)])
            else:
                owner[int(j)] = i
    groups: dict[int, list[int]] = {}
    for i in sorted(rows):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _one_by_one(candidates: dict[int, tuple[int, ...]], rows: dict[int, np.ndarray], used: set[int]
                ) -> tuple[list[tuple[int, tuple[int, ...]]], list[int]]:
    """Equalities solved one after the other, each for a column that no
    equality solved before it uses; next comes the one with the fewest
    columns still available (ties by rule order). Returns the solved ones
    with their columns and the rules left."""
    used = set(used)
    left = dict(candidates)
    solved = []
    while left:
        eligible = {i: tuple(j for j in c if j not in used) for i, c in left.items()}
        ready = [i for i, c in eligible.items() if c]
        if not ready:
            break
        i = min(ready, key=lambda r: (len(eligible[r]), r))
        solved.append((i, eligible[i]))
        used.update(int(j) for j in np.flatnonzero(rows[i] != 0.0))
        del left[i]
    return solved, sorted(left)


def controlled_rounding(X: np.ndarray, M: np.ndarray, rhs: np.ndarray, is_eq: np.ndarray, integer: np.ndarray,
                        fixed: np.ndarray, plan: RoundingPlan | None = None) -> np.ndarray:
    """Round the integer columns of every row of ``X`` so that the rules that
    held on a row still hold, wherever the rules' structure allows.

    :param X: ``(n, d)`` values (NaN for a missing value, which stays missing).
    :param M, rhs, is_eq: the rules ``M x (= or <=) rhs``.
    :param integer: ``(d,)`` the columns to release as whole numbers.
    :param fixed: ``(d,)`` the columns that must not change at all.
    :returns: a new ``(n, d)`` array. Columns that are neither integer nor
        fixed change only where they are solved for to keep an equality.

    Steps, each vectorised over the rows (loops run over rules and
    candidate columns only):

    1. every movable integer value is rounded to the nearest integer
       (``numpy.rint``, halves to even): a deterministic function of the
       value, so identical records stay identical;
    2. each inequality (bounds included) that held on a row and that the
       rounding broke is repaired on that row by rounding each of its
       movable integer columns towards the side that keeps it (down where the
       coefficient is positive, up where it is negative), which keeps it
       whenever its other columns are unchanged, since then ``a.r <= a.x <=
       b``; two passes over the inequalities (one repair can undo another
       that shares a column with the opposite sign);
    3. each group of equalities of ``plan`` (see :func:`rounding_plan`)
       that all held on a row is solved on that row for one of its candidate
       column sets (a small linear system, exact on the integers), chosen per
       row as the one whose solved values break the fewest inequalities that
       held, then move least from the values before rounding.

    Rules that held and still fail afterwards are left for the caller to
    report; rules that were already broken are only rounded.
    """
    X = np.asarray(X, dtype=float)
    integer = np.asarray(integer, dtype=bool)
    fixed = np.asarray(fixed, dtype=bool)
    plan = plan if plan is not None else rounding_plan(M, rhs, is_eq, integer, fixed)
    out = np.empty_like(X)
    for start in range(0, X.shape[0], ROUNDING_BLOCK):  # blocks of rows keep the temporaries small
        block = slice(start, start + ROUNDING_BLOCK)
        out[block] = _round_block(np.asfortranarray(X[block]), M, rhs, is_eq, integer, fixed, plan)
    return out


#: Rows rounded at once by :func:`controlled_rounding` (every row is rounded
#: on its own; blocks only bound the size of the temporary arrays).
ROUNDING_BLOCK = 1 << 15


def _round_block(X: np.ndarray, M: np.ndarray, rhs: np.ndarray, is_eq: np.ndarray, integer: np.ndarray,
                 fixed: np.ndarray, plan: RoundingPlan) -> np.ndarray:
    """:func:`controlled_rounding` of a block of rows (Fortran order: every
    operation runs on contiguous columns)."""
    movable_int = integer & ~fixed
    n = X.shape[0]
    Y = X.copy(order="F")
    for j in np.flatnonzero(movable_int):
        np.rint(X[:, j], out=Y[:, j])
    if M.shape[0] == 0 or n == 0:
        return Y
    variables = [np.flatnonzero(M[i] != 0.0) for i in range(M.shape[0])]

    def lhs(values: np.ndarray, i: int) -> np.ndarray:  # only the rule's own columns: a NaN elsewhere is no matter
        out = np.zeros(n)
        for j in variables[i]:
            out += M[i, j] * values[:, j]
        return out

    tols = np.empty((M.shape[0], n))  # per rule: relative to the size of its own terms, not another rule's
    after_tols = np.empty((M.shape[0], n))
    for i in range(M.shape[0]):
        magnitude = np.full(n, abs(float(rhs[i])))
        for j in variables[i]:
            magnitude += np.nan_to_num(np.abs(M[i, j] * X[:, j]))  # a missing value adds nothing
        tols[i] = HELD_RTOL * magnitude
        # after rounding, a rule over integer columns only is judged as the host judges whole numbers: to double
        # precision (HELD_RTOL there passed a <= 2*b broken by 1 near 1e12)
        whole = bool(variables[i].size and integer[variables[i]].all())
        after_tols[i] = privclust.integer_rule_tolerance(magnitude, variables[i].size) if whole else tols[i]
    held = np.zeros((M.shape[0], n), dtype=bool)
    with np.errstate(invalid="ignore"):
        for i in range(M.shape[0]):
            resid = lhs(X, i) - rhs[i]
            held[i] = (np.abs(resid) if is_eq[i] else resid) <= tols[i]  # NaN (a missing value): not held

        ineq = np.flatnonzero(~is_eq).tolist()
        for _ in range(2):
            repaired = False
            for i in ineq:
                cols = variables[i][movable_int[variables[i]]]
                if not cols.size or not held[i].any():
                    continue
                broken = held[i] & (lhs(Y, i) - rhs[i] > after_tols[i])
                if not broken.any():
                    continue
                for j in cols:
                    Y[:, j] = np.where(broken, np.floor(X[:, j]) if M[i, j] > 0 else np.ceil(X[:, j]), Y[:, j])
                repaired = True
            if not repaired:
                break

        for group, sets in plan.order:
            rows = np.all(held[list(group)], axis=0)  # every equality of the group held on the record
            if not rows.any():
                continue
            E = M[list(group)]
            f = rhs[list(group)]
            lhs_all = [lhs(Y, i) for i in group]
            values = np.empty((len(sets), n, len(group)))
            key = np.zeros((len(sets), n))  # inequalities the solved values would break
            moved = np.zeros((len(sets), n))  # how far the solved values are from the values before rounding
            for c, P in enumerate(sets):
                EP = E[:, list(P)]
                rest = np.empty((n, len(group)))  # what the pivot columns must make up
                for r in range(len(group)):
                    rest[:, r] = f[r] - lhs_all[r]
                    for q, p in enumerate(P):
                        rest[:, r] += EP[r, q] * Y[:, p]
                v = np.linalg.solve(EP, rest.T).T if len(P) > 1 else rest / EP[0, 0]
                for q, p in enumerate(P):
                    if integer[p]:
                        v[:, q] = np.rint(v[:, q])  # exact already (integers below 2^53); removes a -0.0
                values[c] = v
                for q, p in enumerate(P):
                    moved[c] += np.abs(v[:, q] - X[:, p])
                for k in ineq:
                    touched = [q for q, p in enumerate(P) if M[k, p] != 0.0]
                    if touched and held[k].any():
                        after = lhs(Y, k)
                        for q in touched:
                            after = after + M[k, P[q]] * (v[:, q] - Y[:, P[q]])
                        key[c] += held[k] & (after - rhs[k] > after_tols[k])
            moved = np.where(rows, moved, 0.0)
            key += moved / (1.0 + moved.max())  # fewest broken inequalities, then the least move
            best = np.argmin(key, axis=0) if len(sets) > 1 else np.zeros(n, dtype=np.intp)
            for c, P in enumerate(sets):
                chosen = rows & (best == c)
                for q, p in enumerate(P):
                    Y[:, p] = np.where(chosen, values[c, :, q], Y[:, p])
    return Y
