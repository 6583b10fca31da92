"""E1: ``(sin(x)**2 / cos(x)**2).sum()`` on an n×n array (the note's 10000×10000), in float64 and
float32, with the note's own times beside ours (docs/experiments.md#e1).

GB/s counts the input read once (n²·itemsize bytes: the least traffic the expression needs);
the float32 sum is checked against the float64 one on the same values (x is drawn in float64
and rounded to float32).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuprobe.platform.frameworks.base import DTYPE_BYTES, Backend
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import Settings, fits, guard, point, skipped, timed
from gpuprobe.tools.bench.workloads.base import Plot, Roofline, Workload

__all__ = ["FLOP_PER_ELEMENT", "NOTE_S", "REL_ERROR_LIMIT", "SIZES", "WORKLOAD", "run"]

SIZES = ((10_000,), (2_000,))  # n of the n×n array (full, quick); the note used 10000
DTYPES = ("float64", "float32")
REL_ERROR_LIMIT = 1e-3  # float32 sum vs float64 (doctor's E1_REL_ERR_FAIL)
# Nominal operations per element for the roofline: sin, cos, two squares, a division, an add
# (a transcendental counted as one).
FLOP_PER_ELEMENT = 6
# Arrays alive at the peak: x, sin(x)**2, cos(x)**2 and the quotient, plus a temporary.
LIVE_ARRAYS = 5
# The note's times (docs/experiments.md#e1, GCP n1-standard-4 + T4), by (framework, kind, dtype).
NOTE_S: dict[tuple[str, str, str], float] = {
    ("numpy", "cpu", "float64"): 4.12,
    ("torch", "cpu", "float32"): 0.738,
    ("torch", "cuda", "float32"): 0.0189,
}


def _one(b: Backend, s: Settings, n: int, dtype: str, ref: float | None) -> BenchResult:
    x = b.random((n, n), "float64", seed=s.seed)
    if dtype != "float64":
        x = b.cast(x, dtype)  # the same values, rounded: the float64 sum is the reference

    def fn() -> object:
        return b.e1(x)

    nbytes = float(n * n * DTYPE_BYTES[dtype])
    m = timed(
        b,
        f"expression-{dtype}",
        fn,
        s,
        min_runs=3,
        work={"bytes": nbytes, "flop": float(FLOP_PER_ELEMENT * n * n)},
        metadata={"n": n, "dtype": dtype},
    )
    total = float(b.to_numpy(fn()))
    values: dict[str, float | None] = {"sum": total, "gbs": nbytes / m.median / 1e9}
    if ref is not None and dtype != "float64":
        values["rel_error"] = abs(total - ref) / abs(ref) if ref else None
    note = NOTE_S.get((b.framework, b.device.partition(":")[0], dtype))
    if note is not None and n == 10_000:
        values["note_s"] = note
    return point(b, "expression", dtype, n, "n", m, values)


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """E1 in float64, then float32 (whose sum is checked against the float64 one)."""
    for n in s.pick("expression", *SIZES):
        ref: float | None = None
        for dtype in DTYPES:
            if dtype == "float64" and "float64" not in b.matmul_dtypes():
                yield skipped(
                    b, "expression", dtype, n, "n", f"skipped: no float64 on {b.framework}"
                )
                continue
            why = fits(b, (8 + LIVE_ARRAYS * DTYPE_BYTES[dtype]) * n * n)
            if why:
                yield skipped(b, "expression", dtype, n, "n", why)
                continue
            r = guard(b, "expression", dtype, n, "n", _one, b, s, n, dtype, ref)
            if r.ok and dtype == "float64":
                ref = r.values.get("sum")
            b.release()
            yield r


def _peak(r: BenchResult, g: Gpu) -> float | None:
    """The memory's bandwidth (GB/s)."""
    return g.peaks.memory_bandwidth_gbs if g.peaks is not None else None


def _error_limit(case: str) -> float | None:
    return REL_ERROR_LIMIT


WORKLOAD = Workload(
    name="expression",
    title="expression: E1 (docs/experiments.md#e1), (sin(x)**2 / cos(x)**2).sum() on n×n; "
    "GB/s = input bytes / median time",
    run=run,
    peak=_peak,
    error_limit=_error_limit,
    plot=Plot(roofline=Roofline(points=lambda case: True, memory_roof=True)),
)
