"""Starvation: why a mostly idle GPU waited on the CPU: the command's main thread, its worker
processes, or the whole host.

A GPU is starved when at least :data:`STARVED_MIN_FRACTION` of its samples are mostly idle
(below :data:`~gpuprobe.tools.monitor.summary.GPU_IDLE_SAMPLE_PERCENT`); each rule then reads the host
in those idle samples only. E-codes name the experiments in ``docs/experiments.md``
(``docs/experiments.md#e9``: GPU 7 %, CPU 70 %, one busy core; ``docs/experiments.md#e10``:
per-sample Python loops).
"""

from __future__ import annotations

import statistics

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.monitor.records import Sample, TreeSample
from gpuprobe.tools.monitor.rules._common import GROUP, gpu_subject
from gpuprobe.tools.monitor.summary import (
    PEGGED_THREAD_PERCENT,
    GpuStats,
    RunContext,
    round_pct,
    thread_demand,
)

__all__ = [
    "HOST_SATURATED_PERCENT",
    "LOADER_SATURATED_PERCENT",
    "ONE_THREAD_MAX_CORES",
    "PEGGED_MIN_FRACTION",
    "STARVED_MIN_FRACTION",
    "starved_by_host",
    "starved_by_loaders",
    "starved_by_main_thread",
]

STARVED_MIN_FRACTION = 0.5  # of the GPU's samples mostly idle before it is called starved
PEGGED_MIN_FRACTION = 0.5  # of the idle samples in which the main thread is pegged
# A pegged main thread limits a command only when the command used little more than that one
# core: at most this many cores on average (its core plus a quarter of one for the rest:
# gpuprobe's choice). A run that used 1.6 of 2 cores was using the others too; "one core pegged,
# vectorise" would be wrong there (issue 27).
ONE_THREAD_MAX_CORES = 1.25
LOADER_SATURATED_PERCENT = 85.0  # mean % of one core per worker process; PyTorch DataLoader workers
HOST_SATURATED_PERCENT = 90.0  # mean % over all cores; nothing left to feed the GPU


def _starved(ctx: RunContext, st: GpuStats) -> bool:
    """The ``applies`` of the starvation rules: the GPU was mostly idle in at least
    :data:`STARVED_MIN_FRACTION` of its samples (else there is nothing to explain)."""
    return bool(st.samples) and (st.idle_fraction or 0) >= STARVED_MIN_FRACTION


def _idle(ctx: RunContext, st: GpuStats) -> tuple[Sample, ...]:
    """The GPU's mostly idle samples."""
    return ctx.idle_samples.get(st.index, ())


def _trees(idle: tuple[Sample, ...]) -> list[TreeSample]:
    return [s.tree for s in idle if s.tree is not None]


def _gpu_evidence(st: GpuStats) -> tuple[Evidence, Evidence]:
    return (
        Evidence("gpu_util_mean", st.util_mean, "%"),
        Evidence("gpu_idle_fraction", round(100 * (st.idle_fraction or 0), 1), "%"),
    )


