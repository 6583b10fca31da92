"""The trace as NumPy columns: :class:`TraceColumns`, the reader's compact columns of
:class:`RawTrace` with each event's step, the GPU activities joined to their launch calls, the
GPU busy time and HTA's idle gaps per device and stream, and the masks over names (launches,
syncs, scalar reads, graph replays). What the modules that explain a trace (:mod:`.idle`,
:mod:`.frames`, :mod:`.breakdown`) read; :class:`~gpuprobe.tools.diagnose.analysis.TraceContext`
builds on it and caches what they compute. The step selection is in :mod:`.steps`, the interval
arithmetic in :mod:`.intervals`.

Everything is vectorised with NumPy; the only Python loops run over steps, devices and threads.
Times in µs.
"""

from __future__ import annotations

from array import array
from functools import cached_property

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.damage import drop_repeats
from gpuprobe.tools.diagnose.intervals import merge_intervals
from gpuprobe.tools.diagnose.kineto import RawTrace
from gpuprobe.tools.diagnose.lag import (
    GPU_LAG_FRACTION,
    GPU_LAG_MIN_BUSY,
    busy_share,
    gpu_step_windows,
    lag_share,
)
from gpuprobe.tools.diagnose.steps import Step, select_steps

__all__ = [
    "COPY_CLOCK_SKEW_US",
    "KERNEL_WAIT_MAX_GAP_US",
    "LAUNCH_GAP_MAX_US",
    "LAUNCH_THREAD_MIN_SHARE",
    "RETURN_MAX_US",
    "TraceColumns",
    "column",
]

KERNEL_WAIT_MAX_GAP_US = 30.0  # µs; HTA get_idle_time_breakdown consecutive_kernel_delay=30
# (documented there as ns, but compared with µs timestamps, so µs in effect)
LAUNCH_GAP_MAX_US = 1000.0  # µs; a late launch's gap up to this is the framework's per-op cost
# (an eager op's launch path is ~5-50 µs: docs/experiments.md#e8, HTA launch stats); a longer
# one is CPU work of its own between kernels (host), however it ends; ours


RETURN_MAX_US = 200.0  # µs; a call that returns this soon after GPU work that ended inside it
# waited for that work (a synchronize returns ~2-20 µs after its work ends, a pageable copy after
# its staging; CUDA runtime API docs, "Synchronous" vs "Asynchronous" behaviour of cudaMemcpy);
# one that went on longer was doing something else; ours
LAUNCH_THREAD_MIN_SHARE = 0.05  # of the analysed steps' GPU activities a thread must launch to
# be a launching thread (the main thread, autograd's device thread); ours
COPY_CLOCK_SKEW_US = 5.0  # µs; a copy's end on the GPU's clock may read this much after the
# host call that waited for it returned (CUPTI's GPU timestamps are converted to the host's;
# the H200 pageable pairs of tests/data/diagnose/gpu_h200 show 0-3 µs); ours


def column(a: array, dtype: type) -> np.ndarray:
    """The reader's compact column ``a`` as a NumPy array of ``dtype`` (a view; empty when
    ``a`` is)."""
    return np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)


