"""``gpuprobe pack``: how many copies of a job to run at once on one machine (E9 in
docs/experiments.md#e9: "two concurrent runs cost nothing on a 3060 Ti, three or more slow down
N×").

For each N, N copies of the command (an argument list, no shell) start at once; the monitor's
:class:`~gpuprobe.monitor.sampler.Sampler` records the host's cores, gpuprobe's process tree (the
copies) and every GPU meanwhile. Each copy's wall time is measured; the total throughput is
N × 3600 / mean wall time (jobs per hour), or the sum of the rates the copies print (``rate``: a
regular expression whose first group is a number, the last match in each copy's output). The
recommended N is the one past which one more level of packing gains less than
:data:`PACK_MIN_GAIN`. MIG and MPS are read from NVML and the system, with when they would help.

Times are seconds; throughput is jobs per hour or the command's own rate unit.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from gpuprobe._data import Record
from gpuprobe.errors import GpuprobeError, UsageError
from gpuprobe.findings import Evidence, Finding, Status, status_counts
from gpuprobe.hardware.host import usable_cores
from gpuprobe.hardware.load import host_busy_finding, others_cores
from gpuprobe.hardware.types import Gpu
from gpuprobe.monitor.records import Sample
from gpuprobe.monitor.run import EXIT_NOT_FOUND, resolve_command
from gpuprobe.monitor.sampler import DEFAULT_HZ, NvmlFactory, Sampler
from gpuprobe.units import count

__all__ = [
    "CORE_CAPACITY_SLACK",
    "GPU_LIGHT_UTIL_PERCENT",
    "MPS_PIPE_DEFAULT",
    "PACK_MIN_GAIN",
    "PackCopy",
    "PackLevel",
    "PackReport",
    "Sharing",
    "core_capacity",
    "pack",
    "parse_counts",
    "read_sharing",
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
MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"  # CUDA_MPS_PIPE_DIRECTORY's default (MPS docs)
MAX_COUNT = 64  # copies; more is a typo more often than a plan
OUTPUT_TAIL_BYTES = 65536  # of each copy's output kept for --rate and error messages


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
    slowdown: float | None = None  # mean copy time / mean copy time at the smallest N
    cpu_percent: float | None = None  # the copies' CPU seconds / level wall, % of one core
    host_busy_percent: float | None = None  # mean over cores and samples, 0-100
    tree_cpu_percent: float | None = None  # the copies together, % of one core (mean)
    gpu_util_percent: float | None = None  # mean over GPUs and samples
    gpu_memory_peak: int | None = None  # bytes, the most used on any GPU
    samples: int = 0
    failed: int = 0
    others_cores: float | None = None  # cores other processes kept busy during the level


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
    unit: str  # "jobs/h" or "<rate>/s (--rate)"
    recommended: int | None
    cores: int
    load_average: tuple[float, float, float] | None = None  # before the first level
    sharing: Sharing = field(default_factory=Sharing)
    rate_regex: str | None = None
    findings: tuple[Finding, ...] = ()

    def __str__(self) -> str:
        from gpuprobe.report.pack_text import pack_text

        return pack_text(self)

    def __repr__(self) -> str:
        n = "none" if self.recommended is None else str(self.recommended)
        return (
            f"<PackReport {len(self.levels)} levels of {' '.join(self.command)[:60]}: run {n} "
            f"at once; findings: {status_counts(self.findings)}>"
        )

    def _repr_html_(self) -> str:
        from gpuprobe.report.reprs import result_html

        return result_html(self)


def parse_counts(text: str) -> list[int]:
    """``"1,2,3,4"`` -> [1, 2, 3, 4]; ``"1-4"`` too. A clear UsageError for 0, negatives,
    non-integers and more than :data:`MAX_COUNT`."""
    out: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(-?\d+)(?:-(\d+))?", part)
        if not m:
            raise UsageError(f"-n {text}: {part!r} is not a whole number; give counts like 1,2,3,4")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if lo < 1 or hi < 1:
            raise UsageError(f"-n {text}: copies must be 1 or more, like 1,2,3,4")
        if hi < lo:
            raise UsageError(f"-n {text}: the range {part} runs backwards")
        out.extend(range(lo, hi + 1))
    if not out:
        raise UsageError(f"-n {text!r}: give the numbers of copies, like 1,2,3,4")
    if max(out) > MAX_COUNT:
        raise UsageError(f"-n {text}: at most {MAX_COUNT} copies at once")
    return sorted(set(out))


def read_sharing(gpus: Sequence[Gpu], driver_note: str | None = None) -> Sharing:
    """MIG from the GPUs NVML read; MPS from the control binary and its pipe directory."""
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", MPS_PIPE_DEFAULT))
    return Sharing(
        gpus=len(gpus),
        gpu_names=tuple(g.name or f"GPU {g.index}" for g in gpus),
        mig_capable=tuple(g.index for g in gpus if g.mig_mode is not None),
        mig_enabled=tuple(g.index for g in gpus if g.mig_mode),
        mig_instances=sum(len(g.mig_instances) for g in gpus),
        mps_control=shutil.which("nvidia-cuda-mps-control"),
        mps_running=(pipe / "control").exists(),
        driver_note=driver_note,
    )


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - OUTPUT_TAIL_BYTES))
        return f.read().decode(errors="replace")


def _rate(text: str, rx: re.Pattern[str]) -> float | None:
    last = None
    for m in rx.finditer(text):
        last = m
    if last is None:
        return None
    raw = last.group(1) if rx.groups else last.group(0)
    try:
        return float(raw.replace(",", ""))
    except ValueError:
        return None


def _run_level(
    cmd: Sequence[str],
    executable: str,
    n: int,
    sampler: Sampler,
    rate_rx: re.Pattern[str] | None,
    workdir: Path,
) -> tuple[list[PackCopy], float, list[Sample]]:
    samples: list[Sample] = []
    procs: list[tuple[subprocess.Popen[bytes], float, Path, Path]] = []
    sampler.start(samples.append)
    t0 = time.monotonic()
    try:
        for i in range(n):
            out_path, err_path = workdir / f"n{n}-{i}.out", workdir / f"n{n}-{i}.err"
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                try:
                    p = subprocess.Popen(
                        list(cmd),
                        executable=executable,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                    )
                except OSError as exc:
                    raise GpuprobeError(
                        f"{cmd[0]}: cannot start: {exc.strerror or exc}", EXIT_NOT_FOUND
                    ) from None
            procs.append((p, time.monotonic(), out_path, err_path))
        ends: dict[int, float] = {}
        cpu: dict[int, float] = {}
        while len(ends) < len(procs):
            for i, (p, _, _, _) in enumerate(procs):
                if i in ends:
                    continue
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)  # the copy's own CPU time
                if pid:
                    ends[i] = time.monotonic()
                    p.returncode = os.waitstatus_to_exitcode(status)
                    cpu[i] = usage.ru_utime + usage.ru_stime
            time.sleep(0.01)  # polling the copies' exit, not standing in for work
    except BaseException:
        for p, _, _, _ in procs:
            if p.returncode is None:
                with contextlib.suppress(OSError):
                    p.kill()
                with contextlib.suppress(ChildProcessError):
                    p.wait()
        raise
    finally:
        sampler.stop(final_sink=samples.append)
    wall = time.monotonic() - t0
    copies = []
    for i, (p, start, out_path, err_path) in enumerate(procs):
        code = p.returncode if p.returncode >= 0 else 128 - p.returncode
        rate = None
        if rate_rx is not None:
            rate = _rate(_tail(out_path) + "\n" + _tail(err_path), rate_rx)
        error = None
        if code != 0:
            lines = [ln for ln in _tail(err_path).splitlines() if ln.strip()]
            error = lines[-1][:300] if lines else f"exit code {code}"
        copies.append(
            PackCopy(
                index=i,
                wall_s=ends[i] - start,
                exit_code=code,
                cpu_s=round(cpu[i], 4),
                rate=rate,
                error=error,
            )
        )
    return copies, wall, samples


def _level(
    n: int, copies: list[PackCopy], wall: float, samples: list[Sample], rated: bool
) -> PackLevel:
    mean = statistics.fmean(c.wall_s for c in copies)
    if rated:
        rates = [c.rate for c in copies]
        throughput = (
            sum(r for r in rates if r is not None) if all(r is not None for r in rates) else None
        )
    else:
        throughput = n * 3600.0 / mean if mean > 0 else None
    busy = [statistics.fmean(s.host.cpu_percent) for s in samples[1:] if s.host.cpu_percent]
    tree = [s.tree.cpu_percent for s in samples[1:] if s.tree is not None]
    util = [
        float(g.sample.utilization_gpu)
        for s in samples[1:]
        for g in s.gpus
        if g.sample.utilization_gpu is not None
    ]
    mem = [
        g.sample.memory_used for s in samples for g in s.gpus if g.sample.memory_used is not None
    ]
    cpu_s = [c.cpu_s for c in copies if c.cpu_s is not None]
    busy_cores = [sum(s.host.cpu_percent) / 100 for s in samples[1:] if s.host.cpu_percent]
    others = others_cores(
        statistics.fmean(busy_cores) if busy_cores else None,
        sum(cpu_s) / wall if cpu_s and wall > 0 else None,
    )
    return PackLevel(
        others_cores=None if others is None else round(others, 2),
        n=n,
        copies=tuple(copies),
        cpu_percent=round(100 * sum(cpu_s) / wall, 1) if cpu_s and wall > 0 else None,
        wall_s=wall,
        mean_copy_s=mean,
        throughput=throughput,
        host_busy_percent=round(statistics.fmean(busy), 1) if busy else None,
        tree_cpu_percent=round(statistics.fmean(tree), 1) if tree else None,
        gpu_util_percent=round(statistics.fmean(util), 1) if util else None,
        gpu_memory_peak=max(mem) if mem else None,
        samples=len(samples),
        failed=sum(1 for c in copies if c.exit_code != 0),
    )


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


def recommend(
    levels: Sequence[PackLevel], min_gain: float = PACK_MIN_GAIN, cores: int | None = None
) -> int | None:
    """The N with the best total throughput, except that a larger N must beat the one chosen so
    far by ``min_gain``; levels with a failed copy or no throughput are not candidates. With
    ``cores``, N stops at what the cores hold (:func:`core_capacity`): past it the copies only
    time-share the cores, and a gain measured there depends on the machine's other load."""
    chosen: PackLevel | None = None
    cap = core_capacity(levels, cores)
    for lv in sorted(levels, key=lambda lv: lv.n):
        if lv.failed or lv.throughput is None or (cap is not None and lv.n > cap):
            continue
        if (
            chosen is None
            or chosen.throughput is None
            or lv.throughput >= chosen.throughput * (1 + min_gain)
        ):
            chosen = lv
    return chosen.n if chosen else None


