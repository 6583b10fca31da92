"""The monitor's rules (gpuprobe.tools.monitor.rules) on timelines built in memory: each rule fires on
its case and only there."""

from __future__ import annotations

from tl_builder import GIB, MAIN_PID, build

from gpuprobe.core.findings import Finding, Status
from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.rules import gpu


def ids(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def ev(f: Finding, name: str) -> object:
    return next(e.value for e in f.evidence if e.name == name)


def test_e9_single_core_starvation() -> None:
    # E9: GPU ~7 %, the main process's one thread pegged, the other cores idle.
    s = summarize(
        build(util=lambda i: 7, main_thread=lambda i: 99.0, host_cpu=lambda i: (99.0,) + (3.0,) * 7)
    )
    f = ids(s.findings)
    assert f["monitor-gpu-busy"].status is Status.WARN
    assert ev(f["monitor-gpu-busy"], "util_mean") == 7.0
    starved = f["monitor-gpu-starved-main-thread"]
    assert starved.status is Status.WARN
    assert ev(starved, "main_thread_pegged_fraction") == 100.0
    assert "num_workers=7" in starved.fix
    assert "monitor-gpu-starved-loaders" not in f
    assert "monitor-gpu-starved-host" not in f
    # the card had room: 10 of 24 GiB is not below the "grow the batch" line, so no info there
    assert f["monitor-gpu-memory"].status is Status.OK


def test_healthy_run_has_no_warnings() -> None:
    s = summarize(build(util=lambda i: 95 + i % 4))
    assert all(f.status in (Status.OK, Status.INFO) for f in s.findings), s.findings
    f = ids(s.findings)
    assert f["monitor-gpu-busy"].status is Status.OK
    assert f["monitor-exit"].status is Status.OK
    assert not any(i.startswith("monitor-gpu-starved") for i in f)


def test_busy_thresholds_are_the_named_constants() -> None:
    just_ok = summarize(build(util=lambda i: int(gpu.GPU_BUSY_OK_PERCENT)))
    middle = summarize(build(util=lambda i: int(gpu.GPU_BUSY_WARN_PERCENT)))
    low = summarize(build(util=lambda i: int(gpu.GPU_BUSY_WARN_PERCENT) - 1))
    assert ids(just_ok.findings)["monitor-gpu-busy"].status is Status.OK
    assert ids(middle.findings)["monitor-gpu-busy"].status is Status.INFO
    assert ids(low.findings)["monitor-gpu-busy"].status is Status.WARN


def test_saturated_loader_workers() -> None:
    s = summarize(
        build(
            util=lambda i: 12,
            main_thread=lambda i: 15.0,
            children=lambda i: (97.0, 95.0, 99.0, 96.0),
        )
    )
    f = ids(s.findings)
    loaders = f["monitor-gpu-starved-loaders"]
    assert ev(loaders, "workers") == 4
    assert ev(loaders, "worker_cpu_mean") == 96.8
    assert "num_workers up to 8" in loaders.fix
    assert "monitor-gpu-starved-main-thread" not in f


def test_idle_gpu_with_idle_cpu_blames_neither() -> None:
    # waiting on disk or network: nothing on the CPU side is saturated
    f = ids(
        summarize(
            build(util=lambda i: 5, main_thread=lambda i: 10.0, children=lambda i: (20.0, 25.0))
        ).findings
    )
    assert f["monitor-gpu-busy"].status is Status.WARN
    assert not any(i.startswith("monitor-gpu-starved") for i in f)


def test_host_saturated() -> None:
    f = ids(summarize(build(util=lambda i: 10, host_cpu=lambda i: (97.0,) * 8)).findings)
    assert f["monitor-gpu-starved-host"].status is Status.WARN


def test_memory_near_full_and_room_to_grow() -> None:
    full = ids(summarize(build(mem=lambda i: int(23.5 * GIB))).findings)["monitor-gpu-memory"]
    assert full.status is Status.WARN and ev(full, "memory_peak_fraction") == 97.9
    room = ids(summarize(build(util=lambda i: 30, mem=lambda i: 2 * GIB)).findings)
    assert room["monitor-gpu-memory"].status is Status.INFO
    assert "larger batch" in room["monitor-gpu-memory"].fix


def test_thermal_throttle_is_a_warning_with_when() -> None:
    tl = build(
        util=lambda i: 97,
        clock=lambda i: 1695 if i < 10 else 1200,
        reasons=lambda i: () if i < 10 else ("sw_thermal_slowdown",),
    )
    f = ids(summarize(tl).findings)["monitor-gpu-throttle"]
    assert f.status is Status.WARN
    assert ev(f, "reason") == "sw_thermal_slowdown"
    assert ev(f, "busy_samples_fraction") == 75.0
    assert ev(f, "first_seen") == 5.5  # sample 10 at 1000 + 11 * 0.5 s
    assert "cooling" in f.fix


def test_power_cap_is_info_and_idle_reason_ignored() -> None:
    tl = build(reasons=lambda i: ("sw_power_cap", "gpu_idle"))
    throttles = [f for f in summarize(tl).findings if f.id == "monitor-gpu-throttle"]
    assert [(ev(f, "reason"), f.status) for f in throttles] == [("sw_power_cap", Status.INFO)]


def test_host_memory_growing() -> None:
    grows = summarize(build(n=40, rss=lambda i: 1 * GIB + i * GIB // 10))
    f = ids(grows.findings)["monitor-host-memory-growing"]
    assert f.status is Status.WARN and ev(f, "rss_end") == 4.9
    flat = ids(summarize(build(rss=lambda i: 2 * GIB + (i % 3) * 2**20)).findings)
    assert "monitor-host-memory-growing" not in flat


def test_host_memory_low() -> None:
    f = ids(summarize(build(available=lambda i: GIB if i == 20 else 20 * GIB)).findings)
    assert f["monitor-host-memory-low"].status is Status.WARN


def test_gpu_used_by_someone_else_only() -> None:
    f = ids(summarize(build(gpu_pids=lambda i: (MAIN_PID + 999,))).findings)
    assert f["monitor-gpu-unused"].status is Status.WARN
    assert "monitor-gpu-busy" not in f


def test_gpu_child_process_counts_as_the_command() -> None:
    # a DataLoader-style child of the command holds the GPU context
    tl = build(children=lambda i: (10.0,), gpu_pids=lambda i: (200,))
    assert "monitor-gpu-busy" in ids(summarize(tl).findings)


def test_host_only_run() -> None:
    s = summarize(build(gpus=False, main_thread=lambda i: 100.0))
    f = ids(s.findings)
    assert f["monitor-no-gpu"].status is Status.INFO and "no NVML" in f["monitor-no-gpu"].title
    assert f["monitor-cpu-main-thread"].status is Status.INFO
    assert ev(f["monitor-cpu-usage"], "command_cores_mean") == 1.0
    assert s.gpus == ()


def test_too_short_incomplete_and_failed() -> None:
    short = ids(summarize(build(n=2)).findings)
    assert short["monitor-too-short"].status is Status.SKIPPED
    assert "monitor-gpu-busy" not in short
    cut = ids(summarize(build(end=False)).findings)
    assert cut["monitor-incomplete"].status is Status.WARN and "monitor-exit" not in cut
    failed = summarize(build(exit_code=137))
    assert failed.findings[0].id == "monitor-exit"  # worst first
    assert failed.findings[0].status is Status.FAIL and "SIGKILL" in failed.findings[0].title


def test_summary_round_trips_through_json() -> None:
    s = summarize(build(util=lambda i: 7, main_thread=lambda i: 99.0))
    again = type(s).from_dict(s.to_dict())
    assert again == s


def test_a_run_that_used_the_other_cores_is_not_bound_to_one_thread() -> None:
    """Issue 27: a run whose main thread was pegged but which used 1.6 cores in all was told
    "one core pegged, vectorise"; it used the other cores too."""
    from gpuprobe.tools.monitor.rules.starvation import ONE_THREAD_MAX_CORES

    assert ONE_THREAD_MAX_CORES == 1.25
    spread = summarize(build(gpus=False, main_thread=lambda i: 99.0, tree_cpu=lambda i: 160.0))
    f = ids(spread.findings)
    assert ev(f["monitor-cpu-usage"], "command_cores_mean") == 1.6
    assert "monitor-cpu-main-thread" not in f
    alone = ids(
        summarize(build(gpus=False, main_thread=lambda i: 99.0, tree_cpu=lambda i: 110.0)).findings
    )
    assert alone["monitor-cpu-main-thread"].status is Status.INFO
    assert ev(alone["monitor-cpu-usage"], "command_cores_mean") == 1.1
    # the same on a starved GPU: a pegged main thread beside 0.6 of a core of other work
    starved = ids(
        summarize(
            build(util=lambda i: 7, main_thread=lambda i: 99.0, tree_cpu=lambda i: 160.0)
        ).findings
    )
    assert "monitor-gpu-starved-main-thread" not in starved
    assert starved["monitor-gpu-busy"].status is Status.WARN


def test_a_card_shared_with_another_process_says_each_ones_share() -> None:
    from tl_builder import GIB

    # the command (pid 100) and a neighbour each at the builder's 95 % SM and 1 GiB; the
    # neighbour joins at sample 10
    s = summarize(build(gpu_pids=lambda i: (MAIN_PID,) if i < 10 else (MAIN_PID, 4242)))
    (gpu,) = s.gpus
    assert gpu.command_sm_mean == 95.0 and gpu.others_sm_mean == 71.2  # 30 of 40 samples at 95
    assert gpu.command_memory_peak == GIB and gpu.others_memory_peak == GIB
    assert gpu.others_pids == (4242,)
    (f,) = [f for f in s.findings if f.id == "monitor-gpu-shared"]
    assert f.status.name == "WARN" and "other processes 71 % and 1.0 GiB (pid 4242)" in f.title
    alone = summarize(build())
    assert alone.gpus[0].others_pids == () and "monitor-gpu-shared" not in ids(alone.findings)
