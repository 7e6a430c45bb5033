"""Density-peak clusterers: kernels against brute force and pydpc, the spec's
sanity tables, honest accounting, bad input and the conformance kit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import adjusted_rand_score

import privclust
import privclust.datasets
import privclust.testing as pt
from privclust import BudgetExceededError, DataError, ParameterError, PrivacyLeakWarning
from privclust_plugins import _dpc, _dpc_centres, _dpc_dp
from privclust_plugins.density_peaks import DPC, DPDPCL, AdDPC, AdDPCrDP, DPrcCFSFDP
from privclust_plugins.dp_dpc_grid import DPDPCGrid

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def reference(X: np.ndarray, dc: float, kernel: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The spec's rules on the full distance matrix (the MATLAB loop)."""
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    rho = (D < dc).sum(1) - 1.0 if kernel == "cutoff" else np.exp(-((D / dc) ** 2)).sum(1) - 1.0
    order = np.argsort(-rho, kind="stable")
    n = len(X)
    delta = np.zeros(n)
    parent = np.full(n, -1)
    for ii in range(1, n):
        i = order[ii]
        earlier = order[:ii]
        a = int(np.argmin(D[i, earlier]))
        delta[i], parent[i] = D[i, earlier[a]], earlier[a]
    delta[order[0]] = np.delete(delta, order[0]).max()
    return rho, delta, parent


def fit(component, frame: pd.DataFrame, *, seed: int = 1, budget: float | None = None,
        allow_leaks: tuple[str, ...] = privclust.KNOWN_LEAKS):
    """Fit outside a recipe. The algorithm tests opt in to every data-derived
    parameter explicitly (the paper's percentage rules); the secure defaults
    are tested in test_dp_leaks.py."""
    registry = privclust.get_registry()
    context = privclust.PrivacyContext(privclust.Budget(epsilon=budget, allow_leaks=allow_leaks), seed=seed,
                                       registry=registry)
    with context.step(0, "dpc", component.name), warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        partition = component.fit(frame, context)
    return partition, context


def features(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="class")


@pytest.fixture(scope="module")
def iris():
    return privclust.datasets.iris()


@pytest.fixture(scope="module")
def aggregation():
    require_dataset("aggregation.data.gz")
    return privclust.datasets.load("aggregation")


@pytest.fixture(scope="module")
def flame():
    require_dataset("flame.data.gz")
    return privclust.datasets.load("flame")


# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------


@settings(deadline=None, max_examples=40)
@given(n=st.integers(3, 150), d=st.integers(1, 5), dc=st.floats(0.2, 1.5), seed=st.integers(0, 2**31),
       rounding=st.booleans(), duplicates=st.booleans(), kernel=st.sampled_from(["cutoff", "gaussian"]))
def test_kernels_match_the_reference_loop(n, d, dc, seed, rounding, duplicates, kernel):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if rounding:
        X = np.round(X, 1)  # equidistant pairs: the tie rules matter
    if duplicates:
        X[rng.integers(0, n, n // 2)] = X[0]
    rho_ref, delta_ref, parent_ref = reference(X, dc, kernel)
    U, inv, counts = _dpc.unique_points(X)
    index = _dpc.PairIndex(U, dc / 2)
    rho = _dpc.densities(U, dc, kernel, None, counts=counts, index=index)[inv]
    np.testing.assert_allclose(rho, rho_ref, rtol=0, atol=1e-10)
    delta, parent, _ = _dpc.delta_parent(X, rho_ref, index=index, unique=(U, inv, counts))
    np.testing.assert_array_equal(parent, parent_ref)
    np.testing.assert_allclose(delta, delta_ref, rtol=0, atol=1e-12)


def test_windowed_search_matches_the_tree_search_on_a_large_noisy_set():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30_000, 2))
    X[:500] = X[0]  # a heavy duplicate group
    rho = rng.normal(size=30_000)  # random order: many local maxima take the fallback paths
    U, inv, counts = _dpc.unique_points(X)
    index = _dpc.PairIndex(U, 0.02)
    windowed = _dpc.delta_parent(X, rho, index=index, unique=(U, inv, counts))
    tree_only = _dpc.delta_parent(X, rho, index=None, unique=(U, inv, counts))
    np.testing.assert_array_equal(windowed[1], tree_only[1])
    np.testing.assert_array_equal(windowed[0], tree_only[0])
    # the duplicates point to the group's earliest member (in density order) at distance 0
    group = np.arange(500)
    leader = group[np.argmax(rho[:500])]
    followers = group[group != leader]
    assert np.all(windowed[1][followers] == leader) and np.all(windowed[0][followers] == 0.0)


def test_truncated_gaussian_is_within_the_stated_bound():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2))
    dc = 0.1
    exact = _dpc.densities(X, dc, "gaussian", None)
    truncated = _dpc.densities(X, dc, "gaussian", 3.0)
    assert np.all(truncated <= exact + 1e-9)
    assert np.max(exact - truncated) <= (len(X) - 1) * math.exp(-9.0)
    # in 2-D, about exp(-T^2) of a locally uniform density's mass lies beyond T d_c (isolated points aside)
    assert np.median((exact - truncated)[exact > 0] / exact[exact > 0]) < 2 * math.exp(-9.0)


def test_cross_densities_and_tree_path_agree_with_brute_force():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))  # 5-D: the KD-tree path
    Q = rng.normal(size=(50, 5))
    D = np.sqrt(((Q[:, None] - X[None]) ** 2).sum(-1))
    np.testing.assert_allclose(_dpc.cross_densities(Q, X, 1.2, "cutoff", 3.0), (D < 1.2).sum(1))
    g = np.exp(-((D / 1.2) ** 2)) * (D <= 3.6)
    np.testing.assert_allclose(_dpc.cross_densities(Q, X, 1.2, "gaussian", 3.0), g.sum(1), atol=1e-12)
    X2 = rng.normal(size=(500, 2))
    Q2 = rng.normal(size=(60, 2)) * 2
    D2 = np.sqrt(((Q2[:, None] - X2[None]) ** 2).sum(-1))
    np.testing.assert_allclose(_dpc.cross_densities(Q2, X2, 0.3, "cutoff", 3.0), (D2 < 0.3).sum(1))


