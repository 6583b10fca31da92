"""The one-line ``repr`` of each diagnose result (:func:`gpuprobe.core.render.repr_`): what it
read, its headline figures and its findings counted, never a dump of its fields (a
:class:`~gpuprobe.tools.diagnose.model.Diagnosis` repr was 4.6k characters, a multi-rank one 32k).
The long text stays in ``str()`` and ``_repr_html_``."""

from __future__ import annotations

from pathlib import Path

from gpuprobe.core import render
from gpuprobe.core.findings import status_counts
from gpuprobe.core.render import one_line
from gpuprobe.core.units import seconds
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
from gpuprobe.tools.diagnose.kernels import KernelBreakdown
from gpuprobe.tools.diagnose.model import Diagnosis, TraceComparison
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis

__all__ = [
    "comparison_repr",
    "context_repr",
    "diagnosis_repr",
    "kernel_diff_repr",
    "kernels_repr",
    "ranks_repr",
]


def _us(us: float | None) -> str:
    return seconds(us / 1e6) if us is not None else "n/a"


def _pct(f: float | None) -> str:
    return f"{100 * f:.0f} %" if f is not None else "n/a"


def diagnosis_repr(d: Diagnosis) -> str:
    """``<Diagnosis trace.json: 6 steps, GPU busy 41 %; headline ...; findings: ...>``."""
    s = d.summary
    head = d.headline
    busy = f", GPU busy {_pct(s.gpu_busy_fraction)}" if s.has_gpu else ", no GPU activity"
    top = f"; {head.id}" if head is not None else ""
    return one_line(
        "Diagnosis",
        f"{Path(s.path).name}: {len(d.steps)} steps{busy}{top}; "
        f"findings: {status_counts(d.findings)}",
    )


def comparison_repr(c: TraceComparison) -> str:
    """``<TraceComparison a.json → b.json: the headline; n metrics, m shares moved>``."""
    before, after = Path(c.before.summary.path).name, Path(c.after.summary.path).name
    moved = len(c.flagged())
    headline = c.headline or "no headline"
    return one_line(
        "TraceComparison",
        f"{before} → {after}: {headline}; {len(c.metrics)} metrics, {moved} shares moved",
    )


def ranks_repr(d: MultiRankDiagnosis) -> str:
    """``<MultiRankDiagnosis 8 ranks: straggler rank 3; findings: ...>``."""
    straggler = f"straggler rank {d.straggler}" if d.straggler is not None else "no straggler"
    return one_line(
        "MultiRankDiagnosis",
        f"{len(d.ranks)} ranks, {d.matched_collectives} collectives matched: {straggler}; "
        f"findings: {status_counts(d.findings)}",
    )


def kernels_repr(k: KernelBreakdown) -> str:
    """``<KernelBreakdown trace.json: 604 ms of kernels in 6 steps; the 3 largest families>``."""
    largest = sorted(k.families, key=lambda f: -f.total_us)[:3]
    fams = ", ".join(f"{f.family} {_pct(f.share)}" for f in largest)
    return one_line(
        "KernelBreakdown",
        f"{Path(k.path).name}: {_us(k.total_us)} of kernels in {len(k.steps)} steps; {fams}",
    )


def kernel_diff_repr(k: KernelDiff) -> str:
    """``<KernelDiff a.json → b.json: 101 ms → 97 ms of kernels per step; 2 new, 1 gone, ...>``."""
    return one_line(
        "KernelDiff",
        f"{Path(k.before_path).name} → {Path(k.after_path).name}: "
        f"{_us(k.total_before_us)} → {_us(k.total_after_us)} of kernels per step; {k.new} new, "
        f"{k.gone} gone, {k.slower} slower, {k.faster} faster, {k.same} same",
    )


def context_repr(ctx: TraceContext) -> str:
    """``<TraceContext trace.json: 6 steps analysed (2 warm-up left out), 1.2 MB read>``."""
    warm = f" ({len(ctx.warmup)} warm-up left out)" if ctx.warmup else ""
    return one_line(
        "TraceContext",
        f"{Path(ctx.raw.path).name}: {len(ctx.breakdowns)} steps analysed{warm}, "
        f"{ctx.raw.size_bytes / 1e6:.1f} MB read",
    )


render.repr_.register(TraceContext, context_repr)
render.repr_.register(Diagnosis, diagnosis_repr)
render.repr_.register(TraceComparison, comparison_repr)
render.repr_.register(MultiRankDiagnosis, ranks_repr)
render.repr_.register(KernelBreakdown, kernels_repr)
render.repr_.register(KernelDiff, kernel_diff_repr)
