"""Compile a recipe against a registry: instantiate every component, find
every problem of the recipe before any data is read.

Compiling instantiates every component (so misspelt names and parameters are
found before any data is read) and asks the plugins'
``privclust_check_recipe`` hooks for more problems; everything found is
raised together in one :class:`~privclust.RecipeError`. Also here: the
planned privacy costs of the steps, the binding of edit rules to a step's
columns, and :class:`StepOutcome`, what one step of a run did.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .accountants import delta_within_budget, file_cost, sum_up, within_budget
from .accounting import Budget, at_least, exact, group_delta
from .claims import ADD_REMOVE, relation_kind
from .components import Partition, capability, component_params
from .constraints import ConstraintSet
from .errors import ConstraintError, PrivclustError, Problem, RecipeError
from .params import leak_problems, recipe_folder
from .recipe import EvaluateSpec, Recipe, Step, step_role_problems
from .registry import Registry, get_registry, unknown_leak_problems
from .specs import nested_components, step_id_params, thaw

__all__ = ["STEP_KINDS", "STEP_ROLES", "CompiledEvaluation", "CompiledRecipe", "CompiledStep", "StepOutcome",
           "bind_constraints", "changes_values_under_rules", "compile", "is_key_masker", "joined_rule_problems",
           "planned_cost", "planned_costs", "spanning_problems", "spends_privacy"]

#: The kinds a step may use, in the order a name is looked up.
STEP_KINDS = ("maskers", "clusterers", "noise_mechanisms")


STEP_ROLES = {"maskers": "masker", "clusterers": "clusterer", "noise_mechanisms": "noise mechanism"}


@attrs.frozen
class CompiledStep:
    """A recipe step with its component instantiated."""

    index: int
    id: str
    step: Step
    kind: str
    component: Any

    @property
    def role(self) -> str:
        return STEP_ROLES[self.kind]


@attrs.frozen
class CompiledEvaluation:
    spec: EvaluateSpec
    evaluator: Any


@attrs.frozen
class CompiledRecipe:
    """A recipe whose components are instantiated from a registry."""

    recipe: Recipe
    registry: Registry
    steps: tuple[CompiledStep, ...]
    constraints: tuple[Any, ...]
    evaluations: tuple[CompiledEvaluation, ...]

    @property
    def budget(self) -> Budget:
        return self.recipe.privacy


@attrs.frozen(kw_only=True)
class StepOutcome:
    """What one step did: its component, columns, result and time."""

    index: int
    id: str
    kind: str
    component: Any
    columns: tuple[str, ...]
    result: Any
    elapsed: float
    n_records: int
    output: str | None = None
    #: a masker's columns whose released values are identical to the step's
    #: input (a missing value equal to a missing value), as the host compared them
    unchanged: tuple[str, ...] = ()
    #: the step's ``within`` columns, and per record the number of the group it ran in (``None``: no ``within``)
    within: tuple[str, ...] = ()
    within_groups: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def name(self) -> str:
        return type(self.component).name

    @property
    def params(self) -> dict[str, Any]:
        return component_params(self.component)

    @property
    def partition(self) -> Partition | None:
        if isinstance(self.result, Partition):
            return self.result
        return getattr(self.result, "partition", None)

    @property
    def diagnostics(self) -> Mapping[str, Any]:
        return getattr(self.result, "diagnostics", {})

    def describe(self) -> str:
        """The step in one sentence, for its process entry in the ledger. It
        never states the run time: a time is a function of the data (a
        timing side channel no differential-privacy statement covers), so it
        stays in the entry's details (``elapsed_seconds``), which a
        non-disclosive report leaves out."""
        cols = ", ".join(self.columns)
        if self.kind == "clusterers":
            what = f"clustered {self.n_records} records on {cols} and released the labels as column {self.output!r}"
        elif self.kind == "maskers" and self.columns and set(self.columns) <= set(self.unchanged):
            what = (f"released columns {cols} of {self.n_records} records unchanged (the host compared them: every "
                    "value is identical to the step's input)")
        elif self.kind == "maskers":
            changed = ", ".join(c for c in self.columns if c not in self.unchanged)
            kept = ", ".join(c for c in self.columns if c in self.unchanged)
            what = f"replaced columns {changed} of {self.n_records} records" + (
                f" and released {kept} unchanged (every value identical to the step's input)" if kept else "")
        else:
            # true whatever the draw, and whatever the mechanism does: saying whether values changed would tell, in
            # a public report, that released values equal the original ones; and the host does not know that a
            # plugin's mechanism added noise ("added noise" stood beside the host's own check that it changed
            # nothing: a red-team audit)
            what = (f"was run on columns {cols} of {self.n_records} records (what noise it adds is the mechanism's "
                    "own statement; the host checks the released values in entries of its own)")
        if self.within:
            n_groups = int(self.within_groups.max()) + 1 if self.within_groups is not None and self.n_records else 0
            what += (f", running once on each of {n_groups} groups of records with identical values of "
                     f"{', '.join(self.within)} as the earlier steps released them (a missing value a value of its "
                     "own), within each stratum")
        return f"{STEP_ROLES[self.kind]} {self.name!r} {what}."

    def audit_details(self) -> dict[str, Any]:
        details = {"parameters": thaw(self.params), "columns": list(self.columns), "records": self.n_records,
                   "elapsed_seconds": self.elapsed}
        if self.within:
            details["within"] = list(self.within)
        if self.kind == "maskers":
            details["unchanged_columns"] = list(self.unchanged)
        return details


def _plan(component: Any) -> tuple[float, float, str | None]:
    """The least (epsilon, delta) a component will spend and the relation it
    spends under, as it declares (``planned_cost``, ``privacy_relation``). A
    component that declares no plan costs what the components nested in it
    plan (a DP clusterer inside microaggregation spends for its step); one
    that declares a plan speaks for those it nests. Nested costs under both
    relations count as replace-one ones (add/remove twice), as the
    accountant counts them."""
    plan = capability(component, "planned_cost")
    declared = capability(component, "privacy_relation")
    relation = None if declared is None else relation_kind(declared)
    if plan is not None:
        cost = plan()
        return (float(cost[0]), float(cost[1]), relation) if cost else (0.0, 0.0, relation)
    parts = [_plan(c) for location, _, c in nested_components(component) if "." not in location]  # children
    parts = [p for p in parts if p[0] > 0 or p[1] > 0]
    if not parts:
        return 0.0, 0.0, relation
    relations = {r for _, _, r in parts}
    if len(relations) == 1:
        return sum(p[0] for p in parts), sum(p[1] for p in parts), relations.pop()
    return (sum(2.0 * e if r == "add/remove" else e for e, _, r in parts),
            sum(group_delta(e, d) if r == "add/remove" else d for e, d, r in parts), "replace-one")


#: The kinds of nested components a component runs through their own step method (``fit``, ``mask``), as
#: a step runs them; a nested noise mechanism is called through ``release``, with the epsilon and the values
#: its caller gives, so its step checks (epsilon and bounds as a step) do not apply.
_RUN_AS_STEPS = ("clusterers", "maskers")


def _nested_step_problems(component: Any, where: str) -> list[Problem]:
    """The step checks (``step_problems``) of the clusterers and maskers
    nested in ``component``, which declares none itself: it runs them
    through their own step method (microaggregation fits its clusterer as
    a clusterer step is fitted), so what refuses them as a step refuses them
    there, and is found when the recipe is compiled, before any step runs,
    not when the step runs after the steps before it did their work. As
    with :func:`_plan`, a component that declares ``step_problems`` speaks
    for the components it nests (fuzzy microaggregation sets its clusterer's
    ``n_clusters``, and checks the clusterer as it will run it); one that
    declares none passes the question on to its own nested components."""
    owner = type(component).name
    problems: list[Problem] = []
    for location, kind, inner in nested_components(component):
        if "." in location or kind not in _RUN_AS_STEPS:  # children only; theirs come through them
            continue
        at = f"{where}.{location}"
        check = capability(inner, "step_problems")
        if check is None:
            problems.extend(_nested_step_problems(inner, at))
            continue
        name = type(inner).name
        for text in check() or ():
            problems.append(Problem(at, f"{name}, the {location} of {owner}, runs as a step of it: {text}",
                                    f"give it in the nested table: {location} = {{ use = \"{name}\", ... }}"))
    return problems


def spends_privacy(component: Any) -> bool:
    """Whether a component is differentially private, as it declares: a
    ``privacy_relation``, or a planned cost of its own or of a component it
    nests."""
    eps, delta, relation = _plan(component)
    return relation is not None or eps > 0 or delta > 0


def planned_cost(component: Any) -> tuple[float, float]:
    """The least (epsilon, delta) a component will spend (:func:`_plan`)."""
    eps, delta, _ = _plan(component)
    return eps, delta


def planned_costs(steps: Sequence[Any]) -> list[tuple[float, float, bool]]:
    """Each step's planned (epsilon, delta) as the accountant will count it,
    and whether it was converted: when a costed step may release under
    replace-one (it says so, or says nothing) and another declares
    add/remove, the add/remove costs count as replace-one ones (2 epsilon,
    (1 + e^epsilon) delta), as :meth:`BasicAccountant.total` counts them."""
    plans = [((eps, delta), relation) for eps, delta, relation in (_plan(cs.component) for cs in steps)]
    costed = [relation for (eps, _), relation in plans if eps > 0]
    mixed = "add/remove" in costed and any(r != "add/remove" for r in costed)
    out = []
    for (eps, delta), relation in plans:
        if mixed and relation == "add/remove" and eps > 0:
            out.append((2.0 * eps, group_delta(eps, delta), True))
        else:
            out.append((eps, delta, False))
    return out


def compile(recipe: Recipe | Mapping[str, Any] | str, registry: Registry | None = None) -> CompiledRecipe:  # noqa: A001
    """Check a recipe against the installed plugins and instantiate its
    components, without touching any data. The relative paths of the
    parameters declared ``param(role="path")`` are resolved against the
    recipe file's folder (:attr:`Recipe.folder`) as the components are built.

    :raises RecipeError: with every problem found, each with its location
        (``steps[1].clusterer.m``) and a fix.
    """
    recipe = Recipe.load(recipe)
    with recipe_folder(recipe.folder):
        return _compiled(recipe, registry)


def _compiled(recipe: Recipe, registry: Registry | None) -> CompiledRecipe:
    """:func:`compile`, the recipe loaded."""
    registry = registry if registry is not None else get_registry()
    problems: list[Problem] = unknown_leak_problems(recipe.privacy, registry)  # secure defaults for DP

    steps: list[CompiledStep] = []
    for i, (step, step_id) in enumerate(zip(recipe.steps, recipe.step_ids, strict=True)):
        where = f"steps[{i}]"
        registered_as = registry.kind_of(step.use)  # a name, or plugin:name (a replaced component chosen back)
        kinds = [k for k in STEP_KINDS if k in registered_as]
        if not kinds:
            other = registered_as
            if other:
                problems.append(Problem(f"{where}.use", f"{step.use!r} is one of the {other[0].replace('_', ' ')}, "
                                        "not a step component",
                                        "list evaluators under [[evaluate]] and edit rules under [[constraints]]"))
                continue
            known = [n for k in STEP_KINDS for n in registry.tables[k]]
            close = difflib.get_close_matches(step.use, known, n=3, cutoff=0.5)
            fix = ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else (
                "run `privclust plugins` to list the installed components")
            problems.append(Problem(f"{where}.use", f"unknown component {step.use!r}", fix))
            continue
        kind = kinds[0]
        if step.output is not None and kind != "clusterers":
            problems.append(Problem(f"{where}.output", f"only a clusterer step releases a label column; "
                                    f"{step.use!r} is a {STEP_ROLES[kind]}", "remove 'output'"))
        try:
            component = registry.create(kind, step.spec, where=where)
        except RecipeError as err:
            problems.extend(err.problems)
            continue
        check = capability(component, "step_problems")
        for text in (check() if check is not None else ()) or ():
            problems.append(Problem(where, str(text)))
        if check is None:  # a component that declares its step checks speaks for those it nests
            problems.extend(_nested_step_problems(component, where))
        infinite = [f"{what} = {value:g}" for what, value in zip(("epsilon", "delta"), planned_cost(component),
                                                                  strict=True) if not math.isfinite(value)]
        if infinite:  # no noise would be added, or its scale would overflow: refused before any data are read
            problems.append(Problem(where, f"{step.use} would spend {' and '.join(infinite)}; a step's privacy cost "
                                    "must be a finite number", "give a finite value, e.g. epsilon = 1.0"))
        problems.extend(leak_problems(component, recipe.privacy, where))  # secure defaults for DP
        if step.within is not None and spends_privacy(component):
            problems.append(Problem(f"{where}.within", f"{step.use!r} is differentially private; with within it would "
                                    "run once per group of values released by the earlier steps, groups that may be "
                                    "chosen from the data, so no parallel composition over them can be claimed and "
                                    "the guarantee would not hold as stated",
                                    "remove within (strata, [roles] strata, are public and compose in parallel)"))
        problems.extend(_step_id_problems(component, where, recipe.step_ids))
        steps.append(CompiledStep(i, step_id, step, kind, component))

    constraints = []
    checked: list[bool] = []  # per handler, whether its own rules passed its check
    for i, spec in enumerate(recipe.constraints):
        where = f"constraints[{i}]"
        try:
            handler = registry.create("constraint_handlers", spec, where=where)
        except RecipeError as err:
            problems.extend(err.problems)
            continue
        own = [p if isinstance(p, Problem) else Problem(where, str(p)) for p in handler.check(None) or ()]
        problems.extend(own)
        constraints.append(handler)
        checked.append(not own)
    problems.extend(joined_rule_problems(constraints, checked))

    evaluations = []
    for i, evaluate_spec in enumerate(recipe.evaluate):
        where = f"evaluate[{i}]"
        try:
            evaluator = registry.create("evaluators", evaluate_spec.spec, where=where)
        except RecipeError as err:
            problems.extend(err.problems)
            continue
        problems.extend(_step_id_problems(evaluator, where, recipe.step_ids))
        evaluations.append(CompiledEvaluation(evaluate_spec, evaluator))

    # Keys are named by key maskers only (judged here, with the components in hand).
    problems.extend(step_role_problems(recipe.roles, [cs.step for cs in steps], [cs.index for cs in steps],
                                            key_maskers=[is_key_masker(cs) for cs in steps]))
    # Rules must not straddle the explicit columns of a step that changes values.
    for cs in steps:
        if cs.step.columns is not None and changes_values_under_rules(cs):
            problems.extend(spanning_problems(cs, constraints, cs.step.columns))

    if recipe.privacy.limited:
        costs = planned_costs(steps)
        relations = {r for (eps, _, r) in (_plan(cs.component) for cs in steps) if eps > 0}
        # every costed step under add/remove: the file, which shows n, holds under replace-one, counted twice
        twice = relations == {ADD_REMOVE}
        planned, planned_delta = file_cost(sum_up(c[0] for c in costs), sum_up(c[1] for c in costs),
                                           ADD_REMOVE if twice else None)
        assert recipe.privacy.epsilon is not None
        if not math.isnan(planned) and not within_budget(planned, recipe.privacy.epsilon, len(costs)):
            parts = ", ".join(f"steps[{cs.index}] {at_least(c[0])}" + (" (add/remove, counted twice under replace-one)"
                                                               if c[2] else "")
                              for cs, c in zip(steps, costs, strict=True) if c[0])
            if twice:
                parts += ("; all under add/remove, counted twice: the released file shows its number of records, so "
                          "it holds under replace-one")
            problems.append(Problem("privacy.epsilon",
                                    f"the steps need at least epsilon = {at_least(planned)} ({parts}) "
                                    f"but the budget is {exact(recipe.privacy.epsilon)}",
                                    "raise [privacy] epsilon or lower the steps' epsilon"))
        if not math.isnan(planned_delta) and not delta_within_budget(planned_delta, recipe.privacy.delta, len(costs)):
            problems.append(Problem("privacy.delta",
                                    f"the steps need at least delta = {at_least(planned_delta)} but the "
                                    f"budget is {exact(recipe.privacy.delta)}", "raise [privacy] delta"))

    compiled = CompiledRecipe(recipe, registry, tuple(steps), tuple(constraints), tuple(evaluations))
    problems.extend(registry.hooks.check_recipe(recipe=recipe, registry=registry))
    if problems:
        raise RecipeError(problems, source=recipe.name)
    return compiled


def _step_id_problems(component: Any, where: str, step_ids: Sequence[str]) -> list[Problem]:
    """A parameter that names a step by its id (``param(..., step_id=True)``,
    such as group-sizes' ``step``) must name a step of the recipe: refused
    here, before any data are read, not after every step has run."""
    problems = []
    for location, value in step_id_params(component):
        if value in step_ids:
            continue
        close = difflib.get_close_matches(str(value), list(step_ids), n=1, cutoff=0.5)
        problems.append(Problem(f"{where}.{location}", f"{type(component).name}: no step has id {value!r}; the "
                                f"recipe's step ids are {', '.join(map(repr, step_ids)) or '(none: it has no steps)'}",
                                (f"did you mean {close[0]!r}? " if close else "")
                                + "give the id of a step (its 'id', or else its 'use', numbered 'use-2', ... when "
                                  "repeated)"))
    return problems


def joined_rule_problems(constraints: Sequence[Any], checked: Sequence[bool] | None = None) -> list[Problem]:
    """Rules of several ``[[constraints]]`` tables that cannot hold together.

    Each handler's rules are bound to every column the tables' rules use and
    joined with those of the earlier tables that can be joined (the
    ``joined_with`` capability of the bound rules, e.g. ``linear`` with
    ``linear``, as the host joins them to round integer columns); a join
    that raises a :class:`~privclust.ConstraintError` (its rules contradict
    each other, or no point satisfies them together) is a problem of the
    later table. Tables whose own check found problems (``checked`` false)
    are left out, and so are tables whose bound rules cannot be joined with
    any other: their rules are checked only on their own."""
    if len(constraints) < 2:
        return []
    used = [c for h in constraints for v in h.variables() for c in sorted(v)]
    columns = tuple(dict.fromkeys(used))
    groups: list[tuple[list[int], Any]] = []  # (tables joined, their joined bound rules)
    problems = []
    for h, handler in enumerate(constraints):
        if checked is not None and not checked[h]:
            continue
        try:
            bound = handler.bind(columns)
        except PrivclustError:
            continue  # its own rules do not bind: its check speaks for it
        for g, (tables, joined) in enumerate(groups):
            join = capability(joined, "joined_with")
            if join is None:
                continue
            try:
                merged = join(bound)
            except ConstraintError as err:
                others = ", ".join(f"constraints[{t}]" for t in tables)
                problems.append(Problem(f"constraints[{h}]", f"its rules and those of {others} cannot all hold "
                                        f"together: {err}"))
                break
            if merged is not None:
                groups[g] = ([*tables, h], merged)
                break
        else:
            groups.append(([h], bound))
    return problems


def changes_values_under_rules(cs: CompiledStep) -> bool:
    """A masker that uses edit rules must hold every rule it touches entirely;
    a clusterer only releases labels (its centres honour the rules that lie
    within its columns); noise mechanisms do not use rules."""
    return cs.kind == "maskers" and bool(capability(cs.component, "uses_constraints"))


def _rule_sets(constraints: Sequence[Any]) -> list[tuple[int, int, str, frozenset[str]]]:
    out = []
    for h, handler in enumerate(constraints):
        texts = handler.describe()
        for r, variables in enumerate(handler.variables()):
            out.append((h, r, texts[r], frozenset(variables)))
    return out


def spanning_problems(cs: CompiledStep, constraints: Sequence[Any], columns: Sequence[str]) -> list[Problem]:
    problems = []
    cols = set(columns)
    for h, _, text, variables in _rule_sets(constraints):
        inside = variables & cols
        if inside and inside != variables:
            outside = sorted(variables - cols)
            problems.append(Problem(
                f"steps[{cs.index}].columns",
                f"edit rule {text!r} (constraints[{h}]) uses columns {sorted(inside)} of this step and "
                f"{outside} outside it, so the step cannot make it hold",
                f"put {', '.join(outside)} in this step's columns, or split the rule",
            ))
    return problems


def bind_constraints(cs: CompiledStep, constraints: Sequence[Any], columns: Sequence[str]) -> ConstraintSet | None:
    if not constraints:
        return None
    cols = set(columns)
    parts: list[Any] = []
    used: list[Any] = []
    names: list[str] = []
    for handler in constraints:
        chosen = [r for r, variables in enumerate(handler.variables()) if variables and set(variables) <= cols]
        if chosen:
            parts.append(handler.bind(tuple(columns), rules=chosen))
            used.extend(handler.variables()[r] for r in chosen)
            names.append(str(getattr(handler, "name", type(handler).__name__)))
    return ConstraintSet(columns, parts, variables=used, handlers=names) if parts else None


def is_key_masker(cs: CompiledStep) -> bool:
    """Whether the step's component treats categorical keys (the ``key_masker`` capability, maskers only)."""
    return cs.kind == "maskers" and capability(cs.component, "key_masker") is True

