"""Copies: host-device transfers from pageable (unpinned) memory, and the copies that
``.contiguous()``/``reshape`` make after ``permute``/``transpose`` (E10 in
docs/experiments.md#e10: keep data off the bus, watch ``contiguous`` after ``permute``/``flatten``).
"""

from __future__ import annotations

import math

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL, GPU_KIND_MEMCPY
from gpuprobe.tools.diagnose.rules._common import (
    GROUP,
    median,
    no_gpu,
    pct,
    steady_steps,
    step_range,
)
from gpuprobe.tools.diagnose.rules._common import per_step as per

__all__ = [
    "CONTIGUOUS_WARN_FRACTION",
    "PAGEABLE_MIN_BYTES",
    "PAGEABLE_STEPS_FRACTION",
    "PAGEABLE_WARN_FRACTION",
    "WORTH_INFO_FRACTION",
    "contiguous_copies",
    "pageable_copies",
]

PAGEABLE_MIN_BYTES = 1024  # bytes; smaller pageable copies are scalar reads (.item()), which the
# sync rule reports; ours
PAGEABLE_STEPS_FRACTION = 0.5  # of profiled steps with a pageable copy to warn; ours
PAGEABLE_WARN_FRACTION = 0.01  # of step time in pageable copies for them to be worth fixing; ours
PINNED_COPY_GB_PER_S = 12.0  # GB/s host<->device from pinned memory when the trace has no pinned
# copy of its own to measure: PCIe 3.0 x16 as bandwidthTest/nvbandwidth measure it (~12 GB/s),
# the slowest link in common use, so the gain is not overstated
WORTH_INFO_FRACTION = 0.001  # of step time below which a cost is not worth mentioning; ours
CONTIGUOUS_WARN_FRACTION = 0.05  # of step time spent in layout copies to warn; ours

_DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}


@rule("pageable-copies")
def pageable_copies(ctx: TraceContext) -> list[Finding]:
    """Memcpy to or from pageable host memory: slower, and it blocks the host (Nsight
    cuda_memcpy_async)."""
    if not ctx.has_gpu:
        return [no_gpu(ctx, "pageable-copies", "Pageable copies")]
    n = len(ctx.steps)
    copy = (ctx.gpu_kind == GPU_KIND_MEMCPY) & (ctx.gpu_step >= 0)
    page = copy & P.PAGEABLE_COPY.mask(ctx.gpu_name, ctx.names)
    page &= ctx.gpu_bytes >= PAGEABLE_MIN_BYTES
    steps = ctx.gpu_step[page]
    count = np.bincount(steps, minlength=n)
    nbytes = np.bincount(steps, weights=ctx.gpu_bytes[page], minlength=n)
    time = np.bincount(steps, weights=ctx.gpu_dur[page], minlength=n)
    total_dur = float(ctx.gpu_dur[page].sum())
    bw = float(ctx.gpu_bytes[page].sum()) / total_dur / 1e3 if total_dur > 0 else None
    kinds = sorted({ctx.names[i] for i in np.unique(ctx.gpu_name[page])})
    evidence: tuple[Evidence, ...] = (
        Evidence("pageable_copies_per_step", median(count)),
        Evidence("pageable_bytes_per_step", round(median(nbytes) / 1e6, 3), "MB"),
        Evidence("pageable_copy_time_per_step", round(median(time), 1), "µs"),
        Evidence("pageable_bandwidth", None if bw is None else round(bw, 2), "GB/s"),
        Evidence("steps_with_pageable", int(np.count_nonzero(count))),
    )
    if not page.any():
        return [
            Finding(
                id="pageable-copies",
                status=Status.OK,
                title=f"No pageable host-device copies ({step_range(ctx)})",
                evidence=evidence,
                group=GROUP,
            )
        ]
    frac = np.count_nonzero(count) / max(n, 1)
    share = float(median(time / steady_steps(ctx)))
    evidence += (
        Evidence("pageable_share_of_step", pct(share), "%"),
        Evidence("threshold", pct(PAGEABLE_WARN_FRACTION), "%"),
    )
    if share < WORTH_INFO_FRACTION:
        return [
            Finding(
                id="pageable-copies",
                status=Status.OK,
                title=f"Pageable host-device copies take only {median(time):.0f} µs per step "
                f"({pct(share)} % of it): not worth changing",
                evidence=evidence,
                group=GROUP,
                details=tuple(kinds),
            )
        ]
    warn = frac >= PAGEABLE_STEPS_FRACTION and share >= PAGEABLE_WARN_FRACTION
    # the gain: the same bytes at the pinned rate (measured on this trace's own pinned copies
    # when it has some), the rest of the copy time saved
    pinned = (
        copy & P.PINNED_COPY.mask(ctx.gpu_name, ctx.names) & (ctx.gpu_bytes >= PAGEABLE_MIN_BYTES)
    )
    p_dur = float(ctx.gpu_dur[pinned].sum())
    rate = float(ctx.gpu_bytes[pinned].sum()) / p_dur / 1e3 if p_dur > 0 else PINNED_COPY_GB_PER_S
    saved = max(0.0, 1.0 - (bw or rate) / rate) if rate > 0 else 0.0
    evidence += (
        Evidence("pinned_rate", round(rate, 2), "GB/s"),
        Evidence("pinned_rate_from", "this trace" if p_dur > 0 else "PCIe 3.0 x16 default"),
    )
    return [
        Finding(
            id="pageable-copies",
            status=Status.WARN if warn else Status.INFO,
            title=f"{median(count):.0f} cop{'y' if median(count) == 1 else 'ies'} {per(ctx)} "
            "from pageable memory "
            f"({median(nbytes) / 1e6:.1f} MB, {median(time):.0f} µs)",
            evidence=evidence,
            fix="DataLoader(..., pin_memory=True) (or tensor.pin_memory()) and "
            "x.to('cuda', non_blocking=True), so copies run at full speed and overlap compute",
            group=GROUP,
            details=tuple(kinds),
            gain=share * saved,
        )
    ]


