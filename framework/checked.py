"""What ``privclust check --input`` says it checked on the data, said of
the recipe at hand: the sentences of the data line (:func:`checked_text`),
the groups of each ``within`` step (:func:`within_lines`) and what is left to
the run (:data:`UNCHECKED`). The checks themselves are
:func:`privclust.runner.preflight`'s, which ``run`` makes too: this module
only words what they covered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .compiling import is_key_masker
from .components import EvaluationInputs, capability
from .errors import DataError
from .execute import within_parts, within_problems
from .preflight import evaluation_default_columns, written_before
from .recipe import DEFAULT_LABEL_COLUMN, within_columns

__all__ = ["UNCHECKED", "checked_text", "within_lines"]


def _numeric_and_named(compiled: Any, checked: Any,
                       numeric_steps: Sequence[Sequence[str]]) -> tuple[list[str], list[str]]:
    """The columns :func:`preflight` checked as numbers (the steps' but a key masker's, and each evaluation's own
    columns), and the other columns the evaluators say they compute on (``evaluated_on``: key variables, a weight),
    which it checked only to be present, as preflight asks the evaluators."""
    frame = checked.frame
    default = evaluation_default_columns(compiled, frame, checked.step_columns, checked.default_columns)
    numbers = [c for cols in numeric_steps for c in cols]
    labels = pd.DataFrame({cs.step.output or DEFAULT_LABEL_COLUMN: np.zeros(len(frame), dtype=np.int64)
                           for cs in compiled.steps if cs.kind == "clusterers"}, index=frame.index)
    named: list[str] = []
    for ev in compiled.evaluations:
        columns = tuple(ev.spec.columns) if ev.spec.columns is not None else default
        numbers += columns
        method = capability(ev.evaluator, "evaluated_on")
        if method is None:
            continue
        said = method(EvaluationInputs(original=frame, protected=frame, columns=columns, labels=labels,
                                       registry=compiled.registry, roles=compiled.recipe.roles,
                                       columns_named=ev.spec.columns is not None))
        given = said.get("columns") if isinstance(said, Mapping) else None
        if isinstance(given, Sequence) and not isinstance(given, str):
            named += [c for c in given if isinstance(c, str) and c in frame.columns]
    numbers = list(dict.fromkeys(numbers))
    return numbers, [c for c in dict.fromkeys(named) if c not in numbers]


#: What ``privclust check --input`` has checked when it says OK: the checks
#: ``run`` makes before its first step (:func:`privclust.runner.preflight`).
def checked_text(compiled: Any, checked: Any) -> str:
    """What ``privclust check --input`` checked on the data, said of this recipe only: the parts it has (a
    fixed sentence said "numeric and finite", a bounds table and edit rules of a recipe of key maskers on text keys,
    which has none of them: a red-team audit; and it said so of the text keys an evaluator names and of a step's
    column whose missing values the step accepts: rt14). ``checked``: what :func:`preflight` returned."""
    steps, evaluations, rules = compiled.steps, compiled.recipe.evaluate, compiled.constraints
    frame = checked.frame
    keyed = [cs for cs in steps if is_key_masker(cs)]
    numeric_steps = [cols for cs, cols in zip(steps, checked.step_columns, strict=True) if not is_key_masker(cs)]
    numeric = len(keyed) < len(steps) or bool(evaluations)
    named = (["the steps"] + (["the evaluations (those their evaluators say they compute on included)"]
                              if evaluations else []) + ["the roles"] + (["the rules"] if rules else []))
    present = ", ".join(named[:-1]) + " and " + named[-1]
    parts = [f"every column of {present} is present"]
    if numeric:
        checked_numeric, extras = _numeric_and_named(compiled, checked, numeric_steps)
        workers = "the steps and evaluations" if evaluations else "the steps"
        holed = [(c, int(frame[c].isna().sum())) for c in checked_numeric if frame[c].isna().any()]
        aside = ([f"except {', '.join(extras)}, which an evaluator names beside its columns: not checked as "
                  "numbers"] if extras else []) + \
            (["a key masker's columns are categories, not checked as numbers"] if keyed else [])
        tail = f" ({'; '.join(aside)})" if aside else ""
        parts.append(f"those {workers} work on are numeric" + (" with no infinite value" if holed else " and finite")
                     + tail)
        if holed:
            parts.append("missing values, which every step and evaluation on their column accepts: "
                         + ", ".join(f"{n} in {c}" for c, n in holed))
    parts.extend(_values_text(compiled, checked))
    if any(isinstance(getattr(cs.component, "bounds", None), Mapping) for cs in steps):
        parts.append("each step's bounds table covers its columns")
    parts.append("there are enough records for each step")
    if rules:
        parts.append("no edit rule is one that no record can satisfy with the data's whole-number (integer dtype) "
                     "columns")
    return "; ".join(parts)


def _values_text(compiled: Any, checked: Any) -> list[str]:
    """What ``privclust check --input`` says of the steps' own checks of their columns' values
    (``data_problems``): which steps accept the values (asked by :func:`preflight`), and which check them only as
    they run: their columns are changed by an earlier step, or (a key masker, which takes columns of any dtype)
    they state no such checks. A key masker's columns were said to "hold any categories" while local-suppression
    refused fractions and pram a category its matrix has no row for, as the run began (rt22)."""
    def named(steps: Sequence[Any]) -> str:
        texts = [f"{cs.index} {cs.id!r}" for cs in steps]
        return ("step " if len(texts) == 1 else "steps ") + (", ".join(texts[:-1]) + " and " if len(texts) > 1
                                                             else "") + texts[-1]
    stating = [cs for cs in compiled.steps if capability(cs.component, "data_problems") is not None]
    later = [cs for cs in stating if written_before(compiled.steps, checked.step_columns, cs.index)
             & set(checked.step_columns[cs.index])]
    asked = [cs for cs in stating if cs not in later]
    silent = [cs for cs in compiled.steps if is_key_masker(cs) and cs not in stating]
    parts = []
    if asked:
        one = len(asked) == 1
        parts.append(f"{named(asked)} accept{'s' if one else ''} the values of {'its' if one else 'their'} columns "
                     + ("(the step's own checks)" if one else "(the steps' own checks)"))
    if later:
        one = len(later) == 1
        parts.append(f"{named(later)} check{'s' if one else ''} the values of {'its' if one else 'their'} columns "
                     f"only as {'it runs' if one else 'they run'}: an earlier step changes them")
    if silent:
        one = len(silent) == 1
        parts.append(f"{named(silent)}, key masker{'' if one else 's'} stating no checks of "
                     f"{'its' if one else 'their'} values, check{'s' if one else ''} them only as "
                     f"{'it runs' if one else 'they run'}")
    return parts


#: What ``privclust check --input`` cannot check, said after its OK: ``run`` may still refuse the recipe for
#: these as the recipe runs (nothing is written then). The OK alone read as a promise
#: that ``run`` would succeed, and a geometric step on a column of fractions passed check and failed in run (geometric
#: now rounds such values, as a refusal would tell a data set from its neighbour).
UNCHECKED = ("checked only as the recipe runs: the components' checks of the values that they do not state before "
             "the run (such as the fuzzy clusterers' limit of 1e300 on magnitudes), bounds taken from the data or by "
             "a DP quantile, and the partition an evaluator needs from the steps (such as group-sizes')")


def within_lines(compiled: Any, checked: Any) -> list[str]:
    """For ``check``: the groups each ``within`` step runs on, counted on the
    data as given (exact when no earlier step changes the within columns)."""
    problems = within_problems(compiled, checked.frame, checked.step_columns)
    if problems:
        raise DataError("; ".join(problems))
    lines = []
    for cs, columns in zip(compiled.steps, checked.step_columns, strict=True):
        within = within_columns(cs.step, compiled.recipe.roles)
        if not within:
            continue
        earlier = [c for c in within if any(c in cols for e, cols in zip(compiled.steps, checked.step_columns,
                                                                         strict=True)
                                            if e.index < cs.index and e.kind != "clusterers")]
        if not all(c in checked.frame.columns for c in within):  # an earlier clusterer's labels: counted as it runs
            lines.append(f"step {cs.index} {cs.id!r} runs within groups of identical {', '.join(within)}, the labels "
                         "of an earlier step: counted, and a group too small refused, when the step runs")
            continue
        groups = within_parts(cs, checked.frame, within, checked.parts, len(columns), refuse=not earlier,
                              strata=compiled.recipe.roles.strata)
        sizes = [len(rows) for _, rows in groups]
        line = (f"step {cs.index} {cs.id!r} runs within groups of identical {', '.join(within)}: on the data as given, "
                f"{len(sizes)} groups, the smallest of {min(sizes) if sizes else 0} record(s)")
        if earlier:
            line += (f"; earlier steps change {', '.join(earlier)}, so the step runs on the groups of the values they "
                     "release (counted, and a group too small refused, when the step runs)")
        lines.append(line)
    return lines
