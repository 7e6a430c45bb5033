"""The key-risk measures: l-diversity, SUDA2, household risk, global risk (privclust_plugins.key_risk)."""

from __future__ import annotations

import importlib.util
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset

import privclust
from privclust import DataError, EvaluationInputs, ParameterError
from privclust_plugins import _key_risk as kr
from privclust_plugins.key_risk import GlobalRisk, HouseholdRisk, LDiversity, Suda2, suda2_scores

SURVEY_KEYS = ["roof", "walls", "water", "electcon", "relat", "sex"]


def _inputs(frame, roles=None, original=None):
    return EvaluationInputs(original=frame if original is None else original, protected=frame, columns=(),
                            labels=pd.DataFrame(index=frame.index), roles=roles)


# ---------------------------------------------------------------------------
# SUDA2
# ---------------------------------------------------------------------------


def _matching(codes, i, subset):
    a, r = codes[:, list(subset)], codes[i, list(subset)]
    return np.all((a == r) | (a < 0) | (r < 0), axis=1)


def _brute_msus(codes, top):
    """MSUs by definition: every subset, every record, every proper subset checked."""
    n, m = codes.shape
    unique = {s: np.array([_matching(codes, i, s).sum() == 1 for i in range(n)])
              for size in range(m + 1) for s in itertools.combinations(range(m), size)}
    out = np.zeros((n, m), dtype=np.int64)
    for size in range(1, top + 1):
        for s in itertools.combinations(range(m), size):
            for i in range(n):
                smaller = (t for k in range(size) for t in itertools.combinations(s, k))
                if unique[s][i] and not any(unique[t][i] for t in smaller):
                    out[i, size - 1] += 1
    return out


def _brute_scores(codes, by_size, f):
    """sdcMicro's Suda2.h, written out: scores (M - k)!, DIS from uniques and pairs, DIS-SUDA."""
    n, m = codes.shape
    scores = np.array([sum(by_size[i, k] * math.factorial(m - k - 1) for k in range(m)) for i in range(n)], float)
    full = np.array([_matching(codes, i, range(m)).sum() for i in range(n)])
    u, p = np.sum(full == 1), np.sum(full == 2)
    dis = u * f / (u * f + p * (1 - f)) if u + p else 0.0
    q = 1 + (8 - m) / 20
    adj = sum(s ** -q for s in scores if s > 0)
    dis_scores = [1 / (1 + (u / dis - u) / (s ** q * adj)) if s > 0 else 0.0 for s in scores]
    return scores, np.array(dis_scores), dis


@pytest.mark.parametrize("seed", range(30))
def test_suda2_agrees_with_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 28)), int(rng.integers(1, 5))
    codes = rng.integers(0, int(rng.integers(1, 4)), size=(n, m))
    if seed % 2:  # missing values, which match any category
        codes[rng.random((n, m)) < 0.2] = -1
    top = int(rng.integers(1, m + 1))
    found = kr.suda2(codes, top, dis_fraction=0.05)
    np.testing.assert_array_equal(found["msus_by_size"], _brute_msus(codes, top))
    scores, dis_scores, dis = _brute_scores(codes, found["msus_by_size"], 0.05)
    np.testing.assert_allclose(found["scores"], scores)
    np.testing.assert_allclose(found["dis_scores"], dis_scores, rtol=1e-12)
    assert found["dis"] == pytest.approx(dis)


def test_suda2_by_hand():
    # sdcMicro's own small example (tests/testthat/test_suda2.R): a = 2, 1, 1; b = 0, 3, 0; c = 0, 6, 0
    frame = pd.DataFrame({"a": [2, 1, 1], "b": [0, 3, 0], "c": [0, 6, 0]})
    out = suda2_scores(frame, ["a", "b", "c"])
    # record 0: {a}; record 1: {b}, {c}; record 2: {a, b}, {a, c}; M = 3 keys: size 1 scores 2! = 2, size 2 1! = 1
    assert out[["msu_1", "msu_2", "msu_3"]].to_numpy().tolist() == [[1, 0, 0], [2, 0, 0], [0, 2, 0]]
    assert out["score"].tolist() == [2.0, 4.0, 2.0]
    # every record unique, none in a pair: dis = 1 and every DIS-SUDA score 1
    assert out["dis_score"].tolist() == [1.0, 1.0, 1.0]


