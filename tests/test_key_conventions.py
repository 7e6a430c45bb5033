"""One convention for missing key values: every key figure (key-frequencies, individual-risk, l-diversity, suda2,
household-risk, global-risk and the host's verdict) counts a missing key value as matching any category
(sdcMicro's freqCalc), so that they agree on a file with suppressed values."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import EvaluationInputs
from privclust_plugins import _key_risk as kr
from privclust_plugins import _microdata_metrics as mm
from privclust_plugins.key_risk import GlobalRisk, HouseholdRisk, LDiversity, Suda2
from privclust_plugins.microdata_evaluators import IndividualRisk, KeyFrequencies

KEYS = ("k0", "k1", "k2")


def _suppressed(n: int = 80, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.choice(list("abc"), n) for c in KEYS})
    frame = frame.assign(w=rng.uniform(1.0, 30.0, n), hid=np.arange(n), sens=np.arange(n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"roles": {"keys": list(KEYS)},
                                 "steps": [{"use": "local-suppression", "k": 3, "columns": list(KEYS)}]},
                                frame, seed=1)
    return frame, release


def _inputs(original, protected, roles):
    return EvaluationInputs(original=original, protected=protected, columns=(),
                            labels=pd.DataFrame(index=original.index), roles=roles)


def test_key_frequencies_count_a_missing_value_as_matching_any_category():
    """sdcMicro's freqCalc: a record missing a key matches every record that agrees on its other keys; it was a
    category of its own, which made the record a sample unique."""
    frame = pd.DataFrame({"a": [1, 1, 2, np.nan, 3], "b": ["x", "x", "y", "y", "z"]})
    out = KeyFrequencies(keys=("a", "b"), k=2).evaluate(_inputs(frame, frame, None))
    f, _ = mm.key_frequencies(frame[["a", "b"]])
    assert f.tolist() == [2, 2, 2, 2, 1]  # (nan, y) matches (2, y); a category of its own left both alone
    assert out["sample_uniques"] == 1 and out["records_below_k"] == 1 and out["min_cell_size"] == 1
    assert out["combinations"] == 4  # distinct rows, a missing value counted as one value there


def test_individual_risk_matches_a_missing_value_with_any_category():
    frame = pd.DataFrame({"a": [1, 1, 2, np.nan, 3], "w": [10.0, 20.0, 5.0, 5.0, 50.0]})
    roles = privclust.Roles(keys=("a",), weight=("w",))
    holed = _inputs(frame, frame, roles)
    f, sums = kr.match_totals(kr.encode(frame[["a"]]), frame["w"].to_numpy())
    expected = mm.individual_risk(f, np.maximum(sums, f)).sum()
    assert IndividualRisk().evaluate(holed)["expected_reidentifications"] == pytest.approx(expected, rel=1e-12)
    # unweighted: the file is the population, risk 1/f with f = 3, 3, 2, 5, 2
    assert IndividualRisk(weight=None).evaluate(_inputs(frame, frame, privclust.Roles(keys=("a",))))[
        "expected_reidentifications"] == pytest.approx(1 / 3 + 1 / 3 + 1 / 2 + 1 / 5 + 1 / 2, rel=1e-12)


def test_every_key_figure_agrees_on_a_file_with_suppressed_values():
    frame, release = _suppressed()
    protected = release.data
    assert protected[list(KEYS)].isna().to_numpy().any()  # the suppression left holes
    roles = privclust.Roles(keys=KEYS, weight=("w",), ids=("hid",))
    inputs = _inputs(frame, protected, roles)
    freq = KeyFrequencies(k=3).evaluate(inputs)
    f, _ = mm.key_frequencies(protected[list(KEYS)])
    # the host: k = 3 holds under sdcMicro's convention, as key-frequencies now says (records below k: 0)
    keys = release.verification["keys"]
    assert keys.get("records_with_few_matches", keys["records_below_k"]) == freq["records_below_k"] == 0
    assert freq["min_cell_size"] == f.min() >= 3
    # individual-risk, global-risk and household-risk (one record per household) give one expected figure
    individual = IndividualRisk().evaluate(inputs)["expected_reidentifications"]
    assert GlobalRisk(household=None).evaluate(_inputs(frame, protected, privclust.Roles(keys=KEYS, weight=("w",))))[
        "expected_reidentifications"] == pytest.approx(individual, rel=1e-12)
    assert HouseholdRisk().evaluate(inputs)["household_expected_reidentifications"] == pytest.approx(individual,
                                                                                                     rel=1e-12)
    # l-diversity of a column unique per record: its l in a record's cell is the cell's size f
    ldiv = LDiversity(sensitive="sens", l=4).evaluate(inputs)
    assert ldiv["min_distinct_l"] == freq["min_cell_size"]
    assert ldiv["records_below_l"] == KeyFrequencies(k=4).evaluate(inputs)["records_below_k"]
    # unweighted, the expected re-identifications are the sum of 1/f
    unweighted = IndividualRisk().evaluate(_inputs(frame, protected, privclust.Roles(keys=KEYS)))
    assert unweighted["expected_reidentifications"] == pytest.approx(np.sum(1.0 / f), rel=1e-12)


def test_sample_uniques_agree_with_suda2_on_holes():
    """A record with an MSU is unique on the whole key set, and the other way round: suda2's records with an MSU
    are key-frequencies' sample uniques (with missing values matching any category in both)."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({c: rng.choice(list("abcdef"), 40) for c in KEYS})
    frame = frame.mask(rng.random(frame.shape) < 0.1)  # a record missing every key would match all: keep them few
    inputs = _inputs(frame, frame, privclust.Roles(keys=KEYS))
    uniques = KeyFrequencies().evaluate(inputs)["sample_uniques"]
    assert uniques > 0
    assert Suda2().evaluate(inputs)["records_with_msu"] == uniques


def test_the_verdict_says_its_expected_reidentifications_are_the_number_of_key_cells():
    """The verdict's figure (sum of 1/f, 412 on the survey file) read as sdcMicro's expected re-identifications
    (10.78): it names its intruder and says it is the number of key cells, and the weighted figure is at most it."""
    frame, release = _suppressed()
    figures = release.verification["keys"]
    verdict = release.verdict
    cells = figures["cells"]
    assert figures["expected_reidentifications"] == cells
    assert (f"expected re-identifications by an intruder who knows who is in the file: {cells}, the number of key "
            "cells (a missing value counted as a value of its own)") in verdict
    assert "for an intruder who does not know who was sampled, is at most this" in verdict
    roles = privclust.Roles(keys=KEYS, weight=("w",))
    weighted = IndividualRisk().evaluate(_inputs(frame, release.data, roles))["expected_reidentifications"]
    unweighted = IndividualRisk().evaluate(_inputs(frame, release.data, privclust.Roles(keys=KEYS)))
    assert weighted <= unweighted["expected_reidentifications"] <= cells


def test_the_host_s_matching_count_is_key_frequencies_records_below_k_on_a_holed_file():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({c: rng.choice(list("abcd"), 50) for c in KEYS})
    frame = frame.mask(rng.random(frame.shape) < 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"roles": {"keys": list(KEYS)}}, frame, seed=1)  # an assessment: the file as it is
    figures = release.verification["keys"]
    ours = KeyFrequencies(k=figures["k"]).evaluate(_inputs(frame, frame, privclust.Roles(keys=KEYS)))
    assert figures["missing_values"] > 0 and 0 < figures["records_with_few_matches"] < figures["records_below_k"]
    assert figures["records_with_few_matches"] == ours["records_below_k"]
