"""Tests of dp-density above 4 columns: the private basis (issue 26, item 2; plugins/_dp_basis.py)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

import privclust.testing as pt
from privclust import Budget, BudgetExceededError, DataError, PrivacyContext
from privclust_plugins import _dp_basis
from privclust_plugins.dp_density import DPDensity


def fit(component, data, *, seed=1, budget=None):
    context = PrivacyContext(budget, seed=seed)
    with context.step(0, "dens", component.name):
        partition = component.fit(data, context)
    return partition, context


def separated(d=10, n=20_000, k=4, seed=0):
    """``k`` clusters of sd 1 in ``d`` columns, centres 12 sd apart on the axes, bounds [-20, 20]^d."""
    rng = np.random.default_rng(seed)
    centres = np.zeros((k, d))
    for c in range(k):
        centres[c, c % d] = 12.0 if c < d else -12.0
    y = rng.integers(0, k, n)
    cols = [f"c{j}" for j in range(d)]
    return pd.DataFrame(centres[y] + rng.normal(0, 1.0, (n, d)), columns=cols), y, {c: [-20.0, 20.0] for c in cols}


def test_spending_with_the_basis_is_exact_and_in_four_releases():
    data, _, bounds = separated(d=10, n=5_000)
    # add/remove: the budget bounds the total counted twice (rt17 F1)
    part, context = fit(DPDensity(epsilon=1.3, bounds=bounds), data, budget=Budget(epsilon=2.6))
    dp = context.ledger.of_kind("dp")
    assert [e.details["release"] for e in dp] == ["basis", "count", "tree", "leaves"]
    assert math.fsum(e.epsilon for e in dp) == pytest.approx(1.3, rel=1e-12, abs=0)
    assert dp[0].epsilon == pytest.approx(1.3 * _dp_basis.BASIS_SHARE, rel=1e-15)
    assert dp[0].details["columns"] == 10 and dp[0].details["values"] == 1 + 10 + 55
    assert context.remaining == pytest.approx(0.0, abs=1e-12)
    # one statement for the whole step, naming the four releases and the total epsilon
    stated = [e for e in context.ledger if e.kind == "guarantee"]
    assert len(stated) == 1 and "1.3-DP" in stated[0].statement and "four laplace releases" in stated[0].statement
    assert stated[0].details["epsilon"] == 1.3 and stated[0].details["epsilon_basis"] == dp[0].epsilon
    assert part.diagnostics["epsilon_basis"] == dp[0].epsilon


def test_ten_well_separated_columns_are_not_one_cluster():
    data, y, bounds = separated(d=10, n=20_000, k=4)
    part, _ = fit(DPDensity(epsilon=1.0, bounds=bounds), data)
    assert part.n_clusters >= 2
    assert adjusted_rand_score(y, part.labels) > 0.9
    assert 2 <= part.diagnostics["basis_dimensions"] <= _dp_basis.MAX_DIMENSIONS
    # the centres are in the columns' own units, one row per cluster, inside the bounds
    centres = np.asarray(part.centres)
    assert centres.shape == (part.n_clusters, 10) and part.columns == tuple(data.columns)
    assert np.all((centres >= -20.0) & (centres <= 20.0))


@pytest.mark.parametrize("d", [5, 13])
def test_a_neighbour_changes_the_released_statistic_by_at_most_its_sensitivity(d):
    """Add/remove one record (inside, at a corner, far outside the bounds: clipped) to a data set: the statistic
    the basis releases moves by at most the L1 sensitivity the ledger states, and a corner record reaches it."""
    rng = np.random.default_rng(d)
    cols = [f"c{j}" for j in range(d)]
    bounds = {c: [-3.0, 5.0] for c in cols}
    component = DPDensity(epsilon=1.0, bounds=bounds)
    base = pd.DataFrame(rng.uniform(-3, 5, (300, d)), columns=cols)
    s0, _, _ = _dp_basis.sums_of(base, component._unit)
    extremes = [rng.uniform(-3, 5, d), np.full(d, 5.0), np.full(d, -3.0), np.where(np.arange(d) % 2, 1e9, -1e9),
                rng.normal(0, 1e6, d)]
    bound = _dp_basis.sensitivity(d)
    moved = []
    for x in extremes:
        s1, _, _ = _dp_basis.sums_of(pd.concat([base, pd.DataFrame([x], columns=cols)], ignore_index=True),
                                     component._unit)
        moved.append(float(np.abs(s1 - s0).sum()))
    assert max(moved) <= bound * (1 + 1e-12)
    assert moved[1] == pytest.approx(bound, rel=1e-9)  # the corner: the bound is tight
    # removing a record of the data set: the same bound
    s_minus, _, _ = _dp_basis.sums_of(base.iloc[1:], component._unit)
    assert np.abs(s0 - s_minus).sum() <= bound * (1 + 1e-12)
    # and the ledger states exactly that sensitivity
    data, _, wide = separated(d=d, n=2_000, k=2)
    _, context = fit(DPDensity(epsilon=1.0, bounds=wide), data)
    assert context.ledger.of_kind("dp")[0].sensitivity == pytest.approx(bound)
    assert bound == 1 + d / 2 + d * (d + 1) / 8


def test_the_sums_are_accumulated_in_blocks_with_bounded_memory(monkeypatch):
    n, d = 300_000, 20
    rng = np.random.default_rng(0)
    cols = [f"c{j}" for j in range(d)]
    data = pd.DataFrame(rng.uniform(0, 1, (n, d)), columns=cols)
    component = DPDensity(epsilon=1.0, bounds={c: [0.0, 1.0] for c in cols})
    tracemalloc.start()
    try:
        sums, _, _ = _dp_basis.sums_of(data, component._unit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    full = n * d * 8  # one n x d array of doubles: 48 MB (and n x d^2 would be 960 MB)
    assert peak < full / 2, f"peak {peak / 1e6:.1f} MB"
    y = data.to_numpy() - 0.5
    np.testing.assert_allclose(sums, _dp_basis.statistic(y), rtol=1e-9, atol=1e-6)
    # the blocks change nothing but the rounding
    monkeypatch.setattr(_dp_basis, "BLOCK", 7_777)
    again, _, _ = _dp_basis.sums_of(data, component._unit)
    np.testing.assert_allclose(again, sums, rtol=1e-9, atol=1e-6)


def test_the_records_are_not_changed():
    data, _, bounds = separated(d=6, n=3_000)
    data.iloc[0, 0] = 1e6  # outside the bounds: clipped in the computation, never in the input
    before = data.copy(deep=True)
    fit(DPDensity(epsilon=1.0, bounds=bounds), data)
    pd.testing.assert_frame_equal(data, before)


def test_up_to_project_above_columns_nothing_changes():
    data, _, bounds = separated(d=4, n=3_000, k=3)
    part, context = fit(DPDensity(epsilon=1.0, bounds=bounds), data)
    assert [e.details["release"] for e in context.ledger.of_kind("dp")] == ["count", "tree", "leaves"]
    assert "basis_dimensions" not in part.diagnostics
    six, _, six_bounds = separated(d=6, n=3_000, k=3)
    _, context = fit(DPDensity(epsilon=1.0, bounds=six_bounds, project_above=6), six)
    assert [e.details["release"] for e in context.ledger.of_kind("dp")] == ["count", "tree", "leaves"]


def test_refused_before_any_noise_when_the_budget_is_short_or_the_data_are_bad(monkeypatch):
    data, _, bounds = separated(d=8, n=500)
    context = pt._TracingContext(Budget(epsilon=0.5), seed=1)
    with pytest.raises(BudgetExceededError, match="no noise was drawn"), context.step(0, "d", "dp-density"):
        DPDensity(epsilon=1.0, bounds=bounds).fit(data, context)
    assert len(context.ledger) == 0
    monkeypatch.setattr(_dp_basis, "BLOCK", 128)
    bad = data.copy()
    bad.iloc[-1, 3] = np.nan  # in the last block only: every block is checked before any release
    context = PrivacyContext(Budget(epsilon=5.0), seed=1)
    with pytest.raises(DataError, match="c3.*NaN"), context.step(0, "d", "dp-density"):
        DPDensity(epsilon=1.0, bounds=bounds).fit(bad, context)
    assert len(context.ledger) == 0
    with pytest.raises(DataError, match="no records"):
        fit(DPDensity(epsilon=1.0, bounds=bounds), data.iloc[:0])


def test_the_directions_follow_the_eigengap():
    assert _dp_basis.dimensions(np.array([1.0, 0.9, 0.8, 0.7, 0.01])) == 4  # a mixture of 5: 4 directions, a floor
    assert _dp_basis.dimensions(np.array([1.0, 0.47, 0.28, 0.2, 0.15])) == 2  # smooth decay (wine)
    assert _dp_basis.dimensions(np.array([1.0, 0.9, 0.01, 0.01, 0.01])) == 2
    assert _dp_basis.dimensions(np.array([1.0, 0.8, 0.7, 0.01, 0.01])) == 3
    assert _dp_basis.dimensions(np.array([1.0, -0.1, -0.2])) == 2  # noisy variances may be negative


def test_the_auditor_sees_the_basis_release_and_passes_it(registry):
    """The audit of the kit (neighbouring data sets, every release recorded) on six columns: the basis is one more
    release through the step's mechanism, and no bound exceeds the charge."""
    bounds = {c: [0, 10] for c in "abcdef"}
    component = registry.create("clusterers", "dp-density", epsilon=1.0, bounds=bounds, max_nodes=2048)
    frame = pt.example_frame(n=20, d=6, seed=1)
    frame.columns = list("abcdef")
    result = pt.audit_component(component, frame, trials=100, seed=7, registry=registry)
    assert result.passed, str(result)
    assert result.verdict == "PASSED", str(result)
