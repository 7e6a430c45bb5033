"""Every claim holds: the host's verification of the released data, the
verdict, checkable partitions, the audit written by the runner, the
run-time snapshot, read-only observers, the seed kept nowhere, finiteness."""

from __future__ import annotations

import json
import pickle
import re
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import (
    Budget,
    Masked,
    NothingProtectedWarning,
    Partition,
    PrivacyContext,
    PrivclustError,
    Registry,
    hookimpl,
    param,
)
from privclust.accounting import LedgerEntry, _SeedStream
from privclust.cli import main
from privclust.datasets import table1
from privclust.verify import verdict

SEED = 987654321


# ---------------------------------------------------------------------------
# Fake components
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Jitter:
    """Adds a tiny different amount to every record (every record unique),
    yet claims k-anonymity: a false claim."""

    name: ClassVar[str] = "jitter"
    k: int = param(int, default=3)

    def mask(self, data, context):
        values = data.to_numpy(dtype=float) + np.arange(len(data))[:, None] * 1e-3
        context.record(f"every released combination is shared by at least {self.k} records",
                       guarantee="k-anonymity", details={"k": self.k})
        return Masked(data=pd.DataFrame(values, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class Blocks:
    """Replaces each block of k consecutive records by its mean: true k-anonymity."""

    name: ClassVar[str] = "blocks"
    k: int = param(int, default=3)

    def mask(self, data, context):
        values = data.to_numpy(dtype=float)
        groups = np.minimum(np.arange(len(data)) // self.k, len(data) // self.k - 1)
        means = np.vstack([values[groups == g].mean(axis=0) for g in range(groups.max() + 1)])
        context.record(f"k-anonymity with k = {self.k}", guarantee="k-anonymity")
        return Masked(data=pd.DataFrame(means[groups], index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class HalfKept:
    """Leaves the first half of the records unchanged; claims probabilistic k-anonymity."""

    name: ClassVar[str] = "half-kept"

    def mask(self, data, context):
        values = data.to_numpy(dtype=float).copy()
        half = len(data) // 2
        values[half:] = values[half:].mean(axis=0)
        context.record("probabilistic k-anonymity for k = 3", guarantee="probabilistic k-anonymity",
                       details={"k": 3})
        context.record("the released values are pleasant", guarantee="pleasantness")
        return Masked(data=pd.DataFrame(values, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class SplitSpender:
    """Spends epsilon on each of two parts it says are disjoint, and records the
    sizes of the data it was given."""

    name: ClassVar[str] = "split-spender"
    epsilon: float = param(float, default=0.5)
    seen: ClassVar[list] = []

    def mask(self, data, context):
        SplitSpender.seen.append(len(data))
        for part in ("a", "b"):
            context.spend(epsilon=self.epsilon, mechanism="laplace", sensitivity=1.0, relation="replace-one",
                          covers=f"the values of part {part}", partition=("half", part))
        noisy = data.to_numpy(dtype=float) + context.rng.laplace(0, 1 / self.epsilon, data.shape)
        return Masked(data=pd.DataFrame(noisy, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class Broken:
    """Releases NaN in the column named ``column`` (or inf centres as a clusterer)."""

    name: ClassVar[str] = "broken"
    column: str = param(str, default="b")

    def mask(self, data, context):
        out = data.astype(float).copy()
        out[self.column] = np.nan
        return Masked(data=out)


@attrs.frozen(kw_only=True)
class InfCentres:
    name: ClassVar[str] = "inf-centres"

    def fit(self, data, context):
        centres = np.array([[np.inf] * data.shape[1]])
        return Partition(labels=np.zeros(len(data), dtype=int), centres=centres, columns=tuple(data.columns))


class Fakes:
    @hookimpl
    def privclust_register_maskers(self, register):
        for cls in (Jitter, Blocks, HalfKept, SplitSpender, Broken):
            register(cls)

    @hookimpl
    def privclust_register_clusterers(self, register):
        register(InfCentres)


@pytest.fixture
def reg():
    return Registry(plugins=[Fakes()], use_env=False)


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    return pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30)})


# ---------------------------------------------------------------------------
# Host verification
# ---------------------------------------------------------------------------


def test_a_recipe_that_changes_nothing_warns_loudly_and_claims_nothing():
    with pytest.warns(NothingProtectedWarning, match="CHANGES NO COLUMN"):
        release = privclust.run({"steps": [{"use": "mdav", "k": 3}]}, table1(), seed=1)
    assert release.verdict.startswith("No differential-privacy guarantee: the release changes no column")
    assert "epsilon 0" not in repr(release) and "epsilon 0" not in release.to_html(plots=False)
    claims = release.ledger.of_kind("guarantee")
    assert claims and all(e.status == "void" for e in claims)
    assert all(e.statement.startswith("mdav claims: ") and "protects nothing" in e.statement for e in claims)
    overall = release.ledger.of_kind("verified")[-1]
    assert overall.details["changed_columns"] == [] and overall.details["verbatim_records"] == 12
    assert release.verification["verbatim_records"] == 12


def test_a_false_k_anonymity_claim_is_refused(reg, data):
    release = privclust.run({"steps": [{"use": "jitter", "k": 3}]}, data, registry=reg)
    entry = release.ledger.of_kind("guarantee")[0]
    assert entry.status == "refuted"
    assert entry.statement.startswith("Claimed by jitter, does NOT hold: k-anonymity with k = 3")
    assert "30 of 30 records share their combination" in entry.statement
    assert entry.claim == "every released combination is shared by at least 3 records"
    assert "does NOT hold" in release.verdict and "Verified by the host" not in release.verdict
    report = release.report()
    assert report["verification"]["claims"][0]["status"] == "refuted"


def test_a_true_k_anonymity_claim_is_verified(reg, data):
    release = privclust.run({"steps": [{"use": "blocks", "k": 3}]}, data, registry=reg)
    entry = release.ledger.of_kind("guarantee")[0]
    assert entry.status == "verified"
    assert "Verified by the host: every released combination of a, b is shared by at least 3" in entry.statement
    assert release.verdict == ("No differential-privacy guarantee: no step is differentially private. Verified by "
                               "the host: k-anonymity with k = 3 of a, b (every released combination is shared by "
                               "at least 3 records).")
    step = release.verification["steps"][0]
    assert step["min_group_size"] == 3 and step["groups"] == 10 and step["verbatim_by_step"] == 0


def test_the_built_in_crisp_microaggregation_is_verified_on_census_like_data():
    release = privclust.run({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]},
                            table1(), seed=1)
    statuses = {e.status for e in release.ledger.of_kind("guarantee")}
    assert statuses == {"verified"}
    assert "k-anonymity with k = 3" in release.verdict


def test_probabilistic_claims_get_the_verbatim_count_and_other_claims_are_claims(reg, data):
    release = privclust.run({"steps": [{"use": "half-kept"}]}, data, registry=reg)
    prob, other = release.ledger.of_kind("guarantee")
    assert prob.status == "claimed" and "15 of 30 records were released verbatim" in prob.statement
    assert prob.statement.startswith("half-kept claims: probabilistic k-anonymity")
    assert other.statement == "half-kept claims: the released values are pleasant" and other.status == "claimed"
    assert "15 of 30 records are released verbatim" in release.verdict
    step = release.ledger.of_kind("verified")[0]
    assert step.component == "privclust (host)" and step.details["verbatim_by_step"] == 15


def test_the_verdict_of_a_dp_release_names_epsilon_relation_and_what_is_not_covered():
    recipe = {"privacy": {"epsilon": 1.0},
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"exp16": [0, 100]}, "columns": ["exp16"]}]}
    release = privclust.run(recipe, table1(), seed=1)
    assert release.verdict.startswith("ε-differentially private (ε = 1, δ = 0) under replace-one for every "
                                      "released value of column(s) exp16")
    assert "the columns released as in the original (exp7, total)" in release.verdict
    # the ledger sees one run: a second release from the same records spends again
    assert ("the columns released as in the original (exp7, total); " + privclust.verify.UNCHANGED_CHECK + "; "
            + privclust.verify.OTHER_RELEASES + ". These DP" in release.verdict)
    # the sensitivity is the component's statement: the verdict says whose, and that the host cannot check it
    assert release.verdict.endswith("These DP statements are the claims of step 0 (laplace): the host composes "
                                    "them but cannot check a sensitivity (privclust audit tests one empirically). "
                                    + privclust.verify.SEEDED_CAVEAT)
    assert release.guarantee == release.verdict
    assert list(release.report())[0] == "verdict"
    assert release.report()["verdict"] == release.verdict
    html = release.to_html(plots=False)
    assert html.index("Verdict:") < html.index("Processes applied")
    assert release.verdict in repr(release)


def test_a_leak_or_a_non_dp_step_voids_the_dp_verdict():
    context = PrivacyContext(Budget(epsilon=1.0))
    context.spend(epsilon=1.0, mechanism="laplace", sensitivity=1.0, relation="replace-one", covers="a count")
    checks = {"changed_columns": ["a"], "unchanged_columns": [], "records": 3, "verbatim_records": 0, "claims": []}
    clean = verdict(context.ledger, context.accountant, [], checks)
    assert clean.startswith("ε-differentially private (ε = 1, δ = 0) under replace-one for a count")
    assert "the claims of a component: the host composes them" in clean  # a release made outside any step
    context.ledger._append(LedgerEntry(seq=len(context.ledger), kind="leak", step=0, step_id="s", component="x",
                                       statement="bounds: taken from the data", mechanism="bounds"))
    text = verdict(context.ledger, context.accountant, [], checks)
    assert text.startswith("No differential-privacy guarantee: parameters were taken from the data without "
                           "spending budget (bounds)")
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"exp16": [0, 100]}, "columns": ["exp16"]},
                        {"use": "microaggregation", "columns": ["exp7", "total"]}]}
    mixed = privclust.run(recipe, table1(), seed=1)
    assert mixed.verdict.startswith("No differential-privacy guarantee: step 1 (microaggregation, "
                                    "microaggregation) released the values of exp7, total without differential "
                                    "privacy")


