"""Matrix products C = A·B of n×n matrices in every dtype the backend multiplies in (float64,
float32, TF32, bfloat16, float16, int8): TFLOP/s = 2n³ / median time (TOP/s for int8), and the
error against the exact product, for E4's trade: speed gained, accuracy lost
(docs/experiments.md#e4).

A and B are drawn in float32 (standard normal) and converted to the dtype; int8 quantizes each
matrix symmetrically (scale 127 / max|x|) and dequantizes the int32 product. The error is
‖C − C₆₄‖_F / ‖C₆₄‖_F where C₆₄ is NumPy's float64 product of the float32 originals, so it counts
what the conversion loses as well as the arithmetic. On a GPU the L2 cache is flushed before each
repetition while the operands could fit in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.frameworks.base import DTYPE_BYTES, Backend
from gpuprobe.measure.report import BenchResult
from gpuprobe.measure.workloads._common import (
    Settings,
    fits,
    guard,
    point,
    rel_error,
    skipped,
    timed,
    too_slow,
)

__all__ = ["ERROR_CHECK_MAX_N", "SIZES", "run"]

SIZES = ((16, 64, 256, 1024, 4096, 8192, 16384), (16, 64, 256, 512))  # n (full, quick)
ERROR_CHECK_MAX_N = 1024  # above this, the float64 reference on the host costs too much
CACHE_RESIDENT_BYTES = 256 * 2**20  # operands below this may sit in L2 (H200: 60 MB): flush
INT8_LEVELS = 127.0  # symmetric int8 quantization range


def _work(n: int, dtype: str) -> dict[str, float]:
    """FLOP per product and the least DRAM traffic: read A and B, write C."""
    out_bytes = 4 if dtype == "int8" else DTYPE_BYTES[dtype]
    return {"flop": 2.0 * n**3, "bytes": float(n * n * (2 * DTYPE_BYTES[dtype] + out_bytes))}


def _quantize(b: Backend, x: Any) -> tuple[Any, float]:
    scale = INT8_LEVELS / max(float(b.to_numpy(abs(x).max())), 1e-30)
    return b.cast((x * scale).round(), "int8"), scale


def _one(
    b: Backend, s: Settings, n: int, dtype: str, flush: Callable[[], Any] | None
) -> BenchResult:
    a32, c32 = b.randn((n, n), seed=s.seed + 1), b.randn((n, n), seed=s.seed + 2)
    host = (b.to_numpy(a32), b.to_numpy(c32)) if n <= ERROR_CHECK_MAX_N else None
    unscale = 1.0
    if dtype == "int8":
        (a, sa), (c, sc) = _quantize(b, a32), _quantize(b, c32)
        unscale = 1.0 / (sa * sc)

        def fn() -> Any:
            return b.int8_matmul(a, c)

    else:
        a, c = b.cast(a32, dtype), b.cast(c32, dtype)

        def fn() -> Any:
            return b.matmul(a, c)

    del a32, c32
    work = _work(n, dtype)
    with b.matmul_precision(dtype):
        out = fn()
        err = None
        if host is not None:
            got = b.to_numpy(b.cast(out, "float32") if dtype in ("bfloat16", "float16") else out)
            ref = host[0].astype("f8") @ host[1].astype("f8")
            err = rel_error(got * unscale, ref)
        del out
        setup = flush if flush is not None and work["bytes"] < CACHE_RESIDENT_BYTES else None
        m = timed(
            b,
            f"matmul-{dtype}",
            fn,
            s,
            min_runs=3,
            setup=setup,
            work=work,
            metadata={"n": n, "dtype": dtype},
        )
    return point(
        b,
        "matmul",
        dtype,
        n,
        "n",
        m,
        {"tflops": work["flop"] / m.median / 1e12, "rel_error": err},
    )


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Each dtype over the sizes, smallest first; a size that cannot fit, or whose one product
    would take longer than the limit, is skipped (and the larger ones with it)."""
    flush = b.cache_flusher()
    for dtype in b.matmul_dtypes():
        last: tuple[float, float] | None = None
        for n in s.pick("matmul", *SIZES):
            need = n * n * (3 * DTYPE_BYTES[dtype] + 2 * 4 + 4)  # operands, float32 draws, output
            why = fits(b, need) or too_slow(last, 2.0 * n**3, s.rep_limit)
            if why:
                yield skipped(b, "matmul", dtype, n, "n", why)
                if "out of memory" not in why:
                    break
                continue
            r = guard(b, "matmul", dtype, n, "n", _one, b, s, n, dtype, flush)
            if r.ok and r.measurement is not None:
                last = (2.0 * n**3, r.measurement.median)
            yield r
        b.release()
