"""The privclust command: run, check, plugins, demo; clean errors; atomic outputs."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import default_stop_signals

import privclust
from privclust.cli import main

#: How the summary says a seeded run's rows are ordered (an unseeded run's: "in a random order").
SEEDED_ORDER = "in an order drawn from the seed: whoever has the seed can put them back in the input's order"

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
    # the rows in a random order: each record's row once, not where it stood in the input
    assert list(out.columns) == ["id", "a", "b"] and sorted(out["id"]) == list(data["id"])
    assert not out["id"].equals(data["id"])
    report = json.loads((folder / "report.json").read_text())
    assert report["seeded"] is True and report["privacy"]["spent"]["epsilon"] == 1.0
    err = capsys.readouterr().err
    assert "[1/1] laplace" in err and "ε-differentially private (ε = 1, δ = 0)" in err and "privacy spent" not in err
    assert f"(30 records, {SEEDED_ORDER})" in err  # seeded
    assert listing(folder) == {"in.csv", "recipe.toml", "out.csv", "report.json"}


def test_run_writes_the_rows_in_an_order_drawn_from_the_run_and_keep_order_keeps_the_inputs(files, capsys):
    """The released rows in the input's order link each row to its record for whoever knows that order (or a file
    sorted by a column): run writes them in a random order, the same under the same seed (Release.write too);
    --keep-order keeps the input's order and says so."""
    folder, data = files
    args = ["run", str(folder / "recipe.toml"), "--input", str(folder / "in.csv"), "--seed", "3", "-q"]
    assert main([*args, "--output", str(folder / "one.csv")]) == 0
    assert main([*args, "--output", str(folder / "two.csv")]) == 0
    one, two = pd.read_csv(folder / "one.csv"), pd.read_csv(folder / "two.csv")
    assert one.equals(two) and not one["id"].equals(data["id"])
    release = privclust.run(privclust.Recipe.from_toml((folder / "recipe.toml").read_text()), data, seed=3)
    release.write(folder / "api.csv")
    assert pd.read_csv(folder / "api.csv").equals(one)
    release.write(folder / "kept.parquet", keep_order=True)
    assert pd.read_parquet(folder / "kept.parquet")["id"].equals(data["id"])
    assert main([*args, "--output", str(folder / "kept.csv"), "--keep-order"]) == 0
    kept = pd.read_csv(folder / "kept.csv")
    assert kept["id"].equals(data["id"]) and kept.sort_values("id").reset_index(drop=True).equals(
        one.sort_values("id").reset_index(drop=True))


@pytest.mark.parametrize("flag, name", [("--report", "seed.json"), ("--output", "seed.csv"),
                                        ("--report", "seed.html"), ("--report", "seed.htm")])
def test_no_output_overwrites_the_seed_file(files, capsys, flag, name):
    """--seed-file is an input: `--report seed.json --seed-file seed.json`
    overwrote the seed with the report (and `-o seed.csv` with the data)."""
    folder, _ = files
    seed = folder / name if not name.endswith((".html", ".htm")) else folder / "seed.json"
    seed.write_text("4242\n")
    outputs = {"--output": str(folder / "out.csv"), "--report": str(folder / "r.json"), flag: str(folder / name)}
    before = listing(folder)
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "--seed-file", str(seed), "-q",
                 *[x for kv in outputs.items() for x in kv]])
    assert code == 1
    err = capsys.readouterr().err
    assert "--seed-file" in err and "the input is never overwritten" in err
    assert seed.read_text() == "4242\n" and listing(folder) == before


def test_no_output_overwrites_the_seed_file_of_a_dataset_run(files, capsys):
    pytest.importorskip("pyarrow")
    folder, data = files
    data.assign(region=data["id"] % 2).to_parquet(folder / "ds", partition_cols=["region"])
    (folder / "r.toml").write_text(RECIPE + '\n[roles]\nstrata = "region"\n')
    (folder / "seed.json").write_text("7\n")
    code = main(["run", str(folder / "r.toml"), "-i", str(folder / "ds"), "-o", str(folder / "out"),
                 "--report", str(folder / "seed.json"), "--seed-file", str(folder / "seed.json"), "-q"])
    assert code == 1 and "--seed-file" in capsys.readouterr().err
    assert (folder / "seed.json").read_text() == "7\n" and not (folder / "out").exists()


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
        (RECIPE.replace("epsilon = 1.0\nbounds", "epsilon = 2.0\nbounds"), "need at least epsilon = 2"),
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
    # written as privclust run writes (Release.write, tested for its order), and saying so
    assert pd.read_csv(tmp_path / "demo.csv").shape[0] == 12 and f"(12 records, {SEEDED_ORDER})" in out
    # each evaluation says what its figures are computed on (the lines named no column)
    evaluations = " ".join(out.split("Evaluations:")[1].split("Ledger:")[0].split())
    assert re.search(r"il1s il1s = [0-9.e+-]+ \(on exp16, exp7, total\)", evaluations)


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
    import privclust.cli

    monkeypatch.setattr(privclust.cli, "run", lambda *a, **k: pytest.fail("ran before checking the folder"))
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o",
                 str(folder / "nowhere" / "out.csv"), "-q"])
    assert code == 1 and "the folder" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# All-or-nothing outputs: refusals before the run, one transaction, signals
