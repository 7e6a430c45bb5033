"""The rigorous density-peak clusterer ``dp-dpc-grid`` (issue 4; spec Section 5, option 2).

Densities are evaluated at public query points, Laplace noise calibrated to a
sensitivity independent of n is added, and DPC / AdDPC / the reachability
merge run on the nodes as post-processing, so the cluster map is epsilon-DP
under replace-one. It shares its base class, checks and kernels with the
other density-peak clusterers of :mod:`privclust_plugins.density_peaks`, and
registers itself as that module's clusterers do. Up to 0.1.0 it lived in
:mod:`privclust_plugins.density_peaks`, from which ``DPDPCGrid`` is still
importable.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

import privclust
from privclust import (
    DataLeak,
    ParameterError,
    Partition,
    PrivacyContext,
    at_least,
    at_most,
    nested,
    param,
    public_bounds,
)

from . import _dpc, _dpc_centres, _dpc_dp
from .density_peaks import (
    CLIP_MARGIN_DC,
    CUTOFF_OPTION,
    MAX_SPAN,
    _charge_check,
    _check_epsilon,
    _check_percent,
    _DensityPeaks,
    _matrix,
    _span,
    _unit_of,
)

__version__ = "0.1.0"

GRID_RELATION = privclust.Relation.REPLACE_ONE.explained(
    "neighbouring data sets differ in one record's values; the number of records is public")


def _number_or_text(value: Any) -> Any:
    return float(value) if isinstance(value, int | np.integer) and not isinstance(value, bool) else value


def _check_dc_grid(value: Any) -> str | None:
    if value is None or value == "dp" or (isinstance(value, float) and value > 0):
        return None
    return 'must be a public distance > 0 or "dp" (a DP quantile of the pairwise distances, charged dc_epsilon)'


def _check_quantile(value: Any) -> str | None:
    return None if value is None or 0 <= value < 0.5 else "must be in [0, 0.5)"


@attrs.frozen(kw_only=True)
class DPDPCGrid(_DensityPeaks):
    """Density peaks on public query points (spec Section 5, option 2).

    Densities are evaluated at query points fixed before the data are seen (a
    full grid over the ``bounds``, or points drawn at random within them
    in higher dimensions), Laplace noise calibrated to a sensitivity that
    depends on the kernel, d_c and the spacing but not on n is added, and
    DPC / AdDPC / the reachability merge run on the nodes as
    post-processing: the cluster map (node densities, centres, node labels,
    cluster numbers, released centres) is epsilon-DP under replace-one and
    depends on the records only through the noisy densities. Each record is
    then labelled by its nearest node (records whose nearest node has no
    cluster take the nearest clustered node's label): a local function of the
    record and the DP map (joint DP).

    Secure defaults: ``bounds`` and ``dc`` must be public, or estimated with
    a DP quantile that is charged to the budget (``bounds = "dp"`` with
    ``bounds_range`` and ``bounds_epsilon``; ``dc = "dp"`` with
    ``dc_epsilon``), or taken from the data with ``[privacy] allow_leaks``.
    """

    name: ClassVar[str] = "dp-dpc-grid"
    centres_from_records: ClassVar[bool] = False
    private: ClassVar[bool] = True
    privacy_relation: ClassVar[privclust.Relation] = privclust.Relation.REPLACE_ONE
    #: its DP entries cover the cluster map (the noisy node densities and what is computed from them alone); each
    #: record's label is a function of that record's own raw values and the DP map (joint DP only): not a
    #: differentially private output, so they cover none of its release
    dp_output: ClassVar[tuple[str, ...]] = ()
    automatic: ClassVar[bool] = True

    epsilon: float = param(float, role="privacy", default=1.0, gt=0, check=_check_epsilon,
                           doc="privacy budget of the node densities")
    bounds: Any = public_bounds(default=None, dp=True,
                                doc='public bounds {column = [low, high]}; "dp" (DP quantiles within bounds_range, '
                                    'charged bounds_epsilon); or "data" (taken from the data: needs allow_leaks)')
    bounds_range: Any = public_bounds(default=None,
                                      doc='with bounds = "dp": the public outer range {column = [low, high]} the DP '
                                          'quantiles are searched in')
    bounds_epsilon: float | None = param(float, role="privacy", default=None, gt=0, check=_check_epsilon,
                                         doc='with bounds = "dp": the epsilon of the DP bounds (charged on top of '
                                             'epsilon, split over 2 quantiles per column)')
    bounds_quantile: float = param(float, role="plain", default=0.02, check=_check_quantile,
                                   doc='with bounds = "dp": the bounds are the q and 1 - q quantiles of each column')
    dc: Any = param((float, str), role="plain", default=None, check=_check_dc_grid, converter=_number_or_text,
                    doc='absolute, public d_c in clustering units; or "dp" (the dc_percent quantile of the pairwise '
                        'distances, estimated with DP and charged dc_epsilon)')
    dc_epsilon: float | None = param(float, role="privacy", default=None, gt=0, check=_check_epsilon,
                                     doc='with dc = "dp": the epsilon of the DP d_c (charged on top of epsilon)')
    query: str = param(str, default="auto", choices=("auto", "grid", "random"),
                       doc='"grid" (full grid), "random" (points drawn within the bounds), '
                           '"auto": grid up to 4 columns')
    points_per_dim: int | None = param(int, default=None, ge=2, doc="grid nodes per column")
    spacing: float | None = param(float, role="plain", default=None, gt=0,
                                  doc="grid spacing in clustering units (all columns)")
    n_points: int = param(int, default=4096, ge=4, doc="number of query points (random), or the grid's target size")
    eta: float = param(float, role="plain", default=1.001, gt=0, doc="weighting factor of the slope-change rate")
    i_max: int = param(int, default=50, ge=1, doc="largest number of centres considered")
    radius: float | None = param(float, role="plain", default=None, gt=0,
                                 doc="merge nodes reachable within this radius (optional)")
    radius_percent: float | None = param(float, role="plain", default=None, check=_check_percent,
                                         doc="merge radius as a percentage of the pairwise distances of the "
                                             "clustered nodes (public: post-processing)")
    density_threshold: float | None = param(float, role="plain", default=None,
                                            doc="nodes with a noisy density at or below this have no cluster "
                                                "(default 3 noise scales)")
    noise: Any = nested("noise_mechanisms", default="laplace", doc="the noise mechanism (an L1, pure-epsilon one)")

    def min_records(self, n_columns: int) -> int:
        """Three records: the peaks are grid nodes, not records, so ``n_clusters`` sets no floor."""
        return 3

    def __attrs_post_init__(self) -> None:
        if self.dc is not None and self.dc_percent is not None and self.dc != "dp":
            raise ParameterError("dp-dpc-grid: give either an absolute 'dc' or 'dc_percent' (with dc = \"dp\" for "
                                 "a DP estimate, or [privacy] allow_leaks = [\"dc_percent\"]), not both.")
        if self.radius is not None and self.radius_percent is not None:
            raise ParameterError("dp-dpc-grid: give either 'radius' or 'radius_percent', not both.")
        if self.points_per_dim is not None and self.spacing is not None:
            raise ParameterError("dp-dpc-grid: give either 'points_per_dim' or 'spacing', not both.")
        _dpc_dp.check_dp_bounds_params("dp-dpc-grid", self.bounds, self.bounds_range, self.bounds_epsilon)
        if self.dc == "dp":
            if self.dc_epsilon is None:
                raise ParameterError("dp-dpc-grid: dc = \"dp\" spends its own budget; give dc_epsilon (e.g. "
                                     "dc_epsilon = 0.1), charged on top of 'epsilon'")
        elif self.dc_epsilon is not None:
            raise ParameterError("dp-dpc-grid: 'dc_epsilon' applies only with dc = \"dp\"; remove it or set "
                                 "dc = \"dp\"")
        problem = _dpc_dp.nested_noise_problem(self.name, self.noise, integer_values=self.kernel == "cutoff",
                                                integer_option=CUTOFF_OPTION)
        if problem:
            raise ParameterError(problem)

    def planned_cost(self) -> tuple[float, float]:
        return (self.epsilon + (self.bounds_epsilon or 0.0) + (self.dc_epsilon or 0.0), 0.0)

    def step_problems(self) -> list[str]:
        if self.bounds is None:
            return ["dp-dpc-grid needs 'bounds': public bounds { column = [low, high], ... } from domain knowledge; "
                    "or bounds = \"dp\" with bounds_range (a public outer range) and bounds_epsilon (charged); or "
                    "bounds = \"data\" with [privacy] allow_leaks = [\"bounds\"] (no DP guarantee)"]
        return []

    def data_leaks(self) -> list[DataLeak]:
        if self.dc is not None:
            return []
        t = 2.0 if self.dc_percent is None else self.dc_percent
        return [DataLeak("dc_percent", "dc_percent" if self.dc_percent is not None else "dc",
                         f"dp-dpc-grid would take d_c as the {t:g}% quantile of the pairwise distances of the data "
                         "(no absolute 'dc' given)",
                         "give an absolute public dc (in clustering units), or dc = \"dp\" with dc_epsilon (a DP "
                         "quantile, charged)")]

    def _frame_bounds(self, data: pd.DataFrame, X: np.ndarray, context: PrivacyContext
                      ) -> tuple[np.ndarray, np.ndarray, dict]:
        columns = [str(c) for c in data.columns]
        if self.bounds == "data":
            lo, hi = privclust.column_bounds(
                X, columns, "data", context, who="dp-dpc-grid", details=True,
                statement=f"the bounds of {', '.join(columns)} were taken from the data (their minimum and maximum "
                          "place the query points and are released exactly, outside the differential-privacy "
                          "guarantee).",
                alternative="give public bounds from domain knowledge: bounds = { column = [low, high] }, or "
                            "bounds = \"dp\" with bounds_range and bounds_epsilon")
            return lo, hi, {"bounds_rule": "data"}
        table = self.bounds_range if self.bounds == "dp" else self.bounds
        key = "bounds_range" if self.bounds == "dp" else "bounds"
        lo, hi = privclust.column_bounds(X, columns, table, context, who="dp-dpc-grid", key=key)
        wide = [c for c, s in zip(columns, _span(lo, hi), strict=True) if not s <= MAX_SPAN]
        if wide:
            raise ParameterError(f"dp-dpc-grid: the {key} of column(s) {', '.join(wide)} span more than "
                                 f"{MAX_SPAN:g}; distances over such a range overflow a float; rescale the "
                                 "column(s) and give the bounds in the new units")
        if self.bounds != "dp":
            return lo, hi, {"bounds_rule": "public"}
        assert self.bounds_epsilon is not None
        new_lo, new_hi = _dpc_dp.dp_bounds(context, X, columns, lo, hi, self.bounds_quantile, self.bounds_epsilon,
                                           GRID_RELATION)
        return new_lo, new_hi, {"bounds_rule": "dp", "dp_bounds": {
            c: [float(a), float(b)] for c, a, b in zip(columns, new_lo, new_hi, strict=True)}}

    def _grid_dc(self, Xs: np.ndarray, blo: np.ndarray, bhi: np.ndarray, floor: float, context: PrivacyContext
                 ) -> tuple[float, dict]:
        if self.dc != "dp":
            if self.dc is not None:
                return float(self.dc), {}
            return self._dc(Xs, context)[0::2]
        assert self.dc_epsilon is not None
        t = 2.0 if self.dc_percent is None else self.dc_percent
        diag = float(np.sqrt(np.sum((bhi - blo) ** 2)))
        r = _dpc_dp.pairings(Xs.shape[0])
        size = r * (Xs.shape[0] // 2)
        context.spend(
            epsilon=self.dc_epsilon, mechanism="exponential (DP quantile, Smith 2011)", sensitivity=float(r),
            relation=GRID_RELATION,
            covers=(f"d_c: the {t:g}% quantile of {size} pairwise distances ({r} disjoint random pairings of the "
                    f"records, so one record changes at most {r} of them: rank sensitivity {r}), searched within "
                    f"[{floor:.6g}, {diag:.6g}] (from a public floor, half the grid spacing or 1/1000 of the "
                    "diagonal for random query points, to the diagonal of the bounds) "
                    "by the exponential mechanism"),
            not_covered="the floating-point sampling of the exponential mechanism is not an exact sampler",
            details={"dc_percent": t, "pairs": size, "pairings": r, "range": [floor, diag]},
        )
        dist, _ = _dpc_dp.pairing_distances(Xs, context.rng)  # drawn after the spend
        dc = _dpc_dp.dp_quantile(dist, t / 100.0, floor, diag, self.dc_epsilon, context.rng, sensitivity=float(r))
        return dc, {"method": "dp", "dc_percent": t, "pairs": int(dist.size), "pairings": r,
                    "epsilon": self.dc_epsilon}

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        for problem in self.step_problems():
            raise ParameterError(problem)
        # The span check guards scales taken from the data (bounds = "data", d_c by the percentage rule).
        # With public (or DP) bounds and d_c nothing is scaled by the data: the records are clipped to a
        # public region below instead, so one far record changes the release only within the guarantee.
        data_scales = self.bounds == "data" or self.dc is None
        X = _matrix(data, self.name, None, check_spans=data_scales)
        _charge_check(context, self.name, self.planned_cost()[0])
        n, d = X.shape
        lo, hi, bounds_info = self._frame_bounds(data, X, context)
        if self.scale == "minmax":  # scale with the (public or DP) bounds
            shift, unit = lo, _unit_of(lo, hi)
        else:
            shift, unit = np.zeros(d), np.ones(d)
        with np.errstate(over="ignore"):  # a far record may overflow when scaled: kept finite, clipped below
            Xs = np.clip((X - shift) / unit, -np.finfo(float).max, np.finfo(float).max)
        blo, bhi = (lo - shift) / unit, (hi - shift) / unit
        mode = self.query if self.query != "auto" else ("grid" if d <= 4 else "random")
        if mode == "grid":
            if self.spacing is not None:
                per_f = np.floor((bhi - blo) / self.spacing) + 1
                if not np.all(per_f <= 2_000_000):
                    raise ParameterError("dp-dpc-grid: the spacing is too small for the bounds (over 2,000,000 "
                                         "nodes per column); use a larger spacing")
                per = per_f.astype(int)
                spacings = np.full(d, self.spacing)
            else:
                p = self.points_per_dim or max(2, int(math.floor(self.n_points ** (1.0 / d))))
                per = np.full(d, p)
                spacings = (bhi - blo) / (per - 1)
            total = float(np.prod(per.astype(float)))
            if total > 2_000_000:
                raise ParameterError(f"dp-dpc-grid: the grid would have {total:.3g} nodes (> 2,000,000); use fewer "
                                     "points_per_dim, a larger spacing, or query = \"random\"")
            floor = float(np.min(spacings)) / 2.0
        else:
            floor = float(np.sqrt(np.sum((bhi - blo) ** 2))) / 1000.0
        dc, dc_info = self._grid_dc(Xs, blo, bhi, floor, context)
        if mode == "grid":
            axes = [blo[j] + spacings[j] * np.arange(per[j]) for j in range(d)]
            nodes = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
            sens = _dpc_dp.grid_sensitivity(self.kernel, spacings, dc)
            sens_text = ("prod over columns of (floor(2 d_c / h) + 1)" if self.kernel == "cutoff"
                         else "prod over columns of sup_u sum_m exp(-((u - m h) / d_c)^2)")
            query_info: dict[str, Any] = {"query": "grid", "points_per_dim": per.tolist(), "spacing": spacings.tolist()}
        else:
            # Query points are public: drawn within the bounds, independent of the records.
            nodes = blo + (bhi - blo) * context.rng.random((self.n_points, d))
            sens = _dpc_dp.points_sensitivity(self.kernel, nodes, dc, self.truncate or None)
            sens_text = "bound on max_x sum_q K(||q - x||) over the drawn query points"
            query_info = {"query": "random", "n_points": self.n_points}
        if not (math.isfinite(sens) and sens > 0):
            raise ParameterError(f"dp-dpc-grid: the density sensitivity is not a finite positive number ({sens!r}) "
                                 f"for d_c = {dc:.6g} and this grid; use a larger spacing or a smaller dc")
        # Every record is clipped, coordinate by coordinate, to the bounds widened by a public margin (a
        # function of the bounds and d_c only). Every node lies within the bounds, so a coordinate clipped
        # to the margin is at least the margin away from every node: its kernel weight is 0.0 there and
        # was 0.0 before, and the node densities are unchanged. Clipping is applied record by record, so
        # neighbouring data sets stay neighbours and the sensitivity (a bound over any record position)
        # holds as stated.
        margin = min(max(CLIP_MARGIN_DC, self.truncate or 0.0) * dc, MAX_SPAN)
        Xs = np.clip(Xs, blo - margin, bhi + margin)
        privclust.RecordProgress(context, data.shape[0]).stage(1, 4)
        rho_nodes = _dpc.cross_densities(nodes, Xs, dc, self.kernel, self.truncate or None)
        privclust.RecordProgress(context, data.shape[0]).stage(2, 4)
        worst = 2.0 * sens
        scale = worst / self.epsilon
        if not math.isfinite(scale):
            raise ParameterError(f"dp-dpc-grid: the noise scale {worst:.6g} / epsilon overflows a float; raise "
                                 "'epsilon' or lower the sensitivity (a smaller dc or a larger spacing)")
        clip_effect = ("beyond which every node's kernel is 0.0 in floating point, so the clipping changes no node "
                       "density"
                       if margin < MAX_SPAN else
                       f"a margin capped at {MAX_SPAN:g}, so a record clipped from beyond it may add up to "
                       f"exp(-({MAX_SPAN:g} / d_c)^2) to a node density")
        details = {"sensitivity_add_remove": sens, "sensitivity_replace_one": worst, "rule": sens_text, "dc": dc,
                   "noise_scale": scale, "nodes": int(nodes.shape[0]), "clip_margin": margin,
                   "clip_region": {str(c): [float(a), float(b)] for c, a, b in zip(
                       data.columns, (blo - margin) * unit + shift, (bhi + margin) * unit + shift, strict=True)},
                   **query_info, **bounds_info}
        mech = context.mechanism(self.noise)
        noisy = np.asarray(mech.release(
            rho_nodes, sensitivity=worst, epsilon=self.epsilon, context=context, relation=GRID_RELATION,
            covers=(f"the noisy densities at the {nodes.shape[0]} query points and everything computed from "
                    "them alone (the cluster map: node deltas, centres, node labels, the merge, the cluster "
                    "numbers and the released centres)"),
            not_covered=("the per-record labels: each is a local function of the record's own values and the DP "
                         "cluster map (a joint-DP / billboard view), not a differentially private output"),
            details=details), dtype=float)
        context.record(
            f"dp-dpc-grid: the cluster map over {nodes.shape[0]} query points is {at_least(self.epsilon)}-DP under "
            f"replace-one (L1 sensitivity {at_most(worst, 4)} = 2 x {at_most(sens, 4)} for a record anywhere, "
            f"independent of the {n} records); the cluster numbers and the released centres are computed from the map "
            f"alone. Every record is first clipped to the bounds widened by {margin:.4g} (clustering units) on each "
            f"side, {clip_effect}. Each record's label is the cluster of the node nearest to its clipped position "
            "(or of the nearest clustered node): a function of that record and the DP map, so labels are covered "
            "only in the joint-DP sense, not as a DP release.",
            claim=privclust.Guarantee("cluster map on public query points"), details=details)
        threshold = 3.0 * scale if self.density_threshold is None else self.density_threshold
        support = np.flatnonzero(noisy > threshold)
        if support.size < 3:
            support = np.argsort(-noisy, kind="stable")[:max(3, self.n_clusters or 0)]
            support.sort()
        S = nodes[support]
        rho_s = noisy[support]
        unique = _dpc.unique_points(S)
        cell = float(np.min(spacings)) if mode == "grid" else dc
        index = _dpc.PairIndex(unique[0], cell / 2.0)
        delta_s, parent_s, order_s = _dpc.delta_parent(S, rho_s, index=index, unique=unique, radius=max(cell, dc))
        k = None if self.n_clusters is None else min(self.n_clusters, support.size)
        gamma_s = _dpc_centres.normalised_gamma(rho_s, delta_s)
        extra: dict[str, Any] = {}
        if k is not None:
            centres_s = _dpc_centres.top_k_centres(gamma_s, k, int(order_s[0]))
        else:
            m, kappa, _ = _dpc_centres.addpc_boundary(gamma_s, self.eta, self.i_max)
            centres_s = _dpc_centres.top_k_centres(gamma_s, m, int(order_s[0]))
            extra = {"kappa": kappa, "boundary": m}
        lab_s = _dpc_centres.assign(parent_s, centres_s)
        privclust.RecordProgress(context, data.shape[0]).stage(3, 4)
        G = nodes.shape[0]
        before = None
        radius = self.radius
        if self.radius_percent is not None:
            radius = _dpc.percent_distance(S, [self.radius_percent], lambda: context.rng)[0][0]
        if radius is not None:
            comp = _dpc_centres.components(S, radius)
            rank = np.empty_like(order_s)
            rank[order_s] = np.arange(order_s.size)
            before = np.full(G, -1, dtype=np.int64)
            before[support] = lab_s
            lab_s = _dpc_centres.merge_reachable(lab_s, comp, rank)
            heads_s = _dpc_centres.merged_heads(lab_s, centres_s, rank)  # each merged cluster's densest node
        else:
            heads_s = centres_s
        # Cluster numbers and released centres from the DP map alone (never from where the records fall):
        # the clusters that survive the merge, numbered in the order of their centres.
        lab_s, kept = _dpc_centres.compress_labels(lab_s)
        node_labels = np.full(G, -1, dtype=np.int64)
        node_labels[support] = lab_s
        # Each record: its nearest node's label, else the nearest clustered node's.
        _, nearest = cKDTree(nodes).query(Xs)
        labels = node_labels[nearest]
        lost = labels < 0
        if lost.any():
            _, near_s = cKDTree(S).query(Xs[lost])
            labels[lost] = lab_s[near_s]
        centres = support[centres_s]
        delta = np.full(G, np.nan)
        delta[support] = delta_s
        gamma = np.full(G, np.nan)
        gamma[support] = gamma_s
        parent = np.full(G, -1, dtype=np.int64)
        parent[support] = np.where(parent_s >= 0, support[np.maximum(parent_s, 0)], -1)
        grid_points = nodes * unit + shift
        diagnostics: dict[str, Any] = {
            "grid_points": grid_points, "rho": noisy, "delta": delta, "gamma": gamma, "parent": parent,
            "centre_indices": centres, "n_centres": int(centres.size), "cluster_centre_indices": support[heads_s[kept]],
            "node_labels": node_labels, "support": np.isin(np.arange(G), support), "density_threshold": threshold,
            "dc": dc, "kernel": self.kernel, "dc_rule": dc_info, "accounting": details, "scale": self.scale, **extra,
        }
        diagnostics.update(self._effective(diagnostics, centres.size))
        if before is not None and radius is not None:  # before is drawn only with a radius
            rec_before = before[nearest]
            if lost.any():
                rec_before[lost] = before[support][near_s]
            diagnostics["labels_before_merge"] = rec_before
            diagnostics["node_labels_before_merge"] = before
            diagnostics["radius"] = float(radius)
        privclust.RecordProgress(context, data.shape[0]).stage(4, 4)
        return Partition(labels=labels, centres=grid_points[support[heads_s[kept]]],
                         columns=tuple(map(str, data.columns)), diagnostics=diagnostics)


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(DPDPCGrid)
