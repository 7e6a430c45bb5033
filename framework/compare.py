"""Comparing protections: sweeps, repeats, parallel and distributed runs.

:func:`compare` runs several recipes and/or a parameter grid over them, each
configuration several times for randomised methods, and returns one tidy
DataFrame with a row per run: the recipe, the swept parameters, the repeat,
every evaluator's figure, whether the run's verdict is differentially private
(``dp``) and, only then, the components whose own DP statements it rests on
(``dp_claimed_by``: statements the host cannot check; a component that is
not a built-in is named with its plugin, as the verdict names it), the
guarantee's epsilon and delta (``dp_epsilon``, ``dp_delta``) and the
neighbouring relation they hold under (``dp_relation``; NaN or <NA> for a run
without a DP guarantee), the epsilon and delta
the run spent (the honest figures the accountant charged, whether or not the
release is DP), the epsilon the methods claim where they differ, whether the
runs were seeded (``seeded``), the run time and the error of a run that
failed.

The table is a working document for choosing a protection, not a release
document: its figures are computed from the original values, and its
``seconds`` (each run's wall-clock time, kept for comparing the methods'
costs) are a function of the data that no differential-privacy statement
covers, the timing side channel a non-disclosive report leaves out
(:data:`privclust.report.RUN_TIMES_NOTE`). Publish the chosen release's
non-disclosive report, never the table.

Runs go to local processes by default, or to a Dask cluster when a scheduler
is named (``scheduler="tcp://host:8786"``, a ``distributed.Client``, or
``"local"`` for a ``LocalCluster`` started for the call). Every run's
randomness comes from one :class:`numpy.random.SeedSequence` child keyed by
(configuration, repeat), so the table is identical whichever engine ran it.

Sweep keys are ``<step id>.<parameter>`` (nested components with more dots:
``mask.clusterer.m``), ``privacy.epsilon`` / ``privacy.delta``, or
``<step id>.columns``.
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import math
import multiprocessing as mp
import os
import re
import time
import tomllib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from decimal import MAX_EMAX, MIN_EMIN, ROUND_FLOOR, Decimal, InvalidOperation, localcontext
from typing import Any

import attrs
import numpy as np
import pandas as pd
from tqdm import tqdm

from ._optional import PLOTS, optional
from ._signals import raise_if_stopped, worker_signals
from .assessment import occurrences
from .compiling import compile
from .coverage import dp_claimants, guarantees_dp
from .engines import DASK, check_engine, dask_client, stop_pool
from .errors import PrivclustError, PrivclustWarning, Problem, RecipeError
from .handover import RegistrySpec, handed, handed_data, registry_spec, worker_registry
from .plots import HIGHER_IS_BETTER, LOSS_HINTS, RISK_HINTS, higher_is_better
from .preflight import check_frame
from .recipe import Recipe
from .registry import get_registry
from .runner import run
from .specs import ComponentSpec, field_kind, param_name
from .verdict import whole_file_relation

__all__ = ["MAX_CONFIGURATIONS", "MAX_RUNS", "check_plot", "compare", "expand_grid", "grid_size", "parse_sweep",
           "summarize"]

#: The largest number of configurations (points of the grids, over every
#: recipe) a comparison runs; a larger sweep is refused before anything is
#: expanded or run.
MAX_CONFIGURATIONS = 10_000
#: The largest number of runs (configurations x repeats) of a comparison.
MAX_RUNS = 100_000

#: Columns every comparison table has, besides the swept parameters and the figures.
FIXED_COLUMNS = ("recipe", "configuration", "repeat", "dp", "dp_claimed_by", "dp_epsilon", "dp_delta", "dp_relation",
                 "epsilon", "delta", "claimed_epsilon", "seeded", "seconds", "error")
#: The columns of the run's privacy figures, in table order (after the evaluators' figures).
_PRIVACY_COLUMNS = ("dp", "dp_claimed_by", "dp_epsilon", "dp_delta", "dp_relation", "epsilon", "delta",
                    "claimed_epsilon")


# ---------------------------------------------------------------------------
# Grids
# ---------------------------------------------------------------------------


def _parse_value(token: str) -> Any:
    """A sweep value as TOML reads it (numbers, booleans, quoted strings); a
    bare word is a string. Never evaluated as code."""
    token = token.strip()
    if _nesting(token) > 16:
        raise PrivclustError(f"sweep value {token[:40]!r}...: nests brackets more than 16 deep; a sweep value is a "
                             "number, a word, a quoted string or a short list")
    try:
        return tomllib.loads(f"v = {token}")["v"]
    except tomllib.TOMLDecodeError:
        return token


def _nesting(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def _range(token: str) -> list[float] | None:
    """The values of a ``start:stop:step`` range, in exact decimal arithmetic
    (so ``5e-3:2e-2:5e-3`` is 0.005, 0.01, 0.015, 0.02 in any notation), or
    ``None`` when ``token`` is not three numbers."""
    parts = token.split(":")
    if len(parts) != 3:
        return None
    try:
        start, stop, step = (Decimal(p.strip()) for p in parts)
    except (InvalidOperation, ValueError):
        return None
    if not all(x.is_finite() and math.isfinite(float(x)) for x in (start, stop, step)) or step <= 0 or stop < start:
        raise PrivclustError(f"sweep range {token!r}: write start:stop:step with finite numbers, step > 0 and "
                             "stop >= start")
    if any(x != 0 and float(x) == 0 for x in (start, stop, step)):
        raise PrivclustError(f"sweep range {token!r}: a number is too small for a double (below about 1e-308) and "
                             "would be run as 0; write start:stop:step with numbers a double can hold")
    with localcontext() as ctx:  # exact for any range short enough to run: a sweep's numbers have few digits
        ctx.prec, ctx.Emax, ctx.Emin = 200, MAX_EMAX, MIN_EMIN
        try:
            steps = (stop - start) / step
        except ArithmeticError:  # a quotient beyond the exponent range
            steps = Decimal("Infinity")
        if not steps.is_finite() or steps + 1 > MAX_CONFIGURATIONS:
            raise PrivclustError(f"sweep range {token!r} has {float(steps) + 1:.3g} values, more than the limit of "
                                 f"{MAX_CONFIGURATIONS:,} configurations of a comparison; use a larger step")
        count = int(steps.to_integral_value(rounding=ROUND_FLOOR)) + 1
        return [float(start + i * step) + 0.0 for i in range(count)]  # + 0.0: no -0.0


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """Parse ``"mask.k=3,5,10"`` or ``"privacy.epsilon=0.1:2.0:0.1"``."""
    if "=" not in text:
        raise PrivclustError(f"sweep {text!r}: write <step id>.<parameter>=value1,value2,... "
                             "(e.g. mask.k=3,5,10 or privacy.epsilon=0.1:2:0.1)")
    key, _, values = text.partition("=")
    key = key.strip()
    if not key or "." not in key:
        raise PrivclustError(f"sweep {text!r}: the key must be <step id>.<parameter> or privacy.epsilon")
    out: list[Any] = []
    for token in values.split(","):
        if not token.strip():
            continue
        expanded = _range(token.strip())
        out.extend(expanded if expanded is not None else [_parse_value(token)])
    if not out:
        raise PrivclustError(f"sweep {text!r}: no values; give at least one after '='")
    return key, out


def grid_size(grid: Mapping[str, Sequence[Any]] | None) -> int:
    """The number of configurations of a grid (the product of its lists'
    lengths), computed without expanding it."""
    if not grid:
        return 1
    size = 1
    for key, values in grid.items():
        if isinstance(values, str | bytes | Mapping) or not hasattr(values, "__len__"):
            raise PrivclustError(f"sweep {key!r}: give a list of values; got {type(values).__name__}")
        if len(values) == 0:
            raise PrivclustError(f"sweep {key!r}: the list of values is empty")
        size *= len(values)
    return size


def expand_grid(grid: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """The cartesian product of a grid, as one dict per configuration.

    :raises PrivclustError: for a key without a list of values, or a grid of
        more than :data:`MAX_CONFIGURATIONS` configurations.
    """
    if not grid:
        return [{}]
    grid = {k: list(v) if isinstance(v, Iterable) and not isinstance(v, str | bytes | Mapping)
            and not hasattr(v, "__len__") else v for k, v in grid.items()}  # an iterator, read once
    size = grid_size(grid)
    if size > MAX_CONFIGURATIONS:
        raise PrivclustError(_too_many(size))
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(list(grid[k]) for k in keys))]


def _too_many(size: int) -> str:
    return (f"the sweep has {size:,} configurations, more than the limit of {MAX_CONFIGURATIONS:,} per comparison; "
            "sweep fewer values (a coarser step) or split the comparison")


def _nested_default(registry: Any, table: Mapping[str, Any], part: str, key: str, head: str) -> dict[str, Any]:
    """The table of the nested component ``part`` that a step leaves at its
    default (so ``mask.clusterer.k`` sweeps the default clusterer's ``k``);
    an error naming the step's nested components when ``part`` is none of them."""
    use = table.get("use")
    cls = None
    if registry is not None and isinstance(use, str):
        for kind in registry.kind_of(use):
            cls = registry.get(kind, use)
            break
    if cls is None or not attrs.has(cls):
        raise RecipeError([Problem(key, f"{part!r} is not a nested component of step {head!r}",
                                   "sweep a nested parameter as <step>.<component field>.<parameter>")])
    fields = {param_name(f.name): f for f in attrs.fields(cls) if f.init}
    field = fields.get(part)
    if field is not None and field_kind(field) is not None and isinstance(field.default, ComponentSpec):
        return field.default.to_dict()
    nests = [n for n, f in fields.items() if field_kind(f) is not None]
    close = difflib.get_close_matches(part, nests, n=1)
    fix = (f"did you mean {head}.{close[0]}?" if close else
           f"the nested components of {use} are: {', '.join(nests)}" if nests else f"{use} has no nested component")
    if field is not None and field_kind(field) is not None:
        fix = f"write the {part} in step {head!r} of the recipe to sweep its parameters"
    raise RecipeError([Problem(key, f"{part!r} is not a nested component of step {head!r} ({use})", fix)])


def _step_path(text: str | None, recipe: Recipe) -> str | None:
    """``steps[1].clusterer.m`` written with the step's id (``mask.clusterer.m``), as a sweep key is."""
    if not text:
        return text
    return re.sub(r"steps\[(\d+)\]", lambda m: recipe.step_ids[int(m.group(1))]
                  if int(m.group(1)) < len(recipe.step_ids) else m.group(0), text)


def _own_key(where: str | None, problem: Problem, recipe: Recipe, registry: Any) -> str | None:
    """For ``mask.clusterer.k`` refused by a clusterer that has no ``k``: the
    step's own key (``mask.k``) when the step's component takes that
    parameter, else ``None``."""
    parts = (where or "").split(".")
    unknown = re.search(r"has no parameter '([^']+)'", problem.message)
    if len(parts) < 3 or unknown is None or parts[-1] != unknown.group(1) or parts[0] not in recipe.step_ids:
        return None
    use = recipe.steps[recipe.step_index(parts[0])].use
    for kind in registry.kind_of(use) if registry is not None else ():
        cls = registry.get(kind, use)
        if attrs.has(cls) and parts[-1] in {param_name(f.name) for f in attrs.fields(cls) if f.init}:
            return f"did you mean {parts[0]}.{parts[-1]}? ({use}'s own {parts[-1]!r})"
    return None


def _set(recipe_dict: dict[str, Any], recipe: Recipe, key: str, value: Any, registry: Any = None) -> None:
    head, _, rest = key.partition(".")
    if head == "privacy":
        if rest not in ("epsilon", "delta"):
            raise RecipeError([Problem(key, "the privacy table has only epsilon and delta")])
        recipe_dict.setdefault("privacy", {})[rest] = value
        return
    if head not in recipe.step_ids:
        close = difflib.get_close_matches(head, recipe.step_ids, n=1)
        fix = f"did you mean {close[0]!r}?" if close else f"step ids: {', '.join(recipe.step_ids)}"
        raise RecipeError([Problem(key, f"no step has id {head!r}", fix)], source=recipe.name)
    table = recipe_dict["steps"][recipe.step_index(head)]
    path = rest.split(".")
    for part in path[:-1]:
        inner = table.get(part)
        if isinstance(inner, str):
            inner = {"use": inner}
        if inner is None and part not in table:
            inner = _nested_default(registry, table, part, key, head)
        if not isinstance(inner, dict):
            inner = None
        if inner is None:
            raise RecipeError([Problem(key, f"{part!r} is not a nested component of step {head!r}",
                                       "sweep a nested parameter as <step>.<component field>.<parameter>")])
        table[part] = inner
        table = inner
    table[path[-1]] = value


def _configure(recipe: Recipe, params: Mapping[str, Any], registry: Any = None) -> Recipe:
    data = recipe.to_dict()
    for key, value in params.items():
        _set(data, recipe, key, value, registry)
    return Recipe.from_dict(data, source=recipe.name, folder=recipe.folder)


# ---------------------------------------------------------------------------
# One run (executed in a worker)
# ---------------------------------------------------------------------------

def _run_one(recipe_dict: dict[str, Any], data: pd.DataFrame | None, seed: np.random.SeedSequence,
             spec: RegistrySpec | None = None, token: str | None = None) -> dict[str, Any]:
    """Run one configuration; never raises for a failure of the run itself.
    ``data`` is ``None`` in a forked worker, which finds it under ``token``
    (:mod:`privclust.handover`)."""
    frame = data if data is not None else handed_data(token)  # type: ignore[arg-type]
    start = time.perf_counter()
    try:
        registry = worker_registry(spec, token)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # {"recipe": ..., "folder": ...}: a recipe file's, whose relative paths are its folder's ("recipe" is
            # no key of a recipe); else a recipe's dict
            recipe = Recipe.from_dict(recipe_dict["recipe"], folder=recipe_dict["folder"]) \
                if set(recipe_dict) == {"recipe", "folder"} else Recipe.from_dict(recipe_dict)
            release = run(recipe, frame, seed=seed, registry=registry)
    except Exception as err:  # a bug in a plugin must not take the other runs down
        raise_if_stopped()  # ... but a stop signal some code turned into another error stops the comparison
        if isinstance(err, PrivclustError):
            return {"error": f"{type(err).__name__}: {' '.join(str(err).split())}",
                    "seconds": time.perf_counter() - start}
        return {"error": f"{type(err).__name__} (unexpected): {err}", "seconds": time.perf_counter() - start}
    eps, delta = release.spent
    # The host's verdict decides whether the release is DP (a leak, a step released without spending, a release
    # that changes no column void it); the spent figures are a guarantee only then.
    dp = _is_dp(release)
    # The methods' own claims, composed by the run's accountant like the honest figures (parallel parts,
    # relations), not summed: each DP entry with its epsilon replaced by its claim.
    claimed = [attrs.evolve(e, epsilon=e.claimed_epsilon) if e.claimed_epsilon is not None else e
               for e in release.ledger.of_kind("dp")]
    # named as the run's verdict names them, with the plugin of every component that is not a built-in
    claimants = dp_claimants(release.ledger.entries, release.outcomes, release.snapshot) if dp else None
    row: dict[str, Any] = {"dp": dp, "dp_claimed_by": claimants,
                           **_file_guarantee(release, eps, delta, dp),
                           "epsilon": eps, "delta": delta,
                           "claimed_epsilon": float(release.accountant.total(claimed)[0]),
                           "seconds": time.perf_counter() - start, "error": None}
    records = release.evaluations.to_dict(orient="records")
    for record, n in zip(records, occurrences(records), strict=True):
        # an evaluator's second [[evaluate]] entry gets columns of its own (it overwrote the first's: red-team audit)
        row[f"{record['evaluator']}.{record['metric']}" + (f"#{n + 1}" if n else "")] = record["value"]
    return row


def _file_guarantee(release: Any, eps: float, delta: float, dp: bool) -> dict[str, Any]:
    """``dp_epsilon``, ``dp_delta`` and ``dp_relation`` of a run as its
    verdict states them: releases all stated under add/remove hold for the
    per-record file, which shows its number of records, under replace-one,
    counted twice (:func:`~privclust.verify.whole_file_relation`)."""
    if not dp:
        return {"dp_epsilon": math.nan, "dp_delta": math.nan, "dp_relation": None}
    relation = _relation(release)
    if relation is not None:
        strata = relation.partition(" (with the public stratum")
        eps, delta, stated = whole_file_relation(eps, delta, strata[0])
        relation = stated + "".join(strata[1:])
    return {"dp_epsilon": eps, "dp_delta": delta, "dp_relation": relation}


def _relation(release: Any) -> str | None:
    """The neighbouring relation a DP run's epsilon and delta hold under, as
    its verdict states it (an epsilon under add/remove is not one under
    replace-one: the same release counts twice under the latter)."""
    dp = release.ledger.of_kind("dp")
    relation_of = getattr(release.accountant, "relation", None)
    relation = relation_of(dp) if callable(relation_of) else None
    relation = relation or "; ".join(dict.fromkeys(e.relation for e in dp if e.relation)) or None
    strata = tuple(getattr(getattr(release.recipe, "roles", None), "strata", None) or ())
    if relation and strata:  # as the verdict says it
        relation += f" (with the public stratum column(s) {', '.join(strata)} fixed)"
    return relation


def _is_dp(release: Any) -> bool:
    """Whether the host's verdict on ``release`` is a differential-privacy
    guarantee: decided where the verdict decides it (any leak entry, a step
    that released without spending, no DP step, a release that changes no
    column, or a composed epsilon that is infinite or delta of 1 or more voids
    it), from the release's ledger, steps and checks."""
    return guarantees_dp(release.ledger.entries, release.accountant, release.outcomes, release.verification)


# ---------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------


def _progress_bar(total: int, enabled: bool) -> Any:
    return tqdm(total=total, desc="privclust compare", disable=None if enabled else True, leave=False)


def _run_local(tasks: list[tuple[dict[str, Any], np.random.SeedSequence]], data: pd.DataFrame,
               processes: int | None, progress: bool, registry: Any) -> list[dict[str, Any]]:
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    workers = min(processes or os.cpu_count() or 1, len(tasks))
    bar = _progress_bar(len(tasks), progress)
    with handed(registry, None, data) as handover, contextlib.closing(bar):
        token, spec = handover.token, handover.spec
        if workers <= 1:
            for i, (recipe, seed) in enumerate(tasks):
                results[i] = _run_one(recipe, data, seed, None, token)
                bar.update()
        else:
            # Forked children inherit the data and the registry (handover); otherwise the children start afresh:
            # send the data and rebuild the registry.
            context = mp.get_context("fork" if spec is None else "spawn")
            shipped = None if spec is None else data
            before = set(mp.active_children())
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=worker_signals,
                                       initargs=(os.getpid(),))
            try:
                futures = {pool.submit(_run_one, recipe, shipped, seed, spec, token): i
                           for i, (recipe, seed) in enumerate(tasks)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update()
                pool.shutdown(wait=True)
            except BaseException:  # Ctrl-C, SIGTERM, a broken worker: stop now, not after the queue
                stop_pool(pool, before)
                raise
    return [r for r in results if r is not None]


def _run_dask(tasks: list[tuple[dict[str, Any], np.random.SeedSequence]], data: pd.DataFrame, scheduler: Any,
              timeout: float, progress: bool, registry: Any) -> list[dict[str, Any]]:
    dask_completed = optional("distributed", DASK).as_completed
    client, owned = dask_client(scheduler, timeout)
    try:
        shipped = client.scatter(data, broadcast=True)
        spec = registry_spec(registry)
        futures = [client.submit(_run_one, recipe, shipped, seed, spec, pure=False) for recipe, seed in tasks]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[dict[str, Any] | None] = [None] * len(tasks)
        bar = _progress_bar(len(tasks), progress)
        try:
            for future in dask_completed(futures):
                results[index[future.key]] = future.result()
                bar.update()
        except BaseException:  # Ctrl-C, SIGTERM: cancel what is queued or running on the cluster
            with contextlib.suppress(Exception):
                client.cancel(futures, force=True)
            raise
        finally:
            bar.close()
        return [r for r in results if r is not None]
    finally:
        for resource in owned or ():
            resource.close()


# ---------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------


def _recipes(recipes: Any) -> list[tuple[str, Recipe]]:
    if isinstance(recipes, Recipe | str) or hasattr(recipes, "__fspath__") or (
            isinstance(recipes, Mapping) and "steps" in recipes):
        recipes = [recipes]
    if isinstance(recipes, Mapping):
        items = [(str(name), Recipe.load(r)) for name, r in recipes.items()]
    else:
        items = []
        for i, r in enumerate(recipes):
            recipe = Recipe.load(r)
            items.append((recipe.name or (str(r) if isinstance(r, str) and r.endswith(".toml") else f"recipe {i}"),
                          recipe))
    if not items:
        raise PrivclustError("compare() needs at least one recipe")
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        items = [(f"{n} [{i}]" if names.count(n) > 1 else n, r) for i, (n, r) in enumerate(items)]
    return items


def _grids(grid: Mapping[str, Any] | None, names: Sequence[str]) -> dict[str, Mapping[str, Sequence[Any]]]:
    """Per-recipe grids: ``{key: values}`` applies to every recipe;
    ``{recipe name: {key: values}}`` gives each recipe its own (a sweep key
    always has a dot, a recipe name used this way must not)."""
    if not grid:
        return {}
    per_recipe = {k: v for k, v in grid.items() if "." not in k}
    shared = {k: v for k, v in grid.items() if "." in k}
    unknown = [k for k in per_recipe if k not in names or not isinstance(per_recipe[k], Mapping)]
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, names, n=1)
            hints.append(f"{k!r}" + (f" (did you mean the recipe {close[0]!r}?)" if close else ""))
        raise PrivclustError(
            f"grid key(s) {', '.join(hints)}: a sweep key is <step id>.<parameter> (e.g. mask.k); a recipe's own "
            f"grid is {{recipe name: {{key: values}}}} with recipes named {', '.join(map(repr, names))}"
        )
    return {name: {**shared, **per_recipe.get(name, {})} for name in names}


