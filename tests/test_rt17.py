"""Red-team audit rt17: the budget and the figures of DP accounting."""

from __future__ import annotations

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
