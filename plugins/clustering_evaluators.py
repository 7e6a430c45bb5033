"""Built-in evaluators of clustering quality against known classes.

``ari``
    The adjusted Rand index (Hubert & Arabie 1985), scikit-learn's
    :func:`~sklearn.metrics.adjusted_rand_score`.
``pair-f``
    The pair-counting F-measure of the DP-DPCL paper, formulas (11)-(14):
    over all unordered pairs of records, ``Na`` pairs are together in the
    true classes and in the clusters, ``Nb`` together in the classes only,
    ``Nc`` together in the clusters only; precision ``P = Na / (Na + Nc)``,
    recall ``R = Na / (Na + Nb)``, ``F_beta = (beta^2 + 1) P R / (beta^2 P + R)``
    (``F_1 = 2 Na / (2 Na + Nb + Nc)``). The counts come from scikit-learn's
    :func:`~sklearn.metrics.cluster.pair_confusion_matrix`, which works on
    the contingency table (linear in the number of records), never on the
    ``n (n - 1) / 2`` pairs themselves.
``nmi``
    Normalised mutual information, scikit-learn's
    :func:`~sklearn.metrics.normalized_mutual_info_score`.
``n-clusters``
    The number of clusters found and the number of true classes.

Each reads the true classes from the column ``truth`` (default ``"class"``;
it may be categorical or text) and the clustering from the label column
``labels`` a clusterer step released (default ``"cluster"``). A column is
looked up in the released label columns first, then in the protected frame,
then in the original one (so two label columns can be compared too).

Records a clusterer left unassigned (negative labels, privclust's ``-1`` for
noise or halo) are handled as ``unassigned`` says: ``"singletons"`` (the
default of ``ari`` and ``pair-f``: each such record is a cluster of its own,
grouped with nobody, so the pair counts count it against the clustering;
``nmi`` refuses it, as singletons raise mutual information, and defaults to
``"cluster"``), ``"cluster"`` (all of them
form one extra cluster, which is what scikit-learn does with the raw
labels) or ``"exclude"`` (they are left out; the figures describe the
assigned records only, and ``n-clusters`` reports how many were left out).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import DataError, EvaluationInputs, param

__version__ = "0.1.0"

__all__ = ["AdjustedRandIndex", "NClusters", "NormalizedMutualInformation", "PairFMeasure", "pair_counts"]

#: How records with a negative label are treated.
UNASSIGNED_CHOICES = ("singletons", "cluster", "exclude")

#: The fewest records an evaluation accepts (with fewer there is at most one pair).
MIN_RECORDS = 3


def _frames(inputs: EvaluationInputs, order: tuple[str, ...]) -> list[tuple[str, pd.DataFrame]]:
    named = {"labels": inputs.labels, "protected": inputs.protected, "original": inputs.original}
    return [(key, named[key]) for key in order if named[key] is not None]


def _column(inputs: EvaluationInputs, name: str, parameter: str, order: tuple[str, ...], owner: str) -> pd.Series:
    """The column ``name`` from the first frame (in ``order``) that has it."""
    frames = _frames(inputs, order)
    for _, frame in frames:
        if name in frame.columns:
            return frame[name]
    known: list[str] = []
    for _, frame in frames:
        known.extend(str(c) for c in frame.columns if str(c) not in known)
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else (
        "columns available: " + ", ".join(known) if known else "the frames have no columns")
    where = " or ".join(f"the {key} frame" for key, _ in frames)
    raise DataError(f"{owner}: the {parameter!r} column {name!r} is not in {where} ({hint}); "
                    f"set {parameter} = \"<column>\" in the evaluator's entry")


def _truth_codes(series: pd.Series, owner: str) -> np.ndarray:
    """Integer codes of the true classes (any dtype); missing values are an error."""
    codes, _ = pd.factorize(series, use_na_sentinel=True)
    missing = int((codes < 0).sum())
    if missing:
        raise DataError(f"{owner}: the truth column {series.name!r} has {missing} missing value(s); drop those "
                        "records or fill them before evaluating")
    return codes.astype(np.int64)


def _label_codes(series: pd.Series, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of the cluster labels and the mask of unassigned records
    (negative numeric labels)."""
    name = series.name
    if pd.api.types.is_bool_dtype(series):
        raise DataError(f"{owner}: the labels column {name!r} is boolean; expected cluster labels")
    if pd.api.types.is_numeric_dtype(series):
        values = series.to_numpy(dtype=float, na_value=np.nan)
        missing = int(np.isnan(values).sum())
        if missing:
            raise DataError(f"{owner}: the labels column {name!r} has {missing} missing value(s); a clusterer "
                            "marks unassigned records with -1, not NaN")
        if np.isinf(values).any():
            raise DataError(f"{owner}: the labels column {name!r} has infinite values")
        unassigned = values < 0
        codes, _ = pd.factorize(values)
        return codes.astype(np.int64), unassigned
    codes, _ = pd.factorize(series, use_na_sentinel=True)
    missing = int((codes < 0).sum())
    if missing:
        raise DataError(f"{owner}: the labels column {name!r} has {missing} missing value(s)")
    return codes.astype(np.int64), np.zeros(len(codes), dtype=bool)


