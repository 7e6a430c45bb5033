"""The accountants: how the privacy costs in a ledger compose.

An :class:`Accountant` totals the DP entries of a ledger and refuses a new
one that would take the total past the budget. :class:`BasicAccountant` is
the host's (sequential composition, parallel over the host's strata, the two
neighbouring relations converted); a plugin may supply its own through the
``privclust_make_accountant`` hook, whose default implementation is in
:mod:`privclust.accounting`.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

import attrs

from .claims import ADD_REMOVE, REPLACE_ONE, DifferentialPrivacy, relation_kind
from .errors import BudgetExceededError, PrivclustError
from .ledger import LedgerEntry, at_least, at_most, component_text, exact
from .recipe import Budget

__all__ = [
    "ADD_REMOVE",
    "REPLACE_ONE",
    "Accountant",
    "BasicAccountant",
    "accountant_description",
    "accountant_name",
    "entry_relation",
    "delta_within_budget",
    "file_cost",
    "group_delta",
    "relation_kind",
    "sum_up",
    "within_budget",
]

#: Relative slack per composed entry when comparing a total with the budget: float rounding only (a few units in the
#: last place of each sum, so that 0.1 + 0.2 fits a budget of 0.3); 1e-9 let a budget of 1 be overspent by 9e-10
#: (a red-team audit).
_ULPS_PER_TERM = 4.0


def within_budget(total: float, limit: float, terms: int) -> bool:
    """Whether ``total``, a float sum of ``terms`` costs, stays within ``limit`` up to the rounding of that sum.

    Overflow-safe: only the excess over ``limit`` is compared with the slack, so a ``limit`` near the largest double
    never widens to infinity (``limit * (1 + slack)`` did, and a budget of 1.7976931348623157e308 admitted a total of
    inf: a red-team audit). An infinite or NaN total is within only an infinite ``limit``."""
    if total <= limit:
        return True
    if not math.isfinite(total):  # inf above a finite limit, or NaN
        return False
    slack = _ULPS_PER_TERM * (terms + 1) * sys.float_info.epsilon
    # both finite and total > limit >= 0: their difference is finite, and the slack is a small fraction of limit
    return total - limit <= limit * slack


def sum_up(costs: Iterable[float]) -> float:
    """The sum of ``costs`` computed exactly (as fractions of the doubles)
    and rounded **up** to a double: a plain float sum rounds each addition to
    the nearest, so 1024 + 20 x 1e-13 read 1024, below the costs composed (a
    red-team audit). A non-finite cost (infinite, NaN) gives the plain sum."""
    values = [float(c) for c in costs]
    if not all(math.isfinite(v) for v in values):
        return sum(values, 0.0)
    total = sum((Fraction(v) for v in values), Fraction(0))
    try:
        rounded = float(total)
    except OverflowError:
        return math.inf
    return math.nextafter(rounded, math.inf) if Fraction(rounded) < total else rounded


def delta_within_budget(total: float, limit: float, terms: int) -> bool:
    """Whether a total delta stays within the budget's ``limit``: any delta
    above 0 exceeds a budget of delta 0 (pure epsilon-DP), however small (a
    gaussian step of delta 1e-301 passed one: a red-team audit); a positive
    limit is compared as :func:`within_budget` compares."""
    if limit == 0:
        return not total > 0
    return within_budget(total, limit, terms)


@runtime_checkable
class Accountant(Protocol):
    """Composes privacy costs. A plugin may supply its own through the
    ``privclust_make_accountant`` hook."""

    # Read-only properties: an attrs-frozen accountant (BasicAccountant) and one with plain attributes both fit.
    @property
    def budget(self) -> Budget:
        """The budget the accountant checks new entries against."""

    @property
    def description(self) -> str:
        """One line naming the composition rule, for the ledger and the report."""

    def total(self, entries: Sequence[LedgerEntry]) -> tuple[float, float]:
        """The (epsilon, delta) the DP entries cost together."""
        ...

    def check(self, entries: Sequence[LedgerEntry], new: LedgerEntry) -> None:
        """Raise :class:`~privclust.BudgetExceededError` if ``new`` would take
        the total past the budget."""
        ...


def entry_relation(entry: LedgerEntry) -> str | None:
    """The kind of neighbouring relation a ``dp`` entry holds under, read from
    its typed fact (:class:`~privclust.Relation`): ``"replace-one"``,
    ``"add/remove"``, another relation's own words, or ``None``."""
    fact = entry.fact
    return fact.relation.kind if isinstance(fact, DifferentialPrivacy) else None


