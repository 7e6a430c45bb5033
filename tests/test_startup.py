"""The start of ``privclust`` (issue 27, item 6): ``import privclust`` and
``privclust --version`` / ``--help`` import no pandas, numpy or scipy; every
public name still imports from ``privclust``. No timing here: what is
asserted is which modules were imported."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import privclust
from privclust import cli, cliargs

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pandas", "numpy", "scipy")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def _heavy_after(argument: str) -> list[str]:
    code = (f"import sys\nsys.argv = ['privclust', {argument!r}]\nfrom privclust.__main__ import entry\ntry:\n"
            "    entry()\nexcept SystemExit as err:\n    assert err.code == 0, err.code\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    done = _python(code)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1], {})  # noqa: S307 - our own subprocess's printed list


def test_version_and_help_import_no_pandas_numpy_or_scipy():
    assert _heavy_after("--version") == []
    assert _heavy_after("--help") == []
    done = _python("import sys, privclust; print('pandas' in sys.modules)")
    assert done.stdout.strip() == "False", done.stderr


def test_python_dash_m_privclust_is_the_command():
    done = subprocess.run([sys.executable, "-m", "privclust", "--version"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"privclust {privclust.__version__}"
    done = subprocess.run([sys.executable, "-m", "privclust", "no-such-command"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2 and "invalid choice: 'no-such-command'" in done.stderr


def test_every_public_name_imports_from_privclust_in_a_fresh_interpreter():
    names = list(privclust.__all__)
    code = ("import sys\n" + "".join(f"from privclust import {n}\n" for n in names)
            + "import privclust\nassert all(hasattr(privclust, n) for n in privclust.__all__)\n"
            "assert callable(privclust.compare)\nprint('ok')")
    done = _python(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_lazy_table_is_the_type_checking_imports():
    """``privclust._LAZY`` (what is imported on first use) and the imports
    type checkers and the API docs read say the same, and cover ``__all__``."""
    tree = ast.parse((ROOT / "framework" / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    typed = {a.asname or a.name: node.module for node in guarded.body if isinstance(node, ast.ImportFrom)
             and node.module for a in node.names}
    assert typed == privclust._LAZY
    assert set(privclust.__all__) - {"__version__"} == set(typed)
    assert set(privclust._SUBMODULES) == {a.name for node in guarded.body if isinstance(node, ast.ImportFrom)
                                          and node.module is None for a in node.names}


def test_a_public_name_keeps_its_meaning_when_its_submodule_is_imported():
    done = _python("import privclust, privclust.compare, privclust.cli\nprint(callable(privclust.compare), "
                   "privclust.datasets.__name__, privclust.registry.__name__, hasattr(privclust, 'no_such_name'))")
    assert done.stdout.split() == ["True", "privclust.datasets", "privclust.registry", "False"], done.stderr


def test_the_parser_and_the_commands_name_the_same_commands():
    parser = cliargs.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == list(cliargs.COMMANDS) == list(cli._COMMANDS)
