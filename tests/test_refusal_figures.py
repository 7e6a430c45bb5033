"""The budget refusal's figures and ``remaining_for`` state what the
accountant accepts (red-team round rt19, F3-F6, F8, F11): the advice names
delta where delta is over the budget, counts a stratum's release in parallel,
never names an infinite budget; a stated room, spent, never shows a total
above the budget; and the refusal says what the ledger already holds."""

from __future__ import annotations

import re

import pytest

from privclust import Budget, BudgetExceededError, PrivacyContext
from privclust.claims import KAnonymity
from privclust.ledger import at_least


def spend(context: PrivacyContext, epsilon: float, delta: float = 0.0, relation: str = "replace-one") -> None:
    context.spend(epsilon=epsilon, delta=delta, mechanism="laplace", sensitivity=1.0, relation=relation, covers="x")


def refusal(context: PrivacyContext, epsilon: float, delta: float = 0.0, relation: str = "replace-one") -> str:
    with pytest.raises(BudgetExceededError) as err:
        spend(context, epsilon, delta, relation)
    return str(err.value)


def figure(text: str, pattern: str) -> float:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return float(found.group(1))


# -- F3: delta -------------------------------------------------------------------------------------------------


def test_a_pure_epsilon_budget_refusal_names_delta_and_never_an_epsilon_that_is_refused_again():
    """Before: "raise [privacy] epsilon to at least 2 or lower its epsilon to at most 1"; epsilon 1 was refused
    again for its delta."""
    text = refusal(PrivacyContext(Budget(epsilon=1.0)), 2.0, 1e-6)
    assert "a pure-epsilon budget: it takes no release with a delta" in text
    assert "raise [privacy] epsilon to at least 2 and delta to at least 1e-06" in text
    assert "or use a pure-epsilon mechanism (delta 0) with epsilon at most 1." in text
    assert "lower its epsilon" not in text
    for budget, eps, delta in ((Budget(epsilon=2.0, delta=1e-6), 2.0, 1e-6), (Budget(epsilon=1.0), 1.0, 0.0)):
        spend(PrivacyContext(budget), eps, delta)  # both fixes it names fit
    text = refusal(PrivacyContext(Budget(epsilon=1.0)), 1.0, 1e-6)  # epsilon within, delta not
    assert "raise [privacy] delta to at least 1e-06 or use a pure-epsilon mechanism (delta 0)." in text


def test_under_mixed_relations_the_advice_counts_the_delta_an_add_remove_epsilon_brings():
    """Before: "raise [privacy] epsilon to at least 12.5 or lower its epsilon to at most 4.75"; both were refused
    for delta ((1 + e^epsilon) delta under replace-one)."""
    def ledger(budget: Budget) -> PrivacyContext:
        context = PrivacyContext(budget)
        spend(context, 0.5)
        return context

    text = refusal(ledger(Budget(epsilon=10.0, delta=1e-5)), 6.0, 1e-6, "add/remove")
    raised_eps = figure(text, r"raise \[privacy\] epsilon to at least ([0-9.e+-]+)")
    raised_delta = figure(text, r"and delta to at least ([0-9.e+-]+)")
    lowered = figure(text, r"or lower its epsilon to at most ([0-9.e+-]+)\.")
    assert (raised_eps, lowered) == (12.5, 2.19722)
    spend(ledger(Budget(epsilon=raised_eps, delta=raised_delta)), 6.0, 1e-6, "add/remove")
    spend(ledger(Budget(epsilon=10.0, delta=1e-5)), lowered, 1e-6, "add/remove")
    refusal(ledger(Budget(epsilon=10.0, delta=1e-5)), 2.1973, 1e-6, "add/remove")  # the figure is the largest


def test_a_delta_that_cannot_fit_at_any_epsilon_is_to_be_lowered():
    context = PrivacyContext(Budget(epsilon=10.0, delta=1e-6))
    text = refusal(context, 1.0, 5e-6)
    assert "raise [privacy] delta to at least 5e-06 or lower its delta to at most 1e-06." in text
    spend(context, 1.0, 1e-6)


# -- F4, F5: strata --------------------------------------------------------------------------------------------


def stratified(budget: float) -> PrivacyContext:
    context = PrivacyContext(Budget(epsilon=budget), seed=1)
    with context.step(0, "s", "x"):
        with context._in_part("g", "a"):
            spend(context, 0.5)
        with context._in_part("g", "b"):
            spend(context, 0.4)
    return context