def test_percentage_rule_is_the_matlab_position_and_sampling_is_close():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2))
    from scipy.spatial.distance import pdist

    dist = np.sort(pdist(X))
    M = dist.size
    (dc,), info = _dpc.percent_distance(X, [2.0], None)
    assert info["method"] == "exact"
    assert dc == dist[int(round(M * 0.02 + 1e-9)) - 1]
    (est,), info = _dpc.percent_distance(X, [2.0], lambda: np.random.default_rng(0), exact_pairs=10)
    assert info["method"] == "sampled" and info["sample_pairs"] == _dpc.SAMPLE_PAIRS
    assert abs(est - dc) / dc < 0.02


def test_components_and_merges():
    X = np.array([[0.0], [0.5], [1.0], [5.0], [5.4], [9.0]])
    comp = _dpc_centres.components(X, 0.6)
    assert comp[0] == comp[1] == comp[2] and comp[3] == comp[4] and len({comp[0], comp[3], comp[5]}) == 3
    labels = np.array([0, 1, 1, 2, 2, 3])
    rank = np.array([2, 0, 1, 3, 4, 5])
    np.testing.assert_array_equal(_dpc_centres.merge_reachable(labels, comp, rank), [1, 1, 1, 2, 2, 3])
    centres = np.array([1, 0, 3, 5])  # label c is held by centres[c]
    merged = _dpc_centres.merge_centres(np.array([1, 0, 0, 2, 2, 3]), centres, comp, rank)
    np.testing.assert_array_equal(merged, [0, 0, 0, 2, 2, 3])


def test_addpc_boundary_slope_reading():
    g = np.array([1.0, 0.5, 0.45, 0.1, 0.09, 0.08, 0.0])
    m, kappa, order = _dpc_centres.addpc_boundary(g, 1.001, 50)
    # kappa_i = (i - 1.001)(g_i - g_{i+1}): i = 3 gives 1.999 * 0.35, the largest
    assert m == 3
    assert kappa.size == g.size - 2 and kappa[0] < 0
    np.testing.assert_allclose(kappa[2], 1.999 * 0.35)


def test_grid_sensitivity_bounds_the_worst_record():
    rng = np.random.default_rng(0)
    h, dc = 0.3, 0.5
    axes = np.arange(-10, 11) * h
    nodes = np.stack([a.ravel() for a in np.meshgrid(axes, axes, indexing="ij")], axis=1)
    for kernel in ("cutoff", "gaussian"):
        bound = _dpc_dp.grid_sensitivity(kernel, np.array([h, h]), dc)
        x = rng.uniform(-h, h, size=(2000, 2))
        worst = _dpc.cross_densities(x, nodes, dc, kernel, None).max()
        assert worst <= bound + 1e-9
        assert worst >= 0.7 * bound  # and it is not loose
    Q = rng.uniform(0, 1, size=(300, 3))
    x = rng.uniform(0, 1, size=(500, 3))
    for kernel in ("cutoff", "gaussian"):
        assert _dpc.cross_densities(x, Q, 0.2, kernel, 3.0).max() <= _dpc_dp.points_sensitivity(kernel, Q, 0.2, 3.0)


@pytest.mark.parametrize("r", [0.01, 0.1, 0.2, 0.2499, 0.25, 0.7])
def test_the_lattice_gaussian_sum_is_exact_and_cheap_for_fine_lattices(r):
    # below r = 0.25 the theta identity replaces a direct sum of 8 / r terms: both agree
    m = np.arange(-5000, 5001)
    assert _dpc_dp.lattice_gaussian_sum(r, 1.0) == pytest.approx(float(np.exp(-(m * r) ** 2).sum()), rel=1e-13)
    assert _dpc_dp.lattice_gaussian_sum(r * 1e-300, 1e-300) == pytest.approx(_dpc_dp.lattice_gaussian_sum(r, 1.0),
                                                                             rel=1e-12)


def test_a_sensitivity_beyond_a_double_is_refused_not_a_crash():
    # a spacing 1e-312 against d_c = 1: the Gaussian lattice sum sqrt(pi) / r overflows, the cutoff's count too
    assert _dpc_dp.lattice_gaussian_sum(1e-312, 1.0) == math.inf
    assert _dpc_dp.grid_sensitivity("cutoff", np.array([1e-312]), 1.0) == math.inf
    data = pd.DataFrame({"x": np.linspace(0, 10, 50), "y": np.linspace(0, 10, 50)})
    for kernel in ("gaussian", "cutoff"):
        recipe = {"steps": [{"use": "dp-dpc-grid", "epsilon": 1.0, "dc": 1.0, "n_clusters": 2, "kernel": kernel,
                             "bounds": {"x": [0, 1e-310], "y": [0, 10]}}]}
        with pytest.raises(ParameterError, match="density sensitivity is not a finite positive number"):
            privclust.run(recipe, data, seed=1)


# ---------------------------------------------------------------------------
# pydpc as an oracle, and the spec's sanity tables
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["aggregation", "flame"])
def test_matches_pydpc_on_rho_and_delta(name):
    require_dataset(f"{name}.data.gz")
    pydpc = pytest.importorskip("pydpc")
    frame = privclust.datasets.load(name)
    X = np.ascontiguousarray(features(frame).to_numpy())
    oracle = pydpc.Cluster(X, fraction=0.02, autoplot=False)
    part, _ = fit(DPC(dc=float(oracle.kernel_size), n_clusters=2, truncate=None), features(frame))
    np.testing.assert_allclose(part.diagnostics["rho"], oracle.density, rtol=0, atol=1e-12)
    np.testing.assert_allclose(part.diagnostics["delta"], oracle.delta, rtol=0, atol=1e-12)
    # pydpc's d_c is one position later than MATLAB's: the percentage rule differs by that position only
    (dc,), _ = _dpc.percent_distance(X, [2.0], None)
    assert dc <= oracle.kernel_size


