"""The registry: plugins in, component tables out.

A :class:`Registry` owns a :class:`pluggy.PluginManager`. Nothing is loaded
when privclust is imported; the first use of a registry loads, in this order:

1. the host's own hook implementations (the default accountant, the audit
   observer);
2. the built-in plugins: the entry points of the ``privclust`` group that the
   ``privclust`` distribution itself declares, by entry-point name;
3. every other entry point of the group, by name;
4. plugin objects handed to the registry in this session (``plugins=`` or
   :meth:`Registry.register`).

Blocking: a name in ``block=`` or in the comma-separated environment variable
``PRIVCLUST_DISABLE_PLUGINS`` blocks a whole plugin (``noise``) or one
component of it (``noise:laplace``).

Replacing: a plugin that registers a component under a name another plugin
already provides declares it, ``register(cls, replaces="noise:laplace")``;
its component is then the one in use under that name, and the replaced one
stays available as ``noise:laplace`` (a recipe's ``use``, :meth:`Registry.get`).
Blocking the replacement (``fast:laplace``) brings the replaced one back.
Two plugins registering the same component name for the same kind without
such a declaration is an error naming both; an unknown name is answered with
close matches.
"""

from __future__ import annotations

import difflib
import importlib.metadata as metadata
import inspect
import os
import re
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import pluggy

from . import accounting, building, hookspecs
from .accountants import BasicAccountant
from .components import KIND_METHODS, KINDS, capability
from .errors import (
    DuplicateComponentError,
    PluginError,
    PrivclustError,
    PrivclustWarning,
    Problem,
    UnknownComponentError,
)
from .hookspecs import NAME
from .ledger import looks_like_host
from .params import answer_renames
from .recipe import KNOWN_LEAKS, STEP_KEYS
from .specs import field_doc, field_kind, param_name, thaw

__all__ = ["ComponentInfo", "PluginInfo", "Registry", "get_registry", "known_leak_names", "register", "reset_registry",
           "unknown_leak_problems"]

#: Environment variable listing plugins (``name``) or components
#: (``plugin:component``) to block, comma-separated.
ENV_DISABLE = "PRIVCLUST_DISABLE_PLUGINS"

#: The distribution whose entry points are the built-in plugins.
BUILTIN_DISTRIBUTION = NAME

#: The registration hook of each component kind.
REGISTRATION_HOOKS: dict[str, str] = {kind: f"{NAME}_register_{kind}" for kind in KINDS}

_COMPONENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_HOST_PLUGINS = ("privclust.accounting",)


@attrs.frozen
class PluginInfo:
    """A loaded plugin: its registered name, distribution and version."""

    name: str
    distribution: str
    version: str
    builtin: bool


@attrs.frozen
class ComponentInfo:
    """A registered component class and where it came from."""

    kind: str
    name: str
    cls: type
    plugin: str
    distribution: str
    version: str
    #: ``"plugin:component"`` this one declares it replaces (``register(cls, replaces=...)``), or "".
    replaces: str = ""
    #: the plugin whose component of the same name replaced this one, or "" (this one is in use).
    replaced_by: str = ""

    @property
    def qualified(self) -> str:
        """``plugin:name``: what a recipe writes to choose this very component."""
        return f"{self.plugin}:{self.name}"

    def parameters(self) -> list[dict[str, Any]]:
        """Each hyper-parameter: its recipe key, default (``"required"`` when
        it has none), the component kind it holds if it is nested, and its
        one-line description."""
        out = []
        for field in attrs.fields(self.cls):
            if not field.init:
                continue
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory() if not default.takes_self else None
            entry: dict[str, Any] = {"name": param_name(field.name),
                                     "default": "required" if default is attrs.NOTHING else thaw(default)}
            if field_kind(field):
                entry["component_kind"] = field_kind(field)
            entry["doc"] = field_doc(field)
            out.append(entry)
        return out

    def to_dict(self, *, parameters: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "class": f"{self.cls.__module__}.{self.cls.__qualname__}",
            "plugin": self.plugin,
            "distribution": self.distribution,
            "version": self.version,
            "replaces": self.replaces,
            "replaced_by": self.replaced_by,
        }
        if parameters:
            doc = (self.cls.__doc__ or "").strip()
            out["doc"] = " ".join(doc.split("\n\n")[0].split())
            out["parameters"] = self.parameters()
        return out


