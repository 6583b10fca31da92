"""The one timer. GPU time comes from the device's events (via the framework's
:class:`~gpuprobe.platform.frameworks.base.Backend`), never from a host clock around an asynchronous launch
(the E8 mistake, docs/experiments.md#e8). Warm-up first, then repetitions until a time budget is
spent and the runs agree (:func:`~gpuprobe.platform.measurement.agreement`), or, on a machine
where other processes keep slowing them, until a longer budget to agree is spent too; the result
carries median, p20/p80, min and n, and whether the runs agreed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from gpuprobe.platform.frameworks.base import Backend, host_times
from gpuprobe.platform.measurement import MIN_AGREEING, Measurement, agreement

__all__ = [
    "AGREE_BUDGET_FACTOR",
    "AGREE_BUDGET_MAX_S",
    "AGREE_BUDGET_MIN_S",
    "BUSY_MIN_SPAN_S",
    "DEFAULT_BUDGET_S",
    "NAIVE_TIMER",
    "agree_budget",
    "measure",
    "naive_host_time",
    "naive_measure",
]

# The timer of naive_measure's figures: E8's mistake, shown for what it is (its spread is not
# judged: the figure is wrong by design).
NAIVE_TIMER = "host-clock-no-wait"
DEFAULT_BUDGET_S = 1.0  # seconds of repetitions per measurement; triton do_bench uses 0.1 s
MIN_RUNS = 3
MAX_RUNS = 10_000
CHUNK = 10  # repetitions per events batch: bounds the events outstanding at once
# Wall-clock seconds a measurement may go on, from its first timed run, while its runs do not
# agree: AGREE_BUDGET_FACTOR times its budget, within [AGREE_BUDGET_MIN_S, AGREE_BUDGET_MAX_S].
# A thread that a busy core deschedules waits a scheduler slice (4-24 ms, CFS; 16-24 ms seen here)
# at each barrier; 0.25 s is a dozen such slices, room for the runs to settle when the stall was
# at the start (a thread pool waking up), and the cap keeps a loaded machine's doctor and bench
# from running minutes. torch's adaptive_autorange goes on up to max_run_time = 10 s.
AGREE_BUDGET_FACTOR = 10.0
AGREE_BUDGET_MIN_S = 0.25
AGREE_BUDGET_MAX_S = 3.0
# On a host that other processes keep busy, runs that agree are taken at their word only once
# they span this many seconds: a thread pool that a busy core stalls gives streaks of 10-15 runs
# that agree on the stall (16 ms each for a 0.2 ms torch matmul, 0.2 s in all, seen here with
# one of two cores busy) before it runs freely again.
BUSY_MIN_SPAN_S = 0.25
# Re-judge the agreement when the runs have grown by this share since it was last judged: it
# sorts them all, and a fast kernel makes thousands.
AGREE_RECHECK_GROWTH = 0.25


def _timer_name(backend: Backend) -> str:
    if backend.framework == "jax":
        return "block_until_ready"
    return "cuda-event" if backend.is_gpu else "perf_counter"


def agree_budget(budget_s: float) -> float:
    """Wall-clock seconds a measurement of ``budget_s`` may take while its runs do not agree."""
    return min(max(budget_s * AGREE_BUDGET_FACTOR, AGREE_BUDGET_MIN_S), AGREE_BUDGET_MAX_S)


def _busy_probe() -> Callable[[], bool]:
    """A question to ask as the runs go: have other processes kept more than
    :data:`~gpuprobe.platform.hardware.load.HOST_BUSY_WARN_FRACTION` of the host's cores busy
    since this probe was made? (False where the host cannot say.)"""
    from gpuprobe.platform.hardware.load import HOST_BUSY_WARN_FRACTION, HostLoad

    cores = os.cpu_count() or 1
    load = HostLoad(children=False)

    def busy() -> bool:
        others = load.others_cores()
        return others is not None and others > HOST_BUSY_WARN_FRACTION * cores

    return busy


def _never_busy() -> bool:
    return False


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
    clock: Callable[[], float] | None = None,
    host_busy: Callable[[], bool] | None = None,
) -> Measurement:
    """Time ``fn`` on ``backend``: ``warmup`` untimed calls, then repetitions until ``budget_s``
    of device time is spent (at least ``min_runs``, at most ``max_runs``) and the runs agree
    (:func:`~gpuprobe.platform.measurement.agreement`: at least
    :data:`~gpuprobe.platform.measurement.MIN_AGREEING` of them, where that fits in the time).
    While they do not, repetitions go on until :func:`agree_budget` of wall-clock time is spent;
    a measurement whose runs never agreed comes back flagged (``trusted=False``). Timed on a host
    clock, on a host that other processes keep busy (``host_busy``, by default read from the
    host's CPU time), runs that agree early are not taken at their word before
    :data:`BUSY_MIN_SPAN_S`: a stalled thread pool gives a streak of runs that agree on the
    stall. ``setup`` runs untimed before each repetition (an L2 flush, fresh inputs).

    ``inner`` calls of ``fn`` make one repetition (for work too short to time alone, as
    nvbandwidth puts 16 copies between one pair of events); ``per_call`` says how many operations
    one call does (a CUDA graph of k launches). Each recorded time is one operation's:
    the repetition's duration divided by ``inner * per_call``. ``work`` is per operation.

    ``host_clock`` times with ``perf_counter`` whatever the device: for work that waits for the
    device itself (``fn`` ends with a synchronize) or to show what only queueing costs.
    ``clock`` is the wall clock that the budgets are read on (default ``time.perf_counter``, looked
    up at each call; a test gives its own).
    """
    body = fn
    if inner > 1:

        def body() -> None:
            for _ in range(inner):
                fn()

    for _ in range(warmup):
        fn()
    backend.synchronize()
    timer = "perf_counter" if host_clock else _timer_name(backend)
    if host_busy is not None:
        busy = host_busy
    elif timer == "cuda-event":  # the device's clock, the batch queued behind a hold: a host
        # thread descheduled meanwhile barely shows in it
        busy = _never_busy
    else:
        busy = _busy_probe()
    clock = clock or time.perf_counter
    raw: list[float] = []
    start = clock()
    deadline = start + budget_s * 3  # wall-clock guard against a slow device clock
    give_up = start + max(agree_budget(budget_s), budget_s * 3)
    judged = 0  # how many runs the agreement was last judged on
    best = 0.0  # the fastest run so far
    while len(raw) < max_runs:
        # The budget is charged at the fastest repetition's pace, so that repetitions slowed by
        # another process do not end the measurement early; the wall-clock guards still do.
        spent = best * len(raw)
        now = clock()
        if len(raw) >= min_runs and (spent >= budget_s or now > deadline):
            if now > give_up:
                break
            if len(raw) >= judged * (1 + AGREE_RECHECK_GROWTH):
                judged = len(raw)
                a = agreement(raw)
                if (
                    a.trusted
                    and a.agreeing >= MIN_AGREEING
                    and (now - start >= BUSY_MIN_SPAN_S or not busy())
                ):
                    break
        if raw:
            per = max(best, 1e-7)
            # past the budget, while the runs do not agree: chunks of a tenth of the budget
            left = (budget_s - spent if spent < budget_s else budget_s / 10) / per
            chunk = int(min(max(1, left), CHUNK, max_runs - len(raw)))
        else:
            chunk = 1
        if host_clock:
            got = host_times(body, max(1, chunk), setup)
        else:
            got = backend.time(body, max(1, chunk), setup=setup)
        best = min(got) if not raw else min(best, *got)
        raw.extend(got)
    div = max(1, inner) * max(1, per_call)
    return Measurement.from_times(
        name,
        backend.framework,
        backend.device,
        [t / div for t in raw],
        timer=timer,
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
    return Measurement.from_times(name, backend.framework, backend.device, out, timer=NAIVE_TIMER)


def naive_host_time(fn: Callable[[], Any], n: int = 5) -> float:
    """The median of :func:`naive_measure`'s mistake, for a function on no particular backend."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    out.sort()
    return out[len(out) // 2]