def test_suda2_missing_value_is_never_part_of_an_msu_and_matches_any_category():
    frame = pd.DataFrame({"a": [1, 1, 2], "b": [5, np.nan, 5]})
    out = suda2_scores(frame, ["a", "b"])
    # record 2 is unique on a = 2; record 0 (1, 5) is matched by record 1 (1, missing): no MSU; record 1 neither
    assert out["score"].tolist() == [0.0, 0.0, 1.0]


def test_suda2_evaluator_figures_and_strata_count_as_keys():
    frame = pd.DataFrame({"a": [2, 1, 1, 3, 3], "r": [1, 1, 2, 1, 1]})
    roles = privclust.Roles(keys=("a",), strata=("r",))
    out = Suda2(dis_fraction=0.1).evaluate(_inputs(frame, roles))
    # keys a and r: record 0 unique on a = 2, record 1 on (a, r) = (1, 1), record 2 on r = 2; records 3, 4 a pair
    assert out["records_with_msu"] == 3 and out["records_with_msu_of_one_key"] == 2
    assert out["msus"] == 3  # {a} for record 0, {a, r} for record 1, {r} for record 2
    assert out["dis"] == pytest.approx(3 * 0.1 / (3 * 0.1 + 2 * 0.9))
    alone = Suda2(with_strata=False).evaluate(_inputs(frame, roles))
    assert alone["records_with_msu"] == 1


def test_suda2_refuses_more_subsets_than_it_searches():
    frame = pd.DataFrame({f"k{i}": [0, 1] for i in range(20)})
    with pytest.raises(ParameterError, match="max_size = "):
        Suda2(keys=tuple(frame.columns)).evaluated_on(_inputs(frame))
    assert Suda2(keys=tuple(frame.columns), max_size=3).evaluate(_inputs(frame))["records_with_msu"] == 2


def test_suda2_on_the_survey_file():
    survey = pd.read_csv(require_dataset("sdc_testdata.csv"))
    out = suda2_scores(survey, ["urbrur", *SURVEY_KEYS])
    # an MSU makes its record unique on every key: the records of positive score are the 157 sample uniques
    assert int((out["score"] > 0).sum()) == 157
    assert out["score"].max() == 720.0  # one MSU of a single key of seven: (7 - 1)!
    assert 0 < out["dis_score"].max() < 1


# ---------------------------------------------------------------------------
# l-diversity
# ---------------------------------------------------------------------------


def test_l_diversity_by_hand():
    frame = pd.DataFrame({"sex": [1, 1, 1, 2, 2, 2, 2],
                          "ill": ["flu", "flu", "cold", "flu", "flu", "flu", "cold"]})
    out = LDiversity(keys=("sex",), sensitive="ill", l=2).evaluate(_inputs(frame))
    assert out["min_distinct_l"] == 2 and out["records_below_l"] == 0
    # cell sex = 2: flu 3/4, cold 1/4; exp(entropy) = exp(-(.75 ln .75 + .25 ln .25))
    assert out["min_entropy_l"] == pytest.approx(math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))))
    assert out["records_below_entropy_l"] == 7
    one = frame.assign(ill=["flu", "flu", "cold", "flu", "flu", "flu", "flu"])
    out = LDiversity(keys=("sex",), sensitive="ill", l=2).evaluate(_inputs(one))
    assert out["min_distinct_l"] == 1 and out["records_below_l"] == 4 and out["share_below_l"] == 4 / 7
    assert out["min_entropy_l"] == 1.0


def test_l_diversity_missing_key_matches_any_category_and_missing_sensitive_is_no_value():
    frame = pd.DataFrame({"sex": [1, 1, 2, np.nan], "ill": ["flu", "flu", "cold", "cold"]})
    distinct, _ = kr.l_diversity(kr.encode(frame[["sex"]]), kr.encode(frame[["ill"]])[:, 0])
    # the record of missing sex matches everyone (flu, cold); sex = 1 sees flu and the missing one's cold
    assert distinct.tolist() == [2, 2, 1, 2]
    frame.loc[3, "ill"] = np.nan
    distinct, _ = kr.l_diversity(kr.encode(frame[["sex"]]), kr.encode(frame[["ill"]])[:, 0])
    assert distinct.tolist() == [1, 1, 1, 2]


def _pycanon():
    if importlib.util.find_spec("pycanon") is None:
        pytest.skip("pycanon is not installed (pip install pycanon --no-deps: its pins of numpy, pandas and scipy "
                    "keep it out of the tests extra)")
    from pycanon import anonymity

    return anonymity


