"""Built-in noise mechanisms: ``laplace``, ``geometric`` and ``gaussian``.

Each mechanism is used two ways:

* by other components, through ``mechanism.release(values, sensitivity=...,
  epsilon=..., context=..., relation=..., covers=...)``: it checks the
  parameters and the values, spends through the context (which refuses
  before anything is drawn when the budget is exhausted), then draws from
  ``context.rng``;
* as a recipe step on columns with public bounds: values are clipped to the
  bounds, each column's sensitivity is its range, the epsilon (and delta) of
  the step is split evenly over the columns, and every record's row is
  released with noise. Under the replace-one relation (one record's values
  change, the number of records is public) the released table is
  epsilon-DP: a record's change moves only its own row (parallel composition
  over records), and within the row the columns compose sequentially.

The noise is exact (:mod:`privclust.sampling`): integers drawn with exact
probabilities from the Generator's random bits, never a floating-point
sampler, so an output cannot reveal the input through the set of doubles it
falls in (Mironov 2012). Real values are released on a lattice ``gamma Z``
(``gamma`` a power of two, named in the ledger): the value is rounded to the
lattice and the noise is a whole number of lattice steps. The rounding can
move a value by ``gamma / 2``, so the noise is calibrated to the sensitivity
plus ``gamma`` per value that can change (L1; ``sqrt(count) gamma`` in L2),
and the epsilon in the ledger holds with the rounding.

``bounds = "data"`` takes the bounds from the data for convenience; that
leaks the minimum and maximum of each column, and the ledger says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
import pandas as pd
from scipy import special

import privclust
from privclust import (
    DataError,
    Masked,
    ParameterError,
    PrivacyContext,
    Sensitivity,
    at_least,
    at_most,
    param,
    public_bounds,
    sampling,
)

__version__ = "0.1.0"

RELATION = privclust.Relation.REPLACE_ONE.explained(
    "neighbouring data sets differ in one record's values; the number of records is public")
STEP_NOT_COVERED = (
    "the number of records, their order and index, and the columns this step does not perturb; "
    "values outside the public bounds were clipped before noise was added"
)


#: The largest magnitude an integer value may have for the geometric
#: mechanism: with the noise (at most 2^48 * 2^12 in the samplers) the sum
#: stays inside int64.
MAX_INTEGER = 2**62
_TOP = np.finfo(float).max


class _StepMixin:
    """Recipe-step behaviour shared by the three mechanisms."""

    name: ClassVar[str]  # set by each mechanism
    uses_constraints: ClassVar[bool] = False
    privacy_relation: ClassVar[privclust.Relation] = privclust.Relation.REPLACE_ONE
    #: the roles of the values it reports using (privclust.EFFECTIVE_PARAMS), for the report's rounding
    reported_roles: ClassVar[dict[str, str]] = {"noise_scale": "noise-scale"}
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
        if isinstance(self.bounds, Mapping):  # public bounds: what no data can change is checked before a run
            for column, pair in self.bounds.items():
                try:
                    span = _range(self.name, str(column), float(pair[0]), float(pair[1]))
                except ParameterError as err:
                    problems.append(str(err))
                    continue
                if self.epsilon is not None and not math.isfinite(span / self.epsilon):
                    problems.append(f"{self.name}: the noise scale of column {column} (its range {at_least(span)} / "
                                    f"epsilon {at_most(self.epsilon)}, or more) overflows the range of doubles; use "
                                    "a larger epsilon or narrower bounds")
                    continue
                if self.epsilon is not None and getattr(self, "delta", 0.0) is not None:
                    # the exact sampler's range, decided from the bounds and epsilon alone: refused when the recipe
                    # is compiled, not when the step runs. The step splits epsilon over its columns, which only the
                    # data name when the step does not: the whole epsilon is what is checked here (a necessary
                    # condition), the split when the step runs.
                    try:
                        self._column_plan(str(column), float(pair[0]), float(pair[1]), span, self.epsilon)
                    except ParameterError as err:
                        problems.append(f"{err} (epsilon is split evenly over the step's columns: the whole "
                                        "epsilon is already too small for this one)")
        return problems

    def _column_plan(self, column: str, low: float, high: float, span: float, epsilon: float) -> Any:
        """The noise plan of one column (raises ParameterError where the exact sampler cannot draw it)."""
        return _laplace_plan(self.name, span, epsilon, 1, f"column {column}")  # type: ignore[attr-defined]

    def release_problem(self, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                        changed: int = 1) -> str | None:
        """The refusal :meth:`release` would make for these figures, decided
        without any data (``None`` when it would draw): ``changed`` values
        with this sensitivity and epsilon (and delta for ``gaussian``). A
        component that calls the mechanism calls it from its
        ``step_problems``, so that an epsilon too small for the exact sampler
        is refused when the recipe is compiled, not when the step runs."""
        try:
            self._release_plan(Sensitivity.of(sensitivity), epsilon, delta, changed)
        except ParameterError as err:
            return str(err)
        return None

    def _release_plan(self, s: Sensitivity, epsilon: float, delta: float, changed: int) -> Any:
        _check_release(self.name, s.l1, epsilon)  # type: ignore[attr-defined]
        return _laplace_plan(self.name, s.l1, epsilon, _changed(self.name, changed, 1))  # type: ignore[attr-defined]

    def _step_bounds(self, data: pd.DataFrame, context: PrivacyContext) -> tuple[np.ndarray, np.ndarray]:
        name = self.name
        for problem in self.step_problems():
            raise ParameterError(problem)
        columns = list(data.columns)
        values = data.to_numpy(dtype=float)
        bad = [c for j, c in enumerate(columns) if not np.all(np.isfinite(values[:, j]))]
        if bad:
            raise DataError(f"{name}: column(s) {', '.join(bad)} hold missing or infinite values; "
                            "drop or impute them before adding noise")
        return privclust.column_bounds(values, columns, self.bounds, context, who=name, constant="tiny")

    def _covers(self, columns: list[str], norm: str | None = "L1") -> str:
        if norm is None:  # integer data: each column's own range is its sensitivity
            return f"every released value of column(s) {', '.join(columns)}"
        split = "epsilon is split evenly over the columns" if norm == "L1" else (
            "the noise of each column is proportional to its range, so the row's L2 sensitivity is the square "
            "root of the number of columns")
        return (f"every released value of column(s) {', '.join(columns)} (each column's sensitivity is the range "
                f"of its public bounds; {split})")


def _as_array(name: str, values: Any) -> np.ndarray:
    raw = np.asarray(values)
    if raw.dtype.kind in "iu" and raw.size and (int(raw.max()) > 2**53 or int(raw.min()) < -(2**53)):
        raise DataError(f"{name}: integer values beyond +-2^53 cannot be held exactly as doubles; use the geometric "
                        "mechanism (exact on integers up to 2^62) or subtract a public offset first")
    try:
        out = np.array(values, dtype=float, copy=True)
    except (TypeError, ValueError, OverflowError) as err:
        raise DataError(f"{name}: the values to release must be numbers; {err}") from err
    if not np.all(np.isfinite(out)):
        raise DataError(f"{name}: the values to release hold NaN or infinite entries; a noisy release of them "
                        "would not be finite. Check the computation that produced them.")
    return out


def _range(name: str, column: str, low: float, high: float) -> float:
    """The exact range ``high - low`` of public bounds, rounded up to a double."""
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ParameterError(f"{name}: the bounds of column {column} must be finite; got [{low}, {high}]. "
                             "Rescale the column (e.g. express it in thousands) first.")
    exact = Fraction(float(high)) - Fraction(float(low))
    if exact <= 0:
        raise ParameterError(f"{name}: the bounds of column {column} must have low < high; got [{low}, {high}]")
    if exact > Fraction(_TOP):
        raise ParameterError(
            f"{name}: the range of the bounds of column {column} ([{low:.6g}, {high:.6g}]) exceeds the largest "
            "double; its noise could not be represented. Give narrower bounds, or rescale the column "
            "(e.g. express it in thousands) first.")
    value = float(exact)
    return value if Fraction(value) >= exact else float(np.nextafter(value, np.inf))


@attrs.frozen
class _Plan:
    """How one release is drawn: the lattice, the sensitivity after rounding, the exact noise parameter."""

    gamma: float
    sensitivity: float          # after rounding to the lattice (what the noise is calibrated to)
    units: Fraction             # the Laplace scale or the Gaussian variance, in lattice units, exactly
    scale: float                # the noise scale (Laplace) or sigma (Gaussian) in data units

    @property
    def lattice(self) -> str:
        return sampling.lattice_name(self.gamma)


def _laplace_plan(name: str, sensitivity: float, epsilon: float, changed: int, what: str = "") -> _Plan:
    """The lattice and the exact scale for Laplace noise that makes a release epsilon-DP."""
    where = f" for {what}" if what else ""
    sens, eps = Fraction(sensitivity), Fraction(epsilon)
    if sens / eps > Fraction(_TOP):
        raise ParameterError(
            f"{name}: the noise scale sensitivity / epsilon = {at_least(sensitivity)} / {at_most(epsilon)}{where} "
            "overflows the range of doubles; the release would be infinite. Use a larger epsilon or rescale the "
            "values.")
    cap = sens / (eps * 2**40)  # the spacing that keeps sensitivity / (gamma epsilon) <= 2^40
    gamma = sampling.lattice_for(sensitivity, changed, cap)
    effective = sampling.lattice_sensitivity(sensitivity, gamma, changed, "L1")
    units = Fraction(effective) / (Fraction(gamma) * eps)
    if units > sampling.MAX_LAPLACE_SCALE or not math.isfinite(effective):
        raise ParameterError(
            f"{name}: epsilon = {at_most(epsilon)}{where} is too small for {changed} released value(s) with "
            f"sensitivity {at_least(sensitivity)}: the noise scale needs a lattice as coarse as "
            f"{sampling.lattice_name(gamma)}, and "
            f"with the rounding to it the noise would be {_approx(units)} lattice steps, beyond the exact sampler's "
            "range (2^48). Use a larger epsilon or release fewer values.")
    units = sampling.rational_scale(units)
    return _Plan(gamma=gamma, sensitivity=effective, units=units, scale=float(units * Fraction(gamma)))


def _approx(x: Fraction) -> str:
    """``x`` in a message, also beyond the range of doubles."""
    try:
        return f"{float(x):.3g}"
    except OverflowError:
        return f"about 2^{x.numerator.bit_length() - x.denominator.bit_length()}"


def _check_magnitude(name: str, values: np.ndarray, gamma: float) -> None:
    """Refuse values too large to be placed on the lattice (their ratio to the spacing would overflow)."""
    if not values.size:
        return
    top = float(np.max(np.abs(values)))
    if top and math.frexp(top)[1] - math.frexp(gamma)[1] >= 1020:
        raise DataError(
            f"{name}: values of magnitude {top:.3g} cannot be rounded to the lattice {sampling.lattice_name(gamma)} "
            "(chosen from the sensitivity): the ratio overflows. Rescale the values, or give a sensitivity that "
            "matches their magnitude.")


def _noise_text(kind: str, plan: _Plan, norm: str = "") -> str:
    return (f"exact discrete {kind} noise of {'sigma' if kind == 'Gaussian' else 'scale'} {at_most(plan.scale)} on the "
            f"lattice {plan.lattice}, calibrated to {norm}sensitivity {at_most(plan.sensitivity, 10)} including the "
            "rounding to the lattice")


def _release_on_lattice(rng: np.random.Generator, values: np.ndarray, plan: _Plan, kind: str) -> np.ndarray:
    units = sampling.snap(values, plan.gamma)
    if kind == "laplace":
        noise = sampling.discrete_laplace(rng, plan.units, values.shape)
    else:
        noise = sampling.discrete_gaussian(rng, plan.units, values.shape)
    return sampling.lattice_add(units, noise, plan.gamma)


def _changed(name: str, changed: int | None, size: int) -> int:
    if changed is None:
        return max(size, 1)
    if isinstance(changed, bool) or not isinstance(changed, int | np.integer) or changed < 1:
        raise ParameterError(f"{name}: 'changed' must be a whole number >= 1 (how many released values can "
                             f"differ between neighbouring inputs); got {changed!r}")
    return int(changed)


@attrs.frozen(kw_only=True)
class LaplaceMechanism(_StepMixin):
    """The Laplace mechanism, sampled exactly: discrete Laplace noise on a
    power-of-two lattice, pure epsilon-DP for an L1 sensitivity (Dwork,
    McSherry, Nissim & Smith 2006; the exact sampler of Canonne, Kamath &
    Steinke 2020)."""

    name: ClassVar[str] = "laplace"

    epsilon: float | None = param(float, role="privacy", default=None, gt=0, finite=True,
                                  doc="privacy budget of the step (as a step only)")
    bounds: Any = public_bounds(default=None,
                                doc='public bounds {column = [low, high]} (as a step only), or "data"')

    def release(self, values: Any, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                context: PrivacyContext, relation: privclust.Relation | str, covers: str, not_covered: str = "",
                changed: int | None = None, **ledger: Any) -> np.ndarray:
        """Spend ``epsilon`` (L1 ``sensitivity``) and return ``values`` plus exact Laplace noise.

        The result lies on the lattice named in the ledger. ``changed`` is how
        many of the values can differ between neighbouring inputs (default:
        all); each adds one lattice step to the sensitivity.
        """
        s = Sensitivity.of(sensitivity)
        _check_release(self.name, s.l1, epsilon)
        out = _as_array(self.name, values)
        plan = _laplace_plan(self.name, s.l1, epsilon, _changed(self.name, changed, out.size))
        _check_magnitude(self.name, out, plan.gamma)
        details = {**(ledger.pop("details", None) or {}), "lattice": plan.lattice,
                   "effective_sensitivity": plan.sensitivity, "exact_noise_scale": plan.scale}
        context.spend(epsilon=epsilon, delta=0.0, mechanism=self.name, sensitivity=s.l1, relation=relation,
                      covers=covers, not_covered=not_covered, details=details,
                      noise=_noise_text("Laplace", plan), **ledger)
        return _release_on_lattice(context.rng, out, plan, "laplace")

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        low, high = self._step_bounds(data, context)
        assert self.epsilon is not None
        columns = list(data.columns)
        d = len(columns)
        values = data.to_numpy(dtype=float)
        clipped = np.clip(values, low, high)
        col_eps = _split(self.epsilon, d)
        ranges = [_range(self.name, c, lo, hi) for c, lo, hi in zip(columns, low, high, strict=True)]
        plans = [_laplace_plan(self.name, r, col_eps, 1, f"column {c}") for c, r in zip(columns, ranges, strict=True)]
        for j, plan in enumerate(plans):
            _check_magnitude(self.name, np.array([low[j], high[j]]), plan.gamma)
        context.spend(
            epsilon=self.epsilon, mechanism=self.name,
            sensitivity=f"the column ranges {_fmt_map(columns, ranges)} with epsilon split evenly, "
                        f"{at_least(col_eps)} per column",
            relation=RELATION, covers=self._covers(columns), not_covered=STEP_NOT_COVERED,
            noise=_lattices_text("Laplace", columns, plans),
            details={"bounds": {c: [lo, hi] for c, lo, hi in zip(columns, low, high, strict=True)},
                     "lattice": {c: p.lattice for c, p in zip(columns, plans, strict=True)},
                     "per_column_scale": [p.scale for p in plans]})
        out = np.empty_like(clipped)
        for j, plan in enumerate(plans):
            out[:, j] = _release_on_lattice(context.rng, clipped[:, j], plan, "laplace")
        frame = pd.DataFrame(out, index=data.index, columns=columns)
        return Masked(data=frame, diagnostics={"clipped_values": int((clipped != values).sum()),
                                               "noise_scale": [p.scale for p in plans],
                                               **_effective(self.bounds, columns, low, high,
                                                            [p.scale for p in plans])})


def _effective(bounds: Any, columns: list[str], low: Any, high: Any, scales: list[float]) -> dict[str, Any]:
    """The bounds and noise scales a step used, for the report
    (privclust.EFFECTIVE_PARAMS); with ``bounds = "data"`` both come from
    each column's range, so they go under
    privclust.EFFECTIVE_PARAMS_FROM_DATA (left out of a non-disclosive report)."""
    used = {"bounds": {str(c): [float(lo), float(hi)] for c, lo, hi in zip(columns, low, high, strict=True)},
            "noise_scale": {str(c): float(s) for c, s in zip(columns, scales, strict=True)}}
    if isinstance(bounds, str) and bounds == "data":
        return {privclust.EFFECTIVE_PARAMS: {}, privclust.EFFECTIVE_PARAMS_FROM_DATA: used}
    return {privclust.EFFECTIVE_PARAMS: {"noise_scale": used["noise_scale"]}}


def _fmt_map(columns: list[str], numbers: list[Any]) -> str:
    # the numbers are sensitivities (column ranges): shown rounded down, never above what the noise covers
    return "{" + ", ".join(f"{c}: {at_most(v)}" if isinstance(v, float) else f"{c}: {v}"
                           for c, v in zip(columns, numbers, strict=True)) + "}"


def _lattices_text(kind: str, columns: list[str], plans: list[_Plan]) -> str:
    lattices = ", ".join(f"{c} on {p.lattice}" for c, p in zip(columns, plans, strict=True))
    return (f"exact discrete {kind} noise; {lattices}; each column's noise is calibrated to its range plus one "
            "lattice step for the rounding to the lattice")


@attrs.frozen(kw_only=True)
class GeometricMechanism(_StepMixin):
    """The two-sided geometric mechanism for integer data: P(k) proportional
    to exp(-epsilon |k| / sensitivity), pure epsilon-DP (Ghosh, Roughgarden &
    Sundararajan 2009), sampled exactly (the discrete Laplace sampler of
    Canonne, Kamath & Steinke 2020)."""

    name: ClassVar[str] = "geometric"

    epsilon: float | None = param(float, role="privacy", default=None, gt=0, finite=True,
                                  doc="privacy budget of the step (as a step only)")
    bounds: Any = public_bounds(default=None,
                                doc='public integer bounds {column = [low, high]} (as a step only), or "data"')

    def _column_plan(self, column: str, low: float, high: float, span: float, epsilon: float) -> Any:
        lo, hi = _integer_bounds(column, low, high)
        return _geometric_scale(self.name, max(hi - lo, 1), epsilon, f"column {column}")

    def _release_plan(self, s: Sensitivity, epsilon: float, delta: float, changed: int) -> Any:
        _check_release(self.name, s.l1, epsilon)
        return _geometric_scale(self.name, s.l1, epsilon)

    def release(self, values: Any, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                context: PrivacyContext, relation: privclust.Relation | str, covers: str, not_covered: str = "",
                changed: int | None = None, **ledger: Any) -> np.ndarray:
        """Spend ``epsilon`` and return integer ``values`` plus two-sided geometric noise (int64).

        ``changed`` is accepted as by the other mechanisms (checked, then
        unused: integers need no lattice, so there is no rounding to pay for).
        """
        s = Sensitivity.of(sensitivity)
        _check_release(self.name, s.l1, epsilon)
        arr = _integers(self.name, values)
        _changed(self.name, changed, arr.size)
        units = _geometric_scale(self.name, s.l1, epsilon)
        scale = float(units)
        context.spend(epsilon=epsilon, delta=0.0, mechanism=self.name, sensitivity=s.l1, relation=relation,
                      covers=covers, not_covered=not_covered,
                      details={**(ledger.pop("details", None) or {}), "exact_noise_scale": scale},
                      noise=f"exact two-sided geometric noise of scale {at_most(scale)} on the integers", **ledger)
        return arr + sampling.discrete_laplace(context.rng, units, arr.shape)

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        low, high = self._step_bounds(data, context)
        assert self.epsilon is not None
        columns = list(data.columns)
        values = data.to_numpy(dtype=float)
        # a value with decimals is rounded to the nearest integer, record by record, before the clipping: refusing
        # it would tell a data set of whole numbers from its neighbour with one decimal (a red-team audit)
        rounded_values = int(np.count_nonzero(values != np.rint(values)))
        d = len(columns)
        lows, highs = [], []
        for c, lo, hi in zip(columns, low, high, strict=True):
            lo_i, hi_i = _integer_bounds(c, lo, hi)
            lows.append(lo_i)
            highs.append(hi_i)
        ranges = [max(hi - lo, 1) for lo, hi in zip(lows, highs, strict=True)]  # exact Python integers
        col_eps = _split(self.epsilon, d)
        scales = [_geometric_scale(self.name, r, col_eps, f"column {c}") for c, r in zip(columns, ranges, strict=True)]
        as_int = np.zeros((len(data), d), dtype=np.int64)
        clipped_values = 0
        for j, c in enumerate(columns):
            column, lo, hi = data[c].to_numpy(), lows[j], highs[j]
            if column.dtype.kind == "i":  # integers stay exact (a double loses them above 2^53)
                clipped_values += int(np.count_nonzero((column < lo) | (column > hi)))
                exact = np.clip(column.astype(np.int64), lo, hi)
            elif column.dtype.kind == "u":
                top, bottom = np.uint64(max(hi, 0)), np.uint64(max(lo, 0))
                clipped_values += int(np.count_nonzero((column > top) | (column < bottom))) if hi >= 0 else len(column)
                exact = np.clip(np.minimum(column, top).astype(np.int64), lo, hi)
            else:  # doubles above 2^53 are integers already; clipped to +-2^62 they fit int64 exactly
                whole = np.rint(values[:, j])
                clipped = np.clip(whole, float(lo), float(hi))
                clipped_values += int(np.count_nonzero(clipped != whole))
                exact = np.clip(clipped.astype(np.int64), lo, hi)
            as_int[:, j] = exact
        context.spend(epsilon=self.epsilon, mechanism=self.name,
                      sensitivity=f"the column ranges {_fmt_map(columns, ranges)} with epsilon split evenly, "
                                  f"{at_least(col_eps)} per column",
                      relation=RELATION, covers=self._covers(columns, None), not_covered=STEP_NOT_COVERED,
                      noise="exact two-sided geometric noise on the integers (a value with decimals is rounded "
                            "to the nearest integer first, record by record, so the column ranges stay the "
                            "sensitivity)",
                      details={"per_column_scale": [float(u) for u in scales]})
        noise = np.column_stack([sampling.discrete_laplace(context.rng, u, (len(data),)) for u in scales]) \
            if d else np.zeros((len(data), 0), dtype=np.int64)
        out = pd.DataFrame(as_int + noise, index=data.index, columns=columns)
        return Masked(data=out, diagnostics={"clipped_values": clipped_values, "rounded_values": rounded_values,
                                             "noise_scale": [float(u) for u in scales],
                                             **_effective(self.bounds, columns, lows, highs,
                                                          [float(u) for u in scales])})


def _split(epsilon: float, d: int) -> float:
    """The epsilon of each of ``d`` columns: the double nearest ``epsilon / d``, stepped down while ``d`` of it
    add up to more than ``epsilon`` exactly (e.g. 0.3 over 27 columns), so that the columns spend no more
    than the step states."""
    each = epsilon / max(d, 1)
    while each > 0 and Fraction(each) * max(d, 1) > Fraction(epsilon):
        each = math.nextafter(each, 0.0)
    return each


def _integers(name: str, values: Any) -> np.ndarray:
    """``values`` as int64, refusing non-integers and magnitudes beyond 2^62 (before anything is spent)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        if arr.size and (int(arr.max()) > MAX_INTEGER or int(arr.min()) < -MAX_INTEGER):
            raise DataError(f"{name}: integer values beyond +-2^62 = {MAX_INTEGER:.3g} cannot take noise without "
                            "overflowing int64; subtract a public offset or rescale them first")
        return arr.astype(np.int64)
    try:
        as_float = np.asarray(arr, dtype=float)
    except (TypeError, ValueError) as err:
        raise DataError(f"{name}: the values must be integers; {err}") from err
    if not np.all(np.isfinite(as_float)) or not np.all(as_float == np.round(as_float)):
        raise DataError(f"{name}: the values must be integers; use the laplace mechanism for real values")
    if as_float.size and float(np.max(np.abs(as_float))) > MAX_INTEGER:
        raise DataError(f"{name}: integer values beyond +-2^62 = {MAX_INTEGER:.3g} cannot take noise without "
                        "overflowing int64; subtract a public offset or rescale them first")
    return as_float.astype(np.int64)


