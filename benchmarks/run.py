"""Run the benchmarks: ``python benchmarks/run.py [--quick] [NAME ...]``.

Each ``bench_<name>.py`` module here has ``main(quick: bool) -> str`` that
measures privclust and its peer libraries in the same run and returns a
Markdown report (also saved in ``benchmarks/results/``). ``--quick`` uses
small sizes for a smoke run. Install the peers with
``pip install -e ".[bench]"``. Benchmarks are not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(available())})")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    names = args.names or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}")
    sys.path.insert(0, str(HERE))
    for name in names:
        start = time.perf_counter()
        print(f"\n## {name}\n", flush=True)
        module = importlib.import_module(f"bench_{name}")
        module.main(quick=args.quick)
        print(f"\n({name}: {time.perf_counter() - start:.0f} s in all)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
