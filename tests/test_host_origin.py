"""Host-only statements are typed, not text (issue 24, item 4).

The host's ledger entries carry an origin (``LedgerEntry.origin``) that only
its private recording path sets; a component's ``spend``/``record`` and a
forged ``component=`` cannot produce it, and what decides "this is the
host's entry" reads it. The text filters stay as a second line and fold
Unicode spaces, zero-width characters, case and look-alike letters: before,
``component="privclust\\u00a0(host)"`` passed and the verdict read "claims of
step 0 (privclust (host))", and ``"Verified by the\\u00a0host"`` passed in a
claim.
"""

from __future__ import annotations

import json
import pickle
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import Ledger, LedgerEntry, Masked, PrivacyContext, PrivclustError, Registry, hookimpl, param
from privclust.accounting import HOST, Origin, looks_like_host
from privclust.errors import PluginError
from privclust.report import public_statements

#: Ways to write the host's name that read as it: each passed the old filter
#: (``component.strip().lower() == HOST``) but the first two-thirds.
HOST_NAMES = [
    "privclust (host)",
    " PRIVCLUST (HOST) ",
    "privclust\u00a0(host)",  # no-break space (the case)
    "privclust\u2003(host)",  # em space
    "privclust\u3000(host)",  # ideographic space
    "privclust\u200b (host)",  # zero-width space
    "priv\u200dclust (host)",  # zero-width joiner inside the word
    "privclust (\u0068\u043est)",  # Cyrillic o
    "\u0440rivclust (host)",  # Cyrillic er for p
    "privclust (h\u03bfst)",  # Greek omicron
    "\uff50\uff52\uff49\uff56\uff43\uff4c\uff55\uff53\uff54 (host)",  # full-width letters
    "pri\u0301vclust (host)",  # a combining accent
    "privclust-host",
    "privclust.h0st",
]

#: The host's words as a component might smuggle them into a statement.
HOST_WORDS = [
    "Verified by the host: k-anonymity with k = 100",
    "Verified by the\u00a0host: k-anonymity with k = 100",
    "VERIFIED  BY  THE  HOST",
    "verified by the\u2009host",
    "verified by the\u200bhost",  # a zero-width space is a space in the ledger's text
    "v\u0435rified by the h\u043est",  # Cyrillic e and o
    "verified\u3000by\u3000the\u3000host",
    "\uff36erified by the host",
    "host\u00a0check passed",
    "written by privclust\u00a0(host)",
]


def _spend(context, **extra):
    return context.spend(**{"epsilon": 0.5, "mechanism": "laplace", "sensitivity": 1.0, "relation": "replace-one",
                            "covers": "column a", **extra})


def test_the_hosts_entries_and_only_they_carry_the_host_origin():
    data = privclust.datasets.iris().drop(columns="class")
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3}]}, data, seed=1)
    entries = release.ledger.entries
    assert {e.origin for e in entries} == {Origin.HOST, Origin.COMPONENT}
    for e in entries:
        assert isinstance(e.origin, Origin)
        if e.kind in ("verified", "process") or e.component == HOST:
            assert e.by_host, e
        if e.kind == "guarantee" and e.status != "verified" or e.kind in ("dp", "leak"):
            assert not e.by_host, e
    claims = [e for e in entries if e.kind == "guarantee" and e.component == "microaggregation"]
    assert claims and not any(e.by_host for e in claims)  # a claim the host verified stays the component's


@pytest.mark.parametrize("name", HOST_NAMES)
def test_a_component_cannot_record_under_a_name_that_reads_as_the_hosts(name):
    context = PrivacyContext()
    with pytest.raises(PrivclustError, match="names the host"):
        _spend(context, component=name)
    with pytest.raises(PrivclustError, match="names the host"):
        context.record("groups of at least 3", guarantee="k-anonymity", component=name)
    with pytest.raises(PrivclustError, match="names the host"), context.step(0, "s", name):
        pass
    assert len(context.ledger) == 0


def test_the_filter_does_not_refuse_names_that_merely_mention_a_host():
    for name in ("hostile-masker", "privclust-extras", "ghost", "my-host-rounding", "privclust hosting"):
        assert not looks_like_host(name)
    context = PrivacyContext()
    assert not _spend(context, component="my host plugin").by_host


@pytest.mark.parametrize("text", HOST_WORDS)
def test_a_components_text_cannot_use_the_hosts_words_in_any_spelling(text):
    context = PrivacyContext()
    with pytest.raises(PrivclustError, match="may not contain"):
        context.record(text, guarantee="k-anonymity")
    with pytest.raises(PrivclustError, match="may not contain"):
        _spend(context, not_covered=text)
    assert len(context.ledger) == 0


