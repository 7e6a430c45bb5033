"""Building component instances from specs, with every problem at once.

:meth:`privclust.Registry.create` turns a name, a ``{"use": ...}`` table, a
:class:`~privclust.ComponentSpec` or an instance into a component, resolving
nested components through the registry's tables. The work is done here: each
misspelt parameter, bad value and unknown nested component becomes a
:class:`~privclust.Problem`, and they are raised together in one
:class:`~privclust.RecipeError`.

Layer: below :mod:`privclust.registry`, which calls :func:`create` with
itself as the table to look components up in (any object with ``get`` and
``kind_of``), so this module never imports the registry.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from .errors import ParameterError, PrivclustError, Problem, RecipeError, UnknownComponentError
from .params import renamed_problem, renamed_to
from .specs import ComponentSpec, field_doc, field_kind, param_name

__all__ = ["ComponentTables", "create", "renamed_to", "unknown_parameter"]


class ComponentTables(Protocol):
    """What building needs of a registry: a class by kind and name, and the
    kinds a name is registered under."""

    def get(self, kind: str, name: str) -> type: ...

    def kind_of(self, name: str) -> list[str]: ...


def create(registry: ComponentTables, kind: str, value: Any, params: Mapping[str, Any] | None = None,
           where: str = "", head: str | None = None) -> Any:
    """Instantiate a component of ``kind`` from ``value`` (a name, a spec, a
    ``{"use": ...}`` table or an instance) with ``params`` on top, resolving
    nested components through ``registry``.

    :raises RecipeError: with every problem found (``where`` prefixes the
        locations; ``head`` starts the message, ``recipe`` when ``None``).
    """
    problems: list[Problem] = []
    instance = _create(registry, kind, value, params or {}, where, problems)
    if problems:
        raise RecipeError(problems, head=head)
    return instance


def _create(registry: ComponentTables, kind: str, value: Any, extra: Mapping[str, Any], where: str,
            problems: list[Problem]) -> Any:
    if isinstance(value, str):
        spec = ComponentSpec(value, extra)
    elif isinstance(value, ComponentSpec):
        spec = ComponentSpec(value.use, {**value.params, **extra}) if extra else value
    elif isinstance(value, Mapping):
        try:
            spec = ComponentSpec.from_mapping({**value, **extra})
        except RecipeError as err:  # a table without 'use': named where it is, under the caller's head (rt19 F10)
            problems.extend(Problem(where or p.where, p.message, p.fix) for p in err.problems)
            return None
    elif attrs.has(type(value)) and isinstance(getattr(type(value), "name", None), str):
        if extra:
            value = attrs.evolve(value, **_field_kwargs(type(value), extra))
        return _resolve_nested(registry, kind, value, where, problems)
    else:
        problems.append(Problem(where, f"expected a {kind.replace('_', ' ')[:-1]} name or table; got {value!r}"))
        return None
    prefix = f"{where}." if where else ""
    try:
        cls = registry.get(kind, spec.use)
    except UnknownComponentError as err:
        others = [k.replace("_", " ") for k in registry.kind_of(spec.use)]
        fix = f"{spec.use!r} is one of the {', '.join(others)}, not a {kind.replace('_', ' ')[:-1]}" if others else ""
        problems.append(Problem(f"{prefix}use", str(err), fix))
        return None
    fields = {param_name(f.name): f for f in attrs.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    ok = True
    for key, val in spec.params.items():
        field = fields.get(key)
        if field is None:
            problems.append(unknown_parameter(cls, spec.use, key, fields, f"{prefix}{key}"))
            ok = False
            continue
        sub_kind = field_kind(field)
        if sub_kind is not None and val is not None:
            if isinstance(val, str | ComponentSpec | Mapping):
                val = _create(registry, sub_kind, val, {}, f"{prefix}{key}", problems)
                if val is None:
                    ok = False
                    continue
        kwargs[field.name] = val
    bad_values = _probe_fields(cls, kwargs, where)
    problems.extend(bad_values)
    # a required parameter given under its old name was named in the "renamed" problem: not missing too
    given_as_old = {renamed_to(cls, key) for key in spec.params if key not in fields}
    missing = [(key, f) for key, f in fields.items()
               if f.default is attrs.NOTHING and f.name not in kwargs and key not in given_as_old]
    for key, f in missing:
        doc = field_doc(f)
        problems.append(Problem(f"{prefix}{key}", f"{spec.use} needs the parameter {key!r}, which has no default"
                                + (f" ({doc})" if doc else ""), f"set {key} = <value> in its table"))
    if not ok or bad_values or missing:
        return None
    try:
        instance = cls(**kwargs)
    except (ParameterError, RecipeError, PrivclustError) as err:
        problems.append(Problem(where, str(err)))
        return None
    except (TypeError, ValueError) as err:
        problems.append(Problem(where, f"{spec.use}: {err}"))
        return None
    return _resolve_nested(registry, kind, instance, where, problems)


def unknown_parameter(cls: type, use: str, key: str, fields: Mapping[str, attrs.Attribute], where: str) -> Problem:
    """The problem for a parameter ``key`` that ``cls`` does not take: a
    renamed one names its new name (the message Python constructors give too,
    :func:`privclust.params.check_renamed`); otherwise the close names, or the list."""
    new = renamed_to(cls, key)
    if new is not None and new in fields:
        return renamed_problem(use, key, new, fields[new], where)
    close = difflib.get_close_matches(key, list(fields), n=2, cutoff=0.6)
    fix = ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else (
        f"{use} takes: {', '.join(fields) or 'no parameters'}")
    return Problem(where, f"{use} has no parameter {key!r}", fix)


def _resolve_nested(registry: ComponentTables, kind: str, instance: Any, where: str,
                    problems: list[Problem]) -> Any:
    changes: dict[str, Any] = {}
    prefix = f"{where}." if where else ""
    for field in attrs.fields(type(instance)):
        sub_kind = field_kind(field)
        value = getattr(instance, field.name)
        if sub_kind is None or value is None:
            continue
        if isinstance(value, ComponentSpec):
            resolved = _create(registry, sub_kind, value, {}, f"{prefix}{param_name(field.name)}", problems)
        else:
            resolved = _resolve_nested(registry, sub_kind, value, f"{prefix}{param_name(field.name)}", problems)
        if resolved is not None and resolved is not value:
            changes[field.name] = resolved
    if changes:
        try:
            return attrs.evolve(instance, **_evolve_names(type(instance), changes))
        except (PrivclustError, TypeError, ValueError) as err:
            problems.append(Problem(where, str(err)))
    return instance


class _Probe:
    """Stands in for the instance when a field's validator runs on its own."""

    def __init__(self, name: str):
        self.name = name


