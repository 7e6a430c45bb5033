"""Red-team round rt18: a release on standard output with a report (a full disk, a reader gone away, a signal while
it streams), a gzip header naming the temporary file, the signal handlers of the command's first lines, an output
linked to a pipe, and the categories a key masker leaves in a categorical column."""

from __future__ import annotations

import errno
import gzip
import json
import os
import pty
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import default_stop_signals

import privclust
from privclust.cli import main
from privclust.errors import PrivclustError

RECIPE = """
[privacy]
epsilon = 1.0

[[steps]]
use = "laplace"
columns = ["a", "b"]
epsilon = 1.0
bounds = { a = [0, 10], b = [0, 10] }
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 2000
    pd.DataFrame({"id": range(n), "a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n)}).to_csv(
        tmp_path / "in.csv", index=False)
    (tmp_path / "recipe.toml").write_text(RECIPE, encoding="utf-8")
    return tmp_path


class _Stdout:
    """A standard output that takes ``limit`` characters, then fails as ``fail`` says: an ``OSError`` to raise, or
    a signal sent to this process (which the command's handlers turn into an exception here)."""

    encoding = "utf-8"

    def __init__(self, limit: int, fail: OSError | int):
        self.limit, self.fail, self.text = limit, fail, ""

    def write(self, text: str) -> int:
        if len(self.text) + len(text) > self.limit:
            if isinstance(self.fail, OSError):
                raise self.fail
            signal.raise_signal(self.fail)
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _run_to_stdout(folder: Path, stdout: _Stdout, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    monkeypatch.setattr("sys.stdout", stdout)
    return main(["run", str(folder / "recipe.toml"), "-i", str(folder / "in.csv"), "-o", "-", "--seed", "1", "-q",
                 *extra])


@pytest.mark.parametrize("fail", [OSError(errno.ENOSPC, "No space left on device"),
                                  BrokenPipeError(errno.EPIPE, "Broken pipe")], ids=["ENOSPC", "EPIPE"])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_a_report_is_not_committed_when_standard_output_fails(files, monkeypatch, capsys, fail, existing):
    """rt18 F1: the report was renamed into place first and the release streamed after it; a full disk or a reader
    gone away then left a report describing 2,000 records next to a cut CSV (an existing report lost), with a
    traceback (ENOSPC) or exit status 0 (EPIPE). Now nothing is committed and the one error line says why."""
    report, html = files / "r.json", files / "r.html"
    if existing:
        report.write_text("OLD\n")
    args = ["--report", str(html)]  # the HTML report and the JSON beside it
    assert _run_to_stdout(files, _Stdout(20_000, fail), monkeypatch, *args) == 1
    err = capsys.readouterr().err
    assert err.count("privclust: error:") == 1 and "Traceback" not in err, err
    assert "cannot write the release to standard output" in err and "it got only part of the CSV" in err
    assert f"{html} and {report} were not written" in err
    assert not html.exists()
    assert (report.read_text() == "OLD\n") if existing else not report.exists()
    assert not [p for p in files.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_reader_gone_away_without_a_report_is_still_status_0(files, monkeypatch, capsys):
    """Without --report, `privclust run ... -o - | head` keeps its documented status 0 and prints nothing."""
    assert _run_to_stdout(files, _Stdout(20_000, BrokenPipeError(errno.EPIPE, "Broken pipe")), monkeypatch) == 0
    assert "error" not in capsys.readouterr().err


def test_a_full_disk_without_a_report_is_one_error_line(files, monkeypatch, capsys):
    """ENOSPC on standard output used to end with a Python traceback (status 1 by accident)."""
    assert _run_to_stdout(files, _Stdout(20_000, OSError(errno.ENOSPC, "No space left on device")), monkeypatch) == 1
    err = capsys.readouterr().err
    assert err.startswith("privclust: error: cannot write the release to standard output (No space left on device)")
    assert "not written" not in err and "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_release_streams_commits_no_report(files, monkeypatch, capsys, signum):
    """rt18 F1, SIGTERM 3 s into a 1,000,000-record release on standard output: exit 143 and "the outputs had already
    been written: r2.json", the old report replaced by one stating the whole release. Now the report is committed only
    after the release was written whole."""
    report = files / "r.json"
    report.write_text("OLD\n")
    status = _run_to_stdout(files, _Stdout(20_000, int(signum)), monkeypatch, "--report", str(report))
    assert status == 128 + signum
    err = capsys.readouterr().err
    assert "nothing was written (standard output holds only part of the released CSV)" in err, err
    assert report.read_text() == "OLD\n"
    assert not [p for p in files.iterdir() if p.name.startswith(".")]


def test_the_release_then_the_report_when_standard_output_takes_it_all(files, monkeypatch, capsys):
    report = files / "r.json"
    report.write_text("OLD\n")
    stdout = _Stdout(10**9, OSError(errno.EIO, "unused"))
    assert _run_to_stdout(files, stdout, monkeypatch, "--report", str(report)) == 0
    assert len(stdout.text.splitlines()) == 2001
    assert json.loads(report.read_text())["data"]["records"] == 2000


def test_a_reader_that_stops_early_gets_no_report_and_status_1(files):
    """The real pipe: `privclust run ... -o - --report r.json | head -2` exited 0 with r.json committed."""
    exe = Path(sys.executable).with_name("privclust")
    report = files / "r.json"
    process = subprocess.Popen([str(exe), "run", "recipe.toml", "-i", "in.csv", "-o", "-", "--report", "r.json", "-q"],
                               cwd=files, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=default_stop_signals)
    assert process.stdout is not None and process.stderr is not None
    head = [process.stdout.readline() for _ in range(2)]
    process.stdout.close()  # as head does after its lines
    err = process.stderr.read().decode()
    assert process.wait() == 1, err
    assert head[0] == b"id,a,b\n"
    assert "the reader went away (broken pipe)" in err and "r.json was not written" in err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert not report.exists()


@pytest.mark.parametrize("where", ["cli", "api"])
def test_a_gzip_release_names_no_temporary_file_and_no_time(files, where):
    """rt18 F2: `gzip -lN rel.csv.gz` gave `.rel.csv.gz.privclust-3726.9awiklub.tmp`, which gunzip -N restored as a
    file the next run removed as a stale temporary; the header also held the process id and the write time."""
    target = files / "rel.csv.gz"
    if where == "cli":
        assert main(["run", str(files / "recipe.toml"), "-i", str(files / "in.csv"), "-o", str(target), "-q",
                     "--seed", "1"]) == 0
    else:
        privclust.run(RECIPE, pd.read_csv(files / "in.csv"), seed=1).write(target)
    raw = target.read_bytes()
    assert raw[:3] == b"\x1f\x8b\x08"
    flags, mtime = raw[3], int.from_bytes(raw[4:8], "little")
    assert not flags & 0x08 and not flags & 0x10, "a file name or a comment in the gzip header"
    assert mtime == 0
    assert b"privclust" not in raw and b".tmp" not in raw
    written = pd.read_csv(target)
    assert list(written.columns) == ["id", "a", "b"] and len(written) == 2000
    assert gzip.decompress(raw).startswith(b"id,a,b\n") and b"\r\n" not in gzip.decompress(raw)


def test_the_handlers_come_before_any_import(tmp_path):
    """rt18 F3: a Ctrl-C in privclust's first lines (importing signal, a few milliseconds) gave a traceback. Every
    module privclust imports finds the command's handlers already installed."""
    probe = textwrap.dedent("""
        import _signal, sys
        sys.argv[0] = "privclust"
        seen = []

        class Finder:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name != "privclust":
                    seen.append((name, getattr(_signal.getsignal(_signal.SIGTERM), "__name__", "default")))
                return None

        sys.meta_path.insert(0, Finder)
        import privclust
        sys.meta_path.remove(Finder)
        print(seen[:3])
        assert seen and all(handler == "_stop_while_starting" for _, handler in seen), seen
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                            preexec_fn=default_stop_signals)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_output_linked_to_a_pipe_says_so_and_points_at_dash(tmp_path):
    """rt18 F4: `-o so.csv` with so.csv -> /dev/stdout and standard output a pipe said "the folder /proc/2839/fd is not
    writable", naming a "pipe:[41150]" path that does not exist."""
    read, write = os.pipe()
    try:
        link = tmp_path / "so.csv"
        link.symlink_to(f"/proc/{os.getpid()}/fd/{write}")
        if not os.path.exists(link):
            pytest.skip("no /proc/<pid>/fd here")
        with pytest.raises(PrivclustError) as caught:
            privclust._writing.check_outputs({"--output": link})
        message = str(caught.value)
        assert "symbolic link to a pipe" in message and "give - to write the release to standard output" in message
        assert "not writable" not in message and "pipe:[" not in message
        with pytest.raises(PrivclustError, match="symbolic link to a pipe.*give the name of a file"):
            privclust._writing.check_outputs({"--report": tmp_path / "other.json", "--output": tmp_path / "o.csv",
                                              "the report": link})
    finally:
        os.close(read)
        os.close(write)


def test_an_output_linked_to_a_terminal_says_so(tmp_path):
    try:
        leader, follower = pty.openpty()
    except OSError:
        pytest.skip("no pseudo-terminal here")
    try:
        link = tmp_path / "tty.csv"
        link.symlink_to(os.ttyname(follower))
        with pytest.raises(PrivclustError, match=r"which is a terminal \(a character device\).*- for standard output"):
            privclust._writing.check_outputs({"--output": link})
    finally:
        os.close(leader)
        os.close(follower)


def _people() -> pd.DataFrame:
    jobs = ["clerk"] * 8 + ["nurse"] * 7 + ["astronaut"]
    return pd.DataFrame({"sex": pd.Categorical(["f", "m"] * 8),
                         "job": pd.Categorical(jobs, categories=["astronaut", "clerk", "judge", "nurse"]),
                         "income": np.arange(16.0)})


def test_local_suppression_lists_no_category_it_no_longer_holds():
    """rt18 F5: a categorical key column kept every original category, the suppressed unique 'astronaut' and one
    the column never held ('judge') among them; written as is, a Parquet dictionary would publish them."""
    from privclust_plugins.keys import LocalSuppression

    out = LocalSuppression(k=3).mask(_people()[["sex", "job"]], privclust.PrivacyContext(seed=0)).data
    assert isinstance(out["job"].dtype, pd.CategoricalDtype) and out["job"].isna().sum() == 1
    assert list(out["job"].cat.categories) == ["clerk", "nurse"]
    assert list(out["sex"].cat.categories) == ["f", "m"]


def test_pram_lists_no_category_it_drew_away():
    from privclust_plugins.keys import PRAM

    matrix = {"astronaut": {"clerk": 1.0}, "clerk": {"clerk": 1.0}, "judge": {"judge": 1.0},
              "nurse": {"nurse": 1.0}}
    out = PRAM(matrix=matrix).mask(_people()[["job"]], privclust.PrivacyContext(seed=0)).data
    assert isinstance(out["job"].dtype, pd.CategoricalDtype)
    assert sorted(out["job"].cat.categories) == ["clerk", "nurse"]


def test_a_parquet_release_publishes_no_category_absent_from_its_column(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    frame = _people()
    recipe = {"roles": {"keys": ["sex", "job"]},
              "steps": [{"use": "local-suppression", "k": 3, "columns": ["sex", "job"]}]}
    target = tmp_path / "out.parquet"
    privclust.run(recipe, frame, seed=1).write(target)
    table = pq.read_table(target)
    for name in ("sex", "job"):
        column = table.column(name).combine_chunks()
        listed = column.dictionary.to_pylist() if hasattr(column, "dictionary") else column.to_pylist()
        held = {v for v in column.to_pylist() if v is not None}
        assert set(listed) - {None} <= held, (name, listed, held)
    assert "astronaut" not in str(pq.read_metadata(target).metadata) and "judge" not in target.read_bytes().decode(
        "latin-1")


def test_a_plugin_bug_keeps_its_traceback_and_writes_nothing(files, monkeypatch):
    """As docs/cli.md says: an exception other than privclust's errors raised by a step's component is a bug (the
    plugin's); it propagates with its traceback (status 1 in the command) and nothing is written."""
    import attrs

    @attrs.frozen(kw_only=True)
    class Broken:
        name = "broken"

        def mask(self, data, context):
            raise RuntimeError("a bug in the plugin")

    class Plugin:
        @staticmethod
        @privclust.hookimpl
        def privclust_register_maskers(register):
            register(Broken)

    monkeypatch.setattr("privclust.cli.get_registry", lambda: privclust.Registry(plugins=[Plugin]))
    (files / "broken.toml").write_text('[[steps]]\nuse = "broken"\ncolumns = ["a"]\n', encoding="utf-8")
    (files / "r.json").write_text("OLD\n")
    with pytest.raises(RuntimeError, match="a bug in the plugin"):
        main(["run", str(files / "broken.toml"), "-i", str(files / "in.csv"), "-o", str(files / "out.csv"),
              "--report", str(files / "r.json"), "-q"])
    assert not (files / "out.csv").exists() and (files / "r.json").read_text() == "OLD\n"
    assert not [p for p in files.iterdir() if p.name.startswith(".")]


def test_a_report_that_cannot_be_put_in_place_after_a_whole_stream_says_the_release_went_out(files, monkeypatch,
                                                                                            capsys):
    """The report's rename failing after the whole release went to standard output said "nothing was written"
    beside a standard output holding all 2,000 records (stop 26's open item)."""
    report = files / "r.json"
    report.write_text("OLD\n")
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == "r.json" and str(src).endswith(".tmp"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    stdout = _Stdout(10**9, OSError(errno.EIO, "unused"))
    assert _run_to_stdout(files, stdout, monkeypatch, "--report", str(report)) == 1
    err = capsys.readouterr().err
    assert len(stdout.text.splitlines()) == 2001
    assert "nothing was written" not in err, err
    assert (f"cannot write {report}: Read-only file system; the whole released CSV went to standard output, but no "
            "report was written (an existing one is left as it was)") in err
    assert report.read_text() == "OLD\n"
    assert not [p for p in files.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("with_report", [True, False], ids=["report", "no-report"])
def test_a_signal_after_a_whole_stream_says_the_release_went_out(files, monkeypatch, capsys, with_report):
    """A stop arriving once the release was written whole to standard output, before the report was put in place,
    said "nothing was written"."""
    import privclust.cli as cli

    real = cli._stream_release

    def stream_then_stop(*args, **kwargs):
        real(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(cli, "_stream_release", stream_then_stop)
    report = files / "r.json"
    stdout = _Stdout(10**9, OSError(errno.EIO, "unused"))
    extra = ["--report", str(report)] if with_report else []
    assert _run_to_stdout(files, stdout, monkeypatch, *extra) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert len(stdout.text.splitlines()) == 2001
    assert "nothing was written" not in err, err
    if with_report:
        assert ("interrupted by SIGTERM; the whole released CSV went to standard output, but no report was "
                "written") in err
        assert not report.exists()
    else:
        assert err.rstrip().endswith("interrupted by SIGTERM; the whole released CSV went to standard output"), err
