"""Show one process's profiler cycles (:class:`CycleDiagnosis`): what the folder held, a row per
cycle (steps, median step, GPU busy share and its idle split by cause, phase), why each
warm-up or unsteady cycle is one, then the full diagnosis of the steady cycle. Text fits 80
columns; HTML for notebooks; a one-line repr."""

from __future__ import annotations

import html
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.wrap import TEXT_WIDTH
from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis, CycleRow
from gpuprobe.tools.diagnose.model import IDLE_CAUSES
from gpuprobe.ui.console import make_console

__all__ = [
    "cycles_html",
    "cycles_repr",
    "cycles_table_html",
    "headline",
    "print_cycles",
    "render_cycles_text",
]


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def _span_s(d: CycleDiagnosis) -> float | None:
    first, last = d.cycles[0].start_us, d.cycles[-1].end_us
    return None if first is None or last is None else (last - first) / 1e6


def headline(d: CycleDiagnosis) -> str:
    """``"2 profiler cycles of one process (pid 25738) over 470 s, not ranks"``."""
    span = _span_s(d)
    over = f" over {span:,.1f} s" if span is not None else ""
    return f"{len(d.cycles)} profiler cycles of one process ({d.process}){over}, not ranks"


def _skip_fix(d: CycleDiagnosis) -> str | None:
    """The schedule that starts profiling after the warm-up cycles, when steps are numbered."""
    warm = [c for c in d.cycles if c.phase == "warm-up"]
    if not warm or warm[-1].last_step is None:
        return None
    n = warm[-1].last_step + 1
    return (
        f"profile after warm-up: torch.profiler.schedule(skip_first={n}, wait=..., "
        f"warmup=..., active=...) skips steps 0..{n - 1} before the first cycle"
    )


def print_cycles(
    d: CycleDiagnosis, console: object | None = None, *, verbose: bool = False
) -> None:
    """Print the cycles, why each is warm-up, steady or unsteady, then the steady diagnosis."""
    from rich.console import Console
    from rich.text import Text

    from gpuprobe.tools.diagnose.show.text import folder_of, print_diagnosis, print_header

    con: Console = console if isinstance(console, Console) else make_console()
    print_header(con, "gpuprobe diagnose", folder_of(c.path for c in d.cycles), headline(d))
    con.print(
        Text(
            "the same process, one trace after another, none overlapping in time: as "
            "tensorboard_trace_handler writes them with schedule(..., repeat=N)",
            style="dim",
        )
    )
    con.print()
    from gpuprobe.tools.diagnose.show.text import plain_table

    # two spaces between columns instead of three: eleven columns fit 80
    t = plain_table(
        "Cycles: each cycle's steps; GPU busy and idle by cause, % of their GPU time", (0, 1, 0, 0)
    )
    # the causes some cycle has idle time in, and the steps column when some cycle has steps:
    # all-zero or all-n/a columns only squeeze the others at 80 columns
    causes = [c for c in IDLE_CAUSES if any((r.idle_share(c) or 0.0) >= 0.0005 for r in d.cycles)]
    numbered = any(r.first_step is not None for r in d.cycles)
    t.add_column("#", justify="right", no_wrap=True)
    if numbered:
        t.add_column("steps", overflow="fold")
    for c in ("step ms", "busy%", *causes):
        t.add_column(c, justify="right", overflow="fold", min_width=len(c))
    t.add_column("phase", overflow="fold", min_width=len("unsteady"))
    for r in d.cycles:
        t.add_row(
            f"{r.cycle}{'*' if r.cycle == d.diagnosed else ' '}",
            *([r.step_range] if numbered else []),
            "n/a" if r.step_median_us is None else f"{r.step_median_us / 1e3:,.1f}",
            _pct(r.gpu_busy_fraction),
            *(_pct(r.idle_share(c)) for c in causes),
            r.phase,
        )
    con.print(t)
    con.print(
        Text(
            "step ms: median step; busy%: GPU busy share of the steps; then their idle time by "
            "cause (as in a trace's step table); * the cycle diagnosed below",
            style="dim",
        )
    )
    for r in d.cycles:
        if r.phase != "steady" or verbose:
            con.print(Text.assemble((f"#{r.cycle} {r.phase}: ", "bold"), r.why or "n/a"))
    fix = _skip_fix(d)
    if fix:
        con.print(Text.assemble(("fix: ", "bold"), fix))
    if d.note:
        con.print(Text(d.note, style="dim"))
    chosen = d.cycle(d.diagnosed)
    con.print()
    what: list[str] = [chosen.phase] if chosen is not None else []
    if chosen is not None and chosen.first_step is not None:
        one = chosen.first_step == chosen.last_step
        what.append(f"step{'' if one else 's'} {chosen.step_range}")
    con.print(Text(f"Cycle {d.diagnosed} ({', '.join(what) or 'n/a'}) in full:", style="bold"))
    print_diagnosis(d.diagnosis, con, verbose=verbose)
    con.print(f"[dim]read and analysed {len(d.cycles)} traces in {d.seconds:.2f} s[/dim]")


def render_cycles_text(d: CycleDiagnosis) -> str:
    """The cycles report as plain text, 80 columns."""
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: print_cycles(d, con), TEXT_WIDTH)


def cycles_repr(d: CycleDiagnosis) -> str:
    """One line: the process, how many cycles of each phase, which one was diagnosed."""
    phases = ", ".join(
        f"{n} {p}" for p in ("warm-up", "steady", "unsteady") if (n := len(d.phase(p)))
    )
    return (
        f"<CycleDiagnosis {d.process}: {len(d.cycles)} cycles ({phases}); "
        f"cycle {d.diagnosed} diagnosed: {d.status.value}>"
    )


def _row_html(r: CycleRow, diagnosed: int) -> str:
    cells = [
        f"{r.cycle}{' *' if r.cycle == diagnosed else ''}",
        r.step_range,
        _num(r.step_median_us),
        _pct(r.gpu_busy_fraction),
        *(_pct(r.idle_share(c)) for c in IDLE_CAUSES),
        r.phase,
        r.why,
    ]
    return "<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>"


def cycles_table_html(d: CycleDiagnosis) -> str:
    """One row per cycle (steps, median step, busy and idle shares, phase and why)."""
    head = "".join(
        f"<th>{html.escape(h)}</th>"
        for h in ("cycle", "steps", "step (µs)", "busy %", *IDLE_CAUSES, "phase", "why")
    )
    rows = "".join(_row_html(r, d.diagnosed) for r in d.cycles)
    return f"<table><tr>{head}</tr>{rows}</table>"


def cycles_html(d: CycleDiagnosis) -> str:
    """The cycles for a notebook: one row per cycle, then the steady cycle's diagnosis."""
    return (
        f"<div><b>gpuprobe diagnose</b>: {html.escape(headline(d))}{cycles_table_html(d)}"
        f"<p>idle columns: % of the steps' GPU time; * cycle {d.diagnosed}, diagnosed in full:</p>"
        f"{render.html(d.diagnosis)}</div>"
    )


def _terminal(d: CycleDiagnosis, console: Any = None, **options: Any) -> None:
    print_cycles(d, console, verbose=bool(options.get("verbose", False)))


render.text.register(CycleDiagnosis, render_cycles_text)
render.terminal.register(CycleDiagnosis, _terminal)
render.html.register(CycleDiagnosis, cycles_html)
render.repr_.register(CycleDiagnosis, cycles_repr)
