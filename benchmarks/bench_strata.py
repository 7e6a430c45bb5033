"""Strata beyond one machine: 1e7 records in 100 strata on a two-worker Dask cluster.

The data: 1e7 records x (6 numeric + 3 categorical key columns) and a
stratum column with 100 values (1e5 records each), written as a Parquet
dataset partitioned by the stratum (Hive layout), one stratum at a time, so
that no process ever holds the whole file. The numeric columns are
income-like (correlated log-normal), the keys small categorical codes.

Each protection is ``privclust.run_dataset`` (the recipe's ``[roles]``:
strata, keys) on a ``distributed.LocalCluster`` of 2 worker processes with one
thread each: every task reads its stratum, runs the recipe, writes its
released records into the output dataset. Measured: wall time, the peak
resident memory of each worker process (``ru_maxrss`` read on the workers
after the run) and of the driver. The baseline is the single-process
``privclust.run`` on 1e6 records (the first 10 strata, no strata declared),
in a fresh process, in the same session. Methods: crisp microaggregation
(MDAV, k = 3) and fuzzy microaggregation (k = 5).

Run: ``python benchmarks/run.py strata [--quick]`` (``--quick``: 1e5 records
in 10 strata, baseline 1e4).
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _harness import machine, measure, save, table  # noqa: E402

NUMERIC = [f"x{j}" for j in range(6)]
KEYS = ["sex", "age_group", "region_code"]
RECIPES = {
    "MDAV k = 3": {"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}},
    "fuzzy k = 5": {"use": "fuzzy-microaggregation", "k": 5},
}


def _stratum(i: int, n: int):
    import pandas as pd

    rng = np.random.default_rng(1000 + i)
    z = rng.normal(size=(n, 6)) @ np.linalg.cholesky(0.5 * np.eye(6) + 0.5).T
    frame = pd.DataFrame(np.exp(8 + 0.6 * z).round(2), columns=NUMERIC)
    frame["sex"] = rng.integers(1, 3, n)
    frame["age_group"] = rng.integers(1, 9, n)
    frame["region_code"] = rng.integers(1, 21, n)
    frame["stratum"] = f"s{i:03d}"
    return frame


def _write_dataset(root: Path, strata: int, per: int) -> None:
    for i in range(strata):  # one stratum in memory at a time
        _stratum(i, per).to_parquet(root, partition_cols=["stratum"])


def _recipe(step: dict, strata: bool) -> dict:
    roles = {"keys": KEYS, **({"strata": "stratum"} if strata else {})}
    return {"roles": roles, "steps": [step]}


def _distributed(step: dict, source: str, output: str) -> dict:
    """run_dataset on a 2-worker LocalCluster; the peak memory of each worker."""
    from distributed import Client, LocalCluster

    import privclust

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        start = time.perf_counter()
        release = privclust.run_dataset(_recipe(step, True), source, output, seed=1, scheduler=client)
        seconds = time.perf_counter() - start
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    return {"seconds": seconds, "worker_peaks_mb": sorted(peaks.values()), "records": release.records,
            "min_group": release.verification["steps"][0]["min_group_size"], "verdict": release.verdict}


def _single(step: dict, source: str, strata: int) -> dict:
    """privclust.run in one process on the first ``strata`` strata, read into memory, no strata declared."""
    import pandas as pd

    import privclust

    frame = pd.read_parquet(source, filters=[("stratum", "in", [f"s{i:03d}" for i in range(strata)])])
    frame = frame.drop(columns="stratum")
    release = privclust.run(_recipe(step, False), frame, seed=1)
    return {"records": len(release.data), "min_group": release.verification["steps"][0]["min_group_size"]}


HEADERS = ["method", "records", "strata", "wall time (2 workers)", "peak memory per worker", "driver peak",
           "smallest group", "single-process records", "single-process time", "single-process peak",
           "time ratio (10x the records)"]


def _report(rows: list[list[str]], strata: int, per: int, size_mb: float, written: float) -> str:
    return "\n".join([
        f"Machine: {machine()}; {strata} strata x {per:,} records, 6 numeric + 3 key columns; the input "
        f"dataset: {size_mb:,.0f} MB of Parquet, written stratum by stratum in {written:.0f} s.",
        "",
        table(HEADERS, rows),
        "",
        "The driver reads only the stratum column; each worker holds one stratum at a time. The time ratio "
        "compares 10x the records on 2 workers with 1x the records in one process: 5 means linear scaling "
        "in the records with a perfect 2x from the workers.",
    ])


def main(quick: bool = False, methods: list[str] | None = None) -> str:
    """Each method's row is saved as soon as it is measured (a long run that is
    stopped keeps the rows it finished)."""
    strata, per, base = (10, 10_000, 1) if quick else (100, 100_000, 10)
    chosen = {k: v for k, v in RECIPES.items() if not methods or any(m in k for m in methods)}
    work = Path(tempfile.mkdtemp(prefix="privclust-strata-"))
    name = "strata_quick" if quick else "strata"
    try:
        source = work / "in"
        start = time.perf_counter()
        _write_dataset(source, strata, per)
        written = time.perf_counter() - start
        size_mb = sum(p.stat().st_size for p in source.rglob("*.parquet")) / 1024**2
        rows: list[list[str]] = []
        text = ""
        for method, step in chosen.items():
            dist = measure(_distributed, step, str(source), str(work / f"out-{len(rows)}"), timeout=7200)
            one = measure(_single, step, str(source), base, timeout=3600)
            if dist.ok:
                v = dist.value
                peaks = ", ".join(f"{p:,.0f}" for p in v["worker_peaks_mb"])
                rows.append([method, f"{v['records']:,}", f"{strata}", f"{v['seconds']:.0f} s",
                             f"{peaks} MB", dist.memory_text(), f"{v['min_group']}",
                             f"{base * per:,}", one.time_text(), one.memory_text(),
                             f"{(v['seconds'] / one.seconds):.1f}x" if one.ok else "-"])
            else:
                rows.append([method, f"{strata * per:,}", f"{strata}", dist.time_text(), "-", "-", "-",
                             f"{base * per:,}", one.time_text(), one.memory_text(), "-"])
            text = _report(rows, strata, per, size_mb, written)
            save(name, text)
            shutil.rmtree(work / f"out-{len(rows) - 1}", ignore_errors=True)
        return text
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv, methods=[a for a in sys.argv[1:] if not a.startswith("--")])
