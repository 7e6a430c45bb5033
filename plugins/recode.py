"""Built-in key masker ``recode``: global recoding of the categorical (and
banded numeric) key variables a recipe declares in ``[roles] keys``
(sdcMicro ``globalRecode``, ``groupAndRename``, ``topBotCoding``; ARX:
generalisation hierarchies). It declares ``key_masker = True``.

Per key, one of:

* ``maps``: a category map ``{old = new}`` (values it does not name stay);
* ``hierarchies``: a table, as ARX reads it: one row per original value, one
  column per level, level 0 the value itself (a CSV file, ``,`` or ``;``
  separated, without a header, or an inline list of rows);
* ``breaks``: interval breaks for a numeric key (``[0, 20, 40]``: ``[0, 20)``
  and ``[20, 40]``), or a list of break lists, one per level (a hierarchy);
* ``top`` / ``bottom``: values at or above ``top`` (below ``bottom``) become
  ``">= top"`` (``"< bottom"``), or the threshold itself (``coding``).

A hierarchy key is recoded at the level ``levels`` gives it; with ``k``, the
levels it does not give are chosen by a search over the lattice of levels
(:mod:`privclust_plugins._lattice`): the least loss (Iyengar's LM, ARX's
"Loss") with at most ``max_suppressed`` of the records below k, which are
then suppressed (every key of the step set missing). Recoded columns are
released as text (their labels; level 0 keeps each value, as text), except a
numeric key top/bottom coded to its thresholds. Missing values stay missing;
weights are not used; no randomness.

>>> import pandas as pd, privclust
>>> from privclust_plugins.recode import Recode
>>> frame = pd.DataFrame({"water": ["pipe", "well", "river", "pipe"]})
>>> out = Recode(maps={"water": {"well": "other", "river": "other"}}).mask(frame, privclust.PrivacyContext(seed=0))
>>> list(out.data["water"])
['pipe', 'other', 'other', 'pipe']
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

import privclust
from privclust import DataError, DataLeak, Masked, ParameterError, PrivacyContext, param

from . import _lattice
from .keys import _text, too_few_for_k

__version__ = "0.1.0"

#: The loss measure the automatic levels minimise, as the ledger and the docs state it.
LOSS_MEASURE = ("Iyengar's loss metric LM (Iyengar 2002; ARX's \"Loss\"): a value generalised to a group of m of the "
                "D leaves of its hierarchy loses (m - 1) / (D - 1), an interval [a, b) of a numeric key loses "
                "(b - a) / (the range of its finest breaks), a suppressed record loses 1 on every key; averaged over "
                "the records and the hierarchy keys")


def _number(value: float) -> str:
    """A break as a label writes it: 20, not 20.0."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


# ---------------------------------------------------------------------------------------------------------------
# parameters: conversion (a CSV path is read when the recipe is compiled) and checks without data
# ---------------------------------------------------------------------------------------------------------------

def _read_table(path: str) -> tuple[tuple[str, ...], ...]:
    text = Path(path).expanduser().read_text(encoding="utf-8-sig")
    first = text.splitlines()[0] if text.strip() else ""
    delimiter = ";" if first.count(";") > first.count(",") else ","
    return tuple(tuple(cell.strip() for cell in row) for row in csv.reader(io.StringIO(text), delimiter=delimiter)
                 if any(cell.strip() for cell in row))


def _cell(value: Any) -> Any:
    return _text(value) if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool) \
        else value


def _hierarchies(value: Any) -> Any:
    """``{key: path or rows}`` -> ``{key: rows as tuples of text}`` (a file that cannot be read stays a path: the
    check names it)."""
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, table in value.items():
        if isinstance(table, str | Path):
            try:
                table = _read_table(str(table))
            except (OSError, UnicodeDecodeError, csv.Error):
                table = str(table)
        elif isinstance(table, Sequence) and all(isinstance(r, Sequence) and not isinstance(r, str) for r in table):
            table = tuple(tuple(_cell(c) for c in row) for row in table)
        out[str(key)] = table
    return out


