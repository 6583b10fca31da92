"""The cost of one tiny operation (adding 1 to a one-element array), the launch overhead of E9
(docs/experiments.md#e9).

On a GPU, three ways: ``queue`` (host time to queue one launch, many back to back, no wait),
``launch+wait`` (host time of one launch and a synchronize: what a loop that reads a value back
each step pays) and ``graph`` (device time per operation when 100 of them are captured in a CUDA
graph and replayed at once). On a CPU: ``call``, the per-call overhead of the framework.
Reported in microseconds per operation (``us``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import Settings, guard, point, timed
from gpuprobe.tools.bench.workloads.base import Workload

__all__ = ["GRAPH_OPS", "WORKLOAD", "run"]

GRAPH_OPS = 100  # operations per CUDA graph, and per queued batch
CPU_CALLS = 1_000  # calls per timed repetition on the CPU (one call is ~1 µs)


def _result(b: Backend, case: str, m: Any) -> BenchResult:
    return point(
        b,
        "launch",
        case,
        1,
        "elements",
        m,
        {"us": m.median * 1e6},
    )


def _cpu(b: Backend, s: Settings) -> BenchResult:
    m = timed(b, "launch-call", b.tiny_op(), s, min_runs=5, inner=CPU_CALLS)
    return _result(b, "call", m)


def _queue(b: Backend, s: Settings) -> BenchResult:
    m = timed(
        b,
        "launch-queue",
        b.tiny_op(),
        s,
        min_runs=5,
        inner=GRAPH_OPS,
        host_clock=True,
        setup=b.synchronize,
    )
    return _result(b, "queue", m)


def _wait(b: Backend, s: Settings) -> BenchResult:
    op = b.tiny_op()

    def fn() -> None:
        op()
        b.synchronize()

    return _result(b, "launch+wait", timed(b, "launch-wait", fn, s, min_runs=5, host_clock=True))


def _graph(b: Backend, s: Settings) -> BenchResult:
    replay = b.graph(b.tiny_op(), GRAPH_OPS)
    if replay is None:
        raise NotImplementedError(f"{b.framework} cannot capture CUDA graphs")
    m = timed(b, "launch-graph", replay, s, min_runs=5, per_call=GRAPH_OPS)
    return _result(b, "graph", m)


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Per-call overhead on the CPU; queue, launch+wait and graph replay on a GPU."""
    if not b.is_gpu:
        yield guard(b, "launch", "call", 1, "elements", _cpu, b, s)
        return
    yield guard(b, "launch", "queue", 1, "elements", _queue, b, s)
    yield guard(b, "launch", "launch+wait", 1, "elements", _wait, b, s)
    yield guard(b, "launch", "graph", 1, "elements", _graph, b, s)


WORKLOAD = Workload(
    name="launch", title="launch: one tiny op (1-element add), µs per operation", run=run
)
