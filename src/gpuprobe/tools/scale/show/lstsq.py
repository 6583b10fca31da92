"""How least-squares results read: :class:`~gpuprobe.tools.scale.lstsq.LstsqReport` (a solve) and
:class:`~gpuprobe.tools.scale.sweep.ScaleResult` (``gpuprobe scale lstsq``'s sweep) as text for the
terminal and ``str()``, a one-line ``repr`` and HTML tables for Jupyter.

The data classes stay in :mod:`gpuprobe.tools.scale`; their ``summary()``, ``__str__``,
``__repr__``, ``_repr_html_``, ``table()``, ``header()`` and ``text()`` are two-line delegates to
the functions here. The sweep's charts are in :mod:`gpuprobe.tools.scale.show.plots`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from gpuprobe.core import render
from gpuprobe.core.render import one_line
from gpuprobe.core.units import NA
from gpuprobe.core.wrap import TEXT_WIDTH, hang_lines, key_value_lines
from gpuprobe.tools.scale.lstsq import LstsqReport, LstsqResult
from gpuprobe.tools.scale.model import ScaleResult

__all__ = [
    "SCALE_TABLE_DROP_ORDER",
    "html_table",
    "lstsq_html",
    "lstsq_repr",
    "lstsq_summary",
    "lstsq_text",
    "result_repr",
    "scale_header",
    "scale_html",
    "scale_repr",
    "scale_table",
    "scale_text",
]

# Columns of the sweep's table left out, first to last, when it is wider than the terminal: the
# comparisons with numpy and the CPU share matter least next to time, speedup and the error.
SCALE_TABLE_DROP_ORDER = ("speed vs numpy", "cpu/worker", "comm", "residual", "efficiency")


def _fmt(v: float | None, spec: str = ".4g") -> str:
    return NA if v is None else format(v, spec)


def html_table(title: str, rows: Sequence[tuple[str, str]]) -> str:
    """A two-column HTML table of (label, value) rows under a caption, escaped."""
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"


# -- one solve: LstsqReport ---------------------------------------------------------------------


def lstsq_summary(report: LstsqReport) -> list[tuple[str, str]]:
    """(label, value) rows for people."""
    e = report.engine
    rows = [
        (
            "method",
            report.method
            + ("" if report.method == report.requested else f" (asked: {report.requested})")
            + ("" if report.exact else " — an approximation"),
        ),
        (
            "problem",
            f"{report.rows} × {report.cols} float64 from {report.source}, "
            f"{report.row_blocks} × {report.col_blocks} blocks",
        ),
        ("residual ‖b−Ax‖", _fmt(report.residual_norm, ".10g")),
        (
            "κ(A) estimate",
            f"{_fmt(report.cond_estimate)}"
            + (f" ({report.cond_source})" if report.cond_source else ""),
        ),
        ("rank", NA if report.rank is None else str(report.rank)),
        (
            "time",
            f"{report.wall_s:.3f} s, the whole call: set-up {report.setup_s:.3f} s, solve "
            f"{report.solve_s:.3f} s"
            if e.cluster == "in-process"
            else f"{report.wall_s:.3f} s, the whole call: set-up {report.setup_s:.3f} s, compute "
            f"{report.compute_s:.3f} s, communication {report.communication_s:.3f} s "
            f"({report.communication_share:.0%}; transfers {report.transfer_s:.3f} s)",
        ),
        (
            "passes over A",
            f"{report.passes} ({report.refinement_steps} refinement step(s)"
            + (
                f", {report.extended_passes} in extended precision"
                if report.extended_passes
                else ""
            )
            + ")",
        ),
        ("engine", f"{e.cluster}: {report.engine_reason}" if report.engine_reason else e.cluster),
    ]
    if e.cluster == "in-process" and e.kind == "gpu":
        rows.append(
            (
                "device",
                f"GPU {', '.join(str(d) for d in e.devices) or NA} ({e.blas_library or NA}); "
                f"host CPU used {_fmt(report.cpu_per_worker, '.2f')} core(s)",
            )
        )
    elif e.cluster == "in-process":
        rows.append(
            (
                "threads",
                f"{e.blas_threads or NA} BLAS thread(s) ({e.blas_library or f'BLAS {NA}'}); "
                f"CPU used {_fmt(report.cpu_per_worker, '.2f')} core(s)",
            )
        )
    else:
        rows.append(
            (
                "workers",
                f"{report.workers_used} used of {e.workers} {e.kind} worker(s) on "
                f"{e.cluster} {e.scheduler}; {e.threads_per_worker} task thread(s) and "
                f"{e.blas_threads or NA} BLAS thread(s) each; CPU used "
                f"{_fmt(report.cpu_per_worker, '.2f')} core(s) per worker",
            )
        )
    if report.reference:
        rows.append(
            (
                f"vs {report.reference}",
                f"relative error {_fmt(report.error_vs_reference, '.3g')}, residual "
                f"{_fmt(report.reference_residual_norm, '.10g')}, "
                f"{_fmt(report.reference_s, '.3f')} s",
            )
        )
    if report.distance_from_exact is not None:
        rows.append(
            (
                "vs exact",
                f"off by {report.distance_from_exact:.3g} (relative); exact "
                f"residual {_fmt(report.exact_residual_norm, '.10g')}",
            )
        )
    for f in report.findings:
        rows.append((f"[{f.status.value}] {f.id}", f.title))
    return rows


def lstsq_repr(report: LstsqReport) -> str:
    """``<LstsqReport normal, 400×8 in process: residual …>``: one line, as every result's."""
    return one_line("LstsqReport", _lstsq_line(report))


