"""The columns a step without ``columns`` changes (its default columns), and
the columns that should not be among them.

With ``[roles] numeric`` (sdcMicro's ``numVars``) those columns. Without it,
the numeric columns that have no role, except integer columns that look like
codes: an integer dtype with at most :data:`CODE_MAX_DISTINCT` distinct
values, and on average at least :data:`CODE_RECORDS_PER_VALUE` records per value
(a region, a marital status, a yes/no coded 1/2). A differentially private
step leaves out no code: its default columns are chosen from the column
types alone (the code test reads the values). A column whose name looks like a
sampling weight (:data:`WEIGHT_NAME`) and is not declared as
``[roles] weight`` stays a default column, and ``privclust check`` and
``run`` warn about it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .components import is_real_column
from .recipe import Roles

__all__ = ["CODE_MAX_DISTINCT", "WEIGHT_NAME", "code_like", "default_column_warnings", "default_reason",
           "default_step_columns", "default_step_lines", "left_out_codes", "weight_like"]

#: An integer column with at most this many distinct values looks like a code.
CODE_MAX_DISTINCT = 20
#: ... and has at least this many records per distinct value on average (a rare value is still a code's value).
CODE_RECORDS_PER_VALUE = 20
#: A column name that looks like a sampling weight.
WEIGHT_NAME = re.compile(r"weight|wgt|wght|(^|_)wt($|_)", re.IGNORECASE)


def code_like(series: pd.Series) -> bool:
    """An integer column (of an integer dtype) with at least one and at most
    :data:`CODE_MAX_DISTINCT` distinct values, and at most one distinct value
    per :data:`CODE_RECORDS_PER_VALUE` records (missing values not counted):
    a column of 0 to 9 in 30 records is a count, in 4580 records a code."""
    if not pd.api.types.is_integer_dtype(series.dtype):
        return False
    distinct = series.nunique()
    return bool(0 < distinct <= CODE_MAX_DISTINCT and distinct * CODE_RECORDS_PER_VALUE <= series.notna().sum())


def weight_like(name: Any) -> bool:
    """Whether a column's name looks like a sampling weight's."""
    return bool(WEIGHT_NAME.search(str(name)))


def default_step_columns(frame: pd.DataFrame, roles: Roles | None = None, *,
                         private: bool = False) -> tuple[str, ...]:
    """The columns a step without ``columns`` works on: ``[roles] numeric``
    when given, else the numeric columns without a role in ``[roles]`` that
    do not look like codes (:func:`code_like`), in order. For a
    differentially private step (``private``) no column is left out as a
    code: that test reads the values, and one record changed would change
    which columns get noise and every column's share of epsilon (a red-team
    audit); its default columns are chosen from the column types alone."""
    if roles is not None and roles.numeric:
        return tuple(roles.numeric)
    taken = roles.columns if roles is not None else {}
    return tuple(c for c in frame.columns if is_real_column(frame[c]) and c not in taken
                 and (private or not code_like(frame[c])))


def left_out_codes(frame: pd.DataFrame, roles: Roles | None = None) -> tuple[str, ...]:
    """The numeric columns without a role that the default columns of a step that is not differentially private
    leave out because they look like codes (none with ``[roles] numeric``)."""
    if roles is not None and roles.numeric:
        return ()
    taken = roles.columns if roles is not None else {}
    return tuple(c for c in frame.columns if is_real_column(frame[c]) and c not in taken and code_like(frame[c]))


def default_column_warnings(frame: pd.DataFrame, columns: Sequence[str], where: str) -> list[str]:
    """Warnings on default columns that look like a sampling weight or a code."""
    out = []
    for c in columns:
        if c in frame.columns and weight_like(c):
            out.append(f"warning: {where} changes {c!r} by default, and its name looks like a sampling weight; "
                       f"declare it as [roles] weight (released unchanged), or name the step's columns")
        elif c in frame.columns and code_like(frame[c]):
            out.append(f"warning: {where} changes {c!r} by default, and it looks like a code (integers, "
                       f"{frame[c].nunique()} distinct values); name the step's columns, or leave it out of "
                       "[roles] numeric")
    return out


def default_reason(roles: Roles | None, *, private: bool = False) -> str:
    """Which columns are a step's default columns, in words."""
    if roles is not None and roles.numeric:
        return "[roles] numeric"
    return ("the numeric columns without a role, integer codes included: a differentially private step's columns "
            "are not chosen from the values" if private else "the numeric columns without a role, except integer "
            "codes")


def default_step_lines(frame: pd.DataFrame, roles: Roles | None, steps: Sequence[tuple[int, str, bool, bool]], *,
                       named: bool = True) -> list[str]:
    """What ``privclust check`` and ``run`` say of the default columns: for
    each step ``(index, id, changes values, differentially private)``
    without columns, the columns it changes by default, warnings on
    weight-like and code-like ones, and the code-like columns left out by
    the steps that are not differentially private."""
    lines = []
    for index, step_id, changes, private in steps:
        if changes:
            columns = default_step_columns(frame, roles, private=private)
            where = f"step {index} {step_id!r}"
            if named:
                lines.append(f"{where} changes by default ({default_reason(roles, private=private)}): "
                             f"{', '.join(map(str, columns)) or '(none)'}")
            lines.extend(default_column_warnings(frame, columns, where))
    codes = left_out_codes(frame, roles)
    if any(changes and not private for _, _, changes, private in steps) and codes:
        lines.append(f"left out of the default columns as integer codes (<= {CODE_MAX_DISTINCT} distinct values, "
                     f"on average >= {CODE_RECORDS_PER_VALUE} records per value; name them in a step's columns to "
                     f"change them): {', '.join(map(str, codes))}")
    return lines
