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

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any, Protocol

import psutil

from gpuprobe.core.errors import bad_argument
from gpuprobe.platform.hardware.host import read_host
from gpuprobe.platform.hardware.nvml import NvmlUnavailable, nvml_session
from gpuprobe.platform.hardware.types import Driver, Gpu, GpuProcess, GpuSample
from gpuprobe.tools.monitor.readers import TREE_RESCAN_S, HostReader, TreeReader
from gpuprobe.tools.monitor.records import GpuProcSample, GpuTick, Sample, TimelineHeader

__all__ = [
    "DEFAULT_HZ",
    "MAX_HZ",
    "MIN_HZ",
    "PROCESS_LIST_MAX_AGE_S",
    "PROCESS_UTIL_PERIOD_S",
    "TREE_RESCAN_S",
    "NvmlLike",
    "Sampler",
    "check_hz",
]

# samples/s; NVML's own utilization period is 1/6 s to 1 s (nvmlDeviceGetUtilizationRates docs)
DEFAULT_HZ = 2.0
MAX_HZ = 20.0  # samples/s; faster than NVML refreshes utilization, so nothing gained (nvitop #65)
MIN_HZ = 0.1  # samples/s
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


def check_hz(hz: float) -> float:
    """``hz`` when the sampler can keep it (:data:`MIN_HZ` to :data:`MAX_HZ` samples/s), else a
    :class:`~gpuprobe.core.errors.UsageError`; callers check before they make any file."""
    if not MIN_HZ <= hz <= MAX_HZ:  # NaN fails too
        raise bad_argument("hz", hz, f"give {MIN_HZ:g} to {MAX_HZ:g} samples per second")
    return float(hz)


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
        self.hz = check_hz(hz)
        self.pid = pid
        self.pcie_throughput = pcie_throughput
        self._nvml_factory = nvml
        self._on_new_process = on_new_process
        self._stack = ExitStack()
        self.session: NvmlLike | None = None
        self._counted: Any = None
        self.driver = Driver(status="no-library")
        self.gpus: tuple[Gpu, ...] = ()
        self._host: HostReader | None = None
        self._tree: TreeReader | None = None
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
        self._host = HostReader()
        now_us = int(time.time() * 1e6)
        self._procs = {g.index: _GpuProcs(since_us=now_us - 1_000_000) for g in self.gpus}
        if self.pid is not None:
            self.watch(self.pid)

    def watch(self, pid: int) -> None:
        """Track ``pid`` and its descendants from now on."""
        self.pid = pid
        self._tree = TreeReader(pid, exclude_tids=self._own_tids, on_new=self._on_new_process)

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
        """Per NVML entry point (and the process-name lookup): calls, wall ms and CPU ms since
        NVML opened (the one inventory read of :meth:`open` included), costliest CPU first;
        empty without NVML (or with a session that does not count)."""
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
