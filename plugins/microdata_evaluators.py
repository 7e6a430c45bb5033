"""Built-in evaluators for microdata: information loss and disclosure risk.

=======================  ======================================================
name                     figures
=======================  ======================================================
``sse-sst``              ``sse_sst`` = 100 SSE/SST on standardised variables
``il1s``                 ``il1s`` (sdcMicro's IL1s)
``moments``              relative change of means, variances, covariances;
                         absolute change of correlations
``dbrl``                 ``dbrl``: share of records linked to their own original
                         (the best of an intruder's linkages)
``interval-disclosure``  ``drisk`` (sdcMicro's dRisk), ``drisk_all_inside``
                         and ``values_inside``
``group-sizes``          realised (and, for fuzzy maskers, expected) group sizes
``transparency-risk``    posterior of the true record for a transparent
                         intruder, from one released row, and its upper bound
                         given the whole released file
``edit-violations``      per edit rule, max violation and share of records
                         violating it (protected and original)
``key-frequencies``      key combinations, sample uniques, records in cells
                         smaller than k (protected and original)
``individual-risk``      Benedetti-Franconi individual risk from the sampling
                         weights, expected re-identifications
``key-linkage``          record linkage restricted to records sharing their key
                         combination
=======================  ======================================================

Every evaluator judges ``inputs.columns`` of ``inputs.original`` against the
same columns of ``inputs.protected`` (row ``i`` against row ``i``). See
``docs/microdata-evaluators.md`` for the formulas. Missing values (NaN) are
left out: the figures are computed over the cells observed in both files
(record linkage over the observed coordinates, as the masking; see
``docs/missing-values.md``).

>>> import numpy as np, pandas as pd, privclust
>>> from privclust_plugins.microdata_evaluators import SseSst
>>> x = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0]})
>>> y = pd.DataFrame({"a": [1.5, 1.5, 3.5, 3.5]})
>>> inputs = privclust.EvaluationInputs(original=x, protected=y, columns=("a",), labels=pd.DataFrame(index=x.index))
>>> SseSst().evaluate(inputs)["sse_sst"]
20.0
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import DataError, EvaluationInputs, Partition, param

from . import _key_risk as kr
from . import _microdata_metrics as mm

__version__ = "0.1.0"


def _arrays(inputs: EvaluationInputs, who: str) -> tuple[np.ndarray, np.ndarray]:
    columns = list(inputs.columns)
    if not columns:
        raise DataError(f"{who}: no columns to evaluate; name them with columns = [...]")
    for frame, what in ((inputs.protected, "protected"), (inputs.original, "original")):
        missing = [c for c in columns if c not in frame.columns]
        if missing:  # a column a step dropped, or one it added (the original has no such column to compare)
            raise DataError(f"{who}: column(s) {', '.join(missing)} are not in the {what} data; a record-level "
                            "figure compares each column in both files: leave them out of the evaluation's columns")
    try:
        X = inputs.original.loc[:, columns].to_numpy(dtype=float)
        Y = inputs.protected.loc[:, columns].to_numpy(dtype=float)
    except (TypeError, ValueError) as err:
        raise DataError(f"{who}: the columns {columns} must be numeric ({err})") from None
    if X.shape != Y.shape:
        raise DataError(f"{who}: the original has {X.shape[0]} records and the protected data {Y.shape[0]}; "
                        "record-level measures need the same records in the same order")
    if X.shape[0] == 0:
        raise DataError(f"{who}: there are no records to evaluate")
    if np.isinf(X).any() or np.isinf(Y).any():
        raise DataError(f"{who}: the columns {columns} hold infinite values")
    both = ~np.isnan(X) & ~np.isnan(Y)
    empty = [c for c, ok in zip(columns, both.any(axis=0), strict=True) if not ok]
    if empty:  # missing values are evaluated over the observed cells; a column needs some
        raise DataError(f"{who}: column(s) {', '.join(empty)} have no record observed in both the original and the "
                        "protected data; leave them out of the evaluation's columns")
    return X, Y


def _weight_param() -> Any:
    return param(str, default=None, doc="a sampling-weight column, read from the original file: every record "
                                        "counts as many times as its weight (default: the recipe's [roles] "
                                        "weight, else unweighted)")


def _weights_of(evaluator: Any, inputs: EvaluationInputs, *, sample: bool = False) -> np.ndarray | None:
    """The sampling weights an evaluator with a ``weight`` parameter reads (the original file's)."""
    return mm.sampling_weights(inputs.original, mm.weight_role(evaluator.weight, inputs), evaluator.name,
                               sample=sample)


def _host_default(inputs: EvaluationInputs) -> bool:
    """Whether the evaluation's columns are the host's default. A host whose
    inputs say whether the entry named its columns (``columns_named``) is
    taken at its word; otherwise the columns are the default when they are
    exactly the columns the numeric steps worked on (a masker's or a noise
    step's, not a clusterer's or a key masker's), in the file's order: an
    entry that names exactly those is then taken as the default (set
    ``with_unchanged = false`` to link on them alone), and the figure
    measured before protection (no steps) links on the columns as given."""
    named = getattr(inputs, "columns_named", None)
    if isinstance(named, bool):
        return not named
    outcomes = tuple(getattr(inputs, "outcomes", ()) or ())
    changed = tuple(c for c in inputs.original.columns
                    if any(c in tuple(getattr(o, "columns", ())) for o in outcomes
                           if getattr(o, "kind", None) != "clusterers"
                           and privclust.capability(getattr(o, "component", None), "key_masker") is not True))
    return bool(changed) and tuple(inputs.columns) == changed


def _unchanged_numeric(inputs: EvaluationInputs, leave_out: set[str]) -> list[str]:
    """The numeric columns released as in the original (every value, missing
    ones included, the same in both files) that vary in the original, in the
    file's order, but the columns in ``leave_out``."""
    out = []
    for c in inputs.original.columns:
        if c in leave_out or c not in inputs.protected.columns or c in inputs.labels.columns:
            continue
        x, y = inputs.original[c], inputs.protected[c]
        if not (privclust.is_real_column(x) and privclust.is_real_column(y)):
            continue
        a, b = x.to_numpy(dtype=float, na_value=np.nan), y.to_numpy(dtype=float, na_value=np.nan)
        if a.shape == b.shape and np.array_equal(a, b, equal_nan=True) and np.isfinite(a).any() \
                and np.nanmax(a) > np.nanmin(a):
            out.append(str(c))
    return out


def _linkage_columns(inputs: EvaluationInputs, with_unchanged: bool, blocking: tuple[str, ...]) -> list[str]:
    """The columns an intruder links on: the evaluation's columns; with the
    host's default columns and ``with_unchanged``, also the numeric columns
    released as in the original (an intruder who knows a person's values
    knows these as well, and they are not protected: a red-team audit found
    dbrl 0.322 on the microaggregated columns where a nearest-neighbour
    intruder with the unchanged one beside them linked 0.906), but the
    roles: ids (a direct identifier is no quasi-identifier: linking on it is
    not what this measures), the sampling weight (a design figure, not a
    person's value), strata and keys (``blocking``: linkage runs among the
    records that share them)."""
    columns = list(inputs.columns)
    if not (with_unchanged and _host_default(inputs)):
        return columns
    roles = getattr(inputs, "roles", None)
    leave_out = set(columns) | set(blocking)
    if roles is not None:
        leave_out |= {*roles.ids, *roles.weight, *roles.strata, *roles.keys}
    return columns + _unchanged_numeric(inputs, leave_out)


def _unchanged_param() -> Any:
    return param(bool, default=True, doc="with the evaluation's default columns (those the steps worked on), also "
                                         "link on the numeric columns released as in the original, but the roles "
                                         "(an intruder who knows a person's values knows these as well); false: "
                                         "the steps' columns alone. Columns named in the evaluation are kept as "
                                         "named")


def _best_linkage(X: np.ndarray, Y: np.ndarray, columns: list[str], link: Any) -> dict[str, float]:
    """The intruder's linkages (:func:`_microdata_metrics.linkage_sets`: all
    the columns, each alone, each set leaving one out up to 12 columns),
    ``link(X, Y) -> (share, linked)`` on each; the largest share, its linked
    records and, when a part of the columns gave it, that set (a figure
    named after its columns, valued their number; of equal shares the set
    of all the columns is kept, and then there is no such figure)."""
    best: tuple[float, float, tuple[int, ...]] | None = None
    for chosen in mm.linkage_sets(len(columns)):
        idx = list(chosen)
        share, linked = link(X[:, idx], Y[:, idx])
        if best is None or share > best[0]:
            best = (share, linked, chosen)
    assert best is not None  # there is always the set of all the columns
    share, linked, chosen = best
    out = {"share": share, "linked": linked}
    if len(chosen) < len(columns):
        out[f"linked_on: {', '.join(str(columns[j]) for j in chosen)}"] = float(len(chosen))
    return out


@attrs.frozen(kw_only=True)
class SseSst:
    """100 SSE/SST on variables standardised with the original's mean and
    population standard deviation, the information-loss figure of the
    microaggregation literature (0: nothing lost; 100: every record replaced
    by the mean). Weighted by a sampling-weight column when ``weight`` is set."""

    name: ClassVar[str] = "sse-sst"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "sse_sst": ("share of the total variance lost (100 SSE/SST, columns standardised by the original's mean "
                    "and population s.d.); 0 = no loss on the columns that vary in the original (a constant one is "
                    "left out), 100 = every record replaced by the mean; NaN when every column is constant in the "
                    "original", "%"),
        "sse": ("sum of squared changes of the standardised values (each record counted its weight times, over "
                "the cells observed in both files)", "standardised units²"),
        "sst": ("sum of squares of the standardised original values over the same cells (records x varying "
                "columns when unweighted and complete)", "standardised units²"),
    }

    weight: str | None = _weight_param()

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return {"columns": list(inputs.columns), "weight": mm.weight_role(self.weight, inputs)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        X, Y = _arrays(inputs, self.name)
        value, sse, sst = mm.sse_sst(X, Y, _weights_of(self, inputs))
        return {"sse_sst": value, "sse": sse, "sst": sst}


@attrs.frozen(kw_only=True)
class IL1s:
    """sdcMicro's IL1s: mean over records and variables of
    ``|x - x'| / (sqrt(2) s_j)``, ``s_j`` the sample s.d. of the original.
    Weighted by a sampling-weight column when ``weight`` is set."""

    name: ClassVar[str] = "il1s"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "il1s": ("mean over values of |x - x'| / (sqrt(2) s), s the original column's sample s.d. (constant "
                 "columns left out; NaN when all are constant); 0 = no loss on the non-constant columns",
                 "sd units"),
    }

    weight: str | None = _weight_param()

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return {"columns": list(inputs.columns), "weight": mm.weight_role(self.weight, inputs)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        X, Y = _arrays(inputs, self.name)
        return {"il1s": mm.il1s(X, Y, _weights_of(self, inputs, sample=True))}


@attrs.frozen(kw_only=True)
class Moments:
    """Relative change of means, variances and covariances, absolute change
    of correlations, between the original and the protected columns.
    Weighted estimates when ``weight`` names a sampling-weight column."""

    name: ClassVar[str] = "moments"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "mean_rel_change": ("mean relative change of the column means (columns whose original mean is 0 left "
                            "out; NaN when none is left); 0 = unchanged", "ratio"),
        "var_rel_change": ("mean relative change of the column variances (constant original columns left out); "
                           "0 = unchanged", "ratio"),
        "cov_rel_change": ("mean relative change of the covariances (pairs whose original covariance is 0 left out; "
                           "NaN for a single column)", "ratio"),
        "corr_abs_change": ("mean absolute change of the correlations (pairs with a constant column left out; NaN "
                            "for a single column); 0 = unchanged", "correlation"),
        "corr_max_abs_change": ("largest absolute change of a correlation; 0 = unchanged", "correlation"),
    }

    weight: str | None = _weight_param()

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return {"columns": list(inputs.columns), "weight": mm.weight_role(self.weight, inputs)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        X, Y = _arrays(inputs, self.name)
        if X.shape[0] < 2:
            raise DataError("moments: variances need at least 2 records")
        return mm.moments(X, Y, _weights_of(self, inputs, sample=True))


@attrs.frozen(kw_only=True)
class DBRL:
    """Distance-based record linkage as an intruder tries it: the share of
    released records whose nearest original record (standardised Euclidean
    distance) is their own, ties sharing the credit, for the best of
    several linkages: on all the linkage columns, on each column alone and
    (up to 12 columns) on each set leaving one column out. The intruder is
    assumed to know the original values of the linkage columns of the
    person sought: by default the columns the steps worked on and the
    numeric columns released as in the original (not the roles: ids,
    weight, strata, keys); columns named in the evaluation are linked on as
    named. Before a red-team audit (rt22) the figure linked on the changed
    columns alone, every column counting equally: 0.322 where an intruder
    with the unchanged column linked 0.906, and 0.002 where one who dropped
    the column drowned in noise linked 0.181. With the recipe's ``[roles]
    strata`` (public by declaration, released as they are) a record is
    linked among the originals of its own stratum, as an intruder who reads
    its stratum does (before a red-team audit it was linked across the
    strata: 0.130, for 0.305 within them); ``with_strata = false`` links
    across the whole file."""

    name: ClassVar[str] = "dbrl"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "dbrl": ("re-identification risk: the largest share of released records whose nearest original record "
                 "is their own, over the linkages an intruder tries (on all the linkage columns, on each alone, "
                 "and up to 12 columns on each set leaving one out; Euclidean on the columns standardised by the "
                 "original's mean and population s.d.; a tie among t nearest originals counts 1/t). The intruder "
                 "knows the original values of the linkage columns (the figure's columns: by default those the "
                 "steps worked on and the numeric ones released as in the original) and, with [roles] strata, "
                 "each record's stratum; 0 = none linked", "share (0-1)"),
        "dbrl_linked_records": ("expected number of records linked to their own original by that linkage (a tie "
                                "among t nearest originals counts 1/t)", "records"),
        "dbrl_linked_on: *": ("the linkage that gave dbrl when a part of the linkage columns gave more than all "
                              "of them: the columns after the colon (the value is their number)", "columns"),
    }

    with_strata: bool = param(bool, default=True, doc="link each record among the originals of its own [roles] "
                                                     "strata (public by declaration: an intruder reads them); "
                                                     "false: among every original record")
    with_unchanged: bool = _unchanged_param()

    def _strata(self, inputs: EvaluationInputs) -> list[str]:
        roles = getattr(inputs, "roles", None)
        return [c for c in (roles.strata if roles is not None and self.with_strata else ())
                if c in inputs.protected.columns]

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        """The linkage columns, then the strata it links within."""
        strata = self._strata(inputs)
        columns = _linkage_columns(inputs, self.with_unchanged, tuple(strata))
        return {"columns": [*columns, *(c for c in strata if c not in columns)]}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        strata = self._strata(inputs)
        columns = _linkage_columns(inputs, self.with_unchanged, tuple(strata))
        X, Y = _arrays(attrs.evolve(inputs, columns=tuple(columns)), self.name)
        if strata:  # the same linkage, its candidates the originals of the record's stratum
            codes = kr.encode(inputs.protected.loc[:, strata])

            def link(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
                return mm.dbrl_among_matches(x, y, codes, workers=-1)
        else:
            def link(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
                return mm.dbrl(x, y, workers=-1)  # both cores; the result does not depend on it
        best = _best_linkage(X, Y, columns, link)
        share, linked = best.pop("share"), best.pop("linked")
        return {"dbrl": share, "dbrl_linked_records": linked, **{f"dbrl_{k}": v for k, v in best.items()}}


@attrs.frozen(kw_only=True)
class IntervalDisclosure:
    """Interval disclosure as sdcMicro's ``dRisk`` (``dRiskWORK``): around
    each protected value an interval of ``width`` standard deviations (of
    the protected column) either side; ``drisk`` is the share of records with
    at most one original value outside its interval (sdcMicro's rule),
    ``drisk_all_inside`` the share with every original value inside."""

    name: ClassVar[str] = "interval-disclosure"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "drisk": ("share of records with at most one original value outside the interval protected value +/- "
                  "width x the protected column's sample s.d. (sdcMicro's dRisk; disclosure risk)", "share (0-1)"),
        "drisk_all_inside": ("share of records whose original values all lie within the interval around their "
                             "protected values (stricter than sdcMicro's dRisk)", "share (0-1)"),
        "values_inside": ("share of values whose original lies within the interval around the protected value",
                          "share (0-1)"),
    }

    width: float = param(float, role="plain", default=0.05, gt=0,
                         doc="half-width of the interval, as a fraction of the protected column's s.d. (sdcMicro's k)")

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        X, Y = _arrays(inputs, self.name)
        records, all_inside, values = mm.interval_disclosure(X, Y, self.width)
        return {"drisk": records, "drisk_all_inside": all_inside, "values_inside": values}


def _find_partition(inputs: EvaluationInputs, step: str | None, who: str) -> tuple[Any, Partition]:
    pairs = inputs.partitions()
    if step is not None:
        for outcome, part in pairs:
            if getattr(outcome, "id", None) == step:
                return outcome, part
        ids = [getattr(o, "id", "?") for o in inputs.outcomes]
        raise DataError(f"{who}: no step with id {step!r} produced a partition; the steps are "
                        f"{', '.join(map(repr, ids)) or '(none)'} (name a microaggregation masker or a clusterer step)")
    wanted = set(inputs.columns)
    chosen = None
    for outcome, part in pairs:
        cols = set(part.columns) or set(getattr(outcome, "columns", ()))
        if cols & wanted:
            chosen = (outcome, part)
    if chosen is None:
        raise DataError(f"{who} needs a step that groups the records of the columns {list(inputs.columns)}: a "
                        "microaggregation masker (microaggregation, fuzzy-microaggregation) or a clusterer such as "
                        "mdav; this release has none (add one, or point 'step' at its id)")
    return chosen


def _step_name(outcome: Any) -> str:
    return str(getattr(outcome, "id", "?"))


def _partition_columns(inputs: EvaluationInputs, step: str | None, who: str) -> Mapping[str, Any]:
    """What a partition's figures are computed on: the columns of the step
    whose partition they judge (before the run, or without one, the
    evaluation's columns)."""
    try:
        outcome, part = _find_partition(inputs, step, who)
    except DataError:
        return {"columns": list(inputs.columns)}
    return {"columns": [str(c) for c in (part.columns or getattr(outcome, "columns", ()) or inputs.columns)]}


@attrs.frozen(kw_only=True)
class GroupSizes:
    """Realised group sizes of the masking step's partition (each record's
    replacement centre) and, for a fuzzy masker, the expected cluster sizes
    (column sums of the replacement memberships). They describe the groups
    the step formed, not the released file: a record keeps its missing
    values, the host rounds integer columns, and a later step over the same
    columns changes them, and each can split a group into different released
    rows there (the host's check in the ledger counts the released file's
    groups of identical rows; before a red-team audit the description named
    only a later step)."""

    name: ClassVar[str] = "group-sizes"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "k": ("the k the groups are judged against", "records"),
        "groups": ("groups of the step's partition: records replaced by the same centre (a microaggregation "
                   "masker), or given the same label (a clusterer, whose step releases the records' values "
                   "unchanged: its groups are no k-anonymity of the file); not groups of identical released rows "
                   "(see min_size)", "groups"),
        "min_size": ("smallest realised group of the step's partition: records replaced by the same centre, not "
                     "records whose released rows are identical; the released rows of one group differ where a "
                     "record keeps its missing values, where the host rounds an integer column, or after a later "
                     "step, and can then be unique: the host's check in the ledger counts the released file's "
                     "groups of identical rows", "records"),
        "mean_size": ("mean realised group size", "records"),
        "max_size": ("largest realised group", "records"),
        "share_records_in_groups_below_k": ("share of records in a group smaller than k", "share (0-1)"),
        "groups_below_k": ("realised groups smaller than k", "groups"),
        "clusters": ("centres of the fuzzy partition", "clusters"),
        "empty_realised_clusters": ("centres no record drew", "clusters"),
        "expected_min_size": ("smallest expected cluster size (sum of memberships)", "records"),
        "expected_mean_size": ("mean expected cluster size", "records"),
        "expected_max_size": ("largest expected cluster size", "records"),
        "share_clusters_expected_below_k": ("share of centres whose expected size is below k", "share (0-1)"),
    }

    step: str | None = param(str, default=None, step_id=True,
                             doc="id of the step whose partition to judge (default: the last one over these columns)")
    k: int | None = param(int, default=None, ge=1,
                          doc="the minimum group size k to compare with (default: the step's own k)")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return _partition_columns(inputs, self.step, self.name)

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        outcome, part = _find_partition(inputs, self.step, self.name)
        k = self.k if self.k is not None else part.diagnostics.get("k")
        if k is None:
            raise DataError(f"{self.name}: step {_step_name(outcome)!r} does not say its k; give it: "
                            "{ use = \"group-sizes\", k = 3 }")
        k = int(k)
        labels = np.asarray(part.labels, dtype=np.int64)
        valid = labels >= 0
        sizes = mm.realised_sizes(labels)
        if sizes.size == 0:
            raise DataError(f"{self.name}: step {_step_name(outcome)!r} assigned no record to a group")
        per_record = np.bincount(labels[valid])[labels[valid]]
        out = {
            "k": float(k),
            "groups": float(sizes.size),
            "min_size": float(sizes.min()),
            "mean_size": float(sizes.mean()),
            "max_size": float(sizes.max()),
            "share_records_in_groups_below_k": float(np.mean(per_record < k)),
            "groups_below_k": float(np.sum(sizes < k)),
        }
        if part.memberships is not None:
            expected = mm.expected_sizes(part.memberships)
            out.update({
                "clusters": float(expected.size),
                "empty_realised_clusters": float(expected.size - sizes.size),
                "expected_min_size": float(expected.min()),
                "expected_mean_size": float(expected.mean()),
                "expected_max_size": float(expected.max()),
                "share_clusters_expected_below_k": float(np.mean(expected < k)),
            })
        return out


