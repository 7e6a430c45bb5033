"""Reading data files, checking and writing a command's outputs as one
transaction, and the signal handling that keeps interrupted commands clean.

Every output of a command is first written to a hidden temporary file in its
target's folder (``.<name>.privclust-<pid>.<random>.tmp``, the name cut to 64
bytes; for a symbolic link, beside the file it points to, which is replaced
and the link kept); only when all of them are complete are they moved into
place, one ``os.replace`` each, with the termination signals held back
meanwhile. Each target that already exists is first hard-linked to a backup
(named as a temporary file), so that when a rename fails every target already
replaced is put back: the outputs are committed together or not at all. If
any write fails, or the command is interrupted (Ctrl-C, SIGTERM, SIGHUP),
every temporary file is removed and no existing target is touched. Before
any computation, :func:`check_outputs` refuses an output whose name the file
system would refuse (too long for its folder's file system), that is a
folder, a device, a FIFO, a socket or a symbolic link to one, sits in a
missing or unwritable folder (found by really creating and removing a probe
file there), is one of the command's inputs, or is another output of the
same command; it also removes the temporary files a killed run (SIGKILL, a
power cut) left in an output's folder: only files named as this module names
them, owned by the user, whose process is gone and which no process holds
locked.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import errno
import fcntl
import gzip
import io
import os
import re
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import DataError, PrivclustError

__all__ = [
    "Interrupted",
    "check_outputs",
    "committed",
    "frame_writer",
    "handle_signals",
    "keep_text",
    "read_frame",
    "remove_stale_temporaries",
    "remove_temporaries",
    "text_writer",
    "write_atomically",
    "write_csv",
]

_CSV = (".csv", ".csv.gz", ".tsv")
_PARQUET = (".parquet", ".pq")

#: The signals a command turns into a clean stop (Ctrl-C is SIGINT).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

#: Temporary files that exist right now (removed on any failure or interruption).
_LIVE: set[Path] = set()
_LIVE_LOCK = threading.Lock()
#: The open, locked descriptor of each temporary file (the lock tells another run the file is in use).
_FDS: dict[Path, int] = {}
#: Targets moved into place by this process (so an interruption message can be honest).
_COMMITTED: list[Path] = []

#: The name of every temporary file this module makes: ``.<name cut to 64 bytes>.privclust-<pid>.<8 random>.tmp``.
#: Only files named so are ever removed as stale temporaries.
_OURS = re.compile(r"\..*\.privclust-([0-9]{1,10})\.[a-z0-9_]{8}\.tmp", re.DOTALL)


class Interrupted(KeyboardInterrupt):
    """A termination signal (SIGTERM, SIGHUP) arrived; raised in the main
    thread by the handlers :func:`handle_signals` installs, so every
    ``finally`` and ``except BaseException`` clean-up runs as for Ctrl-C."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(_CSV):
        return "csv"
    if name.endswith(_PARQUET):
        return "parquet"
    raise PrivclustError(f"{path}: unknown file type; use .csv, .csv.gz, .tsv, .parquet or .pq")


def _csv_header(source: Path | bytes, sep: str) -> list[str]:
    """The first row of a CSV file (or of the bytes of one) as written:
    pandas renames repeated names ``a``, ``a.1`` and blank ones ``Unnamed:
    1``, so the header is read here with the csv module. A UTF-8 byte-order
    mark is not part of the first name, and blank lines before the header
    are skipped, as pandas skips them."""
    if isinstance(source, bytes):
        handle: Any = io.TextIOWrapper(io.BytesIO(source), encoding="utf-8-sig", newline="")
    else:
        opener = gzip.open if source.name.lower().endswith(".gz") else open
        handle = opener(source, "rt", encoding="utf-8-sig", newline="")  # type: ignore[operator]
    with handle:
        for row in csv.reader(handle, delimiter=sep):
            if len(row) > 1 or (row and row[0].strip()):
                return row
    return []


#: The path that means standard input (for reading) or standard output (for writing), as CSV.
STDIO = "-"


