"""A self-contained HTML report of a recording: findings on top, then the charts.

Nothing is fetched from a network: the charts are PNGs inside ``data:`` URIs, the style is inline,
and the one inline script only marks how many images decoded (``<body data-images-ok="N">``),
which the tests read back from a headless browser. Without matplotlib (the extra ``gpuprobe[plot]``)
the page is written all the same, a line in place of its charts naming the extra.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuprobe.core import render
from gpuprobe.core.files import write_atomic
from gpuprobe.core.findings import Finding, Status
from gpuprobe.core.units import joules, size
from gpuprobe.tools.monitor.record import Recording
from gpuprobe.tools.monitor.summary import GpuStats, RunSummary, command_text
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME, Timeline
from gpuprobe.ui.plot_extra import PLOT_INSTALL, ChartsUnavailable, charts_unavailable
from gpuprobe.ui.reprs import code_html, fix_html

__all__ = ["render_run_html", "write_run_report"]

_STATUS_COLOR = {
    Status.FAIL: "#c62828",
    Status.WARN: "#ef6c00",
    Status.INFO: "#1565c0",
    Status.OK: "#2e7d32",
    Status.SKIPPED: "#757575",
}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121;
max-width:1250px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:13px} code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
table{border-collapse:collapse;font-size:13px;margin:6px 0} td,th{padding:4px 10px;
border-bottom:1px solid #eee;text-align:left;vertical-align:top} th{background:#fafafa}
.st{font-weight:700;text-transform:uppercase;font-size:11px;padding:2px 6px;border-radius:3px;
color:#fff} .ev{color:#555;font-size:12px} .fix{font-size:12px;margin-top:3px}
img{max-width:100%;border:1px solid #eee}
"""


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _finding_rows(findings: Sequence[Finding]) -> str:
    rows = []
    for f in findings:
        ev = ", ".join(str(e) for e in f.evidence)
        fix = f'<div class="fix">Fix: {fix_html(f.fix)}</div>' if f.fix else ""
        details = "".join(f'<div class="ev">{code_html(d)}</div>' for d in f.details)
        rows.append(
            f'<tr><td><span class="st" style="background:{_STATUS_COLOR[f.status]}">'
            f"{_e(f.status.value)}</span></td><td><b>{code_html(f.title)}</b>"
            f'<div class="ev">{_e(f.id)} · {_e(ev)}</div>{details}{fix}</td></tr>'
        )
    return "<table>" + "".join(rows) + "</table>"


def _n(x: object) -> str:
    """A table cell: n/a where this GPU lacks a figure another GPU has."""
    return "n/a" if x is None else str(x)


def _gpu_table(summary: RunSummary) -> str:
    """One row per GPU; a column no GPU has a value for (a field the card does not report, an
    older timeline) is left out, so a one-GPU page shows no "n/a"."""
    columns: list[tuple[str, Callable[[GpuStats], object]]] = [
        ("name", lambda g: g.name),
        ("used by command", lambda g: "yes" if g.used_by_command else "no"),
        ("util mean", lambda g: _unit(g.util_mean, " %")),
        ("util p90", lambda g: _unit(g.util_p90, " %")),
        (
            "memory peak / total",
            lambda g: (
                None if g.memory_peak is None else f"{size(g.memory_peak)} / {size(g.memory_total)}"
            ),
        ),
        ("power max", lambda g: _unit(g.power_max_w, " W")),
        (
            "energy",
            lambda g: (
                None
                if g.energy_j is None
                else joules(g.energy_j) + ("" if g.energy_method == "counter" else " (estimate)")
            ),
        ),
        ("temp max", lambda g: _unit(g.temperature_max_c, " °C")),
        ("SM clock median", lambda g: _unit(g.sm_clock_median_mhz, " MHz")),
        ("clock events", lambda g: ", ".join(sorted(g.reasons)) or "none"),
    ]
    shown = [(t, f) for t, f in columns if any(f(g) is not None for g in summary.gpus)]
    head = "".join(f"<th>{_e(t)}</th>" for t, _ in shown)
    rows = "".join(
        f"<tr><td>GPU {g.index}</td>"
        + "".join(f"<td>{_e(_n(f(g)))}</td>" for _, f in shown)
        + "</tr>"
        for g in summary.gpus
    )
    return f"<table><tr><th></th>{head}</tr>{rows}</table>"


def _unit(x: object, unit: str) -> str | None:
    return None if x is None else f"{x}{unit}"


def _host_table(tl: Timeline, summary: RunSummary) -> str:
    """The host and the command, one row per figure known; a timeline without host samples says
    so in one line."""
    hs = summary.host
    pegged = hs.main_thread_pegged_fraction
    model = tl.header.host.cpu_model
    rows = [
        ("cores", f"{hs.cores}" + (f" ({model})" if model else "") if hs.cores else None),
        ("host CPU mean", _unit(hs.cpu_mean_percent, " %")),
        (
            "command CPU mean / peak",
            None
            if hs.command_cores_mean is None
            else f"{hs.command_cores_mean} / {hs.command_cores_peak} cores",
        ),
        (
            "busiest thread of main process",
            None
            if hs.main_thread_mean_percent is None
            else f"{hs.main_thread_mean_percent} % mean"
            + ("" if pegged is None else f", pegged in {round(100 * pegged, 1)} % of samples"),
        ),
        (
            "worker processes (max)",
            str(hs.workers_max) if hs.command_cores_mean is not None else None,
        ),
        (
            "command RSS after warm-up / peak / end",
            None
            if hs.rss_peak is None
            else f"{size(hs.rss_start)} / {size(hs.rss_peak)} / {size(hs.rss_end)}",
        ),
        (
            "host memory available (min)",
            None
            if hs.memory_available_min is None
            else f"{size(hs.memory_available_min)} of {size(hs.memory_total)}",
        ),
    ]
    known = [(label, value) for label, value in rows if value is not None]
    if len(known) <= 1:  # the core count alone comes from the header, not from samples
        return "<p>No host samples in this recording: only the GPUs were recorded.</p>"
    body = "".join(f"<tr><td>{_e(label)}</td><td>{_e(value)}</td></tr>" for label, value in known)
    return f"<table>{body}</table>"


