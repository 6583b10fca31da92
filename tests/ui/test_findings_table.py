"""ui.findings.render_findings: a finding in a table's cell wraps each of its parts under the
text after its label, and keeps a unit with its number."""

from __future__ import annotations

import io

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.ui.console import make_console
from gpuprobe.ui.findings import render_findings


def _table(f: Finding, width: int = 80) -> list[str]:
    buf = io.StringIO()
    con = make_console(file=buf, width=width, color_system=None, force_terminal=False)
    render_findings([f], con, "doctor")
    return buf.getvalue().splitlines()


def _cell(lines: list[str]) -> list[str]:
    """The finding column's text, line by line (the table's borders and first columns cut)."""
    start = lines[1].index("┳", lines[1].index("┳") + 1) + 2  # the third column
    return [line[start:].rstrip(" │┃") for line in lines if line.startswith("│")]


def test_evidence_and_fix_continue_under_the_text_after_their_label() -> None:
    f = Finding(
        "host-busy",
        Status.WARN,
        "host busy: other processes use most of this machine's cores while it is measured",
        evidence=(
            Evidence("others_cores", 1.9, "cores"),
            Evidence("host_cores", 2, "cores"),
            Evidence("load_per_core", 0.95),
            Evidence("sampled_for", 0.5, "s"),
        ),
        fix="stop the other jobs (top, htop) or run gpuprobe bench where the host is idle",
    )
    cell = _cell(_table(f, 72))
    ev = next(i for i, line in enumerate(cell) if line.startswith("evidence: "))
    fix = next(i for i, line in enumerate(cell) if line.startswith("fix: "))
    # the title's continuation two columns in, not under its "label:" (a narrow cell)
    assert cell[1].startswith("  ") and cell[1][2] != " " and ev == 2
    assert ev + 1 < fix  # the evidence takes two lines or more
    assert all(line.startswith(" " * 10) and line[10] != " " for line in cell[ev + 1 : fix])
    assert all(line.startswith(" " * 5) and line[5] != " " for line in cell[fix + 1 :] if line)
    assert cell[ev + 1 : fix] == [
        "          host_cores=2 cores, load_per_core=0.95,",
        "          sampled_for=500 ms",
    ]
    assert max(map(len, _table(f, 72))) <= 72
