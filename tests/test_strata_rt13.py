"""run_dataset against privclust.run on the same data (red-team audit rt13): a stratum released unchanged, a claim
made in some strata only, the whole-file matching figures, the label numbering and the stratum columns' types."""

from __future__ import annotations

import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust.strata import _sum_checks

pytest.importorskip("pyarrow")

MDAV3 = {"use": "microaggregation", "k": 3, "columns": ["x", "y"]}


def _both(recipe, frame, tmp_path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = privclust.run(recipe, frame, seed=1, **kwargs)
        frame.to_parquet(tmp_path / "in", partition_cols=["region"])
        dataset = privclust.run_dataset(recipe, tmp_path / "in", tmp_path / "out", seed=1, processes=1, **kwargs)
    return run, dataset


@pytest.mark.parametrize("unchanged", ["a", "c"])
def test_a_stratum_released_unchanged_is_settled_from_its_own_groups(tmp_path, unchanged):
    """F1: MDAV leaves a stratum of two groups of 3 identical records as it is, so its claim was void in its task;
    sorting first it made the dataset's k claim 'without a k the host can check', sorting last a KeyError. It is now
    settled from the stratum's own groups, as privclust.run settles it: verified at k = 3."""
    rng = np.random.default_rng(5)
    other = "b"
    frame = pd.DataFrame({"region": [unchanged] * 6 + [other] * 40, "x": rng.uniform(0, 10, 46).round(2),
                          "y": rng.uniform(0, 10, 46).round(2)})
    frame.loc[:5, ["x", "y"]] = [[1.0, 1.0]] * 3 + [[7.0, 2.0]] * 3
    run, dataset = _both({"roles": {"strata": "region"}, "steps": [MDAV3]}, frame, tmp_path)
    said = "Verified by the host: k-anonymity with k = 3 of x, y (every released combination is shared by at least 3"
    assert said in run.verdict and said in dataset.verdict
    assert [(c["status"], c["k"]) for c in dataset.verification["claims"]] == [("verified", 3)] * 2
    assert not any("status_if_changed" in c for c in dataset.verification["claims"])
    entries = [e for e in dataset.ledger if e.kind == "guarantee" and f"region = '{unchanged}'" in e.statement]
    assert entries and all(e.status == "verified" for e in entries)
    assert all("the steps changed no value of this stratum (its 6 records are released as they were); every "
               "combination of x, y is shared by at least 3 records (k = 3): verified." in e.statement for e in entries)


def test_a_release_that_changes_nothing_stays_void():
    """The figures a void claim now carries do not settle it in privclust.run: a release that changes no column
    protects nothing, whatever its groups."""
    frame = pd.DataFrame({"region": ["a"] * 6 + ["b"] * 6, "x": [1.0] * 3 + [2.0] * 3 + [3.0] * 6,
                          "y": [1.0] * 12})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = privclust.run({"roles": {"strata": "region"}, "steps": [MDAV3]}, frame, seed=1)
    assert {c["status"] for c in run.verification["claims"]} == {"void"}
    assert "Verified by the host" not in run.verdict


@attrs.frozen(kw_only=True)
class RoundClaim:
    """Rounds to integers; claims 5-anonymity when given more than 20 records (false)."""

    name: ClassVar[str] = "round-claim"

    def mask(self, data, context):
        if len(data) > 20:
            context.record("round-claim: k-anonymity with k = 5.", claim=privclust.KAnonymity(5, list(data.columns)))
        return privclust.Masked(data=data.round(), diagnostics={})


class _RoundPlugin:
    @privclust.hookimpl
    def privclust_register_maskers(register):  # noqa: N805 (a hook takes no self)
        register(RoundClaim)


@pytest.mark.parametrize("claiming", ["a", "b"])
def test_a_claim_made_in_some_strata_is_stated(tmp_path, claiming):
    """F3: the strata's claims were paired by position: a claim made only in a later stratum was left out of the
    verdict, and one made only in the first raised IndexError. They are grouped by step and order, as privclust.run
    groups them, and the strata that made none are named."""
    registry = privclust.Registry(plugins=[_RoundPlugin])
    rng = np.random.default_rng(1)
    quiet = "b" if claiming == "a" else "a"
    frame = pd.DataFrame({"region": [quiet] * 10 + [claiming] * 30, "x": rng.uniform(0, 100, 40)})
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "round-claim", "columns": ["x"]}]}
    run, dataset = _both(recipe, frame, tmp_path, registry=registry)
    said = (f"round-claim claims k-anonymity with k = 5, which does NOT hold on the released data of the stratum "
            f"region = '{claiming}' (the step made no such claim in '{quiet}') (30 records")
    assert said in run.verdict and said in dataset.verdict
    for release in (run, dataset):
        [claim] = release.verification["claims"]
        assert claim["status"] == "refuted" and claim["not_claimed_in"] == [quiet] and "step" not in claim
        assert claim["claimed_in"] == [claiming]


