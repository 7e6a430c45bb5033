"""The release's check of the edit rules: after the last step (and the
rounding of the integer columns), the host judges every rule on the released
file and records what it found in the ledger."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .accounting import PrivacyContext
from .constraints import RULE_RTOL, ConstraintSet, RuleStatus, integer_flags, judge
from .ledger import Origin

__all__ = ["linear_text", "record_rules"]


def _number(value: float) -> str:
    """A coefficient as the shortest text that reads back as the same double (whole numbers without ".0")."""
    return str(int(value)) if value.is_integer() and abs(value) < 2 ** 53 else repr(float(value))


def linear_text(coefficients: np.ndarray, rhs: float, equality: bool, columns: tuple[str, ...]) -> str:
    """The host's own text of a linear rule from its coefficients (what it
    evaluated), the positive terms on the left and the others on the right:
    ``"total = 1.16*exp16 + 1.07*exp7"``, ``"a <= total"``, ``"x >= 0"``."""
    def terms(pairs: list[tuple[float, str]]) -> list[str]:
        return [f"{'' if a == 1.0 else _number(a) + '*'}{name}" for a, name in pairs]

    plus = [(a, n) for a, n in zip(coefficients.tolist(), columns, strict=True) if a > 0]
    minus = [(-a, n) for a, n in zip(coefficients.tolist(), columns, strict=True) if a < 0]
    sign = "=" if equality else "<="
    if not plus and minus:  # -x <= -c reads x >= c
        return f"{' + '.join(terms(minus))} {'=' if equality else '>='} {_number(-rhs)}"
    left, right = terms(plus) or ["0"], terms(minus)
    if rhs > 0 or not right:
        right.append(_number(rhs))
    elif rhs < 0:
        left.append(_number(-rhs))
    return f"{' + '.join(left)} {sign} {' + '.join(right)}"


#: A number in a rule's text (not part of a column's name).
_NUMBER = re.compile(r"(?<![A-Za-z_0-9.])\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def _same_text(text: str, evaluated: str) -> bool:
    """Whether a rule's text reads as the host's text of the form it evaluated, up to spaces, ``==`` for ``=``,
    the writing of its numbers (``10.0`` for ``10``) and the order of the terms on each side: then the statement
    need not repeat the form. Text only, compared, never evaluated."""
    def sides(t: str) -> tuple[Any, ...]:
        t = _NUMBER.sub(lambda m: _number(float(m.group(0))), "".join(t.split()).replace("==", "="))
        parts = re.split(r"(<=|>=|=)", t)
        if len(parts) != 3:
            return (t,)
        if parts[1] == ">=":  # b >= a reads a <= b
            parts = [parts[2], "<=", parts[0]]
        return (sorted(re.findall(r"[+-]?[^+-]+", parts[0])), parts[1], sorted(re.findall(r"[+-]?[^+-]+", parts[2])))

    def plain(side: Any) -> Any:
        return sorted(term.lstrip("+") for term in side) if isinstance(side, list) else side

    return [plain(x) for x in sides(text)] == [plain(x) for x in sides(evaluated)]


def _disagreement(context: PrivacyContext, rules: ConstraintSet, r: int, form: tuple[np.ndarray, float, bool],
                  status: RuleStatus, theirs: RuleStatus, differ: int) -> tuple[str, frozenset[str], int, int, str]:
    """The entry of a rule whose stated coefficients and whose handler's own
    ``violations()`` disagree on some records: the host cannot tell which is
    the rule, so it says both, refutes neither the file nor the rule, and
    counts the rule as violated wherever either says so."""
    text, name = rules.rules[r], rules.rule_handlers[r] or "its plugin"
    judged = int((~status.undecided[:, r]).sum())
    by_form, by_handler = int(status.violated[:, r].sum()), int(theirs.violated[:, r].sum())
    evaluated_as = linear_text(*form, rules.columns)
    statement = (f"edit rule {text!r} cannot be checked by the host: the coefficients its constraint handler "
                 f"{name!r} states ({evaluated_as}) and the handler's own violations() disagree on {differ} of "
                 f"{judged} released records. By those coefficients it is violated by {by_form}; by the handler's "
                 f"violations(), by {by_handler}.")
    context._record_host("guarantee", statement, mechanism="edit rule", status="refuted",
                         details={"rule": text, "evaluated_as": evaluated_as, "evaluated_by": name,
                                  "records_in_disagreement": differ, "violated_records": max(by_form, by_handler)})
    either = int((status.violated[:, r] | theirs.violated[:, r]).sum())
    return text, frozenset(rules.rule_columns[r]), either, judged, name


def record_rules(context: PrivacyContext, rules: ConstraintSet | None, frame: pd.DataFrame,
                  rounding: Mapping[int, int] | None = None) -> list[tuple[str, frozenset[str], int, int, str]]:
    """Record, for each edit rule, whether the released file satisfies it, as
    :func:`~privclust.constraints.judge` says. A rule cannot be evaluated on a
    record that misses one of its columns or that double precision cannot
    decide: such records are counted as not evaluable, neither violations
    nor satisfied.

    ``rounding`` (from :func:`release_integers`): for each rule over a column
    the host rounded, on how many records it held before the rounding and
    not after.

    The host evaluates a rule itself where its bound rules state their
    coefficients (``linear_form``): its entry is a verified guarantee (or a
    refutation), with the form it evaluated in the details
    (``evaluated_as``). For the rules of a handler that does not, the
    residuals are the handler's own ``violations()``: the entry says so, with
    status ``claimed``.

    Returns the rules the released file violates and those the host could
    not check (violated or not), as (text, its columns, violating records,
    records judged, the name of the handler whose own evaluation it is, ""
    where the host evaluated it), for
    :func:`~privclust.verify.verify` to say so beside the claims of the steps
    over those columns."""
    violated_rules: list[tuple[str, frozenset[str], int, int, str]] = []
    if rules is None or not rules.rules:
        return violated_rules
    values = frame.loc[:, list(rules.columns)].to_numpy(dtype=float, na_value=np.nan)
    # a rule over integer columns only is judged as whole numbers are: to double precision, not RULE_RTOL
    whole = integer_flags(frame, rules.columns)
    status = judge(rules, values, integer=whole)
    # where the host evaluates a stated form, the handler's own evaluation must agree with it on every record
    theirs = judge(rules.handlers_own(), values, integer=whole) if any(rules.host_evaluated) else status
    for r, text in enumerate(rules.rules):
        form = rules.rule_form(r)
        own = "" if form is not None else (rules.rule_handlers[r] or "its plugin")
        as_by = f" as its constraint handler {own!r} evaluates it" if own else ""
        if form is not None and not _same_text(text, evaluated := linear_text(*form, rules.columns)):
            # the host checked the form, and says which: that it is the text's meaning is the handler's reading
            as_by = f", read by its constraint handler {rules.rule_handlers[r] or 'its plugin'!r} as {evaluated},"
        if form is not None:
            differ = theirs.violated[:, r] != status.violated[:, r]
            if differ.any():
                violated_rules.append(_disagreement(context, rules, r, form, status, theirs, int(differ.sum())))
                continue
        skipped = status.missing[:, r]
        unknown = status.undecided[:, r] & ~skipped
        counted = ~status.undecided[:, r]
        viol = np.where(counted, status.residuals[:, r], 0.0)
        bad = status.violated[:, r]
        largest = float(viol.max()) if counted.any() else 0.0
        n_skip, n_unknown = int(skipped.sum()), int(unknown.sum())
        not_evaluable = (f" It cannot be evaluated on {n_skip} record(s) that miss a value of its columns "
                         "(neither satisfied nor violated there)." if n_skip else "")
        if n_unknown:
            # an infinite value, or terms whose sum overflows: the rule's residual (inf, or inf - inf) decides
            # nothing, and a tolerance of "1e-11 times infinity" would pass any violation
            not_evaluable += (f" It cannot be evaluated in double precision on {n_unknown} record(s) whose values of "
                              "its columns are infinite or so large that evaluating the rule overflows (neither "
                              "satisfied nor violated there).")
        if not counted.any() and len(values):
            statement = (f"edit rule {text!r} could not be evaluated on any released record{as_by}, so the host "
                         f"says neither that it holds nor that it is violated.{not_evaluable}")
        elif not bad.any():
            where = "every released record" if not (n_skip or n_unknown) else \
                f"every one of the {int(counted.sum())} released records " + \
                ("it could be evaluated on" if n_unknown else "with all its columns observed")
            used = rules.rule_positions[r]
            tolerance = (f"the error of evaluating it in double precision on its integer columns, "
                         f"{len(used) + 1} x 2^-52 times the size of its terms" if used and all(
                             whole[j] for j in used) else
                         f"the host's tolerance for floating-point error: {RULE_RTOL:g} times the size of its terms")
            statement = f"edit rule {text!r} holds on {where}{as_by} (largest deviation {largest:.3g}, within " \
                        f"{tolerance}).{not_evaluable}"
        else:
            statement = f"edit rule {text!r} is violated by {int(bad.sum())} of {int(counted.sum())} released " \
                        f"records{as_by} (largest violation {largest:.6g}).{not_evaluable}"
        if own:
            statement += (f" The host cannot evaluate the rules of {own!r} itself (its bound rules state no "
                          "linear_form): the residuals are the handler's own, so this is the handler's evaluation, "
                          "not the host's check.")
        details = {"rule": text, "violated_records": int(bad.sum()), "not_evaluable_records": n_skip + n_unknown,
                   "max_violation": largest}
        if form is not None:
            details["evaluated_as"] = linear_text(*form, rules.columns)
        else:
            details["evaluated_by"] = own
        if n_unknown:
            details["not_evaluable_in_double_precision"] = n_unknown
        if rounding is not None and r in rounding:
            broken = int(rounding[r])
            details["broken_by_rounding"] = broken
            statement += (" The host's rounding of the integer columns kept it on every record where it held "
                          "before." if not broken else
                          f" Of these, {broken} held before the host rounded the integer columns: the rounding "
                          "could not keep the rule on them.")
        if own:  # the handler's word, in its name
            context._record_host("guarantee", statement, mechanism="edit rule", status="claimed", details=details,
                                 origin=Origin.COMPONENT, component=f"{own} (constraint handler)", claim=statement)
        else:
            context._record_host("guarantee", statement, mechanism="edit rule", status="verified", details=details)
        if bad.any() or own:  # violated, or a rule the host could not check (its handler's word either way)
            violated_rules.append((text, frozenset(rules.rule_columns[r]), int(bad.sum()), int(counted.sum()), own))
    return violated_rules

