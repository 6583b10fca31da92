"""The house rules of docs/architecture.md, checked on the source: the layers, the views, the tools'
independence, no import circles between files, and no module over 650 lines.

Every ``import`` of gpuprobe counts, at any depth (inside a function as much as at the top of a
module); only imports under ``if TYPE_CHECKING:`` are left out, since they never run.
import-linter (``make lint``, pyproject's ``[tool.importlinter]``) holds the same layers and the
doors to outside libraries; this test adds what it cannot say: circles between files, the tool
edges by name, and the size of modules.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuprobe"

# Top to bottom. A module may import from its own layer and from the layers below it.
LAYERS: tuple[str, ...] = ("cli", "api", "tools", "ui", "platform", "core")

# The edges between tools, each with why (docs/architecture.md lists them too). Any other import
# from one tool into another is a violation.
TOOL_EDGES: dict[tuple[str, str], str] = {
    ("profile", "monitor"): "profile runs the command with the monitor's recorder (run_command)",
    ("profile", "diagnose"): "profile diagnoses the traces it had written, with diagnose's engine",
    ("fleet", "doctor"): "fleet runs doctor on every node of a cluster and judges across them",
    ("fleet", "bench"): "fleet runs the same short bench on every node and compares the figures",
}

# What the CLI may import besides itself: the API, ui/ (progress, the console) and core/ (errors,
# the render hooks).
CLI_MAY_IMPORT = ("api", "ui", "core")

MAX_MODULE_LINES = 650


@dataclass(frozen=True)
class Import:
    importer: str  # gpuprobe.x.y
    imported: str  # gpuprobe.z... (a module, resolved from `from pkg import submodule` too)
    line: int

    @property
    def where(self) -> str:
        return f"{self.importer} (line {self.line}) -> {self.imported}"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _resolve(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    """The gpuprobe modules an import statement in ``module`` names (``from pkg import sub``
    names the submodule ``pkg.sub`` when there is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES]
    return subs if len(subs) == len(node.names) else [source, *subs]


def _imports_of(path: Path) -> list[Import]:
    module = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in type_only:
            for target in _resolve(node, module, path.name == "__init__.py"):
                if target == "gpuprobe" or target.startswith("gpuprobe."):
                    out.append(Import(module, target, node.lineno))
    return out


IMPORTS: list[Import] = [i for p in MODULES.values() for i in _imports_of(p)]


def layer(module: str) -> str:
    """The layer a module stands on."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("api", "_version"):
        return "api" if parts[-1] != "_version" else "core"
    if parts[1] == "__main__":
        return "cli"
    return parts[1]


def tool(module: str) -> str | None:
    """The tool a module belongs to (``gpuprobe.tools.<tool>...``), or None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "tools" else None


def is_view(module: str) -> bool:
    """A tool's show module or package, or ui/."""
    parts = module.split(".")
    return layer(module) == "ui" or (tool(module) is not None and "show" in parts[3:])


def test_every_module_stands_on_a_layer() -> None:
    assert sorted({layer(m) for m in MODULES} - set(LAYERS)) == []


def test_layers_import_only_downwards() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [i.where for i in IMPORTS if rank[layer(i.imported)] < rank[layer(i.importer)]]
    assert upward == []


def test_results_rules_and_engines_never_import_views() -> None:
    """Only show modules (and the tool's ``__init__``, which imports its show package so that the
    views are registered) may import a show module or ui/."""
    bad = [
        i.where
        for i in IMPORTS
        if tool(i.importer) is not None
        and is_view(i.imported)
        and not is_view(i.importer)
        and not (i.importer == f"gpuprobe.tools.{tool(i.importer)}" and i.imported.endswith("show"))
    ]
    assert bad == []


def test_tools_are_independent_but_for_the_listed_edges() -> None:
    edges = {
        (tool(i.importer), tool(i.imported)): i.where
        for i in IMPORTS
        if tool(i.importer) and tool(i.imported) and tool(i.importer) != tool(i.imported)
    }
    assert sorted(w for e, w in edges.items() if e not in TOOL_EDGES) == []
    assert sorted(set(TOOL_EDGES) - set(edges)) == []  # a listed edge that is gone is unlisted


def test_the_cli_calls_the_api() -> None:
    bad = [
        i.where
        for i in IMPORTS
        if layer(i.importer) == "cli"
        and layer(i.imported) not in ("cli", *CLI_MAY_IMPORT)
        and i.importer != "gpuprobe.__main__"
    ]
    assert bad == []


def test_no_import_circles_between_files() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for i in IMPORTS:
        if i.imported in MODULES and i.imported != i.importer:
            graph[i.importer].add(i.imported)
    # Tarjan's strongly connected components: every component of more than one file is a circle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

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
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    assert circles == [], "\n".join(" <-> ".join(c) for c in circles)


def test_no_module_is_over_650_lines() -> None:
    long = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_the_resolver_names_submodules() -> None:
    node = ast.parse("from gpuprobe.core import render, findings").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve(node, "gpuprobe.tools.x", False) == [
        "gpuprobe.core.render",
        "gpuprobe.core.findings",
    ]
    node = ast.parse("from gpuprobe.core.findings import Finding").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve(node, "gpuprobe.tools.x", False) == ["gpuprobe.core.findings"]
