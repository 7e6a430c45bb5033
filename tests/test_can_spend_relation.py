"""can_spend / remaining / remaining_for / check_spend tell the truth for
add/remove releases (decision 25): a component that asks before spending is
refused before its first release, with the doubling and the fix named."""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Budget, BudgetExceededError, PrivacyContext, Relation
from privclust.ledger import LedgerEntry

ADD_REMOVE = Relation.ADD_REMOVE


def spend(context: PrivacyContext, epsilon: float, relation: str) -> None:
    context.spend(epsilon=epsilon, mechanism="laplace", sensitivity=1.0, relation=relation, covers="a count")


def frame(n: int = 2000, d: int = 2) -> pd.DataFrame:
    return pd.DataFrame(np.random.default_rng(0).normal(50, 5, (n, d)), columns=list("abcdefgh"[:d]))


def bounds(d: int = 2) -> dict[str, list[float]]:
    return {c: [0.0, 100.0] for c in "abcdefgh"[:d]}


# -- the built-ins ask before their first release ------------------------------------------------------------


def test_dp_density_over_an_add_remove_budget_is_refused_before_any_release():
    """The brief's example: before, remaining said 2.0 and can_spend(2.0) True; the count and the tree were
    recorded and the third release was refused with "Nothing was recorded and no noise was drawn"."""
    registry = privclust.get_registry()
    comp = registry.create("clusterers", "dp-density", epsilon=2.0, bounds=bounds())
    context = PrivacyContext(seed=1, registry=registry, budget=Budget(epsilon=2.0))
    assert context.remaining_for(ADD_REMOVE) == 1.0 and not context.can_spend(2.0, relation=ADD_REMOVE)
    with pytest.raises(BudgetExceededError) as err, context.step(0, "s", "dp-density"):
        comp.fit(frame(), context)
    assert len(context.ledger) == 0  # before: 2
    text = str(err.value)
    assert "would spend epsilon=2 under add/remove" in text
    assert "the add/remove total counted twice" in text
    assert "raise [privacy] epsilon to at least 4 or lower its epsilon to at most 1" in text
    assert text.endswith("Nothing was recorded and no noise was drawn.")
    # the fixes it names both work
    for eps, budget in ((1.0, 2.0), (2.0, 4.0)):
        comp = registry.create("clusterers", "dp-density", epsilon=eps, bounds=bounds())
        context = PrivacyContext(seed=1, registry=registry, budget=Budget(epsilon=budget))
        with context.step(0, "s", "dp-density"):
            comp.fit(frame(), context)
        assert context.remaining_for(ADD_REMOVE) == pytest.approx(0.0, abs=1e-12)


def test_dp_density_projected_path_is_refused_before_the_basis_release():
    registry = privclust.get_registry()
    comp = registry.create("clusterers", "dp-density", epsilon=2.0, bounds=bounds(3), project_above=2)
    context = PrivacyContext(seed=1, registry=registry, budget=Budget(epsilon=2.0))
    with pytest.raises(BudgetExceededError) as err, context.step(0, "s", "dp-density"):
        comp.fit(frame(500, 3), context)
    assert len(context.ledger) == 0
    assert "dp-density's four releases" in str(err.value) and "counted twice" in str(err.value)
    assert "at least 4 or lower its epsilon to at most 1" in str(err.value)


def test_idp_kmeans_over_an_add_remove_budget_is_refused_before_any_release():
    registry = privclust.get_registry()
    comp = registry.create("clusterers", "idp-kmeans", n_clusters=3, epsilon=2.0, bounds=bounds())
    context = PrivacyContext(seed=1, registry=registry, budget=Budget(epsilon=2.0))
    with pytest.raises(BudgetExceededError) as err, context.step(0, "km", "idp-kmeans"):
        comp.fit(frame(), context)
    assert len(context.ledger) == 0
    text = str(err.value)
    assert "idp-kmeans's schedule" in text and "counted twice" in text
    assert "raise [privacy] epsilon to at least 4 or lower its epsilon to at most 1" in text


