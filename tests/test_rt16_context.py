"""The privacy context against third-party plugins (red-team audit rt16).

F1: ``context.ledger`` and ``context.accountant`` were plain writable
attributes, and the runner read them back after the steps: a masker that
assigned ``context.ledger`` a ledger of its own made the verdict state
epsilon 0.01 for a laplace step of 5 (and drop the host's process entry), and
one that assigned ``context.accountant`` an accountant without a budget spent
50 against a budget of 1. The run's state is now read-only to components, the
runner keeps its own references and refuses a run whose state was replaced,
and checks the total against the budget once more after the steps.

F4: randomness drawn through ``context.spawn_seeds()`` inside a step did not
count as a draw: no seeded-run sentence, no ``release.random_steps``, no
scikit-learn seed-reuse warning, and the kit's ``spends_before_release`` /
``refuses_exhausted_budget`` passed a DP masker that drew its noise that way
before spending.

m1: a third-party ``laplace`` nested in the built-in ``idp-kmeans`` wrote DP
statements the verdict credited to "step 1 (idp-kmeans)" alone.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.testing as pt
from privclust import Budget, Ledger, Masked, PrivacyContext, PrivclustError, Registry, hookimpl, param
from privclust.accountants import BasicAccountant
from privclust.errors import BudgetExceededError

BOUNDS = {"a": [0, 10], "b": [0, 10]}


def frame() -> pd.DataFrame:
    return pd.DataFrame({"a": np.arange(30.0) % 10, "b": np.arange(30.0) % 7})


@attrs.frozen(kw_only=True)
class Meddler:
    """A masker that tries one way of rewriting the run's state, then rounds."""

    name: ClassVar[str] = "meddler"
    uses_constraints: ClassVar[bool] = False
    how: str = param(str, default="ledger", doc="what it tries")
    epsilon: float = param(float, default=0.0, doc="what it then spends")

    def planned_cost(self) -> tuple[float, float]:
        return (0.5, 0.0) if self.epsilon else (0.0, 0.0)

    def mask(self, data: pd.DataFrame, context: Any) -> Masked:
        if self.how == "ledger":  # rt16 t7: its own ledger, every DP entry at epsilon 0.01, no process entry
            entries = [attrs.evolve(e, epsilon=0.01) if e.kind == "dp" else e
                       for e in context.ledger.entries if e.kind != "process"]
            context.ledger = Ledger(entries)
        elif self.how == "accountant":  # rt16 t6
            context.accountant = BasicAccountant(Budget())
        elif self.how == "budget":
            context.budget = Budget()
        elif self.how == "leaks":  # a budget that opts in to every leak
            context.budget = Budget(allow_leaks=["bounds"])
        elif self.how == "accountant-budget":
            context.accountant.budget = Budget()
        elif self.how == "seeded":
            context.seeded = False
        elif self.how == "stash":
            context.stash = privclust.accounting.Stash()
        elif self.how == "resolver":
            context.resolver = Registry()
        elif self.how == "entries":
            context.ledger.entries = ()
        elif self.how == "entries-list":
            context.ledger.entries.clear()  # a tuple: there is no list to clear
        elif self.how == "del":
            del context.ledger
        elif self.how == "private-ledger":  # a private name: the step's check and the runner still refuse it
            context._ledger = Ledger()
        elif self.how == "private-append":  # around the accountant: the runner's own total refuses it
            entry = context._entry("dp", "forged", epsilon=50.0, delta=0.0, mechanism="laplace", covers="a, b")
            context._ledger._append(entry)
        elif self.how == "details":  # the entries are frozen, their details dicts were not
            for e in context.ledger.entries:
                e.details.clear()
                e.details["forged"] = True
        if self.epsilon:
            context.spend(epsilon=self.epsilon, mechanism="laplace", sensitivity=1.0, relation="replace-one",
                          covers="every value")
        return Masked(data=data.round(-1))


class MeddlerPlugin:
    @hookimpl
    def privclust_register_maskers(register):
        register(Meddler)


def run_meddler(how: str, *, epsilon: float = 0.0, budget: float = 5.0) -> privclust.Release:
    return privclust.run({"privacy": {"epsilon": budget}, "steps": [
        {"use": "laplace", "epsilon": 0.5 if epsilon else 5.0, "columns": ["a", "b"], "bounds": BOUNDS},
        {"use": "meddler", "how": how, "epsilon": epsilon, "columns": ["a", "b"]}]},
        frame(), registry=Registry(plugins=[MeddlerPlugin]))


# --- F1 ---------------------------------------------------------------------------------------------------------


def test_the_honest_twin_states_what_laplace_spent():
    release = run_meddler("nothing")
    assert release.spent == (5.0, 0.0)
    assert "ε = 5" in release.verdict
    assert [e.kind for e in release.ledger.entries].count("process") == 2


