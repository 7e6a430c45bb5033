"""The fuzz and adversarial suite: every input ends in a PrivclustError with
a message or in a correct release, never in another exception.

Hypothesis generates data frames (dtypes, NaN and infinities, values at the
float limit, integers past 2^53, constant columns, a single record, unicode
and repeated column names) and recipes (random components and parameter
values taken from the registry's parameter schema, `privclust plugins
--json`), and runs them through :func:`privclust.run` and the command line.
A correct release has the input's index and rows, finite values in every
protected column, and leaves the input unchanged.

Bounded in time for CI: modest ``max_examples`` (raise them with
``PRIVCLUST_FUZZ_EXAMPLES`` to hunt), small frames, small iteration counts.
Bugs found in files owned by other topics are pinned as
``xfail(strict=True)`` cases naming the topic, so they flip to passing (and
fail the suite until the marker is removed) when the fix lands.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import privclust
from privclust import PrivclustError
from privclust.cli import main

EXAMPLES = int(os.environ.get("PRIVCLUST_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=EXAMPLES or 40, deadline=None, derandomize=not EXAMPLES,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])

HUGE = [1e308, -1e308, 1.7976931348623157e308, 2.0**53 + 1, 2.0**63, -(2.0**63), 1e-320, 5e-324]


@pytest.fixture(scope="module")
def registry():
    return privclust.Registry(use_env=False).load()


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------

names = st.one_of(
    st.sampled_from(["a", "b", "total", "ü", "列", "x y", "0", "cluster", "a.1", "", " ", "\N{SNOWMAN}"]),
    st.text(min_size=1, max_size=6),
)


@st.composite
def columns(draw, n: int) -> pd.Series:
    kind = draw(st.sampled_from(["float", "int", "constant", "huge", "nan", "bool", "text", "bigint"]))
    if kind == "float":
        values = draw(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=n, max_size=n))
        return pd.Series(values, dtype=float)
    if kind == "int":
        return pd.Series(draw(st.lists(st.integers(-10**6, 10**6), min_size=n, max_size=n)), dtype="int64")
    if kind == "constant":
        value = draw(st.sampled_from([0.0, 1.0, -3.5, 2.0**53 + 1, 1e308, 9007199254740993]))
        return pd.Series([value] * n)
    if kind == "huge":
        return pd.Series(draw(st.lists(st.sampled_from(HUGE + [0.0, 1.0]), min_size=n, max_size=n)), dtype=float)
    if kind == "nan":
        return pd.Series(draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, 1.0, 2.0]), min_size=n,
                                       max_size=n)), dtype=float)
    if kind == "bool":
        return pd.Series(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if kind == "text":
        return pd.Series(draw(st.lists(st.text(max_size=3), min_size=n, max_size=n)), dtype=object)
    return pd.Series(draw(st.lists(st.integers(2**53, 2**63 - 1), min_size=n, max_size=n)), dtype="int64")


@st.composite
def frames(draw) -> pd.DataFrame:
    n = draw(st.sampled_from([1, 2, 3, 7, 12]))
    width = draw(st.integers(1, 4))
    cols = [draw(names) for _ in range(width)]
    data = {}
    frame = pd.DataFrame(index=pd.RangeIndex(n) if draw(st.booleans()) else pd.Index(range(100, 100 + n)))
    for i, _name in enumerate(cols):
        series = draw(columns(n))
        series.index = frame.index
        data[i] = series
    frame = pd.concat(data, axis=1) if data else frame
    frame.columns = cols  # may repeat a name: must be refused, never renamed
    return frame


def _bounds(frame_cols, value):
    return {c: value for c in frame_cols}


FIXED_RECIPES = {
    "laplace": lambda cols: [{"use": "laplace", "epsilon": 1.0, "bounds": _bounds(cols, [0, 10]), "columns": cols}],
    "laplace-float-limit": lambda cols: [{"use": "laplace", "epsilon": 1.0, "bounds": _bounds(cols, [-1e308, 1e308]),
                                          "columns": cols}],
    "geometric": lambda cols: [{"use": "geometric", "epsilon": 1.0, "bounds": _bounds(cols, [0, 100]),
                                "columns": cols}],
    "gaussian": lambda cols: [{"use": "gaussian", "epsilon": 0.5, "delta": 1e-6, "bounds": _bounds(cols, [0, 10]),
                               "columns": cols}],
    "mdav": lambda cols: [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 2}, "columns": cols}],
    "fuzzy": lambda cols: [{"use": "fuzzy-microaggregation", "k": 2, "columns": cols,
                            "clusterer": {"use": "fcm", "n_init": 1, "max_iter": 20}}],
    "dpc": lambda cols: [{"use": "dpc", "n_clusters": 2, "dc": 1.0, "columns": cols}],
}


def check_release(release, frame: pd.DataFrame, protected: list[str]) -> None:
    """A correct release: the input's index and records, the input's columns
    first, finite values in every protected column."""
    out = release.data
    assert out.index.equals(frame.index)
    assert list(out.columns[: frame.shape[1]]) == list(frame.columns)
    for c in protected:
        values = out[c].to_numpy(dtype=float)
        given = np.isnan(frame[c].to_numpy(dtype=float, na_value=np.nan))  # a missing value may stay missing
        assert np.isfinite(values[~given]).all(), f"column {c!r} released non-finite values: {values}"
        assert np.isnan(values[given]).all(), f"column {c!r} released a value where the original is missing"
    untouched = [c for c in frame.columns if c not in protected]
    if untouched:
        pd.testing.assert_frame_equal(out[untouched], frame[untouched])


def outcome(recipe, frame, registry, seed=1, *, record=True):
    """Run; return the release, or the PrivclustError (any other exception propagates)."""
    before = frame.copy(deep=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = privclust.run(recipe, frame, seed=seed, registry=registry)
    except PrivclustError as err:
        assert str(err).strip(), f"{type(err).__name__} without a message"
        result = err
    if record:  # hypothesis statistics; only inside a hypothesis test
        event("clean error" if isinstance(result, PrivclustError) else "release")
    pd.testing.assert_frame_equal(frame, before)  # the input is never mutated
    return result


# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------


@FUZZ
@given(frame=frames(), which=st.sampled_from(sorted(FIXED_RECIPES)))
def test_hostile_frames_end_in_a_clean_error_or_a_correct_release(registry, frame, which):
    cols = list(dict.fromkeys(map(str, frame.columns)))
    assume(not _known_bug(frame, which))
    recipe = {"steps": FIXED_RECIPES[which](cols)}
    result = outcome(recipe, frame, registry, record=False)
    if not isinstance(result, PrivclustError):
        check_release(result, frame, cols if which not in ("dpc",) else [])


def _known_bug(frame: pd.DataFrame, which: str) -> bool:
    """Inputs of the bugs pinned below as strict xfails (owned by other topics),
    kept out of the property test until their fixes land."""
    if which == "laplace-float-limit":  # noise: bounds at the float limit release inf (sampler / host finiteness)
        return True
    if which in ("mdav", "fuzzy", "dpc") and _near_float_limit(frame):  # means overflow to inf (verify, fuzzy)
        return True
    return False


def _near_float_limit(frame: pd.DataFrame) -> bool:
    numeric = frame.select_dtypes("number")
    with np.errstate(all="ignore"):
        values = numeric.to_numpy(dtype=float)
    return bool(np.any(np.abs(values[np.isfinite(values)]) > 1e300))


# ---------------------------------------------------------------------------
# Recipes from the parameter schema
# ---------------------------------------------------------------------------

#: Parameters that drive loops or allocations: fuzzed over small values only, to keep CI bounded.
COSTLY = {"max_iter": 30, "i_max": 20, "rounds": 5, "n_init": 2, "n_points": 256, "points_per_dim": 8,
          "memory_budget": 16.0, "max_neighbours": 16, "max_active_sets": 16}

hostile_numbers = st.one_of(
    st.sampled_from([0, 1, 2, 3, -1, 0.5, 1e-320, 1e308, -1e308, math.inf, -math.inf, math.nan, 2**63, 2**53 + 1,
                     10**30]),
    st.floats(-1e3, 1e3, allow_nan=False),
    st.integers(-5, 50),
)


def values_for(parameter: dict, cols: list[str]):
    name, default = parameter["name"], parameter["default"]
    if name in COSTLY:
        return st.one_of(st.integers(-2, COSTLY[name]), st.sampled_from([0.5, "auto", math.nan]))
    if parameter.get("component_kind"):
        return st.one_of(st.just(default), st.sampled_from(["laplace", "mdav", "fcm", "nope", 3]),
                         st.fixed_dictionaries({"use": st.sampled_from(["laplace", "geometric", "mdav"]),
                                                "epsilon": hostile_numbers}))
    if name == "bounds":
        pair = st.lists(hostile_numbers, min_size=0, max_size=3)
        return st.one_of(st.just("data"), st.dictionaries(st.sampled_from(cols + ["zz"]), pair, max_size=3),
                         pair, st.text(max_size=4))
    if name == "rules":
        return st.lists(st.sampled_from([f"{cols[0]} >= 0", f"{cols[0]} = 2*{cols[-1]}", "a +", "((a)", "zz <= 1",
                                         f"{cols[0]} <= -1e308", f"`{cols[0]}` >= 1e400"]), max_size=3)
    if isinstance(default, bool):
        return st.one_of(st.booleans(), hostile_numbers)
    if isinstance(default, str) and default != "required":
        return st.one_of(st.just(default), st.text(max_size=5), hostile_numbers)
    return st.one_of(hostile_numbers, st.booleans(), st.text(max_size=3),
                     st.lists(hostile_numbers, max_size=3), st.just({"x": 1}))


@st.composite
def schema_recipes(draw, infos, cols: list[str]):
    info = draw(st.sampled_from(infos))
    params = info["parameters"]
    chosen = draw(st.lists(st.sampled_from(params), unique_by=lambda p: p["name"], max_size=4)) if params else []
    step = {"use": info["name"], "columns": cols}
    for p in params:
        if p["name"] in COSTLY and p["default"] not in ("required", None):
            step[p["name"]] = min(p["default"], COSTLY[p["name"]]) if isinstance(p["default"], int | float) \
                else p["default"]
    for p in chosen:
        step[p["name"]] = draw(values_for(p, cols))
    if info["name"] in ("fuzzy-microaggregation",):  # its default clusterer restarts 10 times
        step.setdefault("clusterer", {"use": "fcm", "n_init": 1, "max_iter": 20})
    recipe: dict = {"steps": [step]}
    if draw(st.booleans()):
        recipe["privacy"] = {"epsilon": draw(hostile_numbers)}
    return recipe


SMALL = pd.DataFrame({"a": [1.0, 2.0, 2.5, 4.0, 8.0, 9.5, 3.0, 7.0, 6.0, 5.5, 0.5, 1.5],
                      "b": [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0]})


def _components(registry, kinds):
    return [info.to_dict(parameters=True) for info in registry.components() if info.kind in kinds
            and info.distribution == privclust.NAME]


@FUZZ
@given(data=st.data())
def test_random_recipes_from_the_parameter_schema_never_raise_anything_else(registry, data):
    infos = _components(registry, ("clusterers", "maskers", "noise_mechanisms"))
    recipe = data.draw(schema_recipes(infos, ["a", "b"]))
    assume(not _known_recipe_bug(recipe))
    result = outcome(recipe, SMALL, registry)
    if not isinstance(result, PrivclustError):
        kind = next(i["kind"] for i in infos if i["name"] == recipe["steps"][0]["use"])
        check_release(result, SMALL, ["a", "b"] if kind != "clusterers" else [])


def _known_recipe_bug(recipe: dict) -> bool:
    return False


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


@settings(max_examples=EXAMPLES or 15, deadline=None, derandomize=not EXAMPLES,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frame=frames(), which=st.sampled_from(["laplace", "mdav", "geometric"]))
def test_the_command_line_prints_one_line_or_writes_a_correct_file(tmp_path_factory, capsys, frame, which):
    folder = tmp_path_factory.mktemp("cli")
    frame.to_csv(folder / "in.csv", index=False)
    cols = list(dict.fromkeys(map(str, frame.columns)))
    assume(not _known_bug(frame, which))
    assume(not _near_float_limit(frame))  # the HTML report's plots fail there: pinned below
    (folder / "r.toml").write_text(privclust.Recipe.from_dict({"steps": FIXED_RECIPES[which](cols)}).to_toml(),
                                   encoding="utf-8")
    code = main(["run", str(folder / "r.toml"), "-i", str(folder / "in.csv"), "-o", str(folder / "out.csv"),
                 "--report", str(folder / "r.html"), "-q"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    names = {p.name for p in folder.iterdir()}
    assert not [n for n in names if n.endswith(".tmp")]
    if code == 0:
        out = pd.read_csv(folder / "out.csv")
        assert len(out) == len(frame) and {"r.html", "r.json"} <= names
    else:
        assert code == 1 and err.startswith("privclust: error: ") and err.count("\n") == 1, err
        assert names == {"in.csv", "r.toml"}


# ---------------------------------------------------------------------------
# Hostile inputs found by the fuzzer in other topics' files, fixed since
# ---------------------------------------------------------------------------

RNG = np.random.default_rng(0)
PLAIN = pd.DataFrame({"a": RNG.uniform(0, 10, 30), "b": RNG.uniform(0, 10, 30)})
AT_LIMIT = pd.DataFrame({"a": RNG.uniform(0, 1, 30) * 1e308, "b": RNG.uniform(0, 1, 30) * 1e308})

PINNED = [
    pytest.param({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [-1e308, 1e308], "b": [0, 1]}}]},
                 PLAIN, id="laplace-bounds-at-the-float-limit"),
    pytest.param({"steps": [{"use": "laplace", "epsilon": 1e-320, "bounds": {"a": [0, 10], "b": [0, 10]}}]},
                 PLAIN, id="laplace-epsilon-1e-320"),
    pytest.param({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]},
                 AT_LIMIT, id="mdav-on-data-at-1e308"),
    pytest.param({"steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": math.inf,
                             "bounds": {"a": [0, 10], "b": [0, 10]}}]},
                 PLAIN, id="idp-kmeans-epsilon-inf"),
    pytest.param({"steps": [{"use": "dpc", "n_clusters": 2, "dc": 1.0}]}, AT_LIMIT, id="dpc-on-data-at-1e308"),
    pytest.param({"steps": [{"use": "dp-dpcl", "n_clusters": 2, "dc": 1.0, "radius": 1.0, "epsilon": 1.0}]}, AT_LIMIT,
                 id="dp-dpcl-on-data-at-1e308"),
]


@pytest.mark.parametrize(("recipe", "frame"), PINNED)
def test_pinned_hostile_inputs_end_cleanly(registry, recipe, frame):
    result = outcome(recipe, frame, registry, record=False)
    if not isinstance(result, PrivclustError):
        check_release(result, frame, ["a", "b"] if recipe["steps"][0]["use"] in ("laplace", "microaggregation")
                      else [])


def test_an_html_report_of_data_spanning_the_float_range(tmp_path, capsys):
    frame = pd.DataFrame({"a": [0.0] * 10 + [1.281003e304, -1.797625e308]})
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\nbounds = { a = [0, 10] }\n')
    code = main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"),
                 "--report", str(tmp_path / "r.html"), "-q"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob("*.tmp"))


def test_histograms_near_the_float_limit_are_drawn_in_powers_of_ten():
    pytest.importorskip("matplotlib")
    from privclust.plots import before_after

    frame = pd.DataFrame({"a": [0.0] * 10 + [1.281003e304, -1.797625e308]})
    release = privclust.run({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 10]}}]}, frame,
                            seed=1)
    axes = before_after(release)
    ax = axes.ravel()[0]
    assert ax.get_xlabel() == "x 1e308"
    low, high = ax.get_xlim()
    assert -2.0 < low < high < 1.0


def test_a_release_recipe_pickles():
    """The recipe part of a Release pickles (its parameters are a picklable
    read-only mapping); the Release itself is the host verification topic's."""
    import pickle

    recipe = privclust.Recipe.from_dict({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}}]})
    assert pickle.loads(pickle.dumps(recipe)) == recipe
    with pytest.raises(TypeError):
        recipe.steps[0].params["epsilon"] = 2.0  # type: ignore[index]


