"""Red-team audit rt20: columns released as in the original that give back
the protected ones (F1), and an (epsilon, delta) guarantee with delta of at
least 1/n (F3).

F1: a rank, a rounding or a ratio released unchanged beside the columns a
step protected gives their original values back; the verdict said only
"released as in the original". The host now asks whether those columns
predict the original values of a changed column (a cross-fitted
nearest-neighbour regression, R^2 >= 0.99) and says so first.

F3: ``gaussian`` with delta 0.9999999 was called "ε-differentially private
(ε = 1, δ = 1)"; a delta of 1/n or more allows publishing records in the
clear, so the verdict gives no DP guarantee and names the step and its
delta, the ledger's DP entry says why, and ``compare``'s ``dp`` is False.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust.verify import DERIVED, DERIVED_RECORDS, derived_columns

LAPLACE = {"use": "laplace", "epsilon": 1, "bounds": {"a": [0, 10], "b": [0, 10]}, "columns": ["a", "b"]}


def _d2(n: int = 60) -> pd.DataFrame:
    """/work/rt20/d2.py: a, b ~ U(1, 10) and, released unchanged, a / b, a rounded and the rank of a."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.uniform(1, 10, n).round(3), "b": rng.uniform(1, 10, n).round(3)})
    df["ratio"] = df.a / df.b
    df["a_round"] = df.a.round(1)
    df["rank_a"] = df.a.rank(method="first").astype(int)
    return df


def _d1() -> pd.DataFrame:
    """/work/rt20/d1.py: integers a, b, t = a + b, and unchanged a / b, the rank of a and a rounded to 10."""
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"a": rng.integers(10, 100, n).astype(float), "b": rng.integers(10, 100, n).astype(float)})
    df["t"] = df.a + df.b
    df["ratio"] = df.a / df.b
    df["rank_a"] = df.a.rank(method="first").astype(int)
    df["a_round"] = (df.a / 10).round() * 10
    return df


def _run(recipe, df, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, df, **kwargs)


def test_d2_laplace_verdict_says_the_unchanged_columns_give_a_and_b_back():
    df = _d2()
    before = df.copy()
    release = _run({"steps": [LAPLACE]}, df, seed=1)
    pd.testing.assert_frame_equal(df, before)  # the input is not changed
    found = {f["column"]: f for f in release.verification["derived"]}
    assert set(found) == {"a", "b"}
    assert set(found["a"]["given_back_by"]) | set(found["b"]["given_back_by"]) == {"ratio", "a_round", "rank_a"}
    assert all(f["r2"] >= 0.99 for f in found.values())
    verdict = release.verdict
    # first, before the DP sentence, so that it does not read as if the file protected a and b
    assert verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the columns released as in the original "
                              "(ratio, a_round, rank_a) give back the original a (R^2 0.9")
    assert verdict.index("THE FILE GIVES BACK") < verdict.index("ε-differentially private")
    assert "holds for the released values only" in verdict
    # the "not covered" part names them with what they give back
    assert ("the columns released as in the original (ratio, a_round, rank_a), which give back the original a "
            "(R^2 0.9") in verdict
    assert ": remove or protect them;" in verdict
    # the host's ledger entry, with the figures
    entry = next(e for e in release.ledger.entries if e.mechanism == DERIVED)
    assert entry.kind == "verified"
    assert entry.details["derived"] == release.verification["derived"]
    assert "seed" not in entry.statement.lower()


def test_d1_microaggregation_verdict_says_k_anonymity_does_not_protect_a_b_t():
    recipe = {"constraints": [{"use": "linear", "rules": ["t = a + b"]}],
              "steps": [{"use": "microaggregation", "k": 5, "columns": ["a", "b", "t"]}]}
    release = _run(recipe, _d1(), seed=1)
    found = release.verification["derived"]
    assert {f["column"] for f in found} >= {"a", "b"}
    assert {c for f in found for c in f["given_back_by"]} == {"ratio", "rank_a", "a_round"}
    verdict = release.verdict
    assert verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the columns released as in the original "
                              "(ratio, rank_a, a_round) give back the original a")
    assert verdict.index("THE FILE GIVES BACK") < verdict.index("Verified by the host: k-anonymity with k = 5")
    assert "Released as in the original: ratio, rank_a, a_round, which give back the original a" in verdict


def test_unrelated_unchanged_columns_are_not_flagged():
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({"a": rng.uniform(1, 10, n), "b": rng.uniform(1, 10, n),
                       "noise": rng.normal(size=n), "id": rng.permutation(n), "w": rng.uniform(1, 5, n)})
    release = _run({"steps": [LAPLACE]}, df, seed=1)
    assert release.verification["derived"] == []
    assert "GIVES BACK" not in release.verdict
    assert not any(e.mechanism == DERIVED for e in release.ledger.entries)
    # beside a derived column, the unrelated ones are not named
    df["a_copy"] = df["a"].round(2)
    release = _run({"steps": [LAPLACE]}, df, seed=1)
    assert [(f["column"], f["given_back_by"]) for f in release.verification["derived"]] == [("a", ["a_copy"])]
    assert ("the columns released as in the original (noise, id, w, a_copy), of which a_copy gives back the "
            "original a (R^2 0.99") in release.verdict


