"""Maskers ``fuzzy-microaggregation`` and ``microaggregation``."""

from __future__ import annotations

import contextlib
import warnings

import attrs
import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privclust
import privclust.datasets as ds
import privclust.testing as pt
from privclust import ConstraintSet, DataError, ParameterError, Partition, PrivacyContext, RecipeError
from privclust_plugins import _fcm, fuzzy
from privclust_plugins.constraints import LinearConstraints
from privclust_plugins.fuzzy import EFCM, FCM
from privclust_plugins.mdav import MDAV
from privclust_plugins.microaggregation import (
    CollapsedCentresWarning,
    FuzzyMicroaggregation,
    FuzzyRegimeWarning,
    Microaggregation,
    UniformMembershipsWarning,
    default_m1,
)

RULE = "total = 1.16*exp16 + 1.07*exp7"
ALPHA = np.array([1.16, 1.07, -1.0])
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mask(masker, frame, rules=(), seed=0):
    context = PrivacyContext(seed=seed)
    cs = None
    if rules:
        columns = tuple(frame.columns)
        cs = ConstraintSet(columns, [LinearConstraints(rules=list(rules)).bind(columns)])
    with context.step(0, "mask", masker.name, constraints=cs):
        out = masker.mask(frame, context)
    return out, context


def residual(frame):
    return frame.to_numpy() @ ALPHA


def _identical_sizes(released: pd.DataFrame) -> np.ndarray:
    """Per record, how many released rows are identical to its own (a
    missing value equal to a missing value), computed independently of the
    masker with pandas."""
    keyed = released.astype(float).fillna(np.inf)
    columns = list(keyed.columns)
    return keyed.groupby(columns)[columns[0]].transform("size").to_numpy()


# ---------------------------------------------------------------------------
# Algorithm 1 and its contract
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("masker", [FuzzyMicroaggregation(k=3, m1=1.5),
                                    FuzzyMicroaggregation(n_clusters=4, clusterer=EFCM(lambda_=2.0)),
                                    Microaggregation(clusterer=MDAV(k=3))])
def test_conformance(masker):
    pt.check_component(masker, ds.table1())


def test_table1_protected_satisfies_the_rule_the_original_violates():
    frame = ds.table1()
    assert residual(frame)[-1] == pytest.approx(-3.48)  # 1.16*13 + 1.07*100 - 125.56
    for masker in (FuzzyMicroaggregation(k=3, m1=1.5, m2=2.0), Microaggregation(clusterer=MDAV(k=3))):
        out, _ = mask(masker, frame, [RULE])
        assert np.abs(residual(out.data)).max() < 1e-9
        assert out.data.index.equals(frame.index) and list(out.data.columns) == list(frame.columns)


def test_partition_contract():
    frame = ds.table1()
    out, _ = mask(FuzzyMicroaggregation(k=3, m1=1.4, m2=1.8), frame, [RULE], seed=3)
    part = out.partition
    assert isinstance(part, Partition)
    np.testing.assert_array_equal(out.data.to_numpy(), part.centres[part.labels])  # the realised assignment
    assert np.abs(part.centres @ ALPHA).max() < 1e-9  # projected, original units
    c = part.centres.shape[0]
    assert part.memberships.shape == (12, c)
    np.testing.assert_allclose(part.memberships.sum(1), 1.0)
    assert part.diagnostics["k"] == 3 and part.diagnostics["c_initial"] == 4 and part.diagnostics["c"] == c <= 4
    assert part.diagnostics["light_centres_dropped"] == 4 - c
    assert part.diagnostics["m1"] == 1.4 and part.diagnostics["m2"] == 1.8
    assert out.diagnostics["expected_size_mean"] == pytest.approx(12 / c)
    assert part.memberships.sum(0).min() >= 3  # the mass rule, on the memberships the draw used
    crisp, _ = mask(Microaggregation(clusterer=MDAV(k=3)), frame, [RULE])
    assert crisp.partition.memberships is None and crisp.partition.diagnostics["k"] == 3
    np.testing.assert_array_equal(crisp.data.to_numpy(), crisp.partition.centres[crisp.partition.labels])


def test_step2_memberships_use_m2():
    frame = ds.table1()
    low, _ = mask(FuzzyMicroaggregation(k=3, m1=1.5, m2=1.2), frame, seed=1)
    high, _ = mask(FuzzyMicroaggregation(k=3, m1=1.5, m2=4.0), frame, seed=1)
    assert low.diagnostics["step1"]["objective"] == high.diagnostics["step1"]["objective"]  # same Step 1
    assert low.partition.memberships.max(1).mean() > high.partition.memberships.max(1).mean()
    # the Step 2 memberships are FCM's with m2 at the final centres
    std = fuzzy.standardise(frame.to_numpy(), list(frame.columns), True, "t")
    D = ((std.z[:, None] - std.to_z(high.partition.centres)[None]) ** 2).sum(-1)
    u = D ** (-1 / 3.0)
    np.testing.assert_allclose(high.partition.memberships, u / u.sum(1, keepdims=True), atol=1e-12)


@SETTINGS
@given(seed=st.integers(0, 10**6), k=st.integers(2, 6), m1=st.floats(1.05, 3.0), m2=st.floats(1.05, 6.0),
       noise=st.floats(0.0, 20.0), efcm=st.booleans(), lam=st.floats(0.1, 30.0))
def test_every_record_is_a_final_centre_and_satisfies_every_rule(seed, k, m1, m2, noise, efcm, lam):
    rng = np.random.default_rng(seed)
    base = ds.table1().to_numpy()
    values = np.abs(np.vstack([base, base * 1.3]) + rng.normal(0, noise, (24, 3)))
    frame = pd.DataFrame(values, columns=["exp16", "exp7", "total"])
    masker = (FuzzyMicroaggregation(k=k, lambda1=lam, lambda2=lam * 0.5, clusterer="efcm") if efcm
              else FuzzyMicroaggregation(k=k, m1=m1, m2=m2))
    out, _ = mask(masker, frame, [RULE, "exp16 >= 20", "exp7 <= 200"], seed=seed)
    released = out.data.to_numpy()
    centres = out.partition.centres
    assert any(np.array_equal(row, c) for row in released[:1] for c in centres)
    for row in released:
        assert (np.abs(centres - row).max(1) == 0).any()
    assert np.abs(released @ ALPHA).max() < 1e-8 * np.abs(released).max()
    assert released[:, 0].min() >= 20 - 1e-9 and released[:, 1].max() <= 200 + 1e-9


