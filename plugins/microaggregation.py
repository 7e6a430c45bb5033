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

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

import privclust
from privclust import (
    ComponentSpec,
    DataError,
    Masked,
    ParameterError,
    Partition,
    PrivacyContext,
    TopMemberships,
    nested,
    param,
)

from . import _fcm, _mdav
from .fuzzy import (
    DEFAULT_LAMBDA,
    FCM,
    check_constraints,
    compute_memberships,
    finite_fuzzifier,
    finite_values,
    fit_diagnostics,
    non_finite_memberships,
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
]

#: k when neither ``k`` nor ``n_clusters`` is given (sdcMicro's default aggregation level).
DEFAULT_K = 3


def default_m1(n_columns: int) -> float:
    """m1 when neither the masker nor its FCM clusterer states it: ``1 + 1/(4d)``."""
    return 1.0 + 1.0 / (4.0 * max(int(n_columns), 1))

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


#: A centre is a record "itself" when every value of the step's columns lies
#: within this many standard deviations of the record's (exact equality
#: included; in the clustering metric, raw units with scale = "none").
SELF_TOL = 1e-9
#: Rounds of the mass rule in which a light centre next to one that just
#: merged waits to be re-measured; later rounds merge every light centre
#: whose estimated mass is below k (fewer rounds on large data).
WAIT_ROUNDS = 3
#: Nearest centres listed per light centre when merging.
_NEIGHBOURS = 8


@attrs.frozen(kw_only=True)
class _Step2:
    """Steps 2-3 after the mass rule and the self rule."""

    mem: Any  # the memberships pass of the kept centres
    centres: np.ndarray  # kept centres, original units
    labels: np.ndarray
    memberships: Any  # dense or TopMemberships, self rule applied
    expected: np.ndarray  # expected sizes of the draw, self rule applied
    rounds: int
    on_centre: int
    stuck: int


def self_centres(z: np.ndarray, centres_z: np.ndarray, tol: float = SELF_TOL) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(rows, centres)``: the records that have a centre equal to
    themselves within ``tol`` on every (standardised) column, and those
    centres (a KD-tree query in the maximum norm). A record with missing
    values is compared on the columns it has (they are what it releases;
    one KD-tree per missingness pattern, over those columns); a record with
    no observed value releases nothing and has no such centre."""
    nan = np.isnan(z)
    if nan.any():
        return _self_centres_missing(z, nan, centres_z, tol)
    tree = cKDTree(centres_z)
    dist, _ = tree.query(z, k=1, p=np.inf, distance_upper_bound=tol, workers=-1)
    rows = np.flatnonzero(np.isfinite(dist))
    if rows.size == 0:
        return rows, []
    found = tree.query_ball_point(z[rows], r=tol, p=np.inf)
    return rows, [np.asarray(sorted(f), dtype=np.int64) for f in found]


def _self_centres_missing(z: np.ndarray, nan: np.ndarray, centres_z: np.ndarray,
                          tol: float) -> tuple[np.ndarray, list[np.ndarray]]:
    found: dict[int, np.ndarray] = {}
    patterns, inverse = np.unique(nan, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    for g, pattern in enumerate(patterns):
        seen = ~pattern
        if not seen.any():
            continue
        members = np.flatnonzero(inverse == g)
        tree = cKDTree(centres_z[:, seen])
        near = tree.query_ball_point(z[np.ix_(members, seen)], r=tol, p=np.inf)
        for row, hits in zip(members, near, strict=True):
            if hits:
                found[int(row)] = np.asarray(sorted(hits), dtype=np.int64)
    rows = np.array(sorted(found), dtype=np.int64)
    return rows, [found[int(r)] for r in rows]


def _merge_light(cz: np.ndarray, mass: np.ndarray, k: float, *,
                 wait: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One round of the mass rule: the light centres, lightest first, each
    merged into its nearest centre (at their mass-weighted mean, the merged
    mass estimated as the sum). A light centre next to one that already
    merged this round waits for the next round (the records of the merged
    centre moved, so its mass is re-measured first); so does one whose
    estimate reached ``k`` (with ``wait = False`` only the latter). Returns
    the surviving centre indices, their positions (standardised) and which
    of them absorbed a centre (moved). The lightest centre always merges, so every
    round removes at least one centre."""
    c = cz.shape[0]
    pos = np.array(cz, dtype=float, copy=True)
    est = np.array(mass, dtype=float, copy=True)
    alive = np.ones(c, dtype=bool)
    light = np.flatnonzero(mass < k)
    order = light[np.argsort(mass[light], kind="stable")]
    q = int(min(c, _NEIGHBOURS + 1))
    _, near = cKDTree(cz).query(cz[order], k=q, workers=-1)
    near = np.asarray(near).reshape(order.size, q)
    touched = np.zeros(c, dtype=bool)
    for row, i in enumerate(order):
        if not alive[i] or est[i] >= k:
            continue
        if wait and row > 0 and touched[near[row]].any():
            # a neighbour merged this round: its records moved, so this mass is re-measured next round
            continue
        target = -1
        for j in near[row]:
            if j != i and alive[j]:
                target = int(j)
                break
        if target < 0:  # every listed neighbour has merged away: search the survivors
            live = np.flatnonzero(alive & (np.arange(c) != i))
            if live.size == 0:
                break
            _, t = cKDTree(pos[live]).query(pos[i], k=1)
            target = int(live[int(t)])
        total = est[i] + est[target]
        pos[target] = (pos[i] * est[i] + pos[target] * est[target]) / max(total, 1e-300)
        est[target] = total
        alive[i] = False
        touched[i] = touched[target] = True
    keep = np.flatnonzero(alive)
    return keep, pos[keep], touched[keep]


