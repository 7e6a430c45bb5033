"""The privacy-accounting context: budget, composition, ledger, random streams, stash."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import (
    BasicAccountant,
    Budget,
    BudgetExceededError,
    PrivacyContext,
    PrivacyLeakWarning,
    PrivclustError,
    Sensitivity,
    StashKey,
)


def spend(context: PrivacyContext, epsilon: float, delta: float = 0.0, partition=None):
    return context.spend(epsilon=epsilon, delta=delta, mechanism="laplace", sensitivity=1.0,
                         relation="replace-one", covers="a count", not_covered="the labels", partition=partition)


def test_sequential_composition_adds_up():
    context = PrivacyContext(Budget(epsilon=1.0))
    spend(context, 0.25)
    spend(context, 0.5)
    assert context.spent == (0.75, 0.0)
    assert context.remaining == pytest.approx(0.25)
    assert context.can_spend(0.25) and not context.can_spend(0.2500001)


def test_spend_refuses_before_recording_anything():
    context = PrivacyContext(Budget(epsilon=1.0))
    spend(context, 0.8)
    before = context.rng.bit_generator.state
    with pytest.raises(BudgetExceededError) as err:
        spend(context, 0.3)
    assert len(context.ledger) == 1
    assert context.rng.bit_generator.state == before
    message = str(err.value)
    assert "bringing the total to 1.1 > the budget epsilon=1" in message
    assert "raise [privacy] epsilon" in message and "no noise was drawn" in message


def test_delta_is_budgeted_too():
    context = PrivacyContext(Budget(epsilon=10.0, delta=1e-6))
    spend(context, 1.0, delta=6e-7)
    with pytest.raises(BudgetExceededError, match="delta"):
        spend(context, 1.0, delta=6e-7)
    no_delta = PrivacyContext(Budget(epsilon=10.0))
    with pytest.raises(BudgetExceededError, match="pure-epsilon"):
        spend(no_delta, 1.0, delta=1e-9)


def test_parallel_composition_only_over_parts_the_host_made():
    context = PrivacyContext(Budget(epsilon=1.0))
    for part in ("cluster 0", "cluster 1", "cluster 2"):
        with context._in_part("region", part):
            spend(context, 0.3)
    with context._in_part("region", "cluster 1"):
        spend(context, 0.2)
    assert context.spent[0] == pytest.approx(0.5)  # max over parts: cluster 1 has 0.3 + 0.2
    assert context.ledger[0].partition == ("region", "cluster 0")
    assert "composes in parallel" in context.ledger[0].statement
    with pytest.raises(BudgetExceededError):
        spend(context, 0.6)


def test_a_partition_a_component_declares_is_charged_sequentially():
    context = PrivacyContext(Budget(epsilon=1.0))
    for part in ("cluster 0", "cluster 1"):
        spend(context, 0.4, partition=("round 1", part))
    assert context.spent[0] == pytest.approx(0.8)  # not 0.4: the host cannot check the parts
    entry = context.ledger[0]
    assert entry.partition is None
    assert entry.details["claimed_partition"] == ["round 1", "cluster 0"]
    assert "charged sequentially" in entry.statement
    with pytest.raises(BudgetExceededError):
        spend(context, 0.4, partition=("round 1", "cluster 2"))


def test_no_budget_records_but_never_refuses():
    context = PrivacyContext()
    for _ in range(5):
        spend(context, 10.0)
    assert context.spent[0] == 50.0
    assert context.remaining is None


def test_ledger_entries_say_what_is_protected():
    context = PrivacyContext(Budget(epsilon=6.0))  # add/remove only: the file's 2 x 3 must fit (rt17 F1)
    with context.step(2, "dens", "dp-dpcl"):
        entry = context.spend(epsilon=3.0, mechanism="laplace", sensitivity=Sensitivity(l1=3.0, l2=2.0),
                              relation="add/remove one record", covers="the density vector",
                              not_covered="per-record labels", claimed_epsilon=1.0, details={"n": 10})
    assert entry.step == 2 and entry.step_id == "dens" and entry.component == "dp-dpcl"
    assert entry.sensitivity == {"l1": 3.0, "l2": 2.0}
    assert entry.statement.startswith("the density vector is 3-DP under add/remove one record, by the laplace "
                                      "mechanism with sensitivity L1 3, L2 2.")
    assert "method's own claim is epsilon = 1" in entry.statement
    assert "Not covered: per-record labels." in entry.statement
    record = entry.to_dict()
    json.dumps(record)
    assert record["claimed_epsilon"] == 1.0 and record["details"] == {"n": 10}


def test_guarantees_and_leaks_are_recorded():
    context = PrivacyContext(Budget(allow_leaks=["dc_percent"]))  # a leak is refused unless opted in by name
    context.record("each group has at least 3 records", guarantee="k-anonymity", details={"k": 3})
    with pytest.warns(PrivacyLeakWarning, match="dc_percent"):
        context.record_leak("dc_percent", "taken from the data.", alternative="give an absolute dc")
    kinds = [e.kind for e in context.ledger]
    assert kinds == ["guarantee", "leak"]
    assert context.ledger[1].statement == "dc_percent: taken from the data. Alternative: give an absolute dc"
    assert context.spent == (0.0, 0.0)


def test_spend_rejects_nonsense():
    context = PrivacyContext()
    with pytest.raises(PrivclustError, match="epsilon must be a finite number"):
        spend(context, -1.0)
    with pytest.raises(PrivclustError, match="adds no protection cost"):
        spend(context, 0.0)
    with pytest.raises(PrivclustError, match="seed must be a non-negative integer"):
        PrivacyContext(seed=-3)


def test_streams_are_reproducible_per_step_and_independent_between_steps():
    def draws(seed):
        context = PrivacyContext(seed=seed)
        out = []
        for i in range(3):
            with context.step(i, f"s{i}", "x"):
                out.append(context.rng.random(4))
                out.extend(g.random(2) for g in context.spawn(2))
        return out

    a, b, c = draws(7), draws(7), draws(8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert not np.array_equal(a[0], a[3])  # another step, another stream
    unseeded = [draws(None)[0] for _ in range(2)]
    assert not np.array_equal(*unseeded)


def test_the_seed_is_never_exposed():
    context = PrivacyContext(seed=987654321)
    assert "987654321" not in repr(context)
    assert context.seeded
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(context)
    assert all("987654321" not in repr(v) for k, v in vars(context).items() if "root" not in k)


def test_the_report_says_seeded_and_never_holds_the_seed(frame):
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {c: [-5, 15] for c in frame.columns}}]}
    release = privclust.run(recipe, frame, seed=424242)
    text = json.dumps(release.report())
    assert '"seeded": true' in text
    assert "424242" not in text
    assert "424242" not in release._repr_html_()
    assert not privclust.run(recipe, frame).report()["seeded"]


def test_stash_is_keyed_by_objects():
    context = PrivacyContext()
    key: StashKey[list[int]] = StashKey("my plugin's cache")
    other: StashKey[list[int]] = StashKey("my plugin's cache")
    context.stash[key] = [1]
    assert context.stash[key] == [1]
    assert other not in context.stash
    assert context.stash.get(other) is None
    assert context.stash.setdefault(other, [2]) == [2]
    del context.stash[key]
    assert len(context.stash) == 1


def test_context_resolves_mechanisms_through_its_registry(registry):
    context = PrivacyContext(Budget(epsilon=1.0), seed=1, registry=registry)
    mech = context.mechanism("laplace")
    noisy = mech.release(np.zeros(3), sensitivity=1.0, epsilon=0.5, context=context, relation="r", covers="c")
    assert noisy.shape == (3,) and np.all(noisy != 0)
    assert context.spent[0] == 0.5
    gaussian = context.mechanism({"use": "gaussian"})
    with pytest.raises(BudgetExceededError):
        gaussian.release(np.zeros(3), sensitivity=1.0, epsilon=0.6, delta=1e-6, context=context, relation="r",
                         covers="c")


def test_basic_accountant_describes_its_rule():
    accountant = BasicAccountant(Budget(epsilon=1))
    assert "sequential" in accountant.description and "parallel" in accountant.description
    assert isinstance(accountant, privclust.Accountant)


def test_mixed_relations_compose_under_replace_one():
    context = PrivacyContext(Budget(epsilon=3.0))
    context.spend(epsilon=1.0, mechanism="laplace", sensitivity=1.0, relation="replace-one (bounded)", covers="a")
    assert context.accountant.relation(context.ledger.entries) == "replace-one"
    context.spend(epsilon=0.5, mechanism="laplace", sensitivity=1.0, relation="add/remove one record", covers="b")
    assert context.spent == (2.0, 0.0)  # the add/remove release counts twice under replace-one
    with pytest.raises(BudgetExceededError):
        context.spend(epsilon=0.6, mechanism="laplace", sensitivity=1.0, relation="add/remove", covers="c")
    only_add_remove = PrivacyContext()
    for _ in range(2):
        only_add_remove.spend(epsilon=0.5, mechanism="laplace", sensitivity=1.0, relation="add/remove", covers="x")
    assert only_add_remove.spent == (1.0, 0.0)
    assert only_add_remove.accountant.relation(only_add_remove.ledger.entries) == "add/remove"


def test_a_large_add_remove_epsilon_with_delta_composes_to_an_infinite_delta_not_an_error():
    # (1 + e^800) delta overflows a double: the total says so (inf) instead of raising OverflowError
    context = PrivacyContext()
    context.spend(epsilon=800.0, delta=1e-6, mechanism="gaussian", sensitivity=1.0, relation="add/remove",
                  covers="a")
    spend(context, 1.0)
    assert context.spent == (1601.0, float("inf"))


def test_a_composed_total_that_bounds_nothing_is_no_guarantee():
    from privclust.verify import no_guarantee_reasons

    context = PrivacyContext()
    context.spend(epsilon=20.0, delta=1e-6, mechanism="gaussian", sensitivity=1.0, relation="add/remove",
                  covers="a")
    spend(context, 1.0)
    eps, delta = context.spent
    assert eps == 41.0 and delta > 1  # (1 + e^20) 1e-6 under replace-one
    checks = {"changed_columns": ["x"]}
    reasons = no_guarantee_reasons(context.ledger.entries, [], checks, spent=context.spent)
    assert reasons == [f"the composed delta is {privclust.at_least(delta)}, not below 1 (the bound holds with "
                       "probability at most 1 - delta), which guarantees nothing"]
    assert no_guarantee_reasons(context.ledger.entries, [], checks, spent=(41.0, 0.5)) == []
    assert "the composed epsilon is inf" in no_guarantee_reasons(context.ledger.entries, [], checks,
                                                                 spent=(float("inf"), 0.0))[0]


def test_epsilons_that_add_up_to_infinity_are_no_guarantee_in_the_verdict_and_compare():
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 10, 200), "y": rng.uniform(0, 10, 200), "z": rng.uniform(0, 10, 200)})
    bounds = {c: [0, 10] for c in "xyz"}
    # replace-one laplace plus an add/remove step of 1e308, counted twice under replace-one: 2e308 = inf
    recipe = {"steps": [{"use": "laplace", "epsilon": 1, "columns": ["z"], "bounds": bounds},
                        {"use": "dp-density", "epsilon": 1e308, "columns": ["x", "y"], "bounds": bounds}]}
    release = privclust.run(recipe, data, seed=1)
    assert release.spent[0] == float("inf")
    assert release.verdict.startswith("No differential-privacy guarantee: the composed epsilon is inf")
    table = privclust.compare({"huge": recipe}, data, seed=1)
    assert not table["dp"].iloc[0]
    finite = {"steps": [recipe["steps"][0], {**recipe["steps"][1], "epsilon": 1e300}]}
    # a finite total is no reason; dp-density's label column (each record's own values through the DP map) is the
    # only one (issue 24: its labels are not a DP output, so the file is not DP)
    finite_verdict = privclust.run(finite, data, seed=1).verdict
    assert finite_verdict.startswith("No differential-privacy guarantee: step 1 (dp-density, dp-density) released "
                                     "the label column 'cluster' without differential privacy")
    assert "composed epsilon" not in finite_verdict


def test_unknown_relations_do_not_compose_with_others():
    context = PrivacyContext()
    spend(context, 1.0)
    with pytest.raises(PrivclustError, match="cannot compose releases stated under different neighbouring"):
        context.spend(epsilon=1.0, mechanism="m", sensitivity=1.0, relation="edge-level", covers="c")
    assert len(context.ledger) == 1


def test_can_spend_inside_a_part_counts_that_part_only():
    context = PrivacyContext(Budget(epsilon=1.0))
    with context._in_part("region", "north"):
        spend(context, 0.8)
    with context._in_part("region", "south"):
        assert context.can_spend(0.8) and not context.can_spend(1.1)
    assert not context.can_spend(0.3)  # outside any part it adds to the largest part


@pytest.mark.parametrize("entropy, pool_size", [(0, 4), (7, 4), (2**150 + 12345, 4), ([1, 2, 3, 4, 5, 6], 4),
                                                (7, 8), (2**200, 8)])
@pytest.mark.parametrize("spawn_key", [(), (0,), (5, 9)])
def test_the_seedless_stream_derives_numpys_states_and_children(entropy, pool_size, spawn_key):
    from privclust.accounting import _SeedStream

    seq = np.random.SeedSequence(entropy, spawn_key=spawn_key, pool_size=pool_size)
    stream = _SeedStream.of(seq)
    assert not any(isinstance(v, np.random.SeedSequence) for v in vars(stream).values())
    for dtype in (np.uint32, np.uint64):
        assert np.array_equal(seq.generate_state(5, dtype), stream.generate_state(5, dtype))
    for ours, theirs in zip(stream.spawn(3), seq.spawn(3), strict=True):
        assert np.array_equal(ours.generate_state(4), theirs.generate_state(4))
        assert ours.spawn_key == theirs.spawn_key


def test_a_component_cannot_record_in_the_hosts_name():
    context = PrivacyContext()
    with pytest.raises(PrivclustError, match="names the host"):
        context.record("all verified", guarantee="k-anonymity", component="privclust (host)")
    with pytest.raises(PrivclustError, match="names the host"):
        context.spend(epsilon=1.0, mechanism="laplace", sensitivity=1.0, relation="replace-one", covers="x",
                      component="privclust (host)")
    assert len(context.ledger) == 0


def test_the_compile_time_budget_check_converts_mixed_relations_as_the_accountant_does():
    """idp-kmeans (add/remove, epsilon 1) and laplace (replace-one, epsilon 1)
    under a budget of 2: compile and `privclust check` said OK, and the run
    refused its second step (the accountant counts the first twice under
    replace-one). Steps declare their relation (privacy_relation) and the
    plan converts as the accountant will."""
    recipe = {"privacy": {"epsilon": 2.0}, "steps": [
        {"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1.0, "bounds": {"a": [0, 10], "b": [0, 10]},
         "columns": ["a", "b"]},
        {"use": "laplace", "epsilon": 1.0, "bounds": {"c": [0, 10]}, "columns": ["c"]}]}
    with pytest.raises(privclust.RecipeError, match=r"epsilon = 3 \(steps\[0\] 2 \(add/remove, counted twice under "
                                                    r"replace-one\), steps\[1\] 1\) but the budget is 2"):
        privclust.compile(recipe)
    recipe["privacy"]["epsilon"] = 3.0
    data = pd.DataFrame(np.random.default_rng(0).uniform(0, 10, (50, 3)), columns=["a", "b", "c"])
    assert privclust.run(recipe, data, seed=1).spent[0] <= 3.0  # what compiles runs
    recipe["steps"][1] = {"use": "dp-density", "epsilon": 1.0, "bounds": {"a": [0, 10], "b": [0, 10]},
                          "columns": ["a", "b"]}
    recipe["privacy"]["epsilon"] = 2.0
    # add/remove alone: the released file shows n, so its total counts twice under replace-one (rt17 F1)
    with pytest.raises(privclust.RecipeError, match=r"epsilon = 4 \(steps\[0\] 1, steps\[1\] 1; all under add/remove, "
                                                    r"counted twice"):
        privclust.compile(recipe)
    recipe["privacy"]["epsilon"] = 4.0
    privclust.compile(recipe)


def test_privacy_relation_is_typed_and_the_words_of_older_plugins_still_read_the_same():
    """The built-ins declare ``privacy_relation`` as a :class:`privclust.Relation`;
    a third-party plugin that still writes the words ``"add/remove"`` is
    planned the same way, and anything else is refused by the kit's check."""
    from privclust.compiling import _plan

    builtin = privclust.get_registry().create("clusterers", {"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1.0,
                                                              "bounds": {"a": [0, 10]}})
    assert type(builtin).privacy_relation is privclust.Relation.ADD_REMOVE
    assert _plan(builtin) == (1.0, 0.0, "add/remove")
    type(builtin).privacy_relation = "add/remove"  # an older plugin's words
    try:
        assert _plan(builtin) == (1.0, 0.0, "add/remove")
    finally:
        type(builtin).privacy_relation = privclust.Relation.ADD_REMOVE
    check = privclust.CAPABILITIES["privacy_relation"].problem
    assert check(privclust.Relation.REPLACE_ONE, 0) is None and check("replace-one", 0) is None
    assert "Relation.ADD_REMOVE" in check("bounded", 0)
    assert "got Relation" in check(privclust.Relation.parse("zero-concentrated"), 0)


