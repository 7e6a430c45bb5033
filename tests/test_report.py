"""The release report: JSON, standalone HTML, the non-disclosive mode, the notebook view."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Registry, hookimpl
from privclust.cli import main


@attrs.frozen(kw_only=True)
class Extremes:
    """An evaluator with one aggregate figure and one taken from a single record."""

    name: ClassVar[str] = "extremes"
    disclosive_metrics: ClassVar[tuple[str, ...]] = ("largest_original",)

    def evaluate(self, inputs):
        cols = list(inputs.columns)
        return {"mean_change": float(np.mean(np.abs(inputs.protected[cols].to_numpy()
                                                    - inputs.original[cols].to_numpy()))),
                "largest_original": float(inputs.original[cols].to_numpy().max())}


class Plugin:
    @hookimpl
    def privclust_register_evaluators(self, register):
        register(Extremes)


@pytest.fixture
def release():
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.uniform(0, 10, 50), "b": rng.uniform(0, 10, 50)})
    data.loc[7, "a"] = 12.3456789
    recipe = {"name": "report test", "description": "noise with bounds from the data",
              "privacy": {"allow_leaks": ["bounds"]}, "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}],
              "evaluate": ["extremes"]}
    with pytest.warns(privclust.PrivacyLeakWarning):
        return privclust.run(recipe, data, seed=1, registry=Registry(plugins=[Plugin()], use_env=False))


def test_full_report_has_every_part(release):
    report = release.report()
    assert report["non_disclosive"] is False and "left_out" not in report
    assert {e["metric"] for e in report["evaluations"]} == {"mean_change", "largest_original"}
    leak = next(e for e in report["ledger"] if e["kind"] == "leak")
    assert "details" in leak
    assert "12.3456789" in json.dumps(release.report())  # the original maximum is in the full report


def test_non_disclosive_report_leaves_out_individual_values(release):
    report = release.report(non_disclosive=True)
    text = json.dumps(report)
    assert "12.3456789" not in text
    # mean_change reads the original values of a and b, which a DP step (laplace) released: withheld too, though
    # the leak voids the release's guarantee (rt21 F4)
    assert report["evaluations"] == []
    assert all("details" not in e for e in report["ledger"])
    assert any("extremes.largest_original" in item for item in report["left_out"])
    assert any("extremes on a, b (mean_change)" in item for item in report["left_out"])
    page = release.to_html(non_disclosive=True)
    assert "12.3456789" not in page and "12.34567" not in page
    assert "Non-disclosive report" in page and "Released data" not in page and "<img" not in page


def test_html_page_sections_and_embedded_plot(release):
    pytest.importorskip("matplotlib")
    page = release.to_html()
    for heading in ("Processes applied", "What is protected, and what is not", "Differential privacy",
                    "Weaknesses (leaks)", "Evaluations", "Distributions before and after", "Released data",
                    "Versions"):
        assert heading in page, heading
    assert page.count("data:image/png;base64,") == 1
    assert "epsilon 1" in page and "report test" in page
    view = release._repr_html_()
    assert view == release.to_html().split("<body>", 1)[1].rsplit("</body>", 1)[0]  # the same content


def test_cli_writes_html_and_json_beside_it_non_disclosive(tmp_path, capsys):
    rng = np.random.default_rng(1)
    pd.DataFrame({"a": rng.uniform(0, 10, 30)}).to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\nbounds = { a = [0, 10] }\n')
    code = main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"),
                 "--report", str(tmp_path / "report.html"), "--non-disclosive", "-q"])
    assert code == 0
    assert json.loads((tmp_path / "report.json").read_text())["non_disclosive"] is True
    assert "Non-disclosive report" in (tmp_path / "report.html").read_text()


def test_edit_violations_in_the_original_are_left_out_of_a_public_report():
    from privclust.datasets import TABLE1_RULE, table1

    recipe = {"constraints": [{"use": "linear", "rules": [TABLE1_RULE]}],
              "steps": [{"use": "fuzzy-microaggregation", "k": 3}], "evaluate": ["edit-violations"]}
    release = privclust.run(recipe, table1(), seed=2)
    full = {e["metric"] for e in release.report()["evaluations"]}
    public = {e["metric"] for e in release.report(non_disclosive=True)["evaluations"]}
    assert full - public == {f"{TABLE1_RULE}: max violation (original)"}
    assert "3.48" not in json.dumps(release.report(non_disclosive=True)["evaluations"])


def test_the_verdict_opens_the_json_the_html_and_the_repr(release):
    report = release.report()
    assert list(report)[0] == "verdict"
    assert report["verdict"].startswith("No differential-privacy guarantee: parameters were taken from the data")
    page = release.to_html(plots=False)
    assert page.index("Verdict:") < page.index("Processes applied") and "epsilon 0" not in page
    assert repr(release).endswith(release.verdict + ">")
    assert report["verification"]["changed_columns"] == ["a", "b"]


def test_a_release_pickles_without_its_registry(release):
    import pickle

    copy = pickle.loads(pickle.dumps(release))
    assert copy.registry is None and copy.original.equals(release.original)
    assert copy.to_json() == release.to_json()


def test_the_reports_page_runs_as_documented(tmp_path):
    from _docblocks import run_page
    from conftest import require_dataset

    require_dataset("casc_census.csv")
    assert run_page("reports.md", tmp_path) >= 3


HOSTILE = "<script>alert('x')</script>&\"q\"<img src=x onerror=alert(1)>"


@attrs.frozen(kw_only=True)
class Noted:
    """A masker with a free-text parameter (it changes nothing)."""

    name: ClassVar[str] = "noted"
    uses_constraints: ClassVar[bool] = False
    note: str = privclust.param(str, doc="a free-text parameter")

    def mask(self, data, context):
        return privclust.Masked(data=data)


class NotedPlugin:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(Noted)


def test_hostile_strings_are_escaped_in_the_html_report():
    frame = pd.DataFrame({HOSTILE: np.linspace(0, 10, 20), "b": np.linspace(5, 1, 20)})
    recipe = {"name": "name " + HOSTILE, "description": "about " + HOSTILE,
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {HOSTILE: [0, 10], "b": [0, 5]}},
                        {"use": "noted", "note": HOSTILE, "id": "noted"}]}
    registry = Registry(plugins=[NotedPlugin()], use_env=False)
    release = privclust.run(recipe, frame, seed=1, registry=registry)
    for page in (release.to_html(plots=False), release.to_html(non_disclosive=True), release._repr_html_()):
        assert "<script" not in page and "<img src=x" not in page
        assert "&lt;script&gt;" in page  # shown, escaped
    page = release.to_html(plots=False)
    assert page.startswith("<!DOCTYPE html>")
    assert page.index("Verdict:") < page.index("Processes applied")
    assert "<title>name &lt;script&gt;" in page
    # the recipe name and description, the column (steps table, ledger, data preview), the parameter
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") >= 6


def test_the_html_report_leaves_the_notebook_backend_and_figures_alone():
    """Displaying a Release in Jupyter must not switch matplotlib's backend (later plots would stop showing)
    nor leave figures for pyplot to show."""
    script = (
        "import matplotlib\nmatplotlib.use('svg')\nimport matplotlib.pyplot as plt\n"
        "import pandas as pd, privclust\n"
        "r = privclust.run({'steps': [{'use': 'laplace', 'epsilon': 1.0, 'bounds': {'a': [0, 10]}}]},"
        " pd.DataFrame({'a': [1.0] * 12}), seed=1)\n"
        "html = r._repr_html_()\nassert 'data:image/png' in r.to_html(), 'no plot drawn'\n"
        "print(matplotlib.get_backend(), plt.get_fignums())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "MPLBACKEND": ""})
    assert out.stdout.split() == ["svg", "[]"], out.stdout + out.stderr


def test_the_html_report_names_each_evaluators_columns_once():
    frame = pd.DataFrame({"alpha": np.arange(12.0), "beta": np.arange(12.0) ** 2})
    release = privclust.run({"evaluate": ["sse-sst", "dbrl"],
                             "steps": [{"use": "laplace", "epsilon": 1.0,
                                        "bounds": {"alpha": [0, 20], "beta": [0, 200]}}]}, frame, seed=1)
    html = release.to_html()
    # every evaluator judged the same columns: they are named once, above the table
    assert "on alpha, beta" not in html and html.count("Every figure is computed on the columns alpha, beta.") == 1
    assert '<td rowspan="3"><b>sse-sst</b></td>' in html
    apart = privclust.run({"evaluate": ["sse-sst", {"use": "dbrl", "columns": ["alpha"]}],
                           "steps": [{"use": "laplace", "epsilon": 1.0,
                                      "bounds": {"alpha": [0, 20], "beta": [0, 200]}}]}, frame, seed=1).to_html()
    assert apart.count("on alpha, beta") == 1  # one list per evaluator, not one per metric (sse-sst has 3)
    assert '<td rowspan="3"><b>sse-sst</b><br><small>on alpha, beta</small>' in apart


def test_parameter_rows_show_the_value_used_beside_the_stated_one_and_never_a_bare_null():
    from privclust.report import parameter_rows

    rows = parameter_rows({"k": 3, "c": None, "lambda1": None, "n_init": "auto",
                           "clusterer": {"use": "fcm", "tol": 0.0001}},
                          {"c": 4, "n_init": 3, "clusterer": {"use": "fcm", "m": 1.5}, "chosen": 0.25})
    shown = {r["name"]: (r["value"], r["note"]) for r in rows}
    assert shown["k"] == ("3", "")
    assert shown["c"] == ("4", "not set; derived by the component")
    assert shown["n_init"] == ("3", "stated: auto")
    assert shown["lambda1"] == ("not set", "the component's default applies")
    assert shown["clusterer.m"] == ("1.5", "not stated; set by the component")
    assert shown["chosen"] == ("0.25", "not stated; set by the component")
    names = [r["name"] for r in rows]
    assert names.index("clusterer.m") == names.index("clusterer.tol") + 1  # beside its component's parameters
    assert not any(r["value"] in ("None", "null", "") for r in rows)


@attrs.frozen(kw_only=True)
class Shift:
    """Adds a shift: stated, or (unset) the column's range / 10, taken from the data."""

    name: ClassVar[str] = "shift"
    by: float | None = privclust.param(float, default=None, doc="the shift (default: the range / 10)")

    def mask(self, data, context):
        by = self.by if self.by is not None else float((data.max() - data.min()).max()) / 10
        return privclust.Masked(data=data + by, diagnostics={
            privclust.EFFECTIVE_PARAMS: {"rounds": 1},
            privclust.EFFECTIVE_PARAMS_FROM_DATA: {} if self.by is not None else {"by": by}})


