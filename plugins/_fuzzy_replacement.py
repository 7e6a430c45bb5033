"""Steps 2-3 of fuzzy microaggregation (``fuzzy-microaggregation``): the mass
rule and the self rule on the fitted centres, the replacement probabilities,
the integer and edit-rule views of the released values, and the pilot run
that measures a fuzzifier's regime before the long run, with its warnings.
The masker itself, and the crisp ``microaggregation``, are in
:mod:`privclust_plugins.microaggregation`, which re-exports the public names
defined here (the regime warnings, ``self_centres``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

import privclust
from privclust import (
    ComponentSpec,
    ParameterError,
    PrivacyContext,
    TopMemberships,
)

from . import _fcm
from .fuzzy import (
    compute_memberships,
    non_finite_memberships,
    project_original,
)


def default_m1(n_columns: int) -> float:
    """m1 when neither the masker nor its FCM clusterer states it: ``1 + 1/(4d)``."""
    return 1.0 + 1.0 / (4.0 * max(int(n_columns), 1))


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
    records with all the rules' columns observed still break them, and why
    as far as the rules tell (:func:`_why_broken`)."""
    observed = ~np.isnan(values).any(axis=1)
    broken = int(np.count_nonzero(observed & ~constraints.satisfied(np.where(np.isnan(values), 0.0, values))))
    if not broken and observed.all():
        return "so every released record satisfies them"
    if not broken:  # a record with a missing value neither satisfies nor breaks a rule over it
        return (f"so every released record with all these columns observed satisfies them ({int((~observed).sum())} "
                "with a missing value cannot be checked against them)")
    return (f"yet {broken} of the {int(observed.sum())} released records with all these columns observed still "
            f"break them ({_why_broken(constraints)}the host's check of each rule says which)")


def _why_broken(constraints: Any) -> str:
    """Why projected points may still break the rules, as far as the rules
    say: "could not all be met together" only when joining the tables'
    bound rules (``joined_with``) finds them contradictory; "the projection
    stopped short" when every table joined into one set, checked for
    consistency as it joined (a single table's rules were checked when
    bound); else nothing."""
    parts = list(getattr(constraints, "parts", ()))
    joined = parts[:1]
    for part in parts[1:]:
        join = privclust.capability(joined[0], "joined_with") if len(joined) == 1 else None
        try:
            merged = join(part) if join is not None else None
        except privclust.ConstraintError:
            return "the rules cannot all be met together; "
        joined = [merged] if merged is not None else [*joined, part]
    consistent = len(joined) == 1 and privclust.capability(joined[0], "joined_with") is not None
    return "the projection stopped short of them; " if consistent else ""


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
