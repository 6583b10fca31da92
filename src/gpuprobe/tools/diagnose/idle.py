"""Why the GPU was idle: the host intervals that explain idle time (DataLoader waits, graph
captures, host syncs and the refill after them, the edges of each step) and the attribution of
each idle instant inside the selected steps to the first cause that covers it
(:data:`~gpuprobe.tools.diagnose.model.IDLE_CAUSES`). Functions of a
trace's :class:`~gpuprobe.tools.diagnose.columns.TraceColumns`, cached in
:class:`~gpuprobe.tools.diagnose.analysis.TraceContext`, which hands each the results of the
others it needs. Times in µs.
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import LAUNCH_GAP_MAX_US, TraceColumns
from gpuprobe.tools.diagnose.intervals import (
    intersect_intervals,
    merge_intervals,
    overlap,
    overlaps,
    subtract_intervals,
)
from gpuprobe.tools.diagnose.model import IDLE_CAUSES

__all__ = [
    "CPU_WORK_MIN_US",
    "UNTRACED_MIN_GAP_US",
    "capture_intervals",
    "capture_share",
    "captured_launches",
    "cpu_work_intervals",
    "dataloader_intervals",
    "idle_by_cause",
    "idle_cause_per_step",
    "launching_ops",
    "untraced_intervals",
]

CPU_WORK_MIN_US = 100.0  # µs; a top-level op this long that queues no GPU work computes on the
# CPU (an eager op's dispatch is ~5-50 µs: docs/experiments.md#e8, HTA launch stats); a late
# launch's gap that such ops fill for the most part is host work, not launch overhead; ours
UNTRACED_MIN_GAP_US = 1000.0  # µs; a hole in the host's traced events shorter than this is the
# Python between two ops (µs each); from this on it is code the profiler does not see; ours


def dataloader_intervals(ctx: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """Union of the DataLoader ``__next__`` spans (host time)."""
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, ctx.names)
    return merge_intervals(ctx.ann_ts[dl], ctx.ann_ts[dl] + ctx.ann_dur[dl])


def capture_intervals(ctx: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """Union of the stream captures into a CUDA/HIP graph: on each thread, from a
    ``…StreamBeginCapture`` call to the end of the next ``…StreamEndCapture``. Kernels launched
    in between are recorded into the graph, not run, so the GPU idles by design."""
    begin = P.GRAPH_CAPTURE_BEGIN.mask(ctx.rt_name, ctx.names)
    end = P.GRAPH_CAPTURE_END.mask(ctx.rt_name, ctx.names)
    lo: list[float] = []
    hi: list[float] = []
    for tid in np.unique(ctx.rt_tid[begin]):
        b = np.sort(ctx.rt_ts[begin & (ctx.rt_tid == tid)])
        e_idx = np.nonzero(end & (ctx.rt_tid == tid))[0]
        e_end = np.sort(ctx.rt_ts[e_idx] + ctx.rt_dur[e_idx])
        k = np.searchsorted(e_end, b, side="left")
        ok = k < e_end.size
        lo += b[ok].tolist()
        hi += e_end[k[ok]].tolist()
    return merge_intervals(np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64))


def capture_share(ctx: TraceColumns, capture: tuple[np.ndarray, np.ndarray]) -> float:
    """Share of the selected steps' time spent capturing graphs (``capture``:
    :func:`capture_intervals`; 0 without captures)."""
    s, e = capture
    if s.size == 0:
        return 0.0
    ws, we = ctx.step_windows
    total = float((we - ws).sum())
    inside = sum(overlap(s, e, float(a), float(b)) for a, b in zip(ws, we, strict=True))
    return inside / total if total > 0 else 0.0


def captured_launches(ctx: TraceColumns, capture: tuple[np.ndarray, np.ndarray]) -> tuple[int, int]:
    """Kernel launch calls in the selected steps: (made while capturing a graph, all);
    ``capture``: :func:`capture_intervals`."""
    m = ctx.kernel_launch_mask & (ctx.rt_step >= 0)
    s, e = capture
    if s.size == 0:
        return 0, int(m.sum())
    ts = ctx.rt_ts[m]
    k = np.searchsorted(s, ts, side="right") - 1
    kk = np.maximum(k, 0)
    return int(((k >= 0) & (ts <= e[kk])).sum()), int(m.sum())


def untraced_intervals(ctx: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """The holes of at least :data:`UNTRACED_MIN_GAP_US` inside the selected steps where no host
    event runs on a launching thread (:attr:`~.columns.TraceColumns.launch_tids`; any thread
    when no launch is in the trace): no cpu_op, runtime call, Python frame or DataLoader span: host
    code the profiler does not record (Python without with_stack, a first TorchScript or
    compiled call, a library's own threads)."""
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, ctx.names)
    op = np.ones(ctx.op_ts.size, dtype=bool)
    rt = np.ones(ctx.rt_ts.size, dtype=bool)
    py = np.ones(ctx.py_ts.size, dtype=bool)
    if ctx.launches_gpu_work:  # only the launching threads' events: another thread's busy
        # (a pin-memory thread waiting on a lock) does not fill a hole in theirs
        tids = ctx.launch_tids
        op, rt, py = np.isin(ctx.op_tid, tids), np.isin(ctx.rt_tid, tids), np.isin(ctx.py_tid, tids)
    s, e = merge_intervals(
        np.concatenate([ctx.op_ts[op], ctx.rt_ts[rt], ctx.py_ts[py], ctx.ann_ts[dl]]),
        np.concatenate(
            [
                ctx.op_ts[op] + ctx.op_dur[op],
                ctx.rt_ts[rt] + ctx.rt_dur[rt],
                ctx.py_ts[py] + ctx.py_dur[py],
                ctx.ann_ts[dl] + ctx.ann_dur[dl],
            ]
        ),
    )
    windows = ctx.step_windows
    if ctx.gpu_lags:  # the GPU's idle time is judged in its own windows too
        parts = [windows, *(ctx.gpu_step_windows(d) for d in ctx.devices)]
        windows = merge_intervals(
            np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
        )
    hs, he = subtract_intervals(windows, (s, e))
    long = (he - hs) >= UNTRACED_MIN_GAP_US
    return hs[long], he[long]