def render_run_html(
    tl: Timeline,
    summary: RunSummary,
    images: Sequence[tuple[str, bytes]],
    *,
    charts_missing: bool = False,
) -> str:
    """The report page: ``images`` are (section title, PNG bytes); ``charts_missing`` puts a line
    naming the extra ``gpuprobe[plot]`` where the charts would be."""
    h = tl.header
    started = _dt.datetime.fromtimestamp(h.started).isoformat(timespec="seconds")
    cmd = command_text(h.command, limit=400)
    exit_text = (
        "no exit code (the recording has no end line)"
        if summary.exit_code is None
        else f"exit code {summary.exit_code}"
    )
    cost = summary.sampler_cost_percent
    sampler = "" if cost is None else f"sampler {cost} % of one core · "
    gpu_table = (
        _gpu_table(summary)
        if summary.gpus
        else f"<p>No GPU: {_e(h.driver.error or h.driver.status)}. The host alone was recorded.</p>"
    )
    host_table = _host_table(tl, summary)
    imgs = "".join(
        f'<h2>{_e(title)}</h2><img alt="{_e(title)}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        for title, png in images
    )
    if charts_missing:
        imgs += (
            '<h2>Charts</h2><p class="meta">Not drawn: charts need matplotlib, the extra '
            f"<code>gpuprobe[plot]</code>: <code>{_e(PLOT_INSTALL)}</code></p>"
        )
    dropped = f'<p class="meta">{_e(tl.dropped_note())}</p>' if tl.dropped_note() else ""
    script = (
        "<script>window.addEventListener('load',function(){var n=0;"
        "document.querySelectorAll('img').forEach(function(i){if(i.complete&&i.naturalWidth>0)"
        "n++;});document.body.setAttribute('data-images-ok',String(n));});</script>"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>gpuprobe run: {_e(cmd[:80])}</title><style>{_CSS}</style></head>"
        f'<body data-images="{len(images)}"><h1>gpuprobe run report</h1>'
        f'<div class="meta"><code>{_e(cmd)}</code><br>started {_e(started)} on '
        f"{_e(h.host.hostname or 'an unnamed host')} · {summary.duration_s:.1f} s · "
        f"{_e(exit_text)} · {summary.samples} samples at {h.hz:g} Hz · {sampler}timeline "
        f"<code>{_e(tl.path.name if tl.path else TIMELINE_NAME)}</code></div>{dropped}"
        f"<h2>Findings</h2>{_finding_rows(summary.findings)}"
        f"<h2>GPUs</h2>{gpu_table}<h2>Host and command</h2>{host_table}{imgs}"
        f"{script}</body></html>"
    )


def write_run_report(
    tl: Timeline,
    summary: RunSummary,
    *,
    html_path: str | Path | None = None,
    png_path: str | Path | None = None,
) -> list[Path]:
    """Draw the charts once per section and write the HTML page and/or the one-figure PNG;
    return the paths written.

    Without matplotlib the PNG is skipped and the page is written without its charts, then
    :class:`~gpuprobe.ui.plot_extra.ChartsUnavailable` is raised, carrying the paths written.
    """
    from gpuprobe.tools.monitor.show.plots import (
        CPU_PANELS,
        GPU_PANELS,
        figure_png,
        panels_with_data,
        timeline_figure,
    )

    missing = charts_unavailable()
    written: list[Path] = []
    cmd = command_text(tl.header.command, limit=100)
    if png_path is not None and missing is None:
        from gpuprobe.ui.chart import save_figure

        fig = timeline_figure(tl, title=f"gpuprobe run: {cmd}")
        written.append(save_figure(fig, png_path, private=True))  # titled with the command
    if html_path is not None:
        images = []
        if missing is None:  # a section with no panel to draw is left out
            for section, panels in (("GPU", GPU_PANELS), ("CPU and memory", CPU_PANELS)):
                if shown := panels_with_data(tl, panels):
                    images.append((section, figure_png(timeline_figure(tl, shown))))
        page = render_run_html(tl, summary, images, charts_missing=missing is not None)
        written.append(write_atomic(html_path, page, private=True))  # it shows the command
    if missing is not None:
        raise ChartsUnavailable(missing.message, written)
    return written


def recording_report(rec: Recording, path: Path) -> Path:
    """``rec.report(path)``: the HTML report written to ``path``; returns it. Without matplotlib
    the page is written without its charts and a warning names the extra."""
    try:
        return write_run_report(rec.timeline, rec.summary, html_path=path)[0]
    except ChartsUnavailable as exc:
        # stacklevel 5: the line that called rec.report() (through render.report's dispatch)
        warnings.warn(f"{path}: written without its charts: {exc.message}", stacklevel=5)
        return exc.written[0]


render.report.register(Recording, recording_report)
