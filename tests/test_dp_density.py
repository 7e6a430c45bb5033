"""Tests of the dp-density clusterer (issue 11) and its PrivTree kernels."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset
from sklearn.metrics import adjusted_rand_score

import privclust
import privclust.testing as pt
from privclust import Budget, BudgetExceededError, DataError, ParameterError, PrivacyContext, RecipeError
from privclust_plugins import _dp_map, _privtree
from privclust_plugins._dp_map import _merge_to, _refine, cluster_map, split_to, weighted_kmeans
from privclust_plugins.dp_density import DPDensity

BOUNDS = {"x": [-5.0, 25.0], "y": [-5.0, 25.0]}


def fit(component, data, *, seed=1, budget=None):
    context = PrivacyContext(budget, seed=seed)
    with context.step(0, "dens", component.name):
        partition = component.fit(data, context)
    return partition, context


def blobs(n=20_000, seed=0):
    """Three well separated blobs and a ring around one (a non-convex set)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, n)
    centres = np.array([[3.0, 3.0], [17.0, 4.0], [10.0, 18.0], [3.0, 3.0]])
    values = centres[truth] + rng.normal(0, 0.8, (n, 2))
    ring = truth == 3
    angle = rng.uniform(0, 2 * np.pi, ring.sum())
    values[ring] = np.column_stack([3 + 6 * np.cos(angle), 3 + 6 * np.sin(angle)]) + rng.normal(0, 0.3,
                                                                                                 (ring.sum(), 2))
    return pd.DataFrame(values, columns=["x", "y"]), truth


def shape(name, n, seed=0, jitter=0.01):
    """A shape set of ../shared/datasets upsampled to n records with jitter, and public bounds."""
    X = np.loadtxt(require_dataset(f"{name}.data.gz"))
    y = np.loadtxt(require_dataset(f"{name}.labels0.gz")).astype(int)
    rng = np.random.default_rng(seed)
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = float((hi - lo).max())
    pick = rng.integers(0, len(X), n)
    values = X[pick] + rng.normal(0, jitter * span, size=(n, X.shape[1]))
    cols = [f"x{j}" for j in range(X.shape[1])]
    bounds = {c: [float(np.floor(lo[j] - 0.1 * span)), float(np.ceil(hi[j] + 0.1 * span))]
              for j, c in enumerate(cols)}
    return pd.DataFrame(values, columns=cols), y[pick], bounds


# ---------------------------------------------------------------------------
# registration and parameters
# ---------------------------------------------------------------------------


def test_registered_through_its_entry_point(registry):
    component = registry.create("clusterers", "dp-density", epsilon=1.0, bounds=BOUNDS)
    assert isinstance(component, DPDensity)
    assert component.planned_cost() == (1.0, 0.0)


@pytest.mark.parametrize("params, fragment", [
    ({"epsilon": 0.0, "bounds": BOUNDS}, "epsilon"),
    ({"epsilon": -1.0, "bounds": BOUNDS}, "epsilon"),
    ({"epsilon": float("inf"), "bounds": BOUNDS}, "'epsilon' parameter of dp-density must be a finite number"),
    ({"epsilon": 1.0, "bounds": "data"}, "never the data"),
    ({"epsilon": 1.0, "bounds": BOUNDS, "count_share": 0.5, "tree_share": 0.5}, "leaf counts"),
    ({"epsilon": 1.0, "bounds": BOUNDS, "tree_share": 1.5}, "tree_share"),
    ({"epsilon": 1.0, "bounds": BOUNDS, "false_peak": 1.0}, "false_peak"),
    ({"epsilon": 1.0, "bounds": BOUNDS, "valley": 0.0}, "valley"),
    ({"epsilon": 1.0, "bounds": BOUNDS, "n_clusters": 0}, "n_clusters"),
    ({"epsilon": 1.0, "bounds": {"x": [3, 1], "y": [0, 1]}}, "bounds"),
])
def test_bad_parameters_are_refused(registry, params, fragment):
    with pytest.raises((ParameterError, RecipeError), match=fragment):
        registry.create("clusterers", "dp-density", **params)


def test_bounds_are_required_and_complete():
    data, _ = blobs(500)
    with pytest.raises(ParameterError, match="public 'bounds'"):
        fit(DPDensity(epsilon=1.0), data)
    with pytest.raises(DataError, match="no public bounds for column.*y"):
        fit(DPDensity(epsilon=1.0, bounds={"x": [0, 1]}), data)


def test_bad_data_are_refused():
    data, _ = blobs(500)
    bad = data.copy()
    bad.loc[3, "y"] = np.nan
    with pytest.raises(DataError, match="y.*NaN"):
        fit(DPDensity(epsilon=1.0, bounds=BOUNDS), bad)
    text = data.assign(z="a")
    with pytest.raises(DataError, match="z.*not numeric"):
        fit(DPDensity(epsilon=1.0, bounds={**BOUNDS, "z": [0, 1]}), text)
    wide = pd.DataFrame(np.zeros((10, 65)), columns=[f"c{j}" for j in range(65)])  # above 4 columns: the basis
    with pytest.raises(DataError, match="at most 64"):
        fit(DPDensity(epsilon=1.0, bounds={c: [0, 1] for c in wide.columns}), wide)


def test_refused_before_any_noise_when_the_budget_is_short():
    data, _ = blobs(500)
    context = pt._TracingContext(Budget(epsilon=0.5), seed=1)
    with pytest.raises(BudgetExceededError, match="no noise was drawn"), context.step(0, "d", "dp-density"):
        DPDensity(epsilon=1.0, bounds=BOUNDS).fit(data, context)
    assert len(context.ledger) == 0


@pytest.mark.parametrize("noise", ["geometric", "gaussian"])
def test_only_laplace_noise_is_accepted_and_nothing_is_spent_otherwise(noise):
    data, _ = blobs(2_000)
    context = PrivacyContext(Budget(epsilon=5.0), seed=1)
    with pytest.raises(ParameterError, match="'noise' parameter must name the laplace mechanism") as info, \
            context.step(0, "dens", "dp-density"):
        DPDensity(epsilon=1.0, bounds=BOUNDS, noise=noise).fit(data, context)
    assert noise in str(info.value) and 'noise = "laplace"' in str(info.value)
    assert len(context.ledger) == 0 and context.remaining == pytest.approx(5.0)


def test_an_epsilon_too_small_for_the_sampler_names_the_parameters_and_the_ledger_keeps_what_was_drawn():
    data, _ = blobs(500)
    context = PrivacyContext(Budget(epsilon=1.0), seed=1)
    with pytest.raises(ParameterError, match="tree's pool of max_nodes = 1048576") as info, \
            context.step(0, "dens", "dp-density"):
        DPDensity(epsilon=1e-9, bounds=BOUNDS).fit(data, context)
    assert "'epsilon'" in str(info.value) and "'max_nodes'" in str(info.value)
    # the noisy count was drawn before the tree failed: it stays spent, nothing else is recorded
    assert [e.details["release"] for e in context.ledger.of_kind("dp")] == ["count"]
    assert context.spent[0] == pytest.approx(1e-9 * 0.05)
    with pytest.raises(ParameterError, match="max_nodes"):
        DPDensity(epsilon=1.0, bounds=BOUNDS, max_nodes=1 << 25)


def _path_loss(lam: float, spacing: float | None, steps: int = 80) -> float:
    """The largest privacy loss, over the root-to-leaf transcripts of one path
    of PrivTree (fanout 2, theta = 0, delta = lam ln 2) whose nodes all hold
    ``c`` records (``c`` on a fine grid), between the data with and without
    one record on that path: split noise continuous Laplace of scale ``lam``
    (``spacing`` None) or discrete Laplace on ``spacing * Z`` (the geometric
    mechanism: spacing 1). Exact tail probabilities, in logs."""
    delta = lam * math.log(2.0)
    depth = np.arange(steps)

    def log_tails(x):  # log P(X > x), log P(X <= x)
        if spacing is None:
            small = -np.abs(x) / lam + math.log(0.5)
            big = np.log1p(-np.exp(small))
            return np.where(x < 0, big, small), np.where(x < 0, small, big)
        a = -spacing / lam
        norm = math.log1p(math.exp(a))
        m = np.floor(x / spacing) + 1
        upper = m * a - norm  # log P(X >= m spacing), m >= 1
        lower = (1 - m) * a - norm  # log P(X <= (m - 1) spacing), m <= 0
        with np.errstate(divide="ignore"):
            gt = np.where(m >= 1, upper, np.log1p(-np.exp(np.minimum(lower, 0.0))))
            le = np.where(m >= 1, np.log1p(-np.exp(np.minimum(upper, 0.0))), lower)
        return gt, le

    worst = 0.0
    for c in np.linspace(1.0, 40 * lam + 4, 8001):
        with_record = np.maximum(c - depth * delta, -delta)
        without = np.maximum(c - 1 - depth * delta, -delta)
        split1, leaf1 = log_tails(-with_record)
        split0, leaf0 = log_tails(-without)
        splits = np.concatenate([[0.0], np.cumsum(split1 - split0)])  # splits down to each depth
        worst = max(worst, float(np.abs(splits[:-1] + leaf1 - leaf0).max()), float(np.abs(splits).max()))
    return worst