def test_every_text_a_component_hands_the_ledger_is_filtered():
    """The sensitivity given as text and a declared partition are quoted in
    the DP statement too; they passed unfiltered."""
    context = PrivacyContext()
    with pytest.raises(PrivclustError, match="spend\\(\\): sensitivity: .*may not contain"):
        context.spend(epsilon=0.5, mechanism="laplace", sensitivity="1. Verified by the\u00a0host: k = 100",
                      relation="replace-one", covers="column a")
    with pytest.raises(PrivclustError, match="spend\\(\\): partition: .*may not contain"):
        _spend(context, partition=("half", "a. Host\u2003check passed"))
    assert len(context.ledger) == 0
    entry = _spend(context, sensitivity="1 per record\n(bounded)", partition=("half", "a\x1b[2K"))
    assert "\n" not in entry.statement and "\x1b" not in entry.statement


def test_the_typed_origin_cannot_come_from_the_public_recording_calls():
    context = PrivacyContext()
    with pytest.raises(TypeError):
        context.record("x", guarantee="k-anonymity", origin=Origin.HOST)  # no such argument
    with pytest.raises(TypeError):
        _spend(context, origin="host")
    with context.step(0, "s", "jitter"):
        entries = [_spend(context), context.record("groups of at least 3", guarantee="k-anonymity")]
        host = context._record_host("verified", "measured", mechanism="release check")
    assert [e.origin for e in entries] == [Origin.COMPONENT, Origin.COMPONENT]
    assert host.by_host and host.component == HOST
    # an entry built or copied by anyone defaults to a component's; an unknown origin is refused, not folded
    assert LedgerEntry(seq=0, kind="dp", step=0, step_id="s", component=HOST, statement="x").origin is Origin.COMPONENT
    assert attrs.evolve(host, statement="y").by_host  # the host's own copies keep it (stratum adoption)
    for bad in ("HOST", "host ", "host\u00a0", "privclust (host)", 1, None):
        with pytest.raises(PrivclustError, match="origin is 'host' or 'component'"):
            LedgerEntry(seq=0, kind="verified", step=None, step_id=None, component=HOST, statement="x", origin=bad)


@attrs.frozen(kw_only=True)
class ForgedName:
    """Spends and signs the entry with the host's name behind a no-break space."""

    name: ClassVar[str] = "forged-name"
    component_name: str = param(str, default="privclust\u00a0(host)")

    def mask(self, data, context):
        context.spend(epsilon=0.5, mechanism="laplace", sensitivity=1.0, relation="replace-one",
                      covers="the values of a", component=self.component_name)
        out = data.astype(float) + context.rng.laplace(0, 2.0, data.shape)
        return Masked(data=out)


@attrs.frozen(kw_only=True)
class ForgedWords:
    """Claims k-anonymity in the host's words, behind a no-break space."""

    name: ClassVar[str] = "forged-words"

    def mask(self, data, context):
        context.record("Verified by the\u00a0host: k-anonymity with k = 100", guarantee="k-anonymity",
                       details={"k": 100})
        return Masked(data=data.astype(float).round(0))


@attrs.frozen(kw_only=True)
class ForgedPolicy:
    """Its missing-value policy, which the host quotes in its own process
    entry, speaks in the host's words."""

    name: ClassVar[str] = "forged-policy"

    def missing_values(self):
        return "released missing.\nVerified by the\u00a0host: k-anonymity with k = 100"

    def mask(self, data, context):
        return Masked(data=data.astype(float).round(0))


class Forgers:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(ForgedName)
        register(ForgedWords)
        register(ForgedPolicy)


def test_a_plugin_cannot_make_the_verdict_speak_for_the_host(tmp_path):
    registry = Registry(plugins=[Forgers()], use_env=False)
    data = pd.DataFrame({"a": np.arange(20.0)})
    for use in ("forged-name", "forged-words"):
        with pytest.raises(PrivclustError, match="names the host|may not contain"):
            privclust.run({"privacy": {"epsilon": 1.0}, "steps": [{"use": use}]}, data, seed=1, registry=registry)
    with pytest.raises(PrivclustError, match=r"forged-policy\.missing_values\(\): .*may not contain"):
        privclust.run({"steps": [{"use": "forged-policy"}]}, data.assign(a=[np.nan] + [1.5] * 19), seed=1,
                      registry=registry)
    release = privclust.run({"privacy": {"epsilon": 1.0}, "steps": [{"use": "forged-name",
                                                                       "component_name": "my-noise"}]},
                            data, seed=1, registry=registry)
    assert "(host)" not in release.verdict and "my-noise" in release.verdict


class HostNamed:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(attrs.frozen(kw_only=True)(type("Sneaky", (), {"__annotations__": {},
                                                                "name": "privclust-host",
                                                                "mask": lambda self, data, context: None})))


def test_a_registered_component_named_like_the_host_is_refused():
    with pytest.raises(PluginError, match="reads as the host's name"):
        Registry(plugins=[HostNamed()], use_env=False).components()


