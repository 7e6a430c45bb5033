"""One name, one meaning: the parameter names of the built-in components.

``k`` is only ever the minimum group size (the seed paper's and sdcMicro's
name), the number of clusters is ``n_clusters``, ``m`` is only the fuzzy
c-means fuzzifier, and the scaling option is ``scale``. These tests hold
every built-in component to that rule, so a new one cannot break it; and an
old name is answered with its new one.
"""

from __future__ import annotations

import copy
import pickle
from typing import ClassVar

import attrs
import pytest

import privclust
import privclust_plugins.mdav
import privclust_plugins.microaggregation
from privclust import sklearn as pcs
from privclust.params import RenamedParameterError
from privclust.registry import BUILTIN_DISTRIBUTION

#: Names that mean two things, or that the built-ins no longer use.
RETIRED = {"c": "n_clusters", "standardise": "scale"}


def _builtins():
    registry = privclust.get_registry()
    found = [info for info in registry.components() if info.distribution == BUILTIN_DISTRIBUTION]
    assert len(found) > 20  # the test sees the built-ins, not an empty registry
    return found


BUILTINS = _builtins()


def _ids(info):
    return f"{info.kind}:{info.name}"


@pytest.mark.parametrize("info", BUILTINS, ids=_ids)
def test_no_builtin_uses_a_retired_name(info):
    names = {p["name"] for p in info.parameters()}
    assert not names & set(RETIRED), (
        f"{info.name} has a parameter named {sorted(names & set(RETIRED))}; use "
        f"{', '.join(RETIRED[n] for n in sorted(names & set(RETIRED)))} (docs/recipes.md, one name, one meaning)")


@pytest.mark.parametrize("info", BUILTINS, ids=_ids)
def test_m_is_only_the_fuzzifier(info):
    names = {p["name"] for p in info.parameters()}
    if "m" in names:
        assert getattr(info.cls, "fuzzifier_param", None) == "m", (
            f"{info.name} has a parameter 'm' but is not a fuzzy c-means clusterer (fuzzifier_param = 'm'); "
            "'m' is only the fuzzifier")


@pytest.mark.parametrize("info", BUILTINS, ids=_ids)
def test_k_is_a_minimum_group_size(info):
    for p in info.parameters():
        if p["name"] == "k":
            assert "minimum group size" in p["doc"], (
                f"{info.name}'s 'k' is documented as {p['doc']!r}: 'k' is only the minimum group size (a number of "
                "clusters is 'n_clusters')")


@pytest.mark.parametrize("info", BUILTINS, ids=_ids)
def test_a_number_of_clusters_is_n_clusters(info):
    for p in info.parameters():
        if "number of clusters" in p["doc"].lower() and not p["doc"].lower().startswith("the minimum"):
            assert p["name"] == "n_clusters", f"{info.name}'s {p['name']!r} is a number of clusters: name it n_clusters"


@pytest.mark.parametrize("info", BUILTINS, ids=_ids)
def test_the_renames_a_component_lists_name_its_own_parameters(info):
    renamed = getattr(info.cls, "renamed_params", {})
    names = {p["name"] for p in info.parameters()}
    for old, new in renamed.items():
        assert new in names and old not in names, f"{info.name}: renamed_params {old!r} -> {new!r}"


@pytest.mark.parametrize(("step", "old", "new"), [
    ({"use": "fcm", "c": 3}, "c", "n_clusters"),
    ({"use": "efcm", "n_clusters": 3, "standardise": False}, "standardise", "scale"),
    ({"use": "fuzzy-microaggregation", "c": 3}, "c", "n_clusters"),
    ({"use": "dpc", "k": 3}, "k", "n_clusters"),
    ({"use": "dp-rccfsfdp", "k": 3, "epsilon": 1.0, "dc": 1.0, "radius": 1.0}, "k", "n_clusters"),
    ({"use": "idp-kmeans", "n_clusters": 3, "m": 4, "epsilon": 1.0, "bounds": {"a": [0, 1]}}, "m", "n_blocks"),
])
def test_an_old_name_is_answered_with_the_new_one(step, old, new):
    with pytest.raises(privclust.RecipeError) as err:
        privclust.compile({"steps": [step]})
    assert f"{step['use']}: parameter {old!r} was renamed {new!r}" in str(err.value)
    assert f"write {new} instead (steps[0].{new})" in str(err.value)