def test_integer_noise_breaks_privtree_so_geometric_is_refused():
    """Why ``geometric`` is refused: PrivTree's bound (Zhang, Xiao & Xie 2016)
    holds for continuous Laplace noise (checked here on the same paths), but
    integer noise of scale near one record loses more than epsilon_tree on a
    single path of identical counts."""
    for eps_tree in (0.45, 1.0, 6.0, 10.0):
        lam = 3.0 / eps_tree
        assert _path_loss(lam, None) <= eps_tree
    assert _path_loss(3.0 / 6.0, 1.0) > 6.0 * 1.05  # geometric noise at epsilon_tree = 6: 6.38
    assert _path_loss(3.0 / 10.0, 1.0) > 10.0 * 1.5  # and at 10: 16.8


def test_conformance_kit():
    data, _ = blobs(400)
    # a small pool of node noises keeps the kit's 400 audited runs quick (the default pool is 2^20 values)
    pt.check_component(DPDensity(epsilon=1.0, bounds=BOUNDS, max_nodes=1 << 12), data)


# ---------------------------------------------------------------------------
# accounting
# ---------------------------------------------------------------------------


def test_ledger_states_three_releases_that_sum_to_epsilon():
    data, _ = blobs(5_000)
    part, context = fit(DPDensity(epsilon=0.8, bounds=BOUNDS), data)
    dp = context.ledger.of_kind("dp")
    assert len(dp) == 3
    assert math.isclose(sum(e.epsilon for e in dp), 0.8)
    assert math.isclose(context.spent[0], 0.8)
    assert all(e.relation.startswith("add/remove") for e in dp)
    assert all("joint-DP" in e.not_covered for e in dp)
    count, tree, leaves = dp
    assert count.sensitivity == 1.0 and leaves.sensitivity == 1.0
    assert tree.sensitivity == 3.0  # PrivTree's (2 beta - 1) / (beta - 1) with beta = 2
    assert math.isclose(tree.details["lambda"], 3.0 / tree.epsilon)
    assert math.isclose(tree.details["delta"], tree.details["lambda"] * math.log(2))
    assert leaves.details["leaves"] == part.diagnostics["leaves"]
    guarantee = context.ledger.of_kind("guarantee")[0]
    assert "joint-DP" in guarantee.statement and "0.8-DP" in guarantee.statement
    # the tree's entry names what it covers as one clause: the statement reads "the PrivTree partition
    # (...) is 0.36-DP", and the verdict, which lists what each entry covers separated by "; ", shows it as
    # one item
    assert tree.covers.startswith("the PrivTree partition (") and tree.covers.endswith(")")
    assert ";" not in tree.covers
    assert tree.statement.startswith(tree.covers + " is ")
    assert context.ledger.of_kind("leak") == []


def test_nothing_is_taken_from_the_data_and_the_input_is_not_mutated():
    data, _ = blobs(3_000)
    before = data.copy()
    fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data)
    pd.testing.assert_frame_equal(data, before)


# ---------------------------------------------------------------------------
# the map and the labels
# ---------------------------------------------------------------------------


def test_labels_are_the_released_map_applied_to_each_record():
    data, _ = blobs(10_000)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data)
    dg = part.diagnostics
    lo, hi = np.array([v[0] for v in BOUNDS.values()]), np.array([v[1] for v in BOUNDS.values()])
    ulo, uhi = (dg["leaf_low"] - lo) / (hi - lo), (dg["leaf_high"] - lo) / (hi - lo)
    # every record lies in exactly the leaf whose id it got
    unit = (data.to_numpy() - lo) / (hi - lo)
    depth = np.rint(-np.log2(np.prod(uhi - ulo, axis=1))).astype(int)
    tree = _privtree.Tree(lo=ulo, hi=uhi, depth=depth, counts=dg["leaf_noisy_counts"], nodes=0, truncated=False)
    leaf = _privtree.leaf_of(unit, tree)
    assert np.all(np.all(unit >= ulo[leaf], axis=1) & np.all(unit <= uhi[leaf], axis=1))
    np.testing.assert_array_equal(part.labels, dg["leaf_labels"][leaf])
    # the cluster ids of the leaves come from the released map alone
    again = cluster_map(ulo, uhi, depth, dg["leaf_noisy_counts"], n_est=dg["n_noisy"],
                        eps_leaf=dg["epsilon_leaves"], false_peak=0.05, min_fraction=0.02, n_clusters=None)
    np.testing.assert_array_equal(again["leaf_labels"], dg["leaf_labels"])
    # the tiled leaves cover the unit cube exactly
    assert math.isclose(float(np.prod(uhi - ulo, axis=1).sum()), 1.0)


def test_ids_do_not_depend_on_which_records_fall_where():
    """Neighbouring data sets whose noisy map is the same (one record moved
    inside its leaf, same seed) get the same ids for every other record, and
    the moved record its leaf's id: no renumbering by occupancy."""
    data, _ = blobs(10_000)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data)
    dg = part.diagnostics
    # move record 0 to the centre of its own leaf (same leaf, same counts)
    lo, hi = dg["leaf_low"], dg["leaf_high"]
    x = data.to_numpy()[0]
    mine = np.flatnonzero(np.all((lo <= x) & (x < hi), axis=1))[0]
    moved = data.copy()
    moved.iloc[0] = 0.5 * (lo[mine] + hi[mine])
    part2, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), moved)
    np.testing.assert_array_equal(part2.diagnostics["leaf_noisy_counts"], dg["leaf_noisy_counts"])
    np.testing.assert_array_equal(part2.labels, part.labels)
    # a leaf whose cluster holds no record at all still keeps its id in the map
    empty = np.flatnonzero(dg["leaf_noisy_counts"] < 0)
    assert empty.size and np.all(dg["leaf_labels"][empty] >= 0)


def test_same_seed_same_result_and_other_seed_other_noise():
    data, _ = blobs(5_000)
    a, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data, seed=3)
    b, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data, seed=3)
    c, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data, seed=4)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.diagnostics["leaf_noisy_counts"][:50], c.diagnostics["leaf_noisy_counts"][:50])


def test_recovers_a_non_convex_set_and_the_number_of_clusters():
    data, truth = blobs(20_000)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data)
    assert part.n_clusters == 4
    assert adjusted_rand_score(truth, part.labels) > 0.95
    fixed, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS, n_clusters=4), data)
    assert fixed.n_clusters == 4 and adjusted_rand_score(truth, fixed.labels) > 0.95
    assert part.centres.shape == (4, 2)


# The spiral's arms need about 50,000 records at epsilon = 1 (at 20,000 the median ARI over seeds is 0.6:
# the tree is too coarse for them, as docs/density-peaks.md says); R15's blobs are found at 20,000.
@pytest.mark.parametrize("name, k, n", [("spiral", 3, 50_000), ("r15", 15, 20_000)])
def test_ari_on_a_small_shape_set(name, k, n):
    data, truth, bounds = shape(name, n)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds), data)
    assert adjusted_rand_score(truth, part.labels) > 0.85
    fixed, _ = fit(DPDensity(epsilon=1.0, bounds=bounds, n_clusters=k), data)
    assert fixed.n_clusters == k
    assert adjusted_rand_score(truth, fixed.labels) > 0.85


def test_more_columns_cost_nothing_in_empty_space():
    rng = np.random.default_rng(0)
    centres = rng.uniform(20, 80, size=(4, 8))
    truth = rng.integers(0, 4, 10_000)
    data = pd.DataFrame(centres[truth] + rng.normal(0, 3, (10_000, 8)), columns=[f"c{j}" for j in range(8)])
    part, _ = fit(DPDensity(epsilon=1.0, bounds={c: [0, 100] for c in data.columns}), data)
    assert part.diagnostics["leaves"] < 2_000  # a full grid of 4 cells per column would have 65,536
    assert adjusted_rand_score(truth, part.labels) > 0.9


# ---------------------------------------------------------------------------
# kernels and memory
# ---------------------------------------------------------------------------


def test_privtree_without_noise_splits_exactly_the_heavy_nodes():
    unit = np.array([[0.1, 0.1]] * 10 + [[0.9, 0.9]])
    tree = _privtree.privtree(unit, np.zeros(100), theta=2.0, delta=0.0, max_depth=4)
    # the corner holding ten records is split down to the depth limit, the rest stops at once
    assert tree.counts.sum() == 11
    assert tree.depth.max() == 4
    heavy = tree.counts == 10
    assert heavy.sum() == 1 and tree.depth[heavy][0] == 4
    assert math.isclose(float(np.prod(tree.hi - tree.lo, axis=1).sum()), 1.0)


