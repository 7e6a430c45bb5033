"""The docs stay true: the generated hook reference and API page, component
names, the site build, the pages' own examples and the command-line sessions."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _docblocks import DOCS, ROOT, DocRunError, _same_output, blocks, run_page
from conftest import DATASETS as DATASETS_DIR

import privclust
from privclust import hookspecs

#: The pages whose Python examples run here (the general pages; each
#: capability's page is tested by its own engineer's tests).
RUNNABLE_PAGES = [
    "index.md",
    "quickstart.md",
    "concepts.md",
    "recipes.md",
    "roles.md",
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
# The hook reference and the API page: generated from the code (mkdocstrings)
# ---------------------------------------------------------------------------

#: A mkdocstrings directive: ``::: dotted.path``, alone on its line.
_DIRECTIVE = re.compile(r"^:::[ \t]+([\w.]+)[ \t]*$", flags=re.M)

#: The public submodules api.md renders whole.
PUBLIC_SUBMODULES = ("datasets", "sampling", "sklearn", "testing")


def _directives(page: str) -> list[str]:
    return _DIRECTIVE.findall((DOCS / page).read_text(encoding="utf-8"))


def _hookspecs() -> dict[str, Callable]:
    return {name: obj for name, obj in vars(hookspecs).items()
            if name.startswith("privclust_") and callable(obj)}


def _resolve(path: str) -> object:
    """The object a directive renders (``privclust.compare.compare`` is the
    function, not the module of the same name)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def test_the_hookspecs_module_is_read():
    specs = _hookspecs()
    assert len(specs) == 10
    assert "privclust_make_accountant" in specs


@pytest.mark.parametrize("name", sorted(_hookspecs()))
def test_each_hook_is_rendered_from_its_docstring(name):
    assert _directives("hooks.md").count(f"privclust.hookspecs.{name}") == 1, (
        f"docs/hooks.md needs one '::: privclust.hookspecs.{name}' (the reference is generated)")
    doc = inspect.getdoc(_hookspecs()[name]) or ""
    params = list(inspect.signature(_hookspecs()[name]).parameters)
    missing = [p for p in params if f":param {p}:" not in doc]
    assert not missing and ":return:" in doc, (
        f"the docstring of {name} documents no {missing or 'return value'}; the hook reference shows it")


def test_the_hook_reference_renders_no_other_hook_and_copies_no_signature():
    rendered = [d.rsplit(".", 1)[1] for d in _directives("hooks.md") if d.startswith("privclust.hookspecs.")]
    assert sorted(rendered) == sorted(_hookspecs())
    for block in blocks("hooks.md"):  # the signatures come from the code, not from a copy
        assert "@hookspec" not in block.source, f"{block.where} copies a hook specification"


def test_every_public_name_is_rendered_in_the_api_page():
    rendered = {}
    for path in _directives("api.md"):
        rendered.setdefault(path.rsplit(".", 1)[1], []).append(path)
    missing = [name for name in privclust.__all__ if name not in rendered]
    assert not missing, f"docs/api.md has no '::: privclust.<name>' for {missing}"
    for name in privclust.__all__:
        if name == "__version__":
            continue
        assert any(_resolve(path) is getattr(privclust, name) for path in rendered[name]), (
            f"docs/api.md renders {rendered[name]}, which is not privclust.{name}")


def test_the_api_page_renders_no_name_that_is_not_public():
    unknown = [path for path in _directives("api.md")
               if not (path.count(".") == 1 and path.split(".")[1] in (*privclust.__all__, *PUBLIC_SUBMODULES))
               and not any(_resolve(path) is getattr(privclust, name, None) for name in privclust.__all__)]
    assert not unknown, f"docs/api.md renders names that are not in privclust.__all__: {unknown}"
    assert {f"privclust.{m}" for m in PUBLIC_SUBMODULES} <= set(_directives("api.md"))


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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once with ``mkdocs build --strict``."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None \
            or importlib.util.find_spec("mkdocstrings_handlers") is None:
        pytest.skip('mkdocs-material and mkdocstrings are not installed: pip install -e ".[docs]"')
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return out, result


