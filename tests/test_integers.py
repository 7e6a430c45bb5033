"""Integer columns are released as integers (issue 10, item 3): the host rounds
them after the steps, with controlled rounding that keeps the edit rules,
records what it did, and checks the rules on the rounded file."""

from __future__ import annotations

import io
import sys
import types
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
import privclust.testing as pt
from privclust import ConstraintSet, PrivacyContext
from privclust._io import frame_writer, read_frame
from privclust.cli import main
from privclust.constraints import judge
from privclust.integers import _integer_dtype, integer_columns, release_integers
from privclust_plugins.constraints import LinearConstraints

MDAV = {"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}


def _households(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.integers(0, 5000, n), "b": rng.integers(0, 800, n)})
    frame["t"] = frame["a"] + frame["b"]
    return frame


def _rounding_entry(release: privclust.Release):
    found = [e for e in release.ledger if e.mechanism == "integer rounding"]
    assert len(found) == 1
    return found[0]


def _rule_entry(release: privclust.Release, rule: str):
    found = [e for e in release.ledger.of_kind("guarantee") if (e.details or {}).get("rule") == rule]
    assert len(found) == 1
    return found[0]


# ---------------------------------------------------------------------------
# Integer columns stay integer through the steps
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint16", "Int64"])
def test_mdav_releases_integer_columns_in_their_input_dtype(dtype):
    frame = _households().astype(dtype)
    frame["x"] = np.linspace(0.0, 1.0, len(frame))
    release = privclust.run({"steps": [MDAV]}, frame, seed=1)
    for c in ("a", "b", "t"):
        assert release.data[c].dtype == frame[c].dtype
    assert release.data["x"].dtype == np.float64
    assert not release.data["a"].equals(frame["a"])  # it did change them
    claim = [e for e in release.ledger if e.mechanism == "k-anonymity"][0]
    assert claim.status == "verified"  # identical records stay identical through the rounding
    assert len(release.data[["a", "b", "t", "x"]].drop_duplicates()) <= len(frame) // 3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fuzzy_microaggregation_with_an_integer_equality(seed):
    frame = _households(seed=seed)
    recipe = {"constraints": [{"use": "linear", "rules": ["t = a + b", "b >= 0"]}],
              "steps": [{"use": "fuzzy-microaggregation", "k": 3}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run(recipe, frame, seed=seed)
    data = release.data
    assert all(data[c].dtype == np.int64 for c in ("a", "b", "t"))
    assert (data["t"] == data["a"] + data["b"]).all()
    assert (data["b"] >= 0).all()
    entry = _rule_entry(release, "t = a + b")
    assert entry.details["violated_records"] == 0 and entry.details["broken_by_rounding"] == 0
    assert "kept it on every record where it held before" in entry.statement


def test_laplace_noise_on_integer_columns_is_released_as_the_mechanism_gave_it():
    """Not rounded back to integers: an integer column is one whose every value is whole (a CSV file's type is read
    from its values), and rounding decided by that would tell a data set from its neighbour with one decimal."""
    frame = _households()
    recipe = {"steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["a", "b"],
                         "bounds": {"a": [0, 5000], "b": [0, 800]}}]}
    release = privclust.run(recipe, frame, seed=4)
    noisy = release.outcomes[0].result.data
    for c in ("a", "b"):
        assert release.data[c].dtype == np.float64 and release.data[c].equals(noisy[c])
    assert release.data["t"].equals(frame["t"])  # no step changed it
    assert not [e for e in release.ledger if e.mechanism == "integer rounding"]
    assert release.ledger.of_kind("dp")  # the DP entries are as the step wrote them


def test_a_masker_on_uint8_that_goes_negative_is_widened_and_said():
    frame = pd.DataFrame({"u": np.array([0, 1, 2, 0, 1, 0] * 5, dtype=np.uint8)})
    current = pd.DataFrame({"u": np.linspace(-3.2, 2.4, 30)})
    context = PrivacyContext(None, seed=1)
    outcome = types.SimpleNamespace(kind="maskers", columns=("u",), component=object())
    release_integers(context, frame, current, [outcome], [], None)
    assert current["u"].dtype == np.int64
    assert np.array_equal(current["u"].to_numpy(), np.rint(np.linspace(-3.2, 2.4, 30)).astype(np.int64))
    entry = [e for e in context.ledger if e.mechanism == "integer rounding"][0]
    assert "do not fit uint8, so released as int64" in entry.statement


def test_geometric_integers_are_untouched():
    frame = _households()
    recipe = {"steps": [{"use": "geometric", "epsilon": 1.0, "columns": ["a", "b"],
                         "bounds": {"a": [0, 5000], "b": [0, 800]}}]}
    release = privclust.run(recipe, frame, seed=5)
    noisy = release.outcomes[0].result.data
    for c in ("a", "b"):
        assert release.data[c].dtype == np.int64
        assert np.array_equal(release.data[c].to_numpy(), noisy[c].to_numpy())
    assert not [e for e in release.ledger if e.mechanism == "integer rounding"]


