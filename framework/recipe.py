"""Protection recipes: data, never code.

A recipe is an ordered list of steps, each naming a component with
``use = "<name>"``, its parameters, the columns it applies to and nested
components as inline tables; global edit constraints; an optional privacy
budget; and evaluators. It comes from TOML (:meth:`Recipe.from_toml`), a dict
(:meth:`Recipe.from_dict`) or these attrs objects, and :meth:`Recipe.to_dict`
round-trips.

Structural problems (wrong types, unknown keys, bad budget) are found when the
recipe is built and reported all at once; problems that need the installed
plugins (unknown component names, misspelt parameters) are found when it is
compiled against a registry (:func:`privclust.compile`).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .errors import Problem, RecipeError
from .specs import ComponentSpec, freeze, thaw, to_component_value
from .specs import FrozenMap as FrozenMap  # re-exported: pickles of a Release name privclust.recipe.FrozenMap
from .toml_text import bracket_depth, dumps_toml

__all__ = [
    "Budget",
    "ComponentSpec",
    "KNOWN_LEAKS",
    "EvaluateSpec",
    "Recipe",
    "Roles",
    "Step",
    "WITHIN_KEYS",
    "to_component_value",
    "within_columns",
    "dumps_toml",
]

#: Keys of a step that belong to the step, not to its component.
STEP_KEYS = ("use", "id", "columns", "output", "within")
#: The ``within`` value that means the ``[roles] keys``.
WITHIN_KEYS = "keys"
#: Top-level keys of a recipe.
RECIPE_KEYS = ("name", "description", "roles", "privacy", "constraints", "steps", "evaluate")
#: Keys of the ``[privacy]`` table.
PRIVACY_KEYS = ("epsilon", "delta", "allow_leaks")
#: The variable roles of the ``[roles]`` table (sdcMicro's ``createSdcObj``
#: roles), and its one option.
ROLE_NAMES = ("ids", "weight", "strata", "keys")
ROLES_KEYS = (*ROLE_NAMES, "numeric", "small_strata")
#: What the runner does with a stratum smaller than a step needs.
SMALL_STRATA = ("refuse", "merge")
#: The names a recipe may list in ``[privacy] allow_leaks`` to accept a
#: parameter taken from the data (outside the differential-privacy guarantee):
#: ``bounds`` (``bounds = "data"``), ``scale`` (min-max scaling by the data's
#: range), ``dc_percent`` (d_c as a quantile of the pairwise distances),
#: ``radius_percent`` (the merge radius as such a quantile). A component may
#: declare more names in its ``leak_names`` class attribute.
KNOWN_LEAKS = ("bounds", "scale", "dc_percent", "radius_percent")
#: Default name of the label column a clusterer step releases.
DEFAULT_LABEL_COLUMN = "cluster"
#: The deepest nesting of tables and arrays a recipe may have (a step's
#: nested component inside a nested component... is a few levels; the limit
#: keeps every recursive walk of a recipe far from Python's recursion limit).
MAX_RECIPE_DEPTH = 32
#: The largest recipe file read, in bytes.
MAX_RECIPE_BYTES = 1_000_000

_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _close(word: str, options: Iterable[str]) -> str:
    matches = difflib.get_close_matches(word, list(options), n=2, cutoff=0.6)
    if matches:
        return "did you mean " + " or ".join(repr(m) for m in matches) + "?"
    return "allowed: " + ", ".join(options)


def _depth(value: Any, limit: int = MAX_RECIPE_DEPTH) -> tuple[int, str]:
    """The nesting depth of plain data (tables and arrays), walked without
    recursion and stopped past ``limit``; with the path of the deepest item."""
    deepest, where = 0, ""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if depth > deepest:
            deepest, where = depth, path
            if deepest > limit:
                break
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(item))
    return deepest, where


def _check_epsilon(inst: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise RecipeError([Problem("privacy.epsilon", f"must be a number > 0; got {value!r}", "e.g. epsilon = 1.0")])


def _check_delta(inst: Any, attribute: attrs.Attribute, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 <= value < 1):
        raise RecipeError(
            [Problem("privacy.delta", f"must be a number in [0, 1); got {value!r}", "use 0 for pure epsilon-DP")]
        )


def _as_names(value: Any) -> Any:
    """A name or a list of names as a tuple (leak names, role columns);
    anything else is left for the validator to refuse."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