@attrs.frozen(kw_only=True)
class Plain:
    """A third-party evaluator that explains nothing."""

    name: ClassVar[str] = "plain"

    def evaluate(self, inputs):
        return {"anything": 1.5}


class ShiftPlugin:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(Shift)

    @hookimpl
    def privclust_register_evaluators(self, register):
        register(Plain)


def test_values_taken_from_the_data_stay_out_of_a_non_disclosive_report():
    frame = pd.DataFrame({"a": [0.0, 10.0, 20.0, 37.5]})
    registry = Registry(plugins=[ShiftPlugin()], use_env=False)
    release = privclust.run({"steps": [{"use": "shift"}], "evaluate": ["plain", "sse-sst"]}, frame, seed=1,
                            registry=registry)
    full = release.report()["steps"][0]
    assert full["parameters"] == {"by": None} and full["effective_parameters"] == {"rounds": 1, "by": 3.75}
    assert "Step 0 (shift) reports using by = 3.75, rounds = 1." in repr(release)
    public = release.report(non_disclosive=True)["steps"][0]
    assert public["effective_parameters"] == {"rounds": 1, "by": privclust.report.WITHHELD_VALUE}  # named, not shown
    assert "3.75" not in release.to_html(non_disclosive=True, plots=False)
    assert "<td><code>by</code></td><td>3.75</td>" in release.to_html(plots=False)
    # an evaluator without explanations still renders; the built-in one has its unit
    rows = {r["metric"]: r for r in release.report()["evaluations"]}
    assert "unit" not in rows["anything"] and rows["sse_sst"]["unit"] == "%"
    assert "<td>anything</td><td class=\"num\">1.5</td><td class=\"unit\"><small></small></td>" in \
        release.to_html(plots=False)


