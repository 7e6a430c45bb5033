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


class _CapRules:
    """Bound rules 'x <= cap' whose own evaluation says every record holds."""

    def __init__(self, columns, cap):
        self.columns, self.cap = tuple(columns), cap
        self.rules, self.rule_columns = (f"x <= {cap}",), (("x",),)

    def project(self, points, *, scale=None):
        return np.array(points, dtype=float, copy=True)

    def violations(self, points):
        return np.zeros((np.asarray(points).shape[0], 1))  # a lie: 'x <= cap' always "holds"


class _StatedCapRules(_CapRules):
    def linear_form(self):  # the truth, from which the host evaluates the rule itself
        return np.eye(len(self.columns))[[self.columns.index("x")]], [self.cap], [False]


class _MalformedCapRules(_CapRules):
    def linear_form(self):
        return np.zeros((2, 5)), [self.cap], [False]


class _LooseFormCapRules(_CapRules):
    def violations(self, points):  # the truth ...
        return np.maximum(np.asarray(points, dtype=float)[:, [self.columns.index("x")]] - self.cap, 0.0)

    def linear_form(self):  # ... but a form that says x <= 1e6
        return np.eye(len(self.columns))[[self.columns.index("x")]], [1e6], [False]


class _ConsistentLiarRules(_CapRules):
    def violations(self, points):  # x <= 1e6, in violations() as in the form
        return np.maximum(np.asarray(points, dtype=float)[:, [self.columns.index("x")]] - 1e6, 0.0)

    def linear_form(self):
        return np.eye(len(self.columns))[[self.columns.index("x")]], [1e6], [False]


_RULES = {None: _CapRules, "true": _StatedCapRules, "malformed": _MalformedCapRules, "loose": _LooseFormCapRules,
          "consistent liar": _ConsistentLiarRules}


def _cap_registry(form):
    from typing import ClassVar

    import attrs

    @attrs.frozen(kw_only=True)
    class Cap:
        name: ClassVar[str] = "cap"
        cap: float = privclust.param(float, default=10.0, doc="the cap")

        def variables(self):
            return (frozenset({"x"}),)

        def describe(self):
            return (f"x <= {self.cap}",)

        def check(self, columns):
            return []

        def bind(self, columns, rules=None):
            return _RULES[form](columns, self.cap)

    class Plugin:
        @privclust.hookimpl
        def privclust_register_constraint_handlers(register):
            register(Cap)

    return privclust.Registry(plugins=[Plugin])


def _cap_run(form):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.uniform(0, 100, 30), "y": rng.uniform(0, 100, 30)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = privclust.run({"constraints": [{"use": "cap", "cap": 10.0}],
                             "steps": [{"use": "microaggregation", "k": 3}]}, df, seed=1,
                            registry=_cap_registry(form))
    return out, [e for e in out.ledger.entries if e.mechanism == "edit rule"]


def test_a_handler_the_host_cannot_evaluate_is_its_own_word_not_a_host_verification():
    """A red-team audit: a plugin's 'x <= 10' whose violations() returned zeros read "holds on every released
    record" as a host-verified guarantee while 24 of 30 released records broke it. Without linear_form the entry
    is the handler's: claimed, in its name, saying whose evaluation it is; verify() does not settle it as a step's
    claim."""
    out, (entry,) = _cap_run(None)
    assert int((out.data["x"] > 10).sum()) == 24
    assert entry.status == "claimed" and entry.origin is privclust.ledger.Origin.COMPONENT
    assert entry.component == "cap (constraint handler)"
    assert "as its constraint handler 'cap' evaluates it" in entry.statement
    assert "not the host's check" in entry.statement and "protects nothing" not in entry.statement
    assert entry.details["evaluated_by"] == "cap" and "evaluated_as" not in entry.details
    assert not [e for e in out.ledger.entries if e.mechanism == "edit rule" and e.status == "verified"]


