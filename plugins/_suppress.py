"""Local suppression to k-anonymity with a missing value matching any value
(sdcMicro's ``localSuppression`` semantics): the counting, a greedy
heuristic and an exact integer program.

Keys are integer codes, ``-1`` for a missing value. Two records *match* when
they agree on every key both observe; record ``i`` is safe when at least
``k`` records (itself included) match it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: Above this many records in a stratum the exact solver is refused (its integer program has one variable per pair).
MAX_EXACT_RECORDS = 250

#: The greedy heuristic suppresses one record at a time while at most this many records are unsafe; above, it
#: treats every record of the smallest match count at once (vectorised rounds).
SEQUENTIAL_BELOW = 2000

#: While (unsafe records) x (records) is at most this, each suppression is the one of largest gain over every unsafe
#: record and key (:func:`_best_gain`); above, the record with the fewest matches is treated first.
GAIN_BELOW = 200_000

#: While (query rows) x (data rows) x (keys) is at most this, :func:`match_counts` compares every pair at once
#: (a few MB of booleans) instead of grouping the rows by their patterns of missing keys.
DIRECT_BELOW = 3_000_000

#: While (suppressions) x (records) is at most this, a last pass gives back the suppressions that are not needed.
RESTORE_BELOW = 20_000_000


def _encoded(codes: np.ndarray, columns: np.ndarray, radix: np.ndarray) -> np.ndarray | None:
    """One int64 per row for its codes on ``columns`` (mixed radix), ``None`` when that could overflow."""
    if not len(columns):
        return np.zeros(len(codes), dtype=np.int64)
    if float(np.prod(radix[columns].astype(float))) >= 2.0 ** 62:
        return None
    out = np.zeros(len(codes), dtype=np.int64)
    for c in columns:
        out = out * radix[c] + codes[:, c]
    return out


def match_counts(queries: np.ndarray, data: np.ndarray, radix: np.ndarray,
                 weights: np.ndarray | None = None) -> np.ndarray:
    """For each query row, how many data rows match it (agree on every
    column both observe), each data row counting ``weights[row]`` (default
    1: a row of distinct key values standing for that many records).
    Grouped by missingness patterns: a pass over the data for each pair of a
    query pattern and a data pattern's overlap."""
    out = np.zeros(len(queries), dtype=np.int64)
    if not len(queries):
        return out
    d = queries.shape[1]
    if len(queries) * len(data) * max(d, 1) <= DIRECT_BELOW:
        # small strata (the heuristic's local search asks this thousands of times): every pair at once
        agree = ((queries[:, None, :] == data[None, :, :]) | (queries[:, None, :] < 0)
                 | (data[None, :, :] < 0)).all(axis=2)
        if weights is None:
            return agree.sum(axis=1, dtype=np.int64)
        return (agree @ np.asarray(weights, dtype=float)).astype(np.int64)
    bits = 1 << np.arange(d, dtype=np.int64)
    qmask = (queries >= 0).astype(np.int64) @ bits
    dmask = (data >= 0).astype(np.int64) @ bits
    for a in np.unique(qmask):
        rows = np.flatnonzero(qmask == a)
        overlap = dmask & a
        for m in np.unique(overlap):
            these = overlap == m
            columns = np.flatnonzero((int(m) >> np.arange(d)) & 1)
            dkeys = _encoded(data[these], columns, radix)
            qkeys = _encoded(queries[rows], columns, radix)
            if dkeys is None or qkeys is None:  # too many combinations for one int64: compare rows
                dkeys_rows = data[these][:, columns]
                _, inverse = np.unique(np.vstack([dkeys_rows, queries[rows][:, columns]]), axis=0,
                                       return_inverse=True)
                inverse = np.asarray(inverse).ravel()
                dkeys, qkeys = inverse[:int(these.sum())], inverse[int(these.sum()):]
            if weights is None:
                values, counts = np.unique(dkeys, return_counts=True)
            else:
                values, inverse = np.unique(dkeys, return_inverse=True)
                counts = np.bincount(np.asarray(inverse).ravel(), weights=weights[these],
                                     minlength=len(values)).astype(np.int64)
            at = np.searchsorted(values, qkeys)
            found = (at < len(values)) & (values[np.minimum(at, len(values) - 1)] == qkeys)
            out[rows] += np.where(found, counts[np.minimum(at, len(values) - 1)], 0)
    return out


