"""Protecting a partitioned Parquet dataset stratum by stratum.

:func:`run_dataset` protects a file too large for one process: a Parquet
dataset (one file, or a folder of Parquet files, either directly in the
folder with the stratum columns inside them or, for the least memory,
partitioned by the stratum columns in the Hive layout
``region=north/part-0.parquet``; the files' footers must make one schema,
:func:`_found`) is read one stratum at a time by
independent tasks on local processes or a Dask cluster (the engines of
:mod:`privclust.engines`). Each task runs the whole recipe on its stratum, as
:func:`privclust.run` would on that stratum alone, and writes its released
records into the output dataset (partitioned the same way); it sends back
only its ledger, its checks and its figures. No process holds the whole
file: the driver reads the stratum columns only.

The host then writes one ledger and one verdict for the whole release: the
strata are disjoint by construction, so the DP releases of different strata
compose in parallel; the checks (records released verbatim, groups of
identical rows, claims) are summed or minimised over the strata, since a group
never crosses a stratum. Evaluation figures are per stratum (a figure of the
whole file would need the whole file in one process).

The output appears all at once: the tasks write into a temporary folder
beside it, renamed to the output when every stratum is done and the whole
release (one ledger, the budget check, the verdict) has been made; on any
error (or Ctrl-C), those last steps included, the temporary folder is removed
and nothing is written.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pandas as pd
from markupsafe import Markup

from ._optional import optional
from ._signals import raise_if_stopped, signals_held
from .accounting import Budget, Ledger, PrivacyContext, accountant_description, exact, jsonable
from .compiling import CompiledRecipe, compile, spends_privacy
from .coverage import COMPARED, guarantees_dp
from .defaults import CODE_MAX_DISTINCT, CODE_RECORDS_PER_VALUE, default_step_columns
from .engines import map_tasks
from .errors import DataError, ParameterError, PrivclustError
from .handover import Handover, handed, received, worker_registry
from .kanonymity import DEFAULT_KEY_K, UNDECIDED_MATCHING, k_check, key_figures
from .preflight import preflight, strata_parts, strata_statement
from .recipe import Recipe
from .registry import Registry
from .report import (
    DP_EVALUATIONS_WARNING,
    FROM_DATA_NOTE,
    RUN_TIMES_NOTE,
    WITHHELD_NOTE,
    by_evaluator,
    counted,
    environment,
    ledger_sections,
    public_ledger,
    public_statements,
    report_head,
    reported_checks,
    seeded_text,
    spent_text,
    templates,
)
from .runner import run_checked
from .verdict import random_step_names, verdict
from .verify import claimed_in, merged_claim

__all__ = ["DatasetRelease", "run_dataset"]

#: What to install for Parquet datasets.
PARQUET = "reading and writing Parquet datasets needs pyarrow: pip install 'privclust[parquet]'"


@attrs.frozen(kw_only=True)
class DatasetRelease:
    """What :func:`run_dataset` released: the output dataset and, for the
    whole release, the ledger, the verdict and the host's checks; the
    evaluation figures of each stratum (column ``stratum``).

    :ivar path: the output dataset (a folder of Parquet files, partitioned by
        the stratum columns).
    :ivar strata: each stratum (as text) and its number of records.
    :ivar merged: the strata joined under ``small_strata = "merge"``.
    """

    path: Path
    strata: Mapping[str, int]
    merged: tuple[str, ...]
    recipe: Recipe
    budget: Budget
    accountant: Any = attrs.field(repr=False)
    ledger: Ledger = attrs.field(repr=False)
    verification: Mapping[str, Any] = attrs.field(repr=False)
    verdict: str
    evaluations: pd.DataFrame = attrs.field(repr=False)
    steps: tuple[dict[str, Any], ...] = attrs.field(repr=False)
    seeded: bool = False
    #: ``steps`` without the values in use derived from individual original values (a non-disclosive report's)
    public_steps: tuple[dict[str, Any], ...] = attrs.field(default=(), repr=False)
    #: whether the verdict is a differential-privacy guarantee (:func:`privclust.verify.guarantees_dp`)
    dp_guarantee: bool = False
    created: str = attrs.field(factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    @property
    def records(self) -> int:
        return int(sum(self.strata.values()))

    @property
    def spent(self) -> tuple[float, float]:
        """The (epsilon, delta) the accountant composes over every stratum."""
        return self.accountant.total(self.ledger.entries)

    def __repr__(self) -> str:
        return (f"<DatasetRelease {counted(self.records, 'record')} in {_strata_count(len(self.strata))} "
                f"written to {self.path}. {self.verdict}>")

    def report(self, *, non_disclosive: bool = False) -> dict[str, Any]:
        """The report as plain data (see :meth:`privclust.Release.report`)."""
        eps, delta = self.spent
        ledger = self.ledger.to_records()
        withheld = non_disclosive and public_ledger(ledger, self.ledger.entries)
        rep = {
            **report_head(self, non_disclosive),
            "data": {"records": self.records, "output": str(self.path), "strata": dict(self.strata),
                     "merged": list(self.merged)},
            "steps": list(self.public_steps if non_disclosive else self.steps),
            "privacy": {
                "budget": {"epsilon": self.budget.epsilon, "delta": self.budget.delta},
                "spent": {"epsilon": eps, "delta": delta},
                "accountant": accountant_description(self.accountant),
            },
            "verification": reported_checks(self.verification),
            "ledger": ledger,
            "evaluations": [] if non_disclosive else [
                {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
                for row in self.evaluations.to_dict(orient="records")],
            "seeded": self.seeded,
            "environment": environment(),
        }
        if non_disclosive:
            derived = any(a.get("effective_parameters") != b.get("effective_parameters")
                          for a, b in zip(self.steps, self.public_steps, strict=False))
            rep["left_out"] = ["the evaluation figures", "the details of ledger entries", RUN_TIMES_NOTE] + (
                [WITHHELD_NOTE] if withheld else []) + ([FROM_DATA_NOTE] if derived else [])
        return jsonable(rep)

    def to_json(self, *, non_disclosive: bool = False, **kwargs: Any) -> str:
        return json.dumps(self.report(non_disclosive=non_disclosive), indent=2, **kwargs)

    def to_html(self, *, non_disclosive: bool = False) -> str:
        """The report as a standalone HTML page."""
        report = self.report(non_disclosive=non_disclosive)
        withheld = public_statements(self.ledger.entries) if non_disclosive else {}
        eps, delta = self.spent
        has_dp = any(e.kind == "dp" for e in self.ledger)
        by_stratum: dict[str, list[dict[str, Any]]] = {}
        for row in report["evaluations"]:
            by_stratum.setdefault(str(row["stratum"]), []).append(row)
        context = {
            "title": self.recipe.name or "privclust release",
            "verdict": self.verdict,
            "records_text": counted(self.records, "record"),
            "strata_text": _strata_count(len(self.strata)),
            "output": str(self.path),
            "dp_text": spent_text(has_dp, self.dp_guarantee, eps, delta),
            "budget_text": ("none declared" if self.budget.epsilon is None
                            else f"epsilon {exact(self.budget.epsilon)}, delta {exact(self.budget.delta)}"),
            "accountant": report["privacy"]["accountant"],
            "seeded": seeded_text(self.seeded),
            "created": self.created,
            "non_disclosive": non_disclosive,
            "strata": [{"stratum": k, "records": v} for k, v in self.strata.items()],
            "merged": list(self.merged),
            "steps": [{"step": c["step"], "id": c["id"], "component": c["component"],
                       "columns": ", ".join(c["columns"]), "parameters": c["parameters"]} for c in self.steps],
            "ledger": [{"title": title,
                        "entries": [{"step": e.step, "step_id": e.step_id or "",
                                     "statement": withheld.get(e.seq, e.statement)}
                                    for e in self.ledger if shown(e)]}
                       for title, shown in ledger_sections() if any(shown(e) for e in self.ledger)],
            "evaluations": [{"stratum": k, "groups": by_evaluator(v)} for k, v in by_stratum.items()],
            "evaluations_warning": DP_EVALUATIONS_WARNING if self.dp_guarantee and report["evaluations"] else None,
            "versions": ", ".join(f"{k} {v}" for k, v in report["environment"].items()),
        }
        context["left_out"] = report.get("left_out", [])
        body = templates().get_template("dataset.html.j2").render(context)
        page = templates().get_template("page.html.j2")
        return page.render(title=context["title"], body=Markup(body)) + "\n"


def _strata_count(n: int) -> str:
    return f"{n:,} stratum" if n == 1 else f"{n:,} strata"


# ---------------------------------------------------------------------------
# One stratum (in a worker)
# ---------------------------------------------------------------------------

def _filter(combos: Sequence[tuple[Any, ...]], strata: Sequence[str]) -> Any:
    """The pyarrow filter of the records whose stratum columns take one of ``combos``."""
    ds = optional("pyarrow.dataset", PARQUET)
    expression = None
    for combo in combos:
        term = None
        for column, value in zip(strata, combo, strict=True):
            part = ds.field(column) == _scalar(value)
            term = part if term is None else term & part
        expression = term if expression is None else expression | term
    return expression


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@attrs.frozen
class _Source:
    """The input dataset as the driver found it, handed to every task: its
    path, its Hive directories' keys (none for one file or a plain folder)
    and its schema (the files' columns, then the keys, as text), so that a
    task lists the files but reads no footer to learn the schema."""

    path: str
    hive: tuple[str, ...]
    schema: Any = attrs.field(repr=False)


def _open(source: _Source) -> Any:
    """The input dataset, its Hive directories' values read as text (the
    driver's and every worker's alike): pyarrow's inference read
    ``region=01`` and ``region=1`` as the one integer 1, merging two strata
    under another name, and compared the integer with a stratum read as text
    (a red-team audit). Its schema is the driver's (:func:`_found`)."""
    ds = optional("pyarrow.dataset", PARQUET)
    return ds.dataset(source.path, format="parquet", schema=source.schema,
                      partitioning=_partitioning(source.hive) if source.hive else None)


