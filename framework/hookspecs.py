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

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from collections.abc import Callable, Sequence

    from .accounting import Accountant, Budget, ContextView
    from .errors import Problem
    from .recipe import Recipe, Step
    from .registry import Registry
    from .runner import StepOutcome

#: The one name of the project: the pluggy project name, the entry-point group
#: of plugins and the prefix of every hook.
NAME = "privclust"

#: Marker for hook specifications (used by this module only).
hookspec = pluggy.HookspecMarker(NAME)

#: Marker plugins use for their hook implementations: ``@privclust.hookimpl``.
hookimpl = pluggy.HookimplMarker(NAME)


# ---------------------------------------------------------------------------
# Registration: each plugin registers the component classes it provides.
# ---------------------------------------------------------------------------


@hookspec
def privclust_register_clusterers(register: Callable[[type], None]) -> None:
    """Register clusterer classes.

    Called when a :class:`~privclust.Registry` builds its component tables:
    the first time one is needed (never at import time), and again after a
    plugin is registered or unregistered in the session. Register the same
    classes every time; never depend on being called once.

    :param register: call ``register(cls)`` for every clusterer class the
        plugin provides. ``cls`` must be a frozen attrs class with a class
        attribute ``name`` (the name recipes use) and a method
        ``fit(data, context) -> Partition``.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_maskers(register: Callable[[type], None]) -> None:
    """Register masker classes.

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`).

    :param register: call ``register(cls)`` for every masker class; ``cls``
        has a ``name`` and a method ``mask(data, context) -> Masked``.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_noise_mechanisms(register: Callable[[type], None]) -> None:
    """Register noise-mechanism classes.

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`).

    :param register: call ``register(cls)`` for every noise mechanism; ``cls``
        has a ``name``, a method ``release(values, *, sensitivity, epsilon,
        delta, context, ...)`` used by other components, and a method
        ``perturb(data, context) -> Perturbed`` used when it is a recipe step.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_constraint_handlers(register: Callable[[type], None]) -> None:
    """Register constraint-handler classes (edit rules).

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`).

    :param register: call ``register(cls)`` for every constraint handler;
        ``cls`` has a ``name``, ``variables()``, ``check(columns)`` and
        ``bind(columns) -> BoundConstraints``.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_register_evaluators(register: Callable[[type], None]) -> None:
    """Register evaluator classes (information loss, risk, clustering quality).

    Called whenever the registry builds its component tables (see
    :func:`privclust_register_clusterers`).

    :param register: call ``register(cls)`` for every evaluator; ``cls`` has a
        ``name`` and a method ``evaluate(inputs) -> Mapping[str, float]``.
    :return: nothing; the return value is ignored.
    """


# ---------------------------------------------------------------------------
# Choosers and checks.
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def privclust_make_accountant(budget: Budget) -> Accountant | None:
    """Create the accountant that composes the privacy costs of one run.

    Called once at the start of every run, before any step. The first
    non-``None`` result wins; the built-in basic accountant (sequential
    composition, parallel composition over disjoint record partitions) is
    registered with ``trylast=True``, so any plugin implementing this hook
    replaces it.

    :param budget: the run's :class:`~privclust.Budget` (``epsilon`` and
        ``delta``; ``epsilon`` is ``None`` when the recipe declares no budget).
    :return: an object with the :class:`~privclust.Accountant` interface, or
        ``None`` to leave the choice to the next implementation.
    """


@hookspec
def privclust_check_recipe(recipe: Recipe, registry: Registry) -> Sequence[Problem | str] | None:
    """Report problems in a recipe before it runs.

    Called when a recipe is compiled against a registry (``privclust check``,
    :func:`privclust.compile`, :func:`privclust.run`), after the host's own
    checks. The problems of all implementations are raised together in one
    :class:`~privclust.RecipeError`.

    :param recipe: the :class:`~privclust.Recipe` being compiled.
    :param registry: the registry it is compiled against.
    :return: a sequence of :class:`~privclust.Problem` (or plain strings), or
        ``None`` / an empty sequence when the plugin finds nothing wrong.
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

    :param step: the recipe :class:`~privclust.Step`.
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
    :param done: units of work done so far.
    :param total: total units of work, or ``None`` if unknown.
    :return: nothing; the return value is ignored.
    """


@hookspec
def privclust_step_finished(
    step: Step, index: int, outcome: StepOutcome, context: ContextView
) -> None:
    """A step has finished successfully.

    Called by the runner after the step's result is known, its finiteness
    checked and its process entry written in the ledger (by the runner
    itself: no observer writes the audit), before the next step starts.

    :param step: the recipe step that ran.
    :param index: its 0-based position in the recipe.
    :param outcome: the :class:`~privclust.StepOutcome` (frozen: result,
        elapsed time).
    :param context: a read-only :class:`~privclust.ContextView` of the run
        (budget, ledger entries so far, spend); an observer cannot spend,
        record or draw random numbers.
    :return: nothing; the return value is ignored.
    """
