"""E8: 50,000,000 float32 values times 2, timed correctly (device events after a warm-up) and,
beside it, timed the way E8 did: a host clock around a call that only queues the work. On a GPU
the second figure is the launch, not the multiply; on a CPU (synchronous) both agree.

GB/s counts the read of x and the write of the result (8 bytes per element). E8:
docs/experiments.md#e8.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.core.units import seconds
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.platform.timing import naive_measure
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import Settings, fits, guard_many, point, skipped, timed
from gpuprobe.tools.bench.workloads.base import (
    BenchContext,
    Plot,
    Roofline,
    Workload,
    by_pair,
    finding,
)

__all__ = [
    "NAIVE_MISLEADING_RATIO",
    "NAIVE_REPS",
    "NOTE_S",
    "SIZES",
    "TIMING_HOWTO",
    "TIMING_HOWTO_ANY",
    "WORKLOAD",
    "naive",
    "run",
]

SIZES = ((50_000_000,), (5_000_000,))  # elements (full, quick); E8 used 50,000,000
NAIVE_REPS = 5  # E8 timed a handful of calls
CHECK_ELEMENTS = 1_000  # elements compared with 2·x on the host
NAIVE_MISLEADING_RATIO = 2.0  # E8's host clock this many times below the device's: misleading
# E8's figures (docs/experiments.md#e8), by device kind; the GPU one is wrong.
NOTE_S: dict[str, float] = {"cpu": 0.0336, "cuda": 0.0009}
# How to time GPU work right in each framework: E8's fix, in the framework that made the mistake.
TIMING_HOWTO: dict[str, str] = {
    "torch": "time GPU work with events (torch.cuda.Event(enable_timing=True)) or call "
    "torch.cuda.synchronize() before reading the clock",
    "cupy": "time GPU work with events (cupy.cuda.Event(), cupy.cuda.get_elapsed_time) or "
    "cupyx.profiler.benchmark, or call cupy.cuda.Device().synchronize() before reading the clock",
    "jax": "call .block_until_ready() on the result before reading the clock",
}
TIMING_HOWTO_ANY = "wait for the device (the framework's synchronize) before reading the clock"


def _pair(b: Backend, s: Settings, n: int) -> list[BenchResult]:
    import numpy as np

    x = b.random((n,), "float32", seed=s.seed)

    def fn() -> Any:
        return x * 2

    nbytes = 8.0 * n
    work = {"bytes": nbytes, "flop": float(n)}
    m = timed(b, "scale", fn, s, min_runs=3, work=work, metadata={"n": n})
    naive = naive_measure("scale-naive", fn, b, n=NAIVE_REPS)
    head = b.to_numpy(fn()[:CHECK_ELEMENTS])
    expect = 2 * b.to_numpy(x[:CHECK_ELEMENTS])
    if not np.allclose(head, expect):
        raise ValueError("x * 2 gave wrong values")
    note = NOTE_S.get(b.device.partition(":")[0]) if n == 50_000_000 else None
    right = point(
        b,
        "scale",
        "events" if b.is_gpu else "timed",
        n,
        "elements",
        m,
        {"gbs": nbytes / m.median / 1e9, "naive_s": naive.median, "note_s": note},
    )
    wrong = point(
        b,
        "scale",
        "naive",
        n,
        "elements",
        naive,
        {"apparent_gbs": nbytes / naive.median / 1e9, "correct_s": m.median},
        reason="E8's way (docs/experiments.md#e8): host clock around the call, no wait for the "
        "device",
    )
    return [right, wrong]


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """``x * 2`` timed right, then E8's way."""
    for n in s.pick("scale", *SIZES):
        why = fits(b, 3 * 4 * n)
        case = "events" if b.is_gpu else "timed"
        if why:
            yield skipped(b, "scale", case, n, "elements", why)
            continue
        yield from guard_many(b, "scale", case, n, "elements", _pair, b, s, n)
        b.release()


@rule("bench-naive-timing-misleading")
def naive(ctx: BenchContext) -> list[Finding]:
    """E8: a host clock around the call says far less than the device took."""
    out = []
    for (fw, dev), rs in by_pair(ctx.results, WORKLOAD.name).items():
        right = next((r for r in rs if r.case != "naive"), None)
        wrong = next((r for r in rs if r.case == "naive"), None)
        if right is None or wrong is None or right.seconds is None or wrong.seconds is None:
            continue
        ratio = right.seconds / wrong.seconds if wrong.seconds > 0 else float("inf")
        if ratio >= NAIVE_MISLEADING_RATIO:
            out.append(
                finding(
                    "bench-naive-timing-misleading",
                    Status.WARN,
                    f"{fw} {dev}: a host clock around x * 2 says {seconds(wrong.seconds)}; "
                    f"the device took {seconds(right.seconds)} ({ratio:.0f}× more): "
                    "E8's mistake (docs/experiments.md#e8)",
                    [Evidence("naive", wrong.seconds, "s"), Evidence("device", right.seconds, "s")],
                    fix=TIMING_HOWTO.get(fw, TIMING_HOWTO_ANY),
                    subject=f"{fw} {dev}",
                )
            )
    return out


def _peak(r: BenchResult, g: Gpu) -> float | None:
    """The memory's bandwidth (GB/s)."""
    return g.peaks.memory_bandwidth_gbs if g.peaks is not None else None


WORKLOAD = Workload(
    name="scale",
    title="scale: E8, {size} float32 × 2, timed right and E8's way (docs/experiments.md#e8); "
    "GB/s = read + write",
    run=run,
    peak=_peak,
    checks=(naive,),
    plot=Plot(
        roofline=Roofline(
            points=lambda case: case != "naive",
            memory_roof=True,
            measured_memory_roof=lambda r: True,
        )
    ),
)
