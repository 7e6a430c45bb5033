"""Secure defaults for DP (issue 8, item 5), dp-dpc-grid's joint-DP labels,
the DP quantile alternatives, and the numeric safety of the DP clusterers."""

from __future__ import annotations

import tomllib
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset

import privclust
from privclust import Budget, DataError, ParameterError, PrivacyContext, Recipe, RecipeError
from privclust.accounting import PrivacyLeakWarning
from privclust_plugins import _dpc_centres, _dpc_dp
from privclust_plugins.density_peaks import DPDPCL
from privclust_plugins.dp_dpc_grid import DPDPCGrid
from privclust_plugins.dp_kmeans import IDPKMeans

BOUNDS = {"a": [-3.0, 9.0], "b": [-3.0, 9.0], "c": [-3.0, 9.0]}


def fit(component, data, *, seed=1, budget=None):
    context = PrivacyContext(budget, seed=seed)
    with context.step(0, "s", component.name), warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        partition = component.fit(data, context)
    return partition, context


# ---------------------------------------------------------------------------
# [privacy] allow_leaks
# ---------------------------------------------------------------------------


def test_allow_leaks_round_trips_through_dict_and_toml():
    recipe = Recipe.from_dict({"privacy": {"epsilon": 1.0, "allow_leaks": ["bounds", "dc_percent"]},
                               "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]})
    assert recipe.privacy.allow_leaks == ("bounds", "dc_percent")
    assert recipe.to_dict()["privacy"] == {"epsilon": 1.0, "allow_leaks": ["bounds", "dc_percent"]}
    text = recipe.to_toml()
    assert tomllib.loads(text)["privacy"]["allow_leaks"] == ["bounds", "dc_percent"]
    assert Recipe.from_toml(text) == recipe
    assert Recipe.from_dict(recipe.to_dict()) == recipe
    # absent: not written, empty
    plain = Recipe.from_dict({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}}]})
    assert plain.privacy.allow_leaks == () and "privacy" not in plain.to_dict()
    assert Budget(allow_leaks="scale").allow_leaks == ("scale",)


@pytest.mark.parametrize(("value", "match"), [
    (["bound"], "unknown leak name.*'bound'.*did you mean 'bounds'.*known leak names: bounds, scale"),
    (["bounds", "everything"], "unknown leak name.*'everything'"),
])
def test_unknown_leak_names_are_an_error_listing_the_known_ones(value, match):
    recipe = Recipe.from_dict({"privacy": {"allow_leaks": value}, "steps": [{"use": "laplace", "epsilon": 1.0}]})
    with pytest.raises(RecipeError, match=match) as info:
        privclust.compile(recipe)
    assert info.value.problems[0].where == "privacy.allow_leaks"


@pytest.mark.parametrize("value", [[1], True, ["two words"], [""]])
def test_allow_leaks_must_be_a_list_of_names(value):
    with pytest.raises(RecipeError, match="allow_leaks") as info:
        Recipe.from_dict({"privacy": {"allow_leaks": value}, "steps": [{"use": "laplace", "epsilon": 1.0}]})
    assert info.value.problems[0].where == "privacy.allow_leaks"
    with pytest.raises(RecipeError, match="leak name"):
        Budget(allow_leaks=value)


def test_a_plugin_declares_its_own_leak_names():
    @attrs.frozen(kw_only=True)
    class Coarse:
        name: ClassVar[str] = "coarse"
        leak_names: ClassVar[tuple[str, ...]] = ("own-threshold",)

        def mask(self, data, context):
            context.record_leak("own-threshold", "the threshold is the data's median.")
            return privclust.Masked(data=data.copy())

    class Plugin:
        @privclust.hookimpl
        def privclust_register_maskers(self, register):
            register(Coarse)

    registry = privclust.Registry(plugins=[Plugin()], entry_points=[], use_env=False).load()
    assert privclust.known_leak_names(registry)[-1] == "own-threshold"
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
    with pytest.raises(ParameterError, match='allow_leaks = \\["own-threshold"\\]'):
        privclust.run({"steps": [{"use": "coarse"}]}, frame, registry=registry)
    with pytest.warns(PrivacyLeakWarning):
        release = privclust.run({"privacy": {"allow_leaks": ["own-threshold"]}, "steps": [{"use": "coarse"}]},
                                frame, registry=registry)
    assert [e.mechanism for e in release.ledger.of_kind("leak")] == ["own-threshold"]