def test_privtree_starts_from_a_public_grid_and_counts_its_bias_from_the_grid_cells():
    """Above ``start_depth`` every node is split without noise (a public
    grid); below it the bias ``(depth - start_depth) delta`` is PrivTree's
    own, counted from the cell the record is in, so one record decides one
    split at the grid's depth and stops one level lower."""
    unit = np.array([[0.1, 0.1]])
    plain = _privtree.privtree(unit, np.zeros(100), theta=0.0, delta=10.0, max_depth=10)
    assert plain.depth.tolist() == [1, 1] and plain.nodes == 3  # the root splits (1 > 0), its children stop
    tree = _privtree.privtree(unit, np.zeros(100), theta=0.0, delta=10.0, max_depth=10, start_depth=4)
    # 16 grid cells, examined with noise; the record's cell splits (1 - 0 delta > 0), its children do not
    assert tree.nodes == 16 + 2
    assert sorted(tree.depth.tolist()) == [4] * 15 + [5, 5]
    assert tree.counts.sum() == 1 and math.isclose(float(np.prod(tree.hi - tree.lo, axis=1).sum()), 1.0)
    # the grid never goes below the depth limit
    capped = _privtree.privtree(unit, np.zeros(100), theta=0.0, delta=10.0, max_depth=2, start_depth=4)
    assert capped.depth.tolist() == [2] * 4 and capped.nodes == 0


def test_the_starting_grid_is_a_public_function_of_the_noisy_count_and_is_stated():
    data, _ = blobs(20_000)
    part, context = fit(DPDensity(epsilon=0.5, bounds=BOUNDS), data)
    dg = part.diagnostics
    cells = max(2.0, dg["n_noisy"] * dg["epsilon_leaves"] / 10.0)
    assert dg["start_depth"] == max(0, math.floor(math.log2(cells / 8))) == 5
    assert dg["depth_range"][0] >= dg["start_depth"]  # every leaf lies inside a cell of the grid
    tree_entry, = [e for e in context.ledger.of_kind("dp") if e.details.get("release") == "tree"]
    assert tree_entry.details["start_depth"] == 5 and "2^5 disjoint cells" in tree_entry.covers
    assert dg[privclust.EFFECTIVE_PARAMS]["start_depth"] == 5
    # a small node pool caps the grid (never more cells than half the pool)
    small, _ = fit(DPDensity(epsilon=0.5, bounds=BOUNDS, max_nodes=16), data)
    assert small.diagnostics["start_depth"] == 3
    # at a huge epsilon the grid is no finer than the kernel's width 2 h (finer cells only add empty leaves)
    huge, _ = fit(DPDensity(epsilon=1e4, bounds=BOUNDS), data)
    h = huge.diagnostics["bandwidth"]
    assert huge.diagnostics["start_depth"] == 2 * math.floor(math.log2(1 / (2 * h))) == 8
    # no grid below 8 cells' worth of records, and none above 4 columns
    few, context = fit(DPDensity(epsilon=0.5, bounds=BOUNDS), data.iloc[:200])
    tree_entry, = [e for e in context.ledger.of_kind("dp") if e.details.get("release") == "tree"]
    assert few.diagnostics["start_depth"] == 0 and "from the whole cube" in tree_entry.covers
    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.uniform(0, 1, (20_000, 5)), columns=list("abcde"))
    five, _ = fit(DPDensity(epsilon=10.0, bounds={c: [0, 1] for c in wide.columns}, project_above=5), wide)
    assert five.diagnostics["start_depth"] == 0


def test_privtree_stops_when_the_node_pool_runs_out():
    unit = np.random.default_rng(0).random((1_000, 2))
    tree = _privtree.privtree(unit, np.zeros(7), theta=0.0, delta=0.0, max_depth=30)
    assert tree.truncated and tree.nodes <= 7
    assert tree.counts.sum() == 1_000


def test_adjacency_finds_touching_boxes_only():
    lo = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.5], [0.5, 0.5], [0.75, 0.5]])
    hi = np.array([[0.5, 0.5], [1.0, 0.5], [0.5, 1.0], [0.75, 1.0], [1.0, 1.0]])
    depth = np.array([2, 2, 2, 3, 3])
    tree = _privtree.Tree(lo=lo, hi=hi, depth=depth, counts=np.zeros(5), nodes=0, truncated=False)
    i, j = _privtree.adjacency(tree)
    pairs = set(zip(i.tolist(), j.tolist(), strict=True))
    assert (0, 4) not in pairs  # 0 ends at x = 0.5, 4 starts at x = 0.75
    assert {(0, 1), (0, 2), (0, 3), (1, 3), (1, 4), (2, 3), (3, 4), (1, 2)} <= pairs


def test_false_peak_z_is_the_laplace_tail_with_bonferroni():
    z = _privtree.false_peak_z(1000, 0.05)
    assert math.isclose(1000 * math.exp(-math.sqrt(2) * z), 0.05)


def test_memory_is_bounded_by_the_leaves_not_by_pairs_of_records():
    n = 60_000
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.normal(10, 2, (n, 2)), columns=["x", "y"])
    tracemalloc.start()
    fit(DPDensity(epsilon=1.0, bounds=BOUNDS, max_nodes=1 << 16), data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200 * 2**20  # an n x n matrix of doubles would take 27 GB


def test_runs_in_a_recipe(tmp_path):
    data, _ = blobs(3_000)
    recipe = tmp_path / "r.toml"
    recipe.write_text(
        "[privacy]\nepsilon = 2.0\n\n[[steps]]\nuse = \"dp-density\"\ncolumns = [\"x\", \"y\"]\n"
        "epsilon = 1.0\nbounds = { x = [-5, 25], y = [-5, 25] }\n", encoding="utf-8")
    with pytest.warns(privclust.NothingProtectedWarning, match="CHANGES NO COLUMN"):
        release = privclust.run(str(recipe), data, seed=1)
    # the add/remove total; the file shows n, so the budget bounds it counted twice (rt17 F1)
    assert release.spent == (1.0, 0.0) and release.file_spent == (2.0, 0.0)
    kinds = [e.kind for e in release.ledger if e.kind != "process"]
    assert kinds == ["dp", "dp", "dp", "guarantee", "verified", "verified"]
    # the cluster map is the plugin's DP claim; the released file holds x and y unchanged, so the host's
    # verdict claims nothing for it
    assert release.verdict.startswith("No differential-privacy guarantee")


def test_level_tree_order_lists_children_before_parents():
    data, _ = blobs(20_000)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data)
    dg = part.diagnostics
    lo, hi = np.array([v[0] for v in BOUNDS.values()]), np.array([v[1] for v in BOUNDS.values()])
    ulo, uhi = (dg["leaf_low"] - lo) / (hi - lo), (dg["leaf_high"] - lo) / (hi - lo)
    depth = np.rint(-np.log2(np.prod(uhi - ulo, axis=1))).astype(int)
    tree = _privtree.Tree(lo=ulo, hi=uhi, depth=depth, counts=dg["leaf_noisy_counts"], nodes=0, truncated=False)
    pairs = _privtree.adjacency(tree)
    f, sigma = _privtree.box_density(ulo, uhi, depth, dg["leaf_noisy_counts"], 1.0 / dg["epsilon_leaves"],
                                     dg["bandwidth"])
    np.testing.assert_allclose(f, dg["leaf_density"] * np.prod(hi - lo))  # the density the component used
    level = _privtree.level_set_tree(f, sigma, dg["leaf_noisy_counts"], pairs, z=dg["z"], min_mass=dg["min_mass"],
                                     valley=1.0)
    position = {int(c): i for i, c in enumerate(level.order)}
    assert sorted(position) == np.flatnonzero(level.alive).tolist()
    for c in position:
        p = int(level.parent[c])
        if p >= 0:
            assert level.alive[p] and position[p] > position[c]
    assert np.all(level.alive[level.leaf_node])
    # with n_clusters the relaxed valley still yields the clusters asked for
    fixed, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS, n_clusters=4), data)
    assert fixed.n_clusters == 4 and fixed.diagnostics["valley"] >= 0.4


def test_leaf_of_follows_the_trees_own_rule_even_on_midpoints():
    rng = np.random.default_rng(0)
    unit = np.vstack([rng.random((3_000, 3)), np.full((50, 3), 0.5), np.full((5, 3), 1.0), np.zeros((5, 3)),
                      np.array([[0.25, 0.5, 0.75]] * 20)])
    tree = _privtree.privtree(unit, rng.laplace(0, 3, 10_000), theta=0.0, delta=2.0, max_depth=20)
    leaf = _privtree.leaf_of(unit, tree)
    np.testing.assert_array_equal(np.bincount(leaf, minlength=tree.counts.size), tree.counts)
    assert np.all((unit >= tree.lo[leaf]) & ((unit < tree.hi[leaf]) | (tree.hi[leaf] >= 1.0)))


