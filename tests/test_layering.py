"""The layering of the host package (issue 9, item 1).

Every intra-package import edge of ``framework/`` (imported as ``privclust``)
is read with ``ast``: module-level imports must form no cycle, and no
module imports inside a function (optional and heavy dependencies go through
``privclust._optional``). The built-in plugins may import
only the public API: names of ``privclust.__all__``, the public submodules,
and their own modules. docs/architecture.md draws the layers.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import attrs
import pytest

import privclust
from privclust import _optional, hookspecs
from privclust.compiling import StepOutcome
from privclust.errors import DatasetUnavailableError, PrivclustError
from privclust.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
HOST = ROOT / "framework"
PLUGINS = ROOT / "plugins"

#: The public submodules a plugin may import (docs/api.md), besides ``privclust`` itself.
PUBLIC_SUBMODULES = {"datasets", "plots", "sampling", "sklearn", "testing"}

#: The layers, lowest first (docs/architecture.md). A module imports only
#: modules of its own layer or below, at module level.
LAYERS: list[set[str]] = [
    {"errors", "hookspecs", "sampling", "wording", "toml_text"},
    {"_optional", "claims", "comparison", "_reading", "_temporaries"},
    {"_signals", "_writing"},
    {"_io", "specs", "plots", "datasets", "ledger", "seeds", "progress"},
    {"engines"},
    {"params"},
    {"components"},
    {"recipe", "constraints", "building"},
    {"accountants", "context", "accounting"},
    {"kanonymity", "coverage", "provenance"},
    {"verdict", "given_back"},
    {"registry"},
    {"handover"},
    {"assessment", "defaults", "private_count", "dp_figures", "verify", "report"},
    {"compiling"},
    {"integers"},
    {"preflight", "rule_check"},
    {"execute", "evaluation"},
    {"runner", "checked"},
    {"compare", "harness", "audit_events", "audit_pairs", "audit", "testing", "sklearn", "strata"},
    {"cliargs", "cli_options", "cli", "__main__"},
    {"__init__"},
]


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in HOST.glob("*.py")}


def _targets(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    names: list[str] = []
    if isinstance(node, ast.ImportFrom):
        if node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
        elif node.level == 0 and node.module and node.module.split(".")[0] == "privclust":
            parts = node.module.split(".")
            names = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
    else:
        names = [a.name.split(".")[1] for a in node.names
                 if a.name.startswith("privclust.") and len(a.name.split(".")) > 1]
    return [n for n in names if n in modules]


def import_edges() -> list[tuple[str, str, str, int]]:
    """Every intra-package import: (module, imported module, where, line) with
    ``where`` one of ``module``, ``function`` or ``type`` (under ``if TYPE_CHECKING``)."""
    modules = _modules()
    edges = []

    def walk(name: str, node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                here = "function"
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.body:
                    walk(name, ast.Module(body=[stmt], type_ignores=[]), "type")
                for stmt in child.orelse:
                    walk(name, ast.Module(body=[stmt], type_ignores=[]), here)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                edges.extend((name, t, here, child.lineno) for t in _targets(child, modules) if t != name)
            walk(name, child, here)

    for name, path in modules.items():
        walk(name, ast.parse(path.read_text(encoding="utf-8")), "module")
    return edges


def cycles(edges: list[tuple[str, str, str, int]]) -> list[list[str]]:
    """The strongly connected components (more than one module) of the graph of ``edges``."""
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for a, b, *_ in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_level_import_cycle():
    module_edges = [e for e in import_edges() if e[2] == "module"]
    assert module_edges, "the scanner found no imports at all"
    assert cycles(module_edges) == []


def test_no_cycle_even_through_function_level_imports():
    assert cycles([e for e in import_edges() if e[2] in ("module", "function")]) == []


def test_no_cycle_even_counting_type_only_imports():
    """Imports under ``if TYPE_CHECKING:`` count too (a circle of annotations
    is a circle a reader and a type checker must untangle): none is left. The
    hook contract annotates what its hooks are handed of the registry and of
    a step's outcome by protocols of its own (issue 27)."""
    edges = import_edges()
    assert any(where == "type" for *_, where, _ in edges), "the scanner found no type-only import at all"
    assert cycles(edges) == []


def test_the_hook_contract_imports_nothing_above_the_layers_it_needs():
    """hookspecs sits at the bottom: even for annotations it imports neither
    the registry nor the pipeline that calls its hooks."""
    targets = {b for a, b, *_ in import_edges() if a == "hookspecs"}
    assert not targets & {"registry", "runner", "compiling", "execute"}


