"""Reading data files, writing a command's outputs as one transaction, and
the signal handling that keeps interrupted commands clean: the names of
:mod:`privclust._reading`, :mod:`privclust._writing`,
:mod:`privclust._temporaries` and :mod:`privclust._signals`, in one place.
"""

from __future__ import annotations

from ._reading import STDIO, file_kind, keep_text, read_frame, write_csv
from ._signals import STOP_SIGNALS, Interrupted, handle_signals, raise_if_stopped, signals_held, worker_signals
from ._temporaries import remove_stale_temporaries, remove_temporaries
from ._writing import check_outputs, committed, frame_writer, text_writer, write_atomically

__all__ = [
    "STDIO",
    "STOP_SIGNALS",
    "Interrupted",
    "check_outputs",
    "committed",
    "file_kind",
    "frame_writer",
    "handle_signals",
    "keep_text",
    "raise_if_stopped",
    "read_frame",
    "remove_stale_temporaries",
    "remove_temporaries",
    "signals_held",
    "text_writer",
    "worker_signals",
    "write_atomically",
    "write_csv",
]
