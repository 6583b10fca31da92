"""THE one renderer of findings, for every tool: plain text lines (under a result's table), a rich
table (the terminal), HTML rows and tables (notebooks, pages); JSON is the finding's own
``to_dict()``. Styles come from :mod:`gpuprobe.ui.style`; numbers are the evidence's own
formatting (:class:`~gpuprobe.core.findings.Evidence`, units from :mod:`gpuprobe.core.units`).
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status, worst_first
from gpuprobe.ui.console import Hanging, HangingLine
from gpuprobe.ui.reprs import code_html, fix_html
from gpuprobe.ui.style import STATUS_COLORS, STATUS_LABEL, STATUS_STYLE

__all__ = [
    "finding_html",
    "finding_table_html",
    "findings_html",
    "findings_lines",
    "print_findings",
    "render_findings",
    "result_html",
    "text_html",
]


def findings_lines(
    findings: Iterable[Finding],
    *,
    skip: tuple[str, ...] = (),
    no_details: tuple[str, ...] = (),
    no_fix: tuple[str, ...] = (),
) -> list[str]:
    """Findings as plain-text lines under a result's table (its ``__str__``): ``  [status]
    title``, then ``- detail`` lines and ``fix:``; ids in ``skip`` are left out, those in
    ``no_details`` / ``no_fix`` shown without them."""
    lines: list[str] = []
    for f in findings:
        if f.id in skip:
            continue
        lines.append(f"  [{f.status.value}] {f.title}")
        if f.id not in no_details:
            lines.extend(f"         - {d}" for d in f.details)
        if f.fix and f.id not in no_fix:
            lines.append(f"         fix: {f.fix}")
        if f.gain_text and f.id not in no_fix:
            lines.append(f"         gain: {f.gain_text}")
    return lines


INDENT = " " * 8  # where a finding's lines begin under its status in print_findings


def print_findings(
    con: Any,
    findings: Iterable[Finding],
    *,
    brief: tuple[Status, ...] = (Status.OK, Status.SKIPPED),
    fix_for: tuple[Status, ...] | None = None,
    details: int | None = 3,
) -> None:
    """Findings worst first on a rich console, each ``STATUS id [subject]  title`` then its
    evidence, ``fix:``, ``gain:`` and up to ``details`` details (None: all), every wrapped line
    under the first of its kind; those of a status in ``brief`` get the title alone, the fix
    only those in ``fix_for`` (None: every status)."""
    from rich.text import Text

    for f in worst_first(list(findings)):
        subject = f" [{f.subject}]" if f.subject else ""
        status = Text(f"{f.status.value.upper():>7} ", STATUS_STYLE[f.status])
        con.print(Hanging(status, Text.assemble((f.id, "bold"), subject, "  ", f.title)))
        if f.status in brief:
            continue
        if f.evidence:
            con.print(Hanging(INDENT, Text("  ".join(map(str, f.evidence)), style="dim")))
        if f.fix and (fix_for is None or f.status in fix_for):
            con.print(Hanging(Text(INDENT + "fix: ", "bold"), Text(f.fix)))
        if f.gain_text:
            con.print(Hanging(Text(INDENT + "gain: ", "bold"), Text(f.gain_text)))
        for line in f.details if details is None else f.details[:details]:
            con.print(Hanging(Text(INDENT + "· ", style="dim"), Text(line, style="dim")))


def _finding_cell(f: Finding) -> Any:
    """A finding in a table's cell: its title (its continuations two columns in), then
    ``evidence:``, ``fix:`` and ``gain:``, each wrapped under the text after its label."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = [HangingLine(Text(f.title), marker=False, overflow="fold")]
    if f.evidence:
        evidence = ", ".join(str(e) for e in f.evidence)
        parts.append(Hanging(Text("evidence: ", "dim"), Text(evidence, style="dim")))
    if f.fix and f.status in (Status.FAIL, Status.WARN, Status.INFO):
        parts.append(Hanging(Text("fix: ", "bold"), Text(f.fix, style="bold")))
    if f.gain_text:
        parts.append(Hanging("gain: ", f.gain_text))
    return Group(*parts)


def render_findings(findings: list[Finding], console: Any, title: str) -> None:
    """A rich table of findings on ``console``: status, id, title with evidence and fix."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, title_justify="left", expand=True, show_lines=True)
    t.add_column("", no_wrap=True, width=4)
    t.add_column("check", no_wrap=True, style="dim")
    t.add_column("finding", overflow="fold", ratio=1)
    for f in findings:
        t.add_row(
            Text(STATUS_LABEL[f.status], style=STATUS_STYLE[f.status]), f.id, _finding_cell(f)
        )
    console.print(t)


def finding_html(f: Finding) -> str:
    """One finding as a table row: status, id, title with evidence, details and fix."""
    color = STATUS_COLORS[f.status]
    evidence = ", ".join(str(e) for e in f.evidence)
    details = "".join(f"<br><small>– {code_html(d)}</small>" for d in f.details)
    fix = f"<br><b>fix:</b> {fix_html(f.fix)}" if f.fix else ""
    if f.gain_text:
        fix += f"<br><b>gain:</b> {escape(f.gain_text)}"
    ev = f"<br><small>{escape(evidence)}</small>" if evidence else ""
    return (
        f"<tr><td style='color:{color};font-weight:bold;vertical-align:top'>{f.status.value}"
        f"</td><td style='vertical-align:top'><code>{escape(f.id)}</code></td>"
        f"<td style='text-align:left'>{code_html(f.title)}{ev}{details}{fix}</td></tr>"
    )


def finding_table_html(f: Finding) -> str:
    """One finding as a one-row table (``Finding._repr_html_``)."""
    return f"<table>{finding_html(f)}</table>"


def findings_html(findings: Iterable[Finding], title: str = "findings") -> str:
    """The findings, worst first, as an HTML table (nothing when there are none)."""
    fs = worst_first(findings)
    if not fs:
        return ""
    rows = "".join(finding_html(f) for f in fs)
    return f"<h4>{escape(title)}</h4><table>{rows}</table>"


def text_html(text: str, findings: Iterable[Finding] = (), css_class: str = "gpuprobe") -> str:
    """A result's text (its table) in a <pre>, then its findings as a table."""
    return (
        f"<div class='{escape(css_class)}'><pre>{escape(text)}</pre>{findings_html(findings)}</div>"
    )


def result_html(result: object) -> str:
    """A result whose ``str`` is a plain-text table (PackReport, FitResult, PrecisionReport) as
    HTML: that text in a <pre> of class ``gpuprobe-<its class name in lower case>``."""
    return text_html(str(result), css_class=f"gpuprobe-{type(result).__name__.lower()}")


render.html.register(Finding, finding_table_html)