def _found(path: Path) -> _Source:
    """The input dataset at ``path``: one Parquet file, a folder of Parquet
    files (the stratum columns inside them), or a folder partitioned in the
    Hive layout (``region=north/part-0.parquet``). Every file's footer is
    read (the schemas only, no data): a file that is not Parquet, files in
    directories of different keys, or files whose columns differ are refused
    here, naming the file and the column, rather than as pyarrow's error in
    some task (a red-team audit: a plain folder of files written by pandas
    failed with "Unable to merge: ... large_string vs string")."""
    pa = optional("pyarrow", PARQUET)
    ds = optional("pyarrow.dataset", PARQUET)
    if path.is_file():
        return _Source(str(path.resolve()), (), _footer(path, path))
    # the files pyarrow reads (names beginning with "." or "_" are skipped), without opening one
    files = sorted(ds.dataset(str(path), format="parquet", schema=pa.schema([])).files)
    if not files:
        raise DataError(f"{path}: the folder holds no Parquet files; give a folder of Parquet files (written e.g. by "
                        "df.to_parquet) or a .parquet file")
    layouts: dict[tuple[str, ...], str] = {}
    for file in files:
        parents = Path(file).relative_to(path).parts[:-1]
        layouts.setdefault(tuple(p.split("=", 1)[0] for p in parents if "=" in p), file)
    if len(layouts) > 1:
        (a, first), (b, second) = list(layouts.items())[:2]

        def under(keys: tuple[str, ...]) -> str:
            return f"Hive directories of {', '.join(map(repr, keys))}" if keys else "no Hive directory"

        raise DataError(f"{path}: the files are not all in the same directories ({_relative(first, path)} is in "
                        f"{under(a)}, {_relative(second, path)} in {under(b)}), so they do not make one dataset; put "
                        "every file directly in the folder (the stratum columns inside the files), or every file in "
                        "directories of the same stratum columns (region=north/part-0.parquet)")
    hive = next(iter(layouts))
    schemas = {file: _footer(Path(file), path) for file in files}
    first = files[0]
    names = list(schemas[first].names)
    for file, schema in schemas.items():
        lacking = ([(n, file, first) for n in names if n not in schema.names]
                   + [(n, first, file) for n in schema.names if n not in names])
        if lacking:
            missing, without, having = lacking[0]
            raise DataError(f"{path}: the file {_relative(without, path)} has no column {missing!r}, which "
                            f"{_relative(having, path)} has; the folder's files do not make one dataset: write "
                            "every file with the same columns")
    both = [n for n in hive if n in names]
    if both:
        raise DataError(f"{path}: the column {both[0]!r} is both in the files (e.g. {_relative(first, path)}) and in "
                        f"the Hive directory names ({both[0]}=...); write the files without it (e.g. "
                        f"df.drop(columns={both[0]!r}).to_parquet(...)), or the files directly in the folder")
    fields = [pa.field(n, _one_type(n, {f: s.field(n).type for f, s in schemas.items()}, path)) for n in names]
    schema = pa.schema(fields + [pa.field(n, pa.string()) for n in hive], metadata=schemas[first].metadata)
    return _Source(str(path.resolve()), hive, schema)


