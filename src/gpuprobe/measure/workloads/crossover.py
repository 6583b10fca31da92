"""Where the GPU starts to win (E5 exercise 1; E9's batch 1024 vs 10240): an elementwise add and a
matmul over growing sizes, timed on every device. On a GPU twice: with the data already on the
device (``*-resident``) and with the copies counted (``*-copies``: NumPy inputs copied in, the
result copied back, host clock, as a user's code pays them). The crossover itself is read off in
the runner, against the best CPU time at each size. E5, E9: docs/experiments.md#e5, #e9.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.frameworks.base import Backend
from gpuprobe.measure.report import BenchResult
from gpuprobe.measure.workloads._common import Settings, fits, guard, point, timed, too_slow

__all__ = ["ELEMENTWISE_SIZES", "MATMUL_SIZES", "run"]

ELEMENTWISE_SIZES = (
    (1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000),
    (1_000, 10_000, 100_000, 1_000_000, 10_000_000),
)  # elements (full, quick)
MATMUL_SIZES = (
    (16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
    (16, 32, 64, 128, 256, 512),
)  # n of n×n (full, quick)


def _op(b: Backend, kind: str) -> Callable[[Any, Any], Any]:
    return b.matmul if kind == "matmul" else (lambda x, y: x + y)


def _one(b: Backend, s: Settings, kind: str, copies: bool, size: int) -> BenchResult:
    shape = (size, size) if kind == "matmul" else (size,)
    op = _op(b, kind)
    flop = 2.0 * size**3 if kind == "matmul" else float(size)
    nbytes = 12.0 * (size * size if kind == "matmul" else size)  # two float32 reads, one write
    case = f"{kind}-{'copies' if copies else 'resident'}"
    if copies:
        ha = b.to_numpy(b.random(shape, seed=s.seed + 1))
        hb = b.to_numpy(b.random(shape, seed=s.seed + 2))

        def fn() -> Any:
            return b.to_numpy(op(b.asarray(ha), b.asarray(hb)))

        m = timed(
            b,
            f"crossover-{case}",
            fn,
            s,
            min_runs=3,
            host_clock=True,
            work={"flop": flop, "bytes": nbytes},
        )
    else:
        a, c = b.random(shape, seed=s.seed + 1), b.random(shape, seed=s.seed + 2)
        m = timed(
            b,
            f"crossover-{case}",
            lambda: op(a, c),
            s,
            min_runs=3,
            work={"flop": flop, "bytes": nbytes},
        )
    return point(
        b,
        "crossover",
        case,
        size,
        "n" if kind == "matmul" else "elements",
        m,
        {"gflops": flop / m.median / 1e9},
    )


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Each op, resident (and with copies on a GPU), over its sizes."""
    for kind, sizes in (
        ("elementwise", s.pick("crossover", *ELEMENTWISE_SIZES)),
        ("matmul", s.pick("crossover-matmul", *MATMUL_SIZES)),
    ):
        for copies in (False, True) if b.is_gpu else (False,):
            last: tuple[float, float] | None = None
            case = f"{kind}-{'copies' if copies else 'resident'}"
            unit = "n" if kind == "matmul" else "elements"
            for size in sizes:
                work = 2.0 * size**3 if kind == "matmul" else float(size)
                elements = size * size if kind == "matmul" else size
                why = fits(b, 16 * elements) or too_slow(last, work, s.rep_limit)
                if why:
                    break
                r = guard(
                    b,
                    "crossover",
                    case,
                    size,
                    unit,
                    _one,
                    b,
                    s,
                    kind,
                    copies,
                    size,
                )
                if r.ok and r.measurement is not None:
                    last = (work, r.measurement.median)
                yield r
            b.release()