_LEAK_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _check_leaks(inst: Any, attribute: attrs.Attribute, value: Any) -> None:
    """The form of ``allow_leaks``; names unknown to the built-ins must be
    declared by an installed component (checked when the recipe is compiled,
    see :func:`privclust.known_leak_names`)."""
    known = ", ".join(repr(k) for k in KNOWN_LEAKS)
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        raise RecipeError([Problem("privacy.allow_leaks", f"must be a list of leak names; got {value!r}",
                                   f"e.g. allow_leaks = [\"bounds\"]; built-in leak names: {known}")])
    bad = [v for v in value if not _LEAK_NAME_RE.match(v)]
    if bad:
        raise RecipeError([Problem("privacy.allow_leaks", f"{', '.join(repr(b) for b in bad)} is not a leak name",
                                   f"built-in leak names: {known}")])


def _to_float(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@attrs.frozen(kw_only=True)
class Budget:
    """A privacy budget: total epsilon and delta a run may spend.

    ``epsilon=None`` means no budget was declared: spends are recorded in the
    ledger but not limited.

    ``allow_leaks`` names the data-derived parameters the recipe accepts (see
    :data:`KNOWN_LEAKS`); any other one is refused, when the recipe is
    compiled and again when a component records the leak
    (:meth:`PrivacyContext.record_leak`). A release with a leak carries no
    differential-privacy guarantee.
    """

    epsilon: float | None = attrs.field(default=None, converter=_to_float, validator=_check_epsilon)
    delta: float = attrs.field(default=0.0, converter=_to_float, validator=_check_delta)
    allow_leaks: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_leaks)

    def allows(self, leak: str) -> bool:
        """Whether the recipe opted in to the leak named ``leak``."""
        return leak in self.allow_leaks

    @property
    def limited(self) -> bool:
        return self.epsilon is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.epsilon is not None:
            out["epsilon"] = self.epsilon
        if self.delta:
            out["delta"] = self.delta
        if self.allow_leaks:
            out["allow_leaks"] = list(self.allow_leaks)
        return out


def _columns(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _within(value: Any) -> str | tuple[str, ...] | None:
    """A step's ``within``: ``"keys"`` (the keys role) or column names."""
    if value is None or value == WITHIN_KEYS:
        return value
    within = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, Sequence) else None
    if not within or not all(isinstance(c, str) and c for c in within):
        raise RecipeError([Problem("within", f"must be \"keys\" or a list of column names; got {value!r}",
                                   'e.g. within = "keys" or within = ["region", "sex"]')])
    dup = sorted({c for c in within if within.count(c) > 1})
    if dup:
        raise RecipeError([Problem("within", f"names {', '.join(dup)} more than once", "name each column once")])
    return within


def within_columns(step: Step, roles: Roles) -> tuple[str, ...]:
    """The columns of a step's ``within`` (``"keys"``: the keys role); ``()`` without it."""
    if step.within is None:
        return ()
    return tuple(roles.keys) if step.within == WITHIN_KEYS else tuple(step.within)


def _evaluation_column_problems(columns: list[Any], where: str) -> list[Problem]:
    """An evaluation's ``columns``, checked as a step's are: not empty, names (strings), each once."""
    if not columns:
        return [Problem(where, "is empty", "list at least one column or leave it out")]
    bad = [c for c in columns if not isinstance(c, str)]
    if bad:
        return [Problem(where, f"must be column names (strings); got {bad!r}")]
    dup = sorted({c for c in columns if columns.count(c) > 1})
    return [Problem(where, f"names {', '.join(dup)} more than once")] if dup else []


