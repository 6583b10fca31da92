"""``gpuprobe diagnose DIR --html FILE``: the page of a job's ranks (the findings, the per-rank
table, the collectives waited on, then the straggler's timeline beside the median rank's) and of
one process's profiler cycles (the table of cycles, the diagnosed cycle's findings and timeline).
The timelines are the single-trace page's (:mod:`.timeline`), drawn for the same step number
where the ranks share it; a note says how to open each drawn trace in Perfetto."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence

from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis
from gpuprobe.tools.diagnose.drawn import DrawnTrace
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
from gpuprobe.tools.diagnose.show.cycles import cycles_table_html, headline
from gpuprobe.tools.diagnose.show.html import (
    choose_step,
    findings_html,
    page,
    step_timeline,
    write_page,
)
from gpuprobe.tools.diagnose.show.timeline import perfetto_note

__all__ = ["cycles_page", "ranks_page", "write_folder_html"]


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def _ranks_table(d: MultiRankDiagnosis) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "rank",
            "trace",
            "steps",
            "step µs",
            "busy %",
            "comp µs",
            "comm µs",
            "ovl %",
            "exposed µs",
            "wait µs",
            "last",
        )
    )
    rows = []
    for r in d.ranks:
        mark = " ⚑ straggler" if r.rank == d.straggler else ""
        cells = (
            _num(r.step_median_us),
            _pct(r.gpu_busy_fraction),
            _num(r.per_step(r.compute_us)),
            _num(r.per_step(r.comm_us)),
            _pct(r.overlap_fraction),
            _num(r.per_step(r.exposed_comm_us)),
            _num(r.per_step(r.comm_wait_us)),
            str(r.last_arrivals),
        )
        rows.append(
            f"<tr><td><b>{r.rank}</b>{mark}</td>"
            f"<td><code>{html.escape(os.path.basename(r.path))}</code></td><td>{r.steps}</td>"
            + "".join(f"<td align=right>{c}</td>" for c in cells)
            + "</tr>"
        )
    return (
        f"<table><tr>{head}</tr>{''.join(rows)}</table><p class=note>µs per step (median "
        "step); busy: GPU busy over its span (HTA temporal breakdown); comp/comm: compute and "
        "NCCL kernel time; ovl: share of comm overlapped with compute; exposed: comm not "
        "overlapped; wait: time in collectives waiting for later ranks; last: collectives this "
        "rank reached last</p>"
    )


def _collectives_table(d: MultiRankDiagnosis) -> str:
    if not d.collectives:
        return ""
    rows = "".join(
        f"<tr><td style='word-break:break-all'><code>{html.escape(w.name)}</code></td>"
        f"<td>{w.occurrence}</td><td>{'n/a' if w.step is None else w.step}</td>"
        f"<td>{w.last_rank}</td><td align=right>{_num(w.wait_us)}</td>"
        f"<td align=right>{_num(w.max_wait_us)}</td></tr>"
        for w in d.collectives
    )
    return (
        "<h3>Collectives the other ranks wait on</h3><table><tr><th>collective</th><th>#</th>"
        "<th>step</th><th>last rank</th><th>wait µs</th><th>max µs</th></tr>"
        f"{rows}</table>"
    )


def _timelines(drawn: Sequence[DrawnTrace], step: int | None) -> str:
    """Each drawn trace's timeline: of step ``step``, else the first trace's median-length step
    and, for the others, the same step number where they have it (their own median else)."""
    parts = []
    same = step
    for t in drawn:
        own = same if any(s.number == same for s in t.ctx.steps) or step is not None else None
        if same is None and t.ctx.steps:
            same = t.ctx.steps[choose_step(t.ctx, None)].number
        parts.append(step_timeline(t.diagnosis, t.ctx, own, who=f"{t.who}: "))
    return "".join(parts) + perfetto_note([t.path for t in drawn])


def ranks_page(d: MultiRankDiagnosis, drawn: Sequence[DrawnTrace], step: int | None = None) -> str:
    """The page of a job's ranks."""
    sources = ", ".join(sorted({r.rank_source for r in d.ranks})) or "n/a"
    what = (
        "the straggler beside the median rank, each from its own step start"
        if d.straggler is not None
        else "the median rank (no rank straggles)"
    )
    body = (
        f"<h2>gpuprobe diagnose: {len(d.ranks)} ranks</h2><p>rank from {html.escape(sources)}, "
        f"{d.matched_collectives} collectives matched across ranks</p>"
        + (f"<p class=note>{html.escape(d.note)}</p>" if d.note else "")
        + f"<h3>Findings</h3>{findings_html(d.findings)}<h3>Per rank</h3>{_ranks_table(d)}"
        + _collectives_table(d)
        + f"<p class=note>Timelines below: {what}. Another rank: "
        "<code>gpuprobe diagnose ITS_TRACE --html FILE</code>.</p>" + _timelines(drawn, step)
    )
    return page(f"gpuprobe diagnose: {len(d.ranks)} ranks", body)


def cycles_page(d: CycleDiagnosis, drawn: Sequence[DrawnTrace], step: int | None = None) -> str:
    """The page of one process's profiler cycles."""
    folder = os.path.dirname(d.cycles[0].path) or "."
    body = (
        f"<h2>gpuprobe diagnose: {html.escape(folder)}</h2><p>{html.escape(headline(d))}</p>"
        f"<h3>Cycles</h3>{cycles_table_html(d)}<p class=note>step: median step; idle columns: "
        f"% of the steps' GPU time; * cycle {d.diagnosed}, diagnosed in full below</p>"
        + (f"<p class=note>{html.escape(d.note)}</p>" if d.note else "")
        + f'<div class="wrap"><div class="side"><h3>Findings of cycle {d.diagnosed}</h3>'
        f"{findings_html(d.findings)}</div>"
        f'<div class="main">{_timelines(drawn, step)}</div></div>'
    )
    return page(f"gpuprobe diagnose: {folder}", body)


def write_folder_html(
    path: str | os.PathLike[str],
    result: MultiRankDiagnosis | CycleDiagnosis,
    drawn: Sequence[DrawnTrace],
    step: int | None = None,
) -> str:
    """Write the page of a folder's diagnosis to ``path``; returns the path."""
    if isinstance(result, CycleDiagnosis):
        return write_page(path, cycles_page(result, drawn, step))
    return write_page(path, ranks_page(result, drawn, step))
