"""The key masker ``recode``: global recoding (maps, hierarchies, breaks,
top/bottom coding) and the lattice search for k (docs/key-maskers.md)."""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import require_dataset

import privclust
from privclust_plugins import _lattice
from privclust_plugins.recode import Recode

ROOT = Path(__file__).resolve().parent.parent
HIERARCHIES = ROOT / "docs" / "examples" / "survey-hierarchies"
SURVEY_KEYS = ["roof", "walls", "water", "electcon", "relat", "sex"]

#: ARX's table: value, level 1, level 2 (a tree).
JOBS = [["clerk", "office", "*"], ["judge", "office", "*"], ["farmer", "land", "*"], ["fisher", "land", "*"],
        ["nurse", "care", "*"]]


def _mask(frame: pd.DataFrame, **params):
    context = privclust.PrivacyContext(seed=0, budget=privclust.Budget(allow_leaks=["recode-levels"]))
    return Recode(**params).mask(frame, context), context


def _people(n: int = 60, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "job": rng.choice([r[0] for r in JOBS], n, p=[0.4, 0.05, 0.3, 0.1, 0.15]),
        "age": rng.integers(0, 90, n),
        "sex": rng.choice(["f", "m"], n),
        "region": rng.choice(["north", "south"], n),
    })


# ---------------------------------------------------------------------------------------------------------------
# the recodings
# ---------------------------------------------------------------------------------------------------------------

def test_category_map_keeps_missing_and_unnamed_values():
    frame = pd.DataFrame({"water": ["pipe", "well", None, "river", "tank"]})
    out, _ = _mask(frame, maps={"water": {"well": "other", "river": "other"}})
    assert list(out.data["water"]) == ["pipe", "other", None, "other", "tank"]
    # input not mutated (pandas 3 stores the missing text value as NaN, pandas 2 as None)
    assert [None if pd.isna(v) else v for v in frame["water"]] == ["pipe", "well", None, "river", "tank"]


def test_category_map_on_integer_codes_releases_text():
    frame = pd.DataFrame({"relat": [1, 2, 3, 4, 9]})
    out, _ = _mask(frame, maps={"relat": {4: "4-9", 9: "4-9"}})
    assert list(out.data["relat"]) == ["1", "2", "3", "4-9", "4-9"]


def test_hierarchy_table_inline_and_csv(tmp_path):
    frame = pd.DataFrame({"job": ["clerk", "farmer", "nurse", "judge", None]})
    out, context = _mask(frame, hierarchies={"job": JOBS}, levels={"job": 1})
    assert list(out.data["job"]) == ["office", "land", "care", "office", None]
    path = tmp_path / "job.csv"
    path.write_text("\n".join(";".join(r) for r in JOBS) + "\n")  # ARX writes ';'
    again, _ = _mask(frame, hierarchies={"job": str(path)}, levels={"job": 2})
    assert list(again.data["job"]) == ["*", "*", "*", "*", None]
    entry = next(e for e in context.ledger if e.kind == "guarantee")
    assert entry.mechanism == "global recoding" and entry.details["levels"] == {"job": 1}
    assert "k =" not in entry.statement  # no k-anonymity is claimed without k


def test_breaks_label_intervals_last_closed():
    frame = pd.DataFrame({"age": [0, 19.5, 20, 39, 40, np.nan]})
    out, _ = _mask(frame, breaks={"age": [0, 20, 40]})
    assert list(out.data["age"]) == ["[0, 20)", "[0, 20)", "[20, 40]", "[20, 40]", "[20, 40]", None]


def test_breaks_hierarchy_levels():
    frame = pd.DataFrame({"age": [5, 25, 45, 65]})
    levels = [[0, 20, 40, 60, 80], [0, 40, 80], "*"]
    got = [list(_mask(frame, breaks={"age": levels}, levels={"age": L})[0].data["age"]) for L in range(4)]
    assert got == [["5", "25", "45", "65"], ["[0, 20)", "[20, 40)", "[40, 60)", "[60, 80]"],
                   ["[0, 40)", "[0, 40)", "[40, 80]", "[40, 80]"], ["*"] * 4]


