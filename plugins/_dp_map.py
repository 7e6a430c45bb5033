"""The clusters of dp-density's released map (issue 11; the automatic rules
of issue 26): post-processing of the DP map only, no record read.

From the leaves of the PrivTree partition and their noisy counts:
smoothed densities, the level-set tree and its significance tests
(:mod:`privclust_plugins._privtree`), the clusters the automatic rules
choose (the first pass, the ellipse pass, the coarse pass, the small-map
fallback) or the ``n_clusters`` the user asks for, and their centres. The
rules are described in :mod:`privclust_plugins.dp_density` and in
docs/density-peaks.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from . import _privtree

__all__ = ["cluster_map"]


#: The coarse pass of the automatic clusters: the same released map seen with a
#: kernel this many times wider (a public constant, set on the benchmark's
#: shape sets like the others) ...
COARSE_FACTOR = 4.0
#: ... whose valley rule may be this shallow: the wider kernel has smoothed
#: away bumps narrower than itself, so a valley that survives it is wide. It
#: holds when the user gives no ``valley`` too (issue 26 first read an unset
#: valley as 1, no ratio rule, in this pass as well: with neither the excess
#: test nor a valley it split two of the spiral's arms at epsilon 2, seed 2,
#: ARI 0.752; with 0.7, 1.000).
COARSE_VALLEY = 0.7
#: A coarse cluster lies inside a fine one when this share of its noisy mass does.
INSIDE_SHARE = 0.9


#: The smallest smoothed mass above the saddle that lets a branch split off, as a fraction of ``N~`` (the
#: excess test of :func:`_excess_rule`; set on the benchmark's shape sets at epsilon 1: 0.3% split flame and jain
#: along the bumps of their jitter, 1% merged d31's clusters and lost a 1:100 cluster; 0.6% kept all three).
EXCESS_FRACTION = 0.006
#: Children of a split are taken in place of their parent when every one of them is this round at the split's
#: level, or rounder (:func:`privclust_plugins._privtree.roundness`: 1 for a disc; the mixtures' components
#: measured 1.01 to 1.05, the pieces of flame, jain and pathbased 1.13 to 4.5).
ROUNDNESS_MAX = 1.2
#: Small groups split off a shape (together below this share of ``N~``, the smallest cluster of the fixed rules
#: before issue 26) leave the rest of the shape a root (:func:`privclust_plugins._privtree.heirs`): flame's
#: outlier group (0.9%) made flame's two classes one node that excess of mass kept whole (ARI 0.01 at epsilon 0.5).
HEIR_SHARE = 0.02
#: The ellipse pass (:func:`_ellipse_clusters`) reads the first pass's map and tests with the excess test at this
#: share of its threshold (0.3% of ``N~``) ...
ELLIPSE_EXCESS = 0.5
#: ... and keeps a split only when every child is this close to an ellipse at the split's level, or closer
#: (:func:`privclust_plugins._privtree.ellipticity`: 1 for an ellipse, 1.047 for a rectangle) ...
ELLIPSE_MAX = 1.075
#: ... and the two together too, up to this (two blobs meeting high make a peanut, a shape's pieces an arc). Both
#: set on the benchmark's mixture family, its shape sets and the jittered crescents of
#: ``test_jitter_around_scattered_points_does_not_split_a_shape``, where the margins are thin: a pair of Gaussians
#: 2.2 sd apart (one elongated mode) read 1.02-1.065 and its split with a third 1.24-1.46 together; the crescents'
#: pieces 1.03-1.10, and 1.30-2.57 together (one at 1.30 with both pieces under 1.04, at epsilon 4).
ELLIPSE_PAIR_MAX = 1.5


def _ellipse_clusters(f: np.ndarray, sigma: np.ndarray, noisy: np.ndarray, pairs: tuple[np.ndarray, np.ndarray],
                      lo: np.ndarray, hi: np.ndarray, *, z: float, min_mass: float, valley: float,
                      rules: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Blobs that meet high (post-processing of the map only): the level-set tree of the first pass's densities
    with the same tests but the excess test at :data:`ELLIPSE_EXCESS` of its threshold; a split of that tree
    counts only when every child is an ellipse at the split's level (ellipticity at most :data:`ELLIPSE_MAX`,
    and :data:`ELLIPSE_PAIR_MAX` for the children together), and its children are the clusters of this pass.
    Returns each leaf's cluster (-1: none) and their stabilities. A Gaussian component whose saddle with a
    neighbour is high holds little mass above it (0.43% of ``N~`` for a mode 2.7 sd from a pair of components
    that form one elongated mode): below the first pass's excess test, and kept whole by excess of mass; but
    it and its neighbour are ellipses there, where the pieces a shape's jitter splits off (flame, jain) mostly
    are not. Its peak tests are the first pass's, at the same ``z``, on the same densities; only the excess
    asked of a split is smaller."""
    relaxed = dict(rules, min_excess=ELLIPSE_EXCESS * rules["min_excess"])
    level = _privtree.level_set_tree(f, sigma, noisy, pairs, z=z, min_mass=min_mass, valley=valley, **relaxed)
    blob = _privtree.round_splits(level, f, lo, hi, ELLIPSE_MAX, shape=_privtree.ellipticity, whole=ELLIPSE_PAIR_MAX)
    child = level.alive & (level.parent >= 0)
    chosen = np.flatnonzero(child & blob[np.maximum(level.parent, 0)] & ~blob)
    return _branch_of_leaf(level, chosen), level.stability[chosen]