# ---------------------------------------------------------------------------
# The parsers the host owns: recipe text, edit rules, sweeps, data files
# ---------------------------------------------------------------------------

TOML_PIECES = ["[[steps]]\n", 'use = "laplace"\n', "epsilon = 1e308\n", "bounds = {a = [0, inf]}\n", "[privacy]\n",
               "epsilon = nan\n", "delta = -0\n", "x = [[[[1]]]]\n", "[[constraints]]\n", 'rules = ["a >= (b"]\n',
               'use = "linear"\n', "columns = []\n", 'id = "ü"\n', "[", "{", '"', "\x00", "\ufeff", "\\u0000"]


@settings(max_examples=EXAMPLES or 60, deadline=None, derandomize=not EXAMPLES)
@given(pieces=st.lists(st.one_of(st.sampled_from(TOML_PIECES), st.text(max_size=8)), max_size=12))
def test_any_recipe_text_is_a_recipe_or_a_recipe_error(registry, pieces):
    try:
        recipe = privclust.Recipe.from_toml("\n".join(pieces) + "\n")
    except privclust.RecipeError as err:
        assert str(err)
        return
    try:
        privclust.compile(recipe, registry)
    except PrivclustError as err:
        assert str(err)


@settings(max_examples=EXAMPLES or 150, deadline=None, derandomize=not EXAMPLES)
@given(rule=st.one_of(st.text(alphabet="ab1.e+-*/()=<>`! ", max_size=80), st.text(max_size=30)))
def test_any_rule_text_parses_or_is_a_syntax_error(rule):
    from privclust_plugins._linear import ParsedRule, RuleSyntaxError, parse_rule

    try:
        parsed = parse_rule(rule)
    except RuleSyntaxError as err:
        assert "does not parse at column" in str(err)
        return
    assert isinstance(parsed, ParsedRule) and parsed.coefs
    assert all(math.isfinite(a) or math.isnan(a) for _, a in parsed.coefs)  # 0*inf cannot arise: numbers are finite


