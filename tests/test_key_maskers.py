"""Key maskers (issue 25): a step may name [roles] keys when its component
declares ``key_masker``; ``local-suppression`` (greedy and exact) and
``pram``; the host verifies local suppression's k-anonymity claim."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _docblocks import run_page

import privclust
from privclust import DataError, ParameterError, RecipeError
from privclust_plugins import _suppress
from privclust_plugins.keys import PRAM, LocalSuppression, _invariant

SURVEY = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "sdc_testdata.csv"
SURVEY_KEYS = ["roof", "walls", "water", "electcon", "relat", "sex"]


def _people(n: int = 120, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "region": rng.choice(["north", "south"], n),
        "sex": rng.choice(["f", "m"], n),
        "age": rng.choice(["0-17", "18-39", "40-64", "65+"], n, p=[0.2, 0.4, 0.3, 0.1]),
        "job": rng.choice(["a", "b", "c", "d", "e", "f"], n, p=[0.4, 0.3, 0.15, 0.1, 0.04, 0.01]),
        "income": rng.gamma(2.0, 1000.0, n),
    })


def _matches(frame: pd.DataFrame, keys: list[str], strata: list[str] = ()) -> np.ndarray:
    """Brute force: per record, the records of its stratum agreeing on every key both observe."""
    values = frame[keys].astype(object).where(frame[keys].notna(), None).to_numpy()
    part = frame[list(strata)].astype(str).agg("|".join, axis=1).to_numpy() if strata else np.zeros(len(frame))
    out = np.zeros(len(frame), dtype=int)
    for i in range(len(frame)):
        ok = part == part[i]
        for j, _ in enumerate(keys):
            col = values[:, j]
            ok &= np.array([v is None or values[i, j] is None or v == values[i, j] for v in col])
        out[i] = ok.sum()
    return out


def _run(recipe, frame, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, **kw)


KEYS = ["sex", "age", "job"]


def test_only_key_maskers_may_name_keys():
    frame = _people()
    with pytest.raises(RecipeError, match="names the categorical key 'sex'; a numeric step cannot protect"):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "mdav", "columns": ["sex", "income"]}]}, frame)
    with pytest.raises(RecipeError, match="treats categorical keys and needs its columns named"):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression"}]}, frame)
    # a numeric step still refuses a text column that has no role
    with pytest.raises(DataError, match="column 'region' is not numeric"):
        _run({"steps": [{"use": "mdav", "columns": ["region", "income"]}]}, frame)
    assert privclust.capability(LocalSuppression(), "key_masker") is True
    assert privclust.capability(privclust.get_registry().create("clusterers", privclust.ComponentSpec("mdav")),
                                "key_masker") is False


def test_local_suppression_is_verified_by_the_host_per_stratum():
    frame = _people()
    before = frame.copy()
    release = _run({"roles": {"keys": KEYS, "strata": "region"},
                    "steps": [{"use": "local-suppression", "k": 3, "columns": KEYS}]}, frame, seed=0)
    pd.testing.assert_frame_equal(frame, before)  # input never mutated
    out = release.data
    assert (_matches(out, KEYS, ["region"]) >= 3).all()
    assert (_matches(frame, KEYS, ["region"]) < 3).any()  # there was something to do
    # suppressions only: every released key value is the original or missing
    assert ((out[KEYS] == frame[KEYS]) | out[KEYS].isna()).all().all()
    claims = release.verification["claims"]
    assert claims and all(c["status"] == "verified" and c["min_matching_records"] >= 3 for c in claims)
    whole = release.verification["whole_file"]
    assert whole["holds"] and whole["min_matching_records"] >= 3 and "region" in whole["columns"]
    suppressed = int(out[KEYS].isna().to_numpy().sum())
    assert release.verification["values_set_missing"] == suppressed > 0
    assert f"{suppressed} values were set missing by the steps (suppressed)" in release.verdict
    assert "released missing as in the original" not in release.verdict
    assert "Verified by the host: k-anonymity with k = 3" in release.verdict


def test_the_host_refutes_a_suppression_that_falls_short():
    class Short(LocalSuppression):
        name = "short-suppression"

        def mask(self, data, context):  # claims k but suppresses nothing
            context.record("every record matches k records", guarantee="k-anonymity",
                           details={"k": self.k, "columns": list(data.columns)})
            return privclust.Masked(data=data.assign(**{data.columns[0]: data.iloc[:, 0].where(
                np.arange(len(data)) > 0)}))

    class Plugin:
        @privclust.hookimpl
        def privclust_register_maskers(self, register):
            register(Short)

    registry = privclust.Registry(plugins=[Plugin()], use_env=False)
    release = _run({"roles": {"keys": KEYS}, "steps": [{"use": "short-suppression", "k": 3, "columns": KEYS}]},
                   _people(), seed=0, registry=registry)  # noqa: E501
    assert release.verification["claims"][0]["status"] == "refuted"


def test_missing_keys_match_any_value_and_stay_missing():
    frame = _people()
    frame.loc[[3, 7], "job"] = None
    release = _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression", "k": 2, "columns": KEYS}]},
                   frame, seed=0)
    assert release.data.loc[[3, 7], "job"].isna().all()
    assert (_matches(release.data, KEYS) >= 2).all()
    entry = next(e for e in release.ledger if e.mechanism == "missing values")
    assert "matches any value" in entry.statement and "suppressions" in entry.statement


def test_importance_keeps_the_important_key():
    # a unique record that differs from a cell of 3 on job and from another of 3 on age
    frame = pd.DataFrame({"age": ["a"] * 3 + ["b"] * 3 + ["b"], "job": ["x"] * 3 + ["y"] * 3 + ["x"]})
    ctx = privclust.PrivacyContext(seed=0)
    keep_job = LocalSuppression(k=3, importance=("job", "age")).mask(frame, ctx).data
    keep_age = LocalSuppression(k=3, importance=("age", "job")).mask(frame, ctx).data
    assert keep_job["job"].notna().all() and keep_job["age"].isna().sum() == 1
    assert keep_age["age"].notna().all() and keep_age["job"].isna().sum() == 1
    with pytest.raises(ParameterError, match="'importance' must name each of the step's key columns"):
        LocalSuppression(k=3, importance=("jobs",)).mask(frame, ctx)


def _outliers(seed: int, n_cells: int = 6, size: int = 6, n_out: int = 8, d: int = 4) -> np.ndarray:
    """Cells of ``size`` records and ``n_out`` records that differ from one cell on one or two keys."""
    rng = np.random.default_rng(seed)
    cells = rng.integers(0, 4, size=(n_cells, d))
    rows = [cells[i] for i in range(n_cells) for _ in range(size)]
    for _ in range(n_out):
        row = cells[rng.integers(n_cells)].copy()
        for c in rng.choice(d, size=rng.integers(1, 3), replace=False):
            row[c] = (row[c] + 1 + rng.integers(3)) % 4
        rows.append(row)
    return np.asarray(rows, dtype=np.int64)


#: The exact solver's proven optima on the outlier files (HiGHS): under sdcMicro's convention alone, and with no
#: record left with every key missing (``min_kept = 1``). Solved again by the next test for files 0 and 1; the
#: others take 2 to 8 s of CPU each and are not solved on every run.
OUTLIER_OPTIMA = {0: (8, 8), 1: (7, 7), 2: (8, 9), 3: (8, 10), 4: (8, 8), 5: (6, 8)}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_stated_outlier_optima_are_the_solvers(seed):
    codes = _outliers(seed)
    radix = np.full(codes.shape[1], 5)
    exact, optimal = _suppress.exact(codes, 3, np.ones(codes.shape[1]), radix)
    kept, kept_optimal = _suppress.exact(codes, 3, np.ones(codes.shape[1]), radix, min_kept=1)
    assert optimal and kept_optimal
    for out in (exact, kept):
        assert (_suppress.match_counts(out, out, radix) >= 3).all()
        assert (out[out >= 0] == codes[out >= 0]).all()
    assert not (kept < 0).all(axis=1).any()
    assert (int((exact < 0).sum()), int((kept < 0).sum())) == OUTLIER_OPTIMA[seed]


@pytest.mark.parametrize("seed", range(6))
def test_heuristic_against_the_exact_optimum(seed):
    """The exact solver's count is a lower bound of the heuristic's. On
    these files the optimum under sdcMicro's convention alone uses records
    with every key suppressed, which match every record; the heuristic does
    not seek them. Against the optimum that leaves no record with every key
    missing (``min_kept = 1``) it meets the issue's target, within 10%: it
    reaches it on all six (8, 7, 9, 10, 8, 8; before the forced starts 9 on
    seed 5, before the moves of several keys within 25%, and before the
    local search up to 2x the optimum; docs/key-maskers.md)."""
    codes = _outliers(seed)
    radix = np.full(codes.shape[1], 5)
    greedy = _suppress.greedy(codes, 3, list(range(codes.shape[1])), radix)
    assert (_suppress.match_counts(greedy, greedy, radix) >= 3).all()
    assert not (greedy < 0).all(axis=1).any() and (greedy[greedy >= 0] == codes[greedy >= 0]).all()
    n_exact, n_kept = OUTLIER_OPTIMA[seed]
    n_greedy = int((greedy < 0).sum())
    assert n_exact <= n_kept <= n_greedy <= 1.10 * n_kept and n_greedy <= 1.7 * n_exact
    print(f"seed {seed}: heuristic {n_greedy}, exact {n_exact}, exact with no record blank {n_kept}")


def test_forced_starts_find_the_record_that_serves_two_groups(monkeypatch):
    """Outlier file 5: the optimum with no blank record (8) keeps one key of an outlier, which then matches two
    groups of two; the greedy's scores never rank that move first (9 without the forced starts). A forced first
    move reaches it, and the result stays k-anonymous with no record blank and only suppressions."""
    codes, radix, order = _outliers(5), np.full(4, 5), [0, 1, 2, 3]
    monkeypatch.setattr(_suppress, "FORCED_STARTS", 0)
    without = _suppress.greedy(codes, 3, order, radix)
    monkeypatch.undo()
    out = _suppress.greedy(codes, 3, order, radix)
    assert _suppress._count(codes, without) == 9 and _suppress._count(codes, out) == 8
    assert (_suppress.match_counts(out, out, radix) >= 3).all() and not (out < 0).all(axis=1).any()
    assert (out[out >= 0] == codes[out >= 0]).all()
    assert (_suppress.forced_starts(out, out, 3, order, radix) == out).all()


#: sdcMicro's survey file (sdc_testdata.csv): the count of each category of roof, walls, water, electcon, relat, sex.
SURVEY_COUNTS = [[814, 3697, 19, 34, 16], [1203, 3327, 50], [600, 66, 1478, 1755, 584, 26, 36, 35],
                 [2979, 107, 1494], [1000, 805, 2576, 15, 63, 36, 75, 1, 9], [2296, 2284]]

#: For the files of :func:`_survey_like` on which ``exact(min_kept=1)`` proved its optimum (HiGHS, 90 s each, not
#: rerun here: it takes 14 to 86 s a file), that optimum.
PROVEN_OPTIMA = {0: 8, 1: 13, 2: 8, 4: 8, 6: 7, 8: 8, 10: 8, 12: 8}

#: For the files on which the solver stopped after 90 s without a proof, its best solution's count (an upper bound).
BEST_FOUND = {3: 14, 5: 17, 7: 14, 9: 16, 11: 17, 13: 14, 14: 8, 15: 13, 16: 10, 17: 16, 18: 9, 19: 13, 20: 10,
              21: 15, 30: 10, 32: 9, 34: 12}


def _survey_like(seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A small file with the survey's 6 keys, categories and frequencies: 20 + seed // 2 records, k = 2 or 3."""
    rng = np.random.default_rng(seed)
    n, k = 20 + seed // 2, 2 + seed % 2
    codes = np.stack([rng.choice(len(c), n, p=np.asarray(c) / sum(c)) for c in SURVEY_COUNTS], axis=1)
    return codes.astype(np.int64), np.asarray([len(c) + 1 for c in SURVEY_COUNTS]), k


