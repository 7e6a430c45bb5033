"""Built-in clusterer ``idp-kmeans``: the IDP K-means baseline of the DP-DPCL paper.

IDP K-means (Li Yang, Hao Zhifeng, Wen Wen et al., *Computer Science*
40(3):287-290, 2013) is differentially private Lloyd iteration with an
initialisation from equal blocks of the data. Only its abstract could be
read, so this is the **reconstruction** of section 3.6 of the density-peaks
specification, built on the standard DP-Lloyd scheme (Blum et al. 2005; Su
et al. 2016):

1. Clip every record to public ``bounds`` and min-max scale it into the unit
   cube ``[0, 1]^M`` (``M`` attributes). ``bounds = "dp"`` estimates them as
   DP quantiles within a public ``bounds_range``, charged ``bounds_epsilon``
   on top of ``epsilon``. ``bounds = "data"`` takes the bounds from the
   data; that leaks the minimum and maximum of each column, so it is refused
   unless the recipe accepts the leak (``[privacy] allow_leaks =
   ["bounds"]``), and the ledger says so.
2. Initial centres: rank the records by their attribute sum, cut them into
   ``n_blocks`` consecutive equal blocks (default ``n_blocks = n_clusters``;
   the paper's ``m``), release every block's coordinate sums and its count
   with Laplace noise, and take the noisy means. With ``n_blocks >
   n_clusters`` the ``n_clusters`` noisy block centres farthest apart are
   kept (farthest-first, starting from the block with the largest noisy
   count).
3. Lloyd rounds: assign each record to its nearest current centre, release
   the coordinate sums and counts of all ``n_clusters`` clusters at once with Laplace
   noise, and move each centre to its noisy mean (clipped to the cube).
4. Each record's label is its nearest final centre.

**Sensitivity.** In a Lloyd round the clusters are fixed by centres already
released, so a record sits in exactly one cluster: adding or removing it
moves that cluster's sum by at most ``M`` (L1, unit cube) and its count by
1, so ``Delta = M + 1``, the paper's figure. The initial blocks are defined
by rank, so one record also shifts the ``m - 1`` block boundaries (``m =
n_blocks``) by up to one position each: that release has ``Delta = (2m - 1)
M + 1`` (equal to ``M + 1`` only when ``m = 1``), and its noise is
calibrated to it.

**Budget.** ``schedule = "halving"`` (default) gives release t (t = 0 is the
initialisation) ``epsilon / 2^(t+1)``, so any number of rounds up to
``max_iter`` (the paper's 1000) stays within ``epsilon``;
``schedule = "uniform"`` gives ``epsilon / (T + 1)`` to the initialisation
and each of ``T = rounds`` rounds. The whole schedule is checked against the
budget before any noise is drawn.

**Stopping** (our choice; everything uses released values only, so it is
post-processing): a noisy mean replaces a centre only when that cluster's
noisy count is at least ``max(1, b_t)``, with ``b_t`` the round's Laplace
scale (the noise would otherwise exceed the signal); the loop stops when no
centre moved by more than ``tol`` (in unit-cube coordinates), when no
cluster could be updated, or after ``max_iter`` rounds (``rounds`` for the
uniform schedule). Under halving the noise doubles every round, so the loop
ends after a handful of rounds.

**What is covered.** The released centres (and the noisy counts) are
epsilon-DP under add/remove-one-record by sequential composition of the
rounds. The per-record labels are *not* covered: each is computed from the
record's own raw values.
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
    DataError,
    ParameterError,
    Partition,
    PrivacyContext,
    Sensitivity,
    at_least,
    at_most,
    nested,
    param,
    public_bounds,
)

from . import _dpc_dp, _kmeans

__version__ = "0.1.0"

__all__ = ["IDPKMeans"]

#: The neighbouring relation of every release of this component.
RELATION = privclust.Relation.ADD_REMOVE.explained("unbounded DP")
#: What no release of this component covers.
NOT_COVERED = (
    "the per-record labels (each record's nearest released centre, computed from its own raw values); "
    "the number of records is protected only through the noisy counts"
)


def _check_quantile(value: Any) -> str | None:
    return None if value is None or 0 <= value < 0.5 else "must be in [0, 0.5)"


#: Most Lloyd rounds (``rounds``, ``max_iter``): the epsilon of every release is listed when the step is made,
#: and 10^10 rounds ran out of memory there.
MAX_ROUNDS = 10**6

#: Most clusters and initial blocks (``n_clusters``, ``n_blocks``). No refusal may depend on the number of records
#: (private under add/remove), so more clusters than records are allowed; this cap does not depend on the data:
#: 10^9 blocks asked for 7.45 GiB for their sizes alone.
MAX_CLUSTERS = 1 << 16

#: Largest span of a column's bounds (high - low) that is scaled safely.
MAX_SPAN = 1e300


def _widen_flat(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds from the data with ``low < high`` in every column.

    ``privclust.column_bounds`` gives a constant column ``[v, v + 1]``, which
    is ``[v, v]`` once ``|v| >= 2^53`` (``v + 1`` rounds back to ``v``): the
    scaling to the unit cube would divide by zero. Such a column gets a range
    of ``|v| 2^-40`` instead, above ``v`` (below it where that overflows)."""
    flat = ~(high > low)
    if not flat.any():
        return low, high
    pad = np.maximum(1.0, np.abs(low) * 2.0**-40)
    with np.errstate(over="ignore"):
        up = low + pad
    fits = np.isfinite(up)
    return np.where(flat & ~fits, low - pad, low), np.where(flat & fits, up, high)


