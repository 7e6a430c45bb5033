"""Shared fixtures: the local data folder, fresh registries, plain frames."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The shared real data sets (never copied into the project): the folder ``PRIVCLUST_DATA`` names, else
#: ``../shared/datasets`` beside the checkout.
DATASETS = Path(os.environ.get("PRIVCLUST_DATA") or ROOT.parent / "shared" / "datasets").expanduser().resolve()

if DATASETS.is_dir():
    os.environ.setdefault("PRIVCLUST_DATA", str(DATASETS))

# Property-based tests draw the same examples on every run (a CI run must not pass or fail by the luck of the draw:
# a random example once found an overflow in a test's own reference formula). PRIVCLUST_HYPOTHESIS=explore draws
# new ones, to look for failures on purpose.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - hypothesis is a test requirement
    pass
else:
    _hypothesis_settings.register_profile("privclust", derandomize=True)
    _hypothesis_settings.register_profile("explore", derandomize=False)
    _hypothesis_settings.load_profile("explore" if os.environ.get("PRIVCLUST_HYPOTHESIS") == "explore" else "privclust")


def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` (tens of seconds each: the notebooks, the
    linters, the documented command-line sessions, the DP audits) run first,
    in their collected order, then the rest: with ``pytest-xdist`` a long test
    left to the end keeps one worker busy while the other has nothing to do.
    A stable sort, so the order of every group is the order collected (each
    worker collects the same list, as xdist requires)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def require_dataset(filename: str) -> Path:
    """The path of a shared data file, or skip the test with the reason."""
    path = DATASETS / filename
    if not path.is_file():
        pytest.skip(f"{filename} not found: it is not in the shared data folder {DATASETS} (absent here)")
    return path


@pytest.fixture
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        pytest.skip(f"the shared data folder {DATASETS} is absent")
    return DATASETS


@pytest.fixture
def registry():
    """A fresh registry over the installed plugins (not the cached session one)."""
    import privclust

    return privclust.Registry(use_env=False).load()


@pytest.fixture(autouse=True)
def _fresh_session_registry():
    """Each test starts and ends with no cached session registry."""
    import privclust

    privclust.reset_registry()
    yield
    privclust.reset_registry()


@pytest.fixture(autouse=True)
def _never_download(monkeypatch):
    """Tests never reach the network: a data set that is not on this machine
    skips the test with the reason instead of being downloaded
    (``tests/test_datasets.py`` replaces the download with fakes of its own)."""
    import urllib.request

    def refuse(url, *args, **kwargs):
        pytest.skip(f"{url} is not on this machine ({DATASETS} has no copy) and tests never download")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.fixture
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 1.0], [0.0, 6.0, 3.0]])
    values = centres[rng.integers(0, 3, 90)] + rng.normal(0, 0.4, (90, 3))
    return pd.DataFrame(values, columns=["a", "b", "c"])


def default_stop_signals() -> None:
    """``preexec_fn`` of a child a test sends stop signals to: SIGINT, SIGHUP
    and SIGTERM at their defaults, even when the test run itself was started
    with them ignored (``nohup``, a background job of a non-interactive
    shell), which the command line would otherwise keep ignored by design."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