def test_matches_pydpc_on_iris_except_the_duplicate_tie(iris):
    pydpc = pytest.importorskip("pydpc")
    X = np.ascontiguousarray(features(iris).to_numpy())
    oracle = pydpc.Cluster(X, fraction=0.025, autoplot=False)
    part, _ = fit(DPC(dc_percent=2.5, n_clusters=3, truncate=None), features(iris))
    assert part.diagnostics["dc"] == pytest.approx(oracle.kernel_size, abs=1e-15)
    np.testing.assert_allclose(part.diagnostics["rho"], oracle.density, rtol=0, atol=1e-12)
    # rows 101 and 142 are identical: the spec orders them by index (pydpc does not)
    tied = {83, 101, 113, 121, 142}
    keep = np.array([i not in tied for i in range(len(X))])
    np.testing.assert_allclose(part.diagnostics["delta"][keep], oracle.delta[keep], rtol=0, atol=1e-12)
    assert part.diagnostics["parent"][142] == 101 and part.diagnostics["delta"][142] == 0.0


@pytest.mark.parametrize(("name", "t", "k", "ari", "dc"), [
    ("iris", 2.5, 3, 0.6334, 0.3464),
    ("iris", 2.0, 3, 0.7592, 0.3162),
    ("aggregation", 2.5, 7, 0.7679, 2.089),
    ("aggregation", 2.0, 7, 0.9978, 1.860),
    ("flame", 2.0, 2, 0.3269, 0.930),
    ("flame", 2.5, 2, 0.5360, 1.055),
    ("flame", 3.0, 2, 1.0000, 1.134),
    ("wdbc", 1.5, 2, 0.3177, 29.81),
])
def test_noiseless_sanity_table(name, t, k, ari, dc):
    if name == "iris":
        frame = privclust.datasets.iris()
    elif name == "wdbc":
        frame = privclust.datasets.wdbc()
    else:
        require_dataset(f"{name}.data.gz")
        frame = privclust.datasets.load(name)
    part, _ = fit(DPC(dc_percent=t, n_clusters=k), features(frame))
    assert part.diagnostics["dc"] == pytest.approx(dc, rel=5e-4)
    assert adjusted_rand_score(frame["class"], part.labels) == pytest.approx(ari, abs=5e-5)


def test_cutoff_kernel_and_minmax_sanity(iris, aggregation):
    part, _ = fit(DPC(dc_percent=2.5, n_clusters=3, kernel="cutoff"), features(iris))
    assert adjusted_rand_score(iris["class"], part.labels) == pytest.approx(0.6056, abs=5e-5)
    part, _ = fit(DPC(dc_percent=2.5, n_clusters=7, kernel="cutoff"), features(aggregation))
    assert adjusted_rand_score(aggregation["class"], part.labels) == pytest.approx(0.6895, abs=5e-5)
    part, _ = fit(DPC(dc_percent=2.5, n_clusters=3, scale="minmax"), features(iris))
    assert adjusted_rand_score(iris["class"], part.labels) == pytest.approx(0.7196, abs=5e-5)


@pytest.mark.parametrize(("name", "t", "m"), [("iris", 2.0, 2), ("iris", 2.5, 2), ("aggregation", 2.0, 8),
                                               ("aggregation", 2.5, 3), ("flame", 2.0, 4), ("flame", 3.0, 2)])
def test_addpc_numbers_of_centres(name, t, m):
    if name != "iris":
        require_dataset(f"{name}.data.gz")
    frame = privclust.datasets.iris() if name == "iris" else privclust.datasets.load(name)
    part, _ = fit(AdDPC(dc_percent=t), features(frame))
    assert part.diagnostics["boundary"] == m == part.n_clusters
    assert part.diagnostics["kappa"].size == 50


def test_reachability_merge_repairs_flame(flame):
    comp = DPDPCL(dc_percent=2.5, radius_percent=1.0, scale="minmax", n_clusters=2, epsilon=1e12)
    part, _ = fit(comp, features(flame))
    assert part.diagnostics["n_components"] == 41
    assert part.diagnostics["radius"] == pytest.approx(0.0525, abs=5e-5)
    before = adjusted_rand_score(flame["class"], part.diagnostics["labels_before_merge"])
    assert before == pytest.approx(0.536, abs=5e-4)
    assert adjusted_rand_score(flame["class"], part.labels) == pytest.approx(0.967, abs=5e-4)


@pytest.mark.parametrize(("e", "components", "after"), [(0.5, 21, 0.800), (0.4, 48, 0.887)])
def test_merge_table_on_aggregation(aggregation, e, components, after):
    part, _ = fit(DPDPCL(dc_percent=2.5, radius_percent=e, n_clusters=7, epsilon=1e12), features(aggregation))
    assert part.diagnostics["n_components"] == components
    assert adjusted_rand_score(aggregation["class"], part.labels) == pytest.approx(after, abs=5e-4)


def test_halo_marks_border_points(aggregation):
    part, _ = fit(DPC(dc_percent=2.0, n_clusters=7, halo=True), features(aggregation))
    halo = part.diagnostics["halo"]
    assert 0 < halo.sum() < len(halo)
    assert np.all(part.labels[halo] == -1) and np.all(part.labels[~halo] >= 0)
    rho = part.diagnostics["rho"]
    before = part.diagnostics["labels_before_halo"]
    for c in range(7):  # the halo of a cluster is its low-density part
        inside = before == c
        if halo[inside].any() and (~halo[inside]).any():
            assert rho[inside & halo].max() < rho[inside & ~halo].min()


def test_decision_graph_thresholds(aggregation):
    base, _ = fit(DPC(dc_percent=2.0, n_clusters=7), features(aggregation))
    rho, delta = base.diagnostics["rho"], base.diagnostics["delta"]
    part, _ = fit(DPC(dc_percent=2.0, rho_min=float(np.median(rho)), delta_min=2.0), features(aggregation))
    chosen = part.diagnostics["centre_indices"]
    assert np.all(rho[chosen] > np.median(rho)) and np.all(delta[chosen] > 2.0)
    assert int(np.argmax(rho)) in chosen
    with pytest.raises(ParameterError, match="lower the thresholds"):
        fit(DPC(dc_percent=2.0, rho_min=1e9, delta_min=1e9), features(aggregation))


