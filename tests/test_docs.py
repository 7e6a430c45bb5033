"""The docs stay true: hook signatures, the public API, component names,
the site build, the pages' own examples and the command-line sessions."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import privclust
from privclust import hookspecs
from _docblocks import DOCS, ROOT, DocRunError, blocks, run_page
from conftest import DATASETS as DATASETS_DIR

#: The pages whose Python examples run here (the general pages; each
#: capability's page is tested by its own engineer's tests).
RUNNABLE_PAGES = [
    "index.md",
    "quickstart.md",
    "concepts.md",
    "recipes.md",
    "accounting.md",
    "datasets.md",
    "hooks.md",
    "writing-plugins.md",
    "decisions.md",
    "api.md",
]

EXAMPLE_PLUGIN = ROOT / "docs" / "examples" / "privclust-example-plugin"

#: Pages whose examples read ../shared/datasets (skipped, with the reason, where it is absent).
NEEDS_SHARED_DATA = {"datasets.md"}


def _example_plugin_importable() -> None:
    """Make the example plugin importable for the pages that use it, even when
    it is not installed (its source folder goes on sys.path)."""
    if importlib.util.find_spec("privclust_example_plugin") is None:
        sys.path.insert(0, str(EXAMPLE_PLUGIN / "src"))


# ---------------------------------------------------------------------------
# The hook reference
# ---------------------------------------------------------------------------


def _signature(node: ast.FunctionDef) -> str:
    decorators = " ".join(f"@{ast.unparse(d)}" for d in node.decorator_list)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{decorators} def {node.name}({ast.unparse(node.args)}){returns}"


def _hookspecs() -> dict[str, str]:
    tree = ast.parse(Path(hookspecs.__file__).read_text(encoding="utf-8"))
    return {node.name: _signature(node) for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("privclust_")}


def _documented_specs() -> dict[str, list[str]]:
    """Every function of hooks.md decorated with ``hookspec``: the signature blocks."""
    found: dict[str, list[str]] = {}
    for block in blocks("hooks.md"):
        if block.lang != "python":
            continue
        for node in ast.walk(ast.parse(block.source)):
            if isinstance(node, ast.FunctionDef) and any(
                    "hookspec" in ast.unparse(d) for d in node.decorator_list):
                found.setdefault(node.name, []).append(_signature(node))
    return found


def test_the_hookspecs_module_is_read():
    specs = _hookspecs()
    assert len(specs) == 10
    assert "privclust_make_accountant" in specs


@pytest.mark.parametrize("name", sorted(_hookspecs()))
def test_each_hook_is_documented_with_its_exact_signature(name):
    documented = _documented_specs()
    assert name in documented, f"docs/hooks.md has no signature block for {name}"
    assert documented[name] == [_hookspecs()[name]], (
        f"docs/hooks.md shows {documented[name]} for {name}; privclust/hookspecs.py has {_hookspecs()[name]}"
    )
    text = (DOCS / "hooks.md").read_text(encoding="utf-8")
    assert f"### `{name}`" in text, f"docs/hooks.md has no section '### `{name}`'"


def test_the_hook_reference_documents_no_other_hook():
    assert set(_documented_specs()) <= set(_hookspecs())


# ---------------------------------------------------------------------------
# The public API and the components
# ---------------------------------------------------------------------------


def test_every_public_name_is_in_the_api_page():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    missing = [name for name in privclust.__all__ if f"`{name}`" not in text]
    assert not missing, f"docs/api.md does not list {missing}"


def test_the_api_page_lists_no_name_that_is_not_public():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    top = text.split("## `privclust.datasets`")[0]  # the submodules' tables follow
    listed = re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", top, flags=re.M)
    assert listed, "no table rows found in docs/api.md"
    unknown = sorted(set(listed) - set(privclust.__all__))
    assert not unknown, f"docs/api.md lists names that are not in privclust.__all__: {unknown}"


def _all_docs_text() -> str:
    texts = [p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))]
    # the example plugin's files are shown in the docs through snippets
    texts += [p.read_text(encoding="utf-8") for p in sorted(EXAMPLE_PLUGIN.rglob("*.md"))]
    return "\n".join(texts)


def test_every_registered_component_is_named_in_the_docs():
    registry = privclust.Registry(use_env=False)
    text = _all_docs_text()
    missing = [f"{info.kind}:{info.name} ({info.plugin})" for info in registry.components()
               if f"`{info.name}`" not in text and f'"{info.name}"' not in text]
    assert not missing, f"components named nowhere in docs/ (write `name` on their page): {missing}"


def test_the_catalogue_of_built_in_components_is_complete():
    text = (DOCS / "concepts.md").read_text(encoding="utf-8")
    catalogue = text.split("### The built-in components")[1].split("\n\n`privclust plugins`")[0]
    listed = set(re.findall(r"^\| ([a-z ]+) \| `([a-z0-9_.-]+)` \|", catalogue, flags=re.M))
    registry = privclust.Registry(use_env=False)
    builtin = {(info.kind[:-1].replace("_", " "), info.name) for info in registry.components()
               if info.distribution == privclust.NAME}
    assert listed == builtin, (f"docs/concepts.md's catalogue lacks {sorted(builtin - listed)} and lists "
                               f"{sorted(listed - builtin)}, which is not a built-in component")


def test_the_nav_lists_every_page_and_only_existing_pages():
    nav = re.findall(r":\s*([\w.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), flags=re.M)
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(nav) == pages


# ---------------------------------------------------------------------------
# The site
# ---------------------------------------------------------------------------


def test_the_site_builds_in_strict_mode(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip('mkdocs-material is not installed: pip install -e ".[docs]"')
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    assert (tmp_path / "site" / "hooks" / "index.html").is_file()


# ---------------------------------------------------------------------------
# The pages' own examples
# ---------------------------------------------------------------------------


def test_the_no_run_list_is_short():
    skipped = [b.where for page in RUNNABLE_PAGES for b in blocks(page)
               if b.marker == "no-run" and b.lang in ("python", "py")]
    assert len(skipped) <= 3, f"keep the Python blocks that do not run few: {skipped}"


@pytest.mark.filterwarnings("ignore::privclust.PrivacyLeakWarning")
@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_the_examples_of_the_page_run(page, tmp_path):
    if page in NEEDS_SHARED_DATA and not DATASETS_DIR.is_dir():
        pytest.skip(f"docs/{page} reads the shared data sets, and {DATASETS_DIR} is absent")
    _example_plugin_importable()
    failure = None
    try:
        ran = run_page(page, tmp_path)
    except DocRunError as err:
        failure = str(err)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    assert ran > 0, f"docs/{page} has no Python block that runs"


@pytest.mark.parametrize("page", RUNNABLE_PAGES + ["cli.md"])
def test_the_recipes_shown_in_toml_compile(page):
    _example_plugin_importable()
    import privclust_example_plugin

    registry = privclust.Registry(use_env=False)
    if "rounding" not in registry.tables["maskers"]:
        registry.register(privclust_example_plugin)
    for block in blocks(page):
        if block.lang != "toml" or block.marker == "no-run" or "[[steps]]" not in block.source:
            continue
        try:
            privclust.compile(privclust.Recipe.from_toml(block.source), registry)
        except privclust.PrivclustError as err:
            pytest.fail(f"the recipe at {block.where} does not compile: {err}", pytrace=False)


# ---------------------------------------------------------------------------
# The command-line sessions of cli.md
# ---------------------------------------------------------------------------


def _session(page: str) -> list[tuple[str, str, str] | tuple[str, Path, str]]:
    """The page in order: ``("file", name, text)`` for every block with a
    title (written to the working folder when the session reaches it) and
    ``(where, command, documented output)`` for every ``$ command`` of its
    console blocks; a here-document belongs to its command."""
    out: list = []
    for block in blocks(page):
        if block.marker == "no-run":
            continue
        if block.title:
            out.append(("file", Path(block.title), block.source))
        if block.lang != "console":
            continue
        lines = block.source.rstrip("\n").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith("$ "):
                i += 1
                continue
            command = line[2:]
            i += 1
            heredoc = re.search(r"<<\s*'?(\w+)'?", command)
            if heredoc:
                end = heredoc.group(1)
                body = []
                while i < len(lines) and lines[i] != end:
                    body.append(lines[i])
                    i += 1
                command += "\n" + "\n".join(body) + "\n" + end
                i += 1
            output = []
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            out.append((block.where, command, "\n".join(output)))
    return out


#: Commands whose whole documented output is checked (deterministic output).
_EXACT = ("cat ", "head ", "privclust check", "python -c")


@pytest.mark.slow
def test_the_command_line_sessions_run_as_documented(tmp_path):
    if not DATASETS_DIR.is_dir():
        pytest.skip(f"the sessions of docs/cli.md read the shared data sets, and {DATASETS_DIR} is absent")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PRIVCLUST_DISABLE_PLUGINS", None)
    session = _session("cli.md")
    assert sum(1 for item in session if item[0] != "file") >= 10
    for where, command, documented in session:
        if where == "file":
            (tmp_path / command).write_text(documented, encoding="utf-8")
            continue
        result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=300)
        errors = [line for line in documented.splitlines() if line.startswith("privclust: error:")]
        if documented.startswith("usage:"):
            assert result.returncode == 2, f"{where}: `{command}` should exit with status 2: {result.stderr}"
        elif errors:
            assert result.returncode == 1, f"{where}: `{command}` should exit with status 1: {result.stderr}"
            assert errors == [line for line in result.stderr.splitlines() if line.startswith("privclust:")], (
                f"{where}: `{command}` printed\n{result.stderr}\nbut the page shows\n{documented}")
            continue
        else:
            assert result.returncode == 0, f"{where}: `{command}` failed ({result.returncode}): {result.stderr}"
        if command.startswith(_EXACT):
            assert result.stdout.rstrip("\n") == documented.rstrip("\n"), (
                f"{where}: `{command}` printed\n{result.stdout}\nbut the page shows\n{documented}")
