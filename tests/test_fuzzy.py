"""Clusterers ``fcm`` and ``efcm`` and their kernels (plugins/_fcm.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privclust
import privclust.datasets as ds
import privclust.testing as pt
from privclust import ConstraintSet, DataError, ParameterError, PrivacyContext, TopMemberships
from privclust_plugins import _fcm, _fcm_passes, fuzzy
from privclust_plugins.constraints import LinearConstraints
from privclust_plugins.fuzzy import EFCM, FCM

TABLE1_RULE = "total = 1.16*exp16 + 1.07*exp7"
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def reference(X: np.ndarray, V: np.ndarray, kind: str, value: float):
    """Textbook dense formulas: memberships, updated centres, objective."""
    D = ((X[:, None, :] - V[None, :, :]) ** 2).sum(-1)
    if kind == "fcm":
        u = D ** (-1.0 / (value - 1.0))
        u /= u.sum(1, keepdims=True)
        w = u**value
        J = (w * D).sum()
    else:
        u = np.exp(-value * D)
        u /= u.sum(1, keepdims=True)
        w = u
        J = (u * D).sum() + (u * np.log(u)).sum() / value
    return u, (w.T @ X) / w.sum(0)[:, None], J


def rules_context(columns, rules, seed=0):
    handler = LinearConstraints(rules=list(rules))
    cs = ConstraintSet(columns, [handler.bind(tuple(columns))])
    return PrivacyContext(seed=seed, constraints=cs), cs


def fit(component, frame, context=None, seed=0):
    context = context or PrivacyContext(seed=seed)
    with context.step(0, "fit", component.name, constraints=context.constraints):
        return component.fit(frame, context)


def clustered(n=120, d=3, seed=0, centres=4):
    rng = np.random.default_rng(seed)
    c = rng.uniform(0, 10, size=(centres, d))
    return c[rng.integers(0, centres, n)] + rng.normal(0, 0.6, size=(n, d))


# ---------------------------------------------------------------------------
# kernels against the textbook formulas
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "value"), [("fcm", 2.0), ("fcm", 1.5), ("fcm", 1.1), ("fcm", 1.37),
                                             ("fcm", 3.0), ("efcm", 0.5), ("efcm", 3.0)])
@pytest.mark.parametrize("d", [2, 5])
def test_exact_pass_matches_textbook(kind, value, d):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, d))
    V = rng.normal(size=(6, d))
    u, V1, J = reference(X, V, kind, value)
    fz = _fcm.Fuzzifier(kind, value)
    res = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e6, dense=True, colsum=True, nearest=True)
    np.testing.assert_allclose(res.dense, u, atol=1e-12)
    np.testing.assert_allclose(res.num / res.den[:, None], V1, atol=1e-10)
    assert res.objective == pytest.approx(J, rel=1e-10)
    np.testing.assert_allclose(res.colsum, u.sum(0), atol=1e-9)
    np.testing.assert_array_equal(res.nearest, u.argmax(1))


def test_small_blocks_give_the_same_pass():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1000, 4))
    V = rng.normal(size=(7, 4))
    fz = _fcm.Fuzzifier("fcm", 1.7)
    big = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e8, dense=True)
    small = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=7 * 8 * 4 * 10, dense=True)  # 10-row blocks
    np.testing.assert_allclose(small.dense, big.dense, atol=1e-14)
    np.testing.assert_allclose(small.num, big.num, rtol=1e-12)
    assert small.objective == pytest.approx(big.objective, rel=1e-12)


@pytest.mark.parametrize(("kind", "value"), [("fcm", 2.0), ("fcm", 1.25), ("efcm", 2.0)])
def test_truncated_pass_with_every_centre_is_exact(kind, value):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    V = rng.normal(size=(5, 3))
    fz = _fcm.Fuzzifier(kind, value)
    exact = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e6, dense=True)
    trunc = _fcm.truncated_pass(_fcm._Data(X), V, fz, 5, budget_bytes=1e6, store=True)
    np.testing.assert_allclose(trunc.top_indices.shape, (200, 5))
    dense = np.zeros((200, 5))
    np.put_along_axis(dense, trunc.top_indices, trunc.top_values, axis=1)
    np.testing.assert_allclose(dense, exact.dense, atol=1e-12)
    np.testing.assert_allclose(trunc.num / trunc.den[:, None], exact.num / exact.den[:, None], atol=1e-10)


def test_a_record_on_a_centre_gets_membership_one():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0], [5.0, 5.0]])
    V = X[:3].copy()
    for fz in (_fcm.Fuzzifier("fcm", 2.0), _fcm.Fuzzifier("fcm", 1.3), _fcm.Fuzzifier("fcm", 4.0),
               _fcm.Fuzzifier("efcm", 1e9)):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            res = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e6, dense=True, update=True)
        np.testing.assert_array_equal(res.dense[:3], np.eye(3))
        assert np.all(np.isfinite(res.num)) and np.isfinite(res.objective)
        assert res.dense[3].sum() == pytest.approx(1.0)


def test_two_coinciding_centres_share_the_record():
    X = np.array([[1.0, 1.0], [4.0, 4.0]])
    V = np.array([[1.0, 1.0], [1.0, 1.0], [9.0, 9.0]])
    res = _fcm.exact_pass(_fcm._Data(X), V, _fcm.Fuzzifier("fcm", 2.0), budget_bytes=1e6, dense=True)
    np.testing.assert_allclose(res.dense[0], [0.5, 0.5, 0.0])


@pytest.mark.parametrize("lam", [1e3, 1e8, 1e300])
def test_efcm_large_lambda_does_not_overflow(lam):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3)) * 100
    V = rng.normal(size=(4, 3)) * 100
    with np.errstate(over="raise", invalid="raise"):
        res = _fcm.exact_pass(_fcm._Data(X), V, _fcm.Fuzzifier("efcm", lam), budget_bytes=1e6, dense=True)
    assert np.all(np.isfinite(res.dense))
    np.testing.assert_allclose(res.dense.sum(1), 1.0)
    # the crisp limit: all mass on the nearest centre, found here independently
    nearest = np.argmin(((X[:, None, :] - V[None, :, :]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(res.dense.argmax(1), nearest)
    assert res.dense.max(1).min() > 0.999


@SETTINGS
@given(n=st.integers(2, 60), c=st.integers(1, 8), d=st.integers(1, 4),
       m=st.floats(1.01, 6.0), lam=st.floats(1e-3, 1e4), seed=st.integers(0, 10**6),
       scale=st.sampled_from([1e-3, 1.0, 1e4]))
def test_memberships_sum_to_one(n, c, d, m, lam, seed, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    V = X[rng.integers(0, n, c)] + rng.normal(size=(c, d)) * scale * rng.integers(0, 2)
    for fz in (_fcm.Fuzzifier("fcm", m), _fcm.Fuzzifier("efcm", lam)):
        res = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e6, dense=True, colsum=True)
        assert np.all(res.dense >= 0)
        np.testing.assert_allclose(res.dense.sum(1), 1.0, atol=1e-12)
        assert res.colsum.sum() == pytest.approx(n, rel=1e-10)


@SETTINGS
@given(seed=st.integers(0, 10**6), m=st.floats(1.1, 3.0), c=st.integers(2, 6))
def test_exact_fcm_objective_never_increases(seed, m, c):
    X = clustered(80, 2, seed)
    rng = np.random.default_rng(seed)
    V = X[rng.choice(80, c, replace=False)] + 0.01
    objectives = []
    fz = _fcm.Fuzzifier("fcm", m)
    data = _fcm._Data(X)
    for _ in range(15):
        res = _fcm.exact_pass(data, V, fz, budget_bytes=1e6)
        objectives.append(res.objective)
        V = res.num / res.den[:, None]
    assert np.all(np.diff(objectives) <= 1e-9 * np.abs(objectives[:-1]))


@pytest.mark.parametrize(("kind", "value"), [("fcm", 2.0), ("fcm", 1.5), ("fcm", 2.7), ("efcm", 3.0)])
def test_update_pass_matches_the_exact_pass_whatever_the_threads(kind, value, monkeypatch):
    # Small data on the threaded path: lower the threading threshold and the
    # block size (the same for one and two threads) rather than use 120,000 records.
    monkeypatch.setattr(_fcm_passes, "PARALLEL_MIN_WORK", 0)
    monkeypatch.setattr(_fcm_passes, "_CACHE_ELEMENTS", 1 << 12)
    pools = []

    class CountingPool(_fcm_passes.ThreadPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(kwargs.get("max_workers", args[0] if args else None))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_fcm_passes, "ThreadPoolExecutor", CountingPool)
    rng = np.random.default_rng(13)
    X = rng.normal(size=(4_000, 3))
    V = np.vstack([X[:3], rng.normal(size=(6, 3))])  # three centres on records: zero distances
    fz = _fcm.Fuzzifier(kind, value)
    data = _fcm._Data(X)
    exact = _fcm.exact_pass(data, V, fz, budget_bytes=1e8)
    one = _fcm.update_pass(data, V, fz, budget_bytes=1e8, threads=1)
    assert pools == []
    two = _fcm.update_pass(data, V, fz, budget_bytes=1e8, threads=2)
    assert pools == [2]  # the threaded path ran
    np.testing.assert_array_equal(one.num, two.num)  # fixed chunks: identical sums
    assert one.objective == two.objective
    np.testing.assert_allclose(one.num / one.den[:, None], exact.num / exact.den[:, None], atol=1e-9)
    assert one.objective == pytest.approx(exact.objective, rel=1e-9)


def test_integer_powers_match_numpy():
    r = np.random.default_rng(5).random((7, 9))
    for a in (1, 2, 3, 5, 10, 16, 63, 2.5, 0.3):
        out = np.empty_like(r)
        _fcm_passes._power_inplace(r, a, out)
        np.testing.assert_allclose(out, r**a, rtol=1e-12)


# ---------------------------------------------------------------------------
# truncation: audit, certified candidate lists
# ---------------------------------------------------------------------------


def test_audit_dropped_mass_is_exact():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(400, 2))
    V = X[rng.choice(400, 60, replace=False)] + 1e-3
    fz = _fcm.Fuzzifier("fcm", 1.3)
    audit = _fcm.audit_tail(_fcm._Data(X), V, fz, 20, rng, sample_size=50, budget_bytes=1e6)
    u, _, _ = reference(X[audit.sample], V, "fcm", 1.3)
    top = -np.sort(-u, axis=1)
    np.testing.assert_allclose(audit.dropped, np.clip(1 - np.cumsum(top, axis=1)[:, :20], 0, 1), atol=1e-12)
    tol = float(np.median(audit.dropped[:, 9]))  # a tolerance some p <= 20 reaches
    tol = max(tol, float(audit.dropped[:, -1].max()))
    p = audit.needed(tol)
    assert p is not None and audit.at(p).max() <= tol
    assert p == 1 or audit.at(p - 1).max() > tol
    assert audit.needed(1e-30) is None


@SETTINGS
@given(seed=st.integers(0, 10**6), p=st.integers(1, 6), big=st.floats(0.0, 2.0))
def test_candidate_lists_always_hold_the_true_nearest_centres(seed, p, big):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 3))
    V = X[rng.choice(300, 40, replace=False)].copy()
    data = _fcm._Data(X)
    cand = _fcm.Candidates(data, p, 40, workers=1)
    for _ in range(6):
        D, idx = cand.distances(V)
        true = np.argsort(((X[:, None] - V[None]) ** 2).sum(-1), axis=1, kind="stable")[:, :p]
        truth_d = np.sort(((X[:, None] - V[None]) ** 2).sum(-1), axis=1)[:, p - 1]
        # every true p-nearest centre is a candidate (up to exact distance ties)
        for k in range(300):
            missing = set(true[k]) - set(idx[k])
            for j in missing:
                assert ((X[k] - V[j]) ** 2).sum() == pytest.approx(truth_d[k])
        np.testing.assert_allclose(D, ((X[:, None] - V[idx]) ** 2).sum(-1), atol=1e-10)
        # most centres move a little, a few move a lot
        V = V + rng.normal(size=V.shape) * 0.02
        movers = rng.choice(40, 2, replace=False)
        V[movers] += rng.normal(size=(2, 3)) * big


def test_candidate_pass_equals_truncated_pass_on_fresh_lists():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(500, 2))
    V = X[rng.choice(500, 80, replace=False)]
    fz = _fcm.Fuzzifier("fcm", 1.2)
    data = _fcm._Data(X)
    cand = _fcm.Candidates(data, 4, 80, workers=1)
    a = _fcm.candidate_pass(cand, V, fz)
    b = _fcm.truncated_pass(data, V, fz, cand.P, budget_bytes=1e6)
    np.testing.assert_allclose(a.num, b.num, rtol=1e-10)
    np.testing.assert_allclose(a.den, b.den, rtol=1e-10)
    assert a.objective == pytest.approx(b.objective, rel=1e-10)


def test_truncated_fit_stays_close_to_the_exact_fit(monkeypatch):
    X = clustered(900, 2, 8, centres=30)
    frame = pd.DataFrame(X, columns=["a", "b"])
    exact = fit(FCM(n_clusters=150, m=1.1, n_init=1), frame, seed=3)
    monkeypatch.setattr(fuzzy, "EXACT_MAX_CENTRES", 16)
    trunc = fit(FCM(n_clusters=150, m=1.1, n_init=1, mass_tol=1e-6), frame, seed=3)
    assert exact.diagnostics["iteration_path"] == "exact"
    assert trunc.diagnostics["iteration_path"] == "truncated"
    assert trunc.diagnostics["membership_path"] == "dense"  # 900 x 150 fits the budget
    assert trunc.diagnostics["iteration_audit_max_dropped"] <= 1e-6
    assert trunc.diagnostics["objective"] == pytest.approx(exact.diagnostics["objective"], rel=1e-3)
    # the same centres, numbered differently (the truncated path numbers them in KD-tree order)
    from scipy.optimize import linear_sum_assignment

    cost = ((trunc.centres[:, None] - exact.centres[None]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    np.testing.assert_allclose(trunc.centres[rows], exact.centres[cols], atol=1e-3 * np.ptp(X))


def test_top_memberships_beyond_the_budget(monkeypatch):
    X = clustered(800, 2, 9, centres=25)
    frame = pd.DataFrame(X, columns=["a", "b"])
    monkeypatch.setattr(fuzzy, "EXACT_MAX_CENTRES", 16)
    part = fit(FCM(n_clusters=100, m=1.15, n_init=1, memory_budget=0.1), frame, seed=2)  # 800 x 100 x 8 > 0.1 MB
    top = part.memberships
    assert isinstance(top, TopMemberships)
    assert part.diagnostics["membership_path"] == "truncated"
    np.testing.assert_allclose(top.values.sum(1), 1.0)
    np.testing.assert_array_equal(top.indices[:, 0], part.labels)
    # the exact memberships, for comparison
    std = fuzzy.standardise(X, ["a", "b"], True, "t")
    z_centres = std.to_z(part.centres)
    u, _, _ = reference(std.z, z_centres, "fcm", 1.15)
    kept = np.take_along_axis(u, top.indices.astype(np.int64), axis=1)
    np.testing.assert_allclose(top.values, kept / kept.sum(1, keepdims=True), atol=1e-9)
    true_dropped = 1 - kept.sum(1)
    assert true_dropped.max() <= part.diagnostics["dropped_mass_max"] * 10 + 1e-3
    np.testing.assert_allclose(top.column_sums(), u.sum(0), atol=1e-2 * 800 / 100)


def test_exact_fallback_when_no_affordable_truncation(monkeypatch):
    X = clustered(600, 3, 10, centres=20)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    monkeypatch.setattr(fuzzy, "EXACT_MAX_CENTRES", 16)
    part = fit(FCM(n_clusters=60, m=3.0, n_init=1, max_neighbours=4, memory_budget=0.05, max_iter=5), frame, seed=1)
    dg = part.diagnostics
    assert dg["iteration_fallback_exact"] is True and dg["iteration_path"] == "exact"
    assert dg["membership_fallback_exact"] is True and dg["membership_path"] == "exact"
    top = part.memberships
    std = fuzzy.standardise(X, ["a", "b", "c"], True, "t")
    u, _, _ = reference(std.z, std.to_z(part.centres), "fcm", 3.0)
    kept = np.take_along_axis(u, top.indices.astype(np.int64), axis=1)
    np.testing.assert_allclose(top.dropped, 1 - kept.sum(1), atol=1e-12)  # exact on this path
    renormalised = kept / kept.sum(1, keepdims=True)
    expected = np.bincount(top.indices.ravel(), weights=renormalised.ravel(), minlength=60)
    np.testing.assert_allclose(top.column_sums(), expected, atol=1e-9)


def test_exact_draw_follows_the_memberships():
    X = np.zeros((40000, 2))
    V = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    fz = _fcm.Fuzzifier("fcm", 1.8)
    res = _fcm.exact_pass(_fcm._Data(X), V, fz, budget_bytes=1e6, update=False, dense=True,
                          draw=np.random.default_rng(0))
    freq = np.bincount(res.labels, minlength=3) / 40000
    np.testing.assert_allclose(freq, res.dense[0], atol=0.01)
    trunc = _fcm.truncated_pass(_fcm._Data(X), V, fz, 3, budget_bytes=1e6, update=False,
                                draw=np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(trunc.labels, minlength=3) / 40000, res.dense[0], atol=0.01)


# ---------------------------------------------------------------------------
# the components
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("component", [FCM(n_clusters=3, m=1.5), EFCM(n_clusters=3, lambda_=2.0), FCM(n_clusters=2)])
def test_conformance(component):
    pt.check_component(component, ds.table1())


def test_partition_contents():
    frame = ds.table1()
    part = fit(FCM(n_clusters=4, m=1.5), frame)
    assert part.centres.shape == (4, 3) and part.memberships.shape == (12, 4)
    np.testing.assert_allclose(part.memberships.sum(1), 1.0)
    np.testing.assert_array_equal(part.labels, part.memberships.argmax(1))
    assert part.columns == ("exp16", "exp7", "total")
    dg = part.diagnostics
    assert dg["m"] == 1.5 and dg["c"] == 4 and dg["converged"] and dg["restarts"] == 3
    assert dg["membership_path"] == "dense" and dg["dropped_mass_max"] == 0.0
    # centres are in the original units: near the records, not near 0
    assert part.centres[:, 2].max() > 150


def test_standardise_false_clusters_raw_units():
    frame = pd.DataFrame({"big": [0.0, 1.0, 100.0, 101.0], "small": [0.0, 0.5, 0.0, 0.5]})
    part = fit(FCM(n_clusters=2, m=1.5, scale="none"), frame)
    assert part.labels[0] == part.labels[1] != part.labels[2] == part.labels[3]
    # standardised, "small" weighs as much as "big": same partition here, but different centres metric
    assert not fit(FCM(n_clusters=2, m=1.5), frame).diagnostics["objective"] == part.diagnostics["objective"]


def test_defaults_of_m_and_lambda():
    assert FCM(n_clusters=2).fuzzifier().value == fuzzy.DEFAULT_M == 2.0
    assert EFCM(n_clusters=2).fuzzifier().value == fuzzy.DEFAULT_LAMBDA == 1.0


@pytest.mark.parametrize("kwargs", [{"m": 1.0}, {"m": 0.5}, {"n_clusters": 0}, {"tol": -1.0}, {"max_iter": 0},
                                    {"n_init": 0}, {"n_init": "best"}, {"memory_budget": 0}, {"mass_tol": 1.0},
                                    {"max_neighbours": -1}, {"m": "2"}])
def test_bad_fcm_parameters(kwargs):
    with pytest.raises(ParameterError):
        FCM(**kwargs)


@pytest.mark.parametrize("lam", [0.0, -1.0])
def test_bad_lambda(lam):
    with pytest.raises(ParameterError, match="'lambda'"):
        EFCM(n_clusters=2, lambda_=lam)


@pytest.mark.parametrize("component, key, value", [(FCM, "m", np.inf), (EFCM, "lambda_", np.inf),
                                                   (EFCM, "lambda_", float("inf"))])
def test_infinite_fuzzifiers_are_refused(component, key, value):
    # inf passes the bound (inf > 1, inf > 0) but gives NaN (efcm: 0/0) or uniform (fcm) memberships
    name = key.rstrip("_")
    with pytest.raises(ParameterError, match=rf"'{name}' parameter of {component.name} must be a finite number"):
        component(n_clusters=2, **{key: value})
    with pytest.raises(privclust.RecipeError, match=rf"'{name}' parameter of {component.name} must be a finite"):
        privclust.compile({"steps": [{"use": component.name, "n_clusters": 2, name: value}]})
    # a large finite value is still fine (the log-sum-exp shift)
    part = component(n_clusters=3, **{key: 1e300 if name == "lambda" else 50.0}).fit(ds.table1(),
                                                                                   PrivacyContext(seed=1))
    assert np.isfinite(part.memberships).all() and np.isfinite(part.centres).all()


def test_non_finite_final_memberships_are_refused(monkeypatch):
    real = fuzzy.compute_memberships

    def poisoned(*args, **kwargs):
        mem = real(*args, **kwargs)
        bad = np.array(mem.memberships, copy=True)
        bad[0] = np.nan
        return type(mem)(**{**{a.name: getattr(mem, a.name) for a in mem.__attrs_attrs__}, "memberships": bad})

    monkeypatch.setattr(fuzzy, "compute_memberships", poisoned)
    with pytest.raises(ParameterError, match=r"efcm: the final memberships \(lambda = 2\) are not finite for 1 "):
        EFCM(n_clusters=3, lambda_=2.0).fit(ds.table1(), PrivacyContext(seed=1))


def test_bad_data():
    frame = ds.table1()
    with pytest.raises(DataError, match="n_clusters = 13 clusters but only 12 records"):
        fit(FCM(n_clusters=13), frame)
    with pytest.raises(ParameterError, match="needs the number of clusters 'n_clusters'"):
        fit(FCM(), frame)
    const = frame.assign(k=7.0)
    with pytest.raises(DataError, match=r"'k' \(every value 7\) are constant or nearly"):
        fit(FCM(n_clusters=2), const)
    np.testing.assert_allclose(fit(FCM(n_clusters=2, scale="none"), const).centres[:, 3], 7.0, rtol=1e-14)
    nan = frame.copy()
    nan.loc[3, "exp7"] = np.nan
    with pytest.raises(DataError, match="exp7"):
        fit(FCM(n_clusters=2, missing="refuse"), nan)
    assert np.isfinite(fit(FCM(n_clusters=2), nan).centres).all()  # missing = "observed", the default
    with pytest.raises(DataError, match="exp7"):
        fit(FCM(n_clusters=2), frame.assign(exp7=np.inf))
    dup = pd.DataFrame({"a": [1.0, 1.0, 1.0, 2.0], "b": [0.0, 0.0, 0.0, 1.0]})
    with pytest.raises(DataError, match="only 2 distinct records"):
        fit(FCM(n_clusters=3), dup)


def test_rules_bound_to_other_columns_are_an_error():
    context, _ = rules_context(["exp16", "exp7", "total", "x"], [TABLE1_RULE, "x >= 0"])
    with pytest.raises(privclust.ConstraintError, match="bound to columns"):
        fit(FCM(n_clusters=2), ds.table1(), context)


def test_recipe_step_releases_labels():
    recipe = {"constraints": [{"use": "linear", "rules": [TABLE1_RULE]}],
              "steps": [{"use": "efcm", "n_clusters": 3, "lambda": 2.0, "output": "group"}]}
    release = privclust.run(recipe, ds.table1(), seed=4)
    assert release.data["group"].between(0, 2).all()
    part = release.outcomes[0].partition
    assert np.abs(part.centres @ np.array([1.16, 1.07, -1.0])).max() < 1e-9
    with pytest.raises(privclust.RecipeError, match="needs the number of clusters 'n_clusters'"):
        privclust.compile({"steps": [{"use": "fcm"}]})


def test_progress_is_reported_and_throttled():
    calls = []
    context = PrivacyContext(seed=0)
    frame = pd.DataFrame(clustered(60, 2))
    with context.step(0, "fit", "fcm", on_progress=lambda done, total: calls.append((done, total))):
        FCM(n_clusters=3, m=1.5, tol=0.0, max_iter=500, n_init=2).fit(frame, context)
    assert 3 <= len(calls) <= 202
    assert calls[-1][0] == calls[-1][1] == len(frame)  # whole records, up to the step's number of records
    done = [c[0] for c in calls]
    assert done == sorted(done) and all(type(d) is int for d in done)


def test_restarts_keep_the_best_objective():
    X = clustered(150, 2, 11, centres=6)
    frame = pd.DataFrame(X, columns=["a", "b"])
    best = fit(FCM(n_clusters=6, m=1.3, n_init=5), frame, seed=5)
    context = PrivacyContext(seed=5)
    with context.step(0, "fit", "fcm"):
        std = fuzzy.standardise(X, ["a", "b"], True, "t")
        singles = [FCM(n_clusters=6, m=1.3, n_init=1).fit_arrays(std, 6, context).objective for _ in range(5)]
    assert best.diagnostics["objective"] <= max(singles)
    assert best.diagnostics["restarts"] == 5


# ---------------------------------------------------------------------------
# edit rules on the centres (seed Prop. 4-7)
# ---------------------------------------------------------------------------


@SETTINGS
@given(seed=st.integers(0, 10**6), m=st.floats(1.1, 3.0), lam=st.floats(0.2, 20.0), efcm=st.booleans(),
       c=st.integers(1, 5), noise=st.floats(0.0, 5.0))
def test_constrained_centres_satisfy_the_rules_after_every_iteration(seed, m, lam, efcm, c, noise):
    rng = np.random.default_rng(seed)
    base = ds.table1().to_numpy()
    X = base + rng.normal(0, noise, base.shape)
    frame = pd.DataFrame(X, columns=["exp16", "exp7", "total"])
    context, cs = rules_context(list(frame.columns), [TABLE1_RULE, "exp16 >= 14", "total <= 300"])
    component = EFCM(n_clusters=c, lambda_=lam, max_iter=25) if efcm else FCM(n_clusters=c, m=m, max_iter=25)
    seen = []
    with context.step(0, "fit", component.name, constraints=cs):
        std = fuzzy.standardise(X, list(frame.columns), True, "t")
        result = component.fit_arrays(std, c, context, constraints=cs,
                                      callback=lambda it, centres: seen.append(centres.copy()))
    assert len(seen) == result.iterations * result.restarts or len(seen) >= result.iterations
    for centres in [*seen, result.centres]:
        assert cs.satisfied(centres, tol=1e-9).all(), cs.violations(centres)


@pytest.mark.parametrize("component", [FCM(n_clusters=4, m=1.5, n_init=1), EFCM(n_clusters=4, lambda_=3.0, n_init=1)])
def test_data_satisfying_the_rules_give_the_unconstrained_centres(component):
    X = ds.table1().to_numpy()[:-1]  # the last record violates the rule; the others satisfy it
    frame = pd.DataFrame(X, columns=["exp16", "exp7", "total"])
    free = fit(component, frame, seed=9)
    context, _ = rules_context(list(frame.columns), [TABLE1_RULE], seed=9)
    constrained = fit(component, frame, context)
    np.testing.assert_allclose(constrained.centres, free.centres, atol=1e-8)
    np.testing.assert_allclose(constrained.memberships, free.memberships, atol=1e-8)


def test_a_variable_in_no_rule_is_untouched_by_the_projection():
    rng = np.random.default_rng(12)
    X = np.column_stack([ds.table1().to_numpy() + rng.normal(0, 2, (12, 3)), rng.normal(50, 10, 12)])
    columns = ["exp16", "exp7", "total", "free"]
    std = fuzzy.standardise(X, columns, True, "t")
    _, cs = rules_context(columns, [TABLE1_RULE])
    project = fuzzy.z_projector(cs, std)
    V0 = std.z[[0, 4, 8]] + 0.1
    fz = _fcm.Fuzzifier("fcm", 1.6)
    free = _fcm.run(std.z, V0, fz, tol=0, max_iter=1, budget_bytes=1e6)
    constrained = _fcm.run(std.z, V0, fz, tol=0, max_iter=1, budget_bytes=1e6, project=project)
    # same memberships in the first pass (same starting centres): the free column's update is unchanged
    np.testing.assert_allclose(constrained.centres[:, 3], free.centres[:, 3], atol=1e-12)
    assert not np.allclose(constrained.centres[:, :3], free.centres[:, :3])
    original = std.to_original(constrained.centres)
    assert np.abs(original[:, :3] @ np.array([1.16, 1.07, -1.0])).max() < 1e-9


def test_single_equality_matches_the_papers_closed_form():
    """Seed Eq. 5 (with the typo fixed): v = vbar - alpha (alpha.vbar - A) / ||alpha||^2, in the
    metric clustered (here unstandardised)."""
    X = ds.table1().to_numpy()
    alpha = np.array([1.16, 1.07, -1.0])
    V0 = X[[0, 2, 5]].astype(float)
    fz = _fcm.Fuzzifier("fcm", 2.0)
    _, cs = rules_context(["exp16", "exp7", "total"], [TABLE1_RULE])
    std = fuzzy.standardise(X, ["exp16", "exp7", "total"], False, "t")
    res = _fcm.exact_pass(_fcm._Data(X), V0, fz, budget_bytes=1e6)
    vbar = res.num / res.den[:, None]
    paper = vbar - np.outer(vbar @ alpha, alpha) / (alpha @ alpha)
    ours = _fcm.run(X, V0, fz, tol=0, max_iter=1, budget_bytes=1e6, project=fuzzy.z_projector(cs, std)).centres
    np.testing.assert_allclose(ours, paper, atol=1e-9)


# ---------------------------------------------------------------------------
# kernels of fuzzy microaggregation's rules: seeds, rows with centres left out
# ---------------------------------------------------------------------------


def _textbook_excluding(X, V, fz, exclude, p=None):
    D = ((X[:, None, :] - V[None]) ** 2).sum(-1)
    for r, cols in enumerate(exclude):
        D[r, cols] = np.inf
    if p is not None:  # the p nearest remaining centres only
        far = np.argsort(D, axis=1, kind="stable")[:, p:]
        np.put_along_axis(D, far, np.inf, axis=1)
    if fz.kind == "fcm":
        with np.errstate(divide="ignore"):
            w = D ** (-1.0 / (fz.value - 1.0))
        on = (D == 0).any(axis=1)
        w[on] = (D[on] == 0).astype(float)  # a record on a centre: membership 1 there
    else:
        w = np.exp(-fz.value * (D - D.min(1, keepdims=True)))
    return w / w.sum(1, keepdims=True)


@pytest.mark.parametrize("kind, value", [("fcm", 1.5), ("fcm", 2.0), ("efcm", 3.0)])
@pytest.mark.parametrize("p", [None, 3])
def test_subset_rows_leave_the_excluded_centres_out(kind, value, p):
    rng = np.random.default_rng(4)
    V = rng.normal(size=(12, 3))
    X = np.vstack([V[[0, 5]], rng.normal(size=(3, 3))])  # two records on a centre
    exclude = [np.array([0]), np.array([5]), np.array([], dtype=np.int64), np.array([1, 2]),
               np.array([], dtype=np.int64)]
    fz = _fcm.Fuzzifier(kind, value)
    res = _fcm.subset_rows(X, V, fz, exclude, p=p, width=12 if p is None else p, budget_bytes=1e6,
                           rng=np.random.default_rng(0))
    expected = _textbook_excluding(X, V, fz, exclude, p)
    got = np.zeros((5, 12))
    np.put_along_axis(got, res.indices, res.values * (1.0 - res.dropped)[:, None], axis=1)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    np.testing.assert_allclose(res.colsum_new, expected.sum(0), atol=1e-12)
    np.testing.assert_allclose(res.colsum_old, _textbook_excluding(X, V, fz, [[]] * 5, p).sum(0), atol=1e-12)
    assert all(label not in cols for label, cols in zip(res.labels, exclude, strict=True))
    assert not res.stuck.any()


def test_subset_rows_with_no_other_centre_are_stuck():
    V = np.array([[0.0, 0.0]])
    res = _fcm.subset_rows(V.copy(), V, _fcm.Fuzzifier("fcm", 2.0), [np.array([0])], p=None, width=1,
                           budget_bytes=1e6, rng=np.random.default_rng(0))
    assert res.stuck.tolist() == [True] and res.labels.tolist() == [0]


def test_group_seeds_are_means_of_the_nearest_records():
    X = np.arange(10.0)[:, None] ** 2
    np.testing.assert_allclose(_fcm.group_seeds(X, X[[0, 9]], 3), [[(0 + 1 + 4) / 3], [(49 + 64 + 81) / 3]])
    np.testing.assert_array_equal(_fcm.group_seeds(X, X[[2]], 1), X[[2]])


@pytest.mark.parametrize("use", ["fuzzy-microaggregation", "microaggregation"])
def test_extreme_magnitudes_get_true_reasons(use):
    """Thirty distinct records times 1e-300 were called 'constant', and times
    1e300 'only 4 distinct records' (the variance under- and overflowed);
    values near the largest double overflowed a group mean and the run
    blamed a plugin bug. Tiny values now run; huge ones are refused by
    column, with the fix."""
    rng = np.random.default_rng(1)
    base = pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30)})
    tiny = privclust.run({"steps": [{"use": use, "k": 3}]}, base * 1e-300, seed=1)
    assert np.isfinite(tiny.data.to_numpy()).all() and tiny.data["a"].abs().max() < 1e-299
    with pytest.raises(privclust.DataError, match=r"column\(s\) 'a', 'b' hold values above 1e\+300 in magnitude"):
        privclust.run({"steps": [{"use": use, "k": 3}]}, base * 1e300, seed=1)


def test_size_problems_name_n_clusters_and_what_fits():
    """The preflight's words for too few records (``size_problems``): the floor is max(2, n_clusters)."""
    assert FCM(n_clusters=3).size_problems(1, 2) == ["fcm needs at least 3 records (n_clusters = 3); the data have 1"]
    assert FCM(n_clusters=3).size_problems(2, 2) == [
        "fcm: n_clusters = 3 clusters but only 2 records; lower n_clusters (at most 2)"]
    assert FCM(n_clusters=3).size_problems(3, 2) == []
    assert FCM(n_clusters=3).min_records(2) == 3
