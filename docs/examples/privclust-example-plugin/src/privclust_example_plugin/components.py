"""The components of the example plugin.

Two maskers and an evaluator, each a frozen, keyword-only attrs class whose
fields are its hyper-parameters:

* ``rounding``: round each value to a multiple of a base (to the nearest
  multiple, or by unbiased random rounding);
* ``top-bottom-coding``: replace values above a public top threshold (or
  below a bottom one) by the threshold or by the mean of the coded values;
* ``uniqueness``: the share of released records whose combination of values
  is unique (or shared by fewer than ``k`` records), a simple disclosure-risk
  figure for coarsened data.

They use only the public privclust API.
"""

from __future__ import annotations

# --8<-- [start:imports]
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd

from privclust import DataError, EvaluationInputs, Masked, ParameterError, PrivacyContext, param

# --8<-- [end:imports]

__all__ = ["Rounding", "TopBottomCoding", "Uniqueness"]


# ---------------------------------------------------------------------------
# Parameter helpers
# ---------------------------------------------------------------------------

# --8<-- [start:helpers]

def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _number_or_table(value: Any) -> Any:
    """Converter: a number becomes a float; a table ``{column = number}`` a
    dict of floats. Anything else is left for the checks to reject."""
    if _is_number(value):
        return float(value)
    if isinstance(value, Mapping):
        return {str(c): float(v) if _is_number(v) else v for c, v in value.items()}
    return value


def _table(value: Any) -> Any:
    return None if value is None else _number_or_table(value)


def _positive(value: Any) -> str | None:
    """Extra check: the number, or every value of the table, is finite and > 0."""
    numbers = list(value.values()) if isinstance(value, Mapping) else [value]
    if not numbers or not all(_is_number(v) and math.isfinite(v) and v > 0 for v in numbers):
        return "must be a number > 0 or a table {column = number > 0}"
    return None


def _thresholds(value: Any) -> str | None:
    """Extra check: a non-empty table of finite numbers."""
    if not value or not all(_is_number(v) and math.isfinite(v) for v in value.values()):
        return "must be a non-empty table {column = finite threshold}"
    return None


def _per_column(table: float | Mapping[str, float], columns: list[str], parameter: str, step: str) -> np.ndarray:
    """One value per column from a number or a ``{column: value}`` table."""
    if not isinstance(table, Mapping):
        return np.full(len(columns), float(table))
    missing = [c for c in columns if c not in table]
    if missing:
        raise DataError(
            f"{step}: the '{parameter}' table has no value for column(s) {', '.join(missing)}; add them "
            f"(e.g. {parameter} = {{ {missing[0]} = ... }}) or leave those columns out of the step"
        )
    return np.array([table[c] for c in columns], dtype=float)


# --8<-- [end:helpers]


# ---------------------------------------------------------------------------
# rounding
# ---------------------------------------------------------------------------

# --8<-- [start:rounding]

@attrs.frozen(kw_only=True)
class Rounding:
    """Round each value of the step's columns to a multiple of a base.

    ``method = "nearest"`` rounds to the nearest multiple (halves away from
    zero do not matter for continuous data; numpy rounds halves to even).
    ``method = "random"`` rounds down or up at random with probabilities that
    keep the expected value: a value ``x`` between multiples ``a`` and
    ``a + base`` becomes ``a + base`` with probability ``(x - a) / base``.
    """

    name: ClassVar[str] = "rounding"
    #: Rounding cannot keep edit rules such as total = a + b; the runner then
    #: does not ask that a rule lie wholly inside or outside the step's columns.
    uses_constraints: ClassVar[bool] = False

    base: float | Mapping[str, float] = param(
        (float, Mapping), converter=_number_or_table, check=_positive,
        doc="the rounding base: one number, or a table {column = base}",
    )
    method: str = param(str, default="nearest", choices=("nearest", "random"),
                        doc='"nearest" multiple, or unbiased "random" rounding')

    def missing_values(self) -> str:
        """Missing values are accepted: a missing value rounds to a missing value."""
        return "each value rounded on its own; missing values released missing"

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        columns = list(data.columns)
        base = _per_column(self.base, columns, "base", self.name)
        values = data.to_numpy(dtype=float)
        scaled = values / base
        if self.method == "nearest":
            rounded = np.round(scaled)
        else:
            low = np.floor(scaled)
            rounded = low + (context.rng.random(scaled.shape) < (scaled - low))
        out = pd.DataFrame(rounded * base, index=data.index, columns=columns)
        for j, column in enumerate(columns):  # integer columns rounded to an integer base stay integers
            if pd.api.types.is_integer_dtype(data[column]) and float(base[j]).is_integer():
                out[column] = out[column].astype(np.int64)
        within = "half the base" if self.method == "nearest" else "one base"
        context.record(
            f"every released value of {', '.join(columns)} is a multiple of its base "
            f"({', '.join(f'{c}: {b:g}' for c, b in zip(columns, base, strict=True))}), within {within} of the "
            "original. This bounds what a single value reveals; it is not differential privacy and does not "
            "prevent linking records on the rounded values.",
            guarantee="rounding",
            details={"base": dict(zip(columns, base.tolist(), strict=True)), "method": self.method},
        )
        return Masked(data=out, diagnostics={"changed_values": int((out.to_numpy() != values).sum())})


# --8<-- [end:rounding]


