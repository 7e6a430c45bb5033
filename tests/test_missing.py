"""Missing values (issue 10, item 4): the steps that accept them (mdav and
microaggregation, sdcMicro's rule), the ones that refuse them (up front, by
name), the ledger's counts, NaN-aware verification, edit rules and
evaluators. No R here: sdcMicro's semantics are tested as properties and
against the textbook loop with sdcMicro's distance (tests/_mdav_reference.py)."""

from __future__ import annotations

import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest
from _mdav_reference import mdav_reference_missing, missing_sq_reference

import privclust
from privclust import DataError, Masked, NothingProtectedWarning
from privclust.runner import compile, preflight
from privclust_plugins import _mdav
from privclust_plugins.mdav import MDAV


def holes(frame: pd.DataFrame, share: float, seed: int) -> pd.DataFrame:
    """``frame`` with about ``share`` of its cells missing, at random."""
    rng = np.random.default_rng(seed)
    return frame.mask(rng.random(frame.shape) < share)


@pytest.fixture
def data() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(rng.lognormal(size=(400, 4)) * 100, columns=["a", "b", "c", "d"])
    return holes(frame, 0.05, 1)


MICRO = {"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]}


def run(recipe, frame, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=3, **kw)


# ---------------------------------------------------------------------------
# The MDAV kernel: sdcMicro's distance, the textbook loop's groups
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_mdav_with_missing_values_forms_the_textbook_groups_of_sdcmicros_distance(seed):
    rng = np.random.default_rng(seed)
    n, d, k = int(rng.integers(20, 300)), int(rng.integers(1, 5)), int(rng.integers(2, 6))
    X = rng.normal(size=(n, d))
    if seed % 2:
        X = np.round(X)  # many ties: decided by the lowest index, as the loop does
    X[rng.random(X.shape) < 0.15] = np.nan
    X[0] = 1.0  # every column has an observed value
    Z = _mdav.standardise(X)[0]
    np.testing.assert_array_equal(_mdav.mdav(Z, k), mdav_reference_missing(Z, k))


def test_sdcmicros_distance_adds_the_squared_range_where_one_side_is_missing():
    Z = np.array([[0.0, 1.0], [np.nan, 3.0], [np.nan, np.nan], [2.0, 0.0]])
    R2 = np.array([4.0, 9.0])
    p = np.array([1.0, np.nan])
    expected = [1.0 + 9.0, 4.0 + 9.0, 4.0 + 0.0, 1.0 + 9.0]
    np.testing.assert_allclose(missing_sq_reference(Z, p, R2), expected)
    Zf, W = np.nan_to_num(Z), ~np.isnan(Z)
    np.testing.assert_allclose(_mdav.missing_sq(Zf, W, p, R2), expected)


def test_mdav_on_complete_data_is_unchanged_by_the_missing_value_path(data):
    complete = data.fillna(1.0)
    Z = _mdav.standardise(complete.to_numpy())[0]
    assert not np.isnan(Z).any()
    part = MDAV(k=3).fit(complete, privclust.PrivacyContext(seed=0))
    np.testing.assert_array_equal(part.labels, _mdav.mdav(Z, 3))


# ---------------------------------------------------------------------------
# The release: NaN exactly where the input had NaN, groups of k or more
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 5])
def test_microaggregation_releases_missing_values_missing_and_nothing_else(data, k):
    release = run({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": k}}]}, data)
    np.testing.assert_array_equal(release.data[list(data.columns)].isna().to_numpy(), data.isna().to_numpy())
    labels = np.asarray(release.outcomes[0].partition.labels)
    assert np.bincount(labels).min() >= k
    # sdcMicro's centres: each group's mean of the observed values of each column
    X, Y = data.to_numpy(), release.data[list(data.columns)].to_numpy()
    for g in np.unique(labels)[:25]:
        rows = labels == g
        for j in range(X.shape[1]):
            seen = rows & ~np.isnan(X[:, j])
            if seen.any():
                np.testing.assert_allclose(Y[seen, j], X[seen, j].mean())


def test_the_ledger_counts_the_records_and_values_with_missing_values(data):
    release = run(MICRO, data)
    entries = [e for e in release.ledger.entries if e.kind == "process" and e.mechanism == "missing values"]
    assert len(entries) == 1
    missing = entries[0].details["missing"]
    assert missing["records"] == int(data.isna().any(axis=1).sum())
    assert missing["values"] == int(data.isna().sum().sum())
    assert missing["columns"] == {c: int(n) for c, n in data.isna().sum().items() if n}
    assert "distances" in missing["policy"] or "distance" in missing["policy"]
    text = entries[0].statement
    assert f"{missing['records']} record(s) with {missing['values']} missing value(s)" in text
    assert "not protected" in text
    process = next(e for e in release.ledger.entries if e.kind == "process" and e.mechanism != "missing values")
    assert process.details["missing"]["values"] == missing["values"]


def test_complete_data_write_no_missing_value_entry(data):
    release = run(MICRO, data.fillna(0.0))
    assert not [e for e in release.ledger.entries if e.mechanism == "missing values"]
    assert "missingness" not in release.verdict


def test_k_anonymity_is_verified_with_sdcmicros_matching_convention_and_the_pattern_is_not_protected(data):
    release = run(MICRO, data)
    claims = [c for c in release.verification["claims"] if c["guarantee"] == "k-anonymity"]
    assert claims and all(c["status"] == "verified" for c in claims)
    for c in claims:
        assert c["min_matching_records"] >= 3
        assert c["identical_min_group_size"] < 3  # a record's missingness pattern sets it apart
    assert "missing value counted as matching any value" in release.verdict
    assert "missingness pattern is not protected" in release.verdict
    assert release.verification["missing_values"] == int(data.isna().sum().sum())


def test_a_record_matching_fewer_than_k_is_refuted_with_missing_values():
    frame = pd.DataFrame({"a": [1.0, 1.0, 1.0, 2.0, 2.0, np.nan], "b": [1.0, 1.0, 1.0, 5.0, 6.0, 7.0]})

    @attrs.frozen(kw_only=True)
    class Claims:
        name: ClassVar[str] = "claims-k3"

        def missing_values(self):
            return "released as given"

        def mask(self, data, context):
            context.record("k-anonymity k = 3 (claimed)", guarantee="k-anonymity", details={"k": 3})
            return Masked(data=data + 0.5)

    registry = _registry_with(Claims)
    release = run({"steps": [{"use": "claims-k3"}]}, frame, registry=registry)
    claim = release.verification["claims"][0]
    assert claim["status"] == "refuted"
    assert claim["min_matching_records"] < 3


# ---------------------------------------------------------------------------
# Refusals: missing = "refuse", DP steps, steps without a policy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", [
    {"steps": [{"use": "microaggregation", "missing": "refuse"}]},
    {"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "missing": "refuse"}}]},
    {"steps": [{"use": "mdav", "missing": "refuse"}]},
])
def test_missing_refuse_refuses_up_front_naming_the_column_and_the_count(data, recipe):
    compiled = compile(recipe)
    with pytest.raises(DataError) as err:
        preflight(compiled, data)  # what `privclust check --input` runs
    text = str(err.value)
    for c, n in data.isna().sum().items():
        assert f"column {c!r} has {n} missing (NaN) values" in text
    assert f"({int(data.isna().any(axis=1).sum())} record(s) in all)" in text
    assert "impute or drop" in text
    with pytest.raises(DataError):
        run(recipe, data)


@pytest.mark.parametrize("step", [
    {"use": "laplace", "epsilon": 1.0, "bounds": {c: [0, 1000] for c in "abcd"}},
    {"use": "gaussian", "epsilon": 0.5, "delta": 1e-6, "bounds": {c: [0, 1000] for c in "abcd"}},
    {"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0, "bounds": {c: [0, 1000] for c in "abcd"}},
])
def test_differentially_private_steps_refuse_missing_values_and_say_why(data, step):
    try:
        compiled = compile({"privacy": {"epsilon": 10.0, "delta": 1e-5}, "steps": [step]})
    except privclust.RecipeError:  # idp-kmeans' number of clusters before its rename to n_clusters
        step = {("k" if key == "n_clusters" else key): value for key, value in step.items()}
        compiled = compile({"privacy": {"epsilon": 10.0, "delta": 1e-5}, "steps": [step]})
    with pytest.raises(DataError) as err:
        preflight(compiled, data)
    text = str(err.value)
    assert "steps[0]" in text and "column 'a' has" in text
    assert "differential-privacy guarantee" in text and "complete records" in text
    # the advice to impute must not invite an imputation from the data (a mean moves with every record)
    assert "impute only with public values" in text and "column mean" in text
    assert "impute or drop those records first, or give the step columns without missing values" in text


@pytest.mark.parametrize("step", [{"use": "dpc", "n_clusters": 2, "dc": 1.0}])
def test_steps_without_a_missing_value_policy_refuse_up_front(data, step):
    with pytest.raises(DataError, match=r"declares no missing-value policy .*column 'a' has|column 'a' has .*"
                                        r"declares no missing-value policy"):
        preflight(compile({"steps": [step]}), data)


def test_a_step_on_complete_columns_runs_beside_missing_values_elsewhere(data):
    frame = data.assign(e=np.arange(len(data), dtype=float))
    step = {"use": "laplace", "epsilon": 1.0, "bounds": {"e": [0, 400]}, "columns": ["e"]}
    release = run({"privacy": {"epsilon": 1.0}, "steps": [step]}, frame)
    assert release.data["a"].isna().sum() == data["a"].isna().sum()


def test_infinite_values_are_still_refused(data):
    with pytest.raises(DataError, match="infinite"):
        preflight(compile(MICRO), data.assign(a=data["a"].fillna(np.inf)))


def test_a_column_with_no_observed_value_is_refused(data):
    with pytest.raises(DataError, match="no observed value"):
        preflight(compile(MICRO), data.assign(b=np.nan))
    with pytest.raises(DataError, match="no observed value"):
        MDAV(k=3).fit(data.assign(b=np.nan), privclust.PrivacyContext(seed=0))


def test_the_capability_says_what_each_component_does():
    assert privclust.capability(MDAV(), "missing_values")()
    assert privclust.capability(MDAV(missing="refuse"), "missing_values")() is None
    registry = privclust.get_registry()
    assert privclust.capability(registry.create("maskers", {"use": "microaggregation"}), "missing_values")()
    for use in ("fcm", "efcm"):
        assert "p / p_observed" in privclust.capability(registry.create("clusterers", {"use": use}),
                                                                    "missing_values")()
        assert privclust.capability(registry.create("clusterers", {"use": use, "missing": "refuse"}),
                                    "missing_values")() is None
    fuzzy = privclust.capability(registry.create("maskers", {"use": "fuzzy-microaggregation"}), "missing_values")
    assert "released missing" in fuzzy() and "p / p_observed" in fuzzy()
    assert privclust.capability(registry.create("maskers", {"use": "fuzzy-microaggregation", "missing": "refuse"}),
                                "missing_values")() is None
    inner_refuses = {"use": "fuzzy-microaggregation", "clusterer": {"use": "efcm", "missing": "refuse"}}
    assert privclust.capability(registry.create("maskers", inner_refuses), "missing_values")() is None


# ---------------------------------------------------------------------------
# Verification with NaN: a missing value released missing is "unchanged"
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Identity:
    name: ClassVar[str] = "identity-with-missing"

    def missing_values(self):
        return "returns its input"

    def mask(self, data, context):
        return Masked(data=data.copy())


def _registry_with(cls):
    class Plugin:
        @privclust.hookimpl
        def privclust_register_maskers(self, register):
            register(cls)

    return privclust.Registry(plugins=[Plugin()], use_env=False)


def test_a_masker_returning_its_input_with_nans_is_seen_releasing_every_record_unchanged(data):
    registry = _registry_with(Identity)
    with pytest.warns(NothingProtectedWarning):
        release = privclust.run({"steps": [{"use": "identity-with-missing"}]}, data, seed=1, registry=registry)
    checks = release.verification
    assert checks["changed_columns"] == []
    assert checks["verbatim_records"] == len(data)
    step = checks["steps"][0]
    assert step["verbatim_by_step"] == step["verbatim_released"] == len(data)
    assert "changes no column" in release.verdict


def test_identical_rows_with_missing_values_form_one_group():
    from privclust.kanonymity import _groups, _matching

    frame = pd.DataFrame({"a": [1.0, 1.0, 1.0, 2.0], "b": [np.nan, np.nan, float("-nan"), 3.0]})
    sizes, n_groups = _groups(frame, ["a", "b"])
    assert list(sizes) == [3, 3, 3, 1] and n_groups == 2
    matching = _matching(pd.DataFrame({"a": [1.0, 1.0, np.nan, 2.0], "b": [5.0, np.nan, 5.0, 5.0]}), ["a", "b"], ())
    # (1, 5) matches itself, (1, .) and (., 5); (., 5) matches every row with b = 5 or missing
    assert list(matching) == [3, 3, 4, 2]


# ---------------------------------------------------------------------------
# Edit rules: not evaluable where a rule's column is missing
# ---------------------------------------------------------------------------


def test_edit_rules_are_not_evaluable_on_records_missing_one_of_their_columns(data):
    frame = data.assign(total=data["a"] + data["b"])
    recipe = {"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}],
              "constraints": [{"use": "linear", "rules": ["total = a + b", "c >= 0"]}],
              "evaluate": [{"use": "edit-violations"}]}
    release = run(recipe, frame)
    out = release.data
    entries = {e.details["rule"]: e for e in release.ledger.entries
               if e.kind == "guarantee" and e.mechanism == "edit rule"}
    skipped = int(frame[["total", "a", "b"]].isna().any(axis=1).sum())
    assert entries["total = a + b"].details["not_evaluable_records"] == skipped
    assert entries["total = a + b"].details["violated_records"] == 0
    assert f"cannot be evaluated on {skipped} record(s)" in entries["total = a + b"].statement
    assert entries["c >= 0"].details["not_evaluable_records"] == int(frame["c"].isna().sum())
    full = out[["total", "a", "b"]].dropna()
    np.testing.assert_allclose(full["total"], full["a"] + full["b"], rtol=1e-9, atol=1e-6)
    figures = dict(zip(release.evaluations["metric"], release.evaluations["value"], strict=True))
    assert figures["total = a + b: records not evaluable"] == skipped
    assert figures["total = a + b: share violated"] == 0.0
    np.testing.assert_array_equal(out[list(frame.columns)].isna().to_numpy(), frame.isna().to_numpy())


@pytest.mark.parametrize("masker", [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}},
                                    {"use": "fuzzy-microaggregation", "k": 3}])
