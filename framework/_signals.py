"""The signal handling that keeps an interrupted command clean: the stop
signals (Ctrl-C, SIGTERM, SIGHUP) raise in the main thread so every
clean-up runs (:func:`handle_signals`), are held back while a temporary file
is registered or a set of renames is made (:func:`signals_held`), and end a
worker process at once (:func:`worker_signals`)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ._temporaries import remove_temporaries

__all__ = ["STOP_SIGNALS", "Interrupted", "handle_signals", "raise_if_stopped", "signals_held", "worker_signals"]

#: The signals a command turns into a clean stop (Ctrl-C is SIGINT).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


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
            for signum, earlier in previous.items():
                signal.signal(signum, earlier)
            _STOPPED[0] = 0  # handled: no later code (a comparison run from Python) takes it for a new stop


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
