"""Recipes: construction, structural checks, TOML, round trips, compile-time checks."""

from __future__ import annotations

import tomllib
import unicodedata
from collections.abc import Mapping
from pathlib import Path

import attrs
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privclust
from privclust import Budget, ComponentSpec, Recipe, RecipeError, Step
from privclust.recipe import dumps_toml

ROOT = Path(__file__).resolve().parents[1]


def structure(obj):
    """The recipe itself, field by field, without ``to_dict`` or ``__eq__``
    (a round trip compared through ``to_dict`` cannot see a field that
    ``to_dict`` forgets): attrs classes as their fields, scalars with their
    type (1 is not 1.0)."""
    if attrs.has(type(obj)):
        # a field outside equality is no part of the recipe's data (Recipe.folder: where its file was read from)
        return type(obj).__name__, {f.name: structure(getattr(obj, f.name)) for f in attrs.fields(type(obj)) if f.eq}
    if isinstance(obj, Mapping):
        return "table", {k: structure(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj).__name__, [structure(v) for v in obj]
    return type(obj).__name__, repr(obj)


def assert_round_trips(recipe):
    """Through the dict form and the TOML text, compared field by field."""
    assert structure(Recipe.from_dict(recipe.to_dict())) == structure(recipe)
    text = recipe.to_toml()
    assert structure(Recipe.from_toml(text)) == structure(recipe), text
    assert Recipe.from_toml(text) == recipe

TOML = """
name = "two steps"
description = "a test recipe"

[privacy]
epsilon = 2
delta = 1e-6

[[steps]]
id = "noisy"
use = "laplace"
columns = ["a", "b"]
epsilon = 1.0
bounds = { a = [0, 10], b = [-1, 1.5] }

[[steps]]
use = "gaussian"
columns = ["c"]
epsilon = 0.5
delta = 1e-7
bounds = { c = [0, 5] }

[[evaluate]]
use = "something"
columns = ["a"]
level = 3
"""


def test_from_toml_reads_every_part():
    recipe = Recipe.from_toml(TOML)
    assert recipe.name == "two steps"
    assert recipe.privacy == Budget(epsilon=2.0, delta=1e-6)
    assert [s.use for s in recipe.steps] == ["laplace", "gaussian"]
    assert recipe.step_ids == ("noisy", "gaussian")
    assert recipe.steps[0].columns == ("a", "b")
    assert recipe.steps[0].params["bounds"]["b"] == (-1, 1.5)
    assert recipe.evaluate[0].use == "something" and recipe.evaluate[0].params == {"level": 3}


def test_to_dict_round_trips_through_dict_and_toml(tmp_path):
    recipe = Recipe.from_toml(TOML)
    assert recipe.steps[0].columns == ("a", "b") and recipe.evaluate[0].columns == ("a",)
    assert_round_trips(recipe)
    path = tmp_path / "r.toml"
    path.write_text(recipe.to_toml())
    assert structure(Recipe.from_toml(path)) == structure(recipe)
    assert structure(Recipe.from_toml(str(path))) == structure(recipe)
    assert Recipe.from_toml(path).folder == str(tmp_path) and recipe.folder is None
    assert tomllib.loads(recipe.to_toml()) == recipe.to_dict()


def test_nested_components_are_specs():
    recipe = Recipe.from_dict({"steps": [{"use": "m", "clusterer": {"use": "fcm", "m": 1.5}, "other": "fcm"}]})
    nested = recipe.steps[0].params["clusterer"]
    assert nested == ComponentSpec("fcm", {"m": 1.5})
    assert recipe.steps[0].params["other"] == "fcm"  # a plain string parameter stays a string
    assert recipe.to_dict()["steps"][0]["clusterer"] == {"use": "fcm", "m": 1.5}


def test_structural_problems_are_reported_together():
    with pytest.raises(RecipeError) as err:
        Recipe.from_dict({
            "stepz": [],
            "privacy": {"epsilon": 0, "delta": 1.5, "eps": 1},
            "steps": [{"columns": ["a"]}, {"use": "x", "columns": 5}, {"use": "y", "columns": []},
                      {"use": "z", "id": "bad id"}],
            "evaluate": [{"columns": ["a"]}],
        })
    problems = [str(p) for p in err.value.problems]
    text = str(err.value)
    assert len(problems) == 9, problems
    assert "stepz: unknown recipe key (did you mean 'steps'?)" in problems
    assert any(p.startswith("privacy.epsilon: must be a number > 0") for p in problems)
    assert any(p.startswith("privacy.delta: must be a number in [0, 1)") for p in problems)
    assert any("privacy.eps: unknown key" in p for p in problems)
    assert "steps[0]: has no 'use'" in text
    assert "steps[2].columns: is empty" in text
    assert "steps[3].id" in text
    assert "evaluate[0]" in text
    assert text.startswith("recipe has 9 problems: [1]")


def test_a_string_columns_value_is_one_column():
    recipe = Recipe.from_dict({"steps": [{"use": "x", "columns": "age"}]})
    assert recipe.steps[0].columns == ("age",)


def test_malformed_toml_names_the_line():
    with pytest.raises(RecipeError) as err:
        Recipe.from_toml('[[steps]]\nuse = "laplace\n')
    assert "is not valid TOML" in str(err.value) and "line 2" in str(err.value)


def test_missing_recipe_file(tmp_path):
    with pytest.raises(RecipeError, match="no recipe file at"):
        Recipe.from_toml(tmp_path / "nope.toml")


def test_no_steps_is_an_assessment_that_needs_something_to_measure():
    with pytest.raises(RecipeError, match="evaluators or \\[roles\\] keys to assess it"):
        Recipe.from_dict({})
    with pytest.raises(RecipeError, match="evaluators or \\[roles\\] keys to assess it"):
        Recipe(steps=[])


def test_default_step_ids_are_unique():
    recipe = Recipe.from_dict({"steps": [{"use": "a"}, {"use": "a"}, {"use": "b", "id": "a-2"}, {"use": "a"}]})
    assert recipe.step_ids == ("a", "a-3", "a-2", "a-4")
    assert recipe.step_index("a-2") == 2
    with pytest.raises(RecipeError, match="did you mean"):
        recipe.step_index("a-5")


def test_duplicate_ids_and_columns():
    with pytest.raises(RecipeError) as err:
        Recipe.from_dict({"steps": [{"use": "a", "id": "s"}, {"use": "b", "id": "s", "columns": ["x", "x"]}]})
    assert "already the id of steps[0]" in str(err.value)
    assert "names x more than once" in str(err.value)


def test_recipe_text_is_never_evaluated(frame, registry):
    recipe = Recipe.from_dict({"steps": [{"use": "__import__('os').system('echo pwned')"}]})
    with pytest.raises(RecipeError, match="unknown component"):
        privclust.compile(recipe, registry)


def test_step_of_component_copies_every_parameter():
    from privclust_plugins.noise import LaplaceMechanism

    step = Step.of(LaplaceMechanism(epsilon=0.5, bounds={"a": [0, 1]}), columns=["a"], id="noise")
    assert step.to_dict() == {"use": "laplace", "id": "noise", "columns": ["a"], "epsilon": 0.5,
                              "bounds": {"a": [0.0, 1.0]}}


def test_compile_reports_every_problem_with_its_location(registry):
    recipe = Recipe.from_dict({
        "privacy": {"epsilon": 1.0},
        "steps": [
            {"use": "laplase", "epsilon": 0.5},
            {"use": "laplace", "epsilon": 3.0, "bounds": {"a": [0, 1]}, "colour": "red"},
            {"use": "gaussian", "epsilon": 0.2, "bounds": {"a": [0, 1]}},
            {"use": "laplace", "epsilon": 0.2, "bounds": {"a": [1, 0]}},
        ],
        "evaluate": ["nonexistent"],
    })
    with pytest.raises(RecipeError) as err:
        privclust.compile(recipe, registry)
    text = str(err.value)
    assert "steps[0].use: unknown component 'laplase' (did you mean 'laplace'?)" in text
    assert "steps[1].colour: laplace has no parameter 'colour'" in text
    assert "steps[2]: gaussian needs 'delta'" in text
    assert "steps[3]" in text and "needs low < high" in text
    assert "evaluate[0].use" in text


def test_compile_refuses_a_recipe_asking_for_more_than_its_budget(registry):
    recipe = {"privacy": {"epsilon": 1.0}, "steps": [
        {"use": "laplace", "epsilon": 0.7, "bounds": {"a": [0, 1]}},
        {"use": "laplace", "epsilon": 0.6, "bounds": {"a": [0, 1]}}]}
    with pytest.raises(RecipeError) as err:
        privclust.compile(recipe, registry)
    assert "need at least epsilon = 1.3" in str(err.value) and "the budget is 1" in str(err.value)


def test_a_noise_step_needs_epsilon_and_bounds(registry):
    with pytest.raises(RecipeError) as err:
        privclust.compile({"steps": [{"use": "laplace"}]}, registry)
    assert "needs 'epsilon'" in str(err.value) and "needs public 'bounds'" in str(err.value)


def test_an_evaluator_used_as_a_step(registry):
    @privclust.hookimpl
    def privclust_register_evaluators(register):
        import attrs

        @attrs.frozen(kw_only=True)
        class Count:
            name = "count"

            def evaluate(self, inputs):
                return {"n": len(inputs.original)}

        register(Count)

    class Plugin:  # a plugin is hashable (pluggy keeps plugins in sets): a class, a module or an object
        pass

    Plugin.privclust_register_evaluators = staticmethod(privclust_register_evaluators)
    reg = privclust.Registry(plugins=[Plugin], use_env=False)
    with pytest.raises(RecipeError, match="is one of the evaluators, not a step component"):
        privclust.compile({"steps": [{"use": "count"}]}, reg)


def test_dumps_toml_quotes_keys_and_strings():
    text = dumps_toml({"name": 'a "quoted"\nname', "steps": [{"use": "x", "odd key": 1.5, "flag": True,
                                                                "items": [1, "two"]}]})
    assert tomllib.loads(text) == {"name": 'a "quoted"\nname',
                                   "steps": [{"use": "x", "odd key": 1.5, "flag": True, "items": [1, "two"]}]}


def test_the_field_by_field_comparison_sees_what_to_dict_leaves_out():
    recipe = Recipe.from_toml(TOML)
    without_columns = attrs.evolve(recipe, steps=[attrs.evolve(s, columns=None) for s in recipe.steps])
    assert structure(without_columns) != structure(recipe)
    assert structure(attrs.evolve(recipe, name="other")) != structure(recipe)
    one = Recipe.from_dict({"steps": [{"use": "x", "v": 1}]})
    assert structure(one) != structure(Recipe.from_dict({"steps": [{"use": "x", "v": 1.0}]}))


HOSTILE = ['a "quoted" name', "it's", "back\\slash \\n", "two\nlines\r\n", "tab\there", "\x00\x1f\x7f",
           "üñíçødé ε δ 🙂", "'''", '"""', "[[steps]]", "# not a comment", "= x", "\u2028\u2029", ""]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_and_keys_round_trip_exactly(text):
    key = text or "empty"  # a key needing quotes (or not)
    recipe = Recipe.from_dict({
        "name": text, "description": text,
        "privacy": {"epsilon": 1.5, "allow_leaks": ["bounds"]},
        "constraints": [{"use": "linear", "rules": [text]}],
        "steps": [{"use": "laplace", "id": "s", "columns": [key, "b.c", "d e"], "output": "out",
                   "bounds": {key: [0, 1.5], "b.c": [-1e300, 5e-324], "d e": [-0.0, 1]},
                   "note": text, "nested": {"use": "fcm", key: {"deeper": [text, 1, 2.5, True]}},
                   "numbers": [0, -1, 2**62, 0.1, 1e-7, float("inf"), float("-inf")]}],
        "evaluate": [{"use": "sse", "columns": [key], key: text}],
    })
    assert_round_trips(recipe)


def _documented_recipes():
    from _docblocks import DOCS, blocks

    out = [pytest.param(p.read_text(encoding="utf-8"), id=str(p.relative_to(ROOT)))
           for p in sorted([*(ROOT / "framework" / "recipes").glob("*.toml"),
                            *(ROOT / "docs" / "examples" / "recipes").glob("*.toml")])]
    for page in sorted(DOCS.glob("*.md")):
        for block in blocks(page.name):
            if block.lang == "toml" and block.marker != "no-run" and "[[steps]]" in block.source:
                out.append(pytest.param(block.source, id=block.where))
    return out


@pytest.mark.parametrize("text", _documented_recipes())
def test_every_documented_recipe_round_trips_exactly(text):
    try:
        recipe = Recipe.from_toml(text)
    except RecipeError:
        pytest.skip("an example of a recipe error")
    assert_round_trips(recipe)


names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
values = st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False, width=32),
                   st.booleans(), st.text(max_size=8), st.lists(st.integers(0, 9), max_size=3))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(names, st.dictionaries(names.filter(lambda k: k not in
       ("use", "id", "columns", "output")), values, max_size=3),
       st.one_of(st.none(), st.lists(names, min_size=1, max_size=3, unique=True))), min_size=1, max_size=4),
       epsilon=st.one_of(st.none(), st.floats(0.01, 10)))
