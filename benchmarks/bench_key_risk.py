"""Key-variable risk measures: SUDA2 and l-diversity, with pycanon in the same run.

* SUDA2 (``privclust_plugins.key_risk.suda2_scores``, every MSU size) on
  sdcMicro's survey file (4,580 records, keys urbrur, roof, walls, water,
  electcon, relat, sex) and on 10^5 generated records x 7 keys with the
  survey's category counts (each key drawn independently from the survey's
  marginal frequencies), and on the same with 1% of the key values missing.
  Targets of issue 25: under 5 s and under 60 s.
* l-diversity (the ``l-diversity`` evaluator: distinct and entropy l) of
  ``hhcivil`` within the survey's key cells, and of a 4-category sensitive
  column on the generated file, against pycanon's ``l_diversity`` plus
  ``entropy_l_diversity`` (the two figures the evaluator returns in one call).

Each figure is one call in a fresh process: the computation's own wall clock, the whole call's, peak memory.
Run: ``python benchmarks/run.py key_risk [--quick]`` (``--quick``: 10^4 generated records). pycanon pins old numpy,
pandas and scipy releases: install it beside them with ``pip install --no-deps pycanon`` (it needs nothing else here).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _harness import machine, measure, save, table  # noqa: E402

KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


def _survey() -> pd.DataFrame:
    import privclust.datasets

    return privclust.datasets.load("sdc_testdata")


def _generated(n: int) -> pd.DataFrame:
    survey = _survey()
    rng = np.random.default_rng(1)
    out = {}
    for key in KEYS:
        freq = survey[key].value_counts(normalize=True)
        out[key] = rng.choice(freq.index.to_numpy(), size=n, p=freq.to_numpy())
    out["sensitive"] = rng.integers(0, 4, n)
    return pd.DataFrame(out)


def _frame(which: str, n: int) -> tuple[pd.DataFrame, str]:
    if which == "survey":
        return _survey(), "hhcivil"
    frame = _generated(n)
    if which == "generated, 1% missing":  # key values set missing at random (a missing value matches any category)
        holes = np.random.default_rng(2).random((n, len(KEYS))) < 0.01
        frame[KEYS] = frame[KEYS].astype(float).mask(holes)
    return frame, "sensitive"


def suda2_ours(which: str, n: int) -> tuple[int, float, float]:
    from privclust_plugins.key_risk import suda2_scores

    frame, _ = _frame(which, n)
    start = time.perf_counter()
    scores = suda2_scores(frame, KEYS)
    return int((scores["score"] > 0).sum()), float(scores["dis_score"].max()), time.perf_counter() - start


def ldiv_ours(which: str, n: int) -> tuple[float, float, float]:
    import privclust
    from privclust_plugins.key_risk import LDiversity

    frame, sensitive = _frame(which, n)
    inputs = privclust.EvaluationInputs(original=frame, protected=frame, columns=(),
                                        labels=pd.DataFrame(index=frame.index))
    start = time.perf_counter()
    out = LDiversity(keys=tuple(KEYS), sensitive=sensitive).evaluate(inputs)
    return out["min_distinct_l"], float(np.floor(out["min_entropy_l"] + 1e-9)), time.perf_counter() - start


def ldiv_pycanon(which: str, n: int) -> tuple[float, float, float]:
    from pycanon import anonymity

    frame, sensitive = _frame(which, n)
    start = time.perf_counter()
    return (float(anonymity.l_diversity(frame, KEYS, [sensitive])),
            float(anonymity.entropy_l_diversity(frame, KEYS, [sensitive])), time.perf_counter() - start)


def _compute(m) -> str:
    """The time of the computation alone (the call's time less the imports and the loading of the file)."""
    return f"{m.value[-1]:.3g} s" if m.ok else m.time_text()


def _ratio(peer, ours) -> str:
    return f"{peer.value[-1] / ours.value[-1]:.1f}x" if peer.ok and ours.ok and ours.value[-1] > 0 else "-"


def main(quick: bool = False) -> str:
    n = 10**4 if quick else 10**5
    rows = []
    for which, size, target in (("survey", 4580, 5.0), ("generated", n, 60.0), ("generated, 1% missing", n, 60.0)):
        ours = measure(suda2_ours, which, n)
        found = f"{ours.value[0]:,} records with an MSU, max DIS-SUDA {ours.value[1]:.3f}" if ours.ok else "-"
        rows.append(["SUDA2", f"{which} ({size:,} x 7)", _compute(ours), ours.time_text(), ours.memory_text(),
                     "-", "-", f"target {target:g} s", found])
    for which, size in (("survey", 4580), ("generated", n)):
        ours, peer = measure(ldiv_ours, which, n), measure(ldiv_pycanon, which, n)
        same = "same l" if ours.ok and peer.ok and ours.value[:2] == peer.value[:2] else "DIFFERENT" \
            if ours.ok and peer.ok else "-"
        found = f"distinct l {ours.value[0]:g}, entropy l (floor) {ours.value[1]:g}; {same}" if ours.ok else "-"
        rows.append(["l-diversity", f"{which} ({size:,} x 7)", _compute(ours), ours.time_text(), ours.memory_text(),
                     _compute(peer), peer.memory_text(), _ratio(peer, ours), found])
    text = (f"Key-variable risk measures (machine: {machine()})\n\n"
            + table(["measure", "file", "privclust", "whole call", "memory", "pycanon", "memory",
                     "pycanon / privclust", "result"], rows)
            + "\n\nSUDA2: every MSU size (7 keys, 127 key subsets), SUDA and DIS-SUDA scores of every record. "
              "l-diversity: distinct and entropy l of the sensitive column within the 7-key cells (privclust's "
              "evaluator returns both in one call; pycanon's time is l_diversity + entropy_l_diversity). One call "
              "in a fresh process each: the time of the computation alone (privclust, pycanon; the ratio compares "
              "them), and of the whole call with the imports and the loading of the file; memory is the process's "
              "peak (interpreter and imports included).")
    save("key_risk", text)
    return text


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