def test_a_verified_claim_made_in_one_stratum_is_stated_for_that_stratum_only(tmp_path):
    """A claim one stratum's step made and the host verified there read "every released combination is shared by
    at least 6 records" beside a stratum of 10 unique records; in run_dataset, where the claiming stratum's release
    changed nothing, the claim stayed void and was left out of the verdict. Both now state it for its stratum."""
    registry = privclust.Registry(plugins=[_RoundPlugin])
    x = np.r_[np.arange(10) * 7.3 + 0.1, np.repeat(np.arange(5) * 10.0, 6)]  # b: groups of 6, already integers
    frame = pd.DataFrame({"region": ["a"] * 10 + ["b"] * 30, "x": x})
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "round-claim", "columns": ["x"]}]}
    run, dataset = _both(recipe, frame, tmp_path, registry=registry)
    said = ("Verified by the host for these columns only, in the stratum region = 'b' only (the step made no such "
            "claim in 'a'): k-anonymity with k = 5 of x (every released combination there is shared by at least 6 "
            "records).")
    assert said in run.verdict and said in dataset.verdict
    assert [c["status"] for c in dataset.verification["claims"]] == ["verified"]
    released = pd.read_parquet(tmp_path / "out")
    sizes = released.groupby(["region", "x"], observed=True).size()
    assert sizes.loc["b"].min() == 6 and sizes.loc["a"].min() == 1  # true of b, false of the whole file


def test_the_dataset_verdict_counts_verbatim_records_within_their_stratum(tmp_path):
    """Each run_dataset task compares its stratum's released records with that stratum's originals only: the
    verdict said "to an original record, its own or another's" (31 of 40) where privclust.run, matching across
    strata, counts 32."""
    registry = privclust.Registry(plugins=[_RoundPlugin])
    x = np.r_[np.arange(10) * 7.3 + 0.1, np.repeat(np.arange(5) * 10.0, 6)]
    frame = pd.DataFrame({"region": ["a"] * 10 + ["b"] * 30, "x": x})
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "round-claim", "columns": ["x"]}]}
    run, dataset = _both(recipe, frame, tmp_path, registry=registry)
    assert ("32 of 40 records are released verbatim (identical on the columns the steps worked on to an original "
            "record, its own or another's)") in run.verdict
    assert ("31 of 40 records are released verbatim (identical on the columns the steps worked on to an original "
            "record of their stratum, its own or another's)") in dataset.verdict


def test_the_whole_file_matching_figures_are_the_smallest_of_any_stratum():
    """F5: min_matching_records and identical_min_group_size were the first stratum's (9 where stratum b's records
    match 3 others); they are the smallest over the strata, a stratum without missing values giving its identical
    rows."""
    base = {"records": 10, "changed_columns": ["x"], "label_columns": [], "protected_columns": ["x"],
            "verbatim_records": 0, "steps": [], "claims": []}
    whole = {"columns": ["x", "region"], "k": 3, "holds": True}
    a = dict(base, whole_file=dict(whole, groups=2, min_group_size=1, unique_records=1, records_in_small_groups=1,
                                   identical_min_group_size=1, min_matching_records=9, records_with_few_matches=0,
                                   missing_values=1))
    b = dict(base, whole_file=dict(whole, groups=3, min_group_size=3, unique_records=0, records_in_small_groups=0))
    for order in ([a, b], [b, a]):
        merged = _sum_checks(order, ["x", "region"], ["a", "b"])["whole_file"]
        assert merged["min_matching_records"] == 3 and merged["identical_min_group_size"] == 1