@pytest.mark.parametrize(("step", "where", "leak"), [
    ({"use": "laplace", "epsilon": 1.0, "bounds": "data"}, "steps[0].bounds", "bounds"),
    ({"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": "data"}, "steps[0].bounds", "bounds"),
    ({"use": "dp-dpc-grid", "epsilon": 1.0, "bounds": "data", "dc": 1.0}, "steps[0].bounds", "bounds"),
    ({"use": "dp-dpc-grid", "epsilon": 1.0, "bounds": {"a": [0, 1]}}, "steps[0].dc", "dc_percent"),
    ({"use": "dp-dpc-grid", "epsilon": 1.0, "bounds": {"a": [0, 1]}, "dc_percent": 3.0}, "steps[0].dc_percent",
     "dc_percent"),
    ({"use": "dp-dpcl", "radius": 1.0}, "steps[0].dc", "dc_percent"),
    ({"use": "dp-dpcl", "dc": 1.0}, "steps[0].radius", "radius_percent"),
    ({"use": "dp-rccfsfdp", "n_clusters": 2, "dc": 1.0, "radius_percent": 2.0}, "steps[0].radius_percent",
     "radius_percent"),
    ({"use": "addpc-rdp", "dc": 1.0, "scale": "minmax"}, "steps[0].scale", "scale"),
])
def test_data_derived_parameters_are_refused_at_compile_time(step, where, leak):
    with pytest.raises(RecipeError) as info:
        privclust.compile({"privacy": {"epsilon": 10.0}, "steps": [step]})
    problems = [p for p in info.value.problems if p.where == where]
    assert len(problems) == 1, info.value.problems
    problem = problems[0]
    assert "refused" in problem.message and "outside the differential-privacy guarantee" in problem.message
    assert step["use"] in problem.message  # the step's component is named
    assert f'allow_leaks = ["{leak}"]' in problem.fix  # the opt-in ...
    assert "give" in problem.fix  # ... and the public alternative
    # the opt-in by name makes the same recipe compile
    privclust.compile({"privacy": {"epsilon": 10.0, "allow_leaks": list(privclust.KNOWN_LEAKS)}, "steps": [step]})


def test_non_private_components_need_no_opt_in():
    privclust.compile({"steps": [{"use": "dpc", "n_clusters": 2}, {"use": "addpc", "scale": "minmax"}]})


def test_a_leak_in_a_nested_component_is_found():
    class Holder:
        pass

    leaks = privclust.declared_leaks(DPDPCL(dc=1.0))
    assert [(where, leak.name) for where, leak in leaks] == [("radius", "radius_percent")]
    assert privclust.declared_leaks(Holder()) == []