def _refresh_rows(z: np.ndarray, cz: np.ndarray, fz: _fcm.Fuzzifier, idx: np.ndarray, val: np.ndarray,
                  p: int, budget_bytes: float = 256.0 * 1024.0 ** 2) -> tuple[np.ndarray, np.ndarray]:
    """The truncated rows after a merge round: rows marked ``-1`` (they held a
    merged or moved centre) are computed again over their ``p`` nearest
    centres; the others keep their values (an estimate: a moved centre may
    have come among their nearest, which the next full pass measures).
    Records with missing values find their nearest centres exactly."""
    redo = np.flatnonzero(idx[:, 0] < 0)
    gaps = np.isnan(z[redo]).any(axis=1) if redo.size else np.zeros(0, dtype=bool)
    if gaps.any():
        rows = redo[gaps]
        redo = redo[~gaps]
        q = int(min(p, cz.shape[0]))
        near, values = _fcm.missing_nearest(_fcm._Missing(z[rows]), cz, q, fz, budget_bytes=budget_bytes)
        width = idx.shape[1]
        if q < width:
            near = np.hstack([near, np.zeros((rows.size, width - q), dtype=np.int64)])
            values = np.hstack([values, np.zeros((rows.size, width - q))])
        idx[rows] = near[:, :width]
        val[rows] = values[:, :width] / values[:, :width].sum(axis=1, keepdims=True)
    if redo.size:
        p = int(min(p, cz.shape[0]))
        D, near = _fcm.query(cKDTree(cz), z[redo], p, -1)
        if p < idx.shape[1]:  # fewer centres than the row width: pad with zero weights
            D = np.hstack([D, np.full((redo.size, idx.shape[1] - p), np.inf)])
            near = np.hstack([near, np.zeros((redo.size, idx.shape[1] - p), dtype=np.int64)])
        values = _fcm.membership_values(D, fz)
        idx[redo] = near
        val[redo] = np.nan_to_num(values / values.sum(axis=1, keepdims=True))
    return idx, val