# ---------------------------------------------------------------------------


def no_run(monkeypatch):
    """Make any computation fail the test: the refusals must come first."""
    import privclust.cli

    monkeypatch.setattr(privclust.cli, "run", lambda *a, **k: pytest.fail("ran before refusing the outputs"))


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (["-o", "in.csv"], "--output in.csv is the same file as --input"),
        (["-o", "sub/../in.csv"], "is the same file as --input"),
        (["-o", "link.csv"], "is the same file as --input"),  # a hard link to the input
        (["-o", "dir.csv"], "it is a folder"),
        (["-o", "out.csv", "--report", "dir.json"], "it is a folder"),
        (["-o", "in.csv/out.csv"], "in.csv is a file, not a folder"),
        (["-o", "out.csv", "--report", "dir.json/r.json"], ""),  # inside a folder: fine (checked below)
    ],
)
def test_outputs_that_would_clobber_or_cannot_be_written_are_refused_first(files, capsys, monkeypatch, outputs,
                                                                           message):
    folder, _ = files
    (folder / "sub").mkdir()
    (folder / "dir.csv").mkdir()
    (folder / "dir.json").mkdir()
    os.link(folder / "in.csv", folder / "link.csv")
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        if not message:
            assert main(["run", "recipe.toml", "-i", "in.csv", *outputs, "-q"]) == 0
            assert (folder / "dir.json" / "r.json").is_file()
            return
        no_run(monkeypatch)
        code = main(["run", "recipe.toml", "-i", "in.csv", *outputs, "-q"])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    assert code == 1 and message in err and err.count("\n") == 1, err
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before


def test_two_outputs_of_a_comparison_with_one_path_are_refused(files, capsys, monkeypatch):
    folder, _ = files
    module = sys.modules["privclust.cli"]
    monkeypatch.setattr(module, "compare", lambda *a, **k: pytest.fail("ran before refusing"))
    code = main(["compare", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "r.csv"),
                 "--summary", str(folder / "r.csv"), "-q"])
    assert code == 1 and "--output and --summary are the same file" in capsys.readouterr().err
    code = main(["compare", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "in.csv"),
                 "-q"])
    assert code == 1 and "is the same file as --input" in capsys.readouterr().err
    code = main(["compare", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "r.csv"),
                 "--plot", str(folder / "map.gif"), "-q"])
    assert code == 1 and "a plot is written as .png, .svg or .pdf" in capsys.readouterr().err
    assert listing(folder) == {"in.csv", "recipe.toml"}


def test_the_json_beside_an_html_report_counts_as_an_output():
    from privclust._io import check_outputs
    from privclust.cli_options import report_paths as _report_paths

    paths = _report_paths(Path("r.html"))
    assert paths == {"--report": Path("r.html"), "the JSON written beside --report": Path("r.json")}
    with pytest.raises(privclust_error(), match="--summary and the JSON written beside --report are the same file"):
        check_outputs({"--summary": Path("r.json"), **paths})


def privclust_error():
    from privclust import PrivclustError

    return PrivclustError