def _apply_unassigned(truth: np.ndarray, labels: np.ndarray, unassigned: np.ndarray,
                      how: str) -> tuple[np.ndarray, np.ndarray]:
    if not unassigned.any():
        return truth, labels
    if how == "cluster":
        out = labels.copy()
        out[unassigned] = labels.max() + 1  # one shared extra cluster
        return truth, out
    if how == "exclude":
        keep = ~unassigned
        return truth[keep], labels[keep]
    out = labels.copy()
    out[unassigned] = labels.max() + 1 + np.arange(int(unassigned.sum()))  # one cluster each
    return truth, out


def pair_counts(truth: Any, labels: Any) -> tuple[int, int, int, int]:
    """The unordered pair counts ``(Na, Nb, Nc, Nd)`` of two partitions.

    ``Na``: pairs together in both; ``Nb``: together in ``truth`` only;
    ``Nc``: together in ``labels`` only; ``Nd``: apart in both. They sum to
    ``n (n - 1) / 2``. Computed from the contingency table by scikit-learn's
    :func:`~sklearn.metrics.cluster.pair_confusion_matrix` (which counts
    ordered pairs, hence the halving), in time linear in ``n``.
    """
    from sklearn.metrics.cluster import pair_confusion_matrix

    matrix = pair_confusion_matrix(np.asarray(truth), np.asarray(labels))
    # rows: together in truth (1) or not (0); columns: together in labels.
    na = int(matrix[1, 1]) // 2
    nb = int(matrix[1, 0]) // 2
    nc = int(matrix[0, 1]) // 2
    nd = int(matrix[0, 0]) // 2
    return na, nb, nc, nd


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else float("nan")


