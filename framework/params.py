"""Hyper-parameters as validated attrs fields.

A component is a frozen, keyword-only attrs class; its fields are its
hyper-parameters. :func:`param` builds such a field with a converter (so a
TOML integer is accepted where a float is expected, but a string or a bool is
not) and a validator (bounds, choices), and keeps a one-line description for
the generated parameter tables. :func:`nested` declares a field that holds
another component (a masker's clusterer, a clusterer's noise mechanism).

Names: a recipe key is the field name with one trailing underscore removed,
so the field ``lambda_`` is written ``lambda`` in recipes (Python forbids
``lambda=`` as a keyword argument).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .errors import DataError, ParameterError, Problem
from .specs import (
    META_DOC,
    META_KIND,
    META_LEAK,
    META_STEP_ID,
    META_TYPE,
    ComponentSpec,
    field_doc,
    field_kind,
    param_name,
    to_component_value,
)

__all__ = ["NOTHING", "DataLeak", "RenamedParameterError", "answer_renames", "check_renamed", "column_bounds",
           "declared_leaks", "leak_problems", "nested", "param", "param_name", "public_bounds", "renamed_message",
           "renamed_problem", "renamed_problems", "renamed_to", "ROLES", "parameter_roles", "role_rounding",
           "RecipePath", "recipe_folder", "resolve_path"]

_META_ROLE = "privclust_role"

#: What a number a component states or reports is, for how the report shows it
#: (:func:`role_rounding`): ``"privacy"`` a privacy-loss figure (an epsilon, a
#: delta, a rho), shown exactly; ``"noise-scale"`` the scale of noise drawn and
#: ``"sensitivity"`` the change the noise was calibrated to, rounded down (so
#: they never read as more noise, or a larger change covered, than holds);
#: ``"plain"`` any other setting, to 6 significant digits. A number with no
#: role is shown exactly: never misstated, whatever it is (docs/decisions.md).
#: ``"path"`` is no number: a file path (or a table of them) that a recipe file
#: writes relative to its own folder (:func:`resolve_path`); shown as written.
ROLES = {"privacy": "exact", "noise-scale": "down", "sensitivity": "down", "plain": "nearest", "path": "exact"}

#: The folder of the recipe file whose components are being built (``None``: a recipe from a dict or text, whose
#: relative paths are the working directory's). Set by :func:`recipe_folder` while a recipe is compiled.
_FOLDER: ContextVar[Path | None] = ContextVar("privclust_recipe_folder", default=None)


class RecipePath(str):
    """A relative path a recipe file wrote, resolved against the recipe
    file's folder: the string itself is the path to open (any ``open``,
    ``Path`` or ``pandas.read_csv`` finds the file whatever the working
    directory); :attr:`written` keeps the recipe's own text, for what a
    report shows."""

    written: str

    def __new__(cls, resolved: str, written: str) -> RecipePath:
        out = super().__new__(cls, resolved)
        out.written = written
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (RecipePath, (str(self), self.written))


@contextmanager
def recipe_folder(folder: str | Path | None) -> Iterator[None]:
    """While the block runs, :func:`resolve_path` resolves relative paths against ``folder`` (``None``: leaves
    them to the working directory)."""
    token = _FOLDER.set(Path(folder) if folder is not None else None)
    try:
        yield
    finally:
        _FOLDER.reset(token)


def resolve_path(value: Any) -> Any:
    """A ``param(role="path")`` value with its relative path (or the relative
    paths of a table of them, ``{key = "file.csv"}``) resolved against the
    folder of the recipe file being compiled (:func:`recipe_folder`), as a
    :class:`RecipePath`. Absolute paths (``~`` expanded), other values, and
    every value outside a recipe file (a recipe given as a dict or text, a
    component built in Python) are returned as they are: relative to the
    working directory."""
    folder = _FOLDER.get()
    if folder is None or isinstance(value, RecipePath):
        return value
    if isinstance(value, str):
        if not value or Path(value).expanduser().is_absolute():
            return value
        return RecipePath(str(folder / value), value)
    if isinstance(value, Mapping):
        return {key: resolve_path(v) for key, v in value.items()}
    return value

#: Sentinel: the parameter is required (no default).
NOTHING = attrs.NOTHING



def _owner(inst: Any) -> str:
    return getattr(inst, "name", type(inst).__name__)


def _describe_type(tp: Any) -> str:
    if isinstance(tp, tuple):
        return " or ".join(_describe_type(t) for t in tp)
    return {float: "a number", int: "an integer", str: "a string", bool: "true or false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _int_to_float(value: int) -> float:
    """``float(value)``, or an infinity of its sign where the integer is beyond
    the largest double (``float`` raises ``OverflowError`` there): the finite
    checks then reject it with the parameter's name."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _convert(tp: Any, value: Any) -> Any:
    """Convert a recipe value to ``tp`` or return it unchanged for the validator to reject."""
    if value is None:
        return value
    if tp is float:
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return _int_to_float(value)
        if isinstance(value, np.floating | np.integer):
            return float(value)
        return value
    if tp is int:
        if isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, np.integer):
            return int(value)
        return value
    if tp is tuple and isinstance(value, list):
        return tuple(value)
    return value


