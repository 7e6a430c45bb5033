"""privclust.sklearn: scikit-learn estimators for registered maskers and clusterers."""

from __future__ import annotations

import pickle
import warnings
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import privclust
from privclust import Masked, ParameterError, hookimpl, param
from privclust import sklearn as pcs

#: Checks that cannot pass, with the reason (documented in docs/sklearn.md).
_ONE_SAMPLE = ("privclust refuses too few records naming the records and the step's minimum "
               "('k = 3 needs at least 2k = 6 records; the data have N = 1'), not scikit-learn's 'n_samples = 1'")
_EXPECTED = {
    "MdavClusterer": {
        "check_fit2d_1sample": _ONE_SAMPLE,
        "check_clustering": "MDAV forms groups of at least k records (k-anonymity), not n_clusters clusters",
    },
    "MicroaggregationMasker": {"check_fit2d_1sample": _ONE_SAMPLE},
    "FuzzyMicroaggregationMasker": {"check_fit2d_1sample": _ONE_SAMPLE},
    "FcmClusterer": {"check_fit2d_1sample": _ONE_SAMPLE},
}


def _estimators():
    return [
        pcs.masker("microaggregation", clusterer={"use": "mdav", "k": 3}, random_state=0),
        pcs.masker("fuzzy-microaggregation", random_state=0),  # k = 3 by default; sklearn sets n_clusters
        pcs.clusterer("mdav", k=3, random_state=0),
        pcs.clusterer("fcm", n_clusters=3, random_state=0),
    ]


def _expected(estimator):
    return _EXPECTED.get(type(estimator).__name__, {})


@parametrize_with_checks(_estimators(), expected_failed_checks=_expected)
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.fixture
def X():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [6.0, 6.0], [0.0, 7.0]])
    return centres[rng.integers(0, 3, 90)] + rng.normal(0, 0.5, (90, 2))


def test_masker_releases_k_anonymous_groups_and_keeps_the_release(X):
    mask = pcs.masker("microaggregation", clusterer={"use": "mdav", "k": 4}, random_state=0)
    out = mask.fit_transform(X)
    assert out.shape == X.shape
    _, counts = np.unique(out, axis=0, return_counts=True)
    assert counts.min() >= 4
    assert isinstance(mask.release_, privclust.Release)
    assert mask.ledger_ is mask.release_.ledger
    # the seed itself never: the verdict's seeded sentence (the rows' order is the seed's) is the only mention
    text = mask.release_.to_json().lower().replace(privclust.verify.seeded_draws().lower(), "")
    assert privclust.verify.seeded_draws() in mask.release_.verdict and "seed" not in text.replace("seeded", "")


def test_same_random_state_same_release_and_clone_keeps_parameters(X):
    mask = pcs.masker("fuzzy-microaggregation", k=3, m2=1.2, random_state=7)
    a = mask.fit_transform(X)
    twin = clone(mask)
    assert twin.get_params() == mask.get_params()
    assert not hasattr(twin, "release_")
    np.testing.assert_array_equal(twin.fit_transform(X), a)
    np.testing.assert_array_equal(mask.transform(X), a)  # transform protects the data it is given, same seed


def test_set_params_changes_the_component(X):
    mask = pcs.masker("microaggregation", clusterer={"use": "mdav", "k": 3}, random_state=0)
    mask.set_params(clusterer={"use": "mdav", "k": 10})
    _, counts = np.unique(mask.fit_transform(X), axis=0, return_counts=True)
    assert counts.min() >= 10


def test_pandas_output_keeps_columns_and_index(X):
    frame = pd.DataFrame(X, columns=["income", "spend"], index=np.arange(100, 190))
    mask = pcs.masker("microaggregation", random_state=0).set_output(transform="pandas")
    out = mask.fit_transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["income", "spend"]
    assert out.index.equals(frame.index)
    assert not out.equals(frame)
    assert frame.equals(pd.DataFrame(X, columns=["income", "spend"], index=np.arange(100, 190)))  # input untouched