def test_heuristic_within_ten_percent_of_the_optimum_without_blank_records():
    """The issue's target, on the files with the survey's categories where the exact solver proves its optimum:
    the heuristic's suppressions at most 1.10 times the optimum of the problem it solves, k-anonymity under
    sdcMicro's convention with no record left with every key missing (``min_kept = 1``; a blank record matches
    every record, so k - 1 of them make any file k-anonymous by deletion, which the heuristic never does)."""
    ratios = []
    for seed, optimum in PROVEN_OPTIMA.items():
        codes, radix, k = _survey_like(seed)
        out = _suppress.greedy(codes, k, list(range(codes.shape[1])), radix)
        assert (_suppress.match_counts(out, out, radix) >= k).all()
        assert not (out < 0).all(axis=1).any()
        assert (out[out >= 0] == codes[out >= 0]).all()
        ratios.append(int((out < 0).sum()) / optimum)
    assert len(ratios) >= 8 and max(ratios) <= 1.10, ratios


@pytest.mark.slow
def test_heuristic_against_the_solvers_best_where_it_proves_no_optimum():
    """Where HiGHS proves no optimum in 90 s (most files with k = 3), the heuristic against the solver's best
    solution without blank records: 0.83 to 1.10 times it (1.14 on seed 13 before the forced starts: 16 against 14,
    now 14); a guard against regressions, not the issue's target (the optimum is unknown there)."""
    ratios = {}
    for seed, found in BEST_FOUND.items():
        codes, radix, k = _survey_like(seed)
        out = _suppress.greedy(codes, k, list(range(codes.shape[1])), radix)
        assert (_suppress.match_counts(out, out, radix) >= k).all() and not (out < 0).all(axis=1).any()
        ratios[seed] = int((out < 0).sum()) / found
    assert max(ratios.values()) <= 1.10, ratios


