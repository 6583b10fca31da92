"""Helpers shared by the rule modules: per-step statistics and the common shapes of findings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.model import StepBreakdown

__all__ = [
    "CAPTURE_SKIP_FRACTION",
    "GROUP",
    "as_information",
    "capture_skip",
    "cause_share",
    "median",
    "no_activity",
    "no_gpu",
    "no_gpu_text",
    "pct",
    "per_step",
    "rows_for",
    "steady_steps",
    "steady_total",
    "steady_us",
    "step_range",
]

GROUP = "diagnose"
CAPTURE_SKIP_FRACTION = 0.5  # of the analysed time, or of its kernel launches, in graph capture,
# past which GPU idle time and syncs are not judged (those launches are recorded, not run); ours


def median(values: Sequence[float] | np.ndarray) -> float:
    """Median (0.0 for no values)."""
    return float(np.median(np.asarray(values, dtype=float))) if len(values) else 0.0


def pct(x: float | None) -> float | None:
    """A fraction as a percentage rounded to 0.1."""
    return None if x is None else round(100.0 * x, 1)


def rows_for(ctx: TraceContext, device: int | None) -> list[StepBreakdown]:
    """The breakdown rows of one device (all rows when ``device`` is None)."""
    return [b for b in ctx.breakdowns if device is None or b.device == device]


def step_range(ctx: TraceContext) -> str:
    """``"steps 3..7"``, ``"step 3"`` or ``"whole trace"``: what the numbers cover."""
    nums = [s.number for s in ctx.steps if s.number is not None]
    if not nums:
        return "whole trace"
    return f"step {nums[0]}" if len(nums) == 1 else f"steps {nums[0]}..{nums[-1]}"


def per_step(ctx: TraceContext) -> str:
    """``"per step"``, or ``"in the trace"`` when it has no ProfilerStep (one window)."""
    return "per step" if any(s.number is not None for s in ctx.steps) else "in the trace"


def no_gpu(ctx: TraceContext, id: str, what: str) -> Finding:
    """The finding of a GPU rule on a trace without GPU activity: a CPU-only run, or (when the
    host launched kernels) a GPU run whose GPU side the profiler did not record."""
    launches = int(ctx.kernel_launch_mask.sum())
    if launches:
        return Finding(
            id=id,
            status=Status.SKIPPED,
            title=f"{what}: skipped: the host launched {launches} kernels but the trace has no "
            "GPU activity (kernels, copies): the profiler did not record the GPU side",
            evidence=(Evidence("gpu_activities", 0), Evidence("kernel_launches", launches)),
            fix="record again with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]; "
            "if kernels are still missing, CUPTI could not trace (another profiler such as "
            "Nsight attached, or a CUPTI/driver mismatch)",
            group=GROUP,
        )
    if ctx.accelerator:
        return Finding(
            id=id,
            status=Status.SKIPPED,
            title=f"{what}: skipped: an {ctx.accelerator} trace: its device activity is not "
            "read (only GPU kernels and copies are)",
            evidence=(Evidence("gpu_activities", 0), Evidence("accelerator", ctx.accelerator)),
            group=GROUP,
        )
    return Finding(
        id=id,
        status=Status.SKIPPED,
        title=f"{what}: skipped: no GPU events in the trace",
        evidence=(Evidence("gpu_activities", 0),),
        fix="profile with ProfilerActivity.CUDA on a machine with a GPU to judge this",
        group=GROUP,
    )


def no_gpu_text(ctx: TraceContext) -> str:
    """Why a trace without GPU activity has none, in a few words: a CPU-only trace, or an
    accelerator trace whose device activity is not read."""
    if ctx.accelerator:
        return f"an {ctx.accelerator} trace: its device activity is not read"
    return "CPU-only trace"


def capture_skip(ctx: TraceContext, id: str, what: str) -> list[Finding]:
    """A skipped finding when the analysed steps are mostly CUDA/HIP graph capture (by time or
    by kernel launches): the kernels launched then are recorded, not run, so the idle GPU (and
    the syncs around each capture) say nothing of the workload's steady state."""
    share = ctx.capture_share
    n, launches = ctx.captured_launches
    launch_share = n / launches if launches else 0.0
    if max(share, launch_share) < CAPTURE_SKIP_FRACTION:
        return []
    return [
        Finding(
            id=id,
            status=Status.SKIPPED,
            title=f"{what}: skipped: the profile is mostly CUDA-graph capture ({pct(share)} % "
            f"of its time; {n} of {launches} kernel launches recorded into graphs, not run on "
            "the GPU)",
            evidence=(
                Evidence("graph_capture_share", pct(share), "%"),
                Evidence("captured_launches", n),
                Evidence("kernel_launches", launches),
                Evidence("threshold", pct(CAPTURE_SKIP_FRACTION), "%"),
            ),
            fix="profile the graph replays: start the profiler after capture and warm-up "
            "(torch.profiler.schedule(wait=..., warmup=1, active=3) over the serving steps)",
            group=GROUP,
        )
    ]


def no_activity(ctx: TraceContext, id: str, what: str) -> list[Finding]:
    """A skipped finding when the analysed steps launched no GPU work at all."""
    if (ctx.gpu_step >= 0).any():
        return []
    return [
        Finding(
            id=id,
            status=Status.SKIPPED,
            title=f"{what}: skipped: no GPU activity in the analysed steps",
            evidence=(Evidence("gpu_activities", 0),),
            fix="profile steps that run on the GPU (--steps N..M picks them)",
            group=GROUP,
        )
    ]


def steady_steps(ctx: TraceContext) -> np.ndarray:
    """Each step's steady time: its duration (on the GPU's side when the GPU lags the CPU)
    less its one-time start-up idle (µs)."""
    return np.maximum(ctx.timed_durations - ctx.idle_of_cause("startup"), 1e-9)


def steady_total(ctx: TraceContext) -> float:
    """The analysed steps' steady time in all (µs): what every gain is a share of."""
    return float(steady_steps(ctx).sum()) if len(ctx.steps) else 0.0


def steady_us(r: StepBreakdown) -> float:
    """A step's duration less its one-time start-up idle: the time the steady-state rules judge."""
    return max(r.duration_us - r.idle_cause_us.get("startup", 0.0), 0.0)


def cause_share(rows: Sequence[StepBreakdown], cause: str) -> float:
    """The median over ``rows`` of a cause's idle time as a share of the row's steady time
    (:func:`steady_us`): the share and the gain the rules state for it."""
    return median([r.idle_cause_us.get(cause, 0.0) / max(steady_us(r), 1e-9) for r in rows])


def as_information(
    findings: Sequence[Finding], note: str, which: Callable[[Finding], bool]
) -> list[Finding]:
    """``findings`` with each warning that ``which`` picks made information, ``note`` (why)
    first among its details; the others as they are."""
    return [
        replace(f, status=Status.INFO, details=(note, *f.details))
        if f.status is Status.WARN and which(f)
        else f
        for f in findings
    ]
