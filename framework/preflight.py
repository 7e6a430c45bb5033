"""Every check :func:`privclust.run` makes on the data before its first step:
the frame itself, the columns, roles and weights, the records each step
needs, the bounds, the evaluations' columns, the edit rules against the
data, and the strata of ``[roles] strata``. ``run`` and ``privclust check
--input`` both call :func:`preflight`, so ``check`` says OK exactly when
``run`` would start.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Hashable, Mapping, Sequence, Sized
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accounting import component_text
from .compiling import (
    CompiledRecipe,
    CompiledStep,
    StepOutcome,
    changes_values_under_rules,
    is_key_masker,
    planned_cost,
    spanning_problems,
    spends_privacy,
)
from .components import CAPABILITIES, EvaluationInputs, capability, is_real_column
from .defaults import default_step_columns
from .errors import DataError, PrivclustError, Problem, RecipeError
from .integers import inexact_integer_problems, integer_columns
from .params import column_bounds
from .recipe import DEFAULT_LABEL_COLUMN, Roles
from .specs import META_LEAK

__all__ = ["Preflight", "check_columns", "check_data", "check_frame", "default_step_columns", "missing_counts",
           "missing_policy", "numeric_columns", "preflight", "strata_parts", "strata_statement", "written_before"]

def numeric_columns(frame: pd.DataFrame) -> tuple[str, ...]:
    """The columns of ``frame`` with a real numeric dtype (not boolean, not complex), in order."""
    return tuple(c for c in frame.columns if is_real_column(frame[c]))


def check_frame(data: Any) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"the data must be a pandas DataFrame; got {type(data).__name__} "
                        "(wrap an array with pandas.DataFrame(array, columns=[...]))")
    if data.shape[0] == 0:
        raise DataError("the data frame has no records")
    if data.shape[1] == 0:
        raise DataError("the data frame has no columns")
    if not data.columns.is_unique:
        dup = sorted({str(c) for c in data.columns[data.columns.duplicated()]})
        raise DataError(f"the data frame has duplicate column names: {', '.join(dup)}; rename them")
    bad = [c for c in data.columns if not isinstance(c, str)]
    if bad:
        raise DataError(f"column names must be strings; got {bad[:5]!r} (use frame.columns = frame.columns.map(str))")
    nested = [_first_nested(data[c]) for c in data.columns]
    found = [f"{c!r} (record {i} holds a value of type {what})"
             for c, (i, what) in zip(data.columns, nested, strict=True) if what]
    if found:
        raise DataError(f"column(s) {', '.join(found)} hold cells that are not single values (lists, arrays, "
                        "mappings, as Parquet stores them): such a column cannot be grouped, compared or counted; a "
                        "record's cell holds one value: drop the column or turn it into text "
                        "(frame[column].astype(str))")
    return data


def _written_apart_problems(frame: pd.DataFrame) -> list[str]:
    """Columns of Python objects (or categories) whose values the host and a
    reader of the written file would count differently: values equal to
    pandas but written apart (``1``, ``1.0`` and ``True``: one value to
    :func:`privclust.comparison.exact_codes`, three in the file), values
    written alike that pandas keeps apart (``1`` and ``"1"``), or an empty
    text beside a missing value (both an empty field). Every column is
    released, so every such column is checked: the host's counts (key cells,
    groups, the whole-file check) must be those of the file (a red-team
    audit: "k = 3 holds" on a key written as cells of 2)."""
    problems = []
    for c in frame.columns:
        values = frame[c]
        if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object:  # text only: no two spellings
            missing = values.isna().to_numpy()
            if missing.any() and (values[~missing] == "").any():
                problems.append(_empty_beside_missing(c))
            continue
        if values.dtype != object and not isinstance(values.dtype, pd.CategoricalDtype):
            continue
        codes = pd.factorize(values)[0]
        present = codes >= 0
        if not present.any():
            continue
        texts = values[present].astype(str).to_numpy(dtype=object)
        pairs = pd.DataFrame({"code": codes[present], "text": texts}).drop_duplicates()
        apart = pairs[pairs["code"].duplicated(keep=False)]
        alike = pairs[pairs["text"].duplicated(keep=False)]
        fix = f"recode the column first, e.g. frame[{c!r}] = frame[{c!r}].astype(str)"
        if len(apart):
            shown = ", ".join(sorted(apart.loc[apart["code"] == apart["code"].iloc[0], "text"])[:4])
            problems.append(f"column {c!r} holds values that are equal as values but written differently ({shown}): "
                            "the host would count them as one value, the released file shows them apart; " + fix)
        elif len(alike):
            first = alike.loc[alike["text"] == alike["text"].iloc[0]].index
            shown = " and ".join(repr(values[present].iloc[int(i)]) for i in first[:2])
            problems.append(f"column {c!r} holds different values written alike ({shown}): the host would count "
                            "them apart, the released file shows one value; " + fix)
        elif (~present).any() and (texts == "").any():
            problems.append(_empty_beside_missing(c))
    return problems


def _empty_beside_missing(column: str) -> str:
    return (f"column {column!r} holds both empty texts and missing values, both an empty field in a CSV file: the "
            "host would count them apart, the released file shows one value; recode the empty texts first, e.g. "
            f"frame[{column!r}] = frame[{column!r}].replace('', None)")


#: What ``pandas.api.types.infer_dtype`` calls a column that may hold lists or arrays.
_MIXED = ("mixed", "mixed-integer", "unknown-array")


def _first_nested(series: pd.Series) -> tuple[Any, str | None]:
    """The first record whose cell holds a list, an array or another
    unhashable value (which no check or count can compare), and its type."""
    if series.dtype != object or pd.api.types.infer_dtype(series, skipna=True) not in _MIXED:
        return None, None  # text, numbers, dates...: one value a cell (pandas' own scan, in C)
    for i, value in enumerate(series.to_numpy()):
        if not isinstance(value, Hashable):
            return series.index[i], type(value).__name__
    return None, None


def _not_in_data(frame: pd.DataFrame, columns: Sequence[str], where: str) -> list[str]:
    """The columns absent from the data, each named with the closest column."""
    problems = []
    names = [str(x) for x in frame.columns]
    for c in columns:
        if c in frame.columns:
            continue
        same = [x for x in names if unicodedata.normalize("NFC", x) == unicodedata.normalize("NFC", c)]
        if same:  # 'café' and 'café' print alike ("did you mean 'café'?" named the column the user wrote)
            problems.append(f"{where}: column {c!r} is not in the data: the data have {same[0]!r}, which reads the "
                            "same but is written with other Unicode characters (composed and decomposed accents); "
                            "write the name as the data do, or normalise the header (NFC)")
            continue
        close = [x for x in names if x.lower() == c.lower()] or difflib.get_close_matches(c, names, n=2, cutoff=0.6)
        fix = ("did you mean " + " or ".join(repr(x) for x in close) + "?") if close else "check the column names"
        problems.append(f"{where}: column {c!r} is not in the data ({fix})")
    return problems


def check_columns(frame: pd.DataFrame, columns: Sequence[str], where: str, *,
                   missing: str | None = None, categorical: bool = False) -> list[str]:
    """Problems of ``columns`` for a step (or an evaluation): absent, not
    numeric, infinite values, a column with no observed value, and missing
    (NaN) values when ``missing`` (the step's missing-value policy) is
    ``None``: the step refuses them (the caller names why). ``categorical``
    (a key masker's step): columns of any dtype are accepted (text,
    categories, codes); the key masker judges the values it can treat."""
    problems = _not_in_data(frame, columns, where)
    if problems:
        return problems
    refused: list[str] = []
    n_rows = np.zeros(len(frame), dtype=bool)
    for c in columns:
        series = frame[c]
        if not is_real_column(series) and not categorical:
            problems.append(f"{where}: column {c!r} is not numeric (dtype {series.dtype}); convert it or leave it "
                            "out of the step's columns")
            continue
        if is_real_column(series):
            values = series.to_numpy(dtype=float, na_value=np.nan)
            nan = np.isnan(values)
            n_inf = int(np.isinf(values).sum())
        else:
            nan, n_inf = series.isna().to_numpy(), 0
            values = nan
        n_nan = int(nan.sum())
        if n_inf:
            problems.append(f"{where}: column {c!r} has {n_inf} infinite values; replace them (by NaN, a missing "
                            "value, where the step accepts missing values) or drop those records")
        if n_nan and missing is None:
            refused.append(f"column {c!r} has {n_nan} missing (NaN) values")
            n_rows |= nan
        elif n_nan == len(values) and missing is not None:
            problems.append(f"{where}: column {c!r} has no observed value at all; leave it out of the step's "
                            "columns")
    if refused:
        problems.append(f"{where}: {', '.join(refused)} ({int(n_rows.sum())} record(s) in all) and this step refuses "
                        "them; impute or drop those records first, or give the step columns without missing values")
    return problems


def missing_policy(cs: CompiledStep) -> str | None:
    """The step's missing-value policy text, ``None`` if it refuses missing values."""
    policy = capability(cs.component, "missing_values")
    text = policy() if policy is not None else None
    return component_text(f"{type(cs.component).name}.missing_values()", str(text)) if text else None


def _refusal(cs: CompiledStep) -> str:
    """Why a step refuses missing values, said in the host's words."""
    if getattr(cs.component, "missing", None) == "refuse":
        return f"{type(cs.component).name} refuses them (missing = \"refuse\")"
    inner = getattr(cs.component, "clusterer", None)
    if inner is not None and getattr(inner, "missing", None) == "refuse":
        return f"its clusterer {type(inner).name} refuses them (missing = \"refuse\")"
    if cs.kind == "noise_mechanisms" or planned_cost(cs.component) != (0.0, 0.0):
        return ("its differential-privacy guarantee (the sensitivity analysis) assumes complete records, so "
                "missing values are refused (impute only with public values: a value imputed from the data, such as "
                "a column mean, depends on the other records, outside that analysis)")
    return f"{type(cs.component).name} declares no missing-value policy (it computes on complete records only)"


def missing_counts(view: pd.DataFrame) -> dict[str, Any]:
    """Records and values with missing values in a step's columns."""
    nan = view.isna().to_numpy()
    per_column = {str(c): int(n) for c, n in zip(view.columns, nan.sum(axis=0), strict=True) if n}
    return {"records": int(nan.any(axis=1).sum()), "values": int(nan.sum()), "columns": per_column}


def evaluation_default_columns(compiled: CompiledRecipe, frame: pd.DataFrame, step_columns: Sequence[Sequence[str]],
                               default_columns: Sequence[str]) -> tuple[str, ...]:
    """The columns an evaluation without ``columns`` works on: those the
    numeric steps change (key maskers' keys go to the keys role's
    evaluators), else the default columns."""
    changed = tuple(c for c in frame.columns
                    if any(c in cols for cs, cols in zip(compiled.steps, step_columns, strict=True)
                           if cs.kind != "clusterers" and not is_key_masker(cs)))
    return changed or tuple(default_columns)


def check_data(compiled: CompiledRecipe, frame: pd.DataFrame,
               decided: Sequence[Sequence[str]] | None = None,
               defaults: Sequence[str] | None = None) -> list[tuple[str, ...]]:
    """Check a frame against a compiled recipe before anything runs: every
    column a step, rule or label uses, the records each step needs, the label
    columns, and rules that straddle a masker's default columns. Returns each
    step's columns: ``decided`` when given (decided for the whole data
    set by :func:`privclust.run_dataset`, of which ``frame`` is one stratum:
    a stratum's values do not choose them again), else chosen here.
    ``defaults``: the default columns (of a step that names none, and of an
    evaluation when no step changes a column), decided likewise for the
    whole data set; else :func:`default_step_columns` of ``frame``.

    :raises DataError: with every data problem found.
    :raises RecipeError: for a rule straddling a masker's default columns.
    """
    roles = compiled.recipe.roles
    default_columns = tuple(defaults) if defaults is not None else default_step_columns(frame, roles)
    problems = _role_problems(roles, frame) + _written_apart_problems(frame)
    given = None if decided is None else [tuple(c) for c in decided]
    step_columns: list[tuple[str, ...]] = []
    for cs in compiled.steps:
        if given is not None:
            columns = given[cs.index]
        elif cs.step.columns is not None:
            columns = cs.step.columns
        else:  # a differentially private step's default columns are not chosen from the values
            columns = (default_step_columns(frame, roles, private=True) if spends_privacy(cs.component)
                       else default_columns)
        if not columns:
            what = ("numeric columns without a role" if roles else "numeric columns") + " that are not integer codes"
            problems.append(f"steps[{cs.index}]: the data have no {what}; name the step's columns")
        step_columns.append(tuple(columns))
        policy = missing_policy(cs)
        found = check_columns(frame, columns, f"steps[{cs.index}] ({cs.id})", missing=policy,
                               categorical=is_key_masker(cs))
        problems.extend(p.replace("and this step refuses them", "and " + _refusal(cs)) for p in found)
        minimum = capability(cs.component, "min_records")
        need = minimum(len(columns)) if minimum is not None else None
        sized = capability(cs.component, "size_problems")
        texts = list(sized(frame.shape[0], len(columns)) or ()) if sized is not None else []
        if texts:  # the step's own words: they name its parameter and the values that fit
            problems.extend(f"steps[{cs.index}] ({cs.id}): {text}" for text in texts)
        elif need is not None and frame.shape[0] < need:
            problems.append(f"steps[{cs.index}] ({cs.id}): {type(cs.component).name} needs at least {need} records; "
                            f"the data have {frame.shape[0]}")
        if not found:  # a column absent from the data is named once
            problems.extend(_bounds_problems(cs, columns))
            problems.extend(inexact_integer_problems(cs, frame, columns))
            if not written_before(compiled.steps, step_columns, cs.index) & set(columns):
                problems.extend(_value_problems(cs, frame, columns))
    # an evaluation's default columns: those the numeric steps change (key maskers' keys: the keys role's evaluators)
    problems.extend(_evaluation_problems(compiled, frame,
                                         evaluation_default_columns(compiled, frame, step_columns, default_columns)))
    for h, handler in enumerate(compiled.constraints):
        found = [str(p) if isinstance(p, Problem) else f"constraints[{h}]: {p}"
                 for p in handler.check(tuple(map(str, frame.columns))) or ()]
        problems.extend(found)
        if not found:  # the rules' columns are in the data: edit rules are over numbers
            used = {c for v in handler.variables() for c in v}
            not_numeric = [f"constraints[{h}]: column {c!r} of its rules is not numeric (dtype {frame[c].dtype}); "
                           "an edit rule is over numeric columns: convert it, or remove the rules that name it"
                           for c in frame.columns if c in used and not is_real_column(frame[c])]
            problems.extend(not_numeric)
            if not not_numeric:
                problems.extend(_integer_rule_problems(handler, h, frame, used))
    outputs: dict[str, int] = {}
    for cs in compiled.steps:  # label columns, checked before any step runs (or spends)
        if cs.kind != "clusterers":
            continue
        output = cs.step.output or DEFAULT_LABEL_COLUMN
        if output in frame.columns:
            problems.append(f"steps[{cs.index}] ({cs.id}): the label column {output!r} already exists in the data; "
                            "name another with output = \"...\"")
        elif output in outputs:
            problems.append(f"steps[{cs.index}] ({cs.id}): the label column {output!r} is also released by "
                            f"steps[{outputs[output]}]; name another with output = \"...\"")
        outputs.setdefault(output, cs.index)
    if problems:
        raise DataError("; ".join(problems))
    recipe_problems = []
    for cs, columns in zip(compiled.steps, step_columns, strict=True):
        if cs.step.columns is None and changes_values_under_rules(cs):
            recipe_problems.extend(spanning_problems(cs, compiled.constraints, columns))
    if recipe_problems:
        raise RecipeError(recipe_problems, source=compiled.recipe.name)
    return step_columns


def written_before(steps: Sequence[CompiledStep], step_columns: Sequence[Sequence[str]], index: int) -> set[str]:
    """The columns the steps before ``steps[index]`` write (a masker's or a
    noise step's columns; a clusterer adds its label column and changes
    none): a step's ``data_problems`` are asked only when it names none of
    them, as its values are then the input's."""
    return {c for cs, columns in zip(steps[:index], step_columns, strict=False) if cs.kind != "clusterers"
            for c in columns}


def _value_problems(cs: CompiledStep, frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The step's own checks of the values of its columns (``data_problems``,
    in its words), on those columns of the input as the step would be given
    them, located at the step. Asked only when no earlier step changes the
    columns (the caller's rule): the values are then those the step gets."""
    ask = capability(cs.component, "data_problems")
    if ask is None:
        return []
    where = f"steps[{cs.index}] ({cs.id})"
    said = ask(frame[list(columns)])
    malformed = CAPABILITIES["data_problems"].problem(said, len(columns))
    if malformed:
        raise PrivclustError(f"{where}: {type(cs.component).name}.{malformed} (a bug in its plugin)")
    return [f"{where}: {' '.join(str(text).split())}" for text in said or ()]


def _integer_rule_problems(handler: Any, h: int, frame: pd.DataFrame, used: set[str]) -> list[str]:
    """Rules of ``constraints[h]`` that no record can satisfy once the data's
    integer columns hold whole numbers, as the host releases them (``2*x ==
    1`` with ``x`` an integer column): the released file could not satisfy
    them, so they are refused before any step runs. Asked of the bound
    rules' ``integer_problems(integer)`` where a handler has it (the
    linear rules do)."""
    integers = set(integer_columns(frame))
    if not integers & used:
        return []
    columns = tuple(c for c in map(str, frame.columns) if c in used)
    bound = handler.bind(columns)
    ask = getattr(bound, "integer_problems", None)
    if not callable(ask):
        return []
    found = ask(np.array([c in integers for c in columns]))
    named = ", ".join(c for c in columns if c in integers)
    return [f"constraints[{h}]: {text}. The data's integer column(s) {named} are released as whole numbers, so the "
            "released file could not satisfy the rule; correct the rule, or write the column with decimals (15.0) "
            "if it is not a whole-number column" for text in found or ()]


def _bounds_problems(cs: CompiledStep, columns: Sequence[str]) -> list[str]:
    """A step whose ``bounds`` (a :func:`~privclust.params.public_bounds`
    parameter) is a table: every column of the step needs its entry, as
    :func:`~privclust.column_bounds` demands when the step runs (the same
    function, asked before any step runs). ``"data"``, ``"dp"`` and the
    tables those use are resolved when the step runs."""
    component = cs.component
    field = attrs.fields_dict(type(component)).get("bounds") if attrs.has(type(component)) else None
    value = getattr(component, "bounds", None)
    if field is None or field.metadata.get(META_LEAK) != "bounds" or not isinstance(value, Mapping):
        return []
    try:
        column_bounds(np.empty((0, len(columns))), columns, value, None, who=type(component).name)
    except DataError as err:
        return [f"steps[{cs.index}] ({cs.id}): {err}"]
    return []


def _evaluation_problems(compiled: CompiledRecipe, frame: pd.DataFrame, default_columns: Sequence[str]) -> list[str]:
    """Each evaluation's columns against the data, as :func:`evaluate_release`
    checks them, and the columns and sampling weight its evaluator says it
    computes on (``evaluated_on``: key variables, a weight column of its
    own), so that a run is refused before its first step, not after."""
    problems: list[str] = []
    # the label columns the clusterer steps will release, as placeholders: an evaluator of a clustering checks
    # that its labels (and truth) column will be there before any step runs, not after every step has run
    labels = pd.DataFrame({cs.step.output or DEFAULT_LABEL_COLUMN: np.zeros(len(frame), dtype=np.int64)
                           for cs in compiled.steps if cs.kind == "clusterers"}, index=frame.index)
    for i, ev in enumerate(compiled.evaluations):
        where = f"evaluate[{i}] ({ev.spec.use})"
        columns = ev.spec.columns if ev.spec.columns is not None else tuple(default_columns)
        found = check_columns(frame, columns, where, missing="observed")
        problems.extend(found)
        method = capability(ev.evaluator, "evaluated_on")
        if found or method is None:
            continue
        inputs = EvaluationInputs(original=frame, protected=frame, columns=tuple(columns),
                                  labels=labels, registry=compiled.registry,
                                  roles=compiled.recipe.roles, columns_named=ev.spec.columns is not None)
        try:
            said = method(inputs)
        except PrivclustError as err:
            problems.append(f"{where}: {' '.join(str(err).split())}")
            continue
        if not isinstance(said, Mapping):
            continue  # the run names a malformed answer (a bug in the plugin) after evaluating
        named = said.get("columns")
        if isinstance(named, Sequence) and not isinstance(named, str):
            problems.extend(_not_in_data(frame, [c for c in named if isinstance(c, str) and c not in labels.columns],
                                         where))  # a label column a clusterer step will release is there
        weight = said.get("weight")
        if isinstance(weight, str):
            problems.extend(_weight_problems(frame, weight, f"{where}: weight"))
    return problems


def _weight_problems(frame: pd.DataFrame, column: str, where: str) -> list[str]:
    """A sampling-weight column against the data: present, numeric, every value positive."""
    found = _not_in_data(frame, [column], where)
    if found:
        return found  # absent: named with the closest column
    series = frame[column]
    if not is_real_column(series):
        return [f"{where}: the weight column {column!r} is not numeric (dtype {series.dtype}); a sampling weight is "
                "a positive number"]
    w = series.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(w) | (w <= 0)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        return [f"{where}: the weight column {column!r} has {int(bad.sum())} value(s) that are missing, infinite or "
                f"not positive (first at row {first}: {w[first]!r}); every sampling weight must be a positive number"]
    return []


def _role_problems(roles: Roles, frame: pd.DataFrame) -> list[str]:
    """The ``[roles]`` columns against the data: present, a positive weight,
    strata without missing values."""
    problems = []
    for column, role in roles.columns.items():
        if role == "weight":
            problems.extend(_weight_problems(frame, column, "[roles] weight"))
            continue
        found = _not_in_data(frame, [column], f"[roles] {role}")
        if found:
            problems.extend(found)  # absent: named with the closest column
            continue
        series = frame[column]
        if role == "strata" and series.isna().any():
            problems.append(f"[roles] strata: the stratum column {column!r} has {int(series.isna().sum())} missing "
                            "value(s); every record needs a stratum (recode them as a category of their own, e.g. "
                            f"frame[{column!r}].fillna(\"missing\"))")
    return problems


def strata_parts(compiled: CompiledRecipe, frame: pd.DataFrame,
                  step_columns: Sequence[tuple[str, ...]]) -> tuple[list[tuple[str, np.ndarray]] | None, list[str]]:
    """The strata of ``[roles] strata``: (stratum as text, record positions)
    in sorted order, checked before any step runs; and the merges made under
    ``small_strata = "merge"`` (as text)."""
    roles = compiled.recipe.roles
    strata = list(roles.strata)
    if not strata:
        return None, []
    label = ", ".join(strata)
    try:
        try:
            codes = frame.groupby(strata, sort=True, dropna=False, observed=True).ngroup().to_numpy()
        except TypeError:  # values of mixed types cannot be ordered: keep their order of appearance
            codes = frame.groupby(strata, sort=False, dropna=False, observed=True).ngroup().to_numpy()
    except TypeError as err:  # unhashable values (lists, dicts)
        raise DataError(f"[roles] strata: the values of {label} cannot be grouped ({err}); a stratum column holds "
                        "plain values (text or numbers): convert it first") from err
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    groups = np.split(order, bounds)
    values = frame[strata].iloc[[int(g[0]) for g in groups]]
    texts = [", ".join(str(v) for v in row) for row in values.itertuples(index=False, name=None)]
    if len(set(texts)) != len(texts):
        raise DataError(f"[roles] strata: two strata of {label} print the same; convert the column(s) to text first")
    # the released file shows each value as written: one stratum must not hold values that read differently
    # (1, 1.0 and True are one group to pandas, three values to a reader; so are 0.0 and -0.0)
    written = frame[strata].astype(str).agg(", ".join, axis=1).to_numpy() if len(strata) > 1 else \
        frame[strata[0]].astype(str).to_numpy()
    for text, rows in zip(texts, groups, strict=True):
        shown = set(written[rows].tolist())
        if len(shown) > 1:
            raise DataError(f"[roles] strata: the stratum {text!r} of {label} holds values written differently "
                            f"({', '.join(sorted(shown)[:4])}) that are equal as values; the released file would "
                            "show them as different strata: recode the column(s) first (e.g. to text)")
    parts = list(zip(texts, groups, strict=True))
    needs = []
    for cs, columns in zip(compiled.steps, step_columns, strict=True):
        minimum = capability(cs.component, "min_records")
        need = minimum(len(columns)) if minimum is not None else None
        if need is not None:
            needs.append((int(need), cs))
    merges: list[str] = []
    if needs and roles.small_strata == "merge":
        need_all = max(n for n, _ in needs)
        merged: list[tuple[str, np.ndarray]] = []
        pending: list[tuple[str, np.ndarray]] = []
        for part in parts:
            pending.append(part)
            if sum(len(r) for _, r in pending) >= need_all:
                merged.append(_joined_parts(pending))
                pending = []
        if pending:  # the last strata are too small together: join them to the previous group
            if merged:
                last = merged.pop()
                merged.append(_joined_parts([last, *pending]))
            else:
                merged.append(_joined_parts(pending))
        merges = [text for text, _ in merged if " + " in text]
        parts = merged
    problems = []
    for need, cs in needs:
        for text, rows in parts:
            if len(rows) < need:
                problems.append(f"steps[{cs.index}] ({cs.id}): {type(cs.component).name} needs at least {need} "
                                f"records; the stratum {label} = {text!r} has {len(rows)} (merge small strata "
                                "with [roles] small_strata = \"merge\", or recode the stratum columns)")
    if problems:
        raise DataError("; ".join(problems))
    return parts, merges


def _joined_parts(parts: Sequence[tuple[str, np.ndarray]]) -> tuple[str, np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return " + ".join(t for t, _ in parts), np.sort(np.concatenate([r for _, r in parts]))


@attrs.frozen
class Preflight:
    """What :func:`preflight` found: the checked frame, each step's columns,
    the strata of ``[roles] strata`` (``None`` without them) and the merges of
    small strata (as text)."""

    frame: pd.DataFrame
    step_columns: tuple[tuple[str, ...], ...]
    parts: list[tuple[str, np.ndarray]] | None
    merges: tuple[str, ...] = ()
    #: the default columns (:func:`default_step_columns`, or those decided for a whole data set): an evaluation's
    #: columns when no step changes a column
    default_columns: tuple[str, ...] = ()


def preflight(compiled: CompiledRecipe, data: Any, *, stratum: str | None = None,
              step_columns: Sequence[Sequence[str]] | None = None,
              default_columns: Sequence[str] | None = None) -> Preflight:
    """Every check :func:`run` makes on the data before its first step, and
    nothing else: the frame itself, :func:`check_data` (roles, columns,
    records, label columns, rules) and the strata of ``[roles] strata``.
    ``run`` and ``privclust check --input`` both call this, so ``check`` says
    OK exactly when ``run`` would start.

    With ``stratum`` (for :func:`privclust.run_dataset`, which made the strata
    itself), the data are the records of that one stratum, named so, and are
    not split again; ``step_columns`` are then each step's columns, and
    ``default_columns`` the evaluations' fallback, decided once for the whole
    data set (a stratum's values would choose other default columns than the
    whole file's).

    :raises DataError: for a problem of the data.
    :raises RecipeError: for a rule straddling a masker's default columns.
    """
    frame = check_frame(data)
    step_columns = check_data(compiled, frame, step_columns, default_columns)
    defaults = tuple(default_columns) if default_columns is not None else tuple(
        default_step_columns(frame, compiled.recipe.roles))
    if stratum is not None and compiled.recipe.roles.strata:
        return Preflight(frame=frame, step_columns=tuple(step_columns),
                         parts=[(stratum, np.arange(len(frame)))], merges=(), default_columns=defaults)
    parts, merges = strata_parts(compiled, frame, step_columns)
    return Preflight(frame=frame, step_columns=tuple(step_columns), parts=parts, merges=tuple(merges),
                     default_columns=defaults)


def strata_statement(strata: Sequence[str], parts: Sequence[tuple[str, Sized]], merges: Sequence[str],
                      outcomes: Sequence[StepOutcome]) -> str:
    shown = ", ".join(f"{text!r} ({len(rows)} records)" for text, rows in parts[:12])
    more = f" and {len(parts) - 12} more" if len(parts) > 12 else ""
    columns = ", ".join(repr(c) for c in strata)
    merged = (f" Strata smaller than a step needs were merged with their neighbours in sorted order, as the recipe "
              f"asks (small_strata = \"merge\"): {', '.join(repr(m) for m in merges)}." if merges else "")
    return (f"The host split the records by the public stratum column(s) {columns} into {len(parts)} disjoint "
            f"strata ({shown}{more}) and ran each of the {len(outcomes)} step(s) on each stratum's records alone, so "
            "every group a step forms lies within one stratum and the releases of different strata compose "
            f"in parallel (the accountant charges the largest stratum's total).{merged} The values of {columns} are "
            "treated as public: the guarantees hold between data sets that agree on them, and the strata, their "
            "values and their sizes are not protected.")