@attrs.frozen(kw_only=True)
class TransparencyRisk:
    """The risk under the transparency principle: an intruder who knows the
    method, its parameters, the published centres and the original records
    gives each original record ``k`` the posterior ``u_kj / sum_l u_lj`` of
    being behind a protected record equal to centre ``j``, the sums over
    the records whose released rows show the same besides the centre (a
    declared key, recoded or not, which values are missing; a clusterer's
    raw columns: :func:`_microdata_metrics.shown_codes`); ``mean_posterior``
    is the mean over records of this posterior of the true record
    (``1/|group|`` for crisp microaggregation with nothing else released;
    before a red-team audit the rest of the row was ignored, and the only
    woman of a group of 3 read 1/3, not 1).

    That posterior reads one released row on its own (Torra's figure). The
    released file also tells how many rows show each centre (with the same
    rest of the row), ``N``; the posterior given those counts,
    ``P(L_i = j | N) / N_j``, is a ratio of permanents of the memberships
    (#P-hard) and is not computed. It can be higher than the one-row figure
    (a red-team audit: 0.329 against 0.205 on 18 records) or lower. It is
    never above ``1 / N_j`` (``P(L_i = j | N) <= 1``): ``mean_posterior_bound``
    and ``max_posterior_bound`` are that proven upper bound, equal to the
    posterior for crisp groups. Both are the risk of the step's own output:
    a later step over the same columns changes what is released, and the
    figures do not follow it."""

    name: ClassVar[str] = "transparency-risk"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "mean_posterior": ("mean posterior of the true record from its released row alone: the probability an "
                           "intruder who knows the method and the original records gives it among the records of "
                           "its group whose released rows show the same besides the centre (other columns, missing "
                           "values; 1/group size for crisp groups with nothing else released); it does not use how "
                           "many released rows show each centre, which the file tells, and an intruder who does "
                           "can give more (up to mean_posterior_bound) or less; for the step's own output (not "
                           "after a later step)", "probability"),
        "max_posterior": ("largest such one-row posterior over records (not an upper bound of the intruder's "
                          "posterior given the whole file: see max_posterior_bound)", "probability"),
        "share_posterior_above_half": ("share of records whose one-row posterior is above 1/2", "share (0-1)"),
        "mean_posterior_bound": ("mean over records of a proven upper bound of the posterior of the true record "
                                 "given the whole released file (an intruder who also counts the released rows that "
                                 "show its centre and the same rest of the row): 1 over the number of records that "
                                 "drew its centre and show the same rest of the row; equal to the posterior for "
                                 "crisp groups, at least the posterior for fuzzy ones (the exact posterior, a ratio "
                                 "of permanents of the memberships, is not computed)", "probability"),
        "max_posterior_bound": ("largest such upper bound over records: no record's posterior given the released "
                                "file is above it", "probability"),
    }

    step: str | None = param(str, default=None, step_id=True,
                             doc="id of the masking step (default: the last one over these columns)")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return _partition_columns(inputs, self.step, self.name)

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        outcome, part = _find_partition(inputs, self.step, self.name)
        columns = [str(c) for c in (part.columns or getattr(outcome, "columns", ()))]
        seen = mm.shown_codes(inputs.original, inputs.protected, columns)
        post = mm.transparency_posteriors(part.labels, part.memberships, seen)
        bound = mm.transparency_posteriors(part.labels, None, seen)  # 1 / (rows showing the same centre and rest)
        kept = np.isfinite(post)
        post, bound = post[kept], bound[kept]
        if post.size == 0:
            raise DataError(f"{self.name}: step {_step_name(outcome)!r} assigned no record to a centre")
        return {"mean_posterior": float(post.mean()), "max_posterior": float(post.max()),
                "share_posterior_above_half": float(np.mean(post > 0.5)),
                "mean_posterior_bound": float(bound.mean()), "max_posterior_bound": float(bound.max())}


