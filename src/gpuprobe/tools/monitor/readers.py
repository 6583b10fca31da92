"""What the sampler reads from the host through psutil and /proc: per-core CPU, memory and swap
(:class:`HostReader`), and a watched process with its descendants (:class:`TreeReader`: CPU,
RSS, threads, I/O rates, and the busiest thread of the main process).

Units: seconds, bytes, percent (see :mod:`gpuprobe.tools.monitor.records`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from gpuprobe.tools.monitor.records import HostSample, ProcSample, TreeSample

__all__ = ["TREE_RESCAN_S", "HostReader", "ProcessNames", "TreeReader"]

TREE_RESCAN_S = 1.0  # s between scans for new child processes (a scan reads every /proc/PID/stat)


def _busy_idle(t: Any) -> tuple[float, float]:
    """(total, busy) seconds of one core's times, as psutil.cpu_percent counts them: guest time
    is already inside user on Linux, and iowait is idle."""
    total = sum(t)
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    idle = t.idle + getattr(t, "iowait", 0.0)
    return total, total - idle


class ProcessNames:
    """pid -> its process name (``psutil.Process.name()``, control characters taken out), each
    read once and kept while the pid lives with the same start time (a reused pid is read
    again); ``""`` for a process this PID namespace cannot see (a container without
    ``--pid=host``) or one that has gone. At most ``keep`` pids are kept."""

    def __init__(self, keep: int = 4096) -> None:
        self._names: dict[int, tuple[float, str]] = {}
        self._keep = keep

    def __call__(self, pid: int) -> str:
        from gpuprobe.core.text import strip_control

        try:
            p = psutil.Process(pid)
            started = p.create_time()
            known = self._names.get(pid)
            if known is not None and known[0] == started:
                return known[1]
            name = strip_control(p.name())
        except psutil.Error:
            self._names.pop(pid, None)
            return ""
        if len(self._names) >= self._keep:
            self._names.clear()
        self._names[pid] = (started, name)
        return name


class HostReader:
    """Per-core CPU % from our own deltas of ``psutil.cpu_times(percpu=True)`` (not
    ``psutil.cpu_percent``, whose state is global and would be shared with other callers)."""

    def __init__(self) -> None:
        self._last = [_busy_idle(t) for t in psutil.cpu_times(percpu=True)]

    def read(self) -> HostSample:
        now = [_busy_idle(t) for t in psutil.cpu_times(percpu=True)]
        cores = []
        for (t0, b0), (t1, b1) in zip(self._last, now, strict=False):
            dt = t1 - t0
            cores.append(round(min(100.0, max(0.0, 100.0 * (b1 - b0) / dt)), 1) if dt > 0 else 0.0)
        self._last = now
        vm = psutil.virtual_memory()
        try:
            swap = int(psutil.swap_memory().used)
        except (OSError, RuntimeError):
            swap = None
        return HostSample(
            cpu_percent=tuple(cores),
            memory_used=int(vm.used),
            memory_available=int(vm.available),
            swap_used=swap,
        )


@dataclass
class _ProcState:
    proc: psutil.Process
    cpu_s: float | None = None
    io: tuple[int, int] | None = None


class TreeReader:
    """The process ``pid`` and its descendants: CPU %, RSS, threads, I/O rates; and the busiest
    thread of the main process (a single pegged core is E9's bottleneck: docs/experiments.md#e9)."""

    def __init__(
        self,
        pid: int,
        *,
        exclude_tids: Callable[[], set[int]] = set,
        on_new: Callable[[psutil.Process], None] | None = None,
    ) -> None:
        self.pid = pid
        self.main = psutil.Process(pid)
        self._states: dict[int, _ProcState] = {}
        self._threads: dict[int, tuple[float, float | None]] = {}
        self._last_t: float | None = None
        self._last_scan = -1e18
        self._exclude_tids = exclude_tids
        self._on_new = on_new
        self.gone = False
        self.seen: set[int] = {pid}
        self._max_pct = 100.0 * (psutil.cpu_count() or 1)
        self._schedstat = os.path.exists(f"/proc/{pid}/schedstat")
        self._proc_children = os.path.exists(f"/proc/{pid}/task/{pid}/children")
        self._add(self.main)
        self._threads = self._read_threads()
        self._last_t = time.monotonic()

    def _add(self, proc: psutil.Process) -> None:
        state = _ProcState(proc)
        state.cpu_s = self._read(state)[0]  # the baseline; raises if already gone
        state.io = self._io(proc)
        self._states[proc.pid] = state
        self.seen.add(proc.pid)
        if self._on_new is not None and proc.pid != self.pid:
            self._on_new(proc)

    @staticmethod
    def _read(state: _ProcState) -> tuple[float, int | None, int | None]:
        """(cpu seconds, rss, threads) and the I/O counters into ``state``; raises on a gone
        process."""
        p = state.proc
        with p.oneshot():
            ct = p.cpu_times()
            cpu = float(ct.user + ct.system)
            try:
                mem = p.memory_info()
                rss: int | None = int(mem.rss)
            except psutil.AccessDenied:
                rss = None
            try:
                threads: int | None = int(p.num_threads())
            except psutil.AccessDenied:
                threads = None
        return cpu, rss, threads

    def _io(self, p: psutil.Process) -> tuple[int, int] | None:
        try:
            io = p.io_counters()
        except (psutil.AccessDenied, AttributeError, NotImplementedError):
            return None
        r = getattr(io, "read_chars", None)
        w = getattr(io, "write_chars", None)
        if r is None or w is None:  # not Linux: storage bytes are the best there is
            r, w = io.read_bytes, io.write_bytes
        return int(r), int(w)

    def _read_threads(self) -> dict[int, tuple[float, float | None]]:
        """tid -> (CPU seconds, seconds running or waiting to run). The second comes from
        ``/proc/PID/task/TID/schedstat`` (Linux): a thread that always wants a core shows ~100 %
        there even when other processes take the core from it, where CPU time alone drops.
        Where that file exists its first figure (ns on a CPU, user and system) is the CPU time
        too, so each thread costs one small read, not psutil's ``stat`` read and then this one
        (a torch process has a dozen threads or more)."""
        if self._schedstat:
            return self._read_schedstat()
        try:
            threads = self.main.threads()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return {}
        skip = self._exclude_tids()
        out: dict[int, tuple[float, float | None]] = {}
        for t in threads:
            if t.id in skip:
                continue
            runnable = None
            if self._schedstat:
                try:
                    with open(f"/proc/{self.pid}/task/{t.id}/schedstat", "rb") as f:
                        run_ns, wait_ns = f.read().split()[:2]
                    runnable = (int(run_ns) + int(wait_ns)) / 1e9
                except (OSError, ValueError):
                    runnable = None
            out[t.id] = (t.user_time + t.system_time, runnable)
        return out

    def _read_schedstat(self) -> dict[int, tuple[float, float | None]]:
        task = f"/proc/{self.pid}/task"
        try:
            tids = os.listdir(task)
        except OSError:  # gone
            return {}
        skip = self._exclude_tids()
        out: dict[int, tuple[float, float | None]] = {}
        for name in tids:
            try:
                tid = int(name)
                if tid in skip:
                    continue
                with open(f"{task}/{name}/schedstat", "rb") as f:
                    run_ns, wait_ns = f.read().split()[:2]
                run = int(run_ns)
                out[tid] = (run / 1e9, (run + int(wait_ns)) / 1e9)
            except (OSError, ValueError):  # a thread that ended between the listing and the read
                continue
        return out

    def _descendants(self) -> list[int] | None:
        """PIDs below the main process from ``/proc/PID/task/TID/children`` (Linux 4.2+ with
        CONFIG_PROC_CHILDREN): cost grows with the tree, not with the machine's process table.
        None when the kernel lacks it."""
        if not self._proc_children:
            return None
        found: list[int] = []
        stack = [self.pid]
        while stack:
            pid = stack.pop()
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                        kids = [int(x) for x in f.read().split()]
                except (OSError, ValueError):
                    continue
                found.extend(kids)
                stack.extend(kids)
        return found

    def scan(self) -> None:
        """Pick up new descendants."""
        pids = self._descendants()
        if pids is None:  # psutil reads the whole process table to find children
            try:
                children = self.main.children(recursive=True)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                return
        else:
            children = []
            for pid in pids:
                if pid not in self._states:
                    with contextlib.suppress(psutil.Error):
                        children.append(psutil.Process(pid))
        for child in children:
            if child.pid not in self._states:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
                    self._add(child)

    def read(self, now: float) -> TreeSample | None:
        if now - self._last_scan >= TREE_RESCAN_S:
            self.scan()
            self._last_scan = now
        dt = None if self._last_t is None else now - self._last_t
        self._last_t = now
        total_cpu = 0.0
        main_cpu = 0.0
        rss_sum = threads_sum = n = 0
        read_b = write_b = 0.0
        have_io = False
        children: list[ProcSample] = []
        for pid, state in list(self._states.items()):
            try:
                cpu_s, rss, nthreads = self._read(state)
                io = self._io(state.proc)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                del self._states[pid]
                continue
            except psutil.AccessDenied:
                continue
            pct = 0.0
            if dt and dt > 0 and state.cpu_s is not None:
                # clamp: /proc ticks are 10 ms and a late tick on a loaded VM can overshoot
                pct = min(self._max_pct, max(0.0, 100.0 * (cpu_s - state.cpu_s) / dt))
            if io is not None and state.io is not None and dt and dt > 0:
                read_b += max(0, io[0] - state.io[0]) / dt
                write_b += max(0, io[1] - state.io[1]) / dt
                have_io = True
            state.cpu_s, state.io = cpu_s, io
            n += 1
            total_cpu += pct
            rss_sum += rss or 0
            threads_sum += nthreads or 0
            if pid == self.pid:
                main_cpu = pct
            else:
                children.append(
                    ProcSample(pid=pid, cpu_percent=round(pct, 1), rss=rss, threads=nthreads)
                )
        if n == 0:
            self.gone = True
            return None
        top = runnable = None
        threads_now = self._read_threads()
        if dt and dt > 0 and threads_now:
            best: tuple[float, int] | None = None
            for tid, (cpu, _) in threads_now.items():
                if tid in self._threads:
                    d = max(0.0, cpu - self._threads[tid][0])
                    if best is None or d > best[0]:
                        best = (d, tid)
            if best is not None:
                top = round(min(100.0, 100.0 * best[0] / dt), 1)
                now_r, last_r = threads_now[best[1]][1], self._threads[best[1]][1]
                if now_r is not None and last_r is not None:
                    runnable = round(min(100.0, max(0.0, 100.0 * (now_r - last_r) / dt)), 1)
            else:
                top = 0.0
        self._threads = threads_now
        return TreeSample(
            cpu_percent=round(total_cpu, 1),
            rss=rss_sum,
            threads=threads_sum,
            processes=n,
            read_bps=round(read_b, 1) if have_io else None,
            write_bps=round(write_b, 1) if have_io else None,
            main_cpu_percent=round(main_cpu, 1),
            main_thread_max_percent=top,
            main_thread_runnable_percent=runnable,
            children=tuple(children),
        )