# ---------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------


def test_a_partition_a_plugin_declares_is_charged_sequentially(reg, data):
    release = privclust.run({"steps": [{"use": "split-spender", "epsilon": 0.5}]}, data, registry=reg, seed=1)
    assert release.spent == (1.0, 0.0)
    dp = release.ledger.of_kind("dp")
    assert all(e.partition is None and "charged sequentially" in e.statement for e in dp)
    with pytest.raises(privclust.BudgetExceededError):
        privclust.run({"privacy": {"epsilon": 0.6}, "steps": [{"use": "split-spender", "epsilon": 0.5}]}, data,
                      registry=reg)


def test_strata_of_a_public_column_run_each_stratum_alone_and_compose_in_parallel(reg, data):
    frame = data.assign(region=np.repeat(["north", "south", "east"], 10))
    SplitSpender.seen.clear()
    recipe = {"privacy": {"epsilon": 1.0}, "roles": {"strata": "region"},
              "steps": [{"use": "split-spender", "epsilon": 0.5, "columns": ["a", "b"]}]}
    release = privclust.run(recipe, frame, registry=reg, seed=1)
    assert SplitSpender.seen == [10, 10, 10]  # each call saw one part only
    assert release.spent == (1.0, 0.0)  # 2 x 0.5 within a part, max over the 3 parts
    assert {e.partition for e in release.ledger.of_kind("dp")} == {("region", r) for r in ("north", "south", "east")}
    assert release.data["region"].equals(frame["region"])
    assert "with the public stratum column(s) region fixed" in release.verdict
    assert any(e.mechanism == "strata" for e in release.ledger.of_kind("verified"))
    with pytest.raises(privclust.RecipeError, match="stratum column 'a'"):
        privclust.run({"roles": {"strata": "a"}, "steps": [{"use": "split-spender", "columns": ["a"]}]}, frame,
                      registry=reg)
    with pytest.raises(privclust.RecipeError, match=r"\[roles\] strata = 'region'"):
        privclust.run({"privacy": {"partition_by": "region"}, "steps": [{"use": "split-spender"}]}, frame,
                      registry=reg)