@rule("monitor-gpu-starved-main-thread", applies=_starved)
def starved_by_main_thread(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-starved-main-thread``: one thread of the main process pegged a core in at
    least :data:`PEGGED_MIN_FRACTION` of the GPU's idle samples (E9), while the command used at
    most :data:`ONE_THREAD_MAX_CORES` cores in them."""
    idle = _idle(ctx, st)
    trees = _trees(idle)
    tops = [t.main_thread_max_percent for t in trees if t.main_thread_max_percent is not None]
    demand = [d for d in map(thread_demand, trees) if d is not None]
    pegged = sum(x >= PEGGED_THREAD_PERCENT for x in demand) / len(demand) if demand else 0.0
    if not tops or pegged < PEGGED_MIN_FRACTION:
        return []
    cores = ctx.host.cores
    cores_used = statistics.fmean(t.cpu_percent for t in trees) / 100
    if cores_used > ONE_THREAD_MAX_CORES:  # other threads or processes worked too
        return []
    return [
        Finding(
            id="monitor-gpu-starved-main-thread",
            status=Status.WARN,
            title=f"GPU {st.index} waited on the CPU: mostly idle while one thread of the "
            f"command's main process pegged a core",
            evidence=(
                *_gpu_evidence(st),
                Evidence("main_thread_pegged_fraction", round(100 * pegged, 1), "%"),
                Evidence("main_thread_cpu_mean", round_pct(statistics.fmean(tops)), "%"),
                Evidence("main_thread_wants_mean", round_pct(statistics.fmean(demand)), "%"),
                Evidence("command_cores_used", round(cores_used, 2), "cores"),
                Evidence("host_cores", cores, "cores"),
            ),
            fix="Feed the GPU from more than one core: DataLoader(dataset, num_workers="
            f"{max(1, (cores or 2) - 1)}, pin_memory=True, persistent_workers=True); "
            "vectorise per-sample Python loops (E10) and keep .item()/print() out of the step",
            group=GROUP,
            subject=gpu_subject(st),
            details=(
                "One Python thread can run on one core only; while it is busy preparing "
                "batches the GPU has nothing to do (E9: GPU 7 %, CPU 70 %).",
            ),
        )
    ]


@rule("monitor-gpu-starved-loaders", applies=_starved)
def starved_by_loaders(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-starved-loaders``: the command's worker processes averaged at least
    :data:`LOADER_SATURATED_PERCENT` of a core each in the GPU's idle samples."""
    idle = _idle(ctx, st)
    kids = [t.children for t in _trees(idle) if t.children]
    if not kids:
        return []
    per_worker = [statistics.fmean(c.cpu_percent for c in ch) for ch in kids]
    mean_worker = statistics.fmean(per_worker)
    if mean_worker < LOADER_SATURATED_PERCENT:
        return []
    cores = ctx.host.cores
    workers = max(len(ch) for ch in kids)
    return [
        Finding(
            id="monitor-gpu-starved-loaders",
            status=Status.WARN,
            title=f"GPU {st.index} waited on the CPU: mostly idle while the command's "
            f"{workers} worker process(es) were saturated",
            evidence=(
                *_gpu_evidence(st),
                Evidence("workers", workers, ""),
                Evidence("worker_cpu_mean", round(mean_worker, 1), "%"),
                Evidence("host_cores", cores, "cores"),
            ),
            fix=(
                f"Give loading more cores (DataLoader num_workers up to {cores}) "
                "or make each sample cheaper: decode once and cache tensors, move "
                "augmentation to the GPU"
                if workers < cores
                else "Every core is loading data: make each sample cheaper (decode once "
                "and cache tensors, augment on the GPU) or use a machine with more cores"
            ),
            group=GROUP,
            subject=gpu_subject(st),
        )
    ]


@rule("monitor-gpu-starved-host", applies=_starved)
def starved_by_host(ctx: RunContext, st: GpuStats) -> list[Finding]:
    """``monitor-gpu-starved-host``: every core of the host busy (mean at least
    :data:`HOST_SATURATED_PERCENT`) in the GPU's idle samples."""
    idle = _idle(ctx, st)
    hosts = [statistics.fmean(s.host.cpu_percent) for s in idle if s.host.cpu_percent]
    if not hosts or statistics.fmean(hosts) < HOST_SATURATED_PERCENT:
        return []
    return [
        Finding(
            id="monitor-gpu-starved-host",
            status=Status.WARN,
            title=f"GPU {st.index} mostly idle while every core of the host was busy",
            evidence=(
                *_gpu_evidence(st),
                Evidence("host_cpu_mean", round(statistics.fmean(hosts), 1), "%"),
                Evidence("host_cores", ctx.host.cores, "cores"),
            ),
            fix="Find what else uses the cores (gpuprobe top); cheapen the input pipeline or "
            "run on a host with more cores per GPU",
            group=GROUP,
            subject=gpu_subject(st),
        )
    ]