def _integer_bounds(column: str, low: float, high: float) -> tuple[int, int]:
    """A column's public bounds as whole numbers (floor and ceiling), refused beyond +-2^62."""
    lo_i, hi_i = math.floor(low), math.ceil(high)
    if max(abs(lo_i), abs(hi_i)) > MAX_INTEGER:
        raise ParameterError(
            f"geometric: the bounds of column {column} ([{low:.6g}, {high:.6g}]) exceed +-2^62 = {MAX_INTEGER:.3g}, "
            "the range in which the noisy integers stay exact in int64. Rescale the column (e.g. count in "
            "thousands) or use the laplace mechanism.")
    return lo_i, hi_i


def _geometric_scale(name: str, sensitivity: float | int, epsilon: float, what: str = "") -> Fraction:
    """The exact scale sensitivity / epsilon, rounded up to the sampler's rational."""
    units = Fraction(sensitivity) / Fraction(epsilon)
    if units > sampling.MAX_LAPLACE_SCALE:
        where = f" for {what}" if what else ""
        raise ParameterError(
            f"{name}: the noise scale sensitivity / epsilon = {_approx(units)}{where} exceeds 2^48, the exact "
            "sampler's range (the noise would swamp any integer value). Use a larger epsilon or narrower bounds.")
    return sampling.rational_scale(units)


