"""``--html``: one self-contained page with the findings beside one step's timeline.

The timeline is inline SVG (nothing is fetched from a network): the step's top-level CPU ops and
DataLoader spans, the CUDA runtime calls (syncs in red), the GPU activities per device and stream
(kernels, memcpy, memset) and the GPU's idle gaps. Hover a box for its name and duration. Times in
µs from the step's start.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable

import numpy as np

from gpuprobe.core import render
from gpuprobe.core.errors import InputError
from gpuprobe.core.findings import worst_first
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernels import KernelBreakdown
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL, GPU_KIND_MEMCPY, GPU_KIND_MEMSET
from gpuprobe.tools.diagnose.model import Diagnosis, TraceComparison
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
from gpuprobe.ui.style import STATUS_COLORS

__all__ = [
    "MAX_BOXES_PER_ROW",
    "choose_step",
    "comparison_html",
    "comparison_page",
    "diagnosis_html",
    "ranks_html",
    "render_html",
    "write_comparison_html",
    "write_html",
]

MAX_BOXES_PER_ROW = 3000  # longest boxes kept per timeline row, to keep the page light
_WIDTH = 800  # px of the time axis (the SVG scales to the page: viewBox)
_LABEL = 150  # px of the row labels
_ROW = 22  # px per row
_COLORS = {
    "op": "#7f8c8d",
    "loader": "#e67e22",
    "launch": "#95a5a6",
    "sync": "#c0392b",
    "kernel": "#2e86c1",
    "memcpy": "#d68910",
    "pageable": "#a04000",
    "memset": "#8e44ad",
}
# the GPU's idle time, by cause (IDLE_CAUSES)
_IDLE_COLORS = {
    "startup": "#5d6d7e",
    "input": "#e67e22",
    "sync": "#c0392b",
    "untraced": "#ec7063",
    "host": "#7d3c98",
    "launch": "#f1c40f",
    "short": "#48c9b0",
    "other": "#bdc3c7",
}


def choose_step(ctx: TraceContext, step: int | None = None) -> int:
    """Index of the step to draw: the one numbered ``step``, else the median-length step."""
    if step is not None:
        for i, s in enumerate(ctx.steps):
            if s.number == step:
                return i
        have = ", ".join(str(s.number) for s in ctx.steps[:12])
        raise InputError(f"--html-step {step}: not among the analysed steps ({have})")
    order = np.argsort(ctx.step_durations, kind="stable")
    return int(order[len(order) // 2]) if len(order) else 0


def _boxes(
    ts: np.ndarray,
    dur: np.ndarray,
    labels: Iterable[str],
    t0: float,
    scale: float,
    y: int,
    color: str | np.ndarray,
) -> list[str]:
    labels = list(labels)
    if ts.size > MAX_BOXES_PER_ROW:
        keep = np.sort(np.argsort(-dur, kind="stable")[:MAX_BOXES_PER_ROW])
        ts, dur = ts[keep], dur[keep]
        labels = [labels[i] for i in keep]
        if not isinstance(color, str):
            color = color[keep]
    out = []
    for i in range(ts.size):
        x = _LABEL + (ts[i] - t0) * scale
        w = max(dur[i] * scale, 0.6)
        c = color if isinstance(color, str) else color[i]
        out.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{_ROW - 6}" fill="{c}">'
            f"<title>{html.escape(labels[i])}: {dur[i]:.1f} µs at +{ts[i] - t0:.1f} µs</title>"
            "</rect>"
        )
    return out


def _timeline(ctx: TraceContext, i: int) -> tuple[str, set[str]]:
    """The step's SVG (scaling to the page's width) and the legend keys it uses."""
    used: set[str] = set()
    st = ctx.steps[i]
    gsel = ctx.gpu_step == i
    t0 = st.start
    t1 = max(st.end, float(ctx.gpu_end[gsel].max()) if gsel.any() else st.end)
    span = max(t1 - t0, 1e-3)
    scale = _WIDTH / span
    rows: list[tuple[str, list[str]]] = []
    names = ctx.names

    # Host: top-level ops of the busiest thread, and DataLoader spans.
    top = ctx.op_top & (ctx.op_ts >= t0) & (ctx.op_ts <= t1)
    if top.any():
        tids, counts = np.unique(ctx.op_tid[top], return_counts=True)
        tid = tids[np.argmax(counts)]
        m = top & (ctx.op_tid == tid)
        used.add("op")
        rows.append((f"CPU ops (thread {ctx.raw.threads[tid]})", []))
        rows[-1][1].extend(
            _boxes(
                ctx.op_ts[m],
                ctx.op_dur[m],
                (names[n] for n in ctx.op_name[m]),
                t0,
                scale,
                0,
                _COLORS["op"],
            )
        )
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, names) & (ctx.ann_ts >= t0) & (ctx.ann_ts <= t1)
    if dl.any():
        used.add("loader")
        rows.append(
            (
                "DataLoader",
                _boxes(
                    ctx.ann_ts[dl],
                    ctx.ann_dur[dl],
                    (names[n] for n in ctx.ann_name[dl]),
                    t0,
                    scale,
                    0,
                    _COLORS["loader"],
                ),
            )
        )
    rt = (ctx.rt_ts >= t0) & (ctx.rt_ts <= t1)
    if rt.any():
        colors = np.where(ctx.sync_mask[rt], _COLORS["sync"], _COLORS["launch"])
        used.add("launch")
        if ctx.sync_mask[rt].any():
            used.add("sync")
        rows.append(
            (
                "CUDA runtime",
                _boxes(
                    ctx.rt_ts[rt],
                    ctx.rt_dur[rt],
                    (names[n] for n in ctx.rt_name[rt]),
                    t0,
                    scale,
                    0,
                    colors,
                ),
            )
        )
    # GPU: one row per (device, stream), then the idle gaps of each device.
    win = (ctx.gpu_end >= t0) & (ctx.gpu_ts <= t1)
    pageable = P.PAGEABLE_COPY.mask(ctx.gpu_name, names)
    for d in ctx.devices:
        dm = win & (ctx.gpu_dev == d)
        for s in sorted(int(x) for x in np.unique(ctx.gpu_stream[dm])):
            m = dm & (ctx.gpu_stream == s)
            kind = ctx.gpu_kind[m]
            used.update(
                k
                for k, present in (
                    ("kernel", (kind == GPU_KIND_KERNEL).any()),
                    ("memcpy", ((kind == GPU_KIND_MEMCPY) & ~pageable[m]).any()),
                    ("pageable", ((kind == GPU_KIND_MEMCPY) & pageable[m]).any()),
                    ("memset", (kind == GPU_KIND_MEMSET).any()),
                )
                if present
            )
            colors = np.where(
                kind == GPU_KIND_KERNEL,
                _COLORS["kernel"],
                np.where(
                    kind == GPU_KIND_MEMCPY,
                    np.where(pageable[m], _COLORS["pageable"], _COLORS["memcpy"]),
                    _COLORS["memset"],
                ),
            )
            rows.append(
                (
                    f"GPU {d} stream {s}",
                    _boxes(
                        ctx.gpu_ts[m],
                        ctx.gpu_dur[m],
                        (names[n] for n in ctx.gpu_name[m]),
                        t0,
                        scale,
                        0,
                        colors,
                    ),
                )
            )
        boxes: list[str] = []
        for cause, (cs, ce) in ctx.idle_by_cause.get(d, {}).items():
            lo, hi = np.clip(cs, t0, t1), np.clip(ce, t0, t1)
            keep = hi > lo
            if not keep.any():
                continue
            used.add("idle: " + cause)
            boxes += _boxes(
                lo[keep],
                (hi - lo)[keep],
                (f"idle ({cause})" for _ in range(int(keep.sum()))),
                t0,
                scale,
                0,
                _IDLE_COLORS[cause],
            )
        rows.append((f"GPU {d} idle, by cause", boxes))
    height = _ROW * len(rows) + 30
    full = _LABEL + _WIDTH + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {full} {height}" width="100%" '
        f'style="max-width:{full}px" font-family="sans-serif" font-size="12">'
    ]
    for r, (label, boxes) in enumerate(rows):
        y = r * _ROW
        parts.append(
            f'<rect x="0" y="{y}" width="{_LABEL + _WIDTH}" height="{_ROW}" '
            f'fill="{"#f4f6f7" if r % 2 else "#ffffff"}"/>'
        )
        parts.append(f'<text x="4" y="{y + 15}">{html.escape(label)}</text>')
        parts.append(f'<g transform="translate(0,{y})">' + "".join(boxes) + "</g>")
    axis_y = _ROW * len(rows) + 14
    for k in range(6):
        x = _LABEL + k * _WIDTH / 5
        anchor = "start" if k == 0 else "end" if k == 5 else "middle"
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{axis_y - 10}" '
            'stroke="#ccc" stroke-width="0.5"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{axis_y}" text-anchor="{anchor}">{k * span / 5:,.0f} µs</text>'
        )
    parts.append("</svg>")
    return "".join(parts), used


def render_html(d: Diagnosis, ctx: TraceContext, step: int | None = None) -> str:
    """The whole page as a string."""
    i = choose_step(ctx, step)
    st = ctx.steps[i]
    label = "whole trace" if st.number is None else f"ProfilerStep#{st.number}"
    findings = []
    for f in worst_first(d.findings):
        color = STATUS_COLORS[f.status]
        ev = "".join(f"<li>{html.escape(str(e))}</li>" for e in f.evidence)
        det = "".join(f"<li>{html.escape(x)}</li>" for x in f.details[:5])
        fix = f"<p><b>fix:</b> <code>{html.escape(f.fix)}</code></p>" if f.fix else ""
        if f.gain_text:
            fix += f"<p><b>gain:</b> {html.escape(f.gain_text)}</p>"
        findings.append(
            f'<div class="f" style="border-left:5px solid {color}">'
            f'<b style="color:{color}">{f.status.value.upper()}</b> <b>{html.escape(f.id)}</b> '
            f"{html.escape(f.subject)}<br>{html.escape(f.title)}"
            f"<details><summary>evidence</summary><ul>{ev}</ul><ul>{det}</ul></details>{fix}</div>"
        )
    svg, used = _timeline(ctx, i)
    colors = {**_COLORS, **{"idle: " + k: c for k, c in _IDLE_COLORS.items()}}
    legend = " ".join(
        f'<span style="background:{c};color:#fff;padding:1px 5px;white-space:nowrap">{k}</span>'
        for k, c in colors.items()
        if k in used
    )
    s = d.summary
    busy = "n/a" if s.gpu_busy_fraction is None else f"{100 * s.gpu_busy_fraction:.1f} %"
    rows = [r for r in d.steps if r.step == st.number and r.gpu_busy_fraction is not None]
    note = ""
    if rows and s.gpu_busy_fraction is not None:
        step_busy = 100 * rows[0].gpu_busy_fraction  # type: ignore[operator]
        note = (
            f"<p class=note>This step: GPU busy {step_busy:.1f} % of the step, idle "
            f"{100 - step_busy:.1f} %. Whole trace: busy {busy} of the span from the first to "
            "the last GPU activity (HTA's temporal breakdown), which leaves out the host time "
            "before the first kernel and after the last; that is why the two can differ.</p>"
        )
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>gpuprobe diagnose: {html.escape(s.path)}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; color: #222; }}
.f {{ padding: 4px 8px; margin: 6px 0; background: #fafafa; }}
code {{ background: #eef; padding: 1px 3px; }}
.wrap {{ display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }}
.side {{ flex: 1 1 24em; max-width: 40em; min-width: 0; }}
.main {{ flex: 3 1 40em; min-width: 0; }}
.note {{ color: #555; font-size: 90%; }}
</style></head><body>
<h2>gpuprobe diagnose</h2>
<p>{html.escape(s.path)}: {s.events:,} events, {len(s.steps)} steps, whole-trace GPU busy {busy}</p>
{_headline_html(d)}
<div class="wrap"><div class="side"><h3>Findings</h3>{"".join(findings)}</div>
<div class="main"><h3>Timeline of {html.escape(label)} ({st.end - st.start:,.0f} µs)</h3>
{note}<p>{legend}</p>{svg}</div></div>
</body></html>
"""