def test_an_old_name_in_a_nested_component_and_in_a_sweep_names_the_new_key():
    recipe = {"steps": [{"id": "mask", "use": "fuzzy-microaggregation", "clusterer": {"use": "fcm", "c": 3}}]}
    with pytest.raises(privclust.RecipeError, match=r"steps\[0\]\.clusterer\.c: fcm: parameter 'c' was renamed"):
        privclust.compile(recipe)
    data = privclust.datasets.iris().drop(columns="class")
    recipe = {"steps": [{"id": "mask", "use": "fuzzy-microaggregation"}]}
    with pytest.raises(privclust.RecipeError) as err:
        privclust.compare(recipe, data, grid={"mask.clusterer.c": [3]}, progress=False)
    assert "mask.clusterer.c: fcm: parameter 'c' was renamed 'n_clusters'" in str(err.value)
    assert "(mask.clusterer.n_clusters)" in str(err.value)


def test_a_misspelt_sweep_key_suggests_close_names():
    data = privclust.datasets.iris().drop(columns="class")
    recipe = {"steps": [{"id": "mask", "use": "microaggregation"}]}
    with pytest.raises(privclust.RecipeError,
                       match=r"mask\.kk: microaggregation has no parameter 'kk' \(did you mean 'k'\?\)"):
        privclust.compare(recipe, data, grid={"mask.kk": [3]}, progress=False)
    with pytest.raises(privclust.RecipeError,
                       match=r"mask\.clusterer\.kk: mdav has no parameter 'kk' \(did you mean 'k'\?\)"):
        privclust.compare(recipe, data, grid={"mask.clusterer.kk": [3]}, progress=False)
    with pytest.raises(privclust.RecipeError, match=r"did you mean mask\.clusterer\?"):
        privclust.compare(recipe, data, grid={"mask.clusterr.k": [3]}, progress=False)


def test_a_nested_key_the_step_itself_takes_suggests_the_steps_key():
    data = privclust.datasets.iris().drop(columns="class")
    recipe = {"steps": [{"id": "mask", "use": "fuzzy-microaggregation"}]}
    with pytest.raises(privclust.RecipeError) as err:
        privclust.compare(recipe, data, grid={"mask.clusterer.k": [3]}, progress=False)
    assert "mask.clusterer.k: fcm has no parameter 'k' (did you mean mask.k?" in str(err.value)


def test_a_defaulted_nested_component_can_be_swept():
    data = privclust.datasets.iris().drop(columns="class")
    recipe = {"steps": [{"id": "mask", "use": "microaggregation"}], "evaluate": ["group-sizes"]}
    table = privclust.compare(recipe, data, grid={"mask.clusterer.k": [4, 6]}, seed=1, progress=False)
    assert table["error"].isna().all()
    assert list(table["group-sizes.k"]) == [4.0, 6.0]
    assert (table["group-sizes.min_size"] >= table["mask.clusterer.k"]).all()


#: Every rename of the built-ins (issue 10), kept answered for at least one minor version (CHANGELOG.md):
#: removing one from a component's renamed_params is a decision this table makes visible.
RENAMES = {
    "fcm": {"c": "n_clusters", "standardise": "scale"},
    "efcm": {"c": "n_clusters", "standardise": "scale"},
    "fuzzy-microaggregation": {"c": "n_clusters"},
    "idp-kmeans": {"k": "n_clusters", "m": "n_blocks"},
    **{name: {"k": "n_clusters"} for name in ("dpc", "addpc", "dp-dpcl", "addpc-rdp", "dp-rccfsfdp", "dp-dpc-grid")},
}

RENAMED = [(info, old, new) for info in BUILTINS for old, new in getattr(info.cls, "renamed_params", {}).items()]


def test_every_rename_of_the_built_ins_is_still_listed():
    listed = {info.name: dict(getattr(info.cls, "renamed_params", {})) for info in BUILTINS}
    for name, renames in RENAMES.items():
        assert listed[name] == renames, f"{name} stopped answering a renamed parameter before its time"
    assert {name for name, renames in listed.items() if renames} == set(RENAMES)  # a new rename goes in the table
    assert len(RENAMED) == 13


def _value(info, new):
    """A valid value for the new parameter (the old one is given it)."""
    return {"n_clusters": 3, "scale": "none", "n_blocks": 4}[new]


@pytest.mark.parametrize(("info", "old", "new"), RENAMED, ids=[f"{i.name}:{o}" for i, o, _ in RENAMED])
def test_a_python_constructor_answers_an_old_name_as_a_recipe_does(info, old, new):
    with pytest.raises(RenamedParameterError) as err:
        info.cls(**{old: _value(info, new)})
    message = str(err.value)
    assert message.startswith(f"{info.name}: parameter {old!r} was renamed {new!r} (write {new}=... instead")
    assert "at least one minor version" in message
    assert isinstance(err.value, privclust.ParameterError) and isinstance(err.value, TypeError)
    with pytest.raises(privclust.RecipeError) as recipe_err:  # the recipe's message is the same sentence
        privclust.compile({"steps": [{"use": info.name, old: _value(info, new)}]})
    assert f"{info.name}: parameter {old!r} was renamed {new!r}" in str(recipe_err.value)