def _hierarchy_problem(key: str, rows: Any) -> str | None:
    """A hierarchy table that is not a tree (or not a table)."""
    if isinstance(rows, str):
        try:
            _read_table(rows)
        except (OSError, UnicodeDecodeError, csv.Error) as err:
            return f"key {key!r}: cannot read the hierarchy file {rows!r} ({err}); give a CSV path or a list of rows"
        return f"key {key!r}: the hierarchy file {rows!r} is empty"
    if not isinstance(rows, tuple) or not rows:
        return f"key {key!r}: a hierarchy is a CSV path or a list of rows [value, level 1, level 2, ...]"
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width or width < 2:
            return (f"key {key!r}: row {i + 1} of the hierarchy has {len(row)} cells, row 1 has {width}; every row "
                    "names the value and one group per level (at least one level)")
        bad = [c for c in row if not isinstance(c, str) or not c]
        if bad:
            return f"key {key!r}: row {i + 1} of the hierarchy has an empty or non-text cell {bad[0]!r}"
    for level in range(1, width):
        parent: dict[str, tuple[str, int]] = {}
        for i, row in enumerate(rows):
            child = row[level - 1]
            seen = parent.setdefault(child, (row[level], i))
            if seen[0] != row[level]:
                what = (f"the value {child!r} maps to two parents at level {level}" if level == 1 else
                        f"level {level} splits the group {child!r} of level {level - 1}")
                return (f"key {key!r}: the hierarchy is not a tree: {what}: {seen[0]!r} (row {seen[1] + 1}) and "
                        f"{row[level]!r} (row {i + 1}); give each value (group) one parent per level")
    return None


def _breaks_problem(key: str, breaks: Any) -> str | None:
    """Breaks: increasing numbers; a list of break lists: each level's breaks among the finer level's, same range."""
    nested = isinstance(breaks, Sequence) and not isinstance(breaks, str) and any(
        isinstance(b, Sequence) or b == "*" for b in breaks)
    levels = list(breaks) if nested else [breaks]
    previous = None
    for number, level in enumerate(levels, start=1):
        where = f"key {key!r}: breaks" + (f" of level {number}" if nested else "")
        if level == "*" and nested and number == len(levels) and number > 1:
            continue
        if isinstance(level, str) or not isinstance(level, Sequence) or len(level) < 2 or any(
                isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) for b in level):
            return (f"{where} must be a list of at least two finite numbers (\"*\" only as the last level of a "
                    f"list of break lists); got {level!r}")
        for a, b in zip(level, level[1:], strict=False):
            if not b > a:
                return f"{where} are not increasing: {b!r} follows {a!r}; give strictly increasing breaks"
        if previous is not None:
            if level[0] != previous[0] or level[-1] != previous[-1]:
                return (f"{where} span [{_number(level[0])}, {_number(level[-1])}], level {number - 1} spans "
                        f"[{_number(previous[0])}, {_number(previous[-1])}]; every level covers the same range")
            extra = sorted(set(level) - set(previous))
            if extra:
                return (f"{where} are not a tree: {_number(extra[0])} splits an interval of level {number - 1}; "
                        "each level's breaks must be among the breaks of the level before")
        previous = level
    return None


def _table_of(value: Any, what: str) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _convert_entry(v) for key, v in value.items()}
    return value


def _convert_entry(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_cell(a): _cell(b) for a, b in value.items()}
    if isinstance(value, list):
        return tuple(_convert_entry(v) for v in value)
    return value


