"""What a recording says in numbers: per GPU and for the host, computed once, then judged.

:func:`summarize` reads a :class:`~gpuprobe.tools.monitor.timeline.Timeline` into a :class:`RunContext`
(the statistics of each GPU and of the host, the samples in which each GPU was mostly idle, the
sampler's cost), runs the rules of :mod:`gpuprobe.tools.monitor.rules` on it and returns a
:class:`RunSummary`: the numbers and the findings, worst first.

The thresholds here shape the statistics themselves (what counts as an idle sample, a pegged
thread, the warm-up); each rule's own thresholds are in its module. E-codes name the experiments
in ``docs/experiments.md`` (``docs/experiments.md#e9``: GPU 7 %, CPU 70 %, one busy core).

Times are seconds from the start of the recording; utilization is percent.
"""

from __future__ import annotations

import itertools
import shlex
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, status_counts
from gpuprobe.core.records import Record
from gpuprobe.core.text import strip_control
from gpuprobe.platform.hardware.load import others_cores
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.tools.monitor.records import Sample, TreeSample
from gpuprobe.tools.monitor.steps import StepStats, step_stats
from gpuprobe.tools.monitor.timeline import Timeline

__all__ = [
    "GPU_IDLE_SAMPLE_PERCENT",
    "MIN_SAMPLES",
    "PEGGED_THREAD_PERCENT",
    "WARMUP_FRACTION",
    "GpuStats",
    "HostStats",
    "RunContext",
    "RunSummary",
    "command_text",
    "round_pct",
    "run_context",
    "thread_demand",
]

# -- thresholds of the statistics (unit; source) ----------------------------------------------------
GPU_IDLE_SAMPLE_PERCENT = (
    30.0  # utilization.gpu, %; a sample below is "mostly idle" (E9: 7 %, 15 %)
)
PEGGED_THREAD_PERCENT = 90.0  # % of one core; a thread this busy is pegged (E9's one busy core)
MIN_SAMPLES = 4  # samples; fewer cannot tell a busy GPU from a lucky instant
WARMUP_FRACTION = 0.2  # of the run; memory grows legitimately while a job starts

# Clock event reasons that are not a slowdown under load (nvml.h: idle, app clocks, display, sync).
_BENIGN_REASONS = frozenset(
    {"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"}
)


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def round_pct(x: float | None) -> float | None:
    """A percentage rounded to 0.1 (None stays None)."""
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
    # joules over the recording: the energy counter's rise ("counter"), or the power samples
    # integrated ("power × time", an estimate) where the card has no counter
    energy_j: float | None = None
    energy_method: str | None = None
    temperature_max_c: int | None = None
    sm_clock_median_mhz: float | None = None
    reasons: dict[str, float] = field(default_factory=dict)  # reason -> fraction of busy samples
    reasons_first_s: dict[str, float] = field(default_factory=dict)  # reason -> first seen, s
    # a shared card, from the per-process lists (the cheap calls): the command's processes'
    # SM % (mean over the samples that read it) and memory peak, and everyone else's
    command_sm_mean: float | None = None
    others_sm_mean: float | None = None
    command_memory_peak: int | None = None  # bytes
    others_memory_peak: int | None = None
    others_pids: tuple[int, ...] = ()  # the other processes seen on it, the first few


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
    steps: tuple[StepStats, ...] = ()  # each PyTorch process's steps (the flight recorder)

    def __str__(self) -> str:
        return render.text(self)

    def __repr__(self) -> str:
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


