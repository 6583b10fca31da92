"""GPU time: how busy the GPU was in each step, why it was idle (one cause per idle instant:
one-time start-up calls, the DataLoader, a host-device sync, untraced host code, host work that
queues nothing, late launches, kernel boundaries, or nothing recorded), and whether it waited on
kernel launches (E9: docs/experiments.md#e9). One-time start-up costs are set apart: both rules
judge the steady part of each step (its time less the start-up idle).
"""

from __future__ import annotations

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.core.units import figure
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.columns import KERNEL_WAIT_MAX_GAP_US
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL
from gpuprobe.tools.diagnose.model import IDLE_CAUSES, StepBreakdown
from gpuprobe.tools.diagnose.rules._common import (
    GROUP,
    capture_skip,
    cause_share,
    median,
    no_activity,
    no_gpu,
    pct,
    rows_for,
    steady_us,
    step_range,
)
from gpuprobe.tools.diagnose.rules._common import per_step as per
from gpuprobe.tools.diagnose.rules.compiled import REMEDIES, compiled_run, remedy

__all__ = [
    "CAUSE_FIX",
    "CAUSE_TEXT",
    "GPU_BUSY_WARN_FRACTION",
    "LAUNCH_IDLE_WARN_FRACTION",
    "LAUNCH_MANY_KERNELS_PER_STEP",
    "cause_fix",
    "gpu_idle",
    "idle_causes",
    "launch_bound",
]

GPU_BUSY_WARN_FRACTION = 0.5  # of profiled step time; Nsight gpu_time_util and torch-tb-profiler
LAUNCH_IDLE_WARN_FRACTION = 0.1  # of step time the GPU waits for late launches to warn; ours
LAUNCH_MANY_KERNELS_PER_STEP = 1000  # kernels per step where CUDA graphs pay off; ours

CAUSE_TEXT = {
    "startup": "in one-time start-up calls (context creation, module or library loads, lazy "
    "kernel loading, autotuning)",
    "input": "while the DataLoader makes the next batch",
    "sync": "in host-device syncs and the refill after them (.item(), synchronize, "
    "blocking copies)",
    "untraced": "with no host event traced (Python or native code the profiler does not see)",
    "host": "while the CPU runs work that queues nothing on the GPU (before the step's first "
    "kernel, after its last, or in gaps of 1 ms or more)",
    "launch": "in short gaps waiting for the CPU to launch the next kernel",
    "short": f"in gaps under {KERNEL_WAIT_MAX_GAP_US:.0f} µs between queued kernels",
    "other": "with no cause recorded in the trace (no sync, DataLoader or late launch covers it)",
}
CAUSE_FIX = {  # for an eager run; cause_fix() fits the launch and kernel-gap ones to the run
    "startup": "see the one-time-start finding: profile after warm-up "
    "(torch.profiler.schedule(wait=1, warmup=1, active=3))",
    "input": "see the input-bound finding: DataLoader(num_workers>0, pin_memory=True, "
    "persistent_workers=True)",
    "sync": "see the sync finding: keep values on the device and read them every N steps",
    "untraced": "see the untraced-host finding: profile with with_stack=True, wrap suspects in "
    "torch.profiler.record_function('name'), or profile the Python side (py-spy)",
    "host": "see the host-work finding: take that CPU work off the step's path (onto the GPU, "
    "into DataLoader workers, or every N steps)",
    "launch": "see the launch-bound finding: " + REMEDIES["launch-brief"]["eager"],
    "short": REMEDIES["short"]["eager"],
    "other": "look at the step's timeline (gpuprobe diagnose --html) for other streams, "
    "cross-stream waits or work the profiler did not record; profile with with_stack=True",
}


def cause_fix(ctx: TraceContext, cause: str) -> str:
    """The fix of an idle cause that fits this run (:func:`.compiled.remedy`: a compiled run
    is not told to use torch.compile)."""
    if cause == "launch":
        return "see the launch-bound finding: " + remedy(ctx, "launch-brief")
    if cause == "short":
        return remedy(ctx, "short")
    return CAUSE_FIX[cause]


def idle_causes(rows: list[StepBreakdown]) -> dict[str, float]:
    """Idle µs per cause summed over ``rows``."""
    return {c: sum(r.idle_cause_us.get(c, 0.0) for r in rows) for c in IDLE_CAUSES}


