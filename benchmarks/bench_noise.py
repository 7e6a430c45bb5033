"""Noise: the exact lattice samplers against the textbook float samplers, same run.

For each mechanism, 10^6 noisy values are drawn two ways from the same seed:
the exact sampler (``privclust.sampling``: integers with exact
probabilities from the Generator's integer outputs, CKS 2020) and the float
sampler it replaced (numpy's ``rng.laplace``, ``rng.normal``, and the
difference of two ``rng.geometric`` draws). Two levels are timed: the
sampler alone (10^6 draws of noise) and the whole ``mechanism.release`` of
10^6 values (parameter checks, lattice choice, rounding to the lattice,
ledger entry), against ``values + float noise``. Each figure is the best of
three calls in a fresh process.

Run: ``python benchmarks/run.py noise [--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from _harness import machine, measure, save, table  # noqa: E402

REPEATS = 3


def _best(fn, repeats: int = REPEATS) -> tuple[float, float]:
    """Best wall-clock and CPU seconds of ``repeats`` calls."""
    wall, cpu = math.inf, math.inf
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


def sampler_exact(kind: str, n: int) -> tuple[float, float]:
    from privclust import sampling

    rng = np.random.default_rng(1)
    scale = 2**20  # in lattice units, as a release with sensitivity 1 and epsilon 1 uses
    if kind == "laplace":
        return _best(lambda: sampling.discrete_laplace(rng, scale, n))
    if kind == "gaussian":
        return _best(lambda: sampling.discrete_gaussian(rng, (4 * 2**20) ** 2, n))
    return _best(lambda: sampling.discrete_laplace(rng, 1, n))  # geometric, epsilon / sensitivity = 1


def sampler_float(kind: str, n: int) -> tuple[float, float]:
    rng = np.random.default_rng(1)
    if kind == "laplace":
        return _best(lambda: rng.laplace(0.0, 1.0, n))
    if kind == "gaussian":
        return _best(lambda: rng.normal(0.0, 4.0, n))
    p = -math.expm1(-1.0)
    return _best(lambda: rng.geometric(p, n) - rng.geometric(p, n))


def release_exact(kind: str, n: int) -> tuple[float, float]:
    from privclust import Budget, PrivacyContext
    from privclust_plugins.noise import GaussianMechanism, GeometricMechanism, LaplaceMechanism

    values = np.random.default_rng(0).uniform(0, 100, n)
    mech = {"laplace": LaplaceMechanism(), "gaussian": GaussianMechanism(), "geometric": GeometricMechanism()}[kind]
    if kind == "geometric":
        values = np.round(values).astype(np.int64)
    extra = {"delta": 1e-6} if kind == "gaussian" else {}

    def once() -> None:
        ctx = PrivacyContext(Budget(), seed=1)
        out = mech.release(values, sensitivity=1.0, epsilon=1.0, context=ctx, relation="r", covers="c", **extra)
        assert out.shape == values.shape

    return _best(once)


def release_float(kind: str, n: int) -> tuple[float, float]:
    values = np.random.default_rng(0).uniform(0, 100, n)
    rng = np.random.default_rng(1)
    if kind == "laplace":
        return _best(lambda: values + rng.laplace(0.0, 1.0, n))
    if kind == "gaussian":
        from privclust_plugins.noise import analytic_gaussian_sigma

        return _best(lambda: values + rng.normal(0.0, analytic_gaussian_sigma(1.0, 1e-6, 1.0), n))
    ints = np.round(values).astype(np.int64)
    p = -math.expm1(-1.0)
    return _best(lambda: ints + (rng.geometric(p, n) - rng.geometric(p, n)))


def main(quick: bool = False) -> str:
    n = 10**5 if quick else 10**6
    rows = []
    for level, exact_fn, float_fn in [("sampler", sampler_exact, sampler_float),
                                      ("release", release_exact, release_float)]:
        for kind in ("laplace", "gaussian", "geometric"):
            ours, peer = measure(exact_fn, kind, n), measure(float_fn, kind, n)
            if ours.ok and peer.ok:
                (w1, c1), (w0, c0) = ours.value, peer.value
                rows.append([level, kind, f"{n:,}", f"{w1:.3g} s", f"{c1:.3g} s", f"{w0:.3g} s", f"{c0:.3g} s",
                             f"{w1 / w0:.1f}x", f"{c1 / c0:.1f}x", f"{n / c1 / 1e6:.2g} M/s"])
            else:
                rows.append([level, kind, f"{n:,}", ours.time_text(), "-", peer.time_text(), "-", "-", "-", "-"])
    text = (f"Noise, {n:,} values (machine: {machine()})\n\n"
            + table(["level", "mechanism", "N", "exact", "CPU", "float (old)", "CPU", "exact / float",
                     "same, CPU", "exact per CPU second"], rows)
            + "\n\nexact = privclust.sampling (discrete Laplace / discrete Gaussian / two-sided geometric, CKS 2020, "
              "from the Generator's integer outputs; values on a power-of-two lattice); float (old) = numpy's "
              "rng.laplace, rng.normal, difference of two rng.geometric. sampler = 10^6 draws of noise alone "
              "(Laplace scale 2^20 lattice units, Gaussian sigma 2^22, geometric scale 1); release = "
              "mechanism.release of 10^6 values with sensitivity 1, epsilon 1 (delta 1e-6) against values + "
              "float noise. Best of 3 calls in a fresh process; wall clock and CPU time (the fairer figure on a "
              "shared machine).")
    save("noise", text)
    return text


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