def _check_header(header: Sequence[str], where: str) -> None:
    """Refuse a header with a blank name or a name given twice (pandas would
    rename them ``Unnamed: 1`` and ``a.1``: a column the file does not name)."""
    blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
    if blank and len(header) > 1:
        raise DataError(f"{where}: the header gives no name to column(s) {', '.join(map(str, blank))} (of "
                        f"{len(header)}); give every column a name in the first line")
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(header):
        seen.setdefault(name.strip(), []).append(i + 1)
    repeated = {name: pos for name, pos in seen.items() if len(pos) > 1}
    if repeated:
        which = "; ".join(f"{name!r} (columns {', '.join(map(str, pos))})" for name, pos in repeated.items())
        raise DataError(f"{where}: the header names a column more than once: {which}; give every column its own name")


def _read_csv(source: Path | bytes, sep: str = ",", where: str = "") -> pd.DataFrame:
    """A CSV file as a DataFrame, its integer columns kept integer, and the
    text of its cells remembered (see :func:`keep_text`).

    pandas reads a column of whole numbers as ``int64``, but as ``float64``
    as soon as one value is missing. Such a column (every value written
    without a decimal point or exponent, some missing) is read as the
    nullable ``Int64`` instead, so that it is released as integers with its
    missing values kept; a column written as ``1.0, 2.0`` stays ``float64``.
    """
    def read(**options: object) -> pd.DataFrame:
        # index_col=False: a line with more values than the header has names made pandas take the first
        # column for the row index, silently: every value moved one column left and the first column's
        # values were dropped from the release. Such a file is refused.
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            try:
                return pd.read_csv(io.BytesIO(source) if isinstance(source, bytes) else source, sep=sep,
                                   index_col=False, **options)  # type: ignore[call-overload]
            except pd.errors.ParserWarning:
                raise pd.errors.ParserError(
                    "a line has more values than the header has column names (read as it is, the first column "
                    "would be taken for a row index and every value moved one column left); give every line one "
                    "value per column of the header") from None

    stamp = _stamp(source)  # before reading: a change made meanwhile is a change
    header = _csv_header(source, sep)
    _check_header(header, where or "the CSV data")
    frame = read()
    if [str(c) for c in frame.columns] != header:  # a name pandas changed is a column the file does not name
        changed = [f"{a!r} read as {b!r}" for a, b in zip(header, map(str, frame.columns), strict=False) if a != b]
        raise DataError(f"{where or 'the CSV data'}: the header could not be read as written "
                        f"({'; '.join(changed) or 'another number of columns'}); give every column a plain name")
    gaps = [c for c in frame.columns if frame[c].dtype == float and frame[c].isna().any() and frame[c].notna().any()
            and frame[c].dropna().eq(frame[c].dropna().round()).all()]
    if gaps:
        typed = read(usecols=gaps, dtype_backend="numpy_nullable")
        for c in gaps:
            if pd.api.types.is_integer_dtype(typed[c]):
                frame[c] = typed[c]
    # Where the cells' text can be read again, for the columns pandas may write otherwise (all but text
    # without missing values): read when a column is written (keeping it here cost 8 times the frame's memory).
    texts = [c for c in frame.columns if not (frame[c].dtype == object and not frame[c].isna().any())]
    if texts:
        _remember(frame, _CellText(source, sep, stamp, {c: frame[c].copy() for c in texts}))
    return frame