# ---------------------------------------------------------------------------
# diagnostics contract
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("component", [
    DPC(n_clusters=3), AdDPC(), DPDPCL(dc_percent=2.5, radius_percent=2.2), AdDPCrDP(), DPrcCFSFDP(n_clusters=3),
])
def test_diagnostics_contract(iris, component):
    part, _ = fit(component, features(iris))
    n = len(iris)
    d = part.diagnostics
    for key in ("rho", "delta", "gamma", "parent"):
        assert d[key].shape == (n,)
    assert (d["parent"] == -1).sum() == 1
    assert d["centre_indices"].shape == (d["n_centres"],)
    assert d["dc"] > 0
    assert part.centres.shape == (part.n_clusters, 4)
    np.testing.assert_array_equal(part.centres, iris.iloc[d["cluster_centre_indices"], :4].to_numpy())
    assert set(np.unique(part.labels)) == set(range(part.n_clusters))
    if component.automatic and component.n_clusters is None:
        assert d["boundary"] == d["n_centres"] and "kappa" in d
    if component.name in ("dp-dpcl", "dp-rccfsfdp"):
        assert d["labels_before_merge"].shape == (n,) and d["radius"] > 0


def test_grid_diagnostics_contract(aggregation):
    comp = DPDPCGrid(dc=1.5, epsilon=5.0, bounds={"x0": [0, 40], "x1": [0, 30]}, points_per_dim=40, radius=1.0)
    part, ctx = fit(comp, features(aggregation))
    d = part.diagnostics
    G = d["grid_points"].shape[0]
    assert d["grid_points"].shape == (1600, 2) and d["rho"].shape == (G,)
    assert np.all(d["support"][d["centre_indices"]])
    assert part.labels.shape == (len(aggregation),) and np.all(part.labels >= 0)
    assert d["labels_before_merge"].shape == (len(aggregation),)
    np.testing.assert_allclose(part.centres, d["grid_points"][d["cluster_centre_indices"]])
    assert adjusted_rand_score(aggregation["class"], part.labels) > 0.5
    assert ctx.spent == (5.0, 0.0)


# ---------------------------------------------------------------------------
# accounting
# ---------------------------------------------------------------------------


def test_paper_mechanism_ledger_is_honest(iris):
    part, ctx = fit(DPDPCL(dc_percent=2.5, radius_percent=2.2, epsilon=1.0), features(iris))
    dp = ctx.ledger.of_kind("dp")
    assert len(dp) == 1
    entry = dp[0]
    n = len(iris)
    assert entry.claimed_epsilon == 1.0
    assert entry.epsilon == 2 * (n - 1) and entry.sensitivity == 2 * (n - 1)
    assert ctx.spent[0] == 2 * (n - 1)
    assert "not a post-processing" in entry.not_covered and "labels" in entry.not_covered
    details = entry.details
    # the figure for the data at hand is the largest raw density, which one record moves: diagnostics only
    assert "vector_sensitivity_data_at_hand_removal" not in details and "epsilon_data_at_hand" not in details
    assert part.diagnostics["accounting"]["vector_sensitivity_data_at_hand_removal"] == pytest.approx(13.49, abs=0.01)
    assert details["vector_sensitivity_worst_case_add_remove_common_coordinates"] == n - 1
    assert details["noise_scale"] == 1.0
    statement = ctx.ledger.of_kind("guarantee")[0].statement
    assert "13.49" not in statement and "no guarantee" in statement and "298" in statement
    assert not any("13.49" in e.statement or "13.5" in str(e.details) for e in ctx.ledger)
    leaks = {e.mechanism for e in ctx.ledger.of_kind("leak")}
    assert leaks == {"dc_percent", "radius_percent"}
    # the noisy densities are what the diagnostics show
    exact, _ = fit(AdDPC(dc_percent=2.5), features(iris))
    noise = part.diagnostics["rho"] - exact.diagnostics["rho"]
    assert 0.3 < np.mean(np.abs(noise)) < 2.0  # Lap(1): mean |noise| = 1


def test_vector_calibration_holds_the_claim(iris):
    part, ctx = fit(AdDPCrDP(epsilon=2.0, calibration="vector", dc=0.35), features(iris))
    entry = ctx.ledger.of_kind("dp")[0]
    assert entry.epsilon == 2.0 and ctx.spent[0] == 2.0
    assert entry.details["noise_scale"] == pytest.approx(298 / 2.0)
    assert not ctx.ledger.of_kind("leak")  # absolute d_c: nothing leaks
    assert "no utility" in ctx.ledger.of_kind("guarantee")[0].statement


def test_over_budget_is_refused_before_anything(iris):
    comp = DPDPCL(dc_percent=2.5, radius_percent=2.2, epsilon=1.0)
    registry = privclust.get_registry()
    context = pt._TracingContext(privclust.Budget(epsilon=100.0), seed=1, registry=registry)
    with context.step(0, "s", comp.name), pytest.raises(BudgetExceededError, match="no noise was drawn"):
        comp.fit(features(iris), context)
    assert not context.ledger.entries and "rng" not in context.events
    # the same run fits a budget of 298 exactly
    _, ctx = fit(comp, features(iris), budget=298.0)
    assert ctx.spent[0] == 298.0


