"""Numerical kernels of density-peak clustering (pure numpy/scipy, no privclust).

Everything here works on float64 arrays and never builds an ``n x n`` matrix
beyond :data:`PAIR_BUDGET` entries at a time.

* :class:`PairIndex` enumerates the pairs of points closer than a radius.
  In 1 to 3 dimensions it is a cell sweep: the points are sorted by a grid
  cell of the first ``d - 1`` coordinates and, inside a cell, by the last
  coordinate, so the candidates of a query in a neighbouring cell form one
  contiguous window found by :func:`numpy.searchsorted`; the pairs of a block
  of queries are then expanded and measured in a few vectorised passes. In
  higher dimensions it uses :class:`scipy.spatial.cKDTree`
  (``sparse_distance_matrix`` on blocks of queries).
* :func:`percent_distance` is the percentage rule for ``d_c`` (and ``E``):
  the ``round(M t / 100)``-th smallest of the ``M = n (n - 1) / 2`` pairwise
  distances, exact for ``M <= EXACT_PAIRS`` and otherwise estimated from a
  random sample of pairs.
* :func:`densities` / :func:`cross_densities`: cutoff counts and (truncated)
  Gaussian sums, exact duplicates folded into weights.
* :func:`delta_parent`: distance to, and index of, the nearest earlier point
  in the stable decreasing-density order (the spec's tie rules), by a radius
  search with a k-nearest-neighbour / blocked brute-force fallback.
* The centres, the assignment, the halo and the merges (``addpc_boundary``,
  ``top_k_centres``, ``assign``, ``components``, ``merge_centres``...) are in
  :mod:`privclust_plugins._dpc_centres`; the private kernels (sensitivities
  on query points, DP quantiles, the nested noise checks) in
  :mod:`privclust_plugins._dpc_dp`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator

import numpy as np
from scipy.spatial import cKDTree

from privclust import ParameterError

#: Most candidate pairs (or matrix entries) held in memory at once. Small enough
#: for the work buffers (five arrays of this length) to stay in the caches' reach
#: and be reused, large enough that per-block overheads vanish.
PAIR_BUDGET = 1 << 19
#: Up to this many pairs the percentage rule sorts every pairwise distance.
EXACT_PAIRS = 5_000_000
#: Pairs drawn when the percentage rule samples.
SAMPLE_PAIRS = 2_000_000
#: Largest number of cells per direction of the sweep before it defers to the KD-tree.
_MAX_CELL_SPAN = 2**40

#: A block of pairs, ``(a, b, counts, q, j, d2)``: see :meth:`PairIndex.pairs`.
_PairBlock = tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _sqdist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise squared distances, summed over the columns in their order."""
    out = np.zeros(a.shape[0])
    for k in range(a.shape[1]):
        diff = a[:, k] - b[:, k]
        diff *= diff
        out += diff
    return out


# ---------------------------------------------------------------------------
# Exact duplicates
# ---------------------------------------------------------------------------