def test_a_malformed_metric_description_is_reported_to_the_plugin_author():
    @attrs.frozen(kw_only=True)
    class Bad:
        name: ClassVar[str] = "bad"
        metric_descriptions: ClassVar[dict] = {"x": "no unit"}

        def evaluate(self, inputs):
            return {"x": 1.0}

    problem = privclust.CAPABILITIES["metric_descriptions"].check(Bad())
    assert problem is not None and "(explanation, unit)" in problem


@pytest.mark.filterwarnings("ignore::privclust.PrivclustWarning")
def test_every_built_in_evaluator_explains_every_figure_it_computes():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.normal(size=60), "y": rng.normal(size=60),
                          "region": rng.choice(["n", "s"], size=60), "class": rng.choice([0, 1], size=60)})
    frame["z"] = frame["x"] + frame["y"]
    keys = {"keys": ["region"]}
    microdata = privclust.run({
        "constraints": [{"use": "linear", "rules": ["z = x + y"]}],
        "steps": [{"use": "fuzzy-microaggregation", "k": 3, "columns": ["x", "y", "z"]}],
        "evaluate": [{"use": name, "columns": ["x", "y", "z"]} for name in (
            "sse-sst", "il1s", "moments", "dbrl", "interval-disclosure", "group-sizes", "transparency-risk",
            "edit-violations")] + [{"use": "key-frequencies", **keys}, {"use": "individual-risk", **keys},
                                   {"use": "key-linkage", "columns": ["x", "y"], **keys}]}, frame, seed=1)
    clustering = privclust.run({"steps": [{"use": "mdav", "k": 5, "columns": ["x", "y"]}],
                                "evaluate": ["ari", "pair-f", "nmi", "n-clusters"]}, frame, seed=1)
    for release in (microdata, clustering):
        rows = release.report()["evaluations"]
        assert len({r["evaluator"] for r in rows}) >= 4
        missing = [f"{r['evaluator']}.{r['metric']}" for r in rows if not (r.get("unit") and r.get("explanation"))]
        assert not missing