def test_an_unwritable_folder_is_found_by_a_real_write_before_the_run(files, capsys, monkeypatch):
    """Root ignores permission bits, so the folder is made unwritable by making
    the probe's file creation fail, exactly as a read-only mount or a full
    disk would; as a normal user the folder is also really made read-only."""
    folder, _ = files
    target = folder / "ro"
    target.mkdir()
    import tempfile

    real = tempfile.mkstemp

    def refuse(*args, dir=None, **kwargs):  # noqa: A002
        if dir is not None and Path(dir).resolve() == target.resolve():
            raise PermissionError(13, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    no_run(monkeypatch)
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(target / "out.csv"),
                 "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "is not writable (Permission denied)" in err
    assert list(target.iterdir()) == []


def test_a_read_only_file_system_is_found_before_the_run(files, capsys, monkeypatch):
    """/sys cannot be written even by root (a real write probe, no mock)."""
    folder, _ = files
    import tempfile

    try:
        fd, name = tempfile.mkstemp(dir="/sys")
    except OSError:
        pass
    else:  # pragma: no cover - an unusual system where /sys is writable
        os.close(fd)
        os.unlink(name)
        pytest.skip("/sys is writable here")
    no_run(monkeypatch)
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", "/sys/out.csv", "-q"])
    assert code == 1 and "the folder /sys is not writable" in capsys.readouterr().err


def test_a_failing_second_output_leaves_every_existing_target_untouched(files, monkeypatch):
    folder, _ = files
    (folder / "out.csv").write_text("old output\n")
    (folder / "r.json").write_text("old report\n")
    import privclust.cli

    def broken(text):
        def write(tmp):
            tmp.write_text(text[:10])
            raise OSError(28, "No space left on device")

        return write

    monkeypatch.setattr(privclust.cli, "text_writer", broken)
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "out.csv"),
                 "--report", str(folder / "r.json"), "-q"])
    assert code == 1
    assert (folder / "out.csv").read_text() == "old output\n" and (folder / "r.json").read_text() == "old report\n"
    assert listing(folder) == {"in.csv", "recipe.toml", "out.csv", "r.json"}


def test_duplicate_csv_headers_are_refused_naming_the_columns(files, capsys):
    folder, _ = files
    (folder / "dup.csv").write_text("a,b,a,b,c\n1,2,3,4,5\n")
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "dup.csv"), "-o", str(folder / "o.csv"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "'a' (columns 1, 3); 'b' (columns 2, 4)" in err and "a.1" not in err
    import gzip

    with gzip.open(folder / "dup.csv.gz", "wt") as handle:
        handle.write("x,x\n1,2\n")
    from privclust._io import read_frame

    with pytest.raises(privclust_error(), match="'x' .columns 1, 2."):
        read_frame(folder / "dup.csv.gz")


DRIVER = """
import os, sys, time
from pathlib import Path
import privclust.cli as cli

real = cli.frame_writer

def slow(frame, path, order=None):
    write = real(frame, path, order)

    def slow_write(tmp):
        write(tmp)
        Path("writing").write_text(str(tmp))  # the temporary file exists now
        time.sleep(float(os.environ.get("SLEEP", "120")))

    return slow_write

cli.frame_writer = slow
cli.entry()  # the console script: exits at once after an interruption
"""


def stopped(process: subprocess.Popen, signame: str) -> str:
    """Send ``signame`` to the command, wait for it to end and check its status, 128 + the signal's number (130 for
    SIGINT); returns what it printed on standard error."""
    import signal

    try:
        process.send_signal(getattr(signal, signame))
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + getattr(signal, signame), err
    return err


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_writing_removes_the_temporaries(files, signame):
    import time

    folder, _ = files
    (folder / "driver.py").write_text(DRIVER)
    (folder / "out.csv").write_text("old output\n")
    process = subprocess.Popen([sys.executable, "driver.py", "run", "recipe.toml", "-i", "in.csv", "-o", "out.csv",
                                "--report", "r.html", "-q"], cwd=folder, stderr=subprocess.PIPE, text=True,
                               preexec_fn=default_stop_signals)
    try:
        for _ in range(1200):
            if (folder / "writing").exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        assert (folder / "writing").exists(), "the run never reached the writes"
        assert any(p.name.endswith(".tmp") for p in folder.iterdir())
    except BaseException:
        process.kill()
        raise
    err = stopped(process, signame)
    assert "interrupted" in err and "nothing was written" in err and "Traceback" not in err
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert (folder / "out.csv").read_text() == "old output\n"
    assert not (folder / "r.html").exists() and not (folder / "r.json").exists()


def test_signal_handlers_are_restored_after_main(files):
    import signal

    folder, _ = files
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "o.csv"), "-q"])
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_ignored_at_start_stays_ignored(files):
    """`nohup privclust run ...`: SIGHUP is ignored, the run finishes and writes."""
    import signal
    import time

    folder, _ = files
    (folder / "driver.py").write_text(DRIVER)
    process = subprocess.Popen([sys.executable, "driver.py", "run", "recipe.toml", "-i", "in.csv", "-o", "out.csv",
                                "-q"], cwd=folder, stderr=subprocess.PIPE, text=True, env={**os.environ, "SLEEP": "2"},
                               preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        for _ in range(1200):
            if (folder / "writing").exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGHUP)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert pd.read_csv(folder / "out.csv").shape == (30, 3)
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_check_says_what_an_allow_leaks_opt_in_costs(tmp_path, capsys):
    recipe = tmp_path / "leak.toml"
    recipe.write_text('[privacy]\nallow_leaks = ["bounds"]\n\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\n'
                      'bounds = "data"\n', encoding="utf-8")
    assert main(["check", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "allow_leaks: bounds" in out and "no differential-privacy guarantee" in out


def test_run_reads_standard_input_and_writes_standard_output(tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "lap.toml"
    recipe.write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\nbounds = { a = [0, 10], b = [0, 10] }\n',
                      encoding="utf-8")
    csv_text = "a,b\n" + "".join(f"{i % 10},{(3 * i) % 10}\n" for i in range(30))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(csv_text.encode())))
    assert main(["run", str(recipe), "-i", "-", "-o", "-", "--seed", "1", "--report", str(tmp_path / "r.json")]) == 0
    captured = capsys.readouterr()
    released = pd.read_csv(io.StringIO(captured.out))
    assert list(released.columns) == ["a", "b"] and len(released) == 30
    assert f"wrote standard output (30 records, {SEEDED_ORDER}) and" in captured.err \
        and (tmp_path / "r.json").is_file()
    assert not list(tmp_path.glob("-*"))  # no file named '-'


