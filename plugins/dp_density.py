"""Built-in clusterer ``dp-density``: differentially private density
clustering that chooses its own parameters (issue 11).

Given only ``epsilon``, public ``bounds`` and optionally ``n_clusters``:

1. **Noisy total count** (share ``count_share`` of epsilon, Laplace,
   sensitivity 1): ``N~`` sets the public depth limit of the tree (Qardaji,
   Yang & Li, ICDE 2013: the finest useful cell holds about ``c / epsilon``
   records, so about ``N~ epsilon / c`` cells; the tree may go one level
   finer than that grid in every column, two above two columns, and at
   least three splits per column, but never finer than the kernel of step 4
   can use, see ``_privtree.finest_splits``), the public grid the tree
   starts from (step 2), the smallest cluster mass
   ``min_cluster_fraction * N~`` and the excess test of step 4.
2. **PrivTree** (Zhang, Xiao & Xie, SIGMOD 2016) over the public bounds
   rescaled to the unit cube, binary midpoint splits along the columns in
   turn (fanout 2), run in every cell of a public uniform grid of
   ``2^k0`` cells (the nodes above depth ``k0`` are split unconditionally;
   ``k0`` is the depth of a grid with an eighth of Qardaji's ``N~ eps_leaf /
   c`` cells, no finer than the kernel's width, in up to 4 columns, see
   :data:`START_GRID_FRACTION`): a node at depth ``k`` with
   ``c`` records is split when ``max(c - (k - k0) delta, theta - delta) +
   Lap(lambda) > theta``, with
   ``lambda = (2 beta - 1) / (beta - 1) / eps_tree = 3 / eps_tree`` and
   ``delta = lambda ln beta``. Empty space stops at once, so the cost is in
   the number of leaves, not in the number of columns. The grid's cells are
   disjoint, so one record changes PrivTree's run in one cell only and the
   tree structure is ``eps_tree``-DP (share ``tree_share``) by parallel
   composition. The noise is drawn, in one release
   through the noise mechanism, as a pool of ``max_nodes`` values consumed in
   the canonical order of the nodes; when it runs out the remaining nodes are
   leaves (a public rule on the released structure).
3. **Leaf counts** with the rest of the budget (``eps_leaf``): the leaves
   partition the cube, so the count vector has L1 sensitivity 1 under
   add/remove-one-record.
4. **Post-processing of the released map only**: each leaf's density is
   the noisy mass in a box centred on the leaf, of half-width the larger of
   a public ``h`` and the leaf's own half-width in every column (a box
   kernel; each leaf's mass taken as uniform in its box), over the box's
   volume. ``h`` follows Silverman's rate in the noisy count,
   ``0.1 (4 / (d + 2))^(1 / (d + 4)) N~^(-1 / (d + 4))`` of each column's
   range (0.0147 at 1e5 records in 2 columns) and does not depend on
   epsilon, so once the leaves are finer than ``h`` a larger epsilon only
   lowers the noise. The level-set tree of these
   densities on the leaf graph is built by visiting the leaves from the
   densest down (a union-find); two components meeting at a saddle ``s``
   become two branches only when both are significant (issue 26: rules from
   ``N~``, ``b = 1 / eps_leaf`` and the map, no fixed valley):

   * **mass**: noisy mass at least ``min_cluster_fraction * N~`` (0.5%);
   * **peak**: ``f(peak) - f(s) > max(z_L sd_dp, z_N sqrt(sd_dp^2 + 2
     sd_rec(s)^2))`` with ``sd_dp = hypot(sigma_peak, sigma_s)`` the DP
     noise of the two smoothed densities, ``z_L`` from the Laplace tail and
     ``z_N`` from the normal tail, each with a Bonferroni bound over the
     leaves at half of the pass's ``false_peak``, and ``sd_rec(s)`` the
     records' own sampling noise at the saddle (Poisson counts read from the
     noisy counts floored at 0; without a peak both leaves sit at the
     saddle's density);
   * **excess**: the smoothed mass above the saddle's level, ``sum_x
     vol_x (f_x - f(s))`` over the component's leaves, at least
     ``max(EXCESS_FRACTION N~, z_L sqrt(2) b sqrt(leaves))`` (0.6%, and a
     bound on its DP noise); a user-given ``valley`` adds the old rule, the
     saddle below ``valley`` times the peak.

   Clusters: the branches of largest total excess of mass (HDBSCAN's rule,
   Campello et al. 2013), except that a node is never kept whole when its
   children are all round at its split level (``roundness`` at most
   ``ROUNDNESS_MAX = 1.2``: the mean squared distance of the upper level set
   from its centroid over a ball's of the same volume, 1 for a disc; two
   round modes are two clusters, pieces of one elongated shape are not),
   nor when it inherits a root's place (its siblings, split off a root or
   such a node, hold less than ``HEIR_SHARE = 2%`` of ``N~`` together). A
   look at the same tree's tests for blobs that meet high (the ellipse pass):
   the level-set tree again with the excess test at half its threshold, whose
   splits count only when every child is an ellipse at the split's level
   (``ELLIPSE_MAX = 1.075``: the volume of the ellipse of the same second
   moments over the level set's own, 1 for any ellipse), and the children
   together at most ``ELLIPSE_PAIR_MAX = 1.5``; two or more such
   blobs in one cluster split it, as the coarse clusters below do (a mode
   2.7 sd from a pair of Gaussians that form one elongated mode had 0.43% of
   ``N~`` above its saddle and joined the pair). Up to 4
   columns: a second look at the same map with a kernel 4 times wider (the
   leaves merged to the depth that kernel can use; the mass and peak tests,
   no excess test, and the valley rule at 0.7, or ``max(valley, 0.7)`` when
   a ``valley`` is given); a fine cluster
   that holds two or more of these coarse clusters (each with 90% of its
   noisy mass inside it) is split along them, which separates clusters
   joined by a bridge whose valley only the wider kernel makes deep enough,
   while bumps narrower than that kernel vanish in it. Leaves below
   every cluster take the cluster of the nearest cluster leaf. Given
   ``n_clusters``: when these clusters are at least that many, the two whose
   leaves touch that Ward's criterion joins first (the least increase of the
   noisy-mass-weighted sum of squares) are merged, again and again, down to
   ``n_clusters`` (issue 26: a small bump joins its neighbour before two
   large modes merge); when fewer (the map resolves fewer modes: small files,
   small epsilon, close clusters), the widest of those clusters (largest
   weighted sum of squares) are split in two, one at a time, by a weighted
   2-means of their leaves' centres (a map of one cluster: a weighted k-means
   of all the leaves), each leaf weighted by
   its noisy count above twice the noise scale. Ids are
   ranked by the clusters' noisy mass, a function of the map alone.

   **Small maps, automatic** (issue 26): when the tests above find one
   cluster, ``map_underpowered`` asks whether they could have confirmed a
   compact cluster (sd ``h``) of 10% of ``N~`` whose density falls to half
   its peak at the saddle, given the DP noise at the map's densest leaf and
   that cluster's own sampling noise. If not (below about 1,000-1,500
   records in 2 columns, 2,200-3,300 in 4, more at small epsilon), "one
   cluster" means the budget cannot see, and
   the leaves are partitioned by weighted k-means (``unimodal_bisect``):
   in two always, a uniform or one-Gaussian file included (the diagnostics
   ``rule`` says so), and further only where a split removes more of the
   spread along its axis than any one symmetric mode can (3/4, Khintchine)
   beyond its noise. A map with the power is never changed.
5. **Labels**: each record takes the cluster id of the leaf it falls in: the
   map applied to the record (joint-DP / billboard), not a DP release.

**Above** ``project_above`` **columns** (4 by default; issue 26) the map is
not grown in the full space, where a leaf touches up to ``3^d`` others: a
share ``basis_share`` (20%) of epsilon first buys a private basis (one
Laplace release of the count, the column sums and the sums of pairwise
products of the records scaled to ``[-1/2, 1/2]``, L1 sensitivity ``1 + d/2
+ d(d+1)/8`` under add/remove), the records are projected on the top 2-4
directions of its noisy covariance (where its variances drop most), and
steps 1-5 run on the projections with the rest of epsilon and the public
cube's projection as bounds; the sums and the projections are computed in
blocks of records (``_dp_basis``; up to 64 columns).

Relation: add/remove one record (unbounded DP): the released map (noisy
total, tree, noisy leaf counts and everything computed from them) is
``epsilon``-DP; under replace-one the same release is ``2 epsilon``-DP. The
exact number of records is private under add/remove: the step releases only
the noisy one (diagnostics ``privclust.NOISY_RECORDS``, which a
non-disclosive report shows in its place); wherever the exact number is
published (the per-record file), replace-one is the relation that holds.
Records outside the bounds are clipped onto them.
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
    BudgetExceededError,
    DataError,
    ParameterError,
    Partition,
    PrivacyContext,
    at_least,
    at_most,
    nested,
    param,
    public_bounds,
)

from . import _dp_basis, _dpc, _privtree

__version__ = "0.1.0"

__all__ = ["DPDensity"]

#: The neighbouring relation of every release of this component.
RELATION = privclust.Relation.ADD_REMOVE.explained("unbounded DP; under replace-one every figure doubles")
#: What the releases do not cover.
NOT_COVERED = (
    "the per-record labels: each is the cluster id of the released leaf the record falls in, a function of the "
    "record's own values and the DP map (joint-DP / billboard sense), not a differentially private output; "
    "records outside the public bounds were clipped onto them"
)
#: Noise mechanisms accepted: pure epsilon-DP for an L1 sensitivity, and with
#: noise fine enough for PrivTree's split test. PrivTree's bound is proved for
#: continuous Laplace noise; ``geometric`` (integer noise) exceeds it once the
#: noise scale is near one record: with epsilon_tree = 6 one path of the tree
#: loses 6.38 (``tests/test_dp_density.py``), so it is refused.
PURE_MECHANISMS = ("laplace",)
#: Largest number of columns the tree is grown in (the leaf adjacency grows like 3^d); above ``project_above``
#: columns the tree is grown on a private basis instead (``_dp_basis``, up to its own ``MAX_COLUMNS``).
MAX_COLUMNS = 12
#: Qardaji, Yang & Li's constant: a useful cell holds about C / epsilon records.
QARDAJI_C = 10.0
#: PrivTree starts in every cell of a public uniform grid with this fraction of Qardaji's ``N~ eps_leaf / C``
#: cells (rounded down to a power of two). PrivTree's bias ``(depth) delta`` grows with the depth from its root,
#: and from the whole cube it kept the leaves coarse at small epsilon (100,000 records at epsilon 0.1: leaves
#: below depth 12 needed more than 550 records); counted from the grid's cells it is that many levels smaller.
#: Set on the benchmark's shape sets (1, 1/2 and 1/4 were also tried); the grid costs at most that many leaves
#: of empty space.
START_GRID_FRACTION = 0.125


def _noise_refused(name: str) -> str:
    """Why dp-density refuses the noise mechanism ``name``."""
    return (f"dp-density: the 'noise' parameter must name the laplace mechanism; got {name!r}. The tree's split test "
            "is epsilon-DP (PrivTree's proof) only for continuous Laplace noise, which 'laplace' approximates on a "
            "lattice far finer than one record; 'geometric' noise lies on the integers and overshoots the budget at "
            "large epsilon, and 'gaussian' is not pure epsilon-DP. Use noise = \"laplace\" (the default).")


def _check_share(value: Any) -> str | None:
    return None if value is None or 0 < value < 1 else "must be a fraction in (0, 1)"


@attrs.frozen(kw_only=True)
class DPDensity:
    """DP density clustering on a PrivTree partition that chooses its own
    resolution, bandwidth and threshold (see the module docstring)."""

    name: ClassVar[str] = "dp-density"
    uses_constraints: ClassVar[bool] = False
    #: the roles of the values it reports using (privclust.EFFECTIVE_PARAMS), for the report's rounding
    reported_roles: ClassVar[dict[str, str]] = {
        "epsilon_count": "privacy", "epsilon_tree": "privacy", "epsilon_leaves": "privacy",
        "privtree_lambda": "noise-scale", "privtree_delta": "plain", "peak_z": "plain", "min_mass": "plain",
        "bandwidth": "plain", "coarse_bandwidth": "plain", "epsilon_basis": "privacy", "basis_dimensions": "plain"}
    privacy_relation: ClassVar[privclust.Relation] = privclust.Relation.ADD_REMOVE
    #: its DP entries cover the noisy count, the PrivTree partition and the leaf counts; each record's label is a
    #: function of that record's own raw values and the DP map (joint DP only): not a differentially private
    #: output, so they cover none of its release
    dp_output: ClassVar[tuple[str, ...]] = ()

    epsilon: float = param(float, role="privacy", gt=0, finite=True,
                           doc="total privacy budget of the step (noisy count, tree, leaf counts)")
    bounds: Any = public_bounds(default=None, doc="public bounds {column = [low, high]} (required; never the data)")
    n_clusters: int | None = param(int, default=None, ge=1,
                                   doc="number of clusters (the most significant density peaks); absent: automatic")
    count_share: float = param(float, role="plain", default=0.05, check=_check_share,
                               doc="share of epsilon for the noisy number of records")
    tree_share: float = param(float, role="plain", default=0.45, check=_check_share,
                              doc="share of epsilon for the PrivTree structure (the rest goes to the leaf counts)")
    theta: float = param(float, role="plain", default=0.0, ge=0, doc="PrivTree's split threshold theta (records)")
    false_peak: float = param(float, role="plain", default=0.05, gt=0, lt=1,
                              doc="probability that noise alone makes a density peak a cluster (Bonferroni bound)")
    min_cluster_fraction: float = param(float, role="plain", default=0.005, gt=0, lt=1,
                                        doc="smallest cluster, as a fraction of the noisy number of records")
    valley: float | None = param(float, role="plain", default=None, gt=0, le=1,
                                 doc="absent (the default): a peak splits off when the mass above the saddle "
                                     "clears the noise and EXCESS_FRACTION; given: also only where the density "
                                     "between it and the rest falls below this fraction of its peak")
    max_nodes: int = param(int, default=1 << 20, ge=16, le=1 << 24,
                           doc="largest number of tree nodes examined (a public cap on time and memory)")
    noise: Any = nested("noise_mechanisms", default="laplace",
                        doc="noise mechanism of the three releases (laplace only: PrivTree needs continuous noise)")
    project_above: int = param(int, default=_dp_basis.PROJECT_ABOVE, ge=1, le=MAX_COLUMNS,
                               doc="above this many columns, the map is built on a private basis of a few "
                                   "directions (issue 26; see _dp_basis)")
    basis_share: float = param(float, role="plain", default=_dp_basis.BASIS_SHARE, check=_check_share,
                               doc="share of epsilon for the private basis (used above 'project_above' columns)")

    def __attrs_post_init__(self) -> None:
        if self.count_share + self.tree_share >= 1:
            raise ParameterError(
                f"dp-density: count_share + tree_share must leave a share for the leaf counts (< 1); got "
                f"{self.count_share:g} + {self.tree_share:g}")
        if not all(share > 0 and math.isfinite(3.0 / share) for share in self.shares):
            raise ParameterError(
                f"dp-density: epsilon = {at_most(self.epsilon)} is too small to be shared out: its parts for the "
                "count, the tree and the leaf counts ({}, {}, {}) must each be positive with a finite noise "
                "scale; raise 'epsilon'".format(*map(at_most, self.shares)))
        if isinstance(self.bounds, str):
            raise ParameterError(
                "dp-density needs public bounds from domain knowledge, never the data: give "
                "bounds = { column = [low, high], ... } (bounds = \"data\" is not accepted)")
        named = _dpc.noise_name(self.noise)
        if named is not None and named not in PURE_MECHANISMS:  # refused when the step is made, before a run
            raise ParameterError(_noise_refused(named))

    # -- recipe-time checks -----------------------------------------------------------

    def planned_cost(self) -> tuple[float, float]:
        return (self.epsilon, 0.0)

    def step_problems(self) -> list[str]:
        if self.bounds is None:
            return ["dp-density needs public 'bounds' (e.g. bounds = { x = [0, 10], y = [-5, 5] })"]
        # The first two releases have figures known without the data (the leaf counts' number is known only as the
        # tree grows): an epsilon too small for the noise mechanism's exact sampler is refused when the recipe is
        # compiled, with the error the run would give, not when the step runs.
        check = getattr(self.noise, "release_problem", None)
        if check is None:
            return []
        eps_n, eps_tree, _ = self.shares
        problems = []
        for what, share, sensitivity, epsilon, changed in (
                ("the noisy number of records", "count_share", 1.0, eps_n, 1),
                (f"the tree's pool of max_nodes = {self.max_nodes} noise values", "tree_share", 3.0, eps_tree,
                 self.max_nodes)):
            problem = check(sensitivity=sensitivity, epsilon=epsilon, changed=changed)
            if problem:
                problems.append(_refused(what, share, epsilon, problem))
        return problems

    def min_records(self, n_columns: int) -> int:
        return 1

    @property
    def shares(self) -> tuple[float, float, float]:
        e = self.epsilon
        eps_n, eps_tree = e * self.count_share, e * self.tree_share
        return eps_n, eps_tree, e - eps_n - eps_tree

    # -- fitting ----------------------------------------------------------------------

    def _unit(self, data: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        problems = self.step_problems()
        if problems:
            raise ParameterError(problems[0])
        if not isinstance(data, pd.DataFrame):
            raise DataError(f"dp-density: the data must be a pandas DataFrame; got {type(data).__name__}")
        columns = [str(c) for c in data.columns]
        if not columns:
            raise DataError("dp-density: the data have no columns")
        if len(columns) > _dp_basis.MAX_COLUMNS:
            raise DataError(f"dp-density: {len(columns)} columns; at most {_dp_basis.MAX_COLUMNS} are supported "
                            "(the private basis releases about d^2 / 2 sums); cluster fewer columns")
        bad = [c for c in data.columns if not privclust.is_real_column(data[c])]
        if bad:
            raise DataError(f"dp-density: column(s) {', '.join(map(str, bad))} are not numeric; leave them out of "
                            "the step's columns")
        missing = [c for c in columns if c not in self.bounds]
        if missing:
            raise DataError(f"dp-density: no public bounds for column(s) {', '.join(missing)}; add them to 'bounds' "
                            f"(e.g. bounds = {{ {missing[0]} = [low, high] }})")
        values = data.to_numpy(dtype=float, na_value=np.nan)
        if not np.all(np.isfinite(values)):
            cols = [c for c, ok in zip(columns, np.isfinite(values).all(axis=0), strict=True) if not ok]
            raise DataError(f"dp-density: column(s) {', '.join(cols)} hold NaN or infinite values; impute or drop "
                            "those records first")
        low = np.array([self.bounds[c][0] for c in columns], dtype=float)
        high = np.array([self.bounds[c][1] for c in columns], dtype=float)
        span = high - low
        if not np.all(np.isfinite(span)) or not np.all(span > 0):
            raise ParameterError("dp-density: every public bound must be finite with low < high (and high - low "
                                 "finite); check 'bounds'")
        # how many values were clipped is a count of the raw data: not computed, never reported
        unit = (np.clip(values, low, high) - low) / span
        return unit, low, high

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        """Release the DP cluster map and label each record by it (joint-DP)."""
        if isinstance(data, pd.DataFrame) and data.shape[1] > self.project_above:  # issue 26: a private basis first
            return _dp_basis.fit_projected(self, data, context)
        unit, low, high = self._unit(data)
        n, d = unit.shape
        if n == 0:
            raise DataError("dp-density: the data have no records")
        if not context.can_spend(self.epsilon):
            raise BudgetExceededError(
                f"dp-density would spend epsilon = {at_least(self.epsilon)} but only {at_most(context.remaining)} of "  # type: ignore[arg-type]
                "the budget is left; lower 'epsilon' or raise the budget. Nothing was recorded and no noise was drawn.")
        mech = context.mechanism(self.noise)
        if mech.name not in PURE_MECHANISMS:
            raise ParameterError(_noise_refused(mech.name) + " Nothing was recorded and no noise was drawn.")
        eps_n, eps_tree, eps_leaf = self.shares
        columns = tuple(str(c) for c in data.columns)

        # 1. the noisy number of records
        n_noisy = float(np.asarray(_release(
            mech, "the noisy number of records", "count_share", np.array([float(n)]), sensitivity=1.0,
            epsilon=eps_n, context=context, relation=RELATION,
            covers=("the noisy number of records (it sets the tree's starting grid and depth limit and the smallest "
                    "cluster mass)"),
            not_covered=NOT_COVERED, details={"release": "count", "noise_scale": 1.0 / eps_n}), dtype=float)[0])
        n_est = max(n_noisy, 1.0)
        privclust.RecordProgress(context, data.shape[0]).stage(1, 5)

        # 2. PrivTree
        lam = 3.0 / eps_tree  # (2 beta - 1) / (beta - 1) / eps_tree with beta = 2
        delta = lam * math.log(2.0)
        cells = max(2.0, min(n_est * eps_leaf / QARDAJI_C, 1e300))  # finite even where the product overflows
        # splits per column: the Qardaji grid's, plus one (two above two columns), at least three
        per_dim = max(3, math.ceil(math.log2(cells) / d) + (1 if d <= 2 else 2))
        # no finer than the kernel can use (a bound on its cost at large epsilon)
        per_dim = min(per_dim, max(3, _privtree.finest_splits(_privtree.bandwidth(n_est, d), d)))
        max_depth = int(min(per_dim * d, 60))
        # the public grid PrivTree starts from: cells no narrower than the kernel's width 2 h (finer cells
        # would not change the density estimate, only add empty leaves: 4 columns at epsilon 1e4 made 800,000
        # leaves and 2.5 GB), at least one adaptive split per column below it, never more cells than half the
        # node pool, and only in up to 4 columns (as the coarse pass: above, each grid cell touches up to 3^d
        # others, and 12 columns at epsilon 10 took 172 s and 5.6 GB with it, 61 s without)
        grid_cells = max(1.0, cells * START_GRID_FRACTION)
        kernel_splits = max(0, math.floor(math.log2(1.0 / (2.0 * _privtree.bandwidth(n_est, d)))))
        start_depth = max(0, min(math.floor(math.log2(grid_cells)), kernel_splits * d, max_depth - d,
                                 int(math.log2(self.max_nodes)) - 1))
        if 3 ** d > _privtree.PAIRS_PER_LEAF:
            start_depth = 0
        where = (f"PrivTree run in each of the 2^{start_depth} disjoint cells of a public grid (parallel "
                 "composition)" if start_depth else "PrivTree run from the whole cube")
        pool = np.asarray(_release(
            mech, f"the tree's pool of max_nodes = {self.max_nodes} noise values", "tree_share",
            np.zeros(self.max_nodes), sensitivity=3.0, epsilon=eps_tree, context=context, relation=RELATION,
            covers=("the PrivTree partition (every examined node's split decision, made on its biased count "
                    f"max(c - (depth - {start_depth}) delta, theta - delta) plus this noise, theta = "
                    f"{self.theta:g}, delta = {delta:.6g}, {where}, with PrivTree's factor 3 = (2 beta - 1) / "
                    "(beta - 1), beta = 2, of Zhang, Xiao & Xie 2016 as its sensitivity, not a single count's)"),
            not_covered=NOT_COVERED,
            details={"release": "tree", "lambda": lam, "delta": delta, "theta": self.theta, "fanout": 2,
                     "start_depth": start_depth, "max_depth": max_depth, "max_nodes": self.max_nodes}),
            dtype=float)
        tree = _privtree.privtree(unit, pool, theta=self.theta, delta=delta, max_depth=max_depth,
                                  start_depth=start_depth)
        del pool
        privclust.RecordProgress(context, data.shape[0]).stage(2, 5)

        # 3. the leaf counts
        L = tree.lo.shape[0]
        noisy = np.asarray(_release(
            mech, f"the counts of the {tree.lo.shape[0]} leaves", "the leaves' share, 1 - count_share - tree_share",
            tree.counts, sensitivity=1.0, epsilon=eps_leaf, context=context, relation=RELATION,
            covers=f"the record counts of the {L} leaves of the released partition (disjoint cells: L1 sensitivity 1)",
            not_covered=NOT_COVERED, details={"release": "leaves", "leaves": L, "noise_scale": 1.0 / eps_leaf}),
            dtype=float)
        privclust.RecordProgress(context, data.shape[0]).stage(3, 5)

        # 4. post-processing of the map only
        cmap = cluster_map(tree.lo, tree.hi, tree.depth, noisy, n_est=n_est, eps_leaf=eps_leaf,
                           false_peak=self.false_peak, min_fraction=self.min_cluster_fraction,
                           n_clusters=self.n_clusters, valley=self.valley)
        privclust.RecordProgress(context, data.shape[0]).stage(4, 5)

        # 5. labels: the map applied to each record
        leaf = _privtree.leaf_of(unit, tree)
        labels = cmap["leaf_labels"][leaf]
        privclust.RecordProgress(context, data.shape[0]).stage(5, 5)

        span = high - low
        context.record(
            f"dp-density: the cluster map (noisy number of records, PrivTree partition of {L} leaves, their noisy "
            f"counts, and the densities, peaks, cluster ids and centres computed from them alone) is "
            f"{at_least(self.epsilon)}-DP under {RELATION}, by sequential composition of three {mech.name} releases "
            f"(epsilon {at_least(eps_n, 4)} + {at_least(eps_tree, 4)} + {at_least(eps_leaf, 4)}). Each record's label "
            "is the cluster id of "
            "the leaf it falls in: a function of that record and the DP map, covered only in the joint-DP "
            "(billboard) sense, not as a DP release. Under add/remove the exact number of records is itself "
            "private: this step releases it only as the noisy count above; wherever the exact number is published "
            "(the per-record file has one row per record), the map holds as "
            f"{at_least(2 * self.epsilon)}-DP under replace-one (n public), not as {at_least(self.epsilon)}-DP under "
            "add/remove.",
            claim=privclust.Guarantee("epsilon-DP cluster map (joint-DP labels)"),
            details={"epsilon": self.epsilon, "epsilon_count": eps_n, "epsilon_tree": eps_tree,
                     "epsilon_leaves": eps_leaf, "leaves": L, "labels_covered": "joint-DP only"})
        centres = low + cmap["centres_unit"] * span
        diagnostics: dict[str, Any] = {
            "n_noisy": n_noisy,
            "leaves": L,
            "nodes_examined": tree.nodes,
            "tree_truncated": tree.truncated,
            "start_depth": start_depth,
            "max_depth": max_depth,
            "depth_range": [int(tree.depth.min()), int(tree.depth.max())],
            "lambda": lam,
            "delta": delta,
            "theta": self.theta,
            "epsilon_count": eps_n,
            "epsilon_tree": eps_tree,
            "epsilon_leaves": eps_leaf,
            "leaf_low": low + tree.lo * span,
            "leaf_high": low + tree.hi * span,
            "leaf_noisy_counts": noisy,
            "leaf_density": cmap["density"] / float(np.prod(span)),  # records per unit volume, data units
            "leaf_labels": cmap["leaf_labels"],
            "z": cmap["z"],
            "min_mass": cmap["min_mass"],
            "valley": cmap["valley"],
            "bandwidth": cmap["bandwidth"],
            "bandwidth_units": cmap["bandwidth"] * span,
            "coarse_bandwidth": cmap["coarse_bandwidth"],
            "refined_clusters": cmap["refined"],
            "rule": cmap["rule"],
            # automatic, one cluster from the tests: the dip the power test's reference cluster shows and the one
            # the peak test could confirm, in records of a kernel box (map_underpowered); None otherwise
            "mode_test_power": cmap["power"],
            "cluster_stability": cmap["stability"],
            "core_leaves": cmap["core"],
            "automatic": self.n_clusters is None,
        }
        # the settings in use that the step derived (from its parameters and the DP releases only)
        effective: dict[str, Any] = {
            "epsilon_count": eps_n, "epsilon_tree": eps_tree, "epsilon_leaves": eps_leaf,
            "privtree_lambda": lam, "privtree_delta": delta, "start_depth": start_depth, "max_depth": max_depth,
            "leaves": L,
            "peak_z": cmap["z"], "min_mass": cmap["min_mass"], "bandwidth": cmap["bandwidth"],
            "coarse_bandwidth": cmap["coarse_bandwidth"],
        }
        if self.n_clusters is None or int(np.asarray(centres).shape[0]) != self.n_clusters:
            # automatic, or fewer leaves or branches in the map than the n_clusters asked for
            effective["n_clusters"] = int(np.asarray(centres).shape[0])
        diagnostics[privclust.EFFECTIVE_PARAMS] = effective
        # the DP count released in step 1: what a non-disclosive report shows in place of the exact number of
        # records, which is private under add/remove (docs/decisions.md, decision 24)
        diagnostics[privclust.NOISY_RECORDS] = {"value": n_noisy, "epsilon": eps_n}
        return Partition(labels=labels, centres=centres, columns=columns, diagnostics=diagnostics)


def _release(mech: Any, what: str, share: str, values: np.ndarray, **kwargs: Any) -> np.ndarray:
    """One release through ``mech``; a release the mechanism refuses (an
    epsilon too small for its exact sampler) is reported as this step's error,
    naming the parameters that fix it. Releases made before it stay in the
    ledger: their noise was drawn."""
    try:
        return mech.release(values, **kwargs)
    except ParameterError as err:
        raise ParameterError(
            _refused(what, share, kwargs["epsilon"], str(err)) + " The releases made before this one are in the "
            "ledger (their noise was drawn); nothing else was.") from err


def _refused(what: str, share: str, epsilon: float, problem: str) -> str:
    """Why a release cannot be made, and the parameters that fix it."""
    return (f"dp-density: {what} cannot be released with epsilon = {at_most(epsilon)} (the step's epsilon times "
            f"{share}): {problem} Raise 'epsilon' or that share, or lower 'max_nodes'.")


#: The coarse pass of the automatic clusters: the same released map seen with a
#: kernel this many times wider (a public constant, set on the benchmark's
#: shape sets like the others) ...
COARSE_FACTOR = 4.0
#: ... whose valley rule may be this shallow: the wider kernel has smoothed
#: away bumps narrower than itself, so a valley that survives it is wide.
COARSE_VALLEY = 0.7
#: (Issue 26 first read a valley left unset as 1, no ratio rule, in this pass too: with neither the excess test nor
#: a valley, it split two of the spiral's arms at epsilon 2, seed 2, ARI 0.752; with 0.7, 1.000.)
#: A coarse cluster lies inside a fine one when this share of its noisy mass does.
INSIDE_SHARE = 0.9


#: The smallest smoothed mass above the saddle that lets a branch split off, as a fraction of ``N~`` (the
#: excess test of :func:`_excess_rule`; set on the benchmark's shape sets at epsilon 1: 0.3% split flame and jain
#: along the bumps of their jitter, 1% merged d31's clusters and lost a 1:100 cluster; 0.6% kept all three).
EXCESS_FRACTION = 0.006
#: Children of a split are taken in place of their parent when every one of them is this round at the split's
#: level, or rounder (:func:`privclust_plugins._privtree.roundness`: 1 for a disc; the mixtures' components
#: measured 1.01 to 1.05, the pieces of flame, jain and pathbased 1.13 to 4.5).
ROUNDNESS_MAX = 1.2
#: Small groups split off a shape (together below this share of ``N~``, the smallest cluster of the fixed rules
#: before issue 26) leave the rest of the shape a root (:func:`privclust_plugins._privtree.heirs`): flame's
#: outlier group (0.9%) made flame's two classes one node that excess of mass kept whole (ARI 0.01 at epsilon 0.5).
HEIR_SHARE = 0.02
#: The ellipse pass (:func:`_ellipse_clusters`) reads the first pass's map and tests with the excess test at this
#: share of its threshold (0.3% of ``N~``) ...
ELLIPSE_EXCESS = 0.5
#: ... and keeps a split only when every child is this close to an ellipse at the split's level, or closer
#: (:func:`privclust_plugins._privtree.ellipticity`: 1 for an ellipse, 1.047 for a rectangle) ...
ELLIPSE_MAX = 1.075
#: ... and the two together too, up to this (two blobs meeting high make a peanut, a shape's pieces an arc). Both
#: set on the benchmark's mixture family, its shape sets and the jittered crescents of
#: ``test_jitter_around_scattered_points_does_not_split_a_shape``, where the margins are thin: a pair of Gaussians
#: 2.2 sd apart (one elongated mode) read 1.02-1.065 and its split with a third 1.24-1.46 together; the crescents'
#: pieces 1.03-1.10, and 1.30-2.57 together (one at 1.30 with both pieces under 1.04, at epsilon 4).
ELLIPSE_PAIR_MAX = 1.5


def _ellipse_clusters(f: np.ndarray, sigma: np.ndarray, noisy: np.ndarray, pairs: tuple[np.ndarray, np.ndarray],
                      lo: np.ndarray, hi: np.ndarray, *, z: float, min_mass: float, valley: float,
                      rules: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Blobs that meet high (post-processing of the map only): the level-set tree of the first pass's densities
    with the same tests but the excess test at :data:`ELLIPSE_EXCESS` of its threshold; a split of that tree
    counts only when every child is an ellipse at the split's level (ellipticity at most :data:`ELLIPSE_MAX`,
    and :data:`ELLIPSE_PAIR_MAX` for the children together), and its children are the clusters of this pass.
    Returns each leaf's cluster (-1: none) and their stabilities. A Gaussian component whose saddle with a
    neighbour is high holds little mass above it (0.43% of ``N~`` for a mode 2.7 sd from a pair of components
    that form one elongated mode): below the first pass's excess test, and kept whole by excess of mass; but
    it and its neighbour are ellipses there, where the pieces a shape's jitter splits off (flame, jain) mostly
    are not. Its peak tests are the first pass's, at the same ``z``, on the same densities; only the excess
    asked of a split is smaller."""
    relaxed = dict(rules, min_excess=ELLIPSE_EXCESS * rules["min_excess"])
    level = _privtree.level_set_tree(f, sigma, noisy, pairs, z=z, min_mass=min_mass, valley=valley, **relaxed)
    blob = _privtree.round_splits(level, f, lo, hi, ELLIPSE_MAX, shape=_privtree.ellipticity, whole=ELLIPSE_PAIR_MAX)
    child = level.alive & (level.parent >= 0)
    chosen = np.flatnonzero(child & blob[np.maximum(level.parent, 0)] & ~blob)
    return _branch_of_leaf(level, chosen), level.stability[chosen]


