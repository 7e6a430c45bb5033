"""Microdata evaluators: hand computations, trends, partitions, recipes."""

from __future__ import annotations

import statistics
import warnings
from types import SimpleNamespace
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset
from hypothesis import given, settings
from hypothesis import strategies as st

import privclust
import privclust.datasets
import privclust.testing
from privclust import DataError, EvaluationInputs, Masked, Partition, TopMemberships
from privclust_plugins import _microdata_metrics as mm
from privclust_plugins.mdav import MDAV
from privclust_plugins.microdata_evaluators import (
    DBRL,
    EditViolations,
    GroupSizes,
    IL1s,
    IntervalDisclosure,
    Moments,
    SseSst,
    TransparencyRisk,
)

PLAIN = (SseSst(), IL1s(), Moments(), DBRL(), IntervalDisclosure())


def inputs(original, protected, outcomes=(), constraints=None, columns=None):
    original = pd.DataFrame(original) if not isinstance(original, pd.DataFrame) else original
    protected = pd.DataFrame(protected, columns=original.columns) if not isinstance(protected, pd.DataFrame) \
        else protected
    return EvaluationInputs(original=original, protected=protected,
                            columns=tuple(columns or original.columns), labels=pd.DataFrame(index=original.index),
                            outcomes=tuple(outcomes), constraints=constraints)


def outcome(part, id="mask", columns=None):
    return SimpleNamespace(id=id, columns=tuple(columns or part.columns), partition=part)


# ---------------------------------------------------------------------------
# Hand computations on tiny data
# ---------------------------------------------------------------------------

X = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [2.0, 0.0, 2.0, 0.0]})
Y = pd.DataFrame({"a": [1.5, 1.5, 3.5, 3.5], "b": [1.0, 1.0, 1.0, 1.0]})


def test_sse_sst_by_hand():
    # a: mean 2.5, pop. sd sqrt(1.25); SSE_a = 4 * 0.25 / 1.25 = 0.8; b: sd 1, SSE_b = 4 * 1 = 4
    out = SseSst().evaluate(inputs(X, Y))
    assert out["sse"] == pytest.approx(0.8 + 4.0)
    assert out["sst"] == pytest.approx(8.0)
    assert out["sse_sst"] == pytest.approx(100 * 4.8 / 8)


def test_il1s_by_hand():
    s_a, s_b = np.std(X["a"], ddof=1), np.std(X["b"], ddof=1)
    expected = (4 * 0.5 / (np.sqrt(2) * s_a) + 4 * 1.0 / (np.sqrt(2) * s_b)) / 8
    assert IL1s().evaluate(inputs(X, Y))["il1s"] == pytest.approx(expected)


def test_moments_by_hand():
    out = Moments().evaluate(inputs(X, Y))
    assert out["mean_rel_change"] == pytest.approx(0.0)
    var_a, var_a2 = np.var(X["a"], ddof=1), np.var(Y["a"], ddof=1)
    var_b = np.var(X["b"], ddof=1)
    assert out["var_rel_change"] == pytest.approx((abs(var_a2 - var_a) / var_a + abs(0 - var_b) / var_b) / 2)
    cov = np.cov(X["a"], X["b"])[0, 1]
    assert out["cov_rel_change"] == pytest.approx(abs(0 - cov) / abs(cov))
    # b is constant after protection: its correlations are undefined, so none is compared
    assert np.isnan(out["corr_abs_change"])
    shifted = Moments().evaluate(inputs(X, X + [1.0, 0.0]))
    assert shifted["mean_rel_change"] == pytest.approx((1 / 2.5 + 0) / 2)
    assert shifted["var_rel_change"] == pytest.approx(0.0) and shifted["corr_abs_change"] == pytest.approx(0.0)


def test_dbrl_by_hand_with_ties():
    original = pd.DataFrame({"a": [0.0, 0.0, 10.0, 20.0]})
    protected = pd.DataFrame({"a": [0.0, 0.0, 16.0, 20.0]})
    # records 0 and 1 tie with each other (1/2 each), record 2 lands nearer 3's original (0), 3 is its own (1)
    out = DBRL().evaluate(inputs(original, protected))
    assert out["dbrl"] == pytest.approx((0.5 + 0.5 + 0 + 1) / 4)
    assert out["dbrl_linked_records"] == pytest.approx(2.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40), st.integers(1, 4), st.floats(0.0, 2.0))
