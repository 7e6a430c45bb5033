"""Exact noise samplers fed by a seeded numpy Generator's random bits.

Floating-point noise (``rng.laplace``, ``rng.normal``, differences of
``rng.geometric``) is not differentially private as implemented: the set of
doubles it can produce around a value depends on that value, so an output can
rule out a neighbouring input with certainty (Mironov 2012). The samplers here
draw *integers* whose probabilities are exact, using only the Generator's
integer outputs (``rng.integers``, which is an exact uniform draw on
``{0, ..., n - 1}`` built from raw bits), never a float sampler:

* :func:`bernoulli_exp`: Bernoulli(exp(-n/d)) for integers n >= 0, d > 0
  (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential
  privacy", Algorithm 1);
* :func:`discrete_laplace`: P(k) proportional to exp(-|k| / scale) on the
  integers, for a rational scale t/s (Algorithm 2), i.e. the two-sided
  geometric distribution;
* :func:`discrete_gaussian`: P(k) proportional to exp(-k^2 / (2 sigma^2)) on
  the integers (Algorithm 3, rejection from the discrete Laplace).

All three are vectorised: candidates are drawn in batches and rejected as
arrays, so 10^6 draws take a fraction of a second. Parameters are exact
rationals (:class:`fractions.Fraction`); a float parameter is converted
exactly (every double is a dyadic rational) and then rounded *up* to a
rational with a bounded numerator and denominator (:func:`rational_scale`),
so the arithmetic of the loops fits in int64. Rounding a noise scale up only
adds noise: the privacy that holds is at least the one computed for the
requested scale.

Real values are released on a lattice ``gamma * Z`` with ``gamma`` a power of
two (:func:`lattice_for`): the value is rounded to the lattice (exact: a
division by a power of two and ``rint``), integer noise in lattice units is
added, and the result is the lattice point, converted to a double by one
correctly rounded operation (a deterministic function of the exact integer,
hence post-processing). Rounding moves each coordinate by at most
``gamma / 2``, so two neighbouring inputs' rounded values differ by at most
the sensitivity plus ``gamma`` per coordinate that can change: the
mechanisms add that to the sensitivity they calibrate the noise to
(:func:`lattice_sensitivity`).

The same seed gives the same draws: every bit comes from the Generator passed
in (the run's ``context.rng``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Final

import numpy as np

__all__ = [
    "LATTICE_BITS",
    "MAX_GAUSSIAN_SIGMA",
    "MAX_LAPLACE_SCALE",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "lattice_add",
    "lattice_for",
    "lattice_name",
    "lattice_sensitivity",
    "rational_scale",
    "snap",
]

#: The lattice is at least 2^LATTICE_BITS times finer than the sensitivity
#: per changed coordinate, so the rounding adds at most 2^-20 (relative) to
#: the sensitivity, unless the noise scale cap below forces a coarser one.
LATTICE_BITS: Final = 20
#: Largest discrete Laplace scale (in lattice units) the samplers accept: with
#: it, ``U + t V`` and the uniform bounds ``t k`` stay far inside int64.
MAX_LAPLACE_SCALE: Final = 2**48
#: Largest discrete Gaussian sigma (in lattice units): the rejection step
#: squares |Y| - sigma^2 / t, which fits in int64 unless |Y| > 32 sigma
#: (probability about e^-32 per candidate; those few fall back to exact
#: Python integers), and 2 sigma^2 stays within the Bernoulli's 2^54.
MAX_GAUSSIAN_SIGMA: Final = 2**26
#: The precision kept when a scale is rounded up to a rational: the rounding
#: adds at most 2^-30 (relative) to the scale.
_SCALE_BITS: Final = 30
#: Smallest scale used: a requested scale below it is raised to it (more
#: noise, still P(noise != 0) < 2 exp(-2^20)).
_MIN_SCALE: Final = Fraction(1, 2**20)
_INT53: Final = 2**53


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"the samplers need a numpy.random.Generator (the run's context.rng); got {type(rng).__name__}")


def _size(size: int | tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    shape = (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)  # type: ignore[arg-type, union-attr]  # np.ndim tells int from tuple
    if any(s < 0 for s in shape):
        raise ValueError(f"negative size {shape}")
    return shape, int(np.prod(shape, dtype=np.int64)) if shape else 1


# --------------------------------------------------------------------------- Bernoulli


def _bernoulli_exp_fraction(rng: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1).

    Draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first A_k = 0;
    return 1 if that k is odd. P(k odd) = exp(-gamma) exactly. Bernoulli(n/m)
    is ``rng.integers(0, m) < n``, an exact comparison of integers.
    """
    n = num.size
    out = np.zeros(n, dtype=bool)
    if not n:
        return out
    # k = 1 on the whole array (no gather): A_1 = 0 stops at an odd k, so those draws return 1
    if den == 1:  # Bernoulli(num / 1) with num in {0, 1}: no random bits needed
        first = num >= 1
        out[~first] = True
        active = np.flatnonzero(first)
    else:
        first = _below(rng, den, n) < num
        out[~first] = True
        active = np.flatnonzero(first)
    k = 2
    while active.size:
        if den * k >= 2**62:  # pragma: no cover - needs over 2^8 consecutive successes, probability < 1/256!
            raise OverflowError("bernoulli_exp: the exact loop ran out of int64 range")
        draw = _below(rng, den * k, active.size) < num[active]
        stopped = active[~draw]
        out[stopped] = (k % 2) == 1
        active = active[draw]
        k += 1
    return out