def _leaky_entries():
    def entry(seq, kind, component, origin, step=0):
        return LedgerEntry(seq=seq, kind=kind, step=step, step_id="s", component=component,
                           statement=f"statement {seq}", mechanism="bounds" if kind == "leak" else None,
                           origin=origin)

    return [entry(0, "leak", "plug", Origin.COMPONENT),
            entry(1, "guarantee", HOST, Origin.COMPONENT),  # a component's entry shown under the host's name
            entry(2, "verified", HOST, Origin.HOST),
            entry(3, "process", "plug", Origin.HOST)]


def test_the_non_disclosive_report_keeps_the_hosts_entries_by_origin_not_by_name():
    withheld = public_statements(_leaky_entries())
    assert sorted(withheld) == [0, 1, 3]  # the host-named component entry is withheld, the host's measurement kept


def test_a_saved_ledger_keeps_its_origins_through_json():
    data = privclust.datasets.iris().drop(columns="class")
    release = privclust.run({"steps": [{"use": "microaggregation", "k": 3}]}, data, seed=1)
    for non_disclosive in (False, True):
        records = json.loads(release.to_json(non_disclosive=non_disclosive))["ledger"]
        assert {r["origin"] for r in records} == {"host", "component"}
        loaded = Ledger.from_records(records)
        assert [e.origin for e in loaded] == [e.origin for e in release.ledger]
        assert [(e.seq, e.kind, e.component) for e in loaded] == [(e.seq, e.kind, e.component) for e in release.ledger]
    records = json.loads(release.to_json())["ledger"]
    assert Ledger.from_records(records).to_records() == records  # a second round trip changes nothing
    copied = pickle.loads(pickle.dumps(release))  # and a pickled release (a worker's, a saved one) keeps them
    assert [e.origin for e in copied.ledger] == [e.origin for e in release.ledger]


def _saved():
    context = PrivacyContext()
    with context.step(0, "noise", "laplace"):
        _spend(context)
        context.record("groups of at least 3", guarantee="k-anonymity")
        context._record_host("verified", "measured", mechanism="release check")
        context._record_host("process", "applied")
    return json.loads(json.dumps(context.ledger.to_records()))


@pytest.mark.parametrize(("seq", "change", "match"), [
    (0, {"origin": "host"}, "never writes 'dp'"),  # a DP release is never the host's
    (1, {"origin": "host"}, "a host entry shown as 'laplace'"),  # a claim turned into the host's
    (2, {"origin": "component"}, "never writes 'verified'"),  # a measurement is never a component's
    (3, {"origin": "component"}, "never writes 'process'"),
    (2, {"origin": "HOST"}, "origin is 'host' or 'component'"),
    (2, {"origin": "host\u00a0"}, "origin is 'host' or 'component'"),
    (1, {"component": "privclust\u00a0(host)"}, "names the host"),
    (1, {"claim": "Verified by the\u00a0host: k = 100"}, "may not contain"),
    (0, {"covers": "column a, host\u2003check passed"}, "may not contain"),
    (1, {"status": "proven"}, "unknown status"),
    (1, {"seq": 5}, "out of place"),
    (1, {"signed_by": "host"}, "unknown field"),
])
def test_a_saved_ledger_cannot_forge_the_hosts_origin(seq, change, match):
    records = _saved()
    assert [r["origin"] for r in records] == ["component", "component", "host", "host"]
    assert Ledger.from_records(records).to_records() == records
    records[seq].update(change)
    with pytest.raises(PrivclustError, match=match):
        Ledger.from_records(records)


def test_a_saved_entry_without_an_origin_is_a_components():
    records = _saved()[:2]
    for r in records:
        del r["origin"]
    assert not any(e.by_host for e in Ledger.from_records(records))
    records = _saved()
    del records[2]["origin"]  # a host measurement that lost its origin is refused, not taken as the host's
    with pytest.raises(PrivclustError, match="never writes 'verified'"):
        Ledger.from_records(records)


class SpeakingAccountant:
    """A plugin accountant whose description, shown in the report beside the
    budget, speaks in the host's words."""

    def __init__(self, budget, description="basic composition.\nVerified by the\u00a0host: the total is exact"):
        self.budget = budget
        self.description = description
        self._basic = privclust.BasicAccountant(budget)

    def total(self, entries):
        return self._basic.total(entries)

    def check(self, entries, new):
        return self._basic.check(entries, new)


def test_a_plugin_accountants_description_cannot_speak_for_the_host():
    from privclust.accounting import accountant_description

    budget = privclust.Budget(epsilon=1.0)
    with pytest.raises(PrivclustError, match="the plugin accountant's description: .*may not contain"):
        PrivacyContext(budget, accountant=SpeakingAccountant(budget))
    context = PrivacyContext(budget, accountant=SpeakingAccountant(budget, "basic composition,\nline two"))
    assert accountant_description(context.accountant).startswith("basic composition, line two (as stated by")
