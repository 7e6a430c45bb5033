"""The temporary files a command writes its outputs to: those this process
has right now (each registered, and locked while it exists, so that another
run never takes it for a leftover), removed on any failure or interruption
(:func:`remove_temporaries`); and those a killed run left
(:func:`remove_stale_temporaries`), found by the name every temporary file
of privclust has (``.<name>.privclust-<pid>.<8 random>.tmp``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import threading
from pathlib import Path

__all__ = ["discard_temporary", "register_temporary", "release_temporary", "remove_stale_temporaries",
           "remove_temporaries"]

#: Temporary files that exist right now (removed on any failure or interruption).
_LIVE: set[Path] = set()
_LIVE_LOCK = threading.Lock()
#: The open, locked descriptor of each temporary file (the lock tells another run the file is in use).
_FDS: dict[Path, int] = {}

#: The name of every temporary file privclust makes (:mod:`privclust._writing`):
#: ``.<name cut to 64 bytes>.privclust-<pid>.<8 random>.tmp``.
#: Only files named so are ever removed as stale temporaries.
_OURS = re.compile(r"\..*\.privclust-([0-9]{1,10})\.[a-z0-9_]{8}\.tmp", re.DOTALL)


def register_temporary(tmp: Path, fd: int | None = None) -> None:
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


def release_temporary(tmp: Path) -> None:
    """Forget a temporary file (moved into place, or removed), closing its descriptor."""
    with _LIVE_LOCK:
        _LIVE.discard(tmp)
        fd = _FDS.pop(tmp, None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def discard_temporary(tmp: Path) -> None:
    """Remove a temporary file and forget it."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
    release_temporary(tmp)


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
    it is named as privclust names its temporaries
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
        discard_temporary(tmp)
    return len(live)
