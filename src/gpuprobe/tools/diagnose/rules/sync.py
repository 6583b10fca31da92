"""Synchronisation: host calls that really wait for the GPU (stream/device/event syncs, blocking
copies to the host, asynchronous copies into pageable host memory, which hold the host all the
same: ``.cpu()``, ``.tolist()``, ``print(tensor)``; the ``.item()`` reads inside which one ran),
how often per step, and the
GPU idle time they caused: the wait inside them and the refill after them, nothing else (E5 in
docs/experiments.md#e5: printing the loss every step forces a copy and a wait).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.intervals import merge_intervals, subtract_intervals
from gpuprobe.tools.diagnose.onetime import waits_for_nothing
from gpuprobe.tools.diagnose.rules._common import (
    GROUP,
    capture_skip,
    median,
    no_gpu_text,
    pct,
    steady_steps,
    step_range,
)
from gpuprobe.tools.diagnose.rules._common import per_step as per

__all__ = [
    "BLIND_WAIT_FRACTION",
    "SYNC_IDLE_WARN_FRACTION",
    "SYNC_MIN_PER_STEP",
    "synchronisation",
]

BLIND_WAIT_FRACTION = 0.5  # of the host's wait in syncs with no GPU activity anywhere in the trace
# past which the wait is for work the trace does not show; ours
SYNC_IDLE_WARN_FRACTION = 0.05  # of step time the GPU idles in and right after host syncs; ours
SYNC_MIN_PER_STEP = 1  # median syncs (or scalar reads) per step to report at all; E5 "every step"

_FIX = (
    "keep values on the device: accumulate `total += loss.detach()` and call .item() / print "
    "every N steps (e.g. `if step % 100 == 0: print(total.item() / 100)`); avoid "
    "torch.cuda.synchronize() and tensor values as Python ints/indices inside the step; find "
    "them with torch.cuda.set_sync_debug_mode('warn')"
)


def _frames(ctx: TraceContext) -> Counter[str]:
    """The user's frames of the top-level scalar reads (``.item()``; with_stack only)."""
    reads = P.ITEM.mask(ctx.op_name, ctx.names) | P.SCALAR_READ.mask(ctx.op_name, ctx.names)
    frames = ctx.op_user_frame[reads & ctx.op_top & (ctx.op_step >= 0)]
    return Counter(ctx.names[f] for f in frames.tolist() if f >= 0)


def _blind_wait(ctx: TraceContext, calls: np.ndarray) -> float:
    """µs of the waiting calls ``calls`` during which no GPU activity of any device ran."""
    if calls.size == 0:
        return 0.0
    s, e = merge_intervals(ctx.gpu_ts.copy(), ctx.gpu_end.copy())
    w = merge_intervals(ctx.rt_ts[calls], ctx.rt_ts[calls] + ctx.rt_dur[calls])
    left = subtract_intervals(w, (s, e))
    return float((left[1] - left[0]).sum())


def _in_conv(ctx: TraceContext, rt: np.ndarray) -> np.ndarray:
    """For runtime-call indices ``rt``: did it run inside a convolution op on its thread (cuDNN
    autotuning with cudnn.benchmark=True, which times algorithms with synchronising events)?"""
    out = np.zeros(rt.size, dtype=bool)
    conv = P.CONV_OP.mask(ctx.op_name, ctx.names)
    if not conv.any() or rt.size == 0:
        return out
    for tid in np.unique(ctx.rt_tid[rt]):
        c = conv & (ctx.op_tid == tid)
        if not c.any():
            continue
        s, e = merge_intervals(ctx.op_ts[c], ctx.op_ts[c] + ctx.op_dur[c])
        mine = ctx.rt_tid[rt] == tid
        t = ctx.rt_ts[rt[mine]]
        k = np.searchsorted(s, t, side="right") - 1
        out[mine] = (k >= 0) & (t <= e[np.maximum(k, 0)])
    return out