def _copy_time(ctx: TraceContext, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For cpu_op indices ``ops``: did a clone/copy_ run inside it (a real copy was made), and
    the host time of the outermost one (the copy itself, without the wrapper's own overhead)?"""
    clone = np.nonzero(P.CLONE.mask(ctx.op_name, ctx.names))[0]
    found = np.zeros(ops.size, dtype=bool)
    took = np.zeros(ops.size)
    for tid in np.unique(ctx.op_tid[ops]):
        c = clone[ctx.op_tid[clone] == tid]
        if c.size == 0:
            continue
        c = c[np.argsort(ctx.op_ts[c], kind="stable")]
        cts = ctx.op_ts[c]
        mine = ctx.op_tid[ops] == tid
        o = ops[mine]
        j = np.searchsorted(cts, ctx.op_ts[o], side="left")
        jj = np.minimum(j, cts.size - 1)
        hit = (j < cts.size) & (cts[jj] < ctx.op_ts[o] + ctx.op_dur[o])
        found[mine] = hit
        took[mine] = np.where(hit, ctx.op_dur[c[jj]], 0.0)
    return found, took


def _after_view(ctx: TraceContext, ops: np.ndarray) -> np.ndarray:
    """For cpu_op indices ``ops`` (top-level): was the previous top-level op of the thread a
    layout-changing view, or is the input's stride not row-major (record_shapes)?"""
    top = np.nonzero(ctx.op_top)[0]
    view = P.LAYOUT_VIEW.mask(ctx.op_name, ctx.names)
    prev_is_view = np.zeros(ctx.op_ts.size, dtype=bool)
    for tid in np.unique(ctx.op_tid[top]):
        t = top[ctx.op_tid[top] == tid]
        t = t[np.argsort(ctx.op_ts[t], kind="stable")]
        prev_is_view[t[1:]] = view[t[:-1]]
    out = prev_is_view[ops]
    strided = {i for i, dims, strides, _ in ctx.raw.shaped if not _row_major(dims, strides)}
    if strided:
        out |= np.fromiter((int(i) in strided for i in ops), dtype=bool, count=ops.size)
    return out


def _row_major(dims: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    if len(dims) != len(strides):
        return True
    expect = 1
    for d, s in zip(reversed(dims), reversed(strides), strict=True):
        if d != 1 and s != expect:
            return False
        expect *= d
    return True


@rule("contiguous-copies")
def contiguous_copies(ctx: TraceContext) -> list[Finding]:
    """Copies made by contiguous/reshape/flatten right after a permute/transpose."""
    n = len(ctx.steps)
    cand = np.nonzero(
        P.COPYING_RESHAPE.mask(ctx.op_name, ctx.names) & ctx.op_top & (ctx.op_step >= 0)
    )[0]
    copied, copy_us = _copy_time(ctx, cand)
    keep = copied & _after_view(ctx, cand) if cand.size else copied
    hit, copy_us = cand[keep], copy_us[keep]
    steps = ctx.op_step[hit]
    count = np.bincount(steps, minlength=n)
    # on the host, the clone/copy_ inside the reshape is the copy; the rest of the op is its
    # own overhead (the first call of an op can take hundreds of µs for 8 elements)
    cpu_time = np.bincount(steps, weights=copy_us, minlength=n)
    gpu_time = _gpu_time_inside(ctx, hit, n)
    time = gpu_time if ctx.has_gpu else cpu_time
    share = time / steady_steps(ctx)
    shapes = {i: (d, dt) for i, d, _, dt in ctx.raw.shaped}
    nbytes = np.zeros(n)
    for i, s in zip(hit.tolist(), steps.tolist(), strict=True):
        if i in shapes:
            dims, dtype = shapes[i]
            nbytes[s] += math.prod(dims) * _DTYPE_BYTES.get(dtype, 4)
    where = "GPU" if ctx.has_gpu else "CPU"
    evidence = (
        Evidence("layout_copies_per_step", median(count)),
        Evidence("layout_copy_time_per_step", round(median(time), 1), "µs"),
        Evidence("layout_copy_share", pct(median(share)), "%"),
        Evidence("layout_copy_bytes_per_step", round(median(nbytes) / 1e6, 3), "MB"),
        Evidence("measured_on", where),
        Evidence("threshold", pct(CONTIGUOUS_WARN_FRACTION), "%"),
    )
    if median(count) < 1:
        return [
            Finding(
                id="contiguous-copies",
                status=Status.OK,
                title=f"No layout copies after permute/transpose in most steps ({step_range(ctx)})",
                evidence=evidence,
                group=GROUP,
            )
        ]
    names = sorted({ctx.names[i] for i in np.unique(ctx.op_name[hit])})
    warn = median(share) >= CONTIGUOUS_WARN_FRACTION
    if median(share) < WORTH_INFO_FRACTION:
        return [
            Finding(
                id="contiguous-copies",
                status=Status.OK,
                title=f"{median(count):.0f} layout copies per step after permute/transpose, "
                f"{median(time):.0f} µs on the {where}: not worth changing",
                evidence=evidence,
                group=GROUP,
            )
        ]
    return [
        Finding(
            id="contiguous-copies",
            status=Status.WARN if warn else Status.INFO,
            title=f"{median(count):.0f} {'copy' if median(count) == 1 else 'copies'} {per(ctx)} "
            f"by {'/'.join(names)} after "
            f"permute/transpose ({pct(median(share))} % of step time on the {where})",
            evidence=evidence,
            fix="keep one layout: build tensors in the order they are used (e.g. channels_last "
            "via x.to(memory_format=torch.channels_last)), use ops that accept strided input "
            "(torch.einsum, matmul on transposed views), or permute once outside the loop",
            group=GROUP,
            gain=median(share),
        )
    ]


def _gpu_time_inside(ctx: TraceContext, ops: np.ndarray, n: int) -> np.ndarray:
    """Per step, the GPU time of kernels launched from inside the cpu_ops ``ops``."""
    out = np.zeros(n)
    if not ctx.has_gpu or ops.size == 0:
        return out
    k = np.nonzero((ctx.gpu_kind == GPU_KIND_KERNEL) & (ctx.gpu_rt >= 0))[0]
    rt = ctx.gpu_rt[k]
    for tid in np.unique(ctx.op_tid[ops]):
        o = ops[ctx.op_tid[ops] == tid]
        o = o[np.argsort(ctx.op_ts[o])]
        mine = ctx.rt_tid[rt] == tid
        rts = ctx.rt_ts[rt[mine]]
        j = np.searchsorted(ctx.op_ts[o], rts, side="right") - 1
        ok = j >= 0
        jj = np.maximum(j, 0)
        inside = ok & (rts <= ctx.op_ts[o][jj] + ctx.op_dur[o][jj])
        steps = ctx.op_step[o][jj[inside]]
        out += np.bincount(steps, weights=ctx.gpu_dur[k[mine][inside]], minlength=n)
    return out
