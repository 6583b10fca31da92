"""E5 exercise 4: two matmuls at once on two GPUs vs one after the other on one GPU. On a machine
with one GPU, two streams vs one (how much two independent products overlap on one card); without
a GPU, skipped. Host clock around launching both products and waiting for both; ``speedup`` is
the one-after-the-other time over the concurrent one (2 at best). E5: docs/experiments.md#e5.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import Settings, fits, guard_many, point, skipped, timed
from gpuprobe.tools.bench.workloads.base import BenchContext, Workload, finding

__all__ = ["SIZES", "WORKLOAD", "overlap", "run"]

SIZES = ((1024, 8192), (1024, 2048))  # n of the n×n products (full, quick)


def _pair(b: Backend, other: Backend | None, s: Settings, n: int) -> list[BenchResult]:
    a0, c0 = b.randn((n, n), seed=1), b.randn((n, n), seed=2)
    a1, c1 = b.randn((n, n), seed=3), b.randn((n, n), seed=4)
    flop = {"flop": 4.0 * n**3}

    def one_after_other() -> None:
        b.matmul(a0, c0)
        b.matmul(a1, c1)
        b.synchronize()

    seq = timed(b, "multi-sequential", one_after_other, s, min_runs=3, host_clock=True, work=flop)
    if other is not None:
        o0, o1 = other.asarray(b.to_numpy(a1)), other.asarray(b.to_numpy(c1))

        def concurrent() -> None:
            b.matmul(a0, c0)
            other.matmul(o0, o1)
            b.synchronize()
            other.synchronize()

        case = "2-gpus"
    else:
        streams: list[Any] = b.streams(2) or []
        if len(streams) < 2:
            raise NotImplementedError(f"{b.framework} has no streams")
        b.synchronize()

        def concurrent() -> None:
            with b.on_stream(streams[0]):
                b.matmul(a0, c0)
            with b.on_stream(streams[1]):
                b.matmul(a1, c1)
            b.synchronize()

        case = "2-streams"
    par = timed(b, f"multi-{case}", concurrent, s, min_runs=3, host_clock=True, work=flop)
    return [
        point(
            b,
            "multi",
            "sequential",
            n,
            "n",
            seq,
            {"tflops": flop["flop"] / seq.median / 1e12},
        ),
        point(
            b,
            "multi",
            case,
            n,
            "n",
            par,
            {"tflops": flop["flop"] / par.median / 1e12, "speedup": seq.median / par.median},
        ),
    ]


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Sequential vs concurrent (two GPUs, else two streams); skipped without a GPU."""
    if not b.is_gpu:
        yield skipped(
            b,
            "multi",
            "2-gpus",
            None,
            "n",
            "skipped: needs a GPU (and 2 for E5.4, docs/experiments.md#e5)",
        )
        return
    other = None
    if s.peers:
        from gpuprobe.platform.frameworks.backends import make_backend

        other = make_backend(b.framework, s.peers[0])
        make_backend(b.framework, b.device)  # the first device current again
    else:
        yield skipped(b, "multi", "2-gpus", None, "n", "skipped: needs 2 GPUs; two streams instead")
    for n in s.pick("multi", *SIZES):
        case = "2-gpus" if other is not None else "2-streams"
        why = fits(b, 6 * 4 * n * n)
        if why:
            yield skipped(b, "multi", case, n, "n", why)
            continue
        yield from guard_many(b, "multi", case, n, "n", _pair, b, other, s, n)
        b.release()


@rule("bench-multi-skipped", "bench-multi-overlap")
def overlap(ctx: BenchContext) -> list[Finding]:
    """E5.4: how much two products at once gained over one after the other (or why not run)."""
    out = []
    for r in ctx.results:
        if r.workload == WORKLOAD.name and r.status == "skipped" and r.size is None:
            out.append(
                finding(
                    "bench-multi-skipped",
                    Status.SKIPPED,
                    f"multi on {r.framework} {r.device}: {r.reason}",
                    [],
                    subject=f"{r.framework} {r.device}",
                )
            )
        if r.workload == WORKLOAD.name and r.ok and r.values.get("speedup") is not None:
            out.append(
                finding(
                    "bench-multi-overlap",
                    Status.INFO,
                    f"{r.framework} {r.device}: two {r.size}×{r.size} matmuls, {r.case} vs one after "
                    f"the other: {r.values['speedup']:.2f}× (2× at best)",
                    [Evidence("speedup", r.values["speedup"], "×"), Evidence("n", r.size)],
                    subject=f"{r.framework} {r.device}",
                )
            )
    return out


WORKLOAD = Workload(
    name="multi",
    title="multi: E5.4 (docs/experiments.md#e5), two matmuls at once (two GPUs, or two streams "
    "on one) vs one after the other",
    run=run,
    advice=(overlap,),
)