def _step2(std: Any, centres: np.ndarray, fz: _fcm.Fuzzifier, k: int, *, budget_bytes: float, mass_tol: float,
           max_neighbours: int, context: PrivacyContext | _PilotContext, project: Any = None,
           progress: Callable[[float], None] | None = None,
           view: Callable[[np.ndarray], np.ndarray] | None = None,
           who: str = "fuzzy-microaggregation") -> _Step2:
    """Step 2 and the draw, under two rules checked on the final memberships:

    * **mass**: every centre's expected cluster size (the sum over records of
      the probability of drawing it) is at least ``k``. While a centre is
      lighter, the light centres merge into their nearest centres
      (:func:`_merge_light`) and the memberships are computed again (on the
      truncated path, between two full passes, only for the records that
      held a merged or moved centre; the rule is always checked on a full
      pass, the one whose memberships the draw uses). Removing a centre
      never lowers another's mass (memberships are normalised weights that
      depend on each centre's own distance only), so the rounds end, at the
      latest with one centre.
    * **self**: a record is never replaced by a centre equal to itself
      (:data:`SELF_TOL`); it draws from its memberships to the other centres,
      renormalised (the masses above already count that). With ``view``
      (centres in original units -> the values the host releases for them,
      e.g. integer columns rounded: :func:`_release_view`), a centre is
      compared with the record as it will be released.

    Non-finite memberships (or a non-finite fuzzifier) are refused with a
    :class:`~privclust.ParameterError` naming the step, before any drawn
    centre is used: nothing is released from them.
    """
    if not math.isfinite(fz.value):
        raise ParameterError(f"{who}: Step 2 (the replacement probabilities) needs a finite fuzzifier; got "
                             f"{fz.describe()}; give a finite {'m2' if fz.kind == 'fcm' else 'lambda2'}")
    keep = np.arange(centres.shape[0])
    rounds = 0
    full = True
    top_idx: np.ndarray | None = None  # the truncated path's rows, kept between rounds
    top_val: np.ndarray | None = None
    while True:
        cz = std.to_z(centres[keep])
        if full:
            mem = compute_memberships(std.z, cz, fz, budget_bytes=budget_bytes, mass_tol=mass_tol,
                                      max_neighbours=max_neighbours, rng=context.rng, draw=True,
                                      progress=progress)
            _refuse_non_finite(who, fz, mem.memberships, mem.expected_sizes)
            rows, own = self_centres(std.z, cz if view is None else std.to_z(view(centres[keep])))
            expected = np.array(mem.expected_sizes, dtype=float)
            sub = None
            if rows.size:
                width = cz.shape[0] if mem.path == "dense" else mem.memberships.indices.shape[1]
                rows, own, sub = _self_rows(std, rows, own, cz, fz, width=width, budget_bytes=budget_bytes,
                                            p=mem.neighbours if mem.path == "truncated" else None, rng=context.rng)
                expected += sub.colsum_new - sub.colsum_old
                _refuse_non_finite(who, fz, sub.values, expected)
            if mem.path == "truncated":
                top_idx = np.array(mem.memberships.indices, dtype=np.int64)
                top_val = np.array(mem.memberships.values)
        else:
            # between verified passes: only the records that kept a merged or moved centre are recomputed
            assert top_idx is not None and top_val is not None and mem.neighbours is not None
            top_idx, top_val = _refresh_rows(std.z, cz, fz, top_idx, top_val, mem.neighbours, budget_bytes)
            expected = np.bincount(top_idx.ravel(), weights=top_val.ravel(), minlength=cz.shape[0])
        light = expected < k
        if keep.size == 1 or not light.any():
            if full:
                break
            full = True  # the final memberships are always a full pass: the rule is checked on them
            continue
        stay, moved_z, absorbed = _merge_light(cz, expected, k, wait=rounds < WAIT_ROUNDS)
        centres = centres.copy()
        if absorbed.any():
            moved = std.to_original(moved_z[absorbed])
            centres[keep[stay[absorbed]]] = project(moved) if project is not None else moved
        # old index -> new index (-1: merged away); "changed": merged away or moved
        remap = np.full(keep.size, -1, dtype=np.int64)
        remap[stay] = np.arange(stay.size)
        changed = remap < 0
        changed[stay[absorbed]] = True
        if top_idx is not None and mem.path == "truncated":
            affected = changed[top_idx].any(axis=1)
            top_idx = np.where(affected[:, None], -1, remap[top_idx])
        keep = keep[stay]
        rounds += 1
        full = mem.path != "truncated"
    assert mem.labels is not None
    labels = np.array(mem.labels, copy=True)
    memberships = mem.memberships
    stuck = 0
    if sub is not None:
        assert sub.labels is not None
        labels[rows] = sub.labels
        stuck = int(sub.stuck.sum())
        if mem.path == "dense":
            memberships = np.array(memberships, copy=True)
            dense = np.zeros((rows.size, cz.shape[0]))
            np.put_along_axis(dense, sub.indices, sub.values * (1.0 - sub.dropped)[:, None], axis=1)
            memberships[rows] = dense
        else:
            top = memberships
            indices, values = np.array(top.indices, copy=True), np.array(top.values, copy=True)
            dropped = np.array(top.dropped, copy=True)
            indices[rows] = sub.indices
            values[rows] = sub.values
            if mem.path != "truncated":
                dropped[rows] = sub.dropped
            memberships = TopMemberships(indices=indices, values=values, dropped=dropped, n_centres=cz.shape[0])
    return _Step2(mem=mem, centres=centres[keep], labels=labels, memberships=memberships, expected=expected,
                  rounds=rounds, on_centre=int(rows.size), stuck=stuck)


