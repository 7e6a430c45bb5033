"""Plots of density-peak clusterings (matplotlib), usable from a Release in a notebook.

* :func:`plot_decision_graph` - the decision graph of Rodriguez & Laio:
  each point's density rho against its distance delta to the nearest denser
  point, with the chosen centres marked;
* :func:`plot_gamma` - the sorted decision values gamma (gamma* for the
  AdDPC family) with the boundary m between centres and the rest, and the
  slope-change curve kappa of the automatic choice on a second axis;
* :func:`plot_clusters` - the records coloured by cluster (two columns, or
  the first two principal components of more), centres marked, records
  labelled -1 (halo, noise) in grey.

``obj`` may be a :class:`privclust.Release` (the last clusterer step, or the
step named by ``step=``, an id or a position), a
:class:`privclust.StepOutcome` or a :class:`privclust.Partition`. The
decision graph and gamma curve read the partition's diagnostics (``rho``,
``delta``, ``gamma``, ``centre_indices``, ``boundary``, ``kappa``), which the
density-peak clusterers provide; for ``dp-dpc-grid`` they are over the grid
nodes.

Every function draws into ``ax`` (a new figure when ``None``) and returns the
axes. matplotlib is imported only when a plot is drawn
(``pip install 'privclust[plots]'``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

import privclust
from privclust import PrivclustError

__all__ = ["plot_clusters", "plot_decision_graph", "plot_gamma"]

#: Colour of records labelled -1 and of ordinary points in the decision graph.
GREY = "#9a9a9a"


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise PrivclustError("the density-peak plots need matplotlib: pip install 'privclust[plots]'") from err
    return plt


def _axes(ax: Any, figsize: tuple[float, float] = (5.0, 4.0)) -> Any:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=figsize)
    return ax


def _resolve(obj: Any, step: int | str | None) -> tuple[privclust.Partition, tuple[str, ...], pd.DataFrame | None, str]:
    """The partition, its columns, the data it was computed on (when known)
    and a title naming the component."""
    if isinstance(obj, privclust.Release):
        if step is not None:
            outcome = obj.step(step)
            if outcome.partition is None:
                raise PrivclustError(f"step {step!r} ({outcome.name}) produced no partition; name a clusterer step")
        else:
            found = [o for o in obj.outcomes if o.kind == "clusterers" and o.partition is not None]
            if not found:
                raise PrivclustError("the release has no clusterer step to plot; run a recipe with a clusterer")
            outcome = found[-1]
        title = outcome.name if outcome.id == outcome.name else f"{outcome.name} ({outcome.id})"
        return outcome.partition, tuple(outcome.columns), _step_input(obj, outcome), title
    if step is not None:
        raise PrivclustError("step= applies to a Release only")
    if isinstance(obj, privclust.StepOutcome):
        if obj.partition is None:
            raise PrivclustError(f"step {obj.id!r} ({obj.name}) produced no partition; name a clusterer step")
        return obj.partition, tuple(obj.columns), None, obj.name
    if isinstance(obj, privclust.Partition):
        return obj, tuple(obj.columns), None, ""
    raise PrivclustError(f"expected a privclust.Release, StepOutcome or Partition; got {type(obj).__name__}")


def _close(name: str, options: Sequence[str]) -> list[str]:
    """Close matches, ignoring case."""
    lowered = {o.lower(): o for o in options}
    return [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=2, cutoff=0.5)]


def _step_input(release: privclust.Release, outcome: Any) -> pd.DataFrame:
    """The values the clusterer step saw: the original columns, unless an
    earlier step (a masker or noise step) changed them; then the released
    values, which are what the step saw as long as no later step changed
    them too (otherwise the original values, the closest available)."""
    columns = set(outcome.columns)
    position = release.outcomes.index(outcome)

    def changes(o: Any) -> bool:
        return o.kind != "clusterers" and bool(columns & set(o.columns))

    before = any(changes(o) for o in release.outcomes[:position])
    after = any(changes(o) for o in release.outcomes[position + 1:])
    source = release.data if before and not after else release.original
    frame = source.loc[:, list(outcome.columns)]
    if before and after:  # neither file holds what the step saw: the plot's title says which values it shows
        frame.attrs["privclust_plot_note"] = "original values, not those the step saw"
    return frame


def _diagnostic(partition: privclust.Partition, key: str, plot: str) -> np.ndarray:
    value = partition.diagnostics.get(key)
    if value is None:
        have = ", ".join(sorted(partition.diagnostics)) or "none"
        raise PrivclustError(f"{plot} needs the partition diagnostic {key!r}, which density-peak clusterers "
                             f"(dpc, addpc, dp-dpcl, ...) provide; this partition has: {have}")
    return np.asarray(value, dtype=float)


def _centre_indices(partition: privclust.Partition) -> np.ndarray:
    value = partition.diagnostics.get("centre_indices")
    return np.zeros(0, dtype=np.int64) if value is None else np.asarray(value, dtype=np.int64).ravel()


def _palette(n: int) -> list[Any]:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(max(n, 1))]


def plot_decision_graph(obj: Any, ax: Any = None, *, step: int | str | None = None, annotate: bool = True) -> Any:
    """The decision graph: rho (the densities used for ordering, noisy for
    the DP variants) against delta, the chosen centres marked and numbered
    in decreasing gamma.

    :param obj: a Release, StepOutcome or Partition of a density-peak clusterer.
    :param ax: matplotlib axes to draw into (a new figure when ``None``).
    :param step: the clusterer step of a Release (id or position); default the last.
    :param annotate: number the centres.
    :returns: the axes.
    """
    partition, _, _, title = _resolve(obj, step)
    rho = _diagnostic(partition, "rho", "plot_decision_graph")
    delta = _diagnostic(partition, "delta", "plot_decision_graph")
    if rho.shape != delta.shape:
        raise PrivclustError(f"plot_decision_graph: rho has {rho.size} values but delta has {delta.size}")
    centres = _centre_indices(partition)
    ax = _axes(ax)
    others = np.isfinite(rho) & np.isfinite(delta)  # dp-dpc-grid: nodes below the density threshold have none
    others[centres] = False
    ax.scatter(rho[others], delta[others], s=10, color=GREY, alpha=0.7, linewidths=0, label="other points")
    colours = _palette(len(centres))
    ax.scatter(rho[centres], delta[centres], s=60, c=[colours[i] for i in range(len(centres))],
               edgecolors="black", linewidths=0.8, zorder=3, label=f"centres ({len(centres)})")
    if annotate:
        for i, c in enumerate(centres):
            ax.annotate(str(i), (rho[c], delta[c]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    grid = "grid_points" in partition.diagnostics
    # a DP clusterer (it reports its 'accounting') orders by noisy densities, which may be negative
    noisy = "noisy " if "accounting" in partition.diagnostics else ""
    ax.set_xlabel(r"$\rho$ (" + noisy + "density" + (" at grid nodes" if grid else "") + ")")
    ax.set_ylabel(r"$\delta$ (distance to a point of higher " + noisy + "density)")
    ax.set_title(f"Decision graph{': ' + title if title else ''}", fontsize=10)
    ax.legend(loc="best", fontsize=8, frameon=False)
    return ax


def plot_gamma(obj: Any, ax: Any = None, *, step: int | str | None = None, first: int = 50) -> Any:
    """The decision values gamma in decreasing order (gamma* for the AdDPC
    family), the boundary m between the centres and the rest, and the
    slope-change values kappa_i = (i - eta) k_i of the automatic choice on a
    second axis (when the clusterer chose m itself).

    :param first: how many of the largest values to show (at least m + 5).
    :returns: the axes of the gamma curve (``ax.kappa_axis`` is the second axis, when drawn).
    """
    partition, _, _, title = _resolve(obj, step)
    gamma = _diagnostic(partition, "gamma", "plot_gamma")
    gamma = np.sort(gamma[np.isfinite(gamma)])[::-1]  # dp-dpc-grid: only nodes above the threshold have one
    boundary = partition.diagnostics.get("boundary")
    m = int(boundary) if boundary is not None else len(_centre_indices(partition))
    shown = int(min(gamma.size, max(first, m + 5)))
    ranks = np.arange(1, shown + 1)
    ax = _axes(ax)
    ax.plot(ranks, gamma[:shown], "o-", ms=3, lw=1, color="tab:blue", label=r"sorted $\gamma$")
    if m:
        ax.plot(ranks[:m], gamma[:m], "o", ms=6, color="tab:red", label=f"centres (m = {m})")
        ax.axvline(m + 0.5, color="tab:red", ls="--", lw=1)
    ax.set_xlabel("rank i")
    # a DP clusterer (it reports its 'accounting') computes gamma from its noisy densities
    noisy = "from noisy densities; " if "accounting" in partition.diagnostics else ""
    ax.set_ylabel(r"$\gamma$ (" + noisy + "sorted, decreasing)")
    ax.set_title(f"Decision values{': ' + title if title else ''}", fontsize=10)
    kappa = partition.diagnostics.get("kappa")
    handles, labels = ax.get_legend_handles_labels()
    if kappa is not None and np.size(kappa):
        kappa = np.asarray(kappa, dtype=float).ravel()[:shown]
        twin = ax.twinx()
        twin.plot(np.arange(1, kappa.size + 1), kappa, "s:", ms=3, lw=1, color="tab:green",
                  label=r"$\kappa_i = (i-\eta)\,k_i$")
        twin.set_ylabel(r"$\kappa$ (slope change)", color="tab:green")
        twin.tick_params(axis="y", colors="tab:green")
        more_h, more_l = twin.get_legend_handles_labels()
        handles, labels = handles + more_h, labels + more_l
        try:
            ax.kappa_axis = twin
        except AttributeError:  # pragma: no cover - axes accept attributes
            pass
    ax.legend(handles, labels, loc="upper right", fontsize=8, frameon=False)
    return ax


def _project(values: np.ndarray, columns: Sequence[str]) -> tuple[np.ndarray, Any, tuple[str, str]]:
    """Two plotting coordinates: the columns themselves when there are two,
    the first two principal components of the centred values otherwise."""
    if values.shape[1] == 2:
        return values, None, (str(columns[0]), str(columns[1]))
    if values.shape[1] == 1:
        return np.column_stack([values[:, 0], np.zeros(len(values))]), "1d", (str(columns[0]), "")
    mean = values.mean(axis=0)
    _, _, vt = np.linalg.svd(values - mean, full_matrices=False)
    basis = vt[:2].T
    return (values - mean) @ basis, (mean, basis), ("PC1", "PC2")


def _apply(transform: Any, points: np.ndarray) -> np.ndarray:
    if transform is None:
        return points
    if isinstance(transform, str):
        return np.column_stack([points[:, 0], np.zeros(len(points))])
    mean, basis = transform
    return (points - mean) @ basis


def plot_clusters(obj: Any, data: Any = None, columns: Sequence[str] | None = None, ax: Any = None, *,
                  step: int | str | None = None, labels: Any = None, centres: bool = True, size: float = 12) -> Any:
    """The records coloured by cluster label.

    :param obj: a Release (the values its clusterer step saw are used), StepOutcome or Partition.
    :param data: the data the partition was computed on (a DataFrame or an
        array); needed for a StepOutcome or Partition.
    :param columns: two columns to plot; by default the step's columns when
        there are two, else the first two principal components of them.
    :param labels: ``None`` for the released labels, the name of a
        diagnostic holding other labels (e.g. ``"labels_before_merge"``), or
        an array of labels.
    :param centres: mark the partition's centres (projected like the records).
    :returns: the axes.
    """
    partition, step_columns, own_data, title = _resolve(obj, step)
    if data is None:
        data = own_data
    if data is None:
        raise PrivclustError("plot_clusters needs the records: pass data=<the frame the partition was computed "
                             "on> (a Release supplies its own)")
    if isinstance(data, pd.DataFrame):
        frame = data
    else:
        array = np.asarray(data, dtype=float)
        if array.ndim != 2:
            raise PrivclustError(f"plot_clusters: data must be a table (n records x d columns); got shape "
                                 f"{array.shape}")
        names = list(step_columns) if len(step_columns) == array.shape[1] else [f"x{j}" for j in
                                                                                range(array.shape[1])]
        frame = pd.DataFrame(array, columns=names)
    if columns is not None:
        columns = [columns] if isinstance(columns, str) else list(columns)
        if len(columns) not in (1, 2):
            raise PrivclustError(f"plot_clusters: columns must name one or two columns; got {len(columns)}")
    use = list(columns) if columns is not None else [c for c in step_columns if c in frame.columns] or \
        [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
    for c in use:
        if c not in frame.columns:
            close = _close(str(c), [str(x) for x in frame.columns])
            hint = f"did you mean {' or '.join(repr(x) for x in close)}?" if close else \
                f"columns: {', '.join(map(str, frame.columns))}"
            raise PrivclustError(f"plot_clusters: column {c!r} is not in the data ({hint})")
    values = frame.loc[:, use].to_numpy(dtype=float)

    if labels is None:
        lab = np.asarray(partition.labels)
        what = "labels"
    elif isinstance(labels, str):
        if labels not in partition.diagnostics:
            raise PrivclustError(f"plot_clusters: the partition has no diagnostic {labels!r} "
                                 f"(it has: {', '.join(sorted(partition.diagnostics)) or 'none'})")
        lab = np.asarray(partition.diagnostics[labels])
        what = labels
    else:
        lab = np.asarray(labels)
        what = "labels"
    lab = lab.ravel()
    if lab.shape[0] != values.shape[0]:
        raise PrivclustError(f"plot_clusters: {lab.shape[0]} labels for {values.shape[0]} records; pass the data "
                             "the partition was computed on")

    xy, transform, (xlabel, ylabel) = _project(values, use)
    ax = _axes(ax)
    unassigned = lab < 0 if np.issubdtype(lab.dtype, np.number) else np.zeros(lab.size, dtype=bool)
    kinds = pd.unique(lab[~unassigned])
    if np.issubdtype(lab.dtype, np.number):
        kinds = np.sort(kinds)
    colours = _palette(len(kinds))
    for i, value in enumerate(kinds):
        mask = lab == value
        ax.scatter(xy[mask, 0], xy[mask, 1], s=size, color=colours[i], linewidths=0,
                   label=str(value) if len(kinds) <= 12 else None)
    if unassigned.any():
        ax.scatter(xy[unassigned, 0], xy[unassigned, 1], s=size, color=GREY, marker="x", linewidths=0.8,
                   label=f"unassigned ({int(unassigned.sum())})")
    centre_values = None
    if centres and partition.centres is not None:
        known = list(step_columns) if len(step_columns) == partition.centres.shape[1] else list(use)
        if len(known) == partition.centres.shape[1] and all(c in known for c in use):
            centre_values = np.asarray(partition.centres, dtype=float)[:, [known.index(c) for c in use]]
    if centre_values is not None:
        points = _apply(transform, centre_values)
        # the partition's centres: after a reachability merge the built-in density-peak clusterers give each
        # merged cluster its densest point (the peaks chosen before the merge are the diagnostic centre_indices);
        # a k-means centre may have no record (the title then counts the centres too)
        ax.scatter(points[:, 0], points[:, 1], s=90, marker="X", color="black", edgecolors="white",
                   linewidths=0.8, zorder=3, label="centres")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    n_clusters = len(kinds)
    caption = f"{title}: " if title else ""
    note = frame.attrs.get("privclust_plot_note") if data is own_data else None
    notes = [n for n in (None if what == "labels" else what, note) if n]
    # a centre need not have records (k-means' empty cluster): the title counts both when they differ
    shown = "" if centre_values is None or len(centre_values) == n_clusters else f", {len(centre_values)} centres"
    ax.set_title(f"{caption}{n_clusters} clusters{shown}" + (f" ({'; '.join(notes)})" if notes else ""),
                 fontsize=10)
    if len(kinds) <= 12:
        ax.legend(loc="best", fontsize=7, frameon=False, markerscale=1.2)
    return ax
