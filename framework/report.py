"""The Release a run returns, its JSON report and its notebook view.

The report is the transparency record of a release: the recipe, every
parameter of every component (defaults included), the package and plugin
versions, the ledger and the evaluations. It says whether the run was seeded
and never contains the seed.
"""

from __future__ import annotations

import datetime as _dt
import html
import importlib.metadata as metadata
import json
import platform
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import pandas as pd

from .accounting import Accountant, Budget, Ledger, _jsonable
from .errors import PrivclustError
from .recipe import Recipe, _thaw

__all__ = ["Release", "environment"]

_LIBRARIES = ("numpy", "scipy", "pandas", "scikit-learn", "attrs", "pluggy")


def environment() -> dict[str, str]:
    """Versions of Python, privclust and the numerical libraries."""
    out = {"python": platform.python_version()}
    for name in ("privclust", *_LIBRARIES):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


@attrs.frozen(kw_only=True, eq=False)
class Release:
    """The outcome of :func:`privclust.run`.

    :ivar data: the protected DataFrame: same index and column order as the
        input, untouched columns identical, clusterer labels appended.
    :ivar original: the input frame (kept for evaluation and plots; it is
        never modified and never written by :meth:`report`).
    :ivar labels: the label columns released by clusterer steps.
    :ivar outcomes: each step's :class:`~privclust.StepOutcome`.
    :ivar ledger: the run's :class:`~privclust.Ledger`.
    :ivar evaluations: tidy DataFrame (evaluator, metric, value, columns).
    :ivar recipe: the recipe that ran.
    :ivar seeded: whether a seed was given (the seed itself is not kept).
    """

    data: pd.DataFrame
    original: pd.DataFrame = attrs.field(repr=False)
    labels: pd.DataFrame
    outcomes: tuple[Any, ...]
    ledger: Ledger
    evaluations: pd.DataFrame
    recipe: Recipe
    seeded: bool
    budget: Budget
    accountant: Accountant = attrs.field(repr=False)
    registry: Any = attrs.field(repr=False)
    created: str = attrs.field(factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    # -- access ---------------------------------------------------------------------

    def step(self, key: int | str) -> Any:
        """A step's outcome by position or id."""
        if isinstance(key, int):
            return self.outcomes[key]
        for o in self.outcomes:
            if o.id == key:
                return o
        raise PrivclustError(f"no step has id {key!r}; ids: {', '.join(o.id for o in self.outcomes)}")

    @property
    def spent(self) -> tuple[float, float]:
        """The (epsilon, delta) the run spent, as the accountant composes it."""
        return self.accountant.total(self.ledger.entries)

    def evaluation(self, metric: str, evaluator: str | None = None) -> float:
        """One figure of the evaluations table."""
        rows = self.evaluations[self.evaluations["metric"] == metric]
        if evaluator is not None:
            rows = rows[rows["evaluator"] == evaluator]
        if rows.empty:
            raise PrivclustError(f"no evaluation named {metric!r}; metrics: {', '.join(self.evaluations['metric'])}")
        return float(rows["value"].iloc[0])

    # -- the report -----------------------------------------------------------------------

    def components(self) -> list[dict[str, Any]]:
        """Every component applied, with every parameter and its provenance."""
        out = []
        for o in self.outcomes:
            cls = type(o.component)
            entry = {
                "step": o.index,
                "id": o.id,
                "role": o.kind,
                "component": cls.name,
                "parameters": _thaw(o.params),
                "columns": list(o.columns),
                "elapsed_seconds": round(o.elapsed, 6),
            }
            if o.output:
                entry["output"] = o.output
            entry.update(self._provenance(o.kind, cls.name))
            out.append(entry)
        return out

    def _provenance(self, kind: str, name: str) -> dict[str, str]:
        try:
            info = self.registry.info(kind, name)
        except PrivclustError:
            return {"plugin": "?", "distribution": "?", "version": "?"}
        return {"plugin": info.plugin, "distribution": info.distribution, "version": info.version}

    def report(self) -> dict[str, Any]:
        """A JSON-serialisable record of everything applied (see the module
        docstring). Never contains the seed."""
        eps, delta = self.spent
        rep = {
            "privclust_report": 1,
            "created": self.created,
            "recipe": self.recipe.to_dict(),
            "data": {"records": int(self.data.shape[0]), "columns": [str(c) for c in self.original.columns],
                     "label_columns": [str(c) for c in self.labels.columns]},
            "steps": self.components(),
            "constraints": [
                {"rules": list(h.describe()), **self._provenance("constraint_handlers", type(h).name)}
                for h in self._constraint_handlers()
            ],
            "privacy": {
                "budget": {"epsilon": self.budget.epsilon, "delta": self.budget.delta},
                "spent": {"epsilon": eps, "delta": delta},
                "accountant": getattr(self.accountant, "description", type(self.accountant).__name__),
            },
            "ledger": self.ledger.to_records(),
            "evaluations": [
                {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
                for row in self.evaluations.to_dict(orient="records")
            ],
            "seeded": self.seeded,
            "plugins": [attrs.asdict(p) for p in self.registry.plugins()],
            "environment": environment(),
        }
        return _jsonable(rep)

    def _constraint_handlers(self) -> list[Any]:
        handlers = []
        for spec in self.recipe.constraints:
            try:
                handlers.append(self.registry.create("constraint_handlers", spec))
            except PrivclustError:
                continue
        return handlers

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.report(), indent=2, **kwargs)

    # -- notebook view -----------------------------------------------------------------------

    def __repr__(self) -> str:
        eps, _ = self.spent
        return (f"<Release {self.data.shape[0]} records x {self.data.shape[1]} columns, "
                f"{len(self.outcomes)} steps, epsilon spent {eps:g}, {len(self.evaluations)} evaluations>")

    def _repr_html_(self) -> str:
        return render_html(self)

    def to_html(self) -> str:
        """A standalone HTML page of the release's report."""
        title = html.escape(self.recipe.name or "privclust release")
        return (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{title}</title><style>{_CSS}</style></head><body>"
            f"{render_html(self)}</body></html>\n"
        )


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;"
    "text-align:left;vertical-align:top;font-size:.9em}th{background:#f3f3f3}"
)


