"""key-linkage after a key masker: an intruder who knows a person's keys computes the released keys from them (the
public recoding, the suppression) and links among the released records whose keys match (a missing value matching
any category). Comparing the original keys with the released ones read 0 after recode and ignored suppressed keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset

import privclust
from privclust import EvaluationInputs
from privclust_plugins.microdata_evaluators import KeyLinkage

ROOT = Path(__file__).resolve().parents[1]


def _inputs(original, protected, columns=("x",)):
    return EvaluationInputs(original=original, protected=protected, columns=tuple(columns),
                            labels=pd.DataFrame(index=original.index))


def _brute(X, Y, candidate):
    """Share of released records j whose own original is among the t tied nearest originals i with
    ``candidate(i, j)`` (credit 1/t), on the columns standardised with the original's mean and s.d."""
    mean, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Z, Zp = (X - mean) / sd, (Y - mean) / sd
    n = len(X)
    credit = 0.0
    for j in range(n):
        cands = np.array([i for i in range(n) if candidate(i, j)], dtype=int)
        if j not in cands:
            continue
        d = np.sqrt(((Z[cands] - Zp[j]) ** 2).sum(axis=1))
        near = cands[d <= d.min() * (1 + 1e-9) + 1e-12]
        credit += (j in near) / len(near)
    return credit / n


def _best(X, Y, candidate):
    """:func:`_brute` of the best of the intruder's linkages: both columns, each alone (rt22: the figure is the
    largest of them)."""
    return max(_brute(X[:, s], Y[:, s], candidate) for s in ([0, 1], [0], [1]))


def _match(a, b):
    """Two rows of key values match: equal on every key both observe."""
    return all(pd.isna(u) or pd.isna(v) or u == v for u, v in zip(a, b, strict=True))


def _people(n=240, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(16, 90, n), "sex": rng.choice(["f", "m"], n),
                         "x": rng.normal(size=n), "y": rng.gamma(2.0, size=n)})


def test_after_recode_the_figure_is_linkage_within_the_released_cells():
    people = _people()
    release = privclust.run({"steps": [{"use": "recode", "columns": ["age"],
                                        "breaks": {"age": [16, 30, 45, 60, 75, 90]}}]}, people, seed=1)
    rng = np.random.default_rng(5)
    out = release.data.assign(x=people["x"] + rng.normal(0, 0.5, len(people)),
                              y=people["y"] + rng.normal(0, 0.5, len(people)))
    assert not set(out["age"].astype(str)) & set(people["age"].astype(str))  # labels: no original key survives
    got = KeyLinkage(keys=("age", "sex")).evaluate(_inputs(people, out, ("x", "y")))
    keys = out[["age", "sex"]].to_numpy()
    expected = _brute(people[["x", "y"]].to_numpy(), out[["x", "y"]].to_numpy(float),
                      lambda i, j: _match(keys[i], keys[j]))
    assert got["key_dbrl"] == pytest.approx(expected) and expected > 0.2  # the old definition read 0 here
    assert got["key_dbrl_linked_records"] == pytest.approx(expected * len(people))