def test_the_host_evaluates_a_rule_from_its_coefficients_whatever_the_handlers_violations_say():
    out, (entry,) = _cap_run("true")  # a true form, and violations() that say every record holds
    assert entry.status == "refuted" and entry.details["evaluated_as"] == "x <= 10"
    assert "By those coefficients it is violated by 24; by the handler's violations(), by 0." in entry.statement
    # the microaggregation's claim over x is told the rule does not hold on the released file
    claim = next(e for e in out.ledger.entries if e.component == "microaggregation" and e.kind == "guarantee")
    assert "'x <= 10.0' is violated by 24 of 30 released records" in claim.statement


def test_a_malformed_linear_form_is_a_clear_error_and_fails_the_kit():
    with pytest.raises(privclust.ConstraintError, match=r"linear_form\(\) must return a \(1, 2\) matrix"):
        _cap_run("malformed")
    problem = privclust.CAPABILITIES["linear_form"].check(_MalformedCapRules(("x", "y"), 10.0))
    assert problem is not None and "a bug in their plugin" in problem
    assert privclust.CAPABILITIES["linear_form"].check(_StatedCapRules(("x", "y"), 10.0)) is None


def test_the_host_writes_its_own_text_of_the_form_it_evaluated():
    from privclust.rule_check import linear_text

    assert linear_text(np.array([1.0, -1.16, -1.07]), 0.0, True, ("total", "exp16", "exp7")) == \
        "total = 1.16*exp16 + 1.07*exp7"
    assert linear_text(np.array([-1.0, 0.0, 2.5]), -3.0, False, ("a", "b", "c")) == "2.5*c + 3 <= a"
    assert linear_text(np.array([-1.0]), 0.0, False, ("x",)) == "x >= 0"
    assert linear_text(np.array([0.0]), 1.0, False, ("a",)) == "0 <= 1"


def test_a_rule_whose_evaluated_form_is_not_its_text_says_what_the_host_evaluated():
    """rt12 F2: a handler labelled its rule 'x <= 10.0', stated x <= 1e6 and evaluated that in violations() too;
    the host wrote "holds on every released record", verified. The statement now names the form it checked
    wherever it does not read as the rule's text (spaces, '==', the writing of numbers, the order of terms and
    the side of '>=' aside)."""
    from privclust.rule_check import _same_text

    out, (entry,) = _cap_run("consistent liar")
    assert entry.status == "verified"
    assert entry.statement.startswith("edit rule 'x <= 10.0' holds on every released record, read by its constraint "
                                      "handler 'cap' as x <= 1000000,")
    assert _same_text("1.16*a + 2 >= 0.5*total", "0.5*total <= 1.16*a + 2")
    assert _same_text("income == wages + benefits", "income = benefits + wages")
    assert not _same_text("a - b <= 0", "a <= b") and not _same_text("x <= 10.0", "x <= 1000000")


def test_the_original_data_rule_lines_say_whose_evaluation_they_are():
    from privclust.assessment import rule_breaks, rule_breaks_lines

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.uniform(0, 100, 30), "y": rng.uniform(0, 100, 30)})
    reg = _cap_registry(None)
    compiled = privclust.compile({"constraints": [{"use": "cap", "cap": 10.0}],
                                         "steps": [{"use": "microaggregation", "k": 3}]}, registry=reg)
    lines = rule_breaks_lines(rule_breaks(df, privclust.ConstraintSet.of(compiled.constraints, tuple(df.columns))))
    assert lines[1] == "  'x <= 10.0': holds on all 30 records judged (as its constraint handler 'cap' evaluates it)"


def test_the_kit_finds_a_linear_form_that_disagrees_with_the_rules_own_violations():
    problem = privclust.CAPABILITIES["linear_form"].check(_StatedCapRules(("x", "y"), 1.0))
    assert problem is not None and "disagrees with the residuals of linear_form()" in problem
    form_of = privclust.components.linear_form  # the built-in linear rules agree with their form
    from privclust_plugins.constraints import LinearConstraints

    rules = LinearConstraints(rules=["a <= b", "a + 2*b = 3", "b >= -1"]).bind(("a", "b"))
    assert form_of(rules) is not None and privclust.CAPABILITIES["linear_form"].check(rules) is None


