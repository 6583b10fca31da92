"""E5 exercise 3: 1000 products of 100×100 matrices, reading the norm back to the host every step
(what ``print(y.norm())`` does: a copy and a wait each time) vs keeping the norms on the device and
copying the log once at the end. Host clock around the whole loop, which ends with the data on the
host; per-step time in ``us_per_step``. E5: docs/experiments.md#e5.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import Settings, guard, point, timed
from gpuprobe.tools.bench.workloads.base import BenchContext, Workload, by_pair, finding

__all__ = ["MATRIX_N", "STEPS", "SYNC_EVERY_STEP_RATIO", "WORKLOAD", "every_step", "run"]

STEPS = ((1_000,), (200,))  # products per loop (full, quick); E5 used 1000
MATRIX_N = 100  # E5's 100×100 matrices
SYNC_EVERY_STEP_RATIO = 1.5  # host-every-step loop this many times slower: copy the log once


def _one(b: Backend, s: Settings, steps: int, every_step: bool) -> BenchResult:
    xp = b.xp
    a = b.randn((MATRIX_N, MATRIX_N), seed=s.seed + 1)
    c = b.randn((MATRIX_N, MATRIX_N), seed=s.seed + 2)

    def host_each_step() -> list[float]:
        return [float(b.to_numpy(xp.linalg.norm(b.matmul(a, c)))) for _ in range(steps)]

    def log_on_device() -> Any:
        log = [xp.linalg.norm(b.matmul(a, c)) for _ in range(steps)]
        return b.to_numpy(xp.stack(log))

    fn = host_each_step if every_step else log_on_device
    case = "host-every-step" if every_step else "log-on-device"
    m = timed(
        b,
        f"sync-{case}",
        fn,
        s,
        min_runs=3,
        host_clock=True,
        work={"flop": 2.0 * MATRIX_N**3 * steps},
        metadata={"steps": steps},
    )
    return point(
        b,
        "sync",
        case,
        steps,
        "steps",
        m,
        {"us_per_step": m.median / steps * 1e6},
    )


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Both loops, the norm copied every step first."""
    for steps in s.pick("sync", *STEPS):
        for every in (True, False):
            case = "host-every-step" if every else "log-on-device"
            yield guard(b, "sync", case, steps, "steps", _one, b, s, steps, every)


@rule("bench-sync-every-step")
def every_step(ctx: BenchContext) -> list[Finding]:
    """E5.3: what reading a value back every step costs against a log kept on the device."""
    out = []
    for (fw, dev), rs in by_pair(ctx.results, WORKLOAD.name).items():
        every = next((r for r in rs if r.case == "host-every-step"), None)
        once = next((r for r in rs if r.case == "log-on-device"), None)
        if every and once and every.seconds and once.seconds:
            ratio = every.seconds / once.seconds
            status = Status.WARN if ratio >= SYNC_EVERY_STEP_RATIO else Status.OK
            out.append(
                finding(
                    "bench-sync-every-step",
                    status,
                    f"{fw} {dev}: reading the norm back every step costs "
                    f"{every.values['us_per_step']:.3g} µs/step vs {once.values['us_per_step']:.3g} "
                    f"with the log kept on the device ({ratio:.2f}×)",
                    [
                        Evidence("every_step", every.values["us_per_step"], "µs"),
                        Evidence("log_on_device", once.values["us_per_step"], "µs"),
                    ],
                    fix="keep per-step values on the device (torch.stack) and copy them once; "
                    "don't print or .item() inside the loop"
                    if status is Status.WARN
                    else "",
                    subject=f"{fw} {dev}",
                )
            )
    return out


WORKLOAD = Workload(
    name="sync",
    title="sync: E5.3 (docs/experiments.md#e5), norm to the host every step vs a log kept on the "
    "device, µs per step",
    run=run,
    advice=(every_step,),
)