def test_dbrl_matches_brute_force(seed, n, d, noise):
    rng = np.random.default_rng(seed)
    Xa = rng.integers(0, 4, size=(n, d)).astype(float) + rng.normal(size=(n, d)) * (seed % 2)
    Ya = Xa + rng.normal(size=(n, d)) * noise
    share, _ = mm.dbrl(Xa, Ya)
    mean, sd = Xa.mean(0), Xa.std(0)
    sd = np.where(sd > 1e-12 * np.maximum(1, np.abs(mean)), sd, 1.0)
    Z, Zp = (Xa - mean) / sd, (Ya - mean) / sd
    D = np.sqrt(((Zp[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    credit = []
    for i in range(n):
        tied = np.flatnonzero(D[i] <= D[i].min() * (1 + 1e-9) + 1e-12)
        credit.append(1 / tied.size if i in tied else 0.0)
    assert share == pytest.approx(np.mean(credit))


def sdcmicro_drisk(x, xm, k):
    """sdcMicro's dRiskWORK (R/dRisk.R) written out as loops: ``sds <- apply(xm, 2, sd, na.rm = TRUE)``,
    ``mi <- xm - k * sds``, ``ma <- xm + k * sds``, then the share of rows with
    ``rowSums(x < mi | x > ma, na.rm = TRUE) %in% 0:1``; plus the stricter every-value-inside share."""
    n, p = x.shape
    sds = []
    for j in range(p):
        seen = [v for v in xm[:, j] if not np.isnan(v)]
        sds.append(statistics.stdev(seen) if len(seen) > 1 else float("nan"))
    at_risk = all_inside = 0
    for i in range(n):
        outside = inside = 0
        for j in range(p):
            low, high = xm[i, j] - k * sds[j], xm[i, j] + k * sds[j]
            if x[i, j] < low or x[i, j] > high:  # False when any of them is NaN, as R's na.rm drops the cell
                outside += 1
            if low <= x[i, j] <= high:
                inside += 1
        at_risk += outside in (0, 1)
        all_inside += inside == p
    return at_risk / n, all_inside / n


def test_interval_disclosure_follows_sdcmicro_by_hand():
    # half-widths 0.1 * sd'(ddof=1) of the protected columns: a 0.170, b 0.479, c 0.129
    original = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [0.0, 0.0, 0.0, 10.0], "c": [0.0, 1.0, 2.0, 3.0]})
    protected = pd.DataFrame({"a": [1.0, 2.2, 3.0, 5.0], "b": [0.0, 0.0, 1.0, 10.0], "c": [0.0, 1.5, 2.1, 3.0]})
    inside = np.array([[True, True, True], [False, True, False], [True, False, True], [False, True, True]])
    # values outside per record: 0, 2, 1, 1: sdcMicro counts the records with at most one outside
    out = IntervalDisclosure(width=0.1).evaluate(inputs(original, protected))
    assert out["drisk"] == pytest.approx(0.75)
    assert out["drisk_all_inside"] == pytest.approx(0.25)  # only record 0 has every value inside
    assert out["values_inside"] == pytest.approx(inside.mean())
    assert (out["drisk"], out["drisk_all_inside"]) == pytest.approx(
        sdcmicro_drisk(original.to_numpy(), protected.to_numpy(), 0.1))
    wide = IntervalDisclosure(width=10.0).evaluate(inputs(original, protected))
    assert wide["drisk"] == 1.0 and wide["drisk_all_inside"] == 1.0


@pytest.mark.parametrize("width", [0.05, 0.2, 1.0])
def test_interval_disclosure_is_sdcmicros_drisk_brute_force(width):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 4)) * [1, 10, 100, 1000]
    # noise of several sizes, so that records have 0, 1, 2, 3 or 4 values outside their intervals
    xm = x + rng.normal(size=x.shape) * [1, 10, 100, 1000] * rng.choice([0.0, 0.01, 0.1, 1.0], size=x.shape)
    out = IntervalDisclosure(width=width).evaluate(inputs(pd.DataFrame(x), pd.DataFrame(xm)))
    drisk, all_inside = sdcmicro_drisk(x, xm, width)
    assert out["drisk"] == pytest.approx(drisk, abs=1e-12)
    assert out["drisk_all_inside"] == pytest.approx(all_inside, abs=1e-12)
    assert out["drisk_all_inside"] < out["drisk"] < 1.0  # the two rules differ on this data


def test_interval_disclosure_with_missing_values_is_sdcmicros_rule_over_the_records_compared():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(60, 3))
    xm = x + rng.normal(size=x.shape) * rng.choice([0.0, 1.0], size=x.shape)
    x[rng.random(x.shape) < 0.2] = np.nan
    xm[rng.random(xm.shape) < 0.2] = np.nan
    left_out = int((np.isnan(x) | np.isnan(xm)).all(axis=1).sum())  # no cell observed in both files
    assert left_out > 0
    out = IntervalDisclosure(width=0.3).evaluate(inputs(pd.DataFrame(x), pd.DataFrame(xm)))
    # sdcMicro counts a missing cell as not outside, so it counts a record with no compared cell at risk;
    # privclust leaves those records out of the share (numerator and denominator)
    drisk, _ = sdcmicro_drisk(x, xm, 0.3)
    n = len(x)
    assert out["drisk"] == pytest.approx((drisk * n - left_out) / (n - left_out))
    assert 0 < out["drisk"] < 1


def test_interval_disclosure_of_one_column_is_always_at_risk_by_sdcmicros_rule():
    original = pd.DataFrame({"a": [0.0, 1.0, 2.0, 3.0]})
    protected = pd.DataFrame({"a": [10.0, 1.0, 20.0, -5.0]})
    out = IntervalDisclosure().evaluate(inputs(original, protected))
    assert out["drisk"] == 1.0  # at most one value outside: every record of a single column
    assert out["drisk_all_inside"] == 0.25 and out["values_inside"] == 0.25


