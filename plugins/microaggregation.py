"""Built-in maskers ``fuzzy-microaggregation`` and ``microaggregation``.

* ``fuzzy-microaggregation`` (Torra's Algorithm 1, with edit constraints):
  cluster into ``c = floor(N / k)`` clusters with FCM (``m1``) or EFCM
  (``lambda1``), centres projected onto the step's edit rules; compute every
  record's memberships to the final centres with ``m2`` (or ``lambda2``);
  replace each record by one centre drawn at random with those
  probabilities. Every released record is a centre, so the released file
  satisfies every edit rule exactly even where the original does not.
  Guarantee: *probabilistic* k-anonymity (expected cluster sizes), which is
  not k-anonymity; the ledger says how many records released a row that
  fewer than k released records share (groups of identical released rows),
  and how many were released with the values the step was given (the
  original ones when it is the first step to change them), both counted on
  the values as released (integer columns rounded as the host rounds them).
* ``microaggregation`` (crisp): any clusterer that yields labels (default
  ``mdav``); each record is replaced by its own group's mean, projected onto
  the edit rules. Guarantee: k-anonymity of the aggregated columns (every
  released combination of them is shared by at least the smallest group
  size records). Groups of one record (released unchanged), or smaller than
  the ``k`` the clusterer was given, are refused.

Parameter names follow the paper: the masker takes ``k`` (or the number of
clusters ``n_clusters``, the paper's ``c``), ``m1`` and ``m2`` (FCM) or
``lambda1`` and ``lambda2`` (EFCM); the nested clusterer takes ``m`` or
``lambda``. ``m1`` *is* the nested clusterer's ``m``, so a
recipe states it once:

* ``m1`` given, the clusterer's ``m`` unset: the clusterer runs with ``m1``;
* the clusterer's ``m`` given, ``m1`` unset: ``m1`` is the clusterer's ``m``;
* both given: they must be equal, else a :class:`~privclust.ParameterError`;
* neither: ``m1 = 1 + 1/(4d)`` for ``d`` columns (:func:`default_m1`): FCM
  memberships decay like ``distance^(-2/(m-1))`` while the number of
  centres within a radius grows like ``radius^d``, so with ``c = N / k``
  centres a fixed ``m`` such as 1.5 spreads each record's probability over
  centres far away once ``d`` exceeds ``2/(m-1) = 4``; ``1 + 1/(4d)`` keeps
  the memberships concentrated on the nearest centres in any dimension;
* ``m2`` unset: ``m2 = m1``.

The same holds for ``lambda1``/``lambda2`` and EFCM's ``lambda`` (default
``lambda1 = 1.0``, EFCM's own). ``lambda1``/``lambda2`` with an FCM
clusterer, or ``m1``/``m2`` with an EFCM clusterer, is an error (name the
clusterer that takes them: ``clusterer = "efcm"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import (
    ComponentSpec,
    DataError,
    Masked,
    ParameterError,
    Partition,
    PrivacyContext,
    nested,
    param,
)

from . import _fcm, _mdav
from ._fuzzy_replacement import (
    _FIT_SHARE,
    PILOT_SIZE,
    SELF_TOL,
    CollapsedCentresWarning,
    FuzzyRegimeWarning,
    UniformMembershipsWarning,
    _identical_group_sizes,
    _integer_columns,
    _measure,
    _nested_policy,
    _pilot,
    _Regime,
    _regime_warnings,
    _release_view,
    _rules_kept,
    _step2,
    default_m1,
    self_centres,
)
from .fuzzy import (
    DEFAULT_LAMBDA,
    FCM,
    check_constraints,
    finite_fuzzifier,
    finite_values,
    fit_diagnostics,
    project_original,
    single_threaded_blas,
    standardise,
)
from .mdav import MISSING_CHOICES

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_K",
    "DEFAULT_LAMBDA1",
    "CollapsedCentresWarning",
    "FuzzyMicroaggregation",
    "FuzzyRegimeWarning",
    "Microaggregation",
    "UniformMembershipsWarning",
    "default_m1",
    "self_centres",
]

#: k when neither ``k`` nor ``n_clusters`` is given (sdcMicro's default aggregation level).
DEFAULT_K = 3

#: lambda1 when neither the masker nor its EFCM clusterer states it.
DEFAULT_LAMBDA1 = DEFAULT_LAMBDA

_FCM_KEYS = ("m1", "m2")
_EFCM_KEYS = ("lambda1", "lambda2")


def _clusterer_view(value: Any, *, defaults: bool = True) -> tuple[str | None, dict[str, Any]]:
    """``(name, stated parameters)`` of a nested clusterer given as a spec or
    an instance: its ``m``, ``lambda`` and ``n_clusters`` in effect (not ``None``; a
    class's own default, e.g. a subclass's ``m = 1.3``, is in effect); with
    ``defaults=False`` only those the caller gave (see
    :func:`privclust.stated_params`)."""
    if value is None:
        return None, {}
    name = value.use if isinstance(value, ComponentSpec) else getattr(type(value), "name", None)
    stated = privclust.stated_params(value, defaults=defaults)
    return name, {k: v for k, v in stated.items() if k in ("m", "lambda", "n_clusters")}


def _family(value: Any) -> str | None:
    """``"fcm"`` when the clusterer's fuzzifier is ``m``, ``"efcm"`` when it
    is ``lambda`` (its ``fuzzifier_param``, :class:`privclust.FuzzyClusterer`),
    ``None`` for another clusterer (or a spec not yet resolved, other than
    the built-in names)."""
    if value is None:
        return None
    if isinstance(value, ComponentSpec):
        return {"fcm": "fcm", "efcm": "efcm"}.get(value.use)
    param = getattr(type(value), "fuzzifier_param", None)
    return {"m": "fcm", "lambda": "efcm"}.get(param) if isinstance(param, str) else None


def _fast_path(clusterer: Any) -> bool:
    """Whether the clusterer offers the built-in fuzzy kernel's array fit
    (``fit_arrays``, the fit on standardised records with a pilot run):
    chosen by what the clusterer can do, not by its class, so a subclass of
    ``fcm`` keeps it and any other :class:`privclust.FuzzyClusterer` runs
    through its ``fit``."""
    return _family(clusterer) is not None and callable(getattr(clusterer, "fit_arrays", None))


@attrs.frozen(kw_only=True)
class FuzzyMicroaggregation:
    """Fuzzy microaggregation (Torra's Algorithm 1) with edit constraints.

    >>> import privclust, privclust.datasets
    >>> from privclust_plugins.microaggregation import FuzzyMicroaggregation
    >>> masker = FuzzyMicroaggregation(k=3, m1=1.5, m2=1.5)
    >>> context = privclust.PrivacyContext(seed=1)
    >>> with context.step(0, "fuzzy", masker.name):
    ...     masked = masker.mask(privclust.datasets.table1(), context)
    >>> masked.data.shape, masked.partition.centres.shape, masked.diagnostics["k"]
    ((12, 3), (4, 3), 3)
    """

    name: ClassVar[str] = "fuzzy-microaggregation"
    #: the released values are centres computed from the records (group means, fuzzy centres): a nested DP
    #: clusterer's releases cover the grouping at most, never these values
    dp_output: ClassVar[bool] = False
    #: Old recipe keys and their new names (the error for an old key names the new one).
    renamed_params: ClassVar[Mapping[str, str]] = {"c": "n_clusters"}

    k: int | None = param(int, default=None, ge=2,
                          doc=f"minimum group size, in expectation (probabilistic k-anonymity): floor(N / k) "
                              f"clusters (default {DEFAULT_K} unless n_clusters is given)")
    n_clusters: int | None = param(int, default=None, ge=1,
                                   doc="the number of clusters directly (the paper's c), instead of k; at most N / 2 "
                                       "(floor(N / n_clusters) >= 2 records per cluster, else a DataError)")
    m1: float | None = param(float, role="plain", default=None, gt=1, check=finite_fuzzifier("fcm"),
                             doc="FCM fuzzifier of Step 1 = the clusterer's m (unset: the clusterer's m, else "
                                 "1 + 1/(4d) for d columns)")
    m2: float | None = param(float, role="plain", default=None, gt=1, check=finite_fuzzifier("fcm"),
                             doc="FCM fuzzifier of the Step 2 replacement probabilities (unset: m1)")
    lambda1: float | None = param(float, role="plain", default=None, gt=0, check=finite_fuzzifier("efcm"),
                                  doc=f"EFCM lambda of Step 1 = the clusterer's lambda (unset: the clusterer's "
                                      f"lambda, else {DEFAULT_LAMBDA1:g})")
    lambda2: float | None = param(float, role="plain", default=None, gt=0, check=finite_fuzzifier("efcm"),
                                  doc="EFCM lambda of the Step 2 replacement probabilities (unset: lambda1)")
    clusterer: Any = nested("clusterers", default="fcm",
                            doc="Step 1 clusterer: fcm (m1, m2), efcm (lambda1, lambda2) or any with centres")
    missing: str = param(str, default="observed", choices=MISSING_CHOICES,
                         doc='missing values (NaN): "observed" (if the clusterer accepts them) measures each record '
                             'on the variables it has, replaces its observed values by the drawn centre\'s and '
                             'releases missing values missing; "refuse" refuses them')

    def missing_values(self) -> str | None:
        """The missing-value policy: ``None`` (refused) with ``missing =
        "refuse"`` or a clusterer that refuses them; else the clusterer's
        distance and centres, the draw's memberships from the observed
        values, missing values released missing."""
        return _nested_policy(self, "Step 2 memberships with the same distance; each record's observed values "
                                    "replaced by the drawn centre's (projected onto the edit rules), its missing "
                                    "values released missing")

    def __attrs_post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise ParameterError("; ".join(problems))

    def _problems(self) -> list[str]:
        problems = []
        who = self.name
        if self.k is not None and self.n_clusters is not None:
            problems.append(f"{who}: give k (n_clusters = floor(N / k)) or n_clusters, not both; got k = {self.k}, "
                            f"n_clusters = {self.n_clusters}")
        m_given = [k for k in _FCM_KEYS if getattr(self, k) is not None]
        lam_given = [k for k in _EFCM_KEYS if getattr(self, k) is not None]
        if m_given and lam_given:
            problems.append(f"{who}: {', '.join(m_given)} belong to FCM and {', '.join(lam_given)} to EFCM; give "
                            "one pair (m1/m2 with clusterer \"fcm\", lambda1/lambda2 with clusterer \"efcm\")")
        name, stated = _clusterer_view(self.clusterer, defaults=False)  # conflicts: only what was given
        family = _family(self.clusterer)
        if family == "fcm" and lam_given:
            problems.append(f"{who}: {', '.join(lam_given)} are EFCM's parameters but the clusterer is {name!r}, "
                            "which takes m; use m1/m2, or set clusterer = \"efcm\"")
        if family == "efcm" and m_given:
            problems.append(f"{who}: {', '.join(m_given)} are FCM's parameters but the clusterer is {name!r}, "
                            "which takes lambda; use lambda1/lambda2, or set clusterer = \"fcm\"")
        if family is None and name is not None and not isinstance(self.clusterer, ComponentSpec):
            own = [k for k in ("m1", "lambda1") if getattr(self, k) is not None]
            if own:
                problems.append(f"{who}: {', '.join(own)} set the Step 1 clusterer's fuzziness, but {name!r} has "
                                "no m or lambda; leave them out (Step 2 uses m2 or lambda2)")
        for key, mine, theirs in (("m", self.m1, stated.get("m")), ("lambda", self.lambda1, stated.get("lambda"))):
            if mine is not None and theirs is not None and float(mine) != float(theirs):
                one = "m1" if key == "m" else "lambda1"
                problems.append(f"{who}: {one} = {mine:g} but the clusterer's {key} = {theirs:g}; {one} is the "
                                f"clusterer's {key}, so state it once (drop one of them)")
        if stated.get("n_clusters") is not None and (self.k is not None or self.n_clusters is not None):
            setting = f"k = {self.k}" if self.k is not None else f"n_clusters = {self.n_clusters}"
            if self.n_clusters is None or int(self.n_clusters) != int(stated["n_clusters"]):
                problems.append(f"{who}: the clusterer's n_clusters = {stated['n_clusters']} and the masker's "
                                f"{setting} both set the number of clusters; state it once (on the masker)")
        return problems

    # -- the runner's checks ---------------------------------------------------------

    def step_problems(self) -> list[str]:
        """The step checks of the Step 1 clusterer as this step runs it, with
        ``n_clusters`` set (the step sets it from ``k`` and the number of
        records when it runs): declared here, because the host would check
        the clusterer as written and refuse an ``fcm`` without
        ``n_clusters``."""
        clusterer = self.clusterer
        check = privclust.capability(clusterer, "step_problems") if attrs.has(type(clusterer)) else None
        if check is None:
            return []
        if "n_clusters" in {f.name for f in attrs.fields(type(clusterer))}:
            try:  # any number will do: the checks ask whether it is set
                clusterer = attrs.evolve(clusterer, n_clusters=2)
                check = privclust.capability(clusterer, "step_problems")
            except (privclust.PrivclustError, ValueError, TypeError):
                pass
        name = type(clusterer).name
        return [f"{self.name}: its clusterer {name}, which it runs as a step: {text}" for text in check() or ()]

    def min_records(self, n_columns: int) -> int:
        direct = self._direct_n_clusters(_clusterer_view(self.clusterer)[1])
        return 2 * (int(direct) if direct is not None else self._k())

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        problem = self._size_problem(n_records, _clusterer_view(self.clusterer)[1])
        return [problem] if problem else []

    def _k(self) -> int:
        return int(self.k) if self.k is not None else DEFAULT_K

    def _direct_n_clusters(self, stated: Mapping[str, Any]) -> Any:
        """``n_clusters`` as given (the masker's, else its clusterer's when ``k`` is not given), or ``None``."""
        return self.n_clusters if self.n_clusters is not None else (
            stated.get("n_clusters") if self.k is None else None)

    def _size_problem(self, n: int, stated: Mapping[str, Any]) -> str | None:
        """Why ``n`` records are too few for the settings (the clusterer's ``stated`` parameters), or ``None``:
        fewer than 2 records per cluster, or fewer than 2k records."""
        who = self.name
        direct = self._direct_n_clusters(stated)
        if direct is not None:
            c = int(direct)
            if n // c >= 2:
                return None
            # a "probabilistic k-anonymity" of k = 1 says nothing; k = 1 is refused the same way
            whose = "n_clusters" if self.n_clusters is not None else "the clusterer's n_clusters"
            largest = (f"give n_clusters = {n // 2} or fewer (floor(N / 2) for N = {n})" if n >= 2 else
                       "no n_clusters works: fuzzy microaggregation needs at least 2 records")
            return (f"{who}: {whose} = {c} leaves fewer than 2 records per cluster for the {n} records "
                    f"(floor(N / n_clusters) = {n // c}, a probabilistic k-anonymity of k = {n // c}, "
                    f"which protects nothing); {largest}, or give k (>= 2) instead")
        k = self._k()
        if k > n:
            return f"{who}: k = {k} but the data have only {n} records; lower k"
        if n < 2 * k:
            return (f"{who}: k = {k} needs at least 2k = {2 * k} records to form two clusters of "
                    f"about k; the data have {n} (lower k, or give n_clusters = 1 to replace every "
                    "record by the mean)")
        return None

    # -- the resolved settings ---------------------------------------------------------

    def resolve(self, clusterer: Any, n: int, d: int) -> tuple[Any, int, int, _fcm.Fuzzifier | None,
                                                             _fcm.Fuzzifier]:
        """The clusterer to run (with n_clusters and m1/lambda1 set), ``c``, the
        reported ``k``, the Step 1 and the Step 2 fuzzifiers."""
        who = self.name
        family = _family(clusterer)
        _, stated = _clusterer_view(clusterer)
        problem = self._size_problem(n, stated)
        if problem:
            raise DataError(problem)
        direct = self._direct_n_clusters(stated)
        c = int(direct) if direct is not None else n // self._k()
        k_report = n // c if direct is not None else self._k()
        changes: dict[str, Any] = {}
        if "n_clusters" in {f.name for f in attrs.fields(type(clusterer))}:
            changes["n_clusters"] = c
        elif family is None:
            raise ParameterError(f"{who}: the clusterer {type(clusterer).name!r} has no parameter 'n_clusters'; "
                                 "fuzzy microaggregation needs a clusterer with n_clusters clusters and centres "
                                 "(fcm, efcm, ...)")
        if family == "fcm":
            m1 = self.m1 if self.m1 is not None else stated.get("m")
            if m1 is None:
                m1 = default_m1(d)
            m2 = self.m2 if self.m2 is not None else m1
            changes["m"] = float(m1)
            step1: _fcm.Fuzzifier | None = _fcm.Fuzzifier("fcm", float(m1))
            step2 = _fcm.Fuzzifier("fcm", float(m2))
        elif family == "efcm":
            l1 = self.lambda1 if self.lambda1 is not None else stated.get("lambda")
            if l1 is None:
                l1 = DEFAULT_LAMBDA1
            l2 = self.lambda2 if self.lambda2 is not None else l1
            changes["lambda_"] = float(l1)
            step1 = _fcm.Fuzzifier("efcm", float(l1))
            step2 = _fcm.Fuzzifier("efcm", float(l2))
        else:
            step1 = None
            if self.m2 is not None:
                step2 = _fcm.Fuzzifier("fcm", float(self.m2))
            elif self.lambda2 is not None:
                step2 = _fcm.Fuzzifier("efcm", float(self.lambda2))
            else:
                raise ParameterError(f"{who}: with the clusterer {type(clusterer).name!r} give m2 (FCM "
                                     "memberships) or lambda2 (EFCM memberships) for Step 2")
        return attrs.evolve(clusterer, **changes), c, k_report, step1, step2

    # -- the masking -----------------------------------------------------------------------

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        """Algorithm 1: cluster, compute the Step 2 memberships, draw one centre per record."""
        with single_threaded_blas():
            return self._mask(data, context)

    def _mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        who = self.name
        values = finite_values(data, who, missing=self.missing == "observed")
        missing = np.isnan(values)
        columns = tuple(str(col) for col in data.columns)
        n = values.shape[0]
        base = context.component("clusterers", self.clusterer)
        clusterer, c, k, step1, step2 = self.resolve(base, n, values.shape[1])
        policy = privclust.capability(clusterer, "missing_values")
        if missing.any() and (policy is None or policy() is None):
            counts = ", ".join(f"column {col!r} has {int(missing[:, j].sum())} missing (NaN) values"
                               for j, col in enumerate(columns) if missing[:, j].any())
            raise DataError(f"{who}: {counts} and the clusterer {type(clusterer).name!r} does not accept missing "
                            "values; use clusterer = \"fcm\" or \"efcm\" (missing = \"observed\"), or impute or "
                            "drop those records first")
        constraints = check_constraints(context.constraints, columns, who)
        fuzzy = _fast_path(clusterer)
        std = standardise(values, columns, getattr(clusterer, "scale", "standard") == "standard"
                          if _family(clusterer) is not None else True, who)
        d = values.shape[1]
        budget = getattr(clusterer, "memory_budget", 256.0) * 1024.0 ** 2
        regime_args = dict(n=n, c=c, k=k, d=d, step1=step1, step2=step2)
        warned = False
        if fuzzy and n > 2 * PILOT_SIZE:
            # a pilot on a random subsample says, before the long run, whether the fuzzifiers are degenerate
            rng = context.spawn(1)[0]
            rows = np.sort(rng.choice(n, size=PILOT_SIZE, replace=False))
            c_pilot = int(min(PILOT_SIZE, max(1, round(c * PILOT_SIZE / n))))
            regime = _pilot(std, rows, clusterer, c_pilot, k, step2, rng, budget, constraints)
            warned = self._warn(regime, std, rows, clusterer, c_pilot, k, rng, budget, constraints, regime_args)
        progress = privclust.RecordProgress(context, n)
        if fuzzy:
            fit = clusterer.fit_arrays(std, c, context, constraints=constraints, seed_group=max(k, 1),
                                       progress=progress.phase(0.0, _FIT_SHARE),
                                       **({"columns": columns} if missing.any() else {}))
            centres = fit.centres
            step1_info = fit_diagnostics(clusterer, fit)
        else:
            part = clusterer.fit(data, context)
            if part.centres is None:
                raise ParameterError(f"{who}: the clusterer {type(clusterer).name!r} returned no centres; fuzzy "
                                     "microaggregation replaces records by centres (use fcm or efcm)")
            centres = project_original(constraints, part.centres, std.scale)
            step1_info = {"method": type(clusterer).name, "c": int(centres.shape[0])}
        if not np.isfinite(centres).all():
            raise ParameterError(f"{who}: Step 1 ({type(clusterer).name}) produced non-finite centres (NaN or "
                                 "infinite), so no record can be replaced by them; give finite, moderate "
                                 "fuzzifiers (m1 or lambda1) or leave them unset")
        integer = _integer_columns(data, context)
        view = _release_view(integer, constraints)
        step2_run = _step2(std, centres, step2, k, budget_bytes=budget,
                           mass_tol=getattr(clusterer, "mass_tol", 1e-3),
                           max_neighbours=getattr(clusterer, "max_neighbours", 256), context=context,
                           # a clusterer of its own reported its records already: Step 2 then adds no progress
                           progress=progress.phase(_FIT_SHARE, 1.0) if fuzzy else None,
                           project=None if constraints is None else (
                               lambda v: project_original(constraints, v, std.scale)),
                           view=view, who=who)
        if fuzzy and not warned and n <= 2 * PILOT_SIZE:
            regime = _measure(std.z, std.to_z(centres), step2_run, std, pilot=False)
            rows = np.arange(n)
            self._warn(regime, std, rows, clusterer, c, k, context.spawn(1)[0], budget, constraints, regime_args)
        progress.finish()
        mem, centres, labels = step2_run.mem, step2_run.centres, step2_run.labels
        protected = centres[labels]
        protected[missing] = np.nan  # a missing value stays missing
        # the counts below are made on the values as released: integer columns rounded as the host rounds them
        released = protected if view is None else view(centres)[labels]
        released[missing] = np.nan
        verbatim = int(np.count_nonzero(((released == values) | missing).all(axis=1)))
        realised = np.bincount(labels, minlength=centres.shape[0])
        identical = _identical_group_sizes(released)
        small_share = float(np.mean(identical < k))  # on the released rows: what the statement says
        expected = step2_run.expected
        diagnostics: dict[str, Any] = {
            "k": k,
            "c": int(centres.shape[0]),
            "c_initial": int(c),
            "light_centres_dropped": int(c - centres.shape[0]),
            "mass_rounds": step2_run.rounds,
            "step1": step1_info,
            ("m1" if step2.kind == "fcm" else "lambda1"): None if step1 is None else step1.value,
            ("m2" if step2.kind == "fcm" else "lambda2"): step2.value,
            "expected_size_min": float(expected.min()),
            "expected_size_mean": float(expected.mean()),
            "expected_size_max": float(expected.max()),
            "realised_size_min": int(realised[realised > 0].min()),
            "realised_size_max": int(realised.max()),
            # groups of identical released rows of the step's columns (missingness pattern included)
            "identical_group_size_min": int(identical.min()),
            "records_in_identical_groups_below_k": int(np.count_nonzero(identical < k)),
            "share_in_identical_groups_below_k": small_share,
            # the drawn labels' clusters (records of one cluster can release different rows: missing values;
            # coinciding centres release one row from several clusters)
            "share_in_realised_cluster_below_k": float(np.mean(realised[labels] < k)),
            "records_on_a_centre": step2_run.on_centre,
            "self_tolerance": f"{SELF_TOL:g} "
                              + ("standard deviations" if std.enabled else "in the column's own units"),
            "integer_columns": [c for c, is_int in zip(columns, integer, strict=True) if is_int],
            "records_only_themselves": step2_run.stuck,
            "verbatim_records": verbatim,
            "exact_draw": mem.exact_draw,
            "constrained": constraints is not None,
            "rules": list(constraints.rules) if constraints is not None else [],
            **mem.diagnostics(),
        }
        if missing.any():
            diagnostics["missing_values"] = int(missing.sum())
            diagnostics["records_with_missing_values"] = int(missing.any(axis=1).sum())
        # the values in use where the recipe left them unset (the report shows them beside the stated ones)
        built = privclust.ComponentSpec.of(clusterer).to_dict()
        if fuzzy and built.get("n_init") == "auto":
            built["n_init"] = fit.restarts  # the restarts "auto" chose
        effective: dict[str, Any] = {"k": k, "n_clusters": int(c), "clusterer": built}
        for key, fz in (("1", step1), ("2", step2)):
            if fz is not None:
                effective[("m" if fz.kind == "fcm" else "lambda") + key] = fz.value
        diagnostics[privclust.EFFECTIVE_PARAMS] = effective
        partition = Partition(labels=labels, centres=centres, memberships=step2_run.memberships, columns=columns,
                              diagnostics=diagnostics)
        context.record(self._statement(columns, n, k, step1, step2, clusterer, mem, small_share, constraints,
                                       diagnostics, expected, protected),
                       claim=privclust.ProbabilisticKAnonymity(k),
                       details={key: diagnostics[key] for key in diagnostics
                                if key not in ("step1", privclust.EFFECTIVE_PARAMS)})
        frame = pd.DataFrame(protected, index=data.index, columns=data.columns)
        return Masked(data=frame, partition=partition, diagnostics=diagnostics)

    def _warn(self, regime: _Regime, std: Any, rows: np.ndarray, clusterer: Any, c: int, k: int,
              rng: np.random.Generator, budget: float, constraints: Any, args: dict[str, Any]) -> bool:
        """Emit the regime's warnings (with the defaults' loss on the same
        records for comparison); ``True`` when any was emitted."""
        import warnings

        found = _regime_warnings(self.name, regime, **args, default_loss=None)
        if not found:
            return False
        d = args["d"]
        default = _fcm.Fuzzifier("fcm", default_m1(d))
        default_loss = None
        if (args["step1"], args["step2"]) != (default, default):
            base = FCM(n_clusters=c, m=default.value, memory_budget=clusterer.memory_budget,
                       mass_tol=clusterer.mass_tol, max_neighbours=clusterer.max_neighbours, scale=clusterer.scale,
                       tol=clusterer.tol)
            default_loss = _pilot(std, rows, base, c, k, default, rng, budget, constraints).loss
        found = _regime_warnings(self.name, regime, **args, default_loss=default_loss)
        for warning in found:
            warnings.warn(warning, stacklevel=4)
        return bool(found)

    def _statement(self, columns: tuple[str, ...], n: int, k: int, step1: Any, step2: Any, clusterer: Any,
                   mem: Any, small_share: float, constraints: Any, dg: dict[str, Any], e: np.ndarray,
                   output: np.ndarray) -> str:
        cols = ", ".join(columns)
        how = f"{type(clusterer).name}" + (f" with {step1.describe()}" if step1 is not None else "")
        rules = (f" and projected onto the edit rules {', '.join(repr(r) for r in constraints.rules)}, "
                 + _rules_kept(constraints, output) if constraints is not None else "")
        c = dg["c"]
        dropped = dg["light_centres_dropped"]
        removed = (f" (c = {dg['c_initial']} at the start; {dropped} of them had an expected cluster size below k "
                   "and merged into their nearest centres, the lightest first, with the memberships recomputed)"
                   if dropped else "")
        ints = dg.get("integer_columns") or []
        rounded = (f"; the integer column{'s' if len(ints) > 1 else ''} {', '.join(ints)} compared with the centre "
                   "rounded as the host releases it after the last step, so a centre that rounds onto the record "
                   "counts as the record itself" if ints else "")
        stuck = int(dg["records_only_themselves"])
        drew = int(dg["records_on_a_centre"]) - stuck
        self_rule = (
            f"A record was never replaced by a centre equal to itself (every value of these columns within "
            f"{dg['self_tolerance']}{rounded})" + (f", except {stuck} record(s) whose every centre was one" if stuck
                                                  else "") + f": {drew} records had such a centre and drew from "
            "their memberships to the other centres, renormalised."
        )
        if stuck:  # every centre within the tolerance of the record (c = 1, or data smaller than the tolerance)
            self_rule += (f" The {stuck} record(s) with no other centre drew one of those within the tolerance of "
                          "themselves (released with their own values only where that centre equals them; the "
                          "verbatim count below says how many).")
        text = (
            f"Fuzzy microaggregation (Torra, Algorithm 1): the values of {cols} of each of the {n} records were "
            f"replaced by one of c = {c} cluster centres found by {how}{rules}{removed}; each record's centre was "
            f"drawn at random with its Step 2 memberships ({step2.describe()}). {self_rule} Probabilistic "
            f"k-anonymity for k = {k}: every centre's expected cluster size (the sum of the probabilities with "
            f"which the records drew it) is at least k; they range from {e.min():.3g} to {e.max():.3g} (mean "
            f"{e.mean():.3g}). {dg['verbatim_records']} records were released with the values of these columns "
            f"the step was given{' (integer columns rounded as released)' if ints else ''}. After the draw, "
            f"{small_share:.1%} of the records ({dg['records_in_identical_groups_below_k']} of {n}) share their "
            f"released values of these columns with fewer than {k - 1} other records (groups of identical "
            f"released rows{', integer columns rounded as released' if ints else ''}"
            f"{', a missing value equal only to a missing value' if dg.get('missing_values') else ''}; the "
            f"smallest has {dg['identical_group_size_min']}). This is not k-anonymity: a released record may be "
            "unique. It covers these columns only and this one release (other releases of these records with "
            "other draws, lined up record by record, average back towards the original values), and it is not "
            "differential privacy."
        )
        if dg.get("missing_values"):
            text += (f" {dg['records_with_missing_values']} records have {dg['missing_values']} missing values, "
                     "released missing: their memberships were computed exactly on the variables they have "
                     "(partial distance, scaled by p / p_observed), and each released its drawn centre on the "
                     "columns it has; the missingness pattern itself is released as in the original.")
        if mem.path == "truncated":
            text += (f" Memberships were truncated to each record's {mem.neighbours} nearest centres; on an exact "
                     f"audit of {mem.audit_size} random records the dropped probability mass was at most "
                     f"{mem.dropped_max:.2g} (mean {mem.dropped_mean:.2g}), so each draw followed a distribution "
                     "within that total-variation distance of the exact Step 2 probabilities.")
        elif mem.fallback:
            text += (" Truncating the memberships to the nearest centres would have dropped more than the "
                     "tolerated probability mass, so they were computed exactly (blocked), and the draw is exact.")
        return text


@attrs.frozen(kw_only=True)
class Microaggregation:
    """Crisp microaggregation: each record is replaced by its group's mean
    (projected onto the step's edit rules); groups from any clusterer that
    yields labels (default ``mdav``: groups of k to 2k - 1 records).

    ``k``, the minimum group size, is the clusterer's ``k``: the masker
    passes it on, so ``mask.k`` sweeps crisp and fuzzy microaggregation
    alike. Stated on both with different values, or given with a clusterer
    that has no ``k``, it is a :class:`~privclust.ParameterError`.
    """

    name: ClassVar[str] = "microaggregation"
    #: the released values are centres computed from the records (group means, fuzzy centres): a nested DP
    #: clusterer's releases cover the grouping at most, never these values
    dp_output: ClassVar[bool] = False

    k: int | None = param(int, default=None, ge=2,
                          doc="minimum group size (k-anonymity level), passed to the clusterer as its k (unset: the "
                              "clusterer's own, mdav's 3)")
    clusterer: Any = nested("clusterers", default="mdav",
                            doc="the clusterer that forms the groups (mdav, or any that labels every record)")
    missing: str = param(str, default="observed", choices=MISSING_CHOICES,
                         doc='missing values (NaN): "observed" (if the clusterer accepts them) replaces each record\'s '
                             'observed values by its group\'s means of the observed values and releases missing values '
                             'missing; "refuse" refuses them')

    def missing_values(self) -> str | None:
        """The missing-value policy: ``None`` (refused) with ``missing =
        "refuse"`` or a clusterer that refuses them; else the clusterer's
        grouping, means over the observed values, missing released missing."""
        return _nested_policy(self, "each record's observed values replaced by its group's means of the observed "
                                    "values (projected onto the edit rules), its missing values released missing")

    def __attrs_post_init__(self) -> None:
        if self.k is not None and not isinstance(self.clusterer, ComponentSpec):
            self._with_k(self.clusterer)  # raises for a conflict or a clusterer without k
        elif self.k is not None and self.clusterer is not None:
            given = privclust.stated_params(self.clusterer).get("k")
            if given is not None and given != self.k:
                raise ParameterError(self._conflict(self.clusterer.use, given))

    def _conflict(self, name: str, given: Any) -> str:
        return (f"{self.name}: k = {self.k} but the clusterer {name!r} has k = {given}; k is the clusterer's "
                "minimum group size, so state it once (on the masker, e.g. k = "
                f"{self.k}, which a sweep of mask.k sets)")

    def _with_k(self, clusterer: Any) -> Any:
        """The clusterer with the masker's ``k`` (the clusterer itself when ``k`` is unset)."""
        if self.k is None:
            return clusterer
        cls = type(clusterer)
        name = getattr(cls, "name", cls.__name__)
        if "k" not in {f.name for f in attrs.fields(cls) if f.init}:
            raise ParameterError(f"{self.name}: k = {self.k} is the minimum group size the clusterer forms, but "
                                 f"{name!r} has no parameter 'k'; leave k out (the groups are those {name!r} "
                                 "forms) or use a clusterer with a minimum group size (mdav)")
        given = privclust.stated_params(clusterer, defaults=False).get("k")
        if given is not None and given != self.k:
            raise ParameterError(self._conflict(name, given))
        return attrs.evolve(clusterer, k=self.k)

    def min_records(self, n_columns: int) -> int | None:
        inner = self.clusterer
        fn = getattr(inner, "min_records", None)
        if callable(fn) and not isinstance(inner, ComponentSpec):
            return self._with_k(inner).min_records(n_columns)
        if self.k is not None:
            return int(self.k)
        if isinstance(inner, ComponentSpec) and isinstance(inner.params.get("k"), int):
            return int(inner.params["k"])
        return 2

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        """The clusterer's, as it will run (with this step's ``k``)."""
        inner = self.clusterer
        sized = None if isinstance(inner, ComponentSpec) else privclust.capability(self._with_k(inner),
                                                                                    "size_problems")
        return list(sized(n_records, n_columns) or ()) if sized is not None else []

    def _check_group_sizes(self, clusterer: Any, sizes: np.ndarray, k: int, n: int) -> None:
        """Refuse groups smaller than 2 records, or smaller than the ``k`` the
        clusterer was asked for: a group of one record releases that record
        unchanged (its mean is itself), and a group below ``k`` breaks the
        k-anonymity the recipe asked for. A disclosure officer who asked for
        microaggregation gets groups of at least ``max(2, k)`` or an error,
        never a release whose k-anonymity claim is weaker than the recipe says."""
        smallest = int(sizes.min())
        need = max(2, k)
        if smallest >= need:
            return
        name = type(clusterer).name
        small = int(sizes[sizes < need].sum())
        n_clusters = getattr(clusterer, "n_clusters", None)
        formed = f"{name!r}" + (f" (n_clusters = {n_clusters})" if n_clusters is not None else "")
        if k >= 2 and getattr(clusterer, "k", None) is not None:
            raise ParameterError(
                f"{self.name}: k = {k} asks for groups of at least {k} records, but the clusterer {formed} formed a "
                f"group of {smallest} ({small} of the {n} records are in groups of fewer than {k}), so k-anonymity "
                f"with k = {k} does not hold and the step is refused. To fix: use clusterer = \"mdav\" (groups of "
                f"k to 2k - 1 records), or a clusterer that keeps its minimum group size k")
        fix = ((f"lower the clusterer's n_clusters (at most {n // 2} for {n} records; {name!r} sets no minimum "
                "group size, so even then a group may be too small), or " if n_clusters is not None else "")
               + "use clusterer = \"mdav\" with k, the minimum group size (e.g. k = 3)")
        raise ParameterError(
            f"{self.name}: the clusterer {formed} formed groups as small as {smallest} record ({small} of the {n} "
            "records are in groups of one); a group of one record is released unchanged (its mean is the record), "
            f"so there is no k-anonymity to claim and the step is refused. To fix: {fix}")

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        """Group with the clusterer, replace each record by its group's (projected) mean."""
        who = self.name
        values = finite_values(data, who, missing=self.missing == "observed")
        missing = np.isnan(values)
        columns = tuple(str(col) for col in data.columns)
        n, d = values.shape
        clusterer = self._with_k(context.component("clusterers", self.clusterer))
        if missing.any() and privclust.capability(clusterer, "missing_values") is None:
            raise DataError(f"{who}: the data have {int(missing.sum())} missing values and the clusterer "
                            f"{type(clusterer).name!r} does not accept missing values; use clusterer = \"mdav\", or "
                            "impute or drop those records first")
        constraints = check_constraints(context.constraints, columns, who)
        part = clusterer.fit(data, context)
        labels = np.asarray(part.labels, dtype=np.int64)
        if labels.shape != (n,):
            raise DataError(f"{who}: the clusterer {type(clusterer).name!r} returned {labels.shape} labels for "
                            f"{n} records")
        if (labels < 0).any():
            raise DataError(f"{who}: the clusterer {type(clusterer).name!r} left {int((labels < 0).sum())} records "
                            "without a group (label -1); microaggregation needs every record in a group (use mdav "
                            "or a clusterer that assigns every record)")
        groups, labels = np.unique(labels, return_inverse=True)
        g = groups.size
        means, sizes = _mdav.group_means(values, labels, g)
        sd = np.nanstd(values, axis=0) if missing.any() else values.std(axis=0)
        scale = np.where(sd > 0, sd, 1.0)
        if missing.any() and constraints is not None:
            centres = _mdav.project_centres(constraints, means, scale, np.nanmean(values, axis=0))
        else:
            centres = project_original(constraints, means, scale)
        protected = centres[labels]
        protected[missing] = np.nan  # a missing value stays missing
        k_param = getattr(clusterer, "k", None)
        k = int(k_param) if isinstance(k_param, int | np.integer) and not isinstance(k_param, bool) else int(
            sizes.min())
        self._check_group_sizes(clusterer, sizes, k, n)
        diagnostics: dict[str, Any] = {
            "k": k,
            "groups": int(g),
            "group_size_min": int(sizes.min()),
            "group_size_max": int(sizes.max()),
            "group_size_mean": float(sizes.mean()),
            "clusterer": type(clusterer).name,
            "constrained": constraints is not None,
            "rules": list(constraints.rules) if constraints is not None else [],
            "missing_values": int(missing.sum()),
            "records_with_missing_values": int(missing.any(axis=1).sum()),
        }
        rules = (f" Group means were projected onto the edit rules {', '.join(repr(r) for r in constraints.rules)}, "
                 + _rules_kept(constraints, protected) + "." if constraints is not None else "")
        statement = (
            f"Crisp microaggregation with {type(clusterer).name!r}: the {n} records were partitioned into {g} "
            f"groups of {sizes.min()} to {sizes.max()} records and each record's values of {', '.join(columns)} "
            f"were replaced by its group's mean. k-anonymity of these columns with k = {int(sizes.min())}: every "
            f"released combination of their values is shared by at least {int(sizes.min())} records.{rules} "
            "It says nothing about the other columns (a combination with them may be unique), does not protect "
            "against attribute disclosure within a homogeneous group, and is not differential privacy."
        )
        if missing.any():
            statement += (f" {int(missing.any(axis=1).sum())} records have {int(missing.sum())} missing values, "
                          "released missing: within a group every record releases the same centre on the columns "
                          "it has, so with a missing value counted as matching any value (sdcMicro's convention) "
                          "each released record matches at least the records of its group; the missingness pattern "
                          "itself is released as in the original.")
        # the statement claims the smallest group's size, at least k: the claim the host checks
        context.record(statement, claim=privclust.KAnonymity(int(sizes.min())),
                       details={**diagnostics, "k": int(sizes.min())})
        partition = Partition(labels=labels, centres=centres, memberships=None, columns=columns,
                              diagnostics=diagnostics)
        frame = pd.DataFrame(protected, index=data.index, columns=data.columns)
        return Masked(data=frame, partition=partition, diagnostics=diagnostics)


@privclust.hookimpl
def privclust_register_maskers(register):
    register(FuzzyMicroaggregation)
    register(Microaggregation)