def test_a_replace_one_density_peak_step_after_add_remove_releases_is_counted_as_the_accountant_counts_it():
    """Before: asked without a relation after an add/remove release, the probe was counted as add/remove (its
    epsilon doubled in the file's figure), so a step that fits (0.5 x 2 + 1 = 2) was refused; and the message's
    total (spent + epsilon) left out the doubling of the add/remove release."""
    from privclust_plugins.density_peaks import AdDPCrDP

    data = frame(60)
    context = PrivacyContext(Budget(epsilon=2.0), seed=1)
    spend(context, 0.5, "add/remove")
    with context.step(0, "s", "addpc-rdp"):
        AdDPCrDP(epsilon=1.0, calibration="vector", dc=3.0).fit(data, context)
    assert context.spent[0] == 2.0
    context = PrivacyContext(Budget(epsilon=2.0), seed=1)
    spend(context, 0.5, "add/remove")
    with pytest.raises(BudgetExceededError) as err, context.step(0, "s", "addpc-rdp"):
        AdDPCrDP(epsilon=1.5, calibration="vector", dc=3.0).fit(data, context)
    text = str(err.value)
    assert "bringing the total to 2.5 (with releases under both relations the total holds under replace-one, each " \
           "add/remove release counted twice)" in text
    assert "at least 2.5 or lower its epsilon to at most 1" in text and len(context.ledger) == 1


# -- the figures -----------------------------------------------------------------------------------------------


def test_figures_on_an_empty_ledger():
    context = PrivacyContext(Budget(epsilon=2.0))
    assert context.remaining == 2.0  # documented: for a release counted under replace-one
    assert context.remaining_for(Relation.REPLACE_ONE) == 2.0 and context.remaining_for("replace-one") == 2.0
    assert context.remaining_for(ADD_REMOVE) == 1.0 and context.remaining_for("add/remove one record") == 1.0
    assert context.can_spend(2.0) and not context.can_spend(2.0000001)
    assert context.can_spend(1.0, relation=ADD_REMOVE) and not context.can_spend(1.0000001, relation=ADD_REMOVE)
    assert context.can_spend(2.0, relation="replace-one") and not context.can_spend(2.0, relation="add/remove")
    assert PrivacyContext().remaining_for(ADD_REMOVE) is None and PrivacyContext().can_spend(1e9, relation=ADD_REMOVE)


def test_figures_after_add_remove_releases():
    context = PrivacyContext(Budget(epsilon=2.0))
    spend(context, 0.5, "add/remove")
    assert context.remaining == 0.5 and context.remaining_for(ADD_REMOVE) == 0.5
    assert context.can_spend(0.5, relation=ADD_REMOVE) and not context.can_spend(0.5000001, relation=ADD_REMOVE)
    # a replace-one release makes the run mixed: the add/remove release counts twice, the new one once
    assert context.remaining_for("replace-one") == 1.0
    assert context.can_spend(1.0, relation="replace-one") and not context.can_spend(1.0000001, relation="replace-one")


def test_figures_after_a_replace_one_release():
    context = PrivacyContext(Budget(epsilon=2.0))
    spend(context, 0.5, "replace-one")
    assert context.remaining == 1.5 and context.remaining_for("replace-one") == 1.5
    assert context.remaining_for(ADD_REMOVE) == 0.75
    assert context.can_spend(0.75, relation=ADD_REMOVE) and not context.can_spend(0.7500001, relation=ADD_REMOVE)


def test_a_mixed_ledger_is_counted_as_the_accountant_counts_it():
    context = PrivacyContext(Budget(epsilon=2.0))
    spend(context, 0.5, "replace-one")
    spend(context, 0.5, "add/remove")  # 0.5 + 2 x 0.5 = 1.5 under replace-one
    assert context.spent == (1.5, 0.0)
    assert context.remaining == 0.5 and context.remaining_for("replace-one") == 0.5
    assert context.remaining_for(ADD_REMOVE) == 0.25
    assert context.can_spend(0.25, relation=ADD_REMOVE) and not context.can_spend(0.2500001, relation=ADD_REMOVE)
    spend(context, 0.25, "add/remove")
    assert context.spent == (2.0, 0.0) and context.remaining_for(ADD_REMOVE) == 0.0 and context.remaining == 0.0
    with pytest.raises(BudgetExceededError, match=r"raise \[privacy\] epsilon to at least 2.2 \(no epsilon is left for "
                                                  r"a release under add/remove\)"):
        spend(context, 0.1, "add/remove")


