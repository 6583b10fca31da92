"""The sampler on the real host (no GPU here): it tells a CPU-bound child from an idle one."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
from collections.abc import Callable

import pytest
from replay_nvml import ReplayNvml, no_nvml

from gpuprobe.core.errors import UsageError
from gpuprobe.tools.monitor.records import Sample, TreeSample
from gpuprobe.tools.monitor.sampler import Sampler

BUSY_CPU_S = 1.5  # CPU seconds the busy child burns
BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"
IDLE = "import time\ntime.sleep({s})\n"
# a parent that starts a busy child and waits for it: the tree must include the grandchild
PARENT = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', {busy!r}], check=True)\n"


def _record(code: str, hz: float = 10.0) -> list[Sample]:
    proc = subprocess.Popen([sys.executable, "-c", code])
    samples: list[Sample] = []
    with Sampler(hz=hz, pid=proc.pid, nvml=no_nvml) as s:
        s.start(samples.append)
        proc.wait()
        s.stop(final_sink=samples.append)
        assert s.error is None
        assert s.samples == len(samples)
    return samples


def _cpu_seconds(samples: list[Sample], pick: Callable[[TreeSample], float]) -> float:
    """CPU seconds recorded over the run: each sample's % of one core over the interval it
    covers, integrated. Unlike a median %, this does not depend on how loaded the machine is:
    a child that burns 1.5 s of CPU burns it however long the wall clock takes."""
    total = 0.0
    for prev, cur in itertools.pairwise(samples):
        if cur.tree is not None:
            total += pick(cur.tree) / 100.0 * (cur.t - prev.t)
    return total


def _wants(samples: list[Sample]) -> list[float]:
    return [
        x.tree.main_thread_runnable_percent
        for x in samples
        if x.tree is not None and x.tree.main_thread_runnable_percent is not None
    ]


def test_cpu_bound_and_idle_children_are_told_apart() -> None:
    busy = _record(BUSY.format(s=BUSY_CPU_S))
    idle = _record(IDLE.format(s=BUSY_CPU_S))
    busy_cpu_s = _cpu_seconds(busy, lambda t: t.cpu_percent)
    idle_cpu_s = _cpu_seconds(idle, lambda t: t.cpu_percent)
    # the busy child burns BUSY_CPU_S of CPU (plus interpreter start-up); the last interval
    # before it exits may be missed, so allow a sample period or two below
    assert 0.6 * BUSY_CPU_S < busy_cpu_s < 2.0 * BUSY_CPU_S, busy_cpu_s
    assert idle_cpu_s < 0.4, idle_cpu_s  # start-up of an interpreter, then sleep
    if sys.platform.startswith("linux"):
        # what the busiest thread wanted (ran + waited for a core) does not depend on the load
        assert statistics.median(_wants(busy)) > 70.0
        assert statistics.median(_wants(idle)) < 5.0
    # host side: every sample has every core, within 0-100
    for x in busy + idle:
        assert len(x.host.cpu_percent) >= 1
        assert all(0.0 <= c <= 100.0 for c in x.host.cpu_percent)
        assert x.host.memory_available and x.host.memory_used
    assert max(max(x.host.cpu_percent) for x in busy) > 25.0
    assert not any(x.gpus for x in busy)  # no driver: the host alone


def test_grandchildren_join_the_tree() -> None:
    samples = _record(PARENT.format(busy=BUSY.format(s=BUSY_CPU_S)))
    assert any(x.tree is not None and x.tree.children for x in samples), "grandchild never seen"
    kids_s = _cpu_seconds(samples, lambda t: sum(c.cpu_percent for c in t.children))
    main_s = _cpu_seconds(samples, lambda t: t.main_cpu_percent)
    # the grandchild's CPU is counted under the children; the parent itself only waits
    assert 0.6 * BUSY_CPU_S < kids_s < 2.0 * BUSY_CPU_S, kids_s
    assert main_s < 0.4, main_s


def test_sampler_times_increase_and_cost_is_counted() -> None:
    samples = _record(IDLE.format(s=0.6), hz=20.0)
    times = [x.t for x in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    cpu = [x.sampler_cpu_s for x in samples]
    assert cpu == sorted(cpu) and cpu[-1] > 0.0


def test_gpu_side_replays_through_the_sampler() -> None:
    replay = ReplayNvml("e9_starved.jsonl")
    with Sampler(hz=2.0, nvml=replay) as s:
        got = [s.take() for _ in range(5)]
    expected = [t.sample.utilization_gpu for t in replay.ticks[0][:5]]
    assert [x.gpus[0].sample.utilization_gpu for x in got] == expected
    assert s.driver.status == "ok" and s.gpus[0].name == "NVIDIA RTX A5000"


def test_hz_out_of_range() -> None:
    with pytest.raises(UsageError, match=r"hz=50: give 0\.1 to 20 samples per second"):
        Sampler(hz=50)
    with pytest.raises(UsageError):
        Sampler(hz=0)


@pytest.mark.gpu
def test_real_gpu_is_sampled() -> None:
    with Sampler(hz=2.0) as s:
        x = s.take()
    assert s.driver.status == "ok"
    assert len(x.gpus) == len(s.gpus) >= 1
    for tick in x.gpus:
        assert tick.sample.memory_used is not None and tick.sample.utilization_gpu is not None
