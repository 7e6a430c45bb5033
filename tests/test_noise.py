"""The built-in noise mechanisms, as callees and as recipe steps."""

from __future__ import annotations

import math
import re

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
    recipe = {"privacy": {"allow_leaks": ["bounds"]}, "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]}
    with pytest.warns(PrivacyLeakWarning):
        out = privclust.run(recipe, frame, seed=2)
    leak = out.ledger.of_kind("leak")[0]
    assert "minimum and maximum" in leak.statement and "public bounds" in leak.statement


def test_noise_step_without_bounds_for_a_column(frame):
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}}]}
    with pytest.raises(DataError, match=r"no public bounds for column\(s\) b, c"):
        privclust.run(recipe, frame)


def test_geometric_step_keeps_integers_and_rounds_reals():
    data = pd.DataFrame({"age": [20, 35, 64, 90], "kids": [0, 2, 1, 3]})
    recipe = {"steps": [{"use": "geometric", "epsilon": 1e4, "bounds": {"age": [0, 100], "kids": [0, 10]}}]}
    out = privclust.run(recipe, data, seed=3)
    assert out.data["age"].dtype == np.int64
    # decimals are rounded to the nearest integer (half to even), not refused: a refusal would tell a data set of
    # whole numbers from its neighbour with one decimal; noise of scale 1e-4 leaves the rounded values
    halves = privclust.run(recipe, data.astype(float) + 0.5, seed=3)
    assert halves.data["age"].dtype == np.int64
    assert halves.data["age"].tolist() == [20, 36, 64, 90] and halves.data["kids"].tolist() == [0, 2, 2, 4]
    assert halves.step(0).diagnostics["rounded_values"] == 8


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


@pytest.mark.parametrize("name", ["laplace", "geometric", "gaussian"])
def test_an_infinite_epsilon_is_refused_when_the_step_is_made_not_at_release(registry, name):
    """epsilon = inf would add no noise; it used to pass the recipe check
    and fail only when the run released."""
    recipe = {"steps": [{"use": name, "epsilon": float("inf"), "bounds": {"a": [0, 10]}}
                        | ({"delta": 1e-6} if name == "gaussian" else {})]}
    with pytest.raises(privclust.PrivclustError, match=f"'epsilon' parameter of {name} must be a finite number"):
        privclust.compile(recipe, registry=registry)


bounds = {c: [-5, 15] for c in "abc"}


@pt.parametrize_components(LaplaceMechanism(epsilon=1.0, bounds=bounds),
                           GaussianMechanism(epsilon=1.0, delta=1e-6, bounds=bounds))
def test_conformance(component, check):
    check(component)


def test_geometric_conformance():
    pt.check_component(GeometricMechanism(epsilon=1.0, bounds=bounds), pt.example_frame().round().astype(int))


# ---------------------------------------------------------------------------
# Exact sampling on a lattice (issue 8, item 1)
# ---------------------------------------------------------------------------

from fractions import Fraction  # noqa: E402

from privclust import ParameterError, sampling  # noqa: E402
from privclust_plugins.noise import _cdp_delta  # noqa: E402


def on_lattice(values, gamma):
    units = np.asarray(values, dtype=float) / gamma
    return bool(np.all(units == np.round(units)))


def test_mironov_the_outputs_from_neighbours_share_one_lattice():
    """Release 0 and 1 (sensitivity 1, epsilon 1) 20,000 times each: every output of both lies on
    the lattice named in the ledger, so the set of possible outputs does not reveal the input.
    The textbook float sampler fails the same check (its outputs from 1 are not on that lattice)."""
    outs = {}
    for x in (0.0, 1.0):
        noisy, ctx = release(LaplaceMechanism(), np.full(20_000, x), changed=1, ctx=context(seed=7))
        entry = ctx.ledger[0]
        assert entry.details["lattice"] == "2^-20 Z"
        assert "on the lattice 2^-20 Z" in entry.statement
        outs[x] = noisy
    gamma = 2.0**-20
    assert on_lattice(outs[0.0], gamma) and on_lattice(outs[1.0], gamma)
    # both inputs reach the same lattice points (here with 20,000 draws at 2^20 points per unit, a few coincide)
    assert len(np.intersect1d(outs[0.0], outs[1.0])) > 0
    textbook = 1.0 + np.random.default_rng(7).laplace(0.0, 1.0, 20_000)
    assert not on_lattice(textbook, gamma)


