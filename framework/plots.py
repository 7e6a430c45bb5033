"""Plots for choosing and publishing a protection (matplotlib).

* :func:`risk_utility_map` - disclosure risk against information loss, one
  point per configuration of a comparison with error bars, the Pareto front
  marked;
* :func:`metric_curve` - a figure against a swept parameter, mean and spread;
* :func:`before_after` - each released column's distribution beside the
  original's.

matplotlib is imported only when a plot is drawn (``pip install
'privclust[plots]'``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._optional import PLOTS, optional
from .errors import PrivclustError

__all__ = ["before_after", "higher_is_better", "metric_curve", "pareto_front", "risk_utility_map"]

#: Words that mark a risk figure and a loss figure when none is named.
RISK_HINTS = ("dbrl", "linkage", "interval", "transparency", "risk")
LOSS_HINTS = ("sse", "il1", "loss", "moments")
#: Figures of the built-in evaluators where higher is better (agreement with
#: the true classes, the l of an l-diversity): never an axis of the map, whose
#: Pareto front and "lower left is better" take both figures to be better when lower.
HIGHER_IS_BETTER = ("ari.", "nmi.", "pair-f.", "l-diversity.min_")
#: ... and metrics, of any evaluator, whose name says they count group or cell sizes: a larger group is safer (a
#: red-team audit: ``key-frequencies.min_cell_size`` drew the riskiest release, k = 2, as the lowest risk).
SIZE_METRICS = ("min_cell_size", "min_cell_size_original", "min_size", "mean_size", "max_size", "min_group_size",
                "max_group_size", "expected_min_size", "expected_mean_size", "expected_max_size", "expected_size_min",
                "expected_size_mean", "expected_size_max")


def higher_is_better(figure: str) -> bool:
    """Whether ``figure`` (``<evaluator>.<metric>``) is one where higher is better or safer: never an axis of the
    risk-utility map (:data:`HIGHER_IS_BETTER`, :data:`SIZE_METRICS`)."""
    name = figure.lower()
    return name.startswith(HIGHER_IS_BETTER) or name.rsplit(".", 1)[-1] in SIZE_METRICS
#: Under a map of a comparison with differentially private runs (the table's note says why).
SELECTION_CAPTION = ("The figures are computed from the original data: a configuration chosen by this map has no "
                     "differential-privacy guarantee as chosen (see the table's note).")


def _pyplot() -> Any:
    return optional("matplotlib.pyplot", PLOTS)


def _ticks(n: int) -> Any:
    return optional("matplotlib.ticker", PLOTS).MaxNLocator(nbins=n)


def _figure(detached: bool, **figure: Any) -> Any:
    """A new figure: pyplot's, or with ``detached`` a plain ``Figure`` that
    pyplot does not manage (no backend is chosen, nothing is shown)."""
    if detached:
        return optional("matplotlib.figure", PLOTS).Figure(**figure)
    return _pyplot().figure(**figure)


def _axes(ax: Any, detached: bool = False, **figure: Any) -> Any:
    if ax is not None:
        return ax
    return _figure(detached, **figure).subplots()


def _pick(table: pd.DataFrame, given: str | None, hints: Sequence[str], what: str) -> str:
    metrics = table.attrs.get("privclust", {}).get("metrics") or [
        c for c in table.columns if "." in c and pd.api.types.is_numeric_dtype(table[c])]
    if given is not None:
        if given not in table.columns:
            close = difflib.get_close_matches(given, metrics, n=2)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else f"figures: {', '.join(metrics)}"
            raise PrivclustError(f"no figure named {given!r} in the table; {hint}")
        if higher_is_better(given):
            raise PrivclustError(
                f"{given} is a figure where higher is better (agreement with the true classes, an l-diversity, a group "
                f"or cell size), not "
                f"usable as the {what} figure: the map takes both figures to be better when lower (its Pareto front, "
                f"'lower left is better'); draw one minus it as a column of its own, e.g. "
                f"table.assign(**{{'1 - {given}': 1 - table['{given}']}})")
        return given
    for hint in hints:
        for m in metrics:
            if hint in m.lower() and not higher_is_better(m):
                return m
    usable = [m for m in metrics if not higher_is_better(m)]
    raise PrivclustError(f"name the {what} figure (one of: {', '.join(usable) or 'none: add evaluators'})")


def pareto_front(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """Boolean mask of the points no other point beats on both x and y
    (smaller is better for both)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.ones(xs.size, dtype=bool)
    for i in range(xs.size):
        dominated = (xs <= xs[i]) & (ys <= ys[i]) & ((xs < xs[i]) | (ys < ys[i]))
        keep[i] = not dominated.any() and np.isfinite(xs[i]) and np.isfinite(ys[i])
    return keep