def _check_role(inst: Any, attribute: attrs.Attribute, value: Any) -> None:
    where = f"roles.{attribute.name}"
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise RecipeError([Problem(where, f"must be a column name or a list of column names; got {value!r}",
                                   f'e.g. {attribute.name} = ["region"]')])
    dup = sorted({v for v in value if value.count(v) > 1})
    if dup:
        raise RecipeError([Problem(where, f"names {', '.join(map(repr, dup))} more than once")])
    if attribute.name == "weight" and len(value) > 1:
        raise RecipeError([Problem(where, f"names {len(value)} columns; a file has one sampling-weight column",
                                   'e.g. weight = "sampling_weight"')])


def _check_small_strata(inst: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value not in SMALL_STRATA:
        raise RecipeError([Problem("roles.small_strata", f"must be one of {', '.join(map(repr, SMALL_STRATA))}; "
                                   f"got {value!r}", 'small_strata = "merge" joins a stratum smaller than a step '
                                   "needs to its neighbour (in sorted order)")])


@attrs.frozen(kw_only=True)
class Roles:
    """What each special column of the file is (sdcMicro's roles).

    Role columns are never protected by default: a step without ``columns``
    works on the numeric columns that have no role, and every role column is
    released as it is in the data unless a step names it (only ``ids`` and
    ``weight`` may be named by a step: ``strata`` must stay public and
    ``keys`` are categorical).

    :ivar ids: identifier columns (household, person): released unchanged.
    :ivar weight: the sampling-weight column: weighted information-loss and
        risk figures use it by default.
    :ivar strata: public columns whose combinations split the file into
        strata; every step runs within each stratum alone, and the strata
        compose in parallel in the privacy accounting.
    :ivar keys: the categorical quasi-identifiers: the key-variable risk
        evaluators use them by default.
    :ivar numeric: the numeric variables a step without ``columns`` works on
        (sdcMicro's ``numVars``); without it, the numeric columns without a
        role that do not look like codes (see ``docs/roles.md``). Not a role of
        its own: these are the columns the steps change.
    :ivar small_strata: ``"refuse"`` (default) a stratum smaller than a step
        needs, naming it; or ``"merge"`` it with its neighbour in sorted order.
    """

    ids: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_role)
    weight: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_role)
    strata: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_role)
    keys: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_role)
    numeric: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_role)
    small_strata: str = attrs.field(default="refuse", validator=_check_small_strata)

    def __attrs_post_init__(self) -> None:
        seen: dict[str, str] = {}
        problems = []
        for role in ROLE_NAMES:
            for column in getattr(self, role):
                if column in seen:
                    problems.append(Problem(f"roles.{role}", f"the column {column!r} also has the role "
                                            f"{seen[column]!r}; a column has one role", "keep it in one of them"))
                seen.setdefault(column, role)
        for column in self.numeric:
            if column in seen:
                problems.append(Problem("roles.numeric", f"names {column!r}, which has the role {seen[column]!r}; "
                                        "the numeric variables are the columns the steps change, and a role "
                                        "column is released unchanged", "leave it out of one of them"))
        if problems:
            raise RecipeError(problems)

    @property
    def columns(self) -> dict[str, str]:
        """Every role column and its role, in the order of :data:`ROLE_NAMES`."""
        return {c: role for role in ROLE_NAMES for c in getattr(self, role)}

    @property
    def weight_column(self) -> str | None:
        """The sampling-weight column, or ``None``."""
        return self.weight[0] if self.weight else None

    def __bool__(self) -> bool:
        return bool(self.columns)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Roles:
        """Roles from a ``[roles]`` table; every problem is raised together."""
        if not isinstance(data, Mapping):
            raise RecipeError([Problem("roles", "must be a table of roles", '[roles] strata = "region"')])
        problems = [Problem(f"roles.{key}", "unknown role", _close(str(key), ROLES_KEYS))
                    for key in data if key not in ROLES_KEYS]
        kwargs = {}
        for key in ROLES_KEYS:
            if key in data:
                try:
                    cls(**{key: data[key]})
                    kwargs[key] = data[key]
                except RecipeError as err:
                    problems.extend(err.problems)
        if problems:
            raise RecipeError(problems)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for role in ROLE_NAMES:
            value = getattr(self, role)
            if value:
                out[role] = value[0] if role == "weight" else list(value)
        if self.numeric:
            out["numeric"] = list(self.numeric)
        if self.small_strata != "refuse":
            out["small_strata"] = self.small_strata
        return out