def test_the_ledger_counts_the_records_left_with_one_key():
    """The heuristic's moves of several keys leave records with one key observed, which match every record sharing
    it: the step's ledger entry counts them beside the records with every key missing."""
    codes, _, k = _survey_like(1)
    frame = pd.DataFrame(codes, columns=SURVEY_KEYS).astype(str)
    release = _run({"roles": {"keys": SURVEY_KEYS},
                    "steps": [{"use": "local-suppression", "k": k, "columns": SURVEY_KEYS}]}, frame, seed=0)
    entry = next(e for e in release.ledger if e.component == "local-suppression" and "suppressions" in e.details)
    one_left = int((release.data[SURVEY_KEYS].notna().sum(axis=1) == 1).sum())
    assert entry.details["records_with_one_key_left"] == one_left > 0
    assert entry.details["records_with_every_key_missing"] == 0


@pytest.mark.slow
def test_the_convention_bounds_the_optimum_by_k_minus_one_blank_records():
    """Why the exact optimum is not a fair target for the heuristic (docs/key-maskers.md): under sdcMicro's
    convention k - 1 records with every key missing make any file k-anonymous, so the optimum needs at most
    (k - 1) x keys suppressions; the heuristic leaves no record with every key missing on these files."""
    rng = np.random.default_rng(11)
    for k in (2, 3, 5):
        codes = np.stack([rng.choice(s, 80, p=np.arange(s, 0, -1) / np.arange(s, 0, -1).sum())
                          for s in (5, 3, 8, 3, 9, 2)], axis=1).astype(np.int64)
        radix = np.asarray([6, 4, 9, 4, 10, 3])
        unsafe = np.flatnonzero(_suppress.match_counts(codes, codes, radix) < k)
        blanked = codes.copy()
        blanked[unsafe[:k - 1]] = -1
        assert (_suppress.match_counts(blanked, blanked, radix) >= k).all()
        heuristic = _suppress.greedy(codes, k, list(range(6)), radix)
        assert (_suppress.match_counts(heuristic, heuristic, radix) >= k).all()
        assert not (heuristic < 0).all(axis=1).any()
        assert int((heuristic < 0).sum()) > (k - 1) * 6  # the heuristic is far above that bound