def test_ledger_states_probabilistic_k_anonymity_honestly():
    out, context = mask(FuzzyMicroaggregation(k=3, m1=1.5), ds.table1(), [RULE], seed=2)
    entry = context.ledger.entries[-1]
    assert entry.kind == "guarantee" and entry.mechanism == "probabilistic k-anonymity"
    assert "This is not k-anonymity" in entry.statement
    share = out.diagnostics["share_in_identical_groups_below_k"]
    assert f"After the draw, {share:.1%} of the records" in entry.statement
    assert share == pytest.approx(np.mean(_identical_sizes(out.data) < 3))
    assert "projected onto the edit rules" in entry.statement
    assert entry.details["k"] == 3 and 3 <= entry.details["expected_size_min"] <= entry.details["expected_size_max"]
    assert "never replaced by a centre equal to itself" in entry.statement
    assert "0 records were released with the values of these columns the step was given" in entry.statement
    assert entry.details["verbatim_records"] == 0
    realised = np.bincount(out.partition.labels, minlength=out.partition.centres.shape[0])
    assert out.diagnostics["share_in_realised_cluster_below_k"] == pytest.approx(
        np.mean(realised[out.partition.labels] < 3))


def test_crisp_ledger_states_k_anonymity():
    out, context = mask(Microaggregation(clusterer=MDAV(k=3)), ds.table1(), [RULE])
    entry = context.ledger.entries[-1]
    assert entry.mechanism == "k-anonymity"
    sizes = np.bincount(out.partition.labels)
    assert sizes.min() >= 3 and f"k = {sizes.min()}" in entry.statement
    # the released values: each group's projected mean
    frame = ds.table1().to_numpy()
    for g in range(sizes.size):
        mean = frame[out.partition.labels == g].mean(0)
        assert np.abs(out.partition.centres[g] @ ALPHA) < 1e-9
        if abs(mean @ ALPHA) < 1e-9:
            np.testing.assert_allclose(out.partition.centres[g], mean, atol=1e-9)


# ---------------------------------------------------------------------------
# m1 / m2 / lambda1 / lambda2 and the nested clusterer
# ---------------------------------------------------------------------------


def resolved(masker, n=30, d=3):
    reg = privclust.Registry(use_env=False).load()
    masker = reg.create("maskers", masker)
    clusterer, c, k, step1, step2 = masker.resolve(masker.clusterer, n, d)
    return clusterer, c, k, step1, step2


def test_m1_is_the_clusterers_m_stated_once():
    clusterer, c, k, s1, s2 = resolved(FuzzyMicroaggregation(k=5, m1=1.3))
    assert clusterer.m == 1.3 and s1.value == 1.3 and s2.value == 1.3 and c == 6 and k == 5
    clusterer, _, _, s1, s2 = resolved(FuzzyMicroaggregation(k=5, clusterer={"use": "fcm", "m": 1.4, "n_init": 2}))
    assert clusterer.m == 1.4 and clusterer.n_init == 2 and s1.value == 1.4 and s2.value == 1.4
    clusterer, _, _, s1, s2 = resolved(FuzzyMicroaggregation(k=5, m1=1.4, m2=2.5,
                                                             clusterer={"use": "fcm", "m": 1.4}))
    assert (s1.value, s2.value) == (1.4, 2.5)
    clusterer, _, _, s1, s2 = resolved(FuzzyMicroaggregation(k=5), d=4)
    assert s1.value == default_m1(4) == 1.0625 and clusterer.m == 1.0625 and s2.value == 1.0625
    with pytest.raises(ParameterError, match="m1 = 1.3 but the clusterer's m = 1.5"):
        FuzzyMicroaggregation(m1=1.3, clusterer={"use": "fcm", "m": 1.5})
    with pytest.raises(ParameterError, match="m1 = 1.3 but the clusterer's m = 1.5"):
        FuzzyMicroaggregation(m1=1.3, clusterer=FCM(m=1.5))


def test_lambda_pair_goes_with_efcm():
    clusterer, _, _, s1, s2 = resolved(FuzzyMicroaggregation(k=3, lambda1=4.0, clusterer="efcm"))
    assert clusterer.lambda_ == 4.0 and (s1.kind, s1.value, s2.value) == ("efcm", 4.0, 4.0)
    clusterer, _, _, s1, s2 = resolved(FuzzyMicroaggregation(k=3, lambda2=0.5, clusterer={"use": "efcm",
                                                                                         "lambda": 2.0}))
    assert (s1.value, s2.value) == (2.0, 0.5)
    _, _, _, s1, _ = resolved(FuzzyMicroaggregation(k=3, clusterer="efcm"))
    assert s1.value == 1.0
    with pytest.raises(ParameterError, match="lambda1 are EFCM's parameters but the clusterer is 'fcm'"):
        FuzzyMicroaggregation(lambda1=2.0)
    with pytest.raises(ParameterError, match="m2 are FCM's parameters but the clusterer is 'efcm'"):
        FuzzyMicroaggregation(m2=2.0, clusterer="efcm")
    with pytest.raises(ParameterError, match="belong to FCM"):
        FuzzyMicroaggregation(m1=2.0, lambda2=1.0)
    with pytest.raises(ParameterError, match="lambda1 = 2 but the clusterer's lambda = 3"):
        FuzzyMicroaggregation(lambda1=2.0, clusterer=EFCM(lambda_=3.0))


def test_recipe_states_each_value_once_or_fails_clearly():
    ok = {"steps": [{"use": "fuzzy-microaggregation", "k": 3, "m1": 1.5,
                     "clusterer": {"use": "fcm", "n_init": 2}}]}
    release = privclust.run(ok, ds.table1(), seed=1)
    assert release.outcomes[0].diagnostics["step1"]["m"] == 1.5
    bad = {"steps": [{"use": "fuzzy-microaggregation", "k": 3, "m1": 1.5, "clusterer": {"use": "fcm", "m": 2.0}}]}
    with pytest.raises(RecipeError, match="state it once"):
        privclust.compile(bad)
    bad = {"steps": [{"use": "fuzzy-microaggregation", "lambda1": 1.5}]}
    with pytest.raises(RecipeError, match="clusterer = \"efcm\""):
        privclust.compile(bad)


