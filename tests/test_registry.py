"""The registry: loading order, blocking, duplicates, broken plugins, swaps, hooks."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import (
    DuplicateComponentError,
    Masked,
    ParameterError,
    PluginError,
    RecipeError,
    Registry,
    UnknownComponentError,
    hookimpl,
    param,
)


class FakeDist:
    def __init__(self, name: str, version: str = "1.0"):
        self.metadata = {"Name": name}
        self.version = version


class FakeEntryPoint:
    """Duck-types importlib.metadata.EntryPoint for a plugin object."""

    def __init__(self, name: str, plugin: object, dist: str = "thirdparty", version: str = "1.0"):
        self.name = name
        self.value = f"fake_module_{name}"
        self.dist = FakeDist(dist, version)
        self._plugin = plugin

    def load(self) -> object:
        if isinstance(self._plugin, Exception):
            raise self._plugin
        return self._plugin


@attrs.frozen(kw_only=True)
class Doubler:
    """A masker multiplying its columns by a factor."""

    name: ClassVar[str] = "doubler"
    factor: float = param(float, default=2.0, gt=0, doc="the factor")

    def mask(self, data, context):
        return Masked(data=data * self.factor)


@attrs.frozen(kw_only=True)
class FakeLaplace:
    """A replacement 'laplace' that adds nothing but records that it ran."""

    name: ClassVar[str] = "laplace"
    epsilon: float | None = param(float, default=None, gt=0)
    bounds: object = param(default=None)

    def release(self, values, *, sensitivity, epsilon, delta=0.0, context, relation, covers, not_covered="", **kw):
        context.spend(epsilon=epsilon, mechanism="fake-laplace", sensitivity=sensitivity, relation=relation,
                      covers=covers)
        return np.asarray(values, dtype=float)

    def perturb(self, data, context):
        context.spend(epsilon=self.epsilon, mechanism="fake-laplace", sensitivity=1.0, relation="test",
                      covers="nothing")
        return Masked(data=data.copy())


def plugin_with(*classes, kind: str = "maskers"):
    hook = f"privclust_register_{kind}"

    class Plugin:
        pass

    def register_all(self, register):
        for cls in classes:
            register(cls)

    setattr(Plugin, hook, hookimpl(register_all))
    return Plugin()


def test_loads_builtins_with_their_distribution(registry):
    info = registry.info("noise_mechanisms", "laplace")
    assert info.plugin == "noise"
    assert info.distribution == "privclust"
    names = [p.name for p in registry.plugins()]
    assert names[0] == "privclust.accounting"
    assert "noise" in names


def test_import_loads_no_plugin():
    code = "import sys, privclust; print('privclust_plugins.noise' in sys.modules, privclust.registry._session)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "None"]


def test_load_order_builtins_then_other_entry_points_then_session():
    eps = [
        FakeEntryPoint("zeta", plugin_with(), dist="third"),
        FakeEntryPoint("bravo", plugin_with(), dist="privclust"),
        FakeEntryPoint("alpha", plugin_with(), dist="third"),
        FakeEntryPoint("charlie", plugin_with(), dist="privclust"),
    ]
    session = plugin_with(Doubler)
    reg = Registry(entry_points=eps, plugins=[session], use_env=False).load()
    names = [p.name for p in reg.plugins()]
    assert names[:5] == ["privclust.accounting", "bravo", "charlie", "alpha", "zeta"]
    assert names[5].endswith("Plugin")
    assert reg.get("maskers", "doubler") is Doubler
    assert [p.builtin for p in reg.plugins()[1:5]] == [True, True, False, False]


def test_block_a_plugin_by_argument_and_by_environment(monkeypatch):
    eps = [FakeEntryPoint("extra", plugin_with(Doubler))]
    assert "doubler" in Registry(entry_points=eps, use_env=False).names("maskers")
    assert "doubler" not in Registry(entry_points=eps, block=["extra"], use_env=False).names("maskers")
    monkeypatch.setenv("PRIVCLUST_DISABLE_PLUGINS", " other , extra")
    reg = Registry(entry_points=eps)
    with pytest.warns(privclust.PrivclustWarning, match="'other', which is not installed"):
        assert "doubler" not in reg.names("maskers")
    assert reg.is_blocked("extra")


def test_block_one_component_of_a_plugin(monkeypatch):
    monkeypatch.setenv("PRIVCLUST_DISABLE_PLUGINS", "noise:laplace")
    reg = Registry().load()
    assert "laplace" not in reg.names("noise_mechanisms")
    assert {"gaussian", "geometric"} <= set(reg.names("noise_mechanisms"))


def test_duplicate_component_names_name_both_plugins():
    eps = [FakeEntryPoint("one", plugin_with(Doubler), dist="dist-one"),
           FakeEntryPoint("two", plugin_with(Doubler), dist="dist-two", version="2.5")]
    reg = Registry(entry_points=eps, use_env=False)
    with pytest.raises(DuplicateComponentError) as err:
        reg.names("maskers")
    text = str(err.value)
    assert "'one'" in text and "dist-one" in text and "'two'" in text and "dist-two 2.5" in text
    assert "PRIVCLUST_DISABLE_PLUGINS=one:doubler" in text


def test_unknown_component_lists_close_matches(registry):
    with pytest.raises(UnknownComponentError) as err:
        registry.get("noise_mechanisms", "laplase")
    assert "did you mean 'laplace'" in str(err.value)
    assert not isinstance(err.value, KeyError)


def test_swap_a_builtin_by_blocking_it_and_registering_another(frame):
    reg = Registry(block=["noise:laplace"], plugins=[plugin_with(FakeLaplace, kind="noise_mechanisms")],
                   use_env=False)
    info = reg.info("noise_mechanisms", "laplace")
    assert info.cls is FakeLaplace
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}, "columns": ["a"]}]}
    release = privclust.run(recipe, frame, seed=1, registry=reg)
    assert release.data.equals(frame)  # the fake adds no noise
    assert release.ledger.of_kind("dp")[0].mechanism == "fake-laplace"
    # without blocking, the same plugin is a duplicate
    with pytest.raises(DuplicateComponentError):
        Registry(plugins=[plugin_with(FakeLaplace, kind="noise_mechanisms")], use_env=False).names("maskers")


def test_a_plugin_that_fails_to_import():
    eps = [FakeEntryPoint("broken", ModuleNotFoundError("No module named 'nope'"), dist="broken-dist")]
    with pytest.raises(PluginError) as err:
        Registry(entry_points=eps, use_env=False).load()
    text = str(err.value)
    assert "'broken'" in text and "broken-dist" in text and "nope" in text
    assert "PRIVCLUST_DISABLE_PLUGINS=broken" in text
    # and blocking it is the way out
    Registry(entry_points=eps, block=["broken"], use_env=False).load()


def test_a_plugin_implementing_an_unknown_hook():
    class Typo:
        @hookimpl
        def privclust_register_maskerz(self, register):
            pass

    with pytest.raises(PluginError) as err:
        Registry(entry_points=[FakeEntryPoint("typo", Typo())], use_env=False).load()
    assert "privclust_register_maskers" in str(err.value)
    assert "'typo'" in str(err.value)


def test_a_plugin_with_a_wrong_hook_signature():
    class Wrong:
        @hookimpl
        def privclust_register_maskers(self, register, colour):
            pass

    with pytest.raises(PluginError) as err:
        Registry(entry_points=[FakeEntryPoint("wrong", Wrong())], use_env=False).load()
    assert "privclust_register_maskers(register" in str(err.value)
    assert "colour" in str(err.value)


def test_a_hook_without_the_marker_is_reported():
    unmarked = types.SimpleNamespace(privclust_register_maskers=lambda register: None)
    with pytest.raises(PluginError) as err:
        Registry(entry_points=[FakeEntryPoint("bare", unmarked)], use_env=False).load()
    assert "@privclust.hookimpl" in str(err.value)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (type("NoAttrs", (), {"name": "x", "mask": lambda self, d, c: None}), "attrs class"),
        (attrs.frozen(type("NoName", (), {"mask": lambda self, d, c: None})), "class attribute name"),
        (attrs.frozen(type("NoMethod", (), {"name": "nomethod"})), "lacks the method.s. mask"),
    ],
)
def test_registered_classes_are_checked(cls, message):
    reg = Registry(plugins=[plugin_with(cls)], use_env=False)
    with pytest.raises(PluginError, match=message):
        reg.names("maskers")


def test_reserved_step_keys_cannot_be_parameters():
    @attrs.frozen(kw_only=True)
    class Bad:
        name: ClassVar[str] = "bad"
        columns: tuple = param(tuple, default=())

        def mask(self, data, context):
            return Masked(data=data)

    with pytest.raises(PluginError, match="reserve"):
        Registry(plugins=[plugin_with(Bad)], use_env=False).names("maskers")


def test_a_plugin_that_raises_while_registering():
    class Raises:
        @hookimpl
        def privclust_register_evaluators(self, register):
            raise RuntimeError("boom")

    reg = Registry(plugins=[Raises()], use_env=False)
    with pytest.raises(PluginError, match="boom"):
        reg.components()


def test_session_registry_is_cached_and_register_replaces_on_rerun(frame):
    reg = privclust.get_registry()
    assert privclust.get_registry() is reg
    name = privclust.register(plugin_with(Doubler), name="cell")
    assert name == "cell"
    assert "doubler" in reg.names("maskers")
    # re-running the notebook cell registers a new object under the same name
    privclust.register(plugin_with(Doubler), name="cell")
    assert [p.name for p in reg.plugins()].count("cell") == 1
    release = privclust.run({"steps": [{"use": "doubler", "factor": 3}]}, frame)
    assert np.allclose(release.data.to_numpy(), 3 * frame.to_numpy())
    privclust.reset_registry()
    assert "doubler" not in privclust.get_registry().names("maskers")


def test_installed_plugin_names_cannot_be_taken_in_session(registry):
    with pytest.raises(PluginError):
        registry.register(plugin_with(Doubler), name="noise")


def test_create_reports_misspelt_parameters_and_bad_values(registry):
    with pytest.raises(RecipeError) as err:
        registry.create("noise_mechanisms", {"use": "laplace", "epsilom": 1.0}, where="steps[0]")
    assert "steps[0].epsilom" in str(err.value)
    assert "did you mean 'epsilon'" in str(err.value)
    with pytest.raises(RecipeError) as err:
        registry.create("noise_mechanisms", {"use": "laplace", "epsilon": 0})
    assert "The 'epsilon' parameter of laplace must be > 0; got 0.0." in str(err.value)
    with pytest.raises(RecipeError) as err:
        registry.create("noise_mechanisms", {"use": "laplace", "epsilon": "much"})
    assert "must be a number; got 'much'" in str(err.value)


def test_parameter_validators_raise_parameter_errors():
    with pytest.raises(ParameterError, match="must be > 0"):
        Doubler(factor=-1)
    with pytest.raises(ParameterError, match="must be a number"):
        Doubler(factor=True)
    assert Doubler(factor=3).factor == 3.0 and isinstance(Doubler(factor=3).factor, float)


def test_make_accountant_first_result_wins_over_the_builtin():
    class Strict:
        description = "charges double"

        def __init__(self, budget):
            self.budget = budget

        def total(self, entries):
            return 2 * sum(e.epsilon for e in entries if e.kind == "dp"), 0.0

        def check(self, entries, new):
            return None

    class Chooser:
        @hookimpl
        def privclust_make_accountant(self, budget):
            return Strict(budget)

    reg = Registry(plugins=[Chooser()], use_env=False)
    assert isinstance(reg.make_accountant(privclust.Budget(epsilon=1.0)), Strict)
    assert isinstance(Registry(use_env=False).make_accountant(privclust.Budget()), privclust.BasicAccountant)


def test_check_recipe_hook_problems_are_raised_together(frame):
    class Picky:
        @hookimpl
        def privclust_check_recipe(self, recipe, registry):
            return [privclust.Problem("steps[0]", "too picky", "relax"), "plain text problem"]

    reg = Registry(plugins=[Picky(), plugin_with(Doubler)], use_env=False)
    with pytest.raises(RecipeError) as err:
        privclust.compile({"steps": [{"use": "doubler"}]}, reg)
    assert len(err.value.problems) == 2
    assert "too picky (relax)" in str(err.value)


def test_observer_hooks_see_each_step_in_order(frame):
    calls = []

    class Observer:
        @hookimpl
        def privclust_step_started(self, step, index, total):
            calls.append(("started", index, total))

        @hookimpl
        def privclust_step_progress(self, index, done, total):
            calls.append(("progress", index, done, total))

        @hookimpl
        def privclust_step_finished(self, step, index, outcome):
            calls.append(("finished", index, outcome.name))

    @attrs.frozen(kw_only=True)
    class Slow:
        name: ClassVar[str] = "slow"

        def mask(self, data, context):
            for i in range(3):
                context.progress(i + 1, 3)
            return Masked(data=data)

    reg = Registry(plugins=[Observer(), plugin_with(Doubler, Slow)], use_env=False)
    release = privclust.run({"steps": [{"use": "doubler"}, {"use": "slow"}]}, frame, registry=reg)
    assert calls == [
        ("started", 0, 2), ("finished", 0, "doubler"),
        ("started", 1, 2), ("progress", 1, 1, 3), ("progress", 1, 2, 3), ("progress", 1, 3, 3),
        ("finished", 1, "slow"),
    ]
    # the audit observer put one process entry per step in the ledger
    processes = release.ledger.of_kind("process")
    assert [e.step for e in processes] == [0, 1]
    assert processes[0].details["parameters"] == {"factor": 2.0}


def test_every_hookspec_is_exercised_by_a_test_here():
    from privclust import hookspecs

    source = open(__file__, encoding="utf-8").read()
    specs = [n for n in dir(hookspecs) if n.startswith("privclust_")]
    assert len(specs) == 10
    for name in specs:
        if name.startswith("privclust_register_"):
            continue  # exercised through plugin_with(kind=...) and the built-ins
        assert name in source, f"hook {name} has no test"


def test_unregister_unknown_plugin(registry):
    with pytest.raises(PluginError, match="no plugin named"):
        registry.unregister("nope")


def test_components_table_lists_kind_name_plugin_distribution_version(registry):
    rows = [c.to_dict() for c in registry.components("noise_mechanisms")]
    assert [r["name"] for r in rows] == ["gaussian", "geometric", "laplace"]
    assert set(rows[0]) == {"kind", "name", "class", "plugin", "distribution", "version", "replaces", "replaced_by"}
    assert rows[0]["replaces"] == rows[0]["replaced_by"] == ""
    with pytest.raises(privclust.PrivclustError, match="did you mean 'maskers'"):
        registry.components("masker")


def test_registry_frames_are_not_touched(frame):
    before = frame.copy()
    reg = Registry(plugins=[plugin_with(Doubler)], use_env=False)
    privclust.run({"steps": [{"use": "doubler"}]}, frame, registry=reg)
    pd.testing.assert_frame_equal(frame, before)


def test_a_misspelt_block_name_is_reported(monkeypatch):
    with pytest.warns(privclust.PrivclustWarning, match="'nosie', which is not installed.*did you mean 'noise'"):
        Registry(block=["nosie"], use_env=False).load()
    with pytest.warns(privclust.PrivclustWarning, match="'noise:laplase'.*did you mean 'noise:laplace'"):
        Registry(block=["noise:laplase"], use_env=False).components()


def test_registering_under_a_taken_name_says_who_has_it(registry):
    with pytest.raises(PluginError) as err:
        registry.register(plugin_with(Doubler), name="noise")
    assert "already taken by distribution privclust" in str(err.value)
    assert "{" not in str(err.value)


def test_every_bad_value_is_reported_at_once(registry):
    with pytest.raises(RecipeError) as err:
        registry.create("noise_mechanisms", {"use": "gaussian", "epsilon": -1, "delta": 2, "colour": 3},
                        where="steps[0]")
    where = [p.where for p in err.value.problems]
    assert where == ["steps[0].colour", "steps[0].epsilon", "steps[0].delta"]


def test_registration_hooks_are_called_through_pluggy_wrappers_and_tracing_see_them():
    seen = []

    class Wrapper:
        @hookimpl(wrapper=True)
        def privclust_register_maskers(self, register):
            seen.append("before")
            result = yield
            seen.append("after")
            return result

    calls = []
    reg = Registry(entry_points=[FakeEntryPoint("extra", plugin_with(Doubler)), FakeEntryPoint("wrap", Wrapper())],
                   use_env=False).load()
    undo = reg.pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: calls.append((name, [i.plugin_name for i in impls])), lambda *a: None)
    traced: list[str] = []
    reg.pm.trace.root.setwriter(traced.append)
    untrace = reg.pm.enable_tracing()
    try:
        assert reg.info("maskers", "doubler").plugin == "extra"  # credited to the plugin that registered it
    finally:
        untrace()
        undo()
    assert any("privclust_register_maskers" in line for line in traced)  # pluggy's own tracing sees it
    assert seen == ["before", "after"]  # once per plugin that implements the hook: here 'extra' alone
    assert [c for c in calls if c[0] == "privclust_register_maskers"] == [
        ("privclust_register_maskers", ["extra", "wrap"])]


def test_a_plugin_must_be_hashable_as_pluggy_requires():
    unhashable = types.SimpleNamespace()
    unhashable.privclust_register_maskers = hookimpl(lambda register: register(Doubler))
    with pytest.raises(PluginError, match="unhashable SimpleNamespace; pluggy keeps plugins in sets"):
        Registry(plugins=[unhashable], use_env=False).load()


def replacing(cls, replaces, kind="noise_mechanisms"):
    """A plugin registering ``cls`` as the replacement of ``replaces`` (``plugin:name``)."""

    class Plugin:
        pass

    def register_all(register):
        register(cls, replaces=replaces)

    setattr(Plugin, f"privclust_register_{kind}", staticmethod(hookimpl(register_all)))
    return Plugin


def installed_with(*extra):
    """The installed entry points (the built-ins) and fake installed plugins."""
    import importlib.metadata

    return [*importlib.metadata.entry_points(group="privclust"), *extra]


RECIPE = {"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}, "columns": ["a"]}]}


def test_an_installed_plugin_that_declares_it_replaces_a_builtin_just_works(frame):
    builtin = Registry(use_env=False).get("noise_mechanisms", "laplace")
    fast = FakeEntryPoint("fast", replacing(FakeLaplace, "noise:laplace"), dist="fastnoise", version="2.0")
    reg = Registry(entry_points=installed_with(fast), use_env=False)
    info = reg.info("noise_mechanisms", "laplace")
    assert (info.cls, info.plugin, info.distribution) == (FakeLaplace, "fast", "fastnoise")
    assert info.replaces == "noise:laplace"
    assert [(r.qualified, r.replaced_by) for r in reg.replaced()] == [("noise:laplace", "fast")]
    assert reg.get("noise_mechanisms", "noise:laplace") is builtin  # chosen back by plugin:name
    assert reg.kind_of("noise:laplace") == ["noise_mechanisms"]
    release = privclust.run(RECIPE, frame, seed=1, registry=reg)
    assert release.ledger.of_kind("dp")[0].mechanism == "fake-laplace"
    step = release.report()["steps"][0]
    assert (step["component"], step["plugin"], step["distribution"], step["version"]) == (
        "laplace", "fast", "fastnoise", "2.0")
    assert release.ledger.of_kind("process")[0].details["plugin"] == "fast"
    assert release.snapshot["steps"][0]["plugin"] == "fast"


def test_the_replaced_builtin_is_chosen_back_in_a_recipe_or_by_blocking_the_replacement(frame):
    builtin = Registry(use_env=False).get("noise_mechanisms", "laplace")
    fast = FakeEntryPoint("fast", replacing(FakeLaplace, "noise:laplace"), dist="fastnoise")
    reg = Registry(entry_points=installed_with(fast), use_env=False)
    back = {"steps": [{**RECIPE["steps"][0], "use": "noise:laplace"}]}
    release = privclust.run(back, frame, seed=1, registry=reg)
    assert release.ledger.of_kind("dp")[0].mechanism != "fake-laplace"
    assert type(release.outcomes[0].component) is builtin
    assert release.report()["steps"][0]["plugin"] == "noise"  # credited by class, not by the name in use
    assert release.ledger.of_kind("process")[0].details["distribution"] == "privclust"
    # nested components take plugin:name too
    nested = privclust.compile({"steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0,
                                           "bounds": {"a": [0, 1]}, "noise": "noise:laplace"}]}, reg)
    assert type(nested.steps[0].component.noise) is builtin
    # everywhere: block the replacement
    blocked = Registry(entry_points=installed_with(fast), block=["fast:laplace"], use_env=False)
    assert blocked.get("noise_mechanisms", "laplace") is builtin and blocked.replaced() == []
    with pytest.raises(UnknownComponentError, match="noise:laplace"):
        reg.get("noise_mechanisms", "noise:laplase")


def test_two_plugins_claiming_one_name_without_declaring_it_name_both_and_the_fix():
    fast = FakeEntryPoint("fast", plugin_with(FakeLaplace, kind="noise_mechanisms"), dist="fastnoise", version="2.0")
    with pytest.raises(DuplicateComponentError) as err:
        Registry(entry_points=installed_with(fast), use_env=False).names("noise_mechanisms")
    text = str(err.value)
    assert "'noise' (distribution privclust" in text and "'fast' (distribution fastnoise 2.0)" in text
    assert 'register(cls, replaces="noise:laplace")' in text
    assert "PRIVCLUST_DISABLE_PLUGINS=noise:laplace or PRIVCLUST_DISABLE_PLUGINS=fast:laplace" in text
    # two replacements of one built-in clash too, and so does a declaration naming the wrong plugin
    two = [FakeEntryPoint(n, replacing(FakeLaplace, "noise:laplace"), dist=f"{n}-dist") for n in ("a", "b")]
    with pytest.raises(DuplicateComponentError, match="'a' .*and 'b' "):
        Registry(entry_points=installed_with(*two), use_env=False).names("noise_mechanisms")
    typo = FakeEntryPoint("fast", replacing(FakeLaplace, "nosie:laplace"), dist="fastnoise")
    with pytest.raises(DuplicateComponentError, match="'fast' declares replaces='nosie:laplace', which names none"):
        Registry(entry_points=installed_with(typo), use_env=False).names("noise_mechanisms")


@pytest.mark.parametrize("replaces", ["laplace", "noise:gaussian", ":laplace", 3])
def test_replaces_names_a_plugin_and_a_component_of_the_same_name(replaces):
    reg = Registry(plugins=[replacing(FakeLaplace, replaces)], use_env=False)
    with pytest.raises(PluginError, match='replaces="PLUGIN:laplace"'):
        reg.names("noise_mechanisms")


def test_a_plugin_accountant_is_credited_with_the_total_in_the_verdict_and_the_report():
    class Tiny(privclust.BasicAccountant):
        description = "basic sequential composition (epsilons and deltas add up)"  # the words the host uses

        def total(self, entries):  # reports less than the entries add up to
            return min(super().total(entries)[0], 0.01), 0.0

    class Chooser:
        @hookimpl
        def privclust_make_accountant(self, budget):
            return Tiny(budget)

    reg = Registry(plugins=[Chooser()], use_env=False)
    data = pd.DataFrame({"a": np.linspace(0, 1, 20), "b": np.linspace(1, 2, 20)})
    release = privclust.run({"steps": [{"use": "laplace", "epsilon": 0.5, "bounds": {"a": [0, 1], "b": [1, 2]}}]},
                            data, seed=1, registry=reg)
    assert release.spent[0] == 0.01
    name = f"{Tiny.__module__}.{Tiny.__qualname__}"
    assert f"the plugin accountant {name} composes them (the total is its claim too)" in release.verdict
    assert "the host composes them" not in release.verdict
    assert release.report()["privacy"]["accountant"].endswith(
        f"(as stated by the plugin accountant {name}, not checked by the host)")
    host = privclust.run({"steps": [{"use": "laplace", "epsilon": 0.5, "bounds": {"a": [0, 1], "b": [1, 2]}}]},
                         data, seed=1)
    assert "the host composes them but cannot check a sensitivity" in host.verdict


def test_a_dp_clusterer_nested_in_a_masker_is_in_the_budget_check():
    step = {"use": "microaggregation", "columns": ["x", "y"],
            "clusterer": {"use": "idp-kmeans", "n_clusters": 3, "epsilon": 2.0, "bounds": {"x": [0, 10], "y": [0, 10]}}}
    # add/remove alone: 2 counted twice (rt17 F1)
    with pytest.raises(RecipeError, match=r"the steps need at least epsilon = 4 \(steps\[0\] 2; all under add/remove"):
        privclust.compile({"privacy": {"epsilon": 0.5}, "steps": [step]})
    # add/remove inside the masker, beside a replace-one step: counted twice, as the accountant will
    noise = {"use": "laplace", "epsilon": 1.0, "columns": ["z"], "bounds": {"z": [0, 1]}}
    with pytest.raises(RecipeError, match=r"steps\[0\] 4 \(add/remove, counted twice under replace-one\)"):
        privclust.compile({"privacy": {"epsilon": 4.5}, "steps": [step, noise]})


def test_the_report_credits_each_nested_component_to_its_plugin():
    from privclust_plugins.mdav import MDAV

    @attrs.frozen(kw_only=True)
    class VendorMDAV(MDAV):
        name: ClassVar[str] = "mdav"

    class Vendor:
        @hookimpl
        def privclust_register_clusterers(self, register):
            register(VendorMDAV, replaces="mdav:mdav")

    reg = Registry(plugins=[Vendor()], use_env=False)
    data = pd.DataFrame({"x": np.linspace(0, 1, 30), "y": np.linspace(1, 3, 30) ** 2})
    release = privclust.run({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 5}}]}, data,
                            seed=1, registry=reg)
    nested = release.report()["steps"][0]["nested"]
    assert nested["clusterer"]["component"] == "mdav"
    assert nested["clusterer"]["plugin"] != "mdav" and nested["clusterer"]["plugin"] == \
        release.report()["steps"][0]["nested"]["clusterer"]["plugin"]
    assert "Vendor" in nested["clusterer"]["plugin"]
    assert "its clusterer mdav by plugin" in release.to_html(plots=False)
