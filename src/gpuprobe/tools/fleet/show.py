"""The fleet's reports shown, for the terminal, ``str()`` (80 columns), a notebook (HTML) and a
one-line repr: ``doctor --cluster``'s nodes grouped by configuration (what each group runs, what
an odd node has instead), a row per node and the cross-node findings worst first; ``bench
--cluster``'s row per node (its figures against its peers'), each device model's figures node
beside node with the outliers marked, and the findings."""

from __future__ import annotations

from html import escape
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status
from gpuprobe.core.render import one_line
from gpuprobe.tools.doctor import show as _doctor_views  # noqa: F401  (a node holds a DoctorReport)
from gpuprobe.tools.fleet.bench_rules import OUTLIER_MADS, OUTLIER_MIN_GAP
from gpuprobe.tools.fleet.config import CONFIG_KEYS
from gpuprobe.tools.fleet.model import (
    BenchPoint,
    FleetBenchReport,
    FleetDoctorReport,
    NodeBench,
    NodeResult,
    nodes_and_workers,
)
from gpuprobe.ui.findings import findings_html, print_findings
from gpuprobe.ui.reprs import capture
from gpuprobe.ui.style import STATUS_STYLE

__all__ = [
    "bench_html",
    "bench_text",
    "fleet_html",
    "fleet_repr",
    "fleet_text",
    "render_bench",
    "render_fleet",
]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _letter(i: int) -> str:
    return _LETTERS[i] if i < len(_LETTERS) else f"G{i + 1}"


def _group_of(report: FleetDoctorReport) -> dict[str, str]:
    return {n: _letter(i) for i, g in enumerate(report.groups) for n in g.nodes}


def _headline(r: FleetDoctorReport) -> str:
    slowest = f" (slowest node {r.slowest_node_s:.1f} s)" if r.slowest_node_s else ""
    return (
        f"{nodes_and_workers(r.nodes)}, {len(r.groups)} configuration(s), "
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
    for col in ("node", "workers", "threads", "GPUs", "driver", "doctor", "kernels", "cfg"):
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
                Text(n.status, style=STATUS_STYLE[Status.FAIL]), "-", "-"]  # fmt: skip
    verdict = n.verdict
    return [
        n.name,
        str(len(n.workers)),
        threads,
        n.config.get("gpus", "?"),
        n.config.get("driver", "?"),
        Text(verdict.value, style=STATUS_STYLE[verdict]),
        _kernels(n),
        group,
    ]


def _kernels(n: NodeResult) -> str:
    """Where the row's kernel checks ran: "on a" (its worker a), "by a" (worker a of the host,
    which ran them on the same GPUs), "off" (not asked); "ran" in a report recorded before rows
    said where (its own worker's results are in it)."""
    if n.kernels_by:
        more = "…" if len(n.kernels_by) > 1 else ""
        return f"{'on' if n.kernels_on else 'by'} {n.kernels_by[0]}{more}"
    if n.kernels_note is None and n.report is not None and n.report.workers:
        return "ran"
    return "off"


def fleet_text(r: FleetDoctorReport) -> str:
    """The report as plain text, 80 columns (``str(report)``)."""
    return capture(lambda con: render_fleet(r, con))


def fleet_html(r: FleetDoctorReport) -> str:
    """The groups and nodes as HTML tables, then the findings (a notebook)."""
    group_of = _group_of(r)
    head = "".join(f"<th>{h}</th>" for h in ("node", "workers", "threads", "GPUs", "driver",
                                              "doctor", "kernels", "configuration"))  # fmt: skip
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
    return _frame(
        r,
        f"<table><caption>configurations</caption>{groups}</table>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>",
    )


def _frame(r: FleetDoctorReport | FleetBenchReport, body: str) -> str:
    """A fleet report's HTML: the command and headline, ``body``, then the findings."""
    command = "doctor" if isinstance(r, FleetDoctorReport) else "bench"
    return (
        f"<div class='gpuprobe-fleet'><p><b>gpuprobe {command} --cluster</b> "
        f"{escape(r.scheduler)}: {escape(_any_headline(r))}</p>"
        f"{body}{findings_html(r.findings)}</div>"
    )