def test_a_non_disclosive_report_withholds_the_statements_of_steps_that_read_the_data():
    """With bounds = "data" the noise step's statement and sensitivity held
    the column range (123449, which pins one record at 123456.789) and
    dp-dpc-grid's held d_c = quantile of the distances, in the JSON and the
    HTML of the non-disclosive report. Such a step's statements are
    withheld there; the leak entries keep their names."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.normal(10, 1, 60).round(3), "b": rng.normal(20, 1, 60).round(3)})
    data.loc[7, "a"] = 123456.789
    privacy = {"epsilon": 100, "allow_leaks": ["bounds", "dc_percent"]}
    for step in ({"use": "laplace", "epsilon": 1, "bounds": "data", "columns": ["a", "b"]},
                 {"use": "dp-dpc-grid", "epsilon": 1, "bounds": "data", "columns": ["a", "b"]}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release = privclust.run({"privacy": privacy, "steps": [step]}, data, seed=1)
        full = json.dumps(release.report())
        public = json.dumps(release.report(non_disclosive=True)) + release.to_html(non_disclosive=True)
        assert "123449" in full or "d_c = " in full  # the disclosive report keeps them
        for value in ("123449", "123456", "d_c = ", "dc = ", "widened by"):
            assert value not in public, (step["use"], value)
        leaks = [e for e in release.report(non_disclosive=True)["ledger"] if e["kind"] == "leak"]
        assert leaks and all("left out of this non-disclosive report" in e["statement"] for e in leaks)
        assert any("statements of the steps that took parameters from the data" in x
                   for x in release.report(non_disclosive=True)["left_out"])


def test_a_non_disclosive_report_names_values_taken_from_the_data_as_withheld():
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 10, 60), "y": rng.uniform(0, 10, 60)})
    data.loc[3, "x"] = 987654.321
    recipe = {"privacy": {"allow_leaks": ["bounds"]},
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data", "columns": ["x"]}]}
    with pytest.warns(privclust.PrivacyLeakWarning):
        release = privclust.run(recipe, data, seed=1)
    assert "987654" in release.used_text()
    public = release.used_text(non_disclosive=True)
    assert "987654" not in public and "bounds = withheld (derived from the data)" in public
    report = release.report(non_disclosive=True)
    assert privclust.report.FROM_DATA_NOTE in report["left_out"]
    html = release.to_html(non_disclosive=True, plots=False)
    assert "987654" not in html
    # the steps charged epsilon, but bounds from the data void the guarantee: not "differentially private"
    assert "but the release has no differential-privacy guarantee (see the verdict)" in html
    assert "Differentially private releases cost" not in html
    assert "60 records, 2 columns" in html  # the released file's columns


def test_the_page_counts_the_released_columns_and_states_a_dp_cost_only_under_a_dp_verdict():
    data = pd.DataFrame({"x": np.linspace(0, 10, 30), "y": np.linspace(5, 6, 30)})
    clustered = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"x": [0, 10]},
                                          "columns": ["x"]},
                                         {"use": "mdav", "k": 3, "columns": ["y"]}]}, data, seed=1)
    html = clustered.to_html(plots=False)
    assert "30 records, 3 columns" in html  # x, y and the label column
    # a clusterer released labels without spending: no guarantee, so no 'differentially private' cost; y = 5 + x / 10
    # is released unchanged and gives the original x back, which the verdict says first (rt20 F1)
    assert clustered.verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the column released as in the original "
                                        "(y) gives back the original x")
    assert "No differential-privacy guarantee" in clustered.verdict
    assert "The steps&#39; noise mechanisms charged epsilon 1" in html
    dp = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"x": [0, 10], "y": [5, 6]}}]},
                       data, seed=1)
    assert "Differentially private releases cost epsilon 1, delta 0 together" in dp.to_html(plots=False)


def test_a_dp_release_keeps_the_figures_of_the_original_data_out_of_its_non_disclosive_report():
    """Evaluations read the original data: beside a DP release they are a
    release the DP statements do not cover (moments' relative change of the
    mean gives the original mean back from the released one)."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.uniform(1, 10, 200), "b": rng.uniform(1, 10, 200)})
    recipe = {"privacy": {"epsilon": 1.0},
              "steps": [{"use": "laplace", "columns": ["a", "b"], "epsilon": 1.0,
                         "bounds": {"a": [0, 10], "b": [0, 10]}}],
              "evaluate": [{"use": "moments"}, {"use": "dbrl"}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run(recipe, data)
    assert release.verdict.startswith("ε-differentially private")
    mean_change = release.evaluation("mean_rel_change")
    assert mean_change > 0  # a figure of the original data, in the full report ...
    public = release.report(non_disclosive=True)
    assert public["evaluations"] == []  # ... and not in the one for publication
    assert privclust.report.DP_EVALUATIONS_NOTE in public["left_out"]
    page = release.to_html(non_disclosive=True, plots=False)
    assert "mean_rel_change" not in page and "are not differentially private" in page
    full = release.to_html(plots=False)
    assert "mean_rel_change" in full and "Not differentially private:" in full
    # without a DP guarantee (microaggregation) the aggregate figures stay, and no such warning is printed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sdc = privclust.run({"steps": [{"use": "microaggregation", "k": 5}],
                             "evaluate": [{"use": "moments"}, {"use": "dbrl"}]}, data, seed=1)
    assert len(sdc.report(non_disclosive=True)["evaluations"]) == len(sdc.evaluations) > 0
    assert "Not differentially private:" not in sdc.to_html(plots=False)