@pytest.mark.parametrize(("protocol", "real"), [
    (hookspecs.ComponentLookup, Registry),
    (hookspecs.FinishedStep, StepOutcome),
])
def test_what_the_hooks_are_handed_has_every_member_their_protocols_name(protocol, real):
    """A protocol of the hook contract names only what the host really hands
    the hook (the registry, the step's outcome): a member the real class
    lacks would be an annotation that lies."""
    members = [n for n in vars(protocol) if not n.startswith("_")]
    assert members
    provided = set(dir(real)) | set(attrs.fields_dict(real) if attrs.has(real) else ())
    assert [m for m in members if m not in provided] == []


def test_no_module_imports_inside_a_function():
    """Not a privclust module, not a third-party library: optional and heavy
    dependencies are imported on first use through privclust._optional."""
    found = []
    for path in sorted(HOST.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found += [f"{path.name}:{n.lineno}" for n in ast.walk(node)
                          if isinstance(n, ast.Import | ast.ImportFrom)]
    assert found == [], "move these imports to the top of the module, or import through privclust._optional"


def test_each_module_imports_only_its_layer_or_below():
    modules = set(_modules())
    layer_of = {m: i for i, layer in enumerate(LAYERS) for m in layer}
    assert modules == set(layer_of), f"place every module in LAYERS: {sorted(modules ^ set(layer_of))}"
    upward = sorted((a, b, line) for a, b, where, line in import_edges()
                    if where == "module" and layer_of[b] > layer_of[a])
    assert upward == []


#: Private imports still allowed while a split is under way (none: nothing may be added here).
PENDING_NAMES: set[str] = set()
PENDING_IMPORTS: set[tuple[str, str]] = set()


def private_imports(folder: Path = HOST) -> list[tuple[str, str, str, int]]:
    """Every import of another module's private name (``_``-prefixed, not a
    dunder such as ``__version__``) by a module of ``folder``: (module,
    imported module, name, line)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 1:
                source = node.module or ""
            elif node.level == 0 and node.module and node.module.split(".")[0] == "privclust":
                source = ".".join(node.module.split(".")[1:])
            else:
                continue
            found += [(path.stem, source, a.name, node.lineno) for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_names():
    """A module's ``_``-prefixed names are its own: another module that needs
    one imports it once it is made public (documented, no underscore) in the
    module that owns it, or it moves to where it belongs."""
    found = [f"{module}.py:{line} imports {name} from {source or 'privclust'}"
             for module, source, name, line in private_imports()
             if name not in PENDING_NAMES and (module, name) not in PENDING_IMPORTS]
    assert found == []


def test_the_private_import_scanner_finds_such_imports(tmp_path):
    (tmp_path / "a.py").write_text("from .b import _hidden, public\nfrom privclust.c import _x\n"
                                   "from . import __version__\nfrom os import _exit\n", encoding="utf-8")
    assert private_imports(tmp_path) == [("a", "b", "_hidden", 1), ("a", "c", "_x", 2)]


def test_built_in_plugins_import_only_the_public_api():
    public = set(privclust.__all__) | PUBLIC_SUBMODULES
    violations = []
    for path in sorted(PLUGINS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                parts = node.module.split(".")
                if parts[0] == "privclust" and len(parts) == 1:
                    violations += [f"{where} privclust.{a.name}" for a in node.names if a.name not in public]
                elif parts[0] == "privclust" and parts[1] not in PUBLIC_SUBMODULES:
                    violations.append(f"{where} {node.module}")
            elif isinstance(node, ast.Import):
                violations += [f"{where} {a.name}" for a in node.names
                               if a.name.startswith("privclust.") and a.name.split(".")[1] not in PUBLIC_SUBMODULES]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "privclust":
                if node.attr not in public:
                    violations.append(f"{where} privclust.{node.attr}")
    assert violations == []


def test_a_missing_optional_dependency_says_what_to_install():
    with pytest.raises(PrivclustError, match="pip install 'privclust\\[plots\\]'"):
        _optional.optional("no_such_module_privclust", _optional.PLOTS)
    with pytest.raises(DatasetUnavailableError, match="install it"):
        _optional.optional("no_such_module_privclust", "install it", DatasetUnavailableError)
    assert _optional.deferred("json").dumps([1]) == "[1]"