def _relative(file: str, folder: Path) -> str:
    return str(Path(file).relative_to(folder)) if Path(file).is_relative_to(folder) else str(file)


def _footer(file: Path, source: Path) -> Any:
    """The schema of one Parquet file of ``source``, read from its footer."""
    pa = optional("pyarrow", PARQUET)
    pq = optional("pyarrow.parquet", PARQUET)
    try:
        return pq.read_schema(file)
    except (pa.ArrowException, OSError) as err:
        where = (f"{file}" if file == source else f"{source}: the file {_relative(str(file), source)}")
        fix = ("give a Parquet file (written e.g. by df.to_parquet)" if file == source else
               "remove it from the folder (pyarrow skips names beginning with '_' or '.') or write it as Parquet")
        raise DataError(f"{where} is not a Parquet file pyarrow can read ({' '.join(str(err).split())}); {fix}") \
            from err


def _kind(kind: Any) -> str:
    """The kind of values of an Arrow type: the types of one kind make one column (pyarrow reads each file's as
    the widest)."""
    pa = optional("pyarrow", PARQUET)
    for test, name in ((pa.types.is_dictionary, None), (pa.types.is_signed_integer, "integer"),
                       (pa.types.is_unsigned_integer, "unsigned integer"), (pa.types.is_floating, "floating"),
                       (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "text"),
                       (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "binary")):
        if test(kind):
            return f"categorical {_kind(kind.value_type)}" if name is None else name
    return str(kind)


def _one_type(name: str, types: Mapping[str, Any], source: Path) -> Any:
    """The type of column ``name`` in the dataset from its type in each file:
    the one type, or the widest of one kind (text written by pandas as
    ``large_string`` beside ``string``, ``int32`` beside ``int64``); a file
    where the column is all missing (type ``null``) takes any. Types of
    different kinds are refused, naming the files."""
    pa = optional("pyarrow", PARQUET)
    kinds = {f: t for f, t in types.items() if not pa.types.is_null(t)}
    distinct = list(dict.fromkeys(kinds.values()))
    if len(distinct) <= 1:
        return distinct[0] if distinct else next(iter(types.values()))
    by_kind: dict[str, str] = {}
    for file, kind in kinds.items():
        by_kind.setdefault(_kind(kind), file)
    if len(by_kind) > 1:
        (k1, f1), (k2, f2) = list(by_kind.items())[:2]
        raise DataError(f"{source}: the column {name!r} is {kinds[f1]} in {_relative(f1, source)} but {kinds[f2]} in "
                        f"{_relative(f2, source)}; the folder's files do not make one dataset: write the column with "
                        f"one type in every file (e.g. df[{name!r}] = df[{name!r}].astype(\"float64\") before "
                        "df.to_parquet, or astype(str) for text)")
    if pa.types.is_dictionary(distinct[0]):
        return pa.dictionary(pa.int32(), _one_type(name, {f: t.value_type for f, t in kinds.items()}, source))
    widest = pa.unify_schemas([pa.schema([(name, t)]) for t in distinct], promote_options="permissive")
    return widest.field(name).type


def _partitioning(strata: Sequence[str]) -> Any:
    """The Hive partitioning of an output dataset: its directories' values as text."""
    pa = optional("pyarrow", PARQUET)
    ds = optional("pyarrow.dataset", PARQUET)
    return ds.partitioning(pa.schema([(c, pa.string()) for c in strata]), flavor="hive")


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Hive partition columns come back as categoricals: give them their values' dtype."""
    for c in frame.columns:
        if isinstance(frame[c].dtype, pd.CategoricalDtype):
            frame[c] = frame[c].astype(frame[c].cat.categories.dtype)
    return frame


def _integers_kept(table: Any) -> pd.DataFrame:
    """A stratum's records as a frame, an integer column with missing values
    read as pandas' nullable integers (``Int64``), as :func:`privclust.run`
    reads such a CSV column: ``to_pandas`` makes it ``float64``, but only in
    the strata that have a missing value, so the host released it as
    integers in some strata and with decimals in others (a red-team audit)."""
    pa = optional("pyarrow", PARQUET)
    frame = table.to_pandas()
    for name, column in zip(table.schema.names, table.columns, strict=True):
        if pa.types.is_integer(column.type) and column.null_count and not pd.api.types.is_integer_dtype(frame[name]):
            unsigned = "U" if pa.types.is_unsigned_integer(column.type) else ""
            frame[name] = pd.array(column.to_pylist(), dtype=f"{unsigned}Int{column.type.bit_width}")
    return frame