def _read_stdin() -> pd.DataFrame:
    """CSV from standard input (read whole, then parsed: the same checks as a file)."""
    raw = sys.stdin.buffer.read()
    if not raw.strip():
        raise DataError("standard input (--input -) is empty; pipe a CSV file with a header line into it")
    try:
        return _read_csv(raw, where="standard input")
    except DataError:
        raise
    except (UnicodeDecodeError, ValueError, csv.Error, pd.errors.ParserError) as err:
        raise DataError(f"cannot read standard input as CSV: {' '.join(str(err).split())}; pipe a UTF-8 CSV "
                        "file with a header line (for Parquet, give the file's path instead of -)") from err


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame; ``"-"`` reads CSV from
    standard input. A CSV column of whole numbers is ``int64``, or the
    nullable ``Int64`` when some of its values are missing (see
    :func:`_read_csv`); Parquet keeps the dtypes it stores, and a named
    index (a column pandas stored as the index) is read as columns. The text
    of a CSV file's cells is remembered with the frame, so that
    :func:`frame_writer` writes a column released as in the original with
    its original text (``00037`` stays ``00037``, see :func:`keep_text`).

    :raises DataError: for a missing or unreadable file, and for a CSV header
        that names a column more than once or leaves one without a name
        (pandas would rename them), with or without a byte-order mark.
    """
    if str(path) == STDIO:
        return _read_stdin()
    path = Path(path)
    kind = _kind(path)
    if not path.is_file():
        if path.is_dir():
            raise DataError(f"{path} is a folder, not a data file")
        raise DataError(f"no input file at {path}")
    sep = "\t" if path.name.lower().endswith(".tsv") else ","
    try:
        if kind == "csv":
            return _read_csv(path, sep, str(path))
        frame = pd.read_parquet(path)
        if any(name is not None for name in frame.index.names):  # pandas' set_index: columns of the file
            frame = frame.reset_index()  # checked, named by the verdict and written, never dropped unseen
        return frame
    except DataError:
        raise
    except ImportError as err:
        raise PrivclustError(f"reading {path} needs pyarrow: pip install 'privclust[parquet]'") from err
    except (ValueError, OSError, EOFError, NotImplementedError, csv.Error, pd.errors.ParserError) as err:
        raise DataError(f"cannot read {path}: {' '.join(str(err).split())}") from err


# ---------------------------------------------------------------------------
# The original text of CSV cells
# ---------------------------------------------------------------------------


class _CellText:
    """Where the text of some columns' cells can be read again (a CSV file,
    as long as it is unchanged, or the bytes of standard input), and the
    values pandas read from that text (a copy: a later change of the frame
    does not change them)."""

    __slots__ = ("sep", "source", "stamp", "values")

    def __init__(self, source: Path | bytes, sep: str, stamp: tuple[int, ...] | None, values: dict[str, pd.Series]):
        self.source, self.sep, self.stamp, self.values = source, sep, stamp, values

    def only(self, columns: Sequence[str]) -> _CellText:
        return _CellText(self.source, self.sep, self.stamp, {c: self.values[c] for c in columns})

    def text(self, columns: Sequence[str]) -> dict[str, np.ndarray] | None:
        """The cells' text of ``columns`` (``None`` when the file has
        changed since it was read, or is gone)."""
        if self.stamp is not None and _stamp(self.source) != self.stamp:
            return None
        source = io.BytesIO(self.source) if isinstance(self.source, bytes) else self.source
        try:
            raw = pd.read_csv(source, sep=self.sep, index_col=False, usecols=list(columns), dtype=str,
                              keep_default_na=False, na_filter=False)
        except (OSError, ValueError, EOFError, pd.errors.ParserError):
            return None
        if any(len(raw) != len(self.values[c]) for c in columns):
            return None
        return {c: raw[c].fillna("").to_numpy(dtype=object) for c in columns}


def _stamp(source: Path | bytes) -> tuple[int, ...] | None:
    """What identifies a file's version (device, inode, size, modification
    time); ``None`` for bytes, which cannot change; ``(-1,)`` for a file
    that cannot be read (gone)."""
    if isinstance(source, bytes):
        return None
    try:
        st = os.stat(source)
    except OSError:
        return (-1,)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


#: Frames whose columns have their cells' original text: ``id(frame)`` ->
#: (a weak reference to the frame, its text). Kept beside the frame, never in
#: it (``frame.attrs`` would travel into every frame derived from it, and into
#: Parquet metadata), and forgotten when the frame is.
#: Each operation on it is one dictionary operation (atomic): no lock, which the
#: garbage collector could call ``forget`` under, in the thread that holds it.
_TEXT: dict[int, tuple[weakref.ref, _CellText]] = {}


def _remember(frame: pd.DataFrame, cells: _CellText) -> None:
    key = id(frame)

    def forget(ref: weakref.ref) -> None:
        entry = _TEXT.get(key)
        if entry is not None and entry[0] is ref:
            _TEXT.pop(key, None)

    _TEXT[key] = (weakref.ref(frame, forget), cells)


def _cell_text(frame: pd.DataFrame) -> _CellText | None:
    entry = _TEXT.get(id(frame))
    return entry[1] if entry is not None and entry[0]() is frame else None


def _identical(a: pd.Series, b: pd.Series) -> bool:
    """Whether two columns hold exactly the same values, record by record
    (a missing value where the other has one; integers and doubles compared
    exactly, never through a double)."""
    if len(a) != len(b):
        return False
    x, y = a.reset_index(drop=True), b.reset_index(drop=True)
    if x.dtype == y.dtype:
        return bool(x.equals(y))
    numeric = [pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v) for v in (x, y)]
    if not all(numeric):
        return False
    missing = x.isna().to_numpy()
    if not np.array_equal(missing, y.isna().to_numpy()):
        return False
    return bool(np.all(x.to_numpy(dtype=object)[~missing] == y.to_numpy(dtype=object)[~missing]))


def keep_text(original: pd.DataFrame, released: pd.DataFrame, columns: Sequence[str]) -> None:
    """Let :func:`frame_writer` write ``columns`` of ``released`` with the
    text their cells had in the CSV file ``original`` was read from, where
    ``original`` was read by :func:`read_frame` and the column's released
    values are exactly the values read from that text (checked here and again
    when writing). Only the columns named: a caller names those it states
    are released as in the original."""
    cells = _cell_text(original)
    if cells is None:
        return
    kept = [c for c in columns if c in cells.values and c in released.columns
            and _identical(released[c], cells.values[c])]
    if kept:
        _remember(released, cells.only(kept))


def _with_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each column that has its cells' original text (see
    :func:`keep_text`) and still holds exactly the values read from it
    replaced by that text."""
    cells = _cell_text(frame)
    if cells is None:
        return frame
    kept = [c for c in cells.values if c in frame.columns and _identical(frame[c], cells.values[c])]
    text = cells.text(kept) if kept else None
    if text is None:
        return frame
    out = frame.copy(deep=False)
    for c in kept:
        out[c] = pd.Series(text[c], index=frame.index, dtype=object)
    return out


