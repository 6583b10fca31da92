"""Issue 28, bench on a busy machine: runs that other processes stalled are told apart from the
work's time by their spread, the measurement goes on until its runs agree or a time budget is
spent, the size-skip extrapolates from the fastest pace, and a series that never agrees is
flagged. The times are scripted (a backend whose runs take what the test says, on a clock of
its own), so nothing here depends on how busy the test machine is."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.platform.frameworks.numpy import NumpyBackend
from gpuprobe.platform.hardware.types import Host
from gpuprobe.platform.inventory import Inventory
from gpuprobe.platform.measurement import MIN_AGREEING, Measurement, agreement
from gpuprobe.platform.timing import CHUNK, NAIVE_TIMER, agree_budget, measure
from gpuprobe.tools.bench.model import BenchResult, WorkerRun
from gpuprobe.tools.bench.rules import judge
from gpuprobe.tools.bench.workloads import Settings, matmul
from gpuprobe.tools.bench.workloads._common import best_pace, too_slow

STALL = 0.016  # a scheduler slice: what a 2-thread torch matmul took here with a core busy
FAST = (10.0e-6, 10.1e-6, 9.9e-6, 10.2e-6)  # the same 64x64 matmul on a free machine


class Scripted(NumpyBackend):
    """A backend whose runs take the scripted durations, on a clock each run advances."""

    def __init__(self, durations: Iterable[float]) -> None:
        super().__init__()
        self._next = iter(durations)
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        out = []
        for _ in range(n):
            d = next(self._next)
            self.now += d
            out.append(d)
        return out


def _measure(b: Scripted, busy: bool = False, budget_s: float = 0.03) -> Measurement:
    """As ``bench --quick`` measures: its budget, three runs at least."""
    return measure(
        "mm", lambda: None, b, budget_s=budget_s, min_runs=3, clock=b.clock, host_busy=lambda: busy
    )


def test_the_figure_comes_from_the_runs_that_agree() -> None:
    times = [STALL] * 20 + list(FAST) * 6  # 20 stalled runs among 44, interleaved below
    times = [t for pair in itertools.zip_longest(times[:20], times[20:]) for t in pair if t]
    a = agreement(times)
    assert (a.agreeing, a.n, a.trusted) == (24, 44, True)
    m = Measurement.from_times("mm", "torch", "cpu", times)
    assert m.trusted and m.slowed == 20 and m.n == 44
    assert m.median == pytest.approx(10.05e-6) and m.p80 < 10.3e-6  # all runs' p80: 16 ms
    assert m.min == 9.9e-6 and not m.too_spread
    d = m.to_dict()
    assert d["trusted"] is True and d["agreeing"] == 24
    assert Measurement.from_dict(d) == m


def test_a_series_that_never_agrees_is_flagged_with_all_its_runs() -> None:
    times = [1e-3, 2e-3, 3e-3, 5e-3, 8e-3, 13e-3] * 5
    a = agreement(times)
    assert not a.trusted and a.agreeing < a.n * 0.5
    m = Measurement.from_times("mm", "torch", "cpu", times)
    assert not m.trusted and m.too_spread and m.slowed == 0
    assert m.median == 4e-3  # every run's median: the time under that load, flagged
    assert m.to_dict()["trusted"] is False
    assert "not trustworthy" in str(m) and "never agreed" in repr(m)
    assert m.warning is not None and f"of {m.n} runs agree" in m.warning


def test_a_few_runs_that_agree_among_themselves_are_not_enough() -> None:
    # the float32 n=64: three runs stalled alike
    assert not agreement([0.013, 0.015, 0.016]).trusted
    # a short op's IQR under the timer's jitter agrees, whatever its share of the median
    tiny = [4.0e-6, 4.2e-6, 4.5e-6, 4.9e-6] * 5
    assert agreement(tiny).trusted


def test_measure_goes_on_past_a_stalled_start_until_the_runs_agree() -> None:
    # the float32 n=64 with one of two cores busy
    b = Scripted(itertools.chain([STALL] * 5, itertools.cycle(FAST)))
    m = _measure(b, busy=True)
    # before: three stalled runs spent the 0.03 s budget and 16 ms was the figure
    assert m.trusted and m.n > 5 and m.slowed == 5
    assert m.median == pytest.approx(10.05e-6, rel=0.01)
    assert b.now < agree_budget(0.03)  # it stopped once they agreed, before giving up


def test_measure_gives_up_after_its_budget_to_agree_and_flags_the_figure() -> None:
    durations = [1e-3, 2e-3, 3e-3, 5e-3, 8e-3]
    b = Scripted(itertools.cycle(durations))
    m = _measure(b)
    assert not m.trusted and m.too_spread
    assert agree_budget(0.03) <= b.now <= agree_budget(0.03) + CHUNK * max(durations)


def test_on_a_busy_host_a_streak_of_stalls_does_not_end_the_measurement() -> None:
    streak = [STALL] * 12  # 0.19 s of runs that agree on the stall
    busy = Scripted(itertools.chain(streak, itertools.cycle(FAST)))
    m = _measure(busy, busy=True)
    assert m.trusted and m.median == pytest.approx(10.05e-6, rel=0.01)
    # on a host nobody else uses, runs that agree end it at once: no time spent waiting
    idle = Scripted(itertools.chain(streak, itertools.cycle(FAST)))
    assert _measure(idle, busy=False).n == MIN_AGREEING


def test_size_skip_extrapolates_from_the_fastest_pace() -> None:
    w16, w64, w256 = 2.0 * 16**3, 2.0 * 64**3, 2.0 * 256**3
    m16 = Measurement.from_times("mm", "torch", "cpu", [2e-6] * 10)
    stalled = Measurement.from_times("mm", "torch", "cpu", [STALL] * 10)
    assert too_slow((w64, stalled), w256, 0.4) is not None  # what the last size alone says
    best = best_pace(best_pace(None, w16, m16), w64, stalled)
    assert best == (w16, m16) and too_slow(best, w256, 0.4) is None
    # a median stalled by a few runs: the minimum, not the median, is extrapolated
    mixed = Measurement.from_times("mm", "torch", "cpu", [STALL] * 6 + [8e-6] * 4)
    assert mixed.median > 1e-3 and too_slow((w64, mixed), w256, 0.4) is None
    never = Measurement.from_times("mm", "torch", "cpu", [0.02, 0.03, 0.05, 0.08, 0.13] * 4)
    why = too_slow((w64, never), w256, 0.4)
    assert why is not None and "never agreed" in why


def test_quick_matmul_measures_the_sizes_after_a_stalled_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def timed(b: Any, name: str, fn: Any, s: Any, **kw: Any) -> Measurement:
        n = kw["metadata"]["n"]
        times = [STALL] * 10 if n == 64 else [2.0 * n**3 / 50e9] * 10  # 50 GFLOP/s
        return Measurement.from_times(name, "numpy", "cpu", times, work=kw["work"])

    monkeypatch.setattr(matmul, "timed", timed)
    s = Settings(quick=True, sizes={"matmul": (16, 64, 256, 512)})
    results = list(matmul.run(NumpyBackend(), s))
    assert [(r.case, r.size) for r in results if not r.ok] == []
    assert len(results) == 8  # float64 and float32, four sizes each


def test_runs_disagree_finding_names_the_figures_and_the_host_load() -> None:
    never = Measurement.from_times("mm", "torch", "cpu", [0.02, 0.03, 0.05, 0.08, 0.13] * 4)
    fine = Measurement.from_times("mm", "torch", "cpu", list(FAST) * 3)
    results = [
        BenchResult("matmul", "float32", "torch", "cpu", 64, "n", measurement=never),
        BenchResult("matmul", "float64", "torch", "cpu", 512, "n", measurement=never),
        BenchResult("matmul", "float32", "torch", "cpu", 16, "n", measurement=fine),
    ]
    workers = [WorkerRun("torch", "cpu", others_cores=1.04)]
    inv = Inventory(host=Host(logical_cores=2, usable_cores=2))
    f = next(x for x in judge(results, workers, inv) if x.id == "bench-runs-disagree")
    assert f.status is Status.WARN
    assert "2 of 3 figures" in f.title and "1.0 of 2 cores busy" in f.title
    assert "matmul float32 64, matmul float64 512" in f.title
    ev = {e.name: e.value for e in f.evidence}
    assert ev["untrusted"] == 2 and ev["others_cores"] == 1.04 and ev["host_cores"] == 2
    assert "bench-runs-disagree" not in {x.id for x in judge(results[2:], workers, inv)}
    # E8's naive host clock is wrong by design: its spread is not judged
    naive = dataclasses.replace(never, timer=NAIVE_TIMER)
    shown = BenchResult("scale", "naive", "torch", "cpu", 5_000_000, "elements", measurement=naive)
    assert "bench-runs-disagree" not in {x.id for x in judge([shown], workers, inv)}