def test_a_third_party_subclass_gets_the_renamed_message():
    """The issue's case: a plugin subclasses fcm and passes c=4 (attrs gives
    the subclass its own __init__; it inherits the check)."""
    from privclust_plugins.fuzzy import FCM

    privclust.get_registry().components()  # a run, compile or get_registry loads the classes

    @attrs.frozen(kw_only=True)
    class MyFCM(FCM):
        name: ClassVar[str] = "my-fcm"
        extra: int = 1

    with pytest.raises(RenamedParameterError, match=r"my-fcm: parameter 'c' was renamed 'n_clusters'"):
        MyFCM(c=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'cc'"):  # other mistakes stay Python's
        MyFCM(cc=4)

    class Forwards(FCM):
        def __init__(self, **params):
            super().__init__(**params)

    with pytest.raises(RenamedParameterError, match="'c' was renamed"):
        Forwards(c=4)

    class TakesC(FCM):  # a subclass that takes the old name itself is left alone
        def __init__(self, c, **params):
            super().__init__(n_clusters=c, **params)

    assert TakesC(c=4).n_clusters == 4

    @attrs.frozen(kw_only=True)
    class OwnC(FCM):
        c: float = 0.5

    assert OwnC(c=0.25, n_clusters=2).c == 0.25
    with pytest.raises(RenamedParameterError, match="'standardise' was renamed 'scale'"):
        OwnC(standardise=False)


def test_the_check_changes_nothing_else_about_a_component():
    from privclust_plugins.fuzzy import FCM

    privclust.get_registry().components()
    fcm = FCM(n_clusters=3, tol=1e-3)
    assert pickle.loads(pickle.dumps(fcm)) == fcm and copy.deepcopy(fcm) == fcm
    assert attrs.evolve(fcm, tol=0.5).tol == 0.5
    privclust.get_registry().components()  # loading again installs nothing twice
    assert FCM(n_clusters=2).n_clusters == 2


def test_the_sklearn_wrapper_names_the_new_parameter():
    with pytest.raises(TypeError, match="'c' was renamed 'n_clusters'"):
        pcs.clusterer("fcm", c=3)


# -- the microaggregation masker's k ----------------------------------------------------------------


def _groups(release):
    return release.data.value_counts().min()


def test_microaggregation_passes_k_to_its_clusterer():
    data = privclust.datasets.iris().drop(columns="class")
    for k in (3, 7):
        release = privclust.run({"steps": [{"use": "microaggregation", "k": k}]}, data, seed=1)
        assert _groups(release) >= k
        assert release.outcomes[0].diagnostics["k"] == k
    same = privclust.run({"steps": [{"use": "microaggregation", "k": 5, "clusterer": {"use": "mdav", "k": 5}}]},
                         data, seed=1)
    assert _groups(same) >= 5


def test_microaggregation_k_conflicts_and_clusterers_without_k_are_errors():
    with pytest.raises(privclust.RecipeError, match="k = 3 but the clusterer 'mdav' has k = 4.*state it once"):
        privclust.compile({"steps": [{"use": "microaggregation", "k": 3, "clusterer": {"use": "mdav", "k": 4}}]})
    with pytest.raises(privclust.RecipeError, match="'dpc' has no parameter 'k'"):
        privclust.compile({"steps": [{"use": "microaggregation", "k": 3,
                                      "clusterer": {"use": "dpc", "n_clusters": 3}}]})
    with pytest.raises(privclust.RecipeError, match="'k' parameter of microaggregation must be >= 2"):
        privclust.compile({"steps": [{"use": "microaggregation", "k": 1}]})
    with pytest.raises(privclust.ParameterError, match="state it once"):
        privclust_plugins.microaggregation.Microaggregation(k=3, clusterer=privclust_plugins.mdav.MDAV(k=4))


def test_mask_k_sweeps_crisp_and_fuzzy_microaggregation_alike():
    data = privclust.datasets.iris().drop(columns="class")
    recipes = {"MDAV": {"steps": [{"id": "mask", "use": "microaggregation"}], "evaluate": ["group-sizes"]},
               "fuzzy": {"steps": [{"id": "mask", "use": "fuzzy-microaggregation"}], "evaluate": ["group-sizes"]}}
    table = privclust.compare(recipes, data, grid={"mask.k": [3, 10]}, seed=1, progress=False)
    assert table["error"].isna().all()
    mdav = table[table["recipe"] == "MDAV"]
    assert (mdav["group-sizes.min_size"] >= mdav["mask.k"]).all()
    for _, rows in table.groupby("recipe"):
        assert sorted(rows["group-sizes.k"]) == [3.0, 10.0]
