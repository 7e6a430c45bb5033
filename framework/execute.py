"""Execute the steps of a compiled recipe: the only loop over steps, used by
:func:`privclust.run` in-process, per stratum (``[roles] strata``) and on
worker processes or a Dask cluster (each stratum's steps as one task).

Each step sees only its columns of the frame as the previous steps left it:

* a **masker** replaces its columns;
* a **noise mechanism** adds noise to its columns;
* a **clusterer** releases labels in a new column (``output``, default
  ``cluster``) appended after the existing ones.

The host checks each result (its type, shape and index; every released value
finite, a missing value released missing) before the next step sees it, and
writes the step's audit (the ``process`` entries of the ledger) itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accounting import PrivacyContext
from .comparison import values_equal
from .compiling import CompiledRecipe, CompiledStep, StepOutcome, bind_constraints, is_key_masker
from .components import Masked, Partition, TopMemberships, capability, is_real_column
from .context import PartStream
from .engines import map_tasks
from .errors import DataError, PrivclustError
from .handover import Handover, forks, handed, handed_data, received, worker_registry
from .integers import integer_columns
from .ledger import LedgerEntry
from .preflight import missing_counts, missing_policy
from .recipe import DEFAULT_LABEL_COLUMN, within_columns
from .report import EFFECTIVE_PARAMS, EFFECTIVE_PARAMS_FROM_DATA

__all__ = ["Executed", "InProcessStrata", "RemoteSteps", "StepCall", "StratumSteps", "by_parts", "call_step",
           "check_finite", "execute", "fold_group_entries", "strata_remotely", "within_parts", "within_problems"]

#: How a step is called on its view of the data: once, once per stratum, or
#: by adopting what the workers did for each stratum.
StepCall = Callable[[CompiledStep, pd.DataFrame, PrivacyContext], Any]


def _as_masked(result: Any, cs: CompiledStep, view: pd.DataFrame) -> Masked:
    name = type(cs.component).name
    if not isinstance(result, Masked):
        raise PrivclustError(f"{cs.role} {name!r} returned {type(result).__name__}, not privclust.Masked "
                             "(a bug in its plugin)")
    out = result.data
    if isinstance(out, np.ndarray) and out.shape == view.shape:
        out = pd.DataFrame(out, index=view.index, columns=view.columns)
        result = attrs.evolve(result, data=out)
    differs = _reshaped(out, view)
    if differs:
        raise PrivclustError(f"steps[{cs.index}] ({cs.id}): {cs.role} {name!r} returned data of another shape, order "
                             f"or index than it was given: {differs}; nothing was returned or written (a bug in its "
                             "plugin: a step returns its columns, in their order, for the records it was given, "
                             "under their index)")
    widened = _widened_floats(out, view, cs)
    return attrs.evolve(result, data=out.astype(widened)) if widened else result


def _few(labels: Sequence[Any]) -> str:
    """A few labels (of columns or rows), and how many more."""
    text = ", ".join(repr(x) for x in labels[:5])
    rest = len(labels) - 5
    return text + (f" and {rest} more" if rest > 0 else "")


def _reshaped(out: Any, view: pd.DataFrame) -> str:
    """How a masker's data differ in shape, columns or index from the ``view``
    it was given (``""``: they do not): the shape received against the shape
    expected, the columns added, missing or reordered, the rows added,
    missing, repeated or reordered."""
    if isinstance(out, np.ndarray):
        return f"an array of shape {out.shape}, expected {view.shape} (the records and columns given)"
    if not isinstance(out, pd.DataFrame):
        return f"a {type(out).__name__}, not a pandas DataFrame"
    said = [] if out.shape == view.shape else [f"shape {out.shape} received, {view.shape} expected"]
    columns, given = list(out.columns), list(view.columns)
    added = [c for c in columns if c not in given]
    missing = [c for c in given if c not in columns]
    if added:
        said.append(f"column(s) added: {_few(added)}")
    if missing:
        said.append(f"column(s) missing: {_few(missing)}")
    if not added and not missing and columns != given:
        repeated_columns = list(dict.fromkeys(c for c in columns if columns.count(c) > 1))
        said.append(f"column(s) repeated: {_few(repeated_columns)}" if repeated_columns else
                    f"the columns in another order ({_few(columns)}; given: {_few(given)})")
    if not out.index.equals(view.index):
        repeated = out.index[out.index.duplicated()]
        extra = out.index.difference(view.index) if out.index.is_unique else repeated[:0]
        gone = view.index.difference(out.index) if out.index.is_unique and view.index.is_unique else view.index[:0]
        if len(repeated):
            said.append(f"{len(repeated)} row(s) repeated (index {_few(repeated.unique().tolist())})")
        if len(extra):
            said.append(f"{len(extra)} row(s) added (index {_few(extra.tolist())})")
        if len(gone):
            said.append(f"{len(gone)} row(s) missing (index {_few(gone.tolist())})")
        if not len(repeated) and not len(extra) and not len(gone):
            if len(out.index) == len(view.index) and set(out.index) == set(view.index):
                at = int(np.flatnonzero(out.index.to_numpy() != view.index.to_numpy())[0])
                said.append(f"the rows in another order (position {at} holds index {out.index.tolist()[at]!r}, "
                            f"given {view.index.tolist()[at]!r})")
            else:
                said.append(f"another index ({type(out.index).__name__} {_few(out.index.tolist())}; given: "
                            f"{type(view.index).__name__} {_few(view.index.tolist())})")
    return "; ".join(said)


def _widened_floats(out: pd.DataFrame, view: pd.DataFrame, cs: CompiledStep) -> dict[str, Any]:
    """The dtype each narrow float column of a step's output is released in:
    float16 and float32 (numpy or pandas nullable) become float64 (exactly: the
    same numbers), or the input column's own float dtype when that is no wider.
    The host compares released values as float64, while a float32 column is
    written in its own shortest text, which reads back as the input's value
    (``float32(63.7)`` prints ``63.7``): every record counted changed, the file
    identical to the input (a red-team audit). Complex values are refused,
    naming the column: the file would print ``(63.7+0j)``, and the imaginary
    parts would carry any number into it."""
    where = f"step {cs.index} ({cs.id!r}, {type(cs.component).name})"
    widened: dict[str, Any] = {}
    for c in out.columns:
        dtype = out[c].dtype
        if dtype.kind == "c":
            raise PrivclustError(f"{where} returned complex values ({dtype}) in column {c!r}; a step must return real "
                                 "numbers: nothing was returned or written (a bug in its plugin: return the real "
                                 "part, e.g. numpy.real(values), if the imaginary part is 0)")
        if dtype.kind != "f" or np.dtype(getattr(dtype, "numpy_dtype", dtype)) == np.float64:
            continue
        nullable = isinstance(dtype, pd.api.extensions.ExtensionDtype)
        given = view[c].dtype
        given_np = np.dtype(getattr(given, "numpy_dtype", given)) if given.kind in "iufb" else np.dtype(np.float64)
        wide = np.promote_types(np.dtype(getattr(dtype, "numpy_dtype", dtype)), given_np)
        wide = wide if wide.kind == "f" else np.dtype(np.float64)
        if wide != np.dtype(getattr(dtype, "numpy_dtype", dtype)):
            widened[c] = pd.api.types.pandas_dtype(wide.name.capitalize()) if nullable else wide
    return widened


def _check_partition(result: Any, cs: CompiledStep, n: int) -> Partition:
    name = type(cs.component).name
    if not isinstance(result, Partition):
        raise PrivclustError(f"clusterer {name!r} returned {type(result).__name__}, not privclust.Partition "
                             "(a bug in its plugin)")
    if result.labels.shape != (n,):
        raise PrivclustError(f"clusterer {name!r} returned {result.labels.shape} labels for {n} records "
                             "(a bug in its plugin)")
    return result


def _finite_problem(values: Any) -> tuple[int, str] | None:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return -1, "non-numeric"
    bad = ~np.isfinite(array)
    if bad.any():
        n_nan = int(np.isnan(array).sum())
        what = " and ".join(x for x in (f"{n_nan} NaN" if n_nan else "",
                                         f"{int(bad.sum()) - n_nan} infinite" if bad.sum() > n_nan else "") if x)
        return int(bad.sum()), what
    return None


def check_finite(cs: CompiledStep, result: Any, view: pd.DataFrame | None = None) -> None:
    """Refuse a release that is not finite, before anything is returned or
    written. A missing value the step was given may stay missing (in the
    same cell, and in a centre's column); any other NaN is refused, and so
    is a value released where the original was missing."""
    name = type(cs.component).name
    where = f"step {cs.index} ({cs.id!r}, {name})"
    fix = ("nothing was returned or written; check the step's parameters (bounds, epsilon, scale) against the "
           "size of the data, or report the bug to the plugin's authors")
    given = view.isna().to_numpy() if view is not None else None
    if isinstance(result, Masked):
        for j, c in enumerate(result.data.columns):
            values = result.data[c].to_numpy()
            if is_key_masker(cs):  # categories of any dtype; a suppression is a value released missing
                released_missing = result.data[c].isna().to_numpy()
                if given is not None and (given[:, j] & ~released_missing).any():
                    filled = int((given[:, j] & ~released_missing).sum())
                    raise PrivclustError(f"{where} released {filled} value(s) in column {c!r} where the original is "
                                         f"missing; a missing value must stay missing; {fix}")
                if is_real_column(result.data[c]):
                    found = _finite_problem(np.asarray(values, dtype=float)[~released_missing])
                    if found:
                        raise PrivclustError(f"{where} released {found[1]} values in column {c!r}; {fix}")
                continue
            if given is not None and given[:, j].any():
                released = np.asarray(values, dtype=float)
                filled = int((~np.isnan(released[given[:, j]])).sum())
                if filled:
                    raise PrivclustError(f"{where} released {filled} value(s) in column {c!r} where the original is "
                                         f"missing; a missing value must stay missing; {fix}")
                values = released[~given[:, j]]
            found = _finite_problem(values)
            if found:
                raise PrivclustError(f"{where} released {found[1]} values in column {c!r}; {fix}")
        partition = result.partition
    else:
        partition = result
        found = _finite_problem(partition.labels)
        if found:
            raise PrivclustError(f"{where} released {found[1]} labels; {fix}")
        labels = np.asarray(partition.labels, dtype=float)
        if np.any(labels != np.round(labels)):
            raise PrivclustError(f"{where} released labels that are not whole numbers; {fix}")
        outside = (labels < -1) | (labels > MAX_LABEL)
        if outside.any():
            raise PrivclustError(f"{where} released {int(outside.sum())} label(s) outside -1 (unassigned) to "
                                 f"{MAX_LABEL} (e.g. {_shown_label(labels[outside][0], partition.labels)}); a "
                                 "clusterer's labels are integers numbering its clusters from 0, -1 for a record it "
                                 f"leaves unassigned; {fix}")
    if partition is not None and partition.centres is not None:
        centres = np.asarray(partition.centres)
        if given is not None and given.any() and centres.ndim == 2 and centres.shape[1] == given.shape[1]:
            # a group whose records all miss a column has no centre value there
            centres = np.where(np.isnan(np.asarray(centres, dtype=float)) & given.any(axis=0), 0.0, centres)
        found = _finite_problem(centres)
        if found:
            cols = list(partition.columns)
            bad = np.where(~np.isfinite(np.asarray(centres, dtype=float)).all(axis=0))[0] if found[0] > 0 else []  # type: ignore[var-annotated]
            named = ", ".join(repr(cols[j]) for j in bad if j < len(cols)) or "its centres"
            raise PrivclustError(f"{where} released {found[1]} centre values (column(s) {named}); {fix}")


#: The largest cluster label the host releases: labels are integers from -1
#: (unassigned) to this, released in an integer column (a label of 1e300 was
#: written as ``1e+300``: a red-team audit).
MAX_LABEL = 2**31 - 1


def _shown_label(value: float, labels: Any) -> str:
    given = np.asarray(labels)
    return str(int(value)) if given.dtype.kind in "iu" else f"{value:g}"


def call_step(cs: CompiledStep, view: pd.DataFrame, context: PrivacyContext) -> Any:
    if cs.kind == "clusterers":
        return _check_partition(cs.component.fit(view, context), cs, len(view))
    method = cs.component.mask if cs.kind == "maskers" else cs.component.perturb
    return _as_masked(method(view, context), cs, view)


def _call_by_part(cs: CompiledStep, view: pd.DataFrame, context: PrivacyContext, column: str,
                  parts: list[tuple[str, np.ndarray]], streams: Sequence[PartStream]) -> Any:
    """Run the step once per part of the public column, each time on that
    part's records only and drawing from that part's seed (``streams``);
    combine the results in the records' order."""
    results = []
    for (text, rows), stream in zip(parts, streams, strict=True):
        with context._in_part(column, text), context._drawing_from(stream):
            results.append(call_step(cs, view.iloc[rows], context))
    return _combine_parts(cs, view, column, parts, results)


def _across_strata(values: Sequence[Any]) -> Any:
    """One effective value of a step run per stratum: the value when every
    stratum used the same, else the range (numbers) or the distinct values."""
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, Mapping) for v in values):  # a nested component's values, name by name
        return {name: _across_strata([v.get(name) for v in values])
                for name in dict.fromkeys(n for v in values for n in v)}
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        return f"{min(numbers):g} to {max(numbers):g} across the strata"
    distinct = list(dict.fromkeys(repr(v) for v in values))
    shown = ", ".join(distinct[:4]) + (f" and {len(distinct) - 4} more" if len(distinct) > 4 else "")
    return f"by stratum: {shown}"


