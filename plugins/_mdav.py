"""Kernels of the ``mdav`` clusterer: MDAV (maximum distance to average
vector) on an array, and a plain textbook implementation for tests and
benchmarks.

MDAV (Domingo-Ferrer & Mateo-Sanz 2002; Domingo-Ferrer & Torra 2005), on the
rows of ``Z`` (already standardised by the caller):

1. while at least ``3k`` records remain: ``r`` = the remaining record
   farthest from the centroid of the remaining records; group ``r`` with its
   ``k - 1`` nearest remaining records; ``s`` = the remaining record farthest
   from ``r``; group ``s`` with its ``k - 1`` nearest remaining records;
2. if at least ``2k`` remain: one more group around the record farthest from
   the centroid, and the rest (``k .. 2k-1`` records) form the last group;
   otherwise the rest form the last group.

Ties (equal distances) go to the lowest record index; the centre record of a
group is always in its own group.

``mdav`` gives exactly the groups of the textbook loop (``tests/_mdav_reference.py``,
O(N^2/k) distance evaluations) but avoids most of its work:

* farthest-point searches scan the records in decreasing order of their
  distance ``D`` to a reference point ``c0`` (a contiguous copy, re-sorted
  whenever a quarter of the records are gone) and stop as soon as the
  triangle-inequality bound ``D(x) + ||p - c0||`` falls below the best exact
  distance found, so only an outer shell is evaluated; chunks are screened
  with one matrix-vector product and the few records within rounding of
  the maximum are compared exactly;
* nearest-neighbour groups come from a KD-tree (scipy's ``cKDTree``) over the
  remaining records, rebuilt whenever a fifth of its records are gone;
  candidates at the k-th distance are compared exactly;
* the centroid of the remaining records is kept as a running sum.

Cost: one KD-tree query and a shell scan per group (a Python loop per group,
never per record); the worst case (no pruning at all) is the textbook
O(N^2 d / k).

The result does not depend on these devices: candidates are always
evaluated exactly, with the same tie rule.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["mdav", "missing_sq", "standardise"]


def standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(Z, mean, scale, constant)``: columns centred and divided by their
    population standard deviation; a constant column (sd 0) is divided by 1,
    so it becomes all zeros and plays no part in any distance. With missing
    values (NaN) the mean and standard deviation are those of the observed
    values of each column, and a missing value stays NaN in ``Z``."""
    X = np.asarray(X, dtype=float)
    nan = np.isnan(X)
    if nan.any():
        mean = np.nanmean(X, axis=0)
        sd = np.nanstd(X, axis=0)
    else:
        mean = X.mean(axis=0)
        sd = X.std(axis=0)
    # constant: every observed value equal (a relative threshold once called 1e15 + 100 i constant), or a spread
    # too small for its standard deviation to be a positive double
    with np.errstate(invalid="ignore"):
        spread = np.fmax.reduce(X, axis=0, initial=-np.inf) - np.fmin.reduce(X, axis=0, initial=np.inf) \
            if X.size else np.zeros(X.shape[1])
    constant = ~(spread > 0) | ~(sd > 0)
    scale = np.where(constant, 1.0, sd)
    Z = np.ascontiguousarray((X - mean) / scale)
    Z[:, constant] = 0.0
    if nan.any():
        Z[nan] = np.nan
    return Z, mean, scale, constant


def missing_sq(Zf: np.ndarray, W: np.ndarray, p: np.ndarray, R2: np.ndarray) -> np.ndarray:
    """sdcMicro's MDAV distance with missing values (``src/Mdav.h``), per row
    of ``Zf``: over the variables observed on both sides the squared
    difference; a variable missing on exactly one side adds ``R2`` (the
    variable's squared range, the largest difference its observed values
    can have); missing on both adds nothing. ``Zf`` holds the records with
    missing values set to 0 and ``W`` says which are observed; ``p`` is a
    point with NaN where it is missing. Its square root is a metric (each
    variable's part is one, as no observed difference exceeds the range)."""
    pw = ~np.isnan(p)
    pf = np.where(pw, p, 0.0)
    diff = Zf - pf
    both = W & pw
    return np.einsum("ij,ij->i", np.where(both, diff, 0.0), diff) + (W ^ pw) @ R2


