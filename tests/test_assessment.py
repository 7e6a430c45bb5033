"""Issue 25, items 3-6: a recipe without steps is an assessment, risk before
and after in the report and the CLI, the verdict's key figures about the
whole released file, default columns ([roles] numeric, integer codes left
out), and the edit rules the original breaks."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import NothingProtectedWarning, datasets
from privclust.cli import main
from privclust.errors import DataError, RecipeError
from privclust.recipe import Recipe, Roles

KEYS = ["roof", "walls", "water", "electcon", "relat", "sex"]
SURVEY_ROLES = {"ids": "ori_hid", "weight": "sampling_weight", "strata": "urbrur", "keys": KEYS}


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"region": np.repeat([1, 2], n // 2), "sex": rng.integers(1, 3, n),
                         "status": rng.integers(1, 4, n), "income": rng.normal(100, 20, n).round(2),
                         "spend": rng.normal(50, 10, n).round(2)})


def _pandas_key_figures(frame: pd.DataFrame, columns: list[str], k: int) -> tuple[int, int, int]:
    """Sample uniques, records in cells below k and the number of cells, counted by pandas."""
    sizes = frame.groupby(columns, dropna=False)[columns[0]].transform("size")
    return int((sizes == 1).sum()), int((sizes < k).sum()), int(frame.groupby(columns, dropna=False).ngroups)


# -- item 3: an assessment, and risk before and after ---------------------------------------------------------

def test_a_recipe_without_steps_is_an_assessment_of_the_original():
    frame = _frame()
    recipe = {"roles": {"strata": "region", "keys": ["sex", "status"]},
              "evaluate": [{"use": "key-frequencies", "k": 3}, "dbrl"]}
    with pytest.warns(NothingProtectedWarning, match="ASSESSMENT ONLY"):
        release = privclust.run(recipe, frame, seed=1)
    assert release.data.equals(frame) and not release.outcomes
    assert release.verdict.startswith("ASSESSMENT ONLY, NOTHING PROTECTED: the recipe has no steps")
    assert "Verified" not in release.verdict and "differentially private (" not in release.verdict
    uniques, below, cells = _pandas_key_figures(frame, ["region", "sex", "status"], 3)
    assert f"leaves {uniques} of 60 records unique" in release.verdict or (uniques == 0 and below == 0)
    report = release.report()
    figures = {(r["evaluator"], r["metric"]): r for r in report["evaluations"]}
    assert figures[("key-frequencies", "sample_uniques")]["before"] == uniques
    assert figures[("dbrl", "dbrl")]["before"] == figures[("dbrl", "dbrl")]["value"] == 1.0
    html = release.to_html()
    assert "An assessment: the recipe has no steps" in html and "<th>before</th>" not in html


def test_check_says_a_recipe_without_steps_is_an_assessment(tmp_path, capsys):
    recipe = tmp_path / "a.toml"
    recipe.write_text('[roles]\nkeys = ["sex"]\nnumeric = ["income"]\n', encoding="utf-8")
    assert main(["check", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "  role numeric: income\n" in out
    assert "assessment: the recipe has no steps; run releases the original unchanged, protects nothing" in out


def test_a_recipe_with_nothing_to_do_or_measure_is_refused():
    with pytest.raises(RecipeError, match="evaluators or \\[roles\\] keys to assess it"):
        Recipe.from_dict({"roles": {"ids": "id"}})
    assert not Recipe.from_dict({"evaluate": ["dbrl"]}).steps
    assert Recipe.from_toml(Recipe.from_dict({"roles": {"keys": ["sex"]}}).to_toml()).roles.keys == ("sex",)


def test_risk_figures_are_measured_before_and_after_and_loss_figures_only_after():
    frame = _frame()
    recipe = {"roles": {"strata": "region", "keys": ["sex", "status"]},
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["income", "spend"]}],
              "evaluate": ["dbrl", "sse-sst", {"use": "key-frequencies", "k": 3}]}
    release = privclust.run(recipe, frame, seed=1)
    before = release.before.set_index("metric")["value"]
    assert before["dbrl"] == 1.0 and release.evaluation("dbrl") < 1.0  # every record links to itself before
    assert "sse_sst" not in before.index  # information loss has no "before"
    rows = {r["metric"]: r for r in json.loads(release.to_json())["evaluations"]}
    assert rows["dbrl"]["before"] == 1.0 and "before" not in rows["sse_sst"]
    html = release.to_html()
    assert "<th>before</th><th>after</th>" in html and "Risk before and after" in html


def test_a_figure_of_the_groups_a_step_formed_has_no_before():
    # group-sizes and transparency-risk describe the masker's partition: before protection there is none, and a
    # "before" equal to the after (both read the step's outcome) would be false
    recipe = {"steps": [{"use": "microaggregation", "k": 3, "columns": ["income", "spend"]}],
              "evaluate": ["group-sizes", "transparency-risk", "interval-disclosure"]}
    release = privclust.run(recipe, _frame(), seed=1)
    assert set(release.before["evaluator"]) == {"interval-disclosure"}
    rows = release.report()["evaluations"]
    assert all("before" not in r for r in rows if r["evaluator"] != "interval-disclosure")


def test_the_run_summary_prints_a_table_of_headline_figures(tmp_path, capsys):
    frame = _frame()
    data, recipe = tmp_path / "d.csv", tmp_path / "r.toml"
    frame.to_csv(data, index=False)
    recipe.write_text('[roles]\nstrata = "region"\nkeys = ["sex", "status"]\n[[steps]]\nuse = "microaggregation"\n'
                      'k = 3\ncolumns = ["income", "spend"]\n[[evaluate]]\nuse = "dbrl"\n[[evaluate]]\n'
                      'use = "sse-sst"\n', encoding="utf-8")
    assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o.csv"), "--seed", "1"]) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    head = next(i for i, line in enumerate(lines) if line.strip().startswith("figure"))
    assert lines[head].split() == ["figure", "before", "after"]
    assert lines[head + 1].split()[:2] == ["dbrl.dbrl", "1"]
    assert lines[head + 2].split()[:2] == ["sse-sst.sse_sst", "-"]


# -- item 4: the verdict's key figures -------------------------------------------------------------------------

def test_mdav_on_the_survey_file_opens_the_verdict_with_the_keys_that_leave_records_unique():
    survey = datasets.load("sdc_testdata")
    recipe = {"roles": SURVEY_ROLES,
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["expend", "income", "savings"]}]}
    release = privclust.run(recipe, survey, seed=1)
    uniques, below, cells = _pandas_key_figures(survey, ["urbrur", *KEYS], 3)
    assert (uniques, below, cells) == (157, 281, 412)
    verdict = release.verdict
    assert verdict.startswith("Keys: on the declared keys (roof, walls, water, electcon, relat, sex) within each "
                              f"stratum of urbrur, the released file leaves {uniques} of 4580 records unique")
    assert f"{below} of 4580 in key cells smaller than k = 3" in verdict
    assert f"expected re-identifications by an intruder who knows who is in the file: {cells}" in verdict
    assert verdict.index("Keys:") < verdict.index("Verified by the host")
    assert release.verification["keys"]["expected_reidentifications"] == cells
    assert any(e.mechanism == "key risk" and "157 of 4580" in e.statement for e in release.ledger)


def test_key_figures_with_suppressed_values_say_how_missing_values_are_counted():
    frame = pd.DataFrame({"sex": [1, 1, 1, 2, 2, np.nan], "status": [1, 1, 1, 2, 2, 2],
                          "income": [10.0, 11, 12, 13, 14, 15]})
    recipe = {"roles": {"keys": ["sex", "status"]},
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["income"]}]}
    release = privclust.run(recipe, frame, seed=1)
    keys = release.verification["keys"]
    assert (keys["sample_uniques"], keys["records_below_k"], keys["missing_values"]) == (1, 3, 1)
    assert keys["records_with_few_matches"] == 0  # (nan, 2) matches both (2, 2) records: 3 in all
    assert release.verdict.startswith("Keys: on the declared keys (sex, status), with a missing value matching any "
                                      "value (sdcMicro's convention), every released record matches at least 3 "
                                      "records (k = 3 holds); counting a missing value as a value of its own, the "
                                      "released file leaves 1 of 6 records unique")


# -- item 5: default columns -----------------------------------------------------------------------------------

def test_the_numeric_role_is_a_steps_default_columns():
    frame = _frame()
    release = privclust.run({"roles": {"numeric": ["income"], "strata": "region"},
                             "steps": [{"use": "microaggregation", "k": 3}]}, frame, seed=1)
    assert release.outcomes[0].columns == ("income",) and release.data["spend"].equals(frame["spend"])
    assert Roles.from_dict({"numeric": ["income"]}).to_dict() == {"numeric": ["income"]}
    with pytest.raises(RecipeError, match="roles.numeric.*'sex', which has the role 'keys'"):
        Roles(keys=["sex"], numeric=["sex", "income"])
    with pytest.raises(DataError, match="nope"):
        privclust.run({"roles": {"numeric": ["nope"]}, "steps": [{"use": "microaggregation", "k": 3}]}, frame)


def test_integer_codes_are_left_out_of_the_default_columns(tmp_path, capsys):
    frame = _frame().assign(hh_weight=lambda f: f["income"] / 10)
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3}]}, frame, seed=1)
    # region, sex, status: integers with 2 or 3 values in 60 records; income, spend, hh_weight: floats
    assert release.outcomes[0].columns == ("income", "spend", "hh_weight")
    assert release.data["status"].equals(frame["status"])
    counts = pd.DataFrame({"n": np.arange(30) % 10})  # 10 values in 30 records: a count, not a code
    assert privclust.run({"steps": [{"use": "microaggregation", "k": 3}]}, counts, seed=1).outcomes[0].columns == ("n",)
    data, recipe = tmp_path / "d.csv", tmp_path / "r.toml"
    frame.to_csv(data, index=False)
    recipe.write_text('[[steps]]\nuse = "microaggregation"\nk = 3\n', encoding="utf-8")
    assert main(["check", str(recipe), "-i", str(data)]) == 0
    out = capsys.readouterr().out
    assert ("changes income, spend, hh_weight (by default: the numeric columns without a role, except integer codes)"
            in out)
    assert "warning: step 0 'microaggregation' changes 'hh_weight' by default, and its name looks like a sampling " \
           "weight" in out
    assert "as integer codes (<= 20 distinct values, on average >= 20 records per value; name them in a step's " \
           "columns to change them): region, sex, status" in out
    assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o.csv"), "-q", "--seed", "1"]) == 0
    err = capsys.readouterr().err  # the warning even when quiet
    assert "'hh_weight' by default, and its name looks like a sampling weight" in err


def test_a_code_named_in_the_numeric_role_is_warned_about(tmp_path, capsys):
    data, recipe = tmp_path / "d.csv", tmp_path / "r.toml"
    _frame().to_csv(data, index=False)
    recipe.write_text('[roles]\nnumeric = ["income", "status"]\n[[steps]]\nuse = "microaggregation"\nk = 3\n',
                      encoding="utf-8")
    assert main(["check", str(recipe), "-i", str(data)]) == 0
    out = capsys.readouterr().out
    assert "changes income, status (by default: [roles] numeric)" in out
    assert "warning: step 0 'microaggregation' changes 'status' by default, and it looks like a code (integers, " \
           "3 distinct values)" in out


# -- item 6: the rules the original breaks ---------------------------------------------------------------------

def test_check_and_run_say_how_many_original_records_break_each_rule_and_by_how_much(tmp_path, capsys):
    frame = _frame().assign(spend=lambda f: (f["income"] / 2).round(2))
    frame.loc[[3, 7, 11], "spend"] = frame.loc[[3, 7, 11], "income"] + [1.5, 2.0, 10.0]
    data, recipe = tmp_path / "d.csv", tmp_path / "r.toml"
    frame.to_csv(data, index=False)
    recipe.write_text('[[constraints]]\nuse = "linear"\nrules = ["spend <= income", "income >= 0"]\n'
                      '[[steps]]\nuse = "microaggregation"\nk = 3\ncolumns = ["income", "spend"]\n', encoding="utf-8")
    broken = frame["spend"] - frame["income"]
    assert int((broken > 0).sum()) == 3
    assert main(["check", str(recipe), "-i", str(data)]) == 0
    out = capsys.readouterr().out
    assert "edit rules on the original data, before any step enforces them:" in out
    assert "'spend <= income': broken by 3 of 60 records judged (largest residual 10, total 13.5)" in out
    assert "'income >= 0': holds on all 60 records judged" in out
    assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o.csv"), "--seed", "1"]) == 0
    assert "'spend <= income': broken by 3 of 60 records judged (largest residual 10, total 13.5)" in \
        capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o2.csv"), "--seed", "1",
                     "--non-disclosive", "--report", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert "'spend <= income': broken by 3 of 60 records judged\n" in err and "largest residual" not in err


def test_an_evaluator_given_twice_keeps_its_own_before_and_its_own_comparison_columns():
    """Red-team audit: before values were matched by evaluator and metric, so key-frequencies with k = 3 and k = 20
    got each other's ("records_below_k before 200, after 0" for k = 3), and compare's columns <evaluator>.<metric>
    kept only the last entry."""
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame({"sex": rng.integers(0, 2, n), "region": rng.integers(0, 8, n), "x": rng.normal(size=n),
                          "y": rng.normal(size=n)})
    recipe = {"roles": {"keys": ["sex", "region"]},
              "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}, "columns": ["x", "y"]}],
              "evaluate": [{"use": "key-frequencies", "k": 3}, {"use": "key-frequencies", "k": 20},
                           {"use": "dbrl"}, {"use": "dbrl", "columns": ["x"]}]}
    release = privclust.run(recipe, frame, seed=1)
    rows = [r for r in release.report()["evaluations"] if r["metric"] == "records_below_k"]
    assert [r["before"] for r in rows] == [r["value"] for r in rows] == [0, 200]  # the keys are not masked
    table = privclust.compare(recipe, frame, seed=1, progress=False, processes=1)
    dbrl = [r["value"] for r in release.report()["evaluations"] if r["metric"] == "dbrl"]
    assert table["dbrl.dbrl"].iloc[0] == pytest.approx(dbrl[0])
    assert table["dbrl.dbrl#2"].iloc[0] == pytest.approx(dbrl[1]) and dbrl[0] != dbrl[1]
