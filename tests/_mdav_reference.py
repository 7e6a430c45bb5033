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


def missing_sq_reference(Z: np.ndarray, p: np.ndarray, R2: np.ndarray) -> np.ndarray:
    """sdcMicro's distance (src/Mdav.h) written plainly: squared difference
    where both are observed, the squared range where one of them is missing,
    0 where both are."""
    a, b = np.isnan(Z), np.isnan(p)[None, :]
    both = ~a & ~b
    one = a ^ b
    diff = np.where(a, 0.0, Z) - np.where(b, 0.0, p)
    # the same arithmetic as the kernel (ties are decided on exact equality)
    return np.einsum("ij,ij->i", np.where(both, diff, 0.0), diff) + one @ R2


def mdav_reference_missing(Z: np.ndarray, k: int) -> np.ndarray:
    """The textbook loop with sdcMicro's missing-value distance and centroid
    (the mean of the observed values of each variable)."""
    Z = np.asarray(Z, dtype=float)
    n = Z.shape[0]
    R2 = (np.nanmax(Z, axis=0) - np.nanmin(Z, axis=0)) ** 2
    labels = np.full(n, -1, dtype=np.int64)
    remaining = np.arange(n)
    group = 0

    observed = ~np.isnan(Z)
    filled = np.where(observed, Z, 0.0)
    total = filled.sum(axis=0)  # running sums, as in mdav (the same rounding)
    count = observed.sum(axis=0).astype(float)

    def centroid() -> np.ndarray:
        return np.where(count > 0, total / np.maximum(count, 1.0), np.nan)

    def farthest(p: np.ndarray) -> int:
        d = missing_sq_reference(Z[remaining], p, R2)
        return int(remaining[np.flatnonzero(d == d.max())[0]])

    def take(centre: int) -> None:
        nonlocal remaining, group, total, count
        others = remaining[remaining != centre]
        d = missing_sq_reference(Z[others], Z[centre], R2)
        order = np.lexsort((others, d))[: k - 1]
        members = np.concatenate(([centre], others[order]))
        labels[members] = group
        group += 1
        total = total - filled[members].sum(axis=0)
        count = count - observed[members].sum(axis=0)
        remaining = remaining[labels[remaining] < 0]

    while remaining.size >= 3 * k:
        r = farthest(centroid())
        take(r)
        s = farthest(Z[r])
        take(s)
    if remaining.size >= 2 * k:
        take(farthest(centroid()))
    labels[remaining] = group
    return labels