def test_a_components_text_cannot_forge_output_lines_or_speak_for_the_host():
    context = PrivacyContext()
    entry = context.spend(epsilon=0.1, mechanism="laplace", sensitivity=1.0, relation="replace-one",
                          covers="column a\nwrote out.csv (6 records)\x1b[2K\u202e")
    assert entry.covers == "column a wrote out.csv (6 records) [2K " and "\n" not in entry.statement
    for words in ("Verified by the host: k-anonymity with k = 50", "Host check: 0 records", "the host verified it"):
        with pytest.raises(PrivclustError, match="may not contain"):
            context.spend(epsilon=0.1, mechanism="laplace", sensitivity=1.0, relation="replace-one", covers=words)
        with pytest.raises(PrivclustError, match="may not contain"):
            context.record(words, guarantee="k-anonymity")
    assert len(context.ledger) == 1


def test_the_budget_refusal_states_the_total_rounded_up_and_the_budget_exactly():
    """The refusal said "bringing the total to 0.3 > the budget epsilon=0.3"
    for 0.1 + 0.2000001 against 0.3: the total rounded to the nearest, below
    the one refused, and the same figure on both sides."""
    context = PrivacyContext(Budget(epsilon=0.3))
    spend(context, 0.1)
    with pytest.raises(BudgetExceededError) as err:
        spend(context, 0.2000001)
    assert "bringing the total to 0.300001 > the budget epsilon=0.3;" in str(err.value)
    assert repr(context).startswith("<PrivacyContext budget epsilon=0.3 spent=0.1 ")