def test_interval_disclosure_on_the_census_is_sdcmicros_rule():
    """The auditors' case: MDAV k = 3 of AFNLWGT, AGI and FEDTAX, width 0.05 (sdcMicro's rule gives 0.487, the
    every-value-inside rule 0.1213)."""
    require_dataset("casc_census.csv")
    census = privclust.datasets.load("casc_census")
    columns = ["AFNLWGT", "AGI", "FEDTAX"]
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": columns}],
                             "evaluate": [{"use": "interval-disclosure", "width": 0.05}]}, census)
    x, xm = census[columns].to_numpy(float), release.data[columns].to_numpy(float)
    drisk, all_inside = sdcmicro_drisk(x, xm, 0.05)
    assert release.evaluation("drisk") == pytest.approx(drisk) == pytest.approx(0.487, abs=5e-4)
    assert release.evaluation("drisk_all_inside") == pytest.approx(all_inside) == pytest.approx(0.1213, abs=5e-5)


def test_identity_masking_loses_nothing_and_links_everything():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    data = inputs(frame, frame.copy())
    assert SseSst().evaluate(data)["sse_sst"] == 0.0
    assert IL1s().evaluate(data)["il1s"] == 0.0
    assert DBRL().evaluate(data)["dbrl"] == 1.0
    assert IntervalDisclosure().evaluate(data)["drisk"] == 1.0
    m = Moments().evaluate(data)
    assert all(v == pytest.approx(0.0, abs=1e-12) for v in m.values())


def test_replacing_every_record_by_the_mean_loses_everything():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.normal(size=(100, 3)) * [1, 10, 100], columns=["a", "b", "c"])
    means = pd.DataFrame(np.tile(frame.mean().to_numpy(), (100, 1)), columns=frame.columns)
    assert SseSst().evaluate(inputs(frame, means))["sse_sst"] == pytest.approx(100.0)
    # every protected record is the mean: only the original nearest to it is linked
    assert DBRL().evaluate(inputs(frame, means))["dbrl"] == pytest.approx(0.01)


def test_information_loss_grows_with_k():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    losses, links = [], []
    for k in (2, 5, 20):
        part = MDAV(k=k).fit(frame, privclust.PrivacyContext(seed=0))
        protected = pd.DataFrame(part.centres[part.labels], columns=frame.columns)
        losses.append(SseSst().evaluate(inputs(frame, protected))["sse_sst"])
        links.append(DBRL().evaluate(inputs(frame, protected))["dbrl"])
    assert losses[0] < losses[1] < losses[2]
    assert links[0] > links[1] > links[2]


def test_bad_inputs_are_data_errors():
    with pytest.raises(DataError, match="not in the protected data"):
        SseSst().evaluate(inputs(X, Y[["a"]].assign(z=1.0)))
    with pytest.raises(DataError, match="same records"):
        SseSst().evaluate(EvaluationInputs(original=X, protected=Y.iloc[:3], columns=("a",),
                                           labels=pd.DataFrame(index=X.index)))
    with pytest.raises(DataError, match="infinite"):
        IL1s().evaluate(inputs(X, Y.assign(a=[np.inf, 1, 2, 3])))
    with pytest.raises(DataError, match="no record observed in both"):
        IL1s().evaluate(inputs(X, Y.assign(a=np.nan)))
    # a missing value is left out (tests/test_missing.py has the figures)
    assert np.isfinite(IL1s().evaluate(inputs(X, Y.assign(a=[np.nan, 1, 2, 3])))["il1s"])


# ---------------------------------------------------------------------------
# Group sizes and transparency
# ---------------------------------------------------------------------------


def crisp_partition():
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2])
    centres = np.array([[0.0], [1.0], [2.0]])
    return Partition(labels=labels, centres=centres, columns=("a",), diagnostics={"k": 4})


def fuzzy_partition():
    # 4 records, 2 centres; realised labels as drawn by a masker
    U = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.5, 0.5]])
    labels = np.array([0, 1, 1, 1])
    return Partition(labels=labels, centres=np.array([[0.0], [1.0]]), memberships=U, columns=("a",),
                     diagnostics={"k": 2}), U


def test_group_sizes_of_a_crisp_partition():
    frame = pd.DataFrame({"a": np.arange(9.0)})
    out = GroupSizes().evaluate(inputs(frame, frame, [outcome(crisp_partition())]))
    assert out["k"] == 4 and out["groups"] == 3
    assert (out["min_size"], out["mean_size"], out["max_size"]) == (2, 3, 4)
    assert out["share_records_in_groups_below_k"] == pytest.approx(5 / 9)
    assert out["groups_below_k"] == 2
    assert "expected_mean_size" not in out
    assert GroupSizes(k=2).evaluate(inputs(frame, frame, [outcome(crisp_partition())]))["groups_below_k"] == 0


def test_group_sizes_of_a_fuzzy_partition_dense_and_top():
    part, U = fuzzy_partition()
    frame = pd.DataFrame({"a": np.arange(4.0)})
    out = GroupSizes().evaluate(inputs(frame, frame, [outcome(part)]))
    assert out["clusters"] == 2 and out["empty_realised_clusters"] == 0
    np.testing.assert_allclose([out["expected_min_size"], out["expected_max_size"]], [1.8, 2.2])
    assert out["share_clusters_expected_below_k"] == 0.5
    assert out["share_records_in_groups_below_k"] == 0.25  # record 0 is alone in centre 0
    top = TopMemberships(indices=np.argsort(-U, axis=1, kind="stable"), values=-np.sort(-U, axis=1),
                         dropped=np.zeros(4), n_centres=2)
    out_top = GroupSizes().evaluate(inputs(frame, frame, [outcome(attrs.evolve(part, memberships=top))]))
    assert out_top == pytest.approx(out)