class _Clock:
    """A stand-in for ``time`` in the runner: every call to ``perf_counter``
    moves 4321.125 s on, so each step's run time is a figure no report can
    show by chance."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        self.now += 4321.125
        return self.now


_TIMES = ("4321.125", "4.32e+03", "4321.12", "elapsed_seconds", "took ", "done in")


def test_a_non_disclosive_report_states_no_run_time(tmp_path, monkeypatch, capsys):
    """A step's run time is a function of the data (a timing side channel no
    DP statement covers): the process entry's statement said "(4.32e+03 s)"
    and the report's steps ``elapsed_seconds`` in the non-disclosive JSON,
    HTML page and CLI output too. The full report keeps them."""
    import privclust.execute

    monkeypatch.setattr(privclust.execute, "time", _Clock())
    data = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20.0) % 7})
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 20], "b": [0, 7]}}],
              "evaluate": ["sse-sst"]}
    release = privclust.run(recipe, data, seed=1)
    assert release.outcomes[0].elapsed == 4321.125
    public = release.to_json(non_disclosive=True) + release.to_html(non_disclosive=True, plots=False)
    assert not [t for t in _TIMES if t in public]
    assert not [e for e in release.ledger if "4.32e+03" in e.statement]  # the statements state no time
    report = release.report(non_disclosive=True)
    assert privclust.report.RUN_TIMES_NOTE in report["left_out"]
    assert "run times of the steps" in release.to_html(non_disclosive=True, plots=False)
    full = release.report()
    assert full["steps"][0]["elapsed_seconds"] == 4321.125
    process = next(e for e in full["ledger"] if e["kind"] == "process")
    assert process["details"]["elapsed_seconds"] == 4321.125
    assert "took 4.32e+03 s" in release.to_html(plots=False)
    # the CLI: its progress lines and summary with --non-disclosive state no time either
    data.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\n'
                                     'bounds = { a = [0, 20], b = [0, 7] }\n')
    capsys.readouterr()
    assert main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"),
                 "--report", str(tmp_path / "report.html"), "--non-disclosive"]) == 0
    out = capsys.readouterr()
    written = out.out + out.err + (tmp_path / "report.html").read_text() + (tmp_path / "report.json").read_text()
    assert "done" in out.err and not [t for t in _TIMES if t in written]
    assert main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o2.csv"),
                 "--report", str(tmp_path / "full.json")]) == 0
    assert "done in 4.32e+03 s" in capsys.readouterr().err
    assert "4321.125" in (tmp_path / "full.json").read_text()


def test_the_html_parameter_table_shows_privacy_parameters_exactly():
    """The parameter table rounded every float to 6 significant digits to
    the nearest: epsilon = 0.1234564 read 0.123456, less than the epsilon the
    step spent; 1/3 per column read 0.333333."""
    data = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20.0) % 7})
    recipe = {"privacy": {"epsilon": 0.1234564},
              "steps": [{"use": "laplace", "epsilon": 0.1234564, "bounds": {"a": [0, 20], "b": [0, 7]}}]}
    release = privclust.run(recipe, data, seed=1)
    for page in (release.to_html(plots=False), release.to_html(non_disclosive=True, plots=False)):
        assert "<td><code>epsilon</code></td><td>0.1234564</td>" in page
        assert "0.123456<" not in page and "0.123456," not in page and "0.123456)" not in page
        assert "budget: epsilon 0.1234564, delta 0" in page
    # the step's parameters declare their roles (param(role=...)): epsilon is a privacy figure, shown exactly
    roles = privclust.params.parameter_roles(release.step(0).component)
    assert privclust.params.role_rounding("epsilon", roles) == "exact"
    assert privclust.params.role_rounding("noise_scale.a", roles) == "down"


def test_a_noise_scale_in_use_is_never_shown_above_the_noise_drawn():
    """The values in use were shown to 6 significant digits to the nearest: a laplace step at epsilon 0.3 on
    bounds [0, 1] drew noise of scale 3.3333365 (the range plus one lattice step, over epsilon), which the
    summary, repr and report tables read 3.33334, more noise than was drawn. Noise scales, sigmas,
    sensitivities and PrivTree's lambda are rounded down (privclust.at_most), as in the ledger's statements."""
    data = pd.DataFrame({"a": [0.1, 0.5, 0.9, 0.3]})
    release = privclust.run({"steps": [{"use": "laplace", "epsilon": 0.3, "bounds": {"a": [0, 1]}}]}, data, seed=1)
    scale = release.step(0).diagnostics["noise_scale"][0]
    shown = privclust.at_most(scale)
    assert float(shown) <= scale < float(f"{scale:.6g}")  # the case where the nearest rounding goes up
    for text in (repr(release), release.to_html(plots=False)):
        assert f"{scale:.6g}" not in text and shown in text
    # by the roles the components declare (param(role=...), reported_roles), not by the words of the names
    rows = privclust.report.parameter_rows({}, {"noise_scale": {"a": 2 / 3, "eps": 1 / 3}, "m1": 2 / 3},
                                           {"noise_scale": "noise-scale", "m1": "plain"})
    assert [r["value"] for r in rows] == ["0.666666", "0.333333", "0.666667"]


def test_a_page_without_figures_does_not_say_the_recipe_has_no_evaluators():
    """The non-disclosive page of a DP release leaves out every evaluation figure; it said "No evaluators in
    the recipe." of a recipe with two (audit16b)."""
    from privclust.datasets import table1

    recipe = {"privacy": {"epsilon": 1.0},
              "steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["exp16"], "bounds": {"exp16": [0, 100]}}],
              "evaluate": ["moments", "dbrl"]}
    release = privclust.run(recipe, table1(), seed=1)
    public = release.to_html(non_disclosive=True)
    assert "No evaluators in the recipe" not in public
    assert "The figures of the recipe's evaluators (moments, dbrl) are left out of this non-disclosive report" \
        in public
    assert "No evaluators in the recipe" not in release.to_html()
    bare = privclust.run({"steps": recipe["steps"]}, table1(), seed=1)
    assert "No evaluators in the recipe." in bare.to_html(non_disclosive=True)


def test_the_html_preview_shows_the_written_files_first_rows_without_their_input_positions(tmp_path):
    """rt12 F1: the preview showed the input's first ten rows numbered by input position, which beside the file
    written in a random order gave the link back. Its rows are the written file's first ten, with no index."""
    from privclust.datasets import table1
    from privclust.report import _preview

    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["exp16"], "bounds": {"exp16": [0, 100]}}]}
    release = privclust.run(recipe, table1(), seed=1)
    release.write(tmp_path / "out.csv")
    written = pd.read_csv(tmp_path / "out.csv").head(10)
    shown = _preview(release).reset_index(drop=True)
    assert np.allclose(shown.to_numpy(dtype=float), written.to_numpy(dtype=float))
    assert not shown.equals(release.data.head(10).reset_index(drop=True))
    assert "Released data (ten rows, in a random order)" in release.to_html(plots=False)