def test_the_report_says_the_labels_are_numbered_within_each_stratum(tmp_path):
    """F6: the dataset report said 'clusters: 11' of a label column with 6 distinct values (each stratum's task
    numbers its clusters from 0). The report now gives the clusters of each stratum and how the labels are
    numbered, which the written file bears out."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"region": rng.choice(["a", "b"], 60), "x": rng.uniform(0, 10, 60).round(2),
                          "y": rng.uniform(0, 10, 60).round(2)})
    recipe = {"roles": {"strata": "region"}, "steps": [MDAV3, {"use": "mdav", "k": 5, "columns": ["x", "y"]}]}
    _, dataset = _both(recipe, frame, tmp_path)
    step = dataset.report()["steps"][1]
    back = pd.read_parquet(tmp_path / "out")
    distinct = back.groupby("region", observed=True)["cluster"].nunique().to_dict()
    assert step["clusters_by_stratum"] == {str(k): v for k, v in distinct.items()}
    assert step["clusters"] == sum(distinct.values()) == len(back.groupby(["region", "cluster"], observed=True))
    assert "numbered from 0 within each stratum" in step["label_numbering"]
    assert back["cluster"].min() == 0 and all(g["cluster"].min() == 0 for _, g in back.groupby("region",
                                                                                              observed=True))


@pytest.mark.parametrize(("values", "message"), [
    (np.array([0.5, 1.0, 2.25]), "'region' is of type double"),
    (np.array([True, False]), "'region' is of type bool"),
    (pd.to_datetime(["2020-01-01", "2021-06-30"]).to_numpy(), "'region' is of type timestamp"),
    (np.array(["01", "1", "007"], dtype=object), "'01' would come back as 1"),
    (np.array(["1", "2"], dtype=object), "'1' would come back as 1.*or store the column as integers"),
    (np.array(["__HIVE_DEFAULT_PARTITION__", "a"], dtype=object), "holds the value '__HIVE_DEFAULT_PARTITION__'"),
    (np.array([2**40, 1]), "holds the integer 1099511627776, beyond 32 bits"),
])
def test_a_stratum_column_the_output_would_not_give_back_is_refused(tmp_path, values, message):
    """F4: the output keeps the stratum columns in its Hive directory names only: floats, booleans and dates came
    back as text, text 01 and 1 made pd.read_parquet fail, __HIVE_DEFAULT_PARTITION__ came back missing. Such a
    column is refused before anything is computed, naming the column and the value."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"region": np.repeat(values, 12), "x": rng.uniform(0, 10, 12 * len(values)).round(2)})
    frame.to_parquet(tmp_path / "in.parquet")
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}
    with pytest.raises(privclust.DataError, match=message):
        privclust.run_dataset(recipe, tmp_path / "in.parquet", tmp_path / "out", seed=1, processes=1)
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == [tmp_path / "in.parquet"]


@pytest.mark.parametrize("values", [np.array([3, -1, 7]), np.array(["north", "1", ""], dtype=object)])
def test_a_stratum_column_the_output_gives_back_is_released(tmp_path, values):
    """F4: integers (within 32 bits) and text that is not all integers come back from pd.read_parquet(output) with
    the values they had."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"region": np.repeat(values, 12), "x": rng.uniform(0, 10, 12 * len(values)).round(2)})
    frame.to_parquet(tmp_path / "in.parquet")
    recipe = {"roles": {"strata": "region"}, "steps": [{"use": "microaggregation", "k": 3, "columns": ["x"]}]}
    privclust.run_dataset(recipe, tmp_path / "in.parquet", tmp_path / "out", seed=1, processes=1)
    back = pd.read_parquet(tmp_path / "out")["region"]
    assert sorted(back.astype(object).tolist(), key=str) == sorted(frame["region"].tolist(), key=str)
    if values.dtype == object:  # text comes back as text
        assert {type(v) for v in back.astype(object)} == {str}
