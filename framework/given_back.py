"""Columns released as in the original that give back a changed column's original values.

A rank, a rounding or a ratio released beside the column it was computed
from, a design weight with one value per region beside a suppressed region:
the release then holds what its statements say it protects. The host asks
two questions of the released file (red-team audits rt20 F1 and rt21 F1):

* :func:`derived_columns`: do the numeric columns released as in the
  original predict the original values of a changed numeric column (a
  cross-fitted nearest-neighbour regression, scipy's ``cKDTree``)?
* :func:`keys_given_back`: does a column released as in the original give
  back the suppressed or replaced cells of a key or text column, read off
  the released rows as an intruder would?

:func:`privclust.verify.verify` runs both and the verdict opens with what
they find (:data:`~privclust.verdict.DERIVED`). No random draw; the cost is
bounded by :data:`DERIVED_RECORDS` records whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._optional import deferred
from .comparison import joint_codes, values_equal
from .verdict import DERIVED_CLOSER, DERIVED_CLOSER_R2, DERIVED_R2

__all__ = [
    "DERIVED_INFORMATIVE",
    "DERIVED_MAX_COLUMNS",
    "DERIVED_MIN_RECORDS",
    "DERIVED_PAIRS",
    "DERIVED_PAIR_SHARE",
    "DERIVED_PAIR_SOURCES",
    "DERIVED_POOL",
    "DERIVED_RECORDS",
    "KEYS_BACK_MIN_CELLS",
    "ID_COLUMNS_MAX",
    "ID_LIKE_SHARE",
    "ID_PARTS_MAX",
    "ID_TOKENS",
    "KEYS_BACK_SHARE",
    "derived_columns",
    "id_parts",
    "keys_given_back",
    "numeric",
]

#: At most this many records enter the check of derived columns (:func:`derived_columns`), taken at evenly spaced
#: positions of the file (no random draw): memory and time stay bounded whatever the file's size.
DERIVED_RECORDS = 20_000
#: The most columns released as in the original that :func:`derived_columns` combines to predict one changed column.
DERIVED_MAX_COLUMNS = 3
#: The R^2 one column must reach alone before :func:`derived_columns` tries it with others.
DERIVED_INFORMATIVE = 0.1
#: The fewest records (with no missing value among the columns compared) the check of derived columns judges on.
DERIVED_MIN_RECORDS = 20


def numeric(frame: pd.DataFrame, column: str) -> bool:
    dtype = frame[column].dtype
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))


def _local_linear(fit_x: np.ndarray, fit_y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Nearest-neighbour regression of ``fit_y`` on ``fit_x`` at the points ``at``: a linear fit to the 2 d + 2
    nearest training records of each point (scipy's ``cKDTree``), clipped to the training range (a rounding, a rank
    or a sum is predicted exactly between neighbours, not only as their mean)."""
    d = fit_x.shape[1]
    k = min(2 * d + 2, len(fit_y))
    if d == 1 and len(fit_y) >= 2 * k:  # on a line: the k nearest among the 2 k around each point's place in order
        order = np.argsort(fit_x[:, 0], kind="stable")
        line = fit_x[order, 0]
        start = np.clip(np.searchsorted(line, at[:, 0]) - k, 0, len(line) - 2 * k)
        window = start[:, None] + np.arange(2 * k)
        pick = np.argpartition(np.abs(line[window] - at[:, :1]), k - 1, axis=1)[:, :k]
        near = order[np.take_along_axis(window, pick, axis=1)]
    else:
        _, near = deferred("scipy.spatial").cKDTree(fit_x).query(at, k=k)
        near = near.reshape(len(at), k)
    ys = fit_y[near]
    if d == 1:  # the least-squares line through the neighbours, in closed form, taken at the point
        offsets = fit_x[near, 0] - at[:, :1]
        mean_o, mean_y = offsets.mean(axis=1), ys.mean(axis=1)
        spread = (offsets * offsets).mean(axis=1) - mean_o * mean_o
        slope = np.divide((offsets * ys).mean(axis=1) - mean_o * mean_y, spread,
                          out=np.zeros(len(at)), where=spread > 1e-12)
        value = mean_y - slope * mean_o
    else:
        offsets = fit_x[near] - at[:, None, :]
        design = np.concatenate([np.ones((len(at), k, 1)), offsets], axis=2)
        gram = design.transpose(0, 2, 1) @ design + 1e-9 * np.eye(d + 1)
        value = np.linalg.solve(gram, (design.transpose(0, 2, 1) @ ys[..., None]))[:, 0, 0]
    return np.clip(value, fit_y.min(), fit_y.max())