def write_csv(frame: pd.DataFrame, target: Any, *, sep: str = ",", compression: str | None = None) -> None:
    """Write ``frame`` as CSV to a path or an open text handle: integer
    columns without decimals, a missing value as an empty field, and a
    column with its cells' original text (see :func:`keep_text`) in that
    text."""
    _with_text(frame).to_csv(target, index=False, sep=sep, compression=compression)


# ---------------------------------------------------------------------------
# Checking outputs before any work
# ---------------------------------------------------------------------------


def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _destination(path: Path) -> Path:
    """Where writing ``path`` puts the bytes: ``path`` itself, or for a
    symbolic link the file it points to (followed to the end; a link to a
    file that does not exist yet creates that file). The output is written
    through the link, as a shell's ``>`` would, and the link stays a link.

    :raises PrivclustError: for a link that cannot be followed (a loop)."""
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(path))  # a dangling link: its target is created
    except OSError as err:
        raise PrivclustError(f"cannot write {path}: it is a symbolic link that cannot be followed "
                             f"({err.strerror or err}); give the name of a file") from err


#: The characters mkstemp adds to a temporary file's prefix: 8 random ones and ".tmp".
_TEMP_EXTRA = 8 + len(".tmp")
#: The longest part of an output's name that its temporary file's name repeats (bytes).
_TEMP_NAME_BYTES = 64