def test_a_masker_does_not_claim_its_rules_on_records_it_cannot_check(data, masker):
    """The maskers' statements said "so every released record satisfies them" of rules that a record with a
    missing value in their columns neither satisfies nor breaks (the host's check says it cannot evaluate
    them there)."""
    frame = data.assign(total=data["a"] + data["b"])
    release = run({"steps": [masker], "constraints": [{"use": "linear", "rules": ["total = a + b"]}]}, frame)
    claim = next(e.statement for e in release.ledger.of_kind("guarantee")
                 if "projected onto the edit rules" in e.statement)
    assert "so every released record satisfies them" not in claim
    assert "so every released record with all these columns observed satisfies them" in claim
    complete = run({"steps": [masker], "constraints": [{"use": "linear", "rules": ["total = a + b"]}]},
                   frame.dropna())
    assert "so every released record satisfies them" in next(
        e.statement for e in complete.ledger.of_kind("guarantee") if "projected onto the edit rules" in e.statement)


# ---------------------------------------------------------------------------
# Evaluators over the observed cells
# ---------------------------------------------------------------------------


EVALUATORS = [{"use": "sse-sst"}, {"use": "il1s"}, {"use": "moments"}, {"use": "dbrl"},
              {"use": "interval-disclosure"}, {"use": "group-sizes"}]


