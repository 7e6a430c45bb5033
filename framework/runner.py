"""Run a recipe on a DataFrame, return a Release: the orchestration of the
run pipeline.

1. :mod:`~privclust.compiling`: compile the recipe against the registry
   (every component instantiated, every problem of the recipe found before
   any data is read);
2. :mod:`~privclust.preflight`: check the data (columns exist, are numeric
   and finite, enough records, roles, strata);
3. :mod:`~privclust.execute`: run the steps in order (the only loop over
   steps: in-process, per stratum, or each stratum on a worker);
4. :mod:`~privclust.integers`: release the integer columns as integers;
5. :mod:`~privclust.rule_check` and :mod:`~privclust.verify`: the host's
   checks of the released file (edit rules, k-anonymity, records released
   verbatim) and the verdict;
6. :mod:`~privclust.evaluation`: the evaluators, last.

The input frame is never modified. The names of the pipeline used from here
(``privclust.runner.compile``, ``preflight``, ``check_data``...) are
re-exported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._reading import keep_text
from .accountants import Accountant, delta_within_budget, within_budget
from .accounting import PrivacyContext
from .comparison import positive_zeros
from .compiling import STEP_KINDS, CompiledRecipe, CompiledStep, StepOutcome, compile, planned_costs
from .components import capability
from .constraints import ConstraintSet
from .errors import BudgetExceededError, ParameterError
from .evaluation import evaluate_release
from .execute import StepCall, by_parts, execute, strata_remotely
from .integers import integer_columns, release_integers, restore_nullable_floats
from .ledger import Ledger, at_least, exact
from .preflight import Preflight, check_data, default_step_columns, numeric_columns, preflight, strata_statement
from .provenance import snapshot
from .recipe import Recipe
from .registry import Registry
from .report import Release
from .rule_check import record_rules
from .verdict import random_step_names, verdict
from .verify import verify

__all__ = ["STEP_KINDS", "CompiledRecipe", "CompiledStep", "Preflight", "StepOutcome", "check_data", "compile",
           "default_step_columns", "integer_columns", "numeric_columns", "planned_costs", "preflight",
           "release_integers", "run", "run_checked"]


def run(
    recipe: Recipe | Mapping[str, Any] | str | CompiledRecipe,
    data: pd.DataFrame,
    seed: int | np.random.SeedSequence | None = None,
    *,
    registry: Registry | None = None,
    scheduler: Any = None,
    processes: int | None = None,
    timeout: float = 10.0,
) -> Release:
    """Run a recipe on a DataFrame and return a :class:`~privclust.Release`.

    :param recipe: a :class:`Recipe`, a dict, a TOML path or text, or a
        compiled recipe.
    :param data: the data to protect; never modified.
    :param seed: for reproducible experiments only. With ``None`` the
        randomness comes from the operating system. The seed never appears in
        the ledger or the report, which say only that the run was seeded, and
        the run keeps no copy of it.
    :param registry: the registry to resolve components from (default: the
        session registry).
    :param scheduler: with ``[roles] strata``, run the strata as independent
        tasks on a Dask cluster: ``"local"`` (a LocalCluster for the call),
        an address such as ``tcp://host:8786``, or a ``distributed.Client``.
    :param processes: with ``[roles] strata`` and no ``scheduler``, run the
        strata on this many local processes. Either way each stratum runs
        every step in a context of its own, seeded from the run, and the host
        combines the results, the ledger entries and the checks exactly as in
        a single process. The random draws depend on the seed and the strata
        only: each stratum draws from a seed of its own, spawned from the
        run's, wherever it runs, so a seeded run gives the same release with
        or without ``processes`` or ``scheduler``.
    :param timeout: seconds to wait for a Dask scheduler.
    :raises PrivclustError: among others when a step releases a value that is
        not finite (nothing is returned).
    """
    compiled = recipe if isinstance(recipe, CompiledRecipe) else compile(recipe, registry)
    return run_checked(compiled, preflight(compiled, data), seed, scheduler=scheduler, processes=processes,
                        timeout=timeout)


def run_checked(compiled: CompiledRecipe, checked: Preflight, seed: int | np.random.SeedSequence | None, *,
                scheduler: Any = None, processes: int | None = None, timeout: float = 10.0) -> Release:
    """:func:`run` after the preflight checks (``checked``); also what
    :func:`privclust.run_dataset` runs on each stratum, in a worker."""
    registry = compiled.registry
    frame, step_columns, parts = checked.frame, checked.step_columns, checked.parts
    roles = compiled.recipe.roles
    default_columns = checked.default_columns or default_step_columns(frame, roles)
    part_column = ", ".join(roles.strata)

    context = PrivacyContext(compiled.budget, seed=seed, registry=registry)
    del seed
    # the host's own references, taken before the first step: what the verdict and the report read (a component
    # that replaced context.ledger made the verdict state epsilon 0.01 for a laplace step of 5: a red-team audit)
    held = context._held()
    ledger, accountant = context._ledger, context._accountant
    call: StepCall | None = None
    if scheduler is not None or processes is not None:
        if parts is None:
            raise ParameterError("scheduler and processes run the strata of [roles] strata as independent tasks; "
                                 "declare strata (e.g. [roles] strata = \"region\") or leave them out")
        call = strata_remotely(compiled, frame, step_columns, parts, context, scheduler, processes, timeout)
    elif parts is not None:
        call = by_parts(part_column, parts, context)
    done = execute(compiled, frame, step_columns, context, call=call, parts=parts)
    context._check_held(held, "a step")
    _within_budget(compiled, ledger, accountant)
    current, labels, outcomes = done.data, done.labels, list(done.outcomes)

    all_constraints = ConstraintSet.of(compiled.constraints, tuple(map(str, frame.columns)))
    rounding = release_integers(context, frame, current, outcomes, compiled.constraints, all_constraints)
    restore_nullable_floats(frame, current)
    positive_zeros(current)  # -0.0 and 0.0 are one value to the host's checks: one in the file too
    broken_rules = record_rules(context, all_constraints, current, rounding)
    if parts is not None:
        context._record_host("verified", strata_statement(roles.strata, parts, checked.merges, outcomes),
                             details={"strata": list(roles.strata), "merged": list(checked.merges),
                                      "parts": {text: int(len(rows)) for text, rows in parts}},
                             mechanism="strata")
    checks = verify(context, frame, current, outcomes, label_columns=tuple(labels.columns), strata=roles.strata,
                    keys=roles.keys, broken_rules=broken_rules, parts=parts, role_columns=(*roles.ids, *roles.weight),
                    weight=roles.weight)
    keep_text(frame, current, checks["unchanged_columns"])  # written with their original text (a CSV read)

    changed = tuple(c for c in frame.columns if any(c in o.columns for o in outcomes if o.kind != "clusterers"
                                                    and capability(o.component, "key_masker") is not True))
    evaluations, before = evaluate_release(compiled, frame, current, labels, outcomes, all_constraints, context,
                                           changed or default_columns)
    context._check_held(held, "an evaluator")
    _within_budget(compiled, ledger, accountant)
    provenance = snapshot(registry, outcomes, compiled.constraints, evaluations)
    # the input's attrs (pandas copies them into every derived frame, read_parquet restores an input file's) are
    # not the release's: they would be written into the released Parquet file's metadata (rt21 F2). The host's own
    # copies: the caller's frame keeps its attrs
    current.attrs, labels.attrs = {}, {}
    return Release(
        data=current,
        original=frame,
        labels=labels,
        outcomes=tuple(outcomes),
        ledger=ledger,
        evaluations=evaluations,
        before=before,
        recipe=compiled.recipe,
        seeded=context.seeded,
        budget=compiled.budget,
        accountant=accountant,
        registry=registry,
        verdict=verdict(ledger, accountant, outcomes, checks, strata=roles.strata,
                        seeded=context.seeded, randomised=random_step_names(outcomes, context.random_steps),
                        provenance=provenance),
        random_steps=context.random_steps,
        verification=checks,
        snapshot=provenance,
        # the rows' written order, from a stream of its own spawned last: nothing the steps or evaluators drew
        # depends on it
        publication_order=np.random.default_rng(context.spawn_seeds(1)[0]).permutation(current.shape[0]),
    )


def _within_budget(compiled: CompiledRecipe, ledger: Ledger, accountant: Accountant) -> None:
    """The run's total, composed by the host's accountant from the host's
    ledger, checked once more against the recipe's budget after the steps:
    every spend was checked when it was made, so only an entry recorded
    around the accountant can fail here."""
    budget = compiled.budget
    if not budget.limited:
        return
    assert budget.epsilon is not None
    eps, delta = accountant.total(ledger.entries)
    terms = sum(1 for e in ledger.entries if e.kind == "dp")
    over = []  # a NaN or negative total is not over (the verdict voids the DP guarantee of an impossible total); inf is
    if not math.isnan(eps) and not within_budget(eps, budget.epsilon, terms):
        over.append(f"epsilon {at_least(eps)} > the budget epsilon={exact(budget.epsilon)}")
    if not math.isnan(delta) and not delta_within_budget(delta, budget.delta, terms):
        over.append(f"delta {at_least(delta, 3)} > the budget delta={exact(budget.delta)}")
    if over:
        steps = sorted({f"step {e.step} ({e.step_id})" for e in ledger.entries
                        if e.kind == "dp" and e.step is not None})
        raise BudgetExceededError(
            f"the run's ledger spends {' and '.join(over)} (the releases of {', '.join(steps) or 'no step'}), although "
            "every spend is checked against the budget when it is made: an entry was recorded around the accountant. "
            "The run is refused and nothing is released.")