@settings(max_examples=EXAMPLES or 100, deadline=None, derandomize=not EXAMPLES)
@given(text=st.text(alphabet="ak.=,:0123456789e-+[]{}\"' infa", max_size=40))
def test_any_sweep_text_parses_or_is_a_clean_error(text):
    from privclust.compare import MAX_CONFIGURATIONS, parse_sweep

    try:
        key, values = parse_sweep(text)
    except PrivclustError as err:
        assert str(err)
        return
    assert "." in key and 0 < len(values) <= MAX_CONFIGURATIONS * max(1, text.count(",") + 1)


@settings(max_examples=EXAMPLES or 60, deadline=None, derandomize=not EXAMPLES,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=60),
                      st.lists(st.sampled_from(["a,b\n", "1,2\n", "a,a\n", ",\n", '"x\n', "\xff,1\n", "1e999,nan\n",
                                                "\n", "a\tb\n"]), max_size=6).map(lambda x: "".join(x).encode(
                                                    "utf-8", "surrogateescape"))),
       suffix=st.sampled_from([".csv", ".tsv", ".csv.gz", ".parquet"]))
def test_any_data_file_is_read_or_refused_cleanly(tmp_path_factory, body, suffix):
    from privclust._io import read_frame

    path = tmp_path_factory.mktemp("data") / f"in{suffix}"
    path.write_bytes(body)
    try:
        frame = read_frame(path)
    except PrivclustError as err:
        assert str(err)
        return
    assert frame.columns.is_unique