def _check_type(tp: Any, value: Any) -> bool:
    if tp is None:
        return True
    types = tp if isinstance(tp, tuple) else (tp,)
    for t in types:
        if t in (float, int) and isinstance(value, bool):
            continue
        if t is float and isinstance(value, float):
            return True
        if isinstance(value, t):
            return True
    return False


def param(
    tp: Any = None,
    *,
    default: Any = NOTHING,
    doc: str = "",
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    choices: Sequence[Any] | None = None,
    optional: bool = False,
    finite: bool = False,
    converter: Callable[[Any], Any] | None = None,
    check: Callable[[Any], str | None] | None = None,
    step_id: bool = False,
    role: str | None = None,
    _leak: str | None = None,
) -> Any:
    """A validated hyper-parameter field.

    :param tp: the expected type (``float``, ``int``, ``str``, ``bool``,
        ``tuple``, ``dict``... or a tuple of types). Integers are accepted and
        converted where ``float`` is expected; booleans never pass as numbers.
    :param default: the default value; leave it out for a required parameter.
    :param doc: one line shown in the parameter tables of the docs and in
        ``privclust plugins --json``.
    :param gt: a strict lower bound.
    :param ge: an inclusive lower bound.
    :param lt: a strict upper bound.
    :param le: an inclusive upper bound.
    :param choices: the allowed values.
    :param optional: ``None`` is allowed (and means "not set").
    :param finite: an infinite (or NaN) number is refused (a privacy budget:
        ``epsilon = inf`` would add no noise).
    :param converter: a converter run before the built-in one.
    :param check: an extra check returning an error text or ``None``.
    :param step_id: the value is the id of a step of the recipe (an
        evaluator's ``step``): a value that names no step is refused when the
        recipe is compiled (``privclust check``, and ``run`` before any step
        runs), with the recipe's step ids.
    :param role: what the number is, for the report (one of :data:`ROLES`):
        ``"privacy"`` (an epsilon or a delta: shown exactly),
        ``"noise-scale"``/``"sensitivity"`` (rounded down), ``"plain"`` (6
        significant digits); left out, the report shows it exactly.
        ``"path"``: the value is a file path, or a table of them, which a
        recipe file writes relative to its own folder: the host resolves a
        relative path against the folder of the recipe file it was read from
        (:func:`resolve_path`), before any other converter runs.
    """
    if role is not None and role not in ROLES:
        raise ParameterError(f"param(role=...) is one of {', '.join(map(repr, ROLES))}; got {role!r}")
    if default is None:
        optional = True

    def convert(value: Any) -> Any:
        if role == "path":
            value = resolve_path(value)
        if converter is not None and value is not None:
            value = converter(value)
        return _convert(tp, value)

    def validate(inst: Any, attribute: attrs.Attribute, value: Any) -> None:
        key = param_name(attribute.name)
        where = f"The {key!r} parameter of {_owner(inst)}"
        if value is None:
            if optional:
                return
            raise ParameterError(f"{where} is required; got None.")
        if not _check_type(tp, value):
            raise ParameterError(
                f"{where} must be {_describe_type(tp)}; got {value!r} ({type(value).__name__})."
            )
        if isinstance(value, float) and (gt is not None or ge is not None or lt is not None or le is not None):
            if math.isnan(value):
                raise ParameterError(f"{where} must be a number; got NaN.")
        if finite and isinstance(value, float) and not math.isfinite(value):
            raise ParameterError(f"{where} must be a finite number; got {value!r}.")
        if gt is not None and not value > gt:
            raise ParameterError(f"{where} must be > {gt}; got {value!r}.")
        if ge is not None and not value >= ge:
            raise ParameterError(f"{where} must be >= {ge}; got {value!r}.")
        if lt is not None and not value < lt:
            raise ParameterError(f"{where} must be < {lt}; got {value!r}.")
        if le is not None and not value <= le:
            raise ParameterError(f"{where} must be <= {le}; got {value!r}.")
        if choices is not None and value not in choices:
            options = ", ".join(repr(c) for c in choices)
            raise ParameterError(f"{where} must be one of {options}; got {value!r}.")
        if check is not None:
            problem = check(value)
            if problem:
                raise ParameterError(f"{where} {problem}; got {value!r}.")

    metadata = {META_DOC: doc, META_TYPE: tp}
    if _leak is not None:
        metadata[META_LEAK] = _leak
    if step_id:
        metadata[META_STEP_ID] = True
    if role is not None:
        metadata[_META_ROLE] = role
    return attrs.field(default=default, converter=convert, validator=validate, metadata=metadata, kw_only=True)


