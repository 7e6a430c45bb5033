"""MDAV: privclust's ``mdav`` against the textbook loop, same data, same run.

No Python MDAV is published on PyPI: ``microaggregation`` (0.1.9) computes
the SSE of an optimal univariate partition by dynamic programming and
``microagg1d`` is univariate too, so neither forms MDAV groups; sdcMicro
(R) cannot be installed here (CRAN is unreachable). The peer is therefore
the plain textbook loop (``tests/_mdav_reference.py``: full
numpy distance passes over the remaining records for every group), run at
the sizes it can handle within the timeout. Both get the same standardised
records; the table says whether their groups are identical.

Run: ``python benchmarks/run.py mdav [--quick]``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the textbook loop, the peer

import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _harness import Measurement, machine, measure, ratio, save, table  # noqa: E402
from _mdav_reference import mdav_reference  # noqa: E402

import privclust  # noqa: E402
from privclust_plugins import _mdav  # noqa: E402
from privclust_plugins.mdav import MDAV  # noqa: E402

D = 5
K = 3


def _data(n: int, kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        X = rng.normal(size=(n, D))
    else:  # skewed, like income variables
        X = rng.lognormal(sigma=1.0, size=(n, D))
    return _mdav.standardise(X)[0]


def _digest(labels: np.ndarray, seconds: float, cpu: float) -> tuple[str, int, int, float, float]:
    sizes = np.bincount(labels)
    digest = hashlib.sha1(np.ascontiguousarray(labels).tobytes()).hexdigest()[:12]
    return digest, int(sizes.min()), int(sizes.max()), seconds, cpu


def run_ours(n: int, kind: str):
    Z = _data(n, kind)
    start, cpu = time.perf_counter(), time.process_time()
    labels = _mdav.mdav(Z, K)
    return _digest(labels, time.perf_counter() - start, time.process_time() - cpu)


def run_component(n: int, kind: str):
    """The whole ``mdav`` component (DataFrame in, Partition out, ledger)."""
    frame = pd.DataFrame(_data(n, kind), columns=[f"x{j}" for j in range(D)])
    start, cpu = time.perf_counter(), time.process_time()
    part = MDAV(k=K).fit(frame, privclust.PrivacyContext(seed=0))
    return _digest(part.labels, time.perf_counter() - start, time.process_time() - cpu)


def run_reference(n: int, kind: str):
    Z = _data(n, kind)
    start, cpu = time.perf_counter(), time.process_time()
    labels = mdav_reference(Z, K)
    return _digest(labels, time.perf_counter() - start, time.process_time() - cpu)


def _inner(m: Measurement) -> Measurement:
    """The call's own time (data generation and process start left out)."""
    if m.ok:
        return Measurement(m.value[3], m.peak_mb, m.value, None)
    return m


def _cpu(m: Measurement) -> str:
    return f"{m.value[4]:.3g} s" if m.ok else "-"


def main(quick: bool = False) -> str:
    # (N, data, run the textbook loop?)
    sizes = [(2_000, "normal", True), (10_000, "normal", True)] if quick else [
        (10_000, "normal", True), (10_000, "lognormal", True), (100_000, "normal", True),
        (100_000, "lognormal", False)]
    peer_timeout = 120.0 if quick else 2400.0
    rows = []
    for n, kind, with_peer in sizes:
        ours = _inner(measure(run_ours, n, kind))
        comp = _inner(measure(run_component, n, kind))
        if with_peer:
            peer = _inner(measure(run_reference, n, kind, timeout=peer_timeout))
        else:
            peer = Measurement(None, None, failure="not run")
        same = "-"
        if ours.ok and peer.ok:
            same = "yes" if ours.value[0] == peer.value[0] else "NO"
        sizes_text = f"{ours.value[1]}..{ours.value[2]}" if ours.ok else "-"
        rows.append([f"{n:,}", kind, ours.time_text(), _cpu(ours), ours.memory_text(), comp.time_text(),
                     peer.time_text(), _cpu(peer), peer.memory_text(), ratio(peer, ours), same, sizes_text])
    text = "\n".join([
        f"MDAV, d = {D}, k = {K} (machine: {machine()})",
        "",
        table(["N", "data", "privclust mdav", "CPU", "peak", "component", "textbook loop", "CPU", "peak",
               "speed-up", "same groups", "group sizes"], rows),
        "",
        "privclust mdav = the kernel on standardised records; component = the `mdav` clusterer (DataFrame in, "
        "Partition out); textbook loop = full distance passes per group. Times are the clustering call alone "
        "(data generation left out): wall clock, and CPU = the process's CPU time, a fairer figure on a shared "
        "machine; each call runs in a fresh process and peak = its peak resident memory (interpreter and imports "
        "included). The textbook loop is not run on the skewed 100,000-record file (it would take as long as on "
        "the normal one).",
    ])
    save("mdav" + ("-quick" if quick else ""), text)
    return text


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
