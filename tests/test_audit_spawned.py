"""The auditor and steps that draw through ``context.spawn_seeds``.

A step may take seeds with ``context.spawn_seeds(n)`` and make its own
generators from them (``numpy.random.default_rng(seed)``). The auditor's
context recorded the draws of ``context.rng`` and ``context.spawn`` only, so
such a step's own ``laplace`` draws escaped the float-support and lattice
events: a masker drawing textbook floating-point Laplace noise, or half the
noise it charges for, PASSED the audit through ``spawn_seeds`` while the same
masker drawing from ``context.rng`` FAILED. Now the seeds the auditor's
context hands out are also the generators ``default_rng`` makes from them
(same bit stream, draws recorded); where a step's draws leave the auditor's
sight (the seed's state read, the seed pickled for another process) the
audit says so and is INCONCLUSIVE, not PASSED.
"""

from __future__ import annotations

import pickle
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.testing as pt
from privclust import Masked, PrivacyContext, Registry, audit, hookimpl, param, sampling

BOUNDS = {"a": [0.0, 10.0], "b": [0.0, 10.0]}
#: The lattice the exact steps put their values on (0 and 10 lie on it).
GAMMA = 2.0**-10


def frame() -> pd.DataFrame:
    return pt.example_frame(n=30, d=2, seed=2)


@attrs.frozen(kw_only=True)
class _SpawnStep:
    """A third-party masker: clipped values plus Laplace noise of scale factor x L1 range / epsilon, charged
    through the ledger as a laplace release, its noise drawn from generators made from context.spawn_seeds."""

    uses_constraints: ClassVar[bool] = False
    epsilon: float = param(float, default=1.0, gt=0, doc="epsilon")
    factor: float = param(float, default=1.0, ge=0, doc="the noise scale's share of the honest one")
    bounds: dict = attrs.field(factory=lambda: dict(BOUNDS))

    def planned_cost(self) -> tuple[float, float]:
        return (self.epsilon, 0.0)

    def mask(self, data: pd.DataFrame, context: Any) -> Masked:
        x = data.clip(0.0, 10.0).to_numpy(dtype=float)
        sensitivity = 10.0 * data.shape[1]
        context.spend(epsilon=self.epsilon, mechanism="laplace", sensitivity=sensitivity, relation="replace-one",
                      covers="every released value")
        out = self.noisy(x, self.factor * sensitivity / self.epsilon, context.spawn_seeds(1)[0])
        return Masked(data=pd.DataFrame(out, index=data.index, columns=data.columns))

    def noisy(self, x: np.ndarray, scale: float, seed: Any) -> np.ndarray:
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class SpawnFloat(_SpawnStep):
    """numpy's textbook floating-point sampler on a generator made from the seed (the documented use)."""

    name: ClassVar[str] = "spawn-float"

    def noisy(self, x, scale, seed):
        return x + np.random.default_rng(seed).laplace(0.0, scale, x.shape) if scale else x.copy()


@attrs.frozen(kw_only=True)
class SpawnExact(_SpawnStep):
    """Honest when factor is 1: the values on the lattice GAMMA plus exact discrete Laplace noise in lattice
    units (privclust.sampling), drawn from a generator made from the seed."""

    name: ClassVar[str] = "spawn-exact"

    def noisy(self, x, scale, seed):
        units = np.round(x / GAMMA)
        noise = sampling.discrete_laplace(np.random.default_rng(seed), scale / GAMMA, x.shape)
        return (units + noise) * GAMMA


@attrs.frozen(kw_only=True)
class SpawnContext(_SpawnStep):
    """Its noise from a context of its own seeded with the seed (the other documented use)."""

    name: ClassVar[str] = "spawn-context"

    def noisy(self, x, scale, seed):
        return x + PrivacyContext(seed=seed).rng.laplace(0.0, scale, x.shape)


@attrs.frozen(kw_only=True)
class SpawnBitGenerator(_SpawnStep):
    """Builds a bit generator of its own from the seed: its draws are out of the auditor's sight."""

    name: ClassVar[str] = "spawn-bit-generator"

    def noisy(self, x, scale, seed):
        return x + np.random.Generator(np.random.PCG64(seed)).laplace(0.0, scale, x.shape)


@attrs.frozen(kw_only=True)
class SpawnPickled(_SpawnStep):
    """Hands its seed on as another process would get it (pickled): its draws are out of the auditor's sight."""

    name: ClassVar[str] = "spawn-pickled"

    def noisy(self, x, scale, seed):
        return x + np.random.default_rng(pickle.loads(pickle.dumps(seed))).laplace(0.0, scale, x.shape)


STEPS = (SpawnFloat, SpawnExact, SpawnContext, SpawnBitGenerator, SpawnPickled)