def _causes(idle_cause_us: dict[str, float]) -> str:
    """`` (sync 16, host 413)``: the idle µs of each cause with half a µs or a hundredth of
    the idle time; "" when none has."""
    least = min(0.5, 0.01 * sum(idle_cause_us.values()))
    parts = [
        f"{c} {figure(idle_cause_us[c])}"
        for c in IDLE_CAUSES
        if idle_cause_us.get(c, 0.0) >= least and idle_cause_us.get(c, 0.0) > 0
    ]
    return f" ({', '.join(parts)})" if parts else ""


@rule("gpu-idle")
def gpu_idle(ctx: TraceContext) -> list[Finding]:
    """GPU busy fraction per step (kernels ∪ memcpy ∪ memset) and the idle time's causes."""
    if not ctx.has_gpu:
        return [no_gpu(ctx, "gpu-idle", "GPU busy time")]
    few = no_activity(ctx, "gpu-idle", "GPU busy time") or capture_skip(
        ctx, "gpu-idle", "GPU busy time"
    )
    if few:
        return few
    out = []
    many = len(ctx.devices) > 1
    steady_causes = tuple(c for c in IDLE_CAUSES if c != "startup")
    for d in ctx.devices:
        rows = rows_for(ctx, d)
        busy = [r.gpu_busy_fraction for r in rows if r.gpu_busy_fraction is not None]
        # judged on each step's steady part: its time less the one-time start-up idle
        steady = [
            (r.gpu_busy_us or 0.0) / steady_us(r) if steady_us(r) > 0 else 1.0
            for r in rows
            if r.gpu_busy_fraction is not None
        ]
        med = median(steady)
        worst_row = min(rows, key=lambda r: r.gpu_busy_fraction or 0.0)
        causes = idle_causes(rows)
        idle_total = sum(causes[c] for c in steady_causes)
        share = {c: (v / idle_total if idle_total > 0 else 0.0) for c, v in causes.items()}
        startup = causes["startup"]
        evidence = [
            Evidence("gpu_busy_median", pct(median(busy)), "%"),
            Evidence("gpu_busy_worst_step", pct(worst_row.gpu_busy_fraction), "%"),
            Evidence(
                "idle_per_step_median", round(median([r.idle_us or 0.0 for r in rows]), 1), "µs"
            ),
        ]
        if startup > 0:
            evidence += [
                Evidence("one_time_startup_idle", round(startup, 1), "µs"),
                Evidence("gpu_busy_steady_median", pct(med), "%"),
            ]
        evidence += [Evidence(f"idle_{c}", pct(share[c]), "%") for c in steady_causes]
        evidence.append(Evidence("threshold_busy", pct(GPU_BUSY_WARN_FRACTION), "%"))
        details = tuple(
            f"{r.label}: busy {pct(r.gpu_busy_fraction)} % of {figure(r.duration_us)} µs; idle "
            f"{figure(r.idle_us or 0.0)} µs" + _causes(r.idle_cause_us)
            for r in rows
        )
        top = max(steady_causes, key=lambda c: causes[c])
        apart = f" (one-time start-up set apart: {startup / 1e3:,.1f} ms)" if startup > 0 else ""
        gain = None
        if med >= GPU_BUSY_WARN_FRACTION:
            status, fix = Status.OK, ""
            title = f"GPU busy {pct(med)} % of step time ({step_range(ctx)}){apart}"
        else:
            status = Status.WARN
            title = (
                f"GPU idle {pct(1 - med)} % of step time{apart}; {pct(share[top])} % of that "
                f"idle time {CAUSE_TEXT[top]}"
            )
            fix = cause_fix(ctx, top)
            gain = cause_share(rows, top)
        out.append(
            Finding(
                id="gpu-idle",
                status=status,
                title=title,
                evidence=tuple(evidence),
                fix=fix,
                group=GROUP,
                subject=f"GPU {d}" if many else "",
                details=details,
                gain=gain,
            )
        )
    return out


