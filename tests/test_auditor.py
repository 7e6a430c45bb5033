"""The empirical privacy auditor (privclust.testing): valid lower bounds on
epsilon, built-in DP components within their charges, mutants caught."""

from __future__ import annotations

import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.testing as pt
from privclust import Sensitivity, audit, audit_events, param
from privclust.cli import main

RELATION = "replace-one (the audited pair)"


# ---------------------------------------------------------------------------
# Third-party style mechanisms: one honest, three mutants
# ---------------------------------------------------------------------------


class _Base:
    uses_constraints: ClassVar[bool] = False
    scale_factor: ClassVar[float] = 1.0

    def perturb(self, data, context):
        raise NotImplementedError

    def _spend(self, sensitivity, epsilon, context, relation, covers):
        s = Sensitivity.of(sensitivity)
        context.spend(epsilon=epsilon, mechanism=self.name, sensitivity=s.l1, relation=relation, covers=covers)
        return s.l1


@attrs.frozen(kw_only=True)
class ExactGeometric(_Base):
    """Honest: integer values plus exact two-sided geometric noise from
    ``privclust.sampling.discrete_laplace`` (integers from the generator's
    random bits, no floating point)."""

    name: ClassVar[str] = "exact-geometric"

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, **_):
        from privclust import sampling

        l1 = self._spend(sensitivity, epsilon, context, relation, covers)
        out = np.asarray(values, dtype=np.int64)
        return out + sampling.discrete_laplace(context.rng, l1 / epsilon, out.shape)


@attrs.frozen(kw_only=True)
class FloatLaplace(_Base):
    """The textbook floating-point sampler: values + rng.laplace(0, s/eps)."""

    name: ClassVar[str] = "float-laplace"

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, **_):
        l1 = self._spend(sensitivity, epsilon, context, relation, covers)
        out = np.array(values, dtype=float)
        return out + context.rng.laplace(0.0, l1 / epsilon, size=out.shape)


@attrs.frozen(kw_only=True)
class HalvedScale(_Base):
    """Charges epsilon, adds Lap(s / (2 epsilon)): really 2 epsilon."""

    name: ClassVar[str] = "halved-scale"

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, **_):
        l1 = self._spend(sensitivity, epsilon, context, relation, covers)
        out = np.array(values, dtype=float)
        return out + context.rng.laplace(0.0, 0.5 * l1 / epsilon, size=out.shape)


@attrs.frozen(kw_only=True)
class Understated(_Base):
    """Charges epsilon but calibrates to a third of the sensitivity: Lap(s / (3 epsilon))."""

    name: ClassVar[str] = "understated"

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, **_):
        l1 = self._spend(sensitivity, epsilon, context, relation, covers)
        out = np.array(values, dtype=float)
        return out + context.rng.laplace(0.0, (l1 / 3.0) / epsilon, size=out.shape)


class ThirdParty:
    plugin_name = "third-party-mechanisms"

    @privclust.hookimpl
    def privclust_register_noise_mechanisms(self, register):
        for cls in (ExactGeometric, FloatLaplace, HalvedScale, Understated):
            register(cls)


@pytest.fixture
def third_party():
    return privclust.Registry(plugins=[ThirdParty()], entry_points=[], use_env=False)


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------


def test_clopper_pearson_matches_the_beta_quantiles():
    low, high = pt.clopper_pearson(np.array([0, 5, 10]), 10, 0.025)
    assert low[0] == 0 and high[2] == 1
    # the textbook interval for 5 of 10 at 95% two-sided: [0.187, 0.813]
    assert low[1] == pytest.approx(0.1871, abs=1e-4) and high[1] == pytest.approx(0.8129, abs=1e-4)


def test_the_bound_of_an_honest_mechanism_stays_below_its_epsilon_over_many_seeds(third_party):
    # Validity: at 95% confidence at most ~5% of audits may exceed the claim; with the
    # selection/estimation split the bound is conservative, so none should.
    over = [pt.audit_mechanism("exact-geometric", epsilon=0.5, trials=500, seed=s, registry=third_party)
            for s in range(8)]
    assert sum(not r.passed for r in over) <= 1
    assert max(r.epsilon_lower_bound for r in over) < 0.75


def test_the_result_is_frozen_reproducible_and_readable(third_party):
    a = pt.audit_mechanism("exact-geometric", trials=400, seed=3, registry=third_party)
    b = pt.audit_mechanism("exact-geometric", trials=400, seed=3, registry=third_party)
    assert a == b
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        a.passed = False  # type: ignore[misc]
    text = str(a)
    assert "privacy audit of the exact-geometric mechanism" in text and "epsilon lower bound" in text
    assert "95% confidence" in text and f"of {a.trials} fresh runs" in text
    assert a.trials == 200 and a.claimed_epsilon == 1.0 and a.confidence == pytest.approx(0.95)