def _codes_and_brute_counts(seed: int, n: int, missing: float) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Random codes (4 keys of 3 categories, some missing), their radix and brute-force match counts."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, size=(n, 4))
    codes[rng.random(codes.shape) < missing] = -1
    return codes, np.full(4, 4), [int(np.all((codes == row) | (codes < 0) | (row < 0), axis=1).sum()) for row in codes]


def test_match_counts_on_small_strata_agree_with_the_grouped_counts(monkeypatch):
    """Small strata compare every pair of rows at once (DIRECT_BELOW); larger ones group the rows by their
    pattern of missing keys. Both give the same counts, weighted or not, with keys missing on either side."""
    rng = np.random.default_rng(3)
    cases = []
    for trial in range(60):
        n, m, d = int(rng.integers(1, 40)), int(rng.integers(1, 40)), int(rng.integers(1, 7))
        radix = rng.integers(2, 6, d)
        queries, data = rng.integers(0, radix - 1, (n, d)), rng.integers(0, radix - 1, (m, d))
        queries[rng.random(queries.shape) < 0.2] = -1
        data[rng.random(data.shape) < 0.2] = -1
        cases.append((queries, data, radix, None if trial % 2 else rng.integers(1, 5, m)))
    direct = [_suppress.match_counts(*case) for case in cases]
    monkeypatch.setattr(_suppress, "DIRECT_BELOW", 0)
    for case, counts in zip(cases, direct, strict=True):
        assert counts.dtype == np.int64 and (counts == _suppress.match_counts(*case)).all()


