"""The runner and the Release: frames, labels, data checks, constraints, evaluations, the report."""

from __future__ import annotations

import json
import re
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import DataError, Masked, Partition, PrivclustError, RecipeError, Registry, hookimpl, param


@attrs.frozen(kw_only=True)
class Halves:
    """A clusterer: label 0 for the first half of the records, 1 for the rest."""

    name: ClassVar[str] = "halves"

    def fit(self, data, context):
        n = len(data)
        labels = (np.arange(n) >= n // 2).astype(int)
        centres = np.vstack([data.to_numpy()[labels == j].mean(axis=0) for j in (0, 1)])
        return Partition(labels=labels, centres=centres, columns=tuple(data.columns))


@attrs.frozen(kw_only=True)
class Shift:
    """A masker adding a constant, and projecting onto the step's edit rules."""

    name: ClassVar[str] = "shift"
    by: float = param(float, default=1.0)

    def mask(self, data, context):
        values = data.to_numpy() + self.by
        if context.constraints is not None:
            values = context.constraints.project(values)
        return Masked(data=pd.DataFrame(values, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class WrongShape:
    name: ClassVar[str] = "wrong-shape"

    def mask(self, data, context):
        return Masked(data=data.iloc[:-1])


@attrs.frozen
class SumRule:
    """A constraint handler: 'total = a + b' style rules given as [total, a, b] lists."""

    name: ClassVar[str] = "sum"
    rules: tuple = param(tuple)

    def variables(self):
        return tuple(frozenset(r) for r in self.rules)

    def describe(self):
        return tuple(f"{r[0]} = {' + '.join(r[1:])}" for r in self.rules)

    def check(self, columns):
        if columns is None:
            return []
        return [f"rule {self.describe()[i]} names an unknown column" for i, r in enumerate(self.rules)
                if not set(r) <= set(columns)]

    def bind(self, columns, rules=None):
        return BoundSum(tuple(columns), [self.rules[i] for i in (rules if rules is not None else
                                                                 range(len(self.rules)))])


class BoundSum:
    def __init__(self, columns, rules):
        self.columns = columns
        self.rules = tuple(f"{r[0]} = {' + '.join(r[1:])}" for r in rules)
        c = np.zeros((len(rules), len(columns)))
        for i, r in enumerate(rules):
            c[i, columns.index(r[0])] = 1
            for v in r[1:]:
                c[i, columns.index(v)] = -1
        self.c = c

    def project(self, points, *, scale=None):
        p = np.asarray(points, dtype=float)
        return p - (p @ self.c.T) @ np.linalg.pinv(self.c @ self.c.T) @ self.c

    def violations(self, points):
        return np.abs(np.asarray(points, dtype=float) @ self.c.T)


@attrs.frozen(kw_only=True)
class MeanAbs:
    name: ClassVar[str] = "mean-abs"

    def evaluate(self, inputs):
        diff = inputs.protected[list(inputs.columns)].to_numpy() - inputs.original[list(inputs.columns)].to_numpy()
        return {"mean_abs_change": float(np.mean(np.abs(diff))), "n_columns": len(inputs.columns)}


class Plugin:
    @hookimpl
    def privclust_register_clusterers(self, register):
        register(Halves)

    @hookimpl
    def privclust_register_maskers(self, register):
        register(Shift)
        register(WrongShape)

    @hookimpl
    def privclust_register_constraint_handlers(self, register):
        register(SumRule)

    @hookimpl
    def privclust_register_evaluators(self, register):
        register(MeanAbs)


@pytest.fixture
def reg():
    return Registry(plugins=[Plugin()], use_env=False)


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0, 10, 40), rng.uniform(0, 10, 40)
    return pd.DataFrame({"name": [f"r{i}" for i in range(40)], "a": a, "total": a + b, "b": b,
                         "flag": rng.random(40) > 0.5}, index=pd.RangeIndex(100, 140))


def test_release_keeps_index_order_and_untouched_columns(reg, data):
    before = data.copy()
    out = privclust.run({"steps": [{"use": "shift", "columns": ["b"]}]}, data, registry=reg)
    assert list(out.data.columns) == list(data.columns)
    assert out.data.index.equals(data.index)
    for c in ("name", "a", "total", "flag"):
        assert out.data[c].equals(data[c])
    assert np.allclose(out.data["b"], data["b"] + 1)
    pd.testing.assert_frame_equal(data, before)


def test_default_columns_are_the_numeric_ones(reg, data):
    out = privclust.run({"steps": [{"use": "shift"}]}, data, registry=reg)
    assert out.step(0).columns == ("a", "total", "b")
    assert out.data["flag"].equals(data["flag"])


def test_a_clusterer_step_appends_labels(reg, data):
    out = privclust.run({"steps": [{"use": "halves", "columns": ["a", "b"], "output": "group"}]}, data, registry=reg)
    assert list(out.data.columns) == [*data.columns, "group"]
    assert out.labels["group"].tolist() == [0] * 20 + [1] * 20
    assert out.step(0).partition.n_clusters == 2
    with pytest.raises(DataError, match="label column 'a' already exists"):
        privclust.run({"steps": [{"use": "halves", "output": "a"}]}, data, registry=reg)
    with pytest.raises(DataError, match="'cluster' is also released by steps.0."):
        privclust.run({"steps": [{"use": "halves"}, {"use": "halves"}]}, data, registry=reg)
    with pytest.raises(RecipeError, match="only a clusterer step releases a label column"):
        privclust.compile({"steps": [{"use": "shift", "output": "x"}]}, reg)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.assign(a=np.where(d.index == 105, np.nan, d["a"])), "column 'a' has 1 missing (NaN) values"),
        (lambda d: d.assign(b=np.inf), "column 'b' has 40 infinite values"),
        (lambda d: d.iloc[:0], "no records"),
        (lambda d: d.rename(columns={"a": "A"}), "column 'a' is not in the data (did you mean 'A'?)"),
        (lambda d: d.assign(a=d["name"]), "column 'a' is not numeric"),
        # a complex column cast to float would lose its imaginary part without a word
        (lambda d: d.assign(a=d["a"] + 1j), "column 'a' is not numeric (dtype complex128)"),
    ],
)
def test_bad_data_is_named(reg, data, change, message):
    bad = change(data)
    with pytest.raises(DataError, match=re.escape(message)):
        privclust.run({"steps": [{"use": "shift", "columns": ["a", "b"]}]}, bad, registry=reg)