def pack(
    cmd: Sequence[str],
    counts: Sequence[int] | str = (1, 2, 3, 4),
    *,
    rate: str | None = None,
    hz: float = DEFAULT_HZ,
    nvml: NvmlFactory | None = None,
    on_level: Callable[[PackLevel], None] | None = None,
) -> PackReport:
    """Run ``counts[i]`` copies of ``cmd`` at once, level after level, and report each level's
    wall times, total throughput and slowdown, with the N to run. ``rate`` is a regular
    expression whose first group is a number the command prints (e.g. ``r"([\\d.]+) it/s"``)."""
    executable = resolve_command(cmd)
    cmd = list(cmd)
    levels_n = parse_counts(
        ",".join(str(c) for c in counts) if not isinstance(counts, str) else counts
    )
    rate_rx = None
    if rate is not None:
        try:
            rate_rx = re.compile(rate)
        except re.error as exc:
            raise UsageError(f"--rate {rate!r} is not a regular expression: {exc}") from None
        if rate_rx.groups < 1:
            raise UsageError(
                f"--rate {rate!r} has no group: put the number in parentheses, e.g. "
                f"--rate '([0-9.]+) {rate.strip() or 'it/s'}'"
            )
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    kwargs: dict[str, Any] = {} if nvml is None else {"nvml": nvml}
    levels: list[PackLevel] = []
    with (
        Sampler(hz=hz, pid=os.getpid(), **kwargs) as sampler,
        tempfile.TemporaryDirectory(prefix="gpuprobe-pack-") as tmp,
    ):
        sharing = read_sharing(
            sampler.gpus, sampler.driver.error if sampler.driver.status != "ok" else None
        )
        for n in levels_n:
            copies, wall, samples = _run_level(cmd, executable, n, sampler, rate_rx, Path(tmp))
            lv = _level(n, copies, wall, samples, rate_rx is not None)
            if levels:
                lv = replace(lv, slowdown=lv.mean_copy_s / levels[0].mean_copy_s)
            else:
                lv = replace(lv, slowdown=1.0)
            levels.append(lv)
            if on_level is not None:
                on_level(lv)
    cores = usable_cores() or psutil.cpu_count() or 1
    report = PackReport(
        command=tuple(cmd),
        levels=tuple(levels),
        unit="jobs/h" if rate_rx is None else "rate (--rate, summed)",
        recommended=recommend(levels, cores=cores),
        cores=cores,
        load_average=tuple(round(x, 2) for x in load) if load else None,  # type: ignore[arg-type]
        sharing=sharing,
        rate_regex=rate,
    )
    return replace(report, findings=tuple(judge(report)))