def _sq(Z: np.ndarray, p: np.ndarray) -> np.ndarray:
    diff = Z - p
    return np.einsum("ij,ij->i", diff, diff)


def _farther(order: np.ndarray, near: np.ndarray, exact: np.ndarray, best: int, best_sq: float) -> tuple[int, float]:
    """The farthest record so far after a block's candidates ``near`` with
    their exact squared distances: ties go to the lowest original index."""
    m = exact.max()
    if m < best_sq:
        return best, best_sq
    cand = int(order[near[exact == m]].min())
    return (cand if (m > best_sq or best < 0) else min(best, cand)), m


# ---------------------------------------------------------------------------
# The fast path
# ---------------------------------------------------------------------------


class _State:
    """The remaining records, the shell order and the neighbour structures."""

    #: Rebuild the KD-tree when fewer than this share of its records remain.
    TREE_REBUILD = 0.8

    def __init__(self, Z: np.ndarray, k: int):
        self.Z = Z
        self.k = k
        n = Z.shape[0]
        self.alive = np.ones(n, dtype=bool)
        self.n_alive = n
        self.total = Z.sum(axis=0)
        self._refresh_order(self.total / n)
        self._build_tree()

    # -- the shell order ------------------------------------------------------

    def _refresh_order(self, c0: np.ndarray) -> None:
        """Sort the remaining records by decreasing distance to ``c0`` and
        keep a contiguous copy in that order (scans read slices, no gathers)."""
        idx = np.flatnonzero(self.alive)
        D = np.sqrt(_sq(self.Z[idx], c0))
        order = np.argsort(-D, kind="stable")
        self.c0 = c0
        self.order = idx[order]
        self.D = D[order]
        self.Zs = np.ascontiguousarray(self.Z[self.order])
        self.sqn = np.einsum("ij,ij->i", self.Zs, self.Zs)
        self.sqn_max = float(self.sqn.max(initial=0.0))
        self.Zs2 = -2.0 * self.Zs
        self.alive_s = np.ones(self.order.size, dtype=bool)
        self.pos_of = np.full(self.Z.shape[0], -1, dtype=np.int64)
        self.pos_of[self.order] = np.arange(self.order.size)
        self.head = 0
        self.n_at_refresh = self.n_alive

    def _advance_head(self) -> None:
        alive_s, head = self.alive_s, self.head
        while True:
            window = alive_s[head:head + 512]
            if window.any():
                self.head = head + int(window.argmax())
                return
            head += 512

    def farthest(self, p: np.ndarray) -> int:
        """The remaining record farthest from ``p`` (lowest index on ties).

        Chunks of the shell are screened with the expanded form
        ``|z|^2 - 2 z.p + |p|^2`` (one matrix-vector product); the records
        within its rounding error of the chunk's maximum are then compared
        with the exact ``sum_j (z_j - p_j)^2``, as the textbook loop does.
        """
        off = float(np.sqrt(np.sum((p - self.c0) ** 2)))
        if not self.alive_s[self.head]:
            self._advance_head()
        D, Zs, sqn, order = self.D, self.Zs, self.sqn, self.order
        pp = float(p @ p)
        best_sq, best = -1.0, -1
        pos, size, n = self.head, 1024, order.size
        while pos < n:
            if best >= 0 and (D[pos] + off) * (1.0 + 1e-9) + 1e-300 < np.sqrt(best_sq):
                break
            stop = min(n, pos + size)
            approx = sqn[pos:stop] + self.Zs2[pos:stop] @ p  # -inf for removed records
            top = approx.max()
            if top > -np.inf:
                margin = 1e-12 * (abs(top) + 2.0 * pp + self.sqn_max) + 1e-300
                near = np.flatnonzero(approx >= top - margin) + pos
                best, best_sq = _farther(order, near, _sq(Zs[near], p), best, best_sq)
            pos = stop
            size = min(size * 2, 1 << 16)
        return best

    # -- nearest neighbours ---------------------------------------------------------

    def _build_tree(self) -> None:
        self.tree_index = np.flatnonzero(self.alive)
        self.tree = cKDTree(self.Z[self.tree_index])

    def group_around(self, centre: int) -> np.ndarray:
        """``centre`` and its ``k - 1`` nearest remaining records (ties: lowest index)."""
        need = self.k - 1
        if need == 0:
            return np.array([centre])
        return self._group_from_tree(centre, need)

    def _group_from_tree(self, centre: int, need: int) -> np.ndarray:
        if self.n_alive < self.TREE_REBUILD * self.tree_index.size:
            self._build_tree()
        size = self.tree_index.size
        q = min(size, 2 * self.k + 6)
        p = self.Z[centre]
        while True:
            dist, loc = self.tree.query(p, k=q)
            dist, loc = np.atleast_1d(dist), np.atleast_1d(loc)
            gidx = self.tree_index[loc]
            ok = self.alive[gidx] & (gidx != centre)
            if ok.sum() >= need:
                dd, ii = dist[ok], gidx[ok]
                if dd.size > need and dd[need] > dd[need - 1] * (1.0 + 1e-9) + 1e-12:
                    # a clear gap after the k-1 nearest: no tie can change the group
                    return np.concatenate(([centre], ii[:need]))
                # the KD-tree's distances may differ from the exact ones in the
                # last bits: widen the cut so that every tie is a candidate
                t = dd[need - 1] * (1.0 + 1e-9) + 1e-12
                if q >= size or dist[-1] > t:
                    cand = ii[dd <= t]
                    d = _sq(self.Z[cand], p)
                    chosen = cand[np.lexsort((cand, d))[:need]]
                    return np.concatenate(([centre], chosen))
            if q >= size:  # pragma: no cover - fewer than k records remain; callers prevent it
                raise AssertionError("MDAV asked for a group larger than the remaining records")
            q = min(size, q * 4)

    def remove(self, members: np.ndarray) -> None:
        self.alive[members] = False
        where = self.pos_of[members]
        self.alive_s[where] = False
        self.sqn[where] = -np.inf
        self.n_alive -= members.size
        self.total = self.total - self.Z[members].sum(axis=0)
        if self.n_alive and self.n_alive < 0.75 * self.n_at_refresh:
            self._refresh_order(self.total / self.n_alive)

    def centroid(self) -> np.ndarray:
        return self.total / self.n_alive


