"""Terminal rendering of ``gpuprobe bench`` with rich: one table per workload, the findings, and
(with ``--compare``) what changed since the last run on this machine. E-codes:
docs/experiments.md."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpuprobe.core import render
from gpuprobe.core.findings import worst_first
from gpuprobe.core.units import seconds
from gpuprobe.core.wrap import TEXT_WIDTH
from gpuprobe.platform.timing import NAIVE_TIMER
from gpuprobe.tools.bench.model import OUTLIER_RATIO, BenchComparison, BenchReport, BenchResult
from gpuprobe.tools.bench.workloads import by_name
from gpuprobe.ui.findings import render_findings

if TYPE_CHECKING:  # rich is imported when a table is drawn, not with the tool
    from rich.console import Console
    from rich.table import Table

__all__ = ["bench_html", "bench_text", "figure", "format_size", "outlier_note", "render_bench"]


def format_size(r: BenchResult) -> str:
    """``4096`` for n, ``64 MiB`` for bytes, ``5e+06`` for element counts."""
    if r.size is None:
        return ""
    if r.size_unit == "bytes":
        n = float(r.size)
        for unit in ("B", "KiB", "MiB", "GiB"):
            if n < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}"
            n /= 1024
    if r.size_unit == "elements" and r.size >= 100_000:
        return f"{r.size:.0e}".replace("e+0", "e")
    return str(r.size)


def _count(n: int) -> str:
    """50000000 -> '50 M', 5000000 -> '5 M', 2500 -> '2500'."""
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1e6:g} M"
    return str(n)


def _title(workload: str, results: list[BenchResult]) -> str:
    """The workload's heading, with the size actually run where the heading names one (E8's
    note ran 50 M, docs/experiments.md#e8; --quick runs 5 M)."""
    w = by_name(workload)
    title = w.title if w is not None else workload
    if "{size}" in title:
        sizes = sorted({r.size for r in results if r.size})
        title = title.format(size=", ".join(_count(n) for n in sizes) or "n/a")
    return title


def figure(x: float) -> str:
    """Three significant digits, never as an exponent: ``4260``, ``35300``, ``0.0524``, ``6.51``
    (rich shows ``4.26e+03 GB/s`` for :func:`format` ``.3g``, which a person reads as 4.26)."""
    r = float(f"{x:.3g}")
    return f"{r:.0f}" if math.isfinite(r) and abs(r) >= 1000 else f"{r:.3g}"


def _flops(tera: float, unit: str) -> str:
    """A compute rate in ``T`` + ``unit`` (``FLOP/s``, ``OP/s``), in G below 1 T."""
    return f"{figure(tera)} T{unit}" if tera >= 1 else f"{figure(tera * 1e3)} G{unit}"


def _rate(r: BenchResult) -> str:
    v = r.values
    if (t := v.get("tflops")) is not None:
        return _flops(t, r.tflops_unit[1:])
    if (x := v.get("gbs")) is not None:
        return f"{figure(x)} GB/s"
    if (x := v.get("apparent_gbs")) is not None:
        return f"({figure(x)} GB/s?)"
    if (x := v.get("us")) is not None:
        return f"{figure(x)} µs/op"
    if (x := v.get("us_per_step")) is not None:
        return f"{figure(x)} µs/step"
    if (x := v.get("gflops")) is not None:
        return _flops(x / 1e3, "FLOP/s")
    return ""


def _notes(r: BenchResult) -> str:
    v = r.values
    parts = []
    m = r.measurement
    if m is not None and m.too_spread and m.timer != NAIVE_TIMER:
        parts.append("not trustworthy: the runs never agreed")
    if v.get("rel_error") is not None:
        err = v["rel_error"]
        parts.append(f"err {err:.1e}" if err else "err 0")  # float64's small products: exact
    if v.get("note_s") is not None:
        parts.append(f"note: {seconds(v['note_s'])}")
    if v.get("speedup") is not None:
        parts.append(f"{v['speedup']:.2f}× vs one after the other")
    if v.get("correct_s"):  # E8's host clock (scale's naive case), beside the right time
        if r.device == "cpu":
            parts.append("host clock: right on a CPU, whose calls are synchronous")
        else:
            parts.append(
                f"host clock saw the launch only; the device took {seconds(v['correct_s'])}"
            )
    if r.conditions is not None and r.conditions.sm_clock_mhz_max is not None:
        c = r.conditions
        parts.append(
            f"{c.sm_clock_mhz_min}-{c.sm_clock_mhz_max} MHz"
            + (f", {c.temperature_c_max} °C" if c.temperature_c_max is not None else "")
            + (f", {c.power_w_max:.0f} W" if c.power_w_max is not None else "")
        )
    return "; ".join(parts)


# Columns left out, first to last, when a workload's table is wider than the terminal: the spread
# and the count matter least next to the median and the rate.
DROP_ORDER = ("p20–p80", "n", "median")