def _as_input(data: pd.DataFrame, schema: Any, strata: Sequence[str], text: str) -> Any:
    """A stratum's released records as a Parquet table, each column of the
    input in the input's type where its values were: an integer column the
    host released as whole numbers stays an integer column, and a column all
    missing in this stratum is typed as in every other stratum, so that the
    strata's files make one dataset (:func:`_one_schema` checks it). The
    frame's ``attrs`` are not written (an input Parquet's come back with
    it, and pyarrow writes them into the file's metadata)."""
    pa = optional("pyarrow", PARQUET)
    data = data.copy(deep=False)
    data.attrs = {}  # pyarrow writes attrs into the file's metadata: never the input's (rt21 F2)
    table = pa.Table.from_pandas(data, preserve_index=False)
    for i, field in enumerate(table.schema):
        if field.name in strata or field.name not in schema.names:
            continue
        wanted = schema.field(field.name).type
        if field.type == wanted:
            continue
        numeric = pa.types.is_integer(wanted) and (pa.types.is_floating(field.type) or pa.types.is_integer(field.type))
        if not (pa.types.is_null(field.type) or numeric):
            continue  # a column a step released as another kind of value (a recode's intervals as text)
        try:
            column = table.column(i).cast(wanted, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise DataError(f"the stratum {text!r}: column {field.name!r} is {wanted} in the input dataset, but its "
                            f"released values are not ({' '.join(str(err).split())}); the strata's files would not "
                            "make one dataset") from err
        table = table.set_column(i, pa.field(field.name, wanted), column)
    return table


def _protect_stratum(handover: Handover, source: _Source, combos: list[tuple[Any, ...]], text: str, seed: Any,
                     folder: str, index: int, step_columns: Sequence[tuple[str, ...]],
                     defaults: Sequence[str]) -> Any:
    """Read one stratum, run the recipe on it, write its records; return the
    release without its data (ledger, checks, figures, steps). The compiled
    recipe comes with the task (or from the run, in a forked worker), and so
    do each step's columns and the default columns, decided by the driver
    for the whole data set."""
    registry = worker_registry(handover.spec, handover.token)
    compiled = received(handover, registry)
    strata = list(compiled.recipe.roles.strata)
    dataset = _open(source)
    read = dataset.to_table(filter=_filter(combos, strata))
    frame = _plain(_integers_kept(read))
    release = run_checked(compiled, preflight(compiled, frame, stratum=text, step_columns=step_columns,
                                              default_columns=defaults), seed)
    # the stratum's rows in the order drawn from its run (Release.publication_order), as privclust run writes a file
    table = _as_input(release.data.iloc[release.publication_order], dataset.schema, strata, text)
    pq = optional("pyarrow.parquet", PARQUET)
    pq.write_to_dataset(table, folder, partition_cols=strata, basename_template=f"part-{index}-{{i}}.parquet")
    steps = (tuple(release.components()), tuple(release.components(non_disclosive=True)))
    return attrs.evolve(release, data=release.data.iloc[:0], original=release.original.iloc[:0],
                        labels=release.labels.iloc[:0],
                        outcomes=tuple(attrs.evolve(o, result=None) for o in release.outcomes)), steps


def _recount_stratum(folder: str, index: int, strata: Sequence[str], whole_columns: Sequence[str],
                     keys: Sequence[str], k: int | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The whole-file check and the key figures of one stratum's written
    records again, at the run's ``k`` (the largest k a step claims in any
    stratum): a stratum whose own steps claimed a smaller k (or none) was
    checked at that k, and counts taken at different k do not add up."""
    ds = optional("pyarrow.dataset", PARQUET)
    files = sorted(str(p) for p in Path(folder).rglob(f"part-{index}-*.parquet"))
    table = ds.dataset(files, format="parquet", partitioning=_partitioning(strata),
                       partition_base_dir=folder).to_table()
    released = _plain(table.to_pandas())
    n = len(released)
    whole = {"columns": list(whole_columns), "k": k,
             **(k_check(released, list(whole_columns), (), k) if whole_columns and n else
                {"groups": 0, "min_group_size": 0, "unique_records": 0, "records_in_small_groups": 0,
                 "holds": False})}
    whole.pop("_sizes", None)
    whole.pop("_holes", None)
    figures = key_figures(released, keys, strata, k or DEFAULT_KEY_K) if keys and n else None
    return whole, figures


# ---------------------------------------------------------------------------
# The whole dataset (the driver)
# ---------------------------------------------------------------------------


def _sum_checks(checks: Sequence[Mapping[str, Any]], columns: Sequence[str],
                strata: Sequence[str] | None = None) -> dict[str, Any]:
    """The host's checks of the whole release from those of each stratum:
    counts add up, the smallest group is the smallest of any stratum (a
    group never crosses a stratum), and each step's claim is settled over
    every stratum at one k (:func:`~privclust.verify.merged_claim`;
    ``strata``: each stratum as text, in the order of ``checks``)."""
    strata = list(strata) if strata is not None else [str(i) for i in range(len(checks))]
    changed = [c for c in columns if any(c in k["changed_columns"] for k in checks)]
    first = checks[0]
    out: dict[str, Any] = {
        "records": sum(k["records"] for k in checks),
        "dp_release": all(k.get("dp_release", False) for k in checks),
        "changed_columns": changed,
        "unchanged_columns": [c for c in columns if c not in changed],
        # every stratum's steps worked on the columns the driver decided; a label column is released by each
        "label_columns": list(dict.fromkeys(c for k in checks for c in k["label_columns"])),
        "protected_columns": [c for c in columns if any(c in k["protected_columns"] for k in checks)],
        "verbatim_records": sum(k["verbatim_records"] for k in checks),
        # each task compares its stratum's released records with that stratum's originals only
        "verbatim_scope": "of their stratum",
        "missing_values": sum(int(k.get("missing_values", 0)) for k in checks),
        "values_set_missing": sum(int(k.get("values_set_missing", 0)) for k in checks),
        "steps": [],
        "claims": [],
    }
    figures = [k["keys"] for k in checks if k.get("keys")]
    if figures:  # the key cells lie within the strata, so the counts add up and the smallest cell is the smallest
        keys = {**figures[0], "min_cell_size": min(f["min_cell_size"] for f in figures),
                "holds": (False if any(f.get("holds") is False for f in figures) else
                          None if any(f.get("holds") is None for f in figures) else True)}
        for key in ("records", "cells", "sample_uniques", "records_below_k", "missing_values"):
            keys[key] = sum(int(f.get(key, 0)) for f in figures)
        keys["expected_reidentifications"] = float(keys["cells"])
        if any("records_with_few_matches" in f for f in figures):  # a stratum without: its cells below k
            keys["records_with_few_matches"] = sum(int(f.get("records_with_few_matches", f["records_below_k"]))
                                                   for f in figures)
        out["keys"] = keys
    for i, s in enumerate(first["steps"]):
        each = [k["steps"][i] for k in checks]
        if any(e["columns"] != s["columns"] for e in each):  # the driver hands every task the same columns
            raise PrivclustError(f"step {s['step']} ({s['id']}) worked on other columns in some strata "
                                 f"({', '.join(sorted({', '.join(e['columns']) for e in each}))}); the release "
                                 "cannot state one set of protected columns: name the step's columns")
        out["steps"].append({**{key: s[key] for key in ("step", "id", "component", "columns")},
                             **{key: sum(e[key] for e in each) for key in ("verbatim_by_step", "verbatim_released",
                                                                          "groups", "unique_records")},
                             "min_group_size": min(e["min_group_size"] for e in each)})
    # each step's claims grouped by the step and their order within it, as privclust.run groups them
    # (verify._claims_over_strata): a claim made in some strata only is merged over those that made it, and
    # claims are never paired by position across strata (a red-team audit)
    groups: dict[tuple[Any, int], list[tuple[str, dict[str, Any]]]] = {}
    for text, k in zip(strata, checks, strict=True):
        seen: dict[Any, int] = {}
        for c in k["claims"]:
            step = c.get("step")
            j = seen.get(step, 0)
            seen[step] = j + 1
            groups.setdefault((step, j), []).append((text, {key: v for key, v in c.items() if key != "step"}))
    changed_any = bool(changed)  # a stratum's void claim is settled from its groups when the release changes a column
    for each in groups.values():
        merged = merged_claim(each[0][1], [c for _, c in each], [t for t, _ in each], settle_void=changed_any)
        claimed_in(merged, [t for t, _ in each], strata)
        out["claims"].append(merged)
    wholes = [k["whole_file"] for k in checks if "whole_file" in k]
    if wholes:  # the stratum columns are among its columns: a group never crosses a stratum
        whole = {**wholes[0], "k": max((w["k"] for w in wholes if w.get("k") is not None), default=None),
                 # refuted where some stratum refutes it, undecided where some stratum could not decide
                 "holds": (False if any(w.get("holds") is False for w in wholes) else
                           None if any(w.get("holds") is None for w in wholes) else True),
                 "min_group_size": min(w["min_group_size"] for w in wholes)}
        for key in ("groups", "unique_records", "records_in_small_groups", "missing_values"):
            whole[key] = sum(int(w.get(key, 0)) for w in wholes)
        if any("min_matching_records" in w for w in wholes):
            # some stratum was checked with a missing value matching any value: the smallest of every stratum under
            # its own convention (a stratum without missing values: its identical rows), not the first stratum's
            whole["min_matching_records"] = min(w.get("min_matching_records", w["min_group_size"]) for w in wholes)
            whole["identical_min_group_size"] = min(w.get("identical_min_group_size", w["min_group_size"])
                                                    for w in wholes)
        if any("records_with_few_matches" in w for w in wholes):  # a stratum without: its identical-row count
            whole["records_with_few_matches"] = sum(int(w.get("records_with_few_matches", w["records_in_small_groups"]))
                                                    for w in wholes)
        # the released weight counted with the file's columns (rt21 F1): a sum over the strata where each stratum
        # counted it, else not stated (a stratum counted again at the run's k did not count it)
        whole.pop("weight", None)
        if all(w.get("weight") for w in wholes):
            weights = [w["weight"] for w in wholes]
            whole["weight"] = {"columns": weights[0]["columns"],
                               "records_in_small_groups": sum(int(w["records_in_small_groups"]) for w in weights),
                               "matching": any(w["matching"] for w in weights),
                               "holds": (False if any(w["holds"] is False for w in weights) else
                                         None if any(w["holds"] is None for w in weights) else True)}
        out["whole_file"] = whole
    return out


def _step_columns(compiled: CompiledRecipe, dataset: Any) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """Each step's columns, decided once for the whole data set as
    :func:`privclust.run` decides them for the whole file: a step's own
    ``columns``, else ``[roles] numeric``, else the numeric columns without
    a role, less (for a step that is not differentially private) the integer
    columns that look like codes over every record of the data set
    (:func:`~privclust.defaults.code_like`, read a column at a time). Every
    stratum's task gets these: a stratum's values would choose others (a
    count of 0 to 3 is a code in 200 records, a count in 40). Returns them
    and the default columns (an evaluation's columns when no step changes
    one), decided the same way."""
    roles = compiled.recipe.roles
    empty = _plain(dataset.schema.empty_table().to_pandas())
    every = default_step_columns(empty, roles, private=True)  # no column left out as a code
    codes = set() if roles.numeric else {c for c in every if _code_like(dataset, c)}
    defaults = tuple(c for c in every if c not in codes)
    return [tuple(cs.step.columns) if cs.step.columns is not None
            else every if spends_privacy(cs.component) else defaults for cs in compiled.steps], defaults


def _code_like(dataset: Any, column: str) -> bool:
    """:func:`~privclust.defaults.code_like` of a column of the whole data set,
    read batch by batch: an integer type with at least one and at most
    :data:`~privclust.defaults.CODE_MAX_DISTINCT` distinct values, and at least
    :data:`~privclust.defaults.CODE_RECORDS_PER_VALUE` records (not missing)
    per distinct value."""
    pa = optional("pyarrow", PARQUET)
    pc = optional("pyarrow.compute", PARQUET)
    if not pa.types.is_integer(dataset.schema.field(column).type):
        return False
    seen: set[Any] = set()
    observed = 0
    for batch in dataset.to_batches(columns=[column]):
        values = batch.column(0)
        observed += len(values) - values.null_count
        seen.update(pc.unique(values.drop_null()).to_pylist())
        if len(seen) > CODE_MAX_DISTINCT:
            return False
    return bool(0 < len(seen) <= CODE_MAX_DISTINCT and len(seen) * CODE_RECORDS_PER_VALUE <= observed)


def run_dataset(
    recipe: Recipe | Mapping[str, Any] | str | CompiledRecipe,
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    seed: int | np.random.SeedSequence | None = None,
    *,
    registry: Registry | None = None,
    scheduler: Any = None,
    processes: int | None = None,
    timeout: float = 10.0,
) -> DatasetRelease:
    """Protect a Parquet dataset stratum by stratum (see the module docstring).

    :param recipe: a recipe with ``[roles] strata``.
    :param source: the input Parquet dataset: a folder of Parquet files
        (directly in it, or Hive-partitioned by the stratum columns for the
        least memory) or one Parquet file.
    :param output: the output dataset, a folder that must not exist yet.
    :param seed: for reproducible experiments (never recorded); each stratum
        gets a child stream, whichever engine runs it.
    :param scheduler: ``None`` for local processes, ``"local"`` for a Dask
        LocalCluster, a scheduler address, or a ``distributed.Client``.
    :param processes: local worker processes (default: one per core).
    :raises ParameterError: without strata, or for a bad engine setting.
    :raises DataError: for a problem of the data (a stratum column absent, a
        folder whose files do not make one dataset...).
    """
    compiled = recipe if isinstance(recipe, CompiledRecipe) else compile(recipe, registry)
    roles = compiled.recipe.roles
    strata = list(roles.strata)
    if not strata:
        raise ParameterError("run_dataset runs the strata of [roles] strata as independent tasks; declare strata "
                             "(e.g. [roles] strata = \"region\")")
    source_path, out = Path(source), Path(output)
    if not source_path.exists():
        raise DataError(f"{source_path}: no Parquet dataset there; give a folder of Parquet files or a .parquet file")
    if out.exists():
        raise PrivclustError(f"{out} already exists; the output dataset is written to a new folder (remove it or "
                             "name another)")
    if out.resolve() == source_path.resolve() or source_path.resolve() in out.resolve().parents:
        raise PrivclustError(f"{out}: the output dataset cannot be inside the input {source_path}")
    pa = optional("pyarrow", PARQUET)
    found = _found(source_path)
    dataset = _open(found)
    names = list(dataset.schema.names)
    absent = [c for c in strata if c not in names]
    if absent:
        raise DataError(f"[roles] strata: column(s) {', '.join(map(repr, absent))} are not in the dataset "
                        f"{source_path} (its columns: {', '.join(names)})")
    try:
        keys = dataset.to_table(columns=strata).to_pandas()  # Hive keys stay categorical: small codes
    except pa.ArrowException as err:  # a file whose footer reads but whose stratum column does not
        raise DataError(f"{source_path}: pyarrow cannot read the stratum column(s) {', '.join(map(repr, strata))} of "
                        f"the dataset ({' '.join(str(err).split())}); rewrite the file at fault (e.g. with "
                        "df.to_parquet)") from err
    if keys.empty:
        raise DataError(f"{source_path}: the dataset has no records")
    step_columns, defaults = _step_columns(compiled, dataset)
    for column in strata:
        if keys[column].isna().any():
            raise DataError(f"[roles] strata: the stratum column {column!r} has {int(keys[column].isna().sum())} "
                            "missing value(s); every record needs a stratum")
    _kept_by_hive(dataset, keys, strata, found.hive)
    parts, merges = strata_parts(compiled, keys, step_columns)
    assert parts is not None
    combos = [list(keys.iloc[rows].drop_duplicates().itertuples(index=False, name=None)) for _, rows in parts]
    sizes = {text: int(len(rows)) for text, rows in parts}
    del keys, parts

    context = PrivacyContext(compiled.budget, seed=seed, registry=compiled.registry)
    del seed
    seeds = context.spawn_seeds(len(combos))
    folder = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:12]}"
    with handed(compiled.registry, scheduler, compiled=compiled) as handover:
        tasks = [(handover, found, combo, text, s, str(folder.resolve()), i, step_columns,
                  defaults)
                 for i, (combo, text, s) in enumerate(zip(combos, sizes, seeds, strict=True))]
        moved = False
        try:
            folder.mkdir(parents=True)
            results = map_tasks(_protect_stratum, tasks, scheduler=scheduler, processes=processes, timeout=timeout)
            _one_schema(folder, list(sizes))
            results = _at_run_k(results, str(folder.resolve()), strata, compiled.recipe.roles.keys, scheduler,
                                processes, timeout)
            # The whole release (one ledger, the budget check, the verdict) before the folder is published:
            # a failure or a stop there leaves nothing behind.
            release = _combined(compiled, context, results, sizes, tuple(merges), names, out)
            with signals_held():
                raise_if_stopped()  # a stop whose exception a finalizer swallowed still stops the commit
                os.replace(folder, out)
                moved = True
                _PUBLISHED.append(out)
        except BaseException:
            # a stop held back during the rename is raised as the block ends: the folder is withdrawn
            with contextlib.suppress(OSError):
                shutil.rmtree(out if moved else folder)
            if moved:
                _PUBLISHED.remove(out)
            raise
    return release


#: The directory name Hive gives a missing value: a stratum of that name reads back as missing.
HIVE_MISSING = "__HIVE_DEFAULT_PARTITION__"


def _kept_by_hive(dataset: Any, keys: pd.DataFrame, strata: Sequence[str], hive: Sequence[str]) -> None:
    """Refuse, before anything is computed, a stratum column whose values the
    output would not give back: the output keeps the stratum columns only in
    its Hive directory names (``region=north``), as text, and
    ``pd.read_parquet`` reads them back as integers when every value of the
    column reads as one, else as text. So a stratum column is kept when it is
    an integer column (within 32 bits), or a text column whose values are
    not all read as integers, or the text directory names of a Hive input
    read back as integers just as the input's are; a float, boolean or date
    column would come back as text, text ``01`` and ``1`` as the one integer
    1, and a stratum named ``__HIVE_DEFAULT_PARTITION__`` as missing (a
    red-team audit: the verdict says the stratum columns are released as in
    the original)."""
    pa = optional("pyarrow", PARQUET)
    for column in strata:
        kind = dataset.schema.field(column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        values = pd.unique(keys[column].astype(object).to_numpy())
        if pa.types.is_integer(kind):
            wide = [v for v in values if not -2**31 <= int(v) < 2**31]
            if wide:
                raise DataError(f"[roles] strata: the stratum column {column!r} holds the integer {wide[0]!r}, beyond "
                                "32 bits: the output keeps stratum values only in its Hive directory names, which "
                                "pd.read_parquet reads back as text when a value is that large, so the column would "
                                "not come back as released; cast the column to text in the input (e.g. "
                                f"df[{column!r}] = df[{column!r}].astype(str)) or recode it to smaller integers")
            continue
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise DataError(f"[roles] strata: the stratum column {column!r} is of type {kind} (e.g. {values[0]!r}): "
                            "the output keeps stratum values only in its Hive directory names, which pd.read_parquet "
                            "reads back as text or integers, so the column would not come back as released; "
                            f"cast the column to text in the input (e.g. df[{column!r}] = df[{column!r}].astype(str)) "
                            "or recode it to integers")
        texts = [str(v) for v in values]
        if HIVE_MISSING in texts:
            raise DataError(f"[roles] strata: the stratum column {column!r} holds the value {HIVE_MISSING!r}, "
                            "the name Hive gives a missing value: that stratum would read back from the output as "
                            "missing; recode that value (e.g. to 'unknown')")
        try:
            numbers = pa.array(texts, pa.string()).cast(pa.int32()).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue  # read back as text: as released
        changed = [(t, n) for t, n in zip(texts, numbers, strict=True) if str(n) != t]
        if changed or column not in hive:
            text, number = changed[0] if changed else (texts[0], numbers[0])
            raise DataError(f"[roles] strata: every value of the text stratum column {column!r} reads as an integer, "
                            f"and pd.read_parquet reads the output's Hive directory names back as integers: "
                            f"{text!r} would come back as {number!r}"
                            + (" (so two strata could come back as one value)" if changed else "")
                            + "; give the values a form that is not an integer (e.g. a letter before them, "
                            f"'r{text}')" + ("" if changed else ", or store the column as integers"))


def _one_schema(folder: Path, texts: Sequence[str]) -> None:
    """Refuse to publish strata whose files give a column different types
    (read from the files' footers): the output would not read back as one
    dataset (``pd.read_parquet`` fails), and the columns' values would not
    be the same kind of value in every stratum."""
    pq = optional("pyarrow.parquet", PARQUET)
    types: dict[str, dict[str, list[str]]] = {}
    for path in sorted(folder.rglob("part-*.parquet")):
        index = int(path.name.split("-")[1])
        for field in pq.read_schema(path):
            types.setdefault(field.name, {}).setdefault(str(field.type), []).append(texts[index])
    mixed = {name: kinds for name, kinds in types.items() if len(kinds) > 1}
    if mixed:
        def where(of: list[str]) -> str:
            named = sorted(set(of))
            return f"{_strata_count(len(named))} ({', '.join(repr(t) for t in named[:3])})"

        said = "; ".join(f"{name!r}: " + ", ".join(f"{kind} in {where(of)}" for kind, of in kinds.items())
                         for name, kinds in mixed.items())
        raise DataError(f"the strata released columns of different types ({said}); the output would not read back "
                        "as one dataset, and nothing was written: give such a column one type in the input (e.g. "
                        "write the column with decimals in every stratum, or as text)")


def _at_run_k(results: list[Any], folder: str, strata: Sequence[str], keys: Sequence[str], scheduler: Any,
              processes: int | None, timeout: float) -> list[Any]:
    """Each stratum's whole-file check and key figures at the run's k, the
    largest k a step claims in any stratum (as :func:`privclust.run` checks
    the whole file): the strata checked at another k (their own steps'
    largest, or none) are counted again on the records they wrote."""
    wholes = [r.verification.get("whole_file") or {} for r, _ in results]
    k = max((w["k"] for w in wholes if w.get("k") is not None), default=None)
    key_k = k if k is not None else DEFAULT_KEY_K
    again = [i for i, (r, _) in enumerate(results)
             if wholes[i].get("k") != k or (r.verification.get("keys") or {}).get("k", key_k) != key_k]
    if not again:
        return results
    tasks = [(folder, i, list(strata), list(wholes[i].get("columns", ())), list(keys), k) for i in again]
    counted = map_tasks(_recount_stratum, tasks, scheduler=scheduler, processes=processes, timeout=timeout)
    results = list(results)
    for i, (whole, figures) in zip(again, counted, strict=True):
        release, steps = results[i]
        checks = {**release.verification, "whole_file": whole}
        if figures is not None:
            checks["keys"] = figures
        results[i] = (attrs.evolve(release, verification=checks), steps)
    return results


#: The output datasets :func:`run_dataset` has published in this process (see :func:`published`).
_PUBLISHED: list[Path] = []


def published() -> tuple[Path, ...]:
    """The output datasets :func:`run_dataset` has moved into place in this
    process so far, in order (one the call withdrew on a late stop is not
    among them). The command line removes those of a run whose report
    could not be written, and names those still in place after a stop."""
    return tuple(_PUBLISHED)


def _combined(compiled: CompiledRecipe, context: PrivacyContext, results: Sequence[Any], sizes: Mapping[str, int],
              merges: tuple[str, ...], columns: Sequence[str], out: Path) -> DatasetRelease:
    """One ledger, one set of checks and one verdict from the strata's releases."""
    label = ", ".join(compiled.recipe.roles.strata)
    evaluations = []
    # a stratum whose release changes no column settled its claims void; beside strata that change something,
    # they are settled from its own released groups, as privclust.run settles them on the same data
    changes = any(r.verification["changed_columns"] for r, _ in results)
    for (release, _), text in zip(results, sizes, strict=True):
        settled = {c["seq"]: c for c in release.verification["claims"]
                   if changes and c["status"] == "void" and "status_if_changed" in c}
        for entry in release.ledger:
            if entry.kind == "verified" and entry.mechanism == "strata":
                continue  # each task saw one stratum; the host states the split once, below
            if entry.seq in settled:
                record = settled[entry.seq]
                entry = attrs.evolve(entry, status=record["status_if_changed"],
                                     statement=_unchanged_text(entry, record, sizes[text]))
            if entry.kind != "dp":  # a DP entry names its stratum already (the host tagged the release)
                entry = attrs.evolve(entry, statement=f"Stratum {label} = {text!r}: {entry.statement}")
            context._adopt(entry)
        evaluations.append(release.evaluations.assign(stratum=text))
    releases = [r for r, _ in results]
    claim_steps = [{e.seq: e.step for e in r.ledger} for r in releases]
    outcomes = releases[0].outcomes
    context._record_host("verified", strata_statement(compiled.recipe.roles.strata,
                                                       [(t, range(n)) for t, n in sizes.items()], merges,
                                                       outcomes),
                         details={"strata": list(compiled.recipe.roles.strata), "merged": list(merges),
                                  "parts": dict(sizes)}, mechanism="strata")
    checks = _sum_checks([{**r.verification, "claims": [{**c, "step": steps.get(c["seq"])}
                                                         for c in r.verification["claims"]]}
                          for r, steps in zip(releases, claim_steps, strict=True)], columns, list(sizes))
    dp_release = checks["dp_release"]  # then nothing written compares released with original values (verify)
    context._record_host(
        "verified",
        f"Host check of the whole release (the sum over the {_strata_count(len(sizes))} of each stratum's check): "
        f"columns {'written by the steps' if dp_release else 'changed'}: "
        f"{', '.join(checks['changed_columns']) or '(none)'}; columns released as in the original: "
        f"{', '.join(checks['unchanged_columns']) or '(none)'}. "
        + ("The host does not compare the written values with the original ones (every step released through "
           "its differential-privacy mechanisms); " if dp_release
           else f"{checks['verbatim_records']} of {checks['records']} records are "
           "released verbatim (identical on the columns the steps worked on to an original record of their stratum, "
           "its own or another's); ")
        + "; ".join(f"step {s['step']} ({s['id']}): the smallest group of identical released rows (within a "
                    f"stratum) has {s['min_group_size']} record(s), {s['unique_records']} unique"
                    for s in checks["steps"]) + ".",
        mechanism="release check",
        details={k: v for k, v in checks.items() if k not in ("steps", "claims")
                 and not (dp_release and k in COMPARED)})
    table = pd.concat(evaluations, ignore_index=True) if evaluations else pd.DataFrame()
    if "stratum" in table.columns:
        table = table[["stratum", *[c for c in table.columns if c != "stratum"]]]
    return DatasetRelease(
        path=out, strata=dict(sizes), merged=merges, recipe=compiled.recipe, budget=compiled.budget,
        accountant=context.accountant, ledger=context.ledger, verification=checks,
        verdict=verdict(context.ledger, context.accountant, outcomes, checks, strata=compiled.recipe.roles.strata,
                        seeded=context.seeded,
                        randomised=random_step_names(outcomes, sorted({i for r in releases for i in r.random_steps})),
                        provenance=releases[0].snapshot),
        evaluations=table, steps=_merged_steps([r[1][0] for r in results], list(sizes)),
        public_steps=_merged_steps([r[1][1] for r in results], list(sizes)), seeded=context.seeded,
        dp_guarantee=guarantees_dp(context.ledger.entries, context.accountant, outcomes, checks))


def _unchanged_text(entry: Any, record: Mapping[str, Any], n: int) -> str:
    """The host's words on a claim of a stratum whose release changes no
    column, settled from the stratum's own released groups (``record``,
    :func:`privclust.verify.verify`'s figures) beside strata that change
    something."""
    who = entry.component or "a component"
    head = (f"{who} claims: {entry.claim or entry.statement} Host check: the steps changed no value of this "
            f"stratum (its {n} records are released as they were); ")
    status, k, cols = record["status_if_changed"], record.get("k"), ", ".join(record.get("columns", ()))
    smallest = record.get("min_group_size")
    if record.get("guarantee") != "k-anonymity" or smallest is None:
        return head + "the host does not settle this claim further."
    if status == "verified" and "min_matching_records" in record:
        return head + (f"with a missing value counted as matching any value (sdcMicro's convention), every record "
                       f"agrees, on the columns both observe, with at least {record['min_matching_records']} records "
                       f"on {cols} (k = {k}): verified on its records.")
    if status == "verified":
        return head + f"every combination of {cols} is shared by at least {smallest} records (k = {k}): verified."
    if k is None:
        return head + (f"the claim names no k the host can check; the smallest group of identical rows of {cols} has "
                       f"{smallest} record(s): not verified.")
    small = record.get("records_in_small_groups", 0)
    if status == "claimed":
        return head + (f"counting identical rows of {cols}, {small} of {n} records are in groups smaller than "
                       f"k = {k}; but {UNDECIDED_MATCHING}: not verified.")
    return head + (f"{small} of {n} records share their combination of {cols} with fewer than {k - 1} other "
                   f"record(s) (the smallest group has {smallest}): the claim does NOT hold.")


def _merged_steps(per_stratum: Sequence[Sequence[Mapping[str, Any]]], texts: Sequence[str]) -> tuple[dict, ...]:
    """Each step's report entry for the whole release from those of every
    stratum: its clusters (or groups) and time add up over the strata (a
    cluster never crosses a stratum), and a value in use that differs between
    strata is given per stratum (``{stratum: value}``), not the first
    stratum's alone."""
    merged = []
    for entries in zip(*per_stratum, strict=True):
        step = dict(entries[0])
        if all("elapsed_seconds" in e for e in entries):  # a non-disclosive report's steps have no run time
            step["elapsed_seconds"] = round(sum(float(e["elapsed_seconds"]) for e in entries), 6)
        if all("clusters" in e for e in entries):
            step["clusters"] = int(sum(int(e["clusters"]) for e in entries))
            if "output" in step:
                # each stratum's task numbers its labels from 0 (numbering them after the strata before it, as
                # privclust.run does, would need a second pass over the written files): the report says so, and
                # how many clusters each stratum has (a red-team audit: "clusters: 11" beside 6 distinct labels)
                step["clusters_by_stratum"] = dict(zip(texts, (int(e["clusters"]) for e in entries), strict=True))
                step["label_numbering"] = (f"the labels in column {step['output']!r} are numbered from 0 within "
                                           "each stratum: a cluster is its stratum and its label (group the output "
                                           "by the stratum columns and the label together)")
        effective: dict[str, Any] = {}
        for key in dict.fromkeys(k for e in entries for k in e.get("effective_parameters", {})):
            values = [e.get("effective_parameters", {}).get(key) for e in entries]
            effective[key] = values[0] if all(v == values[0] for v in values) else dict(zip(texts, values,
                                                                                            strict=True))
        step["effective_parameters"] = effective
        merged.append(step)
    return tuple(merged)
