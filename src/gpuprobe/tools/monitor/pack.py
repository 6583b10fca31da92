"""``gpuprobe pack``: how many copies of a job to run at once on one machine (E9 in
docs/experiments.md#e9: "two concurrent runs cost nothing on a 3060 Ti, three or more slow down
N×").

For each N, N copies of the command (an argument list, no shell) start at once; the monitor's
:class:`~gpuprobe.tools.monitor.sampler.Sampler` records the host's cores, gpuprobe's process tree (the
copies) and every GPU meanwhile. Each copy's wall time is measured; the total throughput is
N × 3600 / mean wall time (jobs per hour), or the sum of the rates the copies print (``rate``: a
regular expression whose first group is a number, the last match in each copy's output). The
recommended N is the one past which one more level of packing gains less than
:data:`PACK_MIN_GAIN`. MIG and MPS are read from NVML and the system, with when they would help.

The findings are the rules of :mod:`gpuprobe.tools.monitor.rules.pack`. Times are seconds;
throughput is jobs per hour or the command's own rate unit.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from gpuprobe.core.errors import GpuprobeError, UsageError, bad_argument
from gpuprobe.core.text import strip_control
from gpuprobe.platform.hardware.host import usable_cores
from gpuprobe.platform.hardware.load import others_cores
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.platform.proc import RUN_ID_ENV, end_processes, find_leftovers, new_run_id
from gpuprobe.tools.monitor.pack_model import (
    PACK_MIN_GAIN,
    PackCopy,
    PackLevel,
    PackReport,
    Sharing,
    core_capacity,
    slowdown_of,
)
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.rules.pack import judge
from gpuprobe.tools.monitor.run import EXIT_NOT_FOUND, resolve_command
from gpuprobe.tools.monitor.sampler import DEFAULT_HZ, NvmlFactory, Sampler

__all__ = [
    "MPS_PIPE_DEFAULT",
    "pack",
    "parse_counts",
    "rate_unit",
    "read_sharing",
]

MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"  # CUDA_MPS_PIPE_DIRECTORY's default (MPS docs)
MAX_COUNT = 64  # copies; more is a typo more often than a plan
OUTPUT_TAIL_BYTES = 65536  # of each copy's output kept for --rate and error messages


RATE_UNIT_FALLBACK = "(--rate's figure)"  # a --rate whose pattern names no unit after the number
_UNIT_RX = re.compile(r"[^\W\d][\w/%.·-]*|%")  # "it/s", "samples/s", "tokens/sec", "%"


def rate_unit(pattern: str) -> str:
    """The unit a ``--rate`` pattern names after its first group: ``([0-9.]+) it/s`` ->
    ``it/s``, ``loss ([\\d.]+) tok/s`` -> ``tok/s``; :data:`RATE_UNIT_FALLBACK` when the text
    after the number is not a plain word (``([\\d.]+)\\s*(\\w+)``, nothing)."""
    depth, start, i = 0, -1, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a character class: skip to its end (a leading "]" is a literal)
            j = i + 2 if pattern[i + 1 : i + 2] == "^" else i + 1
            j += 1 if pattern[j : j + 1] == "]" else 0
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            if start < 0 and not pattern.startswith("(?", i):
                start, depth = i, 0
            depth += 1 if start >= 0 else 0
        elif c == ")" and start >= 0:
            depth -= 1
            if depth == 0:
                break
        i += 1
    tail = pattern[i + 1 :] if start >= 0 and i < len(pattern) else ""
    tail = re.sub(r"\\s[*+?]?|\\ ", " ", tail)  # \s, \s*, "\ " read as a space
    tail = re.sub(r"\\([^\w])", r"\1", tail)  # \/ and \. are the characters themselves
    word = re.split(r"[\s$|()*+?{\[]", tail.strip())[0]
    return word if _UNIT_RX.fullmatch(word) else RATE_UNIT_FALLBACK


def _bad_counts(text: str, why: str) -> UsageError:
    return bad_argument("counts", text, why, flag="-n", shown=text or repr(text))


def parse_counts(text: str) -> list[int]:
    """``"1,2,3,4"`` -> [1, 2, 3, 4]; ``"1-4"`` too. A clear UsageError for 0, negatives,
    non-integers and more than :data:`MAX_COUNT`."""
    out: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(-?\d+)(?:-(\d+))?", part)
        if not m:
            raise _bad_counts(text, f"{part!r} is not a whole number; give counts like 1,2,3,4")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if lo < 1 or hi < 1:
            raise _bad_counts(text, "copies must be 1 or more, like 1,2,3,4")
        if hi < lo:
            raise _bad_counts(text, f"the range {part} runs backwards")
        out.extend(range(lo, hi + 1))
    if not out:
        raise _bad_counts(text, "give the numbers of copies, like 1,2,3,4")
    if max(out) > MAX_COUNT:
        raise _bad_counts(text, f"at most {MAX_COUNT} copies at once")
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
) -> tuple[list[PackCopy], float, list[Sample], str]:
    samples: list[Sample] = []
    procs: list[tuple[subprocess.Popen[bytes], float, Path, Path]] = []
    run_id = new_run_id()  # in the copies' environment: finds what they leave running
    env = {**os.environ, RUN_ID_ENV: run_id}
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
                        env=env,
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
    return copies, wall, samples, run_id


def _leftovers(run_id: str, started: float, kill: bool) -> tuple[tuple[str, ...], bool]:
    """What a level's copies left running ("pid N: CMD" each), ended when ``kill``."""
    found = find_leftovers(run_id, command_pid=None, started=started)
    if kill and found:
        end_processes(found)
    lines = tuple(f"pid {lo.pid}: {strip_control(shlex.join(lo.cmdline))}" for lo in found)
    return lines, kill and bool(found)


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
    kill_leftovers: bool = False,
) -> PackReport:
    """Run ``counts[i]`` copies of ``cmd`` at once, level after level, and report each level's
    wall times, total throughput and slowdown, with the N to run. ``rate`` is a regular
    expression whose first group is a number the command prints (e.g. ``r"([\\d.]+) it/s"``).
    What the copies leave running when they exit is named (``pack-leftover-processes``), and
    with ``kill_leftovers`` ended before the next level starts."""
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
            raise bad_argument("rate", rate, f"not a regular expression: {exc}") from None
        if rate_rx.groups < 1:
            raise UsageError(
                f"--rate {rate!r} has no group: put the number in parentheses, e.g. "
                f"--rate '([0-9.]+) {rate.strip() or 'it/s'}'"
            )
    unit = "jobs/h" if rate is None else rate_unit(rate)
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
            started = time.time()
            copies, wall, samples, run_id = _run_level(
                cmd, executable, n, sampler, rate_rx, Path(tmp)
            )
            left, ended = _leftovers(run_id, started, kill_leftovers)
            lv = _level(n, copies, wall, samples, rate_rx is not None)
            lv = replace(
                lv,
                slowdown=slowdown_of(lv, levels[0] if levels else lv, rate_rx is not None),
                unit=unit,
                leftovers=left,
                leftovers_ended=ended,
            )
            levels.append(lv)
            if on_level is not None:
                on_level(lv)
    cores = usable_cores() or psutil.cpu_count() or 1
    report = PackReport(
        command=tuple(cmd),
        levels=tuple(levels),
        unit=unit,
        recommended=recommend(levels, cores=cores),
        cores=cores,
        load_average=tuple(round(x, 2) for x in load) if load else None,  # type: ignore[arg-type]
        sharing=sharing,
        rate_regex=rate,
    )
    return replace(report, findings=tuple(judge(report)))
