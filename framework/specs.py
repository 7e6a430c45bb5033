"""Spec types: the plain-data form of components, below everything that uses it.

A :class:`ComponentSpec` names a component (``use``) with its parameters; it
is what a recipe holds, what a nested-component field holds before it is
resolved, and what :meth:`ComponentSpec.of` makes of an instance. This module
also holds the few primitives that read a component's attrs fields (their
recipe names, the kind a nested field holds, their descriptions), because
``ComponentSpec.of`` needs them and :mod:`privclust.params` declares them.

Layer: errors -> **specs** -> params -> components -> recipe -> ...
(see docs/architecture.md). Nothing here imports another privclust module
except :mod:`privclust.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .errors import Problem, RecipeError

__all__ = ["ComponentSpec", "FrozenMap", "component_params", "field_doc", "field_kind", "param_name",
           "stated_params", "to_component_value"]

#: The keys of the metadata ``param(...)`` sets on an attrs field: its doc, kind, type, leak and step id.
META_DOC = "privclust_doc"
META_KIND = "privclust_kind"
META_TYPE = "privclust_type"
META_LEAK = "privclust_leak"
#: Marks a parameter whose value is the id of a step of the recipe (``param(..., step_id=True)``).
META_STEP_ID = "privclust_step_id"


def param_name(field_name: str) -> str:
    """The recipe key of an attrs field: ``lambda_`` -> ``lambda``."""
    return field_name[:-1] if field_name.endswith("_") and not field_name.endswith("__") else field_name


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping of parameters that, unlike ``MappingProxyType``,
    pickles (a Release holding its recipe can be sent to another process)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] = MappingProxyType({})):
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]  # like a dict

    def __repr__(self) -> str:
        return repr(self._data)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._data,))


def freeze(value: Any) -> Any:
    """Deep-copy a parameter value into an immutable form (lists -> tuples)."""
    if isinstance(value, ComponentSpec):
        return value
    if isinstance(value, Mapping):
        if "use" in value:
            return ComponentSpec.from_mapping(value)
        return FrozenMap({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain-data form of a parameter value (tuples -> lists, specs -> dicts)."""
    if isinstance(value, ComponentSpec):
        return value.to_dict()
    if attrs.has(type(value)) and isinstance(getattr(type(value), "name", None), str):
        return ComponentSpec.of(value).to_dict()
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # numpy scalars and arrays
        return value.tolist()
    written = getattr(value, "written", None)
    if isinstance(value, str) and isinstance(written, str):
        return written  # a path resolved against a recipe file's folder (params.RecipePath): the user's text
    return value


@attrs.frozen
class ComponentSpec:
    """A component named by ``use`` with its parameters (the data form).

    Nested components inside ``params`` are ComponentSpecs themselves.
    """

    use: str
    params: Mapping[str, Any] = attrs.field(factory=dict, converter=freeze)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ComponentSpec:
        """Build from ``{"use": name, **params}``."""
        use = mapping.get("use")
        if not isinstance(use, str) or not use:
            raise RecipeError([Problem("", f"a component table needs 'use' = \"<name>\"; got {dict(mapping)!r}")])
        return cls(use, {k: v for k, v in mapping.items() if k != "use"})

    @classmethod
    def of(cls, component: Any) -> ComponentSpec:
        """The spec of a component instance: its name and every parameter that
        is set (``None`` means "not set": TOML has no null, and leaving such a
        parameter out gives the same component)."""
        return cls(type(component).name, {k: v for k, v in component_params(component).items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return {"use": self.use, **{k: thaw(v) for k, v in self.params.items()}}

    def __eq__(self, other: object) -> bool:  # MappingProxyType does not compare to dict
        return isinstance(other, ComponentSpec) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))


def to_component_value(value: Any) -> Any:
    """Converter for nested-component fields: a name or a table becomes a spec."""
    if isinstance(value, str):
        return ComponentSpec(value)
    if isinstance(value, Mapping):
        return ComponentSpec.from_mapping(value)
    return value