def _rules_kept(constraints: Any, values: np.ndarray) -> str:
    """How the step's output ``values`` (before the host rounds integer
    columns: its rounding entry speaks for that) stand against its edit
    rules, for its statement: "so every released record satisfies them" only when that
    is so (the host's own test: ``ConstraintSet.satisfied``), else how many
    records with all the rules' columns observed still break them (rules
    given in separate ``[[constraints]]`` tables that cannot all be met, or
    a projection that stopped short)."""
    observed = ~np.isnan(values).any(axis=1)
    broken = int(np.count_nonzero(observed & ~constraints.satisfied(np.where(np.isnan(values), 0.0, values))))
    if not broken and observed.all():
        return "so every released record satisfies them"
    if not broken:  # a record with a missing value neither satisfies nor breaks a rule over it
        return (f"so every released record with all these columns observed satisfies them ({int((~observed).sum())} "
                "with a missing value cannot be checked against them)")
    return (f"yet {broken} of the {int(observed.sum())} released records with all these columns observed still "
            "break them (the rules could not all be met together; the host's check of each rule says which)")


def _integer_columns(data: pd.DataFrame, context: Any = None) -> np.ndarray:
    """Which columns of the step's data the host releases as integers,
    rounding the step's output after the last step
    (:func:`privclust.runner.release_integers`): those the run's context
    names (``context.integer_columns``: the input's integer columns, which
    hold floats when an earlier step changed them), and those with an
    integer dtype (numpy ``int*``/``uint*``, pandas ``Int*``/``UInt*``; not
    boolean), which is all a context outside a run can tell."""
    named = getattr(context, "integer_columns", None) or ()
    return np.array([c in named or (pd.api.types.is_integer_dtype(data[c]) and not pd.api.types.is_bool_dtype(data[c]))
                     for c in data.columns], dtype=bool)