def _any_headline(r: FleetDoctorReport | FleetBenchReport) -> str:
    return _headline(r) if isinstance(r, FleetDoctorReport) else _bench_headline(r)


def fleet_repr(r: FleetDoctorReport | FleetBenchReport) -> str:
    """``<FleetDoctorReport tcp://…: 3 nodes, 4 workers, 2 configurations; 1 warn, 1 ok>``,
    ``<FleetBenchReport tcp://…: 1 node(s), 2 worker(s), matmul, …; 1 warn, 1 ok>``."""
    from gpuprobe.core.findings import status_counts

    return one_line(
        type(r).__name__, f"{r.scheduler}: {_any_headline(r)}; {status_counts(r.findings)}"
    )


# A device model with at most this many devices is shown node beside node (a column each: 80
# columns hold three); more, as the median, the lowest and the highest.
MATRIX_MAX_DEVICES = 3
_MARK = "!"  # after an outlying figure


def _bench_headline(r: FleetBenchReport) -> str:
    how = "one at a time" if r.one_at_a_time else "a host's workers in turn"
    slowest = f" (slowest node {r.slowest_node_s:.1f} s)" if r.slowest_node_s else ""
    return (
        f"{nodes_and_workers(r.nodes)}, {', '.join(r.workloads)}{', quick' if r.quick else ''}, "
        f"{how}, {r.elapsed_s or 0:.1f} s{slowest}"
    )


def _node_vs_median(r: FleetBenchReport, n: NodeBench) -> tuple[str, int]:
    """The median over the node's figures of each figure against its point's median (above 1:
    faster), and how many of them are outliers."""
    import statistics

    ratios, odd = [], 0
    for p in r.points:
        for f in p.figures:
            if f.node == n.name and p.median and len(p.figures) > 1:
                ratio = f.value / p.median
                ratios.append(ratio if p.higher_is_better else 1 / ratio)
                odd += f.outlier
    return (f"{statistics.median(ratios):.2f}x" if ratios else "n/a"), odd


def _bench_row(r: FleetBenchReport, n: NodeBench) -> list[Any]:
    from rich.text import Text

    threads = ", ".join(str(t) for t in n.threads) or "?"
    if n.report is None:
        return [n.name, threads, "", "", Text(n.status, style=STATUS_STYLE[Status.FAIL]), "", ""]
    gpus = sum(1 for d in n.devices if d != "cpu")
    ratio, odd = _node_vs_median(r, n)
    return [
        n.name, threads, str(n.blas_threads or "?"), str(gpus),
        Text("ok", style=STATUS_STYLE[Status.OK]), f"{n.elapsed_s or 0:.1f}",
        ratio + (f" ({odd} {_MARK})" if odd else ""),
    ]  # fmt: skip


def _cell(p: BenchPoint, who: str) -> str:
    f = p.figure(who)
    if f is None:
        return "-"
    pct = f" {f.pct_peak:.0f}%" if f.pct_peak is not None else ""
    return f"{f.value:.3g}{pct}{_MARK if f.outlier else ''}"


def _by_model(r: FleetBenchReport) -> dict[str, list[BenchPoint]]:
    out: dict[str, list[BenchPoint]] = {}
    for p in r.points:
        out.setdefault(f"{p.kind} {p.model}", []).append(p)
    return out


def _whos(points: list[BenchPoint]) -> list[str]:
    return list(dict.fromkeys(f.who for p in points for f in p.figures))


