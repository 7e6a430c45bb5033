"""The ``mdav`` clusterer: the textbook algorithm, its fast kernel, the component."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _mdav_reference import mdav_reference
from conftest import require_dataset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privclust
import privclust.datasets
import privclust.testing
from privclust import ConstraintSet, DataError, ParameterError, PrivacyContext
from privclust_plugins import _mdav
from privclust_plugins.constraints import LinearConstraints
from privclust_plugins.mdav import MDAV


def fit(frame: pd.DataFrame, k: int, constraints: ConstraintSet | None = None):
    context = PrivacyContext(seed=0, constraints=constraints)
    return MDAV(k=k).fit(frame, context), context


def check_groups(labels: np.ndarray, n: int, k: int) -> None:
    assert labels.shape == (n,)
    assert labels.min() == 0
    sizes = np.bincount(labels)
    assert sizes.sum() == n  # every record in exactly one group
    assert np.all(sizes >= k) and np.all(sizes <= 2 * k - 1)


# ---------------------------------------------------------------------------
# The kernels
# ---------------------------------------------------------------------------


def test_reference_by_hand_on_a_line():
    # 1-D points 0..7 with k = 2: farthest from the centroid 3.5 is 0 (lowest index of 0 and 7),
    # grouped with 1; farthest from 0 is 7, grouped with 6; then 4 remain (< 3k = 6) but >= 2k:
    # farthest from the centroid 3.5 of {2, 3, 4, 5} is 2, grouped with 3; the rest {4, 5}.
    Z = np.arange(8, dtype=float)[:, None]
    labels = mdav_reference(Z, 2)
    assert labels.tolist() == [0, 0, 2, 2, 3, 3, 1, 1]
    assert _mdav.mdav(Z, 2).tolist() == labels.tolist()


@pytest.mark.parametrize(("n", "d", "k", "seed"), [(40, 2, 2, 0), (200, 3, 3, 1), (777, 5, 4, 2), (2500, 5, 3, 3),
                                                   (1500, 1, 5, 4), (3000, 8, 7, 5)])
def test_fast_kernel_gives_the_reference_groups(n, d, k, seed):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=d)
    Z[: n // 10] *= 6  # a heavy tail, as in real microdata
    expected = mdav_reference(Z, k)
    got = _mdav.mdav(Z, k)
    np.testing.assert_array_equal(got, expected)
    check_groups(got, n, k)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(2, 5), extra=st.integers(0, 50), d=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
       grid=st.booleans())
def test_groups_hold_k_to_2k_minus_1_records_and_match_the_reference(k, extra, d, seed, grid):
    rng = np.random.default_rng(seed)
    n = 2 * k + extra
    # a small integer grid makes many exact ties and duplicates
    X = rng.integers(0, 3, size=(n, d)).astype(float) if grid else rng.normal(size=(n, d))
    Z = _mdav.standardise(X)[0]
    labels = _mdav.mdav(Z, k)
    check_groups(labels, n, k)
    np.testing.assert_array_equal(labels, mdav_reference(Z, k))


def test_standardise_uses_the_population_sd_and_zeroes_constant_columns():
    X = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]])
    Z, mean, scale, constant = _mdav.standardise(X)
    np.testing.assert_allclose(scale, [np.sqrt(8 / 3), 1.0])
    assert constant.tolist() == [False, True]
    assert np.all(Z[:, 1] == 0.0)
    np.testing.assert_allclose(Z[:, 0].std(), 1.0)


def test_kernel_refuses_too_few_records_and_reports_progress():
    with pytest.raises(ValueError):
        _mdav.mdav(np.zeros((5, 2)), 3)
    calls = []
    _mdav.mdav(np.random.default_rng(0).normal(size=(3000, 2)), 3, progress=lambda a, b: calls.append((a, b)))
    assert 1 <= len(calls) <= 202
    assert calls[-1] == (3000, 3000)
    assert all(a <= b for a, b in calls)


# ---------------------------------------------------------------------------
# The component
# ---------------------------------------------------------------------------


def test_partition_centres_are_group_means_and_the_ledger_records_k_anonymity(frame):
    part, context = fit(frame, 4)
    check_groups(np.asarray(part.labels), len(frame), 4)
    X = frame.to_numpy()
    for g in range(part.n_clusters):
        np.testing.assert_allclose(part.centres[g], X[part.labels == g].mean(axis=0))
    assert part.memberships is None
    assert part.columns == ("a", "b", "c")
    assert part.diagnostics["k"] == 4
    assert np.array_equal(part.diagnostics["group_sizes"], np.bincount(part.labels))
    (entry,) = context.ledger.of_kind("guarantee")
    assert entry.mechanism == "k-anonymity"
    assert "at least 4 records" in entry.statement and "replaces every record" in entry.statement
    # deterministic: the same groups whatever the seed
    again = MDAV(k=4).fit(frame, PrivacyContext(seed=99))
    assert np.array_equal(again.labels, part.labels)


def test_groups_are_formed_on_standardised_columns():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    scaled = frame.assign(b=frame["b"] * 1e6 + 5)
    a, _ = fit(frame, 3)
    b, _ = fit(scaled, 3)
    assert np.array_equal(a.labels, b.labels)  # units do not matter


def test_constant_columns_do_not_change_the_groups():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30)})
    part, _ = fit(frame, 3)
    with_constant, _ = fit(frame.assign(c=7.0), 3)
    assert np.array_equal(part.labels, with_constant.labels)
    assert np.all(with_constant.centres[:, 2] == 7.0)
    assert with_constant.diagnostics["constant_columns"] == ["c"]


def test_centres_are_projected_onto_the_steps_rules():
    frame = privclust.datasets.table1()
    rules = LinearConstraints(rules=[privclust.datasets.TABLE1_RULE, "exp16 >= 14"])
    bound = rules.bind(tuple(frame.columns))
    part, context = fit(frame, 3, ConstraintSet(tuple(frame.columns), [bound]))
    assert part.diagnostics["centres_projected"] is True
    assert bound.satisfied(part.centres).all()
    plain, _ = fit(frame, 3)
    assert np.array_equal(part.labels, plain.labels)
    # the group holding the rule-breaking last record moves; the others that satisfy both rules do not
    ok = bound.satisfied(plain.centres)
    np.testing.assert_array_equal(part.centres[ok], plain.centres[ok])
    assert not ok.all()


@pytest.mark.parametrize("k", [1, 0, -2, 2.5, "3", True])
def test_bad_k_is_a_parameter_error(k):
    with pytest.raises(ParameterError, match="'k'"):
        MDAV(k=k)


def test_too_few_records_is_a_data_error_naming_k_and_n(frame):
    with pytest.raises(DataError, match=r"k = 4 needs at least 2k = 8 records; the data have N = 7"):
        MDAV(k=4).fit(frame.iloc[:7], PrivacyContext(seed=0))
    with pytest.raises(DataError, match="N = 5"):
        MDAV(k=10).fit(frame.iloc[:5], PrivacyContext(seed=0))
    assert MDAV(k=4).min_records(3) == 8


def test_nan_is_a_data_error_with_missing_refuse(frame):
    bad = frame.copy()
    bad.iloc[3, 1] = np.nan
    with pytest.raises(DataError, match="'?b'? hold NaN|b hold NaN"):
        MDAV(k=3, missing="refuse").fit(bad, PrivacyContext(seed=0))
    MDAV(k=3).fit(bad, PrivacyContext(seed=0))  # the default groups on the observed variables


def test_the_runner_refuses_too_few_records(registry):
    # the step's own words, before any step runs: they name k and the largest k that fits
    with pytest.raises(DataError, match=r"k = 4 needs at least 2k = 8 records; the data have N = 7 .*lower k to at "
                                        r"most 3"):
        privclust.run({"steps": [{"use": "mdav", "k": 4}]}, privclust.datasets.table1().iloc[:7], registry=registry)


def test_conformance_kit(frame):
    privclust.testing.check_component(MDAV(k=3), frame)


def test_census_with_its_edit_rule(registry):
    require_dataset("casc_census.csv")
    import privclust.datasets as ds

    census = ds.load("casc_census")
    columns = [c for c in privclust.numeric_columns(census)]
    recipe = {
        "constraints": [{"use": "linear", "rules": ["PTOTVAL = POTHVAL + PEARNVAL"]}],
        "steps": [{"use": "mdav", "k": 3, "columns": columns}],
    }
    release = privclust.run(recipe, census, seed=0, registry=registry)
    part = release.outcomes[0].result
    check_groups(np.asarray(part.labels), len(census), 3)
    rules = LinearConstraints(rules=["PTOTVAL = POTHVAL + PEARNVAL"]).bind(columns)
    assert rules.satisfied(part.centres).all()
    assert "cluster" in release.data.columns


def test_the_docs_page_examples_run(tmp_path):
    from _docblocks import run_page

    require_dataset("casc_census.csv")
    assert run_page("mdav.md", tmp_path) >= 2


def test_distinct_values_near_1e15_are_not_a_constant_column():
    # 1e15 + 100 i: a spread of 1,100 that a threshold relative to the mean (1e-12) once called constant
    frame = pd.DataFrame({"x": 1e15 + np.arange(12) * 100.0, "y": np.random.default_rng(0).normal(size=12)})
    release = privclust.run({"steps": [{"use": "mdav", "k": 3}]}, frame, seed=1)
    assert release.outcomes[0].result.diagnostics["constant_columns"] == []
    fuzzy = privclust.run({"steps": [{"use": "fuzzy-microaggregation", "k": 3}]}, frame, seed=1)
    assert fuzzy.data["x"].nunique() > 1
    constant = frame.assign(x=1e15)
    assert privclust.run({"steps": [{"use": "mdav", "k": 3}]}, constant,
                         seed=1).outcomes[0].result.diagnostics["constant_columns"] == ["x"]
