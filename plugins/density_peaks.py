"""Built-in density-peak clusterers: ``dpc``, ``addpc``, ``dp-dpcl``, ``addpc-rdp``,
``dp-rccfsfdp`` and the rigorous ``dp-dpc-grid`` (issue 4).

The algorithms follow ``dp-density-peaks-spec.md``: Rodriguez & Laio's DPC
(formulas (1)-(4), the percentage rule for d_c, stable tie rules), the
reconstructed AdDPC choice of the number of centres (the ``slope`` reading of
formulas (5)-(6)), DP-DPCL (noisy densities, AdDPC choice, reachability merge
oriented by the noisy densities), and the paper's baselines AdDPC_rDP and
DP-rcCFSFDP. The numerical kernels are in :mod:`privclust_plugins._dpc`.

Privacy accounting (the spec's product decisions 2-4). The paper adds
Lap(1/epsilon) to each density and claims epsilon-DP; that holds per
coordinate only. The ledger of the three "paper" mechanisms records the
claimed per-coordinate epsilon, the L1 sensitivity of the whole density
vector for the data at hand and in the worst case, and charges the
accountant the worst case (a data-dependent figure is not a guarantee).
``calibration = "vector"`` adds Lap(worst case / epsilon) instead, so the
claimed epsilon really holds for the density vector (with no utility left).
Labels, deltas, parents and centres are computed from the raw distances and
are never covered. ``dp-dpc-grid`` releases noisy densities on public query
points with a sensitivity independent of n; its cluster map (and the cluster
numbers and centres, computed from the map alone) is epsilon-DP.

Secure defaults: in the private components a parameter taken from the data
(d_c or E by the percentage rule, min-max scaling, ``bounds = "data"``) is
declared by ``data_leaks()`` and refused when the recipe is compiled unless
``[privacy] allow_leaks`` names it; ``dp-dpc-grid`` offers DP quantiles for
its bounds and d_c instead, charged to the budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import (
    BudgetExceededError,
    DataError,
    DataLeak,
    ParameterError,
    Partition,
    PrivacyContext,
    Sensitivity,
    at_least,
    at_most,
    nested,
    param,
)

from . import _dpc, _dpc_centres, _dpc_dp

__version__ = "0.1.0"

#: The neighbouring relation the density-vector accounting is stated for.
RELATION = privclust.Relation.REPLACE_ONE.explained(
    "neighbouring data sets differ in one record's values; the number of records is public, as it must be for a "
    "vector with one density per record")
#: What the paper-style mechanisms never cover.
LABELS_NOT_COVERED = (
    "the per-record labels, the deltas, the parents, the choice of centres, the reachability merge and the "
    "centre coordinates (which are records of the data) are computed from the exact pairwise distances of the "
    "raw records, not from the noisy densities alone, so they are not a post-processing of the noisy densities "
    "and carry no differential-privacy guarantee"
)


def _check_epsilon(value: Any) -> str | None:
    if value is None or 1e-300 <= value <= 1e300:
        return None
    return "must be a finite number between 1e-300 and 1e300 (its noise scale or its charge would overflow)"


def _check_percent(value: Any) -> str | None:
    return None if value is None or 0 < value < 100 else "must be a percentage in (0, 100)"


def _matrix(data: pd.DataFrame, name: str, k: int | None, *, check_spans: bool = True) -> np.ndarray:
    """The data as a float matrix. ``check_spans`` refuses columns whose range
    would overflow the squared distances: for scales taken from the data. A
    component whose scales are public (``dp-dpc-grid`` with public or DP
    bounds and d_c) turns it off and clips the records to a public region
    instead, so that one far record cannot turn its release into an error."""
    X = privclust.data_matrix(data, name)
    if X.shape[0] < 3:
        raise DataError(f"{name} needs at least 3 records; the data have {X.shape[0]}")
    if check_spans:
        _check_spans(X, data.columns, name)
    if k is not None and k > X.shape[0]:
        raise ParameterError(
            f"The 'n_clusters' parameter of {name} must be at most the number of records ({X.shape[0]}); got {k}.")
    return X


#: Largest span of a column (max - min) whose squared distances are safe to sum.
MAX_SPAN = 1e150
#: ``dp-dpc-grid`` clips every record to its bounds widened by this many d_c
#: (or ``truncate`` d_c if larger) on each side: a record that far from every
#: node adds exp(-30^2) = exp(-900) or less to a node density, which is 0.0 in
#: floating point (the smallest positive float is about exp(-744)), so the
#: clipping changes no node density; it only keeps the arithmetic finite.
CLIP_MARGIN_DC = 30.0


def _span(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``high - low`` without overflow (inf when the true difference is not a float)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return high - low


def _check_spans(X: np.ndarray, columns: Any, name: str) -> None:
    """Refuse columns whose range would overflow the squared distances."""
    span = _span(X.min(axis=0), X.max(axis=0))
    bad = [str(c) for c, s in zip(columns, span, strict=True) if not s <= MAX_SPAN]
    if bad:
        raise DataError(
            f"{name}: column(s) {', '.join(bad)} span more than {MAX_SPAN:g} (max - min), so squared distances "
            "would overflow a float; rescale the column(s) first (e.g. divide by a power of ten so that values are "
            "within +-1e100) and give d_c in the same units")


def _unit_of(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The span used by min-max scaling, 1 for a constant column."""
    span = _span(low, high)
    return np.where(high > low, span, 1.0)


