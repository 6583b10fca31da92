"""The rules that judge a precision sweep (:class:`~gpuprobe.tools.memory.precision.PrecisionReport`):
the dtype to use, and each dtype that loses accuracy, gains nothing, ran out of memory or could
not run. Each rule takes the report and, for a CPU sweep, this CPU's flags (``cpu_flags``, read
from /proc/cpuinfo when None)."""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule, rule
from gpuprobe.platform.hardware.host import usable_cores
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.tools.memory.model import OOM_REASON, REL_ERROR_OK, SPEEDUP_MIN, PrecisionReport

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
            out.append(
                Finding(
                    id="precision-no-gain",
                    status=Status.INFO,
                    title=f"{x.dtype} is not faster here ({x.speedup or 0:.2f}x fp32)",
                    evidence=(Evidence("speedup", round(x.speedup or 0, 3), "x"),),
                    fix="",
                    group="precision",
                    subject=x.dtype,
                    details=(
                        _cpu_no_gain(x.dtype, _cpu_flags() if cpu_flags is None else cpu_flags),
                    )
                    if dev == "cpu"
                    else (),
                )
            )
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
