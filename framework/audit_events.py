"""The statistics of the empirical privacy auditor (:mod:`privclust.audit`):
its results, the Clopper-Pearson bounds, the families of events it tries,
the projections of vector outputs, the audit of one neighbouring pair, and
what a step releases besides its mechanisms' values (label statistics of the
shared records, its own ``laplace`` draws). Nothing here runs a component.
"""

# The events' tests are lambdas that bind a loop's current value as a default argument (``lambda X, _t=t: ...``);
# mypy cannot infer such a lambda against Callable[[np.ndarray], np.ndarray], hence the "type: ignore[misc]" on each.

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from ._optional import deferred
from .components import Partition
from .ledger import at_least, at_most

__all__ = [
    "AUDIT_VALUES",
    "COMPONENT_TRIALS",
    "KIT_MECHANISM_TRIALS",
    "KIT_TRIALS",
    "LABEL_STATISTICS",
    "MECHANISM_TRIALS",
    "SLOT_PROJECTIONS",
    "AuditResult",
    "Event",
    "NeighbourPair",
    "audit_pair",
    "clopper_pearson",
    "finish",
    "float_laplace_reachable",
    "float_support_events",
    "label_statistics",
    "labels_of",
    "lattice_events",
    "own_draw_events",
    "own_draw_lattice_events",
    "own_draw_locations",
    "select",
    "shared_records",
    "stack",
    "threshold_and_bin_events",
]

# ---------------------------------------------------------------------------
# The empirical privacy auditor
# ---------------------------------------------------------------------------
#
# A DP claim says: for every pair of neighbouring inputs D, D' and every set
# E of outputs, P[M(D) in E] <= e^eps P[M(D') in E] + delta. The auditor runs
# the mechanism on one pair many times, chooses an event E on a first half of
# the outputs (selection), counts how often E happens on a fresh second half
# (estimation), and turns the counts into one-sided Clopper-Pearson bounds
# p_low <= P[M(D) in E] and q_high >= P[M(D') in E]. Then
# eps >= ln((p_low - delta) / q_high) holds with the stated confidence: a
# statistically valid lower bound on the epsilon the mechanism provides
# (StatDP, Ding et al. 2018; Jagielski et al. 2020; DP-Sniper, Bichsel et al.
# 2021). Because the event is chosen on other samples than those it is
# measured on, only the final statement needs a confidence level: the two
# bounds of each audited pair share alpha (Bonferroni), and so do the pairs.

#: Default number of runs on each input (half for selection, half for estimation).
MECHANISM_TRIALS = 20_000
COMPONENT_TRIALS = 400
#: Runs per input of the conformance kit's ``privacy_audit`` check.
KIT_TRIALS = 200
#: Runs per input of the kit's audit of a noise mechanism's ``release``.
KIT_MECHANISM_TRIALS = 300

#: Values kept per run of a component, shared over every release of the run
#: (each release keeps its first values; a release smaller than its share
#: keeps everything and leaves the rest to the others, see
#: :func:`_allocate`): an event on part of the output is an event on the
#: output, so the bound stays valid and the audit's memory is about runs x
#: AUDIT_VALUES whatever the component releases. Values beyond the share are
#: not audited, and the result says so (``unseen``; verdict INCONCLUSIVE).
AUDIT_VALUES = 4096
#: Releases of a run that get a projection of their own (the sum of their values).
SLOT_PROJECTIONS = 16

_TWO53 = float(2**53)


