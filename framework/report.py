"""The Release a run returns, its JSON report and its notebook view.

The report is the transparency record of a release. It opens with the host's
verdict (one sentence: differentially private for what and under which
relation, or why not), then the recipe, every parameter of every component
(defaults included), the plugin, distribution and version of each as
recorded when the run happened (never read again from the live registry),
the ledger, the host's measurements of the released data and the
evaluations. It says whether the run was seeded and never contains the seed.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import importlib.metadata as metadata
import importlib.util
import io
import json
import pickle
import platform
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import attrs
import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from ._writing import frame_writer, write_atomically
from .accountants import file_cost
from .accounting import (
    Accountant,
    Budget,
    Ledger,
    accountant_description,
    at_least,
    at_most,
    exact,
    jsonable,
)
from .assessment import EVALUATION_COLUMNS, with_before
from .claims import ADD_REMOVE, REPLACE_ONE, relation_kind
from .coverage import COMPARED, guarantees_dp, name_text
from .dp_figures import dp_columns_note, dp_released_columns, reads_dp_columns
from .errors import PrivclustError
from .params import parameter_roles, role_rounding
from .plots import before_after
from .private_count import (
    count_free_statements,
    count_is_private,
    hide_private_count,
    records_text,
)
from .recipe import Recipe, thaw
from .verdict import SEED_ADVICE, SEEDED_ORDER
from .wording import counted

__all__ = ["EFFECTIVE_PARAMS", "EFFECTIVE_PARAMS_FROM_DATA", "Release", "environment"]

#: The key of a step result's ``diagnostics`` under which a component reports
#: the parameter values it actually used, where they differ from what the
#: recipe states (a default derived when the run starts, a value chosen by the
#: component, the nested clusterer it built): ``{name: value}``, a nested
#: component's parameters as a table (``{"clusterer": {"use": "fcm", "m": 1.5}}``)
#: or as dotted names (``"clusterer.m"``). The report shows them beside the
#: stated values.
EFFECTIVE_PARAMS = "effective_params"
"""The diagnostics key of the parameter values a step used (see above)."""
#: The same for values derived from individual original values (bounds taken
#: from the data, a distance quantile): left out of a non-disclosive report.
EFFECTIVE_PARAMS_FROM_DATA = "effective_params_from_data"
"""The diagnostics key of values in use derived from individual original
values, left out of a non-disclosive report."""

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


def _flat(params: Any, prefix: str = "") -> dict[str, Any]:
    """A parameter table with nested components as dotted names: the
    component's name under its own key, its parameters under
    ``key.parameter``."""
    out: dict[str, Any] = {}
    if not isinstance(params, Mapping):
        return out
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and "use" in value:
            out[name] = value["use"]
            out.update(_flat({k: v for k, v in value.items() if k != "use"}, name + "."))
        elif isinstance(value, Mapping):
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(jsonable(a) == jsonable(b))
    except (TypeError, ValueError):
        return False


def _shown(value: Any, how: str = "exact") -> str:
    """A parameter value as the report prints it: numbers exactly when
    ``how`` is ``"exact"`` (a privacy parameter: rounded to the nearest, 1/3
    would read 0.333333, less than the epsilon spent; and a number of no
    declared role), rounded down when it is ``"down"`` (a noise scale or
    sensitivity), else to 6 significant digits. A table's entries are shown
    as the table is (see :func:`privclust.params.role_rounding`)."""
    value = jsonable(value)
    if isinstance(value, float):
        return exact(value) if how == "exact" else at_most(value) if how == "down" else f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v, how) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_shown(v, how)}" for k, v in value.items()) + "}"
    return str(value)


def parameter_rows(stated: Mapping[str, Any], effective: Mapping[str, Any],
                   roles: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """One row per parameter, ``{"name", "value", "note"}``: the effective
    value where the component reported one, else the stated value; the note
    says where they differ ("stated: 3", "not set; derived by the
    component") and marks a parameter left unset whose value the component
    did not report ("not set: the component's default applies"), so the
    report never shows a bare null. Reported values the stated table does not
    hold (a threshold the component chose, a nested component's parameter it
    set) come last. Each number is shown by its parameter's role (``roles``, from
    :func:`privclust.params.parameter_roles`; a number without one exactly)."""
    roles = roles or {}
    flat_stated = _flat(stated)
    flat_effective = _flat(effective)
    rows = []
    for name, value in flat_stated.items():
        how = role_rounding(name, roles)
        if name in flat_effective and not _same(flat_effective[name], value):
            used = flat_effective[name]
            note = "not set; derived by the component" if value is None else f"stated: {_shown(value, how)}"
            rows.append({"name": name, "value": _shown(used, how), "note": note})
        elif value is None:
            rows.append({"name": name, "value": "not set", "note": "the component's default applies"})
        else:
            rows.append({"name": name, "value": _shown(value, how), "note": ""})
    for name, value in flat_effective.items():
        if name in flat_stated or value is None:
            continue
        row = {"name": name, "value": _shown(value, role_rounding(name, roles)),
               "note": "not stated; set by the component"}
        # beside the parameters of the same nested component (after the last row sharing its prefix)
        prefix = name.rpartition(".")[0]
        at = max((i for i, r in enumerate(rows) if prefix and (r["name"] == prefix
                                                                or r["name"].startswith(prefix + "."))),
                 default=len(rows) - 1)
        rows.insert(at + 1, row)
    return rows


@attrs.frozen(kw_only=True, eq=False)
class Release:
    """The outcome of :func:`privclust.run`.

    :ivar data: the protected DataFrame: same index, row order and column
        order as the input (aligned with it for evaluation), untouched
        columns identical, clusterer labels appended. Publish it with
        :meth:`write`, which writes the rows in a random order: in the
        input's order, whoever knows that order (or a file sorted by a
        column) links every released row to its record. It carries none
        of the input's ``attrs`` (they would be written into a Parquet
        file's metadata).
    :ivar original: the input frame (kept for evaluation and plots; it is
        never modified and never written by :meth:`report`).
    :ivar labels: the label columns released by clusterer steps.
    :ivar outcomes: each step's :class:`~privclust.StepOutcome`.
    :ivar ledger: the run's :class:`~privclust.Ledger`.
    :ivar evaluations: tidy DataFrame (evaluator, metric, value, columns).
    :ivar before: the figures of the risk evaluators measured on the original
        file (before protection), in the same form; the report shows each
        beside its value after. Of an assessment (a recipe without steps):
        the risk figures as measured.
    :ivar recipe: the recipe that ran.
    :ivar seeded: whether a seed was given (the seed itself is not kept).
    :ivar verdict: the host's one-sentence verdict on the release (see
        ``docs/accounting.md``): "ε-differentially private (...)" or "No
        differential-privacy guarantee: ...", then what the host verified.
    :ivar verification: what the host measured on the released data
        (changed columns, verbatim records, group sizes, claims checked).
    :ivar snapshot: provenance at run time (plugin, distribution and version
        of every component; the installed plugins); the report reads it, never
        the live registry.
    :ivar random_steps: the indices of the steps that drew from the run's
        randomness (under a seed, their random choices can be redrawn).
    :ivar publication_order: the order :meth:`write` and ``privclust run``
        write the rows in: a random permutation drawn from the run's
        randomness when the run ends (positions in :attr:`data`).

    A Release pickles (``pickle.dumps(release)``) without its registry; note
    that it holds the **original** data (``original``) as well as the
    protected data: treat a pickled Release as confidential.
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
    verdict: str = ""
    verification: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    snapshot: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    #: the indices of the steps that drew from the run's randomness
    random_steps: tuple[int, ...] = ()
    #: the risk figures on the original file (:mod:`privclust.assessment`)
    before: pd.DataFrame = attrs.field(factory=lambda: pd.DataFrame(columns=EVALUATION_COLUMNS), repr=False)
    #: the order the released rows are written in (see the class docstring)
    publication_order: np.ndarray | None = attrs.field(default=None, repr=False, eq=False)

    def __reduce__(self):
        """Pickle without the registry (a live plugin manager); every part of
        the report comes from the run-time snapshot."""
        for o in self.outcomes:  # name the culprit rather than fail deep inside pickle
            for what, part in (("component", o.component), ("result", o.result)):
                try:
                    pickle.dumps(part)
                except Exception as err:  # any failure of third-party objects
                    raise PrivclustError(
                        f"this Release cannot be pickled: the {what} of step {o.index} ({o.id}, {o.name}) holds an "
                        f"object that does not pickle ({type(err).__name__}: {err}); save release.data and "
                        "release.to_json() instead, or report it to the plugin's authors") from None
        try:
            pickle.dumps(self.accountant)
        except Exception as err:
            raise PrivclustError(f"this Release cannot be pickled: its accountant "
                                 f"{type(self.accountant).__name__} does not pickle ({type(err).__name__}: {err})"
                                 ) from None
        values = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        values["registry"] = None
        values["recipe"] = self.recipe.to_dict()  # its read-only mappings do not pickle; rebuilt on load
        return (_restore_release, (values,))

    @property
    def guarantee(self) -> str:
        """The same as :attr:`verdict`."""
        return self.verdict

    def write(self, path: Any, *, keep_order: bool = False) -> None:
        """Write the protected data to ``path`` (CSV, TSV, ``.gz`` or
        Parquet, by its suffix; atomically: a failure leaves nothing), as
        ``privclust run`` writes it: the rows in :attr:`publication_order`,
        a random order, with no index. ``keep_order=True`` writes them in the
        input's order, which links each row to its record for whoever knows
        that order."""
        target = Path(path)
        write_atomically([(target, frame_writer(self.data, target, None if keep_order else self.publication_order))])

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
    def dp_guarantee(self) -> bool:
        """Whether the verdict is a differential-privacy guarantee."""
        return guarantees_dp(self.ledger.entries, self.accountant, self.outcomes, self.verification)

    @property
    def spent(self) -> tuple[float, float]:
        """The (epsilon, delta) the run spent, as the accountant composes it."""
        return self.accountant.total(self.ledger.entries)

    @property
    def file_spent(self) -> tuple[float, float]:
        """The (epsilon, delta) :attr:`spent` as it holds for the released
        file, the figure the verdict states and the budget bounds: an
        add/remove total counts twice under replace-one, since the file
        shows its number of records (:func:`privclust.accountants.file_cost`)."""
        return file_cost(*self.spent, self._relation())

    def evaluation(self, metric: str, evaluator: str | None = None) -> float:
        """One figure of the evaluations table."""
        rows = self.evaluations[self.evaluations["metric"] == metric]
        if evaluator is not None:
            rows = rows[rows["evaluator"] == evaluator]
        if rows.empty:
            raise PrivclustError(f"no evaluation named {metric!r}; metrics: {', '.join(self.evaluations['metric'])}")
        return float(rows["value"].iloc[0])

    # -- the report -----------------------------------------------------------------------

    def components(self, *, non_disclosive: bool = False) -> list[dict[str, Any]]:
        """Every component applied, with every parameter and its provenance.

        ``parameters`` are the stated values (the recipe's, and every default
        of the component's class); ``effective_parameters`` the values the
        component reported using (under the diagnostics key
        :data:`EFFECTIVE_PARAMS`, and :data:`EFFECTIVE_PARAMS_FROM_DATA`
        unless ``non_disclosive``); ``clusters`` the number of clusters (or
        groups) of the step's partition: its centres when it has them, else
        the distinct labels in use; ``elapsed_seconds`` the step's run time,
        left out when ``non_disclosive`` (a run time is a function of the
        data, a timing side channel no differential-privacy statement
        covers).
        """
        out = []
        for o in self.outcomes:
            cls = type(o.component)
            entry = {
                "step": o.index,
                "id": o.id,
                "role": o.kind,
                "component": cls.name,
                "parameters": thaw(o.params),
                "effective_parameters": self._effective(o, non_disclosive),
                "columns": list(o.columns),
            }
            if not non_disclosive:  # a run time is a function of the data: a timing side channel
                entry["elapsed_seconds"] = round(o.elapsed, 6)
            if o.output:
                entry["output"] = o.output
            partition = o.partition
            if partition is not None:
                # the clusters the step formed: its centres when it has them (a DP map's clusters are a
                # figure of the map, whichever of them records fall in), else the labels in use
                entry["clusters"] = int(np.asarray(partition.centres).shape[0]) if partition.centres is not None \
                    else int(partition.n_clusters)
            entry.update(self._provenance(o.index))
            out.append(entry)
        return out

    @staticmethod
    def _effective(outcome: Any, non_disclosive: bool) -> dict[str, Any]:
        """The parameter values a step reported using (see :data:`EFFECTIVE_PARAMS`)."""
        diagnostics = outcome.diagnostics or {}
        out: dict[str, Any] = {}
        for key in (EFFECTIVE_PARAMS, EFFECTIVE_PARAMS_FROM_DATA):
            reported = diagnostics.get(key)
            if isinstance(reported, Mapping):
                if non_disclosive and key == EFFECTIVE_PARAMS_FROM_DATA:  # named, never shown
                    out.update({str(name): WITHHELD_VALUE for name in reported})
                else:
                    out.update(jsonable(thaw(reported)))
        return out

    def effective_changes(self, *, non_disclosive: bool = False) -> list[tuple[Any, list[dict[str, str]]]]:
        """Per step, the parameters whose value in use differs from the
        stated one (defaults derived or chosen by the component); without
        those taken from the data when ``non_disclosive``."""
        out = []
        for o in self.outcomes:
            rows = [r for r in parameter_rows(thaw(o.params), self._effective(o, non_disclosive),
                                              parameter_roles(o.component)) if r["note"]
                    and r["value"] != "not set"]
            if rows:
                out.append((o, rows))
        return out

    def _provenance(self, index: int) -> dict[str, str]:
        """The plugin, distribution and version of step ``index`` when it ran."""
        steps = self.snapshot.get("steps", ())
        if index < len(steps):
            return dict(steps[index])
        return {"plugin": "?", "distribution": "?", "version": "?"}

    def report(self, *, non_disclosive: bool = False) -> dict[str, Any]:
        """A JSON-serialisable record of everything applied (see the module
        docstring). Never contains the seed.

        :param non_disclosive: leave out everything derived from individual
            original values, for publication beside the data: the ledger
            entries' details (they may hold data-derived bounds or maxima),
            the figures evaluators mark as disclosive (every evaluation
            figure when the verdict is a DP guarantee), the statements of
            the steps that took parameters from the data, the values in use
            derived from the data, and the steps' run times. What was left
            out is listed under ``left_out``.
        """
        eps, delta = self.file_spent
        ledger = self.ledger.to_records()
        evaluations = [
            {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
            for row in self.evaluations.to_dict(orient="records")
        ]
        evaluations = with_before(evaluations, self.before)
        for row in evaluations:
            described = self.metric_description(row["evaluator"], row["metric"])
            if described is not None:
                row["explanation"], row["unit"] = described
        left_out: list[str] = []
        if non_disclosive:
            if public_ledger(ledger, self.ledger.entries):
                left_out.append(WITHHELD_NOTE)
            disclosive = self._disclosive_metrics()
            kept = [e for e in evaluations if (e["evaluator"], e["metric"]) not in disclosive]
            if evaluations and self.dp_guarantee:  # no figure of the original data beside a DP release
                kept = []
                left_out.append(DP_EVALUATIONS_NOTE)
            elif evaluations and count_is_private(self.ledger.entries):  # the count is private: so are figures of it
                kept = []
                left_out.append(COUNT_EVALUATIONS_NOTE)
            else:
                if len(kept) != len(evaluations):
                    left_out.append("evaluation figures derived from individual original values: " + ", ".join(
                        f"{e['evaluator']}.{e['metric']}" for e in evaluations if e not in kept))
                # a release that is not DP as a whole may still have DP columns: no figure of their originals
                dp_columns = dp_released_columns(self.ledger.entries, self.outcomes)
                names = self._names()
                on_dp = [e for e in kept if reads_dp_columns(e.get("columns"), dp_columns, names)]
                if on_dp:
                    kept = [e for e in kept if e not in on_dp]
                    left_out.append(dp_columns_note(on_dp, dp_columns))
            evaluations = kept
            left_out.append("the details of ledger entries (they may hold values taken from the data)")
            left_out.append(RUN_TIMES_NOTE)
            if any(self._effective(o, True) != self._effective(o, False) for o in self.outcomes):
                left_out.append(FROM_DATA_NOTE)
        rep = {
            **report_head(self, non_disclosive),
            "data": {"records": int(self.data.shape[0]), "columns": [str(c) for c in self.original.columns],
                     "label_columns": [str(c) for c in self.labels.columns]},
            "steps": self.components(non_disclosive=non_disclosive),
            "constraints": [dict(c) for c in self.snapshot.get("constraints", ())],
            "privacy": {
                "budget": {"epsilon": self.budget.epsilon, "delta": self.budget.delta},
                "spent": {"epsilon": eps, "delta": delta},
                "accountant": accountant_description(self.accountant),
                "relation": self._file_relation(),
            },
            "verification": reported_checks(self.verification),
            "ledger": ledger,
            "evaluations": evaluations,
            "seeded": self.seeded,
            "plugins": [dict(p) for p in self.snapshot.get("plugins", ())],
            "environment": environment(),
        }
        if non_disclosive:
            rep["left_out"] = left_out
            hide_private_count(rep, self)
        return jsonable(rep)

    def _file_relation(self) -> str | None:
        """The relation :attr:`file_spent` holds under: replace-one for an
        add/remove total (counted twice), else the accountant's."""
        relation = self._relation()
        return REPLACE_ONE if relation is not None and relation_kind(relation) == ADD_REMOVE else relation

    def _relation(self) -> str | None:
        """The neighbouring relation the spent total holds under, if the
        accountant says."""
        relation = getattr(self.accountant, "relation", None)
        return relation(self.ledger.entries) if callable(relation) else None

    def metric_description(self, evaluator: str, metric: str) -> tuple[str, str] | None:
        """``(explanation, unit)`` of one figure, as its evaluator declares
        it (class attribute ``metric_descriptions``: metric names or
        shell-style patterns; the first match wins), or ``None``."""
        declared = self.snapshot.get("metric_descriptions", {}).get(evaluator, {})
        if metric in declared:
            return tuple(declared[metric])  # type: ignore[return-value]
        for pattern, described in declared.items():
            if fnmatchcase(metric, pattern):
                return tuple(described)  # type: ignore[return-value]
        return None

    def _names(self) -> set[str]:
        """Every column name an evaluation can be computed on: the input's,
        the released file's and the label columns."""
        return {str(c) for frame in (self.original, self.data, self.labels) for c in frame.columns}

    def _disclosive_metrics(self) -> set[tuple[str, str]]:
        """(evaluator, metric) pairs the evaluators declare as derived from
        individual original values: their class attribute
        ``disclosive_metrics`` holds metric names or shell-style patterns."""
        out = set()
        patterns = self.snapshot.get("disclosive", {})
        for name, metric in zip(self.evaluations["evaluator"], self.evaluations["metric"], strict=True):
            if any(fnmatchcase(metric, pattern) for pattern in patterns.get(name, ())):
                out.add((name, metric))
        return out

    def to_json(self, *, non_disclosive: bool = False, **kwargs: Any) -> str:
        return json.dumps(self.report(non_disclosive=non_disclosive), indent=2, **kwargs)

    # -- notebook view -----------------------------------------------------------------------

    def used_text(self, *, non_disclosive: bool = False) -> str:
        """One sentence per step whose values in use differ from the stated
        ones: ``"Step 0 (fuzzy-microaggregation) reports using c = 4, m1 =
        1.5."`` (the repr and the summary of ``privclust run`` show it). The
        values are the step's own report (its diagnostics), not something
        the host checked: the ledger says what each step spent.
        ``non_disclosive`` leaves out the values taken from the data."""
        return " ".join(f"Step {o.index} ({o.name}) reports using {_used(rows)}."
                        for o, rows in self.effective_changes(non_disclosive=non_disclosive))

    def __repr__(self) -> str:
        used = self.used_text() + " " if self.effective_changes() else ""
        return (f"<Release {counted(self.data.shape[0], 'record')} x {counted(self.data.shape[1], 'column')}, "
                f"{counted(len(self.outcomes), 'step')}, {counted(len(self.evaluations), 'evaluation')}. "
                f"{used}{self.verdict}>")

    def _repr_html_(self) -> str:
        """The notebook view: the same content as the standalone report."""
        return render_html(self, plots=True)

    def to_html(self, *, non_disclosive: bool = False, plots: bool = True) -> str:
        """The release report as a standalone HTML page (plots embedded).

        :param non_disclosive: leave out everything derived from individual
            original values (see :meth:`report`), the data preview and the
            distribution plots, for publication beside the data.
        :param plots: draw the plots (needs matplotlib).
        """
        body = render_html(self, non_disclosive=non_disclosive, plots=plots)
        page = templates().get_template("page.html.j2")
        return page.render(title=self.recipe.name or "privclust release", body=Markup(body)) + "\n"


def _used(rows: list[dict[str, str]], most: int = 6) -> str:
    """``"c = 4, clusterer.m = 1.5"`` (at most ``most`` values, then how many more)."""
    text = ", ".join(f"{r['name']} = {r['value']}" for r in rows[:most])
    return text + (f" and {len(rows) - most} more" if len(rows) > most else "")


#: What a non-disclosive report shows in place of a statement of a step that
#: took parameters from the data.
WITHHELD = ("left out of this non-disclosive report: step {step} took parameters from the data (its leak entries "
            "name them), and its statements may state their values")


def public_statements(entries: Sequence[Any]) -> dict[int, str]:
    """For a non-disclosive report, by ledger ``seq``: the statements to show
    in place of the components' own for every step that recorded a leak. Such
    a step took a parameter from the data (bounds, a distance quantile), and
    its statements may state the value (the sensitivity "the column ranges
    {a: 123449}", "d_c = 0.2967 is the 2% quantile"); a leak entry keeps its
    name only. The host's own measurements and checks are kept (their typed
    origin, never their text, says they are the host's): they state no
    parameter. The host's record of a step (a ``process`` entry) quotes the
    step's parameters and is withheld like the step's own."""
    leaky = {e.step for e in entries if e.kind == "leak" and e.step is not None}
    out: dict[int, str] = {}
    for e in entries:
        if e.step not in leaky or (e.by_host and e.kind != "process"):
            continue
        if e.kind == "leak":
            out[e.seq] = (f"{e.mechanism or 'a parameter'}: taken from the data, outside the differential-privacy "
                          "guarantee (its value is left out of this non-disclosive report)")
        else:
            out[e.seq] = f"{e.component or 'a component'}: {WITHHELD.format(step=e.step)}"
    return out


#: What a non-disclosive report says it left out: the steps' run times (``elapsed_seconds``).
RUN_TIMES_NOTE = ("the run times of the steps (a run time is a function of the data: a timing side channel that "
                  "no differential-privacy statement covers)")
#: What a non-disclosive report says it left out when it withheld statements.
WITHHELD_NOTE = "the statements of the steps that took parameters from the data (they may state the values)"
#: A value in use taken from the data, in a non-disclosive report (its name stays, its value does not).
WITHHELD_VALUE = "withheld (derived from the data)"
#: What a non-disclosive report says it left out when steps reported values in use taken from the data.
FROM_DATA_NOTE = ("the values in use the steps derived from individual original values (e.g. bounds or a d_c taken "
                  "from the data)")


def spent_text(has_dp: bool, guarantee: bool, epsilon: float, delta: float) -> str:
    """The report's sentence on the budget spent: a cost of differentially
    private releases only when the verdict is a DP guarantee."""
    if not has_dp:
        return "No differentially private release"
    if guarantee:
        return (f"Differentially private releases cost epsilon {at_least(epsilon, 6)}, delta {at_least(delta, 3)} "
                "together")
    return (f"The steps' noise mechanisms charged epsilon {at_least(epsilon, 6)}, delta {at_least(delta, 3)} together, "
            "but the release has no differential-privacy guarantee (see the verdict)")


#: Beside a differentially private release: the evaluation figures read the original data and are not DP.
DP_EVALUATIONS_NOTE = ("the evaluation figures (they are computed from the original data, and are not differentially "
                       "private: published beside a differentially private release they would release what its DP "
                       "statements do not cover)")
#: Why a non-disclosive report leaves the evaluations out when the number of records is private (under add/remove).
COUNT_EVALUATIONS_NOTE = ("the evaluation figures (the number of records is private under add/remove, and they are "
                          "computed from the records: many count them, such as dbrl's linked records or sse-sst's "
                          "total sum of squares)")
#: The full report's sentence above them.
DP_EVALUATIONS_WARNING = ("These figures are computed from the original data as well as the released data: they are "
                          "not differentially private and the verdict's DP statements do not cover them. The "
                          "non-disclosive report leaves them out.")


def seeded_text(seeded: bool) -> str:
    """The report's line on the run's randomness (never the seed itself)."""
    if not seeded:
        return "no (entropy from the operating system)"
    # the verdict's seeded sentence in short (SEEDED_CAVEAT, seeded_draws): the same draws, the same advice
    return (f"yes (the seed is not recorded; whoever has it can redraw the run's random choices, its noise included, "
            f"and {SEEDED_ORDER}: {SEED_ADVICE})")


def public_ledger(records: list[dict[str, Any]], entries: Sequence[Any]) -> bool:
    """Make the ledger ``records`` (``Ledger.to_records()`` of ``entries``)
    non-disclosive in place: no details, and the statements of the steps
    that took parameters from the data withheld (:func:`public_statements`,
    their sensitivity and claim cleared). Whether any statement was withheld."""
    withheld = public_statements(entries)
    for entry in records:
        entry.pop("details", None)
        if entry["seq"] in withheld:
            entry["statement"] = withheld[entry["seq"]]
            for key in ("sensitivity", "claim"):
                entry[key] = None
    return bool(withheld)


def reported_checks(checks: Mapping[str, Any]) -> dict[str, Any]:
    """The host's measurements as a report shows them: in a differentially
    private release, without the counts that compare released with original
    values (``release.verification`` keeps them for the caller)."""
    out = dict(checks)
    if out.get("dp_release"):
        for key in COMPARED:
            out.pop(key, None)
        out["steps"] = [{k: v for k, v in s.items() if k not in COMPARED} for s in out.get("steps", ())]
    return out


def report_head(release: Any, non_disclosive: bool) -> dict[str, Any]:
    """The fields every report opens with (a :class:`Release`'s, a dataset
    release's): the verdict first, the report format, when, and the recipe."""
    return {"verdict": release.verdict, "privclust_report": 1, "created": release.created,
            "non_disclosive": non_disclosive, "recipe": release.recipe.to_dict()}


def _preview(release: Any) -> pd.DataFrame:
    """The report's ten rows of the released data, in the order the file is written in (its first ten rows unless
    it was written with ``keep_order``)."""
    order = getattr(release, "publication_order", None)
    return release.data.head(10) if order is None else release.data.iloc[np.asarray(order[:10], dtype=np.intp)]


def _restore_release(values: dict[str, Any]) -> Release:
    values = dict(values)
    values["recipe"] = Recipe.from_dict(values["recipe"])
    return Release(**values)


@functools.cache
def templates() -> jinja2.Environment:
    """The report's Jinja2 templates (package data of privclust), autoescaped."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("privclust", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = _fmt
    return env


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(jsonable(value))
    return str(value)


def _png(figure: Any) -> str:
    """The figure (one pyplot does not manage) as base64 PNG data."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def _plots(release: Release) -> dict[str, Any]:
    """The distribution plots: ``{"missing": True}`` without matplotlib,
    ``{"png": ""}`` when the release has nothing to plot."""
    if importlib.util.find_spec("matplotlib") is None:  # an optional dependency (privclust[plots])
        return {"missing": True, "png": ""}
    try:  # a figure pyplot does not manage: the notebook's backend is left alone and nothing is shown
        axes = before_after(release, detached=True)
    except PrivclustError:
        return {"missing": False, "png": ""}
    figure = np.asarray(axes).ravel()[0].figure
    figure.suptitle("Distributions: original and released", fontsize=10)
    return {"missing": False, "png": _png(figure)}


def by_evaluator(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Evaluation rows grouped by evaluator and columns, in order: the
    report names each group's columns once, not on every metric."""
    groups: list[dict[str, Any]] = []
    for row in rows:
        columns = row.get("columns")
        columns = ", ".join(columns) if isinstance(columns, list | tuple) else (columns or "")
        if not groups or (groups[-1]["evaluator"], groups[-1]["columns"]) != (row["evaluator"], columns):
            groups.append({"evaluator": row["evaluator"], "columns": columns, "rows": []})
        groups[-1]["rows"].append({"metric": row["metric"], "value": row["value"], "unit": row.get("unit", ""),
                                   "explanation": row.get("explanation", ""), "before": row.get("before")})
    return groups


def ledger_sections() -> list[tuple[str, Any]]:
    """The report's sections of the ledger: a title and which entries it
    shows. Each step's own process entry is in the table of processes; what
    the host did besides (rounding integer columns, missing values) is listed
    with the host's other statements."""
    sections: list[tuple[str, Any]] = [(_kind_title(kind), lambda e, kind=kind: e.kind == kind)
                                       for kind in ("dp", "guarantee", "leak")]
    sections.append(("Processing by the host (after or around the steps)",
                     lambda e: e.kind == "process" and e.mechanism is not None))
    sections.append((_kind_title("verified"), lambda e: e.kind == "verified"))
    return sections


def _kind_title(kind: str) -> str:
    return {"dp": "Differential privacy (the components' statements, composed by the run's accountant)",
            "guarantee": "Other guarantees (claims, and the host's check)",
            "leak": "Weaknesses (leaks)", "process": "Processes applied",
            "verified": "Measured by the host on the released data"}[kind]


def render_html(release: Release, *, non_disclosive: bool = False, plots: bool = False) -> str:
    """The body of the release report: the same content in a notebook and in
    the standalone page (templates/release.html.j2)."""
    report = release.report(non_disclosive=non_disclosive)
    withheld = public_statements(release.ledger.entries) if non_disclosive else {}
    if non_disclosive and count_is_private(release.ledger.entries):  # the host's counts out (decision 24)
        withheld = {**count_free_statements(release.ledger.entries), **withheld}
    eps, delta = release.file_spent
    twice = release.file_spent != release.spent
    budget = release.budget
    has_dp = any(e.kind == "dp" for e in release.ledger)
    groups = by_evaluator(report["evaluations"])
    roles = {o.index: parameter_roles(o.component) for o in release.outcomes}
    context = {
        "title": release.recipe.name or "privclust release",
        "verdict": report["verdict"],
        "description": release.recipe.description.strip() if release.recipe.description else None,
        "records_text": records_text(release, non_disclosive),
        "columns_text": counted(release.data.shape[1], "column"),
        "dp_text": spent_text(has_dp, release.dp_guarantee, eps, delta) + (
            " (the steps' add/remove releases counted twice: the released file shows its number of records, so they "
            "hold for it under replace-one)" if twice else ""),
        "evaluations_warning": DP_EVALUATIONS_WARNING if release.dp_guarantee and report["evaluations"] else None,
        "budget_text": ("none declared" if budget.epsilon is None
                        else f"epsilon {exact(budget.epsilon)}, delta {exact(budget.delta)}"),
        "accountant": report["privacy"]["accountant"],
        "seeded": seeded_text(release.seeded),
        "created": release.created,
        "non_disclosive": non_disclosive,
        "left_out": report.get("left_out", []) + ["the data preview and the distribution plots"],
        "steps": [{"step": c["step"], "id": c["id"], "component": c["component"],
                   "role": c["role"].rstrip("s").replace("_", " "), "columns": ", ".join(c["columns"]),
                   "parameters": parameter_rows(c["parameters"], c["effective_parameters"],
                                                roles.get(c["step"])),
                   "clusters": c.get("clusters"),
                   # names quoted unless plain tokens (coverage.name_text): nothing in a plugin's name reads as ours
                   "plugin": f"plugin {name_text(c['plugin'])} ({name_text(c['distribution'])} "
                             f"{name_text(c['version'])})" + "".join(
                       f"; its {name_text(where)} {name_text(n['component'])} by plugin {name_text(n['plugin'])} "
                       f"({name_text(n['distribution'])} {name_text(n['version'])})"
                       for where, n in (c.get("nested") or {}).items()),
                   "seconds": (f"{c['elapsed_seconds']:.3g}" if "elapsed_seconds" in c else None)}
                  for c in report["steps"]],
        "rules": [r for c in report["constraints"] for r in c["rules"]],
        "ledger": [{"title": title,
                    "entries": [{"step": e.step, "step_id": e.step_id or "",
                                 "statement": withheld.get(e.seq, e.statement)}
                                for e in release.ledger if shown(e)]}
                   for title, shown in ledger_sections() if any(shown(e) for e in release.ledger)],
        "roles": [(role, ", ".join(getattr(release.recipe.roles, role)))
                  for role in ("ids", "weight", "strata", "keys") if getattr(release.recipe.roles, role)],
        "has_dp": has_dp,
        "evaluations": groups,
        # a column of figures on the original (risk before protection) when some figure has one
        "before_column": any("before" in r for r in report["evaluations"])
        and not release.verification.get("assessment"),
        "assessment": bool(release.verification.get("assessment")),
        # what the page says when it shows no figure: a recipe with evaluators whose figures were all left out
        # (a non-disclosive report of a DP release) read "No evaluators in the recipe."
        "evaluators": ", ".join(dict.fromkeys(spec.use for spec in release.recipe.evaluate)),
        # the columns once, above the table, when every evaluator judged the same ones
        "evaluation_columns": (groups[0]["columns"] if len(groups) > 1 and groups[0]["columns"]
                               and all(g["columns"] == groups[0]["columns"] for g in groups) else ""),
        "plots": _plots(release) if plots and not non_disclosive else None,
        # pandas escapes the labels and values it writes; the frame's markup is kept as is
        # ten rows as the file is written (publication_order), without the input's index: numbered by their input
        # positions, they gave back the link the random order removes (a red-team audit)
        "preview": (None if non_disclosive else Markup(_preview(release).to_html(
            index=False, float_format=lambda v: f"{v:.6g}"))),
        "versions": ", ".join(f"{k} {v}" for k, v in report["environment"].items()),
        "plugins": [{"plugin": p["name"], "distribution": p["distribution"], "version": p["version"]}
                    for p in report["plugins"]],
    }
    return templates().get_template("release.html.j2").render(context)