def _temp_prefix(target: Path) -> str:
    """The prefix of a temporary file for ``target``: ``.<name>.privclust-<pid>.``,
    the name cut to :data:`_TEMP_NAME_BYTES` bytes, so the temporary name fits the
    file system whenever the target's name does (a 248-character name's
    temporary file would not)."""
    cut = os.fsencode(target.name)[:_TEMP_NAME_BYTES].decode("utf-8", "ignore")  # a cut character dropped
    return f".{cut}.privclust-{os.getpid()}."


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError, AttributeError):
        return default


def _name_problem(path: Path, folder: Path) -> str | None:
    """Why the file system would refuse ``path``'s name or length (found
    without creating it): a name longer than the folder's ``NAME_MAX``, a
    path longer than ``PATH_MAX``, a NUL character."""
    name = os.fsencode(path.name)
    if b"\0" in os.fsencode(str(path)):
        return "the name holds a NUL character"
    name_max = _limit(folder, "PC_NAME_MAX", 255)
    if len(name) > name_max:
        return (f"the file name is {len(name)} bytes long, more than the {name_max} bytes a name may have on the "
                "file system of its folder; choose a shorter name")
    full = len(os.fsencode(str(folder))) + 1 + max(len(name), len(os.fsencode(_temp_prefix(path))) + _TEMP_EXTRA)
    path_max = _limit(folder, "PC_PATH_MAX", 4096)
    if full >= path_max:
        return (f"the path is {full} bytes long, more than the {path_max - 1} bytes a path may have; choose a "
                "shorter name or a folder nearer the root")
    return None


def _probe_folder(folder: Path) -> None:
    """Create and remove a temporary file in ``folder``: the only test that
    holds for root, read-only mounts, full disks and access-control lists."""
    with signals_held():
        fd, name = tempfile.mkstemp(dir=folder, prefix=_temp_prefix(Path("probe")), suffix=".tmp")
        _register(Path(name), fd)
    _discard(Path(name))


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a
    folder (the caller refuses a folder with its own message): "a character
    device", "a FIFO (named pipe)"... ``None`` for a regular file or no file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_outputs(outputs: Mapping[str, Path | str | None], inputs: Mapping[str, Path | str | None] = {}) -> None:  # noqa: B006
    """Refuse, before any work, outputs that cannot be written or would
    clobber something.

    :param outputs: ``{what: path}``, e.g. ``{"--output": "out.csv",
        "--report": "r.html", "the JSON beside --report": "r.json"}``;
        ``None`` entries are skipped.
    :param inputs: ``{what: path}`` of the files the command reads.
    :raises PrivclustError: for an output that is a folder, a device, a FIFO
        or a socket (or a symbolic link to one), in a folder that does not
        exist or cannot be written, that is one of the inputs, or
        that is another output of the command.
    """
    named = [(what, Path(p)) for what, p in outputs.items() if p is not None and str(p) != STDIO]
    sources = [(what, Path(p)) for what, p in inputs.items() if p is not None and str(p) != STDIO]
    probed: set[Path] = set()
    for i, (what, path) in enumerate(named):
        problem = _name_problem(path, path.parent)  # first: the file system refuses to even look at such a name
        if problem:
            raise PrivclustError(f"cannot write {path} ({what}): {problem}")
        if path.is_dir():
            raise PrivclustError(f"cannot write {path} ({what}): it is a folder; give the name of a file")
        given, path = path, _destination(path)  # a symbolic link is written through, to its target
        kind = _not_regular(path)
        if kind:
            via = f"{given} is a symbolic link to {path}, which is {kind}" if path != given else f"it is {kind}"
            raise PrivclustError(f"cannot write {given} ({what}): {via}; privclust writes its outputs only to regular "
                                 "files (a new file, or one it replaces)" + (
                                     ", or - for standard output" if what == "--output" else "")
                                 + ": give the name of a file")
        for source_what, source in sources:
            if _same(path, source):
                raise PrivclustError(f"{what} {path} is the same file as {source_what} {source}; the input is never "
                                     "overwritten, write the output to another file")
        for other_what, other in named[:i]:
            if _same(path, other):
                raise PrivclustError(f"{other_what} and {what} are the same file ({path}); give each output its "
                                     "own name")
        folder = path.parent
        via = f" (the target of the symbolic link {given})" if path != given else ""
        if not folder.exists():
            raise PrivclustError(f"cannot write {path}{via}: the folder {folder} does not exist")
        if not folder.is_dir():
            raise PrivclustError(f"cannot write {path}{via}: {folder} is a file, not a folder")
        problem = _name_problem(path, folder)
        if problem:
            raise PrivclustError(f"cannot write {path}{via} ({what}): {problem}")
        resolved = folder.resolve()
        if resolved in probed:
            continue
        try:
            _probe_folder(folder)
        except OSError as err:
            raise PrivclustError(f"cannot write {path} ({what}): the folder {folder} is not writable "
                                 f"({err.strerror or err}); choose another folder or fix its permissions") from err
        probed.add(resolved)
        remove_stale_temporaries(folder)


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def frame_writer(frame: pd.DataFrame, path: Path) -> Callable[[Path], None]:
    """A function writing ``frame`` in the format ``path``'s suffix names.
    CSV writes integer columns (``int64``, ``Int64``...) without decimals,
    a missing value as an empty field, and a column released as in the
    original with its cells' original text (:func:`keep_text`); Parquet
    keeps every dtype.

    :raises PrivclustError: (when writing) for a column Parquet cannot
        hold (values of mixed types, complex numbers), naming it."""
    kind = _kind(path)

    def write(tmp: Path) -> None:
        if kind == "csv":
            write_csv(frame, tmp, sep="\t" if path.name.lower().endswith(".tsv") else ",",
                      compression="gzip" if path.name.lower().endswith(".gz") else None)
        else:
            try:
                frame.to_parquet(tmp, index=False)
            except ImportError as err:
                raise PrivclustError(f"writing {path} needs pyarrow: pip install 'privclust[parquet]'") from err
            except (ValueError, TypeError, NotImplementedError) as err:  # pyarrow's ArrowInvalid, ArrowNotImplemented
                raise PrivclustError(f"cannot write {path} as Parquet: {' '.join(str(err).split())}; give that "
                                     "column one type (e.g. frame[column].astype(str)) or write CSV") from err

    return write


