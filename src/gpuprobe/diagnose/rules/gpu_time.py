"""GPU time: how busy the GPU was in each step, why it was idle (HTA's host wait / kernel wait /
other), and whether it waited on kernel launches (many kernels shorter than their launch: E9).
"""

from __future__ import annotations

from gpuprobe.diagnose.analysis import KERNEL_WAIT_MAX_GAP_US, TraceContext
from gpuprobe.diagnose.rules._common import GROUP, median, no_gpu, pct, rows_for, step_range
from gpuprobe.findings import Evidence, Finding, Status

__all__ = [
    "GPU_BUSY_WARN_FRACTION",
    "HOST_WAIT_DOMINANT_FRACTION",
    "LAUNCH_MANY_KERNELS_PER_STEP",
    "gpu_idle",
    "launch_bound",
]

GPU_BUSY_WARN_FRACTION = 0.5  # of profiled step time; Nsight gpu_time_util and torch-tb-profiler
HOST_WAIT_DOMINANT_FRACTION = 0.5  # of the idle time (HTA categories); ours
LAUNCH_MANY_KERNELS_PER_STEP = 1000  # kernels per step where CUDA graphs pay off; ours


def _idle_split(rows: list) -> tuple[float, float, float]:
    host = sum(r.host_wait_us or 0.0 for r in rows)
    kern = sum(r.kernel_wait_us or 0.0 for r in rows)
    other = sum(r.other_wait_us or 0.0 for r in rows)
    total = host + kern + other
    if total <= 0:
        return 0.0, 0.0, 0.0
    return host / total, kern / total, other / total


def gpu_idle(ctx: TraceContext) -> list[Finding]:
    """GPU busy fraction per step (kernels ∪ memcpy ∪ memset) and the idle time's causes."""
    if not ctx.has_gpu:
        return [no_gpu("gpu-idle", "GPU busy time")]
    out = []
    many = len(ctx.devices) > 1
    for d in ctx.devices:
        rows = rows_for(ctx, d)
        busy = [r.gpu_busy_fraction for r in rows if r.gpu_busy_fraction is not None]
        med = median(busy)
        worst_row = min(rows, key=lambda r: r.gpu_busy_fraction or 0.0)
        host, kern, other = _idle_split(rows)
        evidence = (
            Evidence("gpu_busy_median", pct(med), "%"),
            Evidence("gpu_busy_worst_step", pct(worst_row.gpu_busy_fraction), "%"),
            Evidence(
                "idle_per_step_median", round(median([r.idle_us or 0.0 for r in rows]), 1), "µs"
            ),
            Evidence("idle_host_wait", pct(host), "%"),
            Evidence("idle_kernel_wait", pct(kern), "%"),
            Evidence("idle_other", pct(other), "%"),
            Evidence("threshold_busy", pct(GPU_BUSY_WARN_FRACTION), "%"),
        )
        details = tuple(
            f"{r.label}: busy {pct(r.gpu_busy_fraction)} % of {r.duration_us:.0f} µs; idle "
            f"{r.idle_us or 0.0:.0f} µs (host wait {r.host_wait_us or 0.0:.0f}, kernel wait "
            f"{r.kernel_wait_us or 0.0:.0f}, other {r.other_wait_us or 0.0:.0f} µs)"
            for r in rows
        )
        if med >= GPU_BUSY_WARN_FRACTION:
            status, title = Status.OK, f"GPU busy {pct(med)} % of step time ({step_range(ctx)})"
            fix = ""
        else:
            status = Status.WARN
            if host >= HOST_WAIT_DOMINANT_FRACTION:
                cause = "mostly waiting for the CPU to launch work (host wait)"
                fix = (
                    "make the host faster than the GPU: see the launch, input and sync findings; "
                    "larger batches, DataLoader(num_workers>0), fewer .item() calls, "
                    "torch.compile or CUDA graphs"
                )
            elif kern >= other:
                cause = f"mostly gaps under {KERNEL_WAIT_MAX_GAP_US:.0f} µs between kernels"
                fix = "fuse small kernels: torch.compile(model), or larger tensors per kernel"
            else:
                cause = "mostly long gaps with work queued (syncs, copies, other streams)"
                fix = "look at the sync and copy findings; overlap copies with compute"
            title = f"GPU idle {pct(1 - med)} % of step time, {cause}"
        out.append(
            Finding(
                id="gpu-idle",
                status=status,
                title=title,
                evidence=evidence,
                fix=fix,
                group=GROUP,
                subject=f"GPU {d}" if many else "",
                details=details,
            )
        )
    return out


def launch_bound(ctx: TraceContext) -> list[Finding]:
    """Many short kernels: the median kernel runs shorter than its own launch call (HTA's
    "short kernel"), so the GPU finishes each before the CPU can queue the next (E9)."""
    if not ctx.has_gpu:
        return [no_gpu("launch-bound", "Kernel launch overhead")]
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
    per_step = median([r.kernels for r in rows])
    k_us = median([r.median_kernel_us for r in rows if r.median_kernel_us is not None])
    launch = [r.median_launch_us for r in rows if r.median_launch_us is not None]
    l_us = median(launch) if launch else None
    busy = median([r.gpu_busy_fraction for r in rows if r.gpu_busy_fraction is not None])
    host, _, _ = _idle_split(rows)
    evidence = (
        Evidence("kernels_per_step", per_step),
        Evidence("median_kernel", round(k_us, 2), "µs"),
        Evidence("median_launch", None if l_us is None else round(l_us, 2), "µs"),
        Evidence("gpu_busy_median", pct(busy), "%"),
        Evidence("idle_host_wait", pct(host), "%"),
    )
    details = tuple(
        f"{r.label}: {r.kernels} kernels, median kernel {r.median_kernel_us or 0:.1f} µs, "
        f"median launch {r.median_launch_us or 0:.1f} µs"
        for r in rows
    )
    if l_us is None:
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
    if k_us < l_us and busy < GPU_BUSY_WARN_FRACTION:
        fix = (
            "give each kernel more work: a larger batch; fuse ops with torch.compile(model); "
            "capture the step in a CUDA graph (torch.compile(mode='reduce-overhead'))"
        )
        if per_step >= LAUNCH_MANY_KERNELS_PER_STEP:
            fix += f"; {per_step:.0f} kernels per step is where CUDA graphs help most"
        return [
            Finding(
                id="launch-bound",
                status=Status.WARN,
                title=f"Launch-bound: median kernel {k_us:.1f} µs is shorter than its "
                f"{l_us:.1f} µs launch ({per_step:.0f} kernels per step)",
                evidence=evidence,
                fix=fix,
                group=GROUP,
                details=details,
            )
        ]
    return [
        Finding(
            id="launch-bound",
            status=Status.OK,
            title=f"Kernels outlast their launches (median {k_us:.1f} µs vs {l_us:.1f} µs)",
            evidence=evidence,
            group=GROUP,
            details=details,
        )
    ]
