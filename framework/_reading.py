"""Reading data files (CSV, TSV, Parquet, or CSV from standard input) into
frames, and writing a frame as CSV with the original text of the cells of the
columns released as in the original (``00037`` stays ``00037``:
:func:`keep_text`)."""

from __future__ import annotations

import csv
import gzip
import io
import os
import sys
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import DataError, PrivclustError

__all__ = ["STDIO", "file_kind", "keep_text", "read_frame", "write_csv"]

_CSV = (".csv", ".csv.gz", ".tsv")
_PARQUET = (".parquet", ".pq")


def file_kind(path: Path) -> str:
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
    kind = file_kind(path)
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
    # only a column whose every value has one spelling: the host counts groups (k, key cells, uniques) on the values,
    # so "30" beside "30.0", or "NA" beside an empty field, would show a split its figures do not count
    kept = [c for c in kept if _one_spelling(frame[c], text[c])]
    if not kept:
        return frame
    out = frame.copy(deep=False)
    for c in kept:
        out[c] = pd.Series(text[c], index=frame.index, dtype=object)
    return out


def _one_spelling(values: pd.Series, text: Any) -> bool:
    """Whether every value of ``values`` (a missing one counted as one
    value) has the same text in ``text`` wherever it occurs."""
    codes = pd.factorize(values, use_na_sentinel=False)[0]
    spelled = pd.factorize(pd.Series(text, dtype=object), use_na_sentinel=False)[0]
    pairs = codes.astype(np.int64) * (int(spelled.max(initial=0)) + 1) + spelled
    return bool(np.unique(pairs).size == np.unique(codes).size)


def write_csv(frame: pd.DataFrame, target: Any, *, sep: str = ",", compression: str | None = None,
              order: Any = None) -> None:
    """Write ``frame`` as CSV to a path or an open text handle: integer
    columns without decimals, a missing value as an empty field, and a
    column with its cells' original text (see :func:`keep_text`) in that
    text; the rows in ``order`` (positions) when given."""
    shown = _with_text(frame)
    if order is not None:
        shown = shown.iloc[np.asarray(order, dtype=np.intp)]
    shown.to_csv(target, index=False, sep=sep, compression=compression)