# ---------------------------------------------------------------------------
# Controlled rounding (the linear handler's round_integers)
# ---------------------------------------------------------------------------


def _feasible_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.uniform(-50, 50, n) * rng.choice([1, 1e3], n)
    b = rng.uniform(0, 20, n)
    return np.column_stack([a, b, a + b])


@pytest.mark.parametrize("seed", range(6))
def test_an_integer_equality_holds_exactly_on_every_record(seed):
    rng = np.random.default_rng(seed)
    bound = LinearConstraints(rules=["t = a + b", "b >= 0"]).bind(["a", "b", "t"])
    X = _feasible_floats(rng, 5000)
    X[rng.random(X.shape) < 0.01] = np.nan  # missing values stay missing
    Y = bound.round_integers(X, [True, True, True])
    assert np.array_equal(np.isnan(Y), np.isnan(X))
    ok = ~np.isnan(Y).any(axis=1)
    assert np.all(Y[ok] == np.round(Y[ok]))
    assert np.all(Y[ok, 2] == Y[ok, 0] + Y[ok, 1])
    assert np.all(Y[ok, 1] >= 0)
    assert np.all(np.abs(Y[ok] - X[ok]) <= 1.5)  # one column solved for: at most the other two halves
    again = bound.round_integers(X, [True, True, True])
    assert np.array_equal(again, Y, equal_nan=True)  # deterministic


@pytest.mark.parametrize("seed", range(4))
def test_several_equalities_sharing_columns_all_hold(seed):
    rng = np.random.default_rng(seed)
    rules = ["t = a + b", "s = t + c", "a = d - e", "2*u = 2*a + 2*c"]
    bound = LinearConstraints(rules=rules).bind(["a", "b", "c", "d", "e", "t", "s", "u"])
    a, b, c, e = (rng.uniform(-100, 100, 2000) for _ in range(4))
    t, d = a + b, a + e
    X = np.column_stack([a, b, c, d, e, t, t + c, a + c])
    Y = bound.round_integers(X, np.ones(8, dtype=bool))
    assert np.all(Y == np.round(Y))
    assert np.all(bound.violations(Y) == 0.0)
    plan = bound.rounding_plan(np.ones(8, dtype=bool))
    assert plan.unsolved == () and [g for g, _ in plan.order] == [(0, 1, 2, 3)]  # one system, solved together


def test_equalities_sharing_their_columns_are_solved_as_one_integer_system():
    # solved one after the other, the second equality would have no column left that the first does not use
    rules = ["a + c = b + d", "a + b + c + d = 2*e"]
    bound = LinearConstraints(rules=rules).bind(["a", "b", "c", "d", "e"])
    plan = bound.rounding_plan(np.ones(5, dtype=bool))
    assert plan.unsolved == () and [g for g, _ in plan.order] == [(0, 1)]
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(0, 100, 1000) for _ in range(3))
    d = a + c - b
    X = np.column_stack([a, b, c, d, (a + b + c + d) / 2])
    Y = bound.round_integers(X, np.ones(5, dtype=bool))
    assert np.all(Y == np.round(Y)) and np.all(bound.violations(Y) == 0.0)
    assert np.all(np.abs(Y - X) <= 2.5)


def test_inequalities_are_repaired_by_rounding_down_or_up():
    bound = LinearConstraints(rules=["a <= 0.5*b", "c >= 0.5"]).bind(["a", "b", "c"])
    X = np.array([[2.6, 5.2, 0.5], [1.0, 3.0, 0.7]])
    assert np.all(bound.violations(X) <= 1e-12)
    plain = np.rint(X)
    assert np.any(bound.violations(plain) > 0)  # nearest-integer rounding breaks both rules on the first row
    Y = bound.round_integers(X, [True, True, True])
    assert np.array_equal(Y, [[2.0, 6.0, 1.0], [1.0, 3.0, 1.0]])
    assert np.all(bound.violations(Y) == 0.0)


def test_the_solved_column_avoids_a_bound_it_would_cross():
    X = np.array([[0.4, 4.45, 4.85]])
    free = LinearConstraints(rules=["t = a + b"]).bind(["a", "b", "t"])
    assert np.array_equal(free.round_integers(X, [True] * 3), [[0.0, 5.0, 5.0]])  # b moves least
    capped = LinearConstraints(rules=["t = a + b", "b <= 4.5"]).bind(["a", "b", "t"])
    assert np.array_equal(capped.round_integers(X, [True] * 3), [[1.0, 4.0, 5.0]])  # b = 5 would cross b <= 4.5