def _excess_rule(lo: np.ndarray, hi: np.ndarray, n_est: float, b: float) -> dict[str, Any]:
    """The keyword arguments of :func:`privclust_plugins._privtree.level_set_tree` for the excess test: a branch
    is significant only when its smoothed mass above the saddle's level is at least ``EXCESS_FRACTION N~`` and
    ``z`` times a bound on that figure's noise, ``sqrt(2) b`` per leaf of the branch (public: the released map)."""
    return {"volume": np.prod(hi - lo, axis=1), "min_excess": EXCESS_FRACTION * n_est,
            "excess_noise": math.sqrt(2.0) * b}


def _map_levels(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, noisy: np.ndarray, b: float, h: float, *,
                false_peak: float, min_mass: float, valley: float, excess: dict[str, Any] | None = None,
                merged: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float, tuple, Any, dict]:
    """The kernel densities at half-width ``h``, the peak threshold ``z``, the
    leaf graph and the level-set tree of one partition."""
    tree = _privtree.Tree(lo=lo, hi=hi, depth=depth, counts=noisy, nodes=0, truncated=False)
    pairs = _privtree.adjacency(tree)
    f, sigma, sampling = _privtree.box_density(lo, hi, depth, noisy, b, h, merged=merged, sampling=True)
    # the two noises share false_peak: half to the DP noise (Laplace tail), half to the records' sampling noise
    z = _privtree.false_peak_z(noisy.size, false_peak / 2.0)
    rules = dict(excess or {}, sampling=sampling, z_sampling=_privtree.gaussian_z(noisy.size, false_peak / 2.0))
    level = _privtree.level_set_tree(f, sigma, noisy, pairs, z=z, min_mass=min_mass, valley=valley, **rules)
    return f, sigma, z, pairs, level, rules


