"""The integer columns of a release: the input's integer columns are
released as integers, rounded after the last step (post-processing), with
controlled rounding that keeps the edit rules where a constraint handler can.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .accounting import HOST, PrivacyContext
from .comparison import exact_codes
from .compiling import CompiledStep, StepOutcome, spends_privacy
from .components import capability, is_real_column, rounding_moves
from .constraints import ConstraintSet, integer_flags, judge
from .errors import DataError, PrivclustError
from .registry import BUILTIN_DISTRIBUTION, get_registry

__all__ = ["EXACT_INTEGERS", "inexact_integer_problems", "integer_columns", "private_columns", "release_integers",
           "restore_nullable_floats"]

def integer_columns(frame: pd.DataFrame) -> tuple[str, ...]:
    """The columns of ``frame`` with an integer dtype: numpy ``int*`` and
    ``uint*``, pandas nullable ``Int*`` and ``UInt*`` (not boolean)."""
    return tuple(c for c, whole in zip(frame.columns, integer_flags(frame, frame.columns), strict=True) if whole)


def _integer_dtype(dtype: Any, values: np.ndarray) -> tuple[Any, str | None]:
    """The dtype to release whole ``values`` in: the input's integer dtype,
    its nullable counterpart when a value is missing, int64 (Int64) when the
    values do not fit it, float64 beyond int64; and a note when it is not the
    input's dtype."""
    floating = values.dtype.kind == "f"
    missing = bool(floating and np.isnan(values).any())
    base = np.dtype(getattr(dtype, "numpy_dtype", dtype))
    nullable = isinstance(dtype, pd.api.extensions.ExtensionDtype)
    if floating:  # fmin and fmax pass over a missing value (NaN only when every value is missing)
        lo, hi = (np.fmin.reduce(values).item(), np.fmax.reduce(values).item()) if values.size else (0, 0)
        lo, hi = (0, 0) if np.isnan(lo) else (lo, hi)
    else:
        lo, hi = (values.min().item(), values.max().item()) if values.size else (0, 0)

    def fits(kind: np.dtype) -> bool:  # Python compares ints and floats exactly
        info = np.iinfo(kind)
        return bool(info.min <= lo and hi <= info.max)

    if fits(base):
        if missing and not nullable:
            name = base.name.capitalize().replace("Uint", "UInt")
            return pd.api.types.pandas_dtype(name), f"missing values kept, so released as the nullable {name}"
        return dtype, None
    if fits(np.dtype(np.int64)):
        wide = "Int64" if missing or nullable else "int64"
        return pd.api.types.pandas_dtype(wide), f"values from {lo:.0f} to {hi:.0f} do not fit {base.name}, so " \
                                                f"released as {wide}"
    return np.dtype(float), "values beyond the int64 range, so released as float64 (whole numbers)"


#: Integers from here on are not all exact as doubles: such a column is never
#: moved by controlled rounding (it is held fixed), and its values never pass
#: through a double.
EXACT_INTEGERS = 2.0**53


def restore_nullable_floats(frame: pd.DataFrame, current: pd.DataFrame) -> None:
    """A nullable ``Float64`` column of the input that a step released as
    numpy doubles is released as ``Float64`` again (exactly: the doubles it
    holds, a missing value as ``<NA>``), so that Parquet keeps the file's own
    type; a ``Float32`` or ``float32`` column of the input that a step
    released as float32 stays so (a step's narrower float output is widened
    when the host takes it, :mod:`privclust.execute`)."""
    for c in frame.columns:
        dtype = frame[c].dtype
        if isinstance(dtype, pd.Float64Dtype) and current[c].dtype == np.float64:
            current[c] = pd.array(current[c].to_numpy(), dtype=dtype)