# ---------------------------------------------------------------------------
# The audit, the snapshot, the observers
# ---------------------------------------------------------------------------


def test_blocking_or_removing_the_host_plugin_cannot_remove_process_entries(data):
    registry = Registry(use_env=False).load()
    registry.unregister("privclust.accounting")
    release = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [-5, 5], "b": [-5, 5]}}]},
                            data, registry=registry, seed=1)
    assert [e.kind for e in release.ledger].count("process") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privclust.PrivclustWarning)
        blocked = Registry(block=["privclust.accounting"], use_env=False)
        release = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0,
                                            "bounds": {"a": [-5, 5], "b": [-5, 5]}}]}, data, registry=blocked)
    assert [e.kind for e in release.ledger] == ["dp", "process", "verified", "verified"]


def test_observers_get_a_read_only_view(reg, data):
    seen = []

    class Observer:
        @hookimpl
        def privclust_step_finished(self, step, outcome, context):
            seen.append(context)
            assert not hasattr(context, "spend") and not hasattr(context, "record")
            assert not hasattr(context, "rng")
            with pytest.raises(attrs.exceptions.FrozenInstanceError):
                outcome.result = None

    reg.register(Observer(), "observer")
    release = privclust.run({"steps": [{"use": "blocks"}]}, data, registry=reg)
    view = seen[0]
    assert isinstance(view, privclust.ContextView)
    assert [e.kind for e in view.entries] == ["guarantee", "process"]
    view.ledger._append(view.entries[0])  # a copy: the run's ledger is untouched
    view.entries[1].details["records"] = -1
    assert [e.kind for e in release.ledger][:2] == ["guarantee", "process"]
    assert release.ledger[1].details["records"] == len(data)


