"""recode with automatic levels against anjana (k-anonymity by generalisation
hierarchies and record suppression), same file, same k, same hierarchies.

Both get the keys ``roof, walls, water, electcon, relat, sex`` of sdcMicro's
survey file (``../shared/datasets/sdc_testdata.csv``, per stratum of
``urbrur``) and of a generated file (100,000 records, one stratum, each key
drawn independently with the survey's category frequencies), the hierarchies
of ``docs/examples/survey-hierarchies/``, k = 3, and at most 5% of the
records suppressed. privclust searches the lattice of levels for the least
loss (Iyengar's LM, :data:`privclust_plugins.recode.LOSS_MEASURE`); anjana
(1.2) generalises greedily, the key with the most distinct values first,
until the records below k fit its suppression limit. Both losses are
computed here with the same measure, on the levels and suppressed records
each chose.

Install the peer as the README's benchmark lines say (``pip install --no-deps
anjana pycanon beartype``, or the ``bench-anjana`` extra in an environment of
its own: its pins downgrade pandas, numpy and scipy); run:
``python benchmarks/run.py recode [--quick]``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _harness import Measurement, machine, measure, ratio, save, table  # noqa: E402

import privclust  # noqa: E402
from privclust_plugins.recode import Recode, _levels_of, _read_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SURVEY = ROOT.parent / "shared" / "datasets" / "sdc_testdata.csv"
HIERARCHIES = ROOT / "docs" / "examples" / "survey-hierarchies"
KEYS = ["roof", "walls", "water", "electcon", "relat", "sex"]
K = 3
SHARE = 0.05


def _tables() -> dict[str, tuple[tuple[str, ...], ...]]:
    return {c: _read_table(str(HIERARCHIES / f"{c}.csv")) for c in KEYS}


def _parts(which: str, n: int) -> list[pd.DataFrame]:
    survey = pd.read_csv(SURVEY)
    if which == "survey":
        return [part[KEYS].reset_index(drop=True) for _, part in survey.groupby("urbrur")]
    rng = np.random.default_rng(0)
    columns = {}
    for c in KEYS:
        freq = survey[c].value_counts(normalize=True)
        columns[c] = rng.choice(freq.index.to_numpy(), n, p=freq.to_numpy())
    return [pd.DataFrame(columns)]


def _loss(part: pd.DataFrame, levels: dict[str, int], kept: np.ndarray) -> float:
    """Iyengar's LM over the keys, a suppressed record losing 1 on each (the measure recode minimises)."""
    tables = _tables()
    per_record = np.zeros(len(part))
    for c in KEYS:
        per_record += _levels_of(c, part[c], tables[c])[levels[c]][3]
    return float((per_record[kept].sum() + len(KEYS) * (~kept).sum()) / (len(part) * len(KEYS)))


def run_ours(which: str, n: int):
    parts = _parts(which, n)
    tables = _tables()
    start, cpu = time.perf_counter(), time.process_time()
    results = []
    for part in parts:
        context = privclust.PrivacyContext(seed=0, budget=privclust.Budget(allow_leaks=["recode-levels"]))
        out = Recode(hierarchies=tables, k=K, max_suppressed=SHARE).mask(part, context)
        results.append((part, out))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    total = sum(len(p) for p in parts)
    suppressed = sum(o.diagnostics["records_suppressed"] for _, o in results)
    loss = sum(_loss(p, o.diagnostics["levels"], ~o.data.isna().all(axis=1).to_numpy()) * len(p)
               for p, o in results) / total
    smallest = min(int(o.data.dropna().astype(str).value_counts().min()) for _, o in results)
    levels = [o.diagnostics["levels"] for _, o in results]
    nodes = [f"{o.diagnostics['evaluated']}/{o.diagnostics['lattice_nodes']}" for _, o in results]
    return seconds, cpu, suppressed, loss, smallest, levels, nodes