@attrs.frozen(kw_only=True)
class EditViolations:
    """For each edit rule of the recipe, the largest violation and the share
    of records violating it (beyond ``tol`` times the size of the rule's
    terms, the host's test), in the protected file and in the original. A rule is
    judged on the records that have all its columns and on which double
    precision decides it (no infinite value, no overflow); the count of the
    others is reported as ``records not evaluable``."""

    name: ClassVar[str] = "edit-violations"
    #: The largest violation in the original file is one record's value: a
    #: non-disclosive report (``report(non_disclosive=True)``) leaves it out.
    disclosive_metrics: ClassVar[tuple[str, ...]] = ("*: max violation (original)",)
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "rules": ("edit rules checked", "rules"),
        "*: max violation (original)": ("largest violation of the rule in the original file", "column units"),
        "*: share violated (original)": ("share of original records breaking the rule (among those that have "
                                         "all its columns)", "share (0-1)"),
        "*: max violation": ("largest violation of the rule in the released file; 0 = satisfied",
                             "column units"),
        "*: share violated": ("share of released records breaking the rule (among those that have all its "
                              "columns)", "share (0-1)"),
        "*: records not evaluable": ("released records that miss a column of the rule (a missing value, or a "
                                     "column the file lacks or holds as text), or on which double precision "
                                     "cannot decide it (an infinite value, or terms so large that evaluating it "
                                     "overflows); the two figures above leave them out, and are NaN when no "
                                     "record is left", "records"),
        "*: records not evaluable (original)": ("original records that miss a column of the rule, or on which "
                                                "double precision cannot decide it", "records"),
    }

    tol: float = param(float, role="plain", default=1e-11, gt=0,
                       doc="a record violates a rule when the violation exceeds tol * (the size of the rule's "
                           "terms, sum |a_j x_j| + |b| for a linear rule), the host's own test")
    rules: tuple[str, ...] | None = param(tuple, default=None, doc="linear edit rules to check instead of the "
                                          "recipe's (e.g. to judge a release made without them)")
    handler: str = param(str, default="linear", doc="the constraint handler that reads rules (resolved through "
                                                     "the registry, so a blocked or swapped one is honoured)")

    def _values(self, frame: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
        """The rules' columns of ``frame``; a column the file lacks (a step
        dropped it) or holds as text is missing (NaN) in every record, so
        the rules over it are not evaluable there (it was read as 0, and a
        rule over it reported as violated by every record)."""
        out = np.full((frame.shape[0], len(columns)), np.nan)
        for j, c in enumerate(columns):
            if c in frame.columns and privclust.is_real_column(frame[c]):
                out[:, j] = frame[c].to_numpy(dtype=float, na_value=np.nan)
        return out

    def _own_rules(self, inputs: EvaluationInputs) -> Any:
        """The ``rules`` parameter bound to the columns they use, parsed by
        the constraint handler ``handler`` of the run's registry."""
        registry = inputs.registry if inputs.registry is not None else privclust.get_registry()
        try:
            handler = registry.create("constraint_handlers", {"use": self.handler, "rules": list(self.rules or ())})
        except (privclust.UnknownComponentError, privclust.RecipeError) as err:
            if self.handler in registry.names("constraint_handlers"):
                raise  # the handler is there: the rules themselves are wrong
            raise privclust.ParameterError(
                f"edit-violations: its 'rules' need the constraint handler {self.handler!r}, which this registry "
                f"does not provide ({str(err).removeprefix('recipe: use: ')}); unblock the plugin that provides it "
                "(the built-in 'linear' is in the plugin 'constraints'), or name an available one with "
                "handler = \"...\"") from None
        problems = handler.check(tuple(map(str, inputs.original.columns)))
        if problems:
            raise DataError(f"edit-violations: {'; '.join(map(str, problems))}")
        return privclust.ConstraintSet.of([handler], tuple(map(str, inputs.original.columns)))

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        """The columns the rules use (the evaluation's columns were named,
        whatever the rules read)."""
        # rules that do not parse or name a column not in the data are refused here too: asked before any step
        # runs (privclust check --input, run's checks), as evaluate() refuses them after every step has run
        rules = self._own_rules(inputs) if self.rules else inputs.constraints
        if rules is None or not rules.rules:
            return {"columns": list(inputs.columns)}
        used = {c for cols in rules.rule_columns for c in cols}  # type: ignore[union-attr]
        return {"columns": [c for c in rules.columns if c in used]}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        rules = self._own_rules(inputs) if self.rules else inputs.constraints
        if rules is None or not rules.rules:
            return {"rules": 0.0}
        columns = tuple(rules.columns)
        out: dict[str, float] = {"rules": float(len(rules.rules))}
        for label, frame in (("", inputs.protected), (" (original)", inputs.original)):
            # the host's own test (privclust.judge): a rule is judged on the records that have all its columns and
            # on which double precision decides it
            # a rule over integer columns only is judged to double precision, as the host's check judges it
            status = privclust.judge(rules, self._values(frame, columns), rtol=self.tol,
                                     integer=privclust.integer_flags(frame, columns))
            for r, text in enumerate(rules.rules):
                evaluable = ~status.undecided[:, r]
                v = status.residuals[evaluable, r]
                # no evaluable record: nothing is known (0 read as "satisfied")
                out[f"{text}: max violation{label}"] = float(np.max(v)) if v.size else float("nan")
                out[f"{text}: share violated{label}"] = float(np.mean(status.violated[evaluable, r])) if v.size \
                    else float("nan")
                if not evaluable.all():
                    out[f"{text}: records not evaluable{label}"] = float((~evaluable).sum())
        return out


# ---------------------------------------------------------------------------
# Categorical key variables (quasi-identifiers)
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class KeyFrequencies:
    """Frequency counts of the combinations of the categorical key variables
    (sdcMicro's ``freqCalc``): how many combinations there are, how many
    records are sample uniques (alone with their combination), and how many
    sit in a cell smaller than ``k``; for the protected file and for the
    original. A missing key value matches any category (sdcMicro's
    convention, as every key figure): a record's cell is the records that
    agree with it on every key both observe, and a combination is a distinct
    row of key values (a missing value counted as one value there)."""

    name: ClassVar[str] = "key-frequencies"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        **{f"{metric}{suffix}": (f"{text} ({where})", unit)
           for suffix, where in (("", "released file"), ("_original", "original file"))
           for metric, text, unit in (
               ("combinations", "distinct combinations of the key variables (a missing value counted as one value "
                                "here)", "combinations"),
               ("sample_uniques", "records no other record matches on the keys and the public strata (a missing "
                                  "key value matches any category: sdcMicro's fk = 1)", "records"),
               ("records_below_k", "records matched by fewer than k records, themselves included (fk < k)",
                "records"),
               ("share_below_k", "share of records matched by fewer than k records (fk < k)", "share (0-1)"),
               ("min_cell_size", "smallest number of records matching a record, itself included (min fk)",
                "records"))},
    }

    keys: tuple[str, ...] = param(tuple, default=(), doc="the categorical key variables (quasi-identifiers; "
                                                        "default: the recipe's [roles] keys)")
    with_strata: bool = mm.strata_param()
    k: int = param(int, default=3, ge=2,
                   doc="the minimum group size: a cell with fewer than k records breaks k-anonymity on the keys")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return {"columns": list(mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name))}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        out: dict[str, float] = {}
        keys = mm.key_role(self.keys, inputs, self.with_strata)
        for suffix, frame, what in (("", inputs.protected, "protected"), ("_original", inputs.original, "original")):
            cells = mm.key_frame(frame, keys, self.name, what)
            sizes, _ = mm.key_frequencies(cells)
            out[f"combinations{suffix}"] = float(len(np.unique(mm.key_cells(cells)[0])))
            out[f"sample_uniques{suffix}"] = float(np.sum(sizes == 1))
            out[f"records_below_k{suffix}"] = float(np.sum(sizes < self.k))
            out[f"share_below_k{suffix}"] = float(np.mean(sizes < self.k))
            out[f"min_cell_size{suffix}"] = float(sizes.min())
        return out