def test_provenance_is_a_snapshot_of_the_run(reg, data):
    release = privclust.run({"steps": [{"use": "blocks"}]}, data, registry=reg)
    before = release.report()["steps"][0]
    reg.unregister(reg.plugin_names()[-1])  # the registry changes after the run
    for name in list(reg.plugin_names()):
        if name not in ("privclust.accounting",):
            reg.unregister(name)
    after = release.report()["steps"][0]
    assert after["plugin"] == before["plugin"] != "?"
    assert after["distribution"] == before["distribution"] and after["version"] == before["version"]
    assert release.report()["plugins"] == json.loads(release.to_json())["plugins"]


# ---------------------------------------------------------------------------
# The seed
# ---------------------------------------------------------------------------


def _contains_seed(value) -> bool:
    if isinstance(value, np.random.SeedSequence):
        return True
    return str(SEED) in repr(value)


def test_the_context_keeps_no_copy_of_the_seed():
    context = PrivacyContext(seed=SEED)
    assert not any(_contains_seed(v) for v in vars(context).values())
    with context.step(0, "s", "x"):
        rng = context.rng
        assert not isinstance(rng.bit_generator.seed_seq, np.random.SeedSequence)
        assert not any(_contains_seed(v) for v in vars(context).values())
    assert SEED.to_bytes(4, "little") not in pickle.dumps(rng)


def test_the_streams_are_numpys_own():
    context = PrivacyContext(seed=7)
    with context.step(0, "s", "x"):
        first = context.rng.random(4)
        blocks = [g.random(2) for g in context.spawn(3)]
    root = np.random.SeedSequence(7)
    child = root.spawn(1)[0]
    assert np.array_equal(first, np.random.default_rng(child).random(4))
    assert all(np.array_equal(b, np.random.default_rng(c).random(2)) for b, c in zip(blocks, child.spawn(3),
                                                                                      strict=True))
    seeds = PrivacyContext(seed=7).spawn_seeds(2)
    for ours, theirs in zip(seeds, np.random.SeedSequence(7).spawn(2), strict=True):
        assert np.array_equal(ours.generate_state(4, np.uint64), theirs.generate_state(4, np.uint64))
    again = PrivacyContext(seed=_SeedStream.of(np.random.SeedSequence(7)))
    with again.step(0, "s", "x"):
        assert np.array_equal(again.rng.random(4), first)


def test_no_seed_in_the_release_its_pickle_or_its_reports(tmp_path):
    release = privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 3}]}, table1(), seed=SEED)
    blob = pickle.dumps(release)
    assert str(SEED).encode() not in blob and SEED.to_bytes(4, "little") not in blob
    assert str(SEED) not in release.to_json() and str(SEED) not in release.to_html(plots=False)
    copy = pickle.loads(blob)
    assert copy.verdict == release.verdict and copy.data.equals(release.data)
    assert copy.original.equals(release.original)  # it holds the original: say so in the docs
    assert copy.report(non_disclosive=True)["steps"] == release.report(non_disclosive=True)["steps"]


# ---------------------------------------------------------------------------
# Finiteness
# ---------------------------------------------------------------------------