def test_evaluators_are_finite_on_a_release_with_missing_values(data):
    release = run({**MICRO, "evaluate": EVALUATORS}, data)
    values = release.evaluations["value"].to_numpy(dtype=float)
    assert np.isfinite(values).all(), release.evaluations


def test_evaluators_see_an_unchanged_release_with_missing_values_as_unchanged(data):
    registry = _registry_with(Identity)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = privclust.run({"steps": [{"use": "identity-with-missing"}], "evaluate": EVALUATORS[:5]}, data,
                                seed=1, registry=registry)
    figures = dict(zip(release.evaluations["metric"], release.evaluations["value"], strict=True))
    assert figures["sse_sst"] == 0.0 and figures["il1s"] == 0.0
    assert figures["mean_rel_change"] == 0.0 and figures["var_rel_change"] == 0.0
    assert figures["dbrl"] == 1.0  # every record is nearest to its own original (no duplicates here)
    assert figures["drisk"] == 1.0 and figures["values_inside"] == 1.0


def test_dbrl_with_missing_values_is_the_brute_force_linkage_of_sdcmicros_distance():
    from privclust_plugins import _microdata_metrics as mm

    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 3))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[0] = 0.0
    Y = X + rng.normal(scale=0.3, size=X.shape)
    share, linked = mm.dbrl(X, Y)
    mean, sd = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
    Z, Zp = (X - mean) / sd, (Y - mean) / sd
    R2 = (np.nanmax(Z, axis=0) - np.nanmin(Z, axis=0)) ** 2
    credit = 0.0
    for i in range(len(Z)):
        d = missing_sq_reference(Z, Zp[i], R2)
        near = d <= d.min() * (1 + 1e-9) + 1e-12
        credit += 1.0 / near.sum() if near[i] else 0.0
    assert linked == pytest.approx(credit)
    assert share == pytest.approx(credit / len(Z))


