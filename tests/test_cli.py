"""The privclust command: run, check, plugins, demo; clean errors; atomic outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privclust.cli import main

RECIPE = """
name = "cli test"
[privacy]
epsilon = 1.0

[[steps]]
use = "laplace"
columns = ["a", "b"]
epsilon = 1.0
bounds = { a = [0, 10], b = [0, 10] }
"""


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"id": range(30), "a": rng.uniform(0, 10, 30), "b": rng.uniform(0, 10, 30)})
    data.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "recipe.toml").write_text(RECIPE)
    return tmp_path, data


def listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_run_writes_output_and_report(files, capsys):
    folder, data = files
    code = main(["run", str(folder / "recipe.toml"), "--input", str(folder / "in.csv"), "--output",
                 str(folder / "out.csv"), "--report", str(folder / "report.json"), "--seed", "3"])
    assert code == 0
    out = pd.read_csv(folder / "out.csv")
    assert list(out.columns) == ["id", "a", "b"] and out["id"].equals(data["id"])
    report = json.loads((folder / "report.json").read_text())
    assert report["seeded"] is True and report["privacy"]["spent"]["epsilon"] == 1.0
    err = capsys.readouterr().err
    assert "[1/1] laplace" in err and "ε-differentially private (ε = 1, δ = 0)" in err and "privacy spent" not in err
    assert listing(folder) == {"in.csv", "recipe.toml", "out.csv", "report.json"}


def test_run_is_reproducible_and_never_writes_the_seed(files):
    folder, _ = files
    for name in ("x.csv", "y.csv"):
        main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / name),
              "--seed", "987654321", "--report", str(folder / f"{name}.json"), "-q"])
    assert (folder / "x.csv").read_text() == (folder / "y.csv").read_text()
    assert "987654321" not in (folder / "x.csv.json").read_text()


def test_parquet_in_and_out_and_html_report(files):
    folder, data = files
    data.to_parquet(folder / "in.parquet")
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.parquet"), "-o",
                 str(folder / "out.parquet"), "--report", str(folder / "r.html"), "-q"])
    assert code == 0
    assert pd.read_parquet(folder / "out.parquet").shape == data.shape
    assert (folder / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads((folder / "r.json").read_text())["non_disclosive"] is False


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ('[[steps]]\nuse = "laplace\n', "is not valid TOML"),
        ('[[steps]]\nuse = "laplase"\nepsilon = 1.0\nbounds = "data"\n', "did you mean 'laplace'"),
        (RECIPE.replace("epsilon = 1.0\nbounds", "epsilon = 2.0\nbounds"), "ask for epsilon = 2"),
        (RECIPE.replace('["a", "b"]', '["a", "c"]'), "column 'c' is not in the data"),
    ],
)
def test_user_mistakes_print_one_line_and_write_nothing(files, capsys, recipe, message):
    folder, _ = files
    (folder / "bad.toml").write_text(recipe)
    before = listing(folder)
    code = main(["run", str(folder / "bad.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "out.csv"),
                 "--report", str(folder / "r.json"), "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("privclust: error: ") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err
    assert listing(folder) == before


def test_a_failed_report_write_leaves_no_output(files, monkeypatch):
    folder, _ = files
    import privclust.report

    def boom(self, **kwargs):
        raise privclust.PrivclustError("report failed")

    monkeypatch.setattr(privclust.report.Release, "report", boom)
    before = listing(folder)
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "out.csv"),
                 "--report", str(folder / "r.json"), "-q"])
    assert code == 1
    assert listing(folder) == before


def test_missing_input_and_unknown_suffix(files, capsys):
    folder, _ = files
    assert main(["run", str(folder / "recipe.toml"), "-i", str(folder / "nope.csv"), "-o", str(folder / "o.csv")]) == 1
    assert "no input file" in capsys.readouterr().err
    assert main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "o.xlsx")]) == 1
    assert "unknown file type" in capsys.readouterr().err


def test_check_validates_without_running(files, capsys):
    folder, _ = files
    assert main(["check", str(folder / "recipe.toml"), "--input", str(folder / "in.csv")]) == 0
    out = capsys.readouterr().out
    assert "OK against the installed plugins" in out and "noise mechanism laplace on a, b" in out
    assert "30 records" in out
    assert listing(folder) == {"in.csv", "recipe.toml"}
    pd.DataFrame({"a": [1.0, np.nan]}).to_csv(folder / "nan.csv", index=False)
    assert main(["check", str(folder / "recipe.toml"), "--input", str(folder / "nan.csv")]) == 1
    assert "column 'b' is not in the data" in capsys.readouterr().err


def test_plugins_table_and_json(capsys):
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["kind", "name", "plugin", "distribution", "version"]
    assert any(line.split()[:3] == ["noise_mechanisms", "laplace", "noise"] for line in lines)
    assert main(["plugins", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    laplace = next(c for c in payload["components"] if c["name"] == "laplace")
    assert laplace["distribution"] == "privclust" and laplace["version"]
    assert laplace["doc"].startswith("The Laplace mechanism")
    assert [p["name"] for p in laplace["parameters"]] == ["epsilon", "bounds"]
    assert laplace["parameters"][0]["doc"] == "privacy budget of the step (as a step only)"
    assert any(p["name"] == "noise" for p in payload["plugins"])


def test_demo_runs_on_built_in_data(capsys, tmp_path):
    assert main(["demo", "--seed", "1", "--output", str(tmp_path / "demo.csv")]) == 0
    out = capsys.readouterr().out
    assert "Original data (Torra, Table 1)" in out and "Protected data" in out and "Ledger" in out
    assert pd.read_csv(tmp_path / "demo.csv").shape[0] == 12


def test_the_installed_command_and_usage_errors(files):
    folder, _ = files
    exe = Path(sys.executable).with_name("privclust")
    result = subprocess.run([str(exe), "run", str(folder / "recipe.toml")], capture_output=True, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 2 and "--input" in result.stderr
    result = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("privclust ")


def test_outputs_get_the_usual_permissions(files):
    folder, _ = files
    old = os.umask(0o022)
    try:
        main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "out.csv"), "-q"])
    finally:
        os.umask(old)
    assert (folder / "out.csv").stat().st_mode & 0o777 == 0o644


def test_check_names_the_recipe_file(files, capsys):
    folder, _ = files
    (folder / "bad.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = -1\nbounds = "data"\n')
    assert main(["check", str(folder / "bad.toml")]) == 1
    err = capsys.readouterr().err
    assert f"recipe {folder / 'bad.toml'}: steps[0].epsilon: The 'epsilon' parameter of laplace must be > 0" in err


def test_a_missing_output_folder_is_refused_before_running(files, capsys, monkeypatch):
    folder, _ = files
    import privclust.runner

    monkeypatch.setattr(privclust.runner, "run", lambda *a, **k: pytest.fail("ran before checking the folder"))
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o",
                 str(folder / "nowhere" / "out.csv"), "-q"])
    assert code == 1 and "the folder" in capsys.readouterr().err
