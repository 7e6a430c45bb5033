"""Data sets for examples, tests and reproductions.

* :func:`table1` - the expenditure example of Torra's fuzzy microaggregation
  paper (Table 1): ``exp16``, ``exp7`` and ``total`` with the edit rule
  ``total = 1.16 exp16 + 1.07 exp7``; built in.
* :func:`iris`, :func:`wdbc` - through scikit-learn (shipped with it).
* :func:`load` - the labelled shape sets of the clustering-data-v1 suite
  (aggregation, flame, jain, pathbased, spiral, compound, r15, d31, wdbc,
  wine) and the SDC reference microdata (casc_census, tarragona, eia).

:func:`load` looks for a file, in order:

1. in the folder named by the environment variable ``PRIVCLUST_DATA``;
2. in a ``shared/datasets`` folder beside the working directory or any of
   its parents (so a notebook in ``notebooks/`` finds ``../shared/datasets``
   whatever the install mode), then beside the source checkout;
3. in the user cache (``$XDG_CACHE_HOME/privclust`` or
   ``~/.cache/privclust``), where it downloads the file once from its public
   source.

When none of these has it and the download fails, the
:class:`~privclust.DatasetUnavailableError` names the file and the folders
it can be put in.
"""

from __future__ import annotations

import contextlib
import difflib
import gzip
import io
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

from ._optional import deferred, optional
from .errors import DatasetUnavailableError

__all__ = ["SHAPE_SETS", "SDC_FILES", "data_dir", "iris", "load", "names", "table1", "wdbc"]

#: Environment variable naming the local data folder.
ENV_DATA = "PRIVCLUST_DATA"

_CLUSTERING_BASE = "https://github.com/gagolews/clustering-data-v1/raw/v1.1.0"
_SDCMICRO_BASE = "https://github.com/sdcTools/sdcMicro/raw/master/data"

#: Labelled shape sets: name -> (folder in clustering-data-v1, number of classes).
SHAPE_SETS: dict[str, tuple[str, int]] = {
    "aggregation": ("sipu", 7),
    "compound": ("sipu", 6),
    "d31": ("sipu", 31),
    "flame": ("sipu", 2),
    "jain": ("sipu", 2),
    "pathbased": ("sipu", 3),
    "r15": ("sipu", 15),
    "spiral": ("sipu", 3),
    "wdbc": ("uci", 2),
    "wine": ("uci", 3),
}

#: SDC reference microdata: name -> (local file, sdcMicro's R data file).
SDC_FILES: dict[str, tuple[str, str]] = {
    "casc_census": ("casc_census.csv", "CASCrefmicrodata.rda"),
    "tarragona": ("tarragona.csv", "Tarragona.rda"),
    "eia": ("eia.csv.gz", "EIA.rda"),
    "sdc_testdata": ("sdc_testdata.csv", "testdata.RData"),
}

_TABLE1 = np.array(
    [
        [15, 23, 42.01],
        [12, 43, 59.93],
        [64, 229, 319.27],
        [12, 45, 62.07],
        [28, 39, 74.21],
        [71, 102, 191.50],
        [23, 64, 95.16],
        [25, 102, 138.14],
        [48, 230, 301.78],
        [32, 50, 90.62],
        [90, 200, 318.40],
        [13, 100, 125.56],
    ]
)

#: The edit rule of Table 1.
TABLE1_RULE = "total = 1.16*exp16 + 1.07*exp7"


def table1() -> pd.DataFrame:
    """Table 1 of Torra's paper: 12 records of expenditure at 16% VAT
    (``exp16``), at 7% (``exp7``) and the total with VAT (``total``).

    Every record satisfies ``total = 1.16*exp16 + 1.07*exp7`` except the last:
    1.16*13 + 1.07*100 = 122.08, but its total is 125.56 (off by 3.48).
    """
    return pd.DataFrame(_TABLE1.copy(), columns=["exp16", "exp7", "total"])


def iris() -> pd.DataFrame:
    """Fisher's Iris (150 x 4, 3 classes) from scikit-learn, with a categorical ``class`` column."""
    bunch = deferred("sklearn.datasets").load_iris()  # heavy: imported when this set is first loaded
    frame = pd.DataFrame(bunch.data, columns=["sepal_length", "sepal_width", "petal_length", "petal_width"])
    frame["class"] = _classes(bunch.target)
    return frame


def _classes(labels: np.ndarray) -> pd.Categorical:
    """True classes as a categorical column, so that a recipe step without
    explicit columns (which takes every numeric column) never clusters on them."""
    return pd.Categorical(np.asarray(labels, dtype=np.int64))


