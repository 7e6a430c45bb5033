"""Comparisons: grids, repeats, failures in the table, engines giving identical tables, the CLI."""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest
from conftest import default_stop_signals

import privclust
from privclust import PrivclustError, RecipeError, Registry, hookimpl
from privclust.cli import main
from privclust.compare import expand_grid, parse_sweep

BOUNDS = {"a": [0, 10], "b": [0, 10]}


@attrs.frozen(kw_only=True)
class MeanShift:
    """Evaluator: mean absolute change, and a risk-like figure."""

    name: ClassVar[str] = "mean-shift"

    def evaluate(self, inputs):
        cols = list(inputs.columns)
        diff = np.abs(inputs.protected[cols].to_numpy() - inputs.original[cols].to_numpy())
        return {"loss": float(diff.mean()), "risk": float(np.mean(diff < 0.5))}


class Plugin:
    @hookimpl
    def privclust_register_evaluators(self, register):
        register(MeanShift)


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    return pd.DataFrame({"a": rng.uniform(0, 10, 200), "b": rng.uniform(0, 10, 200), "name": ["x"] * 200})


@pytest.fixture
def reg():
    return Registry(plugins=[Plugin()], use_env=False)


def noise_recipe(name="noise", epsilon=1.0):
    return {"name": name, "steps": [{"id": "noise", "use": "laplace", "epsilon": epsilon, "bounds": BOUNDS,
                                     "columns": ["a", "b"]}],
            "evaluate": ["mean-shift"]}


def test_parse_sweep_values_and_ranges():
    assert parse_sweep("mask.k=3,5,10") == ("mask.k", [3, 5, 10])
    assert parse_sweep("privacy.epsilon=0.1:0.5:0.1") == ("privacy.epsilon", [0.1, 0.2, 0.3, 0.4, 0.5])
    assert parse_sweep('mask.clusterer=fcm, "efcm", true') == ("mask.clusterer", ["fcm", "efcm", True])
    assert parse_sweep("s.x=__import__('os')") == ("s.x", ["__import__('os')"])  # a string, never code
    for bad in ("mask.k", "k=3", "mask.k=", "privacy.epsilon=2:1:0.1"):
        with pytest.raises(PrivclustError):
            parse_sweep(bad)


def test_expand_grid():
    assert expand_grid({"a.x": [1, 2], "b.y": ["u", "v"]}) == [
        {"a.x": 1, "b.y": "u"}, {"a.x": 1, "b.y": "v"}, {"a.x": 2, "b.y": "u"}, {"a.x": 2, "b.y": "v"}]
    assert expand_grid(None) == [{}]
    with pytest.raises(PrivclustError, match="empty"):
        expand_grid({"a.x": []})
    with pytest.raises(PrivclustError, match="list of values"):
        expand_grid({"a.x": 3})


def test_table_has_a_row_per_run_with_every_figure(data, reg):
    table = privclust.compare([noise_recipe(), noise_recipe("strong", 0.2)], data,
                              grid={"noise.epsilon": [0.5, 2.0]}, repeats=3, seed=1, registry=reg, processes=1,
                              progress=False)
    assert len(table) == 2 * 2 * 3
    assert list(table.columns) == ["recipe", "configuration", "noise.epsilon", "repeat", "mean-shift.loss",
                                   "mean-shift.risk", "dp", "dp_claimed_by", "dp_epsilon", "dp_delta", "dp_relation",
                                   "epsilon",
                                   "delta",
                                   "claimed_epsilon", "seeded", "seconds", "error"]
    assert table["epsilon"].tolist() == [0.5] * 3 + [2.0] * 3 + [0.5] * 3 + [2.0] * 3
    assert table["error"].isna().all()
    loss = table.groupby("noise.epsilon")["mean-shift.loss"].mean()
    assert loss[0.5] > loss[2.0]  # more noise, more loss
    summary = privclust.summarize(table)
    assert len(summary) == 4 and {"mean-shift.loss mean", "mean-shift.loss std", "runs", "failed"} <= set(summary)
    assert summary["runs"].tolist() == [3, 3, 3, 3]


def test_processes_give_the_same_table_as_one_process(data, reg):
    kwargs = {"grid": {"noise.epsilon": [0.5, 1.0]}, "repeats": 2, "seed": 7, "registry": reg, "progress": False}
    one = privclust.compare(noise_recipe(), data, processes=1, **kwargs)
    two = privclust.compare(noise_recipe(), data, processes=2, **kwargs)
    other_seed = privclust.compare(noise_recipe(), data, processes=1, **{**kwargs, "seed": 8})
    figures = ["mean-shift.loss", "mean-shift.risk", "epsilon"]
    pd.testing.assert_frame_equal(one[figures], two[figures])
    assert not one["mean-shift.loss"].equals(other_seed["mean-shift.loss"])
    assert len(set(one["mean-shift.loss"])) == 4  # each repeat has its own stream