def parameter_roles(component: Any, prefix: str = "") -> dict[str, str]:
    """The role (:data:`ROLES`) of each number a component instance states or
    reports, keyed by its name as the report shows it (a nested component's
    as ``"clusterer.epsilon"``): its parameters' ``param(role=...)``, the
    roles its class declares for the values it reports under
    :data:`~privclust.EFFECTIVE_PARAMS` (a ``reported_roles`` class mapping,
    e.g. ``{"noise_scale": "noise-scale"}``), and those of the components
    nested in it (built instances; a nested spec's are unknown)."""
    cls = type(component)
    if not attrs.has(cls):
        return {}
    reported = getattr(cls, "reported_roles", None) or {}
    out = {f"{prefix}{name}": role for name, role in reported.items() if role in ROLES}
    for field in attrs.fields(cls):
        name = f"{prefix}{param_name(field.name)}"
        role = field.metadata.get(_META_ROLE)
        if role is not None:
            out[name] = role
        value = getattr(component, field.name, None)
        if field_kind(field) is not None and value is not None and not isinstance(value, ComponentSpec | str):
            out.update(parameter_roles(value, name + "."))
    return out


def role_rounding(name: str, roles: Mapping[str, str]) -> str:
    """How the report shows the numbers of ``name`` (dotted for a nested
    component's parameter or a table's entry): ``"exact"``, ``"down"`` or
    ``"nearest"`` by the role of the name, else of the nearest enclosing
    name that has one (a table's entries share its role); ``"exact"`` when
    none has a role (a number never misstated)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        role = roles.get(".".join(parts[:end]))
        if role is not None:
            return ROLES[role]
    return "exact"


def _to_bounds(value: Any) -> Any:
    """``{column: [low, high]}`` -> ``{column: (low, high)}`` as floats, checked."""
    if not isinstance(value, Mapping):
        return value  # a string ("data") or a wrong type, left to the validator
    out = {}
    for column, pair in value.items():
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ParameterError(
                f"The 'bounds' parameter must map each column to [low, high]; got {column!r} = {pair!r}."
            )
        for v in pair:
            if isinstance(v, bool) or not isinstance(v, int | float) and not hasattr(v, "__float__") or \
                    not math.isfinite(_int_to_float(v) if isinstance(v, int) else float(v)):
                raise ParameterError(
                    f"The 'bounds' parameter must give finite numbers for {column!r}; got {list(pair)!r}."
                )
        low, high = float(pair[0]), float(pair[1])
        if not low < high:
            if pair[0] < pair[1]:  # distinct integers that round to the same double (beyond 2^53)
                raise ParameterError(
                    f"The 'bounds' parameter of {column!r} ({list(pair)!r}) cannot be told apart as floating-point "
                    f"numbers (both round to {low!r}): bounds are doubles, exact only up to 2^53 in magnitude. "
                    "Give a wider range, or shift the column (subtract a public offset) before protecting it."
                )
            raise ParameterError(f"The 'bounds' parameter needs low < high for {column!r}; got {list(pair)!r}.")
        out[str(column)] = (low, high)
    return out


def _bounds_checker(dp: bool) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, str) and value not in (("data", "dp") if dp else ("data",)):
            return ('must be a table {column = [low, high], ...}, "dp" or "data"' if dp
                    else 'must be a table {column = [low, high], ...} or "data"')
        return None

    return check


def public_bounds(*, default: Any = None, doc: str = 'public bounds {column = [low, high]}, or "data"',
                  dp: bool = False) -> Any:
    """A ``bounds`` parameter: public bounds per column, ``{column = [low,
    high]}`` in a recipe (stored as ``{column: (low, high)}`` floats), or the
    string ``"data"`` for bounds taken from the data, which a component must
    record as a leak (``context.record_leak("bounds", ...)``) and which a
    recipe must accept with ``[privacy] allow_leaks = ["bounds"]`` (it is
    refused at compile time otherwise, see :func:`declared_leaks`). With
    ``dp=True`` the component also accepts ``"dp"``: bounds estimated from the
    data by a differentially private quantile, charged to the budget. Shared
    by every component that clips to public bounds, so they all read and
    check them alike."""
    return param((Mapping, str), default=default, converter=_to_bounds, check=_bounds_checker(dp), doc=doc,
                 role="plain", _leak="bounds")


def column_bounds(values: np.ndarray, columns: Sequence[str], bounds: Any, context: Any, *, who: str,
                  statement: str = "", alternative: str = "", key: str = "bounds", constant: str = "unit",
                  details: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The ``(low, high)`` arrays, in column order, of a bounds parameter
    (:func:`public_bounds`) for the ``(N, d)`` float matrix ``values``.

    * A table ``{column: (low, high)}``: its pairs; a column it leaves out is
      a :class:`~privclust.DataError` naming it, ``who`` and the parameter
      ``key``, with the fix.
    * ``"data"``: each column's minimum and maximum, recorded as the leak
      ``"bounds"`` (``context.record_leak``) with ``statement`` (default: the
      bounds were released exactly, outside the DP guarantee) and
      ``alternative`` (default: give public bounds); with ``details`` the
      bounds themselves go in the entry's details. The leak is refused unless
      the recipe names it in ``[privacy] allow_leaks`` (the secure default,
      checked at compile time by :func:`declared_leaks` and at run time by
      the context). A constant column gets ``[v, v + 1]``
      (``constant="unit"``) or a range of 2^-40 of its magnitude, at least
      1, on the side that stays finite (``constant="tiny"``).

    One helper for every component that reads such a parameter, so that
    they resolve and record bounds alike."""
    columns = [str(c) for c in columns]
    if isinstance(bounds, str) and bounds == "data":
        low, high = values.min(axis=0), values.max(axis=0)
        if constant == "tiny":
            pad = np.maximum(1.0, np.abs(low) * 2.0**-40)
            flat = high <= low
            up = flat & (low <= 0)
            down = flat & (low > 0)
            with np.errstate(over="ignore"):  # the side not taken may overflow
                high = np.where(up, low + pad, high)
                low = np.where(down, low - pad, low)
        else:
            high = np.where(high > low, high, low + 1.0)
        text = statement or (f"the bounds of {', '.join(columns)} were taken from the data (their minimum and "
                             "maximum are released exactly, outside the differential-privacy guarantee).")
        extra = {"details": {"bounds": {c: [float(a), float(b)] for c, a, b in zip(columns, low, high, strict=True)}}
                 } if details else {}
        context.record_leak("bounds", text, alternative=alternative or "give public bounds from domain knowledge: "
                            "bounds = { column = [low, high] }", **extra)
        return low, high
    table = bounds if isinstance(bounds, Mapping) else {}
    missing = [c for c in columns if c not in table]
    if missing:
        raise DataError(f"{who}: no public {key} for column(s) {', '.join(missing)}; add them to '{key}' "
                        f"(e.g. {key} = {{ {missing[0]} = [low, high] }})")
    low = np.array([table[c][0] for c in columns], dtype=float)
    high = np.array([table[c][1] for c in columns], dtype=float)
    return low, high


