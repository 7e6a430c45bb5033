"""The conformance kit catches each kind of misbehaving component."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.testing as pt
from privclust import Masked, Partition, param


def masked(data, values):
    return Masked(data=pd.DataFrame(values, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class Good:
    """Spends through a mechanism, then uses its noise."""

    name: ClassVar[str] = "good"
    epsilon: float = param(float, default=1.0, gt=0)

    def mask(self, data, context):
        # One record's row moves by at most 10 per column in L1 once clipped to the public bounds [0, 10].
        mech = context.mechanism("laplace")
        values = mech.release(np.clip(data.to_numpy(), 0, 10), sensitivity=10.0 * data.shape[1],
                              epsilon=self.epsilon, context=context, relation="replace-one", covers="c")
        return masked(data, values)


@attrs.frozen(kw_only=True)
class Understated:
    """Claims sensitivity 1 for unclipped values that move by about 10."""

    name: ClassVar[str] = "understated"
    epsilon: float = param(float, default=1.0, gt=0)

    def mask(self, data, context):
        mech = context.mechanism("laplace")
        values = mech.release(data.to_numpy(), sensitivity=1.0, epsilon=self.epsilon, context=context,
                              relation="replace-one", covers="c")
        return masked(data, values)


@attrs.frozen(kw_only=True)
class Mutates:
    name: ClassVar[str] = "mutates"

    def mask(self, data, context):
        data.iloc[0, 0] = 1e9
        return Masked(data=data.copy())


@attrs.frozen(kw_only=True)
class GlobalRandom:
    name: ClassVar[str] = "global-random"

    def fit(self, data, context):
        return Partition(labels=np.random.default_rng().integers(0, 2, len(data)))


@attrs.frozen(kw_only=True)
class DrawsFirst:
    name: ClassVar[str] = "draws-first"

    def mask(self, data, context):
        noise = context.rng.normal(size=data.shape)
        context.spend(epsilon=1.0, mechanism="gauss", sensitivity=1.0, relation="r", covers="c")
        return masked(data, data.to_numpy() + noise)


@attrs.frozen(kw_only=True)
class IgnoresBudget:
    name: ClassVar[str] = "ignores-budget"

    def mask(self, data, context):
        try:
            context.spend(epsilon=1.0, mechanism="x", sensitivity=1.0, relation="r", covers="c")
        except Exception:  # swallows the refusal
            pass
        return masked(data, data.to_numpy() + context.rng.laplace(size=data.shape))


@attrs.define(kw_only=True)
class NotFrozen:
    name: ClassVar[str] = "not-frozen"
    k: int = param(int, default=2)

    def mask(self, data, context):
        return Masked(data=data.copy())


@attrs.frozen(kw_only=True)
class DerivedField:
    name: ClassVar[str] = "derived"
    k: int = param(int, default=2)
    cache: int = attrs.field(init=False, default=0)

    def mask(self, data, context):
        return Masked(data=data.copy())


def test_a_good_component_passes_every_check():
    pt.check_component(Good())
    assert [name for name, _ in pt.component_checks(Good())] == list(pt.CHECKS)


@pytest.mark.parametrize(
    ("component", "check", "message"),
    [
        (Mutates(), "never_mutates_input", "was modified"),
        (GlobalRandom(), "deterministic_under_seed", "same seed differ"),
        (DrawsFirst(), "spends_before_release", "before its first context.spend"),
        (IgnoresBudget(), "refuses_exhausted_budget", "exhausted budget"),
        (NotFrozen(), "params_round_trip", "must be frozen"),
        (Understated(), "privacy_audit", "lower bound on epsilon exceeds"),
    ],
)
def test_each_misbehaviour_is_caught(component, check, message):
    checks = dict(pt.component_checks(component))
    with pytest.raises(AssertionError, match=message):
        checks[check](component)


def test_kind_is_inferred_and_parametrize_builds_ids():
    assert pt.kind_of(Good()) == "maskers" and pt.kind_of(GlobalRandom()) == "clusterers"
    mark = pt.parametrize_components(Good())
    ids = [p.id for p in mark.args[1]]
    assert ids[0] == "good-params_round_trip" and len(ids) == len(pt.CHECKS)


def test_derived_state_that_is_not_init_is_fine():
    pt.check_component(DerivedField(k=3))


@attrs.frozen(kw_only=True)
class ZeroesFirstColumn:
    """Sets the first column to 0 in place: idempotent, so a check handed a
    frame an earlier check let it modify would see no change."""

    name: ClassVar[str] = "zeroes"

    def mask(self, data, context):
        data.iloc[:, 0] = 0.0
        return Masked(data=data.copy())


def test_the_mutation_check_cannot_be_defeated_by_an_earlier_check():
    frame = pt.example_frame()
    original = frame.copy(deep=True)
    checks = dict(pt.component_checks(ZeroesFirstColumn(), frame))
    checks["deterministic_under_seed"](ZeroesFirstColumn())  # runs the component on its own copy
    assert frame.equals(original)  # the caller's frame is never handed to the component
    with pytest.raises(AssertionError, match="was modified"):
        checks["never_mutates_input"](ZeroesFirstColumn())
    with pytest.raises(AssertionError, match="was modified"):
        pt.check_component(ZeroesFirstColumn(), frame)


@attrs.frozen(kw_only=True)
class SeesTheRelease:
    """Fails unless the kit hands it a release that differs from the original."""

    name: ClassVar[str] = "sees-the-release"

    def evaluate(self, inputs):
        assert inputs.original.shape == inputs.protected.shape
        assert not inputs.original.equals(inputs.protected), "the kit handed the original as the release"
        return {"mean_shift": float((inputs.protected - inputs.original).abs().to_numpy().mean())}


def test_evaluators_are_run_on_a_release_that_differs_from_the_original():
    pt.check_component(SeesTheRelease())


def test_ids_are_the_documented_ones_even_for_repeated_components():
    mark = pt.parametrize_components(Good(), Good(epsilon=2.0), DerivedField(k=3))
    ids = [p.id for p in mark.args[1]]
    n = len(pt.CHECKS)
    assert ids[:n] == [f"good-{name}" for name in pt.CHECKS]
    assert ids[n:2 * n] == [f"good.2-{name}" for name in pt.CHECKS]
    assert ids[2 * n] == "derived-params_round_trip"
    assert len(set(ids)) == len(ids)


@attrs.frozen(kw_only=True)
class BadCapabilities:
    name: ClassVar[str] = "bad-capabilities"
    uses_constraints: ClassVar[str] = "no"
    renamed_params: ClassVar[list] = ["c"]

    def planned_cost(self):
        return 1.0

    def min_record(self, n_columns):  # a near miss: the host would never call it
        return 10

    def size_problems(self, n_records, n_columns):  # a text, not a list of texts
        return "too few"

    def mask(self, data, context):
        return Masked(data=data.copy())


@attrs.frozen(kw_only=True)
class GoodCapabilities:
    name: ClassVar[str] = "good-capabilities"
    uses_constraints: ClassVar[bool] = False
    leak_names: ClassVar[tuple[str, ...]] = ("mine",)

    def planned_cost(self):
        return None

    def min_records(self, n_columns):
        return 2 * n_columns

    def size_problems(self, n_records, n_columns):
        return [f"give at least {2 * n_columns} records"] if n_records < 2 * n_columns else []

    def step_problems(self):
        return []

    def mask(self, data, context):
        return Masked(data=data.copy())


def test_optional_capabilities_are_declared_in_one_place_and_checked():
    import privclust

    assert set(privclust.CAPABILITIES) == {"planned_cost", "privacy_relation", "step_problems", "min_records",
                                           "uses_constraints", "key_masker", "dp_output",
                                           "data_leaks", "leak_names", "disclosive_metrics", "missing_values",
                                           "renamed_params", "round_integers", "joined_with", "magnitudes",
                                           "linear_form", "size_problems", "data_problems",
                                           "metric_descriptions", "evaluated_on"}
    assert privclust.capability(Good(), "uses_constraints") is True  # the declared default
    assert privclust.capability(GoodCapabilities(), "min_records")(3) == 6
    assert privclust.capability(Good(), "planned_cost") is None
    pt.check_component(GoodCapabilities())
    checks = dict(pt.component_checks(BadCapabilities()))
    with pytest.raises(AssertionError) as err:
        checks["optional_capabilities"](BadCapabilities())
    text = str(err.value)
    assert "uses_constraints must be True or False" in text
    assert "planned_cost() must return None or (epsilon, delta)" in text
    assert "size_problems() must be a list of texts" in text
    assert "'min_record' looks like the optional member 'min_records'" in text
    assert "renamed_params must be a table {old name: new name}" in text


@attrs.frozen(kw_only=True)
class HidesBehindAPool:
    """A large, honest release of data-independent noise first, then the
    understated one: the auditor must still see (and catch) the second."""

    name: ClassVar[str] = "hides-behind-a-pool"

    def mask(self, data, context):
        mech = context.mechanism("laplace")
        mech.release(np.zeros(2 * pt.AUDIT_VALUES), sensitivity=1.0, epsilon=0.5, context=context,
                     relation="replace-one", covers="a pool of noise")
        values = mech.release(data.to_numpy(), sensitivity=1.0, epsilon=0.5, context=context,
                              relation="replace-one", covers="c")
        return masked(data, values)


@attrs.frozen(kw_only=True)
class HonestBehindAPool(HidesBehindAPool):
    name: ClassVar[str] = "honest-behind-a-pool"

    def mask(self, data, context):
        mech = context.mechanism("laplace")
        mech.release(np.zeros(2 * pt.AUDIT_VALUES), sensitivity=1.0, epsilon=0.5, context=context,
                     relation="replace-one", covers="a pool of noise")
        values = mech.release(np.clip(data.to_numpy(), 0, 10), sensitivity=10.0 * data.shape[1], epsilon=0.5,
                              context=context, relation="replace-one", covers="c")
        return masked(data, values)


def test_the_audit_sees_a_release_behind_a_large_one():
    checks = dict(pt.component_checks(HidesBehindAPool()))
    with pytest.raises(AssertionError, match="lower bound on epsilon exceeds"):
        checks["privacy_audit"](HidesBehindAPool())


def test_a_partly_unseen_audit_warns_instead_of_passing_plainly():
    checks = dict(pt.component_checks(HonestBehindAPool()))
    with pytest.warns(UserWarning, match=r"INCONCLUSIVE for released values it did not see: release 1 of each run "
                                         r"\(a pool of noise\)"):
        checks["privacy_audit"](HonestBehindAPool())


def test_the_magnitudes_capability_of_bound_rules_is_checked():
    class Bad:
        columns = ("a", "b")
        rules = ("a <= b",)

        def project(self, points, *, scale=None):
            return points

        def violations(self, points):
            return np.zeros((len(points), 1))

        def magnitudes(self, points):
            return -np.ones((len(points), 2))  # one column too many, and negative

    problem = privclust.CAPABILITIES["magnitudes"].check(Bad())
    assert problem is not None and "shape (rows, rules)" in problem
