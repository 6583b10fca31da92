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
from collections.abc import Sequence
from pathlib import Path

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status
from gpuprobe.core.units import size
from gpuprobe.tools.monitor.record import Recording
from gpuprobe.tools.monitor.summary import RunSummary, command_text
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


def _n(x: object, unit: str = "") -> str:
    return "n/a" if x is None else f"{x}{unit}"


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
    exit_text = "n/a (no end line)" if summary.exit_code is None else str(summary.exit_code)
    gpu_rows = "".join(
        f"<tr><td>GPU {g.index}</td><td>{_e(g.name or 'n/a')}</td>"
        f"<td>{'yes' if g.used_by_command else 'no'}</td><td>{_n(g.util_mean, ' %')}</td>"
        f"<td>{_n(g.util_p90, ' %')}</td><td>{size(g.memory_peak)} / {size(g.memory_total)}</td>"
        f"<td>{_n(g.power_max_w, ' W')}</td><td>{_n(g.temperature_max_c, ' °C')}</td>"
        f"<td>{_n(g.sm_clock_median_mhz, ' MHz')}</td>"
        f"<td>{_e(', '.join(sorted(g.reasons)) or '-')}</td></tr>"
        for g in summary.gpus
    )
    gpu_table = (
        "<table><tr><th></th><th>name</th><th>used by command</th><th>util mean</th>"
        "<th>util p90</th><th>memory peak / total</th><th>power max</th><th>temp max</th>"
        f"<th>SM clock median</th><th>clock events</th></tr>{gpu_rows}</table>"
        if summary.gpus
        else f"<p>No GPU: {_e(h.driver.error or h.driver.status)}. The host alone was recorded.</p>"
    )
    hs = summary.host
    host_table = (
        "<table>"
        f"<tr><td>cores</td><td>{hs.cores} ({_e(h.host.cpu_model or 'n/a')})</td></tr>"
        f"<tr><td>host CPU mean</td><td>{_n(hs.cpu_mean_percent, ' %')}</td></tr>"
        f"<tr><td>command CPU mean / peak</td><td>{_n(hs.command_cores_mean)} / "
        f"{_n(hs.command_cores_peak)} cores</td></tr>"
        f"<tr><td>busiest thread of main process</td><td>{_n(hs.main_thread_mean_percent, ' %')}"
        f" mean, pegged in {_n(None if hs.main_thread_pegged_fraction is None else round(100 * hs.main_thread_pegged_fraction, 1), ' %')}"
        " of samples</td></tr>"
        f"<tr><td>worker processes (max)</td><td>{hs.workers_max}</td></tr>"
        f"<tr><td>command RSS after warm-up / peak / end</td><td>{size(hs.rss_start)} / "
        f"{size(hs.rss_peak)} / {size(hs.rss_end)}</td></tr>"
        f"<tr><td>host memory available (min)</td><td>{size(hs.memory_available_min)} of "
        f"{size(hs.memory_total)}</td></tr></table>"
    )
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
        f"{_e(h.host.hostname or 'n/a')} · {summary.duration_s:.1f} s · exit code "
        f"{_e(exit_text)} · {summary.samples} samples at {h.hz:g} Hz · sampler "
        f"{_n(summary.sampler_cost_percent, ' % of one core')} · timeline "
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
        timeline_figure,
    )

    missing = charts_unavailable()
    written: list[Path] = []
    cmd = command_text(tl.header.command, limit=100)
    if png_path is not None and missing is None:
        p = Path(png_path)
        fig = timeline_figure(tl, title=f"gpuprobe run: {cmd}")
        fig.savefig(p, dpi=100)
        written.append(p)
    if html_path is not None:
        images = []
        if missing is None:
            if tl.gpu_indices:
                images.append(("GPU", figure_png(timeline_figure(tl, GPU_PANELS))))
            images.append(("CPU and memory", figure_png(timeline_figure(tl, CPU_PANELS))))
        p = Path(html_path)
        page = render_run_html(tl, summary, images, charts_missing=missing is not None)
        p.write_text(page, encoding="utf-8")
        written.append(p)
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