def test_a_failing_configuration_is_reported_and_the_others_finish(data, reg):
    table = privclust.compare(noise_recipe(), data, grid={"noise.bounds": [BOUNDS, {"a": [0, 10]}]}, repeats=2,
                              seed=1, registry=reg, processes=1, progress=False)
    failed = table[table["error"].notna()]
    assert len(failed) == 2 and (failed["configuration"] == 1).all()
    assert failed["error"].iloc[0].startswith("DataError: steps[0] (noise): laplace: no public bounds for column(s) b")
    assert table[table["error"].isna()]["mean-shift.loss"].notna().all()
    assert privclust.summarize(table)["failed"].tolist() == [0, 2]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"mask.k": [3]}, "no step has id 'mask'"),
        ({"nois.epsilon": [1.0]}, "did you mean 'noise'"),
        ({"noise.k": [3]}, "laplace has no parameter 'k'"),
        ({"noise.epsilon": [1.0, "lots"]}, "must be a number; got 'lots'"),
        ({"privacy.gamma": [1]}, "only epsilon and delta"),
    ],
)
def test_bad_sweeps_fail_before_anything_runs(data, reg, grid, message):
    with pytest.raises(RecipeError, match=message):
        privclust.compare(noise_recipe(), data, grid=grid, registry=reg, progress=False)


def test_budget_sweep_over_privacy_epsilon(data, reg):
    recipe = {**noise_recipe(), "privacy": {"epsilon": 1.0}}
    with pytest.raises(RecipeError, match=r"privacy.epsilon=0.5\].*need at least epsilon = 1"):
        privclust.compare(recipe, data, grid={"privacy.epsilon": [0.5, 2.0]}, registry=reg, progress=False)


def test_unreachable_scheduler_fails_fast_and_clearly(data, reg):
    start = time.perf_counter()
    with pytest.raises(PrivclustError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        privclust.compare(noise_recipe(), data, scheduler="tcp://127.0.0.1:9", timeout=3, registry=reg,
                          progress=False)
    assert time.perf_counter() - start < 10


@pytest.mark.slow
def test_a_dask_local_cluster_gives_the_same_table(data, reg):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    kwargs = {"grid": {"noise.epsilon": [0.5, 1.0]}, "repeats": 2, "seed": 5, "registry": reg, "progress": False}
    local = privclust.compare(noise_recipe(), data, processes=2, **kwargs)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                                  processes=True) as cluster:
        remote = privclust.compare(noise_recipe(), data, scheduler=cluster.scheduler_address, **kwargs)
    figures = ["recipe", "noise.epsilon", "repeat", "mean-shift.loss", "mean-shift.risk", "epsilon"]
    pd.testing.assert_frame_equal(local[figures], remote[figures])


def test_cli_compare_writes_table_summary_and_map(tmp_path, data, capsys):
    data.to_csv(tmp_path / "in.csv", index=False)
    recipe = noise_recipe()
    recipe["evaluate"] = []
    (tmp_path / "noise.toml").write_text(privclust.Recipe.from_dict(recipe).to_toml())
    args = ["compare", str(tmp_path / "noise.toml"), "-i", str(tmp_path / "in.csv"), "--sweep",
            "noise.epsilon=0.5,1,2", "--repeats", "2", "--seed", "3", "--processes", "1", "-o",
            str(tmp_path / "out.csv"), "--summary", str(tmp_path / "summary.csv"), "-q"]
    assert main(args) == 0
    table = pd.read_csv(tmp_path / "out.csv")
    assert len(table) == 6 and table["noise.epsilon"].tolist() == [0.5, 0.5, 1, 1, 2, 2]
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 3
    # a map needs figures: asking for one without evaluators is a clean error, and nothing is written
    code = main([*args[:-1], "--plot", str(tmp_path / "map.png"), "-o", str(tmp_path / "again.csv"), "-q"])
    assert code == 1 and "name the risk figure" in capsys.readouterr().err
    assert not (tmp_path / "again.csv").exists() and not (tmp_path / "map.png").exists()
    assert main([*args[:2], "--sweep", "noise.k=3", "-i", str(tmp_path / "in.csv"), "-o",
                 str(tmp_path / "x.csv")]) == 1
    assert "laplace has no parameter 'k'" in capsys.readouterr().err


def test_risk_utility_map_marks_the_pareto_front(data, reg):
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import metric_curve, pareto_front, risk_utility_map

    assert pareto_front([1, 2, 3, 2], [3, 2, 1, 3]).tolist() == [True, True, True, False]
    table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.2, 1.0, 5.0]}, repeats=2, seed=2,
                              registry=reg, processes=1, progress=False)
    ax = risk_utility_map(table)
    assert ax.get_xlabel() == "information loss: mean-shift.loss"
    assert ax.get_ylabel() == "disclosure risk: mean-shift.risk"
    assert len(ax.containers) == 1 and "Pareto front" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = metric_curve(table, "noise.epsilon", "mean-shift.loss")
    assert len(ax.lines) == 1
    with pytest.raises(PrivclustError, match="did you mean"):
        risk_utility_map(table, risk="mean-shift.rsk")


