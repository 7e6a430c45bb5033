"""Tests of the clustering evaluators: ari, pair-f, nmi, n-clusters."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import fowlkes_mallows_score, normalized_mutual_info_score

import privclust
import privclust.testing as pt
from privclust import DataError, EvaluationInputs, ParameterError
from privclust_plugins.clustering_evaluators import (
    AdjustedRandIndex,
    NClusters,
    NormalizedMutualInformation,
    PairFMeasure,
    pair_counts,
)


def inputs(truth, labels, *, truth_name="class", labels_name="cluster", where="labels") -> EvaluationInputs:
    """Evaluation inputs with the truth in the original frame and the labels
    in the frame named by ``where``."""
    truth = pd.Series(truth, name=truth_name)
    original = pd.DataFrame({"x": np.arange(len(truth), dtype=float), truth_name: truth})
    protected = original.copy()
    label_frame = pd.DataFrame(index=original.index)
    if where == "labels":
        label_frame[labels_name] = np.asarray(labels)
        protected[labels_name] = np.asarray(labels)
    elif where == "original":
        original[labels_name] = np.asarray(labels)
        protected[labels_name] = np.asarray(labels)
    return EvaluationInputs(original=original, protected=protected, columns=("x",), labels=label_frame)


def ari_from_definition(a, b):
    """The adjusted Rand index from its definition (Hubert and Arabie 1985),
    by enumerating the pairs of records: independent of scikit-learn, which
    the evaluator calls. n11 pairs are together in both partitions, n00 in
    neither, n10 and n01 in one only."""
    n11 = n10 = n01 = n00 = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        together_a, together_b = a[i] == a[j], b[i] == b[j]
        n11 += together_a and together_b
        n10 += together_a and not together_b
        n01 += together_b and not together_a
        n00 += not together_a and not together_b
    return 2 * (n00 * n11 - n01 * n10) / ((n00 + n01) * (n01 + n11) + (n00 + n10) * (n10 + n11))


def test_the_ari_from_its_definition_on_a_worked_example():
    # Two partitions of 6 records (15 pairs): together in both (0,1), (4,5): n11 = 2; in a only: n10 = 4;
    # in b only (2,3): n01 = 1; in neither: n00 = 8. ARI = 2 (8*2 - 1*4) / ((8+1)(1+2) + (8+4)(4+2)) = 24/99.
    a, b = [0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]
    assert ari_from_definition(a, b) == pytest.approx(24 / 99)
    assert AdjustedRandIndex().evaluate(inputs(a, b))["ari"] == pytest.approx(ari_from_definition(a, b))
    assert ari_from_definition(a, a) == 1.0


def brute_pairs(a, b):
    na = nb = nc = nd = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        same_a, same_b = a[i] == a[j], b[i] == b[j]
        na += same_a and same_b
        nb += same_a and not same_b
        nc += same_b and not same_a
        nd += not same_a and not same_b
    return na, nb, nc, nd


partitions = st.integers(3, 40).flatmap(
    lambda n: st.tuples(st.lists(st.integers(0, 4), min_size=n, max_size=n),
                        st.lists(st.integers(0, 5), min_size=n, max_size=n)))


# -- the mathematics ---------------------------------------------------------------------


@settings(deadline=None, max_examples=60)
@given(partitions)
def test_pair_counts_match_brute_force(pair):
    a, b = (np.asarray(x) for x in pair)
    counts = pair_counts(a, b)
    assert counts == brute_pairs(a, b)
    n = len(a)
    assert sum(counts) == n * (n - 1) // 2


@settings(deadline=None, max_examples=60)
@given(partitions)
def test_pair_f_is_formulas_11_to_14(pair):
    a, b = (np.asarray(x) for x in pair)
    na, nb, nc, _ = brute_pairs(a, b)
    out = PairFMeasure().evaluate(inputs(a, b))
    if na + nc:
        assert out["precision"] == pytest.approx(na / (na + nc))
    else:
        assert math.isnan(out["precision"])
    if na + nb:
        assert out["recall"] == pytest.approx(na / (na + nb))
    else:
        assert math.isnan(out["recall"])
    expected = 2 * na / (2 * na + nb + nc) if (2 * na + nb + nc) else 1.0
    assert out["f"] == pytest.approx(expected)
    # (14) is symmetric in the two partitions; precision and recall swap.
    swapped = PairFMeasure().evaluate(inputs(b, a))
    assert swapped["f"] == pytest.approx(out["f"])
    assert swapped["precision"] == pytest.approx(out["recall"], nan_ok=True)


@settings(deadline=None, max_examples=40)
@given(partitions, st.floats(0.2, 5.0))
def test_f_beta_matches_formula_13(pair, beta):
    a, b = (np.asarray(x) for x in pair)
    out = PairFMeasure(beta=beta).evaluate(inputs(a, b))
    p, r = out["precision"], out["recall"]
    if not (math.isnan(p) or math.isnan(r)) and (p or r):
        assert out["f"] == pytest.approx((beta**2 + 1) * p * r / (beta**2 * p + r))


def _ari_by_pairs(a, b):
    """Hubert & Arabie's ARI from the pair counts of the contingency table."""
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(table, (ia, ib), 1)
    pairs = lambda x: x * (x - 1) / 2  # noqa: E731
    index = pairs(table).sum()
    rows, cols = pairs(table.sum(1)).sum(), pairs(table.sum(0)).sum()
    expected = rows * cols / pairs(len(a))
    top = (rows + cols) / 2
    return 1.0 if top == expected else (index - expected) / (top - expected)


