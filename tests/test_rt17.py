"""Red-team audit rt17: the budget and the figures of DP accounting."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Budget, BudgetExceededError, PrivacyContext, RecipeError
from privclust.ledger import at_least, at_most


def _frame(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n)})


# F2a: a pure-epsilon budget refuses any delta above 0 -----------------------------------------------------------------

@pytest.mark.parametrize("delta", [1e-301, 5e-324])
def test_a_pure_epsilon_budget_refuses_a_tiny_delta_at_compile_time(delta):
    recipe = {"privacy": {"epsilon": 1.0}, "steps": [{"use": "gaussian", "epsilon": 1.0, "delta": delta,
                                                      "columns": ["a"], "bounds": {"a": [0, 10]}}]}
    # before: compiled and ran, the verdict stating (epsilon 1, delta 1e-301) under a budget of delta 0
    with pytest.raises(RecipeError, match="privacy.delta"):
        privclust.run(recipe, _frame(), seed=1)


@pytest.mark.parametrize("delta", [1e-301, 5e-324])
def test_a_pure_epsilon_budget_refuses_a_tiny_delta_at_spend_time(delta):
    context = PrivacyContext(Budget(epsilon=1.0))
    with pytest.raises(BudgetExceededError, match="pure-epsilon"):
        context.spend(epsilon=0.5, delta=delta, mechanism="gaussian", sensitivity=1.0, relation="replace-one",
                      covers="a")
    assert len(context.ledger) == 0


# F2b: a figure shown at least (at most) the value, compared exactly -----------------------------------------------

def test_at_least_never_shows_less_than_a_subnormal_value():
    from decimal import Decimal
    # before: "4.94e-324", below the 4.9406564...e-324 spent (float("4.94e-324") rounds back up to 5e-324)
    assert at_least(5e-324, 3) == "4.95e-324"
    assert Decimal(at_least(5e-324, 3)) >= Decimal(5e-324)
    assert Decimal(at_most(5e-324, 3)) <= Decimal(5e-324)
    assert (at_least(1 / 3), at_least(1.2349e-6, 3), at_most(2 / 3)) == ("0.333334", "1.24e-06", "0.666666")


# F1: an add/remove-only run: the budget and the report count the file's figure, as the verdict does --------------

@attrs.frozen(kw_only=True)
class AddRemoveNoise:
    """A plugin masker whose noisy values are covered, stated under add/remove (the repro s7.py)."""

    name: ClassVar[str] = "ar-noise"
    privacy_relation: ClassVar[privclust.Relation] = privclust.Relation.ADD_REMOVE
    epsilon: float = privclust.param(default=1.0, doc="the epsilon of the step", gt=0, role="privacy")
    declared: bool = privclust.param(default=True, doc="whether the step declares its planned cost")

    def planned_cost(self):
        return (self.epsilon, 0.0) if self.declared else None

    def mask(self, data, context):
        mech = context.mechanism("laplace")
        out = data.copy()
        for c in data.columns:
            out[c] = mech.release(np.clip(data[c].to_numpy(float), 0, 10), sensitivity=10.0,
                                  epsilon=self.epsilon / len(data.columns), context=context,
                                  relation=privclust.Relation.ADD_REMOVE, covers=f"every value of {c}", changed=1)
        return privclust.Masked(data=out)


class _AddRemovePlugin:
    @privclust.hookimpl
    def privclust_register_maskers(self, register):
        register(AddRemoveNoise)


def _ar_registry() -> privclust.Registry:
    return privclust.Registry(plugins=[_AddRemovePlugin()], use_env=False).load()


def test_an_add_remove_only_recipe_is_refused_at_compile_time_when_its_file_needs_twice_the_budget():
    recipe = {"privacy": {"epsilon": 1.0}, "steps": [{"use": "ar-noise", "epsilon": 1.0, "columns": ["a", "b"]}]}
    # before: accepted, and the verdict stated epsilon 2 under a budget of epsilon 1
    with pytest.raises(RecipeError, match=r"epsilon = 2 .*counted twice"):
        privclust.compile(recipe, _ar_registry())


def test_an_add_remove_only_run_is_refused_at_spend_time_when_its_file_needs_twice_the_budget():
    recipe = {"privacy": {"epsilon": 1.0},
              "steps": [{"use": "ar-noise", "epsilon": 1.0, "declared": False, "columns": ["a", "b"]}]}
    with pytest.raises(BudgetExceededError, match=r"total to 2 \(the add/remove total counted twice"):
        privclust.run(recipe, _frame(), registry=_ar_registry(), seed=1)
    context = PrivacyContext(Budget(epsilon=1.0))
    context.spend(epsilon=0.5, mechanism="laplace", sensitivity=1.0, relation="add/remove", covers="a")
    with pytest.raises(BudgetExceededError, match="counted twice"):
        context.spend(epsilon=0.01, mechanism="laplace", sensitivity=1.0, relation="add/remove", covers="b")


def test_an_add_remove_only_report_states_the_files_figure_the_verdict_states():
    recipe = {"privacy": {"epsilon": 2.0}, "steps": [{"use": "ar-noise", "epsilon": 1.0, "columns": ["a", "b"]}]}
    release = privclust.run(recipe, _frame(), registry=_ar_registry(), seed=1)
    assert "ε = 2," in release.verdict and "under replace-one" in release.verdict
    assert release.spent == (1.0, 0.0)  # the accountant's add/remove total, as the ledger composes it
    assert release.file_spent == (2.0, 0.0)
    privacy = release.report()["privacy"]
    # before: spent epsilon 1 under "add/remove" beside a verdict of epsilon 2
    assert privacy["spent"] == {"epsilon": 2.0, "delta": 0.0} and privacy["relation"] == "replace-one"
    html = release.to_html()
    assert "Differentially private releases cost epsilon 2, delta 0 together (the steps&#39; add/remove releases " \
           "counted twice" in html or "Differentially private releases cost epsilon 2, delta 0 together (the " \
           "steps' add/remove releases counted twice" in html


# F3: the accountant sums exactly and rounds up ---------------------------------------------------------------------

def test_the_composed_epsilon_is_the_exact_sum_rounded_up():
    from fractions import Fraction

    from privclust.accountants import sum_up

    context = PrivacyContext(Budget(epsilon=1024.0))
    costs = [1024.0] + [1e-13] * 20
    for eps in costs:
        context.spend(epsilon=eps, mechanism="laplace", sensitivity=1.0, relation="replace-one", covers="a")
    # before: (1024.0, 0.0), every 1e-13 lost below half an ulp of 1024
    assert Fraction(context.spent[0]) >= sum(Fraction(c) for c in costs) > 1024
    assert at_least(context.spent[0]) == "1024.01"
    assert sum_up([0.1, 0.2]) == 0.1 + 0.2 and sum_up([0.5, 0.25]) == 0.75 and sum_up([]) == 0.0
    assert sum_up([1.0, float("inf")]) == float("inf")


def test_the_verdict_states_the_exact_sum_rounded_up():
    steps = [{"use": "laplace", "epsilon": 1024.0, "columns": ["a"], "bounds": {"a": [0, 10]}}] + \
            [{"use": "laplace", "epsilon": 1e-13, "columns": ["b"], "bounds": {"b": [0, 10]}}] * 20
    release = privclust.run({"privacy": {"epsilon": 1024.0}, "steps": steps}, _frame(20), seed=1)
    # before: "ε = 1024," for a composition of 1024 + 2e-12
    assert "(ε = 1024.01, δ = 0)" in release.verdict


# F4: the audit names the steps it skipped and says when the release is not DP ----------------------------------

def test_the_audit_names_skipped_steps_and_a_release_without_dp(tmp_path, capsys):
    from privclust import cli

    recipe = tmp_path / "r1.toml"
    recipe.write_text('[privacy]\nepsilon = 2.0\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n'
                      'bounds = { a = [0, 10] }\n[[steps]]\nuse = "microaggregation"\ncolumns = ["a", "b"]\n'
                      'clusterer = { use = "mdav", k = 3 }\n', encoding="utf-8")
    data = tmp_path / "d1.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.uniform(0, 10, (40, 3)), columns=["a", "b", "c"]).to_csv(data, index=False)
    code = cli.main(["audit", str(recipe), "--input", str(data), "--trials", "20", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0  # each step's own claim passed
    assert "step 0 'laplace' (laplace): epsilon lower bound" in out
    # before: step 1 was never named, and nothing said that the release is not DP
    assert "step 1 'microaggregation' (microaggregation): records no DP release, not audited" in out
    assert "the release as a whole has no differential-privacy guarantee (privclust run on the same data: No " \
           "differential-privacy guarantee: step 1 (microaggregation, microaggregation) released the values of a, b " \
           "without differential privacy);" in out
    assert "the audit checks each DP step's own claim only" in out


def test_the_epsilon_left_after_add_remove_releases_is_what_another_may_spend():
    context = PrivacyContext(Budget(epsilon=2.0))
    context.spend(epsilon=0.5, mechanism="laplace", sensitivity=1.0, relation="add/remove", covers="a")
    # before: 1.5 left, though a release of 0.6 under add/remove was refused (the file's 2 x 1.1 > 2)
    assert context.remaining == 0.5
    assert context.can_spend(0.5) and not context.can_spend(0.5000001)