def test_transparency_risk_crisp_is_one_over_the_group_size():
    frame = pd.DataFrame({"a": np.arange(9.0)})
    part = crisp_partition()
    released = pd.DataFrame({"a": part.centres[part.labels, 0]})  # each record replaced by its group's centre
    out = TransparencyRisk().evaluate(inputs(frame, released, [outcome(part)]))
    assert out["mean_posterior"] == pytest.approx((3 * (1 / 3) + 4 * (1 / 4) + 2 * (1 / 2)) / 9)
    assert out["max_posterior"] == pytest.approx(0.5)


def test_transparency_risk_fuzzy_by_hand_and_with_top_memberships():
    part, U = fuzzy_partition()
    frame = pd.DataFrame({"a": np.arange(4.0)})
    col = U.sum(axis=0)  # 2.2, 1.8
    expected = np.array([0.9 / col[0], 0.4 / col[1], 0.8 / col[1], 0.5 / col[1]])
    released = pd.DataFrame({"a": part.centres[part.labels, 0]})
    out = TransparencyRisk().evaluate(inputs(frame, released, [outcome(part)]))
    assert out["mean_posterior"] == pytest.approx(expected.mean())
    assert out["max_posterior"] == pytest.approx(expected.max())
    # keeping only the best centre per record drops the other memberships
    top = TopMemberships(indices=np.argmax(U, axis=1)[:, None], values=np.ones((4, 1)),
                         dropped=1 - U.max(axis=1), n_centres=2)
    post = mm.transparency_posteriors(part.labels, top)
    assert np.isfinite(post).all() and post[1] == 0.0


def test_transparency_risk_counts_only_the_group_members_whose_row_shows_the_same():
    """Red-team audit: the intruder who knows the memberships knows the original records, so a key released as it
    is and which values are missing narrow the group: the only woman of a group of 3 is identified (it read 1/3)."""
    released = pd.DataFrame({"a": [0.0, 0, 0, 1, 1, 1, 1, 2, 2],
                             "sex": ["f", "m", "m", "f", "f", "m", "m", "f", "f"]})
    original = released.assign(a=np.arange(9.0))
    out = TransparencyRisk().evaluate(inputs(original, released, [outcome(crisp_partition())], columns=["a"]))
    expected = np.array([1, 1 / 2, 1 / 2, 1 / 2, 1 / 2, 1 / 2, 1 / 2, 1 / 2, 1 / 2])
    assert out["mean_posterior"] == pytest.approx(expected.mean()) and out["max_posterior"] == 1.0
    # a missing value, released missing as in the original, singles a record out the same way
    holed = pd.DataFrame({"a": [0.0, np.nan, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]})
    centres = pd.DataFrame({"a": [0.0, np.nan, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0]})
    out = TransparencyRisk().evaluate(inputs(holed, centres, [outcome(crisp_partition())]))
    assert out["max_posterior"] == 1.0
    # a key a masker recoded still splits the group (red-team audit: comparing with the originals dropped it)
    recoded = released.assign(sex=released["sex"].map({"f": "F", "m": "M"}))
    out = TransparencyRisk().evaluate(inputs(original, recoded, [outcome(crisp_partition())], columns=["a"]))
    assert out["max_posterior"] == 1.0
    # a clusterer releases the raw values beside its labels: every record is its own
    out = TransparencyRisk().evaluate(inputs(original, original, [outcome(crisp_partition())], columns=["a"]))
    assert out["mean_posterior"] == 1.0
    # fuzzy: the sums of the memberships run over the records that show the same; dense and top memberships agree
    part, U = fuzzy_partition()
    shown = pd.DataFrame({"a": np.arange(4.0), "k": ["x", "y", "y", "x"]})
    col_x, col_y = U[[0, 3]].sum(axis=0), U[[1, 2]].sum(axis=0)
    expected = np.array([0.9 / col_x[0], 0.4 / col_y[1], 0.8 / col_y[1], 0.5 / col_x[1]])
    out = TransparencyRisk().evaluate(inputs(shown, shown.assign(a=part.centres[part.labels, 0]), [outcome(part)],
                                             columns=["a"]))
    assert out["mean_posterior"] == pytest.approx(expected.mean())
    seen = mm.shown_codes(shown, shown.assign(a=part.centres[part.labels, 0]), ["a"])
    top = TopMemberships(indices=np.argsort(-U, axis=1, kind="stable"), values=-np.sort(-U, axis=1),
                         dropped=np.zeros(4), n_centres=2)
    assert mm.transparency_posteriors(part.labels, top, seen) == pytest.approx(expected)


def test_partition_lookup_by_columns_and_by_step():
    frame = pd.DataFrame({"a": np.arange(9.0), "b": np.arange(9.0)})
    first = outcome(crisp_partition(), id="first")
    other = Partition(labels=np.repeat([0, 1, 2], 3), columns=("b",), diagnostics={"k": 3})
    second = outcome(other, id="second")
    data = inputs(frame, frame, [first, second], columns=["a"])
    assert GroupSizes().evaluate(data)["k"] == 4  # the last partition over column a
    assert GroupSizes(step="second").evaluate(data)["k"] == 3
    with pytest.raises(DataError, match="no step with id 'third'.*'first', 'second'"):
        GroupSizes(step="third").evaluate(data)