def test_the_risk_utility_map_names_the_configurations_whose_runs_failed(data, reg):
    """A configuration whose runs all failed vanished from the map without a
    word, and a partly failed one was drawn as if whole."""
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import risk_utility_map

    table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.2, 1.0, 5.0]}, repeats=2, seed=2,
                              registry=reg, processes=1, progress=False)
    eps = table["noise.epsilon"]
    broken = (eps == 5.0) | ((eps == 1.0) & (table["repeat"] == 1))
    table.loc[broken, "error"] = "BudgetExceededError: simulated"
    table.loc[broken, ["mean-shift.loss", "mean-shift.risk"]] = np.nan
    ax = risk_utility_map(table)
    note = " ".join(t.get_text() for t in ax.texts)
    assert "Not shown, every run failed: noise, epsilon=5." in note
    assert "Drawn from the runs that finished: noise, epsilon=1 (1 of 2 runs)." in note
    table["error"] = None
    whole = risk_utility_map(table.assign(**{"mean-shift.loss": 1.0, "mean-shift.risk": 1.0}), annotate=False)
    assert not any("Not shown" in t.get_text() or "Drawn from" in t.get_text() for t in whole.texts)  # none failed


def test_each_recipe_can_have_its_own_grid(data, reg):
    strong = noise_recipe("strong", 0.5)
    table = privclust.compare({"weak": noise_recipe(), "strong": strong}, data,
                              grid={"weak": {"noise.epsilon": [2.0, 4.0]}, "strong": {"noise.bounds": [BOUNDS]}},
                              seed=1, registry=reg, processes=1, progress=False)
    assert table["recipe"].tolist() == ["weak", "weak", "strong"]
    assert table["epsilon"].tolist() == [2.0, 4.0, 0.5]
    assert table["noise.epsilon"].tolist()[:2] == [2.0, 4.0] and pd.isna(table["noise.epsilon"].iloc[2])
    with pytest.raises(PrivclustError, match="did you mean the recipe 'weak'"):
        privclust.compare({"weak": noise_recipe()}, data, grid={"waek": {"noise.epsilon": [1.0]}}, registry=reg,
                          progress=False)


def test_cli_sweeps_one_recipe_by_name(tmp_path, data):
    data.to_csv(tmp_path / "in.csv", index=False)
    for name in ("one", "two"):
        (tmp_path / f"{name}.toml").write_text(privclust.Recipe.from_dict({**noise_recipe(name), "evaluate": []})
                                               .to_toml())
    assert main(["compare", str(tmp_path / "one.toml"), str(tmp_path / "two.toml"), "-i", str(tmp_path / "in.csv"),
                 "--sweep", "one:noise.epsilon=0.5,2", "--processes", "1", "-o", str(tmp_path / "out.csv"),
                 "-q"]) == 0
    table = pd.read_csv(tmp_path / "out.csv")
    assert table["recipe"].tolist() == ["one", "one", "two"] and table["epsilon"].tolist() == [0.5, 2.0, 1.0]


# ---------------------------------------------------------------------------
# Limits, engine settings and interruptions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["5e-3:2e-2:5e-3", "0.005:0.02:0.005", "5E-3:0.020:.005", "0.5e-2:20e-3:50e-4",
                                  " 5e-3 : 2e-2 : 5e-3"])
def test_a_sweep_range_gives_exactly_its_values_in_any_notation(text):
    """Decimals were counted from the text after the dot: 5e-3:2e-2:5e-3 ran
    0.01, 0.01, 0.01, 0.02 and 1e-3:3e-3:1e-3 ran 0, 0, 0."""
    assert parse_sweep(f"laplace.epsilon={text}") == ("laplace.epsilon", [0.005, 0.01, 0.015, 0.02])


def test_sweep_ranges_are_exact_decimal_arithmetic():
    assert parse_sweep("s.epsilon=1e-3:3e-3:1e-3")[1] == [0.001, 0.002, 0.003]
    assert parse_sweep("s.epsilon=0.1:0.3:0.1")[1] == [0.1, 0.2, 0.3]  # 0.1 + 2 * 0.1 is 0.30000000000000004
    assert parse_sweep("s.epsilon=1e-12:3e-12:1e-12")[1] == [1e-12, 2e-12, 3e-12]
    assert parse_sweep("s.epsilon=1e2:3E2:1e2")[1] == [100.0, 200.0, 300.0]
    assert parse_sweep("s.epsilon=0:1:0.3")[1] == [0.0, 0.3, 0.6, 0.9]  # stop is not a multiple of the step
    assert parse_sweep("s.epsilon=-1:0:0.5")[1] == [-1.0, -0.5, 0.0]
    assert str(parse_sweep("s.epsilon=-1:0:1")[1][1]) == "0.0"  # never -0.0
    assert parse_sweep("s.epsilon=0.7:0.7:0.1")[1] == [0.7]
    for bad in ("1e999:1e999:1", "0:1e400:1"):
        with pytest.raises(PrivclustError, match="start:stop:step with finite numbers"):
            parse_sweep(f"s.epsilon={bad}")
    with pytest.raises(PrivclustError, match="too small for a double"):
        parse_sweep("s.epsilon=1e-400:1e-399:1e-400")
    with pytest.raises(PrivclustError, match="more than the limit"):
        parse_sweep("s.epsilon=0:1:1e-300")


