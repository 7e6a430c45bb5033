"""Kernels of the key-variable risk measures (:mod:`privclust_plugins.key_risk`):
counts over the records that *match* each record on its key variables,
SUDA2 special uniques, l-diversity, household risk.

Keys are integer codes, ``-1`` for a missing value. Two records match when
they agree on every key both observe (sdcMicro's convention: a missing key
value matches any category). All functions are pure numpy/pandas.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

__all__ = ["encode", "household_risks", "l_diversity", "match_totals", "suda2"]


def encode(frame: pd.DataFrame) -> np.ndarray:
    """Each column's categories as integer codes (``int64``), ``-1`` for a missing value."""
    out = np.empty((frame.shape[0], frame.shape[1]), dtype=np.int64)
    for j, c in enumerate(frame.columns):
        out[:, j] = pd.factorize(frame[c], use_na_sentinel=True)[0]
    return out


def _combined(codes: np.ndarray) -> np.ndarray:
    """One small integer per row for its whole code tuple (rows equal on every column share it)."""
    out = np.zeros(codes.shape[0], dtype=np.int64)
    for j in range(codes.shape[1]):
        out = pd.factorize(out * (int(codes[:, j].max(initial=0)) + 2) + codes[:, j] + 1)[0].astype(np.int64)
    return out