def _nmi_by_entropies(a, b, average):
    """Mutual information over the mean (arithmetic or geometric) of the entropies."""
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    if ia.max() == ib.max() == 0:
        return 1.0
    joint = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(joint, (ia, ib), 1)
    joint /= len(a)
    pa, pb = joint.sum(1), joint.sum(0)
    nz = joint > 0
    mi = float(np.sum(joint[nz] * np.log(joint[nz] / np.outer(pa, pb)[nz])))
    ha, hb = -np.sum(pa * np.log(pa)), -np.sum(pb * np.log(pb))
    norm = (ha + hb) / 2 if average == "arithmetic" else np.sqrt(ha * hb)
    return 0.0 if mi <= 1e-15 else mi / norm


def test_ari_and_nmi_by_hand():
    truth = [0, 0, 0, 1, 1, 1]
    found = [0, 0, 1, 1, 2, 2]
    # pairs: index 2, rows 6, columns 3, expected 6*3/15 = 1.2, max 4.5 -> (2 - 1.2) / (4.5 - 1.2)
    assert AdjustedRandIndex().evaluate(inputs(np.array(truth), np.array(found)))["ari"] == pytest.approx(0.8 / 3.3)
    # H(truth) = ln 2, H(found) = ln 3, H(found | truth) = ln 3 - (2/3) ln 2, so MI = (2/3) ln 2
    mi = 2 / 3 * math.log(2)
    out = NormalizedMutualInformation().evaluate(inputs(np.array(truth), np.array(found)))["nmi"]
    assert out == pytest.approx(mi / ((math.log(2) + math.log(3)) / 2))


@settings(deadline=None, max_examples=40)
@given(partitions)
def test_ari_and_nmi_follow_their_definitions(pair):
    a, b = (np.asarray(x) for x in pair)
    assert AdjustedRandIndex().evaluate(inputs(a, b))["ari"] == pytest.approx(_ari_by_pairs(a, b), abs=1e-12)
    assert NormalizedMutualInformation().evaluate(inputs(a, b))["nmi"] == pytest.approx(
        _nmi_by_entropies(a, b, "arithmetic"), abs=1e-9)
    geo = NormalizedMutualInformation(average_method="geometric").evaluate(inputs(a, b))["nmi"]
    assert geo == pytest.approx(_nmi_by_entropies(a, b, "geometric"), abs=1e-9)


def test_pair_f_is_not_fowlkes_mallows():
    a = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    b = np.array([0, 0, 1, 1, 1, 1, 2, 2])
    out = PairFMeasure().evaluate(inputs(a, b))
    # Fowlkes-Mallows is the geometric mean sqrt(P R), F the harmonic one.
    assert fowlkes_mallows_score(a, b) == pytest.approx(math.sqrt(out["precision"] * out["recall"]))
    assert out["f"] < fowlkes_mallows_score(a, b)


def test_identical_partitions_score_one_whatever_the_label_names():
    truth = np.repeat([0, 1, 2], 10)
    labels = np.repeat([7, 3, 5], 10)
    i = inputs(truth, labels)
    assert AdjustedRandIndex().evaluate(i)["ari"] == pytest.approx(1.0)
    assert NormalizedMutualInformation().evaluate(i)["nmi"] == pytest.approx(1.0)
    f = PairFMeasure().evaluate(i)
    assert f == pytest.approx({"f": 1.0, "precision": 1.0, "recall": 1.0})


def test_one_cluster_for_everything_has_full_recall_and_low_precision():
    truth = np.repeat([0, 1], 5)
    out = PairFMeasure().evaluate(inputs(truth, np.zeros(10, dtype=int)))
    # Na = 2 * C(5, 2) = 20 of the 45 pairs; Nc = 25, Nb = 0.
    assert out["recall"] == 1.0
    assert out["precision"] == pytest.approx(20 / 45)
    assert out["f"] == pytest.approx(40 / 65)