# ---------------------------------------------------------------------------
# The docs page
# ---------------------------------------------------------------------------


def test_the_missing_values_page_runs_as_documented(tmp_path):
    from _docblocks import run_page

    assert run_page("missing-values.md", tmp_path) >= 2


# ---------------------------------------------------------------------------
# The example plugin's maskers: a missing value stays missing
# ---------------------------------------------------------------------------


def _needs_example_plugin() -> None:
    """Skip unless the example plugin is installed: importable is not enough
    (tests/test_docs.py puts its source on sys.path for its pages), its
    maskers are registered through its entry point."""
    if "rounding" not in privclust.get_registry().names("maskers"):
        pytest.skip("the example plugin is not installed; pip install docs/examples/privclust-example-plugin")


@pytest.mark.parametrize("step", [
    {"use": "top-bottom-coding", "top": {"a": 300.0}, "bottom": {"b": 50.0}},
    {"use": "top-bottom-coding", "top": {"a": 300.0}, "replacement": "mean"},
])
def test_top_bottom_coding_releases_missing_values_missing(data, step):
    _needs_example_plugin()
    release = run({"privacy": {"allow_leaks": ["replacement"]}, "steps": [step]}, data)
    np.testing.assert_array_equal(release.data[list(data.columns)].isna().to_numpy(), data.isna().to_numpy())
    assert (release.data["a"].dropna() <= 300.0 + 1e-9).all() or step.get("replacement") == "mean"
    entry = next(e for e in release.ledger.entries if e.mechanism == "missing values")
    assert entry.details["missing"]["values"] == int(data.isna().sum().sum())