def _release_view(integer: np.ndarray, constraints: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """Points in original units -> the values the host releases for them:
    the integer columns rounded as the host rounds them after the last step
    (each edit-rule handler's controlled rounding, ``round_integers``, with
    the tables the host rounds together joined, ``joined_with``; then every
    integer column to the nearest integer); ``None`` without integer
    columns. The host's rounding is a function of each released row alone
    (a record with a missing value may instead take the rounded values of
    the complete records it matches), so a centre's released values are
    known before the draw."""
    if not integer.any():
        return None
    parts: list[Any] = []
    for part in (tuple(getattr(constraints, "parts", ())) if constraints is not None else ()):
        for i, earlier in enumerate(parts):  # tables the host rounds together (joined_with), joined here too
            join = privclust.capability(earlier, "joined_with")
            joined = join(part) if join is not None and privclust.capability(part, "round_integers") else None
            if joined is not None:
                parts[i] = joined
                break
        else:
            parts.append(part)
    methods = [m for m in (privclust.capability(part, "round_integers") for part in parts) if m is not None]

    def view(points: np.ndarray) -> np.ndarray:
        Y = np.array(points, dtype=float, copy=True)
        done = np.zeros(Y.shape[1], dtype=bool)
        for method in methods:
            out = np.array(method(Y, integer, done), dtype=float, copy=True)
            out[:, done] = Y[:, done]
            done |= ~np.all((out == Y) | (np.isnan(out) & np.isnan(Y)), axis=0)
            Y = out
        Y[:, integer] = np.rint(Y[:, integer])
        return Y

    return view


def _identical_group_sizes(released: np.ndarray) -> np.ndarray:
    """Per record, how many records release the same row (a missing value
    equals a missing value, so the missingness pattern is part of the row;
    the host counts groups of identical released rows the same way)."""
    nan = np.isnan(released)
    keys = np.hstack([np.where(nan, 0.0, released), nan.astype(float)]) if nan.any() else released
    keys = keys + 0.0  # -0.0 and 0.0 are the same released value
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    return counts[np.asarray(inverse).ravel()]


def _refuse_non_finite(who: str, fz: _fcm.Fuzzifier, memberships: Any, expected: Any) -> None:
    """Refuse the Step 2 memberships when any is not finite (NaN or
    infinite): a draw from them is not a draw with those probabilities, and
    every figure of the ledger computed from them would be NaN."""
    bad = non_finite_memberships(memberships, expected)
    if bad:
        raise ParameterError(
            f"{who}: Step 2 (the replacement probabilities, {fz.describe()}) gave non-finite memberships (NaN or "
            f"infinite) for {bad} records, so no centre can be drawn with them; refused before the draw is used "
            f"(nothing is released). Give a finite {'m2 (and m1)' if fz.kind == 'fcm' else 'lambda2 (and lambda1)'} "
            "of moderate size, or leave them unset for the defaults")


def _self_rows(std: Any, rows: np.ndarray, own: list[np.ndarray], cz: np.ndarray, fz: _fcm.Fuzzifier, *,
               width: int, budget_bytes: float, p: int | None,
               rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray], _fcm.SubsetRows]:
    """The self rule's rows (:func:`_fcm.subset_rows`); records with missing
    values computed exactly with their own distance, after the complete ones."""
    gaps = np.isnan(std.z[rows]).any(axis=1)
    if not gaps.any():
        return rows, own, _fcm.subset_rows(std.z[rows], cz, fz, own, p=p, width=width,
                                           budget_bytes=budget_bytes, rng=rng)
    first, second = np.flatnonzero(~gaps), np.flatnonzero(gaps)
    a = _fcm.subset_rows(std.z[rows[first]], cz, fz, [own[i] for i in first], p=p, width=width,
                         budget_bytes=budget_bytes, rng=rng)
    b = _fcm.subset_rows(std.z[rows[second]], cz, fz, [own[i] for i in second], p=None, width=width,
                         budget_bytes=budget_bytes, rng=rng)
    w = min(a.indices.shape[1], b.indices.shape[1]) if first.size else b.indices.shape[1]
    if first.size and b.indices.shape[1] > w:  # same width as the complete rows (renormalised over them)
        b.values = b.values[:, :w] / b.values[:, :w].sum(axis=1, keepdims=True)
        b.indices = b.indices[:, :w]
    merged = _fcm.SubsetRows(
        colsum_old=a.colsum_old + b.colsum_old, colsum_new=a.colsum_new + b.colsum_new,
        indices=np.vstack([a.indices, b.indices]), values=np.vstack([a.values, b.values]),
        dropped=np.concatenate([a.dropped, b.dropped]),
        labels=None if a.labels is None else np.concatenate([a.labels, b.labels]),
        stuck=np.concatenate([a.stuck, b.stuck]))
    order = np.concatenate([first, second])
    return rows[order], [own[i] for i in order], merged


