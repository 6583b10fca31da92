"""The records of a trace: the per-step breakdowns (GPU busy and idle time, waits by HTA
category, activity counts, median kernel and launch, idle time by cause; per device) and the
whole-trace summary with HTA-style GPU fractions. Functions of a trace's
:class:`~gpuprobe.tools.diagnose.columns.TraceColumns`, called by
:class:`~gpuprobe.tools.diagnose.analysis.TraceContext`. Times in µs.
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.intervals import group_medians, merge_intervals, overlap
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL, GPU_KIND_MEMCPY, GPU_KIND_MEMSET
from gpuprobe.tools.diagnose.model import IDLE_CAUSES, DeviceInfo, StepBreakdown, TraceSummary

__all__ = ["step_breakdowns", "trace_summary"]


def step_breakdowns(
    ctx: TraceColumns,
    idle_cause_per_step: dict[int, np.ndarray],
    host_phases: list[dict[str, float]],
) -> list[StepBreakdown]:
    """One record per selected step, and per device when the trace has GPU activity, with
    ``idle_cause_per_step`` (:func:`.idle.idle_cause_per_step`; read only when the trace has GPU
    activity) and each step's ``host_phases`` (:func:`.phases.phase_dicts`)."""
    out: list[StepBreakdown] = []
    dur = ctx.step_durations
    n = len(ctx.steps)
    ops_per = np.bincount(ctx.op_step[ctx.op_step >= 0], minlength=n)
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, ctx.names) & (ctx.ann_step >= 0)
    dl_per = np.bincount(ctx.ann_step[dl], weights=ctx.ann_dur[dl], minlength=n)
    sync = ctx.sync_mask & (ctx.rt_step >= 0)
    sync_per = np.bincount(ctx.rt_step[sync], minlength=n)
    items = ctx.scalar_read_mask & (ctx.op_step >= 0)
    items_per = np.bincount(ctx.op_step[items], minlength=n)
    gpu = _gpu_per_step(ctx) if ctx.has_gpu else None
    causes = idle_cause_per_step if gpu else {}
    for i, st in enumerate(ctx.steps):
        common = dict(
            step=st.number,
            start_us=st.start + ctx.raw.time_base,
            duration_us=float(dur[i]),
            dataloader_us=float(dl_per[i]),
            syncs=int(sync_per[i]),
            items=int(items_per[i]),
            cpu_ops=int(ops_per[i]),
            host_phase_us=host_phases[i],
        )
        if gpu is None:
            out.append(StepBreakdown(**common))  # type: ignore[arg-type]
            continue
        for k, d in enumerate(ctx.devices):
            starts, ends = ctx.merged_by_device[d]
            # the GPU's numbers in the step's GPU window (its CPU window unless the GPU lags)
            ws, we = (float(x[i]) for x in ctx.gpu_windows[d])
            busy = overlap(starts, ends, ws, we)
            length = we - ws
            g = i * len(ctx.devices) + k
            timed = {}
            if ctx.gpu_lags:  # the step's time is the GPU's; the host's window is kept beside
                timed = dict(
                    start_us=ws + ctx.raw.time_base,
                    duration_us=length,
                    cpu_duration_us=float(dur[i]),
                )
            out.append(
                StepBreakdown(
                    **{**common, **timed},  # type: ignore[arg-type]
                    device=d,
                    gpu_busy_us=busy,
                    gpu_busy_fraction=busy / length if length > 0 else None,
                    idle_us=max(length - busy, 0.0),
                    host_wait_us=float(gpu["waits"][g, 0]),
                    kernel_wait_us=float(gpu["waits"][g, 1]),
                    other_wait_us=float(gpu["waits"][g, 2]),
                    kernels=int(gpu["kinds"][g, GPU_KIND_KERNEL]),
                    memcpys=int(gpu["kinds"][g, GPU_KIND_MEMCPY]),
                    memsets=int(gpu["kinds"][g, GPU_KIND_MEMSET]),
                    median_kernel_us=gpu["kernel_median"][g],
                    median_launch_us=gpu["launch_median"][g],
                    idle_cause_us=dict(
                        zip(IDLE_CAUSES, (float(x) for x in causes[d][i]), strict=True)
                    ),
                )
            )
    return out


def _gpu_per_step(ctx: TraceColumns) -> dict:
    """Per (step, device) group g = step * n_devices + device index: idle waits by category,
    activity counts by kind, median kernel and median launch duration. One pass each."""
    nd = len(ctx.devices)
    groups = len(ctx.steps) * nd
    dev_index = {d: k for k, d in enumerate(ctx.devices)}
    to_idx = np.vectorize(dev_index.__getitem__, otypes=[np.int64])

    def group_of(step: np.ndarray, dev: np.ndarray) -> np.ndarray:
        return step * nd + (to_idx(dev) if dev.size else dev)

    g = ctx.idle_gaps
    waits = np.zeros((groups, 3))
    if g["gap"].size:
        gi = group_of(g["step"], g["device"])
        np.add.at(waits, (gi, g["cat"]), g["gap"])
    sel = ctx.gpu_step >= 0
    gid = group_of(ctx.gpu_step[sel], ctx.gpu_dev[sel])
    kinds = np.zeros((groups, 3), dtype=np.int64)
    np.add.at(kinds, (gid, ctx.gpu_kind[sel].astype(np.int64)), 1)
    kern = ctx.gpu_kind[sel] == GPU_KIND_KERNEL
    kernel_median = group_medians(gid[kern], ctx.gpu_dur[sel][kern], groups)
    rt = ctx.gpu_rt[sel][kern]
    has_rt = rt >= 0
    # launch calls proper (a graph replay launches many kernels with one call)
    has_rt[has_rt] = ctx.kernel_launch_mask[rt[has_rt]]
    launch_median = group_medians(gid[kern][has_rt], ctx.rt_dur[rt[has_rt]], groups)
    return {
        "waits": waits,
        "kinds": kinds,
        "kernel_median": kernel_median,
        "launch_median": launch_median,
    }


