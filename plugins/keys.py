"""Built-in key maskers: ``local-suppression`` and ``pram``, for the
categorical key variables (quasi-identifiers) a recipe declares in
``[roles] keys``. Both declare ``key_masker = True``: their steps may name
key columns, of any dtype (text, categories, integer codes).

* ``local-suppression`` (sdcMicro ``localSuppression``; ARX: cell
  suppression) sets key values to missing until every record *matches* at
  least ``k`` records of its stratum, a missing value matching any value
  (sdcMicro's convention). A greedy heuristic (``method = "heuristic"``) or
  the fewest suppressions by an integer program (``method = "exact"``,
  :func:`scipy.optimize.milp`, small strata only).
* ``pram`` (sdcMicro ``pram``; post-randomisation, Gouweleeuw et al. 1998)
  replaces each key value by a category drawn from a transition matrix:
  given in the recipe (public), or an invariant one built from the
  category frequencies (a function of the data, recorded as the leak
  ``pram-frequencies``).

>>> import pandas as pd, privclust
>>> from privclust_plugins.keys import LocalSuppression
>>> frame = pd.DataFrame({"sex": ["f", "f", "f", "m", "m", "m", "m"],
...                       "region": ["n", "n", "n", "s", "s", "s", "n"]})
>>> out = LocalSuppression(k=3).mask(frame, privclust.PrivacyContext(seed=0))
>>> int(out.data.isna().sum().sum())
1
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
from pandas import DataFrame

import privclust
from privclust import DataError, DataLeak, Masked, ParameterError, PrivacyContext, param

from . import _suppress

__version__ = "0.1.0"

#: What a key masker does with missing key values it is given.
MISSING_POLICY = ("a missing key value matches any value (sdcMicro's convention); missing values released missing")


def _key_codes(data: pd.DataFrame, who: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each key column as integer codes (-1: missing) and its categories. A
    numeric column with values that are not whole numbers is continuous: it
    is refused (a key masker treats categories)."""
    if not isinstance(data, pd.DataFrame) or data.shape[0] == 0 or data.shape[1] == 0:
        raise DataError(f"{who}: the data must be a pandas DataFrame with records and key columns")
    codes = np.empty(data.shape, dtype=np.int64)
    categories = []
    for j, c in enumerate(data.columns):
        code, uniques = _categories(data[c], who)
        codes[:, j] = code
        categories.append(np.asarray(uniques, dtype=object))
    return codes, categories


def _categories(series: pd.Series, who: str) -> tuple[np.ndarray, Any]:
    """A key column's integer codes (-1: missing) and its sorted distinct
    values; a column :func:`key_problem` refuses is refused."""
    problem = key_problem(series, who)
    if problem is not None:
        raise DataError(problem)
    return pd.factorize(series, sort=True)


def key_problem(series: pd.Series, who: str) -> str | None:
    """Why a key masker cannot treat ``series`` as a key (``None`` when it
    can): complex numbers, or a numeric column with values that are not
    whole numbers (a continuous variable; checked on the distinct values).
    A true/false column is a key of two categories, ``True`` and ``False``
    (a CSV file's ``true``/``false`` is read so)."""
    if pd.api.types.is_complex_dtype(series):
        return (f"{who}: column {series.name!r} has dtype {series.dtype}; give a key as text, categories or integer "
                "codes")
    if privclust.is_real_column(series):
        observed = pd.unique(series.dropna().to_numpy(dtype=float))
        fractions = observed[~np.isfinite(observed) | (observed != np.round(observed))]
        if len(fractions):
            return (f"{who}: column {series.name!r} is numeric with values that are not whole numbers (such as "
                    f"{float(fractions[0])!r}; a continuous variable); a key masker treats categories: recode it into "
                    "categories (e.g. age bands as integer codes or labels, with recode's breaks) or leave it out of "
                    "the step's columns")
    return None


def key_problems(data: pd.DataFrame, who: str) -> list[str]:
    """:func:`key_problem` of each column of ``data``."""
    found = (key_problem(data[c], who) for c in data.columns)
    return [p for p in found if p is not None]