def test_weighted_counts_on_distinct_rows_agree_with_brute_force():
    codes, radix, brute = _codes_and_brute_counts(2, 300, 0.05)
    rows, inverse, weights = _suppress.distinct_rows(codes, radix)
    assert (rows[inverse] == codes).all() and weights.sum() == len(codes) and len(rows) < len(codes)
    assert _suppress.match_counts(rows, rows, radix, weights)[inverse].tolist() == brute
    assert _suppress.record_match_counts(codes, radix).tolist() == brute


def test_greedy_on_a_large_file_suppresses_the_records_of_a_row_alike():
    """Above ROWS_ABOVE records the greedy works on the distinct rows, weighted by their records."""
    rng = np.random.default_rng(4)
    n = _suppress.ROWS_ABOVE + 1000
    codes = np.stack([rng.choice(5, n, p=[0.5, 0.3, 0.1, 0.07, 0.03]) for _ in range(5)], axis=1).astype(np.int64)
    codes[rng.random(codes.shape) < 0.01] = -1
    radix = np.full(5, 6)
    before = _suppress.match_counts(codes, codes, radix)
    out = _suppress.greedy(codes, 3, [4, 3, 2, 1, 0], radix)
    assert (_suppress.match_counts(out, out, radix) >= 3).all()
    assert ((out == codes) | (out < 0)).all()  # suppressions only
    changed = (out != codes).any(axis=1)
    assert changed.any() and (before[changed] < 3).all()  # only records below k are touched
    _, inverse, _ = _suppress.distinct_rows(codes, radix)
    for row in np.unique(inverse[changed]):  # the records of one distinct row are suppressed alike
        assert len({out[i].tobytes() for i in np.flatnonzero(inverse == row)}) == 1


def test_match_counts_agree_with_brute_force():
    codes, radix, brute = _codes_and_brute_counts(5, 80, 0.1)
    assert _suppress.match_counts(codes, codes, radix).tolist() == brute


def test_exact_method_in_a_recipe_and_its_limit():
    frame = _people(60)
    release = _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression", "k": 2, "method": "exact",
                                                        "columns": KEYS}]}, frame, seed=0)
    assert release.outcomes[0].result.diagnostics["optimal"] is True
    assert release.verification["claims"][0]["status"] == "verified"
    heuristic = _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression", "k": 2, "columns": KEYS}]},
                     frame, seed=0)
    assert release.verification["values_set_missing"] <= heuristic.verification["values_set_missing"]
    with pytest.raises(ParameterError, match='more than 250: use method = "heuristic"'):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression", "method": "exact", "columns": KEYS}]},
             _people(300), seed=0)


def test_local_suppression_bad_input():
    frame = _people(20)
    with pytest.raises(RecipeError, match="'k' parameter of local-suppression must be >= 2"):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression", "k": 1, "columns": KEYS}]}, frame)
    with pytest.raises(DataError, match=r"k = 30 cannot be reached: the data \(or this stratum\) have 20 "
                                        r"records.*lower k \(at most 20\)"):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "local-suppression", "k": 30, "columns": KEYS}]}, frame)
    with pytest.raises(DataError, match="column 'income' is numeric with values that are not whole numbers"):
        _run({"roles": {"keys": [*KEYS, "income"]},
              "steps": [{"use": "local-suppression", "columns": [*KEYS, "income"]}]}, frame)
    with pytest.raises(DataError, match="fewer than k"):
        LocalSuppression(k=30).mask(frame[KEYS], privclust.PrivacyContext(seed=0))