def test_opted_in_run_writes_the_leak_entries(frame):
    recipe = {"privacy": {"epsilon": 2.0, "allow_leaks": ["bounds"]},
              "steps": [{"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1.0, "bounds": "data"}]}
    with pytest.warns(PrivacyLeakWarning, match="bounds"):
        release = privclust.run(recipe, frame, seed=1)
    leaks = release.ledger.of_kind("leak")
    assert [e.mechanism for e in leaks] == ["bounds"]


def test_record_leak_is_the_backstop_outside_a_recipe(frame):
    data = frame[["a", "b"]]
    context = PrivacyContext(Budget(epsilon=5.0), seed=1)
    with context.step(0, "km", "idp-kmeans"), pytest.raises(ParameterError) as info:
        IDPKMeans(n_clusters=3, epsilon=1.0, bounds="data").fit(data, context)
    text = str(info.value)
    assert "'km' (idp-kmeans)" in text and "'bounds'" in text
    assert 'allow_leaks = ["bounds"]' in text and "public bounds" in text
    assert len(context.ledger) == 0 and context.spent == (0.0, 0.0)  # nothing recorded, nothing spent
    # the same component with the opt-in runs and records the leak
    _, ctx = fit(IDPKMeans(n_clusters=3, epsilon=1.0, bounds="data"), data,
                 budget=Budget(epsilon=5.0, allow_leaks=["bounds"]))
    assert [e.mechanism for e in ctx.ledger.of_kind("leak")] == ["bounds"]
    # a paper mechanism with the percentage rules needs both names
    with pytest.raises(ParameterError, match="'radius_percent'"):
        fit(DPDPCL(), data, budget=Budget(allow_leaks=["dc_percent"]))
    fit(DPDPCL(), data, budget=Budget(allow_leaks=["dc_percent", "radius_percent"]))
    # a name no component declares is refused with the built-in names
    with pytest.raises(ParameterError, match="Built-in leak names: bounds"):
        PrivacyContext().record_leak("secret-sauce", "taken from the data.")


def test_shipped_recipes_compile():
    from importlib.resources import files

    for path in files("privclust").joinpath("recipes").iterdir():
        if path.name.endswith(".toml"):
            privclust.compile(Recipe.from_toml(path.read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------
# DP quantiles (charged alternatives)
# ---------------------------------------------------------------------------


def test_dp_quantile_is_accurate_for_large_n_and_stays_in_range():
    rng = np.random.default_rng(0)
    values = rng.normal(50, 10, 20_000)
    out = [_dpc_dp.dp_quantile(values, 0.5, 0.0, 1000.0, 1.0, np.random.default_rng(s)) for s in range(20)]
    assert np.all(np.abs(np.array(out) - np.median(values)) < 0.5)
    low = [_dpc_dp.dp_quantile(values, 0.01, -1e6, 1e6, 1.0, np.random.default_rng(s)) for s in range(20)]
    assert np.all((np.array(low) > 20) & (np.array(low) < 35))
    # a tiny epsilon gives an answer anywhere in the range, never outside it
    wild = [_dpc_dp.dp_quantile(values, 0.5, -5.0, 5.0, 1e-9, np.random.default_rng(s)) for s in range(50)]
    assert min(wild) >= -5.0 and max(wild) <= 5.0
    # ranges near the float limit do not overflow
    huge = _dpc_dp.dp_quantile(values, 0.5, -1.7e308, 1.7e308, 1.0, np.random.default_rng(1))
    assert np.isfinite(huge)
    # reproducible from the generator, and every value identical still works
    assert _dpc_dp.dp_quantile(values, 0.3, 0, 100, 1.0, np.random.default_rng(5)) == \
        _dpc_dp.dp_quantile(values, 0.3, 0, 100, 1.0, np.random.default_rng(5))
    assert 0 <= _dpc_dp.dp_quantile(np.zeros(100), 0.5, 0.0, 1.0, 1.0, np.random.default_rng(2)) <= 1.0


def test_pairings_bound_each_records_share():
    X = np.random.default_rng(1).normal(size=(1001, 2))
    dist, r = _dpc_dp.pairing_distances(X, np.random.default_rng(2), max_pairs=5000)
    assert r == 10 == _dpc_dp.pairings(1001, 5000) and dist.size == 10 * 500


@pytest.mark.parametrize("component", [
    DPDPCGrid(epsilon=1.0, n_clusters=3, points_per_dim=6, bounds="dp", bounds_range={c: [-20, 20] for c in "abc"},
              bounds_epsilon=0.5, dc="dp", dc_epsilon=0.5),
    DPDPCGrid(epsilon=1.0, n_clusters=3, points_per_dim=6, bounds={c: [-2, 8] for c in "abc"}, dc="dp",
              dc_epsilon=0.5),
    IDPKMeans(n_clusters=3, epsilon=1.0, bounds="dp", bounds_range={c: [-20, 20] for c in "abc"}, bounds_epsilon=0.5),
], ids=["grid-dp-bounds-and-dc", "grid-dp-dc", "kmeans-dp-bounds"])
def test_conformance_of_the_dp_alternatives(component, frame):
    from privclust import testing as pt

    pt.check_component(component, frame)


def blobs(n=4000, seed=1):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [6.0, 1.0], [2.0, 7.0]])
    truth = rng.integers(0, 3, n)
    return pd.DataFrame(centres[truth] + rng.normal(0, 0.7, (n, 2)), columns=["x", "y"]), truth


def test_grid_with_dp_bounds_and_dp_dc_is_charged_and_planned():
    from sklearn.metrics import adjusted_rand_score

    data, truth = blobs()
    step = {"use": "dp-dpc-grid", "epsilon": 1.0, "n_clusters": 3, "points_per_dim": 60,
            "bounds": "dp", "bounds_range": {"x": [-100, 100], "y": [-100, 100]}, "bounds_epsilon": 1.0,
            "dc": "dp", "dc_percent": 2.0, "dc_epsilon": 0.2}
    # the planned cost includes both estimates
    with pytest.raises(RecipeError, match=r"epsilon = 2.2 \(steps\[0\] 2.2\)"):
        privclust.compile({"privacy": {"epsilon": 2.0}, "steps": [step]})
    release = privclust.run({"privacy": {"epsilon": 2.2}, "steps": [step]}, data, seed=0)
    assert release.spent[0] == pytest.approx(2.2)
    assert not release.ledger.of_kind("leak")
    dp = release.ledger.of_kind("dp")
    assert [e.epsilon for e in dp] == pytest.approx([1.0, 0.2, 1.0])
    assert "quantile" in dp[0].covers and "bounds of x, y" in dp[0].covers
    assert "d_c" in dp[1].covers and dp[1].sensitivity == dp[1].details["pairings"]
    diagnostics = release.step(0).result.diagnostics
    bounds = diagnostics["accounting"]["dp_bounds"]
    assert -4 < bounds["x"][0] < -0.5 and 6.5 < bounds["x"][1] < 10
    assert 0 < diagnostics["dc"] < 2.0
    assert adjusted_rand_score(truth, release.labels["cluster"]) > 0.9


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"bounds": "dp", "bounds_epsilon": 0.1}, "bounds_range"),
    ({"bounds": "dp", "bounds_range": {"x": [0, 1]}}, "bounds_epsilon"),
    ({"bounds": {"x": [0, 1]}, "bounds_epsilon": 0.1}, "only with bounds = \"dp\""),
    ({"dc": "dp"}, "dc_epsilon"),
    ({"dc": 1.0, "dc_epsilon": 0.1}, "only with dc = \"dp\""),
    ({"dc": "median"}, "'dc'"),
    ({"bounds": "dp", "bounds_range": {"x": [0, 1]}, "bounds_epsilon": 0.1, "bounds_quantile": 0.5}, "quantile"),
])
def test_dp_alternatives_need_their_public_inputs(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        DPDPCGrid(**kwargs)


def test_idp_kmeans_with_dp_bounds():
    data, truth = blobs()
    part, ctx = fit(IDPKMeans(n_clusters=3, epsilon=2.0, bounds="dp", bounds_range={"x": [-50, 50], "y": [-50, 50]},
                              bounds_epsilon=0.5), data, budget=Budget(epsilon=5.0))  # add/remove: twice
    dp = ctx.ledger.of_kind("dp")
    assert dp[0].epsilon == 0.5 and "quantile" in dp[0].covers and "add/remove" in dp[0].relation
    assert ctx.spent[0] <= 2.5 and not ctx.ledger.of_kind("leak")
    statement = ctx.ledger.of_kind("guarantee")[0].statement
    assert "the DP quantiles that set the bounds the centres lie in (epsilon = 0.5" in statement
    assert f"are {privclust.at_least(ctx.spent[0])}-DP" in statement  # the centres' epsilon includes the bounds
    assert IDPKMeans(n_clusters=3, epsilon=2.0, bounds="dp", bounds_range={"x": [0, 1]}, bounds_epsilon=0.5
                     ).planned_cost() == (2.5, 0.0)


# ---------------------------------------------------------------------------
# dp-dpc-grid: labels and centres depend on the DP map only
# ---------------------------------------------------------------------------


def test_grid_labels_of_other_records_ignore_where_one_record_moves():
    """The issue's construction: 10,000 Aggregation-like points, dc = 1, 80
    points per axis, epsilon = 1; move one record onto the centre of a map
    cluster that no record used. The DP map is the same, so every other
    record keeps its label integer and the released centres are the same."""
    require_dataset("aggregation.data.gz")
    base = privclust.datasets.load("aggregation").drop(columns="class").to_numpy()
    rng = np.random.default_rng(0)
    data = pd.DataFrame(base[rng.integers(0, len(base), 10_000)] + rng.normal(0, 0.3, (10_000, 2)),
                        columns=["x0", "x1"])
    comp = DPDPCGrid(dc=1.0, epsilon=1.0, bounds={"x0": [0, 40], "x1": [0, 30]}, points_per_dim=80)
    for seed in range(200):
        part, _ = fit(comp, data, seed=seed)
        node_labels = part.diagnostics["node_labels"]
        used = set(np.unique(part.labels).tolist())
        # a cluster of the map no record uses, numbered below a used one (the old renumbering shifted those)
        unused = [c for c in part.diagnostics["cluster_centre_indices"]
                  if node_labels[c] not in used and node_labels[c] < max(used)]
        if unused:
            break
    else:
        pytest.fail("no seed gave a map cluster without records")
    moved = data.copy()
    moved.iloc[0] = part.diagnostics["grid_points"][unused[0]]
    again, _ = fit(comp, moved, seed=seed)
    np.testing.assert_array_equal(again.diagnostics["node_labels"], node_labels)  # the premise: same map
    assert again.labels[0] == node_labels[unused[0]]  # the moved record now uses that cluster
    np.testing.assert_array_equal(again.labels[1:], part.labels[1:])
    np.testing.assert_array_equal(again.centres, part.centres)
    # the cluster numbers and centres are those of the map, with or without records in a cluster
    assert part.centres.shape[0] == node_labels.max() + 1 > len(used)
    # what the old per-record renumbering would have done
    old_before, old_after = _dpc_centres.compress_labels(part.labels)[0], _dpc_centres.compress_labels(again.labels)[0]
    assert np.mean(old_before[1:] != old_after[1:]) > 0.01


# ---------------------------------------------------------------------------
# tracebacks and numeric safety
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [float("inf"), float("nan"), 1e-320])
def test_idp_kmeans_needs_a_finite_usable_epsilon(epsilon):
    with pytest.raises(RecipeError, match="'epsilon'"):
        privclust.compile({"steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": epsilon, "bounds": BOUNDS}]})
    with pytest.raises(ParameterError, match="'epsilon'"):
        IDPKMeans(n_clusters=2, epsilon=epsilon, bounds=BOUNDS)