def test_k_and_c():
    _, c, k, _, _ = resolved(FuzzyMicroaggregation(n_clusters=7), n=30)
    assert (c, k) == (7, 4)
    _, c, k, _, _ = resolved(FuzzyMicroaggregation(), n=30)
    assert (c, k) == (10, 3)
    _, c, _, _, _ = resolved(FuzzyMicroaggregation(clusterer={"use": "fcm", "n_clusters": 5}), n=30)
    assert c == 5
    with pytest.raises(ParameterError, match="not both"):
        FuzzyMicroaggregation(k=3, n_clusters=4)
    with pytest.raises(ParameterError, match="state it once"):
        FuzzyMicroaggregation(k=3, clusterer={"use": "fcm", "n_clusters": 4})
    with pytest.raises(ParameterError, match="'k'"):
        FuzzyMicroaggregation(k=1)
    with pytest.raises(ParameterError, match="'n_clusters'"):
        FuzzyMicroaggregation(n_clusters=0)


@pytest.mark.parametrize(("masker", "message"), [
    (FuzzyMicroaggregation(k=13), "only 12 records"),
    (FuzzyMicroaggregation(k=7), "at least 2k = 14 records"),
    (FuzzyMicroaggregation(n_clusters=13), "n_clusters = 13 leaves fewer than 2 records per cluster for the 12 "
                                           "records"),
])
def test_bad_sizes(masker, message):
    with pytest.raises(DataError, match=message):
        mask(masker, ds.table1())


def test_min_records_is_checked_by_the_runner():
    with pytest.raises(DataError, match=r"k = 7 needs at least 2k = 14 records"):
        privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 7}]}, ds.table1())


def test_bad_columns():
    frame = ds.table1()
    with pytest.raises(DataError, match="constant"):
        mask(FuzzyMicroaggregation(k=3), frame.assign(one=1.0))
    nan = frame.copy()
    nan.iloc[2, 1] = np.inf
    with pytest.raises(DataError, match="exp7"):
        mask(FuzzyMicroaggregation(k=3), nan)
    with pytest.raises(DataError, match="exp7"):
        mask(Microaggregation(clusterer=MDAV(k=3)), nan)


def test_input_is_never_mutated():
    frame = ds.table1()
    copy = frame.copy(deep=True)
    mask(FuzzyMicroaggregation(k=3), frame, [RULE])
    mask(Microaggregation(clusterer=MDAV(k=3)), frame, [RULE])
    pd.testing.assert_frame_equal(frame, copy)


def test_other_clusterers():
    frame = ds.table1()
    crisp, context = mask(Microaggregation(clusterer=FCM(n_clusters=2, m=1.5)), frame, [RULE])
    assert np.unique(crisp.data.to_numpy(), axis=0).shape[0] <= 2
    assert np.abs(residual(crisp.data)).max() < 1e-9
    sizes = np.bincount(crisp.partition.labels)
    assert sizes.min() >= 2 and context.ledger.entries[-1].details["k"] == sizes.min()

    @attrs.frozen(kw_only=True)
    class HalfNoise:
        name = "half-noise"

        def fit(self, data, context):
            labels = np.zeros(len(data), dtype=np.int64)
            labels[::2] = -1
            return Partition(labels=labels)

    with pytest.raises(DataError, match="without a group"):
        mask(Microaggregation(clusterer=HalfNoise()), frame)
    with pytest.raises(ParameterError, match="has no parameter 'n_clusters'"):
        mask(FuzzyMicroaggregation(n_clusters=4, clusterer=MDAV(k=3)), frame)

    @attrs.frozen(kw_only=True)
    class FirstRecords:
        """A clusterer with n_clusters and centres but no m or lambda."""

        name = "first-records"
        n_clusters: int = 2

        def fit(self, data, context):
            values = data.to_numpy()
            return Partition(labels=np.zeros(len(data), dtype=np.int64), centres=values[: self.n_clusters])

    with pytest.raises(ParameterError, match="m2 \\(FCM memberships\\) or lambda2"):
        mask(FuzzyMicroaggregation(n_clusters=4, clusterer=FirstRecords()), frame)
    with pytest.raises(ParameterError, match="has no m or lambda"):
        FuzzyMicroaggregation(n_clusters=4, m1=1.5, clusterer=FirstRecords())
    out, _ = mask(FuzzyMicroaggregation(n_clusters=4, m2=1.5, clusterer=FirstRecords()), frame, [RULE])
    assert np.abs(out.partition.centres @ ALPHA).max() < 1e-9  # the masker projects foreign centres
    assert out.diagnostics["m2"] == 1.5 and out.diagnostics["m1"] is None


# ---------------------------------------------------------------------------
# seed Prop. 8: trends
# ---------------------------------------------------------------------------


def sse(original, protected):
    z = (original - original.mean(0)) / original.std(0)
    zp = (protected - original.mean(0)) / original.std(0)
    return float(((z - zp) ** 2).sum() / (z**2).sum())


def test_information_loss_grows_with_m2_and_with_k():
    frame = pd.DataFrame(np.random.default_rng(0).gamma(2.0, 10.0, size=(300, 3)), columns=["a", "b", "c"])
    X = frame.to_numpy()

    def loss(**kw):
        return np.mean([sse(X, mask(FuzzyMicroaggregation(**kw), frame, seed=s)[0].data.to_numpy())
                        for s in range(3)])

    by_m2 = [loss(k=5, m1=1.1, m2=m2) for m2 in (1.1, 1.5, 2.5)]
    assert by_m2[0] < by_m2[1] < by_m2[2]
    by_k = [loss(k=k, m1=1.1) for k in (3, 10, 50)]
    assert by_k[0] < by_k[1] < by_k[2]