def text_writer(text: str) -> Callable[[Path], None]:
    """A writer for a text output (a report)."""

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    return write


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back the stop signals (delivered when the block ends) so that a
    temporary file is never created without being registered, and a set of
    renames is never cut in two."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # Python runs every signal handler in the main thread, whichever thread the process received the signal on,
    # so a handler that only notes the signal holds it back for the whole process (a thread mask would not: the
    # kernel delivers a process-directed signal to any thread that does not block it, numpy's and the allocator's
    # threads included, and the handler then ran inside the renames).
    pending: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    previous = {}
    try:
        for s in STOP_SIGNALS:
            previous[s] = signal.signal(s, hold)
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:
            signal.raise_signal(pending[0])  # delivered now, to the handler the block found


def _register(tmp: Path, fd: int | None = None) -> None:
    """Note a temporary file (removed on any failure); with ``fd``, its open
    descriptor, locked (``flock``) until the file is moved or removed, so that
    another run never takes it for a killed run's leftover."""
    if fd is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with _LIVE_LOCK:
        _LIVE.add(tmp)
        if fd is not None:
            _FDS[tmp] = fd


def _release(tmp: Path) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(tmp)
        fd = _FDS.pop(tmp, None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
    _release(tmp)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's process (or no valid pid: left alone)
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[str]:
    """Remove from ``folder`` the temporary files a killed run of privclust
    left (SIGKILL, a power cut: no clean-up ran). A file is removed only when
    it is named as this module names its temporaries
    (``.<name>.privclust-<pid>.<8 random>.tmp``), is a regular file owned by
    this user, its process ``<pid>`` no longer runs, and no process holds it
    locked (a live run holds its temporaries locked). Returns the names
    removed."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _OURS.fullmatch(entry.name)
        if not match or _alive(int(match.group(1))):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live run (another pid namespace)
            except OSError:
                continue
            now = os.lstat(entry.path)
            if (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):  # still the file checked
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def remove_temporaries() -> int:
    """Remove every temporary file this process still has (after an
    interruption); returns how many there were."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for tmp in live:
        _discard(tmp)
    return len(live)


def committed() -> tuple[Path, ...]:
    """The targets this process has moved into place so far."""
    return tuple(_COMMITTED)


def write_atomically(targets: Sequence[tuple[Path, Callable[[Path], None]]]) -> None:
    """Write every target to a temporary file, then move them all into place,
    all or none.

    If any writer fails or the process is interrupted while writing, every
    temporary file is removed and no target is touched. The renames happen
    with the stop signals held back, after checking that no target has
    become a folder, a device, a FIFO or a socket meanwhile; each existing
    target is first hard-linked to a backup, and if a rename fails the
    targets already replaced are put back (a new one removed), so every
    target holds what it held before. A target that is a symbolic link is
    written through it: the file it points to is replaced atomically (its
    temporary file in that file's folder, its permissions kept) and the link
    stays.
    """
    temps: list[tuple[Path, Path]] = []
    try:
        for given, write in targets:
            target = _destination(Path(given))  # through a symbolic link: the link stays, its target is replaced
            if not target.parent.is_dir():
                raise PrivclustError(f"cannot write {target}: the folder {target.parent} does not exist")
            _refuse_not_regular(target)
            with signals_held():
                try:
                    fd, name = tempfile.mkstemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")
                except OSError as err:
                    raise PrivclustError(f"cannot write {target}: {err.strerror or err}") from err
                tmp = Path(name)
                _register(tmp, fd)
            temps.append((tmp, target))
            try:
                write(tmp)
            except OSError as err:
                raise PrivclustError(f"cannot write {target}: {err.strerror or err}") from err
        mode = 0o666 & ~_umask()  # mkstemp makes owner-only files; a new output gets the usual permissions
        for tmp, target in temps:
            try:  # a file replaced keeps its permissions (a report locked to 0600 stays so)
                kept = stat.S_IMODE(os.stat(target).st_mode)
            except OSError:
                kept = mode
            os.chmod(tmp, kept)
        with signals_held():
            raise_if_stopped()  # a stop whose exception a finalizer swallowed still stops the renames
            for _, target in temps:
                _refuse_not_regular(target, meanwhile=True)
            _commit(temps)
    except BaseException:
        for tmp, _ in temps:
            _discard(tmp)
        raise


def _refuse_not_regular(target: Path, meanwhile: bool = False) -> None:
    when = " (it became one meanwhile)" if meanwhile else ""
    if target.is_dir():
        raise PrivclustError(f"cannot write {target}: it is a folder{when}; give a file name")
    kind = _not_regular(target)
    if kind:
        raise PrivclustError(f"cannot write {target}: it is {kind}{when}; privclust writes its outputs only to "
                             "regular files")


def _backup(target: Path) -> Path | None:
    """A second name for ``target``'s current file (a hard link, or a copy
    where the file system has none), named as a temporary file; ``None`` when
    there is no file at ``target``."""
    if not os.path.lexists(target):
        return None
    for _ in range(100):
        backup = target.parent / f"{_temp_prefix(target)}{secrets.token_hex(4)}.tmp"
        _register(backup)
        try:
            os.link(target, backup, follow_symlinks=False)
            return backup
        except FileExistsError:
            _release(backup)
            continue
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK,
                                 getattr(errno, "ENOSYS", -1)):
                _release(backup)
                raise
        try:
            shutil.copy2(target, backup, follow_symlinks=False)  # no hard links on this file system
        except BaseException:
            _discard(backup)
            raise
        return backup
    raise PrivclustError(f"cannot write {target}: no free name for its backup")  # pragma: no cover