def _split_blocked(names: Iterable[str]) -> tuple[set[str], set[tuple[str, str]]]:
    plugins: set[str] = set()
    components: set[tuple[str, str]] = set()
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if ":" in name:
            plugin, component = name.split(":", 1)
            components.add((plugin.strip(), component.strip()))
        else:
            plugins.add(name)
    return plugins, components


def _from(dist: str, version: str) -> str:
    """``distribution NAME VERSION`` without a stray space when there is no version."""
    return f"distribution {dist} {version}".rstrip()


def _dist_name(ep: metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ("(unknown distribution)", "")
    return (dist.metadata["Name"] or "(unknown distribution)", dist.version or "")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Hooks:
    """Typed facade over the observer and chooser hooks (keyword arguments only)."""

    def __init__(self, pm: pluggy.PluginManager):
        self._pm = pm

    def step_started(self, *, step: Any, index: int, total: int) -> None:
        self._pm.hook.privclust_step_started(step=step, index=index, total=total)

    def step_progress(self, *, step: Any, index: int, done: float, total: float | None) -> None:
        self._pm.hook.privclust_step_progress(step=step, index=index, done=done, total=total)

    def step_finished(self, *, step: Any, index: int, outcome: Any, context: Any) -> None:
        self._pm.hook.privclust_step_finished(step=step, index=index, outcome=outcome, context=context)

    def make_accountant(self, *, budget: Any) -> Any:
        return self._pm.hook.privclust_make_accountant(budget=budget)

    def check_recipe(self, *, recipe: Any, registry: Registry) -> list[Problem]:
        problems: list[Problem] = []
        for result in self._pm.hook.privclust_check_recipe(recipe=recipe, registry=registry):
            for p in result or ():
                problems.append(p if isinstance(p, Problem) else Problem("", str(p)))
        return problems


class Registry:
    """Plugins and the components they provide.

    :param plugins: plugin objects (modules, classes or instances with
        ``@privclust.hookimpl`` methods) to register after the entry points.
    :param block: plugin names (``"noise"``) or components
        (``"noise:laplace"``) to leave out.
    :param entry_points: the entry points to load instead of the installed
        ones (tests use this to fake installed plugins); ``None`` reads the
        ``privclust`` group of the installed distributions.
    :param use_env: also block what ``PRIVCLUST_DISABLE_PLUGINS`` names.
    """

    def __init__(
        self,
        *,
        plugins: Sequence[Any] = (),
        block: Iterable[str] = (),
        entry_points: Iterable[metadata.EntryPoint] | None = None,
        use_env: bool = True,
    ):
        blocked = list(block)
        if use_env:
            blocked += os.environ.get(ENV_DISABLE, "").split(",")
        self._blocked_plugins, self._blocked_components = _split_blocked(blocked)
        self._entry_points = None if entry_points is None else list(entry_points)
        self._session_plugins = list(plugins)
        self._pm: pluggy.PluginManager | None = None
        self._plugin_info: dict[str, PluginInfo] = {}
        self._tables: dict[str, dict[str, ComponentInfo]] | None = None
        self._every: dict[str, dict[str, ComponentInfo]] = {kind: {} for kind in KINDS}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        state = "loaded" if self._pm is not None else "not loaded"
        return f"<Registry {state}, {len(self._plugin_info)} plugins>"

    # -- loading -----------------------------------------------------------------

    @property
    def pm(self) -> pluggy.PluginManager:
        """The plugin manager, loaded on first use."""
        self.load()
        assert self._pm is not None
        return self._pm

    @property
    def hooks(self) -> _Hooks:
        return _Hooks(self.pm)

    def load(self) -> Registry:
        """Load every plugin (idempotent) and check that each hook
        implementation matches a specification."""
        with self._lock:
            if self._pm is not None:
                return self
            pm = pluggy.PluginManager(NAME)
            pm.add_hookspecs(hookspecs)
            self._pm = pm
            try:
                self._register(accounting, "privclust.accounting", NAME, _own_version(), builtin=True)
                for ep, dist, version, builtin in self._ordered_entry_points():
                    if ep.name in self._blocked_plugins:
                        pm.set_blocked(ep.name)
                        continue
                    try:
                        plugin = ep.load()
                    except Exception as err:  # any import failure of third-party code
                        raise PluginError(
                            f"plugin {ep.name!r} ({_from(dist, version)}) failed to import "
                            f"{ep.value!r}: {type(err).__name__}: {err}. Fix or uninstall it, or block it with "
                            f"{ENV_DISABLE}={ep.name}",
                            plugin=ep.name,
                            distribution=dist,
                        ) from err
                    self._register(plugin, ep.name, dist, version, builtin=builtin)
                for plugin in self._session_plugins:
                    self._register_session(plugin, None)
                self.check_pending()
                known = [ep.name for ep, *_ in self._ordered_entry_points()] + list(self._plugin_info)
                self._warn_unused_blocks("plugin", sorted(self._blocked_plugins - set(known)), known)
            except BaseException:
                self._pm = None
                self._plugin_info.clear()
                raise
        return self

    @staticmethod
    def _warn_unused_blocks(what: str, unused: Sequence[str], known: Sequence[str]) -> None:
        """A misspelt block name would block nothing in silence: say so."""
        for name in unused:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            warnings.warn(PrivclustWarning(
                f"{ENV_DISABLE} / block= names the {what} {name!r}, which is not installed, so it blocks "
                f"nothing{hint}"), stacklevel=3)

    def _ordered_entry_points(self) -> list[tuple[metadata.EntryPoint, str, str, bool]]:
        eps = self._entry_points
        if eps is None:
            eps = list(metadata.entry_points(group=NAME))
        seen: set[str] = set()
        builtin: list[tuple[metadata.EntryPoint, str, str, bool]] = []
        other: list[tuple[metadata.EntryPoint, str, str, bool]] = []
        for ep in eps:
            dist, version = _dist_name(ep)
            if ep.name in seen:
                # the same distribution found twice on sys.path (e.g. editable + site): keep the first
                continue
            seen.add(ep.name)
            is_builtin = _normalise(dist) == BUILTIN_DISTRIBUTION
            (builtin if is_builtin else other).append((ep, dist, version, is_builtin))
        return sorted(builtin, key=lambda t: t[0].name) + sorted(other, key=lambda t: t[0].name)

    def _register(self, plugin: Any, name: str, dist: str, version: str, *, builtin: bool = False) -> str:
        assert self._pm is not None
        if self._pm.is_blocked(name) or name in self._blocked_plugins:
            self._pm.set_blocked(name)
            return name
        self._check_unmarked(plugin, name, dist)
        try:
            hash(plugin)
        except TypeError:
            raise PluginError(
                f"plugin {name!r} ({_from(dist, version)}) is an unhashable {type(plugin).__name__}; pluggy keeps "
                "plugins in sets, so a plugin must be hashable. Use a module, a class, or an instance of a class "
                "that does not define __eq__ without __hash__ (a dataclass needs eq=False or frozen=True)",
                plugin=name, distribution=dist) from None
        try:
            registered = self._pm.register(plugin, name=name)
        except pluggy.PluginValidationError as err:
            raise PluginError(
                f"plugin {name!r} ({_from(dist, version)}) breaks the hook contract: {err}. "
                f"{_signature_hint(str(err))}Fix the plugin, or block it with {ENV_DISABLE}={name}",
                plugin=name,
                distribution=dist,
            ) from err
        except ValueError as err:  # already registered under that name
            taken = self._plugin_info.get(name)
            owner = f" by {_from(taken.distribution, taken.version)}" if taken else ""
            raise PluginError(
                f"cannot register a plugin as {name!r}: that name is already taken{owner}. Register yours under "
                "another name (privclust.register(plugin, name='...')).", plugin=name, distribution=dist
            ) from err
        if registered is None:  # blocked
            return name
        self._plugin_info[name] = PluginInfo(name, dist, version, builtin)
        self._tables = None
        return name

    def _register_session(self, plugin: Any, name: str | None) -> str:
        name = name or _session_name(plugin)
        version = str(getattr(plugin, "__version__", "") or "")
        return self._register(plugin, name, "(registered in session)", version)

    def _check_unmarked(self, plugin: Any, name: str, dist: str) -> None:
        """A function named like a hook but lacking the marker would be
        silently ignored; say so instead."""
        for attr in dir(plugin):
            if not attr.startswith(f"{NAME}_"):
                continue
            obj = getattr(plugin, attr, None)
            if callable(obj) and self._pm is not None and self._pm.parse_hookimpl_opts(plugin, attr) is None:
                raise PluginError(
                    f"plugin {name!r} ({_from(dist, '')}) defines {attr}() without the "
                    f"@privclust.hookimpl marker, so it would never be called. Decorate it with "
                    "@privclust.hookimpl.",
                    plugin=name,
                    distribution=dist,
                )

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register a plugin object in this session (e.g. one defined in a
        notebook cell) and rebuild the component tables.

        Registering again under the name of a plugin registered earlier in
        this session replaces it (re-running a notebook cell just works);
        the name of an installed plugin cannot be taken.
        """
        with self._lock:
            self.load()
            key = name or _session_name(plugin)
            old = self._pm.get_plugin(key)  # type: ignore[union-attr]
            if old is not None and old in self._session_plugins:
                self.unregister(key)
            registered = self._register_session(plugin, name)
            self._session_plugins.append(plugin)
            try:
                self.check_pending()
                self._build_tables()
            except BaseException:
                self._pm.unregister(name=registered)  # type: ignore[union-attr]
                self._session_plugins.pop()
                self._plugin_info.pop(registered, None)
                self._tables = None
                raise
            return registered

    def unregister(self, name: str) -> None:
        """Remove a plugin registered by name."""
        with self._lock:
            plugin = self.pm.get_plugin(name)
            if plugin is None:
                raise PluginError(f"no plugin named {name!r} is registered; known: {', '.join(self.plugin_names())}")
            self.pm.unregister(name=name)
            if plugin in self._session_plugins:
                self._session_plugins.remove(plugin)
            self._plugin_info.pop(name, None)
            self._tables = None

    def check_pending(self) -> None:
        """Raise :class:`PluginError` if a plugin implements a hook that has
        no specification (a misspelt hook name)."""
        assert self._pm is not None
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as err:
            plugin_name = self._pm.get_name(err.plugin) or repr(err.plugin)
            info = self._plugin_info.get(plugin_name)
            dist = info.distribution if info else "?"
            known = [n for n in dir(hookspecs) if n.startswith(f"{NAME}_")]
            bad = re.search(r"hook '?(\w+)'?", str(err))
            hint = ""
            if bad:
                close = difflib.get_close_matches(bad.group(1), known, n=1)
                if close:
                    hint = f" Did you mean {close[0]}?"
            raise PluginError(
                f"plugin {plugin_name!r} ({_from(dist, '')}) implements an unknown hook: {err}.{hint} "
                f"Fix the plugin, or block it with {ENV_DISABLE}={plugin_name}",
                plugin=plugin_name,
                distribution=dist,
            ) from err

    # -- plugins --------------------------------------------------------------------

    def plugins(self) -> list[PluginInfo]:
        self.load()
        return list(self._plugin_info.values())

    def plugin_names(self) -> list[str]:
        return [p.name for p in self.plugins()]

    def session_plugins(self) -> list[Any]:
        """The plugin objects registered in this session (not from entry points)."""
        return list(self._session_plugins)

    def blocked(self) -> list[str]:
        """What this registry blocks: plugin names and ``plugin:component`` pairs."""
        return sorted(self._blocked_plugins) + sorted(f"{p}:{c}" for p, c in self._blocked_components)

    def is_blocked(self, name: str) -> bool:
        return name in self._blocked_plugins or (self._pm is not None and self._pm.is_blocked(name))

    # -- component tables -----------------------------------------------------------

    def _build_tables(self) -> dict[str, dict[str, ComponentInfo]]:
        pm = self.pm
        self._blocked_seen: set[tuple[str, str]] = set()
        found: dict[str, dict[str, list[ComponentInfo]]] = {kind: {} for kind in KINDS}
        for kind in KINDS:
            hook_name = REGISTRATION_HOOKS[kind]
            impls = [i for i in getattr(pm.hook, hook_name).get_hookimpls() if not (i.hookwrapper or i.wrapper)]
            for impl in impls:
                info = self._plugin_info.get(impl.plugin_name) or PluginInfo(impl.plugin_name, "?", "", False)

                def register(cls: Any, *, replaces: str | None = None, _kind: str = kind,
                             _info: PluginInfo = info) -> None:
                    self._add(found, _kind, cls, _info, replaces)

                # Through pluggy (its wrappers, tracing and monitoring see the call), once per plugin, so
                # that each class is credited to the plugin that registered it: the other plugins'
                # implementations are left out (wrappers stay). This is why plugins must be hashable.
                caller = pm.subset_hook_caller(hook_name, [i.plugin for i in impls if i is not impl])
                try:
                    caller(register=register)
                except PrivclustError:
                    raise
                except Exception as err:
                    raise PluginError(
                        f"plugin {info.name!r} ({_from(info.distribution, info.version)}) failed in "
                        f"{hook_name}(register): {type(err).__name__}: {err}. Fix the plugin, "
                        f"or block it with {ENV_DISABLE}={info.name}",
                        plugin=info.name,
                        distribution=info.distribution,
                    ) from err
        self._every = {kind: {} for kind in KINDS}
        tables = {kind: {name: self._choose(kind, name, each) for name, each in found[kind].items()} for kind in KINDS}
        self._tables = tables
        registered = [info.qualified for t in self._every.values() for info in t.values()]
        unused = sorted(f"{p}:{c}" for p, c in self._blocked_components if (p, c) not in self._blocked_seen)
        self._warn_unused_blocks("component", unused, registered)
        return tables

    def _add(self, found: dict[str, dict[str, list[ComponentInfo]]], kind: str, cls: Any, plugin: PluginInfo,
             replaces: str | None) -> None:
        hook = REGISTRATION_HOOKS[kind]
        where = f"plugin {plugin.name!r} ({_from(plugin.distribution, '')}) in {hook}"
        if not isinstance(cls, type):
            raise PluginError(f"{where}: register() takes a component class; got {cls!r}", plugin=plugin.name)
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not _COMPONENT_NAME.match(name):
            raise PluginError(
                f"{where}: {cls.__qualname__} needs a class attribute name = \"...\" of lower-case letters, digits, "
                f"'-', '_' or '.'; got {name!r}",
                plugin=plugin.name,
            )
        if looks_like_host(name):
            raise PluginError(f"{where}: {cls.__qualname__} ({name!r}) reads as the host's name; only the host "
                              "writes as the host: name the component after what it does", plugin=plugin.name)
        if not attrs.has(cls):
            raise PluginError(
                f"{where}: {cls.__qualname__} ({name!r}) must be an attrs class "
                "(decorate it with @attrs.frozen(kw_only=True))",
                plugin=plugin.name,
            )
        answer_renames(cls)  # its constructor (and its subclasses') names the new name of a renamed parameter
        missing = [m for m in KIND_METHODS[kind] if not callable(getattr(cls, m, None))]
        if missing:
            raise PluginError(
                f"{where}: {cls.__qualname__} ({name!r}) lacks the method(s) {', '.join(missing)} that "
                f"{kind.replace('_', ' ')} must have",
                plugin=plugin.name,
            )
        reserved = [f.name for f in attrs.fields(cls) if param_name(f.name) in STEP_KEYS]
        if reserved:
            raise PluginError(
                f"{where}: {cls.__qualname__} ({name!r}) has parameter(s) {', '.join(reserved)}, which recipes "
                f"reserve for the step ({', '.join(STEP_KEYS)}); rename them",
                plugin=plugin.name,
            )
        if replaces is not None and (not isinstance(replaces, str) or replaces.rpartition(":")[2] != name
                                     or not replaces.rpartition(":")[0]):
            raise PluginError(
                f"{where}: {cls.__qualname__} ({name!r}) says replaces={replaces!r}; name the plugin and the "
                f"component it replaces, which has the same name: replaces=\"PLUGIN:{name}\" (e.g. "
                f"\"noise:{name}\"; `privclust plugins` lists who provides what)",
                plugin=plugin.name,
            )
        if (plugin.name, name) in self._blocked_components:
            self._blocked_seen.add((plugin.name, name))
            return
        found[kind].setdefault(name, []).append(ComponentInfo(
            kind, name, cls, plugin.name, plugin.distribution, plugin.version, replaces or ""))

    def _choose(self, kind: str, name: str, each: list[ComponentInfo]) -> ComponentInfo:
        """The one component in use under ``name``: the one no other declares it replaces. Two or
        more left (neither says it replaces the other) is an error naming them all."""
        replacer = {c.qualified: d for c in each for d in each if d is not c and d.replaces == c.qualified}
        for c in each:
            by = replacer.get(c.qualified)
            self._every[kind][c.qualified] = attrs.evolve(c, replaced_by=by.plugin) if by else c
        left = [c for c in each if c.qualified not in replacer]
        if len(left) == 1:
            return left[0]
        left = left or each  # a circle of replacements: every one of them is at fault
        what = f"{kind[:-1].replace('_', ' ')} {name!r}"
        plugins = " and ".join(f"{c.plugin!r} ({_from(c.distribution, c.version)})" for c in left)
        said = "".join(f" {c.plugin!r} declares replaces={c.replaces!r}, which names none of the others." for c in
                       left if c.replaces)
        raise DuplicateComponentError(
            f"{'two' if len(left) == 2 else len(left)} plugins register the {what} and "
            f"{'neither says it replaces the other' if len(left) == 2 else 'none says it replaces another'}: "
            f"{plugins}.{said} "
            f"If one is meant to replace the other, its plugin declares it: register(cls, "
            f"replaces=\"{left[0].qualified}\"). Otherwise block one of them: "
            + " or ".join(f"{ENV_DISABLE}={c.qualified}" for c in left)
        )

    @property
    def tables(self) -> dict[str, dict[str, ComponentInfo]]:
        with self._lock:
            if self._tables is None:
                self._build_tables()
            assert self._tables is not None
            return self._tables

    def components(self, kind: str | None = None) -> list[ComponentInfo]:
        """Every registered component (of one kind), sorted by kind and name."""
        kinds = KINDS if kind is None else (self._check_kind(kind),)
        return [info for k in kinds for _, info in sorted(self.tables[k].items())]

    def names(self, kind: str) -> list[str]:
        return sorted(self.tables[self._check_kind(kind)])

    def kind_of(self, name: str) -> list[str]:
        """The kinds under which a component name (or ``plugin:name``) is registered."""
        return [k for k in KINDS if name in (self._all(k) if ":" in name else self.tables[k])]

    def replaced(self) -> list[ComponentInfo]:
        """The components another plugin replaces (still chosen by ``plugin:name``)."""
        return [info for kind in KINDS for _, info in sorted(self._all(kind).items()) if info.replaced_by]

    def provider(self, kind: str, cls: type) -> ComponentInfo | None:
        """Who registered the class ``cls`` (the component in use first, then
        any replaced one); ``None`` for a class no plugin registered."""
        found = [i for i in self._all(self._check_kind(kind)).values() if i.cls is cls]
        return min(found, key=lambda i: bool(i.replaced_by), default=None)

    def _all(self, kind: str) -> dict[str, ComponentInfo]:
        self.tables  # noqa: B018 - builds the tables (and _every) if needed
        return self._every[kind]

    def info(self, kind: str, name: str) -> ComponentInfo:
        """The component in use under ``name``, or, for ``plugin:name``, the
        one that plugin registered (also when another replaced it)."""
        table = self.tables[self._check_kind(kind)]
        if ":" in name:
            table = self._every[kind]
        try:
            return table[name]
        except KeyError:
            known = list(table)
            raise UnknownComponentError(
                kind.replace("_", " "), name, known, difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            ) from None

    def get(self, kind: str, name: str) -> type:
        """The component class registered under ``name`` for ``kind``."""
        return self.info(kind, name).cls

    @staticmethod
    def _check_kind(kind: str) -> str:
        if kind not in KINDS:
            close = difflib.get_close_matches(kind, KINDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; kinds: {', '.join(KINDS)}"
            raise PrivclustError(f"unknown component kind {kind!r}{hint}")
        return kind

    # -- instances --------------------------------------------------------------------

    def create(self, kind: str, value: Any, /, *, where: str = "", **params: Any) -> Any:
        """Instantiate a component from a name, a spec, a ``{"use": ...}``
        table or an instance, resolving nested components through this
        registry. Every problem is raised together in one
        :class:`RecipeError` (``where`` prefixes the locations), whose
        message starts with the call (``Registry.create('clusterers',
        'fcm'): ...``), not with ``recipe``: no recipe need be involved (a
        recipe's compilation reports the problems under the recipe's name)."""
        return building.create(self, kind, value, params, where, head=_create_call(kind, value))

    # -- hooks ---------------------------------------------------------------------

    def make_accountant(self, budget: Any) -> Any:
        accountant = self.hooks.make_accountant(budget=budget)
        if accountant is None:  # pragma: no cover - the host's default always answers
            accountant = BasicAccountant(budget)
        return accountant


def _create_call(kind: str, value: Any) -> str:
    """How :meth:`Registry.create`'s errors name the call: ``Registry.create('clusterers', 'fcm')``, with the
    component's name whatever form ``value`` took (a name, a table, a spec or an instance)."""
    if isinstance(value, str):
        name: Any = value
    elif isinstance(value, Mapping):
        name = value.get("use")
    else:  # a ComponentSpec, or an instance
        name = getattr(value, "use", None) or getattr(type(value), "name", None)
    shown = repr(name) if isinstance(name, str) else "..."
    return f"Registry.create({kind!r}, {shown})"


def _session_name(plugin: Any) -> str:
    if inspect.ismodule(plugin):
        return plugin.__name__
    cls = plugin if isinstance(plugin, type) else type(plugin)
    return getattr(plugin, "plugin_name", None) or f"{cls.__module__}.{cls.__qualname__}"


def _signature_hint(message: str) -> str:
    match = re.search(r"(privclust_\w+)", message)
    if not match or not hasattr(hookspecs, match.group(1)):
        return ""
    spec = getattr(hookspecs, match.group(1))
    return f"The specification is {match.group(1)}{inspect.signature(spec)}. "


def _own_version() -> str:
    try:
        return metadata.version(NAME)
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "0+unknown"


# ---------------------------------------------------------------------------
# The session registry (notebooks, the CLI)
# ---------------------------------------------------------------------------

_session: Registry | None = None
_session_lock = threading.Lock()


def get_registry() -> Registry:
    """The registry of this Python session, created and loaded on first use
    and cached (so a notebook pays the loading once)."""
    global _session
    with _session_lock:
        if _session is None:
            _session = Registry()
        registry = _session
    return registry.load()


def reset_registry() -> None:
    """Forget the session registry (the next :func:`get_registry` reloads)."""
    global _session
    with _session_lock:
        _session = None


def register(plugin: Any, name: str | None = None) -> str:
    """Register a plugin object with the session registry; returns its name.

    A plugin registered earlier in the session under the same name is
    replaced, so re-running a notebook cell just works.
    """
    return get_registry().register(plugin, name)


# ---------------------------------------------------------------------------
# Leak names (a question about the installed components)
# ---------------------------------------------------------------------------


def known_leak_names(registry: Registry | None = None) -> tuple[str, ...]:
    """The leak names a recipe may opt in to: the built-in
    :data:`privclust.KNOWN_LEAKS` and every name an installed component
    declares in its ``leak_names`` class attribute (a third-party plugin that
    records a leak of its own names it there)."""
    if registry is None:
        registry = get_registry()
    extra: set[str] = set()
    for info in registry.components():
        extra.update(capability(info.cls, "leak_names") or ())
    return KNOWN_LEAKS + tuple(sorted(extra - set(KNOWN_LEAKS)))


def unknown_leak_problems(budget: Any, registry: Registry | None = None) -> list[Problem]:
    """A :class:`~privclust.errors.Problem` for the names of
    ``budget.allow_leaks`` that no built-in or installed component knows."""
    if not budget.allow_leaks:
        return []
    known = known_leak_names(registry)
    unknown = [n for n in budget.allow_leaks if n not in known]
    if not unknown:
        return []
    close = [m for n in unknown for m in difflib.get_close_matches(n, known, n=1, cutoff=0.6)]
    hint = ("did you mean " + " or ".join(repr(c) for c in close) + "? ") if close else ""
    return [Problem("privacy.allow_leaks", f"unknown leak name(s) {', '.join(repr(u) for u in unknown)}",
                    f"{hint}known leak names: {', '.join(known)}")]
