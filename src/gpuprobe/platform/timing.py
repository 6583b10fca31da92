"""The one timer. GPU time comes from the device's events (via the framework's
:class:`~gpuprobe.platform.frameworks.base.Backend`), never from a host clock around an asynchronous launch
(the E8 mistake, docs/experiments.md#e8). Warm-up first, then repetitions until a time budget is
spent; the result carries median, p20/p80, min and n."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuprobe.platform.frameworks.base import Backend, host_times
from gpuprobe.platform.measurement import Measurement

__all__ = ["DEFAULT_BUDGET_S", "measure", "naive_host_time", "naive_measure"]

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
    inner: int = 1,
    per_call: int = 1,
    host_clock: bool = False,
) -> Measurement:
    """Time ``fn`` on ``backend``: ``warmup`` untimed calls, then repetitions until ``budget_s``
    of device time is spent (at least ``min_runs``, at most ``max_runs``). ``setup`` runs untimed
    before each repetition (an L2 flush, fresh inputs).

    ``inner`` calls of ``fn`` make one repetition (for work too short to time alone, as
    nvbandwidth puts 16 copies between one pair of events); ``per_call`` says how many operations
    one call does (a CUDA graph of k launches). Each recorded time is one operation's:
    the repetition's duration divided by ``inner * per_call``. ``work`` is per operation.

    ``host_clock`` times with ``perf_counter`` whatever the device: for work that waits for the
    device itself (``fn`` ends with a synchronize) or to show what only queueing costs.
    """
    body = fn
    if inner > 1:

        def body() -> None:
            for _ in range(inner):
                fn()

    for _ in range(warmup):
        fn()
    backend.synchronize()
    raw: list[float] = []
    deadline = time.perf_counter() + budget_s * 3  # wall-clock guard against a slow device clock
    while len(raw) < max_runs:
        # The budget is charged at the fastest repetition's pace, so that a few repetitions slowed
        # by another process do not end the measurement early; the wall-clock guard still does.
        best = min(raw, default=0.0)
        spent = best * len(raw)
        if len(raw) >= min_runs and (spent >= budget_s or time.perf_counter() > deadline):
            break
        if raw:
            per = max(best, 1e-7)
            chunk = int(min(max(1, (budget_s - spent) / per), CHUNK, max_runs - len(raw)))
        else:
            chunk = 1
        if host_clock:
            raw.extend(host_times(body, max(1, chunk), setup))
        else:
            raw.extend(backend.time(body, max(1, chunk), setup=setup))
    div = max(1, inner) * max(1, per_call)
    return Measurement.from_times(
        name,
        backend.framework,
        backend.device,
        [t / div for t in raw],
        timer="perf_counter" if host_clock else _timer_name(backend),
        work=work,
        metadata=metadata,
    )


def naive_measure(name: str, fn: Callable[[], Any], backend: Backend, n: int = 5) -> Measurement:
    """The E8 mistake, kept to show it: a host clock around a call that only *queues* GPU work,
    with no wait. ``n`` repetitions after one warm-up; the queue is drained (untimed) at the end.
    Never use it for a real figure: it is the time to launch, not to compute."""
    fn()
    backend.synchronize()
    out = []
    for _ in range(max(1, n)):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    backend.synchronize()
    return Measurement.from_times(
        name, backend.framework, backend.device, out, timer="host-clock-no-wait"
    )


def naive_host_time(fn: Callable[[], Any], n: int = 5) -> float:
    """The median of :func:`naive_measure`'s mistake, for a function on no particular backend."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    out.sort()
    return out[len(out) // 2]
