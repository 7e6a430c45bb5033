"""A command's outputs (issue 24, item 6): only regular files are written, the data file and the report(s) are
committed together or not at all, the temporaries of a killed run are removed by the next run, and a stop signal at
any moment (start-up included) gives 128 + its number without a traceback."""

from __future__ import annotations

import fcntl
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import default_stop_signals
from test_cli import RECIPE, stopped

import privclust._io as io_
from privclust import PrivclustError
from privclust._io import check_outputs, text_writer, write_atomically
from privclust.cli import main


@pytest.fixture
def files(tmp_path, monkeypatch):
    """The files of test_cli's fixture (a 30-record data set and a laplace recipe), the test run in their folder."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"id": range(30), "a": rng.uniform(0, 10, 30), "b": rng.uniform(0, 10, 30)}).to_csv(
        tmp_path / "in.csv", index=False)
    (tmp_path / "recipe.toml").write_text(RECIPE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*extra: str) -> int:
    return main(["run", "recipe.toml", "-i", "in.csv", "-q", "--seed", "1", *extra])


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def reached(process: subprocess.Popen, marker: str) -> None:
    """Wait until the driver run by ``process`` writes the file ``marker`` (the process is killed if it never does)."""
    try:
        for _ in range(1200):
            if Path(marker).exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        assert Path(marker).exists(), f"the command never wrote {marker}"
    except BaseException:
        process.kill()
        raise


# ---------------------------------------------------------------------------
# Outputs that are not regular files
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["-o", "--report"])
def test_a_fifo_output_is_refused_before_anything_runs(files, capsys, option):
    os.mkfifo("pipe.json")
    args = ["-o", "out.csv", "--report", "pipe.json"] if option == "--report" else ["-o", "pipe.json"]
    if option == "-o":
        os.rename("pipe.json", "pipe.csv")
        args = ["-o", "pipe.csv"]
    assert run(*args) == 1
    err = capsys.readouterr().err
    name = "pipe.json" if option == "--report" else "pipe.csv"
    assert f"cannot write {name} ({'--report' if option == '--report' else '--output'}): it is a FIFO" in err
    assert stat.S_ISFIFO(os.lstat(name).st_mode) and not Path("out.csv").exists()
    assert temporaries(files) == []


def test_a_link_to_dev_null_at_any_depth_is_refused_and_dev_null_is_untouched(files, capsys):
    before = os.stat("/dev/null")
    Path("null.csv").symlink_to("/dev/null")
    Path("deeper.csv").symlink_to(files / "null.csv")  # a link to a link to the device
    for name in ("null.csv", "deeper.csv"):
        assert run("-o", name) == 1
        err = capsys.readouterr().err
        assert f"cannot write {name} (--output): {name} is a symbolic link to /dev/null, which is a character " \
               "device" in err and "or - for standard output" in err
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert Path("null.csv").is_symlink() and Path("deeper.csv").is_symlink()


def test_a_socket_output_is_refused(files, capsys):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("sock.csv")  # relative to the test's folder: a unix socket's path is at most 107 bytes
        assert run("-o", "sock.csv") == 1
        assert "cannot write sock.csv (--output): it is a socket" in capsys.readouterr().err
        assert stat.S_ISSOCK(os.lstat("sock.csv").st_mode)
    finally:
        server.close()


def test_an_output_that_becomes_a_fifo_after_the_checks_is_not_replaced(files):
    check_outputs({"--output": "late.csv"})
    os.mkfifo("late.csv")  # after the checks, before the commit
    with pytest.raises(PrivclustError, match="late.csv: it is a FIFO"):
        write_atomically([(Path("late.csv"), text_writer("new\n"))])
    assert stat.S_ISFIFO(os.lstat("late.csv").st_mode) and temporaries(files) == []


# ---------------------------------------------------------------------------
# All outputs or none
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("failing", ["r.html", "r.json"])
def test_a_failed_rename_of_a_report_puts_every_output_back(files, capsys, monkeypatch, failing):
    Path("out.csv").write_text("old output\n")
    Path("r.html").write_text("old report\n")  # r.json does not exist yet: it must not exist afterwards
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == failing and Path(src).name.startswith(f".{failing}.") and str(src).endswith(".tmp"):
            raise OSError(30, "Read-only file system")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    assert run("-o", "out.csv", "--report", "r.html") == 1
    err = capsys.readouterr().err
    assert f"cannot write {failing}: Read-only file system; nothing was written" in err
    assert Path("out.csv").read_text() == "old output\n" and Path("r.html").read_text() == "old report\n"
    assert not Path("r.json").exists() and temporaries(files) == []


def test_a_folder_named_as_the_report_appearing_meanwhile_leaves_every_output_as_it_was(files):
    Path("out.csv").write_text("old output\n")

    def write_and_block(tmp: Path) -> None:
        tmp.write_text("report\n")
        Path("r.json").mkdir()  # the report's final path becomes a folder before the renames

    with pytest.raises(PrivclustError, match="r.json: it is a folder"):
        write_atomically([(Path("out.csv"), text_writer("new\n")), (Path("r.json"), write_and_block)])
    assert Path("out.csv").read_text() == "old output\n" and temporaries(files) == []


def test_a_committed_output_keeps_no_backup_and_the_old_file_is_replaced(files):
    Path("out.csv").write_text("old\n")
    write_atomically([(Path("out.csv"), text_writer("new\n")), (Path("r.json"), text_writer("{}\n"))])
    assert Path("out.csv").read_text() == "new\n" and Path("r.json").read_text() == "{}\n"
    assert temporaries(files) == []


# ---------------------------------------------------------------------------
# Temporaries of a killed run
# ---------------------------------------------------------------------------


def test_the_next_run_removes_only_a_killed_runs_own_temporaries(files):
    gone = dead_pid()
    stale = [f".out.csv.privclust-{gone}.abcd1234.tmp", f".probe.privclust-{gone}.zz_99xyz.tmp"]
    for name in stale:
        Path(name).write_text("half\n")
    kept = [".out.csv.abcd1234.tmp",  # a user's file (or an older version's): not named as privclust names its own
            f".out.csv.privclust-{os.getpid()}.abcd1234.tmp",  # a live process's
            f"out.csv.privclust-{gone}.abcd1234.tmp",  # not hidden: not a name privclust makes
            f".locked.privclust-{gone}.abcd1234.tmp"]  # held locked: a live run in another pid namespace
    for name in kept:
        Path(name).write_text("mine\n")
    Path("elsewhere").mkdir()
    Path("elsewhere", stale[0]).write_text("half\n")  # another folder: not this run's to clean
    holder = os.open(kept[-1], os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert run("-o", "out.csv") == 0
    finally:
        os.close(holder)
    assert temporaries(files) == sorted(kept)
    assert Path("elsewhere", stale[0]).exists()
    assert io_.remove_stale_temporaries(files) == [kept[-1]]  # unlocked now, its process gone


def test_a_killed_run_leaves_temporaries_that_the_next_run_removes(files):
    driver = files / "driver.py"
    driver.write_text(
        "import sys, time\nfrom pathlib import Path\nimport privclust.cli as cli\nreal = cli.frame_writer\n"
        "def slow(frame, path, order=None):\n    write = real(frame, path, order)\n"
        "    def go(tmp):\n        write(tmp)\n        Path('writing').write_text('1')\n        time.sleep(120)\n"
        "    return go\ncli.frame_writer = slow\ncli.entry()\n")
    process = subprocess.Popen([sys.executable, str(driver), "run", "recipe.toml", "-i", "in.csv", "-o", "out.csv",
                                "-q"], cwd=files, stderr=subprocess.DEVNULL)
    reached(process, "writing")
    process.kill()  # SIGKILL: no clean-up can run
    process.wait(timeout=60)
    assert len(temporaries(files)) == 1 and not Path("out.csv").exists()
    assert run("-o", "out.csv") == 0
    assert temporaries(files) == [] and pd.read_csv("out.csv").shape == (30, 3)


# ---------------------------------------------------------------------------
# Signals at start-up
# ---------------------------------------------------------------------------


def _command() -> str:
    path = Path(sys.executable).with_name("privclust")
    if not path.exists():
        pytest.skip("the privclust console script is not installed beside this Python")
    return str(path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_while_the_command_starts_gives_its_status_and_no_traceback(files, signame):
    """The signal is sent as soon as numpy is loaded: the command is still importing its modules (about a second)."""
    process = subprocess.Popen([_command(), "run", "recipe.toml", "-i", "in.csv", "-o", "out.csv", "-q"], cwd=files,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_stop_signals)
    for _ in range(200_000):
        try:
            if "_multiarray_umath" in Path(f"/proc/{process.pid}/maps").read_text():
                break
        except OSError:
            break
    err = stopped(process, signame)
    assert f"interrupted by {signame}; nothing was written" in err and "Traceback" not in err
    assert not Path("out.csv").exists() and temporaries(files) == []


def test_a_signal_after_the_command_has_written_says_what_was_written(files):
    """Between the command's end and the process's exit: 143, no traceback, and the line names the output."""
    (files / "driver.py").write_text(
        "import time\nfrom pathlib import Path\nimport privclust.cli as cli\nreal = cli.main\n"
        "def main(argv=None):\n    status = real(argv)\n    Path('done').write_text('1')\n    time.sleep(120)\n"
        "    return status\ncli.main = main\ncli.entry()\n")
    process = subprocess.Popen([sys.executable, "driver.py", "run", "recipe.toml", "-i", "in.csv", "-o", "out.csv",
                                "-q"], cwd=files, stderr=subprocess.PIPE, text=True, preexec_fn=default_stop_signals)
    reached(process, "done")
    err = stopped(process, "SIGTERM")
    assert "interrupted by SIGTERM; the outputs had already been written: out.csv" in err and "Traceback" not in err
    assert pd.read_csv("out.csv").shape == (30, 3) and temporaries(files) == []