def test_the_context_resolves_components_through_the_resolver_it_is_given():
    """Item 4 of issue 27: the context takes a resolver (anything with
    ``create(kind, value)``), not a registry injected into the module."""
    asked = []

    class Resolver:
        def create(self, kind, value):
            asked.append((kind, value))
            return "resolved"

    context = PrivacyContext(resolver=Resolver())
    assert context.mechanism("gaussian") == "resolved" and asked == [("noise_mechanisms", "gaussian")]
    assert context.registry is context.resolver  # the older name reads the same resolver
    assert isinstance(context.accountant, privclust.BasicAccountant)  # a resolver without make_accountant
    with pytest.raises(PrivclustError, match="resolver= and registry= are the same parameter"):
        PrivacyContext(resolver=Resolver(), registry=Resolver())


def test_a_context_without_a_resolver_uses_the_session_registry_and_no_module_global():
    from privclust import accounting
    from privclust import context as context_module

    assert not hasattr(accounting, "set_default_registry") and not hasattr(context_module, "_registry_provider")
    context = PrivacyContext(seed=1)
    assert context.resolver is None  # looked up on first use, not at import time
    assert type(context.mechanism("laplace")).name == "laplace"
    assert context.resolver is privclust.get_registry()


def test_accounting_still_exports_every_name_it_did_before_the_split():
    from privclust import accountants, accounting, context, ledger, seeds

    for name in ("Accountant", "BasicAccountant", "Budget", "ContextView", "Ledger", "LedgerEntry", "HOST",
                 "NothingProtectedWarning", "Origin", "PrivacyContext", "PrivacyLeakWarning", "RecordProgress",
                 "Stash", "StashKey", "ThrottledProgress", "at_least", "at_most", "ADD_REMOVE", "REPLACE_ONE",
                 "relation_kind", "looks_like_host", "component_text", "accountant_description", "accountant_name",
                 "privclust_make_accountant", "STATUSES"):
        assert hasattr(accounting, name), name
    # the private names other modules imported, kept as aliases of their new public names for one release
    assert accounting._exact is ledger.exact and accounting._jsonable is ledger.jsonable
    assert accounting._group_delta is accountants.group_delta and accounting._SeedStream is seeds.SeedStream
    assert accounting._not_the_host is ledger.not_the_host and accounting._dp_statement is ledger.dp_statement
    assert accounting.PrivacyContext is context.PrivacyContext is privclust.PrivacyContext
    assert privclust.Sensitivity is ledger.Sensitivity  # defined with the ledger, re-exported by components