def check_plot(recipes: Iterable[Recipe], risk: str | None = None, loss: str | None = None) -> None:
    """Check, before any run, that a risk-utility map of the comparison of
    ``recipes`` can be drawn (``privclust compare --plot``): matplotlib is
    installed, and each figure of the map is one the runs will compute. A
    figure's column is ``<evaluator>.<metric>``, the metric known only once
    a run has finished, so a figure named (``risk``, ``loss``) must begin
    with the name of an evaluator the recipes use, and a figure left to be
    chosen needs an evaluator whose name marks it as one (the words of
    :data:`privclust.plots.RISK_HINTS` and ``LOSS_HINTS``).

    :raises PrivclustError: naming the figure, the evaluators the recipes
        use, and the option to give.
    """
    optional("matplotlib.figure", PLOTS)
    used = list(dict.fromkeys(spec.use for recipe in recipes for spec in recipe.evaluate))
    listed = ", ".join(used) if used else "none: add an [[evaluate]] entry to the recipes"
    for what, option, given, hints in (("risk", "--risk", risk, RISK_HINTS),
                                       ("information-loss", "--loss", loss, LOSS_HINTS)):
        if given is not None:
            if higher_is_better(given):
                raise PrivclustError(f"{option} {given}: a figure where higher is better (agreement with the true "
                                     f"classes, an l-diversity, a group or cell size) is not usable as the {what} "
                                     "figure of the map, which takes both figures to be better when lower")
            if not any(given.startswith(f"{use}.") for use in used):
                raise PrivclustError(f"{option} {given}: no evaluator of the recipes computes it (a figure is "
                                     f"<evaluator>.<metric>; the recipes' evaluators: {listed})")
            continue
        if not any(h in use.lower() for use in used for h in hints if not f"{use}.".lower().startswith(
                HIGHER_IS_BETTER)):
            raise PrivclustError(f"--plot needs a {what} figure and no evaluator of the recipes is one by its name "
                                 f"(evaluators: {listed}); name the {what} figure with {option} <evaluator>.<metric>, "
                                 "or leave --plot out")


