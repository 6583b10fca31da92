"""A recording on a shared machine and a Ctrl-C, as ``gpuprobe run`` judges them."""

from __future__ import annotations

import pytest
from tl_builder import build

from gpuprobe.core.findings import Status
from gpuprobe.platform.hardware.load import HOST_BUSY_WARN_FRACTION
from gpuprobe.tools.monitor.judge import summarize


def _ids(tl: object) -> dict[str, object]:
    return {f.id: f for f in summarize(tl).findings}  # type: ignore[arg-type]


def test_a_busy_host_is_said_with_numbers() -> None:
    # 8 cores all busy; the command used 0.41 of one
    tl = build(host_cpu=lambda i: (100.0,) * 8, main_thread=lambda i: 41.0, gpus=False)
    f = _ids(tl)["monitor-host-busy"]
    assert f.status is Status.WARN  # type: ignore[attr-defined]
    ev = {e.name: e.value for e in f.evidence}  # type: ignore[attr-defined]
    # 8 busy cores less the command's 0.41 and the sampler's 0.002
    assert ev["others_cores"] == pytest.approx(8 - 0.41 - 0.002, abs=0.02)
    assert ev["host_cores"] == 8 and ev["threshold"] == HOST_BUSY_WARN_FRACTION * 8
    assert "got 0.41 cores" in f.title  # type: ignore[attr-defined]


def test_a_quiet_host_or_a_sleeping_command_says_nothing() -> None:
    quiet = build(host_cpu=lambda i: (20.0,) * 8, main_thread=lambda i: 41.0, gpus=False)
    assert "monitor-host-busy" not in _ids(quiet)
    # a command that sleeps loses nothing to a busy host
    sleeper = build(host_cpu=lambda i: (100.0,) * 8, main_thread=lambda i: 0.0, gpus=False)
    assert "monitor-host-busy" not in _ids(sleeper)


@pytest.mark.parametrize("code", [130, -2])
def test_ctrl_c_is_info_not_fail(code: int) -> None:
    ids = _ids(build(exit_code=code))
    assert "monitor-exit" not in ids
    f = ids["monitor-interrupted"]
    assert f.status is Status.INFO and "Ctrl-C" in f.title  # type: ignore[attr-defined]


def test_a_real_failure_is_still_fail() -> None:
    ids = _ids(build(exit_code=1))
    assert ids["monitor-exit"].status is Status.FAIL  # type: ignore[attr-defined]
