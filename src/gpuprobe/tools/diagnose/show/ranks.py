"""Show the multi-rank diagnosis, the kernel breakdown with launch statistics, and the kernel diff
in the terminal through rich. Tables fit 80 columns; numbers fold onto the next line rather than
being cut (piped output included), and only kernel names are shortened."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status
from gpuprobe.core.wrap import TEXT_WIDTH
from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
from gpuprobe.tools.diagnose.kernels import FAMILIES, Distribution, KernelBreakdown
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
from gpuprobe.tools.diagnose.show.names import short_kernel_name
from gpuprobe.tools.diagnose.show.text import folder_of, print_header
from gpuprobe.ui.console import make_console
from gpuprobe.ui.findings import print_findings

__all__ = [
    "print_kernel_diff",
    "print_kernels",
    "print_ranks",
    "render_kernel_diff_text",
    "render_kernels_text",
    "render_ranks_text",
    "short_kernel_name",
]


def _num(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{100 * v:.{digits}f}"


def _console(console: object | None) -> Any:
    from rich.console import Console

    return console if isinstance(console, Console) else make_console()


def _table(title: str | None = None) -> Any:
    from gpuprobe.tools.diagnose.show.text import plain_table

    return plain_table(title)


def _num_col(t: Any, name: str) -> None:
    t.add_column(name, justify="right", overflow="fold")


def _numbers_table(title: str, first: str, numbers: tuple[str, ...]) -> Any:
    """A table with one text column and right-aligned, folding number columns."""
    t = _table(title)
    t.add_column(first)
    for name in numbers:
        _num_col(t, name)
    return t


def _name_col(t: Any, name: str) -> None:
    """A column of names, wrapped over lines when the numbers need the room (never cut)."""
    t.add_column(name, overflow="fold", ratio=1)


def _findings(con: Any, findings: Any) -> None:
    print_findings(
        con,
        findings,
        brief=(Status.SKIPPED,),
        fix_for=(Status.WARN, Status.FAIL, Status.INFO),
        details=0,
    )


def print_ranks(d: MultiRankDiagnosis, console: object | None = None) -> None:
    """Print the multi-rank diagnosis: findings, the per-rank table, the collectives waited on."""
    from rich.text import Text

    con = _console(console)
    sources = sorted({r.rank_source for r in d.ranks})
    print_header(
        con,
        "gpuprobe diagnose",
        folder_of(r.path for r in d.ranks),
        f"{len(d.ranks)} ranks (rank from {', '.join(sources) or 'n/a'}), "
        f"{d.matched_collectives} collectives matched across ranks",
    )
    if d.note:
        con.print(Text(d.note, style="dim"))
    if d.unread:
        con.print(
            Text(f"partial: {len(d.unread)} rank(s) not analysed, the others are", style="bold")
        )
        for u in d.unread:
            con.print(Text(f"  not read: {u.line}"))
    con.print()
    _findings(con, d.findings)
    con.print()
    t = _table("Per rank (µs per step; % of the rank's GPU time or communication)")
    t.add_column("rank", overflow="fold")
    for c in ("step", "busy%", "comp", "comm", "ovl%", "expos", "wait", "last"):
        _num_col(t, c)
    for r in d.ranks:
        mark = " *" if r.rank == d.straggler else ""
        t.add_row(
            f"{r.rank}{mark}",
            _num(r.step_median_us),
            _pct(r.gpu_busy_fraction, 2),
            _num(r.per_step(r.compute_us)),
            _num(r.per_step(r.comm_us)),
            _pct(r.overlap_fraction, 2),
            _num(r.per_step(r.exposed_comm_us)),
            _num(r.per_step(r.comm_wait_us)),
            str(r.last_arrivals),
        )
    con.print(t)
    con.print(
        Text(
            "step: median step; busy%: GPU busy over its span (HTA temporal breakdown); comp/comm:"
            " compute and NCCL kernel time (unions); ovl%: share of comm overlapped with compute "
            "(HTA get_comm_comp_overlap); expos: comm not overlapped; wait: time in collectives "
            "waiting for later ranks; last: collectives this rank reached last; * straggler",
            style="dim",
        )
    )
    _rank_kernels(con, d)
    if d.collectives:
        con.print()
        c = _table("Collectives the other ranks wait on (µs)")
        _name_col(c, "collective")
        c.add_column("#", justify="right")
        c.add_column("step", justify="right")
        c.add_column("last", justify="right")
        _num_col(c, "wait")
        _num_col(c, "max")
        for w in d.collectives:
            c.add_row(
                short_kernel_name(w.name),
                str(w.occurrence),
                "n/a" if w.step is None else str(w.step),
                str(w.last_rank),
                _num(w.wait_us),
                _num(w.max_wait_us),
            )
        con.print(c)
        con.print(
            Text(
                "#: occurrence of that kernel in the step on every rank; last: the rank that arrived last "
                "(shortest kernel); wait: the other ranks' summed wait; max: the longest one",
                style="dim",
            )
        )
    where = f" on {d.read_on}" if d.read_on else ""
    con.print(
        Text(f"read and analysed {len(d.ranks)} traces{where} in {d.seconds:.2f} s", style="dim")
    )


_FAMILY_ABBREV = {
    "GEMM": "gemm",
    "convolution": "conv",
    "attention": "attn",
    "elementwise": "elem",
    "reduction": "red",
    "communication": "comm",
    "memcpy/memset": "mem",
    "other": "other",
}


def _rank_kernels(con: Any, d: MultiRankDiagnosis) -> None:
    """Kernel families (% of each rank's GPU time) and launch delay per rank."""
    from rich.text import Text

    present = [f for f in FAMILIES if any(x.family == f for r in d.ranks for x in r.families)]
    if not present:
        return
    con.print()
    t = _numbers_table(
        "Kernels per rank (% of GPU time), launch delay (µs)",
        "rank",
        (*(_FAMILY_ABBREV[f] for f in present), "delay", "p99"),
    )
    for r in d.ranks:
        share = {x.family: x.share for x in r.families}
        ls = r.launches
        t.add_row(
            str(r.rank),
            *(_pct(share.get(f, 0.0)) for f in present),
            _num(ls.delay_us.median if ls else None, 1),
            _num(ls.delay_us.p99 if ls else None),
        )
    con.print(t)
    con.print(
        Text(
            "delay: median launch delay (GPU start − end of the launch call, HTA); p99: its "
            "99th percentile; gpuprobe diagnose --kernels TRACE shows one rank in full",
            style="dim",
        )
    )


def _dist_row(t: Any, name: str, dist: Distribution) -> None:
    t.add_row(
        name,
        str(dist.n),
        _num(dist.median, 1),
        _num(dist.p90, 1),
        _num(dist.p99, 1),
        _num(dist.max, 1),
    )


def _provenance_table(con: Any, kb: KernelBreakdown) -> None:
    """Kernel time by where the kernels come from, with each provenance's largest kernel."""
    if not kb.provenances:
        return
    t = _table("Kernel time by provenance (% of kernel time)")
    t.add_column("provenance")
    _num_col(t, "n")
    _num_col(t, "µs")
    _num_col(t, "%")
    _name_col(t, "largest kernel")
    for p in kb.provenances:
        t.add_row(
            p.provenance,
            f"{p.count:,}",
            _num(p.total_us),
            _pct(p.share),
            short_kernel_name(p.top),
        )
    con.print(t)


def print_kernels(kb: KernelBreakdown, console: object | None = None) -> None:
    """Print the kernel families, the top kernels and the launch statistics."""
    from rich.text import Text

    con = _console(console)
    who = f"rank {kb.rank}: " if kb.rank is not None else ""
    facts = f"{who}{kb.total_us:,.0f} µs of GPU activity in the steps analysed"
    print_header(con, "gpuprobe diagnose --kernels", str(kb.path), facts)
    if not kb.families:
        con.print(Text("no GPU activity in the steps analysed (a CPU-only trace?)", style="dim"))
        return
    f = _numbers_table("GPU time by kernel family", "family", ("count", "µs", "%"))
    for fam in kb.families:
        f.add_row(fam.family, f"{fam.count:,}", _num(fam.total_us), _pct(fam.share))
    con.print(f)
    _provenance_table(con, kb)
    if kb.top:
        t = _table(f"Top {len(kb.top)} kernels by GPU time")
        _name_col(t, "kernel")
        t.add_column("family", no_wrap=True, min_width=13)
        _num_col(t, "n")
        _num_col(t, "µs")
        _num_col(t, "mean")
        _num_col(t, "%")
        for k in kb.top:
            t.add_row(
                short_kernel_name(k.name),
                k.family,
                f"{k.count:,}",
                _num(k.total_us),
                _num(k.mean_us, 1),
                _pct(k.share),
            )
        con.print(t)
    steps = [s for s in kb.steps]
    if len(steps) > 1:
        fams = [f.family for f in kb.families]
        s = _table("Per step (% of the step's GPU time)")
        s.add_column("step")
        s.add_column("GPU", justify="right")
        for name in fams:
            _num_col(s, _FAMILY_ABBREV[name])
        for st in steps:
            share = {x.family: x.share for x in st.families}
            s.add_row(st.label, str(st.device), *[_pct(share.get(n, 0.0), 0) for n in fams])
        con.print(s)
    ls = kb.launches
    if ls is None or ls.launches == 0:
        con.print(Text("no kernel launches matched to GPU work (no runtime events)", style="dim"))
        return
    graphs = f", {ls.graph_launches:,} graph replays" if ls.graph_launches else ""
    d = _numbers_table(
        f"Launches: {ls.launches:,} calls, {ls.gpu_activities:,} GPU activities{graphs}",
        "µs",
        ("n", "median", "p90", "p99", "max"),
    )
    _dist_row(d, "launch call (CPU)", ls.cpu_us)
    _dist_row(d, "GPU duration", ls.gpu_us)
    _dist_row(d, "launch delay", ls.delay_us)
    con.print(d)
    con.print(
        f"short kernels (GPU shorter than its launch call ≤ {ls.runtime_cutoff_us:.0f} µs): "
        f"{ls.short_kernels:,} of {ls.launches:,}; launch calls over "
        f"{ls.runtime_cutoff_us:.0f} µs: {ls.runtime_outliers:,}; launch delay over "
        f"{ls.launch_delay_cutoff_us:.0f} µs: {ls.launch_delay_outliers:,}"
    )
    if ls.outliers:
        o = _table("Outliers, worst first")
        o.add_column("kind")
        _name_col(o, "kernel")
        o.add_column("step", justify="right")
        _num_col(o, "µs")
        for x in ls.outliers:
            graph = f"graph of {x.graph_kernels}: " if x.graph_kernels else ""
            o.add_row(
                x.kind,
                graph + short_kernel_name(x.kernel),
                "n/a" if x.step is None else str(x.step),
                _num(x.value_us, 1),
            )
        con.print(o)


def print_kernel_diff(kd: KernelDiff, console: object | None = None, rows: int = 15) -> None:
    """Print the kernel diff: family totals, then the kernels with the largest change."""
    from rich.text import Text

    con = _console(console)
    con.print(
        Text.assemble(
            ("kernels ", "bold"),
            f"{kd.before_path} ({_steps(kd.steps_before)}) → {kd.after_path} "
            f"({_steps(kd.steps_after)}): {kd.new} new, {kd.gone} gone, {kd.faster} faster, "
            f"{kd.slower} slower, {kd.same} same (±{100 * kd.change_fraction:.0f} % of GPU time "
            "per step)",
        )
    )
    f = _numbers_table("GPU time per step by family (µs)", "family", ("before", "after", "change"))
    for fam in kd.families:
        f.add_row(
            fam.family,
            _num(fam.before_us),
            _num(fam.after_us),
            f"{fam.after_us - fam.before_us:+,.0f}",
        )
    f.add_row(
        "all",
        _num(kd.total_before_us),
        _num(kd.total_after_us),
        f"{kd.total_after_us - kd.total_before_us:+,.0f}",
    )
    con.print(f)
    from gpuprobe.tools.diagnose.show.text import print_kernel_changes

    print_kernel_changes(kd, con, rows)  # names whole, wrapped on their own lines


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _count(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"


def _capture(fn: Callable[..., None], obj: object) -> str:
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: fn(obj, con), TEXT_WIDTH)


def render_ranks_text(d: MultiRankDiagnosis) -> str:
    """The multi-rank report as plain text, 80 columns."""
    return _capture(print_ranks, d)


def render_kernels_text(kb: KernelBreakdown) -> str:
    """The kernel breakdown as plain text, 80 columns."""
    return _capture(print_kernels, kb)


def render_kernel_diff_text(kd: KernelDiff) -> str:
    """The kernel diff as plain text, 80 columns."""
    return _capture(print_kernel_diff, kd)


render.text.register(KernelBreakdown, render_kernels_text)
render.text.register(KernelDiff, render_kernel_diff_text)
render.text.register(MultiRankDiagnosis, render_ranks_text)
render.terminal.register(KernelBreakdown, print_kernels)
render.terminal.register(KernelDiff, print_kernel_diff)
render.terminal.register(MultiRankDiagnosis, print_ranks)
