"""Typed privacy facts (issue 27, item 3): the claim objects, the conversion of
today's strings at the API boundary, the host reading k and the relation from
the typed fact (never from words), and the report's rounding by parameter role."""

from __future__ import annotations

import math
from typing import ClassVar

import attrs
import numpy as np
import pandas as pd
import pytest

import privclust
from privclust import (
    Budget,
    DifferentialPrivacy,
    Guarantee,
    KAnonymity,
    Masked,
    ParameterError,
    PrivacyContext,
    PrivclustError,
    ProbabilisticKAnonymity,
    Registry,
    Relation,
    hookimpl,
    param,
)
from privclust.accountants import entry_relation
from privclust.ledger import LedgerEntry
from privclust.params import parameter_roles, role_rounding
from privclust.report import parameter_rows

# ---------------------------------------------------------------------------
# The typed objects
# ---------------------------------------------------------------------------


def test_a_relation_has_a_kind_and_the_words_the_ledger_shows():
    assert (Relation.REPLACE_ONE.kind, Relation.REPLACE_ONE.text) == ("replace-one", "replace-one")
    assert (Relation.ADD_REMOVE.kind, Relation.ADD_REMOVE.text) == ("add/remove", "add/remove one record")
    noted = Relation.ADD_REMOVE.explained("unbounded DP")
    assert noted == Relation("add/remove", "add/remove one record (unbounded DP)") and str(noted) == noted.text
    assert Relation.REPLACE_ONE.known and not Relation.parse("r").known


def test_a_relation_whose_words_state_another_kind_is_refused():
    with pytest.raises(PrivclustError, match="must state its kind"):
        Relation("replace-one", "add/remove one record")
    with pytest.raises(PrivclustError, match="must state its kind"):
        Relation("add/remove", "bounded DP")


@pytest.mark.parametrize(("words", "kind"), [
    ("replace-one (bounded DP)", "replace-one"), ("Bounded DP", "replace-one"), ("replace one", "replace-one"),
    ("add/remove one record (unbounded DP)", "add/remove"), ("unbounded", "add/remove"),
    ("add or remove a record", "add/remove"), ("Zero-out", "zero-out"), ("r", "r"),
])
def test_relation_words_are_converted_once_keeping_their_text(words, kind):
    relation = Relation.parse(words)
    assert (relation.kind, relation.text) == (kind, words)
    assert Relation.parse(relation) is relation
    # the testing kit's neighbouring pairs take either form
    assert privclust.claims.relation_kind(relation) == privclust.claims.relation_kind(words) == kind


@pytest.mark.parametrize("bad", [None, "", "   ", 3])
def test_a_relation_that_is_no_words_gets_a_clear_error(bad):
    with pytest.raises(PrivclustError, match="Relation.REPLACE_ONE"):
        Relation.parse(bad)


def test_claim_objects_check_their_figures():
    assert KAnonymity(np.int64(5), ("a", "b")) == KAnonymity(5, ["a", "b"])
    assert KAnonymity(50.0).k == 50 and KAnonymity(np.float32(4.0)).k == 4  # a whole float counts
    for bad in (0, -1, 2.5, True, "5", math.inf):
        with pytest.raises(PrivclustError, match="whole number"):
            KAnonymity(bad)
    with pytest.raises(PrivclustError, match="list of column names"):
        KAnonymity(3, "a")
    assert KAnonymity(5, ["age"]).describe() == "k-anonymity with k = 5 of age."
    assert ProbabilisticKAnonymity(3).describe() == "probabilistic k-anonymity with k = 3."
    assert ProbabilisticKAnonymity(3) != KAnonymity(3)
    with pytest.raises(PrivclustError, match="non-empty"):
        Guarantee("")
    for kwargs, match in (({"epsilon": -1}, "epsilon must be"), ({"epsilon": math.nan}, "epsilon must be"),
                          ({"epsilon": 1, "delta": math.inf}, "delta must be"), ({"epsilon": 0}, "adds no")):
        with pytest.raises(PrivclustError, match=match):
            DifferentialPrivacy(**{"relation": Relation.REPLACE_ONE, "covers": "c", **kwargs})
    dp = DifferentialPrivacy(epsilon=1, relation="add/remove one record", covers="c")
    assert dp.relation == Relation.ADD_REMOVE and dp.epsilon == 1.0 and dp.delta == 0.0


