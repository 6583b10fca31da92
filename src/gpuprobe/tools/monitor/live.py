"""The data behind ``gpuprobe top``: the recent samples of every GPU and the host, and what this
host knows of the processes on them (name, CPU %, RSS), kept by a :class:`TopView`.

Built on the same :class:`~gpuprobe.tools.monitor.sampler.Sampler` as ``gpuprobe run``. The screen
itself (rich bars, sparklines, tables, the live loop) is :mod:`gpuprobe.tools.monitor.show.top`.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from dataclasses import dataclass
from typing import Any

import psutil

from gpuprobe.core import render
from gpuprobe.core.text import strip_control
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.sampler import Sampler

__all__ = ["CPU_PROCESSES", "HISTORY", "Machine", "ProcessHost", "TopView"]

HISTORY = 60  # samples kept for the sparklines
CPU_PROCESSES = 8  # rows of the busiest-processes table shown when there is no GPU


@dataclass(frozen=True)
class Machine:
    """The host's name, cores, memory (bytes) and load average, read now."""

    hostname: str
    cores: int | None
    memory_total: int
    load_average: tuple[float, float, float] | None


@dataclass(frozen=True)
class ProcessHost:
    """A GPU process as this host sees it (None where it cannot: gone, or another PID
    namespace, as in a container without ``--pid=host``)."""

    name: str
    cpu_percent: float | None  # of one core, since the last reading
    rss: int | None  # bytes


class TopView:
    """Keeps the recent samples and what the host says of the processes in them."""

    def __init__(self, sampler: Sampler, history: int = HISTORY) -> None:
        self.sampler = sampler
        self.samples: deque[Sample] = deque(maxlen=history)
        self._procs: dict[int, psutil.Process] = {}
        self._cpu_procs: dict[int, psutil.Process] = {}

    def update(self, sample: Sample) -> None:
        """Add the newest sample."""
        self.samples.append(sample)

    def machine(self) -> Machine:
        """The host's name, cores, memory and load average."""
        load = None
        with contextlib.suppress(OSError, AttributeError):
            a, b, c = os.getloadavg()
            load = (a, b, c)
        return Machine(os.uname().nodename, psutil.cpu_count(), psutil.virtual_memory().total, load)

    def gpu_lost(self, index: int) -> bool:
        """True when NVML says the GPU ``index`` has fallen off the bus."""
        g = next((g for g in self.sampler.gpus if g.index == index), None)
        session_lost: Any = getattr(self.sampler.session, "lost", None)
        return (g is not None and g.lost) or (callable(session_lost) and session_lost(index))

    def process_host(self, pid: int) -> ProcessHost:
        """Name, CPU % and RSS of a GPU process as this host sees it."""
        p = self._procs.get(pid)
        try:
            if p is None:
                p = self._procs[pid] = psutil.Process(pid)
                p.cpu_percent(None)
            with p.oneshot():
                return ProcessHost(
                    strip_control(p.name()), p.cpu_percent(None), p.memory_info().rss
                )
        except psutil.Error:  # gone, or another PID namespace (a container without --pid=host)
            self._procs.pop(pid, None)
            return ProcessHost("?", None, None)

    def cpu_processes(self, n: int = CPU_PROCESSES) -> list[tuple[int, str, str, float, int]]:
        """The ``n`` processes using the most CPU since the last call: (pid, name, user, CPU %
        of one core, RSS bytes), busiest first. A process's first reading is 0 %."""
        rows = []
        seen = set()
        for p in psutil.process_iter(["pid", "name", "username"]):
            pid = p.info["pid"]
            seen.add(pid)
            proc = self._cpu_procs.setdefault(pid, p)
            try:
                with proc.oneshot():
                    cpu = proc.cpu_percent(None)
                    rss = proc.memory_info().rss
            except psutil.Error:
                continue
            rows.append((pid, p.info["name"] or "?", p.info["username"] or "?", cpu, rss))
        for gone in set(self._cpu_procs) - seen:
            del self._cpu_procs[gone]
        rows.sort(key=lambda r: (-r[3], -r[4]))
        return rows[:n]

    def render(self) -> Any:
        """The whole screen, as a rich renderable (:func:`gpuprobe.tools.monitor.show.top.render_top`)."""
        return render.renderable(self)
