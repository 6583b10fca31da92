"""event_times on a simulated GPU with its own clock: CUDA events time the device's work, not the
host's launch gaps (issue 30: on an idle H200 a one-element add timed 16-22 µs between its
events, triton.testing.do_bench 4 µs).

The simulation is deterministic: the host pays a fixed cost for each call that queues something
(an event, a kernel launch), the device runs what was queued in order, each item starting when
the device is free and the host has queued it. An event's time is when the device reaches it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuprobe.platform import timing
from gpuprobe.platform.frameworks import base
from gpuprobe.platform.frameworks.base import HOLD_MAX_S, Backend, event_times

EVENT_HOST_S = 1e-6  # host time to record an event
LAUNCH_HOST_S = 10e-6  # host time to launch a kernel from Python (framework overhead)
TINY_DEVICE_S = 2e-6  # device time of a one-element add


class Sim:
    """One host clock and one in-order device queue."""

    def __init__(self) -> None:
        self.host = 0.0
        self.device_free = 0.0
        self.holds: list[float] = []

    def enqueue(self, device_s: float, host_s: float) -> tuple[float, float]:
        self.host += host_s
        start = max(self.device_free, self.host)
        self.device_free = start + device_s
        return start, self.device_free

    def perf_counter(self) -> float:
        return self.host


class SimEvent:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.t = -1.0

    def record(self) -> None:
        self.t = self.sim.enqueue(0.0, EVENT_HOST_S)[1]


class SimBackend(Backend):
    framework = "sim"
    device = "cuda:0"

    def __init__(self, sim: Sim, holds: bool = True) -> None:
        self.sim = sim
        self.holds = holds

    @property
    def xp(self) -> Any:
        return None

    def asarray(self, a: Any) -> Any:
        return a

    def to_numpy(self, x: Any) -> Any:
        return x

    def synchronize(self) -> None:
        self.sim.host = max(self.sim.host, self.sim.device_free)

    def hold(self, seconds: float) -> None:
        if self.holds:
            self.sim.holds.append(seconds)
            self.sim.enqueue(seconds, LAUNCH_HOST_S)

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        return event_times(self, fn, n, setup, lambda: SimEvent(self.sim), lambda s, e: e.t - s.t)


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Sim:
    s = Sim()
    monkeypatch.setattr(base.time, "perf_counter", s.perf_counter)
    monkeypatch.setattr(timing.time, "perf_counter", s.perf_counter)
    return s


def kernel(sim: Sim, device_s: float, host_s: float = LAUNCH_HOST_S) -> Callable[[], None]:
    """A kernel launch: ``host_s`` of the host's time to queue, ``device_s`` of the device's."""

    def launch() -> None:
        sim.enqueue(device_s, host_s)

    return launch


def test_a_tiny_op_is_timed_as_its_device_time_not_its_launch(sim: Sim) -> None:
    m = timing.measure("tiny", kernel(sim, TINY_DEVICE_S), SimBackend(sim), budget_s=0.002)
    assert m.n > 100
    assert m.median == pytest.approx(TINY_DEVICE_S, rel=1e-9)
    assert max(m.times) == pytest.approx(TINY_DEVICE_S, rel=1e-9)  # every repetition, the first too
    # the holds were sized from the queueing the host did: 10 repetitions of 12 µs, twice over
    assert sim.holds[0] == pytest.approx(base.HOLD_FIRST_PER_REP_S * base.HOLD_MARGIN)
    assert sim.holds[-1] == pytest.approx(10 * (LAUNCH_HOST_S + 2 * EVENT_HOST_S) * 2)


def test_without_the_hold_the_events_time_the_launch_gap(sim: Sim) -> None:
    """The mistake the hold mends, shown on the same simulation: an event on an idle device fires
    at once, so its pair spans the host's launch of the op (what the H200 showed: 16-22 µs)."""
    m = timing.measure(
        "tiny", kernel(sim, TINY_DEVICE_S), SimBackend(sim, holds=False), budget_s=0.002
    )
    assert m.median == pytest.approx(LAUNCH_HOST_S + TINY_DEVICE_S, rel=1e-9)


def test_long_work_is_timed_the_same_with_or_without_the_hold(sim: Sim) -> None:
    gemm = kernel(sim, 1e-3)
    held = timing.measure("gemm", gemm, SimBackend(sim), budget_s=0.02)
    plain = timing.measure("gemm", gemm, SimBackend(sim, holds=False), budget_s=0.02)
    assert held.median == plain.median == pytest.approx(1e-3, rel=1e-9)


def test_setup_between_repetitions_stays_untimed(sim: Sim) -> None:
    flush = kernel(sim, 50e-6)  # an L2 flush before each repetition
    m = timing.measure(
        "tiny", kernel(sim, TINY_DEVICE_S), SimBackend(sim), budget_s=0.001, setup=flush
    )
    assert m.median == pytest.approx(TINY_DEVICE_S, rel=1e-9)


def test_a_slow_host_is_never_held_longer_than_the_cap(sim: Sim) -> None:
    slow = kernel(sim, TINY_DEVICE_S, host_s=0.02)  # 20 ms to launch: a very slow host
    b = SimBackend(sim)
    b.time(slow, 10)
    b.time(slow, 10)
    assert max(sim.holds) == HOLD_MAX_S


def test_torch_backend_names_the_current_cuda_device_by_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--device cuda`` crashed fit on the H200: torch 2.11's set_device wants an index."""
    torch = pytest.importorskip("torch")
    from gpuprobe.platform.frameworks.torch import TorchBackend

    chosen: list[Any] = []

    def set_device(dev: Any) -> None:  # torch 2.11's check, without a GPU
        if isinstance(dev, torch.device) and dev.index is None:
            raise ValueError(f"Expected a torch.device with a specified index, but got:{dev}")
        chosen.append(dev)

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    b = TorchBackend("cuda")
    assert b.device == "cuda:1" and b.is_gpu and chosen == [torch.device("cuda", 1)]
    assert TorchBackend("cuda:0").device == "cuda:0"
    assert TorchBackend("cpu").device == "cpu" and chosen[-1] == torch.device("cuda", 0)


def test_int8_right_operand_is_made_column_major_once() -> None:
    """torch._int_mm's fast int8 kernels take the right operand column-major; the copy is made
    once per operand, outside what a benchmark repeats, and again when the operand changes."""
    torch = pytest.importorskip("torch")
    from gpuprobe.platform.frameworks.torch import TorchBackend

    b = TorchBackend("cpu")
    c = torch.arange(12, dtype=torch.int8).reshape(3, 4)
    cm = b._column_major(c)
    assert torch.equal(cm, c) and cm.stride() == (1, 3)
    assert b._column_major(c) is cm  # the same operand: the same copy
    c.add_(1)
    again = b._column_major(c)
    assert again is not cm and torch.equal(again, c)
    assert b._column_major(cm) is cm  # already column-major: as it is