def test_clusterer_gives_labels_centres_and_fit_predict(X):
    fcm = pcs.clusterer("fcm", n_clusters=3, random_state=0)
    labels = fcm.fit_predict(X)
    assert labels.shape == (90,)
    assert set(np.unique(labels)) == {0, 1, 2}
    assert fcm.cluster_centers_.shape == (3, 2)
    assert fcm.n_iter_ >= 1
    # each centre sits near one of the three true centres
    truth = np.array([[0.0, 0.0], [6.0, 6.0], [0.0, 7.0]])
    nearest = np.min(np.linalg.norm(fcm.cluster_centers_[:, None, :] - truth[None], axis=2), axis=1)
    assert nearest.max() < 1.0


def test_a_dp_clusterer_spends_within_its_budget_and_refuses_more(X):
    bounds = {"x0": [-3.0, 10.0], "x1": [-3.0, 10.0]}
    # add/remove: the labels show n, so the cap counts the epsilon twice (rt17 F1)
    km = pcs.clusterer("idp-kmeans", n_clusters=3, epsilon=1.0, bounds=bounds, budget=2.0, random_state=0)
    km.fit(X)
    assert 0 < km.release_.spent[0] <= 1.0
    assert set(np.unique(km.labels_)) <= {0, 1, 2}
    with pytest.raises(privclust.RecipeError, match="budget"):
        clone(km).set_params(budget=0.5).fit(X)
    with pytest.raises(ParameterError, match="budget"):
        clone(km).set_params(budget=-1.0).fit(X)


def test_pipeline_and_parameter_search():
    iris = load_iris()
    pipe = Pipeline([
        ("mask", pcs.masker("microaggregation", clusterer={"use": "mdav", "k": 3}, random_state=0)),
        ("clf", LogisticRegression(max_iter=500)),
    ])
    search = GridSearchCV(pipe, {"mask__clusterer": [{"use": "mdav", "k": 3}, {"use": "mdav", "k": 25}]}, cv=3)
    search.fit(iris.data, iris.target)
    assert search.best_params_["mask__clusterer"]["k"] == 3  # less aggregation, better accuracy
    assert search.cv_results_["mean_test_score"][0] > search.cv_results_["mean_test_score"][1]


def test_pickled_estimator_leaves_the_original_data_behind(X):
    mask = pcs.masker("microaggregation", random_state=0).fit(X)
    copy = pickle.loads(pickle.dumps(mask))
    assert type(copy).__name__ == "MicroaggregationMasker"
    assert not hasattr(copy, "release_")
    assert copy.get_params() == mask.get_params()
    np.testing.assert_array_equal(copy.transform(X), mask.transform(X))


def test_a_third_party_masker_gets_an_estimator(X):
    @attrs.frozen(kw_only=True)
    class Shift:
        name: ClassVar[str] = "shift-by"
        by: float = param(float, default=1.0, doc="the shift")

        def mask(self, data, context):
            return Masked(data=data + self.by)

    class Plugin:
        @hookimpl
        def privclust_register_maskers(self, register):
            register(Shift)

    privclust.register(Plugin())
    est = pcs.masker("shift-by", by=2.5)
    assert est.get_params() == {"by": 2.5, "budget": None, "random_state": None}
    np.testing.assert_allclose(est.fit_transform(X), X + 2.5)


def test_unknown_component_and_unknown_parameter():
    with pytest.raises(ParameterError, match=r"clusterers: use privclust.sklearn.clusterer\('mdav'"):
        pcs.masker("mdav")  # a clusterer, not a masker
    with pytest.raises(privclust.UnknownComponentError, match="did you mean 'mdav'"):
        pcs.clusterer("mdv")
    with pytest.raises(TypeError, match="unexpected parameter"):
        pcs.clusterer("mdav", kk=3)
    with pytest.raises(privclust.RecipeError, match="k"):
        pcs.clusterer("mdav", k=1).fit(np.zeros((10, 2)))


