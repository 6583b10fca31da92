"""Precision: FP32 matrix multiplies on CUDA cores while the card has Tensor Cores (E4:
docs/experiments.md#e4)."""

from __future__ import annotations

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL
from gpuprobe.tools.diagnose.rules._common import GROUP, no_gpu, pct

__all__ = [
    "GEMM_DOMINANT_FRACTION",
    "TENSOR_CORE_MIN_COMPUTE_MAJOR",
    "TENSOR_CORE_MIN_SHARE",
    "tensor_cores",
]

TENSOR_CORE_MIN_COMPUTE_MAJOR = 7  # compute capability; Volta (7.0) introduced Tensor Cores
GEMM_DOMINANT_FRACTION = 0.3  # of kernel time in GEMM/conv kernels for matmuls to "dominate"; ours
TENSOR_CORE_MIN_SHARE = 0.1  # of GEMM/conv time on Tensor Cores below which we say "none"; ours


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


@rule("no-tensor-cores")
def tensor_cores(ctx: TraceContext) -> list[Finding]:
    """GEMM/conv kernels dominate, none use Tensor Cores, and the card has them."""
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
    kern = (ctx.gpu_kind == GPU_KIND_KERNEL) & (ctx.gpu_step >= 0)
    total = float(ctx.gpu_dur[kern].sum())
    gemm = kern & P.GEMM_KERNEL.mask(ctx.gpu_name, ctx.names)
    tc = gemm & P.TENSOR_CORE_KERNEL.mask(ctx.gpu_name, ctx.names)
    tc &= ~P.FP32_GEMM_KERNEL.mask(ctx.gpu_name, ctx.names) | P.TF32_KERNEL.mask(
        ctx.gpu_name, ctx.names
    )
    gemm_t = float(ctx.gpu_dur[gemm].sum())
    tc_t = float(ctx.gpu_dur[tc].sum())
    gemm_share = gemm_t / total if total > 0 else 0.0
    tc_share = tc_t / gemm_t if gemm_t > 0 else 0.0
    dtypes = ctx.raw.matmul_dtypes
    fp32_ops = dtypes.get("float", 0)
    top = sorted(
        {ctx.names[i] for i in np.unique(ctx.gpu_name[gemm & ~tc])},
        key=lambda name: (len(name), name),
    )[:3]
    what = "AMD GPU" if amd else f"compute {major}.{minor}"
    evidence = (
        Evidence("device", what),
        Evidence("gemm_share_of_kernel_time", pct(gemm_share), "%"),
        Evidence("tensor_core_share_of_gemm_time", pct(tc_share), "%"),
        Evidence("fp32_matmul_ops", fp32_ops),
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
    if gemm_share >= GEMM_DOMINANT_FRACTION and tc_share < TENSOR_CORE_MIN_SHARE:
        cores = "matrix cores" if amd else "Tensor Cores"
        return [
            Finding(
                id="no-tensor-cores",
                status=Status.WARN,
                title=f"FP32 matmuls take {pct(gemm_share)} % of GPU time and none use the "
                f"{cores} this card has ({what})",
                evidence=evidence,
                fix=_fix_for(major, minor, amd),
                group=GROUP,
                details=tuple(top),
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
