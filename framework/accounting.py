"""The privacy-accounting context every run carries.

:class:`PrivacyContext` holds the run's budget, its accountant, its random
streams, its ledger and a typed stash for plugin-private state. Components
receive it as their ``context`` argument and never keep it.

Spending: ``context.spend(...)`` asks the accountant to compose the new cost
with everything already in the ledger and raises
:class:`~privclust.BudgetExceededError` *before* anything is recorded and
before any noise is drawn. Noise mechanisms call it first, then draw from
``context.rng``.

Randomness: one :class:`numpy.random.SeedSequence` per run (entropy from the
operating system unless a seed is given), spawned once per step, in step
order. The seed itself is never stored in the ledger or any report; anyone
holding it could undo the masking. The context does not even keep it: it
keeps only numpy's mixed entropy pool, from which it derives exactly the
streams a ``SeedSequence`` would (see :class:`_SeedStream`).
"""

from __future__ import annotations

import copy
import decimal
import enum
import math
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs
import numpy as np
import pandas as pd

from .components import Sensitivity
from .errors import BudgetExceededError, ParameterError, PrivclustError, PrivclustWarning
from .hookspecs import hookimpl
from .recipe import KNOWN_LEAKS, Budget, ComponentSpec

if TYPE_CHECKING:  # pragma: no cover
    from .constraints import ConstraintSet
    from .registry import Registry

__all__ = [
    "Accountant",
    "BasicAccountant",
    "Budget",
    "ContextView",
    "Ledger",
    "LedgerEntry",
    "NothingProtectedWarning",
    "Origin",
    "PrivacyContext",
    "PrivacyLeakWarning",
    "RecordProgress",
    "Stash",
    "StashKey",
    "at_least",
    "at_most",
    "ThrottledProgress",
]

T = TypeVar("T")

#: Relative slack when comparing a total with the budget (float rounding only).
_TOLERANCE = 1e-9

#: The ``component`` the host's own entries show (for people: whether an
#: entry is the host's is its typed :attr:`LedgerEntry.origin`, never this text).
HOST = "privclust (host)"


class Origin(enum.Enum):
    """Who wrote a ledger entry. ``HOST``: the host's private recording path
    (``PrivacyContext._record_host``), the only one that sets it; ``COMPONENT``:
    everything else (``spend``, ``record``, ``record_leak``, and any entry built
    without an origin). A component cannot obtain ``HOST`` through the public
    recording calls, whatever name or text it passes."""

    HOST = "host"
    COMPONENT = "component"


def _to_origin(value: Any) -> Origin:
    """An :class:`Origin`, or exactly its value's text (a saved ledger's
    ``"host"`` / ``"component"``); anything else is refused, not folded."""
    if isinstance(value, Origin):
        return value
    if isinstance(value, str) and value in ("host", "component"):
        return Origin(value)
    raise PrivclustError(f"a ledger entry's origin is 'host' or 'component'; got {value!r}")

#: The ``status`` of a ``guarantee`` entry: ``claimed`` (written by a
#: component, not checked by the host), ``verified`` (checked on the released
#: data by the host, or written by it), ``refuted`` (checked and false),
#: ``void`` (nothing was protected, so the claim protects nothing).
STATUSES = ("claimed", "verified", "refuted", "void")


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


@attrs.frozen(kw_only=True)
class LedgerEntry:
    """One line of the ledger.

    ``kind`` is ``"dp"`` (a differentially private release), ``"guarantee"``
    (a non-DP guarantee such as k-anonymity or edit rules satisfied),
    ``"leak"`` (something that weakens a guarantee, e.g. a data-dependent
    parameter), ``"process"`` (a step applied, for the transparency record,
    written by the runner) or ``"verified"`` (what the host measured on the
    released data itself).

    A ``guarantee`` entry a component writes is a *claim*: ``claim`` keeps the
    component's own words, ``status`` says whether the host verified it, and
    ``statement`` presents it as "<component> claims: ..." with the host's
    check appended.
    """

    seq: int
    kind: str
    step: int | None
    step_id: str | None
    component: str | None
    statement: str
    mechanism: str | None = None
    sensitivity: Any = None
    relation: str | None = None
    epsilon: float = 0.0
    delta: float = 0.0
    claimed_epsilon: float | None = None
    covers: str | None = None
    not_covered: str | None = None
    partition: tuple[str, str] | None = None
    details: Mapping[str, Any] = attrs.field(factory=dict, converter=lambda d: dict(d or {}))
    claim: str | None = None
    status: str | None = None
    #: Who wrote the entry (:class:`Origin`): typed, set to ``HOST`` only by
    #: the host's own recording path; ``component`` is only the name shown.
    origin: Origin = attrs.field(default=Origin.COMPONENT, converter=_to_origin)

    @property
    def by_host(self) -> bool:
        """Whether the host wrote this entry (its typed origin, not its text)."""
        return self.origin is Origin.HOST

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=False)
        out["partition"] = list(self.partition) if self.partition else None
        out["origin"] = self.origin.value
        return _jsonable(out)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> LedgerEntry:
        """An entry from :meth:`to_dict`'s plain data (a saved JSON ledger).

        The origin is restored exactly as saved (an entry without one is a
        component's), and the loader refuses what no run writes: an unknown
        origin, a host origin on a ``dp`` or ``leak`` entry or on a host
        ``verified``/``guarantee`` entry shown under another name, a
        ``process`` or ``verified`` entry that is not the host's, and a
        component's entry named like the host or whose own words (its
        ``claim``, or a leak's statement) read as the host's. A file is not
        signed: whoever can edit it can edit both fields together."""
        return _entry_from_record(cls, record)


