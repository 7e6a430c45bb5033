"""The built-in noise mechanisms, as callees and as recipe steps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privclust
import privclust.testing as pt
from privclust import Budget, BudgetExceededError, DataError, PrivacyContext, PrivacyLeakWarning
from privclust_plugins.noise import (
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    _gaussian_delta,
    analytic_gaussian_sigma,
)


def context(epsilon=None, seed=0, **kw):
    return PrivacyContext(Budget(epsilon=epsilon, **kw), seed=seed)


def release(mech, values, **kw):
    ctx = kw.pop("ctx", None) or context()
    args = {"sensitivity": 1.0, "epsilon": 1.0, "context": ctx, "relation": "r", "covers": "c", **kw}
    return mech.release(values, **args), ctx


def test_laplace_noise_has_the_calibrated_scale():
    noisy, ctx = release(LaplaceMechanism(), np.zeros(200_000), sensitivity=2.0, epsilon=0.5)
    # Lap(b) with b = 2 / 0.5 = 4: mean absolute deviation b
    assert np.mean(np.abs(noisy)) == pytest.approx(4.0, rel=0.02)
    assert stats.kstest(noisy / 4.0, "laplace").pvalue > 1e-3
    assert ctx.ledger[0].epsilon == 0.5 and ctx.ledger[0].sensitivity == 2.0


def test_geometric_noise_is_integer_with_the_right_law():
    noisy, _ = release(GeometricMechanism(), np.full(200_000, 7), sensitivity=1.0, epsilon=1.0)
    assert noisy.dtype == np.int64
    k = noisy - 7
    alpha = math.exp(-1.0)
    # P(0) = (1 - alpha) / (1 + alpha) for the two-sided geometric
    assert np.mean(k == 0) == pytest.approx((1 - alpha) / (1 + alpha), abs=0.005)
    assert np.mean(k) == pytest.approx(0, abs=0.02)
    with pytest.raises(DataError, match="must be integers"):
        release(GeometricMechanism(), np.array([0.5]))


def test_analytic_gaussian_sigma_is_exact_and_beats_the_classical_bound():
    for eps, delta in [(0.1, 1e-5), (0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-8)]:
        sigma = analytic_gaussian_sigma(eps, delta, 1.0)
        assert _gaussian_delta(sigma, eps, 1.0) <= delta * (1 + 1e-9)
        assert _gaussian_delta(sigma * 0.999, eps, 1.0) > delta
        if eps < 1:
            assert sigma < math.sqrt(2 * math.log(1.25 / delta)) / eps
    noisy, ctx = release(GaussianMechanism(), np.zeros(100_000), sensitivity=3.0, epsilon=1.0, delta=1e-5)
    sigma = ctx.ledger[0].details["sigma"]
    assert np.std(noisy) == pytest.approx(sigma, rel=0.02)
    # the discrete Gaussian's zCDP calibration costs a little more noise than the continuous analytic one
    assert analytic_gaussian_sigma(1.0, 1e-5, 3.0) < sigma < 1.15 * analytic_gaussian_sigma(1.0, 1e-5, 3.0)
    assert ctx.ledger[0].delta == 1e-5
    with pytest.raises(privclust.ParameterError, match="delta must be in"):
        release(GaussianMechanism(), np.zeros(3), delta=0.0)


@pytest.mark.parametrize("mech", [LaplaceMechanism(), GeometricMechanism(), GaussianMechanism()])
def test_every_mechanism_refuses_before_drawing(mech):
    ctx = context(epsilon=0.5, delta=1e-3)
    state = ctx.rng.bit_generator.state
    with pytest.raises(BudgetExceededError):
        release(mech, np.zeros(5, dtype=int), ctx=ctx, epsilon=1.0, delta=1e-4)
    assert ctx.rng.bit_generator.state == state
    assert len(ctx.ledger) == 0


def test_laplace_step_clips_to_public_bounds_and_splits_epsilon():
    data = pd.DataFrame({"a": [0.0, 5.0, 50.0], "b": [1.0, 2.0, 3.0], "label": ["x", "y", "z"]})
    recipe = {"steps": [{"use": "laplace", "columns": ["a", "b"], "epsilon": 2.0,
                         "bounds": {"a": [0, 10], "b": [0, 4]}}]}
    out = privclust.run(recipe, data, seed=1)
    masked = out.step(0).result
    assert masked.diagnostics["clipped_values"] == 1
    # (range + one lattice step) * d / epsilon: the lattices are 2^-17 Z and 2^-18 Z
    assert masked.diagnostics["noise_scale"] == [(10 + 2**-17) * 2 / 2, (4 + 2**-18) * 2 / 2]
    assert out.data["label"].equals(data["label"])
    entry = out.ledger.of_kind("dp")[0]
    assert entry.epsilon == 2.0 and "replace-one" in entry.relation
    assert "clipped" in entry.not_covered


def test_noise_step_with_bounds_from_the_data_records_a_leak(frame):
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]}
    with pytest.warns(PrivacyLeakWarning):
        out = privclust.run(recipe, frame, seed=2)
    leak = out.ledger.of_kind("leak")[0]
    assert "minimum and maximum" in leak.statement and "public bounds" in leak.statement


def test_noise_step_without_bounds_for_a_column(frame):
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}}]}
    with pytest.raises(DataError, match=r"no public bounds for column\(s\) b, c"):
        privclust.run(recipe, frame)


def test_geometric_step_keeps_integers_and_refuses_reals():
    data = pd.DataFrame({"age": [20, 35, 64, 90], "kids": [0, 2, 1, 3]})
    recipe = {"steps": [{"use": "geometric", "epsilon": 1.0, "bounds": {"age": [0, 100], "kids": [0, 10]}}]}
    out = privclust.run(recipe, data, seed=3)
    assert out.data["age"].dtype == np.int64
    with pytest.raises(DataError, match="non-integer"):
        privclust.run(recipe, data.astype(float) + 0.5)


def test_gaussian_step(frame):
    recipe = {"privacy": {"epsilon": 1, "delta": 1e-5}, "steps": [
        {"use": "gaussian", "epsilon": 1.0, "delta": 1e-5, "bounds": {c: [-5, 15] for c in frame.columns}}]}
    out = privclust.run(recipe, frame, seed=4)
    assert out.spent == (1.0, 1e-5)
    assert not np.allclose(out.data.to_numpy(), frame.to_numpy())


@pytest.mark.parametrize("bad", [{"a": [1, 0]}, {"a": [0, float("inf")]}, {"a": [0]}, "everything", 5])
def test_bad_bounds_are_parameter_errors(bad):
    with pytest.raises(privclust.ParameterError, match="bounds"):
        LaplaceMechanism(epsilon=1.0, bounds=bad)


bounds = {c: [-5, 15] for c in "abc"}


@pt.parametrize_components(LaplaceMechanism(epsilon=1.0, bounds=bounds),
                           GaussianMechanism(epsilon=1.0, delta=1e-6, bounds=bounds))
def test_conformance(component, check):
    check(component)


def test_geometric_conformance():
    pt.check_component(GeometricMechanism(epsilon=1.0, bounds=bounds), pt.example_frame().round().astype(int))
