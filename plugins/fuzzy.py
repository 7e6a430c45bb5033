"""Built-in clusterers ``fcm`` and ``efcm``: fuzzy c-means and entropy-based
fuzzy c-means, with centres projected onto the recipe's edit rules.

* ``fcm`` (Bezdek 1981; Torra's seed paper, Prop. 1): memberships
  ``u_ki = 1 / sum_j (D_ki / D_kj)^(1/(m-1))``, centres the ``u^m``-weighted
  means; ``m > 1`` (near 1: almost crisp; large: every membership tends to
  1/c).
* ``efcm`` (Miyamoto & Mukaidono 1997; seed Eq. 3-4): memberships
  ``softmax(-lambda D_k.)``, centres the ``u``-weighted means; ``lambda > 0``
  (small: fuzzier).

**Edit rules.** When the step has edit rules (``context.constraints``), every
centre update is the projection of the weighted mean onto the feasible set
(seed Prop. 4 and 6, generalised): for fixed memberships the objective is
``W_i ||v_i - vbar_i||^2 + const``, so the projection of the weighted mean
``vbar_i`` is the constrained optimum. The projection is done in the metric
actually clustered (the standardised one), so the centres are optimal for the
objective minimised and satisfy the rules in the original units.

**Standardisation.** With ``scale = "standard"`` (the default) the records
are clustered as ``z = (x - mean) / sd`` (population sd); centres are reported
in the original units; ``scale = "none"`` clusters the raw values. A constant
column cannot be standardised: it is an error that names the column (leave it
out of the step, or set ``scale = "none"``).

**Scale.** Memberships are computed in row blocks, never as an ``N x c``
matrix beyond ``memory_budget``. With many centres (``c > 1024``) each record
keeps only its ``p`` nearest centres (a KD-tree over the centres), ``p`` chosen
per run by an exact audit on a random sample of records so that the dropped
membership mass stays below ``mass_tol``; when no ``p <= max_neighbours``
reaches it, every pass is exact (blocked) and the diagnostics say so. See
``docs/microaggregation.md``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree
from threadpoolctl import threadpool_limits

import privclust
from privclust import (
    ConstraintError,
    DataError,
    ParameterError,
    Partition,
    PrivacyContext,
    TopMemberships,
    param,
)

from . import _fcm
from .mdav import MISSING_CHOICES

__version__ = "0.1.0"

__all__ = ["EFCM", "FCM", "FuzzyFit", "Standardised", "finite_fuzzifier", "non_finite_memberships",
           "single_threaded_blas", "standardise", "z_projector"]

#: Default fuzzifier of ``fcm`` used on its own.
DEFAULT_M = 2.0
#: Default lambda of ``efcm`` used on its own.
DEFAULT_LAMBDA = 1.0
#: Up to this many centres every pass is exact (cheaper than KD-tree queries).
EXACT_MAX_CENTRES = 1024
#: Records in the exact audit that chooses the number of kept centres.
AUDIT_SIZE = 1000
#: ``n_init = "auto"`` runs 3 restarts while ``N * c`` stays below this, else 1.
AUTO_RESTARTS_WORK = 1_000_000
#: At most this many progress reports per fit.
_PROGRESS_STEPS = 200
#: Share of a clusterer step's progress (in records) given to the fit; the final memberships take the rest.
_FIT_SHARE = 0.9
#: The progress of one restart fills as ``1 - exp(-iteration / this)``.
_ITERATIONS_SCALE = 25.0

#: What ``fcm`` and ``efcm`` do with missing values (``missing = "observed"``).
MISSING_POLICY = ("distances from a record to a centre by the partial distance strategy (Hathaway & Bezdek 2001): "
                  "squared standardised differences over the record's observed variables, scaled by p / p_observed; "
                  "standardisation over the observed values of each column; centres the membership-weighted means "
                  "of the observed values of each column; records with missing values computed exactly (no "
                  "KD-tree truncation)")


# ---------------------------------------------------------------------------
# Shared helpers (also used by the microaggregation maskers)
# ---------------------------------------------------------------------------


def finite_fuzzifier(kind: str) -> Callable[[Any], str | None]:
    """The ``check`` of a fuzzifier parameter (:func:`privclust.param`):
    ``m`` (``kind = "fcm"``) or ``lambda`` (``"efcm"``) must be finite. An
    infinite one passes the bound (``inf > 1``, ``inf > 0``) but gives no
    memberships: ``lambda = inf`` makes them ``0 / 0`` (NaN) and ``m = inf``
    makes every one ``1 / c``."""
    if kind == "fcm":
        text = ("must be a finite number > 1 (m = inf gives every record the same membership 1/c of every "
                "centre; for near-uniform memberships give a large finite m, e.g. 10)")
    else:
        text = ("must be a finite number > 0 (lambda = inf makes every membership 0/0, not a number; for "
                "near-crisp memberships give a large finite lambda, e.g. 1e6)")

    def check(value: Any) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool) and not math.isfinite(float(value)):
            return text
        return None

    return check


def non_finite_memberships(memberships: Any, expected: Any = None) -> int:
    """How many records have a non-finite membership (NaN or infinite) in
    ``memberships`` (a dense ``(N, c)`` matrix or :class:`~privclust.TopMemberships`);
    ``N`` when an expected cluster size ``expected`` is non-finite."""
    if expected is not None and not np.isfinite(np.asarray(expected, dtype=float)).all():
        return int(memberships.shape[0]) if hasattr(memberships, "shape") else int(
            np.asarray(memberships.values).shape[0])
    if isinstance(memberships, TopMemberships):
        bad = ~np.isfinite(np.asarray(memberships.values)).all(axis=1) | ~np.isfinite(np.asarray(memberships.dropped))
    else:
        bad = ~np.isfinite(np.asarray(memberships)).all(axis=1)
    return int(np.count_nonzero(bad))


#: Values larger than this in magnitude are refused: a sum of them (a group
#: mean, a projection) could overflow to infinity.
MAX_MAGNITUDE = 1e300


def finite_values(data: pd.DataFrame, who: str, *, missing: bool = False) -> np.ndarray:
    """The step's columns as a float array (a copy): :func:`privclust.data_matrix`
    (``missing``: NaN passes through), each value at most :data:`MAX_MAGNITUDE`
    in magnitude."""
    values = privclust.data_matrix(data, who, missing=missing)
    with np.errstate(invalid="ignore"):
        huge = np.flatnonzero(np.nanmax(np.abs(values), axis=0, initial=0.0) > MAX_MAGNITUDE)
    if huge.size:
        cols = ", ".join(repr(str(data.columns[j])) for j in huge)
        raise DataError(f"{who}: column(s) {cols} hold values above {MAX_MAGNITUDE:g} in magnitude, where means and "
                        "projections would overflow; rescale them (e.g. divide by a power of ten) before the step")
    return values


@attrs.frozen
class Standardised:
    """Records mapped to the space they are clustered in: ``z = (x - mean) / scale``."""

    z: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    enabled: bool

    def to_original(self, z: np.ndarray) -> np.ndarray:
        return self.mean + z * self.scale

    def to_z(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean) / self.scale


def standardise(values: np.ndarray, columns: Sequence[str], enabled: bool, who: str) -> Standardised:
    """Standardise with the population standard deviation; a constant column
    is a :class:`~privclust.DataError` (it cannot be standardised)."""
    d = values.shape[1]
    incomplete = bool(np.isnan(values).any())
    if not enabled:
        return Standardised(values, np.zeros(d), np.ones(d), False)
    # in units of each column's largest magnitude (a power of two: exact), so that neither the squares of values
    # near 1e300 overflow nor those of values near 1e-300 underflow; with missing values, over the observed ones
    with np.errstate(invalid="ignore"):
        top = np.nanmax(np.abs(values), axis=0, initial=0.0) if values.size else np.zeros(d)
    unit = np.where(top > 0, np.exp2(np.floor(np.log2(np.where(top > 0, top, 1.0)))), 1.0)
    u = values / unit
    mean = np.nanmean(u, axis=0) if incomplete else u.mean(axis=0)
    sd = np.nanstd(u, axis=0) if incomplete else u.std(axis=0)
    # every observed value equal (a threshold relative to the mean once called 1e15 + 100 i constant), or a
    # spread too small for the standard deviation to be a positive double
    with np.errstate(invalid="ignore"):
        low = np.fmin.reduce(values, axis=0, initial=np.inf)
        high = np.fmax.reduce(values, axis=0, initial=-np.inf)
    constant = ~(high > low) | ~(sd > 0)
    if constant.any():
        cols = [f"{columns[j]!r} (every value {low[j]:g})" if not high[j] > low[j] else
                f"{columns[j]!r} (values from {low[j]!r} to {high[j]!r}, too close together to standardise)"
                for j in np.flatnonzero(constant).tolist()]
        raise DataError(
            f"{who}: column(s) {', '.join(cols)} are constant or nearly, so they cannot be standardised and need "
            "no masking; leave them out of the step's columns, or set scale = \"none\""
        )
    return Standardised((u - mean) / sd, mean * unit, sd * unit, True)


def check_constraints(constraints: Any, columns: Sequence[str], who: str) -> Any:
    """The step's edit rules (``None`` when there are none), checked to be
    bound to exactly the step's columns."""
    if constraints is None or not getattr(constraints, "rules", ()):
        return None
    bound = tuple(getattr(constraints, "columns", ()))
    if bound != tuple(columns):
        outside = sorted(set(bound) - set(columns))
        raise ConstraintError(
            f"{who}: the edit rules {list(constraints.rules)} are bound to columns {list(bound)}, but the step "
            f"works on {list(columns)}"
            + (f"; the rules use {outside}, which the step does not have: add them to the step's columns"
               if outside else "; bind the rules to the step's columns")
        )
    return constraints