def _commit(temps: Sequence[tuple[Path, Path]]) -> None:
    """Move every temporary file onto its target, all or none (called with
    the stop signals held)."""
    backups: list[Path | None] = []
    done = 0
    failed = temps[0][1] if temps else None
    try:
        try:
            for _, failed in temps:
                backups.append(_backup(failed))
            for tmp, failed in temps:
                os.replace(tmp, failed)
                done += 1
        except OSError as err:
            kept = _undo(temps[:done], backups)
            raise PrivclustError(f"cannot write {failed}: {err.strerror or err}; nothing was written" if not kept else
                                 f"cannot write {failed}: {err.strerror or err}; and could not put back "
                                 f"{', '.join(kept)}, which hold the new output") from err
        for tmp, target in temps:
            _release(tmp)
            _COMMITTED.append(target)
    finally:
        for backup in backups:
            if backup is not None:
                _discard(backup)


def _undo(done: Sequence[tuple[Path, Path]], backups: Sequence[Path | None]) -> list[str]:
    """Put back the targets already replaced; returns those it could not."""
    kept = []
    for (_, target), backup in zip(reversed(done), reversed(backups[:len(done)]), strict=True):
        try:
            if backup is None:
                os.unlink(target)
            else:
                os.replace(backup, target)
                _release(backup)
        except OSError:
            kept.append(str(target))
    return kept


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# ---------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------