@pytest.mark.parametrize("separation, clusters", [(1.4, 1), (5.0, 2)])
def test_clusters_are_density_modes_not_mixture_components(separation, clusters):
    """The documented limit behind the 2-D mixture figure: two equal Gaussians
    less than 2 sd apart have one mode, so they are one cluster; 5 sd apart
    they are two, recovered almost exactly."""
    rng = np.random.default_rng(3)
    n = 20_000
    truth = rng.integers(0, 2, n)
    centres = np.array([[10.0 - separation, 10.0], [10.0 + separation, 10.0]])
    data = pd.DataFrame(centres[truth] + rng.normal(0, 2.0, (n, 2)), columns=["x", "y"])
    part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data)
    assert part.n_clusters == clusters
    if clusters == 2:
        assert adjusted_rand_score(truth, part.labels) > 0.9


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_noise_alone_does_not_make_a_second_cluster_in_unimodal_data(epsilon):
    """The documented false_peak bound, tested as an attacker would: on a
    uniform square and on one Gaussian (one mode each, bounds touching the
    data), no seed may show a second cluster. The bound allows 5% of runs;
    these 2 x 8 fixed seeds show none, at small, medium and large epsilon
    and in one and three columns too."""
    rng = np.random.default_rng(7)
    sets = {"uniform": rng.uniform(0, 20, (20_000, 2)), "gaussian": rng.normal(10, 2.5, (20_000, 2)),
            "uniform, 1 column": rng.uniform(0, 20, (20_000, 1)), "uniform, 3 columns": rng.uniform(0, 20, (20_000, 3))}
    for name, values in sets.items():
        cols = ["x", "y", "z"][:values.shape[1]]
        data = pd.DataFrame(values, columns=cols)
        bounds = {c: [0.0, 20.0] for c in cols}
        seeds = range(8) if values.shape[1] == 2 else range(4)
        found = [len(fit(DPDensity(epsilon=epsilon, bounds=bounds), data, seed=seed)[0].centres) for seed in seeds]
        assert found == [1] * len(found), (name, found)


def test_bandwidth_follows_silvermans_rate_in_the_noisy_count():
    assert math.isclose(_privtree.bandwidth(1e5, 2), 0.0147, rel_tol=1e-2)
    assert _privtree.bandwidth(1e6, 2) < _privtree.bandwidth(1e5, 2) < _privtree.bandwidth(1e4, 2)
    assert math.isclose(_privtree.bandwidth(1e6, 2) / _privtree.bandwidth(1e5, 2), 10 ** (-1 / 6))
    assert math.isclose(_privtree.bandwidth(1e5, 8) / _privtree.bandwidth(1e4, 8), 10 ** (-1 / 12))
    assert _privtree.bandwidth(-3.0, 2) == _privtree.bandwidth(1.0, 2)  # a noisy count below one


def test_box_density_is_exact_on_a_uniform_map_and_plain_without_a_kernel():
    """On a map whose counts are proportional to the leaf volumes the kernel
    returns that constant density everywhere (the widened box is clipped at
    the cube's faces, and so is its mass); with h = 0 each leaf keeps its own
    density and the noise of its own count."""
    rng = np.random.default_rng(0)
    unit = rng.random((4_000, 2))
    tree = _privtree.privtree(unit, rng.laplace(0, 2, 5_000), theta=0.0, delta=3.0, max_depth=10)
    volume = np.prod(tree.hi - tree.lo, axis=1)
    assert np.unique(tree.depth).size > 1  # leaves of several sizes
    f, sigma = _privtree.box_density(tree.lo, tree.hi, tree.depth, 1000.0 * volume, 2.0, 0.05)
    np.testing.assert_allclose(f, 1000.0)
    assert np.all(sigma > 0)
    f0, s0 = _privtree.box_density(tree.lo, tree.hi, tree.depth, tree.counts, 2.0, 0.0)
    np.testing.assert_allclose(f0, tree.counts / volume)
    np.testing.assert_allclose(s0, math.sqrt(2.0) * 2.0 / volume)
    # two halves of the cube, counts 10 and 30: a kernel a quarter wide straddles the cut
    lo, hi = np.array([[0.0, 0.0], [0.5, 0.0]]), np.array([[0.5, 1.0], [1.0, 1.0]])
    f2, s2 = _privtree.box_density(lo, hi, np.array([1, 1]), np.array([10.0, 30.0]), 1.0, 0.25)
    np.testing.assert_allclose(f2, [10.0 / 0.5, 30.0 / 0.5])  # each leaf is wider than the kernel in x
    np.testing.assert_allclose(s2, math.sqrt(2.0) / 0.5)  # the noise of its own count only
    f3, s3 = _privtree.box_density(lo, hi, np.array([1, 1]), np.array([10.0, 30.0]), 1.0, 0.375)
    # box [0.25 - 0.375, 0.25 + 0.375] x [0, 1] clipped to [0, 0.625]: all of leaf 0 and a quarter of leaf 1
    np.testing.assert_allclose(f3[0], (10.0 + 0.25 * 30.0) / 0.625)
    np.testing.assert_allclose(s3[0], math.sqrt(2.0) * math.sqrt(1.0 + 0.25 ** 2) / 0.625)


def test_jitter_around_scattered_points_does_not_split_a_shape():
    """Two filled crescents, each drawn around 120 scattered points with a
    jitter (as the benchmark's upsampled shape sets): at fine leaves the
    density has a bump at every point. One pass of neighbour averaging (the
    component before the kernel of public half-width) broke them into 5 to
    13 clusters at epsilon 0.5 to 8; the kernel keeps the two crescents at
    epsilon 0.5 and 1 (seeds 1 to 3). From epsilon 2 on, the leaves are finer
    than the kernel, whose half-width here is 1.7 jitter sd, and it splits
    off groups of points again (seed 1 of 3 before the tree started from a
    grid, 2 of 3 since, 3 of 3 since the ellipse pass of issue 26): the limit
    of any fixed bandwidth, see the docs."""
    g = np.random.default_rng(7)
    t, r = g.uniform(0, np.pi, (2, 120)), g.uniform(5, 7, (2, 120))
    points = np.vstack([np.c_[10 + r[0] * np.cos(t[0]), 10 + r[0] * np.sin(t[0])],
                        np.c_[16 + r[1] * np.cos(t[1]), 12 - r[1] * np.sin(t[1])]])
    rng = np.random.default_rng(0)
    pick = rng.integers(0, 240, 50_000)
    data = pd.DataFrame(points[pick] + rng.normal(0, 0.25, (50_000, 2)), columns=["x", "y"])
    truth = (pick >= 120).astype(int)
    for eps in (0.5, 1.0):
        for seed in (1, 2, 3):
            part, _ = fit(DPDensity(epsilon=eps, bounds={"x": [0, 26], "y": [0, 20]}), data, seed=seed)
            assert part.n_clusters == 2, (eps, seed)
            assert adjusted_rand_score(truth, part.labels) > 0.99


def test_box_density_is_the_same_in_small_blocks_of_pairs():
    """The kernel visits the overlapping leaves in blocks of at most about
    ``max_pairs`` pairs (its memory bound); the block size changes nothing."""
    rng = np.random.default_rng(1)
    unit = np.clip(np.vstack([rng.normal(0.3, 0.05, (6_000, 2)), rng.normal(0.7, 0.1, (6_000, 2))]), 0, 1)
    tree = _privtree.privtree(unit, rng.laplace(0, 2, 20_000), theta=0.0, delta=1.0, max_depth=14)
    noisy = tree.counts + rng.laplace(0, 2, tree.counts.size)
    whole = _privtree.box_density(tree.lo, tree.hi, tree.depth, noisy, 2.0, 0.03)
    blocks = _privtree.box_density(tree.lo, tree.hi, tree.depth, noisy, 2.0, 0.03, max_pairs=50)
    np.testing.assert_allclose(blocks[0], whole[0], rtol=1e-12)
    np.testing.assert_allclose(blocks[1], whole[1], rtol=1e-12)
    assert tree.counts.size > 200  # enough leaves that 50 pairs make many blocks


def test_the_tree_stops_where_the_kernel_stops_using_finer_leaves():
    """At a huge epsilon PrivTree would split down to single records; leaves
    narrower than h / m add nothing to the kernel's estimate and cost pairs
    (one column, 10,000 records, epsilon = 1e6: the kernel had not finished
    after a minute before this bound), so the depth limit stops at
    ``finest_splits``."""
    assert _privtree.finest_splits(0.0147, 2) == 9  # m = 4 in two columns: leaves of at least h / 4
    assert _privtree.finest_splits(0.0168, 1) == 12  # m = 49 in one column
    assert _privtree.finest_splits(0.0355, 8) == 5  # m = 1 from three columns on: leaves of at least h
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": np.r_[rng.normal(2, 0.3, 5_000), rng.normal(8, 0.3, 5_000)]})
    part, context = fit(DPDensity(epsilon=1e6, bounds={"x": [0, 10]}), data)
    dg = part.diagnostics
    assert dg["max_depth"] == _privtree.finest_splits(dg["bandwidth"], 1)
    # the tree's ledger entry states the depth limit the tree was built with
    tree_entry, = [e for e in context.ledger.of_kind("dp") if e.details.get("release") == "tree"]
    assert tree_entry.details["max_depth"] == dg["max_depth"]
    assert dg["depth_range"][1] <= dg["max_depth"] and dg["leaves"] < 2 ** dg["max_depth"]
    assert part.n_clusters == 2