def _below(rng: np.random.Generator, high: int, size: int) -> np.ndarray:
    """``size`` exact uniform integers in [0, high), in 32 bits when they fit (half the random bits)."""
    if high <= 2**32:
        return rng.integers(0, high, size=size, dtype=np.uint32) if high > 1 else np.zeros(size, dtype=np.uint32)
    return rng.integers(0, high, size=size, dtype=np.int64)


def _bernoulli_exp_minus_one(rng: np.random.Generator, n: int) -> np.ndarray:
    return _bernoulli_exp_fraction(rng, np.ones(n, dtype=np.int64), 1)


def bernoulli_exp(rng: np.random.Generator, numerator: np.ndarray | int, denominator: int) -> np.ndarray:
    """Exact Bernoulli(exp(-numerator / denominator)) draws, one per numerator.

    :param rng: the Generator whose integer outputs are used.
    :param numerator: integers >= 0 (an array, or one integer for one draw).
    :param denominator: an integer in [1, 2^54].
    :returns: a boolean array of the numerators' shape.

    exp(-q - r/d) = exp(-1)^q exp(-r/d): q draws of Bernoulli(exp(-1)) (all
    must succeed) and one of Bernoulli(exp(-r/d)) (CKS 2020, Algorithm 1).
    """
    _check_rng(rng)
    den = int(denominator)
    if not 1 <= den <= 2**54:
        raise ValueError(f"bernoulli_exp: the denominator must be an integer in [1, 2^54]; got {denominator!r}")
    num = np.array(numerator, dtype=np.int64, copy=True)
    if np.any(num < 0):
        raise ValueError("bernoulli_exp: the numerators must be >= 0")
    shape = num.shape
    num = num.reshape(-1)
    whole, rest = np.divmod(num, den)
    out = np.ones(num.size, dtype=bool)
    pending = np.flatnonzero(whole > 0)
    while pending.size:  # each round: one Bernoulli(exp(-1)) for every draw still owing one
        ok = _bernoulli_exp_minus_one(rng, pending.size)
        out[pending[~ok]] = False
        whole[pending] -= 1
        pending = pending[ok & (whole[pending] > 0)]
    frac = np.flatnonzero(out & (rest > 0))
    if frac.size:
        out[frac] = _bernoulli_exp_fraction(rng, rest[frac], den)
    return out.reshape(shape)


