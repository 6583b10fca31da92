"""What ``gpuprobe pack`` produces: one :class:`PackLevel` per number of copies run at once, what
the machine offers for sharing a GPU (:class:`Sharing`), and the :class:`PackReport` that holds
them with the N to run; plus the thresholds and the core arithmetic that the engine
(:mod:`gpuprobe.tools.monitor.pack`) and the rules (:mod:`gpuprobe.tools.monitor.rules.pack`)
share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, status_counts
from gpuprobe.core.records import Record

__all__ = [
    "CORE_BOUND_MIN_CORES",
    "CORE_CAPACITY_SLACK",
    "GPU_LIGHT_UTIL_PERCENT",
    "PACK_MIN_GAIN",
    "PackCopy",
    "PackLevel",
    "PackReport",
    "Sharing",
    "core_capacity",
    "slowdown_of",
]

# One more level of packing must raise the total throughput by at least this fraction over the
# level recommended so far, or it is not worth the extra memory and latency. gpuprobe's choice
# (the spread of repeated runs on a shared machine is a few per cent).
PACK_MIN_GAIN = 0.10


# A copy that keeps the GPU busy less than this (NVML utilization, %) leaves room for others:
# MPS lets their kernels run at the same time instead of time-slicing. gpuprobe's choice, as
# NVIDIA's MPS overview puts it: for processes that "underutilize the GPU".
GPU_LIGHT_UTIL_PERCENT = 50.0


# How far past the host's cores the copies may reach before a larger N only wins CPU time away from
# other processes on a shared host: N is capped at floor(cores / cores per copy + this). 0.2
# lets a job that measures 1.05 cores alone still pack 2 to a 2-core host.
CORE_CAPACITY_SLACK = 0.2


# A copy using less CPU than this alone (cores) is bound by something else (GPU, I/O): the cores
# do not cap its N.
CORE_BOUND_MIN_CORES = 0.05


@dataclass(frozen=True)
class PackCopy(Record):
    """One copy of the command in one level."""

    index: int
    wall_s: float
    exit_code: int
    cpu_s: float | None = None  # its user + system CPU seconds (wait4 rusage, its children too)
    rate: float | None = None  # the last --rate match in its output
    error: str | None = None  # the last line of its stderr when it failed


@dataclass(frozen=True)
class PackLevel(Record):
    """N copies at once."""

    n: int
    copies: tuple[PackCopy, ...]
    wall_s: float  # first start to last exit
    mean_copy_s: float
    throughput: float | None  # jobs/h, or the summed rate (None: a rate was not found)
    # how much slower each copy ran than at the smallest N (slowdown_of): with --rate, one copy's
    # rate then over one copy's rate now; else the mean copy time over the mean copy time then
    slowdown: float | None = None
    cpu_percent: float | None = None  # the copies' CPU seconds / level wall, % of one core
    host_busy_percent: float | None = None  # mean over cores and samples, 0-100
    tree_cpu_percent: float | None = None  # the copies together, % of one core (mean)
    gpu_util_percent: float | None = None  # mean over GPUs and samples
    gpu_memory_peak: int | None = None  # bytes, the most used on any GPU
    samples: int = 0
    failed: int = 0
    others_cores: float | None = None  # cores other processes kept busy during the level
    unit: str = "jobs/h"  # of throughput: jobs/h, or the unit --rate names ("it/s")
    # what the copies left running when they exited, "pid N: CMD" each; ended with
    # --kill-leftovers, else they ran on through the next levels
    leftovers: tuple[str, ...] = ()
    leftovers_ended: bool = False

    def __repr__(self) -> str:
        return render.repr_(self)


@dataclass(frozen=True)
class Sharing(Record):
    """What this machine offers for sharing a GPU."""

    gpus: int = 0
    gpu_names: tuple[str, ...] = ()
    mig_capable: tuple[int, ...] = ()  # GPU indices that support MIG
    mig_enabled: tuple[int, ...] = ()
    mig_instances: int = 0
    mps_control: str | None = None  # path of nvidia-cuda-mps-control, when installed
    mps_running: bool = False  # its control pipe exists
    driver_note: str | None = None  # why no GPU is seen


@dataclass(frozen=True)
class PackReport(Record):
    """Throughput and slowdown against the number of copies, and the N to run."""

    command: tuple[str, ...]
    levels: tuple[PackLevel, ...]
    unit: str  # "jobs/h", or the unit the --rate pattern names ("it/s"), summed over copies
    recommended: int | None
    cores: int
    load_average: tuple[float, float, float] | None = None  # before the first level
    sharing: Sharing = field(default_factory=Sharing)
    rate_regex: str | None = None
    findings: tuple[Finding, ...] = ()

    def __str__(self) -> str:
        return render.text(self)

    def __repr__(self) -> str:
        n = "none" if self.recommended is None else str(self.recommended)
        return (
            f"<PackReport {len(self.levels)} levels of {' '.join(self.command)[:60]}: run {n} "
            f"at once; findings: {status_counts(self.findings)}>"
        )

    def _repr_html_(self) -> str:
        return render.html(self)


def core_capacity(levels: Sequence[PackLevel], cores: int | None) -> int | None:
    """How many copies the host's cores hold, from what one copy alone used (the smallest level's
    CPU seconds per wall second). None when that is unknown or a copy hardly uses the CPU."""
    one = min(levels, key=lambda lv: lv.n, default=None)
    if one is None or not cores or one.cpu_percent is None:
        return None
    per_copy = one.cpu_percent / 100.0 / one.n
    if per_copy < CORE_BOUND_MIN_CORES:
        return None
    return max(1, math.floor(cores / per_copy + CORE_CAPACITY_SLACK))


def slowdown_of(level: PackLevel, base: PackLevel, rated: bool) -> float | None:
    """How much slower each copy of ``level`` ran than each copy of ``base`` (the smallest N).
    With a rate (``--rate``, ``rated``), the rate is the measure, not the wall time (a job that
    runs for a fixed time, or prints its own rate after a warm-up, takes as long at any N): one
    copy's rate at ``base`` over one copy's rate at ``level`` (7.0 M vs 5.19 M samples/s per
    copy: 1.35, each copy 26 % slower); None where either rate was not found. Without a rate,
    the mean copy time over ``base``'s."""
    if rated:
        if not level.throughput or not base.throughput:
            return None
        return (base.throughput / base.n) / (level.throughput / level.n)
    return level.mean_copy_s / base.mean_copy_s if base.mean_copy_s > 0 else None
