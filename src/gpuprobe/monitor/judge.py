"""What a recording says: numbers per GPU and for the host, and the findings they support.

The rules, each with its named thresholds below:

- ``monitor-gpu-busy``: how much of the run each GPU the command used was busy (NVML
  ``utilization.gpu``: % of time a kernel ran).
- ``monitor-gpu-starved-main-thread``: the GPU mostly idle while one thread of the command's main
  process pegs a core (E9: GPU 7 %, CPU 70 %, one busy core).
- ``monitor-gpu-starved-loaders``: the GPU mostly idle while the command's worker processes are
  saturated (DataLoader workers that cannot keep up).
- ``monitor-gpu-starved-host``: the GPU mostly idle while every core of the host is busy.
- ``monitor-gpu-memory``: peak GPU memory against capacity (near full: E2's out-of-memory).
- ``monitor-gpu-throttle``: clock event reasons seen while the GPU worked (which, when).
- ``monitor-host-memory-growing`` / ``monitor-host-memory-low``: the command's RSS grew steadily;
  the host ran short of memory.
- ``monitor-cpu-main-thread`` / ``monitor-cpu-usage``: how the command used the CPU.
- ``monitor-exit``, ``monitor-incomplete``, ``monitor-sampler-cost``, ``monitor-no-gpu``,
  ``monitor-gpu-unused``, ``monitor-too-short``: the recording itself.

Times are seconds from the start of the recording; utilization is percent.
"""

from __future__ import annotations

import shlex
import signal
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuprobe._data import Record
from gpuprobe._text import strip_control
from gpuprobe.findings import Evidence, Finding, Status, worst_first
from gpuprobe.hardware.load import host_busy_finding, others_cores
from gpuprobe.hardware.types import Gpu
from gpuprobe.monitor.records import TreeSample
from gpuprobe.monitor.timeline import Timeline

__all__ = [
    "GPU_BUSY_OK_PERCENT",
    "GPU_BUSY_WARN_PERCENT",
    "GPU_IDLE_SAMPLE_PERCENT",
    "GPU_MEMORY_LOW_FRACTION",
    "GPU_MEMORY_NEAR_FULL_FRACTION",
    "HOST_MEMORY_GROWTH_MIN_BYTES",
    "HOST_MEMORY_GROWTH_MIN_FRACTION",
    "HOST_MEMORY_LOW_FRACTION",
    "HOST_SATURATED_PERCENT",
    "LOADER_SATURATED_PERCENT",
    "MIN_SAMPLES",
    "PEGGED_MIN_FRACTION",
    "PEGGED_THREAD_PERCENT",
    "SAMPLER_COST_WARN_PERCENT",
    "STARVED_MIN_FRACTION",
    "THROTTLE_MIN_FRACTION",
    "GpuStats",
    "HostStats",
    "RunSummary",
    "command_text",
    "summarize",
]

# Exit codes of a command stopped by the user's Ctrl-C: 128 + SIGINT (the shell's convention, and
# what gpuprobe run records for a child killed by SIGINT) and -SIGINT (Popen's returncode).
INTERRUPT_CODES = (128 + 2, -2)
# A busy host is reported for a command that used at least this many cores on average, or whose
# busiest thread waited that much for a core (ran + waited, less ran; schedstat): gpuprobe's
# choice, a tenth of a core; a command that sleeps or waits on the GPU loses nothing to the load.
HOST_WAIT_MIN_CORES = 0.1