def test_an_empty_or_ambiguous_standard_input_is_refused(tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "lap.toml"
    recipe.write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\nbounds = { a = [0, 10] }\n', encoding="utf-8")
    for text, message in [("", "standard input (--input -) is empty"),
                          ("a,a\n1,2\n", "the header names a column more than once")]:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
        assert main(["run", str(recipe), "-i", "-", "-o", str(tmp_path / "o.csv")]) == 1
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


FASTNOISE = '''
"""An installed plugin whose laplace replaces the built-in one."""
from typing import ClassVar

import attrs
import privclust


@attrs.frozen(kw_only=True)
class Laplace:
    name: ClassVar[str] = "laplace"
    uses_constraints: ClassVar[bool] = False
    epsilon: float | None = privclust.param(float, default=None, gt=0)
    bounds: object = privclust.param(default=None)

    def planned_cost(self):
        return (self.epsilon, 0.0)

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, not_covered="", **kw):
        raise NotImplementedError

    def perturb(self, data, context):
        context.spend(epsilon=self.epsilon, mechanism="fastnoise laplace", sensitivity=1.0,
                      relation="replace-one", covers="every released value")
        return privclust.Masked(data=data + context.rng.laplace(0, 1 / self.epsilon, data.shape))


@privclust.hookimpl
def privclust_register_noise_mechanisms(register):
    register(Laplace, replaces="noise:laplace")
'''


def test_the_command_works_with_an_installed_plugin_that_replaces_a_builtin(files):
    """A distribution on the path (an entry point in the privclust group) replaces `laplace`: every command
    works, `plugins` says who replaced what, the report names the replacing plugin, the built-in comes back."""
    folder, _ = files
    site = folder / "site"
    (site / "fastnoise").mkdir(parents=True)
    (site / "fastnoise" / "__init__.py").write_text(FASTNOISE)
    info = site / "fastnoise-3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fastnoise\nVersion: 3.1\n")
    (info / "entry_points.txt").write_text("[privclust]\nfast = fastnoise\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PRIVCLUST_DISABLE_PLUGINS"}, "PYTHONPATH": str(site)}
    exe = str(Path(sys.executable).with_name("privclust"))

    def privclust(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], capture_output=True, text=True, env={**env, **extra}, timeout=300)

    listed = privclust("plugins")
    assert listed.returncode == 0, listed.stderr
    assert ["noise_mechanisms", "laplace", "fast", "fastnoise", "3.1", "noise:laplace"] in [
        line.split() for line in listed.stdout.splitlines()]
    assert "noise mechanism 'laplace' of plugin 'noise' (privclust" in listed.stdout
    assert "replaced by the one of plugin 'fast'; choose it back in a recipe with use = \"noise:laplace\"" in (
        listed.stdout)
    payload = json.loads(privclust("plugins", "--json").stdout)
    assert [(c["plugin"], c["replaced_by"]) for c in payload["replaced"]] == [("noise", "fast")]
    ran = privclust("run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "out.csv"),
                    "--report", str(folder / "report.json"), "--seed", "1")
    assert ran.returncode == 0, ran.stderr
    report = json.loads((folder / "report.json").read_text())
    assert (report["steps"][0]["plugin"], report["steps"][0]["distribution"]) == ("fast", "fastnoise")
    assert [e["details"]["plugin"] for e in report["ledger"] if e["kind"] == "process"] == ["fast"]
    assert [e["mechanism"] for e in report["ledger"] if e["kind"] == "dp"] == ["fastnoise laplace"]
    # the built-in back, for every recipe, by blocking the replacement
    ran = privclust("run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "b.csv"),
                    "--report", str(folder / "b.json"), "--seed", "1", PRIVCLUST_DISABLE_PLUGINS="fast:laplace")
    assert ran.returncode == 0, ran.stderr
    assert json.loads((folder / "b.json").read_text())["steps"][0]["plugin"] == "noise"