class _MissingState(_State):
    """:class:`_State` for records with missing values (NaN in ``Z``), with
    sdcMicro's distance (:func:`missing_sq`):

    * the centroid is the mean of the observed values of each variable;
    * farthest-point searches scan one shell per missingness pattern (see
      :meth:`farthest`), chunks screened with one matrix-vector product of
      the expanded distance and the candidates compared exactly;
    * nearest neighbours come from a KD-tree over an embedding whose
      Euclidean distance never exceeds the exact one: a missing value of
      variable ``j`` sits at the middle of its range, and one extra
      coordinate holds ``sqrt(sum of 3/4 R_j^2)`` over the variables the
      record misses (per variable missing on one side the embedded part is
      at most ``R_j^2 / 4`` there plus, by the reverse triangle inequality,
      at most ``3/4 R_j^2`` on the extra coordinate: at most ``R_j^2``; two
      missing values of the same variable cost nothing); candidates are
      re-ranked by their exact distance, and the query widens until no
      record outside it can be nearer (its embedded distance, a lower bound,
      already exceeds the k-th exact one).

    The groups are those of the textbook loop with the same distance and the
    same tie rule (lowest index)."""

    def __init__(self, Z: np.ndarray, k: int):
        nan = np.isnan(Z)
        self.W = ~nan
        self.Zf = np.where(nan, 0.0, Z)
        lo = np.where(nan, np.inf, Z).min(axis=0)
        hi = np.where(nan, -np.inf, Z).max(axis=0)
        rng = np.where(np.isfinite(hi - lo), hi - lo, 0.0)
        self.R2 = rng ** 2
        holes = np.flatnonzero(nan.any(axis=0))
        mid = np.where(np.isfinite(lo + hi), (lo + hi) / 2.0, 0.0)
        lift = np.sqrt(((0.75 * rng[holes] ** 2) * nan[:, holes]).sum(axis=1))
        self.E = np.ascontiguousarray(np.column_stack([np.where(nan, mid, Z), lift]))
        self.count = self.W.sum(axis=0).astype(float)
        self.complete = self.W.all(axis=1)
        self.Z = Z
        self.k = k
        n = Z.shape[0]
        self.alive = np.ones(n, dtype=bool)
        self.n_alive = n
        self.total = self.Zf.sum(axis=0)
        self._refresh_order(self.centroid())
        self._build_tree()

    def _sq(self, rows: np.ndarray | slice, p: np.ndarray, sorted_copy: bool = False) -> np.ndarray:
        if sorted_copy:
            return missing_sq(self.Zs[rows], self.Ws[rows], p, self.R2)
        return missing_sq(self.Zf[rows], self.W[rows], p, self.R2)

    def _refresh_order(self, c0: np.ndarray) -> None:
        """Shells per missingness pattern: the remaining records grouped by
        pattern, each group in decreasing order of ``e(x)``, the Euclidean
        distance to ``c0`` over the variables ``x`` observes (``c0`` is
        observed wherever a remaining record is)."""
        idx = np.flatnonzero(self.alive)
        c0w = ~np.isnan(c0)
        diff = np.where(self.W[idx] & c0w, self.Zf[idx] - np.where(c0w, c0, 0.0), 0.0)
        e = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        patterns, of = np.unique(self.W[idx], axis=0, return_inverse=True)
        of = np.asarray(of).ravel()
        order = np.lexsort((-e, of))
        self.c0 = c0
        self.order = idx[order]
        self.D = e[order]
        self.patterns = patterns
        counts = np.bincount(of, minlength=len(patterns))
        self.ends = np.cumsum(counts)
        self.heads = self.ends - counts
        self.Zs = np.ascontiguousarray(self.Zf[self.order])
        self.Ws = np.ascontiguousarray(self.W[self.order])
        # the expanded form of missing_sq, for one matrix-vector product per chunk
        self.Ms = np.ascontiguousarray(np.hstack([self.Zs ** 2, self.Zs, self.Ws.astype(float)]))
        self.row_max = float(np.abs(self.Ms).sum(axis=1).max(initial=0.0))
        self.alive_s = np.ones(self.order.size, dtype=bool)
        self.pos_of = np.full(self.Z.shape[0], -1, dtype=np.int64)
        self.pos_of[self.order] = np.arange(self.order.size)
        self.n_at_refresh = self.n_alive

    def _block_head(self, g: int) -> int:
        """The first remaining record of pattern ``g``'s shell (its end if none)."""
        h, end, alive_s = int(self.heads[g]), int(self.ends[g]), self.alive_s
        while h < end:
            window = alive_s[h:min(end, h + 512)]
            if window.any():
                h += int(window.argmax())
                break
            h += window.size
        self.heads[g] = min(h, end)
        return int(self.heads[g])

    def farthest(self, p: np.ndarray) -> int:
        """The remaining record farthest from ``p`` (lowest index on ties).

        For a record ``x`` of pattern ``g``, ``d(x, p) <= (e(x) + off)^2 +
        pen_g`` (triangle inequality over the variables both observe, plus
        the range penalty of the variables one of them misses, a constant of
        the pattern): patterns are visited in decreasing order of that bound
        for their first record, and each shell is scanned until the bound
        falls below the best exact distance found."""
        pw = ~np.isnan(p)
        pf = np.where(pw, p, 0.0)
        c0 = self.c0
        both = pw & ~np.isnan(c0)
        off = float(np.sqrt(np.sum((np.where(both, c0, 0.0) - np.where(both, pf, 0.0)) ** 2)))
        pen = (self.patterns ^ pw) @ self.R2
        heads, ends, D = self.heads, self.ends, self.D
        top = np.where(heads < ends, D[np.minimum(heads, len(D) - 1)], -np.inf)
        upper = np.where(top > -np.inf, (top + off) ** 2 + pen, -np.inf)
        # missing_sq = [Zf^2 | Zf | W] @ v + const, screened chunk by chunk;
        # the few records within rounding of a chunk's maximum are compared exactly
        v = np.concatenate([pw.astype(float), -2.0 * pf, pf * pf + self.R2 * (1.0 - 2.0 * pw)])
        margin = 1e-10 * (self.row_max * (1.0 + float(np.abs(v).max(initial=0.0)))) + 1e-300
        order = self.order
        best_sq, best = -1.0, -1
        slack = 1.0 + 1e-9
        for g in np.argsort(-upper, kind="stable"):
            if upper[g] == -np.inf or (best >= 0 and upper[g] * slack + 1e-300 < best_sq):
                break
            pos, end, size = self._block_head(int(g)), int(ends[g]), 1024
            pen_g = float(pen[g])
            while pos < end:
                if best >= 0 and ((D[pos] + off) * slack) ** 2 + pen_g * slack + 1e-300 < best_sq:
                    break
                stop = min(end, pos + size)
                approx = self.Ms[pos:stop] @ v
                approx[~self.alive_s[pos:stop]] = -np.inf
                high = approx.max()
                if high > -np.inf:
                    near = np.flatnonzero(approx >= high - margin) + pos
                    best, best_sq = _farther(order, near, missing_sq(self.Zs[near], self.Ws[near], p, self.R2),
                                             best, best_sq)
                pos = stop
                size = min(size * 2, 1 << 16)
        return best

    def _build_tree(self) -> None:
        self.tree_index = np.flatnonzero(self.alive)
        self.tree = cKDTree(self.E[self.tree_index])

    def _group_from_tree(self, centre: int, need: int) -> np.ndarray:
        if self.n_alive < self.TREE_REBUILD * self.tree_index.size:
            self._build_tree()
        size = self.tree_index.size
        q = min(size, 2 * self.k + 6)
        p = self.Z[centre]
        while True:
            dist, loc = self.tree.query(self.E[centre], k=q)
            dist, loc = np.atleast_1d(dist), np.atleast_1d(loc)
            gidx = self.tree_index[loc]
            ok = self.alive[gidx] & (gidx != centre)
            if ok.sum() >= need:
                cand = gidx[ok]
                dd = dist[ok]
                if self.complete[centre] and self.complete[cand[:need]].all() and dd.size > need \
                        and dd[need] > dd[need - 1] * (1.0 + 1e-9) + 1e-12:
                    # complete records: embedded distance = exact distance, and a clear gap after the
                    # k-1 nearest; any other record is at least its (lower-bound) embedded distance away
                    return np.concatenate(([centre], cand[:need]))
                d = self._sq(cand, p)
                t = float(np.sqrt(np.partition(d, need - 1)[need - 1])) * (1.0 + 1e-9) + 1e-12
                # a record outside the query is at least dist[-1] away (a lower bound)
                if q >= size or dist[-1] > t:
                    keep = np.sqrt(d) <= t
                    cand, d = cand[keep], d[keep]
                    chosen = cand[np.lexsort((cand, d))[:need]]
                    return np.concatenate(([centre], chosen))
            if q >= size:  # pragma: no cover - fewer than k records remain; callers prevent it
                raise AssertionError("MDAV asked for a group larger than the remaining records")
            q = min(size, q * 4)
            if q > self.BRUTE_FORCE:
                # the lower bound is loose here (a record whose missing values cost a whole range):
                # exact distances to every remaining record cost less than a query that large
                cand = np.flatnonzero(self.alive)
                cand = cand[cand != centre]
                d = self._sq(cand, p)
                chosen = cand[np.lexsort((cand, d))[:need]]
                return np.concatenate(([centre], chosen))

    #: A KD-tree query for more neighbours than this gives way to one exact pass.
    BRUTE_FORCE = 2048

    def remove(self, members: np.ndarray) -> None:
        self.alive[members] = False
        self.alive_s[self.pos_of[members]] = False
        self.n_alive -= members.size
        self.count = self.count - self.W[members].sum(axis=0)
        self.total = self.total - self.Zf[members].sum(axis=0)
        if self.n_alive and self.n_alive < 0.75 * self.n_at_refresh:
            self._refresh_order(self.centroid())

    def centroid(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.total / np.maximum(self.count, 1.0), np.nan)