def test_round_trip_property(steps, epsilon):
    data = {"steps": [{"use": u, **p, **({"columns": c} if c else {})} for u, p, c in steps]}
    if epsilon is not None:
        data["privacy"] = {"epsilon": epsilon}
    recipe = Recipe.from_dict(data)
    assert_round_trips(recipe)


def test_a_step_from_an_instance_with_nested_components_round_trips_through_toml(registry):
    masker = registry.create("maskers", {"use": "fuzzy-microaggregation", "k": 3, "clusterer": {"use": "fcm"}})
    recipe = Recipe(steps=[Step.of(masker, columns=["a"])])
    back = Recipe.from_toml(recipe.to_toml())
    assert back == recipe and structure(back) == structure(recipe)
    assert registry.create("maskers", back.steps[0].spec) == masker


# ---------------------------------------------------------------------------
# Clean errors for hostile recipe files
# ---------------------------------------------------------------------------


def test_a_recipe_that_is_not_utf8_is_a_clean_error(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "caf\u00e9"\n[[steps]]\nuse = "laplace"\n'.encode("latin-1"))
    with pytest.raises(RecipeError, match=r"is not UTF-8 text \(byte 0xe9 on line 1\).*save the recipe as UTF-8"):
        Recipe.from_toml(path)
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + b'[[steps]]\nuse = "laplace"\n')
    assert Recipe.from_toml(bom).steps[0].use == "laplace"


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 5000 + "]" * 5000,
        "a = " + "{b = " * 3000 + "1" + "}" * 3000,
        '[[steps]]\nuse = "x"\np = ' + "[" * 40 + "]" * 40,
    ],
)
def test_deeply_nested_toml_is_refused_before_the_parser_recurses(text):
    with pytest.raises(RecipeError, match="levels deep, more than the limit of 32"):
        Recipe.from_toml(text)


