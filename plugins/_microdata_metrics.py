"""Kernels of the microdata evaluators: information loss and disclosure risk
on arrays (original ``X`` and protected ``Y``, same shape, row ``i`` of
``Y`` is the protected version of row ``i`` of ``X``).

Pure numpy/scipy functions; the components in
:mod:`privclust_plugins.microdata_evaluators` pick the columns and the
partition and name the figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special
from scipy.spatial import cKDTree

__all__ = [
    "dbrl",
    "expected_sizes",
    "il1s",
    "interval_disclosure",
    "moments",
    "realised_sizes",
    "sse_sst",
    "transparency_posteriors",
]


def _weighted_mean(X: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    return X.mean(axis=0) if w is None else (w @ X) / w.sum()


def _varying(X: np.ndarray, ddof: int = 0, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, standard deviations and the mask of non-constant columns. With
    sampling weights ``w`` (each record stands for ``w_i`` population units)
    the mean is ``sum w x / sum w`` and the variance
    ``sum w (x - mean)^2 / (sum w - ddof)``."""
    mean = _weighted_mean(X, w)
    if w is None:
        sd = X.std(axis=0, ddof=ddof) if X.shape[0] > ddof else np.zeros(X.shape[1])
    else:
        total = w.sum()
        sd = np.sqrt(np.maximum(w @ (X - mean) ** 2, 0.0) / (total - ddof)) if total > ddof else \
            np.zeros(X.shape[1])
    varying = sd > 1e-12 * np.maximum(1.0, np.abs(mean))
    return mean, sd, varying


def sse_sst(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None = None) -> tuple[float, float, float]:
    """``(100 SSE/SST, SSE, SST)`` on variables standardised with the
    original's mean and population s.d.: ``SSE = sum (z - z')^2``,
    ``SST = sum (z - mean z)^2`` (= N times the number of non-constant
    columns). Constant columns are left out. With sampling weights ``w``
    every record's terms count ``w_i`` times (weighted mean and s.d.)."""
    mean, sd, varying = _varying(X, w=w)
    if not varying.any():
        return float("nan"), 0.0, 0.0
    Z = (X[:, varying] - mean[varying]) / sd[varying]
    Zp = (Y[:, varying] - mean[varying]) / sd[varying]
    weights = np.ones(X.shape[0]) if w is None else w
    sse = float(weights @ np.sum((Z - Zp) ** 2, axis=1))
    sst = float(weights @ np.sum(Z ** 2, axis=1))
    return 100.0 * sse / sst, sse, sst


def il1s(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None = None) -> float:
    """IL1s (Mateo-Sanz, Domingo-Ferrer & Sebe 2005; sdcMicro's ``dUtility``):
    ``1/(N p) sum_i sum_j |x_ij - y_ij| / (sqrt(2) s_j)`` with ``s_j`` the
    sample standard deviation (``ddof = 1``) of original column ``j``;
    constant columns are left out. With sampling weights, the weighted mean
    over records and the weighted s.d."""
    _, sd, varying = _varying(X, ddof=1, w=w)
    if not varying.any():
        return float("nan")
    per_record = np.mean(np.abs(X[:, varying] - Y[:, varying]) / (np.sqrt(2.0) * sd[varying]), axis=1)
    return float(per_record.mean() if w is None else (w @ per_record) / w.sum())