def test_pair_counts_are_linear_not_quadratic():
    # 2e6 records: 2e12 pairs could never be enumerated; the counts come
    # from the contingency table.
    sizes = np.array([500_000, 700_000, 800_000])
    truth = np.repeat(np.arange(3), sizes)
    labels = truth.copy()
    labels[:100_000] = 1  # 100k records of class 0 put in cluster 1
    na, nb, nc, nd = pair_counts(truth, labels)
    c2 = lambda x: x * (x - 1) // 2  # noqa: E731
    assert na == c2(400_000) + c2(100_000) + c2(700_000) + c2(800_000)
    assert nb == 400_000 * 100_000
    assert nc == 100_000 * 700_000
    assert na + nb + nc + nd == c2(2_000_000)


# -- columns and dtypes ------------------------------------------------------------------------


def test_categorical_and_text_truth():
    labels = np.repeat([0, 1, 2], 4)
    cat = pd.Categorical(np.repeat(["setosa", "versicolor", "virginica"], 4))
    text = np.repeat(["a", "b", "c"], 4).astype(object)
    for truth in (cat, text):
        assert AdjustedRandIndex().evaluate(inputs(truth, labels))["ari"] == pytest.approx(1.0)


def test_labels_found_in_labels_then_protected_then_original():
    truth = np.repeat([0, 1], 6)
    good = truth.copy()
    i = inputs(truth, good)
    # A column of the same name in the original frame with other values must not be used.
    i.original["cluster"] = np.arange(12)
    assert AdjustedRandIndex().evaluate(i)["ari"] == pytest.approx(1.0)
    # Comparing two columns of the original frame (e.g. two stored clusterings).
    j = inputs(truth, good, where="original", labels_name="previous")
    assert AdjustedRandIndex(labels="previous").evaluate(j)["ari"] == pytest.approx(1.0)


def test_truth_may_be_another_label_column():
    truth = np.repeat([0, 1, 2], 5)
    i = inputs(truth, truth)
    i.labels["cluster-2"] = np.roll(truth, 1)
    out = AdjustedRandIndex(truth="cluster", labels="cluster-2").evaluate(i)
    assert out["ari"] == pytest.approx(ari_from_definition(truth, np.roll(truth, 1)))


# -- unassigned records (label -1) ----------------------------------------------------------------


def test_unassigned_records_three_ways():
    truth = np.array([0, 0, 0, 1, 1, 1])
    labels = np.array([0, 0, -1, 1, 1, -1])
    i = inputs(truth, labels)
    singles = PairFMeasure(unassigned="singletons").evaluate(i)
    # Singletons: Na = 1 + 1, Nb = 4 (the two -1 records lost their partners), Nc = 0.
    assert singles == pytest.approx({"f": 4 / 8, "precision": 1.0, "recall": 2 / 6})
    shared = PairFMeasure(unassigned="cluster").evaluate(i)
    # One shared cluster {2, 5}: Na = 2, Nb = 4, Nc = 1.
    assert shared == pytest.approx({"f": 4 / 9, "precision": 2 / 3, "recall": 2 / 6})
    excluded = PairFMeasure(unassigned="exclude").evaluate(i)
    assert excluded == pytest.approx({"f": 1.0, "precision": 1.0, "recall": 1.0})
    assert AdjustedRandIndex(unassigned="exclude").evaluate(i)["ari"] == pytest.approx(1.0)
    assert AdjustedRandIndex(unassigned="cluster").evaluate(i)["ari"] == pytest.approx(
        ari_from_definition(truth, labels))
    assert AdjustedRandIndex().evaluate(i)["ari"] == pytest.approx(
        ari_from_definition(truth, [0, 0, 10, 1, 1, 11]))


def test_everything_unassigned_and_excluded_gives_nan():
    i = inputs([0, 0, 1, 1], [-1, -1, -1, -1])
    assert math.isnan(AdjustedRandIndex(unassigned="exclude").evaluate(i)["ari"])
    assert all(math.isnan(v) for v in PairFMeasure(unassigned="exclude").evaluate(i).values())


def test_n_clusters():
    out = NClusters().evaluate(inputs(np.repeat([0, 1, 2], 4), [0, 0, 0, 5, 5, 5, 5, -1, -1, 9, 9, 9]))
    assert out == {"n_clusters": 3.0, "n_classes": 3.0, "n_unassigned": 2.0}


# -- bad input -----------------------------------------------------------------------------------


