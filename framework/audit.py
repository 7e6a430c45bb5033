"""The empirical privacy auditor.

:func:`audit_mechanism`, :func:`audit_component` and :func:`audit_recipe` run
a mechanism, a component or a recipe's DP steps many times on neighbouring
inputs and return an :class:`AuditResult` whose ``epsilon_lower_bound`` holds
at the stated confidence (Clopper-Pearson bounds on an event, and for a
component a neighbouring pair, chosen on separate runs); ``passed`` is false
when it exceeds the epsilon charged. A component's audit covers its
mechanisms' releases, its released table, its released labels
(:data:`LABEL_STATISTICS` of the records the two inputs share) and its own
``laplace`` draws (float-support and lattice events). Those events are
tried only on draws made with ``Generator.laplace`` from ``context.rng``
or ``context.spawn``; noise built any other way (from exponentials or
uniforms, with another library, or from generators made of
``context.spawn_seeds`` seeds) is audited only through the released
values. The auditor runs the program the user runs: ``spawn_seeds`` hands
out the seeds an unaudited run would, and nothing made from them is
recorded, so a masker whose audit rests on its own draws and that took
such seeds is never PASSED (``unseen`` says so). A component's audit
samples the first values of *every* release of a run (:data:`AUDIT_VALUES`
in all); when some released values could not be kept, ``unseen`` names
them and ``verdict`` is ``"INCONCLUSIVE"`` instead of ``"PASSED"``.

The statistics (bounds, events, projections, the audit of one pair) are in
:mod:`privclust.audit_events`; the conformance kit (:mod:`privclust.testing`)
runs this auditor as its ``privacy_audit`` check and re-exports its names.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accountants import ADD_REMOVE, relation_kind
from .audit_events import (
    AUDIT_VALUES,
    COMPONENT_TRIALS,
    KIT_MECHANISM_TRIALS,
    KIT_TRIALS,
    LABEL_STATISTICS,
    MECHANISM_TRIALS,
    AuditResult,
    Event,
    NeighbourPair,
    clopper_pearson,
    float_laplace_reachable,
)
from .audit_events import (
    SLOT_PROJECTIONS as _SLOT_PROJECTIONS,
)
from .audit_events import (  # public there, private names here: the auditor's bodies moved unchanged
    audit_pair as _audit_pair,
)
from .audit_events import (
    finish as _finish,
)
from .audit_events import (
    float_support_events as _float_support_events,
)
from .audit_events import (
    label_statistics as _label_statistics,
)
from .audit_events import (
    labels_of as _labels_of,
)
from .audit_events import (
    lattice_events as _lattice_events,
)
from .audit_events import (
    own_draw_events as _own_draw_events,
)
from .audit_events import (
    own_draw_lattice_events as _own_draw_lattice_events,
)
from .audit_events import (
    own_draw_locations as _own_draw_locations,
)
from .audit_events import (
    select as _select,
)
from .audit_events import (
    shared_records as _shared_records,
)
from .audit_events import (
    stack as _stack,
)
from .audit_events import (
    threshold_and_bin_events as _threshold_and_bin_events,
)
from .audit_pairs import candidate_pairs, empty_region_pairs, neighbour_pairs
from .components import Masked, Partition, Sensitivity, capability
from .context import PrivacyContext
from .coverage import no_guarantee_reasons
from .errors import ParameterError
from .harness import example_frame, kind_of
from .harness import execute as _execute
from .ledger import exact
from .preflight import check_frame
from .recipe import Budget, ComponentSpec
from .registry import Registry, get_registry, known_leak_names
from .runner import check_data, compile
from .runner import run as run_recipe

__all__ = [
    "AUDIT_VALUES",
    "COMPONENT_TRIALS",
    "KIT_MECHANISM_TRIALS",
    "KIT_TRIALS",
    "LABEL_STATISTICS",
    "MECHANISM_TRIALS",
    "TABLE_COVER",
    "AuditResult",
    "Event",
    "NeighbourPair",
    "RecipeAudit",
    "StepAudit",
    "assert_audit_passes",
    "audit_component",
    "audit_mechanism",
    "audit_recipe",
    "clopper_pearson",
    "empty_region_pairs",
    "float_laplace_reachable",
    "neighbour_pairs",
]


# -- mechanisms -------------------------------------------------------------------------------


def audit_mechanism(mechanism: Any, *, epsilon: float = 1.0, delta: float = 0.0, sensitivity: float = 1.0,
                    pairs: Sequence[tuple[Any, Any]] | None = None, trials: int = MECHANISM_TRIALS,
                    seed: int = 0, alpha: float = 0.05, registry: Registry | None = None) -> AuditResult:
    """Audit a noise mechanism's ``release``.

    Each run is one call ``mechanism.release(value, sensitivity=...,
    epsilon=..., delta=...)`` through a fresh :class:`PrivacyContext` whose
    seed is spawned from ``seed``; ``trials`` runs on each input of each pair
    (half to choose the event, half to measure it). The default pair is
    ``0`` against ``sensitivity``; ``pairs`` gives others, as ``(value,
    value)`` tuples (scalars or arrays whose L1 distance is at most the
    sensitivity). The claim is what the runs charged (``context.spent``).
    """
    reg = registry if registry is not None else get_registry()
    if isinstance(mechanism, str | ComponentSpec):
        mechanism = reg.create("noise_mechanisms", mechanism)
    name = getattr(type(mechanism), "name", type(mechanism).__qualname__)
    if trials < 20:
        raise ParameterError(f"audit_mechanism: trials must be at least 20; got {trials}")
    given = list(pairs) if pairs is not None else [(0.0, float(sensitivity))]
    neighbour_pairs = [NeighbourPair(first=a, second=b, description=f"the value {_show(a)} against {_show(b)}")
                       for a, b in given]
    root = np.random.SeedSequence(seed)
    kwargs: dict[str, Any] = {"sensitivity": sensitivity, "epsilon": epsilon}
    if delta:
        kwargs["delta"] = delta
    charged = [0.0, 0.0]
    share = alpha / (2 * len(neighbour_pairs))
    outcomes = []
    for pair, seeds in zip(neighbour_pairs, root.spawn(len(neighbour_pairs)), strict=True):
        samples = []
        for value, side in zip((pair.first, pair.second), seeds.spawn(2), strict=True):
            rows = []
            for child in side.spawn(trials):
                context = PrivacyContext(seed=child, registry=reg)
                out = mechanism.release(np.array(value, dtype=float, ndmin=1), context=context,
                                        relation="replace-one (the audited pair)", covers="the audited value",
                                        **kwargs)
                rows.append(np.asarray(out, dtype=float).ravel())
                spent = context.spent
                charged = [max(charged[0], spent[0]), max(charged[1], spent[1])]
            samples.append(_stack(rows))
        A, B = samples
        scalar = A.shape[1] == 1 and np.ndim(pair.first) == 0 and np.ndim(pair.second) == 0

        def extra(A_sel: np.ndarray, B_sel: np.ndarray, _p: NeighbourPair = pair, _s: bool = scalar) -> list[Event]:
            if not _s:
                return []
            inputs = (float(_p.first), float(_p.second))
            return (_float_support_events(inputs, float(sensitivity) / float(epsilon))
                    + _lattice_events(A_sel[:, 0], B_sel[:, 0], (0.0, *inputs)))

        outcomes.append(_audit_pair(A, B, charged[1], share, extra))
    return _finish(f"the {name} mechanism (release with sensitivity {sensitivity:g}, epsilon {exact(epsilon)}"
                   + (f", delta {exact(delta)}" if delta else "") + ")",
                   "the released value of each run", neighbour_pairs, outcomes, (charged[0], charged[1]),
                   1 - alpha, [])


def _show(value: Any) -> str:
    arr = np.asarray(value)
    return f"{float(arr):g}" if arr.ndim == 0 else np.array2string(arr, precision=4, threshold=6)


# -- components -------------------------------------------------------------------------------


class _Recorder:
    """A noise mechanism that also keeps what it releases."""

    def __init__(self, mechanism: Any, sink: list[np.ndarray], counts: list[int]):
        self._mechanism = mechanism
        self._sink = sink
        self.counts = counts
        self._inputs: list[tuple[np.ndarray, float]] = []
        self._covers: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mechanism, name)

    def release(self, values: Any, *args: Any, **kwargs: Any) -> Any:
        out = self._mechanism.release(values, *args, **kwargs)
        released = np.asarray(out, dtype=float).ravel()
        self.counts.append(released.size)
        # Every release keeps its first AUDIT_VALUES values (the run's share of each is fixed when the run
        # ends, _allocate): a large early release cannot crowd out the later ones.
        self._sink.append(released[:AUDIT_VALUES].copy())
        try:
            scale = Sensitivity.of(kwargs["sensitivity"]).l1 / float(kwargs["epsilon"])
        except Exception:  # a mechanism with another signature: no float-support event
            scale = math.nan
        self._inputs.append((np.array(values, dtype=float, copy=True).ravel()[:AUDIT_VALUES], scale))
        self._covers.append(str(kwargs.get("covers", "") or ""))
        return out


class _RecordingGenerator(np.random.Generator):
    """A generator on the same bit stream as the step's (so the run draws
    exactly what it would draw unaudited) that also keeps what its
    ``laplace`` calls return, with their ``loc`` and ``scale``: the step's
    own floating-point draws, which the float-support event is tried on."""

    def __init__(self, bit_generator: Any, sink: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None):
        super().__init__(bit_generator)
        self._sink = sink

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        out = super().laplace(loc, scale, size)
        sink = getattr(self, "_sink", None)
        if sink is not None and sum(d[2].size for d in sink) < AUDIT_VALUES:
            drawn = np.asarray(out, dtype=float)
            sink.append((np.broadcast_to(np.asarray(loc, dtype=float), drawn.shape).ravel().copy(),
                         np.broadcast_to(np.asarray(scale, dtype=float), drawn.shape).ravel().copy(),
                         drawn.ravel().copy()))
        return out


#: What an audit says of a step that took seeds with ``spawn_seeds`` where the audit rests on the step's own draws.
SPAWNED_UNSEEN = ("the step's own random draws from the seeds it took with context.spawn_seeds: the auditor cannot "
                  "record draws made from those seeds (it hands out the seeds an unaudited run would, so that it "
                  "audits the program the user runs), so the float-support and lattice events on a step's own "
                  "laplace draws were not tried on them (the released table was audited); this audit is not a "
                  "verification of that noise (draw it with Generator.laplace from context.rng or context.spawn "
                  "to have those events tried on it)")


class _AuditContext(PrivacyContext):
    """A context whose noise mechanisms record every value they release
    (and the values and Laplace scale they were given), and whose
    generators (``context.rng`` and ``context.spawn``, on the bit streams
    of an unaudited run's) record the step's own ``Generator.laplace``
    draws. Its ``spawn_seeds`` hands out the very seeds an unaudited run
    would (the run draws what it would draw unaudited); what is made from
    them is not recorded, and ``took_seeds`` says the step took some."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.releases: list[np.ndarray] = []
        self.release_sizes: list[int] = []
        self.inputs: list[tuple[np.ndarray, float]] = []
        self.covers: list[str] = []
        self.draws: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.took_seeds = False
        self._wrapped: tuple[Any, np.random.Generator] | None = None

    def mechanism(self, value: Any = "laplace") -> Any:
        recorder = _Recorder(super().mechanism(value), self.releases, self.release_sizes)
        recorder._inputs = self.inputs
        recorder._covers = self.covers
        return recorder

    @property
    def rng(self) -> np.random.Generator:
        base = super().rng
        if self._wrapped is None or self._wrapped[0] is not base:
            self._wrapped = (base, _RecordingGenerator(base.bit_generator, self.draws))
        return self._wrapped[1]

    def spawn(self, n: int) -> list[np.random.Generator]:
        return [_RecordingGenerator(g.bit_generator, self.draws) for g in super().spawn(n)]

    def spawn_seeds(self, n: int) -> list[Any]:
        self.took_seeds = True
        return super().spawn_seeds(n)


def _public_bounds(component: Any) -> dict[str, Any] | None:
    bounds = getattr(component, "bounds", None)
    try:
        return {str(k): (float(v[0]), float(v[1])) for k, v in dict(bounds).items()} if bounds else None
    except (TypeError, ValueError, IndexError):
        return None


def _run_component(component: Any, kind: str, data: pd.DataFrame, reg: Registry, seed: Any
                   ) -> tuple[Any, _AuditContext]:
    # The audit runs a component whose parameters come from the data too: its
    # leak entries are then noted (the release makes no DP claim), not refused.
    leaks = (*known_leak_names(reg), *(capability(type(component), "leak_names") or ()))
    context = _AuditContext(Budget(allow_leaks=leaks), seed=seed, registry=reg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _execute(component, kind, data, context)
    return result, context


def _allocate(sizes: Sequence[int], budget: int = AUDIT_VALUES) -> list[int]:
    """How many of its first values each release keeps: everything when the
    run released at most ``budget`` values, else a max-min fair share (a
    release smaller than the common level keeps all its values, the others
    keep the level; what rounding leaves goes one each to the first of
    them). Every release keeps at least one value as long as there are at
    most ``budget`` releases."""
    s = np.asarray(sizes, dtype=np.int64)
    if int(s.sum()) <= budget:
        return [int(v) for v in s]
    low, high = 0, int(s.max())  # the largest level whose total fits the budget
    while low < high:
        mid = (low + high + 1) // 2
        if int(np.minimum(s, mid).sum()) <= budget:
            low = mid
        else:
            high = mid - 1
    keep = np.minimum(s, low)
    left = budget - int(keep.sum())
    for i in np.flatnonzero(s > low)[:left]:
        keep[i] += 1
    return [int(v) for v in keep]


@attrs.frozen
class _RunValues:
    """What one run released, release by release (each cut to its share)."""

    parts: tuple[np.ndarray, ...]
    sizes: tuple[int, ...]
    inputs: tuple[tuple[np.ndarray, float], ...] | None
    covers: tuple[str, ...]
    what: str


#: What the audit says of a masker's released table whose values are not all values its mechanisms released.
TABLE_COVER = "the table the step released (not all of its values are values its noise mechanisms released)"


def _released(result: Any, context: _AuditContext) -> _RunValues:
    if context.releases:
        releases, sizes, covers = list(context.releases), list(context.release_sizes), list(context.covers)
        # A masker publishes its table: when a value of it is none of the values its mechanisms released, the
        # table is not (only) what the mechanisms drew, and it is audited as a release of its own (a step that
        # charges the budget for a noisy release and returns the raw values is caught here).
        table = result.data.to_numpy(dtype=float).ravel() if isinstance(result, Masked) else None
        extra = table is not None and table.size > 0 and not bool(np.isin(table, np.concatenate(releases)).all())
        if extra:
            releases.append(table)  # type: ignore[arg-type]
            sizes.append(table.size)  # type: ignore[union-attr]
            covers.append(TABLE_COVER)
        keep = _allocate(sizes)
        inputs = (tuple((v[:k], sc) for (v, sc), k in zip(context.inputs, keep, strict=False))
                  if len(context.inputs) == len(context.release_sizes) and not extra else None)
        return _RunValues(parts=tuple(r[:k] for r, k in zip(releases, keep, strict=True)),
                          sizes=tuple(sizes), inputs=inputs, covers=tuple(covers), what="mechanisms")
    if isinstance(result, Masked):
        values, what = result.data.to_numpy(dtype=float).ravel(), "the released table"
    elif isinstance(result, Partition):
        if result.centres is not None:
            values, what = np.asarray(result.centres, dtype=float).ravel(), "the released centres"
        else:
            values, what = np.asarray(result.labels, dtype=float).ravel(), "the released labels"
    else:
        values, what = np.asarray(result, dtype=float).ravel(), "the component's output"
    return _RunValues(parts=(values[:AUDIT_VALUES],), sizes=(values.size,), inputs=None, covers=("",), what=what)


def _slot_widths(runs: Sequence[_RunValues]) -> list[int]:
    """The columns given to each release (by its position in the run): the
    most values any run kept of it, so that a column holds the same value of
    the same release in every run (NaN where a run kept fewer)."""
    widths: list[int] = []
    for run in runs:
        for r, part in enumerate(run.parts):
            if r == len(widths):
                widths.append(0)
            widths[r] = max(widths[r], part.size)
    return widths


def _laid_out(parts: Sequence[np.ndarray], widths: Sequence[int]) -> np.ndarray:
    row = np.full(max(sum(widths), 1), np.nan)
    start = 0
    for r, width in enumerate(widths):
        if r < len(parts):
            row[start:start + parts[r].size] = parts[r]
        start += width
    return row


def _audited_text(runs: Sequence[_RunValues], widths: Sequence[int]) -> tuple[str, list[str]]:
    """What the audit saw, and what it did not (one line per release cut
    short, the first few of them, then one line for the rest)."""
    totals = [sum(run.sizes) for run in runs]
    cut_runs: dict[int, list[int]] = {}  # release -> [runs cut, fewest kept, most released]
    for run in runs:
        kept = np.fromiter((p.size for p in run.parts), dtype=np.int64, count=len(run.parts))
        sizes = np.asarray(run.sizes, dtype=np.int64)
        for r in np.flatnonzero(kept < sizes).tolist():
            entry = cut_runs.setdefault(r, [0, int(kept[r]), int(sizes[r])])
            entry[0] += 1
            entry[1] = min(entry[1], int(kept[r]))
            entry[2] = max(entry[2], int(sizes[r]))
    unseen: list[str] = []
    cut = sorted(cut_runs)
    for r in cut[:8]:
        count, kept_r, size = cut_runs[r]
        cover = next((run.covers[r] for run in runs if r < len(run.covers) and run.covers[r]), "")
        name = (f"release {r + 1} of each run" if runs[0].what == "mechanisms" else runs[0].what) + \
            (f" ({cover[:120]}{'...' if len(cover) > 120 else ''})" if cover else "")
        unseen.append(f"{name}: {count} of {len(runs)} runs released more of it than the audit keeps "
                      f"({AUDIT_VALUES} values a run, shared over its releases); "
                      + (f"only its first {kept_r} of up to {size} values were audited" if kept_r else
                         f"none of its up to {size} values was audited"))
    if len(cut) > 8:
        unseen.append(f"{len(cut) - 8} more releases of each run (releases {cut[8] + 1} to {cut[-1] + 1} among "
                      f"them) were cut short the same way")
    if runs[0].what != "mechanisms":
        text = runs[0].what + (f" (its first {widths[0]} of up to {max(totals)} values)" if unseen else
                               " (every value)")
        return text, unseen
    share = ""
    if unseen:
        share = (f" (the first values of each of the up to {len(widths)} releases of a run, {AUDIT_VALUES} values "
                 f"in all, of the up to {max(totals)} values a run released)")
    table = any(TABLE_COVER in run.covers for run in runs)
    return ("the values released by the component's noise mechanisms" + share + " (what its ledger's DP entries "
            "cover)" + (", and " + TABLE_COVER if table else
                        "; the auditor does not check that the component's other outputs are computed from them")
            ), unseen


def _slot_projections(widths: Sequence[int]) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    """The sum of each release's values (for the first few releases of more
    than one value), when a run makes several releases."""
    if len(widths) < 2:
        return []
    out: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(int)
    for r, (start, width) in enumerate(zip(starts[:_SLOT_PROJECTIONS], widths[:_SLOT_PROJECTIONS], strict=False)):
        if width < 2:  # one value: already a value of the output
            continue
        out.append((f"the sum of the values of release {r + 1} of the run",
                    lambda X, _a=int(start), _b=int(start + width): np.nansum(X[:, _a:_b], axis=1)))  # type: ignore[misc]
    return out


#: Largest number of released values the float-support event checks (one log per candidate).
_FLOAT_SUPPORT_LIMIT = 512


def _fixed_inputs(given: Sequence[tuple[np.ndarray, np.ndarray]], trials: int
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The values a component handed its mechanisms, when every run handed
    the same ones (the noise-free part of the release is then fixed). Laid
    out like the released values: NaN where no value was handed."""
    if len(given) != trials or not given:
        return None
    values, scales = given[0]
    there = ~np.isnan(values)
    if int(there.sum()) > _FLOAT_SUPPORT_LIMIT or not np.all(np.isfinite(scales[there])) \
            or not np.all(scales[there] > 0):
        return None
    if all(np.array_equal(v, values, equal_nan=True) and np.array_equal(s, scales, equal_nan=True)
           for v, s in given[1:]):
        return values, scales
    return None


def _laplace_ratio(first: np.ndarray, second: np.ndarray, scales: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The log-likelihood ratio of Laplace noise around ``first`` against
    ``second`` (the most powerful test statistic when the noise is Laplace)."""
    moved = ~np.isnan(first) & ~np.isnan(second) & (first != second)

    def project(X: np.ndarray) -> np.ndarray:
        if X.shape[1] < first.size:
            return np.full(X.shape[0], np.nan)
        Z = X[:, :first.size][:, moved]
        return np.sum((np.abs(Z - second[moved]) - np.abs(Z - first[moved])) / scales[moved], axis=1)

    return project


def _vector_float_support(values: np.ndarray, scales: np.ndarray, which: str) -> Event:
    def test(X: np.ndarray) -> np.ndarray:
        if X.shape[1] < values.size:
            return np.zeros(X.shape[0], dtype=bool)
        ok = np.ones(X.shape[0], dtype=bool)
        for j in np.flatnonzero(~np.isnan(values)):
            rows = np.flatnonzero(ok)
            if rows.size == 0:
                break
            ok[rows] = float_laplace_reachable(X[rows, j], float(values[j]), float(scales[j]))
        return ok

    return Event("float-support", f"every released value is reproducible by numpy's floating-point Laplace "
                                  f"sampler from the values the {which} input hands the mechanism", test)


@attrs.frozen
class _Run:
    """One run of a component: what it released, its label statistics, its
    table (row and column order) and its own ``laplace`` draws."""

    values: _RunValues
    labels: np.ndarray | None
    table: np.ndarray | None  # the released table (records x columns) of a step that drew laplace itself
    draws: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    spent: tuple[float, float]
    took_seeds: bool = False  # the audit rests on the step's own draws and it took seeds its draws escape through


def _runs(component: Any, kind: str, frame: pd.DataFrame, reg: Registry, seeds: Sequence[Any],
          statistic: Callable[[Any, Sequence[np.ndarray]], Any] | None, rows: np.ndarray | None,
          near: np.ndarray) -> list[_Run]:
    out = []
    for child in seeds:
        result, context = _run_component(component, kind, frame, reg, child)
        if statistic is not None:
            values = np.asarray(statistic(result, tuple(context.releases)), dtype=float).ravel()
            run_values = _RunValues(parts=(values,), sizes=(values.size,), inputs=None, covers=("",),
                                    what="the statistic given by the caller")
        else:
            run_values = _released(result, context)
        labels = _labels_of(result) if statistic is None and rows is not None else None
        stats = None if labels is None else _label_statistics(labels, rows, near)  # type: ignore[arg-type]
        table = draws = None
        # where the step's own draws are audited (a masker's table, no mechanism release), draws from seeds it
        # took with spawn_seeds, which the auditor cannot record, leave the audit short of them
        own = statistic is None and isinstance(result, Masked) and not context.releases
        if own and context.draws:
            try:
                matrix = result.data.to_numpy(dtype=float)
            except (TypeError, ValueError):
                matrix = None
            if matrix is not None:
                table = matrix
                draws = tuple(np.concatenate([d[i] for d in context.draws]) for i in range(3))
        out.append(_Run(values=run_values, labels=stats, table=table, draws=draws,  # type: ignore[arg-type]
                        spent=context.spent, took_seeds=own and context.took_seeds))
    return out


def audit_component(component: Any, data: pd.DataFrame | None = None, *, pairs: Sequence[Any] | None = None,
                    trials: int = COMPONENT_TRIALS, seed: int = 0, alpha: float = 0.05, kind: str | None = None,
                    registry: Registry | None = None,
                    statistic: Callable[[Any, Sequence[np.ndarray]], Any] | None = None,
                    float_support: bool = True, search: bool = True) -> AuditResult:
    """Audit a DP component (a masker, clusterer or noise-mechanism step).

    The component runs ``trials`` times on each input of a neighbouring pair,
    each run through a fresh :class:`PrivacyContext` seeded from ``seed``.
    What is audited, in order of preference: ``statistic(result, releases)``
    if given; else every value its noise mechanisms
    (``context.mechanism(...)``) released during the run; else its output
    (a masker's table, a clusterer's centres or labels). Of the released
    values each run keeps :data:`AUDIT_VALUES`, the first ones of *every*
    release (a fair share each, :func:`_allocate`); each release gets its own
    columns in the same place in every run, and its own projection (the sum
    of its values). Values not kept are listed in the result's ``unseen``
    (and notes), and its ``verdict`` is then INCONCLUSIVE rather than
    PASSED. Besides these, every run's released **labels** (a clusterer's,
    or a masker's partition's) are audited through
    :data:`LABEL_STATISTICS` of the records the two inputs share, and a
    step that draws ``Generator.laplace`` from ``context.rng`` or
    ``context.spawn`` is audited with float-support and lattice events on
    those draws. Those events are tried on no other draws: noise built any
    other way (exponentials, uniforms, another library) is audited only
    through the released values. Draws from generators made of
    ``context.spawn_seeds`` seeds are not recorded (the seeds are those an
    unaudited run gets, so the audited run draws what it draws unaudited):
    a masker whose audit rests on its own draws (its table, no mechanism
    release, no ``statistic``) and that took such seeds gets an ``unseen``
    note saying so, and its verdict is INCONCLUSIVE, or FAILED when the
    bound exceeds the charge, never PASSED.

    The pairs: ``pairs`` may give ``(frame, frame)`` tuples or
    :class:`NeighbourPair` objects; by default (``search``) the candidates
    of :func:`~privclust.audit_pairs.candidate_pairs` under the relation the component's ledger
    states, or with ``search=False`` (the conformance kit's cheaper
    setting) only one: under add/remove :func:`empty_region_pairs`' (a
    record added in empty space, which changes a data-adaptive partition),
    else :func:`neighbour_pairs`'. With several pairs, each gets
    ``trials // 2`` selection runs per input; the pair and event with the
    most evidence on them are measured on ``trials`` fresh runs per input
    (so the confidence is not split over the pairs); with one pair, half the
    ``trials`` choose the event and half measure it. With
    ``float_support`` (and when every run hands its mechanisms the same
    values) the float-support event is tried on the mechanisms' released
    values too. The claim is the largest ``context.spent`` of the runs.
    Raises :class:`~privclust.ParameterError` for a component that records
    no DP release (there is nothing to audit).
    """
    reg = registry if registry is not None else get_registry()
    frame = example_frame() if data is None else data
    kind = kind or kind_of(component)
    name = getattr(type(component), "name", type(component).__qualname__)
    if trials < 20:
        raise ParameterError(f"audit_component: trials must be at least 20; got {trials}")
    root = np.random.SeedSequence(seed)
    probe_seed, run_seeds = root.spawn(2)
    _, probe = _run_component(component, kind, frame, reg, probe_seed)
    dp = probe.ledger.of_kind("dp")
    if not dp:
        raise ParameterError(f"{name} records no differentially private release on these data: nothing to audit")
    # the relation the charge is composed under (a mix of add/remove and replace-one releases is charged under
    # replace-one, each add/remove release counting twice): the neighbours the claim speaks of
    relation = probe.accountant.relation(dp) or dp[0].relation or "replace-one"  # type: ignore[attr-defined]
    notes = []
    if probe.ledger.of_kind("leak"):
        notes.append("the component recorded leak entries (parameters taken from the data): its ledger makes no "
                     "DP claim for this release, and the auditor's neighbours, which move a record within the "
                     "data's range, may leave those parameters unchanged, so this audit says nothing about them")
    if pairs is None and _public_bounds(component) is None:
        notes.append("the component states no public bounds the auditor can read: its neighbours move a record "
                     "within the data's own range only, so noise scaled to the data's range, or a sensitivity "
                     "wrong only for values beyond that range, goes unseen")
    if pairs is None:
        bounds = _public_bounds(component)
        chosen = (candidate_pairs(frame, relation, bounds) if search
                  else empty_region_pairs(frame, bounds) if relation_kind(relation) == ADD_REMOVE
                  else neighbour_pairs(frame, relation, bounds=bounds))
    else:
        chosen = [p if isinstance(p, NeighbourPair) else NeighbourPair(first=p[0], second=p[1],
                                                                      description="a pair given by the caller")
                  for p in pairs]
    half = trials // 2
    share = alpha / 2  # one pair is measured: its two bounds share alpha
    trial_runs = []
    for pair, seeds in zip(chosen, run_seeds.spawn(len(chosen)), strict=True):
        shared = _shared_records(pair)
        sel_a, sel_b, est_a, est_b = seeds.spawn(4)
        sides = [_runs(component, kind, frame_in, reg, side.spawn(half), statistic,
                       None if shared is None else rows, np.arange(0) if shared is None else shared.near)
                 for frame_in, side, rows in ((pair.first, sel_a, None if shared is None else shared.first_rows),
                                              (pair.second, sel_b, None if shared is None else shared.second_rows))]
        trial_runs.append((pair, shared, sides, (est_a, est_b)))
    charged = (max(r.spent[0] for _, _, sides, _ in trial_runs for runs in sides for r in runs),
               max(r.spent[1] for _, _, sides, _ in trial_runs for runs in sides for r in runs))
    k = 0
    if len(trial_runs) > 1:  # the pair with the most evidence on its selection runs (never on the fresh ones)
        scores = []
        for _, _, sides, _ in trial_runs:
            A, B, events, _, _ = _samples(sides, statistic, float_support)
            scores.append(_select(A, B, charged[1], share, events)[2])
        k = int(np.argmax(scores))
    pair, shared, sel, (est_a, est_b) = trial_runs[k]
    # with several pairs the selection runs are spread over them: the chosen one is measured on `trials` fresh runs
    measure = trials if len(trial_runs) > 1 else half
    est = [_runs(component, kind, frame_in, reg, side.spawn(measure), statistic,
                 None if shared is None else rows, np.arange(0) if shared is None else shared.near)
           for frame_in, side, rows in ((pair.first, est_a, None if shared is None else shared.first_rows),
                                        (pair.second, est_b, None if shared is None else shared.second_rows))]
    charged = (max(charged[0], *(r.spent[0] for runs in est for r in runs)),
               max(charged[1], *(r.spent[1] for runs in est for r in runs)))
    A, B, events, audited, unseen = _samples([sel[0] + est[0], sel[1] + est[1]], statistic, float_support, half)
    if any(r.took_seeds for runs in (sel[0], sel[1], *est) for r in runs):
        unseen = [*unseen, SPAWNED_UNSEEN]
    outcome = _audit_pair(A, B, charged[1], share, events, selection=half)
    if len(chosen) > 1:
        pair = attrs.evolve(pair, description=pair.description + f" (chosen among {len(chosen)} pairs on the "
                                                                  "selection runs)")
    return _finish(f"{name} ({kind[:-1].replace('_', ' ')})", audited, [pair], [outcome], charged,
                   1 - alpha, notes, unseen)


def _samples(sides: Sequence[Sequence[_Run]], statistic: Any, float_support: bool, selection: int | None = None
             ) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray, np.ndarray], list[Event]], str, list[str]]:
    """The runs of the two inputs as rows of two matrices (each release in
    its own columns, then the label statistics), the events to try (a
    function of the selection rows) and what was audited. Event parameters
    that come from the runs themselves (the fixed inputs, the noise-free
    values of a step's own draws) are taken from the first ``selection``
    runs of each input only."""
    selection = len(sides[0]) if selection is None else selection
    values = [[r.values for r in runs] for runs in sides]
    widths = _slot_widths([v for vs in values for v in vs])
    samples = [np.vstack([_laid_out(v.parts, widths) for v in vs]) for vs in values]
    label_rows = [[r.labels for r in runs] for runs in sides]
    labelled = all(x is not None for rows in label_rows for x in rows)
    if labelled:
        samples = [np.hstack([s, np.vstack(rows)]) for s, rows in zip(samples, label_rows, strict=True)]  # type: ignore[arg-type]
    supports: list[tuple[np.ndarray, np.ndarray] | None] = []
    for vs in values:
        given = [(_laid_out([v for v, _ in run.inputs], widths),
                  _laid_out([np.full(v.size, sc) for v, sc in run.inputs], widths))
                 for run in vs[:selection] if run.inputs]  # selection runs only
        supports.append(_fixed_inputs(given, selection))
    own = [_own_draw_locations(runs[:selection]) for runs in sides]
    if statistic is not None:
        audited, unseen = "the statistic given by the caller", list[str]()
    else:
        audited, unseen = _audited_text([v for vs in values for v in vs], widths)
        if labelled:
            audited += (f"; and the released labels, through {len(LABEL_STATISTICS)} statistics of the labels of "
                        "the records the two inputs share (the moved record's own label is left out)")
        if own[0] is not None:
            audited += "; with float-support and lattice events on the step's own laplace draws"
    slots = _slot_projections(widths) if statistic is None else []
    start = sum(widths) if sum(widths) else 1
    label_columns = [(f"label statistic: {text}", start + i) for i, text in enumerate(LABEL_STATISTICS)] \
        if labelled else []
    extra: list[Event] = []
    if float_support:
        extra += [_vector_float_support(v, sc, which)
                  for (v, sc), which in ((s, w) for s, w in zip(supports, ("first", "second"), strict=True)
                                         if s is not None)]
    extra += _own_draw_events(own[0], own[1], widths[0] if widths else 0)

    def events(A_sel: np.ndarray, B_sel: np.ndarray) -> list[Event]:
        out = list(extra)
        out += _own_draw_lattice_events(own[0], own[1], A_sel, B_sel)
        for label, project in slots:  # each release on its own: a small one is not drowned by a large one
            out += _threshold_and_bin_events(project(A_sel), project(B_sel), label, project)
        for label, column in label_columns:
            def project(X: np.ndarray, _c: int = column) -> np.ndarray:
                return X[:, _c] if X.shape[1] > _c else np.full(X.shape[0], np.nan)
            out += _threshold_and_bin_events(project(A_sel), project(B_sel), label, project)
        if supports[0] is not None and supports[1] is not None and supports[0][0].size == supports[1][0].size:
            project = _laplace_ratio(supports[0][0], supports[1][0], supports[0][1])
            out += _threshold_and_bin_events(
                project(A_sel), project(B_sel),
                "the Laplace log-likelihood ratio of the release between the values the two inputs hand the "
                "mechanisms", project)
        return out

    return samples[0], samples[1], events, audited, unseen