def _combine_parts(cs: CompiledStep, view: pd.DataFrame, column: str, parts: list[tuple[str, np.ndarray]],
                   results: Sequence[Any]) -> Any:
    """One result of the step from its results on each stratum, in the
    records' order: labels numbered stratum after stratum, centres stacked."""
    diagnostics: dict[str, Any] = {
        "strata": column,
        "parts": {text: dict(getattr(r, "diagnostics", {})) for (text, _), r in zip(parts, results, strict=True)}}
    for key in (EFFECTIVE_PARAMS, EFFECTIVE_PARAMS_FROM_DATA):  # the values in use, for the whole step
        each = [dict(getattr(r, "diagnostics", {}).get(key) or {}) for r in results]
        if any(each):
            diagnostics[key] = {name: _across_strata([e.get(name) for e in each])
                                for name in dict.fromkeys(n for e in each for n in e)}
    if cs.kind == "clusterers":
        return _join_partitions(view, parts, results, diagnostics)
    partitions = [getattr(r, "partition", None) for r in results]
    joined = None
    if partitions and all(p is not None for p in partitions):
        # the partition's own scalar diagnostics (such as its k) where every stratum's agree
        first = dict(partitions[0].diagnostics)  # type: ignore[union-attr]
        same = {key: value for key, value in first.items() if isinstance(value, int | float | str | bool)
                and all(type(p.diagnostics.get(key)) is type(value) and p.diagnostics.get(key) == value  # type: ignore[union-attr]
                        for p in partitions)}
        joined = _join_partitions(view, parts, partitions, {**same, "strata": column})  # type: ignore[arg-type]
    out = {}
    for c in view.columns:
        pieces = [np.asarray(r.data[c].to_numpy()) for r in results]
        column_values = np.empty(len(view), dtype=np.result_type(*pieces))
        for (_, rows), piece in zip(parts, pieces, strict=True):
            column_values[rows] = piece
        out[c] = column_values
    return Masked(data=pd.DataFrame(out, index=view.index, columns=view.columns), partition=joined,
                  diagnostics=diagnostics)