def test_recipe_run_charges_the_honest_figure(iris):
    recipe = {"privacy": {"epsilon": 1000.0, "allow_leaks": ["dc_percent", "radius_percent"]},
              "steps": [{"use": "dp-dpcl", "dc_percent": 2.5, "radius_percent": 2.2, "epsilon": 1.0,
                         "columns": ["sepal_length", "sepal_width", "petal_length", "petal_width"]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release = privclust.run(recipe, iris, seed=3)
    assert release.spent[0] == 298.0
    assert release.labels["cluster"].nunique() >= 2
    # the planned cost (at least epsilon) is checked when the recipe is compiled
    with pytest.raises(privclust.RecipeError, match="budget"):
        privclust.compile({"privacy": {"epsilon": 0.5}, "steps": [{"use": "dp-dpcl", "epsilon": 1.0}]})


def test_grid_variant_is_dp_with_n_free_sensitivity(aggregation):
    comp = DPDPCGrid(dc=1.5, epsilon=1.0, bounds={"x0": [0, 40], "x1": [0, 30]}, points_per_dim=30)
    _, ctx = fit(comp, features(aggregation))
    _, ctx_half = fit(comp, features(aggregation).iloc[::2])
    entry, entry_half = ctx.ledger.of_kind("dp")[0], ctx_half.ledger.of_kind("dp")[0]
    assert entry.sensitivity == entry_half.sensitivity  # independent of n
    assert entry.epsilon == 1.0 and entry.claimed_epsilon is None
    assert "joint-DP" in entry.not_covered and not ctx.ledger.of_kind("leak")
    spacing = 40 / 29
    grid = _dpc_dp.grid_sensitivity("gaussian", np.array([spacing, 30 / 29]), 1.5)
    assert entry.sensitivity == pytest.approx(2 * grid)
    _, leaky = fit(DPDPCGrid(dc_percent=2.0, epsilon=1.0, bounds="data"), features(aggregation))
    assert {e.mechanism for e in leaky.ledger.of_kind("leak")} == {"bounds", "dc_percent"}


def test_grid_random_queries_in_higher_dimensions(iris):
    bounds = {c: [0.0, 8.0] for c in iris.columns[:4]}
    comp = DPDPCGrid(dc=0.8, epsilon=1.0, bounds=bounds, query="random", n_points=2000, n_clusters=3)
    part, ctx = fit(comp, features(iris))
    assert part.diagnostics["grid_points"].shape == (2000, 4)
    assert ctx.ledger.of_kind("dp")[0].details["query"] == "random"
    assert part.n_clusters <= 3


FAR_STEPS = {
    "public": {"dc": 1.0, "bounds": {"x": [0, 10], "y": [0, 10]}, "points_per_dim": 20, "n_clusters": 2},
    "public-minmax-random": {"dc": 0.1, "bounds": {"x": [0, 10], "y": [0, 10]}, "scale": "minmax",
                             "query": "random", "n_points": 300, "n_clusters": 2},
    "dp-bounds-and-dc": {"dc": "dp", "dc_epsilon": 0.5, "bounds": "dp", "bounds_epsilon": 0.5,
                         "bounds_range": {"x": [-100, 100], "y": [-100, 100]}, "points_per_dim": 20,
                         "kernel": "cutoff"},
}


@pytest.mark.parametrize("step", FAR_STEPS.values(), ids=FAR_STEPS.keys())
def test_grid_releases_on_the_neighbour_with_one_far_record(step):
    """Replace-one neighbours D and D' (one record moved to x = 1e200, or
    -1e308) both release, with the same charge and the same ledger text: the
    far record is clipped to the public margin, not refused."""
    rng = np.random.default_rng(0)
    D = pd.DataFrame(rng.uniform(0, 10, (300, 2)), columns=["x", "y"])
    recipe = {"steps": [{"use": "dp-dpc-grid", "epsilon": 1.0, **step}]}
    base = privclust.run(recipe, D, seed=1)
    runs = {}
    for far in (1e200, -1e308, 1e3):
        Dp = D.copy()
        Dp.iloc[0, 0] = far
        runs[far] = privclust.run(recipe, Dp, seed=1)
        assert runs[far].spent == base.spent
        assert len(runs[far].ledger.of_kind("dp")) == len(base.ledger.of_kind("dp"))
        assert [(e.kind, e.statement) for e in runs[far].ledger if e.kind != "process"] == \
            [(e.kind, e.statement) for e in base.ledger if e.kind != "process"]
        assert runs[far].labels["cluster"].notna().all()
    # Beyond the margin a record adds nothing to any node: at 1e200, -1e308 (other side) and 1e3 alike.
    margin = base.step(0).diagnostics["accounting"]["clip_margin"]
    assert 0 < margin < 1e3
    rho = runs[1e200].step(0).diagnostics["rho"]
    np.testing.assert_array_equal(rho, runs[1e3].step(0).diagnostics["rho"])
    np.testing.assert_array_equal(rho, runs[-1e308].step(0).diagnostics["rho"])
    assert "clipped to the bounds widened by" in base.ledger.of_kind("guarantee")[0].statement


def test_grid_far_record_refused_only_when_the_scales_come_from_the_data():
    rng = np.random.default_rng(0)
    D = pd.DataFrame(rng.uniform(0, 10, (100, 2)), columns=["x", "y"])
    D.iloc[0, 0] = 1e200
    with pytest.raises(DataError, match=r"column\(s\) x span more than"):
        fit(DPDPCGrid(dc=1.0, bounds="data", points_per_dim=10), D)
    with pytest.raises(DataError, match=r"column\(s\) x span more than"):
        fit(DPDPCGrid(dc_percent=2.0, bounds={"x": [0, 10], "y": [0, 10]}, points_per_dim=10), D)
    part, ctx = fit(DPDPCGrid(dc=1.0, bounds={"x": [0, 10], "y": [0, 10]}, points_per_dim=10), D)
    region = ctx.ledger.of_kind("dp")[0].details["clip_region"]
    assert region == {"x": [-30.0, 40.0], "y": [-30.0, 40.0]}  # bounds widened by 30 d_c: public
    # labelled from its clipped position (40, y): the node nearest to it (on a grid, the edge node x = 10
    # nearest in y), else the nearest clustered node
    nodes, node_labels = part.diagnostics["grid_points"], part.diagnostics["node_labels"]
    clipped = np.array([40.0, D.iloc[0, 1]])
    nearest = int(np.argmin(((nodes - clipped) ** 2).sum(1)))
    assert nodes[nearest, 0] == 10
    clustered = np.flatnonzero(node_labels >= 0)
    expected = node_labels[nearest] if node_labels[nearest] >= 0 else \
        node_labels[clustered[np.argmin(((nodes[clustered] - clipped) ** 2).sum(1))]]
    assert part.labels[0] == expected


def test_noise_mechanism_is_swappable(iris):
    comp = DPDPCL(dc_percent=2.5, radius_percent=2.2, kernel="cutoff", noise="geometric")
    part, ctx = fit(comp, features(iris))
    assert ctx.ledger.of_kind("dp")[0].mechanism == "geometric"
    assert np.all(part.diagnostics["rho"] == np.round(part.diagnostics["rho"]))


def test_seeded_runs_repeat_and_differ_across_seeds(iris):
    comp = AdDPCrDP(dc_percent=2.5, epsilon=0.5)
    a, _ = fit(comp, features(iris), seed=1)
    b, _ = fit(comp, features(iris), seed=1)
    c, _ = fit(comp, features(iris), seed=2)
    np.testing.assert_array_equal(a.diagnostics["rho"], b.diagnostics["rho"])
    assert not np.array_equal(a.diagnostics["rho"], c.diagnostics["rho"])


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "kwargs", "match"), [
    (DPC, {"n_clusters": 2, "dc_percent": 0.0}, "dc_percent"),
    (DPC, {"n_clusters": 2, "dc_percent": 100.0}, "dc_percent"),
    (DPC, {"n_clusters": 2, "dc": -1.0}, "dc"),
    (DPC, {"n_clusters": 2, "dc": 1.0, "dc_percent": 2.0}, "not both"),
    (DPC, {}, "choose the centres"),
    (DPC, {"rho_min": 1.0}, "both"),
    (DPC, {"n_clusters": 0}, "'n_clusters'"),
    (DPDPCL, {"epsilon": 0.0}, "epsilon"),
    (DPDPCL, {"radius": 0.0}, "radius"),
    (DPDPCL, {"radius_percent": 120.0}, "radius_percent"),
    (DPDPCL, {"radius": 1.0, "radius_percent": 1.0}, "not both"),
    (DPDPCL, {"calibration": "rough"}, "calibration"),
    (DPDPCL, {"kernel": "epanechnikov"}, "kernel"),
    (DPDPCGrid, {"bounds": "somewhere"}, "bounds"),
    (DPDPCGrid, {"points_per_dim": 10, "spacing": 0.1}, "not both"),
])
def test_bad_parameters(cls, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        cls(**kwargs)


def test_bad_data(frame):
    with pytest.raises(ParameterError, match="at most the number of records"):
        fit(DPC(n_clusters=500), frame)
    with pytest.raises(DataError, match="at least 3 records"):
        fit(DPC(n_clusters=1), frame.iloc[:2])
    bad = frame.copy()
    bad.iloc[3, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        fit(AdDPC(), bad)
    constant = pd.DataFrame({"a": np.ones(50), "b": np.ones(50)})
    with pytest.raises(DataError, match="duplicate"):
        fit(AdDPC(), constant)
    with pytest.raises(DataError, match="no public bounds"):
        fit(DPDPCGrid(dc=1.0, bounds={"a": [0, 1]}), frame)


def test_duplicate_heavy_and_constant_data_never_crash():
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(5, 2)), 40, axis=0)
    frame = pd.DataFrame(X, columns=["a", "b"])
    part, _ = fit(AdDPC(dc=0.5), frame)
    again, _ = fit(AdDPC(dc=0.5), frame)
    np.testing.assert_array_equal(part.labels, again.labels)
    for group in range(5):  # identical records share a cluster
        assert np.unique(part.labels[group * 40:(group + 1) * 40]).size == 1
    constant = pd.DataFrame({"a": np.zeros(30), "b": np.zeros(30)})
    part, _ = fit(DPC(dc=1.0, n_clusters=1), constant)
    assert np.all(part.labels == 0)
    part, _ = fit(DPDPCL(dc=1.0, radius=0.5), constant)
    assert part.labels.shape == (30,) and part.n_clusters == 1  # one E-component: the merge joins everything


# ---------------------------------------------------------------------------
# conformance
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("component", [
    DPC(n_clusters=3), DPC(dc_percent=5.0, rho_min=1.0, delta_min=1.0, halo=True),
    AdDPC(kernel="cutoff", dc_percent=5.0), DPDPCL(dc=0.6, radius=0.5),
    AdDPCrDP(n_clusters=3, calibration="vector", dc=0.6),
    DPrcCFSFDP(n_clusters=3, radius=0.5, dc=0.6),
    DPDPCGrid(dc=1.0, points_per_dim=12, n_clusters=3, bounds={c: [-2, 8] for c in "abc"}),
], ids=lambda c: c.name)
def test_conformance(component, frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        pt.check_component(component, frame)


def test_registered_by_name(registry):
    names = set(registry.names("clusterers"))
    assert {"dpc", "addpc", "dp-dpcl", "addpc-rdp", "dp-rccfsfdp", "dp-dpc-grid"} <= names


def test_threaded_passes_match_the_single_thread(monkeypatch):
    # Small data on the threaded path: lower the threshold rather than use 120,000 points.
    monkeypatch.setattr(_dpc, "PARALLEL_MIN_RECORDS", 500)
    spans = []
    in_parallel = _dpc._in_parallel

    def counting(part, n, workers):
        def recorded(span):
            spans.append(span)
            return part(span)
        return in_parallel(recorded, n, workers)

    monkeypatch.setattr(_dpc, "_in_parallel", counting)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3_000, 2))
    U, inv, counts = _dpc.unique_points(X)
    index = _dpc.PairIndex(U, 0.05)
    one = _dpc.densities(U, 0.1, "gaussian", 3.0, counts=counts, index=index, workers=1)
    assert spans == [None]
    two = _dpc.densities(U, 0.1, "gaussian", 3.0, counts=counts, index=index, workers=2)
    assert len(spans) == 3 and None not in spans[1:]  # the threaded path ran, in two spans
    np.testing.assert_allclose(one, two, rtol=1e-13)
    noisy = one + rng.laplace(size=one.size)
    d1, p1, _ = _dpc.delta_parent(X, noisy, index=index, unique=(U, inv, counts), workers=1)
    d2, p2, _ = _dpc.delta_parent(X, noisy, index=index, unique=(U, inv, counts), workers=2)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(d1, d2)
    assert len(spans) > 5  # delta_parent's search ran threaded too