@pytest.mark.parametrize("step", [
    {"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": BOUNDS},
    {"use": "dp-dpcl", "dc": 1.0, "radius": 1.0},
    {"use": "addpc-rdp", "dc": 1.0},
    {"use": "dp-rccfsfdp", "n_clusters": 2, "dc": 1.0, "radius": 1.0},
    {"use": "dp-dpc-grid", "dc": 1.0, "bounds": BOUNDS},
])
@pytest.mark.parametrize("noise", [{"use": "laplace", "epsilon": 100.0},
                                   {"use": "geometric", "bounds": {"a": [0, 1]}}])
def test_a_nested_noise_parameter_that_cannot_take_effect_is_refused(step, noise):
    with pytest.raises(RecipeError, match=r"'noise\.(epsilon|bounds)' cannot take effect") as info:
        privclust.compile({"steps": [{**step, "noise": noise}]})
    assert step["use"] in str(info.value)
    alone = {"steps": [{**step, "noise": {"use": noise["use"]}}]}
    if noise["use"] == "geometric":  # refused for another reason: integer noise on real values
        with pytest.raises(RecipeError, match='use noise = "laplace"'):
            privclust.compile(alone)
        if step["use"] != "idp-kmeans":  # the cutoff kernel's densities are counts: geometric fits them
            privclust.compile({"steps": [{**step, "kernel": "cutoff", "noise": {"use": "geometric"}}]})
    else:
        privclust.compile(alone)  # the mechanism alone is fine