def _per_key_problem(check: Any, value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"must be a table {{key = {what}, ...}}"
    for key, entry in value.items():
        found = check(key, entry)
        if found:
            return found
    return None


def _map_problem(key: str, entry: Any) -> str | None:
    if not isinstance(entry, Mapping) or not entry:
        return f"key {key!r}: a category map is a table {{old = \"new\", ...}}; got {entry!r}"
    bad = [v for v in entry.values() if not isinstance(v, str) or not v]
    return f"key {key!r}: the map's new categories must be non-empty text; got {bad[0]!r}" if bad else None


def _number_problem(key: str, entry: Any) -> str | None:
    if isinstance(entry, bool) or not isinstance(entry, int | float) or not math.isfinite(entry):
        return f"key {key!r}: a threshold must be a finite number; got {entry!r}"
    return None


def _level_problem(key: str, entry: Any) -> str | None:
    if isinstance(entry, bool) or not isinstance(entry, int) or entry < 0:
        return f"key {key!r}: a level is a whole number >= 0 (0: the values themselves); got {entry!r}"
    return None


def _depth(hierarchy: Any) -> int:
    """The highest level of a hierarchy (a table's columns - 1, or a list of break lists' length)."""
    return len(hierarchy[0]) - 1 if isinstance(hierarchy[0], tuple) and isinstance(hierarchy[0][0], str) \
        else len(hierarchy)


@attrs.frozen(kw_only=True)
class Recode:
    """Global recoding of key variables: category maps, hierarchies (levels
    given or chosen for k with suppression), interval breaks, top/bottom coding."""

    name: ClassVar[str] = "recode"
    key_masker: ClassVar[bool] = True
    uses_constraints: ClassVar[bool] = False
    leak_names: ClassVar[tuple[str, ...]] = ("recode-levels",)

    maps: Any = param(dict, default=None, converter=lambda v: _table_of(v, "map"),
                      check=lambda v: _per_key_problem(_map_problem, v, "{old = \"new\"}"),
                      doc="category maps, {key = {old = \"new\", ...}} (values not named stay)")
    hierarchies: Any = param(dict, default=None, converter=_hierarchies, role="path",
                             check=lambda v: _per_key_problem(_hierarchy_problem, v, "CSV path or rows"),
                             doc="generalisation hierarchies, {key = CSV path or [[value, level 1, ...], ...]} "
                                 "(ARX's table: one row per value, one column per level; a path is relative to "
                                 "the recipe file's folder)")
    breaks: Any = param(dict, default=None, converter=lambda v: _table_of(v, "breaks"),
                        check=lambda v: _per_key_problem(_breaks_problem, v, "[breaks]"),
                        doc="interval breaks of numeric keys, {key = [b0, b1, ...]} (one level) or a list of break "
                            "lists, one per level (a hierarchy)")
    top: Any = param(dict, default=None, converter=lambda v: _table_of(v, "top"),
                     check=lambda v: _per_key_problem(_number_problem, v, "threshold"),
                     doc="top coding, {key = t}: values >= t become \">= t\" (or t, see coding)")
    bottom: Any = param(dict, default=None, converter=lambda v: _table_of(v, "bottom"),
                        check=lambda v: _per_key_problem(_number_problem, v, "threshold"),
                        doc="bottom coding, {key = b}: values < b become \"< b\" (or b, see coding)")
    coding: str = param(str, default="label", choices=("label", "threshold"),
                        doc="top/bottom coded values become a label (\">= t\", \"< b\") or the threshold itself")
    levels: Any = param(dict, default=None, converter=lambda v: _table_of(v, "levels"),
                        check=lambda v: _per_key_problem(_level_problem, v, "level"),
                        doc="the level of each hierarchy key, {key = level}; with k, the keys it leaves out get "
                            "the level of least loss")
    k: int | None = param(int, default=None, optional=True, ge=2,
                          doc="the minimum group size: choose the levels not given and suppress the records below k "
                              "(every record then matches at least k records of its stratum); default: no k")
    max_suppressed: float = param(float, role="plain", default=0.05, ge=0, lt=1,
                                  doc="with k: the largest share of the records that may be suppressed (ARX's "
                                      "suppression limit)")

    def __attrs_post_init__(self) -> None:
        who = self.name
        methods = {"maps": self.maps or {}, "hierarchies": self.hierarchies or {}, "breaks": self.breaks or {}}
        coded = set(self.top or {}) | set(self.bottom or {})
        if not any(methods.values()) and not coded:
            raise ParameterError(f"{who}: nothing to recode; give maps, hierarchies, breaks, top or bottom")
        seen: dict[str, str] = {}
        for what, table in [*methods.items(), ("top/bottom", dict.fromkeys(coded))]:
            for key in table:
                if key in seen:
                    raise ParameterError(f"{who}: key {key!r} is recoded by both {seen[key]} and {what}; give one "
                                         "method per key (a hierarchy or breaks can band and top code at once)")
                seen[key] = what
        for key in set(self.top or {}) & set(self.bottom or {}):
            if self.top[key] <= self.bottom[key]:
                raise ParameterError(f"{who}: key {key!r}: the top code {self.top[key]!r} is not above the bottom "
                                     f"code {self.bottom[key]!r}; give top > bottom")
        hierarchy = self._hierarchy_keys()
        for key, level in (self.levels or {}).items():
            if key not in hierarchy:
                raise ParameterError(f"{who}: levels names {key!r}, which has no hierarchy (a table, or a list of "
                                     "break lists); give its hierarchy or remove it from levels")
            if level > _depth(hierarchy[key]):
                raise ParameterError(f"{who}: levels: key {key!r} has levels 0 to {_depth(hierarchy[key])}; got "
                                     f"{level}")
        if self.k is None:
            missing = [key for key in hierarchy if key not in (self.levels or {})]
            if missing:
                raise ParameterError(f"{who}: the hierarchy of {', '.join(map(repr, missing))} has no level: give "
                                     "levels = {key = level}, or k to choose the levels for k-anonymity")

    def _hierarchy_keys(self) -> dict[str, Any]:
        out = dict(self.hierarchies or {})
        out.update({key: b for key, b in (self.breaks or {}).items()
                    if any(isinstance(x, Sequence) or x == "*" for x in b)})
        return out

    def missing_values(self) -> str:
        return "missing key values stay missing (they match any value, sdcMicro's convention) and are released missing"

    def min_records(self, n_columns: int) -> int:
        return self.k or 1

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        return too_few_for_k(self.name, self.k, n_records)

    def data_leaks(self) -> list[DataLeak]:
        if self.k is None or all(key in (self.levels or {}) for key in self._hierarchy_keys()):
            return []
        return [DataLeak("recode-levels", "k", "the levels of the hierarchy keys are chosen from the data (the least "
                         "loss that reaches k), per stratum, and released in the ledger",
                         "give every hierarchy key's level (levels = {key = level})")]

    def _absent(self, columns: Sequence[str]) -> list[str]:
        """The refusal of keys the parameters recode that are not among the step's ``columns``."""
        named = set(self.maps or {}) | set(self.hierarchies or {}) | set(self.breaks or {}) | set(self.top or {}) \
            | set(self.bottom or {}) | set(self.levels or {})
        absent = sorted(named - set(columns))
        if not absent:
            return []
        return [f"{self.name}: {', '.join(map(repr, absent))} is recoded but not among the step's columns "
                f"({', '.join(columns)}); add it to the step's columns or remove its recoding"]

    def data_problems(self, data: pd.DataFrame) -> list[str]:
        """What :meth:`mask` refuses in the values of its key columns, per key (a category map or hierarchy on
        fractions, a value a hierarchy has no row for or outside the breaks, top/bottom coding of text), and keys
        recoded but not among the columns."""
        columns = [str(c) for c in data.columns]
        problems = self._absent(columns)
        hierarchy = self._hierarchy_keys()
        for c, name in zip(columns, data.columns, strict=True):
            try:
                if c in hierarchy:
                    _levels_of(c, data[name], hierarchy[c])
                else:
                    self._fixed(c, data[name], ())  # the integer columns only add refusals of a threshold
            except (DataError, ParameterError) as err:
                problems.append(str(err))
        return problems

    # -- masking ----------------------------------------------------------------------------------------------

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        who = self.name
        if not isinstance(data, pd.DataFrame) or data.shape[0] == 0 or data.shape[1] == 0:
            raise DataError(f"{who}: the data must be a pandas DataFrame with records and key columns")
        columns = [str(c) for c in data.columns]
        for problem in self._absent(columns):
            raise ParameterError(problem)
        start = time.perf_counter()
        n = len(data)
        hierarchy = self._hierarchy_keys()
        dims, dim_keys, dim_levels = [], [], {}
        fixed_codes, fixed_sizes, released = [], [], {}
        for c, series in zip(columns, (data[c] for c in data.columns), strict=True):
            if c in hierarchy:
                table = _levels_of(c, series, hierarchy[c])
                allowed = [self.levels[c]] if c in (self.levels or {}) else list(range(len(table)))
                dims.append(_lattice.Dimension(allowed, [table[L][1] for L in allowed],
                                               [table[L][2] for L in allowed], [table[L][3] for L in allowed]))
                dim_keys.append(c)
                dim_levels[c] = table
                continue
            labels = self._fixed(c, series, context.integer_columns or ())
            codes, uniques = pd.factorize(series if labels is None else pd.Series(labels, dtype=object), sort=False)
            fixed_codes.append(codes.astype(np.int64))
            fixed_sizes.append(len(uniques))
            released[c] = labels
        fixed = np.column_stack(fixed_codes) if fixed_codes else np.zeros((n, 0), dtype=np.int64)
        lattice = _lattice.Lattice(dims, fixed, fixed_sizes, self.k or 1)  # without k: no record is below
        search = None
        if self.k is not None:
            for problem in too_few_for_k(who, self.k, n):
                raise DataError(problem)
            if lattice.size() > _lattice.MAX_NODES:
                raise ParameterError(f"{who}: the lattice of levels has {lattice.size():,} nodes, more than "
                                     f"{_lattice.MAX_NODES:,}; give some keys' levels (levels = {{key = level}})")
            budget = int(math.floor(self.max_suppressed * n + 1e-9))
            search = lattice.search(budget)
            if search.best is None:
                top = lattice.evaluate(tuple(s - 1 for s in lattice.shape))
                raise DataError(f"{who}: k = {self.k} cannot be reached with at most {budget} suppressed records "
                                f"(max_suppressed = {self.max_suppressed} of {n}): even at the highest levels "
                                "allowed (those levels gives, else the top of each hierarchy) "
                                f"{int(top.below.sum())} records match fewer than k on {', '.join(columns)}; raise "
                                "max_suppressed, add levels to the hierarchies, or recode the other keys")
            outcome = search.best
        else:
            outcome = lattice.evaluate(tuple(0 for _ in dims))
        chosen = {c: dims[i].levels[outcome.node[i]] for i, c in enumerate(dim_keys)}
        for c in dim_keys:
            released[c] = dim_levels[c][chosen[c]][0]
        suppressed = outcome.below if self.k is not None else np.zeros(n, dtype=bool)
        out = _released(data, columns, released, suppressed)
        elapsed = time.perf_counter() - start
        self._record(context, columns, chosen, outcome, search, suppressed, n)
        return Masked(data=out, diagnostics={
            "levels": chosen, "loss": outcome.loss, "records_suppressed": int(suppressed.sum()), "seconds": elapsed,
            **({"lattice_nodes": search.nodes, "evaluated": search.evaluated,
                "pruned_by_monotonicity": search.pruned_by_monotonicity, "skipped_by_bound": search.skipped_by_bound}
               if search is not None else {})})

    def _fixed(self, c: str, series: pd.Series, integers: Sequence[str]) -> np.ndarray | None:
        """The released values of a key that is not in the lattice (object array, ``None`` where missing; a numeric
        key top/bottom coded to its thresholds stays numeric); ``None``: a key the step leaves as it is."""
        who = self.name
        missing = series.isna().to_numpy()
        if c in (self.maps or {}):
            _categorical(who, c, series, "a category map recodes categories")
            mapping = self.maps[c]
            return np.array([None if m else mapping.get(_text(v), _text(v))
                             for v, m in zip(series.to_numpy(dtype=object), missing, strict=True)], dtype=object)
        if c in (self.breaks or {}):
            return _levels_of(c, series, [self.breaks[c]])[1][0]
        if c in (self.top or {}) or c in (self.bottom or {}):
            values = _numbers(who, c, series, "top/bottom coding")
            top, bottom = (self.top or {}).get(c), (self.bottom or {}).get(c)
            high = ~missing & (values >= top) if top is not None else np.zeros(len(values), dtype=bool)
            low = ~missing & (values < bottom) if bottom is not None else np.zeros(len(values), dtype=bool)
            if self.coding == "threshold":
                whole = c in integers or pd.api.types.is_integer_dtype(series)
                odd = [t for t in (top, bottom) if t is not None and whole and not float(t).is_integer()]
                if odd:
                    raise ParameterError(f"{who}: key {c!r} holds whole numbers and coding = \"threshold\" would "
                                         f"release the threshold {odd[0]!r}, which the host rounds; give a whole "
                                         "number, or coding = \"label\"")
                out = values.copy()
                out[high], out[low] = (top if top is not None else 0.0), (bottom if bottom is not None else 0.0)
                return out
            out = np.array([None if m else _text(v) for v, m in zip(values, missing, strict=True)], dtype=object)
            out[high] = f">= {_number(top)}" if top is not None else None
            out[low] = f"< {_number(bottom)}" if bottom is not None else None
            return out
        if privclust.is_real_column(series):
            _categorical(who, c, series, "a key the step leaves as it is is counted as categories")
        return None

    def _record(self, context: PrivacyContext, columns: list[str], chosen: dict[str, int],
                outcome: _lattice.Outcome, search: _lattice.Result | None, suppressed: np.ndarray, n: int) -> None:
        methods = {c: m for m, table in (("map", self.maps), ("hierarchy", self.hierarchies),
                                         ("breaks", self.breaks), ("top/bottom coding", self.top),
                                         ("top/bottom coding", self.bottom)) for c in (table or {})}
        searched = search is not None and any(c not in (self.levels or {}) for c in chosen)
        public = {"maps": self.maps, "hierarchies": {c: [list(r) if isinstance(r, tuple) else r for r in h]
                                                     for c, h in (self.hierarchies or {}).items()} or None,
                  "breaks": self.breaks, "top": self.top, "bottom": self.bottom, "coding": self.coding}
        public = {key: v for key, v in public.items() if v}
        level_text = ", ".join(f"{c} level {L}" for c, L in chosen.items()) or "no hierarchy key"
        loss = ("" if outcome.loss is None
                else f" The loss (Iyengar's LM over the hierarchy keys) is {outcome.loss:.4f}.")
        if searched:
            context.record_leak("recode-levels", f"the levels of the hierarchy keys ({level_text}) were chosen from "
                                "the data as the least loss that reaches k, and are released in the ledger; other "
                                "strata may have other levels.",
                                alternative="give every hierarchy key's level (levels = {key = level})",
                                details={"levels": chosen})
        recoded = ", ".join(f"{c} ({methods[c]})" for c in columns if c in methods)
        base = (f"recode recoded {recoded} globally (the same recoding for every record given to this step; the host "
                "calls the step once per stratum, so with chosen levels strata may differ): "
                f"{level_text}.{loss} Missing values stay missing; weights are not used.")
        details = {"columns": columns, "methods": methods, "levels": chosen, "levels_chosen_from_data": searched,
                   "loss": outcome.loss, "loss_measure": LOSS_MEASURE, **public}
        if self.k is None:
            context.record(base + " No k-anonymity is claimed: follow with local-suppression (or give k) for it.",
                           claim=privclust.Guarantee("global recoding"), details=details)
            return
        count = int(suppressed.sum())
        context.record(
            base + f" Then {count} of {n} records that matched fewer than {self.k} records were suppressed (every "
            f"key of the step set missing; at most max_suppressed = {self.max_suppressed} of the records), so that "
            f"every record matches at least {self.k} records on {', '.join(columns)}, a missing value matching any "
            f"value (sdcMicro's convention; k-anonymity with k = {self.k} of these columns under it). The other "
            "columns are not covered.",
            claim=privclust.KAnonymity(self.k, list(columns)),
            details={**details, "k": self.k, "records_suppressed": count, "max_suppressed": self.max_suppressed,
                     **({"lattice_nodes": search.nodes, "evaluated": search.evaluated} if search else {})})


# ---------------------------------------------------------------------------------------------------------------
# levels of a key on the data
# ---------------------------------------------------------------------------------------------------------------

def _row(series: pd.Series, mask: np.ndarray) -> str:
    at = np.flatnonzero(mask)
    return f"row {series.index[at[0]]!r}" + (f", and {len(at) - 1} other record(s)" if len(at) > 1 else "")


def _categorical(who: str, c: str, series: pd.Series, what: str) -> None:
    if privclust.is_real_column(series):
        values = series.to_numpy(dtype=float, na_value=np.nan)
        observed = values[~np.isnan(values)]
        if not np.all(np.isfinite(observed)) or np.any(observed != np.round(observed)):
            raise DataError(f"{who}: column {c!r} is numeric with values that are not whole numbers (a continuous "
                            f"variable), and {what}: give it interval breaks (breaks = {{{c} = [...]}}) or leave it "
                            "out of the step's columns")


def _numbers(who: str, c: str, series: pd.Series, what: str) -> np.ndarray:
    if not privclust.is_real_column(series):
        raise DataError(f"{who}: column {c!r} has dtype {series.dtype}; {what} treats numeric keys: give a category "
                        "map or a hierarchy table instead")
    return series.to_numpy(dtype=float, na_value=np.nan)


def _levels_of(c: str, series: pd.Series, hierarchy: Any) -> list[tuple[np.ndarray, np.ndarray, int, np.ndarray]]:
    """Per level 0..H of a key's hierarchy on the data: the released labels (object, ``None`` where missing), the
    group codes (-1: missing), the number of groups and each record's loss. ``hierarchy``: a table (rows of
    text) or a list of break lists (``"*"``: everything)."""
    missing = series.isna().to_numpy()
    table = isinstance(hierarchy[0], tuple) and isinstance(hierarchy[0][0], str)
    if table:
        _categorical("recode", c, series, "a hierarchy table lists categories")
        texts = np.array([None if m else _text(v) for v, m in zip(series.to_numpy(dtype=object), missing,
                                                                    strict=True)], dtype=object)
        index = {row[0]: i for i, row in enumerate(hierarchy)}
        rows = np.array([index.get(t, -1) if t is not None else -2 for t in texts], dtype=np.int64)
        if (rows == -1).any():
            bad = rows == -1
            value = texts[np.flatnonzero(bad)[0]]
            raise DataError(f"recode: key {c!r} holds the value {value!r} ({_row(series, bad)}) that its hierarchy "
                            f"has no row for; add a row for {value!r} to the hierarchy")
        leaves = len(index)
        out = []
        for level in range(len(hierarchy[0])):
            groups = np.array([row[level] for row in hierarchy], dtype=object)
            codes, uniques = pd.factorize(groups, sort=False)
            size = np.bincount(codes[list(index.values())], minlength=len(uniques))
            loss = (size - 1) / (leaves - 1) if leaves > 1 else np.zeros(len(uniques))
            labels = texts.copy() if level == 0 else np.where(rows >= 0, groups[np.maximum(rows, 0)], None)  # type: ignore[call-overload]
            code = np.where(rows >= 0, codes[np.maximum(rows, 0)], -1).astype(np.int64)
            out.append((labels.astype(object), code, len(uniques), np.where(rows >= 0, loss[code], 0.0)))
        return out
    values = _numbers("recode", c, series, "interval breaks")
    observed = ~missing
    finest = next(b for b in hierarchy if b != "*")
    low, high = float(finest[0]), float(finest[-1])
    outside = observed & ((values < low) | (values > high))
    if outside.any():
        value = values[np.flatnonzero(outside)[0]]
        raise DataError(f"recode: key {c!r} holds the value {_number(value)} ({_row(series, outside)}) outside its "
                        f"breaks [{_number(low)}, {_number(high)}]; extend the breaks to cover the data (or top/bottom "
                        "code the key first)")
    codes0, uniques0 = pd.factorize(values, sort=False, use_na_sentinel=True)
    texts = np.array([None if m else _text(v) for v, m in zip(values, missing, strict=True)], dtype=object)
    out = [(texts, np.where(observed, codes0, -1).astype(np.int64), len(uniques0), np.zeros(len(values)))]
    for level in hierarchy:
        if level == "*":
            out.append((np.where(observed, "*", None).astype(object), np.where(observed, 0, -1).astype(np.int64), 1,  # type: ignore[call-overload]
                        np.where(observed, 1.0, 0.0)))
            continue
        b = np.asarray(level, dtype=float)
        at = np.clip(np.searchsorted(b, np.where(observed, values, low), side="right") - 1, 0, len(b) - 2)
        names = np.array([f"[{_number(b[i])}, {_number(b[i + 1])}{']' if i == len(b) - 2 else ')'}"
                          for i in range(len(b) - 1)], dtype=object)
        width = (b[1:] - b[:-1]) / (high - low)
        out.append((np.where(observed, names[at], None).astype(object), np.where(observed, at, -1).astype(np.int64),  # type: ignore[call-overload]
                    len(b) - 1, np.where(observed, width[at], 0.0)))
    return out


def _released(data: pd.DataFrame, columns: list[str], released: Mapping[str, np.ndarray | None],
              suppressed: np.ndarray) -> pd.DataFrame:
    """The step's columns as released: recoded labels (text), untouched columns in their dtype, the suppressed
    records' keys missing."""
    out = data.copy()
    for name, c in zip(data.columns, columns, strict=True):
        values = released[c]
        original = data[name]
        if values is not None and values.dtype.kind == "f":  # top/bottom coded to thresholds
            series = pd.Series(np.where(suppressed, np.nan, values), index=data.index, name=name)
        elif values is not None:
            series = pd.Series(np.where(suppressed, None, values), index=data.index, name=name, dtype=object)  # type: ignore[call-overload]
        else:
            series = original.copy()
            if suppressed.any():
                if privclust.is_real_column(series):
                    series = series.astype(float)
                    series.iloc[np.flatnonzero(suppressed)] = np.nan
                else:
                    series = series.astype(object)
                    series.iloc[np.flatnonzero(suppressed)] = None
        out[name] = series
    return out


@privclust.hookimpl
def privclust_register_maskers(register):
    register(Recode)