def test_components_with_a_reused_index_and_in_more_columns():
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import pdist, squareform

    rng = np.random.default_rng(8)
    for d in (2, 5):
        X = rng.normal(size=(600, d))
        r = 0.35 if d == 2 else 1.2
        _, expected = connected_components(squareform(pdist(X)) <= r, directed=False)
        unique = _dpc.unique_points(X)
        for index in (None, _dpc.PairIndex(unique[0], r / 3)):
            comp = _dpc_centres.components(X, r, unique=unique, index=index)
            # the same partition, whatever the numbering
            assert adjusted_rand_score(expected, comp) == 1.0
            assert np.unique(comp).size == np.unique(expected).size


@pytest.mark.parametrize("factor", [1e-7, 1e7])
def test_results_do_not_depend_on_the_units(aggregation, factor):
    X = features(aggregation)
    base, _ = fit(AdDPC(dc_percent=2.0), X)
    scaled, _ = fit(AdDPC(dc_percent=2.0), X * factor)
    np.testing.assert_array_equal(base.labels, scaled.labels)
    # equal up to pairs sitting exactly on the truncation radius 3 d_c (rounding decides those)
    np.testing.assert_allclose(scaled.diagnostics["rho"], base.diagnostics["rho"], rtol=1e-9, atol=3 * math.exp(-9))