def test_check_lists_the_columns_each_step_changes_and_those_released_as_they_are(tmp_path, capsys):
    (tmp_path / "d.csv").write_text("a,b,c\n" + "".join(f"{i},{i * 2},{i * 3}\n" for i in range(20)),
                                    encoding="utf-8")
    (tmp_path / "r.toml").write_text(
        '[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\nbounds = { a = [0, 20] }\n\n'
        '[[steps]]\nuse = "mdav"\nk = 3\ncolumns = ["b", "c"]\noutput = "group"\n', encoding="utf-8")
    assert main(["check", str(tmp_path / "r.toml"), "-i", str(tmp_path / "d.csv")]) == 0
    out = capsys.readouterr().out
    assert "step 0 'laplace' changes a\n" in out
    assert "step 1 'mdav' changes no value; it adds the label column 'group'" in out
    assert "released as in the data: b, c" in out


def test_stop_signals_are_held_for_the_whole_process_not_one_thread():
    """A process-directed signal goes to any thread that does not block it: a
    thread mask let the handler run inside the renames while another thread
    was alive. Held, it is delivered when the block ends."""
    import os
    import signal
    import threading
    import time

    from privclust._io import signals_held

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)  # another live thread, as numpy's and the allocator's are
    worker.start()
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever an earlier test installed
    try:
        reached = False
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler would run here if the signal were not held
                reached = True
        assert reached
    finally:
        signal.signal(signal.SIGINT, before)
        stop.set()
        worker.join()


def test_a_replaced_output_keeps_its_permissions(tmp_path):
    import os
    import stat

    from privclust._io import text_writer, write_atomically

    report = tmp_path / "r.json"
    report.write_text("old")
    os.chmod(report, 0o600)
    write_atomically([(report, text_writer("new"))])
    assert report.read_text() == "new" and stat.S_IMODE(os.stat(report).st_mode) == 0o600
    fresh = tmp_path / "fresh.json"
    write_atomically([(fresh, text_writer("x"))])
    assert stat.S_IMODE(os.stat(fresh).st_mode) & 0o600 == 0o600


def test_an_output_name_too_long_for_the_file_system_is_refused_before_any_work(files, capsys, monkeypatch):
    import privclust.cli as cli

    folder, _ = files
    ran = []
    monkeypatch.setattr(cli, "run", lambda *a, **k: ran.append(1))  # never reached
    name_max = os.pathconf(folder, "PC_NAME_MAX")
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o",
                 str(folder / ("a" * (name_max - 3) + ".csv")), "-q", "--seed", "1"])
    assert code == 1 and not ran
    assert f"more than the {name_max} bytes a name may have" in capsys.readouterr().err
    assert listing(folder) == {"in.csv", "recipe.toml"}


def test_an_output_name_that_fits_is_written_though_its_temporary_name_would_not(files, capsys):
    folder, _ = files
    name = "a" * (os.pathconf(folder, "PC_NAME_MAX") - 7) + ".csv"  # '.<name>.XXXXXXXX.tmp' is 14 bytes longer
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / name),
                 "-q", "--seed", "1"])
    assert code == 0, capsys.readouterr().err
    assert listing(folder) == {"in.csv", "recipe.toml", name}


def test_an_output_that_is_a_symbolic_link_is_written_through_it(files, capsys):
    folder, _ = files
    (folder / "store").mkdir()
    real = folder / "store" / "real.csv"
    real.write_text("old\n")
    real.chmod(0o640)
    (folder / "link.csv").symlink_to(real)
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "link.csv"),
                 "-q", "--seed", "1"])
    assert code == 0, capsys.readouterr().err
    assert (folder / "link.csv").is_symlink() and os.readlink(folder / "link.csv") == str(real)  # the link stays
    assert pd.read_csv(real).shape == (30, 3) and (real.stat().st_mode & 0o777) == 0o640  # its target replaced
    assert listing(folder / "store") == {"real.csv"}  # no temporary file left beside the target
    (folder / "dangling.csv").symlink_to(folder / "store" / "new.csv")
    assert main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o",
                 str(folder / "dangling.csv"), "-q", "--seed", "1"]) == 0
    assert (folder / "store" / "new.csv").is_file() and (folder / "dangling.csv").is_symlink()
    (folder / "loop.csv").symlink_to(folder / "loop.csv")
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "loop.csv"),
                 "-q", "--seed", "1"])
    assert code == 1 and "symbolic link that cannot be followed" in capsys.readouterr().err
    (folder / "to-input.csv").symlink_to(folder / "in.csv")
    code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "to-input.csv"),
                 "-q", "--seed", "1"])
    assert code == 1 and "is the same file as --input" in capsys.readouterr().err