@attrs.frozen(kw_only=True)
class Step:
    """One step of a recipe: a component, its parameters and its columns.

    :ivar use: the registered component name (a clusterer, masker or noise
        mechanism).
    :ivar params: the component's parameters; nested components as
        ``{"use": ..., ...}`` tables or :class:`ComponentSpec`.
    :ivar columns: the columns the step applies to; ``None`` means every
        numeric column of the input.
    :ivar id: the step's name in sweeps and reports (default: the component
        name, suffixed ``-2``, ``-3``... when it repeats).
    :ivar output: for a clusterer step, the name of the label column it
        releases (default ``cluster``).
    :ivar within: run the step once per group of records with identical
        values of these columns, as the earlier steps released them (a
        missing value a value of its own), within each stratum; ``"keys"``
        means the ``[roles] keys``. ``None``: once per stratum.
    """

    use: str
    params: Mapping[str, Any] = attrs.field(factory=dict, converter=freeze)
    columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    id: str | None = None
    output: str | None = None
    within: str | tuple[str, ...] | None = attrs.field(default=None, converter=_within)

    @classmethod
    def of(cls, component: Any, *, columns: Sequence[str] | None = None, id: str | None = None,
           output: str | None = None, within: str | Sequence[str] | None = None) -> Step:
        """A step from a component instance (every parameter is copied)."""
        spec = ComponentSpec.of(component)
        return cls(use=spec.use, params=spec.params, columns=columns, id=id, output=output, within=within)

    @property
    def spec(self) -> ComponentSpec:
        return ComponentSpec(self.use, self.params)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"use": self.use}
        if self.id is not None:
            out["id"] = self.id
        if self.columns is not None:
            out["columns"] = list(self.columns)
        if self.output is not None:
            out["output"] = self.output
        if self.within is not None:
            out["within"] = self.within if isinstance(self.within, str) else list(self.within)
        out.update({k: thaw(v) for k, v in self.params.items()})
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Step) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))


@attrs.frozen(kw_only=True)
class EvaluateSpec:
    """An evaluator entry: the evaluator, its parameters and its columns."""

    use: str
    params: Mapping[str, Any] = attrs.field(factory=dict, converter=freeze)
    columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)

    @property
    def spec(self) -> ComponentSpec:
        return ComponentSpec(self.use, self.params)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"use": self.use}
        if self.columns is not None:
            out["columns"] = list(self.columns)
        out.update({k: thaw(v) for k, v in self.params.items()})
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EvaluateSpec) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))


def _as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    """A recipe's list of steps, constraints or evaluations, frozen as a tuple."""
    return tuple(value)


def _default_ids(steps: Sequence[Step]) -> tuple[str, ...]:
    explicit = {s.id for s in steps if s.id is not None}
    counts: dict[str, int] = {}
    ids = []
    for s in steps:
        if s.id is not None:
            ids.append(s.id)
            continue
        base = s.use
        counts[base] = counts.get(base, 0) + 1
        candidate = base if counts[base] == 1 else f"{base}-{counts[base]}"
        while candidate in explicit or candidate in ids:
            counts[base] += 1
            candidate = f"{base}-{counts[base]}"
        ids.append(candidate)
    return tuple(ids)


