"""The one timer. GPU time comes from the device's events (via the framework's
:class:`~gpuprobe.frameworks.base.Backend`), never from a host clock around an asynchronous launch
(the E8 mistake). Warm-up first, then repetitions until a time budget is spent; the result carries
median, p20/p80, min and n."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuprobe.bench.measurement import Measurement
from gpuprobe.frameworks.base import Backend

__all__ = ["DEFAULT_BUDGET_S", "measure", "naive_host_time"]

DEFAULT_BUDGET_S = 1.0  # seconds of repetitions per measurement; triton do_bench uses 0.1 s
MIN_RUNS = 3
MAX_RUNS = 10_000
CHUNK = 10  # repetitions per events batch: bounds the events outstanding at once


def _timer_name(backend: Backend) -> str:
    if backend.framework == "jax":
        return "block_until_ready"
    return "cuda-event" if backend.is_gpu else "perf_counter"


def measure(
    name: str,
    fn: Callable[[], Any],
    backend: Backend,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    warmup: int = 1,
    min_runs: int = MIN_RUNS,
    max_runs: int = MAX_RUNS,
    setup: Callable[[], Any] | None = None,
    work: dict[str, float] | None = None,
    metadata: dict[str, str | float | int | bool | None] | None = None,
) -> Measurement:
    """Time ``fn`` on ``backend``: ``warmup`` untimed calls, then repetitions until ``budget_s``
    of device time is spent (at least ``min_runs``, at most ``max_runs``). ``setup`` runs untimed
    before each repetition (an L2 flush, fresh inputs)."""
    for _ in range(warmup):
        fn()
    backend.synchronize()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s * 3  # wall-clock guard against a slow device clock
    while len(times) < max_runs:
        spent = sum(times)
        if len(times) >= min_runs and (spent >= budget_s or time.perf_counter() > deadline):
            break
        if times:
            per = max(spent / len(times), 1e-7)
            chunk = int(min(max(1, (budget_s - spent) / per), CHUNK, max_runs - len(times)))
        else:
            chunk = 1
        times.extend(backend.time(fn, max(1, chunk), setup=setup))
    return Measurement.from_times(
        name,
        backend.framework,
        backend.device,
        times,
        timer=_timer_name(backend),
        work=work,
        metadata=metadata,
    )


def naive_host_time(fn: Callable[[], Any], n: int = 5) -> float:
    """The E8 mistake, kept to show it: a host clock around a call that only *queues* GPU work.
    Returns the median seconds. Never use it for a real figure."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    out.sort()
    return out[len(out) // 2]