def test_after_local_suppression_the_intruder_knows_the_keys_a_suppression_hid():
    """A released record's candidates are the originals whose keys, as an intruder who knows the true keys has
    them, match its released keys: a suppressed person of another cell is not one (red-team audit: counting every
    suppressed record as a candidate of its whole stratum understated the risk, 0.179 against 0.291)."""
    people = _people(120, seed=3).assign(age=lambda d: d["age"] // 20)
    release = privclust.run({"steps": [{"use": "local-suppression", "k": 3, "columns": ["age", "sex"]}]},
                            people, seed=1)
    out = release.data.assign(x=people["x"] + 0.3, y=people["y"])  # numeric columns shifted (the same for all)
    holed = out[["age", "sex"]].isna().any(axis=1).to_numpy()
    assert holed.any()
    keys = out[["age", "sex"]].to_numpy(dtype=object)
    true = people[["age", "sex"]].to_numpy(dtype=object)
    got = KeyLinkage(keys=("age", "sex")).evaluate(_inputs(people, out, ("x", "y")))
    expected = _best(people[["x", "y"]].to_numpy(), out[["x", "y"]].to_numpy(float),
                     lambda i, j: _match(true[i], keys[j]))
    assert got["key_dbrl"] == pytest.approx(expected)  # y released unchanged: linking on it alone is the best
    released_keys_only = _best(people[["x", "y"]].to_numpy(), out[["x", "y"]].to_numpy(float),
                                lambda i, j: _match(keys[i], keys[j]))
    assert got["key_dbrl"] >= released_keys_only  # the old candidates, a superset, understated it
    # a lone record: its keys suppressed, it matches everyone, the nearest of all is another record
    lone = people.iloc[:6].assign(age=[1, 1, 1, 2, 2, 2], sex="f", x=[0.0, 1, 2, 3, 4, 5], y=0.0)
    released = lone.assign(age=[1, 1, 1, 2, 2, np.nan], x=[0.0, 1, 2, 3, 4, 2.1])
    got = KeyLinkage(keys=("age", "sex")).evaluate(_inputs(lone, released, ("x", "y")))
    assert got["key_dbrl_linked_records"] == pytest.approx(5.0)  # record 5 matches record 2 better than itself
    released = lone.assign(age=[1, 1, 1, 2, 2, np.nan], x=[0.0, 1, 2, 3, 4, 4.5])
    got = KeyLinkage(keys=("age", "sex")).evaluate(_inputs(lone, released, ("x", "y")))
    assert got["key_dbrl_linked_records"] == pytest.approx(5.5)  # a tie with record 4 (x = 4): credit 1/2
    # record 2's age suppressed: the intruder knows it is 1, so record 2 is no candidate of released record 3 (age
    # 2, x = 2.1, nearest to record 2's x = 2): record 3 links to itself (the released keys alone read 5 links)
    released = lone.assign(age=[1, 1, np.nan, 2, 2, 2], x=[0.0, 1, 2, 2.1, 4, 5])
    got = KeyLinkage(keys=("age", "sex")).evaluate(_inputs(lone, released, ("x", "y")))
    assert got["key_dbrl_linked_records"] == pytest.approx(6.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unchanged_keys_give_the_old_figure(seed):
    rng = np.random.default_rng(seed)
    n = 200
    original = pd.DataFrame({"a": rng.integers(0, 6, n).astype(float), "b": rng.choice(["u", "v", "w"], n),
                             "x": rng.normal(size=n), "y": rng.integers(0, 3, n).astype(float)})
    protected = original.assign(x=original["x"] + rng.normal(0, 0.8, n), y=original["y"] + rng.integers(-1, 2, n))
    X, Y = original[["x", "y"]].to_numpy(), protected[["x", "y"]].to_numpy()
    ko, kp = original[["a", "b"]].to_numpy(dtype=object), protected[["a", "b"]].to_numpy(dtype=object)
    old = _brute(X, Y, lambda i, j: tuple(ko[i]) == tuple(kp[j]) and tuple(ko[j]) == tuple(kp[j]))
    got = KeyLinkage(keys=("a", "b")).evaluate(_inputs(original, protected, ("x", "y")))
    assert got["key_dbrl"] == pytest.approx(old, rel=1e-12)


def test_missing_numeric_values_link_with_the_dbrl_distance():
    # every released record matches every other (one category, or a missing key): the figure is plain dbrl's,
    # missing numeric values included
    rng = np.random.default_rng(4)
    n = 60
    original = pd.DataFrame({"k": "a", "x": rng.normal(size=n), "y": rng.normal(size=n)})
    original.loc[rng.random(n) < 0.2, "y"] = np.nan
    protected = original.assign(x=original["x"] + rng.normal(0, 0.3, n), y=original["y"] + rng.normal(0, 0.3, n))
    protected.loc[rng.random(n) < 0.2, "x"] = np.nan
    protected.loc[rng.random(n) < 0.3, "k"] = None
    inputs = _inputs(original, protected, ("x", "y"))
    plain = privclust.get_registry().create("evaluators", "dbrl").evaluate(inputs)
    got = KeyLinkage(keys=("k",)).evaluate(inputs)
    assert got["key_dbrl"] == pytest.approx(plain["dbrl"], rel=1e-9) and 0 < got["key_dbrl"] < 1


def test_the_published_survey_file_is_not_called_unlinkable():
    require_dataset("sdc_testdata.csv")
    survey = privclust.datasets.load("sdc_testdata")
    recipe = privclust.Recipe.from_toml(ROOT / "docs" / "examples" / "survey-publish.toml")
    release = privclust.run(recipe, survey, seed=1)
    inputs = EvaluationInputs(original=survey, protected=release.data, columns=("expend", "income", "savings"),
                              labels=pd.DataFrame(index=survey.index), roles=recipe.roles)
    got = KeyLinkage().evaluate(inputs)
    assert 0 < got["key_dbrl"] < 1 and got["key_dbrl_linked_records"] > 0