def _branch_of_leaf(level: Any, chosen: np.ndarray) -> np.ndarray:
    """For every leaf, the position in ``chosen`` of the chosen node above it (-1: none)."""
    ident = np.full(level.parent.size, -1, dtype=np.int64)
    ident[chosen] = np.arange(chosen.size)
    owner = ident.copy()  # the chosen ancestor-or-self of every live node (parents first)
    for c in level.order[::-1]:
        p = int(level.parent[c])
        if owner[c] < 0 and p >= 0:
            owner[c] = owner[p]
    return owner[level.leaf_node]


def _nearest_fill(labels: np.ndarray, todo: np.ndarray, centres: np.ndarray) -> None:
    """Leaves in ``todo`` take the label of the nearest leaf outside it (in place)."""
    have = ~todo
    if todo.any() and have.any():
        _, near = cKDTree(centres[have]).query(centres[todo])
        labels[todo] = labels[have][near]


def _refine(fine: np.ndarray, coarse: np.ndarray, w: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, list]:
    """Split a fine cluster along the coarse clusters that lie inside it.

    A coarse cluster lies inside fine cluster ``k`` when at least
    :data:`INSIDE_SHARE` of its noisy mass is on ``k``'s leaves; when two or
    more do, ``k`` becomes one cluster per such coarse cluster (its leaves
    outside them take the nearest of those). A coarse cluster that spans
    several fine ones changes nothing: the fine pass, with its narrower
    kernel, has already separated them. Returns the labels and, per new
    label, the coarse cluster it came from (-1: unchanged)."""
    K = int(fine.max()) + 1
    origin = [-1] * K
    if coarse.max() < 0:
        return fine, origin
    C = int(coarse.max()) + 1
    on = coarse >= 0
    mass = np.zeros((K, C))
    np.add.at(mass, (fine[on], coarse[on]), w[on])
    inside = (mass >= INSIDE_SHARE * mass.sum(axis=0)) & (mass > 0)
    out = fine.copy()
    for k in range(K):
        parts = np.flatnonzero(inside[k])
        if parts.size < 2:
            continue
        mine = fine == k
        origin[k] = int(parts[0])
        for c in parts[1:]:
            out[mine & (coarse == c)] = len(origin)
            origin.append(int(c))
        rest = mine & ~np.isin(coarse, parts)
        sub = np.flatnonzero(mine)
        labels = out[sub]
        _nearest_fill(labels, rest[sub], centres[sub])
        out[sub] = labels
    return out, origin


