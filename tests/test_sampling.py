"""The exact samplers of privclust.sampling: laws, reproducibility, lattices, limits."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import privclust
from privclust import sampling


class IntegerBitsOnly(np.random.Generator):
    """A Generator whose float samplers fail: the exact samplers must use integer outputs only."""

    def _refuse(self, *args, **kwargs):
        raise AssertionError("an exact sampler called a floating-point sampler")

    random = uniform = laplace = normal = exponential = geometric = standard_normal = _refuse
    standard_exponential = poisson = binomial = _refuse


def rng(seed=0):
    return IntegerBitsOnly(np.random.PCG64(seed))


def chi_square_pvalue(draws: np.ndarray, pmf) -> float:
    """Goodness of fit of integer draws to an exact pmf, with the tails pooled (expected >= 5 per cell)."""
    values, counts = np.unique(draws, return_counts=True)
    observed = dict(zip(values.tolist(), counts.tolist(), strict=True))
    n = draws.size
    centre = 0
    cells, expected, seen = [], [], []
    # grow a window around 0 while the cells keep an expected count >= 5
    k = 0
    while n * pmf(k) >= 5 and n * pmf(-k) >= 5:
        k += 1
    window = range(-(k - 1), k) if k else range(centre, centre + 1)
    inside = 0.0
    for v in window:
        cells.append(v)
        expected.append(n * pmf(v))
        seen.append(observed.get(v, 0))
        inside += pmf(v)
    tail_expected = n * max(0.0, 1.0 - inside)
    tail_seen = n - sum(seen)
    if tail_expected >= 5:
        expected.append(tail_expected)
        seen.append(tail_seen)
    else:
        expected[-1] += tail_expected
        seen[-1] += tail_seen
    expected = np.array(expected)
    expected *= n / expected.sum()
    return float(stats.chisquare(seen, expected).pvalue)


# --------------------------------------------------------------------------- Bernoulli


@pytest.mark.parametrize("num, den", [(0, 1), (1, 1), (1, 3), (5, 2), (7, 7), (123456789, 100000000)])
def test_bernoulli_exp_has_the_exact_probability(num, den):
    n = 200_000
    draws = sampling.bernoulli_exp(rng(num + den), np.full(n, num), den)
    p = math.exp(-num / den)
    if num == 0:
        assert draws.all()
        return
    assert stats.binomtest(int(draws.sum()), n, p).pvalue > 1e-4


def test_bernoulli_exp_checks_its_arguments():
    with pytest.raises(ValueError, match="denominator"):
        sampling.bernoulli_exp(rng(), np.array([1]), 0)
    with pytest.raises(ValueError, match=">= 0"):
        sampling.bernoulli_exp(rng(), np.array([-1]), 3)
    with pytest.raises(TypeError, match="Generator"):
        sampling.bernoulli_exp(np.random.RandomState(0), np.array([1]), 3)


# --------------------------------------------------------------------------- discrete Laplace


def laplace_pmf(scale: Fraction):
    alpha = math.exp(-1.0 / float(scale))
    return lambda k: (1 - alpha) / (1 + alpha) * alpha ** abs(k)


@pytest.mark.parametrize("scale", [1, Fraction(1, 3), Fraction(5, 2), 7.3, 40])
def test_discrete_laplace_matches_the_exact_pmf(scale):
    exact = sampling.rational_scale(scale)
    draws = sampling.discrete_laplace(rng(3), exact, 200_000)
    assert draws.dtype == np.int64
    assert chi_square_pvalue(draws, laplace_pmf(exact)) > 1e-4


def test_discrete_laplace_at_a_large_scale_has_the_right_spread():
    scale = 2**30 + 12345
    draws = sampling.discrete_laplace(rng(4), scale, 200_000)
    alpha = math.exp(-1 / scale)
    # E|Z| = 2 alpha / (1 - alpha^2) ~ scale for a large scale
    assert np.mean(np.abs(draws)) == pytest.approx(2 * alpha / (1 - alpha**2), rel=0.01)
    assert stats.kstest(draws / scale, "laplace").pvalue > 1e-4


def test_rational_scale_rounds_up_and_stays_bounded():
    for value in [0.1, 1 / 3, math.pi, 1e-9, 12345.678, 2.0**47 + 0.5]:
        exact = sampling.rational_scale(value)
        assert exact >= Fraction(value)
        assert exact <= max(Fraction(value), Fraction(1, 2**20)) * (1 + Fraction(1, 2**29))
        assert exact.numerator < 2**50 and exact.denominator < 2**52
    assert sampling.rational_scale(Fraction(7, 3)) == Fraction(7, 3)  # small rationals stay exact
    for bad in [0, -1.0, math.inf, math.nan, 2.0**49]:
        with pytest.raises(ValueError, match="scale"):
            sampling.rational_scale(bad)


# --------------------------------------------------------------------------- discrete Gaussian


def gaussian_pmf(variance: Fraction):
    s2 = float(variance)
    half = int(40 * math.sqrt(s2)) + 10
    norm = sum(math.exp(-k * k / (2 * s2)) for k in range(-half, half + 1))
    return lambda k: math.exp(-k * k / (2 * s2)) / norm


@pytest.mark.parametrize("sigma2", [1, Fraction(9, 4), 10, 400.5])
def test_discrete_gaussian_matches_the_exact_pmf(sigma2):
    variance = sampling.discrete_gaussian_variance(sigma2)
    assert Fraction(sigma2) <= variance < Fraction(sigma2) + math.isqrt(int(sigma2)) + 10
    if Fraction(sigma2).denominator == 1:
        assert variance == sigma2  # 1, 10: an integer variance with a divisor near sigma is kept exactly
    draws = sampling.discrete_gaussian(rng(5), sigma2, 200_000)
    assert chi_square_pvalue(draws, gaussian_pmf(variance)) > 1e-4


def test_discrete_gaussian_at_a_large_sigma():
    sigma = 2**20 + 3
    draws = sampling.discrete_gaussian(rng(6), sigma**2, 100_000)
    assert np.std(draws) == pytest.approx(sigma, rel=0.01)
    assert stats.kstest(draws / sigma, "norm").pvalue > 1e-4
    with pytest.raises(ValueError, match="2\\^26"):
        sampling.discrete_gaussian(rng(), (2**26 + 1) ** 2, 3)
    with pytest.raises(ValueError, match="> 0"):
        sampling.discrete_gaussian(rng(), 0, 3)


# --------------------------------------------------------------------------- reproducibility and shapes


@pytest.mark.parametrize("draw", [
    lambda g: sampling.discrete_laplace(g, 3.5, (40, 3)),
    lambda g: sampling.discrete_gaussian(g, 12.0, (40, 3)),
    lambda g: sampling.bernoulli_exp(g, np.arange(120).reshape(40, 3), 17),
])
def test_the_same_seed_gives_the_same_draws(draw):
    first, again, other = draw(rng(11)), draw(rng(11)), draw(rng(12))
    assert first.shape == (40, 3)
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)


def test_empty_and_scalar_sizes():
    assert sampling.discrete_laplace(rng(), 2, 0).shape == (0,)
    assert sampling.discrete_gaussian(rng(), 2, (0, 4)).shape == (0, 4)
    assert sampling.discrete_laplace(rng(), 2).shape == (1,)


# --------------------------------------------------------------------------- lattices


def test_the_lattice_is_a_power_of_two_fine_enough_for_the_sensitivity():
    gamma = sampling.lattice_for(1.0, 1, Fraction(0))
    assert gamma == 2.0**-20 and sampling.lattice_name(gamma) == "2^-20 Z"
    assert sampling.lattice_for(3.0, 1000, Fraction(0)) == 2.0**-29  # 3 / (1000 * 2^20) -> 2^-29
    assert sampling.lattice_for(1.0, 1, Fraction(1, 8)) == 0.125  # the cap wins
    assert sampling.lattice_for(1e-320, 1, Fraction(0)) == 2.0**-1074  # the smallest double
    assert sampling.lattice_for(1e308, 1, Fraction(2) ** 2000) == 2.0**1023


def test_the_sensitivity_after_rounding_is_exact_or_rounded_up():
    eff = sampling.lattice_sensitivity(1.0, 2.0**-20, 3, "L1")
    assert Fraction(eff) >= 1 + 3 * Fraction(1, 2**20)
    eff = sampling.lattice_sensitivity(0.1, 2.0**-30, 7, "L1")
    assert Fraction(eff) >= Fraction(0.1) + 7 * Fraction(1, 2**30)
    eff2 = sampling.lattice_sensitivity(2.0, 2.0**-10, 9, "L2")
    assert eff2 >= 2.0 + 3 * 2.0**-10


def test_snap_and_lattice_add_stay_on_the_lattice():
    gamma = 2.0**-20
    values = np.array([0.0, 1.0, 0.1, -3.3, 1e6 + 1e-7])
    units = sampling.snap(values, gamma)
    assert np.all(np.abs(units * gamma - values) <= gamma / 2)
    out = sampling.lattice_add(units, np.array([1, -1, 0, 5, 2**40]), gamma)
    assert np.all(out / gamma == np.round(out / gamma))
    assert out[0] == gamma and out[1] == 1.0 - gamma


def test_lattice_add_rounds_huge_sums_once_and_never_overflows():
    units = np.array([2.0**60, 0.0, 1.7e308])
    noise = np.array([2**62 + 1, -(2**62) - 3, 2**62], dtype=np.int64)
    out = sampling.lattice_add(units, noise, 1.0)
    assert out[0] == float(2**60 + 2**62 + 1)  # one correctly rounded conversion of the exact sum
    assert out[1] == float(-(2**62) - 3)
    assert np.all(np.isfinite(out))
    top = sampling.lattice_add(np.array([1.0]), np.array([2**61]), 2.0**1023)
    assert np.isfinite(top).all() and top[0] == np.finfo(float).max


def test_sampling_is_public():
    assert privclust.sampling is sampling
    for name in sampling.__all__:
        assert hasattr(sampling, name)
