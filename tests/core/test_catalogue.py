"""The finding catalogue against the code: every id the source can emit is declared, every
declared id is emitted somewhere, every threshold named is a module-level constant, and
docs/findings.md is the catalogue's page. (That every Finding made while the suite runs has a
catalogued id and status is checked by the recorder in tests/conftest.py.)"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from gpuprobe.core.catalogue import (
    TOOLS,
    catalogue,
    entry,
    find,
    markdown,
    placeholders,
    threshold_value,
)
from gpuprobe.core.findings import Status
from gpuprobe.platform.frameworks import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "gpuprobe"
DOC = ROOT / "docs" / "findings.md"
HOLE = "{}"  # what an f-string's {expression} becomes in a scanned id
_PLACEHOLDER = re.compile(r"\{\w+\}")


@dataclass
class Scan:
    """What the source says about finding ids: each id (f-string parts as ``{}``) with where it
    is, and each id expression the scan could not read."""

    ids: dict[str, list[str]] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _arg(call: ast.Call, index: int | None, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return call.args[index] if index is not None and index < len(call.args) else None


def _strings(node: ast.expr) -> set[str] | None:
    """The ids an expression can be: a literal, either branch of ``a if c else b``, an f-string
    with ``{}`` for its holes; None when it is anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        a, b = _strings(node.body), _strings(node.orelse)
        return None if a is None or b is None else a | b
    if isinstance(node, ast.JoinedStr):
        return {
            "".join(v.value if isinstance(v, ast.Constant) else HOLE for v in node.values)  # type: ignore[misc]
        }
    return None


def _local(fn: ast.AST, name: str) -> set[str] | None:
    """The ids a local name is assigned (``fid, group = "straggler", "ranks"``)."""
    found: set[str] = set()
    for n in ast.walk(fn):
        if not isinstance(n, ast.Assign):
            continue
        for t in n.targets:
            pairs = (
                list(zip(t.elts, n.value.elts, strict=False))
                if isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple)
                else [(t, n.value)]
            )
            for target, value in pairs:
                if isinstance(target, ast.Name) and target.id == name:
                    s = _strings(value)
                    if s is None:
                        return None
                    found |= s
    return found or None


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], list[str]]:
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args], [x.arg for x in a.kwonlyargs]


