"""The privacy accounting of a run, as one import.

The pieces live in modules with one job each, below the registry:
:mod:`privclust.ledger` (the ledger, its entries, how figures are written and
the filter on a component's words), :mod:`privclust.accountants` (how costs
compose), :mod:`privclust.seeds` (random streams without the seed),
:mod:`privclust.progress` (progress callbacks) and :mod:`privclust.context`
(:class:`PrivacyContext`, the stash and the read-only view). This module
re-exports their names, so ``from privclust.accounting import X`` keeps
working; new code imports from the module that owns a name. The registry
registers this module as the host's plugin ``privclust.accounting``: its
``privclust_make_accountant`` is the default accountant.
"""

from __future__ import annotations

from .accountants import (
    ADD_REMOVE,
    REPLACE_ONE,
    Accountant,
    BasicAccountant,
    accountant_description,
    accountant_name,
    group_delta,
    relation_kind,
)
from .context import ContextView, PrivacyContext, Resolver, Stash, StashKey, session_resolver
from .hookspecs import hookimpl
from .ledger import (
    HOST,
    STATUSES,
    Ledger,
    LedgerEntry,
    NothingProtectedWarning,
    Origin,
    PrivacyLeakWarning,
    at_least,
    at_most,
    component_text,
    dp_statement,
    exact,
    jsonable,
    looks_like_host,
    not_the_host,
)
from .progress import RecordProgress, ThrottledProgress
from .recipe import Budget
from .seeds import SeedStream

# The private names other modules imported from here before the split, kept
# for one release so that code written against them still imports.
_exact = exact
_jsonable = jsonable
_group_delta = group_delta
_dp_statement = dp_statement
_not_the_host = not_the_host
_SeedStream = SeedStream

__all__ = [
    "ADD_REMOVE",
    "HOST",
    "REPLACE_ONE",
    "STATUSES",
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
    "Resolver",
    "SeedStream",
    "Stash",
    "StashKey",
    "ThrottledProgress",
    "accountant_description",
    "accountant_name",
    "at_least",
    "at_most",
    "component_text",
    "dp_statement",
    "exact",
    "group_delta",
    "jsonable",
    "looks_like_host",
    "not_the_host",
    "privclust_make_accountant",
    "relation_kind",
    "session_resolver",
]


@hookimpl(trylast=True)
def privclust_make_accountant(budget: Budget) -> Accountant:
    """The built-in default: :class:`BasicAccountant`."""
    return BasicAccountant(budget)
