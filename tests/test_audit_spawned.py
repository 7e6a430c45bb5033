"""The auditor and steps that draw through ``context.spawn_seeds``.

A step may take seeds with ``context.spawn_seeds(n)`` and make its own
generators from them (``numpy.random.default_rng(seed)``). An earlier fix
handed out, in the audit, seeds that were also recording generators
(``default_rng(seed)`` returned the seed itself): that changed what a step
draws (``default_rng(seed)`` twice continued one stream in the audit and
repeated the same stream in a real run), so a step adding +n to one column
and -n to another, releasing their sum exactly, PASSED (rt19 F1), and other
constructions (a jumped bit generator, a seed drawn with ``integers``,
Laplace noise from exponentials) escaped with nothing said (rt19 F2). Now
the auditor's context hands out the plain seeds an unaudited run gets (the
audited run draws what the run draws), records nothing made from them, and
a masker audited through its own draws that took such seeds is never
PASSED: its ``unseen`` note says the float-support and lattice events were
not tried on those draws (INCONCLUSIVE), or the table's bound FAILS it.
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


@attrs.frozen(kw_only=True)
class SpawnTwice(_SpawnStep):
    """rt19 F1: re-makes the generator from the seed for each column, adding +n to column a and -n to column b:
    run unaudited, every released a+b is the true a+b (no noise at all on the sum)."""

    name: ClassVar[str] = "spawn-twice"

    def noisy(self, x, scale, seed):
        out = x.copy()
        for j in range(x.shape[1]):
            sign = 1 if j % 2 == 0 else -1
            out[:, j] = x[:, j] + sign * np.random.default_rng(seed).laplace(0.0, scale, x.shape[0])
        return out


@attrs.frozen(kw_only=True)
class SpawnJumped(_SpawnStep):
    """rt19 F2: textbook floating-point Laplace noise from a jumped bit generator made from the seed."""

    name: ClassVar[str] = "spawn-jumped"

    def noisy(self, x, scale, seed):
        bits = np.random.default_rng(seed).bit_generator.jumped()
        return x + np.random.Generator(bits).laplace(0.0, scale, x.shape)


@attrs.frozen(kw_only=True)
class SpawnExponentials(_SpawnStep):
    """rt19 F2: floating-point Laplace noise built as the difference of two exponentials."""

    name: ClassVar[str] = "spawn-exponentials"

    def noisy(self, x, scale, seed):
        g = np.random.default_rng(seed)
        return x + (g.exponential(scale, x.shape) - g.exponential(scale, x.shape)) if scale else x.copy()


@attrs.frozen(kw_only=True)
class SpawnIntegers(_SpawnStep):
    """rt19 F2: a generator seeded with an integer drawn from the seed's generator."""

    name: ClassVar[str] = "spawn-integers"

    def noisy(self, x, scale, seed):
        child = np.random.default_rng(np.random.default_rng(seed).integers(2**63))
        return x + child.laplace(0.0, scale, x.shape)


STEPS = (SpawnFloat, SpawnExact, SpawnContext, SpawnBitGenerator, SpawnPickled, SpawnTwice, SpawnJumped,
         SpawnExponentials, SpawnIntegers)


class SpawnPlugin:
    plugin_name = "spawn-steps"

    @hookimpl
    def privclust_register_maskers(self, register):
        for cls in STEPS:
            register(cls)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(plugins=[SpawnPlugin()], entry_points=[], use_env=False)


def _not_passed_with_the_note(result) -> None:
    assert result.verdict in ("INCONCLUSIVE", "FAILED"), str(result)
    (note,) = result.unseen
    assert "context.spawn_seeds" in note and "cannot record" in note and "not a verification" in note
    assert "float-support and lattice events" in note and "not a verification" in str(result)


# --- (a) an honest step is INCONCLUSIVE, never PASSED --------------------------------------------------------------


def test_an_honest_step_drawing_exact_noise_through_spawn_seeds_is_inconclusive(registry):
    # before rt19: PASSED, its draws recorded by seeds that changed what a step draws
    result = pt.audit_component(SpawnExact(), frame(), seed=0, registry=registry)
    assert result.verdict == "INCONCLUSIVE" and result.passed, str(result)
    _not_passed_with_the_note(result)
    with pytest.raises(AssertionError, match="INCONCLUSIVE"):
        pt.assert_audit_passes(result)
    pt.assert_audit_passes(result, allow_inconclusive=True)


# --- (b) the reuse mutant of rt19 F1 and the escapes of F2 are not PASSED ------------------------------------------