def test_rounding_releases_missing_values_missing(data):
    _needs_example_plugin()
    release = run({"steps": [{"use": "rounding", "base": 10.0}]}, data)
    np.testing.assert_array_equal(release.data[list(data.columns)].isna().to_numpy(), data.isna().to_numpy())
    observed = release.data[list(data.columns)].to_numpy()
    observed = observed[~np.isnan(observed)]
    np.testing.assert_allclose(observed, np.round(observed / 10.0) * 10.0)


# ---------------------------------------------------------------------------
# The command line and public partitions
# ---------------------------------------------------------------------------


def test_privclust_check_refuses_up_front_naming_the_step_column_and_count(tmp_path, capsys, data):
    from privclust.cli import main

    data.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "dp.toml").write_text('[privacy]\nepsilon = 1.0\n\n[[steps]]\nuse = "laplace"\nepsilon = 1.0\n'
                                      'columns = ["a"]\nbounds = { a = [0, 1000] }\n')
    (tmp_path / "mdav.toml").write_text('[[steps]]\nuse = "microaggregation"\nclusterer = { use = "mdav", k = 3 }\n')
    assert main(["check", str(tmp_path / "dp.toml"), "--input", str(tmp_path / "in.csv")]) == 1
    err = capsys.readouterr().err
    assert f"column 'a' has {int(data['a'].isna().sum())} missing (NaN) values" in err
    assert "steps[0]" in err and "differential-privacy guarantee" in err
    assert main(["check", str(tmp_path / "mdav.toml"), "--input", str(tmp_path / "in.csv")]) == 0


def test_microaggregation_with_missing_values_per_stratum(data):
    frame = data.assign(region=np.where(np.arange(len(data)) % 2 == 0, "north", "south"))
    release = run({"roles": {"strata": "region"},
                   "steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3},
                              "columns": ["a", "b", "c", "d"]}]}, frame)
    np.testing.assert_array_equal(release.data[list(data.columns)].isna().to_numpy(), data.isna().to_numpy())
    claims = [c for c in release.verification["claims"] if c["guarantee"] == "k-anonymity"]
    assert claims and all(c["status"] == "verified" and c["min_group_size"] >= 3 for c in claims)


def test_a_step_that_fills_a_missing_value_is_stopped(data):
    @attrs.frozen(kw_only=True)
    class Filler:
        name: ClassVar[str] = "filler"

        def missing_values(self):
            return "claims to release missing values missing"

        def mask(self, data, context):
            return Masked(data=data.fillna(0.0) + 1.0)

    with pytest.raises(privclust.PrivclustError, match="where the original is missing; a missing value must stay"):
        run({"steps": [{"use": "filler"}]}, data, registry=_registry_with(Filler))


# ---------------------------------------------------------------------------
# fcm, efcm and fuzzy-microaggregation: sdcMicro's distance from record to centre
# ---------------------------------------------------------------------------