def test_brackets_in_strings_and_comments_do_not_count_as_nesting():
    text = '# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n[[steps]]\nuse = "laplace"\nid = "x"\n' \
           'description = "' + "[" * 50 + '"\n'
    assert Recipe.from_toml(text).steps[0].params["description"] == "[" * 50
    assert Recipe.from_toml('description = "' + "[" * 50 + '"\n[[steps]]\nuse = "laplace"\n').description


def test_deeply_nested_dicts_are_refused_by_from_dict():
    inner: dict = {"use": "laplace"}
    for _ in range(5000):
        inner = {"use": "x", "noise": inner}
    with pytest.raises(RecipeError, match=r"steps: nests tables or arrays more than 32 levels deep"):
        Recipe.from_dict({"steps": [inner]})


def test_a_huge_or_folder_recipe_is_a_clean_error(tmp_path):
    (tmp_path / "x.toml").mkdir()
    with pytest.raises(RecipeError, match="is a folder"):
        Recipe.from_toml(tmp_path / "x.toml")
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * 1_100_000)
    with pytest.raises(RecipeError, match="larger than 1,000,000 bytes"):
        Recipe.from_toml(big)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("(" * 5000 + "a" + ")" * 5000 + " = b", "characters long, more than the limit of 10,000"),
        ("(" * 100 + "a" + ")" * 100 + " = b", "nested more than 64 levels deep"),
        ("-" * 3000 + "a = b", "nested more than 64 levels deep"),
    ],
)
def test_deeply_nested_edit_rules_are_a_clean_error(registry, rule, message):
    recipe = {"constraints": [{"use": "linear", "rules": [rule]}],
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1], "b": [0, 1]}}]}
    with pytest.raises(privclust.PrivclustError, match=message) as info:
        privclust.compile(recipe, registry)
    assert len(str(info.value)) < 1000  # a long rule is quoted around the fault, not whole