def test_integer_coded_keys_are_released_as_integers_with_missing_values():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.integers(1, 5, 50), "b": rng.integers(1, 6, 50)})
    release = _run({"roles": {"keys": ["a", "b"]}, "steps": [{"use": "local-suppression", "k": 3,
                                                             "columns": ["a", "b"]}]}, frame, seed=0)
    assert release.data[["a", "b"]].isna().to_numpy().any()
    assert all(str(t) == "Int64" or t.kind == "i" for t in release.data[["a", "b"]].dtypes)


MATRIX = {"f": {"f": 0.9, "m": 0.1}, "m": {"f": 0.2, "m": 0.8}}


def test_pram_with_a_public_matrix_records_it_and_draws_from_the_context():
    frame = _people(400)
    recipe = {"roles": {"keys": KEYS}, "steps": [{"use": "pram", "matrix": MATRIX, "columns": ["sex"]}]}
    one, two, other = _run(recipe, frame, seed=4), _run(recipe, frame, seed=4), _run(recipe, frame, seed=5)
    assert one.data["sex"].equals(two.data["sex"]) and not one.data["sex"].equals(other.data["sex"])
    entry = next(e for e in one.ledger if e.component == "pram" and e.kind == "guarantee")
    assert entry.details["matrix_public"] is True
    assert entry.details["matrices"]["sex"] == MATRIX
    assert "public" in entry.statement
    moved = (one.data["sex"] != frame["sex"])
    assert 0.05 < moved[frame["sex"] == "f"].mean() < 0.2 and 0.1 < moved[frame["sex"] == "m"].mean() < 0.3
    assert set(one.data["sex"]) <= {"f", "m"}


def test_pram_invariant_matrix_is_a_declared_leak():
    frame = _people(400)
    recipe = {"roles": {"keys": KEYS}, "steps": [{"use": "pram", "columns": ["age"]}]}
    with pytest.raises(RecipeError, match="pram-frequencies"):
        _run(recipe, frame, seed=0)
    release = _run({**recipe, "privacy": {"allow_leaks": ["pram-frequencies"]}}, frame, seed=0)
    leak = next(e for e in release.ledger if e.kind == "leak")
    assert leak.mechanism == "pram-frequencies" and "age" in leak.details["matrices"]
    assert "No differential-privacy guarantee" in release.verdict and "pram-frequencies" in release.verdict
    counts = frame["age"].value_counts().sort_index()
    table = _invariant(counts, 0.8, 0.5)
    names = list(table)
    R = np.array([[table[a][b] for b in names] for a in names])
    T = counts.to_numpy(dtype=float)
    np.testing.assert_allclose(T @ R, T, rtol=1e-12)  # invariant: expected frequencies unchanged
    np.testing.assert_allclose(R.sum(axis=1), 1.0)


@pytest.mark.parametrize("matrix, message", [
    ({"f": {"f": 0.5, "m": 0.4}, "m": {"m": 1.0}}, "row 'f' sums to 0.9, not 1"),
    ({"f": {"f": 0.5, "x": 0.5}, "m": {"m": 1.0}}, "not square: row 'f' names 'x'"),
    ({"f": {"f": 1.5, "m": -0.5}, "m": {"m": 1.0}}, "probability of 'f' must be a number in"),
])
def test_pram_bad_matrices_are_refused_by_row(matrix, message):
    with pytest.raises(RecipeError, match=message):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "pram", "matrix": matrix, "columns": ["sex"]}]},
             _people(), seed=0)


def test_pram_category_missing_from_the_matrix():
    with pytest.raises(DataError, match="column 'sex' holds the category 'm' that the transition matrix has no row"):
        _run({"roles": {"keys": KEYS}, "steps": [{"use": "pram", "matrix": {"f": {"f": 1.0}}, "columns": ["sex"]}]},
             _people(), seed=0)
    with pytest.raises(DataError, match="not whole numbers"):
        PRAM(matrix=MATRIX).mask(_people()[["income"]], privclust.PrivacyContext(seed=0))


