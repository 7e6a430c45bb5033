"""Tests of the density-peak plots (Agg backend, no display)."""

from __future__ import annotations

import sys
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from conftest import require_dataset  # noqa: E402

import privclust  # noqa: E402
from privclust import Partition, PrivacyLeakWarning, PrivclustError  # noqa: E402
from privclust_plugins.density_plots import plot_clusters, plot_decision_graph, plot_gamma  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def handmade():
    """A partition with the diagnostics density-peak clusterers provide
    (the contract), built by hand: two blobs, centres 0 and 5."""
    rng = np.random.default_rng(0)
    points = np.vstack([rng.normal(0, 0.3, (5, 2)), rng.normal(3, 0.3, (5, 2))])
    points[0], points[5] = [0, 0], [3, 3]
    rho = np.array([9.0, 5, 4, 3, 2, 8, 6, 4, 3, 1])
    delta = np.array([4.2, 0.3, 0.4, 0.2, 0.5, 4.2, 0.3, 0.2, 0.4, 0.6])
    gamma = rho * delta
    labels = np.array([0, 0, 0, 0, -1, 1, 1, 1, 1, 1])
    before = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1])
    kappa = np.array([-0.01, 5.0, 1.0, 0.5, 0.2, 0.1, 0.05, 0.0])
    partition = Partition(
        labels=labels, centres=points[[0, 5]], columns=("x", "y"),
        diagnostics={"rho": rho, "delta": delta, "gamma": gamma, "parent": np.array([-1, 0, 0, 1, 2, 0, 5, 6, 6, 7]),
                     "centre_indices": np.array([0, 5]), "n_centres": 2, "dc": 0.5, "kappa": kappa, "boundary": 2,
                     "labels_before_merge": before},
    )
    return partition, pd.DataFrame(points, columns=["x", "y"])


def offsets(ax):
    return [np.asarray(c.get_offsets()) for c in ax.collections]


def test_decision_graph_marks_the_centres(handmade):
    partition, _ = handmade
    ax = plot_decision_graph(partition)
    others, centres = offsets(ax)
    assert np.allclose(centres, [[9.0, 4.2], [8.0, 4.2]])
    assert len(others) == 8
    assert "rho" in ax.get_xlabel() and "delta" in ax.get_ylabel()
    assert [t.get_text() for t in ax.texts] == ["0", "1"]


def test_gamma_curve_boundary_and_kappa(handmade):
    partition, _ = handmade
    fig, ax = plt.subplots()
    out = plot_gamma(partition, ax=ax)
    assert out is ax
    line = ax.lines[0]
    assert np.allclose(line.get_ydata(), np.sort(partition.diagnostics["gamma"])[::-1])
    assert np.allclose(line.get_xdata(), np.arange(1, 11))
    boundary = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert boundary and boundary[0].get_xdata()[0] == pytest.approx(2.5)
    assert np.allclose(ax.kappa_axis.lines[0].get_ydata(), partition.diagnostics["kappa"])
    assert "m = 2" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_gamma_without_kappa_uses_the_number_of_centres(handmade):
    partition, _ = handmade
    diag = {k: v for k, v in partition.diagnostics.items() if k not in ("kappa", "boundary")}
    ax = plot_gamma(Partition(labels=partition.labels, diagnostics=diag))
    assert not hasattr(ax, "kappa_axis")
    assert any(ln.get_linestyle() == "--" and ln.get_xdata()[0] == pytest.approx(2.5) for ln in ax.lines)


def test_clusters_coloured_by_label_with_unassigned_in_grey(handmade):
    partition, data = handmade
    ax = plot_clusters(partition, data)
    groups = offsets(ax)
    assert [len(g) for g in groups] == [4, 5, 1, 2]  # cluster 0, cluster 1, unassigned, centres
    assert np.allclose(groups[3], data.to_numpy()[[0, 5]])
    assert ax.get_xlabel() == "x" and ax.get_ylabel() == "y"
    assert "unassigned (1)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_clusters_before_the_merge(handmade):
    partition, data = handmade
    ax = plot_clusters(partition, data, labels="labels_before_merge")
    assert [len(g) for g in offsets(ax)][:2] == [3, 7]
    assert "labels_before_merge" in ax.get_title()
    ax = plot_clusters(partition, data.to_numpy(), labels=np.zeros(10, dtype=int), centres=False)
    assert [len(g) for g in offsets(ax)] == [10]


