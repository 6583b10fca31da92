"""The GPUs: whether any was recorded and used, and how busy each one the command used was.

Utilization is NVML's ``utilization.gpu``: the share of time any kernel ran. E-codes name the
experiments in ``docs/experiments.md`` (``docs/experiments.md#e10``: the "good" graph).
"""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.monitor.rules._common import GROUP, enough_samples, gpu_label, gpu_subject
from gpuprobe.tools.monitor.summary import GpuStats, RunContext, round_pct

__all__ = [
    "GPU_BUSY_OK_PERCENT",
    "GPU_BUSY_WARN_PERCENT",
    "SHARED_MEMORY_BYTES",
    "SHARED_SM_PERCENT",
    "gpu_busy",
    "gpu_presence",
    "gpu_shared",
]

SHARED_SM_PERCENT = 10.0  # others' mean SM %, past which the card was shared in earnest; ours
SHARED_MEMORY_BYTES = 2**30  # others' peak memory on the card (1 GiB); ours
GPU_BUSY_OK_PERCENT = 80.0  # mean utilization.gpu, %; E10's "good" graph stays near 100 %
GPU_BUSY_WARN_PERCENT = (
    50.0  # mean utilization.gpu, %; Nsight/torch-tb-profiler flag GPU busy < 50 %
)


@rule("monitor-no-gpu", "monitor-gpu-unused", applies=enough_samples)
def gpu_presence(ctx: RunContext) -> list[Finding]:
    """``monitor-no-gpu`` (no GPU recorded: the host alone) or ``monitor-gpu-unused`` (GPUs
    recorded, none used by the command)."""
    header = ctx.timeline.header
    if not ctx.gpu_recorded:
        return [
            Finding(
                id="monitor-no-gpu",
                status=Status.INFO,
                title="No GPU recorded: "
                + (header.driver.error or header.driver.status)
                + "; the host alone was recorded",
                evidence=(Evidence("driver_status", header.driver.status, ""),),
                fix="Run `gpuprobe doctor` if this machine should have a working NVIDIA GPU",
                group=GROUP,
                subject="gpu",
            )
        ]
    if any(g.used_by_command for g in ctx.gpus):
        return []
    return [
        Finding(
            id="monitor-gpu-unused",
            status=Status.WARN,
            title=f"{ctx.command} used none of the {len(ctx.gpus)} GPU(s)",
            evidence=tuple(Evidence(f"gpu{g.index}_util_max", g.util_p90, "%") for g in ctx.gpus),
            fix="Check that the job moves its model and data to the GPU (.to('cuda')) "
            "and that `gpuprobe doctor` passes",
            group=GROUP,
            subject="gpu",
        )
    ]


@rule("monitor-gpu-busy")
def gpu_busy(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-busy``: the GPU's mean utilization over the run (ok from
    :data:`GPU_BUSY_OK_PERCENT`, a warning below :data:`GPU_BUSY_WARN_PERCENT`)."""
    u = st.util_mean
    if u is None:
        return []
    status = (
        Status.OK
        if u >= GPU_BUSY_OK_PERCENT
        else Status.INFO
        if u >= GPU_BUSY_WARN_PERCENT
        else Status.WARN
    )
    return [
        Finding(
            id="monitor-gpu-busy",
            status=status,
            title=f"{gpu_label(st)} busy {u:.0f}% of the run",
            evidence=(
                Evidence("util_mean", u, "%"),
                Evidence("util_median", st.util_median, "%"),
                Evidence("util_p90", st.util_p90, "%"),
                Evidence("idle_fraction", round_pct(100 * (st.idle_fraction or 0)), "%"),
                Evidence("samples", st.samples, ""),
            ),
            fix=""
            if status is Status.OK
            else (
                "See what the GPU waits for below; profile a few steps (torch.profiler) "
                "and read the trace with gpuprobe diagnose"
            ),
            group=GROUP,
            subject=gpu_subject(st),
            details=(
                "NVML utilization is the share of time any kernel ran, not how much of the "
                "GPU it used: 100 % can still be a small fraction of the card's peak.",
            ),
        )
    ]


@rule("monitor-gpu-shared")
def gpu_shared(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-shared`` (warning): other processes than the command's used the card it
    used: :data:`SHARED_SM_PERCENT` of its SMs on average or :data:`SHARED_MEMORY_BYTES` of its
    memory; the command's own share beside theirs (NVML's per-process lists)."""
    sm, mem = st.others_sm_mean, st.others_memory_peak
    if not st.others_pids or not (
        (sm or 0) >= SHARED_SM_PERCENT or (mem or 0) >= SHARED_MEMORY_BYTES
    ):
        return []

    def gib(b: int | None) -> str:
        return "n/a" if b is None else f"{b / 2**30:.1f} GiB"

    def pc(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.0f} %"

    pids = ", ".join(str(p) for p in st.others_pids)
    return [
        Finding(
            id="monitor-gpu-shared",
            status=Status.WARN,
            title=f"{gpu_label(st)} was shared: the command's processes used {pc(st.command_sm_mean)} "
            f"of its SMs and {gib(st.command_memory_peak)}, other processes {pc(sm)} and "
            f"{gib(mem)} (pid {pids})",
            evidence=(
                Evidence("command_sm_mean", st.command_sm_mean, "%"),
                Evidence("others_sm_mean", sm, "%"),
                Evidence("command_memory_peak", st.command_memory_peak, "B"),
                Evidence("others_memory_peak", mem, "B"),
            ),
            fix="run it on a card of its own (CUDA_VISIBLE_DEVICES), or share on purpose with "
            "MPS or MIG; gpuprobe pack measures what sharing one card costs",
            group=GROUP,
            subject=gpu_subject(st),
        )
    ]