@attrs.frozen(kw_only=True)
class IDPKMeans:
    """IDP K-means, the DP k-means baseline of the DP-DPCL paper (a
    reconstruction: see the module docstring)."""

    name: ClassVar[str] = "idp-kmeans"
    uses_constraints: ClassVar[bool] = False
    #: the roles of the values it reports using (privclust.EFFECTIVE_PARAMS), for the report's rounding
    reported_roles: ClassVar[dict[str, str]] = {"epsilon_per_release": "privacy"}
    privacy_relation: ClassVar[privclust.Relation] = privclust.Relation.ADD_REMOVE
    #: its DP entries cover the noisy sums and counts (the centres); each record's label is a function of that
    #: record's own raw values and the DP centres (joint DP only): not a differentially private output, so they
    #: cover none of its release
    dp_output: ClassVar[tuple[str, ...]] = ()

    #: Old recipe keys and their new names (the error for an old key names the new one).
    renamed_params: ClassVar[Mapping[str, str]] = {"k": "n_clusters", "m": "n_blocks"}

    n_clusters: int = param(int, ge=1, le=MAX_CLUSTERS, doc="number of clusters (the paper's k; at most 65,536)")
    epsilon: float = param(float, role="privacy", gt=0, finite=True,
                           doc="total privacy budget of the step (all rounds together); finite")
    bounds: Any = public_bounds(default=None, dp=True,
                                doc='public bounds {column = [low, high]}; "dp" (DP quantiles within bounds_range, '
                                    'charged bounds_epsilon); or "data" (leaks each column\'s range: needs '
                                    'allow_leaks)')
    bounds_range: Any = public_bounds(default=None,
                                      doc='with bounds = "dp": the public outer range {column = [low, high]} the DP '
                                          'quantiles are searched in')
    bounds_epsilon: float | None = param(float, role="privacy", default=None, gt=0, finite=True,
                                         doc='with bounds = "dp": the epsilon of the DP bounds (charged on top of '
                                             'epsilon, split over 2 quantiles per column)')
    bounds_quantile: float = param(float, role="plain", default=0.02, check=_check_quantile,
                                   doc='with bounds = "dp": the bounds are the q and 1 - q quantiles of each column')
    n_blocks: int | None = param(int, default=None, ge=1, le=MAX_CLUSTERS,
                                 doc="number of equal attribute-sum blocks for the initial centres (the paper's m; "
                                     "default n_clusters; >= n_clusters; at most 65,536)")
    schedule: str = param(str, default="halving", choices=("halving", "uniform"),
                          doc="budget per release: 'halving' (epsilon/2^(t+1)) or 'uniform' (epsilon/(rounds+1))")
    rounds: int = param(int, default=5, ge=1, le=MAX_ROUNDS,
                        doc="number of Lloyd rounds T of the uniform schedule (at most 10^6)")
    max_iter: int = param(int, default=1000, ge=1, le=MAX_ROUNDS,
                          doc="largest number of Lloyd rounds (the paper's N_iter_max; at most 10^6)")
    tol: float = param(float, role="plain", default=1e-4, ge=0,
                       doc="stop when no centre coordinate moved more than this (unit-cube scale)")
    noise: Any = nested("noise_mechanisms", default="laplace",
                        doc="noise mechanism of the releases (L1 sensitivity, pure epsilon)")

    def __attrs_post_init__(self) -> None:
        if self.n_blocks is not None and self.n_blocks < self.n_clusters:
            raise ParameterError(f"The 'n_blocks' parameter of idp-kmeans must be >= n_clusters = {self.n_clusters} "
                                 f"(the initial blocks must provide n_clusters centres); got {self.n_blocks}.")
        _dpc_dp.check_dp_bounds_params("idp-kmeans", self.bounds, self.bounds_range, self.bounds_epsilon)
        if not self.epsilons():
            raise ParameterError(f"The 'epsilon' parameter of idp-kmeans is too small to split into releases; got "
                                 f"{self.epsilon!r}; use epsilon >= 1e-290")
        problem = _dpc_dp.nested_noise_problem(self.name, self.noise)  # gaussian and geometric cannot make its releases
        if problem:
            raise ParameterError(problem)

    # -- recipe-time checks ---------------------------------------------------------

    def planned_cost(self) -> tuple[float, float]:
        """The step may spend up to ``epsilon`` (its whole schedule), plus
        ``bounds_epsilon`` with ``bounds = "dp"``."""
        return (self.epsilon + (self.bounds_epsilon or 0.0), 0.0)

    def step_problems(self) -> list[str]:
        if self.bounds is None:
            return ["idp-kmeans needs public 'bounds' (e.g. bounds = { x = [0, 10], y = [-5, 5] }); or bounds = \"dp\" "
                    "with bounds_range (a public outer range) and bounds_epsilon (charged); or bounds = \"data\" "
                    "with [privacy] allow_leaks = [\"bounds\"], which leaks each column's range (no DP guarantee)"]
        return []

    def min_records(self, n_columns: int) -> int:
        # the number of records is private under add/remove: no floor on it but one record (a refusal of a
        # smaller data set would tell it from its neighbour); empty blocks and clusters get noisy zero sums
        return 1

    @property
    def blocks(self) -> int:
        """The number of initial blocks in effect (``n_blocks``, else ``n_clusters``)."""
        return self.n_clusters if self.n_blocks is None else self.n_blocks

    def epsilons(self) -> list[float]:
        """The epsilon of the initial release and of each possible round."""
        return _kmeans.round_epsilons(self.epsilon, self.schedule, self.rounds, self.max_iter)

    # -- fitting ----------------------------------------------------------------------

    def _unit(self, data: pd.DataFrame, context: PrivacyContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        problems = self.step_problems()
        if problems:
            raise ParameterError(problems[0])
        columns = [str(c) for c in data.columns]
        values = privclust.data_matrix(data, "idp-kmeans")
        if self.bounds == "data":
            low, high = privclust.column_bounds(
                values, columns, "data", context, who="idp-kmeans",
                statement=f"idp-kmeans took the bounds of {', '.join(columns)} from the data: their minimum and "
                          "maximum are released exactly (they fix the scaling of the released centres) and the "
                          "sensitivity M + 1 assumes bounds fixed in advance, so the epsilon stated for the centres "
                          "does not fully hold.",
                alternative="give public bounds from domain knowledge: bounds = { column = [low, high], ... }")
            low, high = _widen_flat(low, high)
        else:
            table = self.bounds_range if self.bounds == "dp" else self.bounds
            key = "bounds_range" if self.bounds == "dp" else "bounds"
            low, high = privclust.column_bounds(values, columns, table, context, who="idp-kmeans", key=key)
            if self.bounds == "dp":
                assert self.bounds_epsilon is not None
                low, high = _dpc_dp.dp_bounds(context, values, columns, low, high, self.bounds_quantile,
                                              self.bounds_epsilon, RELATION)
        with np.errstate(over="ignore", invalid="ignore"):
            span = high - low
        wide = [c for c, w in zip(columns, span, strict=True) if not w <= MAX_SPAN]
        if wide:
            raise ParameterError(f"idp-kmeans: the bounds of column(s) {', '.join(wide)} span more than {MAX_SPAN:g} "
                                 "(high - low), which overflows the scaling to the unit cube; rescale the column(s) "
                                 "and give the bounds in the new units")
        unit, clipped = _kmeans.to_unit(values, low, high)
        return unit, low, high, clipped

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        """Cluster ``data``; the centres are DP, the labels are not (see the module docstring)."""
        n, n_cols = data.shape
        if n_cols == 0:
            raise DataError("idp-kmeans needs at least one column")
        # No refusal depends on the number of records beyond the host's (no records at all): under add/remove it is
        # private, and empty blocks or clusters simply get noisy zero sums.
        epsilons = self.epsilons()
        total = _kmeans.total_epsilon(epsilons) + (self.bounds_epsilon or 0.0)
        # every release of the schedule (and the DP bounds) asked about together, under their relation, first
        context.check_spend(total, relation=RELATION, mechanism="idp-kmeans's schedule" + (
            " and DP bounds" if self.bounds_epsilon else ""), covers="the centres")
        unit, low, high, _ = self._unit(data, context)  # how many values were clipped: a raw count, not reported

        k, m, d = self.n_clusters, self.blocks, n_cols
        mech = context.mechanism(self.noise)
        l1_init, l2_init = _kmeans.init_sensitivity(d, m)
        l1_round, l2_round = _kmeans.round_sensitivity(d)
        rounds_possible = len(epsilons) - 1

        def release(labels: np.ndarray, groups: int, t: int, l1: float, l2: float, covers: str,
                    note: str) -> tuple[np.ndarray, np.ndarray]:
            sums, counts = _kmeans.cluster_sums(unit, labels, groups)
            vector = np.concatenate([sums.ravel(), counts])
            noisy = mech.release(
                vector, sensitivity=Sensitivity(l1=l1, l2=l2), epsilon=epsilons[t], context=context,
                relation=RELATION, covers=covers, not_covered=NOT_COVERED,
                details={"release": t, "schedule": self.schedule, "laplace_scale": l1 / epsilons[t],
                         "sensitivity_l1": l1, "sensitivity_l2": l2, "paper_sensitivity": d + 1,
                         "sensitivity_note": note},
            )
            return noisy[: groups * d].reshape(groups, d), noisy[groups * d:]

        # Release 0: the equal attribute-sum blocks.
        blocks = _kmeans.block_labels(unit, m)
        noisy_sums, noisy_counts = release(
            blocks, m, 0, l1_init, l2_init,
            covers=(f"the release of the coordinate sums and counts of the {m} equal attribute-sum blocks "
                    "(the initial centres)"),
            note=(f"rank-based blocks: one record shifts each of the {m - 1} block boundaries by at most one "
                  f"position, so Delta = (2m - 1) M + 1 = {at_most(l1_init)}, not the paper's M + 1 = {d + 1}"
                  if m > 1 else "a single block: Delta = M + 1"),
        )
        block_centres, _ = _kmeans.update_centres(noisy_sums, noisy_counts, None, 1.0)
        if m > k:
            chosen = _kmeans.farthest_first(block_centres, k, int(np.argmax(noisy_counts)))
            centres = block_centres[chosen]
            counts = noisy_counts[chosen]
        else:
            centres, counts = block_centres, noisy_counts
        privclust.RecordProgress(context, data.shape[0]).stage(1, rounds_possible + 1)

        stopped = "max_iter" if self.schedule == "halving" else "rounds"
        history = [float(epsilons[0])]
        rounds_run = kept = 0
        for t in range(1, rounds_possible + 1):
            labels = _kmeans.assign(unit, centres)
            noisy_sums, noisy_counts = release(
                labels, k, t, l1_round, l2_round,
                covers=f"the release of the coordinate sums and counts of the {k} clusters in Lloyd round {t}",
                note="a record sits in one cluster (fixed by centres already released): Delta = M + 1",
            )
            history.append(float(epsilons[t]))
            rounds_run = t
            scale = l1_round / epsilons[t]
            new, updated = _kmeans.update_centres(noisy_sums, noisy_counts, centres, max(1.0, scale))
            moves = np.sqrt(np.sum((new - centres) ** 2, axis=1))
            privclust.RecordProgress(context, data.shape[0]).stage(t + 1, rounds_possible + 1)
            if not updated.any():
                stopped = "no cluster update (every noisy count below the noise scale)"
                break
            if np.all(moves <= self.tol + _kmeans.noise_spread(scale, noisy_counts, d)):
                stopped = "converged (no centre moved more than tol plus twice its noise; the last update is dropped)"
                break
            centres = new
            counts = np.where(updated, noisy_counts, counts)
            kept = t

        labels = _kmeans.assign(unit, centres)
        spent = math.fsum(history)
        leaked = self.bounds == "data"
        dp_bounds = self.bounds_epsilon if self.bounds == "dp" else None
        # With DP bounds the centres are placed within them, so the bounds' epsilon is part of the centres' own.
        context.record(
            f"idp-kmeans: the released centres (and noisy counts) are {at_least(spent + (dp_bounds or 0.0))}-DP "
            f"under {RELATION}, by sequential composition of "
            + (f"the DP quantiles that set the bounds the centres lie in (epsilon = {at_least(dp_bounds)}, their own "
               "ledger entry) and " if dp_bounds else "")
            + f"{len(history)} {mech.name} releases (the initial blocks and {rounds_run} Lloyd round(s), "
            f"schedule {self.schedule!r}). Not covered: the per-record labels, each the nearest released centre to "
            "the record's own raw values."
            + (" The bounds were taken from the data, which leaks each column's range (see the leak entry)."
               if leaked else ""),
            claim=privclust.Guarantee("epsilon-DP centres (sequential composition)"),
            details={"epsilon": spent, "epsilon_per_release": history, "releases": len(history),
                     "labels_covered": False, "bounds_from_data": leaked,
                     "bounds_epsilon": dp_bounds},
        )
        centres_out = low + centres * (high - low)
        privclust.RecordProgress(context, n).finish()
        columns = [str(c) for c in data.columns]
        used_bounds = {c: [float(a), float(b)] for c, a, b in zip(columns, low, high, strict=True)}
        effective: dict[str, Any] = {"epsilon_per_release": history, "rounds_run": rounds_run}
        if self.n_blocks is None:
            effective["n_blocks"] = int(m)
        if self.bounds == "dp":  # DP quantiles: a differentially private release, public
            effective["bounds"] = used_bounds
        return Partition(
            labels=labels,
            centres=centres_out,
            columns=tuple(str(c) for c in data.columns),
            diagnostics={
                "rounds": rounds_run,
                "rounds_kept": kept,
                "stopped": stopped,
                "epsilon_spent": spent,
                "epsilon_per_release": history,
                "sensitivity_init": l1_init,
                "sensitivity_round": l1_round,
                "noisy_counts": counts,
                "centres_unit": centres,
                "n_blocks": m,
                privclust.EFFECTIVE_PARAMS: effective,
                # bounds = "data": each column's range, taken from the data (left out of a non-disclosive report)
                privclust.EFFECTIVE_PARAMS_FROM_DATA: {"bounds": used_bounds} if self.bounds == "data" else {},
            },
        )


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(IDPKMeans)