def z_projector(constraints: Any, std: Standardised) -> Callable[[np.ndarray], np.ndarray] | None:
    """Projection of standardised centres onto the rules: map to the original
    units, project in the metric where column j is divided by its scale
    (the standardised metric), map back."""
    if constraints is None:
        return None
    scale = std.scale

    def project(vz: np.ndarray) -> np.ndarray:
        projected = np.asarray(constraints.project(std.to_original(vz), scale=scale), dtype=float)
        return std.to_z(projected)

    return project


def project_original(constraints: Any, centres: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Centres in the original units, projected onto the rules (a copy)."""
    if constraints is None:
        return np.array(centres, dtype=float, copy=True)
    return np.asarray(constraints.project(np.asarray(centres, dtype=float), scale=scale), dtype=float)


def single_threaded_blas() -> Any:
    """A context in which BLAS runs on one thread. The matrix products here
    are thin (``c x block`` by ``block x d``) and memory-bound: extra BLAS
    threads do not speed them up, and on a busy machine they slow them down
    by an order of magnitude (measured: 3.7 ms against 0.16 ms for a
    216 x 13 by 13 x 1080 product). KD-tree queries still use every core."""
    return threadpool_limits(limits=1, user_api="blas")


def _check_n_init(value: Any) -> str | None:
    if isinstance(value, str):
        return None if value == "auto" else 'must be an integer >= 1 or "auto"'
    return None if value >= 1 else 'must be an integer >= 1 or "auto"'


# ---------------------------------------------------------------------------
# The fit, shared by both clusterers and the fuzzy masker
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FuzzyFit:
    """The result of :meth:`FCM.fit_arrays`: centres and how they were found."""

    centres: np.ndarray  # (c, d) original units, projected
    centres_z: np.ndarray  # (c, d) standardised
    objective: float
    iterations: int
    converged: bool
    restarts: int
    init: str
    relocated: int
    path: str  # "exact" or "truncated"
    neighbours: int | None
    audit_max_dropped: float | None
    fallback: bool


@attrs.frozen(kw_only=True)
class _FuzzyClusterer:
    """Parameters and fit shared by ``fcm`` and ``efcm``."""

    name: ClassVar[str]  # set by fcm and efcm
    kind: ClassVar[str] = ""
    #: Old recipe keys and their new names (the error for an old key names the new one).
    renamed_params: ClassVar[Mapping[str, str]] = {"c": "n_clusters", "standardise": "scale"}

    n_clusters: int | None = param(int, default=None, ge=1,
                                   doc="number of clusters (the papers' c; set by the fuzzy-microaggregation masker "
                                       "when nested)")
    tol: float = param(float, role="plain", default=1e-4, ge=0,
                       doc="stop when the objective falls by at most this fraction from one iteration to the next")
    max_iter: int = param(int, default=300, ge=1, doc="iteration cap per restart")
    n_init: Any = param((int, str), default="auto", check=_check_n_init,
                        doc='restarts from independent k-means++ seeds, best objective kept ("auto": 3 for '
                            "small problems, else 1)")
    scale: str = param(str, default="standard", choices=("standard", "none"),
                       doc='"standard" clusters on (x - mean) / sd (population sd), centres reported in original '
                           'units; "none" on the raw values')
    memory_budget: float = param(float, role="plain", default=256.0, gt=0,
                                 doc="MB: the largest N x c membership matrix returned dense; bounds work arrays")
    mass_tol: float = param(float, role="plain", default=1e-3, gt=0, lt=1,
                            doc="largest membership mass a record may lose when only its nearest centres are kept")
    max_neighbours: int = param(int, default=256, ge=0,
                                doc="most centres a record keeps when truncating (0: never truncate)")
    missing: str = param(str, default="observed", choices=MISSING_CHOICES,
                         doc='missing values (NaN): "observed" measures each record on the variables it has '
                             '(partial distance, scaled by p / p_observed) and centres are weighted means of the '
                             'observed values; "refuse" refuses them')

    # -- parameters ---------------------------------------------------------------

    def missing_values(self) -> str | None:
        """The missing-value policy (``None``: refused), see :data:`MISSING_POLICY`."""
        return MISSING_POLICY if self.missing == "observed" else None

    def fuzzifier(self) -> _fcm.Fuzzifier:  # pragma: no cover - overridden
        raise NotImplementedError

    def min_records(self, n_columns: int) -> int:
        return max(2, self.n_clusters or 2)

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        c = self.n_clusters
        if n_records >= max(2, c or 2):
            return []
        if n_records < 2:
            return [f"{self.name} needs at least {max(2, c or 2)} records" + (f" (n_clusters = {c})" if c else "")
                    + f"; the data have {n_records}"]
        return [f"{self.name}: n_clusters = {c} clusters but only {n_records} records; lower n_clusters (at most "
                f"{n_records})"]

    def step_problems(self) -> list[str]:
        if self.n_clusters is None:
            return [f"{self.name} needs the number of clusters 'n_clusters' when it is a recipe step "
                    "(e.g. n_clusters = 4)"]
        return []

    def _restarts(self, n: int, c: int) -> int:
        if self.n_init == "auto":
            return 3 if n * c <= AUTO_RESTARTS_WORK else 1
        return int(self.n_init)

    @property
    def _budget_bytes(self) -> float:
        return self.memory_budget * 1024.0 ** 2

    # -- the fit -----------------------------------------------------------------

    def fit(self, data: pd.DataFrame, context: PrivacyContext) -> Partition:
        """Cluster the step's columns; centres projected onto the step's rules."""
        who = self.name
        values = finite_values(data, who, missing=self.missing == "observed")
        columns = tuple(str(c) for c in data.columns)
        if self.n_clusters is None:
            raise ParameterError(f"{who} needs the number of clusters 'n_clusters' (e.g. {who}(n_clusters=4), or "
                                 "n_clusters = 4 in a recipe)")
        std = standardise(values, columns, self.scale == "standard", who)
        constraints = check_constraints(context.constraints, columns, who)
        progress = privclust.RecordProgress(context, values.shape[0])
        with single_threaded_blas():
            fit = self.fit_arrays(std, self.n_clusters, context, constraints=constraints, columns=columns,
                                  progress=progress.phase(0.0, _FIT_SHARE))
            partition = self._partition(std, fit, columns, context, constraints,
                                        progress=progress.phase(_FIT_SHARE, 1.0))
        progress.finish()
        return partition

    def fit_arrays(self, std: Standardised, c: int, context: PrivacyContext, *, constraints: Any = None,
                   callback: Callable[[int, np.ndarray], None] | None = None, seed_group: int = 1,
                   progress: Callable[[float], None] | None = None,
                   columns: Sequence[str] | None = None) -> FuzzyFit:
        """The alternating optimisation on standardised records.

        :param callback: called after every centre update with
            ``(iteration, centres in original units)``, the centres already
            projected onto the rules (the property tests use it).
        :param seed_group: with ``g > 1``, the seeds are ``c`` distinct
            records drawn at random (they follow the density; k-means++
            favours outliers, which end as centres of one record), each
            replaced by the mean of its ``g`` nearest records
            (:func:`_fcm.group_seeds`), so that no centre starts on a record
            (the fuzzy-microaggregation masker passes ``k``).
        :param progress: called with the share (0 to 1) of the fit done (a
            :meth:`privclust.RecordProgress.phase`); by default the fit
            reports the step's records itself.
        :param columns: the columns' names, for errors.

        Records with missing values (NaN in ``std.z``) are measured with the
        partial distance (:data:`MISSING_POLICY`) in an exact blocked pass of
        their own; the complete records keep the fast paths.
        """
        who = self.name
        z = std.z
        n = z.shape[0]
        if c > n:
            raise DataError(f"{who}: n_clusters = {c} clusters but only {n} records; lower n_clusters (at most {n})")
        distinct = _fcm.distinct_rows(z)
        if len(distinct) < c:
            raise DataError(f"{who}: the data have only {len(distinct)} distinct records, fewer than n_clusters = "
                            f"{c} clusters; lower n_clusters to at most {len(distinct)}")
        fz = self.fuzzifier()
        project = z_projector(constraints, std)
        budget = self._budget_bytes
        restarts = self._restarts(n, c)
        rngs = context.spawn(restarts + 1)
        many = c > EXACT_MAX_CENTRES
        incomplete = np.isnan(z).any(axis=1)
        missing: _fcm._Missing | None = None
        if incomplete.any() and self.missing != "observed":
            raise DataError(f"{who}: {int(incomplete.sum())} records have missing (NaN) values and {who} refuses "
                            "them (missing = \"refuse\"); impute or drop those records first, or set missing = "
                            "\"observed\"")
        if incomplete.any():
            # records with missing values: an exact pass of their own; the complete ones keep the fast paths.
            # Seeds are drawn from the records with each missing value at its column's mean (seeds only).
            missing = _fcm._Missing(z[incomplete])
            seeds_from = np.where(np.isnan(z), np.nanmean(z, axis=0)[None, :], z)
            z = z[~incomplete]
        else:
            seeds_from = z
        # with many centres, records (and centres) in KD-tree leaf order: cache-friendly queries and sums
        data = _fcm._Data(z[_fcm.spatial_order(z)] if many and z.shape[0] else z)

        def on_update(it: int, vz: np.ndarray) -> None:
            if callback is not None:
                callback(it, project_original(constraints, std.to_original(vz), std.scale))

        if progress is None:
            progress = privclust.RecordProgress(context, n, steps=_PROGRESS_STEPS).phase(0.0, 1.0)

        def done_in(r: int, it: int) -> None:
            # restart r of R owns the share [r/R, (r+1)/R]; the iterations it takes are not known in advance,
            # so its share fills as 1 - exp(-it / _ITERATIONS_SCALE) (most fits converge within ~100 iterations)
            progress((r + 1.0 - math.exp(-it / _ITERATIONS_SCALE)) / restarts)
        best: _fcm.RunResult | None = None
        init_name = ""
        neighbours: int | None = None
        audit_max: float | None = None
        fallback = False
        for r in range(restarts):
            if seed_group > 1:
                # density-following seeds (k-means++ favours outliers, which end as centres of one record)
                v0, _ = _fcm.init_centres(seeds_from, c, rngs[r], distinct=distinct, max_work=0)
                v0 = _fcm.group_seeds(seeds_from, v0, seed_group)
                method = f"means of the {seed_group} nearest records of random distinct records"
            else:
                v0, method = _fcm.init_centres(seeds_from, c, rngs[r], distinct=distinct)
            if many:
                v0 = v0[_fcm.spatial_order(v0)]
            if r == 0:
                init_name = method
                neighbours, audit_max, fallback = (self._choose_path(data, v0, fz, rngs[-1]) if data.n
                                                   else (None, None, False))
            try:
                result = _fcm.run(data.X, v0, fz, tol=self.tol, max_iter=self.max_iter, budget_bytes=budget,
                                  project=project, neighbours=neighbours,
                                  callback=on_update if callback is not None else None,
                                  progress=functools.partial(done_in, r), data=data, missing=missing)
            except _fcm.MissingCentreColumn as err:
                name = columns[err.column] if columns is not None else f"number {err.column}"
                raise DataError(
                    f"{who}: centre {err.centre} gets no observed value of column {name!r}: every record that "
                    "weighs on it misses that column, so its centre value there is undefined; impute or drop the "
                    "records missing it, lower n_clusters, or leave the column out of the step") from None
            progress((r + 1.0) / restarts)
            if best is None or result.objective < best.objective:
                best = result
        assert best is not None
        if not np.isfinite(best.centres).all():
            # defence in depth: a finite fuzzifier keeps the centres finite; never carry NaN centres on
            raise ParameterError(f"{who}: the fit ({fz.describe()}) produced non-finite centres, so no memberships "
                                 "or draw can be made from them; give a finite "
                                 f"{'m' if fz.kind == 'fcm' else 'lambda'} of moderate size (the default is "
                                 f"{DEFAULT_M if fz.kind == 'fcm' else DEFAULT_LAMBDA:g})")
        centres = project_original(constraints, std.to_original(best.centres), std.scale)
        return FuzzyFit(centres=centres, centres_z=std.to_z(centres), objective=best.objective,
                        iterations=best.iterations, converged=best.converged, restarts=restarts, init=init_name,
                        relocated=best.relocated, path=best.path, neighbours=neighbours,
                        audit_max_dropped=audit_max, fallback=fallback)

    def _choose_path(self, data: Any, v0: np.ndarray, fz: _fcm.Fuzzifier,
                     rng: np.random.Generator) -> tuple[int | None, float | None, bool]:
        """``(p, audited max dropped mass, fell back)``: ``p = None`` for exact passes."""
        c = v0.shape[0]
        if c <= EXACT_MAX_CENTRES or self.max_neighbours == 0:
            return None, None, False
        audit = _fcm.audit_tail(data, v0, fz, self.max_neighbours, rng, sample_size=AUDIT_SIZE,
                                budget_bytes=self._budget_bytes)
        p = audit.needed(self.mass_tol)
        if p is None:
            return None, float(audit.at(audit.max_p).max()), True
        return p, float(audit.at(p).max()), False

    # -- memberships of records to given centres ------------------------------------

    def memberships(self, std: Standardised, centres_z: np.ndarray, fz: _fcm.Fuzzifier,
                    context: PrivacyContext, *, draw: bool = False, rng: np.random.Generator | None = None,
                    progress: Callable[[float], None] | None = None) -> Memberships:
        """Memberships of every record to fixed centres (Step 2 of fuzzy
        microaggregation, or the final memberships of a fit), dense when
        ``N x c`` fits the memory budget, else the top memberships per
        record, with the expected cluster sizes and optionally one centre
        drawn per record (Step 3)."""
        return compute_memberships(std.z, centres_z, fz, budget_bytes=self._budget_bytes,
                                   mass_tol=self.mass_tol, max_neighbours=self.max_neighbours,
                                   rng=rng if rng is not None else context.rng, draw=draw, progress=progress)

    def _partition(self, std: Standardised, fit: FuzzyFit, columns: tuple[str, ...], context: PrivacyContext,
                   constraints: Any, progress: Callable[[float], None] | None = None) -> Partition:
        fz = self.fuzzifier()
        mem = self.memberships(std, fit.centres_z, fz, context, progress=progress)
        bad = non_finite_memberships(mem.memberships, mem.expected_sizes)
        if bad:  # defence in depth: a finite fuzzifier keeps them finite
            raise ParameterError(f"{self.name}: the final memberships ({fz.describe()}) are not finite for {bad} "
                                 "records; give a finite "
                                 f"{'m' if fz.kind == 'fcm' else 'lambda'} of moderate size")
        effective: dict[str, Any] = {("m" if fz.kind == "fcm" else "lambda"): fz.value}
        if self.n_init == "auto":
            effective["n_init"] = fit.restarts
        diagnostics = {
            **fit_diagnostics(self, fit),
            **mem.diagnostics(),
            "constrained": constraints is not None,
            "rules": list(constraints.rules) if constraints is not None else [],
            privclust.EFFECTIVE_PARAMS: effective,
        }
        return Partition(labels=mem.nearest, centres=fit.centres, memberships=mem.memberships, columns=columns,
                         diagnostics=diagnostics)


def fit_diagnostics(clusterer: Any, fit: FuzzyFit) -> dict[str, Any]:
    fz = clusterer.fuzzifier()
    return {
        "method": clusterer.name,
        ("m" if fz.kind == "fcm" else "lambda"): fz.value,
        "c": int(fit.centres.shape[0]),
        "iterations": fit.iterations,
        "objective": fit.objective,
        "converged": fit.converged,
        "restarts": fit.restarts,
        "init": fit.init,
        "relocated_centres": fit.relocated,
        "standardised": clusterer.scale == "standard",
        "iteration_path": fit.path,
        "iteration_neighbours": fit.neighbours,
        "iteration_audit_max_dropped": fit.audit_max_dropped,
        "iteration_fallback_exact": fit.fallback,
    }


# ---------------------------------------------------------------------------
# Memberships to fixed centres (dense, exact-blocked or truncated)
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Memberships:
    """Memberships of every record to fixed centres, and how they were computed.

    :ivar memberships: dense ``(N, c)`` array or :class:`~privclust.TopMemberships`.
    :ivar nearest: each record's nearest centre (the argmax membership).
    :ivar expected_sizes: ``sum_k u_ki`` per centre.
    :ivar labels: one centre drawn per record (``None`` unless asked).
    :ivar path: ``"dense"``, ``"exact"`` (blocked, top memberships kept) or
        ``"truncated"`` (each record saw its ``neighbours`` nearest centres).
    :ivar dropped_max, dropped_mean: the membership mass truncation left out
        (exact for ``dense``/``exact``; for ``truncated`` measured exactly on
        an audit sample of ``audit_size`` records).
    :ivar fallback: truncation was wanted (many centres) but no affordable
        number of neighbours reached the tolerance, so the exact path ran.
    """

    memberships: Any
    nearest: np.ndarray
    expected_sizes: np.ndarray
    labels: np.ndarray | None
    path: str
    neighbours: int | None
    dropped_max: float
    dropped_mean: float
    audit_size: int | None
    fallback: bool
    exact_draw: bool
    #: records with missing values, whose memberships were computed exactly (blocked)
    incomplete: int = 0

    def diagnostics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "membership_path": self.path,
            "membership_neighbours": self.neighbours,
            "dropped_mass_max": self.dropped_max,
            "dropped_mass_mean": self.dropped_mean,
            "dropped_mass_audit_records": self.audit_size,
            "membership_fallback_exact": self.fallback,
        }
        if self.incomplete:
            out["membership_records_with_missing_values_exact"] = self.incomplete
        return out


def compute_memberships(z: np.ndarray, centres_z: np.ndarray, fz: _fcm.Fuzzifier, *, budget_bytes: float,
                        mass_tol: float, max_neighbours: int, rng: np.random.Generator, draw: bool = False,
                        progress: Callable[[float], None] | None = None) -> Memberships:
    """Memberships of the records ``z`` to the centres, memory-bounded.

    * ``N x c`` fits ``budget_bytes``: one exact pass returns the dense matrix.
    * Else, with at most ``EXACT_MAX_CENTRES`` centres or when an exact audit
      finds no ``p <= max_neighbours`` whose dropped mass stays below
      ``mass_tol``: one exact blocked pass (normalisers, expected sizes and
      the exact draw), then the top memberships per record from a KD-tree
      query, with their exact dropped mass.
    * Else each record keeps its ``p`` nearest centres; the draw follows the
      renormalised top-``p`` distribution, within total-variation distance
      ``dropped`` of the exact one.

    Records with missing values (NaN in ``z``) are measured with the partial
    distance (:data:`MISSING_POLICY`) in an exact blocked pass of their own (:func:`_fcm.missing_pass`): their
    rows are exact, dense or their top memberships with the exact dropped
    mass; the complete records take the paths above.
    """
    incomplete = np.isnan(z).any(axis=1)
    if incomplete.any():
        return _memberships_with_missing(z, incomplete, centres_z, fz, budget_bytes=budget_bytes,
                                         mass_tol=mass_tol, max_neighbours=max_neighbours, rng=rng, draw=draw,
                                         progress=progress)
    return _complete_memberships(z, centres_z, fz, budget_bytes=budget_bytes, mass_tol=mass_tol,
                                 max_neighbours=max_neighbours, rng=rng, draw=draw, progress=progress)


def _memberships_with_missing(z: np.ndarray, incomplete: np.ndarray, centres_z: np.ndarray, fz: _fcm.Fuzzifier, *,
                              budget_bytes: float, mass_tol: float, max_neighbours: int, rng: np.random.Generator,
                              draw: bool, progress: Callable[[float], None] | None) -> Memberships:
    """:func:`compute_memberships` when some records miss values: the
    complete ones on their usual path, the others exactly, merged."""
    n, c = z.shape[0], centres_z.shape[0]
    ci, ii = np.flatnonzero(~incomplete), np.flatnonzero(incomplete)
    dense = n * c * 8 <= budget_bytes
    part = (_complete_memberships(z[ci], centres_z, fz, budget_bytes=budget_bytes, mass_tol=mass_tol,
                                  max_neighbours=max_neighbours, rng=rng, draw=draw, progress=progress,
                                  dense_ok=dense) if ci.size else None)
    if dense:
        width = None
    elif part is not None:
        width = int(part.memberships.indices.shape[1])
    else:
        width = int(max(1, min(c, max(max_neighbours, 1), budget_bytes // (12 * n))))
    md = _fcm._Missing(z[ii])
    res = _fcm.missing_pass(md, centres_z, fz, budget_bytes=budget_bytes, dense=dense, top=width,
                            draw=rng if draw else None, colsum=True)
    assert res.colsum is not None and res.nearest is not None
    nearest = np.empty(n, dtype=np.int64)
    nearest[ii] = res.nearest
    expected = np.array(res.colsum, copy=True)
    labels = None
    if draw:
        assert res.labels is not None  # missing_pass draws when given a generator
        labels = np.empty(n, dtype=np.int64)
        labels[ii] = res.labels
    if part is not None:
        nearest[ci] = part.nearest
        expected += part.expected_sizes
        if labels is not None:
            assert part.labels is not None  # drawn too (draw=draw)
            labels[ci] = part.labels
    if dense:
        memberships: Any = np.empty((n, c))
        memberships[ii] = res.dense
        if part is not None:
            memberships[ci] = part.memberships
        return Memberships(memberships=memberships, nearest=nearest, expected_sizes=expected, labels=labels,
                           path="dense", neighbours=None, dropped_max=0.0, dropped_mean=0.0, audit_size=None,
                           fallback=False, exact_draw=True, incomplete=int(ii.size))
    assert res.top_indices is not None and res.top_values is not None and res.kept_mass is not None
    idx_type = np.int32 if c < 2**31 else np.int64
    indices = np.empty((n, int(res.top_indices.shape[1])), dtype=idx_type)
    values = np.empty(indices.shape)
    dropped = np.empty(n)
    indices[ii] = res.top_indices
    values[ii] = res.top_values
    dropped[ii] = np.clip(1.0 - res.kept_mass, 0.0, 1.0)
    if part is not None:
        top = part.memberships
        indices[ci] = top.indices
        values[ci] = top.values
        dropped[ci] = top.dropped
    top_all = TopMemberships(indices=indices, values=values, dropped=dropped, n_centres=c)
    if part is not None and part.path == "truncated":  # the audited figures of the truncated records
        dmax, dmean = part.dropped_max, part.dropped_mean
    else:
        dmax, dmean = float(dropped.max()), float(dropped.mean())
    return Memberships(memberships=top_all, nearest=nearest, expected_sizes=expected, labels=labels,
                       path=part.path if part is not None else "exact", neighbours=indices.shape[1],
                       dropped_max=dmax, dropped_mean=dmean, audit_size=part.audit_size if part else None,
                       fallback=part.fallback if part else False, exact_draw=part.exact_draw if part else True,
                       incomplete=int(ii.size))


def _complete_memberships(z: np.ndarray, centres_z: np.ndarray, fz: _fcm.Fuzzifier, *, budget_bytes: float,
                          mass_tol: float, max_neighbours: int, rng: np.random.Generator, draw: bool = False,
                          progress: Callable[[float], None] | None = None, dense_ok: bool = True) -> Memberships:
    """:func:`compute_memberships` of complete records (``dense_ok``: the dense path may be taken)."""
    n = z.shape[0]
    c = centres_z.shape[0]
    data = _fcm._Data(z)
    draw_rng = rng if draw else None
    if dense_ok and n * c * 8 <= budget_bytes:
        res = _fcm.exact_pass(data, centres_z, fz, budget_bytes=budget_bytes, update=False, dense=True,
                              draw=draw_rng, colsum=True, nearest=True, progress=progress)
        assert res.dense is not None and res.colsum is not None and res.nearest is not None
        return Memberships(memberships=res.dense, nearest=res.nearest, expected_sizes=res.colsum,
                           labels=res.labels, path="dense", neighbours=None, dropped_max=0.0, dropped_mean=0.0,
                           audit_size=None, fallback=False, exact_draw=True)
    tree = cKDTree(centres_z)
    p: int | None = None
    fallback = False
    audit = None
    if c > EXACT_MAX_CENTRES and max_neighbours > 0:
        audit = _fcm.audit_tail(data, centres_z, fz, max_neighbours, rng, sample_size=AUDIT_SIZE,
                                budget_bytes=budget_bytes, tree=tree)
        p = audit.needed(mass_tol)
        fallback = p is None
    if p is None:
        # exact blocked pass, then the top memberships with their exact dropped mass
        res = _fcm.exact_pass(data, centres_z, fz, budget_bytes=budget_bytes, update=False, draw=draw_rng,
                              colsum=True, progress=progress)
        assert res.S is not None and res.colsum is not None
        keep = int(max(1, min(c, max(max_neighbours, 1), budget_bytes // (12 * n))))
        indices = np.empty((n, keep), dtype=np.int32 if c < 2**31 else np.int64)
        values = np.empty((n, keep))
        rows = max(1024, int(budget_bytes // (32 * keep)))
        for s in range(0, n, rows):
            e = min(n, s + rows)
            D, idx = _fcm.query(tree, data.X[s:e], keep, -1)
            values[s:e] = _fcm.membership_values(D, fz, S=res.S[s:e])
            indices[s:e] = idx
        kept = values.sum(axis=1)
        dropped = np.clip(1.0 - kept, 0.0, 1.0)
        values /= kept[:, None]
        top = TopMemberships(indices=indices, values=values, dropped=dropped, n_centres=c)
        return Memberships(memberships=top, nearest=indices[:, 0].astype(np.int64), expected_sizes=res.colsum,
                           labels=res.labels, path="exact", neighbours=keep, dropped_max=float(dropped.max()),
                           dropped_mean=float(dropped.mean()), audit_size=None, fallback=fallback,
                           exact_draw=True)
    assert audit is not None
    # records in KD-tree leaf order (cache-friendly queries), results put back in the records' order
    order = _fcm.spatial_order(z)
    res = _fcm.truncated_pass(_fcm._Data(z[order]), centres_z, fz, p, budget_bytes=budget_bytes, update=False,
                              store=True, draw=draw_rng, colsum=True, tree=tree, progress=progress)
    assert res.top_indices is not None and res.top_values is not None and res.colsum is not None
    assert res.nearest is not None

    def back(sorted_rows: np.ndarray) -> np.ndarray:
        out = np.empty_like(sorted_rows)
        out[order] = sorted_rows
        return out

    audited = audit.at(p)
    # exact for the audited records; the audited maximum (a conservative estimate) elsewhere
    dropped = np.full(n, float(audited.max()))
    dropped[audit.sample] = audited
    indices = back(res.top_indices.astype(np.int32) if c < 2**31 else res.top_indices)
    top = TopMemberships(indices=indices, values=back(res.top_values), dropped=dropped, n_centres=c)
    labels = back(res.labels) if res.labels is not None else None
    return Memberships(memberships=top, nearest=back(res.nearest), expected_sizes=res.colsum, labels=labels,
                       path="truncated", neighbours=p, dropped_max=float(audited.max()),
                       dropped_mean=float(audited.mean()), audit_size=int(audit.sample.size), fallback=False,
                       exact_draw=False)


# ---------------------------------------------------------------------------
# The components
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FCM(_FuzzyClusterer):
    """Fuzzy c-means (seed Prop. 1) with centres projected onto the step's
    edit rules (seed Prop. 4, generalised to any linear rules).

    >>> import privclust, privclust.datasets
    >>> from privclust_plugins.fuzzy import FCM
    >>> context = privclust.PrivacyContext(seed=1)
    >>> part = FCM(n_clusters=4, m=1.5).fit(privclust.datasets.table1(), context)
    >>> part.centres.shape, part.memberships.shape
    ((4, 3), (12, 4))
    """

    name: ClassVar[str] = "fcm"
    kind: ClassVar[str] = "fcm"
    fuzzifier_param: ClassVar[str] = "m"  # privclust.FuzzyClusterer

    m: float | None = param(float, role="plain", default=None, gt=1, check=finite_fuzzifier("fcm"),
                            doc="fuzzifier m > 1, finite (unset: 2.0, or the masker's m1 when nested)")

    def fuzzifier(self) -> _fcm.Fuzzifier:
        return _fcm.Fuzzifier("fcm", DEFAULT_M if self.m is None else float(self.m))


@attrs.frozen(kw_only=True)
class EFCM(_FuzzyClusterer):
    """Entropy-based fuzzy c-means (seed Eq. 3-4) with centres projected onto
    the step's edit rules (seed Prop. 6, generalised). Memberships are the
    softmax of ``-lambda D`` computed with the log-sum-exp shift.

    >>> import privclust, privclust.datasets
    >>> from privclust_plugins.fuzzy import EFCM
    >>> part = EFCM(n_clusters=4, lambda_=2.0).fit(privclust.datasets.table1(), privclust.PrivacyContext(seed=1))
    >>> part.centres.shape
    (4, 3)
    """

    name: ClassVar[str] = "efcm"
    kind: ClassVar[str] = "efcm"
    fuzzifier_param: ClassVar[str] = "lambda"  # privclust.FuzzyClusterer

    lambda_: float | None = param(float, role="plain", default=None, gt=0, check=finite_fuzzifier("efcm"),
                                  doc="lambda > 0, finite, smaller is fuzzier (unset: 1.0, or the masker's lambda1 "
                                      "when nested)")

    def fuzzifier(self) -> _fcm.Fuzzifier:
        return _fcm.Fuzzifier("efcm", DEFAULT_LAMBDA if self.lambda_ is None else float(self.lambda_))


@privclust.hookimpl
def privclust_register_clusterers(register):
    register(FCM)
    register(EFCM)
