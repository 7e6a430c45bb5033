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
streams a ``SeedSequence`` would (see :class:`~privclust.seeds.SeedStream`).

Components: ``context.component(kind, value)`` and ``context.mechanism(...)``
resolve a name through the context's *resolver* (:class:`Resolver`: anything
with ``create(kind, value)``, such as a :class:`~privclust.Registry`), given
as ``resolver=`` or ``registry=``; a context made without one resolves
through the session registry (``privclust.get_registry()``), looked up by
name when a component is first resolved: this module sits below
``privclust.registry`` and never imports it.
"""

from __future__ import annotations

import copy
import math
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs
import numpy as np

from ._optional import deferred
from .accountants import Accountant, BasicAccountant, accountant_description
from .claims import (
    DifferentialPrivacy,
    Guarantee,
    KAnonymity,
    ProbabilisticKAnonymity,
    Relation,
    guarantee_claim,
    stated_ks,
)
from .errors import BudgetExceededError, ParameterError, PrivclustError
from .ledger import (
    HOST,
    Ledger,
    LedgerEntry,
    Origin,
    PrivacyLeakWarning,
    Sensitivity,
    at_least,
    at_most,
    component_text,
    dp_statement,
    exact,
    not_the_host,
)
from .recipe import KNOWN_LEAKS, Budget, ComponentSpec
from .seeds import SeedStream

__all__ = [
    "ContextView",
    "PrivacyContext",
    "Resolver",
    "Stash",
    "StashKey",
    "session_resolver",
]

T = TypeVar("T")

#: The edit rules a context carries: a :class:`~privclust.ConstraintSet`. Typed
#: loosely: the constraints layer sits above the context (it binds components,
#: which are handed a context), so this module does not import it.
Rules = Any


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


def _where(info: _StepInfo) -> str:
    """The step ``info`` is, in a message: "step 1 'rewriter' (rewriter)"."""
    return (f"step {info.index} {info.step_id!r} ({info.component})" if info.index >= 0 else
            f"{info.step_id!r} ({info.component})")


@attrs.define
class PartStream:
    """Host only: the randomness of one stratum of a run that runs its strata
    in its own process, step after step: the stratum's own seed (one spawned
    from the run's per stratum, as for a stratum run in a worker) and the
    current step's generator drawn from it (:meth:`PrivacyContext._drawing_from`)."""

    root: SeedStream
    step: int | None = None
    rng: np.random.Generator | None = None
    seq: SeedStream | None = None


@runtime_checkable
class Resolver(Protocol):
    """What a context resolves nested components through: ``create(kind,
    value)`` turns a name, a spec or a table into an instance of the
    component kind ``kind`` (a :class:`~privclust.Registry` is one, and
    honours its blocked and swapped components). One that also has
    ``make_accountant(budget)`` chooses the context's accountant."""

    def create(self, kind: str, value: Any, /) -> Any: ...


#: The module whose ``get_registry()`` gives the session registry: looked up
#: by name on first use (it sits above this module, which never imports it).
_SESSION_REGISTRY = "privclust.registry"


def session_resolver() -> Resolver:
    """The session registry (``privclust.get_registry()``), the resolver of a
    context made without one."""
    resolver: Resolver = deferred(_SESSION_REGISTRY).get_registry()
    return resolver