def test_top_and_bottom_coding_labels_and_thresholds():
    frame = pd.DataFrame({"income": [5.0, 50.0, 500.0, 5000.0, np.nan]})
    out, _ = _mask(frame, top={"income": 1000}, bottom={"income": 10})
    assert list(out.data["income"]) == ["< 10", "50", "500", ">= 1000", None]
    coded, _ = _mask(frame, top={"income": 1000}, bottom={"income": 10}, coding="threshold")
    assert coded.data["income"].tolist()[:4] == [10.0, 50.0, 500.0, 1000.0]
    assert np.isnan(coded.data["income"].iloc[4])


def test_loss_is_iyengars_lm():
    """Level 1 of JOBS: clerk/judge share 'office' (2 of 5 leaves: loss 1/4), farmer/fisher 'land' (1/4),
    nurse alone (0); one hierarchy key: the mean over the records."""
    frame = pd.DataFrame({"job": ["clerk", "farmer", "nurse", "judge"]})
    out, _ = _mask(frame, hierarchies={"job": JOBS}, levels={"job": 1})
    assert out.diagnostics["loss"] == pytest.approx((0.25 + 0.25 + 0 + 0.25) / 4)
    ages = pd.DataFrame({"age": [10, 60]})
    banded, _ = _mask(ages, breaks={"age": [[0, 50, 100], [0, 100]]}, levels={"age": 1})
    assert banded.diagnostics["loss"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------------------------
# the lattice search
# ---------------------------------------------------------------------------------------------------------------

def _brute_force(lattice: _lattice.Lattice, budget: int) -> float:
    losses = [lattice.evaluate(node).loss for node in itertools.product(*(range(s) for s in lattice.shape))
              if int(lattice.evaluate(node).below.sum()) <= budget]
    return min(losses)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k,share", [(2, 0.0), (3, 0.05), (4, 0.1)])
def test_search_finds_the_brute_force_optimum(seed, k, share):
    frame = _people(50, seed)
    out, _ = _mask(frame[["job", "age", "sex"]], hierarchies={"job": JOBS},
                   breaks={"age": [[0, 30, 60, 90], [0, 60, 90], "*"]}, maps={"sex": {"f": "f"}}, k=k,
                   max_suppressed=share)
    # the same lattice, every node evaluated
    from privclust_plugins.recode import _levels_of
    dims = []
    for c, h in (("job", tuple(tuple(r) for r in JOBS)), ("age", ((0, 30, 60, 90), (0, 60, 90), "*"))):
        table = _levels_of(c, frame[c], h)
        dims.append(_lattice.Dimension(list(range(len(table))), [t[1] for t in table], [t[2] for t in table],
                                       [t[3] for t in table]))
    sex, uniques = pd.factorize(frame["sex"])
    lattice = _lattice.Lattice(dims, sex[:, None].astype(np.int64), [len(uniques)], k)
    budget = int(np.floor(share * len(frame) + 1e-9))
    assert out.diagnostics["loss"] == pytest.approx(_brute_force(lattice, budget), abs=1e-12)
    assert out.diagnostics["evaluated"] < out.diagnostics["lattice_nodes"]  # pruned
    assert out.diagnostics["records_suppressed"] <= budget


def test_monotonicity_prunes_nodes_below_a_failing_node():
    """Keys whose levels only the top reaches: every node below a failing one is skipped unevaluated."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.choice(["x", "y", "z"], 200), "b": rng.choice(["u", "v", "w"], 200)})
    # level 1 renames each value (no loss): ties in the bound, the more general node is evaluated first, and when
    # it fails the node below it is not evaluated
    rename = {"a": [["x", "X", "*"], ["y", "Y", "*"], ["z", "Z", "*"]],
              "b": [["u", "U", "*"], ["v", "V", "*"], ["w", "W", "*"]]}
    out, _ = _mask(frame, hierarchies=rename, k=30, max_suppressed=0.0)
    d = out.diagnostics
    assert d["pruned_by_monotonicity"] > 0
    assert d["evaluated"] + d["pruned_by_monotonicity"] + d["skipped_by_bound"] == d["lattice_nodes"]


def test_suppressed_records_have_every_key_missing_and_the_rest_reach_k():
    frame = _people(80, 1)
    out, context = _mask(frame[["job", "age", "sex"]], hierarchies={"job": JOBS},
                         breaks={"age": [[0, 30, 60, 90], "*"]}, k=3, max_suppressed=0.1)
    released = out.data
    gone = released.isna().all(axis=1)
    assert int(gone.sum()) == out.diagnostics["records_suppressed"] <= 8
    sizes = released[~gone].astype(str).value_counts()
    assert sizes.min() >= 3
    claim = next(e for e in context.ledger if e.kind == "guarantee")
    assert claim.mechanism == "k-anonymity" and claim.details["k"] == 3
    leak = next(e for e in context.ledger if e.kind == "leak")
    assert leak.mechanism == "recode-levels" and leak.details["levels"] == out.diagnostics["levels"]


def test_levels_given_with_k_declare_no_leak():
    frame = _people(80, 1)[["job", "sex"]]
    recode = Recode(hierarchies={"job": JOBS}, levels={"job": 1}, k=3, max_suppressed=0.2)
    assert recode.data_leaks() == []
    assert [leak.name for leak in Recode(hierarchies={"job": JOBS}, k=3).data_leaks()] == ["recode-levels"]
    context = privclust.PrivacyContext(seed=0)  # no allow_leaks: a leak would be refused
    out = recode.mask(frame, context)
    assert out.diagnostics["levels"] == {"job": 1}


# ---------------------------------------------------------------------------------------------------------------
# through the host: per stratum, and verified
# ---------------------------------------------------------------------------------------------------------------

def test_per_stratum_levels_are_recorded_and_the_host_verifies_k():
    rng = np.random.default_rng(5)
    north = pd.DataFrame({"job": rng.choice(["clerk", "farmer"], 60), "region": "north"})
    south = pd.DataFrame({"job": rng.choice([r[0] for r in JOBS], 40), "region": "south"})
    frame = pd.concat([north, south], ignore_index=True)
    recipe = {"roles": {"keys": ["job"], "strata": "region"},
              "steps": [{"use": "recode", "hierarchies": {"job": JOBS}, "k": 10, "max_suppressed": 0.0,
                         "columns": ["job"]}]}
    with pytest.raises(privclust.RecipeError, match="recode-levels"):
        privclust.run(recipe, frame, seed=1)
    release = privclust.run({**recipe, "privacy": {"allow_leaks": ["recode-levels"]}}, frame, seed=1)
    parts = release.outcomes[0].result.diagnostics["parts"]
    assert parts["north"]["levels"] == {"job": 0} and parts["south"]["levels"] != {"job": 0}
    # each stratum's claim is checked on its stratum (tagged with it); the release states the step's claim once
    assert [(e.partition, e.status) for e in release.ledger.of_kind("guarantee") if e.component == "recode"] \
        == [(("region", "north"), "verified"), (("region", "south"), "verified")]
    assert [c["status"] for c in release.verification["claims"]] == ["verified"]
    assert release.verification["whole_file"]["holds"] is True
    texts = [e.statement for e in release.ledger if e.component == "recode" and e.kind == "guarantee"]
    assert texts and all("strata may differ" in t for t in texts)


def test_recode_then_local_suppression_verified_by_the_host():
    frame = _people(150, 2)
    recipe = {"roles": {"keys": ["job", "age", "sex"]},
              "steps": [{"use": "recode", "hierarchies": {"job": JOBS}, "levels": {"job": 1},
                         "breaks": {"age": [0, 30, 60, 90]}, "columns": ["job", "age", "sex"]},
                        {"use": "local-suppression", "k": 3, "columns": ["job", "age", "sex"]}]}
    release = privclust.run(recipe, frame, seed=1)
    assert set(release.data["job"].dropna()) <= {"office", "land", "care"}
    assert set(release.data["age"].dropna()) <= {"[0, 30)", "[30, 60)", "[60, 90]"}
    claims = release.verification["claims"]
    assert [(c["component"], c["status"]) for c in claims] == [("recode", "claimed"), ("local-suppression",
                                                                                       "verified")]
    assert release.verification["whole_file"]["holds"] is True
    assert frame["age"].dtype.kind == "i"  # the input is untouched


# ---------------------------------------------------------------------------------------------------------------
# bad input: a PrivclustError naming the key, the value or the row, and the fix
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,match", [
    ({"hierarchies": {"job": [["clerk", "office"], ["clerk", "land"]]}, "levels": {"job": 1}},
     r"'job'.*not a tree: the value 'clerk' maps to two parents at level 1.*row 1.*row 2"),
    ({"hierarchies": {"job": [["clerk", "office", "a"], ["judge", "office", "b"]]}, "levels": {"job": 1}},
     r"'job'.*not a tree: level 2 splits the group 'office' of level 1"),
    ({"hierarchies": {"job": [["clerk", "office"], ["judge"]]}, "levels": {"job": 1}}, r"'job'.*row 2.*cells"),
    ({"hierarchies": {"job": "no/such/file.csv"}, "levels": {"job": 1}}, r"'job'.*cannot read the hierarchy file"),
    ({"breaks": {"age": [0, 40, 20]}}, r"'age'.*not increasing: 20 follows 40"),
    ({"breaks": {"age": [[0, 20, 40], [0, 30, 40]]}, "levels": {"age": 1}}, r"'age'.*not a tree: 30 splits"),
    ({"top": {"age": 10}, "bottom": {"age": 20}}, r"'age'.*top code 10 is not above the bottom code 20"),
    ({"maps": {"job": {"a": "b"}}, "hierarchies": {"job": JOBS}, "levels": {"job": 1}}, r"'job'.*both maps"),
    ({"hierarchies": {"job": JOBS}}, r"'job'.*has no level.*levels = \{key = level\}, or k"),
    ({"hierarchies": {"job": JOBS}, "levels": {"job": 3}}, r"'job' has levels 0 to 2"),
    ({"levels": {"job": 1}, "maps": {"sex": {"f": "x"}}}, r"levels names 'job', which has no hierarchy"),
    ({}, r"nothing to recode"),
])
def test_bad_parameters_refused_when_compiled(params, match):
    with pytest.raises(privclust.ParameterError, match=match):
        Recode(**params)
    recipe = {"roles": {"keys": ["job"]}, "steps": [{"use": "recode", **params, "columns": ["job"]}]}
    with pytest.raises(privclust.PrivclustError) as err:  # privclust check and run refuse it before any step
        privclust.compile(recipe)
    assert re.search(match, " ".join(str(err.value).split()))


@pytest.mark.parametrize("frame,params,error,match", [
    (pd.DataFrame({"job": ["clerk", "pilot", "pilot"]}), {"hierarchies": {"job": JOBS}, "levels": {"job": 1}},
     privclust.DataError,
     r"key 'job' holds the value 'pilot' \(row 1, and 1 other record\(s\)\).*add a row for 'pilot'"),
    (pd.DataFrame({"age": [5.0, 120.0]}), {"breaks": {"age": [0, 50, 100]}},
     privclust.DataError, r"key 'age' holds the value 120 \(row 1\) outside its breaks \[0, 100\]; extend the breaks"),
    (pd.DataFrame({"job": ["clerk"]}), {"hierarchies": {"sex": JOBS}, "levels": {"sex": 1}},
     privclust.ParameterError, r"'sex' is recoded but not among the step's columns \(job\)"),
    (pd.DataFrame({"income": [1.5, 2.25]}), {"maps": {"income": {"1.5": "low"}}},
     privclust.DataError, r"column 'income' is numeric with values that are not whole numbers.*category map.*breaks"),
    (pd.DataFrame({"income": [1.5, 2.25], "job": ["clerk", "nurse"]}), {"maps": {"job": {"nurse": "care"}}},
     privclust.DataError, r"column 'income' is numeric.*a key the step leaves as it is.*give it interval breaks"),
    (pd.DataFrame({"income": [1.5, 2.25]}), {"hierarchies": {"income": [["1.5", "*"]]}, "levels": {"income": 1}},
     privclust.DataError, r"column 'income' is numeric.*hierarchy table"),
    (pd.DataFrame({"job": ["clerk", "nurse"]}), {"breaks": {"job": [0, 1]}},
     privclust.DataError, r"column 'job' has dtype (object|str); interval breaks treats numeric keys"),
    (pd.DataFrame({"age": [1, 2]}), {"top": {"age": 1.5}, "coding": "threshold"},
     privclust.ParameterError, r"key 'age' holds whole numbers.*threshold 1.5"),
    (pd.DataFrame({"job": ["clerk", "nurse", "judge"]}), {"hierarchies": {"job": JOBS}, "k": 4},
     privclust.DataError, r"k = 4 cannot be reached: the data \(or this stratum\) have 3 records"),
    (pd.DataFrame({"job": ["clerk"] * 5 + ["nurse"]}), {"maps": {"job": {"judge": "office"}}, "k": 2,
                                                         "max_suppressed": 0.0},
     privclust.DataError, r"k = 2 cannot be reached with at most 0 suppressed records.*raise max_suppressed"),
])
def test_bad_data_refused_before_anything_is_released(frame, params, error, match):
    before = frame.copy()
    with pytest.raises(error, match=match):
        _mask(frame, **params)
    pd.testing.assert_frame_equal(frame, before)


def test_bad_hierarchy_in_a_run_writes_nothing(tmp_path):
    frame = pd.DataFrame({"job": ["clerk", "pilot"] * 3, "income": np.arange(6.0)})
    out = tmp_path / "out.csv"
    data = tmp_path / "in.csv"
    frame.to_csv(data, index=False)
    recipe = tmp_path / "r.toml"
    recipe.write_text('[roles]\nkeys = ["job"]\n[[steps]]\nuse = "recode"\ncolumns = ["job"]\n'
                      '[steps.levels]\njob = 1\n[steps.hierarchies]\njob = [["clerk", "office"], ["nurse", "care"]]\n')
    from privclust.cli import main
    code = main(["run", str(recipe), "--input", str(data), "--output", str(out)])
    assert code != 0 and not out.exists()


# ---------------------------------------------------------------------------------------------------------------
# the survey file (docs/key-maskers.md quotes these figures)
# ---------------------------------------------------------------------------------------------------------------

def test_survey_file_recipe_runs_and_the_host_verifies_the_keys():
    path = require_dataset("sdc_testdata.csv")
    survey = pd.read_csv(path)
    recipe = privclust.Recipe.from_toml(ROOT / "docs" / "examples" / "survey-publish.toml")  # paths: its folder's
    start = time.perf_counter()
    release = privclust.run(recipe, survey, seed=1)
    elapsed = time.perf_counter() - start
    parts = release.outcomes[0].result.diagnostics["parts"]
    for stratum, d in parts.items():
        print(stratum, d["levels"], d["records_suppressed"], f"loss {d['loss']:.4f}", f"{d['seconds']:.3f} s",
              f"{d['evaluated']} of {d['lattice_nodes']} nodes")
    print(f"whole run {elapsed:.2f} s")
    recode_claims = [c for c in release.verification["claims"] if c["component"] == "recode"]
    assert [c["status"] for c in recode_claims] == ["verified"]  # the step's claim over every stratum
    assert [e.status for e in release.ledger.of_kind("guarantee") if e.component == "recode"] == ["verified"] * 2
    assert sum(d["records_suppressed"] for d in parts.values()) <= 0.05 * len(survey) + 2


def test_recode_passes_the_conformance_kit():
    import warnings

    import privclust.testing

    frame = _people(60)[["job", "age", "sex"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        privclust.testing.check_component(Recode(hierarchies={"job": JOBS}, levels={"job": 1},
                                                 breaks={"age": [0, 45, 90]}), frame)
        privclust.testing.check_component(Recode(hierarchies={"job": JOBS}, breaks={"age": [[0, 45, 90], "*"]},
                                                 levels={"job": 1, "age": 1}, k=3, max_suppressed=0.5), frame)


def test_recode_recipe_runs_with_evaluators_and_a_report(tmp_path):
    """An integer-coded key released as labels is not rounded by the host (a ValueError before)."""
    frame = _people()
    frame["relat"] = np.tile([1, 2, 3, 4, 9], len(frame) // 5)
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text(
        '[roles]\nkeys = ["sex", "job", "relat"]\n[[steps]]\nuse = "recode"\ncolumns = ["sex", "job", "relat"]\n'
        '[steps.maps.relat]\n4 = "4-9"\n9 = "4-9"\n[steps.maps.job]\njudge = "clerk"\n'
        '[[steps]]\nuse = "local-suppression"\ncolumns = ["sex", "job", "relat"]\n'
        '[[evaluate]]\nuse = "key-frequencies"\n')
    from privclust.cli import main

    code = main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv"),
                 "--report", str(tmp_path / "out.html"), "--seed", "1", "--quiet"])
    assert code == 0 and (tmp_path / "out.html").exists()
    out = pd.read_csv(tmp_path / "out.csv", dtype={"relat": str})
    assert set(out["relat"].dropna()) <= {"1", "2", "3", "4-9"}


def test_check_does_not_promise_integers_for_keys_released_as_labels(tmp_path, capsys):
    frame = _people()
    frame["relat"] = np.tile([1, 2, 3, 4, 9], len(frame) // 5)
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[roles]\nkeys = ["relat"]\n[[steps]]\nuse = "recode"\ncolumns = ["relat"]\n'
                                     '[steps.maps.relat]\n4 = "4-9"\n9 = "4-9"\n')
    from privclust.cli import main

    assert main(["check", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv")]) == 0
    line = next(t for t in capsys.readouterr().out.splitlines() if "integer columns, rounded" in t)
    assert "except a key a key masker releases as text" in line


def test_values_recode_leaves_alone_count_as_released_verbatim():
    """Red-team audit: recode releases what it leaves alone as text ("1" for 1, "2500.5" for 2500.5), and the host
    compared that text with the numbers: a recode that matched nothing wrote a byte-identical file that the report
    called changed, with 0 of 6 records verbatim and no "protects nothing" warning; top-and-bottom coding that left
    3 incomes exact reported 0 verbatim. The host now reads a number spelled as text as that number."""
    codes = pd.DataFrame({"roof": [1, 2, 3, 1, 2, 4], "sex": list("fmfmfm")})
    recipe = {"roles": {"keys": ["roof", "sex"]},
              "steps": [{"use": "recode", "columns": ["roof"], "maps": {"roof": {"9": "8"}}}]}
    with pytest.warns(privclust.NothingProtectedWarning):
        release = privclust.run(recipe, codes, seed=1)
    assert release.verification["changed_columns"] == [] and release.verification["verbatim_records"] == 6
    income = pd.DataFrame({"income": [800.0, 2500.5, 4100.25, 12000.0, 95000.0, 3300.75], "sex": list("fmfmfm")})
    recipe = {"roles": {"keys": ["income", "sex"]},
              "steps": [{"use": "recode", "columns": ["income"], "top": {"income": 10000}, "bottom": {"income": 1000}}]}
    release = privclust.run(recipe, income, seed=1)
    assert release.verification["changed_columns"] == ["income"]
    assert "released 3 of 6 records verbatim" in " ".join(e.statement for e in release.ledger)
    # a label that spells no number stays a change; text that spells another number is another value
    from privclust.comparison import values_equal
    assert values_equal(pd.Series([1, 2, 3, 4]), pd.Series(["1", "2.0", "< 3", "5"], dtype=object)).tolist() == \
        [True, True, False, False]