def test_fixed_columns_are_never_changed_and_float_columns_are_solved_for():
    bound = LinearConstraints(rules=["t = a + b"]).bind(["a", "b", "t"])
    X = np.array([[1.4, 2.4, 3.8], [0.2, 0.2, 0.4]])
    Y = bound.round_integers(X, [True, True, False])  # t is a float column: it takes the rounding
    assert np.array_equal(Y, [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    X2 = np.array([[1.4, 2.6, 4.0]])
    Y2 = bound.round_integers(X2, [True, True, True], [False, False, True])  # t as released: a or b solved
    assert Y2[0, 2] == 4.0 and Y2[0, 0] + Y2[0, 1] == 4.0


def test_a_rule_broken_before_rounding_is_only_rounded():
    bound = LinearConstraints(rules=["t = a + b"]).bind(["a", "b", "t"])
    X = np.array([[1.4, 2.4, 9.6]])  # a noise step broke it: the rounding does not repair it
    assert np.array_equal(bound.round_integers(X, [True] * 3), np.rint(X))


def test_rules_that_cannot_be_kept_exactly_are_named_with_the_reason():
    integer = np.ones(3, dtype=bool)
    cases = {
        "2*t = 2*a + 2*b": None,  # the gcd: t = a + b
        "2*t = 2*a + 2*b + 1": "no integer record satisfies it",
        "10*t = 11*a + 10*b": "no column changed by a step has coefficient +1 or -1",
        "t = 1.16*a + 1.07*b": "not an integer",
    }
    for rule, reason in cases.items():
        plan = LinearConstraints(rules=[rule]).bind(["a", "b", "t"]).rounding_plan(integer)
        if reason is None:
            assert plan.unsolved == () and plan.order
        else:
            assert len(plan.unsolved) == 1 and reason in plan.unsolved[0][1]


def test_coefficient_two_on_every_column_is_reported_honestly():
    frame = _households()
    rules = ["2*t = 2*a + 2*b + 1"]  # feasible over the reals, no integer record satisfies it
    # it was run, and its violation by every released record reported; since trust17a no released file could
    # satisfy it, so it is refused before any step runs
    with pytest.raises(privclust.DataError, match="no integer record satisfies it"):
        privclust.run({"constraints": [{"use": "linear", "rules": rules}], "steps": [MDAV]}, frame, seed=1)
    even = ["2*t = 2*a + 2*b"]  # the same with an even constant: kept exactly
    release = privclust.run({"constraints": [{"use": "linear", "rules": even}], "steps": [MDAV]}, frame, seed=1)
    assert (release.data["t"] == release.data["a"] + release.data["b"]).all()
    assert _rule_entry(release, even[0]).details["violated_records"] == 0


def test_the_rounding_entry_is_true():
    frame = _households()
    frame["x"] = np.linspace(0.0, 1.0, len(frame))
    recipe = {"constraints": [{"use": "linear", "rules": ["t = a + b"]}], "steps": [MDAV]}
    release = privclust.run(recipe, frame, seed=2)
    masked = release.outcomes[0].result.data
    entry = _rounding_entry(release)
    assert entry.kind == "process" and entry.component == "privclust (host)"
    assert entry.details["columns"] == ["a", "b", "t"]
    for c in ("a", "b", "t"):
        assert entry.details["rounded"][c] == int((release.data[c].to_numpy() != masked[c].to_numpy()).sum())
        assert entry.details["dtypes"][c] == str(release.data[c].dtype) == "int64"
    assert entry.details["controlled_rounding"] == ["linear"]
    assert "x" not in entry.details["rounded"]  # a float column is not rounded
    seq = [e.seq for e in release.ledger]
    assert entry.seq < _rule_entry(release, "t = a + b").seq < max(seq)  # before the rules' and the host's checks
    verified = [e for e in release.ledger.of_kind("verified") if "Host check of the release" in e.statement][0]
    same = int((release.data[list(frame.columns)].to_numpy() == frame.to_numpy()).all(axis=1).sum())
    assert verified.details["verbatim_records"] == same  # the verbatim count is made on the rounded file


def test_a_handler_without_the_capability_gets_plain_rounding_and_a_report():
    @attrs.frozen(kw_only=True)
    class Plain:
        name: ClassVar[str] = "plain-linear"
        rules: tuple = privclust.param(tuple, converter=tuple, doc="rules")

        def _inner(self):
            return LinearConstraints(rules=list(self.rules))

        def variables(self):
            return self._inner().variables()

        def describe(self):
            return self._inner().describe()

        def check(self, columns):
            return self._inner().check(columns)

        def bind(self, columns, rules=None):
            inner = self._inner().bind(columns, rules)
            return types.SimpleNamespace(columns=inner.columns, rules=inner.rules, project=inner.project,
                                         violations=inner.violations)

    class PlainPlugin:
        @privclust.hookimpl
        def privclust_register_constraint_handlers(register):
            register(Plain)

    registry = privclust.Registry(plugins=[PlainPlugin])
    frame = _households()
    recipe = {"constraints": [{"use": "plain-linear", "rules": ["t = a + b"]}], "steps": [MDAV]}
    release = privclust.run(recipe, frame, seed=1, registry=registry)
    masked = release.outcomes[0].result.data
    assert np.array_equal(release.data["a"].to_numpy(), np.rint(masked["a"].to_numpy()))
    broken = int((release.data["t"] != release.data["a"] + release.data["b"]).sum())
    assert broken > 0  # nearest-integer rounding breaks a sum on some records
    entry = _rule_entry(release, "t = a + b")
    assert entry.details["violated_records"] == broken == entry.details["broken_by_rounding"]
    rounding = _rounding_entry(release)
    assert "handlers without controlled rounding" in rounding.statement
    assert rounding.details["controlled_rounding"] == []


def test_the_conformance_kit_runs_round_integers():
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "t": [4.0, 6.0]})
    pt.check_component(LinearConstraints(rules=["t = a + b", "b >= 0"]), frame)

    class Broken(LinearConstraints):
        def bind(self, columns, rules=None):
            inner = super().bind(columns, rules)

            class Bad:
                def round_integers(self, values, integer, fixed):
                    return np.asarray(values) + 0.25

            bad = Bad()
            bad.columns, bad.rules = inner.columns, inner.rules
            return bad

    check = dict(pt.component_checks(Broken(rules=["t = a + b"]), frame))["optional_capabilities"]
    with pytest.raises(AssertionError, match="round_integers"):
        check(Broken(rules=["t = a + b"]))