@pytest.mark.parametrize("columns, message", [
    ("[1]", "evaluate[0].columns: must be column names (strings); got [1]"),
    ("[]", "evaluate[0].columns: is empty"),
    ('["a", "a"]', "evaluate[0].columns: names a more than once"),
])
def test_an_evaluations_columns_are_checked_as_a_steps_are(columns, message):
    """`columns = [1]` in an [[evaluate]] table crashed check and run with an AttributeError traceback; an
    empty list was refused only after every step had run (audit16b)."""
    text = f'[[steps]]\nuse = "microaggregation"\nk = 3\n[[evaluate]]\nuse = "dbrl"\ncolumns = {columns}\n'
    with pytest.raises(RecipeError) as err:
        Recipe.from_dict(tomllib.loads(text))
    assert message in str(err.value)


def test_a_column_named_with_other_unicode_characters_is_named_so():
    """A recipe's 'café' (composed) against a header's 'café' (decomposed): the error said "did you mean
    'café'?", naming what the user had written (audit16b)."""
    frame = pd.DataFrame({unicodedata.normalize("NFD", "café"): [1.0, 2.0, 3.0, 4.0], "b": [1.0, 2.0, 3.0, 4.0]})
    recipe = {"steps": [{"use": "microaggregation", "k": 2, "columns": [unicodedata.normalize("NFC", "café"), "b"]}]}
    with pytest.raises(privclust.DataError, match="reads the same but is written with other Unicode characters"):
        privclust.run(recipe, frame, seed=1)


def test_a_required_parameter_left_out_is_named_with_its_meaning_every_one_at_once():
    # it read "DPrcCFSFDP.__init__() missing 1 required keyword-only argument: 'n_clusters'", naming the class,
    # and only the first of two missing parameters
    with pytest.raises(RecipeError) as err:
        privclust.compile({"steps": [{"use": "idp-kmeans", "bounds": {"a": [0, 5]}}]})
    text = str(err.value)
    assert "steps[0].n_clusters: idp-kmeans needs the parameter 'n_clusters'" in text
    assert "steps[0].epsilon: idp-kmeans needs the parameter 'epsilon'" in text
    assert "number of clusters" in text and "set n_clusters = <value>" in text
    assert "__init__" not in text
