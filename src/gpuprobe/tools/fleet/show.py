"""The fleet's report shown: the nodes grouped by configuration (what each group runs, what an odd
node has instead), a row per node, and the cross-node findings worst first, for the terminal
(``gpuprobe doctor --cluster``), ``str()`` (80 columns), a notebook (HTML) and a one-line repr."""

from __future__ import annotations

from html import escape
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status
from gpuprobe.core.render import one_line
from gpuprobe.tools.doctor import show as _doctor_views  # noqa: F401  (a node holds a DoctorReport)
from gpuprobe.tools.fleet.config import CONFIG_KEYS
from gpuprobe.tools.fleet.model import FleetDoctorReport, NodeResult
from gpuprobe.ui.findings import findings_html, print_findings
from gpuprobe.ui.reprs import capture
from gpuprobe.ui.style import STATUS_STYLE

__all__ = ["fleet_html", "fleet_repr", "fleet_text", "render_fleet"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _letter(i: int) -> str:
    return _LETTERS[i] if i < len(_LETTERS) else f"G{i + 1}"


def _group_of(report: FleetDoctorReport) -> dict[str, str]:
    return {n: _letter(i) for i, g in enumerate(report.groups) for n in g.nodes}


def _headline(r: FleetDoctorReport) -> str:
    workers = sum(len(n.workers) for n in r.nodes)
    slowest = f" (slowest node {r.slowest_node_s:.1f} s)" if r.slowest_node_s else ""
    return (
        f"{len(r.nodes)} node(s), {workers} worker(s), {len(r.groups)} configuration(s), "
        f"{r.elapsed_s or 0:.1f} s{slowest}"
    )


def render_fleet(r: FleetDoctorReport, con: Any) -> None:
    """Print the report on a rich console."""
    from rich.table import Table
    from rich.text import Text

    con.print(
        Text.assemble(("gpuprobe doctor --cluster ", "bold"), f"{r.scheduler}: {_headline(r)}")
    )
    if r.groups:
        con.print(Text("Configurations", style="bold"))
        base = r.groups[0].config
        for i, g in enumerate(r.groups):
            nodes = ", ".join(g.nodes)
            con.print(
                Text.assemble((f"  {_letter(i)}  ", "bold"), f"{len(g.nodes)} node(s): {nodes}")
            )
            if i == 0:
                facts = "; ".join(f"{k} {g.config[k]}" for k in CONFIG_KEYS if k in g.config)
            else:
                facts = "differs from A: " + "; ".join(
                    f"{k} {g.config.get(k, '?')} (A: {base.get(k, '?')})"
                    for k in CONFIG_KEYS
                    if g.config.get(k) != base.get(k)
                )
            con.print(f"     {facts}", markup=False)
    table = Table(title=None, box=None, padding=(0, 1), header_style="dim", show_edge=False)
    for col in ("node", "workers", "threads", "GPUs", "driver", "doctor", "cfg"):
        table.add_column(
            col, overflow="fold", justify="right" if col in ("workers", "threads") else "left"
        )
    group_of = _group_of(r)
    for n in r.nodes:
        table.add_row(*_row(n, group_of.get(n.name, "-")))
    con.print(Text("Nodes", style="bold"))
    con.print(table)
    print_findings(con, r.findings, brief=(Status.OK,))
    style = STATUS_STYLE[r.status]
    verdict = {
        Status.FAIL: "a node is broken or missing: see the FAIL rows",
        Status.WARN: "the nodes differ: see the WARN rows and their fixes",
    }.get(r.status, "the nodes are alike")
    con.print(Text.assemble(("verdict: ", "bold"), (verdict, style)))


def _row(n: NodeResult, group: str) -> list[Any]:
    from rich.text import Text

    threads = ", ".join(str(t) for t in sorted(set(n.threads))) or "?"
    if n.report is None:
        return [n.name, str(len(n.workers)), threads, "", "",
                Text(n.status, style=STATUS_STYLE[Status.FAIL]), "-"]  # fmt: skip
    verdict = n.verdict
    return [
        n.name,
        str(len(n.workers)),
        threads,
        n.config.get("gpus", "?"),
        n.config.get("driver", "?"),
        Text(verdict.value, style=STATUS_STYLE[verdict]),
        group,
    ]


def fleet_text(r: FleetDoctorReport) -> str:
    """The report as plain text, 80 columns (``str(report)``)."""
    return capture(lambda con: render_fleet(r, con))


def fleet_html(r: FleetDoctorReport) -> str:
    """The groups and nodes as HTML tables, then the findings (a notebook)."""
    group_of = _group_of(r)
    head = "".join(f"<th>{h}</th>" for h in ("node", "workers", "threads", "GPUs", "driver",
                                              "doctor", "configuration"))  # fmt: skip
    rows = []
    for n in r.nodes:
        cells = _row(n, group_of.get(n.name, "-"))
        rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    groups = "".join(
        f"<tr><th>{_letter(i)}</th><td>{escape(', '.join(g.nodes))}</td><td>"
        + escape("; ".join(f"{k} {v}" for k, v in g.config.items()))
        + "</td></tr>"
        for i, g in enumerate(r.groups)
    )
    return (
        f"<div class='gpuprobe-fleet'><p><b>gpuprobe doctor --cluster</b> "
        f"{escape(r.scheduler)}: {escape(_headline(r))}</p>"
        f"<table><caption>configurations</caption>{groups}</table>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
        f"{findings_html(r.findings)}</div>"
    )


def fleet_repr(r: FleetDoctorReport) -> str:
    """``<FleetDoctorReport tcp://…: 3 nodes, 4 workers, 2 configurations; 1 warn, 1 ok>``."""
    from gpuprobe.core.findings import status_counts

    return one_line(
        "FleetDoctorReport", f"{r.scheduler}: {_headline(r)}; {status_counts(r.findings)}"
    )


render.text.register(FleetDoctorReport, fleet_text)
render.terminal.register(FleetDoctorReport, render_fleet)
render.html.register(FleetDoctorReport, fleet_html)
render.repr_.register(FleetDoctorReport, fleet_repr)
