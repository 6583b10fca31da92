"""E8 on an honestly asynchronous fake GPU: the host clock around the call sees only the launch,
the device's events see the work."""

from __future__ import annotations

import numpy as np
from async_backend import AsyncBackend

from gpuprobe.platform.timing import measure, naive_measure
from gpuprobe.tools.bench.workloads import Settings, run_workload


def test_fake_backend_is_asynchronous_and_its_events_time_the_work() -> None:
    b = AsyncBackend()
    try:
        x = b.asarray(np.ones(2_000_000, dtype=np.float32))
        m = measure("x2", lambda: x * 2, b, budget_s=0.02, min_runs=3)
        naive = naive_measure("x2-naive", lambda: x * 2, b, n=5)
        assert m.timer == "cuda-event" and naive.timer == "host-clock-no-wait"
        assert naive.median < m.median / 5  # queueing is far cheaper than the multiply
        assert np.array_equal(b.to_numpy(x * 2)[:3], [2, 2, 2])
    finally:
        b.close()


def test_scale_workload_shows_the_naive_timing_below_the_event_timing() -> None:
    b = AsyncBackend()
    try:
        results = list(
            run_workload(
                "scale", b, Settings(quick=True, budget_s=0.02, sizes={"scale": (2_000_000,)})
            )
        )
    finally:
        b.close()
    right = next(r for r in results if r.case == "events")
    naive = next(r for r in results if r.case == "naive")
    assert right.ok and naive.ok
    assert naive.seconds is not None and right.seconds is not None
    assert naive.seconds < right.seconds
    assert right.values["naive_s"] == naive.seconds
    assert naive.values["apparent_gbs"] > right.values["gbs"]

    from gpuprobe.tools.bench.rules import judge

    found = {f.id for f in judge(results, [])}
    assert "bench-naive-timing-misleading" in found
