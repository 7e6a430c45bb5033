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

import privclust
from privclust import (
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

from . import _dp_basis, _dpc_dp, _privtree
from ._dp_map import cluster_map, split_to, weighted_kmeans  # noqa: F401  (their home before issue 26)

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
        named = _dpc_dp.noise_name(self.noise)
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
        # the step's three releases asked about together, under their relation, before the first (a refusal of a
        # later one would leave the earlier ones in the ledger)
        context.check_spend(self.epsilon, relation=RELATION, mechanism="dp-density's three releases",
                            covers="the cluster map")
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


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(DPDensity)