def test_coarsen_merges_the_deeper_leaves_into_their_ancestors():
    rng = np.random.default_rng(0)
    unit = np.clip(rng.normal(0.4, 0.1, (20_000, 2)), 0, 1)
    tree = _privtree.privtree(unit, rng.laplace(0, 2, 20_000), theta=0.0, delta=1.0, max_depth=14)
    cut = 8
    assert tree.depth.max() > cut and tree.depth.min() < cut
    lo, hi, depth, group, merged = _privtree.coarsen(tree.lo, tree.hi, tree.depth, cut)
    # the cells tile the cube, every leaf lies in its cell, and the cell counts are sums of leaf counts
    assert math.isclose(float(np.prod(hi - lo, axis=1).sum()), 1.0)
    assert np.all((tree.lo >= lo[group]) & (tree.hi <= hi[group]))
    assert depth.max() == cut and np.all(depth[group] == np.minimum(tree.depth, cut))
    np.testing.assert_array_equal(merged, np.bincount(group, minlength=lo.shape[0]))
    assert merged.sum() == tree.lo.shape[0] and merged.max() > 1
    # a merged cell of depth 8 in two columns is 1/16 x 1/16, on that grid
    deep = depth == cut
    np.testing.assert_allclose(hi[deep] - lo[deep], 1 / 16)
    np.testing.assert_allclose(lo[deep] * 16, np.round(lo[deep] * 16))
    # nothing deeper than the cut: the same partition
    same = _privtree.coarsen(tree.lo, tree.hi, tree.depth, 20)
    np.testing.assert_array_equal(same[3], np.arange(tree.lo.shape[0]))
    # a merged cell carries the noise of all its counts
    f1, s1 = _privtree.box_density(lo, hi, depth, np.ones(lo.shape[0]), 2.0, 0.0)
    f2, s2 = _privtree.box_density(lo, hi, depth, np.ones(lo.shape[0]), 2.0, 0.0, merged=merged)
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_allclose(s2, s1 * np.sqrt(merged))


def test_refine_splits_a_fine_cluster_only_along_coarse_clusters_inside_it():
    centres = np.column_stack([np.arange(8.0), np.zeros(8)])
    w = np.ones(8)
    fine = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    # coarse clusters 0 and 1 lie inside fine cluster 0; leaf 2 is in none and takes the nearest
    labels, origin = _refine(fine, np.array([0, 0, -1, 1, 1, 2, 2, 2]), w, centres)
    np.testing.assert_array_equal(labels, [0, 0, 0, 2, 2, 1, 1, 1])
    assert origin == [0, -1, 1]
    # a coarse cluster spanning two fine ones (a wider kernel merging what the fine pass separated) changes nothing
    labels, origin = _refine(fine, np.array([0, 0, 0, 0, 1, 1, 1, 1]), w, centres)
    np.testing.assert_array_equal(labels, fine)
    assert origin == [-1, -1]
    labels, _ = _refine(fine, np.full(8, -1), w, centres)
    np.testing.assert_array_equal(labels, fine)


def test_clusters_joined_by_a_bridge_are_split_by_the_coarse_pass():
    """Aggregation's two pairs of clusters joined by bridges meet at saddles
    as shallow as the jitter's bumps inside one cluster, so the first pass
    keeps at least one pair together (with the fixed valley 0.4 both: 5
    clusters, ARI 0.81; with the excess test one); the wider kernel of the
    coarse pass smooths the bumps away and separates the pairs. Flame at
    epsilon 0.1, one cluster in the first pass, gets its two."""
    data, truth, bounds = shape("aggregation", 100_000)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds), data)
    assert part.n_clusters == 7 and part.diagnostics["refined_clusters"] >= 1
    assert part.diagnostics["rule"] == "automatic"
    assert adjusted_rand_score(truth, part.labels) > 0.95
    assert part.diagnostics["coarse_bandwidth"] == pytest.approx(4 * part.diagnostics["bandwidth"])
    data, truth, bounds = shape("flame", 100_000)
    part, _ = fit(DPDensity(epsilon=0.1, bounds=bounds), data)
    # flame's two classes, and since the smallest cluster is 0.5% its group of outliers (0.9%) when it shows
    assert part.n_clusters in (2, 3) and adjusted_rand_score(truth, part.labels) > 0.9
    # the two passes share false_peak: each tests its peaks at half of it, a half of that for the DP noise
    assert part.diagnostics["z"] == pytest.approx(_privtree.false_peak_z(part.diagnostics["leaves"], 0.05 / 4))
    # above 4 columns (the tree in the full space: project_above = 5) there is no coarse pass, and the one pass
    # has all of false_peak
    wide = pd.DataFrame(np.random.default_rng(0).normal(10, 2, (3_000, 5)), columns=list("abcde"))
    five, _ = fit(DPDensity(epsilon=1.0, bounds={c: [0, 20] for c in "abcde"}, project_above=5), wide)
    assert five.diagnostics["coarse_bandwidth"] is None and five.diagnostics["refined_clusters"] == 0
    assert five.diagnostics["z"] == pytest.approx(_privtree.false_peak_z(five.diagnostics["leaves"], 0.05 / 2))


def test_merge_to_joins_touching_clusters_by_wards_criterion():
    # five leaves in a row, densities 10 | 4 | 9 | 1 | 8, each leaf's mass its density: clusters {0}, {1, 2}, {3, 4}
    f = np.array([10.0, 4.0, 9.0, 1.0, 8.0])
    centres = np.arange(5.0)[:, None]
    pairs = (np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4]))
    labels = np.array([0, 1, 1, 2, 2])
    # Ward: {0} + {1, 2} costs 10 * 13 / 23 * (1.69)^2 = 16.2, {1, 2} + {3, 4} 13 * 9 / 22 * (2.31)^2 = 28.3
    merged, stability = _merge_to(labels, [1.0, 2.0, 3.0], f, pairs, 2, centres, f)
    np.testing.assert_array_equal(merged, [0, 0, 0, 1, 1])
    assert stability == [3.0, 3.0]
    one, _ = _merge_to(labels, [1.0, 2.0, 3.0], f, pairs, 1, centres, f)
    np.testing.assert_array_equal(one, 0)
    same, _ = _merge_to(labels, [1.0, 2.0, 3.0], f, pairs, 3, centres, f)
    np.testing.assert_array_equal(same, labels)


def test_given_n_clusters_the_automatic_clusters_are_merged_down_to_it():
    """Jain's sparse moon is two or three density peaks that each meet the
    dense moon at a lower level than they meet each other in the tree, so the
    two branches of largest excess of mass were the dense moon and a fragment
    (ARI 0.25); merging the automatic clusters (by the shallowest valley, by
    Ward's criterion since issue 26) joins the fragments first."""
    data, truth, bounds = shape("jain", 100_000)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds, n_clusters=2), data)
    assert part.n_clusters == 2 and adjusted_rand_score(truth, part.labels) > 0.95
    assert part.diagnostics["rule"] == "automatic clusters merged to n_clusters"
    # more clusters asked for than the map has modes: the branches of largest excess of mass, and then (issue 26)
    # the widest of them split in two until there are as many as asked for
    data, truth = blobs(20_000)
    more, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS, n_clusters=6), data)
    assert more.diagnostics["rule"].startswith("density clusters split by weighted 2-means") and more.n_clusters == 6


def test_an_epsilon_too_small_to_share_out_is_refused_at_creation():
    # 5e-324 times the count's share 0.05 rounds to 0: refused by name, not a ZeroDivisionError
    with pytest.raises(RecipeError, match="epsilon = 4.94065e-324 is too small to be shared out"):
        privclust.get_registry().create("clusterers", "dp-density", epsilon=5e-324, bounds=BOUNDS)


def test_bounds_beyond_a_double_are_refused_by_name():
    data = pd.DataFrame({"x": [1.0, 2.0], "y": [1.0, 2.0]})
    recipe = {"steps": [{"use": "dp-density", "epsilon": 1.0, "bounds": {"x": [0, 10**400], "y": [0, 10]}}]}
    with pytest.raises(RecipeError, match="'bounds' parameter must give finite numbers for 'x'"):
        privclust.run(recipe, data, seed=1)
    recipe = {"steps": [{"use": "dp-density", "epsilon": 10**400, "bounds": BOUNDS}]}
    with pytest.raises(RecipeError, match="'epsilon' parameter of dp-density must be a finite number"):
        privclust.run(recipe, data, seed=1)


def test_fewer_clusters_than_asked_for_are_stated_in_the_effective_parameters():
    data = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 5.0], "y": [1.0, 2.0, 3.0, 4.0, 5.0]})
    partition, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS, n_clusters=1000), data)
    assert partition.centres.shape[0] < 1000
    assert partition.diagnostics[privclust.EFFECTIVE_PARAMS]["n_clusters"] == partition.centres.shape[0]


@pytest.mark.parametrize("epsilon, what", [(1e-300, "the noisy number of records"), (1e-12, "the tree's pool")])
def test_an_epsilon_too_small_for_the_sampler_is_refused_when_compiled(epsilon, what):
    """trust17a: dp-density's first two releases have figures known without
    the data; an epsilon too small for the exact sampler passed `privclust
    check` and was refused only when the step ran."""
    step = {"use": "dp-density", "columns": ["x", "y"], "epsilon": epsilon,
            "bounds": {"x": [0, 1], "y": [0, 1]}}
    with pytest.raises(privclust.RecipeError, match=f"dp-density: {what}.*cannot be released with epsilon = "):
        privclust.compile({"steps": [step]})
    privclust.compile({"steps": [{**step, "epsilon": 1.0}]})


# ---------------------------------------------------------------------------
# n_clusters on a small file: k-means of the map when it resolves fewer modes (issue 26)
# ---------------------------------------------------------------------------