def at_least(value: float, digits: int = 6) -> str:
    """A privacy-loss figure (an epsilon, a delta, a rho) as a person reads
    it: ``digits`` significant digits, rounded **up** whenever the nearest
    rounding would show less than the value (``f"{1/3:.6g}"`` is
    ``0.333333``, below the epsilon of each of three columns sharing 1;
    ``at_least(1/3)`` is ``0.333334``; ``f"{1.2349e-6:.3g}"`` is
    ``1.23e-06``, ``at_least(1.2349e-6, 3)`` is ``1.24e-06``). A figure
    shown this way is never below the one that holds, so a statement that
    quotes it never claims more privacy than it gives. Use it for every
    privacy-loss figure a component writes into a ledger statement, a claim
    or a report; the host uses it for its own.

    >>> at_least(1 / 3), at_least(0.1234567, 3), at_least(0.5), at_least(0.0)
    ('0.333334', '0.124', '0.5', '0')
    """
    text = f"{value:.{digits}g}"
    if not (math.isfinite(value) and value > 0) or float(text) >= value:
        return text
    exact = decimal.Decimal(value)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return f"{float(exact.quantize(step, rounding=decimal.ROUND_CEILING)):.{digits}g}"


def at_most(value: float, digits: int = 6) -> str:
    """The mirror of :func:`at_least`: ``digits`` significant digits,
    rounded **down** whenever the nearest rounding would show more than the
    value. For a figure a statement is weaker for understating: the
    sensitivity a mechanism was calibrated to and the scale of the noise it
    drew (a guarantee stated for a sensitivity of ``2/3`` must not read
    ``0.666667``, which covers a slightly larger change than the noise was
    drawn for), or an audit's lower bound on epsilon.

    >>> at_most(2 / 3), at_most(0.1239, 3), at_most(4.0), at_most(0.0)
    ('0.666666', '0.123', '4', '0')
    """
    text = f"{value:.{digits}g}"
    if not math.isfinite(value) or value == 0 or float(text) <= value:
        return text
    exact = decimal.Decimal(value)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return f"{float(exact.quantize(step, rounding=decimal.ROUND_FLOOR)):.{digits}g}"