def _largest_magnitude(series: pd.Series) -> int:
    """The largest magnitude of an integer column's values, exactly (0 when
    it has none; never through a double, and -2^63 is not negative)."""
    if not pd.api.types.is_integer_dtype(series) or pd.api.types.is_bool_dtype(series):
        return 0
    values = series.dropna()
    return max(abs(int(values.min())), abs(int(values.max()))) if len(values) else 0


def _inexact_integers(column: str, series: pd.Series, where: str, what: str) -> str:
    """Why ``column``, an integer column with values of 2^53 or more in
    magnitude, cannot be released by a step that computes on doubles."""
    largest = _largest_magnitude(series)
    return (f"{where}: column {column!r} holds integers beyond 2^53 (up to {largest} in magnitude) and the step "
            f"{what}: doubles cannot hold such integers exactly (the nearest double to {largest} is "
            f"{float(largest):.17g}), so they would be released rounded; leave the column out of the step's columns "
            "(an identifier needs no masking: declare it with [roles] ids = [...]), or subtract a public offset so "
            "that its values lie within +-2^53")


def inexact_integer_problems(cs: CompiledStep, frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """A masker computes on doubles: its integer columns must be exact as doubles."""
    if cs.kind != "maskers":
        return []
    return [_inexact_integers(c, frame[c], f"steps[{cs.index}] ({cs.id})", "computes on them as doubles")
            for c in columns if c in frame.columns and _largest_magnitude(frame[c]) >= EXACT_INTEGERS]


def private_columns(outcomes: Sequence[StepOutcome]) -> tuple[str, ...]:
    """The columns a differentially private step wrote (:func:`spends_privacy`), which the host does not round to
    integers: whether an input column holds only whole numbers (its integer dtype, read from a CSV file's values) is
    a fact about every record, and a rounding decided by it would tell a data set from its neighbour with one
    decimal value (a red-team audit: integers with an "integer rounding" entry against lattice decimals)."""
    seen: dict[str, None] = {}
    for o in outcomes:
        if o.kind != "clusterers" and spends_privacy(o.component):
            seen.update(dict.fromkeys(o.columns))
    return tuple(seen)


def release_integers(context: PrivacyContext, frame: pd.DataFrame, current: pd.DataFrame,
                     outcomes: Sequence[StepOutcome], handlers: Sequence[Any],
                     rules: ConstraintSet | None) -> dict[int, int] | None:
    """Release the integer columns of the input as integers (in ``current``,
    in place): post-processing of the steps' output, after the last step.

    The integer columns a masker or noise step changed are rounded, except
    those a differentially private step wrote (:func:`private_columns`); with
    edit rules over them, each constraint handler's ``round_integers``
    capability (on the rules it binds) does it so that the rules that held
    still hold where it can; a handler without it gets every value rounded to
    the nearest integer. The host then makes sure itself that the integer
    columns hold whole numbers and that the columns no step changed are as
    they were, casts each integer column back to its input dtype, and
    records a ``process`` entry. A column a step already released with an
    integer dtype (the ``geometric`` mechanism) keeps its values, exactly.
    Returns, per rule index, on how many records the rule held before the
    rounding and not after (``None`` without integer columns to round)."""
    changed = {c for o in outcomes if o.kind != "clusterers" for c in o.columns}
    integers = integer_columns(frame)
    # a key masker may release an integer-coded key as text (recode's labels): no longer numbers, not rounded; a
    # column a differentially private step wrote is released as that step gave it (private_columns)
    private = set(private_columns(outcomes))
    targets = [c for c in integers if c in changed and c not in private and is_real_column(current[c])]
    if not targets:
        return None
    exact = {c for c in targets if pd.api.types.is_integer_dtype(current[c])}  # a step released integers
    for c in targets:
        if c not in exact and _largest_magnitude(frame[c]) >= EXACT_INTEGERS:  # passed through doubles: rounded
            step = next(o for o in reversed(outcomes) if o.kind != "clusterers" and c in o.columns)
            raise DataError(_inexact_integers(c, frame[c], f"steps[{step.index}] ({step.id})",
                                              f"released it as {current[c].dtype} values"))
    before: dict[str, np.ndarray] = {}  # the values before rounding, of the columns rounded here
    after: dict[str, np.ndarray] = {}
    adjusted: dict[str, np.ndarray] = {}
    kept_by: list[str] = []
    own_rounding: list[tuple[str, dict[str, float]]] = []  # a plugin handler's round_integers: largest change
    plain_rules: list[str] = []
    followed = split = 0
    skipped = False
    jointly: list[int] = []  # tables rounded together as one set of rules
    separate = False  # rules rounded in more than one pass
    unsolved: list[tuple[str, str]] = []
    broken: dict[int, int] | None = None
    if rules is not None and rules.rules and set(targets) & set(rules.columns):
        columns = list(rules.columns)
        X = current.loc[:, columns].to_numpy(dtype=float, na_value=np.nan)
        held_before = ~judge(rules, X).violated
        X.flags.writeable = False  # a handler returns new values; it never changes these
        # a column a differentially private step wrote is neither rounded nor moved to keep a rule
        integer = np.array([c in integers and c not in private for c in columns])
        huge = np.array([c in exact and _largest_magnitude(current[c]) >= EXACT_INTEGERS for c in columns])
        fixed = np.array([c not in changed or c in private for c in columns]) | huge
        Y = X
        done = np.zeros(len(columns), dtype=bool)  # columns an earlier handler's rules already settled
        grouped = _rounding_groups(handlers, rules.parts, columns)
        separate = len(grouped) > 1
        for name, part, involved, tables, classes in grouped:
            if tables > 1:
                jointly.append(tables)
            method = capability(part, "round_integers")
            if method is None:
                Y = Y.copy() if not Y.flags.writeable else Y
                for j in np.flatnonzero(integer & ~fixed & ~done & involved).tolist():
                    Y[:, j] = np.rint(Y[:, j])
                plain_rules.extend(part.rules)
            else:
                out = np.asarray(method(Y, integer, fixed | done), dtype=float)
                if out.shape != Y.shape:
                    raise PrivclustError(f"constraint handler {name!r}: round_integers returned shape {out.shape} "
                                         f"for values of shape {Y.shape} (a bug in its plugin)")
                if not out.flags.writeable or np.shares_memory(out, Y):
                    out = out.copy()
                for j in np.flatnonzero(fixed | done).tolist():  # the host's own guarantee: these do not change
                    out[:, j] = Y[:, j]
                largest = _checked_rounding(name, part, columns, Y, out, integer, fixed | done)
                Y = out
                kept_by.append(name)
                if not all(_builtin(context, cls) for cls in classes):
                    own_rounding.append((name, largest))
                plan = getattr(part, "rounding_plan", None)
                if callable(plan):
                    for i, why in plan(integer, fixed | done).unsolved:
                        unsolved.append((part.rules[i], why))
            done |= involved
        Y = Y.copy() if not Y.flags.writeable else Y
        followed, split, skipped = _round_with_matches(exact_codes(current, columns), Y, fixed)
        for j, c in enumerate(columns):
            if integer[j] and not fixed[j]:
                np.rint(Y[:, j], out=Y[:, j])  # the host's own guarantee: whole numbers
                if c in exact and np.array_equal(Y[:, j], X[:, j]):
                    continue  # a step released these integers: kept as they are, exactly
                before[c], after[c] = X[:, j], Y[:, j]
            elif not fixed[j] and not np.array_equal(Y[:, j], X[:, j], equal_nan=True):
                adjusted[c] = Y[:, j]
        broken_rows = held_before & judge(rules, Y, integer=integer).violated  # whole numbers now: exactly
        involved_rules = [r for r, cols in enumerate(rules.rule_columns) if set(cols) & set(targets)]
        broken = {r: int(np.count_nonzero(broken_rows[:, r])) for r in involved_rules}
    for c in targets:
        if c not in after and c not in exact:
            before[c] = current[c].to_numpy(dtype=float, na_value=np.nan)
            after[c] = np.rint(before[c])

    notes = []
    rounded: list[tuple[str, int]] = []
    whole: list[tuple[str, int]] = []
    for c in targets:
        if c in after:
            values = after[c]
            n_changed = int(np.count_nonzero(values != before[c])) - int(np.count_nonzero(np.isnan(values)))
        else:
            values, n_changed = current[c].to_numpy(), 0
        (rounded if n_changed else whole).append((c, n_changed))
        dtype, note = _integer_dtype(frame[c].dtype, values)
        if note:
            notes.append(f"{c}: {note}")
        if isinstance(dtype, pd.api.extensions.ExtensionDtype):
            current[c] = pd.array(values, dtype=dtype)
        elif current[c].dtype != dtype or c in after:
            current[c] = values.astype(dtype)
    for c, values in adjusted.items():
        current[c] = values

    parts = [f"The host released the integer columns {', '.join(targets)} as integers, after the last step."]
    if rounded:
        parts.append("Rounded: " + ", ".join(f"{c} ({n} value{'s' if n != 1 else ''})" for c, n in rounded) + ".")
    if whole:
        parts.append("Already whole numbers (values unchanged, dtype restored): " + ", ".join(c for c, _ in whole)
                     + ".")
    builtin_by = [n for n in kept_by if n not in dict(own_rounding)]
    for name, largest in own_rounding:
        moved = ", ".join(f"{c} {v:.6g}" for c, v in largest.items()) or "none"
        parts.append(f"Columns in edit rules were rounded by constraint handler {name!r}'s own round_integers (its "
                     "method, not the host's; the host checked that each integer value moved by less than 1 and each "
                     "non-integer value not at all, except in the columns of the handler's equality rules; largest "
                     f"change per column: {moved}).")
    if builtin_by:
        parts.append(f"Columns in edit rules were rounded by controlled rounding ({', '.join(builtin_by)}: "
                     "equalities over integer columns with integer coefficients are solved exactly on the integers "
                     "for some of their columns, chosen per record; inequalities and bounds broken by rounding to "
                     "the nearest integer are repaired by rounding down or up), which aims to keep each rule on the "
                     "records where it held before.")
    if kept_by:
        if jointly:
            parts.append(" ".join(f"The rules of {n} [[constraints]] tables were rounded together, as one set." for n in
                                  jointly))
        lost = [rules.rules[r] for r, count in (broken or {}).items() if count] if rules is not None else []
        parts.append("It kept every rule on every record where the rule held before." if not lost else
                     f"It did not keep {', '.join(repr(t) for t in lost)} everywhere (each rule's check below says on "
                     "how many records)" + ("; a handler's rounding does not move the columns an earlier handler's "
                                            "rules have rounded." if separate else "."))
    if adjusted and own_rounding:
        parts.append(f"Non-integer column(s) {', '.join(adjusted)} changed by the handlers' rounding (each in an "
                     "equality rule of the handler that changed it; each rule's check below says where it holds).")
    elif adjusted:
        parts.append(f"Non-integer column(s) {', '.join(adjusted)} adjusted to keep an equality with rounded "
                     "integers.")
    if unsolved:
        parts.append("Rules that cannot be kept exactly (rounded to the nearest integer, then checked): "
                     + "; ".join(f"{text!r} ({why})" for text, why in unsolved) + ".")
    if plain_rules:
        parts.append("Rules of handlers without controlled rounding (rounded to the nearest integer, then "
                     "checked): " + ", ".join(repr(t) for t in plain_rules) + ".")
    if followed:
        parts.append(f"{followed} record(s) with a missing value in these columns (where a rule over it cannot be "
                     "evaluated, so its columns are rounded to the nearest integer) were given the rounded values "
                     "of the records they match (those that agreed with them on every value they observe before the "
                     "rounding, all rounded alike), so that records that match through missing values stay matched.")
    if split:
        parts.append(f"{split} record(s) with a missing value match records that were rounded differently from one "
                     "another and could not follow them all: the rounding may have split records that matched only "
                     "through missing values (a missing value counted as matching any value); the k-anonymity check "
                     "below is made on the rounded file.")
    if skipped:
        parts.append(f"The records have more than {_MAX_PATTERNS} patterns of missing values in these columns, so "
                     "the host did not make records that match through missing values round alike: the rounding "
                     "may have split them; the k-anonymity check below is made on the rounded file.")
    if broken is not None:
        parts.append("Each edit rule's check below says on how many records the rounding broke it; the steps' own "
                     "statements about edit rules describe their values before this rounding.")
    if notes:
        parts.append("Dtypes: " + "; ".join(notes) + ".")
    parts.append("Rounding changes no differential-privacy guarantee: it touches no column a differentially private "
                 "step wrote (whether a column holds integers is read from its values, so rounding there would tell "
                 "neighbouring data sets apart). It is a deterministic function of the released values (no "
                 "randomness), so identical released records stay identical, and the host's checks below "
                 "(k-anonymity, records released verbatim, edit rules) are made on the rounded file.")
    context._record_host(
        "process", " ".join(parts), component=HOST, mechanism="integer rounding",
        details={"columns": list(targets), "rounded": dict(rounded), "already_whole": [c for c, _ in whole],
                 "controlled_rounding": kept_by, "adjusted_columns": list(adjusted),
                 **({"handlers_own_rounding": {n: largest for n, largest in own_rounding}} if own_rounding else {}),
                 "rules_not_kept_exactly": [t for t, _ in unsolved] + list(plain_rules),
                 "records_rounded_with_their_matches": followed, "records_split_from_matches": split,
                 "dtypes": {c: str(current[c].dtype) for c in targets}})
    return broken


#: Above this many missingness patterns, records that match through missing
#: values are not made to round alike (the pass compares pairs of patterns).
_MAX_PATTERNS = 64


def _round_with_matches(codes: np.ndarray, Y: np.ndarray, fixed: np.ndarray) -> tuple[int, int, bool]:
    """Keep records that match through missing values matched through the
    rounding (in ``Y``, in place).

    Controlled rounding works per record: a rule is repaired or solved on a
    record where all its columns are observed, while a record missing one of
    them gets its values rounded to the nearest integer. Two records that
    agreed on every value both observe (``codes``: the values before
    rounding as exact codes, NaN where missing) could so be rounded apart,
    splitting a k-anonymity group formed with a missing value counted as
    matching any value. Each record with a missing value takes, on the
    columns it observes, the rounded values of the more complete records it
    matches, when those were all rounded alike (patterns handled from the
    most observed down, so a partly complete record is settled before the
    records that match it). Copying values of records that had the same
    values keeps every rule over the copied columns as it is on those
    records. Returns how many records took their matches' values, how many
    match records rounded differently from one another (left as they are),
    and whether the pass was skipped (more than :data:`_MAX_PATTERNS`
    missingness patterns)."""
    observed = ~np.isnan(codes)
    if observed.all() or not len(codes):
        return 0, 0, False
    patterns, of = np.unique(observed, axis=0, return_inverse=True)
    of = np.asarray(of).ravel()
    if len(patterns) > _MAX_PATTERNS:
        return 0, 0, True
    order = np.argsort(-patterns.sum(axis=1), kind="stable")
    followed = split = 0
    for a in order:
        pa = patterns[a]
        if pa.all() or not pa.any():
            continue
        cols = np.flatnonzero(pa)
        movable = cols[~fixed[cols]]
        if not movable.size:
            continue
        wider = [b for b in range(len(patterns)) if b != a and np.all(patterns[b][cols])]
        if not wider:
            continue
        mine = np.flatnonzero(of == a)
        theirs = np.flatnonzero(np.isin(of, wider))
        keys = np.vstack([codes[np.ix_(theirs, cols)], codes[np.ix_(mine, cols)]])
        _, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        key_theirs, key_mine = inverse[:len(theirs)], inverse[len(theirs):]
        m = int(inverse.max()) + 1
        values = Y[np.ix_(theirs, movable)]
        lo = np.full((m, movable.size), np.inf)
        hi = np.full((m, movable.size), -np.inf)
        np.minimum.at(lo, key_theirs, values)
        np.maximum.at(hi, key_theirs, values)
        has = np.bincount(key_theirs, minlength=m) > 0
        alike = has & np.all(lo == hi, axis=1)
        take = alike[key_mine]
        rows = mine[take]
        if rows.size:
            new = lo[key_mine[take]]
            followed += int(np.count_nonzero(np.any(Y[np.ix_(rows, movable)] != new, axis=1)))
            Y[np.ix_(rows, movable)] = new
        split += int(np.count_nonzero(has[key_mine] & ~alike[key_mine]))
    return followed, split, False


def _builtin(context: PrivacyContext, cls: type) -> bool:
    """Whether the constraint handler class ``cls`` is the built-in one (registered by the host's distribution):
    only its controlled rounding is described in the host's words."""
    resolver = context.resolver if context.resolver is not None else get_registry()
    provider = getattr(resolver, "provider", None)
    info = provider("constraint_handlers", cls) if callable(provider) else None
    return info is not None and info.distribution.lower().replace("_", "-") == BUILTIN_DISTRIBUTION


def _checked_rounding(name: str, part: Any, columns: Sequence[str], before: np.ndarray, after: np.ndarray,
                      integer: np.ndarray, fixed: np.ndarray) -> dict[str, float]:
    """What a handler's ``round_integers`` did, checked by the host (:func:`~privclust.components.rounding_moves`,
    which the conformance kit runs too): returns the largest change of each column it moved; raises
    :class:`PrivclustError` naming the handler when it did more than round (a handler that moved integers by 1000
    and flattened a non-integer column was described as the host's controlled rounding keeping an equality: a
    red-team audit)."""
    largest, problem = rounding_moves(part, columns, before, after, integer, fixed)
    if problem is not None:
        raise PrivclustError(f"constraint handler {name!r}: {problem}. Nothing was released.")
    return largest


def _rounding_groups(handlers: Sequence[Any], parts: Sequence[Any], columns: Sequence[str]
                     ) -> list[tuple[str, Any, np.ndarray, int, tuple[type, ...]]]:
    """The handlers' bound rules as the host rounds them: the rules of
    several ``[[constraints]]`` tables that can be joined (the
    ``joined_with`` capability, e.g. two ``linear`` tables) as one set,
    rounded at once; each with its handlers' names and the columns its rules
    involve, how many tables it joins and the handlers' classes."""
    out: list[tuple[str, Any, np.ndarray]] = []
    joined: list[int] = []  # how many tables each entry of out holds
    classes: list[tuple[type, ...]] = []
    for handler, part in zip(handlers, parts, strict=True):
        name = type(handler).name
        involved = np.array([any(c in v for v in handler.variables()) for c in columns])
        for g, (names, rounded_at_once, used) in enumerate(out):
            join = capability(rounded_at_once, "joined_with")
            merged = join(part) if join is not None and capability(part, "round_integers") is not None else None
            if merged is not None:
                out[g] = (names if name in names.split(" + ") else f"{names} + {name}", merged, used | involved)
                joined[g] += 1
                classes[g] = (*classes[g], type(handler))
                break
        else:
            out.append((name, part, involved))
            joined.append(1)
            classes.append((type(handler),))
    return [(name, part, involved, n, kinds)
            for (name, part, involved), n, kinds in zip(out, joined, classes, strict=True)]

