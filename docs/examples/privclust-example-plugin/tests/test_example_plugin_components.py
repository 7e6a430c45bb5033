"""The example plugin's own tests: what a plugin author would ship.

Run them with ``python -m pytest tests`` from the plugin's folder.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.testing as pt
import privclust_example_plugin as plugin
from privclust_example_plugin import Rounding, TopBottomCoding, Uniqueness


@pytest.fixture
def registry():
    """A fresh registry holding only this plugin (and the host's own hooks):
    no installed entry point can interfere."""
    return privclust.Registry(plugins=[plugin], entry_points=[], use_env=False)


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(18, 90, 50).astype(float),
                         "income": rng.lognormal(10.5, 0.6, 50)})


# The conformance kit: one test per (component, check).
@pt.parametrize_components(
    Rounding(base=5.0),
    Rounding(base={"a": 1.0, "b": 2.5, "c": 0.5}, method="random"),
    TopBottomCoding(top={"a": 8.0}, bottom={"b": 1.0}, replacement="mean"),
    Uniqueness(k=2),
)
def test_conformance(component, check):
    check(component)


def test_registered_under_their_names(registry):
    assert registry.get("maskers", "rounding") is Rounding
    assert registry.get("maskers", "top-bottom-coding") is TopBottomCoding
    assert registry.get("evaluators", "uniqueness") is Uniqueness


def test_rounding_to_the_nearest_multiple(registry, frame):
    release = privclust.run({"steps": [{"use": "rounding", "base": {"age": 5, "income": 1000}}]}, frame,
                            registry=registry)
    assert np.all(release.data["age"] % 5 == 0)
    assert np.all(np.abs(release.data["income"] - frame["income"]) <= 500)
    assert release.ledger.of_kind("guarantee")[0].mechanism == "rounding"


def test_random_rounding_is_unbiased(registry):
    frame = pd.DataFrame({"x": np.full(20000, 0.3)})
    release = privclust.run({"steps": [{"use": "rounding", "base": 1, "method": "random"}]}, frame, seed=1,
                            registry=registry)
    assert set(np.unique(release.data["x"])) == {0.0, 1.0}
    assert release.data["x"].mean() == pytest.approx(0.3, abs=0.02)


def test_top_coding_by_the_mean_keeps_the_total(registry, frame):
    top = float(frame["income"].quantile(0.9))
    release = privclust.run({"steps": [{"use": "top-bottom-coding", "columns": ["income"],
                                        "top": {"income": top}, "replacement": "mean"}]}, frame, registry=registry)
    assert release.data["income"].sum() == pytest.approx(frame["income"].sum())
    coded = frame["income"] > top
    assert release.data.loc[coded, "income"].nunique() == 1


def test_a_single_coded_record_is_recorded_as_a_leak(registry, frame):
    top = float(frame["income"].nlargest(2).iloc[1])  # exactly one value lies above
    recipe = {"steps": [{"use": "top-bottom-coding", "columns": ["income"], "top": {"income": top},
                         "replacement": "mean"}]}
    with pytest.raises(privclust.ParameterError, match='allow_leaks = \\["replacement"\\]'):
        privclust.run(recipe, frame, registry=registry)  # refused unless the recipe accepts the leak by name
    with pytest.warns(privclust.PrivacyLeakWarning):
        release = privclust.run({**recipe, "privacy": {"allow_leaks": ["replacement"]}}, frame, registry=registry)
    assert len(release.ledger.of_kind("leak")) == 1


def test_uniqueness_figures(registry):
    frame = pd.DataFrame({"a": [1.0, 1.0, 1.0, 2.0, 2.0, 3.0]})
    release = privclust.run({"steps": [{"use": "rounding", "base": 1}], "evaluate": [{"use": "uniqueness"}]},
                            frame, registry=registry)
    assert release.evaluation("unique_share") == pytest.approx(1 / 6)
    assert release.evaluation("below_k_share") == pytest.approx(3 / 6)
    assert release.evaluation("smallest_class") == 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"base": 0}, "'base' parameter of rounding must be a number > 0"),
        ({"base": {"age": -1}}, "'base' parameter of rounding must be a number > 0"),
        ({"base": 5, "method": "up"}, "must be one of 'nearest', 'random'"),
        ({"bases": 5}, "did you mean 'base'?"),
    ],
)
def test_bad_parameters_are_recipe_errors(registry, params, message):
    with pytest.raises(privclust.RecipeError, match=message):
        privclust.compile({"steps": [{"use": "rounding", **params}]}, registry=registry)


def test_top_bottom_coding_needs_a_threshold(registry):
    with pytest.raises(privclust.RecipeError, match="needs 'top' or 'bottom'"):
        privclust.compile({"steps": [{"use": "top-bottom-coding"}]}, registry=registry)


def test_missing_base_for_a_column_names_it(registry, frame):
    with pytest.raises(privclust.DataError, match="no value for column.*income"):
        privclust.run({"steps": [{"use": "rounding", "base": {"age": 5}}]}, frame, registry=registry)