def test_role_columns_are_asked_too():
    # rt21 F1: the ids and the weight are released too; a rank given as the ids and a rounding given as the weight
    # give a back as they do without a role (they were left out of the sources until rt21)
    df = _d2()
    recipe = {"roles": {"ids": ["rank_a"], "weight": "a_round"},
              "steps": [{**LAPLACE, "columns": ["a"], "bounds": {"a": [0, 10]}}]}
    release = _run(recipe, df.drop(columns=["ratio"]), seed=1)
    assert [(f["column"], f["given_back_by"]) for f in release.verification["derived"]] == [
        ("a", ["a_round", "rank_a"])]
    assert release.verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the columns released as in the original "
                                      "(a_round, rank_a) give back the original a (R^2 0.99")


def test_no_changed_or_no_unchanged_columns():
    df = _d2()
    assert derived_columns(df, [], list(df.columns)) == []
    assert derived_columns(df, list(df.columns), []) == []
    release = _run({"steps": [{**LAPLACE, "bounds": {c: [0, 100] for c in df.columns}, "columns": list(df.columns)}]},
                   df, seed=1)
    assert release.verification["unchanged_columns"] == []
    assert release.verification["derived"] == []
    # nothing changed: the release says that, not that columns give values back
    release = _run({"evaluate": ["dbrl"]}, df, seed=1)
    assert release.verification["derived"] == []
    assert "GIVES BACK" not in release.verdict


def test_derived_columns_is_deterministic_bounded_and_leaves_its_input():
    rng = np.random.default_rng(1)
    n = 3 * DERIVED_RECORDS + 7
    df = pd.DataFrame({"a": rng.uniform(0, 1, n), "c": rng.normal(size=n)})
    df["a2"] = 3 * df["a"] - 1
    df.loc[::97, "a2"] = np.nan  # missing values are left out of the fit
    before = df.copy()
    first = derived_columns(df, ["a", "c"], ["a2"])
    assert first == derived_columns(df, ["a", "c"], ["a2"])
    assert [(f["column"], f["given_back_by"], f["records"]) for f in first] == [("a", ["a2"], DERIVED_RECORDS)]
    pd.testing.assert_frame_equal(df, before)


def test_derived_columns_in_run_dataset(tmp_path):
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"region": rng.choice(["n", "s"], n), "a": rng.uniform(1, 10, n),
                          "b": rng.uniform(1, 10, n)})
    frame["rank_a"] = frame["a"].rank(method="first").astype(int)
    frame.to_parquet(tmp_path / "in", partition_cols=["region"])
    recipe = {"roles": {"strata": "region"}, "steps": [LAPLACE]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run_dataset(recipe, tmp_path / "in", tmp_path / "out", seed=1, processes=1)
    assert release.verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the column released as in the original "
                                      "(rank_a) gives back the original a (R^2 0.9")
    assert "in 2 strata" in release.verdict


# ---------------------------------------------------------------------------
# F3: delta of at least 1/n
# ---------------------------------------------------------------------------


def _p5(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.normal(50, 10, n).round(3), "b": rng.normal(20, 5, n).round(3)})


GAUSSIAN = {"use": "gaussian", "epsilon": 1, "bounds": {"a": [0, 100], "b": [0, 50]}}


@pytest.mark.parametrize("delta", [0.9999999, 1 / 12])
def test_delta_of_one_over_n_or_more_is_no_guarantee(delta):
    release = _run({"steps": [{**GAUSSIAN, "delta": delta}]}, _p5(), seed=1)  # still runs: not refused
    verdict = release.verdict
    assert verdict.startswith("No differential-privacy guarantee: the delta stated for the file is ")
    assert "ε-differentially private" not in verdict
    assert (f"(steps' deltas: step 0 (gaussian): delta {privclust.ledger.exact(delta)}), at least 1/n = 1/12 for the "
            "12 records") in verdict
    assert "protects no record in particular" in verdict
    assert release.dp_guarantee is False
    entry = release.ledger.of_kind("dp")[0]
    assert "Host note: The delta stated for the file is" in entry.statement
    assert "the release is not called differentially private" in entry.statement


def test_delta_below_one_over_n_stays_a_guarantee():
    release = _run({"steps": [{**GAUSSIAN, "delta": 0.9 / 12}]}, _p5(), seed=1)
    assert release.verdict.startswith("ε-differentially private")
    assert "Host note: The delta stated" not in release.ledger.of_kind("dp")[0].statement


def test_compare_dp_column_is_false_for_a_vacuous_delta():
    table = privclust.compare({"steps": [{**GAUSSIAN, "delta": 0.5}]}, _p5(), grid={"gaussian.delta": [0.5, 1e-3]},
                              repeats=1, seed=1, processes=1, progress=False)
    dp = dict(zip(table["gaussian.delta"], table["dp"], strict=True))
    assert dp == {0.5: False, 1e-3: True}


def test_the_delta_tested_against_one_over_n_is_the_one_the_verdict_states():
    """Under add/remove the verdict states the file's guarantee under replace-one with delta (1 + e^epsilon) delta:
    that delta, not the composed one, is the one at least 1/n that guarantees nothing."""
    from privclust.accountants import ADD_REMOVE
    from privclust.coverage import stated_delta, vacuous

    context = privclust.PrivacyContext(seed=1)
    context.spend(epsilon=1.0, delta=0.05, mechanism="gaussian", sensitivity=1.0, relation=ADD_REMOVE, covers="a")
    dp = context.ledger.of_kind("dp")
    total = context.accountant.total(context.ledger.entries)
    assert stated_delta(dp, *total) == pytest.approx((1 + np.e) * 0.05)
    assert vacuous(dp, total, 10) == pytest.approx((1 + np.e) * 0.05)  # 0.186 >= 1/10, though 0.05 < 1/10
    assert vacuous(dp, total, 4) is None  # 0.186 < 1/4