def test_group_sizes_does_not_say_a_clusterers_groups_were_replaced_and_headlines_its_smallest_group():
    """A red-team audit (rt8 F3): on a clusterer step, whose records keep their raw values, group-sizes described
    its groups as "records replaced by the same centre"; and the CLI headline was the parameter k."""
    from privclust.assessment import headline_rows
    from privclust_plugins.microdata_evaluators import GroupSizes

    groups = GroupSizes.metric_descriptions["groups"][0]
    assert "given the same label (a clusterer" in groups and "no k-anonymity of the file" in groups
    rows = [{"evaluator": "group-sizes", "metric": m, "value": 1.0} for m in ("k", "groups", "min_size")]
    assert [r["metric"] for r in headline_rows(rows)] == ["min_size"]


def test_a_stated_form_that_disagrees_with_the_handlers_own_violations_is_not_verified():
    """A red-team audit (rt11 F1): a handler labelled its rule 'x <= 10.0' and stated the form x <= 1e6; the host
    wrote "holds on every released record", verified, while 24 of 30 released records broke it."""
    out, (entry,) = _cap_run("loose")
    assert entry.status == "refuted" and "cannot be checked by the host" in entry.statement
    assert "(x <= 1000000)" in entry.statement and "disagree on 24 of 30 released records" in entry.statement
    assert "By those coefficients it is violated by 0; by the handler's violations(), by 24." in entry.statement
    claim = next(e for e in out.ledger.entries if e.component == "microaggregation" and e.kind == "guarantee")
    assert "'x <= 10.0' is violated by 24 of 30 released records as its constraint handler 'cap' evaluates it" \
        in claim.statement


def test_every_place_that_judges_a_rule_over_integer_columns_judges_it_to_double_precision():
    """A red-team audit (rt11 F2): with a = 2b + 1 and b near 5e11, the ledger said 'a <= 2*b' is violated, but
    the CLI's lines on the original data said "holds on all 30 records judged" and edit-violations "share violated
    0.0" beside "max violation 1.0"."""
    from privclust.assessment import rule_breaks

    b = np.random.default_rng(0).integers(5 * 10**11, 6 * 10**11, 30)
    df = pd.DataFrame({"a": 2 * b + 1, "b": b})
    recipe = {"constraints": [{"use": "linear", "rules": ["a <= 2*b"]}], "steps": [{"use": "microaggregation", "k": 3}],
              "evaluate": ["edit-violations"]}
    compiled = privclust.compile(recipe)
    (breaks,) = rule_breaks(df, privclust.ConstraintSet.of(compiled.constraints, tuple(df.columns)))
    assert breaks["broken"] == 30 and breaks["max_residual"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = privclust.run(recipe, df, seed=1)
    assert out.evaluation("a <= 2*b: share violated (original)") == 1.0
    entry = next(e for e in out.ledger.entries if e.mechanism == "edit rule")
    share = out.evaluation("a <= 2*b: share violated")
    assert share * 30 == entry.details["violated_records"]


def test_a_claim_over_rules_the_host_cannot_check_says_that_part_is_not_verified():
    """rt11 F1: with a handler that states no linear_form, microaggregation's claim "so every released record
    satisfies them" stood in a verified entry; the host now says it could not check that part."""
    out, _ = _cap_run(None)
    claim = next(e for e in out.ledger.entries if e.component == "microaggregation" and e.kind == "guarantee")
    assert "The host could not check the edit rule(s) 'x <= 10.0' over these columns" in claim.statement
    assert "whatever this claim says of them is not verified" in claim.statement
    record = next(c for c in out.verification["claims"] if c["component"] == "microaggregation")
    assert record["unchecked_rules"] == ["x <= 10.0"]


def test_a_rules_columns_include_every_column_of_its_stated_form():
    """rt11 F1: a rule is evaluated on the columns of its form's non-zero coefficients, whatever the handler's
    rule_columns name (a missing value there leaves the rule undecided, not judged with a 0 in its place)."""
    rules = _StatedCapRules(("x", "y"), 10.0)
    rules.rule_columns = (("y",),)  # a handler that names the wrong column
    bound = privclust.ConstraintSet(("x", "y"), [rules])
    assert bound.rule_columns == (("x", "y"),)
    status = privclust.judge(bound, np.array([[np.nan, 1.0], [20.0, 1.0]]))
    assert status.undecided[0, 0] and status.violated[1, 0]
