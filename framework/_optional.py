"""Imports made when a feature first needs them, in one place.

Two kinds, both by name through :func:`importlib.import_module` so that no
module of privclust imports inside a function:

* :func:`optional`: a dependency privclust does not install (matplotlib for
  plots, distributed for Dask, pyreadr for R data files, pytest for the
  conformance kit's decorator); a missing one is a clear error saying what
  to install, raised only when the feature is used;
* :func:`deferred`: a heavy module of a required dependency (scipy.stats,
  sklearn.datasets, about 0.6 s each), imported on first use so that
  ``import privclust`` and ``privclust --version`` stay fast.

This is the pattern of pandas' ``import_optional_dependency``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import PrivclustError

__all__ = ["PLOTS", "deferred", "optional"]

#: The message for every plotting feature without matplotlib.
PLOTS = "plots need matplotlib: pip install 'privclust[plots]'"


def optional(module: str, message: str, error: type[Exception] = PrivclustError) -> ModuleType:
    """``module`` imported, or ``error(message)`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise error(message) from err


def deferred(module: str) -> ModuleType:
    """A heavy module of a required dependency, imported on first use."""
    return importlib.import_module(module)
