"""The analysed steps' dependency graph, read from the trace: what the replay
(:mod:`.replay`) moves when one cause is changed. Times in µs.

Three kinds of node and the edges between them:

* **host time** on the threads that launch the GPU work (:func:`launch_threads`), one clock: a
  stretch of it takes as long as it took unless a change removes or shortens it;
* **GPU activities** (kernels, copies, memsets) launched in the analysed steps, each on its
  stream: an activity starts when both its launch (the host, mapped through the replay's clock)
  and the activity before it on its stream allow, plus the latency the trace shows beyond both
  (``g_lag``: the queueing CUPTI shows after a launch, a cross-stream event wait);
* **blocking calls**: a runtime call on a launching thread during which GPU work ended and that
  returned within :data:`RETURN_MAX_US` of it (a stream, device or event synchronize; a
  blocking or pageable copy, which returns when its own copy is done; ``.item()``, ``.cpu()``,
  ``nonzero`` and the like, whose calls wait the same way). The edge runs from the last GPU
  activity that ended inside the call (``b_dep``) to the call's return: in
  a replay the call returns ``b_eps`` after that activity's new end, and no sooner than
  :data:`CALL_FLOOR_US` after it was made. A copy call that returned once its own copy had run
  (within :data:`RETURN_MAX_US` of its end, the copy at least half the call) waited for it.

The graph is read once per trace and shared by every replay. With no change, the replay
reproduces the trace's own window (:attr:`~.replay.Replay.error_us` says how closely).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import (
    LAUNCH_THREAD_MIN_SHARE,
    RETURN_MAX_US,
    TraceColumns,
)
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL

__all__ = [
    "CALL_FLOOR_US",
    "LAUNCH_THREAD_MIN_SHARE",
    "RETURN_MAX_US",
    "ReplayGraph",
    "launch_threads",
    "read_graph",
]

CALL_FLOOR_US = 5.0  # µs; the least a blocking call costs when the GPU is already done
XSTREAM_WAIT_US = 5.0  # µs; an activity that starts within this of the end of an activity on
# another stream of its device, later than its launch and its own stream allowed, waited for it
# (cudaStreamWaitEvent: NCCL's stream for the gradients, the compute stream for a collective's
# result, a side stream's copy); the hardware resolves an event wait in 1-3 µs (HTA's critical
# path joins cudaEventRecord to cudaStreamWaitEvent for the same edge); ours


# (cudaStreamSynchronize on an idle stream ~2-5 µs: docs/experiments.md#e8, HTA launch stats)
def launch_threads(ctx: TraceColumns) -> np.ndarray:
    """The launching threads (:attr:`~.columns.TraceColumns.launch_tids`)."""
    return ctx.launch_tids


@dataclass
class ReplayGraph:
    """The analysed window as arrays (:func:`read_graph`); times in µs.

    GPU activities (``g_*``, the selected ones, sorted by stream then start): ``g_index`` into
    the trace's GPU columns, ``g_stream`` (a dense id per device and stream), ``g_launch`` (when
    the launch call returned, its start for a blocking call's own copy; the activity's own
    start when no launch is in the trace), ``g_launch_start`` (the call's start), ``g_dur``,
    ``g_lag`` (start less the later of launch and the previous end on the stream), ``g_first``
    (the first selected activity of its stream) and ``g_prev_fixed`` (the end of the activity
    before it on the stream when that one is not selected, so does not move; else -inf),
    ``g_end`` and ``g_step`` (the analysed step it was launched in), ``g_xdep`` (position in
    ``g_*`` of the activity on another stream it waited for, :data:`XSTREAM_WAIT_US`; -1 for
    none: then ``g_lag`` is counted from that activity's end). ``step_end``: each analysed
    step's end on the host.

    Blocking calls (``b_*``, sorted by start): ``b_rt`` into the runtime columns, ``b_start``,
    ``b_end``, ``b_dep`` (position in ``g_*`` of the activity waited for, or -1 for one outside
    the selection, whose end ``b_dep_end`` stays), ``b_eps`` (return after it) and
    ``b_floor``."""

    start: float
    host_end: float
    step_end: np.ndarray
    tids: np.ndarray
    g_index: np.ndarray
    g_stream: np.ndarray
    g_launch: np.ndarray
    g_launch_start: np.ndarray
    g_dur: np.ndarray
    g_lag: np.ndarray
    g_first: np.ndarray
    g_prev_fixed: np.ndarray
    g_end: np.ndarray
    g_step: np.ndarray
    g_xdep: np.ndarray
    b_rt: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray
    b_dep: np.ndarray
    b_dep_end: np.ndarray
    b_eps: np.ndarray
    b_floor: np.ndarray

    @property
    def window_us(self) -> float:
        """The window as recorded: from the first step's start to the later of the last step's
        end and the end of the last GPU activity the steps launched."""
        end = self.host_end
        if self.g_end.size:
            end = max(end, float(self.g_end.max()))
        return end - self.start

    @property
    def recorded_done(self) -> np.ndarray:
        """When each step completed as recorded: the later of its host end and the end of the
        last GPU activity launched in it or before it (what the unchanged replay reproduces)."""
        done = self.step_end.copy()
        if self.g_end.size:
            np.maximum.at(done, self.g_step, self.g_end)
        return np.maximum.accumulate(done)


def _blocking_calls(
    ctx: TraceColumns, tids: np.ndarray, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(runtime call indices, the GPU activity each waited for (index into the trace's GPU
    columns), that activity's end) of the calls on threads ``tids`` in [lo, hi] that waited
    for the GPU (see the module docstring)."""
    empty = np.zeros(0, dtype=np.int64)
    if ctx.gpu_ts.size == 0 or ctx.rt_ts.size == 0 or tids.size == 0:
        return empty, empty, np.zeros(0)
    cand = np.isin(ctx.rt_tid, tids) & (ctx.rt_ts >= lo) & (ctx.rt_ts <= hi)
    # a call that launches a kernel does not wait for the GPU unless the queue is full, which
    # shows as a long call: only those are candidates among launches
    cand &= ~ctx.kernel_launch_mask | (ctx.rt_dur >= RETURN_MAX_US)
    idx = np.nonzero(cand)[0]
    if idx.size == 0:
        return empty, empty, np.zeros(0)
    order = np.argsort(ctx.gpu_end, kind="stable")
    ends = ctx.gpu_end[order]
    t0 = ctx.rt_ts[idx]
    t1 = t0 + ctx.rt_dur[idx]
    j = np.searchsorted(ends, t1, side="right") - 1
    ok = j >= 0
    jj = np.maximum(j, 0)
    ok &= (ends[jj] >= t0) & (t1 - ends[jj] <= RETURN_MAX_US)
    dep = order[jj]
    # a copy call that returned only once its own copy had run (pageable memory, cudaMemcpy):
    # its end may read a little before the copy's (host and GPU clocks differ by µs)
    own = np.full(ctx.rt_ts.size, -1, dtype=np.int64)
    m = (ctx.gpu_rt >= 0) & (ctx.gpu_kind != GPU_KIND_KERNEL)
    own[ctx.gpu_rt[m]] = np.nonzero(m)[0]
    o = own[idx]
    oo = np.maximum(o, 0)
    mine = (o >= 0) & (t1 > ctx.gpu_ts[oo]) & (np.abs(t1 - ctx.gpu_end[oo]) <= RETURN_MAX_US)
    mine &= ctx.gpu_end[oo] - ctx.gpu_ts[oo] >= 0.5 * (t1 - t0)
    dep = np.where(mine, oo, dep)
    ok |= mine
    return idx[ok], dep[ok], ctx.gpu_end[dep[ok]]


def _cross_stream_waits(
    ctx: TraceColumns,
    stream: np.ndarray,
    order: np.ndarray,
    pos: np.ndarray,
    ready: np.ndarray,
    lag: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(``g_xdep``, the lags counted from it) of the selected activities ``order`` (``ready``:
    the later of each one's launch and the end before it on its stream): the activity of
    another stream on the same device that ended last before it started, within
    :data:`XSTREAM_WAIT_US`, after it was ready; and selected, so that it moves in a replay."""
    xdep = np.full(order.size, -1, dtype=np.int64)
    if order.size == 0:
        return xdep, lag
    by_end = np.argsort(ctx.gpu_end, kind="stable")
    ends = ctx.gpu_end[by_end]
    start = ctx.gpu_ts[order]
    k = np.searchsorted(ends, start, side="right") - 1
    for back in (0, 1):  # the last to end, or the one before it when that is on this stream
        kk = k - back
        ok = (kk >= 0) & (xdep < 0) & (lag > 0)
        j = by_end[np.maximum(kk, 0)]
        ok &= (stream[j] != stream[order]) & (ctx.gpu_dev[j] == ctx.gpu_dev[order])
        ok &= (start - ctx.gpu_end[j] <= XSTREAM_WAIT_US) & (ctx.gpu_end[j] > ready)
        ok &= pos[j] >= 0
        xdep[ok] = pos[j[ok]]
    m = xdep >= 0
    lag = lag.copy()
    lag[m] = start[m] - ctx.gpu_end[order[xdep[m]]]
    return xdep, lag


def read_graph(ctx: TraceColumns) -> ReplayGraph | None:
    """The dependency graph of ``ctx``'s analysed steps (None without steps)."""
    if not ctx.steps:
        return None
    lo, hi = float(ctx.step_starts[0]), float(ctx.step_ends[-1])
    tids = launch_threads(ctx)
    sel = np.nonzero(ctx.gpu_step >= 0)[0]
    # a dense stream id per (device, stream) over every activity
    key = ctx.gpu_dev.astype(np.int64) * (1 << 32) + (ctx.gpu_stream & 0xFFFFFFFF)
    _, stream = np.unique(key, return_inverse=True)
    stream = stream.astype(np.int64).ravel()
    # every activity in stream order, for the end of the one before each selected one
    allo = np.lexsort((ctx.gpu_ts, stream))
    prev_end = np.full(ctx.gpu_ts.size, -np.inf)
    pred = np.full(ctx.gpu_ts.size, -1, dtype=np.int64)
    same = np.zeros(allo.size, dtype=bool)
    same[1:] = stream[allo[1:]] == stream[allo[:-1]]
    prev_end[allo[1:][same[1:]]] = ctx.gpu_end[allo[:-1][same[1:]]]
    pred[allo[1:][same[1:]]] = allo[:-1][same[1:]]
    selected = ctx.gpu_step >= 0
    order = sel[np.lexsort((ctx.gpu_ts[sel], stream[sel]))]
    g_stream = stream[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = g_stream[1:] != g_stream[:-1]
    b_rt, b_gpu, b_dep_end = _blocking_calls(ctx, tids, lo, hi)
    # an activity is queued when its launch call returns (a blocking call's own copy: when
    # the call starts, since the call returns only once the copy is done)
    rt = ctx.gpu_rt[order]
    has = rt >= 0
    blocking = np.zeros(ctx.rt_ts.size, dtype=bool)
    blocking[b_rt] = True
    if ctx.rt_ts.size:
        r = np.maximum(rt, 0)
        start_of = np.where(has, ctx.rt_ts[r], ctx.gpu_ts[order])
        launch = np.where(has & ~blocking[r], ctx.rt_ts[r] + ctx.rt_dur[r], start_of)
    else:  # no runtime calls recorded: each activity is queued when it starts
        start_of = ctx.gpu_ts[order].copy()
        launch = start_of.copy()
    prev = prev_end[order]
    lag = ctx.gpu_ts[order] - np.maximum(launch, prev)
    pos = np.full(ctx.gpu_ts.size, -1, dtype=np.int64)
    pos[order] = np.arange(order.size)
    xdep, lag = _cross_stream_waits(ctx, stream, order, pos, np.maximum(launch, prev), lag)
    b_order = np.argsort(ctx.rt_ts[b_rt], kind="stable")
    b_rt, b_gpu, b_dep_end = b_rt[b_order], b_gpu[b_order], b_dep_end[b_order]
    b_start = ctx.rt_ts[b_rt]
    b_end = b_start + ctx.rt_dur[b_rt]
    return ReplayGraph(
        start=lo,
        host_end=hi,
        step_end=np.asarray(ctx.step_ends, dtype=np.float64).copy(),
        tids=tids,
        g_index=order,
        g_stream=g_stream,
        g_launch=launch,
        g_launch_start=start_of,
        g_dur=ctx.gpu_dur[order].copy(),
        g_lag=lag,
        g_first=first,
        g_prev_fixed=np.where(
            (pred[order] >= 0) & ~selected[np.maximum(pred[order], 0)], prev, -np.inf
        ),
        g_end=ctx.gpu_end[order].copy(),
        g_step=ctx.gpu_step[order].astype(np.int64),
        g_xdep=xdep,
        b_rt=b_rt,
        b_start=b_start,
        b_end=b_end,
        b_dep=pos[b_gpu],
        b_dep_end=b_dep_end,
        b_eps=b_end - b_dep_end,
        b_floor=np.minimum(b_end - b_start, CALL_FLOOR_US),
    )


def blocking_mask(ctx: TraceColumns, graph: ReplayGraph | None) -> np.ndarray:
    """The runtime calls that made the host wait for the GPU (``graph``'s blocking calls), as a
    mask over the runtime columns."""
    out = np.zeros(ctx.rt_ts.size, dtype=bool)
    if graph is not None:
        out[graph.b_rt] = True
    return out


def sync_call_mask(ctx: TraceColumns) -> np.ndarray:
    """Runtime calls whose purpose is to wait (synchronize calls), over the runtime columns."""
    return P.SYNC_CALL.mask(ctx.rt_name, ctx.names)
