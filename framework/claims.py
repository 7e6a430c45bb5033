"""Typed privacy facts: what a component hands the host and the host verifies.

A component states its privacy facts as objects, not as words the host reads
back:

* :class:`Relation`: the neighbouring relation a differentially private
  release holds under, :attr:`Relation.REPLACE_ONE` (bounded DP: one record's
  values change, the number of records is public) or
  :attr:`Relation.ADD_REMOVE` (unbounded DP: one record is added or removed),
  with the words the ledger shows (:meth:`Relation.explained` adds a
  component's own note in brackets);
* :class:`DifferentialPrivacy`: one release's ``(epsilon, delta)``, its
  relation and what it covers (``context.spend`` builds it, or takes it);
* :class:`KAnonymity` and :class:`ProbabilisticKAnonymity`: a k and the
  columns it is stated over (``context.record(claim=...)``); the host checks
  k-anonymity at :attr:`KAnonymity.k` on the values the step released;
* :class:`Guarantee`: any other non-DP guarantee, named; the host presents it
  as the component's claim.

Strings still work at the API boundary (``relation="replace-one (bounded
DP)"``, ``guarantee="k-anonymity"`` with ``details={"k": 5}``):
:meth:`Relation.parse` and :func:`guarantee_claim` convert them once, there,
and the rest of the host only sees these types. This module imports only the
standard library, ``attrs`` and :mod:`privclust.errors`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from .errors import PrivclustError

__all__ = [
    "Claim",
    "DifferentialPrivacy",
    "Guarantee",
    "KAnonymity",
    "ProbabilisticKAnonymity",
    "Relation",
    "guarantee_claim",
    "relation_kind",
]

REPLACE_ONE = "replace-one"
ADD_REMOVE = "add/remove"


def relation_kind(text: str | Relation | None) -> str:
    """The neighbouring relation words state: ``"replace-one"`` (bounded DP:
    one record's values change, n is public), ``"add/remove"`` (unbounded DP:
    one record is added or removed), or the words themselves (lower case,
    stripped) for any other relation; a :class:`Relation`'s own kind. The one
    place such words are read."""
    if isinstance(text, Relation):
        return text.kind
    t = (text or "").strip().lower()
    if t.startswith(("replace-one", "replace one", "bounded")):
        return REPLACE_ONE
    if t.startswith(("add/remove", "add-remove", "add or remove", "add-or-remove", "unbounded")):
        return ADD_REMOVE
    return t


def _text(label: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PrivclustError(f"{label} must be a non-empty text; got {value!r}")
    return value


@attrs.frozen
class Relation:
    """A neighbouring relation: its ``kind`` (``"replace-one"``,
    ``"add/remove"``, or another relation's own words, which compose only
    with releases stated under the same words) and the ``text`` the ledger
    shows. The text must state the kind (``Relation("replace-one", "add/remove
    one record")`` is refused): the words and the type never disagree.

    >>> Relation.REPLACE_ONE.text, Relation.ADD_REMOVE.explained("unbounded DP").text
    ('replace-one', 'add/remove one record (unbounded DP)')
    >>> Relation.parse("replace-one (bounded DP)").kind
    'replace-one'
    """

    kind: str
    text: str

    REPLACE_ONE: ClassVar[Relation]
    ADD_REMOVE: ClassVar[Relation]

    def __attrs_post_init__(self) -> None:
        _text("a relation's kind", self.kind)
        _text("a relation's text", self.text)
        if relation_kind(self.text) != self.kind:
            raise PrivclustError(
                f"a relation's text must state its kind: {self.text!r} reads as {relation_kind(self.text)!r}, "
                f"not {self.kind!r}; start it with 'replace-one' or 'add/remove' (Relation.REPLACE_ONE.explained("
                "'...') keeps the two together)")

    @classmethod
    def parse(cls, text: str | Relation) -> Relation:
        """The relation words state (a :class:`Relation` is returned as it
        is): the string form of ``context.spend(relation=...)``, converted
        once at the API boundary. Words that name neither replace-one nor
        add/remove are another relation of their own."""
        if isinstance(text, Relation):
            return text
        if not isinstance(text, str) or not text.strip():
            raise PrivclustError(
                f"a release's relation is Relation.REPLACE_ONE, Relation.ADD_REMOVE or words such as "
                f"'replace-one (bounded DP)'; got {text!r}")
        return cls(relation_kind(text), text)

    def explained(self, note: str) -> Relation:
        """The same relation, with ``note`` in brackets after its words (e.g.
        ``"unbounded DP"``)."""
        return Relation(self.kind, f"{self.text} ({_text('a relation note', note)})")

    @property
    def known(self) -> bool:
        """Whether it is replace-one or add/remove (the relations the basic
        accountant converts between)."""
        return self.kind in (REPLACE_ONE, ADD_REMOVE)

    def __str__(self) -> str:
        return self.text


Relation.REPLACE_ONE = Relation(REPLACE_ONE, "replace-one")
Relation.ADD_REMOVE = Relation(ADD_REMOVE, "add/remove one record")


def _str(label: str, value: Any) -> None:
    if not isinstance(value, str):
        raise PrivclustError(f"{label} must be a text; got {value!r}")


def _figure(label: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PrivclustError(f"{label} must be a finite number >= 0; got {value!r}")
    return float(value)


def _optional_figure(label: str, value: Any) -> float | None:
    return None if value is None else _figure(label, value)


@attrs.frozen(kw_only=True)
class DifferentialPrivacy:
    """One differentially private release: ``(epsilon, delta)`` under
    ``relation`` for what it ``covers``; ``not_covered`` names what it does
    not; ``claimed_epsilon`` a method's own figure when it differs from the
    one that holds. ``relation`` takes a :class:`Relation` or its words."""

    name: ClassVar[str] = "differential privacy"

    epsilon: float = attrs.field(converter=lambda v: _figure("DifferentialPrivacy: epsilon", v))
    delta: float = attrs.field(default=0.0, converter=lambda v: _figure("DifferentialPrivacy: delta", v))
    relation: Relation = attrs.field(converter=lambda v: Relation.parse(v))
    covers: str = attrs.field(validator=lambda _i, a, v: _str(f"DifferentialPrivacy: {a.name}", v))
    not_covered: str = attrs.field(default="", validator=lambda _i, a, v: _str(f"DifferentialPrivacy: {a.name}", v))
    claimed_epsilon: float | None = attrs.field(
        default=None, converter=lambda v: _optional_figure("DifferentialPrivacy: claimed_epsilon", v))

    def __attrs_post_init__(self) -> None:
        if self.epsilon == 0 and self.delta == 0:
            raise PrivclustError("a release with epsilon = 0 and delta = 0 adds no protection cost; do not record "
                                 "it as a DP release")


def _k(label: str, value: Any) -> int | None:
    """A stated k: a whole number >= 1 (``50.0`` counts as 50), or ``None``."""
    if value is None:
        return None
    if not isinstance(value, int) and not hasattr(value, "__index__") and hasattr(value, "__float__"):
        number = float(value)  # a float, numpy's included: a whole one counts (50.0 is 50)
        if math.isfinite(number) and number.is_integer():
            value = int(number)
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise PrivclustError(f"{label}: k must be a whole number >= 1; got {value!r}")
    if int(value) < 1:
        raise PrivclustError(f"{label}: k must be a whole number >= 1; got {value!r}")
    return int(value)


def _columns(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(c, str) for c in value):
        raise PrivclustError(f"a claim's columns are a list of column names; got {value!r}")
    return tuple(value) or None


def _cols(columns: Sequence[str]) -> str:
    return ", ".join(columns)


@attrs.frozen
class _KClaim:
    """A claim stated at a k over columns (the two k-anonymity claims)."""

    name: ClassVar[str]

    k: int | None = attrs.field(converter=lambda v: _k("a k-anonymity claim", v))
    columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)

    def describe(self) -> str:
        """The claim in words, for the ledger (rendered from the object)."""
        of = f" of {_cols(self.columns)}" if self.columns else ""
        return f"{self.name} with k = {self.k}{of}." if self.k is not None else f"{self.name}{of} (no k stated)."


@attrs.frozen
class KAnonymity(_KClaim):
    """k-anonymity: every combination of the released values of ``columns``
    (``None``: all the step's columns) is shared by at least ``k`` records.
    The host checks it at ``k`` on the values the step released; a claim
    with ``k = None`` (only from the string form without a k) names nothing
    checkable and is refuted.

    >>> KAnonymity(5, ["age", "income"]).describe()
    'k-anonymity with k = 5 of age, income.'
    """

    name: ClassVar[str] = "k-anonymity"


@attrs.frozen
class ProbabilisticKAnonymity(_KClaim):
    """Probabilistic k-anonymity (each record is linked to its own released
    record with probability at most 1/k in expectation; records may be
    released verbatim). The host appends how many records were released
    verbatim and the groups smaller than ``k``."""

    name: ClassVar[str] = "probabilistic k-anonymity"


@attrs.frozen
class Guarantee:
    """Any other non-DP guarantee, by ``name`` (e.g. ``"post-randomisation
    (PRAM)"``). The host presents it as the component's claim."""

    name: str = attrs.field(validator=lambda _i, _a, v: _text("a guarantee's name", v))

    def describe(self) -> str:
        return f"{self.name}."


#: A typed privacy fact a component hands the host.
Claim = DifferentialPrivacy | KAnonymity | ProbabilisticKAnonymity | Guarantee

_K_WORDS = re.compile(r"\bk\s*=\s*(\d+)")


def stated_ks(words: str) -> list[int]:
    """The k values ``words`` state as "k = N" (only for the string form's
    conversion and for refusing words that contradict a typed claim)."""
    return [int(k) for k in _K_WORDS.findall(words or "")]


def guarantee_claim(guarantee: str, details: Mapping[str, Any] | None, statement: str) -> Claim:
    """The typed claim of the string form ``context.record(statement,
    guarantee=..., details=...)``, converted once at the API boundary.

    ``guarantee`` starting with ``"probabilistic k-anonymity"`` or
    ``"k-anonymity"`` (whatever a component appends) is a k-anonymity claim:
    its k is the largest it states, in ``details`` (``k``, else
    ``min_group_size``; a whole number) or as "k = N" in ``statement``, so
    that words saying k = 10 over details saying k = 1 are checked at 10;
    its columns are ``details["columns"]`` when a list of names. Anything
    else is a :class:`Guarantee` by that name."""
    text = guarantee.strip().lower()
    kind: type[_KClaim]
    if text.startswith("probabilistic k-anonymity"):
        kind = ProbabilisticKAnonymity
    elif text.startswith("k-anonymity"):
        kind = KAnonymity
    else:
        return Guarantee(guarantee)
    details = details or {}
    stated: list[int] = []
    for key in ("k", "min_group_size"):
        try:
            k = _k("details", details.get(key))
        except PrivclustError:
            k = None  # a details value that is no k (a measured float, a text) states none, as before
        if k is not None:
            stated.append(k)
            break
    stated += stated_ks(statement)
    columns = details.get("columns")
    try:
        cols = _columns(list(columns)) if isinstance(columns, list | tuple) else None
    except PrivclustError:
        cols = None  # not a list of names: the step's columns, as before
    return kind(max(stated) if stated else None, cols)
