"""What a trace's GPU time is made of, as shares, for ``--compare``: the Tensor-Core share of
matrix-multiply time, the precision mix of that time, the copy kinds and the kernel families.

Each share is a part of a whole, both as GPU time per step (µs summed over streams and devices,
over the selected steps, divided by their number, like :mod:`.kernel_diff`). Which kernels are
GEMM/conv comes from the kernel families of :mod:`.kernels`; which of them run on the Tensor
Cores from the patterns the ``no-tensor-cores`` rule uses (:mod:`.patterns`); the precision of a
GEMM/conv kernel from its name (:data:`PRECISIONS`), and the kind of a copy from Kineto's
``Memcpy HtoD (Pageable -> Device)`` names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.kernels import FAMILIES, family_of_activities
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL, GPU_KIND_MEMCPY, GPU_KIND_MEMSET

if TYPE_CHECKING:
    from gpuprobe.tools.diagnose.analysis import TraceContext

__all__ = ["COPY_KINDS", "PRECISIONS", "Share", "precision_of_name", "time_mix"]

# The precision of a matrix-multiply or convolution kernel, read from its name; the first that
# matches wins. Names from the corpus (../shared/traces) and the libraries' naming: cuBLAS
# volta_/ampere_sgemm (FP32), h884/h1688/h16816 and hgemm (FP16), cgemm/gcgemm (complex FP32, FFT
# convolutions), dgemm/zgemm (FP64), Volta's s884 tiles (FP16 inputs: Volta's Tensor Cores take
# nothing else); CUTLASS cutlass_80_tensorop_s1688gemm (FP32 data on TF32
# Tensor Cores; a _bf16/_f16 suffix names 16-bit inputs), cutlass_75_tensorop_bf16_s1688gemm_bf16;
# cuBLASLt/cuDNN xmma tiles by their element types (sm80_xmma_fprop_..._tf32f32_tf32f32_f32,
# sm90_xmma_gemm_bf16bf16_bf16f32_f32, sm90_xmma_gemm_f32f32_f32f32 with TF32 off); cuDNN's own
# kernels by their first template type (cudnn::detail::dgrad_engine<float, ...>, c10::Half) and
# its scudnn tiles (single precision); FP8 e4m3/e5m2; INT8 imma/i8816; Tensile's _HHS_/_BBS_.
PRECISIONS: tuple[tuple[str, P.NamePattern], ...] = (
    ("FP8", P.NamePattern(re.compile(r"(?i)e4m3|e5m2|fp8|f8f6f4|_f8_"), "FP8")),
    (
        "INT8",
        P.NamePattern(
            re.compile(r"(?i)imma|i8816|i16832|int8|igemm|_i8i8|s8s8|u8s8|_I8II_"), "INT8"
        ),
    ),
    ("BF16", P.NamePattern(re.compile(r"(?i)bf16|bfloat16|_BBS_|_BSS_"), "BF16")),
    (
        "FP16",
        P.NamePattern(
            re.compile(
                r"(?i)f16|fp16|half|[hs]884|h1688|h16816|hmma|hgemm|hcudnn|_HHS_|_HSS_|<__half"
            ),
            "FP16",
        ),
    ),
    (
        "TF32",
        P.NamePattern(re.compile(r"(?i)tf32|tensorop_s\d+(gemm|fprop|dgrad|wgrad)"), "TF32"),
    ),
    ("FP64", P.NamePattern(re.compile(r"(?i)dgemm|zgemm|dmma|<double|\bdouble\b"), "FP64")),
    (
        "FP32",
        P.NamePattern(
            re.compile(r"(?i)sgemm|scudnn|cgemm|f32f32_f32f32|<float\b|\bfloat\b"), "FP32"
        ),
    ),
)
# which way of a precision's share is worse: FP32 and FP64 run on the CUDA cores (no Tensor
# Cores); the others are the Tensor-Core types
_PRECISION_BETTER = {"FP32": "lower", "FP64": "lower"}

# Kineto's copy names: "Memcpy {kind} ({src} -> {dst})"; PtoP is device to device across GPUs.
COPY_KINDS: tuple[str, ...] = ("HtoD", "DtoH", "DtoD", "PtoP", "HtoH")
_COPY_KIND = re.compile(r"\b(" + "|".join(COPY_KINDS) + r")\b")


def precision_of_name(name: str) -> str:
    """The precision of a GEMM/conv kernel from its name (``"unknown"`` when the name says
    nothing)."""
    for label, pattern in PRECISIONS:
        if pattern.matches(name):
            return label
    return "unknown"


@dataclass(frozen=True)
class Share:
    """One part of one whole, as GPU time per step (µs); ``better`` says which way of its share
    is an improvement ("lower", "higher"), or "" where the part's time is what counts (a copy
    kind or a kernel family as a share of GPU time: less of the step in it is faster, whatever
    the rest did)."""

    key: str
    group: str
    name: str
    of: str
    part_us: float
    whole_us: float
    better: str = ""

    @property
    def share(self) -> float | None:
        """part / whole (None without a whole)."""
        return self.part_us / self.whole_us if self.whole_us > 0 else None


def _by_name(
    ctx: TraceContext, mask: np.ndarray, classify: Callable[[str], str]
) -> dict[str, float]:
    """Summed durations of the activities in ``mask``, grouped by ``classify(name)``."""
    out: dict[str, float] = {}
    ids, dur = ctx.gpu_name[mask], ctx.gpu_dur[mask]
    if ids.size == 0:
        return out
    uniq, inv = np.unique(ids, return_inverse=True)
    totals = np.bincount(inv, weights=dur)
    for j, nid in enumerate(uniq.tolist()):
        label = classify(ctx.names[nid])
        out[label] = out.get(label, 0.0) + float(totals[j])
    return out


def time_mix(ctx: TraceContext) -> list[Share]:
    """The shares of ``ctx``'s selected steps (see the module docstring); per step, µs."""
    n = max(len(ctx.steps), 1)
    sel = ctx.gpu_step >= 0
    kern = sel & (ctx.gpu_kind == GPU_KIND_KERNEL)
    dur = ctx.gpu_dur
    gpu_us = float(dur[sel].sum()) / n
    out: list[Share] = []

    fam = family_of_activities(ctx)
    matmul = kern & np.isin(fam, [FAMILIES.index("GEMM"), FAMILIES.index("convolution")])
    mm_us = float(dur[matmul].sum()) / n
    # the no-tensor-cores rule's test: a Tensor-Core name, and not an FP32 GEMM unless TF32
    tc = P.TENSOR_CORE_KERNEL.mask(ctx.gpu_name, ctx.names) & (
        ~P.FP32_GEMM_KERNEL.mask(ctx.gpu_name, ctx.names)
        | P.TF32_KERNEL.mask(ctx.gpu_name, ctx.names)
    )
    tc_us = float(dur[matmul & tc].sum()) / n
    out.append(
        Share("tensor-cores", "Tensor Cores", "Tensor Cores", "GEMM/conv", tc_us, mm_us, "higher")
    )
    precision = _by_name(ctx, matmul, precision_of_name)
    for label in (*(p for p, _ in PRECISIONS), "unknown"):
        if label in precision:
            out.append(
                Share(
                    f"precision:{label}",
                    "precision",
                    label,
                    "GEMM/conv",
                    precision[label] / n,
                    mm_us,
                    _PRECISION_BETTER.get(label, "higher" if label != "unknown" else ""),
                )
            )

    copies = sel & (ctx.gpu_kind == GPU_KIND_MEMCPY)

    def kind(name: str) -> str:
        m = _COPY_KIND.search(name)
        return m.group(1) if m else "other"

    by_kind = _by_name(ctx, copies, kind)
    for label in (*COPY_KINDS, "other"):
        if label in by_kind:
            out.append(
                Share(
                    f"copy:{label}",
                    "copies",
                    f"{label} copies" if label != "other" else "other copies",
                    "GPU time",
                    by_kind[label] / n,
                    gpu_us,
                )
            )
    memset_us = float(dur[sel & (ctx.gpu_kind == GPU_KIND_MEMSET)].sum()) / n
    if memset_us > 0:
        out.append(Share("copy:memset", "copies", "memsets", "GPU time", memset_us, gpu_us))
    host_dev = by_kind.get("HtoD", 0.0) + by_kind.get("DtoH", 0.0)
    if host_dev > 0:
        pageable = _by_name(
            ctx, copies, lambda s: "pageable" if P.PAGEABLE_COPY.matches(s) else "pinned"
        )
        out.append(
            Share(
                "copy:pageable",
                "copies",
                "pageable",
                "host-device copies",
                pageable.get("pageable", 0.0) / n,
                host_dev / n,
                "lower",
            )
        )

    fam_us = np.bincount(fam[sel], weights=dur[sel], minlength=len(FAMILIES)) if sel.any() else None
    if fam_us is not None:
        for i, label in enumerate(FAMILIES):
            if fam_us[i] > 0:
                out.append(
                    Share(
                        f"family:{label}",
                        "kernel family",
                        label,
                        "GPU time",
                        float(fam_us[i]) / n,
                        gpu_us,
                    )
                )
    return out
