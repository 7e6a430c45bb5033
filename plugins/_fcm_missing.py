"""Fuzzy c-means passes over records with missing values (NaN), for
:mod:`privclust_plugins._fcm` and the fuzzy components: the partial
distance of Hathaway & Bezdek (2001), in exact row blocks of bounded
memory."""

from __future__ import annotations

import numpy as np

from ._fcm_passes import Fuzzifier, PassResult, record_objective, weights

# ---------------------------------------------------------------------------
# Records with missing values (NaN): an exact blocked path of their own
# ---------------------------------------------------------------------------
#
# The distance of a record with missing values to a (complete) centre is
# the partial distance of Hathaway & Bezdek (2001): the squared differences
# over the record's observed variables, scaled by ``d / d_observed`` (a
# per-record factor ``F``, the same for every centre). The nearest centres are
# those of the observed coordinates (the ranking sdcMicro's MDAV distance
# gives too), FCM memberships are those of the observed coordinates, and
# the centre update weighs each column over the records that observe it.
# Such records cannot be queried in a KD-tree over all dimensions: they go
# through exact passes in row blocks (memory-bounded), the complete records
# keep the fast paths.


class MissingCentreColumn(ValueError):
    """A centre got no observed weight on a column (every record weighing on it misses the column)."""

    def __init__(self, centre: int, column: int):
        super().__init__(f"centre {centre} has no observed value of column {column}")
        self.centre = centre
        self.column = column


class _Missing:
    """Records with missing values in the layouts the missing-value passes need."""

    def __init__(self, X: np.ndarray):
        X = np.asarray(X, dtype=float)
        obs = ~np.isnan(X)
        self.n, self.d = X.shape
        self.X0 = np.where(obs, X, 0.0)
        self.O = obs.astype(float)
        # [x with NaN -> 0, observed mask]: one product with [-2v, v^2] gives the observed part
        self.A = np.ascontiguousarray(np.hstack([self.X0, self.O]))
        self.xx = np.einsum("ij,ij->i", self.X0, self.X0)
        # d / d_observed (a record with no observed value is at distance 0 from every centre)
        self.F = self.d / np.maximum(obs.sum(axis=1), 1).astype(float)


def missing_sq(md: _Missing, s: int, e: int, V: np.ndarray) -> np.ndarray:
    """Squared distances ``(e - s, c)`` of the records ``s:e`` of ``md`` to the
    centres: over each record's observed coordinates, times ``d / d_observed``."""
    B = np.vstack([-2.0 * V.T, (V * V).T])
    D = md.A[s:e] @ B
    D += md.xx[s:e, None]
    np.maximum(D, 0.0, out=D)
    D *= md.F[s:e, None]
    return D


def missing_rows_per_block(n_centres: int, budget_bytes: float) -> int:
    """Rows per block of the missing-value passes (about 5 ``(b, c)`` arrays alive)."""
    return int(max(1, min(16384, budget_bytes // (8 * 5 * max(n_centres, 1)))))


def missing_pass(md: _Missing, V: np.ndarray, fz: Fuzzifier, *, budget_bytes: float, update: bool = False,
                 dense: bool = False, top: int | None = None, draw: np.random.Generator | None = None,
                 colsum: bool = False) -> PassResult:
    """One exact pass over the records with missing values, in row blocks.

    :param update: the centre update per column: ``num`` ``(c, d)`` sums of
        ``u^m x`` over the observed values, ``den`` ``(c, d)`` sums of ``u^m``
        over the records observing the column, and the objective.
    :param dense: the ``(n, c)`` memberships.
    :param top: the ``top`` largest memberships per record (``top_indices``,
        ``top_values`` renormalised over them, ``kept_mass`` their exact share).
    """
    V = np.ascontiguousarray(V, dtype=float)
    c, d = V.shape
    n = md.n
    b = missing_rows_per_block(c, budget_bytes)
    res = PassResult(dmin=np.empty(n), S=np.empty(n), nearest=np.empty(n, dtype=np.int64))
    if update:
        res.num = np.zeros((c, d))
        res.den = np.zeros((c, d))
    if colsum:
        res.colsum = np.zeros(c)
    if dense:
        res.dense = np.empty((n, c))
    if top is not None:
        top = int(min(max(top, 1), c))
        res.top_indices = np.empty((n, top), dtype=np.int64)
        res.top_values = np.empty((n, top))
        res.kept_mass = np.empty(n)
    if draw is not None:
        res.labels = np.empty(n, dtype=np.int64)
    objective = 0.0
    for s in range(0, n, b):
        e = min(n, s + b)
        D = missing_sq(md, s, e, V)
        dmin = D.min(axis=1)
        res.dmin[s:e] = dmin
        res.nearest[s:e] = np.argmin(D, axis=1)
        W, WM, S = weights(D, dmin[:, None], fz, 1, np.empty_like(D))
        res.S[s:e] = S
        if update:
            U = WM * (S ** -fz.update_power)[:, None]
            res.num += U.T @ md.X0[s:e]
            res.den += U.T @ md.O[s:e]
            objective += float(record_objective(dmin, S, fz).sum())
        if draw is not None:
            cum = np.cumsum(W, axis=1)
            r = draw.random(e - s) * S
            res.labels[s:e] = np.minimum((cum < r[:, None]).sum(axis=1), c - 1)
        if colsum or dense or top is not None:
            U = W / S[:, None]
            if colsum:
                res.colsum += U.sum(axis=0)
            if dense:
                res.dense[s:e] = U
            if top is not None:
                if top < c:  # the top memberships (a partition), then sorted, largest first
                    part = np.argpartition(-U, top - 1, axis=1)[:, :top]
                    first = np.argsort(-np.take_along_axis(U, part, axis=1), axis=1, kind="stable")
                    order = np.take_along_axis(part, first, axis=1)
                else:
                    order = np.argsort(-U, axis=1, kind="stable")
                vals = np.take_along_axis(U, order, axis=1)
                kept = vals.sum(axis=1)
                res.top_indices[s:e] = order
                res.top_values[s:e] = vals / kept[:, None]
                res.kept_mass[s:e] = kept
    res.objective = objective
    return res


def missing_nearest(md: _Missing, V: np.ndarray, p: int, fz: Fuzzifier, *,
                    budget_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, values)``: each record's ``p`` nearest centres (exact, in row
    blocks) and its memberships renormalised over them."""
    res = missing_pass(md, V, fz, budget_bytes=budget_bytes, top=p)
    assert res.top_indices is not None and res.top_values is not None
    return res.top_indices, res.top_values
