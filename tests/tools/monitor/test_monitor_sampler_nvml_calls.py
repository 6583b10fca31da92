"""What the sampler asks NVML each tick, counted at the C entry points.

The real pynvml runs over the fake NVML library (tests/fakes/nvml_lib.py), which records every C
call. The H200 of the GPU sweep (issue 30) showed the sampler at 3.41 ms of CPU per sample
watching one torch process, ~2.7 ms of it reading the GPU: the per-process reads (two process
lists and the per-process SM samples, each a count call and a fill call that walk the driver's
clients) are made as often as what they measure changes, not every tick; what never changes is
read once; a call this card or driver cannot answer is not asked again. Counts are exact (ticks
are taken with ``take()``, so the schedule is the tick count, not the clock); no time is asserted.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from _support import snapshot_dict
from fakes.nvml_lib import DRIVER_ERRORS
from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.records import GpuProcSample
from gpuprobe.tools.monitor.rules.recording import _costliest_call
from gpuprobe.tools.monitor.run import run_command
from gpuprobe.tools.monitor.sampler import (
    PROCESS_LIST_MAX_AGE_S,
    PROCESS_UTIL_PERIOD_S,
    Sampler,
)
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME, read_timeline

PID = 4242
GIB = 2**30
HZ = 2.0
TICKS = 20
LIST_EVERY = round(PROCESS_LIST_MAX_AGE_S * HZ)  # 10 ticks at 2 Hz
SM_EVERY = round(PROCESS_UTIL_PERIOD_S * HZ)  # 2 ticks at 2 Hz

# Read once when the sampler opens (Sampler.gpus), never per tick.
STATIC_CALLS = (
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetMemoryBusWidth",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetNumGpuCores",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetMigMode",
)
# The changing state: once per tick each (the two clocks: SM and memory).
PER_TICK_CALLS = {
    "nvmlDeviceGetUtilizationRates": 1,
    "nvmlDeviceGetMemoryInfo": 1,
    "nvmlDeviceGetPowerUsage": 1,
    "nvmlDeviceGetTemperature": 1,
    "nvmlDeviceGetClockInfo": 2,
    "nvmlDeviceGetCurrentClocksEventReasons": 1,
    "nvmlDeviceGetCurrPcieLinkGeneration": 1,
    "nvmlDeviceGetCurrPcieLinkWidth": 1,
}


def _snapshot(*pids: int) -> dict[str, Any]:
    """h200.json with compute processes of 1 GiB each, on a driver without the reserve split
    (nvmlDeviceGetMemoryInfo_v2 not supported; the H200's own driver had it)."""
    snap = snapshot_dict("h200.json")
    g = snap["gpus"][0]
    g["memory_reserved"] = None
    g["processes"] = [
        {"pid": pid, "name": None, "used_memory": GIB, "kind": "compute"} for pid in pids
    ]
    g["memory_used"] = len(pids) * GIB
    return snap


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The PIDs whose process name was looked up (the fake PIDs are not real processes)."""
    looked: list[int] = []

    def name(pid: int) -> str:
        looked.append(pid)
        return f"proc{pid}"

    monkeypatch.setattr("gpuprobe.platform.hardware.nvml._process_name", name)
    return looked


def _ticks(lib: Any, n: int, sampler: Sampler) -> tuple[list[Any], Counter[str]]:
    start = len(lib.calls)
    ticks = [sampler.take() for _ in range(n)]
    return ticks, Counter(lib.calls[start:])


def test_per_process_reads_are_not_made_every_tick(fake_nvml: Any, names: list[int]) -> None:
    lib = fake_nvml(_snapshot(PID), utilization_samples={0: [(PID, 37)]})
    with Sampler(hz=HZ) as s:
        ticks, calls = _ticks(lib, TICKS, s)
    # the changing state, every tick
    for name, per_tick in PER_TICK_CALLS.items():
        assert calls[name] == per_tick * TICKS, name
    # what never changes: read at open only
    assert [calls[name] for name in STATIC_CALLS] == [0] * len(STATIC_CALLS)
    # used memory stood still: the lists are read at ticks 0 and 10 only; a list with a process
    # is two C calls (count, then fill), an empty one a single call
    reads = TICKS // LIST_EVERY
    assert reads == 2
    assert calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 2 * reads
    assert calls["nvmlDeviceGetGraphicsRunningProcesses_v3"] == 1 * reads
    # the per-process SM samples every second tick (count, then fill): 10 reads, not 20
    assert calls["nvmlDeviceGetProcessUtilization"] == 2 * (TICKS // SM_EVERY) == 20
    # 9 C calls per tick for the state plus 26 for the processes over 20 ticks: before, each tick
    # also read both lists and the SM samples (5 more) and tried the v2 memory call first (1 more);
    # the energy counter is tried once: this card has none (NOT_SUPPORTED), which lasts
    assert calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert sum(calls.values()) == 9 * TICKS + 2 * reads + reads + 20 + 1 == 207
    # and every tick still shows the process, its memory and its SM %; its name was looked up once
    expected = (GpuProcSample(pid=PID, used_memory=GIB, sm_percent=37),)
    assert [t.gpus[0].processes for t in ticks] == [expected] * TICKS
    assert names == [PID]


def test_a_process_that_starts_or_ends_shows_the_same_tick(
    fake_nvml: Any, names: list[int]
) -> None:
    lib = fake_nvml(_snapshot(PID), utilization_samples={0: [(PID, 37)]})
    g = lib.gpus[0]
    with Sampler(hz=HZ) as s:
        assert [p.pid for p in s.take().gpus[0].processes] == [PID]
        assert [p.pid for p in s.take().gpus[0].processes] == [PID]  # carried: no list read
        # a second process makes its CUDA context: the card's used memory moves
        g["processes"].append({"pid": 5151, "name": None, "used_memory": GIB, "kind": "compute"})
        g["memory_used"] += GIB
        start = len(lib.calls)
        tick = s.take()
        assert lib.calls[start:].count("nvmlDeviceGetComputeRunningProcesses_v3") == 2
        assert [(p.pid, p.used_memory) for p in tick.gpus[0].processes] == [
            (PID, GIB),
            (5151, GIB),
        ]
        # the first one ends: gone the tick its memory is freed, though its SM % of the last
        # read is still being carried for the others
        g["processes"].pop(0)
        g["memory_used"] -= GIB
        lib.utilization_samples[0] = [(5151, 12)]
        assert [p.pid for p in s.take().gpus[0].processes] == [5151]
    assert names == [PID, 5151]  # each name once


def test_a_list_is_read_again_after_its_longest_age_even_if_memory_stands_still(
    fake_nvml: Any, names: list[int]
) -> None:
    # A process that leaves while another allocates the same amount leaves used memory where
    # it was: the list is no older than PROCESS_LIST_MAX_AGE_S all the same.
    lib = fake_nvml(_snapshot(PID, 5151), utilization_samples={0: [(PID, 37)]})
    with Sampler(hz=HZ) as s:
        s.take()
        lib.gpus[0]["processes"] = [
            {"pid": 5151, "name": None, "used_memory": 2 * GIB, "kind": "compute"}
        ]
        lib.utilization_samples[0] = [(5151, 12)]
        seen = [[p.pid for p in s.take().gpus[0].processes] for _ in range(LIST_EVERY)]
    assert seen == [[PID, 5151]] * (LIST_EVERY - 1) + [[5151]]


def test_sm_percent_is_carried_between_reads_and_averaged_within_one(
    fake_nvml: Any, names: list[int]
) -> None:
    lib = fake_nvml(_snapshot(PID), utilization_samples={0: [(PID, 37)]})
    with Sampler(hz=HZ) as s:
        got = [s.take().gpus[0].processes[0].sm_percent]
        lib.utilization_samples[0] = [(PID, 30), (PID, 50)]  # two driver samples since the read
        got += [s.take().gpus[0].processes[0].sm_percent for _ in range(3)]
        lib.utilization_samples.pop(0)  # no sample since: NVML answers NOT_FOUND
        got += [s.take().gpus[0].processes[0].sm_percent for _ in range(2)]
    # read, carried, read (the mean of 30 and 50), carried, read (nothing new: n/a), carried
    assert got == [37, 37, 40, 40, None, None]


def test_an_answer_that_lasts_is_not_asked_again(fake_nvml: Any, names: list[int]) -> None:
    snap = _snapshot(PID)
    snap["gpus"][0]["power_draw_w"] = None  # this card has no power reading: NOT_SUPPORTED
    lib = fake_nvml(
        snap,
        utilization_samples={0: [(PID, 37)]},
        missing={"nvmlDeviceGetCurrentClocksEventReasons"},  # an older driver: R450's name only
        errors={"nvmlDeviceGetTemperature": DRIVER_ERRORS["Unknown"]},  # not lasting: re-asked
    )
    with Sampler(hz=HZ) as s:
        ticks, calls = _ticks(lib, TICKS, s)
        costs = s.nvml_call_costs()
    everything = Counter(lib.calls)
    assert everything["nvmlDeviceGetPowerUsage"] == 1  # asked once, at open
    assert everything["nvmlDeviceGetMemoryInfo_v2"] == 1  # no reserve split on this driver
    assert calls["nvmlDeviceGetMemoryInfo"] == TICKS  # v1 straight away
    # the missing symbol is never in the C calls; pynvml was asked for it once (at open)
    assert costs["nvmlDeviceGetCurrentClocksEventReasons"]["calls"] == 1
    assert calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == TICKS
    assert calls["nvmlDeviceGetTemperature"] == TICKS  # an error that may pass is asked again
    s0 = ticks[-1].gpus[0].sample
    assert (s0.power_w, s0.temperature_c, s0.memory_used) == (None, None, GIB)
    assert s0.clock_event_reasons == ("gpu_idle",)


def test_the_sampler_counts_what_each_call_kind_cost(fake_nvml: Any, names: list[int]) -> None:
    lib = fake_nvml(_snapshot(PID), utilization_samples={0: [(PID, 37)]})
    with Sampler(hz=HZ) as s:
        _ticks(lib, TICKS, s)
        costs = s.nvml_call_costs()
        fields = s.end_fields()
    assert fields["nvml_call_ms"] == costs
    # pynvml-level calls: open's inventory read (Sampler.gpus) once, then the ticks
    assert costs["nvmlDeviceGetUtilizationRates"]["calls"] == 1 + TICKS
    assert costs["nvmlDeviceGetProcessUtilization"]["calls"] == TICKS // SM_EVERY
    assert costs["nvmlDeviceGetComputeRunningProcesses_v3"]["calls"] == 1 + TICKS // LIST_EVERY
    assert costs["psutil.Process.name"]["calls"] == 1
    assert all(c["wall_ms"] >= 0 and c["cpu_ms"] >= 0 for c in costs.values())
    cpu = [c["cpu_ms"] for c in costs.values()]
    assert cpu == sorted(cpu, reverse=True)  # costliest first
    assert set(fields["sampler_parts_cpu_s"]) == {"host", "tree", "gpu"}


def test_a_recording_names_its_costliest_nvml_call(
    fake_nvml: Any, names: list[int], tmp_path: Path
) -> None:
    fake_nvml(_snapshot(PID), utilization_samples={0: [(PID, 37)]})
    run_command([sys.executable, "-c", "pass"], tmp_path, hz=20.0)
    tl = read_timeline(tmp_path / TIMELINE_NAME)
    assert tl.end is not None
    calls = tl.end["nvml_call_ms"]
    # one utilization read per sample (the final one included) and one when the sampler opened
    assert calls["nvmlDeviceGetUtilizationRates"]["calls"] == tl.end["samples"] + 1
    finding = next(f for f in summarize(tl).findings if f.id == "monitor-sampler-cost")
    ev = {e.name: e.value for e in finding.evidence}
    assert ev["costliest_nvml_call"] in calls
    assert ev["its_cpu_per_sample"] <= ev["nvml_cpu_per_sample"]


@pytest.mark.parametrize(
    "end",
    [
        None,
        {},
        {"nvml_call_ms": "damaged"},
        {"nvml_call_ms": {"x": {"cpu_ms": float("nan")}, "y": 3, "z": {"cpu_ms": True}}},
    ],
)
def test_a_recording_without_call_costs_names_none(end: Any) -> None:
    assert _costliest_call(end, 10) == ()


def test_call_costs_are_read_from_the_end_line() -> None:
    end = {"nvml_call_ms": {"a": {"cpu_ms": 2.0}, "b": {"cpu_ms": 6.0}}}
    ev = {e.name: e.value for e in _costliest_call(end, 4)}
    assert ev == {"nvml_cpu_per_sample": 2.0, "costliest_nvml_call": "b", "its_cpu_per_sample": 1.5}


@pytest.mark.gpu
def test_real_driver_calls_are_counted_per_kind() -> None:
    # On a card: the same schedule against the real driver, and the costs the next sweep reads
    # (printed with -s: which call kind costs the most on this card).
    with Sampler(hz=HZ) as s:
        for _ in range(4):
            s.take()
        costs = s.nvml_call_costs()
    assert costs["nvmlDeviceGetUtilizationRates"]["calls"] == 1 + 4
    assert costs["nvmlDeviceGetProcessUtilization"]["calls"] == 4 // SM_EVERY
    lists = costs.get("nvmlDeviceGetComputeRunningProcesses_v3", {"calls": 0})["calls"]
    assert 1 <= lists <= 1 + 4  # at open, then only when used memory moved
    for name, c in costs.items():
        print(f"{name:<44} {c['calls']:>4} calls {c['cpu_ms'] / c['calls']:8.3f} ms CPU each")