def launching_ops(ctx: TraceColumns, ops: np.ndarray) -> np.ndarray:
    """For cpu_op indices ``ops``: whether a launch call (a kernel, a copy, a graph) ran inside
    the op on its thread: the op queued GPU work."""
    out = np.zeros(ops.size, dtype=bool)
    launch = P.LAUNCH_CALL.mask(ctx.rt_name, ctx.names)
    for tid in np.unique(ctx.op_tid[ops]):
        t = np.sort(ctx.rt_ts[launch & (ctx.rt_tid == tid)])
        if t.size == 0:
            continue
        m = ctx.op_tid[ops] == tid
        a = ctx.op_ts[ops[m]]
        b = a + ctx.op_dur[ops[m]]
        out[m] = np.searchsorted(t, b, side="left") > np.searchsorted(t, a, side="left")
    return out


def cpu_work_intervals(ctx: TraceColumns, top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of the top-level cpu_ops (``top``: a mask, :func:`.frames.op_top`) of at least
    :data:`CPU_WORK_MIN_US` that queue no GPU work: computing on the CPU (inputs made there,
    a CPU optimizer, preprocessing)."""
    idx = np.nonzero(top & (ctx.op_dur >= CPU_WORK_MIN_US))[0]
    idx = idx[~launching_ops(ctx, idx)]
    return merge_intervals(ctx.op_ts[idx], ctx.op_ts[idx] + ctx.op_dur[idx])


def _late_gaps(
    ctx: TraceColumns, d: int, cpu_work: tuple[np.ndarray, np.ndarray]
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Device ``d``'s gaps before a late launch, split into host work (a gap of
    :data:`~.columns.LAUNCH_GAP_MAX_US` or more, or one that ``cpu_work`` fills for the most
    part) and launch overhead (the rest)."""
    g = ctx.idle_gaps
    m = (g["device"] == d) & (g["gap"] > 0) & g["late"]
    a, b = g["start"][m], g["end"][m]
    busy = overlaps(*cpu_work, a, b)
    host = (b - a >= LAUNCH_GAP_MAX_US) | (busy >= 0.5 * (b - a))
    return merge_intervals(a[host], b[host]), merge_intervals(a[~host], b[~host])


def _waiting_intervals(
    ctx: TraceColumns, d: int, m: np.ndarray, drained_only: bool
) -> tuple[np.ndarray, np.ndarray]:
    """For device ``d``: each runtime call in mask ``m`` from its start to the start of the
    next GPU activity after it returned, the refill capped at how long the call made the host
    wait (its duration; with ``drained_only``, 0 for a call during which the device did
    nothing)."""
    if not m.any():
        return np.zeros(0), np.zeros(0)
    return _refilled(ctx, d, ctx.rt_ts[m], ctx.rt_ts[m] + ctx.rt_dur[m], drained_only)


def _refilled(
    ctx: TraceColumns, d: int, ts: np.ndarray, ret: np.ndarray, drained_only: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Host stretches [ts, ret] each with the refill after it on device ``d`` (the time to the
    start of the next GPU activity), capped at the stretch's own length (0 with
    ``drained_only`` for a stretch during which the device did nothing)."""
    if ts.size == 0:
        return np.zeros(0), np.zeros(0)
    starts, ends = ctx.merged_by_device[d]
    if starts.size == 0:
        return merge_intervals(ts, ret)
    k = np.searchsorted(starts, ret, side="left")  # first activity starting at/after return
    refill = np.where(k < starts.size, starts[np.minimum(k, starts.size - 1)], ret)
    wait = ret - ts
    if drained_only:
        i = np.searchsorted(ends, ts, side="right")  # first activity ending after the start
        drained = (i < starts.size) & (starts[np.minimum(i, starts.size - 1)] < ret)
        wait = np.where(drained, wait, 0.0)
    return merge_intervals(ts, ret + np.clip(refill - ret, 0.0, wait))


def startup_intervals(
    ctx: TraceColumns,
    calls: np.ndarray,
    d: int,
    spans: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0)),
) -> tuple[np.ndarray, np.ndarray]:
    """For device ``d``: each one-time call (``calls``: :func:`.onetime.one_time_calls`) and
    each one-time host stretch (``spans``, merged: :func:`.onetime.one_time_spans`: a compiled
    run's compiling and first runs), with the refill after it, up to its own length."""
    m = np.zeros(ctx.rt_ts.size, dtype=bool)
    m[calls] = True
    a, b = _waiting_intervals(ctx, d, m, drained_only=False)
    c, e = _refilled(ctx, d, spans[0], spans[1], drained_only=False)
    return merge_intervals(np.concatenate([a, c]), np.concatenate([b, e]))


def _sync_intervals(ctx: TraceColumns, d: int) -> tuple[np.ndarray, np.ndarray]:
    """For device ``d``: each waiting host call from its start to the start of the next GPU
    activity after it returned (the wait inside it and the refill after it).

    The refill is what the sync costs only up to how long it made the host wait: had the
    host not waited W, it would have done the same host work W earlier, so of a gap H
    after the return min(H, W) is the sync's and the rest has another cause (the host
    preparing the next input, say). A call during which device ``d`` did nothing waited
    for nothing there (W = 0); otherwise W is the call's duration."""
    return _waiting_intervals(ctx, d, ctx.sync_mask, drained_only=True)


def _edge_intervals(ctx: TraceColumns, d: int) -> tuple[np.ndarray, np.ndarray]:
    """For device ``d``: per step window (:attr:`~.columns.TraceColumns.gpu_windows`), from
    its start to its first GPU activity and from its last GPU activity to its end (the whole
    window when the GPU did nothing in it)."""
    starts, ends = ctx.merged_by_device[d]
    lo: list[float] = []
    hi: list[float] = []
    for a, b in zip(*(w.tolist() for w in ctx.gpu_windows[d]), strict=True):
        i0 = int(np.searchsorted(ends, a, side="right"))
        i1 = int(np.searchsorted(starts, b, side="left"))
        if i1 <= i0:
            lo.append(a)
            hi.append(b)
            continue
        first, last = max(float(starts[i0]), a), min(float(ends[i1 - 1]), b)
        lo += [a, last]
        hi += [first, b]
    return merge_intervals(np.array(lo), np.array(hi))


def idle_by_cause(
    ctx: TraceColumns,
    dataloader: tuple[np.ndarray, np.ndarray],
    capture: tuple[np.ndarray, np.ndarray],
    one_time: np.ndarray,
    first_calls: tuple[np.ndarray, np.ndarray],
    untraced: tuple[np.ndarray, np.ndarray],
    cpu_work: tuple[np.ndarray, np.ndarray],
    one_time_spans: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0)),
) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per device, the GPU's idle time inside the selected steps split by cause
    (:data:`IDLE_CAUSES`), each instant given to the first cause that covers it. Graph
    capture is host work that queues nothing to run: its time is ``host``, not ``sync``; so
    is a late launch's gap of :data:`~.columns.LAUNCH_GAP_MAX_US` or more, or one that CPU work
    fills for the most part (the host worked on something else; a launch only ended it).
    ``dataloader``, ``capture``, ``one_time``, ``first_calls``, ``untraced``, ``cpu_work``
    and ``one_time_spans``: :func:`dataloader_intervals`, :func:`capture_intervals`,
    :func:`.onetime.one_time_calls`, the spans of :func:`.onetime.first_calls`,
    :func:`untraced_intervals`, :func:`cpu_work_intervals`, the merged
    :func:`.onetime.one_time_spans`."""
    out: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for d in ctx.devices:
        rest = subtract_intervals(ctx.gpu_step_windows(d), ctx.merged_by_device[d])
        host_gaps, launch_gaps = _late_gaps(ctx, d, cpu_work)
        causes = {
            "startup": merge_intervals(
                *(
                    np.concatenate(p)
                    for p in zip(
                        startup_intervals(ctx, one_time, d, one_time_spans),
                        first_calls,
                        strict=True,
                    )
                )
            ),
            "input": dataloader,
            # a refill that runs into a graph capture stops there: the kernels launched
            # while capturing are recorded, not run, so that idle time is the capture's
            "sync": subtract_intervals(_sync_intervals(ctx, d), capture),
            "untraced": untraced,
            "host": merge_intervals(
                *(
                    np.concatenate(p)
                    for p in zip(
                        _edge_intervals(ctx, d),
                        capture,
                        host_gaps,
                        strict=True,
                    )
                )
            ),
            "launch": launch_gaps,
            "short": ctx.gap_intervals(d, False),
        }
        parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, iv in causes.items():
            parts[name] = intersect_intervals(rest, iv)
            rest = subtract_intervals(rest, iv)
        parts["other"] = rest
        out[d] = parts
    return out


def idle_cause_per_step(
    ctx: TraceColumns, by_cause: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]
) -> dict[int, np.ndarray]:
    """Per device, an array (steps × causes) of idle µs in each step's GPU window (its CPU
    window unless the GPU lags), causes in :data:`IDLE_CAUSES`, from ``by_cause``
    (:func:`idle_by_cause`)."""
    out = {}
    for d, parts in by_cause.items():
        table = np.zeros((len(ctx.steps), len(IDLE_CAUSES)))
        ws, we = ctx.gpu_windows[d]
        for j, name in enumerate(IDLE_CAUSES):
            s, e = parts[name]
            for i in range(len(ctx.steps)):
                table[i, j] = overlap(s, e, float(ws[i]), float(we[i]))
        out[d] = table
    return out
