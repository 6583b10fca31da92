"""Precision: FP32 matrix multiplies on CUDA cores while the card has Tensor Cores (E4:
docs/experiments.md#e4), with the advice that fits where the kernel comes from
(:func:`~gpuprobe.tools.diagnose.kernels.provenance_of_name`): autocast and TF32 reach the
library and ATen GEMMs PyTorch calls, not a kernel of one's own, and a Triton GEMM's dtype is
not in its name."""

from __future__ import annotations

import re

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernels import (
    PROVENANCE_COMPILER,
    PROVENANCE_OWN,
    provenance_of_activities,
)
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL
from gpuprobe.tools.diagnose.rules._common import GROUP, no_gpu, pct, steady_total

__all__ = [
    "GEMM_DOMINANT_FRACTION",
    "TENSOR_CORE_HALF_US",
    "TENSOR_CORE_MIN_COMPUTE_MAJOR",
    "TENSOR_CORE_MIN_SHARE",
    "TENSOR_CORE_SPEEDUP",
    "TENSOR_CORE_SPEEDUP_AMD",
    "peak_ratio",
    "slow_gemms",
    "tensor_cores",
]

TENSOR_CORE_MIN_COMPUTE_MAJOR = 7  # compute capability; Volta (7.0) introduced Tensor Cores
GEMM_DOMINANT_FRACTION = 0.3  # of kernel time in GEMM/conv kernels for matmuls to "dominate"; ours
TENSOR_CORE_MIN_SHARE = 0.1  # of GEMM/conv time on Tensor Cores below which we say "none"; ours
# What moving the FP32 GEMM time onto the Tensor Cores saves, as a realised speed-up of that
# kernel time, by compute capability major: conservative (ours), well under the peaks. Peaks
# from the datasheets in platform/hardware/data/products.csv: V100 FP16 Tensor 125 vs FP32
# 15.7 TFLOPS (8x; 7.x has FP16 Tensor Cores only, reached through autocast), A100 TF32 156 vs
# FP32 19.5 (8x), H100/H200 SXM TF32 494.5 vs FP32 67 (7.4x). Measured on one large matmul,
# PyTorch's CUDA semantics note ("TensorFloat-32 (TF32) on Ampere (and later) devices"): a
# 10240x10240 FP32 matmul takes 0.11 s with TF32 off and 0.016 s with it on, on a GA100 (6.9x).
# A model's GEMMs are smaller and their epilogues and memory traffic do not speed up: 2x.
TENSOR_CORE_SPEEDUP: dict[int, float] = {7: 2.0, 8: 2.0, 9: 2.0, 10: 2.0, 12: 2.0}
# (used for a card the datasheet table lacks; with one, slow_gemms scales its peak ratio)
TENSOR_CORE_HALF_US = 500.0  # µs; the FP32 GEMM/conv kernel length at which the Tensor Cores
# give half of the card's peak speed-up over FP32: a 100 µs kernel gets about 2x on an A100
# (the old flat figure), a 2.7 ms one 6.4x of the H200's 7.4x peak; ours
TENSOR_CORE_SPEEDUP_AMD = 2.0  # MI250X matrix FP32 95.7 vs bf16 383 TFLOPS (4x), MI300X FP32
# 163.4 vs bf16 1307.4 (8x) (AMD Instinct datasheets); realised: ours, as above


def _fix_for(major: int, minor: int, amd: bool) -> str:
    """The mixed-precision change that fits the card."""
    if amd:
        return (
            "with torch.autocast('cuda', dtype=torch.bfloat16): for the forward pass "
            "(ROCm's matrix cores run bf16 at many times the FP32 rate on MI100 and later)"
        )
    if major >= 8:
        return (
            "torch.set_float32_matmul_precision('high')  # TF32 on Tensor Cores; or "
            "with torch.autocast('cuda', dtype=torch.bfloat16): for the forward pass"
        )
    # Volta (7.0) and Turing (7.5): Tensor Cores run FP16 only; no TF32, no fast bf16
    return (
        "with torch.autocast('cuda', dtype=torch.float16): for the forward pass, and "
        "scaler = torch.amp.GradScaler('cuda'); scaler.scale(loss).backward(); "
        f"scaler.step(opt); scaler.update()  # compute {major}.{minor} has FP16 Tensor Cores "
        "only (no TF32 or bf16)"
    )


