"""Communication on one rank: the collective kernels (NCCL, RCCL, HCCL, custom all-reduce) of a
single trace that run while no compute kernel does. One rank's trace shows how much of its
communication is hidden behind its own compute (another stream running at the same time) and
how much the step waits through; it cannot tell the transfer from a wait for a late peer inside
the collective (NCCL's kernel spins until every rank arrives): the folder of every rank's trace
does (``gpuprobe diagnose DIR``: straggler, exposed-communication net of the waits).
"""

from __future__ import annotations

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.intervals import merge_intervals, overlaps, subtract_intervals
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL
from gpuprobe.tools.diagnose.rules._common import (
    GROUP,
    capture_skip,
    no_activity,
    no_gpu,
    pct,
    per_step,
    steady_total,
)
from gpuprobe.tools.diagnose.rules.ranks import EXPOSED_COMM_WARN_FRACTION

__all__ = ["WAIT_SPREAD", "comm_masks", "exposed_parts", "single_rank_communication"]

WAIT_SPREAD = 10.0  # the slowest call of one collective kernel this many times its fastest (3
# calls or more): a spread message sizes rarely make, the mark of a wait for a slower rank
# inside it (the param DLRM job's 8 ranks: rank 1's SendRecv runs 0.13-7.6 ms, and its folder
# shows 98 % of the exposed time waiting for rank 7); ours

_WHAT = "Communication on this rank"
_FIX = (
    "overlap the collectives with compute: DDP(bucket_cap_mb=…, gradient_as_bucket_view=True) "
    "starts each bucket's all-reduce during backward; FSDP(backward_prefetch=BackwardPrefetch."
    "BACKWARD_PRE, forward_prefetch=True); in tensor-parallel inference, async TP or a fused "
    "all-reduce (symmetric memory); or communicate less (bf16 gradients, a compression hook). "
    "Diagnose the folder of every rank's trace to tell the transfer from waits for a late rank"
)


def comm_masks(ctx: TraceContext) -> tuple[np.ndarray, np.ndarray]:
    """The analysed steps' collective kernels and their compute kernels (every family but
    communication and copies), as masks over the trace's GPU activities."""
    # the families' first two tests (kernels.family_of_activities), without classifying the
    # rest: a collective's name first, then copies and memsets
    kern = (ctx.gpu_step >= 0) & (ctx.gpu_kind == GPU_KIND_KERNEL)
    comm = kern & P.COMM_KERNEL.mask(ctx.gpu_name, ctx.names)
    return comm, kern & ~comm & ~P.MEMORY_KERNEL.mask(ctx.gpu_name, ctx.names)


def exposed_parts(ctx: TraceContext, comm: np.ndarray, compute: np.ndarray) -> np.ndarray:
    """Each collective kernel's time with no compute kernel running (µs, one per activity of
    ``comm``): what the step waits through while it communicates."""
    cs, ce = merge_intervals(ctx.gpu_ts[compute], ctx.gpu_end[compute])
    ts, end = ctx.gpu_ts[comm], ctx.gpu_end[comm]
    return np.maximum(end - ts - overlaps(cs, ce, ts, end), 0.0)


