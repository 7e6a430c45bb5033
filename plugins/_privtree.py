"""Numerical kernels of ``dp-density``: PrivTree on the unit cube, leaf
adjacency, a smoothed leaf density and persistence-based (ToMATo-style)
clustering of the released leaves.

Nothing here draws randomness: the noise arrives as arguments (drawn by a
noise mechanism of the host), so every function is a deterministic function
of its inputs. Only :func:`privtree` and :func:`leaf_of` read the records;
everything after them reads the released leaves only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.spatial import cKDTree


@dataclass(frozen=True)
class Tree:
    """The leaves of a binary space partition of ``[0, 1]^d``.

    Splits are at the midpoint of the node, along dimension ``depth % d``, so
    a node is defined by its depth and its path; ``lo``/``hi`` are its box.
    Leaves are listed in a canonical order (level by level, and within a level
    in the order of the parent's box), which is a function of the tree alone.
    """

    lo: np.ndarray  # (L, d)
    hi: np.ndarray  # (L, d)
    depth: np.ndarray  # (L,)
    counts: np.ndarray  # (L,) exact leaf counts (never released as such)
    nodes: int  # number of nodes examined (noise draws used)
    truncated: bool  # whether the node pool ran out


def privtree(unit: np.ndarray, noise: np.ndarray, *, theta: float, delta: float, max_depth: int,
             start_depth: int = 0) -> Tree:
    """PrivTree (Zhang, Xiao & Xie, SIGMOD 2016, Algorithm 2) with fanout 2,
    run in every cell of a public uniform grid.

    The nodes above ``start_depth`` are split unconditionally (a public grid
    of ``2^start_depth`` cells; no noise is used). From there, PrivTree runs
    in each cell as in its own root: a node ``v`` at depth ``k`` with count
    ``c`` has the biased count ``b = max(c - (k - start_depth) delta,
    theta - delta)`` and is split when ``b + noise > theta``. The cells are
    disjoint, so one record changes the run of one cell only (parallel
    composition: the whole partition is as private as one PrivTree). The
    noise of the ``i``-th examined node is ``noise[i]`` (Laplace with scale
    ``lambda = 3 / eps_tree`` for fanout 2; drawn by the caller). Nodes at
    ``max_depth``, and every node once ``noise`` is used up, are leaves
    (public stopping rules: they depend only on the released structure).
    """
    n, d = unit.shape
    pool = noise.size
    # active records and the node (within the current level) each one is in
    idx = np.arange(n)
    node_of = np.zeros(n, dtype=np.int64)
    lo = np.zeros((1, d))
    hi = np.ones((1, d))
    leaves_lo, leaves_hi, leaves_depth, leaves_count = [], [], [], []
    used = 0
    truncated = False
    depth = 0
    while lo.shape[0]:
        m = lo.shape[0]
        counts = np.bincount(node_of, minlength=m).astype(float)
        if depth < min(start_depth, max_depth):
            split = np.ones(m, dtype=bool)
        elif depth >= max_depth or used + m > pool:
            split = np.zeros(m, dtype=bool)
            truncated = truncated or (depth < max_depth)
        else:
            biased = np.maximum(counts - (depth - start_depth) * delta, theta - delta)
            split = biased + noise[used:used + m] > theta
            used += m
        leaf = ~split
        if leaf.any():
            leaves_lo.append(lo[leaf])
            leaves_hi.append(hi[leaf])
            leaves_depth.append(np.full(int(leaf.sum()), depth))
            leaves_count.append(counts[leaf])
        if not split.any():
            break
        # children of the split nodes, in the order of their parents
        rank = np.cumsum(split) - 1
        dim = depth % d
        mid = 0.5 * (lo[split, dim] + hi[split, dim])
        clo = np.repeat(lo[split], 2, axis=0)
        chi = np.repeat(hi[split], 2, axis=0)
        chi[0::2, dim] = mid
        clo[1::2, dim] = mid
        keep = split[node_of]
        idx, node_of = idx[keep], node_of[keep]
        r = rank[node_of]
        upper = unit[idx, dim] >= mid[r]
        node_of = 2 * r + upper
        lo, hi = clo, chi
        depth += 1
    return Tree(lo=np.concatenate(leaves_lo), hi=np.concatenate(leaves_hi),
                depth=np.concatenate(leaves_depth).astype(np.int64), counts=np.concatenate(leaves_count),
                nodes=used, truncated=truncated)


def leaf_of(unit: np.ndarray, tree: Tree, block: int = 500_000) -> np.ndarray:
    """The leaf each record falls in, by the tree's own rule (a record at a
    midpoint goes to the upper half). The leaves of one depth have the same
    shape and sit on the dyadic grid of that depth, so a record's cell at
    that depth is ``floor(x * 2^s)`` per column (exact in floating point) and
    a sorted search among that depth's leaves finds it, if it is a leaf."""
    n = unit.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    for k in np.unique(tree.depth):
        members = np.flatnonzero(tree.depth == k)
        splits = np.rint(-np.log2(tree.hi[members[0]] - tree.lo[members[0]])).astype(np.int64)
        sizes = np.left_shift(np.int64(1), splits)
        radix = np.concatenate([[1], np.cumprod(sizes[:-1])]).astype(np.int64)
        keys = (np.rint(tree.lo[members] * sizes).astype(np.int64) * radix).sum(axis=1)
        order = np.argsort(keys, kind="stable")
        keys, members = keys[order], members[order]
        for start in range(0, n, block):
            part = slice(start, min(n, start + block))
            todo = out[part] < 0
            if not todo.any():
                continue
            cell = np.minimum(np.floor(unit[part][todo] * sizes).astype(np.int64), sizes - 1)
            key = (cell * radix).sum(axis=1)
            pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
            hit = keys[pos] == key
            idx = np.flatnonzero(todo)[hit]
            view = out[part]
            view[idx] = members[pos[hit]]
            out[part] = view
    if (out < 0).any():  # cannot happen for points in the unit cube: the leaves tile it
        raise AssertionError("dp-density: a record fell in no leaf of the partition")
    return out


