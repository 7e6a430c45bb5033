"""Maskers ``fuzzy-microaggregation`` and ``microaggregation``."""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privclust
import privclust.datasets as ds
import privclust.testing as pt
from privclust import ConstraintSet, DataError, ParameterError, Partition, PrivacyContext, RecipeError
from privclust_plugins import fuzzy
from privclust_plugins.constraints import LinearConstraints
from privclust_plugins.fuzzy import EFCM, FCM
from privclust_plugins.mdav import MDAV
from privclust_plugins.microaggregation import FuzzyMicroaggregation, Microaggregation, default_m1

from conftest import require_dataset

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


# ---------------------------------------------------------------------------
# Algorithm 1 and its contract
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("masker", [FuzzyMicroaggregation(k=3, m1=1.5),
                                    FuzzyMicroaggregation(c=4, clusterer=EFCM(lambda_=2.0)),
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
    assert part.memberships.shape == (12, 4)
    np.testing.assert_allclose(part.memberships.sum(1), 1.0)
    assert part.diagnostics["k"] == 3 and part.diagnostics["c"] == 4
    assert part.diagnostics["m1"] == 1.4 and part.diagnostics["m2"] == 1.8
    assert out.diagnostics["expected_size_mean"] == pytest.approx(3.0)
    crisp, _ = mask(Microaggregation(clusterer=MDAV(k=3)), frame, [RULE])
    assert crisp.partition.memberships is None and crisp.partition.diagnostics["k"] == 3
    np.testing.assert_array_equal(crisp.data.to_numpy(), crisp.partition.centres[crisp.partition.labels])


def test_step2_memberships_use_m2():
    frame = ds.table1()
    low, _ = mask(FuzzyMicroaggregation(k=3, m1=1.5, m2=1.2), frame, seed=1)
    high, _ = mask(FuzzyMicroaggregation(k=3, m1=1.5, m2=4.0), frame, seed=1)
    np.testing.assert_allclose(low.partition.centres, high.partition.centres)  # same Step 1
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
    share = out.diagnostics["share_in_realised_cluster_below_k"]
    assert f"{share:.1%}" in entry.statement
    assert "projected onto the edit rules" in entry.statement
    assert entry.details["k"] == 3 and entry.details["expected_size_min"] <= 3 <= entry.details["expected_size_max"]
    realised = np.bincount(out.partition.labels, minlength=4)
    assert share == pytest.approx(np.mean(realised[out.partition.labels] < 3))


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
    _, c, k, _, _ = resolved(FuzzyMicroaggregation(c=7), n=30)
    assert (c, k) == (7, 4)
    _, c, k, _, _ = resolved(FuzzyMicroaggregation(), n=30)
    assert (c, k) == (10, 3)
    _, c, _, _, _ = resolved(FuzzyMicroaggregation(clusterer={"use": "fcm", "c": 5}), n=30)
    assert c == 5
    with pytest.raises(ParameterError, match="not both"):
        FuzzyMicroaggregation(k=3, c=4)
    with pytest.raises(ParameterError, match="state it once"):
        FuzzyMicroaggregation(k=3, clusterer={"use": "fcm", "c": 4})
    with pytest.raises(ParameterError, match="'k'"):
        FuzzyMicroaggregation(k=1)
    with pytest.raises(ParameterError, match="'c'"):
        FuzzyMicroaggregation(c=0)


@pytest.mark.parametrize(("masker", "message"), [
    (FuzzyMicroaggregation(k=13), "only 12 records"),
    (FuzzyMicroaggregation(k=7), "at least 2k = 14 records"),
    (FuzzyMicroaggregation(c=13), "c = 13 clusters but only 12 records"),
])
def test_bad_sizes(masker, message):
    with pytest.raises(DataError, match=message):
        mask(masker, ds.table1())


def test_min_records_is_checked_by_the_runner():
    with pytest.raises(DataError, match="needs at least 14 records"):
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
    crisp, _ = mask(Microaggregation(clusterer=FCM(c=4, m=1.5)), frame, [RULE])
    assert np.unique(crisp.data.to_numpy(), axis=0).shape[0] <= 4
    assert np.abs(residual(crisp.data)).max() < 1e-9

    @attrs.frozen(kw_only=True)
    class HalfNoise:
        name = "half-noise"

        def fit(self, data, context):
            labels = np.zeros(len(data), dtype=np.int64)
            labels[::2] = -1
            return Partition(labels=labels)

    with pytest.raises(DataError, match="without a group"):
        mask(Microaggregation(clusterer=HalfNoise()), frame)
    with pytest.raises(ParameterError, match="has no parameter 'c'"):
        mask(FuzzyMicroaggregation(c=4, clusterer=MDAV(k=3)), frame)

    @attrs.frozen(kw_only=True)
    class FirstRecords:
        """A clusterer with c and centres but no m or lambda."""

        name = "first-records"
        c: int = 2

        def fit(self, data, context):
            values = data.to_numpy()
            return Partition(labels=np.zeros(len(data), dtype=np.int64), centres=values[: self.c])

    with pytest.raises(ParameterError, match="m2 \\(FCM memberships\\) or lambda2"):
        mask(FuzzyMicroaggregation(c=4, clusterer=FirstRecords()), frame)
    with pytest.raises(ParameterError, match="has no m or lambda"):
        FuzzyMicroaggregation(c=4, m1=1.5, clusterer=FirstRecords())
    out, _ = mask(FuzzyMicroaggregation(c=4, m2=1.5, clusterer=FirstRecords()), frame, [RULE])
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
    same, _ = mask(FuzzyMicroaggregation(c=12, m1=1.01), frame)
    np.testing.assert_allclose(same.data.to_numpy(), frame.to_numpy(), atol=1e-9)
    one, _ = mask(FuzzyMicroaggregation(c=1), frame, [RULE])
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
