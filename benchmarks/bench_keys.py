"""Key maskers: ``local-suppression`` and ``pram`` against anjana, same files, same run.

Peer: anjana (the ``bench-anjana`` extra, or the no-deps install of the README's benchmark lines): its
``k_anonymity`` on the same keys, k and records, with a flat hierarchy per
key (value -> "*"), so that all it can do is suppress: a whole key column
(generalised to "*") or whole records (removed, up to ``supp_level`` percent
of them). privclust's ``local-suppression`` sets single key values missing
(a missing value matching any value, sdcMicro's convention). Both run per
stratum where the file has strata. Figures: time of the masker alone (wall
clock and CPU, in a fresh process), peak memory of that process, key values
hidden (suppressed by privclust; removed records x keys plus "*" values for
anjana) and records touched.

Files: sdcMicro's survey file (4,580 records, keys ``roof, walls, water,
electcon, relat, sex``, strata ``urbrur``) and generated files of 10^5 and
10^6 records x 7 keys drawn from the survey's categories and frequencies
(its six keys and ``hhcivil``, each independently, one stratum). The
heuristic against the exact solver (``method = "exact"``, HiGHS) on small
files: the survey's categories, 50 records, k = 2, 3, 5, and the
outlier files of ``tests/test_key_maskers.py``, also against the optimum that
leaves no record with every key missing; the heuristic as released against
its greedy alone on files of 50 to 250 records (k = 2, 3, 5). pram: 10^7 integer codes with a public 5 x 5
matrix.

Run: ``python benchmarks/run.py keys [--quick]``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _harness import machine, measure, save, table  # noqa: E402

SURVEY = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "sdc_testdata.csv"
SURVEY_KEYS = ["roof", "walls", "water", "electcon", "relat", "sex"]
GENERATED_KEYS = [*SURVEY_KEYS, "hhcivil"]
K = 3


def _survey() -> pd.DataFrame:
    return pd.read_csv(SURVEY)


def _generated(n: int, seed: int = 0, keys: list[str] = GENERATED_KEYS) -> pd.DataFrame:
    """``n`` records, each key drawn independently with the survey's categories and frequencies."""
    survey, rng = _survey(), np.random.default_rng(seed)
    out = {}
    for c in keys:
        freq = survey[c].value_counts(normalize=True).sort_index()
        out[c] = rng.choice(freq.index.to_numpy(), n, p=freq.to_numpy())
    return pd.DataFrame(out)


def _file(name: str) -> tuple[pd.DataFrame, list[str], str | None]:
    if name == "survey":
        return _survey(), SURVEY_KEYS, "urbrur"
    return _generated(int(float(name))), GENERATED_KEYS, None


def _parts(frame: pd.DataFrame, strata: str | None) -> list[pd.DataFrame]:
    return [part for _, part in frame.groupby(strata)] if strata else [frame]


def run_ours(name: str, method: str = "heuristic") -> dict:
    import privclust
    from privclust_plugins.keys import LocalSuppression

    frame, keys, strata = _file(name)
    values = touched = below = 0
    wall = cpu = 0.0
    for part in _parts(frame, strata):
        data = part[keys].copy()
        w0, c0 = time.perf_counter(), time.process_time()
        out = LocalSuppression(k=K, method=method).mask(data, privclust.PrivacyContext(seed=0))
        wall, cpu = wall + time.perf_counter() - w0, cpu + time.process_time() - c0
        values += out.diagnostics["suppressions"]
        below += out.diagnostics["records_below_k_before"]
        touched += int((out.data.isna() & data.notna()).any(axis=1).sum())
    return {"seconds": wall, "cpu": cpu, "values": values, "records": touched, "below": below, "n": len(frame)}