def test_extremes_c_equals_n_and_c_equals_one():
    frame = ds.table1()
    # c = N (or any c > N / 2) leaves a cluster of one record: k = floor(N / c) = 1 is refused, as k = 1 is
    with pytest.raises(DataError, match=r"n_clusters = 12 leaves fewer than 2 records per cluster for the 12 records"
                                        r".*n_clusters = 6 or fewer"):
        mask(FuzzyMicroaggregation(n_clusters=12, m1=1.01), frame)
    # the centres end on the records (each record twice, c = N / 2), so each record draws another centre (the self
    # rule)
    twice = pd.concat([frame.iloc[:6], frame.iloc[:6]], ignore_index=True)
    same, context = mask(FuzzyMicroaggregation(n_clusters=6, m1=1.01), twice)
    X, released = twice.to_numpy(), same.data.to_numpy()
    assert not (released == X).all(axis=1).any()
    on = same.diagnostics["records_on_a_centre"]
    assert on >= 1 and same.diagnostics["verbatim_records"] == 0
    assert f"{on} records had such a centre" in context.ledger.entries[-1].statement
    one, _ = mask(FuzzyMicroaggregation(n_clusters=1), frame, [RULE])
    mean = frame.to_numpy().mean(0)
    assert np.unique(one.data.to_numpy(), axis=0).shape[0] == 1
    # the projection of the mean onto the rule (in the standardised metric)
    s = frame.to_numpy().std(0)
    expected = mean - (s**2 * ALPHA) * (mean @ ALPHA) / (ALPHA**2 @ s**2)
    np.testing.assert_allclose(one.data.to_numpy()[0], expected, rtol=1e-9)


# ---------------------------------------------------------------------------
# scale paths through the masker
# ---------------------------------------------------------------------------


def test_truncated_path_end_to_end(monkeypatch):
    monkeypatch.setattr(fuzzy, "EXACT_MAX_CENTRES", 16)
    rng = np.random.default_rng(1)
    X = rng.gamma(2.0, 10.0, size=(1500, 2))
    frame = pd.DataFrame(np.column_stack([X, X @ [1.16, 1.07]]), columns=["exp16", "exp7", "total"])
    masker = FuzzyMicroaggregation(k=5, clusterer={"use": "fcm", "memory_budget": 0.2})
    reg = privclust.Registry(use_env=False).load()
    out, context = mask(reg.create("maskers", masker), frame, [RULE, "exp16 >= 0", "exp7 >= 0"])
    dg = out.diagnostics
    assert dg["membership_path"] == "truncated" and dg["step1"]["iteration_path"] == "truncated"
    assert dg["dropped_mass_max"] <= 1e-3
    assert isinstance(out.partition.memberships, privclust.TopMemberships)
    released = out.data.to_numpy()
    assert np.abs(released @ ALPHA).max() < 1e-8 * released.max()
    np.testing.assert_array_equal(released, out.partition.centres[out.partition.labels])
    statement = context.ledger.entries[-1].statement
    assert "truncated to each record's" in statement and "total-variation" in statement


# ---------------------------------------------------------------------------
# recipes: groups of variables, rules spanning groups, census
# ---------------------------------------------------------------------------


def two_groups():
    rng = np.random.default_rng(3)
    a = rng.gamma(2.0, 10.0, size=(60, 2))
    frame = pd.DataFrame({"exp16": a[:, 0], "exp7": a[:, 1], "total": a @ [1.16, 1.07],
                          "age": rng.integers(18, 90, 60).astype(float), "rooms": rng.integers(1, 8, 60).astype(float)})
    return frame


def test_disjoint_groups_end_to_end():
    frame = two_groups()
    recipe = {
        "constraints": [{"use": "linear", "rules": [RULE, "age >= 18", "rooms >= 1"]}],
        "steps": [
            {"use": "fuzzy-microaggregation", "columns": ["exp16", "exp7", "total"], "k": 4, "m1": 1.3},
            {"use": "microaggregation", "columns": ["age", "rooms"], "clusterer": {"use": "mdav", "k": 4}},
        ],
        "evaluate": [{"use": "edit-violations"}, {"use": "group-sizes"}],
    }
    release = privclust.run(recipe, frame, seed=5)
    out = release.data
    assert np.abs(residual(out[["exp16", "exp7", "total"]])).max() < 1e-8 * out["total"].max()
    assert out["age"].min() >= 18 and out["rooms"].min() >= 1
    guarantees = [e.mechanism for e in release.ledger if e.kind == "guarantee"]
    assert guarantees[:2] == ["probabilistic k-anonymity", "k-anonymity"]
    sizes = out.groupby(["age", "rooms"]).size()
    assert sizes.min() >= 4
    spanning = {**recipe, "constraints": [{"use": "linear", "rules": ["total >= age"]}]}
    with pytest.raises(RecipeError, match="uses columns"):
        privclust.compile(spanning)


def test_census_with_its_rule_against_mdav():
    require_dataset("casc_census.csv")
    census = ds.load("casc_census")
    columns = ["PTOTVAL", "POTHVAL", "PEARNVAL", "FEDTAX", "FICA"]
    rules = ["PTOTVAL = POTHVAL + PEARNVAL"] + [f"{c} >= 0" for c in columns]
    evaluate = [{"use": "sse-sst"}, {"use": "edit-violations"}]
    results = {}
    for step in ({"use": "fuzzy-microaggregation", "k": 5}, {"use": "microaggregation"}):
        recipe = {"constraints": [{"use": "linear", "rules": rules}],
                  "steps": [{**step, "columns": columns}], "evaluate": evaluate}
        release = privclust.run(recipe, census, seed=1)
        out = release.data
        assert np.abs(out.PTOTVAL - out.POTHVAL - out.PEARNVAL).max() < 1e-6 * out.PTOTVAL.abs().max()
        assert (out[columns].to_numpy() >= -1e-9).all()
        ev = release.evaluations.set_index("metric")["value"]
        results[step["use"]] = ev["sse_sst"]
    assert 0 < results["fuzzy-microaggregation"] < 40 and 0 < results["microaggregation"] < 40


# ---------------------------------------------------------------------------
# issue 8: no verbatim records, expected mass >= k, degenerate fuzzifiers
# ---------------------------------------------------------------------------