@pytest.mark.parametrize("seed", range(5))
def test_l_diversity_agrees_with_pycanon(seed):
    anonymity = _pycanon()
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.integers(0, 3, 200), "b": rng.integers(0, 4, 200), "s": rng.integers(0, 5, 200)})
    out = LDiversity(keys=("a", "b"), sensitive="s").evaluate(_inputs(frame))
    assert out["min_distinct_l"] == anonymity.l_diversity(frame, ["a", "b"], ["s"])
    assert math.floor(out["min_entropy_l"] + 1e-9) == anonymity.entropy_l_diversity(frame, ["a", "b"], ["s"])


def test_l_diversity_agrees_with_pycanon_on_the_survey_file():
    anonymity = _pycanon()
    survey = pd.read_csv(require_dataset("sdc_testdata.csv"))
    keys = ["urbrur", "roof", "walls", "water"]
    out = LDiversity(keys=tuple(keys), sensitive="relat", with_strata=False).evaluate(_inputs(survey))
    assert out["min_distinct_l"] == anonymity.l_diversity(survey, keys, ["relat"])
    assert math.floor(out["min_entropy_l"] + 1e-9) == anonymity.entropy_l_diversity(survey, keys, ["relat"])


# ---------------------------------------------------------------------------
# Household and global risk
# ---------------------------------------------------------------------------


def test_household_risk_formula():
    # no weights: r = 1 / f; sex = 1 cell of 2, sex = 2 cell of 1, sex = 3 cell of 4
    frame = pd.DataFrame({"sex": [1, 1, 2, 3, 3, 3, 3], "hid": [10, 10, 20, 20, 30, 30, 30]})
    roles = privclust.Roles(keys=("sex",), ids=("hid",))
    out = HouseholdRisk().evaluate(_inputs(frame, roles))
    households = [1 - (1 - 0.5) ** 2, 1 - (1 - 1.0) * (1 - 0.25), 1 - (1 - 0.25) ** 3]
    assert out["households"] == 3
    assert out["expected_households_reidentified"] == pytest.approx(sum(households))
    assert out["max_household_risk"] == 1.0
    per_record = [households[0]] * 2 + [households[1]] * 2 + [households[2]] * 3
    assert out["household_expected_reidentifications"] == pytest.approx(sum(per_record))
    assert out["household_global_risk"] == pytest.approx(sum(per_record) / 7)
    glob = GlobalRisk().evaluate(_inputs(frame, roles))
    assert glob["expected_reidentifications"] == pytest.approx(0.5 * 2 + 1 + 0.25 * 4)
    assert glob["global_risk"] == pytest.approx(3 / 7)
    assert glob["household_expected_reidentifications"] == out["household_expected_reidentifications"]


def test_household_risk_keeps_tiny_risks():
    per_household, _ = kr.household_risks(np.zeros(3, dtype=np.int64), np.full(3, 1e-18))
    assert per_household[0] == pytest.approx(3e-18, rel=1e-12)  # 1 - (1 - r)^3 in floats would be 0


def test_global_risk_equals_individual_risk_without_missing_values_and_counts_matches_with_them():
    survey_like = pd.DataFrame({"a": [1, 1, 2, 2, 3], "w": [10.0, 20.0, 5.0, 5.0, 50.0]})
    roles = privclust.Roles(keys=("a",), weight=("w",))
    inputs = _inputs(survey_like, roles)
    from privclust_plugins.microdata_evaluators import IndividualRisk

    assert GlobalRisk().evaluate(inputs)["expected_reidentifications"] == pytest.approx(
        IndividualRisk().evaluate(inputs)["expected_reidentifications"], rel=1e-12)
    holed = survey_like.assign(a=[1, 1, 2, np.nan, 3])
    # the missing value matches every record: f = 3, 3, 2, 5, 2 (sdcMicro's freqCalc), not a unique of its own
    f, sums = kr.match_totals(kr.encode(holed[["a"]]), holed["w"].to_numpy())
    assert f.tolist() == [3, 3, 2, 5, 2] and sums.tolist() == [35.0, 35.0, 10.0, 90.0, 55.0]
    assert GlobalRisk().evaluate(_inputs(holed, roles))["expected_reidentifications"] < 5