# ---------------------------------------------------------------------------
# Missing values (NaN-safe: a missing value stays missing)
# ---------------------------------------------------------------------------


def test_the_host_keeps_missing_values_missing_in_a_nullable_dtype():
    frame = pd.DataFrame({"a": pd.array([1, 2, None, 4], dtype="Int64"), "b": np.array([1, 2, 3, 4]),
                          "t": np.array([2, 4, 3, 8])})
    current = frame.copy()
    current["a"] = [1.4, 2.4, np.nan, 3.6]
    current["b"] = [1.4, 2.2, 3.0, 4.7]
    current["t"] = [2.8, 4.6, 3.0, 8.3]
    handler = LinearConstraints(rules=["t = a + b"])
    rules = ConstraintSet(("a", "b", "t"), [handler.bind(("a", "b", "t"))])
    context = PrivacyContext(None, seed=1)
    outcome = types.SimpleNamespace(kind="maskers", columns=("a", "b", "t"), component=object())
    broken = release_integers(context, frame, current, [outcome], [handler], rules)
    assert str(current["a"].dtype) == "Int64" and current["a"].isna().tolist() == [False, False, True, False]
    assert current["b"].dtype == np.int64 and current["t"].dtype == np.int64
    ok = current["a"].notna()
    assert (current["t"][ok] == current["a"][ok] + current["b"][ok]).all()
    assert current["b"].tolist()[2] == 3 and broken == {0: 0}


def test_missing_values_in_a_numpy_integer_column_become_nullable():
    dtype, note = _integer_dtype(np.dtype(np.int32), np.array([1.0, np.nan, 3.0]))
    assert str(dtype) == "Int32" and "nullable Int32" in note
    dtype, note = _integer_dtype(np.dtype(np.uint8), np.array([1.0, 300.0]))
    assert dtype == np.int64 and "do not fit uint8" in note
    assert _integer_dtype(pd.Int64Dtype(), np.array([1.0, np.nan]))[0] == pd.Int64Dtype()


def test_an_untouched_nullable_column_passes_through():
    frame = _households()
    frame["w"] = pd.array([1, None] + [3] * (len(frame) - 2), dtype="Int64")
    release = privclust.run({"steps": [{**MDAV, "columns": ["a", "b", "t"]}]}, frame, seed=1)
    assert release.data["w"].equals(frame["w"])
    assert integer_columns(frame) == ("a", "b", "t", "w")


# ---------------------------------------------------------------------------
# Files: CSV without decimals, Parquet keeps dtypes
# ---------------------------------------------------------------------------


def test_csv_reader_keeps_integer_columns_integer_with_missing_values(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("a,b,c,d\n1,1.0,x,\n2,,y,3\n,3.5,z,4\n4,2.0,w,5\n")
    frame = read_frame(path)
    assert str(frame["a"].dtype) == "Int64" and str(frame["d"].dtype) == "Int64"
    assert frame["b"].dtype == np.float64  # written with a decimal point: a float column
    assert frame["a"].isna().tolist() == [False, False, True, False]
    full = tmp_path / "full.csv"
    full.write_text("a,b\n1,2\n3,4\n")
    assert read_frame(full)["a"].dtype == np.int64


def test_csv_round_trip_writes_no_decimals(tmp_path):
    frame = _households()
    frame["x"] = np.linspace(0.0, 1.0, len(frame))
    source = tmp_path / "in.csv"
    frame.to_csv(source, index=False)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[[constraints]]\nuse = "linear"\nrules = ["t = a + b"]\n\n'
                      '[[steps]]\nuse = "microaggregation"\nclusterer = { use = "mdav", k = 3 }\n')
    out = tmp_path / "out.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", str(recipe), "--input", str(source), "--output", str(out), "--seed", "1"]) == 0
    text = out.read_text().splitlines()
    columns = text[0].split(",")
    for line in text[1:]:
        fields = dict(zip(columns, line.split(","), strict=True))
        for c in ("a", "b", "t"):
            assert fields[c].lstrip("-").isdigit(), line
        assert int(fields["t"]) == int(fields["a"]) + int(fields["b"])
    back = read_frame(out)
    assert all(back[c].dtype == np.int64 for c in ("a", "b", "t")) and back["x"].dtype == np.float64


