"""rt22 F4: ``dbrl`` (and ``key-linkage``'s numeric part) as an intruder links. It left out the numeric columns
released as in the original (0.322 where a nearest-neighbour intruder on them linked 0.906) and let a column drowned
in noise hide the others (0.002 where linking on the other column alone gave 0.181)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import cKDTree

import privclust
from privclust_plugins import _microdata_metrics as mm


def _nn_link(X, Y):
    """rt22 k1.py's intruder: share of released rows whose nearest original (standardised by the original's s.d.)
    is their own (ties 1/t)."""
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1
    Z, Zp = (X - mu) / sd, (Y - mu) / sd
    tree = cKDTree(Z)
    d, _ = tree.query(Zp, k=1)
    own = np.sqrt(((Z - Zp) ** 2).sum(1))
    ok = own <= d * (1 + 1e-9) + 1e-12
    cnt = np.array(tree.query_ball_point(Zp, d * (1 + 1e-9) + 1e-12, return_length=True), float)
    return float(np.where(ok, 1 / np.maximum(cnt, 1), 0).mean())


def _data(n=1000):
    rng = np.random.default_rng(1)
    return pd.DataFrame({"a": rng.normal(50, 10, n).round(2), "b": rng.normal(20, 5, n).round(2),
                         "c": rng.lognormal(3, 1, n).round(1)})


def _run(recipe, frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=1)


def test_the_default_links_on_the_columns_released_unchanged_too():
    df = _data()
    release = _run({"steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]}], "evaluate": ["dbrl"]}, df)
    ev = release.evaluations.set_index("metric")
    attacker = _nn_link(df.to_numpy(float), release.data[["a", "b", "c"]].to_numpy(float))
    assert attacker > 0.8
    assert ev.loc["dbrl", "value"] >= attacker - 1e-12  # was 0.322
    assert ev.loc["dbrl", "columns"] == "a, b, c"  # the figure says what it linked on


def test_named_columns_and_with_unchanged_false_keep_the_columns():
    df = _data()
    recipe = {"steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]}],
              "evaluate": [{"use": "dbrl", "with_unchanged": False}, {"use": "dbrl", "columns": ["a"]}]}
    ev = _run(recipe, df).evaluations
    on = ev.query("metric == 'dbrl'")["columns"].tolist()
    assert on == ["a, b", "a"]
    assert ev.query("metric == 'dbrl'")["value"].iloc[0] < 0.5


def test_a_column_drowned_in_noise_does_not_hide_the_other():
    df = _data()[["a", "b"]]
    bounds = {"a": [0, 100], "b": [-1e6, 1e6]}
    release = _run({"steps": [{"use": "laplace", "epsilon": 2000.0, "columns": ["a", "b"], "bounds": bounds}],
                    "evaluate": ["dbrl"]}, df)
    X, Y = df.to_numpy(float), release.data[["a", "b"]].to_numpy(float)
    attacker = _nn_link(X[:, :1], Y[:, :1])  # the intruder drops b
    assert attacker > 0.1
    assert release.evaluation("dbrl") >= attacker - 1e-12  # was 0.002
    assert release.evaluation("dbrl_linked_on: a") == 1.0  # the linkage that gave it: a alone, one column
    assert _nn_link(X, Y) < 0.05  # linking on both columns, every column counting equally, sees nothing


def test_roles_are_not_linkage_columns():
    df = _data().assign(hid=np.arange(1000), w=np.random.default_rng(2).integers(1, 9, 1000).astype(float))
    recipe = {"roles": {"ids": "hid", "weight": "w"},
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]}], "evaluate": ["dbrl"]}
    ev = _run(recipe, df).evaluations.set_index("metric")
    assert ev.loc["dbrl", "columns"] == "a, b, c"  # not the id (a direct identifier) nor the weight


def test_key_linkage_links_on_the_unchanged_numeric_columns_too():
    rng = np.random.default_rng(4)
    df = _data(400).assign(sex=rng.choice(["f", "m"], 400))
    recipe = {"roles": {"keys": "sex"}, "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b"]}],
              "evaluate": ["key-linkage", {"use": "key-linkage", "with_unchanged": False}]}
    ev = _run(recipe, df).evaluations.query("metric == 'key_dbrl'")
    assert ev["columns"].tolist() == ["a, b, c, sex", "a, b, sex"]
    assert ev["value"].iloc[0] > ev["value"].iloc[1]


@pytest.mark.parametrize("p, count", [(1, 1), (2, 3), (3, 7), (12, 25), (13, 14)])
def test_the_linkages_tried(p, count):
    sets = mm.linkage_sets(p)
    assert len(sets) == count and sets[0] == tuple(range(p))  # all the columns first
    assert len(set(sets)) == len(sets)


def test_the_host_says_whether_the_columns_were_named():
    """The host tells an evaluator whether the entry named its columns (``columns_named``): an entry that names
    exactly the steps' columns is linked on as named, the default is widened by the unchanged numeric columns."""
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300), "c": rng.normal(size=300)})
    step = {"use": "microaggregation", "k": 3, "columns": ["a", "b"]}
    default = privclust.run({"steps": [step], "evaluate": [{"use": "dbrl"}]}, data, seed=1)
    named = privclust.run({"steps": [step], "evaluate": [{"use": "dbrl", "columns": ["a", "b"]}]}, data, seed=1)
    on = {r: set(t.loc[t["metric"] == "dbrl", "columns"].iloc[0].split(", "))
          for r, t in (("default", default.evaluations), ("named", named.evaluations))}
    assert on == {"default": {"a", "b", "c"}, "named": {"a", "b"}}