def _probe_fields(cls: type, kwargs: Mapping[str, Any], where: str) -> list[Problem]:
    """Run each given field's converter and validator on its own, so that
    every bad value is reported at once (attrs stops at the first)."""
    problems = []
    fields = {f.name: f for f in attrs.fields(cls)}
    for name, value in kwargs.items():
        field = fields[name]
        try:
            converted = field.converter(value) if callable(field.converter) else value
            if field.validator is not None:
                field.validator(_Probe(getattr(cls, "name", cls.__name__)), field, converted)
        except (ParameterError, RecipeError) as err:
            problems.append(Problem(f"{where}.{param_name(name)}" if where else "", str(err)))
        except (TypeError, ValueError):
            continue  # left to the constructor, which reports it in context
    return problems


def _field_kwargs(cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    fields = {param_name(f.name): f.name for f in attrs.fields(cls) if f.init}
    out = {}
    for key, value in params.items():
        if key not in fields:
            known = {param_name(f.name): f for f in attrs.fields(cls) if f.init}
            raise RecipeError([unknown_parameter(cls, cls.name, key, known, key)])  # type: ignore[attr-defined]
        out[fields[key]] = value
    return out


def _evolve_names(cls: type, changes: Mapping[str, Any]) -> dict[str, Any]:
    """attrs.evolve takes init (alias) names: ``lambda_`` stays ``lambda_``."""
    aliases = {f.name: (f.alias or f.name) for f in attrs.fields(cls)}
    return {aliases[k]: v for k, v in changes.items()}