def _table(workload: str, results: list[BenchResult], width: int = 200) -> tuple[Table, str | None]:
    """The workload's table for a console ``width`` wide, and a note on columns left out."""
    from gpuprobe.ui.columns import columns_that_fit, left_out_note

    gpu = any(r.device != "cpu" for r in results)
    columns = ["backend", "case", "size", "median", "p20–p80", "n", "rate"]
    columns += ["% peak"] if gpu else []
    header = [*columns, "notes"]
    rows: list[tuple[list[str], str | None]] = []
    for r in results:
        backend = f"{r.framework} {r.device}"
        blank = [""] * (len(columns) - 3)
        if not r.ok or r.measurement is None:
            style = "yellow" if r.status == "out-of-memory" else "dim"
            rows.append(([backend, r.case, format_size(r), *blank, r.reason or r.status], style))
            continue
        m = r.measurement
        pct = r.values.get("pct_peak")
        row = [
            backend,
            r.case,
            format_size(r),
            seconds(m.median),
            f"{seconds(m.p20)}–{seconds(m.p80)}",
            f"{m.n - m.slowed}/{m.n}" if m.slowed else str(m.n),  # agreeing runs / all
            _rate(r),
        ]
        if gpu:
            row.append(f"{pct:.0f} %" if pct is not None else "n/a")
        rows.append(([*row, _notes(r)], None))
    keep = columns_that_fit(
        header, [c for c, _ in rows], width, drop_order=DROP_ORDER, wrap=("notes",)
    )
    from rich.table import Table

    t = Table(expand=False)  # its title is printed above it, wrapped under its lead
    for i in keep:
        name = header[i]
        right = name not in ("backend", "case", "notes")
        # numbers are never cut: a cell too wide folds onto the next line instead of "40…"
        t.add_column(
            name,
            justify="right" if right else "left",
            no_wrap=name not in ("notes", "backend", "case"),
            overflow="fold",
        )
    for cells, row_style in rows:
        t.add_row(*[cells[i] for i in keep], style=row_style)
    return t, left_out_note(header, keep)


def _figure(x: float, unit: str) -> str:
    return seconds(x) if unit == "s" else f"{x:.4g} {unit}"


def _comparison(c: BenchComparison) -> Table:
    from rich.table import Table

    t = Table(
        title=f"compared with run {c.previous_run} ({c.previous_created})",
        title_justify="left",
    )
    for name in ("result", "old", "new", "new/old", ""):
        t.add_column(name, justify="left" if name in ("result", "") else "right", overflow="fold")
    for ch in c.changes:
        mark = {True: "[green]better[/]", False: "[red]worse[/]", None: "same"}[ch.better]
        if ch.outlier:
            mark = "[yellow]outlier[/]"
        t.add_row(
            ch.key, _figure(ch.old, ch.unit), _figure(ch.new, ch.unit), _ratio(ch.ratio), mark
        )
    return t


def _ratio(r: float) -> str:
    """new/old: three decimals near 1 (``1.048``), three significant figures far from it
    (``92.9``, ``0.0108``), so an outlier does not read as a precise figure."""
    return f"{r:.3f}" if 0.1 <= r < 10 else f"{r:.3g}"


def outlier_note(c: BenchComparison) -> str | None:
    """One line under the comparison when some result moved :data:`OUTLIER_RATIO`× or more."""
    n = sum(ch.outlier for ch in c.changes)
    if not n:
        return None
    return (
        f"outlier: {n} result(s) moved {OUTLIER_RATIO:g}× or more since run {c.previous_run}; "
        "that is a measurement problem in one of the runs (a cold first run, another job on "
        "the device, clocks held low, a broken driver), not better or worse: run both again"
    )


def render_bench(report: BenchReport, console: Console) -> None:
    """Print the report: a table per workload, findings, comparison, environment."""
    from rich.text import Text

    env = report.environment
    console.print(
        f"[bold]gpuprobe bench[/] on {env.hostname}: {env.cpu or 'unknown CPU'}"
        + (f"; {', '.join(env.gpus)}; driver {env.driver}" if env.gpus else "; no GPU")
        + (f"; numpy BLAS {env.blas}, {env.threads} threads" if env.blas else "")
        + ("; quick sizes" if report.quick else "")
    )
    for w in report.workloads:
        rs = [r for r in report.results if r.workload == w]
        if rs:
            table, note = _table(w, rs, console.width)
            console.print(Text(_title(w, rs), style="table.title"))
            console.print(table)
            if note:
                console.print(f"[dim]{note}[/]")
    for wr in report.workers:
        if wr.error:
            console.print(f"[red]{wr.framework} {wr.device}: {wr.error}[/]")
    if report.findings:
        render_findings(worst_first(report.findings), console, "findings")
    c = report.comparison
    if c is not None:
        if c.environment_changes:
            console.print(
                "[bold]changed since the last run:[/] " + "; ".join(c.environment_changes)
            )
        if c.changes:
            console.print(_comparison(c))
            if note := outlier_note(c):
                console.print(f"[yellow]{note}[/]")
        if c.note:
            console.print(f"compare: {c.note}")
    tail = f"{report.elapsed_s or 0:.1f} s"
    if report.run_id is not None:
        tail += f"; saved as run {report.run_id} in the history"
    console.print(f"[dim]{tail}[/]")


def bench_text(report: BenchReport, width: int = TEXT_WIDTH) -> str:
    """The report as plain text (``str(report)``)."""
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: render_bench(report, con), width)


def bench_html(report: BenchReport) -> str:
    """The report as HTML for notebooks (rendered once: nothing is displayed on the side)."""
    from gpuprobe.ui.reprs import capture_html

    return capture_html(lambda con: render_bench(report, con), 140)


render.text.register(BenchReport, bench_text)
render.html.register(BenchReport, bench_html)
render.terminal.register(BenchReport, render_bench)