def test_a_release_that_is_not_finite_is_refused(reg, data):
    with pytest.raises(PrivclustError, match=r"step 0 \('broken', broken\) released 30 NaN values in column 'b'"):
        privclust.run({"steps": [{"use": "broken"}]}, data, registry=reg)
    with pytest.raises(PrivclustError, match=r"inf-centres\) released 2 infinite centre values"):
        privclust.run({"steps": [{"use": "inf-centres"}]}, data, registry=reg)


def test_the_cli_refuses_a_non_finite_release_and_writes_nothing(tmp_path, capsys, monkeypatch):
    table1().to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "broken"\ncolumn = "exp7"\n', encoding="utf-8")
    monkeypatch.setattr(privclust.cli, "get_registry", lambda: Registry(plugins=[Fakes()], use_env=False))
    code = main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv"),
                 "-q"])
    assert code == 1
    assert "column 'exp7'" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def _run_cli(tmp_path, *extra):
    return main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), *extra])


def test_the_summary_line_opens_with_the_verdict_and_seeds_stay_off_the_command_line(tmp_path, capsys,
                                                                                      monkeypatch):
    table1().to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "mdav"\nk = 3\n', encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NothingProtectedWarning)
        assert _run_cli(tmp_path, "-o", str(tmp_path / "a.csv")) == 0
    err = capsys.readouterr().err
    summary = err.splitlines()[-2:]
    assert summary[0].startswith("No differential-privacy guarantee: the release changes no column")
    assert summary[1].startswith("wrote ") and "epsilon 0" not in err

    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "fuzzy-microaggregation"\nk = 3\n', encoding="utf-8")
    assert _run_cli(tmp_path, "-o", str(tmp_path / "seed.csv"), "--seed", "5", "-q") == 0
    (tmp_path / "seed.txt").write_text("5\n", encoding="utf-8")
    assert _run_cli(tmp_path, "-o", str(tmp_path / "file.csv"), "--seed-file", str(tmp_path / "seed.txt"), "-q") == 0
    monkeypatch.setenv("PRIVCLUST_SEED", "5")
    assert _run_cli(tmp_path, "-o", str(tmp_path / "env.csv"), "-q") == 0
    seeded = (tmp_path / "seed.csv").read_text()
    assert (tmp_path / "file.csv").read_text() == seeded == (tmp_path / "env.csv").read_text()
    capsys.readouterr()
    assert _run_cli(tmp_path, "-o", str(tmp_path / "x.csv"), "--seed", "5", "--seed-file",
                    str(tmp_path / "seed.txt")) == 1
    assert "either --seed or --seed-file" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text("five", encoding="utf-8")
    assert _run_cli(tmp_path, "-o", str(tmp_path / "x.csv"), "--seed-file", str(tmp_path / "bad.txt")) == 1
    assert "non-negative whole number" in capsys.readouterr().err
    monkeypatch.setenv("PRIVCLUST_SEED", "-3")
    assert _run_cli(tmp_path, "-o", str(tmp_path / "x.csv")) == 1
    assert "PRIVCLUST_SEED" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_missing_values_in_an_untouched_column_do_not_count_as_a_change():
    frame = pd.DataFrame({"name": ["x", None, "z"] * 4, "a": np.arange(12.0), "b": np.arange(12.0) % 3})
    with pytest.warns(NothingProtectedWarning):
        release = privclust.run({"steps": [{"use": "mdav", "k": 3, "columns": ["a", "b"]}]}, frame)
    assert release.verification["changed_columns"] == []
    assert release.verification["unchanged_columns"] == ["name", "a", "b"]


def test_with_strata_groups_are_counted_within_each_stratum(reg):
    # two parts whose blocks of 3 share their means across parts: 6 records per combination overall,
    # but only 3 within a part, and the part is released beside them
    frame = pd.DataFrame({"a": np.tile([0.0, 0.25, 0.5, 1.0, 1.25, 1.5], 2), "region": np.repeat(["n", "s"], 6)})
    release = privclust.run({"roles": {"strata": "region"}, "steps": [{"use": "blocks", "k": 3}]}, frame,
                            registry=reg)
    step = release.verification["steps"][0]
    assert step["min_group_size"] == 3 and step["groups"] == 4
    assert {e.status for e in release.ledger.of_kind("guarantee")} == {"verified"}


