"""The README's examples run as written.

Its Python blocks run in order in one namespace (as a docs page's do); the
shell blocks' commands that run privclust run through the command line's
``main`` in a temporary folder holding the files they name. Commands that
install packages (``python3 -m venv``, ``pip install``) or run this test
suite are not run: their truth is checked on what they rely on instead
(the console script, the extras, ``.ci/run``).
"""

from __future__ import annotations

import contextlib
import io
import shlex
import tomllib
import warnings
from pathlib import Path

import pytest
from _docblocks import ROOT, blocks

import privclust
from privclust.cli import main
from privclust.datasets import iris

README = "../README.md"  # relative to docs/, where _docblocks reads pages

#: The files the README's command lines name: two recipes whose masking step
#: has the id ``mask`` (the comparison example) and a numeric data file.
RECIPE = """name = "{name}"

[[steps]]
id = "mask"
use = "{use}"
k = 3

[[evaluate]]
use = "sse-sst"

[[evaluate]]
use = "dbrl"
"""
FILES = {
    "recipe.toml": RECIPE.format(name="fuzzy microaggregation", use="fuzzy-microaggregation"),
    "fuzzy.toml": RECIPE.format(name="fuzzy microaggregation", use="fuzzy-microaggregation"),
    "mdav.toml": RECIPE.format(name="MDAV", use="microaggregation"),
}


def _shell_commands() -> list[str]:
    """Every command of the README's bash blocks (lines split at ``&&``)."""
    out = []
    for block in blocks(README):
        if block.lang not in ("bash", "sh", "shell", "console"):
            continue
        for line in block.source.splitlines():
            out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


def _skip_reason(command: str) -> str | None:
    words = shlex.split(command)
    if words[:3] == ["python3", "-m", "venv"]:
        return "creates a virtual environment (the test runs in one)"
    if "pip" in Path(words[0]).name or (len(words) > 2 and words[1:3] == ["-m", "pip"]) or "pip" in words[:2]:
        return "installs packages"
    if "pytest" in words:
        return "runs this test suite"
    return None


def _expand(command: str) -> list[list[str]]:
    """``privclust plugins [--json]``: an optional argument in brackets gives
    two commands, without it and with it."""
    words = shlex.split(command)
    optional = [w for w in words if w.startswith("[") and w.endswith("]")]
    if not optional:
        return [words]
    plain = [w for w in words if w not in optional]
    return [plain, plain + [w[1:-1] for w in optional]]


def test_the_readme_has_the_examples_this_test_runs():
    commands = _shell_commands()
    assert commands[:3] == ["python3 -m venv .venv", ".venv/bin/pip install .", ".venv/bin/privclust demo"]
    assert any("compare mdav.toml fuzzy.toml" in c and '--sweep "mask.k=3,5,10"' in c for c in commands)
    assert sum(block.lang == "python" for block in blocks(README)) >= 2


def test_the_install_commands_rely_on_what_exists():
    """The two install lines stay true: the console script, the extras
    ``tests`` and ``docs``, and ``.ci/run`` that the README names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["privclust"] == "privclust.__main__:entry"
    assert {"tests", "docs"} <= set(project["optional-dependencies"])
    second = [c for c in _shell_commands() if "pip install -e" in c]
    assert second == ['.venv/bin/pip install -e ".[tests,docs]"']
    assert (ROOT / ".ci" / "run").is_file()


def test_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    ran = 0
    for block in blocks(README):
        if block.lang != "python":
            continue
        if "privclust.plots" in block.source:
            pytest.importorskip("matplotlib", reason="privclust.plots needs matplotlib (pip install privclust[plots])")
        if 'datasets.load("sdc_testdata")' in block.source and privclust.datasets.data_dir() is None:
            continue  # the survey example reads ../shared/datasets (or PRIVCLUST_DATA), absent here
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            exec(compile(block.source, block.where, "exec"), namespace)  # noqa: S102 - the README's own code
        ran += 1
    assert ran >= 2
    table = namespace["table"]
    assert set(table["recipe"]) == {"MDAV", "fuzzy"} and sorted(set(table["mask.k"])) == [3, 5, 10]
    assert table["error"].isna().all()


@pytest.mark.parametrize("command", _shell_commands())
def test_shell_command_runs(command, tmp_path, monkeypatch, capsys):
    reason = _skip_reason(command)
    if reason:
        pytest.skip(f"{command!r} is not run: {reason}")
    words = shlex.split(command)
    program = Path(words[0]).name
    assert program == "privclust", f"the README runs {words[0]!r}; this test knows how to run privclust only"
    if "--plot" in words:
        pytest.importorskip("matplotlib", reason="--plot needs matplotlib (pip install privclust[plots])")
    monkeypatch.chdir(tmp_path)
    iris().drop(columns="class").to_csv(tmp_path / "data.csv", index=False)
    if "survey-by-region/" in words:  # a partitioned Parquet dataset, as the README's command reads
        pytest.importorskip("pyarrow", reason="Parquet datasets need pyarrow (pip install privclust[parquet])")
        survey = iris().drop(columns="class").assign(region=["north", "south", "east"] * 50)
        survey.to_parquet(tmp_path / "survey-by-region", partition_cols=["region"])
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    for argv in _expand(command):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = main(argv[1:])
        out = capsys.readouterr()
        assert code == 0, f"{' '.join(argv)} exited with {code}: {out.err}"
        for word in argv:
            if word.endswith((".csv", ".html", ".png")) and word != "data.csv":
                assert (tmp_path / word).is_file(), f"{' '.join(argv)} did not write {word}"