@attrs.frozen
class DataLeak:
    """A parameter a component would take from the data (outside its DP guarantee).

    :ivar name: the leak name a recipe opts in to (``[privacy] allow_leaks``),
        one of :data:`privclust.KNOWN_LEAKS` or of the component's
        ``leak_names``.
    :ivar parameter: the recipe key at fault (e.g. ``"dc_percent"``).
    :ivar reason: what is taken from the data.
    :ivar fix: the public (or DP, charged) alternative.
    """

    name: str
    parameter: str
    reason: str
    fix: str = ""


def declared_leaks(component: Any, where: str = "") -> list[tuple[str, DataLeak]]:
    """The data-derived parameters a component (and its nested components)
    will use, as ``(location, leak)`` pairs, read from its parameters before
    any data are seen: a ``bounds`` field (:func:`public_bounds`) set to
    ``"data"``, and whatever the component's own ``data_leaks()`` method
    returns (e.g. a percentage rule for d_c)."""
    if not attrs.has(type(component)):
        return []
    prefix = f"{where}." if where else ""
    name = _owner(component)
    found: list[tuple[str, DataLeak]] = []
    own = getattr(component, "data_leaks", None)
    if callable(own):
        found += [(f"{prefix}{leak.parameter}", leak) for leak in own() or ()]
    for f in attrs.fields(type(component)):
        value = getattr(component, f.name, None)
        if f.metadata.get(META_LEAK) == "bounds" and isinstance(value, str) and value == "data":
            key = param_name(f.name)
            if not any(loc == f"{prefix}{key}" for loc, _ in found):
                found.append((f"{prefix}{key}", DataLeak(
                    "bounds", key, f"{name} would take the bounds from the data (their minimum and maximum)",
                    "give public bounds from domain knowledge: bounds = { column = [low, high] }")))
        elif field_kind(f) is not None and value is not None:
            found += declared_leaks(value, f"{prefix}{param_name(f.name)}")
    return found