@contextlib.contextmanager
def _object_text() -> Iterator[None]:
    """anjana 1.2 checks (beartype) that a column's values are a list or a numpy array; pandas 3 gives text
    columns its own string arrays, which that check refuses: text columns as pandas 2 made them (object) while
    anjana runs, its warnings silenced. Its pins (pandas 2.3.3, numpy 2.0.2) need not be installed: the README's
    benchmark lines."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if int(pd.__version__.split(".")[0]) < 3:
            yield
        else:
            with pd.option_context("future.infer_string", False):
                yield


def run_anjana(name: str, supp_level: float) -> dict:
    from anjana.anonymity import k_anonymity_inner

    frame, keys, strata = _file(name)
    values = touched = generalised = 0
    wall = cpu = 0.0
    for part in _parts(frame, strata):
        with _object_text():
            data = part[keys].astype(str).reset_index(drop=True)
            hierarchies = {c: {0: np.asarray(sorted(data[c].unique())), 1: np.asarray(["*"] * data[c].nunique())}
                           for c in keys}
            w0, c0 = time.perf_counter(), time.process_time()
            out, removed, levels = k_anonymity_inner(data, [], keys, K, supp_level, hierarchies)
            wall, cpu = wall + time.perf_counter() - w0, cpu + time.process_time() - c0
        if len(out) == 0:
            raise RuntimeError("anjana found no k-anonymous release")
        starred = [c for c in keys if levels.get(c, 0) > 0]
        generalised += len(starred)
        values += removed * len(keys) + len(out) * len(starred)
        touched += removed + (len(out) if starred else 0)
    return {"seconds": wall, "cpu": cpu, "values": values, "records": touched, "starred_columns": generalised}


def _small(kind: str, seed: int, n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and radix of a small file: the survey's categories, or the tests' outlier files."""
    if kind == "outliers":
        rng = np.random.default_rng(seed)  # as tests/test_key_maskers.py::_outliers
        cells = rng.integers(0, 4, size=(6, 4))
        rows = [cells[i] for i in range(6) for _ in range(6)]
        for _ in range(8):
            row = cells[rng.integers(6)].copy()
            for c in rng.choice(4, size=rng.integers(1, 3), replace=False):
                row[c] = (row[c] + 1 + rng.integers(3)) % 4
            rows.append(row)
        return np.asarray(rows, dtype=np.int64), np.full(4, 5)
    frame = _generated(n, seed, SURVEY_KEYS)
    codes = np.stack([pd.factorize(frame[c], sort=True)[0] for c in frame], axis=1).astype(np.int64)
    return codes, np.asarray([frame[c].nunique() + 1 for c in frame], dtype=np.int64)


def run_optimality(kind: str, seed: int, k: int, time_limit: float, n: int = 50) -> dict:
    from privclust_plugins import _suppress

    codes, radix = _small(kind, seed, n)
    d = codes.shape[1]
    order = list(range(d))
    w0 = time.perf_counter()
    heuristic = _suppress.greedy(codes, k, order, radix)
    t_heuristic = time.perf_counter() - w0
    info: dict = {}
    w0 = time.perf_counter()
    exact, optimal = _suppress.exact(codes, k, np.ones(d), radix, time_limit=time_limit, info=info)
    t_exact = time.perf_counter() - w0
    kept_info: dict = {}
    kept, kept_optimal = _suppress.exact(codes, k, np.ones(d), radix, time_limit=time_limit, info=kept_info,
                                         min_kept=1)
    unsafe = int((_suppress.match_counts(codes, codes, radix) < k).sum())
    return {"n": len(codes), "d": d, "unsafe": unsafe, "heuristic": int((heuristic < 0).sum()),
            "exact": int((exact < 0).sum()), "optimal": optimal, "bound": info.get("dual_bound", float("nan")),
            "t_heuristic": t_heuristic, "t_exact": t_exact, "kept": int((kept < 0).sum()),
            "kept_optimal": kept_optimal, "kept_bound": kept_info.get("dual_bound", float("nan")),
            "blank_heuristic": int((heuristic < 0).all(axis=1).sum()),
            "blank_exact": int((exact < 0).all(axis=1).sum())}


def run_local_search(n: int, k: int, seeds) -> tuple[list[int], list[int], float, float]:
    """Per file: the greedy alone (one key at a time, largest gain first) and the heuristic as released
    (:func:`_suppress.greedy`: local search, moves of several keys, rotations and forced starts on small
    strata), and the CPU time of each, summed."""
    from privclust_plugins import _suppress

    before, after, plain_cpu, cpu = [], [], 0.0, 0.0
    for seed in seeds:
        codes, radix = _small("survey", seed, n)
        order = list(range(codes.shape[1]))
        c0 = time.process_time()
        plain = _suppress._greedy(codes, np.ones(len(codes), dtype=np.int64), k, order, radix, None, gain=True)
        c1 = time.process_time()
        better = _suppress.greedy(codes, k, order, radix)
        plain_cpu, cpu = plain_cpu + c1 - c0, cpu + time.process_time() - c1
        before.append(int((plain < 0).sum()))
        after.append(int((better < 0).sum()))
    return before, after, plain_cpu, cpu


def run_pram(n: int) -> dict:
    import privclust
    from privclust_plugins.keys import PRAM

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"code": rng.integers(1, 6, n)})
    matrix = {str(i): {str(j): (0.6 if i == j else 0.1) for j in range(1, 6)} for i in range(1, 6)}
    w0, c0 = time.perf_counter(), time.process_time()
    out = PRAM(matrix=matrix).mask(frame, privclust.PrivacyContext(seed=1))
    return {"seconds": time.perf_counter() - w0, "cpu": time.process_time() - c0,
            "changed": out.diagnostics["changed_values"]}