@pytest.mark.parametrize("component", [
    privclust.get_registry().create("clusterers", {"use": "dpc", "n_clusters": 2, "dc": 1.0}),
    privclust.get_registry().create("clusterers", {"use": "dpc", "n_clusters": 2}),
    DPDPCL(dc=1.0, radius=1.0),
])
def test_data_near_the_float_limit_is_refused_naming_the_column(component):
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"small": rng.normal(size=50), "huge": rng.normal(size=50) * 2.5e307})
    with pytest.raises(DataError, match="column.*huge.*overflow.*rescale"):
        fit(component, data, budget=Budget(allow_leaks=["dc_percent"]))
    # the same values rescaled run
    fit(component, data.assign(huge=data["huge"] / 1e307), budget=Budget(allow_leaks=["dc_percent"]))


def test_constant_column_at_the_float_limit_runs():
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.normal(size=40), "b": np.full(40, 1e308)})
    part, _ = fit(DPDPCL(dc=1.0, radius=1.0), data)
    assert np.all(np.isfinite(part.centres))


@pytest.mark.parametrize("component", [
    IDPKMeans(n_clusters=2, epsilon=1.0, bounds={"a": [-1e308, 1e308], "b": [0, 1]}),
    DPDPCGrid(dc=1.0, epsilon=1.0, bounds={"a": [-1e308, 1e308], "b": [0, 1]}),
])
def test_bounds_near_the_float_limit_are_refused(component):
    data = pd.DataFrame({"a": np.arange(30.0), "b": np.linspace(0, 1, 30)})
    with pytest.raises(ParameterError, match="column.*a.*span"):
        fit(component, data, budget=Budget(epsilon=5.0))


