"""Synchronisation: host calls that wait for the GPU (stream/device/event syncs, blocking copies,
``.item()``), how often per step, and how long the GPU then sits idle (E5: printing the loss
every step forces a copy and a wait).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from gpuprobe.diagnose import patterns as P
from gpuprobe.diagnose.analysis import TraceContext
from gpuprobe.diagnose.rules._common import GROUP, median, pct, step_range
from gpuprobe.findings import Evidence, Finding, Status

__all__ = ["SYNC_IDLE_WARN_FRACTION", "SYNC_MIN_PER_STEP", "gpu_idle_after", "synchronisation"]

SYNC_IDLE_WARN_FRACTION = 0.05  # of step time the GPU idles right after host syncs; ours
SYNC_MIN_PER_STEP = 1  # median syncs (or scalar reads) per step to report at all; E5 "every step"

_FIX = (
    "keep values on the device: accumulate `total += loss.detach()` and call .item() / print "
    "every N steps (e.g. `if step % 100 == 0: print(total.item() / 100)`); avoid "
    "torch.cuda.synchronize() and tensor values as Python ints/indices inside the step; find "
    "them with torch.cuda.set_sync_debug_mode('warn')"
)


def gpu_idle_after(ctx: TraceContext, end: np.ndarray) -> np.ndarray:
    """For each host time ``end`` (a sync's return), the GPU idle time until the next GPU
    activity on any device (0 when the GPU is still busy or nothing follows)."""
    starts, ends = ctx.merged_all
    if starts.size == 0 or end.size == 0:
        return np.zeros(end.shape)
    k = np.searchsorted(ends, end, side="right")  # first interval ending after `end`
    have = k < starts.size
    kk = np.minimum(k, starts.size - 1)
    gap = np.where(have, starts[kk] - end, 0.0)
    return np.maximum(gap, 0.0)


def _frames(ctx: TraceContext) -> Counter[str]:
    """Python frames of the top-level ops that read a device scalar (with_stack only)."""
    m = P.ITEM.mask(ctx.op_name, ctx.names) & ctx.op_top & (ctx.op_step >= 0)
    frames = ctx.op_frame[m]
    return Counter(ctx.names[f] for f in frames if f >= 0)


def synchronisation(ctx: TraceContext) -> list[Finding]:
    """Host-device syncs per step and the GPU idle gap after each."""
    n = len(ctx.steps)
    dur = np.maximum(ctx.step_durations, 1e-9)
    reads = ctx.scalar_read_mask & (ctx.op_step >= 0)
    reads_per = np.bincount(ctx.op_step[reads], minlength=n)
    sync = ctx.sync_mask & (ctx.rt_step >= 0)
    sync_per = np.bincount(ctx.rt_step[sync], minlength=n)
    names = Counter(ctx.names[i] for i in ctx.rt_name[sync].tolist())
    idle = gpu_idle_after(ctx, ctx.rt_ts[sync] + ctx.rt_dur[sync])
    idle_per = np.bincount(ctx.rt_step[sync], weights=idle, minlength=n)
    share = idle_per / dur
    frames = _frames(ctx)
    evidence = [
        Evidence("syncs_per_step_median", median(sync_per)),
        Evidence("scalar_reads_per_step_median", median(reads_per)),
        Evidence("gpu_idle_after_syncs_median", round(median(idle_per), 1), "µs"),
        Evidence("gpu_idle_after_syncs_share", pct(median(share)), "%"),
        Evidence("threshold_idle", pct(SYNC_IDLE_WARN_FRACTION), "%"),
    ]
    details = [f"{k}: {v} calls" for k, v in names.most_common(5)]
    details += [f".item() from {k}: {v} calls" for k, v in frames.most_common(3)]
    details += [
        f"{'trace' if s.number is None else '#' + str(s.number)}: {sync_per[i]} syncs, "
        f"{reads_per[i]} scalar reads, GPU idle after syncs {idle_per[i]:.0f} µs"
        for i, s in enumerate(ctx.steps)
    ]
    if not ctx.has_gpu:
        if median(reads_per) >= SYNC_MIN_PER_STEP:
            return [
                Finding(
                    id="sync",
                    status=Status.INFO,
                    title=f"{median(reads_per):.0f} .item()/scalar reads per step: on a GPU each "
                    "one waits for all queued work (CPU-only trace, so no wait measured)",
                    evidence=tuple(evidence),
                    fix=_FIX,
                    group=GROUP,
                    details=tuple(details),
                )
            ]
        return [
            Finding(
                id="sync",
                status=Status.OK,
                title=f"No scalar reads in most steps ({step_range(ctx)})",
                evidence=tuple(evidence),
                group=GROUP,
            )
        ]
    per_step = max(median(sync_per), median(reads_per))
    if per_step < SYNC_MIN_PER_STEP:
        return [
            Finding(
                id="sync",
                status=Status.OK,
                title=f"No host-device sync in most steps ({step_range(ctx)})",
                evidence=tuple(evidence),
                group=GROUP,
                details=tuple(details),
            )
        ]
    what = ", ".join(f"{k} ×{v}" for k, v in names.most_common(3)) or "scalar reads"
    status = Status.WARN if median(share) >= SYNC_IDLE_WARN_FRACTION else Status.INFO
    return [
        Finding(
            id="sync",
            status=status,
            title=f"{per_step:.0f} host-device syncs per step; the GPU then idles "
            f"{pct(median(share))} % of the step ({what})",
            evidence=tuple(evidence),
            fix=_FIX,
            group=GROUP,
            details=tuple(details),
        )
    ]