def leak_problems(component: Any, budget: Any, where: str = "") -> list[Any]:
    """One :class:`~privclust.errors.Problem` per data-derived parameter of
    ``component`` that ``budget`` (a :class:`~privclust.Budget`) does not
    allow by name; the compile-time half of the secure defaults."""
    problems = []
    for location, leak in declared_leaks(component, where):
        if budget.allows(leak.name):
            continue
        fixes = [leak.fix] if leak.fix else []
        fixes.append(f"or accept a release without a differential-privacy guarantee: [privacy] allow_leaks = "
                     f"[\"{leak.name}\"]")
        problems.append(Problem(location, f"refused: {leak.reason}, outside the differential-privacy guarantee",
                                "; ".join(fixes)))
    return problems


def nested(kind: str, *, default: Any = None, doc: str = "") -> Any:
    """A field holding another component of the given kind.

    In a recipe it is an inline table ``{ use = "fcm", m = 1.5 }`` or just a
    name ``"fcm"``. The value may be a component instance, a
    :class:`~privclust.ComponentSpec` (resolved through the registry when the
    recipe is compiled, or through ``context.component(...)`` at run time) or
    ``None``. A string default names the registered component used when the
    recipe gives none, so a swapped built-in is honoured.
    """
    def validate(inst: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None or isinstance(value, ComponentSpec):
            return
        if not (attrs.has(type(value)) and isinstance(getattr(type(value), "name", None), str)):
            raise ParameterError(
                f"The {param_name(attribute.name)!r} parameter of {_owner(inst)} must be a "
                f"{kind[:-1].replace('_', ' ')} (a name, an inline table with 'use', or a component); "
                f"got {value!r}."
            )

    default_value = to_component_value(default) if isinstance(default, str | Mapping) else default
    metadata = {META_DOC: doc, META_KIND: kind, META_TYPE: None}
    return attrs.field(
        default=default_value,
        converter=to_component_value,
        validator=validate,
        metadata=metadata,
        kw_only=True,
    )


# -- renamed parameters ------------------------------------------------------------------------------------------
#
# One mechanism for recipes and Python: a component lists the parameters it renamed in its ``renamed_params``
# class attribute ({old recipe key: new recipe key}, a capability declared in privclust.components). A recipe that
# writes an old key gets a Problem with :func:`renamed_problem` (privclust.building); a Python constructor given an
# old keyword (the component's class, or any subclass of it, a third party's included) raises
# :class:`RenamedParameterError` with the same message, once the registry has loaded the class
# (:func:`answer_renames`).


class RenamedParameterError(ParameterError, TypeError):
    """A component was given a parameter under the name it had before a
    rename. A :class:`~privclust.ParameterError` (the message names the new
    name), and a :class:`TypeError` as Python's own unexpected-keyword error
    was, so code that caught that keeps working."""


def renamed_to(cls: type, key: str) -> str | None:
    """The new recipe key of ``key`` (a recipe key, or a Python keyword with
    its trailing underscore) when ``cls`` lists it in its ``renamed_params``,
    else ``None``."""
    renamed = getattr(cls, "renamed_params", None)
    if not isinstance(renamed, Mapping):
        return None
    new = renamed.get(key, renamed.get(param_name(key)))
    return new if isinstance(new, str) else None


def renamed_message(use: str, key: str, new: str) -> str:
    """What recipes and constructors say of an old name: ``"fcm: parameter 'c'
    was renamed 'n_clusters'"``."""
    return f"{use}: parameter {key!r} was renamed {new!r}"


def _keywords(cls: type) -> frozenset[str] | None:
    """The keywords ``cls(...)`` names in its ``__init__`` (a ``**kwargs``
    passes the others on, to the class it extends), or ``None`` when its
    signature cannot be read (then the constructor decides)."""
    init = cls.__init__  # type: ignore[misc]
    cached = _KEYWORDS.get(cls)
    if cached is not None and cached[0] is init:
        return cached[1]
    try:
        parameters = list(inspect.signature(init).parameters.values())[1:]
    except (TypeError, ValueError):
        names = None
    else:
        names = frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD)
    _KEYWORDS[cls] = (init, names)
    return names


