"""Kernels of the microdata evaluators: information loss and disclosure risk
on arrays (original ``X`` and protected ``Y``, same shape, row ``i`` of
``Y`` is the protected version of row ``i`` of ``X``).

Pure numpy/scipy functions; the components in
:mod:`privclust_plugins.microdata_evaluators` pick the columns and the
partition and name the figures. At the end, the helpers every key evaluator
shares (of :mod:`privclust_plugins.microdata_evaluators` and
:mod:`privclust_plugins.key_risk`): which keys and weights an evaluator reads,
and the key frequencies under one convention, sdcMicro's (a missing key value
matches any category).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import special
from scipy.spatial import cKDTree

import privclust
from privclust import DataError, EvaluationInputs, param

from . import _key_risk as kr

__all__ = [
    "dbrl",
    "expected_sizes",
    "il1s",
    "interval_disclosure",
    "linkage_sets",
    "key_frame",
    "key_frequencies",
    "key_role",
    "moments",
    "named_keys",
    "realised_sizes",
    "record_risks",
    "sampling_weights",
    "sse_sst",
    "strata_param",
    "transparency_posteriors",
    "weight_role",
]


def _power_of_two(values: np.ndarray) -> np.ndarray:
    """A power of two with ``values / power`` in ``[1, 2)`` (1 where a value is 0 or
    not finite): dividing by it is exact and brings any float near 1."""
    values = np.asarray(values, dtype=float)
    ok = np.isfinite(values) & (values > 0)
    _, e = np.frexp(np.where(ok, values, 1.0))
    return np.where(ok, np.ldexp(1.0, e - 1), 1.0)  # 2^(e-1): 2^e overflows for values above 2^1023


def _rescaled(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both files with each column divided by the power of two nearest its
    largest absolute value (of both files). Every figure here is unchanged
    by a per-column scale (standardised distances, relative changes,
    correlations, intervals in s.d. units), and the division is exact, but
    squares and sums of columns of 1e300 overflowed (SSE/SST, IL1s, DBRL,
    moments came out NaN or inf) and those of columns of 1e-300 underflowed
    to 0 (the column was taken as constant)."""
    with np.errstate(invalid="ignore"):
        top = np.fmax(np.fmax.reduce(np.abs(X), axis=0, initial=0.0), np.fmax.reduce(np.abs(Y), axis=0, initial=0.0))
    unit = _power_of_two(top)
    return X / unit, Y / unit


def _normalised(w: np.ndarray | None) -> tuple[np.ndarray | None, float]:
    """Sampling weights divided by the power of two nearest the largest, and
    that power (``w = unit * u``): sums of weights of 1e308 overflowed. A
    figure with ``ddof`` then uses ``sum u - ddof / unit``."""
    if w is None:
        return None, 1.0
    unit = float(_power_of_two(np.max(w)))
    return w / unit, unit