def test_the_site_builds_in_strict_mode(site):
    out, result = site
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    assert (out / "hooks" / "index.html").is_file()


def _built(site, page: str) -> str:
    out, result = site
    if result.returncode != 0:
        pytest.fail("the site did not build (see test_the_site_builds_in_strict_mode)", pytrace=False)
    return (out / page / "index.html").read_text(encoding="utf-8")


def test_the_built_hook_reference_holds_every_hook_and_its_docstring(site):
    import html

    page = _built(site, "hooks")
    for name, spec in _hookspecs().items():
        assert f'id="privclust.hookspecs.{name}"' in page, f"the built hook reference has no entry for {name}"
        first = inspect.getdoc(spec).split("\n")[0]
        assert html.escape(first, quote=False) in page, f"the built hook reference lacks {name}'s docstring"
    assert ":class:`" not in page and ":func:`" not in page  # Sphinx roles are shown as code


def test_the_built_api_page_holds_every_public_name(site):
    page = _built(site, "api")
    ids = set(re.findall(r'id="(privclust\.[\w.]+)"', page))
    missing = [name for name in privclust.__all__ if f"privclust.{name}" not in ids
               and not any(i.endswith(f".{name}") and _resolve(i) is getattr(privclust, name) for i in ids)]
    assert not missing, f"the built API page has no entry for {missing}"
    for module in PUBLIC_SUBMODULES:
        public = getattr(importlib.import_module(f"privclust.{module}"), "__all__", [])
        absent = [n for n in public if f"privclust.{module}.{n}" not in ids]
        assert not absent, f"the built API page has no entry for privclust.{module}.{absent}"
    assert ":class:`" not in page and ":func:`" not in page and ":meth:`" not in page


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


#: Shell syntax: a command holding any of these runs in bash, in a process of its own.
_SHELL = re.compile(r"[|&;<>$`*?'\\\n]|^\w+=|\bpipe\.csv\b")


def _in_process(command: str, cwd: Path) -> subprocess.CompletedProcess | None:
    """A plain ``privclust ...`` command run by :func:`privclust.cli.main` in
    this process, as the console script runs it but without starting Python
    and importing pandas, scipy and scikit-learn again (about a second each,
    39 times); ``None`` for a command with shell syntax (pipes, redirections,
    variables, a FIFO), which bash runs. The session registry is reloaded for
    the command, so no plugin another test registered takes part."""
    if not command.startswith("privclust ") or _SHELL.search(command):
        return None
    import contextlib
    import io

    from privclust import cli
    from privclust.registry import reset_registry

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    reset_registry()
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main(shlex.split(command)[1:])
            except SystemExit as stop:  # argparse's usage errors and --help
                status = 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
    finally:
        reset_registry()
    out.flush()
    return subprocess.CompletedProcess(command, status, out.buffer.getvalue().decode("utf-8"), err.getvalue())


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
        result = _in_process(command, tmp_path) or subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
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


def test_a_documented_output_may_differ_only_by_one_unit_in_a_decimal_s_last_digit():
    # a value on a rounding boundary prints one digit apart on another CPU (OpenBLAS picks its
    # kernels by CPU); everything else must be as documented
    assert _same_output(" fuzzy  2  42.010  0.122\n", " fuzzy  2  42.011  0.122")
    assert _same_output("9.999", "10.000")
    assert not _same_output(" fuzzy  2  42.010", " fuzzy  2  42.012")
    assert not _same_output(" fuzzy  2  42.010", " fuzzy  3  42.010")  # integers exactly
    assert not _same_output("42.010", "42.01")  # the same number of decimals
    assert not _same_output("eps 0.5 ok", "eps 0.5 no")