@attrs.frozen(kw_only=True)
class _DensityPeaks:
    """Parameters and steps shared by every density-peak clusterer."""

    name: ClassVar[str] = "_density-peaks"
    uses_constraints: ClassVar[bool] = False
    #: Whether the component releases noisy densities (and so records leaks).
    private: ClassVar[bool] = False
    #: Whether the automatic (AdDPC) choice of centres exists.
    automatic: ClassVar[bool] = False
    #: Old recipe keys and their new names (the error for an old key names the new one).
    renamed_params: ClassVar[Mapping[str, str]] = {"k": "n_clusters"}
    #: Whether the centres are chosen from the records' exact distances (not from a DP release alone).
    centres_from_records: ClassVar[bool] = True

    kernel: str = param(str, default="gaussian", choices=("gaussian", "cutoff"),
                        doc='density kernel: "gaussian" exp(-(d/d_c)^2) or "cutoff" 1[d < d_c]')
    dc_percent: float | None = param(float, role="plain", default=None, check=_check_percent,
                                     doc="d_c as the t-th percentage of the sorted pairwise distances "
                                         "(default 2.0 when dc is not given; derived from the data, so it leaks)")
    dc: float | None = param(float, role="plain", default=None, gt=0,
                             doc="absolute, public d_c (overrides the percentage rule)")
    n_clusters: int | None = param(int, default=None, ge=1,
                                   doc="fixed number of clusters (the papers' k: the top-k decision values); "
                                       "absent: the automatic choice")
    scale: str = param(str, default="none", choices=("none", "minmax"),
                       doc='"minmax" rescales each column to [0, 1] with its data range first (leaks the range)')
    truncate: float | None = param(float, role="plain", default=3.0, ge=0, optional=True,
                                   doc="Gaussian kernel summed over pairs within truncate * d_c (0 or None: all "
                                       "pairs, exact but O(n^2) time)")

    def __attrs_post_init__(self) -> None:
        if self.dc is not None and self.dc_percent is not None:
            raise ParameterError(f"{self.name}: give either 'dc' (absolute) or 'dc_percent', not both.")

    def min_records(self, n_columns: int) -> int:
        """Three records, and at least ``n_clusters`` (a peak is a record)."""
        return max(3, self.n_clusters or 0)

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        if n_records < 3:
            return [f"{self.name} needs at least 3 records; the data have {n_records}"]
        if self.n_clusters is not None and self.n_clusters > n_records:
            return [f"{self.name}: n_clusters = {self.n_clusters}, but a peak is a record and the data have "
                    f"{n_records}; lower n_clusters (at most {n_records})"]
        return []

    def data_leaks(self) -> list[DataLeak]:
        """The data-derived parameters of a private component (secure
        defaults: refused unless the recipe opts in with allow_leaks)."""
        if not self.private:
            return []
        leaks = []
        if self.scale == "minmax":
            leaks.append(DataLeak("scale", "scale", f"{self.name} with scale = \"minmax\" would rescale every column "
                                  "by its range in the data", 'give public bounds and scale the columns before the '
                                  'step, or leave scale = "none"'))
        if self.dc is None:
            t = 2.0 if self.dc_percent is None else self.dc_percent
            leaks.append(DataLeak("dc_percent", "dc_percent" if self.dc_percent is not None else "dc",
                                  f"{self.name} would take d_c as the {t:g}% quantile of the pairwise distances of "
                                  "the data (no absolute 'dc' given)",
                                  "give an absolute public d_c: dc = <distance in the data's units>"))
        return leaks

    # -- shared steps -------------------------------------------------------------------

    def _prepare(self, data: pd.DataFrame, context: PrivacyContext, X: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, dict]:
        X = _matrix(data, self.name, self.n_clusters) if X is None else X
        info: dict[str, Any] = {"scale": self.scale}
        if self.scale == "minmax":
            lo, hi = X.min(axis=0), X.max(axis=0)
            Xs = (X - lo) / _unit_of(lo, hi)
            info["scale_bounds"] = {str(c): [float(a), float(b)] for c, a, b in zip(data.columns, lo, hi, strict=True)}
            if self.private:
                context.record_leak(
                    "scale",
                    f"min-max scaling took the range of {', '.join(map(str, data.columns))} from the data; the "
                    "ranges shape every distance and are outside the differential-privacy guarantee.",
                    alternative="scale the columns with public bounds before the step, or use dp-dpc-grid with public "
                                "bounds",
                    details={"bounds": info["scale_bounds"]},
                )
        else:
            Xs = X
        return X, Xs, info

    def _dc(self, Xs: np.ndarray, context: PrivacyContext, extra_percent: float | None = None
            ) -> tuple[float, float | None, dict]:
        """d_c (and E from ``extra_percent``) in the clustering units."""
        percents = []
        if self.dc is None:
            percents.append(2.0 if self.dc_percent is None else self.dc_percent)
        if extra_percent is not None:
            percents.append(extra_percent)
        values: list[float] = []
        info: dict[str, Any] = {}
        if percents:
            values, info = _dpc.percent_distance(Xs, percents, lambda: context.rng)
        dc = float(self.dc) if self.dc is not None else values.pop(0)
        extra = values.pop(0) if extra_percent is not None else None
        if not dc > 0:
            raise DataError(
                f"{self.name}: the {percents[0]}% smallest pairwise distance is 0 (the data hold too many duplicate "
                "records); raise 'dc_percent' or give an absolute 'dc' > 0")
        if info.get("method") == "sampled":
            info["note"] = (f"d_c estimated from {info['sample_pairs']:,} random pairs of records drawn from the "
                            f"run's random stream (the exact rule would sort all {info['pairs']:,} pairwise distances)")
        if self.private and self.dc is None:
            t = percents[0]
            context.record_leak(
                "dc_percent",
                f"d_c = {dc:.6g} is the {t}% quantile of the pairwise distances of the data"
                + (" (estimated from a random sample of pairs)" if info.get("method") == "sampled" else "")
                + "; it is released in the diagnostics and sets the scale of every density, outside the "
                  "differential-privacy guarantee (which assumes a public d_c).",
                alternative=f"give an absolute public dc (e.g. dc = {dc:.3g} from domain knowledge or an earlier, "
                            "separately accounted release)",
                details={"dc": dc, "dc_percent": t, **info},
            )
        return dc, extra, info

    def _densities(self, Xs: np.ndarray, dc: float) -> tuple[np.ndarray, tuple, _dpc.PairIndex]:
        unique = _dpc.unique_points(Xs)
        index = _dpc.PairIndex(unique[0], dc / 2.0)
        rho = _dpc.densities(unique[0], dc, self.kernel, self.truncate or None, counts=unique[2],
                             index=index)[unique[1]]
        return rho, unique, index

    def _centres_auto(self, rho: np.ndarray, delta: np.ndarray, order: np.ndarray, eta: float, i_max: int
                      ) -> tuple[np.ndarray, np.ndarray, dict]:
        """AdDPC choice (or top-k of gamma* in the fixed-k mode)."""
        gamma = _dpc_centres.normalised_gamma(rho, delta)
        extra: dict[str, Any] = {}
        if self.n_clusters is not None:
            centres = _dpc_centres.top_k_centres(gamma, self.n_clusters, int(order[0]))
        else:
            m, kappa, g_order = _dpc_centres.addpc_boundary(gamma, eta, i_max)
            centres = _dpc_centres.top_k_centres(gamma, m, int(order[0]))
            extra = {"kappa": kappa, "boundary": m}
        return centres, gamma, extra

    def _effective(self, diagnostics: dict, n_centres: int) -> dict[str, Any]:
        """The parameters in use that the recipe left unset, for the report
        (privclust.EFFECTIVE_PARAMS): the number of centres chosen
        automatically, the d_c percentage; d_c itself, a quantile of the
        data's distances, goes under privclust.EFFECTIVE_PARAMS_FROM_DATA,
        and so does the number of centres where the records' exact distances
        chose it (every clusterer here but dp-dpc-grid, whose centres are
        chosen on its DP map: the noisy mechanisms' choice uses the raw
        deltas too, and with a merge or a halo the released labels do not
        show it)."""
        public: dict[str, Any] = {}
        from_data: dict[str, Any] = {}
        if self.n_clusters is None or int(n_centres) != self.n_clusters:
            # automatic, or fewer centres than asked for (dp-dpc-grid: fewer grid nodes with support; the report showed
            # the n_clusters asked for as the value used: a red-team audit)
            (from_data if self.centres_from_records else public)["n_clusters"] = int(n_centres)
        if self.dc is None:
            public["dc_percent"] = 2.0 if self.dc_percent is None else float(self.dc_percent)
            from_data["dc"] = float(diagnostics["dc"])
        return {privclust.EFFECTIVE_PARAMS: public, privclust.EFFECTIVE_PARAMS_FROM_DATA: from_data}

    def _partition(self, X: np.ndarray, data: pd.DataFrame, labels: np.ndarray, centres: np.ndarray,
                   diagnostics: dict, heads: np.ndarray | None = None) -> Partition:
        """``heads[L]``: the centre of the cluster labelled ``L`` (``centres``
        unless a merge moved it)."""
        final, kept = _dpc_centres.compress_labels(labels)
        cluster_centres = (centres if heads is None else heads)[kept]
        diagnostics = {**diagnostics, "centre_indices": centres, "n_centres": int(centres.size),
                       "cluster_centre_indices": cluster_centres, **self._effective(diagnostics, centres.size)}
        return Partition(labels=final, centres=X[cluster_centres], columns=tuple(map(str, data.columns)),
                         diagnostics=diagnostics)