def test_inside_a_stratum_the_refusal_counts_the_release_as_the_accountant_does():
    """Before: "bringing the total to 1.1 > the budget epsilon=1; raise [privacy] epsilon to at least 1.2 or lower
    its epsilon to at most 0.5" (1.1 fits, and so does 0.6)."""
    context = stratified(1.0)
    with context.step(1, "t", "x"), context._in_part("g", "b"):
        text = refusal(context, 0.7)
    assert "bringing the total to 1.1 > the budget epsilon=1; raise [privacy] epsilon to at least 1.1 or lower " \
           "its epsilon to at most 0.6." in text
    context = stratified(1.1)
    with context.step(1, "t", "x"), context._in_part("g", "b"):
        spend(context, 0.7)
    context = stratified(1.0)
    with context.step(1, "t", "x"), context._in_part("g", "b"):
        spend(context, 0.6)


def test_the_room_inside_a_stratum_spent_never_shows_a_total_above_the_budget():
    """Before: 0.6000000000000035 (the accountant's rounding slack); spent, the total read 1.00001 > 1."""
    context = stratified(1.0)
    with context.step(1, "t", "x"), context._in_part("g", "b"):
        room = context.remaining_for("replace-one")
        assert room == 0.6 and context.remaining == 0.6
        spend(context, room)
    assert context.spent[0] <= 1.0 and at_least(context.spent[0]) == "1"


@pytest.mark.parametrize("relation", ["replace-one", "add/remove"])
@pytest.mark.parametrize("spent", [[0.1, 0.2], [1 / 3, 1 / 7, 0.05], [0.3]])
def test_every_stated_room_spent_keeps_the_total_within_the_budget(spent, relation):
    for part in (None, "b"):
        context = PrivacyContext(Budget(epsilon=2.0))
        with context._in_part("g", "a"):
            spend(context, 0.45, relation=relation)
        for eps in spent:
            spend(context, eps, relation=relation)
        if part is None:
            room = context.remaining_for(relation)
            spend(context, room, relation=relation)
        else:
            with context._in_part("g", part):
                room = context.remaining_for(relation)
                spend(context, room, relation=relation)
        total = context.spent[0] * (2 if relation == "add/remove" else 1)
        assert room > 0 and total <= 2.0, (part, room, total)


# -- F6: what the ledger holds ---------------------------------------------------------------------------------


def test_a_refusal_after_a_claim_of_the_same_step_says_the_claim_stays():
    context = PrivacyContext(Budget(epsilon=1.0))
    with context.step(0, "s", "x"):
        context.record(claim=KAnonymity(k=5, columns=("a",)))
        text = refusal(context, 2.0)
    assert "Nothing was recorded" not in text  # before: said so, the claim in the ledger
    assert "the ledger keeps 1 earlier entry of the same step (1 guarantee claim)" in text
    assert len(context.ledger) == 1


def test_a_refusal_outside_a_step_says_nothing_was_recorded_only_on_an_empty_ledger():
    context = PrivacyContext(Budget(epsilon=1.0))
    assert refusal(context, 1.2).endswith("Nothing was recorded and no noise was drawn.")
    spend(context, 0.6)
    text = refusal(context, 0.6)
    assert "Nothing was recorded" not in text  # before: said so, with the first release in the ledger
    assert text.endswith("This release was not recorded and no noise was drawn for it; the ledger keeps the 1 "
                         "earlier entry recorded before it.")


# -- F11: no infinite budget -----------------------------------------------------------------------------------


def test_a_release_no_finite_budget_holds_is_not_told_to_raise_the_budget_to_inf():
    context = PrivacyContext(Budget(epsilon=1.7e308))
    spend(context, 1.23e308)
    text = refusal(context, 1.23e308)
    assert "inf" not in text.split(";")[1]  # before: "raise [privacy] epsilon to at least inf"
    assert "no finite [privacy] epsilon holds it: lower its epsilon to at most " in text
    spend(context, figure(text, r"lower its epsilon to at most ([0-9.e+-]+)\."))


def test_an_adopted_stratum_release_refused_after_earlier_entries_of_its_step_is_not_said_to_be_undrawn():
    """A stratum's release is noised in its own task: the refusal to adopt it never says "no noise was drawn"
    (before: only the "Nothing was recorded" sentence was taken out, not the one for a step with entries)."""
    worker = PrivacyContext(Budget(epsilon=1.0))
    with worker.step(0, "s", "x"), worker._in_part("g", "a"):
        spend(worker, 0.6)
    run = PrivacyContext(Budget(epsilon=1.0))
    with run.step(0, "s", "x"):
        spend(run, 0.6)
    with pytest.raises(BudgetExceededError) as err:
        run._adopt(worker.ledger.entries[0])
    text = str(err.value)
    assert "no noise was drawn" not in text and "made and noised in the stratum's own task" in text