# --------------------------------------------------------------------------- discrete Laplace


def rational_scale(scale: float | Fraction | int) -> Fraction:
    """The rational scale the discrete Laplace sampler uses for ``scale``.

    The exact value of ``scale`` rounded *up* to ``t / 2^j`` with ``t`` of
    about 31 bits (relative increase at most 2^-30), and raised to at least
    2^-20. Rounding up adds noise, so a mechanism calibrated to ``scale``
    holds a fortiori.

    :raises ValueError: if ``scale`` is not finite and > 0, or exceeds
        :data:`MAX_LAPLACE_SCALE`.
    """
    if isinstance(scale, float) and not math.isfinite(scale):
        raise ValueError(f"the noise scale must be finite; got {scale!r}")
    exact = Fraction(scale)
    if exact <= 0:
        raise ValueError(f"the noise scale must be > 0; got {scale!r}")
    if exact > MAX_LAPLACE_SCALE:
        raise ValueError(f"the noise scale {float(exact):.6g} exceeds the sampler's limit 2^48 lattice units")
    exact = max(exact, _MIN_SCALE)
    if exact.denominator == 1 or (exact.numerator < 2**40 and exact.denominator < 2**40):
        return exact
    # t / 2^j >= exact with t < 2^(_SCALE_BITS + 1)
    j = max(0, _SCALE_BITS - (exact.numerator.bit_length() - exact.denominator.bit_length()))
    t = -((-exact.numerator * 2**j) // exact.denominator)  # ceil
    return Fraction(t, 2**j)


def discrete_laplace(rng: np.random.Generator, scale: float | Fraction | int,
                     size: int | tuple[int, ...] = 1) -> np.ndarray:
    """Exact draws of the discrete Laplace law, P(k) proportional to exp(-|k| / scale), k in Z.

    This is the two-sided geometric distribution with ratio exp(-1/scale)
    (CKS 2020, Algorithm 2). ``scale`` is used as :func:`rational_scale`
    returns it (rounded up to a bounded rational; pass that Fraction to know
    the exact law).

    :returns: an int64 array of shape ``size``.
    """
    _check_rng(rng)
    shape, n = _size(size)
    exact = rational_scale(scale)
    t, s = exact.numerator, exact.denominator
    out = np.empty(n, dtype=np.int64)
    done = 0
    while done < n:
        want = n - done
        batch = int(want * 1.7) + 64  # acceptance is >= 1 - 1/e per candidate
        u = rng.integers(0, t, size=batch, dtype=np.int64) if t > 1 else np.zeros(batch, dtype=np.int64)
        if t > 1:
            u = u[_bernoulli_exp_fraction(rng, u, t)]  # U / t < 1: the fractional algorithm directly
        # V ~ Geometric: the number of successes of Bernoulli(exp(-1)) before the first failure
        v = np.zeros(u.size, dtype=np.int64)
        alive = np.arange(u.size)
        while alive.size:
            ok = _bernoulli_exp_minus_one(rng, alive.size)
            alive = alive[ok]
            v[alive] += 1
        if v.size and int(v.max()) >= 2**12:  # pragma: no cover - probability below exp(-4096)
            raise OverflowError("discrete_laplace: a geometric draw exceeded 2^12")
        x = u + t * v
        y = x // s if s > 1 else x
        negative = rng.integers(0, 2, size=y.size, dtype=np.int8).astype(bool)
        keep = ~(negative & (y == 0))
        z = np.where(negative, -y, y)[keep]
        take = min(z.size, want)
        out[done:done + take] = z[:take]
        done += take
    return out.reshape(shape)


# --------------------------------------------------------------------------- discrete Gaussian


def _gaussian_params(sigma2: float | Fraction | int) -> tuple[int, int]:
    """``(t, m)`` with t within 9 of sigma and m = ceil(sigma^2 / t), t m as small as possible."""
    if isinstance(sigma2, float) and not math.isfinite(sigma2):
        raise ValueError(f"the variance must be finite; got {sigma2!r}")
    exact = Fraction(sigma2)
    if exact <= 0:
        raise ValueError(f"the variance must be > 0; got {sigma2!r}")
    if exact > MAX_GAUSSIAN_SIGMA**2:
        raise ValueError(f"sigma = {math.sqrt(exact):.6g} exceeds the sampler's limit 2^26 lattice units")
    root = math.isqrt(exact.numerator // exact.denominator)  # floor(sigma)
    best: tuple[int, int] | None = None
    for t in range(max(1, root - 8), root + 10):  # t near sigma keeps the rejection efficient
        m = -((-exact.numerator) // (exact.denominator * t))  # ceil(sigma^2 / t)
        if best is None or t * m < best[0] * best[1]:
            best = (t, m)
    assert best is not None
    return best


def discrete_gaussian_variance(sigma2: float | Fraction | int) -> Fraction:
    """The variance parameter :func:`discrete_gaussian` uses for ``sigma2``.

    ``t * ceil(sigma2 / t)`` for the integer ``t`` near sigma (within 9 of
    ``floor(sigma)``) that makes it smallest: at least ``sigma2``, larger by
    less than ``t`` (a relative increase below about ``1 / sigma``), and
    exactly ``sigma2`` when it is an integer with such a divisor (every
    perfect square). Making ``sigma^2 / t`` an integer keeps the rejection
    step in exact integer arithmetic.
    """
    t, m = _gaussian_params(sigma2)
    return Fraction(t * m)


def discrete_gaussian(rng: np.random.Generator, sigma2: float | Fraction | int,
                      size: int | tuple[int, ...] = 1) -> np.ndarray:
    """Exact draws of the discrete Gaussian, P(k) proportional to exp(-k^2 / (2 S)), k in Z.

    ``S`` is :func:`discrete_gaussian_variance` of ``sigma2`` (>= sigma2).
    CKS 2020 Algorithm 3: Y ~ discrete Laplace(t), accepted with probability
    exp(-(|Y| - S/t)^2 / (2 S)). With ``S = t m`` that is
    exp(-(|Y| - m)^2 / (2 t m)), a ratio of integers.

    :returns: an int64 array of shape ``size``.
    """
    _check_rng(rng)
    shape, n = _size(size)
    t, m = _gaussian_params(sigma2)
    den = 2 * t * m
    out = np.empty(n, dtype=np.int64)
    done = 0
    while done < n:
        want = n - done
        batch = int(want * 1.6) + 64  # acceptance is about 1 - 1/e or better for sigma >= 1
        y = discrete_laplace(rng, t, batch)
        j = np.abs(y) - m
        small = np.abs(j) < 2**31
        num = np.zeros(y.size, dtype=np.int64)
        num[small] = j[small] * j[small]
        accept = np.zeros(y.size, dtype=bool)
        accept[small] = bernoulli_exp(rng, num[small], den)
        for i in np.flatnonzero(~small):  # pragma: no cover - |Y| > 2^31 happens with probability < exp(-2^7)
            whole, rest = divmod(int(j[i]) ** 2, den)
            ok = True
            for _ in range(whole):
                if not _bernoulli_exp_minus_one(rng, 1)[0]:
                    ok = False
                    break
            accept[i] = ok and (rest == 0 or bool(_bernoulli_exp_fraction(rng, np.array([rest]), den)[0]))
        z = y[accept]
        take = min(z.size, want)
        out[done:done + take] = z[:take]
        done += take
    return out.reshape(shape)


# --------------------------------------------------------------------------- lattices


def _pow2_floor(x: Fraction) -> Fraction:
    """The largest power of two <= x (x > 0), exactly."""
    if x <= 0:
        raise ValueError(f"no power of two is <= {x}")
    e = x.numerator.bit_length() - x.denominator.bit_length()
    p = Fraction(2) ** e
    while p > x:
        p /= 2
    while p * 2 <= x:
        p *= 2
    return p


def _pow2_ceil(x: Fraction) -> Fraction:
    p = _pow2_floor(x)
    return p if p == x else p * 2


def lattice_for(sensitivity: float, changed: int, cap: Fraction) -> float:
    """The lattice spacing (a power of two) for a release.

    The largest power of two at most ``sensitivity / (changed * 2^20)``, so
    that the rounding adds at most 2^-20 (relative) to the sensitivity; but at
    least ``cap`` rounded up to a power of two (the caller passes the spacing
    that keeps the noise scale within the sampler's limits), and within the
    range of doubles.

    :param sensitivity: the sensitivity of the released vector (> 0, finite).
    :param changed: how many coordinates can differ between neighbours.
    :param cap: a lower bound on the spacing (> 0).
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"the sensitivity must be finite and > 0; got {sensitivity!r}")
    gamma = _pow2_floor(Fraction(sensitivity) / (max(int(changed), 1) * 2**LATTICE_BITS))
    if cap > 0:
        gamma = max(gamma, _pow2_ceil(Fraction(cap)))
    gamma = min(max(gamma, Fraction(2) ** -1074), Fraction(2) ** 1023)
    return float(gamma)


def lattice_name(gamma: float) -> str:
    """``"2^-20 Z"`` for a power-of-two spacing."""
    exponent = math.frexp(gamma)[1] - 1
    return f"2^{exponent} Z"


def lattice_sensitivity(sensitivity: float, gamma: float, changed: int, norm: str = "L1") -> float:
    """The sensitivity after rounding to the lattice ``gamma Z``, rounded up.

    Each of the ``changed`` coordinates that can differ moves by at most
    ``gamma / 2`` in each input, so the rounded vectors differ by at most
    ``sensitivity + changed * gamma`` in L1 and ``sensitivity +
    sqrt(changed) * gamma`` in L2 (triangle inequality).
    """
    if norm == "L1":
        exact = Fraction(sensitivity) + int(changed) * Fraction(gamma)
        value = float(exact)
        return value if Fraction(value) >= exact else float(np.nextafter(value, np.inf))
    value = sensitivity + math.sqrt(changed) * gamma  # float errors of a few ulps: step up past them
    for _ in range(4):
        value = float(np.nextafter(value, np.inf))
    return value


def snap(values: np.ndarray, gamma: float) -> np.ndarray:
    """``values`` rounded to the nearest point of ``gamma Z``, as integer-valued doubles (in lattice units).

    Exact: ``values / gamma`` is a division by a power of two (the caller
    makes sure it neither overflows nor underflows) and ``rint`` is exact.
    """
    return np.rint(np.asarray(values, dtype=float) / gamma)


def lattice_add(units: np.ndarray, noise: np.ndarray, gamma: float) -> np.ndarray:
    """``(units + noise) * gamma`` as doubles, a deterministic function of the exact integer sum.

    ``units`` holds integer-valued doubles (from :func:`snap`), ``noise``
    int64. The sum is rounded to a double once (IEEE addition is correctly
    rounded when both operands are exact; noise beyond 2^53 is added with
    Python integers), then scaled by the power of two ``gamma``; a sum
    beyond the double range is clamped to the largest finite double. Both
    are post-processing of the exact lattice output.
    """
    units = np.asarray(units, dtype=float)
    noise = np.asarray(noise, dtype=np.int64)
    total = units + noise.astype(float)
    big = np.flatnonzero(np.abs(noise) > _INT53)
    if big.size:
        flat_u, flat_n, flat_t = units.reshape(-1), noise.reshape(-1), total.reshape(-1)
        for i in big:
            flat_t[i] = float(int(flat_u[i]) + int(flat_n[i]))
        total = flat_t.reshape(units.shape)
    with np.errstate(over="ignore"):
        out = total * gamma
    top = np.finfo(float).max
    return np.clip(out, -top, top)