def _verbatim(original: pd.DataFrame, released: pd.DataFrame) -> int:
    return int((released[original.columns].to_numpy() == original.to_numpy(dtype=float)).all(axis=1).sum())


@pytest.mark.parametrize("name", ["casc_census", "tarragona"])
@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("m1", [None, 10.0])
def test_no_record_is_released_verbatim_on_census_and_tarragona(name, k, m1):
    require_dataset(f"{name}.csv")
    # the masker's own output, as floats: released as integers, a record whose centre lies within half a unit of
    # it in every column would be rounded back to its original values (the host's check reports it; see
    # tests/test_integers.py)
    frame = ds.load(name).astype(float)
    step = {"use": "fuzzy-microaggregation", "k": k, **({"m1": m1} if m1 else {})}
    for seed in (1, 2, 3):
        with pytest.warns(UniformMembershipsWarning) if m1 else _no_regime_warning():
            release = privclust.run({"steps": [step]}, frame, seed=seed)
        dg = release.outcomes[0].diagnostics
        assert _verbatim(frame, release.data) == 0 == dg["verbatim_records"]
        assert dg["expected_size_min"] >= k  # the mass rule, on the final memberships
        entry = [e for e in release.ledger if e.mechanism == "probabilistic k-anonymity"][0]
        assert "0 records were released with the values of these columns the step was given" in entry.statement


class _no_regime_warning:
    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self._seen = self._catch.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        assert not [w for w in self._seen if issubclass(w.category, FuzzyRegimeWarning)], \
            [str(w.message) for w in self._seen]


def test_edit_rules_hold_on_the_census_with_the_new_rules():
    require_dataset("casc_census.csv")
    census = ds.load("casc_census")
    columns = list(census.columns)
    recipe = {"constraints": [{"use": "linear", "rules": ["PTOTVAL = POTHVAL + PEARNVAL"]
                               + [f"{c} >= 0" for c in columns]}],
              "steps": [{"use": "fuzzy-microaggregation", "k": 3}], "evaluate": [{"use": "edit-violations"}]}
    release = privclust.run(recipe, census, seed=4)
    out = release.data
    assert np.abs(out.PTOTVAL - out.POTHVAL - out.PEARNVAL).max() < 1e-6 * out.PTOTVAL.abs().max()
    assert (out.to_numpy() >= -1e-9).all() and _verbatim(census, out) == 0


def _step2_rows(std, centres, fz, own_rows, own):
    """Step 2 memberships by the textbook formula, with each record's own centres left out."""
    Z = std.to_z(centres)
    D = ((std.z[:, None, :] - Z[None]) ** 2).sum(-1)
    for r, cols in zip(own_rows, own, strict=True):
        D[r, cols] = np.inf
    if fz.kind == "fcm":
        # in logs, scaled by the row's largest weight: D ** (-1 / (m - 1)) overflows to inf for m near 1 and a
        # small D (m2 = 1.05: exponent -20), and inf / inf is NaN
        with np.errstate(divide="ignore"):
            logw = -np.log(D) / (fz.value - 1.0)
        w = np.exp(logw - logw.max(1, keepdims=True))
    else:
        w = np.exp(-fz.value * (D - D.min(1, keepdims=True)))
    return w / w.sum(1, keepdims=True)


@SETTINGS
@given(seed=st.integers(0, 10**6), k=st.integers(2, 5), m2=st.floats(1.05, 3.0), efcm=st.booleans(),
       outliers=st.integers(0, 4))
def test_mass_rule_and_self_rule_hold_on_the_final_memberships(seed, k, m2, efcm, outliers):
    rng = np.random.default_rng(seed)
    X = rng.gamma(2.0, 10.0, size=(60, 3))
    X[:outliers] *= 20  # isolated records: their crisp clusters have one record
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    masker = (FuzzyMicroaggregation(k=k, lambda1=50.0, lambda2=m2, clusterer="efcm") if efcm
              else FuzzyMicroaggregation(k=k, m1=1.01, m2=m2))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FuzzyRegimeWarning)
        out, _ = mask(masker, frame, seed=seed)
    part, dg = out.partition, out.diagnostics
    U = np.asarray(part.memberships)
    # the memberships the draw used: Step 2's at the final centres, each record's own centre left out
    std = fuzzy.standardise(X, ["a", "b", "c"], True, "t")
    from privclust_plugins.microaggregation import self_centres

    rows, own = self_centres(std.z, std.to_z(part.centres))
    fz = _fcm.Fuzzifier("efcm" if efcm else "fcm", m2)
    np.testing.assert_allclose(U, _step2_rows(std, part.centres, fz, rows, own), atol=1e-9)
    assert U.sum(0).min() >= k and dg["expected_size_min"] == pytest.approx(U.sum(0).min())
    assert dg["records_on_a_centre"] == rows.size
    for r, cols in zip(rows, own, strict=True):
        assert not np.isin(part.labels[r], cols)  # never replaced by itself
    assert not (out.data.to_numpy() == X).all(axis=1).any()


def test_removing_a_centre_never_lowers_another_centres_mass():
    rng = np.random.default_rng(3)
    X, V = rng.normal(size=(200, 3)), rng.normal(size=(20, 3))
    for fz in (_fcm.Fuzzifier("fcm", 1.3), _fcm.Fuzzifier("efcm", 2.0)):
        full = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e8, update=False, colsum=True).colsum
        for drop in range(20):
            rest = np.delete(np.arange(20), drop)
            fewer = _fcm.exact_pass(_fcm._Data(X), V[rest], fz, budget_bytes=1e8, update=False, colsum=True).colsum
            assert (fewer >= full[rest] - 1e-12).all()


def test_self_rule_on_the_truncated_path(monkeypatch):
    monkeypatch.setattr(fuzzy, "EXACT_MAX_CENTRES", 16)
    rng = np.random.default_rng(2)
    X = np.repeat(rng.gamma(2.0, 10.0, size=(750, 2)), 2, axis=0)  # each record twice: c = N / 2 (k = 2)
    frame = pd.DataFrame(X, columns=["a", "b"])
    masker = FuzzyMicroaggregation(n_clusters=750, m1=1.05, clusterer=FCM(memory_budget=0.2))
    out, context = mask(masker, frame)  # the centres end on the records
    dg = out.diagnostics
    assert dg["membership_path"] == "truncated" and dg["records_on_a_centre"] > 0
    assert dg["verbatim_records"] == 0 and not (out.data.to_numpy() == X).all(axis=1).any()
    top = out.partition.memberships
    assert isinstance(top, privclust.TopMemberships)
    assert np.bincount(top.indices.ravel(), weights=top.values.ravel(), minlength=top.n_centres).min() >= 1


