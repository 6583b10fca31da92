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

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.frameworks.base import DTYPE_BYTES, Backend
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.platform.measurement import SPREAD_WARN_FRACTION, Measurement
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads._common import (
    Settings,
    best_pace,
    fits,
    guard,
    point,
    rel_error,
    skipped,
    timed,
    too_slow,
)
from gpuprobe.tools.bench.workloads.base import (
    BenchContext,
    Plot,
    Roofline,
    Workload,
    by_pair,
    finding,
)

__all__ = [
    "BELOW_PEAK_CARD_FIX",
    "ERROR_CHECK_MAX_N",
    "MATMUL_PEAK_MIN_N",
    "MATMUL_PEAK_WARN_FRACTION",
    "PEAK_FIELD",
    "POWER_CAP_REASONS",
    "PRECISION_FASTER_RATIO",
    "REL_ERROR_LIMIT",
    "SIZES",
    "WORKLOAD",
    "below_peak",
    "fp64_tensor_peak",
    "power_capped",
    "precision",
    "run",
]

SIZES = ((16, 64, 256, 1024, 4096, 8192, 16384), (16, 64, 256, 512))  # n (full, quick)
ERROR_CHECK_MAX_N = 1024  # above this, the float64 reference on the host costs too much
CACHE_RESIDENT_BYTES = 256 * 2**20  # operands below this may sit in L2 (H200: 60 MB): flush
INT8_LEVELS = 127.0  # symmetric int8 quantization range
# NVML clock-event reasons that mean the card settled at its power limit: a matmul's times fall
# as it does (an H200's bf16 16384³: 730 → 662 TFLOP/s over 21 repetitions at an idle host), so
# their spread is the card's, and an idle machine would show the same.
POWER_CAP_REASONS = frozenset({"sw_power_cap"})
# A precision below float32 is recommended only when it ran at least this much faster than
# float32 on the same device: gpuprobe's choice, above the run-to-run spread of a CPU matmul.
PRECISION_FASTER_RATIO = 1.2

# ‖C − C64‖/‖C64‖ above which a product is wrong, per dtype, for standard-normal inputs with
# n ≤ 1024. float64/float32: a few ulps × √n; TF32 (10-bit mantissa) lands near 3e-4, bfloat16
# (8-bit) near 3e-3 and int8 (symmetric per-tensor) near 1e-2 (measured here and in the doctor's
# METHOD.md); the limits leave about 10× headroom.
REL_ERROR_LIMIT: dict[str, float] = {
    "float64": 1e-12,
    "float32": 1e-5,
    "tfloat32": 5e-3,
    "bfloat16": 3e-2,
    "float16": 5e-3,
    "int8": 1e-1,
}
MATMUL_PEAK_WARN_FRACTION = 0.5  # of the spec's dense peak at n ≥ 4096; cuBLAS reaches 70-90 %
# (GH200 FP32 63.0 of 66.9 TFLOPS measured in the public mredenti/PowerCapping results)
MATMUL_PEAK_MIN_N = 4096
# Which peak each dtype is held against (hardware.types.Peaks fields; float64 is held against the
# FP64 tensor cores where the card has them: fp64_tensor_peak).
PEAK_FIELD: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "tfloat32": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "int8": "int8",
}


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
        last: tuple[float, Measurement] | None = None
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
                last = best_pace(last, 2.0 * n**3, r.measurement)
            yield r
        b.release()


# How to compute in each precision below float32, per framework ("" where it has no such switch).
_LOWER_HOWTO: dict[str, dict[str, str]] = {
    "torch": {
        "tfloat32": "torch.set_float32_matmul_precision('high')",
        "bfloat16": "torch.autocast(device_type, dtype=torch.bfloat16)",
        "float16": "torch.autocast(device_type, dtype=torch.float16)",
        "int8": "torch.ao.quantization.quantize_dynamic(model, dtype=torch.qint8)",
    },
}


def power_capped(r: BenchResult) -> bool:
    """True when NVML saw only the power cap slow the card while ``r`` ran: its times then fall
    as the card settles at its power limit, and the median is the rate it sustains."""
    c = r.conditions
    reasons = set(c.clock_event_reasons) if c is not None else set()
    return bool(reasons) and reasons <= POWER_CAP_REASONS