@pytest.mark.parametrize("evaluator", [GroupSizes(), TransparencyRisk()])
def test_without_a_partition_the_error_names_the_step_kind_needed(evaluator):
    with pytest.raises(DataError, match="microaggregation masker"):
        evaluator.evaluate(inputs(X, Y))


def test_group_sizes_needs_a_k():
    part = Partition(labels=np.zeros(4, dtype=int), columns=("a",))
    frame = pd.DataFrame({"a": np.arange(4.0)})
    with pytest.raises(DataError, match="k = 3"):
        GroupSizes().evaluate(inputs(frame, frame, [outcome(part)]))


# ---------------------------------------------------------------------------
# Recipes, conformance
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class GroupMeans:
    """A minimal crisp microaggregation masker for these tests (records replaced by their MDAV group's centre)."""

    name: ClassVar[str] = "test-group-means"
    k: int = privclust.param(int, default=3, ge=2)

    def mask(self, data, context):
        part = MDAV(k=self.k).fit(data, context)
        values = pd.DataFrame(part.centres[part.labels], index=data.index, columns=data.columns)
        return Masked(data=values, partition=part)


class _Plugin:
    @privclust.hookimpl
    def privclust_register_maskers(self, register):
        register(GroupMeans)


ALL = ["sse-sst", "il1s", "moments", "dbrl", "interval-disclosure", "group-sizes", "transparency-risk",
       "edit-violations"]


def test_in_a_recipe_on_table1_with_its_edit_rule():
    registry = privclust.Registry(plugins=[_Plugin()], use_env=False).load()
    recipe = {
        "constraints": [{"use": "linear", "rules": [privclust.datasets.TABLE1_RULE]}],
        "steps": [{"use": "test-group-means", "k": 3}],
        "evaluate": [{"use": name} for name in ALL],
    }
    release = privclust.run(recipe, privclust.datasets.table1(), seed=0, registry=registry)
    ev = release.evaluations.set_index(["evaluator", "metric"])["value"]
    rule = privclust.datasets.TABLE1_RULE
    assert ev[("edit-violations", f"{rule}: share violated")] == 0.0
    assert ev[("edit-violations", f"{rule}: share violated (original)")] == pytest.approx(1 / 12)
    assert ev[("edit-violations", f"{rule}: max violation (original)")] == pytest.approx(3.48)
    assert ev[("group-sizes", "min_size")] >= 3
    assert ev[("transparency-risk", "mean_posterior")] == pytest.approx(1 / 3)
    assert 0 < ev[("sse-sst", "sse_sst")] < 100


def test_edit_violations_without_rules():
    assert EditViolations().evaluate(inputs(X, Y)) == {"rules": 0.0}


def test_census_microaggregated_by_mdav():
    require_dataset("casc_census.csv")
    import privclust.datasets as ds

    census = ds.load("casc_census")
    columns = list(privclust.numeric_columns(census))
    registry = privclust.Registry(plugins=[_Plugin()], use_env=False).load()
    recipe = {
        "constraints": [{"use": "linear", "rules": ["PTOTVAL = POTHVAL + PEARNVAL"]}],
        "steps": [{"use": "test-group-means", "k": 3, "columns": columns}],
        "evaluate": [{"use": name} for name in ALL],
    }
    release = privclust.run(recipe, census, seed=0, registry=registry)
    ev = release.evaluations.set_index(["evaluator", "metric"])["value"]
    assert 0 < ev[("sse-sst", "sse_sst")] < 30
    assert ev[("group-sizes", "share_records_in_groups_below_k")] == 0.0
    assert ev[("edit-violations", "PTOTVAL = POTHVAL + PEARNVAL: share violated")] == 0.0
    assert 0 <= ev[("dbrl", "dbrl")] <= 1


@pytest.mark.parametrize("evaluator", PLAIN + (EditViolations(),), ids=lambda e: e.name)
def test_conformance_kit(evaluator, frame):
    privclust.testing.check_component(evaluator, frame)


@pytest.mark.parametrize("evaluator", [GroupSizes(step="mask", k=3), TransparencyRisk(step="mask")],
                         ids=lambda e: e.name)
def test_conformance_of_the_partition_evaluators(evaluator, frame, registry):
    # the kit's own run gives no partition (these evaluators refuse that), so check the rest by hand
    privclust.testing.CHECKS["params_round_trip"](evaluator, frame, "evaluators", registry)
    part = MDAV(k=3).fit(frame, privclust.PrivacyContext(seed=0))
    given_frame = frame.copy(deep=True)
    data = inputs(given_frame, given_frame.copy(), [outcome(part)])
    assert evaluator.evaluate(data) == evaluator.evaluate(data)
    assert given_frame.equals(frame)


def test_the_docs_page_examples_run(tmp_path):
    from _docblocks import run_page

    require_dataset("casc_census.csv")
    assert run_page("microdata-evaluators.md", tmp_path) >= 2