def _with_missing(data: pd.DataFrame, suppressed: np.ndarray) -> pd.DataFrame:
    """A copy of ``data`` with the cells marked in ``suppressed`` missing (an
    integer column becomes float with NaN; a true/false column becomes
    pandas' nullable ``boolean``; a text column holds NaN; a categorical one
    stays categorical, listing only the categories it still holds: see
    :func:`_pruned`)."""
    out = data.copy()
    for j, c in enumerate(data.columns):
        rows = suppressed[:, j]
        if not rows.any():
            out[c] = _pruned(out[c])
            continue
        series = out[c]
        if privclust.is_real_column(series) and series.dtype.kind in "iu":
            series = series.astype(float)
        elif pd.api.types.is_bool_dtype(series):  # True, False and <NA>: still a true/false column
            series = series.astype("boolean")
        elif not privclust.is_real_column(series) and not isinstance(series.dtype, pd.CategoricalDtype) \
                and series.dtype.kind != "O" and not pd.api.types.is_string_dtype(series):
            series = series.astype(object)
        series = series.copy()
        series.iloc[np.flatnonzero(rows)] = np.nan if privclust.is_real_column(series) else \
            pd.NA if series.dtype == "boolean" else None
        out[c] = _pruned(series)
    return out


def _pruned(series: pd.Series) -> pd.Series:
    """A categorical column listing only the categories it holds: a category
    every record of which was suppressed or redrawn (or one the column listed
    without holding it: another stratum's) would still be published by the
    column's dtype, in a Parquet file's dictionary for one."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.remove_unused_categories()
    return series


def too_few_for_k(who: str, k: int | None, n: int) -> list[str]:
    """A key masker's refusal of fewer than ``k`` records (none without ``k``)."""
    if k is None or n >= k:
        return []
    return [f"{who}: k = {k} cannot be reached: the data (or this stratum) have {n} records, fewer than k; lower k "
            f"(at most {n}), or merge small strata ([roles] small_strata = \"merge\")"]