def test_a_step_reusing_its_seed_is_not_passed(registry):
    """rt19 F1: before, PASSED (bound 0.39 against 1, nothing unseen) while every released a+b is exact."""
    result = pt.audit_component(SpawnTwice(), frame(), seed=0, registry=registry)
    _not_passed_with_the_note(result)
    # the audited run now releases the exact sums the real run releases, and the table's bound catches them
    assert result.verdict == "FAILED" and result.epsilon_lower_bound > 1.0, str(result)


@pytest.mark.parametrize("cls", [SpawnFloat, SpawnJumped, SpawnExponentials, SpawnIntegers, SpawnContext,
                                 SpawnBitGenerator, SpawnPickled])
def test_own_draws_through_spawn_seeds_are_never_passed(registry, cls):
    """rt19 F2: before, a jumped bit generator, a seed drawn with integers() or exponentials PASSED with nothing
    unseen; now every step audited through its own draws that took seeds says so."""
    result = pt.audit_component(cls(), frame(), seed=0, registry=registry)
    _not_passed_with_the_note(result)
    with pytest.raises(AssertionError):
        pt.assert_audit_passes(result)


# --- (c) too little noise, or none, fails -----------------------------------------------------------------------


@pytest.mark.parametrize("step", [SpawnFloat(factor=0.01), SpawnFloat(factor=0.0), SpawnExact(factor=0.01),
                                  SpawnExponentials(factor=0.01)],
                         ids=["float-scale-over-100", "no-noise", "exact-scale-over-100", "exponentials-over-100"])
def test_far_too_little_noise_through_spawn_seeds_fails(registry, step):
    result = pt.audit_component(step, frame(), seed=0, registry=registry)
    assert result.verdict == "FAILED" and result.epsilon_lower_bound > 1.0, str(result)


def test_the_kit_warns_that_own_draws_through_spawn_seeds_were_not_verified(registry):
    # before rt19: the kit failed SpawnFloat on draws recorded by seeds that changed what a step draws
    with pytest.warns(privclust.PrivclustWarning, match="INCONCLUSIVE.*context.spawn_seeds") as caught:
        pt.CHECKS["privacy_audit"](SpawnFloat(), frame(), "maskers", registry)
    # the fix it names is to draw from context.rng; a statistic= audit would only drop those events
    assert not any("statistic=" in str(w.message) for w in caught)


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


def test_the_reuse_mutant_releases_exact_sums_audited_as_unaudited():
    """rt19 F1: before, the audited run drew fresh noise for column b (a+b noisy), the real run the same noise."""
    for context in (audit._AuditContext(seed=5), PrivacyContext(seed=5)):
        with context.step(0, "s", "spawn-twice"):
            out = SpawnTwice().mask(frame(), context).data
        np.testing.assert_allclose(out["a"] + out["b"], frame().clip(0, 10).sum(axis=1), atol=1e-9)


def test_the_auditors_seeds_are_the_plain_seeds():
    context = audit._AuditContext(seed=3)
    plain = PrivacyContext(seed=3)
    with context.step(0, "s", "x"), plain.step(0, "s", "x"):
        (seed,), (reference,) = context.spawn_seeds(1), plain.spawn_seeds(1)
        assert type(seed) is type(reference) and seed.spawn_key == reference.spawn_key
        assert np.random.default_rng(seed) is not seed
        first, second = np.random.default_rng(seed).laplace(0, 1, 3), np.random.default_rng(seed).laplace(0, 1, 3)
        np.testing.assert_array_equal(first, second)  # default_rng(seed) twice: the same stream, as unaudited
        np.testing.assert_array_equal(first, np.random.default_rng(reference).laplace(0, 1, 3))
    assert context.took_seeds and not context.draws
    assert type(pickle.loads(pickle.dumps(seed))) is privclust.seeds.SeedStream


# --- where the audit does not rest on the step's own draws, taking seeds says nothing ------------------------------


@attrs.frozen(kw_only=True)
class MechanismShuffled(_SpawnStep):
    """Releases through the host's laplace mechanism, and draws a permutation from a seed it took."""

    name: ClassVar[str] = "mechanism-shuffled"

    def mask(self, data: pd.DataFrame, context: Any) -> Masked:
        x = data.clip(0.0, 10.0).to_numpy(dtype=float)
        noisy = context.mechanism("laplace").release(x, context=context, sensitivity=10.0 * data.shape[1],
                                                     epsilon=self.epsilon,
                                                     relation="replace-one", covers="every released value")
        np.random.default_rng(context.spawn_seeds(1)[0]).permutation(len(x))
        return Masked(data=pd.DataFrame(noisy, index=data.index, columns=data.columns))


def test_a_step_whose_mechanism_releases_are_audited_gets_no_spawn_note():
    result = pt.audit_component(MechanismShuffled(), frame(), seed=0)
    assert result.verdict == "PASSED" and not result.unseen, str(result)