def test_edit_violations_checks_its_own_rules_when_the_recipe_has_none():
    from privclust.datasets import TABLE1_RULE, table1

    recipe = {"steps": [{"use": "fuzzy-microaggregation", "k": 3}],
              "evaluate": [{"use": "edit-violations", "rules": [TABLE1_RULE]}]}
    figures = privclust.run(recipe, table1(), seed=1).evaluations.set_index("metric")["value"]
    assert figures["rules"] == 1
    assert figures[f"{TABLE1_RULE}: max violation (original)"] == pytest.approx(3.48)
    assert figures[f"{TABLE1_RULE}: share violated (original)"] == pytest.approx(1 / 12)
    recipe["evaluate"] = [{"use": "edit-violations", "rules": ["totl = exp16"]}]
    with pytest.raises(privclust.DataError, match="did you mean 'total'"):
        privclust.run(recipe, table1(), seed=1)


def test_edit_violations_resolves_its_rules_handler_through_the_registry():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [1.0, 2.0, 3.0, 5.0]})
    recipe = {
        "steps": [{"use": "microaggregation", "columns": ["a", "b"], "clusterer": {"use": "mdav", "k": 2}}],
        "evaluate": [{"use": "edit-violations", "rules": ["b >= a"]}]}
    release = privclust.run(recipe, frame, seed=1)
    assert "b >= a: share violated" in set(release.evaluations["metric"])
    blocked = privclust.Registry(block=["constraints"])
    # refused before any step runs (run's checks ask evaluated_on), as one of the data checks' problems
    with pytest.raises(privclust.PrivclustError, match="evaluate\\[0\\] \\(edit-violations\\): edit-violations: "
                                                       "its 'rules' need the constraint handler 'linear'.*plugin "
                                                       "'constraints'"):
        privclust.run(recipe, frame, seed=1, registry=blocked)


def test_figures_on_degenerate_columns_follow_their_descriptions():
    from privclust_plugins import _microdata_metrics as mm

    # a column replaced by its mean is constant: its correlations are undefined (NaN), whatever the round-off
    a = np.array([0.1, 0.9, 0.4, 0.7, 0.2, 0.6])
    c = np.array([0.8, 0.5, 0.5, 0.3, 0.4, 0.1])
    X = np.column_stack([a, c])
    Y = np.column_stack([a, np.full(6, c.mean())])
    assert np.isnan(mm.moments(X, Y)["corr_abs_change"])
    # the only cell observed in both files sits at the mean: SST = 0, no figure (not a ZeroDivisionError)
    sse_sst, sse, sst = mm.sse_sst(np.array([[0.0], [1.0], [2.0]]), np.array([[np.nan], [1.0], [np.nan]]))
    assert np.isnan(sse_sst) and sst == 0.0
    # distinct values near 1e15 vary (a threshold relative to the mean called them constant)
    big = 1e15 + np.arange(12.0)[:, None] * 100.0
    assert mm._varying(big)[2].all()
    assert mm.sse_sst(big, big + 50.0)[0] > 0
    # one record: no column has an s.d., so no interval: every share undefined, not 0
    assert all(np.isnan(v) for v in mm.interval_disclosure(np.array([[1.0, 2.0]]), np.array([[1.0, 2.0]]), 0.1))


# ---------------------------------------------------------------------------
# Audit: extreme magnitudes, weights, columns a step dropped or added
# ---------------------------------------------------------------------------


def _independent(X, Y, w=None):
    """The figures of the spec, written out with numpy on the whole file."""
    w = np.ones(X.shape[0]) if w is None else w
    mu = np.average(X, axis=0, weights=w)
    sigma = np.sqrt(np.average((X - mu) ** 2, axis=0, weights=w))
    Z, Zp = (X - mu) / sigma, (Y - mu) / sigma
    sse_sst = 100 * (w[:, None] * (Z - Zp) ** 2).sum() / (w[:, None] * Z ** 2).sum()
    s = np.sqrt((w[:, None] * (X - mu) ** 2).sum(axis=0) / (w.sum() - 1))
    il1s = np.average((np.abs(X - Y) / (np.sqrt(2) * s)).mean(axis=1), weights=w)
    return sse_sst, il1s


@pytest.mark.parametrize("magnitude", [1e300, 1e-300, 1.0])
def test_figures_do_not_depend_on_the_magnitude_of_a_column(magnitude):
    # columns of 1e300 overflowed in the squares (NaN / inf figures), columns of 1e-300 underflowed to a
    # zero s.d. (the column taken as constant: SSE/SST NaN)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2)) + [3.0, -1.0]
    Y = X + 0.3 * rng.normal(size=X.shape)
    base = {e.name: dict(e.evaluate(inputs(X, Y))) for e in PLAIN}
    scaled = {e.name: dict(e.evaluate(inputs(X * magnitude, Y * magnitude))) for e in PLAIN}
    for name, figures in base.items():
        for metric, value in figures.items():
            assert scaled[name][metric] == pytest.approx(value, rel=1e-9, nan_ok=True), (name, metric)
    assert base["sse-sst"]["sse_sst"] == pytest.approx(_independent(X, Y)[0])
    assert base["il1s"]["il1s"] == pytest.approx(_independent(X, Y)[1])