def _charge_check(context: PrivacyContext, name: str, epsilon: float, *, covers: str = "its DP releases",
                  hint: str = "") -> None:
    """Refuse before any computation or random draw when the step's whole
    charge (its releases together, under :data:`RELATION`, replace-one like
    every release of the density-peak clusterers) cannot fit; ``hint`` adds
    another way out."""
    try:
        context.check_spend(epsilon, relation=RELATION, mechanism=name, covers=covers)
    except BudgetExceededError as err:
        if not hint:
            raise
        raise BudgetExceededError(f"{err} {hint}") from None


# ---------------------------------------------------------------------------
# Non-private clusterers
# ---------------------------------------------------------------------------


#: The setting under which a density-peak clusterer's densities are counts (geometric noise fits them).
CUTOFF_OPTION = 'kernel = "cutoff", whose densities are counts,'


@attrs.frozen(kw_only=True)
class DPC(_DensityPeaks):
    """Rodriguez & Laio's clustering by fast search and find of density peaks.

    Centres: the ``k`` points of largest ``gamma = rho * delta`` (the highest-
    density point always among them), or the decision-graph thresholds
    ``rho > rho_min`` and ``delta > delta_min``. Other points take the label of
    their nearest denser point. No privacy guarantee.
    """

    name: ClassVar[str] = "dpc"

    rho_min: float | None = param(float, role="plain", default=None,
                                  doc="decision-graph threshold on the density (with delta_min)")
    delta_min: float | None = param(float, role="plain", default=None,
                                    doc="decision-graph threshold on delta (with rho_min)")
    halo: bool = param(bool, default=False, doc="mark halo points (label -1) as in Rodriguez & Laio")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        thresholds = (self.rho_min is not None, self.delta_min is not None)
        if thresholds[0] != thresholds[1]:
            raise ParameterError(
                "dpc: give both 'rho_min' and 'delta_min' (the decision-graph thresholds), or neither.")
        if self.n_clusters is None and not thresholds[0]:
            raise ParameterError("dpc: choose the centres with 'n_clusters' (the n_clusters largest gamma) or with "
                                 "'rho_min' and "
                                 "'delta_min' (decision-graph thresholds); for an automatic choice use addpc.")
        if self.n_clusters is not None and thresholds[0]:
            raise ParameterError("dpc: give either 'n_clusters' or the thresholds 'rho_min'/'delta_min', not both.")

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        X, Xs, info = self._prepare(data, context)
        privclust.RecordProgress(context, data.shape[0]).stage(0, 4)
        dc, _, dc_info = self._dc(Xs, context)
        rho, unique, index = self._densities(Xs, dc)
        privclust.RecordProgress(context, data.shape[0]).stage(1, 4)
        delta, parent, order = _dpc.delta_parent(Xs, rho, index=index, unique=unique)
        privclust.RecordProgress(context, data.shape[0]).stage(2, 4)
        gamma = rho * delta
        if self.n_clusters is not None:
            centres = _dpc_centres.top_k_centres(gamma, self.n_clusters, int(order[0]))
        else:
            assert self.rho_min is not None and self.delta_min is not None  # both, without n_clusters (post-init)
            centres = _dpc_centres.threshold_centres(rho, delta, gamma, self.rho_min, self.delta_min)
            if centres.size == 0:
                raise ParameterError(
                    f"dpc: no point has rho > {self.rho_min} and delta > {self.delta_min} (largest rho "
                    f"{rho.max():.6g}, largest delta {delta.max():.6g}); lower the thresholds")
        labels = _dpc_centres.assign(parent, centres)
        diagnostics: dict[str, Any] = {"rho": rho, "delta": delta, "gamma": gamma, "parent": parent, "dc": dc,
                                       "kernel": self.kernel, "dc_rule": dc_info, **info}
        if self.halo:
            labels = _mark_halo(Xs, rho, labels, dc, diagnostics)
        privclust.RecordProgress(context, data.shape[0]).stage(4, 4)
        return self._partition(X, data, labels, centres, diagnostics)