def test_global_risk_on_the_survey_file_is_the_individual_risk_sum():
    survey = pd.read_csv(require_dataset("sdc_testdata.csv"))
    roles = privclust.Roles(ids=("ori_hid",), weight=("sampling_weight",), strata=("urbrur",), keys=SURVEY_KEYS)
    out = GlobalRisk().evaluate(_inputs(survey, roles))
    assert out["expected_reidentifications"] == pytest.approx(10.775525, abs=1e-6)
    assert out["households"] == 1000


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_sensitive_variable_that_is_a_key_is_refused():
    frame = pd.DataFrame({"sex": [1, 2], "region": [1, 1], "ill": [0, 1]})
    with pytest.raises(ParameterError, match="'sex' is also a key"):
        LDiversity(keys=("sex",), sensitive="sex").evaluated_on(_inputs(frame))
    roles = privclust.Roles(keys=("sex",), strata=("region",))
    with pytest.raises(ParameterError, match="'region' is also a stratum.*with_strata = false"):
        LDiversity(sensitive="region").evaluate(_inputs(frame, roles))
    assert LDiversity(sensitive="region", with_strata=False).evaluate(_inputs(frame, roles))["min_distinct_l"] == 1


def test_missing_sensitive_column_is_refused():
    frame = pd.DataFrame({"sex": [1, 2]})
    with pytest.raises(DataError, match="sensitive column 'ill' is not in the protected data"):
        LDiversity(keys=("sex",), sensitive="ill").evaluate(_inputs(frame))


def test_household_risk_needs_the_ids_role():
    frame = pd.DataFrame({"sex": [1, 2], "hid": [1, 1], "pid": [1, 2]})
    with pytest.raises(DataError, match=r"\[roles\] ids"):
        HouseholdRisk(keys=("sex",)).evaluated_on(_inputs(frame))
    two = privclust.Roles(keys=("sex",), ids=("hid", "pid"))
    with pytest.raises(DataError, match='household = "hid"'):
        HouseholdRisk().evaluate(_inputs(frame, two))
    assert HouseholdRisk(household="hid").evaluate(_inputs(frame, two))["households"] == 1
    # global-risk gives the household figures only when the household is known
    assert "households" not in GlobalRisk().evaluate(_inputs(frame, two))
    with pytest.raises(DataError, match="household column 'hh' is not in the data"):
        HouseholdRisk(keys=("sex",), household="hh").evaluate(_inputs(frame))
    with pytest.raises(DataError, match="1 missing value"):
        HouseholdRisk(keys=("sex",), household="hid").evaluate(_inputs(frame.assign(hid=[1, np.nan])))


def test_the_evaluators_are_registered_and_run_in_a_recipe():
    names = {"l-diversity", "suda2", "household-risk", "global-risk"}
    assert names <= set(privclust.Registry(use_env=False).load().names("evaluators"))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=60), "sex": rng.integers(0, 2, 60), "ill": rng.integers(0, 3, 60),
                          "hid": np.repeat(np.arange(20), 3)})
    recipe = {"roles": {"keys": ["sex"], "ids": ["hid"]},
              "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}, "columns": ["x"]}],
              "evaluate": [{"use": "l-diversity", "sensitive": "ill"}, {"use": "suda2"}, {"use": "household-risk"},
                           {"use": "global-risk"}]}
    release = privclust.run(recipe, frame, seed=1)
    assert release.evaluation("records_with_msu") == 0
    assert release.evaluation("min_distinct_l") == 3


def test_the_risk_utility_map_refuses_an_l_diversity_as_an_axis():
    # min_distinct_l is better when higher: the map's Pareto front and "lower left is better" would read it backwards
    from privclust.plots import HIGHER_IS_BETTER

    assert "l-diversity.min_distinct_l".startswith(HIGHER_IS_BETTER)
    assert "l-diversity.min_entropy_l".startswith(HIGHER_IS_BETTER)
    assert not "l-diversity.records_below_l".startswith(HIGHER_IS_BETTER)
    # the household figures open with a risk: a map without a named risk figure takes the first "...risk..." one
    assert next(iter(HouseholdRisk.metric_descriptions)) == "mean_household_risk"


def test_the_evaluators_leave_their_inputs_unchanged():
    frame = pd.DataFrame({"sex": [1, 1, 2, np.nan, 2], "region": ["a", "b", "a", "a", None],
                          "ill": [0, 1, 1, 0, np.nan], "hid": [1, 1, 2, 2, 3], "w": [2.0, 2, 3, 3, 1]})
    roles = privclust.Roles(keys=("sex",), strata=("region",), ids=("hid",), weight=("w",))
    given = frame.copy(deep=True)
    inputs = _inputs(given, roles, original=given)
    for evaluator in (LDiversity(sensitive="ill"), Suda2(), HouseholdRisk(), GlobalRisk()):
        first = evaluator.evaluate(inputs)
        assert evaluator.evaluate(inputs) == first
    pd.testing.assert_frame_equal(given, frame)