# ---------------------------------------------------------------------------
# The float-support event (Mironov 2012)
# ---------------------------------------------------------------------------


def test_float_support_recognises_numpys_laplace_outputs_exactly():
    rng = np.random.default_rng(0)
    from_zero = rng.laplace(0.0, 1.0, size=4000)
    from_one = 1.0 + rng.laplace(0.0, 1.0, size=4000)
    assert pt.float_laplace_reachable(from_zero, 0.0, 1.0).all()
    assert pt.float_laplace_reachable(from_one, 1.0, 1.0).all()
    # the issue measured about 80% of releases from 1 outside the doubles reachable from 0
    share = pt.float_laplace_reachable(from_one, 0.0, 1.0).mean()
    assert 0.1 < share < 0.35
    # other scales and locations too
    x = 3.25 + rng.laplace(0.0, 0.7, size=2000)
    assert pt.float_laplace_reachable(x, 3.25, 0.7).all()


def test_the_textbook_float_sampler_is_caught(third_party):
    result = pt.audit_mechanism("float-laplace", trials=4000, seed=1, registry=third_party)
    assert not result.passed and result.epsilon_lower_bound > 1.2
    assert "[float-support]" in result.event
    with pytest.raises(AssertionError, match="more privacy loss than charged"):
        pt.assert_audit_passes(result)


# ---------------------------------------------------------------------------
# Mutants
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "real"), [("halved-scale", 2.0), ("understated", 3.0)])
def test_scale_mutants_are_caught(third_party, name, real):
    result = pt.audit_mechanism(name, trials=4000, seed=2, registry=third_party)
    assert not result.passed, str(result)
    assert 1.0 < result.epsilon_lower_bound <= real
    assert result.event.endswith(("[threshold]", "[histogram]"))


def test_a_correct_integer_mechanism_passes(third_party):
    result = pt.audit_mechanism("exact-geometric", trials=2000, seed=2, registry=third_party)
    assert result.passed and 0.5 < result.epsilon_lower_bound <= 1.0


def test_user_given_pairs_and_vector_values(third_party):
    result = pt.audit_mechanism("halved-scale", sensitivity=2.0, pairs=[([0.0, 0.0], [1.0, 1.0])], trials=3000,
                                seed=4, registry=third_party)
    assert not result.passed and "[0. 0.]" in result.neighbours


# ---------------------------------------------------------------------------
# Built-in mechanisms' release()
# ---------------------------------------------------------------------------


def test_builtin_laplace_release_passes():
    # Before the exact sampler, this audit failed on the float-support event: bound 1.58 > 1 at 10,000 runs.
    result = pt.audit_mechanism("laplace", trials=1000, seed=5)
    assert result.passed, str(result)


@pytest.mark.parametrize(("name", "delta"), [("geometric", 0.0), ("gaussian", 1e-6)])
def test_builtin_geometric_and_gaussian_release_pass(name, delta):
    result = pt.audit_mechanism(name, delta=delta, trials=300, seed=6)
    assert result.passed, str(result)
    assert result.claimed_delta == delta


# ---------------------------------------------------------------------------
# Built-in DP components at small sizes, against what the ledger charges
# ---------------------------------------------------------------------------

BOUNDS = {"a": [0, 10], "b": [0, 10]}


def _components():
    return [
        pytest.param("noise_mechanisms", {"use": "laplace", "epsilon": 1.0, "bounds": BOUNDS}, id="laplace-step"),
        pytest.param("noise_mechanisms", {"use": "geometric", "epsilon": 1.0, "bounds": BOUNDS}, id="geometric-step"),
        pytest.param("noise_mechanisms", {"use": "gaussian", "epsilon": 1.0, "delta": 1e-6, "bounds": BOUNDS},
                     id="gaussian-step"),
        pytest.param("clusterers", {"use": "dp-dpcl", "epsilon": 0.1, "dc": 1.0, "radius": 1.0}, id="dp-dpcl"),
        pytest.param("clusterers", {"use": "addpc-rdp", "epsilon": 0.1, "dc": 1.0}, id="addpc-rdp"),
        pytest.param("clusterers", {"use": "dp-rccfsfdp", "epsilon": 0.1, "dc": 1.0, "radius": 1.0, "n_clusters": 3},
                     id="dp-rccfsfdp"),
        pytest.param("clusterers", {"use": "idp-kmeans", "epsilon": 1.0, "n_clusters": 3, "bounds": BOUNDS},
                     id="idp-kmeans"),
        pytest.param("clusterers", {"use": "dp-dpc-grid", "epsilon": 1.0, "dc": 1.0, "bounds": BOUNDS,
                                    "points_per_dim": 8}, id="dp-dpc-grid"),
        pytest.param("clusterers", {"use": "dp-density", "epsilon": 1.0, "bounds": BOUNDS, "max_nodes": 2048},
                     id="dp-density"),  # a pool small enough that every release of a run is audited
        pytest.param("clusterers", {"use": "dp-density", "epsilon": 64.0, "bounds": BOUNDS, "max_nodes": 2048},
                     id="dp-density-grid"),  # epsilon large enough that 20 records start the tree from a grid
    ]


