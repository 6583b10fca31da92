"""Memory: each used GPU's peak against its capacity, the command's host memory (RSS) growing
after warm-up, and the host running short of memory.

E-codes name the experiments in ``docs/experiments.md`` (``docs/experiments.md#e2``: out of
memory; ``docs/experiments.md#e9``: a card with room for a bigger batch).
"""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.core.units import gib_value
from gpuprobe.tools.monitor.rules._common import GROUP, enough_samples, gpu_label, gpu_subject
from gpuprobe.tools.monitor.rules.gpu import GPU_BUSY_WARN_PERCENT
from gpuprobe.tools.monitor.summary import GpuStats, RunContext

__all__ = [
    "GPU_MEMORY_LOW_FRACTION",
    "GPU_MEMORY_NEAR_FULL_FRACTION",
    "HOST_MEMORY_GROWTH_MIN_BYTES",
    "HOST_MEMORY_GROWTH_MIN_FRACTION",
    "HOST_MEMORY_LOW_FRACTION",
    "gpu_memory",
    "host_memory_growing",
    "host_memory_low",
]

GPU_MEMORY_NEAR_FULL_FRACTION = 0.95  # of capacity; the next allocation may fail (E2's OOM)
GPU_MEMORY_LOW_FRACTION = 0.25  # of capacity, with low utilization: room for a bigger batch (E9)
HOST_MEMORY_GROWTH_MIN_BYTES = 512 * 2**20  # bytes of RSS growth after warm-up; a leak, not noise
HOST_MEMORY_GROWTH_MIN_FRACTION = 0.5  # RSS growth after warm-up relative to the warm-up RSS
HOST_MEMORY_LOW_FRACTION = 0.05  # available / total; the kernel starts swapping or OOM-killing


@rule("monitor-gpu-memory")
def gpu_memory(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-memory``: the GPU's peak memory against its capacity (a warning from
    :data:`GPU_MEMORY_NEAR_FULL_FRACTION`; room to grow below :data:`GPU_MEMORY_LOW_FRACTION`
    on a GPU busy less than :data:`~gpuprobe.tools.monitor.rules.gpu.GPU_BUSY_WARN_PERCENT`)."""
    if st.memory_peak is None or not st.memory_total:
        return []
    frac = st.memory_peak / st.memory_total
    if frac >= GPU_MEMORY_NEAR_FULL_FRACTION:
        status, fix = (
            Status.WARN,
            (
                "Leave headroom: lower the batch size, use bf16 autocast, or "
                "torch.utils.checkpoint; the next allocation may run out of memory"
            ),
        )
    elif frac < GPU_MEMORY_LOW_FRACTION and (st.util_mean or 0) < GPU_BUSY_WARN_PERCENT:
        status, fix = (
            Status.INFO,
            ("The card has room: a larger batch (and learning rate) may keep it busier"),
        )
    else:
        status, fix = Status.OK, ""
    return [
        Finding(
            id="monitor-gpu-memory",
            status=status,
            title=f"{gpu_label(st)} memory peak {gib_value(st.memory_peak)} of "
            f"{gib_value(st.memory_total)} GiB ({100 * frac:.0f}%)",
            evidence=(
                Evidence("memory_peak", gib_value(st.memory_peak), "GiB"),
                Evidence("memory_total", gib_value(st.memory_total), "GiB"),
                Evidence("memory_peak_fraction", round(100 * frac, 1), "%"),
            ),
            fix=fix,
            group=GROUP,
            subject=gpu_subject(st),
        )
    ]


@rule("monitor-host-memory-growing", applies=enough_samples)
def host_memory_growing(ctx: RunContext) -> list[Finding]:
    """``monitor-host-memory-growing``: the command's RSS grew by at least
    :data:`HOST_MEMORY_GROWTH_MIN_BYTES` and :data:`HOST_MEMORY_GROWTH_MIN_FRACTION` after
    warm-up and ended near its peak (a leak, not a spike)."""
    host = ctx.host
    if host.rss_start is None or host.rss_end is None or host.rss_peak is None:
        return []
    growth = host.rss_end - host.rss_start
    if not (
        growth >= HOST_MEMORY_GROWTH_MIN_BYTES
        and growth >= HOST_MEMORY_GROWTH_MIN_FRACTION * max(host.rss_start, 1)
        and host.rss_end >= 0.9 * host.rss_peak
    ):
        return []
    return [
        Finding(
            id="monitor-host-memory-growing",
            status=Status.WARN,
            title=f"The command's host memory grew {gib_value(growth)} GiB after warm-up "
            f"and did not come back",
            evidence=(
                Evidence("rss_after_warmup", gib_value(host.rss_start), "GiB"),
                Evidence("rss_end", gib_value(host.rss_end), "GiB"),
                Evidence("rss_peak", gib_value(host.rss_peak), "GiB"),
            ),
            fix="Look for tensors kept across steps (append loss.item(), not loss; "
            "detach() what you log) and caches that only grow; tracemalloc shows where",
            group=GROUP,
            subject="host",
        )
    ]


@rule("monitor-host-memory-low", applies=enough_samples)
def host_memory_low(ctx: RunContext) -> list[Finding]:
    """``monitor-host-memory-low``: the host's available memory fell below
    :data:`HOST_MEMORY_LOW_FRACTION` of its total."""
    host = ctx.host
    if host.memory_available_min is None or not host.memory_total:
        return []
    frac = host.memory_available_min / host.memory_total
    if frac >= HOST_MEMORY_LOW_FRACTION:
        return []
    return [
        Finding(
            id="monitor-host-memory-low",
            status=Status.WARN,
            title=f"The host ran low on memory: {100 * frac:.1f}% available at worst",
            evidence=(
                Evidence("memory_available_min", gib_value(host.memory_available_min), "GiB"),
                Evidence("memory_total", gib_value(host.memory_total), "GiB"),
            ),
            fix="Use fewer or lighter workers (each DataLoader worker copies the "
            "dataset object), memory-map data, or add memory",
            group=GROUP,
            subject="host",
        )
    ]