def _weighted_mean(X: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    observed = ~np.isnan(X)
    if observed.all():
        return X.mean(axis=0) if w is None else (w @ X) / w.sum()
    weights = np.ones(X.shape[0]) if w is None else w
    filled = np.where(observed, X, 0.0)
    return (weights @ filled) / (weights @ observed)  # each column over its observed values


def _varying(X: np.ndarray, ddof: float = 0, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, standard deviations and the mask of non-constant columns. With
    sampling weights ``w`` (each record stands for ``w_i`` population units)
    the mean is ``sum w x / sum w`` and the variance
    ``sum w (x - mean)^2 / (sum w - ddof)``. Missing values (NaN) are left
    out: each column's figures are those of its observed values."""
    mean = _weighted_mean(X, w)
    observed = ~np.isnan(X)
    weights = np.ones(X.shape[0]) if w is None else w
    total = weights @ observed  # per column
    centred = np.where(observed, X - mean, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.where(total > ddof, np.sqrt(np.maximum(weights @ centred ** 2, 0.0) / (total - ddof)), 0.0)
    varying = (_spread(X) > 0) & (sd > 0)
    return mean, sd, varying


def _spread(X: np.ndarray) -> np.ndarray:
    """Per column, the largest minus the smallest observed value (0 for a
    column whose observed values are all equal, or that has none). A column
    is constant when this is 0: a threshold relative to the mean called a
    column of 1e15 + 100 i constant, and the round-off of a mean made a
    column replaced by its mean look varying."""
    if X.shape[0] == 0:
        return np.zeros(X.shape[1])
    with np.errstate(invalid="ignore"):
        spread = np.fmax.reduce(X, axis=0) - np.fmin.reduce(X, axis=0)
    return np.where(np.isnan(spread), 0.0, spread)


def _compared(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The cells observed in both files (the cells a figure compares)."""
    return ~np.isnan(X) & ~np.isnan(Y)


def sse_sst(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None = None) -> tuple[float, float, float]:
    """``(100 SSE/SST, SSE, SST)`` on variables standardised with the
    original's mean and population s.d.: ``SSE = sum (z - z')^2``,
    ``SST = sum (z - mean z)^2`` (= N times the number of non-constant
    columns). Constant columns are left out. With sampling weights ``w``
    every record's terms count ``w_i`` times (weighted mean and s.d.).
    With missing values both sums run over the cells observed in both files."""
    X, Y = _rescaled(X, Y)
    w, unit = _normalised(w)
    mean, sd, varying = _varying(X, w=w)
    if not varying.any():
        return float("nan"), 0.0, 0.0
    both = _compared(X, Y)[:, varying]
    Z = np.where(both, (X[:, varying] - mean[varying]) / sd[varying], 0.0)
    Zp = np.where(both, (Y[:, varying] - mean[varying]) / sd[varying], 0.0)
    weights = np.ones(X.shape[0]) if w is None else w
    with np.errstate(over="ignore"):  # weights of 1e308: the sums themselves may be beyond a float (inf)
        sse = float(weights @ np.sum((Z - Zp) ** 2, axis=1)) * unit
        sst = float(weights @ np.sum(Z ** 2, axis=1)) * unit
    if not sst > 0:  # the cells observed in both files all sit at the mean: no spread to lose
        return float("nan"), sse, sst
    ratio = float(weights @ np.sum((Z - Zp) ** 2, axis=1)) / float(weights @ np.sum(Z ** 2, axis=1))
    return 100.0 * ratio, sse, sst


def il1s(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None = None) -> float:
    """IL1s (Mateo-Sanz, Domingo-Ferrer & Sebe 2005; sdcMicro's ``dUtility``):
    ``1/(N p) sum_i sum_j |x_ij - y_ij| / (sqrt(2) s_j)`` with ``s_j`` the
    sample standard deviation (``ddof = 1``) of original column ``j``;
    constant columns are left out. With sampling weights, the weighted mean
    over records and the weighted s.d. With missing values, the mean over
    the cells observed in both files."""
    X, Y = _rescaled(X, Y)
    w, unit = _normalised(w)
    _, sd, varying = _varying(X, ddof=1.0 / unit, w=w)
    if not varying.any():
        return float("nan")
    both = _compared(X, Y)[:, varying]
    terms = np.where(both, np.abs(X[:, varying] - Y[:, varying]) / (np.sqrt(2.0) * sd[varying]), 0.0)
    weights = np.ones(X.shape[0]) if w is None else w
    if both.all():
        per_record = terms.mean(axis=1)
        return float(per_record.mean() if w is None else (w @ per_record) / w.sum())
    return float((weights @ terms.sum(axis=1)) / (weights @ both.sum(axis=1)))


def _cov(X: np.ndarray, w: np.ndarray | None, ddof: float = 1.0) -> np.ndarray:
    """Covariances (``ddof = 1``, or ``ddof`` for weights normalised by
    :func:`_normalised`); with missing values each pair over the records
    observing both (pairwise complete)."""
    observed = ~np.isnan(X)
    if observed.all():
        if w is None:
            return np.atleast_2d(np.cov(X, rowvar=False, ddof=1))
        centred = X - _weighted_mean(X, w)
        return np.atleast_2d((centred * w[:, None]).T @ centred / (w.sum() - ddof))
    weights = np.ones(X.shape[0]) if w is None else w
    p = X.shape[1]
    out = np.full((p, p), np.nan)
    for j in range(p):  # a loop over pairs of variables, never over records
        for m in range(j, p):
            rows = observed[:, j] & observed[:, m]
            ww = weights[rows]
            if ww.sum() <= ddof:
                continue
            a, b = X[rows, j], X[rows, m]
            ca, cb = a - (ww @ a) / ww.sum(), b - (ww @ b) / ww.sum()
            out[j, m] = out[m, j] = (ww * ca) @ cb / (ww.sum() - ddof)
    return out


def _rel(a: np.ndarray, b: np.ndarray, floor: np.ndarray) -> float:
    """Mean of ``|b - a| / |a|`` over the entries where ``|a| > floor``."""
    keep = (np.abs(a) > floor) & np.isfinite(a) & np.isfinite(b)
    if not keep.any():
        return float("nan")
    return float(np.mean(np.abs(b[keep] - a[keep]) / np.abs(a[keep])))


def moments(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None = None) -> dict[str, float]:
    """Relative change of means, variances and covariances (mean over
    variables or pairs of ``|new - old| / |old|``, leaving out entries whose
    original value is 0), and the mean and maximum absolute change of the
    correlations (pairs ``j < l``). Variances and covariances with
    ``ddof = 1``; with sampling weights, the weighted estimates of both files.
    With missing values both files are compared over the cells observed in
    both; covariances over the records observing both variables."""
    p = X.shape[1]
    X, Y = _rescaled(X, Y)
    w, unit = _normalised(w)
    both = _compared(X, Y)
    if not both.all():  # both files over the same cells: those observed in both
        X, Y = np.where(both, X, np.nan), np.where(both, Y, np.nan)
    mx, my = _weighted_mean(X, w), _weighted_mean(Y, w)
    scale = np.maximum(np.nanmax(np.abs(X), axis=0), 1e-300)
    out = {"mean_rel_change": _rel(mx, my, 1e-12 * scale)}
    cx = _cov(X, w, 1.0 / unit)
    cy = _cov(Y, w, 1.0 / unit)
    var_floor = 1e-24 * scale ** 2
    out["var_rel_change"] = _rel(np.diag(cx), np.diag(cy), var_floor)
    iu = np.triu_indices(p, 1)
    if p > 1:
        out["cov_rel_change"] = _rel(cx[iu], cy[iu], 1e-12 * np.sqrt(np.outer(np.diag(cx), np.diag(cx))[iu]) + 1e-300)
        sx, sy = np.sqrt(np.diag(cx)), np.sqrt(np.diag(cy))
        sx, sy = np.where(_spread(X) > 0, sx, 0.0), np.where(_spread(Y) > 0, sy, 0.0)  # constant: no correlation
        ok = (sx[iu[0]] > 0) & (sx[iu[1]] > 0) & (sy[iu[0]] > 0) & (sy[iu[1]] > 0) & np.isfinite(cx[iu]) \
            & np.isfinite(cy[iu])
        if ok.any():
            rx = cx[iu][ok] / (sx[iu[0]][ok] * sx[iu[1]][ok])
            ry = cy[iu][ok] / (sy[iu[0]][ok] * sy[iu[1]][ok])
            if np.isnan(X).any():  # each correlation over the records observing both, its s.d.s included
                pairs = list(zip(iu[0][ok].tolist(), iu[1][ok].tolist(), strict=True))
                rx = np.array([_pair_correlation(X[:, j], X[:, k], w) for j, k in pairs])
                ry = np.array([_pair_correlation(Y[:, j], Y[:, k], w) for j, k in pairs])
            diff = np.abs(ry - rx)
            diff = diff[np.isfinite(diff)]  # a pair with no spread over the records observing both: no correlation
            out["corr_abs_change"] = float(diff.mean()) if diff.size else float("nan")
            out["corr_max_abs_change"] = float(diff.max()) if diff.size else float("nan")
        else:
            out["corr_abs_change"] = out["corr_max_abs_change"] = float("nan")
    else:
        out["cov_rel_change"] = out["corr_abs_change"] = out["corr_max_abs_change"] = float("nan")
    return out


def _pair_correlation(a: np.ndarray, b: np.ndarray, w: np.ndarray | None) -> float:
    """The (weighted) correlation of ``a`` and ``b`` over the records observing both: covariance and both standard
    deviations over the same records (the covariance over them and the s.d.s over each whole column gave a
    "correlation" of 1.574 with missing values: a red-team audit)."""
    both = ~np.isnan(a) & ~np.isnan(b)
    weights = np.ones(int(both.sum())) if w is None else w[both]
    a, b = a[both], b[both]
    if not weights.sum() > 0:
        return float("nan")
    da, db = a - np.average(a, weights=weights), b - np.average(b, weights=weights)
    va, vb = float(np.sum(weights * da * da)), float(np.sum(weights * db * db))
    return float(np.sum(weights * da * db) / np.sqrt(va * vb)) if va > 0 and vb > 0 else float("nan")


def dbrl(X: np.ndarray, Y: np.ndarray, *, workers: int = 1) -> tuple[float, float]:
    """Distance-based record linkage: for each protected record, the
    original records nearest to it (Euclidean on variables standardised with
    the original's mean and population s.d.); the record scores ``1/t`` when
    its own original is among the ``t`` tied nearest, else 0.

    Returns ``(share, expected number linked)``. Uses a KD-tree over the
    originals (scipy's ``cKDTree``); memory is O(N). With missing values,
    distances over the observed coordinates as MDAV's (sdcMicro's rule,
    :func:`_linkage_missing`).
    """
    X, Y = _rescaled(X, Y)
    mean, sd, varying = _varying(X)
    scale = np.where(varying, sd, 1.0)
    Z = (X - mean) / scale  # a constant column is divided by 1: it adds only where protection changed it
    Zp = (Y - mean) / scale
    if np.isnan(Z).any() or np.isnan(Zp).any():
        return _linkage_missing(Z, Zp, None, workers)
    return _linkage(Z, Zp, None, workers)


#: Up to this many linkage columns, the intruder's linkages include each set
#: that leaves one column out (beyond it, all the columns and each alone).
LEAVE_ONE_OUT_UP_TO = 12


def linkage_sets(p: int, leave_one_out_up_to: int = LEAVE_ONE_OUT_UP_TO) -> list[tuple[int, ...]]:
    """The column sets (indices into ``p`` columns) an intruder links on:
    all the columns; each column alone (an intruder who trusts the one
    column released with little noise); and, for ``2 < p <=
    leave_one_out_up_to``, each set leaving one column out (one who drops
    the column drowned in noise). All first: of equal shares the larger set
    is reported. ``2 p + 1`` linkages at most (``p + 1`` beyond the cap)."""
    sets = [tuple(range(p))]
    if p > 1:
        sets += [(j,) for j in range(p)]
    if 2 < p <= leave_one_out_up_to:
        sets += [tuple(m for m in range(p) if m != j) for j in range(p)]
    return sets


def _linkage_missing(Z: np.ndarray, Zp: np.ndarray, allowed: np.ndarray | None,
                     workers: int) -> tuple[float, float]:
    """:func:`_linkage` with missing values, in the distance MDAV groups by
    (sdcMicro's): squared differences over the coordinates observed on both
    records, a coordinate's squared range (of the originals) where one of the
    two misses it, nothing where both do. Exact: the records of each pair of
    missingness patterns are compared with a KD-tree over their common
    observed coordinates (the rest of the distance is a constant for the
    pair)."""
    n = Z.shape[0]
    R2 = np.nan_to_num((np.nanmax(Z, axis=0) - np.nanmin(Z, axis=0)) ** 2)
    ox, op = ~np.isnan(Z), ~np.isnan(Zp)
    px, of_x = np.unique(ox, axis=0, return_inverse=True)
    pp, of_p = np.unique(op, axis=0, return_inverse=True)
    of_x, of_p = np.asarray(of_x).ravel(), np.asarray(of_p).ravel()
    rows_x = [np.flatnonzero(of_x == a) for a in range(len(px))]
    rows_p = [np.flatnonzero(of_p == b) for b in range(len(pp))]
    both = ox & op
    diff = np.where(both, np.nan_to_num(Zp) - np.nan_to_num(Z), 0.0)
    own = np.sum(diff ** 2, axis=1) + (ox ^ op) @ R2  # each protected record against its own original
    nearest = np.full(n, np.inf)
    trees: dict[tuple[int, bytes], Any] = {}

    def tree(a: int, common: np.ndarray) -> Any:
        key = (a, common.tobytes())
        if key not in trees:
            trees[key] = cKDTree(Z[np.ix_(rows_x[a], common)])
        return trees[key]

    for b, pb in enumerate(pp):
        for a, pa in enumerate(px):
            const = float(R2[pa ^ pb].sum())
            common = pa & pb
            if not common.any():
                nearest[rows_p[b]] = np.minimum(nearest[rows_p[b]], const)
                continue
            d, _ = tree(a, common).query(Zp[np.ix_(rows_p[b], common)], k=1, workers=workers)
            nearest[rows_p[b]] = np.minimum(nearest[rows_p[b]], d ** 2 + const)
    radius = nearest * (1.0 + 1e-9) + 1e-12
    linked = own <= radius if allowed is None else (own <= radius) & allowed
    credit = np.zeros(n)
    counts = np.zeros(n)
    for b, pb in enumerate(pp):
        rows = rows_p[b][linked[rows_p[b]]]
        if not rows.size:
            continue
        for a, pa in enumerate(px):
            const = float(R2[pa ^ pb].sum())
            room = radius[rows] - const
            ok = room >= 0
            if not ok.any():
                continue
            common = pa & pb
            if not common.any():
                counts[rows[ok]] += len(rows_x[a])
                continue
            found = tree(a, common).query_ball_point(Zp[np.ix_(rows[ok], common)], r=np.sqrt(room[ok]),
                                                     return_length=True, workers=workers)
            counts[rows[ok]] += np.asarray(found, dtype=float)
    credit[linked] = 1.0 / np.maximum(counts[linked], 1.0)
    return float(credit.mean()), float(credit.sum())


def _linkage(Z: np.ndarray, Zp: np.ndarray, allowed: np.ndarray | None, workers: int) -> tuple[float, float]:
    """Share and expected number of protected rows whose own original is among
    their ``t`` tied nearest originals (credit ``1/t``); ``allowed`` masks
    the rows that may be linked at all. The two nearest originals of each
    row in one pass: a linked row whose second nearest lies beyond the tie
    radius has ``t = 1``; only the tied rows are counted with a ball query
    (each distinct query once: a discrete column ties thousands of rows)."""
    tree = cKDTree(Z)
    k = min(2, Z.shape[0])
    d, _ = tree.query(Zp, k=k, workers=workers)
    d = d.reshape(Z.shape[0], k)
    own = np.sqrt(np.sum((Zp - Z) ** 2, axis=1))
    radius = d[:, 0] * (1.0 + 1e-9) + 1e-12
    linked = own <= radius if allowed is None else (own <= radius) & allowed
    credit = np.zeros(Z.shape[0])
    credit[linked] = 1.0
    tied = np.flatnonzero(linked & (d[:, k - 1] <= radius)) if k == 2 else np.zeros(0, dtype=np.intp)
    if tied.size:
        credit[tied] = 1.0 / np.maximum(_distinct_counts(tree, Zp[tied], radius[tied], workers), 1.0)
    return float(credit.mean()), float(credit.sum())


def _distinct_counts(tree: Any, queries: np.ndarray, radius: np.ndarray, workers: int) -> np.ndarray:
    """How many points of ``tree`` lie within ``radius`` of each query row,
    each distinct (row, radius) asked once."""
    distinct, back = np.unique(np.column_stack([queries, radius]), axis=0, return_inverse=True)
    found = tree.query_ball_point(distinct[:, :-1], r=distinct[:, -1], return_length=True, workers=workers)
    return np.asarray(found, dtype=float).reshape(-1)[np.asarray(back).ravel()]


def interval_disclosure(X: np.ndarray, Y: np.ndarray, width: float) -> tuple[float, float, float]:
    """Interval disclosure (SDID, Mateo-Sanz et al. 2004) as sdcMicro's
    ``dRiskWORK`` computes it: around each protected value ``y_ij`` the
    interval ``[y_ij - width * s'_j, y_ij + width * s'_j]``, with ``s'_j`` the
    sample s.d. (``ddof=1``) of protected column ``j`` over its observed
    values. Returns ``(drisk, drisk_all_inside, values_inside)``:

    * ``drisk``: sdcMicro's figure, the share of records with **at most one**
      original value outside its interval (``rowSums(x < mi | x > ma) %in%
      0:1``);
    * ``drisk_all_inside``: the stricter share of records whose **every**
      original value lies inside its interval;
    * ``values_inside``: the share of single values inside their interval.

    With missing values, over the cells observed in both files: a cell not
    observed in both is never outside (as sdcMicro's ``na.rm = TRUE``) and
    never inside, and a record with no such cell is left out (sdcMicro counts
    it at risk). A column with fewer than two observed protected values has
    no s.d. (R's ``NA``): its cells are neither outside nor inside."""
    X, Y = _rescaled(X, Y)
    both = _compared(X, Y)
    observed = ~np.isnan(Y)
    count = observed.sum(axis=0)
    mean = np.where(observed, Y, 0.0).sum(axis=0) / np.maximum(count, 1)
    squares = np.where(observed, Y - mean, 0.0) ** 2
    sd = np.where(count > 1, np.sqrt(squares.sum(axis=0) / np.maximum(count - 1, 1)), np.nan)
    half = width * sd
    both = both & np.isfinite(half)  # a column without an s.d. has no interval: its cells count nowhere
    with np.errstate(invalid="ignore"):
        low, high = Y - half, Y + half
        outside = ((X < low) | (X > high)) & both  # a comparison with NaN is False: never outside
        inside = (X >= low) & (X <= high) & both
    at_risk = outside.sum(axis=1) <= 1
    all_inside = np.all(inside | ~both, axis=1)
    rows = both.any(axis=1)
    if not rows.any():
        return float("nan"), float("nan"), float("nan")
    return float(at_risk[rows].mean()), float(all_inside[rows].mean()), float(inside.sum() / both.sum())


def realised_sizes(labels: np.ndarray) -> np.ndarray:
    """Sizes of the non-empty groups of the realised assignment (``-1`` ignored)."""
    lab = np.asarray(labels)
    lab = lab[lab >= 0]
    sizes = np.bincount(lab) if lab.size else np.zeros(0, dtype=np.int64)
    return sizes[sizes > 0]


def expected_sizes(memberships: object) -> np.ndarray:
    """Column sums of the replacement memberships (dense array or
    :class:`privclust.TopMemberships`, via ``bincount``)."""
    if hasattr(memberships, "column_sums"):
        return np.asarray(memberships.column_sums(), dtype=float)  # type: ignore[attr-defined]
    return np.asarray(memberships, dtype=float).sum(axis=0)


def transparency_posteriors(labels: np.ndarray, memberships: object | None,
                            seen: np.ndarray | None = None) -> np.ndarray:
    """Per record ``i`` replaced by centre ``j = labels[i]``: the posterior
    ``u_ij / sum_k u_kj`` an intruder who knows the memberships gives to the
    true original; ``1/|group|`` for a crisp partition (``memberships`` None).
    This reads one released row on its own; with ``memberships`` None it is,
    for a fuzzy partition's labels, the upper bound ``1/N`` of the posterior
    given the whole released file (``N`` records drew the centre and show
    the same rest of the row; the exact posterior is ``P(L_i = j | N) / N``).

    ``seen`` (one code per record, :func:`shown_codes`): what a released
    row shows besides its centre (the other columns, which values are
    missing), equal for two records exactly when their rows show the same.
    The intruder, who knows the original records, gives no weight to an
    original whose row would show otherwise: the sums run over the records
    with the same code, ``u_ij / sum_{k: seen_k = seen_i} u_kj`` (a red-team
    audit: a key released as it is singled out the only woman of a group of
    3, which read 1/3).

    With :class:`privclust.TopMemberships`, ``u_ij`` is 0 where ``j`` is not
    among record ``i``'s kept centres (the truncated mass is reported by the
    masker)."""
    lab = np.asarray(labels, dtype=np.int64)
    valid = lab >= 0
    n = lab.shape[0]
    out = np.full(n, np.nan)
    code = np.zeros(n, dtype=np.int64) if seen is None else pd.factorize(np.asarray(seen))[0].astype(np.int64)
    if memberships is None:
        cells = pd.factorize(code[valid] * (int(lab.max(initial=0)) + 1) + lab[valid])[0]
        out[valid] = 1.0 / np.bincount(cells)[cells]
        return out
    if hasattr(memberships, "indices"):
        idx = np.asarray(memberships.indices)  # type: ignore[attr-defined]
        val = np.asarray(memberships.values)  # type: ignore[attr-defined]
        hit = idx == lab[:, None]
        own = np.where(hit, val, 0.0).sum(axis=1)
    else:
        U = np.asarray(memberships, dtype=float)
        own = np.zeros(n)
        own[valid] = U[np.flatnonzero(valid), lab[valid]]
    if seen is None:
        col = expected_sizes(memberships)
        denom = col[np.where(valid, lab, 0)]
    else:  # sum_k u_kj over the records k that show what record i shows: one (code, centre) pair at a time
        if hasattr(memberships, "indices"):
            pair_code, pair_centre, pair_value = np.repeat(code, idx.shape[1]), idx.ravel(), val.ravel()
        else:
            pair_code, pair_centre = np.repeat(code, U.shape[1]), np.tile(np.arange(U.shape[1]), n)
            pair_value = U.ravel()
        width = int(max(pair_centre.max(initial=0), lab.max(initial=0))) + 1
        keys, sums = np.unique(pair_code * width + pair_centre, return_inverse=True)
        totals = np.bincount(sums.ravel(), weights=pair_value, minlength=keys.size)
        wanted = code * width + np.where(valid, lab, 0)
        if keys.size:
            at = np.clip(np.searchsorted(keys, wanted), 0, keys.size - 1)
            denom = np.where(keys[at] == wanted, totals[at], 0.0)
        else:
            denom = np.zeros(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        post = np.where(denom > 0, own / np.where(denom > 0, denom, 1.0), 0.0)
    out[valid] = post[valid]
    return out


def shown_codes(original: pd.DataFrame, protected: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Per record, one code for what its released row shows besides the masker's centre: the released values of
    every other column of the original (a missing value a value of its own), and of the masker's ``columns`` which
    values are missing, or their values where the step released them as they are (a clusterer, whose labels sit
    beside the raw values). Two records share a code exactly when their rows show the same. Taken on the released
    rows, not on the originals: a key a masker recoded or suppressed still splits the group (comparing with the
    originals dropped such a key, and the only woman of a group of 3 read 1/3 again: a red-team audit); conservative
    where a key masker is random or suppresses (an intruder's candidates for a row are at least the records whose
    own rows show the same)."""
    parts: list[np.ndarray] = []
    for c in protected.columns:
        if c not in original.columns:
            continue
        values = protected[c]
        if c in columns:
            a = original[c]
            try:
                same = np.asarray(a.to_numpy() == values.to_numpy(), dtype=bool)
                raw = bool(((a.isna().to_numpy() & values.isna().to_numpy()) | same).all())
            except (TypeError, ValueError):
                raw = False
            if not raw:  # the centre: only which values are missing shows
                parts.append(values.isna().to_numpy().astype(np.int64))
                continue
        parts.append(pd.factorize(values, use_na_sentinel=False)[0].astype(np.int64))
    return kr._combined(np.column_stack(parts)) if parts else np.zeros(len(protected), dtype=np.int64)


# ---------------------------------------------------------------------------
# Categorical key variables
# ---------------------------------------------------------------------------


def key_cells(keys: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each record's key combination as a cell code, and each record's cell
    size (sample frequency ``f_k``). A missing key value is a category of its
    own."""
    codes = np.zeros(keys.shape[0], dtype=np.int64)
    for c in keys.columns:
        column_codes, uniques = pd.factorize(keys[c], use_na_sentinel=False)
        codes = codes * (len(uniques) + 1) + column_codes
        codes = pd.factorize(codes)[0]  # keep the codes small whatever the number of keys
    sizes = np.bincount(codes)
    return codes, sizes[codes]


def individual_risk(sample_freq: np.ndarray, pop_freq: np.ndarray) -> np.ndarray:
    """The individual re-identification risk of Benedetti & Franconi (1998),
    as sdcMicro's ``measure_risk`` defines it: ``r = E[1 / F | f]`` with the
    population frequency ``F = f + H``, ``H`` negative binomial with ``f``
    successes and ``p = f / F_hat`` (``F_hat`` the sum of the sampling weights
    in the cell). Computed exactly, ``r = p^f / f * 2F1(f, f; f + 1; 1 - p)``,
    evaluated after Euler's transformation as ``r = p / f * 2F1(1, 1; f + 1;
    1 - p)`` (a series of positive terms: no overflow for large cells or
    small ``p``); for ``f = 1`` it is ``p ln(1/p) / (1 - p)``, and ``r = 1 / f``
    when ``p = 1``."""
    f = np.asarray(sample_freq, dtype=float)
    with np.errstate(over="ignore"):  # a cell of weights near 1e308: F_hat = inf, p = 0
        p = np.clip(f / np.asarray(pop_freq, dtype=float), 0.0, 1.0)
    q = 1.0 - p
    out = 1.0 / f
    with np.errstate(divide="ignore", invalid="ignore"):
        one = (f == 1) & (q > 0)  # p ln(1/p) / (1 - p)
        # ln(1/p) from p itself where p is small: from q, 1 - p rounds to 1 below p = 1e-16 and
        # log1p(-1) = -inf made the risk of a sample unique with a large weight inf, shown as 1
        log_inv = np.where(p[one] < 0.5, -np.log(p[one]), -np.log1p(-q[one]))
        out[one] = np.where(p[one] > 0, p[one] * log_inv / q[one], 0.0)  # the limit at p = 0 is 0
        more = (f > 1) & (q > 0)  # f = 2 is p / (1 - p)^2 * ((1 - p) + p ln p), which cancels near p = 1
        out[more] = p[more] / f[more] * special.hyp2f1(1.0, 1.0, f[more] + 1.0, q[more])
    out[more & (p == 0)] = 0.0  # 2F1(1, 1; f + 1; 1) = f / (f - 1) is finite: the risk tends to 0 with p
    rest = more & ~np.isfinite(out)
    if rest.any():  # where scipy gives up (large cells, p near 0): the series itself
        out[rest] = p[rest] / f[rest] * _hyp2f1_11(f[rest] + 1.0, q[rest])
    return np.minimum(out, 1.0)


def _hyp2f1_11(c: np.ndarray, z: np.ndarray, max_terms: int = 200_000) -> np.ndarray:
    """``2F1(1, 1; c; z)`` for ``c >= 3`` and ``0 <= z < 1`` by its series
    ``sum_n n! / (c)_n z^n`` (positive terms, each at most ``2 / n^2``, so
    the tail after ``max_terms`` is below 1e-5 in the worst case, ``z`` near
    1 with ``c = 3``, and far below that otherwise)."""
    total = np.ones_like(z)
    term = np.ones_like(z)
    for n in range(max_terms):
        term = term * (n + 1.0) * z / (c + n)
        total += term
        if n % 64 == 0 and np.all(term <= 1e-17 * total):
            break
    return total


def dbrl_among_matches(X: np.ndarray, Y: np.ndarray, keys: np.ndarray, *, known: np.ndarray | None = None,
                       workers: int = 1) -> tuple[float, float]:
    """Distance-based record linkage restricted to the records whose keys
    match: ``keys`` are the released key codes (:func:`_key_risk.encode`,
    ``-1`` for a missing value), row ``i`` those of record ``i``; ``known``
    (codes of the same encoding; default ``keys``) the keys the intruder
    gives each original record ``i``. For each released record ``j``, the
    candidate originals are the records ``i`` whose known keys match ``j``'s
    released keys (agree on every key both observe: a missing value matches
    any category); ``j`` scores ``1/t`` when its own original is among the
    ``t`` tied nearest candidates (the distance of :func:`dbrl`). With
    unchanged keys the candidates are the records with the same key
    combination. Vectorised over the blocks of
    :func:`_key_risk.matching_blocks` (a pair of missingness patterns of the
    keys, keyed on the keys both observe), each cell of a block moved far
    apart along an extra axis; memory O(N)."""
    X, Y = _rescaled(X, Y)
    mean, sd, varying = _varying(X)
    scale = np.where(varying, sd, 1.0)
    Z = (X - mean) / scale
    Zp = (Y - mean) / scale
    both = np.vstack([Z, Zp])
    span = float(np.sqrt(np.nansum((np.nanmax(both, axis=0) - np.nanmin(both, axis=0)) ** 2))) if both.size else 0.0
    gap = 2.0 * span + 1.0  # further than any distance within the data: the nearest candidate is in the own cell
    R2 = np.append(np.nan_to_num((np.nanmax(Z, axis=0) - np.nanmin(Z, axis=0)) ** 2), 0.0)  # cell axis: observed
    ox, op = ~np.isnan(Z), ~np.isnan(Zp)
    diff = np.where(ox & op, np.nan_to_num(Zp) - np.nan_to_num(Z), 0.0)
    own = np.sqrt(np.sum(diff ** 2, axis=1) + (ox ^ op) @ R2[:-1])

    n_rec = keys.shape[0]
    codes = keys if known is None else np.vstack([keys, known])  # released rows, then the intruder's rows
    pool = None if known is None else np.arange(n_rec, 2 * n_rec)

    def blocks(queries: np.ndarray | None) -> Any:
        asked = queries if queries is not None or known is None else np.arange(n_rec)
        for q_rows, d_rows, q_keys, d_keys in kr.matching_blocks(codes, asked, pool):
            if known is not None:
                d_rows = d_rows - n_rec
            # only the rows with a match on the other side: a few suppressed records meet a few cells of the rest
            hit_q, hit_d = np.isin(q_keys, d_keys), np.isin(d_keys, q_keys)
            if not hit_q.any():
                continue
            q_rows, q_keys, d_rows, d_keys = q_rows[hit_q], q_keys[hit_q], d_rows[hit_d], d_keys[hit_d]
            cells = pd.factorize(np.concatenate([q_keys, d_keys]))[0] * gap
            yield (q_rows, np.column_stack([Zp[q_rows], cells[:len(q_rows)]]),
                   np.column_stack([Z[d_rows], cells[len(q_rows):]]))

    n = Z.shape[0]
    nearest = np.full(n, np.inf)
    for q_rows, Zq, Zd in blocks(None):
        nearest[q_rows] = np.minimum(nearest[q_rows], _nearest_distances(Zd, Zq, R2, workers))
    radius = nearest * (1.0 + 1e-9) + 1e-12
    linked = np.flatnonzero(own <= radius)  # always a candidate of itself: only ties with others can fail this
    counts = np.zeros(n)
    if linked.size:
        for q_rows, Zq, Zd in blocks(linked):
            counts[q_rows] += _counts_within(Zd, Zq, radius[q_rows], R2, workers)
    credit = np.zeros(n)
    credit[linked] = 1.0 / np.maximum(counts[linked], 1.0)
    return float(credit.mean()), float(credit.sum())


def _pattern_pairs(Zd: np.ndarray, Zq: np.ndarray, R2: np.ndarray) -> Any:
    """The pairs of missingness patterns of the data rows ``Zd`` and query rows
    ``Zq``: yields ``(data pattern number, data rows, query rows, common
    observed coordinates, the constant part of the squared distance)`` (MDAV's distance: a coordinate's
    squared range ``R2`` where one of the two misses it)."""
    od, oq = ~np.isnan(Zd), ~np.isnan(Zq)
    if od.all() and oq.all():  # no missing value: one pair
        yield 0, np.arange(Zd.shape[0]), np.arange(Zq.shape[0]), np.ones(Zd.shape[1], dtype=bool), 0.0
        return
    pd_, of_d = np.unique(od, axis=0, return_inverse=True)
    pq, of_q = np.unique(oq, axis=0, return_inverse=True)
    of_d, of_q = np.asarray(of_d).ravel(), np.asarray(of_q).ravel()
    rows_d = [np.flatnonzero(of_d == a) for a in range(len(pd_))]
    for b, pb in enumerate(pq):
        rows_q = np.flatnonzero(of_q == b)
        for a, pa in enumerate(pd_):
            yield a, rows_d[a], rows_q, pa & pb, float(R2[pa ^ pb].sum())


def _nearest_distances(Zd: np.ndarray, Zq: np.ndarray, R2: np.ndarray, workers: int) -> np.ndarray:
    """Each query row's distance to its nearest data row (inf when there is none)."""
    out = np.full(Zq.shape[0], np.inf)
    for _, rows_d, rows_q, common, const in _pattern_pairs(Zd, Zq, R2):
        d, _ = cKDTree(Zd[np.ix_(rows_d, common)]).query(Zq[np.ix_(rows_q, common)], k=1, workers=workers)
        out[rows_q] = np.minimum(out[rows_q], d if const == 0 else np.sqrt(d ** 2 + const))
    return out


def _counts_within(Zd: np.ndarray, Zq: np.ndarray, radius: np.ndarray, R2: np.ndarray, workers: int) -> np.ndarray:
    """How many data rows lie within ``radius`` (one per query row) of each query row."""
    counts = np.zeros(Zq.shape[0])
    trees: dict[tuple[int, bytes], Any] = {}
    for a, rows_d, rows_q, common, const in _pattern_pairs(Zd, Zq, R2):
        room = radius[rows_q] ** 2 - const
        ok = room >= 0
        if not ok.any():
            continue
        key = (a, common.tobytes())
        if key not in trees:
            trees[key] = cKDTree(Zd[np.ix_(rows_d, common)])
        r = radius[rows_q][ok] if const == 0 else np.sqrt(room[ok])
        counts[rows_q[ok]] += _distinct_counts(trees[key], Zq[np.ix_(rows_q[ok], common)], r, workers)
    return counts


# ---------------------------------------------------------------------------
# The evaluators' keys, weights and key frequencies (shared by microdata_evaluators and key_risk)
# ---------------------------------------------------------------------------


def key_role(keys: tuple[str, ...], inputs: EvaluationInputs, with_strata: bool = True) -> tuple[str, ...]:
    """The evaluator's own ``keys``, else the recipe's ``[roles] keys``; then
    (``with_strata``) the recipe's ``[roles] strata``: they are public by
    declaration and released unchanged, so an intruder knows them as well as
    any key, and a record unique within its stratum is unique (counting the
    keys alone understated the sample uniques and the risk)."""
    roles = getattr(inputs, "roles", None)
    chosen = tuple(keys) or (tuple(roles.keys) if roles is not None else ())
    if not chosen or not with_strata or roles is None:
        return chosen
    return chosen + tuple(c for c in roles.strata if c not in chosen)


def strata_param() -> Any:
    """The ``with_strata`` parameter of the key evaluators."""
    return param(bool, default=True, doc="count the recipe's [roles] strata as key variables too (public by "
                                         "declaration: an intruder knows them); false: the keys alone")


def weight_role(weight: str | None, inputs: EvaluationInputs) -> str | None:
    """The evaluator's own ``weight``, else the recipe's ``[roles] weight``."""
    roles = getattr(inputs, "roles", None)
    return weight if weight is not None else (roles.weight_column if roles is not None else None)


def named_keys(keys: tuple[str, ...], who: str) -> tuple[str, ...]:
    """``keys``, refused when there are none (asked by ``evaluated_on`` before any step runs as well)."""
    if not keys:
        raise DataError(f"{who}: name the categorical key variables: {{ use = \"{who}\", keys = [\"sex\", "
                        "\"region\"] }, or give the recipe a [roles] keys = [...] table")
    bad = [k for k in keys if not isinstance(k, str)]
    if bad:  # keys = [1] passed check (a number is no column name) and was refused after every step had run
        raise DataError(f"{who}: keys must be column names (strings); got {bad!r} (e.g. keys = [\"sex\", "
                        "\"region\"])")
    return keys


def key_frame(frame: pd.DataFrame, keys: tuple[str, ...], who: str, what: str) -> pd.DataFrame:
    """The columns ``keys`` of ``frame`` (``what``: "protected" or "original", for the error)."""
    named_keys(keys, who)
    missing = [c for c in keys if c not in frame.columns]
    if missing:
        raise DataError(f"{who}: key column(s) {', '.join(map(repr, missing))} are not in the {what} data; "
                        f"the columns are {', '.join(map(str, frame.columns))}")
    return frame.loc[:, list(keys)]


def sampling_weights(frame: pd.DataFrame, weight: str | None, who: str, *, sample: bool = False
                     ) -> np.ndarray | None:
    """The sampling weights of column ``weight`` of ``frame`` (every
    evaluator passes the original file: the weights the records were drawn
    with, whatever a step did to the released column). ``sample``: the
    figure uses sample variances, ``sum w (x - mean)^2 / (sum w - 1)``,
    which need the weights to add up to more than 1."""
    if weight is None:
        return None
    if weight not in frame.columns:
        raise DataError(f"{who}: the weight column {weight!r} is not in the data")
    series = frame[weight]
    if not privclust.is_real_column(series):
        raise DataError(f"{who}: the weight column {weight!r} is not numeric (dtype {series.dtype})")
    w = series.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(w) | (w <= 0)
    if bad.any():
        raise DataError(f"{who}: the weight column {weight!r} has {int(bad.sum())} value(s) that are missing, "
                        "infinite or not positive; every sampling weight must be a positive number")
    if sample:
        unit = float(2.0 ** (np.frexp(np.max(w))[1] - 1))  # a sum of weights of 1e308 overflows: add them scaled
        total = float(np.sum(w / unit))
        if not total * unit > 1.0:
            raise DataError(f"{who}: the weight column {weight!r} adds up to {total * unit:.6g}; the sample "
                            "variances of this figure divide by (sum of the weights - 1), so the weights must add "
                            "up to more than 1 (sampling weights count population units: each is usually >= 1)")
    return w


def key_frequencies(keys: pd.DataFrame, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """sdcMicro's ``freqCalc``: per record, the sample frequency ``f_k`` (the
    records that match it on ``keys``, itself included) and the estimated
    population frequency ``F_k`` (the sum of their ``weights``; ``f_k``
    without weights). A missing key value matches any category: two records
    match when they agree on every key both observe (the convention of every
    key evaluator; the host's verdict counts the records with ``f_k < k`` so
    too, beside its count of identical rows)."""
    unit = 1.0 if weights is None else float(2.0 ** (np.frexp(np.max(weights))[1] - 1))  # weights of 1e308: scaled
    scaled = None if weights is None else np.asarray(weights, dtype=float) / unit
    if not keys.isna().to_numpy().any():  # no missing value: a record matches exactly its equal records (hashing)
        cells, f = key_cells(keys)
        sums = None if scaled is None else np.bincount(cells, weights=scaled)[cells]
    else:
        f, sums = kr.match_totals(kr.encode(keys), scaled)
    if sums is None:
        return f, f.astype(float)
    with np.errstate(over="ignore"):
        population = sums * unit  # inf beyond the largest float: p = f / F_hat = 0 there
    return f, population


def record_risks(inputs: EvaluationInputs, keys: tuple[str, ...], with_strata: bool, weight: str | None,
                 who: str) -> np.ndarray:
    """Each released record's individual risk (Benedetti & Franconi, the
    kernel :func:`individual_risk`) from :func:`key_frequencies` of the
    released keys (and strata) and the original file's weights (a step that
    masked the weight column does not change how many population units a
    record stands for); without a weight the file is the population
    (``1/f``)."""
    frame = key_frame(inputs.protected, key_role(keys, inputs, with_strata), who, "protected")
    f, population = key_frequencies(frame, sampling_weights(inputs.original, weight_role(weight, inputs), who))
    return individual_risk(f, np.maximum(population, f))