@attrs.frozen(eq=False)
class Event:
    """A set of outputs, chosen on the selection half: ``contains(outputs)``
    says, for each run (a row of ``outputs``), whether its output is in the set."""

    family: str
    description: str
    test: Callable[[np.ndarray], np.ndarray] = attrs.field(repr=False)

    def contains(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(self.test(outputs), dtype=bool)


@attrs.frozen(kw_only=True)
class NeighbourPair:
    """Two neighbouring inputs: frames (for a component) or values (for a
    mechanism's ``release``), and how they differ."""

    first: Any
    second: Any
    description: str


@attrs.frozen(kw_only=True)
class AuditResult:
    """What an audit found.

    ``epsilon_lower_bound`` holds with probability at least ``confidence``
    (over the auditor's own randomness) for the mechanism's real privacy
    loss: if the mechanism were ``claimed_epsilon``-DP (with
    ``claimed_delta``), a bound above ``claimed_epsilon`` would happen with
    probability at most ``1 - confidence``. ``passed`` is
    ``epsilon_lower_bound <= claimed_epsilon`` on the values audited.
    ``unseen`` describes released values the audit did not see (a run
    released more than :data:`AUDIT_VALUES`); they are also among the
    ``notes``. ``verdict`` is ``"FAILED"`` when the bound exceeds the claim,
    ``"INCONCLUSIVE"`` when it does not but some values were not seen (no
    evidence either way about them), else ``"PASSED"``.
    """

    subject: str
    audited: str
    neighbours: str
    epsilon_lower_bound: float
    claimed_epsilon: float
    claimed_delta: float
    event: str
    direction: str
    counts: tuple[int, int]
    trials: int
    p_lower: float
    q_upper: float
    confidence: float
    passed: bool
    notes: tuple[str, ...] = ()
    unseen: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every value the runs released was audited."""
        return not self.unseen

    @property
    def verdict(self) -> str:
        """``"FAILED"``, ``"INCONCLUSIVE"`` (not failed, but some released values unseen) or ``"PASSED"``."""
        if not self.passed:
            return "FAILED"
        return "INCONCLUSIVE" if self.unseen else "PASSED"

    def shown_figures(self) -> tuple[str, str]:
        """The lower bound and the charge (``"epsilon 1, delta 1e-06"``) as
        the audit prints them: the charge rounded **up**, the lower bound
        **down** (neither shown figure says more than what holds), with 4
        significant digits, or more when a failed audit's bound and charge
        would otherwise read the wrong way round."""
        for digits in range(4, 18):
            lower = at_most(self.epsilon_lower_bound, digits)
            charged = at_least(self.claimed_epsilon, digits)
            if self.passed or not (math.isfinite(self.epsilon_lower_bound) and math.isfinite(self.claimed_epsilon)) \
                    or float(lower) > float(charged):
                break
        delta = f", delta {at_least(self.claimed_delta, 3)}" if self.claimed_delta else ""
        return lower, f"epsilon {charged}{delta}"

    def __str__(self) -> str:
        verdict = self.verdict
        if verdict == "INCONCLUSIVE":
            verdict += " (no evidence against the charge in the values audited; some released values were not seen)"
        lower, claim = self.shown_figures()
        sign = "<=" if self.passed else ">"
        lines = [
            f"privacy audit of {self.subject}: {verdict}",
            f"  epsilon lower bound {lower} {sign} charged {claim} "
            f"({self.confidence:.0%} confidence{'; on the values audited' if self.unseen else ''})",
            f"  audited: {self.audited}",
            f"  neighbours: {self.neighbours}",
            f"  event: {self.event}",
            f"  {self.direction}: {self.counts[0]} and {self.counts[1]} of {self.trials} fresh runs each "
            f"(p >= {self.p_lower:.4g}, q <= {self.q_upper:.4g})",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# -- statistics ---------------------------------------------------------------------


def clopper_pearson(hits: int | np.ndarray, n: int, alpha: float) -> tuple[Any, Any]:
    """One-sided Clopper-Pearson bounds: ``(low, high)`` with
    ``P[p >= low] >= 1 - alpha`` and ``P[p <= high] >= 1 - alpha``."""
    beta = deferred("scipy.stats").beta  # heavy: imported when an audit first computes a bound
    k = np.asarray(hits, dtype=float)
    with np.errstate(all="ignore"):
        low = np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)
        high = np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)
    return low, high


def _epsilon_bound(p_low: Any, q_high: Any, delta: float) -> Any:
    """``ln((p_low - delta) / q_high)``: ``-inf`` when ``p_low <= delta``
    (negative values mean no evidence; the result is clamped at 0)."""
    with np.errstate(all="ignore"):
        return np.log(np.maximum(np.asarray(p_low, dtype=float) - delta, 0.0) / np.asarray(q_high, dtype=float))


# -- event families ------------------------------------------------------------------


def threshold_and_bin_events(values_a: np.ndarray, values_b: np.ndarray, label: str,
                              project: Callable[[np.ndarray], np.ndarray]) -> list[Event]:
    """Threshold events ``v > t`` / ``v <= t`` and unions of histogram bins
    on a 1-D statistic ``v = project(outputs)``."""
    pooled = np.concatenate([values_a, values_b])
    pooled = pooled[np.isfinite(pooled)]
    events: list[Event] = []
    if pooled.size == 0:
        return events
    distinct = np.unique(pooled)
    if distinct.size <= 64:  # discrete outputs: one bin per value
        edges = distinct
        def bin_of(v: np.ndarray, _at: np.ndarray = edges) -> np.ndarray:
            i = np.searchsorted(_at, v)
            i = np.minimum(i, _at.size - 1)
            return np.where(np.isfinite(v) & (_at[i] == v), i, -1)
        n_bins = edges.size
        thresholds = distinct[:-1]
    else:
        cuts = np.unique(np.quantile(pooled, np.linspace(0, 1, 33)[1:-1]))
        def bin_of(v: np.ndarray, _at: np.ndarray = cuts) -> np.ndarray:
            return np.where(np.isfinite(v), np.searchsorted(_at, v, side="right"), -1)
        n_bins = cuts.size + 1
        thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, 101)[1:-1]))
    for t in thresholds:
        t = float(t)
        events.append(Event("threshold", f"{label} > {t:.6g}",
                            lambda X, _t=t: project(X) > _t))  # type: ignore[misc]
        events.append(Event("threshold", f"{label} <= {t:.6g}",
                            lambda X, _t=t: project(X) <= _t))  # type: ignore[misc]
    ca = np.bincount(bin_of(values_a)[bin_of(values_a) >= 0], minlength=n_bins)
    cb = np.bincount(bin_of(values_b)[bin_of(values_b) >= 0], minlength=n_bins)
    for ratio, name in (((ca + 1) / (cb + 1), "first"), ((cb + 1) / (ca + 1), "second")):
        order = np.argsort(-ratio, kind="stable")
        for j in range(1, min(n_bins, 16) + 1):
            chosen = np.sort(order[:j])
            events.append(Event(
                "histogram", f"{label} in {j} histogram bin(s) more likely from the {name} input "
                             f"(bins {chosen.tolist()} of {n_bins})",
                lambda X, _c=chosen: np.isin(bin_of(project(X)), _c)))  # type: ignore[misc]
    return events


def _granularity_log2(x: np.ndarray) -> np.ndarray:
    """log2 of the largest power of two that divides each finite nonzero x
    (``+inf`` for 0, ``nan`` for non-finite values)."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, np.nan)
    ok = np.isfinite(x) & (x != 0)
    m, e = np.frexp(np.abs(x[ok]))
    mant = (m * _TWO53).astype(np.uint64)  # an integer below 2^53
    tz = np.zeros(mant.shape, dtype=np.int64)
    rest = mant.copy()
    for _ in range(53):
        even = (rest & np.uint64(1)) == 0
        if not even.any():
            break
        tz += even
        rest = np.where(even, rest >> np.uint64(1), rest)
    out[ok] = (e - 53 + tz).astype(float)
    out[np.isfinite(x) & (x == 0)] = np.inf
    return out


def lattice_events(values_a: np.ndarray, values_b: np.ndarray, anchors: Sequence[float]) -> list[Event]:
    """``(x - anchor)`` is a multiple of 2^k, for the finest lattice each
    input's selection outputs lie on."""
    events: list[Event] = []
    ks = set()
    for values in (values_a, values_b):
        g = _granularity_log2(values)
        g = g[np.isfinite(g)]
        if g.size:
            ks.add(int(g.min()))
    for anchor in dict.fromkeys(float(a) for a in anchors):
        for k in sorted(ks):
            step = math.ldexp(1.0, k)
            events.append(Event(
                "lattice", f"output - {anchor:g} is a multiple of 2^{k}",
                lambda X, _s=step, _a=anchor: np.fmod(X[:, 0] - _a, _s) == 0))  # type: ignore[misc]
    return events


def float_laplace_reachable(x: Any, loc: float, scale: float, *, window: int = 3, limit: int = 256) -> np.ndarray:
    """Whether each ``x`` is an output ``loc + noise`` that the textbook
    floating-point Laplace sampler (numpy's ``Generator.laplace(0, scale)``)
    can produce from ``loc``.

    numpy draws ``U = j 2^-53`` (``0 < j < 2^53``) and returns
    ``0 - scale log(2 - U - U)`` for ``U >= 0.5``, else ``0 + scale log(U + U)``
    (libm ``log``). The check inverts that map (``U`` from ``x - loc``), tries
    the grid points ``j`` around the inverse that rounding allows, recomputes
    the forward map exactly and compares ``fl(loc + noise)`` with ``x``
    (Mironov 2012). Where more than ``limit`` grid points are possible the
    output counts as reachable. The answer is a fixed function of ``x``, so
    it is a valid event whatever its rounding slack.
    """
    x = np.atleast_1d(np.asarray(x, dtype=float))
    out = np.zeros(x.shape, dtype=bool)
    n_est = x - loc
    y = n_est / scale
    with np.errstate(all="ignore"):
        u = np.where(y < 0, 0.5 * np.exp(y), 1.0 - 0.5 * np.exp(-y))
        side = np.where(y < 0, u, 1.0 - u)  # dU/dy
        slack = (np.spacing(np.abs(x)) + np.spacing(np.abs(n_est)) + np.spacing(np.abs(loc))) / scale
        du = side * (slack + (np.abs(y) + 4.0) * 2.0**-50) + 2.0**-53
        klo = np.floor((u - du) * _TWO53) - window
        khi = np.ceil((u + du) * _TWO53) + window
    finite = np.isfinite(klo) & np.isfinite(khi)
    klo = np.clip(np.where(finite, klo, 1.0), 1.0, _TWO53 - 1)
    khi = np.clip(np.where(finite, khi, 0.0), 0.0, _TWO53 - 1)
    width = khi - klo + 1
    out[finite & (width > limit)] = True
    todo = np.flatnonzero(finite & (width >= 1) & (width <= limit))
    log = math.log
    for i in todo:
        xi = float(x[i])
        for j in range(int(klo[i]), int(khi[i]) + 1):
            U = j / _TWO53
            noise = (0.0 - scale * log(2.0 - U - U)) if U >= 0.5 else (0.0 + scale * log(U + U))
            if loc + noise == xi:
                out[i] = True
                break
    return out


def float_support_events(inputs: Sequence[float], scale: float) -> list[Event]:
    return [Event("float-support",
                  f"the output is reproducible by numpy's floating-point Laplace sampler (scale {scale:.6g}) "
                  f"from the input {a:g}",
                  lambda X, _a=float(a): float_laplace_reachable(X[:, 0], _a, scale))  # type: ignore[misc]
            for a in inputs]


# -- projections of vector outputs ------------------------------------------------------


def _projections(A: np.ndarray, B: np.ndarray) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    """1-D statistics of the outputs, chosen on the selection half."""
    m = A.shape[1]
    if m == 1:
        return [("the output", lambda X: X[:, 0])]
    out: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ma, mb = np.nanmean(A, axis=0), np.nanmean(B, axis=0)
        sd = np.sqrt(0.5 * (np.nanvar(A, axis=0) + np.nanvar(B, axis=0)))
        diff = np.nan_to_num(ma - mb)
        z = np.nan_to_num(np.abs(diff) / np.where(sd > 0, sd, np.inf))
    w = np.nan_to_num(diff / np.where(sd > 0, sd ** 2, np.inf))
    if np.any(w != 0):
        out.append(("the projection of the output on its mean difference (weights chosen on the selection half)",
                    lambda X, _w=w: np.nan_to_num(X) @ _w))  # type: ignore[misc]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ca, cb = np.nanmedian(A, axis=0), np.nanmedian(B, axis=0)
        spread = np.nanmedian(np.abs(np.concatenate([A - ca, B - cb])), axis=0)
    moved = np.isfinite(ca) & np.isfinite(cb) & (ca != cb)
    if moved.any():
        spread = np.where(np.isfinite(spread) & (spread > 0), spread, 1.0)

        def laplace_ratio(X: np.ndarray, _a: np.ndarray = ca, _b: np.ndarray = cb, _s: np.ndarray = spread,
                          _m: np.ndarray = moved) -> np.ndarray:
            Z = np.nan_to_num(X[:, _m] if X.shape[1] >= _m.size else np.full((X.shape[0], int(_m.sum())), np.nan))
            return np.sum((np.abs(Z - _b[_m]) - np.abs(Z - _a[_m])) / _s[_m], axis=1)

        out.append(("the Laplace log-likelihood ratio of the output between the two inputs' medians (chosen on the "
                    "selection half)", laplace_ratio))
    out.append(("the sum of the output's values", lambda X: np.nansum(X, axis=1)))
    for j in np.argsort(-z, kind="stable")[:3]:
        if z[j] > 0:
            out.append((f"value {int(j)} of the output", lambda X, _j=int(j): X[:, _j]))  # type: ignore[misc]
    if np.isnan(A).any() or np.isnan(B).any():
        out.append(("the number of values released", lambda X: np.sum(~np.isnan(X), axis=1).astype(float)))
    return out


def _candidate_events(A: np.ndarray, B: np.ndarray, extra: Sequence[Event]) -> list[Event]:
    events = list(extra)
    for label, project in _projections(A, B):
        events += threshold_and_bin_events(project(A), project(B), label, project)
    return events


# -- the audit of one pair ------------------------------------------------------------------


@attrs.frozen
class _PairOutcome:
    bound: float
    event: Event
    forward: bool
    counts: tuple[int, int]
    n: int
    p_low: float
    q_high: float


def _padded(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = max(A.shape[1], B.shape[1])  # runs may release different numbers of values: pad with NaN
    pad = ((0, 0), (0, width - A.shape[1])), ((0, 0), (0, width - B.shape[1]))
    return np.pad(A, pad[0], constant_values=np.nan), np.pad(B, pad[1], constant_values=np.nan)


def select(A_sel: np.ndarray, B_sel: np.ndarray, delta: float, alpha: float,
            extra: Callable[[np.ndarray, np.ndarray], Sequence[Event]]) -> tuple[Event, bool, float]:
    """Choose an event on selection runs: their first part builds the
    candidate events (thresholds, bins, projections fitted to those
    outputs), their second part scores them, so that an event fitted to
    noise does not win the selection. Returns the event, its direction and
    its score (the bound it gives on the scoring part)."""
    A_sel, B_sel = _padded(A_sel, B_sel)
    build = min(A_sel.shape[0], B_sel.shape[0]) // 2
    events = _candidate_events(A_sel[:build], B_sel[:build], extra(A_sel[:build], B_sel[:build]))
    A_choose, B_choose = A_sel[build:], B_sel[build:]
    ka = np.array([int(e.contains(A_choose).sum()) for e in events])
    kb = np.array([int(e.contains(B_choose).sum()) for e in events])
    low_a, high_a = clopper_pearson(ka, A_choose.shape[0], alpha)
    low_b, high_b = clopper_pearson(kb, B_choose.shape[0], alpha)
    scores = np.concatenate([_epsilon_bound(low_a, high_b, delta), _epsilon_bound(low_b, high_a, delta)])
    scores = np.where(np.isnan(scores), -np.inf, scores)
    best = int(np.argmax(scores))  # the first of the best: events are listed in a fixed order
    return events[best % len(events)], best < len(events), float(scores[best])


def audit_pair(A: np.ndarray, B: np.ndarray, delta: float, alpha: float,
                extra: Callable[[np.ndarray, np.ndarray], Sequence[Event]], selection: int | None = None
                ) -> _PairOutcome:
    """Select an event on the first ``selection`` rows of each sample (half
    by default; :func:`select`), measure it on the rest."""
    A, B = _padded(A, B)
    rows = min(A.shape[0], B.shape[0])
    half = rows // 2 if selection is None else selection
    n = rows - half if selection is not None else half
    A_est, B_est = A[half:half + n], B[half:half + n]
    event, forward, _ = select(A[:half], B[:half], delta, alpha, extra)
    ka, kb = int(event.contains(A_est).sum()), int(event.contains(B_est).sum())
    hits = (ka, kb) if forward else (kb, ka)
    p_low, _ = clopper_pearson(hits[0], n, alpha)
    _, q_high = clopper_pearson(hits[1], n, alpha)
    bound = max(0.0, float(_epsilon_bound(p_low, q_high, delta)))
    return _PairOutcome(bound, event, forward, hits, n, float(p_low), float(q_high))


def finish(subject: str, audited: str, pairs: Sequence[NeighbourPair], outcomes: Sequence[_PairOutcome],
            claimed: tuple[float, float], confidence: float, notes: Sequence[str],
            unseen: Sequence[str] = ()) -> AuditResult:
    k = int(np.argmax([o.bound for o in outcomes]))
    o, pair = outcomes[k], pairs[k]
    direction = ("p = P[M(D) in E], q = P[M(D') in E]" if o.forward
                 else "p = P[M(D') in E], q = P[M(D) in E]")
    eps, delta = claimed
    passed = o.bound <= eps * (1 + 1e-9)
    return AuditResult(
        subject=subject, audited=audited,
        neighbours=pair.description + (f" (the worst of {len(pairs)} pairs)" if len(pairs) > 1 else ""),
        epsilon_lower_bound=o.bound, claimed_epsilon=eps, claimed_delta=delta,
        event=f"{o.event.description} [{o.event.family}]", direction=direction, counts=o.counts, trials=o.n,
        p_lower=o.p_low, q_upper=o.q_high, confidence=confidence, passed=passed,
        notes=(*notes, *(f"not audited (INCONCLUSIVE for these values): {u}" for u in unseen)),
        unseen=tuple(unseen))


def stack(outputs: Sequence[np.ndarray]) -> np.ndarray:
    """Runs' outputs as rows (shorter outputs padded with NaN)."""
    width = max((o.size for o in outputs), default=0)
    X = np.full((len(outputs), max(width, 1)), np.nan)
    for i, o in enumerate(outputs):
        X[i, :o.size] = o
    return X




# -- what a step releases besides its mechanisms' values: labels and its own draws ------------------


#: Records near the moved one whose co-clustering the label statistics follow.
_NEAR_RECORDS = 8
#: The label statistics (one value each per run), in the order of their columns.
LABEL_STATISTICS = (
    "the number of clusters among the records the two inputs share",
    "whether the records the two inputs share all have one label (1) or not (0)",
    "the share of pairs of shared records that have one label",
    "the size of the largest cluster among the shared records",
    "the number of shared records left unassigned (label -1)",
    f"whether the (up to {_NEAR_RECORDS}) records nearest the moved record all have one label",
    f"the share of pairs of the (up to {_NEAR_RECORDS}) records nearest the moved record that have one label",
)


def labels_of(result: Any) -> np.ndarray | None:
    """The per-record labels a step released (a clusterer's, or a masker's partition's)."""
    partition = result if isinstance(result, Partition) else getattr(result, "partition", None)
    if isinstance(partition, Partition) and partition.labels is not None:
        return np.asarray(partition.labels)
    return None


@attrs.frozen
class _Shared:
    """Which records of a pair's two inputs are the same record (by position:
    ``first_rows[i]`` of the first input is ``second_rows[i]`` of the second),
    and the positions (in the first input) of the shared records nearest to
    the record that differs. The moved record's own label is its own data
    (a record's label says where that record is) and is left out: the label
    statistics speak only of the records the two inputs share."""

    first_rows: np.ndarray
    second_rows: np.ndarray
    near: np.ndarray  # indices into first_rows / second_rows


def shared_records(pair: NeighbourPair) -> _Shared | None:
    first, second = pair.first, pair.second
    if not isinstance(first, pd.DataFrame) or not isinstance(second, pd.DataFrame) or first.shape[1] != second.shape[1]:
        return None
    try:
        a, b = first.to_numpy(dtype=float), second.to_numpy(dtype=float)
    except (TypeError, ValueError):
        return None
    n = min(len(a), len(b))
    if len(a) == len(b):
        same = np.all((a == b) | (np.isnan(a) & np.isnan(b)), axis=1)
        rows = np.flatnonzero(same)
        moved = [b[i] for i in np.flatnonzero(~same)] + [a[i] for i in np.flatnonzero(~same)]
        first_rows = second_rows = rows
    else:  # add/remove: the larger input's records beyond the smaller's are the added ones
        first_rows = second_rows = np.arange(n)
        moved = list((a if len(a) > len(b) else b)[n:])
    if first_rows.size < 2:
        return None
    near = np.arange(0)
    if moved:
        shared = a[first_rows]
        dist = np.min([np.nansum((shared - m) ** 2, axis=1) for m in moved], axis=0)
        near = np.argsort(dist, kind="stable")[:_NEAR_RECORDS]
    return _Shared(first_rows=first_rows, second_rows=second_rows, near=near)


def _co_clustered_share(labels: np.ndarray) -> float:
    n = labels.size
    if n < 2:
        return 1.0
    _, counts = np.unique(labels, return_counts=True)
    return float(np.sum(counts * (counts - 1.0)) / (n * (n - 1.0)))


def label_statistics(labels: np.ndarray, rows: np.ndarray, near: np.ndarray) -> np.ndarray:
    """The :data:`LABEL_STATISTICS` of one run's labels on the shared records ``rows``."""
    out = np.full(len(LABEL_STATISTICS), np.nan)
    if labels.shape[0] <= (int(rows.max()) if rows.size else -1):
        return out
    lab = labels[rows]
    _, counts = np.unique(lab, return_counts=True)
    out[0] = float(np.unique(lab[lab >= 0]).size) if np.issubdtype(lab.dtype, np.number) else float(counts.size)
    out[1] = float(counts.size == 1)
    out[2] = _co_clustered_share(lab)
    out[3] = float(counts.max())
    out[4] = float(np.sum(lab < 0)) if np.issubdtype(lab.dtype, np.number) else 0.0
    if near.size >= 2:
        out[5] = float(np.unique(lab[near]).size == 1)
        out[6] = _co_clustered_share(lab[near])
    return out


@attrs.frozen
class _OwnDraws:
    """What a step's own ``laplace`` draws say about one input, from its
    selection runs: for each value of the table (in row order), the scale
    and the candidate noise-free values ``table - noise`` (most frequent
    first), and the released values of those runs."""

    scales: np.ndarray
    candidates: tuple[np.ndarray, ...]
    released: np.ndarray  # runs x values

    @property
    def locations(self) -> np.ndarray:
        return np.array([c[0] for c in self.candidates])

    def location(self, j: int) -> float:
        """The candidate under which most of the runs' value ``j`` is an
        output of numpy's sampler (``fl(fl(v + n) - n)`` is ``v`` but for
        rounding, so the most frequent estimate may be a neighbour of ``v``)."""
        options = self.candidates[j][:4]
        if options.size == 1:
            return float(options[0])
        shares = [float(np.mean(float_laplace_reachable(self.released[:, j], float(c), float(self.scales[j]))))
                  for c in options]
        return float(options[int(np.argmax(shares))])


def own_draw_locations(runs: Sequence[Any]) -> _OwnDraws | None:
    """Where a step's own ``laplace`` draws were added: for a step whose table
    is ``values + rng.laplace(0, scale)`` (value by value, in the table's row
    or column order), the noise-free values and scales, when every run gives
    the same ones but for rounding (the input is fixed); else ``None``.
    Estimated from the selection runs only (the events built from them are
    then fixed sets of outputs for the estimation runs)."""
    if not runs or any(r.table is None or r.draws is None for r in runs):
        return None
    shape = runs[0].table.shape
    if any(r.table.shape != shape for r in runs):
        return None
    released = np.vstack([r.table.ravel() for r in runs])
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for order in ("C", "F"):
        locs, scales = [], []
        for r in runs:
            loc_arg, scale, drawn = r.draws
            table = r.table.ravel(order=order)  # type: ignore[call-overload]
            if drawn.size != table.size:
                return None
            locs.append(table - (drawn - loc_arg))
            scales.append(scale)
        L, S = np.vstack(locs), np.vstack(scales)
        if order == "F":  # back to the table's row order (the order of the audited values)
            L = L.reshape(len(runs), shape[1], shape[0]).transpose(0, 2, 1).reshape(len(runs), -1)
            S = S.reshape(len(runs), shape[1], shape[0]).transpose(0, 2, 1).reshape(len(runs), -1)
        if not np.all(S == S[0]) or not np.all(np.isfinite(S[0])) or not np.all(S[0] > 0):
            continue
        centre = np.median(L, axis=0)
        spread = float(np.max(np.abs(L - centre) / (1.0 + np.abs(centre)))) if L.size else math.inf
        if spread < 1e-9 and (best is None or spread < best[0]):
            best = (spread, L, S[0].copy())
    if best is None:
        return None
    _, L, own_scales = best
    candidates = []
    for j in range(L.shape[1]):
        found, counts = np.unique(L[:, j], return_counts=True)
        candidates.append(found[np.argsort(-counts, kind="stable")])
    return _OwnDraws(scales=own_scales, candidates=tuple(candidates), released=released)


def _moved_values(first: _OwnDraws | None, second: _OwnDraws | None, limit: int) -> np.ndarray:
    """The table values whose noise-free value differs between the inputs by
    more than rounding (at most ``limit`` of them)."""
    if first is None or second is None or first.scales.size != second.scales.size:
        return np.arange(0)
    la, lb = first.locations, second.locations
    tolerance = 1e-9 * (1.0 + np.maximum(np.abs(la), np.abs(lb)))
    return np.flatnonzero(np.isfinite(la) & np.isfinite(lb) & (np.abs(la - lb) > tolerance))[:limit]


def own_draw_events(first: _OwnDraws | None, second: _OwnDraws | None, width: int) -> list[Event]:
    """Float-support events on the values of a step's table whose noise-free
    value differs between the two inputs (at most 16 of them)."""
    moved = _moved_values(first, second, 16)
    if moved.size == 0 or first is None or second is None or first.scales.size > width:
        return []
    events = []
    for which, own in (("first", first), ("second", second)):
        locs = {int(j): own.location(int(j)) for j in moved}

        def test(X: np.ndarray, _l: dict[int, float] = locs, _s: np.ndarray = own.scales) -> np.ndarray:
            ok = np.ones(X.shape[0], dtype=bool)
            for j, loc in _l.items():
                rows = np.flatnonzero(ok)
                if rows.size == 0:
                    break
                ok[rows] = float_laplace_reachable(X[rows, j], loc, float(_s[j]))
            return ok

        events.append(Event("float-support", f"the released values whose noise-free value differs between the "
                                             f"inputs ({moved.size}) are all reproducible by numpy's floating-point "
                                             f"Laplace sampler (the step's own draws) from the {which} input's", test))
    return events


def own_draw_lattice_events(first: _OwnDraws | None, second: _OwnDraws | None,
                             A_sel: np.ndarray, B_sel: np.ndarray) -> list[Event]:
    """Lattice events on (up to 4 of) the table values whose noise-free value
    differs between the inputs, anchored at both noise-free values."""
    events = []
    for j in _moved_values(first, second, 4):
        if j >= A_sel.shape[1] or first is None or second is None:
            break
        anchors = (float(first.locations[j]), float(second.locations[j]))
        for e in lattice_events(A_sel[:, j], B_sel[:, j], anchors):
            events.append(Event(e.family, f"released value {int(j)}: {e.description}",
                                lambda X, _e=e, _j=int(j): _e.test(X[:, [_j]])))  # type: ignore[misc]
    return events
