"""Show a diagnosis in the terminal through rich: findings first, worst first, then the
per-step breakdown table; and the before/after table of ``--compare``."""

from __future__ import annotations

import io
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status, worst_first
from gpuprobe.tools.diagnose.model import IDLE_CAUSES, Diagnosis, TraceComparison
from gpuprobe.ui.style import STATUS_STYLE

__all__ = [
    "plain_table",
    "print_comparison",
    "print_diagnosis",
    "render_comparison_text",
    "render_text",
]

_MAX_STEP_ROWS = 12  # rows of the step table before eliding the middle
_CAUSE_LEGEND = {
    "startup": "in a one-time call (context, module load, autotuning) or refilling after it",
    "input": "DataLoader running",
    "sync": "in a waiting host call or refilling after it",
    "untraced": "no host event recorded for 1 ms or more",
    "host": "CPU work that queues nothing (step edges, gaps of 1 ms or more)",
    "launch": "next kernel launched late, gap under 1 ms",
    "short": "gap under 30 µs with work queued",
    "other": "no cause recorded",
}


def plain_table(title: str | None = None) -> Any:
    """The house's terminal table: a title on the left, a rule under the header, no frame."""
    from rich import box
    from rich.table import Table

    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
    )


def _fmt(v: float | None, digits: int = 0, sep: str = ",") -> str:
    return "n/a" if v is None else f"{v:{sep}.{digits}f}"