def _precision_fix(
    fw: str,
    dev: str,
    speeds: dict[str, float | None],
    spread: frozenset[str] = frozenset(),
    capped: frozenset[str] = frozenset(),
) -> str:
    """Recommend only a precision that was measured faster than float32 here, and only as a
    thing to confirm when its time or float32's varied too much to trust (``spread``); a spread
    that the card's power cap explains (``capped``) is said, not doubted."""
    lower = {
        d: v
        for d, v in speeds.items()
        if d in ("tfloat32", "bfloat16", "float16", "int8")
        and v is not None
        and v >= PRECISION_FASTER_RATIO
    }
    if not lower:
        slower = ", ".join(
            f"{d} {v:.2g}×"
            for d, v in speeds.items()
            if d in ("tfloat32", "bfloat16", "float16", "int8") and v is not None
        )
        return f"keep float32 on {fw} {dev}: no lower precision ran faster here" + (
            f" ({slower} of float32's speed)" if slower else ""
        )
    best = max(lower, key=lambda d: lower[d] or 0.0)
    how = _LOWER_HOWTO.get(fw, {}).get(best) or f"compute in {best}"
    noisy = sorted(spread & {best, "float32"})
    if noisy:
        return (
            f"{best} ran {lower[best]:.2g}× float32's speed here, but the times of "
            f"{' and '.join(noisy)} varied too much to trust (interquartile range over "
            f"{SPREAD_WARN_FRACTION:.0%} of the median): re-run on an idle machine before "
            f"switching to {how}"
        )
    settled = sorted(capped & {best, "float32"})
    return (
        f"{best} ran {lower[best]:.2g}× float32's speed here"
        + (
            f" ({' and '.join(settled)}: times fell as the card reached its power cap; the "
            "median is the rate it sustains)"
            if settled
            else ""
        )
        + f"; if your model tolerates its error: {how}"
    )


# The kernel a framework runs for a dtype, where it is not the framework's plain a @ b.
_KERNEL: dict[tuple[str, str], str] = {("torch", "int8"): "torch._int_mm"}
BELOW_PEAK_CARD_FIX = (
    "look for throttling ('gpuprobe doctor'), another process on the card ('nvidia-smi'), or a "
    "power cap ('nvidia-smi -q -d POWER')"
)


def _below_peak_fix(r: BenchResult) -> str:
    """Where to look for a matmul far below its peak: at the card when NVML saw it held back (a
    clock-event reason) or could not tell; at the framework's kernel when the card ran free (the
    H200's torch int8: 131 TOP/s, 7 % of 1979, at a steady 1980 MHz and 355 W of 700)."""
    c = r.conditions
    if c is None or not c.samples or c.clock_event_reasons or c.sm_clock_mhz_min is None:
        return BELOW_PEAK_CARD_FIX
    kernel = _KERNEL.get((r.framework, r.case))
    power = f", {c.power_w_max:.0f} W" if c.power_w_max is not None else ""
    return (
        f"the card was not held back (SM clock {c.sm_clock_mhz_min}-{c.sm_clock_mhz_max} MHz"
        f"{power}, no clock-event reason from NVML): {r.framework}'s {r.case} kernel"
        + (f" ({kernel})" if kernel else "")
        + f" is the limit; try a newer {r.framework} or another framework for {r.case} products"
    )


@rule("bench-matmul-below-peak")
def below_peak(ctx: BenchContext) -> list[Finding]:
    """A dtype whose best rate at a large size is far below its spec peak."""
    out = []
    for (fw, dev), rs in by_pair(ctx.results, WORKLOAD.name).items():
        best: dict[str, BenchResult] = {}
        for r in rs:
            pct = r.values.get("pct_peak")
            if pct is None or (r.size or 0) < MATMUL_PEAK_MIN_N:
                continue
            if r.case not in best or pct > (best[r.case].values["pct_peak"] or 0):
                best[r.case] = r
        low = [
            r
            for r in best.values()
            if (r.values["pct_peak"] or 0) < 100 * MATMUL_PEAK_WARN_FRACTION
        ]
        for r in low:
            out.append(
                finding(
                    "bench-matmul-below-peak",
                    Status.WARN,
                    f"{fw} {dev}: {r.case} matmul reaches {r.values['tflops']:.3g} "
                    f"{r.tflops_unit}, "
                    f"{r.values['pct_peak']:.0f} % of the {r.values['peak']:g} peak",
                    [
                        Evidence("tflops", r.values["tflops"], r.tflops_unit),
                        Evidence("peak", r.values["peak"], r.tflops_unit),
                        Evidence("n", r.size),
                        Evidence(
                            "sm_clock_min",
                            r.conditions.sm_clock_mhz_min if r.conditions else None,
                            "MHz",
                        ),
                    ],
                    fix=_below_peak_fix(r),
                    subject=f"{fw} {dev}",
                )
            )
    return out


