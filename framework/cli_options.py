"""The command line's options read from their text: seeds (``--seed``,
``--seed-file``, ``PRIVCLUST_SEED``), every numeric option bounded (nan,
inf, fractions and values out of range are one-line errors), and the files
``--report`` writes."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from .compare import MAX_RUNS
from .errors import PrivclustError

__all__ = ["ENV_SEED", "MAX_PROCESSES", "MAX_SEED", "MAX_TIMEOUT", "NUMERIC_OPTIONS", "SEED_FILE_BYTES",
           "parse_seed", "read_numbers", "read_seed_file", "report_paths", "run_seed", "seconds", "whole_number"]


#: The environment variable ``privclust run`` reads a seed from (kept out of the process list).
ENV_SEED = "PRIVCLUST_SEED"


#: The largest seed (numpy's SeedSequence takes any non-negative integer; 128 bits is all the entropy it keeps).
MAX_SEED = 2**128 - 1
#: The most bytes read from a seed file (a seed of 128 bits has 39 digits).
SEED_FILE_BYTES = 256


def parse_seed(text: str, where: str) -> int:
    """A seed written as a whole number from 0 to :data:`MAX_SEED`."""
    text = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,60}", text):
        # the text is not echoed: a seed with a typo is still most of a seed, and error messages end up in logs
        raise PrivclustError(f"{where}: a seed is a non-negative whole number, at most 2^128 - 1 (digits 0-9 only); "
                             f"got {len(text)} character(s) that are not one (not shown: it may be a seed)")
    value = int(text, 10)
    if not 0 <= value <= MAX_SEED:
        raise PrivclustError(f"{where}: a seed is a non-negative whole number, at most 2^128 - 1; got a "
                             f"{'negative number' if value < 0 else 'larger number'} (not shown: it may be a seed)")
    return value


def read_seed_file(path: Path) -> str:
    """The text of a seed file: a regular file of at most
    :data:`SEED_FILE_BYTES` bytes (a device such as /dev/zero, a FIFO or a
    folder is refused without being read, or waited on)."""
    where = f"--seed-file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise PrivclustError(f"{where}: cannot read it ({err.strerror or err})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a device, a FIFO or a socket)"
            raise PrivclustError(f"{where}: it is {kind}; give a file holding the seed")
        raw = os.read(fd, SEED_FILE_BYTES + 1)
    except OSError as err:
        raise PrivclustError(f"{where}: cannot read it ({err.strerror or err})") from None
    finally:
        os.close(fd)
    if len(raw) > SEED_FILE_BYTES:
        raise PrivclustError(f"{where}: the file is longer than {SEED_FILE_BYTES} bytes; a seed file holds one whole "
                             "number")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PrivclustError(f"{where}: the file is not text; a seed file holds one whole number") from None


def run_seed(args: argparse.Namespace) -> int | None:
    """The seed of a run: ``--seed N``, ``--seed-file PATH`` or the
    ``PRIVCLUST_SEED`` environment variable (at most one of the first two;
    either overrides the variable). The last two keep the seed out of the
    process list."""
    if args.seed is not None and args.seed_file is not None:
        raise PrivclustError("give either --seed or --seed-file, not both")
    if args.seed is not None:
        return int(args.seed)
    if args.seed_file is not None:
        path = Path(args.seed_file)
        return parse_seed(read_seed_file(path), f"--seed-file {path}")
    env = os.environ.get(ENV_SEED)
    if env is not None and env.strip():
        return parse_seed(env, ENV_SEED)
    return None


def whole_number(text: str, option: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high``, written in the digits 0-9."""
    if not re.fullmatch(r"\s*[+-]?[0-9]{1,60}\s*", text):
        raise PrivclustError(f"{option} must be a whole number from {low:,} to {high:,}; got {text[:20]!r}")
    value = int(text)
    if not low <= value <= high:
        raise PrivclustError(f"{option} must be a whole number from {low:,} to {high:,}; got {value:,}")
    return value


#: The longest wait for a Dask scheduler (seconds): a day.
MAX_TIMEOUT = 86_400.0


def seconds(text: str, option: str) -> float:
    """A number of seconds, more than 0 and at most :data:`MAX_TIMEOUT` (no nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise PrivclustError(f"{option} must be a number of seconds more than 0 and at most {MAX_TIMEOUT:g} (a "
                             f"day); got {text[:20]!r}")
    return value


#: The most local worker processes a command starts.
MAX_PROCESSES = max(256, 4 * (os.cpu_count() or 1))

#: Every numeric option of every command, read from its text by the command (not by argparse, whose errors are
#: several lines): each is bounded, and nan, inf, fractions and values out of range are one-line errors.
NUMERIC_OPTIONS: dict[str, Any] = {
    "seed": lambda text: parse_seed(text, "--seed"),
    "processes": lambda text: whole_number(text, "--processes", 1, MAX_PROCESSES),
    "timeout": lambda text: seconds(text, "--timeout"),
    "repeats": lambda text: whole_number(text, "--repeats", 1, MAX_RUNS),
}


def read_numbers(args: argparse.Namespace) -> None:
    """Replace the text of each numeric option given by its checked value."""
    for name, read in NUMERIC_OPTIONS.items():
        text = getattr(args, name, None)
        if isinstance(text, str):
            setattr(args, name, read(text))


def report_paths(report: Path | None) -> dict[str, Path]:
    """The files ``--report`` writes: the report, and the JSON beside an HTML one."""
    if report is None:
        return {}
    if report.name.lower().endswith((".html", ".htm")):
        return {"--report": report, "the JSON written beside --report": report.with_suffix(".json")}
    return {"--report": report}