def test_dp_claimed_by_names_every_component_the_dp_figures_rest_on(tmp_path):
    """`dp = True, dp_epsilon = 0.1` read as a bare fact for a plugin that
    charged 0.1 and released raw data; the verdict attributes the DP
    statements to their components, and now the table does too."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, 60), "b": rng.uniform(0, 10, 60)})
    two = {"name": "two", "privacy": {"epsilon": 2.0},
           "steps": [{"use": "laplace", "id": "first", "epsilon": 1.0, "bounds": {"a": [0, 10]}, "columns": ["a"]},
                     {"use": "laplace", "id": "second", "epsilon": 1.0, "bounds": {"b": [0, 10]},
                      "columns": ["b"]}]}
    table = privclust.compare([two], frame, seed=1, progress=False, processes=1)
    assert table.loc[0, "dp"] and table.loc[0, "dp_claimed_by"] == "step 0 (laplace), step 1 (laplace)"
    columns = list(table.columns)
    assert columns.index("dp_claimed_by") == columns.index("dp") + 1
    # the command line writes the column too
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "two.toml").write_text(
        '[privacy]\nepsilon = 1.0\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
        'bounds = { a = [0, 10] }\n')
    assert main(["compare", str(tmp_path / "two.toml"), "-i", str(tmp_path / "in.csv"), "-o",
                 str(tmp_path / "out.csv"), "--processes", "1", "-q"]) == 0
    assert pd.read_csv(tmp_path / "out.csv")["dp_claimed_by"].tolist() == ["step 0 (laplace)"]


def test_a_huge_sweep_range_is_refused_without_expanding_it():
    from privclust.compare import MAX_CONFIGURATIONS

    with pytest.raises(PrivclustError, match=r"has 1e\+09 values, more than the limit of 10,000"):
        parse_sweep("noise.epsilon=0.000001:1000:0.000001")
    for bad in ("0:inf:1", "0:1:nan", "0:1:0", "1:0:0.1"):
        with pytest.raises(PrivclustError, match="start:stop:step with finite numbers"):
            parse_sweep(f"noise.epsilon={bad}")
    assert len(parse_sweep(f"noise.k=1:{MAX_CONFIGURATIONS}:1")[1]) == MAX_CONFIGURATIONS
    with pytest.raises(PrivclustError, match="nests brackets"):
        parse_sweep("noise.k=" + "[" * 5000 + "1" + "]" * 5000)


def test_the_product_of_sweeps_is_limited_and_counted_without_expanding(data, reg):
    grid = {"noise.epsilon": range(1000), "privacy.delta": range(10**9)}
    with pytest.raises(PrivclustError, match="the sweep has 1,000,000,000,000 configurations"):
        expand_grid(grid)
    with pytest.raises(PrivclustError, match="more than the limit of 10,000 per comparison"):
        privclust.compare(noise_recipe(), data, grid=grid, registry=reg, progress=False)
    with pytest.raises(PrivclustError, match="asks for 200,000 runs"):
        privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [1.0, 2.0]}, repeats=100_000, registry=reg,
                          progress=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scheduler": "tcp://127.0.0.1:9", "timeout": -1}, "timeout must be a number of seconds > 0"),
        ({"scheduler": "tcp://127.0.0.1:9", "timeout": float("nan")}, "timeout must be"),
        ({"scheduler": "tcp://host:notaport"}, "scheduler address 'tcp://host:notaport' is not valid"),
        ({"scheduler": "tcp://host:99999"}, "is not valid"),
        ({"scheduler": "http://host:8786"}, "unknown protocol 'http'"),
        ({"scheduler": "tcp://:8786"}, "names no host"),
        ({"scheduler": 42}, "scheduler must be None"),
        ({"processes": 0}, "processes must be an integer >= 1"),
        ({"processes": -2}, "processes must be an integer >= 1"),
    ],
)
def test_bad_engine_settings_are_clean_errors_before_anything_runs(data, reg, kwargs, message):
    with pytest.raises(PrivclustError, match=message):
        privclust.compare(noise_recipe(), data, registry=reg, progress=False, **kwargs)


def test_cli_bad_scheduler_and_timeout_print_one_line(tmp_path, data, capsys):
    data.to_csv(tmp_path / "in.csv", index=False)
    recipe = tmp_path / "r.toml"
    recipe.write_text(privclust.Recipe.from_dict({k: v for k, v in noise_recipe().items() if k != "evaluate"})
                      .to_toml())
    for extra, message in ((["--scheduler", "tcp://h:port"], "is not valid"),
                           (["--scheduler", "tcp://127.0.0.1:9", "--timeout", "-1"], "timeout must be"),
                           (["--sweep", "noise.epsilon=0.000001:1000:0.000001"], "more than the limit")):
        code = main(["compare", str(recipe), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"), "-q",
                     *extra])
        err = capsys.readouterr().err
        assert code == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "r.toml"]


SLOW_DRIVER = """
import os, sys, time
from pathlib import Path
from typing import ClassVar

import attrs
import privclust
from privclust import hookimpl
from privclust.cli import main


@attrs.frozen(kw_only=True)
class Sleepy:
    name: ClassVar[str] = "sleepy"

    def mask(self, data, context):
        Path(f"worker-{os.getpid()}").write_text("started")
        time.sleep(300)
        return data


class Plugin:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(Sleepy)