def _matches(row: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Which records match one row."""
    return np.all((codes == row) | (codes < 0) | (row < 0), axis=1)


def _choice(counts_by_key: np.ndarray, observed: np.ndarray, k: int, order: Sequence[int]) -> np.ndarray:
    """Per record, the key to suppress: the first key in ``order`` (least
    important first) whose suppression makes it match k records; else the
    one that makes it match the most (ties: the least important)."""
    n = counts_by_key.shape[0]
    rank = np.empty(len(order), dtype=np.int64)
    rank[list(order)] = np.arange(len(order))
    # score: safe keys first (by rank), then by count descending (by rank)
    big = counts_by_key.shape[1] + 1
    safe = counts_by_key >= k
    score = np.where(safe, rank[None, :], big + (counts_by_key.max(initial=0) - counts_by_key) * big + rank[None, :])
    score = np.where(observed, score, np.iinfo(np.int64).max)
    return np.argmin(score, axis=1) if n else np.zeros(0, dtype=np.int64)


def _moves(observed: np.ndarray, subsets: bool) -> np.ndarray:
    """The moves open to a record observing ``observed`` keys, one row each
    (the keys it suppresses): one observed key at a time; with ``subsets``,
    every set of observed keys that leaves at least one observed (while
    :data:`SUBSETS_UP_TO` keys or fewer, else one key or all but one), or the
    last one when it is the only one."""
    keys = np.flatnonzero(observed)
    d = len(observed)
    single = np.zeros((len(keys), d), dtype=bool)
    single[np.arange(len(keys)), keys] = True
    if not subsets or len(keys) < 2:
        return single
    if len(keys) <= SUBSETS_UP_TO:
        bits = (np.arange(1, 2 ** len(keys) - 1)[:, None] >> np.arange(len(keys))) & 1
        chosen = bits.astype(bool)
    else:
        chosen = np.vstack([np.eye(len(keys), dtype=bool), ~np.eye(len(keys), dtype=bool)])
    out = np.zeros((len(chosen), d), dtype=bool)
    out[:, keys] = chosen
    return out


#: With at most this many observed keys, the moves of a record are every set of its keys (2^keys - 2 of them).
SUBSETS_UP_TO = 8


def _best_gain(codes: np.ndarray, counts: np.ndarray, unsafe: np.ndarray, k: int,
               order: Sequence[int], subsets: bool | str = False) -> tuple[int, np.ndarray, np.ndarray, int]:
    """The move (suppressing one key of an unsafe record, or with
    ``subsets`` a set of its keys, :func:`_moves`) that reduces the total
    shortfall of the unsafe records the most per value suppressed (with
    ``subsets = "net"``: the most less the values suppressed): the
    record's own gain (up to its shortfall) plus one for each unsafe record
    that newly matches it; ties go to fewer values, the record with the
    fewest matches, then the least important keys. Returns the record, the
    keys, the records that newly match and its new count.

    Moves of several keys find the records that keep one or two keys and
    match every record sharing them, the optimum's way of reaching k on a
    small file (docs/key-maskers.md): :func:`greedy` tries them as a second
    candidate on small strata, never leaving a record with every key
    missing (a blank record matches every record: k - 1 of them make any
    file k-anonymous and protect nobody)."""
    deficit = np.maximum(k - counts, 0)
    short = deficit > 0
    rank = np.empty(len(order), dtype=np.int64)
    rank[list(order)] = np.arange(len(order))
    weight = 2 ** rank.astype(float)  # the least important keys first: compare the sets by their most important key
    cache: dict[bytes, np.ndarray] = {}
    best: tuple[Any, ...] | None = None
    for i in unsafe:
        observed = codes[i] >= 0
        moves = cache.get(observed.tobytes())
        if moves is None:
            moves = cache[observed.tobytes()] = _moves(observed, bool(subsets))
        differ = (codes != codes[i]) & (codes >= 0) & observed[None, :]
        before = ~differ.any(axis=1)
        after = (differ.astype(np.int64) @ (~moves).T.astype(np.int64)) == 0  # records x moves
        new = after & ~before[:, None]
        gain = np.minimum(int(deficit[i]), new.sum(axis=0)) + (new & short[:, None]).sum(axis=0)
        cost = moves.sum(axis=1)
        ratio = gain - cost if subsets == "net" else gain / cost
        tie = moves @ weight
        m = int(np.lexsort((tie, cost, -ratio))[0])
        score = (float(ratio[m]), -int(cost[m]), -int(counts[i]), -float(tie[m]))
        if best is None or score > best[0]:
            best = (score, int(i), np.flatnonzero(moves[m]), new[:, m], int(after[:, m].sum()))
    assert best is not None
    return best[1], best[2], best[3], best[4]


def _restore(original: np.ndarray, codes: np.ndarray, counts: np.ndarray, k: int,
             order: Sequence[int], weights: np.ndarray | None = None) -> np.ndarray:
    """Give back each suppressed value whose return leaves every record
    matching at least ``k`` records (the most important keys first): a
    greedy choice can make an earlier suppression unnecessary. ``weights``:
    how many records each row stands for (default 1)."""
    w = np.ones(len(codes), dtype=np.int64) if weights is None else weights
    rows, cols = np.nonzero((codes < 0) & (original >= 0))
    rank = np.empty(len(order), dtype=np.int64)
    rank[list(order)] = np.arange(len(order))
    for t in np.argsort(-rank[cols], kind="stable"):
        i, c = int(rows[t]), int(cols[t])
        query = codes[i].copy()
        query[c] = original[i, c]
        before, after = _matches(codes[i], codes), _matches(query, codes)
        lost = before & ~after
        total = int(w[after].sum())
        if total >= k and not (counts[lost] - w[i] < k).any():
            codes[i] = query
            counts[lost] -= w[i]
            counts[i] = total
    return codes


def distinct_rows(codes: np.ndarray, radix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of ``codes``, for each record the index of its row,
    and how many records each row stands for: ``codes == rows[inverse]``."""
    shifted = _encoded(codes + 1, np.arange(codes.shape[1]), radix)  # -1 (missing) -> 0
    if shifted is None:
        rows, inverse, weights = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    else:
        _, first, inverse, weights = np.unique(shifted, return_index=True, return_inverse=True, return_counts=True)
        rows = codes[first]
    return rows, np.asarray(inverse).ravel(), weights.astype(np.int64)


def record_match_counts(codes: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """``match_counts(codes, codes, radix)``, computed on the distinct rows
    (a file of many records and few key combinations)."""
    rows, inverse, weights = distinct_rows(codes, radix)
    return match_counts(rows, rows, radix, weights)[inverse]


#: Above this many records, :func:`greedy` works on the distinct rows of key values, each standing for its records
#: (the records of a row are suppressed alike): a file of 10^6 records x 7 keys has a few thousand distinct rows.
ROWS_ABOVE = 5000


def greedy(codes: np.ndarray, k: int, order: Sequence[int], radix: np.ndarray,
           progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Suppress key values (set codes to -1) until every record matches at
    least ``k`` records; returns the new codes (a copy). ``order``: the key
    columns, the one to suppress first first. The record with the fewest
    matches is treated first, and the key chosen is the least important one
    that makes it safe (:func:`_choice`); the counts of the records that
    newly match it are updated. While many records are unsafe, every record
    with the fewest matches is treated at once (a vectorised round). Above
    :data:`ROWS_ABOVE` records the same is done on the distinct rows of key
    values, weighted by their records. Up to :data:`IMPROVE_UP_TO` records a
    local search (:func:`improve`) and more candidates follow, up to
    :data:`ORDERS_UP_TO` records restarts with a forced first move too
    (:func:`forced_starts`); the fewest suppressions win."""
    n = len(codes)
    if n < k:
        raise ValueError(f"{n} records cannot reach k = {k}")
    if n <= ROWS_ABOVE:
        ones = np.ones(n, dtype=np.int64)
        out = _greedy(codes, ones, k, order, radix, progress, gain=True)
        if n > IMPROVE_UP_TO:
            return out
        out = improve(codes, out, k, order, radix)
        # more candidates: moves of several keys of a record (never every key), the same local search, with the
        # order's rotations as tie-breaks (the first order that reaches the fewest suppressions wins)
        d = codes.shape[1]
        for shift in range(d if n <= ORDERS_UP_TO else 1):
            turned = [order[(j + shift) % d] for j in range(d)]
            for kind in (True, "net"):  # the shortfall removed per value suppressed, or less the values suppressed
                other = _greedy(codes, ones, k, turned, radix, None, gain=True, subsets=kind)
                other = improve(codes, other, k, turned, radix, subsets=kind)
                if _count(codes, other) < _count(codes, out):
                    out = other
        if n <= ORDERS_UP_TO:
            out = forced_starts(codes, out, k, order, radix)
        return out
    rows, inverse, weights = distinct_rows(codes, radix)
    return _greedy(rows, weights, k, order, radix, progress, gain=False)[inverse]


def _count(original: np.ndarray, codes: np.ndarray) -> int:
    """How many values ``codes`` suppresses in ``original``."""
    return int(((codes < 0) & (original >= 0)).sum())


#: Strata of at most this many records (the exact solver's limit) get :func:`improve` after the greedy.
IMPROVE_UP_TO = MAX_EXACT_RECORDS

#: Strata of at most this many records get a candidate for each rotation of the importance order (else one).
ORDERS_UP_TO = 100

#: :func:`improve` stops after this many repairs per record (a bound on its work, never a time).
REPAIRS_PER_RECORD = 2


#: :func:`forced_starts` makes at most this many starts, two greedy runs each (a bound on its work, never a time).
FORCED_STARTS = 64


def forced_starts(original: np.ndarray, best: np.ndarray, k: int, order: Sequence[int],
                  radix: np.ndarray) -> np.ndarray:
    """Restarts from ``original`` (a small stratum), each with one key value
    of an unsafe record suppressed first: the greedy with moves of several
    keys (both scores, :func:`_best_gain`) then :func:`_restore`; returns
    the one with the fewest suppressions, ``best`` (k-anonymous, from
    :func:`greedy`) unless one needs fewer. A greedy's first moves decide
    which records keep one or two keys and match several groups at once;
    a forced first move reaches combinations the scores never rank first
    (outlier file 5 of docs/key-maskers.md: 8 suppressions instead of 9).
    Deterministic: the unsafe records by fewest matches, then the keys,
    least important first; at most :data:`FORCED_STARTS` starts; never the
    last observed key of a record."""
    n = len(original)
    ones = np.ones(n, dtype=np.int64)
    counts = match_counts(original, original, radix)
    unsafe = np.flatnonzero(counts < k)
    unsafe = unsafe[np.argsort(counts[unsafe], kind="stable")]
    unsafe = unsafe[(original[unsafe] >= 0).sum(axis=1) > 1]  # never force a record's last key
    starts = [(int(i), int(c)) for i in unsafe for c in order if original[i, c] >= 0]
    size = _count(original, best)
    for i, c in starts[:FORCED_STARTS]:
        for kind in (True, "net"):
            trial = original.copy()
            trial[i, c] = -1
            trial = _greedy(trial, ones, k, order, radix, None, gain=True, subsets=kind)
            trial = _restore(original, trial, match_counts(trial, trial, radix), k, order)
            count = _count(original, trial)
            if count < size:
                best, size = trial, count
    return best


def improve(original: np.ndarray, codes: np.ndarray, k: int, order: Sequence[int],
            radix: np.ndarray, subsets: bool | str = False) -> np.ndarray:
    """A local search from a k-anonymous ``codes`` (suppressions of
    ``original``): give back every suppression of one record, repair with
    the greedy (largest gain first, then :func:`_restore`), and keep the
    result when it needs fewer suppressions; passes over the records until
    one helps none (or after :data:`REPAIRS_PER_RECORD` repairs per
    record). With ``subsets`` (moves of several keys), when a pass helps
    none, it gives back two records' suppressions at a time (the records
    that keep one or two keys come in pairs), within the same bound of
    repairs, and returns to single records after a pair helps. Records already safe
    in ``original`` stay untouched: giving values back leaves every record
    at least as general as in ``original``, so its count stays at least
    its original one."""
    n = len(codes)
    ones = np.ones(n, dtype=np.int64)
    best = codes.copy()
    size = _count(original, best)
    budget = REPAIRS_PER_RECORD * n
    pairs = False  # with ``subsets``, once a pass of single records helps none: give back two records at a time
    while budget > 0:
        improved = False
        touched = np.flatnonzero(((best < 0) & (original >= 0)).any(axis=1))
        groups = [(int(a), int(b)) for x, a in enumerate(touched) for b in touched[x + 1:]] if pairs else \
            [(int(a),) for a in touched]
        for group in groups:
            if budget <= 0:
                break
            if all((best[i] == original[i]).all() for i in group):
                continue  # given back by an earlier repair of this pass
            budget -= 1
            trial = best.copy()
            trial[list(group)] = original[list(group)]
            trial = _greedy(trial, ones, k, order, radix, None, gain=True, subsets=subsets)
            trial = _restore(original, trial, match_counts(trial, trial, radix), k, order)
            count = _count(original, trial)
            if count < size:
                best, size, improved = trial, count, True
        if improved:
            pairs = False
        elif subsets and not pairs:
            pairs = True
        else:
            break
    return best


def _greedy(codes: np.ndarray, w: np.ndarray, k: int, order: Sequence[int], radix: np.ndarray,
            progress: Callable[[int], None] | None, gain: bool, subsets: bool | str = False) -> np.ndarray:
    """:func:`greedy` on rows each standing for ``w`` records (suppressed
    alike); ``gain``: take the suppression of largest gain (:func:`_best_gain`,
    rows of one record each) while the problem is small; ``subsets``: moves
    of several keys of a record too (``"net"``: scored by the shortfall
    removed less the values suppressed, :func:`_best_gain`)."""
    original = codes
    codes = codes.copy()
    n, d = codes.shape
    counts = match_counts(codes, codes, radix, w)
    while True:
        unsafe = np.flatnonzero(counts < k)
        if not len(unsafe):
            if int(((codes < 0) & (original >= 0)).sum()) * n <= RESTORE_BELOW:
                return _restore(original, codes, counts, k, order, w)
            return codes
        if progress is not None:
            progress(int(w[unsafe].sum()))
        fewest = counts[unsafe].min()
        if len(unsafe) > SEQUENTIAL_BELOW:
            targets = unsafe[counts[unsafe] == fewest]
            by_key = np.zeros((len(targets), d), dtype=np.int64)
            for c in range(d):
                query = codes[targets].copy()
                query[:, c] = -1
                by_key[:, c] = match_counts(query, codes, radix, w)
            chosen = _choice(by_key, codes[targets] >= 0, k, order)
            codes[targets, chosen] = -1
            counts = match_counts(codes, codes, radix, w)
            continue
        if gain and len(unsafe) * n <= GAIN_BELOW:
            i, keys, gained, total = _best_gain(codes, counts, unsafe, k, order, subsets)
            codes[i, keys] = -1
            counts += gained
            counts[i] = total
            continue
        i = int(unsafe[np.argmin(counts[unsafe])])
        before = _matches(codes[i], codes)
        candidates = np.zeros(d, dtype=np.int64)
        after = []
        for c in range(d):
            query = codes[i].copy()
            query[c] = -1
            match = _matches(query, codes)
            after.append(match)
            candidates[c] = int(w[match].sum())
        c = int(_choice(candidates[None, :], (codes[i] >= 0)[None, :], k, order)[0])
        codes[i, c] = -1
        counts += w[i] * (after[c] & ~before)
        counts[i] = int(w[after[c]].sum())


def exact(codes: np.ndarray, k: int, weights: np.ndarray, radix: np.ndarray,
          time_limit: float = 60.0, info: dict[str, float] | None = None,
          min_kept: int = 0) -> tuple[np.ndarray, bool]:
    """The fewest suppressions (weighted by ``weights`` per key column) in
    the records that do not match k records in the input (the records the
    heuristic, like sdcMicro's, touches), by an integer program solved with
    HiGHS (:func:`scipy.optimize.milp`).

    Variables: ``s_ic`` (suppress observed key ``c`` of unsafe record ``i``,
    binary) and, for each pair of an unsafe record ``i`` and another record
    ``j`` that differ on a key both observe, ``y_ij`` in [0, 1] (they match):
    ``y_ij <= s_ic + s_jc`` for every key ``c`` on which they differ (``s_jc``
    is 0 for a safe ``j``), and ``sum_j y_ij >= k - (records that match i
    already)`` for every unsafe record. Safe records stay safe (a suppression
    only adds matches). Returns the new codes and whether the solver proved
    the optimum; ``info`` (a dict, optional) receives the solver's lower
    bound on the cost (``dual_bound``) and its cost (``objective``).
    ``min_kept``: each record keeps at least this many of its observed keys
    (at most all of them): with 1, no record gets every key missing, the
    solutions sdcMicro's convention makes cheap (k - 1 such records make
    any file k-anonymous)."""
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp

    n, d = codes.shape
    counts = match_counts(codes, codes, radix)
    unsafe = np.flatnonzero(counts < k)
    if not len(unsafe):
        if info is not None:
            info.update(objective=0.0, dual_bound=0.0)
        return codes.copy(), True
    observed = codes >= 0
    s_index = -np.ones((n, d), dtype=np.int64)
    free = np.zeros((n, d), dtype=bool)
    free[unsafe] = observed[unsafe]
    n_s = int(free.sum())
    s_index[free] = np.arange(n_s)
    position = -np.ones(n, dtype=np.int64)
    position[unsafe] = np.arange(len(unsafe))
    # pairs (i, j), i unsafe, j != i, differing on a key both observe; each unordered pair once
    grid_i, grid_j = np.meshgrid(unsafe, np.arange(n), indexing="ij")
    pi, pj = grid_i.ravel(), grid_j.ravel()
    keep = (pi != pj) & ~((position[pj] >= 0) & (pj < pi))
    pi, pj = pi[keep], pj[keep]
    a, b = codes[pi], codes[pj]
    differ = (a != b) & (a >= 0) & (b >= 0)
    some = differ.any(axis=1)
    pi, pj, differ = pi[some], pj[some], differ[some]
    n_y = len(pi)
    p_of, c_of = np.nonzero(differ)
    m = len(p_of)
    si, sj = s_index[pi[p_of], c_of], s_index[pj[p_of], c_of]
    rows = [np.arange(m), np.arange(m)[si >= 0], np.arange(m)[sj >= 0]]
    cols = [n_s + p_of, si[si >= 0], sj[sj >= 0]]
    vals = [np.ones(m), -np.ones(int((si >= 0).sum())), -np.ones(int((sj >= 0).sum()))]
    # each unsafe record: the pairs it is in
    for side in (pi, pj):
        inside = position[side] >= 0
        rows.append(m + position[side][inside])
        cols.append(n_s + np.flatnonzero(inside))
        vals.append(np.ones(int(inside.sum())))
    # each unsafe record: at most (its observed keys - min_kept) suppressions
    kept_rows, kept_cols = np.nonzero(free)
    rows.append(m + len(unsafe) + position[kept_rows])
    cols.append(s_index[kept_rows, kept_cols])
    vals.append(np.ones(len(kept_rows)))
    observed_keys = observed[unsafe].sum(axis=1)
    matrix = sparse.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(m + 2 * len(unsafe), n_s + n_y))
    lower = np.concatenate([np.full(m, -np.inf), (k - counts[unsafe]).astype(float), np.full(len(unsafe), -np.inf)])
    upper = np.concatenate([np.zeros(m), np.full(len(unsafe), np.inf),
                            np.maximum(observed_keys - min_kept, 0).astype(float)])
    cost = np.concatenate([np.broadcast_to(weights, (n, d))[free], np.zeros(n_y)])
    integrality = np.concatenate([np.ones(n_s), np.zeros(n_y)])
    result = milp(cost, constraints=LinearConstraint(matrix, lower, upper), integrality=integrality,
                  bounds=Bounds(0, 1), options={"time_limit": float(time_limit), "mip_rel_gap": 0.0})
    if result.x is None:
        raise RuntimeError(f"the integer program found no solution ({result.message})")
    if info is not None:
        info["objective"] = float(result.fun)
        info["dual_bound"] = float(getattr(result, "mip_dual_bound", np.nan))
    out = codes.copy()
    chosen = np.zeros((n, d), dtype=bool)
    chosen[free] = result.x[:n_s] > 0.5
    out[chosen] = -1
    return out, bool(result.status == 0)
