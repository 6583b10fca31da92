"""Show a diagnosis in the terminal through rich: findings first, worst first, then the
per-step breakdown table; and the before/after table of ``--compare``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status
from gpuprobe.core.wrap import TEXT_WIDTH
from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
from gpuprobe.tools.diagnose.model import IDLE_CAUSES, Diagnosis, TraceComparison
from gpuprobe.tools.diagnose.show.names import short_kernel_name
from gpuprobe.ui.console import make_console
from gpuprobe.ui.findings import print_findings
from gpuprobe.ui.style import STATUS_STYLE

__all__ = [
    "folder_of",
    "plain_table",
    "print_comparison",
    "print_diagnosis",
    "print_header",
    "print_kernel_changes",
    "render_comparison_text",
    "render_text",
]

_MAX_STEP_ROWS = 12  # rows of the step table before eliding the middle
_CAUSE_LEGEND = {
    "startup": "in a one-time call (context, module load, autotuning) or refilling after it",
    "input": "DataLoader running",
    "sync": "in a waiting host call or refilling after it",
    "untraced": "no host event recorded for 1 ms or more",
    "host": "CPU work that queues nothing (step edges, gaps of 1 ms or more or filled by CPU ops)",
    "launch": "next kernel launched late after a short gap (framework overhead)",
    "short": "gap under 30 µs with work queued",
    "other": "no cause recorded",
}


# host phases shown as columns of the host table of a trace without GPU activity (the
# DataLoader's is "data"); "cpu_ops" is "fwd+ops" when the trace does not mark its forward
_PHASE_COLUMNS = {
    "forward": "fwd",
    "backward": "bwd",
    "optimizer": "optim",
    "cpu_ops": "op ms",
    "other": "other",
}


_LEGACY_NOTE = (
    "A legacy autograd-profiler export (torch.autograd.profiler.profile before PyTorch 1.8, "
    "use_kineto=False after): no ProfilerStep unless the program marks its steps (judged over "
    "the whole trace then), no launch calls, no deviceProperties"
)
_LEGACY_GPU_NOTE = (
    "; its GPU time is not kernels but each op's CUDA-event span, named like the op: GPU busy "
    "here is what the spans prove (the GPU still on earlier work when an op began or ended), a "
    "lower bound"
)


def plain_table(
    title: str | None = None, padding: tuple[int, int] | tuple[int, int, int, int] = (0, 1)
) -> Any:
    """The house's terminal table: a title on the left, a rule under the header, no frame
    (``padding=(0, 1, 0, 0)``: two spaces between columns instead of three, for wide tables)."""
    from rich import box
    from rich.table import Table

    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=padding,
    )


def folder_of(paths: Iterable[str]) -> str:
    """The folder that holds every one of ``paths`` (a folder of ranks or cycles), as given."""
    folders = [os.path.dirname(p) or "." for p in paths]
    try:
        return os.path.commonpath(folders) if folders else "."
    except ValueError:  # absolute and relative paths mixed
        return folders[0]


def print_header(con: Any, command: str, where: str, facts: str) -> None:
    """A view's first two lines: ``gpuprobe diagnose[ --kernels] WHERE`` (the trace or the
    folder, as typed), then its facts indented 2 (a continuation of either hangs under it)."""
    from rich.text import Text

    con.print(Text.assemble((f"{command} ", "bold"), where))
    con.print(Text("  " + facts))


def _fmt(v: float | None, digits: int = 0, sep: str = ",") -> str:
    return "n/a" if v is None else f"{v:{sep}.{digits}f}"


def print_diagnosis(d: Diagnosis, console: object | None = None, *, verbose: bool = False) -> None:
    """Print ``d`` to ``console`` (a rich Console; stdout by default)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con: Console = console if isinstance(console, Console) else make_console()
    s = d.summary
    kind = s.accelerator or "GPU"  # an MTIA trace's deviceProperties list its MTIA devices
    gpus = ", ".join(
        g.name if g.name == f"GPU {g.id}" else f"{g.name} ({kind} {g.id})" for g in s.devices
    ) or (
        f"none read ({s.accelerator} trace: its device activity is not read)"
        if s.accelerator
        else "none (CPU-only trace)"
    )
    if len(s.steps) == 1:
        steps = f"1 step (#{s.steps[0]})"
    else:
        steps = (
            f"{len(s.steps)} steps ({min(s.steps)}..{max(s.steps)})"
            if s.steps
            else "no ProfilerStep"
        )
    facts = f"{s.size_bytes / 1e6:.1f} MB, {s.events:,} events, {steps}, GPUs: {gpus}"
    if s.accelerator and s.devices:
        facts += f" ({s.accelerator} trace: its device activity is not read)"
    print_header(con, "gpuprobe diagnose", str(s.path), facts)
    if s.trace_format == "legacy":
        con.print(_LEGACY_NOTE + (_LEGACY_GPU_NOTE if s.has_gpu else ""))
    if s.skipped_events:
        con.print(f"[dim]{s.skipped_events} malformed events skipped[/dim]")
    for note in s.damage:
        con.print(Text(f"the file: {note}", style="yellow"))
    if s.steps_timed_on_gpu:
        con.print(
            f"The GPU runs behind the CPU (steps timed on the GPU's side): "
            f"{100 * (s.gpu_lag_share or 0.0):.0f} % of a step's GPU work ran after its host "
            "step (median); the host's counts stay in its own steps"
        )
    head = d.headline
    if head is not None and head.id == "one-time-start":
        con.print(Text.assemble(("Cold start: ", "bold"), head.title))
    elif head is not None and head.gain is None:
        con.print(Text.assemble(("First: ", "bold"), f"{head.id}: {head.title}"))
    elif head is not None:
        con.print(
            Text.assemble(
                ("Biggest gain: ", "bold"),
                f"{head.id}, ≈ {100 * (head.gain or 0.0):.0f} % of the analysed time: {head.title}",
            )
        )
    con.print()
    quiet = () if verbose else (Status.OK, Status.SKIPPED)
    print_findings(con, d.findings, brief=quiet, details=None if verbose else 3)
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

    class Fitted:
        """A table whose rows are kept until it is printed, then drawn with the columns that
        fit the console (``drop``: left out first to last, and named under it)."""

        def __init__(self, title: str, cols: list[str], drop: list[str]) -> None:
            self.title, self.cols, self.drop = title, cols, drop
            self.rows: list[list[str]] = []

        def add_row(self, *cells: str) -> None:
            self.rows.append([str(c) for c in cells])

        def show(self) -> None:
            from rich.measure import Measurement

            from gpuprobe.ui.columns import left_out_note

            keep = list(range(len(self.cols)))
            for name in [None, *self.drop]:  # measured as rich draws it: nothing cut or folded
                if name is not None and name in self.cols and self.cols.index(name) in keep:
                    keep.remove(self.cols.index(name))
                t = table(self.title, [self.cols[i] for i in keep])
                for r in self.rows:
                    t.add_row(*[r[i] for i in keep])
                wide = con.options.update(width=10_000)  # the natural width, not clamped
                if Measurement.get(con, wide, t).maximum <= con.width:
                    break
            con.print(t)
            if note := left_out_note(self.cols, keep):
                con.print(Text(note, style="dim"))

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v / 1e3:.1f}"

    if has_gpu:
        # the causes with idle time in some step (all-zero columns only widen the table)
        causes = [c for c in IDLE_CAUSES if any(r.idle_cause_us.get(c, 0.0) >= 50 for r in d.steps)]
        cols = ["step", *(["GPU"] if many else []), "time", "busy%", "idle", *causes]
        # on a narrow terminal the causes with the least idle time go first, then the split
        by_idle = sorted(causes, key=lambda c: sum(r.idle_cause_us.get(c, 0.0) for r in d.steps))
        gpu = Fitted("GPU time per step (ms): idle split by cause, each instant once", cols,
                     by_idle)  # fmt: skip
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
        gpu.show()
        if causes:
            con.print(Text("; ".join(f"{c}: {_CAUSE_LEGEND[c]}" for c in causes), style="dim"))
        con.print()
    # without a GPU, where each host step goes (the phases after the DataLoader's "data")
    share = {} if has_gpu else s.host_phase_share
    phases = [p for p in _PHASE_COLUMNS if share.get(p, 0.0) > 0]  # those with time
    marked = "forward" in share
    training = share.get("backward", 0.0) > 0 or share.get("optimizer", 0.0) > 0
    together = training and not marked  # the forward's time is in cpu_ops: shown in its place
    if together and "cpu_ops" in phases:
        phases.remove("cpu_ops")
        phases.insert(0, "cpu_ops")
    cols = ["step", "time", "data"]
    cols += ["fwd+ops" if together and p == "cpu_ops" else _PHASE_COLUMNS[p] for p in phases]
    cols += ["syncs", "reads", "ops"]
    if has_gpu:
        cols += ["kernels", "k med µs", "l med µs"]
    phase_names = [c for c in cols[3:] if c not in ("syncs", "reads", "ops")]
    host = Fitted("Host per step (ms)", cols,
                  ["l med µs", "k med µs", "reads", "syncs", *phase_names[::-1]])  # fmt: skip
    seen: set[int | None] = set()
    for r in rows:
        if r is None:
            host.add_row("…", *[""] * (len(cols) - 1))
            continue
        if r.step in seen:  # one row per step, not per device
            continue
        seen.add(r.step)
        t = r.duration_us if r.cpu_duration_us is None else r.cpu_duration_us  # the host's
        cells = [r.label, ms(t), ms(r.dataloader_us)]
        cells += [ms(r.host_phase_us.get(p)) for p in phases]
        cells += [str(r.syncs), str(r.items), str(r.cpu_ops)]
        if has_gpu:
            same = [x for x in d.steps if x.step == r.step]
            cells += [
                str(sum(x.kernels for x in same)),
                _fmt(r.median_kernel_us, 1),
                _fmt(r.median_launch_us, 1),
            ]
        host.add_row(*cells)
    host.show()
    legend = "data: DataLoader __next__; "
    if phases:
        named = {"forward": "fwd: forward", "backward": "bwd: backward"}
        named["optimizer"] = "optim: optimizer"
        named["cpu_ops"] = "op ms: time in " + ("other CPU ops" if training else "CPU ops")
        if together:
            named["cpu_ops"] = "fwd+ops: forward and other CPU ops"
        named["other"] = "other: Python between ops and untraced"
        legend += "".join(f"{named[p]}; " for p in phases)
    legend += "syncs: host calls that waited for the GPU; reads: .item() and other scalar reads; "
    legend += "ops: CPU ops" + ("; k/l med: median kernel and launch" if has_gpu else "")
    con.print(Text(legend, style="dim"))
    steps = (
        "the trace"
        if not s.steps
        else f"step {s.steps[0]}"
        if len(s.steps) == 1
        else f"steps {min(s.steps)}..{max(s.steps)}"
    )
    if s.gpu_busy_fraction is not None:
        con.print(
            f"Steps' GPU span (HTA's definitions): GPU busy {100 * s.gpu_busy_fraction:.1f} % "
            f"of {s.gpu_span_us or 0:,.0f} µs, from the first to the last GPU activity "
            f"launched in {steps}; idle split host wait "
            f"{100 * (s.host_wait_fraction or 0):.1f} %, kernel wait "
            f"{100 * (s.kernel_wait_fraction or 0):.1f} %, other "
            f"{100 * (s.other_wait_fraction or 0):.1f} %"
        )
    if s.gpu_activities_outside_steps and s.trace_gpu_busy_fraction is not None:
        n = s.gpu_activities_outside_steps
        con.print(
            f"Whole GPU span: GPU busy {100 * s.trace_gpu_busy_fraction:.1f} % of "
            f"{s.trace_gpu_span_us or 0:,.0f} µs, counting {n:,} GPU "
            f"{'activity' if n == 1 else 'activities'} launched outside {steps} "
            f"({s.gpu_busy_outside_steps_us:,.0f} µs of busy time only they account for)"
        )
    if s.gpu_busy_fraction is not None:
        busy_steps = [r.gpu_busy_fraction for r in d.steps if r.gpu_busy_fraction is not None]
        if busy_steps:
            med = sorted(busy_steps)[len(busy_steps) // 2]
            if abs(med - s.gpu_busy_fraction) >= 0.05:
                con.print(
                    Text(
                        f"Why {100 * s.gpu_busy_fraction:.1f} % and not "
                        f"{100 * med:.1f} %: the steps' span figure counts only the span "
                        "from the first to the last GPU activity (HTA's temporal breakdown); the "
                        "steps' figures count all of each step, including the host time before "
                        "its first kernel and after its last.",
                        style="dim",
                    )
                )
    con.print(f"[dim]read {s.read_seconds:.2f} s, analysed {s.analyse_seconds:.2f} s[/dim]")


_KERNEL_ROWS = 5  # kernels and copies listed in the comparison (verbose: _KERNEL_ROWS_VERBOSE)
_KERNEL_ROWS_VERBOSE = 15
_VERDICT_STYLE = {"worse": "red", "slower": "red", "better": "green", "faster": "green"}


def _num(v: float | None, unit: str = "") -> str:
    """A number with its unit: whole above 100, one decimal below (two significant figures
    where one decimal would show a value that is not zero as 0.0)."""
    if v is None:
        return "n/a"
    digits = 1 if unit == "%" or (abs(v) < 100 and (unit or v != int(v))) else 0
    text = f"{v:,.{digits}f}"
    if v != 0 and float(text.replace(",", "")) == 0:
        text = f"{v:.2g}"
    return text + (f" {unit}" if unit else "")


def _ms(us: float) -> str:
    return f"{us / 1e3:,.1f}"


def _span(b_us: float, a_us: float) -> str:
    """Two GPU times per step in one unit: ``455 → 17,076 µs`` or ``14.7 → 35.9 ms``."""
    if max(abs(b_us), abs(a_us)) >= 1e3:
        return f"{_ms(b_us)} → {_ms(a_us)} ms"
    return f"{b_us:,.0f} → {a_us:,.0f} µs"


def _delta(us: float) -> str:
    return f"{us / 1e3:+,.1f} ms" if abs(us) >= 1e3 else f"{us:+,.0f} µs"


def _count(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"


def print_kernel_changes(kd: KernelDiff, console: object | None = None, rows: int = 5) -> None:
    """The ``rows`` kernels and copies whose GPU time per step changed most: the change, the
    time before and after, the calls and why, then the name on its own lines, shortened as the
    kernel tables shorten it (no ``void``, ATen's wrappers or argument list; the template
    arguments stay, they tell instances apart; ``--json`` has the whole name)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con: Console = console if isinstance(console, Console) else make_console()
    shown = [k for k in kd.changes if k.status != "same"][:rows]
    if not shown:
        return
    con.print()
    con.print(
        Text(
            f"Largest changes of GPU time per step (kernels and copies: {kd.new} new, "
            f"{kd.gone} gone, {kd.slower} slower, {kd.faster} faster, {kd.same} the same)",
            style="bold",
        )
    )
    kt = Table.grid(padding=(0, 1))
    kt.add_column(no_wrap=True)
    kt.add_column(overflow="fold")
    for k in shown:
        calls = f"{_count(k.count_before)} → {_count(k.count_after)} calls"
        why = f" ({k.why})" if k.why else ""
        kt.add_row(
            Text(k.status, style=_VERDICT_STYLE.get(k.status, "")),
            Text.assemble(
                f"{_delta(k.delta_us)}  {_span(k.total_before_us, k.total_after_us)}  "
                f"{calls}{why}\n",
                (short_kernel_name(k.name), "dim"),
                overflow="fold",
            ),
        )
    con.print(kt)


_PAYOFF_STYLE = {"paid as predicted": "green", "paid less": "yellow", "paid more": "cyan"}


def _pct_signed(x: float) -> str:
    """A gain as a signed share: ``+20.1 %`` faster, ``−3.0 %`` slower."""
    return f"{'+' if x >= 0 else '−'}{abs(100 * x):.1f} %"


def print_comparison(
    c: TraceComparison, console: object | None = None, *, verbose: bool = False
) -> None:
    """Print ``c``: the headline, the numbers, the shares that moved, the kernels whose GPU time
    changed most (names whole, wrapped), and each finding's status. ``verbose``: every share,
    GPU time by kernel family and more kernels."""
    from rich.console import Console
    from rich.text import Text

    con: Console = console if isinstance(console, Console) else make_console()
    con.print(Text("gpuprobe diagnose --compare", style="bold"))
    con.print(Text(f"  before: {c.before.summary.path}", overflow="fold"))
    con.print(Text(f"  after:  {c.after.summary.path}", overflow="fold"))
    for note in c.notes:
        con.print(Text.assemble(("  note: ", "bold"), note))
    if c.headline:
        con.print()
        con.print(Text(c.headline, style="bold"))
    con.print()

    def verdict(word: str) -> Text:
        return Text(word, style=_VERDICT_STYLE.get(word, ""))

    t = plain_table("Numbers (median step)")
    t.add_column("metric", overflow="fold")
    for col in ("before", "after", "change", ""):
        t.add_column(col, justify="right", overflow="fold")
    for m in c.metrics:
        if m.before is None and m.after is None:
            continue
        delta = m.change
        change = ""
        if delta is not None:
            unit = "pp" if m.unit == "%" else m.unit
            change = ("+" if delta >= 0 else "") + _num(delta, unit)
        t.add_row(m.name, _num(m.before, m.unit), _num(m.after, m.unit), change, verdict(m.verdict))
    con.print(t)

    shown = list(c.shares) if verbose else c.flagged()
    if shown:
        con.print()
        title = (
            f"Shares of GPU time (flagged ⚑: moved ≥ {c.share_change_pp:g} percentage points)"
            if verbose
            else f"Shares that moved ≥ {c.share_change_pp:g} percentage points"
        )
        st = plain_table(title)
        st.add_column("share", overflow="fold")
        for col in ("before", "after", "change", "time per step", ""):
            st.add_column(col, justify="right", overflow="fold")
        for s in shown:
            cp = s.change_pp
            st.add_row(
                ("⚑ " if verbose and s.flagged else "") + f"{s.name} of {s.of}",
                _num(None if s.before is None else 100 * s.before, "%"),
                _num(None if s.after is None else 100 * s.after, "%"),
                "n/a" if cp is None else f"{cp:+.1f} pp",
                _span(s.before_us, s.after_us),
                verdict(s.verdict),
            )
        con.print(st)
    elif c.shares and c.before.summary.has_gpu and c.after.summary.has_gpu:
        con.print(
            Text(
                f"No share of GPU time moved by {c.share_change_pp:g} percentage points or more "
                "(Tensor Cores, precision, copy kinds, kernel families).",
                style="dim",
            )
        )

    kd = c.kernels
    if kd is not None:
        if verbose:
            con.print()
            ft = plain_table("GPU time per step by family (ms)")
            ft.add_column("family")
            for col in ("before", "after", "change"):
                ft.add_column(col, justify="right", overflow="fold")
            for f in kd.families:
                ft.add_row(
                    f.family,
                    _ms(f.before_us),
                    _ms(f.after_us),
                    f"{(f.after_us - f.before_us) / 1e3:+,.1f}",
                )
            ft.add_row(
                "all (summed over streams)",
                _ms(kd.total_before_us),
                _ms(kd.total_after_us),
                f"{(kd.total_after_us - kd.total_before_us) / 1e3:+,.1f}",
            )
            con.print(ft)
        print_kernel_changes(kd, con, _KERNEL_ROWS_VERBOSE if verbose else _KERNEL_ROWS)

    if c.payoffs:
        con.print()
        pt = plain_table(
            "Fixes: the gain BEFORE predicted against the gain realised (the step's, "
            "1 − after/before, for the fixes made: their cause gone from AFTER)"
        )
        pt.add_column("fix", overflow="fold")
        for col in ("predicted", "realised", "left after"):
            pt.add_column(col, justify="right")
        pt.add_column("verdict", overflow="fold")
        for p in c.payoffs:
            together = f" (with {', '.join(x for x in p.together if x != p.id)})"
            said = p.verdict + (together if len(p.together) > 1 else "")
            if p.fixed and len(p.together) > 1 and p.predicted_together is not None:
                said += f": {_pct_signed(p.predicted_together)} together"
            pt.add_row(
                p.id,
                f"{100 * p.predicted:.1f} %",
                _pct_signed(p.realised) if p.fixed and p.realised is not None else "—",
                f"{100 * p.left:.1f} %",
                Text(said, style=_PAYOFF_STYLE.get(p.verdict, "")),
            )
        con.print(pt)

    con.print()
    f = plain_table("Findings")
    f.add_column("finding", overflow="fold")
    for col in ("before", "after"):
        f.add_column(col)
    f.add_column("now", overflow="fold")
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


def _capture(fn: Callable[[Any, Any], None], obj: object, width: int = TEXT_WIDTH) -> str:
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: fn(obj, con), width)


def render_text(d: Diagnosis) -> str:
    """The terminal report as plain text."""
    return _capture(print_diagnosis, d)


def render_comparison_text(c: TraceComparison) -> str:
    """The comparison as plain text, 80 columns (kernel names whole, wrapped)."""
    return _capture(print_comparison, c, width=TEXT_WIDTH)


render.text.register(Diagnosis, render_text)
render.terminal.register(Diagnosis, print_diagnosis)
render.text.register(TraceComparison, render_comparison_text)
render.terminal.register(TraceComparison, print_comparison)
