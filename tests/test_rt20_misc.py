"""Red-team audit rt20 (findings F2, F4, F6): a vacuous k from fuzzy-microaggregation's n_clusters, a budget at the
largest double, and seeded stratified releases that depended on processes=."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import BudgetExceededError, DataError, RecipeError
from privclust.accountants import within_budget


def _sixty() -> pd.DataFrame:
    rng = np.random.default_rng(20)
    return pd.DataFrame({"a": rng.uniform(1, 10, 60).round(3), "b": rng.uniform(1, 10, 60).round(3)})


def _stratified() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 40
    return pd.DataFrame({"region": ["n"] * 20 + ["s"] * 20, "g": (["x"] * 10 + ["y"] * 10) * 2,
                         "a": rng.normal(50, 10, n).round(2), "b": rng.normal(20, 5, n).round(2)})


# -- F2: n_clusters above N / 2 gave "probabilistic k-anonymity (k = 1)" ------------------------------------------


@pytest.mark.parametrize("step", [{"n_clusters": 60}, {"n_clusters": 31},
                                  {"clusterer": {"use": "fcm", "n_clusters": 40}}])
def test_n_clusters_leaving_clusters_of_one_record_is_refused(step):
    """rt20 F2: floor(N / n_clusters) = 1 was claimed as probabilistic k-anonymity with k = 1 (and the host stated
    "k-anonymous with k = 1"); k = 1 itself is refused. Now a DataError names n_clusters, the number of records and
    the largest n_clusters that works."""
    recipe = {"steps": [{"use": "fuzzy-microaggregation", **step}]}
    with pytest.raises(DataError, match=r"n_clusters = \d+ leaves fewer than 2 records per cluster for the 60 "
                                        r"records.*give n_clusters = 30 or fewer"):
        privclust.run(recipe, _sixty(), seed=1)
    with pytest.raises(DataError, match=r"steps\[0\] \(fuzzy-microaggregation\): fuzzy-microaggregation: "
                                        r"n_clusters = 61 leaves fewer than 2 records"):  # before the run
        privclust.run({"steps": [{"use": "fuzzy-microaggregation", "n_clusters": 61}]}, _sixty(), seed=1)


def test_n_clusters_at_half_the_records_is_k_2():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "fuzzy-microaggregation", "n_clusters": 30}]}, _sixty(), seed=1)
    assert "probabilistic k-anonymity (k = 2)" in release.verdict
    assert "k = 1" not in release.verdict


# -- F4: a budget at the largest double admitted a total of inf -------------------------------------------------


def test_budget_at_the_largest_double_refuses_an_infinite_total():
    """rt20 F4: ``limit * (1 + slack)`` overflowed to inf at the largest double, so ``inf <= inf`` admitted any
    spend; two laplace steps of 1e308 under that budget ran and reported spent epsilon inf."""
    bounds = {"a": [0, 10], "b": [0, 10]}
    steps = [{"use": "laplace", "epsilon": 1e308, "bounds": bounds, "columns": [c]} for c in ("a", "b")]
    recipe = {"privacy": {"epsilon": 1.7976931348623157e308}, "steps": steps}
    # refused before any data are read: the planned total (inf) is over the budget; it used to be checked only when
    # finite, so the recipe compiled and step 1 was refused after step 0 had released
    with pytest.raises(RecipeError, match=r"privacy\.epsilon.*the steps need at least epsilon = inf"):
        privclust.compile(recipe)
    context = privclust.PrivacyContext(seed=1, budget=privclust.Budget(epsilon=1.7976931348623157e308))
    cost = {"epsilon": 1e308, "mechanism": "laplace", "sensitivity": 1.0, "relation": "replace-one", "covers": "a"}
    context.spend(**cost)
    with pytest.raises(BudgetExceededError):
        context.spend(**cost)
    assert len(context.ledger) == 1


def test_within_budget_is_overflow_safe():
    big = np.finfo(float).max
    assert not within_budget(np.inf, big, 2)
    assert within_budget(big, big, 2)
    assert not within_budget(np.nan, big, 2)
    assert within_budget(np.inf, np.inf, 2)
    assert within_budget(0.1 + 0.2, 0.3, 2)  # the documented rounding slack
    assert not within_budget(1.0 + 1e-9, 1.0, 2)
    # near the top the slack is the same relative few ulps, never more
    assert within_budget(np.nextafter(big / 2, np.inf), big / 2, 2)
    assert not within_budget(big, big / 2, 2)


# -- F6: a seeded stratified release depended on processes= -------------------------------------------------------


@pytest.mark.parametrize("step", [
    {"use": "laplace", "epsilon": 1, "bounds": {"a": [0, 100], "b": [0, 50]}, "columns": ["a", "b"]},
    {"use": "fuzzy-microaggregation", "k": 3, "columns": ["a", "b"]},
    {"use": "fuzzy-microaggregation", "k": 3, "columns": ["a", "b"], "within": ["g"]},
], ids=["laplace", "fuzzy-microaggregation", "fuzzy-microaggregation-within"])
def test_same_seed_same_release_in_process_and_with_processes(step):
    """rt20 F6: in one process every stratum drew from the run's stream, while processes= gives each stratum a seed
    of its own; the same seed gave two releases. Now run(...), processes=1 and processes=2 release the same."""
    second = {"use": "laplace", "epsilon": 1, "bounds": {"b": [0, 50]}, "columns": ["b"]}  # a stratum's next draws
    recipe = {"roles": {"strata": "region"}, "steps": [step, second]}
    data = _stratified()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        here = privclust.run(recipe, data, seed=3)
        one = privclust.run(recipe, data, seed=3, processes=1)
        two = privclust.run(recipe, data, seed=3, processes=2)
        other = privclust.run(recipe, data, seed=4)
    pd.testing.assert_frame_equal(here.data, one.data)
    pd.testing.assert_frame_equal(here.data, two.data)
    assert not here.data.equals(other.data)
    assert here.verdict == one.verdict == two.verdict
    assert [e.statement for e in here.ledger.entries] == [e.statement for e in two.ledger.entries]
