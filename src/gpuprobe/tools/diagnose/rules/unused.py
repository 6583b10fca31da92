"""A GPU the run never used: ``gpu-unused``. The trace says the machine has a GPU (its header's
``deviceProperties``, the NCCL backend in ``distributedInfo``, a CUDA or HIP driver version) and
holds no kernel, no copy and nothing that shows the GPU ran without being recorded (a kernel
launch, an op or span that takes GPU tensors only such as ``nccl:all_to_all``, a CUDA ``[memory]``
event, the legacy export's launch flows). Then all the work ran on the host: the model or its
inputs never went to the GPU, the program chose the CPU, or ``CUDA_VISIBLE_DEVICES`` hid the card.

Its gain is not priced: the what-if replay takes out or shortens work the trace holds, and what
this host work would take on the GPU is not in it (no kernel to time), so the finding's gain is
None and it heads the diagnosis when it warns (:attr:`~..model.Diagnosis.headline`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules._common import GROUP, no_gpu, step_range

__all__ = ["CUDA_DEVICE_TYPE", "gpu_signs", "gpu_unused", "use_signs"]

CUDA_DEVICE_TYPE = 1  # the "Device Type" of a CUDA [memory] event: c10::DeviceType::CUDA
_DRIVER_KEYS = ("cuda_driver_version", "hip_driver_version")  # header keys Kineto writes (CUPTI
# and roctracer builds) with the driver it found; 0 or absent without one

NOT_PRICED = (
    "gain not priced: the what-if replay takes out or shortens work the trace holds, and what "
    "this host work would take on the GPU is not in it (no kernel to time)"
)
_FIX = (
    "put the model and its inputs on the GPU: model.to('cuda'), x = x.to('cuda', "
    "non_blocking=True) (print(torch.cuda.is_available(), next(model.parameters()).device) to "
    "see what the program chose); check the device selection (a device='cpu' default, a "
    "--device flag) and that CUDA_VISIBLE_DEVICES is not empty or wrong; if the job did use the "
    "GPU, the profiler did not record it: activities=[ProfilerActivity.CPU, "
    "ProfilerActivity.CUDA]"
)


def _device_text(props: list[dict[str, Any]]) -> str:
    """``"NVIDIA A100-PG509-200 (8 in deviceProperties)"``, ``"Tesla T4"``, or ``"GPU 0"``."""
    names = [str(p.get("name") or f"GPU {p['id']}") for p in props]
    first = names[0]
    if len(names) == 1:
        return first
    same = all(n == first for n in names)
    return f"{first} ({len(names)} in deviceProperties)" if same else ", ".join(names)


def gpu_signs(ctx: TraceContext) -> tuple[str, list[str]]:
    """(the GPU in words, or "" without a sign of one; each sign of a GPU on the machine that
    the trace's header holds)."""
    header = ctx.raw.header
    props = ctx.raw.device_properties
    signs: list[str] = []
    device = ""
    if props:
        device = _device_text(props)
        signs.append(f"deviceProperties lists {len(props)} GPU{'s' if len(props) > 1 else ''}")
    dist = header.get("distributedInfo")
    backend = dist.get("backend") if isinstance(dist, dict) else None
    if isinstance(backend, str) and P.NCCL_BACKEND.matches(backend):
        signs.append(f"distributedInfo.backend {backend!r} (NCCL runs on CUDA GPUs only)")
        device = device or "the GPU NCCL ran on"
    for key in _DRIVER_KEYS:
        v = header.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            signs.append(f"{key} {v} in the header")
            device = device or "the GPU its driver serves"
    return device, signs


def _names(ids: Iterable[int], names: list[str]) -> list[str]:
    return sorted({names[int(i)] for i in ids})


def use_signs(ctx: TraceContext) -> list[str]:
    """What shows the GPU ran although the trace holds no GPU activity: kernel launches, ops
    that take GPU tensors only, CUDA ``[memory]`` events, the legacy export's launch flows."""
    out: list[str] = []
    launches = int(ctx.kernel_launch_mask.sum())
    if launches:
        out.append(f"{launches} kernel launches")
    if ctx.raw.legacy_launches:
        out.append(
            f"{ctx.raw.legacy_launches} GPU launches of the legacy export (PyTorch >= 1.9 writes "
            "no kernel times there)"
        )
    # ops and the record_function spans around them (torch.distributed's nccl:all_to_all)
    named = np.concatenate([ctx.op_name, ctx.ann_name])
    gpu_ops = P.GPU_ONLY_OP.mask(named, ctx.names)
    if gpu_ops.any():
        shown = _names(np.unique(named[gpu_ops]), ctx.names)
        out.append(f"{int(gpu_ops.sum())} ops that take GPU tensors only ({', '.join(shown[:3])})")
    memory = {**ctx.raw.memory_peak, **ctx.raw.memory_delta_peak}
    cuda = sorted(d for t, d in memory if t == CUDA_DEVICE_TYPE)
    if cuda:
        out.append(f"CUDA memory events on device {', '.join(map(str, cuda))}")
    return out


@rule("gpu-unused")
def gpu_unused(ctx: TraceContext) -> list[Finding]:
    """A GPU on the machine (the trace's header says so) that did none of the work."""
    if ctx.has_gpu:
        return [
            Finding(
                id="gpu-unused",
                status=Status.OK,
                title=f"The GPU ran work: {ctx.gpu_ts.size:,} GPU "
                f"activit{'y' if ctx.gpu_ts.size == 1 else 'ies'} (kernels, copies) in the trace",
                evidence=(Evidence("gpu_activities", int(ctx.gpu_ts.size)),),
                group=GROUP,
            )
        ]
    if ctx.accelerator:
        return [no_gpu(ctx, "gpu-unused", "Unused GPU")]
    device, signs = gpu_signs(ctx)
    used = use_signs(ctx)
    if not signs and not used:
        return [
            Finding(
                id="gpu-unused",
                status=Status.SKIPPED,
                title="Unused GPU: skipped: no sign of a GPU on the machine (no "
                "deviceProperties, NCCL backend or GPU driver in the trace's header): a "
                "CPU-only run",
                evidence=(Evidence("gpu_activities", 0),),
                group=GROUP,
            )
        ]
    host_ms = float(ctx.step_durations.sum()) / 1e3
    device = device or "a GPU"
    evidence = [
        Evidence("device", device),
        Evidence("gpu_activities", 0),
        Evidence("host_time", round(host_ms, 2), "ms"),
        Evidence("cpu_ops", int(ctx.op_ts.size)),
        Evidence("gpu_signs", "; ".join(signs) or "none in the header"),
    ]
    if used:
        return [
            Finding(
                id="gpu-unused",
                status=Status.INFO,
                title=f"The GPU ran but the trace does not show it: {used[0]} on {device}, no "
                "kernel or copy recorded",
                evidence=(*evidence, Evidence("gpu_use_signs", "; ".join(used))),
                fix="record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] "
                "(torch.autograd.profiler.profile(use_cuda=True) before PyTorch 1.9, "
                "torch.profiler after)",
                group=GROUP,
                details=tuple(used),
            )
        ]
    if ctx.op_ts.size == 0:  # runtime calls only (device queries, a synchronize): no work
        return [
            Finding(
                id="gpu-unused",
                status=Status.OK,
                title=f"Unused GPU: nothing ran in the profiled window ({ctx.rt_ts.size} "
                "runtime calls, no op on the host or the GPU): profile the steps that do the "
                "work",
                evidence=tuple(evidence),
                group=GROUP,
            )
        ]
    return [
        Finding(
            id="gpu-unused",
            status=Status.WARN,
            title=f"GPU present but unused: no kernels or copies in {host_ms:,.1f} ms of host "
            f"work on {device} ({step_range(ctx)})",
            evidence=tuple(evidence),
            fix=_FIX,
            group=GROUP,
            details=(*signs, NOT_PRICED),
        )
    ]
