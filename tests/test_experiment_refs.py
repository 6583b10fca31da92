"""The experiment codes E1…E10 that the source, the findings and the docs cite resolve to
docs/experiments.md, a page in this repository, and not to notes outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "experiments.md"
CODES = [f"e{i}" for i in range(1, 11)]
E_CODE = re.compile(r"\bE(10|[1-9])\b")
POINTER = re.compile(r"experiments\.md#([A-Za-z0-9_-]+)")


def _text_files(*tops: Path) -> list[Path]:
    """Every text file under ``tops`` (a file is taken as is); binary files (images) are left out."""
    out = []
    for top in tops:
        for p in [top] if top.is_file() else sorted(top.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and b"\0" not in p.read_bytes():
                out.append(p)
    return out


def _anchors() -> list[str]:
    return re.findall(r'^<a id="([^"]+)"></a>$', PAGE.read_text(encoding="utf-8"), re.M)


def test_the_page_has_an_anchor_and_a_section_for_each_experiment() -> None:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    assert _anchors() == CODES
    for code in CODES:
        at = lines.index(f'<a id="{code}"></a>')
        heading = next(line for line in lines[at + 1 :] if line.strip())
        assert heading.startswith(f"## {code.upper()}: "), heading
        body = []
        for line in lines[at + 2 :]:
            if line.startswith("<a id="):
                break
            body.append(line)
        assert "**Redo it.**" in "\n".join(body), f"{code}: no command that redoes it"


def test_every_module_citing_an_experiment_points_to_the_page() -> None:
    missing = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "src" / "gpuprobe").rglob("*.py"))
        if E_CODE.search(text := p.read_text(encoding="utf-8"))
        and "docs/experiments.md" not in text
    ]
    assert not missing, f"cite E-codes without pointing to docs/experiments.md: {missing}"


def test_nothing_points_to_the_notes_outside_the_repository() -> None:
    files = _text_files(ROOT / "src", ROOT / "docs", ROOT / "README.md")
    stale = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b(references|research)/", line)
    ]
    assert not stale, f"point to notes that are not in the repository: {stale}"


def test_every_pointer_to_the_page_names_an_anchor_it_has() -> None:
    anchors = set(_anchors())
    files = _text_files(ROOT / "src", ROOT / "docs", ROOT / "README.md")
    bad = [
        f"{p.relative_to(ROOT)}: #{a}"
        for p in files
        for a in POINTER.findall(p.read_text(encoding="utf-8"))
        if a not in anchors
    ]
    inner = re.findall(r"\]\(#([A-Za-z0-9_-]+)\)", PAGE.read_text(encoding="utf-8"))
    bad += [f"docs/experiments.md: #{a}" for a in inner if a not in anchors]
    assert not bad, f"pointers to anchors docs/experiments.md does not have: {bad}"


@pytest.mark.parametrize("n", [10_000, 4_096])
def test_the_cpu_e1_finding_points_to_e1(n: int) -> None:
    from _support import DATA
    from gpuprobe.platform.inventory import load
    from gpuprobe.platform.measurement import Measurement
    from gpuprobe.tools.doctor.model import DoctorContext
    from gpuprobe.tools.doctor.rules.kernels import judge_cpu
    from gpuprobe.tools.doctor.worker import WorkerResult

    m = Measurement.from_times(
        "e1-float64", "numpy", "cpu", [1.0] * 3, metadata={"dtype": "float64", "n": n}
    )
    (f,) = [
        f
        for f in judge_cpu(
            DoctorContext(
                load(DATA / "t4.json"), (WorkerResult("numpy", "cpu", measurements=(m,)),)
            )
        )
    ]
    assert f.id == "cpu-e1"
    assert "docs/experiments.md#e1" in f"{f.title} {' '.join(map(str, f.evidence))} {f.fix}"