def _lstsq_line(report: LstsqReport) -> str:
    """The method, the size, where it ran, the residual, κ and the times."""
    err = (
        ""
        if report.error_vs_reference is None
        else f", error {report.error_vs_reference:.2g} vs {report.reference}"
    )
    off = (
        ""
        if report.distance_from_exact is None
        else f", off the exact solution by {report.distance_from_exact:.2g}"
    )
    return (
        f"{report.method}, {report.rows}×{report.cols} "
        + (
            "in process"
            if report.engine.cluster == "in-process"
            else f"on {report.workers_used} worker(s)"
        )
        + f": residual {report.residual_norm:.6g}, κ≈{_fmt(report.cond_estimate, '.3g')}, "
        f"{report.wall_s:.3f} s (compute {report.compute_s:.3f} s, communication "
        f"{report.communication_s:.3f} s){err}{off}"
    )


def lstsq_text(report: LstsqReport, width: int | None = TEXT_WIDTH) -> str:
    """The summary rows as aligned text (``str(report)``), each value wrapped under its column
    at ``width`` columns."""
    return "\n".join(key_value_lines(lstsq_summary(report), width))


def lstsq_html(report: LstsqReport) -> str:
    """The summary rows as an HTML table (Jupyter)."""
    return html_table("gpuprobe.lstsq", lstsq_summary(report))


# -- the sweep: ScaleResult ----------------------------------------------------------------------


def scale_table(result: ScaleResult) -> list[list[str]]:
    """Header and rows for people."""
    out = [
        [
            "method",
            "workers",
            "time s",
            "speedup",
            "efficiency",
            "comm",
            "cpu/worker",
            "residual",
            "error vs numpy",
            "speed vs numpy",
        ]
    ]
    for r in result.results:
        name = r.requested if r.method == r.requested else f"{r.requested}→{r.method}"
        out.append(
            [
                name + ("" if r.exact else " (approx.)"),
                str(r.workers),
                f"{r.wall_s:.3f}",
                f"{r.speedup:.2f}",
                NA if r.efficiency is None else f"{r.efficiency:.0%}",
                f"{r.communication_share:.0%}",
                NA if r.cpu_per_worker is None else f"{r.cpu_per_worker:.2f}",
                f"{r.residual_norm:.8g}",
                NA if r.error_vs_numpy is None else f"{r.error_vs_numpy:.2e}",
                NA if r.times_faster_than_numpy is None else f"{r.times_faster_than_numpy:.2f}×",
            ]
        )
    return out