def test_the_masker_seeds_are_means_of_k_records():
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(90, 2)), columns=["a", "b"])
    out, _ = mask(FuzzyMicroaggregation(k=3, m1=10.0, clusterer=FCM(max_iter=1, n_init=1)), frame)
    assert out.diagnostics["step1"]["init"].startswith("means of the 3 nearest records")
    std = fuzzy.standardise(frame.to_numpy(), ["a", "b"], True, "t")
    seeds = _fcm.group_seeds(std.z, std.z[[0, 5]], 3)
    near = np.argsort(((std.z[None] - std.z[[0, 5], None]) ** 2).sum(-1), axis=1)[:, :3]
    np.testing.assert_allclose(seeds, std.z[near].mean(axis=1))


def test_near_uniform_memberships_warn_before_the_long_run():
    # m1 = 1.5 at d = 5: the pilot on 1000 records warns before Step 1 of the full run
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(3000, 5)), columns=list("abcde"))
    seen = []

    class Watch(FCM):
        def fit_arrays(self, std, c, context, **kw):
            seen.append(("fit", std.z.shape[0]))
            return super().fit_arrays(std, c, context, **kw)

    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, _ = mask(FuzzyMicroaggregation(k=5, clusterer=Watch(m=1.5)), frame)
    found = [w for w in caught if issubclass(w.category, UniformMembershipsWarning)]
    assert len(found) == 1 and issubclass(found[0].category, privclust.PrivclustWarning)
    text = str(found[0].message)
    assert "pilot of 1000 random records before the run" in text and "lower m2" in text
    assert "information loss SSE/SST about" in text and "the defaults" in text
    assert "expected k = 5 or more records" in text
    assert seen == [("fit", 1000), ("fit", 3000)]  # the pilot first
    # the estimate is close to what the run gives
    loss = sse(frame.to_numpy(), out.data.to_numpy())
    estimate = float(text.split("SSE/SST about ")[1].split("%")[0]) / 100
    assert 0.5 * loss < estimate < 2 * loss and loss > 0.4
    # the defaults on the same data do not warn
    with _no_regime_warning():
        mask(FuzzyMicroaggregation(k=5), frame)


def test_near_uniform_memberships_warn_on_small_data_and_with_efcm():
    frame = pd.DataFrame(np.random.default_rng(1).normal(size=(400, 5)), columns=list("abcde"))
    with pytest.warns(UniformMembershipsWarning, match="measured on this run.*lower m2"):
        mask(FuzzyMicroaggregation(k=5, m1=10.0), frame)
    with pytest.warns(UniformMembershipsWarning, match="raise lambda2"):
        mask(FuzzyMicroaggregation(k=5, lambda1=0.01, clusterer="efcm"), frame)


def test_centres_collapsing_onto_records_warn():
    require_dataset("casc_census.csv")
    census = ds.load("casc_census")
    with pytest.warns(CollapsedCentresWarning, match=r"centres collapse onto records.*sit on a single record"
                                                     r".*raise m1") as caught:
        release = privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 2, "m1": 1.001}]}, census,
                                seed=1)
    assert "expected k = 2 or more records" in str(caught[0].message)
    assert release.outcomes[0].diagnostics["verbatim_records"] == 0
    with _no_regime_warning():
        privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 5}]}, census, seed=1)


def test_the_issues_case_warns_m1_1_5_on_skewed_data_at_d_5():
    # correlated log-normal records as in benchmarks/bench_microaggregation.py: largest memberships about
    # 0.6 (not uniform), but four to five times the defaults' loss, and far slower on large data
    rng = np.random.default_rng(0)
    mix = rng.normal(size=(5, 5))
    X = 100.0 * np.exp(rng.multivariate_normal(np.zeros(5), 0.5 * (mix @ mix.T / 5 + 0.5 * np.eye(5)), size=3000))
    frame = pd.DataFrame(X, columns=list("abcde"))
    with pytest.warns(UniformMembershipsWarning, match="pilot of 1000 random records before the run"):
        mask(FuzzyMicroaggregation(k=5, m1=1.5), frame)
    with _no_regime_warning():
        mask(FuzzyMicroaggregation(k=5, m1=1.25), frame)


# ---------------------------------------------------------------------------
# A subclass's default is a real default (issue 9: fcm-warm)
# ---------------------------------------------------------------------------

from typing import ClassVar  # noqa: E402


@attrs.frozen(kw_only=True)
class WarmFCM(FCM):
    """fcm with a crisper default fuzzifier."""

    name: ClassVar[str] = "fcm-warm"
    m: float | None = privclust.param(float, default=1.3, gt=1, doc="fuzzifier (default 1.3)")


class WarmPlugin:
    @privclust.hookimpl
    def privclust_register_clusterers(register):
        register(WarmFCM)


def test_a_subclass_default_is_used_inside_fuzzy_microaggregation_and_reported():
    registry = privclust.Registry(plugins=[WarmPlugin], use_env=False)
    recipe = {"steps": [{"use": "fuzzy-microaggregation", "k": 3, "clusterer": "fcm-warm"}]}
    release = privclust.run(recipe, ds.table1(), seed=1, registry=registry)
    step = release.report()["steps"][0]
    assert step["parameters"]["clusterer"] == {**step["parameters"]["clusterer"], "use": "fcm-warm", "m": 1.3}
    assert release.outcomes[0].diagnostics["m1"] == 1.3 and release.outcomes[0].diagnostics["m2"] == 1.3
    assert "fcm-warm with m = 1.3" in release.ledger.of_kind("guarantee")[0].statement
    # the masker's m1 overrides the subclass's default (no conflict: the default was not given) ...
    _, _, _, s1, s2 = registry.create("maskers", FuzzyMicroaggregation(k=3, m1=1.5, clusterer=WarmFCM())).resolve(
        WarmFCM(), 30, 3)
    assert (s1.value, s2.value) == (1.5, 1.5)
    # ... but a value given on both that differ is an error naming both
    with pytest.raises(ParameterError, match="m1 = 1.5 but the clusterer's m = 1.4"):
        FuzzyMicroaggregation(m1=1.5, clusterer=WarmFCM(m=1.4))


