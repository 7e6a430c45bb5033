"""MDAV as written in the literature, the oracle of the MDAV tests and the
peer of benchmarks/bench_mdav.py (not shipped in the package)."""

from __future__ import annotations

import numpy as np


def _sq(Z: np.ndarray, p: np.ndarray) -> np.ndarray:
    diff = Z - p
    return np.einsum("ij,ij->i", diff, diff)




def mdav_reference(Z: np.ndarray, k: int) -> np.ndarray:
    """MDAV as written in the literature: full distance passes over the
    remaining records at every step (O(N^2/k)); labels in group order.

    The centroid of the remaining records is kept as a running sum (as in
    :func:`mdav`), so both compute it with the same rounding."""
    Z = np.ascontiguousarray(Z, dtype=float)
    n = Z.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    remaining = np.arange(n)
    total = Z.sum(axis=0)
    group = 0

    def farthest(p: np.ndarray) -> int:
        d = _sq(Z[remaining], p)
        return int(remaining[np.flatnonzero(d == d.max())[0]])

    def take(centre: int) -> None:
        nonlocal remaining, group, total
        others = remaining[remaining != centre]
        d = _sq(Z[others], Z[centre])
        order = np.lexsort((others, d))[: k - 1]
        members = np.concatenate(([centre], others[order]))
        labels[members] = group
        group += 1
        total = total - Z[members].sum(axis=0)
        remaining = remaining[labels[remaining] < 0]

    while remaining.size >= 3 * k:
        r = farthest(total / remaining.size)
        take(r)
        s = farthest(Z[r])
        take(s)
    if remaining.size >= 2 * k:
        take(farthest(total / remaining.size))
    labels[remaining] = group
    return labels