privclust.get_registry().register(Plugin(), "sleepy-test")
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups")
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_an_interrupted_comparison_stops_its_workers_and_writes_nothing(tmp_path, data, signame):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or
    SIGTERM to the parent alone: the queued runs are cancelled, the worker
    processes are ended, the exit status says so and no file is written."""
    import os
    import signal
    import subprocess

    data.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "driver.py").write_text(SLOW_DRIVER)
    (tmp_path / "slow.toml").write_text('[[steps]]\nuse = "sleepy"\ncolumns = ["a"]\n')
    process = subprocess.Popen([sys.executable, "driver.py", "compare", "slow.toml", "-i", "in.csv", "-o", "o.csv",
                                "--repeats", "8", "--processes", "2", "-q"], cwd=tmp_path, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, preexec_fn=default_stop_signals)
    try:
        for _ in range(1200):
            if len(list(tmp_path.glob("worker-*"))) >= 2 or process.poll() is not None:
                break
            time.sleep(0.05)
        workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
        assert len(workers) == 2, process.stderr.read() if process.poll() is not None else "workers never started"
        signum = getattr(signal, signame)
        if signame == "SIGINT":
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        _, err = process.communicate(timeout=60)  # a guard, not a timing claim: the queue would take 20 minutes
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == (130 if signame == "SIGINT" else 128 + signum), err
    assert "interrupted" in err and "Traceback" not in err
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not (tmp_path / "o.csv").exists() and not list(tmp_path.glob("*.tmp"))
    assert len(list(tmp_path.glob("worker-*"))) == 2  # no queued run started after the signal


def test_an_interrupted_dask_comparison_cancels_its_runs(data, reg, monkeypatch):
    """Ctrl-C while waiting on a cluster: the submitted runs are cancelled and
    the client the call opened is closed (a stand-in client records it)."""
    distributed = pytest.importorskip("distributed")
    compare_module = sys.modules["privclust.compare"]

    class Future:
        def __init__(self, key):
            self.key = key

    class Client:
        def __init__(self):
            self.cancelled, self.closed, self.submitted = None, False, 0

        def scatter(self, data, broadcast):
            return data

        def submit(self, *args, **kwargs):
            self.submitted += 1
            return Future(self.submitted)

        def cancel(self, futures, force=False):
            self.cancelled = (len(futures), force)

        def close(self):
            self.closed = True

    client = Client()
    monkeypatch.setattr(compare_module, "dask_client", lambda scheduler, timeout: (client, [client]))

    def interrupted(futures):
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "as_completed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        privclust.compare(noise_recipe(), data, repeats=3, scheduler="tcp://example:8786", registry=reg,
                          progress=False)
    assert client.cancelled == (3, True) and client.closed


def test_the_claimed_epsilon_is_composed_by_the_accountant_not_summed():
    """Over the parts of a public column the paper's claims compose in parallel, like the honest figure."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(300, 2)), columns=["x", "y"])
    frame["g"] = np.repeat([0, 1, 2], 100)
    recipe = {"roles": {"strata": "g"},
              "steps": [{"use": "dp-dpcl", "epsilon": 1.0, "dc": 0.5, "radius": 0.5, "n_clusters": 2,
                         "columns": ["x", "y"]}]}
    table = privclust.compare({"a": recipe}, frame, repeats=1, seed=1, progress=False, processes=1)
    assert table.loc[0, "claimed_epsilon"] == 1.0  # three parts of 1.0 each, in parallel (a sum would say 3)
    assert table.loc[0, "epsilon"] > 1.0  # the honest figure of dp-dpcl


