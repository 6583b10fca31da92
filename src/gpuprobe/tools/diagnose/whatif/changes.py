"""The change each fix makes, as a :class:`~.replay.Change` the replay can price: built from
the trace's own columns, so that every gain comes from the same graph. Times in µs.

* :func:`remove_host`: host stretches gone (a DataLoader that keeps up, CPU work moved off the
  step's path, a one-time call out of the steady state);
* :func:`unblock`: blocking calls that no longer wait (a sync removed, a copy made
  asynchronous): each keeps only :data:`~.graph.CALL_FLOOR_US`;
* :func:`launch_floor`: the launch path at the trace's own fast-launch floor (what CUDA graphs
  or a compiled step give): each gap between two launches of a launching thread that is only
  dispatch (no blocking call, no DataLoader, no CPU work of its own) shrinks to the
  :data:`FAST_LAUNCH_QUANTILE` of the trace's launch calls' own durations (the driver's part of
  a launch, without the framework's dispatch around it);
* :func:`gpu_durations`: GPU activities with new durations (a pageable copy at the pinned
  rate, an FP32 GEMM at the Tensor Core rate, a layout copy gone).
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import LAUNCH_GAP_MAX_US, TraceColumns
from gpuprobe.tools.diagnose.intervals import overlaps
from gpuprobe.tools.diagnose.whatif.graph import ReplayGraph
from gpuprobe.tools.diagnose.whatif.replay import Change

__all__ = [
    "FAST_LAUNCH_QUANTILE",
    "gpu_durations",
    "launch_floor",
    "own_copy_calls",
    "remove_host",
    "unblock",
    "unblock_waits",
    "waits_for",
]

FAST_LAUNCH_QUANTILE = 0.5  # of the launching threads' kernel launch calls' durations: the
# driver's own cost of a launch in this trace, taken as the pace launching without per-op
# framework overhead reaches (a CUDA graph replays at ~1-2 µs per kernel, faster still, so the
# gain is not overstated; HTA's launch stats show the call itself at ~5-20 µs eagerly); ours


def remove_host(starts: np.ndarray, ends: np.ndarray, keep: float | np.ndarray = 0.0) -> Change:
    """Host stretches [starts, ends] shortened to ``keep`` µs (gone by default)."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    k = np.broadcast_to(np.asarray(keep, dtype=np.float64), s.shape).copy()
    return Change(host=(s, e, k))


def unblock(graph: ReplayGraph | None, calls: np.ndarray) -> Change:
    """The blocking calls among runtime-call mask ``calls`` no longer wait: each costs its floor."""
    if graph is None or graph.b_rt.size == 0:
        return Change()
    m = calls[graph.b_rt]
    return remove_host(graph.b_start[m], graph.b_end[m], graph.b_floor[m])


def waits_for(graph: ReplayGraph | None, gpu: np.ndarray) -> np.ndarray:
    """The blocking calls (a mask over ``graph``'s) whose wait was for a GPU activity of mask
    ``gpu`` (over the trace's GPU columns): a pageable copy's own call and the synchronize
    PyTorch makes after it."""
    if graph is None or graph.b_rt.size == 0:
        return np.zeros(0, dtype=bool)
    dep = graph.b_dep
    out = np.zeros(dep.size, dtype=bool)
    ok = dep >= 0
    out[ok] = gpu[graph.g_index[dep[ok]]]
    return out


def unblock_waits(graph: ReplayGraph | None, which: np.ndarray) -> Change:
    """The blocking calls of mask ``which`` (over ``graph``'s, :func:`waits_for`) no longer wait."""
    if graph is None or not which.any():
        return Change()
    return remove_host(graph.b_start[which], graph.b_end[which], graph.b_floor[which])


def own_copy_calls(ctx: TraceColumns, gpu: np.ndarray) -> np.ndarray:
    """The runtime calls that launched the GPU activities of mask ``gpu``, as a runtime mask."""
    out = np.zeros(ctx.rt_ts.size, dtype=bool)
    m = gpu & (ctx.gpu_rt >= 0)
    out[ctx.gpu_rt[m]] = True
    return out


def gpu_durations(mask: np.ndarray, durations: np.ndarray) -> Change:
    """The GPU activities of ``mask`` (over the trace's GPU columns) take ``durations`` (one per
    activity of the mask, or per activity of the trace)."""
    idx = np.nonzero(mask)[0]
    d = np.asarray(durations, dtype=np.float64)
    if d.shape == mask.shape:
        d = d[idx]
    return Change(gpu=(idx.astype(np.int64), d))


def launch_floor(
    ctx: TraceColumns,
    graph: ReplayGraph | None,
    dataloader: tuple[np.ndarray, np.ndarray],
    cpu_work: tuple[np.ndarray, np.ndarray],
) -> tuple[Change, float]:
    """(The change, the floor in µs): every dispatch-only gap between consecutive launch calls
    of a launching thread at the trace's fast-launch floor (see the module docstring).
    ``dataloader`` and ``cpu_work``: the host intervals that are not dispatch."""
    if graph is None or graph.tids.size == 0:
        return Change(), 0.0
    launch = P.LAUNCH_CALL.mask(ctx.rt_name, ctx.names)
    lo, hi = graph.start, graph.host_end
    own = ctx.kernel_launch_mask & np.isin(ctx.rt_tid, graph.tids)
    own &= (ctx.rt_ts >= lo) & (ctx.rt_ts <= hi)
    if not own.any():
        return Change(), 0.0
    floor = float(np.quantile(ctx.rt_dur[own], FAST_LAUNCH_QUANTILE))
    gaps_a: list[np.ndarray] = []
    gaps_b: list[np.ndarray] = []
    bs, be = graph.b_start, graph.b_end
    for tid in graph.tids.tolist():
        m = launch & (ctx.rt_tid == tid) & (ctx.rt_ts >= lo) & (ctx.rt_ts <= hi)
        t = np.sort(ctx.rt_ts[m])
        if t.size < 2:
            continue
        a, b = t[:-1], t[1:]
        ok = (b - a) < LAUNCH_GAP_MAX_US
        if bs.size:  # no blocking call inside
            ok &= np.searchsorted(bs, b, side="left") == np.searchsorted(be, a, side="right")
        ok &= overlaps(*dataloader, a, b) <= 0
        ok &= overlaps(*cpu_work, a, b) < 0.5 * (b - a)
        gaps_a.append(a[ok])
        gaps_b.append(b[ok])
    if not gaps_a:
        return Change(), 0.0
    a = np.concatenate(gaps_a)
    b = np.concatenate(gaps_b)
    if a.size == 0:
        return Change(), 0.0
    return remove_host(a, b, np.minimum(b - a, floor)), floor