def test_the_budget_is_not_overspent_beyond_the_rounding_of_the_sum():
    """Red-team audit: a relative slack of 1e-9 let steps of 1 and 9e-10 run under a budget of 1; the slack is now a
    few units in the last place per composed cost, which still lets 0.1 + 0.2 run under 0.3."""
    frame = pd.DataFrame({"x": np.linspace(0, 100, 20), "y": np.linspace(0, 100, 20)})

    def recipe(budget: float, first: float, second: float) -> dict:
        return {"privacy": {"epsilon": budget},
                "steps": [{"use": "laplace", "columns": ["x"], "epsilon": first, "bounds": {"x": [0, 100]}},
                          {"use": "laplace", "columns": ["y"], "epsilon": second, "bounds": {"y": [0, 100]}}]}

    with pytest.raises(privclust.RecipeError, match="privacy.epsilon"):
        privclust.compile(recipe(1.0, 1.0, 9e-10))
    context = privclust.PrivacyContext(privclust.Budget(epsilon=1.0), seed=1)
    context.spend(epsilon=1.0, mechanism="laplace", sensitivity=1.0, relation=privclust.Relation.REPLACE_ONE,
                  covers="x")
    with pytest.raises(privclust.BudgetExceededError):
        context.spend(epsilon=9e-10, mechanism="laplace", sensitivity=1.0, relation=privclust.Relation.REPLACE_ONE,
                      covers="y")
    release = privclust.run(recipe(0.3, 0.1, 0.2), frame, seed=1)
    assert release.spent[0] == pytest.approx(0.3)