def write_html(path: str, d: Diagnosis, ctx: TraceContext, step: int | None = None) -> str:
    """Write the page to ``path``; returns the path."""
    text = render_html(d, ctx, step)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"--html {path}: cannot write ({exc.strerror or exc})") from None
    return path


def _headline_html(d: Diagnosis) -> str:
    """The biggest gain as a paragraph ("" without one)."""
    h = d.headline
    if h is None:
        return ""
    if h.id == "one-time-start":
        return f"<p><b>Cold start:</b> {html.escape(h.title)}</p>"
    return (
        f"<p><b>Biggest gain:</b> <code>{html.escape(h.id)}</code>, ≈ "
        f"{100 * (h.gain or 0.0):.0f} % of the analysed time: {html.escape(h.title)}</p>"
    )


def diagnosis_html(d: Diagnosis) -> str:
    """A diagnosis for a notebook (``Diagnosis._repr_html_``): the findings as a table."""
    rows = []
    for f in worst_first(d.findings):
        ev = "; ".join(html.escape(str(e)) for e in f.evidence)
        rows.append(
            f"<tr><td><b>{html.escape(f.status.value)}</b></td><td><b>{html.escape(f.id)}</b> "
            f"{html.escape(f.title)}"
            f"<br><small>{ev}</small></td><td><code>{html.escape(f.fix)}</code></td></tr>"
        )
    s = d.summary
    busy = "n/a" if s.gpu_busy_fraction is None else f"{100 * s.gpu_busy_fraction:.1f} %"
    return (
        f"<div><b>gpuprobe diagnose</b> {html.escape(s.path)}: {len(s.steps)} steps, "
        f"GPU busy {busy}{_headline_html(d)}<table><tr><th>status</th><th>finding</th><th>fix</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def ranks_html(d: MultiRankDiagnosis) -> str:
    """The multi-rank diagnosis for a notebook: the findings, then one row per rank."""

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f} %"

    head = "".join(
        f"<th>{h}</th>"
        for h in ("rank", "steps", "step (µs)", "busy", "comm (µs)", "overlap", "wait (µs)")
    )
    rows = "".join(
        f"<tr><td>{r.rank}{' ⚑' if r.rank == d.straggler else ''}</td><td>{r.steps}</td>"
        f"<td>{_num(r.step_median_us)}</td><td>{pct(r.gpu_busy_fraction)}</td>"
        f"<td>{_num(r.comm_us)}</td><td>{pct(r.overlap_fraction)}</td>"
        f"<td>{_num(r.comm_wait_us)}</td></tr>"
        for r in d.ranks
    )
    finds = "".join(
        f"<li><b>{html.escape(f.status.value)} {html.escape(f.id)}</b> "
        f"{html.escape(f.title)}<br><small>"
        + "; ".join(html.escape(str(e)) for e in f.evidence)
        + f"</small><br><code>{html.escape(f.fix)}</code></li>"
        for f in worst_first(d.findings)
    )
    return (
        f"<div><b>gpuprobe diagnose</b>: {len(d.ranks)} ranks<ul>{finds}</ul>"
        f"<table><tr>{head}</tr>{rows}</table></div>"
    )