def test_laplace_outputs_are_exact_lattice_points_with_the_right_law():
    noisy, ctx = release(LaplaceMechanism(), np.zeros(200_000), sensitivity=2.0, epsilon=0.5, changed=1)
    entry = ctx.ledger[0]
    gamma = 2.0**-19  # 2 / 2^20
    assert entry.details["lattice"] == "2^-19 Z" and on_lattice(noisy, gamma)
    scale = entry.details["exact_noise_scale"]
    assert scale * 0.5 >= entry.details["effective_sensitivity"] >= 2.0 + gamma  # the rounding is paid for
    units = np.round(noisy / gamma).astype(np.int64)
    alpha = math.exp(-gamma / scale)
    assert np.mean(units == 0) == pytest.approx((1 - alpha) / (1 + alpha), abs=1e-4)
    assert stats.kstest(noisy / scale, "laplace").pvalue > 1e-4


def test_the_same_seed_gives_the_same_release_and_another_seed_another():
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": bounds}]}
    frame = pt.example_frame()
    first, again = privclust.run(recipe, frame, seed=3), privclust.run(recipe, frame, seed=3)
    other = privclust.run(recipe, frame, seed=4)
    assert first.data.equals(again.data) and not first.data.equals(other.data)


@pytest.mark.parametrize("use, extra, ea, eb", [("laplace", {}, -17, -4),
                                               # sigma / 2^26 lattice steps at most: a coarser lattice
                                               ("gaussian", {"delta": 1e-6}, -17, -4)])
def test_the_step_releases_each_column_on_its_lattice(use, extra, ea, eb):
    data = pd.DataFrame({"a": [0.1, 5.3, 9.9, 2.2], "b": [1000.5, 20000.25, 3.0, 99999.0]})
    recipe = {"steps": [{"use": use, "epsilon": 1.0, "bounds": {"a": [0, 10], "b": [0, 100000]}, **extra}]}
    out = privclust.run(recipe, data, seed=5)
    entry = out.ledger.of_kind("dp")[0]
    assert entry.details["lattice"] == {"a": f"2^{ea} Z", "b": f"2^{eb} Z"}
    assert on_lattice(out.data["a"], 2.0**ea) and on_lattice(out.data["b"], 2.0**eb)
    assert f"a on 2^{ea} Z, b on 2^{eb} Z" in entry.statement
    assert "plus one lattice step" in entry.statement


def test_the_gaussian_delta_holds_with_the_rounding():
    noisy, ctx = release(GaussianMechanism(), np.zeros(1000), sensitivity=2.0, epsilon=0.5, delta=1e-6)
    entry = ctx.ledger[0]
    sigma, eff = entry.details["sigma"], entry.details["effective_sensitivity"]
    gamma = 2.0 ** int(entry.details["lattice"].split("^")[1].split()[0])
    assert eff >= 2.0 + math.sqrt(1000) * gamma and on_lattice(noisy, gamma)
    assert _cdp_delta(eff**2 / (2 * sigma**2), 0.5) <= 1e-6  # the (epsilon, delta) in the ledger holds
    assert entry.epsilon == 0.5 and entry.delta == 1e-6


def test_geometric_is_exact_and_integer():
    noisy, ctx = release(GeometricMechanism(), np.full(200_000, 3), sensitivity=2, epsilon=0.7)
    k = noisy - 3
    alpha = math.exp(-0.7 / 2)
    values, counts = np.unique(np.clip(k, -12, 12), return_counts=True)
    pmf = {v: (1 - alpha) / (1 + alpha) * alpha ** abs(v) for v in range(-11, 12)}
    tail = (1 - sum(pmf.values())) / 2
    expected = [tail if abs(v) == 12 else pmf[v] for v in values]
    assert stats.chisquare(counts, np.array(expected) * 200_000 / sum(expected)).pvalue > 1e-4
    assert "two-sided geometric noise of scale 2.85714 on the integers" in ctx.ledger[0].statement


# ---------------------------------------------------------------------------
# Numeric safety (issue 8, item 2): every case ends in a clean error before spending, or a finite release
# ---------------------------------------------------------------------------