from privclust_plugins import _fcm  # noqa: E402
from privclust_plugins.fuzzy import EFCM, FCM  # noqa: E402
from privclust_plugins.microaggregation import self_centres  # noqa: E402

FUZZY_STEPS = [
    {"use": "fuzzy-microaggregation", "k": 3},
    {"use": "fuzzy-microaggregation", "k": 3, "clusterer": "efcm"},
    {"use": "fuzzy-microaggregation", "k": 4, "clusterer": {"use": "fcm", "memory_budget": 0.01}},  # blocked path
]


def memberships_dense(memberships) -> np.ndarray:
    if isinstance(memberships, privclust.TopMemberships):
        rows = np.asarray(memberships.values) * (1.0 - np.asarray(memberships.dropped))[:, None]
        return rows.sum(axis=1) + np.asarray(memberships.dropped)
    return np.asarray(memberships).sum(axis=1)


@pytest.mark.parametrize("step", FUZZY_STEPS)
def test_fuzzy_microaggregation_releases_missing_values_missing_and_nothing_else(data, step):
    release = run({"steps": [step]}, data)
    released = release.data[list(data.columns)]
    np.testing.assert_array_equal(released.isna().to_numpy(), data.isna().to_numpy())
    part = release.outcomes[0].partition
    centres = np.asarray(part.centres)
    assert np.isfinite(centres).all()
    np.testing.assert_allclose(memberships_dense(part.memberships), 1.0, atol=1e-9)
    # every record releases its drawn centre on the columns it has
    labels = np.asarray(part.labels)
    X = data.to_numpy()
    expected = centres[labels]
    seen = ~np.isnan(X)
    np.testing.assert_array_equal(released.to_numpy()[seen], expected[seen])
    details = release.outcomes[0].masked.diagnostics if hasattr(release.outcomes[0], "masked") else part.diagnostics
    assert details["expected_size_min"] >= step["k"] - 1e-9  # the mass rule holds with missing values
    assert details["missing_values"] == int(data.isna().sum().sum())