def scale_header(result: ScaleResult) -> list[str]:
    """The lines above the table."""
    lines = [
        f"least squares {result.rows} × {result.cols} float64 ({result.problem}), "
        f"{result.row_blocks} row block{'s' if result.row_blocks != 1 else ''} of "
        f"{result.chunk_rows} rows",
        f"cluster: {result.cluster}; per worker {result.threads_per_worker} task thread, "
        f"{result.blas_threads_per_worker or NA} BLAS thread(s) "
        f"({result.blas_library or f'BLAS {NA}'}); {result.cores} cores; best of {result.repeats}",
    ]
    for b in result.baselines:
        if b.wall_s is None:
            lines.append(f"{b.name}: not run ({b.note})")
        else:
            tried = ", ".join(f"{k} thread(s) {v:.3f} s" for k, v in b.seconds_by_threads.items())
            where = (
                f"best with {b.threads} BLAS thread(s); {tried}"
                if b.workers is None
                else f"{b.workers} worker(s), same chunks"
            )
            err = "" if b.error_vs_numpy is None else f", error vs numpy {b.error_vs_numpy:.2e}"
            lines.append(
                f"{b.name}: {b.wall_s:.3f} s ({where}), residual {b.residual_norm:.8g}{err}"
            )
    return lines


def scale_text(result: ScaleResult, width: int | None = None) -> str:
    """The header, the table and the findings; with ``width``, the table leaves out its least
    useful columns until it fits (and says which), never cutting a number."""
    from gpuprobe.ui.columns import columns_that_fit, left_out_note

    tab = scale_table(result)
    keep = list(range(len(tab[0])))
    if width is not None:
        keep = columns_that_fit(tab[0], tab[1:], width, drop_order=SCALE_TABLE_DROP_ORDER, sep=2)
    tab = [[row[i] for i in keep] for row in tab]
    widths = [max(len(row[i]) for row in tab) for i in range(len(tab[0]))]
    body = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in tab]
    note = left_out_note(scale_table(result)[0], keep)
    notes = [f"[{f.status.value}] {f.title}" for f in result.findings]

    def wrap(lines: list[str]) -> list[str]:  # prose wraps at the width; the table does not
        return hang_lines(lines, width)

    return "\n".join(
        [*wrap(scale_header(result)), "", *body, *wrap([note] if note else []), "", *wrap(notes)]
    ).rstrip()


def scale_repr(result: ScaleResult) -> str:
    """One line: the size and each method's time on its largest worker count."""
    best = {r.requested: r for r in result.results}
    parts = ", ".join(f"{m} {r.wall_s:.3g} s on {r.workers}" for m, r in best.items())
    return one_line(
        "ScaleResult", f"{result.rows}×{result.cols}, {len(result.results)} runs: {parts}"
    )


def scale_html(result: ScaleResult) -> str:
    """The header and the table as HTML (Jupyter)."""
    tab = scale_table(result)
    head = "".join(f"<th>{h}</th>" for h in tab[0])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in tab[1:])
    info = html_table(
        "gpuprobe scale lstsq", [(f"#{i}", line) for i, line in enumerate(scale_header(result), 1)]
    )
    return f"{info}<table><tr>{head}</tr>{body}</table>"


def result_repr(result: LstsqResult) -> str:
    """``<LstsqResult x: 8 values; normal, 400×8 …>``: the solution's size and its report's
    line, not the solution's numbers."""
    return one_line("LstsqResult", f"x: {result.x.size} values; {_lstsq_line(result.report)}")


render.summary.register(LstsqReport, lstsq_summary)


def result_text(result: LstsqResult) -> str:
    """``print(x_and_report)``: the solution's size, then the report."""
    return f"x: {result.x.size} values ({result.x.dtype})\n{lstsq_text(result.report)}"


render.repr_.register(LstsqResult, result_repr)
render.text.register(LstsqResult, result_text)
render.repr_.register(LstsqReport, lstsq_repr)
render.text.register(LstsqReport, lstsq_text)
render.html.register(LstsqReport, lstsq_html)
render.table.register(ScaleResult, scale_table)
render.header.register(ScaleResult, scale_header)
render.text.register(ScaleResult, scale_text)
render.repr_.register(ScaleResult, scale_repr)
render.html.register(ScaleResult, scale_html)
