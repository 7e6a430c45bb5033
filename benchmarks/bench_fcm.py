"""FCM: privclust's ``fcm`` against scikit-fuzzy and fuzzy-c-means, same data, same run.

Peers: ``skfuzzy.cmeans`` (scikit-fuzzy) and ``fcmeans.FCM`` (the
fuzzy-c-means package). Every library gets the same records (a mixture of
ten overlapping Gaussians), the same ``c`` and ``m = 2``, and runs a fixed number of
iterations (early stopping disabled: ``error = 0`` for the peers, the
iteration cap for ours). Each call runs in a fresh process; the time per
iteration is the *marginal* one, ``(T(n2) - T(n1)) / (n2 - n1)`` for two
iteration counts, so set-up work (imports, seeding, standardisation, the
final membership matrix) cancels out for every library alike.

BLAS threads: ours runs its thin matrix products single-threaded (see
``privclust_plugins.fuzzy.single_threaded_blas``). The peers are measured
both with their default BLAS threads and limited to one thread, and the
faster of the two is the one compared, so a busy machine cannot flatter us.

Run: ``python benchmarks/run.py fcm [--quick]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _harness import Measurement, machine, measure, ratio, save, table  # noqa: E402

M = 2.0


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # overlapping clusters: FCM does not converge within the iteration counts used here
    centres = rng.uniform(-2, 2, size=(10, d))
    return centres[rng.integers(0, 10, n)] + rng.normal(size=(n, d))


def run_ours(n: int, d: int, c: int, iterations: int, threads: str) -> float:
    import pandas as pd

    import privclust
    from privclust_plugins.fuzzy import FCM

    frame = pd.DataFrame(_data(n, d), columns=[f"x{j}" for j in range(d)])
    context = privclust.PrivacyContext(seed=0)
    start = time.perf_counter()
    part = FCM(n_clusters=c, m=M, max_iter=iterations, tol=0.0, n_init=1).fit(frame, context)
    seconds = time.perf_counter() - start
    done = part.diagnostics["iterations"]
    assert done == iterations, f"converged after {done} of {iterations} iterations; use harder data"
    return seconds


def _limited(threads: str):
    from contextlib import nullcontext

    from threadpoolctl import threadpool_limits

    return threadpool_limits(1) if threads == "1" else nullcontext()


def run_skfuzzy(n: int, d: int, c: int, iterations: int, threads: str) -> float:
    import skfuzzy

    X = _data(n, d)
    with _limited(threads):
        start = time.perf_counter()
        out = skfuzzy.cmeans(X.T, c, M, error=0.0, maxiter=iterations, seed=0)
        seconds = time.perf_counter() - start
    assert out[5] == iterations
    return seconds


def run_fcmeans(n: int, d: int, c: int, iterations: int, threads: str) -> float:
    from fcmeans import FCM as PeerFCM

    X = _data(n, d)
    with _limited(threads):
        start = time.perf_counter()
        PeerFCM(n_clusters=c, m=M, max_iter=iterations, error=0.0).fit(X)
        seconds = time.perf_counter() - start
    return seconds


def per_iteration(fn, n: int, d: int, c: int, counts: tuple[int, int], threads: str,
                  timeout: float) -> Measurement:
    """Marginal seconds per iteration, and the larger run's peak memory."""
    low = measure(fn, n, d, c, counts[0], threads, timeout=timeout)
    high = measure(fn, n, d, c, counts[1], threads, timeout=timeout)
    if not (low.ok and high.ok):
        return low if not low.ok else high
    seconds = max(high.value - low.value, 1e-9) / (counts[1] - counts[0])
    return Measurement(seconds, high.peak_mb, (low.value, high.value))


def median_of(fn, n: int, d: int, c: int, counts: tuple[int, int], threads: str, timeout: float,
              repeats: int) -> Measurement:
    """The median of ``repeats`` marginal measurements (for the fast library,
    whose few milliseconds per iteration would otherwise drown in the noise
    of process start-up)."""
    ms = [per_iteration(fn, n, d, c, counts, threads, timeout) for _ in range(repeats)]
    ok = sorted((m for m in ms if m.ok), key=lambda m: m.seconds)
    return ok[len(ok) // 2] if ok else ms[0]


def best(*ms: Measurement) -> Measurement:
    ok = [m for m in ms if m.ok]
    return min(ok, key=lambda m: m.seconds) if ok else ms[0]


def _ms(m: Measurement) -> str:
    return f"{m.seconds * 1e3:.1f} ms" if m.ok else (m.failure or "failed")


def main(quick: bool = False) -> str:
    # (N, d, c, the peer the issue sets a target against, the speed-up it asks for)
    cases = [(100_000, 2, 10, "skfuzzy", 10.0), (20_000, 10, 10, "fcmeans", 2.0)] if quick else [
        (1_000_000, 2, 10, "skfuzzy", 10.0), (100_000, 10, 10, "fcmeans", 2.0), (100_000, 2, 10, None, None)]
    counts = (2, 12) if quick else (3, 33)
    timeout = 600.0 if quick else 3600.0
    rows = []
    targets = []
    for n, d, c, target, need in cases:
        ours = median_of(run_ours, n, d, c, counts, "default", timeout, repeats=3)
        sk = best(per_iteration(run_skfuzzy, n, d, c, counts, "default", timeout),
                  per_iteration(run_skfuzzy, n, d, c, counts, "1", timeout))
        fm = best(per_iteration(run_fcmeans, n, d, c, counts, "default", timeout),
                  per_iteration(run_fcmeans, n, d, c, counts, "1", timeout))
        rows.append([f"{n:,}", d, c, _ms(ours), ours.memory_text(), _ms(sk), sk.memory_text(), ratio(sk, ours),
                     _ms(fm), fm.memory_text(), ratio(fm, ours)])
        if target is not None:
            peer = sk if target == "skfuzzy" else fm
            got = peer.seconds / ours.seconds if (peer.ok and ours.ok) else float("nan")
            verdict = "met" if got >= need else "NOT met"
            targets.append(f"- target at N = {n:,}, d = {d}, c = {c}: at least {need:g}x faster than {target}; "
                           f"measured {got:.1f}x ({verdict}" + (", quick sizes" if quick else "") + ")")
    text = "\n".join([
        f"FCM per iteration, m = {M:g}, same data and iteration counts (machine: {machine()})",
        "",
        table(["N", "d", "c", "privclust fcm", "peak", "scikit-fuzzy", "peak", "speed-up", "fuzzy-c-means", "peak",
               "speed-up"], rows),
        "",
        *targets,
        "",
        f"Time per iteration = (T({counts[1]} iterations) - T({counts[0]} iterations)) / {counts[1] - counts[0]}, "
        "each run in a fresh process (privclust: the median of three such measurements); peak = resident memory "
        "of the longer run (interpreter included). Peers: the faster of default BLAS threads and one thread.",
    ])
    save("fcm" + ("-quick" if quick else ""), text)
    return text


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
