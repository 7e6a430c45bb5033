"""Density-peak clustering after the densities and deltas
(:mod:`privclust_plugins._dpc`): the decision graph's centres (gamma, the
ADPC boundary, top-k and thresholds), the assignment along the parents, the
halo, and the reachability merges of the E-graph. Pure numpy/scipy, no
privclust; every pair search goes through :class:`~privclust_plugins._dpc.PairIndex`,
within :data:`~privclust_plugins._dpc.PAIR_BUDGET`."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ._dpc import PAIR_BUDGET, PairIndex, unique_points

# ---------------------------------------------------------------------------
# Centres
# ---------------------------------------------------------------------------


def minmax(v: np.ndarray) -> np.ndarray:
    """``(v - min) / (max - min)``; all zeros when ``v`` is constant."""
    v = np.asarray(v, dtype=float)
    lo, hi = v.min(), v.max()
    return (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)


def normalised_gamma(rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The AdDPC decision value ``gamma* = minmax(minmax(rho) * minmax(delta))``."""
    return minmax(minmax(rho) * minmax(delta))


def addpc_boundary(gamma_star: np.ndarray, eta: float = 1.001, i_max: int = 50) -> tuple[int, np.ndarray, np.ndarray]:
    """The AdDPC number of centres (spec formulas (5)-(6), the ``slope`` reading).

    Sort ``gamma*`` decreasingly (stable), ``k_i = g_i - g_{i+1}``,
    ``kappa_i = (i - eta) k_i`` for ``i = 1 .. min(i_max, n - 2)`` and
    ``m = argmax kappa`` (the first on ties). Returns ``(m, kappa, order)``.
    """
    n = gamma_star.size
    order = np.argsort(-gamma_star, kind="stable")
    if n < 2:  # one candidate (a grid of one node): it is the only centre, there is no gap to read
        return n, np.zeros(0), order
    g = gamma_star[order]
    top = max(1, min(i_max, n - 2))
    i = np.arange(1, top + 1)
    slope = g[:top] - g[1:top + 1]
    kappa = (i - eta) * slope
    m = int(np.argmax(kappa)) + 1
    return m, kappa, order


def top_k_centres(gamma: np.ndarray, k: int, top: int) -> np.ndarray:
    """The ``k`` points of largest ``gamma`` (stable order), always including ``top``."""
    order = np.argsort(-np.asarray(gamma, dtype=float), kind="stable")
    chosen = order[:k]
    if top not in chosen:
        chosen = np.concatenate([[top], chosen[:k - 1]])
        chosen = chosen[np.argsort(-gamma[chosen], kind="stable")]
    return chosen


def threshold_centres(rho: np.ndarray, delta: np.ndarray, gamma: np.ndarray, rho_min: float,
                      delta_min: float) -> np.ndarray:
    """Points with ``rho > rho_min`` and ``delta > delta_min``, by decreasing gamma."""
    chosen = np.flatnonzero((rho > rho_min) & (delta > delta_min))
    return chosen[np.argsort(-gamma[chosen], kind="stable")]