@pytest.mark.filterwarnings("ignore::privclust.PrivacyLeakWarning")
def test_the_dp_column_follows_the_verdict_and_only_a_dp_run_has_a_guarantee(data):
    """The same epsilon is spent by a DP run, a run with bounds taken from the data (allow_leaks) and a DP step
    beside microaggregation; only the first carries a guarantee, and the table says so."""
    frame = data[["a", "b"]]
    public = {"name": "public-bounds", "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": BOUNDS}]}
    leaky = {"name": "data-bounds", "privacy": {"allow_leaks": ["bounds"]},
             "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]}
    mixed = {"name": "dp+mdav", "steps": [
        {"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 10]}, "columns": ["a"]},
        {"use": "microaggregation", "columns": ["b"], "clusterer": {"use": "mdav", "k": 3}}]}
    failing = {"name": "failing", "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 10]}}]}
    # a DP clusterer alone changes no column: every original value is released, no guarantee
    labels_only = {"name": "labels-only", "steps": [{"use": "idp-kmeans", "epsilon": 1.0, "n_clusters": 2,
                                                     "bounds": BOUNDS}]}
    recipes = [public, leaky, mixed, failing, labels_only]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privclust.NothingProtectedWarning)
        table = privclust.compare(recipes, frame, seed=1, progress=False, processes=1).set_index("recipe")
        verdicts = {r["name"]: privclust.run(r, frame, seed=1).verdict for r in recipes if r is not failing}
    assert verdicts["labels-only"].startswith("No differential-privacy guarantee: the release changes no column")
    assert not table.loc["labels-only", "dp"] and pd.isna(table.loc["labels-only", "dp_epsilon"])
    assert verdicts["public-bounds"].startswith("ε-differentially private")
    assert verdicts["data-bounds"].startswith("No differential-privacy guarantee")
    assert "(bounds)" in verdicts["data-bounds"]
    assert verdicts["dp+mdav"].startswith("No differential-privacy guarantee") and "step 1" in verdicts["dp+mdav"]
    assert table["epsilon"].loc[["public-bounds", "data-bounds", "dp+mdav"]].tolist() == [1.0, 1.0, 1.0]  # spent
    assert table["dp"].loc[["public-bounds", "data-bounds", "dp+mdav"]].tolist() == [True, False, False]
    assert table.loc["public-bounds", "dp_epsilon"] == 1.0 and table.loc["public-bounds", "dp_delta"] == 0.0
    assert table[["dp_epsilon", "dp_delta"]].loc[["data-bounds", "dp+mdav"]].isna().all().all()
    # the figures are the components' own DP statements, composed: the table names whose, as the verdict does
    assert table.loc["public-bounds", "dp_claimed_by"] == "step 0 (laplace)"
    assert "claims of step 0 (laplace):" in verdicts["public-bounds"]
    assert table["dp_claimed_by"].loc[["data-bounds", "dp+mdav", "labels-only", "failing"]].isna().all()
    assert str(table["dp_claimed_by"].dtype) == "string"
    assert str(table["dp"].dtype) == "boolean"
    assert table.loc["failing", "error"] is not None and pd.isna(table.loc["failing", "dp"])  # released nothing
    summary = privclust.summarize(table.reset_index()).set_index("recipe")
    assert summary["dp"].loc[["public-bounds", "data-bounds", "dp+mdav"]].tolist() == [True, False, False]
    assert pd.isna(summary.loc["failing", "dp"])
    assert summary.loc["public-bounds", "dp_epsilon mean"] == 1.0
    assert summary["dp_epsilon mean"].loc[["data-bounds", "dp+mdav", "failing"]].isna().all()
    assert (summary["epsilon mean"].loc[["public-bounds", "data-bounds", "dp+mdav"]] == 1.0).all()


def test_a_run_without_a_dp_step_is_not_dp_and_spends_nothing(data):
    recipe = {"steps": [{"use": "microaggregation", "columns": ["a", "b"], "clusterer": {"use": "mdav", "k": 3}}]}
    table = privclust.compare({"mdav": recipe}, data[["a", "b"]], seed=1, progress=False, processes=1)
    assert privclust.run(recipe, data[["a", "b"]]).verdict.startswith("No differential-privacy guarantee")
    assert not table.loc[0, "dp"] and pd.isna(table.loc[0, "dp_epsilon"])
    assert table.loc[0, "epsilon"] == 0.0


def test_forked_workers_find_their_own_comparisons_data_by_token():
    """Local workers forked by a comparison read the data and registry under that comparison's token, so two
    comparisons set up at the same time keep apart (module globals were overwritten by the second)."""
    compare_module = importlib.import_module("privclust.compare")  # the module (privclust.compare is the function)

    recipe = {"steps": [{"use": "laplace", "epsilon": 1e9, "bounds": {"a": [0, 10]}}], "evaluate": ["sse-sst"]}
    # the first frame lies inside the bounds, the second is clipped to 10: the released error tells them apart
    frames = [pd.DataFrame({"a": base + np.arange(30) % 10}) for base in (0.0, 50.0)]
    handover = importlib.import_module("privclust.handover")  # where run, compare and run_dataset hand over
    with contextlib.ExitStack() as held:
        tokens = [held.enter_context(handover.handed(privclust.get_registry(), None, frame)).token for frame in frames]
        seed = np.random.SeedSequence(1)
        rows = [compare_module._run_one(recipe, None, seed, None, token) for token in tokens]
    assert rows[0]["error"] is None and rows[0]["sse-sst.sse"] < 1e-6
    assert rows[1]["error"] is None and rows[1]["sse-sst.sse"] > 1000.0
    assert not set(tokens) & set(handover._HANDED)  # nothing left behind


@pytest.mark.filterwarnings("ignore::privclust.PrivacyLeakWarning")
def test_the_docs_page_examples_run(tmp_path):
    """docs/compare.md prints what its output blocks show (the dp column among them)."""
    from _docblocks import run_page
    from conftest import require_dataset

    require_dataset("casc_census.csv")
    assert run_page("compare.md", tmp_path) >= 4


def test_a_table_of_dp_runs_says_that_a_choice_made_from_it_is_not_dp(data, reg, tmp_path, capsys):
    """Each DP run spends its epsilon on the same data, and the figures read
    the original data: the release or configuration chosen by them is chosen
    by reading the data (hyper-parameter selection), outside every DP
    statement. The table says so; a table without DP runs does not."""
    with pytest.warns(privclust.PrivclustWarning, match="no differential-privacy guarantee as chosen"):
        table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.5, 2.0]}, seed=1,
                                  registry=reg, processes=1, progress=False)
    assert table["dp"].all()
    assert table.attrs["privclust"]["note"].startswith("2 differentially private run(s)")
    assert privclust.summarize(table).attrs["privclust"]["note"] == table.attrs["privclust"]["note"]
    plain = {"name": "mdav", "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 5}],
             "evaluate": ["mean-shift"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", privclust.PrivclustWarning)
        other = privclust.compare(plain, data, seed=1, registry=reg, processes=1, progress=False)
    assert "note" not in other.attrs["privclust"]


def test_summarize_keeps_the_deltas_and_whose_dp_statements():
    # the summary showed dp = True and a dp_epsilon without the delta: an (epsilon, delta) guarantee read as pure
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, 120), "b": rng.uniform(0, 10, 120)})
    bounds = {"a": [0, 10], "b": [0, 10]}
    recipes = [{"name": "gauss", "steps": [{"use": "gaussian", "epsilon": 1.0, "delta": 1e-5, "bounds": bounds}]},
               {"name": "lap", "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": bounds}]},
               {"name": "mdav", "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privclust.PrivclustWarning)
        table = privclust.compare(recipes, frame, repeats=2, seed=1, progress=False, processes=1)
    summary = privclust.summarize(table).set_index("recipe")
    assert summary.loc["gauss", "dp_delta mean"] == 1e-5 and summary.loc["lap", "dp_delta mean"] == 0.0
    assert pd.isna(summary.loc["mdav", "dp_delta mean"])
    assert summary.loc["gauss", "delta mean"] == 1e-5
    assert summary.loc["gauss", "dp_claimed_by"] == "step 0 (gaussian)"
    assert summary.loc["lap", "dp_claimed_by"] == "step 0 (laplace)"
    assert pd.isna(summary.loc["mdav", "dp_claimed_by"])


@attrs.frozen(kw_only=True)
class AddRemoveNoise:
    """A third-party DP masker whose statement holds under add/remove."""

    name: ClassVar[str] = "addremove-noise"
    epsilon: float = privclust.param(float, default=1.0, doc="epsilon")

    def mask(self, data, context):
        context.spend(epsilon=self.epsilon, mechanism="laplace", sensitivity=1.0, relation="add/remove one record",
                      covers="the values")
        return privclust.Masked(data=data + 0.5)


class AddRemovePlugin:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(AddRemoveNoise)


def test_the_table_states_the_relation_each_dp_epsilon_holds_under():
    # dp_epsilon 1.0 under add/remove read as the same guarantee as 1.0 under replace-one (there it is 2)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, 100), "b": rng.uniform(0, 10, 100)})
    reg = Registry(plugins=[AddRemovePlugin()])
    recipes = [{"name": "ar", "steps": [{"use": "addremove-noise", "epsilon": 1.0}]},
               {"name": "ro", "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": BOUNDS}]},
               {"name": "strat", "roles": {"strata": "s"},
                "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": BOUNDS, "columns": ["a", "b"]}]},
               {"name": "mdav", "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]}]
    data = frame.assign(s=np.repeat(["u", "v"], 50))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privclust.PrivclustWarning)
        table = privclust.compare(recipes[:2] + recipes[3:], frame, seed=1, progress=False, processes=1,
                                  registry=reg).set_index("recipe")
        strat = privclust.compare(recipes[2], data, seed=1, progress=False, processes=1)
    # the per-record file shows its number of records, private under add/remove: as its verdict says, the add/remove
    # step's 1.0 holds for the file as 2.0 under replace-one (docs/decisions.md, decision 24)
    assert table["dp_epsilon"].loc[["ar", "ro"]].tolist() == [2.0, 1.0]
    assert table.loc["ar", "dp_relation"].startswith("replace-one (the released file shows its number of records")
    assert table.loc["ro", "dp_relation"] == "replace-one"
    assert pd.isna(table.loc["mdav", "dp_relation"]) and str(table["dp_relation"].dtype) == "string"
    assert strat.loc[0, "dp_relation"] == "replace-one (with the public stratum column(s) s fixed)"
    summary = privclust.summarize(table.reset_index()).set_index("recipe")
    assert summary.loc["ar", "dp_relation"] == table.loc["ar", "dp_relation"]
    assert pd.isna(summary.loc["mdav", "dp_relation"])