def print_diagnosis(d: Diagnosis, console: object | None = None, *, verbose: bool = False) -> None:
    """Print ``d`` to ``console`` (a rich Console; stdout by default)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con: Console = console if isinstance(console, Console) else Console()
    s = d.summary
    gpus = (
        ", ".join(
            g.name if g.name == f"GPU {g.id}" else f"{g.name} (GPU {g.id})" for g in s.devices
        )
        or "none (CPU-only trace)"
    )
    steps = f"{len(s.steps)} steps ({s.steps[0]}..{s.steps[-1]})" if s.steps else "no ProfilerStep"
    con.print(
        Text.assemble(
            ("gpuprobe diagnose ", "bold"),
            f"{s.path}: {s.size_bytes / 1e6:.1f} MB, {s.events:,} events, {steps}, GPUs: {gpus}",
        )
    )
    if s.skipped_events:
        con.print(f"[dim]{s.skipped_events} malformed events skipped[/dim]")
    head = d.headline
    if head is not None and d.cold:
        con.print(Text.assemble(("Cold start: ", "bold"), head.title))
    elif head is not None:
        con.print(
            Text.assemble(
                ("Biggest gain: ", "bold"),
                f"{head.id}, ≈ {100 * (head.gain or 0.0):.0f} % of the step: {head.title}",
            )
        )
    con.print()
    for f in worst_first(d.findings):
        style = STATUS_STYLE[f.status]
        subject = f" [{f.subject}]" if f.subject else ""
        con.print(
            Text.assemble(
                (f"{f.status.value.upper():>7} ", style), (f.id, "bold"), subject, "  ", f.title
            )
        )
        if f.status in (Status.OK, Status.SKIPPED) and not verbose:
            continue
        if f.evidence:
            con.print(Text("        " + "  ".join(str(e) for e in f.evidence), style="dim"))
        if f.fix:
            con.print(Text.assemble(("        fix: ", "bold"), f.fix))
        if f.gain_text:
            con.print(Text.assemble(("        gain: ", "bold"), f.gain_text))
        shown = f.details if verbose else f.details[:3]
        for line in shown:
            con.print(Text("        · " + line, style="dim"))
    con.print()

    has_gpu = any(r.device is not None for r in d.steps)
    many = len({r.device for r in d.steps}) > 1
    rows = list(d.steps)
    if len(rows) > _MAX_STEP_ROWS and not verbose:
        half = _MAX_STEP_ROWS // 2
        rows = [*rows[:half], None, *rows[-half:]]  # type: ignore[list-item]

    def table(title: str, cols: list[str]) -> Table:
        t = plain_table(title)
        for c in cols:
            # numbers wrap onto a second line rather than lose digits ("40…") in a narrow or
            # piped terminal
            t.add_column(
                c,
                justify="left" if c in ("step", "GPU") else "right",
                overflow="fold",
                min_width=len(c),
            )
        return t

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v / 1e3:.1f}"

    if has_gpu:
        # the causes with idle time in some step (all-zero columns only widen the table)
        causes = [c for c in IDLE_CAUSES if any(r.idle_cause_us.get(c, 0.0) >= 50 for r in d.steps)]
        cols = ["step", *(["GPU"] if many else []), "time", "busy%", "idle", *causes]
        gpu = table("GPU time per step (ms): idle split by cause, each instant once", cols)
        for r in rows:
            if r is None:
                gpu.add_row("…", *[""] * (len(cols) - 1))
                continue
            busy = None if r.gpu_busy_fraction is None else 100 * r.gpu_busy_fraction
            gpu.add_row(
                r.label,
                *([str(r.device)] if many else []),
                ms(r.duration_us),
                _fmt(busy, 1),
                ms(r.idle_us),
                *(ms(r.idle_cause_us.get(c)) for c in causes),
            )
        con.print(gpu)
        if causes:
            con.print(Text("; ".join(f"{c}: {_CAUSE_LEGEND[c]}" for c in causes), style="dim"))
        con.print()
    cols = ["step", "time", "data", "syncs", "reads", "ops"]
    if has_gpu:
        cols += ["kernels", "k med µs", "l med µs"]
    host = table("Host per step (ms)", cols)
    seen: set[int | None] = set()
    for r in rows:
        if r is None:
            host.add_row("…", *[""] * (len(cols) - 1))
            continue
        if r.step in seen:  # one row per step, not per device
            continue
        seen.add(r.step)
        cells = [r.label, ms(r.duration_us), ms(r.dataloader_us), str(r.syncs), str(r.items)]
        cells.append(str(r.cpu_ops))
        if has_gpu:
            same = [x for x in d.steps if x.step == r.step]
            cells += [
                str(sum(x.kernels for x in same)),
                _fmt(r.median_kernel_us, 1),
                _fmt(r.median_launch_us, 1),
            ]
        host.add_row(*cells)
    con.print(host)
    con.print(
        Text(
            "data: DataLoader __next__; syncs: host calls that waited for the GPU; reads: "
            ".item() and other scalar reads; ops: CPU ops; k/l med: median kernel and launch",
            style="dim",
        )
    )
    if s.gpu_busy_fraction is not None:
        con.print(
            f"Whole trace (HTA's definitions): GPU busy {100 * s.gpu_busy_fraction:.1f} % of "
            f"{s.gpu_span_us or 0:,.0f} µs; idle split host wait "
            f"{100 * (s.host_wait_fraction or 0):.1f} %, kernel wait "
            f"{100 * (s.kernel_wait_fraction or 0):.1f} %, other "
            f"{100 * (s.other_wait_fraction or 0):.1f} %"
        )
        busy_steps = [r.gpu_busy_fraction for r in d.steps if r.gpu_busy_fraction is not None]
        if busy_steps:
            med = sorted(busy_steps)[len(busy_steps) // 2]
            if abs(med - s.gpu_busy_fraction) >= 0.05:
                con.print(
                    Text(
                        f"Why {100 * s.gpu_busy_fraction:.1f} % and not "
                        f"{100 * med:.1f} %: the whole-trace figure counts only the span from "
                        "the first to the last GPU activity (HTA's temporal breakdown); the "
                        "steps' figures count all of each step, including the host time before "
                        "its first kernel and after its last.",
                        style="dim",
                    )
                )
    con.print(f"[dim]read {s.read_seconds:.2f} s, analysed {s.analyse_seconds:.2f} s[/dim]")


def print_comparison(c: TraceComparison, console: object | None = None) -> None:
    """Print the before/after table of ``c``."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con: Console = console if isinstance(console, Console) else Console()
    con.print(
        Text.assemble(
            ("gpuprobe diagnose --compare ", "bold"),
            f"{c.before.summary.path} → {c.after.summary.path}",
        )
    )
    t = Table(show_edge=False, pad_edge=False)
    for col in ("metric", "before", "after", "change"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for m in c.metrics:
        if m.before is None and m.after is None:
            continue
        delta = m.change
        style = {True: "green", False: "red", None: ""}[m.improved]
        change = "" if delta is None else f"{delta:+,.1f}{(' ' + m.unit) if m.unit else ''}"
        unit = f" {m.unit}" if m.unit else ""
        t.add_row(
            m.name, _fmt(m.before, 1) + unit, _fmt(m.after, 1) + unit, Text(change, style=style)
        )
    con.print(t)
    con.print()
    f = Table(show_edge=False, pad_edge=False)
    for col in ("finding", "before", "after", "now"):
        f.add_column(col)
    for ch in c.findings:
        b = ch.before.value if ch.before else "-"
        a = ch.after.value if ch.after else "-"
        f.add_row(
            Text(ch.id),
            Text(b, style=STATUS_STYLE.get(ch.before, "")) if ch.before else b,
            Text(a, style=STATUS_STYLE.get(ch.after, "")) if ch.after else a,
            Text(ch.title),
        )
    con.print(f)


def _capture(fn: object, obj: object) -> str:
    from rich.console import Console

    buf = io.StringIO()
    con = Console(file=buf, width=110, force_terminal=False, color_system=None)
    fn(obj, con)  # type: ignore[operator]
    return buf.getvalue()


def render_text(d: Diagnosis) -> str:
    """The terminal report as plain text."""
    return _capture(print_diagnosis, d)


def render_comparison_text(c: TraceComparison) -> str:
    """The comparison as plain text."""
    return _capture(print_comparison, c)


render.text.register(Diagnosis, render_text)
render.terminal.register(Diagnosis, print_diagnosis)
render.text.register(TraceComparison, render_comparison_text)
render.terminal.register(TraceComparison, print_comparison)