@attrs.frozen(kw_only=True)
class SwappedFCM:
    """A third party's fcm (not a subclass): the FuzzyClusterer protocol only."""

    name: ClassVar[str] = "fcm"
    fuzzifier_param: ClassVar[str] = "m"
    n_clusters: int | None = privclust.param(int, default=None, ge=1)
    m: float | None = privclust.param(float, default=None, gt=1)

    def fit(self, data, context):
        values = data.to_numpy(dtype=float)
        order = np.argsort(values[:, 0], kind="stable")
        labels = np.empty(len(values), dtype=np.int64)
        labels[order] = np.arange(len(values)) * self.n_clusters // len(values)
        centres = np.vstack([values[labels == j].mean(axis=0) for j in range(self.n_clusters)])
        return Partition(labels=labels, centres=centres, diagnostics={"m": self.m})


class SwapPlugin:
    @privclust.hookimpl
    def privclust_register_clusterers(register):
        register(SwappedFCM)


def test_a_swapped_fcm_is_used_through_the_fuzzy_protocol():
    assert isinstance(FCM(), privclust.FuzzyClusterer) and isinstance(SwappedFCM(), privclust.FuzzyClusterer)
    registry = privclust.Registry(block=["fuzzy:fcm"], plugins=[SwapPlugin], use_env=False)
    recipe = {"steps": [{"use": "fuzzy-microaggregation", "k": 3, "m1": 1.2}]}
    release = privclust.run(recipe, ds.table1(), seed=1, registry=registry)
    diagnostics = release.outcomes[0].diagnostics
    assert diagnostics["step1"] == {"method": "fcm", "c": 4}  # its own fit, not the built-in kernel
    assert diagnostics["m1"] == 1.2 and diagnostics["m2"] == 1.2
    assert release.data.shape == ds.table1().shape


# ---------------------------------------------------------------------------
# Audit fixes: infinite fuzzifiers, integer columns, the released groups, crisp groups of one
# ---------------------------------------------------------------------------


def _guarantee(release: privclust.Release, mechanism: str = "probabilistic k-anonymity"):
    found = [e for e in release.ledger.of_kind("guarantee") if e.mechanism == mechanism]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("params", [{"clusterer": "efcm", "lambda2": np.inf}, {"clusterer": "efcm", "lambda1": np.inf},
                                    {"clusterer": "efcm", "lambda1": np.inf, "lambda2": 1.0},
                                    {"m1": np.inf}, {"m2": float("inf")}])
def test_infinite_fuzzifiers_are_refused(params):
    key = next(k for k in params if k != "clusterer" and params[k] == np.inf)
    with pytest.raises(RecipeError, match=rf"'{key}' parameter of fuzzy-microaggregation must be a finite number"):
        privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 3, **params}]}, ds.table1(), seed=1)
    kwargs = {k: v for k, v in params.items() if k != "clusterer"}
    with pytest.raises(ParameterError, match=rf"'{key}' parameter of fuzzy-microaggregation must be a finite"):
        FuzzyMicroaggregation(k=3, **kwargs)


def test_non_finite_memberships_are_refused_before_anything_is_released(monkeypatch):
    import privclust_plugins._fuzzy_replacement as micro

    real = micro.compute_memberships

    def poisoned(*args, **kwargs):
        mem = real(*args, **kwargs)
        sizes = np.array(mem.expected_sizes, copy=True)
        sizes[0] = np.nan
        return attrs.evolve(mem, expected_sizes=sizes)

    monkeypatch.setattr(micro, "compute_memberships", poisoned)
    context = PrivacyContext(seed=1)
    with pytest.raises(ParameterError, match=r"fuzzy-microaggregation: Step 2 \(the replacement probabilities, "
                                             r"lambda = 2\) gave non-finite memberships"), \
            context.step(0, "mask", "fuzzy-microaggregation"):
        FuzzyMicroaggregation(k=3, clusterer=EFCM(), lambda1=2.0).mask(ds.table1(), context)
    assert not context.ledger.of_kind("guarantee")  # nothing claimed
    # a non-finite fuzzifier that reached Step 2 another way is refused before the draw
    std = fuzzy.standardise(ds.table1().to_numpy(dtype=float), ("a", "b", "c"), True, "test")
    with pytest.raises(ParameterError, match="Step 2 .* needs a finite fuzzifier; got lambda = inf"):
        micro._step2(std, ds.table1().to_numpy(dtype=float)[:3], _fcm.Fuzzifier("efcm", np.inf), 3,
                     budget_bytes=1e8, mass_tol=1e-3, max_neighbours=256, context=PrivacyContext(seed=1))