@dataclass(frozen=True)
class RunContext:
    """A recording computed once for the rules: the timeline and its statistics."""

    timeline: Timeline
    gpus: tuple[GpuStats, ...]
    host: HostStats
    command: str  # command_text() of the recorded command
    sampler_cost: float | None  # % of one core, unrounded
    # GPU index -> the samples in which it was mostly idle (below GPU_IDLE_SAMPLE_PERCENT)
    idle_samples: Mapping[int, tuple[Sample, ...]]
    steps: tuple[StepStats, ...] = ()  # each PyTorch process's steps (the flight recorder)

    @property
    def samples(self) -> int:
        """How many samples the recording holds."""
        return len(self.timeline.samples)

    @property
    def enough_samples(self) -> bool:
        """Whether there are enough samples (:data:`MIN_SAMPLES`) to judge GPU and CPU use."""
        return self.samples >= MIN_SAMPLES

    @property
    def gpu_recorded(self) -> bool:
        """Whether NVML worked and at least one GPU was recorded."""
        return self.timeline.header.driver.status == "ok" and bool(self.gpus)

    @property
    def used_gpus(self) -> tuple[GpuStats, ...]:
        """The GPUs the command used, to judge one by one (none when there are too few samples
        or no GPU was recorded)."""
        if not self.enough_samples or not self.gpu_recorded:
            return ()
        return tuple(g for g in self.gpus if g.used_by_command)


def _gpu_stats(tl: Timeline, gpu: Gpu | None, index: int, tree: set[int]) -> GpuStats:
    utils: list[float] = []
    mems: list[int] = []
    powers: list[float] = []
    power_at: list[tuple[float, float]] = []
    counter: list[int] = []
    temps: list[int] = []
    clocks: list[float] = []
    reason_hits: dict[str, int] = {}
    reason_first: dict[str, float] = {}
    busy = 0
    any_procs = False
    tree_on_gpu = False
    mem_first: int | None = None
    share = _Share()
    for rel, tick in tl.gpu_ticks(index):
        s = tick.sample
        if s.utilization_gpu is not None:
            utils.append(float(s.utilization_gpu))
        if s.memory_used is not None:
            mems.append(s.memory_used)
            mem_first = s.memory_used if mem_first is None else mem_first
        if s.power_w is not None:
            powers.append(s.power_w)
            power_at.append((rel, s.power_w))
        if s.energy_mj is not None:
            counter.append(s.energy_mj)
        if s.temperature_c is not None:
            temps.append(s.temperature_c)
        if s.sm_clock_mhz is not None:
            clocks.append(float(s.sm_clock_mhz))
        if tick.processes:
            any_procs = True
            tree_on_gpu = tree_on_gpu or any(p.pid in tree for p in tick.processes)
            share.add(tick.processes, tree)
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
    energy_j, energy_method = _energy(counter, power_at)
    return GpuStats(
        index=index,
        name=gpu.name if gpu else None,
        used_by_command=used,
        samples=n,
        util_mean=round_pct(_mean(utils)),
        util_median=round_pct(statistics.median(utils)) if utils else None,
        util_p90=round_pct(ordered[min(n - 1, int(0.9 * n))]) if utils else None,
        idle_fraction=(
            round(sum(u < GPU_IDLE_SAMPLE_PERCENT for u in utils) / n, 3) if n else None
        ),
        memory_peak=max(mems) if mems else None,
        memory_total=gpu.memory_total if gpu else None,
        power_mean_w=round(statistics.fmean(powers), 1) if powers else None,
        power_max_w=round(max(powers), 1) if powers else None,
        energy_j=energy_j,
        energy_method=energy_method,
        temperature_max_c=max(temps) if temps else None,
        sm_clock_median_mhz=statistics.median(clocks) if clocks else None,
        reasons={r: round(c / busy, 3) for r, c in reason_hits.items()} if busy else {},
        reasons_first_s=reason_first,
        **share.stats(),
    )


OTHERS_LISTED = 5  # other processes on a card named by pid


