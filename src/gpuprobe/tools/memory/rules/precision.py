"""The rules that judge a precision sweep (:class:`~gpuprobe.tools.memory.precision.PrecisionReport`):
the dtype to use, and each dtype that loses accuracy, gains nothing, ran out of memory or could
not run. Each rule takes the report and, for a CPU sweep, this CPU's flags (``cpu_flags``, read
from /proc/cpuinfo when None)."""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, rule
from gpuprobe.core.units import seconds, speed_change
from gpuprobe.platform.hardware.host import usable_cores
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.tools.memory.model import (
    OOM_REASON,
    REL_ERROR_OK,
    SPEEDUP_MIN,
    PrecisionReport,
    PrecisionResult,
)

__all__ = [
    "LOWP_CPU_FLAGS",
    "RULES_PRECISION",
    "precision_host_busy",
    "precision_recommend",
    "precision_results",
]

_FIX = {
    "tf32": "torch.backends.cuda.matmul.allow_tf32 = True  (or torch.set_float32_matmul_precision('high'))",
    "bf16": "with torch.autocast('{dev}', dtype=torch.bfloat16): out = model(x)",
    "fp16": "with torch.autocast('{dev}', dtype=torch.float16): out = model(x)  (train with torch.amp.GradScaler)",
    "int8": "model = torch.ao.quantization.quantize_dynamic(model, {{torch.nn.Linear}}, dtype=torch.qint8)",
    "fp32": "",
}

# CPU flags (/proc/cpuinfo spelling) that compute each precision in hardware: Intel AMX tiles and
# AVX-512 extensions (Linux arch/x86/include/asm/cpufeatures.h).
LOWP_CPU_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("amx_bf16", "avx512_bf16"),
    "fp16": ("amx_fp16", "avx512_fp16"),
    "int8": ("amx_int8", "avx512_vnni", "avx_vnni"),
}


def _cpu_flags() -> frozenset[str]:
    from gpuprobe.platform.hardware.host import _cpuinfo

    return frozenset(_cpuinfo()[1])


def _cpu_no_gain(dtype: str, flags: frozenset[str]) -> str:
    """Why a lower precision was not faster on this CPU, from what its flags say it has."""
    wanted = LOWP_CPU_FLAGS.get(dtype, ())
    has = [f for f in wanted if f in flags]
    if has:
        return (
            f"this CPU computes {dtype} in hardware ({', '.join(has)}), yet it was not faster: "
            "the model is bound by per-call overhead, not arithmetic, or its layers' kernels "
            "do not use those instructions"
        )
    if not wanted:
        return "a small model is bound by launch overhead, not arithmetic"
    return (
        f"this CPU has none of {', '.join(wanted)}: {dtype} is converted back to fp32 for the "
        "arithmetic, which costs time; a small model is bound by launch overhead too"
    )


def _slower(x: PrecisionResult) -> bool:
    """Slower than fp32 by more than run-to-run noise (the mirror of SPEEDUP_MIN)."""
    return (x.speedup or 0) <= 1 / SPEEDUP_MIN


def _rate(flops: int | None, seconds: float | None, dtype: str) -> str:
    """The pass's work over its time: TOP/s for int8 (integer operations are not FLOPs, as the
    spec sheets print them), TFLOP/s for the rest."""
    unit = "TOP/s" if dtype == "int8" else "TFLOP/s"
    return f"{flops / seconds / 1e12:.1f} {unit}" if flops and seconds else "n/a"


def _gpu_no_gain(r: PrecisionReport, x: PrecisionResult) -> str:
    """Why a lower precision was not faster on a GPU: it has tensor cores for it (or the sweep
    would have skipped it), so the math is not what costs; the work per pass is too small."""
    base = r.result("fp32")
    work = (
        f"one forward pass is {r.flops / 1e9:.3g} GFLOP: fp32 ran it at "
        f"{_rate(r.flops, base.median_s if base else None, 'fp32')}, {x.dtype} at "
        f"{_rate(r.flops, x.median_s, x.dtype)}; "
        if r.flops
        else ""
    )
    if _slower(x):
        return (
            work + f"too little work per kernel for {x.dtype}'s faster math to show: the cast "
            "kernels autocast adds (and fused paths some modules skip under it) cost more "
            "than the math saves"
        )
    return work + f"too little work per kernel for {x.dtype}'s faster math to show"


def _no_gain(
    r: PrecisionReport, x: PrecisionResult, dev: str, cpu_flags: frozenset[str] | None
) -> Finding:
    """A lower precision that is not faster than fp32, or slower, and why."""
    base = r.result("fp32")
    speedup = x.speedup or 0
    if _slower(x):
        title = (
            f"{x.dtype} is {speed_change(speedup)} than fp32 here "
            f"({seconds(x.median_s)} a forward pass, fp32 {seconds(base.median_s if base else None)})"
        )
    else:
        title = f"{x.dtype} is not faster here ({speedup:.2f}x fp32)"
    if dev == "cpu":
        why = _cpu_no_gain(x.dtype, _cpu_flags() if cpu_flags is None else cpu_flags)
    else:
        why = _gpu_no_gain(r, x)
    return Finding(
        id="precision-no-gain",
        status=Status.INFO,
        title=title,
        evidence=(
            Evidence("speedup", round(speedup, 3), "x"),
            Evidence("median", x.median_s, "s"),
            Evidence("fp32_median", base.median_s if base else None, "s"),
            Evidence("flops", r.flops, "FLOP"),
            Evidence("batch", r.batch),
        ),
        fix=(
            f"measure at the batch you will run (gpuprobe precision --batch N, or larger "
            f"inputs than {r.batch}): with more work per kernel {x.dtype} can pay; else keep fp32"
            if dev != "cpu"
            else ""
        ),
        group="precision",
        subject=x.dtype,
        details=(why,),
    )