@contextlib.contextmanager
def _quiet():
    """The regime warnings (tiny data, degenerate lambda) are not what these tests check."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FuzzyRegimeWarning)
        yield


def _small_integers(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 10, n), "b": rng.integers(0, 10, n)})


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("with_rule", [False, True])
def test_integer_columns_the_verbatim_count_is_true_on_the_released_file(seed, with_rule):
    # the host rounds integer columns after the step: a centre within 0.5 of a record rounds back onto it
    # (24 of these 60 records were released verbatim while the ledger said 0)
    frame = _small_integers(seed=seed)
    recipe: dict = {"steps": [{"use": "fuzzy-microaggregation", "k": 3}]}
    if with_rule:  # controlled rounding keeps t = a + b
        frame["t"] = frame["a"] + frame["b"]
        recipe["constraints"] = [{"use": "linear", "rules": ["t = a + b"]}]
    with _quiet():
        release = privclust.run(recipe, frame, seed=seed)
    assert all(release.data[c].dtype == frame[c].dtype for c in frame.columns)  # released as integers
    own = int((release.data[frame.columns].to_numpy() == frame.to_numpy()).all(axis=1).sum())
    # the host counts by content (issue 24): a released record equal to any original record, wherever it stands
    originals = set(map(tuple, frame.to_numpy().tolist()))
    verbatim = sum(tuple(r) in originals for r in release.data[frame.columns].to_numpy().tolist())
    dg = release.outcomes[0].diagnostics
    entry = _guarantee(release)
    assert f"{own} records were released with the values of these columns the step was given" in entry.statement
    assert dg["verbatim_records"] == own == 0  # the self rule compares the rounded centre: none is left
    assert dg["integer_columns"] == list(frame.columns)
    assert "rounded as the host releases it" in entry.statement
    assert f"Host check: {verbatim} of {len(frame)} records were released verbatim" in entry.statement
    # the share below k is the released rows' too
    sizes = _identical_sizes(release.data[frame.columns])
    assert dg["records_in_identical_groups_below_k"] == int((sizes < 3).sum())
    assert f"{np.mean(sizes < 3):.1%} of the records" in entry.statement


def test_the_share_below_k_is_computed_on_the_released_rows():
    # (a) missing values: records of one cluster release different rows (their missingness differs)
    rng = np.random.default_rng(3)
    n = 40
    data = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.normal(size=n)})
    data = data.mask(rng.random((n, 3)) < 0.15)
    # (b) efcm with a tiny lambda: every centre coincides, so several clusters release one row
    cases = [({"steps": [{"use": "fuzzy-microaggregation", "k": 3}]}, data),
             ({"steps": [{"use": "fuzzy-microaggregation", "k": 3, "clusterer": "efcm", "lambda1": 1e-300}]},
              ds.table1())]
    shares = []
    for recipe, frame in cases:
        with _quiet():
            release = privclust.run(recipe, frame, seed=1)
        sizes = _identical_sizes(release.data[frame.columns])
        dg = release.outcomes[0].diagnostics
        entry = _guarantee(release)
        share = float(np.mean(sizes < 3))
        shares.append(share)
        assert dg["share_in_identical_groups_below_k"] == pytest.approx(share)
        assert dg["identical_group_size_min"] == sizes.min()
        assert (f"After the draw, {share:.1%} of the records ({int((sizes < 3).sum())} of {len(frame)}) share "
                "their released values") in entry.statement
        assert f"{int((sizes < 3).sum())} records are in a group of identical released rows" in entry.statement
    assert shares[0] > 0.3 and shares[1] == 0.0  # the label-based figure said 0.0% and 33.3%


def test_crisp_microaggregation_refuses_groups_of_one():
    # fcm with 11 clusters on 12 records: groups of one record are released unchanged; "k = 1" was claimed and
    # "verified" by the host while 10 of 12 records were released verbatim
    frame = ds.table1()
    recipe = {"steps": [{"use": "microaggregation", "clusterer": {"use": "fcm", "n_clusters": 11}}]}
    with pytest.raises(ParameterError, match=r"'fcm' \(n_clusters = 11\) formed groups as small as 1 record "
                                             r"\(10 of the 12 records are in groups of one\).*lower the "
                                             r"clusterer's n_clusters \(at most 6"):
        privclust.run(recipe, frame, seed=1)
    context = PrivacyContext(seed=0)
    with pytest.raises(ParameterError, match="no k-anonymity to claim"), context.step(0, "mask", "microaggregation"):
        Microaggregation(clusterer=FCM(n_clusters=4, m=1.5)).mask(frame, context)
    assert not context.ledger.of_kind("guarantee")

    @attrs.frozen(kw_only=True)
    class Pairs:
        """A clusterer with a k it does not keep (groups of two)."""

        name = "pairs"
        k: int = 3

        def fit(self, data, context):
            return Partition(labels=np.arange(len(data)) // 2)

    with pytest.raises(ParameterError, match=r"k = 3 asks for groups of at least 3 records, but the clusterer "
                                             r"'pairs' formed a group of 2 \(12 of the 12 records"):
        mask(Microaggregation(k=3, clusterer=Pairs()), frame)


def test_the_self_rule_sentence_is_true_when_every_centre_is_within_the_tolerance():
    """Red-team audit: on data smaller than the self rule's tolerance (1e-12, scale = "none"), every record's every
    centre counts as itself; the claim said "never replaced by a centre equal to itself", "30 records ... drew from
    the other centres" and "kept their own values", while none kept them."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.normal(size=30) * 1e-12, "y": rng.normal(size=30) * 1e-12})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 3,
                                            "clusterer": {"use": "fcm", "scale": "none"}}]}, data, seed=1)
    claim = [e.statement for e in release.ledger.entries if e.kind == "guarantee"][0]
    assert "except 30 record(s) whose every centre was one: 0 records had such a centre and drew" in claim
    assert "kept their own values" not in claim
    assert "0 records were released with the values of these columns the step was given" in claim


@pytest.mark.parametrize("rows", [10, 12])
def test_check_refuses_n_clusters_over_half_the_records_as_the_run_does(rows):
    """``privclust check --input`` said "there are enough records for each step" for n_clusters = 8 on 10
    records, which the run then refused; now both refuse before any step runs, with the step's own words
    (the largest n_clusters that fits), and within groups and strata the floor is 2 n_clusters."""
    data = ds.table1().iloc[:rows].reset_index(drop=True)
    recipe = {"steps": [{"use": "fuzzy-microaggregation", "n_clusters": 8}]}
    with pytest.raises(DataError, match=rf"n_clusters = 8 leaves fewer than 2 records per cluster for the {rows} "
                                        rf"records .*give n_clusters = {rows // 2} or fewer"):
        privclust.runner.preflight(privclust.compile(recipe), data)
    with pytest.raises(DataError, match="n_clusters = 8 leaves fewer than 2 records"):
        privclust.run(recipe, data)
    assert FuzzyMicroaggregation(n_clusters=8).min_records(2) == 16
    assert FuzzyMicroaggregation(clusterer={"use": "fcm", "n_clusters": 5}).min_records(2) == 10
    assert FuzzyMicroaggregation(k=4).min_records(2) == 8
    assert FuzzyMicroaggregation(n_clusters=8).size_problems(16, 2) == []