@attrs.frozen(kw_only=True)
class GaussianMechanism(_StepMixin):
    """The Gaussian mechanism, sampled exactly: discrete Gaussian noise on a
    power-of-two lattice (Canonne, Kamath & Steinke 2020), (epsilon,
    delta)-DP for an L2 sensitivity. Sigma is calibrated with the discrete
    Gaussian's concentrated-DP bound (rho = sensitivity^2 / (2 sigma^2),
    converted to (epsilon, delta) by CKS 2020 Corollary 13), valid for every
    epsilon > 0 and any number of coordinates."""

    name: ClassVar[str] = "gaussian"

    epsilon: float | None = param(float, role="privacy", default=None, gt=0, finite=True,
                                  doc="privacy budget of the step (as a step only)")
    delta: float | None = param(float, role="privacy", default=None, gt=0, lt=1,
                                doc="delta of the step (as a step only)")
    bounds: Any = public_bounds(default=None,
                                doc='public bounds {column = [low, high]} (as a step only), or "data"')

    def _column_plan(self, column: str, low: float, high: float, span: float, epsilon: float) -> Any:
        assert self.delta is not None
        return _gaussian_columns([span], epsilon, self.delta, [column])

    def _release_plan(self, s: Sensitivity, epsilon: float, delta: float, changed: int) -> Any:
        _check_release(self.name, s.l2_bound, epsilon)
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
            raise ParameterError(f"gaussian: delta must be in (0, 1); got {delta!r}")
        return _gaussian_plan(s.l2_bound, epsilon, delta, _changed(self.name, changed, 1))

    def step_problems(self) -> list[str]:
        problems = super().step_problems()
        if self.delta is None:
            problems.append("gaussian needs 'delta' in (0, 1) when it is a recipe step (e.g. delta = 1e-6)")
        return problems

    def release(self, values: Any, *, sensitivity: float | Sensitivity, epsilon: float, delta: float = 0.0,
                context: PrivacyContext, relation: privclust.Relation | str, covers: str, not_covered: str = "",
                changed: int | None = None, **ledger: Any) -> np.ndarray:
        """Spend ``(epsilon, delta)`` (L2 ``sensitivity``) and return ``values`` plus exact Gaussian noise.

        The result lies on the lattice named in the ledger; ``changed`` as for
        :meth:`LaplaceMechanism.release` (each changed value adds one lattice
        step in L2, so ``sqrt(changed)`` steps in all).
        """
        s = Sensitivity.of(sensitivity)
        _check_release(self.name, s.l2_bound, epsilon)
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
            raise ParameterError(f"gaussian: delta must be in (0, 1); got {delta!r}")
        out = _as_array(self.name, values)
        count = _changed(self.name, changed, out.size)
        plan = _gaussian_plan(s.l2_bound, epsilon, delta, count)
        _check_magnitude(self.name, out, plan.gamma)
        details = {"sigma": plan.scale, "lattice": plan.lattice, "effective_sensitivity": plan.sensitivity,
                   **(ledger.pop("details", None) or {})}
        context.spend(epsilon=epsilon, delta=delta, mechanism=self.name, sensitivity=f"L2 {at_most(s.l2_bound)}",
                      relation=relation, covers=covers, not_covered=not_covered, details=details,
                      noise=_noise_text("Gaussian", plan, "L2 "), **ledger)
        return _release_on_lattice(context.rng, out, plan, "gaussian")

    def perturb(self, data: pd.DataFrame, context: PrivacyContext) -> Masked:
        low, high = self._step_bounds(data, context)
        assert self.epsilon is not None and self.delta is not None
        columns = list(data.columns)
        d = len(columns)
        values = data.to_numpy(dtype=float)
        clipped = np.clip(values, low, high)
        ranges = [_range(self.name, c, lo, hi) for c, lo, hi in zip(columns, low, high, strict=True)]
        plans = _gaussian_columns(ranges, self.epsilon, self.delta, columns)
        for j, plan in enumerate(plans):
            _check_magnitude(self.name, np.array([low[j], high[j]]), plan.gamma)
        context.spend(
            epsilon=self.epsilon, delta=self.delta, mechanism=self.name,
            sensitivity=f"the column ranges {_fmt_map(columns, ranges)}, L2 {at_most(math.sqrt(d))} with each "
                        "column rescaled by its range",
            relation=RELATION, covers=self._covers(columns, "L2"), not_covered=STEP_NOT_COVERED,
            noise=_lattices_text("Gaussian", columns, plans),
            details={"sigma": [p.scale for p in plans], "lattice": {c: p.lattice for c, p in zip(columns, plans,
                                                                                                  strict=True)}})
        out = np.empty_like(clipped)
        for j, plan in enumerate(plans):
            out[:, j] = _release_on_lattice(context.rng, clipped[:, j], plan, "gaussian")
        frame = pd.DataFrame(out, index=data.index, columns=columns)
        return Masked(data=frame, diagnostics={"clipped_values": int((clipped != values).sum()),
                                               "noise_scale": [p.scale for p in plans],
                                               **_effective(self.bounds, columns, low, high,
                                                            [p.scale for p in plans])})


