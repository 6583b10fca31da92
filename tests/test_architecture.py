"""The house rules of docs/architecture.md, checked on the source: the layers, the lazy delegates
into report/, and no cycles between packages.

import-linter (``make lint``, pyproject's ``[tool.importlinter]``) checks the doors to outside
libraries; these three contracts need to tell an import at module level from one inside a
function, which it cannot: a lower layer may reach ``report/`` only from a two-line lazy delegate
(``_repr_html_``, ``__str__``, ``plot()``: a local import and one call), never at import time.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuprobe"

# Top to bottom. A module may import from its own layer's packages and from the layers below it;
# an import upwards is a violation, except a lazy delegate into report/.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "__main__"),
    ("api", "__init__"),
    ("report",),
    ("checks", "measure", "monitor", "trace", "memory", "parallel"),
    ("machine",),
    ("frameworks",),
    ("hardware",),
    ("findings", "errors", "units", "_data", "_text", "_proc", "_die_with_parent", "_version"),
)
SHOW = "report"
# what a delegate may do besides its imports: call and return, at most this many statements
DELEGATE_MAX_STATEMENTS = 2


@dataclass(frozen=True)
class Import:
    importer: str  # gpuprobe.x.y
    imported: str  # gpuprobe.z...
    line: int
    function: ast.FunctionDef | ast.AsyncFunctionDef | None  # None: at import time

    @property
    def where(self) -> str:
        return f"{self.importer} (line {self.line}) -> {self.imported}"


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    """The absolute module names an import statement in ``module`` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not node.level:
        return [node.module or ""]
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return [".".join([*base, *([node.module] if node.module else [])])]


def _module_imports(path: Path) -> list[Import]:
    """Every import of gpuprobe in one file, with the function it is in (not under
    ``if TYPE_CHECKING``)."""
    rel = path.relative_to(SRC.parent).with_suffix("")
    is_pkg = rel.name == "__init__"
    module = ".".join(rel.parts[:-1] if is_pkg else rel.parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out: list[Import] = []
    stack: list[tuple[ast.AST, Function | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and id(child) not in type_only:
                for t in _targets(child, module, is_pkg):
                    if t == "gpuprobe" or t.startswith("gpuprobe."):
                        out.append(Import(module, t, child.lineno, function))
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            stack.append((child, inner or function))
    return out


def _imports() -> list[Import]:
    return [i for path in sorted(SRC.rglob("*.py")) for i in _module_imports(path)]


IMPORTS = _imports()
LAYER_OF = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _is_delegate(imp: Import) -> bool:
    """A two-line lazy delegate: a function whose body, past its docstring and its imports, is at
    most two statements."""
    f = imp.function
    if f is None:
        return False
    body = list(f.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    rest = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    return len(rest) <= DELEGATE_MAX_STATEMENTS


def test_every_package_has_a_layer() -> None:
    packages = {_package(i.importer) for i in IMPORTS} | {
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert sorted(packages - set(LAYER_OF)) == []


def test_layers_import_only_downwards() -> None:
    upward = []
    for imp in IMPORTS:
        a, b = _package(imp.importer), _package(imp.imported)
        if a == b or LAYER_OF[b] >= LAYER_OF[a]:
            continue
        if b == SHOW and imp.function is not None:
            continue  # judged by the delegate contract below
        upward.append(imp.where)
    assert upward == []


def test_lower_layers_reach_report_only_through_two_line_delegates() -> None:
    bad = [
        f"{imp.where} in {imp.function.name if imp.function else '<module>'}()"
        for imp in IMPORTS
        if _package(imp.imported) == SHOW
        and LAYER_OF[_package(imp.importer)] > LAYER_OF[SHOW]
        and not _is_delegate(imp)
    ]
    assert bad == []


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in IMPORTS:
        a, b = _package(imp.importer), _package(imp.imported)
        if a == b or (b == SHOW and _is_delegate(imp)) or b == "__init__":
            continue
        graph[a].add(b)
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in path:
                cycle = path[path.index(nxt) :]
                if min(cycle) == cycle[0]:  # each cycle once, from its smallest name
                    cycles.append([*cycle, nxt])
            elif len(path) < len(LAYER_OF):
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    assert cycles == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("def _repr_html_(self):\n    from gpuprobe.report.x import f\n    return f(self)\n", True),
        (
            "def __str__(self):\n    '''Doc.'''\n    from gpuprobe.report.x import f, g\n"
            "    s = g(self)\n    return f(s)\n",
            True,
        ),
        (
            "def render(self):\n    from gpuprobe.report.x import f\n    a = 1\n    b = 2\n"
            "    return f(a, b)\n",
            False,
        ),
    ],
)
def test_the_delegate_rule_itself(code: str, expected: bool) -> None:
    f = ast.parse(code).body[0]
    assert isinstance(f, ast.FunctionDef)
    assert _is_delegate(Import("gpuprobe.trace.model", "gpuprobe.report.x", 2, f)) is expected
