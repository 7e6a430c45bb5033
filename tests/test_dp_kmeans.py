"""Tests of the idp-kmeans clusterer (the IDP K-means baseline) and its kernels."""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

import privclust
import privclust.testing as pt
from privclust import (
    Budget,
    BudgetExceededError,
    DataError,
    ParameterError,
    PrivacyContext,
    PrivacyLeakWarning,
    RecipeError,
    Sensitivity,
)
from privclust_plugins import _kmeans
from privclust_plugins.dp_kmeans import IDPKMeans

BOUNDS = {"a": [-3.0, 9.0], "b": [-3.0, 9.0], "c": [-3.0, 9.0]}


def fit(component, data, *, seed=0, budget=None, registry=None):
    # Outside a recipe, the tests that use bounds = "data" opt in to that leak explicitly.
    context = PrivacyContext(budget if budget is not None else Budget(allow_leaks=["bounds"]), seed=seed,
                             registry=registry)
    with context.step(0, "km", component.name):
        partition = component.fit(data, context)
    return partition, context


def blobs(n=300, seed=1):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [6.0, 1.0], [2.0, 7.0]])
    truth = rng.integers(0, 3, n)
    values = centres[truth] + rng.normal(0, 0.5, (n, 2))
    return pd.DataFrame(values, columns=["x", "y"]), truth


# -- the kernels ---------------------------------------------------------------------------------


records = st.integers(1, 4).flatmap(lambda d: st.tuples(
    st.lists(st.lists(st.floats(0, 1), min_size=d, max_size=d), min_size=3, max_size=30),
    st.lists(st.floats(0, 1), min_size=d, max_size=d),
    st.integers(1, 3),
))


@settings(deadline=None, max_examples=150)
@given(records)
def test_block_release_sensitivity_holds_when_a_record_is_added(case):
    rows, extra, m = case
    unit = np.array(rows)
    bigger = np.vstack([unit, [extra]])
    if m > unit.shape[0]:
        return
    l1, l2 = _kmeans.init_sensitivity(unit.shape[1], m)
    sums, counts = _kmeans.cluster_sums(unit, _kmeans.block_labels(unit, m), m)
    sums2, counts2 = _kmeans.cluster_sums(bigger, _kmeans.block_labels(bigger, m), m)
    change = np.concatenate([(sums2 - sums).ravel(), counts2 - counts])
    assert np.abs(change).sum() <= l1 + 1e-9
    assert np.linalg.norm(change) <= l2 + 1e-9


@settings(deadline=None, max_examples=100)
@given(records, st.integers(0, 2**32 - 1))
def test_round_release_sensitivity_is_m_plus_one(case, seed):
    rows, extra, k = case
    unit = np.array(rows)
    centres = np.random.default_rng(seed).uniform(size=(k, unit.shape[1]))
    bigger = np.vstack([unit, [extra]])
    sums, counts = _kmeans.cluster_sums(unit, _kmeans.assign(unit, centres), k)
    sums2, counts2 = _kmeans.cluster_sums(bigger, _kmeans.assign(bigger, centres), k)
    change = np.concatenate([(sums2 - sums).ravel(), counts2 - counts])
    l1, l2 = _kmeans.round_sensitivity(unit.shape[1])
    assert l1 == unit.shape[1] + 1
    assert np.abs(change).sum() <= l1 + 1e-9
    assert np.linalg.norm(change) <= l2 + 1e-9


def test_rank_blocks_need_more_than_m_plus_one():
    # A record added at the bottom of the ranking shifts the block
    # boundaries: the paper's M + 1 would understate the initial release's
    # sensitivity. Five records in blocks of 2, 2, 1 become 2, 2, 2 over six.
    unit = np.repeat(np.linspace(0.9, 1.0, 5)[:, None], 2, axis=1)
    bigger = np.vstack([unit, [[0.0, 0.0]]])
    sums, counts = _kmeans.cluster_sums(unit, _kmeans.block_labels(unit, 3), 3)
    sums2, counts2 = _kmeans.cluster_sums(bigger, _kmeans.block_labels(bigger, 3), 3)
    change = np.abs(np.concatenate([(sums2 - sums).ravel(), counts2 - counts])).sum()
    assert change > 2 + 1
    assert change <= _kmeans.init_sensitivity(2, 3)[0]


