"""A stand-in for :class:`gpuprobe.platform.hardware.nvml.NvmlSession` that replays recorded GPU ticks.

Fed from a timeline (tests/data/monitor/*.jsonl, or any ``gpuprobe run`` recording): each
``sample(i)`` returns GPU ``i``'s next recorded reading (stamped now), looping at the end;
``processes(i)``/``process_utilization(i)`` return that tick's processes, with the recording's
main PID mapped to ``live_pid`` (the process being watched now). Use the instance as the
sampler's ``nvml=`` factory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpuprobe.platform.hardware.nvml import NvmlUnavailable
from gpuprobe.platform.hardware.types import Driver, Gpu, GpuProcess, GpuSample
from gpuprobe.tools.monitor.records import GpuTick
from gpuprobe.tools.monitor.timeline import read_timeline

__all__ = ["DATA", "ReplayNvml", "no_nvml"]

DATA = Path(__file__).resolve().parents[2] / "data" / "monitor"


class ReplayNvml:
    """Replays the GPU ticks of a recorded timeline through the NvmlSession interface."""

    def __init__(self, timeline: str | Path) -> None:
        path = Path(timeline)
        tl = read_timeline(path if path.is_absolute() or path.exists() else DATA / path)
        self.header = tl.header
        self.gpus: dict[int, Gpu] = {g.index: g for g in tl.header.gpus}
        self.ticks: dict[int, list[GpuTick]] = {
            i: [tick for _, tick in tl.gpu_ticks(i)] for i in self.gpus
        }
        self.recorded_pid = tl.header.pid
        self.live_pid: int | None = None
        self.reads: dict[int, int] = dict.fromkeys(self.gpus, 0)
        self.opened = 0

    @contextmanager
    def __call__(self) -> Iterator[ReplayNvml]:
        self.opened += 1
        yield self

    # -- the NvmlSession interface ------------------------------------------------------------
    def device_count(self) -> int:
        return len(self.gpus)

    def driver(self) -> Driver:
        return self.header.driver

    def gpu(self, index: int) -> Gpu:
        return self.gpus[index]

    def _current(self, index: int) -> GpuTick:
        ticks = self.ticks[index]
        return ticks[max(0, self.reads[index] - 1) % len(ticks)]

    def sample(self, index: int, *, pcie_throughput: bool = False) -> GpuSample:
        ticks = self.ticks[index]
        tick = ticks[self.reads[index] % len(ticks)]
        self.reads[index] += 1
        d = tick.sample.to_dict()
        d["time"] = time.time()
        if not pcie_throughput:
            d["pcie_rx_kbs"] = d["pcie_tx_kbs"] = None
        return GpuSample.from_dict(d)

    def _pid(self, pid: int) -> int | None:
        if pid == self.recorded_pid:
            return self.live_pid
        return pid

    def processes(self, index: int) -> tuple[GpuProcess, ...]:
        out = []
        for p in self._current(index).processes:
            pid = self._pid(p.pid)
            if pid is not None:
                out.append(GpuProcess(pid=pid, used_memory=p.used_memory))
        return tuple(out)

    def process_utilization(self, index: int, since_us: int) -> dict[int, int]:
        out = {}
        for p in self._current(index).processes:
            pid = self._pid(p.pid)
            if pid is not None and p.sm_percent is not None:
                out[pid] = p.sm_percent
        return out


@contextmanager
def no_nvml() -> Iterator[None]:
    """A session factory for a machine without a driver (as CI and this machine are)."""
    raise NvmlUnavailable("no-library", "NVML Shared Library Not Found (test: no driver)")
    yield None  # pragma: no cover