# ---------------------------------------------------------------------------
# Degenerate fuzzifiers: a pilot before the long run, and the warnings
# ---------------------------------------------------------------------------


def _nested_policy(masker: Any, what: str) -> str | None:
    """A masker's missing-value policy over its nested clusterer: ``None``
    (refused) with ``missing = "refuse"`` or a clusterer that refuses them;
    else the clusterer's policy followed by what the masker does (``what``)."""
    if masker.missing != "observed":
        return None
    inner = masker.clusterer
    if isinstance(inner, ComponentSpec) or inner is None:
        return None
    policy = privclust.capability(inner, "missing_values")
    text = policy() if policy is not None else None
    if not text:
        return None
    return f"{type(inner).name}: {text.rstrip('.')}; {what}"


class FuzzyRegimeWarning(privclust.PrivclustWarning):
    """The fuzzifiers of fuzzy microaggregation are in a degenerate regime
    (the message gives the expected group sizes, the information loss and
    what to change)."""


class CollapsedCentresWarning(FuzzyRegimeWarning):
    """Many Step 1 centres sit on a single record (clusters of one isolated
    record): the mass rule merges them and the self rule redraws their
    records, so there are fewer, larger groups than ``N / k``."""


class UniformMembershipsWarning(FuzzyRegimeWarning):
    """The Step 2 memberships are near-uniform: most records are replaced by
    a centre that is not their nearest, far from them (information loss
    near or above 100%), and the fit is slow (no truncation helps)."""


#: Records in the pilot run on data of more than twice as many records (a uniform
#: random subsample); smaller data are measured on the run itself.
PILOT_SIZE = 1000
#: Share of the step's progress (in records) given to Step 1; Step 2 and the draw take the rest.
_FIT_SHARE = 0.8
#: A centre "sits on a record" when it is closer to one than this fraction of
#: the median nearest-neighbour distance between records.
ON_RECORD = 1e-3
#: Collapse warning: at least this share of the Step 1 centres sit on a record.
COLLAPSE_SHARE = 0.2
#: ... and at least this many of them (a quarter of 4 centres says nothing).
COLLAPSE_MIN = 5
#: Near-uniform warning: a record's largest Step 2 membership, rescaled from
#: ``[1/c, 1]`` to ``[0, 1]``, averages below this (m1 = 1.5 at d = 5 gives
#: about 0.6, the defaults about 0.99) ...
UNIFORM_MAX_MEMBERSHIP = 0.75
#: ... and the information loss is more than this many times the defaults'
#: on the same records (a few centres can look uniform and lose little).
UNIFORM_LOSS_RATIO = 2.0
#: Iteration cap of the pilot's Step 1.
_PILOT_ITER = 100


class _PilotContext:
    """What the fit and Step 2 need from a context, for a pilot run that
    writes nothing (no ledger, no progress) and draws from its own stream."""

    constraints = None

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def spawn(self, n: int) -> list[np.random.Generator]:
        return list(self.rng.spawn(n))

    def progress(self, done: float, total: float | None = None) -> None:
        return None


@attrs.frozen(kw_only=True)
class _Regime:
    """What a (pilot or actual) run says about the fuzzifiers."""

    on_records: float  # share of the Step 1 centres that sit on a record
    max_membership: float  # mean over records of the largest Step 2 membership
    loss: float  # SSE/SST of the draw, standardised
    c_initial: int
    c_final: int
    n: int
    pilot: bool


def _largest_membership(memberships: Any) -> float:
    """The mean over records of the largest membership, rescaled so that
    uniform memberships give 0 and crisp ones 1 (``(u_max - 1/c) / (1 - 1/c)``)."""
    if isinstance(memberships, TopMemberships):
        top = np.asarray(memberships.values)[:, 0] * (1.0 - np.asarray(memberships.dropped))
        c = memberships.n_centres
    else:
        top = np.asarray(memberships).max(axis=1)
        c = memberships.shape[1]
    if c <= 1:
        return 1.0
    return float(((top - 1.0 / c) / (1.0 - 1.0 / c)).mean())


