"""Red-team audit rt21 F1: a suppressed or recoded key given back by a column
released as in the original, the sampling weight included.

The check of derived columns (rt20 F1) judged only numeric changed columns
and left every role column out of its sources: a design weight with one
value per region gave back every region ``local-suppression`` set missing,
and an unchanged ``region_code`` every suppressed text region, with no word
in the verdict. The host now reads a changed text column's (or a key's)
suppressed and replaced cells off the released rows by each column released
as in the original, the weight, ids and strata included
(:func:`privclust.verify.keys_given_back`). And the host's sentence on the
whole file's k-anonymity states what the released weight, counted with its
columns, leaves below k (it said only that a weight "can" make records
unique).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

import privclust
from privclust.verify import DERIVED, KEYS_BACK_MIN_CELLS, keys_given_back

REGIONS = ["r1", "r2", "r3", "r4", "r5", "r6"]


def _run(recipe, df, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, df, **kwargs)


def _survey(n: int = 300) -> pd.DataFrame:
    """/work/rt21/w2.py and w3.py: text region, its code, sex, an age band, a design weight N_h / n_h (one value
    per region) and an income."""
    rng = np.random.default_rng(11)
    region = rng.choice(REGIONS, n, p=[.3, .3, .2, .1, .06, .04])
    population = {"r1": 90000, "r2": 80000, "r3": 50000, "r4": 20000, "r5": 9000, "r6": 4000}
    count = pd.Series(region).value_counts()
    return pd.DataFrame({
        "region": region, "region_code": pd.Series(region).str[1].astype(int),
        "sex": rng.choice(["f", "m"], n), "age": rng.choice(["0-17", "18-39", "40-64", "65+"], n),
        "w": np.array([population[r] / count[r] for r in region]).round(4),
        "job": rng.choice(list("abcdefgh"), n), "income": rng.gamma(2, 1000, n).round(2)})


def test_w2_the_design_weight_gives_back_every_suppressed_region():
    df = _survey().drop(columns=["region_code", "job"])
    recipe = {"roles": {"keys": ["region", "sex", "age"], "weight": "w"},
              "steps": [{"use": "local-suppression", "k": 5, "columns": ["region", "sex", "age"]}]}
    release = _run(recipe, df, seed=1)
    suppressed = int(release.data.region.isna().sum())
    assert suppressed == 18
    assert release.verification["derived"] == [
        {"column": "region", "given_back_by": ["w"], "share": 1.0, "cells": 18, "given_back": 18, "read": 18,
         "change": "suppressed", "records": 300}]
    assert release.verdict.startswith(
        "THE FILE GIVES BACK ORIGINAL VALUES: the column released as in the original (w) gives back the original "
        "region (18 of 18 suppressed values, a share of 1.000, read off the released rows that show it); whatever "
        "this release states of region holds for the released values only")
    # the ledger's host entry carries the same record, and the report's JSON the verification
    entry = next(e for e in release.ledger.entries if e.mechanism == DERIVED)
    assert entry.details["derived"] == release.verification["derived"]
    assert "gives back the original region (18 of 18 suppressed values" in entry.statement
    # the whole-file sentence: the weight, counted with the keys, leaves 49 records matching fewer than 5
    whole = release.verification["whole_file"]
    assert whole["holds"] is True
    assert whole["weight"] == {"columns": ["w"], "records_in_small_groups": 49, "matching": True, "holds": False}
    assert any("the released weight w, counted with them, leaves 49 of 300 records matching fewer than 5 records"
               in e.statement for e in release.ledger.entries)


def test_w3_an_unchanged_code_gives_back_the_suppressed_text_region():
    rng = np.random.default_rng(11)
    n = 300
    region = rng.choice(REGIONS, n, p=[.3, .3, .2, .1, .06, .04])
    age = rng.integers(0, 90, n)
    df = pd.DataFrame({"region": region, "region_code": pd.Series(region).str[1].astype(int),
                       "sex": rng.choice(["f", "m"], n), "agegrp": np.digitize(age, [18, 40, 65]).astype("int64"),
                       "age": age.astype(float) + 0.5, "income": rng.gamma(2, 1000, n).round(2)})
    recipe = {"roles": {"keys": ["region", "sex", "agegrp"]},
              "steps": [{"use": "local-suppression", "k": 5, "columns": ["region", "sex", "agegrp"]}]}
    release = _run(recipe, df, seed=1)
    found = {f["column"]: f for f in release.verification["derived"]}
    assert list(found) == ["region", "agegrp"]  # in the file's order
    assert found["region"]["given_back_by"] == ["region_code"]
    assert (found["region"]["cells"], found["region"]["given_back"]) == (12, 12)
    assert found["agegrp"]["given_back_by"] == ["age"] and found["agegrp"]["r2"] >= 0.99  # the numeric path, kept
    assert release.verdict.startswith(
        "THE FILE GIVES BACK ORIGINAL VALUES: the columns released as in the original (region_code, age) give back "
        "the original region (12 of 12 suppressed values, a share of 1.000, read off the released rows that show "
        "it) and agegrp (R^2 0.99")


def test_a_recode_s_suppressions_are_given_back_where_the_file_shows_the_region():
    # recode with k suppresses the records below k (every key of the step); region_code gives back each suppressed
    # region some released row shows: not r6, which every r6 record lost (nothing in the file says which code is r6)
    df = _survey().drop(columns=["w", "age"])
    hierarchy = [[r, "north" if r <= "r3" else "south"] for r in REGIONS]
    recipe = {"roles": {"keys": ["region", "sex", "job"]},
              "steps": [{"use": "recode", "columns": ["region", "sex", "job"], "hierarchies": {"region": hierarchy},
                         "levels": {"region": 0}, "k": 3, "max_suppressed": 0.3}]}
    release = _run(recipe, df, seed=1)
    assert release.data.region.isna().sum() == 54
    assert release.verification["derived"] == [
        {"column": "region", "given_back_by": ["region_code"], "share": 43 / 54, "cells": 54, "given_back": 43,
         "read": 43, "change": "suppressed", "records": 300}]
    assert release.verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the column released as in the original "
                                      "(region_code) gives back the original region (at least 43 of 54 suppressed "
                                      "values, a share of at least 0.796")  # a lower bound: r6 is not read (rt22 F2)


def test_a_global_recode_is_not_undone_by_a_code_the_file_does_not_decode():
    # every r5 and r6 record is released as "r56": no released row ties code 5 to r5, so the file gives nothing back
    df = _survey()
    recipe = {"roles": {"keys": ["region", "sex"]},
              "steps": [{"use": "recode", "columns": ["region"], "maps": {"region": {"r5": "r56", "r6": "r56"}}}]}
    release = _run(recipe, df, seed=1)
    assert "region" in release.verification["changed_columns"]
    assert release.verification["derived"] == []
    assert "GIVES BACK" not in release.verdict


def test_pram_s_replaced_values_are_given_back_by_an_unchanged_code():
    df = _survey().drop(columns=["w"])
    matrix = {a: {b: (0.8 if a == b else 0.04) for b in REGIONS} for a in REGIONS}
    recipe = {"roles": {"keys": ["region", "sex"]},
              "steps": [{"use": "pram", "columns": ["region"], "matrix": matrix}]}
    release = _run(recipe, df, seed=1)
    replaced = int((release.data.region != df.region).sum())
    assert replaced == 48
    assert release.verification["derived"] == [
        {"column": "region", "given_back_by": ["region_code"], "share": 1.0, "cells": 48, "given_back": 48,
         "read": 48, "change": "replaced", "records": 300}]
    assert release.verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the column released as in the original "
                                      "(region_code) gives back the original region (48 of 48 replaced values")


def test_unrelated_columns_and_a_few_matching_cells_flag_nothing():
    df = _survey()
    rng = np.random.default_rng(5)
    # unrelated: a code with the regions' number of values, a near-unique number, a weight drawn per record
    df["code_unrelated"] = rng.integers(1, 7, len(df))
    df["w"] = rng.uniform(50, 500, len(df)).round(3)
    recipe = {"roles": {"keys": ["region", "sex", "age"], "weight": "w"},
              "steps": [{"use": "local-suppression", "k": 5, "columns": ["region", "sex", "age"]}]}
    plain = df.drop(columns=["region_code"])
    release = _run(recipe, plain, seed=1)
    suppressed = release.data.region.isna().to_numpy()
    assert suppressed.sum() >= KEYS_BACK_MIN_CELLS
    assert release.verification["derived"] == []
    assert "GIVES BACK" not in release.verdict
    # a column that gives back fewer than KEYS_BACK_MIN_CELLS of the suppressed regions (the code on a few of them,
    # missing on the others) is not flagged ...
    few = plain.assign(some_code=df.region_code.where(~suppressed | (np.cumsum(suppressed) <= 6)).astype("Int64"))
    assert keys_given_back(few, release.data.assign(some_code=few.some_code), ["region"], ["some_code"]) == []
    # ... nor one right on only some of the cells it reads (the code on every record, shuffled on most suppressed)
    wrong = df.region_code.to_numpy().copy()
    at = np.flatnonzero(suppressed)
    wrong[at[: len(at) * 2 // 3]] = rng.permutation(wrong[at[: len(at) * 2 // 3]] % 6 + 1)
    mixed = plain.assign(mixed_code=wrong)
    assert keys_given_back(mixed, release.data.assign(mixed_code=wrong), ["region"], ["mixed_code"]) == []
    # the same column untouched gives them back (the check is not blind to it)
    exact = plain.assign(code=df.region_code)
    assert [f["given_back_by"] for f in keys_given_back(exact, release.data.assign(code=df.region_code), ["region"],
                                                        ["code"])] == [["code"]]


def test_w1_the_whole_file_sentence_states_what_the_weight_leaves_below_k():
    rng = np.random.default_rng(4)
    n = 60
    df = pd.DataFrame({"a": rng.uniform(0, 10, n).round(2), "b": rng.uniform(0, 10, n).round(2),
                       "w": rng.uniform(50, 500, n).round(3), "region": rng.choice(["n", "s", "e"], n)})
    recipe = {"roles": {"weight": "w", "strata": "region"},
              "steps": [{"use": "microaggregation", "columns": ["a", "b"], "clusterer": {"use": "mdav", "k": 3}}]}
    release = _run(recipe, df, seed=1)
    whole = release.verification["whole_file"]
    assert whole["holds"] is True and whole["k"] == 3
    assert whole["weight"] == {"columns": ["w"], "records_in_small_groups": 60, "matching": False, "holds": False}
    text = next(e.statement for e in release.ledger.entries if "Together these columns are k-anonymous" in e.statement)
    assert ("(ids, the sampling weight and the columns released as in the original without a role are not counted; "
            "the released weight w, counted with them, leaves 60 of 60 records in groups smaller than 3).") in text
    assert "can make records unique" not in text
    # the verdict, not only the ledger, says what the weight does to that k
    assert ("Verified by the host: k-anonymity with k = 3 of a, b (every released combination is shared by at least 3 "
            "records). Not counted in that k: the sampling weight w, released as in the original (sdcMicro's "
            "convention leaves weights out); counted with the file's columns, 60 of 60 records are in groups of "
            "identical rows smaller than 3 records") in release.verdict
    # a weight every record shares leaves every record where it was, and the sentence says so
    release = _run(recipe, df.assign(w=100.0), seed=1)
    assert release.verification["whole_file"]["weight"]["records_in_small_groups"] == 0
    assert any("the released weight w, counted with them, leaves every record in a group of at least 3" in e.statement
               for e in release.ledger.entries)
    assert "Not counted in that k" not in release.verdict


def test_run_dataset_states_the_weight_figure_of_the_whole_file_as_run_does(tmp_path):
    """The strata's figures are summed (a group never crosses a stratum), not the first stratum's taken for the file."""
    import pytest
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(4)
    n = 90
    df = pd.DataFrame({"a": rng.uniform(0, 10, n).round(2), "b": rng.uniform(0, 10, n).round(2),
                       "w": np.where(np.arange(n) < 45, 100.0, rng.uniform(50, 500, n).round(3)),
                       "region": np.repeat(["n", "s"], 45)})
    recipe = {"roles": {"weight": "w", "strata": "region"},
              "steps": [{"use": "microaggregation", "columns": ["a", "b"], "clusterer": {"use": "mdav", "k": 3}}]}
    release = _run(recipe, df, seed=1)
    (tmp_path / "in").mkdir()
    df.to_parquet(tmp_path / "in" / "part.parquet")
    dataset = privclust.run_dataset(recipe, tmp_path / "in", tmp_path / "out", seed=1)
    figure = release.verification["whole_file"]["weight"]
    assert figure["records_in_small_groups"] == 45  # stratum n shares one weight; stratum s's are unique
    assert dataset.verification["whole_file"]["weight"] == figure
    assert "counted with the file's columns, 45 of 90 records are in groups of identical rows smaller than 3" \
        in dataset.verdict