def _own_fix(amd: bool) -> str:
    """What puts a matmul kernel of one's own on the Tensor (matrix) Cores."""
    if amd:
        return (
            "call a library GEMM instead (torch.matmul / torch.bmm, hipBLASLt), then "
            "torch.autocast('cuda', dtype=torch.bfloat16) reaches it; or use the matrix cores "
            "in the kernel (rocWMMA, the __builtin_amdgcn_mfma_* intrinsics); or write it in "
            "Triton with tl.dot on bf16/fp16 inputs"
        )
    return (
        "call a library GEMM instead (torch.matmul / torch.bmm, cuBLAS), then "
        "torch.set_float32_matmul_precision('high') or autocast reaches it; or use the "
        "Tensor Cores in the kernel (nvcuda::wmma, or mma.sync PTX / CUTLASS's MMA atoms); or "
        "write it in Triton with tl.dot (fp16/bf16 inputs, or TF32 for fp32)"
    )


_COMPILER_FIX = (
    "give the compiled GEMMs fp16/bf16 inputs (torch.autocast('cuda', dtype=torch.bfloat16) "
    "around the compiled model), or for fp32 inputs allow TF32 before compiling: "
    "torch.set_float32_matmul_precision('high') (Inductor's Triton templates pass "
    "allow_tf32 to tl.dot only when it is set)"
)


def _top_kernels(ctx: TraceContext, mask: np.ndarray, n: int = 3) -> list[tuple[str, float]]:
    """The ``n`` kernel names with the most time under ``mask`` and their summed time (µs),
    most first."""
    names = ctx.gpu_name[mask]
    if names.size == 0:
        return []
    uniq, inv = np.unique(names, return_inverse=True)
    totals = np.bincount(inv, weights=ctx.gpu_dur[mask])
    order = np.argsort(-totals, kind="stable")[:n].tolist()
    return [(ctx.names[int(uniq[j])], float(totals[j])) for j in order]


def _top_names(ctx: TraceContext, mask: np.ndarray, n: int = 3) -> list[str]:
    """The ``n`` kernel names with the most time under ``mask``, most first."""
    return [name for name, _ in _top_kernels(ctx, mask, n)]


_ARGUMENTS = re.compile(r"^void |\((?!anonymous namespace\)).*$")


def _shares(ctx: TraceContext, mask: np.ndarray, total: float, what: str = "") -> tuple[str, ...]:
    """The top kernels under ``mask`` with their share of kernel time, for ``details``: each
    name without its return type and argument list."""
    return tuple(
        f"{_ARGUMENTS.sub('', name)}: {pct(us / total if total > 0 else 0.0)} % of kernel time{what}"
        for name, us in _top_kernels(ctx, mask)
    )


def _busiest_device_us(ctx: TraceContext, mask: np.ndarray) -> float:
    """Summed duration under ``mask`` on the device where it is largest (µs)."""
    if not mask.any():
        return 0.0
    devs, inv = np.unique(ctx.gpu_dev[mask], return_inverse=True)
    return float(np.bincount(inv, weights=ctx.gpu_dur[mask]).max()) if devs.size else 0.0