def test_far_outliers_fall_back_to_the_tree():
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(300, 2)), [[1e15, -1e15]]])
    rho_ref, delta_ref, parent_ref = reference(X, 0.3, "cutoff")
    U, inv, counts = _dpc.unique_points(X)
    index = _dpc.PairIndex(U, 0.15)
    np.testing.assert_array_equal(_dpc.densities(U, 0.3, "cutoff", counts=counts, index=index)[inv], rho_ref)
    delta, parent, _ = _dpc.delta_parent(X, rho_ref, index=index, unique=(U, inv, counts))
    np.testing.assert_array_equal(parent, parent_ref)


def test_threaded_sum_over_the_tree_path(monkeypatch):
    monkeypatch.setattr(_dpc, "PARALLEL_MIN_RECORDS", 500)  # small data on the threaded path
    rng = np.random.default_rng(6)
    X = rng.normal(size=(3_000, 4))  # 4-D: the KD-tree path, split over two spans
    index = _dpc.PairIndex(X, 0.25)
    one = _dpc.densities(X, 0.5, "cutoff", index=index, workers=1)
    spans = []
    part_sum = _dpc._in_parallel

    def counting(part, n, workers):
        return part_sum(lambda span: spans.append(span) or part(span), n, workers)

    monkeypatch.setattr(_dpc, "_in_parallel", counting)
    two = _dpc.densities(X, 0.5, "cutoff", index=index, workers=2)
    assert len(spans) == 2 and None not in spans  # the threaded path ran, in two spans
    assert one.max() > 1  # records do have neighbours within d_c
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize(("name", "m"), [("spiral", 3), ("d31", 31), ("r15", 10), ("jain", 7), ("wdbc", 7),
                                         ("compound", 2), ("pathbased", 2)])
def test_addpc_table_of_other_sets(name, m):
    require_dataset(f"{name}.data.gz")
    frame = privclust.datasets.load(name)
    part, _ = fit(AdDPC(dc_percent=2.0), features(frame))
    assert part.diagnostics["boundary"] == m
    if name == "spiral":
        assert adjusted_rand_score(frame["class"], part.labels) == 1.0


@pytest.mark.parametrize(("name", "t", "local"), [("iris", 2.5, 13.5), ("wdbc", 1.5, 24.6), ("aggregation", 2.5, 29.0),
                                                  ("flame", 2.0, 8.0)])
def test_data_at_hand_epsilon_matches_the_spec(name, t, local):
    frame = {"iris": privclust.datasets.iris, "wdbc": privclust.datasets.wdbc}.get(name)
    if frame is None:
        require_dataset(f"{name}.data.gz")
    frame = frame() if frame else privclust.datasets.load(name)
    part, ctx = fit(AdDPCrDP(dc_percent=t, epsilon=1.0), features(frame))
    assert part.diagnostics["accounting"]["epsilon_data_at_hand"] == pytest.approx(local, abs=0.05)
    assert ctx.ledger.of_kind("dp")[0].details["epsilon_charged"] == 2 * (len(frame) - 1)


def test_more_clusters_than_records_is_refused_before_the_run():
    data = pd.DataFrame({"a": np.arange(6.0), "b": np.arange(6.0) ** 2})
    compiled = privclust.compile({"steps": [{"use": "dpc", "n_clusters": 10}]})
    with pytest.raises(DataError, match=r"dpc: n_clusters = 10, but a peak is a record and the data have 6; lower "
                                        r"n_clusters \(at most 6\)"):
        privclust.runner.preflight(compiled, data)
    # dp-dpc-grid's peaks are grid nodes: n_clusters sets no floor on the records
    assert DPDPCGrid(epsilon=1.0, n_clusters=10, bounds={"a": [0, 5], "b": [0, 25]}, dc=1.0).min_records(2) == 3


def test_a_d_c_whose_square_underflows_and_a_grid_of_one_node_are_handled():
    data = pd.DataFrame({"a": np.linspace(0, 1, 12), "b": np.linspace(1, 0, 12) ** 2})
    with pytest.raises(ParameterError, match="d_c = 1e-300 .* is too small"):
        privclust.run({"steps": [{"use": "dpc", "n_clusters": 2, "dc": 1e-300}]}, data, seed=1)
    m, kappa, order = _dpc_centres.addpc_boundary(np.array([3.0]), 1.001, 50)  # one candidate: it is the centre
    assert m == 1 and kappa.size == 0 and order.tolist() == [0]


