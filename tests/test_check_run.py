"""`privclust check --input` and `run` share one code path for their checks
(issue 9, item 3): check says OK exactly when run would start, and both give
the same error when it would not."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import privclust
from privclust.cli import main
from privclust.errors import DataError, RecipeError
from privclust.runner import preflight

DATA = pd.DataFrame({"a": [1.0, 3.0, 5.0], "b": [2.0, 4.0, 6.0], "cluster": [0, 1, 0]})

# The three recipes `check` said OK to while `run` refused them, and a partition column
# that `check` did not look at.
DRIFT = {
    "laplace-epsilon-inf": ('[[steps]]\nuse = "laplace"\nepsilon = inf\ncolumns = ["a"]\nbounds = { a = [0, 10] }\n',
                            RecipeError, "must be a finite number"),
    "mdav-fewer-records-than-k": ('[[steps]]\nuse = "mdav"\nk = 5\ncolumns = ["a", "b"]\noutput = "group"\n',
                                  DataError, "needs at least"),
    "label-column-clash": ('[[steps]]\nuse = "fcm"\nn_clusters = 2\ncolumns = ["a", "b"]\n',
                           DataError, "label column 'cluster' already exists"),
    "stratum-column-missing": ('[roles]\nstrata = "region"\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\n'
                               'columns = ["a"]\nbounds = { a = [0, 10] }\n', DataError,
                               "strata: column 'region' is not"),
    # check said OK to these too; run refused them after the steps had run (the evaluations) or as the step ran
    "evaluation-column-missing": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                                  'bounds = { a = [0, 10] }\n[[evaluate]]\nuse = "il1s"\ncolumns = ["zz"]\n',
                                  DataError, "evaluate[0] (il1s): column 'zz' is not in the data"),
    "evaluator-weight-missing": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                                 'bounds = { a = [0, 10] }\n[[evaluate]]\nuse = "il1s"\nweight = "nope"\n',
                                 DataError, "evaluate[0] (il1s): weight: column 'nope' is not in the data"),
    "evaluator-weight-not-positive": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                                      'bounds = { a = [0, 10] }\n[[evaluate]]\nuse = "il1s"\nweight = "cluster"\n',
                                      DataError, "weight column 'cluster' has 2 value(s) that are missing, infinite"),
    "bounds-table-misses-a-column": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a", "b"]\n'
                                     'bounds = { a = [0, 10] }\n', DataError,
                                     "steps[0] (laplace): laplace: no public bounds for column(s) b"),
    # check said OK to these; run refused them only after every step had run (audit16b): the columns and keys
    # an evaluator reads beyond the evaluation's columns (a clustering's truth and labels, key variables, the
    # columns of its own edit rules) are asked of it before any step runs
    "ari-truth-missing": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\nbounds = { a = [0, 10] }\n'
                          '[[evaluate]]\nuse = "ari"\n', DataError,
                          "evaluate[0] (ari): ari: the 'truth' column 'class' is not in"),
    "nmi-labels-missing": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\nbounds = { a = [0, 10] }\n'
                           '[[evaluate]]\nuse = "nmi"\ntruth = "cluster"\nlabels = "group"\n', DataError,
                           "evaluate[0] (nmi): nmi: the 'labels' column 'group' is not in"),
    "key-frequencies-without-keys": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                                     'bounds = { a = [0, 10] }\n[[evaluate]]\nuse = "key-frequencies"\n', DataError,
                                     "evaluate[0] (key-frequencies): key-frequencies: name the categorical key"),
    "key-frequencies-keys-not-names": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                                       'bounds = { a = [0, 10] }\n[[evaluate]]\nuse = "key-frequencies"\n'
                                       'keys = [1]\n', DataError,
                                       "key-frequencies: keys must be column names (strings); got [1]"),
    "edit-violations-rule-column-missing": ('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                                            'bounds = { a = [0, 10] }\n[[evaluate]]\nuse = "edit-violations"\n'
                                            'rules = ["zz = a"]\n', DataError,
                                            "edit-violations: rule 1 'zz = a' names column 'zz', which is not in"),
}


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "in.csv"
    DATA.to_csv(path, index=False)
    return path


def _stderr_error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("privclust: error:")]
    assert len(lines) == 1, lines
    return lines[0].replace("privclust: error: ", "")


@pytest.mark.parametrize("case", sorted(DRIFT))
def test_check_refuses_what_run_refuses_with_the_same_error(case, tmp_path, data_file, capsys):
    text, _, message = DRIFT[case]
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(text)
    assert main(["check", str(recipe), "--input", str(data_file)]) == 1
    from_check = _stderr_error(capsys)
    assert main(["run", str(recipe), "-i", str(data_file), "-o", str(tmp_path / "out.csv"), "-q"]) == 1
    from_run = _stderr_error(capsys)
    assert message in from_check
    assert from_check == from_run
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("case", sorted(DRIFT))
def test_preflight_and_run_raise_the_same_error(case):
    text, error, message = DRIFT[case]
    with pytest.raises(error, match=re.escape(message)) as from_run:
        privclust.run(text, DATA, seed=1)
    with pytest.raises(error) as from_check:
        preflight(privclust.compile(text), DATA)
    assert str(from_check.value) == str(from_run.value)


def test_check_says_ok_when_run_starts(tmp_path, data_file, capsys):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\nbounds = { a = [0, 10] }\n')
    assert main(["check", str(recipe), "--input", str(data_file)]) == 0
    assert "3 records" in capsys.readouterr().out
    assert main(["run", str(recipe), "-i", str(data_file), "-o", str(tmp_path / "out.csv"), "-q"]) == 0


def test_check_passes_a_bounds_table_and_an_evaluator_weight_that_are_right(tmp_path, data_file, capsys):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a", "b"]\n'
                      'bounds = { a = [0, 10], b = [0, 10], c = [0, 1] }\n[[evaluate]]\nuse = "il1s"\nweight = "b"\n')
    assert main(["check", str(recipe), "--input", str(data_file)]) == 0
    out = capsys.readouterr().out
    assert "each step's bounds table covers its columns" in out and "the evaluations" in out
    assert main(["run", str(recipe), "-i", str(data_file), "-o", str(tmp_path / "out.csv"), "-q"]) == 0


NESTED_WITHOUT_BOUNDS = ('[privacy]\nepsilon = 10\n\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                         'bounds = { a = [0, 10] }\n\n[[steps]]\nuse = "microaggregation"\ncolumns = ["a", "b"]\n'
                         'clusterer = { use = "idp-kmeans", n_clusters = 2, epsilon = 1.0 }\n')


@pytest.mark.parametrize("nested", [
    'clusterer = { use = "idp-kmeans", n_clusters = 2, epsilon = 1.0 }',
    'clusterer = { use = "dp-density", epsilon = 1.0 }',
])
def test_a_nested_component_is_refused_at_compile_time_as_it_is_as_a_step(tmp_path, capsys, nested):
    """idp-kmeans without public bounds, nested in microaggregation, passed
    `check` and was refused only when its step ran, after the laplace step
    before it had done its work; the same component as a step is refused
    when the recipe is compiled."""
    recipe = NESTED_WITHOUT_BOUNDS.replace('clusterer = { use = "idp-kmeans", n_clusters = 2, epsilon = 1.0 }', nested)
    name = re.search(r'use = "([^"]+)"', nested).group(1)
    with pytest.raises(RecipeError) as err:
        privclust.compile(privclust.Recipe.from_toml(recipe))
    (problem,) = err.value.problems
    assert problem.where == "steps[1].clusterer"
    assert f"{name}, the clusterer of microaggregation" in problem.message and "'bounds'" in problem.message
    (tmp_path / "r.toml").write_text(recipe, encoding="utf-8")
    DATA.to_csv(tmp_path / "in.csv", index=False)
    assert main(["check", str(tmp_path / "r.toml"), "--input", str(tmp_path / "in.csv")]) == 1
    assert "steps[1].clusterer" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv"),
                 "--report", str(tmp_path / "report.json"), "-q"]) == 1
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "report.json").exists()


def test_nested_components_a_step_sets_or_calls_through_release_are_not_checked_as_steps():
    """fuzzy-microaggregation sets its fcm's n_clusters (fcm alone as a step
    needs it), and a DP clusterer calls its noise mechanism through release
    (laplace alone as a step needs epsilon and bounds): neither is refused;
    fuzzy-microaggregation checks its clusterer as it will run it."""
    privclust.compile({"steps": [{"use": "fuzzy-microaggregation", "k": 3}]})
    privclust.compile({"steps": [{"use": "microaggregation", "clusterer": {
        "use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": {"a": [0, 1], "b": [0, 1]}}}]})
    with pytest.raises(RecipeError, match="fuzzy-microaggregation: its clusterer idp-kmeans, which it runs as a step: "
                                          "idp-kmeans needs public 'bounds'"):
        privclust.compile({"steps": [{"use": "fuzzy-microaggregation", "m2": 1.5,
                                      "clusterer": {"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0}}]})
    with pytest.raises(RecipeError, match=r"steps\[0\]\.clusterer: fcm, the clusterer of microaggregation"):
        privclust.compile({"steps": [{"use": "microaggregation", "clusterer": "fcm"}]})


def test_a_clustering_evaluation_of_a_label_column_a_step_releases_passes_check_and_runs(tmp_path, data_file,
                                                                                        capsys):
    """The labels column an evaluation of a clustering reads is released by a clusterer step: check (and run's
    checks before the first step) take it as there (audit16b)."""
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[[steps]]\nuse = "fcm"\nn_clusters = 2\ncolumns = ["a", "b"]\noutput = "group"\n'
                      '[[evaluate]]\nuse = "ari"\ntruth = "cluster"\nlabels = "group"\n'
                      '[[evaluate]]\nuse = "n-clusters"\ntruth = "group"\nlabels = "group"\n')
    assert main(["check", str(recipe), "--input", str(data_file)]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["run", str(recipe), "-i", str(data_file), "-o", str(tmp_path / "out.csv"), "-q", "--seed", "1"]) == 0
    assert (tmp_path / "out.csv").exists()


def test_an_evaluation_of_a_clustering_is_said_to_be_computed_on_its_truth_and_labels():
    """The report said ARI and the number of true classes were "computed on the columns a, b" (the steps'
    columns); they compare the truth and labels columns and read nothing else (audit16b)."""
    release = privclust.run({"steps": [{"use": "fcm", "n_clusters": 2, "columns": ["a", "b"], "output": "group"}],
                             "evaluate": [{"use": "ari", "truth": "cluster", "labels": "group"},
                                          {"use": "n-clusters", "truth": "cluster", "labels": "group"}]},
                            DATA, seed=1)
    assert set(release.evaluations["columns"]) == {"cluster, group"}