@attrs.frozen(kw_only=True)
class StepAudit:
    """The audit of one DP step of a recipe."""

    index: int
    step_id: str
    component: str
    result: AuditResult


class RecipeAudit(list[StepAudit]):
    """The audits of a recipe's DP steps (a list of :class:`StepAudit`), with
    what they leave out: ``skipped``, the ``(index, step id, component)`` of
    each step that records no DP release and was not audited, and
    ``no_guarantee``, why one run of the whole recipe on the same data is
    not differentially private (its verdict's reasons; ``None`` when it is,
    or when no step was audited). Each audit checks one step's own claim;
    it says nothing of the release as a whole."""

    def __init__(self, audits: Sequence[StepAudit] = (), skipped: Sequence[tuple[int, str, str]] = (),
                 no_guarantee: str | None = None) -> None:
        super().__init__(audits)
        self.skipped = tuple(skipped)
        self.no_guarantee = no_guarantee


def audit_recipe(recipe: Any, data: pd.DataFrame | None = None, *, trials: int = COMPONENT_TRIALS, seed: int = 0,
                 alpha: float = 0.05, registry: Registry | None = None) -> RecipeAudit:
    """Audit every DP step of a recipe (the steps whose run records a DP
    release), each on its own columns of ``data`` (the input as given, not
    the output of earlier steps: each step's claim is about its own input)
    or of :func:`example_frame` when no data are given. The steps get
    independent seeds spawned from ``seed``. The result also names the steps
    it skipped and, when some step was audited, runs the whole recipe once on
    the data to say whether the release is DP (:class:`RecipeAudit`): a
    recipe whose DP steps all pass may still release values without DP."""
    compiled = recipe if hasattr(recipe, "steps") and hasattr(recipe, "registry") else compile(recipe, registry)
    reg = compiled.registry
    frame = check_frame(example_frame() if data is None else data)
    step_columns = check_data(compiled, frame)
    out = []
    skipped = []
    seeds = np.random.SeedSequence(seed).spawn(len(compiled.steps))
    for cs, columns, child in zip(compiled.steps, step_columns, seeds, strict=True):
        view = frame.loc[:, list(columns)].copy()
        _, probe = _run_component(cs.component, cs.kind, view, reg, child.spawn(1)[0])
        if not probe.ledger.of_kind("dp"):
            skipped.append((cs.index, cs.id, type(cs.component).name))
            continue
        result = audit_component(cs.component, view, trials=trials, seed=int(child.generate_state(1)[0]),
                                 alpha=alpha, kind=cs.kind, registry=reg)
        out.append(StepAudit(index=cs.index, step_id=cs.id, component=type(cs.component).name, result=result))
    no_guarantee = None
    if out:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release = run_recipe(compiled, frame, seed=seed)
        if not release.dp_guarantee:  # the verdict's reasons, without the seeded run's caveats
            reasons = no_guarantee_reasons(release.ledger.entries, release.outcomes, release.verification,
                                           spent=release.spent)
            no_guarantee = "No differential-privacy guarantee: " + "; ".join(reasons) if reasons else release.verdict
    return RecipeAudit(out, skipped, no_guarantee)


def assert_audit_passes(result: AuditResult, *, allow_inconclusive: bool = False) -> None:
    """Raise ``AssertionError`` (with the audit's report) when the lower bound
    exceeds the claim, and when the audit is inconclusive (released values
    it did not see) unless ``allow_inconclusive``."""
    if not result.passed:
        raise AssertionError(f"the empirical privacy audit found more privacy loss than charged:\n{result}")
    if result.unseen and not allow_inconclusive:
        raise AssertionError(
            "the empirical privacy audit is INCONCLUSIVE: some released values were not audited (audit them with "
            "statistic=..., or pass allow_inconclusive=True to accept an audit of the values seen only):\n"
            f"{result}")