def test_every_figure_is_one_the_accountant_accepts():
    for ledger in ([], [(0.3, "add/remove")], [(0.3, "replace-one")], [(0.1, "replace-one"), (0.7, "add/remove")],
                   [(1 / 3, "add/remove"), (1 / 7, "add/remove")]):
        for relation in (None, "replace-one", ADD_REMOVE):
            context = PrivacyContext(Budget(epsilon=1.9))
            for eps, rel in ledger:
                spend(context, eps, rel)
            room = context.remaining_for(relation)
            assert room is not None and room > 0
            assert context.can_spend(room, relation=relation)
            assert not context.can_spend(room * (1 + 1e-9) + 1e-12, relation=relation)
        assert context.remaining == context.remaining_for(None)


def test_a_plugin_accountant_s_figure_is_the_largest_it_accepts():
    @attrs.frozen
    class Capped:
        """A policy cap: no release above 0.3, whatever the budget."""

        budget: Budget
        description: str = "capped"

        def total(self, entries):
            return (sum(e.epsilon for e in entries if e.kind == "dp"), 0.0)

        def check(self, entries, new: LedgerEntry) -> None:
            if new.epsilon > 0.3 or self.total([*entries, new])[0] > self.budget.epsilon:
                raise BudgetExceededError("capped")

    context = PrivacyContext(Budget(epsilon=2.0), accountant=Capped(Budget(epsilon=2.0)))
    room = context.remaining_for(ADD_REMOVE)
    assert room == pytest.approx(0.3) and room <= 0.3 and context.can_spend(room, relation=ADD_REMOVE)


def test_inside_a_stratum_the_figure_is_accepted():
    context = PrivacyContext(Budget(epsilon=2.0))
    with context._in_part("region", "north"):
        spend(context, 0.5, "add/remove")
    with context._in_part("region", "south"):
        room = context.remaining_for(ADD_REMOVE)
        assert room == pytest.approx(1.0) and context.can_spend(room, relation=ADD_REMOVE)


def test_a_relation_that_cannot_be_composed_is_refused_by_name():
    context = PrivacyContext(Budget(epsilon=2.0))
    spend(context, 0.5, "replace-one")
    with pytest.raises(privclust.PrivclustError, match="different neighbouring relations"):
        context.can_spend(0.1, relation="swap-two")
    assert context.can_spend(0.0, relation=ADD_REMOVE)  # costs nothing


# -- refusals mid-step say what was recorded ------------------------------------------------------------------


def test_a_refusal_after_earlier_releases_of_the_step_does_not_say_nothing_was_recorded():
    context = PrivacyContext(Budget(epsilon=2.0))
    with context.step(0, "s", "mine"):
        spend(context, 0.6, "add/remove")
        with pytest.raises(BudgetExceededError) as err:
            spend(context, 0.6, "add/remove")
    text = str(err.value)
    assert "Nothing was recorded" not in text  # before: said so, with the first release in the ledger
    assert "This release was not recorded and no noise was drawn for it, but the ledger keeps 1 earlier entry of " \
           "the same step (1 release)" in text
    assert len(context.ledger) == 1


def test_check_spend_refuses_with_the_accountant_s_words_and_records_nothing():
    context = PrivacyContext(Budget(epsilon=1.0))
    context.check_spend(0.5, relation=ADD_REMOVE, mechanism="three releases", covers="a map")  # fits: nothing raised
    with pytest.raises(BudgetExceededError, match=r"this release would spend epsilon=0.6 under add/remove \(three "
                                                  r"releases on a map\), bringing the total to 1.2"):
        context.check_spend(0.6, relation=ADD_REMOVE, mechanism="three releases", covers="a map")
    assert len(context.ledger) == 0