def _structural_problems(steps: Sequence[Step], indices: Sequence[int] | None = None) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, s in zip(indices if indices is not None else range(len(steps)), steps, strict=True):
        where = f"steps[{i}]"
        if not isinstance(s.use, str) or not s.use:
            problems.append(Problem(where, "'use' must name a component", 'e.g. use = "laplace"'))
        if s.id is not None:
            if not isinstance(s.id, str) or not _ID_RE.match(s.id):
                problems.append(
                    Problem(f"{where}.id", f"must be a name of letters, digits, '_' or '-'; got {s.id!r}",
                            'e.g. id = "mask"')
                )
            elif s.id in seen:
                problems.append(Problem(f"{where}.id", f"{s.id!r} is already the id of steps[{seen[s.id]}]",
                                        "give each step its own id"))
            else:
                seen[s.id] = i
        if s.columns is not None:
            if len(s.columns) == 0:
                problems.append(Problem(f"{where}.columns", "is empty", "list at least one column or leave it out"))
            bad = [c for c in s.columns if not isinstance(c, str)]
            if bad:
                problems.append(Problem(f"{where}.columns", f"must be column names (strings); got {bad!r}"))
            dup = sorted({c for c in s.columns if isinstance(c, str) and s.columns.count(c) > 1})
            if dup:
                problems.append(Problem(f"{where}.columns", f"names {', '.join(dup)} more than once"))
        if s.output is not None and (not isinstance(s.output, str) or not s.output):
            problems.append(Problem(f"{where}.output", f"must be a column name; got {s.output!r}"))
    return problems


def step_role_problems(roles: Roles, steps: Sequence[Step], indices: Sequence[int] | None = None,
                   key_maskers: Sequence[bool] | None = None) -> list[Problem]:
    """Steps that name a column a step may not change: a stratum (public by
    declaration) or a categorical key (not numeric data for a numeric step).

    ``key_maskers``: per step, whether its component declares the
    ``key_masker`` capability (it treats categorical keys); only those steps
    may name keys, and they must name their columns. ``None`` (a recipe
    built before its components are resolved): keys are not judged here; the
    runner's ``compile`` judges them with the components in hand."""
    problems = []
    flags = list(key_maskers) if key_maskers is not None else [None] * len(steps)
    for i, s, masker in zip(indices if indices is not None else range(len(steps)), steps, flags, strict=True):
        if masker and s.columns is None:
            problems.append(Problem(f"steps[{i}].columns", f"{s.use!r} treats categorical keys and needs its "
                                    "columns named", f"columns = {list(roles.keys) or ['the key columns']!r}"))
        if s.within == WITHIN_KEYS and not roles.keys:
            problems.append(Problem(f"steps[{i}].within", "is \"keys\" but the recipe declares no [roles] keys",
                                    'declare the keys (e.g. [roles] keys = ["sex", "region"]) or list the columns'))
        inside = [c for c in within_columns(s, roles) if c in (s.columns or ())]
        if inside:
            problems.append(Problem(f"steps[{i}].within", f"names the step's own column(s) {', '.join(inside)}: "
                                    "the groups are values the earlier steps released, which this step then changes",
                                    "leave them out of within (or out of the step's columns)"))
        for c in s.columns or ():
            if c in roles.strata:
                problems.append(Problem(f"steps[{i}].columns", f"names the stratum column {c!r}; strata are public "
                                        "and released unchanged", "leave it out of the step's columns"))
            elif c in roles.keys and masker is False:
                problems.append(Problem(f"steps[{i}].columns", f"names the categorical key {c!r}; a numeric step "
                                        "cannot protect a categorical key",
                                        "leave it out of the step's columns, or take it out of [roles] keys if it "
                                        "is a numeric variable (the key maskers local-suppression and pram treat "
                                        "keys)"))
    return problems


def _assessment_problems(steps: Sequence[Step], evaluate: Sequence[EvaluateSpec], roles: Roles) -> list[Problem]:
    """A recipe without steps is an assessment of the original file: it needs
    something to measure (evaluators, or declared keys whose risk figures the
    verdict states)."""
    if steps or evaluate or roles.keys:
        return []
    return [Problem("steps", "a recipe needs steps to protect the data, or evaluators or [roles] keys to assess it "
                    "(a recipe without steps is an assessment: it releases the original unchanged)",
                    "add a [[steps]] table, or [[evaluate]] tables / [roles] keys to measure the original's risk")]


