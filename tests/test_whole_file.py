"""Issue 24: the verdict and k-anonymity are about the whole released file.

* DP: a released column computed from the data (values or labels) is covered
  only when a DP entry of the step that released it covers it (``dp_output``);
  the DP clusterers' labels are computed from the raw records, so they void the
  file's DP verdict, naming the column, while their DP statements stay in the
  ledger as what they are.
* k-anonymity: a step's claim is checked on the values that step released; the
  whole file is checked over every released column that depends on the
  original values (the steps' columns, labels, keys, strata), and the verdict
  says first when it is not k-anonymous.
* Changed columns by content: a release equal to its input has no guarantee
  and warns, whatever was spent.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Masked, NothingProtectedWarning, Partition, Registry, hookimpl, param
from privclust.verify import guarantees_dp

IRIS = privclust.datasets.iris()
NUMERIC = IRIS.select_dtypes("number")
BOUNDS = {c: [0, 10] for c in NUMERIC.columns}
LAPLACE = {"use": "laplace", "epsilon": 0.5, "bounds": BOUNDS}


def _run(recipe, frame, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privclust.run(recipe, frame, seed=1, **kw)


# ---------------------------------------------------------------------------
# DP over every released column
# ---------------------------------------------------------------------------

DP_CLUSTERERS = {
    "dp-dpcl": {"epsilon": 0.01, "calibration": "vector", "dc": 0.5, "radius": 0.3, "n_clusters": 3},
    "addpc-rdp": {"epsilon": 0.01, "calibration": "vector", "dc": 0.5},
    "dp-rccfsfdp": {"epsilon": 0.01, "calibration": "vector", "dc": 0.5, "radius": 0.3, "n_clusters": 3},
    "dp-dpc-grid": {"epsilon": 0.5, "bounds": BOUNDS, "dc": 0.5, "n_clusters": 3},
    "dp-density": {"epsilon": 0.8, "bounds": BOUNDS},
    "idp-kmeans": {"epsilon": 0.5, "bounds": BOUNDS, "n_clusters": 3},
}


@pytest.mark.parametrize("name", list(DP_CLUSTERERS))
def test_a_dp_clusterers_labels_void_the_dp_verdict_of_the_file(name):
    """dp-dpcl + laplace on every numeric column read "ε-differentially
    private (ε = 0.51)": the label column is computed from raw distances (the
    paper mechanisms) or is each record's own raw values mapped through a DP
    map (grid, PrivTree, k-means: joint DP only), never a DP output."""
    release = _run({"steps": [{"use": name, **DP_CLUSTERERS[name]}, LAPLACE]}, NUMERIC)
    assert release.verdict.startswith(f"No differential-privacy guarantee: step 0 ({name}, {name}) released the "
                                       "label column 'cluster' without differential privacy (its DP statements cover ")
    assert "not the labels" in release.verdict
    assert not release.dp_guarantee
    assert not guarantees_dp(release.ledger.entries, release.accountant, release.outcomes, release.verification)
    # the DP statements stay in the ledger as what they are, qualified: they do not cover the labels
    own = [e for e in release.ledger.of_kind("dp") if e.step == 0]
    assert own and all("does not cover the label column 'cluster'" in e.statement for e in own)
    noise = [e for e in release.ledger.of_kind("dp") if e.step == 1]
    assert noise and not any("Host note" in e.statement for e in noise)
    # the non-disclosive report reads the same decision
    public = release.report(non_disclosive=True)
    assert public["verdict"] == release.verdict


def test_compare_reads_the_same_decision_for_a_dp_clusterers_labels():
    recipes = [{"name": "labels", "steps": [{"use": "dp-dpcl", **DP_CLUSTERERS["dp-dpcl"]}, LAPLACE]},
               {"name": "noise", "steps": [LAPLACE]}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = privclust.compare(recipes, NUMERIC, seed=1, progress=False, processes=1).set_index("recipe")
    assert not table.loc["labels", "dp"] and pd.isna(table.loc["labels", "dp_epsilon"])
    assert table.loc["noise", "dp"]


def test_labels_computed_from_dp_values_only_are_post_processing_and_keep_the_dp_verdict():
    """A clusterer run after a noise step on every column it reads computes its
    labels from DP releases alone (a step is given only its own columns): the
    file keeps its DP verdict, which names the labels as post-processing; one
    original column among its inputs voids it, naming the label column."""
    columns = list(NUMERIC.columns)
    after = _run({"steps": [LAPLACE, {"use": "dpc", "n_clusters": 3, "columns": columns}]}, NUMERIC)
    assert after.verdict.startswith("ε-differentially private (ε = 0.5, δ = 0)")
    assert ("the label column 'cluster' of step 1 (dpc), computed from those DP values only (post-processing)"
            in after.verdict)
    assert after.dp_guarantee
    # a DP clusterer after the noise: its own statements and the post-processing both hold; the epsilons add up
    # (dp-density states add/remove: 0.8 counts twice under replace-one)
    dp_after = _run({"steps": [LAPLACE, {"use": "dp-density", **DP_CLUSTERERS["dp-density"]}]}, NUMERIC)
    assert dp_after.dp_guarantee and dp_after.verdict.startswith("ε-differentially private (ε = 2.1, δ = 0)")
    assert not any("Host note" in e.statement for e in dp_after.ledger.of_kind("dp"))
    # a microaggregation of the noisy values is post-processing too
    grouped = _run({"steps": [LAPLACE, {"use": "microaggregation", "k": 5, "columns": columns}]}, NUMERIC)
    assert grouped.dp_guarantee and "the values of" in grouped.verdict and "(post-processing)" in grouped.verdict
    # one column the noise did not write: the labels read an original value
    half = {"use": "laplace", "epsilon": 0.5, "bounds": {c: BOUNDS[c] for c in columns[:2]}, "columns": columns[:2]}
    partly = _run({"steps": [half, {"use": "dpc", "n_clusters": 3, "columns": columns}]}, NUMERIC)
    assert partly.verdict.startswith("No differential-privacy guarantee: step 1 (dpc, dpc) released the label "
                                     "column 'cluster' without differential privacy")
    assert not partly.dp_guarantee


def test_a_dp_verdict_lists_the_hosts_check_of_changed_columns_as_not_covered():
    """Which columns changed is decided by comparing released with original
    values, a fact no DP statement covers: the DP verdict says so."""
    release = _run({"steps": [LAPLACE]}, NUMERIC)
    assert release.dp_guarantee
    assert "not covered: " in release.verdict
    assert "the host's check of which columns the release changed" in release.verdict.split("not covered: ", 1)[1]


@attrs.frozen(kw_only=True)
class NoisyLabels:
    """A clusterer whose labels are a DP output: randomised response on a
    public split, charged through the context (``dp_output`` as declared)."""

    name: ClassVar[str] = "noisy-labels"
    dp_output: ClassVar[bool | tuple[str, ...]] = True

    def fit(self, data, context):
        context.spend(epsilon=1.0, mechanism="randomised response", sensitivity=1.0, relation="replace-one",
                      covers="every released label (randomised response on a public threshold)")
        keep = context.rng.random(len(data)) < np.e / (1 + np.e)
        truth = (data.iloc[:, 0].to_numpy() > 5).astype(int)
        labels = np.where(keep, truth, 1 - truth)
        return Partition(labels=labels, centres=None, columns=tuple(data.columns))


@attrs.frozen(kw_only=True)
class ValuesOnlyLabels(NoisyLabels):
    """The same, declaring that its DP entries cover values only (it releases labels)."""

    name: ClassVar[str] = "values-only-labels"
    dp_output: ClassVar[tuple[str, ...]] = ("values",)


@attrs.frozen(kw_only=True)
class LabelsOnlyNoise:
    """A noise masker declaring that its DP entries cover labels only (it releases values)."""

    name: ClassVar[str] = "labels-only-noise"
    dp_output: ClassVar[tuple[str, ...]] = ("labels",)

    def mask(self, data, context):
        context.spend(epsilon=1.0, mechanism="laplace", sensitivity=10.0, relation="replace-one",
                      covers="the released values")
        noisy = data.to_numpy(dtype=float) + context.rng.laplace(0, 10.0, data.shape)
        return Masked(data=pd.DataFrame(noisy, index=data.index, columns=data.columns))


@attrs.frozen(kw_only=True)
class SpendsAndReturnsItsInput:
    """Spends epsilon and returns its input unchanged: a false DP claim."""

    name: ClassVar[str] = "spends-and-returns"
    only: str | None = param(str, default=None)

    def missing_values(self):
        return "missing values released missing"

    def mask(self, data, context):
        context.spend(epsilon=1.0, mechanism="laplace", sensitivity=1.0, relation="replace-one",
                      covers="every released value")
        out = data.copy()
        if self.only is not None:  # noise on one column only, the others returned as received (as floats)
            for c in out.columns:
                out[c] = out[c].astype(float) if c != self.only else out[c] + 1.5
        return Masked(data=out)


class Fakes:
    @hookimpl
    def privclust_register_clusterers(self, register):
        register(NoisyLabels)
        register(ValuesOnlyLabels)

    @hookimpl
    def privclust_register_maskers(self, register):
        register(LabelsOnlyNoise)
        register(SpendsAndReturnsItsInput)


@pytest.fixture
def reg():
    return Registry(plugins=[Fakes()], use_env=False)


def test_the_host_decides_per_released_column_from_what_each_step_declares_its_dp_covers(reg):
    frame = NUMERIC.iloc[:, :2]
    noise = {"use": "laplace", "epsilon": 1.0, "bounds": {c: [0, 10] for c in frame.columns}}
    covered = _run({"steps": [{"use": "noisy-labels"}, noise]}, frame, registry=reg)
    assert covered.verdict.startswith("ε-differentially private (ε = 2, δ = 0)") and covered.dp_guarantee
    assert "every released label" in covered.verdict
    values_only = _run({"steps": [{"use": "values-only-labels"}, noise]}, frame, registry=reg)
    assert values_only.verdict.startswith("No differential-privacy guarantee: step 0 (values-only-labels, "
                                          "values-only-labels) released the label column 'cluster' without")
    labels_only = _run({"steps": [{"use": "labels-only-noise"}]}, frame, registry=reg)
    assert labels_only.verdict.startswith("No differential-privacy guarantee: step 0 (labels-only-noise, "
                                          "labels-only-noise) released the values of sepal_length, sepal_width "
                                          "without differential privacy")


def test_a_dp_output_declaration_is_checked_by_the_conformance_kit():
    assert privclust.components.dp_outputs(NoisyLabels()) == {"values", "labels"}
    assert privclust.components.dp_outputs(ValuesOnlyLabels()) == {"values"}
    assert privclust.components.dp_outputs(SpendsAndReturnsItsInput()) == {"values", "labels"}  # the default
    problem = privclust.CAPABILITIES["dp_output"].problem
    assert problem(("labels",), 0) is None and problem(False, 0) is None
    assert "dp_output must be True, False or a tuple" in problem(("centres",), 0)
    assert "dp_output must be True, False or a tuple" in problem("values", 0)


# ---------------------------------------------------------------------------
# k-anonymity over the whole released file
# ---------------------------------------------------------------------------


def test_a_label_column_that_leaves_records_unique_is_said_first():
    """mdav (k = 2, output = "grp") then microaggregation (k = 5) on iris read
    "Verified by the host: k-anonymity with k = 5", while with the released
    grp column 78 of 150 records are unique; mdav's own k = 2 claim was
    "verified" on the values microaggregation wrote."""
    release = _run({"steps": [{"use": "mdav", "k": 2, "output": "grp"}, {"use": "microaggregation", "k": 5}]}, IRIS)
    whole = release.verification["whole_file"]
    assert whole["columns"] == [*NUMERIC.columns, "grp"] and whole["k"] == 5
    assert whole["unique_records"] == 78 and not whole["holds"]
    assert whole["records_in_small_groups"] == 150
    first, second = release.verdict.split(". ")[1:3]
    assert first == "Released as in the original: class"
    assert second.startswith("The released file is NOT k-anonymous with k = 5: over the columns the steps worked "
                             "on, the label columns and the declared keys and strata (sepal_length, sepal_width, "
                             "petal_length, petal_width, grp), 150 of 150 records are in groups of identical rows "
                             "smaller than 5 (78 records are unique)")
    assert release.verdict.index("NOT k-anonymous") < release.verdict.index("Verified by the host")
    assert "Verified by the host for these columns only: k-anonymity with k = 5" in release.verdict
    # mdav's claim is checked on what mdav released: its columns as it found them (the originals)
    mdav, micro = release.verification["claims"][0], release.verification["claims"][-1]
    assert mdav["component"] == "mdav" and mdav["status"] == "refuted" and mdav["records_in_small_groups"] == 148
    assert "mdav claims k-anonymity with k = 2, which does NOT hold on the values step 0 released" in release.verdict
    assert micro["component"] == "microaggregation" and micro["status"] == "verified"
    check = next(e for e in release.ledger if e.kind == "verified" and e.statement.startswith("Host check of the "
                                                                                               "release"))
    assert "78 records are unique" in check.statement and "NOT k-anonymous with k = 5" in check.statement


def test_declared_keys_count_in_the_whole_file():
    rng = np.random.default_rng(0)
    frame = NUMERIC.assign(region=rng.choice(list("abcdefgh"), len(NUMERIC)))
    plain = _run({"steps": [{"use": "microaggregation", "k": 3}]}, frame)
    assert plain.verification["whole_file"]["holds"] and "NOT k-anonymous" not in plain.verdict
    keyed = _run({"roles": {"keys": "region"}, "steps": [{"use": "microaggregation", "k": 3}]}, frame)
    whole = keyed.verification["whole_file"]
    assert "region" in whole["columns"] and not whole["holds"] and whole["unique_records"] > 0
    assert "The released file is NOT k-anonymous with k = 3" in keyed.verdict
    assert keyed.verification["claims"][0]["status"] == "verified"  # its own columns: still true


def test_a_probabilistic_k_claim_is_preceded_by_the_files_k_anonymity_when_keys_leave_records_unique():
    """Fuzzy microaggregation claims probabilistic k-anonymity (k = 5) of its
    columns; with declared keys released unchanged the file leaves records
    unique, and the verdict says so before the claim (notebook 06's fuzzy
    release named only the claim)."""
    rng = np.random.default_rng(0)
    frame = NUMERIC.assign(region=rng.choice(list("abcdefgh"), len(NUMERIC)))
    recipe = {"roles": {"keys": "region"}, "steps": [{"use": "fuzzy-microaggregation", "k": 5}]}
    release = _run(recipe, frame)
    whole = release.verification["whole_file"]
    assert whole["k"] == 5 and not whole["holds"] and "region" in whole["columns"]
    said = release.verdict.index("The released file is NOT k-anonymous with k = 5")
    assert said < release.verdict.index("claims probabilistic k-anonymity (k = 5)")


def test_a_whole_file_that_holds_adds_no_warning():
    release = _run({"steps": [{"use": "microaggregation", "k": 4}]}, NUMERIC)
    whole = release.verification["whole_file"]
    assert whole["holds"] and whole["min_group_size"] >= 4 and whole["k"] == 4
    assert "NOT k-anonymous" not in release.verdict
    assert "Verified by the host: k-anonymity with k = 4" in release.verdict
    public = release.report(non_disclosive=True)
    assert public["verification"]["whole_file"]["holds"] is True


# ---------------------------------------------------------------------------
# Changed columns by content
# ---------------------------------------------------------------------------


def test_a_step_that_spends_and_returns_its_input_gets_no_guarantee_and_warns(reg):
    frame = pd.DataFrame({"a": [1, 2, 3, 4], "b": [0.5, np.nan, 2.5, 3.5]})
    with pytest.warns(NothingProtectedWarning, match="CHANGES NO COLUMN"):
        release = privclust.run({"steps": [{"use": "spends-and-returns"}]}, frame, registry=reg, seed=1)
    assert release.verdict.startswith("No differential-privacy guarantee: the release changes no column")
    assert release.verification["changed_columns"] == [] and not release.dp_guarantee
    assert release.report(non_disclosive=True)["verdict"] == release.verdict


def test_changed_columns_lists_only_columns_whose_values_differ(reg):
    """a is changed; b comes back as floats equal to its integers (and NaN as
    NaN): dtype-insensitive, it is released as in the original."""
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [1, 2, 3, 4], "c": [0.5, np.nan, 2.5, 3.5]})
    release = _run({"steps": [{"use": "spends-and-returns", "only": "a"}]}, frame, registry=reg)
    assert release.verification["changed_columns"] == ["a"]
    assert release.verification["unchanged_columns"] == ["b", "c"]
    assert "the columns released as in the original (b, c)" in release.verdict


def test_a_claim_whose_values_a_later_step_changed_names_the_values_it_was_checked_on():
    """microaggregation k = 3, then k = 6 over the same columns: the first
    claim is checked on its own step's values (groups of 3), and the verdict
    does not give that figure as the released file's (which has groups of 6)."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"a": rng.uniform(0, 500, 30), "b": rng.uniform(0, 500, 30)})
    release = _run({"steps": [{"use": "microaggregation", "k": 3}, {"use": "microaggregation", "k": 6}]}, data)
    first = release.verification["claims"][0]
    assert first["status"] == "verified" and first["min_group_size"] == 3 and first["released_min_group_size"] == 6
    assert ("Verified by the host on the values step 0 released: k-anonymity with k = 3 of a, b (every combination "
            "is shared by at least 3 records)") in release.verdict
    assert "every released combination is shared by at least 6 records" in release.verdict
    assert release.verification["whole_file"]["holds"] and "NOT k-anonymous" not in release.verdict