def _join_partitions(view: pd.DataFrame, parts: list[tuple[str, np.ndarray]], partitions: Sequence[Partition],
                     diagnostics: Mapping[str, Any]) -> Partition:
    """One partition from each stratum's, in the records' order: each
    stratum's labels are offset by the number of centres of the strata before
    it (a figure of the strata's results, never of which of their clusters
    some record uses), centres and memberships stacked. Without centres the
    offset is the stratum's largest label plus one."""
    labels = np.full(len(view), -1, dtype=np.int64)
    offset = 0
    centres, tops = [], []
    for (_, rows), r in zip(parts, partitions, strict=True):
        lab = np.asarray(r.labels).astype(np.int64)
        labels[rows] = np.where(lab >= 0, lab + offset, -1)
        if r.centres is not None:
            tops.append((rows, r.memberships, offset))
            offset += int(np.asarray(r.centres).shape[0])
        else:
            offset += int(lab.max()) + 1 if (lab >= 0).any() else 0
        centres.append(None if r.centres is None else np.asarray(r.centres))
    present = [c for c in centres if c is not None]
    joined = np.vstack(present) if centres and len(present) == len(centres) \
        and len({c.shape[1] for c in present}) == 1 else None
    memberships = None  # every stratum's memberships, dense or kept, as one kept table (padded with 0 memberships)
    if joined is not None and tops and all(m is not None for _, m, _ in tops):
        tables = [_kept(m) for _, m, _ in tops]
        width = max(t[0].shape[1] for t in tables)
        indices = np.zeros((len(view), width), dtype=np.int64)
        values = np.zeros((len(view), width))
        dropped = np.zeros(len(view))
        for (rows, _, start), (idx, val, drop) in zip(tops, tables, strict=True):
            indices[rows] = start  # a padding slot: the stratum's first centre, membership 0
            indices[np.ix_(rows, np.arange(idx.shape[1]))] = idx + start
            values[np.ix_(rows, np.arange(val.shape[1]))] = val
            dropped[rows] = drop
        memberships = TopMemberships(indices=indices, values=values, dropped=dropped, n_centres=joined.shape[0])
    columns = tuple(partitions[0].columns) if partitions and partitions[0].columns else tuple(view.columns)
    return Partition(labels=labels, centres=joined, memberships=memberships, columns=columns,
                     diagnostics=diagnostics)