def test_unknown_columns_suggest_close_matches():
    i = inputs([0, 0, 1, 1], [0, 0, 1, 1])
    with pytest.raises(DataError, match=r"'truth' column 'clas'.*did you mean 'class'"):
        AdjustedRandIndex(truth="clas").evaluate(i)
    with pytest.raises(DataError, match=r"'labels' column 'clusters'.*did you mean 'cluster'"):
        PairFMeasure(labels="clusters").evaluate(i)


def test_labels_of_another_length():
    i = inputs([0, 0, 1, 1, 2], [0, 0, 1, 1, 2])
    short = EvaluationInputs(original=i.original, protected=i.protected, columns=("x",),
                             labels=pd.DataFrame({"cluster": [0, 1, 1]}))
    with pytest.raises(DataError, match="has 3 values but the truth column 'class' has 5"):
        NormalizedMutualInformation().evaluate(short)


def test_missing_values_and_too_few_records():
    with pytest.raises(DataError, match="truth column 'class' has 1 missing"):
        AdjustedRandIndex().evaluate(inputs([0.0, np.nan, 1.0, 1.0], [0, 0, 1, 1]))
    with pytest.raises(DataError, match="labels column 'cluster' has 1 missing"):
        PairFMeasure().evaluate(inputs([0, 0, 1, 1], [0.0, np.nan, 1.0, 1.0]))
    with pytest.raises(DataError, match="too few"):
        NClusters().evaluate(inputs([0, 1], [0, 1]))


def test_bad_parameters():
    with pytest.raises(ParameterError, match="'unassigned'"):
        AdjustedRandIndex(unassigned="drop")
    with pytest.raises(ParameterError, match="'beta'"):
        PairFMeasure(beta=0.0)
    with pytest.raises(ParameterError, match="'truth'"):
        NClusters(truth=3)


# -- in a recipe -----------------------------------------------------------------------------------


def test_registered_and_used_in_a_recipe(registry, frame):
    names = set(registry.tables["evaluators"])
    assert {"ari", "pair-f", "nmi", "n-clusters"} <= names
    data = frame.copy()
    truth = np.argmin(((frame.to_numpy()[:, None, :2] - np.array([[0, 0], [5, 5], [0, 6]])[None]) ** 2).sum(-1), 1)
    data["class"] = pd.Categorical(truth)
    recipe = {
        "steps": [{"use": "idp-kmeans", "n_clusters": 3, "epsilon": 1000.0, "bounds": {c: [-3, 9] for c in "abc"},
                   "columns": ["a", "b", "c"]}],
        "evaluate": [{"use": "ari"}, {"use": "pair-f"}, {"use": "nmi"}, {"use": "n-clusters"}],
    }
    release = privclust.run(recipe, data, seed=3, registry=registry)
    assert release.evaluation("ari", "ari") > 0.95
    assert release.evaluation("f", "pair-f") > 0.95
    assert release.evaluation("n_classes", "n-clusters") == 3
    assert set(release.evaluations["metric"]) >= {"ari", "f", "precision", "recall", "nmi", "n_clusters"}


def test_misspelt_evaluator_parameter_is_a_recipe_error(registry, frame):
    with pytest.raises(privclust.RecipeError, match="did you mean 'truth'"):
        privclust.compile({"steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}],
                           "evaluate": [{"use": "ari", "truht": "class"}]}, registry)


@pytest.mark.parametrize("component", [AdjustedRandIndex(), PairFMeasure(beta=2.0), NormalizedMutualInformation(),
                                       NClusters(), AdjustedRandIndex(truth="klass", labels="lab",
                                                                      unassigned="exclude")],
                         ids=lambda c: type(c).name)
def test_conformance(component, registry):
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.normal(size=30), "class": rng.integers(0, 3, 30), "cluster": rng.integers(-1, 3, 30)})
    data["klass"], data["lab"] = data["class"], data["cluster"]
    pt.check_component(component, data, registry=registry)


def test_nmi_does_not_reward_leaving_every_record_unassigned():
    # with unassigned = "singletons" (the default then) a clusterer that labelled every record -1 scored
    # NMI 0.73: a cluster of one record is pure, so mutual information counts it as perfectly classified
    nmi = NormalizedMutualInformation()
    assert nmi.unassigned == "cluster"
    assert nmi.evaluate(inputs([0, 0, 1], [-1, -1, -1]))["nmi"] == 0.0
    assert nmi.evaluate(inputs([0, 0, 1, 1], [0, 0, 1, -1]))["nmi"] == pytest.approx(
        normalized_mutual_info_score([0, 0, 1, 1], [0, 0, 1, -1]))
    with pytest.raises(ParameterError, match="'unassigned'"):
        NormalizedMutualInformation(unassigned="singletons")