# ---------------------------------------------------------------------------------------------
# The comparison (``--compare``): the same parts as the terminal's, kernel names whole.
# ---------------------------------------------------------------------------------------------

_VERDICT_COLORS = {
    "worse": "#cf222e",
    "slower": "#cf222e",
    "better": "#1a7f37",
    "faster": "#1a7f37",
}


def _v(word: str) -> str:
    color = _VERDICT_COLORS.get(word)
    return f'<b style="color:{color}">{word}</b>' if color else html.escape(word)


def _n(v: float | None, unit: str = "") -> str:
    if v is None:
        return "n/a"
    digits = 1 if unit == "%" or (abs(v) < 100 and (unit or v != int(v))) else 0
    return f"{v:,.{digits}f}" + (f" {html.escape(unit)}" if unit else "")


def comparison_html(c: TraceComparison) -> str:
    """The comparison as an HTML fragment (``TraceComparison._repr_html_``): the headline, the
    numbers, every share (those that moved flagged ⚑), the kernels whose GPU time changed most
    with their names whole, and each finding's status."""
    e = html.escape
    parts = [
        "<div class=gp-compare><b>gpuprobe diagnose --compare</b>",
        f"<br>before: <code>{e(c.before.summary.path)}</code>",
        f"<br>after: <code>{e(c.after.summary.path)}</code>",
    ]
    parts += [f"<p><b>note:</b> {e(n)}</p>" for n in c.notes]
    if c.headline:
        parts.append(f"<p><b>{e(c.headline)}</b></p>")
    rows = []
    for m in c.metrics:
        if m.before is None and m.after is None:
            continue
        d = m.change
        unit = "pp" if m.unit == "%" else m.unit
        change = "" if d is None else ("+" if d >= 0 else "") + _n(d, unit)
        rows.append(
            f"<tr><td>{e(m.name)}</td><td align=right>{_n(m.before, m.unit)}</td>"
            f"<td align=right>{_n(m.after, m.unit)}</td><td align=right>{change}</td>"
            f"<td>{_v(m.verdict)}</td></tr>"
        )
    parts.append(
        "<table><tr><th>metric (median step)</th><th>before</th><th>after</th><th>change</th>"
        "<th></th></tr>" + "".join(rows) + "</table>"
    )
    if c.shares:
        rows = []
        for sh in c.shares:
            cp = sh.change_pp
            rows.append(
                f"<tr><td>{'⚑ ' if sh.flagged else ''}{e(sh.name)} of {e(sh.of)}</td>"
                f"<td align=right>{_n(None if sh.before is None else 100 * sh.before, '%')}</td>"
                f"<td align=right>{_n(None if sh.after is None else 100 * sh.after, '%')}</td>"
                f"<td align=right>{'n/a' if cp is None else f'{cp:+.1f} pp'}</td>"
                f"<td align=right>{_n(sh.before_us, 'µs')} → {_n(sh.after_us, 'µs')}</td>"
                f"<td>{_v(sh.verdict)}</td></tr>"
            )
        parts.append(
            f"<p>Shares of GPU time; ⚑ moved ≥ {c.share_change_pp:g} percentage points</p>"
            "<table><tr><th>share</th><th>before</th><th>after</th><th>change</th>"
            "<th>time per step</th><th></th></tr>" + "".join(rows) + "</table>"
        )
    kd = c.kernels
    if kd is not None and kd.changes:
        rows = [
            f"<tr><td>{_v(k.status)}</td><td align=right>{k.delta_us:+,.0f}</td>"
            f"<td align=right>{k.total_before_us:,.0f} → {k.total_after_us:,.0f}</td>"
            f"<td align=right>{k.count_before:,.4g} → {k.count_after:,.4g}</td>"
            f"<td style='word-break:break-all'><code>{e(k.name)}</code>"
            f"{f'<br><small>{e(k.why)}</small>' if k.why else ''}</td></tr>"
            for k in kd.changes
            if k.status != "same"
        ]
        parts.append(
            "<p>Largest changes of GPU time per step (µs)</p><table><tr><th></th><th>change</th>"
            "<th>before → after</th><th>calls</th><th>kernel</th></tr>" + "".join(rows) + "</table>"
        )
    rows = [
        f"<tr><td>{e(f.id)}</td><td>{e(f.before.value) if f.before else '-'}</td>"
        f"<td>{e(f.after.value) if f.after else '-'}</td><td>{e(f.title)}</td></tr>"
        for f in c.findings
    ]
    parts.append(
        "<table><tr><th>finding</th><th>before</th><th>after</th><th>now</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )
    return "".join(parts)


def comparison_page(c: TraceComparison) -> str:
    """The comparison as a whole page."""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>gpuprobe diagnose --compare</title>
<style>
body {{ font-family: sans-serif; margin: 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
td, th {{ padding: 2px 8px; border-bottom: 1px solid #eee; vertical-align: top; }}
code {{ background: #eef; padding: 1px 3px; }}
</style></head><body>{comparison_html(c)}</body></html>
"""


def write_comparison_html(c: TraceComparison, path: str | os.PathLike[str]) -> str:
    """Write the comparison's page to ``path`` (``render.report``); returns the path."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(comparison_page(c))
    except OSError as exc:
        raise InputError(f"--html {path}: cannot write ({exc.strerror or exc})") from None
    return str(path)


def kernels_html(kb: KernelBreakdown) -> str:
    """The kernel breakdown for a notebook: GPU time by family, kernel time by provenance
    (library, framework, compiler, collective, own) and the top kernels."""

    def table(head: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
        )
        return f"<table><tr>{th}</tr>{body}</table>"

    fams = [
        (f.family, f"{f.count:,}", _num(f.total_us), f"{100 * f.share:.1f}") for f in kb.families
    ]
    provs = [
        (p.provenance, f"{p.count:,}", _num(p.total_us), f"{100 * p.share:.1f}", p.top)
        for p in kb.provenances
    ]
    top = [
        (k.name, k.family, k.provenance, f"{k.count:,}", _num(k.total_us), f"{100 * k.share:.1f}")
        for k in kb.top
    ]
    return (
        f"<div><b>gpuprobe diagnose --kernels</b> {html.escape(kb.path)}: "
        f"{kb.total_us:,.0f} µs of GPU activity in the steps analysed"
        "<h4>GPU time by kernel family</h4>"
        + table(("family", "count", "µs", "%"), fams)
        + "<h4>Kernel time by provenance</h4>"
        + table(("provenance", "n", "µs", "% of kernel time", "largest kernel"), provs)
        + "<h4>Top kernels by GPU time</h4>"
        + table(("kernel", "family", "provenance", "n", "µs", "%"), top)
        + "</div>"
    )


render.html.register(Diagnosis, diagnosis_html)
render.html.register(KernelBreakdown, kernels_html)
render.html.register(MultiRankDiagnosis, ranks_html)
render.html.register(TraceComparison, comparison_html)
render.report.register(TraceComparison, write_comparison_html)
