"""Numerical kernels of fuzzy c-means (FCM) and entropy-based FCM (EFCM): the
weights and the passes over the data.

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
* **candidate update** (:func:`privclust_plugins._fcm.candidate_pass`):
  the truncated pass of an iteration, over candidate lists that a
  triangle-inequality certificate keeps exact between KD-tree queries (in
  :mod:`privclust_plugins._fcm`, with the seeding and the alternating
  optimisation that use these passes).
* **audit** (:func:`audit_tail`): on a random sample of records, the exact
  normaliser ``S`` and the sorted top memberships, to choose the smallest
  ``p`` whose dropped mass stays below a tolerance.
"""


from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sparse
from scipy.spatial import cKDTree

__all__ = [
    "DIRECT_MAX_DIM",
    "TINY",
    "Audit",
    "Fuzzifier",
    "PassResult",
    "audit_tail",
    "block_rows",
    "exact_pass",
    "gather_distances",
    "membership_values",
    "query",
    "record_objective",
    "sparse_sums",
    "truncated_pass",
    "update_pass",
    "weights",
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

    @classmethod
    def started(cls, n: int, c: int, d: int, *, update: bool, colsum: bool) -> PassResult:
        """A result for a pass over ``n`` records and ``c`` centres in ``d`` dimensions: the per-record arrays
        allocated, the centre sums (``update``) and membership column sums (``colsum``) zeroed to add into."""
        res = cls(dmin=np.empty(n), S=np.empty(n))
        if update:
            res.num = np.zeros((c, d))
            res.den = np.zeros(c)
        if colsum:
            res.colsum = np.zeros(c)
        return res


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
    res = PassResult.started(n, c, d, update=update, colsum=colsum)
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
    res = PassResult.started(n, c, d, update=update, colsum=colsum)
    res.nearest = np.empty(n, dtype=np.int64)
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