def _close_clusters(n=1500, gap=3.0, seed=0):
    """Three clusters of sd 4, their centres ``gap`` sd apart, in [0, 100]^2."""
    rng = np.random.default_rng(seed)
    angle = np.array([0.0, 2 * np.pi / 3, 4 * np.pi / 3])
    radius = 4.0 * gap / np.sqrt(3.0)
    centres = np.column_stack([50 + radius * np.cos(angle), 50 + radius * np.sin(angle)])
    truth = rng.integers(0, 3, n)
    return pd.DataFrame(centres[truth] + rng.normal(0, 4, (n, 2)), columns=["x", "y"]), truth


def test_n_clusters_on_a_small_file_is_a_kmeans_of_the_map_not_one_cluster():
    """1,500 records, 3 clusters 3 sd apart, epsilon 3, n_clusters = 3: the
    map's level-set tree has one significant mode, and the step returned that
    one cluster (ARI 0; diffprivlib's KMeans told k: 0.19 over seeds 1-3). It
    now partitions the map's leaves by weighted k-means (post-processing)."""
    data, truth = _close_clusters()
    bounds = {"x": [0.0, 100.0], "y": [0.0, 100.0]}
    auto, _ = fit(DPDensity(epsilon=3.0, bounds=bounds), data)
    assert auto.n_clusters == 1  # the automatic map: one mode at this n * epsilon (a stated failure regime)
    part, _ = fit(DPDensity(epsilon=3.0, bounds=bounds, n_clusters=3), data)
    assert part.n_clusters == 3 and part.diagnostics["rule"].startswith("weighted k-means of the leaves")
    assert adjusted_rand_score(truth, part.labels) > 0.5
    assert np.asarray(part.centres).shape == (3, 2)


def test_split_to_keeps_the_density_clusters_and_splits_the_widest():
    """With some modes resolved (aggregation at epsilon 0.5 gave 5 of 7), a
    k-means of all the leaves cut its non-convex clusters (ARI 0.809 -> 0.717
    at 20,000 records); the widest density cluster is split instead."""
    centres = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 0.0], [5.1, 0.0], [0.0, 9.0], [0.1, 9.0]])
    labels = np.array([0, 0, 0, 0, 1, 1])  # cluster 0 holds two far-apart groups, cluster 1 one tight group
    out = split_to(labels, centres, np.ones(6), 3)
    assert out.tolist() == [0, 0, 2, 2, 1, 1] or out.tolist() == [2, 2, 0, 0, 1, 1]
    assert split_to(labels, centres, np.ones(6), 2).tolist() == labels.tolist()
    assert split_to(np.zeros(6, dtype=np.int64), centres, np.ones(6), 3).max() == 2  # one mode: k-means of all


def test_weighted_kmeans_is_deterministic_and_weighted():
    centres = np.array([[0.0, 0.0], [0.1, 0.0], [1.0, 1.0], [1.1, 1.0], [0.5, 0.5]])
    labels = weighted_kmeans(centres, np.array([5.0, 5.0, 5.0, 5.0, 0.0]), 2)
    assert labels[0] == labels[1] != labels[2] == labels[3]
    assert np.array_equal(labels, weighted_kmeans(centres, np.array([5.0, 5.0, 5.0, 5.0, 0.0]), 2))
    assert weighted_kmeans(centres, np.zeros(5), 9).max() <= 4  # no more clusters than leaves; no mass: equal weights


# ---------------------------------------------------------------------------
# issue 26: the automatic rules that adapt
# ---------------------------------------------------------------------------

def _gaussians(centres, sizes, sd, seed=0):
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(len(sizes)), sizes)
    values = np.asarray(centres, dtype=float)[truth] + rng.normal(0, sd, (truth.size, 2))
    return pd.DataFrame(values, columns=["x", "y"]), truth


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_round_modes_three_sd_apart_are_kept_apart(seed):
    """Two equal Gaussians 3 sd apart have two modes (saddle at 0.64 of the
    peak, 0.7 and more through the kernel): the fixed valley 0.4 merged them
    into one cluster; the round-split rule keeps them apart at every seed."""
    data, truth = _gaussians([[10.0 - 3.0, 10.0], [10.0 + 3.0, 10.0]], [50_000, 50_000], 2.0)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data, seed=seed)
    assert part.n_clusters == 2
    assert adjusted_rand_score(truth, part.labels) > 0.72  # the Bayes rule scores (2 Phi(1.5) - 1)^2 = 0.75


def test_a_cluster_of_one_in_a_hundred_is_found():
    """1,000 records beside 100,000 (8 sd apart): below the fixed smallest
    cluster of 2%, found with the smallest cluster of 0.5% and the excess test."""
    data, truth = _gaussians([[5.0, 10.0], [15.0, 10.0]], [100_000, 1_000], 1.25)
    for seed in (1, 2):
        part, _ = fit(DPDensity(epsilon=1.0, bounds=BOUNDS), data, seed=seed)
        assert part.n_clusters == 2
        small = part.labels[truth == 1]
        assert np.mean(small == np.bincount(small).argmax()) > 0.95
        assert adjusted_rand_score(truth, part.labels) > 0.95


def test_a_small_file_of_three_clear_clusters_is_not_one_cluster():
    """300 records in 3 clusters 10 sd apart, epsilon 3: the sampling-noise
    test reads the peak against the saddle's own noise (under no peak both
    sit at the saddle's density), so a few dozen records a cluster clear it."""
    data, truth = _gaussians([[4.0, 4.0], [16.0, 4.0], [10.0, 15.0]], [100, 100, 100], 1.0)
    for seed in (1, 2, 3):
        part, _ = fit(DPDensity(epsilon=3.0, bounds=BOUNDS), data, seed=seed)
        assert part.n_clusters >= 2, seed
        assert adjusted_rand_score(truth, part.labels) > 0.5


def _square_grid(n=64):
    """The leaves of an n x n grid of the unit square: n and their lower and upper corners."""
    g = (np.arange(n) + 0.5) / n
    cx, cy = np.meshgrid(g, g, indexing="ij")
    lo = np.column_stack([cx.ravel(), cy.ravel()]) - 0.5 / n
    return n, lo, lo + 1.0 / n


def test_roundness_is_one_for_a_disc_and_grows_with_elongation():
    """A disc of leaves reads about 1, a bar 4 times longer than wide about
    (1 + 16) / 8 = 2.1 (an ellipse's formula; a rectangle reads a little
    more); only the leaves above the level count."""
    n, lo, hi = _square_grid()
    centre = 0.5 * (lo + hi)
    disc = (((centre - 0.5) ** 2).sum(axis=1) < 0.3 ** 2).astype(float)
    everything = np.arange(n * n)
    assert _privtree.roundness(disc, lo, hi, everything, 0.5) == pytest.approx(1.0, abs=0.02)
    bar = ((np.abs(centre[:, 0] - 0.5) < 0.4) & (np.abs(centre[:, 1] - 0.5) < 0.1)).astype(float)
    assert _privtree.roundness(bar, lo, hi, everything, 0.5) == pytest.approx(2.36, abs=0.05)
    assert _privtree.roundness(bar, lo, hi, everything, 2.0) == math.inf


def _tree_of_three():
    """A level-set tree on a line of leaves with three peaks: a small one
    (leaf 0, mass 10) apart from a large shape of two peaks (leaves 2-6)."""
    f = np.array([5.0, 0.0, 6.0, 8.0, 4.0, 9.0, 6.0])
    noisy = np.array([10.0, 0.0, 300.0, 400.0, 100.0, 400.0, 300.0])
    pairs = (np.arange(6), np.arange(1, 7))
    return f, noisy, _privtree.level_set_tree(f, np.zeros(7), noisy, pairs, z=1.0, min_mass=1.0)


def test_heirs_keep_a_shape_a_root_when_a_small_group_splits_off():
    """Splitting a small group off a shape must not turn the shape into a
    node that excess of mass keeps whole: with the heir rule its two peaks
    are the clusters, without it the whole shape is one."""
    f, noisy, level = _tree_of_three()
    heirs = _privtree.heirs(level, 50.0)
    plain = _privtree.select_clusters(level)
    assert [int(level.mass[c]) for c in plain] == [10, 1500]  # the small group and the whole shape
    chosen = _privtree.select_clusters(level, heirs)
    assert sorted(int(level.mass[c]) for c in chosen) == [10, 700, 700]  # the saddle leaf (100) in neither
    assert not _privtree.heirs(level, 5.0).any()  # a group of 10 is not small below 5


def test_round_splits_are_taken_apart_and_elongated_ones_are_not():
    """Two discs meeting at a saddle are taken apart (both round at the
    saddle's level); a bar with a dip in the middle is not (its halves are
    bars)."""
    n, lo, hi = _square_grid()
    c = 0.5 * (lo + hi)
    tree = _privtree.Tree(lo=lo, hi=hi, depth=np.full(n * n, 12), counts=np.zeros(n * n), nodes=0, truncated=False)
    pairs = _privtree.adjacency(tree)
    discs = np.exp(-((c - [0.3, 0.5]) ** 2).sum(axis=1) / 0.005) + np.exp(-((c - [0.7, 0.5]) ** 2).sum(axis=1) / 0.005)
    bar = np.where(np.abs(c[:, 1] - 0.5) < 0.05, 1.0 - 0.3 * np.exp(-((c[:, 0] - 0.5) ** 2) / 0.001), 0.0)
    bar *= np.abs(c[:, 0] - 0.5) < 0.45
    for density, expect in ((discs, True), (bar, False)):
        level = _privtree.level_set_tree(density, np.zeros(n * n), density * 100, pairs, z=1.0, min_mass=1.0)
        split = _privtree.round_splits(level, density, lo, hi, 1.2)
        assert bool(split.any()) is expect