# -- thresholds (unit; source) ---------------------------------------------------------------------
GPU_BUSY_OK_PERCENT = 80.0  # mean utilization.gpu, %; E10's "good" graph stays near 100 %
GPU_BUSY_WARN_PERCENT = (
    50.0  # mean utilization.gpu, %; Nsight/torch-tb-profiler flag GPU busy < 50 %
)
GPU_IDLE_SAMPLE_PERCENT = (
    30.0  # utilization.gpu, %; a sample below is "mostly idle" (E9: 7 %, 15 %)
)
STARVED_MIN_FRACTION = 0.5  # of the GPU's samples mostly idle before it is called starved
PEGGED_THREAD_PERCENT = 90.0  # % of one core; a thread this busy is pegged (E9's one busy core)
PEGGED_MIN_FRACTION = 0.5  # of the idle samples in which the main thread is pegged
LOADER_SATURATED_PERCENT = 85.0  # mean % of one core per worker process; PyTorch DataLoader workers
HOST_SATURATED_PERCENT = 90.0  # mean % over all cores; nothing left to feed the GPU
GPU_MEMORY_NEAR_FULL_FRACTION = 0.95  # of capacity; the next allocation may fail (E2's OOM)
GPU_MEMORY_LOW_FRACTION = 0.25  # of capacity, with low utilization: room for a bigger batch (E9)
THROTTLE_MIN_FRACTION = 0.05  # of busy samples showing a reason before it is reported
HOST_MEMORY_GROWTH_MIN_BYTES = 512 * 2**20  # bytes of RSS growth after warm-up; a leak, not noise
HOST_MEMORY_GROWTH_MIN_FRACTION = 0.5  # RSS growth after warm-up relative to the warm-up RSS
HOST_MEMORY_LOW_FRACTION = 0.05  # available / total; the kernel starts swapping or OOM-killing
MIN_SAMPLES = 4  # samples; fewer cannot tell a busy GPU from a lucky instant
SAMPLER_COST_WARN_PERCENT = 1.0  # % of one core; the goal at 2 Hz
WARMUP_FRACTION = 0.2  # of the run; memory grows legitimately while a job starts

# Clock event reasons that are not a slowdown under load (nvml.h: idle, app clocks, display, sync).
_BENIGN_REASONS = frozenset(
    {"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"}
)
# A power cap at full load is the card working as designed; thermal and hardware slowdowns are not.
_INFO_REASONS = frozenset({"sw_power_cap"})

_GROUP = "monitor"