def refused_before_spending(mech, values, error, match, **kw):
    ctx = context(seed=1)
    state = ctx.rng.bit_generator.state
    with pytest.raises(error, match=match):
        release(mech, values, ctx=ctx, **kw)
    assert len(ctx.ledger) == 0 and ctx.rng.bit_generator.state == state


def test_geometric_refuses_values_that_would_overflow_int64():
    refused_before_spending(GeometricMechanism(), np.array([2**63 - 10], dtype=np.int64), DataError, "2\\^62")
    refused_before_spending(GeometricMechanism(), np.array([2**64 - 1], dtype=np.uint64), DataError, "2\\^62")
    refused_before_spending(GeometricMechanism(), np.array([1e19]), DataError, "2\\^62")
    near = np.array([2**62 - 5, -(2**62) + 5], dtype=np.int64)
    noisy, _ = release(GeometricMechanism(), near, sensitivity=1, epsilon=1.0)
    assert noisy.dtype == np.int64 and np.all(np.abs(noisy - near) < 100)  # no wrap-around


def test_geometric_step_with_bounds_beyond_int64_is_refused_with_the_column():
    data = pd.DataFrame({"n": [1, 2, 3]})
    recipe = {"steps": [{"use": "geometric", "epsilon": 1.0, "bounds": {"n": [0, 1e19]}}]}
    with pytest.raises(privclust.RecipeError, match=r"column n .*2\^62"):  # the bounds need no data: at compile
        privclust.run(recipe, data, seed=1)


def test_geometric_step_with_a_huge_range_is_refused_not_understated():
    data = pd.DataFrame({"n": [1, 2, 3]})
    recipe = {"steps": [{"use": "geometric", "epsilon": 1.0, "bounds": {"n": [0, 2**61]}}]}
    with pytest.raises(privclust.RecipeError, match="exceeds 2\\^48"):  # the bounds need no data: at compile
        privclust.run(recipe, data, seed=1)
    ok = {"steps": [{"use": "geometric", "epsilon": 1.0, "bounds": {"n": [0, 2**40]}}]}
    out = privclust.run(ok, data, seed=1)
    assert out.ledger.of_kind("dp")[0].details["per_column_scale"] == [2.0**40]


@pytest.mark.parametrize("use, extra", [("laplace", {}), ("gaussian", {"delta": 1e-6})])
def test_bounds_at_the_float_limit_are_refused_with_the_column(use, extra):
    data = pd.DataFrame({"x": [0.0, 1.0]})
    recipe = {"steps": [{"use": use, "epsilon": 1.0, "bounds": {"x": [-1e308, 1e308]}, **extra}]}
    with pytest.raises(privclust.PrivclustError, match="column x .*exceeds the largest double"):
        privclust.run(recipe, data, seed=1)


@pytest.mark.parametrize("use, extra", [("laplace", {}), ("gaussian", {"delta": 1e-6})])
def test_data_at_1e308_releases_finite_values(use, extra):
    data = pd.DataFrame({"x": [1e308, -1e308, 0.0]})
    recipe = {"steps": [{"use": use, "epsilon": 1.0, "bounds": {"x": [-1.5e308, 1.5e308 / 2]}, **extra}]}
    with pytest.raises(privclust.PrivclustError, match="largest double"):
        privclust.run(recipe, data, seed=1)  # the range 2.25e308 is beyond the doubles
    recipe["steps"][0]["bounds"] = {"x": [-1e307, 1e307]}
    out = privclust.run(recipe, data, seed=1)
    assert np.all(np.isfinite(out.data["x"]))


@pytest.mark.parametrize("use, extra, e", [("laplace", {}, 41), ("gaussian", {"delta": 1e-6}, 41)])
def test_ranges_above_2_53_are_accounted_on_a_coarse_lattice(use, extra, e):
    data = pd.DataFrame({"x": [2.0**60, 2.0**60 + 2**9, 3.0]})
    recipe = {"steps": [{"use": use, "epsilon": 1.0, "bounds": {"x": [0, 2.0**61]}, **extra}]}
    out = privclust.run(recipe, data, seed=1)
    entry = out.ledger.of_kind("dp")[0]
    assert entry.details["lattice"] == {"x": f"2^{e} Z"}
    assert on_lattice(out.data["x"], 2.0**e) and np.all(np.isfinite(out.data["x"]))