def test_blocks_are_equal_and_ranked_by_attribute_sum():
    rng = np.random.default_rng(0)
    unit = rng.uniform(size=(11, 3))
    labels = _kmeans.block_labels(unit, 3)
    assert np.bincount(labels).tolist() == [4, 4, 3]
    sums = unit.sum(axis=1)
    assert sums[labels == 0].max() <= sums[labels == 1].min()
    assert sums[labels == 1].max() <= sums[labels == 2].min()
    # A function of the records, not of their order in the file.
    perm = rng.permutation(11)
    assert np.array_equal(_kmeans.block_labels(unit[perm], 3), labels[perm])


def test_schedules_stay_within_epsilon():
    halving = _kmeans.round_epsilons(2.0, "halving", 5, 1000)
    assert halving[:3] == [1.0, 0.5, 0.25]
    assert 990 <= len(halving) <= 1001  # stops before the epsilons underflow
    assert _kmeans.total_epsilon(halving) <= 2.0  # 2 - 2^-996 rounds to 2.0
    uniform = _kmeans.round_epsilons(2.0, "uniform", 5, 1000)
    assert uniform == pytest.approx([2.0 / 6] * 6)
    assert _kmeans.total_epsilon(uniform) == pytest.approx(2.0)
    assert len(_kmeans.round_epsilons(1.0, "uniform", 5, 2)) == 3


