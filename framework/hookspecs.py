"""The privclust hook contract: the markers and the hook specifications.

This module holds the contract and nothing else. Plugins import the
``hookimpl`` marker from :mod:`privclust` and implement any of the hooks
below; the host calls them with keyword arguments only, so an implementation
may accept fewer arguments than the specification names.

Hooks *discover* components; they never run algorithms. A registration hook
hands the plugin a ``register`` callback, the plugin calls ``register(cls)``
for each component class it provides, and the registry keeps the class under
``cls.name``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from collections.abc import Callable, Mapping, Sequence

    from .accountants import Accountant
    from .components import Partition
    from .context import ContextView
    from .errors import Problem
    from .recipe import Budget, Recipe, Step

#: The one name of the project: the pluggy project name, the entry-point group
#: of plugins and the prefix of every hook.
NAME = "privclust"

#: Marker for hook specifications (used by this module only).
hookspec = pluggy.HookspecMarker(NAME)

#: Marker plugins use for their hook implementations: ``@privclust.hookimpl``.
hookimpl = pluggy.HookimplMarker(NAME)


# ---------------------------------------------------------------------------
# What two hooks are handed, typed by what an implementation may use of it:
# the registry and the step outcome are defined above this contract, which
# imports nothing above it (not even for annotations).
# ---------------------------------------------------------------------------


class ComponentLookup(Protocol):
    """The ``registry`` the ``privclust_check_recipe`` hook is given: the
    :class:`~privclust.Registry` the recipe is compiled against, of which a
    check may look the components up."""

    def names(self, kind: str) -> list[str]:
        """The names of the components of ``kind`` (``"clusterers"``, ...)."""
        ...

    def kind_of(self, name: str) -> list[str]:
        """The kinds that have a component called ``name``."""
        ...

    def get(self, kind: str, name: str) -> type:
        """The class of the component ``name`` of ``kind``."""
        ...


class FinishedStep(Protocol):
    """The ``outcome`` the ``privclust_step_finished`` hook is given: the
    step's frozen :class:`~privclust.StepOutcome`, of which an observer may
    read what the step did."""

    @property
    def index(self) -> int: ...
    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def component(self) -> Any: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def result(self) -> Any: ...
    @property
    def elapsed(self) -> float: ...
    @property
    def n_records(self) -> int: ...
    @property
    def output(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def params(self) -> dict[str, Any]: ...
    @property
    def partition(self) -> Partition | None: ...
    @property
    def diagnostics(self) -> Mapping[str, Any]: ...


# ---------------------------------------------------------------------------
# Registration: each plugin registers the component classes it provides.
# ---------------------------------------------------------------------------


@hookspec
def privclust_register_clusterers(register: Callable[..., None]) -> None:
    """Register clusterer classes.

    Called when a :class:`~privclust.Registry` builds its component tables:
    the first time one is needed (never at import time), and again whenever
    the tables are rebuilt (after a plugin is registered or unregistered in
    the session). Register the same classes every time and keep the hook free
    of side effects; never depend on being called once.

    A clusterer is a frozen attrs class with a class attribute ``name`` (the
    name recipes use) and a method ``fit(data, context)`` returning a
    :class:`~privclust.Partition`. The registry checks each class at once
    and raises :class:`~privclust.PluginError` (naming the plugin, its
    distribution and the hook) when it breaks this contract; so does every
    registration hook.

    A plugin whose class takes over a name another plugin provides (its own
    ``laplace``) says so: ``register(cls, replaces="noise:laplace")``, naming
    that plugin and component; without it, two plugins registering one name
    for one kind is a :class:`~privclust.DuplicateComponentError`. This holds
    for every registration hook.

    :param register: call ``register(cls)`` for every clusterer class the
        plugin provides (``register(cls, replaces="plugin:name")`` for a
        replacement).
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_maskers(register: Callable[..., None]) -> None:
    """Register masker classes.

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`). A masker has a ``name`` and a
    method ``mask(data, context)`` returning a :class:`~privclust.Masked`
    whose ``data`` has the index and columns of ``data``.

    :param register: call ``register(cls)`` for every masker class.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_noise_mechanisms(register: Callable[..., None]) -> None:
    """Register noise-mechanism classes.

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`). A noise mechanism has a ``name``
    and two methods:

    * ``release(values, *, sensitivity, epsilon, delta=0.0, context,
      relation, covers, not_covered="", **ledger) -> ndarray``, which other
      components call through ``context.mechanism(...)``: it must call
      ``context.spend(...)`` (which refuses before anything is recorded when
      the budget would be exceeded) **before** it draws from ``context.rng``;
    * ``perturb(data, context)``, returning a :class:`~privclust.Masked`,
      used when the mechanism is a recipe step.

    :param register: call ``register(cls)`` for every noise mechanism.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_constraint_handlers(register: Callable[..., None]) -> None:
    """Register constraint-handler classes (edit rules).

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`). A constraint handler has a
    ``name`` and the methods

    * ``variables()``: one ``frozenset`` of column names per rule;
    * ``describe()``: each rule as text;
    * ``check(columns)``: a list of problems (:class:`~privclust.Problem` or
      strings); ``columns`` is ``None`` when the recipe is compiled (check the
      rules themselves) and the data's column names when it runs;
    * ``bind(columns, rules=None) -> BoundConstraints``: the rules (all, or
      those whose indices are given) bound to an ordered list of columns: an
      object with ``columns``, ``rules``, ``project(points, *, scale=None)``
      (each row onto the feasible set, never modifying ``points``) and
      ``violations(points)`` (an ``(n, n_rules)`` array, 0 where a rule
      holds); see :class:`~privclust.BoundConstraints`.

    :param register: call ``register(cls)`` for every constraint handler.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_evaluators(register: Callable[..., None]) -> None:
    """Register evaluator classes (information loss, risk, clustering quality).

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`). An evaluator has a ``name`` and a
    method ``evaluate(inputs) -> Mapping[str, float]``, where ``inputs`` is
    an :class:`~privclust.EvaluationInputs` (``original``, ``protected``,
    ``columns``, ``labels``, ``outcomes``, ``constraints``, ``ledger``,
    ``rng``).

    :param register: call ``register(cls)`` for every evaluator.
    :return: nothing; the return value is ignored.
    """