def _labels_of(level: Any, n_clusters: int | None, centres: np.ndarray,
               split: np.ndarray | None = None) -> tuple[np.ndarray, list, np.ndarray]:
    """The clusters chosen in a level-set tree as leaf labels (leaves below
    every cluster take the nearest cluster leaf), their stabilities, and which
    leaves lie in a chosen branch (``split``: the nodes never chosen whole,
    :func:`privclust_plugins._privtree.select_clusters`)."""
    chosen = _privtree.select_clusters(level, n_clusters, split)
    labels = _branch_of_leaf(level, chosen)
    core = labels >= 0
    if not core.any():
        labels[:] = 0
        chosen = np.array([int(np.argmax(level.mass))])
    _nearest_fill(labels, ~core, centres)
    return labels, list(level.stability[chosen]), core


def _merge_to(labels: np.ndarray, stability: list, f: np.ndarray, pairs: tuple[np.ndarray, np.ndarray],
              k: int, centres: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, list]:
    """Merge clusters until there are ``k``: each time the two clusters
    whose leaves touch (in the leaf graph ``pairs``, at a saddle above 0)
    that Ward's criterion joins first, the least increase of the weighted
    sum of squares ``m_x m_y / (m_x + m_y) |mu_x - mu_y|^2`` (``m``: the
    leaves' noisy mass ``w``, ``mu``: their ``w``-weighted mean centre).
    A small bump joins the neighbour it touches before two large modes
    are merged, however deep its valley (issue 26: wine drawn up with
    jitter to 100,000 records had 5 to 9 automatic clusters, groups of
    bumps of 2% to 27% of the records; merging the two of highest saddle
    over the lower peak, the rule before, kept the deep-valley bumps and
    merged two classes: ARI 0.19 told k = 3, 0.79 with this rule). Only
    touching clusters merge, so a shape is not joined across empty space to
    a cluster it does not meet. The saddle of two clusters is the highest
    density at which their leaves touch; a merged cluster's is the higher
    of its parts'. Stabilities add."""
    K = int(labels.max()) + 1
    i, j = pairs
    a, b = labels[i], labels[j]
    cross = a != b
    saddle = np.full((K, K), -np.inf)
    np.maximum.at(saddle, (a[cross], b[cross]), np.minimum(f[i[cross]], f[j[cross]]))
    saddle = np.maximum(saddle, saddle.T)
    touch = saddle > 0
    mass = np.bincount(labels, weights=w, minlength=K)
    sums = np.zeros((K, centres.shape[1]))
    np.add.at(sums, labels, centres * w[:, None])
    alive = np.ones(K, dtype=bool)
    target = np.arange(K)
    stability = list(stability)
    for _ in range(K - k):
        mu = sums / np.maximum(mass, 1e-300)[:, None]
        gap = ((mu[:, None, :] - mu[None, :, :]) ** 2).sum(axis=2)
        cost = np.outer(mass, mass) / np.maximum(np.add.outer(mass, mass), 1e-300) * gap
        cost = np.where(touch & np.outer(alive, alive), cost, np.inf)
        np.fill_diagonal(cost, np.inf)
        x, y = np.unravel_index(int(np.argmin(cost)), cost.shape)
        if not np.isfinite(cost[x, y]):  # no two clusters touch (a map of one leaf): the two least stable
            live = np.flatnonzero(alive)
            x, y = live[np.argsort([stability[c] for c in live], kind="stable")[:2]]
        x, y = min(x, y), max(x, y)
        touch[x] = touch[:, x] = touch[x] | touch[y]
        touch[x, x] = False
        mass[x] += mass[y]
        sums[x] += sums[y]
        stability[x] += stability[y]
        alive[y] = False
        target[target == y] = x
    keep = np.flatnonzero(alive)
    new_id = np.full(K, -1, dtype=np.int64)
    new_id[keep] = np.arange(keep.size)
    return new_id[target[labels]], [stability[c] for c in keep]


