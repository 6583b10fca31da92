"""The sampler: every GPU through the NVML door, the host and a process tree through psutil.

One thread, on a drift-free schedule (tick ``k`` is due at ``start + k / hz``; a late tick is
taken at once and the ticks it overran are counted as missed, never bunched up). Each tick's CPU
time is measured with ``time.thread_time()`` and carried in every sample as a running total, so the
sampler's own cost is on disk even when gpuprobe is killed.

Per GPU and tick it reads the changing state (utilization, memory, power, temperature, clocks,
clock-event reasons, PCIe link; ``NvmlSession.sample``); what never changes (name, UUID, memory
total, limits, PCIe maximum) is read once at :meth:`Sampler.open`. The per-process reads cost
the most on a data-centre card's driver (each list is two calls, count then fill, that walk the
driver's clients), so they follow what they measure instead of the tick: the process lists are
read again when the card's used memory changed (a CUDA context starting or ending, or a process
allocating, moves it) and at least every :data:`PROCESS_LIST_MAX_AGE_S`; the per-process SM
samples every :data:`PROCESS_UTIL_PERIOD_S`, as often as the driver makes them. Between reads a
tick carries the last answer. What each kind of call cost is kept (:meth:`Sampler.cost_fields`).

Without a driver (``NvmlUnavailable``) the sampler records the host alone and says why.
Units: seconds, bytes, percent (see :mod:`gpuprobe.tools.monitor.records`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any, Protocol

import psutil

from gpuprobe.core.errors import UsageError
from gpuprobe.platform.hardware.host import read_host
from gpuprobe.platform.hardware.nvml import NvmlUnavailable, nvml_session
from gpuprobe.platform.hardware.types import Driver, Gpu, GpuProcess, GpuSample
from gpuprobe.tools.monitor.records import (
    GpuProcSample,
    GpuTick,
    HostSample,
    ProcSample,
    Sample,
    TimelineHeader,
    TreeSample,
)

__all__ = [
    "DEFAULT_HZ",
    "MAX_HZ",
    "MIN_HZ",
    "PROCESS_LIST_MAX_AGE_S",
    "PROCESS_UTIL_PERIOD_S",
    "TREE_RESCAN_S",
    "NvmlLike",
    "Sampler",
]

# samples/s; NVML's own utilization period is 1/6 s to 1 s (nvmlDeviceGetUtilizationRates docs)
DEFAULT_HZ = 2.0
MAX_HZ = 20.0  # samples/s; faster than NVML refreshes utilization, so nothing gained (nvitop #65)
MIN_HZ = 0.1  # samples/s
TREE_RESCAN_S = 1.0  # s between scans for new child processes (a scan reads every /proc/PID/stat)
# s: the longest a GPU's process list is reused while the card's used memory stands still (a
# context starting or ending changes it at once, and the list is read that tick)
PROCESS_LIST_MAX_AGE_S = 5.0
# s between reads of per-process SM samples: the driver makes one every 1/6 s to 1 s depending on
# the product (nvidia-smi(1), "utilization"), so reading faster returns nothing new on some cards
PROCESS_UTIL_PERIOD_S = 1.0


class NvmlLike(Protocol):
    """What the sampler needs from :class:`gpuprobe.platform.hardware.nvml.NvmlSession` (tests replay
    recorded samples through an object with these methods)."""

    def device_count(self) -> int: ...
    def gpu(self, index: int) -> Gpu: ...
    def sample(self, index: int, *, pcie_throughput: bool = False) -> GpuSample: ...
    def processes(self, index: int) -> tuple[GpuProcess, ...]: ...
    def process_utilization(self, index: int, since_us: int) -> dict[int, int]: ...


def _every(seconds: float, hz: float) -> int:
    """Ticks between reads of something worth reading every ``seconds`` at ``hz`` (at least 1)."""
    return max(1, round(seconds * hz))


@dataclass
class _GpuProcs:
    """One GPU's last per-process reads, carried between the ticks that read them."""

    since_us: int  # host µs of the last per-process utilization read
    procs: tuple[GpuProcess, ...] | None = None  # None: read on the next tick
    procs_tick: int = 0
    procs_memory: int | None = None  # the card's used memory when the list was read
    sm: dict[int, int] | None = None  # None: read on the next tick
    sm_tick: int = 0


NvmlFactory = Callable[[], AbstractContextManager[Any]]


def _busy_idle(t: Any) -> tuple[float, float]:
    """(total, busy) seconds of one core's times, as psutil.cpu_percent counts them: guest time
    is already inside user on Linux, and iowait is idle."""
    total = sum(t)
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    idle = t.idle + getattr(t, "iowait", 0.0)
    return total, total - idle


class _HostReader:
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


class _TreeReader:
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