def component_params(component: Any) -> dict[str, Any]:
    """Every parameter of a component instance, keyed by its recipe name.

    Nested components become :class:`~privclust.ComponentSpec` values.
    """
    out: dict[str, Any] = {}
    for field in attrs.fields(type(component)):
        if not field.init:
            continue
        value = getattr(component, field.name)
        if field_kind(field) is not None and value is not None and not isinstance(value, ComponentSpec):
            value = ComponentSpec.of(value)
        out[param_name(field.name)] = value
    return out


def stated_params(component: Any, *, defaults: bool = True) -> dict[str, Any]:
    """The parameters a component states, keyed by recipe name: for a
    :class:`ComponentSpec`, those its table gives; for an instance, every
    parameter whose value is not ``None``.

    ``None`` is the one way to say "not set, let the surrounding component
    decide" (a default of ``None``); any other value is in effect, whether the
    caller gave it or it is the class's default. So a subclass's default is a
    real default everywhere: ``fcm-warm``, a subclass of ``fcm`` whose ``m``
    defaults to 1.3, runs with ``m = 1.3`` inside ``fuzzy-microaggregation``
    (see docs/decisions.md, "Which parameters are set").

    With ``defaults=False`` an instance's parameters equal to its class's
    default are left out too: what the caller certainly gave. A component
    that takes a value both on its own and from a nested component uses this
    to tell a conflict (both given, different) from a default it overrides.
    """
    if isinstance(component, ComponentSpec):
        return {k: v for k, v in component.params.items() if v is not None}
    out = {k: v for k, v in component_params(component).items() if v is not None}
    if not defaults:
        for field in attrs.fields(type(component)):
            key = param_name(field.name)
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                continue
            if key in out and default is not attrs.NOTHING and _equal(out[key], default):
                del out[key]
    return out


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. arrays
        return False


def field_kind(attribute: attrs.Attribute) -> str | None:
    """The component kind a nested field holds, or ``None`` for a plain parameter."""
    return attribute.metadata.get(META_KIND)


def nested_components(component: Any, where: str = "") -> list[tuple[str, str, Any]]:
    """Every component nested in ``component``'s parameters, depth first, as
    ``(location, kind, instance)``: ``("clusterer", "clusterers", <mdav>)``,
    ``("clusterer.noise", "noise_mechanisms", <laplace>)``. Only built
    instances (a nested field still holding a spec or a name is skipped)."""
    if not attrs.has(type(component)):
        return []
    out: list[tuple[str, str, Any]] = []
    for f in attrs.fields(type(component)):
        kind = field_kind(f)
        value = getattr(component, f.name, None)
        if kind is None or value is None or isinstance(value, str | Mapping) or not attrs.has(type(value)):
            continue
        location = f"{where}.{param_name(f.name)}" if where else param_name(f.name)
        out.append((location, kind, value))
        out += nested_components(value, location)
    return out


def step_id_params(component: Any) -> list[tuple[str, str]]:
    """The parameters of ``component`` and of the components nested in it
    that name a step of the recipe by its id (``param(..., step_id=True)``)
    and are set, as ``(location, value)``: ``("step", "mask")``,
    ``("clusterer.step", "mask")``."""
    out: list[tuple[str, str]] = []
    for where, inner in [("", component), *((f"{loc}.", c) for loc, _, c in nested_components(component))]:
        if not attrs.has(type(inner)):
            continue
        for f in attrs.fields(type(inner)):
            value = getattr(inner, f.name, None)
            if f.metadata.get(META_STEP_ID) and value is not None:
                out.append((f"{where}{param_name(f.name)}", value))
    return out


def field_doc(attribute: attrs.Attribute) -> str:
    """The one-line description of a parameter field."""
    return attribute.metadata.get(META_DOC, "")