def test_the_number_of_edit_rules_is_limited(registry):
    from privclust_plugins.constraints import MAX_RULES

    recipe = {"constraints": [{"use": "linear", "rules": ["a >= 0"] * (MAX_RULES + 1)}],
              "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": {"a": [0, 1]}}]}
    with pytest.raises(PrivclustError, match="has 1,001 rules, more than the limit of 1,000"):
        privclust.compile(recipe, registry)


@pytest.mark.parametrize(
    "options",
    [
        ["--repeats", "0"],
        ["--repeats", "-3"],
        ["--processes", "0"],
        ["--sweep", "=1"],
        ["--sweep", "laplace.epsilon="],
        ["--sweep", "nope:laplace.epsilon=1,2"],
        ["--sweep", "laplace.epsilon=1:2:0"],
        ["--sweep", "laplace.epsilon=1:inf:1"],
        ["--sweep", "laplace.nope=1,2"],
        ["--sweep", "laplace.epsilon=-1,nan"],
        ["--sweep", "laplace.epsilon=1", "--sweep", "laplace.epsilon=2"],
        ["--plot", "m.png", "--risk", "nope", "--loss", "epsilon"],
        ["--summary", "s.txt"],
        ["--scheduler", "ucx://"],
        ["--timeout", "inf", "--scheduler", "tcp://127.0.0.1:9"],
    ],
)
def test_hostile_compare_options_print_one_line_and_write_nothing(tmp_path, capsys, options):
    PLAIN.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[[steps]]\nuse = "laplace"\nepsilon = 1.0\nbounds = { a = [0, 10], b = [0, 10] }'
                                     '\n')
    code = main(["compare", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"),
                 "--processes", "1", "-q", *[o.replace("m.png", str(tmp_path / "m.png"))
                                             .replace("s.txt", str(tmp_path / "s.txt")) for o in options]])
    err = capsys.readouterr().err
    # an error found after the runs comes after compare's warning that its table holds a DP run
    lines = [line for line in err.splitlines() if not line.startswith("privclust: warning (PrivclustWarning): 1 "
                                                                     "differentially private run(s)")]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("privclust: error: "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "r.toml"]