def _labels(table: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """``recipe, param=value, ...`` per row, leaving out the parameters a
    recipe does not sweep (empty in its rows)."""
    return [", ".join([str(row["recipe"]), *_settings(row, keys)]) for _, row in table.iterrows()]


def _settings(row: pd.Series, keys: Sequence[str]) -> list[str]:
    """``param=value`` of a row for each of ``keys`` it has a value of."""
    parts = []
    for k in keys:
        value = row[k]
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        parts.append(f"{k.split('.')[-1]}={value:g}" if isinstance(value, float) else f"{k.split('.')[-1]}={value}")
    return parts


def _aggregate(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    keys = list(table.attrs.get("privclust", {}).get("parameters", []))
    ok = table[table["error"].isna()] if "error" in table.columns else table
    if ok.empty:
        raise PrivclustError("every run of the comparison failed; see the table's error column")
    by = ok.groupby(["recipe", "configuration"], sort=False)
    agg = by[list(columns)].agg(["mean", "std"])
    agg.columns = [f"{c} {s}" for c, s in agg.columns]
    if keys:
        agg = by[keys].first().join(agg)
    agg = agg.reset_index()
    agg.attrs["keys"] = keys
    return agg


def risk_utility_map(table: pd.DataFrame, *, risk: str | None = None, loss: str | None = None, ax: Any = None,
                     annotate: bool = True, title: str | None = None, detached: bool = False) -> Any:
    """Disclosure risk (y) against information loss (x), one point per
    configuration (mean of its repeats, error bars one standard deviation),
    the Pareto front drawn as a line and its points ringed.

    :param table: the table :func:`privclust.compare` returned.
    :param risk: the risk figure's column (default: the first whose name
        mentions linkage, interval disclosure or risk).
    :param loss: the loss figure's column (default: the first mentioning SSE
        or IL1).
    :param detached: without ``ax``, draw on a plain ``Figure`` that pyplot
        does not manage (no backend chosen, nothing shown; for writing files).
    :return: the matplotlib Axes.
    """
    risk = _pick(table, risk, RISK_HINTS, "risk")
    loss = _pick(table, loss, LOSS_HINTS, "information-loss")
    agg = _aggregate(table, [loss, risk])
    # constrained layout: the note under the axes and the labels near the edges stay on the saved figure
    ax = _axes(ax, detached, figsize=(7, 5), layout="constrained")
    x, y = agg[f"{loss} mean"].to_numpy(), agg[f"{risk} mean"].to_numpy()
    xerr, yerr = agg[f"{loss} std"].fillna(0).to_numpy(), agg[f"{risk} std"].fillna(0).to_numpy()
    recipes = list(dict.fromkeys(agg["recipe"]))
    for r, name in enumerate(recipes):
        rows = (agg["recipe"] == name).to_numpy()
        ax.errorbar(x[rows], y[rows], xerr=xerr[rows], yerr=yerr[rows], fmt="o", capsize=3, label=name,
                    color=f"C{r % 10}")
    front = pareto_front(x, y)
    order = np.argsort(x[front])
    ax.plot(x[front][order], y[front][order], "k--", lw=1, label="Pareto front")
    ax.scatter(x[front], y[front], s=160, facecolors="none", edgecolors="k", lw=1.2)
    if annotate:
        for label, xi, yi in zip(_labels(agg, agg.attrs["keys"]), x, y, strict=True):
            ax.annotate(label.split(", ", 1)[-1] if len(recipes) == 1 and ", " in label else label, (xi, yi),
                        fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel(f"information loss: {loss}")
    ax.set_ylabel(f"disclosure risk: {risk}")
    ax.set_title(title or "Risk-utility map (lower left is better)")
    failed = _failures(table)
    blank = ~(np.isfinite(x) & np.isfinite(y))  # finished runs without a value of a figure (NaN): not drawn either
    if blank.any():
        names = [label for label, b in zip(_labels(agg, agg.attrs["keys"]), blank, strict=True) if b]
        failed = " ".join(filter(None, [failed, f"Not shown, no value of {loss} or {risk}: " + "; ".join(names) + "."]))
    if table.attrs.get("privclust", {}).get("note"):  # DP runs: the choice the map draws is not covered
        failed = " ".join(filter(None, [failed, SELECTION_CAPTION]))
    if failed:  # the map says what it leaves out: a configuration that is not drawn did not win by default
        ax.text(0.0, -0.16, failed, transform=ax.transAxes, fontsize=7, va="top", wrap=True)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def _failures(table: pd.DataFrame) -> str:
    """A note on the configurations whose runs failed: the ones left out of
    the map (every run failed) and the ones drawn from fewer runs."""
    if "error" not in table.columns or not table["error"].notna().any():
        return ""
    keys = list(table.attrs.get("privclust", {}).get("parameters", []))
    notes_out, notes_part = [], []
    for _, rows in table.groupby(["recipe", "configuration"], sort=False):
        bad = int(rows["error"].notna().sum())
        if not bad:
            continue
        label = _labels(rows.iloc[:1], keys)[0]
        if bad == len(rows):
            notes_out.append(label)
        else:
            notes_part.append(f"{label} ({len(rows) - bad} of {len(rows)} runs)")
    parts = []
    if notes_out:
        parts.append("Not shown, every run failed: " + "; ".join(notes_out) + ".")
    if notes_part:
        parts.append("Drawn from the runs that finished: " + "; ".join(notes_part) + ".")
    return " ".join(parts)


def metric_curve(table: pd.DataFrame, parameter: str, metric: str, *, by: str = "recipe", ax: Any = None,
                 logx: bool = False) -> Any:
    """A figure against a swept parameter: the mean over repeats with a band
    of one standard deviation, one curve per recipe (or per ``by`` column)
    and, when the table sweeps other parameters too, per value of those
    (a curve never averages over configurations). Under the axes it names
    the configurations whose runs failed, as :func:`risk_utility_map` does."""
    for column in (parameter, metric, by):
        if column not in table.columns:
            raise PrivclustError(f"no column {column!r} in the table; columns: {', '.join(table.columns)}")
    ok = table[table["error"].isna()] if "error" in table.columns else table
    keys = [k for k in table.attrs.get("privclust", {}).get("parameters", []) if k in table.columns]
    others = [k for k in keys if k not in (parameter, by)
              and (ok.groupby(by, sort=False)[k].agg(lambda v: v.map(repr).nunique()) > 1).any()]
    curves = pd.Series([", ".join([str(row[by]), *_settings(row, others)]) for _, row in ok.iterrows()],
                       index=ok.index, dtype=object)
    ax = _axes(ax, figsize=(6, 4), layout="constrained")
    ok = ok[ok[parameter].map(lambda v: v is not None and not (isinstance(v, float) and np.isnan(v)))]
    values = ok[parameter]  # the rows of a recipe that does not sweep the parameter have none
    numeric = all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
                  for v in values)
    # values that are not numbers (a component, a list of columns) are drawn in the order met, one tick each
    positions = {} if numeric else {k: i for i, k in enumerate(dict.fromkeys(map(repr, values)))}
    x = values if numeric else values.map(lambda v: positions[repr(v)])
    for i, (name, rows) in enumerate(ok.groupby(curves, sort=False)):
        stats = rows[metric].groupby(x.loc[rows.index]).agg(["mean", "std"]).sort_index()
        xs = stats.index.to_numpy(dtype=float)
        ax.plot(xs, stats["mean"], "o-", color=f"C{i % 10}", label=str(name), ms=4)
        ax.fill_between(xs, stats["mean"] - stats["std"].fillna(0), stats["mean"] + stats["std"].fillna(0),
                        color=f"C{i % 10}", alpha=0.2)
    if not numeric:
        shown = {repr(v): str(v) for v in values}
        ax.set_xticks(list(positions.values()), [shown[k] for k in positions], fontsize=7)
    if logx and numeric:
        ax.set_xscale("log")
    ax.set_xlabel(parameter)
    ax.set_ylabel(metric)
    failed = _failures(table)
    if failed:  # a missing point, or one drawn from fewer runs, is said
        ax.text(0.0, -0.2, failed, transform=ax.transAxes, fontsize=7, va="top", wrap=True)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def _edges(low: float, high: float, bins: int) -> np.ndarray:
    """Strictly increasing, finite bin edges from ``low`` to ``high``, with no
    overflow where the span exceeds the largest double."""
    t = np.linspace(0.0, 1.0, bins + 1)
    edges = low * (1.0 - t) + high * t  # each term is finite, unlike high - low
    edges = np.unique(edges)
    if edges.size < 2:
        edges = np.array([np.nextafter(low, -np.inf), np.nextafter(low, np.inf)])
    return edges[np.isfinite(edges)]


#: Largest magnitude plotted in the data's own units; beyond it the axis is rescaled.
_PLOT_LIMIT = 1e100


def _axis_power(low: float, high: float) -> int:
    """The power of ten to divide values by before plotting (0: none).

    Near the largest double, matplotlib's ticker computes spans and margins
    that overflow (``high - low`` is infinite for -1.8e308 and 1e304)."""
    biggest = max(abs(float(low)), abs(float(high)))
    if not np.isfinite(biggest) or biggest <= _PLOT_LIMIT:
        return 0
    return int(np.floor(np.log10(biggest)))


def before_after(release: Any, columns: Sequence[str] | None = None, *, bins: int = 30, axes: Any = None,
                 detached: bool = False) -> Any:
    """Histograms of each released column over the original's. This plot
    shows the original distribution: keep it out of published reports
    (``non_disclosive=True`` does).

    With ``detached=True`` the figure is a plain ``matplotlib.figure.Figure``
    that pyplot does not manage: drawing it neither selects a backend nor
    shows it in a notebook (the HTML report draws its plots this way)."""
    cols = list(columns) if columns is not None else [
        c for c in release.original.columns
        if any(c in o.columns for o in release.outcomes if o.kind != "clusterers")
        and pd.api.types.is_numeric_dtype(release.original[c]) and not pd.api.types.is_bool_dtype(release.original[c])
        and pd.api.types.is_numeric_dtype(release.data[c])]  # not a key a key masker released as labels (recode)
    text = [c for c in cols if not pd.api.types.is_numeric_dtype(release.original[c])]
    if text:
        raise PrivclustError(f"column(s) {', '.join(map(repr, text))} are not numeric: a histogram needs numbers")
    if not cols:
        raise PrivclustError("no column was changed by the release; name the columns to plot")
    if axes is None:
        n = len(cols)
        ncols = min(3, n)
        nrows = int(np.ceil(n / ncols))
        size = (4 * ncols, 3 * nrows)
        # constrained layout: titles, tick labels and a suptitle do not collide
        axes = _figure(detached, figsize=size, layout="constrained").subplots(nrows, ncols, squeeze=False)
        for extra in axes.ravel()[n:]:
            extra.set_visible(False)
    flat = np.asarray(axes).ravel()
    for ax, column in zip(flat, cols, strict=False):
        original = release.original[column].to_numpy(dtype=float)
        released = release.data[column].to_numpy(dtype=float)
        # missing values are not drawn (a NaN in the bin range drew nothing at all): the title counts them
        missing = (int(np.isnan(original).sum()), int(np.isnan(released).sum()))
        original, released = original[~np.isnan(original)], released[~np.isnan(released)]
        if not original.size and not released.size:
            ax.set_title(f"{column} (every value missing)", fontsize=9)
            continue
        low = min(v.min() for v in (original, released) if v.size)
        high = max(v.max() for v in (original, released) if v.size)
        power = _axis_power(low, high)
        if power:  # matplotlib's tick arithmetic overflows near the float limit: plot in units of 10^power
            original, released = original / 10.0 ** power, released / 10.0 ** power
            low, high = low / 10.0 ** power, high / 10.0 ** power
            ax.set_xlabel(f"x 1e{power}", fontsize=8)
        edges = _edges(low, high, bins)
        ax.hist(original, bins=edges, alpha=0.5, label="original", color="C0")
        ax.hist(released, bins=edges, alpha=0.5, label="released", color="C1")
        ax.set_title(column if not any(missing) else
                     f"{column}\nnot drawn, missing: {missing[0]} original, {missing[1]} released", fontsize=9)
        ax.xaxis.set_major_locator(_ticks(4))  # few ticks: wide values (e.g. 600000) stay apart
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7)
    return axes
