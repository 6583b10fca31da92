"""HTML tables for Jupyter (``_repr_html_``): the same rows as the terminal, escaped."""

from __future__ import annotations

from html import escape

from gpuprobe.report.fields import (
    FRAMEWORK_HEADER,
    driver_rows,
    framework_row,
    gpu_rows,
    host_rows,
)

__all__ = ["doctor_html", "inventory_html"]


def _kv_table(rows: list[tuple[str, str]], title: str) -> str:
    body = "".join(
        f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>"
        f"{escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<h4>{escape(title)}</h4><table>{body}</table>"


def inventory_html(inv: object) -> str:
    """The inventory as HTML tables."""
    from gpuprobe.machine import Inventory

    assert isinstance(inv, Inventory)
    parts = [_kv_table(host_rows(inv.host), "Host"), _kv_table(driver_rows(inv), "Driver and CUDA")]
    parts += [_kv_table(gpu_rows(g), f"GPU {g.index}") for g in inv.gpus]
    head = "".join(f"<th>{escape(h)}</th>" for h in FRAMEWORK_HEADER)
    rows = "".join(
        "<tr>"
        + "".join(f"<td style='text-align:left'>{escape(c)}</td>" for c in framework_row(f))
        + "</tr>"
        for f in inv.frameworks
    )
    parts.append(f"<h4>Frameworks</h4><table><tr>{head}</tr>{rows}</table>")
    return "<div class='gpuprobe-inventory'>" + "".join(parts) + "</div>"


def doctor_html(report: object) -> str:
    """The doctor's findings as an HTML table, worst first, with evidence and fixes."""
    from gpuprobe.checks import DoctorReport

    assert isinstance(report, DoctorReport)
    from gpuprobe.report.reprs import finding_html

    rows = []
    for group, findings in report.by_group().items():
        rows.append(f"<tr><th colspan='3' style='text-align:left'>{escape(group)}</th></tr>")
        rows.extend(finding_html(f) for f in findings)
    verdict = f"<p><b>verdict:</b> {report.status.value}, exit code {report.exit_code}</p>"
    return f"<div class='gpuprobe-doctor'><table>{''.join(rows)}</table>{verdict}</div>"