def _gemm_masks(ctx: TraceContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Masks over the GPU columns: (the analysed steps' kernels, their GEMM/conv kernels on the
    Tensor Cores, those a compiler generated that do not say their dtype, the rest of the
    GEMM/conv kernels, judged by name)."""
    kern = (ctx.gpu_kind == GPU_KIND_KERNEL) & (ctx.gpu_step >= 0)
    prov = provenance_of_activities(ctx)
    # Inductor's fused pointwise/reduction kernels name the matmuls fused around, not run
    fused = P.INDUCTOR_FUSED_KERNEL.mask(ctx.gpu_name, ctx.names)
    gemm = P.GEMM_KERNEL.mask(ctx.gpu_name, ctx.names) | P.TRITON_GEMM_KERNEL.mask(
        ctx.gpu_name, ctx.names
    )
    gemm &= kern & ~fused
    tc = gemm & P.TENSOR_CORE_KERNEL.mask(ctx.gpu_name, ctx.names)
    tc &= ~P.FP32_GEMM_KERNEL.mask(ctx.gpu_name, ctx.names) | P.TF32_KERNEL.mask(
        ctx.gpu_name, ctx.names
    )
    # a compiler's GEMM (a Triton template) does not say its dtype: judged apart
    compiled = gemm & ~tc & (prov == PROVENANCE_COMPILER)
    return kern, tc, compiled, gemm & ~compiled


def peak_ratio(ctx: TraceContext) -> float | None:
    """The card's Tensor-Core rate over its FP32 rate, from its datasheet
    (platform/hardware/data/products.csv, by the name in deviceProperties): TF32 where it is
    faster than FP32 (A100, H100/H200, L4), else FP16/BF16 (V100 and T4 through autocast, and
    the GeForce cards, whose TF32 runs at the FP32 rate); None for a card the table lacks."""
    from gpuprobe.platform.hardware.specs import spec_for

    names = [str(p.get("name", "")) for p in ctx.raw.device_properties]
    spec = next((x for x in map(spec_for, names) if x is not None), None)
    if spec is None or not spec.fp32:
        return None
    if spec.tf32 and spec.tf32 >= 1.5 * spec.fp32:
        return float(spec.tf32) / spec.fp32
    half = max(spec.fp16 or 0.0, spec.bf16 or 0.0)
    return float(half) / spec.fp32 if half > spec.fp32 else None


def slow_gemms(ctx: TraceContext) -> tuple[np.ndarray, np.ndarray]:
    """(The GEMM/conv kernels of the analysed steps that are judged and miss the Tensor Cores,
    as a mask over the GPU columns; the speed-up each gets on the Tensor Cores): what the
    no-tensor-cores fix changes in the replay. A kernel of ``d`` µs gets 1 + (R - 1) d / (d +
    :data:`TENSOR_CORE_HALF_US`) of the card's peak ratio R (:func:`peak_ratio`): a long GEMM
    close to the peak (the H200's 2.7 ms FP32 GEMM ran 7.9x faster as TF32 against a 7.4x
    peak), a short one, bound by memory and its epilogue, little; without a datasheet,
    :data:`TENSOR_CORE_SPEEDUP`."""
    _, tc, _, judged = _gemm_masks(ctx)
    slow = judged & ~tc
    props = ctx.raw.device_properties
    majors = [p["computeMajor"] for p in props if isinstance(p.get("computeMajor"), int)]
    amd = any(P.AMD_DEVICE.matches(str(p.get("name", ""))) for p in props) or bool(
        P.HIP_CALL.mask(ctx.rt_name, ctx.names).any()
    )
    d = ctx.gpu_dur[slow]
    ratio = None if amd else peak_ratio(ctx)
    if ratio is None:
        flat = (
            TENSOR_CORE_SPEEDUP_AMD if amd else TENSOR_CORE_SPEEDUP.get(max(majors, default=0), 2.0)
        )
        return slow, np.full(d.shape, flat)
    return slow, 1.0 + (ratio - 1.0) * d / (d + TENSOR_CORE_HALF_US)


@rule("no-tensor-cores")
def tensor_cores(ctx: TraceContext) -> list[Finding]:
    """GEMM/conv kernels dominate, none use Tensor Cores, and the card has them; the advice fits
    the kernels' provenance (library or ATen, the user's own, a compiler's)."""
    if not ctx.has_gpu:
        return [no_gpu(ctx, "no-tensor-cores", "Tensor Core use")]
    props = ctx.raw.device_properties
    caps = [
        (int(p["computeMajor"]), int(p.get("computeMinor") or 0))
        for p in props
        if isinstance(p.get("computeMajor"), int) and isinstance(p.get("computeMinor", 0), int)
    ]
    amd = any(P.AMD_DEVICE.matches(str(p.get("name", ""))) for p in props) or bool(
        P.HIP_CALL.mask(ctx.rt_name, ctx.names).any()
    )
    if not caps and not amd:
        return [
            Finding(
                id="no-tensor-cores",
                status=Status.SKIPPED,
                title="Tensor Core use: skipped: the trace has no deviceProperties "
                "(compute capability unknown)",
                group=GROUP,
            )
        ]
    major, minor = max(caps) if caps else (0, 0)
    kern, tc, compiled, judged = _gemm_masks(ctx)
    total = float(ctx.gpu_dur[kern].sum())
    prov = provenance_of_activities(ctx)
    gemm_t = float(ctx.gpu_dur[judged].sum())
    tc_t = float(ctx.gpu_dur[tc].sum())
    compiled_t = float(ctx.gpu_dur[compiled].sum())
    gemm_share = gemm_t / total if total > 0 else 0.0
    tc_share = tc_t / gemm_t if gemm_t > 0 else 0.0
    compiled_share = compiled_t / total if total > 0 else 0.0
    slow = judged & ~tc
    own = slow & (prov == PROVENANCE_OWN)
    own_t = float(ctx.gpu_dur[own].sum())
    slow_t = float(ctx.gpu_dur[slow].sum())
    dtypes = ctx.raw.matmul_dtypes
    fp32_ops = dtypes.get("float", 0)
    what = "AMD GPU" if amd else f"compute {major}.{minor}"
    evidence: tuple[Evidence, ...] = (
        Evidence("device", what),
        Evidence("gemm_share_of_kernel_time", pct(gemm_share), "%"),
        Evidence("tensor_core_share_of_gemm_time", pct(tc_share), "%"),
        Evidence("own_kernel_gemm_share", pct(own_t / total if total > 0 else 0.0), "%"),
        Evidence("compiler_gemm_share", pct(compiled_share), "%"),
        # the matmul ops' input dtypes are in the trace only with record_shapes=True: without
        # them the kernels' names are the evidence, and a count of 0 would read as "none"
        Evidence("fp32_matmul_ops", fp32_ops)
        if sum(dtypes.values())
        else Evidence("matmul_input_dtypes", "not recorded (record_shapes=False)"),
        Evidence("threshold_gemm_share", pct(GEMM_DOMINANT_FRACTION), "%"),
    )
    if not amd and major < TENSOR_CORE_MIN_COMPUTE_MAJOR:
        return [
            Finding(
                id="no-tensor-cores",
                status=Status.SKIPPED,
                title=f"Tensor Core use: skipped: compute capability {major}.{minor} has none",
                evidence=evidence,
                group=GROUP,
            )
        ]
    cores = "matrix cores" if amd else "Tensor Cores"
    if gemm_share >= GEMM_DOMINANT_FRACTION and tc_share < TENSOR_CORE_MIN_SHARE:
        speedup = TENSOR_CORE_SPEEDUP_AMD if amd else TENSOR_CORE_SPEEDUP.get(major, 2.0)
        analysed = steady_total(ctx)
        saved = _busiest_device_us(ctx, slow) * (1.0 - 1.0 / speedup)
        gain = min(saved / analysed, 1.0) if analysed > 0 else None
        evidence += (Evidence("assumed_tensor_core_speedup", speedup, "x"),)
        if own_t > slow_t / 2:
            return [_own_finding(ctx, own, total, what, cores, amd, evidence, gain)]
        return [
            Finding(
                id="no-tensor-cores",
                status=Status.WARN,
                title=f"FP32 matmuls take {pct(gemm_share)} % of kernel time and "
                + (f"almost none ({pct(tc_share)} %)" if (pct(tc_share) or 0) > 0 else "none")
                + f" use the {cores} this card has ({what})",
                evidence=evidence,
                fix=_fix_for(major, minor, amd),
                group=GROUP,
                details=_shares(ctx, slow, total),
                gain=gain,
            )
        ]
    if compiled_share >= GEMM_DOMINANT_FRACTION:
        top = _top_names(ctx, compiled, 1)
        return [
            Finding(
                id="no-tensor-cores",
                status=Status.INFO,
                title=f"compiled (Triton) GEMMs take {pct(compiled_share)} % of kernel time, "
                f"led by {top[0] if top else 'n/a'}: whether tl.dot ran on the {cores} depends "
                "on their input dtype, which the trace does not show",
                evidence=evidence,
                fix=_COMPILER_FIX,
                group=GROUP,
                details=_shares(ctx, compiled, total),
            )
        ]
    return [
        Finding(
            id="no-tensor-cores",
            status=Status.OK,
            title=f"Tensor Cores: {pct(tc_share)} % of GEMM/conv time "
            f"(GEMM/conv {pct(gemm_share)} % of kernel time)",
            evidence=evidence,
            group=GROUP,
        )
    ]


def _own_finding(
    ctx: TraceContext,
    own: np.ndarray,
    total: float,
    what: str,
    cores: str,
    amd: bool,
    evidence: tuple[Evidence, ...],
    gain: float | None,
) -> Finding:
    """The warning for matmul time in kernels of the user's own (not a library's)."""
    top = _top_kernels(ctx, own)
    lead, lead_us = top[0] if top else ("n/a", 0.0)
    share = lead_us / total if total > 0 else 0.0
    return Finding(
        id="no-tensor-cores",
        status=Status.WARN,
        title=f"your own kernel {lead} (a matrix multiply, not a library GEMM) takes {pct(share)} % of "
        f"GPU time: autocast and TF32 cannot reach it, and nothing in the trace shows it on "
        f"the {cores} ({what})",
        evidence=evidence,
        fix=_own_fix(amd),
        group=GROUP,
        details=_shares(ctx, own, total, ", not a library kernel"),
        gain=gain,
    )