def _table(rows: list[Mapping[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f"<table class='privclust'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(_jsonable(value))
    return str(value)


def render_html(release: Release) -> str:
    """The notebook view of a release: steps, ledger, evaluations, a preview."""
    eps, delta = release.spent
    budget = release.budget
    budget_text = "none declared" if budget.epsilon is None else f"epsilon {budget.epsilon:g}, delta {budget.delta:g}"
    steps = _table(
        [{"step": c["step"], "id": c["id"], "component": c["component"], "role": c["role"].rstrip("s"),
          "columns": ", ".join(c["columns"]), "parameters": c["parameters"], "plugin": c["plugin"],
          "seconds": c["elapsed_seconds"]} for c in release.components()],
        ["step", "id", "component", "role", "columns", "parameters", "plugin", "seconds"],
    )
    ledger = _table(
        [{"kind": e.kind, "step": e.step_id or "", "epsilon": e.epsilon if e.kind == "dp" else None,
          "statement": e.statement} for e in release.ledger if e.kind != "process"],
        ["kind", "step", "epsilon", "statement"],
    )
    evaluations = release.evaluations.to_html(index=False, float_format=lambda v: f"{v:.6g}") \
        if len(release.evaluations) else "<p><em>No evaluators in the recipe.</em></p>"
    preview = release.data.head(10).to_html(float_format=lambda v: f"{v:.6g}")
    seeded = "yes (the seed is not recorded)" if release.seeded else "no (entropy from the operating system)"
    title = html.escape(release.recipe.name or "privclust release")
    return (
        "<div class='privclust-release'>"
        f"<h3>{title}</h3>"
        f"<p>{release.data.shape[0]} records, {release.data.shape[1]} columns. "
        f"Privacy spent: epsilon {eps:.6g}, delta {delta:.3g} (budget: {budget_text}). Seeded: {seeded}.</p>"
        f"<h4>Steps</h4>{steps}<h4>Ledger</h4>{ledger}<h4>Evaluations</h4>{evaluations}"
        f"<h4>Protected data (first rows)</h4>{preview}</div>"
    )
