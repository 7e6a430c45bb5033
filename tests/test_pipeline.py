"""The run pipeline (issue 27, item 1): one loop over steps, used in-process,
per stratum and on workers, and workers that receive the compiled recipe
instead of compiling the recipe again."""

from __future__ import annotations

import ast
import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import execute, handover, preflight

HOST = Path(__file__).resolve().parent.parent / "framework"


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "s": ["x", "y", "z"] * (n // 3)})


RECIPE = {"privacy": {"epsilon": 2.0}, "roles": {"strata": "s"},
          "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]},
                    {"use": "laplace", "epsilon": 1.0, "columns": ["a"], "bounds": {"a": [-4, 4]}}]}


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a worker compiled the recipe again")

    monkeypatch.setattr(privclust.Registry, "create", refuse)


def test_there_is_one_loop_over_the_steps():
    """Every loop that enters a step's context (``context.step(...)``) over
    the compiled steps: one, in execute.py."""
    loops = []
    for path in sorted(HOST.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.For) and ".steps" in ast.unparse(node.iter) \
                    and "context.step(" in ast.unparse(node):
                loops.append(f"{path.name}:{node.lineno}")
    assert len(loops) == 1 and loops[0].startswith("execute.py:"), loops


def test_forked_workers_run_the_compiled_recipe_without_compiling_it_again(monkeypatch):
    frame = _frame()
    compiled = privclust.compile(RECIPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = privclust.run(compiled, frame, seed=2, processes=1)
        _no_compiling(monkeypatch)  # forked workers inherit the patch: compiling there raises
        release = privclust.run(compiled, frame, seed=2, processes=2)
    pd.testing.assert_frame_equal(release.data, expected.data)
    assert [e.statement for e in release.ledger] == [e.statement for e in expected.ledger]


def test_workers_that_start_afresh_get_the_compiled_recipe_with_the_task(monkeypatch):
    """A Dask worker (or a platform without fork) gets the compiled recipe,
    without its registry, pickled with its task; it is given the registry
    rebuilt from the session plugins, never compiled again."""
    frame = _frame()
    compiled = privclust.compile(RECIPE)
    checked = preflight.preflight(compiled, frame)
    text, rows = checked.parts[0]
    with handover.handed(compiled.registry, "local", None, compiled) as given:
        assert given.spec is not None and given.compiled is not None and given.compiled.registry is None
        shipped = pickle.loads(pickle.dumps(given))
        _no_compiling(monkeypatch)
        done = execute._stratum_steps(shipped, frame.iloc[rows], rows, "s", text, np.random.SeedSequence(1),
                                      checked.step_columns)
    assert len(done.results) == 2 and done.entries
    assert {e.partition for e in done.entries if e.kind == "dp"} == {("s", text)}
    assert not set(handover._HANDED) & {given.token}  # nothing left behind
