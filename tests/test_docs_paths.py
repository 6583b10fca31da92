"""Every file path gpuprobe prints (``docs/experiments.md#e1`` in a finding, ``contrib/grafana/...``
in ``export --help``) exists: in the checkout, and in the installed package, where the wheel ships
it under ``gpuprobe/`` (``src/gpuprobe/docs/`` and ``src/gpuprobe/contrib/`` hold links to the
checkout's files, and pyproject.toml's package data takes them into the wheel)."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gpuprobe"
PATH_RE = re.compile(r"\b((?:docs|contrib|examples|benchmarks|tests)/[\w./-]*\w)")
# Printed only by tools for people working on gpuprobe, in a checkout: not in the wheel.
CHECKOUT_ONLY = {
    "docs/findings.md": "core/catalogue.py: the command that regenerates it, in its header",
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def printed_paths() -> dict[str, list[str]]:
    """path -> where it is written: every string gpuprobe's code can print (its docstrings and
    comments left out) and its data files."""
    found: dict[str, list[str]] = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and id(node) not in docs:
                for p in PATH_RE.findall(text):
                    found.setdefault(p, []).append(f"{f.relative_to(ROOT)}:{node.lineno}")
    for f in sorted(PACKAGE.rglob("*.json")) + sorted(PACKAGE.rglob("*.html")):
        if f.is_symlink():  # a shipped copy of a checkout file, not something gpuprobe prints
            continue
        for p in PATH_RE.findall(f.read_text(encoding="utf-8")):
            found.setdefault(p, []).append(str(f.relative_to(ROOT)))
    return found


def test_the_scan_finds_what_the_commands_print() -> None:
    found = printed_paths()
    assert "docs/experiments.md" in found  # bench --help, doctor's E1 finding, the catalogue
    assert "contrib/grafana/gpuprobe.json" in found  # export --help
    assert any("doctor/rules/kernels.py" in w for w in found["docs/experiments.md"])


def test_every_printed_path_is_in_the_checkout_and_the_installed_package() -> None:
    for path, where in printed_paths().items():
        assert (ROOT / path).is_file(), f"{path} (printed by {where}) is not in the checkout"
        if path not in CHECKOUT_ONLY:
            assert (PACKAGE / path).is_file(), f"{path} (printed by {where}) is not shipped"


@pytest.mark.slow
def test_the_wheel_ships_them(tmp_path: Path) -> None:
    """Build the wheel from a copy of the checkout (the links travel with it) and look inside."""
    if not _builds_wheels():
        pytest.skip("needs setuptools >= 70.1 or the wheel package (the test extra has them)")
    src = tmp_path / "checkout"
    src.mkdir()
    for part in ("pyproject.toml", "README.md", "src", "docs", "contrib"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, src / part, symlinks=True, ignore=_ignore)
        else:
            shutil.copy2(ROOT / part, src / part)
    out = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "-q"]
    subprocess.run(
        [*pip, "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("gpuprobe-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in printed_paths():
        if path not in CHECKOUT_ONLY:
            assert f"gpuprobe/{path}" in names, f"{path} is not in {wheel.name}"
    shipped = zipfile.ZipFile(wheel).read("gpuprobe/docs/experiments.md").decode()
    assert shipped == (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    assert not any(n.startswith("docs/") or n.startswith("contrib/") for n in names)


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", "build") or n.endswith(".egg-info")}


def _builds_wheels() -> bool:
    """setuptools with bdist_wheel (built in from 70.1; older ones need the wheel package)."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    try:
        import setuptools.command.bdist_wheel  # noqa: F401
    except ImportError:
        return importlib.util.find_spec("wheel") is not None
    return True
