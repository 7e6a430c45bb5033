"""A claim a step makes in one stratum is about that stratum's records: the
host checks it on them alone, its words name the stratum, and the release
states each step's claims over every stratum at one k (red-team rt10 F5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privclust

RECIPE = {"roles": {"strata": "region"},
          "steps": [{"use": "microaggregation", "clusterer": {"use": "dpc", "n_clusters": 2}}]}


def _frame() -> pd.DataFrame:
    """dpc with two clusters claims k = its smallest group: 10 in a (two blobs of 10), 7 in b (17 and 3 -> 7 + 13)."""
    rng = np.random.default_rng(5)
    a = np.r_[rng.normal(0, 1, 10), rng.normal(50, 1, 10)]
    b = np.r_[rng.normal(0, 1, 17), rng.normal(50, 1, 3)]
    return pd.DataFrame({"region": ["a"] * 20 + ["b"] * 20, "income": np.r_[a, b].round(3)})


@pytest.mark.parametrize("processes", [None, 1])
def test_each_stratum_claim_is_checked_on_its_own_stratum(processes):
    frame = _frame()
    release = privclust.run(RECIPE, frame, seed=1, processes=processes)
    released = release.data
    sizes = released.groupby(["region", "income"]).size()
    assert sizes["a"].min() == 10 and sizes["b"].min() == 7
    claims = release.ledger.of_kind("guarantee")
    assert [e.partition for e in claims] == [("region", "a"), ("region", "b")]
    assert [e.status for e in claims] == ["verified", "verified"]  # stratum a's k = 10 holds on stratum a
    assert claims[0].statement.startswith("Stratum region = 'a': microaggregation claims:")
    assert claims[1].statement.startswith("Stratum region = 'b': microaggregation claims:")
    assert "does NOT hold" not in release.verdict.split("largest k a step claims")[1]
    assert "microaggregation claims k-anonymity with k = 10, which does NOT hold" not in release.verdict
    # one claim for the release, at the smallest k a stratum claims, as run_dataset states it
    (claim,) = release.verification["claims"]
    assert claim["k"] == 7 and claim["k_by_stratum"] == {"a": 10, "b": 7} and claim["status"] == "verified"
    assert claim["min_group_size"] == 7 and "stratum" not in claim
    assert "Verified by the host for these columns only: k-anonymity with k = 7 of income" in release.verdict
    # the whole file is still judged at the largest k claimed: stratum b's 7 records are below 10
    assert release.verification["whole_file"]["records_in_small_groups"] == 7