def _mark_halo(Xs: np.ndarray, rho: np.ndarray, labels: np.ndarray, dc: float,
               diagnostics: dict[str, Any]) -> np.ndarray:
    """Label the halo points -1 (Rodriguez & Laio), keeping the labels before."""
    is_halo = _dpc_centres.halo(Xs, rho, labels, dc)
    diagnostics["halo"] = is_halo
    diagnostics["labels_before_halo"] = labels.copy()
    return np.where(is_halo, -1, labels)


@attrs.frozen(kw_only=True)
class AdDPC(_DensityPeaks):
    """AdDPC: DPC with the number of centres chosen from the slope change of
    the sorted normalised decision values (RECONSTRUCTION of formulas (5)-(6):
    ``kappa_i = (i - eta)(g_i - g_{i+1})``, ``m = argmax_{i <= i_max} kappa_i``)."""

    name: ClassVar[str] = "addpc"
    automatic: ClassVar[bool] = True

    eta: float = param(float, role="plain", default=1.001, gt=0,
                       doc="weighting factor of the slope-change rate (paper: 1.001)")
    i_max: int = param(int, default=50, ge=1, doc="largest number of centres considered (paper: 50)")
    halo: bool = param(bool, default=False, doc="mark halo points (label -1) as in Rodriguez & Laio")

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        X, Xs, info = self._prepare(data, context)
        dc, _, dc_info = self._dc(Xs, context)
        rho, unique, index = self._densities(Xs, dc)
        privclust.RecordProgress(context, data.shape[0]).stage(1, 3)
        delta, parent, order = _dpc.delta_parent(Xs, rho, index=index, unique=unique)
        privclust.RecordProgress(context, data.shape[0]).stage(2, 3)
        centres, gamma, extra = self._centres_auto(rho, delta, order, self.eta, self.i_max)
        labels = _dpc_centres.assign(parent, centres)
        diagnostics = {"rho": rho, "delta": delta, "gamma": gamma, "parent": parent, "dc": dc, "kernel": self.kernel,
                       "dc_rule": dc_info, **extra, **info}
        if self.halo:
            labels = _mark_halo(Xs, rho, labels, dc, diagnostics)
        privclust.RecordProgress(context, data.shape[0]).stage(3, 3)
        return self._partition(X, data, labels, centres, diagnostics)