@pytest.mark.parametrize("mech", [LaplaceMechanism(), GeometricMechanism()])
def test_an_epsilon_so_small_that_the_scale_overflows_is_refused(mech):
    values = np.zeros(3, dtype=int)
    refused_before_spending(mech, values, ParameterError, "epsilon", epsilon=1e-320)
    refused_before_spending(mech, values, ParameterError, "epsilon", epsilon=1e-12, sensitivity=1e300)


def test_the_gaussian_with_a_tiny_epsilon_is_finite_or_refused():
    """(epsilon -> 0, delta)-DP is reachable with a finite sigma: the release is finite and honest."""
    noisy, ctx = release(GaussianMechanism(), np.zeros(3), epsilon=1e-320, delta=1e-6)
    assert np.all(np.isfinite(noisy)) and ctx.ledger[0].details["sigma"] > 1e5
    noisy, _ = release(GaussianMechanism(), np.zeros(3), epsilon=1e-12, delta=1e-6, sensitivity=1e300)
    assert np.all(np.isfinite(noisy))
    refused_before_spending(GaussianMechanism(), np.zeros(3), ParameterError, "range of doubles|2\\^26",
                            epsilon=1e-3, delta=1e-300, sensitivity=1e306)


@pytest.mark.parametrize("use, extra", [("laplace", {}), ("geometric", {})])
def test_a_step_with_a_tiny_epsilon_is_refused_before_spending(use, extra):
    data = pd.DataFrame({"x": [1, 2, 3]})
    recipe = {"steps": [{"use": use, "epsilon": 1e-320, "bounds": {"x": [0, 10]}, **extra}]}
    with pytest.raises(privclust.PrivclustError, match="epsilon"):
        privclust.run(recipe, data, seed=1)


@pytest.mark.parametrize("mech, kw", [(LaplaceMechanism(), {}), (GaussianMechanism(), {"delta": 1e-6})])
def test_values_that_cannot_be_placed_on_the_lattice_or_are_not_finite_are_refused(mech, kw):
    refused_before_spending(mech, np.array([1e308, 0.0]), DataError, "cannot be rounded to the lattice", **kw)
    refused_before_spending(mech, np.array([np.nan, 0.0]), DataError, "NaN or infinite", **kw)
    refused_before_spending(mech, np.array([np.inf]), DataError, "NaN or infinite", **kw)
    noisy, _ = release(mech, np.array([1e308, 0.0]), sensitivity=1e300, **kw)  # matching sensitivity: fine
    assert np.all(np.isfinite(noisy))


@pytest.mark.parametrize("value", [2.0**60, 1e300, -1e300])
def test_a_constant_huge_column_with_bounds_from_the_data_is_finite(value):
    data = pd.DataFrame({"x": [value] * 4})
    recipe = {"privacy": {"allow_leaks": ["bounds"]},
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]}
    with pytest.warns(PrivacyLeakWarning):
        out = privclust.run(recipe, data, seed=1)
    assert np.all(np.isfinite(out.data["x"]))


@pytest.mark.parametrize("mech, kw", [(LaplaceMechanism(), {}), (GaussianMechanism(), {"delta": 1e-6})])
def test_the_changed_count_is_checked(mech, kw):
    refused_before_spending(mech, np.zeros(3), ParameterError, "'changed'", changed=0, **kw)
    noisy, ctx = release(mech, np.zeros(10), changed=2, **kw)
    assert ctx.ledger[0].details["effective_sensitivity"] < 1 + 3 * 2.0**-20


def test_the_epsilon_in_the_ledger_is_the_one_that_holds():
    """The ledger charges the requested epsilon; the noise scale (exact rational, rounded up) covers the
    sensitivity plus the rounding to the lattice, so the release is at least that private."""
    for eps, sens, n in [(1.0, 1.0, 1), (0.1, 3.0, 50), (2.5, 1e-3, 7)]:
        noisy, ctx = release(LaplaceMechanism(), np.zeros(n), sensitivity=sens, epsilon=eps)
        entry = ctx.ledger[0]
        gamma = 2.0 ** int(entry.details["lattice"].split("^")[1].split()[0])
        assert Fraction(entry.details["effective_sensitivity"]) >= Fraction(sens) + n * Fraction(gamma)
        assert Fraction(entry.details["exact_noise_scale"]) * Fraction(eps) >= Fraction(
            entry.details["effective_sensitivity"])
        assert entry.epsilon == eps and entry.sensitivity == sens
        assert on_lattice(noisy, gamma)