# ---------------------------------------------------------------------------
# issue 26: small files, automatic (a map too small to test modes)
# ---------------------------------------------------------------------------

def _iris():
    """scikit-learn's iris (bundled, no network), with the benchmark's bounds: the range padded by 10% of the
    widest column, rounded out."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = 0.1 * float((hi - lo).max())
    cols = [f"x{j}" for j in range(X.shape[1])]
    bounds = {c: [float(np.floor(lo[j] - pad)), float(np.ceil(hi[j] + pad))] for j, c in enumerate(cols)}
    return pd.DataFrame(X, columns=cols), y, bounds


def test_iris_at_epsilon_3_is_never_one_cluster():
    """Iris (150 records, 4 columns) at epsilon 3 came back as one cluster in 1 of 5 seeds (diffprivlib told k:
    0.552): a map of 150 records cannot confirm a mode, so "one cluster" there was the budget not seeing. Now
    such a map is partitioned by a weighted k-means of its leaves, and the rule says so."""
    data, truth, bounds = _iris()
    aris = []
    for seed in range(1, 11):
        part, _ = fit(DPDensity(epsilon=3.0, bounds=bounds), data, seed=seed)
        assert part.n_clusters >= 2, seed
        aris.append(adjusted_rand_score(truth, part.labels))
    assert np.mean(aris) > 0.4  # setosa apart from the rest: 0.48 (2 clusters)


def test_a_small_unimodal_file_gets_two_clusters_and_the_rule_says_why():
    """150 uniform records: the map cannot test modes, so the fallback splits it in two, as stated in the
    diagnostics' rule and the effective n_clusters (a uniform file is not clustered: the rule must not claim
    two modes)."""
    rng = np.random.default_rng(5)
    data = pd.DataFrame(rng.uniform(0, 20, (150, 2)), columns=["x", "y"])
    part, _ = fit(DPDensity(epsilon=1.0, bounds={"x": [0.0, 20.0], "y": [0.0, 20.0]}), data)
    dg = part.diagnostics
    assert part.n_clusters == 2
    assert dg["rule"].startswith("the map is too small to test modes: weighted k-means of its leaves, k = 2")
    assert "2 even on one mode" in dg["rule"]
    assert dg[privclust.EFFECTIVE_PARAMS]["n_clusters"] == 2
    power = dg["mode_test_power"]
    assert power["reference_dip"] <= power["confirmable_dip"]


@pytest.mark.parametrize("kind", ["uniform", "gaussian"])
def test_a_large_unimodal_file_keeps_one_cluster_and_its_map_has_power(kind):
    """100,000 records of one mode: the map has the power to confirm a cluster of 10% of the records, so the
    tests' one cluster stands (the fallback never runs on such a map)."""
    rng = np.random.default_rng(11)
    values = rng.uniform(0, 20, (100_000, 2)) if kind == "uniform" else rng.normal(10, 2.5, (100_000, 2))
    part, _ = fit(DPDensity(epsilon=1.0, bounds={"x": [0.0, 20.0], "y": [0.0, 20.0]}),
                  pd.DataFrame(values, columns=["x", "y"]))
    power = part.diagnostics["mode_test_power"]
    assert part.n_clusters == 1 and part.diagnostics["rule"] == "automatic"
    assert power["reference_dip"] > 2 * power["confirmable_dip"]


def test_the_small_map_fallback_reads_the_released_map_only():
    """Post-processing: the clusters are a function of the released map (cluster_map on the leaves and noisy
    counts in the diagnostics gives the same leaf labels again), and each record takes its leaf's label."""
    data, _, bounds = _iris()
    part, _ = fit(DPDensity(epsilon=3.0, bounds=bounds), data, seed=2)
    dg = part.diagnostics
    assert dg["rule"].startswith("the map is too small to test modes")
    low = np.array([bounds[c][0] for c in data.columns])
    span = np.array([bounds[c][1] - bounds[c][0] for c in data.columns])
    lo, hi = (dg["leaf_low"] - low) / span, (dg["leaf_high"] - low) / span
    depth = np.rint(np.log2(1.0 / np.prod(hi - lo, axis=1))).astype(np.int64)
    eps_leaf = dg["epsilon_leaves"]
    again = [cluster_map(lo, hi, depth, dg["leaf_noisy_counts"], n_est=max(dg["n_noisy"], 1.0), eps_leaf=eps_leaf,
                         false_peak=0.05, min_fraction=0.005, n_clusters=None)["leaf_labels"] for _ in range(2)]
    np.testing.assert_array_equal(again[0], dg["leaf_labels"])
    np.testing.assert_array_equal(again[1], dg["leaf_labels"])
    tree = _privtree.Tree(lo=lo, hi=hi, depth=depth, counts=dg["leaf_noisy_counts"], nodes=0, truncated=False)
    unit = np.clip((data.to_numpy() - low) / span, 0.0, 1.0)
    np.testing.assert_array_equal(part.labels, dg["leaf_labels"][_privtree.leaf_of(unit, tree)])


def test_unimodal_bisect_splits_one_mode_in_two_and_clear_groups_further():
    """One uniform square of leaves: two clusters (the stated floor), never more; three far-apart groups of
    leaves: three. The split share of a uniform line is 3/4 (Khintchine's bound for one symmetric mode)."""
    from privclust_plugins._dp_map import _split_share, unimodal_bisect

    n, lo, hi = _square_grid(32)
    centres = 0.5 * (lo + hi)
    rng = np.random.default_rng(0)
    w = rng.poisson(20, n * n).astype(float)
    assert unimodal_bisect(centres, w).max() == 1
    groups = np.vstack([c + 0.02 * rng.standard_normal((40, 2)) for c in ([0.2, 0.2], [0.8, 0.2], [0.5, 0.8])])
    labels = unimodal_bisect(groups, np.full(120, 10.0))
    assert labels.max() == 2
    assert adjusted_rand_score(np.repeat([0, 1, 2], 40), labels) == 1.0
    line = np.column_stack([np.linspace(0, 1, 10_001), np.zeros(10_001)])
    assert math.isclose(_split_share(line, np.ones(10_001), (line[:, 0] > 0.5).astype(int)), 0.75, abs_tol=1e-3)
    assert unimodal_bisect(centres[:1], w[:1]).tolist() == [0]  # one leaf: nothing to split
# issue 26: the ellipse pass
# ---------------------------------------------------------------------------

def test_ellipticity_is_one_for_any_ellipse_and_grows_for_a_crescent():
    """The volume of the ellipse of the same second moments over the level
    set's own: about 1 for a disc and for an ellipse 4 times longer than wide
    (where roundness reads 2.1), 1.047 for a rectangle, well above 1 for a
    crescent."""
    n, lo, hi = _square_grid(128)
    c = 0.5 * (lo + hi) - 0.5
    everything = np.arange(n * n)
    disc = ((c ** 2).sum(axis=1) < 0.3 ** 2).astype(float)
    ellipse = (((c[:, 0] / 0.4) ** 2 + (c[:, 1] / 0.1) ** 2) < 1).astype(float)
    bar = ((np.abs(c[:, 0]) < 0.4) & (np.abs(c[:, 1]) < 0.1)).astype(float)
    r = np.sqrt((c ** 2).sum(axis=1))
    crescent = ((r > 0.3) & (r < 0.4) & (c[:, 1] > 0)).astype(float)
    assert _privtree.ellipticity(disc, lo, hi, everything, 0.5) == pytest.approx(1.0, abs=0.01)
    assert _privtree.ellipticity(ellipse, lo, hi, everything, 0.5) == pytest.approx(1.0, abs=0.02)
    assert _privtree.roundness(ellipse, lo, hi, everything, 0.5) == pytest.approx(2.1, abs=0.05)
    assert _privtree.ellipticity(bar, lo, hi, everything, 0.5) == pytest.approx(math.pi / 3, abs=0.01)
    assert _privtree.ellipticity(crescent, lo, hi, everything, 0.5) > 2.0
    assert _privtree.ellipticity(disc, lo, hi, everything, 2.0) == math.inf