@attrs.frozen(kw_only=True)
class Unpicklable:
    name: ClassVar[str] = "unpicklable"

    def mask(self, data, context):
        return Masked(data=data + 1.0, diagnostics={"callback": lambda: None})


def test_a_release_that_cannot_pickle_says_which_step(data):
    class P:
        @hookimpl
        def privclust_register_maskers(self, register):
            register(Unpicklable)

    release = privclust.run({"steps": [{"use": "unpicklable"}]}, data, registry=Registry(plugins=[P()],
                                                                                          use_env=False))
    with pytest.raises(PrivclustError, match=r"the result of step 0 \(unpicklable, unpicklable\)"):
        pickle.dumps(release)


@attrs.frozen(kw_only=True)
class NoK:
    name: ClassVar[str] = "no-k"

    def mask(self, data, context):
        context.record("the data are anonymous", guarantee="k-anonymity")
        return Masked(data=data * 0.0)


def test_a_k_anonymity_claim_without_a_k_is_not_verified(data):
    class P:
        @hookimpl
        def privclust_register_maskers(self, register):
            register(NoK)

    release = privclust.run({"steps": [{"use": "no-k"}]}, data, registry=Registry(plugins=[P()], use_env=False))
    entry = release.ledger.of_kind("guarantee")[0]
    assert entry.status == "refuted" and entry.statement.startswith("Claimed by no-k, not verified")
    assert "claim=KAnonymity(k, columns)" in entry.statement  # the typed way to state a k
    assert release.verdict.endswith("no-k claims k-anonymity without a k the host can check: not verified.")


def test_a_dp_release_states_nothing_that_compares_released_with_original_values():
    """An attacker's event: one record's value decided whether the verdict said
    "1 of 2 records keep all their original values" (geometric noise 0 on an
    in-bounds value), a count outside every DP statement. Now the verdict, the
    ledger and the report of a DP release carry no such count. Whether a
    column changed is by content (issue 24): at an epsilon so large that the
    noise is 0, the release is its input and has no guarantee, whatever was
    spent."""
    recipe = {"steps": [{"use": "geometric", "epsilon": 1.0, "bounds": {"a": [0, 10]}, "columns": ["a"]}]}
    here, there = pd.DataFrame({"a": [5, 3], "b": [1, 2]}), pd.DataFrame({"a": [6, 3], "b": [1, 2]})
    verdicts = set()
    for seed in range(12):
        for data in (here, there):
            release = privclust.run(recipe, data, seed=seed)
            verdicts.add(release.verdict)
            written = [e.statement for e in release.ledger]
            assert not any(re.search(r"\d+ of \d+ records (keep|with|were released)", s) for s in written), written
            for report in (release.report(), release.report(non_disclosive=True)):
                assert "verbatim_records" not in report["verification"]
                assert all("verbatim_by_step" not in s for s in report["verification"]["steps"])
            assert release.verification["dp_release"] is True and "verbatim_records" in release.verification
    assert len(verdicts) == 1  # the same sentence whichever data set and whatever the noise
    huge = {"steps": [{"use": "geometric", "epsilon": 1e12, "bounds": {"a": [0, 10]}, "columns": ["a"]}]}
    with pytest.warns(NothingProtectedWarning):
        release = privclust.run(huge, here, seed=1)
    assert release.data["a"].tolist() == [5, 3]  # no noise at all: the release is the input ...
    assert release.verdict.startswith("No differential-privacy guarantee: the release changes no column")
    assert release.verification["changed_columns"] == [] and not release.dp_guarantee


def test_a_verdict_without_dp_names_the_columns_released_as_in_the_original():
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["exp16", "exp7"]}]},
                            table1(), seed=1)
    assert release.verdict.startswith("No differential-privacy guarantee: no step is differentially private. "
                                      "Released as in the original: total. ")


def test_a_clusterer_step_is_said_to_leave_every_record_as_it_was():
    """The host's entry for a clusterer followed by a masker counted the
    masker's changes against the clusterer ("left 0 of 12 records")."""
    release = privclust.run({"steps": [{"use": "mdav", "k": 3}, {"use": "microaggregation", "k": 3}]}, table1(),
                            seed=1)
    first = [e for e in release.ledger.of_kind("verified") if e.step == 0][0]
    assert "step 0 (mdav) left 12 of 12 records verbatim" in first.statement
    assert "in the released file 0 of 12 records are" in first.statement