def test_metric_curve_never_averages_over_other_swept_parameters(data, reg):
    """With two swept parameters one curve mixed the configurations of the
    other one into each point (its band read as the spread of repeats)."""
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import metric_curve

    grid = {"noise.epsilon": [0.5, 2.0], "noise.columns": [["a"], ["a", "b"]]}
    table = privclust.compare(noise_recipe(), data, grid=grid,
                              repeats=2, seed=2, registry=reg, processes=1, progress=False)
    ax = metric_curve(table, "noise.epsilon", "mean-shift.loss")
    assert [line.get_label() for line in ax.lines] == ["noise, columns=['a']", "noise, columns=['a', 'b']"]
    for line, columns in zip(ax.lines, (["a"], ["a", "b"]), strict=True):
        rows = table[table["noise.columns"].map(lambda c, columns=columns: c == columns)]
        assert np.allclose(line.get_ydata(), rows.groupby("noise.epsilon")["mean-shift.loss"].mean().to_numpy())
    assert not ax.texts  # nothing failed
    broken = (table["noise.epsilon"] == 2.0) & (table["repeat"] == 1)
    table.loc[broken, "error"] = "BudgetExceededError: simulated"
    ax = metric_curve(table, "noise.epsilon", "mean-shift.loss")
    assert "Drawn from the runs that finished: noise, epsilon=2, columns=['a'] (1 of 2 runs)" in ax.texts[0].get_text()


def test_the_risk_utility_map_note_stays_on_the_saved_figure(data, reg, tmp_path):
    """The note on failed configurations sat below the figure's edge: a map
    saved as the docs show (savefig without bbox_inches) lost it."""
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import risk_utility_map

    table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.2, 1.0]}, seed=2,
                              registry=reg, processes=1, progress=False)
    table.loc[table["noise.epsilon"] == 1.0, "error"] = "BudgetExceededError: simulated"
    for detached in (False, True):
        ax = risk_utility_map(table, detached=detached)
        figure = ax.figure
        figure.savefig(tmp_path / "map.png", dpi=80)
        note = ax.texts[-1]
        box = note.get_window_extent()
        assert box.y0 >= 0 and box.x0 >= 0 and box.x1 <= figure.bbox.width, (box, figure.bbox)