@pytest.mark.parametrize("weight", [1e308, 1e300, 3.0])
def test_huge_weights_are_computed_without_overflow(weight):
    # weights of 1e308 passed the weight check and the sums overflowed (NaN figures)
    rng = np.random.default_rng(6)
    x = pd.DataFrame({"a": rng.normal(size=20), "b": rng.normal(size=20), "w": rng.uniform(0.5, 1.0, 20)})
    y = x.assign(a=x["a"] + 0.2 * rng.normal(size=20), b=x["b"].round(0))
    x = x.assign(w=x["w"] * weight)
    inp = EvaluationInputs(original=x, protected=y, columns=("a", "b"), labels=pd.DataFrame(index=x.index))
    X, Y, u = x[["a", "b"]].to_numpy(), y[["a", "b"]].to_numpy(), x["w"].to_numpy() / weight
    sse_sst, _ = _independent(X, Y, u)  # SSE/SST does not depend on the scale of the weights
    assert SseSst(weight="w").evaluate(inp)["sse_sst"] == pytest.approx(sse_sst, rel=1e-9)
    mu = np.average(X, axis=0, weights=u)  # s^2 = sum w (x - mu)^2 / (sum w - 1), with w = weight * u
    s = np.sqrt((u[:, None] * (X - mu) ** 2).sum(axis=0) / (u.sum() - 1.0 / weight))
    il1s = np.average((np.abs(X - Y) / (np.sqrt(2) * s)).mean(axis=1), weights=u)
    assert IL1s(weight="w").evaluate(inp)["il1s"] == pytest.approx(il1s, rel=1e-9)
    figures = Moments(weight="w").evaluate(inp)
    assert all(np.isfinite(figures[m]) for m in ("mean_rel_change", "var_rel_change", "corr_abs_change"))


def test_weights_adding_up_to_one_or_less_are_refused_by_sample_variance_figures():
    # sum w - 1 <= 0: il1s was silently NaN and moments divided by a negative number
    x = pd.DataFrame({"a": [1.0, 2, 3, 4, 5, 6], "w": [0.1] * 6})
    y = x.assign(a=[1.5, 1.5, 3.5, 3.5, 5, 6])
    inp = EvaluationInputs(original=x, protected=y, columns=("a",), labels=pd.DataFrame(index=x.index))
    for evaluator in (IL1s(weight="w"), Moments(weight="w")):
        with pytest.raises(DataError, match="weight column 'w' adds up to 0.6"):
            evaluator.evaluate(inp)
    assert SseSst(weight="w").evaluate(inp)["sse_sst"] == pytest.approx(SseSst().evaluate(inp)["sse_sst"])


def test_a_column_only_in_the_protected_file_is_a_data_error():
    # a column a step added crashed every record-level evaluator with a KeyError
    x = pd.DataFrame({"a": [1.0, 2, 3, 4]})
    y = x.assign(b=[1.0, 2, 3, 4])
    inp = EvaluationInputs(original=x, protected=y, columns=("a", "b"), labels=pd.DataFrame(index=x.index))
    for evaluator in PLAIN:
        with pytest.raises(DataError, match="column\\(s\\) b are not in the original data"):
            evaluator.evaluate(inp)


@pytest.mark.parametrize("released", ["dropped", "text", "all missing"])
def test_edit_violations_on_a_rule_column_the_release_lacks_are_unknown(released):
    # a dropped or text column was read as 0 (every record "violated" the rule by 4), and a rule no record
    # could be evaluated on reported max violation 0 ("satisfied")
    x = pd.DataFrame({"t": [3.0, 5, 7], "a": [1.0, 2, 3], "b": [2.0, 3, 4]})
    y = {"dropped": x.drop(columns="b"), "text": x.assign(b=["u", "v", "w"]),
         "all missing": x.assign(b=np.nan)}[released]
    inp = EvaluationInputs(original=x, protected=y, columns=("t", "a"), labels=pd.DataFrame(index=x.index))
    out = EditViolations(rules=("t = a + b",)).evaluate(inp)
    assert np.isnan(out["t = a + b: max violation"]) and np.isnan(out["t = a + b: share violated"])
    assert out["t = a + b: records not evaluable"] == 3.0
    assert out["t = a + b: max violation (original)"] == 0.0


def test_the_figure_descriptions_say_what_is_computed():
    # il1s read "in original standard deviations (x sqrt 2)" (it divides by sqrt(2) s); drisk named no interval;
    # the docs gave edit-violations' test as tol (1 + max |x|), not the host's test on the rule's terms
    from pathlib import Path

    assert "/ (sqrt(2) s)" in IL1s.metric_descriptions["il1s"][0]
    assert "NaN when every column is constant" in SseSst.metric_descriptions["sse_sst"][0]
    sse = SseSst.metric_descriptions["sse"][0]
    assert "weight" in sse and "observed in both" in sse
    assert "width x the protected column's sample s.d." in IntervalDisclosure.metric_descriptions["drisk"][0]
    assert "standardised by the original's mean" in DBRL.metric_descriptions["dbrl"][0]
    page = (Path(__file__).parents[1] / "docs" / "microdata-evaluators.md").read_text(encoding="utf-8")
    assert "max_j |x_ij|" not in page and "sum_j |a_j x_ij| + |b|" in page
    assert "relative to the record's\n    largest value" not in EditViolations.__doc__