def _excess_rule(lo: np.ndarray, hi: np.ndarray, n_est: float, b: float) -> dict[str, Any]:
    """The keyword arguments of :func:`privclust_plugins._privtree.level_set_tree` for the excess test: a branch
    is significant only when its smoothed mass above the saddle's level is at least ``EXCESS_FRACTION N~`` and
    ``z`` times a bound on that figure's noise, ``sqrt(2) b`` per leaf of the branch (public: the released map)."""
    return {"volume": np.prod(hi - lo, axis=1), "min_excess": EXCESS_FRACTION * n_est,
            "excess_noise": math.sqrt(2.0) * b}


def _map_levels(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, noisy: np.ndarray, b: float, h: float, *,
                false_peak: float, min_mass: float, valley: float, excess: dict[str, Any] | None = None,
                merged: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float, tuple, Any, dict]:
    """The kernel densities at half-width ``h``, the peak threshold ``z``, the
    leaf graph and the level-set tree of one partition."""
    tree = _privtree.Tree(lo=lo, hi=hi, depth=depth, counts=noisy, nodes=0, truncated=False)
    pairs = _privtree.adjacency(tree)
    f, sigma, sampling = _privtree.box_density(lo, hi, depth, noisy, b, h, merged=merged, sampling=True)
    # the two noises share false_peak: half to the DP noise (Laplace tail), half to the records' sampling noise
    z = _privtree.false_peak_z(noisy.size, false_peak / 2.0)
    rules = dict(excess or {}, sampling=sampling, z_sampling=_privtree.gaussian_z(noisy.size, false_peak / 2.0))
    level = _privtree.level_set_tree(f, sigma, noisy, pairs, z=z, min_mass=min_mass, valley=valley, **rules)
    return f, sigma, z, pairs, level, rules


def _branch_of_leaf(level: Any, chosen: np.ndarray) -> np.ndarray:
    """For every leaf, the position in ``chosen`` of the chosen node above it (-1: none)."""
    ident = np.full(level.parent.size, -1, dtype=np.int64)
    ident[chosen] = np.arange(chosen.size)
    owner = ident.copy()  # the chosen ancestor-or-self of every live node (parents first)
    for c in level.order[::-1]:
        p = int(level.parent[c])
        if owner[c] < 0 and p >= 0:
            owner[c] = owner[p]
    return owner[level.leaf_node]


def _nearest_fill(labels: np.ndarray, todo: np.ndarray, centres: np.ndarray) -> None:
    """Leaves in ``todo`` take the label of the nearest leaf outside it (in place)."""
    have = ~todo
    if todo.any() and have.any():
        _, near = cKDTree(centres[have]).query(centres[todo])
        labels[todo] = labels[have][near]


def _refine(fine: np.ndarray, coarse: np.ndarray, w: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, list]:
    """Split a fine cluster along the coarse clusters that lie inside it.

    A coarse cluster lies inside fine cluster ``k`` when at least
    :data:`INSIDE_SHARE` of its noisy mass is on ``k``'s leaves; when two or
    more do, ``k`` becomes one cluster per such coarse cluster (its leaves
    outside them take the nearest of those). A coarse cluster that spans
    several fine ones changes nothing: the fine pass, with its narrower
    kernel, has already separated them. Returns the labels and, per new
    label, the coarse cluster it came from (-1: unchanged)."""
    K = int(fine.max()) + 1
    origin = [-1] * K
    if coarse.max() < 0:
        return fine, origin
    C = int(coarse.max()) + 1
    on = coarse >= 0
    mass = np.zeros((K, C))
    np.add.at(mass, (fine[on], coarse[on]), w[on])
    inside = (mass >= INSIDE_SHARE * mass.sum(axis=0)) & (mass > 0)
    out = fine.copy()
    for k in range(K):
        parts = np.flatnonzero(inside[k])
        if parts.size < 2:
            continue
        mine = fine == k
        origin[k] = int(parts[0])
        for c in parts[1:]:
            out[mine & (coarse == c)] = len(origin)
            origin.append(int(c))
        rest = mine & ~np.isin(coarse, parts)
        sub = np.flatnonzero(mine)
        labels = out[sub]
        _nearest_fill(labels, rest[sub], centres[sub])
        out[sub] = labels
    return out, origin