class Sampler:
    """Samples every GPU, the host and (optionally) a process tree.

    Use as a context manager (it opens NVML), then either :meth:`take` samples yourself
    (``gpuprobe top``) or :meth:`start` the thread with a sink and :meth:`stop` it
    (``gpuprobe run``). ``nvml`` is the session factory, :func:`gpuprobe.platform.hardware.nvml.nvml_session`
    unless a test replays recorded samples.
    """

    def __init__(
        self,
        *,
        hz: float = DEFAULT_HZ,
        pid: int | None = None,
        pcie_throughput: bool = False,
        nvml: NvmlFactory = nvml_session,
        on_new_process: Callable[[psutil.Process], None] | None = None,
    ) -> None:
        if not MIN_HZ <= hz <= MAX_HZ:
            raise UsageError(f"--hz must be between {MIN_HZ:g} and {MAX_HZ:g}, not {hz:g}")
        self.hz = float(hz)
        self.pid = pid
        self.pcie_throughput = pcie_throughput
        self._nvml_factory = nvml
        self._on_new_process = on_new_process
        self._stack = ExitStack()
        self.session: NvmlLike | None = None
        self._counted: Any = None
        self.driver = Driver(status="no-library")
        self.gpus: tuple[Gpu, ...] = ()
        self._host: _HostReader | None = None
        self._tree: _TreeReader | None = None
        self._procs: dict[int, _GpuProcs] = {}
        self._ticks = 0  # samples taken (by the thread or by take() directly)
        self._procs_every = _every(PROCESS_LIST_MAX_AGE_S, self.hz)
        self._sm_every = _every(PROCESS_UTIL_PERIOD_S, self.hz)
        # the sampler thread's CPU seconds in each part of a tick (the sink is the rest)
        self.parts_cpu_s = {"host": 0.0, "tree": 0.0, "gpu": 0.0}
        self._thread: threading.Thread | None = None
        self._thread_native_id: int | None = None
        self._stop = threading.Event()
        self.cpu_s = 0.0  # the sampler thread's CPU seconds (ticks and sink together)
        self.samples = 0
        self.missed = 0
        self.started_mono: float | None = None
        self.stopped_mono: float | None = None
        self.error: BaseException | None = None

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> Sampler:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Open NVML (or note why not), read each GPU once, and take the psutil baselines."""
        try:
            session = self._stack.enter_context(self._nvml_factory())
        except NvmlUnavailable as exc:
            self.driver = Driver(status=exc.status, error=str(exc))
        else:
            gpus = []
            for i in range(session.device_count()):
                try:
                    gpus.append(session.gpu(i))
                except Exception:  # a card that fell off the bus must not stop the host side
                    gpus.append(Gpu(index=i))
            self.session = session
            self._counted = session  # its call counts outlive close()
            self.gpus = tuple(gpus)
            driver = getattr(session, "driver", None)
            try:
                self.driver = driver() if callable(driver) else Driver(status="ok")
            except Exception:
                self.driver = Driver(status="ok")
            if not gpus:
                self.driver = Driver(status="no-gpu", error="NVML works but sees no GPU")
        self._host = _HostReader()
        now_us = int(time.time() * 1e6)
        self._procs = {g.index: _GpuProcs(since_us=now_us - 1_000_000) for g in self.gpus}
        if self.pid is not None:
            self.watch(self.pid)

    def watch(self, pid: int) -> None:
        """Track ``pid`` and its descendants from now on."""
        self.pid = pid
        self._tree = _TreeReader(pid, exclude_tids=self._own_tids, on_new=self._on_new_process)

    def _own_tids(self) -> set[int]:
        return {self._thread_native_id} if self._thread_native_id is not None else set()

    def close(self) -> None:
        """Stop the thread if running and close NVML."""
        self.stop()
        self._stack.close()
        self.session = None

    @property
    def tree_pids(self) -> set[int]:
        """Every PID seen in the watched tree so far."""
        return set(self._tree.seen) if self._tree is not None else set()

    # -- one sample -----------------------------------------------------------------------------
    def take(self) -> Sample:
        """Read everything once, now."""
        if self._host is None:
            raise RuntimeError("Sampler.take() before open(); use 'with Sampler(...) as s'")
        t = time.time()
        parts = self.parts_cpu_s
        c0 = time.thread_time()
        host = self._host.read()
        c1 = time.thread_time()
        tree = None
        if self._tree is not None and not self._tree.gone:
            tree = self._tree.read(time.monotonic())
        c2 = time.thread_time()
        gpus = tuple(self._gpu_tick(g.index) for g in self.gpus) if self.session else ()
        c3 = time.thread_time()
        parts["host"] += c1 - c0
        parts["tree"] += c2 - c1
        parts["gpu"] += c3 - c2
        self._ticks += 1
        return Sample(t=t, host=host, tree=tree, gpus=gpus, sampler_cpu_s=round(self.cpu_s, 4))

    def _gpu_tick(self, index: int) -> GpuTick:
        session = self.session
        assert session is not None
        try:
            sample = session.sample(index, pcie_throughput=self.pcie_throughput)
        except Exception:  # NVML raised outside its query wrapper: keep the tick, n/a values
            return GpuTick(sample=GpuSample(index=index, time=time.time()))
        st = self._procs.setdefault(index, _GpuProcs(since_us=int(time.time() * 1e6) - 1_000_000))
        k = self._ticks
        procs: tuple[GpuProcess, ...] = ()
        sm: dict[int, int] = {}
        fresh = True
        try:
            if (
                st.procs is None
                or sample.memory_used is None
                or sample.memory_used != st.procs_memory
                or k - st.procs_tick >= self._procs_every
            ):
                st.procs = None  # read again next tick if this read raises
                st.procs = session.processes(index)
                st.procs_tick, st.procs_memory = k, sample.memory_used
            fresh = st.sm is None or k - st.sm_tick >= self._sm_every
            if fresh:
                st.sm = None
                now_us = int(time.time() * 1e6)
                st.sm = session.process_utilization(index, st.since_us)
                st.since_us, st.sm_tick = now_us, k
        except Exception:  # NVML raised outside its query wrapper: no processes this tick
            fresh = True
        else:
            procs, sm = st.procs or (), st.sm or {}
        pids = {p.pid: p for p in procs}
        if fresh:  # a PID with SM samples but on no list yet (it just started) is shown
            for pid in sm:
                pids.setdefault(pid, GpuProcess(pid=pid))
        return GpuTick(
            sample=sample,
            processes=tuple(
                GpuProcSample(pid=pid, used_memory=p.used_memory, sm_percent=sm.get(pid))
                for pid, p in sorted(pids.items())
            ),
        )

    # -- the thread -----------------------------------------------------------------------------
    def start(self, sink: Callable[[Sample], None]) -> None:
        """Sample on a daemon thread, passing each sample to ``sink`` (in that thread)."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(sink,), name="gpuprobe-sampler", daemon=True
        )
        self._thread.start()

    def stop(self, final_sink: Callable[[Sample], None] | None = None) -> None:
        """Stop the thread and wait for it; ``final_sink`` gets one last sample taken now."""
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join()
        self._thread = None
        if final_sink is not None and self._host is not None:
            c0 = time.thread_time()
            sample = self.take()
            final_sink(sample)
            self.cpu_s += time.thread_time() - c0
            self.samples += 1
        self.stopped_mono = time.monotonic()

    def _loop(self, sink: Callable[[Sample], None]) -> None:
        self._thread_native_id = threading.get_native_id()
        period = 1.0 / self.hz
        start = time.monotonic()
        self.started_mono = start
        k = 0
        last = -1e18
        try:
            while True:
                k += 1
                late = time.monotonic() - (start + k * period)
                if late >= period:  # whole slots overrun: skip them, count them
                    behind = int(late // period)
                    self.missed += behind
                    k += behind
                # never two samples closer than half a period (a late tick, then an on-time one)
                due = max(start + k * period, last + period / 2)
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
                last = time.monotonic()
                c0 = time.thread_time()
                sink(self.take())
                self.cpu_s += time.thread_time() - c0
                self.samples += 1
        except BaseException as exc:  # keep the reason; the owner reports it
            self.error = exc

    def header(
        self, *, started: float, command: tuple[str, ...] | None, pid: int | None
    ) -> TimelineHeader:
        """The timeline's first line for this sampler's machine and settings."""
        from gpuprobe._version import __version__

        return TimelineHeader(
            started=started,
            hz=self.hz,
            host=read_host(libraries=False),
            driver=self.driver,
            gpus=self.gpus,
            command=command,
            pid=pid,
            pcie_throughput=self.pcie_throughput,
            gpuprobe_version=__version__,
        )

    def end_fields(self) -> dict[str, Any]:
        """What the timeline's end line says about the sampler itself."""
        return {
            "samples": self.samples,
            "missed_ticks": self.missed,
            "sampler_cpu_s": round(self.cpu_s, 4),
            "sampler_wall_s": round(self.wall_s(), 4),
            "sampler_error": repr(self.error) if self.error else None,
            **self.cost_fields(),
        }

    def nvml_call_costs(self) -> dict[str, dict[str, float]]:
        """Per NVML entry point (and the process-name lookup): calls, wall ms and CPU ms so far,
        costliest CPU first; empty without NVML (or with a session that does not count)."""
        costs = getattr(self._counted, "call_costs", None)
        return costs() if callable(costs) else {}

    def cost_fields(self) -> dict[str, Any]:
        """Where the sampler's CPU went: ``sampler_parts_cpu_s`` (host, tree and GPU reads;
        the sink is the rest of ``sampler_cpu_s``) and ``nvml_call_ms`` (per call kind)."""
        return {
            "sampler_parts_cpu_s": {k: round(v, 4) for k, v in self.parts_cpu_s.items()},
            "nvml_call_ms": self.nvml_call_costs(),
        }

    def wall_s(self) -> float:
        """Seconds the thread has run (to now, or to :meth:`stop`)."""
        if self.started_mono is None:
            return 0.0
        return (self.stopped_mono or time.monotonic()) - self.started_mono

    def cost_percent(self) -> float | None:
        """The sampler's CPU time as % of one core over its run."""
        wall = self.wall_s()
        return 100.0 * self.cpu_s / wall if wall > 0 else None