def _cov(X: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    if w is None:
        return np.atleast_2d(np.cov(X, rowvar=False, ddof=1))
    centred = X - _weighted_mean(X, w)
    return np.atleast_2d((centred * w[:, None]).T @ centred / (w.sum() - 1.0))


def _rel(a: np.ndarray, b: np.ndarray, floor: np.ndarray) -> float:
    """Mean of ``|b - a| / |a|`` over the entries where ``|a| > floor``."""
    keep = np.abs(a) > floor
    if not keep.any():
        return float("nan")
    return float(np.mean(np.abs(b[keep] - a[keep]) / np.abs(a[keep])))


def moments(X: np.ndarray, Y: np.ndarray, w: np.ndarray | None = None) -> dict[str, float]:
    """Relative change of means, variances and covariances (mean over
    variables or pairs of ``|new - old| / |old|``, leaving out entries whose
    original value is 0), and the mean and maximum absolute change of the
    correlations (pairs ``j < l``). Variances and covariances with
    ``ddof = 1``; with sampling weights, the weighted estimates of both files."""
    p = X.shape[1]
    mx, my = _weighted_mean(X, w), _weighted_mean(Y, w)
    scale = np.maximum(np.abs(X).max(axis=0), 1e-300)
    out = {"mean_rel_change": _rel(mx, my, 1e-12 * scale)}
    cx = _cov(X, w)
    cy = _cov(Y, w)
    var_floor = 1e-24 * scale ** 2
    out["var_rel_change"] = _rel(np.diag(cx), np.diag(cy), var_floor)
    iu = np.triu_indices(p, 1)
    if p > 1:
        out["cov_rel_change"] = _rel(cx[iu], cy[iu], 1e-12 * np.sqrt(np.outer(np.diag(cx), np.diag(cx))[iu]) + 1e-300)
        sx, sy = np.sqrt(np.diag(cx)), np.sqrt(np.diag(cy))
        ok = (sx[iu[0]] > 0) & (sx[iu[1]] > 0) & (sy[iu[0]] > 0) & (sy[iu[1]] > 0)
        if ok.any():
            rx = cx[iu][ok] / (sx[iu[0]][ok] * sx[iu[1]][ok])
            ry = cy[iu][ok] / (sy[iu[0]][ok] * sy[iu[1]][ok])
            diff = np.abs(ry - rx)
            out["corr_abs_change"] = float(diff.mean())
            out["corr_max_abs_change"] = float(diff.max())
        else:
            out["corr_abs_change"] = out["corr_max_abs_change"] = float("nan")
    else:
        out["cov_rel_change"] = out["corr_abs_change"] = out["corr_max_abs_change"] = float("nan")
    return out


def dbrl(X: np.ndarray, Y: np.ndarray, *, workers: int = 1) -> tuple[float, float]:
    """Distance-based record linkage: for each protected record, the
    original records nearest to it (Euclidean on variables standardised with
    the original's mean and population s.d.); the record scores ``1/t`` when
    its own original is among the ``t`` tied nearest, else 0.

    Returns ``(share, expected number linked)``. Uses a KD-tree over the
    originals (scipy's ``cKDTree``); memory is O(N).
    """
    mean, sd, varying = _varying(X)
    scale = np.where(varying, sd, 1.0)
    Z = (X - mean) / scale  # a constant column is divided by 1: it adds only where protection changed it
    Zp = (Y - mean) / scale
    return _linkage(Z, Zp, None, workers)


def _linkage(Z: np.ndarray, Zp: np.ndarray, allowed: np.ndarray | None, workers: int) -> tuple[float, float]:
    """Share and expected number of protected rows whose own original is among
    their ``t`` tied nearest originals (credit ``1/t``); ``allowed`` masks
    the rows that may be linked at all."""
    tree = cKDTree(Z)
    nearest, _ = tree.query(Zp, k=1, workers=workers)
    own = np.sqrt(np.sum((Zp - Z) ** 2, axis=1))
    radius = nearest * (1.0 + 1e-9) + 1e-12
    linked = own <= radius if allowed is None else (own <= radius) & allowed
    credit = np.zeros(Z.shape[0])
    rows = np.flatnonzero(linked)
    if rows.size:
        counts = tree.query_ball_point(Zp[rows], r=radius[rows], return_length=True, workers=workers)
        credit[rows] = 1.0 / np.maximum(np.asarray(counts, dtype=float), 1.0)
    return float(credit.mean()), float(credit.sum())


def interval_disclosure(X: np.ndarray, Y: np.ndarray, width: float) -> tuple[float, float]:
    """sdcMicro's ``dRisk`` (SDID, Mateo-Sanz et al. 2004): around each
    protected value ``y_ij`` the interval ``y_ij -/+ width * s'_j`` with
    ``s'_j`` the sample s.d. of protected column ``j``. Returns ``(share of
    records whose every original value lies in its interval (dRisk), share of
    single values inside)``."""
    sd = Y.std(axis=0, ddof=1) if Y.shape[0] > 1 else np.zeros(Y.shape[1])
    half = width * sd
    inside = (X >= Y - half) & (X <= Y + half)
    return float(np.mean(np.all(inside, axis=1))), float(np.mean(inside))


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


def transparency_posteriors(labels: np.ndarray, memberships: object | None) -> np.ndarray:
    """Per record ``i`` replaced by centre ``j = labels[i]``: the posterior
    ``u_ij / sum_k u_kj`` an intruder who knows the memberships gives to the
    true original; ``1/|group|`` for a crisp partition (``memberships`` None).

    With :class:`privclust.TopMemberships`, ``u_ij`` is 0 where ``j`` is not
    among record ``i``'s kept centres (the truncated mass is reported by the
    masker)."""
    lab = np.asarray(labels, dtype=np.int64)
    valid = lab >= 0
    out = np.full(lab.shape[0], np.nan)
    if memberships is None:
        sizes = np.bincount(lab[valid])
        out[valid] = 1.0 / sizes[lab[valid]]
        return out
    col = expected_sizes(memberships)
    if hasattr(memberships, "indices"):
        idx = np.asarray(memberships.indices)  # type: ignore[attr-defined]
        val = np.asarray(memberships.values)  # type: ignore[attr-defined]
        hit = idx == lab[:, None]
        own = np.where(hit, val, 0.0).sum(axis=1)
    else:
        U = np.asarray(memberships, dtype=float)
        own = np.zeros(lab.shape[0])
        own[valid] = U[np.flatnonzero(valid), lab[valid]]
    denom = col[np.where(valid, lab, 0)]
    with np.errstate(invalid="ignore", divide="ignore"):
        post = np.where(denom > 0, own / np.where(denom > 0, denom, 1.0), 0.0)
    out[valid] = post[valid]
    return out


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
    p = np.clip(f / np.asarray(pop_freq, dtype=float), 0.0, 1.0)
    q = 1.0 - p
    out = 1.0 / f
    with np.errstate(divide="ignore", invalid="ignore"):
        one = (f == 1) & (q > 0)  # p ln(1/p) / (1 - p)
        out[one] = p[one] * -np.log1p(-q[one]) / q[one]
        more = (f > 1) & (q > 0)  # f = 2 is p / (1 - p)^2 * ((1 - p) + p ln p), which cancels near p = 1
        out[more] = p[more] / f[more] * special.hyp2f1(1.0, 1.0, f[more] + 1.0, q[more])
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


def dbrl_within_cells(X: np.ndarray, Y: np.ndarray, cells_x: np.ndarray, cells_y: np.ndarray, *,
                      workers: int = 1) -> tuple[float, float]:
    """Distance-based record linkage restricted to the original records that
    share the protected record's key combination: as :func:`dbrl`, with each
    cell moved far apart along an extra axis (further than any distance
    within the data), so that the nearest original is always in the record's
    own cell. A record whose key combination changed is not linked."""
    mean, sd, varying = _varying(X)
    scale = np.where(varying, sd, 1.0)
    Z = (X - mean) / scale
    Zp = (Y - mean) / scale
    both = np.vstack([Z, Zp])
    span = float(np.sqrt(np.sum((both.max(axis=0) - both.min(axis=0)) ** 2))) if both.size else 0.0
    gap = 2.0 * span + 1.0
    return _linkage(np.column_stack([Z, cells_x * gap]), np.column_stack([Zp, cells_y * gap]), cells_x == cells_y,
                    workers)