@rule("sync")
def synchronisation(ctx: TraceContext) -> list[Finding]:
    """Host-device syncs per step and the GPU idle they caused."""
    skip = capture_skip(ctx, "sync", "Host-device syncs")
    if skip:
        return skip
    no_ops = ctx.op_ts.size == 0  # scalar reads (.item(), .cpu()) are cpu_ops: none recorded
    if no_ops and (not ctx.has_gpu or ctx.rt_ts.size == 0):
        return [
            Finding(
                id="sync",
                status=Status.SKIPPED,
                title="Host-device syncs: skipped: the trace records no CPU ops"
                + ("" if not ctx.has_gpu else " and no CUDA runtime calls"),
                group=GROUP,
            )
        ]
    n = len(ctx.steps)
    reads_all = ctx.scalar_read_mask & (ctx.op_step >= 0)
    reads_per = np.bincount(ctx.op_step[reads_all], minlength=n)
    waited = ctx.waiting_read_mask & (ctx.op_step >= 0)
    waited_per = np.bincount(ctx.op_step[waited], minlength=n)
    # a first sync with nothing queued is set-up (one-time-start's), not a wait
    sync = ctx.sync_mask & ~waits_for_nothing(ctx) & (ctx.rt_step >= 0)
    sync_per = np.bincount(ctx.rt_step[sync], minlength=n)
    wait_per = np.bincount(ctx.rt_step[sync], weights=ctx.rt_dur[sync], minlength=n)
    names = Counter(ctx.names[i] for i in ctx.rt_name[sync].tolist())
    idle_per = ctx.idle_of_cause("sync")
    share = idle_per / steady_steps(ctx)
    frames = _frames(ctx)
    evidence = [
        Evidence("syncs_per_step_median", median(sync_per)),
        Evidence("host_wait_in_syncs_per_step", round(median(wait_per), 1), "µs"),
        *(
            (Evidence("scalar_reads", "not recorded (no CPU ops in the trace)"),)
            if no_ops
            else (
                Evidence("scalar_reads_per_step_median", median(reads_per)),
                Evidence("scalar_reads_that_waited_per_step", median(waited_per)),
            )
        ),
        Evidence("gpu_idle_from_syncs_median", round(median(idle_per), 1), "µs"),
        Evidence("gpu_idle_from_syncs_share", pct(median(share)), "%"),
        Evidence("threshold_idle", pct(SYNC_IDLE_WARN_FRACTION), "%"),
    ]
    details = [f"{k}: {v} call{'' if v == 1 else 's'}" for k, v in names.most_common(5)]
    details += [
        f".item() from {k}: {v} call{'' if v == 1 else 's'}" for k, v in frames.most_common(3)
    ]
    unwaited = int(reads_per.sum() - waited_per.sum())
    if ctx.has_gpu and unwaited > 0:
        details.append(
            f"{unwaited} scalar reads ran no waiting call (CPU tensors, or the value was "
            "already on the host): not counted as syncs"
        )
    details += [
        f"{'trace' if s.number is None else '#' + str(s.number)}: {sync_per[i]} "
        f"sync{'' if sync_per[i] == 1 else 's'} "
        f"(host waited {wait_per[i]:.0f} µs), GPU idle from syncs {idle_per[i]:.0f} µs"
        for i, s in enumerate(ctx.steps)
    ]

    def sync_finding(
        status: Status, title: str, fix: str = "", listed: bool = True
    ) -> list[Finding]:
        return [
            Finding(
                id="sync",
                status=status,
                title=title,
                evidence=tuple(evidence),
                fix=fix,
                group=GROUP,
                details=tuple(details) if listed else (),
                gain=median(share) if ctx.has_gpu and status is Status.WARN else None,
            )
        ]

    if not ctx.has_gpu:
        if median(reads_per) >= SYNC_MIN_PER_STEP:
            return sync_finding(
                Status.INFO,
                f"{median(reads_per):.0f} .item()/scalar reads per step: on a GPU each "
                f"one waits for all queued work ({no_gpu_text(ctx)}, so no wait measured)",
                _FIX,
            )
        return sync_finding(
            Status.OK, f"No scalar reads in most steps ({step_range(ctx)})", listed=False
        )
    per_step = median(sync_per)
    if per_step < SYNC_MIN_PER_STEP:
        return sync_finding(
            Status.OK,
            f"No host-device sync in most steps ({step_range(ctx)})"
            + ("; no CPU ops recorded, so .item()-style reads are not seen" if no_ops else ""),
        )
    what = ", ".join(f"{k} ×{v}" for k, v in names.most_common(3))
    autotune = int(_in_conv(ctx, np.nonzero(sync)[0]).sum())
    evidence.append(Evidence("syncs_inside_convolutions", autotune))
    if autotune >= 0.5 * int(sync.sum()):
        return sync_finding(
            Status.INFO,
            f"{autotune} of the {int(sync.sum())} syncs run inside convolutions: cuDNN "
            "autotuning (torch.backends.cudnn.benchmark=True), which happens once per input "
            "shape, so these steps are not the steady state",
            "profile later steps, after autotuning: torch.profiler.schedule(wait=2, "
            "warmup=2, active=3), or keep input shapes fixed so it tunes only once",
        )
    syncs = f"{per_step:.0f} host-device sync{'' if per_step == 1 else 's'} {per(ctx)}"
    # waits during which no GPU of the trace ran anything: the host waited for work the trace
    # does not show (another process on the card, another device, an event from elsewhere)
    blind = _blind_wait(ctx, np.nonzero(sync)[0])
    evidence.append(Evidence("wait_with_no_gpu_activity", round(blind, 1), "µs"))
    if median(share) >= SYNC_IDLE_WARN_FRACTION:
        total_wait = float(wait_per.sum())
        outside = total_wait > 0 and blind >= BLIND_WAIT_FRACTION * total_wait
        if outside:  # the replay cannot move work it does not see: the stall is the price
            evidence.append(Evidence("waits_outside_trace", True))
        return sync_finding(
            Status.WARN,
            f"{syncs}; the GPU idles {pct(median(share))} % of the step in them and while "
            f"refilling after ({what})"
            + (
                f"; {blind / 1e3:,.1f} ms of the wait had nothing running on any GPU in the "
                "trace: the host waited for work the trace does not show"
                if outside
                else ""
            ),
            (
                "find what the sync waits for: another process on the same GPU (nvidia-smi, "
                "gpuprobe top), work on another device or stream not profiled, or a "
                "cudaStreamWaitEvent on an event recorded elsewhere; then " + _FIX
            )
            if outside
            else _FIX,
        )
    return sync_finding(
        Status.INFO,
        f"{syncs}, but they cost the GPU only {pct(median(share))} % of the step ({what})",
    )