#: The stop signal received while :func:`handle_signals` is active (0: none).
#: The handler also raises, but an exception raised inside a finalizer or a
#: ``__del__`` is swallowed by Python: :func:`raise_if_stopped` is the check a
#: commit makes before it renames anything into place.
_STOPPED = [0]


def _raise_interrupted(signum: int, frame: object) -> None:
    _STOPPED[0] = signum
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


def raise_if_stopped() -> None:
    """Raise :class:`Interrupted` (:class:`KeyboardInterrupt` for Ctrl-C) if
    a stop signal arrived since :func:`handle_signals` began, even one whose
    exception was swallowed."""
    if _STOPPED[0] == signal.SIGINT:
        raise KeyboardInterrupt
    if _STOPPED[0]:
        raise Interrupted(_STOPPED[0])


def _quiet_unraisable(previous: Callable[[Any], None]) -> Callable[[Any], None]:
    """An ``sys.unraisablehook`` that says nothing about a stop signal raised
    inside a finalizer (Python cannot propagate it there; the flag that
    :func:`raise_if_stopped` reads stops the run instead) and passes every
    other unraisable exception on."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _STOPPED[0]:
            return
        previous(unraisable)

    return hook


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Interrupted`
    and Ctrl-C raises :class:`KeyboardInterrupt` in the main thread (so the
    clean-up of every ``finally`` runs); a signal the process was started
    with ignored (SIGHUP under ``nohup``) stays ignored. On the way out any
    temporary file left is removed and the previous handlers are restored.
    Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    _STOPPED[0] = 0
    unraisable = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(unraisable)
    for signum in STOP_SIGNALS:
        handler = _raise_interrupted
        try:
            if signal.getsignal(signum) is signal.SIG_IGN:  # e.g. SIGHUP under nohup: stays ignored
                continue
            previous[signum] = signal.signal(signum, handler)
        except (OSError, ValueError):  # pragma: no cover - e.g. a platform without the signal
            continue
    try:
        yield
    finally:
        try:
            remove_temporaries()
        finally:
            sys.unraisablehook = unraisable
            for signum, handler in previous.items():
                signal.signal(signum, handler)


#: prctl(PR_SET_PDEATHSIG) of Linux: a signal the kernel sends a process when its parent dies.
_PR_SET_PDEATHSIG = 1


def worker_signals(parent: int | None = None) -> None:
    """For a worker process forked by a command: the parent alone handles
    Ctrl-C (and stops the workers), and SIGTERM/SIGHUP end a worker at once.

    With ``parent`` (the pid of the process that made the pool), on Linux the
    worker also ends when that process dies: a stop signal can end the
    parent between a worker's fork and the moment its pool records it, and
    such a worker would otherwise wait for work forever."""
    for signum in STOP_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_IGN if signum == signal.SIGINT else signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # forked while the parent held the signals back
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if parent is not None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request: end now
            os._exit(1)