def main(quick: bool = False) -> str:
    sizes = ["survey", "1e4"] if quick else ["survey", "1e5", "1e6"]
    rows = []
    for name in sizes:
        ours = measure(run_ours, name)
        peers = [(f"anjana, supp_level {s}%", measure(run_anjana, name, s, timeout=600.0)) for s in (5, 100)]
        if ours.ok:
            o = ours.value
            rows.append([name, f"{o['n']:,}", f"{o['below']:,}", "privclust local-suppression", ours.time_text(),
                         f"{o['cpu']:.3g} s", ours.memory_text(), f"{o['values']:,}", f"{o['records']:,}", "1.0x"])
        else:
            rows.append([name, "-", "-", "privclust local-suppression", ours.time_text(), "-", "-", "-", "-", "-"])
        for label, m in peers:
            if m.ok and ours.ok:
                p = m.value
                rows.append([name, "", "", label + (f" ({p['starred_columns']} key column(s) -> *)"
                                                    if p["starred_columns"] else ""),
                             m.time_text(), f"{p['cpu']:.3g} s", m.memory_text(), f"{p['values']:,}",
                             f"{p['records']:,}", f"{p['values'] / max(ours.value['values'], 1):.1f}x"])
            else:
                rows.append([name, "", "", label, m.time_text(), "-", "-", "-", "-", "-"])
    text = (f"Local suppression to k = {K} (machine: {machine()})\n\n"
            + table(["file", "records", "below k before", "method", "time", "CPU", "peak memory",
                     "key values hidden", "records touched", "values hidden / privclust's"], rows))

    small = []
    cases = [("outliers", s, 3) for s in range(6)] + [("survey categories", s, k) for s in range(2 if quick else 3)
                                                      for k in (2, 3, 5)]
    for kind, seed, k in cases:
        m = measure(run_optimality, "outliers" if kind == "outliers" else "survey", seed, k, 10.0 if quick else 20.0)
        if not m.ok:
            small.append([kind, seed, k, m.time_text(), "-", "-", "-", "-", "-", "-"])
            continue
        r = m.value
        small.append([kind, seed, k, f"{r['n']} x {r['d']}", r["unsafe"], r["heuristic"],
                      f"{r['exact']}" + ("" if r["optimal"] else f" (not proven, bound {r['bound']:.0f})"),
                      f"{r['heuristic'] / max(r['exact'], 1):.2f}",
                      f"{r['kept']}" + ("" if r["kept_optimal"] else f" (not proven, bound {r['kept_bound']:.0f})"),
                      f"{r['heuristic'] / max(r['kept'], 1):.2f}", f"{(k - 1) * r['d']}",
                      f"{r['blank_exact']}", f"{r['t_heuristic']:.2g} s / {r['t_exact']:.2g} s"])
    text += ("\n\nHeuristic against the exact solver (fewest suppressions in the records below k, HiGHS via "
             "scipy.optimize.milp, time limit per file; 'no record blank': the same with every record keeping at "
             "least one key, min_kept = 1)\n\n"
             + table(["file", "seed", "k", "size", "below k", "heuristic", "exact", "heuristic / exact",
                      "exact, no record blank", "heuristic / that", "(k - 1) x keys", "records all missing (exact)",
                      "time (heur. / exact)"], small))

    gains = []
    for n in (50, 100, 250):
        for k in (2, 3, 5):
            m = measure(run_local_search, n, k, range(2 if quick else 5))
            if m.ok:
                before, after, plain_cpu, cpu = m.value
                r = np.asarray(after) / np.maximum(before, 1)
                gains.append([n, k, len(before), sum(before), sum(after), f"{r.min():.2f}", f"{np.median(r):.2f}",
                              f"{r.max():.2f}", f"{plain_cpu:.2g} s / {cpu:.2g} s"])
            else:
                gains.append([n, k, "-", "-", "-", "-", "-", "-", m.time_text()])
    text += ("\n\nThe heuristic as released against its greedy alone on small strata (local search and moves of "
             "several keys up to 250 records, rotations of the order and forced starts up to 100), on files with "
             "the survey's categories (6 keys), suppressions summed over the files\n\n"
             + table(["records", "k", "files", "greedy alone", "heuristic", "ratio min", "median", "max",
                      "CPU (greedy alone / heuristic, all files)"], gains))

    pram = measure(run_pram, 10**6 if quick else 10**7)
    n = 10**6 if quick else 10**7
    text += ("\n\npram, " + (f"{n:,} values: {pram.time_text()} wall clock, {pram.value['cpu']:.3g} s CPU, "
                             f"{pram.memory_text()} peak, {pram.value['changed']:,} values changed"
                             if pram.ok else pram.time_text()))
    text += ("\n\nTimes are the masker alone (per stratum, summed), in a fresh process; peak memory is that "
             "process's (interpreter and imports included). On a shared machine the CPU time is the fairer figure. "
             "anjana hides whole key columns (a flat hierarchy's level 1, '*') and removes whole records "
             "(counted as keys x records); privclust sets single values missing. Under sdcMicro's convention "
             "(a missing value matches any value) k - 1 records with every key missing make any file "
             "k-anonymous, so the optimum is at most (k - 1) x keys; the exact solver finds such solutions, "
             "the heuristic does not seek them.")
    save("keys", text)
    return text


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
