"""Built-in noise mechanisms: ``laplace``, ``geometric`` and ``gaussian``.

Each mechanism is used two ways:

* by other components, through ``mechanism.release(values, sensitivity=...,
  epsilon=..., context=..., relation=..., covers=...)``: it spends through the
  context first (which refuses before anything is drawn when the budget is
  exhausted), then draws from ``context.rng``;
* as a recipe step on columns with public bounds: values are clipped to the
  bounds, each column's sensitivity is its range, the epsilon (and delta) of
  the step is split evenly over the columns, and every record's row is
  released with noise. Under the replace-one relation (one record's values
  change, the number of records is public) the released table is
  epsilon-DP: a record's change moves only its own row (parallel composition
  over records), and within the row the columns compose sequentially.

``bounds = "data"`` takes the bounds from the data for convenience; that
leaks the minimum and maximum of each column, and the ledger says so.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
import privclust
from privclust import (
    DataError,
    Masked,
    ParameterError,
    PrivacyContext,
    Sensitivity,
    param,
    public_bounds,
)
from scipy import special

__version__ = "0.1.0"

RELATION = "replace-one (neighbouring data sets differ in one record's values; the number of records is public)"
STEP_NOT_COVERED = (
    "the number of records, their order and index, and the columns this step does not perturb; "
    "values outside the public bounds were clipped before noise was added"
)


class _StepMixin:
    """Recipe-step behaviour shared by the three mechanisms."""

    uses_constraints: ClassVar[bool] = False
    epsilon: float | None
    bounds: Any

    def planned_cost(self) -> tuple[float, float] | None:
        if self.epsilon is None:
            return None
        return (self.epsilon, float(getattr(self, "delta", 0.0) or 0.0))

    def step_problems(self) -> list[str]:
        problems = []
        if self.epsilon is None:
            problems.append(f"{self.name} needs 'epsilon' when it is a recipe step (e.g. epsilon = 1.0)")
        if self.bounds is None:
            problems.append(
                f"{self.name} needs public 'bounds' when it is a recipe step "
                '(e.g. bounds = { age = [0, 120] }, or bounds = "data" which leaks the range)'
            )
        return problems

    def _step_bounds(self, data: pd.DataFrame, context: PrivacyContext) -> tuple[np.ndarray, np.ndarray]:
        name = self.name  # type: ignore[attr-defined]
        for problem in self.step_problems():
            raise ParameterError(problem)
        columns = list(data.columns)
        if self.bounds == "data":
            values = data.to_numpy(dtype=float)
            low, high = values.min(axis=0), values.max(axis=0)
            high = np.where(high > low, high, low + 1.0)
            context.record_leak(
                "bounds",
                f"the bounds of {', '.join(columns)} were taken from the data (their minimum and maximum are "
                "released exactly, outside the differential-privacy guarantee).",
                alternative="give public bounds from domain knowledge: bounds = { column = [low, high] }",
            )
            return low, high
        missing = [c for c in columns if c not in self.bounds]
        if missing:
            raise DataError(
                f"{name}: no public bounds for column(s) {', '.join(missing)}; add them to 'bounds' "
                f"(e.g. bounds = {{ {missing[0]} = [low, high] }})"
            )
        low = np.array([self.bounds[c][0] for c in columns])
        high = np.array([self.bounds[c][1] for c in columns])
        return low, high

    def _covers(self, columns: list[str], norm: str | None = "L1") -> str:
        if norm is None:  # integer data: each column's own range is its sensitivity
            return f"every released value of column(s) {', '.join(columns)}"
        size = "one per column" if norm == "L1" else "the square root of the number of columns"
        return (f"every released value of column(s) {', '.join(columns)} (noise is added to each record's row "
                f"rescaled to [0, 1] by the public bounds, so the row's {norm} sensitivity is {size})")


def _as_array(values: Any) -> np.ndarray:
    return np.array(values, dtype=float, copy=True)


@attrs.frozen(kw_only=True)
class LaplaceMechanism(_StepMixin):
    """The Laplace mechanism: noise Lap(sensitivity / epsilon), pure epsilon-DP
    for an L1 sensitivity (Dwork, McSherry, Nissim & Smith 2006)."""

    name: ClassVar[str] = "laplace"

    epsilon: float | None = param(float, default=None, gt=0, doc="privacy budget of the step (as a step only)")
    bounds: Any = public_bounds(default=None,
                                doc='public bounds {column = [low, high]} (as a step only), or "data"')

    def release(self, values: Any, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                context: PrivacyContext, relation: str, covers: str, not_covered: str = "",
                **ledger: Any) -> np.ndarray:
        """Spend ``epsilon`` (L1 ``sensitivity``) and return ``values`` plus Laplace noise."""
        s = Sensitivity.of(sensitivity)
        _check_release(self.name, s.l1, epsilon)
        context.spend(epsilon=epsilon, delta=0.0, mechanism=self.name, sensitivity=s.l1, relation=relation,
                      covers=covers, not_covered=not_covered, **ledger)
        out = _as_array(values)
        return out + context.rng.laplace(0.0, s.l1 / epsilon, size=out.shape)

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        low, high = self._step_bounds(data, context)
        assert self.epsilon is not None
        columns = list(data.columns)
        d = len(columns)
        values = data.to_numpy(dtype=float)
        clipped = np.clip(values, low, high)
        unit = (clipped - low) / (high - low)
        noisy = self.release(unit, sensitivity=float(d), epsilon=self.epsilon, context=context, relation=RELATION,
                             covers=self._covers(columns), not_covered=STEP_NOT_COVERED,
                             details={"bounds": {c: [lo, hi] for c, lo, hi in zip(columns, low, high, strict=True)},
                                      "per_column_scale": ((high - low) * d / self.epsilon).tolist()})
        out = pd.DataFrame(low + noisy * (high - low), index=data.index, columns=columns)
        return Masked(data=out, diagnostics={"clipped_values": int((clipped != values).sum()),
                                             "noise_scale": ((high - low) * d / self.epsilon).tolist()})


@attrs.frozen(kw_only=True)
class GeometricMechanism(_StepMixin):
    """The two-sided geometric mechanism for integer data: P(k) proportional
    to exp(-epsilon |k| / sensitivity), pure epsilon-DP (Ghosh, Roughgarden &
    Sundararajan 2009). Integer sensitivities only."""

    name: ClassVar[str] = "geometric"

    epsilon: float | None = param(float, default=None, gt=0, doc="privacy budget of the step (as a step only)")
    bounds: Any = public_bounds(default=None,
                                doc='public integer bounds {column = [low, high]} (as a step only), or "data"')

    def release(self, values: Any, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                context: PrivacyContext, relation: str, covers: str, not_covered: str = "",
                **ledger: Any) -> np.ndarray:
        """Spend ``epsilon`` and return integer ``values`` plus two-sided geometric noise."""
        s = Sensitivity.of(sensitivity)
        _check_release(self.name, s.l1, epsilon)
        arr = np.asarray(values)
        if not np.all(np.isfinite(arr)) or not np.all(np.asarray(arr, dtype=float) == np.round(arr)):
            raise DataError("geometric: the values must be integers; use the laplace mechanism for real values")
        context.spend(epsilon=epsilon, delta=0.0, mechanism=self.name, sensitivity=s.l1, relation=relation,
                      covers=covers, not_covered=not_covered, **ledger)
        return np.asarray(arr, dtype=np.int64) + _two_sided_geometric(context.rng, epsilon / s.l1, arr.shape)

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        low, high = self._step_bounds(data, context)
        assert self.epsilon is not None
        columns = list(data.columns)
        values = data.to_numpy(dtype=float)
        non_integer = [c for c, j in zip(columns, range(len(columns)), strict=True)
                       if not np.all(values[:, j] == np.round(values[:, j]))]
        if non_integer:
            raise DataError(f"geometric: column(s) {', '.join(non_integer)} hold non-integer values; "
                            "use the laplace mechanism for real-valued columns")
        low, high = np.floor(low), np.ceil(high)
        clipped = np.clip(values, low, high).astype(np.int64)
        ranges = (high - low).astype(np.int64)
        d = len(columns)
        eps_col = self.epsilon / d
        context.spend(epsilon=self.epsilon, mechanism=self.name,
                      sensitivity=f"column ranges {dict(zip(columns, ranges.tolist(), strict=True))}, "
                                  f"epsilon split evenly ({eps_col:.6g} per column)",
                      relation=RELATION, covers=self._covers(columns, None), not_covered=STEP_NOT_COVERED)
        noise = np.column_stack([_two_sided_geometric(context.rng, eps_col / max(int(r), 1), (len(data),))
                                 for r in ranges]) if d else np.zeros((len(data), 0), dtype=np.int64)
        out = pd.DataFrame(clipped + noise, index=data.index, columns=columns)
        return Masked(data=out, diagnostics={"clipped_values": int((clipped != values).sum())})


def _two_sided_geometric(rng: np.random.Generator, rate: float, shape: tuple[int, ...]) -> np.ndarray:
    """Samples k with P(k) proportional to exp(-rate |k|): the difference of
    two geometric variables (failures before a success, p = 1 - exp(-rate))."""
    p = -math.expm1(-rate)
    return (rng.geometric(p, size=shape) - rng.geometric(p, size=shape)).astype(np.int64)


@attrs.frozen(kw_only=True)
class GaussianMechanism(_StepMixin):
    """The analytic Gaussian mechanism (Balle & Wang 2018): the smallest
    sigma for which N(0, sigma^2) noise is (epsilon, delta)-DP for an L2
    sensitivity; valid for every epsilon > 0 (the classical calibration
    sigma = sqrt(2 ln(1.25/delta)) sensitivity / epsilon holds only for
    epsilon < 1 and is looser)."""

    name: ClassVar[str] = "gaussian"

    epsilon: float | None = param(float, default=None, gt=0, doc="privacy budget of the step (as a step only)")
    delta: float | None = param(float, default=None, gt=0, lt=1, doc="delta of the step (as a step only)")
    bounds: Any = public_bounds(default=None,
                                doc='public bounds {column = [low, high]} (as a step only), or "data"')

    def step_problems(self) -> list[str]:
        problems = super().step_problems()
        if self.delta is None:
            problems.append("gaussian needs 'delta' in (0, 1) when it is a recipe step (e.g. delta = 1e-6)")
        return problems

    def release(self, values: Any, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                context: PrivacyContext, relation: str, covers: str, not_covered: str = "",
                **ledger: Any) -> np.ndarray:
        """Spend ``(epsilon, delta)`` (L2 ``sensitivity``) and return ``values`` plus Gaussian noise."""
        s = Sensitivity.of(sensitivity)
        _check_release(self.name, s.l2_bound, epsilon)
        if not 0 < delta < 1:
            raise ParameterError(f"gaussian: delta must be in (0, 1); got {delta!r}")
        sigma = analytic_gaussian_sigma(epsilon, delta, s.l2_bound)
        context.spend(epsilon=epsilon, delta=delta, mechanism=self.name, sensitivity=f"L2 {s.l2_bound:.6g}",
                      relation=relation, covers=covers, not_covered=not_covered,
                      details={"sigma": sigma, **(ledger.pop("details", None) or {})}, **ledger)
        out = _as_array(values)
        return out + context.rng.normal(0.0, sigma, size=out.shape)

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        low, high = self._step_bounds(data, context)
        assert self.epsilon is not None and self.delta is not None
        columns = list(data.columns)
        values = data.to_numpy(dtype=float)
        clipped = np.clip(values, low, high)
        unit = (clipped - low) / (high - low)
        noisy = self.release(unit, sensitivity=Sensitivity(l1=float(len(columns)), l2=math.sqrt(len(columns))),
                             epsilon=self.epsilon, delta=self.delta, context=context, relation=RELATION,
                             covers=self._covers(columns, "L2"), not_covered=STEP_NOT_COVERED)
        out = pd.DataFrame(low + noisy * (high - low), index=data.index, columns=columns)
        return Masked(data=out, diagnostics={"clipped_values": int((clipped != values).sum())})


def _check_release(name: str, sensitivity: float, epsilon: float) -> None:
    if not (isinstance(sensitivity, int | float) and math.isfinite(sensitivity) and sensitivity > 0):
        raise ParameterError(f"{name}: the sensitivity must be a finite number > 0; got {sensitivity!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not math.isfinite(epsilon) or epsilon <= 0:
        raise ParameterError(f"{name}: epsilon must be a finite number > 0; got {epsilon!r}")


def _gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The smallest delta for which N(0, sigma^2) is (epsilon, delta)-DP
    (Balle & Wang 2018, Theorem 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    # Phi(a - b) - e^eps Phi(-a - b), with the second term in log space.
    first = special.ndtr(a - b)
    second = math.exp(epsilon + special.log_ndtr(-a - b))
    return float(first - second)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest sigma making the Gaussian mechanism (epsilon, delta)-DP,
    found by bisection on the exact privacy profile."""
    low, high = 1e-12 * sensitivity, sensitivity
    while _gaussian_delta(high, epsilon, sensitivity) > delta:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if _gaussian_delta(mid, epsilon, sensitivity) > delta:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return high


@privclust.hookimpl
def privclust_register_noise_mechanisms(register):
    register(LaplaceMechanism)
    register(GeometricMechanism)
    register(GaussianMechanism)
