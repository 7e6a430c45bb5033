"""The ``privclust`` command.

::

    privclust run RECIPE --input FILE --output FILE [--report FILE] [--seed N | --seed-file PATH]
    privclust check RECIPE [--input FILE]
    privclust compare RECIPE... --input FILE [--sweep KEY=VALUES] [--repeats N]
                      [--scheduler ADDRESS] --output FILE [--plot FILE]
    privclust plugins [--json]
    privclust demo [--seed N] [--output FILE]

User mistakes (every :class:`~privclust.PrivclustError`) print one line on
stderr and exit with status 1 (2 for a malformed command line); nothing is
written. The outputs of a command are checked before any work and written
as one transaction (see :mod:`privclust._io`); Ctrl-C exits with status 130,
SIGTERM and SIGHUP with 128 + the signal's number, leaving no temporary
file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import textwrap
import time
import warnings
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import attrs
import numpy as np
import pandas as pd
from tqdm import tqdm

from . import __version__, testing
from ._reading import STDIO, read_frame, write_csv
from ._signals import STOP_SIGNALS, Interrupted, handle_signals, raise_if_stopped
from ._writing import check_outputs, committed, frame_writer, text_writer, write_atomically
from .assessment import rule_breaks, rule_breaks_lines, summary_table
from .checked import UNCHECKED, checked_text, within_lines
from .cli_options import read_numbers, report_paths, run_seed
from .cliargs import build_parser
from .compare import check_plot, compare, parse_sweep, summarize
from .compiling import spends_privacy
from .constraints import ConstraintSet, integer_flags, judge
from .datasets import TABLE1_RULE, table1
from .defaults import default_reason, default_step_lines
from .errors import PrivclustError, RecipeError
from .hookspecs import hookimpl
from .ledger import at_least, exact
from .plots import risk_utility_map
from .recipe import DEFAULT_LABEL_COLUMN, WITHIN_KEYS, Recipe, within_columns
from .registry import ENV_DISABLE, Registry, get_registry
from .runner import compile, integer_columns, planned_costs, preflight, run
from .strata import published, run_dataset

__all__ = ["main"]


class ProgressDisplay:
    """Observer plugin: one line per step on stderr, and a progress bar for
    steps that report progress (only on a terminal). ``timed=False``
    (``privclust run --non-disclosive``) shows no run time: a time is a
    function of the data, a timing side channel no differential-privacy
    statement covers."""

    plugin_name = "privclust.cli.progress"

    def __init__(self, stream: TextIO, *, quiet: bool = False, timed: bool = True):
        self.stream = stream
        self.quiet = quiet
        self.timed = timed
        self._bar: Any = None

    @hookimpl
    def privclust_step_started(self, step: Any, index: int, total: int) -> None:
        if not self.quiet:
            print(f"[{index + 1}/{total}] {step.use} ...", file=self.stream, flush=True)

    @hookimpl
    def privclust_step_progress(self, step: Any, index: int, done: float, total: float | None) -> None:
        if self.quiet:
            return
        if self._bar is None:
            # components report whole records done (privclust.RecordProgress), so the bar counts records
            self._bar = tqdm(total=total, file=self.stream, desc=f"  {step.use}", leave=False, disable=None,
                             unit=" records", bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                                         "records" + (" [{elapsed}<{remaining}]" if self.timed else ""))
        if total is not None and self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    @hookimpl
    def privclust_step_finished(self, step: Any, index: int, outcome: Any) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if not self.quiet:
            print(f"      done in {outcome.elapsed:.3g} s" if self.timed else "      done", file=self.stream,
                  flush=True)


def _registry_with_progress(quiet: bool, *, timed: bool = True) -> tuple[Registry, ProgressDisplay]:
    registry = get_registry()
    display = ProgressDisplay(sys.stderr, quiet=quiet, timed=timed)
    registry.register(display, ProgressDisplay.plugin_name)
    return registry, display


def _report_targets(release: Any, path: Path, non_disclosive: bool) -> list[tuple[Path, Any]]:
    """The report file, and for an HTML report the JSON beside it."""
    name = path.name.lower()
    as_json = text_writer(release.to_json(non_disclosive=non_disclosive) + "\n")
    if name.endswith(".json"):
        return [(path, as_json)]
    if name.endswith((".html", ".htm")):
        return [(path, text_writer(release.to_html(non_disclosive=non_disclosive))),
                (path.with_suffix(".json"), as_json)]
    raise PrivclustError(f"{path}: a report is written as .json or .html")


def _with_roles(recipe: Recipe, args: argparse.Namespace) -> Recipe:
    """The recipe with the roles given as flags (each replaces that role)."""
    given = {}
    for role in ("ids", "weight", "strata", "keys"):
        text = getattr(args, role, None)
        if text is not None:
            columns = [c.strip() for c in text.split(",") if c.strip()]
            if not columns:
                raise PrivclustError(f"--{role}: name at least one column (comma-separated)")
            given[role] = columns
    if getattr(args, "small_strata", None):
        given["small_strata"] = args.small_strata
    if not given:
        return recipe
    table = {**recipe.to_dict(), "roles": {**recipe.roles.to_dict(), **given}}
    return Recipe.from_dict(table, source=str(getattr(args, "recipe", "")) or None, folder=recipe.folder)


def _inputs(args: argparse.Namespace) -> dict[str, str | None]:
    """The files ``privclust run`` reads, which no output may overwrite: the
    data, the recipe and the seed file."""
    return {"--input": args.input, "the recipe": args.recipe, "--seed-file": args.seed_file}


def _load_recipe(args: argparse.Namespace) -> Recipe:
    return _with_roles(Recipe.from_toml(Path(args.recipe)), args)


def _order_text(seeded: bool) -> str:
    """How the summary says the written rows are ordered: a random order only when no seed was given; a seeded run's
    order is a function of the seed, which puts every row back at its input position (the verdict says so)."""
    return ("in an order drawn from the seed: whoever has the seed can put them back in the input's order" if seeded
            else "in a random order")


def _cmd_run_dataset(args: argparse.Namespace, recipe: Recipe) -> int:
    """``privclust run`` on a Parquet dataset (a folder): stratum by stratum."""
    output = Path(args.output)
    report = Path(args.report) if args.report else None
    if args.output == STDIO:
        raise PrivclustError("a dataset (a folder) is written to a folder: give --output a new folder, not -")
    if args.keep_order:
        raise PrivclustError("--keep-order: a dataset (a folder) is written stratum by stratum, each stratum's rows in "
                             "a random order drawn from its run; leave out --keep-order, or protect a single file")
    check_outputs(report_paths(report), _inputs(args))
    if report is not None and not report.name.lower().endswith((".json", ".html", ".htm")):
        raise PrivclustError(f"{report}: a report is written as .json or .html")
    if not args.quiet:
        on = args.scheduler or (f"{args.processes} local process(es)" if args.processes else "local processes")
        print(f"protecting {args.input} stratum by stratum on {on} ...", file=sys.stderr, flush=True)
    seed = run_seed(args)
    before, files = len(published()), len(committed())
    targets: list[tuple[Path, Any]] = []
    try:
        release = run_dataset(recipe, args.input, output, seed=seed, scheduler=args.scheduler,
                              processes=args.processes, timeout=args.timeout)
        if report is not None:
            targets = _report_targets(release, report, args.non_disclosive)
            write_atomically(targets)
    except BaseException:  # all or nothing: without its report the dataset is not released either
        # A stop held back while the report was renamed into place comes after it: the release is whole then.
        reported = report is not None and len(committed()) - files == len(targets) > 0
        if not reported:
            for path in published()[before:]:  # only a folder this run published (a stop may come as it returns)
                shutil.rmtree(path, ignore_errors=True)
        raise
    if not args.quiet:
        print(f"{release.verdict}\nwrote {output} ({release.records} records in {len(release.strata)} strata, each "
              f"{_order_text(release.seeded)})"
              + "".join(f" and {path}" for path, _ in targets), file=sys.stderr)
    return 0


def _default_lines(compiled: Any, frame: pd.DataFrame, *, named: bool = True) -> list[str]:
    """The columns each step without ``columns`` changes by default (``named``), with warnings."""
    return default_step_lines(frame, compiled.recipe.roles,
                              [(cs.index, cs.id, cs.kind != "clusterers", spends_privacy(cs.component))
                               for cs in compiled.steps if cs.step.columns is None], named=named)


def _original_rule_lines(compiled: Any, frame: pd.DataFrame, non_disclosive: bool = False) -> list[str]:
    """How many original records break each edit rule and by how much (the
    residuals are left out of a non-disclosive run: a largest residual is an
    individual record's value)."""
    breaks = rule_breaks(frame, ConstraintSet.of(compiled.constraints, tuple(map(str, frame.columns))))
    if non_disclosive:
        breaks = [{**b, "max_residual": None, "total_residual": None} for b in breaks]
    return rule_breaks_lines(breaks)


def figures_text(release: Any, non_disclosive: bool) -> str:
    """The summary's table of headline figures (risk before and after, and
    utility), as the report holds them; empty without evaluators."""
    rows = release.report(non_disclosive=non_disclosive)["evaluations"]
    lines = summary_table(rows, assessment=bool(release.verification.get("assessment")))
    if not lines:
        return ""
    note = ("headline figures (risk before protection and after; every figure is in the report):"
            if not release.verification.get("assessment") else "headline figures of the original file:")
    if release.dp_guarantee:
        note += " computed from the original data, they are not differentially private:"
    return note + "\n" + "\n".join("  " + line for line in lines) + "\n"


def _cmd_run(args: argparse.Namespace) -> int:
    recipe = _load_recipe(args)
    if args.input != STDIO and Path(args.input).is_dir():
        return _cmd_run_dataset(args, recipe)
    to_stdout = args.output == STDIO
    output = Path(args.output)
    report = Path(args.report) if args.report else None
    check_outputs({"--output": args.output, **report_paths(report)},
                  _inputs(args))
    if not to_stdout:
        frame_writer(None, output)  # type: ignore[arg-type]  # checks the suffix before any work
    if report is not None and not report.name.lower().endswith((".json", ".html", ".htm")):
        raise PrivclustError(f"{report}: a report is written as .json or .html")
    data = read_frame(args.input)
    # Strata on a Dask cluster: the workers rebuild the registry, so the progress display (which writes
    # to this terminal) is not registered; local processes and one process show it as the steps finish.
    registry, _ = _registry_with_progress(args.quiet or args.scheduler is not None, timed=not args.non_disclosive)
    # with the release on standard output, what a component prints while the steps and evaluators run goes to
    # standard error: a plugin's debug print went into the released CSV (original records, a red-team audit)
    with _stdout_to_stderr() if to_stdout else contextlib.nullcontext() as diverted:
        try:
            compiled = compile(recipe, registry)
            for line in _default_lines(compiled, data):
                if not args.quiet or line.startswith("warning"):
                    print(line, file=sys.stderr)
            release = run(compiled, data, seed=run_seed(args), scheduler=args.scheduler,
                          processes=args.processes, timeout=args.timeout)
        finally:
            registry.unregister(ProgressDisplay.plugin_name)
        order = None if args.keep_order else release.publication_order
        targets = [] if to_stdout else [(output, frame_writer(release.data, output, order))]
        if report is not None:
            targets += _report_targets(release, report, args.non_disclosive)
        if not to_stdout:
            write_atomically(targets)
    if diverted is not None and diverted.written:
        print(f"warning: a component wrote {diverted.written} character(s) to standard output while the recipe ran; "
              "they were sent to standard error (above), so that standard output holds only the released CSV",
              file=sys.stderr)
    if to_stdout:
        # The report(s) to temporary files first (a failure there leaves standard output empty), then the whole
        # release to standard output, and only then the report(s) moved into place: a report committed before the
        # release was streamed described a release that a full disk, a reader gone away or a signal then cut off.
        write_atomically(targets, before_commit=lambda: _stream_release(release.data, order,
                                                                        [t[0] for t in targets]),
                         unwritten=f"{_WHOLE_STREAM}, but no report was written (an existing one is left as it was)")
    if not args.quiet:
        files = [str(t[0]) for t in targets[0 if to_stdout else 1:]]
        where = "standard output" if to_stdout else str(output)
        # The summary opens with the host's verdict (the report's first field too).
        print(f"{release.verdict}\n" + (f"{release.used_text(non_disclosive=args.non_disclosive)}\n"
                                     if release.effective_changes(non_disclosive=args.non_disclosive) else "")
              + figures_text(release, args.non_disclosive)
              + "".join(line + "\n" for line in _original_rule_lines(compiled, release.original,
                                                                       args.non_disclosive))
              + f"wrote {where} ({release.data.shape[0]} records, "
              + ("in the input's order (--keep-order)" if args.keep_order else _order_text(release.seeded)) + ")"
              + (f" and {' and '.join(files)}" if files else ""), file=sys.stderr)
    return 0


#: Where the release stands on standard output: "" (not written there), "part" (being written: an interruption
#: then says it was cut off) or "whole" (written and flushed: an interruption or a report that cannot be put in
#: place then says that the release went out without its report).
_STREAMING = [""]

_WHOLE_STREAM = "the whole released CSV went to standard output"
#: The reports asked for beside a release written to standard output.
_STREAM_REPORTS: list[Path] = []


def _stream_release(frame: pd.DataFrame, order: Any, reports: Sequence[Path]) -> None:
    """Write the release to standard output, whole, and flush it (``privclust
    run -o -``), before any report is committed.

    :raises BrokenPipeError: the reader went away and no report was asked
        for (the command then exits 0, as ``... | head`` expects).
    :raises PrivclustError: standard output could not take the whole release
        (a full disk, a reader gone away when a report was asked for: the
        report would describe a release that was not delivered)."""
    _STREAMING[0] = "part"
    _STREAM_REPORTS[:] = reports
    try:
        write_csv(frame, sys.stdout, order=order)  # columns released as in the original: their original text
        sys.stdout.flush()
    except OSError as err:
        _stdout_to_null()  # what is left in its buffer goes nowhere, and the exit raises nothing more
        if isinstance(err, BrokenPipeError) and not reports:
            raise
        gone = isinstance(err, BrokenPipeError)
        reason = "the reader went away (broken pipe)" if gone else err.strerror or str(err)
        fix = ("let the reader read it to the end (head, for one, stops early)" if gone else
               "make room where standard output goes")
        raise PrivclustError(
            f"cannot write the release to standard output ({reason}): it got only part of the CSV"
            + (f", and {' and '.join(map(str, reports))} {'was' if len(reports) == 1 else 'were'} not written (a "
               "report is written only for a release written whole; an existing one is left as it was)"
               if reports else "") + f"; {fix}, or write the release to a file with --output"
        ) from err
    _STREAMING[0] = "whole"


def _stdout_to_null() -> None:
    """Point descriptor 1 at the null device (standard output can no longer be written)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stdout.fileno())
        finally:
            os.close(null)


class _Diverted:
    """Standard output while the recipe runs with the release on standard
    output: what is written goes to standard error, counted."""

    def __init__(self, target: TextIO):
        self.target = target
        self.written = 0

    def write(self, text: str) -> int:
        self.written += len(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self.target, "encoding", "utf-8")


@contextlib.contextmanager
def _stdout_to_stderr() -> Any:
    """Send standard output to standard error: ``sys.stdout`` (counted, see
    :class:`_Diverted`) and descriptor 1 (to descriptor 2), so that a C
    extension's or a worker process's output stays off it too."""
    sys.stdout.flush()
    saved = None
    with contextlib.suppress(OSError):  # descriptors 1 and 2, whatever object sys.stdout is now
        saved = os.dup(1)
        os.dup2(2, 1)
    diverted = _Diverted(sys.stderr)
    try:
        with contextlib.redirect_stdout(diverted):  # type: ignore[type-var]
            yield diverted
    finally:
        sys.stderr.flush()
        if saved is not None:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def _cmd_check(args: argparse.Namespace) -> int:
    recipe = _load_recipe(args)
    compiled = compile(recipe)
    roles = recipe.roles
    lines = [f"recipe {args.recipe}: OK against the installed plugins"]
    for role in ("ids", "weight", "strata", "keys", "numeric"):
        if getattr(roles, role):
            lines.append(f"  role {role}: {', '.join(getattr(roles, role))}")
    if not compiled.steps:
        lines.append("  assessment: the recipe has no steps; run releases the original unchanged, protects nothing "
                     "and measures its risk")
    if roles.strata:
        small = "merged with its neighbour" if roles.small_strata == "merge" else "refused"
        lines.append(f"  strata: every step runs within each stratum of {', '.join(roles.strata)} alone; a stratum "
                     f"smaller than a step needs is {small}")
    for cs in compiled.steps:
        cols = ", ".join(cs.step.columns) if cs.step.columns else ", ".join(roles.numeric) if roles.numeric else \
            ("the numeric columns without a role" if roles else "all numeric columns") + " (integer codes left out)"
        lines.append(f"  step {cs.index} {cs.id!r}: {cs.role} {cs.step.use} on {cols}"
                     + (f", once per group of identical {', '.join(within_columns(cs.step, roles))}"
                        + (" (the keys)" if cs.step.within == WITHIN_KEYS else "")
                        + (" within each stratum" if roles.strata else "") if cs.step.within is not None else ""))
    for spec in recipe.evaluate:
        lines.append(f"  evaluate: {spec.use}")
    if recipe.privacy.limited:
        planned = sum(c[0] for c in planned_costs(compiled.steps))
        lines.append(f"  budget: epsilon {exact(recipe.privacy.epsilon)}, delta {exact(recipe.privacy.delta)}; the "
                     f"steps declare at least epsilon {at_least(planned)} in all, which fits (a cost that depends "
                     "on the data, such as dp-dpcl's with calibration = \"paper\", epsilon x 2(n - 1) for n records, "
                     "is "
                     "checked when the step runs, before it draws any noise)")
    if recipe.privacy.allow_leaks:
        lines.append(f"  allow_leaks: {', '.join(recipe.privacy.allow_leaks)}: these parameters may be taken from the "
                     "data, and a release that does so has no differential-privacy guarantee")
    if args.input:
        if args.input != STDIO and Path(args.input).is_dir():  # "unknown file type" of what run accepts
            raise PrivclustError(f"--input {args.input} is a folder: check does not read a Parquet dataset (run "
                                 "checks it stratum by stratum as it runs); check the recipe against one file of "
                                 "the data (e.g. one stratum's), or without --input")
        checked = preflight(compiled, read_frame(args.input))  # the checks `run` makes before its first step
        lines.append(f"  data {args.input}: {checked.frame.shape[0]} records; {checked_text(compiled, checked)}")
        changed: set[str] = set()
        private: set[str] = set()  # written by a differentially private step: not rounded by the host
        for cs, columns in zip(compiled.steps, checked.step_columns, strict=True):
            if cs.kind != "clusterers" and spends_privacy(cs.component):
                private.update(columns)
            if cs.kind == "clusterers":
                lines.append(f"    step {cs.index} {cs.id!r} changes no value; it adds the label column "
                             f"{cs.step.output or DEFAULT_LABEL_COLUMN!r}")
            else:
                changed.update(columns)
                lines.append(f"    step {cs.index} {cs.id!r} changes {', '.join(columns)}"
                             + (f" (by default: {default_reason(roles, private=spends_privacy(cs.component))})"
                                if cs.step.columns is None else ""))
        lines.extend("    " + line for line in _default_lines(compiled, checked.frame, named=False))
        lines.extend("    " + line for line in within_lines(compiled, checked))
        rounded = [c for c in integer_columns(checked.frame) if c in changed and c not in private]
        if rounded:
            lines.append(f"    integer columns, rounded by the host after the steps and released as integers: "
                         f"{', '.join(rounded)}" + (" (except a key a key masker releases as text: recode's labels)"
                                                    if any(cs.id and cs.kind == "maskers" and getattr(
                                                        type(cs.component), "key_masker", False) is True
                                                        for cs in compiled.steps) else ""))
        role_of = roles.columns
        kept = [f"{c} ({role_of[c]})" if c in role_of else str(c) for c in checked.frame.columns if c not in changed]
        lines.append(f"    released as in the data: {', '.join(kept) if kept else '(none)'}")
        if checked.parts is not None:
            sizes = [len(rows) for _, rows in checked.parts]
            lines.append(f"    strata: {len(sizes)} (records per stratum: {min(sizes)} to {max(sizes)})"
                         + (f"; merged: {', '.join(checked.merges)}" if checked.merges else ""))
        lines.extend("    " + line for line in _original_rule_lines(compiled, checked.frame))
        lines.append(f"  {UNCHECKED}")
    print("\n".join(lines))
    return 0


def _cmd_plugins(args: argparse.Namespace) -> int:
    registry = get_registry()
    rows = [info.to_dict(parameters=args.json) for info in registry.components()]
    replaced = registry.replaced()
    if args.json:
        plugins = [attrs.asdict(p) for p in registry.plugins()]
        print(json.dumps({"plugins": plugins, "components": rows,
                          "replaced": [info.to_dict() for info in replaced]}, indent=2))
        return 0
    header = ("kind", "name", "plugin", "distribution", "version") + (("replaces",) if replaced else ())
    table = [header] + [tuple(r[h] for h in header) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    for info in replaced:
        print(f"\n{info.kind.replace('_', ' ')[:-1]} {info.name!r} of plugin {info.plugin!r} ({info.distribution} "
              f"{info.version}) is replaced by the one of plugin {info.replaced_by!r}; choose it back in a recipe with "
              f"use = \"{info.qualified}\", or everywhere with {ENV_DISABLE}={info.replaced_by}:{info.name}")
    return 0


def _figure_writer(table: Any, path: Path, risk: str | None, loss: str | None) -> Any:
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise PrivclustError(f"{path}: a plot is written as .png, .svg or .pdf")
    ax = risk_utility_map(table, risk=risk, loss=loss, detached=True)  # no pyplot: nothing to close

    def write(tmp: Path) -> None:
        ax.figure.savefig(tmp, format=path.suffix.lower().lstrip("."), dpi=120, bbox_inches="tight")

    return write


def _cmd_compare(args: argparse.Namespace) -> int:
    output = Path(args.output)
    frame_writer(None, output)  # type: ignore[arg-type]  # checks the suffix before any work
    if args.summary:
        frame_writer(None, Path(args.summary))  # type: ignore[arg-type]
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise PrivclustError(f"{args.plot}: a plot is written as .png, .svg or .pdf")
    check_outputs({"--output": output, "--summary": args.summary, "--plot": args.plot},
                  {"--input": args.input, **{f"the recipe {r}": r for r in args.recipes}})
    grid: dict[str, Any] = {}
    for text in args.sweep:
        head, _, _ = text.partition("=")
        recipe_name = None
        if ":" in head:  # "NAME:step.param=values" sweeps one recipe only
            recipe_name, _, text = text.partition(":")
            recipe_name = recipe_name.strip()
        key, values = parse_sweep(text)
        target = grid if recipe_name is None else grid.setdefault(recipe_name, {})
        if key in target:
            raise PrivclustError(f"--sweep {key} is given twice; list all its values in one --sweep")
        target[key] = values
    recipes = [Recipe.from_toml(Path(r)) for r in args.recipes]
    named = {}
    for path, recipe in zip(args.recipes, recipes, strict=True):
        named[recipe.name or Path(path).stem] = recipe
    if len(named) != len(recipes):
        named = {f"{Path(p).stem}": r for p, r in zip(args.recipes, recipes, strict=True)}
    if args.plot:  # before the first run: a map that cannot be drawn failed after every run and lost them all
        check_plot(recipes, args.risk, args.loss)
    data = read_frame(args.input)
    start = time.perf_counter()
    table = compare(named, data, grid=grid or None, repeats=args.repeats, seed=args.seed,
                    scheduler=args.scheduler, processes=args.processes, timeout=args.timeout,
                    progress=not args.quiet)
    elapsed = time.perf_counter() - start
    targets = [(output, frame_writer(table, output))]
    if args.summary:
        summary_path = Path(args.summary)
        targets.append((summary_path, frame_writer(summarize(table), summary_path)))
    if args.plot:
        targets.append((Path(args.plot), _figure_writer(table, Path(args.plot), args.risk, args.loss)))
    write_atomically(targets)
    failed = int(table["error"].notna().sum())
    if not args.quiet:
        print(f"{len(table)} runs ({failed} failed) in {elapsed:.1f} s; wrote "
              + ", ".join(str(t[0]) for t in targets), file=sys.stderr)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    """Audit every DP step of a recipe; exit 1 when a lower bound exceeds its charge."""
    recipe = Recipe.from_toml(Path(args.recipe))
    if args.trials < 20:
        raise PrivclustError(f"--trials must be at least 20 (runs per input); got {args.trials}")
    data = read_frame(args.input) if args.input else None
    audits = testing.audit_recipe(recipe, data, trials=args.trials, seed=0 if args.seed is None else args.seed,
                                  registry=get_registry())
    source = args.input or "a synthetic frame (privclust.testing.example_frame: columns a, b, c)"
    if not audits:
        print(f"audit of {args.recipe} on {source}: no step records a differentially private release; "
              "nothing to audit")
        return 0
    first = audits[0].result
    print(f"audit of {args.recipe} on {source}: {len(audits)} DP step(s), {args.trials} runs per input "
          f"({first.confidence:.0%} confidence per step)")
    failed = []
    for a in audits:
        r = a.result
        # passed on the values audited; INCONCLUSIVE when some released values were not audited (r.unseen)
        sign, verdict = ("<=", "passed" if r.verdict == "PASSED" else r.verdict) if r.passed else (">", "FAILED")
        lower, claim = r.shown_figures()  # the charge rounded up, the lower bound down
        print(f"  step {a.index} {a.step_id!r} ({a.component}): epsilon lower bound {lower} "
              f"{sign} charged {claim}: {verdict}")
        print(f"      event: {r.event}; counts {r.counts[0]} and {r.counts[1]} of {r.trials}")
        for note in r.notes:
            print(f"      note: {note}")
        if not r.passed:
            failed.append(f"step {a.index} ({a.component})")
    for index, step_id, component in getattr(audits, "skipped", ()):
        print(f"  step {index} {step_id!r} ({component}): records no DP release, not audited")
    no_guarantee = getattr(audits, "no_guarantee", None)
    if no_guarantee:
        print("the release as a whole has no differential-privacy guarantee (privclust run on the same data: "
              f"{no_guarantee}); the audit checks each DP step's own claim only")
    if failed:
        print(f"privclust: audit failed: the lower bound exceeds the epsilon charged for {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


def demo_recipe_path() -> Path:
    """The recipe ``privclust demo`` runs."""
    return Path(str(resources.files("privclust") / "recipes" / "demo.toml"))


def _cmd_demo(args: argparse.Namespace) -> int:
    """The main job: Torra's Table 1 protected by constrained fuzzy
    microaggregation, with the rule checked record by record, the centres,
    the evaluations and the ledger."""
    if args.output:
        frame_writer(None, Path(args.output))  # type: ignore[arg-type]  # checks the suffix before any work
        check_outputs({"--output": args.output})
    recipe_path = demo_recipe_path()
    recipe = Recipe.from_toml(recipe_path)
    data = table1()
    registry, _ = _registry_with_progress(quiet=True)
    try:
        compiled = compile(recipe, registry)
        for line in _default_lines(compiled, data):
            if not args.quiet or line.startswith("warning"):
                print(line, file=sys.stderr)
        release = run(compiled, data, seed=args.seed, registry=registry)
    finally:
        registry.unregister(ProgressDisplay.plugin_name)
    columns = tuple(map(str, data.columns))
    rules = ConstraintSet.of(compiled.constraints, columns)
    out = sys.stdout
    width = 78

    def heading(text: str) -> None:
        print("\n" + textwrap.fill(text, width) + "\n", file=out)

    def wrapped(text: str, indent: str = "  ", first: str = "  ") -> None:
        print(textwrap.fill(" ".join(text.split()), width, initial_indent=first, subsequent_indent=indent), file=out)

    print("=" * width, file=out)
    print(f"privclust {__version__} demo. {recipe.name or recipe_path.name}", file=out)
    if recipe.description:
        print(textwrap.fill(" ".join(recipe.description.split()), width), file=out)
    print("=" * width, file=out)
    # like every release (the CLI's summary, the reports), the demo opens with the host's verdict
    heading("Verdict (the host's, on the released file):")
    wrapped(release.verdict)
    print(f"\nRecipe ({recipe_path}, name and description as above):\n", file=out)
    body = attrs.evolve(recipe, name=None, description=None).to_toml().strip()
    print("    " + body.replace("\n", "\n    "), file=out)
    floats = {"display.width": width, "display.float_format": "{:.2f}".format}
    with pd.option_context(*[x for kv in floats.items() for x in kv]):
        heading(f"Original data (Torra, Table 1) and the edit rule {TABLE1_RULE} "
                "(residual = total - 1.16*exp16 - 1.07*exp7):")
        print(_with_rule_check(data, rules), file=out)
        for outcome in release.outcomes:
            part = outcome.partition
            if part is None or part.centres is None or outcome.kind != "maskers":
                continue
            centres = pd.DataFrame(np.asarray(part.centres), columns=list(part.columns))
            table = _with_rule_check(centres, rules if tuple(part.columns) == columns else None)
            if part.memberships is not None:
                sums = part.memberships.column_sums() if hasattr(part.memberships, "column_sums") else \
                    np.asarray(part.memberships).sum(axis=0)
                table["expected size"] = sums
            table["drawn by"] = np.bincount(np.asarray(part.labels), minlength=len(centres))
            dg = outcome.diagnostics
            how = ", ".join(f"{key} = {dg[key]:g}" for key in ("m1", "m2", "lambda1", "lambda2")
                            if isinstance(dg.get(key), int | float))
            heading(f"Centres of step {outcome.id!r} ({how}), projected onto the rules, with their expected "
                    "cluster sizes (sums of memberships) and how many records drew each:")
            print(table, file=out)
        shown = _with_rule_check(release.data, rules)
        for outcome in release.outcomes:
            part = outcome.partition
            if part is not None and outcome.kind == "maskers":
                shown[f"centre ({outcome.id})" if len(release.outcomes) > 1 else "centre"] = np.asarray(part.labels)
        heading("Protected data (each record replaced by the centre it drew):")
        print(shown, file=out)
    if rules is not None:
        heading("Rule check:")
        before, after = _rules_violated(data, rules), _rules_violated(release.data, rules)
        for r, text in enumerate(rules.rules):
            wrapped(f"{text}: original {before[r]} of {len(data)} records violate it; protected {after[r]} of "
                    f"{len(release.data)}.")
    if len(release.evaluations):
        heading("Evaluations:")
        # one line per evaluation, with what its figures are computed on (two entries of one evaluator on
        # different columns were printed as one line, and no line said its columns or weight)
        for (evaluator, on), rows in release.evaluations.groupby(["evaluator", "columns"], sort=False):
            figures = ", ".join(f"{m} = {v:.4g}" for m, v in zip(rows["metric"], rows["value"], strict=True))
            wrapped(f"{figures} (on {on})", indent=" " * 22, first=f"  {evaluator:<19} ")
    heading("Ledger:")
    for entry in release.ledger:
        wrapped(entry.statement, indent="      ", first=f"  [{entry.kind}] ")
    if args.output:
        path = Path(args.output)
        release.write(path)  # as privclust run writes a file: the rows in the order drawn from the run
        print(f"\nwrote {path} ({release.data.shape[0]} records, {_order_text(release.seeded)})", file=out)
    return 0


def _rules_violated(frame: Any, rules: ConstraintSet) -> np.ndarray:
    """Per rule, how many records of ``frame`` violate it (the host's own test, :func:`judge`)."""
    return judge(rules, frame.loc[:, list(rules.columns)].to_numpy(dtype=float, na_value=np.nan),
                 integer=integer_flags(frame, rules.columns)).violated.sum(axis=0)


def _with_rule_check(frame: Any, rules: Any = None) -> Any:
    """The frame with the Table 1 residual ``total - (1.16 exp16 + 1.07
    exp7)`` and, given the recipe's rules, whether each record satisfies
    every rule."""
    shown = frame.copy()
    if {"exp16", "exp7", "total"} <= set(frame.columns):
        residual = frame["total"] - (1.16 * frame["exp16"] + 1.07 * frame["exp7"])
        shown["residual"] = residual.where(residual.abs() > 1e-9, 0.0)  # no "-0.00" from float rounding
    if rules is not None and set(rules.columns) <= set(map(str, frame.columns)):
        status = judge(rules, frame.loc[:, list(rules.columns)].to_numpy(dtype=float, na_value=np.nan),
                       integer=integer_flags(frame, rules.columns))
        # a record a rule cannot be decided on (a missing or infinite value) neither satisfies nor violates it
        shown["rule"] = np.where(status.violated.any(axis=1), "VIOLATED",
                                 np.where(status.holds(), "ok", "not evaluable"))
    return shown


#: The function of each command of :func:`~privclust.cliargs.build_parser`.
_COMMANDS = {"run": _cmd_run, "check": _cmd_check, "plugins": _cmd_plugins, "compare": _cmd_compare,
             "audit": _cmd_audit, "demo": _cmd_demo}


#: True in the ``privclust`` process itself (:func:`entry`), not when
#: :func:`main` is called from Python: an interrupted command then ends the
#: process at once (see :func:`_stopped`).
_exit_when_stopped = False


def entry() -> None:
    """The ``privclust`` command: :func:`main`, and the process exits with its status.

    A stop signal at any moment gives the status 128 + its number (130 for
    Ctrl-C) and one line on stderr, never a traceback: while the modules are
    imported (the handlers ``privclust/__init__.py`` installs first), while
    the command line is parsed and after the command has finished (the
    handlers installed here), and while the command runs (those of
    :func:`~privclust._io.handle_signals`)."""
    global _exit_when_stopped
    _exit_when_stopped = True
    for signum in STOP_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(signum) is not signal.SIG_IGN:  # SIGHUP under nohup stays ignored
                signal.signal(signum, _stop_outside_command)
    try:
        status = main()
    except KeyboardInterrupt as err:  # a stop between handle_signals' edges and main's own handling
        status = getattr(err, "exit_status", 130)
        print(f"privclust: interrupted; {_written((0, 0))}", file=sys.stderr)
        _stopped(status)
    sys.stdout.flush()
    sys.exit(status)


def _stop_outside_command(signum: int, frame: object) -> None:
    """A stop signal before or after the command itself ran: say what was
    written and end the process at once with 128 + the signal's number."""
    with contextlib.suppress(Exception):
        print(f"privclust: interrupted by {signal_name(signum)}; {_written((0, 0))}", file=sys.stderr)
    _stopped(128 + signum)
    os._exit(128 + signum)  # pragma: no cover - _stopped ends the process in the command


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with handle_signals(), warnings.catch_warnings():  # signals stop cleanly: nothing half-written
        warnings.showwarning = _show_warning
        return _main(args)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """A warning as a command-line user reads it: no Python file name or source line."""
    text = " ".join(str(message).split())
    print(f"privclust: warning ({category.__name__}): {text}", file=file or sys.stderr)


def _main(args: argparse.Namespace) -> int:
    done = (len(committed()), len(published()))
    _STREAMING[0] = ""
    _STREAM_REPORTS.clear()
    try:
        try:
            read_numbers(args)
            return int(_COMMANDS[args.command](args) or 0)
        except Exception:
            # a stop signal whose exception a library swallowed and replaced by another (matplotlib's renderer
            # turned it into "Invalid bounding box": a traceback and status 1 for a requested stop, red-team audit)
            raise_if_stopped()
            raise
    except Interrupted as err:
        print(f"privclust: interrupted by {signal_name(err.signum)}; {_written(done)}", file=sys.stderr)
        _stopped(err.exit_status)
        return err.exit_status
    except PrivclustError as err:
        recipe = getattr(args, "recipe", None)
        if isinstance(err, RecipeError) and recipe and err.source != str(recipe):
            # name the file the problems are in: compiling names the recipe by its `name`, which is no file
            # (a named recipe's errors read "recipe noisy expenditure: ..." and did not say which file)
            err = RecipeError(err.problems, source=str(recipe))
        message = " ".join(str(err).split())
        print(f"privclust: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"privclust: interrupted; {_written(done)}", file=sys.stderr)
        _stopped(130)
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `privclust demo | head`; `run -o -` without --report)
        _stdout_to_null()
        return 0


def _stopped(status: int) -> None:
    """In the ``privclust`` process, end it at once after an interruption
    (``os._exit``, the streams flushed first; nothing is left to write): a
    step's worker threads may still be running, and unwinding and tearing the
    interpreter down under them crashed the process (a segmentation fault
    after "nothing was written", in 4 of 7 signalled runs of a large fuzzy
    step) instead of returning the documented status."""
    if _exit_when_stopped:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a reader gone away: nothing more to say there
                stream.flush()
        os._exit(status)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def _written(before: tuple[int, int]) -> str:
    """What the command had already put in place when it stopped: the files
    it committed and the output datasets it published and did not remove."""
    paths = [*committed()[before[0]:], *[p for p in published()[before[1]:] if os.path.lexists(p)]]
    if _STREAMING[0] == "whole":  # the report(s) are moved into place after the release was streamed whole
        if not _STREAM_REPORTS:
            return _WHOLE_STREAM
        if not paths:
            return f"{_WHOLE_STREAM}, but no report was written"
        return f"{_WHOLE_STREAM}, and {', '.join(map(str, paths))} {'was' if len(paths) == 1 else 'were'} written"
    cut = " (standard output holds only part of the released CSV)" if _STREAMING[0] else ""
    if not paths:
        return "nothing was written" + cut
    return "the outputs had already been written: " + ", ".join(map(str, paths)) + cut


if __name__ == "__main__":  # pragma: no cover
    entry()
