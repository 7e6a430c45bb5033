"""Provenance at run time: which plugin, distribution and version provided
each component of a run (:func:`snapshot`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pandas as pd

from .components import capability
from .errors import PrivclustError
from .ledger import HOST
from .specs import nested_components

__all__ = ["snapshot"]


def snapshot(registry: Any, outcomes: Sequence[Any], constraints: Sequence[Any],
             evaluations: pd.DataFrame) -> dict[str, Any]:
    """Provenance at run time: which plugin, distribution and version provided
    each component, the installed plugins, each evaluator's disclosive
    metrics and the explanations and units of their figures. The Release
    reports these, never the live registry."""
    def info(kind: str, cls: type) -> dict[str, str]:
        found = registry.provider(kind, cls)  # by class: a replaced component chosen back is credited rightly
        if found is None:
            return {"plugin": "?", "distribution": "?", "version": "?"}
        return {"plugin": found.plugin, "distribution": found.distribution, "version": found.version}

    disclosive: dict[str, list[str]] = {}
    descriptions: dict[str, dict[str, list[str]]] = {}
    for name in dict.fromkeys(evaluations["evaluator"]) if len(evaluations) else ():
        try:
            cls = registry.get("evaluators", name)
        except PrivclustError:
            continue
        disclosive[str(name)] = [str(p) for p in capability(cls, "disclosive_metrics") or ()]
        described = capability(cls, "metric_descriptions") or {}
        if isinstance(described, Mapping):
            descriptions[str(name)] = {str(k): [str(x) for x in v] for k, v in described.items()
                                       if isinstance(v, tuple | list) and len(v) == 2}
    def step_info(o: Any) -> dict[str, Any]:
        out: dict[str, Any] = info(o.kind, type(o.component))
        inner = {location: {"component": getattr(type(c), "name", type(c).__name__), **info(kind, type(c))}
                 for location, kind, c in nested_components(o.component)}
        if inner:  # the components it ran inside it, each credited to the plugin that provided it
            out["nested"] = inner
        return out

    return {
        "steps": [step_info(o) for o in outcomes],
        "constraints": [{"rules": list(h.describe()), **info("constraint_handlers", type(h))}
                        for h in constraints],
        "plugins": [attrs.asdict(p) for p in registry.plugins()],
        "disclosive": disclosive,
        "metric_descriptions": descriptions,
        "host": HOST,
    }