def _measure(z: np.ndarray, step1_z: np.ndarray, run: _Step2, std: Any, pilot: bool) -> _Regime:
    nan = np.isnan(z)
    if nan.any():  # the records' distances and the loss over the observed values
        zc = z[~nan.any(axis=1)]
        if zc.shape[0] < 2:
            zc = np.where(nan, np.nanmean(z, axis=0)[None, :], z)
        tree = cKDTree(zc)
        near = tree.query(zc, k=2, workers=-1)[0][:, 1] if zc.shape[0] > 1 else np.ones(1)
        released = std.to_z(run.centres)[run.labels]
        sst = float(np.nansum((z - np.nanmean(z, axis=0)) ** 2))
        loss = float(np.nansum((released - z) ** 2)) / sst if sst > 0 else 0.0
    else:
        tree = cKDTree(z)
        near = tree.query(z, k=2, workers=-1)[0][:, 1] if z.shape[0] > 1 else np.ones(1)
        released = std.to_z(run.centres)[run.labels]
        sst = float(((z - z.mean(axis=0)) ** 2).sum())
        loss = float(((released - z) ** 2).sum()) / sst if sst > 0 else 0.0
    scale = float(np.median(near)) or 1.0
    on = tree.query(step1_z, k=1, workers=-1)[0] < ON_RECORD * scale
    return _Regime(on_records=float(on.mean()), max_membership=_largest_membership(run.memberships), loss=loss,
                   c_initial=int(step1_z.shape[0]), c_final=int(run.centres.shape[0]), n=int(z.shape[0]),
                   pilot=pilot)


def _pilot(std: Any, rows: np.ndarray, clusterer: Any, c: int, k: int, fz: _fcm.Fuzzifier, rng: np.random.Generator,
           budget_bytes: float, constraints: Any) -> _Regime:
    """Steps 1-3 on the records ``rows`` with ``c`` centres (one restart, at
    most 100 iterations), measured."""
    from .fuzzy import Standardised

    sub = Standardised(std.z[rows], std.mean, std.scale, std.enabled)
    ctx = _PilotContext(rng)
    quick = attrs.evolve(clusterer, n_init=1, max_iter=min(int(clusterer.max_iter), _PILOT_ITER))
    fit = quick.fit_arrays(sub, c, ctx, constraints=constraints, seed_group=max(k, 1))
    run = _step2(sub, fit.centres, fz, k, budget_bytes=budget_bytes, mass_tol=clusterer.mass_tol,
                 max_neighbours=clusterer.max_neighbours, context=ctx,
                 project=None if constraints is None else (lambda v: project_original(constraints, v, sub.scale)))
    return _measure(sub.z, fit.centres_z, run, sub, pilot=True)