def assign(parent: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Label ``c`` for the ``c``-th centre and, for every other point, the label
    of its parent (following parents until a centre); ``-1`` where the chain
    ends without reaching a centre."""
    n = parent.size
    nxt = np.where(parent >= 0, parent, np.arange(n))
    nxt[centres] = centres
    for _ in range(64):
        step = nxt[nxt]
        if np.array_equal(step, nxt):
            break
        nxt = step
    else:  # pragma: no cover - chains are at most n long; 64 doublings cover 2**64
        raise RuntimeError("parent chains did not converge")
    label_of = np.full(n, -1, dtype=np.int64)
    label_of[centres] = np.arange(centres.size)
    return label_of[nxt]


def halo(X: np.ndarray, rho: np.ndarray, labels: np.ndarray, dc: float, *,
         index: PairIndex | None = None, budget: int = PAIR_BUDGET) -> np.ndarray:
    """Rodriguez-Laio halo: points of a cluster whose density is below the
    cluster's border density (the largest ``(rho_i + rho_j) / 2`` over pairs
    with ``d_ij <= d_c`` across the cluster's boundary)."""
    n = X.shape[0]
    k = int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0
    border = np.full(max(k, 1), -np.inf)
    index = index if index is not None else PairIndex(X, dc / 2.0)
    lab = labels[index.order]
    rp = rho[index.order]
    for _a, _b, _tot, q, j, d2 in index.pairs(dc, half=True, budget=budget):
        cross = (np.sqrt(d2) <= dc) & (lab[q] != lab[j]) & (lab[q] >= 0) & (lab[j] >= 0)
        if not cross.any():
            continue
        q, jj = q[cross], j[cross]
        avg = (rp[q] + rp[jj]) / 2.0
        np.maximum.at(border, lab[q], avg)
        np.maximum.at(border, lab[jj], avg)
    out = np.zeros(n, dtype=bool)
    valid = labels >= 0
    out[valid] = rho[valid] < border[labels[valid]]
    return out


# ---------------------------------------------------------------------------
# Reachability (the E-graph) and the merges
# ---------------------------------------------------------------------------


def components(X: np.ndarray, radius: float, *, unique: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
               index: PairIndex | None = None, budget: int = PAIR_BUDGET) -> np.ndarray:
    """Connected components of the graph ``{(i, j): d_ij <= radius}``.

    Built block by block: the edges between different current components are
    held up to ``8 x budget`` at a time, then contracted onto the component
    labels (``scipy.sparse.csgraph.connected_components``), so memory stays
    bounded whatever the number of edges. ``index`` may be a
    :class:`PairIndex` of the distinct rows (reused when its cells fit).
    """
    U, inv, _ = unique if unique is not None else unique_points(X)
    m = U.shape[0]
    # An index of the distinct rows built for another radius serves when its
    # cells are not much wider than this radius (else the windows overhang).
    if index is None or not index.sweep or index.cell > radius:
        index = PairIndex(U, radius / 2.0)
    comp = np.arange(m)
    pending_i: list[np.ndarray] = []
    pending_j: list[np.ndarray] = []
    held = 0

    def contract(comp: np.ndarray) -> np.ndarray:
        ci, cj = comp[np.concatenate(pending_i)], comp[np.concatenate(pending_j)]
        graph = coo_matrix((np.ones(ci.size, dtype=np.int8), (ci, cj)), shape=(m, m)).tocsr()
        _, lab = connected_components(graph, directed=False)
        return lab[comp]

    for _a, _b, _tot, q, j, d2 in index.pairs(radius, half=True, budget=budget):
        keep = np.sqrt(d2) <= radius
        keep &= comp[q] != comp[j]
        if not keep.any():
            continue
        pending_i.append(q[keep])
        pending_j.append(j[keep])
        held += pending_i[-1].size
        if held >= 8 * budget:  # contract the edges held so far onto the components
            comp = contract(comp)
            pending_i, pending_j, held = [], [], 0
    if held:
        comp = contract(comp)
    out = np.empty(m, dtype=np.int64)
    out[index.order] = comp
    return out[inv]


def merge_reachable(labels: np.ndarray, comp: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The fixed point of DP-DPCL Step 8: every point takes the label of the
    densest point (smallest rank) of its E-component."""
    ncomp = int(comp.max()) + 1
    best = np.full(ncomp, rank.size, dtype=np.int64)
    np.minimum.at(best, comp, rank)
    order = np.argsort(rank)
    head = order[best]
    return labels[head[comp]]


def merged_heads(labels: np.ndarray, centres: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The centre of every label after a merge: for each label ``L`` that
    points still carry, its densest point (smallest ``rank``), which is the
    densest of the centres merged into it, or, when the merge left ``L`` on
    points none of whose centres kept it (a component whose densest point
    took ``L`` while centre ``L`` joined another cluster), the densest of
    those points; ``centres[L]`` for a label no point carries."""
    heads = np.asarray(centres).copy()
    valid = labels >= 0
    if valid.any():
        points = np.flatnonzero(valid)
        by_rank = points[np.lexsort((rank[points], labels[points]))]  # by label, densest first
        first = np.r_[True, labels[by_rank][1:] != labels[by_rank][:-1]]
        heads[labels[by_rank][first]] = by_rank[first]
    return heads


def merge_centres(labels: np.ndarray, centres: np.ndarray, comp: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """DP-rcCFSFDP's reachable centres: clusters whose centres share an
    E-component join the cluster of the densest of those centres."""
    cc = comp[centres]
    target = np.arange(centres.size)
    for c in np.unique(cc):
        members = np.flatnonzero(cc == c)
        if members.size > 1:
            target[members] = members[np.argmin(rank[centres[members]])]
    out = labels.copy()
    valid = labels >= 0
    out[valid] = target[labels[valid]]
    return out


def compress_labels(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber labels ``>= 0`` to ``0 .. k-1`` keeping their order; returns
    ``(new_labels, kept_old_labels)``."""
    kept = np.unique(labels[labels >= 0])
    lookup = np.full(int(labels.max()) + 2 if labels.size else 1, -1, dtype=np.int64)
    lookup[kept] = np.arange(kept.size)
    out = np.where(labels >= 0, lookup[np.maximum(labels, 0)], -1)
    return out, kept
