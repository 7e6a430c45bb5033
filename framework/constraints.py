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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .components import BoundConstraints
from .errors import ConstraintError

__all__ = ["RULE_RTOL", "ConstraintSet"]

#: A record satisfies an edit rule when the rule's violation is at most this
#: times 1 + the size of the rule's terms in the record
#: (:meth:`ConstraintSet.magnitudes`: for a linear rule ``sum_j |a_j x_j| +
#: |b|``; for a handler that does not state it, the largest absolute value of
#: the rule's own columns). Floating-point error, some 10^4 times a double's
#: 2.2e-16, and far below a real violation: a tolerance of 1e-6 of the largest
#: value passed a violation of 1.5 near 1e6, and one of 1e-9 passed 85 near
#: 1e12 and a rule "staff <= 0.00001 turnover" broken by 0.37 with turnover
#: near 1e9.
RULE_RTOL = 1e-11


def within(violations: np.ndarray, tol: float, magnitudes: np.ndarray) -> np.ndarray:
    """Per row, whether every rule's violation is at most ``tol`` times 1 +
    the size of its terms, decided in double precision: a residual that is
    not finite (an infinite value, or terms whose sum overflows) satisfies
    nothing, and neither does one above ``tol`` times the largest double
    when the size of the terms overflows (``tol`` times infinity would pass
    any violation)."""
    violations = np.asarray(violations, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = tol * (1.0 + np.asarray(magnitudes, dtype=float))
    bound = np.where(np.isfinite(bound), bound, tol * np.finfo(float).max)
    return np.all(np.isfinite(violations) & (violations <= bound), axis=1)


class ConstraintSet:
    """Several bound constraint handlers over the same ordered columns."""

    def __init__(self, columns: Sequence[str], parts: Sequence[BoundConstraints], *,
                 max_iter: int = 500, tol: float = 1e-10):
        self.columns = tuple(columns)
        self.parts = tuple(parts)
        for p in self.parts:
            if tuple(p.columns) != self.columns:
                raise ConstraintError(
                    f"bound constraints over {list(p.columns)} cannot join a set over {list(self.columns)}"
                )
        self.rules: tuple[str, ...] = tuple(r for p in self.parts for r in p.rules)
        self.max_iter = max_iter
        self.tol = tol

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
        """``(n, n_rules)`` amounts by which each row violates each rule."""
        points = np.asarray(points, dtype=float)
        if not self.parts:
            return np.zeros((points.shape[0], 0))
        return np.concatenate([p.violations(points) for p in self.parts], axis=1)

    def magnitudes(self, points: np.ndarray, columns_of: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """``(n, n_rules)``: the size of the terms each rule sums at each row
        (for a linear rule ``a . x = b``, ``sum_j |a_j x_j| + |b|``), the
        scale of its floating-point error, as a handler states it with the
        ``magnitudes`` capability of its bound rules. For the rules of a
        handler that does not, the largest absolute value of the rule's own
        columns (``columns_of[r]``, positions in :attr:`columns`; all of
        them when not given). A missing value (NaN) counts as 0."""
        points = np.where(np.isnan(np.asarray(points, dtype=float)), 0.0, points)
        out = []
        for p in self.parts:
            method = getattr(p, "magnitudes", None)
            out.append(np.asarray(method(points), dtype=float) if callable(method)
                       else np.full((points.shape[0], len(p.rules)), np.nan))
        size = np.concatenate(out, axis=1) if out else np.zeros((points.shape[0], 0))
        for r in np.flatnonzero(np.isnan(size).any(axis=0)):
            used = list(columns_of[r]) if columns_of is not None else list(range(points.shape[1]))
            size[:, r] = np.max(np.abs(points[:, used]), axis=1, initial=0.0)
        return size

    def satisfied(self, points: np.ndarray, *, tol: float = RULE_RTOL) -> np.ndarray:
        """Per row, whether every rule holds within ``tol`` times 1 + the size
        of its terms (:meth:`magnitudes`)."""
        points = np.asarray(points, dtype=float)
        with np.errstate(invalid="ignore", over="ignore"):
            return within(self.violations(points), tol, self.magnitudes(points))
