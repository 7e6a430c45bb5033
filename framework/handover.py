"""What a run hands its worker tasks: the registry, the data and the compiled
recipe, for :func:`privclust.run` (strata on workers),
:func:`privclust.run_dataset` and :func:`privclust.compare`.

Forked local workers inherit what the run holds under a token the tasks
carry: the registry (in-session plugins need not pickle), the data (a task
carries row positions, not records) and the compiled recipe. Workers that
start afresh (a Dask cluster, or a platform without fork) get the registry
spec (the session plugins and the blocked names) and rebuild the registry
once per task; the compiled recipe travels with the task, without its
registry (which does not pickle), and is given the rebuilt one: it is never
compiled again.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pandas as pd

from .registry import Registry, get_registry

__all__ = ["Handover", "forks", "handed", "handed_data", "received", "registry_spec", "worker_registry"]

#: The session plugins and the blocked names of a registry, from which a worker rebuilds it.
RegistrySpec = tuple[list[Any], list[str]]


@attrs.frozen
class _Held:
    registry: Registry
    data: pd.DataFrame | None
    compiled: Any


#: What each run holds for its forked workers, by token (runs at the same time, in threads, keep apart).
_HANDED: dict[str, _Held] = {}


@attrs.frozen
class Handover:
    """What the tasks of one run carry: ``spec`` (to rebuild the registry in
    a worker that starts afresh) or ``None`` for forked workers; the token
    under which forked workers find the registry, the data and the compiled
    recipe; and ``compiled``, the compiled recipe without its registry for
    workers that start afresh (``None`` for forked ones, which inherit it)."""

    spec: RegistrySpec | None
    token: str
    compiled: Any = None


def registry_spec(registry: Registry) -> RegistrySpec:
    """What a worker that starts afresh rebuilds ``registry`` from."""
    return registry.session_plugins(), registry.blocked()


def forks(scheduler: Any) -> bool:
    """Whether the tasks run in forked local processes, which inherit what the
    run holds (a Dask cluster, or a platform without fork, starts its workers
    afresh: they need the registry's plugins and the data shipped)."""
    return scheduler is None and "fork" in mp.get_all_start_methods()


@contextlib.contextmanager
def handed(registry: Registry, scheduler: Any, data: pd.DataFrame | None = None, compiled: Any = None
           ) -> Iterator[Handover]:
    """Hold ``registry``, ``data`` and ``compiled`` for the tasks of one run
    while the block runs (see :class:`Handover`)."""
    token = uuid.uuid4().hex
    fresh = not forks(scheduler)
    shipped = attrs.evolve(compiled, registry=None) if fresh and compiled is not None else None
    _HANDED[token] = _Held(registry, data, compiled)
    try:
        yield Handover(registry_spec(registry) if fresh else None, token, shipped)
    finally:
        _HANDED.pop(token, None)


def worker_registry(spec: RegistrySpec | None, token: str | None) -> Registry:
    """The registry of a task: rebuilt from ``spec``, else the one its run handed over."""
    if spec is not None:
        return Registry(plugins=spec[0], block=spec[1])
    held = _HANDED.get(token) if token is not None else None
    return held.registry if held is not None else get_registry()


def handed_data(token: str) -> pd.DataFrame:
    """The data the run of ``token`` handed its forked workers."""
    data = _HANDED[token].data
    assert data is not None, "the run handed no data"
    return data


def received(handover: Handover, registry: Registry) -> Any:
    """The compiled recipe of a task, with the task's ``registry``: the one
    its run holds (a forked worker), or the one shipped with the task."""
    if handover.compiled is None:
        return _HANDED[handover.token].compiled
    return attrs.evolve(handover.compiled, registry=registry)