def test_check_states_the_planned_epsilon_rounded_up(tmp_path, capsys):
    """`privclust check` said "the steps declare epsilon 0.3 in all" for
    0.1 + 0.2 = 0.30000000000000004: a figure below the one planned."""
    (tmp_path / "r.toml").write_text(
        '[privacy]\nepsilon = 0.3000001\n\n[[steps]]\nuse = "laplace"\nepsilon = 0.1\ncolumns = ["a"]\n'
        'bounds = { a = [0, 1] }\n\n[[steps]]\nuse = "laplace"\nepsilon = 0.2\ncolumns = ["b"]\n'
        'bounds = { b = [0, 1] }\n', encoding="utf-8")
    assert main(["check", str(tmp_path / "r.toml")]) == 0
    out = capsys.readouterr().out
    assert "budget: epsilon 0.3000001, delta 0; the steps declare at least epsilon 0.300001 in all" in out


def test_an_error_in_a_named_recipe_names_its_file_not_its_name(tmp_path, capsys):
    """Compiling names a recipe by its ``name``; the command line names the file it was given (audit16b:
    "recipe noisy expenditure: ..." said which recipe, not which file)."""
    recipe = tmp_path / "named.toml"
    recipe.write_text('name = "noisy expenditure"\n[privacy]\nepsilon = 0.5\n[[steps]]\nuse = "laplace"\n'
                      'epsilon = 1.0\nbounds = { a = [0, 10] }\n')
    data = tmp_path / "in.csv"
    data.write_text("a\n1\n2\n")
    for argv in (["check", str(recipe)], ["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o.csv")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"privclust: error: recipe {recipe}: privacy.epsilon: the steps need at least epsilon = 1" in err
        assert "noisy expenditure" not in err


def test_check_names_what_it_leaves_to_run(tmp_path, capsys):
    """A step whose component refuses values as it runs passes check's checks and is refused by run: check's OK
    said nothing of what it had not checked (audit16b); its last line names it."""
    data = tmp_path / "in.csv"
    data.write_text("a,b\n" + "".join(f"{v},{i}\n" for i, v in enumerate([1e301, 2, 3, 4, 5, 6, 7, 8])))
    recipe = tmp_path / "fcm.toml"
    recipe.write_text('[[steps]]\nuse = "microaggregation"\nk = 2\n')
    assert main(["check", str(recipe), "--input", str(data)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("  checked only as the recipe runs: the components' checks of the values that they do not state "
                       "before the run (such as the fuzzy clusterers' limit of 1e300 on magnitudes), bounds taken from "
                       "the data or by a DP quantile, and the partition an evaluator needs from the steps (such as "
                       "group-sizes')")
    assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o.csv"), "-q"]) == 1
    assert "hold values above 1e+300 in magnitude" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_geometric_rounds_decimals_rather_than_refuse_them(tmp_path):
    """A refusal of decimals would tell a data set of whole numbers from its neighbour with one decimal (red-team
    audit): geometric rounds each value to the nearest integer, then clips and noises it, and says so."""
    data = tmp_path / "in.csv"
    data.write_text("a\n1.5\n2.5\n3.5\n")
    recipe = tmp_path / "geo.toml"
    recipe.write_text('[[steps]]\nuse = "geometric"\nepsilon = 1.0\nbounds = { a = [0, 10] }\n')
    assert main(["run", str(recipe), "-i", str(data), "-o", str(tmp_path / "o.csv"), "-q", "--report",
                 str(tmp_path / "r.json")]) == 0
    assert pd.read_csv(tmp_path / "o.csv")["a"].dtype == np.int64
    assert "rounded to the nearest integer first" in (tmp_path / "r.json").read_text()


def test_a_csv_line_with_more_values_than_the_header_is_refused(tmp_path, capsys):
    """A first data line with one value more than the header made pandas read the first column as the row
    index: every value moved one column left, the first column's values were dropped, and the run released
    the file so shifted (audit16b). A trailing separator on every line stays accepted."""
    recipe = tmp_path / "r.toml"
    recipe.write_text('[[steps]]\nuse = "microaggregation"\nk = 2\n')
    shifted = tmp_path / "shifted.csv"
    shifted.write_text("a,b\n1,2,3\n3,4\n5,6\n7,8\n9,10\n")
    out = tmp_path / "o.csv"
    assert main(["run", str(recipe), "-i", str(shifted), "-o", str(out), "-q"]) == 1
    assert "a line has more values than the header has column names" in capsys.readouterr().err
    assert not out.exists()
    trailing = tmp_path / "trailing.csv"
    trailing.write_text("a,b\n1,2,\n3,4,\n5,6,\n7,8,\n")
    from privclust._io import read_frame

    assert read_frame(trailing).to_dict("list") == {"a": [1, 3, 5, 7], "b": [2, 4, 6, 8]}


def test_check_says_it_does_not_read_a_dataset_folder(tmp_path, capsys):
    """run protects a Parquet dataset (a folder); check --input called it "unknown file type" (audit16b)."""
    folder = tmp_path / "dataset"
    folder.mkdir()
    recipe = tmp_path / "r.toml"
    recipe.write_text('[[steps]]\nuse = "microaggregation"\nk = 2\n')
    assert main(["check", str(recipe), "--input", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"--input {folder} is a folder: check does not read a Parquet dataset" in err
    assert "unknown file type" not in err


# ---------------------------------------------------------------------------
# Numeric options and seed files (issue 24, item 7)
# ---------------------------------------------------------------------------

NUMERIC_CASES = [
    (command, option, value)
    for command, options in (("run", ("--seed", "--processes", "--timeout")),
                             ("compare", ("--seed", "--processes", "--timeout", "--repeats")),
                             ("audit", ("--seed",)), ("demo", ("--seed",)))
    for option in options
    for value in ("-1", "0", "nan", "inf", "-inf", "1.5", "1e3", str(2**128), "9" * 5000, "x", "")
    if not (option == "--seed" and value == "0") and not (option == "--timeout" and value in ("1.5", "1e3"))
]


@pytest.mark.parametrize(("command", "option", "value"), NUMERIC_CASES)
def test_every_numeric_option_is_bounded_with_a_one_line_error(files, capsys, monkeypatch, command, option, value):
    import privclust.cli as cli

    folder, _ = files
    reached = []
    for name in ("run", "compare"):
        monkeypatch.setattr(cli, name, lambda *a, **k: reached.append(1))
    monkeypatch.setattr(cli.testing, "audit_recipe", lambda *a, **k: reached.append(1))
    args = {"run": ["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "o.csv")],
            "compare": ["compare", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o",
                        str(folder / "o.csv")],
            "audit": ["audit", str(folder / "recipe.toml")], "demo": ["demo"]}[command]
    given = f"{option}={value}"  # "-inf" alone reads as an option to argparse
    code = main([*args, "-q", given] if command in ("run", "compare") else [*args, given])
    err = capsys.readouterr().err
    assert code == 1 and not reached, err
    assert err.startswith(f"privclust: error: {option}") and err.count("\n") == 1 and "Traceback" not in err
    assert listing(folder) == {"in.csv", "recipe.toml"}


def test_the_bounds_of_a_seed_are_accepted(files, capsys):
    folder, _ = files
    for seed in ("0", str(2**128 - 1), " 7 "):
        code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "o.csv"),
                     "-q", "--seed", seed])
        assert code == 0, capsys.readouterr().err


def test_a_seed_file_is_a_small_regular_file(files, capsys):
    folder, _ = files
    os.mkfifo(folder / "fifo")  # opened without waiting for a writer
    (folder / "dir").mkdir()
    (folder / "long").write_text("1" * 300)
    (folder / "binary").write_bytes(b"\xff\xfe1")
    (folder / "negative").write_text("-5\n")
    (folder / "typo").write_text("98765432l0\n")  # a seed with a typo is still most of a seed: never echoed
    (folder / "link").symlink_to("/dev/zero")
    for path, message in (("/dev/zero", "it is not a regular file"), (folder / "link", "it is not a regular file"),
                          (folder / "fifo", "it is not a regular file"), (folder / "dir", "it is a folder"),
                          (folder / "long", "longer than 256 bytes"), (folder / "binary", "the file is not text"),
                          (folder / "negative", "at most 2^128 - 1; got a negative number"),
                          (folder / "typo", "got 10 character(s) that are not one (not shown: it may be a seed)"),
                          (folder / "missing", "cannot read it")):
        code = main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "o.csv"),
                     "-q", "--seed-file", str(path)])
        err = capsys.readouterr().err
        assert code == 1 and f"--seed-file {path}: " in err and message in err, err
        assert err.count("\n") == 1 and "Traceback" not in err and "98765" not in err
    (folder / "seed").write_text("  42\n")
    assert main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "o.csv"),
                 "-q", "--seed-file", str(folder / "seed")]) == 0