def _matched(codes: np.ndarray, queries: np.ndarray | None = None
             ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The matching of ``queries`` (row numbers; default every row) against
    every row, cut into blocks of one pattern of observed keys: yields
    ``(query_rows, data_rows, query_keys, data_keys)``, where a query row
    matches exactly the data rows of the block with an equal key. A query row
    meets each data row in exactly one block (the overlap of their observed
    keys), so totals over the blocks are totals over the matching records."""
    n, d = codes.shape
    rows = np.arange(n) if queries is None else np.asarray(queries, dtype=np.int64)
    observed = codes >= 0
    if observed.all():  # one block: the exact key combinations
        key = _combined(codes)
        yield rows, np.arange(n), key[rows], key
        return
    bits = 1 << np.arange(d, dtype=np.int64)
    dmask = observed.astype(np.int64) @ bits
    qmask = dmask[rows]
    for a in np.unique(qmask):
        these = rows[qmask == a]
        overlap = dmask & a
        for m in np.unique(overlap):
            data = np.flatnonzero(overlap == m)
            columns = np.flatnonzero((int(m) >> np.arange(d)) & 1)
            both = np.concatenate([these, data])
            key = _combined(codes[np.ix_(both, columns)])
            yield these, data, key[:len(these)], key[len(these):]


def _lookup(values: np.ndarray, totals: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``totals`` of the sorted ``values`` equal to each of ``keys`` (0 where none)."""
    at = np.minimum(np.searchsorted(values, keys), len(values) - 1)
    return np.where(values[at] == keys, totals[at], 0) if len(values) else np.zeros(len(keys), totals.dtype)


def match_totals(codes: np.ndarray, weights: np.ndarray | None = None, queries: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """For each query row (default every row): how many records match it (itself
    included: sdcMicro's sample frequency ``f_k`` under its missing-value
    convention) and, with ``weights``, the sum of their weights (``F_k``)."""
    nq = codes.shape[0] if queries is None else len(queries)
    counts = np.zeros(nq, dtype=np.int64)
    sums = None if weights is None else np.zeros(nq)
    order = np.arange(codes.shape[0]) if queries is None else np.asarray(queries, dtype=np.int64)
    position = np.zeros(codes.shape[0], dtype=np.int64)  # query row -> where it sits in the output
    position[order] = np.arange(nq)
    for q_rows, d_rows, q_keys, d_keys in _matched(codes, order):
        values, inverse, freq = np.unique(d_keys, return_inverse=True, return_counts=True)
        at = position[q_rows]
        counts[at] += _lookup(values, freq, q_keys)
        if sums is not None:
            sums[at] += _lookup(values, np.bincount(inverse, weights=weights[d_rows], minlength=len(values)), q_keys)
    return counts, sums


# ---------------------------------------------------------------------------
# SUDA2
# ---------------------------------------------------------------------------


def _unique_among(codes: np.ndarray, columns: Sequence[int], candidates: np.ndarray) -> np.ndarray:
    """Which ``candidates`` (row numbers) no other record matches on ``columns``."""
    if not len(candidates):
        return np.zeros(0, dtype=bool)
    counts, _ = match_totals(codes[:, list(columns)], queries=candidates)
    return counts == 1


def suda2(codes: np.ndarray, max_size: int | None = None, dis_fraction: float = 0.01
          ) -> dict[str, np.ndarray | float]:
    """Minimal sample uniques and the SUDA and DIS-SUDA scores of each record.

    A record is *unique* on a set ``S`` of keys when no other record matches
    it on ``S``; ``S`` is one of its MSUs when it is unique on ``S`` and on
    no proper subset of ``S`` (uniqueness only grows with ``S``, so the
    subsets one key smaller decide it). Sets are searched by size up to
    ``max_size`` (default: every key); a record already unique on a subset
    is not tested again on its supersets.

    Scores as sdcMicro's ``suda2`` with ``original_scores = TRUE`` (Elliot
    et al. 2002; Manning, Haglin & Keane 2008): with ``M`` keys, an MSU of
    size ``k`` adds ``(M - k)!`` to the record's SUDA score. The DIS-SUDA
    score spreads the file-level probability ``dis = U f / (U f + P (1 - f))``
    (``U`` records unique on every key, ``P`` records in pairs on every key,
    ``f = dis_fraction``) over the records by their scores:
    ``1 / (1 + (U / dis - U) / (s^Q sum_j s_j^-Q))`` with ``Q = 1 + (8 - M) / 20``,
    the sum over the records of positive score, and 0 for a score of 0.
    """
    n, m = codes.shape
    top = m if max_size is None else min(int(max_size), m)
    weight = np.array([float(math.factorial(m - k)) for k in range(1, m + 1)])
    by_size = np.zeros((n, m), dtype=np.int64)  # MSUs of each size per record
    unique_prev: dict[tuple[int, ...], np.ndarray] = {(): np.full(n, n == 1)}
    for size in range(1, top + 1):
        unique_now: dict[tuple[int, ...], np.ndarray] = {}
        for subset in combinations(range(m), size):
            inherited = np.zeros(n, dtype=bool)
            for drop in range(size):
                inherited |= unique_prev[subset[:drop] + subset[drop + 1:]]
            candidates = np.flatnonzero(~inherited)
            found = candidates[_unique_among(codes, subset, candidates)]
            by_size[found, size - 1] += 1
            inherited[found] = True
            unique_now[subset] = inherited
        unique_prev = unique_now
    scores = by_size @ weight
    full, _ = match_totals(codes)
    uniques, pairs = int(np.sum(full == 1)), int(np.sum(full == 2))
    denominator = uniques * dis_fraction + pairs * (1.0 - dis_fraction)
    dis = uniques * dis_fraction / denominator if denominator > 0 else 0.0
    dis_scores = np.zeros(n)
    positive = scores > 0
    if positive.any():
        q = 1.0 + (8.0 - m) / 20.0
        # s^Q sum_j s_j^-Q, each factor scaled by the largest score (scores reach (M - 1)! times the MSUs)
        unit = float(scores.max())
        spread = (scores[positive] / unit) ** q * np.sum((scores[positive] / unit) ** -q)
        excess = uniques / dis - uniques if dis > 0 else math.inf
        dis_scores[positive] = 1.0 / (1.0 + excess / spread)
    return {"msus_by_size": by_size, "scores": scores, "dis_scores": dis_scores, "dis": float(dis),
            "sample_uniques": float(uniques), "pairs": float(pairs)}


# ---------------------------------------------------------------------------
# l-diversity
# ---------------------------------------------------------------------------


def l_diversity(codes: np.ndarray, sensitive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each record, over the records that match it on the keys (itself
    included) and observe the sensitive variable (code ``>= 0``): the number
    of distinct sensitive values (distinct l-diversity) and ``exp`` of the
    entropy of their frequencies (entropy l-diversity). A record whose
    matching records observe no sensitive value gets 0 and 0."""
    n = codes.shape[0]
    has = sensitive >= 0
    pieces = []
    for q_rows, d_rows, q_keys, d_keys in _matched(codes):
        keep = has[d_rows]
        pairs = pd.DataFrame({"key": d_keys[keep], "s": sensitive[d_rows][keep]})
        table = pairs.groupby(["key", "s"], sort=False).size().rename("count").reset_index()
        joined = pd.DataFrame({"row": q_rows, "key": q_keys}).merge(table, on="key", how="inner")
        pieces.append(joined[["row", "s", "count"]])
    counts = pd.concat(pieces, ignore_index=True).groupby(["row", "s"], sort=False)["count"].sum().reset_index()
    distinct = np.bincount(counts["row"].to_numpy(), minlength=n).astype(float)
    c = counts["count"].to_numpy(dtype=float)
    rows = counts["row"].to_numpy()
    total = np.bincount(rows, weights=c, minlength=n)
    p = c / total[rows]
    entropy = -np.bincount(rows, weights=p * np.log(p), minlength=n)
    return distinct, np.where(distinct > 0, np.exp(entropy), 0.0)


# ---------------------------------------------------------------------------
# Households
# ---------------------------------------------------------------------------


def household_risks(households: np.ndarray, risks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each household's risk ``1 - prod(1 - r_i)`` over its members (a household
    is re-identified when any member is, members taken as independent), as
    sdcMicro's ``measure_risk`` with ``hid``; returns it per household and per
    record (its household's). ``households``: integer codes ``0..H-1``."""
    safe = np.clip(1.0 - np.asarray(risks, dtype=float), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        log_safe = np.log(safe)  # a sum of logs: a product of many factors near 1 keeps its digits
    total = np.bincount(households, weights=log_safe)
    per_household = -np.expm1(total)
    return per_household, per_household[households]