def test_the_docs_page_runs_as_written(tmp_path):
    from _docblocks import run_page

    assert run_page("sklearn.md", tmp_path) >= 3


def test_a_frame_with_non_string_column_names_is_masked(X):
    # scikit-learn records no feature_names_in_ for integer names: fit_transform looked up x0, x1 (KeyError)
    frame = pd.DataFrame(X, columns=[0, 1])
    mask = pcs.masker("microaggregation", clusterer={"use": "mdav", "k": 4}, random_state=0)
    out = mask.fit_transform(frame)
    assert out.shape == X.shape
    assert list(mask.get_feature_names_out()) == ["0", "1"]
    np.testing.assert_array_equal(out, mask.release_.data.loc[:, ["0", "1"]].to_numpy())


@pytest.mark.parametrize("bad, word", [(np.nan, "1 NaN"), (np.inf, "1 inf"), (-np.inf, "1 inf")])
def test_nan_or_inf_input_is_refused_naming_the_column(X, bad, word):
    frame = pd.DataFrame(X, columns=["income", "spend"])
    frame.iloc[5, 1] = bad
    before = frame.copy()
    mask = pcs.masker("microaggregation", random_state=0)
    with pytest.raises(privclust.DataError, match=rf"spend \({word}\)") as err:
        mask.fit(frame)
    assert "income" not in str(err.value)
    assert isinstance(err.value, ValueError)  # scikit-learn's contract
    assert frame.equals(before)
    mask.fit(X)
    with pytest.raises(privclust.DataError, match=rf"x1 \({word}\)"):
        mask.transform(np.where(np.arange(90)[:, None] == 5, [[0.0, bad]], X))