def test_csv_writes_a_missing_integer_as_an_empty_field(tmp_path):
    frame = pd.DataFrame({"a": pd.array([1, None, 3], dtype="Int64"), "x": [0.5, 1.0, 1.5]})
    path = tmp_path / "out.csv"
    frame_writer(frame, path)(path)
    assert path.read_text().splitlines() == ["a,x", "1,0.5", ",1.0", "3,1.5"]
    assert read_frame(path)["a"].equals(frame["a"])


def test_parquet_keeps_dtypes(tmp_path):
    pytest.importorskip("pyarrow")
    frame = _households().astype({"a": "int32", "b": "uint16"})
    frame["w"] = pd.array([1, None] + [3] * (len(frame) - 2), dtype="Int64")
    release = privclust.run({"steps": [{**MDAV, "columns": ["a", "b", "t"]}]}, frame, seed=1)
    path = tmp_path / "out.parquet"
    frame_writer(release.data, path)(path)
    back = read_frame(path)
    assert back.dtypes.to_dict() == frame.dtypes.to_dict()
    assert back.equals(release.data)


def test_standard_input_keeps_integers(monkeypatch):
    raw = b"a,b\n1,\n2,3\n"
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(raw)))
    frame = read_frame("-")
    assert frame["a"].dtype == np.int64 and str(frame["b"].dtype) == "Int64"


@pytest.mark.parametrize("seed", range(10))
def test_random_integer_systems_keep_every_equality_the_plan_solves(seed):
    """Random equalities with small integer coefficients over 5 integer columns, on records that satisfy
    them in floats (integer points moved within the equalities' null space): every equality the plan solves
    holds exactly after rounding, and the plan names every other one."""
    rng = np.random.default_rng(seed)
    names = ["a", "b", "c", "d", "e"]
    n_eq = int(rng.integers(1, 4))
    E = rng.integers(-2, 3, size=(n_eq, 5)).astype(float)
    E[np.arange(n_eq), rng.permutation(5)[:n_eq]] = rng.choice([-1.0, 1.0], n_eq)  # mostly solvable
    if np.linalg.matrix_rank(E) < n_eq:
        pytest.skip("dependent random equalities (the handler refuses them)")
    Z = rng.integers(-1000, 1000, size=(3000, 5)).astype(float)
    f = np.zeros(n_eq)
    rules = [" + ".join(f"({E[i, j]:g})*{names[j]}" for j in range(5) if E[i, j]) + " = 0" for i in range(n_eq)]
    Z -= (Z @ E.T) @ np.linalg.pinv(E).T  # onto E z = 0 ...
    Z = np.rint(Z)  # ... and back to integers: they need not satisfy E z = 0 any more
    keep = np.all(np.abs(Z @ E.T - f) < 0.5, axis=1)
    Z = Z[keep]
    _, _, Vt = np.linalg.svd(E)
    N = Vt[n_eq:].T
    X = Z + (rng.uniform(-3, 3, size=(len(Z), N.shape[1])) @ N.T)  # still on E x = 0, to float rounding
    bound = LinearConstraints(rules=rules).bind(names)
    plan = bound.rounding_plan(np.ones(5, dtype=bool))
    solved = [i for group, _ in plan.order for i in group]
    assert sorted(solved + [i for i, _ in plan.unsolved]) == list(range(n_eq))
    assert solved  # a coefficient +-1 on a column of its own: at least one is solved
    Y = bound.round_integers(X, np.ones(5, dtype=bool))
    assert np.all(Y == np.round(Y))
    residual = Y @ E.T
    for i in solved:
        assert np.all(residual[:, i] == 0.0), rules[i]


def test_groups_of_integers_beyond_2_53_are_counted_exactly():
    # six distinct ids near 2^60 round to one double: the host counts exact values, not doubles
    base = 2**60
    frame = pd.DataFrame({"id": np.array([base + i for i in range(6)], dtype=np.int64),
                          "x": np.arange(6, dtype=float) * 1.5 + np.array([0, .3, .1, .7, .2, .9])})
    recipe = {"steps": [{"use": "mdav", "k": 3, "columns": ["id"]},
                        {"use": "microaggregation", "k": 3, "columns": ["x"]}]}
    release = privclust.run(recipe, frame, seed=1)
    assert release.data["id"].nunique() == 6
    claims = {c["component"]: c for c in release.verification["claims"]}
    assert claims["mdav"]["status"] == "refuted" and claims["mdav"]["records_in_small_groups"] == 6
    assert "k-anonymity with k = 3 of id" not in release.verdict
    assert "mdav claims k-anonymity with k = 3, which does NOT hold" in release.verdict