def test_a_component_cannot_change_an_entrys_details():
    """The helper that fixed F1 found this path open: an entry is frozen, but a component could rewrite the dict of
    its details in place (the parameters of the host's process entry, shown in the JSON report)."""
    def kept(release):
        return [{k: v for k, v in e.details.items() if k != "elapsed_seconds"} for e in release.ledger.entries[:2]]

    honest, meddled = run_meddler("nothing"), run_meddler("details")
    assert kept(meddled) == kept(honest)
    assert not any("forged" in e.details for e in meddled.ledger.entries)
    process = next(e for e in meddled.ledger.entries if e.kind == "process" and e.step == 0)
    assert process.details["parameters"]["epsilon"] == 5.0


def test_a_component_cannot_replace_the_ledger():
    # before: the run succeeded, its verdict read "ε = 0.01" and step 0's process entry was gone
    with pytest.raises(PrivclustError, match=r"step 1 'meddler' \(meddler\): context\.ledger is the run's own and "
                                             r"cannot be replaced; record through context\.spend"):
        run_meddler("ledger")


@pytest.mark.parametrize(("how", "name", "fix"), [
    ("accountant", "accountant", "privclust_make_accountant"),
    ("budget", "budget", r"\[privacy\]"),
    ("leaks", "budget", r"\[privacy\]"),
    ("seeded", "seeded", "seed="),
    ("stash", "stash", r"context\.stash\[key\] = value"),
    ("resolver", "resolver", "resolver="),
])
def test_a_component_cannot_replace_the_runs_state(how, name, fix):
    # before: context.accountant = BasicAccountant(Budget()) let a step spend 50 against a budget of 1, the report
    # reading "budget 1, spent 50"; context.budget = Budget(allow_leaks=...) opted in to leaks the recipe refused
    with pytest.raises(PrivclustError, match=rf"step 1 'meddler' \(meddler\): context\.{name} is the run's own and "
                                             rf"cannot be replaced; .*{fix}"):
        run_meddler(how, epsilon=50.0, budget=1.0)


def test_the_swapped_accountant_over_spend_of_rt16_is_refused():
    with pytest.raises(PrivclustError, match="context.accountant"):
        run_meddler("accountant", epsilon=50.0, budget=1.0)
    with pytest.raises(BudgetExceededError, match="would spend epsilon=50"):  # the honest twin: refused as ever
        run_meddler("nothing", epsilon=50.0, budget=1.0)


@pytest.mark.parametrize("how", ["entries", "entries-list", "del", "accountant-budget"])
def test_the_ledgers_entries_and_the_accountants_budget_are_read_only(how):
    with pytest.raises((AttributeError, attrs.exceptions.FrozenInstanceError)):
        run_meddler(how)


def test_a_ledger_replaced_through_a_private_name_is_refused_after_the_step():
    with pytest.raises(PrivclustError, match=r"step 1 'meddler' \(meddler\) replaced the run's ledger .* the run is "
                                             "refused and nothing is released"):
        run_meddler("private-ledger")


def test_the_runner_checks_the_total_against_the_budget_after_the_steps():
    # an entry appended around the accountant (a private name): every spend was checked, the total is not
    with pytest.raises(BudgetExceededError, match=r"the run's ledger spends epsilon 55 > the budget epsilon=5 "
                                                  r"\(the releases of step 0 \(laplace\), step 1 \(meddler\)\)"):
        run_meddler("private-append")


def test_the_context_outside_a_run_is_read_only_too():
    context = PrivacyContext(Budget(epsilon=1.0))
    for name in ("ledger", "accountant", "budget", "seeded", "stash", "resolver"):
        with pytest.raises(PrivclustError, match=rf"^context\.{name} is the run's own"):
            setattr(context, name, None)
    assert context.budget == Budget(epsilon=1.0) and len(context.ledger) == 0


# --- F4 ---------------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SeedJitter:
    """Random jitter drawn from a generator made from the run's seeds."""

    name: ClassVar[str] = "seed-jitter"

    def mask(self, data: pd.DataFrame, context: Any) -> Masked:
        rng = np.random.default_rng(context.spawn_seeds(1)[0])
        return Masked(data=data + rng.normal(0, 1, data.shape))


@attrs.frozen(kw_only=True)
class DrawFirst:
    """A DP masker that draws its noise through spawn_seeds before it spends."""

    name: ClassVar[str] = "draw-first"
    uses_constraints: ClassVar[bool] = False
    epsilon: float = param(float, default=1.0, gt=0, doc="epsilon")

    def planned_cost(self) -> tuple[float, float]:
        return (self.epsilon, 0.0)

    def mask(self, data: pd.DataFrame, context: Any) -> Masked:
        noise = np.random.default_rng(context.spawn_seeds(1)[0]).laplace(0, 10.0 / self.epsilon, data.shape)
        out = data.clip(0, 10) + noise
        context.spend(epsilon=self.epsilon, mechanism="laplace", sensitivity=10.0, relation="replace-one",
                      covers="every value")
        return Masked(data=out)


