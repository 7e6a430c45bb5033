"""Fuzzy c-means (FCM) and entropy-based FCM (EFCM): seeding, the
alternating optimisation and the rows of a few records with some centres
excluded. The weights and the passes over the data (exact, update,
truncated, audit) are in :mod:`privclust_plugins._fcm_passes`, the passes
over records with missing values in :mod:`privclust_plugins._fcm_missing`;
their names are imported here too, so ``_fcm.exact_pass`` and the like keep
working.

Pure functions on numpy arrays; the component classes in
:mod:`privclust_plugins.fuzzy` and :mod:`privclust_plugins.microaggregation`
validate parameters, standardise the data and handle DataFrames.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from ._fcm_missing import MissingCentreColumn, _Missing, missing_nearest, missing_pass, missing_sq
from ._fcm_passes import (
    DIRECT_MAX_DIM,
    Audit,
    Fuzzifier,
    PassResult,
    _Data,
    audit_tail,
    block_rows,
    exact_pass,
    gather_distances,
    membership_values,
    query,
    record_objective,
    sparse_sums,
    truncated_pass,
    update_pass,
    weights,
)

__all__ = [
    "DIRECT_MAX_DIM",
    "Audit",
    "Candidates",
    "Fuzzifier",
    "MissingCentreColumn",
    "PassResult",
    "RunResult",
    "SubsetRows",
    "audit_tail",
    "block_rows",
    "candidate_pass",
    "distinct_rows",
    "exact_pass",
    "group_seeds",
    "init_centres",
    "kmeanspp",
    "membership_values",
    "missing_nearest",
    "missing_pass",
    "missing_sq",
    "query",
    "run",
    "spatial_order",
    "subset_rows",
    "truncated_pass",
    "update_pass",
]

#: k-means++ is used for seeding while ``N * c * trials`` stays below this.
KMEANSPP_MAX_WORK = 4e8


# ---------------------------------------------------------------------------
# Seeding
# ---------------------------------------------------------------------------


def spatial_order(X: np.ndarray) -> np.ndarray:
    """A permutation that puts spatially close rows next to each other (the
    leaf order of a KD-tree). Processing records, and numbering centres, in
    this order makes consecutive KD-tree queries walk the same nodes and
    consecutive gathers hit the same centres: measured 3x faster queries and
    sums on a million records against 200 000 centres."""
    return np.asarray(cKDTree(X).indices, dtype=np.int64)


def distinct_rows(X: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row, in order."""
    X = np.ascontiguousarray(X)
    view = X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, first = np.unique(view, return_index=True)
    return np.sort(first)


def kmeanspp(X: np.ndarray, c: int, rng: np.random.Generator, *, trials: int | None = None) -> np.ndarray:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007; the greedy
    variant of scikit-learn): each new centre is the best of ``trials``
    candidates drawn proportionally to the squared distance to the nearest
    chosen centre. Returns ``c`` row indices of ``X``. ``O(N c d trials)``."""
    n = X.shape[0]
    trials = trials if trials is not None else 2 + int(math.log(c))
    xx = np.einsum("ij,ij->i", X, X)
    chosen = np.empty(c, dtype=np.int64)
    chosen[0] = rng.integers(n)

    def sqdist(rows: np.ndarray) -> np.ndarray:
        C = X[rows]
        out = xx[None, :] - 2.0 * (C @ X.T) + np.einsum("ij,ij->i", C, C)[:, None]
        return np.maximum(out, 0.0)

    closest = sqdist(chosen[:1])[0]
    closest[chosen[0]] = 0.0
    potential = closest.sum()
    for i in range(1, c):
        if potential <= 0:
            # every record coincides with a chosen centre: take unchosen records
            rest = np.setdiff1d(np.arange(n), chosen[:i])
            chosen[i:] = rng.choice(rest, size=c - i, replace=False)
            break
        cdf = np.cumsum(closest)
        candidates = np.searchsorted(cdf, rng.random(trials) * cdf[-1], side="right")
        candidates = np.minimum(candidates, n - 1)
        dist = np.minimum(closest[None, :], sqdist(candidates))
        for j, cand in enumerate(candidates):
            dist[j, cand] = 0.0
        pots = dist.sum(axis=1)
        best = int(np.argmin(pots))
        chosen[i] = candidates[best]
        closest = dist[best]
        potential = pots[best]
    return chosen


def init_centres(X: np.ndarray, c: int, rng: np.random.Generator, *, distinct: np.ndarray | None = None,
                 max_work: float = KMEANSPP_MAX_WORK) -> tuple[np.ndarray, str]:
    """Initial centres: greedy k-means++ while ``N c d trials`` is affordable,
    otherwise ``c`` distinct records drawn uniformly at random (for ``c``
    near ``N / k`` the density of the records is what k-means++ would follow
    too). Returns the centres and the method's name."""
    n, d = X.shape
    rows = distinct if distinct is not None else np.arange(n)
    trials = 2 + int(math.log(max(c, 1)))
    if len(rows) * c * max(d, 1) * trials <= max_work:
        pick = kmeanspp(X[rows], c, rng, trials=trials)
        return X[rows[pick]].copy(), "k-means++"
    pick = rng.choice(len(rows), size=c, replace=False)
    return X[rows[np.sort(pick)]].copy(), "random distinct records"