def wdbc() -> pd.DataFrame:
    """Breast Cancer Wisconsin (Diagnostic), 569 x 30, 2 classes, from
    scikit-learn, with a categorical ``class`` column (0 = malignant, 1 = benign)."""
    bunch = deferred("sklearn.datasets").load_breast_cancer()  # heavy: imported when first loaded
    frame = pd.DataFrame(bunch.data, columns=[str(c).replace(" ", "_") for c in bunch.feature_names])
    frame["class"] = _classes(bunch.target)
    return frame


def names() -> list[str]:
    """Every name :func:`load` accepts."""
    return sorted([*SHAPE_SETS, *SDC_FILES])


def _search_dirs() -> list[Path]:
    """``shared/datasets`` beside the working directory or one of its
    parents, then beside the source checkout (an editable install)."""
    cwd = Path.cwd().resolve()
    out = [parent / "shared" / "datasets" for parent in (cwd, *cwd.parents)]
    out.append(Path(__file__).resolve().parents[2] / "shared" / "datasets")
    return out


def data_dir() -> Path | None:
    """The local data folder, or ``None`` when there is none.

    :raises DatasetUnavailableError: when ``PRIVCLUST_DATA`` names a folder
        that does not exist.
    """
    env = os.environ.get(ENV_DATA)
    if env:
        folder = Path(env).expanduser()
        if not folder.is_dir():
            raise DatasetUnavailableError(f"{ENV_DATA}={env} is not a folder; point it at the folder that "
                                          "holds the data files, or unset it")
        return folder
    for candidate in _search_dirs():
        if candidate.is_dir():
            return candidate
    return None


def _where_to_put(filename: str) -> str:
    folder = data_dir()
    places = f"the folder {folder}" if folder is not None else (
        f"a folder named by {ENV_DATA}, or a shared/datasets folder beside your working directory")
    return f"put {filename} in {places} (or in the cache {_cache_dir()})"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "privclust"


def _fetch(url: str, target: Path) -> Path:
    """Download ``url`` to ``target`` once (atomically)."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - fixed https URLs only
            payload = response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise DatasetUnavailableError(
            f"{target.name} is not on this machine and cannot be downloaded from {url} ({err}); you seem to "
            f"be offline: {_where_to_put(target.name)}, or try again online"
        ) from err
    _cache_write(target, payload)
    return target


def _cache_write(target: Path, payload: bytes) -> None:
    """Write a cache file whole or not at all: a temporary file beside it,
    renamed into place; removed, and the error named, when the write fails
    (a full disk left a partial temporary file behind)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise DatasetUnavailableError(f"cannot write {target} to the data set cache: {err.strerror or err}; free "
                                      "some space, or set XDG_CACHE_HOME to a folder you can write") from err


def _local(filename: str) -> Path | None:
    folder = data_dir()
    if folder is not None and (folder / filename).is_file():
        return folder / filename
    cached = _cache_dir() / filename
    return cached if cached.is_file() else None


def _read_vectors(path: Path) -> np.ndarray:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as fh:
        return np.loadtxt(fh, ndmin=2)


def load(name: str) -> pd.DataFrame:
    """Load a data set by name (see :func:`names`).

    Shape sets come with columns ``x0, x1, ...`` and a categorical ``class``
    column of integer labels (0 = noise where the source marks it); SDC files
    with their own column names.
    """
    if not isinstance(name, str):
        raise DatasetUnavailableError(f"a data set is named by a string; got {type(name).__name__} {name!r} "
                                      f"(known: {', '.join(names())})")
    key = name.lower()
    if key in SHAPE_SETS:
        folder, _ = SHAPE_SETS[key]
        paths = []
        for suffix in (".data.gz", ".labels0.gz"):
            filename = key + suffix
            path = _local(filename)
            if path is None:
                path = _fetch(f"{_CLUSTERING_BASE}/{folder}/{filename}", _cache_dir() / filename)
            paths.append(path)
        points = _read_vectors(paths[0])
        labels = _read_vectors(paths[1]).ravel().astype(np.int64)
        frame = pd.DataFrame(points, columns=[f"x{j}" for j in range(points.shape[1])])
        frame["class"] = _classes(labels)
        return frame
    if key in SDC_FILES:
        filename, rdata = SDC_FILES[key]
        path = _local(filename)
        if path is not None:
            return pd.read_csv(path)
        cached = _cache_dir() / filename
        rda = _fetch(f"{_SDCMICRO_BASE}/{rdata}", _cache_dir() / rdata)
        pyreadr = optional("pyreadr", f"{name} is distributed as an R data file ({rda}); install pyreadr to read "
                           f"it (pip install pyreadr), or {_where_to_put(filename)}", DatasetUnavailableError)
        frame = next(iter(pyreadr.read_r(str(rda)).values()))
        buffer = io.StringIO()
        frame.to_csv(buffer, index=False)
        _cache_write(cached, buffer.getvalue().encode())
        return frame
    close = difflib.get_close_matches(key, names(), n=2)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else f"known: {', '.join(names())}"
    raise DatasetUnavailableError(f"no data set named {name!r}; {hint}")