@cache
def scan() -> Scan:
    """Every finding id in src: the id of each ``Finding(...)``, each ``@rule("id", ...)``
    argument, and the id argument at each call of a helper that passes one of its parameters on
    as a Finding's id (``host_busy_finding("doctor-host-busy", ...)``, ``no_gpu(ctx, "gpu-idle",
    ...)``), helpers of helpers included. A helper's calls are read in its own module and in the
    modules that import it by name."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))}
    mod = {p: "gpuprobe." + ".".join(p.relative_to(SRC).with_suffix("").parts) for p in trees}
    mod = {p: m.removesuffix(".__init__") for p, m in mod.items()}
    imported = {
        p: {
            (n.module, a.name)
            for n in ast.walk(t)
            if isinstance(n, ast.ImportFrom) and n.module
            for a in n.names
        }
        for p, t in trees.items()
    }
    # sink name -> (positional index, keyword, defining module or None for everywhere)
    sinks: dict[str, tuple[int | None, str, str | None]] = {"Finding": (0, "id", None)}

    def sink_here(name: str | None, p: Path) -> bool:
        if name not in sinks:
            return False
        home = sinks[name][2]
        return home is None or home == mod[p] or (home, name) in imported[p]

    changed = True
    while changed:  # find the helpers, then the helpers' helpers
        changed = False
        for p, tree in trees.items():
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name in sinks:
                    continue
                pos, kw = _params(fn)
                for call in ast.walk(fn):
                    if not isinstance(call, ast.Call) or not sink_here(_callee(call), p):
                        continue
                    idx, key, _ = sinks[_callee(call)]  # type: ignore[index]
                    expr = _arg(call, idx, key)
                    if isinstance(expr, ast.Name) and expr.id in pos + kw:
                        i = pos.index(expr.id) if expr.id in pos else None
                        sinks[fn.name] = (i, expr.id, mod[p])
                        changed = True
                        break
    out = Scan()
    for p, tree in trees.items():
        scopes: list[ast.AST] = [
            n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            where = f"{p.relative_to(ROOT)}:{call.lineno}"
            name = _callee(call)
            if name == "rule" and ("gpuprobe.core.rules", "rule") in imported[p]:
                # @rule("id-a", "id-b", applies=...): the literal ids; ids a rule builds
                # (`*_ids(...)`, `*declared_ids(...)`) are read from the rule objects themselves
                # by test_every_rule_declares_catalogued_ids
                exprs = [a for a in call.args if not isinstance(a, ast.Starred)]
            elif sink_here(name, p):
                idx, key, _ = sinks[name]  # type: ignore[index]
                expr = _arg(call, idx, key)
                exprs = [] if expr is None else [expr]
            else:
                continue
            for expr in exprs:
                owner = next(
                    (
                        f
                        for f in reversed(scopes)
                        if f.lineno <= call.lineno <= (f.end_lineno or f.lineno)  # type: ignore[attr-defined]
                    ),
                    None,
                )
                if isinstance(expr, ast.Name) and owner is not None:
                    pos, kw = _params(owner)  # type: ignore[arg-type]
                    if expr.id in pos + kw and owner.name in sinks:  # type: ignore[attr-defined]
                        continue  # a helper passing its parameter on: read at its calls
                    ids = _local(owner, expr.id)
                else:
                    ids = _strings(expr)
                if ids is None:
                    out.unresolved.append(f"{where}: {ast.unparse(expr)}")
                    continue
                for i in ids:
                    out.ids.setdefault(i, []).append(where)
    return out


def _shape(catalogue_id: str) -> str:
    """A catalogue id as the scan sees it: ``{framework}-ok`` -> ``{}-ok``."""
    return _PLACEHOLDER.sub(HOLE, catalogue_id)


def test_the_scan_finds_the_ids_it_should() -> None:
    found = scan().ids
    # a literal, a helper's argument, a helper's helper, a local, both branches, an f-string
    for fid in ("driver-ok", "doctor-host-busy", "gpu-idle", "straggler", "cuda-stub-library"):
        assert fid in found, fid
    assert "cuda-init-failed" in found and "{}-import-failed" in found


def test_every_finding_id_is_read_from_the_source() -> None:
    assert not scan().unresolved, (
        "finding ids the scan cannot read (write the id as a string literal, or pass it to a "
        "helper that passes it on as Finding's id):\n  " + "\n  ".join(scan().unresolved)
    )


def test_every_id_the_source_emits_is_in_the_catalogue() -> None:
    shapes = {_shape(i) for i in catalogue()}
    missing = {i: w for i, w in scan().ids.items() if i not in shapes}
    assert not missing, (
        "finding ids the code emits that src/gpuprobe/core/catalogue.json lacks (add them, then "
        "`python -m gpuprobe.core.catalogue > docs/findings.md`):\n  "
        + "\n  ".join(f"{i}  ({', '.join(w[:3])})" for i, w in sorted(missing.items()))
    )


def test_every_catalogued_id_is_emitted_somewhere() -> None:
    found = scan().ids
    dead = [i for i in catalogue() if _shape(i) not in found]
    assert not dead, f"catalogued ids nothing in src emits (remove them): {dead}"


def test_entries_are_well_formed() -> None:
    for e in catalogue().values():
        assert e.tool in TOOLS, e
        assert e.title.strip() and e.meaning.strip(), e
        assert e.statuses and set(e.statuses) <= {s.value for s in Status}, e
        assert len(set(e.statuses)) == len(e.statuses), e
        assert set(_PLACEHOLDER.findall(e.id)) <= {f"{{{k}}}" for k in placeholders()}, e


def test_framework_placeholder_is_the_frameworks_and_numpy() -> None:
    # doctor's ids per framework: each framework, and numpy for the CPU baseline
    assert set(placeholders()["framework"]) == {*FRAMEWORKS, "numpy"}


def _module_constants(module: str) -> set[str]:
    path = Path(sys.modules[module].__file__ or "")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for n in tree.body:
        targets = (
            n.targets
            if isinstance(n, ast.Assign)
            else [n.target]
            if isinstance(n, ast.AnnAssign)
            else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_threshold_is_a_module_level_constant() -> None:
    bad = []
    for e in catalogue().values():
        for t in e.thresholds:
            module, _, name = t.rpartition(".")
            try:
                threshold_value(t)
            except (ImportError, AttributeError) as exc:
                bad.append(f"{e.id}: {t}: {exc}")
                continue
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or name not in _module_constants(module):
                bad.append(f"{e.id}: {t} is not a constant defined in {module}")
    assert not bad, "\n".join(bad)


def test_lookup_by_emitted_id() -> None:
    assert entry("driver-ok").id == "driver-ok"
    assert entry("torch-import-failed").id == "{framework}-import-failed"
    assert entry("numpy-wrong-result").tool == "doctor"
    assert find("tensorflow-import-failed") is None
    with pytest.raises(KeyError, match="not in the catalogue"):
        entry("no-such-finding")


def test_docs_findings_md_is_the_catalogue() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        "docs/findings.md is out of date: regenerate it with "
        "`python -m gpuprobe.core.catalogue > docs/findings.md`"
    )


def _all_rules() -> list[object]:
    """Every rule of every tool: each tool's RULES tuples (a tool with several kinds of result
    has one tuple per kind)."""
    from gpuprobe.tools.bench.rules import RULES as BENCH
    from gpuprobe.tools.diagnose.rules import RULES as DIAGNOSE
    from gpuprobe.tools.diagnose.rules.ranks import RULES_RANKS
    from gpuprobe.tools.doctor.rules import RULES as DOCTOR
    from gpuprobe.tools.fleet.bench_rules import BENCH_RULES as FLEET_BENCH
    from gpuprobe.tools.fleet.bench_rules import bench_alike
    from gpuprobe.tools.fleet.rules import RULES as FLEET
    from gpuprobe.tools.fleet.rules import alike
    from gpuprobe.tools.memory.rules import RULES_FIT, RULES_OOM, RULES_PRECISION
    from gpuprobe.tools.monitor.rules import GPU_RULES
    from gpuprobe.tools.monitor.rules import RULES as MONITOR
    from gpuprobe.tools.monitor.rules.pack import RULES as PACK
    from gpuprobe.tools.scale.rules import RULES_LSTSQ, RULES_SWEEP

    return [
        *BENCH,
        *DIAGNOSE,
        *RULES_RANKS,
        *DOCTOR,
        *RULES_FIT,
        *RULES_OOM,
        *RULES_PRECISION,
        *GPU_RULES,
        *MONITOR,
        *PACK,
        *RULES_LSTSQ,
        *RULES_SWEEP,
        *FLEET,
        alike,
        *FLEET_BENCH,
        bench_alike,
    ]


def test_every_rule_declares_catalogued_ids() -> None:
    from gpuprobe.core.catalogue import find
    from gpuprobe.core.rules import Rule

    rules = _all_rules()
    assert all(isinstance(r, Rule) for r in rules)
    unknown = sorted({(r.name, i) for r in rules for i in r.ids if find(i) is None})  # type: ignore[attr-defined]
    assert not unknown, f"rules declare ids the catalogue lacks: {unknown}"


def test_every_catalogued_id_is_declared_by_a_rule() -> None:
    # nothing is emitted outside a rule: every catalogued id is one some rule declares (an id
    # with a placeholder, by any of the ids it stands for)
    declared = {i for r in _all_rules() for i in r.ids}  # type: ignore[attr-defined]
    covered = {e.id for i in declared if (e := find(i)) is not None}
    orphans = sorted(set(catalogue()) - covered)
    assert not orphans, (
        f"catalogued ids no rule declares (make the verdict a rule in its tool's RULES): {orphans}"
    )