def _change(ratio: float) -> str:
    """1.12 -> 'add 12 %', 0.97 -> 'lose 3 %', 0.999 -> 'add nothing' (never "-0 %")."""
    pct = round(100 * (ratio - 1))
    if pct == 0:
        return "add nothing"
    return f"add {pct} %" if pct > 0 else f"lose {-pct} %"


def judge(r: PackReport) -> list[Finding]:
    """pack-copy-failed, pack-no-rate, pack-recommend, pack-mig, pack-mps, pack-cpu-only."""
    out: list[Finding] = []
    by_n = {lv.n: lv for lv in r.levels}
    for lv in r.levels:
        if lv.failed:
            bad = next(c for c in lv.copies if c.exit_code != 0)
            out.append(
                Finding(
                    id="pack-copy-failed",
                    status=Status.FAIL,
                    title=f"{lv.failed} of {lv.n} copies failed at N={lv.n} "
                    f"(exit {bad.exit_code}: {bad.error})",
                    evidence=(Evidence("n", lv.n), Evidence("failed", lv.failed)),
                    fix="run one copy by hand and fix its error; at larger N it may be out of "
                    "memory (each copy needs its own)",
                    group="pack",
                    subject=f"n={lv.n}",
                )
            )
        elif lv.throughput is None:
            out.append(
                Finding(
                    id="pack-no-rate",
                    status=Status.WARN,
                    title=f"--rate {r.rate_regex!r} matched nothing in some copies' output at N={lv.n}",
                    evidence=(Evidence("n", lv.n),),
                    fix="check the pattern against the command's output; its first group must be "
                    "a number, e.g. --rate '([0-9.]+) samples/s'",
                    group="pack",
                    subject=f"n={lv.n}",
                )
            )
    rec = by_n.get(r.recommended) if r.recommended is not None else None
    if rec is not None and rec.throughput is not None:
        first = r.levels[0]
        gain = rec.throughput / first.throughput if first.throughput else None
        nxt = next((lv for lv in r.levels if lv.n > rec.n and lv.throughput), None)
        beyond = (
            f"; {nxt.n} copies {_change(nxt.throughput / rec.throughput)}"
            if nxt is not None and nxt.throughput is not None
            else ""
        )
        cap = core_capacity(r.levels, r.cores)
        if (
            nxt is not None
            and nxt.throughput is not None
            and nxt.throughput > rec.throughput
            and cap is not None
            and nxt.n > cap
        ):
            beyond += (
                f", but {nxt.n} copies need more than the {r.cores} cores (one copy alone used "
                f"{r.levels[0].cpu_percent or 0:.0f} % of a core): past that the copies only "
                "time-share the cores, and what they seem to gain comes from gaps (start-up, "
                "other processes' idle time) that a busy machine will not leave"
            )
        out.append(
            Finding(
                id="pack-recommend",
                status=Status.OK,
                title=(
                    f"run one copy at a time: {count(rec.throughput)} {r.unit}{beyond}"
                    if rec.n == 1
                    else f"run {rec.n} at once: {count(rec.throughput)} {r.unit} in total, "
                    f"{gain:.2f}x N={first.n}, each copy {rec.slowdown or 1:.2f}x slower{beyond}"
                )
                if gain is not None
                else f"run {rec.n} at once",
                evidence=(
                    Evidence("recommended", rec.n),
                    Evidence("throughput", round(rec.throughput, 3), r.unit),
                    Evidence("slowdown", round(rec.slowdown or 1, 3), "x"),
                    Evidence("min_gain", round(100 * PACK_MIN_GAIN), "%"),
                    Evidence("cores", r.cores),
                    Evidence("core_capacity", cap),
                ),
                fix="run one copy at a time: more copies did not raise the total"
                if rec.n == 1
                else f"run {rec.n} copies at a time (e.g. xargs -P {rec.n}, or a job array "
                f"{rec.n} wide)",
                group="pack",
            )
        )
    busiest = max(
        (lv for lv in r.levels if lv.others_cores is not None),
        key=lambda lv: lv.others_cores or 0.0,
        default=None,
    )
    if busiest is not None:
        load = r.load_average[0] if r.load_average else None
        busy = host_busy_finding(
            "pack-host-busy",
            f"N={busiest.n}",
            busiest.others_cores,
            r.cores,
            effect="the copies competed with them for the cores, so the slowdowns, the CPU a "
            "copy seems to need and the N recommended reflect that load, not the job alone",
            fix="re-run 'gpuprobe pack' when the machine is idle (see 'gpuprobe top'), or plan "
            "for the load it will have when the copies run",
            group="pack",
            subject=f"n={busiest.n}",
            extra=(Evidence("load_average_1min", load),),
        )
        if busy is not None:
            out.append(busy)
    s = r.sharing
    if s.gpus == 0:
        out.append(
            Finding(
                id="pack-cpu-only",
                status=Status.INFO,
                title=f"no GPU here: the copies share {r.cores} CPU cores; MIG and MPS do not "
                "apply",
                evidence=(Evidence("cores", r.cores), Evidence("gpus", 0)),
                fix="",
                group="pack",
                details=(s.driver_note,) if s.driver_note else (),
            )
        )
        return out
    one = r.levels[0].gpu_util_percent if r.levels else None
    if s.mig_enabled:
        mig_title = (
            f"MIG is on for GPU {', '.join(map(str, s.mig_enabled))} "
            f"({s.mig_instances} instances): give each copy its own instance "
            "(CUDA_VISIBLE_DEVICES=MIG-<uuid>)"
        )
        mig_fix = "nvidia-smi -L lists the MIG-<uuid> of each instance"
    elif s.mig_capable:
        mig_title = (
            f"GPU {', '.join(map(str, s.mig_capable))} supports MIG (off): it splits the card into "
            "isolated slices with their own memory and bandwidth; it helps when copies must not "
            "disturb each other or each needs a fixed share, not for raw throughput"
        )
        mig_fix = "sudo nvidia-smi -i 0 -mig 1 && sudo nvidia-smi mig -cgi 19,19 -C  (idle card)"
    else:
        mig_title = "MIG is not available on this GPU (A100, A30, H100, H200 and newer have it)"
        mig_fix = ""
    out.append(
        Finding(
            id="pack-mig",
            status=Status.INFO,
            title=mig_title,
            evidence=(
                Evidence("mig_capable", len(s.mig_capable)),
                Evidence("mig_enabled", len(s.mig_enabled)),
            ),
            fix=mig_fix,
            group="pack",
        )
    )
    mps_helps = one is not None and one < GPU_LIGHT_UTIL_PERCENT
    state = (
        "running"
        if s.mps_running
        else ("installed, not running" if s.mps_control else "not installed")
    )
    out.append(
        Finding(
            id="pack-mps",
            status=Status.INFO,
            title=f"MPS is {state}"
            + (
                f"; one copy keeps the GPU {one:.0f} % busy, so MPS would let the copies' "
                "kernels run at the same time instead of taking turns"
                if mps_helps and one is not None
                else "; it helps when each copy leaves the GPU mostly idle "
                f"(< {GPU_LIGHT_UTIL_PERCENT:.0f} % utilization)"
            ),
            evidence=(
                Evidence("gpu_util_one_copy", one, "%"),
                Evidence("light_threshold", GPU_LIGHT_UTIL_PERCENT, "%"),
                Evidence("mps_running", s.mps_running),
            ),
            fix="nvidia-cuda-mps-control -d   (start the daemon; 'echo quit | "
            "nvidia-cuda-mps-control' stops it)"
            if mps_helps and not s.mps_running
            else "",
            group="pack",
        )
    )
    return out
