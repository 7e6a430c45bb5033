"""Every notebook in notebooks/ executes without an error.

Each notebook runs in its own process (``python -m`` on this module's
runner), with nbclient, kernel ``python3``, from the ``notebooks/`` folder,
with a per-cell timeout. The notebooks selected for a session are started
together in a few worker processes (``PRIVCLUST_NOTEBOOK_WORKERS``, default:
two, or one on a single core), then one test per notebook reports its own
result, so a failure names its notebook and cell. Nothing is written back to
the notebooks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import DATASETS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))

#: Seconds a single cell may run.
CELL_TIMEOUT = int(os.environ.get("PRIVCLUST_NOTEBOOK_CELL_TIMEOUT", "600"))
#: Seconds a whole notebook may run (a hung kernel must not hang CI).
NOTEBOOK_TIMEOUT = int(os.environ.get("PRIVCLUST_NOTEBOOK_TIMEOUT", "1200"))
WORKERS = int(os.environ.get("PRIVCLUST_NOTEBOOK_WORKERS", "0")) or max(1, min(2, os.cpu_count() or 1))

_RUNNER = """
import sys
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

path, folder, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
notebook = nbformat.read(path, as_version=4)
client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=False,
                        resources={"metadata": {"path": folder}})
try:
    client.execute()
except CellExecutionError as err:
    cell = next((i for i, c in enumerate(notebook.cells)
                 if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.get("outputs", []))), "?")
    print(f"cell {cell}: {err}", file=sys.stderr)
    sys.exit(1)
"""


def _execute(path: Path) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PRIVCLUST_DISABLE_PLUGINS"}
    env.setdefault("MPLBACKEND", "Agg")
    start = time.perf_counter()
    try:
        result = subprocess.run([sys.executable, "-c", _RUNNER, str(path), str(NOTEBOOKS), str(CELL_TIMEOUT)],
                                cwd=NOTEBOOKS, env=env, capture_output=True, text=True, timeout=NOTEBOOK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return 1, f"{path.name} did not finish within {NOTEBOOK_TIMEOUT} s", time.perf_counter() - start
    return result.returncode, result.stderr, time.perf_counter() - start


@pytest.fixture(scope="session")
def executed(request) -> dict[str, tuple[int, str, float]]:
    """Execute, in parallel, every notebook this session selected."""
    if not DATASETS.is_dir():
        pytest.skip(f"the notebooks read the shared data sets, and {DATASETS} is absent")
    selected = sorted({item.callspec.params["notebook"] for item in request.session.items
                       if item.module is not None and item.module.__name__ == __name__
                       and hasattr(item, "callspec") and "notebook" in item.callspec.params})
    paths = [NOTEBOOKS / name for name in selected]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(selected, pool.map(_execute, paths), strict=True))


def test_there_are_notebooks():
    names = [p.name for p in PATHS]
    assert "01-quickstart.ipynb" in names and "02-write-a-plugin.ipynb" in names


def test_notebooks_are_committed_executed_and_small():
    import nbformat

    for path in PATHS:
        notebook = nbformat.read(path, as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert code and all(c.get("execution_count") for c in code), f"{path.name}: commit it executed"
        assert not any(o.get("output_type") == "error" for c in code for o in c.get("outputs", [])), (
            f"{path.name} was committed with an error in an output")
        assert path.stat().st_size < 1_500_000, f"{path.name} is {path.stat().st_size} bytes; keep it under ~1 MB"


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("notebook", [p.name for p in PATHS])
def test_notebook_executes(notebook, executed):
    returncode, stderr, seconds = executed[notebook]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", stderr)  # the kernel's coloured traceback
    assert returncode == 0, f"{notebook} failed after {seconds:.0f} s:\n{plain[-6000:]}"