def test_not_a_frame(reg):
    with pytest.raises(DataError, match="pandas DataFrame"):
        privclust.run({"steps": [{"use": "shift"}]}, np.zeros((3, 2)), registry=reg)
    with pytest.raises(DataError, match="duplicate column names: a"):
        privclust.run({"steps": [{"use": "shift"}]}, pd.DataFrame([[1, 2]], columns=["a", "a"]), registry=reg)


def test_a_buggy_masker_is_reported_as_a_plugin_bug(reg, data):
    with pytest.raises(PrivclustError, match="a bug in its plugin"):
        privclust.run({"steps": [{"use": "wrong-shape"}]}, data, registry=reg)


def test_constraints_reach_the_step_and_are_checked_on_the_release(reg, data):
    recipe = {"constraints": [{"use": "sum", "rules": [["total", "a", "b"]]}],
              "steps": [{"use": "shift", "columns": ["a", "total", "b"], "by": 3.0}],
              "evaluate": [{"use": "mean-abs"}]}
    out = privclust.run(recipe, data, registry=reg)
    assert np.allclose(out.data["total"], out.data["a"] + out.data["b"])
    guarantee = out.ledger.of_kind("guarantee")[0]
    assert "holds on every released record" in guarantee.statement
    # without the step using the rule, the release violates it and the ledger says so
    recipe["steps"] = [{"use": "shift", "columns": ["name", "b"][1:], "by": 3.0}]
    recipe["constraints"] = [{"use": "sum", "rules": [["total", "a", "b"]]}]
    with pytest.raises(RecipeError, match="uses columns \\['b'\\] of this step and \\['a', 'total'\\] outside it"):
        privclust.run(recipe, data, registry=reg)


def test_a_rule_naming_an_unknown_column_is_a_data_error(reg, data):
    recipe = {"constraints": [{"use": "sum", "rules": [["total", "a", "c"]]}], "steps": [{"use": "shift"}]}
    with pytest.raises(DataError, match="unknown column"):
        privclust.run(recipe, data, registry=reg)


def test_violated_rules_are_recorded(reg, data):
    recipe = {"constraints": [{"use": "sum", "rules": [["total", "a", "b"]]}],
              "steps": [{"use": "halves", "columns": ["a"]}]}
    broken = data.assign(total=data["total"] + np.r_[np.zeros(39), 5.0])
    out = privclust.run(recipe, broken, registry=reg)
    entry = out.ledger.of_kind("guarantee")[0]
    # the test handler states no linear_form: the residuals are its own, and the entry says so
    assert "violated by 1 of 40 released records as its constraint handler 'sum' evaluates it (largest violation " \
        "5)" in entry.statement
    assert entry.status == "claimed" and entry.details["evaluated_by"] == "sum"