def unique_points(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of ``X``: ``(U, inverse, counts)`` with ``X == U[inverse]``.

    ``U`` keeps the order of first appearance, so data without duplicates
    come back unchanged (``inverse = arange(n)``).
    """
    n = X.shape[0]
    order = np.lexsort(X.T[::-1])
    xs = X[order]
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.any(xs[1:] != xs[:-1], axis=1)
    if new.all():
        return X, np.arange(n), np.ones(n, dtype=np.int64)
    group_sorted = np.cumsum(new) - 1
    group = np.empty(n, dtype=np.int64)
    group[order] = group_sorted
    # Renumber the groups by first appearance.
    first = np.full(group_sorted[-1] + 1, n, dtype=np.int64)
    np.minimum.at(first, group, np.arange(n))
    rank = np.empty_like(first)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    inverse = rank[group]
    U = X[np.sort(first)]
    counts = np.bincount(inverse, minlength=U.shape[0]).astype(np.int64)
    return U, inverse, counts


# ---------------------------------------------------------------------------
# Pair enumeration
# ---------------------------------------------------------------------------


class _Buffers:
    """Work arrays of a pair enumeration, grown on demand and reused."""

    def __init__(self, size: int):
        self.size = 0
        self._grow(max(1, size))

    def _grow(self, size: int) -> None:
        self.size = size
        self.j = np.empty(size, dtype=np.int64)
        self.q = np.empty(size, dtype=np.int64)
        self.d = np.empty(size)
        self.t = np.empty(size)
        self.u = np.empty(size)

    def views(self, P: int) -> tuple[np.ndarray, ...]:
        if P > self.size:
            self._grow(P)
        return self.j[:P], self.q[:P], self.d[:P], self.t[:P], self.u[:P]


class PairIndex:
    """Enumerates pairs of points within a radius, in bounded memory.

    :param X: ``(n, d)`` points.
    :param cell: the cell width of the sweep (about half the smallest radius
        that will be asked for; ``d_c / 2`` is a good choice).

    The index works in its own order of the points (``self.order``; position
    ``p`` holds point ``order[p]``); every method takes and returns positions
    in that order, and ``self.points`` holds the points in it.
    """

    def __init__(self, X: np.ndarray, cell: float):
        X = np.ascontiguousarray(X, dtype=float)
        n, d = X.shape
        self.n, self.d = n, d
        self.cell = float(cell)
        sweep = 1 <= d <= 3 and np.isfinite(self.cell) and self.cell > 0
        if sweep:
            lo = X.min(axis=0)
            span = (X.max(axis=0) - lo) / self.cell
            sweep = bool(np.all(span < _MAX_CELL_SPAN)) and float(np.prod(span[:-1] + 1.0)) < 2.0**50
        self.sweep = sweep
        if not sweep:
            self.order = np.arange(n)
            self.points = X
            self._tree: cKDTree | None = None
            return
        last = d - 1
        self._lo = lo
        cells = np.floor((X[:, :last] - lo[:last]) / self.cell).astype(np.int64)
        self._dims = cells.max(axis=0) + 1 if last else np.zeros(0, dtype=np.int64)
        strides = np.ones(last, dtype=np.int64)
        for k in range(last - 2, -1, -1):
            strides[k] = strides[k + 1] * self._dims[k + 1]
        self._strides = strides
        y = X[:, last] - lo[last]
        cid = cells @ strides if last else np.zeros(n, dtype=np.int64)
        order = np.lexsort((y, cid))
        self.order = order
        self.points = X[order]
        self._cells = cells[order]
        self._cid = cid[order]
        self._y = y[order]
        self._yspan = float(self._y.max())
        self._keys: tuple[float, float, np.ndarray] | None = None
        self._tree = None

    # -- helpers -----------------------------------------------------------------

    def _keys_precise(self, radius: float) -> bool:
        """Whether the composite keys ``cid * span + y`` resolve the last
        coordinate to well under a cell (else the windows would be too wide)."""
        top = (float(self._cid[-1]) + 1.0) * (self._yspan + 2.0 * radius + self.cell)
        return bool(np.spacing(top) < 1e-3 * self.cell)

    @property
    def tree(self) -> cKDTree:
        if self._tree is None:
            self._tree = cKDTree(self.points)
        return self._tree

    def _windows(self, Q: np.ndarray, radius: float, half: bool, q0: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate windows ``[lo, hi)`` of queries ``Q`` for every neighbouring cell.

        With ``half`` the queries are the indexed points at positions
        ``q0 .. q0 + len(Q)`` and only pairs ``(p, j)`` with ``j > p`` are kept.
        """
        last = self.d - 1
        m = int(math.ceil(radius / self.cell))
        qcells = np.floor((Q[:, :last] - self._lo[:last]) / self.cell).astype(np.int64)
        qy = Q[:, last] - self._lo[last]
        offsets = np.array(list(itertools.product(range(-m, m + 1), repeat=last)), dtype=np.int64)
        offsets = offsets.reshape(-1 if last else 1, last)
        if half:
            # Lexicographic order of the offsets equals the order of their linear ids
            # (the cells of a query are inside the grid), so "after" means lin > 0.
            keep = np.array([tuple(o) > (0,) * last for o in offsets], dtype=bool) if last else np.zeros(1, bool)
            offsets = offsets[keep]
        # Composite keys cid * span + y, with span wider than any window, so that a
        # window never runs into the next cell; cached per radius.
        if self._keys is None or self._keys[0] != radius:
            span = self._yspan + 2.0 * radius + self.cell
            self._keys = (radius, span, self._cid * span + self._y)
        _, span, z = self._keys
        # Widen by a few ulps of the composite key so that the window is a superset.
        tol = 8.0 * np.spacing(abs(float(z[-1])) + span + radius)
        los, his = [], []
        if half:
            own = self._cid[q0:q0 + len(Q)] * span + qy
            los.append(np.arange(q0 + 1, q0 + len(Q) + 1))
            his.append(np.searchsorted(z, own + radius + tol, side="right"))
        for off in offsets:
            target = qcells + off
            valid = np.all((target >= 0) & (target < self._dims), axis=1) if last else np.ones(len(Q), bool)
            key = (target @ self._strides if last else np.zeros(len(Q), dtype=np.int64)) * span + qy
            lo = np.searchsorted(z, key - radius - tol, side="left")
            hi = np.searchsorted(z, key + radius + tol, side="right")
            hi = np.where(valid, hi, lo)
            los.append(lo)
            his.append(hi)
        lo = np.stack(los, axis=1)
        hi = np.stack(his, axis=1)
        return lo, np.maximum(hi, lo)

    def pairs(self, radius: float, *, half: bool, queries: np.ndarray | None = None,
              budget: int = PAIR_BUDGET, span: tuple[int, int] | None = None
              ) -> Iterator[_PairBlock]:
        """Yield blocks ``(a, b, counts, q, j, d2)``.

        Queries ``a .. b`` (positions of the indexed points, or rows of
        ``queries``) have ``counts[q - a]`` candidates each, stored
        contiguously in query order: ``q`` (the query of each pair), ``j``
        (positions of indexed points) and ``d2`` (squared distances). The
        arrays are work buffers, overwritten by the next block: consume (or
        copy) them before asking for it. Every pair closer than or at ``radius``
        is there; with the sweep some farther candidates may be too (filter
        on ``d2`` when that matters). With ``half`` (self-pairs only) each
        unordered pair appears once, as ``(p, j)`` with ``j > p``. ``span``
        restricts the queries to ``span[0] .. span[1]``.
        """
        if half and queries is not None:
            raise ValueError("half applies to self-pairs only")
        Q = self.points if queries is None else np.ascontiguousarray(queries, dtype=float)
        nq = Q.shape[0]
        if not np.isfinite(radius):
            yield from self._dense_pairs(Q, half=half, budget=budget, span=span)
            return
        if not self.sweep or int(math.ceil(radius / self.cell)) > 64 or not self._keys_precise(radius):
            yield from self._tree_pairs(Q, radius, half=half, budget=budget, span=span)
            return
        chunk = max(1, min(nq, 65536))
        # Work buffers reused across blocks (fresh allocations cost page faults).
        buffers = _Buffers(budget)
        first, stop = span if span is not None else (0, nq)
        for c0 in range(first, stop, chunk):
            c1 = min(stop, c0 + chunk)
            lo, hi = self._windows(Q[c0:c1], radius, half, c0)
            L = hi - lo
            tot = L.sum(axis=1)
            cum = np.concatenate([[0], np.cumsum(tot)])
            a = 0
            while a < c1 - c0:
                b = int(np.searchsorted(cum, cum[a] + budget, side="right")) - 1
                b = max(b, a + 1)
                b = min(b, c1 - c0)
                P = int(cum[b] - cum[a])
                jv, qv, dv, tv, uv = buffers.views(P)
                Lb = L[a:b].ravel()
                nz = Lb > 0
                if P:
                    # j: the concatenation of the windows [lo, lo + L), by a cumulative sum of steps.
                    starts = (np.cumsum(Lb) - Lb)[nz]
                    los = lo[a:b].ravel()[nz]
                    ends = los + Lb[nz] - 1
                    jv.fill(1)
                    jv[starts] = los - np.concatenate([[0], ends[:-1]])
                    np.cumsum(jv, out=jv)
                    # q: the query of each pair (its position, or its row of ``queries``).
                    tb = tot[a:b]
                    qnz = np.flatnonzero(tb > 0)
                    qstarts = (cum[a:b] - cum[a])[qnz]
                    qv.fill(0)
                    qv[qstarts] = np.diff(np.concatenate([[0], qnz]))
                    qv[0] += c0 + a
                    np.cumsum(qv, out=qv)
                    for k in range(self.d):
                        col = self.points[:, k]
                        colq = col if queries is None else Q[:, k]
                        np.take(col, jv, out=tv, mode="clip")
                        np.take(colq, qv, out=uv, mode="clip")
                        np.subtract(tv, uv, out=tv)
                        if k == 0:
                            np.multiply(tv, tv, out=dv)
                        else:
                            tv *= tv
                            dv += tv
                yield c0 + a, c0 + b, tot[a:b], qv, jv, dv
                a = b

    def _tree_pairs(self, Q: np.ndarray, radius: float, *, half: bool,
                    budget: int, span: tuple[int, int] | None = None) -> Iterator[_PairBlock]:
        tree = self.tree
        nq = Q.shape[0]
        # Guess a block size from the average neighbour count of a few queries.
        probe = Q[:: max(1, nq // 256)]
        avg = float(np.mean(tree.query_ball_point(probe, radius, return_length=True))) + 1.0
        step = int(max(1, min(nq, budget // max(avg * 2.0, 1.0))))
        first, stop = span if span is not None else (0, nq)
        for a in range(first, stop, step):
            b = min(stop, a + step)
            sub = cKDTree(Q[a:b])
            res = sub.sparse_distance_matrix(tree, radius, output_type="ndarray")
            qi = res["i"].astype(np.int64)
            j = res["j"].astype(np.int64)
            if half:
                keep = j > qi + a
                qi, j = qi[keep], j[keep]
            order = np.lexsort((j, qi))
            qi, j = qi[order], j[order]
            d2 = _sqdist(self.points[j], Q[a + qi])
            counts = np.bincount(qi, minlength=b - a)
            yield a, b, counts, qi + a, j, d2

    def _dense_pairs(self, Q: np.ndarray, *, half: bool,
                     budget: int, span: tuple[int, int] | None = None) -> Iterator[_PairBlock]:
        n, nq = self.n, Q.shape[0]
        step = max(1, budget // max(n, 1))
        first, stop = span if span is not None else (0, nq)
        for a in range(first, stop, step):
            b = min(stop, a + step)
            if half:
                counts = np.maximum(n - 1 - np.arange(a, b), 0)
                j = np.concatenate([np.arange(q + 1, n) for q in range(a, b)]) if b > a else np.zeros(0, np.int64)
                qrep = np.repeat(np.arange(a, b), counts)
            else:
                counts = np.full(b - a, n)
                j = np.tile(np.arange(n), b - a)
                qrep = np.repeat(np.arange(a, b), n)
            d2 = _sqdist(self.points[j], Q[qrep])
            yield a, b, counts, qrep, j, d2


# ---------------------------------------------------------------------------
# d_c from the percentage rule
# ---------------------------------------------------------------------------


def pair_rank(n_pairs: int, percent: float) -> int:
    """The 1-based rank ``round(M t / 100)`` (halves up), clamped to ``[1, M]``."""
    return int(min(max(math.floor(n_pairs * percent / 100.0 + 0.5), 1), n_pairs))


def percent_distance(X: np.ndarray, percents: list[float], rng: Callable[[], np.random.Generator] | None,
                     *, exact_pairs: int = EXACT_PAIRS, sample_pairs: int = SAMPLE_PAIRS) -> tuple[list[float], dict]:
    """The ``round(M t / 100)``-th smallest pairwise distance for each ``t`` in ``percents``.

    Exact (every pairwise distance, in blocks) when ``M <= exact_pairs``;
    otherwise estimated from ``sample_pairs`` pairs ``i != j`` drawn
    uniformly from ``rng()`` (a callable, so the generator is touched only
    when a sample is needed). Returns the distances and a description.
    """
    n = X.shape[0]
    M = n * (n - 1) // 2
    if M <= exact_pairs:
        from scipy.spatial.distance import pdist

        dist = pdist(X)
        ranks = [pair_rank(M, t) - 1 for t in percents]
        part = np.partition(dist, sorted(set(ranks)))
        return [float(part[r]) for r in ranks], {"method": "exact", "pairs": M}
    if rng is None:
        raise ValueError("a random generator is needed to sample pairs")
    gen = rng()
    S = int(sample_pairs)
    out = np.empty(S)
    step = 1_000_000
    for a in range(0, S, step):
        b = min(S, a + step)
        i = gen.integers(0, n, b - a)
        j = gen.integers(0, n - 1, b - a)
        j += j >= i
        out[a:b] = np.sqrt(_sqdist(X[i], X[j]))
    ranks = [pair_rank(S, t) - 1 for t in percents]
    part = np.partition(out, sorted(set(ranks)))
    return [float(part[r]) for r in ranks], {"method": "sampled", "pairs": M, "sample_pairs": S}


# ---------------------------------------------------------------------------
# Densities
# ---------------------------------------------------------------------------


def _kernel_radius(kernel: str, dc: float, truncate: float | None) -> float:
    if kernel == "cutoff":
        return dc
    return math.inf if truncate is None else truncate * dc


def _weights(kernel: str, d2: np.ndarray, dc: float, radius: float) -> np.ndarray:
    """Kernel values for squared distances, computed in place in ``d2``."""
    if kernel == "cutoff":  # compare distances, not squares: d_ij < d_c exactly as the rule says
        np.sqrt(d2, out=d2)
        return np.less(d2, dc, out=d2)  # 1.0 / 0.0 in place
    if not dc * dc > 0.0:  # below about 1.5e-154 the square underflows: the kernel cannot be evaluated
        raise ParameterError(f"d_c = {dc:.6g} (given, or taken from the data) is too small: its square is below the "
                             "smallest double, so the Gaussian kernel cannot be evaluated; rescale the data (or give "
                             "a larger dc)")
    if np.isfinite(radius):
        np.copyto(d2, np.inf, where=d2 > radius * radius)
    d2 *= -1.0 / (dc * dc)
    return np.exp(d2, out=d2)


#: Records per thread below which a pass runs in one thread (threads cost more
#: than they save on small inputs). A module constant so that tests can lower
#: it and exercise the threaded path on small data.
PARALLEL_MIN_RECORDS = 50_000


def _in_parallel(part: Callable[[tuple[int, int] | None], np.ndarray], n: int, workers: int) -> np.ndarray:
    """Sum of ``part(span)`` over ``workers`` contiguous spans of ``0 .. n``,
    in threads (numpy releases the GIL in the heavy loops)."""
    workers = max(1, min(int(workers), n // PARALLEL_MIN_RECORDS or 1))
    if workers == 1:
        return part(None)
    from concurrent.futures import ThreadPoolExecutor

    edges = np.linspace(0, n, workers + 1).astype(int)
    with ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(part, [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]))
    return parts[0] if len(parts) == 1 else np.sum(parts, axis=0)


#: Threads summing the densities of large inputs. A constant (not the number of
#: CPUs) so that the summation order, hence every bit of the result, is the
#: same on every machine.
WORKERS = 2


def densities(X: np.ndarray, dc: float, kernel: str = "gaussian", truncate: float | None = 3.0,
              *, counts: np.ndarray | None = None, index: PairIndex | None = None,
              budget: int = PAIR_BUDGET, workers: int = WORKERS) -> np.ndarray:
    """``rho_i = sum_{j != i} K(d_ij)`` over the points of ``X``.

    ``kernel`` "cutoff": ``K = 1[d < d_c]`` (strict); "gaussian":
    ``K = exp(-(d / d_c)^2)``, summed over pairs with ``d <= truncate d_c``
    (all pairs when ``truncate`` is None). ``counts`` gives the multiplicity
    of each (distinct) row, so ``X`` may hold unique rows: then
    ``rho_u = sum_{v != u} w_v K(d_uv) + (w_u - 1)``. From 100,000 points on,
    the sum runs in ``workers`` threads over fixed spans of the points.
    """
    n = X.shape[0]
    w = np.ones(n) if counts is None else np.asarray(counts, dtype=float)
    radius = _kernel_radius(kernel, dc, truncate)
    if not np.isfinite(radius):
        # Every pair: blocks of full rows, (rows x n) entries at a time.
        rho = np.empty(n)
        step = max(1, budget // max(n, 1))
        for a in range(0, n, step):
            b = min(n, a + step)
            d2 = np.zeros((b - a, n))
            for k in range(X.shape[1]):
                diff = X[a:b, k][:, None] - X[:, k][None, :]
                diff *= diff
                d2 += diff
            kv = _weights(kernel, d2, dc, radius)
            rho[a:b] = kv @ w - w[a:b]  # minus the point's own term K(0) = 1
        return rho + (w - 1.0)
    index = index if index is not None else PairIndex(X, dc / 2.0)
    wp = w[index.order]
    weighted = bool(np.any(w != 1.0))

    def part(span: tuple[int, int] | None) -> np.ndarray:
        rho = np.zeros(n)
        for a, b, tot, _q, j, d2 in index.pairs(radius, half=True, budget=budget, span=span):
            kv = _weights(kernel, d2, dc, radius)
            nz = tot > 0
            if not nz.any():
                continue
            seg = np.concatenate([[0], np.cumsum(tot)[:-1]])[nz]
            # Scatter onto the (local) range of positions the block touches.
            j0, j1 = int(j.min()), int(j.max()) + 1
            if weighted:
                rho[j0:j1] += np.bincount(j - j0, kv * np.repeat(wp[a:b], tot), minlength=j1 - j0)
                kv *= wp[j]
            else:
                rho[j0:j1] += np.bincount(j - j0, kv, minlength=j1 - j0)
            rho[a:b][nz] += np.add.reduceat(kv, seg)
        return rho

    rho = _in_parallel(part, n, workers)
    out = np.empty(n)
    out[index.order] = rho
    return out + (w - 1.0)


def cross_densities(Q: np.ndarray, X: np.ndarray, dc: float, kernel: str = "gaussian",
                    truncate: float | None = 3.0, *, budget: int = PAIR_BUDGET) -> np.ndarray:
    """``rho(q) = sum_i K(||q - x_i||)`` for query points ``Q`` (not in ``X``)."""
    radius = _kernel_radius(kernel, dc, truncate)
    index = PairIndex(X, dc / 2.0)
    rho = np.zeros(Q.shape[0])
    for a, b, tot, _q, _j, d2 in index.pairs(radius, half=False, queries=Q, budget=budget):
        kv = _weights(kernel, d2, dc, radius)
        nz = tot > 0
        if nz.any():
            seg = np.concatenate([[0], np.cumsum(tot)[:-1]])
            rho[a:b][nz] += np.add.reduceat(kv, seg[nz])
    return rho


# ---------------------------------------------------------------------------
# delta and the parents
# ---------------------------------------------------------------------------


def density_order(rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable decreasing-density order (ties by index) and each point's rank in it."""
    order = np.argsort(-np.asarray(rho, dtype=float), kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return order, rank


def _nearest_earlier(P: np.ndarray, rank: np.ndarray, radius: float, index: PairIndex | None,
                     budget: int = PAIR_BUDGET, order_by_rank: np.ndarray | None = None, workers: int = 1
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Distance to, and index of, the nearest point of smaller rank
    (ties: the smallest rank), for distinct points ``P``. ``-1`` for the first."""
    m = P.shape[0]
    best = np.full(m, np.inf)
    parent = np.full(m, -1, dtype=np.int64)
    pending = np.ones(m, dtype=bool)
    pending[np.argmin(rank)] = False
    if order_by_rank is None:
        order_by_rank = np.argsort(rank)
    if index is not None and np.isfinite(radius) and index.sweep:
        rk = rank[index.order]
        big = np.iinfo(np.int64).max
        todo_pos = np.flatnonzero(pending[index.order])
        r = radius
        # Windowed searches with a doubling radius over the points still unresolved.
        while todo_pos.size > 2000 and r <= 64.0 * radius and int(math.ceil(r / index.cell)) <= 64:
            done = np.zeros(todo_pos.size, dtype=bool)

            def search(span: tuple[int, int] | None, r: float = r, todo_pos: np.ndarray = todo_pos,
                       done: np.ndarray = done) -> np.ndarray:
                # Each thread writes disjoint entries of best, parent and done.
                lo_q, hi_q = span if span is not None else (0, todo_pos.size)
                sub = todo_pos[lo_q:hi_q]
                for a, b, tot, _q, j, d in index.pairs(r, half=False, queries=index.points[sub], budget=budget):
                    nz = tot > 0
                    if not nz.any():
                        continue
                    qr = np.repeat(rk[sub[a:b]], tot)
                    rj = rk[j]
                    # Compare distances (not squares), as the reference code does: ties are ties of d_ij.
                    np.sqrt(d, out=d)
                    d[rj >= qr] = np.inf
                    seg = np.concatenate([[0], np.cumsum(tot)[:-1]])[nz]
                    mins = np.full(b - a, np.inf)
                    mins[nz] = np.minimum.reduceat(d, seg)
                    tie = np.where(d == np.repeat(mins, tot), rj, big)
                    prank = np.full(b - a, big)
                    prank[nz] = np.minimum.reduceat(tie, seg)
                    ok = mins <= r
                    pos = index.order[sub[a:b][ok]]
                    best[pos] = mins[ok]
                    parent[pos] = order_by_rank[prank[ok]]
                    done[lo_q + a:lo_q + b] = ok
                return np.zeros(0)

            _in_parallel(search, todo_pos.size, workers)
            todo_pos = todo_pos[~done]
            r *= 2.0
        pending[:] = False
        pending[index.order[todo_pos]] = True
    todo = np.flatnonzero(pending)
    if todo.size:
        b2, par = _nearest_earlier_search(P, rank, todo, order_by_rank, budget)
        best[todo] = b2
        parent[todo] = par
    return best, parent


def _nearest_earlier_search(P: np.ndarray, rank: np.ndarray, todo: np.ndarray, order_by_rank: np.ndarray,
                            budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest earlier point for the points ``todo``: k-nearest-neighbour
    queries with growing k, and a blocked brute force over the (few) earlier
    points when a point's rank is small."""
    m = P.shape[0]
    best = np.full(todo.size, np.inf)
    parent = np.full(todo.size, -1, dtype=np.int64)
    slot = np.empty(m, dtype=np.int64)
    slot[todo] = np.arange(todo.size)
    remaining = todo
    k = 16
    tree: cKDTree | None = None
    while remaining.size:
        brute = rank[remaining] <= 4 * k
        if brute.any():
            pts = remaining[brute]
            pts = pts[np.argsort(rank[pts])]
            rows = max(1, budget // max(int(rank[pts].max()), 1))
            for a in range(0, pts.size, rows):
                b = min(pts.size, a + rows)
                blk = pts[a:b]
                r_max = int(rank[blk].max())
                earlier = order_by_rank[:r_max]
                d2 = np.zeros((blk.size, r_max))
                for c in range(P.shape[1]):
                    diff = P[blk, c][:, None] - P[earlier, c][None, :]
                    diff *= diff
                    d2 += diff
                np.sqrt(d2, out=d2)
                d2[np.arange(r_max)[None, :] >= rank[blk][:, None]] = np.inf
                arg = np.argmin(d2, axis=1)  # first minimum = smallest rank among ties
                best[slot[blk]] = d2[np.arange(blk.size), arg]
                parent[slot[blk]] = earlier[arg]
        remaining = remaining[~brute]
        if not remaining.size:
            break
        if tree is None:
            tree = cKDTree(P)
        kk = min(k, m)
        dist, nb = tree.query(P[remaining], k=kk)
        dist = dist.reshape(remaining.size, kk)
        nb = nb.reshape(remaining.size, kk)
        rr = rank[remaining][:, None]
        earlier = rank[nb] < rr
        dm = np.where(earlier, dist, np.inf)
        mins = dm.min(axis=1)
        resolved = np.isfinite(mins) & ((mins < dist[:, -1]) | (kk == m))
        if resolved.any():
            sel = remaining[resolved]
            dmr = dm[resolved]
            tie = np.where(dmr == mins[resolved][:, None], rank[nb[resolved]], np.iinfo(np.int64).max)
            prank = tie.min(axis=1)
            par = order_by_rank[prank]
            parent[slot[sel]] = par
            best[slot[sel]] = np.sqrt(_sqdist(P[sel], P[par]))
        remaining = remaining[~resolved]
        k *= 4
    return best, parent


def delta_parent(X: np.ndarray, rho: np.ndarray, *, index: PairIndex | None = None,
                 unique: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 radius: float | None = None, budget: int = PAIR_BUDGET, workers: int = WORKERS
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(delta, parent, order)`` of the spec's formula (3) and tie rules.

    Points are ordered by decreasing ``rho`` (stable, ties by index); each
    point's parent is the nearest point earlier in that order (the earliest
    one among equally near points); ``delta`` is the distance to it. The
    first point has parent ``-1`` and ``delta = max`` of the other deltas.

    ``unique`` is :func:`unique_points` of ``X`` (computed when absent):
    exact duplicates are searched once. ``index`` is a :class:`PairIndex` of
    the unique rows, ``radius`` the radius of the first (windowed) search.
    """
    n = X.shape[0]
    order, rank = density_order(rho)
    U, inv, _counts = unique if unique is not None else unique_points(X)
    m = U.shape[0]
    # A distinct point's rank is its earliest member's; that member is its leader.
    if m == n:  # no duplicates (inverse is the identity)
        leader, dense, uorder = np.arange(n), rank, order
    else:
        urank = np.full(m, n, dtype=np.int64)
        np.minimum.at(urank, inv, rank)
        leader = order[urank]
        uorder = np.argsort(urank)
        dense = np.empty(m, dtype=np.int64)
        dense[uorder] = np.arange(m)
    if m == 1:
        delta = np.zeros(n)
        parent = leader[inv].copy()
        parent[order[0]] = -1
        return delta, parent, order
    if radius is None:
        radius = index.cell if index is not None else math.inf
    best, upar = _nearest_earlier(U, dense, radius, index, budget, uorder, workers)
    delta = np.zeros(n)
    parent = leader[inv].copy()
    is_leader = leader[inv] == np.arange(n)
    lead_u = inv[is_leader]
    has = upar[lead_u] >= 0
    idx = np.flatnonzero(is_leader)
    delta[idx[has]] = best[lead_u[has]]
    parent[idx[has]] = leader[upar[lead_u[has]]]
    top = order[0]
    parent[top] = -1
    others = np.ones(n, dtype=bool)
    others[top] = False
    delta[top] = delta[others].max()
    return delta, parent, order
