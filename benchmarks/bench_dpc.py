"""Density-peak clustering: privclust's ``dpc`` / ``dp-dpcl`` against pydpc.

Same run, same data (a 2-D mixture of 20 Gaussian blobs), same absolute d_c
(about 50 neighbours per point) for both libraries. pydpc builds the full
``n x n`` distance matrix in C; privclust never does (cell sweep for the
densities and delta, bounded blocks). pydpc only has the Gaussian kernel, so
the comparison uses it: privclust with its default truncation at 3 d_c and
exactly (``truncate = None``). R's densityClust is not measured: CRAN cannot
be reached from this machine, so it cannot be installed.

Scale runs: ``dpc`` (Gaussian and cutoff) and ``dp-dpcl`` (Gaussian, paper
mechanism, reachability merge) at 1e5 and 1e6 points, with d_c and E from the
percentage rule (d_c estimated from a sample of pairs at these sizes).
"""

from __future__ import annotations

import datetime as _dt
import warnings

import numpy as np
import pandas as pd
from _harness import machine, measure, ratio, save, table

import privclust

try:  # imported here, so that neither library's import time is measured
    import pydpc
except ImportError:  # pragma: no cover - the peer is optional
    pydpc = None

# Load the plugins once at import (not inside the timed calls).
privclust.get_registry()

#: Average number of neighbours within d_c.
NEIGHBOURS = 50


def _points(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 100, size=(20, 2))
    spread = 4.0 * np.sqrt(n / 1e6) if n < 1e6 else 4.0
    return centres[rng.integers(0, 20, n)] + rng.normal(0, max(spread, 0.5), size=(n, 2))


def _dc(n: int) -> float:
    """An absolute d_c with about NEIGHBOURS neighbours per point (from privclust's rule)."""
    from privclust_plugins import _dpc

    X = _points(n)
    (dc,), _ = _dpc.percent_distance(X, [100.0 * NEIGHBOURS / (n - 1)], lambda: np.random.default_rng(1))
    return dc


def run_pydpc(n: int, dc: float) -> int:
    X = np.ascontiguousarray(_points(n))
    cluster = pydpc.Cluster(X, fraction=0.02, autoplot=False, kernel_size=dc)
    # 20 centres from the decision graph: the 20 largest deltas among the denser half
    min_density = float(np.median(cluster.density))
    dense = np.sort(cluster.delta[cluster.density > min_density])[::-1]
    cluster.assign(min_density=min_density, min_delta=float(dense[20]))
    return int(cluster.nclusters)


def run_privclust(name: str, n: int, params: dict) -> int:
    frame = pd.DataFrame(_points(n), columns=["x", "y"])
    registry = privclust.get_registry()
    component = registry.create("clusterers", name, **params)
    # the percentage rules read d_c and E from the data: the benchmark opts in to those leaks by name
    context = privclust.PrivacyContext(privclust.Budget(allow_leaks=["dc_percent", "radius_percent"]), seed=1,
                                       registry=registry)
    with warnings.catch_warnings(), context.step(0, "bench", name):
        warnings.simplefilter("ignore")
        partition = component.fit(frame, context)
    return int(partition.n_clusters)


def main(quick: bool = False) -> str:
    sizes = [2_000, 5_000] if quick else [5_000, 10_000, 20_000]
    rows = []
    for n in sizes:
        dc = measure(_dc, n).value
        peer = measure(run_pydpc, n, dc)
        ours = measure(run_privclust, "dpc", n, {"dc": dc, "n_clusters": 20})
        exact = measure(run_privclust, "dpc", n, {"dc": dc, "n_clusters": 20, "truncate": 0.0})
        rows.append([f"{n:,}", f"{dc:.4g}", peer.time_text(), peer.memory_text(), ours.time_text(), ours.memory_text(),
                     ratio(peer, ours), ratio(peer, ours, "peak_mb"), exact.time_text(), ratio(peer, exact)])
    if not quick:
        n = 50_000
        dc = measure(_dc, n).value
        peer = measure(run_pydpc, n, dc, mem_limit_gb=8.0)
        ours = measure(run_privclust, "dpc", n, {"dc": dc, "n_clusters": 20})
        exact = measure(run_privclust, "dpc", n, {"dc": dc, "n_clusters": 20, "truncate": 0.0})
        rows.append([f"{n:,}", f"{dc:.4g}", peer.time_text() + " (8 GB limit)", peer.memory_text(), ours.time_text(),
                     ours.memory_text(), ratio(peer, ours), ratio(peer, ours, "peak_mb"), exact.time_text(),
                     ratio(peer, exact)])
    head = ["n", "d_c", "pydpc time", "pydpc peak", "dpc time", "dpc peak", "speed-up", "memory ratio",
            "dpc exact time", "exact speed-up"]
    text = [f"Measured {_dt.date.today().isoformat()} on {machine()}. "
            "Other jobs on the machine slow every figure down.",
            "", "### pydpc and privclust dpc, Gaussian kernel, same absolute d_c (about 50 neighbours), "
            "n_clusters = 20", "",
            table(head, rows)]

    scale_sizes = [20_000, 100_000] if quick else [100_000, 1_000_000]
    srows = []
    for n in scale_sizes:
        t = 100.0 * NEIGHBOURS / (n - 1)
        e = t / 5.0
        runs = [
            ("dpc", "gaussian", {"dc_percent": t, "n_clusters": 20}),
            ("dpc", "cutoff", {"dc_percent": t, "n_clusters": 20, "kernel": "cutoff"}),
            ("dp-dpcl", "gaussian", {"dc_percent": t, "radius_percent": e, "epsilon": 1.0}),
            ("dp-dpcl", "cutoff", {"dc_percent": t, "radius_percent": e, "epsilon": 1.0, "kernel": "cutoff"}),
        ]
        for name, kernel, params in runs:
            m = measure(run_privclust, name, n, params)
            clusters = m.value if m.ok else "-"
            srows.append([f"{n:,}", name, kernel, f"{t:.3g}", m.time_text(), m.memory_text(), clusters])
    text += ["", "### Scale runs (d_c and E from the percentage rule; d_c sampled above 5e6 pairs)", "",
             table(["n", "component", "kernel", "dc_percent", "time", "peak memory", "clusters"], srows)]
    report = "\n".join(text)
    save("dpc" + ("-quick" if quick else ""), report)
    return report


if __name__ == "__main__":
    import sys

    main(quick="--quick" in sys.argv)
