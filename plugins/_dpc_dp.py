"""The differentially private kernels of the density-peak clusterers: the
sensitivity of densities on public query points (``dp-dpc-grid``), DP
quantiles by the exponential mechanism (Smith 2011) for bounds and d_c, and
the checks of a nested noise mechanism that every private clusterer shares.
The non-private kernels (pairs, densities, deltas, centres, merges) are in
:mod:`privclust_plugins._dpc`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.spatial import cKDTree

import privclust
from privclust import ParameterError, at_least

from ._dpc import _sqdist

# ---------------------------------------------------------------------------
# The rigorous variant: query points and their sensitivity
# ---------------------------------------------------------------------------


def lattice_gaussian_sum(spacing: float, dc: float) -> float:
    """``sup_u sum_{m in Z} exp(-((u - m h) / d_c)^2)``, reached at ``u = 0``
    (the sum is a theta function whose Fourier coefficients are all positive)."""
    r = spacing / dc
    if r < 0.25:
        # Poisson summation (Jacobi's theta identity), exact and with few terms where the direct sum has many
        # (8 / r of them): sum_m exp(-(m r)^2) = (sqrt(pi) / r) sum_k exp(-(pi k / r)^2); for r < 0.25 the terms
        # k >= 1 are below exp(-16 pi^2), far under a double's precision. Infinite where sqrt(pi) / r overflows
        # (the caller refuses a sensitivity that is not finite).
        k = np.arange(1, 5)
        with np.errstate(over="ignore", divide="ignore"):
            return float(math.sqrt(math.pi) / r * (1.0 + 2.0 * np.exp(-(math.pi * k / r) ** 2).sum())) \
                if r > 0 else math.inf
    m_max = int(math.ceil(8.0 / r)) + 1
    m = np.arange(-m_max, m_max + 1)
    return float(np.exp(-(m * r) ** 2).sum())


def grid_sensitivity(kernel: str, spacings: np.ndarray, dc: float) -> float:
    """L1 change of the node densities of a full grid when one record is added
    or removed: ``prod_k (floor(2 d_c / h_k) + 1)`` for the cutoff kernel (the
    nodes of an open ball of radius d_c lie in a box of side 2 d_c) and
    ``prod_k sup_u sum_m exp(-((u - m h_k) / d_c)^2)`` for the Gaussian kernel
    (separable over the axes). Independent of the number of records."""
    if kernel == "cutoff":
        with np.errstate(over="ignore", divide="ignore"):  # an infinite count is refused by the caller
            return float(np.prod([np.floor(2.0 * dc / h) + 1 for h in spacings]))
    return float(np.prod([lattice_gaussian_sum(h, dc) for h in spacings]))


def points_sensitivity(kernel: str, Q: np.ndarray, dc: float, truncate: float | None) -> float:
    """An upper bound on ``max_x sum_q K(||q - x||)`` for arbitrary query points.

    Cutoff: the query points in a ball of radius d_c around any x lie within
    2 d_c of one of them, so the sum is at most
    ``max_q #{q' : ||q - q'|| < 2 d_c}``. Gaussian: the points within
    ``R = max(truncate, 3) d_c`` count at most 1 each (bounded the same way
    with 2R) and the others at most ``exp(-(R / d_c)^2)`` each.
    """
    tree = cKDTree(Q)
    if kernel == "cutoff":
        return float(np.max(tree.query_ball_point(Q, 2.0 * dc, return_length=True)))
    R = max(3.0, truncate or 3.0) * dc
    near = float(np.max(tree.query_ball_point(Q, 2.0 * R, return_length=True)))
    return near + Q.shape[0] * math.exp(-((R / dc) ** 2))


# ---------------------------------------------------------------------------
# Differentially private quantiles (exponential mechanism, Smith 2011)
# ---------------------------------------------------------------------------

#: Largest number of pairwise distances a DP d_c is computed from.
DP_PAIRS = 200_000


def dp_quantile(values: np.ndarray, q: float, low: float, high: float, epsilon: float,
                rng: np.random.Generator, sensitivity: float = 1.0) -> float:
    """The ``q``-quantile of ``values`` within the public range ``[low, high]``
    by the exponential mechanism over intervals (Smith 2011).

    The values are clipped to the range and sorted, ``z_0 = low <= z_1 <= ...
    <= z_m <= z_{m+1} = high``; the interval ``[z_i, z_{i+1}]`` has utility
    ``-|i - q m|`` (how far its rank is from the target), and is chosen with
    probability proportional to its length times ``exp(epsilon u / (2
    sensitivity))``; the output is uniform within it. ``sensitivity`` bounds
    how much one record moves the rank of any point (1 when each record gives
    one value). Everything is computed in logarithms (no overflow for any
    range or epsilon) and lengths are taken on halved values so that a range
    near the float limit does not overflow.
    """
    z = np.sort(np.clip(np.asarray(values, dtype=float), low, high))
    m = z.size
    edges = np.concatenate([[low], z, [high]]) * 0.5  # halved: high - low cannot overflow
    lengths = np.diff(edges)
    utility = -np.abs(np.arange(m + 1) - q * m)
    with np.errstate(divide="ignore"):
        logw = np.log(lengths) + (epsilon / (2.0 * sensitivity)) * utility
    finite = np.isfinite(logw)
    if not finite.any():  # every value at one point and the range degenerate
        return float(low)
    logw = np.where(finite, logw - logw[finite].max(), -np.inf)
    p = np.exp(logw)
    cdf = np.cumsum(p)
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    i = min(i, m)
    while lengths[i] <= 0:  # zero-probability interval hit by rounding at the cdf's end
        i -= 1
    u = rng.random()
    return float(2.0 * (edges[i] + u * lengths[i]))


def pairings(n: int, max_pairs: int = DP_PAIRS) -> int:
    """The number ``r`` of disjoint random pairings :func:`pairing_distances`
    uses for ``n`` records (a function of ``n`` only, known before any draw)."""
    return max(1, min(64, max_pairs // max(n // 2, 1)))


def pairing_distances(X: np.ndarray, rng: np.random.Generator, max_pairs: int = DP_PAIRS
                      ) -> tuple[np.ndarray, int]:
    """Distances of ``r`` disjoint random pairings of the records (``r``
    random permutations, consecutive records paired), so that each record is
    in at most ``r`` pairs: one record's change moves at most ``r`` distances.
    The permutations depend only on ``n`` and the random stream. Returns the
    distances and ``r``. A distance too large for a float (a record far
    outside the bounds) is ``inf``: the DP quantile clips it to its range."""
    n = X.shape[0]
    half = n // 2
    r = pairings(n, max_pairs)
    out = np.empty(r * half)
    for t in range(r):
        perm = rng.permutation(n)
        a, b = perm[: 2 * half: 2], perm[1: 2 * half: 2]
        with np.errstate(over="ignore"):
            out[t * half:(t + 1) * half] = np.sqrt(_sqdist(X[a], X[b]))
    return out, r


#: Parameters of a noise mechanism that only a noise *step* uses; a component
#: that draws through ``mechanism.release(...)`` sets them itself.
STEP_ONLY_NOISE_PARAMS = ("epsilon", "delta", "bounds")


#: Built-in noise mechanisms that cannot make the releases of the DP clusterers (pure epsilon, L1), and why:
#: refused when the step is made (at run time they failed, after ``bounds = "dp"`` had been paid for).
#: ``geometric`` only where the released values are real (it fits integer counts: the cutoff kernel's densities).
INCOMPATIBLE_NOISE = {
    "gaussian": "needs a delta > 0 and an L2 calibration, while the step spends a pure epsilon per release",
    "geometric": "adds integer noise to integer values, while the values the step releases are real",
}


def noise_name(noise: object) -> str | None:
    """The registered name of a nested noise mechanism (a spec, a name or a
    built component), or ``None``."""
    if isinstance(noise, privclust.ComponentSpec):
        return noise.use
    return noise if isinstance(noise, str) else getattr(type(noise), "name", None)


def nested_noise_problem(owner: str, noise: object, *, integer_values: bool = False,
                         integer_option: str | None = None) -> str | None:
    """The text refusing a nested noise mechanism that cannot make ``owner``'s
    releases (:data:`INCOMPATIBLE_NOISE`; ``integer_values``: they are whole
    numbers, which ``geometric`` fits; ``integer_option``: the setting that
    would make them so, named in the refusal) or that sets a parameter which
    cannot take effect inside ``owner`` (its epsilon, delta or bounds), or
    ``None``."""
    if noise is None:
        return None
    name = noise_name(noise)
    params = getattr(noise, "params", None)  # a ComponentSpec
    if params is not None:
        given = [k for k in STEP_ONLY_NOISE_PARAMS if params.get(k) is not None]
    else:
        given = [k for k in STEP_ONLY_NOISE_PARAMS if getattr(noise, k, None) is not None]
    if not given:
        if name in INCOMPATIBLE_NOISE and not (name == "geometric" and integer_values):
            return (f"{owner}: the nested noise mechanism {name!r} {INCOMPATIBLE_NOISE[name]}; use noise = \"laplace\" "
                    "(the default)" + (f", or {integer_option} with 'geometric'"
                                       if name == "geometric" and integer_option else ""))
        return None
    keys = ", ".join(f"'noise.{k}'" for k in given)
    return (f"{owner}: the nested noise mechanism's {keys} cannot take effect (they apply only when the mechanism "
            f"is a recipe step; {owner} sets the noise's epsilon and sensitivity itself from its own 'epsilon'); "
            "remove them from the noise table and set the step's own 'epsilon' instead")


def check_dp_bounds_params(owner: str, bounds: object, bounds_range: object, bounds_epsilon: object) -> None:
    """The parameters of ``bounds = "dp"`` (:func:`dp_bounds`) as a step
    declares them: with it, a public outer ``bounds_range`` mapping and its
    own ``bounds_epsilon``; without it, neither. Raises ``ParameterError``
    naming ``owner`` (the plugin) and the parameter to fix."""
    if bounds == "dp":
        if not isinstance(bounds_range, Mapping):
            raise ParameterError(
                f"{owner}: bounds = \"dp\" estimates the bounds with DP quantiles searched within a public outer "
                "range; give it as bounds_range = { column = [low, high], ... } (a range known without looking at "
                "the data, e.g. [0, 1000] for a price)")
        if bounds_epsilon is None:
            raise ParameterError(f"{owner}: bounds = \"dp\" spends its own budget; give bounds_epsilon "
                                 "(e.g. bounds_epsilon = 0.1), charged on top of 'epsilon'")
        return
    for key, value in (("bounds_range", bounds_range), ("bounds_epsilon", bounds_epsilon)):
        if value is not None:
            raise ParameterError(f"{owner}: '{key}' applies only with bounds = \"dp\"; remove it or set "
                                 "bounds = \"dp\"")


def dp_bounds(context, X: np.ndarray, columns: list[str], low: np.ndarray, high: np.ndarray, q: float,
              epsilon: float, relation: privclust.Relation | str) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of each column as its ``q`` and ``1 - q`` DP quantiles searched
    within the public ``[low, high]``; spends ``epsilon`` through the context
    (split evenly over the ``2 d`` quantiles, sequential composition) before
    anything is drawn. A column whose two quantiles cross keeps its public
    range (post-processing)."""
    d = len(columns)
    each = epsilon / (2 * d)
    context.spend(
        epsilon=epsilon, mechanism="exponential (DP quantile, Smith 2011)", sensitivity=1.0, relation=relation,
        covers=(f"the bounds of {', '.join(columns)}: the {q:g} and {1 - q:g} quantiles of each column, searched "
                f"within its public range by the exponential mechanism on the rank (utility sensitivity 1), "
                f"epsilon {at_least(each, 4)} each, composed sequentially over {2 * d} quantiles"),
        not_covered="the exponential mechanism is sampled in floating point (not an exact sampler)",
        details={"quantile": q, "epsilon_per_quantile": each,
                 "range": {c: [float(a), float(b)] for c, a, b in zip(columns, low, high, strict=True)}},
    )
    new_lo, new_hi = np.empty(d), np.empty(d)
    for j in range(d):
        a = dp_quantile(X[:, j], q, low[j], high[j], each, context.rng)
        b = dp_quantile(X[:, j], 1 - q, low[j], high[j], each, context.rng)
        if not b > a:
            a, b = low[j], high[j]
        new_lo[j], new_hi[j] = a, b
    return new_lo, new_hi