class SeedPlugin:
    @hookimpl
    def privclust_register_maskers(register):
        register(SeedJitter)
        register(DrawFirst)


def test_a_step_drawing_through_spawn_seeds_is_a_random_step():
    # before: random_steps was () and the verdict had no seeded sentence
    release = privclust.run({"steps": [{"use": "seed-jitter"}]}, frame(), registry=Registry(plugins=[SeedPlugin]),
                            seed=1)
    assert release.random_steps == (0,)
    assert "The run was seeded: whoever has the seed can redraw the random choices of step 0 (seed-jitter)" \
        in release.verdict


def test_spawn_seeds_outside_a_step_marks_no_step():
    context = PrivacyContext(seed=3)
    context.spawn_seeds(2)
    with context.step(0, "s", "x"):
        pass
    with context.step(1, "t", "y"):
        context.spawn_seeds(1)
    assert context.random_steps == (1,)


@pytest.mark.parametrize("check", ["spends_before_release", "refuses_exhausted_budget"])
def test_the_kit_sees_a_draw_through_spawn_seeds_before_the_spend(check):
    # before: both checks passed the masker
    with pytest.raises(AssertionError, match="draw"):
        pt.CHECKS[check](DrawFirst(), frame(), "maskers", Registry(plugins=[SeedPlugin]))


def test_the_sklearn_seed_reuse_warning_fires_for_spawn_seeds():
    from privclust import sklearn as pcs

    privclust.register(SeedPlugin)
    est = pcs.masker("seed-jitter", random_state=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit_transform(frame().to_numpy())
        est.fit_transform(frame().to_numpy())
    assert any("from the same stream as an earlier run" in str(w.message) for w in caught)


# --- m1 ---------------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SilentLaplace:
    """A third-party 'laplace' that records the built-in's spend but adds (almost) no noise (rt16's liars.py)."""

    name: ClassVar[str] = "laplace"
    uses_constraints: ClassVar[bool] = False
    epsilon: float | None = param(float, default=None, gt=0, doc="budget")
    bounds: Any = param(dict, default=None, doc="bounds")

    def planned_cost(self) -> tuple[float, float] | None:
        return None if self.epsilon is None else (self.epsilon, 0.0)

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, not_covered="",
                **ledger: Any):
        l1 = privclust.Sensitivity.of(sensitivity).l1
        context.spend(epsilon=epsilon, mechanism="laplace", sensitivity=l1, relation=relation, covers=covers,
                      not_covered=not_covered, **ledger)
        return np.asarray(values, dtype=float) + 1e-9

    def perturb(self, data: pd.DataFrame, context: Any) -> Masked:
        out = self.release(data.to_numpy(float), sensitivity=1.0, epsilon=self.epsilon, context=context,
                           relation="replace-one", covers="every value")
        return Masked(data=pd.DataFrame(out, index=data.index, columns=data.columns))


class SilentNoisePlugin:
    @hookimpl
    def privclust_register_noise_mechanisms(register):
        register(SilentLaplace, replaces="noise:laplace")


def test_the_verdict_names_a_third_party_mechanism_nested_in_a_built_in_step():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.uniform(0, 100, 200), "b": rng.uniform(0, 100, 200)})
    bounds = {"a": [0, 100], "b": [0, 100]}
    release = privclust.run({"privacy": {"epsilon": 3.0}, "steps": [
        {"use": "noise:laplace", "epsilon": 1.0, "bounds": bounds},
        {"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1.0, "bounds": bounds}]},
        df, registry=Registry(plugins=[SilentNoisePlugin]), seed=3)
    plugin = f"{__name__}.SilentNoisePlugin"
    # before: "the claims of step 0 (laplace), step 1 (idp-kmeans): ..."
    assert (f"These DP statements are the claims of step 0 (laplace), step 1 (idp-kmeans, whose noise is laplace "
            f"from plugin {plugin}): ") in release.verdict
    assert release.report()["steps"][1]["nested"]["noise"]["plugin"] == plugin


def test_the_verdict_names_the_plugin_of_a_third_party_step():
    release = privclust.run({"privacy": {"epsilon": 5.0}, "steps": [
        {"use": "laplace", "epsilon": 1.0, "columns": ["a", "b"], "bounds": BOUNDS},
        {"use": "draw-first", "epsilon": 1.0, "columns": ["a", "b"]}]},
        frame(), registry=Registry(plugins=[SeedPlugin]))
    assert (f"the claims of step 0 (laplace), step 1 (draw-first from plugin {__name__}.SeedPlugin): "
            in release.verdict)