def test_a_k_anonymity_claim_is_checked_at_its_largest_k_and_on_the_steps_columns():
    from privclust.accounting import LedgerEntry
    from privclust.kanonymity import claim_columns as _claim_columns
    from privclust.kanonymity import claimed_k as _claimed_k

    def entry(statement, details):
        return LedgerEntry(seq=0, kind="guarantee", step=0, step_id="s", component="c", statement=statement,
                           claim=statement, details=details, mechanism="k-anonymity")

    # words say k = 10, details k = 1: checked at 10, not at the k every data set meets
    assert _claimed_k(entry("k-anonymity with k = 10 (verified)", {"k": 1})) == 10
    assert _claimed_k(entry("groups of at least k = 3", {"k": 50.0})) == 50  # a whole float counts
    assert _claimed_k(entry("k-anonymity", {})) is None
    frame = pd.DataFrame({"a": [1.0], "b": [2.0], "region": [1]})
    # a claim about a column the step did not release is checked on the step's own columns
    assert _claim_columns(entry("x", {"columns": ["region"]}), ("a", "b"), frame) == ("a", "b")
    assert _claim_columns(entry("x", {"columns": ["a"]}), ("a", "b"), frame) == ("a",)


def test_microaggregation_with_a_dp_clusterer_releases_group_means_without_dp():
    # the clusterer's noisy densities are DP; the released values are exact means of the raw records
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.uniform(0, 8, 60), "b": rng.uniform(0, 8, 60)})
    bounds = {"a": [0, 8], "b": [0, 8]}
    recipe = {"steps": [{"use": "microaggregation", "clusterer": {"use": "dp-dpc-grid", "epsilon": 1, "dc": 0.8,
                                                                    "bounds": bounds, "n_clusters": 3}}]}
    release = privclust.run(recipe, data, seed=1)
    assert release.ledger.of_kind("dp")  # the clusterer spent
    assert release.verdict.startswith("No differential-privacy guarantee: step 0 (microaggregation, "
                                      "microaggregation) released the values of a, b without differential privacy")
    assert not privclust.verify.guarantees_dp(release.ledger.entries, release.accountant, release.outcomes,
                                              release.verification)
    assert not release.verification["dp_release"]  # so the host counts the records released verbatim
