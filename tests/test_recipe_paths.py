"""Paths in a recipe file are relative to the recipe file's folder: a parameter declared ``param(role="path")``
(``recode``'s hierarchies) is resolved by the host against the folder of the recipe file it was read from; a recipe
given as a dict or text resolves against the working directory; reports keep the user's text."""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path

import attrs
import pandas as pd
import pytest

import privclust
from privclust import Recipe, RecipeError, param
from privclust.cli import main
from privclust.params import RecipePath, recipe_folder, resolve_path

RECIPE = """
name = "relative hierarchy"

[roles]
keys = ["job"]

[[steps]]
use = "recode"
columns = ["job"]
levels = { job = 1 }

[steps.hierarchies]
job = "hier/job.csv"
"""


def _people() -> pd.DataFrame:
    return pd.DataFrame({"job": ["nurse", "doctor", "baker", "cook", "nurse", "baker"] * 3, "x": range(18)})


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A recipe in tmp_path/sub/ with its hierarchy in tmp_path/sub/hier/, and the working directory elsewhere
    (tmp_path/elsewhere/, which has no hier/ folder)."""
    sub = tmp_path / "sub"
    (sub / "hier").mkdir(parents=True)
    (sub / "hier" / "job.csv").write_text("nurse;care\ndoctor;care\nbaker;food\ncook;food\n", encoding="utf-8")
    (sub / "recipe.toml").write_text(RECIPE, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return sub, elsewhere


def _run(recipe, frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=1)


def test_a_recipe_file_s_relative_hierarchy_is_read_from_its_folder_whatever_the_working_directory(layout):
    sub, _ = layout
    for given in (sub / "recipe.toml", str(sub / "recipe.toml"), "../sub/recipe.toml"):
        release = _run(Recipe.from_toml(given), _people())
        assert sorted(set(release.data["job"])) == ["care", "food"]
    recipe = Recipe.from_toml("../sub/recipe.toml")
    assert recipe.folder == str(sub)  # absolute: a later change of the working directory does not move it


def test_a_recipe_given_as_a_dict_or_text_resolves_against_the_working_directory(layout):
    sub, elsewhere = layout
    with pytest.raises(RecipeError, match="hier/job.csv"):  # elsewhere/ has no hier/ folder
        privclust.compile(RECIPE)
    (elsewhere / "hier").mkdir()
    (elsewhere / "hier" / "job.csv").write_text("nurse;c\ndoctor;c\nbaker;f\ncook;f\n", encoding="utf-8")
    assert sorted(set(_run(RECIPE, _people()).data["job"])) == ["c", "f"]
    # the recipe file still reads its own folder's hierarchy, not the working directory's
    assert sorted(set(_run(Recipe.from_toml(sub / "recipe.toml"), _people()).data["job"])) == ["care", "food"]


def test_the_cli_runs_a_recipe_from_another_folder_and_the_report_keeps_the_user_s_text(layout, capsys):
    sub, elsewhere = layout
    _people().to_csv(elsewhere / "in.csv", index=False)
    code = main(["run", "../sub/recipe.toml", "-i", "in.csv", "-o", "out.csv", "--report", "report.json",
                 "--seed", "1", "-q", "--keys", "job"])
    assert code == 0, capsys.readouterr().err
    assert sorted(set(pd.read_csv(elsewhere / "out.csv")["job"])) == ["care", "food"]
    report = (elsewhere / "report.json").read_text(encoding="utf-8")
    json.loads(report)
    assert str(sub) not in report and str(elsewhere) not in report  # no absolute path of this machine
    code = main(["check", "../sub/recipe.toml", "--input", "in.csv"])
    assert code == 0, capsys.readouterr().err


def test_a_missing_hierarchy_file_is_named_with_the_folder_it_was_looked_for_in(layout):
    sub, _ = layout
    (sub / "hier" / "job.csv").unlink()
    with pytest.raises(RecipeError, match=r"steps\[0\]\.hierarchies") as err:
        privclust.compile(Recipe.from_toml(sub / "recipe.toml"))
    assert str(sub / "hier" / "job.csv") in str(err.value)


@attrs.frozen(kw_only=True)
class _Reader:
    name = "reader"
    source: str = param(str, role="path", doc="a file")
    tables: dict = param(dict, default=None, role="path", doc="files by name")


def test_a_path_parameter_of_any_component_is_resolved_and_keeps_the_user_s_text(tmp_path):
    (tmp_path / "a.csv").write_text("1\n", encoding="utf-8")
    with recipe_folder(tmp_path):
        reader = _Reader(source="a.csv", tables={"t": "a.csv", "abs": str(tmp_path / "a.csv"), "rows": [1, 2]})
    assert isinstance(reader.source, RecipePath) and reader.source == str(tmp_path / "a.csv")
    assert reader.source.written == "a.csv" and Path(reader.source).read_text() == "1\n"
    assert reader.tables["t"].written == "a.csv"
    assert type(reader.tables["abs"]) is str and reader.tables["rows"] == [1, 2]  # absolute and non-paths as given
    back = pickle.loads(pickle.dumps(reader.source))
    assert back == reader.source and back.written == "a.csv"
    assert _Reader(source="a.csv").source == "a.csv"  # built outside a recipe file: the working directory's
    # the plain-data form (the report's parameters, a spec's dict and TOML) is the user's text, not this machine's
    assert privclust.ComponentSpec.of(reader).to_dict()["source"] == "a.csv"
    assert privclust.specs.thaw(reader.tables)["t"] == "a.csv"
    with recipe_folder(tmp_path):
        assert resolve_path("~/x.csv") == "~/x.csv" and resolve_path(3) == 3


def test_compare_runs_a_recipe_file_s_relative_hierarchy_from_another_folder(layout):
    sub, _ = layout
    table = privclust.compare({"file": sub / "recipe.toml"}, _people(), grid={"recode.max_suppressed": [0.0, 0.1]},
                              processes=1, progress=False)
    errors = table["error"].dropna().tolist() if "error" in table.columns else []
    assert len(table) == 2 and not errors, errors
