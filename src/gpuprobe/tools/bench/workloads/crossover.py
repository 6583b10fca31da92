"""Where the GPU starts to win (E5 exercise 1; E9's batch 1024 vs 10240): an elementwise add and a
matmul over growing sizes, timed on every device. On a GPU twice: with the data already on the
device (``*-resident``) and with the copies counted (``*-copies``: NumPy inputs copied in, the
result copied back, host clock, as a user's code pays them). The crossover itself is read off in
its rule, against the best CPU time at each size. E5, E9: docs/experiments.md#e5, #e9.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import (
    Settings,
    best_pace,
    fits,
    guard,
    point,
    timed,
    too_slow,
)
from gpuprobe.tools.bench.workloads.base import (
    BenchContext,
    Curve,
    Plot,
    Roofline,
    Workload,
    finding,
)

__all__ = ["ELEMENTWISE_SIZES", "MATMUL_SIZES", "WORKLOAD", "crossover", "crossover_size", "run"]

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
            last: tuple[float, Measurement] | None = None
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
                    last = best_pace(last, work, r.measurement)
                yield r
            b.release()


def crossover_size(cpu: dict[int, float], gpu: dict[int, float]) -> int | None:
    """The smallest size from which the GPU is faster than the CPU at every larger size measured
    by both; None when it never is."""
    sizes = sorted(set(cpu) & set(gpu))
    winner = None
    for s in reversed(sizes):
        if gpu[s] < cpu[s]:
            winner = s
        else:
            break
    return winner


@rule("bench-crossover", "bench-no-gpu-to-cross-over")
def crossover(ctx: BenchContext) -> list[Finding]:
    """E5.1: from which size each GPU beats the best CPU, data resident and with the copies."""
    rs = [r for r in ctx.results if r.workload == WORKLOAD.name and r.ok and r.size is not None]
    if not rs:
        return []
    gpu_rs = [r for r in rs if r.device != "cpu"]
    if not gpu_rs:
        return [
            finding(
                "bench-no-gpu-to-cross-over",
                Status.INFO,
                "no GPU here: the crossover curves show the CPU backends only, with no GPU to "
                "cross over to",
                [Evidence("cpu_backends", ", ".join(sorted({r.framework for r in rs})))],
                fix="run 'gpuprobe bench crossover' on a machine with an NVIDIA GPU",
            )
        ]
    out = []
    for kind in ("elementwise", "matmul"):
        cpu: dict[int, float] = {}
        for r in rs:
            if (
                r.device == "cpu"
                and r.case == f"{kind}-resident"
                and r.seconds is not None
                and r.size is not None
            ):
                cpu[r.size] = min(cpu.get(r.size, float("inf")), r.seconds)
        for fw, dev in sorted({(r.framework, r.device) for r in gpu_rs}):
            ev = []
            parts = []
            for mode in ("resident", "copies"):
                g = {
                    r.size: r.seconds
                    for r in gpu_rs
                    if r.framework == fw
                    and r.device == dev
                    and r.case == f"{kind}-{mode}"
                    and r.seconds is not None
                }
                if not g or not cpu:
                    continue
                at = crossover_size(cpu, g)  # type: ignore[arg-type]
                ev.append(Evidence(f"crossover {mode}", at))
                parts.append(
                    f"{mode.replace('copies', 'with copies')}: " + (f"from {at}" if at else "never")
                )
            if parts:
                unit = "n×n" if kind == "matmul" else "elements"
                out.append(
                    finding(
                        "bench-crossover",
                        Status.INFO,
                        f"{fw} {dev} beats the best CPU on {kind} ({unit}) " + "; ".join(parts),
                        ev,
                        fix="keep small work on the CPU or batch it (E9 in docs/experiments.md#e9: "
                        "batch 10240 used the GPU, 1024 did not); keep data on the device "
                        "between steps",
                        subject=f"{fw} {dev}",
                    )
                )
    return out


def _series(r: BenchResult) -> tuple[str, bool]:
    """A curve's label (the backend, and whether the copies are counted) and whether it is
    dashed (with the copies)."""
    copies = r.case.split("-", 1)[1] == "copies"
    return f"{r.framework} {r.device}" + (" (with copies)" if copies else ""), copies


WORKLOAD = Workload(
    name="crossover",
    title="crossover: time per size on each device (E5.1, docs/experiments.md#e5); the "
    "crossover is in the findings",
    run=run,
    advice=(crossover,),
    plot=Plot(
        curves=(
            Curve(
                cases="elementwise",
                title="crossover: elementwise a + b",
                xlabel="elements",
                series=_series,
                empty="crossover elementwise",
                cpu_only_note="no GPU here: CPU curves only",
            ),
            Curve(
                cases="matmul",
                title="crossover: matmul",
                xlabel="n (n×n matrices)",
                series=_series,
                empty="crossover matmul",
                plain_ticks=True,
                cpu_only_note="no GPU here: CPU curves only",
            ),
        ),
        roofline=Roofline(points=lambda case: case.startswith("elementwise-resident")),
    ),
)
