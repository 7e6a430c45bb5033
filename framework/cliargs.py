"""The command line of ``privclust``: its parser, and nothing heavier.

``privclust --version`` and ``privclust --help`` (and a malformed command
line) are answered here, before pandas, numpy or the commands are imported
(:mod:`privclust.__main__`); :mod:`privclust.cli` runs the command parsed.
"""

from __future__ import annotations

import argparse

from . import __version__

__all__ = ["COMMANDS", "build_parser"]

#: The commands, in the order ``--help`` lists them.
COMMANDS = ("run", "check", "plugins", "compare", "audit", "demo")


def _add_role_flags(p: argparse.ArgumentParser) -> None:
    """The flags that mirror a recipe's ``[roles]`` table (a flag replaces that role of the recipe)."""
    g = p.add_argument_group("roles (as the recipe's [roles] table; a flag replaces that role of the recipe)")
    g.add_argument("--ids", metavar="COLS", help="identifier columns, comma-separated (released unchanged)")
    g.add_argument("--weight", metavar="COL", help="the sampling-weight column")
    g.add_argument("--strata", metavar="COLS", help="public stratum columns, comma-separated: every step runs "
                                                    "within each stratum alone")
    g.add_argument("--keys", metavar="COLS", help="categorical key variables (quasi-identifiers), comma-separated")
    g.add_argument("--small-strata", choices=("refuse", "merge"),
                   help="what to do with a stratum smaller than a step needs (default: refuse)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="privclust", description="Protect a data set before release.")
    parser.add_argument("--version", action="version", version=f"privclust {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run a recipe on a data file")
    p.add_argument("recipe", help="the recipe (a TOML file)")
    p.add_argument("--input", "-i", required=True,
                   help="the data (.csv, .csv.gz, .tsv, .parquet; - reads CSV from standard input; a folder: a "
                        "Parquet dataset protected stratum by stratum)")
    p.add_argument("--output", "-o", required=True,
                   help="where to write the protected data (.csv or .parquet; - writes CSV to standard output; "
                        "for a dataset input, a new folder)")
    p.add_argument("--report", help="where to write the report (.json, or .html with the .json beside it)")
    p.add_argument("--non-disclosive", action="store_true",
                   help="leave out of the report everything derived from individual original values")
    p.add_argument("--seed", metavar="N", help="seed for reproducible experiments (never written to the report; "
                                             "visible in the process list: prefer --seed-file or PRIVCLUST_SEED)")
    p.add_argument("--seed-file", metavar="PATH",
                   help="read the seed from this file (keeps it out of the process list); the PRIVCLUST_SEED "
                        "environment variable does the same")
    p.add_argument("--keep-order", action="store_true",
                   help="write the released rows in the input's order (default: a random order drawn from the run's "
                        "randomness; in the input's order, whoever knows that order, or a file sorted by a column, "
                        "links every row to its record)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--scheduler", help='run the strata as independent tasks on a Dask cluster: "local" for a '
                                       "LocalCluster, or an address such as tcp://host:8786")
    p.add_argument("--processes", metavar="N", help="run the strata as independent tasks on this many local processes")
    p.add_argument("--timeout", metavar="SECONDS", default=10.0, help="seconds to wait for the scheduler (default 10)")
    _add_role_flags(p)

    p = sub.add_parser("check", help="validate a recipe against the installed plugins without running it")
    p.add_argument("recipe")
    p.add_argument("--input", "-i", help="also check that the data have the columns the recipe uses")
    _add_role_flags(p)

    p = sub.add_parser("plugins", help="list the installed plugins and their components")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output, with each component's description and parameters")

    p = sub.add_parser("compare", help="run several recipes and/or a parameter sweep and tabulate the figures")
    p.add_argument("recipes", nargs="+", metavar="RECIPE", help="recipe files (TOML)")
    p.add_argument("--input", "-i", required=True, help="the data (.csv, .csv.gz, .tsv, .parquet)")
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=VALUES",
                   help='e.g. "mask.k=3,5,10" or "privacy.epsilon=0.1:2:0.1" (repeatable: the grid is their product); '
                        'prefix a recipe name ("mdav:mask.k=3,5") to sweep that recipe only')
    p.add_argument("--repeats", metavar="N", default=1, help="runs per configuration (default 1)")
    p.add_argument("--scheduler", help='a Dask scheduler address (tcp://host:8786), or "local" for a LocalCluster; '
                                       "default: local processes")
    p.add_argument("--processes", metavar="N", help="local worker processes (default: one per core)")
    p.add_argument("--timeout", metavar="SECONDS", default=10.0, help="seconds to wait for the scheduler (default 10)")
    p.add_argument("--seed", metavar="N", help="seed for a reproducible table (never written to it)")
    p.add_argument("--output", "-o", required=True, help="where to write the table (.csv or .parquet)")
    p.add_argument("--summary", help="also write the mean and spread per configuration (.csv or .parquet)")
    p.add_argument("--plot", help="also draw the risk-utility map (.png, .svg or .pdf)")
    p.add_argument("--risk", help="the risk figure of the map (a column of the table)")
    p.add_argument("--loss", help="the information-loss figure of the map (a column of the table)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")

    p = sub.add_parser("audit", help="empirically audit the differential privacy of a recipe's DP steps")
    p.add_argument("recipe", help="the recipe (a TOML file)")
    p.add_argument("--input", "-i", help="the data the steps run on (default: a small synthetic frame)")
    p.add_argument("--trials", type=int, default=400, help="runs of each step per neighbouring input (default 400)")
    p.add_argument("--seed", metavar="N", help="seed of the auditor's runs (default 0)")

    p = sub.add_parser("demo", help="run the main job on built-in data")
    p.add_argument("--seed", metavar="N", help="seed for a reproducible demo")
    p.add_argument("--output", "-o", help="also write the protected table (.csv or .parquet)")
    return parser