def _labels_of(level: Any, centres: np.ndarray, split: np.ndarray | None = None) -> tuple[np.ndarray, list, np.ndarray]:
    """The clusters chosen in a level-set tree as leaf labels (leaves below
    every cluster take the nearest cluster leaf), their stabilities, and which
    leaves lie in a chosen branch (``split``: the nodes never chosen whole,
    :func:`privclust_plugins._privtree.select_clusters`)."""
    chosen = _privtree.select_clusters(level, split)
    labels = _branch_of_leaf(level, chosen)
    core = labels >= 0
    if not core.any():
        labels[:] = 0
        chosen = np.array([int(np.argmax(level.mass))])
    _nearest_fill(labels, ~core, centres)
    return labels, list(level.stability[chosen]), core


def _merge_to(labels: np.ndarray, stability: list, f: np.ndarray, pairs: tuple[np.ndarray, np.ndarray],
              k: int, centres: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, list]:
    """Merge clusters until there are ``k``: each time the two clusters
    whose leaves touch (in the leaf graph ``pairs``, at a saddle above 0)
    that Ward's criterion joins first, the least increase of the weighted
    sum of squares ``m_x m_y / (m_x + m_y) |mu_x - mu_y|^2`` (``m``: the
    leaves' noisy mass ``w``, ``mu``: their ``w``-weighted mean centre).
    A small bump joins the neighbour it touches before two large modes
    are merged, however deep its valley (issue 26: wine drawn up with
    jitter to 100,000 records had 5 to 9 automatic clusters, groups of
    bumps of 2% to 27% of the records; merging the two of highest saddle
    over the lower peak, the rule before, kept the deep-valley bumps and
    merged two classes: ARI 0.19 told k = 3, 0.79 with this rule). Only
    touching clusters merge, so a shape is not joined across empty space to
    a cluster it does not meet. The saddle of two clusters is the highest
    density at which their leaves touch; a merged cluster's is the higher
    of its parts'. Stabilities add."""
    K = int(labels.max()) + 1
    i, j = pairs
    a, b = labels[i], labels[j]
    cross = a != b
    saddle = np.full((K, K), -np.inf)
    np.maximum.at(saddle, (a[cross], b[cross]), np.minimum(f[i[cross]], f[j[cross]]))
    saddle = np.maximum(saddle, saddle.T)
    touch = saddle > 0
    mass = np.bincount(labels, weights=w, minlength=K)
    sums = np.zeros((K, centres.shape[1]))
    np.add.at(sums, labels, centres * w[:, None])
    alive = np.ones(K, dtype=bool)
    target = np.arange(K)
    stability = list(stability)
    for _ in range(K - k):
        mu = sums / np.maximum(mass, 1e-300)[:, None]
        gap = ((mu[:, None, :] - mu[None, :, :]) ** 2).sum(axis=2)
        cost = np.outer(mass, mass) / np.maximum(np.add.outer(mass, mass), 1e-300) * gap
        cost = np.where(touch & np.outer(alive, alive), cost, np.inf)
        np.fill_diagonal(cost, np.inf)
        x, y = np.unravel_index(int(np.argmin(cost)), cost.shape)
        if not np.isfinite(cost[x, y]):  # no two clusters touch (a map of one leaf): the two least stable
            live = np.flatnonzero(alive)
            x, y = live[np.argsort([stability[c] for c in live], kind="stable")[:2]]
        x, y = min(x, y), max(x, y)
        touch[x] = touch[:, x] = touch[x] | touch[y]
        touch[x, x] = False
        mass[x] += mass[y]
        sums[x] += sums[y]
        stability[x] += stability[y]
        alive[y] = False
        target[target == y] = x
    keep = np.flatnonzero(alive)
    new_id = np.full(K, -1, dtype=np.int64)
    new_id[keep] = np.arange(keep.size)
    return new_id[target[labels]], [stability[c] for c in keep]


#: Leaf masses below this many noise scales are taken as 0 by the k-means fallback of ``n_clusters``.
KMEANS_NOISE_FLOOR = 2.0
#: Lloyd iterations of :func:`weighted_kmeans` (it stops earlier once no leaf changes cluster).
KMEANS_ITERATIONS = 100
#: Starts of :func:`weighted_kmeans` (the one of least weighted sum of squares is kept) ...
KMEANS_RESTARTS = 10
#: ... drawn from a generator with this fixed, public seed: the clusters are a function of the map alone.
KMEANS_SEED = 0