def test_an_edit_rule_broken_by_rounding_near_a_million_is_a_violation():
    # t = 1.5 a + b cannot hold on integers where a is odd: off by 0.5 to 1.5 at values near 1e6, a violation
    # (a tolerance of 1e-6 times the values once passed it as float rounding)
    rng = np.random.default_rng(0)
    a, b = rng.integers(1_000_000, 2_000_000, 30), rng.integers(1_000_000, 2_000_000, 30)
    frame = pd.DataFrame({"a": a, "b": b, "t": np.rint(1.5 * a + b).astype(np.int64)})
    recipe = {"constraints": [{"use": "linear", "rules": ["t = 1.5*a + b"]}],
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b", "t"]}]}
    release = privclust.run(recipe, frame, seed=1)
    data = release.data
    wrong = int((data["t"] - 1.5 * data["a"] - data["b"] != 0).sum())
    assert wrong > 0
    rule = next(e for e in release.ledger.of_kind("guarantee") if e.mechanism == "edit rule")
    assert rule.details["violated_records"] == wrong
    assert rule.statement.startswith(f"edit rule 't = 1.5*a + b' is violated by {wrong} of 30 released records")
    assert rule.details["broken_by_rounding"] == wrong


def test_the_rounding_entry_says_which_rules_it_did_not_keep():
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 50, 40), rng.integers(0, 50, 40)
    frame = pd.DataFrame({"a": a, "b": b, "t": a + b})
    step = [{"use": "microaggregation", "k": 3, "columns": ["a", "b", "t"]}]

    def rounding(constraints):
        release = privclust.run({"constraints": constraints, "steps": step}, frame, seed=2)
        entry = next(e for e in release.ledger if e.mechanism == "integer rounding")
        broken = int((release.data["a"] > 30.5).sum())
        return entry.statement, broken

    # split over two linear handlers: their rules are joined and rounded as one set (the second's rule was broken
    # where the first's rounding had moved a, which the second could not move back)
    text, broken = rounding([{"use": "linear", "rules": ["t = a + b"]}, {"use": "linear", "rules": ["a <= 30.5"]}])
    assert broken == 0 and "It kept every rule on every record where the rule held before." in text
    assert "The rules of 2 [[constraints]] tables were rounded together, as one set." in text
    text, broken = rounding([{"use": "linear", "rules": ["t = a + b", "a <= 30.5"]}])
    assert broken == 0 and "It kept every rule on every record where the rule held before." in text
    assert "rounded together" not in text


def test_rules_of_a_table_that_cannot_be_joined_are_rounded_after_and_what_broke_is_said():
    class Apart(LinearConstraints):  # linear rules whose bound rules do not offer joined_with
        name: ClassVar[str] = "apart-linear"

        def bind(self, columns, rules=None):
            inner = super().bind(columns, rules)
            return types.SimpleNamespace(columns=inner.columns, rules=inner.rules, project=inner.project,
                                         violations=inner.violations, round_integers=inner.round_integers,
                                         magnitudes=inner.magnitudes)

    class ApartPlugin:
        @privclust.hookimpl
        def privclust_register_constraint_handlers(register):
            register(Apart)

    registry = privclust.Registry(plugins=[ApartPlugin])
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 50, 40), rng.integers(0, 50, 40)
    frame = pd.DataFrame({"a": a, "b": b, "t": a + b})
    recipe = {"constraints": [{"use": "linear", "rules": ["t = a + b"]},
                              {"use": "apart-linear", "rules": ["a <= 30.5"]}],
              "steps": [{"use": "microaggregation", "k": 3, "columns": ["a", "b", "t"]}]}
    release = privclust.run(recipe, frame, seed=2, registry=registry)
    text = _rounding_entry(release).statement
    broken = int((release.data["a"] > 30.5).sum())
    assert broken > 0 and _rule_entry(release, "a <= 30.5").details["broken_by_rounding"] == broken
    assert "It did not keep 'a <= 30.5' everywhere" in text and "It kept every rule" not in text
    assert "an earlier handler's rules have rounded" in text and "rounded together" not in text