def test_a_second_seeded_run_with_the_same_seed_is_warned_about(X):
    bounds = {"x0": [-3.0, 10.0], "x1": [-3.0, 10.0]}
    km = pcs.clusterer("idp-kmeans", n_clusters=3, epsilon=1.0, bounds=bounds, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", privclust.PrivclustWarning)
        warnings.simplefilter("ignore", privclust.NothingProtectedWarning)
        km.fit(X)  # the first run with this seed: nothing to say
    assert "The run was seeded" in km.release_.verdict
    with pytest.warns(privclust.PrivclustWarning, match="same stream as an earlier run"):
        km.fit(X[1:])  # neighbouring data, the same noise
    with warnings.catch_warnings():
        warnings.simplefilter("error", privclust.PrivclustWarning)
        warnings.simplefilter("ignore", privclust.NothingProtectedWarning)
        km.set_params(random_state=1).fit(X)  # another seed
        km.set_params(random_state=None).fit(X)
        km.fit(X)  # no seed: fresh randomness each time


def test_a_seed_used_again_after_others_or_in_a_copy_is_warned_about(X):
    """A red-team audit: the estimator remembered only the last seed, and a copy or a pickle forgot even that, so
    seeds 0, 1, 0, or a deepcopy refitted with seed 0, drew the same noise twice without a word."""
    import copy

    bounds = {"x0": [-3.0, 10.0], "x1": [-3.0, 10.0]}
    km = pcs.clusterer("idp-kmeans", n_clusters=3, epsilon=1.0, bounds=bounds, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", privclust.PrivclustWarning)
        warnings.simplefilter("ignore", privclust.NothingProtectedWarning)
        km.fit(X)
        km.set_params(random_state=1).fit(X)
    with pytest.warns(privclust.PrivclustWarning, match="a fixed seed it used before"):
        km.set_params(random_state=0).fit(X[1:])
    for twin in (copy.deepcopy(km), pickle.loads(pickle.dumps(km))):
        with pytest.warns(privclust.PrivclustWarning, match="a fixed seed it used before"):
            twin.fit(X[1:])
    fresh = copy.deepcopy(km.set_params(random_state=7))  # a seed it never drew from: the copy has nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error", privclust.PrivclustWarning)
        warnings.simplefilter("ignore", privclust.NothingProtectedWarning)
        fresh.fit(X)
    blob = pickle.dumps(km.set_params(random_state=None))
    assert b"_privclust_seeds_drawn" not in blob and b"_privclust_seed_key" not in blob


def test_random_state_must_be_an_integer_seed(X):
    for bad in (np.random.RandomState(0), np.random.default_rng(0), -1, 1.5, True):
        with pytest.raises(ParameterError, match="random_state"):
            pcs.masker("microaggregation", random_state=bad).fit(X)


def test_a_column_that_is_not_numeric_is_refused_by_name_without_quoting_values(X):
    # scikit-learn's own message quoted a value of the data and named no column
    frame = pd.DataFrame(X, columns=["income", "spend"]).assign(name="Jane Roe",
                                                                 kind=pd.Categorical(["a", "b", "c"] * 30))
    with pytest.raises(privclust.DataError, match="column.s. name, kind hold values that are not numbers") as err:
        pcs.masker("microaggregation", random_state=0).fit(frame)
    assert "Jane" not in str(err.value)
    dated = pd.DataFrame(X, columns=["income", "spend"]).assign(day=pd.date_range("2020-01-01", periods=90),
                                                                 span=pd.to_timedelta(np.arange(90), unit="D"))
    with pytest.raises(privclust.DataError, match="column.s. day, span hold values that are not numbers"):
        pcs.masker("microaggregation", random_state=0).fit(dated)  # was numpy's DTypePromotionError
    numeric_codes = pd.DataFrame(X, columns=["income", "spend"]).assign(code=pd.Categorical([1, 2, 3] * 30))
    assert pcs.masker("microaggregation", random_state=0).fit_transform(numeric_codes).shape == (90, 3)


def test_a_pickle_holds_no_seed_once_random_state_is_cleared(X):
    # the seed of the last seeded run, kept to warn about its reuse, must not travel in a pickle whose
    # random_state says None
    mask = pcs.masker("fuzzy-microaggregation", random_state=987654321).fit(X)
    mask.set_params(random_state=None)
    blob = pickle.dumps(mask)
    assert b"987654321" not in blob and (987654321).to_bytes(4, "little") not in blob
    assert pickle.loads(blob).get_params()["random_state"] is None


@pytest.mark.parametrize("bad, word", [(0, "epsilon must be > 0"), ((1.0, 1.0), "delta must be below 1"),
                                       ((1.0, 2), "delta must be below 1")])
def test_a_budget_out_of_range_is_refused_naming_budget(X, bad, word):
    # these reached the recipe and came back as 'recipe: privacy.epsilon ...', naming no budget
    with pytest.raises(ParameterError, match=f"budget: the {word}"):
        pcs.masker("microaggregation", budget=bad).fit(X)


def test_a_renamed_parameter_gets_the_recipes_message_in_the_constructor_and_in_set_params():
    """Red-team audit: a recipe, a nested clusterer and FCM(c=3) say "fcm: parameter 'c' was renamed 'n_clusters'";
    the estimator's constructor gave a third wording and set_params (GridSearchCV's path) scikit-learn's "Invalid
    parameter" with no hint."""
    from privclust import sklearn as pcs
    from privclust.params import RenamedParameterError

    for make in (lambda: pcs.clusterer("fcm", c=3), lambda: pcs.clusterer("fcm").set_params(c=3)):
        with pytest.raises(RenamedParameterError, match="fcm: parameter 'c' was renamed 'n_clusters'"):
            make()
    assert pcs.clusterer("fcm").set_params(n_clusters=4).n_clusters == 4
    with pytest.raises(ValueError, match="Invalid parameter"):
        pcs.clusterer("fcm").set_params(nonsense=1)
