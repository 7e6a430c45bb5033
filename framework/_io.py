"""Reading data files and writing outputs atomically.

Every output is first written to a hidden temporary file in the target's
folder and moved into place only when all outputs of a command are complete,
so a failed run leaves nothing half-written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from .errors import DataError, PrivclustError

__all__ = ["frame_writer", "read_frame", "text_writer", "write_atomically"]

_CSV = (".csv", ".csv.gz", ".tsv")
_PARQUET = (".parquet", ".pq")


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(_CSV):
        return "csv"
    if name.endswith(_PARQUET):
        return "parquet"
    raise PrivclustError(f"{path}: unknown file type; use .csv, .csv.gz, .tsv, .parquet or .pq")


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame."""
    path = Path(path)
    kind = _kind(path)
    if not path.is_file():
        raise DataError(f"no input file at {path}")
    try:
        if kind == "csv":
            return pd.read_csv(path, sep="\t" if path.name.lower().endswith(".tsv") else ",")
        return pd.read_parquet(path)
    except ImportError as err:
        raise PrivclustError(f"reading {path} needs pyarrow: pip install 'privclust[parquet]'") from err
    except (ValueError, OSError, pd.errors.ParserError) as err:
        raise DataError(f"cannot read {path}: {err}") from err


def frame_writer(frame: pd.DataFrame, path: Path) -> Callable[[Path], None]:
    """A function writing ``frame`` in the format ``path``'s suffix names."""
    kind = _kind(path)

    def write(tmp: Path) -> None:
        if kind == "csv":
            frame.to_csv(tmp, index=False, sep="\t" if path.name.lower().endswith(".tsv") else ",",
                         compression="gzip" if path.name.lower().endswith(".gz") else None)
        else:
            try:
                frame.to_parquet(tmp, index=False)
            except ImportError as err:
                raise PrivclustError(f"writing {path} needs pyarrow: pip install 'privclust[parquet]'") from err

    return write


def write_atomically(targets: Sequence[tuple[Path, Callable[[Path], None]]]) -> None:
    """Write every target to a temporary file, then move them all into place.

    If any writer fails, every temporary file is removed and no target is
    touched.
    """
    temps: list[tuple[Path, Path]] = []
    try:
        for target, write in targets:
            target = Path(target)
            if not target.parent.is_dir():
                raise PrivclustError(f"cannot write {target}: the folder {target.parent} does not exist")
            fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            os.close(fd)
            tmp = Path(name)
            temps.append((tmp, target))
            write(tmp)
    except BaseException:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise
    mode = 0o666 & ~_umask()  # mkstemp makes owner-only files; an output gets the usual permissions
    for tmp, target in temps:
        os.chmod(tmp, mode)
        os.replace(tmp, target)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def text_writer(text: str) -> Callable[[Path], None]:
    """A writer for a text output (a report)."""

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    return write