def _lloyd(centres: np.ndarray, m: np.ndarray, means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's iterations from ``means`` on the leaves' ``centres`` weighted by ``m``: every leaf to its nearest
    mean, every mean to its leaves' weighted mean, until no leaf moves (at most :data:`KMEANS_ITERATIONS`). A mean
    no leaf of positive weight joins stays where it is. Returns the labels and the means."""
    means = np.array(means, dtype=float)
    labels = np.full(centres.shape[0], -1, dtype=np.int64)
    for _ in range(KMEANS_ITERATIONS):
        new = cKDTree(means).query(centres)[1].astype(np.int64)
        if np.array_equal(new, labels):
            break
        labels = new
        mass = np.bincount(labels, weights=m, minlength=means.shape[0])
        sums = np.zeros_like(means)
        np.add.at(sums, labels, centres * m[:, None])
        filled = mass > 0
        means[filled] = sums[filled] / mass[filled, None]
    return labels, means


def weighted_kmeans(centres: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """``k`` clusters of the leaves by k-means on their centres, each leaf
    weighted by its noisy mass (post-processing of the DP map only, like
    diffprivlib's KMeans on noisy sums, but on the map already paid for):
    :data:`KMEANS_RESTARTS` runs of Lloyd's iterations, each started by
    weighted k-means++ seeding (a leaf drawn with probability proportional
    to its mass times its squared distance to the seeds so far) from a
    fixed public generator, so the result is a function of the map alone;
    the run of least weighted sum of squares is kept (a single greedy start
    took a far leaf whose noise passed the floor as a cluster of its own:
    1e5 records, 3 clusters 2.5 sd apart, clusters of 99,990, 6 and 4).
    Labels are compact (a cluster no leaf joined is dropped)."""
    L = centres.shape[0]
    k = max(1, min(int(k), L))
    m = np.maximum(w, 0.0)
    if not m.any():
        m = np.ones(L)
    rng = np.random.default_rng(KMEANS_SEED)
    best, best_sse = np.zeros(L, dtype=np.int64), np.inf
    for _ in range(KMEANS_RESTARTS):
        seeds = [int(rng.choice(L, p=m / m.sum()))]
        gap = ((centres - centres[seeds[0]]) ** 2).sum(axis=1)
        for _ in range(1, k):
            score = m * gap
            if not score.any():
                break
            seeds.append(int(rng.choice(L, p=score / score.sum())))
            gap = np.minimum(gap, ((centres - centres[seeds[-1]]) ** 2).sum(axis=1))
        labels, means = _lloyd(centres, m, centres[seeds])
        sse = float((m * ((centres - means[labels]) ** 2).sum(axis=1)).sum())
        if sse < best_sse:
            best, best_sse = labels, sse
    return np.unique(best, return_inverse=True)[1].reshape(-1).astype(np.int64)


def split_to(labels: np.ndarray, centres: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """Split clusters of the leaves until there are ``k`` (bisecting
    k-means from the density clusters): each time the cluster of largest
    weighted sum of squares about its mean is split in two by
    :func:`weighted_kmeans`. The modes the map resolves stay whole unless
    they are the widest; a map of one mode is partitioned by a k-means of
    all its leaves.
    Stops early when no cluster has two leaves of positive mass to split."""
    if labels.max() < 1:  # one mode: no structure of the map to keep, a k-means of all the leaves
        return weighted_kmeans(centres, w, k)
    labels = labels.copy()
    while int(labels.max()) + 1 < k:
        K = int(labels.max()) + 1
        mass = np.bincount(labels, weights=w, minlength=K)
        sums = np.zeros((K, centres.shape[1]))
        np.add.at(sums, labels, centres * w[:, None])
        means = sums / np.maximum(mass, 1e-300)[:, None]
        spread = np.bincount(labels, weights=w * ((centres - means[labels]) ** 2).sum(axis=1), minlength=K)
        heavy = np.bincount(labels, weights=(w > 0).astype(float), minlength=K) >= 2
        if not heavy.any():
            break
        c = int(np.argmax(np.where(heavy, spread, -1.0)))
        mine = np.flatnonzero(labels == c)
        halves = weighted_kmeans(centres[mine], w[mine], 2)
        if halves.max() < 1:
            break
        labels[mine[halves == 1]] = K
    return labels


def boundary_density(labels: np.ndarray, f: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     pairs: tuple[np.ndarray, np.ndarray]) -> float:
    """How much density a partition of the leaves cuts through: over the
    pairs of leaves that share a face and lie in different clusters, the
    lower of their smoothed densities (a negative, noisy one taken as 0)
    times the face's area. Leaves that touch only at an edge or a corner
    add nothing (their shared face has no area)."""
    i, j = pairs
    cross = labels[i] != labels[j]
    i, j = i[cross], j[cross]
    if i.size == 0:
        return 0.0
    overlap = np.minimum(hi[i], hi[j]) - np.maximum(lo[i], lo[j])  # 0 along the dimension the boxes meet in
    meet = np.argmin(overlap, axis=1)
    overlap[np.arange(i.size), meet] = 1.0
    area = np.prod(np.clip(overlap, 0.0, None), axis=1)
    return float(np.sum(np.maximum(np.minimum(f[i], f[j]), 0.0) * area))


def kmeans_refine(labels: np.ndarray, centres: np.ndarray, w: np.ndarray, f: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray | None:
    """Lloyd's iterations from the ``n_clusters`` partition ``labels`` of
    the leaves (weights ``w``), kept only when all its clusters stay and its
    boundaries cut through no more density than the density clusters' own
    (:func:`boundary_density`); else None. Among partitions the density
    does not tell apart, the compact one: wine drawn up with jitter to
    100,000 records, 4 columns, was merged from 5 to 11 groups of bumps
    along their valleys (ARI 0.79 told k = 3; diffprivlib 0.86), and its
    k-means refinement cuts through 15-38% less density (ARI 0.905, 20
    draws x 5 seeds). On the shapes a refinement cuts through the shapes'
    bodies (flame: 3.5 to 6.6 times the density clusters' cut, jain 10 times
    or more) and is refused."""
    K = int(labels.max()) + 1
    mass = np.bincount(labels, weights=w, minlength=K)
    sums = np.zeros((K, centres.shape[1]))
    np.add.at(sums, labels, centres * w[:, None])
    plain = np.zeros_like(sums)
    np.add.at(plain, labels, centres)
    means = np.where(mass[:, None] > 0, sums / np.maximum(mass, 1e-300)[:, None],
                     plain / np.maximum(np.bincount(labels, minlength=K), 1)[:, None])
    new, _ = _lloyd(centres, w, means)
    if np.unique(new).size < K or np.array_equal(new, labels):
        return None
    if boundary_density(new, f, lo, hi, pairs) > boundary_density(labels, f, lo, hi, pairs):
        return None
    return new


#: With ``n_clusters = k``: a cluster of less than this share of ``1/k`` of the mass is weighed against a
#: k-means split elsewhere (:func:`absorb_small`) ...
SMALL_SHARE = 0.5
#: ... which replaces it when its weighted sum of squares is at most this share of the partition's.
SWAP_SSE = 0.75


def _sse(labels: np.ndarray, centres: np.ndarray, w: np.ndarray) -> float:
    """The weighted sum of squares of the leaves' centres about their clusters' weighted means."""
    K = int(labels.max()) + 1
    mass = np.bincount(labels, weights=w, minlength=K)
    sums = np.zeros((K, centres.shape[1]))
    np.add.at(sums, labels, centres * w[:, None])
    means = sums / np.maximum(mass, 1e-300)[:, None]
    return float(np.sum(w * ((centres - means[labels]) ** 2).sum(axis=1)))


def absorb_small(labels: np.ndarray, stability: list, k: int, f: np.ndarray, pairs: tuple[np.ndarray, np.ndarray],
                 centres: np.ndarray, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, list, int]:
    """With ``n_clusters = k`` (post-processing of the map only): while the
    lightest of the ``k`` clusters holds less than :data:`SMALL_SHARE` of
    the mean share ``1/k`` of the noisy mass, the partition that merges
    clusters to ``k - 1`` (:func:`_merge_to`, where that light cluster
    joins its Ward neighbour) and splits the widest by 2-means
    (:func:`split_to`, then :func:`kmeans_refine`) replaces it when its
    weighted sum of squares is at most :data:`SWAP_SSE` of the current
    one's. Told k, a small dense bump with a real valley had kept one of
    the k clusters while two large overlapping classes stayed one (iris
    drawn up with jitter to 100,000 records, 4 columns: bumps of 0.7-2.7%
    of the records, the swap's sum of squares 0.64-0.67 of theirs; ARI
    0.628 to 0.707 over 3 draws x 3 seeds, diffprivlib told k 0.694). A
    small cluster apart from the rest stays: the 1:100 imbalance's 1%
    cluster, whose swap keeps 0.87-0.90 of the sum of squares. Nothing
    changed on the shape sets, the 2-D mixture family, 50 clusters or the
    other real sets. Returns the labels, the stabilities and the number of
    swaps."""
    swaps = 0
    for _ in range(k):
        K = int(labels.max()) + 1
        mass = np.bincount(labels, weights=w, minlength=K)
        if K != k or k < 2 or mass.min() >= SMALL_SHARE / k * mass.sum():
            break
        merged, kept = _merge_to(labels, stability, f, pairs, k - 1, centres, w)
        split = split_to(merged, centres, w, k)
        if int(split.max()) + 1 < k or _sse(split, centres, w) > SWAP_SSE * _sse(labels, centres, w):
            break
        refined = kmeans_refine(split, centres, w, f, lo, hi, pairs)
        labels = split if refined is None else refined
        stability = list(kept) + [0.0] * (k - len(kept))
        swaps += 1
    return labels, stability, swaps


#: The reference cluster of the power test of the automatic mode (:func:`map_underpowered`): a compact cluster
#: holding this share of ``N~`` ...
POWER_CLUSTER_SHARE = 0.1
#: ... whose density falls to this fraction of its peak at the saddle with its neighbour (a valley to half the
#: peak; the fixed valley rule before issue 26 asked for 0.4).
POWER_SADDLE = 0.5
#: One-mode bound of the k-means fallback (:func:`unimodal_bisect`): on a line, the split at its centre of any
#: symmetric one-mode spread removes at most 3/4 of its sum of squares about the mean (the uniform; a Gaussian 2/pi =
#: 0.64), by Khintchine's theorem (such a spread is U Z, U uniform, and (E|UZ|)^2 / E (UZ)^2 = 3/4 (E|Z|)^2 / EZ^2);
#: for a log-concave one (uniform, Gaussian) that split is the best 2-means split (Kieffer 1983: it is unique).
UNIMODAL_SHARE = 0.75
#: The standard deviation of that share for ``n`` records of a uniform spread is ``sqrt(0.075 / n)`` (the delta
#: method on ``(mean |x|)^2 / mean x^2``: variance (9/12 + 2.25^2 4/45 - 2 3 2.25 / 12) / n).
UNIMODAL_SHARE_VAR = 0.075
#: The level of that test (one-sided, Bonferroni over the columns: the split's direction is chosen).
UNIMODAL_LEVEL = 0.05


def map_underpowered(lo: np.ndarray, hi: np.ndarray, f: np.ndarray, sigma: np.ndarray, *, n_est: float, h: float,
                     z: float, z_sampling: float) -> tuple[bool, dict[str, float]]:
    """Whether the released map is too small for its mode tests to confirm a
    cluster (post-processing: ``N~``, the map's DP noise and ``h`` only).

    The reference: a compact cluster of :data:`POWER_CLUSTER_SHARE` ``N~``
    records with a standard deviation ``h`` in every column (the finest the
    kernel resolves), whose central kernel box holds ``c = share N~
    erf(1/sqrt 2)^d`` of them (68% per column), and whose density falls to
    :data:`POWER_SADDLE` of its peak at the saddle. The peak test of
    :func:`privclust_plugins._privtree.level_set_tree` confirms it only when
    ``(1 - POWER_SADDLE) c`` exceeds both ``z sqrt(2) sd`` (the DP noise of
    the smoothed count, ``sd`` as at the map's densest leaf) and ``z_N
    sqrt(2 sd^2 + 2 POWER_SADDLE c)`` (with the records' own Poisson noise at
    the saddle). When it would not, a single cluster from the tests says
    "the budget cannot see", not "one mode". Returns the verdict and the
    figures, in records of a kernel box."""
    d = lo.shape[1]
    p = int(np.argmax(f))
    centre, half = 0.5 * (lo[p] + hi[p]), np.maximum(h, 0.5 * (hi[p] - lo[p]))
    qvol = float(np.prod(np.clip(centre + half, 0.0, 1.0) - np.clip(centre - half, 0.0, 1.0)))
    sd = float(sigma[p]) * qvol
    c = POWER_CLUSTER_SHARE * n_est * math.erf(1.0 / math.sqrt(2.0)) ** d
    need = max(z * math.sqrt(2.0) * sd, z_sampling * math.sqrt(2.0 * sd * sd + 2.0 * POWER_SADDLE * c))
    shown = (1.0 - POWER_SADDLE) * c
    return bool(shown <= need), {"reference_dip": shown, "confirmable_dip": need}


def _split_share(centres: np.ndarray, w: np.ndarray, halves: np.ndarray) -> float:
    """The share of the weighted sum of squares along the line through the two halves' means that the split
    into ``halves`` removes (1: two points; at most 3/4 for one symmetric mode, :data:`UNIMODAL_SHARE`)."""
    means = np.array([np.average(centres[halves == j], axis=0, weights=w[halves == j]) for j in (0, 1)])
    axis = means[1] - means[0]
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        return 0.0
    p = (centres - np.average(centres, axis=0, weights=w)) @ (axis / norm)
    total = float(np.sum(w * p * p))
    within = sum(float(np.sum(w[halves == j] * (p[halves == j] - np.average(p[halves == j], weights=w[halves == j]))
                              ** 2)) for j in (0, 1))
    return 1.0 - within / total if total > 0 else 0.0


def unimodal_bisect(centres: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The k-means partition of an underpowered map of one cluster (post-processing: the leaves' centres and
    noisy weights only). The map is first split in two by :func:`weighted_kmeans` (the tests could not see, so
    two is the answer, stated, even on one mode); then, again and again, the cluster of largest weighted sum of
    squares whose best 2-split removes more of its spread along the split's axis than any one symmetric mode can
    (:data:`UNIMODAL_SHARE`, plus ``z sqrt(UNIMODAL_SHARE_VAR / n_eff)``, ``n_eff = (sum w)^2 / sum w^2`` its
    leaves' effective number, ``z`` at :data:`UNIMODAL_LEVEL` over the columns) is split. Clusters with fewer than
    two leaves of positive weight are not split."""
    labels = weighted_kmeans(centres, w, 2) if np.count_nonzero(w > 0) >= 2 else np.zeros(w.size, dtype=np.int64)
    z = _privtree.gaussian_z(centres.shape[1], UNIMODAL_LEVEL)
    while labels.max() >= 1:
        K = int(labels.max()) + 1
        spread = []
        for c in range(K):
            mine = np.flatnonzero((labels == c) & (w > 0))
            if mine.size < 3:  # two leaves always split "perfectly": no evidence
                continue
            mean = np.average(centres[mine], axis=0, weights=w[mine])
            spread.append((float(np.sum(w[mine] * ((centres[mine] - mean) ** 2).sum(axis=1))), c))
        for _, c in sorted(spread, reverse=True):
            mine = np.flatnonzero(labels == c)
            halves = weighted_kmeans(centres[mine], w[mine], 2)
            pos = w[mine] > 0
            if halves.max() < 1 or np.unique(halves[pos]).size < 2:
                continue
            wm = w[mine][pos]
            n_eff = float(wm.sum() ** 2 / np.sum(wm * wm))
            share = _split_share(centres[mine][pos], wm, halves[pos])
            if share > UNIMODAL_SHARE + z * math.sqrt(UNIMODAL_SHARE_VAR / n_eff):
                labels[mine[halves == 1]] = K
                break
        else:
            break
    return labels


def cluster_map(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, noisy: np.ndarray, *, n_est: float,
                eps_leaf: float, false_peak: float, min_fraction: float, n_clusters: int | None,
                valley: float | None = None) -> dict[str, Any]:
    """Clusters of the released leaves (post-processing of the DP map only):
    smoothed densities, significant peaks, a cluster id for every leaf, and
    the centres (noisy-mass-weighted leaf centres) in unit coordinates.

    The automatic clusters: the level-set tree at half-width ``h``, the
    ellipse pass on the same densities (:func:`_ellipse_clusters`), then (up
    to 4 columns) a second look at :data:`COARSE_FACTOR` ``h`` on the same
    map (its leaves merged to the depth that kernel can use,
    :func:`_privtree.coarsen`), whose clusters split a fine cluster they lie
    inside (:func:`_refine`). With ``n_clusters``: when the automatic
    clusters are at least that many, they are merged down to it by Ward's
    criterion among touching clusters (:func:`_merge_to`); when fewer, the
    widest is split by weighted 2-means until there are that many
    (:func:`split_to`). Automatic, when the tests find one cluster on a map
    too small to test modes (:func:`map_underpowered`): a weighted k-means of
    the leaves (:func:`unimodal_bisect`)."""
    b = 1.0 / eps_leaf
    d = lo.shape[1]
    h = _privtree.bandwidth(n_est, d)
    min_mass = min_fraction * n_est
    # the coarse pass in up to 4 columns, where its leaf graph (3^d neighbours a leaf) stays within the kernel's
    # pair budget; in more it costs as much as the first pass (12 columns: 57 s -> 127 s) and changed nothing
    two_passes = 3 ** d <= _privtree.PAIRS_PER_LEAF
    # each pass gets half of false_peak, so that noise alone makes a cluster with probability at most false_peak
    # (the n_clusters rules below reuse the first pass's densities and z: the same tests, no new ones)
    fp = false_peak / 2.0 if two_passes else false_peak
    excess = _excess_rule(lo, hi, n_est, b)
    given_valley = valley is not None
    valley = 1.0 if valley is None else valley  # 1: no ratio rule, the excess test alone
    f, sigma, z, pairs, level, rules = _map_levels(lo, hi, depth, noisy, b, h, false_peak=fp, min_mass=min_mass,
                                                   valley=valley, excess=excess)
    centres_leaf = 0.5 * (lo + hi)
    w = np.maximum(noisy, 0.0)
    split = _privtree.round_splits(level, f, lo, hi, ROUNDNESS_MAX) | _privtree.heirs(level, HEIR_SHARE * n_est)
    leaf_labels, stability, core = _labels_of(level, centres_leaf, split)
    hc = COARSE_FACTOR * h
    # the ellipse pass: blobs that meet high, whose excess above the saddle the first pass's test misses
    blobs, blob_stability = _ellipse_clusters(f, sigma, noisy, pairs, lo, hi, z=z, min_mass=min_mass, valley=valley,
                                              rules=rules)
    leaf_labels, origin = _refine(leaf_labels, blobs, w, centres_leaf)
    refined = len(origin) - len(stability)
    stability += [float(blob_stability[c]) for c in origin[len(stability):]]
    if two_passes:
        cut = _privtree.finest_splits(hc, d) * d
        clo, chi, cdepth, group, merged = _privtree.coarsen(lo, hi, depth, cut)
        cnoisy = np.bincount(group, weights=noisy, minlength=clo.shape[0])
        *_, clevel, _ = _map_levels(clo, chi, cdepth, cnoisy, b, hc, false_peak=fp, min_mass=min_mass,
                                 valley=max(valley, COARSE_VALLEY) if given_valley else COARSE_VALLEY, merged=merged)
        cchosen = _privtree.select_clusters(clevel, _privtree.heirs(clevel, HEIR_SHARE * n_est))
        leaf_labels, origin = _refine(leaf_labels, _branch_of_leaf(clevel, cchosen)[group], w, centres_leaf)
        refined += len(origin) - len(stability)
        stability += [float(clevel.stability[cchosen[c]]) for c in origin[len(stability):]]
    rule = "automatic"
    power = None
    if n_clusters is None and leaf_labels.max() < 1:  # one cluster: a mode test's answer, or a map too small to see?
        weak, power = map_underpowered(lo, hi, f, sigma, n_est=n_est, h=h, z=z, z_sampling=rules["z_sampling"])
        if weak:
            leaf_labels = unimodal_bisect(centres_leaf, np.maximum(noisy - KMEANS_NOISE_FLOOR * b, 0.0))
            K = int(leaf_labels.max()) + 1
            stability, refined = [0.0] * K, 0
            rule = (f"the map is too small to test modes: weighted k-means of its leaves, k = {K} (2 even on one "
                    "mode; more only where a split exceeds any one-mode spread)" if K > 1 else
                    "automatic: one cluster (the map is too small to test modes, and has fewer than two leaves above "
                    "the noise floor to split)")
    if n_clusters is not None and leaf_labels.max() + 1 >= n_clusters:
        leaf_labels, stability = _merge_to(leaf_labels, stability, f, pairs, n_clusters, centres_leaf, w)
        rule = "automatic clusters merged to n_clusters"
    elif n_clusters is not None:  # the map resolves fewer modes than asked for: split the widest (issue 26)
        # a leaf's mass above twice the noise scale: the noise of the many near-empty leaves (E max(Lap, 0) = b / 2
        # each) would otherwise pull the means toward the middle of the box
        one_mode = bool(leaf_labels.max() < 1)
        rule = ("weighted k-means of the leaves (one density mode, fewer than n_clusters)" if one_mode
                else "density clusters split by weighted 2-means (fewer density modes than n_clusters)")
        leaf_labels = split_to(leaf_labels, centres_leaf, np.maximum(noisy - KMEANS_NOISE_FLOOR * b, 0.0), n_clusters)
        K = int(leaf_labels.max()) + 1
        stability = [0.0] * K if one_mode else list(stability) + [0.0] * (K - len(stability))
        refined = 0
    if n_clusters is not None and leaf_labels.max() >= 1:
        floor = np.maximum(noisy - KMEANS_NOISE_FLOOR * b, 0.0)
        refined_k = kmeans_refine(leaf_labels, centres_leaf, floor, f, lo, hi, pairs)
        if refined_k is not None:
            leaf_labels = refined_k
            rule += ", then refined by k-means (its boundaries cut through no more density)"
        leaf_labels, stability, swaps = absorb_small(leaf_labels, list(stability), n_clusters, f, pairs,
                                                     centres_leaf, floor, lo, hi)
        if swaps:
            rule += (f"; {swaps} light cluster(s) merged into a neighbour and the widest split by 2-means instead "
                     f"(a sum of squares at most {SWAP_SSE:g} of theirs)")
    # cluster ids: by decreasing noisy mass, ties by the peak leaf (a function of the map alone)
    K = int(leaf_labels.max()) + 1
    mass = np.bincount(leaf_labels, weights=w, minlength=K)
    by_density = np.lexsort((np.arange(f.size), -f, leaf_labels))  # each cluster's densest leaf first
    peaks = by_density[np.searchsorted(leaf_labels[by_density], np.arange(K))]
    rank = np.lexsort((peaks, -mass))
    ident = np.empty(K, dtype=np.int64)
    ident[rank] = np.arange(K)
    leaf_labels = ident[leaf_labels]
    peaks, mass, stability = peaks[rank], mass[rank], np.asarray(stability)[rank]  # type: ignore[assignment]
    sums = np.zeros((K, d))
    np.add.at(sums, leaf_labels, centres_leaf * w[:, None])
    centres = np.where(mass[:, None] > 0, sums / np.maximum(mass, 1e-300)[:, None], centres_leaf[peaks])
    return {"leaf_labels": leaf_labels, "density": f, "sigma": sigma, "z": z, "min_mass": min_mass, "bandwidth": h,
            "coarse_bandwidth": hc if two_passes else None, "refined": refined, "rule": rule,
            "centres_unit": centres, "core": core, "valley": valley, "peaks": peaks, "stability": stability,
            "split_levels": level.split, "power": power}
