"""The figure of docs/density-peaks.md: ARI against epsilon and against n for
every method, from the measured results of ``bench_dp_density.py``
(``benchmarks/results/dp_density.json``). Run ``python benchmarks/plot_dp_density.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "docs" / "dp-density-ari.png"
METHODS = ["dp-density", "dp-density (k)", "diffprivlib KMeans", "dp-dpc-grid", "DBSCAN best"]
STYLE = {"dp-density": "o-", "dp-density (k)": "s--", "diffprivlib KMeans": "^-", "dp-dpc-grid": "v-",
         "DBSCAN best": "k:"}


def main(path: Path = HERE / "results" / "dp_density.json") -> Path:
    results = json.loads(path.read_text(encoding="utf-8"))
    n_main = results["n_main"]
    cells = [c for c in results["cells"] if c.get("rows")]
    sets = ["aggregation", "spiral", "r15", "jain"]
    fig, axes = plt.subplots(2, len(sets), figsize=(4 * len(sets), 7), sharey=True)
    for col, name in enumerate(sets):
        ax = axes[0][col]
        for method in METHODS:
            cell = next((c for c in cells if c["method"] == method and c["dataset"] == name and c["n"] == n_main), None)
            if cell is None:
                continue
            if method == "DBSCAN best":
                ax.axhline(cell["rows"][0]["ari"], color="k", ls=":", label=method + " (non-private, tuned)")
                continue
            rows = sorted(cell["rows"], key=lambda r: r["eps"])
            ax.plot([r["eps"] for r in rows], [r["ari"] for r in rows], STYLE[method], label=method)
        ax.set_xscale("log")
        ax.set_title(f"{name}, n = {n_main:,}")
        ax.set_xlabel("epsilon")
        ax = axes[1][col]
        for method in METHODS:
            pts = []
            for c in cells:
                if c["method"] != method or c["dataset"] != name:
                    continue
                row = c["rows"][0] if method == "DBSCAN best" else next((r for r in c["rows"] if r["eps"] == 1.0), None)
                if row is not None:
                    pts.append((c["n"], row["ari"]))
            if pts:
                pts.sort()
                label = method + (" (non-private, tuned)" if method == "DBSCAN best" else "")
                ax.plot([p[0] for p in pts], [p[1] for p in pts], STYLE[method], label=label)
        ax.set_xscale("log")
        ax.set_title(f"{name}, epsilon = 1")
        ax.set_xlabel("n")
    axes[0][0].set_ylabel("ARI")
    axes[1][0].set_ylabel("ARI")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"ARI against epsilon and n (measured {results['date']}, one seed per point)")
    fig.tight_layout()
    fig.savefig(OUT, dpi=80)
    return OUT


if __name__ == "__main__":
    print(main(Path(sys.argv[1])) if len(sys.argv) > 1 else main())
