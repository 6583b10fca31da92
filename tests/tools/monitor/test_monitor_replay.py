"""The GPU side, replayed: recorded NVML sequences go through the real sampler, ``run_command``
and the judge, with a real command on the real host beside them."""

from __future__ import annotations

import sys
from pathlib import Path

from replay_nvml import ReplayNvml

from gpuprobe.core.findings import Finding, Status
from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.run import run_command
from gpuprobe.tools.monitor.summary import RunSummary
from gpuprobe.tools.monitor.timeline import read_timeline

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 2.0: pass\n"
IDLE = "import time\ntime.sleep(2.0)\n"


def _run(tmp_path: Path, fixture: str, code: str) -> tuple[RunSummary, ReplayNvml]:
    replay = ReplayNvml(fixture)

    def started(pid: int) -> None:
        replay.live_pid = pid

    result = run_command(
        [sys.executable, "-c", code], tmp_path / "rec", hz=10.0, nvml=replay, on_started=started
    )
    assert result.exit_code == 0
    return summarize(read_timeline(result.timeline)), replay


def _ids(s: RunSummary) -> dict[str, Finding]:
    return {f.id: f for f in s.findings}


def test_e9_starved_run(tmp_path: Path) -> None:
    # GPU at ~7 % (replayed) while the command's one thread spins (real)
    s, replay = _run(tmp_path, "e9_starved.jsonl", BUSY)
    assert replay.reads[0] == s.samples  # one NVML reading per sample
    f = _ids(s)
    gpu = s.gpus[0]
    assert gpu.used_by_command  # the replayed process list names the live PID
    assert gpu.util_mean is not None and gpu.util_mean < 15
    assert f["monitor-gpu-busy"].status is Status.WARN
    assert f["monitor-gpu-starved-main-thread"].status is Status.WARN
    assert gpu.memory_total == 24 * 2**30 and gpu.memory_peak == 3 * 2**30


def test_healthy_run(tmp_path: Path) -> None:
    s, _ = _run(tmp_path, "healthy.jsonl", IDLE)
    f = _ids(s)
    assert s.gpus[0].util_mean is not None and s.gpus[0].util_mean > 90
    assert f["monitor-gpu-busy"].status is Status.OK
    assert not any(k.startswith("monitor-gpu-starved") for k in f)
    assert all(x.status in (Status.OK, Status.INFO) for x in s.findings), s.findings


def test_throttled_run(tmp_path: Path) -> None:
    s, _ = _run(tmp_path, "throttled.jsonl", IDLE)
    f = _ids(s)["monitor-gpu-throttle"]
    assert f.status is Status.WARN
    assert dict((e.name, e.value) for e in f.evidence)["reason"] == "sw_thermal_slowdown"
    assert s.gpus[0].reasons["sw_thermal_slowdown"] > 0.3
    assert s.gpus[0].temperature_max_c is not None and s.gpus[0].temperature_max_c >= 87


def test_idle_and_busy_commands_differ_on_the_host_side(tmp_path: Path) -> None:
    busy, _ = _run(tmp_path / "a", "healthy.jsonl", BUSY)
    idle, _ = _run(tmp_path / "b", "healthy.jsonl", IDLE)
    assert busy.host.command_cores_mean is not None and idle.host.command_cores_mean is not None
    # the busy one gets what the machine's other load leaves it; the idle one sleeps
    assert idle.host.command_cores_mean < 0.05
    assert busy.host.command_cores_mean > max(0.25, 5 * idle.host.command_cores_mean)
    assert (busy.host.main_thread_pegged_fraction or 0) >= 0.5  # it always wanted its core
    assert (idle.host.main_thread_pegged_fraction or 0) == 0.0