@pytest.mark.parametrize("total", [(float("nan"), 0.0), (-1.0, 0.0), (1.0, -0.5), (1.0, float("nan"))])
def test_an_accountants_impossible_total_is_no_guarantee(total):
    """Red-team audit: a plugin accountant's epsilon = -1 (or NaN, or a negative delta) was printed as the
    guarantee, "epsilon-differentially private (epsilon = -1, delta = 0)"."""
    import attrs

    stated = total

    @attrs.frozen
    class Weird:
        budget: object
        description: str = "weird"

        def total(self, entries):
            return stated if any(e.kind == "dp" for e in entries) else (0.0, 0.0)

        def check(self, entries, new):
            return None

    class Plugin:
        @privclust.hookimpl
        def privclust_make_accountant(budget):
            return Weird(budget)

    frame = pd.DataFrame({"a": np.linspace(0, 100, 50)})
    release = privclust.run({"privacy": {"epsilon": 2.0},
                             "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 100]}}]},
                            frame, seed=1, registry=privclust.Registry(plugins=[Plugin]))
    assert release.verdict.startswith("No differential-privacy guarantee"), release.verdict


@pytest.mark.parametrize("sensitivity", [-1.0, float("nan"), float("inf")])
def test_spend_refuses_a_sensitivity_that_is_not_a_finite_number_at_least_0(sensitivity):
    """Red-team audit: "by the laplace mechanism with sensitivity nan" stood in the ledger under a DP verdict."""
    context = privclust.PrivacyContext(privclust.Budget(epsilon=1.0), seed=1)
    with pytest.raises(privclust.ParameterError, match="sensitivity must be a finite number"):
        context.spend(epsilon=0.1, mechanism="laplace", sensitivity=sensitivity,
                      relation=privclust.Relation.REPLACE_ONE, covers="x")
    assert not context.ledger.entries
