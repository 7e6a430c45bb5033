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

__all__ = ["encode", "household_risks", "l_diversity", "match_totals", "matching_blocks", "suda2"]


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


def _packed(codes: np.ndarray, rows: np.ndarray, columns: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """The codes of ``rows`` on ``columns`` as one int64 each (mixed radix; the caller checked it fits)."""
    out = np.zeros(len(rows), dtype=np.int64)
    for c in columns:
        out = out * radix[c] + codes[rows, c]
    return out


def _matched(codes: np.ndarray, queries: np.ndarray | None = None, data: np.ndarray | None = None
             ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The matching of ``queries`` (row numbers; default every row) against
    the rows ``data`` (default every row), cut into blocks: yields ``(query_rows, data_rows, query_keys,
    data_keys)`` for the query rows of one pattern of observed keys and the
    data rows of another, keyed on the keys both observe; a query row matches
    exactly the data rows of the block with an equal key. Each pair of a
    query row and a data row meets in exactly one block, so totals over the
    blocks are totals over the matching records."""
    n, d = codes.shape
    rows = np.arange(n) if queries is None else np.asarray(queries, dtype=np.int64)
    radix = codes.max(axis=0, initial=0) + 1 if n else np.ones(d, dtype=np.int64)
    observed = codes >= 0
    bits = 1 << np.arange(d, dtype=np.int64)
    dmask = observed.astype(np.int64) @ bits
    pool = np.arange(n) if data is None else np.asarray(data, dtype=np.int64)
    patterns, inverse = np.unique(dmask[pool], return_inverse=True)
    by_pattern = np.split(pool[np.argsort(inverse, kind="stable")], np.cumsum(np.bincount(inverse))[:-1])
    qmask = dmask[rows]
    for a in np.unique(qmask):
        these = rows[qmask == a]
        for b, data in zip(patterns.tolist(), by_pattern, strict=True):
            columns = np.flatnonzero((int(a) & b) >> np.arange(d) & 1)
            if float(np.prod(radix[columns].astype(float))) < 2.0 ** 62:
                yield these, data, _packed(codes, these, columns, radix), _packed(codes, data, columns, radix)
            else:  # too many combinations for one int64: number the rows' tuples
                key = _combined(codes[np.ix_(np.concatenate([these, data]), columns)])
                yield these, data, key[:len(these)], key[len(these):]


matching_blocks = _matched  # public name for the other kernels (key-linkage matches released records with it)


def match_totals(codes: np.ndarray, weights: np.ndarray | None = None, queries: np.ndarray | None = None,
                 data: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """For each query row (default every row): how many records (of ``data``,
    default all) match it, itself included: sdcMicro's sample frequency
    ``f_k`` under its missing-value convention; with ``weights``, the sum of
    their weights (``F_k``)."""
    nq = codes.shape[0] if queries is None else len(queries)
    counts = np.zeros(nq, dtype=np.int64)
    sums = None if weights is None else np.zeros(nq)
    order = np.arange(codes.shape[0]) if queries is None else np.asarray(queries, dtype=np.int64)
    position = np.zeros(codes.shape[0], dtype=np.int64)  # query row -> where it sits in the output
    position[order] = np.arange(nq)
    for q_rows, d_rows, q_keys, d_keys in _matched(codes, order, data):
        # sort the smaller side: the distinct keys of the data (few queries of many records: those of the queries)
        by_data = len(q_keys) * 4 >= len(d_keys)
        values, at_value = np.unique(d_keys if by_data else q_keys, return_inverse=True)
        at = np.minimum(np.searchsorted(values, q_keys if by_data else d_keys), len(values) - 1)
        hit = values[at] == (q_keys if by_data else d_keys)
        if by_data:  # per distinct data key, its records; a query reads its own key's (0 where none)
            value_rows, value_of_query = at_value, at
        else:  # per distinct query key, the data records that hit it
            value_rows, value_of_query = at[hit], at_value
        found = np.bincount(value_rows, minlength=len(values))[value_of_query]
        counts[position[q_rows]] += np.where(hit, found, 0) if by_data else found
        if sums is not None:
            w = weights[d_rows] if by_data else weights[d_rows][hit]  # type: ignore[index]
            total = np.bincount(value_rows, weights=w, minlength=len(values))[value_of_query]
            sums[position[q_rows]] += np.where(hit, total, 0.0) if by_data else total
    return counts, sums


# ---------------------------------------------------------------------------
# SUDA2
# ---------------------------------------------------------------------------


def _unique_among(codes: np.ndarray, columns: Sequence[int], candidates: np.ndarray) -> np.ndarray:
    """Which ``candidates`` (row numbers, each observing every one of ``columns``)
    no other record matches on ``columns``: counted first among the records
    that observe them all (one block), then, for those still alone, among
    the others (a block per pattern of missing values)."""
    if not len(candidates):
        return np.zeros(0, dtype=bool)
    sub = codes[:, list(columns)]
    complete = (sub >= 0).all(axis=1)
    alone = match_totals(sub, queries=candidates, data=np.flatnonzero(complete))[0] == 1
    if alone.any() and not complete.all():
        alone[alone] = match_totals(sub, queries=candidates[alone], data=np.flatnonzero(~complete))[0] == 0
    return alone


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
    observed = codes >= 0
    for size in range(1, top + 1):
        unique_now: dict[tuple[int, ...], np.ndarray] = {}
        for subset in combinations(range(m), size):
            inherited = np.zeros(n, dtype=bool)
            for drop in range(size):
                inherited |= unique_prev[subset[:drop] + subset[drop + 1:]]
            # a record missing a key of the subset matches there as on the subset without it, on which it is not
            # unique (else it would have inherited): only the records observing every key of the subset are tested
            candidates = np.flatnonzero(~inherited & observed[:, list(subset)].all(axis=1))
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
        keep = has[d_rows] & np.isin(d_keys, q_keys)
        if not keep.any():
            continue
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