def test_assign_in_blocks_matches_dense_argmin():
    rng = np.random.default_rng(2)
    unit, centres = rng.uniform(size=(1000, 3)), rng.uniform(size=(7, 3))
    dense = np.argmin(((unit[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    assert np.array_equal(_kmeans.assign(unit, centres, block_rows=64), dense)


def test_farthest_first():
    centres = np.array([[0.0, 0.0], [0.1, 0.0], [1.0, 1.0], [0.9, 1.0], [0.0, 1.0]])
    assert _kmeans.farthest_first(centres, 3, 0).tolist() == [0, 2, 4]


# -- the component -------------------------------------------------------------------------------


def test_recovers_well_separated_clusters_with_a_large_epsilon():
    data, truth = blobs()
    partition, _ = fit(IDPKMeans(n_clusters=3, epsilon=1e4, bounds={"x": [-3, 9], "y": [-3, 10]}), data)
    assert adjusted_rand_score(truth, partition.labels) > 0.98
    assert partition.centres.shape == (3, 2)
    true_centres = np.array([[0.0, 0.0], [6.0, 1.0], [2.0, 7.0]])
    gaps = np.min(np.linalg.norm(partition.centres[:, None] - true_centres[None], axis=-1), axis=1)
    assert gaps.max() < 0.3


@attrs.frozen(kw_only=True)
class NoNoise:
    """A test mechanism: spends like Laplace but adds nothing, so the
    algorithm itself can be compared with plain Lloyd."""

    name: ClassVar[str] = "no-noise"
    calls: list = attrs.field(factory=list, eq=False)

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, not_covered="",
                **ledger: Any):
        self.calls.append(Sensitivity.of(sensitivity))
        context.spend(epsilon=epsilon, mechanism=self.name, sensitivity=Sensitivity.of(sensitivity).l1,
                      relation=relation, covers=covers, not_covered=not_covered, **ledger)
        return np.array(values, dtype=float)

    def perturb(self, data, context):  # pragma: no cover - not a step here
        raise NotImplementedError


def test_without_noise_it_is_lloyd_from_the_block_initialisation():
    data, _ = blobs(seed=4)
    bounds = {"x": [-3, 9], "y": [-3, 10]}
    mech = NoNoise()
    partition, context = fit(IDPKMeans(n_clusters=3, epsilon=1e6, bounds=bounds, noise=mech), data)
    assert partition.diagnostics["stopped"].startswith("converged")
    unit, _ = _kmeans.to_unit(data.to_numpy(), np.array([-3.0, -3.0]), np.array([9.0, 10.0]))
    blocks = _kmeans.block_labels(unit, 3)
    init = np.array([unit[blocks == j].mean(axis=0) for j in range(3)])
    reference = KMeans(3, init=init, n_init=1, algorithm="lloyd", tol=0.0).fit(unit)
    assert np.array_equal(partition.labels, reference.labels_)
    assert np.allclose(partition.diagnostics["centres_unit"], reference.cluster_centers_, atol=1e-6)
    # The swapped mechanism did the releases, with the sensitivities of the docs.
    assert mech.calls[0].l1 == (2 * 3 - 1) * 2 + 1
    assert all(c.l1 == 3 for c in mech.calls[1:])
    assert [e.mechanism for e in context.ledger.of_kind("dp")] == ["no-noise"] * len(mech.calls)


def test_mechanism_swapped_by_name_through_a_registry():
    class Plugin:
        @privclust.hookimpl
        def privclust_register_noise_mechanisms(self, register):
            register(NoNoise)

    registry = privclust.Registry(plugins=[Plugin()], use_env=False).load()
    data, _ = blobs()
    partition, context = fit(IDPKMeans(n_clusters=3, epsilon=1.0, bounds={"x": [-3, 9], "y": [-3, 10]},
                                       noise="no-noise"), data, registry=registry)
    assert {e.mechanism for e in context.ledger.of_kind("dp")} == {"no-noise"}


@pytest.mark.parametrize("schedule", ["halving", "uniform"])
def test_ledger_is_honest(schedule):
    data, _ = blobs()
    eps = 0.8
    partition, context = fit(IDPKMeans(n_clusters=3, epsilon=eps, bounds={"x": [-3, 9], "y": [-3, 10]},
                                       schedule=schedule), data,
                             budget=Budget(epsilon=2 * eps))  # add/remove: counted twice
    dp = context.ledger.of_kind("dp")
    assert len(dp) == 1 + partition.diagnostics["rounds"]
    assert math.fsum(e.epsilon for e in dp) <= eps * (1 + 1e-12)
    assert context.spent[0] == pytest.approx(partition.diagnostics["epsilon_spent"])
    assert dp[0].sensitivity == (2 * 3 - 1) * 2 + 1  # the rank-based blocks
    assert all(e.sensitivity == 3 for e in dp[1:])  # M + 1
    assert all(e.relation.startswith("add/remove") for e in dp)
    assert all("labels" in e.not_covered for e in dp)
    summary = context.ledger.of_kind("guarantee")
    assert len(summary) == 1 and "Not covered: the per-record labels" in summary[0].statement
    assert not context.ledger.of_kind("leak")
    if schedule == "halving":
        assert [e.epsilon for e in dp[:3]] == [0.4, 0.2, 0.1][: len(dp)]
    else:
        assert all(e.epsilon == pytest.approx(eps / 6) for e in dp)


def test_data_bounds_leak_and_say_so():
    data, _ = blobs()
    with pytest.warns(PrivacyLeakWarning, match="bounds"):
        _, context = fit(IDPKMeans(n_clusters=3, epsilon=1.0, bounds="data"), data)
    leaks = context.ledger.of_kind("leak")
    assert len(leaks) == 1 and "x, y" in leaks[0].statement
    assert "range" in context.ledger.of_kind("guarantee")[0].statement


def test_refused_before_any_noise_when_the_budget_is_short():
    data, _ = blobs()
    context = pt._TracingContext(Budget(epsilon=0.5), seed=1)
    with context.step(0, "km", "idp-kmeans"), pytest.raises(BudgetExceededError, match="no noise was drawn"):
        IDPKMeans(n_clusters=3, epsilon=0.6, bounds={"x": [-3, 9], "y": [-3, 10]}).fit(data, context)
    assert len(context.ledger) == 0  # not even a leak entry
    assert "rng" not in context.events
    with context.step(0, "km", "idp-kmeans"), pytest.raises(BudgetExceededError):
        IDPKMeans(n_clusters=3, epsilon=0.6, bounds="data").fit(data, context)
    assert len(context.ledger) == 0


def test_recipe_budget_is_checked_at_compile_time(registry):
    recipe = {"privacy": {"epsilon": 0.5},
              "steps": [{"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1.0, "bounds": "data"}]}
    with pytest.raises(RecipeError, match="the budget is 0.5"):
        privclust.compile(recipe, registry)


def test_public_bounds_clip_outliers():
    data, _ = blobs()
    data.loc[0, "x"] = 100.0
    partition, _ = fit(IDPKMeans(n_clusters=3, epsilon=1.0, bounds={"x": [-3, 9], "y": [-3, 10]}), data)
    assert "clipped_values" not in partition.diagnostics  # a count of the raw data, outside every DP release
    assert np.all(partition.centres[:, 0] <= 9.0)


def test_more_blocks_than_clusters():
    data, truth = blobs()
    partition, context = fit(IDPKMeans(n_clusters=3, n_blocks=6, epsilon=1e4, bounds={"x": [-3, 9], "y": [-3, 10]}),
                             data)
    assert context.ledger.of_kind("dp")[0].sensitivity == (2 * 6 - 1) * 2 + 1
    assert len(np.unique(partition.labels)) == 3
    assert adjusted_rand_score(truth, partition.labels) > 0.95


def test_seeded_runs_repeat_and_seeds_differ():
    data, _ = blobs()
    component = IDPKMeans(n_clusters=3, epsilon=0.5, bounds={"x": [-3, 9], "y": [-3, 10]})
    a, _ = fit(component, data, seed=11)
    b, _ = fit(component, data, seed=11)
    c, _ = fit(component, data, seed=12)
    assert np.array_equal(a.centres, b.centres)
    assert not np.array_equal(a.centres, c.centres)


def test_in_a_recipe_through_the_runner(registry):
    data, truth = blobs()
    data["class"] = pd.Categorical(truth)
    release = privclust.run({
        "privacy": {"epsilon": 2.0},  # add/remove alone: the file's figure, counted twice, is bounded (rt17 F1)
        "steps": [{"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1.0, "schedule": "uniform", "rounds": 3,
                   "bounds": {"x": [-3, 9], "y": [-3, 10]}}],
        "evaluate": [{"use": "ari"}],
    }, data, seed=2, registry=registry)
    assert release.labels["cluster"].nunique() <= 3
    assert release.spent[0] <= 1.0 + 1e-12
    assert release.step(0).columns == ("x", "y")  # the categorical class is not clustered


# -- bad input -------------------------------------------------------------------------------------


def test_bad_parameters():
    with pytest.raises(ParameterError, match="'epsilon'.*> 0"):
        IDPKMeans(n_clusters=3, epsilon=0.0, bounds="data")
    with pytest.raises(ParameterError, match="'epsilon'.*> 0"):
        IDPKMeans(n_clusters=3, epsilon=-1.0, bounds="data")
    with pytest.raises(ParameterError, match="'n_blocks'.*>= n_clusters = 3"):
        IDPKMeans(n_clusters=3, n_blocks=2, epsilon=1.0, bounds="data")
    with pytest.raises(ParameterError, match="'schedule'"):
        IDPKMeans(n_clusters=3, epsilon=1.0, bounds="data", schedule="geometric")
    with pytest.raises(ParameterError, match="'bounds'"):
        IDPKMeans(n_clusters=3, epsilon=1.0, bounds="minmax")
    with pytest.raises(ParameterError, match="low < high"):
        IDPKMeans(n_clusters=3, epsilon=1.0, bounds={"x": [1, 1]})
    with pytest.raises(ParameterError, match="'n_clusters'"):
        IDPKMeans(n_clusters=0, epsilon=1.0, bounds="data")


def test_bad_data():
    data, _ = blobs(n=20)
    bounds = {"x": [-3, 9], "y": [-3, 10]}
    # the number of records is private under add/remove: no refusal depends on it (a refusal of a data set and a
    # release of its neighbour with one more record would tell them apart); empty clusters get noisy zero sums
    for n, k in ((20, 25), (2, 1), (1, 3), (4, 5)):
        part, ctx = fit(IDPKMeans(n_clusters=k, epsilon=1.0, bounds=bounds), data.iloc[:n])
        assert part.centres.shape == (k, 2) and np.isfinite(part.centres).all() and ctx.spent[0] <= 1.0
    bad = data.copy()
    bad.loc[3, "y"] = np.nan
    with pytest.raises(DataError, match="column.*y.*NaN"):
        fit(IDPKMeans(n_clusters=2, epsilon=1.0, bounds=bounds), bad)
    with pytest.raises(DataError, match="no public bounds for column.*y"):
        fit(IDPKMeans(n_clusters=2, epsilon=1.0, bounds={"x": [0, 1]}), data)
    with pytest.raises(ParameterError, match="needs public 'bounds'"):
        fit(IDPKMeans(n_clusters=2, epsilon=1.0), data)


def test_bad_input_through_the_runner(registry):
    data, _ = blobs(n=20)
    with pytest.raises(RecipeError, match="needs public 'bounds'"):
        privclust.run({"steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0}]}, data, registry=registry)
    fewer = privclust.run({"steps": [{"use": "idp-kmeans", "n_clusters": 25, "epsilon": 1.0,
                                      "bounds": {"x": [-3, 9], "y": [-3, 10]}}]}, data.iloc[:4], registry=registry)
    assert fewer.step(0).partition.centres.shape == (25, 2)  # 4 records, 25 clusters: runs, as its neighbours do
    bad = data.copy()
    bad.loc[0, "x"] = np.nan
    with pytest.raises(DataError, match="NaN"):
        privclust.run({"privacy": {"allow_leaks": ["bounds"]},
                       "steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": "data"}]}, bad,
                      registry=registry)


@pytest.mark.parametrize("component", [
    IDPKMeans(n_clusters=3, epsilon=1.0, bounds=BOUNDS),
    IDPKMeans(n_clusters=2, n_blocks=4, epsilon=0.5, bounds=BOUNDS, schedule="uniform", rounds=3),
    IDPKMeans(n_clusters=3, epsilon=2.0, bounds="dp", bounds_range=BOUNDS, bounds_epsilon=0.5,
              noise={"use": "laplace"}),
], ids=["halving", "uniform-m4", "dp-bounds"])
def test_conformance(component, registry, frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        pt.check_component(component, frame, registry=registry)


def test_real_data_sanity():
    # Non-private k-means on min-max iris has ARI 0.716 (spec 3.6); with a
    # huge epsilon the reconstruction recovers it.
    from privclust.datasets import iris

    frame = iris()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        partition, _ = fit(IDPKMeans(n_clusters=3, epsilon=1e6, bounds="data"), frame.drop(columns="class"))
    assert adjusted_rand_score(frame["class"], partition.labels) == pytest.approx(0.716, abs=0.01)


@pytest.mark.parametrize("noise", ["gaussian", {"use": "geometric"}])
def test_a_noise_mechanism_that_cannot_make_the_releases_is_refused_before_a_run(noise, frame):
    """gaussian needs a delta idp-kmeans never gives, geometric integer values: both failed at run time, with
    bounds = "dp" after the DP bounds had been paid for (the ledger kept the spend of a run that failed)."""
    with pytest.raises(ParameterError, match="use noise = \"laplace\""):
        IDPKMeans(n_clusters=2, epsilon=1.0, bounds=BOUNDS, noise=noise)
    recipe = {"steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": "dp",
                         "bounds_range": BOUNDS, "bounds_epsilon": 0.5, "noise": noise}]}
    with pytest.raises(RecipeError, match="nested noise mechanism"):
        privclust.compile(recipe)
    with pytest.raises(ParameterError, match="nested noise mechanism"):
        IDPKMeans(n_clusters=2, epsilon=1.0, bounds=BOUNDS,
                  noise=privclust.PrivacyContext().mechanism(noise if isinstance(noise, str) else noise["use"]))


@pytest.mark.parametrize("value", [1e20, -3e300, 1.7e308, 5.0])
def test_a_constant_column_with_bounds_from_the_data_is_clustered(value):
    """A constant column gets [v, v + 1] from the data; beyond 2^53 that is [v, v], and the scaling to
    the unit cube divided by zero: the run failed with laplace refusing NaN values it never had."""
    data = pd.DataFrame({"a": np.linspace(0.0, 5.0, 30), "b": np.full(30, value)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        partition, context = fit(IDPKMeans(n_clusters=2, epsilon=1.0, bounds="data"), data)
    centres = partition.centres
    assert np.all(np.isfinite(centres)) and centres.shape == (2, 2)
    low, high = partition.diagnostics[privclust.EFFECTIVE_PARAMS_FROM_DATA]["bounds"]["b"]
    assert low < high and low <= value <= high
    if value == 5.0:  # an ordinary constant column keeps [v, v + 1]
        assert (low, high) == (5.0, 6.0)


@pytest.mark.parametrize("epsilon, rounds", [(0.1, 10), (0.7, 34), (0.3, 36)])
def test_the_uniform_schedule_adds_up_to_no_more_than_epsilon(epsilon, rounds, frame):
    """epsilon / (T + 1) as the nearest double: its T + 1 copies added up to more than epsilon (0.1 over 11
    releases), so a run with epsilon equal to the budget, which compiled, was refused when it ran."""
    from fractions import Fraction

    component = IDPKMeans(n_clusters=2, epsilon=epsilon, bounds=BOUNDS, schedule="uniform", rounds=rounds)
    releases = component.epsilons()
    assert len(releases) == rounds + 1
    assert sum(Fraction(e) for e in releases) <= Fraction(epsilon)
    assert releases[0] >= math.nextafter(epsilon / (rounds + 1), 0.0) - 1e-30  # at most a few ulps below
    release = privclust.run({"privacy": {"epsilon": 2 * epsilon},  # add/remove: the file's figure counts twice
                             "steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": epsilon, "bounds": BOUNDS,
                                        "schedule": "uniform", "rounds": rounds}]}, frame, seed=0)
    assert release.spent[0] <= epsilon


def test_the_sums_of_neighbours_differ_by_no_more_than_the_sensitivity_exactly():
    """Floating-point sums round at every addition: with record 0 = 1.0 first, each of the others
    (1.5 2^-53) rounded the running sum up by a quarter ulp, so the computed sums of the data with and
    without record 0 differed by more than 1, the record's own contribution (Casacuberta et al. 2022).
    The sums are now exact."""
    from fractions import Fraction

    unit = np.concatenate([[[1.0]], np.full((4000, 1), 1.5 * 2.0**-53)])
    labels = np.zeros(len(unit), dtype=np.int64)
    with_it, n_with = _kmeans.cluster_sums(unit, labels, 1)
    without, n_without = _kmeans.cluster_sums(unit[1:], labels[1:], 1)
    shift = abs(Fraction(with_it[0, 0]) - Fraction(without[0, 0])) + abs(Fraction(n_with[0]) - Fraction(n_without[0]))
    assert shift <= Fraction(_kmeans.round_sensitivity(1)[0])
    rng = np.random.default_rng(3)
    unit = rng.uniform(0, 1, (5000, 2))
    sums, _ = _kmeans.cluster_sums(unit, labels=np.zeros(5000, dtype=np.int64), k=1)
    grid = np.rint(unit * 2.0**_kmeans.SUM_BITS) / 2.0**_kmeans.SUM_BITS
    assert all(Fraction(sums[0, j]) == sum(Fraction(v) for v in grid[:, j]) for j in range(2))  # exact


def test_assigning_to_many_centres_keeps_the_distance_blocks_small():
    """n_clusters may exceed the number of records; the distance blocks were 16384 rows x k, 2.6 GB for
    k = 20 000 (here 4096 x 4096: 128 MB twice over). They now hold at most BLOCK_ENTRIES entries."""
    import tracemalloc

    rng = np.random.default_rng(0)
    unit, centres = rng.uniform(0, 1, (4096, 2)), rng.uniform(0, 1, (4096, 2))
    tracemalloc.start()
    try:
        labels = _kmeans.assign(unit, centres)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # three temporaries of BLOCK_ENTRIES doubles (16 MB each); 256 MB before
    brute = np.argmin(((unit[:64, None, :] - centres[None, :, :]) ** 2).sum(axis=2), axis=1)
    assert np.array_equal(labels[:64], brute)


@pytest.mark.parametrize("key", ["rounds", "max_iter"])
def test_a_number_of_rounds_beyond_a_million_is_a_parameter_error(key):
    """The uniform schedule lists the epsilon of every release when the step is made: rounds = max_iter =
    10^10 ran out of memory there (a MemoryError, not a PrivclustError)."""
    other = {"rounds": 5, "max_iter": 2 * 10**6} if key == "max_iter" else {"rounds": 2 * 10**6, "max_iter": 2 * 10**6}
    with pytest.raises(ParameterError, match=key):
        IDPKMeans(n_clusters=2, epsilon=1.0, bounds=BOUNDS, schedule="uniform", **other)
    IDPKMeans(n_clusters=2, epsilon=1.0, bounds=BOUNDS, schedule="uniform", rounds=10**6, max_iter=10**6)


@pytest.mark.parametrize("key", ["n_clusters", "n_blocks"])
def test_more_than_65536_clusters_or_blocks_is_a_parameter_error_not_a_memory_error(key):
    """More clusters than records are allowed (the number of records is private under add/remove), so the
    cap does not depend on the data: n_blocks = 10^9 asked for 7.45 GiB (a MemoryError) before it."""
    kwargs = {"n_clusters": 2, "n_blocks": 10**9} if key == "n_blocks" else {"n_clusters": 10**9}
    with pytest.raises(ParameterError, match=key):
        IDPKMeans(epsilon=1.0, bounds=BOUNDS, **kwargs)
    IDPKMeans(n_clusters=2, n_blocks=1 << 16, epsilon=1.0, bounds=BOUNDS)


def test_with_dp_bounds_the_centres_are_stated_at_the_epsilon_of_the_bounds_and_the_rounds_together():
    # The released centres are placed within the DP bounds (data units = low + unit centre x width), so the bounds'
    # epsilon is part of theirs: the summary said "the released centres ... are 0.75-DP" of centres that cost 1.25.
    data, _ = blobs()
    component = IDPKMeans(n_clusters=3, epsilon=1.0, bounds="dp", bounds_range={"x": [-10, 20], "y": [-10, 20]},
                          bounds_epsilon=0.5)
    _, context = fit(component, data, budget=Budget(epsilon=3.0))  # add/remove 1.5, counted twice
    statement = context.ledger.of_kind("guarantee")[0].statement
    total = context.spent[0]
    rounds = total - 0.5
    assert f"the released centres (and noisy counts) are {privclust.at_least(total)}-DP" in statement
    assert f"are {privclust.at_least(rounds)}-DP" not in statement
    assert "bounds" in statement
