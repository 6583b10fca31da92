"""What every workload shares: the run's :class:`Settings`, the memory check before a size is
tried, the guard that turns an out-of-memory error into a skipped point (and gives the memory
back), and the extrapolation that skips sizes whose one repetition would take too long.

Times in seconds, sizes of memory in bytes.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.core.records import Record
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.platform.measurement import Measurement, rel_error
from gpuprobe.platform.timing import measure
from gpuprobe.tools.bench.model import BenchResult, ResultStatus

__all__ = [
    "BUDGET_S",
    "FREE_MEMORY_FRACTION",
    "REP_LIMIT_S",
    "Settings",
    "best_pace",
    "fits",
    "guard",
    "guard_many",
    "point",
    "rel_error",
    "skipped",
    "timed",
    "too_slow",
]

BUDGET_S = (0.25, 0.03)  # seconds of repetitions per measurement (full, quick); do_bench: 0.1 s
REP_LIMIT_S = (3.0, 0.4)  # a size whose one repetition would take longer is skipped (full, quick)
# Share of the free memory a size may need; the rest is headroom for the framework's workspace
# (cuBLAS, the caching allocator's rounding) and the CUDA context.
FREE_MEMORY_FRACTION = 0.85


@dataclass(frozen=True)
class Settings(Record):
    """How a run goes: quick or full sizes, the time budget per measurement, sizes chosen by the
    caller per workload, and the other devices of the same framework (for ``multi``)."""

    quick: bool = False
    budget_s: float | None = None
    rep_limit_s: float | None = None
    sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    peers: tuple[str, ...] = ()  # other devices this framework can use: ("cuda:1",)
    seed: int = 0

    @property
    def budget(self) -> float:
        """Seconds of repetitions per measurement."""
        return self.budget_s if self.budget_s is not None else BUDGET_S[int(self.quick)]

    @property
    def rep_limit(self) -> float:
        """Seconds one repetition may take before a size is skipped as too slow."""
        return self.rep_limit_s if self.rep_limit_s is not None else REP_LIMIT_S[int(self.quick)]

    def pick(self, workload: str, full: tuple[int, ...], quick: tuple[int, ...]) -> tuple[int, ...]:
        """The sizes of ``workload``: the caller's, else the quick or full defaults."""
        return tuple(self.sizes.get(workload) or (quick if self.quick else full))


def timed(b: Backend, name: str, fn: Callable[[], Any], s: Settings, **kwargs: Any) -> Measurement:
    """:func:`~gpuprobe.platform.timing.measure` with the run's budget."""
    return measure(name, fn, b, budget_s=s.budget, **kwargs)


def fits(b: Backend, nbytes: float) -> str | None:
    """Why ``nbytes`` cannot be allocated on ``b``'s device (None when it can, or is unknown)."""
    free = b.free_memory()
    if free is None or nbytes <= FREE_MEMORY_FRACTION * free:
        return None
    return f"out of memory: needs {nbytes / 1e9:.2f} GB, {free / 1e9:.2f} GB free"


def best_pace(
    best: tuple[float, Measurement] | None, work: float, m: Measurement
) -> tuple[float, Measurement]:
    """Of ``best`` and (``work``, ``m``), the (work, measurement) whose fastest run took the
    least time per unit of work: what :func:`too_slow` extrapolates from."""
    if best is None or best[0] <= 0 or (work > 0 and m.min / work < best[1].min / best[0]):
        return work, m
    return best


def too_slow(best: tuple[float, Measurement] | None, work: float, limit: float) -> str | None:
    """Why a size is skipped when one repetition, extrapolated from ``best`` (the (work,
    measurement) of the series so far with the best pace, :func:`best_pace`), would take longer
    than ``limit`` seconds.

    The extrapolation starts from the fastest run at the fastest pace: another process can only
    slow a run, and a thread pool that a busy host stalls takes a scheduler slice (16 ms) for an
    8 µs matmul, median and minimum alike, so extrapolating from the last size alone skipped
    sizes that take microseconds. When that run may be stalled too (its runs never agreed), the
    reason says so."""
    if best is None or best[0] <= 0:
        return None
    m = best[1]
    predicted = m.min * work / best[0]
    if predicted <= limit:
        return None
    doubt = "" if m.trusted else "; from runs that never agreed: re-run on an idle machine"
    return f"skipped: one repetition would take ~{predicted:.3g} s (limit {limit:g} s){doubt}"


def point(
    b: Backend,
    workload: str,
    case: str,
    size: int | None,
    unit: str,
    m: Measurement,
    values: dict[str, float | None],
    reason: str | None = None,
) -> BenchResult:
    """A measured point of ``workload`` on ``b``'s framework and device."""
    return BenchResult(
        workload,
        case,
        b.framework,
        b.device,
        size,
        unit,
        measurement=m,
        values=values,
        reason=reason,
    )


def skipped(
    b: Backend, workload: str, case: str, size: int | None, unit: str, why: str
) -> BenchResult:
    """A point not measured, and why (``out of memory: ...`` marks the memory case)."""
    status: ResultStatus = "out-of-memory" if why.startswith("out of memory") else "skipped"
    return BenchResult(workload, case, b.framework, b.device, size, unit, status=status, reason=why)


def guard_many(
    b: Backend,
    workload: str,
    case: str,
    size: int | None,
    unit: str,
    body: Callable[..., list[BenchResult]],
    *args: Any,
) -> list[BenchResult]:
    """``body(*args)``, or one point marked out-of-memory (memory given back with
    ``release()``), skipped (the backend cannot do it) or failed with the error's first line."""
    oom = None
    try:
        return body(*args)
    except NotImplementedError as exc:
        return [skipped(b, workload, case, size, unit, f"skipped: {exc}")]
    except Exception as exc:
        first = (f"{type(exc).__name__}: {exc}".strip().splitlines() or ["error"])[0]
        if not b.is_out_of_memory(exc):
            return [
                BenchResult(
                    workload, case, b.framework, b.device, size, unit, status="error", reason=first
                )
            ]
        oom = first[:200]
    # here, outside the except block, the traceback and the arrays it held are gone
    gc.collect()
    b.release()
    return [skipped(b, workload, case, size, unit, f"out of memory: {oom}")]


def guard(
    b: Backend,
    workload: str,
    case: str,
    size: int | None,
    unit: str,
    body: Callable[..., BenchResult],
    *args: Any,
) -> BenchResult:
    """:func:`guard_many` for a body that measures one point."""
    return guard_many(b, workload, case, size, unit, lambda: [body(*args)])[0]