def group_delta(epsilon: float, delta: float) -> float:
    """``(1 + e^epsilon) delta``: an add/remove release's delta under
    replace-one. Infinite (no guarantee) where ``e^epsilon`` overflows, never
    an ``OverflowError``; 0 when ``delta`` is."""
    if not delta:
        return 0.0
    try:
        return (1.0 + math.exp(epsilon)) * delta
    except OverflowError:  # e^epsilon beyond the largest double (epsilon above about 709.78)
        return math.inf


def file_cost(epsilon: float, delta: float, relation: str | None) -> tuple[float, float]:
    """A composed (epsilon, delta) as it holds for the released per-record
    file: a total stated under add/remove counts twice, (2 epsilon,
    (1 + e^epsilon) delta) under replace-one, because the file shows its
    number of records (decision 24, as the verdict states it:
    :func:`privclust.verify.whole_file_relation`); any other total as it is.
    The budget bounds this figure, and the report states it."""
    if relation is not None and relation_kind(relation) == ADD_REMOVE:
        return 2.0 * epsilon, group_delta(epsilon, delta)
    return epsilon, delta


@attrs.frozen
class BasicAccountant:
    """Basic sequential composition, with parallel composition over the parts
    of a partition the host made.

    Entries without a ``partition`` add up (Dwork & Roth, Thm 3.16). Entries
    sharing a partition group ``(group, part)`` touch disjoint sets of records:
    the group costs the maximum, over its parts, of the sum within a part
    (McSherry 2009, parallel composition). Groups and ungrouped entries add.

    Only the host sets ``partition`` on an entry: when the recipe declares
    strata (``[roles] strata = ["<public column>", ...]``) the runner runs each
    step once per stratum, on that stratum's records only, so the parts are
    disjoint by construction. A ``partition`` a component passes to
    ``context.spend`` is not checkable; the context records it in the entry's
    details and leaves ``partition`` empty, so it is charged sequentially.

    Relations: releases stated under one neighbouring relation compose under
    it. When a run mixes ``add/remove`` and ``replace-one`` releases, the total
    is stated under replace-one, each add/remove release counting as
    (2 epsilon, (1 + e^epsilon) delta): replacing a record is removing it and
    adding another (group privacy for two records). Any other mix of relations
    cannot be composed and is refused.

    The budget bounds the total as it holds for the released file
    (:func:`file_cost`): when every release is stated under add/remove, the
    file, which shows its number of records, is covered under replace-one, so
    :meth:`check` counts that total twice, as the verdict states it.
    """

    budget: Budget
    description: str = (
        "basic sequential composition (epsilons and deltas add up), parallel composition "
        "(maximum over the strata of the public stratum columns the host split the records by); add/remove "
        "releases count twice under replace-one"
    )

    def relation(self, entries: Sequence[LedgerEntry]) -> str | None:
        """The relation the total holds under (``None`` without DP releases)."""
        return self._target({k for e in entries if e.kind == "dp" and (k := entry_relation(e)) is not None})

    @staticmethod
    def _target(kinds: set[str]) -> str | None:
        """The relation releases stated under ``kinds`` compose under."""
        if not kinds:
            return None
        if len(kinds) == 1:
            return next(iter(kinds))
        if kinds == {REPLACE_ONE, ADD_REMOVE}:
            return REPLACE_ONE
        raise PrivclustError(
            "cannot compose releases stated under different neighbouring relations: "
            + "; ".join(sorted(repr(k) for k in kinds))
            + ". State each release's relation as 'replace-one ...' or 'add/remove ...', or supply an accountant "
            "that knows how to convert them (the privclust_make_accountant hook)"
        )

    def total(self, entries: Sequence[LedgerEntry]) -> tuple[float, float]:
        return self._total(entries, self.relation(entries))

    @staticmethod
    def _total(entries: Sequence[LedgerEntry], target: str | None) -> tuple[float, float]:
        """The DP entries' total stated under ``target``."""
        epsilons: list[float] = []
        deltas: list[float] = []
        groups: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for e in entries:
            if e.kind != "dp":
                continue
            e_eps, e_delta = e.epsilon, e.delta
            if target == REPLACE_ONE and entry_relation(e) == ADD_REMOVE:
                e_eps, e_delta = 2.0 * e.epsilon, group_delta(e.epsilon, e.delta)
            if e.partition is None:
                epsilons.append(e_eps)
                deltas.append(e_delta)
            else:
                group, part = e.partition
                acc = groups.setdefault(group, {}).setdefault(part, ([], []))
                acc[0].append(e_eps)
                acc[1].append(e_delta)
        for parts in groups.values():  # each part summed exactly, rounded up; the largest counts
            epsilons.append(max(sum_up(v[0]) for v in parts.values()))
            deltas.append(max(sum_up(v[1]) for v in parts.values()))
        return sum_up(epsilons), sum_up(deltas)

    def epsilon_room(self, entries: Sequence[LedgerEntry], relation: str | None) -> tuple[float, float]:
        """How the budget counts a further release stated under ``relation``
        (its kind, or words; ``None``: a release that states none, counted
        under the relation of ``entries``): ``(base, weight)`` such that,
        after a release of epsilon ``x``, the epsilon the budget bounds
        (:func:`file_cost` of the total) is ``base + weight * x``.
        ``weight`` is 2 for an add/remove release (counted twice: as the
        file's figure when every release is add/remove, as group privacy
        under replace-one when the run mixes the two), else 1. The release is
        taken to compose sequentially: inside a stratum it may cost less
        (:meth:`largest_epsilon` counts the stratum).
        :raises PrivclustError: when ``relation`` cannot be composed with the
            releases in ``entries``."""
        kinds = {k for e in entries if e.kind == "dp" and (k := entry_relation(e)) is not None}
        own = None if relation is None else relation_kind(relation)
        target = self._target(kinds | ({own} if own is not None else set()))
        spent, _ = self._total(entries, target)
        if target == ADD_REMOVE:  # the file's figure: the whole add/remove total counts twice
            return 2.0 * spent, 2.0
        return spent, 2.0 if own == ADD_REMOVE else 1.0  # group privacy: an add/remove release under replace-one

    def fits_exactly(self, entries: Sequence[LedgerEntry], new: LedgerEntry) -> bool:
        """Whether ``new`` fits the budget with no rounding slack: the file's
        total (:func:`file_cost`, strata composed in parallel) at most the
        budget's epsilon and delta. A figure the host states as what may
        still be spent passes this test, so that spending it gives a total
        whose stated (rounded-up) figure is not above the budget."""
        if not self.budget.limited:
            return True
        composed = [*entries, new]
        eps, delta = file_cost(*self.total(composed), self.relation(composed))
        limit = self.budget.epsilon
        assert limit is not None
        return eps <= limit and delta <= self.budget.delta

    def admits(self, entries: Sequence[LedgerEntry], new: LedgerEntry) -> bool:
        """Whether :meth:`check` accepts ``new`` (without composing its
        refusal's figures: ``context.can_spend`` asks this).

        :raises PrivclustError: when ``new``'s relation cannot be composed
            with the releases in ``entries``."""
        composed = [*entries, new]
        relation = self.relation(composed)  # refuses relations that cannot be composed, budget or not
        if not self.budget.limited:
            return True
        eps, delta = file_cost(*self.total(composed), relation)
        limit = self.budget.epsilon
        assert limit is not None
        terms = len(entries) + 1
        return within_budget(eps, limit, terms) and delta_within_budget(delta, self.budget.delta, terms)

    def largest_epsilon(self, entries: Sequence[LedgerEntry], new: LedgerEntry, *, high: float | None = None,
                        delta: float | None = None) -> float | None:
        """The largest epsilon (a double in ``[0, high]``, ``high`` the
        release's own epsilon unless given) at which ``new``, with its delta
        (or ``delta``) and its relation and stratum, passes
        :meth:`fits_exactly`; ``None`` when even epsilon 0 does not (its
        delta alone goes past the budget, or no room is left)."""
        at_delta = new.delta if delta is None else delta
        limit = self.budget.epsilon
        guess = None
        if limit is not None:  # the sequential room: within a few doubles of the answer outside strata
            base, weight = self.epsilon_room(entries, entry_relation(new))
            guess = (limit - base) / weight
        return _largest(lambda x: self.fits_exactly(entries, attrs.evolve(new, epsilon=x, delta=at_delta)),
                        new.epsilon if high is None else high, guess)

    def largest_delta(self, entries: Sequence[LedgerEntry], new: LedgerEntry, epsilon: float) -> float | None:
        """The largest delta in ``[0, new.delta]`` at which ``new``, at
        ``epsilon``, passes :meth:`fits_exactly` (``None``: none does)."""
        return _largest(lambda d: self.fits_exactly(entries, attrs.evolve(new, epsilon=epsilon, delta=d)), new.delta)

    def check(self, entries: Sequence[LedgerEntry], new: LedgerEntry) -> None:
        if self.admits(entries, new):
            return
        composed = [*entries, new]
        relation = self.relation(composed)
        eps, delta = file_cost(*self.total(composed), relation)
        limit_eps, limit_delta = self.budget.epsilon, self.budget.delta
        assert limit_eps is not None
        terms = len(entries) + 1
        eps_over = not within_budget(eps, limit_eps, terms)
        delta_over = not delta_within_budget(delta, limit_delta, terms)
        if not (eps_over or delta_over):
            return
        own = entry_relation(new)
        if relation == ADD_REMOVE:
            twice = (" (the add/remove total counted twice: the released file shows its number of records, so it "
                     "holds under replace-one)")
        elif relation == REPLACE_ONE and ADD_REMOVE in {entry_relation(e) for e in composed if e.kind == "dp"}:
            twice = (" (with releases under both relations the total holds under replace-one, each add/remove "
                     "release counted twice)")
        else:
            twice = ""
        under = f" under {own}" if own is not None else ""
        where = f"step {new.step} ({new.step_id})" if new.step is not None else "this release"
        pure = " (a pure-epsilon budget: it takes no release with a delta)" if limit_delta == 0 else ""
        if eps_over and delta_over:
            spends = f"epsilon={at_least(new.epsilon)} and delta={at_least(new.delta, 3)}"
            totals = (f"the total to {at_least(eps)}{twice} > the budget epsilon={exact(limit_eps)} and the total "
                      f"delta to {at_least(delta, 3)} > the budget delta={exact(limit_delta)}{pure}")
        elif eps_over:
            spends = f"epsilon={at_least(new.epsilon)}"
            totals = f"the total to {at_least(eps)}{twice} > the budget epsilon={exact(limit_eps)}"
        else:
            spends = f"delta={at_least(new.delta, 3)}"
            totals = f"the total to {at_least(delta, 3)}{twice} > the budget delta={exact(limit_delta)}{pure}"
        raise BudgetExceededError(
            f"{where} would spend {spends}{under} ({new.mechanism} on {new.covers}), bringing {totals}; "
            f"{self._fixes(entries, new, eps if eps_over else None, delta if delta_over else None, under)}. "
            f"{_nothing_drawn(entries, new)}"
        )

    def _fixes(self, entries: Sequence[LedgerEntry], new: LedgerEntry, eps: float | None, delta: float | None,
               under: str) -> str:
        """What would let a refused release through: the budget that holds
        it (``eps`` / ``delta``: the totals over the budget, ``None`` for one
        within it), and the largest release that fits this budget. Every
        figure is one the accountant accepts: a budget of at least the
        figures holds the release as it is, and the lowered release fits this
        budget exactly (strata composed in parallel, the delta that an
        add/remove release's epsilon brings under replace-one counted)."""
        raised: list[str] = []
        cannot = ""
        if eps is not None:
            text = at_least(eps)
            if math.isfinite(float(text)):
                raised.append(f"epsilon to at least {text}")
            else:
                cannot = "no finite [privacy] epsilon holds it"
        if delta is not None:
            text = at_least(delta, 3)
            if float(text) < 1:
                raised.append(f"delta to at least {text}")
            else:
                cannot = cannot or "no [privacy] delta holds it (a budget's delta is below 1)"
        raise_text = "raise [privacy] " + " and ".join(raised) if not cannot else cannot
        room = self.largest_epsilon(entries, new)
        if room:  # a positive epsilon at the release's own delta fits
            return f"{raise_text}{': lower' if cannot else ' or lower'} its epsilon to at most {at_most(room)}"
        none_left = f"no epsilon is left for a release{under or ' of this kind'}"
        if new.delta > 0:  # its delta goes past the budget at any epsilon: the delta must come down too
            pure_room = self.largest_epsilon(entries, new, delta=0.0)
            if pure_room:
                keep = "" if pure_room >= new.epsilon else f" with epsilon at most {at_most(pure_room)}"
                lowered = self.largest_delta(entries, new, pure_room)
                joint = ": " if cannot else " or "
                if not lowered or self.budget.delta == 0:
                    return f"{raise_text}{joint}use a pure-epsilon mechanism (delta 0){keep}"
                keep = "" if pure_room >= new.epsilon else f" and its epsilon to at most {at_most(pure_room)}"
                return f"{raise_text}{joint}lower its delta to at most {at_most(lowered, 3)}{keep}"
        return f"{raise_text} ({none_left})" if not cannot else f"{raise_text}, and {none_left}"