@attrs.frozen(kw_only=True)
class _AgainstTruth:
    """The fields and the column handling every evaluator here shares."""

    name: ClassVar[str]

    truth: str = param(str, default="class", doc="column of the true classes (any dtype, e.g. categorical)")
    labels: str = param(str, default="cluster", doc="label column released by the clusterer step to evaluate")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        """The truth and labels columns: the figures compare these two
        columns and read no other (the report said "computed on the columns
        exp16, exp7" of a figure such as the number of true classes). Asked
        before any step runs (``privclust check --input``, ``run``'s checks),
        it raises when either column will not be there, or the truth has
        missing values: a run used to be refused only after every step had
        run."""
        _, truth = self._labels_and_truth(inputs)
        _truth_codes(truth, self.name)
        return {"columns": list(dict.fromkeys([self.truth, self.labels]))}

    def _labels_and_truth(self, inputs: EvaluationInputs) -> tuple[pd.Series, pd.Series]:
        labels = _column(inputs, self.labels, "labels", ("labels", "protected", "original"), self.name)
        truth = _column(inputs, self.truth, "truth", ("original", "protected", "labels"), self.name)
        return labels, truth

    def _columns(self, inputs: EvaluationInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Codes of the true classes and the labels, and the unassigned mask."""
        owner = self.name
        labels, truth = self._labels_and_truth(inputs)
        if len(labels) != len(truth):
            raise DataError(f"{owner}: the labels column {self.labels!r} has {len(labels)} values but the truth "
                            f"column {self.truth!r} has {len(truth)}; both must describe the same records")
        if len(truth) < MIN_RECORDS:
            raise DataError(f"{owner}: {len(truth)} record(s) are too few to compare partitions (pair counts "
                            f"need at least {MIN_RECORDS} records)")
        truth_codes = _truth_codes(truth, owner)
        label_codes, unassigned = _label_codes(labels, owner)
        return truth_codes, label_codes, unassigned


@attrs.frozen(kw_only=True)
class _WithUnassigned(_AgainstTruth):
    unassigned: str = param(str, default="singletons", choices=UNASSIGNED_CHOICES,
                            doc="records with label -1: 'singletons' (one cluster each), 'cluster' (one shared "
                                "cluster) or 'exclude'")

    def _pairs(self, inputs: EvaluationInputs) -> tuple[np.ndarray, np.ndarray] | None:
        truth, labels, unassigned = self._columns(inputs)
        truth, labels = _apply_unassigned(truth, labels, unassigned, self.unassigned)
        if len(truth) < 2:  # 'exclude' left fewer than one pair
            return None
        return truth, labels


@attrs.frozen(kw_only=True)
class AdjustedRandIndex(_WithUnassigned):
    """The adjusted Rand index (Hubert & Arabie 1985) of the clustering
    against the true classes: 1 for identical partitions, about 0 for a
    random one, negative when worse than chance (scikit-learn's
    ``adjusted_rand_score``)."""

    name: ClassVar[str] = "ari"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "ari": ("adjusted Rand index against the true classes; 1 = identical, about 0 = chance", "index"),
    }

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        from sklearn.metrics import adjusted_rand_score

        pairs = self._pairs(inputs)
        if pairs is None:
            return {"ari": float("nan")}
        return {"ari": float(adjusted_rand_score(*pairs))}


@attrs.frozen(kw_only=True)
class PairFMeasure(_WithUnassigned):
    """The pair-counting F-measure of the DP-DPCL paper (formulas (11)-(14)),
    with its precision and recall."""

    name: ClassVar[str] = "pair-f"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "f": ("pair-counting F-measure against the true classes; 1 = identical", "index (0-1)"),
        "precision": ("share of pairs put together that belong together (NaN when no pair is put together)",
                      "share (0-1)"),
        "recall": ("share of pairs that belong together and were put together (NaN when no pair belongs "
                   "together)", "share (0-1)"),
    }

    beta: float = param(float, role="plain", default=1.0, gt=0,
                        doc="weight of recall against precision (F_beta); 1 gives F_1")

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        pairs = self._pairs(inputs)
        if pairs is None:
            return {"f": float("nan"), "precision": float("nan"), "recall": float("nan")}
        na, nb, nc, _ = pair_counts(*pairs)
        b2 = self.beta * self.beta
        den = (1.0 + b2) * na + b2 * nb + nc
        # Both partitions all singletons: no pair is together anywhere, they agree.
        f = (1.0 + b2) * na / den if den else 1.0
        return {"f": float(f), "precision": _ratio(na, na + nc), "recall": _ratio(na, na + nb)}


@attrs.frozen(kw_only=True)
class NormalizedMutualInformation(_WithUnassigned):
    """Normalised mutual information of the clustering and the true classes
    (scikit-learn's ``normalized_mutual_info_score``). Records labelled -1
    form one shared cluster by default (``unassigned = "cluster"``): counted
    as singletons they would raise the figure, since a cluster of one record
    is pure."""

    name: ClassVar[str] = "nmi"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "nmi": ("normalised mutual information with the true classes; 1 = identical, 0 = independent",
                "index (0-1)"),
    }

    # Not "singletons": a singleton cluster is pure, so mutual information counts it as perfect knowledge of
    # its record's class; a clusterer that left every record unassigned scored 0.73 on three records of two
    # classes (a quality it does not have). One shared cluster of the unassigned records gives it 0.
    unassigned: str = param(str, default="cluster", choices=("cluster", "exclude"),
                            doc="records with label -1: 'cluster' (one shared cluster) or 'exclude'; not "
                                "'singletons', which raises NMI (a cluster of one record is pure)")
    average_method: str = param(str, default="arithmetic", choices=("arithmetic", "geometric", "min", "max"),
                                doc="how the two entropies are averaged in the normaliser")

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        from sklearn.metrics import normalized_mutual_info_score

        pairs = self._pairs(inputs)
        if pairs is None:
            return {"nmi": float("nan")}
        return {"nmi": float(normalized_mutual_info_score(*pairs, average_method=self.average_method))}


@attrs.frozen(kw_only=True)
class NClusters(_AgainstTruth):
    """The number of clusters found (distinct labels >= 0), the number of true
    classes, and the number of records left unassigned (label -1)."""

    name: ClassVar[str] = "n-clusters"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "n_clusters": ("clusters found (distinct labels, noise left out)", "clusters"),
        "n_classes": ("true classes", "classes"),
        "n_unassigned": ("records left unassigned (label -1)", "records"),
    }

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        truth, labels, unassigned = self._columns(inputs)
        found = int(np.unique(labels[~unassigned]).size)
        return {"n_clusters": float(found), "n_classes": float(np.unique(truth).size),
                "n_unassigned": float(unassigned.sum())}


@privclust.hookimpl
def privclust_register_evaluators(register):
    register(AdjustedRandIndex)
    register(PairFMeasure)
    register(NormalizedMutualInformation)
    register(NClusters)