# ---------------------------------------------------------------------------
# spend and record: typed objects, and today's strings converted at the boundary
# ---------------------------------------------------------------------------


def _spend(context, **kwargs):
    return context.spend(mechanism="laplace", sensitivity=1.0, **kwargs)


def test_a_typed_relation_and_its_words_write_the_same_ledger_entry():
    words = "replace-one (neighbouring data sets differ in one record's values)"
    typed = Relation.REPLACE_ONE.explained("neighbouring data sets differ in one record's values")
    one, two, three = (PrivacyContext(Budget(epsilon=1.0)) for _ in range(3))
    a = _spend(one, epsilon=0.5, relation=words, covers="a count", not_covered="the labels")
    b = _spend(two, epsilon=0.5, relation=typed, covers="a count", not_covered="the labels")
    c = _spend(three, claim=DifferentialPrivacy(epsilon=0.5, relation=typed, covers="a count",
                                                not_covered="the labels"))
    assert a.to_dict() == b.to_dict() == c.to_dict()
    assert a.relation == words and a.statement.startswith("a count is 0.5-DP under " + words)
    assert a.fact == b.fact == c.fact and isinstance(a.fact, DifferentialPrivacy) and a.fact.relation == typed


def test_spend_takes_the_claim_or_its_keywords_not_both():
    context = PrivacyContext(Budget(epsilon=1.0))
    claim = DifferentialPrivacy(epsilon=0.5, relation=Relation.REPLACE_ONE, covers="c")
    with pytest.raises(PrivclustError, match="also given: epsilon"):
        _spend(context, claim=claim, epsilon=0.5)
    with pytest.raises(PrivclustError, match="got KAnonymity"):
        _spend(context, claim=KAnonymity(3))
    with pytest.raises(PrivclustError, match="relation is required"):
        _spend(context, epsilon=0.5, covers="c")
    with pytest.raises(PrivclustError, match="may not contain"):  # the typed words are checked like any text
        _spend(context, epsilon=0.5, covers="c", relation=Relation.REPLACE_ONE.explained("Verified by the host"))
    assert len(context.ledger) == 0


def test_the_accountant_composes_by_the_typed_relation():
    context = PrivacyContext(Budget(epsilon=10.0))
    _spend(context, epsilon=0.5, relation=Relation.REPLACE_ONE, covers="a")
    _spend(context, epsilon=1.0, relation="add/remove one record (unbounded DP)", covers="b")
    assert [entry_relation(e) for e in context.ledger] == ["replace-one", "add/remove"]
    assert context.accountant.relation(context.ledger.entries) == "replace-one"
    assert context.spent == (2.5, 0.0)  # the add/remove release counts twice under replace-one
    with pytest.raises(PrivclustError, match="different neighbouring relations"):
        _spend(context, epsilon=0.5, relation=Relation.parse("zero-out"), covers="c")


