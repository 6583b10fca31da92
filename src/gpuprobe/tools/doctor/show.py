"""The doctor's report shown: a rich table per group in the terminal (``gpuprobe doctor``), plain
text (``str(report)``) and HTML (a notebook), registered with :mod:`gpuprobe.core.render`."""

from __future__ import annotations

from html import escape
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status
from gpuprobe.tools.doctor.model import DoctorReport
from gpuprobe.ui import inventory as _inventory_views  # noqa: F401  (a report holds an Inventory)
from gpuprobe.ui.findings import finding_html, render_findings
from gpuprobe.ui.reprs import capture
from gpuprobe.ui.style import STATUS_STYLE

__all__ = ["ACRONYMS", "doctor_html", "doctor_text", "group_heading", "render_doctor"]


# Words a group's heading keeps in capitals (str.capitalize made "gpu" read "Gpu").
ACRONYMS = frozenset({"gpu", "gpus", "cpu", "cuda", "nvml", "pcie", "mig", "mps", "blas"})


def group_heading(group: str) -> str:
    """A group's heading: ``gpu`` -> ``GPU``, ``cuda toolkit`` -> ``CUDA toolkit``,
    ``driver`` -> ``Driver`` (the first letter capitalized, acronyms in capitals)."""
    words = [w.upper() if w.lower() in ACRONYMS else w for w in group.split(" ")]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def render_doctor(report: DoctorReport, console: Any) -> None:
    """Print the doctor's report, group by group, worst first, then the verdict."""
    for group, findings in report.by_group().items():
        render_findings(findings, console, group_heading(group))
    counts = {s: sum(1 for f in report.findings if f.status is s) for s in Status}
    style = STATUS_STYLE[report.status]
    summary = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)
    verdict = {
        Status.FAIL: "something is broken: see the FAIL rows and their fixes",
        Status.WARN: "works, with warnings worth fixing",
    }.get(report.status, "all checks passed")
    if not report.inventory.has_gpu and report.status not in (Status.FAIL, Status.WARN):
        verdict = "no GPU here; the CPU was measured instead"
    elapsed = f" in {report.elapsed_s:.1f} s" if report.elapsed_s is not None else ""
    mode = "" if report.live else " (recorded snapshot: no kernels run)"
    from rich.text import Text

    console.print(
        Text.assemble(("verdict: ", "bold"), (verdict, style), f"  [{summary}]{elapsed}{mode}")
    )


def doctor_text(report: DoctorReport) -> str:
    """The doctor's report as plain text (``str(report)``)."""
    return capture(lambda con: render_doctor(report, con))


def doctor_html(report: DoctorReport) -> str:
    """The doctor's findings as an HTML table, worst first, with evidence and fixes."""
    rows = []
    for group, findings in report.by_group().items():
        rows.append(
            f"<tr><th colspan='3' style='text-align:left'>{escape(group_heading(group))}</th></tr>"
        )
        rows.extend(finding_html(f) for f in findings)
    verdict = f"<p><b>verdict:</b> {report.status.value}, exit code {report.exit_code}</p>"
    return f"<div class='gpuprobe-doctor'><table>{''.join(rows)}</table>{verdict}</div>"


render.text.register(DoctorReport, doctor_text)
render.html.register(DoctorReport, doctor_html)
render.terminal.register(DoctorReport, render_doctor)