def test_joined_with_joins_linear_rules_over_the_same_columns_only():
    first = LinearConstraints(rules=["t = a + b"]).bind(["a", "b", "t"])
    second = LinearConstraints(rules=["a <= 2.5", "t = a + b"]).bind(["a", "b", "t"])  # a repeated rule is fine
    joined = first.joined_with(second)
    assert joined.rules == ("t = a + b", "a <= 2.5", "t = a + b") and joined.columns == ("a", "b", "t")
    values = np.array([[2.4, 1.4, 3.8]])  # rint gives 2 + 1 != 4; solving t = a + b for a would give 3 > 2.5
    assert first.round_integers(values, np.ones(3, dtype=bool))[0, 0] == 3.0  # alone, it cannot know a <= 2.5
    out = joined.round_integers(values, np.ones(3, dtype=bool))
    assert out[0, 0] <= 2.5 and out[0, 0] + out[0, 1] == out[0, 2]
    assert first.joined_with(LinearConstraints(rules=["a <= 3"]).bind(["a", "t"])) is None
    assert first.joined_with(types.SimpleNamespace(columns=("a", "b", "t"), rules=("a <= 3",))) is None


def test_rounding_keeps_records_that_match_through_missing_values_matched():
    # t = a + b is solved on complete records and cannot be evaluated on records missing b and t, which were
    # rounded to the nearest integer: a group matched through missing values was split and the k-anonymity
    # claim refuted on the released file
    rng = np.random.default_rng(11)
    n = 30
    a, b = rng.integers(0, 50, n), rng.integers(0, 50, n)
    frame = pd.DataFrame({"a": a, "b": b, "t": a + b}).astype("Int64")
    miss = rng.random(n) < 0.3
    frame.loc[miss, ["b", "t"]] = pd.NA
    recipe = {"constraints": [{"use": "linear", "rules": ["t = a + b"]}],
              "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run(recipe, frame, seed=11)
    claims = [e for e in release.ledger if (e.mechanism or "").startswith("k-anonymity")]
    assert claims and all(e.status == "verified" for e in claims)
    entry = _rounding_entry(release)
    assert entry.details["records_rounded_with_their_matches"] >= 1
    assert entry.details["records_split_from_matches"] == 0
    assert "stay matched" in entry.statement
    assert _rule_entry(release, "t = a + b").details["broken_by_rounding"] == 0
    data = release.data.dropna()
    assert (data["t"] == data["a"] + data["b"]).all()


def test_a_record_matching_records_rounded_apart_is_reported():
    from privclust.integers import _round_with_matches
    codes = np.array([[0.0, 0.0], [0.0, 1.0], [0.0, np.nan], [1.0, np.nan]])
    Y = np.array([[3.0, 1.0], [4.0, 2.0], [3.0, np.nan], [5.0, np.nan]])  # rows 0 and 1 had a equal, rounded apart
    followed, split, skipped = _round_with_matches(codes, Y, np.zeros(2, dtype=bool))
    assert (followed, split, skipped) == (0, 1, False)
    codes[1, 0] = 2.0
    Y[2, 0] = 2.0
    assert _round_with_matches(codes, Y, np.zeros(2, dtype=bool)) == (1, 0, False)
    assert Y[2, 0] == 3.0 and np.isnan(Y[2, 1])


def test_fuzzy_microaggregation_after_another_step_knows_which_columns_are_released_as_integers():
    # after a first step, the input's integer column 'a' reaches fuzzy microaggregation as floats: the step
    # compared unrounded centres with the records (its self rule), so records were released with their own
    # values although its statement said a record is never replaced by a centre equal to itself
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.integers(0, 6, 80), "b": rng.integers(0, 6, 80)})
    steps = [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 2}, "columns": ["a"]},
             {"use": "fuzzy-microaggregation", "k": 3, "columns": ["a", "b"]}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": steps}, frame, seed=1)
    fuzzy = release.outcomes[1]
    assert fuzzy.result.diagnostics["integer_columns"] == ["a", "b"]
    given = np.column_stack([release.outcomes[0].result.data["a"].to_numpy(), frame["b"].to_numpy()])
    released = release.data[["a", "b"]].to_numpy(dtype=float)
    assert not np.any(np.all(released == given, axis=1))  # never a record's own values, as its statement says
    claim = [e for e in release.ledger if e.kind == "guarantee" and e.step == 1][0]
    assert "never replaced by a centre equal to itself" in claim.statement
    assert "the integer columns a, b compared with the centre rounded" in claim.statement


def test_the_context_names_the_steps_integer_columns():
    seen = []

    @attrs.frozen(kw_only=True)
    class Spy:
        name: ClassVar[str] = "spy"

        def mask(self, data, context):
            seen.append(context.integer_columns)
            return privclust.Masked(data=data + 0.5)

    class SpyPlugin:
        @privclust.hookimpl
        def privclust_register_maskers(register):
            register(Spy)

    registry = privclust.Registry(plugins=[SpyPlugin])
    frame = pd.DataFrame({"a": [1, 2, 3], "x": [0.5, 1.0, 2.0]})
    privclust.run({"steps": [{"use": "spy"}, {"use": "spy"}]}, frame, seed=0, registry=registry)
    assert seen == [("a",), ("a",)]  # the second step gets floats in 'a', which the host still rounds
    assert PrivacyContext().integer_columns is None


