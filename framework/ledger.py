"""The ledger of a run: its entries, how their figures are written, and the
host's filter on a component's words.

A :class:`LedgerEntry` is one line of the record (a DP release, a claimed or
verified guarantee, a leak, a process step); the :class:`Ledger` is the
append-only list of them. :func:`at_least` and :func:`at_most` write a
privacy figure so that a statement never claims more than holds;
:func:`component_text` and :func:`looks_like_host` keep a component from
writing in the host's name. The context (:mod:`privclust.context`) appends
to the ledger; nothing here spends or draws.
"""

from __future__ import annotations

import copy
import decimal
import enum
import math
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .claims import Claim, DifferentialPrivacy, guarantee_claim
from .errors import PrivclustError, PrivclustWarning

__all__ = [
    "HOST",
    "STATUSES",
    "Ledger",
    "LedgerEntry",
    "NothingProtectedWarning",
    "Origin",
    "PrivacyLeakWarning",
    "Sensitivity",
    "at_least",
    "at_most",
    "component_text",
    "dp_statement",
    "exact",
    "jsonable",
    "looks_like_host",
    "not_the_host",
]


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


def jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
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
    #: Read through :attr:`details`, which hands out a copy: an entry is frozen, and so are its details (a
    #: red-team audit: a component rewrote the parameters in the host's process entry through the dict).
    _details: Mapping[str, Any] = attrs.field(factory=dict, converter=lambda d: copy.deepcopy(dict(d or {})),
                                              alias="details")
    claim: str | None = None
    status: str | None = None
    #: Who wrote the entry (:class:`Origin`): typed, set to ``HOST`` only by
    #: the host's own recording path; ``component`` is only the name shown.
    origin: Origin = attrs.field(default=Origin.COMPONENT, converter=_to_origin)
    #: The typed privacy fact (:mod:`privclust.claims`) of a ``dp`` or
    #: ``guarantee`` entry: what the host reads and verifies (never the words).
    #: ``context.spend``/``record`` set it; an entry built from its fields (a
    #: saved ledger's) gets it converted from them (:func:`_fact_of`). Not
    #: saved: the entry's fields render it.
    fact: Claim | None = attrs.field(default=attrs.Factory(lambda self: _fact_of(self), takes_self=True),
                                     eq=False, repr=False)

    @property
    def by_host(self) -> bool:
        """Whether the host wrote this entry (its typed origin, not its text)."""
        return self.origin is Origin.HOST

    @property
    def details(self) -> dict[str, Any]:
        """The entry's details: a copy, so that no reader changes the entry."""
        return copy.deepcopy(dict(self._details))

    def to_dict(self) -> dict[str, Any]:
        out = {(a.alias or a.name): getattr(self, a.name) for a in attrs.fields(type(self))}
        out["partition"] = list(self.partition) if self.partition else None
        out["origin"] = self.origin.value
        del out["fact"]
        return jsonable(out)

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
        signed: whoever can edit it can edit both fields together. The
        typed fact is converted from the saved fields, never read from the
        file."""
        if isinstance(record, Mapping) and "fact" in record:
            raise PrivclustError("a saved ledger entry has unknown field(s) fact")
        return _entry_from_record(cls, record)


def _fact_of(entry: LedgerEntry) -> Claim | None:
    """The typed fact of an entry built from its fields rather than through
    ``context.spend``/``record`` (a saved ledger's entry, one built by hand):
    converted from them once, as the string form of the API is. ``None`` for
    other kinds, and where the fields state no fact (a budget probe)."""
    try:
        if entry.kind == "dp" and entry.relation:
            return DifferentialPrivacy(epsilon=entry.epsilon, delta=entry.delta, relation=entry.relation,
                                       covers=entry.covers or "", not_covered=entry.not_covered or "",
                                       claimed_epsilon=entry.claimed_epsilon)
        if entry.kind == "guarantee" and entry.mechanism:
            return guarantee_claim(entry.mechanism, entry.details, entry.claim or entry.statement)
    except PrivclustError:
        return None
    return None



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
    if not (math.isfinite(value) and value > 0) or _names(text, value, 1):
        return text
    exact = decimal.Decimal(value)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return _shown(exact.quantize(step, rounding=decimal.ROUND_CEILING), digits, exact)


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
    if not math.isfinite(value) or value == 0 or _names(text, value, -1):
        return text
    exact = decimal.Decimal(value)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return _shown(exact.quantize(step, rounding=decimal.ROUND_FLOOR), digits, exact)


def _names(text: str, value: float, side: int) -> bool:
    """Whether ``text`` may stand for ``value`` in the direction ``side``
    (1: at least it, -1: at most it). A normal double is named by any text
    that reads back as it or beyond (``"0.1"`` is the epsilon 0.1 a recipe
    gives, though the double is 0.1000000000000000055...: the two differ by
    under 2^-53 of the value). A subnormal one is compared exactly, in
    decimal: ``"4.94e-324"`` reads back as 5e-324 but is 1% below it (a
    red-team audit)."""
    back = float(text)
    if (back - value) * side < 0:
        return False
    if abs(value) >= sys.float_info.min:
        return True
    return (decimal.Decimal(text) - decimal.Decimal(value)) * side >= 0


def _shown(rounded: decimal.Decimal, digits: int, value: decimal.Decimal) -> str:
    """``rounded`` written as a float is written (``f"{x:.6g}"``), from the
    decimal digits themselves when the nearest double would cross ``value``
    (a subnormal: 4.95e-324 reads back as 5e-324, shown ``4.94e-324``, below
    the delta spent)."""
    text = f"{float(rounded):.{digits}g}"
    if (decimal.Decimal(text) >= value) == (rounded >= value):
        return text
    mantissa, _, exponent = f"{rounded:.{digits}g}".lower().partition("e")
    if not exponent:
        return mantissa
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}e{sign}{int(exponent.lstrip('+-')):02d}"


def exact(value: Any) -> str:
    """A stated number as it was given: the short form (``1``, ``0.1``) when
    it is the same number, else every digit (``repr``): a budget or a
    stated epsilon shown exactly, never rounded either way."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        return str(value)
    number = float(value)
    text = f"{number:g}"
    return text if float(text) == number else repr(number)


def dp_statement(fact: DifferentialPrivacy, *, mechanism: str, sensitivity: Any, noise: str = "") -> str:
    """The ledger's words for a DP release, rendered from its typed fact."""
    epsilon, delta, claimed_epsilon, not_covered = fact.epsilon, fact.delta, fact.claimed_epsilon, fact.not_covered
    guarantee = f"({at_least(epsilon, 6)}, {at_least(delta, 3)})-DP" if delta else f"{at_least(epsilon, 6)}-DP"
    text = (f"{fact.covers} is {guarantee} under {fact.relation.text}, by the {mechanism} mechanism with "
            f"sensitivity {sensitivity}")
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


def not_the_host(component: str | None) -> None:
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
    names = {f.alias or f.name for f in attrs.fields(cls)}  # the names the constructor takes
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
        not_the_host(entry.component)
        for label, text in (("claim", entry.claim), ("mechanism", entry.mechanism), ("covers", entry.covers),
                            ("not_covered", entry.not_covered),
                            ("statement", entry.statement if entry.kind == "leak" else None)):
            component_text(f"{where}: {label}", text)
    return entry


class PrivacyLeakWarning(PrivclustWarning):
    """A guarantee is weaker than it looks (e.g. a parameter derived from the data)."""


class NothingProtectedWarning(PrivclustWarning):
    """The release changes no column of the data: every original value is
    released unchanged, and the host claims no guarantee for it."""


@attrs.frozen(kw_only=True)
class Sensitivity:
    """The sensitivity of a released vector: its L1 and L2 bounds.

    A noise mechanism takes the norm it needs (Laplace and geometric: L1;
    Gaussian: L2). A plain number passed where a Sensitivity is expected is
    an L1 bound, and serves as the (conservative) L2 bound too.
    """

    l1: float
    l2: float | None = None

    @classmethod
    def of(cls, value: float | Sensitivity) -> Sensitivity:
        return value if isinstance(value, Sensitivity) else cls(l1=float(value), l2=float(value))

    @property
    def l2_bound(self) -> float:
        return self.l1 if self.l2 is None else self.l2