def test_minmax_scaling_near_the_float_limit_is_refused_not_overflowed():
    data = pd.DataFrame({"a": [-1e308, 0.0, 1e308, 5.0], "b": [0.0, 1.0, 2.0, 3.0]})
    comp = privclust.get_registry().create("clusterers", {"use": "dpc", "n_clusters": 2, "dc": 0.1, "scale": "minmax"})
    with pytest.raises(DataError, match="column.*a"):
        fit(comp, data)


def test_grid_with_only_epsilon_and_k_is_refused():
    """Issue item: dp-dpc-grid with only epsilon and k took its bounds and d_c from the data."""
    with pytest.raises(RecipeError) as info:
        privclust.compile({"privacy": {"epsilon": 1.0},
                           "steps": [{"use": "dp-dpc-grid", "epsilon": 1.0, "n_clusters": 3}]})
    where = {p.where for p in info.value.problems}
    assert where == {"steps[0]", "steps[0].dc"}
    text = str(info.value)
    assert 'bounds = "dp"' in text and 'dc = "dp"' in text and 'allow_leaks = ["dc_percent"]' in text


@pytest.mark.parametrize("step", [
    {"use": "dp-dpcl", "dc": 1.0, "radius": 1.0, "epsilon": float("inf")},
    {"use": "addpc-rdp", "dc": 1.0, "epsilon": 1e308},
    {"use": "dp-dpc-grid", "dc": 1.0, "bounds": BOUNDS, "epsilon": 1e-320},
    {"use": "dp-dpc-grid", "dc": "dp", "dc_epsilon": float("inf"), "bounds": BOUNDS},
])
def test_epsilons_that_overflow_are_refused(step):
    with pytest.raises(RecipeError, match="epsilon"):
        privclust.compile({"steps": [step]})


def test_paper_charge_overflow_is_a_clean_error():
    with pytest.raises(ParameterError, match="overflows"):
        DPDPCL(dc=1.0, radius=1.0, epsilon=1e300)._charge(10**9)  # epsilon x 2(n - 1) is not a float


def test_column_bounds_resolves_a_table_or_the_data_with_its_leak():
    import numpy as np

    values = np.array([[1.0, 5.0], [3.0, 5.0]])
    ctx = privclust.PrivacyContext(privclust.Budget(allow_leaks=["bounds"]))
    with ctx.step(0, "s", "x"):
        low, high = privclust.column_bounds(values, ["a", "b"], "data", ctx, who="x")
    assert low.tolist() == [1.0, 5.0] and high.tolist() == [3.0, 6.0]  # a constant column gets [v, v + 1]
    assert "the bounds of a, b were taken from the data" in ctx.ledger.of_kind("leak")[0].statement
    low, high = privclust.column_bounds(values, ["a", "b"], {"a": (0.0, 4.0), "b": (0.0, 9.0)}, ctx, who="x")
    assert high.tolist() == [4.0, 9.0]
    with pytest.raises(privclust.DataError, match="x: no public bounds for column.*b.*bounds = { b = "):
        privclust.column_bounds(values, ["a", "b"], {"a": (0.0, 4.0)}, ctx, who="x")
    refusing = privclust.PrivacyContext()
    with refusing.step(0, "s", "x"), pytest.raises(privclust.PrivclustError):
        privclust.column_bounds(values, ["a", "b"], "data", refusing, who="x")