def _frame(kind_use: str) -> pd.DataFrame:
    frame = pt.example_frame(n=20, d=2, seed=1)
    return frame.round().astype(int) if kind_use == "geometric" else frame


@pytest.mark.parametrize(("kind", "spec"), _components())
def test_builtin_components_stay_within_their_charge(registry, kind, spec):
    component = registry.create(kind, privclust.ComponentSpec.from_mapping(spec))
    result = pt.audit_component(component, _frame(spec["use"]), trials=200, seed=7, registry=registry)
    assert result.passed, str(result)
    if spec["use"] == "dp-density":  # the claim the docs make: every release seen, no bound above the charge
        assert result.verdict == "PASSED", str(result)


def test_what_is_audited_and_under_which_relation(registry):
    kmeans = registry.create("clusterers", "idp-kmeans", epsilon=1.0, n_clusters=2, bounds=BOUNDS)
    result = pt.audit_component(kmeans, _frame("x"), trials=40, seed=1, registry=registry)
    assert "add/remove" in result.neighbours and "noise mechanisms" in result.audited
    step = registry.create("noise_mechanisms", "laplace", epsilon=1.0, bounds=BOUNDS)
    result = pt.audit_component(step, _frame("x"), trials=40, seed=1, registry=registry)
    assert "replace-one" in result.neighbours and "(a = 10, b = 10)" in result.neighbours  # the public bounds' corner
    assert result.audited == "the released table (every value)"


def test_a_component_without_dp_release_has_nothing_to_audit(registry):
    with pytest.raises(ValueError, match="nothing to audit"):
        pt.audit_component(registry.create("clusterers", "mdav", k=3), trials=40, registry=registry)


def test_neighbour_pairs_replace_and_add():
    frame = pd.DataFrame({"a": [1.0, 2.0, 9.0], "b": [5, 0, 3]})
    (replace,) = pt.neighbour_pairs(frame)
    assert replace.second.iloc[0].tolist() == [9.0, 0] and replace.second.iloc[1:].equals(frame.iloc[1:])
    assert frame.iloc[0].tolist() == [1.0, 5]  # never mutated
    (add,) = pt.neighbour_pairs(frame, "add/remove one record")
    assert len(add.second) == 4 and add.second.index.is_unique


def test_a_data_dependent_dp_component_is_noted(registry):
    component = registry.create("clusterers", "addpc-rdp", epsilon=0.1)  # d_c from the data: a leak
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pt.audit_component(component, _frame("x"), trials=40, seed=1, registry=registry)
    assert any("leak entries" in n for n in result.notes)


# ---------------------------------------------------------------------------
# Recipes and the command line
# ---------------------------------------------------------------------------

RECIPE = """
[privacy]
epsilon = 3.0

[[steps]]
use = "mdav"
k = 3
columns = ["a", "b"]

[[steps]]
use = "geometric"
epsilon = 1.0
columns = ["c"]
bounds = { c = [0, 10] }
"""


def test_audit_recipe_audits_only_the_dp_steps(registry):
    frame = pt.example_frame(n=30).round().astype(int)
    audits = pt.audit_recipe(privclust.Recipe.from_toml(RECIPE), frame, trials=100, seed=1, registry=registry)
    assert [(a.index, a.component) for a in audits] == [(1, "geometric")]
    assert audits[0].result.passed and audits[0].result.claimed_epsilon == 1.0


