"""The OOM failure's fix points at the remedies by name, and they are there (issue 27: a "see
below" must have something below it; a report's text shows no fix lines and JSON has no below)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "ui"))
from _results import BUILDERS


def test_the_failure_names_the_finding_that_lists_the_remedies() -> None:
    report = BUILDERS["OomReport"]()
    by_id = {f.id: f for f in report.findings}
    what_to_do = by_id["oom-what-to-do"]
    assert what_to_do.title == "what to do, cheapest first" and len(what_to_do.details) >= 3
    fix = by_id["oom-error"].fix
    assert f"the finding '{what_to_do.title}' lists how" in fix
    assert "below" not in fix


def test_no_text_of_gpuprobe_says_see_below() -> None:
    src = Path(__file__).parents[3] / "src" / "gpuprobe"
    said = [
        f"{p.relative_to(src)}:{n}"
        for p in src.rglob("*.py")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "see below" in line.lower() and not line.lstrip().startswith("#")
    ]
    assert said == []