@pytest.mark.parametrize("value", [np.finfo(float).max, -np.finfo(float).max])
def test_a_constant_column_at_the_largest_double_is_finite(value):
    data = pd.DataFrame({"x": [value] * 3})
    recipe = {"privacy": {"allow_leaks": ["bounds"]},
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]}
    with pytest.warns(PrivacyLeakWarning):
        out = privclust.run(recipe, data, seed=1)
    assert np.all(np.isfinite(out.data["x"]))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_geometric_step_keeps_integers_above_2_53_exact(dtype):
    base = 2**62 - 1000
    data = pd.DataFrame({"n": np.array([base + 1, base + 7, base + 999, base + 5000], dtype=dtype)})
    recipe = {"steps": [{"use": "geometric", "epsilon": 1e4, "bounds": {"n": [base, base + 1000]}}]}
    out = privclust.run(recipe, data, seed=2)
    assert out.step(0).diagnostics["clipped_values"] == 1
    released = out.data["n"].to_numpy()
    assert released.dtype == np.int64  # as the mechanism released them (the host does not cast a DP step's columns)
    released = released.astype(np.int64)
    truth = np.array([base + 1, base + 7, base + 999, base + 1000], dtype=np.int64)
    # noise of scale 0.1 is almost always 0: the values come back exactly (a double near 2^62 is a multiple of 1024)
    assert np.count_nonzero(released == truth) >= 3 and np.all(np.abs(released - truth) < 10)


@pytest.mark.parametrize("mech, kw", [(LaplaceMechanism(), {}), (GaussianMechanism(), {"delta": 1e-6})])
def test_real_mechanisms_refuse_integers_that_doubles_cannot_hold(mech, kw):
    refused_before_spending(mech, np.array([2**60 + 1], dtype=np.int64), DataError, "2\\^53", **kw)
    noisy, _ = release(mech, np.array([2**52, -3], dtype=np.int64), sensitivity=4.0, **kw)
    assert np.all(np.isfinite(noisy))


def test_integer_bounds_that_round_to_one_double_are_named_as_such():
    """[2^63 - 100, 2^63 - 1] has low < high as integers but not as doubles: the error says why, not 'low < high'."""
    data = pd.DataFrame({"n": np.array([2**63 - 10, 2**63 - 5], dtype=np.int64)})
    recipe = {"steps": [{"use": "geometric", "epsilon": 1.0, "bounds": {"n": [2**63 - 100, 2**63 - 1]}}]}
    with pytest.raises(privclust.RecipeError, match="cannot be told apart as floating-point"):
        privclust.run(recipe, data, seed=1)


@pytest.mark.parametrize("step, message", [
    ({"epsilon": 1e-320, "bounds": {"a": [0, 100]}}, "noise scale of column a"),
    ({"epsilon": 1.0, "bounds": {"a": [-1e308, 1e308]}}, "exceeds the largest double"),
])
def test_public_parameters_that_cannot_be_released_are_refused_before_any_data(step, message):
    # privclust check (no data) finds them: they depend on the recipe alone
    with pytest.raises(privclust.RecipeError, match=message):
        privclust.compile({"steps": [{"use": "laplace", "columns": ["a"], **step}]})


def _log_delta_of_rho(rho, epsilon):
    """An independent evaluation of CKS 2020 Corollary 13 in log space: the minimum over alpha of
    (alpha - 1)(alpha rho - epsilon) - log(alpha - 1) + alpha log(1 - 1/alpha)."""
    from scipy.optimize import brentq

    def slope(a):
        return (2 * a - 1) * rho - epsilon + math.log1p(-1 / a)

    alpha = brentq(slope, 1 + 1e-12, (epsilon + 1) / (2 * rho) + 2, xtol=1e-15, rtol=1e-15)
    return (alpha - 1) * (alpha * rho - epsilon) - math.log(alpha - 1) + alpha * math.log1p(-1 / alpha)