def _exact(value: Any) -> str:
    """A stated number as it was given: the short form (``1``, ``0.1``) when
    it is the same number, else every digit (``repr``): a budget or a
    stated epsilon shown exactly, never rounded either way."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        return str(value)
    number = float(value)
    text = f"{number:g}"
    return text if float(text) == number else repr(number)


def _dp_statement(
    *, epsilon: float, delta: float, mechanism: str, sensitivity: Any, relation: str, covers: str,
    not_covered: str, claimed_epsilon: float | None, noise: str = "",
) -> str:
    guarantee = f"({at_least(epsilon, 6)}, {at_least(delta, 3)})-DP" if delta else f"{at_least(epsilon, 6)}-DP"
    text = f"{covers} is {guarantee} under {relation}, by the {mechanism} mechanism with sensitivity {sensitivity}"
    text += f" ({noise})." if noise else "."
    if claimed_epsilon is not None and not math.isclose(claimed_epsilon, epsilon):
        text += f" (The method's own claim is epsilon = {at_least(claimed_epsilon)}; the figure above is what holds.)"
    if not_covered:
        text += f" Not covered: {not_covered}"
        if not text.endswith("."):
            text += "."
    return text


class Ledger:
    """The append-only record of a run: DP spends, guarantees, leaks, processes."""

    def __init__(self, entries: Sequence[LedgerEntry] = ()):
        self._entries: list[LedgerEntry] = list(entries)

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    def _append(self, entry: LedgerEntry) -> None:
        self._entries.append(entry)

    def _replace(self, entry: LedgerEntry) -> None:
        """Host only: replace the entry with the same ``seq`` (the host's
        annotation of a component's claim)."""
        self._entries[entry.seq] = entry

    def __iter__(self) -> Iterator[LedgerEntry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i: int) -> LedgerEntry:
        return self._entries[i]

    def of_kind(self, kind: str) -> list[LedgerEntry]:
        return [e for e in self._entries if e.kind == kind]

    def to_records(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self._entries]

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Ledger:
        """A ledger from :meth:`to_records` (e.g. the ``ledger`` of a JSON
        report): every entry keeps the origin it was saved with, checked by
        :meth:`LedgerEntry.from_dict`; entries are numbered in order."""
        entries = [LedgerEntry.from_dict(r) for r in records]
        wrong = [e.seq for i, e in enumerate(entries) if e.seq != i]
        if wrong:
            raise PrivclustError(f"a saved ledger numbers its entries 0, 1, ...; entry {wrong[0]} is out of place")
        return cls(entries)

    def to_frame(self) -> pd.DataFrame:
        columns = ["seq", "kind", "origin", "step", "step_id", "component", "mechanism", "epsilon", "delta",
                   "claimed_epsilon", "sensitivity", "relation", "statement"]
        rows = [{c: getattr(e, c) for c in columns} | {"origin": e.origin.value} for e in self._entries]
        return pd.DataFrame(rows, columns=columns)

    def __str__(self) -> str:
        if not self._entries:
            return "(empty ledger)"
        return "\n".join(
            f"[{e.kind}] " + (f"step {e.step} ({e.step_id}): " if e.step is not None else "") + e.statement
            for e in self._entries
        )

    def __repr__(self) -> str:
        return f"<Ledger with {len(self._entries)} entries>"


# ---------------------------------------------------------------------------
# Accountants
# ---------------------------------------------------------------------------


@runtime_checkable
class Accountant(Protocol):
    """Composes privacy costs. A plugin may supply its own through the
    ``privclust_make_accountant`` hook."""

    budget: Budget
    #: One line naming the composition rule, for the ledger and the report.
    description: str

    def total(self, entries: Sequence[LedgerEntry]) -> tuple[float, float]:
        """The (epsilon, delta) the DP entries cost together."""
        ...

    def check(self, entries: Sequence[LedgerEntry], new: LedgerEntry) -> None:
        """Raise :class:`~privclust.BudgetExceededError` if ``new`` would take
        the total past the budget."""
        ...


REPLACE_ONE = "replace-one"
ADD_REMOVE = "add/remove"


def relation_kind(text: str | None) -> str:
    """The neighbouring relation a ledger entry states: ``"replace-one"``
    (bounded DP: one record's values change, n is public), ``"add/remove"``
    (unbounded DP: one record is added or removed), or the text itself for
    any other relation."""
    t = (text or "").strip().lower()
    if t.startswith(("replace-one", "replace one", "bounded")):
        return REPLACE_ONE
    if t.startswith(("add/remove", "add-remove", "add or remove", "add-or-remove", "unbounded")):
        return ADD_REMOVE
    return t


def _group_delta(epsilon: float, delta: float) -> float:
    """``(1 + e^epsilon) delta``: an add/remove release's delta under
    replace-one. Infinite (no guarantee) where ``e^epsilon`` overflows, never
    an ``OverflowError``; 0 when ``delta`` is."""
    if not delta:
        return 0.0
    try:
        return (1.0 + math.exp(epsilon)) * delta
    except OverflowError:  # e^epsilon beyond the largest double (epsilon above about 709.78)
        return math.inf


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
    """

    budget: Budget
    description: str = (
        "basic sequential composition (epsilons and deltas add up), parallel composition "
        "(maximum over the strata of the public stratum columns the host split the records by); add/remove "
        "releases count twice under replace-one"
    )

    def relation(self, entries: Sequence[LedgerEntry]) -> str | None:
        """The relation the total holds under (``None`` without DP releases)."""
        kinds = {relation_kind(e.relation) for e in entries if e.kind == "dp" and e.relation}
        if not kinds:
            return None
        if len(kinds) == 1:
            return kinds.pop()
        if kinds == {REPLACE_ONE, ADD_REMOVE}:
            return REPLACE_ONE
        raise PrivclustError(
            "cannot compose releases stated under different neighbouring relations: "
            + "; ".join(sorted(repr(k) for k in kinds))
            + ". State each release's relation as 'replace-one ...' or 'add/remove ...', or supply an accountant "
            "that knows how to convert them (the privclust_make_accountant hook)"
        )

    def total(self, entries: Sequence[LedgerEntry]) -> tuple[float, float]:
        target = self.relation(entries)
        eps = delta = 0.0
        groups: dict[str, dict[str, list[float]]] = {}
        for e in entries:
            if e.kind != "dp":
                continue
            e_eps, e_delta = e.epsilon, e.delta
            if target == REPLACE_ONE and relation_kind(e.relation) == ADD_REMOVE:
                e_eps, e_delta = 2.0 * e.epsilon, _group_delta(e.epsilon, e.delta)
            if e.partition is None:
                eps += e_eps
                delta += e_delta
            else:
                group, part = e.partition
                acc = groups.setdefault(group, {}).setdefault(part, [0.0, 0.0])
                acc[0] += e_eps
                acc[1] += e_delta
        for parts in groups.values():
            eps += max(v[0] for v in parts.values())
            delta += max(v[1] for v in parts.values())
        return eps, delta

    def check(self, entries: Sequence[LedgerEntry], new: LedgerEntry) -> None:
        self.relation([*entries, new])  # refuses relations that cannot be composed, budget or not
        if not self.budget.limited:
            return
        eps, delta = self.total([*entries, new])
        limit_eps = self.budget.epsilon
        assert limit_eps is not None
        where = f"step {new.step} ({new.step_id})" if new.step is not None else "this release"
        if eps > limit_eps * (1 + _TOLERANCE):
            raise BudgetExceededError(
                f"{where} would spend epsilon={at_least(new.epsilon)} ({new.mechanism} on {new.covers}), bringing "
                f"the total to {at_least(eps)} > the budget epsilon={_exact(limit_eps)}; raise [privacy] epsilon "
                "or lower the step's epsilon. Nothing was recorded and no noise was drawn."
            )
        if delta > self.budget.delta * (1 + _TOLERANCE) + 1e-300:
            raise BudgetExceededError(
                f"{where} would spend delta={at_least(new.delta, 3)}, bringing the total to {at_least(delta, 3)} > the "
                f"budget delta={_exact(self.budget.delta)}; raise [privacy] delta or use a pure-epsilon mechanism. "
                "Nothing was recorded and no noise was drawn."
            )


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


@hookimpl(trylast=True)
def privclust_make_accountant(budget: Budget) -> Accountant:
    """The built-in default: :class:`BasicAccountant`."""
    return BasicAccountant(budget)


# ---------------------------------------------------------------------------
# The typed stash
# ---------------------------------------------------------------------------


class StashKey(Generic[T]):
    """A key into :class:`Stash`; create one per kind of value, at module level."""

    __slots__ = ("description",)

    def __init__(self, description: str = ""):
        self.description = description

    def __repr__(self) -> str:
        return f"StashKey({self.description!r})"


class Stash:
    """Plugin-private state for one run, keyed by :class:`StashKey` objects
    (so two plugins cannot collide on a string key)."""

    def __init__(self) -> None:
        self._data: dict[StashKey[Any], Any] = {}

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        self._data[key] = value

    def __getitem__(self, key: StashKey[T]) -> T:
        return self._data[key]

    def get(self, key: StashKey[T], default: T | None = None) -> T | None:
        return self._data.get(key, default)

    def setdefault(self, key: StashKey[T], default: T) -> T:
        return self._data.setdefault(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __delitem__(self, key: StashKey[T]) -> None:
        del self._data[key]

    def __len__(self) -> int:
        return len(self._data)



# ---------------------------------------------------------------------------
# Random streams without the seed
# ---------------------------------------------------------------------------

_M32 = 0xFFFFFFFF
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _XSHIFT = 0xCA01F9DD, 0x4973F715, 16


def _hashmix(value: int, const: list[int]) -> int:
    value = (value ^ const[0]) & _M32
    const[0] = (const[0] * _MULT_A) & _M32
    value = (value * const[0]) & _M32
    return value ^ (value >> _XSHIFT)


def _mix(x: int, y: int) -> int:
    result = (_MIX_L * x - _MIX_R * y) & _M32
    return result ^ (result >> _XSHIFT)


def _words(value: Any) -> list[int]:
    """numpy's coercion of entropy and spawn keys to 32-bit words."""
    if isinstance(value, list | tuple | np.ndarray):
        return [w for v in value for w in _words(v)]
    n = int(value)
    if n < 0:
        raise PrivclustError(f"a seed must be a non-negative integer; got {n}")
    if n == 0:
        return [0]
    out = []
    while n:
        out.append(n & _M32)
        n >>= 32
    return out


class _SeedStream(np.random.bit_generator.ISpawnableSeedSequence):
    """The streams of a :class:`numpy.random.SeedSequence`, without its seed.

    numpy mixes a seed sequence's entropy words into a pool, then its spawn
    key words. This object keeps only the pool state after the entropy (and
    the spawn key, which is not secret), so it derives exactly the states and
    children the original sequence would (seeded runs are reproducible and
    identical to earlier versions) while holding no copy of the seed. The
    mixing is numpy's, not a cryptographic hash: it hides the seed from
    anyone reading the context's attributes, not from an analyst who inverts
    numpy's mixing function on a live process.
    """

    def __init__(self, mixer: tuple[int, ...], const: int, spawn_key: tuple[int, ...] = (),
                 n_children_spawned: int = 0):
        self._mixer = tuple(mixer)
        self._const = const
        self.spawn_key = tuple(spawn_key)
        self.pool_size = len(self._mixer)
        self.n_children_spawned = n_children_spawned

    @classmethod
    def of(cls, seq: np.random.SeedSequence) -> _SeedStream:
        entropy = _words(seq.entropy)
        const = [_INIT_A]
        size = seq.pool_size
        mixer = [_hashmix(entropy[i] if i < len(entropy) else 0, const) for i in range(size)]
        for src in range(size):
            for dst in range(size):
                if src != dst:
                    mixer[dst] = _mix(mixer[dst], _hashmix(mixer[src], const))
        for word in entropy[size:]:
            for dst in range(size):
                mixer[dst] = _mix(mixer[dst], _hashmix(word, const))
        return cls(tuple(mixer), const[0], tuple(seq.spawn_key), seq.n_children_spawned)

    @property
    def pool(self) -> np.ndarray:
        mixer, const = list(self._mixer), [self._const]
        for word in _words(self.spawn_key):
            for dst in range(len(mixer)):
                mixer[dst] = _mix(mixer[dst], _hashmix(word, const))
        return np.array(mixer, dtype=np.uint32)

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        out_dtype = np.dtype(dtype)
        if out_dtype == np.dtype(np.uint64):
            n = 2 * n_words
        elif out_dtype == np.dtype(np.uint32):
            n = n_words
        else:
            raise ValueError("only support uint32 or uint64")
        pool = [int(v) for v in self.pool]
        const = _INIT_B
        state = np.empty(n, dtype=np.uint32)
        for i in range(n):
            value = pool[i % len(pool)] ^ const
            const = (const * _MULT_B) & _M32
            value = (value * const) & _M32
            state[i] = value ^ (value >> _XSHIFT)
        if out_dtype == np.dtype(np.uint64):
            return state.astype("<u4").view("<u8").astype(np.uint64)
        return state

    def spawn(self, n_children: int) -> list[_SeedStream]:
        start = self.n_children_spawned
        self.n_children_spawned += n_children
        return [_SeedStream(self._mixer, self._const, (*self.spawn_key, i)) for i in range(start, start + n_children)]

    def __repr__(self) -> str:
        return f"<seed stream spawn_key={self.spawn_key}>"

# ---------------------------------------------------------------------------
# The context
# ---------------------------------------------------------------------------


@attrs.frozen
class _StepInfo:
    index: int
    step_id: str
    component: str
    constraints: Any
    on_progress: Callable[[float, float | None], None] | None
    integer_columns: tuple[str, ...] | None = None


# The registry a PrivacyContext made without one resolves components from.
# This module sits below privclust.registry, so it never imports it: the
# registry module hands its session-registry getter in when it is imported
# (set_default_registry), and the runner passes its registry explicitly.
_registry_provider: Callable[[], Registry] | None = None


def set_default_registry(provider: Callable[[], Registry] | None) -> None:
    """Host only: the function giving the registry that a :class:`PrivacyContext`
    made without ``registry=`` resolves nested components from."""
    global _registry_provider
    _registry_provider = provider


def _default_registry() -> Registry:
    if _registry_provider is None:  # pragma: no cover - privclust.registry is imported with privclust
        raise PrivclustError("no registry to resolve components from; pass registry= to PrivacyContext")
    return _registry_provider()


class ThrottledProgress:
    """A progress callback for a long loop: ``report(done)`` passes
    ``context.progress(done, total)`` on at most ``steps`` times over the
    run (whenever ``done`` crosses the next ``total / steps``), so a loop
    may call it on every iteration. ``context`` is anything with a
    ``progress(done, total)`` method (a :class:`PrivacyContext`)."""

    def __init__(self, context: Any, total: float, *, steps: int = 200):
        self.context = context
        self.total = float(max(total, 1))
        self.steps = int(max(steps, 1))
        self.last = -1

    def __call__(self, done: float) -> None:
        step = int(self.steps * min(done, self.total) / self.total)
        if step != self.last:
            self.last = step
            self.context.progress(min(done, self.total), self.total)


class RecordProgress:
    """A step's progress in whole records: ``context.progress(done, n)``
    with ``done`` an integer from 0 to ``n``, never decreasing, reported at
    most ``steps`` times (plus the final ``n``), so that a progress bar
    counts the step's records.

    A step made of phases gives each a share of the records:
    ``phase(start, stop, units)`` is a callback taking the work done in that
    phase, out of ``units``, and reports ``n * (start + (stop - start) *
    done / units)`` records. ``stage(i, of)`` reports stage ``i`` of ``of``
    equal stages; ``finish()`` reports ``n``. ``context`` is anything with
    a ``progress(done, total)`` method (a :class:`PrivacyContext`).

    >>> seen = []
    >>> class Context:
    ...     def progress(self, done, total):
    ...         seen.append((done, total))
    >>> progress = RecordProgress(Context(), 900)
    >>> fit = progress.phase(0.0, 0.5, units=3)
    >>> fit(1); fit(3); progress.stage(2, 4); progress.finish()
    >>> seen
    [(150, 900), (450, 900), (900, 900)]
    """

    def __init__(self, context: Any, n_records: int, *, steps: int = 200):
        self.context = context
        self.n = int(max(n_records, 0))
        self.every = max(1, self.n // max(int(steps), 1))
        self.done = 0
        self.reported = -1

    def __call__(self, records: float) -> None:
        """Report ``records`` done (clipped to ``0..n``; a smaller value than
        the last is not reported)."""
        done = int(min(max(records, 0), self.n))
        if done < self.done or (done < self.n and done - max(self.reported, 0) < self.every and self.reported >= 0):
            self.done = max(self.done, done)
            return
        self.done = done
        if done != self.reported:
            self.reported = done
            self.context.progress(done, self.n)

    def phase(self, start: float, stop: float, units: float = 1.0) -> Callable[[float], None]:
        """A callback for the part of the step between the shares ``start``
        and ``stop`` (0 to 1) of its records: it takes the work done in the
        phase, out of ``units``."""
        units = float(units) if units > 0 else 1.0

        def report(done: float) -> None:
            self(self.n * (start + (stop - start) * min(max(done / units, 0.0), 1.0)))
        return report

    def stage(self, i: int, of: int) -> None:
        """Stage ``i`` of ``of`` equal stages done."""
        self(self.n * i / max(of, 1))

    def finish(self) -> None:
        """Every record done."""
        self(self.n)


class PrivacyContext:
    """The privacy-accounting context of one run.

    :param budget: a :class:`Budget` (or ``None`` for none declared).
    :param seed: an integer (or a :class:`numpy.random.SeedSequence`) for
        reproducible experiments; ``None`` takes entropy from the operating
        system. The seed is never written to the ledger or a report.
    :param accountant: an accountant; by default the registry's
        ``privclust_make_accountant`` hook chooses, or :class:`BasicAccountant`.
    :param registry: the registry components are resolved from
        (``context.component``, ``context.mechanism``).
    :param constraints: edit rules for components used outside a recipe.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        seed: int | np.random.SeedSequence | None = None,
        accountant: Accountant | None = None,
        registry: Registry | None = None,
        constraints: ConstraintSet | None = None,
    ):
        self.budget = budget if budget is not None else Budget()
        if accountant is None:
            accountant = registry.make_accountant(self.budget) if registry is not None else BasicAccountant(self.budget)
        self.accountant = accountant
        accountant_description(accountant)  # a plugin accountant's words are a component's: refused before the run
        self.registry = registry
        self.ledger = Ledger()
        self.stash = Stash()
        self.seeded = seed is not None
        if isinstance(seed, np.random.SeedSequence):
            root = seed
        elif isinstance(seed, _SeedStream):
            root = None
            self._root = seed
        else:
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0):
                raise PrivclustError(f"a seed must be a non-negative integer; got {seed!r}")
            root = np.random.SeedSequence(None if seed is None else int(seed))
        if root is not None:
            # Keep numpy's mixed pool, not the seed: the same streams, no copy of the seed.
            self._root = _SeedStream.of(root)
            del root
        del seed
        self._default_constraints = constraints
        self._step: _StepInfo | None = None
        self._rng: np.random.Generator | None = None
        self._rng_seq: _SeedStream | None = None
        self._part: tuple[str, str] | None = None
        self._random_steps: set[int] = set()

    def __repr__(self) -> str:  # never shows the seed
        eps = "none" if self.budget.epsilon is None else _exact(self.budget.epsilon)
        spent, _ = self.spent
        return (f"<PrivacyContext budget epsilon={eps} spent={at_least(spent)} entries={len(self.ledger)} "
                f"seeded={self.seeded}>")

    def __reduce__(self):  # a context is per-run state; it must not be pickled with its seed
        raise TypeError("a PrivacyContext cannot be pickled; create one per run")

    # -- randomness ------------------------------------------------------------

    def _spawn_sequence(self) -> _SeedStream:
        return self._root.spawn(1)[0]

    @property
    def rng(self) -> np.random.Generator:
        """The random generator of the current step (one stream per step)."""
        if self._rng is None:
            self._rng_seq = self._spawn_sequence()
            self._rng = np.random.default_rng(self._rng_seq)
        return self._rng

    def spawn(self, n: int) -> list[np.random.Generator]:
        """``n`` independent generators for the current step (e.g. one per
        block of a parallel computation), reproducible under a seed."""
        if self._rng_seq is None:
            _ = self.rng
        assert self._rng_seq is not None
        return [np.random.default_rng(s) for s in self._rng_seq.spawn(n)]

    def spawn_seeds(self, n: int) -> list[Any]:
        """``n`` child seed sequences of the run (for runs of their own, e.g. the
        configurations of a comparison). Each is a numpy seed sequence
        (``generate_state``, ``spawn``) that holds no copy of the seed; pass it
        as the ``seed`` of another context or to ``numpy.random.default_rng``."""
        return self._root.spawn(n)

    # -- steps ---------------------------------------------------------------------

    @contextmanager
    def step(
        self,
        index: int,
        step_id: str,
        component: str,
        *,
        constraints: ConstraintSet | None = None,
        on_progress: Callable[[float, float | None], None] | None = None,
        integer_columns: Sequence[str] | None = None,
    ) -> Iterator[PrivacyContext]:
        """Enter a step: a fresh random stream, its constraints, its progress
        sink, and the step's columns the host releases as integers."""
        _not_the_host(component)
        previous = (self._step, self._rng, self._rng_seq)
        self._step = _StepInfo(index, step_id, component, constraints, on_progress,
                               None if integer_columns is None else tuple(map(str, integer_columns)))
        self._rng = self._rng_seq = None
        try:
            yield self
        finally:
            if self._rng_seq is not None and index >= 0:  # the step drew from the run's randomness
                self._random_steps.add(index)
            self._step, self._rng, self._rng_seq = previous

    @property
    def random_steps(self) -> tuple[int, ...]:
        """The indices of the steps that drew from the run's randomness (their
        generator was made): under a seed, whoever has it can redraw their
        random choices."""
        return tuple(sorted(self._random_steps))

    def _note_random(self, indices: Iterable[int]) -> None:
        """Host only: steps run in another context (a stratum's) drew randomness."""
        self._random_steps.update(int(i) for i in indices)

    @contextmanager
    def _in_part(self, column: str, value: str) -> Iterator[None]:
        """Host only: the releases inside use only the records of one stratum
        of the public stratum columns the runner split the data by."""
        previous, self._part = self._part, (column, value)
        try:
            yield
        finally:
            self._part = previous

    @property
    def step_index(self) -> int | None:
        return None if self._step is None else self._step.index

    @property
    def constraints(self) -> ConstraintSet | None:
        """The edit rules that apply to the current step's columns (or ``None``)."""
        if self._step is not None:
            return self._step.constraints
        return self._default_constraints

    @property
    def integer_columns(self) -> tuple[str, ...] | None:
        """The current step's columns that the host releases as integers (the
        integer columns of the run's input: it rounds them after the last
        step), whatever dtype they have in the step's data (after an earlier
        step they hold floats); ``None`` outside a run's step (then the
        data's integer dtypes say it)."""
        return None if self._step is None else self._step.integer_columns

    def progress(self, done: float, total: float | None = None) -> None:
        """Report progress of a long step (shown by the CLI's progress bar)."""
        if self._step is not None and self._step.on_progress is not None:
            self._step.on_progress(done, total)

    # -- components ------------------------------------------------------------------

    def component(self, kind: str, value: Any) -> Any:
        """Resolve a nested-component value (an instance, a name or a spec)
        into an instance, through the registry so that swaps are honoured."""
        if value is None or not isinstance(value, ComponentSpec | str | Mapping):
            return value
        if self.registry is None:
            self.registry = _default_registry()
        return self.registry.create(kind, value)

    def mechanism(self, value: Any = "laplace") -> Any:
        """A noise mechanism by name (``"laplace"``, ``"geometric"``,
        ``"gaussian"`` or any registered one), a spec or an instance."""
        return self.component("noise_mechanisms", value)

    # -- accounting --------------------------------------------------------------

    def _entry(self, kind: str, statement: str, **fields: Any) -> LedgerEntry:
        info = self._step
        component = fields.pop("component", None) or (None if info is None else info.component)
        if fields.get("origin", Origin.COMPONENT) is not Origin.HOST:
            _not_the_host(component)
        return LedgerEntry(
            seq=len(self.ledger),
            kind=kind,
            step=None if info is None else info.index,
            step_id=None if info is None else info.step_id,
            component=component,
            statement=statement,
            **fields,
        )

    def spend(
        self,
        *,
        epsilon: float,
        delta: float = 0.0,
        mechanism: str,
        sensitivity: float | Sensitivity | str,
        relation: str,
        covers: str,
        not_covered: str = "",
        claimed_epsilon: float | None = None,
        partition: tuple[str, str] | None = None,
        details: Mapping[str, Any] | None = None,
        component: str | None = None,
        noise: str = "",
    ) -> LedgerEntry:
        """Record a differentially private release, after checking the budget.

        :param epsilon: the epsilon that actually holds for this release (the
            honest figure, which the accountant charges).
        :param delta: its delta (0 for pure epsilon-DP).
        :param mechanism: e.g. ``"laplace"``.
        :param sensitivity: the sensitivity used (a number, a
            :class:`Sensitivity` or a description).
        :param relation: the neighbouring relation, e.g. ``"replace-one (bounded DP)"``.
        :param covers: which released values the guarantee covers.
        :param not_covered: which outputs it does not cover.
        :param claimed_epsilon: the figure a method's paper claims, when it
            differs from ``epsilon``.
        :param partition: ``(group, part)`` when the component says this
            release touches only the records of one part of a disjoint
            partition. The host cannot check that, so it charges the release
            sequentially and keeps the claim in the entry's details. Parallel
            composition is granted only inside a run whose recipe declares
            strata (``[roles] strata``): the runner then runs each step once
            per stratum and tags every release of a stratum itself.
        :param noise: how the noise was drawn, for the statement (e.g. the
            lattice the values are released on and the sensitivity after
            rounding to it).
        :raises BudgetExceededError: before anything is recorded.
        """
        _not_the_host(component)
        mechanism, relation, covers, not_covered, noise = (
            component_text(f"spend(): {label}", value)
            for label, value in (("mechanism", mechanism), ("relation", relation), ("covers", covers),
                                 ("not_covered", not_covered), ("noise", noise)))
        for label, value in (("epsilon", epsilon), ("delta", delta)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise PrivclustError(f"spend(): {label} must be a finite number >= 0; got {value!r}")
        if epsilon == 0 and delta == 0:
            raise PrivclustError("spend(): a release with epsilon = 0 and delta = 0 adds no protection cost; "
                                 "do not record it as a DP release")
        if isinstance(sensitivity, Sensitivity):
            sens: Any = {"l1": sensitivity.l1, "l2": sensitivity.l2_bound}
            sens_text = f"L1 {at_most(sensitivity.l1)}" + (
                f", L2 {at_most(sensitivity.l2)}" if sensitivity.l2 is not None else "")
        else:
            sens = sensitivity
            # a sensitivity shown rounded down: rounded up, the statement would cover a larger change than the
            # noise was drawn for
            sens_text = (at_most(sensitivity) if isinstance(sensitivity, int | float)
                         else component_text("spend(): sensitivity", str(sensitivity)))
        statement = _dp_statement(
            epsilon=float(epsilon), delta=float(delta), mechanism=mechanism, sensitivity=sens_text,
            relation=relation, covers=covers, not_covered=not_covered, claimed_epsilon=claimed_epsilon,
            noise=noise,
        )
        details = dict(details or {})
        if partition:
            claimed = [component_text("spend(): partition", str(x)) for x in tuple(partition)]
            details["claimed_partition"] = claimed
            statement += (f" The component declared parallel composition over part {claimed[-1]!r} of "
                          f"{claimed[0]!r}; the host cannot check that the parts are disjoint, so this release is "
                          "charged sequentially.")
        partition = None
        if self._part is not None:
            partition = self._part
            statement += (f" It uses only the records of the stratum {self._part[0]} = {self._part[1]!r} (the host "
                          "ran the step on that stratum alone), so it composes in parallel with the other strata.")
        entry = self._entry(
            "dp",
            statement,
            mechanism=mechanism,
            sensitivity=sens,
            relation=relation,
            epsilon=float(epsilon),
            delta=float(delta),
            claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
            covers=covers,
            not_covered=not_covered or None,
            partition=partition,
            details=details,
            component=component,
        )
        self.accountant.check(self.ledger.entries, entry)
        self.ledger._append(entry)
        return entry

    def can_spend(self, epsilon: float, delta: float = 0.0) -> bool:
        """Whether a release of this cost would fit in the budget now."""
        probe = self._entry("dp", "probe", epsilon=float(epsilon), delta=float(delta), mechanism="probe",
                            covers="probe", partition=self._part)
        try:
            self.accountant.check(self.ledger.entries, probe)
        except BudgetExceededError:
            return False
        return True

    def record(self, statement: str, *, guarantee: str, details: Mapping[str, Any] | None = None,
               component: str | None = None) -> LedgerEntry:
        """Record a non-DP guarantee (k-anonymity, probabilistic k-anonymity,
        edit rules satisfied...). ``guarantee`` names it; ``statement`` says
        in words what it covers and what it does not."""
        _not_the_host(component)
        statement = component_text("record(): statement", statement)
        guarantee = component_text("record(): guarantee", guarantee)
        entry = self._entry("guarantee", statement, mechanism=guarantee, details=details, component=component,
                            claim=statement, status="claimed")
        self.ledger._append(entry)
        return entry

    def record_leak(self, parameter: str, explanation: str, *, alternative: str = "",
                    details: Mapping[str, Any] | None = None) -> LedgerEntry:
        """Record something that weakens a guarantee, e.g. a parameter derived
        from the data without spending budget. Also emits a warning.

        ``parameter`` is the leak's name (one of :data:`privclust.KNOWN_LEAKS`,
        e.g. ``"bounds"``, or a name the component declares in its
        ``leak_names`` class attribute). The leak is refused (:class:`~privclust.ParameterError`,
        nothing recorded) unless the budget opts in to it by name
        (``Budget(allow_leaks=[...])``, ``[privacy] allow_leaks`` in a recipe):
        the secure default is to claim nothing that a data-derived parameter
        would void."""
        parameter, explanation, alternative = (component_text(f"record_leak(): {label}", value) for label, value in
                                               (("parameter", parameter), ("explanation", explanation),
                                                ("alternative", alternative)))
        if not self.budget.allows(parameter):
            info = self._step
            where = "" if info is None else f"step {info.step_id!r} ({info.component}): "
            declared = parameter in KNOWN_LEAKS
            raise ParameterError(
                f"{where}refused a data-derived parameter or weakness {parameter!r}: {explanation} Either give a "
                f"public value ({alternative or 'see the component documentation'}), or accept that the release "
                f"has no differential-privacy guarantee by opting in with [privacy] allow_leaks = [\"{parameter}\"] "
                f"(Budget(allow_leaks=[{parameter!r}]) in Python)."
                + ("" if declared else f" Built-in leak names: {', '.join(KNOWN_LEAKS)}; a plugin that records "
                   f"{parameter!r} declares it in its component's leak_names."))
        statement = f"{parameter}: {explanation}"
        if alternative:
            statement += f" Alternative: {alternative}"
        entry = self._entry("leak", statement, mechanism=parameter, details=details)
        self.ledger._append(entry)
        warnings.warn(PrivacyLeakWarning(statement), stacklevel=2)
        return entry

    def _record_host(self, kind: str, statement: str, *, details: Mapping[str, Any] | None = None,
                     **fields: Any) -> LedgerEntry:
        """Host only (the runner): a ``process`` or ``verified`` entry, or a
        guarantee the host itself checked on the released data."""
        fields.setdefault("component", HOST if kind != "process" else None)
        entry = self._entry(kind, statement, details=details, origin=Origin.HOST, **fields)
        self.ledger._append(entry)
        return entry

    def _adopt(self, entry: LedgerEntry) -> LedgerEntry:
        """Host only (the runner): take over an entry a stratum's own context
        recorded in a worker, numbered in this ledger. A DP entry keeps the
        stratum its context tagged it with, and is checked against the
        budget like any spend."""
        adopted = attrs.evolve(entry, seq=len(self.ledger))
        if adopted.kind == "dp":
            self.accountant.check(self.ledger.entries, adopted)
        self.ledger._append(adopted)
        return adopted

    def view(self) -> ContextView:
        """A read-only view of the run so far (for observers)."""
        # Copies: an entry is frozen, but its details are a dict an observer could change in place.
        return ContextView(budget=self.budget, entries=copy.deepcopy(self.ledger.entries), spent=self.spent,
                           seeded=self.seeded, step_index=self.step_index)

    @property
    def spent(self) -> tuple[float, float]:
        """The (epsilon, delta) spent so far, as the accountant composes it."""
        return self.accountant.total(self.ledger.entries)

    @property
    def remaining(self) -> float | None:
        """The epsilon left, or ``None`` without a declared budget."""
        if self.budget.epsilon is None:
            return None
        return max(0.0, self.budget.epsilon - self.spent[0])


#: Look-alike letters folded to the Latin letter they are read as (Cyrillic
#: and Greek, both cases, as in Unicode's confusables data), plus dotless i,
#: digit zero as o and digit one as l. Applied after NFKC (which already folds
#: full-width, mathematical and ligature forms) and before case folding.
_CONFUSABLES = str.maketrans({
    **dict(zip("\u0410\u0412\u0415\u0405\u0406\u0408\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423"
               "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u04bb\u0501\u051b\u051d\u04cf\u043a",
               "ABESIJKMHOPCTXYaeopcyxijshdqwlk", strict=True)),  # Cyrillic
    **dict(zip("\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"
               "\u03b1\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7",
               "ABEZHIKMNOPTYXaikvoptux", strict=True)),  # Greek
    "\u0131": "i", "0": "o", "1": "l",  # dotless i, digits zero and one
})

_NOT_ALNUM = re.compile(r"[^0-9a-z]+")

#: Characters that show nothing (besides the format characters, category Cf,
#: and combining marks, which are dropped): Hangul fillers and the Braille blank.
_BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _fold(text: str) -> str:
    """``text`` as the host's filters read it: NFKC; combining marks and
    zero-width or other format characters dropped; every Unicode space,
    control and blank-looking character a space; look-alike letters as the
    Latin letter they are read as (:data:`_CONFUSABLES`); case folded; every
    run of characters that are not letters or digits one space. ``"Verified
    by the\u00a0host"``, ``"VERIFIED BY THE HOST"`` and
    ``"vеrified by the hоst"`` (Cyrillic е, о) all fold to
    ``"verified by the host"``."""
    if text.isascii():  # the common case, the same result without the per-character pass
        return " ".join(_NOT_ALNUM.sub(" ", text.translate(_CONFUSABLES).lower()).split())
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if category in ("Mn", "Me", "Cf"):
            continue
        kept.append(" " if ch in _BLANKS or category[0] in "CZ" or ch.isspace() else ch)
    folded = "".join(kept).translate(_CONFUSABLES).casefold()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in folded).split())


def looks_like_host(name: Any) -> bool:
    """Whether a name (a component's, a ``component=`` given to the ledger)
    reads as the host's :data:`HOST` once folded (:func:`_fold`, spaces and
    punctuation ignored): ``privclust\u00a0(host)``, ``PRIVCLUST-HOST``,
    ``privclust.host`` and ``рrivclust (hоst)`` (Cyrillic р, о) all do."""
    return isinstance(name, str) and _fold(name).replace(" ", "") == _HOST_SKELETON


_HOST_SKELETON = "privclusthost"


def _not_the_host(component: str | None) -> None:
    if looks_like_host(component):
        raise PrivclustError(f"component={component!r} names the host (or reads as its name, {HOST!r}); a "
                             "component records under its own name")


#: Words only the host's own entries use, folded (:func:`_fold`): a
#: component's text with them would read, in the verdict and the report, as
#: something the host checked, or as written by the host.
_HOST_WORDS = ("verified by the host", "host check", "host verified", "host verifies", "privclust host")


def _host_words_in(text: str) -> str | None:
    """The first of the host's words in ``text`` once folded, else ``None``."""
    folded = f" {_fold(text)} "
    return next((words for words in _HOST_WORDS if f" {words}" in folded), None)


def component_text(label: str, text: Any) -> Any:
    """A component's text for the ledger: control and format characters
    (newlines, terminal escapes, bidirectional overrides) become spaces, so
    that it cannot forge lines of the CLI's output; the host's own words are
    refused, however written (:func:`_fold`: any Unicode space, zero-width
    characters, case, look-alike letters)."""
    if not isinstance(text, str):
        return text
    clean = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)
    words = _host_words_in(clean)
    if words is not None:
        raise PrivclustError(f"{label}: a component's statement may not contain {words!r} (in any spelling, "
                             "spacing or look-alike letters); only the host says what it verified on the released "
                             "data. State the claim in the component's own words (the host adds its check to the "
                             "entry).")
    return clean