def test_a_k_anonymity_the_host_cannot_decide_is_neither_verified_nor_refuted(monkeypatch):
    """Above its limit of missingness patterns the host does not compute
    sdcMicro's matching count; it said "does NOT hold" (and the verdict "NOT
    k-anonymous") whether or not the suppressions made the file k-anonymous
    under that convention. It now says the question is undecided."""
    from privclust import kanonymity

    monkeypatch.setattr(kanonymity, "_MAX_PATTERNS", 2)  # as if the file held more than 64 patterns
    rng = np.random.default_rng(0)
    keys = ["k0", "k1", "k2", "k3"]
    frame = pd.DataFrame({c: rng.choice(list("abc"), 40) for c in keys}).assign(x=rng.normal(size=40))
    release = _run({"roles": {"keys": keys}, "steps": [{"use": "local-suppression", "k": 3, "columns": keys}]},
                   frame)
    whole = release.verification["whole_file"]
    assert whole["holds"] is None and whole["records_in_small_groups"] > 0  # identical rows alone: short of k
    assert "Whether the released file is k-anonymous with k = 3 is undecided" in release.verdict
    assert "NOT k-anonymous" not in release.verdict
    claim = release.verification["claims"][0]
    assert claim["status"] == "claimed"
    entry = next(e for e in release.ledger.of_kind("guarantee") if e.step == 0)
    assert "not verified" in entry.statement and "can neither verify nor refute" in entry.statement
    assert "does NOT hold" not in entry.statement
    # without the limit the host decides, and the suppressions hold under sdcMicro's convention
    monkeypatch.setattr(kanonymity, "_MAX_PATTERNS", 64)
    decided = _run({"roles": {"keys": keys}, "steps": [{"use": "local-suppression", "k": 3, "columns": keys}]},
                   frame)
    assert decided.verification["whole_file"]["holds"] is True
    assert decided.verification["claims"][0]["status"] == "verified"