@pytest.mark.parametrize("epsilon, delta", [(1.0, 5e-324), (0.1, 1e-320), (1.0, 1e-310), (1.0, 1e-6), (7.0, 0.5)])
def test_the_gaussian_calibration_holds_for_a_subnormal_delta(epsilon, delta):
    """A delta below 2.2e-308 (a subnormal double) has few significant bits: evaluated as a
    double, the bound rounded to delta while it was 1.5 delta (delta = 5e-324) or 1.00025 delta
    (1e-320), so the ledger stated a delta that did not hold. Evaluated in log space it holds."""
    from privclust_plugins.noise import _zcdp_rho, discrete_gaussian_sigma

    rho = _zcdp_rho(epsilon, delta)
    assert rho > 0 and _log_delta_of_rho(rho, epsilon) <= math.log(delta)
    sigma = discrete_gaussian_sigma(epsilon, delta, 1.0)
    assert _log_delta_of_rho(1.0 / (2 * sigma**2), epsilon) <= math.log(delta)


@pytest.mark.parametrize("use", ["laplace", "geometric"])
@pytest.mark.parametrize("epsilon, d", [(0.3, 27), (0.7, 35), (0.3, 30)])
def test_the_columns_of_a_step_spend_no_more_than_its_epsilon_exactly(monkeypatch, use, epsilon, d):
    """The step's epsilon was split as the double epsilon / d, and d times that double can exceed
    epsilon (by 1e-17 for 0.3 / 27): the ledger's epsilon did not hold exactly. The split is now exact."""
    scales = []
    draw = sampling.discrete_laplace

    def spy(rng, scale, size=1):
        scales.append(Fraction(scale))
        return draw(rng, scale, size)

    monkeypatch.setattr(sampling, "discrete_laplace", spy)
    columns = [f"c{j}" for j in range(d)]
    frame = pd.DataFrame(np.ones((3, d)), columns=columns)
    out = privclust.run({"steps": [{"use": use, "epsilon": epsilon, "bounds": {c: [0, 10] for c in columns}}]},
                        frame, seed=1)
    assert len(scales) == d
    if use == "laplace":  # each column's shift in lattice steps (range + one step) over its scale in steps
        lattices = out.ledger.of_kind("dp")[0].details["lattice"]
        steps = [Fraction(2) ** int(lattices[c].split("^")[1].split()[0]) for c in columns]
        realised = sum((10 + g) / g / u for g, u in zip(steps, scales, strict=True))
    else:
        realised = sum(Fraction(10) / u for u in scales)
    assert realised <= Fraction(epsilon) == Fraction(out.ledger.of_kind("dp")[0].epsilon)


def test_the_stated_delta_and_epsilon_are_never_below_what_was_spent():
    """Statements printed delta with 3 significant digits rounded to nearest: a step spending delta =
    1.2349e-6 was stated (epsilon, 1.23e-06)-DP in its ledger entry, the verdict and the report, a
    stronger claim than what holds. They now round up."""
    recipe = {"steps": [{"use": "gaussian", "epsilon": 0.1234564, "delta": 1.2349e-6,
                         "bounds": {"a": [0, 10], "b": [0, 10], "c": [0, 10]}}]}
    out = privclust.run(recipe, pt.example_frame(), seed=1)
    texts = [out.ledger.of_kind("dp")[0].statement, str(out.verdict), out.to_html(plots=False)]
    for text in texts[:2]:
        assert "1.23e-06" not in text and "0.123456" not in text
    assert "(0.123457, 1.24e-06)-DP" in texts[0]
    assert "ε = 0.123457, δ = 1.24e-06" in texts[1]
    assert "epsilon 0.123457, delta 1.24e-06" in texts[2]
    from privclust.accounting import at_least

    for value, digits in [(1.2349e-6, 3), (1 / 3, 6), (0.1 + 0.2, 6), (1e-6, 3), (5e-324, 3), (0.875, 6)]:
        assert float(at_least(value, digits)) >= value and len(at_least(value, digits).split("e")[0]) <= digits + 2