def _sided_linear(fit_x: np.ndarray, fit_y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """On a line (one column): the straight-line fit to the 4 nearest training records below each point or to the
    4 nearest above it, whichever fits its own records better (a smaller sum of squared residuals), taken at the
    point: a jump (a wrap such as ``(u + v) mod 100``) is followed from the side it does not cross, where
    :func:`_local_linear` averages across it."""
    k = 4
    if len(fit_y) < 2 * k:
        return _local_linear(fit_x, fit_y, at)
    order = np.argsort(fit_x[:, 0], kind="stable")
    line, ys = fit_x[order, 0], fit_y[order]
    place = np.searchsorted(line, at[:, 0])
    best = np.full(len(at), np.inf)
    value = np.zeros(len(at))
    for start in (np.clip(place - k, 0, len(line) - k), np.clip(place, 0, len(line) - k)):
        window = start[:, None] + np.arange(k)
        xs, yw = line[window] - at[:, :1], ys[window]
        mean_x, mean_y = xs.mean(axis=1), yw.mean(axis=1)
        spread = (xs * xs).mean(axis=1) - mean_x * mean_x
        slope = np.divide((xs * yw).mean(axis=1) - mean_x * mean_y, spread, out=np.zeros(len(at)),
                          where=spread > 1e-12)
        here = mean_y - slope * mean_x
        sse = ((yw - (here[:, None] + slope[:, None] * xs)) ** 2).sum(axis=1)
        better = sse < best
        best[better], value[better] = sse[better], here[better]
    return np.clip(value, fit_y.min(), fit_y.max())


#: The columns, best first by :func:`_binned_share`, that :func:`derived_columns` fits by nearest neighbours (and
#: any other whose binned share is 0.9 or more).
DERIVED_POOL = 8


def _quantile_bins(x: np.ndarray) -> np.ndarray:
    """Each value's quantile bin (at most 200 bins of at least 20 records; -1 for a missing value), for
    :func:`_binned_share`."""
    ok = ~np.isnan(x)
    m = int(ok.sum())
    bins = max(2, min(200, m // 20))
    bin_of = np.full(x.size, -1, dtype=np.int64)
    where = np.flatnonzero(ok)
    bin_of[where[np.argsort(x[ok], kind="stable")]] = np.arange(m) * bins // max(m, 1)
    return bin_of


def _binned_share(bin_of: np.ndarray, y: np.ndarray) -> float:
    """The share of ``y``'s variance between the quantile bins of a column (``bin_of``, :func:`_quantile_bins`):
    the correlation ratio, about bins / n for an unrelated column and near 1 when ``y`` is a function of it; a
    screen for :func:`derived_columns`."""
    ok = (bin_of >= 0) & ~np.isnan(y)
    bin_of, y = bin_of[ok], y[ok]
    total = float(((y - y.mean()) ** 2).sum()) if y.size else 0.0
    if total == 0.0:
        return 0.0
    count = np.bincount(bin_of)
    mean = np.bincount(bin_of, weights=y) / np.maximum(count, 1)
    return float((count * (mean - y.mean()) ** 2).sum() / total)


#: :func:`derived_columns` tries every pair of the numeric columns released as in the original, whatever each
#: predicts alone, when there are at most this many (66 pairs); above, pairs only of the columns its screen keeps.
DERIVED_PAIR_SOURCES = 12
#: The most of those pairs, best first by :func:`_pair_share`, that :func:`derived_columns` fits by nearest
#: neighbours for one changed column.
DERIVED_PAIRS = 4
#: The share of a changed column's variance a pair's cells must hold (:func:`_pair_share`) for
#: :func:`derived_columns` to fit the pair (an unrelated pair holds about cells / n).
DERIVED_PAIR_SHARE = 0.7


def _width_bins(x: np.ndarray) -> np.ndarray:
    """Each value's bin of equal width (as many bins as :func:`_quantile_bins` makes; -1 for a missing value):
    O(n), no sort, for the screen of pairs (:func:`_pair_share`)."""
    ok = ~np.isnan(x)
    bins = max(2, min(200, int(ok.sum()) // 20))
    low, high = (float(np.min(x[ok])), float(np.max(x[ok]))) if ok.any() else (0.0, 0.0)
    out = np.full(x.size, -1, dtype=np.int64)
    if high > low:
        out[ok] = np.minimum(((x[ok] - low) / (high - low) * bins).astype(np.int64), bins - 1)
    return out


def _pair_share(x1: np.ndarray, x2: np.ndarray, y: np.ndarray) -> float:
    """The screen of a pair of columns for :func:`derived_columns`: the largest share of ``y``'s variance between
    the cells of their joint bins of equal width (about as many cells as :func:`_quantile_bins` makes bins), and
    between the bins of their standardised sum and of their difference; about cells / n when ``y`` is unrelated to
    the pair, whatever each column tells alone. O(n), no sort."""
    ok = ~np.isnan(x1) & ~np.isnan(x2)
    side = max(2, int(np.sqrt(max(4, min(200, int(ok.sum()) // 20)))))
    grid = []
    for x in (x1, x2):
        low, high = float(np.nanmin(x)), float(np.nanmax(x))
        grid.append(np.minimum(((np.where(ok, x, low) - low) / ((high - low) or 1.0) * side).astype(np.int64),
                               side - 1))
    joint = np.where(ok, grid[0] * side + grid[1], -1)
    z1, z2 = ((x - np.nanmean(x)) / (np.nanstd(x) or 1.0) for x in (x1, x2))
    return max(_binned_share(joint, y), _binned_share(_width_bins(z1 + z2), y),
               _binned_share(_width_bins(z1 - z2), y))


def _cross_fitted_r2(x: np.ndarray, y: np.ndarray, predictor: Any = _local_linear) -> float:
    """R^2 of predicting ``y`` from ``x`` (standardised) by :func:`_local_linear`, cross-fitted: the records at even
    positions predict those at odd ones and the other way round; when every value is positive, also on the
    logarithms (a ratio or a product is then a sum) and the better of the two."""
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0.0:
        return float("nan")
    halves = (np.arange(0, len(y), 2), np.arange(1, len(y), 2))
    best = -np.inf
    spaces = [(x, y, False)]
    if (x > 0).all() and (y > 0).all():
        spaces.append((np.log(x), np.log(y), True))
    for xs, ys, logged in spaces:
        spread = xs.std(axis=0)
        xs = (xs - xs.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
        predicted = np.empty(len(y))
        for fit, score in (halves, halves[::-1]):
            predicted[score] = predictor(xs[fit], ys[fit], xs[score])
        if logged:
            predicted = np.exp(predicted)
        best = max(best, 1.0 - float(((y - predicted) ** 2).sum()) / total)
        if best >= DERIVED_R2:
            break
    return best


def derived_columns(original: pd.DataFrame, changed: Sequence[str], unchanged: Sequence[str],
                    released: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Whether the columns released as in the original (``unchanged``: the
    numeric ones are used) give back the original values of a changed column
    (``changed``: the numeric ones are judged).

    For each changed column, a cross-fitted nearest-neighbour regression
    (:func:`_cross_fitted_r2`) on at most :data:`DERIVED_RECORDS` records at
    evenly spaced positions: the unchanged column that predicts its original
    values best, then the one that adds most while it takes a fifth of the
    error left away, up to :data:`DERIVED_MAX_COLUMNS` columns (only when the
    best predicts some of it alone, :data:`DERIVED_INFORMATIVE`). With at
    most :data:`DERIVED_PAIR_SOURCES` such columns, pairs are tried too
    whatever each predicts alone (``a = (u + v) mod 100``: neither ``u`` nor
    ``v`` tells anything of ``a``), the :data:`DERIVED_PAIRS` best by
    :func:`_pair_share` (at least :data:`DERIVED_PAIR_SHARE`), each fitted on the pair and on its sum
    and difference (as released and standardised; on a line also by
    :func:`_sided_linear`).

    A changed column is flagged when its original values are predicted with
    R^2 of at least :data:`DERIVED_R2`, or (given ``released``, the released
    file) with R^2 of at least :data:`DERIVED_CLOSER_R2` and an RMS error
    below :data:`DERIVED_CLOSER` times the RMS error of its released values
    against the original ones: the columns then give it back closer than the
    release does (a noisy copy beside a DP column). It is named with the
    columns of that set and every one that does as well in place of one of
    them (a rank and a rounding of the same column). A column flagged at
    :data:`DERIVED_R2` counts as known for the others (a ratio b = a / r
    gives b back once a rank gives a back), named by the columns that gave it
    back.

    Returns one record per flagged column, in the order of ``changed``:
    ``{"column", "given_back_by", "r2", "records"}``, ``given_back_by`` in
    the order of ``unchanged``; flagged below :data:`DERIVED_R2`, also
    ``"rms"`` (of the prediction) and ``"released_rms"`` (of the released
    values). No random draw; ``original`` is not changed."""
    targets = [c for c in changed if c in original.columns and numeric(original, c)]
    sources = [c for c in unchanged if c in original.columns and numeric(original, c)]
    n = len(original)
    if not targets or not sources or n < DERIVED_MIN_RECORDS:
        return []
    m = min(n, DERIVED_RECORDS)
    rows = np.unique(np.arange(m) * n // m)
    values = {c: original[c].iloc[rows].to_numpy(dtype=float, na_value=np.nan) for c in {*targets, *sources}}
    sources = [c for c in sources if np.nanstd(values[c]) > 0]  # a constant column predicts nothing
    known: dict[str, list[str]] = {c: [c] for c in sources}  # a usable column -> the released columns it stands for
    # the RMS error of each changed column's released values against its original ones (on the records where both
    # are numbers): the bar of the second tier; none where too few records are released as numbers (a recode to
    # text bands, a column suppressed), and then only R^2 >= DERIVED_R2 flags it
    released_rms: dict[str, float] = {}
    if released is not None:
        for target in targets:
            now = pd.to_numeric(released[target].iloc[rows], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            both = ~np.isnan(now) & ~np.isnan(values[target])
            if both.sum() >= DERIVED_MIN_RECORDS:
                released_rms[target] = float(np.sqrt(np.mean((now[both] - values[target][both]) ** 2)))

    measured: dict[tuple[str, tuple[str, ...], bool], tuple[float, float]] = {}
    binned: dict[str, np.ndarray] = {}

    def bins_of(column: str) -> np.ndarray:
        if column not in binned:
            binned[column] = _quantile_bins(values[column])
        return binned[column]

    def fit(target: str, columns: Sequence[str], lines: bool = False) -> tuple[float, float]:
        """R^2 and the RMS error of predicting ``target`` from ``columns`` (cached); ``lines``: a pair also on its
        sum and difference (the pair search)."""
        key = (target, tuple(sorted(columns)), lines and len(columns) == 2)
        if key not in measured:
            measured[key] = fitted(target, key[1], key[2])
        return measured[key]

    def r2(target: str, columns: Sequence[str], lines: bool = False) -> float:
        return fit(target, columns, lines)[0]

    def flags(target: str, columns: Sequence[str], lines: bool = False) -> bool:
        got, rms = fit(target, columns, lines)
        closer = released_rms.get(target)
        return got >= DERIVED_R2 or (closer is not None and got >= DERIVED_CLOSER_R2 and rms < DERIVED_CLOSER * closer)

    def fitted(target: str, columns: Sequence[str], lines: bool) -> tuple[float, float]:
        x = np.column_stack([values[c] for c in columns])
        y = values[target]
        ok = ~np.isnan(y) & ~np.isnan(x).any(axis=1)
        if ok.sum() < DERIVED_MIN_RECORDS:
            return -np.inf, np.inf
        x, y = x[ok], y[ok]
        got = _cross_fitted_r2(x, y)
        if lines and not got >= DERIVED_R2:
            # a pair is also fitted on its sum and its difference, as released and standardised: a wrap (a = (u + v)
            # mod 100) is a jump on a line there, followed from either side (the fit on the plane averages across it)
            z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
            for line in (x[:, 0] + x[:, 1], x[:, 0] - x[:, 1], z[:, 0] + z[:, 1], z[:, 0] - z[:, 1]):
                if line.std() > 0 and not got >= DERIVED_R2:
                    got = np.nanmax([got, _cross_fitted_r2(line[:, None], y),
                                     _cross_fitted_r2(line[:, None], y, _sided_linear)])
        if np.isnan(got):
            return -np.inf, np.inf
        return got, float(np.sqrt(max(0.0, 1.0 - got) * np.mean((y - y.mean()) ** 2)))

    def given_back(target: str) -> tuple[list[str], list[str], bool]:
        """The set of columns found (best first) and, when they flag ``target``, the released columns that give it
        back (none when they do not)."""
        usable = list(known)
        # a cheap screen first (the share of the target's variance between quantile bins of each column, O(n)), so
        # that the nearest-neighbour fits run on the few best columns only: one fit a column cost 6 s with 60
        # unrelated columns beside 5 changed ones at 100,000 records
        screen = {c: _binned_share(bins_of(c), values[target]) for c in usable}
        ranked = sorted(usable, key=lambda c: -screen[c])
        pool = ranked[:DERIVED_POOL]
        single: dict[str, float] = {}
        chosen: list[str] = []
        best, lines = -np.inf, False
        if screen[ranked[0]] >= DERIVED_INFORMATIVE / 2:  # some column predicts some of it (unrelated ones: bins / n)
            single = {c: r2(target, [c]) for c in [*pool, *(c for c in ranked[DERIVED_POOL:] if screen[c] >= 0.9)]}
            ranked = sorted(single, key=lambda c: -single[c])
            chosen, best = [ranked[0]], single[ranked[0]]
            # columns that together give back a value each predict part of it (R^2 about 1/2 each for a sum or a
            # ratio of two): when none predicts any of it, no combination is tried (unrelated columns cost a fit
            # each); a column is added while it takes a fifth of the error left away, past R^2 0.99 too up to 0.999
            # (a rounding beside a rank)
            while DERIVED_INFORMATIVE < best < 0.999 and len(chosen) < DERIVED_MAX_COLUMNS:
                tried = {c: r2(target, [*chosen, c]) for c in pool if c not in chosen}
                column = max(tried, key=lambda c: tried[c], default=None)
                if column is None or not 1.0 - tried[column] < 0.8 * (1.0 - best):
                    break
                chosen.append(column)
                best = tried[column]
        if not (chosen and flags(target, chosen)) and 2 <= len(usable) <= DERIVED_PAIR_SOURCES:
            # a pair that gives it back when neither column tells anything of it alone (red-team audit rt22 F3: u
            # random and v = (a - u) mod 100): with few columns every pair is screened, whatever the screen above
            # said, and the best few are fitted; with more, only the pairs of the columns kept above
            shares = {(c, d): _pair_share(values[c], values[d], values[target])
                      for i, c in enumerate(usable) for d in usable[i + 1:]}
            # (a pair that leaves 30 % of the variance within its cells does not reach R^2 0.9: DERIVED_PAIR_SHARE)
            pairs = sorted((p for p in shares if shares[p] >= DERIVED_PAIR_SHARE), key=lambda p: -shares[p])
            for pair in pairs[:DERIVED_PAIRS]:
                if r2(target, pair, True) > best:
                    chosen, best, lines = list(pair), r2(target, pair, True), True
        if not chosen or not flags(target, chosen, lines):
            return chosen, [], lines
        # every column that gives it back in place of one of the set found, alone or with the others (a rank and
        # a rounding of the same column), among the best predictors alone
        taking_part = [c for c in usable if c in chosen or (c in single and flags(target, [c]))
                       or (c in pool and len(chosen) > 1
                       and any(flags(target, [*(k for k in chosen if k != member), c], lines) for member in chosen))]
        return chosen, list(dict.fromkeys(s for c in taking_part for s in known[c])), lines

    found: dict[str, dict[str, Any]] = {}
    left = list(targets) if sources else []
    while left:
        new: dict[str, dict[str, Any]] = {}
        for target in left:
            chosen, columns, lines = given_back(target)
            if columns:
                best, rms = fit(target, chosen, lines)
                new[target] = {"column": target, "given_back_by": [c for c in sources if c in columns],
                               "r2": float(best), "records": int(len(rows))}
                if best < DERIVED_R2:  # closer than the release: both errors are the figures
                    new[target].update(rms=rms, released_rms=released_rms[target])
        if not new:
            break
        found.update(new)
        # only a column given back at R^2 >= DERIVED_R2 stands for its original values in the fits of the others
        known.update({t: item["given_back_by"] for t, item in new.items() if item["r2"] >= DERIVED_R2})
        left = [t for t in left if t not in new]
    return [found[t] for t in targets if t in found]


#: The share of the changed cells of a key (suppressed, or replaced by a recode or PRAM) a column released as in the
#: original reads a value for that it must read right (the original value) for :func:`keys_given_back` to flag it.
KEYS_BACK_SHARE = 0.9
#: The fewest changed cells of one kind (suppressed, or replaced) a column must give back exactly for
#: :func:`keys_given_back` to flag it: fewer flag nothing (a handful of cells read right by chance is not a column
#: that gives the key back).
KEYS_BACK_MIN_CELLS = 10


def _modes(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct ``source`` code (sorted) and the ``target`` code most of its records hold (the lowest code on
    a tie): the map an intruder reads off the released rows."""
    width, height = int(target.max()) + 1, int(source.max()) + 1
    if width * height <= 4_000_000:  # a table of counts, no sort
        table = np.bincount(source * width + target, minlength=width * height).reshape(height, width)
        seen = np.flatnonzero(table.any(axis=1))
        return seen, table[seen].argmax(axis=1)
    pairs, counts = np.unique(source * width + target, return_counts=True)  # one int64 per (source, target) pair
    sources, targets = pairs // width, pairs % width
    # for each source value, its most frequent target: order by source, then by count descending
    order = np.lexsort((targets, -counts, sources))
    sources, targets = sources[order], targets[order]
    first = np.ones(len(sources), dtype=bool)
    first[1:] = sources[1:] != sources[:-1]
    return sources[first], targets[first]


def _read_off(source: np.ndarray, numbers: np.ndarray | None, released: np.ndarray, learn: np.ndarray,
              at: np.ndarray) -> np.ndarray:
    """The released key value (a code; -1: none) a column gives each record of ``at``: the value most released rows
    with the same source value hold (``learn``: the rows whose key is released, not missing); for a numeric source
    (``numbers``, its values) whose value no such row holds, the value of the rows nearest below and above it when
    both hold the same."""
    ok = learn & (source >= 0)
    out = np.full(int(at.sum()), -1, dtype=np.int64)
    if not ok.any():
        return out
    values, modes = _modes(source[ok], released[ok])
    wanted = source[at]
    place = np.clip(np.searchsorted(values, wanted), 0, len(values) - 1)
    exact = (values[place] == wanted) & (wanted >= 0)
    out[exact] = modes[place[exact]]
    if numbers is not None:
        # the numeric values of the source's distinct codes, in order of value, and their modes
        value_of = np.full(int(source.max()) + 1, np.nan)
        value_of[source[source >= 0]] = numbers[source >= 0]
        line = value_of[values]
        order = np.argsort(line, kind="stable")
        line, line_modes = line[order], modes[order]
        x = numbers[at]
        rest = ~exact & ~np.isnan(x)
        above = np.searchsorted(line, x[rest])
        inside = (above > 0) & (above < len(line))
        below_mode = line_modes[np.clip(above - 1, 0, len(line) - 1)]
        above_mode = line_modes[np.clip(above, 0, len(line) - 1)]
        agree = inside & (below_mode == above_mode)
        got = np.full(int(rest.sum()), -1, dtype=np.int64)
        got[agree] = below_mode[agree]
        out[rest] = got
    return out


#: A source column is read as an identifier (its tokens, its leading digits: :func:`id_parts`) when more than this
#: share of its values among the records judged are distinct.
ID_LIKE_SHARE = 0.5
#: The most token positions of one text identifier that :func:`id_parts` reads (its first, second, ... token).
ID_TOKENS = 4
#: The most parts (tokens, leading digits) :func:`id_parts` makes of all the identifiers of one check together: the
#: cost stays bounded whatever the number of columns (each part costs what a column does).
ID_PARTS_MAX = 48
#: The most identifier-like columns :func:`id_parts` takes apart in one check (the first in the order given).
ID_COLUMNS_MAX = 16

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def _whole_numbers(values: pd.Series) -> np.ndarray | None:
    """The values of a numeric column as exact integers (int64; ``None`` when some value is missing, not whole or
    beyond int64), for the leading digits of :func:`id_parts`."""
    if values.isna().any():
        return None
    if pd.api.types.is_integer_dtype(values.dtype):
        return values.to_numpy(dtype=np.int64)
    x = values.to_numpy(dtype=float)
    if not np.isfinite(x).all() or (np.abs(x) >= 2.0 ** 53).any() or (x != np.floor(x)).any():
        return None
    return x.astype(np.int64)


def id_parts(frame: pd.DataFrame, sources: Sequence[str]) -> list[tuple[str, str, pd.Series]]:
    """The parts of the identifier-like columns among ``sources`` an intruder
    reads a key off (a red-team audit, rt22 F2: a household id "R07-00123"
    restored every suppressed region, and its exact values read nothing).

    A column is identifier-like when more than :data:`ID_LIKE_SHARE` of its
    values in ``frame`` are distinct. A text one gives its tokens (the runs
    of letters and digits between other characters), one part a position up
    to :data:`ID_TOKENS` ("the first token of hid"); an integer one (whole
    numbers, none missing) its leading digits, ``value // 10**j`` for every
    power of ten within its digits ("hid // 100000"). A part with one value
    (a constant prefix) or as many as the column is left out; at most
    :data:`ID_COLUMNS_MAX` columns and :data:`ID_PARTS_MAX` parts in all,
    in the order of ``sources``.

    Returns ``(name, column, values)`` per part, ``values`` aligned with
    ``frame``."""
    out: list[tuple[str, str, pd.Series]] = []
    taken = 0
    for column in sources:
        if len(out) >= ID_PARTS_MAX or taken >= ID_COLUMNS_MAX:
            break
        values = frame[column]
        if pd.api.types.is_bool_dtype(values.dtype):
            continue
        whole = None
        if pd.api.types.is_numeric_dtype(values.dtype):
            whole = _whole_numbers(values)  # first: a column of measurements is left here, before counting values
            if whole is None:
                continue
        present = values.dropna()
        distinct = int(present.nunique())
        if len(present) == 0 or distinct <= ID_LIKE_SHARE * len(present):
            continue
        taken += 1
        parts: list[tuple[str, pd.Series]] = []
        if whole is not None:
            digits = len(str(int(np.abs(whole).max())))
            for j in range(digits - 1, 0, -1):  # the shortest leading part first
                parts.append((f"{column} // {10 ** j}", pd.Series(whole // 10 ** j, index=values.index)))
        else:
            tokens = present.astype(str).str.findall(r"[^\W_]+")
            if int(tokens.str.len().max()) < 2:
                continue  # one token: the column itself
            for i in range(min(ID_TOKENS, int(tokens.str.len().max()))):
                parts.append((f"the {_ORDINALS[i]} token of {column}",
                              tokens.str[i].reindex(values.index)))
        for name, part in parts:
            kinds = int(part.nunique())
            if 1 < kinds < distinct and len(out) < ID_PARTS_MAX:
                out.append((name, column, part))
    return out


def keys_given_back(original: pd.DataFrame, released: pd.DataFrame, targets: Sequence[str],
                    sources: Sequence[str]) -> list[dict[str, Any]]:
    """Whether the columns released as in the original (``sources``) give
    back the original values of the cells a step changed in ``targets``
    (changed columns that are not numeric, and changed keys): as an
    intruder reads them off the released file.

    For each source column, the map "source value -> released key value"
    is learned from the released rows whose key is not missing (the value
    most of them hold); a numeric source's value that no such row holds
    takes the value of the rows nearest below and above it when both agree
    (a band read off a numeric column). The map is applied to the changed
    cells, suppressed (released missing) and replaced (released as another
    value: a recode, PRAM) judged apart, and compared with the original
    values. A kind of cell is given back when the source gives back at
    least :data:`KEYS_BACK_MIN_CELLS` of them exactly, reads right at least
    :data:`KEYS_BACK_SHARE` of those it reads a value for (an intruder knows
    which: a value no released row shows is not read), more of them than
    guessing the most frequent released value does, and misses at most half
    as many as that guess. One source at a time (no combinations), and the
    parts of the identifier-like ones (their tokens, their leading digits:
    :func:`id_parts`) as sources of their own; on at most
    :data:`DERIVED_RECORDS` records at evenly spaced positions; no random
    draw. A category no released row shows is never read, so the count
    given back is a lower bound of what the source gives an intruder who
    knows how it was made (a code book).

    Returns one record per flagged column, in the order of ``targets``:
    ``{"column", "given_back_by", "share", "cells", "given_back", "read",
    "change", "records"}``: the sources that give it back (in the order of
    ``sources``); for the one that gives back most, the ``cells`` changed
    of the kind(s) ``change`` ("suppressed", "replaced" or "suppressed or
    replaced"), those it reads a value for and those it ``given_back``
    exactly, their ``share`` of the cells; and the records judged; and
    ``read_by`` when the best source is a part of an identifier (``"the
    first token of hid"``, ``"hid // 100000"``)."""
    n = len(original)
    if not targets or not sources or n < DERIVED_MIN_RECORDS:
        return []
    m = min(n, DERIVED_RECORDS)
    rows = np.unique(np.arange(m) * n // m)
    before, after = original.iloc[rows], released.iloc[rows]
    codes = {c: pd.factorize(before[c])[0].astype(np.int64) for c in sources}
    numbers = {c: before[c].to_numpy(dtype=float, na_value=np.nan) if numeric(before, c) else None
               for c in sources}
    column_of = {c: c for c in sources}  # a source read (a column, or a part of an identifier) -> its column
    for name, column, part in id_parts(before, sources):
        codes[name] = pd.factorize(part)[0].astype(np.int64)
        numbers[name] = part.to_numpy(dtype=float) if pd.api.types.is_numeric_dtype(part.dtype) else None
        column_of[name] = column
    reading = list(column_of)
    found = []
    for target in targets:
        was, now = joint_codes(before[target], after[target])
        had = before[target].notna().to_numpy()
        shown = after[target].notna().to_numpy()
        changed = had & ~values_equal(before[target], after[target])
        kinds = [(name, changed & which) for name, which in (("suppressed", ~shown), ("replaced", shown))]
        kinds = [(name, cells) for name, cells in kinds if cells.sum() >= KEYS_BACK_MIN_CELLS]
        if not kinds or not shown.any():
            continue
        values, counts = np.unique(now[shown], return_counts=True)
        guess = values[np.argmax(counts)]  # the most frequent released value: what a guess without a source gives
        flagged: dict[str, tuple[int, int, int]] = {}  # a source -> (given back, cells, read), over its kinds
        by: dict[str, list[str]] = {}
        every = np.zeros(len(rows), dtype=bool)
        for _, cells in kinds:
            every |= cells
        reads_of = {source: _read_off(codes[source], numbers[source], now, shown, every) for source in reading}
        for name, cells in kinds:
            truth, total = was[cells], int(cells.sum())
            for source in reading:
                read = reads_of[source][cells[every]]
                on = read >= 0  # the cells the source reads a value for (an intruder knows which)
                hits, reads = int((read[on] == truth[on]).sum()), int(on.sum())
                guessed = int((truth[on] == guess).sum())
                if hits >= KEYS_BACK_MIN_CELLS and hits >= KEYS_BACK_SHARE * reads and hits > guessed \
                        and reads - hits <= 0.5 * (reads - guessed):
                    got, of, seen = flagged.get(source, (0, 0, 0))
                    flagged[source] = (got + hits, of + total, seen + reads)
                    by.setdefault(source, []).append(name)
        if flagged:
            best = max(flagged, key=lambda s: (flagged[s][0], -flagged[s][2]))
            hits, total, reads = flagged[best]
            by_columns = {column_of[s] for s in flagged}
            found.append({"column": target, "given_back_by": [s for s in sources if s in by_columns],
                          "share": hits / total, "cells": total, "given_back": hits, "read": reads,
                          "change": " or ".join(by[best]), "records": int(len(rows)),
                          **({"read_by": best} if best != column_of[best] else {})})
    return found