@pytest.mark.parametrize(("extra", "message"), [
    ([], "--plot needs a risk figure and no evaluator of the recipes is one by its name (evaluators: none"),
    (["--risk", "dbrl.dbrl"], "--risk dbrl.dbrl: no evaluator of the recipes computes it"),
    (["--risk", "ari.ari"], "--risk ari.ari: a figure where higher is better"),
    (["--risk", "sse-sst.sse", "--loss", "dbrl.x"], "--loss dbrl.x: no evaluator of the recipes computes it"),
])
def test_compare_checks_its_plot_before_the_first_run(files, capsys, monkeypatch, extra, message):
    import privclust.cli as cli

    folder, _ = files
    recipe = folder / "evaluated.toml"
    recipe.write_text(RECIPE + '\n[[evaluate]]\nuse = "sse-sst"\n' if extra else RECIPE)
    reached = []
    monkeypatch.setattr(cli, "compare", lambda *a, **k: reached.append(1))
    code = main(["compare", str(recipe), "-i", str(folder / "in.csv"), "-o", str(folder / "t.csv"), "-q", "--plot",
                 str(folder / "map.png"), *extra])
    err = capsys.readouterr().err
    assert code == 1 and not reached and message in err, err
    assert not (folder / "t.csv").exists() and not (folder / "map.png").exists()