#: Leaf masses below this many noise scales are taken as 0 by the k-means fallback of ``n_clusters``.
KMEANS_NOISE_FLOOR = 2.0
#: Lloyd iterations of :func:`weighted_kmeans` (it stops earlier once no leaf changes cluster).
KMEANS_ITERATIONS = 100
#: Starts of :func:`weighted_kmeans` (the one of least weighted sum of squares is kept) ...
KMEANS_RESTARTS = 10
#: ... drawn from a generator with this fixed, public seed: the clusters are a function of the map alone.
KMEANS_SEED = 0


def weighted_kmeans(centres: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """``k`` clusters of the leaves by k-means on their centres, each leaf
    weighted by its noisy mass (post-processing of the DP map only, like
    diffprivlib's KMeans on noisy sums, but on the map already paid for):
    :data:`KMEANS_RESTARTS` runs of Lloyd's iterations, each started by
    weighted k-means++ seeding (a leaf drawn with probability proportional
    to its mass times its squared distance to the seeds so far) from a
    fixed public generator, so the result is a function of the map alone;
    the run of least weighted sum of squares is kept (a single greedy start
    took a far leaf whose noise passed the floor as a cluster of its own:
    1e5 records, 3 clusters 2.5 sd apart, clusters of 99,990, 6 and 4).
    Labels are compact (a cluster no leaf joined is dropped)."""
    L = centres.shape[0]
    k = max(1, min(int(k), L))
    m = np.maximum(w, 0.0)
    if not m.any():
        m = np.ones(L)
    rng = np.random.default_rng(KMEANS_SEED)
    best, best_sse = np.zeros(L, dtype=np.int64), np.inf
    for _ in range(KMEANS_RESTARTS):
        seeds = [int(rng.choice(L, p=m / m.sum()))]
        gap = ((centres - centres[seeds[0]]) ** 2).sum(axis=1)
        for _ in range(1, k):
            score = m * gap
            if not score.any():
                break
            seeds.append(int(rng.choice(L, p=score / score.sum())))
            gap = np.minimum(gap, ((centres - centres[seeds[-1]]) ** 2).sum(axis=1))
        means = centres[seeds].copy()
        labels = np.full(L, -1, dtype=np.int64)
        for _ in range(KMEANS_ITERATIONS):
            new = cKDTree(means).query(centres)[1].astype(np.int64)
            if np.array_equal(new, labels):
                break
            labels = new
            mass = np.bincount(labels, weights=m, minlength=means.shape[0])
            sums = np.zeros_like(means)
            np.add.at(sums, labels, centres * m[:, None])
            filled = mass > 0
            means[filled] = sums[filled] / mass[filled, None]
        sse = float((m * ((centres - means[labels]) ** 2).sum(axis=1)).sum())
        if sse < best_sse:
            best, best_sse = labels, sse
    return np.unique(best, return_inverse=True)[1].reshape(-1).astype(np.int64)


def split_to(labels: np.ndarray, centres: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """Split clusters of the leaves until there are ``k`` (bisecting
    k-means from the density clusters): each time the cluster of largest
    weighted sum of squares about its mean is split in two by
    :func:`weighted_kmeans`. The modes the map resolves stay whole unless
    they are the widest; a map of one mode is partitioned by a k-means of
    all its leaves.
    Stops early when no cluster has two leaves of positive mass to split."""
    if labels.max() < 1:  # one mode: no structure of the map to keep, a k-means of all the leaves
        return weighted_kmeans(centres, w, k)
    labels = labels.copy()
    while int(labels.max()) + 1 < k:
        K = int(labels.max()) + 1
        mass = np.bincount(labels, weights=w, minlength=K)
        sums = np.zeros((K, centres.shape[1]))
        np.add.at(sums, labels, centres * w[:, None])
        means = sums / np.maximum(mass, 1e-300)[:, None]
        spread = np.bincount(labels, weights=w * ((centres - means[labels]) ** 2).sum(axis=1), minlength=K)
        heavy = np.bincount(labels, weights=(w > 0).astype(float), minlength=K) >= 2
        if not heavy.any():
            break
        c = int(np.argmax(np.where(heavy, spread, -1.0)))
        mine = np.flatnonzero(labels == c)
        halves = weighted_kmeans(centres[mine], w[mine], 2)
        if halves.max() < 1:
            break
        labels[mine[halves == 1]] = K
    return labels


#: The reference cluster of the power test of the automatic mode (:func:`map_underpowered`): a compact cluster
#: holding this share of ``N~`` ...
POWER_CLUSTER_SHARE = 0.1
#: ... whose density falls to this fraction of its peak at the saddle with its neighbour (a valley to half the
#: peak; the fixed valley rule before issue 26 asked for 0.4).
POWER_SADDLE = 0.5
#: One-mode bound of the k-means fallback (:func:`unimodal_bisect`): on a line, the split at its centre of any
#: symmetric one-mode spread removes at most 3/4 of its sum of squares about the mean (the uniform; a Gaussian 2/pi =
#: 0.64), by Khintchine's theorem (such a spread is U Z, U uniform, and (E|UZ|)^2 / E (UZ)^2 = 3/4 (E|Z|)^2 / EZ^2);
#: for a log-concave one (uniform, Gaussian) that split is the best 2-means split (Kieffer 1983: it is unique).
UNIMODAL_SHARE = 0.75
#: The standard deviation of that share for ``n`` records of a uniform spread is ``sqrt(0.075 / n)`` (the delta
#: method on ``(mean |x|)^2 / mean x^2``: variance (9/12 + 2.25^2 4/45 - 2 3 2.25 / 12) / n).
UNIMODAL_SHARE_VAR = 0.075
#: The level of that test (one-sided, Bonferroni over the columns: the split's direction is chosen).
UNIMODAL_LEVEL = 0.05


def map_underpowered(lo: np.ndarray, hi: np.ndarray, f: np.ndarray, sigma: np.ndarray, *, n_est: float, h: float,
                     z: float, z_sampling: float) -> tuple[bool, dict[str, float]]:
    """Whether the released map is too small for its mode tests to confirm a
    cluster (post-processing: ``N~``, the map's DP noise and ``h`` only).

    The reference: a compact cluster of :data:`POWER_CLUSTER_SHARE` ``N~``
    records with a standard deviation ``h`` in every column (the finest the
    kernel resolves), whose central kernel box holds ``c = share N~
    erf(1/sqrt 2)^d`` of them (68% per column), and whose density falls to
    :data:`POWER_SADDLE` of its peak at the saddle. The peak test of
    :func:`privclust_plugins._privtree.level_set_tree` confirms it only when
    ``(1 - POWER_SADDLE) c`` exceeds both ``z sqrt(2) sd`` (the DP noise of
    the smoothed count, ``sd`` as at the map's densest leaf) and ``z_N
    sqrt(2 sd^2 + 2 POWER_SADDLE c)`` (with the records' own Poisson noise at
    the saddle). When it would not, a single cluster from the tests says
    "the budget cannot see", not "one mode". Returns the verdict and the
    figures, in records of a kernel box."""
    d = lo.shape[1]
    p = int(np.argmax(f))
    centre, half = 0.5 * (lo[p] + hi[p]), np.maximum(h, 0.5 * (hi[p] - lo[p]))
    qvol = float(np.prod(np.clip(centre + half, 0.0, 1.0) - np.clip(centre - half, 0.0, 1.0)))
    sd = float(sigma[p]) * qvol
    c = POWER_CLUSTER_SHARE * n_est * math.erf(1.0 / math.sqrt(2.0)) ** d
    need = max(z * math.sqrt(2.0) * sd, z_sampling * math.sqrt(2.0 * sd * sd + 2.0 * POWER_SADDLE * c))
    shown = (1.0 - POWER_SADDLE) * c
    return bool(shown <= need), {"reference_dip": shown, "confirmable_dip": need}


def _split_share(centres: np.ndarray, w: np.ndarray, halves: np.ndarray) -> float:
    """The share of the weighted sum of squares along the line through the two halves' means that the split
    into ``halves`` removes (1: two points; at most 3/4 for one symmetric mode, :data:`UNIMODAL_SHARE`)."""
    means = np.array([np.average(centres[halves == j], axis=0, weights=w[halves == j]) for j in (0, 1)])
    axis = means[1] - means[0]
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        return 0.0
    p = (centres - np.average(centres, axis=0, weights=w)) @ (axis / norm)
    total = float(np.sum(w * p * p))
    within = sum(float(np.sum(w[halves == j] * (p[halves == j] - np.average(p[halves == j], weights=w[halves == j]))
                              ** 2)) for j in (0, 1))
    return 1.0 - within / total if total > 0 else 0.0


def unimodal_bisect(centres: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The k-means partition of an underpowered map of one cluster (post-processing: the leaves' centres and
    noisy weights only). The map is first split in two by :func:`weighted_kmeans` (the tests could not see, so
    two is the answer, stated, even on one mode); then, again and again, the cluster of largest weighted sum of
    squares whose best 2-split removes more of its spread along the split's axis than any one symmetric mode can
    (:data:`UNIMODAL_SHARE`, plus ``z sqrt(UNIMODAL_SHARE_VAR / n_eff)``, ``n_eff = (sum w)^2 / sum w^2`` its
    leaves' effective number, ``z`` at :data:`UNIMODAL_LEVEL` over the columns) is split. Clusters with fewer than
    two leaves of positive weight are not split."""
    labels = weighted_kmeans(centres, w, 2) if np.count_nonzero(w > 0) >= 2 else np.zeros(w.size, dtype=np.int64)
    z = _privtree.gaussian_z(centres.shape[1], UNIMODAL_LEVEL)
    while labels.max() >= 1:
        K = int(labels.max()) + 1
        spread = []
        for c in range(K):
            mine = np.flatnonzero((labels == c) & (w > 0))
            if mine.size < 3:  # two leaves always split "perfectly": no evidence
                continue
            mean = np.average(centres[mine], axis=0, weights=w[mine])
            spread.append((float(np.sum(w[mine] * ((centres[mine] - mean) ** 2).sum(axis=1))), c))
        for _, c in sorted(spread, reverse=True):
            mine = np.flatnonzero(labels == c)
            halves = weighted_kmeans(centres[mine], w[mine], 2)
            pos = w[mine] > 0
            if halves.max() < 1 or np.unique(halves[pos]).size < 2:
                continue
            wm = w[mine][pos]
            n_eff = float(wm.sum() ** 2 / np.sum(wm * wm))
            share = _split_share(centres[mine][pos], wm, halves[pos])
            if share > UNIMODAL_SHARE + z * math.sqrt(UNIMODAL_SHARE_VAR / n_eff):
                labels[mine[halves == 1]] = K
                break
        else:
            break
    return labels


def cluster_map(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, noisy: np.ndarray, *, n_est: float,
                eps_leaf: float, false_peak: float, min_fraction: float, n_clusters: int | None,
                valley: float | None = None) -> dict[str, Any]:
    """Clusters of the released leaves (post-processing of the DP map only):
    smoothed densities, significant peaks, a cluster id for every leaf, and
    the centres (noisy-mass-weighted leaf centres) in unit coordinates.

    The automatic clusters: the level-set tree at half-width ``h``, then (up
    to 4 columns) a second look at :data:`COARSE_FACTOR` ``h`` on the same
    map (its leaves merged to the depth that kernel can use,
    :func:`_privtree.coarsen`), whose clusters split a fine cluster they lie
    inside (:func:`_refine`). With ``n_clusters``: when the automatic
    clusters are at least that many, they are merged down to it by Ward's
    criterion among touching clusters (:func:`_merge_to`); when fewer, the
    widest is split by weighted 2-means until there are that many
    (:func:`split_to`). Automatic, when the tests find one cluster on a map
    too small to test modes (:func:`map_underpowered`): a weighted k-means of
    the leaves (:func:`unimodal_bisect`)."""
    b = 1.0 / eps_leaf
    d = lo.shape[1]
    h = _privtree.bandwidth(n_est, d)
    min_mass = min_fraction * n_est
    # the coarse pass in up to 4 columns, where its leaf graph (3^d neighbours a leaf) stays within the kernel's
    # pair budget; in more it costs as much as the first pass (12 columns: 57 s -> 127 s) and changed nothing
    two_passes = 3 ** d <= _privtree.PAIRS_PER_LEAF
    # each pass gets half of false_peak, so that noise alone makes a cluster with probability at most false_peak
    # (the n_clusters rules below reuse the first pass's densities and z: the same tests, no new ones)
    fp = false_peak / 2.0 if two_passes else false_peak
    excess = _excess_rule(lo, hi, n_est, b)
    given_valley = valley is not None
    valley = 1.0 if valley is None else valley  # 1: no ratio rule, the excess test alone
    f, sigma, z, pairs, level, rules = _map_levels(lo, hi, depth, noisy, b, h, false_peak=fp, min_mass=min_mass,
                                                   valley=valley, excess=excess)
    centres_leaf = 0.5 * (lo + hi)
    w = np.maximum(noisy, 0.0)
    split = _privtree.round_splits(level, f, lo, hi, ROUNDNESS_MAX) | _privtree.heirs(level, HEIR_SHARE * n_est)
    leaf_labels, stability, core = _labels_of(level, None, centres_leaf, split)
    hc = COARSE_FACTOR * h
    # the ellipse pass: blobs that meet high, whose excess above the saddle the first pass's test misses
    blobs, blob_stability = _ellipse_clusters(f, sigma, noisy, pairs, lo, hi, z=z, min_mass=min_mass, valley=valley,
                                              rules=rules)
    leaf_labels, origin = _refine(leaf_labels, blobs, w, centres_leaf)
    refined = len(origin) - len(stability)
    stability += [float(blob_stability[c]) for c in origin[len(stability):]]
    if two_passes:
        cut = _privtree.finest_splits(hc, d) * d
        clo, chi, cdepth, group, merged = _privtree.coarsen(lo, hi, depth, cut)
        cnoisy = np.bincount(group, weights=noisy, minlength=clo.shape[0])
        *_, clevel, _ = _map_levels(clo, chi, cdepth, cnoisy, b, hc, false_peak=fp, min_mass=min_mass,
                                 valley=max(valley, COARSE_VALLEY) if given_valley else COARSE_VALLEY, merged=merged)
        cchosen = _privtree.select_clusters(clevel, None, _privtree.heirs(clevel, HEIR_SHARE * n_est))
        leaf_labels, origin = _refine(leaf_labels, _branch_of_leaf(clevel, cchosen)[group], w, centres_leaf)
        refined += len(origin) - len(stability)
        stability += [float(clevel.stability[cchosen[c]]) for c in origin[len(stability):]]
    rule = "automatic"
    power = None
    if n_clusters is None and leaf_labels.max() < 1:  # one cluster: a mode test's answer, or a map too small to see?
        weak, power = map_underpowered(lo, hi, f, sigma, n_est=n_est, h=h, z=z, z_sampling=rules["z_sampling"])
        if weak:
            leaf_labels = unimodal_bisect(centres_leaf, np.maximum(noisy - KMEANS_NOISE_FLOOR * b, 0.0))
            K = int(leaf_labels.max()) + 1
            stability, refined = [0.0] * K, 0
            rule = (f"the map is too small to test modes: weighted k-means of its leaves, k = {K} (2 even on one "
                    "mode; more only where a split exceeds any one-mode spread)" if K > 1 else
                    "automatic: one cluster (the map is too small to test modes, and has fewer than two leaves above "
                    "the noise floor to split)")
    if n_clusters is not None and leaf_labels.max() + 1 >= n_clusters:
        leaf_labels, stability = _merge_to(leaf_labels, stability, f, pairs, n_clusters, centres_leaf, w)
        rule = "automatic clusters merged to n_clusters"
    elif n_clusters is not None:  # the map resolves fewer modes than asked for: split the widest (issue 26)
        # a leaf's mass above twice the noise scale: the noise of the many near-empty leaves (E max(Lap, 0) = b / 2
        # each) would otherwise pull the means toward the middle of the box
        one_mode = bool(leaf_labels.max() < 1)
        rule = ("weighted k-means of the leaves (one density mode, fewer than n_clusters)" if one_mode
                else "density clusters split by weighted 2-means (fewer density modes than n_clusters)")
        leaf_labels = split_to(leaf_labels, centres_leaf, np.maximum(noisy - KMEANS_NOISE_FLOOR * b, 0.0), n_clusters)
        K = int(leaf_labels.max()) + 1
        stability = [0.0] * K if one_mode else list(stability) + [0.0] * (K - len(stability))
        refined = 0
    # cluster ids: by decreasing noisy mass, ties by the peak leaf (a function of the map alone)
    K = int(leaf_labels.max()) + 1
    mass = np.bincount(leaf_labels, weights=w, minlength=K)
    by_density = np.lexsort((np.arange(f.size), -f, leaf_labels))  # each cluster's densest leaf first
    peaks = by_density[np.searchsorted(leaf_labels[by_density], np.arange(K))]
    rank = np.lexsort((peaks, -mass))
    ident = np.empty(K, dtype=np.int64)
    ident[rank] = np.arange(K)
    leaf_labels = ident[leaf_labels]
    peaks, mass, stability = peaks[rank], mass[rank], np.asarray(stability)[rank]  # type: ignore[assignment]
    sums = np.zeros((K, d))
    np.add.at(sums, leaf_labels, centres_leaf * w[:, None])
    centres = np.where(mass[:, None] > 0, sums / np.maximum(mass, 1e-300)[:, None], centres_leaf[peaks])
    return {"leaf_labels": leaf_labels, "density": f, "sigma": sigma, "z": z, "min_mass": min_mass, "bandwidth": h,
            "coarse_bandwidth": hc if two_passes else None, "refined": refined, "rule": rule,
            "centres_unit": centres, "core": core, "valley": valley, "peaks": peaks, "stability": stability,
            "split_levels": level.split, "power": power}


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(DPDensity)