#: The kinds of entry each origin writes.
_HOST_KINDS = ("process", "verified", "guarantee")
_COMPONENT_KINDS = ("dp", "guarantee", "leak")


def _entry_from_record(cls: type[LedgerEntry], record: Mapping[str, Any]) -> LedgerEntry:
    if not isinstance(record, Mapping):
        raise PrivclustError(f"a saved ledger entry is a table of fields; got {type(record).__name__}")
    names = {f.name for f in attrs.fields(cls)}
    unknown = sorted(str(k) for k in record if k not in names)
    if unknown:
        raise PrivclustError(f"a saved ledger entry has unknown field(s) {', '.join(unknown)}")
    values = dict(record)
    origin = _to_origin(values.pop("origin", Origin.COMPONENT))
    partition = values.get("partition")
    if partition is not None:
        values["partition"] = tuple(partition)
    entry = cls(**values, origin=origin)
    where = f"saved ledger entry {entry.seq} ({entry.kind})"
    if entry.kind not in (_HOST_KINDS if entry.by_host else _COMPONENT_KINDS):
        raise PrivclustError(f"{where}: origin {origin.value!r} never writes {entry.kind!r} entries; the file was "
                             "changed after the run")
    if entry.by_host and entry.kind != "process" and entry.component != HOST:
        raise PrivclustError(f"{where}: a host entry shown as {entry.component!r}; the file was changed after the run")
    if entry.status is not None and entry.status not in STATUSES:
        raise PrivclustError(f"{where}: unknown status {entry.status!r} (one of {', '.join(STATUSES)})")
    if not entry.by_host:
        _not_the_host(entry.component)
        for label, text in (("claim", entry.claim), ("mechanism", entry.mechanism), ("covers", entry.covers),
                            ("not_covered", entry.not_covered),
                            ("statement", entry.statement if entry.kind == "leak" else None)):
            component_text(f"{where}: {label}", text)
    return entry


@attrs.frozen(kw_only=True)
class ContextView:
    """What an observer (``privclust_step_*`` hooks) sees of a run: the budget,
    the ledger entries so far (a tuple of frozen entries) and the spend. It
    cannot spend, record or draw random numbers."""

    budget: Budget
    entries: tuple[LedgerEntry, ...]
    spent: tuple[float, float]
    seeded: bool
    step_index: int | None = None

    @property
    def ledger(self) -> Ledger:
        """A copy of the ledger so far (changing it changes nothing in the run)."""
        return Ledger(self.entries)


class PrivacyLeakWarning(PrivclustWarning):
    """A guarantee is weaker than it looks (e.g. a parameter derived from the data)."""


class NothingProtectedWarning(PrivclustWarning):
    """The release changes no column of the data: every original value is
    released unchanged, and the host claims no guarantee for it."""
