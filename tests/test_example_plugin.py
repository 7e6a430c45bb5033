"""The example third-party plugin (docs/examples/privclust-example-plugin),
installed as a user would install it, exercised through the command line.

CI installs it (see .ci/run); elsewhere these tests skip, saying how to
install it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import privclust
import privclust.testing as pt

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "docs" / "examples" / "privclust-example-plugin"
DISTRIBUTION = "privclust-example-plugin"

try:
    VERSION = importlib.metadata.version(DISTRIBUTION)
except importlib.metadata.PackageNotFoundError:
    VERSION = None

pytestmark = pytest.mark.skipif(
    VERSION is None,
    reason=f"the example plugin is not installed; install it with: pip install {PACKAGE.relative_to(ROOT)} "
           "(from the repository's root, as .ci/run does)",
)

COMPONENTS = {("maskers", "rounding"), ("maskers", "top-bottom-coding"), ("evaluators", "uniqueness")}


def _privclust(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the installed ``privclust`` command (the one beside this Python)."""
    command = shutil.which("privclust", path=str(Path(sys.executable).parent)) or "privclust"
    env = {k: v for k, v in os.environ.items() if k != "PRIVCLUST_DISABLE_PLUGINS"}
    return subprocess.run([command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_plugins_lists_its_components_with_distribution_and_version(tmp_path):
    result = _privclust("plugins", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    mine = {(c["kind"], c["name"]): c for c in listing["components"] if c["distribution"] == DISTRIBUTION}
    assert set(mine) == COMPONENTS
    assert {c["plugin"] for c in mine.values()} == {"example-plugin"}
    assert {c["version"] for c in mine.values()} == {VERSION}
    plugin = [p for p in listing["plugins"] if p["name"] == "example-plugin"]
    assert plugin == [{"name": "example-plugin", "distribution": DISTRIBUTION, "version": VERSION, "builtin": False}]


def test_run_with_its_recipe_writes_the_output_and_the_report(tmp_path):
    source = pd.read_csv(PACKAGE / "examples" / "households.csv")
    result = _privclust("run", str(PACKAGE / "examples" / "recipe.toml"),
                        "--input", str(PACKAGE / "examples" / "households.csv"),
                        "--output", "protected.csv", "--report", "report.json", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    protected = pd.read_csv(tmp_path / "protected.csv")
    assert list(protected.columns) == list(source.columns)
    shown = ["household", "region", "members"]  # the rows in a random order: compared record by record
    assert protected.sort_values("household")[shown].reset_index(drop=True).equals(source[shown])
    assert (protected["age"] % 10 == 0).all() and (protected["income"] % 10000 == 0).all()
    assert (protected["rent"] % 250 == 0).all()

    report = json.loads((tmp_path / "report.json").read_text())
    steps = {s["id"]: s for s in report["steps"]}
    assert {s["distribution"] for s in steps.values()} == {DISTRIBUTION}
    assert steps["round"]["parameters"] == {"base": {"age": 10.0, "income": 10000.0, "rent": 250.0},
                                            "method": "nearest"}
    figures = {e["metric"]: e["value"] for e in report["evaluations"]}
    assert figures["unique_share_original"] == 1.0
    assert figures["unique_share"] < 0.5
    assert any(e["kind"] == "guarantee" and e["mechanism"] == "rounding" for e in report["ledger"])


def test_check_validates_its_recipe(tmp_path):
    result = _privclust("check", str(PACKAGE / "examples" / "recipe.toml"),
                        "--input", str(PACKAGE / "examples" / "households.csv"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "masker top-bottom-coding on income, rent" in result.stdout


def test_a_bad_parameter_is_one_clean_line(tmp_path):
    (tmp_path / "bad.toml").write_text('[[steps]]\nuse = "rounding"\nbase = 0\n')
    result = _privclust("run", "bad.toml", "--input", str(PACKAGE / "examples" / "households.csv"),
                        "--output", "out.csv", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "privclust: error: recipe bad.toml: steps[0].base: The 'base' parameter of rounding must be a number > 0 "
        "or a table {column = number > 0}; got 0.0."
    )
    assert not (tmp_path / "out.csv").exists()


def test_blocking_the_plugin_by_environment(tmp_path):
    command = shutil.which("privclust", path=str(Path(sys.executable).parent)) or "privclust"
    result = subprocess.run([command, "plugins", "--json"], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PRIVCLUST_DISABLE_PLUGINS": "example-plugin:rounding"}, timeout=300)
    names = {c["name"] for c in json.loads(result.stdout)["components"]}
    assert "rounding" not in names and "top-bottom-coding" in names


@pytest.mark.parametrize(("kind", "name", "params"), [
    ("maskers", "rounding", {"base": 2.5}),
    ("maskers", "rounding", {"base": {"a": 1, "b": 0.5, "c": 2}, "method": "random"}),
    ("maskers", "top-bottom-coding", {"top": {"a": 7.0}, "bottom": {"c": 2.0}, "replacement": "mean"}),
    ("evaluators", "uniqueness", {"k": 4}),
])
def test_the_conformance_kit_passes_on_its_components(kind, name, params):
    registry = privclust.Registry(use_env=False)
    info = registry.info(kind, name)
    assert info.distribution == DISTRIBUTION
    pt.check_component(registry.create(kind, name, **params), registry=registry)


@pytest.mark.slow
def test_the_plugins_own_test_suite_passes(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(PACKAGE / "pyproject.toml"),
         "--rootdir", str(PACKAGE), str(PACKAGE / "tests")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PRIVCLUST_DISABLE_PLUGINS"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
