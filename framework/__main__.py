"""``python -m privclust`` and the ``privclust`` command's start.

The command line is parsed first, by :mod:`privclust.cliargs`, which imports
nothing heavy: ``--version``, ``--help`` and a malformed command line are
answered in a few hundredths of a second, without pandas, numpy or scipy.
Only then are the commands (:mod:`privclust.cli`) imported and run; a stop
signal meanwhile ends the process as ``privclust/__init__.py`` says.
"""

from __future__ import annotations

import sys
from importlib import import_module

from .cliargs import build_parser

__all__ = ["entry"]


def entry() -> None:
    """The ``privclust`` command: parse, then :func:`privclust.cli.entry`
    (which parses again, the same way, and runs the command)."""
    build_parser().parse_args(sys.argv[1:])  # --version, --help and usage errors exit here
    import_module("privclust.cli").entry()


if __name__ == "__main__":  # pragma: no cover
    entry()
