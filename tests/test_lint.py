"""The static checks are clean: ``ruff check`` and ``mypy``, run from the repository root with the configuration in
pyproject.toml exactly as ``tools/lint.sh`` and the pre-commit hooks run them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _tool(name: str) -> str:
    """The tool installed beside this interpreter (the test extra installs both), else the one on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[tests]' installs it")
    return found


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "RUFF_CACHE_DIR")}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False, env=env)


def test_ruff_is_clean() -> None:
    done = _run(_tool("ruff"), "check", "--no-fix", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean() -> None:
    done = _run(_tool("mypy"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_typecheck_links_name_the_packages() -> None:
    """mypy sees framework/ and plugins/ under their import names through two committed symlinks."""
    assert (ROOT / ".typecheck" / "privclust").resolve() == ROOT / "framework"
    assert (ROOT / ".typecheck" / "privclust_plugins").resolve() == ROOT / "plugins"