@pytest.mark.parametrize("rule", ["2*a == 1", "a + b == 1.5", "2*a == 2*b + 1"])
def test_a_rule_no_integer_record_satisfies_is_refused_before_any_step(rule):
    """trust17a: an equality over integer columns whose constant is not a
    multiple of the gcd of its whole coefficients passed `privclust check`,
    and the run released a file that violated it in every record. It is
    refused with the data, before any step runs (check --input, run)."""
    frame = pd.DataFrame({"a": [1, 4, 7, 10], "b": [2, 5, 8, 11], "c": [3, 6, 9, 12]})
    recipe = {"constraints": [{"use": "linear", "rules": [rule]}],
              "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 2}]}
    compiled = privclust.compile(recipe)  # without data, the columns' types are unknown
    with pytest.raises(privclust.DataError, match=r"constraints\[0\]: edit rule .*no integer record satisfies it"):
        privclust.runner.preflight(compiled, frame)
    with pytest.raises(privclust.DataError, match="no integer record satisfies it"):
        privclust.run(recipe, frame, seed=1)
    privclust.runner.preflight(compiled, frame.astype(float))  # float columns: the rule can hold


def test_a_claim_that_rules_hold_is_answered_when_the_released_file_breaks_them():
    """trust17a: the rounding of integer columns broke '3*a + 5*b == 7' on
    every record; microaggregation's claim "every released record satisfies
    them" stood in the ledger followed by "Verified by the host". The host
    now says beside the claim that the rule does not hold on the released
    file."""
    frame = pd.DataFrame({"a": [1, 4, 7, 10], "b": [2, 5, 8, 11], "c": [3, 6, 9, 12]})
    recipe = {"constraints": [{"use": "linear", "rules": ["3*a + 5*b == 7"]}],
              "steps": [{"use": "microaggregation", "columns": ["a", "b"], "k": 2}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run(recipe, frame, seed=1)
    values = release.data
    assert not np.all(3 * values["a"] + 5 * values["b"] == 7)  # the rule is broken on the released file
    claims = [e for e in release.ledger if e.kind == "guarantee" and e.component == "microaggregation"]
    assert claims and any("every released record satisfies them" in e.statement for e in claims)
    for e in claims:
        assert "'3*a + 5*b == 7' is violated by 4 of 4 released records" in e.statement
        assert "does not hold on the released file" in e.statement
    assert all(c.get("violated_rules") == ["3*a + 5*b == 7"] for c in release.verification["claims"])


def test_an_integer_rule_broken_by_one_near_1e12_is_seen_and_repaired():
    """Red-team audit: exact integers near 1e12 with a <= 2*b on every record; the group means held the rule and
    rounding each to the nearest integer broke it by 1 on every record, which a tolerance of 1e-11 times the size
    of the terms (about 20 there) passed: the ledger said the rule held and the rounding kept it. On whole numbers
    the tolerance is the error of evaluating the rule in double precision, and the repair rounds down or up."""
    Y, Z = 5 * 10**11, 15 * 10**11
    frame = pd.DataFrame({"a": np.array([2 * Y, 2 * Y, 2 * Y + 2, 2 * Z, 2 * Z, 2 * Z + 2], dtype=np.int64),
                          "b": np.array([Y, Y, Y + 1, Z, Z, Z + 1], dtype=np.int64)})
    release = privclust.run({"constraints": [{"use": "linear", "rules": ["a <= 2*b"]}],
                             "steps": [{"use": "microaggregation", "k": 3}]}, frame, seed=1)
    a, b = (release.data[c].to_numpy().astype(object) for c in ("a", "b"))
    assert all(x <= 2 * y for x, y in zip(a, b, strict=True))  # exactly, on Python integers
    entry = _rule_entry(release, "a <= 2*b")
    assert entry.details["violated_records"] == 0 and entry.details["broken_by_rounding"] == 0
    assert "double precision" in entry.statement
    # and the judge itself: a violation by 1 at 1e12 on whole numbers is a violation, on doubles within tolerance
    rules = ConstraintSet(("a", "b"), [LinearConstraints(rules=["a <= 2*b"]).bind(("a", "b"))])
    values = np.array([[2.0 * Y + 1, float(Y)]])
    assert judge(rules, values, integer=[True, True]).violated.all()
    assert not judge(rules, values).violated.any()


def test_a_dp_column_inside_an_edit_rule_is_not_rounded_or_adjusted():
    frame = _households()
    recipe = {"constraints": [{"use": "linear", "rules": ["b <= t", "a <= 5000"]}],
              "steps": [{"use": "laplace", "epsilon": 1.0, "columns": ["a"], "bounds": {"a": [0, 5000]}},
                        {"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}, "columns": ["b", "t"]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run(recipe, frame, seed=2)
    noisy = release.outcomes[0].result.data["a"]
    assert release.data["a"].dtype == np.float64 and release.data["a"].equals(noisy)
    assert release.data["b"].dtype == np.int64 and release.data["t"].dtype == np.int64