def test_more_than_two_columns_are_projected_on_principal_components():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(40, 4)) * [5, 1, 0.1, 0.1]
    frame = pd.DataFrame(values, columns=list("abcd"))
    partition = Partition(labels=np.repeat([0, 1], 20), centres=values[:2], columns=tuple("abcd"))
    ax = plot_clusters(partition, frame)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("PC1", "PC2")
    # The first component is (up to sign) the high-variance column a.
    xy = np.vstack(offsets(ax)[:2])
    assert abs(np.corrcoef(xy[:, 0], np.r_[values[:20, 0], values[20:, 0]])[0, 1]) > 0.99
    ax = plot_clusters(partition, frame, columns=["c", "a"])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("c", "a")
    assert np.allclose(offsets(ax)[-1], values[:2][:, [2, 0]])


def test_from_a_release(registry):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(np.vstack([rng.normal(0, 0.2, (30, 2)), rng.normal(2, 0.2, (30, 2))]), columns=["u", "v"])
    frame["class"] = pd.Categorical(np.repeat([0, 1], 30))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release = privclust.run({"privacy": {"allow_leaks": ["bounds"]},
                                 "steps": [{"use": "idp-kmeans", "n_clusters": 2, "epsilon": 100.0, "bounds": "data",
                                            "id": "km"}]}, frame, seed=0, registry=registry)
    ax = plot_clusters(release)
    assert ax.get_xlabel() == "u" and "idp-kmeans (km)" in ax.get_title()
    assert plot_clusters(release, step="km").get_title() == ax.get_title()
    assert plot_clusters(release.step(0), data=frame).get_xlabel() == "u"
    # k-means has no densities: the decision graph says what it needs.
    with pytest.raises(PrivclustError, match="needs the partition diagnostic 'rho'.*dpc"):
        plot_decision_graph(release)


NOISE = {"use": "laplace", "epsilon": 0.5, "bounds": "data"}


