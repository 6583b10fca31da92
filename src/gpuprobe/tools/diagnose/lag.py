"""When the GPU runs behind the CPU: a GPU-bound loop with no per-step sync lets the host queue
step N+1, N+2, ... while the GPU still runs step N, so each ``ProfilerStep#N`` annotation (a
CPU window) holds little or none of the GPU work that step launched. The GPU's per-step numbers
(busy time, idle time and its causes) are then timed in GPU-side windows: step i from the first
start of the GPU work it launched (matched by its launch's correlation id) to the first start of
step i+1's; the last step to the last end of its own work. The host's per-step counts (ops,
syncs, DataLoader time, launches) stay in the CPU windows. Functions of a trace's columns
(start and end of each CPU step window, each GPU activity's step, device, start and end), so
that :mod:`.columns` can call them as it builds. Times in µs.
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose.intervals import merge_intervals, overlap

__all__ = ["GPU_LAG_FRACTION", "GPU_LAG_MIN_BUSY", "busy_share", "gpu_step_windows", "lag_share"]

GPU_LAG_FRACTION = 0.5  # median share of a step's GPU work that runs outside its CPU window
# past which the steps are timed on the GPU's side: most of each step's work runs after (or
# before) the host's step, so the CPU window says nothing of the GPU's time; ours
GPU_LAG_MIN_BUSY = 0.5  # share of the steps' span the GPU must be busy for it to run behind:
# a starved loop's GPU (busy 10 % on the H200's loader_single_process, 2026-11-26) runs each
# step's few ms of work just after the host step that launched it, then idles through the next
# step's DataLoader; that tail is no backlog, and the host's steps stay the steps; ours


def busy_share(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> float:
    """Share of [lo, hi] covered by the union of the intervals [ts, end) (any device)."""
    if hi <= lo or ts.size == 0:
        return 0.0
    starts, ends = merge_intervals(ts, end)
    return overlap(starts, ends, lo, hi) / (hi - lo)


def lag_share(
    cpu_starts: np.ndarray,
    cpu_ends: np.ndarray,
    step: np.ndarray,
    dev: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
) -> float | None:
    """The median over (step, device) of the share of the GPU time a step launched on a device
    that lies outside the step's CPU window (activities summed, not merged); None when no step
    launched GPU work that took time. ``step``: each activity's step index (-1: none)."""
    sel = step >= 0
    if not sel.any():
        return None
    s, d = step[sel], dev[sel]
    a, b = ts[sel], end[sel]
    inside = np.clip(np.minimum(b, cpu_ends[s]) - np.maximum(a, cpu_starts[s]), 0.0, None)
    _, group = np.unique(np.stack([s, d]), axis=1, return_inverse=True)
    group = group.reshape(-1)
    total = np.bincount(group, weights=b - a)
    within = np.bincount(group, weights=inside)
    ok = total > 0
    if not ok.any():
        return None
    return float(np.median(1.0 - within[ok] / total[ok]))


def gpu_step_windows(
    cpu_starts: np.ndarray, step: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One device's step windows on the GPU's side (``step``, ``ts``, ``end``: its activities'
    step index, start and end): step i from the first start of its work to the first start of
    the next step with work (never before its own start); the last such step to the last end of
    its work. A step that launched nothing gets an empty window where the one before it ends
    (at its CPU start when none does)."""
    n = cpu_starts.size
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    sel = step >= 0
    np.minimum.at(first, step[sel], ts[sel])
    np.maximum.at(last, step[sel], end[sel])
    has = np.isfinite(first)
    starts = np.empty(n)
    ends = np.empty(n)
    nxt = np.inf  # the first start of the next step with work, walking backwards
    for i in range(n - 1, -1, -1):
        if has[i]:
            starts[i] = first[i]
            ends[i] = max(last[i] if np.isinf(nxt) else nxt, first[i])
            nxt = first[i]
    prev = None
    for i in range(n):
        if has[i]:
            prev = ends[i]
        else:
            starts[i] = ends[i] = cpu_starts[i] if prev is None else prev
    return starts, ends