def run_anjana(which: str, n: int):
    from anjana.anonymity import k_anonymity_inner
    from bench_keys import _object_text  # anjana refuses pandas 3's string arrays

    with _object_text():
        parts = _parts(which, n)
        tables = _tables()
        start, cpu = time.perf_counter(), time.process_time()
        results = []
        for part in parts:
            hierarchies = {c: {level: [int(r[0]) if level == 0 else r[level] for r in tables[c]]
                               for level in range(len(tables[c][0]))} for c in KEYS}
            with contextlib.redirect_stdout(io.StringIO()):  # anjana prints its progress
                out, suppressed, levels = k_anonymity_inner(part.copy(), [], KEYS, K, SHARE * 100, hierarchies)
            results.append((part, out, suppressed, levels))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    total = sum(len(p) for p in parts)
    loss, smallest = 0.0, None
    for part, out, _suppressed, levels in results:
        kept = np.zeros(len(part), dtype=bool)
        kept[(out["index"] if "index" in out.columns else out.index).to_numpy()] = True
        loss += _loss(part, {c: int(levels.get(c, 0)) for c in KEYS}, kept) * len(part)
        size = int(out[KEYS].astype(str).value_counts().min()) if len(out) else 0
        smallest = size if smallest is None else min(smallest, size)
    return (seconds, cpu, sum(r[2] for r in results), loss / total, smallest,
            [{c: int(v) for c, v in r[3].items()} for r in results], ["-"] * len(results))


def _inner(m: Measurement) -> Measurement:
    """The call's own wall time (the harness's includes the file reading)."""
    return Measurement(m.value[0], m.peak_mb, m.value) if m.ok else m


def main(quick: bool = False) -> str:
    if not SURVEY.is_file():
        text = f"recode: skipped, {SURVEY} is absent (the shared data folder)"
        print(text)
        return text
    cases = [("survey", 4580), ("generated", 10_000 if quick else 100_000)]
    rows, details = [], []
    for which, n in cases:
        ours = _inner(measure(run_ours, which, n, timeout=600))
        try:
            import anjana  # noqa: F401
            peer = _inner(measure(run_anjana, which, n, timeout=120 if quick else 1800))
        except ImportError:
            peer = Measurement(None, None,
                               failure="anjana not installed (pip install --no-deps anjana pycanon beartype)")
        cell = lambda m, i, f="{}": f.format(m.value[i]) if m.ok else "-"  # noqa: E731
        rows.append([which, f"{n:,}", ours.time_text(), cell(ours, 1, "{:.2f} s"), peer.time_text(),
                     cell(peer, 1, "{:.2f} s"), ratio(peer, ours), cell(ours, 2), cell(peer, 2),
                     cell(ours, 3, "{:.4f}"), cell(peer, 3, "{:.4f}"), cell(ours, 4), cell(peer, 4)])
        details.append(f"- {which}: privclust levels {cell(ours, 5)} (nodes evaluated {cell(ours, 6)}); "
                       f"anjana levels {cell(peer, 5)}")
    text = "\n".join([
        f"recode with automatic levels vs anjana, k = {K}, at most {SHARE:.0%} of the records suppressed "
        f"(machine: {machine()})",
        "",
        table(["file", "records", "privclust", "CPU", "anjana", "CPU", "speed-up", "suppressed (privclust)",
               "suppressed (anjana)", "loss (privclust)", "loss (anjana)", "smallest group (privclust)",
               "smallest group (anjana)"], rows),
        "",
        *details,
        "",
        "Times: the masking calls alone (file reading left out), wall clock and the process's CPU time, each in a "
        "fresh process. Loss: Iyengar's LM over the six keys (a suppressed record loses 1 on each), the same measure "
        "for both. Suppressed: records (privclust sets their keys missing; anjana removes them). Smallest group: of "
        "identical key rows among the records not suppressed, per stratum. The survey file is protected per stratum "
        "of urbrur (two strata), the generated file as one.",
    ])
    save("recode" + ("-quick" if quick else ""), text)
    return text


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