class PrivacyContext:
    """The privacy-accounting context of one run.

    :param budget: a :class:`Budget` (or ``None`` for none declared).
    :param seed: an integer (or a :class:`numpy.random.SeedSequence`) for
        reproducible experiments; ``None`` takes entropy from the operating
        system. The seed is never written to the ledger or a report.
    :param accountant: an accountant; by default the resolver's
        ``make_accountant`` (a registry's ``privclust_make_accountant`` hook)
        chooses, or :class:`BasicAccountant`.
    :param resolver: what components are resolved through
        (``context.component``, ``context.mechanism``): a :class:`Resolver`
        such as a :class:`~privclust.Registry`; by default the session
        registry, looked up when a component is first resolved.
    :param registry: the same as ``resolver`` (its older name).
    :param constraints: edit rules for components used outside a recipe.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        seed: int | np.random.SeedSequence | None = None,
        accountant: Accountant | None = None,
        resolver: Resolver | None = None,
        registry: Resolver | None = None,
        constraints: Rules | None = None,
    ):
        if resolver is not None and registry is not None and resolver is not registry:
            raise PrivclustError("PrivacyContext: resolver= and registry= are the same parameter; give one")
        resolver = resolver if resolver is not None else registry
        # The run's budget, accountant, ledger, stash, resolver and whether it is seeded are read-only to the
        # components the context is handed: a masker that assigned context.ledger a ledger of its own (or
        # context.accountant one without a budget) made the verdict state epsilon 0.01 for a laplace step of 5 and
        # drop the host's process entry (a red-team audit). Only the host's underscored names write them.
        self._budget = budget if budget is not None else Budget()
        if accountant is None:
            make = getattr(resolver, "make_accountant", None)
            accountant = make(self._budget) if make is not None else BasicAccountant(self._budget)
        self._accountant = accountant
        accountant_description(accountant)  # a plugin accountant's words are a component's: refused before the run
        self._resolver = resolver
        self._ledger = Ledger()
        self._stash = Stash()
        self._seeded = seed is not None
        self._root: SeedStream
        if isinstance(seed, np.random.SeedSequence):
            root = seed
        elif isinstance(seed, SeedStream):
            root = None
            self._root = seed
        else:
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0):
                raise PrivclustError(f"a seed must be a non-negative integer; got {seed!r}")
            root = np.random.SeedSequence(None if seed is None else int(seed))
        if root is not None:
            # Keep numpy's mixed pool, not the seed: the same streams, no copy of the seed.
            self._root = SeedStream.of(root)
            del root
        del seed
        self._default_constraints = constraints
        self._step: _StepInfo | None = None
        self._rng: np.random.Generator | None = None
        self._rng_seq: SeedStream | None = None
        self._part: tuple[str, str] | None = None
        self._random_steps: set[int] = set()
        self._step_drew = False  # the current step took seeds of the run (spawn_seeds)

    def __repr__(self) -> str:  # never shows the seed
        eps = "none" if self._budget.epsilon is None else exact(self._budget.epsilon)
        spent, _ = self.spent
        return (f"<PrivacyContext budget epsilon={eps} spent={at_least(spent)} entries={len(self._ledger)} "
                f"seeded={self._seeded}>")

    # -- the run's state: read-only to components ----------------------------------

    def _read_only(self, name: str, how: str) -> PrivclustError:
        info = self._step
        where = "" if info is None else f"{_where(info)}: "
        return PrivclustError(f"{where}context.{name} is the run's own and cannot be replaced; {how}")

    @property
    def budget(self) -> Budget:
        """The run's budget (read-only)."""
        return self._budget

    @budget.setter
    def budget(self, value: Any) -> None:
        raise self._read_only("budget", "the recipe's [privacy] table sets it")

    @property
    def accountant(self) -> Accountant:
        """The run's accountant (read-only; a plugin replaces it for every
        run through ``privclust_make_accountant``)."""
        return self._accountant

    @accountant.setter
    def accountant(self, value: Any) -> None:
        raise self._read_only("accountant", "a plugin chooses the accountant of every run through the "
                                            "privclust_make_accountant hook")

    @property
    def ledger(self) -> Ledger:
        """The run's ledger (read-only: entries are added through
        :meth:`spend`, :meth:`record` and :meth:`record_leak`)."""
        return self._ledger

    @ledger.setter
    def ledger(self, value: Any) -> None:
        raise self._read_only("ledger", "record through context.spend, context.record or context.record_leak")

    @property
    def stash(self) -> Stash:
        """Plugin-private state for this run (the stash itself is read-only;
        its keys are written through ``context.stash[key] = value``)."""
        return self._stash

    @stash.setter
    def stash(self, value: Any) -> None:
        raise self._read_only("stash", "write a StashKey of your own into it: context.stash[key] = value")

    @property
    def seeded(self) -> bool:
        """Whether the run was given a seed (read-only)."""
        return self._seeded

    @seeded.setter
    def seeded(self, value: Any) -> None:
        raise self._read_only("seeded", "the run's seed= sets it")

    @property
    def resolver(self) -> Resolver | None:
        """What components are resolved through (read-only; ``None``: the
        session registry, looked up when a component is first resolved)."""
        return self._resolver

    @resolver.setter
    def resolver(self, value: Any) -> None:
        raise self._read_only("resolver", "give resolver= (or registry=) when the context is made")

    @property
    def registry(self) -> Any:
        """The context's resolver (its older name; ``None`` until a component
        is resolved through the session registry)."""
        return self._resolver

    def __reduce__(self):  # a context is per-run state; it must not be pickled with its seed
        raise TypeError("a PrivacyContext cannot be pickled; create one per run")

    # -- randomness ------------------------------------------------------------

    def _spawn_sequence(self) -> SeedStream:
        return self._root.spawn(1)[0]

    @property
    def rng(self) -> np.random.Generator:
        """The random generator of the current step (one stream per step)."""
        if self._rng is None:
            self._rng_seq = self._spawn_sequence()
            self._rng = np.random.default_rng(self._rng_seq)  # type: ignore[arg-type]  # numpy takes any ISpawnableSeedSequence
        return self._rng

    def spawn(self, n: int) -> list[np.random.Generator]:
        """``n`` independent generators for the current step (e.g. one per
        block of a parallel computation), reproducible under a seed."""
        if self._rng_seq is None:
            _ = self.rng
        assert self._rng_seq is not None
        return [np.random.default_rng(s) for s in self._rng_seq.spawn(n)]  # type: ignore[arg-type]  # as above

    def spawn_seeds(self, n: int) -> list[Any]:
        """``n`` child seed sequences of the run (for runs of their own, e.g. the
        configurations of a comparison). Each is a numpy seed sequence
        (``generate_state``, ``spawn``) that holds no copy of the seed; pass it
        as the ``seed`` of another context or to ``numpy.random.default_rng``.
        Like :attr:`rng` and :meth:`spawn`, taking them inside a step counts
        as drawing from the run's randomness: the step is one of
        :attr:`random_steps`, which a seeded run's verdict names."""
        if self._step is not None:  # drawn inside a step: its output is a function of the run's seed
            self._step_drew = True
        return self._root.spawn(n)

    # -- steps ---------------------------------------------------------------------

    @contextmanager
    def step(
        self,
        index: int,
        step_id: str,
        component: str,
        *,
        constraints: Rules | None = None,
        on_progress: Callable[[float, float | None], None] | None = None,
        integer_columns: Sequence[str] | None = None,
    ) -> Iterator[PrivacyContext]:
        """Enter a step: a fresh random stream, its constraints, its progress
        sink, and the step's columns the host releases as integers."""
        not_the_host(component)
        previous = (self._step, self._rng, self._rng_seq, self._step_drew)
        self._step = _StepInfo(index, step_id, component, constraints, on_progress,
                               None if integer_columns is None else tuple(map(str, integer_columns)))
        self._rng = self._rng_seq = None
        self._step_drew = False
        held = self._held()
        try:
            yield self
            self._check_held(held, _where(self._step))
        finally:
            # the step drew from the run's randomness: its generator was made, or it took seeds (spawn_seeds)
            if (self._rng_seq is not None or self._step_drew) and index >= 0:
                self._random_steps.add(index)
            self._step, self._rng, self._rng_seq, self._step_drew = previous

    def _held(self) -> tuple[Any, ...]:
        """Host only: the run's state objects, to check later that none was replaced."""
        return (self._ledger, self._accountant, self._budget, self._stash, self._seeded)

    def _check_held(self, held: tuple[Any, ...], where: str) -> None:
        """Host only: refuse the run when one of the run's state objects is not
        the one ``held`` (replaced through a private name: the public ones are
        read-only)."""
        names = ("ledger", "accountant", "budget", "stash", "seeded")
        swapped = [name for name, before, now in zip(names, held, self._held(), strict=True) if before is not now]
        if swapped:
            raise PrivclustError(
                f"{where} replaced the run's {' and '.join(swapped)} (context.{swapped[0]} is the run's own); the "
                "run is refused and nothing is released. A component records through context.spend, "
                "context.record and context.record_leak, and a plugin chooses the accountant through "
                "privclust_make_accountant.")

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

    @contextmanager
    def _drawing_from(self, stream: PartStream) -> Iterator[None]:
        """Host only: inside, the current step draws from one stratum's seed
        (``stream``) exactly as a context seeded with it would (a worker's
        that runs the stratum): a fresh generator of its own for each step,
        kept across the step's calls on the stratum (its ``within`` groups).
        A draw there marks the step as one of :attr:`random_steps`."""
        index = self.step_index
        if stream.step != index:  # a new step: a fresh stream, as step() gives
            stream.step, stream.rng, stream.seq = index, None, None
        outer = (self._root, self._rng, self._rng_seq, self._step_drew)
        self._root, self._rng, self._rng_seq, self._step_drew = stream.root, stream.rng, stream.seq, False
        try:
            yield
        finally:
            stream.rng, stream.seq = self._rng, self._rng_seq
            drew = self._rng_seq is not None or self._step_drew
            self._root, self._rng, self._rng_seq = outer[0], outer[1], outer[2]
            self._step_drew = outer[3] or drew

    @property
    def step_index(self) -> int | None:
        return None if self._step is None else self._step.index

    @property
    def constraints(self) -> Rules | None:
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
        into an instance, through the resolver so that swaps are honoured."""
        if value is None or not isinstance(value, ComponentSpec | str | Mapping):
            return value
        if self._resolver is None:
            self._resolver = session_resolver()
        return self._resolver.create(kind, value)

    def mechanism(self, value: Any = "laplace") -> Any:
        """A noise mechanism by name (``"laplace"``, ``"geometric"``,
        ``"gaussian"`` or any registered one), a spec or an instance."""
        return self.component("noise_mechanisms", value)

    # -- accounting --------------------------------------------------------------

    def _entry(self, kind: str, statement: str, **fields: Any) -> LedgerEntry:
        info = self._step
        component = fields.pop("component", None) or (None if info is None else info.component)
        if fields.get("origin", Origin.COMPONENT) is not Origin.HOST:
            not_the_host(component)
        return LedgerEntry(
            seq=len(self._ledger),
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
        epsilon: float | None = None,
        delta: float | None = None,
        mechanism: str,
        sensitivity: float | Sensitivity | str,
        relation: Relation | str | None = None,
        covers: str | None = None,
        not_covered: str | None = None,
        claimed_epsilon: float | None = None,
        partition: tuple[str, str] | None = None,
        details: Mapping[str, Any] | None = None,
        component: str | None = None,
        noise: str = "",
        claim: DifferentialPrivacy | None = None,
    ) -> LedgerEntry:
        """Record a differentially private release, after checking the budget.

        The release is stated either as a typed
        ``claim=DifferentialPrivacy(epsilon=..., delta=..., relation=...,
        covers=..., not_covered=...)`` or by those keywords; the host reads
        the typed fact (its relation's kind composes releases), and the
        ledger's words are rendered from it.

        :param epsilon: the epsilon that actually holds for this release (the
            honest figure, which the accountant charges).
        :param delta: its delta (0 for pure epsilon-DP).
        :param mechanism: e.g. ``"laplace"``.
        :param sensitivity: the sensitivity used (a number, a
            :class:`Sensitivity` or a description).
        :param relation: the neighbouring relation: :attr:`Relation.REPLACE_ONE`,
            :attr:`Relation.ADD_REMOVE` (``.explained("...")`` adds a note), or
            words such as ``"replace-one (bounded DP)"``, converted once here.
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
        :param claim: the release as a typed :class:`DifferentialPrivacy`
            (then none of epsilon, delta, relation, covers, not_covered and
            claimed_epsilon is given).
        :raises BudgetExceededError: before anything is recorded.
        """
        not_the_host(component)
        fact = _dp_claim(claim, epsilon=epsilon, delta=delta, relation=relation, covers=covers,
                         not_covered=not_covered, claimed_epsilon=claimed_epsilon)
        epsilon, delta, claimed_epsilon = fact.epsilon, fact.delta, fact.claimed_epsilon
        relation, covers, not_covered = fact.relation.text, fact.covers, fact.not_covered
        mechanism, noise = (component_text(f"spend(): {label}", value)
                            for label, value in (("mechanism", mechanism), ("noise", noise)))
        if isinstance(sensitivity, Sensitivity):
            sens: Any = {"l1": sensitivity.l1, "l2": sensitivity.l2_bound}
            sens_text = f"L1 {at_most(sensitivity.l1)}" + (
                f", L2 {at_most(sensitivity.l2)}" if sensitivity.l2 is not None else "")
        else:
            if isinstance(sensitivity, int | float) and not isinstance(sensitivity, bool) and not (
                    math.isfinite(sensitivity) and sensitivity >= 0):
                # "by the laplace mechanism with sensitivity nan" stood under a DP verdict (a red-team audit)
                raise ParameterError(f"spend(): sensitivity must be a finite number >= 0; got {sensitivity!r} (the "
                                     "largest change one record makes to what the mechanism releases)")
            sens = sensitivity
            # a sensitivity shown rounded down: rounded up, the statement would cover a larger change than the
            # noise was drawn for
            sens_text = (at_most(sensitivity) if isinstance(sensitivity, int | float)
                         else component_text("spend(): sensitivity", str(sensitivity)))
        statement = dp_statement(fact, mechanism=mechanism, sensitivity=sens_text, noise=noise)
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
            fact=fact,
        )
        self._accountant.check(self._ledger.entries, entry)
        self._ledger._append(entry)
        return entry

    def _probe(self, epsilon: float, delta: float, relation: Relation | str | None, *, mechanism: str = "probe",
               covers: str = "probe") -> LedgerEntry | None:
        """A release of this cost that is never recorded, to ask the
        accountant about; ``None`` for one that costs nothing."""
        epsilon, delta = float(epsilon), float(delta)
        fields: dict[str, Any] = {}
        if relation is not None:
            if epsilon == 0 and delta == 0:
                return None
            fact = DifferentialPrivacy(epsilon=epsilon, delta=delta, relation=Relation.parse(relation), covers=covers)
            fields = {"relation": fact.relation.text, "fact": fact}
        return self._entry("dp", "probe", epsilon=epsilon, delta=delta, mechanism=mechanism, covers=covers,
                           partition=self._part, **fields)

    def can_spend(self, epsilon: float, delta: float = 0.0, *, relation: Relation | str | None = None) -> bool:
        """Whether a release of this cost would fit in the budget now.

        :param relation: the neighbouring relation the release will be
            stated under (:attr:`Relation.REPLACE_ONE`,
            :attr:`Relation.ADD_REMOVE` or words, as ``spend`` takes it); the
            answer counts it as the accountant will: an add/remove release
            counts twice when every release would be add/remove (the released
            file shows its number of records:
            :func:`~privclust.accountants.file_cost`) and twice under
            replace-one after a replace-one release. Without it the release is
            counted under the relation of the releases so far: replace-one on
            an empty ledger or after a replace-one release, add/remove after
            add/remove releases only; a component that knows its relation
            passes it.
        :raises PrivclustError: when a release under ``relation`` cannot be
            composed with the releases so far (the accountant refuses to mix
            them, budget or not).
        """
        probe = self._probe(epsilon, delta, relation)
        if probe is None:
            return True
        if isinstance(self._accountant, BasicAccountant):  # without composing a refusal's figures
            return self._accountant.admits(self._ledger.entries, probe)
        try:
            self._accountant.check(self._ledger.entries, probe)
        except BudgetExceededError:
            return False
        return True

    def check_spend(self, epsilon: float, delta: float = 0.0, *, relation: Relation | str, mechanism: str,
                    covers: str) -> None:
        """Refuse a release, or a component's releases together, before any
        of them is recorded or drawn: raise the accountant's
        :class:`~privclust.BudgetExceededError` when a release of this total
        cost under ``relation`` would not fit (:meth:`can_spend`). Its
        message names the step, ``mechanism`` and ``covers`` (e.g.
        ``"dp-density's three laplace releases"`` on ``"the cluster map"``),
        the total it would bring (with the add/remove doubling where it
        applies) and, under the host's accountant, the budget that would hold
        it and the epsilon that would fit. Call it before the first release:
        a refusal of a later one leaves the earlier ones in the ledger."""
        probe = self._probe(epsilon, delta, relation, mechanism=component_text("check_spend(): mechanism", mechanism),
                            covers=component_text("check_spend(): covers", covers))
        if probe is not None:
            self._accountant.check(self._ledger.entries, probe)

    def record(self, statement: str = "", *, claim: KAnonymity | ProbabilisticKAnonymity | Guarantee | None = None,
               guarantee: str | None = None, details: Mapping[str, Any] | None = None,
               component: str | None = None) -> LedgerEntry:
        """Record a non-DP guarantee (k-anonymity, probabilistic k-anonymity,
        edit rules satisfied...) as a typed ``claim``
        (:class:`KAnonymity`, :class:`ProbabilisticKAnonymity`,
        :class:`Guarantee`), which the host reads and verifies;
        ``statement`` says in words what it covers and what it does not (left
        out: the claim's own words, :meth:`KAnonymity.describe`). The string
        form ``guarantee="k-anonymity"`` with ``details={"k": 5}`` still
        works: it is converted here, once, to the typed claim."""
        not_the_host(component)
        fact, details = _guarantee_claim(claim, guarantee, details, statement)
        statement = component_text("record(): statement", statement or fact.describe())
        name = component_text("record(): guarantee", guarantee if claim is None else fact.name)
        # inside a stratum's run the claim is about that stratum's records: tagged with it, as a DP release is, so
        # that the host checks it on them alone
        entry = self._entry("guarantee", statement, mechanism=name, details=details, component=component,
                            claim=statement, status="claimed", fact=fact, partition=self._part)
        self._ledger._append(entry)
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
        if not self._budget.allows(parameter):
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
        self._ledger._append(entry)
        warnings.warn(PrivacyLeakWarning(statement), stacklevel=2)
        return entry

    def _record_host(self, kind: str, statement: str, *, details: Mapping[str, Any] | None = None,
                     **fields: Any) -> LedgerEntry:
        """Host only (the runner): a ``process`` or ``verified`` entry, or a
        guarantee the host itself checked on the released data (or, with
        ``origin=Origin.COMPONENT``, one it relays in a component's name: an
        edit rule as the handler that cannot be evaluated by the host says it
        stands)."""
        fields.setdefault("component", HOST if kind != "process" else None)
        fields.setdefault("origin", Origin.HOST)
        entry = self._entry(kind, statement, details=details, **fields)
        self._ledger._append(entry)
        return entry

    def _adopt(self, entry: LedgerEntry) -> LedgerEntry:
        """Host only (the runner): take over an entry a stratum's own context
        recorded in a worker, numbered in this ledger. A DP entry keeps the
        stratum its context tagged it with, and is checked against the
        budget like any spend."""
        adopted = attrs.evolve(entry, seq=len(self._ledger))
        if adopted.kind == "dp":
            try:
                self._accountant.check(self._ledger.entries, adopted)
            except BudgetExceededError as err:  # the stratum's task drew its noise: "no noise was drawn" is not so
                text = str(err)
                for said in (" Nothing was recorded and no noise was drawn.", " This release was not recorded"):
                    text = text.split(said)[0]
                raise BudgetExceededError(
                    f"{text} (a stratum's release, made and noised in the stratum's own task: it is not adopted "
                    "into the run's ledger and the run releases nothing)") from None
        self._ledger._append(adopted)
        return adopted

    def view(self) -> ContextView:
        """A read-only view of the run so far (for observers)."""
        # Copies: an entry is frozen, but its details are a dict an observer could change in place.
        return ContextView(budget=self._budget, entries=copy.deepcopy(self._ledger.entries), spent=self.spent,
                           seeded=self._seeded, step_index=self.step_index)

    @property
    def spent(self) -> tuple[float, float]:
        """The (epsilon, delta) spent so far, as the accountant composes it."""
        return self._accountant.total(self._ledger.entries)

    @property
    def remaining(self) -> float | None:
        """The epsilon a further pure-epsilon release that states no relation
        may still spend (``remaining_for(None)``), or ``None`` without a
        declared budget: such a release is counted under the relation of the
        releases so far. On an empty ledger, or after a replace-one release,
        that is the figure for a replace-one release (the whole budget on an
        empty ledger); after add/remove releases only, the figure for another
        add/remove release (half the budget less their total: the budget
        bounds the file's figure, the add/remove total counted twice). A
        release under the other relation may spend another figure: half of
        it for an add/remove release on an empty ledger or after a
        replace-one release, twice it for a replace-one release after
        add/remove releases only (``B - 2 s`` against ``B / 2 - s``); ask
        :meth:`remaining_for` with its relation."""
        return self.remaining_for(None)

    def remaining_for(self, relation: Relation | str | None) -> float | None:
        """The largest epsilon a further pure-epsilon (delta 0) release stated
        under ``relation`` may spend now, as the accountant counts it, or
        ``None`` without a declared budget. The figure fits without the
        accountant's rounding slack (the total it brings is at most the
        budget, so its stated, rounded-up figure is not above it either;
        :meth:`can_spend` accepts it), and the next double above it does
        not (under a plugin accountant: the largest it accepts whose total,
        as the plugin composes it, is at most the budget).
        Under the host's accountant, with ``B`` the budget's epsilon and ``s``
        the total so far: ``B / 2 - s`` for an add/remove release when every
        release so far is add/remove (so ``B / 2`` on an empty ledger);
        ``(B - s') / 2`` for an add/remove release after a replace-one one
        (``s'`` the total under replace-one, each add/remove release counted
        twice); ``B - s'`` for a replace-one release. Inside a stratum a
        release may spend more (parallel composition: the figure is the
        stratum's); ``None`` as
        ``relation`` is a release that states none (see :attr:`remaining`).

        :raises PrivclustError: when a release under ``relation`` cannot be
            composed with the releases so far."""
        limit = self._budget.epsilon
        if limit is None:
            return None
        kind = None if relation is None else Relation.parse(relation).kind
        accountant = self._accountant
        if isinstance(accountant, BasicAccountant):
            # the largest epsilon at which the total is within the budget exactly, without the accountant's rounding
            # slack: spent, a figure stated here gives a total whose stated (rounded-up) figure is not above the
            # budget (inside a stratum the bisection below answered the slack's edge: 0.6000000000000035, spending
            # it gave "1.00001" against a budget of 1)
            probe = self._probe(1.0, 0.0, kind)
            assert probe is not None
            entries = self._ledger.entries
            accountant.relation([*entries, probe])  # refuses a relation that cannot be composed, budget or not
            return accountant.largest_epsilon(entries, probe, high=sys.float_info.max) or 0.0

        # A plugin accountant: the largest epsilon it accepts whose total, as it composes it, is within the budget
        # exactly, found by bisection (its refusal grows with the epsilon).
        def fits(epsilon: float) -> bool:
            if epsilon <= 0:
                return True
            if not self.can_spend(epsilon, relation=kind):
                return False
            probe = self._probe(epsilon, 0.0, kind)
            return probe is None or accountant.total([*self._ledger.entries, probe])[0] <= limit

        low, high = 0.0, max(limit, 1.0) * 2.0
        for _ in range(64):
            if not fits(high):
                break
            low, high = high, high * 2.0
        else:
            return low
        for _ in range(200):
            middle = low + (high - low) / 2.0
            if middle <= low or middle >= high:
                break
            if fits(middle):
                low = middle
            else:
                high = middle
        return low


def _dp_claim(claim: DifferentialPrivacy | None, **stated: Any) -> DifferentialPrivacy:
    """``context.spend``'s release as a typed fact: ``claim`` itself, or the
    one built from its keywords (the string form of the relation converted
    here, once). Every text passes :func:`component_text`."""
    if claim is not None:
        given = sorted(k for k, v in stated.items() if v is not None)
        if not isinstance(claim, DifferentialPrivacy) or given:
            raise PrivclustError(
                "spend(): claim= takes a DifferentialPrivacy(epsilon=..., delta=..., relation=..., covers=...) and "
                "replaces those keywords" + (f"; also given: {', '.join(given)}" if given else
                                             f"; got {type(claim).__name__}"))
        stated = {k: getattr(claim, k) for k in stated}
        stated["relation"] = claim.relation.text
    epsilon, delta = stated["epsilon"], 0.0 if stated["delta"] is None else stated["delta"]
    for label, value in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PrivclustError(f"spend(): {label} must be a finite number >= 0; got {value!r}")
    if epsilon == 0 and delta == 0:
        raise PrivclustError("spend(): a release with epsilon = 0 and delta = 0 adds no protection cost; "
                             "do not record it as a DP release")
    for label in ("relation", "covers"):
        if stated[label] is None:
            raise PrivclustError(f"spend(): {label} is required (or give claim=DifferentialPrivacy(...)); "
                                 + ("Relation.REPLACE_ONE, Relation.ADD_REMOVE or words such as "
                                    "'replace-one (bounded DP)'" if label == "relation" else
                                    "say which released values the guarantee covers"))
    relation = stated["relation"]
    texts = {label: component_text(f"spend(): {label}", str(relation) if label == "relation" else stated[label])
             for label in ("relation", "covers", "not_covered") if stated[label] is not None}
    if isinstance(relation, Relation):  # the typed relation's kind is kept; its words checked like any text
        texts["relation"] = Relation(relation.kind, texts["relation"])
    return DifferentialPrivacy(epsilon=epsilon, delta=delta, relation=texts["relation"], covers=texts["covers"],
                               not_covered=texts.get("not_covered", ""), claimed_epsilon=stated["claimed_epsilon"])


def _guarantee_claim(claim: Any, guarantee: str | None, details: Mapping[str, Any] | None,
                     statement: str) -> tuple[KAnonymity | ProbabilisticKAnonymity | Guarantee, dict[str, Any]]:
    """``context.record``'s claim as a typed fact, and the entry's details:
    ``claim`` itself, its k and columns written into the details (refused
    where the details or the words state another k), or the string form's
    ``guarantee`` and ``details`` converted here, once."""
    details = dict(details or {})
    if (claim is None) == (guarantee is None):
        raise PrivclustError("record(): give claim=KAnonymity(k, columns) (or ProbabilisticKAnonymity, "
                             "Guarantee(name)), or the string form guarantee='...', not both or neither")
    if claim is None:
        if not isinstance(guarantee, str):
            raise PrivclustError(f"record(): guarantee names the guarantee in words; got {guarantee!r}")
        if not isinstance(statement, str) or not statement:
            raise PrivclustError("record(): the string form guarantee='...' needs a statement in words")
        fact = guarantee_claim(guarantee, details, statement)
        assert not isinstance(fact, DifferentialPrivacy)
        return fact, details
    if isinstance(claim, DifferentialPrivacy):
        raise PrivclustError("record(): a differentially private release is recorded by context.spend("
                             "claim=DifferentialPrivacy(...), mechanism=..., sensitivity=...)")
    if not isinstance(claim, KAnonymity | ProbabilisticKAnonymity | Guarantee):
        raise PrivclustError(f"record(): claim is a KAnonymity, ProbabilisticKAnonymity or Guarantee; got {claim!r}")
    if isinstance(claim, KAnonymity | ProbabilisticKAnonymity):
        if claim.k is None:
            raise PrivclustError(f"record(): {claim!r} states no k; give the k the component guarantees")
        said = {"k": claim.k, "columns": None if claim.columns is None else list(claim.columns)}
        for key, value in said.items():
            given = details.get(key)
            if key in details and (list(given) if isinstance(given, tuple) else given) != value:
                raise PrivclustError(f"record(): details[{key!r}] = {details[key]!r} contradicts the claim's "
                                     f"{key} = {value!r}; the claim states it (leave it out of details)")
        other = sorted(set(stated_ks(statement)) - {claim.k})
        if other:
            raise PrivclustError(f"record(): the statement says k = {other[0]} but the claim is {claim!r}; the "
                                 "host checks the claim's k: state the same k in the words, or leave k out of them")
        details.update({key: value for key, value in said.items() if value is not None})
    return claim, details


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