def test_compare_draws_a_map_whose_figures_it_checked(files, capsys):
    folder, _ = files
    (folder / "evaluated.toml").write_text(RECIPE + '\n[[evaluate]]\nuse = "sse-sst"\n\n[[evaluate]]\nuse = "dbrl"\n')
    code = main(["compare", str(folder / "evaluated.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "t.csv"),
                 "-q", "--plot", str(folder / "map.png"), "--processes", "1", "--seed", "1"])
    assert code == 0, capsys.readouterr().err
    assert (folder / "map.png").stat().st_size > 0 and len(pd.read_csv(folder / "t.csv")) == 1


SWALLOWING_DRIVER = """
import os, signal, sys
from privclust import cli
from privclust._signals import Interrupted

def swallowing(args):
    # what matplotlib's renderer did with a SIGTERM that landed in its C++ code: the interruption replaced by
    # another error (ValueError: Invalid bounding box)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10 ** 6):  # the handler runs at the next bytecode
            pass
    except Interrupted:
        raise ValueError("Invalid bounding box") from None
    return 0

cli._COMMANDS["demo"] = swallowing
sys.argv = ["privclust", "demo"]
cli.entry()
"""


def test_a_stop_signal_that_a_library_turned_into_another_error_still_reads_as_interrupted(tmp_path):
    """Red-team audit: a SIGTERM landing while the HTML report's plot was drawn came out of matplotlib as
    "ValueError: Invalid bounding box", a traceback with status 1, not 143 and "interrupted"."""
    (tmp_path / "driver.py").write_text(SWALLOWING_DRIVER)
    process = subprocess.run([sys.executable, "driver.py"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, preexec_fn=default_stop_signals)
    assert process.returncode == 143, process.stderr
    assert "interrupted by SIGTERM" in process.stderr and "Traceback" not in process.stderr


def test_check_says_only_what_it_checked_of_this_recipe(tmp_path, capsys):
    """Red-team audit: for local-suppression on text keys, check said the columns were "numeric and finite", and
    affirmed a bounds table and edit rules the recipe does not have (a fixed sentence)."""
    rows = "".join(f"{s},{j}\n" for s, j in zip("fmfmfmfm", "aabbccdd", strict=True))
    (tmp_path / "d.csv").write_text("sex,job\n" + rows)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "local-suppression"\nk = 2\ncolumns = ["sex", "job"]\n')
    assert main(["check", str(tmp_path / "r.toml"), "--input", str(tmp_path / "d.csv")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "8 records;" in x)
    assert "numeric and finite" not in line and "bounds table" not in line and "edit rule" not in line
    assert "every column of the steps and the roles is present" in line
    assert "step 0 'local-suppression' accepts the values of its columns (the step's own checks)" in line