@rule("bench-precision-tradeoff")
def precision(ctx: BenchContext) -> list[Finding]:
    """E4: each dtype's speed against float32 at the largest size all of them reached, and its
    error."""
    out = []
    for (fw, dev), rs in by_pair(ctx.results, WORKLOAD.name).items():
        by_dtype: dict[str, dict[int, BenchResult]] = defaultdict(dict)
        for r in rs:
            if r.size is not None:
                by_dtype[r.case][r.size] = r
        if "float32" not in by_dtype or len(by_dtype) < 2:
            continue
        common = set.intersection(*(set(v) for v in by_dtype.values()))
        if not common:
            continue
        n = max(common)
        base = by_dtype["float32"][n].values.get("tflops") or 0.0
        ev = []
        parts = []
        speeds: dict[str, float | None] = {}
        for dtype, sizes in by_dtype.items():
            r = sizes[n]
            rate = r.values.get("tflops") or 0.0
            err = next(
                (
                    x.values.get("rel_error")
                    for _, x in sorted(sizes.items(), reverse=True)
                    if x.values.get("rel_error") is not None
                ),
                None,
            )
            speed = rate / base if base else None
            speeds[dtype] = speed
            ev.append(
                Evidence(f"{dtype} speed vs float32", float(f"{speed:.3g}") if speed else None, "×")
            )
            ev.append(Evidence(f"{dtype} error", err))
            parts.append(f"{dtype} {speed:.2g}×" + (f" (err {err:.1e})" if err is not None else ""))
        spread = [
            d
            for d, sizes in by_dtype.items()
            if (m := sizes[n].measurement) is not None and m.too_spread
        ]
        out.append(
            finding(
                "bench-precision-tradeoff",
                Status.INFO,
                f"{fw} {dev}, matmul {n}×{n} against float32: " + ", ".join(parts),
                ev,
                fix=_precision_fix(
                    fw,
                    dev,
                    speeds,
                    frozenset(d for d in spread if not power_capped(by_dtype[d][n])),
                    frozenset(d for d in spread if power_capped(by_dtype[d][n])),
                ),
                subject=f"{fw} {dev}",
            )
        )
    return out


def fp64_tensor_peak(g: Gpu) -> float | None:
    """The FP64 tensor-core peak (TFLOP/s) of the card's product, when the spec table has one
    (A100, H100, H200, B200: cuBLAS runs a float64 GEMM on those tensor cores, at up to twice the
    CUDA-core rate that ``Peaks.fp64`` holds)."""
    from gpuprobe.platform.hardware import specs

    product = g.peaks.product if g.peaks is not None else None
    spec = next((p for p in specs.PRODUCTS if p.product == product), None) if product else None
    return spec.fp64_tensor if spec is not None else None


def _peak(r: BenchResult, g: Gpu) -> float | None:
    """The spec's dense peak of the result's dtype (TFLOP/s): for float64, the tensor cores'
    where the card has them (an H200 ran 62.8 TFLOP/s, 185 % of its 34 TFLOP/s CUDA-core
    figure and 94 % of its 67 TFLOP/s FP64 tensor figure)."""
    if g.peaks is None:
        return None
    if r.case == "float64" and (tensor := fp64_tensor_peak(g)) is not None:
        return tensor
    return getattr(g.peaks, PEAK_FIELD.get(r.case, ""), None)


WORKLOAD = Workload(
    name="matmul",
    title="matmul: TFLOP/s = 2n³ / median time (TOP/s for int8); error ‖C−C64‖/‖C64‖ "
    "(E4, docs/experiments.md#e4)",
    run=run,
    rate="tflops",
    peak=_peak,
    error_limit=REL_ERROR_LIMIT.get,
    checks=(below_peak,),
    advice=(precision,),
    plot=Plot(
        roofline=Roofline(
            points=lambda case: True,
            flop_roof="float32",
            measured_flop_roof=("float32", "float64"),
        )
    ),
)