def test_a_clusterer_after_a_noise_step_is_not_said_to_leave_the_original_values():
    """A clusterer leaves its columns as it finds them: after a noise step, noisy values. The host's entry said
    "step 1 (mdav) left 12 of 12 records with all their original values of exp16, exp7" (audit16b)."""
    release = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["exp16"],
                                        "bounds": {"exp16": [0, 100]}},
                                       {"use": "mdav", "k": 3, "columns": ["exp16", "exp7"]}]}, table1(), seed=1)
    second = [e for e in release.ledger.of_kind("verified") if e.step == 1][0]
    kept = int((release.data["exp16"] == table1()["exp16"]).sum())
    assert kept == 0
    assert f"step 1 (mdav) left {kept} of 12 records verbatim (identical on exp16, exp7 to an original record" \
        in second.statement
    assert release.verification["steps"][1]["verbatim_by_step"] == kept


def test_the_hosts_rounding_keeps_a_group_matched_through_a_missing_value():
    """The host's controlled rounding treated a record with a missing value
    apart from its group-mates (the equality cannot be solved on it), which
    broke a group that matched under sdcMicro's convention, and the claim was
    refuted on the released file. The rounding now gives that record its
    group-mates' rounded values, and the claim is verified."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"a": pd.array(rng.integers(0, 500, 30), dtype="Int64"),
                         "b": pd.array(rng.integers(0, 500, 30), dtype="Int64")})
    data["t"] = (data.a + data.b).astype("Int64")
    data.loc[[3], "a"] = pd.NA
    release = privclust.run({"constraints": [{"use": "linear", "rules": ["t = a + b"]}],
                             "steps": [{"use": "microaggregation", "k": 3}]}, data, seed=1)
    claim = release.ledger.of_kind("guarantee")[0]
    assert claim.status == "verified" and "a missing value counted as matching any value" in claim.statement
    rounding = next(e for e in release.ledger if e.mechanism == "integer rounding")
    assert rounding.details["records_rounded_with_their_matches"] == 1
    assert rounding.details["records_split_from_matches"] == 0


def test_a_k_anonymity_broken_after_its_step_is_judged_on_the_steps_output_and_the_file_on_its_own():
    """A later step can break a group the claim's step formed. A step's claim
    is checked on the values that step released (issue 24: never on a later
    step's), and the whole released file is checked on its own: the verdict
    says first that the file is not k-anonymous, then that the claim holds on
    the step's values only."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"a": rng.uniform(0, 500, 30), "b": rng.uniform(0, 500, 30)})
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3},
                                       {"use": "microaggregation", "k": 2, "columns": ["a"]}]}, data, seed=1)
    claim = release.ledger.of_kind("guarantee")[0]
    assert claim.status == "verified" and "Verified by the host on the values step 0 released" in claim.statement
    assert "so the claim does NOT hold on the released file" in claim.statement
    whole = release.verification["whole_file"]
    assert whole["k"] == 3 and not whole["holds"] and whole["records_in_small_groups"] > 0
    opening = release.verdict.split(". ", 2)[1]
    assert opening.startswith("The released file is NOT k-anonymous with k = 3")
    assert "Verified by the host on the values step 0 released only" in release.verdict


# ---------------------------------------------------------------------------
# A seeded run's DP verdict is conditional on the seed staying secret
# ---------------------------------------------------------------------------