def group_seeds(X: np.ndarray, seeds: np.ndarray, g: int, *, workers: int = -1) -> np.ndarray:
    """Each seed replaced by the mean of its ``g`` nearest rows of ``X`` (a
    KD-tree query; the seed itself is one of them when it is a row). Seeds on
    records make FCM with a large ``m`` keep a centre on its record (the
    record's membership there is 1, every other ``u^m`` is tiny); means of
    ``g`` records start every centre off the records and with a group of
    ``g`` behind it. ``O(c g log N)``."""
    g = int(min(max(g, 1), X.shape[0]))
    if g == 1:
        return np.array(seeds, dtype=float, copy=True)
    _, idx = cKDTree(X).query(seeds, k=g, workers=workers)
    return X[np.asarray(idx)].mean(axis=1)


# ---------------------------------------------------------------------------
# The alternating optimisation
# ---------------------------------------------------------------------------


class Candidates:
    """Candidate centres per record, kept valid across iterations.

    Each record keeps the ``P`` centres nearest to it when it was last
    queried (``P = 2p``) and the distance ``rho`` of the ``P``-th. Between
    queries the centres move; by the triangle inequality a centre that moved
    by ``delta_j`` changed its distance to any record by at most ``delta_j``.
    Let ``tau`` be the 95th percentile of the moves since the record's query
    and ``B`` the centres that moved more (few). A record is *certified* when
    its ``p``-th nearest candidate (distance ``r_p``, computed exactly now) is
    closer than ``rho - tau`` (no small mover outside the candidates can be
    nearer) and no centre of ``B`` is nearer than ``r_p`` (checked exactly
    with a KD-tree over ``B``): then its candidates hold its true ``p``
    nearest centres. This is a certificate, not a heuristic. Records that
    fail it are queried again; when more than half fail, or too many query
    epochs are alive, every record is.
    """

    #: At most this many reference centre sets (epochs) are kept (each is a
    #: ``c x d`` copy); beyond, every record is queried again.
    MAX_EPOCHS = 16

    def __init__(self, data: _Data, p: int, n_centres: int, workers: int):
        self.data = data
        self.p = int(min(p, n_centres))
        self.P = int(min(n_centres, 2 * self.p))
        self.workers = workers
        self.idx: np.ndarray | None = None
        self.rho = np.empty(data.n)
        self.epoch = np.zeros(data.n, dtype=np.int64)
        self.refs: dict[int, np.ndarray] = {}
        self.next_epoch = 0
        self.queries = 0

    def _query(self, V: np.ndarray, rows: np.ndarray | slice, tree: cKDTree) -> np.ndarray:
        x = self.data.X[rows]
        dist, idx = tree.query(x, k=self.P, workers=self.workers)
        if self.P == 1:
            dist, idx = dist[:, None], idx[:, None]
        assert self.idx is not None
        self.idx[rows] = idx
        # every centre is a candidate when P = c: the certificate always holds
        self.rho[rows] = np.inf if self.P >= V.shape[0] else dist[:, -1]
        self.epoch[rows] = self.next_epoch
        self.refs[self.next_epoch] = V.copy()
        self.next_epoch += 1
        self.queries += x.shape[0]
        return np.asarray(dist, dtype=float) ** 2

    def _certified(self, V: np.ndarray, kth: np.ndarray) -> np.ndarray:
        ok = np.zeros(self.data.n, dtype=bool)
        c = V.shape[0]
        for e, ref in list(self.refs.items()):
            rows = np.flatnonzero(self.epoch == e)
            if rows.size == 0:
                del self.refs[e]
                continue
            moved = np.sqrt(np.einsum("ij,ij->i", V - ref, V - ref))
            tau = float(np.quantile(moved, 0.99)) if c > 200 else float(moved.max())
            cert = kth[rows] < self.rho[rows] - tau
            big = np.flatnonzero(moved > tau)
            # records clear of even the largest move need no check on the big movers
            check = cert & ~(kth[rows] < self.rho[rows] - float(moved.max(initial=0.0)))
            if big.size and check.any():
                sub = rows[check]
                cert[check] = self._clear_of(V, big, sub, kth[sub])
            ok[rows] = cert
        return ok

    def _clear_of(self, V: np.ndarray, big: np.ndarray, rows: np.ndarray, kth: np.ndarray) -> np.ndarray:
        """Per record of ``rows``: no centre of ``big`` outside its candidates
        is nearer than ``kth`` (checked on its ``k`` nearest big movers; when
        all ``k`` lie within ``kth`` there may be more, so it fails)."""
        assert self.idx is not None
        k = int(min(big.size, 4))
        bound = float(kth.max()) * (1 + 1e-12) + 1e-300
        dist, near = cKDTree(V[big]).query(self.data.X[rows], k=k, distance_upper_bound=bound,
                                           workers=self.workers)
        if k == 1:
            dist, near = dist[:, None], near[:, None]
        within = dist < kth[:, None]
        if k == big.size:
            overflow = np.zeros(rows.size, dtype=bool)
        else:
            overflow = within[:, -1]
        centre = big[np.minimum(near, big.size - 1)]
        out = np.empty(rows.size, dtype=bool)
        step = max(1, (1 << 22) // (k * self.P))
        for s in range(0, rows.size, step):
            e = min(rows.size, s + step)
            known = (centre[s:e, :, None] == self.idx[rows[s:e], None, :]).any(axis=2)
            out[s:e] = ~np.any(within[s:e] & ~known, axis=1)
        return out & ~overflow

    def distances(self, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(D, idx)``: squared distances ``(N, P)`` to each record's
        candidates, which hold its true ``p`` nearest centres."""
        n = self.data.n
        if self.idx is None:
            self.idx = np.empty((n, self.P), dtype=np.int64)
            return self._query(V, slice(None), cKDTree(V)), self.idx
        D = gather_distances(V, self.idx, self.data.X)
        kth = np.sqrt(np.partition(D, self.p - 1, axis=1)[:, self.p - 1])
        stale = np.flatnonzero(~self._certified(V, kth))
        if stale.size == 0:
            return D, self.idx
        tree = cKDTree(V)
        if stale.size > n // 2 or len(self.refs) >= self.MAX_EPOCHS:
            self.refs.clear()
            D = self._query(V, slice(None), tree)
        else:
            D[stale] = self._query(V, stale, tree)
        return D, self.idx


def candidate_pass(cand: Candidates, V: np.ndarray, fz: Fuzzifier) -> PassResult:
    """One truncated update pass over candidate lists: memberships over each
    record's ``P`` candidates (a superset of its ``p`` nearest centres)."""
    c, d = V.shape
    D, idx = cand.distances(V)
    dmin = D.min(axis=1)
    W, WM, S = weights(D, dmin[:, None], fz, 1, np.empty_like(D))
    WM *= (S ** -fz.update_power)[:, None]
    sums = sparse_sums(idx, WM, cand.data.X1, c)
    res = PassResult(dmin=dmin, S=S, num=sums[:, :d], den=sums[:, d])
    res.objective = float(record_objective(dmin, S, fz).sum())
    return res


@dataclass
class RunResult:
    centres: np.ndarray  # (c, d) in the standardised space, projected
    objective: float  # of the memberships of the last pass (before the last update)
    iterations: int
    converged: bool
    relocated: int
    path: str
    neighbours: int | None
    shifts: list[float]
    queries: int = 0  # KD-tree queries (records) made by the truncated path


def _relocate(new: np.ndarray, den: np.ndarray, dmin: np.ndarray | None, X: np.ndarray, V: np.ndarray) -> int:
    """Centres that no record weighs on (possible when memberships are
    truncated or underflow, i.e. m near 1 or large lambda) are moved to the
    records farthest from their nearest centre, as k-means implementations do
    with empty clusters. Returns how many moved."""
    empty = np.flatnonzero(~(den > 0))
    if empty.size == 0:
        return 0
    if dmin is None:  # each record's squared distance to its nearest (current) centre
        dist, _ = cKDTree(V).query(X, k=1)
        dmin = dist * dist
    far = np.argsort(-dmin, kind="stable")[: empty.size]
    new[empty] = X[far]
    return int(empty.size)


def run(X: np.ndarray, V0: np.ndarray, fz: Fuzzifier, *, tol: float, max_iter: int, budget_bytes: float,
        project: Callable[[np.ndarray], np.ndarray] | None = None, neighbours: int | None = None,
        callback: Callable[[int, np.ndarray], None] | None = None,
        progress: Callable[[int], None] | None = None, workers: int = -1,
        data: _Data | None = None, missing: _Missing | None = None) -> RunResult:
    """Alternate memberships and (projected) centre updates from ``V0``.

    :param neighbours: ``None`` for exact passes, else the ``p`` nearest
        centres each record keeps.
    :param project: maps centres (standardised) onto the feasible set.
    :param callback: called with ``(iteration, centres)`` after every update
        (centres already projected).
    :param tol: stop when the objective decreases by at most ``tol`` times
        its value from one pass to the next (the centres are then updated
        once more from the last memberships).
    :param missing: the records with missing values (``X`` and ``data`` hold
        the complete ones, possibly none): an exact pass of their own
        (:func:`missing_pass`) adds their share of each centre column's
        update, over the records that observe the column.
    """
    data = data if data is not None else _Data(X)
    V = np.array(V0, dtype=float, copy=True)  # seeds need no projection: every update is projected
    shifts: list[float] = []
    relocated = 0
    converged = False
    objective = math.inf
    previous = math.inf
    it = 0
    cand = Candidates(data, neighbours, V.shape[0], workers) if neighbours is not None else None
    for it in range(1, max_iter + 1):
        if data.n == 0:  # every record misses a value
            res = PassResult(num=np.zeros(V.shape), den=np.zeros(V.shape[0]), dmin=np.empty(0))
        elif cand is None:
            res = update_pass(data, V, fz, budget_bytes=budget_bytes)
        else:
            res = candidate_pass(cand, V, fz)
        assert res.num is not None and res.den is not None
        if missing is None:
            objective = res.objective
            safe = np.where(res.den > 0, res.den, 1.0)
            new = res.num / safe[:, None]
            relocated += _relocate(new, res.den, res.dmin, data.X, V)
        else:
            extra = missing_pass(missing, V, fz, budget_bytes=budget_bytes, update=True)
            assert extra.num is not None and extra.den is not None
            objective = res.objective + extra.objective
            den = res.den[:, None] + extra.den  # (c, d): per column, the records observing it
            total = res.den + extra.den.max(axis=1)
            safe = np.where(den > 0, den, 1.0)
            new = (res.num + extra.num) / safe
            weighed = total > 0
            hole = np.argwhere(weighed[:, None] & ~(den > 0))
            if hole.size:
                raise MissingCentreColumn(int(hole[0, 0]), int(hole[0, 1]))
            if data.n:
                relocated += _relocate(new, total, res.dmin, data.X, V)
            else:
                filled = np.where(missing.O > 0, missing.X0, V.mean(axis=0)[None, :])
                relocated += _relocate(new, total, extra.dmin, filled, V)
        if project is not None:
            new = project(new)
        shift = float(np.sqrt(np.max(np.einsum("ij,ij->i", new - V, new - V), initial=0.0)))
        shifts.append(shift)
        V = new
        if callback is not None:
            callback(it, V)
        if progress is not None:
            progress(it)
        if previous - objective <= tol * max(objective, 0.0):
            converged = True
            break
        previous = objective
    return RunResult(centres=V, objective=objective, iterations=it, converged=converged, relocated=relocated,
                     path="exact" if neighbours is None else "truncated", neighbours=neighbours, shifts=shifts,
                     queries=0 if cand is None else cand.queries)


# ---------------------------------------------------------------------------
# Rows of a few records, some centres excluded (fuzzy microaggregation's
# "never replaced by itself" rule)
# ---------------------------------------------------------------------------


@dataclass
class SubsetRows:
    """Memberships of a few records with some centres excluded per record.

    ``colsum_old``/``colsum_new``: the records' contribution to the expected
    cluster sizes without and with the exclusions (on the same path as the
    full pass: every centre, or the ``p`` nearest renormalised). ``indices``,
    ``values``: each record's ``width`` largest new memberships, largest
    first. ``labels``: one centre drawn per record from its new memberships.
    ``stuck``: records whose every centre is excluded (their row is the old
    one, and their draw can only be an excluded centre).
    """

    colsum_old: np.ndarray
    colsum_new: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    dropped: np.ndarray
    labels: np.ndarray | None
    stuck: np.ndarray


def subset_rows(X: np.ndarray, V: np.ndarray, fz: Fuzzifier, exclude: list[np.ndarray], *, p: int | None,
                width: int, budget_bytes: float, rng: np.random.Generator | None = None,
                tree: cKDTree | None = None) -> SubsetRows:
    """Memberships of the records ``X`` (few) to the centres ``V`` with the
    centres ``exclude[r]`` left out of record ``r``'s row (renormalised over
    the others): exactly over every centre (``p = None``, in row blocks
    within ``budget_bytes``) or over the ``p`` nearest non-excluded centres
    (the truncated path). Records with missing values (NaN in ``X``) take
    the exact path with the missing-value distance (:func:`missing_sq`)."""
    md = _Missing(X) if np.isnan(X).any() else None
    if md is not None:
        p = None
    r, c = X.shape[0], V.shape[0]
    width = int(min(max(width, 1), c if p is None else min(p, c)))
    old = np.zeros(c)
    new = np.zeros(c)
    indices = np.empty((r, width), dtype=np.int64)
    values = np.empty((r, width))
    dropped = np.zeros(r)
    labels = np.empty(r, dtype=np.int64) if rng is not None else None
    stuck = np.zeros(r, dtype=bool)
    if r == 0:
        return SubsetRows(old, new, indices, values, dropped, labels, stuck)
    if p is None:
        b = int(max(1, min(r, budget_bytes // (8 * 4 * max(c, 1)))))
        for s in range(0, r, b):
            e = min(r, s + b)
            if md is not None:
                D = missing_sq(md, s, e, V)
            else:
                D = gather_distances(V, np.broadcast_to(np.arange(c), (e - s, c)), X[s:e])
            U_old = _rows(D.copy(), fz)
            old += U_old.sum(axis=0)
            for j in range(e - s):
                D[j, exclude[s + j]] = np.inf
            blocked = ~np.isfinite(D).any(axis=1)
            stuck[s:e] = blocked
            D[blocked] = 0.0  # placeholder, replaced by the old rows below
            U = _rows(D, fz)
            U[blocked] = U_old[blocked]
            new += U.sum(axis=0)
            order = np.argsort(-U, axis=1, kind="stable")[:, :width]
            indices[s:e] = order
            top = np.take_along_axis(U, order, axis=1)
            kept = top.sum(axis=1)
            dropped[s:e] = np.clip(1.0 - kept, 0.0, 1.0)
            values[s:e] = top / kept[:, None]
            if labels is not None and rng is not None:  # labels are drawn iff rng is given
                cum = np.cumsum(U, axis=1)
                u = rng.random(e - s) * cum[:, -1]
                labels[s:e] = np.minimum((cum < u[:, None]).sum(axis=1), c - 1)
        return SubsetRows(old, new, indices, values, dropped, labels, stuck)
    p = int(min(p, c))
    most = int(max((len(x) for x in exclude), default=0))
    q = int(min(c, p + most))
    tree = tree if tree is not None else cKDTree(V)
    D, idx = query(tree, X, q, -1)
    U_old = _rows(D[:, :p].copy(), fz)
    np.add.at(old, idx[:, :p].ravel(), U_old.ravel())
    Dn = D.copy()
    for j in range(r):
        Dn[j, np.isin(idx[j], exclude[j])] = np.inf
    order = np.argsort(Dn, axis=1, kind="stable")[:, :p]
    Dn = np.take_along_axis(Dn, order, axis=1)
    In = np.take_along_axis(idx, order, axis=1)
    blocked = ~np.isfinite(Dn[:, 0])
    stuck[:] = blocked
    Dn[blocked] = 0.0
    U = _rows(Dn, fz)
    U[blocked] = U_old[blocked]
    In[blocked] = idx[blocked, :p]
    np.add.at(new, In.ravel(), U.ravel())
    indices[:] = In[:, :width]
    values[:] = U[:, :width] / U[:, :width].sum(axis=1, keepdims=True)
    if labels is not None and rng is not None:
        cum = np.cumsum(U, axis=1)
        u = rng.random(r) * cum[:, -1]
        pick = np.minimum((cum < u[:, None]).sum(axis=1), p - 1)
        labels[:] = np.take_along_axis(In, pick[:, None], axis=1)[:, 0]
    return SubsetRows(old, new, indices, values, dropped, labels, stuck)


def _rows(D: np.ndarray, fz: Fuzzifier) -> np.ndarray:
    """Memberships ``(n, c)`` from squared distances ``(n, c)`` (``inf``:
    a centre left out, weight 0); overwrites ``D``."""
    dmin = D.min(axis=1, keepdims=True)
    w, _, S = weights(D, dmin, fz, 1, np.empty_like(D))
    return w / S[:, None]
