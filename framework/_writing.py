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

import errno
import gzip
import io
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._reading import STDIO, write_csv
from ._reading import file_kind as _kind
from ._signals import raise_if_stopped, signals_held
from ._temporaries import discard_temporary as _discard
from ._temporaries import register_temporary as _register
from ._temporaries import release_temporary as _release
from ._temporaries import remove_stale_temporaries
from .errors import PrivclustError

__all__ = ["check_outputs", "committed", "frame_writer", "text_writer", "write_atomically"]

#: Targets moved into place by this process (so an interruption message can be honest).
_COMMITTED: list[Path] = []


def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _destination(path: Path, what: str | None = None) -> Path:
    """Where writing ``path`` puts the bytes: ``path`` itself, or for a
    symbolic link the file it points to (followed to the end; a link to a
    file that does not exist yet creates that file). The output is written
    through the link, as a shell's ``>`` would, and the link stays a link.

    :raises PrivclustError: for a link that cannot be followed (a loop), or
        that leads to something with no name in the file system (a pipe: a
        link to ``/dev/stdout`` when standard output is piped)."""
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        try:  # the kernel follows a /proc/<pid>/fd link to what it names even when that has no path
            mode = os.stat(path).st_mode
        except OSError:
            return Path(os.path.realpath(path))  # a dangling link: its target is created
        kind = "a pipe" if stat.S_ISFIFO(mode) else (next((name for test, name in _KINDS if test(mode)), None)
                                                      or "a file that has no name (a deleted file)")
        raise PrivclustError(f"cannot write {path}{f' ({what})' if what else ''}: it is a symbolic link to {kind} "
                             "(as /dev/stdout is when standard output goes to a pipe), not to a file; privclust "
                             "writes its outputs only to regular files: "
                             + ("give - to write the release to standard output, or the name of a file"
                                if what == "--output" else "give the name of a file")) from None
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
    if stat.S_ISCHR(mode) and _terminal(path):
        return "a terminal (a character device)"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _terminal(path: Path) -> bool:
    """Whether the character device at ``path`` is a terminal (judged by its
    name: opening a terminal to ask could make it the process's own)."""
    name = os.path.realpath(path)
    return name.startswith(("/dev/pts/", "/dev/tty")) or name == "/dev/console"


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
        given, path = path, _destination(path, what)  # a symbolic link is written through, to its target
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


def frame_writer(frame: pd.DataFrame, path: Path, order: Any = None) -> Callable[[Path], None]:
    """A function writing ``frame`` in the format ``path``'s suffix names,
    its rows in ``order`` (positions; ``None``: as they are). CSV writes
    integer columns (``int64``, ``Int64``...) without decimals, a missing
    value as an empty field, and a column released as in the original with
    its cells' original text (:func:`keep_text`); Parquet keeps every dtype
    (and writes no index, and of ``frame.attrs`` only the host's own
    ``"privclust"`` entry, a comparison table's parameters and DP note:
    pandas writes attrs into the file's metadata, and any other entry came
    from the input; a release's frame carries none).

    :raises PrivclustError: (when writing) for a column Parquet cannot
        hold (values of mixed types, complex numbers), naming it."""
    kind = _kind(path)

    def write(tmp: Path) -> None:
        sep = "\t" if path.name.lower().endswith(".tsv") else ","
        if kind == "csv" and path.name.lower().endswith(".gz"):
            # gzip with no file name and no time in its header: given the path, gzip stored the temporary file's
            # name (with the process id), which gunzip -N restored and the next run removed as a stale temporary
            with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed, \
                    io.TextIOWrapper(packed, encoding="utf-8", newline="") as text:
                write_csv(frame, text, sep=sep, order=order)
        elif kind == "csv":
            write_csv(frame, tmp, sep=sep, order=order)
        else:
            try:
                rows = frame.copy(deep=False) if order is None else frame.iloc[np.asarray(order, dtype=np.intp)]
                # pandas writes attrs into the file's metadata: never the input's (rt21 F2), only the host's own
                rows.attrs = {k: v for k, v in frame.attrs.items() if k == "privclust"}
                rows.to_parquet(tmp, index=False)
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

def committed() -> tuple[Path, ...]:
    """The targets this process has moved into place so far."""
    return tuple(_COMMITTED)


def write_atomically(targets: Sequence[tuple[Path, Callable[[Path], None]]],
                     before_commit: Callable[[], None] | None = None, *,
                     unwritten: str = "nothing was written") -> None:
    """Write every target to a temporary file, then move them all into place,
    all or none.

    ``before_commit`` (if given) runs once every temporary file is complete
    and before anything is moved into place: if it raises (or the process is
    interrupted meanwhile), nothing is committed, as when a writer fails. The
    command writing its release to standard output streams it there, so that
    a report is committed only for a release written whole.

    If any writer fails or the process is interrupted while writing, every
    temporary file is removed and no target is touched. The renames happen
    with the stop signals held back, after checking that no target has
    become a folder, a device, a FIFO or a socket meanwhile; each existing
    target is first hard-linked to a backup, and if a rename fails the
    targets already replaced are put back (a new one removed), so every
    target holds what it held before, and the error ends with ``unwritten``
    (what was and was not written: ``before_commit`` may already have
    delivered the release elsewhere). A target that is a symbolic link is
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
        if before_commit is not None:
            before_commit()
        with signals_held():
            raise_if_stopped()  # a stop whose exception a finalizer swallowed still stops the renames
            for _, target in temps:
                _refuse_not_regular(target, meanwhile=True)
            _commit(temps, unwritten)
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


def _commit(temps: Sequence[tuple[Path, Path]], unwritten: str = "nothing was written") -> None:
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
            raise PrivclustError(f"cannot write {failed}: {err.strerror or err}; {unwritten}" if not kept else
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