def test_geometric_takes_the_changed_count_as_the_other_mechanisms_do():
    """A component that passes changed= to its nested mechanism crashed with a TypeError from
    context.spend when the mechanism swapped in was geometric."""
    noisy, ctx = release(GeometricMechanism(), np.array([3, 4, 5]), changed=1)
    assert noisy.dtype == np.int64 and len(ctx.ledger) == 1
    refused_before_spending(GeometricMechanism(), np.array([3]), ParameterError, "'changed'", changed=0)


@pytest.mark.parametrize("use", ["laplace", "geometric"])
def test_a_noise_step_that_changed_no_value_is_not_said_to_have_perturbed_it(use):
    """At epsilon 1e12 the noise on small integers is 0 in every draw: the
    process entry said "perturbed columns a, b", false of this release. The
    words must be true whatever the draw, and the same as when the noise
    changed values (saying which would tell that the released values are
    the original ones)."""
    data = pd.DataFrame({"a": np.arange(10.0), "b": np.arange(10) % 3})

    def process(epsilon):
        step = {"use": use, "epsilon": epsilon, "bounds": {"a": [0, 10], "b": [0, 3]}}
        out = privclust.run({"steps": [step]}, data, seed=1)
        return out, next(e.statement for e in out.ledger if e.kind == "process")

    untouched, said = process(1e12)
    assert (untouched.data[["a", "b"]].to_numpy() == data.to_numpy()).all()  # the noise changed nothing
    assert "perturbed" not in said and "changed" not in said and "unchanged" not in said
    assert said == (f"noise mechanism {use!r} was run on columns a, b of 10 records (what noise it adds is the "
                    "mechanism's own statement; the host checks the released values in entries of its own).")
    noisy, said_noisy = process(0.1)
    assert not (noisy.data[["a", "b"]].to_numpy() == data.to_numpy()).all() and said_noisy == said


@pytest.mark.parametrize(("use", "epsilon", "d"), [("laplace", 1.0, 3), ("laplace", 0.1234567, 7),
                                                    ("geometric", 1.0, 3), ("geometric", 0.1234567, 7)])
def test_the_epsilon_per_column_a_noise_step_states_is_never_below_the_one_spent(use, epsilon, d):
    """The statement said "0.333333 per column" for epsilon 1 over three
    columns (rounded to nearest: less than the 1/3 each column spends)."""
    columns = [f"c{j}" for j in range(d)]
    data = pd.DataFrame({c: np.arange(12) % 5 for c in columns})
    step = {"use": use, "epsilon": epsilon, "bounds": {c: [0, 5] for c in columns}}
    release = privclust.run({"steps": [step]}, data, seed=1)
    statement = next(e.statement for e in release.ledger if e.kind == "dp")
    shown = float(re.search(r"epsilon split evenly, ([0-9.e+-]+) per column", statement).group(1))
    assert shown >= epsilon / d
    if (epsilon, d) == (1.0, 3):
        assert "0.333334 per column" in statement


def test_at_least_is_public_and_never_below_the_value():
    rng = np.random.default_rng(5)
    values = [1 / 3, 0.1234567, 0.30000000000000004, 1.2349e-6, *rng.uniform(0, 10, 200),
              *(10.0 ** rng.uniform(-9, 3, 200))]
    for value in values:
        for digits in (3, 4, 6):
            assert float(privclust.at_least(value, digits)) >= value
    assert privclust.at_least(1 / 3) == "0.333334" and privclust.at_least(0.1234567, 3) == "0.124"
    assert privclust.at_least(0.5) == "0.5" and privclust.at_least(2.0) == "2"


def test_at_most_is_public_and_never_above_the_value():
    rng = np.random.default_rng(6)
    values = [2 / 3, 0.1239, 0.30000000000000004, 1.41421356, *rng.uniform(0, 10, 200),
              *(10.0 ** rng.uniform(-9, 3, 200))]
    for value in values:
        for digits in (3, 4, 6, 10):
            assert float(privclust.at_most(value, digits)) <= value
    assert privclust.at_most(2 / 3) == "0.666666" and privclust.at_most(4.0) == "4"