def test_what_edit_violations_and_key_frequencies_say_they_are_computed_on():
    # edit-violations was said to be computed on the evaluation's columns, not the rules' own; every
    # key-frequencies figure, released or original, had the same description
    from privclust_plugins.microdata_evaluators import KeyFrequencies

    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [1.0, 2.0, 3.0, 5.0], "c": [3.0, 1, 2, 4]})
    recipe = {"steps": [{"use": "microaggregation", "columns": ["a", "b", "c"], "clusterer": {"use": "mdav", "k": 2}}],
              "evaluate": [{"use": "edit-violations", "rules": ["b >= a"]}]}
    release = privclust.run(recipe, frame, seed=1)
    assert set(release.evaluations["columns"]) == {"a, b"}
    described = KeyFrequencies.metric_descriptions
    assert described["sample_uniques"][0].endswith("(released file)")
    assert described["sample_uniques_original"][0].endswith("(original file)")


def test_partition_figures_say_the_columns_of_the_step_they_judge():
    # group-sizes and transparency-risk judge one step's partition but were said to be computed on every
    # column a step changed
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(30, 3)), columns=["a", "b", "c"])
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"], "id": "m"},
                                       {"use": "microaggregation", "k": 3, "columns": ["c"]}],
                             "evaluate": [{"use": "group-sizes", "step": "m"},
                                          {"use": "transparency-risk", "step": "m"}, "sse-sst"]}, frame, seed=1)
    on = release.evaluations.drop_duplicates("evaluator").set_index("evaluator")["columns"]
    assert on["group-sizes"] == on["transparency-risk"] == "a, b" and on["sse-sst"] == "a, b, c"


@pytest.mark.parametrize("use", ["group-sizes", "transparency-risk"])
def test_a_step_id_naming_no_step_is_refused_when_compiled(use):
    """trust17a: an evaluator's ``step`` naming no step of the recipe was
    refused only after every step had run; it is refused when the recipe is
    compiled (check, and run before any data are read), naming the parameter
    and the recipe's step ids."""
    recipe = {"steps": [{"id": "mask", "use": "microaggregation", "k": 3}],
              "evaluate": [{"use": use, "step": "mask2"}]}
    with pytest.raises(privclust.RecipeError) as err:
        privclust.compile(recipe)
    text = str(err.value)
    assert "evaluate[0].step" in text and "no step has id 'mask2'" in text and "'mask'" in text
    privclust.compile({**recipe, "evaluate": [{"use": use, "step": "mask"}]})


def test_dbrl_links_within_the_public_strata():
    """Red-team audit: dbrl linked each record across every stratum, though the release shows its stratum: 0.130,
    for 0.305 within them. Two strata whose records lie on top of each other: across them the nearest original is
    the other stratum's for half the records, within them always the own."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    original = pd.DataFrame({"region": ["a"] * 50 + ["b"] * 50, "x": np.concatenate([x, x + 3e-4])})
    protected = original.assign(x=original["x"] + 2e-4)
    roles = privclust.recipe.Roles(strata=("region",))
    base = dict(original=original, protected=protected, columns=("x",), labels=pd.DataFrame(index=original.index),
                roles=roles)
    within = DBRL().evaluate(EvaluationInputs(**base))
    across = DBRL(with_strata=False).evaluate(EvaluationInputs(**base))
    assert within["dbrl"] == pytest.approx(1.0)
    assert across["dbrl"] < 0.9
    assert DBRL().evaluate(EvaluationInputs(**{**base, "roles": None})) == across


def test_the_change_of_the_correlations_with_missing_values_compares_correlations():
    """Red-team audit: with missing values the covariance ran over the records observing both variables and the
    standard deviations over each whole column, so the original's "correlation" was 1.574 and its change wrong."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=200)
    X = np.column_stack([x, 2 * x + rng.normal(0, 0.1, 200)])
    X[:60, 1] = np.nan
    X[:60, 0] += 5.0  # records missing b shift a's whole-column s.d., not the pair's
    Y = X + rng.normal(0, 0.05, X.shape)
    frame_x, frame_y = (pd.DataFrame(v, columns=["a", "b"]) for v in (X, Y))
    got = mm.moments(X, Y)["corr_abs_change"]
    expected = abs(frame_y.corr().iloc[0, 1] - frame_x.corr().iloc[0, 1])  # pandas: pairwise complete
    assert got == pytest.approx(expected, rel=1e-9)


def test_fuzzy_memberships_are_joined_over_the_strata():
    """Red-team audit: with [roles] strata the fuzzy masker's dense memberships were not joined, so group-sizes lost
    its expected sizes and transparency-risk fell back to the crisp 1/group figure."""
    rng = np.random.default_rng(3)
    n = 120
    frame = pd.DataFrame({"x": rng.normal(size=n), "y": rng.normal(size=n), "st": np.r_[np.zeros(60, int),
                                                                                       np.ones(60, int)]})
    step = {"use": "fuzzy-microaggregation", "k": 3, "m1": 1.5, "m2": 1.5, "columns": ["x", "y"]}
    evaluate = [{"use": "transparency-risk"}, {"use": "group-sizes"}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both = privclust.run({"roles": {"strata": "st"}, "steps": [step], "evaluate": evaluate}, frame, seed=1)
    part = both.outcomes[0].partition
    assert part.memberships is not None
    assert any(m.startswith("expected") for m in both.evaluations.metric)
    sums = np.asarray(part.memberships.column_sums())
    assert sums.shape == (part.centres.shape[0],) and sums.sum() == pytest.approx(n)
    fuzzy = mm.transparency_posteriors(part.labels, part.memberships)
    assert not np.allclose(fuzzy, mm.transparency_posteriors(part.labels, None))