@attrs.frozen(kw_only=True)
class IndividualRisk:
    """The individual re-identification risk of each record through its key
    combination (Benedetti & Franconi 1998; sdcMicro's ``measure_risk``):
    ``E[1/F | f]`` for the sample frequency ``f`` of its cell (the records
    that match it, a missing key value matching any category, as sdcMicro's
    ``freqCalc``) and the population frequency ``F`` estimated from the
    sampling weights (those of
    the original file, as every weighted evaluator reads them: a step that
    masked the weight column does not change how many population units a
    record stands for). Without ``weight`` the file is taken as the whole
    population (risk ``1/f``).
    Figures for the protected file: the mean and largest risk, the expected
    number of re-identifications (sum of the risks) and the records whose
    risk exceeds ``threshold``."""

    name: ClassVar[str] = "individual-risk"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "mean_risk": ("mean individual re-identification risk through the key combination of the released file "
                      "(population frequencies from the original file's weights)", "probability"),
        "max_risk": ("largest individual risk", "probability"),
        "expected_reidentifications": ("expected number of re-identifications (sum of the risks)", "records"),
        "records_above_threshold": ("records whose risk exceeds the evaluator's threshold (its parameter)",
                                    "records"),
        "share_above_threshold": ("share of records whose risk exceeds the evaluator's threshold (its parameter)",
                                  "share (0-1)"),
    }

    keys: tuple[str, ...] = param(tuple, default=(), doc="the categorical key variables (quasi-identifiers; "
                                                        "default: the recipe's [roles] keys)")
    with_strata: bool = mm.strata_param()
    weight: str | None = param(str, default=None, doc="the sampling-weight column, read from the original file "
                                                      "(default: the recipe's [roles] weight, else the file is "
                                                      "the population)")
    threshold: float = param(float, role="plain", default=0.1, gt=0, le=1,
                             doc="a record is at risk above this individual risk")

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        return {"columns": list(mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name)),
                "weight": mm.weight_role(self.weight, inputs)}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        # f and F over the records matching each record (a missing key value matches any category), F from the
        # original file's weights: what a step did to the released weight column does not change how many
        # population units each record stands for
        risk = mm.record_risks(inputs, self.keys, self.with_strata, self.weight, self.name)
        return {
            "mean_risk": float(risk.mean()),
            "max_risk": float(risk.max()),
            "expected_reidentifications": float(risk.sum()),
            "records_above_threshold": float(np.sum(risk > self.threshold)),
            "share_above_threshold": float(np.mean(risk > self.threshold)),
        }