class _Share:
    """Who used one card, sample by sample: the command's processes against the others."""

    def __init__(self) -> None:
        self.sm: dict[bool, list[float]] = {True: [], False: []}
        self.mem: dict[bool, int | None] = {True: None, False: None}
        self.others: dict[int, None] = {}

    def add(self, procs: Sequence[Any], tree: set[int]) -> None:
        read = any(p.sm_percent is not None for p in procs)  # SM % read in this sample
        for mine in (True, False):
            these = [p for p in procs if (p.pid in tree) == mine]
            if read:
                self.sm[mine].append(float(sum(p.sm_percent or 0 for p in these)))
            mems = [p.used_memory for p in these if p.used_memory is not None]
            if mems:
                self.mem[mine] = max(self.mem[mine] or 0, sum(mems))
        for p in procs:
            if p.pid not in tree and len(self.others) < OTHERS_LISTED:
                self.others[p.pid] = None

    def stats(self) -> dict[str, Any]:
        return {
            "command_sm_mean": round_pct(_mean(self.sm[True])),
            "others_sm_mean": round_pct(_mean(self.sm[False])) if self.others else None,
            "command_memory_peak": self.mem[True],
            "others_memory_peak": self.mem[False],
            "others_pids": tuple(self.others),
        }


def thread_demand(t: TreeSample) -> float | None:
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
    demand = [d for d in map(thread_demand, trees) if d is not None]
    # 0 bytes resident is the command that has just exited (a zombie), not a reading
    rss = [t.rss for t in trees if t.rss]
    warm = int(len(rss) * WARMUP_FRACTION)
    avail = [s.host.memory_available for s in tl.samples if s.host.memory_available is not None]
    return HostStats(
        cores=cores,
        cpu_mean_percent=round_pct(_mean(host_means)),
        command_cores_mean=round(statistics.fmean(t.cpu_percent for t in trees) / 100, 2)
        if trees
        else None,
        command_cores_peak=round(max(t.cpu_percent for t in trees) / 100, 2) if trees else None,
        main_thread_pegged_fraction=round(
            sum(x >= PEGGED_THREAD_PERCENT for x in demand) / len(demand), 3
        )
        if demand
        else None,
        main_thread_mean_percent=round_pct(_mean(tops)),
        main_thread_wants_mean_percent=round_pct(_mean(demand)),
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


def _idle_samples(tl: Timeline) -> dict[int, tuple[Sample, ...]]:
    """GPU index -> the samples in which that GPU was below :data:`GPU_IDLE_SAMPLE_PERCENT`."""
    idle: dict[int, list[Sample]] = {}
    for s in tl.samples:
        for g in s.gpus:
            u = g.sample.utilization_gpu
            if u is not None and u < GPU_IDLE_SAMPLE_PERCENT:
                idle.setdefault(g.sample.index, []).append(s)
    return {i: tuple(ss) for i, ss in idle.items()}


def run_context(tl: Timeline) -> RunContext:
    """The statistics of a recording, computed once for the rules."""
    tree = tl.tree_pids()
    by_index = {g.index: g for g in tl.header.gpus}
    wall = tl.end.get("sampler_wall_s") if tl.end else None
    wall = float(wall) if wall else tl.duration_s
    gpus = tuple(_gpu_stats(tl, by_index.get(i), i, tree) for i in tl.gpu_indices)
    used = [g.index for g in gpus if g.used_by_command] if tl.header.driver.status == "ok" else []
    return RunContext(
        timeline=tl,
        gpus=gpus,
        host=_host_stats(tl),
        command=command_text(tl.header.command),
        sampler_cost=100.0 * tl.sampler_cpu_s / wall if wall > 0 else None,
        idle_samples=_idle_samples(tl),
        steps=step_stats(tl, used),
    )


def _energy(
    counter: Sequence[int], power_at: Sequence[tuple[float, float]]
) -> tuple[float | None, str | None]:
    """Joules between the first and the last sample: the counter's rises summed (a fall, a
    driver reload, is skipped rather than read as negative energy), else trapezoids of power."""
    if len(counter) >= 2:
        rises = sum(b - a for a, b in itertools.pairwise(counter) if b >= a)
        return round(rises / 1000.0, 3), "counter"
    if len(power_at) >= 2:
        j = sum(0.5 * (wa + wb) * (tb - ta) for (ta, wa), (tb, wb) in itertools.pairwise(power_at))
        return round(j, 3), "power × time"
    return None, None