def test_a_typed_k_anonymity_claim_is_rendered_into_the_entry():
    context = PrivacyContext(Budget())
    entry = context.record(claim=KAnonymity(3, ["a", "b"]), details={"groups": 4})
    assert entry.mechanism == "k-anonymity" and entry.claim == entry.statement == "k-anonymity with k = 3 of a, b."
    assert entry.details == {"groups": 4, "k": 3, "columns": ["a", "b"]} and entry.fact == KAnonymity(3, ("a", "b"))
    words = context.record("groups of at least k = 4", claim=ProbabilisticKAnonymity(4))
    assert (words.mechanism, words.claim, words.details) == ("probabilistic k-anonymity", "groups of at least k = 4",
                                                            {"k": 4})
    other = context.record("values are swapped", claim=Guarantee("swapping"))
    assert other.mechanism == "swapping" and other.fact == Guarantee("swapping")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"statement": "groups of k = 9", "claim": KAnonymity(3)}, "says k = 9 but the claim"),
    ({"claim": KAnonymity(3), "details": {"k": 5}}, r"details\['k'\] = 5 contradicts"),
    ({"claim": KAnonymity(3, ["a"]), "details": {"columns": ["b"]}}, r"details\['columns'\]"),
    ({"statement": "x", "claim": KAnonymity(3), "guarantee": "k-anonymity"}, "not both or neither"),
    ({"statement": "x"}, "not both or neither"),
    ({"claim": DifferentialPrivacy(epsilon=1, relation="r", covers="c")}, "context.spend"),
    ({"claim": "k-anonymity"}, "is a KAnonymity"),
    ({"claim": KAnonymity(None)}, "states no k"),
    ({"claim": Guarantee("Verified by the host")}, "may not contain"),
])
def test_a_typed_claim_that_contradicts_itself_or_is_no_claim_is_refused(kwargs, match):
    context = PrivacyContext(Budget())
    with pytest.raises(PrivclustError, match=match):
        context.record(**kwargs)
    assert len(context.ledger) == 0


def test_the_string_form_is_converted_once_at_the_boundary():
    context = PrivacyContext(Budget())
    k = context.record("each group has at least 3 records", guarantee="k-anonymity (MDAV)",
                       details={"k": 3, "columns": ["a"]})
    assert k.mechanism == "k-anonymity (MDAV)" and k.details == {"k": 3, "columns": ["a"]}
    assert k.fact == KAnonymity(3, ["a"])
    # the largest k stated, in details or words, as the host checked it before: words k = 10 over details k = 1
    assert context.record("k-anonymity with k = 10", guarantee="k-anonymity", details={"k": 1}).fact.k == 10
    assert context.record("groups", guarantee="k-anonymity", details={"min_group_size": 50.0}).fact.k == 50
    assert context.record("no k here", guarantee="k-anonymity").fact == KAnonymity(None)
    assert context.record("p", guarantee="probabilistic k-anonymity",
                          details={"k": 3}).fact == ProbabilisticKAnonymity(3)
    assert context.record("pleasant", guarantee="pleasantness").fact == Guarantee("pleasantness")


def test_a_saved_ledger_gets_its_facts_from_the_saved_fields_and_never_saves_them():
    context = PrivacyContext(Budget(epsilon=1.0))
    _spend(context, epsilon=0.5, relation=Relation.ADD_REMOVE, covers="a")
    context.record("groups", claim=KAnonymity(3, ["a"]))
    records = context.ledger.to_records()
    assert all("fact" not in r for r in records)
    loaded = privclust.Ledger.from_records(records)
    assert [e.fact for e in loaded] == [e.fact for e in context.ledger]
    with pytest.raises(PrivclustError, match="unknown field"):
        privclust.Ledger.from_records([{**records[0], "fact": {"k": 100}}])


# ---------------------------------------------------------------------------
# The host reads the typed fact, never the words
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ForgedWords:
    """Groups of 4 identical records, a typed claim of k = 3, then words that
    say k = 9 (written past the API's checks, as a tampered entry would)."""

    name: ClassVar[str] = "forged-words"

    def mask(self, data, context):
        values = data.to_numpy(dtype=float)
        groups = np.arange(len(data)) // 4
        means = np.vstack([values[groups == g].mean(axis=0) for g in range(groups.max() + 1)])
        entry = context.record(claim=KAnonymity(3))
        words = "k-anonymity with k = 9 of a, b."
        context.ledger._replace(attrs.evolve(entry, statement=words, claim=words, details={"k": 9}))
        return Masked(data=pd.DataFrame(means[groups], index=data.index, columns=data.columns))


class _Plugin:
    @hookimpl
    def privclust_register_maskers(self, register):
        register(ForgedWords)