def _gib(b: float | None) -> float | None:
    return None if b is None else round(b / 2**30, 2)


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _pct(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


@dataclass(frozen=True)
class GpuStats(Record):
    """One GPU over the run."""

    index: int
    name: str | None = None
    used_by_command: bool = False
    samples: int = 0
    util_mean: float | None = None  # %
    util_median: float | None = None
    util_p90: float | None = None
    idle_fraction: float | None = None  # of samples below GPU_IDLE_SAMPLE_PERCENT
    memory_peak: int | None = None  # bytes
    memory_total: int | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    temperature_max_c: int | None = None
    sm_clock_median_mhz: float | None = None
    reasons: dict[str, float] = field(default_factory=dict)  # reason -> fraction of busy samples
    reasons_first_s: dict[str, float] = field(default_factory=dict)  # reason -> first seen, s


@dataclass(frozen=True)
class HostStats(Record):
    """The host and the watched command over the run."""

    cores: int = 0
    cpu_mean_percent: float | None = None  # mean over cores and samples
    command_cores_mean: float | None = None  # the tree's CPU in cores (1.0 = one core busy)
    command_cores_peak: float | None = None
    main_thread_pegged_fraction: float | None = None  # of samples
    main_thread_mean_percent: float | None = None
    main_thread_wants_mean_percent: float | None = None  # ran + waited for a core (schedstat)
    workers_max: int = 0  # most child processes seen at once
    rss_start: int | None = None  # bytes, after warm-up
    rss_peak: int | None = None
    rss_end: int | None = None
    memory_available_min: int | None = None  # bytes
    memory_total: int | None = None
    # cores other processes kept busy: the host's busy cores less the command's and the sampler's
    others_cores_mean: float | None = None


@dataclass(frozen=True)
class RunSummary(Record):
    """A recording judged: numbers and findings, ready for the terminal, JSON and HTML."""

    command: tuple[str, ...] | None
    duration_s: float
    samples: int
    hz: float
    exit_code: int | None
    complete: bool
    dropped_lines: int
    sampler_cpu_s: float
    sampler_cost_percent: float | None  # % of one core
    driver_status: str
    gpus: tuple[GpuStats, ...]
    host: HostStats
    findings: tuple[Finding, ...]

    def __repr__(self) -> str:
        from gpuprobe.report.reprs import status_counts

        return (
            f"<RunSummary {command_text(self.command, 60)}: {self.duration_s:.1f} s, exit code "
            f"{'n/a' if self.exit_code is None else self.exit_code}, {self.samples} samples; "
            f"findings: {status_counts(self.findings)}>"
        )


def command_text(cmd: Sequence[str] | None, limit: int = 120) -> str:
    """The command as one shell-quoted line for people (newlines shown as \\n, cut at
    ``limit`` characters); "the block" for a Python block recorded with ``gpuprobe.record``."""
    if not cmd:
        return "the block"
    text = strip_control(shlex.join(str(c) for c in cmd).replace("\n", "\\n"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code > 128 and code - 128 < 65:
        try:
            return f"{code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return str(code)


def _gpu_stats(tl: Timeline, gpu: Gpu | None, index: int, tree: set[int]) -> GpuStats:
    utils: list[float] = []
    mems: list[int] = []
    powers: list[float] = []
    temps: list[int] = []
    clocks: list[float] = []
    reason_hits: dict[str, int] = {}
    reason_first: dict[str, float] = {}
    busy = 0
    any_procs = False
    tree_on_gpu = False
    mem_first: int | None = None
    for rel, tick in tl.gpu_ticks(index):
        s = tick.sample
        if s.utilization_gpu is not None:
            utils.append(float(s.utilization_gpu))
        if s.memory_used is not None:
            mems.append(s.memory_used)
            mem_first = s.memory_used if mem_first is None else mem_first
        if s.power_w is not None:
            powers.append(s.power_w)
        if s.temperature_c is not None:
            temps.append(s.temperature_c)
        if s.sm_clock_mhz is not None:
            clocks.append(float(s.sm_clock_mhz))
        if tick.processes:
            any_procs = True
            tree_on_gpu = tree_on_gpu or any(p.pid in tree for p in tick.processes)
        if (s.utilization_gpu or 0) > 0:
            busy += 1
            for r in s.clock_event_reasons or ():
                if r in _BENIGN_REASONS:
                    continue
                reason_hits[r] = reason_hits.get(r, 0) + 1
                reason_first.setdefault(r, round(rel, 1))
    if any_procs:
        used = tree_on_gpu
    else:  # no process list (a container's PID namespace, old driver): judge by activity
        rose = bool(mems) and mem_first is not None and max(mems) - mem_first > 256 * 2**20
        used = (bool(utils) and max(utils) > 0) or rose
    n = len(utils)
    ordered = sorted(utils)
    return GpuStats(
        index=index,
        name=gpu.name if gpu else None,
        used_by_command=used,
        samples=n,
        util_mean=_pct(_mean(utils)),
        util_median=_pct(statistics.median(utils)) if utils else None,
        util_p90=_pct(ordered[min(n - 1, int(0.9 * n))]) if utils else None,
        idle_fraction=(
            round(sum(u < GPU_IDLE_SAMPLE_PERCENT for u in utils) / n, 3) if n else None
        ),
        memory_peak=max(mems) if mems else None,
        memory_total=gpu.memory_total if gpu else None,
        power_mean_w=round(statistics.fmean(powers), 1) if powers else None,
        power_max_w=round(max(powers), 1) if powers else None,
        temperature_max_c=max(temps) if temps else None,
        sm_clock_median_mhz=statistics.median(clocks) if clocks else None,
        reasons={r: round(c / busy, 3) for r, c in reason_hits.items()} if busy else {},
        reasons_first_s=reason_first,
    )


def _thread_demand(t: TreeSample) -> float | None:
    """How much of a core the main process's busiest thread wanted: its CPU %, or its running
    plus runnable-but-waiting % when the kernel reports it (a thread starved of a core by other
    processes still wants all of it)."""
    values = [
        v for v in (t.main_thread_max_percent, t.main_thread_runnable_percent) if v is not None
    ]
    return max(values) if values else None


def _host_stats(tl: Timeline) -> HostStats:
    cores = tl.header.host.logical_cores or max(
        (len(s.host.cpu_percent) for s in tl.samples), default=0
    )
    host_means = [statistics.fmean(s.host.cpu_percent) for s in tl.samples if s.host.cpu_percent]
    trees = [s.tree for s in tl.samples if s.tree is not None]
    tops = [t.main_thread_max_percent for t in trees if t.main_thread_max_percent is not None]
    demand = [d for d in map(_thread_demand, trees) if d is not None]
    rss = [t.rss for t in trees]
    warm = int(len(rss) * WARMUP_FRACTION)
    avail = [s.host.memory_available for s in tl.samples if s.host.memory_available is not None]
    return HostStats(
        cores=cores,
        cpu_mean_percent=_pct(_mean(host_means)),
        command_cores_mean=round(statistics.fmean(t.cpu_percent for t in trees) / 100, 2)
        if trees
        else None,
        command_cores_peak=round(max(t.cpu_percent for t in trees) / 100, 2) if trees else None,
        main_thread_pegged_fraction=round(
            sum(x >= PEGGED_THREAD_PERCENT for x in demand) / len(demand), 3
        )
        if demand
        else None,
        main_thread_mean_percent=_pct(_mean(tops)),
        main_thread_wants_mean_percent=_pct(_mean(demand)),
        workers_max=max((len(t.children) for t in trees), default=0),
        rss_start=rss[warm] if rss else None,
        rss_peak=max(rss) if rss else None,
        rss_end=rss[-1] if rss else None,
        memory_available_min=min(avail) if avail else None,
        memory_total=tl.header.host.memory_total,
        others_cores_mean=_others(tl, cores, host_means, trees),
    )


def _others(tl: Timeline, cores: int, host_means: list[float], trees: list[Any]) -> float | None:
    """Cores other processes kept busy (mean): the host's busy cores less the command's tree
    and gpuprobe's sampler."""
    if not host_means or not trees or not cores or tl.duration_s <= 0:
        return None
    host_cores = statistics.fmean(host_means) / 100 * cores
    own = statistics.fmean(t.cpu_percent for t in trees) / 100 + tl.sampler_cpu_s / tl.duration_s
    others = others_cores(host_cores, own)
    return None if others is None else round(others, 2)


def _starvation(tl: Timeline, st: GpuStats, host: HostStats) -> list[Finding]:
    """Why a mostly idle GPU waited: the main thread, the workers, or the whole host."""
    if not st.samples or (st.idle_fraction or 0) < STARVED_MIN_FRACTION:
        return []
    idle_ticks = []  # (host sample, tree) at the GPU's idle samples
    for s in tl.samples:
        for g in s.gpus:
            u = g.sample.utilization_gpu
            if g.sample.index == st.index and u is not None and u < GPU_IDLE_SAMPLE_PERCENT:
                idle_ticks.append(s)
    trees = [s.tree for s in idle_ticks if s.tree is not None]
    out: list[Finding] = []
    subject = f"GPU {st.index}"
    gpu_ev = Evidence("gpu_util_mean", st.util_mean, "%")
    idle_ev = Evidence("gpu_idle_fraction", round(100 * (st.idle_fraction or 0), 1), "%")
    tops = [t.main_thread_max_percent for t in trees if t.main_thread_max_percent is not None]
    demand = [d for d in map(_thread_demand, trees) if d is not None]
    pegged = sum(x >= PEGGED_THREAD_PERCENT for x in demand) / len(demand) if demand else 0.0
    if tops and pegged >= PEGGED_MIN_FRACTION:
        cores_used = statistics.fmean(t.cpu_percent for t in trees) / 100
        out.append(
            Finding(
                id="monitor-gpu-starved-main-thread",
                status=Status.WARN,
                title=f"GPU {st.index} waited on the CPU: mostly idle while one thread of the "
                f"command's main process pegged a core",
                evidence=(
                    gpu_ev,
                    idle_ev,
                    Evidence("main_thread_pegged_fraction", round(100 * pegged, 1), "%"),
                    Evidence("main_thread_cpu_mean", _pct(statistics.fmean(tops)), "%"),
                    Evidence("main_thread_wants_mean", _pct(statistics.fmean(demand)), "%"),
                    Evidence("command_cores_used", round(cores_used, 2), "cores"),
                    Evidence("host_cores", host.cores, "cores"),
                ),
                fix="Feed the GPU from more than one core: DataLoader(dataset, num_workers="
                f"{max(1, (host.cores or 2) - 1)}, pin_memory=True, persistent_workers=True); "
                "vectorise per-sample Python loops (E10) and keep .item()/print() out of the step",
                group=_GROUP,
                subject=subject,
                details=(
                    "One Python thread can run on one core only; while it is busy preparing "
                    "batches the GPU has nothing to do (E9: GPU 7 %, CPU 70 %).",
                ),
            )
        )
    kids = [t.children for t in trees if t.children]
    if kids:
        per_worker = [statistics.fmean(c.cpu_percent for c in ch) for ch in kids]
        mean_worker = statistics.fmean(per_worker)
        if mean_worker >= LOADER_SATURATED_PERCENT:
            workers = max(len(ch) for ch in kids)
            out.append(
                Finding(
                    id="monitor-gpu-starved-loaders",
                    status=Status.WARN,
                    title=f"GPU {st.index} waited on the CPU: mostly idle while the command's "
                    f"{workers} worker process(es) were saturated",
                    evidence=(
                        gpu_ev,
                        idle_ev,
                        Evidence("workers", workers, ""),
                        Evidence("worker_cpu_mean", round(mean_worker, 1), "%"),
                        Evidence("host_cores", host.cores, "cores"),
                    ),
                    fix=(
                        f"Give loading more cores (DataLoader num_workers up to {host.cores}) "
                        "or make each sample cheaper: decode once and cache tensors, move "
                        "augmentation to the GPU"
                        if workers < host.cores
                        else "Every core is loading data: make each sample cheaper (decode once "
                        "and cache tensors, augment on the GPU) or use a machine with more cores"
                    ),
                    group=_GROUP,
                    subject=subject,
                )
            )
    hosts = [statistics.fmean(s.host.cpu_percent) for s in idle_ticks if s.host.cpu_percent]
    if hosts and statistics.fmean(hosts) >= HOST_SATURATED_PERCENT:
        out.append(
            Finding(
                id="monitor-gpu-starved-host",
                status=Status.WARN,
                title=f"GPU {st.index} mostly idle while every core of the host was busy",
                evidence=(
                    gpu_ev,
                    idle_ev,
                    Evidence("host_cpu_mean", round(statistics.fmean(hosts), 1), "%"),
                    Evidence("host_cores", host.cores, "cores"),
                ),
                fix="Find what else uses the cores (gpuprobe top); cheapen the input pipeline or "
                "run on a host with more cores per GPU",
                group=_GROUP,
                subject=subject,
            )
        )
    return out


def _gpu_findings(tl: Timeline, st: GpuStats, host: HostStats) -> list[Finding]:
    out: list[Finding] = []
    subject = f"GPU {st.index}"
    label = f"GPU {st.index}" + (f" ({st.name})" if st.name else "")
    u = st.util_mean
    if u is not None:
        status = (
            Status.OK
            if u >= GPU_BUSY_OK_PERCENT
            else Status.INFO
            if u >= GPU_BUSY_WARN_PERCENT
            else Status.WARN
        )
        out.append(
            Finding(
                id="monitor-gpu-busy",
                status=status,
                title=f"{label} busy {u:.0f}% of the run",
                evidence=(
                    Evidence("util_mean", u, "%"),
                    Evidence("util_median", st.util_median, "%"),
                    Evidence("util_p90", st.util_p90, "%"),
                    Evidence("idle_fraction", _pct(100 * (st.idle_fraction or 0)), "%"),
                    Evidence("samples", st.samples, ""),
                ),
                fix=""
                if status is Status.OK
                else (
                    "See what the GPU waits for below; profile a few steps (torch.profiler) "
                    "and read the trace with gpuprobe diagnose"
                ),
                group=_GROUP,
                subject=subject,
                details=(
                    "NVML utilization is the share of time any kernel ran, not how much of the "
                    "GPU it used: 100 % can still be a small fraction of the card's peak.",
                ),
            )
        )
        out.extend(_starvation(tl, st, host))
    if st.memory_peak is not None and st.memory_total:
        frac = st.memory_peak / st.memory_total
        if frac >= GPU_MEMORY_NEAR_FULL_FRACTION:
            status, fix = (
                Status.WARN,
                (
                    "Leave headroom: lower the batch size, use bf16 autocast, or "
                    "torch.utils.checkpoint; the next allocation may run out of memory"
                ),
            )
        elif frac < GPU_MEMORY_LOW_FRACTION and (u or 0) < GPU_BUSY_WARN_PERCENT:
            status, fix = (
                Status.INFO,
                ("The card has room: a larger batch (and learning rate) may keep it busier"),
            )
        else:
            status, fix = Status.OK, ""
        out.append(
            Finding(
                id="monitor-gpu-memory",
                status=status,
                title=f"{label} memory peak {_gib(st.memory_peak)} of "
                f"{_gib(st.memory_total)} GiB ({100 * frac:.0f}%)",
                evidence=(
                    Evidence("memory_peak", _gib(st.memory_peak), "GiB"),
                    Evidence("memory_total", _gib(st.memory_total), "GiB"),
                    Evidence("memory_peak_fraction", round(100 * frac, 1), "%"),
                ),
                fix=fix,
                group=_GROUP,
                subject=subject,
            )
        )
    for reason, frac in sorted(st.reasons.items(), key=lambda kv: -kv[1]):
        if frac < THROTTLE_MIN_FRACTION:
            continue
        status = Status.INFO if reason in _INFO_REASONS else Status.WARN
        out.append(
            Finding(
                id="monitor-gpu-throttle",
                status=status,
                title=f"{label} clocks held back by {reason} in {100 * frac:.0f}% of busy "
                f"samples, first at {st.reasons_first_s.get(reason, 0):.0f} s",
                evidence=(
                    Evidence("reason", reason, ""),
                    Evidence("busy_samples_fraction", round(100 * frac, 1), "%"),
                    Evidence("first_seen", st.reasons_first_s.get(reason), "s"),
                    Evidence("sm_clock_median", st.sm_clock_median_mhz, "MHz"),
                    Evidence("temperature_max", st.temperature_max_c, "C"),
                    Evidence("power_max", st.power_max_w, "W"),
                ),
                fix=(
                    "Normal at full load at the power limit; check `nvidia-smi -q -d POWER` if "
                    "the limit was lowered"
                    if status is Status.INFO
                    else "Check cooling and airflow (fans, blocked intake, a hot rack); "
                    "`nvidia-smi -q -d PERFORMANCE,TEMPERATURE` shows the slowdown live"
                ),
                group=_GROUP,
                subject=subject,
            )
        )
    return out


def _host_findings(tl: Timeline, host: HostStats) -> list[Finding]:
    out: list[Finding] = []
    wants = host.main_thread_wants_mean_percent
    got = host.main_thread_mean_percent
    waited = (wants - got) / 100 if wants is not None and got is not None else None
    # a command that sleeps or waits on the GPU loses nothing to a busy host: only one that
    # used the CPU or waited for a core is judged
    wanted_cpu = (waited or 0) >= HOST_WAIT_MIN_CORES or (
        host.command_cores_mean or 0
    ) >= HOST_WAIT_MIN_CORES
    busy = host_busy_finding(
        "monitor-host-busy",
        "the command" if tl.header.command else "the block",
        host.others_cores_mean if wanted_cpu else None,
        host.cores,
        effect=f"it got {host.command_cores_mean or 0:.2f} cores on average"
        + (
            f" while its busiest thread wanted {wants / 100:.2f} (ran + waited for a core)"
            if wants is not None
            else ""
        )
        + ", so it ran slower than it would on an idle machine",
        fix="run it when the machine is idle (see 'gpuprobe top' for who uses the cores), or ask "
        "for dedicated cores (taskset, a job scheduler's --cpus-per-task)",
        group=_GROUP,
        subject="host",
    )
    if busy is not None:
        out.append(busy)
    if host.command_cores_mean is not None:
        out.append(
            Finding(
                id="monitor-cpu-usage",
                status=Status.INFO,
                title=f"The command used {host.command_cores_mean:.2f} of {host.cores} cores on "
                f"average (peak {host.command_cores_peak:.2f})",
                evidence=(
                    Evidence("command_cores_mean", host.command_cores_mean, "cores"),
                    Evidence("command_cores_peak", host.command_cores_peak, "cores"),
                    Evidence("host_cpu_mean", host.cpu_mean_percent, "%"),
                    Evidence("host_cores", host.cores, "cores"),
                    Evidence("workers_max", host.workers_max, ""),
                ),
                group=_GROUP,
                subject="host",
            )
        )
    if (host.main_thread_pegged_fraction or 0) >= PEGGED_MIN_FRACTION and host.cores > 1:
        out.append(
            Finding(
                id="monitor-cpu-main-thread",
                status=Status.INFO,
                title=f"One thread of the main process pegged a core in "
                f"{100 * (host.main_thread_pegged_fraction or 0):.0f}% of the run: it is bound "
                f"to one of {host.cores} cores",
                evidence=(
                    Evidence(
                        "main_thread_pegged_fraction",
                        round(100 * (host.main_thread_pegged_fraction or 0), 1),
                        "%",
                    ),
                    Evidence("main_thread_cpu_mean", host.main_thread_mean_percent, "%"),
                    Evidence("main_thread_wants_mean", host.main_thread_wants_mean_percent, "%"),
                    Evidence("host_cores", host.cores, "cores"),
                ),
                fix="Vectorise the hot loop (NumPy/torch ops instead of Python loops), or spread "
                "it over processes (multiprocessing, DataLoader workers, Dask)",
                group=_GROUP,
                subject="host",
            )
        )
    if (
        host.rss_start is not None
        and host.rss_end is not None
        and host.rss_peak is not None
        and len(tl.samples) >= MIN_SAMPLES
    ):
        growth = host.rss_end - host.rss_start
        if (
            growth >= HOST_MEMORY_GROWTH_MIN_BYTES
            and growth >= HOST_MEMORY_GROWTH_MIN_FRACTION * max(host.rss_start, 1)
            and host.rss_end >= 0.9 * host.rss_peak
        ):
            out.append(
                Finding(
                    id="monitor-host-memory-growing",
                    status=Status.WARN,
                    title=f"The command's host memory grew {_gib(growth)} GiB after warm-up "
                    f"and did not come back",
                    evidence=(
                        Evidence("rss_after_warmup", _gib(host.rss_start), "GiB"),
                        Evidence("rss_end", _gib(host.rss_end), "GiB"),
                        Evidence("rss_peak", _gib(host.rss_peak), "GiB"),
                    ),
                    fix="Look for tensors kept across steps (append loss.item(), not loss; "
                    "detach() what you log) and caches that only grow; tracemalloc shows where",
                    group=_GROUP,
                    subject="host",
                )
            )
    if host.memory_available_min is not None and host.memory_total:
        frac = host.memory_available_min / host.memory_total
        if frac < HOST_MEMORY_LOW_FRACTION:
            out.append(
                Finding(
                    id="monitor-host-memory-low",
                    status=Status.WARN,
                    title=f"The host ran low on memory: {100 * frac:.1f}% available at worst",
                    evidence=(
                        Evidence("memory_available_min", _gib(host.memory_available_min), "GiB"),
                        Evidence("memory_total", _gib(host.memory_total), "GiB"),
                    ),
                    fix="Use fewer or lighter workers (each DataLoader worker copies the "
                    "dataset object), memory-map data, or add memory",
                    group=_GROUP,
                    subject="host",
                )
            )
    return out


def summarize(tl: Timeline) -> RunSummary:
    """Judge a recording: numbers per GPU and for the host, and the findings, worst first."""
    findings: list[Finding] = []
    host = _host_stats(tl)
    tree = tl.tree_pids()
    by_index = {g.index: g for g in tl.header.gpus}
    gpus = tuple(_gpu_stats(tl, by_index.get(i), i, tree) for i in tl.gpu_indices)
    n = len(tl.samples)
    wall = tl.end.get("sampler_wall_s") if tl.end else None
    wall = float(wall) if wall else tl.duration_s
    cost = 100.0 * tl.sampler_cpu_s / wall if wall > 0 else None
    cmd = command_text(tl.header.command)

    for header_gpu in tl.header.gpus:
        if header_gpu.lost:
            from gpuprobe.checks.gpu import lost_gpu_finding

            findings.append(
                lost_gpu_finding(header_gpu.label, header_gpu.nvml_error, header_gpu.index)
            )
    if tl.end is None:
        findings.append(
            Finding(
                id="monitor-incomplete",
                status=Status.WARN,
                title="The recording has no end line: gpuprobe stopped before the command finished "
                "(killed?); every sample up to the last flush is kept",
                evidence=(
                    Evidence("samples", n, ""),
                    Evidence("duration", round(tl.duration_s, 1), "s"),
                ),
                fix="Nothing to fix in the job; let gpuprobe run to the end for an exit code",
                group=_GROUP,
                subject="recording",
            )
        )
    if tl.dropped_lines:
        findings.append(
            Finding(
                id="monitor-timeline-damaged",
                status=Status.INFO,
                title=f"Dropped {tl.dropped_lines} damaged line(s) ({tl.dropped_bytes} bytes) of "
                f"the timeline; the {n} whole samples are used",
                evidence=(
                    Evidence("dropped_lines", tl.dropped_lines, ""),
                    Evidence("dropped_bytes", tl.dropped_bytes, "B"),
                ),
                group=_GROUP,
                subject="recording",
                details=tuple(tl.problems),
            )
        )
    code = tl.exit_code
    if tl.end is not None and tl.header.command and code is not None and code in INTERRUPT_CODES:
        # the user's Ctrl-C: a choice, not a failure of the command
        findings.append(
            Finding(
                id="monitor-interrupted",
                status=Status.INFO,
                title=f"{cmd} was stopped with Ctrl-C (exit code {_exit_text(code)}); the "
                "summary covers the part that ran",
                evidence=(
                    Evidence("exit_code", code, ""),
                    Evidence("duration", round(tl.duration_s, 2), "s"),
                ),
                group=_GROUP,
                subject="command",
            )
        )
    elif tl.end is not None and tl.header.command and code is not None:
        findings.append(
            Finding(
                id="monitor-exit",
                status=Status.OK if code == 0 else Status.FAIL,
                title=f"{cmd} exited with code {_exit_text(code)}",
                evidence=(
                    Evidence("exit_code", code, ""),
                    Evidence("duration", round(tl.duration_s, 2), "s"),
                ),
                fix="" if code == 0 else "Read the command's own output above the summary",
                group=_GROUP,
                subject="command",
            )
        )
    if n < MIN_SAMPLES:
        findings.append(
            Finding(
                id="monitor-too-short",
                status=Status.SKIPPED,
                title=f"Only {n} sample(s): too few to judge GPU and CPU use",
                evidence=(Evidence("samples", n, ""), Evidence("hz", tl.header.hz, "Hz")),
                fix="Record longer, or raise --hz (up to 20)",
                group=_GROUP,
                subject="recording",
            )
        )
    else:
        if tl.header.driver.status != "ok" or not gpus:
            findings.append(
                Finding(
                    id="monitor-no-gpu",
                    status=Status.INFO,
                    title="No GPU recorded: "
                    + (tl.header.driver.error or tl.header.driver.status)
                    + "; the host alone was recorded",
                    evidence=(Evidence("driver_status", tl.header.driver.status, ""),),
                    fix="Run `gpuprobe doctor` if this machine should have a working NVIDIA GPU",
                    group=_GROUP,
                    subject="gpu",
                )
            )
        else:
            used = [g for g in gpus if g.used_by_command]
            if not used:
                findings.append(
                    Finding(
                        id="monitor-gpu-unused",
                        status=Status.WARN,
                        title=f"{cmd} used none of the {len(gpus)} GPU(s)",
                        evidence=tuple(
                            Evidence(f"gpu{g.index}_util_max", g.util_p90, "%") for g in gpus
                        ),
                        fix="Check that the job moves its model and data to the GPU (.to('cuda')) "
                        "and that `gpuprobe doctor` passes",
                        group=_GROUP,
                        subject="gpu",
                    )
                )
            for g in used:
                findings.extend(_gpu_findings(tl, g, host))
        findings.extend(_host_findings(tl, host))
    if cost is not None and n:
        findings.append(
            Finding(
                id="monitor-sampler-cost",
                status=Status.WARN
                if cost > SAMPLER_COST_WARN_PERCENT * max(1.0, tl.header.hz / 2)
                else Status.INFO,
                title=f"gpuprobe's sampler used {cost:.2f}% of one core at {tl.header.hz:g} Hz",
                evidence=(
                    Evidence("sampler_cpu", round(tl.sampler_cpu_s, 3), "s"),
                    Evidence("sampler_cost", round(cost, 3), "%"),
                    Evidence("samples", n, ""),
                    Evidence("missed_ticks", (tl.end or {}).get("missed_ticks"), ""),
                ),
                fix="",
                group=_GROUP,
                subject="gpuprobe",
            )
        )
    return RunSummary(
        command=tl.header.command,
        duration_s=round(tl.duration_s, 3),
        samples=n,
        hz=tl.header.hz,
        exit_code=code,
        complete=tl.end is not None,
        dropped_lines=tl.dropped_lines,
        sampler_cpu_s=round(tl.sampler_cpu_s, 4),
        sampler_cost_percent=round(cost, 3) if cost is not None else None,
        driver_status=tl.header.driver.status,
        gpus=gpus,
        host=host,
        findings=tuple(worst_first(findings)),
    )