def test_the_column_ranges_a_noise_step_states_as_its_sensitivity_are_never_above_those_used():
    """A column range of 2/3 read "0.666667" (rounded to nearest: a statement
    covering a slightly larger change than the noise was drawn for)."""
    high = 2 / 3
    data = pd.DataFrame({"a": np.linspace(0, high, 12), "b": np.linspace(high, 0, 12)})
    release = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, high], "b": [0, high]}}]},
                            data, seed=1)
    statement = next(e.statement for e in release.ledger if e.kind == "dp")
    assert "{a: 0.666666, b: 0.666666}" in statement, statement


@pytest.mark.parametrize("mech, kw", [(LaplaceMechanism(), {}), (GaussianMechanism(), {"delta": 1e-6})])
def test_the_noise_scale_and_sensitivity_a_release_states_are_never_above_those_used(mech, kw):
    """The noise's scale was stated rounded to nearest (above the scale drawn
    for about half of all values)."""
    for sensitivity in (2 / 3, 1 / 7, 0.123456789):
        _, ctx = release(mech, np.zeros(3), sensitivity=sensitivity, epsilon=0.3, **kw)
        entry = ctx.ledger[-1]
        statement = entry.statement
        scale = float(re.search(r"noise of (?:scale|sigma) ([0-9.e+-]+)", statement).group(1))
        calibrated = float(re.search(r"calibrated to (?:L2 )?sensitivity ([0-9.e+-]+)", statement).group(1))
        assert scale <= entry.details.get("exact_noise_scale", entry.details.get("sigma")), statement
        assert calibrated <= entry.details["effective_sensitivity"], statement


def test_the_host_states_a_numeric_sensitivity_rounded_down():
    context = privclust.PrivacyContext(seed=0, budget=privclust.Budget(epsilon=1.0))
    with context.step(0, "s", "custom"):
        context.spend(epsilon=0.5, mechanism="laplace", sensitivity=2 / 3, relation="replace-one", covers="a mean")
        context.spend(epsilon=0.5, mechanism="gaussian", sensitivity=privclust.Sensitivity(l1=2 / 3, l2=2 / 3),
                      relation="replace-one", covers="two values")
    first, second = [e.statement for e in context.ledger if e.kind == "dp"]
    assert "sensitivity 0.666666" in first and "0.666667" not in first
    assert "L1 0.666666" in second and "L2 0.666666" in second and "0.666667" not in second


@pytest.mark.parametrize("use, extra", [("laplace", {}), ("geometric", {}), ("laplace", {"epsilon": 1e-17})])
def test_an_epsilon_too_small_for_the_sampler_is_refused_when_compiled(use, extra):
    """trust17a: a tiny positive epsilon (1e-300) passed `privclust check`
    and was refused only when the step ran; with public bounds the refusal
    depends on no data, so compiling makes it, naming epsilon and the
    column."""
    step = {"use": use, "columns": ["x"], "epsilon": 1e-300, "bounds": {"x": [0, 20]}, **extra}
    with pytest.raises(privclust.RecipeError) as err:
        privclust.compile({"steps": [step]})
    assert "epsilon = " in str(err.value) and "column x" in str(err.value)
    frame = pd.DataFrame({"x": [1, 2, 3, 4]})
    with pytest.raises(privclust.PrivclustError):  # run refuses it too, before any step
        privclust.run({"steps": [step]}, frame, seed=1)
    privclust.compile({"steps": [{**step, "epsilon": 0.1}]})


def test_release_problem_says_what_release_would_refuse():
    """The mechanisms' ``release_problem``: the refusal ``release`` makes for
    these figures, decided without data (for a component's step_problems)."""
    registry = privclust.get_registry()
    laplace = registry.create("noise_mechanisms", {"use": "laplace"})
    assert laplace.release_problem(sensitivity=1.0, epsilon=1.0, changed=10) is None
    assert "too small" in laplace.release_problem(sensitivity=1.0, epsilon=1e-300)
    gaussian = registry.create("noise_mechanisms", {"use": "gaussian"})
    assert gaussian.release_problem(sensitivity=1.0, epsilon=1.0, delta=1e-6) is None
    assert "delta" in gaussian.release_problem(sensitivity=1.0, epsilon=1.0, delta=0.0)
    geometric = registry.create("noise_mechanisms", {"use": "geometric"})
    assert "2^48" in geometric.release_problem(sensitivity=1.0, epsilon=1e-300)