def test_a_rules_tolerance_is_its_own_not_another_rules_columns():
    """A rule on a small column next to a rule on a column near 1e9: the small
    rule broken by 500 must be recorded as broken (the tolerance was 1e-6 times
    the record's largest value of any rule column, about 1000), by the host's
    check and by the edit-violations evaluator alike."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.normal(size=30), "y": rng.normal(size=30), "a": rng.uniform(1, 10, 30),
                         "c": rng.uniform(1e9, 2e9, 30)})
    data.loc[0, "a"] = -500.0
    recipe = {"constraints": [{"use": "linear", "rules": ["a >= 0", "c >= 0"]}],
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["x", "y"]}], "evaluate": ["edit-violations"]}
    out = privclust.run(recipe, data, seed=1)
    rules = {e.details["rule"]: e for e in out.ledger.of_kind("guarantee") if e.mechanism == "edit rule"}
    assert rules["a >= 0"].statement == "edit rule 'a >= 0' is violated by 1 of 30 released records (largest " \
        "violation 500)."
    assert rules["c >= 0"].statement.startswith(
        "edit rule 'c >= 0' holds on every released record (largest deviation 0, within the host's tolerance for "
        "floating-point error: 1e-11 times the size of its terms)")
    assert out.evaluation("a >= 0: share violated") == pytest.approx(1 / 30)


@pytest.mark.parametrize("rule, columns, scale", [
    # a small coefficient on a large column: the terms are near 1e4, not 1e9 (a tolerance on the largest
    # value, 1e-9 of 1e9, passed violations of 0.37)
    ("staff <= 0.00001*turnover", {"staff": (1e3, 2e4), "turnover": (1e8, 2e9)}, None),
    # values near 1e12: a violation of 85 is not floating-point error (1e-9 of the values passed it)
    ("net = gross - costs", {"gross": (1e12, 2e12), "costs": (1e11, 2e11)}, 85.0),
])
def test_a_rule_is_judged_on_the_size_of_its_terms(rule, columns, scale):
    rng = np.random.default_rng(3)
    data = pd.DataFrame({c: rng.uniform(*r, 40) for c, r in columns.items()})
    if scale is None:
        data["staff"] = 0.00001 * data["turnover"] + rng.uniform(-1, 1, 40)  # half of them break it, by <= 1
    else:
        data["net"] = data["gross"] - data["costs"] + rng.uniform(1, 2, 40) * scale  # every one by 85 to 170
    target = {"x": rng.normal(size=40)}
    recipe = {"constraints": [{"use": "linear", "rules": [rule]}],
              "steps": [{"use": "microaggregation", "k": 3, "columns": list(target)}], "evaluate": ["edit-violations"]}
    out = privclust.run(recipe, data.assign(**target), seed=1)
    entry = next(e for e in out.ledger.of_kind("guarantee") if e.mechanism == "edit rule")
    lhs, rhs = (data["staff"], 0.00001 * data["turnover"]) if scale is None else \
        (data["net"], data["gross"] - data["costs"])
    broken = int(((lhs - rhs > 1e-6) if scale is None else ((lhs - rhs).abs() > 1.0)).sum())
    assert broken > 0 and entry.details["violated_records"] == broken, entry.statement
    assert out.evaluation(f"{rule}: share violated") == pytest.approx(broken / 40)


def test_evaluations_are_tidy_and_default_to_changed_columns(reg, data):
    recipe = {"steps": [{"use": "shift", "columns": ["a"], "by": 2.0}],
              "evaluate": [{"use": "mean-abs"}, {"use": "mean-abs", "columns": ["a", "b"]}]}
    out = privclust.run(recipe, data, registry=reg)
    ev = out.evaluations
    assert list(ev.columns) == ["evaluator", "metric", "value", "columns"]
    assert ev["value"].tolist() == pytest.approx([2.0, 1.0, 1.0, 2.0])
    assert ev["columns"].tolist() == ["a", "a", "a, b", "a, b"]
    assert out.evaluation("mean_abs_change") == pytest.approx(2.0)
    with pytest.raises(PrivclustError, match="no evaluation named"):
        out.evaluation("nope")


def test_report_is_json_and_complete(reg, data):
    recipe = {"name": "r", "steps": [{"use": "shift", "id": "s", "columns": ["a"]}], "evaluate": ["mean-abs"]}
    out = privclust.run(recipe, data, registry=reg, seed=5)
    report = json.loads(json.dumps(out.report()))
    assert report["recipe"] == privclust.Recipe.from_dict(recipe).to_dict()
    step = report["steps"][0]
    assert step["parameters"] == {"by": 1.0}  # every parameter, defaults included
    assert step["component"] == "shift" and step["id"] == "s" and step["columns"] == ["a"]
    assert {"python", "privclust", "numpy", "pandas", "scipy"} <= set(report["environment"])
    assert any(p["name"] == "noise" for p in report["plugins"])
    assert report["seeded"] is True
    # total = a + b and b are released as in the original beside the shifted a: the host says they give a back
    assert [e["kind"] for e in report["ledger"]] == ["process", "verified", "verified", "verified"]
    assert report["ledger"][-1]["mechanism"] == "derived columns"
    assert out.verdict.startswith("THE FILE GIVES BACK ORIGINAL VALUES: the columns released as in the original "
                                  "(total, b) give back the original a")
    html = out._repr_html_()
    assert "<table" in html and "shift" in html and "mean_abs_change" in html
    assert out.to_html().startswith("<!DOCTYPE html>")
    assert len(out.evaluations) == 2
    assert repr(out).startswith(f"<Release {len(data)} records x {out.data.shape[1]} columns, 1 step, 2 evaluations. ")
    assert ", 1 step, 1 evaluation. " in repr(attrs.evolve(out, evaluations=out.evaluations.head(1)))


def test_steps_see_the_previous_steps_output(reg, data):
    out = privclust.run({"steps": [{"use": "shift", "columns": ["a"]}, {"use": "shift", "columns": ["a"]}]},
                        data, registry=reg)
    assert ", 2 steps, 0 evaluations. " in repr(out)  # the plural
    assert np.allclose(out.data["a"], data["a"] + 2)
    assert [o.id for o in out.outcomes] == ["shift", "shift-2"]
    assert out.step("shift-2").index == 1
    with pytest.raises(PrivclustError, match="no step has id"):
        out.step("nope")


def test_runs_are_reproducible_under_a_seed(data):
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {c: [0, 20] for c in ("a", "total", "b")}}]}
    one, two = privclust.run(recipe, data, seed=11), privclust.run(recipe, data, seed=11)
    assert one.data.equals(two.data)
    assert not one.data.equals(privclust.run(recipe, data, seed=12).data)


def test_budget_is_enforced_at_run_time_for_unplanned_spends(data):
    @attrs.frozen(kw_only=True)
    class Greedy:
        name: ClassVar[str] = "greedy"

        def mask(self, data, context):
            mech = context.mechanism("laplace")
            values = mech.release(data.to_numpy(), sensitivity=1.0, epsilon=5.0, context=context, relation="r",
                                  covers="everything")
            return Masked(data=pd.DataFrame(values, index=data.index, columns=data.columns))

    class P:
        @hookimpl
        def privclust_register_maskers(self, register):
            register(Greedy)

    reg = Registry(plugins=[P()], use_env=False)
    with pytest.raises(privclust.BudgetExceededError, match="greedy"):
        privclust.run({"privacy": {"epsilon": 1.0}, "steps": [{"use": "greedy", "columns": ["a"]}]}, data,
                      registry=reg)


def test_min_records_is_checked_before_running(data):
    @attrs.frozen(kw_only=True)
    class Needy:
        name: ClassVar[str] = "needy"

        def min_records(self, n_columns):
            return 100

        def mask(self, data, context):  # pragma: no cover - never reached
            raise AssertionError

    class P:
        @hookimpl
        def privclust_register_maskers(self, register):
            register(Needy)

    with pytest.raises(DataError, match="needy needs at least 100 records; the data have 40"):
        privclust.run({"steps": [{"use": "needy"}]}, data, registry=Registry(plugins=[P()], use_env=False))


@attrs.frozen(kw_only=True)
class ShiftFirst:
    """A masker that shifts its first column only."""

    name: ClassVar[str] = "shift-first"

    def mask(self, data, context):
        out = data.copy()
        out.iloc[:, 0] = out.iloc[:, 0] + 1.0
        return Masked(data=out)


def test_a_masker_that_changes_nothing_is_not_said_to_have_replaced_anything(data):
    class More:
        @hookimpl
        def privclust_register_maskers(self, register):
            register(Shift)
            register(ShiftFirst)

    reg = Registry(plugins=[More()], use_env=False)
    out = privclust.run({"steps": [{"use": "shift", "by": 0.0, "columns": ["a", "b"]}]}, data, registry=reg)
    step = [e for e in out.ledger if e.kind == "process" and e.step == 0][0]
    assert "replaced" not in step.statement
    assert "released columns a, b of 40 records unchanged" in step.statement
    assert step.details["unchanged_columns"] == ["a", "b"]
    assert out.verification["verbatim_records"] == 40  # the host's own check agrees
    out = privclust.run({"steps": [{"use": "shift-first", "columns": ["a", "b"]}]}, data, registry=reg)
    step = [e for e in out.ledger if e.kind == "process" and e.step == 0][0]
    assert "replaced columns a of 40 records and released b unchanged" in step.statement