_KEYWORDS: dict[type, tuple[Any, frozenset[str] | None]] = {}


def renamed_problem(use: str, key: str, new: str, field: attrs.Attribute | None, where: str = "", *,
                    keyword: bool = False) -> Problem:
    """The one "renamed" message, whatever was given the old name: a
    recipe, :meth:`~privclust.Registry.create`, the CLI, a scikit-learn
    estimator (its constructor and ``set_params``, for its own parameter or
    one in a nested component's spec) and a Python constructor.
    ``Problem("clusterer.c", "fcm: parameter 'c' was renamed 'n_clusters'",
    "write n_clusters instead (clusterer.n_clusters); n_clusters: <doc>")``.

    ``where``: the old key's place as the caller wrote it, ending with
    ``key`` (``steps[0].clusterer.c`` in a recipe, ``clusterer.c`` in a table
    given to Registry.create or to an estimator, ``clusterer__c`` in
    ``set_params``, ``c`` for a component's own parameter); the new key's
    place is ``where`` with ``key`` replaced, named after the new key when it
    is more than the key. Only that location differs from one surface to the
    other. ``keyword``: a Python constructor's own keyword (no place; write
    ``n_clusters=...``)."""
    doc = field_doc(field) if field is not None else ""
    if keyword:
        fix = f"write {(field.alias or field.name) if field is not None else new}=... instead"
    else:
        new_where = where[: len(where) - len(key)] + new if where.endswith(key) else new
        fix = f"write {new} instead" + ("" if new_where == new else f" ({new_where})")
    return Problem(where, renamed_message(use, key, new), fix + (f"; {new}: {doc}" if doc else ""))