def _regime_warnings(who: str, regime: _Regime, *, n: int, c: int, k: int, d: int, step1: Any, step2: Any,
                     default_loss: float | None) -> list[FuzzyRegimeWarning]:
    """The warnings a measured regime calls for (empty when none)."""
    where = (f"estimated on a pilot of {regime.n} random records before the run" if regime.pilot
             else "measured on this run")
    kept = regime.c_final / max(regime.c_initial, 1)
    c_final = max(1, int(round(c * kept)))
    groups = (f"every centre carries an expected k = {k} or more records (the mass rule), {n / c_final:.1f} on "
              f"average (about {c_final} of the {c} centres remain after merging the light ones)")
    loss = f"information loss SSE/SST about {100 * regime.loss:.0f}%"
    if default_loss is not None:
        loss += (f" (the defaults, fcm with m1 = m2 = 1 + 1/(4d) = {default_m1(d):.3g}, give about "
                 f"{100 * default_loss:.0f}%)")
    fz = f"{step1.describe().replace('m =', 'm1 =').replace('lambda =', 'lambda1 =')}, " if step1 else ""
    fz += step2.describe().replace("m =", "m2 =").replace("lambda =", "lambda2 =")
    out: list[FuzzyRegimeWarning] = []
    far_worse = default_loss is None or regime.loss > UNIFORM_LOSS_RATIO * default_loss
    if regime.max_membership < UNIFORM_MAX_MEMBERSHIP and far_worse:
        fix = ("lower m2 (the draw) and m1 towards 1 + 1/(4d) = "
               f"{default_m1(d):.3g} for d = {d} columns, or leave them unset" if step2.kind == "fcm"
               else "raise lambda2 (the draw) and lambda1, or use the default clusterer fcm")
        out.append(UniformMembershipsWarning(
            f"{who}: near-uniform memberships ({fz}, d = {d}): a record's largest replacement probability "
            f"averages {regime.max_membership:.2g} on a scale from 0 (uniform) to 1 (crisp) ({where}), so many "
            f"records are replaced by a centre other than their nearest; expect: {groups}; {loss}. On large data such "
            "memberships are also slow (no truncation to the nearest centres applies: every pass is exact). "
            f"To fix: {fix}."
        ))
    if regime.on_records >= COLLAPSE_SHARE and regime.on_records * regime.c_initial >= COLLAPSE_MIN:
        loose = regime.max_membership < UNIFORM_MAX_MEMBERSHIP
        fix = ("lower m1 (the default is 1 + 1/(4d))" if loose and step2.kind == "fcm" else
               "raise m1 (e.g. 1.1) or k, or top-code the outlying records" if step2.kind == "fcm"
               else "lower lambda1 or raise k, or top-code the outlying records")
        out.append(CollapsedCentresWarning(
            f"{who}: centres collapse onto records ({fz}, k = {k}): {regime.on_records:.0%} of the Step 1 "
            f"centres sit on a single record ({where}); the mass rule merges them and the self rule redraws "
            f"their records, so expect: {groups}; {loss}. To fix: {fix}."
        ))
    return out


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
                                   doc="the number of clusters directly (the paper's c), instead of k")
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
        if self.n_clusters is not None:
            return int(self.n_clusters)
        _, stated = _clusterer_view(self.clusterer)
        if stated.get("n_clusters") is not None:
            return int(stated["n_clusters"])
        return 2 * self._k()

    def _k(self) -> int:
        return int(self.k) if self.k is not None else DEFAULT_K

    # -- the resolved settings ---------------------------------------------------------

    def resolve(self, clusterer: Any, n: int, d: int) -> tuple[Any, int, int, _fcm.Fuzzifier | None,
                                                             _fcm.Fuzzifier]:
        """The clusterer to run (with n_clusters and m1/lambda1 set), ``c``, the
        reported ``k``, the Step 1 and the Step 2 fuzzifiers."""
        who = self.name
        family = _family(clusterer)
        _, stated = _clusterer_view(clusterer)
        direct = self.n_clusters if self.n_clusters is not None else (
            stated.get("n_clusters") if self.k is None else None)
        if direct is not None:
            c = int(direct)
            k_report = max(1, n // c)
        else:
            k = self._k()
            if k > n:
                raise DataError(f"{who}: k = {k} but the data have only {n} records; lower k")
            if n < 2 * k:
                raise DataError(f"{who}: k = {k} needs at least 2k = {2 * k} records to form two clusters of "
                                f"about k; the data have {n} (lower k, or give n_clusters = 1 to replace every "
                                "record by the mean)")
            c = n // k
            k_report = k
        if c > n:
            raise DataError(f"{who}: n_clusters = {c} clusters but only {n} records; lower n_clusters")
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
        self_rule = (
            f"A record was never replaced by a centre equal to itself (every value of these columns within "
            f"{dg['self_tolerance']}{rounded}): {dg['records_on_a_centre']} records had such a centre and drew "
            "from their memberships to the other centres, renormalised."
        )
        if dg["records_only_themselves"]:
            self_rule += (f" {dg['records_only_themselves']} records had no other centre and kept their own "
                          "values.")
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
            "unique. It covers these columns only, and it is not differential privacy."
        )
        if k < 2:
            text += (f" With k = {k} (c = {c} centres for {n} records) a centre need carry no more than one record "
                     "in expectation, so this gives no anonymity: the centres can sit on the records, and each "
                     "released record may carry another record's original values.")
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
