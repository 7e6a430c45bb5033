"""One answer to "does this record satisfy this edit rule?" (issue 27, item 2):
``privclust.judge``, and every user of rules (the host's check of the released
file, the linear handler's ``satisfied``, the ``edit-violations`` evaluator, the
CLI demo) asking it."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.cli
import privclust.constraints
import privclust.integers
import privclust.rule_check
from privclust_plugins.constraints import LinearConstraints

RULES = ["t = x + y", "x >= 0"]
COLUMNS = ("x", "y", "t")
# record: (x, y, t), what the judge says of "t = x + y" and of "x >= 0"
CASES = [
    ((1.0, 2.0, 3.0), "ok", "ok"),                          # ordinary
    ((1.0, 2.0, 4.0), "violated", "ok"),                    # ordinary violation (1)
    ((1e6, 2e6, 3e6 + 1e-6), "ok", "ok"),                   # within 1e-11 x 6e6 = 6e-5: rounding error
    ((1e6, 2e6, 3e6 + 1e-4), "violated", "ok"),             # just beyond it
    ((np.inf, 1.0, np.inf), "undecided", "undecided"),      # an infinite value of the rule's columns
    ((1.0, np.inf, np.inf), "undecided", "ok"),             # infinite, but not in "x >= 0": decided there
    ((1.0, np.nan, 3.0), "missing", "ok"),                  # missing y: only "t = x + y" cannot be evaluated
    ((1e308, 1e308, 1.7e308), "undecided", "ok"),           # x + y overflows: the residual is inf
    ((-1.0, 1.0, 0.0), "ok", "violated"),
    # residual 0, but the size of the terms overflows: a 0 there may be an overflow clipped (an inequality's
    # max(0, -inf): 1e299*a <= 1e299*b read "holds", a red-team audit), so double precision decides nothing
    ((1.5e308, -1.5e308, 0.0), "undecided", "ok"),
]
VALUES = np.array([c[0] for c in CASES])
EXPECTED = np.array([[c[1], c[2]] for c in CASES])


def _bound():
    return LinearConstraints(rules=RULES).bind(COLUMNS)


def _rules():
    return privclust.ConstraintSet.of([LinearConstraints(rules=RULES)], COLUMNS)


def test_the_judge_on_ordinary_boundary_infinite_nan_overflowing_and_missing_values():
    status = privclust.judge(_rules(), VALUES)
    said = np.where(status.missing, "missing", np.where(status.undecided, "undecided",
                                                        np.where(status.violated, "violated", "ok")))
    np.testing.assert_array_equal(said, EXPECTED)
    assert not (status.violated & status.undecided).any() and (status.missing <= status.undecided).all()
    np.testing.assert_array_equal(status.satisfied, EXPECTED == "ok")
    np.testing.assert_array_equal(status.holds(), (EXPECTED == "ok").all(axis=1))
    # residuals: each rule on its own columns; NaN where a value of them is missing
    assert status.residuals[1, 0] == 1.0 and status.residuals[8, 1] == 1.0
    assert np.isnan(status.residuals[6, 0]) and status.residuals[6, 1] == 0.0
    assert status.residuals[5, 1] == 0.0  # the infinite y of record 5 does not spoil "x >= 0" (inf * 0 is NaN)


def test_the_judge_takes_bound_rules_and_one_tolerance():
    bound = _bound()
    assert bound.rule_columns == (("x", "y", "t"), ("x",))
    direct, via_set = privclust.judge(bound, VALUES), privclust.judge(_rules(), VALUES)
    np.testing.assert_array_equal(direct.violated, via_set.violated)
    np.testing.assert_array_equal(direct.undecided, via_set.undecided)
    assert privclust.RULE_RTOL == 1e-11
    # "t = x + y" at 3e6 + 1e-4: violated at the host's tolerance, satisfied at a looser one
    assert privclust.judge(bound, VALUES[3:4]).violated[0, 0]
    assert not privclust.judge(bound, VALUES[3:4], rtol=1e-9).violated[0, 0]
    with pytest.raises(privclust.ConstraintError, match="one column per rule column"):
        privclust.judge(bound, VALUES[:, :2])


def test_a_handler_that_does_not_state_its_columns_is_given_them_or_judged_on_all():
    class Plain:  # a plugin's bound rules without rule_columns or magnitudes: "a >= 0" and "c >= 0"
        columns, rules = ("a", "c"), ("a >= 0", "c >= 0")

        def violations(self, points):
            return np.maximum(-np.asarray(points, dtype=float), 0.0)

        def project(self, points, *, scale=None):
            return np.maximum(points, 0.0)

    values = np.array([[1.0, np.nan]])
    told = privclust.ConstraintSet(Plain.columns, [Plain()], variables=[{"a"}, {"c"}])
    assert told.rule_columns == (("a",), ("c",))
    np.testing.assert_array_equal(privclust.judge(told, values).undecided, [[False, True]])
    untold = privclust.ConstraintSet(Plain.columns, [Plain()])
    assert untold.rule_columns == (("a", "c"), ("a", "c"))
    np.testing.assert_array_equal(privclust.judge(untold, values).undecided, [[True, True]])


# ---------------------------------------------------------------------------
# Every user of rules asks the judge
# ---------------------------------------------------------------------------


def _frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.normal(size=len(VALUES)), "b": rng.normal(size=len(VALUES)),
                         **{c: VALUES[:, j] for j, c in enumerate(COLUMNS)}})


def _release(frame):
    """A release whose rule columns are the original records (the step masks a and b only)."""
    recipe = {"constraints": [{"use": "linear", "rules": RULES}],
              "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 2}],
              "evaluate": [{"use": "edit-violations"}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=1)


def _answers(frame):
    """What the host, the handler, the evaluator and the CLI demo say, per rule
    where they count and per record where they say so."""
    release = _release(frame)
    assert release.data.loc[:, list(COLUMNS)].equals(frame.loc[:, list(COLUMNS)])
    host = {e.details["rule"]: e.details for e in release.ledger.entries
            if e.kind == "guarantee" and e.mechanism == "edit rule"}
    figures = dict(zip(release.evaluations["metric"], release.evaluations["value"], strict=True))
    rules = _rules()
    shown = privclust.cli._with_rule_check(release.data, rules)
    return {
        "host violated": [host[r]["violated_records"] for r in RULES],
        "host not evaluable": [host[r]["not_evaluable_records"] for r in RULES],
        "evaluator violated": [round(figures[f"{r}: share violated"]
                                     * (len(frame) - figures.get(f"{r}: records not evaluable", 0))) for r in RULES],
        "evaluator not evaluable": [int(figures.get(f"{r}: records not evaluable", 0)) for r in RULES],
        "handler holds": list(_bound().satisfied(VALUES)),
        "set holds": list(rules.satisfied(VALUES)),
        "cli violated": list(privclust.cli._rules_violated(release.data, rules)),
        "cli rows": list(shown["rule"]),
    }


def _expected(status):
    holds = status.holds()
    rows = np.where(status.violated.any(axis=1), "VIOLATED", np.where(holds, "ok", "not evaluable"))
    violated, undecided = list(status.violated.sum(axis=0)), list(status.undecided.sum(axis=0))
    return {"host violated": violated, "host not evaluable": undecided, "evaluator violated": violated,
            "evaluator not evaluable": undecided, "handler holds": list(holds), "set holds": list(holds),
            "cli violated": violated, "cli rows": list(rows)}


def test_host_handler_evaluator_and_cli_agree_with_the_judge():
    frame = _frame()
    status = privclust.judge(_rules(), VALUES)
    assert _answers(frame) == _expected(status)
    assert list(status.violated.sum(axis=0)) == [2, 1] and list(status.undecided.sum(axis=0)) == [5, 1]


def test_host_handler_evaluator_and_cli_have_no_arithmetic_of_their_own(monkeypatch):
    # a judge that says record 0 (ordinary, satisfied) violates every rule: each user must repeat it
    real = privclust.constraints.judge

    def strict(rules, values, *, rtol=privclust.RULE_RTOL, integer=None):
        status = real(rules, values, rtol=rtol, integer=integer)
        status.violated[0] = True
        status.undecided[0] = status.missing[0] = False
        return status

    for module in (privclust, privclust.constraints, privclust.integers, privclust.rule_check, privclust.cli):
        monkeypatch.setattr(module, "judge", strict)
    answers = _answers(_frame())
    assert answers == _expected(strict(_rules(), VALUES))
    assert answers["host violated"] == [3, 2] and not answers["handler holds"][0] and answers["cli rows"][0] == \
        "VIOLATED"


def test_rules_broken_by_rounding_are_counted_on_records_missing_a_column_of_another_rule():
    # 0.5 <= a <= 0.7 holds on every group mean and no whole number keeps it; five records miss c, a column of
    # another rule ("c >= 0"). The host's own check of "held before rounding" read the missing c into every rule
    # of the record (NaN * 0 in a matrix product) and said 25 of the 30 had held
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 2, 30), "b": rng.integers(0, 100, 30), "t": rng.normal(size=30),
                          "c": [np.nan] * 5 + [1.0] * 25})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"constraints": [{"use": "linear", "rules": ["a >= 0.5", "a <= 0.7", "c >= 0"]}],
                                 "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b", "t"]}]},
                                frame, seed=1)
    entry = next(e for e in release.ledger.entries if e.mechanism == "edit rule" and e.details["rule"] == "a >= 0.5")
    assert entry.details["violated_records"] == 30 and entry.details["broken_by_rounding"] == 30
    assert "Of these, 30 held before the host rounded" in entry.statement