def test_the_host_checks_the_k_of_the_typed_claim_not_of_its_words():
    data = pd.DataFrame({"a": np.arange(24.0), "b": np.arange(24.0) % 5})
    release = privclust.run({"steps": [{"use": "forged-words"}]}, data,
                            registry=Registry(plugins=[_Plugin()], use_env=False))
    entry = release.ledger.of_kind("guarantee")[0]
    claim = release.verification["claims"][0]
    # groups of 4: verified at the claim's k = 3 (at the words' k = 9 it would be refuted)
    assert entry.fact == KAnonymity(3) and claim["k"] == 3 and claim["status"] == "verified"
    assert "(k = 3)" in entry.statement and "k-anonymity with k = 3 of a, b" in release.verdict


# ---------------------------------------------------------------------------
# The report's rounding by parameter role
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Noisy:
    name: ClassVar[str] = "noisy"
    reported_roles: ClassVar[dict[str, str]] = {"noise_scale": "noise-scale", "bogus": "no-such-role"}
    epsilon: float = param(float, default=1 / 3, role="privacy")
    sensitivity: float = param(float, default=2 / 3, role="sensitivity")
    m: float = param(float, default=2 / 3, role="plain")
    # a third-party parameter without a role, named like a setting
    threshold: float = param(float, default=2 / 3)


def test_the_report_rounds_a_parameter_by_its_declared_role():
    roles = parameter_roles(_Noisy())
    assert roles == {"epsilon": "privacy", "sensitivity": "sensitivity", "m": "plain", "noise_scale": "noise-scale"}
    rows = parameter_rows(privclust.stated_params(_Noisy()), {"noise_scale": {"a": 2 / 3}, "chosen": 1 / 3}, roles)
    shown = {r["name"]: r["value"] for r in rows}
    assert shown == {"epsilon": "0.3333333333333333",  # a privacy figure: exactly
                     "sensitivity": "0.666666", "noise_scale.a": "0.666666",  # rounded down
                     "m": "0.666667",  # a plain setting: to the nearest
                     "threshold": "0.6666666666666666", "chosen": "0.3333333333333333"}  # no role: exactly
    # the role, not the words of the name: an epsilon-like name without a role is exact, a plain one is rounded
    assert role_rounding("bounds_epsilon.a", {"bounds_epsilon": "plain"}) == "nearest"
    assert role_rounding("clusterer.sigma", {}) == "exact"


def test_a_nested_components_roles_are_found_under_its_name():
    fuzzy = privclust.get_registry().create("maskers", {"use": "fuzzy-microaggregation",
                                                        "clusterer": {"use": "fcm", "m": 1.5}})
    roles = parameter_roles(fuzzy)
    assert roles.get("clusterer.m") == "plain" and roles.get("m1") == "plain"


def test_a_role_that_is_not_one_of_the_roles_is_refused():
    with pytest.raises(ParameterError, match="role"):
        param(float, role="noise")


def test_the_built_ins_declare_their_privacy_and_noise_roles():
    registry = privclust.get_registry()
    laplace = registry.create("noise_mechanisms", {"use": "laplace", "epsilon": 0.5, "bounds": {"a": [0, 1]}})
    assert parameter_roles(laplace) == {"epsilon": "privacy", "bounds": "plain", "noise_scale": "noise-scale"}
    kmeans = registry.create("clusterers", {"use": "idp-kmeans", "epsilon": 1.0, "n_clusters": 2,
                                            "bounds": {"a": [0, 1]}})
    roles = parameter_roles(kmeans)
    assert roles["epsilon"] == roles["bounds_epsilon"] == roles["epsilon_per_release"] == "privacy"


def test_a_ledger_entry_without_a_fact_composes_no_relation():
    probe = LedgerEntry(seq=0, kind="dp", step=None, step_id=None, component="c", statement="probe", epsilon=1.0)
    assert probe.fact is None and entry_relation(probe) is None