@pytest.mark.skipif(not SURVEY.exists(), reason=f"sdcMicro's survey file is not at {SURVEY}")
def test_survey_file_local_suppression_per_stratum():
    frame = pd.read_csv(SURVEY)
    start = time.perf_counter()
    release = _run({"roles": {"keys": SURVEY_KEYS, "strata": "urbrur"},
                    "steps": [{"use": "local-suppression", "k": 3, "columns": SURVEY_KEYS}]}, frame, seed=0)
    elapsed = time.perf_counter() - start
    assert release.verification["whole_file"]["holds"]
    assert all(c["status"] == "verified" for c in release.verification["claims"])
    suppressed = release.verification["values_set_missing"]
    assert 0 < suppressed < 0.01 * len(frame) * len(SURVEY_KEYS)
    print(f"survey file: {suppressed} suppressions in {elapsed:.2f} s")  # the figure quoted in docs/key-maskers.md


def test_key_maskers_page_runs(tmp_path):
    """docs/key-maskers.md: every example runs and prints what the page shows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_page("key-maskers.md", tmp_path) == 7


def test_key_maskers_pass_the_conformance_kit():
    import privclust.testing

    frame = _people(60)[["sex", "age"]]
    identity = {"0-17": {"0-17": 1.0}, "18-39": {"18-39": 1.0}, "40-64": {"40-64": 1.0}, "65+": {"65+": 1.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        privclust.testing.check_component(LocalSuppression(k=3), frame)
        privclust.testing.check_component(PRAM(matrix={**MATRIX, **identity}), frame)


def test_a_text_key_recipe_runs_with_evaluators_and_a_report(tmp_path):
    """Text keys reach no numeric code path: the evaluations' default columns and the report's histograms
    leave a key masker's columns to the key evaluators (a traceback before)."""
    frame = _people()
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "r.toml").write_text('[roles]\nkeys = ["sex", "age", "job"]\n[[steps]]\nuse = "local-suppression"\n'
                                     'columns = ["sex", "age", "job"]\n[[evaluate]]\nuse = "key-frequencies"\n')
    from privclust.cli import main

    code = main(["run", str(tmp_path / "r.toml"), "-i", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv"),
                 "--report", str(tmp_path / "out.html"), "--seed", "1", "--quiet"])
    assert code == 0 and (tmp_path / "out.html").exists()
    out = pd.read_csv(tmp_path / "out.csv")
    assert (_matches(out, KEYS) >= 3).all()


@pytest.mark.parametrize("categories", [5, 70])
def test_pram_draw_is_the_inverse_cdf_of_each_row(categories):
    """The vectorised draw (a pass per matrix column; a sort above 64 categories) equals the row-wise count of
    cumulative probabilities at most the uniform."""
    from privclust_plugins.keys import _draw

    rng = np.random.default_rng(categories)
    P = rng.dirichlet(np.ones(categories), size=categories)
    cumulative = np.cumsum(P, axis=1)
    cumulative[:, -1] = 1.0
    rows, u = rng.integers(0, categories, 5000), rng.random(5000)
    expected = np.minimum((u[:, None] >= cumulative[rows]).sum(axis=1), categories - 1)
    assert (_draw(rows, u, cumulative) == expected).all()


def test_pram_keeps_the_dtype_of_a_text_column():
    frame = pd.DataFrame({"sex": pd.array(["f", "m", None, "f"] * 50, dtype="string"),
                          "code": pd.array([1, 2, None, 1] * 50, dtype="Int64")})
    out = PRAM(matrix=MATRIX).mask(frame[["sex"]], privclust.PrivacyContext(seed=0)).data
    assert out["sex"].dtype == frame["sex"].dtype and out["sex"].isna().sum() == 50
    coded = PRAM(matrix={"1": {"1": 0.5, "2": 0.5}, "2": {"2": 1.0}}).mask(frame[["code"]],
                                                                          privclust.PrivacyContext(seed=0)).data
    assert coded["code"].dtype == frame["code"].dtype and set(coded["code"].dropna()) <= {1, 2}


def test_pram_reads_integer_codes_with_missing_values_as_the_matrix_names_them():
    frame = pd.DataFrame({"sex": [1.0, 2.0, np.nan, 1.0, 2.0, 2.0]})  # integer codes read as floats (a NaN)
    out = PRAM(matrix={"1": {"1": 0.0, "2": 1.0}, "2": {"2": 1.0}}).mask(frame, privclust.PrivacyContext(seed=0))
    assert out.data["sex"].tolist()[:2] == [2.0, 2.0] and np.isnan(out.data["sex"][2])
