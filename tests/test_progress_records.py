"""Progress bars count records: every step reports whole records done,
never going back, ending at the step's number of records."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Registry, hookimpl


class Observer:
    def __init__(self):
        self.seen: list[tuple[int, object, object]] = []

    @hookimpl
    def privclust_step_progress(self, step, index, done, total):
        self.seen.append((index, done, total))


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 6.0]])
    x = np.concatenate([c + rng.normal(size=(300, 2)) for c in centres])
    return pd.DataFrame(x, columns=["a", "b"])


@pytest.mark.filterwarnings("ignore::privclust.PrivclustWarning")
@pytest.mark.parametrize("step", [
    {"use": "fcm", "n_clusters": 3},
    {"use": "efcm", "n_clusters": 3},
    {"use": "mdav", "k": 5},
    {"use": "microaggregation", "clusterer": {"use": "mdav", "k": 5}},
    {"use": "fuzzy-microaggregation", "k": 10},
    {"use": "fuzzy-microaggregation", "k": 10, "clusterer": {"use": "efcm", "n_init": 2}},
], ids=lambda s: s["use"] + ("-efcm" if "clusterer" in s and s["clusterer"]["use"] == "efcm" else ""))
def test_progress_counts_whole_records_up_to_the_step_total(frame, step):
    observer = Observer()
    registry = Registry(use_env=False)
    registry.register(observer, "observer")
    privclust.run({"steps": [step]}, frame, seed=2, registry=registry)
    seen = observer.seen
    assert len(seen) >= 2, seen
    done = [d for _, d, _ in seen]
    assert all(type(d) is int for d in done), done[:5]
    assert all(t == len(frame) and type(t) is int for _, _, t in seen), {t for _, _, t in seen}
    assert all(b >= a for a, b in zip(done, done[1:], strict=False)), done
    assert done[-1] == len(frame)
    assert len(set(done)) > 2  # it moves on the way, not only 0 and the end