def test_a_stratum_s_claim_says_its_missing_count_is_the_stratum_s():
    """A stratified local suppression makes one claim per stratum ("set 2 key
    values to missing in 20 records"); the host's check appended to each is
    made on that stratum's released records (red-team rt10 F5), and its count
    of missing values is the stratum's and says so (each stratum's claim
    once quoted the file's total as if it were its own)."""
    rng = np.random.default_rng(1)
    keys = ["k0", "k1", "k2"]
    frame = pd.DataFrame({c: rng.choice(list("abc"), 60) for c in keys}).assign(part=np.repeat(["x", "y"], 30))
    release = _run({"roles": {"keys": keys, "strata": "part"},
                    "steps": [{"use": "local-suppression", "k": 3, "columns": keys}]}, frame)
    total = int(release.data[keys].isna().to_numpy().sum())
    claims = [e for e in release.ledger.of_kind("guarantee") if e.step == 0]
    assert len(claims) == 2 and total > 0
    counted = 0
    for entry in claims:
        stratum = entry.partition[1]
        holes = int(release.data.loc[release.data["part"] == stratum, keys].isna().to_numpy().sum())
        counted += holes
        assert entry.statement.startswith(f"Stratum part = {stratum!r}: ")
        assert f"{holes} values of k0, k1, k2 are missing in the stratum's released records" in entry.statement
    assert counted == total