def _depth_classes(lo: np.ndarray, hi: np.ndarray,
                   depth: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, np.ndarray]]:
    """The leaves' centres, the leaves of each depth (ascending), and each
    depth's half-widths per column: leaves of one depth have one shape."""
    members = {int(k): np.flatnonzero(depth == k) for k in np.unique(depth)}
    half = {k: 0.5 * (hi[m[0]] - lo[m[0]]) for k, m in members.items()}
    return 0.5 * (lo + hi), members, half


def adjacency(tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``, ``i < j``, of leaves whose closed boxes touch (share
    a face, an edge or a corner). Leaves of the same depth have the same
    shape, so for each pair of depth classes two boxes touch exactly when the
    Chebyshev distance of their centres, scaled per dimension by the sum of
    their half-widths, is at most 1."""
    centres, members, half = _depth_classes(tree.lo, tree.hi, tree.depth)
    classes = list(members)
    rows, cols = [], []
    for a_i, a in enumerate(classes):
        ma = members[a]
        for b in classes[a_i:]:
            mb = members[b]
            scale = half[a] + half[b]
            ta = cKDTree(centres[ma] / scale)
            if a == b:
                pairs = ta.query_pairs(1.0 + 1e-9, p=np.inf, output_type="ndarray")
                if pairs.size:
                    rows.append(ma[pairs[:, 0]])
                    cols.append(ma[pairs[:, 1]])
            else:
                tb = cKDTree(centres[mb] / scale)
                sm = ta.sparse_distance_matrix(tb, 1.0 + 1e-9, p=np.inf, output_type="ndarray")
                if sm.size:
                    rows.append(ma[sm["i"]])
                    cols.append(mb[sm["j"]])
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    i = np.concatenate(rows)
    j = np.concatenate(cols)
    lo_, hi_ = np.minimum(i, j), np.maximum(i, j)
    return lo_.astype(np.int64), hi_.astype(np.int64)


def coarsen(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray,
            max_depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The partition seen no deeper than ``max_depth``: every leaf deeper
    than that is merged into its ancestor at ``max_depth`` (after ``max_depth``
    midpoint splits along the columns in turn, column ``j`` has been split
    ``max_depth // d + (j < max_depth % d)`` times). Returns the cells' boxes
    and depths (the shallower leaves first, in their order, then the merged
    cells by their lower corner: a function of the partition alone), the
    cell of every leaf, and how many leaves each cell holds."""
    L, d = lo.shape
    deep = depth > max_depth
    if not deep.any():
        return lo, hi, depth, np.arange(L), np.ones(L)
    splits = np.array([max_depth // d + (1 if j < max_depth % d else 0) for j in range(d)], dtype=float)
    size = np.exp2(-splits)
    anc_lo = np.floor(lo[deep] / size) * size  # exact: powers of two
    cells, inverse = np.unique(anc_lo, axis=0, return_inverse=True)
    shallow = np.flatnonzero(~deep)
    group = np.empty(L, dtype=np.int64)
    group[shallow] = np.arange(shallow.size)
    group[deep] = shallow.size + inverse.reshape(-1)
    new_lo = np.concatenate([lo[shallow], cells])
    new_hi = np.concatenate([hi[shallow], cells + size])
    new_depth = np.concatenate([depth[shallow], np.full(cells.shape[0], max_depth, dtype=depth.dtype)])
    return new_lo, new_hi, new_depth, group, np.bincount(group, minlength=new_lo.shape[0]).astype(float)


def bandwidth(n_est: float, d: int) -> float:
    """The half-width of the density kernel, as a fraction of each column's
    public range: Silverman's rate ``(4 / (d + 2))^(1 / (d + 4))
    n^(-1 / (d + 4))`` (more records resolve finer structure) times
    :data:`BANDWIDTH_SCALE`. A public function of the noisy count and the
    number of columns; it does not depend on epsilon."""
    n = max(float(n_est), 1.0)
    return BANDWIDTH_SCALE * (4.0 / (d + 2)) ** (1.0 / (d + 4)) * n ** (-1.0 / (d + 4))


#: The scale of :func:`bandwidth`: 0.0147 of the range at 1e5 records in 2 columns. Silverman's own factor
#: for a box kernel would be sqrt(3) times the data's standard deviation; this public constant was set on the
#: shape sets of the benchmark (never read from the data of a run).
BANDWIDTH_SCALE = 0.1


#: Budget of kernel pairs per leaf that sets the finest useful leaf (:func:`finest_splits`).
PAIRS_PER_LEAF = 100


def finest_splits(h: float, d: int) -> int:
    """The most splits per column worth making: a leaf narrower than
    ``h / m`` changes the kernel's estimate little (it averages over ``2 h``)
    and costs pairs, so the tree stops there, with ``m`` the largest integer
    for which a leaf's kernel meets at most about :data:`PAIRS_PER_LEAF`
    leaves (``(2 m + 2)^d <= PAIRS_PER_LEAF``), but at least 1: 49 in one
    column, 4 in two, 1 from three on (where the bound is ``4^d`` instead,
    as many as the touching leaves of the level-set graph). A public function
    of ``h`` and ``d``."""
    m = max(1, math.floor((PAIRS_PER_LEAF ** (1.0 / d) - 2.0) / 2.0))
    return max(1, math.ceil(math.log2(m / h)))


#: Largest number of (leaf, leaf) pairs :func:`box_density` holds at once (a bound on its memory).
MAX_PAIRS = 1 << 22


def box_density(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, noisy: np.ndarray, noise_scale: float,
                h: float, max_pairs: int = MAX_PAIRS, merged: np.ndarray | None = None,
                sampling: bool = False) -> tuple[np.ndarray, ...]:
    """The density at every leaf, by a box kernel: the noisy mass in the box
    centred on the leaf with half-width ``max(h, the leaf's half-width)`` in
    every column (clipped to the unit cube), each leaf's mass taken as uniform
    in its box, over that box's volume. A leaf finer than the kernel is
    averaged with its neighbours out to ``h``, so once PrivTree's leaves are
    finer than ``h`` (large epsilon) the estimate no longer depends on them; a
    leaf coarser than the kernel keeps its own density (the partition already
    averages there). Returns the density and its noise standard deviation
    (Laplace noise of scale ``noise_scale`` on every count, independent:
    ``sqrt(2) b sqrt(sum of squared weights) / volume``; a cell of
    :func:`coarsen` that sums ``merged[j]`` noisy counts carries that many
    times the variance). The overlapping pairs are visited in blocks of at
    most about ``max_pairs``. With ``sampling``, also the standard deviation
    of the records' own sampling noise in that estimate (Poisson: each leaf's
    count has variance its count, read as its noisy count floored at 0)."""
    L = noisy.size
    volume = np.prod(hi - lo, axis=1)
    centre = 0.5 * (lo + hi)
    half = np.maximum(h, 0.5 * (hi - lo))
    qlo, qhi = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    num, var, svar = np.zeros(L), np.zeros(L), np.zeros(L)
    count = np.maximum(noisy, 0.0)
    for i, j in _overlapping(lo, hi, depth, h, max_pairs):
        inter = np.prod(np.clip(np.minimum(qhi[i], hi[j]) - np.maximum(qlo[i], lo[j]), 0.0, None), axis=1)
        weight = inter / volume[j]
        np.add.at(num, i, weight * noisy[j])
        np.add.at(var, i, weight * weight * (1.0 if merged is None else merged[j]))
        if sampling:
            np.add.at(svar, i, weight * weight * count[j])
    qvol = np.prod(qhi - qlo, axis=1)
    out = num / qvol, math.sqrt(2.0) * noise_scale * np.sqrt(var) / qvol
    return (*out, np.sqrt(svar) / qvol) if sampling else out


def _overlapping(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, h: float,
                 max_pairs: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Blocks of pairs ``(i, j)`` (both orders, and ``(i, i)``) where leaf
    ``j``'s box meets the interior of leaf ``i``'s kernel box
    (:func:`box_density`). As in :func:`adjacency`, leaves of one depth have
    one shape, so for each pair of depth classes the test is a Chebyshev
    distance of the centres, scaled per column by the sum of the two
    half-widths, below 1; a leaf of class ``a`` meets at most
    ``prod(scale / half_b + 1)`` leaves of class ``b``, which sets the block
    size."""
    centres, members, half = _depth_classes(lo, hi, depth)
    for a in members:
        for b in members:
            scale = np.maximum(h, half[a]) + half[b]
            tb = cKDTree(centres[members[b]] / scale)
            per_leaf = float(np.prod(np.ceil(scale / half[b]) + 1.0))
            block = int(max(1, min(members[a].size, max_pairs // per_leaf)))
            for start in range(0, members[a].size, block):
                rows = members[a][start:start + block]
                found = cKDTree(centres[rows] / scale).sparse_distance_matrix(
                    tb, 1.0 - 1e-12, p=np.inf, output_type="ndarray")
                if found.size:
                    yield rows[found["i"]], members[b][found["j"]]


@dataclass(frozen=True)
class LevelTree:
    """Result of :func:`level_set_tree`: the condensed cluster tree of the
    leaf graph (as in HDBSCAN, Campello, Moulavi & Sander 2013, with density
    levels in place of distances). ``order`` lists the live nodes children
    first; the branches of a component that is absorbed hang from the node
    that absorbs it."""

    leaf_node: np.ndarray  # (L,) the deepest live node each leaf belongs to
    parent: np.ndarray  # (K,) parent node (-1: a root)
    split: np.ndarray  # (K,) density level at which the node splits into its children (nan: no children)
    stability: np.ndarray  # (K,) excess of mass: sum_x m_x (min(f_x, split) - birth)
    mass: np.ndarray  # (K,) noisy mass of the node's leaves
    peak: np.ndarray  # (K,) the leaf of highest density in the node
    alive: np.ndarray  # (K,) False for components absorbed into another
    order: np.ndarray  # the live nodes, every child before its parent


def level_set_tree(f: np.ndarray, sigma: np.ndarray, noisy: np.ndarray, pairs: tuple[np.ndarray, np.ndarray], *,
                   z: float, min_mass: float, valley: float = 1.0, volume: np.ndarray | None = None,
                   min_excess: float = 0.0, excess_noise: float = 0.0, sampling: np.ndarray | None = None,
                   z_sampling: float = 0.0) -> LevelTree:
    """The level-set tree of the leaf densities ``f`` on the leaf graph.

    Leaves are visited by decreasing density (ties: leaf order) with a
    union-find. A leaf with no visited neighbour starts a component; else it
    joins its neighbours' components. Two components meeting at a saddle
    leaf ``s`` become the two children of a new node only when both are
    *significant*: noisy mass at least ``min_mass`` and a peak above the
    saddle by more than ``z sqrt(sigma_peak^2 + sigma_s^2)`` (noise alone
    rarely does that, see :func:`false_peak_z`) and the saddle at most
    ``valley`` times its peak (a real valley, not a shoulder); otherwise the less
    significant one is absorbed into the other at the saddle's level. With
    ``sampling`` (the records' own noise in ``f``), the peak must also clear
    ``z_sampling sqrt(sigma_peak^2 + sigma_s^2 + 2 sampling_s^2)`` (normal
    tail; with no peak both leaves would sit at the saddle's density); with
    ``volume``, the component's smoothed mass above the saddle, ``sum vol_x
    (f_x - f_s)``, must be at least ``max(min_excess, z excess_noise
    sqrt(its leaves))``.
    """
    L = f.size
    order = np.lexsort((np.arange(L), -f))
    nbr_ptr, nbr = _csr(pairs, L)
    uf = np.arange(L)
    visited = np.zeros(L, dtype=bool)
    m = np.maximum(noisy, 0.0)
    comp_node = np.full(L, -1, dtype=np.int64)
    comp_mass = np.zeros(L)
    comp_peak = np.arange(L)
    vol = np.zeros(L) if volume is None else np.asarray(volume, dtype=float)
    fvol = f * vol
    comp_vol = np.zeros(L)  # the volume of a component's leaves and the integral of f over them
    comp_fvol = np.zeros(L)
    comp_n = np.zeros(L)  # its number of leaves
    A: list[float] = []
    M: list[float] = []
    parent: list[int] = []
    birth: list[float] = []
    split: list[float] = []
    peak: list[int] = []
    redirect: list[int] = []
    kids: list[list[int]] = []
    leaf_node = np.full(L, -1, dtype=np.int64)

    def new_node(pk: int) -> int:
        for lst, val in ((A, 0.0), (M, 0.0), (parent, -1), (birth, -math.inf), (split, math.nan), (peak, pk)):
            lst.append(val)  # type: ignore[arg-type]
        redirect.append(len(A) - 1)
        kids.append([])
        return len(A) - 1

    def find(x: int) -> int:
        r = x
        while uf[r] != r:
            r = int(uf[r])
        while uf[x] != r:
            uf[x], x = r, int(uf[x])
        return r

    def significant(r: int, v: int) -> bool:
        pk = comp_peak[r]
        dp = math.hypot(sigma[pk], sigma[v])
        gap = z * dp
        if sampling is not None:  # both noises together, read as normal (the DP part alone keeps its Laplace z);
            # the records' noise as it would be with no peak: both leaves at the saddle's density
            gap = max(gap, z_sampling * math.hypot(dp, math.sqrt(2.0) * sampling[v]))
        if not (comp_mass[r] >= min_mass and f[pk] - f[v] > gap and f[v] <= valley * f[pk]):
            return False
        if volume is None:
            return True
        excess = comp_fvol[r] - f[v] * comp_vol[r]  # the smoothed mass above the saddle's level
        return bool(excess >= max(min_excess, z * excess_noise * math.sqrt(comp_n[r])))

    for v in order:
        v = int(v)
        fv = float(f[v])
        visited[v] = True
        nb = nbr[nbr_ptr[v]:nbr_ptr[v + 1]]
        roots = sorted({find(int(u)) for u in nb[visited[nb]]}, key=lambda r: (-f[comp_peak[r]], comp_peak[r]))
        if not roots:
            comp_node[v] = new_node(v)
            g = v
        else:
            g = roots[0]
            for r in roots[1:]:
                sig_g, sig_r = significant(g, v), significant(r, v)
                if sig_g and sig_r:  # a split: both become children of a new node
                    node = new_node(comp_peak[g])
                    split[node] = fv
                    for c in (comp_node[g], comp_node[r]):
                        parent[c] = node
                        birth[c] = fv
                        M[node] += M[c]
                        A[node] += M[c] * fv
                        kids[node].append(int(c))
                    uf[r] = g
                    comp_node[g] = node
                    comp_mass[g] += comp_mass[r]
                    comp_vol[g] += comp_vol[r]
                    comp_fvol[g] += comp_fvol[r]
                    comp_n[g] += comp_n[r]
                    continue
                # the less significant component is absorbed (ties: the lighter one)
                if sig_g != sig_r:
                    small, big = (r, g) if sig_g else (g, r)
                else:
                    small, big = (r, g) if comp_mass[r] <= comp_mass[g] else (g, r)
                q, node = comp_node[small], comp_node[big]
                A[node] += M[q] * fv
                M[node] += M[q]
                redirect[q] = node
                for ch in kids[q]:  # the absorbed component's own branches hang from the survivor
                    parent[ch] = node
                kids[node].extend(kids[q])
                kids[q] = []
                uf[small] = big
                comp_mass[big] += comp_mass[small]
                comp_vol[big] += comp_vol[small]
                comp_fvol[big] += comp_fvol[small]
                comp_n[big] += comp_n[small]
                g = big
        uf[v] = g
        comp_mass[g] += m[v]
        comp_vol[g] += vol[v]
        comp_fvol[g] += fvol[v]
        comp_n[g] += 1
        node = comp_node[g]
        A[node] += m[v] * fv
        M[node] += m[v]
        leaf_node[v] = node
    # several components left (a graph that is not connected): one root above them
    tops = sorted({int(comp_node[find(i)]) for i in range(L)})
    if len(tops) > 1:
        low = float(f.min())
        node = new_node(int(peak[tops[0]]))
        split[node] = low
        for c in tops:
            parent[c] = node
            birth[c] = low
            M[node] += M[c]
            A[node] += M[c] * low
            kids[node].append(c)
    K = len(A)
    red = np.asarray(redirect, dtype=np.int64)
    for _ in range(K):  # resolve chains of absorptions
        nxt = red[red]
        if np.array_equal(nxt, red):
            break
        red = nxt
    alive = red == np.arange(K)
    # children before parents (a node absorbed later may be older than the branches it receives)
    order: list[int] = []  # type: ignore[no-redef]
    stack = [(c, False) for c in range(K) if alive[c] and parent[c] < 0]
    while stack:
        c, done = stack.pop()
        if done:
            order.append(c)  # type: ignore[attr-defined]
            continue
        stack.append((c, True))
        stack.extend((k, False) for k in kids[c] if alive[k])
    Aa, Ma, b = np.asarray(A), np.asarray(M), np.asarray(birth)
    stab = np.where(np.isfinite(b), Aa - Ma * np.where(np.isfinite(b), b, 0.0), np.inf)
    return LevelTree(leaf_node=red[leaf_node], parent=np.asarray(parent, dtype=np.int64), split=np.asarray(split),
                     stability=stab, mass=Ma, peak=np.asarray(peak, dtype=np.int64), alive=alive,
                     order=np.asarray(order, dtype=np.int64))


def _leaf_nodes_below(tree: LevelTree) -> list[np.ndarray]:
    """For every node, the leaves of the partition that lie in it (its own and its live descendants')."""
    K = tree.parent.size
    ancestors = [[] for _ in range(K)]  # type: list[list[int]]
    for c in tree.order[::-1]:  # parents first
        c = int(c)
        p = int(tree.parent[c])
        ancestors[c] = ([c] + ancestors[p]) if p >= 0 else [c]
    rows: list[list[int]] = [[] for _ in range(K)]
    for leaf, node in enumerate(tree.leaf_node):
        for a in ancestors[int(node)]:
            rows[a].append(leaf)
    return [np.asarray(r, dtype=np.int64) for r in rows]


def _upper_moments(f: np.ndarray, lo: np.ndarray, hi: np.ndarray, leaves: np.ndarray,
                   level: float) -> tuple[np.ndarray, float] | None:
    """The second moments about its centroid (a ``d x d`` matrix) and the volume of the part of ``leaves`` above
    density ``level``, each leaf's box uniform; None when no leaf is above it."""
    up = leaves[f[leaves] > level]
    if up.size == 0:
        return None
    width = hi[up] - lo[up]
    vol = np.prod(width, axis=1)
    total = float(vol.sum())
    centre = 0.5 * (lo[up] + hi[up])
    dc = centre - (centre * vol[:, None]).sum(axis=0) / total
    second = (np.einsum("l,li,lj->ij", vol, dc, dc) + np.diag((vol[:, None] * width ** 2).sum(axis=0) / 12.0)) / total
    return second, total


def _ball(d: int) -> float:
    """The volume of the unit ball in ``d`` dimensions."""
    return math.pi ** (d / 2.0) / math.gamma(d / 2.0 + 1.0)


def roundness(f: np.ndarray, lo: np.ndarray, hi: np.ndarray, leaves: np.ndarray, level: float) -> float:
    """How far the part of ``leaves`` above density ``level`` (the upper level set, each leaf's box uniform) is
    from a ball: its mean squared distance from its centroid over that of a ball of the same volume,
    ``d / (d + 2) r^2`` with ``c_d r^d`` the volume (1 for a ball, ``(1 + a^2) / (2 a)`` for a disc stretched
    ``a`` times; larger for a crescent or a ring). Infinite when no leaf is above ``level``."""
    moments = _upper_moments(f, lo, hi, leaves, level)
    if moments is None:
        return math.inf
    second, total = moments
    d = lo.shape[1]
    radius2 = (total / _ball(d)) ** (2.0 / d)
    return float(np.trace(second)) / (d / (d + 2.0) * radius2)


def ellipticity(f: np.ndarray, lo: np.ndarray, hi: np.ndarray, leaves: np.ndarray, level: float) -> float:
    """How far the part of ``leaves`` above density ``level`` is from an ellipsoid: the volume of the uniform
    ellipsoid with the same second moments over its own volume (1 for any ellipsoid, the least any shape reaches;
    larger for a crescent, a ring or a dumbbell). Infinite when no leaf is above ``level``."""
    moments = _upper_moments(f, lo, hi, leaves, level)
    if moments is None:
        return math.inf
    second, total = moments
    d = lo.shape[1]
    return _ball(d) * (d + 2.0) ** (d / 2.0) * math.sqrt(max(float(np.linalg.det(second)), 0.0)) / total


def round_splits(tree: LevelTree, f: np.ndarray, lo: np.ndarray, hi: np.ndarray, max_roundness: float,
                 shape: Callable[..., float] = roundness, whole: float | None = None) -> np.ndarray:
    """The nodes whose children are all round blobs at the node's split level (``shape``, :func:`roundness` by
    default, at most ``max_roundness``): two or more compact modes, as the components of a Gaussian mixture, not
    pieces of one elongated shape. With ``whole``, the node's own part above that level must also be at most
    ``whole`` (the blobs together, not an arc of them)."""
    K = tree.parent.size
    below = _leaf_nodes_below(tree)
    kids: list[list[int]] = [[] for _ in range(K)]
    for c in range(K):
        if tree.alive[c] and tree.parent[c] >= 0:
            kids[int(tree.parent[c])].append(c)
    out = np.zeros(K, dtype=bool)
    for c in range(K):
        if len(kids[c]) >= 2 and math.isfinite(tree.split[c]):
            out[c] = all(shape(f, lo, hi, below[k], float(tree.split[c])) <= max_roundness for k in kids[c]) and (
                whole is None or shape(f, lo, hi, below[c], float(tree.split[c])) <= whole)
    return out


def heirs(tree: LevelTree, small: float) -> np.ndarray:
    """The live nodes that stand in for a root: a child of a root (or of such a node) whose live siblings hold
    less than ``small`` noisy mass together. Splitting a small group off a shape does not make the rest of the
    shape a candidate cluster that :func:`select_clusters` could keep whole, as the root it was before the small
    group counted."""
    K = tree.parent.size
    kids: list[list[int]] = [[] for _ in range(K)]
    for c in range(K):
        if tree.alive[c] and tree.parent[c] >= 0:
            kids[int(tree.parent[c])].append(c)
    out = np.zeros(K, dtype=bool)
    for c in tree.order[::-1]:  # parents first
        c = int(c)
        p = int(tree.parent[c])
        if p >= 0 and (tree.parent[p] < 0 or out[p]):
            out[c] = sum(float(tree.mass[k]) for k in kids[p] if k != c) < small
    return out


def select_clusters(tree: LevelTree, split: np.ndarray | None = None) -> np.ndarray:
    """The nodes chosen as clusters by excess of mass (HDBSCAN's rule: a
    node is kept when its stability is at least that of the best selection
    below it; a root is never kept unless it has no children; a node in
    ``split``, or above one, is never kept whole)."""
    K = tree.parent.size
    alive = tree.alive
    children: list[list[int]] = [[] for _ in range(K)]
    for c in range(K):
        if alive[c] and tree.parent[c] >= 0:
            children[int(tree.parent[c])].append(c)
    best = np.zeros(K)
    selected = np.zeros(K, dtype=bool)
    forced = np.zeros(K, dtype=bool)  # a node in ``split``, or above one: never a cluster itself
    for c in tree.order:  # children before parents
        c = int(c)
        below = sum(best[k] for k in children[c])
        forced[c] = bool(split is not None and split[c]) or any(forced[k] for k in children[c])
        if not children[c] or (tree.parent[c] >= 0 and tree.stability[c] >= below and not forced[c]):
            best[c] = tree.stability[c] if tree.parent[c] >= 0 else below
            selected[c] = True
        else:
            best[c] = below
    # keep only the top-most selected nodes
    out = []
    for c in range(K):
        if not selected[c]:
            continue
        p = int(tree.parent[c])
        covered = False
        while p >= 0:
            if selected[p]:
                covered = True
                break
            p = int(tree.parent[p])
        if not covered:
            out.append(c)
    return np.array(sorted(out), dtype=np.int64)


def false_peak_z(n_leaves: int, false_peak: float) -> float:
    """``z`` such that the Laplace noise of one leaf count exceeds ``z``
    standard deviations (``sqrt 2 b``) with probability at most
    ``false_peak / n_leaves``: ``P(|Lap(b)| > z sqrt(2) b) = exp(-sqrt(2) z)``
    (a Bonferroni bound over the leaves)."""
    return math.log(max(n_leaves, 1) / false_peak) / math.sqrt(2.0)


def gaussian_z(n_leaves: int, false_peak: float) -> float:
    """``z`` such that a normal variable exceeds ``z`` standard deviations with probability at most
    ``false_peak / n_leaves`` (the records' sampling noise, Poisson counts read as normal; Bonferroni over the
    leaves as :func:`false_peak_z`)."""
    from scipy.special import ndtri

    return float(ndtri(1.0 - false_peak / max(n_leaves, 1)))


def _csr(pairs: tuple[np.ndarray, np.ndarray], L: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = pairs
    m = coo_matrix((np.ones(2 * i.size, dtype=np.int8), (np.concatenate([i, j]), np.concatenate([j, i]))),
                   shape=(L, L)).tocsr()
    m.sort_indices()
    return m.indptr, m.indices