def test_cli_audit_prints_each_bound_and_passes(tmp_path, capsys):
    (tmp_path / "r.toml").write_text(RECIPE, encoding="utf-8")
    pt.example_frame(n=30).round().astype(int).to_csv(tmp_path / "d.csv", index=False)
    code = main(["audit", str(tmp_path / "r.toml"), "--input", str(tmp_path / "d.csv"), "--trials", "60",
                 "--seed", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "1 DP step(s), 60 runs per input" in out
    assert "step 1 'geometric' (geometric): epsilon lower bound" in out and "charged epsilon 1: passed" in out


def test_cli_audit_says_inconclusive_when_a_release_was_seen_only_in_part(tmp_path, capsys):
    """dp-density's tree pool (8192 values here) is larger than the values a
    run keeps: the line reads INCONCLUSIVE, not passed, and a note names the
    release (exit status 0: no evidence against the charge)."""
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "dp-density"\nepsilon = 1.0\nmax_nodes = 8192\n'
                                     'bounds = { a = [0, 10], b = [0, 10] }\n', encoding="utf-8")
    pt.example_frame(n=30, d=2, seed=1).to_csv(tmp_path / "d.csv", index=False)
    code = main(["audit", str(tmp_path / "r.toml"), "--input", str(tmp_path / "d.csv"), "--trials", "40",
                 "--seed", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "charged epsilon 1: INCONCLUSIVE" in out and ": passed" not in out
    assert "note: not audited (INCONCLUSIVE for these values): release 2 of each run" in out


@attrs.frozen(kw_only=True)
class BrokenLaplaceStep(Understated):
    """A ``laplace`` replacement whose step adds a third of the noise it charges for."""

    name: ClassVar[str] = "laplace"
    epsilon: float = param(float, default=1.0, gt=0)

    def planned_cost(self):
        return (self.epsilon, 0.0)

    def perturb(self, data, context):
        unit = np.clip(data.to_numpy(dtype=float), 0, 10) / 10.0
        values = self.release(unit, sensitivity=float(data.shape[1]), epsilon=self.epsilon, context=context,
                              relation="replace-one", covers="the values")
        return privclust.Masked(data=pd.DataFrame(values * 10.0, index=data.index, columns=data.columns))


class BrokenPlugin:
    plugin_name = "broken"

    @privclust.hookimpl
    def privclust_register_noise_mechanisms(self, register):
        register(BrokenLaplaceStep)


def test_cli_audit_fails_with_a_broken_mechanism(tmp_path, capsys, monkeypatch):
    swapped = privclust.Registry(block=["noise:laplace"], plugins=[BrokenPlugin()], use_env=False)
    monkeypatch.setattr("privclust.cli.get_registry", lambda: swapped)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\ncolumns = ["a"]\n',
                                     encoding="utf-8")
    code = main(["audit", str(tmp_path / "r.toml"), "--trials", "2000", "--seed", "1"])
    captured = capsys.readouterr()
    assert code == 1, captured.out + captured.err
    assert "FAILED" in captured.out and "privclust: audit failed: the lower bound exceeds" in captured.err


def test_cli_audit_refuses_too_few_trials(tmp_path, capsys):
    (tmp_path / "r.toml").write_text(RECIPE, encoding="utf-8")
    assert main(["audit", str(tmp_path / "r.toml"), "--trials", "5"]) == 1
    assert "--trials must be at least 20" in capsys.readouterr().err


def test_the_paper_claim_of_dp_dpcl_is_refuted_but_the_charge_holds(registry):
    # Four close records, one moved far away: every density changes, so the density vector moves by
    # 2(n - 1) = 6 in L1. The paper claims epsilon = 1 (Lap(1) per density); the ledger charges 6.
    close = pd.DataFrame({"a": [0.0, 0.1, 0.0, 0.1], "b": [0.0, 0.0, 0.1, 0.1]})
    moved = close.copy()
    moved.iloc[0] = [100.0, 100.0]
    component = registry.create("clusterers", "dp-dpcl", epsilon=1.0, dc=1.0, radius=0.5)
    result = pt.audit_component(component, close, pairs=[(close, moved)], trials=400, seed=1, registry=registry)
    assert result.passed and result.claimed_epsilon == pytest.approx(6.0)
    assert result.epsilon_lower_bound > 2.0, str(result)  # far above the paper's per-density epsilon of 1


# ---------------------------------------------------------------------------
# Every release of a run is audited (not only the first AUDIT_VALUES values)
# ---------------------------------------------------------------------------


def test_the_value_budget_is_shared_fairly_over_the_releases():
    assert audit._allocate([1, 10, 5]) == [1, 10, 5]  # everything fits: everything kept
    keep = audit._allocate([1, 1 << 20, 40])
    assert keep[0] == 1 and keep[2] == 40 and sum(keep) == pt.AUDIT_VALUES  # small releases kept whole
    keep = audit._allocate([5000, 5000, 5000])
    assert sum(keep) == pt.AUDIT_VALUES and max(keep) - min(keep) <= 1
    keep = audit._allocate([1] * (pt.AUDIT_VALUES + 3))
    assert sum(keep) == pt.AUDIT_VALUES and keep[-3:] == [0, 0, 0]


def _density_data(n: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(np.vstack([rng.normal(3, 0.5, (n, 2)), rng.normal(7, 0.5, (n, 2))]), columns=["x", "y"])


def test_leaf_counts_behind_a_large_noise_pool_are_audited(registry, monkeypatch):
    """dp-density releases 1 noisy count, then a data-independent pool of
    max_nodes noise values (8192 > AUDIT_VALUES here), then the leaf counts.
    With the leaf counts' sensitivity sabotaged to 1e-6 (practically no
    noise, the charge unchanged) the audit must fail: it used to see only the
    first AUDIT_VALUES values of a run (the count and the pool) and passed."""
    import privclust_plugins.dp_density as dd

    component = registry.create("clusterers", "dp-density", epsilon=1.0, bounds={"x": [0, 10], "y": [0, 10]},
                                max_nodes=8192)
    data = _density_data()
    honest = pt.audit_component(component, data, trials=40, seed=0, registry=registry)
    # the pool is cut short: no plain pass, and the result names what was not seen
    assert honest.passed and honest.verdict == "INCONCLUSIVE" and not honest.complete, str(honest)
    assert len(honest.unseen) == 1 and honest.unseen[0].startswith("release 2 of each run")
    assert "of up to 8192 values were audited" in honest.unseen[0]
    assert "INCONCLUSIVE" in str(honest) and "PASSED" not in str(honest)
    with pytest.raises(AssertionError, match="INCONCLUSIVE"):
        pt.assert_audit_passes(honest)
    pt.assert_audit_passes(honest, allow_inconclusive=True)

    original = dd._release

    def noiseless_leaves(mech, what, share, values, **kwargs):
        if what.startswith("the counts of the"):
            kwargs["sensitivity"] = 1e-6  # a sensitivity wrong by a factor of 10^6
        return original(mech, what, share, values, **kwargs)

    monkeypatch.setattr(dd, "_release", noiseless_leaves)
    sabotaged = pt.audit_component(component, data, trials=40, seed=0, registry=registry)
    assert not sabotaged.passed and sabotaged.verdict == "FAILED", str(sabotaged)
    assert sabotaged.epsilon_lower_bound > 1.0 and "release 3" in sabotaged.event
    with pytest.raises(AssertionError, match="more privacy loss than charged"):
        pt.assert_audit_passes(sabotaged)


def test_a_complete_audit_has_nothing_unseen(registry):
    step = registry.create("noise_mechanisms", "laplace", epsilon=1.0, bounds=BOUNDS)
    result = pt.audit_component(step, _frame("x"), trials=40, seed=1, registry=registry)
    assert result.complete and result.unseen == () and result.verdict == "PASSED"
    assert not any("not audited" in n for n in result.notes)


@attrs.frozen(kw_only=True)
class DecoyMasker:
    """Charges epsilon for an honest noisy release through its mechanism, then publishes the raw values."""

    name: ClassVar[str] = "decoy-masker"
    uses_constraints: ClassVar[bool] = False

    def mask(self, data, context):
        values = np.clip(data.to_numpy(dtype=float), 0.0, 10.0)
        context.mechanism("laplace").release(values, sensitivity=20.0, epsilon=1.0, context=context,
                                             relation=RELATION, covers="every released value")
        return privclust.Masked(data=data.astype(float))


@attrs.frozen(kw_only=True)
class MixedRelations:
    """Honest: a count (add/remove) and a clipped sum (replace-one), charged 2 x 0.5 + 0.5 under replace-one."""

    name: ClassVar[str] = "mixed-relations"
    uses_constraints: ClassVar[bool] = False
    bounds: dict = attrs.field(factory=lambda: {"a": [9.0, 10.0]})

    def mask(self, data, context):
        mech = context.mechanism("laplace")
        n = mech.release(np.array([float(len(data))]), sensitivity=1.0, epsilon=0.5, context=context,
                         relation="add/remove one record", covers="the number of records")
        clipped = np.clip(data["a"].to_numpy(dtype=float), 9.0, 10.0)
        total = mech.release(np.array([clipped.sum()]), sensitivity=1.0, epsilon=0.5, context=context,
                             relation="replace-one", covers="the sum of a")
        return privclust.Masked(data=pd.DataFrame({"a": np.full(len(data), total[0] / max(n[0], 1.0))},
                                                  index=data.index))


def test_a_step_that_publishes_other_values_than_its_mechanisms_released_is_audited_on_them(registry):
    frame = pd.DataFrame({"a": np.linspace(0, 10, 20), "b": np.linspace(10, 0, 20)})
    result = pt.audit_component(DecoyMasker(), frame, trials=200, seed=1, registry=registry)
    assert pt.TABLE_COVER in result.audited
    assert not result.passed, str(result)  # the raw values tell the neighbours apart


def test_the_neighbours_follow_the_relation_the_charge_is_composed_under(registry):
    frame = pd.DataFrame({"a": np.r_[np.full(10, 9.0), np.full(10, 10.0)]})
    result = pt.audit_component(MixedRelations(), frame, trials=200, seed=1, registry=registry)
    assert "replace-one" in result.neighbours and result.claimed_epsilon == 1.5
    assert result.passed, str(result)


def test_the_audit_shows_the_charge_rounded_up_and_the_lower_bound_rounded_down(tmp_path, capsys):
    """`privclust audit` printed the charged epsilon with 4 digits rounded to
    the nearest: 0.12344 read 0.1234, less than the charge."""
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "geometric"\nepsilon = 0.12344\ncolumns = ["a"]\n'
                                     'bounds = { a = [0, 20] }\n', encoding="utf-8")
    pt.example_frame(n=30).round().astype(int).to_csv(tmp_path / "d.csv", index=False)
    code = main(["audit", str(tmp_path / "r.toml"), "--input", str(tmp_path / "d.csv"), "--trials", "40",
                 "--seed", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "charged epsilon 0.1235:" in out and "0.1234:" not in out
    result = pt.AuditResult(subject="s", audited="v", neighbours="n", epsilon_lower_bound=0.12346,
                            claimed_epsilon=0.12344, claimed_delta=1.2341e-6, event="e", direction="d",
                            counts=(1, 2), trials=10, p_lower=0.1, q_upper=0.2, confidence=0.95, passed=False)
    # a failed audit's figures, each rounded its own way, would read "0.1234 > 0.1235": more digits then
    assert "epsilon lower bound 0.12346 > charged epsilon 0.12344, delta 1.24e-06" in str(result)
    passed = attrs.evolve(result, epsilon_lower_bound=0.0567891, passed=True)
    assert "epsilon lower bound 0.05678 <= charged epsilon 0.1235, delta 1.24e-06" in str(passed)


# ---------------------------------------------------------------------------
# Issue 24: the auditor audits what the verdict claims (labels, a step's own draws, adversarial pairs)
# ---------------------------------------------------------------------------

ONE_BOUNDS = {"x": [0, 10]}
NOISE = "noise_mechanisms"  # steps with perturb only


def _one_column() -> pd.DataFrame:
    return pt.example_frame(n=30, d=1, seed=2).rename(columns={"a": "x"})


def _clipped(data, bounds):
    """The values clipped to the public bounds, and the L1 sensitivity of a record (the sum of the ranges)."""
    low = np.array([bounds[c][0] for c in data.columns], dtype=float)
    high = np.array([bounds[c][1] for c in data.columns], dtype=float)
    return np.clip(data.to_numpy(dtype=float), low, high), float(np.sum(high - low))


@attrs.frozen(kw_only=True)
class _BoundedStep:
    uses_constraints: ClassVar[bool] = False
    epsilon: float = 1.0
    bounds: dict = attrs.field(factory=lambda: dict(ONE_BOUNDS))
    factor: float = 1.0

    def planned_cost(self):
        return (self.epsilon, 0.0)


@attrs.frozen(kw_only=True)
class OwnLaplaceStep(_BoundedStep):
    """A third-party noise step that draws ``rng.laplace`` in its own perturb
    (clipped values + Lap(factor x range / epsilon)), not through
    ``context.mechanism``."""

    name: ClassVar[str] = "own-float-laplace"

    def perturb(self, data, context):
        x, sens = _clipped(data, self.bounds)
        context.spend(epsilon=self.epsilon, mechanism="laplace", sensitivity=sens, relation="replace-one",
                      covers="every released value")
        out = x + context.rng.laplace(0.0, self.factor * sens / self.epsilon, size=x.shape)
        return privclust.Masked(data=pd.DataFrame(out, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class UnderstatedStep(_BoundedStep):
    """Releases through the host's exact laplace mechanism with the sensitivity understated by ``factor``."""

    name: ClassVar[str] = "understated-step"
    factor: float = 0.5

    def perturb(self, data, context):
        x, sens = _clipped(data, self.bounds)
        out = context.mechanism("laplace").release(x, sensitivity=self.factor * sens,
                                                   epsilon=self.epsilon, context=context, relation="replace-one",
                                                   covers="the values")
        return privclust.Masked(data=pd.DataFrame(np.asarray(out).reshape(x.shape), index=data.index,
                                                  columns=data.columns))


def _bridge() -> pd.DataFrame:
    """Record 0 bridges two rows of 20 records (gaps 0.6 < radius 1): moving it splits them."""
    a = np.vstack([[0.0, 0.0], np.c_[np.linspace(-3, -0.6, 20), np.zeros(20)],
                   np.c_[np.linspace(0.6, 3, 20), np.zeros(20)]])
    return pd.DataFrame(a, columns=["a", "b"])


def test_a_step_drawing_rng_laplace_itself_is_caught_by_the_float_support_event_on_its_own_draws(registry):
    """It passed at 400 and 3000 trials: the float-support event was tried only on values passed through
    context.mechanism().release."""
    # the default 400 trials
    result = pt.audit_component(OwnLaplaceStep(), _one_column(), seed=0, kind=NOISE, registry=registry)
    assert not result.passed and result.epsilon_lower_bound > 1.0, str(result)
    assert "[float-support]" in result.event and "own laplace draws" in result.audited


def test_half_the_scale_is_caught_at_the_default_trials(registry):
    result = pt.audit_component(OwnLaplaceStep(factor=0.5), _one_column(), seed=0, kind=NOISE, registry=registry)
    assert not result.passed, str(result)
    assert "chosen among 3 pairs" in result.neighbours


def test_a_sensitivity_understated_twice_is_caught_at_the_default_trials(registry):
    result = pt.audit_component(UnderstatedStep(), _one_column(), seed=0, kind=NOISE, registry=registry)
    assert not result.passed, str(result)
    honest = pt.audit_component(UnderstatedStep(factor=1.0), _one_column(), seed=0, kind=NOISE, registry=registry)
    assert honest.passed, str(honest)


@pytest.mark.parametrize("use", ["dp-dpcl", "dp-rccfsfdp"])
def test_labels_computed_from_raw_distances_are_caught(registry, use):
    """The label column alone tells neighbours apart (the reachability merge on raw distances), while the
    ledger charges 0.5 for the density vector; the auditor used to audit only the density vector."""
    extra = {"n_clusters": 2} if use == "dp-rccfsfdp" else {}
    component = registry.create("clusterers", use, epsilon=0.5, dc=1.0, radius=1.0, calibration="vector", **extra)
    result = pt.audit_component(component, _bridge(), seed=0, registry=registry)
    assert not result.passed and result.event.startswith("label statistic"), str(result)
    assert "the released labels" in result.audited


def test_dp_dpc_grid_labels_show_no_signal(registry):
    component = registry.create("clusterers", "dp-dpc-grid", epsilon=1.0, dc=1.0, points_per_dim=8,
                                bounds={"a": [-4, 4], "b": [-4, 4]})
    result = pt.audit_component(component, _bridge(), seed=0, registry=registry)
    assert result.passed, str(result)


def test_label_statistics_leave_the_moved_record_out():
    frame = _bridge()
    (pair,) = pt.neighbour_pairs(frame)
    shared = audit_events.shared_records(pair)
    assert 0 not in shared.first_rows.tolist() and shared.first_rows.size == len(frame) - 1
    one = audit_events.label_statistics(np.r_[7, np.zeros(40, dtype=int)], shared.first_rows, shared.near)
    assert one[0] == 1 and one[1] == 1 and one[2] == 1  # record 0's own label (7) is not counted
    split = audit_events.label_statistics(np.r_[0, np.zeros(20, dtype=int), np.ones(20, dtype=int)], shared.first_rows,
                                 shared.near)
    assert split[0] == 2 and split[1] == 0


def test_the_recording_generator_draws_what_the_step_would_draw():
    plain = np.random.default_rng(5)
    sink: list = []
    recording = audit._RecordingGenerator(np.random.default_rng(5).bit_generator, sink)
    assert np.array_equal(recording.laplace(0.0, 2.0, 4), plain.laplace(0.0, 2.0, 4))
    assert np.array_equal(recording.normal(size=3), plain.normal(size=3))
    assert len(sink) == 1 and sink[0][1].tolist() == [2.0] * 4


def test_the_kit_keeps_its_single_pair(registry):
    step = registry.create("noise_mechanisms", "laplace", epsilon=1.0, bounds=BOUNDS)
    result = pt.audit_component(step, _frame("x"), trials=40, seed=1, registry=registry, search=False)
    assert "chosen among" not in result.neighbours


def test_cli_audit_fails_on_labels_from_raw_distances(tmp_path, capsys):
    """`privclust audit` passed dp-dpcl although its label column alone tells the neighbours apart."""
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "dp-dpcl"\nepsilon = 0.5\ndc = 1.0\nradius = 1.0\n'
                                     'calibration = "vector"\n', encoding="utf-8")
    _bridge().to_csv(tmp_path / "d.csv", index=False)
    code = main(["audit", str(tmp_path / "r.toml"), "--input", str(tmp_path / "d.csv"), "--seed", "0"])
    captured = capsys.readouterr()
    assert code == 1, captured.out + captured.err
    assert "FAILED" in captured.out and "event: label statistic" in captured.out


def test_the_kit_runs_a_dp_components_audit_once_per_component_data_and_tables(monkeypatch):
    """Issue 27, item 4: the audit is one check, run once per DP component in a
    process (the suite checks some components in several tests). The same
    component on other data, or through rebuilt component tables, is audited
    again; a component that cannot be pickled is audited every time."""
    from privclust_plugins.noise import LaplaceMechanism

    calls = []
    real = pt.audit_component
    monkeypatch.setattr(pt, "audit_component", lambda *a, **k: calls.append(k["kind"]) or real(*a, **k))
    monkeypatch.setattr(pt, "_AUDITS", {})
    registry = privclust.Registry(use_env=False)
    component = LaplaceMechanism(epsilon=1.0, bounds={c: [-5, 15] for c in "abc"})
    frame = pt.example_frame()
    for _ in range(2):
        dict(pt.component_checks(component, frame, registry=registry))["privacy_audit"](component)
    assert calls == ["noise_mechanisms"]
    same = LaplaceMechanism(epsilon=1.0, bounds={c: [-5, 15] for c in "abc"})  # equal state: remembered
    dict(pt.component_checks(same, frame, registry=registry))["privacy_audit"](same)
    assert len(calls) == 1
    other = frame.assign(a=frame["a"] + 1.0)
    dict(pt.component_checks(component, other, registry=registry))["privacy_audit"](component)
    assert len(calls) == 2
    class Nothing:
        @privclust.hookimpl
        def privclust_register_maskers(self, register):
            pass

    registry.register(Nothing(), "nothing")  # the tables are rebuilt: what a name resolves to may have changed
    dict(pt.component_checks(component, frame, registry=registry))["privacy_audit"](component)
    assert len(calls) == 3
    assert pt._audit_once("x", lambda: None, frame, "maskers", registry, lambda: "fresh") == "fresh"  # not picklable


# ---------------------------------------------------------------------------
# structural neighbours: a record added in empty space (issue 26)
# ---------------------------------------------------------------------------

QUADRANTS = {"a": [0, 10], "b": [0, 10]}


def _three_quadrants(n: int = 900) -> pd.DataFrame:
    """Three clusters in three quadrants of the public box, the fourth empty:
    900 records at epsilon 1 start dp-density's PrivTree from a public grid of
    the four quadrants."""
    rng = np.random.default_rng(0)
    centres = np.array([[2.5, 2.5], [7.5, 7.5], [2.5, 7.5]])
    return pd.DataFrame((centres[np.arange(n) % 3] + rng.normal(0, 0.6, (n, 2))).clip(0, 10), columns=["a", "b"])


def _noiseless_tree(monkeypatch):
    """The mutant: dp-density with the PrivTree split noise removed (the charge unchanged)."""
    import privclust_plugins._privtree as tree

    original = tree.privtree
    monkeypatch.setattr(tree, "privtree", lambda unit, noise, **kw: original(unit, np.zeros_like(noise), **kw))


def test_empty_region_neighbour_adds_a_record_far_from_every_record():
    frame = _three_quadrants()
    (pair,) = pt.empty_region_pairs(frame, QUADRANTS)
    assert len(pair.second) == len(frame) + 1 and pair.first is frame
    added = pair.second.iloc[-1].to_numpy()
    assert added.tolist() == [10.0, 0.0]  # the corner of the empty quadrant
    assert "empty space at (a = 10, b = 0)" in pair.description and "(add/remove)" in pair.description
    # without bounds: the data's range; many columns: the corner opposite the data's mean, still in the box
    wide = pt.example_frame(n=30, d=13, seed=2)
    (far,) = pt.empty_region_pairs(wide)
    point = far.second.iloc[-1].to_numpy()
    assert np.all((point == wide.min().to_numpy()) | (point == wide.max().to_numpy()))


def test_the_kits_audit_fails_dp_density_with_a_noiseless_tree_and_passes_the_real_one(registry, monkeypatch):
    """With the tree's noise removed, the audit the kit runs (search=False)
    reported PASSED: its add/remove neighbour put the record at the corner
    farthest from record 0, next to the data, where no split changes. A
    record added in the empty quadrant makes that grid cell split (1 > 0)
    every time, and never without it: the bound is far above the charge."""
    frame = _three_quadrants()
    component = registry.create("clusterers", "dp-density", epsilon=1.0, bounds=QUADRANTS, max_nodes=2048)
    pt.check_privacy_audit(component, frame, "clusterers", registry)  # the real one passes
    _noiseless_tree(monkeypatch)
    monkeypatch.setattr(pt, "_AUDITS", {})  # the kit remembers audits by the component's state, not by its code
    corner = pt.audit_component(component, frame, pairs=pt.neighbour_pairs(frame, "add/remove", bounds=QUADRANTS),
                                trials=pt.KIT_TRIALS, seed=11, registry=registry, float_support=False, search=False)
    assert corner.verdict == "PASSED", str(corner)  # what the kit's neighbour saw before
    with pytest.raises(AssertionError, match=r"lower bound on epsilon exceeds what the ledger charges") as failed:
        pt.check_privacy_audit(component, frame, "clusterers", registry)
    assert "empty space" in str(failed.value)