# ---------------------------------------------------------------------------
# Choosers and checks.
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def privclust_make_accountant(budget: Budget) -> Accountant | None:
    """Create the accountant that composes the privacy costs of one run.

    Called once at the start of every run, after the recipe is compiled and
    the data checked, before the first step (whenever a
    :class:`~privclust.PrivacyContext` is created with a registry). **The
    first non-``None`` result wins**: the host's own implementation, which
    returns the :class:`~privclust.BasicAccountant` (sequential composition,
    parallel composition over disjoint record partitions), is marked
    ``trylast=True``, so any plugin implementing this hook replaces it.

    An accountant (:class:`~privclust.Accountant`) has a ``budget``, a
    one-line ``description`` (it appears in the report),
    ``total(entries) -> (epsilon, delta)`` and ``check(entries, new)``, which
    raises :class:`~privclust.BudgetExceededError` if the new ledger entry
    would take the total past the budget.

    :param budget: the run's :class:`~privclust.Budget` (``epsilon`` and
        ``delta``; ``epsilon`` is ``None`` when the recipe declares no budget).
    :return: an object with the :class:`~privclust.Accountant` interface, or
        ``None`` to leave the choice to the next implementation.
    """


@hookspec
def privclust_check_recipe(recipe: Recipe, registry: ComponentLookup) -> Sequence[Problem | str] | None:
    """Report problems in a recipe before it runs.

    Called when a recipe is compiled against a registry (``privclust check``,
    :func:`privclust.compile`, :func:`privclust.run`), after the host's own
    checks, and only if those found nothing (so a plugin sees a recipe whose
    components all exist and whose parameters are valid). The problems of
    all implementations are raised together in one
    :class:`~privclust.RecipeError`.

    :param recipe: the :class:`~privclust.Recipe` being compiled.
    :param registry: the :class:`~privclust.Registry` it is compiled against
        (typed by ``ComponentLookup``: ``names``, ``kind_of``, ``get``).
    :return: a sequence of :class:`~privclust.Problem` (place, message, fix)
        or plain strings, or ``None`` / an empty sequence when the plugin
        finds nothing wrong.
    """


# ---------------------------------------------------------------------------
# Observers: around each step of a run. The CLI's progress display consumes
# these; the audit of what ran is the runner's own, not an observer's.
# ---------------------------------------------------------------------------


@hookspec
def privclust_step_started(step: Step, index: int, total: int) -> None:
    """A step is about to run.

    Called by the runner for every step, in order, before the component sees
    any data.

    :param step: the recipe's :class:`~privclust.Step` (``use``, ``params``,
        ``columns``, ``id``, ``output``).
    :param index: its 0-based position in the recipe.
    :param total: the number of steps in the recipe.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_step_progress(step: Step, index: int, done: float, total: float | None) -> None:
    """A long-running step reports progress.

    Called whenever a component calls ``context.progress(done, total)``;
    components report at most a few hundred times per step.

    :param step: the recipe step that is running.
    :param index: its 0-based position in the recipe.
    :param done: records done so far, a whole number that never decreases
        (the built-ins report through :class:`privclust.RecordProgress`; the
        command line's bar counts records).
    :param total: the step's number of records, or ``None`` if unknown.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_step_finished(
    step: Step, index: int, outcome: FinishedStep, context: ContextView
) -> None:
    """A step has finished successfully.

    Called by the runner after the step's result is known, its finiteness
    checked and its process entry written in the ledger, before the next step
    starts; not called when the step fails. The runner itself has already
    written the process applied (component, every parameter, columns,
    records, time): no observer writes the audit, and no plugin, installed
    or blocked, can remove it.

    :param step: the recipe step that ran.
    :param index: its 0-based position in the recipe.
    :param outcome: its :class:`~privclust.StepOutcome` (frozen:
        ``component``, ``columns``, ``result``, ``elapsed``, ``n_records``,
        ``output``, ``partition``, ``diagnostics``).
    :param context: a read-only :class:`~privclust.ContextView` of the run
        (``budget``, ``entries``, ``ledger`` (a copy), ``spent``, ``seeded``,
        ``step_index``): an observer can read the ledger but cannot spend,
        record or draw random numbers.
    :return: nothing; the return value is ignored.
    """