@attrs.frozen(kw_only=True)
class Recipe:
    """A protection recipe (see the module docstring)."""

    steps: tuple[Step, ...] = attrs.field(converter=_as_tuple)
    constraints: tuple[ComponentSpec, ...] = attrs.field(default=(), converter=_as_tuple)
    privacy: Budget = attrs.field(factory=Budget)
    evaluate: tuple[EvaluateSpec, ...] = attrs.field(default=(), converter=_as_tuple)
    roles: Roles = attrs.field(factory=Roles)
    name: str | None = None
    description: str | None = None
    #: The folder of the recipe file it was read from (absolute), against which the relative paths of its
    #: ``param(role="path")`` parameters are resolved; ``None`` for a recipe given as a dict or text (the working
    #: directory). Not part of the recipe's data: left out of :meth:`to_dict` and of equality.
    folder: str | None = attrs.field(default=None, eq=False, repr=False)
    step_ids: tuple[str, ...] = attrs.field(init=False)

    @step_ids.default
    def _ids(self) -> tuple[str, ...]:
        return _default_ids(self.steps)

    def __attrs_post_init__(self) -> None:
        problems = _assessment_problems(self.steps, self.evaluate, self.roles)
        problems += _structural_problems(self.steps)
        problems += step_role_problems(self.roles, self.steps)
        if problems:
            raise RecipeError(problems)

    # -- construction ------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None, folder: str | None = None) -> Recipe:
        """Build a recipe from plain data (e.g. parsed TOML); all structural
        problems are raised together in one :class:`RecipeError`. ``folder``:
        the folder relative paths of the recipe are written against (default:
        the working directory)."""
        problems: list[Problem] = []
        if not isinstance(data, Mapping):
            raise RecipeError([Problem("", f"a recipe must be a table; got {type(data).__name__}")], source=source)
        depth, where = _depth(data)
        if depth > MAX_RECIPE_DEPTH:
            raise RecipeError([Problem(where.split("[")[0].split(".")[0] if where else "",
                                       f"nests tables or arrays more than {MAX_RECIPE_DEPTH} levels deep",
                                       "a recipe nests a step's components a few levels at most; flatten it")],
                              source=source)
        for key in data:
            if key not in RECIPE_KEYS:
                problems.append(Problem(str(key), "unknown recipe key", _close(str(key), RECIPE_KEYS)))

        budget = Budget()
        privacy = data.get("privacy", {})
        if not isinstance(privacy, Mapping):
            problems.append(Problem("privacy", "must be a table with epsilon, delta and allow_leaks",
                                    "[privacy] epsilon = 1.0"))
        else:
            for key in privacy:
                if key == "partition_by":
                    problems.append(Problem("privacy.partition_by", "moved: the public columns that split the "
                                            "file are the strata role now",
                                            f'write [roles] strata = {privacy[key]!r} instead' if
                                            isinstance(privacy[key], str) else 'write [roles] strata = "region"'))
                elif key not in PRIVACY_KEYS:
                    problems.append(Problem(f"privacy.{key}", "unknown key", _close(str(key), PRIVACY_KEYS)))
            ok = True
            for kwargs in ({"epsilon": privacy.get("epsilon")}, {"delta": privacy.get("delta", 0.0)},
                           {"allow_leaks": privacy.get("allow_leaks", ())}):
                try:
                    Budget(**kwargs)
                except RecipeError as err:
                    problems.extend(err.problems)
                    ok = False
            if ok:
                budget = Budget(epsilon=privacy.get("epsilon"), delta=privacy.get("delta", 0.0),
                                allow_leaks=privacy.get("allow_leaks", ()))

        roles = Roles()
        try:
            roles = Roles.from_dict(data.get("roles", {}))
        except RecipeError as err:
            problems.extend(err.problems)

        steps: list[Step] = []
        positions: list[int] = []
        raw_steps = data.get("steps")
        if raw_steps is None:  # an assessment of the original file (checked once the evaluators are read)
            raw_steps = []
        elif not isinstance(raw_steps, Sequence) or isinstance(raw_steps, str):
            problems.append(Problem("steps", "must be a list of tables", "write each step as [[steps]]"))
            raw_steps = []
        for i, raw in enumerate(raw_steps):
            where = f"steps[{i}]"
            if not isinstance(raw, Mapping):
                problems.append(Problem(where, f"must be a table; got {raw!r}"))
                continue
            use = raw.get("use")
            if not isinstance(use, str) or not use:
                problems.append(Problem(where, "has no 'use' naming its component", 'e.g. use = "laplace"'))
                continue
            columns = raw.get("columns")
            if isinstance(columns, str):
                columns = [columns]
            if columns is not None and not isinstance(columns, Sequence):
                problems.append(Problem(f"{where}.columns", f"must be a list of column names; got {columns!r}",
                                        'e.g. columns = ["age", "income"]'))
                columns = None
            try:
                params = {k: v for k, v in raw.items() if k not in STEP_KEYS}
                steps.append(Step(use=use, params=params, columns=columns, id=raw.get("id"),
                                  output=raw.get("output"), within=raw.get("within")))
                positions.append(i)
            except RecipeError as err:
                problems.extend(Problem(f"{where}.{p.where}".rstrip("."), p.message, p.fix) for p in err.problems)

        constraints: list[ComponentSpec] = []
        raw_constraints = data.get("constraints", [])
        if not isinstance(raw_constraints, Sequence) or isinstance(raw_constraints, str):
            problems.append(Problem("constraints", "must be a list of tables", "write each as [[constraints]]"))
            raw_constraints = []
        for i, raw in enumerate(raw_constraints):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("use"), str):
                problems.append(Problem(f"constraints[{i}]", "must be a table with 'use'",
                                        'e.g. use = "linear", rules = ["total = a + b"]'))
                continue
            try:
                constraints.append(ComponentSpec.from_mapping(raw))
            except RecipeError as err:
                problems.extend(Problem(f"constraints[{i}]", p.message, p.fix) for p in err.problems)

        evaluate: list[EvaluateSpec] = []
        raw_eval = data.get("evaluate", [])
        if isinstance(raw_eval, str | Mapping) or not isinstance(raw_eval, Sequence):
            raw_eval = [raw_eval]
        for i, raw in enumerate(raw_eval):
            if isinstance(raw, str):
                raw = {"use": raw}
            if not isinstance(raw, Mapping) or not isinstance(raw.get("use"), str):
                problems.append(Problem(f"evaluate[{i}]", "must be an evaluator name or a table with 'use'",
                                        'e.g. use = "sse-sst"'))
                continue
            columns = raw.get("columns")
            if isinstance(columns, str):
                columns = [columns]
            if columns is not None and not isinstance(columns, Sequence):
                problems.append(Problem(f"evaluate[{i}].columns", f"must be a list of column names; got {columns!r}"))
                columns = None
            if columns is not None:  # as a step's columns (a number crashed check and run with a traceback)
                problems.extend(_evaluation_column_problems(list(columns), f"evaluate[{i}].columns"))
            evaluate.append(EvaluateSpec(use=raw["use"],
                                         params={k: v for k, v in raw.items() if k not in ("use", "columns")},
                                         columns=columns))

        for key in ("name", "description"):
            if key in data and not isinstance(data[key], str):
                problems.append(Problem(key, f"must be a string; got {data[key]!r}"))

        if not raw_steps and not problems:
            problems += _assessment_problems(steps, evaluate, roles)
        if steps:
            problems += _structural_problems(steps, positions)
            problems += step_role_problems(roles, steps, positions)
        if problems:
            raise RecipeError(problems, source=source)
        return cls(
            steps=steps,
            constraints=constraints,
            privacy=budget,
            evaluate=evaluate,
            roles=roles,
            name=data.get("name"),
            description=data.get("description"),
            folder=folder,
        )

    @classmethod
    def from_toml(cls, text_or_path: str | Path) -> Recipe:
        """Read a recipe from a TOML file (a :class:`~pathlib.Path` or a path
        string ending in ``.toml``) or from TOML text. A file's relative paths
        (the parameters declared ``param(role="path")``, such as ``recode``'s
        hierarchy files) are relative to the file's folder; a text's to the
        working directory."""
        source: str | None = None
        folder: str | None = None
        if isinstance(text_or_path, Path) or (
            isinstance(text_or_path, str) and "\n" not in text_or_path and text_or_path.endswith(".toml")
        ):
            path = Path(text_or_path)
            source = str(path)
            folder = os.path.dirname(os.path.abspath(path.expanduser()))
            try:
                if path.is_dir():
                    raise RecipeError([Problem("", f"{path} is a folder, not a recipe file")], source=source)
                if path.stat().st_size > MAX_RECIPE_BYTES:
                    raise RecipeError([Problem("", f"is larger than {MAX_RECIPE_BYTES:,} bytes",
                                               "a recipe is a short TOML file; check the path")], source=source)
                raw = path.read_bytes()
            except FileNotFoundError:
                raise RecipeError([Problem("", f"no recipe file at {path}", "check the path")], source=source) from None
            except OSError as err:
                raise RecipeError([Problem("", f"cannot read {path}: {err.strerror}")], source=source) from err
            try:
                text = raw.decode("utf-8-sig")  # a byte-order mark some editors write is accepted
            except UnicodeDecodeError as err:
                line = raw[:err.start].count(b"\n") + 1
                raise RecipeError([Problem("", f"is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line})",
                                           "save the recipe as UTF-8, as TOML requires")], source=source) from None
        else:
            text = str(text_or_path)
        if len(text) > MAX_RECIPE_BYTES:
            raise RecipeError([Problem("", f"is longer than {MAX_RECIPE_BYTES:,} characters",
                                       "a recipe is a short TOML text")], source=source)
        depth = bracket_depth(text)
        if depth > MAX_RECIPE_DEPTH:
            raise RecipeError([Problem("", f"nests arrays or inline tables {depth} levels deep, more than the limit "
                                           f"of {MAX_RECIPE_DEPTH}", "a recipe nests a step's components a few "
                                           "levels at most; flatten it")], source=source)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise RecipeError(
                [Problem("", f"is not valid TOML: {err}", "check the quoting and brackets on that line")],
                source=source,
            ) from err
        except RecursionError:  # pragma: no cover - the bracket count above stops this first
            raise RecipeError([Problem("", "nests arrays or tables too deeply", "flatten it")], source=source) from None
        return cls.from_dict(data, source=source, folder=folder)

    @classmethod
    def load(cls, obj: Recipe | Mapping[str, Any] | str | Path) -> Recipe:
        """Accept a Recipe, a dict, a TOML path or TOML text."""
        if isinstance(obj, Recipe):
            return obj
        if isinstance(obj, Mapping):
            return cls.from_dict(obj)
        if isinstance(obj, str | Path):
            return cls.from_toml(obj)
        raise RecipeError([Problem("", f"expected a Recipe, a dict or a TOML file; got {type(obj).__name__}")])

    # -- output ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain data that :meth:`from_dict` turns back into an equal recipe."""
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        roles = self.roles.to_dict()
        if roles:
            out["roles"] = roles
        privacy = self.privacy.to_dict()
        if privacy:
            out["privacy"] = privacy
        if self.constraints:
            out["constraints"] = [c.to_dict() for c in self.constraints]
        if self.steps:
            out["steps"] = [s.to_dict() for s in self.steps]
        if self.evaluate:
            out["evaluate"] = [e.to_dict() for e in self.evaluate]
        return out

    def to_toml(self) -> str:
        """The recipe as TOML text."""
        return dumps_toml(self.to_dict())

    def step_index(self, step_id: str) -> int:
        """The position of the step with this id."""
        try:
            return self.step_ids.index(step_id)
        except ValueError:
            raise RecipeError([Problem("", f"no step has id {step_id!r}", _close(step_id, self.step_ids))]) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recipe) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))