def _kept(memberships: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stratum's memberships as kept-centre arrays ``(indices, values, dropped)``: a
    :class:`TopMemberships` as it is, a dense ``(n, c)`` table as all its centres (none dropped). Fuzzy
    microaggregation's dense tables were not joined over the strata, and the joined partition had no memberships:
    the expected sizes and the fuzzy posterior were lost (a red-team audit)."""
    if isinstance(memberships, TopMemberships):
        return np.asarray(memberships.indices), np.asarray(memberships.values), np.asarray(memberships.dropped)
    dense = np.asarray(memberships, dtype=float)
    return (np.broadcast_to(np.arange(dense.shape[1]), dense.shape).astype(np.int64), dense,
            np.zeros(dense.shape[0]))


def _missing_statement(cs: CompiledStep, missing: Mapping[str, Any], policy: str) -> str:
    per_column = ", ".join(f"{c} ({n})" for c, n in missing["columns"].items())
    return (f"{cs.role} {type(cs.component).name!r} was given {missing['records']} record(s) with "
            f"{missing['values']} missing value(s) in column(s) {per_column}; what it does with them, as it states: "
            f"{policy.rstrip('.')}. The host checked that every missing value is released missing; which values are "
            "missing (the missingness pattern) is released and is not protected"
            + (" (this key masker may set more values missing: its suppressions)." if is_key_masker(cs) else "."))


# ---------------------------------------------------------------------------
# The loop over steps
# ---------------------------------------------------------------------------


@attrs.frozen
class Executed:
    """What the steps released: the frame after the last step (the input's
    columns as the steps left them, then the label columns), the label
    columns alone, and each step's outcome."""

    data: pd.DataFrame
    labels: pd.DataFrame
    outcomes: tuple[StepOutcome, ...]


def execute(compiled: CompiledRecipe, frame: pd.DataFrame, step_columns: Sequence[tuple[str, ...]],
            context: PrivacyContext, *, call: StepCall | None = None,
            parts: Sequence[tuple[str, np.ndarray]] | None = None, audit: bool = True) -> Executed:
    """Run every step of ``compiled`` on ``frame`` (checked by
    :func:`~privclust.preflight.preflight`; never modified), each on its
    ``step_columns``, in ``context``. ``call`` calls one step on its view
    (default :func:`call_step`: once on every record; see
    :func:`by_parts` and :class:`RemoteSteps`). With ``audit`` (the run's
    own loop, not a worker's) the registry's observers are called and the
    host writes each step's ``process`` entries; ``parts`` (the strata) are
    then named in them."""
    call = call if call is not None else call_step
    registry = compiled.registry
    hooks = registry.hooks if audit else None
    strata = list(compiled.recipe.roles.strata)
    current = frame.copy(deep=True)
    labels = pd.DataFrame(index=frame.index)
    outcomes: list[StepOutcome] = []
    integers = set(integer_columns(frame))  # released as integers, whatever dtype an earlier step left them in
    total = len(compiled.steps)
    problems = within_problems(compiled, frame, step_columns)
    if problems:  # before any step runs
        raise DataError("; ".join(problems))
    for cs, columns in zip(compiled.steps, step_columns, strict=True):
        view = current.loc[:, list(columns)].copy()
        # the host's own copy of what the step was given: a step that changed its input in place compared equal to
        # itself ("unchanged", missing values filled unseen: a red-team audit)
        given = view.copy(deep=True)
        within = within_columns(cs.step, compiled.recipe.roles)
        groups = within_parts(cs, current, within, parts, len(columns), strata=strata) if within else None
        constraint_set = bind_constraints(cs, compiled.constraints, columns)
        on_progress = None
        if hooks is not None:
            def on_progress(done: float, total_units: float | None, _cs: CompiledStep = cs) -> None:
                hooks.step_progress(step=_cs.step, index=_cs.index, done=done, total=total_units)

            hooks.step_started(step=cs.step, index=cs.index, total=total)
        start = time.perf_counter()
        with context.step(cs.index, cs.id, type(cs.component).name, constraints=constraint_set,
                          on_progress=on_progress, integer_columns=[c for c in columns if c in integers]):
            output = None
            if groups is not None and not isinstance(call, RemoteSteps):
                result = _call_within(cs, view, context, within, groups, fold=audit,
                                      strata=call if isinstance(call, InProcessStrata) else None)
            elif groups is not None:  # the workers ran the groups themselves and tagged their entries
                start = len(context.ledger)
                result = call(cs, view, context)
                _fold_since(context, start, [(e.details.get(_GROUP_TAG), e) for e in context.ledger.entries[start:]],
                            within, len(groups))
            else:
                result = call(cs, view, context)
            check_finite(cs, result, given)
            if cs.kind == "clusterers":
                output = cs.step.output or DEFAULT_LABEL_COLUMN
                released = np.asarray(result.labels).astype(np.int64)  # whole numbers in range (check_finite)
                current[output] = released
                labels[output] = released
            else:
                for c in columns:
                    current[c] = result.data[c].to_numpy(copy=True)  # observers cannot reach the release
            elapsed = call.elapsed(cs) if isinstance(call, RemoteSteps) else time.perf_counter() - start
            unchanged = tuple(c for c in columns if cs.kind == "maskers"
                              and bool(np.all(values_equal(given[c], current[c]))))  # what the step's words may claim
            outcome = StepOutcome(index=cs.index, id=cs.id, kind=cs.kind, component=cs.component,
                                  columns=tuple(columns), result=result, elapsed=elapsed,
                                  n_records=len(given), output=output, unchanged=unchanged, within=within,
                                  within_groups=None if groups is None else _group_numbers(len(given), groups))
            if audit:
                _record_step(context, compiled, cs, outcome, given, strata, parts)
        if hooks is not None:  # observers see a frozen outcome and a read-only view of the run
            # and a copy of a masker's values: the host checks the step's claims on its own (an observer that
            # zeroed them turned a refuted k into "verified": a red-team audit)
            seen = outcome if not isinstance(result, Masked) else attrs.evolve(
                outcome, result=attrs.evolve(result, data=result.data.copy(deep=True)))
            hooks.step_finished(step=cs.step, index=cs.index, outcome=seen, context=context.view())
        outcomes.append(outcome)
    return Executed(data=current, labels=labels, outcomes=tuple(outcomes))


def _record_step(context: PrivacyContext, compiled: CompiledRecipe, cs: CompiledStep, outcome: StepOutcome,
                 view: pd.DataFrame, strata: Sequence[str], parts: Sequence[tuple[str, np.ndarray]] | None) -> None:
    """The step's ``process`` entries. The audit is the host's: written here,
    whatever plugins are installed or blocked."""
    details = outcome.audit_details()
    provider = compiled.registry.provider(cs.kind, type(cs.component))
    if provider is not None:  # who provided the component: a replacing plugin is named here
        details.update(plugin=provider.plugin, distribution=provider.distribution, version=provider.version)
    missing = missing_counts(view)
    if missing["values"]:
        policy = missing_policy(cs) or ""
        details["missing"] = {**missing, "policy": policy}
    if parts is not None:
        details["strata"] = list(strata)
        details["parts"] = {text: int(len(rows)) for text, rows in parts}
    context._record_host("process", outcome.describe(), details=details)
    if missing["values"]:
        context._record_host("process", _missing_statement(cs, missing, details["missing"]["policy"]),
                             details={"missing": details["missing"]}, mechanism="missing values")


# ---------------------------------------------------------------------------
# A step's ``within`` groups
# ---------------------------------------------------------------------------


def within_problems(compiled: CompiledRecipe, frame: pd.DataFrame,
                    step_columns: Sequence[tuple[str, ...]]) -> list[str]:
    """The steps' ``within`` columns that are not in the data, or are among
    the step's own columns (its default columns included)."""
    problems = []
    labels: set[str] = set()  # the label columns of the earlier clusterer steps
    for cs, columns in zip(compiled.steps, step_columns, strict=True):
        within = within_columns(cs.step, compiled.recipe.roles)
        absent = [c for c in within if c not in frame.columns and c not in labels]
        if absent:
            problems.append(f"steps[{cs.index}] ({cs.id}).within: no column {', '.join(map(repr, absent))} in the "
                            "data or among the label columns of the earlier steps; name columns of the data, an "
                            "earlier clusterer's output, or \"keys\" for the [roles] keys")
        if cs.kind == "clusterers":
            labels.add(cs.step.output or DEFAULT_LABEL_COLUMN)
        inside = [c for c in within if c in columns]
        if inside:
            problems.append(f"steps[{cs.index}] ({cs.id}).within: names the step's own column(s) "
                            f"{', '.join(map(repr, inside))}; leave them out of within or name the step's columns")
    return problems


def _shown(value: Any) -> str:
    return "missing" if pd.isna(value) else str(value)


def within_parts(cs: CompiledStep, current: pd.DataFrame, within: Sequence[str],
                 parts: Sequence[tuple[str, np.ndarray]] | None, n_columns: int, *,
                 refuse: bool = True, strata: Sequence[str] = ()) -> list[tuple[str, np.ndarray]]:
    """The groups a ``within`` step runs on: within each stratum (``parts``;
    ``None``: one), the records with identical values of ``within`` in
    ``current`` (as the earlier steps released them; a missing value is a
    value of its own). With ``refuse``, a group smaller than the step needs
    (``min_records``) is a :class:`DataError` naming it, before the step runs."""
    codes = current.groupby(list(within), dropna=False, sort=False).ngroup().to_numpy()
    values = current.loc[:, list(within)].to_numpy(dtype=object)
    out = []
    for text, rows in parts if parts is not None else [("", np.arange(len(current)))]:
        sub = codes[rows]
        for code in dict.fromkeys(sub.tolist()):
            members = rows[sub == code]
            shown = ", ".join(f"{c} = {_shown(v)}" for c, v in zip(within, values[members[0]], strict=True))
            out.append((f"{', '.join(strata) or 'stratum'} = {text}; {shown}" if text else shown, members))
    minimum = capability(cs.component, "min_records")
    need = minimum(n_columns) if minimum is not None else None
    small = [(text, len(rows)) for text, rows in out if need is not None and len(rows) < need]
    if small and refuse:
        listed = "; ".join(f"({text}): {n} record(s)" for text, n in small[:5]) + (
            f"; and {len(small) - 5} more" if len(small) > 5 else "")
        raise DataError(f"steps[{cs.index}] ({cs.id}) runs within the groups of identical {', '.join(within)}"
                        f"{' within each stratum' if parts is not None else ''}, and {type(cs.component).name} needs "
                        f"at least {need} records in each; {len(small)} of {len(out)} groups are smaller: {listed}. "
                        f"Recode or suppress the keys first so that every combination has at least {need} records "
                        "(e.g. a recode or local-suppression step before this one), or remove within")
    return out


def _group_numbers(n: int, groups: Sequence[tuple[str, np.ndarray]]) -> np.ndarray:
    numbers = np.zeros(n, dtype=np.int64)
    for g, (_, rows) in enumerate(groups):
        numbers[rows] = g
    return numbers


#: A worker's tag of the entries a ``within`` step recorded in each group (its stratum and the group), for the
#: run's own loop to fold them over every stratum's groups; removed there.
_GROUP_TAG = "\0within group"


def _call_within(cs: CompiledStep, view: pd.DataFrame, context: PrivacyContext, within: Sequence[str],
                 groups: list[tuple[str, np.ndarray]], *, fold: bool = True,
                 strata: InProcessStrata | None = None) -> Any:
    """Run the step once per group, on its records only (each group drawing
    from its stratum's seed, with ``strata``); combine the results in the
    records' order; fold the ledger entries the step recorded in its groups
    (:func:`fold_group_entries`), or, in a worker (not ``fold``), tag them
    with their group for the run to fold."""
    start = len(context.ledger)
    results: list[Any] = []
    tagged: list[Any] = []
    for g, (_, rows) in enumerate(groups):
        before = len(context.ledger)
        if strata is None:
            results.append(call_step(cs, view.iloc[rows], context))
        else:
            with context._drawing_from(strata.stream_of(rows)):
                results.append(call_step(cs, view.iloc[rows], context))
        tagged.extend(((context._part, g), e) for e in context.ledger.entries[before:])
    spent = [e for _, e in tagged if e.kind == "dp"]
    if spent:  # a component that spends without declaring it: refused as compile refuses a declared one
        raise PrivclustError(f"step {cs.index} ({cs.id!r}, {type(cs.component).name}) spent differential privacy "
                             f"({spent[0].mechanism}) in its within groups of {', '.join(within)}; the groups are "
                             "values released by earlier steps, so no parallel composition over them can be claimed; "
                             "nothing was released: remove within from this step")
    if fold:
        _fold_since(context, start, tagged, within, len(groups))
    else:
        for tag, e in tagged:
            context.ledger._replace(attrs.evolve(e, details={**e.details, _GROUP_TAG: tag}))
    return _combine_parts(cs, view, ", ".join(within), groups, results)


def _fold_since(context: PrivacyContext, start: int, tagged: Sequence[tuple[Any, LedgerEntry]],
                within: Sequence[str], n_groups: int) -> None:
    """Replace the ledger's entries from ``start`` on by their fold."""
    # a claim a worker's stratum recorded in a group folds with the other strata's groups into one claim about
    # every group (as in one process, where the groups are run without the stratum's tag): not one stratum's
    untagged = [(tag, attrs.evolve(e, details={k: v for k, v in e.details.items() if k != _GROUP_TAG},
                                   partition=e.partition if e.kind == "dp" else None))
                for tag, e in tagged]
    folded = fold_group_entries(untagged, within, n_groups)
    del context.ledger._entries[start:]  # the host's own ledger: the groups' entries replaced by their fold
    for entry in folded:
        context.ledger._append(attrs.evolve(entry, seq=len(context.ledger)))


def _across_groups(values: Sequence[Any]) -> Any:
    """One value of a detail the groups' entries give: the value when every
    group gave the same, else the range (numbers) or the distinct values."""
    first = values[0]
    if all(_same_value(v, first) for v in values):
        return first
    if all(isinstance(v, Mapping) for v in values):
        return {name: _across_groups([v.get(name) for v in values])
                for name in dict.fromkeys(n for v in values for n in v)}
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        return {"min": min(numbers), "max": max(numbers)}
    distinct = list(dict.fromkeys(repr(v) for v in values))
    return {"distinct": distinct[:8], "more": max(0, len(distinct) - 8)}


def _same_value(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays
        return False


def fold_group_entries(tagged: Sequence[tuple[Any, LedgerEntry]], within: Sequence[str],
                       n_groups: int) -> list[LedgerEntry]:
    """The ledger entries a step recorded in each of its ``within`` groups
    (``(group, entry)`` in the order recorded), folded: the j-th entry of a
    kind, component, mechanism and typed claim in each group folds with the
    j-th such entry of the others into one entry saying it was recorded in
    each of the groups, the details the groups differ in kept as their
    range. Entries whose words differ fold only when a typed claim (the fact
    the host checks) says what they claim; others stay apart. ``seq`` is
    left to the caller."""
    buckets: dict[Any, list[LedgerEntry]] = {}
    seen: dict[tuple[Any, Any], int] = {}
    for g, e in tagged:
        base = (e.kind, e.component, e.mechanism, e.fact, e.status, e.origin, e.relation, e.epsilon, e.delta,
                e.covers, e.not_covered, e.partition)
        j = seen.get((g, base), 0)
        seen[(g, base)] = j + 1
        buckets.setdefault((base, j), []).append(e)
    cols = ", ".join(within)
    out: list[LedgerEntry] = []
    for entries in buckets.values():
        first = entries[0]
        words = {e.statement for e in entries}
        if len(entries) == 1 and n_groups == 1:
            out.append(first)
            continue
        describe = getattr(first.fact, "describe", None)
        summary = str(describe()).rstrip(".") if callable(describe) else None
        if len(words) > 1 and summary is None:
            out.extend(entries)
            continue
        where = (f"each of the {n_groups} groups" if len(entries) == n_groups else
                 f"{len(entries)} of the {n_groups} groups")
        body = first.statement if len(words) == 1 else (
            f"{summary} (the figures the groups' entries differ in are in this entry's "
            "details, as their range across the groups).")
        text = (f"In {where} of records with identical values of {cols} (within each stratum, as the earlier steps "
                f"released them; the host ran the step once per group): {body}")
        details = _across_groups([dict(e.details) for e in entries]) if entries else {}
        details = dict(details) if isinstance(details, Mapping) else {}
        details["within"] = {"columns": list(within), "groups": n_groups, "recorded_in": len(entries)}
        out.append(attrs.evolve(first, statement=text, claim=text if first.claim is not None else None,
                                details=details))
    return out


@attrs.frozen
class InProcessStrata:
    """A step call that runs the step once per stratum, on that stratum's
    records only, in the run's own process (:func:`by_parts`). Each stratum
    draws from a seed of its own, kept from step to step (``streams``, in
    the strata's order), exactly as a worker running the stratum draws
    (:func:`strata_remotely`): the same seed gives the same release in one
    process as with ``processes=`` or a scheduler."""

    column: str
    parts: list[tuple[str, np.ndarray]]
    streams: tuple[PartStream, ...]
    #: each record's stratum (its position in ``parts``)
    part_of: np.ndarray

    def __call__(self, cs: CompiledStep, view: pd.DataFrame, context: PrivacyContext) -> Any:
        return _call_by_part(cs, view, context, self.column, self.parts, self.streams)

    def stream_of(self, rows: np.ndarray) -> PartStream:
        """The stream of the stratum that holds ``rows`` (a ``within`` group of one stratum)."""
        return self.streams[int(self.part_of[rows[0]])] if len(rows) else self.streams[0]


def by_parts(column: str, parts: list[tuple[str, np.ndarray]], context: PrivacyContext) -> InProcessStrata:
    """Call each step once per stratum, on that stratum's records only, each
    stratum drawing from one of ``len(parts)`` seeds spawned from the run's
    here, in the strata's order: the seeds :func:`strata_remotely` spawns at
    the same point of the run, so the draws depend on the seed and the
    strata, not on where the strata run."""
    seeds = context.spawn_seeds(len(parts))
    part_of = np.zeros(max((int(rows.max()) + 1 for _, rows in parts if len(rows)), default=0), dtype=np.int64)
    for i, (_, rows) in enumerate(parts):
        part_of[rows] = i
    return InProcessStrata(column, parts, tuple(PartStream(seed) for seed in seeds), part_of)


# ---------------------------------------------------------------------------
# Strata as independent tasks (local processes or a Dask cluster)
# ---------------------------------------------------------------------------


@attrs.frozen
class StratumSteps:
    """What a worker sends back for one stratum: each step's result and time,
    and the ledger entries the stratum's context recorded, by step."""

    results: tuple[Any, ...]
    elapsed: tuple[float, ...]
    entries: tuple[Any, ...]
    random_steps: tuple[int, ...] = ()


@attrs.frozen
class RemoteSteps:
    """A step call that adopts what the workers did for the step on every
    stratum (:func:`strata_remotely`): their ledger entries, then their
    results combined in the records' order; the step's time is the sum of
    the strata's."""

    column: str
    parts: list[tuple[str, np.ndarray]]
    strata: Sequence[StratumSteps]

    def __call__(self, cs: CompiledStep, view: pd.DataFrame, context: PrivacyContext) -> Any:
        for stratum in self.strata:
            for entry in stratum.entries:
                if entry.step == cs.index:
                    context._adopt(entry)
            context._note_random(i for i in stratum.random_steps if i == cs.index)
        return _combine_parts(cs, view, self.column, self.parts, [r.results[cs.index] for r in self.strata])

    def elapsed(self, cs: CompiledStep) -> float:
        return sum(r.elapsed[cs.index] for r in self.strata)


def _stratum_steps(handover: Handover, part: pd.DataFrame | None, rows: np.ndarray, label: str, text: str,
                   seed: Any, step_columns: tuple[tuple[str, ...], ...]) -> StratumSteps:
    """Run every step of the recipe on one stratum's records (in a worker),
    in a context of the stratum's own: same budget, a child seed of the run,
    every DP release tagged with the stratum. ``part`` is the stratum's
    records, or ``None`` in a forked worker, which takes ``rows`` of the data
    its run handed over. The compiled recipe comes with the task (or from
    the run, in a forked worker): it is not compiled again."""
    registry = worker_registry(handover.spec, handover.token)
    compiled = received(handover, registry)
    context = PrivacyContext(compiled.budget, seed=seed, registry=registry)
    current = part if part is not None else handed_data(handover.token).iloc[rows]
    with context._in_part(label, text):
        done = execute(compiled, current, step_columns, context, audit=False)
    return StratumSteps(results=tuple(o.result for o in done.outcomes),
                        elapsed=tuple(o.elapsed for o in done.outcomes), entries=tuple(context.ledger.entries),
                        random_steps=context.random_steps)


def strata_remotely(compiled: CompiledRecipe, frame: pd.DataFrame, step_columns: tuple[tuple[str, ...], ...],
                    parts: list[tuple[str, np.ndarray]], context: PrivacyContext, scheduler: Any,
                    processes: int | None, timeout: float) -> RemoteSteps:
    """Every stratum's steps as an independent task on the engine; the step
    call that adopts their results, in the order of the strata."""
    label = ", ".join(compiled.recipe.roles.strata)
    seeds = context.spawn_seeds(len(parts))
    forked = forks(scheduler)
    with handed(compiled.registry, scheduler, frame if forked else None, compiled) as handover:
        # forked workers read their stratum from the data they inherit: the tasks carry row positions only
        tasks = [(handover, None if forked else frame.iloc[rows], rows, label, text, seed, step_columns)
                 for (text, rows), seed in zip(parts, seeds, strict=True)]
        done = map_tasks(_stratum_steps, tasks, scheduler=scheduler, processes=processes, timeout=timeout)
    return RemoteSteps(label, parts, tuple(done))