def render_bench(r: FleetBenchReport, con: Any) -> None:
    """Print the fleet bench on a rich console."""
    from rich.table import Table
    from rich.text import Text

    con.print(
        Text.assemble(("gpuprobe bench --cluster ", "bold"), f"{r.scheduler}: {_bench_headline(r)}")
    )
    table = Table(box=None, padding=(0, 1), header_style="dim", show_edge=False)
    for col in ("node", "threads", "BLAS", "GPUs", "bench", "s", "vs median"):
        table.add_column(
            col, overflow="fold", justify="left" if col in ("node", "bench") else "right"
        )
    for n in r.nodes:
        table.add_row(*_bench_row(r, n))
    con.print(Text("Nodes", style="bold"))
    con.print(table)
    for model, points in _by_model(r).items():
        whos = _whos(points)
        con.print(Text.assemble((f"{model}", "bold"), f": {len(whos)} device(s)"))
        t = Table(box=None, padding=(0, 1), header_style="dim", show_edge=False)
        t.add_column("figure", overflow="fold")
        t.add_column("unit")
        if len(whos) <= MATRIX_MAX_DEVICES:
            for who in whos:
                t.add_column(who, justify="right", overflow="fold")
            for p in points:
                t.add_row(p.label, p.unit, *(_cell(p, who) for who in whos))
        else:
            for col in ("median", "lowest", "highest", _MARK):
                t.add_column(col, justify="right", overflow="fold")
            for p in points:
                lo = min(p.figures, key=lambda f: f.value)
                hi = max(p.figures, key=lambda f: f.value)
                t.add_row(p.label, p.unit, f"{p.median or 0:.3g}", f"{lo.value:.3g} {lo.who}",
                          f"{hi.value:.3g} {hi.who}", str(sum(f.outlier for f in p.figures)))  # fmt: skip
        con.print(t)
    if r.points:
        con.print(
            f"{_MARK}: more than {OUTLIER_MADS:g} MADs and {OUTLIER_MIN_GAP:.0%} from the "
            "median of its peers; N% (GPUs): of the spec peak",
            style="dim", markup=False,
        )  # fmt: skip
    print_findings(con, r.findings, brief=(Status.OK,))
    verdict = {
        Status.FAIL: "a node is broken or missing: see the FAIL rows",
        Status.WARN: "a node is slower than its peers: see the WARN rows",
    }.get(r.status, "the nodes perform alike")
    con.print(Text.assemble(("verdict: ", "bold"), (verdict, STATUS_STYLE[r.status])))


def bench_text(r: FleetBenchReport) -> str:
    """The fleet bench as plain text, 80 columns (``str(report)``)."""
    return capture(lambda con: render_bench(r, con))


def bench_html(r: FleetBenchReport) -> str:
    """The nodes, then each device model's figures node beside node, then the findings."""
    head = "".join(f"<th>{h}</th>" for h in ("node", "threads", "BLAS", "GPUs", "bench", "s",
                                              "vs median"))  # fmt: skip
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in _bench_row(r, n)) + "</tr>"
        for n in r.nodes
    )
    models = []
    for model, points in _by_model(r).items():
        whos = _whos(points)
        top = "".join(f"<th>{escape(w)}</th>" for w in ("figure", "unit", *whos))
        body = "".join(
            "<tr>"
            + f"<td>{escape(p.label)}</td><td>{escape(p.unit)}</td>"
            + "".join(
                f"<td><b>{escape(c)}</b></td>" if c.endswith(_MARK) else f"<td>{escape(c)}</td>"
                for c in (_cell(p, w) for w in whos)
            )
            + "</tr>"
            for p in points
        )
        models.append(f"<table><caption>{escape(model)}</caption><tr>{top}</tr>{body}</table>")
    return _frame(r, f"<table><tr>{head}</tr>{rows}</table>{''.join(models)}")


for _type, _views in (
    (FleetDoctorReport, (fleet_text, render_fleet, fleet_html)),
    (FleetBenchReport, (bench_text, render_bench, bench_html)),
):
    render.text.register(_type, _views[0])
    render.terminal.register(_type, _views[1])
    render.html.register(_type, _views[2])
    render.repr_.register(_type, fleet_repr)
