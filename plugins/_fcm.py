"""Numerical kernels of fuzzy c-means (FCM) and entropy-based FCM (EFCM).

Pure functions on numpy arrays; the component classes in
:mod:`privclust_plugins.fuzzy` and :mod:`privclust_plugins.microaggregation`
validate parameters, standardise the data and handle DataFrames.

Notation (seed paper, Torra): records ``x_k`` (rows of ``X``, already
standardised by the caller), centres ``v_i`` (rows of ``V``), squared
distances ``D_ki = ||x_k - v_i||^2``.

* FCM (Prop. 1): ``u_ki = D_ki^(-a) / sum_j D_kj^(-a)`` with ``a = 1/(m-1)``;
  centre update ``v_i = sum_k u_ki^m x_k / sum_k u_ki^m``.
* EFCM (Eq. 3-4): ``u_ki = softmax_i(-lambda D_ki)``; ``v_i = sum_k u_ki x_k /
  sum_k u_ki``.

Numerical safety. Memberships are computed relative to each record's nearest
centre (``Dmin``): FCM weights are ``w = (Dmin / D)^a`` (in ``[0, 1]``, never
an overflow, and a record on a centre, ``D = 0``, gets ``w = 1`` there and
``0`` elsewhere, i.e. membership 1), EFCM weights are ``exp(-lambda (D -
Dmin))`` (the log-sum-exp shift: any lambda is safe). With ``S = sum_i w``:

* FCM: ``u = w / S``, ``u^m = w * (Dmin/D) / S^m`` (because ``a (m - 1) =
  1``), and the objective of a record is ``sum_i u^m D = Dmin * S^(1-m)``;
* EFCM: ``u = w / S`` and the objective of a record,
  ``sum_i u D + lambda^-1 sum_i u log u``, is the soft minimum
  ``Dmin - log(S) / lambda``.

Both closed forms make the objective free (one value per record).

Ways to run one pass over the data (all memory-bounded: the records are
processed in row blocks, so nothing of size ``N x c`` is ever built unless
the caller asks for the dense membership matrix):

* **exact** (:func:`exact_pass`): every record against every centre, in
  blocks laid out ``(c, block)`` so that every reduction runs over
  contiguous rows; memberships, the draw, expected sizes. Cost ``O(N c d)``.
* **exact update** (:func:`update_pass`): the same for an iteration (centre
  update and objective only), as two matrix products per block, spread over
  the cores in fixed chunks.
* **truncated** (:func:`truncated_pass`): every record against its ``p``
  nearest centres only, found with a KD-tree over the centres
  (:class:`scipy.spatial.cKDTree`); memberships renormalised over the ``p``.
  Cost: one KD-tree query per record plus ``O(N p d)``.
* **candidate update** (:func:`candidate_pass`, :class:`Candidates`): the
  truncated pass of an iteration, over candidate lists that a
  triangle-inequality certificate keeps exact between KD-tree queries.
* **audit** (:func:`audit_tail`): on a random sample of records, the exact
  normaliser ``S`` and the sorted top memberships, to choose the smallest
  ``p`` whose dropped mass stays below a tolerance.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sparse
from scipy.spatial import cKDTree

__all__ = [
    "DIRECT_MAX_DIM",
    "Fuzzifier",
    "PassResult",
    "Audit",
    "Candidates",
    "audit_tail",
    "block_rows",
    "candidate_pass",
    "distinct_rows",
    "exact_pass",
    "group_seeds",
    "init_centres",
    "kmeanspp",
    "run",
    "spatial_order",
    "truncated_pass",
    "update_pass",
]

#: Squared distances below this count as zero (a record on a centre).
TINY = 1e-300
#: Up to this many dimensions squared distances are computed from
#: differences (exact zeros for coincident points); above, with one matrix
#: product (``||x||^2 - 2 x.v + ||v||^2``), which is faster there.
DIRECT_MAX_DIM = 3
#: Elements of one ``(c, block)`` work array (about 2 MB: stays in cache).
_CACHE_ELEMENTS = 1 << 18
#: Work arrays alive at once in a block (distances, weights, scratch).
_WORK_ARRAYS = 4
#: k-means++ is used for seeding while ``N * c * trials`` stays below this.
KMEANSPP_MAX_WORK = 4e8


@dataclass(frozen=True)
class Fuzzifier:
    """Which objective and its fuzziness: FCM with ``m > 1`` or EFCM with ``lambda > 0``."""

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind == "fcm":
            if not self.value > 1:
                raise ValueError(f"FCM needs m > 1; got {self.value!r}")
        elif self.kind == "efcm":
            if not self.value > 0:
                raise ValueError(f"EFCM needs lambda > 0; got {self.value!r}")
        else:
            raise ValueError(f"unknown fuzzifier kind {self.kind!r}")

    @property
    def a(self) -> float:
        """The FCM exponent ``1 / (m - 1)``."""
        return 1.0 / (self.value - 1.0)

    @property
    def update_power(self) -> float:
        """The power of ``S`` dividing the update weights (``m`` for FCM, 1 for EFCM)."""
        return self.value if self.kind == "fcm" else 1.0

    def describe(self) -> str:
        return f"m = {self.value:g}" if self.kind == "fcm" else f"lambda = {self.value:g}"


# ---------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------


def _power_inplace(r: np.ndarray, a: float, out: np.ndarray) -> np.ndarray:
    """``out = r ** a`` (``r`` untouched), by binary exponentiation when ``a``
    is a small integer (m = 1.5, 1.25, 1.1... give a = 2, 4, 10), which is
    several times faster than a general power."""
    n = int(a)
    if n == a and 1 <= n <= 64:
        if n == 1:
            np.copyto(out, r)
            return out
        base = np.array(r)
        started = False
        while True:
            if n & 1:
                if started:
                    out *= base
                else:
                    np.copyto(out, base)
                    started = True
            n >>= 1
            if not n:
                break
            base *= base
        return out
    np.power(r, a, out=out)
    return out


def weights(D: np.ndarray, dmin: np.ndarray, fz: Fuzzifier, axis: int,
            scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unnormalised memberships and update weights, in place.

    :param D: squared distances (any layout); overwritten.
    :param dmin: each record's smallest squared distance, broadcastable
        against ``D`` (``(1, b)`` for the ``(c, b)`` layout, ``(b, 1)`` for ``(b, p)``).
    :param axis: the axis of ``D`` that runs over centres.
    :param scratch: an array like ``D``.
    :returns: ``(w, wm, S)``: the weights ``w`` (``u = w / S``), the update
        weights ``wm`` (``u^m = wm / S^m`` for FCM; ``wm is w`` for EFCM), both
        views of ``D`` or ``scratch``, and ``S = sum of w`` over centres (>= 1:
        the nearest centre has weight 1).
    """
    if fz.kind == "fcm":
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(dmin, D, out=D)  # ratio Dmin / D in [0, 1]
        on_centre = np.flatnonzero(np.ravel(dmin) == 0.0)
        if on_centre.size:
            # a record on a centre: 0/0 marks the coinciding centre(s); weight 1
            # there and 0 elsewhere (membership 1, split only between centres
            # that coincide exactly)
            sub = np.take(D, on_centre, axis=1 - axis)
            sub[np.isnan(sub)] = 1.0
            if axis == 0:
                D[:, on_centre] = sub
            else:
                D[on_centre, :] = sub
        if fz.a == 1.0:  # m = 2
            w = D
            wm = np.multiply(D, D, out=scratch)
        else:
            w = _power_inplace(D, fz.a, scratch)
            wm = np.multiply(D, w, out=D)
    else:
        np.subtract(D, dmin, out=D)
        D *= -fz.value
        w = wm = np.exp(D, out=D)
    return w, wm, w.sum(axis=axis)