# ---------------------------------------------------------------------------
# The paper's private clusterers
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _NoisyDensityPeaks(_DensityPeaks):
    """The paper-style mechanism: Laplace noise on each record's density."""

    private: ClassVar[bool] = True
    privacy_relation: ClassVar[privclust.Relation] = privclust.Relation.REPLACE_ONE
    #: its DP entries cover the noisy density vector, which is not released into the file; the labels it
    #: releases are computed from the exact pairwise distances of the raw records (LABELS_NOT_COVERED)
    dp_output: ClassVar[tuple[str, ...]] = ()
    #: Whether the component merges along the E-graph (and so needs E).
    merges: ClassVar[str] = "none"

    epsilon: float = param(float, role="privacy", default=1.0, gt=0, check=_check_epsilon,
                           doc="the paper's epsilon: Lap(1/epsilon) on each density")
    calibration: str = param(str, default="paper", choices=("paper", "vector"),
                             doc='"paper": Lap(1/epsilon) per density, charged honestly (epsilon x 2(n-1)); '
                                 '"vector": Lap(2(n-1)/epsilon) so that epsilon holds for the density vector')
    noise: Any = nested("noise_mechanisms", default="laplace", doc="the noise mechanism (an L1, pure-epsilon one)")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        problem = _dpc_dp.nested_noise_problem(self.name, self.noise, integer_values=self.kernel == "cutoff",
                                                integer_option=CUTOFF_OPTION)
        if problem:
            raise ParameterError(problem)

    def planned_cost(self) -> tuple[float, float]:
        """The least charge: ``epsilon`` with ``calibration = "vector"``; the
        paper calibration charges epsilon x 2(n - 1), known only with the
        data, and at least that for the fewest records the step accepts
        (``min_records``): a budget below it can never fit, whatever the
        data, and is refused when the recipe is compiled."""
        if self.calibration == "vector":
            return (self.epsilon, 0.0)
        return (self._charge(self.min_records(0))[1], 0.0)

    def _charge(self, n: int) -> tuple[float, float]:
        """(sensitivity of the release call, epsilon charged) for ``n`` records."""
        worst = 2.0 * (n - 1)
        if self.calibration == "vector":
            charged = self.epsilon
        else:
            charged = self.epsilon * worst
        if not (math.isfinite(charged) and math.isfinite(worst / self.epsilon)):
            raise ParameterError(f"{self.name}: epsilon = {at_least(self.epsilon)} with {n} records gives a charge "
                                 "or a noise scale that overflows a float; use a smaller 'epsilon' (or calibration = "
                                 "\"vector\")")
        return worst, charged

    def _radius(self, Xs: np.ndarray, context: PrivacyContext, percent_value: float | None) -> tuple[float, dict]:
        radius = getattr(self, "radius", None)
        if radius is not None:
            return float(radius), {"radius_rule": "absolute"}
        assert percent_value is not None
        e = self._radius_percent()
        context.record_leak(
            "radius_percent",
            f"the reachability radius E = {percent_value:.6g} is the {e}% quantile of the pairwise distances of the "
            "data; it decides which clusters merge and is outside the differential-privacy guarantee.",
            alternative=f"give an absolute public radius (e.g. radius = {percent_value:.3g})",
            details={"radius": percent_value, "radius_percent": e},
        )
        return percent_value, {"radius_rule": f"{e}% of the pairwise distances"}

    def _radius_percent(self) -> float | None:
        if getattr(self, "radius", None) is not None:
            return None
        value = getattr(self, "radius_percent", None)
        return 1.0 if value is None else value

    def _release(self, rho: np.ndarray, context: PrivacyContext) -> tuple[np.ndarray, dict]:
        n = rho.size
        sens, charged = self._charge(n)
        local = float(rho.max())
        eps = self.epsilon
        scale = 1.0 / eps if self.calibration == "paper" else sens / eps
        details = {
            "calibration": self.calibration,
            "claimed_epsilon_per_density": eps,
            "per_density_sensitivity": 1.0,
            "noise_scale": scale,
            "vector_sensitivity_worst_case_replace_one": sens,
            "vector_sensitivity_worst_case_add_remove_common_coordinates": float(n - 1),
            "epsilon_charged": charged,
            "d_c_public": self.dc is not None,
        }
        # The figure for the data at hand is the largest raw density, exact: one record can change it. It goes to
        # the step's diagnostics for the reproduction (the specification's table), never to the ledger or a report.
        at_hand = {"vector_sensitivity_data_at_hand_removal": local,
                   "epsilon_data_at_hand": eps * local if self.calibration == "paper" else eps * local / sens}
        eps_text = at_least(eps)  # a privacy-loss figure as a statement shows it: never below the value
        if self.calibration == "paper":
            covers = (f"the noisy density vector (one density per record, Lap(1/{eps_text}) on each; the paper "
                      f"claims {eps_text}-DP per density)")
        else:
            covers = f"the noisy density vector (one density per record, Lap({sens:.0f}/{eps_text}) on each)"
        mech = context.mechanism(self.noise)
        noisy = mech.release(rho, sensitivity=Sensitivity(l1=sens, l2=math.sqrt((n - 1) ** 2 + (n - 1))),
                             epsilon=charged, context=context, relation=RELATION, covers=covers,
                             not_covered=LABELS_NOT_COVERED, claimed_epsilon=eps, details=details)
        if self.calibration == "paper":
            statement = (
                f"{self.name} (paper-faithful mechanism): the paper claims epsilon = {eps_text} because one density "
                f"changes by at most 1, but the released vector of {n} densities moves by up to {sens:.0f} in L1 under "
                f"replace-one (n - 1 = {n - 1} over the common coordinates when one record is removed), so the "
                f"accountant was charged epsilon x {sens:.0f} = {at_least(charged)}. (Removing the densest record "
                "moves the vector by its own density, a figure of the raw data that is no guarantee: it is in the "
                "step's diagnostics, 'accounting', not in the ledger.) " + LABELS_NOT_COVERED[0].upper()
                + LABELS_NOT_COVERED[1:] + "."
            )
        else:
            statement = (
                f"{self.name} (vector calibration): Lap({sens:.0f}/{eps_text}) on each of the {n} densities makes "
                f"the vector {eps_text}-DP under replace-one (worst-case L1 sensitivity {sens:.0f}); the noise scale "
                f"{at_most(scale, 4)} dwarfs densities of at most n - 1 = {n - 1}, so expect no utility. "
                + LABELS_NOT_COVERED[0].upper() + LABELS_NOT_COVERED[1:] + "."
            )
        context.record(statement, claim=privclust.Guarantee("density-vector accounting"), details=details)
        return np.asarray(noisy, dtype=float), {**details, **at_hand}

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        X = _matrix(data, self.name, self.n_clusters)
        _charge_check(context, self.name, self._charge(X.shape[0])[1], covers="the noisy density vector",
                      hint=('With calibration = "vector" the step is charged its epsilon alone.'
                            if self.calibration == "paper" else ""))
        X, Xs, info = self._prepare(data, context, X)
        e_percent = self._radius_percent() if self.merges != "none" else None
        dc, e_value, dc_info = self._dc(Xs, context, e_percent)
        rho, unique, index = self._densities(Xs, dc)
        privclust.RecordProgress(context, data.shape[0]).stage(1, 5)
        noisy, accounting = self._release(rho, context)
        privclust.RecordProgress(context, data.shape[0]).stage(2, 5)
        delta, parent, order = _dpc.delta_parent(Xs, noisy, index=index, unique=unique)
        privclust.RecordProgress(context, data.shape[0]).stage(3, 5)
        centres, gamma, extra = self._choose(noisy, delta, order)
        labels = _dpc_centres.assign(parent, centres)
        diagnostics: dict[str, Any] = {"rho": noisy, "delta": delta, "gamma": gamma, "parent": parent, "dc": dc,
                                       "kernel": self.kernel, "dc_rule": dc_info, "accounting": accounting,
                                       **extra, **info}
        if self.merges != "none":
            radius, rinfo = self._radius(Xs, context, e_value)
            comp = _dpc_centres.components(Xs, radius, unique=unique, index=index)
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            diagnostics["labels_before_merge"] = labels.copy()
            if self.merges == "points":
                labels = _dpc_centres.merge_reachable(labels, comp, rank)
            else:
                labels = _dpc_centres.merge_centres(labels, centres, comp, rank)
            diagnostics.update(radius=radius, n_components=int(comp.max()) + 1, **rinfo)
            # each merged cluster's centre is its densest point (centre L may have joined another cluster)
            heads = _dpc_centres.merged_heads(labels, centres, rank)
        else:
            heads = centres
        privclust.RecordProgress(context, data.shape[0]).stage(5, 5)
        return self._partition(X, data, labels, centres, diagnostics, heads=heads)

    def _choose(self, rho: np.ndarray, delta: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
        return self._centres_auto(rho, delta, order, self.eta, self.i_max)  # type: ignore[attr-defined]


@attrs.frozen(kw_only=True)
class _MergingDensityPeaks(_NoisyDensityPeaks):
    """The paper-style mechanism followed by a merge along the graph ``d_ij <= E``."""

    radius_percent: float | None = param(float, role="plain", default=None, check=_check_percent,
                                         doc="E as the e-th percentage of the sorted pairwise distances (default 1.0 "
                                             "when radius is not given; leaks)")
    radius: float | None = param(float, role="plain", default=None, gt=0, doc="absolute, public reachability radius E")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.radius is not None and self.radius_percent is not None:
            raise ParameterError(f"{self.name}: give either 'radius' (absolute) or 'radius_percent', not both.")

    def data_leaks(self) -> list[DataLeak]:
        leaks = super().data_leaks()
        if self.radius is None:
            e = 1.0 if self.radius_percent is None else self.radius_percent
            leaks.append(DataLeak("radius_percent", "radius_percent" if self.radius_percent is not None else "radius",
                                  f"{self.name} would take the merge radius E as the {e:g}% quantile of the pairwise "
                                  "distances of the data (no absolute 'radius' given)",
                                  "give an absolute public radius: radius = <distance in the data's units>"))
        return leaks


@attrs.frozen(kw_only=True)
class DPDPCL(_MergingDensityPeaks):
    """DP-DPCL (Ge et al. 2023): Laplace noise on the Gaussian densities, the
    AdDPC choice of centres on the noisy densities, then the reachability
    merge (Step 8, RECONSTRUCTION): every record takes the initial label of
    the noisily-densest record of its connected component of the graph
    ``d_ij <= E``."""

    name: ClassVar[str] = "dp-dpcl"
    automatic: ClassVar[bool] = True
    merges: ClassVar[str] = "points"

    eta: float = param(float, role="plain", default=1.001, gt=0,
                       doc="weighting factor of the slope-change rate (paper: 1.001)")
    i_max: int = param(int, default=50, ge=1, doc="largest number of centres considered (paper: 50)")


@attrs.frozen(kw_only=True)
class AdDPCrDP(_NoisyDensityPeaks):
    """AdDPC_rDP (RECONSTRUCTION): AdDPC on Laplace-noised densities, i.e.
    DP-DPCL without the reachability merge."""

    name: ClassVar[str] = "addpc-rdp"
    automatic: ClassVar[bool] = True

    eta: float = param(float, role="plain", default=1.001, gt=0,
                       doc="weighting factor of the slope-change rate (paper: 1.001)")
    i_max: int = param(int, default=50, ge=1, doc="largest number of centres considered (paper: 50)")


@attrs.frozen(kw_only=True)
class DPrcCFSFDP(_MergingDensityPeaks):
    """DP-rcCFSFDP (Chen et al. 2019; RECONSTRUCTION): DPC on Laplace-noised
    densities with the top-``k`` values of ``gamma = rho * delta`` as centres,
    then clusters whose centres are reachable from each other (same component
    of the graph ``d_ij <= E``) join the cluster of the denser centre."""

    name: ClassVar[str] = "dp-rccfsfdp"
    merges: ClassVar[str] = "centres"

    n_clusters: int = param(int, ge=1, doc="number of centres (the paper's k: top-k gamma); required (the method "
                                           "has no automatic choice)")

    def _choose(self, rho: np.ndarray, delta: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
        gamma = rho * delta
        return _dpc_centres.top_k_centres(gamma, self.n_clusters, int(order[0])), gamma, {}


def __getattr__(name: str) -> Any:
    """``DPDPCGrid`` moved to :mod:`privclust_plugins.dp_dpc_grid` after 0.1.0 (CHANGELOG, Unreleased); importing
    it from here still works."""
    if name in ("DPDPCGrid", "GRID_RELATION"):
        from . import dp_dpc_grid

        return getattr(dp_dpc_grid, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(DPC)
    register(AdDPC)
    register(DPDPCL)
    register(AdDPCrDP)
    register(DPrcCFSFDP)