class TraceColumns:
    """The trace as NumPy columns with each event's step, the GPU time and idle gaps, and the
    masks over names."""

    def __init__(self, raw: RawTrace, steps: tuple[int, int] | None = None) -> None:
        drop_repeats(raw)  # events written twice counted once, and said (raw.damage)
        self.raw = raw
        self.names = raw.names
        f8, i8 = np.float64, np.int64
        ip = np.dtype("l").type
        self.op_ts, self.op_dur = column(raw.op_ts, f8), column(raw.op_dur, f8)
        self.op_name, self.op_tid = column(raw.op_name, ip), column(raw.op_tid, ip)
        self.py_ts, self.py_dur = column(raw.py_ts, f8), column(raw.py_dur, f8)
        self.py_name, self.py_tid = column(raw.py_name, ip), column(raw.py_tid, ip)
        self.ann_ts, self.ann_dur = column(raw.ann_ts, f8), column(raw.ann_dur, f8)
        self.ann_name = column(raw.ann_name, ip)
        self.rt_ts, self.rt_dur = column(raw.rt_ts, f8), column(raw.rt_dur, f8)
        self.rt_name, self.rt_corr = column(raw.rt_name, ip), column(raw.rt_corr, i8)
        self.rt_tid = column(raw.rt_tid, ip)
        self.gpu_ts, self.gpu_dur = column(raw.gpu_ts, f8), column(raw.gpu_dur, f8)
        self.gpu_kind = column(raw.gpu_kind, np.int8)
        self.gpu_name, self.gpu_dev = column(raw.gpu_name, ip), column(raw.gpu_dev, ip)
        self.gpu_stream, self.gpu_corr = column(raw.gpu_stream, i8), column(raw.gpu_corr, i8)
        self.gpu_bytes = column(raw.gpu_bytes, f8)
        self.gpu_end = self.gpu_ts + self.gpu_dur
        self.has_gpu = self.gpu_ts.size > 0

        self.steps: list[Step] = select_steps(
            raw,
            steps,
            [
                (self.op_ts, self.op_dur),
                (self.rt_ts, self.rt_dur),
                (self.gpu_ts, self.gpu_dur),
                (self.ann_ts, self.ann_dur),
                (self.py_ts, self.py_dur),
            ],
        )
        self.step_starts = np.array([s.start for s in self.steps], dtype=f8)
        self.step_ends = np.array([s.end for s in self.steps], dtype=f8)
        self.op_step = self.step_of(self.op_ts)
        self.ann_step = self.step_of(self.ann_ts)
        self.rt_step = self.step_of(self.rt_ts)
        # Each GPU activity belongs to the step of its launch (HTA: iteration via correlation).
        self.gpu_rt = self._join_runtime()
        matched = self.gpu_rt >= 0
        launch_ts = self.gpu_ts.copy()
        launch_ts[matched] = self.rt_ts[self.gpu_rt[matched]]
        self.gpu_launch_ts = np.where(matched, launch_ts, np.nan)
        # when the launch call returned: from then on the work is in the GPU's queue
        self.gpu_launch_end = np.full(self.gpu_ts.shape, np.nan)
        rt = self.gpu_rt[matched]
        self.gpu_launch_end[matched] = self.rt_ts[rt] + self.rt_dur[rt]
        self.gpu_step = self.step_of(launch_ts)
        self.devices = sorted(int(d) for d in np.unique(self.gpu_dev))
        # the GPU runs behind the CPU (no per-step sync): its per-step numbers are timed in
        # GPU-side windows (:mod:`.lag`); the host's stay in the CPU windows
        self.gpu_lag_share = lag_share(
            self.step_starts, self.step_ends, self.gpu_step, self.gpu_dev, self.gpu_ts, self.gpu_end
        )
        self.gpu_lags = (
            self.gpu_lag_share is not None
            and self.gpu_lag_share > GPU_LAG_FRACTION
            and self._steps_gpu_busy() >= GPU_LAG_MIN_BUSY
        )

    def _steps_gpu_busy(self) -> float:
        """Share of the steps' span, from the first step's start to the last end of the GPU work
        they launched, that the GPU is busy (any device)."""
        launched = self.gpu_step >= 0
        hi = float(self.step_ends[-1])
        if launched.any():
            hi = max(hi, float(self.gpu_end[launched].max()))
        return busy_share(self.gpu_ts, self.gpu_end, float(self.step_starts[0]), hi)

    # -- steps ------------------------------------------------------------------------------

    def step_of(self, ts: np.ndarray) -> np.ndarray:
        """Index into ``steps`` of the step containing each time, or -1."""
        if not self.steps or ts.size == 0:
            return np.full(ts.shape, -1, dtype=np.int64)
        idx = np.searchsorted(self.step_starts, ts, side="right") - 1
        ok = idx >= 0
        inside = np.zeros(ts.shape, dtype=bool)
        inside[ok] = ts[ok] <= self.step_ends[idx[ok]]
        return np.where(inside, idx, -1)

    @property
    def step_durations(self) -> np.ndarray:
        """Duration of each selected step (µs)."""
        return self.step_ends - self.step_starts

    @cached_property
    def gpu_windows(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per device, each step's window for its GPU numbers (start, end arrays): the CPU
        window, or when the GPU lags (:attr:`gpu_lags`) the GPU-side window of
        :func:`.lag.gpu_step_windows`."""
        out = {}
        for d in self.devices:
            if not self.gpu_lags:
                out[d] = (self.step_starts, self.step_ends)
                continue
            m = self.gpu_dev == d
            out[d] = gpu_step_windows(
                self.step_starts, self.gpu_step[m], self.gpu_ts[m], self.gpu_end[m]
            )
        return out

    def gpu_step_windows(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Device ``d``'s step windows for its GPU numbers as one sorted disjoint interval set
        (:attr:`step_windows` unless the GPU lags)."""
        if not self.gpu_lags:
            return self.step_windows
        s, e = self.gpu_windows[d]
        return merge_intervals(s.copy(), e.copy())

    @cached_property
    def timed_durations(self) -> np.ndarray:
        """Each step's time as the analysis judges it (µs): its CPU window, or when the GPU
        lags (the GPU sets the pace) its longest GPU-side window over the devices."""
        if not self.gpu_lags or not self.devices:
            return self.step_durations
        return np.max([e - s for s, e in self.gpu_windows.values()], axis=0)

    def _join_runtime(self) -> np.ndarray:
        """Index of the runtime call with each GPU activity's correlation id, or -1."""
        out = np.full(self.gpu_corr.shape, -1, dtype=np.int64)
        if self.rt_corr.size == 0 or self.gpu_corr.size == 0:
            return out
        order = np.argsort(self.rt_corr, kind="stable")
        sorted_corr = self.rt_corr[order]
        pos = np.searchsorted(sorted_corr, self.gpu_corr)
        pos = np.minimum(pos, sorted_corr.size - 1)
        hit = (sorted_corr[pos] == self.gpu_corr) & (self.gpu_corr >= 0)
        out[hit] = order[pos[hit]]
        return out

    # -- GPU time ---------------------------------------------------------------------------

    @cached_property
    def merged_by_device(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Union of every GPU activity per device (for busy time inside a window)."""
        out = {}
        for d in self.devices:
            m = self.gpu_dev == d
            out[d] = merge_intervals(self.gpu_ts[m], self.gpu_end[m])
        return out

    @cached_property
    def idle_gaps(self) -> dict[str, np.ndarray]:
        """HTA's per-stream idle intervals among the activities of the selected steps.

        Per (device, stream), activities sorted by start; gap = start − previous end. The gap is
        *host wait* when the launch of the later activity started after the previous one ended,
        else *kernel wait* when shorter than :data:`KERNEL_WAIT_MAX_GAP_US`, else *other*.
        Returns arrays: gap, category (0 host, 1 kernel, 2 other), step, device.
        """
        sel = self.gpu_step >= 0
        dev, stream = self.gpu_dev[sel], self.gpu_stream[sel]
        ts, end = self.gpu_ts[sel], self.gpu_end[sel]
        launch, step = self.gpu_launch_ts[sel], self.gpu_step[sel]
        queued = self.gpu_launch_end[sel]
        order = np.lexsort((ts, stream, dev))
        dev, stream, ts, end = dev[order], stream[order], ts[order], end[order]
        launch, step, queued = launch[order], step[order], queued[order]
        same = np.zeros(ts.size, dtype=bool)
        same[1:] = (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1])
        prev_end = np.empty_like(end)
        prev_end[1:] = end[:-1]
        idx = np.nonzero(same)[0]
        gap = ts[idx] - prev_end[idx]
        with np.errstate(invalid="ignore"):
            host = launch[idx] > prev_end[idx]  # NaN launch (unmatched) -> False, as in HTA
            # the launch call returned only after the previous activity ended: the GPU waited
            # for the launch itself (HTA's host wait looks at the call's start instead)
            late = queued[idx] > prev_end[idx]
        cat = np.where(host, 0, np.where(gap < KERNEL_WAIT_MAX_GAP_US, 1, 2))
        return {
            "gap": gap,
            "cat": cat,
            "step": step[idx],
            "device": dev[idx],
            "start": prev_end[idx],
            "end": ts[idx],
            "late": late,
        }

    def gap_intervals(self, d: int, late: bool) -> tuple[np.ndarray, np.ndarray]:
        """Gaps between activities of one stream on device ``d`` whose next activity was
        launched late (``late``) or already queued and under KERNEL_WAIT_MAX_GAP_US."""
        g = self.idle_gaps
        m = (g["device"] == d) & (g["gap"] > 0)
        m &= g["late"] if late else (~g["late"] & (g["gap"] < KERNEL_WAIT_MAX_GAP_US))
        return merge_intervals(g["start"][m], g["end"][m])

    @cached_property
    def step_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """The selected steps as one sorted disjoint interval set."""
        return merge_intervals(self.step_starts.copy(), self.step_ends.copy())

    @cached_property
    def launch_tids(self) -> np.ndarray:
        """Thread ids (as in ``rt_tid``) that launch at least :data:`LAUNCH_THREAD_MIN_SHARE`
        of the GPU activities of the analysed steps, most launches first; the thread with the
        most runtime calls when nothing launches; empty without runtime calls. Only their host
        time, and what they wait on, can hold the GPU up: a DataLoader's pin-memory thread
        waiting on a lock does not."""
        m = (self.gpu_rt >= 0) & (self.gpu_step >= 0)
        if m.any():
            tids, counts = np.unique(self.rt_tid[self.gpu_rt[m]], return_counts=True)
            keep = counts >= LAUNCH_THREAD_MIN_SHARE * counts.sum()
            order = np.argsort(-counts[keep], kind="stable")
            return tids[keep][order]
        if self.rt_tid.size:
            tids, counts = np.unique(self.rt_tid, return_counts=True)
            return tids[[int(np.argmax(counts))]]
        return np.zeros(0, dtype=np.int64)

    @cached_property
    def launches_gpu_work(self) -> bool:
        """True when the analysed steps' GPU work has its launch calls in the trace (so the
        launching threads are known)."""
        return bool(((self.gpu_rt >= 0) & (self.gpu_step >= 0)).any())

    # -- masks over names -------------------------------------------------------------------

    @cached_property
    def kernel_launch_mask(self) -> np.ndarray:
        """Runtime calls that launch one kernel (not a graph replay, not a copy)."""
        return P.KERNEL_LAUNCH.mask(self.rt_name, self.names)

    @cached_property
    def sync_mask(self) -> np.ndarray:
        """Runtime calls that really make the host wait for the GPU: stream, device and event
        synchronisation, and blocking copies whose data goes to the host (``cudaMemcpy`` of a
        device-to-host copy; its ``hip`` twins). Async copies, ``cudaMemset`` and copies to the
        device return before the GPU is done, so they are not counted."""
        sync = P.SYNC_CALL.mask(self.rt_name, self.names)
        copy = P.BLOCKING_COPY.mask(self.rt_name, self.names)
        sync |= self.waited_copy_mask
        if copy.any():
            to_host_name = P.COPY_TO_HOST.mask(self.rt_name, self.names)
            gpu_to_host = P.COPY_TO_HOST.mask(self.gpu_name, self.names)
            has_gpu = np.zeros(self.rt_ts.size, dtype=bool)
            to_host = np.zeros(self.rt_ts.size, dtype=bool)
            m = self.gpu_rt >= 0
            has_gpu[self.gpu_rt[m]] = True
            to_host[self.gpu_rt[m & gpu_to_host]] = True
            # with its GPU copy: by the copy's direction; without: by the call's own name
            copy &= np.where(has_gpu, to_host, to_host_name)
        return sync | copy

    @cached_property
    def waited_copy_mask(self) -> np.ndarray:
        """Asynchronous copy calls (``cudaMemcpyAsync`` and its twins) that held the host until
        their copy to host memory was done: a copy into pageable memory is synchronous whatever
        the API's name (CUDA runtime API docs, "API synchronization behavior"), so ``.cpu()``,
        ``.tolist()``, ``print(tensor)`` and boolean indexing wait inside it for every queued
        kernel. A copy whose destination the trace names as pinned never counts; one whose
        destination it does not name counts when the copy ended inside the call and the call
        returned within :data:`RETURN_MAX_US` of it."""
        out = np.zeros(self.rt_ts.size, dtype=bool)
        m = (self.gpu_rt >= 0) & P.COPY_TO_HOST.mask(self.gpu_name, self.names)
        if not m.any():
            return out
        m &= ~P.PINNED_COPY.mask(self.gpu_name, self.names)
        rt = self.gpu_rt[m]
        launch = P.LAUNCH_CALL.mask(self.rt_name, self.names)[rt]
        blocking = P.BLOCKING_COPY.mask(self.rt_name, self.names)[rt]
        t0 = self.rt_ts[rt]
        t1 = t0 + self.rt_dur[rt]
        end = self.gpu_end[m]
        held = (end >= t0) & (end <= t1 + COPY_CLOCK_SKEW_US) & (t1 - end <= RETURN_MAX_US)
        out[rt[launch & ~blocking & held]] = True
        return out

    @cached_property
    def scalar_read_mask(self) -> np.ndarray:
        """cpu_ops that read one device value on the host (``_local_scalar_dense``; ``item`` in
        traces that lack it)."""
        m = P.SCALAR_READ.mask(self.op_name, self.names)
        return m if m.any() else P.ITEM.mask(self.op_name, self.names)

    @cached_property
    def waiting_read_mask(self) -> np.ndarray:
        """Scalar reads inside which a waiting runtime call ran on the same thread (the read
        really waited for the GPU; on a CPU tensor, or with the value already there, it did
        not)."""
        reads = self.scalar_read_mask
        out = np.zeros(reads.shape, dtype=bool)
        sync = np.nonzero(self.sync_mask)[0]
        if sync.size == 0 or not reads.any():
            return out
        for tid in np.unique(self.op_tid[reads]):
            s = np.sort(self.rt_ts[sync[self.rt_tid[sync] == tid]])
            if s.size == 0:
                continue
            r = np.nonzero(reads & (self.op_tid == tid))[0]
            j = np.searchsorted(s, self.op_ts[r], side="left")
            jj = np.minimum(j, s.size - 1)
            out[r] = (j < s.size) & (s[jj] <= self.op_ts[r] + self.op_dur[r])
        return out

    @cached_property
    def accelerator(self) -> str | None:
        """The name of an accelerator that is not a GPU whose events fill the trace (``"MTIA"``),
        None otherwise: its device activity is not read as GPU work, so a trace without GPU
        activity is not CPU-only then."""
        for cat, n in self.raw.categories.items():
            if n and isinstance(cat, str) and P.OTHER_ACCELERATOR_CATEGORY.matches(cat):
                return P.OTHER_ACCELERATOR_CATEGORY.group_name
        return None

    @cached_property
    def graph_kernel_mask(self) -> np.ndarray:
        """GPU activities launched by a CUDA/HIP graph replay (one launch for many kernels)."""
        out = np.zeros(self.gpu_ts.size, dtype=bool)
        m = self.gpu_rt >= 0
        if m.any():
            graph = P.GRAPH_LAUNCH.mask(self.rt_name, self.names)
            out[m] = graph[self.gpu_rt[m]]
        return out