@attrs.frozen(kw_only=True)
class KeyLinkage:
    """Distance-based record linkage on the numeric columns, restricted to
    the records whose keys match: an intruder who knows a person's keys
    computes the released keys from them (the public recoding) and links
    among the released records that match them (a missing value matching
    any category, sdcMicro's convention). For each released record, the
    candidate originals are the records whose keys, as the intruder knows
    them, match its released keys: an original record's released keys, and
    its true key where its released one is missing. A suppression is not a
    function of the record's own keys (which records lose a value depends on
    the whole file), so the intruder, who knows the true keys, rules out a
    suppressed person of another cell; taking the released keys there
    counted every suppressed record as a candidate of its whole stratum and
    understated the risk (a red-team audit: 0.179 against 0.291 on the
    published survey recipe). ``key_dbrl`` is the share of released records
    linked to their own original (ties share the credit). Exactly the
    intruder's candidates after recode without suppression and after
    local-suppression; after recode's own suppression conservative (a
    suppressed record's true key, not recoded, can miss a candidate the
    intruder keeps); after pram conservative too, it may overstate the
    risk, never understate it (a record whose keys pram left alone has the
    intruder's candidates, one it changed is linked where an intruder using
    its true keys would miss it); with unchanged keys the records with the
    same key combination. The numeric part links as :class:`DBRL` does
    (since rt22): by default on the columns the steps worked on and the
    numeric columns released as in the original, the best of the linkages
    on all of them, on each alone and (up to 12 columns) on each set
    leaving one out."""

    name: ClassVar[str] = "key-linkage"
    metric_descriptions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "key_dbrl": ("share of released records linked to their own original among the records whose keys, as an "
                     "intruder who knows the true keys has them (the released keys, the true key where one was "
                     "suppressed), match theirs (a missing key matches any category); the largest over the "
                     "linkages an intruder tries (on all the numeric linkage columns, on each alone, and up to 12 "
                     "columns on each set leaving one out), the intruder knowing the original values of the "
                     "figure's numeric columns (by default those the steps worked on and the numeric ones released "
                     "as in the original); 0 = none linked", "share (0-1)"),
        "key_dbrl_linked_records": ("records so linked (by that linkage)", "records"),
        "key_dbrl_linked_on: *": ("the linkage that gave key_dbrl when a part of the numeric columns gave more "
                                  "than all of them: those columns after the colon (the value is their number)",
                                  "columns"),
    }

    keys: tuple[str, ...] = param(tuple, default=(), doc="the categorical key variables (quasi-identifiers; "
                                                        "default: the recipe's [roles] keys)")
    with_strata: bool = mm.strata_param()
    with_unchanged: bool = _unchanged_param()

    def evaluated_on(self, inputs: EvaluationInputs) -> Mapping[str, Any]:
        keys = mm.named_keys(mm.key_role(self.keys, inputs, self.with_strata), self.name)
        columns = _linkage_columns(inputs, self.with_unchanged, keys)
        return {"columns": [*columns, *(k for k in keys if k not in columns)]}

    def evaluate(self, inputs: EvaluationInputs) -> Mapping[str, float]:
        keys = mm.key_role(self.keys, inputs, self.with_strata)
        columns = _linkage_columns(inputs, self.with_unchanged, keys)
        X, Y = _arrays(attrs.evolve(inputs, columns=tuple(columns)), self.name)
        released = mm.key_frame(inputs.protected, keys, self.name, "protected").astype(object)
        true = mm.key_frame(inputs.original, keys, self.name, "original").astype(object)
        true.index = released.index
        known = released.where(released.notna(), true)  # the intruder knows the keys a suppression hid
        codes = kr.encode(pd.concat([released, known], ignore_index=True))
        n = len(released)

        def link(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
            return mm.dbrl_among_matches(x, y, codes[:n], known=codes[n:], workers=-1)
        best = _best_linkage(X, Y, columns, link)
        share, linked = best.pop("share"), best.pop("linked")
        return {"key_dbrl": share, "key_dbrl_linked_records": linked, **{f"key_dbrl_{k}": v for k, v in best.items()}}


@privclust.hookimpl
def privclust_register_evaluators(register):
    for cls in (SseSst, IL1s, Moments, DBRL, IntervalDisclosure, GroupSizes, TransparencyRisk, EditViolations,
                KeyFrequencies, IndividualRisk, KeyLinkage):
        register(cls)
