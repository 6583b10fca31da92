"""Memory: the peak of the caching allocator against the card's capacity (E2:
docs/experiments.md#e2)."""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules._common import GROUP, pct

__all__ = ["CUDA_DEVICE_TYPE", "PEAK_MEMORY_WARN_FRACTION", "peak_memory"]

PEAK_MEMORY_WARN_FRACTION = 0.9  # of the card's memory; torch-tb-profiler memory recommendation
CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA in [memory] events' "Device Type"


@rule("peak-memory")
def peak_memory(ctx: TraceContext) -> list[Finding]:
    """Peak reserved (and allocated) GPU memory from ``[memory]`` events vs ``totalGlobalMem``."""
    if not ctx.has_gpu:
        from gpuprobe.tools.diagnose.rules._common import no_gpu

        return [no_gpu(ctx, "peak-memory", "Peak GPU memory")]
    peaks = {d: v for (t, d), v in ctx.raw.memory_peak.items() if t == CUDA_DEVICE_TYPE}
    deltas = {d: v for (t, d), v in ctx.raw.memory_delta_peak.items() if t == CUDA_DEVICE_TYPE}
    if not peaks and deltas:
        # PyTorch <= 1.9 wrote each allocation's size only: the peak of their running sum is
        # what was allocated on top of whatever existed when profiling began (not a share)
        return [
            Finding(
                id="peak-memory",
                status=Status.INFO,
                title=f"GPU memory: at least {top / 2**30:.2f} GiB allocated during the trace"
                f"{f' on GPU {d}' if len(deltas) > 1 else ''} (old [memory] events carry only "
                "each allocation's size, so the total and its share of the card are unknown)",
                evidence=(
                    Evidence("peak_allocated_during_trace", round(top / 2**30, 3), "GiB"),
                    Evidence("peak_share", None, "%"),
                ),
                group=GROUP,
                subject=f"GPU {d}" if len(deltas) > 1 else "",
            )
            for d, (_, top) in sorted(deltas.items())
        ]
    if not peaks:
        return [
            Finding(
                id="peak-memory",
                status=Status.SKIPPED,
                title="Peak GPU memory: skipped: no CUDA [memory] events "
                "(profile with profile_memory=True)",
                group=GROUP,
            )
        ]
    caps = {}
    for i, p in enumerate(ctx.raw.device_properties):
        try:
            caps[int(p.get("id", i))] = float(p["totalGlobalMem"])
        except (KeyError, TypeError, ValueError):
            continue
    out = []
    many = len(peaks) > 1
    for d, (alloc, reserved) in sorted(peaks.items()):
        cap = caps.get(d)
        frac = reserved / cap if cap else None
        evidence = (
            Evidence("peak_reserved", round(reserved / 2**30, 3), "GiB"),
            Evidence("peak_allocated", round(alloc / 2**30, 3), "GiB"),
            Evidence("capacity", None if cap is None else round(cap / 2**30, 3), "GiB"),
            Evidence("peak_share", pct(frac), "%"),
            Evidence("threshold", pct(PEAK_MEMORY_WARN_FRACTION), "%"),
        )
        subject = f"GPU {d}" if many else ""
        if frac is None:
            status, title, fix = (
                Status.INFO,
                (
                    f"Peak GPU memory {reserved / 2**30:.2f} GiB reserved (capacity unknown: no "
                    "deviceProperties)"
                ),
                "",
            )
        elif frac >= PEAK_MEMORY_WARN_FRACTION:
            status = Status.WARN
            title = f"Peak GPU memory {pct(frac)} % of the card: close to out-of-memory"
            fix = (
                "smaller batch with gradient accumulation, torch.autocast (bf16 halves "
                "activations), activation checkpointing (torch.utils.checkpoint), or set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation"
            )
        else:
            status, title, fix = Status.OK, f"Peak GPU memory {pct(frac)} % of the card", ""
        out.append(
            Finding(
                id="peak-memory",
                status=status,
                title=title,
                evidence=evidence,
                fix=fix,
                group=GROUP,
                subject=subject,
            )
        )
    return out
