"""The ``linear`` edit-rule handler against the red-team audit rt11: the
projection's feasibility tolerance (F3), the integer check of equalities with
non-integer coefficients (F4) and the rules of several ``[[constraints]]``
tables checked together (F5)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import ConstraintSet
from privclust_plugins._fuzzy_replacement import _rules_kept
from privclust_plugins.constraints import LinearConstraints

# -- F3: the projection repairs breaks far below 1e-10 of the values' size -----------------------------------------


def _run(recipe: dict, data: pd.DataFrame) -> privclust.Release:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, data, seed=1)


def test_projection_repairs_a_small_break_of_large_values():
    bound = LinearConstraints(rules=["a <= 2*b"]).bind(["a", "b"])
    for gap in (1.0, 50.0):
        point = np.array([[2 * 5.5e11 + gap, 5.5e11]])
        out = bound.project(point)
        assert bound.satisfied(out)[0]
        # the exact projection moves a - 2b from gap to 0: what is left is float error at 1e12 (an ulp is 1.2e-4)
        assert out[0, 0] - 2 * out[0, 1] <= 1e-3
        assert np.abs(out - point).max() == pytest.approx(2 * gap / 5, rel=1e-3)  # the move is gap/5 * (-1, 2)


def test_projection_from_far_away_meets_the_hosts_check():
    bound = LinearConstraints(rules=["a <= 0", "b >= a"]).bind(["a", "b"])
    out = bound.project(np.array([[1e12, -3e11], [7.0, 1e-3], [0.0, 0.0]]))
    assert bound.satisfied(out).all()


def test_tol_is_relative_to_the_rules_terms_and_below_the_hosts_tolerance():
    with pytest.raises(privclust.PrivclustError, match="tol"):
        LinearConstraints(rules=["a <= b"], tol=1e-10)  # the old default: looser than the host's RULE_RTOL
    assert LinearConstraints(rules=["a <= b"]).tol < privclust.RULE_RTOL


def test_a_run_releases_the_rule_the_original_breaks_by_50_at_1e12_repaired():
    b = np.random.default_rng(0).uniform(5e11, 6e11, 30)
    recipe = {"constraints": [{"use": "linear", "rules": ["a <= 2*b"]}],
              "steps": [{"use": "microaggregation", "k": 3}]}
    for gap in (1.0, 50.0):
        release = _run(recipe, pd.DataFrame({"a": 2 * b + gap, "b": b}))
        d = release.data
        assert (d.a - 2 * d.b).max() <= 1e-3  # was 1 and 50: the original's break, released unchanged
        claim = next(e.statement for e in release.ledger.entries if "Group means" in e.statement)
        assert "so every released record satisfies them" in claim and "met together" not in claim
        host = next(e.statement for e in release.ledger.entries if e.mechanism == "edit rule")
        assert "holds on every released record" in host
    # integer columns: the same break of 1 is repaired, not blamed on the host's rounding
    ints = pd.DataFrame({"a": (2 * b.round() + 1).astype("int64"), "b": b.round().astype("int64")})
    release = _run(recipe, ints)
    host = next(e.statement for e in release.ledger.entries if e.mechanism == "edit rule")
    assert "holds on every released record" in host and "could not keep" not in host
    assert (release.data.a - 2 * release.data.b).max() <= 0


def test_the_masker_says_why_records_still_break_the_rules():
    values = np.array([[0.5, 1.0], [2.0, 1.0]])
    parts = [LinearConstraints(rules=["a <= 0"]).bind(["a", "b"]), LinearConstraints(rules=["a >= 1"]).bind(["a", "b"])]
    contradictory = ConstraintSet(["a", "b"], parts)
    assert "(the rules cannot all be met together; the host's check" in _rules_kept(contradictory, values)
    consistent = ConstraintSet(["a", "b"], [parts[0], LinearConstraints(rules=["b >= 0"]).bind(["a", "b"])])
    said = _rules_kept(consistent, values)
    assert "yet 2 of the 2 released records" in said and "(the projection stopped short of them; " in said
    assert "met together" not in said


# -- F4: equalities with non-integer coefficients that no whole numbers satisfy --------------------------------------


@pytest.mark.parametrize("rule, scale", [("0.5*t = 0.5*a + 0.25", 2), ("t = a + b/2 + 0.25", 2),
                                         ("0.1*t = 0.1*a + 0.05", 10), ("t = a/3 + 1/6", 3)])
def test_an_equality_no_integers_satisfy_is_refused_whatever_its_coefficients(rule, scale):
    bound = LinearConstraints(rules=[rule]).bind(["a", "b", "t"])
    (problem,) = bound.integer_problems(np.ones(3, dtype=bool))
    assert f"multiplied by {scale} (the lowest common multiple of the denominators" in problem
    a = np.random.default_rng(1).integers(0, 100, 30)
    data = pd.DataFrame({"a": a, "b": a % 7, "t": a + 1})
    with pytest.raises(privclust.DataError, match="no integer record satisfies it"):
        _run({"constraints": [{"use": "linear", "rules": [rule]}],
              "steps": [{"use": "microaggregation", "k": 3}]}, data)


@pytest.mark.parametrize("rule", ["0.5*t = 0.5*a + 0.5", "t = a/3 + 1/3", "0.1*a + 0.2*b = 0.3", "2*t = 2*a + 4"])
def test_an_equality_some_integers_satisfy_is_not_refused(rule):
    assert LinearConstraints(rules=[rule]).bind(["a", "b", "t"]).integer_problems(np.ones(3, dtype=bool)) == []


def test_the_integer_check_reads_the_rule_exactly_not_its_doubles():
    # 0.1*t = 0.1*a + 0.3 is t = a + 3 exactly; in doubles 0.3/0.1 is 2.9999999999999996
    assert LinearConstraints(rules=["0.1*t = 0.1*a + 0.3"]).bind(["a", "t"]).integer_problems(
        np.ones(2, dtype=bool)) == []


# -- F5: the rules of several tables are checked together when the recipe is compiled ---------------------------------


@pytest.mark.parametrize("second", ["income >= wages + benefits + 1", "income = wages + benefits + 1"])
def test_contradictory_rules_split_over_two_tables_are_refused_when_compiling(second):
    recipe = {"constraints": [{"use": "linear", "rules": ["income = wages + benefits"]},
                              {"use": "linear", "rules": [second]}],
              "steps": [{"use": "microaggregation", "k": 3}]}
    with pytest.raises(privclust.RecipeError) as err:
        privclust.compile(recipe)
    text = str(err.value)
    assert "constraints[1]: its rules and those of constraints[0] cannot all hold together" in text
    assert "'income = wages + benefits'" in text and repr(second) in text


def test_consistent_or_repeated_rules_over_several_tables_compile():
    recipe = {"constraints": [{"use": "linear", "rules": ["t = a + b"]},
                              {"use": "linear", "rules": ["t = a + b", "a >= 0"]},  # a repeated rule is fine
                              {"use": "linear", "rules": ["c <= 5"]}],
              "steps": [{"use": "microaggregation", "k": 3}]}
    privclust.compile(recipe)


def test_joined_with_refuses_rules_that_cannot_hold_together():
    first = LinearConstraints(rules=["t = a + b"]).bind(["a", "b", "t"])
    with pytest.raises(privclust.ConstraintError, match="contradicts"):
        first.joined_with(LinearConstraints(rules=["t = a + b + 1"]).bind(["a", "b", "t"]))
    with pytest.raises(privclust.ConstraintError, match="cannot all hold at once"):
        first.joined_with(LinearConstraints(rules=["a >= 1", "b >= 1", "t <= 1"]).bind(["a", "b", "t"]))
