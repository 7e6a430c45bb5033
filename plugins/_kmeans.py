"""Numerical kernels of the ``idp-kmeans`` clusterer (pure numpy functions).

The component in :mod:`privclust_plugins.dp_kmeans` validates parameters,
handles the DataFrame and the privacy context; everything here works on
arrays and draws no randomness.

All records live in the unit cube ``[0, 1]^M`` (after clipping to public
bounds and min-max scaling), which is what makes the sensitivities below
hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

__all__ = [
    "assign",
    "block_labels",
    "cluster_sums",
    "farthest_first",
    "init_sensitivity",
    "noise_spread",
    "round_epsilons",
    "round_sensitivity",
    "to_unit",
    "total_epsilon",
    "update_centres",
]

#: Rows per block when computing record-to-centre distances (bounds the
#: temporary ``rows x k`` array).
BLOCK_ROWS = 16384
#: Most entries of that temporary array: with many clusters (``n_clusters``
#: may exceed the number of records) the blocks get fewer rows.
BLOCK_ENTRIES = 2**21


def to_unit(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, int]:
    """Clip ``values`` (n, M) to ``[low, high]`` per column and scale to [0, 1].

    :returns: the scaled copy and the number of values that were clipped.
    """
    clipped = np.clip(values, low, high)
    n_clipped = int(np.count_nonzero(clipped != values))
    return (clipped - low) / (high - low), n_clipped


def round_sensitivity(n_columns: int) -> tuple[float, float]:
    """L1 and L2 sensitivity of one Lloyd round's release (all clusters' sums
    and counts) under add/remove-one-record.

    The clusters are fixed by the previous round's released centres, so one
    record sits in exactly one cluster: its sum moves by the record itself
    (L1 at most ``M``, L2 at most ``sqrt(M)`` in the unit cube) and its count
    by 1. Hence ``M + 1`` (the paper's Delta f) and ``sqrt(M + 1)``.
    """
    return float(n_columns + 1), math.sqrt(n_columns + 1)


def init_sensitivity(n_columns: int, n_blocks: int) -> tuple[float, float]:
    """L1 and L2 sensitivity of the initial release: the sums and counts of
    ``m`` equal-size blocks of records ranked by their attribute sum, under
    add/remove-one-record.

    The blocks are defined by rank, so adding a record x* does more than put
    x* in one block: the ``m - 1`` block boundaries each move by at most one
    position, carrying at most one record from a block to its neighbour.
    The sums move by at most ``||x*||_1 <= M`` plus ``2M`` per boundary; the
    block sizes depend on n only, so the counts move by 1 in total:
    L1 ``<= (2m - 1) M + 1``. By the triangle inequality,
    L2 ``<= sqrt(M) + (m - 1) sqrt(2M) + 1``. With ``m = 1`` both reduce to
    the round figures (``M + 1`` and at most ``sqrt(M) + 1``).
    """
    m, d = n_blocks, n_columns
    return float((2 * m - 1) * d + 1), math.sqrt(d) + (m - 1) * math.sqrt(2 * d) + 1.0


def block_labels(unit: np.ndarray, n_blocks: int) -> np.ndarray:
    """Cut the records into ``n_blocks`` consecutive, equal-size blocks
    (sizes differ by at most one, larger blocks first) after ranking them by
    their attribute sum.

    Ties in the sum are broken by the values themselves (lexicographically,
    first column first), so the ranking is a function of the multiset of
    records, not of their order in the file.
    """
    n = unit.shape[0]
    keys = [unit[:, j] for j in range(unit.shape[1] - 1, -1, -1)]
    order = np.lexsort([*keys, unit.sum(axis=1)])
    q, r = divmod(n, n_blocks)
    sizes = np.full(n_blocks, q, dtype=np.int64)
    sizes[:r] += 1
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.repeat(np.arange(n_blocks, dtype=np.int64), sizes)
    return labels


#: The coordinates summed by :func:`cluster_sums` are rounded to multiples of 2^-SUM_BITS first.
SUM_BITS = 20


def cluster_sums(unit: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster coordinate sums ``(k, M)`` and counts ``(k,)``, computed exactly.

    A sum of doubles accumulated one record after another is rounded at
    every addition, and adding or removing one record changes those
    roundings: the computed sums of two neighbours can differ by more than
    the record itself, beyond the sensitivity the noise is calibrated to
    (Casacuberta et al. 2022). So each coordinate is first rounded to a
    multiple of 2^-SUM_BITS (a function of the record alone, which stays in
    the unit cube, so the sensitivity analysis holds for the rounded
    records), and every partial sum is then a multiple of 2^-SUM_BITS below
    the number of records: exact in a double up to 2^33 records.
    """
    counts = np.bincount(labels, minlength=k).astype(float)
    sums = np.empty((k, unit.shape[1]))
    scale = 2.0**SUM_BITS
    for j in range(unit.shape[1]):
        sums[:, j] = np.bincount(labels, weights=np.rint(unit[:, j] * scale) / scale, minlength=k)
    return sums, counts


def assign(unit: np.ndarray, centres: np.ndarray, block_rows: int = BLOCK_ROWS) -> np.ndarray:
    """Index of the nearest centre (squared Euclidean) for each record, the
    lowest index among equally near centres; computed in row blocks so the
    temporary distance array stays ``block_rows x k`` and within
    :data:`BLOCK_ENTRIES` entries (16384 rows x 20 000 centres took 2.6 GB)."""
    n = unit.shape[0]
    out = np.empty(n, dtype=np.int64)
    block_rows = max(1, min(int(block_rows), BLOCK_ENTRIES // max(centres.shape[0], 1)))
    c_sq = np.einsum("ij,ij->i", centres, centres)
    for start in range(0, n, block_rows):
        rows = unit[start:start + block_rows]
        dist = c_sq[None, :] - 2.0 * rows @ centres.T
        out[start:start + block_rows] = np.argmin(dist, axis=1)
    return out


def update_centres(noisy_sums: np.ndarray, noisy_counts: np.ndarray, previous: np.ndarray | None,
                   min_count: float) -> tuple[np.ndarray, np.ndarray]:
    """New centres from a round's noisy sums and counts (post-processing).

    A cluster whose noisy count is at least ``min_count`` gets the noisy
    mean, clipped to the unit cube; any other keeps its ``previous`` centre
    (with no previous centre, the clipped ratio to ``max(count, 1)`` is used).

    :returns: the centres and the boolean mask of the clusters updated.
    """
    denom = np.maximum(noisy_counts, 1.0)[:, None]
    means = np.clip(noisy_sums / denom, 0.0, 1.0)
    updated = noisy_counts >= min_count
    if previous is None:
        return means, updated
    return np.where(updated[:, None], means, previous), updated


def noise_spread(scale: float, noisy_counts: np.ndarray, n_columns: int) -> np.ndarray:
    """Twice the root-mean-square length of the displacement that Laplace
    noise of scale ``scale`` on a cluster's ``M`` coordinate sums gives its
    mean, ``2 sqrt(2 M) scale / count``, per cluster (counts below 1 count
    as 1). A centre that moved less than this cannot be told from one that
    stood still."""
    return 2.0 * math.sqrt(2.0 * n_columns) * scale / np.maximum(noisy_counts, 1.0)


def farthest_first(centres: np.ndarray, k: int, start: int) -> np.ndarray:
    """Indices of ``k`` of the ``centres``, chosen greedily farthest apart:
    begin with ``start``, then repeatedly add the centre whose distance to
    the nearest chosen one is largest (the lowest index among ties)."""
    chosen = [int(start)]
    nearest = np.sum((centres - centres[start]) ** 2, axis=1)
    for _ in range(1, k):
        nearest[chosen] = -np.inf
        nxt = int(np.argmax(nearest))
        chosen.append(nxt)
        nearest = np.minimum(nearest, np.sum((centres - centres[nxt]) ** 2, axis=1))
    return np.asarray(chosen, dtype=np.int64)


def round_epsilons(epsilon: float, schedule: str, rounds: int, max_iter: int) -> list[float]:
    """The epsilon of the initial release (index 0) and of each Lloyd round.

    ``"halving"``: release t gets ``epsilon / 2^(t+1)`` for t = 0..max_iter,
    so the total ``epsilon (1 - 2^-(max_iter+1))`` stays below ``epsilon``
    whenever the loop stops. ``"uniform"``: ``epsilon / (T + 1)`` for the
    initial release and each of ``T = min(rounds, max_iter)`` rounds (the
    largest double whose T + 1 copies add up to at most ``epsilon``).
    Values too small to represent (halving past about 1000 rounds) end the
    list early.
    """
    if schedule == "uniform":
        t = min(rounds, max_iter)
        each = epsilon / (t + 1)
        while each > 0 and Fraction(each) * (t + 1) > Fraction(epsilon):  # the nearest double can add up to more
            each = math.nextafter(each, 0.0)
        return [each] * (t + 1)
    out: list[float] = []
    for t in range(max_iter + 1):
        value = math.ldexp(epsilon, -(t + 1))
        if value <= 0.0 or not math.isfinite(value) or value < 1e-300:
            break
        out.append(value)
    return out


def total_epsilon(epsilons: Sequence[float]) -> float:
    """The sum a schedule can spend at most (basic composition)."""
    return float(math.fsum(epsilons))
