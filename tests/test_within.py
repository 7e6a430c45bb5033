"""A step's ``within`` option (issue 25): the host runs the step once per
group of records with identical values of columns as the earlier steps
released them (a missing value a value of its own), within each stratum;
groups too small, within columns that are the step's own or absent, and
differentially private steps are refused by name; the ledger holds one
entry per claim, not one per group; the survey file is published
k-anonymous on the whole file."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import DataError, RecipeError
from privclust.claims import KAnonymity
from privclust.cli import main
from privclust.execute import fold_group_entries
from privclust.ledger import LedgerEntry
from privclust.recipe import Recipe, Step

ROOT = Path(__file__).resolve().parent.parent
SURVEY = ROOT.parent / "shared" / "datasets" / "sdc_testdata.csv"
MDAV = {"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}, "columns": ["income", "expend"]}


def _frame(n: int = 72, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "region": np.repeat(["north", "south"], n // 2),
        "sex": np.tile(["f", "m", "f", "m", "m", "f"], n // 6),
        "age": np.tile(["young", "young", "old", "old", "old", "young"], n // 6),
        "income": rng.gamma(2.0, 1000.0, n),
        "expend": rng.gamma(2.0, 800.0, n),
    })


def _groups_within(release: privclust.Release, by: list[str]) -> None:
    """Every group of identical released income, expend lies within one value of ``by``."""
    data = release.data.astype({c: object for c in by}).fillna({c: "<missing>" for c in by})
    for _, part in data.groupby(["income", "expend"]):
        assert len(part.drop_duplicates(by)) == 1
        assert len(part) >= 3


def test_a_step_runs_once_per_group_of_identical_values_and_its_groups_never_cross_them():
    frame = _frame()
    release = privclust.run({"steps": [{**MDAV, "within": ["sex", "age"]}]}, frame, seed=1)
    _groups_within(release, ["sex", "age"])
    for (sex, age), part in release.data.groupby(["sex", "age"]):  # each group's means kept: it ran on the group alone
        rows = (frame["sex"] == sex) & (frame["age"] == age)
        assert np.isclose(part["income"].mean(), frame.loc[rows, "income"].mean())
    pd.testing.assert_frame_equal(frame, _frame())  # the input is never modified
    process = [e for e in release.ledger if e.kind == "process" and e.step == 0][0]
    assert "once on each of 4 groups of records with identical values of sex, age" in process.statement
    assert process.details["within"] == ["sex", "age"]


def test_the_ledger_folds_the_groups_entries_into_one_per_claim_and_the_host_verifies_it_within_the_groups():
    frame = _frame()
    plain = privclust.run({"steps": [MDAV]}, frame, seed=1)
    release = privclust.run({"steps": [{**MDAV, "within": ["sex", "age"]}]}, frame, seed=1)
    claims = [e for e in release.ledger if e.kind == "guarantee"]
    assert len(claims) == len([e for e in plain.ledger if e.kind == "guarantee"])  # not one per group
    assert all("In each of the 4 groups of records with identical values of sex, age" in e.statement for e in claims)
    assert all(e.details["within"] == {"columns": ["sex", "age"], "groups": 4, "recorded_in": 4} for e in claims)
    assert all(e.status == "verified" for e in claims)
    assert [c["status"] for c in release.verification["claims"]] == ["verified"] * len(claims)
    assert [e.seq for e in release.ledger] == list(range(len(release.ledger)))


def test_within_keys_takes_the_keys_role_and_strata_split_the_groups_further():
    frame = _frame(144)
    release = privclust.run({"roles": {"strata": "region", "keys": ["sex", "age"]},
                             "steps": [{**MDAV, "within": "keys"}]}, frame, seed=2)
    _groups_within(release, ["region", "sex", "age"])
    process = [e for e in release.ledger if e.kind == "process" and e.step == 0][0]
    assert "8 groups" in process.statement and "within each stratum" in process.statement
    assert release.outcomes[0].within == ("sex", "age")
    assert len(np.unique(release.outcomes[0].within_groups)) == 8


def test_a_missing_value_in_a_within_column_is_a_group_of_its_own():
    frame = _frame()
    frame.loc[frame.index[:6], "sex"] = np.nan
    release = privclust.run({"steps": [{**MDAV, "within": ["sex"]}]}, frame, seed=3)
    _groups_within(release, ["sex"])
    assert np.isclose(release.data["income"][:6].mean(), frame["income"][:6].mean())
    assert release.data["sex"][:6].isna().all()


def test_a_group_smaller_than_the_step_needs_is_refused_naming_it_and_the_fix():
    frame = _frame()
    frame.loc[frame.index[[0, 2]], "age"] = "child"  # 2 records (f): mdav with k = 3 needs 2k = 6
    with pytest.raises(DataError, match=r"(?s)1 of 5 groups are smaller.*sex = f, age = child.*2 record\(s\).*"
                                        r"Recode or suppress the keys first so that every combination has at least "
                                        r"6 records"):
        privclust.run({"steps": [{**MDAV, "within": ["sex", "age"]}]}, frame, seed=1)


def test_within_the_steps_own_column_or_an_absent_column_is_refused_by_name():
    with pytest.raises(RecipeError, match=r"steps\[0\]\.within.*names the step's own column\(s\) income"):
        Recipe.load({"steps": [{**MDAV, "within": ["income", "sex"]}]})
    frame = _frame()
    with pytest.raises(DataError, match=r"steps\[0\] \(microaggregation\)\.within: names the step's own column"):
        privclust.run({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3},
                                  "within": ["income"]}]}, frame[["sex", "income", "expend"]], seed=1)
    with pytest.raises(DataError, match=r"within: no column 'town' in the data"):
        privclust.run({"steps": [{**MDAV, "within": ["town"]}]}, frame, seed=1)
    with pytest.raises(RecipeError, match=r"within.*declares no \[roles\] keys"):
        Recipe.load({"steps": [{**MDAV, "within": "keys"}]})
    with pytest.raises(RecipeError, match=r"steps\[0\]\.within.*must be \"keys\" or a list of column names"):
        Recipe.load({"steps": [{**MDAV, "within": [1]}]})


def test_a_differentially_private_step_is_refused_with_within():
    recipe = {"privacy": {"epsilon": 1.0},
              "steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["income"], "bounds": {"income": [0, 20000]},
                         "within": ["sex"]}]}
    with pytest.raises(RecipeError, match=r"steps\[0\]\.within.*differentially private.*no parallel composition"):
        privclust.compile(recipe)


def test_within_round_trips_through_toml():
    recipe = Recipe.load({"roles": {"keys": ["sex"]}, "steps": [{**MDAV, "within": "keys"},
                                                                 {**MDAV, "within": ["sex", "age"]}]})
    again = Recipe.load(recipe.to_toml())
    assert [s.within for s in again.steps] == ["keys", ("sex", "age")]
    assert Step(use="microaggregation", within=["sex"]).to_dict()["within"] == ["sex"]


def _entry(seq: int, statement: str, k: int = 3) -> LedgerEntry:
    return LedgerEntry(seq=seq, kind="guarantee", step=0, step_id="m", component="m", statement=statement,
                       mechanism="k-anonymity", claim=statement, status="claimed",
                       fact=KAnonymity(k=k, columns=("x",)), details={"groups": seq, "k": k})


def test_fold_group_entries_folds_identical_claims_and_keeps_different_ones_apart():
    tagged = [(0, _entry(0, "2 groups")), (1, _entry(1, "5 groups")), (2, _entry(2, "1 group", k=4))]
    folded = fold_group_entries(tagged, ["sex"], 3)
    assert len(folded) == 2
    same, other = folded
    assert same.statement.startswith("In 2 of the 3 groups of records with identical values of sex")
    assert "k-anonymity with k = 3 of x" in same.statement and same.claim == same.statement
    assert same.details["groups"] == {"min": 0, "max": 1} and same.details["k"] == 3
    assert same.details["within"] == {"columns": ["sex"], "groups": 3, "recorded_in": 2}
    assert other.fact.k == 4 and other.details["within"]["recorded_in"] == 1
    leaks = [(g, LedgerEntry(seq=g, kind="leak", step=0, step_id="m", component="m", statement=f"leak {g}",
                             mechanism="bounds")) for g in range(2)]
    assert [e.statement for e in fold_group_entries(leaks, ["sex"], 2)] == ["leak 0", "leak 1"]  # words differ


def test_check_names_the_within_groups(tmp_path, capsys):
    frame = _frame()
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    recipe = tmp_path / "r.toml"
    recipe.write_text('[[steps]]\nuse = "microaggregation"\ncolumns = ["income", "expend"]\nwithin = ["sex", "age"]\n'
                      'clusterer = { use = "mdav", k = 3 }\n')
    assert main(["check", str(recipe), "--input", str(data)]) == 0
    out = capsys.readouterr().out
    assert "once per group of identical sex, age" in out
    assert ("runs within groups of identical sex, age: on the data as given, 4 groups, the smallest of 12 record(s)"
            in out)


@pytest.mark.skipif(not SURVEY.exists(), reason=f"the survey file {SURVEY} is not here (../shared/datasets)")
def test_the_survey_file_is_published_k_anonymous_on_the_whole_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the hierarchy paths are relative to the project's root
    out = tmp_path / "survey.csv"
    assert main(["run", "docs/examples/survey-publish.toml", "-i", str(SURVEY), "-o", str(out), "--seed", "1"]) == 0
    captured = capsys.readouterr()
    printed = " ".join((captured.out + captured.err).split())  # the verdict, wrapped to the terminal
    assert "The released file is k-anonymous with k = 3, verified by the host" in printed
    released = pd.read_csv(out)
    columns = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "expend", "income", "savings"]
    assert released.astype(str).groupby(columns).size().min() >= 3


def test_strata_on_worker_processes_fold_every_stratums_groups_as_one_process_does():
    frame = _frame(144)
    recipe = {"roles": {"strata": "region", "keys": ["sex", "age"]}, "steps": [{**MDAV, "within": "keys"}]}
    one = privclust.run(recipe, frame, seed=2)
    two = privclust.run(recipe, frame, seed=2, processes=2)
    _groups_within(two, ["region", "sex", "age"])
    statements = [[e.statement for e in r.ledger if e.kind == "guarantee"] for r in (one, two)]
    assert statements[0] == statements[1] and len(statements[0]) == 2
    assert all("In each of the 8 groups" in s for s in statements[1])
    assert not any("\0within group" in e.details for e in two.ledger)


def test_the_verdict_says_at_which_k_the_whole_file_is_k_anonymous_before_the_larger_k_it_is_not():
    frame = _frame()
    recipe = {"roles": {"keys": ["sex", "age"]},
              "steps": [{"use": "local-suppression", "columns": ["sex", "age"], "k": 6},
                        {**MDAV, "within": "keys"}]}
    release = privclust.run(recipe, frame, seed=1)
    whole = release.verification["whole_file"]
    assert whole["k"] == 6 and whole["holds"] is False and whole["min_group_size"] == 3
    assert ("The released file is k-anonymous with k = 3, verified by the host over the columns the steps worked "
            "on") in release.verdict
    assert "but NOT with k = 6, the largest k a step claims" in release.verdict
    assert release.verdict.index("k-anonymous with k = 3, verified") < release.verdict.index("for these columns only")


@attrs.frozen(kw_only=True)
class SpendsWithoutSaying:
    """A masker that spends budget without declaring a privacy relation or a planned cost."""

    name: ClassVar[str] = "spends-without-saying"

    def mask(self, data, context):
        context.spend(epsilon=0.1, mechanism="laplace", sensitivity=1.0, relation="replace-one",
                      covers="the released income")
        return privclust.Masked(data=data + 1.0)


class SpendingPlugin:
    @privclust.hookimpl
    def privclust_register_maskers(self, register):
        register(SpendsWithoutSaying)


def test_a_step_that_spends_in_its_groups_without_declaring_it_is_refused_when_it_runs():
    registry = privclust.Registry(plugins=[SpendingPlugin()], use_env=False)
    recipe = {"privacy": {"epsilon": 10.0},
              "steps": [{"use": "spends-without-saying", "columns": ["income"], "within": ["sex"]}]}
    with pytest.raises(privclust.PrivclustError, match=r"spent differential privacy \(laplace\) in its within groups "
                                                       r"of sex.*no parallel composition.*nothing was released"):
        privclust.run(recipe, _frame(), seed=1, registry=registry)


def test_within_an_earlier_clusterers_labels_and_small_groups_named_with_their_stratum():
    frame = _frame()
    recipe = {"steps": [{"use": "efcm", "n_clusters": 2, "lambda": 2.0, "columns": ["income", "expend"],
                         "output": "group"},
                        {**MDAV, "within": ["group"]}]}
    release = privclust.run(recipe, frame, seed=1)
    _groups_within(release, ["group"])
    frame.loc[frame.index[[0, 2]], "age"] = "child"  # in the stratum north
    with pytest.raises(DataError, match=r"\(region = north; sex = f, age = child\): 2 record\(s\)"):
        privclust.run({"roles": {"strata": "region"}, "steps": [{**MDAV, "within": ["sex", "age"]}]}, frame, seed=1)


@pytest.mark.parametrize("masker", [{"use": "microaggregation", "k": 3}, {"use": "mdav", "k": 3, "kind": "clusterers"}])
def test_post_processing_within_an_original_column_is_not_differentially_private(masker):
    """Red-team audit: laplace on x, y, then a step on those noisy values within the original key k. The verdict
    called its output "computed from those DP values only (post-processing)", but its groups come from k: one
    record's key changed made 3 groups of the noisy values or 2, so distinct released rows 5 or 4 at every seed."""
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 100, 15).round(2), rng.uniform(0, 100, 15).round(2)
    kind = masker.pop("kind", "maskers")
    step = {**masker, "columns": ["x", "y"], "within": ["k"]}
    recipe = {"privacy": {"epsilon": 1.0}, "roles": {"keys": ["k"]},
              "steps": [{"use": "laplace", "columns": ["x", "y"], "epsilon": 1.0,
                         "bounds": {"x": [0, 100], "y": [0, 100]}}, step]}
    for keys in (["a"] * 9 + ["b"] * 6, ["b"] + ["a"] * 8 + ["b"] * 6):
        frame = pd.DataFrame({"k": keys, "x": x, "y": y})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release = privclust.run(recipe, frame, seed=1)
        assert release.dp_guarantee is False, release.verdict
        assert "No differential-privacy guarantee" in release.verdict
        what = "the label column 'cluster'" if kind == "clusterers" else "the values of x, y"
        assert f"released {what} without differential privacy" in release.verdict
        assert "within k, which no step released with differential privacy" in release.verdict
    # without within, the same step is post-processing of the DP values, as before
    plain = dict(recipe, steps=[recipe["steps"][0], {k: v for k, v in step.items() if k != "within"}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert privclust.run(plain, frame, seed=1).dp_guarantee is True