class SpawnPlugin:
    plugin_name = "spawn-steps"

    @hookimpl
    def privclust_register_maskers(self, register):
        for cls in STEPS:
            register(cls)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(plugins=[SpawnPlugin()], entry_points=[], use_env=False)


# --- (a) an honest step passes -------------------------------------------------------------------------------


def test_an_honest_step_drawing_exact_noise_through_spawn_seeds_passes(registry):
    result = pt.audit_component(SpawnExact(), frame(), seed=0, registry=registry)
    assert result.verdict == "PASSED" and not result.unseen, str(result)
    pt.assert_audit_passes(result)


# --- (b) too little noise, or none, fails -----------------------------------------------------------------------


@pytest.mark.parametrize("step", [SpawnFloat(factor=0.01), SpawnFloat(factor=0.0), SpawnExact(factor=0.01)],
                         ids=["float-scale-over-100", "no-noise", "exact-scale-over-100"])
def test_far_too_little_noise_through_spawn_seeds_fails(registry, step):
    result = pt.audit_component(step, frame(), seed=0, registry=registry)
    assert result.verdict == "FAILED" and result.epsilon_lower_bound > 1.0, str(result)


@pytest.mark.parametrize("factor", [1.0, 0.5])
def test_own_float_laplace_draws_through_spawn_seeds_are_recorded(registry, factor):
    """Before: PASSED (bounds 0.39 and 0.44 against 1) while the same step drawing from context.rng FAILED on
    the float-support event on its own draws; the spawned generators' draws were not recorded."""
    result = pt.audit_component(SpawnFloat(factor=factor), frame(), seed=0, registry=registry)
    assert result.verdict == "FAILED", str(result)
    assert "[float-support]" in result.event and "own laplace draws" in result.audited


def test_draws_of_a_context_seeded_with_a_spawned_seed_are_recorded(registry):
    result = pt.audit_component(SpawnContext(), frame(), seed=0, registry=registry)
    assert result.verdict == "FAILED" and "[float-support]" in result.event, str(result)


def test_the_kit_catches_own_float_draws_through_spawn_seeds(registry):
    # before: the kit's privacy_audit check passed the step
    with pytest.raises(AssertionError, match="exceeds what the ledger charges"):
        pt.CHECKS["privacy_audit"](SpawnFloat(), frame(), "maskers", registry)


# --- draws the auditor cannot record: said plainly, not PASSED --------------------------------------------------


@pytest.mark.parametrize(("cls", "how"), [(SpawnBitGenerator, "read their state"), (SpawnPickled, "pickled")])
def test_draws_out_of_the_auditors_sight_make_the_audit_inconclusive(registry, cls, how):
    # before: PASSED, with nothing said of the draws the auditor never saw
    result = pt.audit_component(cls(), frame(), seed=0, registry=registry)
    assert result.verdict == "INCONCLUSIVE", str(result)
    (unseen,) = result.unseen
    assert how in unseen and "context.spawn_seeds" in unseen and "not a verification" in unseen
    assert "not a verification" in str(result)
    with pytest.raises(AssertionError, match="INCONCLUSIVE"):
        pt.assert_audit_passes(result)


def test_the_recipe_audit_names_the_step_whose_draws_it_could_not_record(registry):
    audits = pt.audit_recipe({"steps": [{"use": "spawn-pickled", "id": "noisy"}]}, frame(), registry=registry)
    (step,) = audits
    assert step.step_id == "noisy" and step.component == "spawn-pickled"
    assert step.result.verdict == "INCONCLUSIVE" and "context.spawn_seeds" in step.result.unseen[0]


# --- the audited run draws what the run draws unaudited ---------------------------------------------------------


@pytest.mark.parametrize("cls", STEPS)
def test_an_audited_run_releases_what_the_same_seeded_run_releases(cls):
    def run(context: PrivacyContext) -> pd.DataFrame:
        with context.step(0, "s", cls.name):
            return cls().mask(frame(), context).data

    pd.testing.assert_frame_equal(run(audit._AuditContext(seed=5)), run(PrivacyContext(seed=5)))


def test_the_auditors_seeds_are_seed_sequences_too():
    context = audit._AuditContext(seed=3)
    plain = PrivacyContext(seed=3)
    with context.step(0, "s", "x"), plain.step(0, "s", "x"):
        (seed,), (reference,) = context.spawn_seeds(1), plain.spawn_seeds(1)
        assert seed.spawn_key == reference.spawn_key
        (child,), (ref_child,) = seed.spawn(1), reference.spawn(1)
        assert np.random.default_rng(child).random() == np.random.default_rng(ref_child).random()
        assert np.random.default_rng(seed) is seed  # the generator numpy makes from it records its draws
        seed.laplace(0.0, 1.0, 3)
    assert context.draws and not context.unrecorded
    copied = pickle.loads(pickle.dumps(seed))
    assert type(copied) is privclust.seeds.SeedStream and context.unrecorded