def _check_release(name: str, sensitivity: float, epsilon: float) -> None:
    if isinstance(sensitivity, bool) or not (isinstance(sensitivity, int | float) and math.isfinite(sensitivity)
                                             and sensitivity > 0):
        raise ParameterError(f"{name}: the sensitivity must be a finite number > 0; got {sensitivity!r}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not math.isfinite(epsilon) or epsilon <= 0:
        raise ParameterError(f"{name}: epsilon must be a finite number > 0; got {epsilon!r}")


# --------------------------------------------------------------------------- Gaussian calibration


def _cdp_log_delta(rho: float, epsilon: float) -> float:
    """The natural log of a delta for which rho-zCDP implies (epsilon, delta)-DP (CKS 2020, Corollary 13).

    delta = exp((a - 1)(a rho - epsilon)) / (a - 1) * (1 - 1/a)^a holds for
    every a > 1; a near-optimal a is found by bisection on the derivative of
    the exponent. Any a gives a valid bound, so the search only affects
    tightness. The bound is evaluated in log space: a delta in the subnormal
    range (below 2.2e-308) has too few significant bits for a relative
    margin on it to mean anything, its logarithm has all of them.
    """
    if rho <= 0:
        return -math.inf
    lo, hi = 1.01, (epsilon + 1.0) / (2.0 * rho) + 2.0
    alpha = lo
    for _ in range(200):
        alpha = 0.5 * (lo + hi)
        if (2 * alpha - 1) * rho - epsilon + math.log1p(-1.0 / alpha) < 0:
            lo = alpha
        else:
            hi = alpha
    exponent = (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1.0 / alpha)
    return min(0.0, exponent - math.log(alpha - 1))


def _cdp_delta(rho: float, epsilon: float) -> float:
    """:func:`_cdp_log_delta` as a delta (0 when it underflows)."""
    return math.exp(_cdp_log_delta(rho, epsilon))


#: Safety factor on delta for the floating-point evaluation of the bound
#: (applied to its logarithm: log(delta) + log(_DELTA_MARGIN)).
_DELTA_MARGIN = 1.0 - 1e-6


def _zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest rho (within 1e-12, rounded down) whose zCDP bound gives (epsilon, delta)-DP."""
    target = math.log(delta) + math.log(_DELTA_MARGIN)
    lo, hi = 0.0, epsilon + 1.0
    while _cdp_log_delta(hi, epsilon) <= target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _cdp_log_delta(mid, epsilon) <= target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return lo


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The sigma for which discrete Gaussian noise is (epsilon, delta)-DP for an L2 ``sensitivity``.

    The discrete Gaussian N_Z(0, sigma^2) with an L2 sensitivity Delta on the
    integer lattice is rho-zCDP with rho = Delta^2 / (2 sigma^2) (CKS 2020,
    Theorem 4 and its multivariate form), and rho-zCDP implies (epsilon,
    delta)-DP with the delta of :func:`_cdp_delta`.
    """
    rho = _zcdp_rho(epsilon, delta)
    if not rho > 0:
        return math.inf
    # two steps up absorb the rounding of the division and the square root
    return float(np.nextafter(np.nextafter(sensitivity / math.sqrt(2.0 * rho), np.inf), np.inf))


def _gaussian_plan(sensitivity: float, epsilon: float, delta: float, changed: int) -> _Plan:
    reference = discrete_gaussian_sigma(epsilon, delta, sensitivity)
    if not math.isfinite(reference) or reference > _TOP / 4:
        raise ParameterError(
            f"gaussian: epsilon = {at_most(epsilon)} and delta = {at_most(delta, 3)} need a noise sigma beyond the "
            "range of doubles; the release would be infinite. Use a larger epsilon or delta.")
    root = math.isqrt(changed - 1) + 1  # ceil(sqrt(changed))
    gamma = sampling.lattice_for(sensitivity, root, Fraction(reference) / 2**24)
    effective = sampling.lattice_sensitivity(sensitivity, gamma, changed, "L2")
    sigma = discrete_gaussian_sigma(epsilon, delta, effective)
    return _gaussian_units("gaussian", sigma, effective, gamma, epsilon, delta)


def _gaussian_units(name: str, sigma: float, effective: float, gamma: float, epsilon: float, delta: float,
                    what: str = "") -> _Plan:
    sigma_units = Fraction(sigma) / Fraction(gamma)
    if sigma_units > sampling.MAX_GAUSSIAN_SIGMA or not math.isfinite(sigma):
        where = f" for {what}" if what else ""
        raise ParameterError(
            f"{name}: epsilon = {at_most(epsilon)} and delta = {at_most(delta, 3)}{where} need a sigma of "
            f"{_approx(sigma_units)} "
            f"lattice steps (lattice {sampling.lattice_name(gamma)}), beyond the exact sampler's range (2^26). "
            "Use a larger epsilon or delta, or release fewer values.")
    variance = sampling.discrete_gaussian_variance(sigma_units**2)
    return _Plan(gamma=gamma, sensitivity=effective, units=variance,
                 scale=math.sqrt(float(variance)) * gamma)


def _gaussian_columns(ranges: list[float], epsilon: float, delta: float, columns: list[str]) -> list[_Plan]:
    """One plan per column for the step: noise proportional to each column's range (plus one lattice step)."""
    d = len(ranges)
    if not d:
        return []
    unit = discrete_gaussian_sigma(epsilon, delta, math.sqrt(d))  # sigma per unit of (range + step)
    if not math.isfinite(unit) or unit > _TOP / 4:
        raise ParameterError(
            f"gaussian: epsilon = {at_most(epsilon)} and delta = {at_most(delta, 3)} need a noise sigma beyond the "
            "range of doubles. Use a larger epsilon or delta.")
    plans = []
    for column, r in zip(columns, ranges, strict=True):
        gamma = sampling.lattice_for(r, 1, Fraction(unit) * Fraction(r) / 2**24)
        effective = sampling.lattice_sensitivity(r, gamma, 1, "L1")
        sigma = float(np.nextafter(unit * effective, np.inf))
        if not math.isfinite(sigma):
            raise ParameterError(f"gaussian: the noise sigma for column {column} overflows the range of doubles; "
                                 "use narrower bounds or a larger epsilon or delta")
        plans.append(_gaussian_units("gaussian", sigma, effective, gamma, epsilon, delta, f"column {column}"))
    return plans


def _gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The smallest delta for which (continuous) N(0, sigma^2) is (epsilon, delta)-DP
    (Balle & Wang 2018, Theorem 8). Kept for comparison with the discrete calibration."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    # Phi(a - b) - e^eps Phi(-a - b), with the second term in log space.
    first = special.ndtr(a - b)
    second = math.exp(epsilon + special.log_ndtr(-a - b))
    return float(first - second)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest sigma making the continuous Gaussian mechanism (epsilon, delta)-DP,
    found by bisection on the exact privacy profile (Balle & Wang 2018).
    The mechanisms use :func:`discrete_gaussian_sigma`; this is the reference it is compared to."""
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