def _noisy_kmeans(registry, seed, after=()):
    """A frame, and its release by laplace noise, idp-kmeans and the steps ``after``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(40, 2)) * 10, columns=["u", "v"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release = privclust.run({"privacy": {"allow_leaks": ["bounds"]},
                                 "steps": [NOISE, {"use": "idp-kmeans", "n_clusters": 2, "epsilon": 1.0,
                                                   "bounds": "data"}, *after]},
                                frame, seed=1, registry=registry)
    return frame, release


def test_a_release_plots_the_values_the_clusterer_saw(registry):
    _, release = _noisy_kmeans(registry, 3)
    ax = plot_clusters(release, centres=False)
    drawn = np.vstack(offsets(ax))
    masked = release.data[["u", "v"]].to_numpy()
    assert sorted(map(tuple, drawn)) == sorted(map(tuple, masked))


def test_bad_input(handmade, registry):
    partition, data = handmade
    with pytest.raises(PrivclustError, match="pass data="):
        plot_clusters(partition)
    with pytest.raises(PrivclustError, match="10 labels for 4 records"):
        plot_clusters(partition, data.iloc[:4])
    with pytest.raises(PrivclustError, match="column 'X' is not in the data.*did you mean 'x'"):
        plot_clusters(partition, data, columns=["X", "y"])
    with pytest.raises(PrivclustError, match="no diagnostic 'labels_before'"):
        plot_clusters(partition, data, labels="labels_before")
    with pytest.raises(PrivclustError, match="expected a privclust.Release"):
        plot_gamma({"rho": [1, 2]})
    with pytest.raises(PrivclustError, match="step= applies to a Release only"):
        plot_gamma(partition, step=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release = privclust.run({"privacy": {"allow_leaks": ["bounds"]},
                                 "steps": [{"use": "laplace", "epsilon": 1.0, "bounds": "data"}]}, data, seed=0,
                                registry=registry)
    with pytest.raises(PrivclustError, match="no clusterer step"):
        plot_clusters(release)


def test_missing_matplotlib_names_the_extra(handmade, monkeypatch):
    partition, _ = handmade
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(PrivclustError, match=r"privclust\[plots\]"):
        plot_decision_graph(partition)


# -- real partitions of the density-peak clusterers -----------------------------------------------

REAL = [
    {"use": "dpc", "n_clusters": 2, "dc_percent": 2.5},
    {"use": "addpc", "dc_percent": 3.0},
    {"use": "dp-dpcl", "dc_percent": 2.5, "radius_percent": 1.0, "scale": "minmax", "epsilon": 2.0},
    {"use": "addpc-rdp", "dc_percent": 2.5, "epsilon": 1.0},
    {"use": "dp-rccfsfdp", "n_clusters": 2, "dc_percent": 2.5, "radius_percent": 1.0, "epsilon": 1.0},
    {"use": "dp-dpc-grid", "epsilon": 1.0, "bounds": {"x0": [0, 16], "x1": [12, 30]}, "points_per_dim": 30},
]
#: The paper's percentage rules take d_c, E and the scaling from the data: the test opts in by name.
LEAKS = {"allow_leaks": ["dc_percent", "radius_percent", "scale"]}


@pytest.mark.parametrize("step", REAL, ids=[s["use"] for s in REAL])
def test_plots_of_each_density_peak_clusterer(step, registry):
    from privclust.datasets import load

    require_dataset("flame.data.gz")
    flame = load("flame")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        release = privclust.run({"privacy": LEAKS, "steps": [step]}, flame, seed=5, registry=registry)
    partition = release.step(0).partition
    diag = partition.diagnostics
    fig, axes = plt.subplots(1, 3)
    plot_decision_graph(release, ax=axes[0])
    centres = np.asarray(diag["centre_indices"])
    drawn = offsets(axes[0])[-1]
    assert np.allclose(drawn, np.column_stack([diag["rho"][centres], diag["delta"][centres]]))
    plot_gamma(release, ax=axes[1])
    gamma = np.asarray(diag["gamma"], dtype=float)
    top = np.sort(gamma[np.isfinite(gamma)])[::-1]
    assert np.allclose(axes[1].lines[0].get_ydata(), top[: len(axes[1].lines[0].get_ydata())])
    if "kappa" in diag:
        assert hasattr(axes[1], "kappa_axis")
    plot_clusters(release, ax=axes[2])
    counts = sorted(len(g) for g in offsets(axes[2])[: partition.n_clusters])
    assert counts == sorted(np.bincount(partition.labels[partition.labels >= 0]).tolist())
    if "labels_before_merge" in diag:
        ax = plot_clusters(release, labels="labels_before_merge")
        assert "labels_before_merge" in ax.get_title()


def test_the_labels_say_what_is_drawn(handmade, registry):
    # a DP clusterer's densities are noisy (negative ones were drawn under "density"); the crosses are the
    # clusters' centres, after a reachability merge too (each merged cluster's densest point)
    partition, data = handmade
    ax = plot_clusters(partition, data)
    assert "centres" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = plot_clusters(partition, data, labels="labels_before_merge")
    assert "centres" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert plot_decision_graph(partition).get_xlabel() == r"$\rho$ (density)"
    noisy = Partition(labels=partition.labels, centres=partition.centres, columns=partition.columns,
                      diagnostics={**partition.diagnostics, "accounting": {}})
    assert plot_decision_graph(noisy).get_xlabel() == r"$\rho$ (noisy density)"
    # delta is a distance to a point of higher *noisy* density: its axis says so too
    assert plot_decision_graph(noisy).get_ylabel() == r"$\delta$ (distance to a point of higher noisy density)"
    assert plot_decision_graph(partition).get_ylabel() == r"$\delta$ (distance to a point of higher density)"
    # gamma is computed from the noisy densities too: its axis says so
    assert plot_gamma(partition).get_ylabel() == r"$\gamma$ (sorted, decreasing)"
    assert plot_gamma(noisy).get_ylabel() == r"$\gamma$ (from noisy densities; sorted, decreasing)"


def test_a_release_whose_clustered_values_were_changed_again_says_it_plots_the_original(registry):
    frame, release = _noisy_kmeans(registry, 4, after=[NOISE])
    ax = plot_clusters(release, centres=False)
    assert "original values, not those the step saw" in ax.get_title()
    drawn = np.vstack(offsets(ax))
    assert sorted(map(tuple, drawn)) == sorted(map(tuple, frame[["u", "v"]].to_numpy()))


def test_a_centre_without_records_is_counted_in_the_title(handmade):
    # k-means can release a centre no record is nearest to: the title said "2 clusters" over 3 centre crosses
    partition, data = handmade
    three = Partition(labels=np.where(partition.labels < 0, 0, partition.labels),
                      centres=np.vstack([partition.centres, [[9.0, -3.0]]]), columns=partition.columns)
    ax = plot_clusters(three, data)
    assert ax.get_title() == "2 clusters, 3 centres"
    assert len(offsets(ax)[-1]) == 3
    assert plot_clusters(partition, data).get_title() == "2 clusters"  # as many centres as clusters
    assert plot_clusters(three, data, centres=False).get_title() == "2 clusters"