def test_a_seeded_dp_verdict_says_the_seed_must_stay_secret_because_the_seed_removes_the_noise():
    """The attack the caveat is about: with the recipe (it is in the report)
    and a guessed seed, running the same recipe on a stand-in of the same
    shape draws the same noise, and subtracting it gives back every clipped
    original value; trying small seeds in turn finds the seed."""
    rng = np.random.default_rng(5)
    secret = pd.DataFrame({"a": rng.uniform(0, 10, 60), "b": rng.uniform(0, 10, 60)})
    recipe = {"privacy": {"epsilon": 1.0},
              "steps": [{"use": "laplace", "columns": ["a"], "epsilon": 1.0, "bounds": {"a": [0, 10]}}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeded = privclust.run(recipe, secret, seed=3)
        found = None
        for guess in range(10):
            stand_in = privclust.run(recipe, secret.assign(a=0.0), seed=guess).data["a"].to_numpy()
            recovered = seeded.data["a"].to_numpy() - stand_in
            if np.all((recovered > -1e-3) & (recovered < 10 + 1e-3)):
                found = recovered
                break
        unseeded = privclust.run(recipe, secret)
    assert found is not None and np.abs(found - secret["a"].to_numpy()).max() < 1e-4  # every value, noise removed
    assert seeded.verdict.startswith("ε-differentially private")
    assert privclust.verify.SEEDED_CAVEAT in seeded.verdict
    assert "seed" not in unseeded.verdict and unseeded.verdict.startswith("ε-differentially private")
    page = seeded.to_html(plots=False)
    assert "whoever has it can redraw the run" in page and "random choices, its noise included" in page


def test_a_seeded_run_without_dp_gets_no_seed_caveat_in_its_verdict():
    data = table1()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "microaggregation", "k": 3}]}, data, seed=1)
    assert release.verdict.startswith("No differential-privacy guarantee")
    assert privclust.verify.SEEDED_CAVEAT not in release.verdict


def test_a_seeded_run_names_the_steps_whose_random_choices_the_seed_redraws():
    """Fuzzy microaggregation's protection (probabilistic k-anonymity, the
    transparency risk) takes the draw of centres to be unknown; under a seed
    the draw is a function of the seed and the data, redrawn exactly."""
    recipe = {"steps": [{"use": "fuzzy-microaggregation", "k": 3}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one, two = (privclust.run(recipe, table1(), seed=7) for _ in range(2))
        fresh = privclust.run(recipe, table1())
        crisp = privclust.run({"steps": [{"use": "microaggregation", "k": 3}]}, table1(), seed=7)
    pd.testing.assert_frame_equal(one.data, two.data)  # the same choices, redrawn
    assert one.random_steps == (0,) and fresh.random_steps == (0,)
    assert one.verdict.endswith(privclust.verify.seeded_draws("step 0 (fuzzy-microaggregation)"))
    assert "seed" not in fresh.verdict
    # MDAV draws nothing: the seed redraws the rows' order only
    assert crisp.random_steps == () and crisp.verdict.endswith(privclust.verify.seeded_draws())
    assert "random choices" not in crisp.verdict


def test_a_dp_clusterer_after_a_noise_step_is_not_called_both_dp_and_not():
    """Red-team audit: laplace on x, y then a DP clusterer on them: the verdict called the labels post-processing of
    DP values, then listed the clusterer's own "not covered" (labels from the raw records, no DP guarantee)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(np.vstack([rng.normal([3, 3], 1, (150, 2)), rng.normal([7, 7], 1, (150, 2))]),
                         columns=["x", "y"])
    bounds = {"x": [0, 10], "y": [0, 10]}
    for clusterer in ({"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": bounds},
                      {"use": "dp-density", "epsilon": 1.0, "bounds": bounds}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release = privclust.run({"privacy": {"epsilon": 1e6},
                                     "steps": [{"use": "laplace", "epsilon": 2.0, "bounds": bounds}, clusterer]},
                                    frame, seed=1)
        verdict = release.verdict
        assert "the label column 'cluster' of step 1" in verdict and "(post-processing)" in verdict
        rest = verdict.split("not covered", 1)[1]
        assert "not a differentially private output" not in rest and "own raw values" not in rest, clusterer["use"]


def test_dp_dpc_grid_reports_the_number_of_clusters_it_used():
    """Red-team audit: n_clusters = 30 on a 4 x 4 grid made 16 clusters; the report showed 30 as the value used."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(np.vstack([rng.normal([5, 5], 1, (300, 2)), rng.normal([15, 15], 1, (300, 2))]),
                         columns=["x", "y"])
    release = privclust.run({"privacy": {"epsilon": 10.0}, "steps": [
        {"use": "dp-dpc-grid", "epsilon": 1.0, "dc": 1.0, "points_per_dim": 4, "n_clusters": 30,
         "bounds": {"x": [-5, 25], "y": [-5, 25]}}]}, frame, seed=1)
    part = release.step(0).partition
    assert part.diagnostics[privclust.EFFECTIVE_PARAMS]["n_clusters"] == part.centres.shape[0] < 30
