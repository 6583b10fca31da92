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


def test_a_busy_host_that_did_not_slow_the_command_is_info() -> None:
    """The torchrun case: 2 busy cores, but the busiest thread wanted 0.18 of a core and waited
    0.01: the load is told, not that the command ran slower."""
    import dataclasses

    from gpuprobe.tools.monitor.rules.host import host_busy
    from gpuprobe.tools.monitor.summary import run_context

    tl = build(host_cpu=lambda i: (100.0,) * 2, main_thread=lambda i: 17.0, gpus=False)
    # schedstat measured: the thread was runnable 18 % of the time
    tl.samples = [
        dataclasses.replace(x, tree=dataclasses.replace(x.tree, main_thread_runnable_percent=18.0))
        for x in tl.samples
        if x.tree is not None
    ]
    ctx = run_context(tl)
    host = dataclasses.replace(ctx.host, main_thread_mean_percent=17.0,
                               main_thread_wants_mean_percent=18.0)  # fmt: skip
    (f,) = host_busy.judge(dataclasses.replace(ctx, host=host))
    assert f.status is Status.INFO
    assert "waited for a core only 0.01 of the time" in f.title and "ran slower" not in f.title
    slowed = dataclasses.replace(host, main_thread_wants_mean_percent=60.0)
    (g,) = host_busy.judge(dataclasses.replace(ctx, host=slowed))
    assert g.status is Status.WARN and "ran slower" in g.title
