"""Terminal rendering with rich: the inventory (``gpuprobe info``) and the doctor's report."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuprobe.findings import Finding, Status
from gpuprobe.machine import Inventory
from gpuprobe.report.fields import (
    FRAMEWORK_HEADER,
    driver_rows,
    framework_row,
    gpu_rows,
    host_rows,
)
from gpuprobe.report.reprs import capture
from gpuprobe.report.style import STATUS_LABEL, STATUS_STYLE

__all__ = ["doctor_text", "inventory_text", "render_doctor", "render_findings", "render_inventory"]


def _kv(rows: list[tuple[str, str]], title: str) -> Panel:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(k, v)
    return Panel(t, title=title, title_align="left", expand=True)


def render_inventory(inv: Inventory, console: Console) -> None:
    """Print the inventory: host, driver, each GPU, frameworks."""
    console.print(_kv(host_rows(inv.host), "Host"))
    console.print(_kv(driver_rows(inv), "Driver and CUDA"))
    if not inv.gpus:
        console.print(
            Panel(
                Text(
                    "none: "
                    + (
                        "no NVIDIA device on the PCI bus and no driver"
                        if not inv.pci_nvidia
                        else "NVIDIA device(s) on the PCI bus, but no working "
                        "driver (run 'gpuprobe doctor')"
                    )
                ),
                title="GPUs",
                title_align="left",
            )
        )
    for g in inv.gpus:
        console.print(_kv(gpu_rows(g), f"GPU {g.index}"))
    t = Table(title="Frameworks", title_justify="left", expand=True)
    for h in FRAMEWORK_HEADER:
        t.add_column(h, overflow="fold")
    for f in inv.frameworks:
        t.add_row(*framework_row(f))
    console.print(t)
    if inv.origin != "live":
        console.print(f"[dim]recorded snapshot: {inv.origin} ({inv.created})[/dim]")


def _finding_cell(f: Finding) -> Group:
    parts: list[Text] = [Text(f.title)]
    if f.evidence:
        parts.append(Text("evidence: " + ", ".join(str(e) for e in f.evidence), style="dim"))
    if f.fix and f.status in (Status.FAIL, Status.WARN, Status.INFO):
        parts.append(Text("fix: " + f.fix, style="bold"))
    return Group(*parts)


def render_findings(findings: list[Finding], console: Console, title: str) -> None:
    """A table of findings: status, id, title with evidence and fix."""
    t = Table(title=title, title_justify="left", expand=True, show_lines=True)
    t.add_column("", no_wrap=True, width=4)
    t.add_column("check", no_wrap=True, style="dim")
    t.add_column("finding", overflow="fold", ratio=1)
    for f in findings:
        t.add_row(
            Text(STATUS_LABEL[f.status], style=STATUS_STYLE[f.status]), f.id, _finding_cell(f)
        )
    console.print(t)


def render_doctor(report: object, console: Console) -> None:
    """Print the doctor's report, group by group, worst first, then the verdict."""
    from gpuprobe.checks import DoctorReport

    assert isinstance(report, DoctorReport)
    for group, findings in report.by_group().items():
        render_findings(findings, console, group.capitalize())
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
    console.print(
        Text.assemble(("verdict: ", "bold"), (verdict, style), f"  [{summary}]{elapsed}{mode}")
    )


def inventory_text(inv: Inventory) -> str:
    """The inventory as plain text (``str(inventory)``)."""
    return capture(lambda con: render_inventory(inv, con))


def doctor_text(report: object) -> str:
    """The doctor's report as plain text (``str(report)``)."""
    return capture(lambda con: render_doctor(report, con))