@rule("exposed-communication")
def single_rank_communication(ctx: TraceContext) -> list[Finding]:
    """``exposed-communication`` on one rank's trace: the collective kernels' time not
    overlapped with compute, as a share of the analysed steady time; a warning from
    :data:`~.ranks.EXPOSED_COMM_WARN_FRACTION` (the folder rule's threshold) up."""
    fid = "exposed-communication"
    if not ctx.has_gpu:
        return [no_gpu(ctx, fid, _WHAT)]
    skipped = no_activity(ctx, fid, _WHAT) or capture_skip(ctx, fid, _WHAT)
    if skipped:
        return skipped
    comm, compute = comm_masks(ctx)
    if not comm.any():
        return [
            Finding(
                fid,
                Status.SKIPPED,
                f"{_WHAT}: skipped: no NCCL/RCCL collective kernels in the analysed steps",
                group=GROUP,
            )
        ]
    cu = merge_intervals(ctx.gpu_ts[comm], ctx.gpu_end[comm])
    busy = float(np.sum(cu[1] - cu[0]))
    cs = merge_intervals(ctx.gpu_ts[compute], ctx.gpu_end[compute])
    ex = subtract_intervals(cu, cs)
    exposed = float(np.sum(ex[1] - ex[0]))
    total = steady_total(ctx)
    share = exposed / total if total > 0 else 0.0
    n_steps = max(len(ctx.steps), 1)
    each = ctx.gpu_dur[comm]
    longest = int(np.argmax(each))
    name = ctx.names[int(ctx.gpu_name[np.nonzero(comm)[0][longest]])]
    status = Status.WARN if share >= EXPOSED_COMM_WARN_FRACTION else Status.OK
    where = per_step(ctx)
    spread = _spread(ctx, comm)
    overlapped = 1.0 - exposed / busy if busy > 0 else 0.0
    title = (
        f"{exposed / n_steps / 1e3:,.2f} ms {where} of collective kernels run with no compute "
        f"beside them ({pct(share)} % of the steps' time; {pct(overlapped)} % of the "
        f"communication is hidden behind compute): the step waits for its communication"
        + (
            f"; calls of one collective run {spread[1] / 1e3:,.2f}-{spread[2] / 1e3:,.2f} ms, "
            "so part of it is likely a wait for a slower rank"
            if spread is not None
            else ""
        )
        if status is Status.WARN
        else f"{_WHAT}: {pct(overlapped)} % of the collective kernels' time is overlapped with "
        f"compute; {exposed / n_steps / 1e3:,.2f} ms {where} exposed ({pct(share)} % of the "
        "steps' time)"
    )
    return [
        Finding(
            fid,
            status,
            title,
            evidence=(
                Evidence("comm_kernels", int(comm.sum())),
                Evidence("comm_busy_per_step", round(busy / n_steps, 1), "µs"),
                Evidence("comm_overlapped", pct(overlapped), "%"),
                Evidence("exposed_per_step", round(exposed / n_steps, 1), "µs"),
                Evidence("exposed_share", pct(share), "%"),
                Evidence("longest_collective", round(float(each[longest]), 1), "µs"),
                Evidence("threshold", pct(EXPOSED_COMM_WARN_FRACTION), "%"),
            ),
            details=(
                *(
                    (
                        f"{spread[0]} runs {spread[1]:,.0f}-{spread[2]:,.0f} µs (over "
                        f"{WAIT_SPREAD:g}x apart): a wait for a slower rank inside the "
                        "collective, or messages of very different sizes",
                    )
                    if spread is not None
                    else ()
                ),
                f"longest collective: {name} ({float(each[longest]) / 1e3:,.2f} ms)",
                "one rank's trace cannot tell the transfer from a wait for a late rank inside "
                "the collective: the gain is at most this",
            ),
            fix=_FIX if status is Status.WARN else "",
            group=GROUP,
            gain=share if status is Status.WARN else None,
        )
    ]


def _spread(ctx: TraceContext, comm: np.ndarray) -> tuple[str, float, float] | None:
    """(name, fastest, slowest µs) of the collective kernel whose calls spread the most, when
    that is :data:`WAIT_SPREAD` or more over 3 calls or more; else None."""
    names = ctx.gpu_name[comm]
    dur = ctx.gpu_dur[comm]
    best: tuple[str, float, float] | None = None
    for n in np.unique(names):
        d = dur[names == n]
        lo, hi = float(d.min()), float(d.max())
        wider = best is None or hi / max(lo, 1e-3) > best[2] / max(best[1], 1e-3)
        if d.size >= 3 and hi >= WAIT_SPREAD * max(lo, 1e-3) and wider:
            best = (ctx.names[int(n)].split("(")[0], lo, hi)
    return best