def test_the_risk_utility_map_never_takes_a_higher_is_better_figure_for_a_loss(data, reg):
    """ari.ari was picked as the 'information loss' (a hint matched 'ari'): the axis, the Pareto front and
    'lower left is better' all read a higher agreement with the true classes as worse."""
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import risk_utility_map

    table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.2, 1.0]}, seed=2,
                              registry=reg, processes=1, progress=False)
    table = table.rename(columns={"mean-shift.loss": "ari.ari"})
    table.attrs["privclust"]["metrics"] = ["ari.ari", "mean-shift.risk"]
    with pytest.raises(PrivclustError, match=r"name the information-loss figure \(one of: mean-shift.risk\)"):
        risk_utility_map(table)
    for given in ("ari.ari",):
        with pytest.raises(PrivclustError, match="higher is better"):
            risk_utility_map(table, loss=given)
        with pytest.raises(PrivclustError, match="higher is better"):
            risk_utility_map(table, risk=given, loss="mean-shift.risk")
    ax = risk_utility_map(table.assign(**{"1 - ari.ari": 1 - table["ari.ari"]}), loss="1 - ari.ari")
    assert ax.get_xlabel() == "information loss: 1 - ari.ari"
    # a group or cell size is safer when larger (red-team audit: key-frequencies.min_cell_size drew k = 2 as the
    # lowest risk)
    sizes = table.rename(columns={"ari.ari": "key-frequencies.min_cell_size"})
    sizes.attrs["privclust"]["metrics"] = ["key-frequencies.min_cell_size", "mean-shift.risk"]
    for given in ("key-frequencies.min_cell_size",):
        with pytest.raises(PrivclustError, match="a group or cell size"):
            risk_utility_map(sizes, risk=given, loss="mean-shift.risk")
    from privclust.plots import higher_is_better
    assert higher_is_better("group-sizes.expected_min_size") and not higher_is_better("key-frequencies.sample_uniques")


def test_the_risk_utility_map_names_configurations_without_a_value(data, reg):
    """A configuration whose runs finished without a value of a figure (NaN) vanished from the map unnamed."""
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import risk_utility_map

    table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.2, 1.0, 5.0]}, seed=2,
                              registry=reg, processes=1, progress=False)
    table.loc[table["noise.epsilon"] == 5.0, "mean-shift.risk"] = np.nan
    ax = risk_utility_map(table, detached=True)
    note = ax.texts[-1].get_text()
    assert note.startswith("Not shown, no value of mean-shift.loss or mean-shift.risk: noise, epsilon=5. ")


def test_metric_curve_over_a_parameter_whose_values_are_not_numbers(data, reg):
    """A sweep of components or column lists crashed metric_curve (unhashable dict, no float)."""
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import metric_curve

    table = privclust.compare([noise_recipe(), noise_recipe("other")], data,
                              grid={"noise": {"noise.columns": [["a"], ["a", "b"]]}}, seed=2, registry=reg,
                              processes=1, progress=False)
    ax = metric_curve(table, "noise.columns", "mean-shift.loss")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["['a']", "['a', 'b']"]
    assert len(ax.lines) == 1 and ax.lines[0].get_label() == "noise"  # 'other' does not sweep it
    rows = table[table["recipe"] == "noise"]
    assert np.allclose(ax.lines[0].get_ydata(), rows["mean-shift.loss"].to_numpy())


def test_a_map_of_differentially_private_runs_says_the_choice_is_not_covered(data, reg):
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import SELECTION_CAPTION, risk_utility_map

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privclust.PrivclustWarning)
        table = privclust.compare(noise_recipe(), data, grid={"noise.epsilon": [0.2, 1.0]}, seed=2,
                                  registry=reg, processes=1, progress=False)
    assert table.attrs["privclust"]["note"]
    ax = risk_utility_map(table, detached=True)
    assert ax.texts[-1].get_text() == SELECTION_CAPTION
    table.attrs["privclust"].pop("note")
    assert not risk_utility_map(table, detached=True, annotate=False).texts


def test_the_table_says_whether_the_runs_were_seeded(data, reg):
    """trust17a: the table's `dp` column of a seeded comparison read like the
    guarantee of a release made that way, with no word of the seed (a seeded
    release is DP only while its seed is secret). A `seeded` column (and in
    the summary) says whether `seed=` was given; the seed itself never
    appears."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeded = privclust.compare(noise_recipe(), data, seed=12345, registry=reg, processes=1, progress=False)
        unseeded = privclust.compare(noise_recipe(), data, registry=reg, processes=1, progress=False)
    assert seeded["seeded"].tolist() == [True] and unseeded["seeded"].tolist() == [False]
    assert "12345" not in seeded.drop(columns=["seconds"]).to_csv()
    assert privclust.summarize(seeded)["seeded"].tolist() == [True]
    assert privclust.summarize(unseeded)["seeded"].tolist() == [False]