def renamed_problems(cls: type, keys: Iterable[str], prefix: str = "", *, keyword: bool = False) -> list[Problem]:
    """:func:`renamed_problem` for each of ``keys`` (given to ``cls``, at
    ``prefix + key``) that is an old name ``cls`` does not take (a subclass
    may take it again); with ``keyword``, a Python constructor's keywords
    (no place named)."""
    taken = _keywords(cls)
    old = [] if taken is None else [key for key in keys if key not in taken and renamed_to(cls, key)]
    use = getattr(cls, "name", None) or cls.__name__
    fields = {param_name(f.name): f for f in getattr(cls, "__attrs_attrs__", ()) if f.init}
    problems = []
    for key in old:
        new = renamed_to(cls, key)
        assert new is not None
        problems.append(renamed_problem(use, key, new, fields.get(new), "" if keyword else f"{prefix}{key}",
                                        keyword=keyword))
    return problems


def check_renamed(cls: type, params: Mapping[str, Any]) -> None:
    """Raise :class:`RenamedParameterError` when ``params`` (keyword
    arguments for ``cls``) give a parameter under its old name and ``cls``
    does not take that name (a subclass may take it again): the Python
    constructor's message (:func:`renamed_problem` with ``keyword``)."""
    problems = renamed_problems(cls, params, keyword=True)
    if problems:
        raise RenamedParameterError("; ".join(map(str, problems)) + ". Renamed parameters give this message for at "
                                    "least one minor version (CHANGELOG.md).")


def answer_renames(cls: type) -> None:
    """Make ``cls(...)`` and its subclasses' constructors answer an old
    parameter name with :func:`check_renamed`'s message instead of Python's
    bare ``TypeError`` (the registry calls this for every component class it
    loads). A ``__new__`` that checks the keywords, then creates the
    instance as before: attrs generates each subclass's ``__init__``, but a
    subclass inherits ``__new__``. Idempotent; nothing is installed on a
    class that lists no renamed parameter (or inherits none)."""
    if not getattr(cls, "renamed_params", None) or getattr(cls.__new__, "_answers_renames", False):
        return
    original = cls.__new__

    def __new__(klass: type, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            check_renamed(klass, kwargs)
        if original is object.__new__:
            return object.__new__(klass)
        return original(klass, *args, **kwargs)

    __new__._answers_renames = True  # type: ignore[attr-defined]
    cls.__new__ = staticmethod(__new__)  # type: ignore[assignment]