@rule("precision-recommend")
def precision_recommend(
    r: PrecisionReport, cpu_flags: frozenset[str] | None = None
) -> list[Finding]:
    """The dtype to use: the recommended one with its line of code, or stay in fp32."""
    out: list[Finding] = []
    dev = r.device.partition(":")[0]
    rec = r.result(r.recommended) if r.recommended else None
    if rec is not None:
        title = (
            f"{rec.dtype}: {rec.speedup:.2f}x fp32's throughput with relative error "
            f"{rec.rel_error:.2g}"
            if rec.dtype != "fp32" and rec.speedup and rec.rel_error is not None
            else "stay in fp32: no lower precision here is both faster and accurate enough"
        )
        out.append(
            Finding(
                id="precision-recommend",
                status=Status.OK if rec.dtype != "fp32" else Status.INFO,
                title=title,
                evidence=(
                    Evidence("dtype", rec.dtype),
                    Evidence("speedup", round(rec.speedup or 1, 3), "x"),
                    Evidence("rel_error", rec.rel_error),
                    Evidence("rel_error_ok", REL_ERROR_OK),
                    Evidence("speedup_min", SPEEDUP_MIN, "x"),
                ),
                fix=_FIX[rec.dtype].format(dev=dev),
                group="precision",
            )
        )
    return out


@rule(
    "precision-accuracy-loss",
    "precision-no-gain",
    "precision-out-of-memory",
    "precision-skipped",
    "precision-error",
)
def precision_results(r: PrecisionReport, cpu_flags: frozenset[str] | None = None) -> list[Finding]:
    """Each dtype that moves the output too far, is not faster, ran out of memory, or did not
    run, in the sweep's order. ``cpu_flags``: this CPU's (read from /proc/cpuinfo when None)."""
    out: list[Finding] = []
    dev = r.device.partition(":")[0]
    for x in r.results:
        if x.outcome == "ok" and x.rel_error is not None and x.rel_error > REL_ERROR_OK:
            out.append(
                Finding(
                    id="precision-accuracy-loss",
                    status=Status.WARN,
                    title=f"{x.dtype} moves the output by {x.rel_error:.2g} (relative), "
                    f"more than {REL_ERROR_OK:g}",
                    evidence=(
                        Evidence("rel_error", x.rel_error),
                        Evidence("max_abs", x.max_abs),
                        Evidence("metric", x.metric),
                    ),
                    fix="check it on your task metric (precision_sweep(..., metric=fn)) before "
                    "using it; keep sensitive layers (softmax, norms, the head) in fp32",
                    group="precision",
                    subject=x.dtype,
                )
            )
        elif x.outcome == "ok" and x.dtype != "fp32" and (x.speedup or 0) < SPEEDUP_MIN:
            out.append(_no_gain(r, x, dev, cpu_flags))
        elif x.outcome == "error" and (x.reason or "").startswith(OOM_REASON):
            out.append(
                Finding(
                    id="precision-out-of-memory",
                    status=Status.FAIL,
                    title=f"{x.dtype} ran out of memory at batch {r.batch}: "
                    f"{(x.reason or '')[len(OOM_REASON) + 2 :]}",
                    evidence=(Evidence("batch", r.batch), Evidence("dtype", x.dtype)),
                    fix="use a smaller batch (gpuprobe precision --batch N, or fewer rows in the "
                    "inputs); gpuprobe fit finds the largest batch that fits",
                    group="precision",
                    subject=x.dtype,
                )
            )
        elif x.outcome in ("skipped", "error"):
            out.append(
                Finding(
                    id="precision-skipped" if x.outcome == "skipped" else "precision-error",
                    status=Status.SKIPPED if x.outcome == "skipped" else Status.WARN,
                    title=f"{x.dtype}: {x.reason}",
                    group="precision",
                    subject=x.dtype,
                )
            )
    return out


# In the order the report lists them: the recommendation, then each dtype's.
def _others_measured(r: PrecisionReport, cpu_flags: frozenset[str] | None = None) -> bool:
    return r.others_cores is not None


@rule("precision-host-busy", applies=_others_measured)
def precision_host_busy(
    r: PrecisionReport, cpu_flags: frozenset[str] | None = None
) -> list[Finding]:
    """Other processes kept this process's usable cores busy during the sweep (measured by
    :func:`~gpuprobe.tools.memory.precision.precision_sweep`)."""
    busy = host_busy_finding(
        "precision-host-busy",
        "the precision sweep",
        r.others_cores,
        usable_cores(),
        effect="its latencies are slowed and noisy, so one precision may look faster or slower "
        "than another when it is not",
        fix="re-run when the machine is idle (see 'gpuprobe top') before choosing a precision",
        group="precision",
        subject="host",
    )
    return [] if busy is None else [busy]


RULES_PRECISION: tuple[Rule, ...] = (precision_recommend, precision_results, precision_host_busy)
