"""Where independent tasks run: local processes or a Dask cluster.

:func:`privclust.compare` (configurations of a comparison) and
:func:`privclust.run` with a ``scheduler`` (the strata of a recipe) hand their
tasks to these engines: local processes by default (forked where the
platform can, so that a task's inputs are not copied before they are
needed), or a Dask cluster when a scheduler is named (``"local"`` for a
``LocalCluster`` started for the call, an address such as
``tcp://host:8786``, or a ``distributed.Client``). A task that raises stops
the others: queued tasks are cancelled and local workers ended at once.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any
from urllib.parse import urlsplit

from ._optional import optional
from ._signals import raise_if_stopped, worker_signals
from .errors import PrivclustError

__all__ = ["DASK", "map_tasks"]

#: The message when a Dask engine is asked for without distributed installed.
DASK = "running on a Dask cluster needs distributed: pip install 'privclust[distributed]'"


def check_engine(scheduler: Any, processes: Any, timeout: Any) -> None:
    """Refuse a bad engine setting before anything is compiled or run."""
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise PrivclustError(f"processes must be an integer >= 1 (or None for one per core); got {processes!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise PrivclustError(f"timeout must be a number of seconds > 0; got {timeout!r}")
    if scheduler is None or scheduler == "local" or (hasattr(scheduler, "submit") and hasattr(scheduler, "gather")):
        return
    address = getattr(scheduler, "scheduler_address", scheduler)
    if not isinstance(address, str) or not address.strip():
        raise PrivclustError(f"scheduler must be None, \"local\", an address such as tcp://host:8786 or a "
                             f"distributed.Client; got {type(scheduler).__name__}")
    _split_address(address)


def _split_address(address: str) -> tuple[str, str | None, int | None]:
    """``(scheme, host, port)`` of a scheduler address, or a clean error."""
    text = address.strip()
    try:
        parts = urlsplit(text if "://" in text else f"tcp://{text}")
        port = parts.port
    except ValueError as err:
        raise PrivclustError(f"scheduler address {address!r} is not valid ({err}); write tcp://host:8786") from None
    if parts.scheme not in ("tcp", "tls", "inproc", "ucx", "ws", "wss"):
        raise PrivclustError(f"scheduler address {address!r}: unknown protocol {parts.scheme!r}; write "
                             "tcp://host:8786 (or tls://, ws://, wss://, ucx://)")
    if parts.scheme != "inproc" and not parts.hostname:
        raise PrivclustError(f"scheduler address {address!r} names no host; write tcp://host:8786")
    return parts.scheme, parts.hostname, port


def stop_pool(pool: ProcessPoolExecutor, before: set[Any] | None = None) -> None:
    """Cancel the queued runs and end the worker processes at once (a plain
    shutdown would wait for every queued run to finish). With ``before`` (the
    children alive before the pool was made) every child started since is
    ended too: a stop signal can arrive between a worker's fork and the
    moment the pool records it."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    if before is not None:
        processes += [c for c in mp.active_children() if c not in before and c not in processes]
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + 5.0
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(timeout=1.0)


def dask_client(scheduler: Any, timeout: float) -> tuple[Any, list[Any] | None]:
    """A Dask client for ``scheduler``, and what this call opened and must close."""
    distributed = optional("distributed", DASK)
    Client, LocalCluster = distributed.Client, distributed.LocalCluster
    if hasattr(scheduler, "submit") and hasattr(scheduler, "gather"):
        return scheduler, None
    if scheduler == "local":
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
        return client, [client, cluster]
    address = str(getattr(scheduler, "scheduler_address", scheduler))
    _probe(address, timeout)
    try:
        client = Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError, ValueError) as err:
        raise _unreachable(address, timeout, err) from err
    return client, [client]


def _unreachable(address: str, timeout: float, err: BaseException) -> PrivclustError:
    return PrivclustError(
        f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({type(err).__name__}: {err}); check "
        "the address (tcp://host:8786) and that `dask scheduler` and its workers are running"
    )


def _probe(address: str, timeout: float) -> None:
    """Fail fast, in one clean error, when nothing listens at a tcp:// address
    (a Dask client would retry in the background and log every attempt)."""
    scheme, host, port = _split_address(address)
    if scheme not in ("tcp", "tls") or host is None:
        return
    try:
        with socket.create_connection((host, port or 8786), timeout=timeout):
            pass
    except (OSError, OverflowError) as err:
        raise _unreachable(address, timeout, err) from err


def map_tasks(fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], *, scheduler: Any = None,
              processes: int | None = None, timeout: float = 10.0,
              on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[fn(*args) for args in tasks]``, run on local processes (``scheduler``
    ``None``) or a Dask cluster; results in the order of ``tasks``.
    ``on_done(i, result)`` is called as each task finishes (in the caller's
    process). The first task that raises stops the others, and its exception
    is raised here. ``fn`` and the arguments must pickle (Dask, or local
    processes where the platform cannot fork)."""
    check_engine(scheduler, processes, timeout)
    results: list[Any] = [None] * len(tasks)
    if scheduler is None:
        workers = min(processes or os.cpu_count() or 1, len(tasks))
        if workers <= 1:
            for i, args in enumerate(tasks):
                results[i] = fn(*args)
                if on_done is not None:
                    on_done(i, results[i])
            return results
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        before = set(mp.active_children())
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context(method),
                                   initializer=worker_signals, initargs=(os.getpid(),))
        try:
            futures = {pool.submit(fn, *args): i for i, args in enumerate(tasks)}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                raise_if_stopped()  # a stop signal whose exception a finalizer swallowed stops the run here
                for future in done:
                    i = futures[future]
                    results[i] = future.result()
                    if on_done is not None:
                        on_done(i, results[i])
            pool.shutdown(wait=True)
        except BaseException:  # a failed task, Ctrl-C, SIGTERM: stop now, not after the queue
            stop_pool(pool, before)
            raise
        return results
    dask_completed = optional("distributed", DASK).as_completed
    client, owned = dask_client(scheduler, timeout)
    try:
        submitted = [client.submit(fn, *args, pure=False) for args in tasks]
        index = {f.key: i for i, f in enumerate(submitted)}
        try:
            for future in dask_completed(submitted):
                i = index[future.key]
                results[i] = future.result()
                if on_done is not None:
                    on_done(i, results[i])
        except BaseException:
            with contextlib.suppress(Exception):
                client.cancel(submitted, force=True)
            raise
        return results
    finally:
        for resource in owned or ():
            resource.close()