@pytest.mark.parametrize("cls", [FCM, EFCM])
def test_fcm_and_efcm_fit_records_with_missing_values(data, cls):
    part = cls(n_clusters=5).fit(data, privclust.PrivacyContext(seed=0))
    assert np.isfinite(part.centres).all()
    U = np.asarray(part.memberships)
    assert U.shape == (len(data), 5) and np.isfinite(U).all()
    np.testing.assert_allclose(U.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(part.labels, U.argmax(axis=1))


def test_the_distance_to_a_centre_is_the_partial_distance():
    """Hathaway & Bezdek's partial distance: observed squared differences times p / p_observed."""
    Z = np.array([[0.0, 1.0, 2.0], [np.nan, 3.0, 1.0], [np.nan, np.nan, np.nan], [2.0, np.nan, np.nan]])
    V = np.array([[1.0, 1.0, 1.0], [0.0, 2.0, -1.0]])
    expected = np.empty((4, 2))
    for r, x in enumerate(Z):
        seen = ~np.isnan(x)
        for i, v in enumerate(V):
            expected[r, i] = ((x[seen] - v[seen]) ** 2).sum() * 3 / max(seen.sum(), 1)
    np.testing.assert_allclose(_fcm.missing_sq(_fcm._Missing(Z), 0, 4, V), expected, rtol=1e-12, atol=1e-12)
    assert expected[2].tolist() == [0.0, 0.0]  # nothing observed: every centre alike


def test_memberships_of_a_record_with_missing_values_come_from_its_observed_variables():
    rng = np.random.default_rng(3)
    V = rng.normal(size=(6, 3))
    x = np.array([[0.3, np.nan, -0.2]])
    d = ((x[:, [0, 2]] - V[:, [0, 2]]) ** 2).sum(axis=1)
    # FCM: the scale cancels, the memberships are those of the observed variables
    res = _fcm.missing_pass(_fcm._Missing(x), V, _fcm.Fuzzifier("fcm", 2.0), budget_bytes=1e6, dense=True)
    np.testing.assert_allclose(res.dense[0], (1 / d) / (1 / d).sum(), rtol=1e-12)
    # EFCM: softmax of -lambda * (3/2) d
    res = _fcm.missing_pass(_fcm._Missing(x), V, _fcm.Fuzzifier("efcm", 1.7), budget_bytes=1e6, dense=True)
    u = np.exp(-1.7 * 1.5 * (d - d.min()))
    np.testing.assert_allclose(res.dense[0], u / u.sum(), rtol=1e-12)


def test_centres_are_weighted_means_of_the_observed_values():
    """One update of the alternating optimisation: per column, the weights of the records observing it."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[0] = 0.5
    V = rng.normal(size=(3, 3))
    fz = _fcm.Fuzzifier("fcm", 1.5)
    incomplete = np.isnan(X).any(axis=1)
    run_ = _fcm.run(X[~incomplete], V, fz, tol=0.0, max_iter=1, budget_bytes=1e6,
                    missing=_fcm._Missing(X[incomplete]))
    obs = ~np.isnan(X)
    D = np.array([[np.nansum((x - v) ** 2) * 3 / (~np.isnan(x)).sum() for v in V] for x in X])
    U = D ** (-1 / (fz.value - 1))
    U /= U.sum(axis=1, keepdims=True)
    W = U ** fz.value
    expected = (W.T @ np.where(obs, X, 0.0)) / (W.T @ obs)
    np.testing.assert_allclose(run_.centres, expected, rtol=1e-10)


def test_self_rule_compares_a_record_with_missing_values_on_the_columns_it_has():
    centres = np.array([[0.0, 0.0], [1.0, 2.0], [1.0, 5.0]])
    z = np.array([[1.0, np.nan], [np.nan, np.nan], [0.0, 0.0], [3.0, np.nan]])
    rows, own = self_centres(z, centres)
    assert rows.tolist() == [0, 2]
    assert [o.tolist() for o in own] == [[1, 2], [0]]


def test_fuzzy_edit_rules_hold_on_records_that_have_every_rule_column():
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(size=300) * 100, rng.lognormal(size=300) * 50
    frame = holes(pd.DataFrame({"a": a, "b": b, "total": a + b}), 0.05, 2)
    recipe = {"constraints": [{"use": "linear", "rules": ["total = a + b"]}],
              "steps": [{"use": "fuzzy-microaggregation", "k": 3}]}
    release = run(recipe, frame)
    out = release.data
    np.testing.assert_array_equal(out[["a", "b", "total"]].isna().to_numpy(), frame.isna().to_numpy())
    whole = out[["a", "b", "total"]].notna().all(axis=1)
    assert whole.sum() > 200
    np.testing.assert_allclose(out.loc[whole, "total"], out.loc[whole, "a"] + out.loc[whole, "b"], rtol=1e-9)
    centres = np.asarray(release.outcomes[0].partition.centres)
    np.testing.assert_allclose(centres[:, 2], centres[:, 0] + centres[:, 1], rtol=1e-9)


@pytest.mark.parametrize("step", [{"use": "fcm", "n_clusters": 3, "missing": "refuse"},
                                  {"use": "efcm", "n_clusters": 3, "missing": "refuse"},
                                  {"use": "fuzzy-microaggregation", "k": 3, "missing": "refuse"},
                                  {"use": "fuzzy-microaggregation", "k": 3,
                                   "clusterer": {"use": "efcm", "missing": "refuse"}}])
def test_fuzzy_components_with_missing_refuse_name_the_columns_and_counts(data, step):
    with pytest.raises(DataError) as err:
        preflight(compile({"steps": [step]}), data)
    text = str(err.value)
    assert f"column 'a' has {int(data['a'].isna().sum())} missing (NaN) values" in text
    assert 'missing = "refuse"' in text
    with pytest.raises(DataError, match="'a'"):
        if step["use"] == "fuzzy-microaggregation":
            context = privclust.PrivacyContext(seed=0)
            masker = privclust.get_registry().create("maskers", step)
            with context.step(0, "fuzzy", masker.name):
                masker.mask(data, context)
        else:
            privclust.get_registry().create("clusterers", step).fit(data, privclust.PrivacyContext(seed=0))


def test_the_ledger_counts_the_missing_values_of_a_fuzzy_step(data):
    release = run({"steps": [{"use": "fuzzy-microaggregation", "k": 3}]}, data)
    entry = next(e for e in release.ledger.entries if e.kind == "process" and e.mechanism == "missing values")
    missing = entry.details["missing"]
    assert missing["records"] == int(data.isna().any(axis=1).sum())
    assert missing["values"] == int(data.isna().sum().sum())
    assert missing["columns"] == {c: int(n) for c, n in data.isna().sum().items() if n}
    assert "partial distance" in missing["policy"]
    assert "not protected" in release.verdict


def test_fuzzy_microaggregation_with_missing_values_on_the_truncated_path():
    rng = np.random.default_rng(6)
    frame = holes(pd.DataFrame(rng.normal(size=(2200, 2)), columns=["a", "b"]), 0.05, 3)
    step = {"use": "fuzzy-microaggregation", "k": 2, "clusterer": {"use": "fcm", "memory_budget": 1.0}}
    release = run({"steps": [step]}, frame)
    np.testing.assert_array_equal(release.data.isna().to_numpy(), frame.isna().to_numpy())
    part = release.outcomes[0].partition
    dg = part.diagnostics
    assert dg["c_initial"] > 1024 and dg["membership_path"] in ("truncated", "exact")
    assert dg["membership_records_with_missing_values_exact"] == int(frame.isna().any(axis=1).sum())
    assert dg["expected_size_min"] >= 2 - 1e-9
    np.testing.assert_allclose(memberships_dense(part.memberships), 1.0, atol=1e-9)


def gold_frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(rng.lognormal(size=(300, 3)) * 100, columns=["a", "b", "c"])


#: Released column sums, sum of the centres and of the labels on complete data, computed before the
#: missing-value path existed (same seed): the complete records' paths are unchanged.
GOLD = [
    ({"use": "fuzzy-microaggregation", "k": 3},
     [53864.28835980866, 43976.96788331578, 48443.76531928606], 30419.95031191009, 9054),
    ({"use": "fuzzy-microaggregation", "k": 3, "clusterer": {"use": "fcm", "memory_budget": 0.01}},
     [53864.28835980866, 43976.96788331577, 48443.76531928606], 30419.950311910085, 9054),
    ({"use": "fuzzy-microaggregation", "k": 4, "clusterer": "efcm"},
     [55617.0113583813, 44873.10447272273, 50318.99198050554], 33421.08632551601, 10622),
    ({"use": "fcm", "n_clusters": 4},
     [56666.15574412809, 45738.573180589556, 49806.20122742935], 2798.86994538812, 624),
]


@pytest.mark.parametrize(("step", "sums", "centres", "labels"), GOLD)
def test_complete_data_give_the_same_release_as_before_the_missing_value_path(step, sums, centres, labels):
    release = privclust.run({"steps": [step]}, gold_frame(), seed=2)
    part = release.outcomes[0].partition
    # rtol 1e-7, not 1e-12: the fits go through OpenBLAS, whose kernels depend on the CPU, and the iterations
    # carry a last-bit difference on (efcm's sums differ by 2.5e-9 on an AMD EPYC from where they were computed);
    # the labels, a discrete outcome, must match exactly
    np.testing.assert_allclose(release.data[["a", "b", "c"]].to_numpy().sum(axis=0), sums, rtol=1e-7)
    np.testing.assert_allclose(float(np.asarray(part.centres).sum()), centres, rtol=1e-7)
    assert int(np.asarray(part.labels).sum()) == labels


def test_the_regime_warnings_still_work_with_missing_values(data):
    from privclust_plugins.microaggregation import UniformMembershipsWarning

    with pytest.warns(UniformMembershipsWarning, match="near-uniform memberships"):
        release = privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 3, "m1": 10.0}]}, data, seed=3)
    np.testing.assert_array_equal(release.data.isna().to_numpy(), data.isna().to_numpy())


def test_before_after_draws_the_values_there_are_and_counts_the_missing_ones():
    """A column with a missing value drew empty histograms (the bin range was NaN) under 'original' and
    'released' legends."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from privclust.plots import before_after

    frame = pd.DataFrame({"income": [1200.0, 1350.0, np.nan, 2100.0, 2250.0, 2000.0, 3900.0, np.nan, 4100.0],
                          "spend": [900.0, 1000.0, 950.0, 1500.0, 1200.0, 1450.0, 2600.0, 2500.0, 2700.0]})
    release = privclust.run({"steps": [{"use": "microaggregation", "clusterer": {"use": "mdav", "k": 3}}]}, frame,
                            seed=1)
    axes = before_after(release, detached=True).ravel()
    income, spend = axes[0], axes[1]
    assert sum(p.get_height() for p in income.patches) == 7 + 7  # the observed values of both files
    assert income.get_title() == "income\nnot drawn, missing: 2 original, 2 released"
    assert spend.get_title() == "spend" and sum(p.get_height() for p in spend.patches) == 18
    none = pd.DataFrame({"a": [np.nan] * 4})
    axes = before_after(attrs.evolve(release, original=none, data=none), columns=["a"], detached=True).ravel()
    assert axes[0].get_title() == "a (every value missing)" and not axes[0].patches