# ---------------------------------------------------------------------------
# top-bottom-coding
# ---------------------------------------------------------------------------

# --8<-- [start:top-bottom-coding]

@attrs.frozen(kw_only=True)
class TopBottomCoding:
    """Code the extremes of each column: values above a public ``top``
    threshold (below a ``bottom`` one) are replaced.

    ``replacement = "threshold"`` replaces them by the threshold itself;
    ``"mean"`` by the mean of the values coded together, which keeps the
    column's total. A group of a single record would then be released
    exactly: the ledger records that as a leak, which a recipe must accept by
    name (``[privacy] allow_leaks = ["replacement"]``); otherwise the run is
    refused.
    """

    name: ClassVar[str] = "top-bottom-coding"
    uses_constraints: ClassVar[bool] = False
    #: The leak this component may record (see privclust.known_leak_names).
    leak_names: ClassVar[tuple[str, ...]] = ("replacement",)

    top: Mapping[str, float] | None = param(Mapping, default=None, converter=_table, check=_thresholds,
                                            doc="{column = threshold}: values above it are coded")
    bottom: Mapping[str, float] | None = param(Mapping, default=None, converter=_table, check=_thresholds,
                                               doc="{column = threshold}: values below it are coded")
    replacement: str = param(str, default="threshold", choices=("threshold", "mean"),
                             doc='what a coded value becomes: the "threshold" or the "mean" of its group')

    def missing_values(self) -> str:
        """Missing values are accepted: a missing value is above or below no threshold."""
        return "each value coded on its own (a missing value is above or below no threshold); missing values " \
               "released missing"

    def __attrs_post_init__(self) -> None:
        if self.top is None and self.bottom is None:
            raise ParameterError("top-bottom-coding needs 'top' or 'bottom' (e.g. top = { income = 150000 })")
        both = set(self.top or {}) & set(self.bottom or {})
        for column in sorted(both):
            if not self.bottom[column] < self.top[column]:  # type: ignore[index]
                raise ParameterError(
                    f"top-bottom-coding: the bottom threshold of {column!r} ({self.bottom[column]:g}) must be "  # type: ignore[index]
                    f"below its top threshold ({self.top[column]:g})"  # type: ignore[index]
                )

    def mask(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        named = set(self.top or {}) | set(self.bottom or {})
        unknown = sorted(named - set(data.columns))
        if unknown:
            raise DataError(f"{self.name}: thresholds are given for {', '.join(unknown)}, which are not among the "
                            f"step's columns ({', '.join(data.columns)}); add them to the step's columns")
        out = data.to_numpy(dtype=float, copy=True)
        coded: dict[str, int] = {}
        for j, column in enumerate(data.columns):
            for side, table in (("top", self.top), ("bottom", self.bottom)):
                if not table or column not in table:
                    continue
                threshold = table[column]
                values = out[:, j]
                hit = values > threshold if side == "top" else values < threshold
                n = int(hit.sum())
                coded[f"{column} ({side})"] = n
                if n == 0:
                    continue
                if self.replacement == "threshold":
                    values[hit] = threshold
                    continue
                values[hit] = values[hit].mean()
                if n == 1:
                    context.record_leak(
                        "replacement",
                        f"only one record of {column!r} lies {'above' if side == 'top' else 'below'} "
                        f"{threshold:g}, so the 'mean' it is replaced by is its own value, released exactly.",
                        alternative='use replacement = "threshold", or move the threshold so that several '
                                    "records are coded together",
                    )
        frame = pd.DataFrame(out, index=data.index, columns=data.columns)
        return Masked(data=frame, diagnostics={"coded_values": coded})


# --8<-- [end:top-bottom-coding]


# ---------------------------------------------------------------------------
# uniqueness
# ---------------------------------------------------------------------------

# --8<-- [start:uniqueness]

def _class_sizes(values: np.ndarray) -> np.ndarray:
    """For each row, how many rows share its exact combination of values."""
    _, inverse, counts = np.unique(values, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.ravel()]


@attrs.frozen(kw_only=True)
class Uniqueness:
    """How many released records an intruder could single out by their values.

    Records sharing the same combination of values on the judged columns
    form an equivalence class. Figures (shares are in [0, 1]):

    * ``unique_share``: share of released records alone in their class;
    * ``unique_share_original``: the same share in the original data;
    * ``below_k_share``: share of released records in classes smaller than ``k``;
    * ``smallest_class``: the size of the smallest class.

    Continuous data are almost all unique; coarsening (rounding, coding)
    builds classes. A low ``below_k_share`` is necessary for, not proof of,
    a low re-identification risk.
    """

    name: ClassVar[str] = "uniqueness"

    k: int = param(int, default=3, ge=2, doc="the class size below which a record counts as at risk")

    def evaluate(self, inputs: EvaluationInputs) -> dict[str, float]:
        columns = list(inputs.columns)
        released = _class_sizes(inputs.protected.loc[:, columns].to_numpy(dtype=float))
        original = _class_sizes(inputs.original.loc[:, columns].to_numpy(dtype=float))
        return {
            "unique_share": float(np.mean(released == 1)),
            "unique_share_original": float(np.mean(original == 1)),
            "below_k_share": float(np.mean(released < self.k)),
            "smallest_class": float(released.min()),
        }
# --8<-- [end:uniqueness]