def mdav(Z: np.ndarray, k: int, *, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """MDAV groups of the rows of ``Z`` (see the module docstring).

    :param Z: ``(N, d)`` standardised records, ``N >= 2k``; NaN marks a
        missing value (sdcMicro's distance, :class:`_MissingState`).
    :param k: the minimum group size (``>= 1``).
    :param progress: called now and then with ``(records grouped, N)``.
    :return: ``(N,)`` labels ``0..g-1`` in the order the groups were formed;
        every group has between ``k`` and ``2k - 1`` records.
    """
    Z = np.ascontiguousarray(Z, dtype=float)
    n = Z.shape[0]
    if n < 2 * k:
        raise ValueError(f"MDAV needs at least 2k = {2 * k} records; got {n}")
    labels = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return labels
    state = _MissingState(Z, k) if np.isnan(Z).any() else _State(Z, k)
    group = 0
    every = max(1, n // 200)
    next_report = every

    def take(centre: int) -> None:
        nonlocal group, next_report
        members = state.group_around(centre)
        labels[members] = group
        group += 1
        state.remove(members)
        done = n - state.n_alive
        if progress is not None and done >= next_report:
            progress(done, n)
            next_report = done + every

    while state.n_alive >= 3 * k:
        r = state.farthest(state.centroid())
        take(r)
        s = state.farthest(Z[r])
        take(s)
    if state.n_alive >= 2 * k:
        take(state.farthest(state.centroid()))
    labels[state.alive] = group
    if progress is not None:
        progress(n, n)
    return labels


# ---------------------------------------------------------------------------
# Group means and their projection with missing values
# ---------------------------------------------------------------------------


def group_means(X: np.ndarray, labels: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(means, sizes)``: each group's mean of the observed values of each
    column (NaN where every member misses the column) and its size."""
    sizes = np.bincount(labels, minlength=n_groups)
    observed = ~np.isnan(X)
    if observed.all():
        sums = np.column_stack([np.bincount(labels, weights=X[:, j], minlength=n_groups)
                                for j in range(X.shape[1])])
        return sums / sizes[:, None], sizes
    filled = np.where(observed, X, 0.0)
    sums = np.column_stack([np.bincount(labels, weights=filled[:, j], minlength=n_groups)
                            for j in range(X.shape[1])])
    counts = np.column_stack([np.bincount(labels, weights=observed[:, j], minlength=n_groups)
                              for j in range(X.shape[1])])
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1.0), np.nan)
    return means, sizes


def project_centres(rules, centres: np.ndarray, scale: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """Centres projected onto the edit rules (a copy). A centre with no
    value in a column (every member of its group misses it) is projected
    with that column held at ``fill`` (the column's mean), a placeholder
    that is never released: its cell stays NaN, and so does every member's.
    Rules over the observed columns of the centre hold exactly; a rule over
    the missing column cannot be evaluated on those records."""
    centres = np.asarray(centres, dtype=float)
    hole = np.isnan(centres)
    if not hole.any():
        return np.asarray(rules.project(centres, scale=scale), dtype=float)
    projected = np.asarray(rules.project(np.where(hole, fill, centres), scale=scale), dtype=float)
    projected[hole] = np.nan
    return projected
