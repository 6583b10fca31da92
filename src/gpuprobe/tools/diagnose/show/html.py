"""``--html``: one self-contained page with the findings beside one step's zoomable timeline
(:mod:`.timeline`: inline JSON and script, nothing fetched from a network), a note on opening the
whole trace in Perfetto; the same page parts for a job's ranks and one process's cycles
(:mod:`.pages`); the notebook views (``_repr_html_``) and the ``--compare`` page.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable

import numpy as np

from gpuprobe.core import render
from gpuprobe.core.errors import InputError
from gpuprobe.core.findings import Finding, worst_first
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernels import KernelBreakdown
from gpuprobe.tools.diagnose.model import Diagnosis, TraceComparison, TraceSummary
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
from gpuprobe.tools.diagnose.show.timeline import (
    TIMELINE_CSS,
    TIMELINE_JS,
    legend_html,
    perfetto_note,
    timeline_data,
    timeline_html,
)
from gpuprobe.ui.style import STATUS_COLORS

__all__ = [
    "choose_step",
    "comparison_html",
    "comparison_page",
    "diagnosis_html",
    "findings_html",
    "page",
    "ranks_html",
    "render_html",
    "step_timeline",
    "write_comparison_html",
    "write_html",
    "write_page",
]


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


def findings_html(findings: Iterable[Finding]) -> str:
    """The findings, worst first, each with its evidence folded and its fix."""
    out = []
    for f in worst_first(tuple(findings)):
        color = STATUS_COLORS[f.status]
        ev = "".join(f"<li>{html.escape(str(e))}</li>" for e in f.evidence)
        det = "".join(f"<li>{html.escape(x)}</li>" for x in f.details[:5])
        fix = f"<p><b>fix:</b> <code>{html.escape(f.fix)}</code></p>" if f.fix else ""
        if f.gain_text:
            fix += f"<p><b>gain:</b> {html.escape(f.gain_text)}</p>"
        out.append(
            f'<div class="f" style="border-left:5px solid {color}">'
            f'<b style="color:{color}">{f.status.value.upper()}</b> <b>{html.escape(f.id)}</b> '
            f"{html.escape(f.subject)}<br>{html.escape(f.title)}"
            f"<details><summary>evidence</summary><ul>{ev}</ul><ul>{det}</ul></details>{fix}</div>"
        )
    return "".join(out)


def step_timeline(d: Diagnosis, ctx: TraceContext, step: int | None = None, who: str = "") -> str:
    """The heading, the busy note, the legend and the zoomable timeline of one step of ``ctx``
    (``step``: its number; default the median-length step); ``who`` prefixes the heading."""
    i = choose_step(ctx, step)
    st = ctx.steps[i]
    label = "whole trace" if st.number is None else f"ProfilerStep#{st.number}"
    data, used = timeline_data(ctx, i)
    s = d.summary
    rows = [r for r in d.steps if r.step == st.number and r.gpu_busy_fraction is not None]
    note = ""
    if rows and s.gpu_busy_fraction is not None:
        step_busy = 100 * rows[0].gpu_busy_fraction  # type: ignore[operator]
        note = (
            f"<p class=note>This step: GPU busy {step_busy:.1f} % of the step, idle "
            f"{100 - step_busy:.1f} %. Over the steps' GPU span: busy "
            f"{100 * s.gpu_busy_fraction:.1f} % of the span from the first to the last GPU "
            "activity the analysed steps launched (HTA's temporal breakdown), which leaves out "
            "the host time before the first kernel and after the last; that is why the two can "
            f"differ.{_whole_span(s)}</p>"
        )
    title = f"{who}Timeline of {label} ({st.end - st.start:,.0f} µs)"
    return f"<h3>{html.escape(title)}</h3>{note}<p>{legend_html(used)}</p>" + timeline_html(
        data, title
    )


_CSS = """
body { font-family: sans-serif; margin: 1em; color: #222; }
.f { padding: 4px 8px; margin: 6px 0; background: #fafafa; }
code { background: #eef; padding: 1px 3px; word-break: break-all; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 2px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
.wrap { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.side { flex: 1 1 24em; max-width: 40em; min-width: 0; }
.main { flex: 3 1 40em; min-width: 0; }
.note { color: #555; font-size: 90%; }
.warn { color: #8a5a00; background: #fff6e0; padding: 2px 6px; }
"""


def page(title: str, body: str, *, timelines: bool = True) -> str:
    """A whole self-contained page: the style, ``body``, and the timelines' script."""
    script = f"<script>{TIMELINE_JS}</script>" if timelines else ""
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}{TIMELINE_CSS if timelines else ''}</style></head><body>\n{body}\n"
        f"{script}</body></html>\n"
    )


def _whole_span(s: TraceSummary) -> str:
    """``" Over the whole GPU span: …"`` when GPU work was launched outside the analysed steps
    (the busy share of every GPU activity from the first to the last), else ""."""
    if not s.gpu_activities_outside_steps or s.trace_gpu_busy_fraction is None:
        return ""
    n = s.gpu_activities_outside_steps
    return (
        f" Over the whole GPU span: busy {100 * s.trace_gpu_busy_fraction:.1f} % of "
        f"{s.trace_gpu_span_us or 0:,.0f} µs, counting {n:,} GPU "
        f"{'activity' if n == 1 else 'activities'} launched outside the analysed steps."
    )


def render_html(d: Diagnosis, ctx: TraceContext, step: int | None = None) -> str:
    """The whole page as a string."""
    s = d.summary
    busy = "n/a" if s.gpu_busy_fraction is None else f"{100 * s.gpu_busy_fraction:.1f} %"
    body = (
        f"<h2>gpuprobe diagnose</h2><p>{html.escape(s.path)}: {s.events:,} events, "
        f"{len(s.steps)} steps, GPU busy {busy} over the steps' GPU span."
        f"{_whole_span(s)}</p>"
        + "".join(f'<p class="warn">the file: {html.escape(n)}</p>' for n in s.damage)
        + f"{_headline_html(d)}"
        f'<div class="wrap"><div class="side"><h3>Findings</h3>{findings_html(d.findings)}</div>'
        f'<div class="main">{step_timeline(d, ctx, step)}{perfetto_note([s.path])}</div></div>'
    )
    return page(f"gpuprobe diagnose: {s.path}", body)


def write_page(path: str | os.PathLike[str], text: str, *, private: bool = False) -> str:
    """Write a page to ``path`` whole or not at all (a full disk leaves the page that was there,
    never a cut one); a device or a pipe (``/dev/stdout``) is written as it is. ``private``:
    0600 (a page in a run's folder). Returns the path (one-line error when it cannot be
    written)."""
    from gpuprobe.core.files import write_atomic

    try:
        if os.path.exists(path) and not os.path.isfile(path):
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            write_atomic(path, text, private=private)
    except OSError as exc:
        raise InputError(f"--html {path}: cannot write ({exc.strerror or exc})") from None
    return str(path)


def write_html(path: str, d: Diagnosis, ctx: TraceContext, step: int | None = None) -> str:
    """Write the page to ``path``; returns the path."""
    return write_page(path, render_html(d, ctx, step))


def _headline_html(d: Diagnosis) -> str:
    """The biggest gain as a paragraph ("" without one)."""
    h = d.headline
    if h is None:
        return ""
    if h.id == "one-time-start":
        return f"<p><b>Cold start:</b> {html.escape(h.title)}</p>"
    if h.gain is None:
        return f"<p><b>First:</b> <code>{html.escape(h.id)}</code>: {html.escape(h.title)}</p>"
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
    if c.payoffs:
        rows = [
            f"<tr><td>{e(p.id)}</td><td align=right>{100 * p.predicted:.1f} %</td>"
            f"<td align=right>"
            f"{f'{100 * p.realised:+.1f} %' if p.fixed and p.realised is not None else '—'}</td>"
            f"<td align=right>{100 * p.left:.1f} %</td><td>{e(p.verdict)}"
            + (
                f" (with {e(', '.join(x for x in p.together if x != p.id))})"
                if len(p.together) > 1
                else ""
            )
            + "</td></tr>"
            for p in c.payoffs
        ]
        realised = "" if c.realised is None else f": the step {100 * c.realised:+.1f} %"
        parts.append(
            f"<p>Fixes: the gain BEFORE predicted against the one AFTER realised{realised}</p>"
            "<table><tr><th>fix</th><th>predicted</th><th>realised</th><th>left after</th>"
            "<th>verdict</th></tr>" + "".join(rows) + "</table>"
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
    return write_page(path, comparison_page(c))


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
