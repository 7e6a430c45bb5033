"""Evaluators of the categorical key variables: frequencies, individual risk, linkage within key cells."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset
from scipy.stats import nbinom

import privclust
from privclust import DataError, EvaluationInputs
from privclust_plugins import _microdata_metrics as mm
from privclust_plugins.microdata_evaluators import IndividualRisk, KeyFrequencies, KeyLinkage


def _inputs(original, protected, columns=("x",)):
    return EvaluationInputs(original=original, protected=protected, columns=tuple(columns),
                            labels=pd.DataFrame(index=original.index))


def test_key_cells_count_combinations_with_missing_values_as_a_category():
    keys = pd.DataFrame({"sex": [1, 1, 2, 2, 2, np.nan], "region": ["a", "a", "a", "b", "b", "b"]})
    codes, sizes = mm.key_cells(keys)
    assert sizes.tolist() == [2, 2, 1, 2, 2, 1]
    assert codes[0] == codes[1] and codes[3] == codes[4]
    assert len(set(codes.tolist())) == 4


@pytest.mark.parametrize("f, p", [(1, 0.3), (1, 0.999), (2, 0.3), (2, 0.5), (4, 0.2), (7, 0.6), (50, 0.05)])
def test_individual_risk_is_the_negative_binomial_expectation(f, p):
    h = np.arange(0, 200_000)
    brute = np.sum(nbinom.pmf(h, f, p) / (f + h))
    assert mm.individual_risk(np.array([f]), np.array([f / p]))[0] == pytest.approx(brute, rel=1e-9)


def test_individual_risk_closed_forms_and_edges():
    p = np.array([0.01, 0.3, 0.9])
    np.testing.assert_allclose(mm.individual_risk(np.ones(3), 1 / p), p * np.log(1 / p) / (1 - p), rtol=1e-12)
    np.testing.assert_allclose(mm.individual_risk(2 * np.ones(3), 2 / p),
                               p / (1 - p) ** 2 * ((1 - p) + p * np.log(p)), rtol=1e-12)
    # no weights (F = f): 1/f; p near 1 without cancellation; a large cell with tiny p stays finite
    np.testing.assert_allclose(mm.individual_risk(np.array([1, 2, 5]), np.array([1, 2, 5])), [1, 0.5, 0.2])
    assert mm.individual_risk(np.array([2]), np.array([2 / (1 - 1e-12)]))[0] == pytest.approx(0.5, rel=1e-9)
    assert mm.individual_risk(np.array([300]), np.array([300_000]))[0] == pytest.approx(3.3444703823e-06, rel=1e-8)
    assert mm.individual_risk(np.array([3]), np.array([3e9]))[0] == pytest.approx(5e-10, rel=1e-6)


def test_key_frequencies_by_hand():
    frame = pd.DataFrame({"sex": [1, 1, 1, 2, 2, 3], "age": [30, 30, 30, 40, 41, 50], "x": np.arange(6.0)})
    out = KeyFrequencies(keys=("sex", "age"), k=3).evaluate(_inputs(frame, frame))
    assert out["combinations"] == 4
    assert out["sample_uniques"] == 3
    assert out["records_below_k"] == 3 and out["share_below_k"] == 0.5
    assert out["min_cell_size"] == 1
    coarse = frame.assign(age=[30, 30, 30, 40, 40, 40], sex=[1, 1, 1, 2, 2, 2])
    after = KeyFrequencies(keys=("sex", "age"), k=3).evaluate(_inputs(frame, coarse))
    assert after["sample_uniques"] == 0 and after["sample_uniques_original"] == 3


def test_individual_risk_uses_the_weights():
    frame = pd.DataFrame({"sex": [1, 1, 2, 2, 2, 3], "w": [10.0, 10, 5, 5, 5, 1], "x": np.arange(6.0)})
    out = IndividualRisk(keys=("sex",), weight="w", threshold=0.5).evaluate(_inputs(frame, frame))
    expected = mm.individual_risk(np.array([2, 2, 3, 3, 3, 1]), np.array([20.0, 20, 15, 15, 15, 1]))
    assert out["expected_reidentifications"] == pytest.approx(expected.sum())
    assert out["max_risk"] == 1.0  # a sample unique with weight 1 is a population unique
    assert out["records_above_threshold"] == 1
    unweighted = IndividualRisk(keys=("sex",)).evaluate(_inputs(frame, frame))
    assert unweighted["expected_reidentifications"] == pytest.approx(3.0)  # sum of 1/f = number of cells


def test_linkage_within_key_cells_finds_what_plain_linkage_misses():
    rng = np.random.default_rng(0)
    n = 400
    keys = rng.integers(0, 40, n)
    x = rng.normal(size=n)
    original = pd.DataFrame({"key": keys, "x": x})
    protected = original.assign(x=x + rng.normal(0, 1.0, n))  # heavy noise: hard to link on x alone
    both = KeyLinkage(keys=("key",)).evaluate(_inputs(original, protected))
    plain = privclust.get_registry().create("evaluators", "dbrl").evaluate(_inputs(original, protected))
    assert both["key_dbrl"] > plain["dbrl"] + 0.2
    # brute force: within each cell, the nearest original is the record's own
    own = 0.0
    for i in range(n):
        same = np.flatnonzero(keys == keys[i])
        d = np.abs((protected.x[i] - original.x[same]) / x.std())
        near = same[np.isclose(d, d.min(), rtol=1e-9, atol=1e-12)]
        own += (i in near) / len(near)
    assert both["key_dbrl"] == pytest.approx(own / n)
    # a record whose released key is its alone is linked for sure (an intruder links within the released cells)
    moved = protected.assign(key=np.where(np.arange(n) < 100, 1000 + np.arange(n), keys))
    assert KeyLinkage(keys=("key",)).evaluate(_inputs(original, moved))["key_dbrl_linked_records"] >= 100


def test_bad_keys_and_weights_are_named():
    frame = pd.DataFrame({"sex": [1, 2], "w": [1.0, 0.0], "x": [0.0, 1.0]})
    with pytest.raises(DataError, match="name the categorical key variables"):
        KeyFrequencies().evaluate(_inputs(frame, frame))
    with pytest.raises(DataError, match="'region' are not in the protected data"):
        KeyFrequencies(keys=("sex", "region")).evaluate(_inputs(frame, frame))
    with pytest.raises(DataError, match="weight column 'w' has 1 value"):
        IndividualRisk(keys=("sex",), weight="w").evaluate(_inputs(frame, frame))
    with pytest.raises(DataError, match="weight column 'nope' is not in the data"):
        IndividualRisk(keys=("sex",), weight="nope").evaluate(_inputs(frame, frame))


def test_the_survey_file_before_and_after_numeric_microaggregation():
    require_dataset("sdc_testdata.csv")
    survey = privclust.datasets.load("sdc_testdata")
    keys = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
    recipe = {
        "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3},
                   "columns": ["expend", "income", "savings"]}],
        "evaluate": [{"use": "key-frequencies", "keys": keys}, {"use": "dbrl", "with_unchanged": False},
                     {"use": "individual-risk", "keys": keys, "weight": "sampling_weight"},
                     {"use": "key-linkage", "keys": keys}],
    }
    release = privclust.run(recipe, survey, seed=1)
    ev = release.evaluation
    assert ev("sample_uniques") == ev("sample_uniques_original") > 0  # the keys were not touched
    assert 0 < ev("mean_risk") < 1 and np.isfinite(ev("expected_reidentifications"))
    assert ev("key_dbrl") > ev("dbrl") + 0.3  # the keys make linkage far easier than the masked columns alone


@pytest.mark.parametrize("name, figure", [("sse-sst", "sse_sst"), ("il1s", "il1s"), ("moments", "var_rel_change"),
                                          ("moments", "corr_abs_change")])
def test_weighted_information_loss_equals_the_replicated_file(name, figure):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 3))
    y = x + rng.normal(0, 0.4, (40, 3))
    w = rng.integers(1, 5, 40)
    cols = ["a", "b", "c"]
    original = pd.DataFrame(x, columns=cols).assign(w=w.astype(float))
    protected = pd.DataFrame(y, columns=cols).assign(w=w.astype(float))
    rep = np.repeat(np.arange(40), w)
    registry = privclust.get_registry()
    weighted = registry.create("evaluators", {"use": name, "weight": "w"}).evaluate(
        _inputs(original, protected, cols))
    replicated = registry.create("evaluators", name).evaluate(
        _inputs(original.iloc[rep].reset_index(drop=True), protected.iloc[rep].reset_index(drop=True), cols))
    unweighted = registry.create("evaluators", name).evaluate(_inputs(original, protected, cols))
    assert weighted[figure] == pytest.approx(replicated[figure], rel=1e-9)
    assert weighted[figure] != pytest.approx(unweighted[figure], rel=1e-6)


def test_every_evaluator_reads_the_weights_of_the_original_file():
    # a weight column a step masked was read as released by individual-risk and as original by sse-sst
    from privclust_plugins.microdata_evaluators import SseSst

    x = pd.DataFrame({"k": ["a", "a", "b", "b", "c"], "v": [1.0, 2, 3, 4, 5], "w": [10.0, 10, 50, 50, 2]})
    y = x.assign(v=[1.5, 1.5, 3.5, 3.5, 5], w=[1.0, 1, 1, 1, 1])
    inp = EvaluationInputs(original=x, protected=y, columns=("v",), labels=pd.DataFrame(index=x.index))
    risk = IndividualRisk(keys=("k",), weight="w").evaluate(inp)
    expected = mm.individual_risk(np.array([2.0, 2, 2, 2, 1]), np.array([20.0, 20, 100, 100, 2]))
    assert risk["mean_risk"] == pytest.approx(expected.mean())
    same = EvaluationInputs(original=x, protected=x.assign(v=y["v"]), columns=("v",),
                            labels=pd.DataFrame(index=x.index))
    assert SseSst(weight="w").evaluate(inp)["sse_sst"] == pytest.approx(SseSst(weight="w").evaluate(same)["sse_sst"])
    assert IndividualRisk(keys=("k",), weight="w").evaluate(same) == risk


def test_individual_risk_with_huge_weights():
    # a sample unique of weight 1e17 had risk 1 (1 - p rounds to 1, log1p(-1) = -inf); weights of 1e308 overflowed
    r = mm.individual_risk(np.array([1.0, 1.0, 2.0]), np.array([1e17, np.inf, 1e17]))
    assert r[0] == pytest.approx(1e-17 * np.log(1e17), rel=1e-12)
    assert r[1] == 0.0
    assert r[2] == pytest.approx(1e-17 / 2 * 2.0, rel=1e-6)  # p / f * 2F1(1, 1; 3; 1) = p / f * 2
    x = pd.DataFrame({"k": ["a", "a", "b"], "v": [1.0, 2, 3], "w": [1e308, 1e308, 1e308]})
    inp = EvaluationInputs(original=x, protected=x, columns=("v",), labels=pd.DataFrame(index=x.index))
    figures = IndividualRisk(keys=("k",), weight="w").evaluate(inp)
    assert figures["max_risk"] < 1e-300
    assert np.isfinite(figures["mean_risk"])


def test_the_public_strata_count_as_key_variables():
    # strata are public and released unchanged: counting the keys alone called a record that is unique
    # within its stratum safe (no sample unique, risk 1/2)
    df = pd.DataFrame({"region": ["n", "n", "s", "s"], "sex": ["f", "m", "f", "m"],
                       "inc": [1.0, 2.0, 3.0, 4.0]})
    inp = EvaluationInputs(original=df, protected=df, columns=("inc",), labels=pd.DataFrame(index=df.index),
                           roles=privclust.Roles(strata="region", keys="sex"))
    freq = KeyFrequencies().evaluate(inp)
    assert freq["sample_uniques"] == 4.0 and freq["combinations"] == 4.0
    assert KeyFrequencies().evaluated_on(inp) == {"columns": ["sex", "region"]}
    assert IndividualRisk().evaluate(inp)["mean_risk"] == 1.0
    assert KeyLinkage().evaluate(inp)["key_dbrl"] == 1.0
    alone = KeyFrequencies(with_strata=False)
    assert alone.evaluate(inp)["sample_uniques"] == 0.0 and alone.evaluated_on(inp) == {"columns": ["sex"]}
