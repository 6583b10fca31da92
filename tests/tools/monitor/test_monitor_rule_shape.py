"""The monitor's rules (a recording's, each used GPU's, and ``gpuprobe pack``'s) have the one rule
shape (:mod:`gpuprobe.core.rules`): each is a ``Rule``, and none emits a finding id it does not
declare, on the recorded timelines and on the synthetic ones the rule tests use."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tl_builder import GIB, MAIN_PID, build

from gpuprobe.core.rules import Rule, apply_rules, declared_ids, undeclared
from gpuprobe.tools.monitor.pack_model import PackCopy, PackLevel, PackReport, Sharing
from gpuprobe.tools.monitor.rules import GPU_RULES, RULES, each_used_gpu
from gpuprobe.tools.monitor.rules import pack as pack_rules
from gpuprobe.tools.monitor.summary import run_context
from gpuprobe.tools.monitor.timeline import Timeline, read_timeline

DATA = Path(__file__).resolve().parents[2] / "data" / "monitor"

SYNTHETIC = {
    "e9": lambda: build(
        util=lambda i: 7, main_thread=lambda i: 99.0, host_cpu=lambda i: (99.0,) + (3.0,) * 7
    ),
    "healthy": lambda: build(util=lambda i: 95 + i % 4),
    "loaders": lambda: build(
        util=lambda i: 5, main_thread=lambda i: 10.0, children=lambda i: (95.0, 97.0)
    ),
    "host_saturated": lambda: build(util=lambda i: 10, host_cpu=lambda i: (97.0,) * 8),
    "memory_full": lambda: build(mem=lambda i: int(23.5 * GIB)),
    "memory_room": lambda: build(util=lambda i: 30, mem=lambda i: 2 * GIB),
    "throttled": lambda: build(reasons=lambda i: ("sw_thermal_slowdown", "sw_power_cap")),
    "rss_growing": lambda: build(n=40, rss=lambda i: 1 * GIB + i * GIB // 10),
    "host_memory_low": lambda: build(available=lambda i: GIB if i == 20 else 20 * GIB),
    "someone_else": lambda: build(gpu_pids=lambda i: (MAIN_PID + 999,)),
    "shared": lambda: build(gpu_pids=lambda i: (MAIN_PID, MAIN_PID + 999)),
    "child_process": lambda: build(children=lambda i: (10.0,), gpu_pids=lambda i: (200,)),
    "host_only": lambda: build(gpus=False, main_thread=lambda i: 100.0),
    "too_short": lambda: build(n=2),
    "incomplete": lambda: build(end=False),
    "failed": lambda: build(exit_code=137),
    "interrupted": lambda: build(exit_code=130),
    "no_util": lambda: build(util=lambda i: None),
}


def _lost_gpu() -> Timeline:
    tl = build()
    gpus = tuple(dataclasses.replace(g, nvml_error="NVMLError_GpuIsLost") for g in tl.header.gpus)
    return dataclasses.replace(tl, header=dataclasses.replace(tl.header, gpus=gpus))


def _leftovers(*, killed: bool) -> Timeline:
    tl = build()
    procs = [{"pid": 4242, "ppid": 1, "cmdline": ["sleep", "30"], "found_by": ["group"]}]
    tl.events.append(
        {
            "type": "event",
            "t": tl.start + 1,
            "kind": "leftovers",
            "processes": procs,
            "kill": killed,
            "ended": [4242] if killed else [],
            "still_running": [] if killed else [4242],
        }
    )
    return tl


def _steps(slow_every: int, drift: float) -> Timeline:
    """Steps of 50 ms from t0 + 1 s, one in ``slow_every`` 8× longer, growing by ``drift``."""
    from gpuprobe.tools.monitor.steps import step_events

    tl = build()
    ends, t = [tl.start + 1.0], tl.start + 1.0
    for i in range(200):
        t += 0.05 * (1 + drift * i / 200) * (8 if i % slow_every == slow_every - 1 else 1)
        ends.append(t)
    tl.events.extend(step_events([(MAIN_PID, "pid 100 (train.py)", "optimizer", ends)]))
    return tl


def _capture(*, warn: bool) -> Timeline:
    """A capture of run --capture-on: diagnosed with a warning, or never opened."""
    tl = build()
    ev = {"kind": "capture", "t": tl.start + 5, "pid": MAIN_PID, "name": "pid 100 (train.py)",
          "step": 50, "seconds": 0.4, "median_s": 0.05, "aimed_at": None, "every": None}  # fmt: skip
    if warn:
        ev.update(first=52, last=56, state="done", trace="/x/captures/step-50/t.json.gz",
                  verdict="unsteady-window", verdict_status="warn", verdict_title="Unsteady")  # fmt: skip
    else:
        ev.update(state="not opened: the process ended first")
    tl.events.append(ev)
    return tl


def _timelines() -> dict[str, Timeline]:
    recorded = {p.name: read_timeline(p) for p in sorted(DATA.glob("*.jsonl"))}
    damaged = dataclasses.replace(
        build(), dropped_lines=2, dropped_bytes=80, problems=["line 7: not JSON"]
    )
    return (
        recorded
        | {name: make() for name, make in SYNTHETIC.items()}
        | {"damaged": damaged, "lost_gpu": _lost_gpu()}
        | {"leftovers": _leftovers(killed=False), "leftovers_ended": _leftovers(killed=True)}
        | {"slow_steps": _steps(25, 0.0), "step_drift": _steps(10_000, 1.0)}
        | {"capture": _capture(warn=True), "capture_missed": _capture(warn=False)}
    )


def test_every_monitor_rule_is_a_rule_with_ids() -> None:
    for rules in (RULES, GPU_RULES, pack_rules.RULES):
        assert rules
        for r in rules:
            assert isinstance(r, Rule), r
            assert r.ids and all(isinstance(i, str) and i for i in r.ids), r
    assert set(each_used_gpu.ids) == declared_ids(GPU_RULES)


@pytest.mark.parametrize("name", sorted(_timelines()))
def test_monitor_rules_emit_only_declared_ids(name: str) -> None:
    ctx = run_context(_timelines()[name])
    assert undeclared(RULES, ctx) == []
    for st in ctx.gpus:
        assert undeclared(GPU_RULES, ctx, st) == []


def _level(n: int, *, failed: int = 0, tp: float | None = 100.0, **kw: Any) -> PackLevel:
    copies = tuple(
        PackCopy(index=i, wall_s=1.0, exit_code=1 if i < failed else 0, error="boom")
        for i in range(n)
    )
    return PackLevel(
        n=n, copies=copies, wall_s=1.0, mean_copy_s=1.0, throughput=tp, failed=failed, **kw
    )


PACKS = {
    "cpu_only": PackReport(
        command=("job",),
        levels=(_level(1, cpu_percent=98.0), _level(2, tp=190.0), _level(3, tp=260.0)),
        unit="jobs/h",
        recommended=2,
        cores=2,
        sharing=Sharing(driver_note="no NVML"),
    ),
    "failures_and_no_rate": PackReport(
        command=("job",),
        levels=(
            _level(1, leftovers=("pid 7: sleep 30",)),
            _level(2, failed=1, leftovers=("pid 8: sleep 30",), leftovers_ended=True),
            _level(3, tp=None),
        ),
        unit="rate (--rate, summed)",
        recommended=1,
        cores=8,
        rate_regex="([0-9.]+) it/s",
        sharing=Sharing(gpus=1, mig_capable=(0,)),
    ),
    "busy_host_mig_on": PackReport(
        command=("job",),
        levels=(_level(1, others_cores=13.0, gpu_util_percent=20.0), _level(2, tp=150.0)),
        unit="jobs/h",
        recommended=1,
        cores=16,
        load_average=(4.0, 4.0, 4.0),
        sharing=Sharing(gpus=2, mig_capable=(0, 1), mig_enabled=(1,), mig_instances=2),
    ),
    "no_recommendation_mps": PackReport(
        command=("job",),
        levels=(_level(1, failed=1),),
        unit="jobs/h",
        recommended=None,
        cores=4,
        sharing=Sharing(gpus=1, mps_control="/usr/bin/nvidia-cuda-mps-control", mps_running=True),
    ),
}


@pytest.mark.parametrize("name", sorted(PACKS))
def test_pack_rules_emit_only_declared_ids(name: str) -> None:
    assert pack_rules.judge(PACKS[name])
    assert undeclared(pack_rules.RULES, PACKS[name]) == []


def test_the_scenarios_reach_every_declared_id() -> None:
    """So that the checks above see every finding each rule can make."""
    seen = {f.id for tl in _timelines().values() for f in apply_rules(RULES, run_context(tl))}
    assert declared_ids(RULES) - seen == set()
    packs = {f.id for r in PACKS.values() for f in pack_rules.judge(r)}
    assert declared_ids(pack_rules.RULES) - packs == set()