#: Draw 10 of the benchmark's mixture family (sd 4, 20,000 records each): components 0 and 3, 2.22 sd apart, form
#: one elongated mode; component 4 is 2.68 sd from 0, with a saddle at about 0.8 of its peak.
DRAW_10 = [[24.3, 62.9], [45.7, 43.3], [55.9, 56.0], [21.5, 71.3], [20.9, 52.7]]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_mode_beside_a_pair_that_forms_one_is_its_own_cluster(seed, monkeypatch):
    """Component 4 of the mixture family's draw 10 holds 0.43% of N~ above its
    saddle with the pair (0, 3), under the first pass's excess test (0.6%), so
    the three were one cluster (ARI 0.464 against the mode ceiling's 0.787);
    with the ellipse pass it is a cluster of its own. Without the pass (its
    excess test as strict as the first pass's) it is not."""
    rng = np.random.default_rng(0)
    truth = np.repeat(np.arange(5), 20_000)
    data = pd.DataFrame(np.asarray(DRAW_10)[truth] + rng.normal(0, 4.0, (truth.size, 2)), columns=["x", "y"])
    bounds = {"x": [0.0, 100.0], "y": [0.0, 100.0]}

    def alone(labels):  # the share of component 4 in a cluster that holds under 10% of the pair (0, 3)
        own = np.bincount(labels[truth == 4]).argmax()
        return np.mean(labels[truth == 4] == own), np.mean(labels[np.isin(truth, [0, 3])] == own)

    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds), data, seed=seed)
    mine, theirs = alone(part.labels)
    assert mine > 0.8 and theirs < 0.1  # the Bayes rule puts Phi(1.34) = 0.91 of it on its side of the pair
    assert part.diagnostics["refined_clusters"] >= 1
    monkeypatch.setattr("privclust_plugins._dp_map.ELLIPSE_EXCESS", 1.0)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds), data, seed=seed)
    assert alone(part.labels)[1] > 0.9  # one cluster with the pair


def test_the_coarse_pass_keeps_its_valley_rule_when_none_is_given(monkeypatch):
    """The coarse pass has no excess test; its valley rule (0.7) is what keeps
    it from splitting a shape at the bumps the wide kernel leaves. Read as 1
    (no ratio rule) when the user gives no valley, it split two of the
    spiral's arms at epsilon 2, seed 2 (5 clusters, ARI 0.752)."""
    data, y, bounds = shape("spiral", 100_000)
    part, _ = fit(DPDensity(epsilon=2.0, bounds=bounds), data, seed=2)
    assert part.n_clusters == 3 and adjusted_rand_score(y, part.labels) > 0.99
    monkeypatch.setattr("privclust_plugins._dp_map.COARSE_VALLEY", 1.0)
    part, _ = fit(DPDensity(epsilon=2.0, bounds=bounds), data, seed=2)
    assert part.n_clusters > 3
# issue 26: n_clusters on scikit-learn's real sets drawn up to 100,000 records
# ---------------------------------------------------------------------------


def test_merge_to_joins_a_small_bump_before_two_large_modes():
    """Two large modes that meet high (A: leaves 0-2, C: leaves 3-6, saddle
    6 of peaks 10) and a small bump B (leaf 7) behind a deep valley (0.5 of
    its peak 5). Merging by the shallowest valley (the rule before issue 26)
    joined A and C and kept the bump, as it kept wine's bumps and merged two
    of its classes when told k = 3 (ARI 0.19); Ward's criterion joins the
    bump to the mode it touches."""
    f = np.array([8.0, 10.0, 6.0, 6.0, 10.0, 8.0, 0.5, 5.0])
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2])
    pairs = (np.arange(7), np.arange(1, 8))
    centres = np.arange(8.0)[:, None]
    merged, _ = _merge_to(labels, [0.0] * 3, f, pairs, 2, centres, f)
    np.testing.assert_array_equal(merged, [0, 0, 0, 1, 1, 1, 1, 1])
    # clusters that do not touch are not merged while touching ones are left: the bump alone in empty space stays
    apart = (np.array([0, 1, 2, 3, 4, 5]), np.array([1, 2, 3, 4, 5, 6]))
    merged, _ = _merge_to(labels, [0.0] * 3, f, apart, 2, centres, f)
    np.testing.assert_array_equal(merged, [0, 0, 0, 0, 0, 0, 0, 1])


def _iris_up(n=100_000, seed=0):
    """iris drawn up to ``n`` records with jitter of 1% of its widest range (the benchmark's ``real_up``)."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(seed)
    span = float((X.max(axis=0) - X.min(axis=0)).max())
    pick = rng.integers(0, len(X), n)
    cols = [f"x{j}" for j in range(4)]
    lo, hi = X.min(axis=0), X.max(axis=0)
    bounds = {c: [float(np.floor(lo[j] - 0.1 * span)), float(np.ceil(hi[j] + 0.1 * span))] for j, c in enumerate(cols)}
    return pd.DataFrame(X[pick] + rng.normal(0, 0.01 * span, (n, 4)), columns=cols), y[pick], bounds


def test_n_clusters_splits_the_widest_mode_not_a_compact_one():
    """iris drawn up to 100,000 records, epsilon 1, seed 3: the map resolves
    two modes (setosa; versicolor and virginica together). Told k = 3 the step
    took the 3 branches of largest excess of mass of its level-set tree, two
    of them bumps of setosa (21,529 and 11,716 records), and kept the wide
    mode whole (ARI 0.456); it now bisects the widest cluster (weighted sum of
    squares) by weighted 2-means: setosa stays whole."""
    data, truth, bounds = _iris_up()
    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds, n_clusters=3), data, seed=3)
    labels = np.asarray(part.labels)
    assert part.n_clusters == 3 and part.diagnostics["rule"].startswith("density clusters split by weighted 2-means")
    setosa = np.bincount(labels[truth == 0], minlength=3)
    assert setosa.max() >= 0.95 * setosa.sum()
    assert adjusted_rand_score(truth, labels) > 0.55


def test_kmeans_refine_moves_a_boundary_into_a_valley_but_not_across_a_shape():
    """Told k, the density clusters are refined by Lloyd's iterations only
    when the refined boundaries cut through no more density (wine drawn up
    with jitter, 4 columns: ARI 0.79 -> 0.90 told k = 3). On a line of 100
    leaves: two bumps meeting in a valley at 0.5, split at 0.35 (through the
    first bump), are refined to the valley; a long bar and a short one across
    an empty gap keep their density clusters (k-means would cut the long bar
    at 0.5, where the density is not 0)."""
    edges = np.linspace(0.0, 1.0, 101)
    lo, hi = edges[:-1, None], edges[1:, None]
    x = 0.5 * (lo[:, 0] + hi[:, 0])
    pairs = (np.arange(99), np.arange(1, 100))
    bumps = np.exp(-0.5 * ((x - 0.25) / 0.07) ** 2) + np.exp(-0.5 * ((x - 0.75) / 0.07) ** 2)
    refined = _dp_map.kmeans_refine((x > 0.35).astype(np.int64), x[:, None], bumps, bumps, lo, hi, pairs)
    assert refined is not None
    np.testing.assert_array_equal(refined, (x > 0.5).astype(np.int64))
    assert _dp_map.boundary_density(refined, bumps, lo, hi, pairs) < _dp_map.boundary_density(
        (x > 0.35).astype(np.int64), bumps, lo, hi, pairs)
    bars = np.where(x < 0.6, 1.0, 0.0) + np.where((x > 0.65) & (x < 0.75), 1.0, 0.0)
    by_density = (x > 0.6).astype(np.int64)
    assert _dp_map.boundary_density(by_density, bars, lo, hi, pairs) == 0.0
    assert _dp_map.kmeans_refine(by_density, x[:, None], bars, bars, lo, hi, pairs) is None


def test_told_k_a_light_bump_gives_way_to_a_split_of_two_overlapping_classes_but_a_far_small_cluster_stays():
    """absorb_small (issue 26, iris drawn up with jitter told k = 3: a dense bump of 0.7-2.7% of the records kept
    one of the 3 clusters while versicolor and virginica stayed one; ARI 0.628 -> 0.707). On a line of 200
    leaves: a class apart at 0.1, two overlapping classes at 0.5 and 0.62, and a narrow bump of 2% at 0.8 touching
    them; told k = 3 with the bump as a cluster, the bump joins its neighbour and the overlapping pair is split.
    A 1% cluster across empty space (a 1:100 imbalance, k = 2) stays: the swap keeps most of the sum of squares."""
    edges = np.linspace(0.0, 1.0, 201)
    lo, hi = edges[:-1, None], edges[1:, None]
    x = 0.5 * (lo[:, 0] + hi[:, 0])
    pairs = (np.arange(199), np.arange(1, 200))

    def bump(at, sd, mass):
        g = np.exp(-0.5 * ((x - at) / sd) ** 2)
        return mass * g / g.sum()

    w = bump(0.1, 0.03, 0.33) + bump(0.5, 0.05, 0.33) + bump(0.62, 0.05, 0.32) + bump(0.8, 0.008, 0.02)
    labels = np.where(x < 0.25, 0, np.where(x < 0.76, 1, 2)).astype(np.int64)
    out, stability, swaps = _dp_map.absorb_small(labels, [1.0, 1.0, 1.0], 3, w, pairs, x[:, None], w, lo, hi)
    assert swaps == 1 and len(stability) == 3 and int(out.max()) + 1 == 3
    assert np.unique(out[x < 0.25]).size == 1 and out[np.argmin(abs(x - 0.8))] == out[np.argmin(abs(x - 0.62))]
    assert out[np.argmin(abs(x - 0.45))] != out[np.argmin(abs(x - 0.67))]
    far = bump(0.3, 0.05, 0.99) + bump(0.9, 0.01, 0.01)
    apart = (x > 0.7).astype(np.int64)
    kept, _, none = _dp_map.absorb_small(apart, [1.0, 1.0], 2, far, pairs, x[:, None], far, lo, hi)
    assert none == 0
    np.testing.assert_array_equal(kept, apart)