def test_after_the_reachability_merge_each_cluster_centre_lies_in_its_cluster(flame):
    """Step 8 gives every point the label of its E-component's densest
    point: a component can keep label L while centre L joins another
    cluster (dp-dpcl on flame: a 2-record cluster whose reported centre lay
    in the other cluster). Each cluster's centre is now its densest point."""
    recipe = {"privacy": {"allow_leaks": ["dc_percent", "radius_percent"]},
              "steps": [{"use": "dp-dpcl", "dc_percent": 2.5, "radius_percent": 2.2, "epsilon": 1.0,
                         "columns": ["x0", "x1"]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        part = privclust.run(recipe, flame, seed=0).step(0).partition
    labels, dg = np.asarray(part.labels), part.diagnostics
    heads = np.asarray(dg["cluster_centre_indices"])
    moved = [j for j in range(part.n_clusters) if heads[j] not in dg["centre_indices"]]
    assert moved  # the case: a cluster none of whose chosen centres kept its label
    for j in range(part.n_clusters):
        assert labels[heads[j]] == j
        np.testing.assert_array_equal(np.asarray(part.centres)[j], flame[["x0", "x1"]].to_numpy()[heads[j]])
        members = np.flatnonzero(labels == j)
        assert dg["rho"][heads[j]] == dg["rho"][members].max()  # the densest (noisy density) member


@pytest.mark.parametrize("use", ["dp-dpcl", "addpc-rdp", "dp-dpc-grid", "dp-density"])
@pytest.mark.parametrize("noise", ["gaussian", "geometric"])
def test_a_noise_mechanism_that_cannot_make_the_releases_is_refused_when_the_step_is_made(use, noise):
    """They failed at run time (gaussian: no delta; geometric: real
    densities), after a DP d_c or DP bounds had been paid for."""
    step = {"use": use, "epsilon": 1.0, "noise": noise,
            **({"bounds": {"x": [0, 1]}} if use in ("dp-dpc-grid", "dp-density") else {}),
            **({"dc": 0.1} if use != "dp-density" else {})}
    with pytest.raises(privclust.RecipeError, match=f"{use}: the .*'{noise}'.*laplace") as info:
        privclust.compile({"privacy": {"epsilon": 10, "delta": 1e-5}, "steps": [step]})
    # the refusal of integer noise names the setting under which the densities are counts
    assert ('kernel = "cutoff"' in str(info.value)) == (noise == "geometric" and use != "dp-density")


@pytest.mark.parametrize("use, extra", [("dp-dpcl", {}), ("addpc-rdp", {}), ("dp-rccfsfdp", {"n_clusters": 4})])
def test_paper_calibration_declares_its_true_least_charge(use, extra):
    """trust17a: the paper calibration declared ``epsilon`` as its least
    cost, so `privclust check` said a budget of 1 "fits" a step with
    epsilon = 0.5 whose charge, epsilon x 2(n - 1), is at least 2 for the
    3 records it needs at the fewest: no data could make it fit, and only
    the run refused it. The least is now the charge for the fewest records
    the step accepts, and compiling refuses a budget below it."""
    step = {"use": use, "epsilon": 0.5, "dc": 0.5, **({} if use == "addpc-rdp" else {"radius": 0.5}), **extra}
    least = 0.5 * 2 * (max(3, extra.get("n_clusters", 0)) - 1)
    component = privclust.get_registry().create("clusterers", step)
    assert component.planned_cost() == (least, 0.0)
    assert privclust.get_registry().create("clusterers", {**step, "calibration": "vector"}).planned_cost() == (0.5, 0.0)
    with pytest.raises(privclust.RecipeError, match=r"privacy\.epsilon.*steps need at least epsilon = "):
        privclust.compile({"privacy": {"epsilon": least * 0.99}, "steps": [step]})
    privclust.compile({"privacy": {"epsilon": least}, "steps": [step]})  # the least fits: n = 3 may


def test_a_refused_charge_shows_no_figure_on_the_wrong_side_of_the_budget():
    """trust17a: the refusal read "bringing the total to 0.333333 > the
    budget epsilon=0.333333": figures rounded to nearest. The spend is shown
    rounded up, the budget rounded down (privclust.at_least / at_most)."""
    frame = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "y": [0.0, 1.0, 5.0, 7.0]})
    budget = 1 / 3
    step = {"use": "dp-dpcl", "epsilon": budget / 6 * (1 + 1e-7), "dc": 0.5, "radius": 0.5}  # charge 6 epsilon
    with pytest.raises(BudgetExceededError) as err:
        privclust.run({"privacy": {"epsilon": budget}, "steps": [step]}, frame, seed=1)
    assert "bringing the total to 0.333334 > the budget epsilon=0.333333" in str(err.value)


@pytest.mark.parametrize("use", ["addpc-rdp", "dp-dpcl", "addpc"])
def test_an_automatic_count_of_centres_from_the_records_is_withheld_from_a_non_disclosive_report(use):
    """trust17a: the number of centres the AdDPC rule chose from the records'
    exact distances (the noisy mechanisms' deltas are raw) was reported as a
    public value in use, also in a non-disclosive report, which leaves out
    what is derived from individual original values; dp-dpc-grid chooses its
    centres on its DP map, and its count stays public."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(np.vstack([rng.normal(0, 1, (30, 2)), rng.normal(6, 1, (30, 2))]), columns=["x", "y"])
    step = {"use": use, "dc": 0.5, **({"epsilon": 0.5} if use != "addpc" else {}),
            **({"radius": 1.5} if use == "dp-dpcl" else {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"privacy": {"epsilon": 1000.0}, "steps": [step]}, frame, seed=1)
        grid = privclust.run({"steps": [{"use": "dp-dpc-grid", "dc": 0.5, "bounds": {"x": [-5, 10], "y": [-5, 10]}}]},
                             frame, seed=1)
    shown = release.report(non_disclosive=True)["steps"][0]["effective_parameters"]
    assert shown["n_clusters"] == "withheld (derived from the data)"
    assert isinstance(release.report()["steps"][0]["effective_parameters"]["n_clusters"], int)
    assert isinstance(grid.report(non_disclosive=True)["steps"][0]["effective_parameters"]["n_clusters"], int)


def test_dp_dpc_grid_moved_to_its_own_module_and_still_imports_from_the_old_one():
    """``DPDPCGrid`` lives in ``privclust_plugins.dp_dpc_grid`` after 0.1.0 (its own plugin, registered the same
    way); code that imports it from ``density_peaks`` gets the same class, and a name that never existed there is
    still an AttributeError."""
    from privclust_plugins import density_peaks

    assert density_peaks.DPDPCGrid is DPDPCGrid
    assert privclust.get_registry().get("clusterers", "dp-dpc-grid") is DPDPCGrid
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        density_peaks.NoSuchName  # noqa: B018