@rule("launch-bound")
def launch_bound(ctx: TraceContext) -> list[Finding]:
    """The GPU waits for the CPU to queue the next kernel (late launches, HTA's host wait between
    kernels) for a worthwhile share of the step; with the median kernel shorter than its own
    launch call (HTA's "short kernel") the launches themselves are the cost (E9). A CUDA/HIP graph
    replay is one launch for all its kernels."""
    if not ctx.has_gpu:
        return [no_gpu(ctx, "launch-bound", "Kernel launch overhead")]
    few = no_activity(ctx, "launch-bound", "Kernel launch overhead") or capture_skip(
        ctx, "launch-bound", "Kernel launch overhead"
    )
    if few:
        return few
    rows = [r for r in ctx.breakdowns if r.kernels]
    if not rows:
        return [
            Finding(
                id="launch-bound",
                status=Status.SKIPPED,
                title="Kernel launch overhead: skipped: no kernels in the profiled steps",
                group=GROUP,
            )
        ]
    n = len(ctx.steps)
    per_step = median([r.kernels for r in rows])
    k_us = median([r.median_kernel_us for r in rows if r.median_kernel_us is not None])
    launch = [r.median_launch_us for r in rows if r.median_launch_us is not None]
    l_us = median(launch) if launch else None
    graph_k = ctx.graph_kernel_mask & (ctx.gpu_step >= 0) & (ctx.gpu_kind == GPU_KIND_KERNEL)
    graph_calls = np.unique(ctx.gpu_rt[graph_k])
    graphs_per_step = graph_calls.size / max(n, 1)
    # the share of each step (all the steps, kernels or not), as gpu-idle states it
    late_share = cause_share(ctx.breakdowns, "launch")
    evidence = (
        Evidence("kernels_per_step", per_step),
        Evidence("median_kernel", round(k_us, 2), "µs"),
        Evidence("median_launch", None if l_us is None else round(l_us, 2), "µs"),
        Evidence("gpu_waits_for_launch", pct(late_share), "%"),
        Evidence("graph_launches_per_step", round(graphs_per_step, 1)),
        Evidence("threshold", pct(LAUNCH_IDLE_WARN_FRACTION), "%"),
    )
    details = tuple(
        f"{r.label}: {r.kernels} kernel{'' if r.kernels == 1 else 's'}, median kernel "
        f"{figure(r.median_kernel_us or 0, 1)} µs, "
        f"median launch {figure(r.median_launch_us or 0, 1)} µs, GPU waiting for launches "
        f"{figure(r.idle_cause_us.get('launch', 0.0))} µs"
        for r in rows
    )
    if l_us is None and not graph_calls.size:
        return [
            Finding(
                id="launch-bound",
                status=Status.SKIPPED,
                title="Kernel launch overhead: skipped: kernels without launch calls "
                "(no cuda_runtime events with correlation ids)",
                evidence=evidence,
                group=GROUP,
            )
        ]
    short = l_us is not None and k_us < l_us
    if late_share >= LAUNCH_IDLE_WARN_FRACTION:
        fix = remedy(ctx, "launch")  # what fits the run: eager, compiled, or on CUDA graphs
        if not compiled_run(ctx).graphs and per_step >= LAUNCH_MANY_KERNELS_PER_STEP:
            fix += f"; {per_step:.0f} kernels {per(ctx)} is where CUDA graphs help most"
        if short:
            title = (
                f"Launch-bound: the GPU waits for launches {pct(late_share)} % of the step; the "
                f"median kernel ({figure(k_us, 1)} µs) is shorter than its launch "
                f"({figure(l_us or 0.0, 1)} µs)"
            )
        else:
            title = (
                f"The GPU waits {pct(late_share)} % of the step for the CPU to queue the next "
                f"kernel (Python and framework overhead between ops; {per_step:.0f} kernels "
                f"{per(ctx)})"
            )
        busy = median([(r.gpu_busy_us or 0.0) / max(steady_us(r), 1e-9) for r in rows])
        gain = late_share
        # the GPU is busy most of the step already: worth knowing, not the bottleneck
        status = Status.WARN if busy < GPU_BUSY_WARN_FRACTION else Status.INFO
        if status is Status.INFO:
            title = title.replace("Launch-bound: the GPU", "The GPU", 1) + (
                f", though it is busy {pct(busy)} % of the step"
            )
    elif short:
        status, fix, gain = Status.INFO, "", None
        title = (
            f"Median kernel ({figure(k_us, 1)} µs) is shorter than its launch "
            f"({figure(l_us or 0.0, 1)} µs), but "
            f"the GPU waited for launches only {pct(late_share)} % of the step"
        )
    else:
        status, fix, gain = Status.OK, "", None
        if l_us is None:
            title = (
                f"Kernels come from graph replays; the GPU waited for launches {pct(late_share)} %"
            )
        else:
            title = (
                f"Kernels outlast their launches (median {figure(k_us, 1)} µs vs "
                f"{figure(l_us, 1)} µs)"
            )
    return [
        Finding(
            id="launch-bound",
            status=status,
            title=title,
            evidence=evidence,
            fix=fix,
            group=GROUP,
            details=details,
            gain=gain,
        )
    ]
