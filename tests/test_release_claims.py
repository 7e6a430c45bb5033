"""What the ledger says about the released file, against the file itself, on
adversarial data (audit of stop 17): every statement must hold on the
released values, or say what the host could not decide."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privclust


def _rule_entries(release):
    return {e.details["rule"]: e for e in release.ledger.entries
            if e.kind == "guarantee" and e.mechanism == "edit rule"}


@pytest.fixture
def grouped():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.normal(size=8), "b": rng.normal(size=8)})


def _run(recipe, frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=1)


def test_an_edit_rule_is_not_said_to_hold_where_its_residual_is_infinite_or_overflows(grouped):
    # x + y = 2 with x = inf, y = -inf: the residual is inf - inf = NaN, and NaN > tolerance is False;
    # x + y <= 1 with x = y = 1e308 (finite): the residual overflows to inf and so does the tolerance
    # (1e-11 times 1 + inf), so "inf > inf" passed it. Both were "holds on every released record".
    frame = grouped.assign(x=[np.inf] + [1.0] * 7, y=[-np.inf] + [1.0] * 7,
                           u=[1e308] * 2 + [0.5] * 6, v=[1e308] * 2 + [0.25] * 6)
    rules = ["x + y = 2", "u + v <= 1", "u >= v"]
    release = _run({"constraints": [{"use": "linear", "rules": rules}],
                    "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 2}]}, frame)
    entries = _rule_entries(release)
    inf_pair, huge, same = entries["x + y = 2"], entries["u + v <= 1"], entries["u >= v"]
    for entry, unknown in ((inf_pair, 1), (huge, 2)):
        assert "holds on every released record" not in entry.statement, entry.statement
        assert entry.details["not_evaluable_records"] == unknown
        assert entry.details["violated_records"] == 0
        assert f"cannot be evaluated in double precision on {unknown} record(s)" in entry.statement
    assert "holds on every one of the 7 released records it could be evaluated on" in inf_pair.statement
    # u >= v on the huge records: the residual is 0, but the size of its terms overflows, and a 0 there may be an
    # overflow clipped (an inequality's max(0, -inf): 1e299*a <= 1e299*b read "holds", a red-team audit), so those
    # records are not evaluable; the infinite x of record 0 (not in the rule) does not spoil the rest (inf * 0 is
    # NaN in a matrix product)
    assert same.details["not_evaluable_records"] == 2 and same.details["violated_records"] == 0
    assert "holds on every one of the 6 released records it could be evaluated on" in same.statement
    # and the largest deviation it states is a number (it read "largest deviation nan")
    assert same.details["max_violation"] == 0.0 and "deviation nan" not in same.statement


def test_an_edit_rule_evaluable_on_no_record_says_so(grouped):
    frame = grouped.assign(u=[1e308] * 8, v=[1e308] * 8)
    release = _run({"constraints": [{"use": "linear", "rules": ["u + v <= 1"]}],
                    "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 2}]}, frame)
    entry = _rule_entries(release)["u + v <= 1"]
    assert "could not be evaluated on any released record" in entry.statement
    assert "holds on" not in entry.statement and entry.details["not_evaluable_records"] == 8


def test_constraint_set_satisfied_is_false_where_evaluating_the_rule_overflows():
    from privclust_plugins.constraints import LinearConstraints

    columns = ("u", "v")
    rules = privclust.ConstraintSet(columns, [LinearConstraints(rules=["u + v <= 1"]).bind(columns)])
    points = np.array([[1e308, 1e308], [0.5, 0.25], [np.inf, -np.inf]])
    np.testing.assert_array_equal(rules.satisfied(points), [False, True, False])


def test_a_noise_step_after_microaggregation_does_not_state_dp_for_the_original_records():
    # laplace after microaggregation: its DP statement is about its own input (group means); one original
    # record's change moves a whole group mean (and may regroup the records), so "every released value of a, b
    # is 1-DP under replace-one (data sets differ in one record's values)" was false of the original records
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(30, 2)), columns=["a", "b"])
    bounds = {"a": [-3, 3], "b": [-3, 3]}
    release = _run({"steps": [{"use": "microaggregation", "k": 3},
                              {"use": "laplace", "epsilon": 1.0, "bounds": bounds}]}, frame)
    (entry,) = release.ledger.of_kind("dp")
    assert "written by step 0 (microaggregation) without differential privacy" in entry.statement
    assert "not between data sets that differ in one original record" in entry.statement
    assert not release.dp_guarantee
    # noise on columns no earlier step wrote, or after another noise step (row by row): no note
    alone = _run({"steps": [{"use": "microaggregation", "columns": ["a"], "k": 3},
                            {"use": "laplace", "epsilon": 1.0, "bounds": {"b": [-3, 3]}, "columns": ["b"]}]}, frame)
    assert "Host note" not in alone.ledger.of_kind("dp")[0].statement
    twice = _run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": bounds},
                            {"use": "laplace", "id": "again", "epsilon": 1.0, "bounds": bounds}]}, frame)
    assert all("Host note" not in e.statement for e in twice.ledger.of_kind("dp"))


def test_a_noise_step_before_microaggregation_does_not_state_dp_for_the_released_file():
    # laplace on a, then microaggregation grouping on a and on c (released as in the original): the released a
    # are group means whose groups depend on other records' original c, yet the DP entry still read "every
    # released value of column(s) a is 1-DP"
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(30, 3)), columns=["a", "b", "c"])
    release = _run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [-3, 3]}, "columns": ["a"]},
                              {"use": "microaggregation", "k": 3, "columns": ["a", "c"]}]}, frame)
    (entry,) = release.ledger.of_kind("dp")
    assert "step 1 (microaggregation) then replaced the values of a without differential privacy" in entry.statement
    assert "not about the released file's" in entry.statement
    assert not release.dp_guarantee


def test_edit_violations_evaluator_leaves_out_records_double_precision_cannot_decide(grouped):
    # the evaluator's "share violated" passed inf - inf (NaN) and 1e308 + 1e308 (inf against a tolerance of inf)
    frame = grouped.assign(x=[np.inf] + [1.0] * 7, y=[-np.inf] + [1.0] * 7,
                           u=[1e308] * 2 + [0.5] * 6, v=[1e308] * 2 + [0.25] * 6)
    release = _run({"constraints": [{"use": "linear", "rules": ["x + y = 2", "u + v <= 1"]}],
                    "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 2}],
                    "evaluate": [{"use": "edit-violations"}]}, frame)
    figures = dict(zip(release.evaluations["metric"], release.evaluations["value"], strict=True))
    assert figures["x + y = 2: records not evaluable"] == 1
    assert figures["u + v <= 1: records not evaluable"] == 2
    assert figures["x + y = 2: max violation"] == 0.0 and figures["u + v <= 1: max violation"] == 0.0
    assert figures["u + v <= 1: share violated"] == 0.0
    # as the host's own check counts them
    entries = _rule_entries(release)
    assert entries["x + y = 2"].details["not_evaluable_records"] == 1
    assert entries["u + v <= 1"].details["not_evaluable_records"] == 2


def test_a_masker_claim_about_its_rules_is_qualified_when_the_released_file_breaks_one():
    # microaggregation projects the group means onto 0.5 <= a <= 0.7 and says "so every released record satisfies
    # them"; the host then rounds the integer column a (to 0 or 1) and the file breaks 'a >= 0.5' on every record,
    # while the claim stayed "verified" (its k-anonymity) with the sentence about the rules unqualified
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 2, 30), "b": rng.integers(0, 100, 30), "t": rng.normal(size=30)})
    release = _run({"constraints": [{"use": "linear", "rules": ["a >= 0.5", "a <= 0.7"]}],
                    "steps": [{"use": "microaggregation", "k": 3}]}, frame)
    assert (release.data["a"] < 0.5).all()
    assert _rule_entries(release)["a >= 0.5"].details["violated_records"] == 30
    claims = [e for e in release.ledger.of_kind("guarantee") if e.mechanism != "edit rule"]
    assert claims and any("so every released record satisfies them" in e.statement for e in claims)
    for entry in claims:
        assert ("Host check of the edit rules over these columns on the released file: 'a >= 0.5' is violated by "
                "30 of 30" in entry.statement), entry.statement
        assert "'a <= 0.7'" not in entry.statement.split("Host check of the edit rules")[1]
    # a release that keeps its rules gets no such note
    kept = _run({"constraints": [{"use": "linear", "rules": ["a >= 0"]}],
                 "steps": [{"use": "microaggregation", "k": 3}]}, frame)
    assert all("Host check of the edit rules" not in e.statement for e in kept.ledger.of_kind("guarantee"))
