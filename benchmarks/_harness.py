"""Shared benchmark harness: isolated timing and peak memory, ratio tables.

Each measurement runs the function in a fresh process (``spawn``), so peak
memory (``ru_maxrss``, which includes the interpreter and its imports) belongs
to that call alone and a peer that runs out of memory cannot take the
benchmark down. Results print as Markdown tables, ready for ``docs/``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Measurement:
    """Wall-clock seconds and peak resident memory (MB) of one call, or why it failed."""

    seconds: float | None
    peak_mb: float | None
    value: Any = None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def time_text(self) -> str:
        return f"{self.seconds:.3g} s" if self.ok else self.failure or "failed"

    def memory_text(self) -> str:
        return f"{self.peak_mb:,.0f} MB" if self.ok and self.peak_mb is not None else "-"


def _child(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict, mem_limit_gb: float | None) -> None:
    try:
        if mem_limit_gb:
            limit = int(mem_limit_gb * 1024**3)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        start = time.perf_counter()
        value = fn(*args, **kwargs)
        seconds = time.perf_counter() - start
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        conn.send(("ok", seconds, peak_kb / 1024.0, value))
    except MemoryError:
        conn.send(("error", None, None, "out of memory"))
    except BaseException as err:  # report, never hang the parent
        conn.send(("error", None, None, f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"))
    finally:
        conn.close()


def measure(fn: Callable[..., Any], *args: Any, timeout: float = 1800.0, mem_limit_gb: float | None = None,
            **kwargs: Any) -> Measurement:
    """Run ``fn(*args, **kwargs)`` in a fresh process; ``fn`` must be a
    module-level function. Its return value must be picklable and small."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args, kwargs, mem_limit_gb))
    proc.start()
    child.close()
    if not parent.poll(timeout):
        proc.kill()
        proc.join()
        return Measurement(None, None, failure=f"timeout > {timeout:g} s")
    try:
        status, seconds, peak, value = parent.recv()
    except EOFError:
        proc.join()
        code = proc.exitcode
        return Measurement(None, None, failure="killed (out of memory)" if code and code < 0 else f"exit {code}")
    proc.join()
    if status != "ok":
        short = str(value).splitlines()[0] if value else "failed"
        return Measurement(None, None, failure=short)
    return Measurement(seconds, peak, value)


def ratio(peer: Measurement, ours: Measurement, attr: str = "seconds") -> str:
    """How many times ``ours`` beats ``peer`` (peer / ours), as text."""
    a, b = getattr(peer, attr), getattr(ours, attr)
    if not (peer.ok and ours.ok) or not a or not b:
        return "-"
    return f"{a / b:.1f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table."""
    text = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) if text else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    out = [line(list(headers)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in text]
    return "\n".join(out)


def machine() -> str:
    """One line describing the machine the figures were measured on."""
    import platform

    import numpy as np

    cpus = os.cpu_count()
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    except (ValueError, OSError):
        mem_gb = float("nan")
    return (f"{platform.machine()}, {cpus} cores, {mem_gb:.0f} GiB, Python {platform.python_version()}, "
            f"numpy {np.__version__}")


def save(name: str, text: str) -> Path:
    """Write a result file to ``benchmarks/results/<name>.md`` (and echo it)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(text + "\n", encoding="utf-8")
    print(text)
    sys.stdout.flush()
    return path