def _largest(fits: Callable[[float], bool], high: float, guess: float | None = None) -> float | None:
    """The largest double ``x`` in ``[0, high]`` with ``fits(x)``, for a
    ``fits`` that turns false as ``x`` grows (found by bisection on the
    doubles' bit patterns, which order the non-negative doubles, starting
    with a few steps out from ``guess`` when it is inside); ``None`` when
    ``fits(0)`` is false."""
    if not fits(0.0):
        return None
    if fits(high):
        return high
    low, top = 0, _bits(high)  # fits at low, not at top
    if guess is not None and 0.0 < guess < high:
        at = _bits(guess)
        up = fits(guess)
        low, top = (at, top) if up else (low, at)
        step = 1
        for _ in range(8):  # widening steps from the guess, then bisection in what is left
            probe = at + step if up else at - step
            if not low < probe < top:
                break
            if fits(_double(probe)):
                low = probe
                if not up:
                    break
            else:
                top = probe
                if up:
                    break
            step *= 2
    while top - low > 1:
        middle = (low + top) // 2
        if fits(_double(middle)):
            low = middle
        else:
            top = middle
    return _double(low)


def _bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def _double(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def _nothing_drawn(entries: Sequence[LedgerEntry], new: LedgerEntry) -> str:
    """What a refusal left behind: nothing, unless the ledger already holds
    entries of the same step (releases, whose noise was drawn, or claims),
    or, for a release made outside a step, any entry."""
    if new.step is None:
        if not entries:
            return "Nothing was recorded and no noise was drawn."
        return (f"This release was not recorded and no noise was drawn for it; the ledger keeps the "
                f"{_count(len(entries), 'earlier entry', 'earlier entries')} recorded before it.")
    earlier = [e for e in entries if e.step == new.step and e.step_id == new.step_id]
    if not earlier:
        return "Nothing was recorded and no noise was drawn."
    kinds = ", ".join(_count(sum(e.kind == kind for e in earlier), *_KINDS.get(kind, (kind, kind)))
                      for kind in dict.fromkeys(e.kind for e in earlier))
    return (f"This release was not recorded and no noise was drawn for it, but the ledger keeps "
            f"{_count(len(earlier), 'earlier entry', 'earlier entries')} of the same step ({kinds}); a component "
            "asks context.check_spend(its total, relation=...) before it records anything.")


#: How a refusal names the entries a step left in the ledger, by kind.
_KINDS = {"dp": ("release", "releases"), "guarantee": ("guarantee claim", "guarantee claims"),
          "leak": ("leak", "leaks"), "process": ("host note", "host notes"), "verified": ("host check", "host checks")}


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def accountant_name(accountant: Any) -> str:
    """Who composes the ledger: ``"the host's basic accountant"`` for
    :class:`BasicAccountant`, else the plugin class's dotted name."""
    cls = type(accountant)
    return "the host's basic accountant" if cls is BasicAccountant else f"{cls.__module__}.{cls.__qualname__}"


def accountant_description(accountant: Any) -> str:
    """The accountant's rule in words, credited to its plugin when it is not the host's."""
    text = str(getattr(accountant, "description", type(accountant).__name__))
    if type(accountant) is BasicAccountant:
        return text
    text = component_text("the plugin accountant's description", text)
    return f"{text} (as stated by the plugin accountant {accountant_name(accountant)}, not checked by the host)"