@attrs.frozen(kw_only=True)
class LocalSuppression:
    """Set key values to missing so that every record matches at least
    ``k`` records of its stratum (a missing value matching any value)."""

    name: ClassVar[str] = "local-suppression"
    key_masker: ClassVar[bool] = True
    uses_constraints: ClassVar[bool] = False

    k: int = param(int, default=3, ge=2, doc="the minimum group size: every record matches at least k records "
                                                   "(itself included), k >= 2")
    importance: tuple[str, ...] = param(tuple, default=(), doc="the key columns, the most important (suppressed "
                                                               "last) first; default: the keys with the fewest "
                                                               "categories are the most important (sdcMicro's rule)")
    method: str = param(str, default="heuristic", choices=("heuristic", "exact"),
                        doc='"heuristic" (greedy, any size) or "exact" (fewest suppressions by an integer program, '
                            f'strata of at most {_suppress.MAX_EXACT_RECORDS} records)')
    time_limit: float = param(float, role="plain", default=60.0, gt=0, finite=True,
                              doc='seconds the exact solver may take per stratum (method = "exact")')

    def missing_values(self) -> str:
        return MISSING_POLICY

    def min_records(self, n_columns: int) -> int:
        """A stratum needs at least ``k`` records."""
        return self.k

    def size_problems(self, n_records: int, n_columns: int) -> list[str]:
        return too_few_for_k(self.name, self.k, n_records)

    def data_problems(self, data: pd.DataFrame) -> list[str]:
        """The key columns it cannot treat (:func:`key_problem`), as :meth:`mask` refuses them."""
        return key_problems(data, self.name)

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        who = self.name
        columns = [str(c) for c in data.columns]
        unknown = [c for c in self.importance if c not in columns]
        if unknown or len(set(self.importance)) != len(self.importance):
            raise ParameterError(f"{who}: 'importance' must name each of the step's key columns ({', '.join(columns)}) "
                                 f"at most once; {', '.join(map(repr, unknown)) or 'a column is repeated'} "
                                 "is not one of them: fix the list or the step's columns")
        codes, categories = _key_codes(data, who)
        n = len(codes)
        for problem in too_few_for_k(who, self.k, n):
            raise DataError(problem)
        if self.method == "exact" and n > _suppress.MAX_EXACT_RECORDS:
            raise ParameterError(f"{who}: method = \"exact\" solves an integer program with one variable per pair "
                                 f"of records; the data (or this stratum) have {n} records, more than "
                                 f"{_suppress.MAX_EXACT_RECORDS}: use method = \"heuristic\"")
        # the order in which keys are suppressed: the least important first
        sizes = [len(c) for c in categories]
        ranked = list(self.importance) + sorted((c for c in columns if c not in self.importance),
                                                key=lambda c: (sizes[columns.index(c)], columns.index(c)))
        order = [columns.index(c) for c in reversed(ranked)]
        radix = np.asarray([s + 1 for s in sizes], dtype=np.int64)
        before = _suppress.record_match_counts(codes, radix)
        start = time.perf_counter()
        optimal = None
        if self.method == "exact":
            d = len(columns)
            rank = np.empty(d)
            rank[order] = np.arange(d)[::-1]  # more important keys cost a little more: a tie-break, never a count
            weights = 1.0 + rank / (d * (n * d + 1))
            try:
                out, optimal = _suppress.exact(codes, self.k, weights, radix, time_limit=self.time_limit)
            except RuntimeError as err:
                raise DataError(f"{who}: the exact solver failed: {err}; use method = \"heuristic\" or a larger "
                                "time_limit") from err
            out = _suppress.greedy(out, self.k, order, radix)  # a no-op unless the solver stopped early
        else:
            out = _suppress.greedy(codes, self.k, order, radix)
        elapsed = time.perf_counter() - start
        suppressed = (out < 0) & (codes >= 0)
        after = _suppress.record_match_counts(out, radix)
        per_column = {c: int(suppressed[:, j].sum()) for j, c in enumerate(columns)}
        total = int(suppressed.sum())
        blank = int((out < 0).all(axis=1).sum())
        context.record(
            f"local-suppression ({self.method}) set {total} key value(s) to missing "
            f"({', '.join(f'{c}: {v}' for c, v in per_column.items())}) in {int(suppressed.any(axis=1).sum())} of "
            f"{n} records, so that every record matches at least {self.k} records on {', '.join(columns)}, a "
            "missing value matching any value (sdcMicro's convention; k-anonymity with k = "
            f"{self.k} of these columns under it). Before, {int((before < self.k).sum())} records matched fewer. "
            "Under this convention a missing value hides a record among every value of that key, and "
            f"{blank} record(s) have every key missing and match every record; which values are missing is "
            "released, and the other columns are not covered.",
            claim=privclust.KAnonymity(self.k, columns),
            details={"k": self.k, "columns": columns, "method": self.method, "suppressions": total,
                     "suppressions_by_column": per_column, "records_below_k_before": int((before < self.k).sum()),
                     "records_with_every_key_missing": blank,
                     "records_with_one_key_left": int(((out >= 0).sum(axis=1) == 1).sum()) if len(columns) > 1 else 0,
                     "min_matching_records": int(after.min()),
                     "suppression_order": [columns[j] for j in order],
                     **({"optimal": optimal} if optimal is not None else {})},
        )
        return Masked(data=_with_missing(data, suppressed),
                      diagnostics={"suppressions": total, "suppressions_by_column": per_column, "method": self.method,
                                   "seconds": elapsed, "records_below_k_before": int((before < self.k).sum()),
                                   **({"optimal": optimal} if optimal is not None else {})})


def _matrix_table(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(a): (dict((str(b), p) for b, p in row.items()) if isinstance(row, Mapping) else row)
                for a, row in value.items()}
    return value


