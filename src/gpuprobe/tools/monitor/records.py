"""What one sample holds: the host's cores and memory, the watched process tree, and each GPU.

Units: seconds since the epoch for ``t``, percent of ONE core for process CPU (200 = two cores
busy), percent of each core for the host, bytes for memory, bytes per second for I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuprobe.core.records import Record
from gpuprobe.platform.hardware.types import Driver, Gpu, GpuSample, Host

__all__ = [
    "TIMELINE_SCHEMA",
    "TIMELINE_VERSION",
    "GpuProcSample",
    "GpuTick",
    "HostSample",
    "ProcSample",
    "Sample",
    "TimelineHeader",
    "TreeSample",
]

TIMELINE_SCHEMA = "gpuprobe.timeline"
TIMELINE_VERSION = 1


@dataclass(frozen=True)
class HostSample(Record):
    """The whole host at one instant; CPU over the interval since the previous sample."""

    cpu_percent: tuple[float, ...] = ()  # per logical core, 0-100
    memory_used: int | None = None  # bytes (psutil virtual_memory().used)
    memory_available: int | None = None  # bytes
    swap_used: int | None = None  # bytes


@dataclass(frozen=True)
class ProcSample(Record):
    """One process of the watched tree (not the main one)."""

    pid: int
    cpu_percent: float  # % of one core since the previous sample
    rss: int | None = None  # bytes
    threads: int | None = None


@dataclass(frozen=True)
class TreeSample(Record):
    """The watched command's process tree: the main process and all its descendants."""

    cpu_percent: float = 0.0  # sum over the tree, % of one core
    rss: int = 0  # bytes, summed (shared pages count once per process, as in `ps`)
    threads: int = 0
    processes: int = 0
    read_bps: float | None = None  # bytes/s through read() and friends (Linux rchar)
    write_bps: float | None = None  # bytes/s through write() and friends (Linux wchar)
    main_cpu_percent: float = 0.0  # the main process alone
    main_thread_max_percent: float | None = None  # its busiest thread, % of one core
    # that thread's time running or waiting for a core (Linux schedstat), % of wall time: ~100
    # when it always wants a core, even while other processes take the core from it
    main_thread_runnable_percent: float | None = None
    children: tuple[ProcSample, ...] = ()


@dataclass(frozen=True)
class GpuProcSample(Record):
    """A process on a GPU at one instant. The sampler reads both lazily and carries them between
    reads (see :mod:`gpuprobe.tools.monitor.sampler`): the list and its memory when the card's used
    memory changed (at least every ``PROCESS_LIST_MAX_AGE_S``), the SM % every
    ``PROCESS_UTIL_PERIOD_S``."""

    pid: int
    used_memory: int | None = None  # bytes
    # mean smUtil of nvmlDeviceGetProcessUtilization's samples since the read before
    sm_percent: int | None = None


@dataclass(frozen=True)
class GpuTick(Record):
    """One GPU at one instant: NVML's reading and the processes on it."""

    sample: GpuSample
    processes: tuple[GpuProcSample, ...] = ()


@dataclass(frozen=True)
class Sample(Record):
    """One tick of the sampler."""

    t: float  # seconds since the epoch
    host: HostSample = field(default_factory=HostSample)
    tree: TreeSample | None = None  # None when no process is watched (or it is gone)
    gpus: tuple[GpuTick, ...] = ()
    sampler_cpu_s: float = 0.0  # the sampler thread's own CPU seconds so far (cumulative)


@dataclass(frozen=True)
class TimelineHeader(Record):
    """The first line of a timeline: what was recorded, where, how often."""

    schema: str = TIMELINE_SCHEMA
    version: int = TIMELINE_VERSION
    started: float = 0.0  # seconds since the epoch
    hz: float = 2.0
    host: Host = field(default_factory=Host)
    driver: Driver = field(default_factory=Driver)  # status says why there is no GPU, if none
    gpus: tuple[Gpu, ...] = ()
    command: tuple[str, ...] | None = None  # argv of the watched command (gpuprobe run)
    pid: int | None = None  # the watched main process
    pcie_throughput: bool = False
    gpuprobe_version: str | None = None