def trace_summary(
    ctx: TraceColumns,
    read_seconds: float,
    analyse_seconds: float,
    host_phase_share: dict[str, float],
    host_phase_median_us: dict[str, float],
) -> TraceSummary:
    """The whole-trace record, with HTA-style GPU fractions over the GPU span and the host
    phases' shares and medians (:func:`.phases.phase_summary`)."""
    raw = ctx.raw
    busy_frac = idle_frac = host = kern = other = None
    gpu_span = None
    sel = ctx.gpu_step >= 0
    busy = 0.0
    if ctx.has_gpu and sel.any():
        span = 0.0
        for d in ctx.devices:
            m = sel & (ctx.gpu_dev == d)
            if not m.any():
                continue
            s, e = merge_intervals(ctx.gpu_ts[m], ctx.gpu_end[m])
            span += float(e[-1] - s[0])
            busy += float(np.sum(e - s))
        gpu_span = span
        if span > 0:
            busy_frac = busy / span
            idle_frac = 1.0 - busy_frac
        g = ctx.idle_gaps
        waits = np.bincount(g["cat"], weights=g["gap"], minlength=3)
        total = float(waits.sum())
        if total > 0:
            host, kern, other = (float(w / total) for w in waits)
    trace_span, trace_busy = _trace_gpu_span(ctx)
    trace_frac = trace_busy / trace_span if trace_span else None
    props = {p.get("id", i): p for i, p in enumerate(raw.device_properties)}
    devices = []
    for d in ctx.devices or sorted(props):
        p = props.get(d, {})
        devices.append(
            DeviceInfo(
                id=int(d),
                name=str(p.get("name") or f"GPU {d}"),  # ROCm may write ""
                compute_major=_opt_int(p.get("computeMajor")),
                compute_minor=_opt_int(p.get("computeMinor")),
                total_memory_bytes=_opt_int(p.get("totalGlobalMem")),
                num_sms=_opt_int(p.get("numSms")),
            )
        )
    header = raw.header
    return TraceSummary(
        path=raw.path,
        size_bytes=raw.size_bytes,
        events=raw.events,
        skipped_events=raw.skipped,
        damage=tuple(raw.damage),
        steps=tuple(s.number for s in ctx.steps if s.number is not None),
        gpu_lag_share=ctx.gpu_lag_share,
        steps_timed_on_gpu=ctx.gpu_lags,
        devices=tuple(devices),
        has_gpu=ctx.has_gpu,
        with_stack=bool(header.get("with_stack")) or ctx.py_ts.size > 0,
        record_shapes=bool(header.get("record_shapes")) or bool(raw.shaped),
        profile_memory=bool(header.get("profile_memory")) or raw.memory_events > 0,
        cpu_ops=int(ctx.op_ts.size),
        gpu_activities=int(ctx.gpu_ts.size),
        span_us=float(ctx.step_durations.sum()),
        gpu_span_us=gpu_span,
        gpu_busy_fraction=busy_frac,
        steps_busy_fraction=busy_frac,
        trace_gpu_span_us=trace_span,
        trace_gpu_busy_fraction=trace_frac,
        gpu_activities_outside_steps=int((~sel).sum()) if ctx.has_gpu else 0,
        gpu_busy_outside_steps_us=round(max(trace_busy - busy, 0.0), 3),
        gpu_idle_fraction=idle_frac,
        host_wait_fraction=host,
        kernel_wait_fraction=kern,
        other_wait_fraction=other,
        host_phase_share=host_phase_share,
        host_phase_median_us=host_phase_median_us,
        read_seconds=read_seconds,
        analyse_seconds=analyse_seconds,
        trace_format=raw.trace_format,
        accelerator=ctx.accelerator,
    )


def _trace_gpu_span(ctx: TraceColumns) -> tuple[float | None, float]:
    """(the whole GPU span: from each device's first GPU activity to its last, summed over
    devices, None without GPU activity; the length of the union of every GPU activity in it,
    launched in the analysed steps or not), µs."""
    if not ctx.has_gpu:
        return None, 0.0
    span = busy = 0.0
    for s, e in ctx.merged_by_device.values():
        if s.size:
            span += float(e[-1] - s[0])
            busy += float(np.sum(e - s))
    return span, busy


def _opt_int(x: object) -> int | None:
    try:
        return int(x)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