def _matrix_problem(value: Any) -> str | None:
    """A transition matrix: a table category -> {category: probability}, square, rows summing to 1."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        return "must be a table {category = {category = probability, ...}, ...}"
    rows = set(value)
    for a, row in value.items():
        if not isinstance(row, Mapping):
            return f"row {a!r} must be a table {{category = probability}}; got {row!r}"
        extra = set(row) - rows
        if extra:
            return (f"is not square: row {a!r} names {', '.join(map(repr, sorted(extra)))}, which has no row of its "
                    "own; give a row for every category")
        for b, p in row.items():
            if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p) or not 0 <= p <= 1:
                return f"row {a!r}: the probability of {b!r} must be a number in [0, 1]; got {p!r}"
        total = math.fsum(float(p) for p in row.values())
        if abs(total - 1.0) > 1e-9:
            return f"row {a!r} sums to {total:.12g}, not 1; each row is a probability distribution"
    return None


@attrs.frozen(kw_only=True)
class PRAM:
    """Post-randomisation: each key value is replaced by a category drawn
    from its row of a transition matrix, independently per record."""

    name: ClassVar[str] = "pram"
    key_masker: ClassVar[bool] = True
    uses_constraints: ClassVar[bool] = False
    leak_names: ClassVar[tuple[str, ...]] = ("pram-frequencies",)

    matrix: Any = param(dict, default=None, converter=_matrix_table, check=_matrix_problem,
                        doc="the transition matrix, {category = {category = probability}} (public, applied to every "
                            "column of the step); default: an invariant matrix from the frequencies (pd, alpha)")
    pd: float = param(float, role="plain", default=0.8, gt=0, le=1,
                      doc="retention probability of the matrix an invariant matrix is built from (sdcMicro's pd)")
    alpha: float = param(float, role="plain", default=0.5, gt=0, le=1,
                         doc="share of the invariant matrix mixed with the identity (sdcMicro's alpha)")

    def missing_values(self) -> str:
        return "missing key values are left missing (not randomised) and released missing"

    def data_leaks(self) -> list[DataLeak]:
        if self.matrix is not None:
            return []
        return [DataLeak("pram-frequencies", "matrix",
                         "the invariant transition matrix is computed from the category frequencies of each key "
                         "column (per stratum), and it is released in the ledger",
                         "give a public transition matrix (matrix = {...})")]

    def data_problems(self, data: DataFrame) -> list[str]:
        """The key columns it cannot treat (:func:`key_problem`), and the
        categories a given matrix has no row for, as :meth:`mask` refuses them."""
        problems = key_problems(data, self.name)
        if problems or self.matrix is None:
            return problems
        for c in data.columns:
            uniques = data[c].dropna().unique()
            problems.extend(self._rowless(c, np.asarray([_text(v) for v in uniques], dtype=object)))
        return problems

    def _rowless(self, column: Any, texts: np.ndarray) -> list[str]:
        """The refusal of the categories ``texts`` of ``column`` that the given matrix has no row for."""
        absent = sorted(set(texts) - set(self.matrix or {}))
        if not absent:
            return []
        boolean = " (a true/false key's categories are True and False)" if {"True", "False"} & set(absent) else ""
        return [f"{self.name}: column {column!r} holds the categor{'ies' if len(absent) > 1 else 'y'} "
                f"{', '.join(map(repr, absent[:5]))} that the transition matrix has no row for{boolean}; add a row "
                "(and column) for each category of the step's columns"]

    def mask(self, data: DataFrame, context: PrivacyContext) -> Masked:  # (``pd`` is a field of this class)
        who = self.name
        if not isinstance(data, pd.DataFrame) or data.shape[0] == 0 or data.shape[1] == 0:
            raise DataError(f"{who}: the data must be a pandas DataFrame with records and key columns")
        out = data.copy()
        matrices: dict[str, dict[str, dict[str, float]]] = {}
        changed = 0
        for c in data.columns:
            series = data[c]
            code, uniques = _categories(series, who)  # refuses continuous columns
            missing = code < 0
            texts = np.asarray([_text(v) for v in uniques], dtype=object)
            if self.matrix is not None:
                table = self.matrix
                for problem in self._rowless(c, texts):
                    raise DataError(problem)
            else:
                frequencies = pd.Series(np.bincount(code[~missing], minlength=len(uniques)), index=texts)
                table = _invariant(frequencies.groupby(level=0).sum().sort_index(), self.pd, self.alpha)
            names = sorted(table)
            index = {a: i for i, a in enumerate(names)}
            P = np.array([[float(table[a].get(b, 0.0)) for b in names] for a in names])
            cumulative = np.cumsum(P, axis=1)
            cumulative[:, -1] = 1.0
            rows = np.asarray([index[t] for t in texts], dtype=np.int64)[code if not missing.any() else code[~missing]]
            drawn = _draw(rows, context.rng.random(len(rows)), cumulative)
            changed += int((drawn != rows).sum())
            out[c] = _released(series, missing, _values_of(series, names), drawn)
            matrices[str(c)] = {a: {b: float(P[i, j]) for j, b in enumerate(names) if P[i, j] > 0}
                                for i, a in enumerate(names)}
        given = self.matrix is not None
        statement = (f"pram replaced each observed value of {', '.join(map(str, data.columns))} by a category drawn "
                     "from its row of the transition matrix (independently per record, with the run's random "
                     f"generator); {changed} of {int(data.notna().to_numpy().sum())} values changed. "
                     + ("The matrix was given in the recipe and is public (released in this entry)." if given else
                        f"The matrix is the invariant one (pd = {self.pd}, alpha = {self.alpha}) computed from the "
                        "category frequencies of the data, released in this entry: it discloses those frequencies "
                        "exactly (they solve the matrix's invariance; by stratum where the step ran by stratum).")
                     + " PRAM gives no k-anonymity: a record's released key is its original one with the matrix's "
                       "diagonal probability; what an intruder can infer from this one release follows from the "
                       "matrix and from the number of values changed this entry states (when it is 0, that every "
                       "released key is the original one). It holds for one release only: other releases of these "
                       "records with other draws, lined up record by record (through columns released unchanged, or "
                       "an identifier), give back the original values by a majority vote over each record's "
                       "released values.")
        if not given:
            context.record_leak("pram-frequencies", "the invariant transition matrix of pram is computed from the "
                                "category frequencies of the data and is released in the ledger.",
                                alternative="give a public transition matrix (matrix = {...})",
                                details={"matrices": matrices})
        context.record(statement, claim=privclust.Guarantee("post-randomisation (PRAM)"),
                       details={"matrices": matrices, "matrix_public": given, "changed_values": changed,
                                           **({} if given else {"pd": self.pd, "alpha": self.alpha})})
        return Masked(data=out, diagnostics={"changed_values": changed})


def _invariant(frequencies: pd.Series, pd_: float, alpha: float) -> dict[str, dict[str, float]]:
    """The invariant PRAM matrix (Gouweleeuw et al. 1998) of categories with
    ``frequencies``: ``P`` keeps a value with probability ``pd`` and moves
    it to each other category with ``(1 - pd) / (K - 1)``; ``Q`` is its
    backward matrix ``q_lk = p_kl T_k / sum_j p_jl T_j``; ``R = P Q`` leaves
    the expected frequencies unchanged (``T R = T``), and the matrix used
    is ``alpha R + (1 - alpha) I`` (sdcMicro's ``alpha``)."""
    names = [str(a) for a in frequencies.index]
    T = frequencies.to_numpy(dtype=float)
    K = len(T)
    if K == 1:
        return {names[0]: {names[0]: 1.0}}
    P = np.full((K, K), (1.0 - pd_) / (K - 1))
    np.fill_diagonal(P, pd_)
    Q = (P * T[:, None]).T / (T @ P)[:, None]
    R = alpha * (P @ Q) + (1.0 - alpha) * np.eye(K)
    R /= R.sum(axis=1, keepdims=True)
    return {a: {b: float(R[i, j]) for j, b in enumerate(names)} for i, a in enumerate(names)}


def _text(value: Any) -> str:
    """A category as the matrix names it: its text, a whole number without
    a decimal point (an integer-coded key with missing values is read as
    floats: 1.0 is the category "1")."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _values_of(series: pd.Series, names: list[str]) -> np.ndarray:
    """The values of ``series`` the category texts ``names`` stand for (a
    category of the matrix the column does not hold: its text, or the
    number it spells in a numeric column)."""
    seen = {_text(v): v for v in pd.unique(series.dropna())}
    out = np.empty(len(names), dtype=object)
    for i, a in enumerate(names):
        if a in seen:
            out[i] = seen[a]
        elif privclust.is_real_column(series):
            try:
                number = float(a)
            except ValueError:
                raise DataError(f"pram: the transition matrix names the category {a!r}, which numeric column "
                                f"{series.name!r} cannot hold; name its categories as numbers") from None
            out[i] = int(number) if series.dtype.kind in "iu" and number.is_integer() else number
        else:
            out[i] = a
    return out


def _draw(rows: np.ndarray, u: np.ndarray, cumulative: np.ndarray) -> np.ndarray:
    """Per value, the category drawn by inverse CDF: the number of entries
    of its row's cumulative distribution at most its uniform ``u`` (one
    draw per value)."""
    if len(cumulative) <= 64:  # one pass per column of the matrix, never an n x K array
        # into buffers allocated once (a 10^7-value column: three arrays, not three per column of the matrix)
        drawn = np.zeros(len(rows), dtype=np.uint8)
        edge = np.empty(len(rows), dtype=float)
        above = np.empty(len(rows), dtype=bool)
        for j in range(cumulative.shape[1] - 1):  # the last column is 1 > u: it never counts
            np.take(cumulative[:, j], rows, out=edge)
            np.greater_equal(u, edge, out=above)
            drawn += above
        return drawn.astype(np.int64)
    drawn = np.empty(len(rows), dtype=np.int64)
    by = np.argsort(rows, kind="stable")  # many categories: one sort, then one searchsorted per category
    edges = np.searchsorted(rows[by], np.arange(len(cumulative) + 1))
    for a in range(len(cumulative)):
        at = by[edges[a]:edges[a + 1]]
        drawn[at] = np.searchsorted(cumulative[a], u[at], side="right")
    return np.minimum(drawn, len(cumulative) - 1)


def _released(like: pd.Series, missing: np.ndarray, back: np.ndarray, drawn: np.ndarray) -> pd.Series:
    """The column with its observed values replaced by ``back[drawn]``, in
    the original dtype where it can hold them: the categories are cast once
    and taken per value (never a column of Python objects)."""
    if not isinstance(like.dtype, pd.CategoricalDtype):
        try:
            palette = pd.Series(back).astype(like.dtype).array
            lossless = not privclust.is_real_column(like) or np.array_equal(
                np.asarray(palette, dtype=float), np.asarray(back, dtype=float))
        except (TypeError, ValueError):
            lossless = False
        if lossless:
            at = np.full(len(like), -1, dtype=np.int64)
            at[~missing] = drawn
            values = palette.take(at, allow_fill=bool(missing.any()))
            return pd.Series(values, index=like.index, name=like.name)
    values = like.to_numpy(dtype=object, copy=True)
    values[~missing] = back[drawn]
    return _typed(values, like)


def _typed(values: np.ndarray, like: pd.Series) -> pd.Series:
    """Released values in the original column's dtype where it can hold them."""
    series = pd.Series(values, index=like.index, name=like.name)
    if isinstance(like.dtype, pd.CategoricalDtype):  # the categories it holds, none that was drawn away
        return _pruned(series.astype(pd.CategoricalDtype(sorted(set(like.cat.categories) | set(series.dropna()),
                                                                key=str))))
    try:
        return series.astype(like.dtype)
    except (TypeError, ValueError):
        return series


@privclust.hookimpl
def privclust_register_maskers(register):
    register(LocalSuppression)
    register(PRAM)