def selection_note(dp_runs: int) -> str:
    """What a table with differentially private runs says about choosing from it."""
    return (f"{dp_runs} differentially private run(s) of this comparison each spent the epsilon in its row on this "
            "same data, and the table's figures are computed from the original data: a release, or a "
            "configuration, chosen by them is chosen by reading the data, which no DP statement covers, so it has "
            "no differential-privacy guarantee as chosen. Choose on public or other data, then run the chosen "
            "recipe once on the data to publish.")


def compare(
    recipes: Any,
    data: pd.DataFrame,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    repeats: int = 1,
    seed: int | None = None,
    scheduler: Any = None,
    processes: int | None = None,
    timeout: float = 10.0,
    progress: bool = True,
    registry: Any = None,
) -> pd.DataFrame:
    """Run every configuration of every recipe ``repeats`` times.

    :param recipes: a recipe (Recipe, dict, TOML path), a list of them, or a
        dict ``{name: recipe}``. A recipe's name in the table is its key, its
        ``name`` or its position.
    :param data: the data frame every run protects (never modified).
    :param grid: ``{"<step id>.<param>": [values...], "privacy.epsilon": [...]}``;
        the cartesian product is applied to every recipe. To give each
        recipe its own sweep, key the grid by recipe name:
        ``{"MDAV": {"mask.clusterer.k": [3, 5]}, "fuzzy": {"mask.m2": [1.5, 2]}}``
        (keys with a dot apply to every recipe).
    :param repeats: runs per configuration (for randomised methods).
    :param seed: makes the table reproducible (every column but ``seconds``,
        the runs' wall-clock times); with ``None`` the runs
        take entropy from the operating system. Never written to the table;
        its column ``seeded`` says whether one was given (the DP figures of
        a seeded run hold only while the seed stays secret).
    :param scheduler: ``None`` for local processes, ``"local"`` for a Dask
        LocalCluster, a scheduler address, or a ``distributed.Client``.
    :param processes: local worker processes (default: the number of cores).
    :param timeout: seconds to wait for a Dask scheduler before giving up.
    :param progress: show a progress bar (on a terminal).
    :param registry: the registry to run against (default: the session
        registry); its in-session plugins and blocks reach every worker.
    :return: the tidy table (see the module docstring); ``summarize(table)``
        gives the mean and spread per configuration.
    :raises RecipeError: before anything runs, for a sweep over a step or
        parameter a recipe does not have, or values a component refuses.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise PrivclustError(f"repeats must be an integer >= 1; got {repeats!r}")
    check_engine(scheduler, processes, timeout)
    frame = check_frame(data)
    registry = registry if registry is not None else get_registry()
    named = _recipes(recipes)
    grids = _grids(grid, [name for name, _ in named])
    size = sum(grid_size(grids.get(name)) for name, _ in named)
    if size > MAX_CONFIGURATIONS:
        raise PrivclustError(_too_many(size))
    if size * repeats > MAX_RUNS:
        raise PrivclustError(f"the comparison asks for {size * repeats:,} runs ({size:,} configurations x {repeats} "
                             f"repeats), more than the limit of {MAX_RUNS:,}; lower --repeats or sweep fewer values")
    planned: list[tuple[str, int, dict[str, Any], Recipe]] = []
    problems: list[Problem] = []
    keys: list[str] = []
    for name, recipe in named:
        configurations = expand_grid(grids.get(name))
        keys += [k for k in configurations[0] if k not in keys]
        for c, params in enumerate(configurations):
            label = ", ".join(f"{k}={v}" for k, v in params.items()) or "as written"
            try:
                configured = _configure(recipe, params, registry)
                compile(configured, registry)
            except RecipeError as err:
                problems.extend(Problem(f"{name} [{label}] {_step_path(p.where, recipe)}".strip(), p.message,
                                        _own_key(_step_path(p.where, recipe), p, recipe, registry)
                                        or _step_path(p.fix, recipe) or "")
                                for p in err.problems)
                continue
            planned.append((name, c, params, configured))
    if problems:
        raise RecipeError(problems, source="comparison")

    root = np.random.SeedSequence(seed)
    tasks = []
    for index, (_, _, _, recipe) in enumerate(planned):
        for r in range(repeats):
            child = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, index, r))
            tasks.append(({"recipe": recipe.to_dict(), "folder": recipe.folder}, child))
    if scheduler is None:
        results = _run_local(tasks, frame, processes, progress, registry)
    else:
        results = _run_dask(tasks, frame, scheduler, timeout, progress, registry)

    rows = []
    for index, (name, c, params, _) in enumerate(planned):
        for r in range(repeats):
            result = results[index * repeats + r]
            rows.append({"recipe": name, "configuration": c, **{k: params.get(k) for k in keys}, "repeat": r,
                         **result, "seeded": seed is not None})
    table = pd.DataFrame(rows)
    for column in (*_PRIVACY_COLUMNS, "seconds", "error"):
        if column not in table.columns:
            table[column] = None if column in ("dp", "dp_claimed_by", "dp_relation", "error") else np.nan
    # True / False for a run that finished, missing (<NA>) for one that failed: it released nothing
    table["dp"] = table["dp"].astype("boolean")
    table["dp_claimed_by"] = table["dp_claimed_by"].astype("string")  # <NA> where dp is not True
    table["dp_relation"] = table["dp_relation"].astype("string")
    metrics = sorted(c for c in table.columns if c not in FIXED_COLUMNS and c not in keys)
    table = table[["recipe", "configuration", *keys, "repeat", *metrics, *_PRIVACY_COLUMNS, "seeded", "seconds",
                   "error"]]
    table.attrs["privclust"] = {"parameters": keys, "metrics": metrics, "repeats": repeats}
    dp_runs = int(table["dp"].fillna(False).sum())
    if dp_runs:
        table.attrs["privclust"]["note"] = selection_note(dp_runs)
        warnings.warn(selection_note(dp_runs), PrivclustWarning, stacklevel=2)
    return table


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of every figure per configuration, with
    the number of runs and of failed runs, and ``dp``: True when every run
    that finished is differentially private (the ``dp_epsilon`` and
    ``dp_delta`` figures are NaN for a configuration where any finished run
    is not), False when one is not, missing when none finished; and
    ``dp_claimed_by`` and ``dp_relation``, the components whose statements
    the ``dp`` figures rest on and the neighbouring relation they hold under
    (missing unless ``dp`` is True). The spent ``delta`` is kept
    beside ``epsilon``: a figure of epsilon alone would read as pure
    epsilon-DP. ``seeded`` says whether the runs were seeded."""
    meta = table.attrs.get("privclust", {})
    keys = list(meta.get("parameters", []))
    metrics = list(meta.get("metrics", [])) + ["dp_epsilon", "dp_delta", "epsilon", "delta", "claimed_epsilon",
                                               "seconds"]
    metrics = [m for m in metrics if m in table.columns]
    group = ["recipe", "configuration"]  # a configuration number names its parameter values
    ok = table[table["error"].isna()]
    stats = ok.groupby(group, sort=False)[metrics].agg(["mean", "std"])
    stats.columns = [f"{m} {s}" for m, s in stats.columns]
    by = table.groupby(group, sort=False)
    counts = by.agg(runs=("repeat", "size"), failed=("error", lambda e: int(e.notna().sum())))
    if "seeded" in table.columns:  # every run of a comparison is seeded or none is
        counts["seeded"] = by["seeded"].agg(lambda v: bool(v.astype(bool).any()))
    if "dp" in table.columns:
        finished = ok.groupby(group, sort=False)["dp"].agg(lambda d: bool(d.fillna(False).astype(bool).all()))
        counts["dp"] = finished.reindex(counts.index).astype("boolean")
        every = finished.reindex(stats.index).fillna(False).astype(bool)
        for column in ("dp_epsilon mean", "dp_epsilon std", "dp_delta mean", "dp_delta std"):
            if column in stats.columns:  # a guarantee only if every run has one
                stats.loc[~every, column] = np.nan
        for column in ("dp_claimed_by", "dp_relation"):  # whose statements the dp figures rest on, and under what
            if column in table.columns:
                values = ok.groupby(group, sort=False)[column].agg(
                    lambda c: "; ".join(dict.fromkeys(str(v) for v in c.dropna())) or None)
                counts[column] = values.reindex(counts.index).where(counts["dp"].fillna(False).astype(bool))
                counts[column] = counts[column].astype("string")
    params = by[keys].first() if keys else None
    out = (counts if params is None else params.join(counts)).join(stats).reset_index()
    out.attrs["privclust"] = {**meta, "summary": True}
    return out