def record_objective(dmin: np.ndarray, S: np.ndarray, fz: Fuzzifier) -> np.ndarray:
    """Each record's term of the objective, from ``Dmin`` and ``S`` (closed forms)."""
    if fz.kind == "fcm":
        return np.maximum(dmin, 0.0) * S ** (1.0 - fz.value)
    return dmin - np.log(S) / fz.value


def membership_values(D: np.ndarray, fz: Fuzzifier, S: np.ndarray | None = None) -> np.ndarray:
    """Memberships ``u`` of the centres in ``D`` (``(n, p)``, sorted nearest
    first), normalised by ``S`` (default: their own sum). Does not modify ``D``."""
    D = np.array(D, dtype=float)
    w, _, total = weights(D, D[:, :1].copy(), fz, 1, np.empty_like(D))
    norm = total if S is None else S
    return w / norm[:, None]


# ---------------------------------------------------------------------------
# Blocks and distances
# ---------------------------------------------------------------------------


def block_rows(n_centres: int, budget_bytes: float, *, cap: int = 16384) -> int:
    """Rows per block: ``(c, block)`` work arrays stay in cache and within the budget."""
    by_cache = _CACHE_ELEMENTS // max(n_centres, 1)
    by_budget = int(budget_bytes // (8 * _WORK_ARRAYS * max(n_centres, 1)))
    return int(max(1, min(cap, max(by_cache, 64), by_budget)))


class _Data:
    """The records in the layouts the passes need (built once per run)."""

    def __init__(self, X: np.ndarray):
        self.X = np.ascontiguousarray(X, dtype=float)
        self.XT = np.ascontiguousarray(self.X.T)
        self.xx = np.einsum("ij,ij->i", self.X, self.X)
        self.n, self.d = self.X.shape
        self._X1: np.ndarray | None = None
        self._XaT: np.ndarray | None = None

    @property
    def XaT(self) -> np.ndarray:
        """``[X, ||x||^2, 1]`` transposed, ``(d + 2, N)``: one matrix product with
        ``[-2v, 1, ||v||^2]`` gives every squared distance."""
        if self._XaT is None:
            self._XaT = np.ascontiguousarray(np.vstack([self.XT, self.xx[None, :], np.ones((1, self.n))]))
        return self._XaT

    @property
    def X1(self) -> np.ndarray:
        """``[X, 1]``: one sparse product gives the weighted sums and the weights."""
        if self._X1 is None:
            self._X1 = np.hstack([self.X, np.ones((self.n, 1))])
        return self._X1


def sparse_sums(idx: np.ndarray, weights: np.ndarray, X1: np.ndarray, n_centres: int) -> np.ndarray:
    """``(c, d + 1)``: for each centre, ``sum_k w_ki [x_k, 1]`` over the
    records that keep it (``idx``, ``weights``: ``(n, p)``), as one sparse
    product (several times faster than ``d + 1`` bincounts)."""
    n, p = idx.shape
    M = sparse.csr_matrix((weights.ravel(), idx.ravel(), np.arange(0, n * p + 1, p)), shape=(n, n_centres))
    return np.asarray(M.T @ X1)


def gather_distances(V: np.ndarray, idx: np.ndarray, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Squared distances ``(n, p)`` from each record to the centres ``idx``,
    one dimension at a time (gathers from contiguous columns)."""
    VT = np.ascontiguousarray(V.T)
    D = np.zeros(idx.shape) if out is None else out
    D[...] = 0.0
    t = np.empty(idx.shape)
    for j in range(V.shape[1]):
        np.take(VT[j], idx, out=t)
        t -= X[:, j:j + 1]
        t *= t
        D += t
    return D


def _distances_block(V: np.ndarray, V2: np.ndarray, vv: np.ndarray, data: _Data, s: int, e: int,
                     out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """Squared distances ``(c, e - s)`` of records ``s:e`` to every centre."""
    xT = data.XT[:, s:e]
    if data.d <= DIRECT_MAX_DIM:
        np.subtract(V[:, 0:1], xT[0], out=out)
        out *= out
        for j in range(1, data.d):
            np.subtract(V[:, j:j + 1], xT[j], out=tmp)
            tmp *= tmp
            out += tmp
    else:
        np.matmul(V2, xT, out=out)
        out += data.xx[s:e]
        out += vv
        np.maximum(out, 0.0, out=out)
    return out


@dataclass
class PassResult:
    """What one pass over the records computed (fields are ``None`` when not asked)."""

    num: np.ndarray | None = None  # (c, d) sum_k u_ki^m x_k
    den: np.ndarray | None = None  # (c,) sum_k u_ki^m
    objective: float = 0.0
    dmin: np.ndarray | None = None  # (N,) squared distance to the nearest centre
    nearest: np.ndarray | None = None  # (N,) index of the nearest centre
    S: np.ndarray | None = None  # (N,) normaliser (over all centres, or the kept ones)
    colsum: np.ndarray | None = None  # (c,) sum_k u_ki
    labels: np.ndarray | None = None  # (N,) drawn centre per record
    dense: np.ndarray | None = None  # (N, c) memberships
    top_indices: np.ndarray | None = None  # (N, p)
    top_values: np.ndarray | None = None  # (N, p) renormalised over the kept
    kept_mass: np.ndarray | None = None  # (N,) the kept share of the full mass (truncated: 1)


def exact_pass(data: _Data, V: np.ndarray, fz: Fuzzifier, *, budget_bytes: float, update: bool = True,
               dense: bool = False, draw: np.random.Generator | None = None, colsum: bool = False,
               nearest: bool = False, progress: Callable[[float], None] | None = None) -> PassResult:
    """One exact pass: every record against every centre, in row blocks.

    :param update: accumulate the centre update (``num``, ``den``) and the objective.
    :param dense: also return the ``(N, c)`` membership matrix (only when it
        fits; the caller decides).
    :param draw: draw one centre per record with probabilities ``u_k.``
        (exact inverse-CDF sampling over the full row).
    :param colsum: accumulate the expected cluster sizes ``sum_k u_ki``.
    :param nearest: return each record's nearest centre.
    """
    c, d = V.shape
    n = data.n
    b = min(block_rows(c, budget_bytes), n)
    V = np.ascontiguousarray(V, dtype=float)
    V2 = -2.0 * V
    vv = np.einsum("ij,ij->i", V, V)[:, None]
    D = np.empty((c, b))
    T = np.empty((c, b))
    U = np.empty((c, b))
    res = PassResult(dmin=np.empty(n), S=np.empty(n))
    if update:
        res.num = np.zeros((c, d))
        res.den = np.zeros(c)
    if colsum:
        res.colsum = np.zeros(c)
    if dense:
        res.dense = np.empty((n, c))
    if draw is not None:
        res.labels = np.empty(n, dtype=np.int64)
    if nearest:
        res.nearest = np.empty(n, dtype=np.int64)
    objective = 0.0
    n_blocks = -(-n // b)
    for bi, s in enumerate(range(0, n, b)):
        e = min(n, s + b)
        m = e - s
        if m == b:
            Dv, Tv, Uv = D, T, U
        else:  # the last, shorter block: contiguous arrays keep matmul on BLAS
            Dv, Tv, Uv = np.empty((c, m)), np.empty((c, m)), np.empty((c, m))
        _distances_block(V, V2, vv, data, s, e, Dv, Tv)
        dmin = Dv.min(axis=0)
        res.dmin[s:e] = dmin
        if nearest:
            res.nearest[s:e] = np.argmin(Dv, axis=0)
        Wv, WMv, S = weights(Dv, dmin[None, :], fz, 0, Tv)
        res.S[s:e] = S
        if update:
            np.multiply(WMv, (S ** -fz.update_power)[None, :], out=Uv)
            res.num += Uv @ data.X[s:e]
            res.den += Uv.sum(axis=1)
            objective += float(record_objective(dmin, S, fz).sum())
        if draw is not None:
            np.cumsum(Wv, axis=0, out=Uv)
            r = draw.random(m) * S
            lab = (Uv < r[None, :]).sum(axis=0)
            res.labels[s:e] = np.minimum(lab, c - 1)
        if colsum or dense:
            Wv *= (1.0 / S)[None, :]
            if colsum:
                res.colsum += Wv.sum(axis=1)
            if dense:
                res.dense[s:e] = Wv.T
        if progress is not None:
            progress((bi + 1) / n_blocks)
    res.objective = objective
    return res


#: Largest number of chunks an update pass splits the records into; the
#: chunks (and so the order of every floating-point sum) depend on N and the
#: block size only, never on the number of threads.
_MAX_CHUNKS = 64
#: Squared distances are floored here on the m = 2 path (1/D^2 stays finite).
_FLOOR_M2 = 1e-150
#: An update pass runs in threads only from this much work (records x centres)
#: up; below it the threads cost more than they save. A module constant so that
#: tests can lower it and exercise the threaded path on small data.
PARALLEL_MIN_WORK = 1 << 20


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def update_pass(data: _Data, V: np.ndarray, fz: Fuzzifier, *, budget_bytes: float,
                threads: int | None = None) -> PassResult:
    """The exact pass of an iteration: the centre update and the objective
    only, every record against every centre.

    Faster than :func:`exact_pass` for the same result: squared distances
    come from one matrix product (``[-2v, 1, ||v||^2] . [x, ||x||^2, 1]``),
    the update is a second product with ``[x S^-m, S^-m]`` (no scaling pass,
    no summing pass), FCM with ``m = 2`` skips the power and the nearest-centre
    shift (``u = D^-1 / S``; no overflow once ``D`` is floored at 1e-150), and
    the row blocks are spread over the CPU's threads (numpy and BLAS release
    the GIL) in fixed chunks whose partial sums are added in chunk order, so
    the result does not depend on the number of threads.
    """
    c, d = V.shape
    n = data.n
    V = np.ascontiguousarray(V, dtype=float)
    Va = np.hstack([-2.0 * V, np.ones((c, 1)), np.einsum("ij,ij->i", V, V)[:, None]])
    XaT = data.XaT
    XT = data.XT
    b = min(block_rows(c, budget_bytes / max(threads or _threads(), 1)), n)
    starts = list(range(0, n, b))
    n_chunks = min(_MAX_CHUNKS, len(starts))
    chunks = [list(ch) for ch in np.array_split(np.array(starts), n_chunks)]
    m2 = fz.kind == "fcm" and fz.a == 1.0

    def work(group: list[list[int]]) -> list[tuple[np.ndarray, float]]:
        # one set of work arrays per worker (fresh large arrays cost page faults), one sum per chunk
        D = np.empty(c * b)
        T = np.empty(c * b)
        XsT = np.empty((d + 1, b))
        return [one_chunk(chunk, D, T, XsT) for chunk in group]

    def one_chunk(chunk: list[int], D: np.ndarray, T: np.ndarray, XsT: np.ndarray) -> tuple[np.ndarray, float]:
        acc = np.zeros((c, d + 1))
        objective = 0.0
        for s in chunk:
            e = min(n, s + b)
            m = e - s
            Dv, Tv = D[: c * m].reshape(c, m), T[: c * m].reshape(c, m)  # contiguous, for BLAS
            np.matmul(Va, XaT[:, s:e], out=Dv)
            if m2:
                np.maximum(Dv, _FLOOR_M2, out=Dv)
                np.reciprocal(Dv, out=Dv)
                S = Dv.sum(axis=0)
                WM = np.multiply(Dv, Dv, out=Tv)
                q = 1.0 / (S * S)
                objective += float((1.0 / S).sum())
            else:
                np.maximum(Dv, 0.0, out=Dv)
                dmin = Dv.min(axis=0)
                _, WM, S = weights(Dv, dmin[None, :], fz, 0, Tv)
                q = S ** -fz.update_power
                objective += float(record_objective(dmin, S, fz).sum())
            np.multiply(XT[:, s:e], q, out=XsT[:d, :m])
            XsT[d, :m] = q
            acc += WM @ XsT[:, :m].T
        return acc, objective

    workers = min(threads or _threads(), n_chunks)
    if not (workers > 1 and n * c >= PARALLEL_MIN_WORK):
        workers = 1
    groups = [[[int(x) for x in ch] for ch in chunks[i::workers]] for i in range(workers)]
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(work, groups))
    else:
        done = [work(groups[0])]
    parts: list[tuple[np.ndarray, float]] = [None] * n_chunks  # type: ignore[list-item]
    for i in range(workers):
        for j, part in enumerate(done[i]):
            parts[i + j * workers] = part
    total = np.zeros((c, d + 1))
    objective = 0.0
    for acc, obj in parts:  # chunk order: deterministic sums
        total += acc
        objective += obj
    return PassResult(num=total[:, :d], den=total[:, d], objective=objective)


# ---------------------------------------------------------------------------
# Truncated pass (p nearest centres through a KD-tree)
# ---------------------------------------------------------------------------


def query(tree: cKDTree, x: np.ndarray, p: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``p`` nearest centres of each row of ``x``: squared distances and
    indices, ``(n, p)`` each, nearest first."""
    dist, idx = tree.query(x, k=p, workers=workers)
    if p == 1:
        dist = dist[:, None]
        idx = idx[:, None]
    dist = np.asarray(dist, dtype=float)
    dist *= dist
    return dist, np.asarray(idx, dtype=np.int64)


def truncated_pass(data: _Data, V: np.ndarray, fz: Fuzzifier, p: int, *, budget_bytes: float,
                   update: bool = True, store: bool = False, draw: np.random.Generator | None = None,
                   colsum: bool = False, workers: int = -1, tree: cKDTree | None = None,
                   progress: Callable[[float], None] | None = None) -> PassResult:
    """One pass where each record sees only its ``p`` nearest centres.

    Memberships are renormalised over the ``p`` kept centres; ``S`` is their
    sum (so the objective is an upper bound of the exact one).
    """
    c, d = V.shape
    n = data.n
    p = int(min(p, c))
    tree = tree if tree is not None else cKDTree(V)
    # rows per block: the (b, p) work arrays (about 6 of them) within cache/budget
    b = int(max(256, min(65536, budget_bytes // (8 * 8 * p), (1 << 20) // p)))
    res = PassResult(dmin=np.empty(n), S=np.empty(n), nearest=np.empty(n, dtype=np.int64))
    if update:
        res.num = np.zeros((c, d))
        res.den = np.zeros(c)
    if colsum:
        res.colsum = np.zeros(c)
    if store:
        res.top_indices = np.empty((n, p), dtype=np.int64)
        res.top_values = np.empty((n, p))
    if draw is not None:
        res.labels = np.empty(n, dtype=np.int64)
    objective = 0.0
    n_blocks = -(-n // b)
    for bi, s in enumerate(range(0, n, b)):
        e = min(n, s + b)
        x = data.X[s:e]
        D, idx = query(tree, x, p, workers)
        dmin = D[:, 0].copy()
        res.dmin[s:e] = dmin
        res.nearest[s:e] = idx[:, 0]
        W, WM, S = weights(D, dmin[:, None], fz, 1, np.empty_like(D))
        res.S[s:e] = S
        flat = idx.ravel()
        if update:
            U = WM * (S ** -fz.update_power)[:, None]
            sums = sparse_sums(idx, U, data.X1[s:e], c)
            res.num += sums[:, :d]
            res.den += sums[:, d]
            objective += float(record_objective(dmin, S, fz).sum())
        if draw is not None:
            cum = np.cumsum(W, axis=1)
            r = draw.random(e - s) * S
            pick = np.minimum((cum < r[:, None]).sum(axis=1), p - 1)
            res.labels[s:e] = np.take_along_axis(idx, pick[:, None], axis=1)[:, 0]
        if colsum or store:
            W *= (1.0 / S)[:, None]
            if colsum:
                res.colsum += np.bincount(flat, weights=W.ravel(), minlength=c)
            if store:
                res.top_indices[s:e] = idx
                res.top_values[s:e] = W
        if progress is not None:
            progress((bi + 1) / n_blocks)
    res.objective = objective
    return res


# ---------------------------------------------------------------------------
# Choosing p: an exact audit on a sample of records
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Audit:
    """Exact dropped mass on a random sample of records, for each ``p``.

    ``dropped[j, p - 1]`` is the probability mass record ``j`` of the sample
    loses when it keeps only its ``p`` nearest centres (``p <= max_p``).
    """

    sample: np.ndarray  # record indices
    dropped: np.ndarray  # (n_sample, max_p)

    @property
    def max_p(self) -> int:
        return int(self.dropped.shape[1])

    def needed(self, tol: float) -> int | None:
        """The smallest ``p`` whose dropped mass is ``<= tol`` on every sampled
        record, or ``None`` when no ``p <= max_p`` reaches it."""
        ok = np.all(self.dropped <= tol, axis=0)
        if not ok.any():
            return None
        return int(np.argmax(ok)) + 1

    def at(self, p: int) -> np.ndarray:
        """The sampled records' dropped mass with ``p`` centres kept."""
        p = int(min(max(p, 1), self.max_p))
        return self.dropped[:, p - 1]


def audit_tail(data: _Data, V: np.ndarray, fz: Fuzzifier, max_p: int, rng: np.random.Generator, *,
               sample_size: int, budget_bytes: float, tree: cKDTree | None = None,
               workers: int = -1) -> Audit:
    """Exact tail mass on a random sample: the exact normaliser over all ``c``
    centres (one exact pass on the sample) and the sorted top ``max_p``
    memberships (a KD-tree query), so that ``dropped(p) = 1 - sum of the
    top p memberships``."""
    c = V.shape[0]
    max_p = int(min(max_p, c))
    n = data.n
    if sample_size >= n:
        sample = np.arange(n)
    else:
        sample = np.sort(rng.choice(n, size=sample_size, replace=False))
    sub = _Data(data.X[sample])
    full = exact_pass(sub, V, fz, budget_bytes=budget_bytes, update=False)
    tree = tree if tree is not None else cKDTree(V)
    D, _ = query(tree, sub.X, max_p, workers)
    u = membership_values(D, fz, S=full.S)
    dropped = np.clip(1.0 - np.cumsum(u, axis=1), 0.0, 1.0)
    return Audit(sample=sample, dropped=dropped)


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