# ---------------------------------------------------------------------------
# What the data decide beside the noise (red-team audit): the type of a column and a step's default columns
# ---------------------------------------------------------------------------


def _cli_release(tmp_path, name: str, csv: str, recipe: str) -> tuple[pd.DataFrame, dict]:
    import json

    from privclust.cli import main

    (tmp_path / f"{name}.csv").write_text(csv)
    (tmp_path / f"{name}.toml").write_text(recipe)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(tmp_path / f"{name}.toml"), "-i", str(tmp_path / f"{name}.csv"), "-o",
                     str(tmp_path / f"{name}_out.csv"), "--report", str(tmp_path / f"{name}.json"),
                     "--non-disclosive", "-q"]) == 0
    return pd.read_csv(tmp_path / f"{name}_out.csv"), json.loads((tmp_path / f"{name}.json").read_text())


def _shape(report: dict) -> list[tuple[str, str]]:
    """The ledger's entries, by origin and mechanism: what a reader sees beside the values."""
    return [(str(e.get("origin", "")), str(e.get("mechanism", ""))) for e in report["ledger"]]


def test_whether_a_column_held_only_whole_numbers_does_not_show_in_a_dp_release(tmp_path):
    """Neighbours under replace-one: every value of a whole but one, 37.5 (inside the bounds). The host rounded a
    column read as integers back to integers and recorded an "integer rounding" entry, so the file's type told the
    two apart with certainty; a differentially private step's columns are now released as the step gave them."""
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 100, 30), rng.uniform(0, 50, 30).round(3)
    rows = [f"{x},{y}" for x, y in zip(a, b, strict=True)]
    recipe = ('[privacy]\nepsilon = 1.0\n[[steps]]\nuse = "laplace"\ncolumns = ["a", "b"]\nepsilon = 1.0\n'
              'bounds = { a = [0, 100], b = [0, 50] }\n')
    out, report = _cli_release(tmp_path, "whole", "a,b\n" + "\n".join(rows) + "\n", recipe)
    rows[0] = "37.5," + rows[0].split(",")[1]
    out2, report2 = _cli_release(tmp_path, "decimal", "a,b\n" + "\n".join(rows) + "\n", recipe)
    assert out.dtypes.to_dict() == out2.dtypes.to_dict() == {"a": np.float64, "b": np.float64}
    assert _shape(report) == _shape(report2)
    assert not any(m == "integer rounding" for _, m in _shape(report))
    # a non-private masker's integer columns are still released as integers
    masked, _ = _cli_release(tmp_path, "masked", "a,b\n" + "\n".join(f"{x},{y}" for x, y in zip(a, b, strict=True))
                             + "\n", '[[steps]]\nuse = "mdav"\nk = 3\ncolumns = ["a", "b"]\n')
    assert masked["a"].dtype == np.int64


def test_a_dp_steps_default_columns_do_not_depend_on_the_values(tmp_path):
    """Neighbours under replace-one: c holds 0 and 1 (a code by the default columns' test) or, in one record, 2
    (no longer a code). The default columns of a laplace step without 'columns' left c out on one and noised it on
    the other, and split epsilon over one column or two; they are now the numeric columns, codes included."""
    rng = np.random.default_rng(1)
    a, c = rng.uniform(0, 100, 40).round(2), [0] * 20 + [1] * 20
    rows = [f"{x},{y}" for x, y in zip(a, c, strict=True)]
    recipe = ('[privacy]\nepsilon = 1.0\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\n'
              'bounds = { a = [0, 100], c = [0, 2] }\n')
    _, report = _cli_release(tmp_path, "code", "a,c\n" + "\n".join(rows) + "\n", recipe)
    rows[0] = rows[0].split(",")[0] + ",2"
    _, report2 = _cli_release(tmp_path, "count", "a,c\n" + "\n".join(rows) + "\n", recipe)

    def spent(r: dict) -> list[tuple[str, str]]:
        return [(e["statement"], str(e.get("sensitivity"))) for e in r["ledger"] if e.get("epsilon")]

    assert spent(report) == spent(report2)
    assert "column(s) a, c" in spent(report)[0][0]
