"""From the reader's columns to the numbers the rules judge: steps, GPU busy time and idle time
per step and device (HTA's definitions), launches, syncs, DataLoader time, op nesting and frames.

Everything is vectorised with NumPy over the compact columns of :class:`RawTrace`; the only Python
loops run over steps, devices, streams and threads, or over the ops of one thread for the Python
frame of each op (only when the trace has ``python_function`` events). Times in µs.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpuprobe.errors import InputError
from gpuprobe.trace import patterns as P
from gpuprobe.trace.kineto import GPU_KIND_KERNEL, GPU_KIND_MEMCPY, GPU_KIND_MEMSET, RawTrace
from gpuprobe.trace.model import IDLE_CAUSES, DeviceInfo, StepBreakdown, TraceSummary

__all__ = [
    "IDLE_CAUSES",
    "KERNEL_WAIT_MAX_GAP_US",
    "TraceContext",
    "intersect_intervals",
    "merge_intervals",
    "overlap",
    "parse_step_range",
    "subtract_intervals",
]

_LAYER_CALL_DEPTH = 4  # frames out from the user's frame searched for a module call; ours
KERNEL_WAIT_MAX_GAP_US = 30.0  # µs; HTA get_idle_time_breakdown consecutive_kernel_delay=30
# (documented there as ns, but compared with µs timestamps, so µs in effect)


def _arr(a: array, dtype: type) -> np.ndarray:
    return np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)


def merge_intervals(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [ts, end): sorted, disjoint (starts, ends). HTA merge_kernel_intervals."""
    if ts.size == 0:
        return ts, end
    order = np.argsort(ts, kind="stable")
    s, e = ts[order], end[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    last = np.empty(s.size, dtype=bool)
    last[:-1] = new[1:]
    last[-1] = True
    return s[new], run_end[last]


def overlap(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> float:
    """Total length of sorted disjoint intervals inside [lo, hi]."""
    i0 = int(np.searchsorted(ends, lo, side="right"))
    i1 = int(np.searchsorted(starts, hi, side="left"))
    if i1 <= i0:
        return 0.0
    s = np.clip(starts[i0:i1], lo, hi)
    e = np.clip(ends[i0:i1], lo, hi)
    return float(np.sum(e - s))


def _sweep(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], keep_b: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Segments covered by ``a`` and (``keep_b``) or not (``not keep_b``) by ``b``; both are
    sorted disjoint interval sets. One sort over the boundaries."""
    (a_s, a_e), (b_s, b_e) = a, b
    if a_s.size == 0:
        return a_s, a_e
    if b_s.size == 0:
        return (a_s[:0], a_e[:0]) if keep_b else (a_s, a_e)
    pos = np.concatenate([a_s, a_e, b_s, b_e])
    da = np.concatenate([np.ones(a_s.size), -np.ones(a_e.size), np.zeros(b_s.size + b_e.size)])
    db = np.concatenate([np.zeros(a_s.size + a_e.size), np.ones(b_s.size), -np.ones(b_e.size)])
    # at one position, ends before starts: touching intervals do not overlap
    order = np.lexsort((da + db, pos))
    pos, ca, cb = pos[order], np.cumsum(da[order]), np.cumsum(db[order])
    inside = (ca[:-1] > 0) & ((cb[:-1] > 0) if keep_b else (cb[:-1] <= 0))
    lo, hi = pos[:-1][inside], pos[1:][inside]
    keep = hi > lo
    return merge_intervals(lo[keep], hi[keep])


def intersect_intervals(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """a ∩ b for sorted disjoint interval sets (starts, ends)."""
    return _sweep(a, b, True)


def subtract_intervals(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """a ∖ b for sorted disjoint interval sets (starts, ends)."""
    return _sweep(a, b, False)


def _group_medians(group: np.ndarray, values: np.ndarray, n: int) -> list[float | None]:
    """Median of ``values`` per group id in [0, n) (None for an empty group)."""
    out: list[float | None] = [None] * n
    if group.size == 0:
        return out
    order = np.argsort(group, kind="stable")
    g, v = group[order], values[order]
    cuts = np.flatnonzero(np.diff(g)) + 1
    for ids, vals in zip(np.split(g, cuts), np.split(v, cuts), strict=True):
        out[int(ids[0])] = float(np.median(vals))
    return out


def parse_step_range(text: str) -> tuple[int, int]:
    """``"N..M"``, ``"N"``, ``"N.."`` or ``"..M"`` -> inclusive (N, M)."""
    t = text.strip()
    try:
        if ".." in t:
            a, _, b = t.partition("..")
            lo = int(a) if a.strip() else -(1 << 62)
            hi = int(b) if b.strip() else 1 << 62
        else:
            lo = hi = int(t)
    except ValueError:
        raise InputError(f"--steps {text!r}: expected N..M, e.g. --steps 10..19") from None
    if lo > hi:
        raise InputError(f"--steps {text!r}: the first step is after the last")
    return lo, hi


@dataclass(frozen=True)
class _Step:
    number: int | None
    start: float
    end: float


class TraceContext:
    """The trace as NumPy columns with each event's step, plus the per-step breakdowns."""

    def __init__(self, raw: RawTrace, steps: tuple[int, int] | None = None) -> None:
        self.raw = raw
        self.names = raw.names
        f8, i8 = np.float64, np.int64
        ip = np.dtype("l").type
        self.op_ts, self.op_dur = _arr(raw.op_ts, f8), _arr(raw.op_dur, f8)
        self.op_name, self.op_tid = _arr(raw.op_name, ip), _arr(raw.op_tid, ip)
        self.py_ts, self.py_dur = _arr(raw.py_ts, f8), _arr(raw.py_dur, f8)
        self.py_name, self.py_tid = _arr(raw.py_name, ip), _arr(raw.py_tid, ip)
        self.ann_ts, self.ann_dur = _arr(raw.ann_ts, f8), _arr(raw.ann_dur, f8)
        self.ann_name = _arr(raw.ann_name, ip)
        self.rt_ts, self.rt_dur = _arr(raw.rt_ts, f8), _arr(raw.rt_dur, f8)
        self.rt_name, self.rt_corr = _arr(raw.rt_name, ip), _arr(raw.rt_corr, i8)
        self.rt_tid = _arr(raw.rt_tid, ip)
        self.gpu_ts, self.gpu_dur = _arr(raw.gpu_ts, f8), _arr(raw.gpu_dur, f8)
        self.gpu_kind = _arr(raw.gpu_kind, np.int8)
        self.gpu_name, self.gpu_dev = _arr(raw.gpu_name, ip), _arr(raw.gpu_dev, ip)
        self.gpu_stream, self.gpu_corr = _arr(raw.gpu_stream, i8), _arr(raw.gpu_corr, i8)
        self.gpu_bytes = _arr(raw.gpu_bytes, f8)
        self.gpu_end = self.gpu_ts + self.gpu_dur
        self.has_gpu = self.gpu_ts.size > 0

        self.steps = self._select_steps(steps)
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
        self.breakdowns = self._breakdowns()

    # -- steps ------------------------------------------------------------------------------

    def _select_steps(self, wanted: tuple[int, int] | None) -> list[_Step]:
        raw = self.raw
        seen: dict[int, _Step] = {}
        for n, ts, dur in raw.steps:
            if n not in seen or dur > seen[n].end - seen[n].start:
                seen[n] = _Step(n, ts, ts + dur)
        steps = sorted(seen.values(), key=lambda s: s.start)
        if wanted is not None:
            if not steps:
                raise InputError(
                    f"{raw.path}: --steps was given but the trace has no ProfilerStep#N "
                    "annotations (profile with a schedule and call prof.step() each iteration)"
                )
            lo, hi = wanted
            chosen = [s for s in steps if s.number is not None and lo <= s.number <= hi]
            if not chosen:
                have = ", ".join(str(s.number) for s in steps[:12])
                raise InputError(f"{raw.path}: no profiled step in --steps range; steps: {have}")
            return chosen
        if steps:
            return steps
        pairs = [
            (self.op_ts, self.op_dur),
            (self.rt_ts, self.rt_dur),
            (self.gpu_ts, self.gpu_dur),
            (self.ann_ts, self.ann_dur),
            (self.py_ts, self.py_dur),
        ]
        first = min((float(a.min()) for a, _ in pairs if a.size), default=0.0)
        last = max((float((a + d).max()) for a, d in pairs if a.size), default=0.0)
        return [_Step(None, first, last)]

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
    def merged_all(self) -> tuple[np.ndarray, np.ndarray]:
        """Union of every GPU activity on any device."""
        return merge_intervals(self.gpu_ts, self.gpu_end)

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

    # -- why the GPU was idle -----------------------------------------------------------------

    @cached_property
    def step_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """The selected steps as one sorted disjoint interval set."""
        return merge_intervals(self.step_starts.copy(), self.step_ends.copy())

    @cached_property
    def dataloader_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Union of the DataLoader ``__next__`` spans (host time)."""
        dl = P.DATALOADER_NEXT.mask(self.ann_name, self.names)
        return merge_intervals(self.ann_ts[dl], self.ann_ts[dl] + self.ann_dur[dl])

    @cached_property
    def capture_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Union of the stream captures into a CUDA/HIP graph: on each thread, from a
        ``…StreamBeginCapture`` call to the end of the next ``…StreamEndCapture``. Kernels launched
        in between are recorded into the graph, not run, so the GPU idles by design."""
        begin = P.GRAPH_CAPTURE_BEGIN.mask(self.rt_name, self.names)
        end = P.GRAPH_CAPTURE_END.mask(self.rt_name, self.names)
        lo: list[float] = []
        hi: list[float] = []
        for tid in np.unique(self.rt_tid[begin]):
            b = np.sort(self.rt_ts[begin & (self.rt_tid == tid)])
            e_idx = np.nonzero(end & (self.rt_tid == tid))[0]
            e_end = np.sort(self.rt_ts[e_idx] + self.rt_dur[e_idx])
            k = np.searchsorted(e_end, b, side="left")
            ok = k < e_end.size
            lo += b[ok].tolist()
            hi += e_end[k[ok]].tolist()
        return merge_intervals(np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64))

    @cached_property
    def capture_share(self) -> float:
        """Share of the selected steps' time spent capturing graphs (0 without captures)."""
        s, e = self.capture_intervals
        if s.size == 0:
            return 0.0
        ws, we = self.step_windows
        total = float((we - ws).sum())
        inside = sum(overlap(s, e, float(a), float(b)) for a, b in zip(ws, we, strict=True))
        return inside / total if total > 0 else 0.0

    @cached_property
    def captured_launches(self) -> tuple[int, int]:
        """Kernel launch calls in the selected steps: (made while capturing a graph, all)."""
        m = self.kernel_launch_mask & (self.rt_step >= 0)
        s, e = self.capture_intervals
        if s.size == 0:
            return 0, int(m.sum())
        ts = self.rt_ts[m]
        k = np.searchsorted(s, ts, side="right") - 1
        kk = np.maximum(k, 0)
        return int(((k >= 0) & (ts <= e[kk])).sum()), int(m.sum())

    def _sync_intervals(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """For device ``d``: each waiting host call from its start to the start of the next GPU
        activity after it returned (the wait inside it and the refill after it).

        The refill is what the sync costs only up to how long it made the host wait: had the
        host not waited W, it would have done the same host work W earlier, so of a gap H
        after the return min(H, W) is the sync's and the rest has another cause (the host
        preparing the next input, say). A call during which device ``d`` did nothing waited
        for nothing there (W = 0); otherwise W is the call's duration."""
        m = self.sync_mask
        if not m.any():
            return np.zeros(0), np.zeros(0)
        ts = self.rt_ts[m]
        ret = ts + self.rt_dur[m]
        starts, ends = self.merged_by_device[d]
        if starts.size == 0:
            return merge_intervals(ts, ret)
        k = np.searchsorted(starts, ret, side="left")  # first activity starting at/after return
        refill = np.where(k < starts.size, starts[np.minimum(k, starts.size - 1)], ret)
        i = np.searchsorted(ends, ts, side="right")  # first activity ending after the call began
        drained = (i < starts.size) & (starts[np.minimum(i, starts.size - 1)] < ret)
        wait = np.where(drained, ret - ts, 0.0)
        return merge_intervals(ts, ret + np.clip(refill - ret, 0.0, wait))

    def _edge_intervals(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """For device ``d``: per step, from its start to its first GPU activity and from its
        last GPU activity to its end (the whole step when the GPU did nothing in it)."""
        starts, ends = self.merged_by_device[d]
        lo: list[float] = []
        hi: list[float] = []
        for st in self.steps:
            i0 = int(np.searchsorted(ends, st.start, side="right"))
            i1 = int(np.searchsorted(starts, st.end, side="left"))
            if i1 <= i0:
                lo.append(st.start)
                hi.append(st.end)
                continue
            first, last = max(float(starts[i0]), st.start), min(float(ends[i1 - 1]), st.end)
            lo += [st.start, last]
            hi += [first, st.end]
        return merge_intervals(np.array(lo), np.array(hi))

    def _gap_intervals(self, d: int, late: bool) -> tuple[np.ndarray, np.ndarray]:
        """Gaps between activities of one stream on device ``d`` whose next activity was
        launched late (``late``) or already queued and under KERNEL_WAIT_MAX_GAP_US."""
        g = self.idle_gaps
        m = (g["device"] == d) & (g["gap"] > 0)
        m &= g["late"] if late else (~g["late"] & (g["gap"] < KERNEL_WAIT_MAX_GAP_US))
        return merge_intervals(g["start"][m], g["end"][m])

    @cached_property
    def idle_by_cause(self) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
        """Per device, the GPU's idle time inside the selected steps split by cause
        (:data:`IDLE_CAUSES`), each instant given to the first cause that covers it. Graph
        capture is host work that queues nothing to run: its time is ``host``, not ``sync``."""
        out: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        for d in self.devices:
            rest = subtract_intervals(self.step_windows, self.merged_by_device[d])
            capture = self.capture_intervals
            causes = {
                "input": self.dataloader_intervals,
                # a refill that runs into a graph capture stops there: the kernels launched
                # while capturing are recorded, not run, so that idle time is the capture's
                "sync": subtract_intervals(self._sync_intervals(d), capture),
                "host": merge_intervals(
                    *(np.concatenate(p) for p in zip(self._edge_intervals(d), capture, strict=True))
                ),
                "launch": self._gap_intervals(d, True),
                "short": self._gap_intervals(d, False),
            }
            parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
            for name, iv in causes.items():
                parts[name] = intersect_intervals(rest, iv)
                rest = subtract_intervals(rest, iv)
            parts["other"] = rest
            out[d] = parts
        return out

    @cached_property
    def idle_cause_per_step(self) -> dict[int, np.ndarray]:
        """Per device, an array (steps × causes) of idle µs, causes in :data:`IDLE_CAUSES`."""
        out = {}
        for d, parts in self.idle_by_cause.items():
            table = np.zeros((len(self.steps), len(IDLE_CAUSES)))
            for j, name in enumerate(IDLE_CAUSES):
                s, e = parts[name]
                for i, st in enumerate(self.steps):
                    table[i, j] = overlap(s, e, st.start, st.end)
            out[d] = table
        return out

    def idle_of_cause(self, cause: str) -> np.ndarray:
        """Idle µs per step given to ``cause``, on the device where it is largest (zeros
        without GPU activity)."""
        j = IDLE_CAUSES.index(cause)
        out = np.zeros(len(self.steps))
        for table in self.idle_cause_per_step.values():
            out = np.maximum(out, table[:, j])
        return out

    def _breakdowns(self) -> list[StepBreakdown]:
        out: list[StepBreakdown] = []
        dur = self.step_durations
        n = len(self.steps)
        ops_per = np.bincount(self.op_step[self.op_step >= 0], minlength=n)
        dl = P.DATALOADER_NEXT.mask(self.ann_name, self.names) & (self.ann_step >= 0)
        dl_per = np.bincount(self.ann_step[dl], weights=self.ann_dur[dl], minlength=n)
        sync = self.sync_mask & (self.rt_step >= 0)
        sync_per = np.bincount(self.rt_step[sync], minlength=n)
        items = self.scalar_read_mask & (self.op_step >= 0)
        items_per = np.bincount(self.op_step[items], minlength=n)
        gpu = self._gpu_per_step() if self.has_gpu else None
        causes = self.idle_cause_per_step if gpu else {}
        for i, st in enumerate(self.steps):
            common = dict(
                step=st.number,
                start_us=st.start + self.raw.time_base,
                duration_us=float(dur[i]),
                dataloader_us=float(dl_per[i]),
                syncs=int(sync_per[i]),
                items=int(items_per[i]),
                cpu_ops=int(ops_per[i]),
            )
            if gpu is None:
                out.append(StepBreakdown(**common))  # type: ignore[arg-type]
                continue
            for k, d in enumerate(self.devices):
                starts, ends = self.merged_by_device[d]
                busy = overlap(starts, ends, st.start, st.end)
                length = st.end - st.start
                g = i * len(self.devices) + k
                out.append(
                    StepBreakdown(
                        **common,  # type: ignore[arg-type]
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

    def _gpu_per_step(self) -> dict:
        """Per (step, device) group g = step * n_devices + device index: idle waits by category,
        activity counts by kind, median kernel and median launch duration. One pass each."""
        nd = len(self.devices)
        groups = len(self.steps) * nd
        dev_index = {d: k for k, d in enumerate(self.devices)}
        to_idx = np.vectorize(dev_index.__getitem__, otypes=[np.int64])

        def group_of(step: np.ndarray, dev: np.ndarray) -> np.ndarray:
            return step * nd + (to_idx(dev) if dev.size else dev)

        g = self.idle_gaps
        waits = np.zeros((groups, 3))
        if g["gap"].size:
            gi = group_of(g["step"], g["device"])
            np.add.at(waits, (gi, g["cat"]), g["gap"])
        sel = self.gpu_step >= 0
        gid = group_of(self.gpu_step[sel], self.gpu_dev[sel])
        kinds = np.zeros((groups, 3), dtype=np.int64)
        np.add.at(kinds, (gid, self.gpu_kind[sel].astype(np.int64)), 1)
        kern = self.gpu_kind[sel] == GPU_KIND_KERNEL
        kernel_median = _group_medians(gid[kern], self.gpu_dur[sel][kern], groups)
        rt = self.gpu_rt[sel][kern]
        has_rt = rt >= 0
        # launch calls proper (a graph replay launches many kernels with one call)
        has_rt[has_rt] = self.kernel_launch_mask[rt[has_rt]]
        launch_median = _group_medians(gid[kern][has_rt], self.rt_dur[rt[has_rt]], groups)
        return {
            "waits": waits,
            "kinds": kinds,
            "kernel_median": kernel_median,
            "launch_median": launch_median,
        }

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
    def graph_kernel_mask(self) -> np.ndarray:
        """GPU activities launched by a CUDA/HIP graph replay (one launch for many kernels)."""
        out = np.zeros(self.gpu_ts.size, dtype=bool)
        m = self.gpu_rt >= 0
        if m.any():
            graph = P.GRAPH_LAUNCH.mask(self.rt_name, self.names)
            out[m] = graph[self.gpu_rt[m]]
        return out

    # -- nesting and frames -----------------------------------------------------------------

    @cached_property
    def op_top(self) -> np.ndarray:
        """True for cpu_ops not nested in another cpu_op of the same thread."""
        top = np.zeros(self.op_ts.size, dtype=bool)
        end = self.op_ts + self.op_dur
        for tid in np.unique(self.op_tid):
            idx = np.nonzero(self.op_tid == tid)[0]
            order = idx[np.lexsort((-self.op_dur[idx], self.op_ts[idx]))]
            run = np.maximum.accumulate(end[order])
            t = np.ones(order.size, dtype=bool)
            t[1:] = self.op_ts[order][1:] >= run[:-1]
            top[order] = t
        return top

    @cached_property
    def _py_innermost(self) -> np.ndarray:
        """Index of the innermost source-line ``python_function`` event around each top-level
        cpu_op (-1 when unknown)."""
        frame = np.full(self.op_ts.size, -1, dtype=np.int64)
        if self.py_ts.size == 0:
            return frame
        builtin = P.BUILTIN_FRAME.mask(self.py_name, self.names)
        top = self.op_top
        for tid in np.unique(self.op_tid[top]):
            fi = np.nonzero((self.py_tid == tid) & ~builtin)[0]
            if fi.size == 0:
                continue
            oi = np.nonzero(top & (self.op_tid == tid))[0]
            ts = np.concatenate([self.py_ts[fi], self.op_ts[oi]])
            end = np.concatenate(
                [self.py_ts[fi] + self.py_dur[fi], self.op_ts[oi] + self.op_dur[oi]]
            )
            kind = np.concatenate([np.zeros(fi.size, np.int8), np.ones(oi.size, np.int8)])
            ref = np.concatenate([fi, oi])
            order = np.lexsort((kind, -end, ts))
            stack_end: list[float] = []
            stack_ref: list[int] = []
            for t, e, k, r in zip(
                ts[order].tolist(),
                end[order].tolist(),
                kind[order].tolist(),
                ref[order].tolist(),
                strict=True,
            ):
                while stack_end and stack_end[-1] <= t:
                    stack_end.pop()
                    stack_ref.pop()
                if k == 0:
                    stack_end.append(e)
                    stack_ref.append(r)
                elif stack_ref:
                    frame[r] = stack_ref[-1]
        return frame

    @cached_property
    def _py_parent(self) -> np.ndarray:
        """For each ``python_function`` event, the index of the one enclosing it on its thread
        (-1 at the outermost level)."""
        parent = np.full(self.py_ts.size, -1, dtype=np.int64)
        end = self.py_ts + self.py_dur
        for tid in np.unique(self.py_tid):
            idx = np.nonzero(self.py_tid == tid)[0]
            order = idx[np.lexsort((-end[idx], self.py_ts[idx]))]
            stack_end: list[float] = []
            stack_ref: list[int] = []
            for i, t, e in zip(
                order.tolist(), self.py_ts[order].tolist(), end[order].tolist(), strict=True
            ):
                while stack_end and stack_end[-1] <= t:
                    stack_end.pop()
                    stack_ref.pop()
                if stack_ref:
                    parent[i] = stack_ref[-1]
                stack_end.append(e)
                stack_ref.append(i)
        return parent

    @cached_property
    def _name_ids(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def _intern(self, name: str) -> int:
        """The id of ``name`` in ``names`` (frames split out of a call stack are added)."""
        i = self._name_ids.get(name)
        if i is None:
            i = self._name_ids[name] = len(self.names)
            self.names.append(name)
        return i

    def _judge_frames(self, frames: list[str]) -> tuple[int, int, bool, int]:
        """From a stack, innermost first: (innermost frame id, the user's first frame id or -1,
        whether a module call lies between the op and the user's frame, and the position in
        ``frames`` of the module's forward the user's frame runs in, or -1: the frame just
        inside a module call at most :data:`_LAYER_CALL_DEPTH` frames out from the user's)."""
        user = -1
        under_module = False
        pos = -1
        for p, f in enumerate(frames):
            if P.MODULE_CALL_FRAME.matches(f):
                under_module = True
            if not P.USER_FRAME_EXCLUDE.matches(f) and not P.BUILTIN_FRAME.matches(f):
                user = self._intern(f)
                pos = p
                break
        inner = self._intern(frames[0]) if frames else -1
        layer = -1
        if pos >= 0:
            for q in range(pos, min(pos + _LAYER_CALL_DEPTH, len(frames) - 1)):
                if P.MODULE_CALL_FRAME.matches(frames[q + 1]):
                    layer = q
                    break
        return inner, user, under_module, layer

    @cached_property
    def _frames(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:attr:`op_frames` and :attr:`op_layer_call` in one walk over each op's stack."""
        n = self.op_ts.size
        inner = np.full(n, -1, dtype=np.int64)
        user = np.full(n, -1, dtype=np.int64)
        under = np.zeros(n, dtype=bool)
        layer = np.full(n, -1, dtype=np.int64)
        cache: dict[int, tuple[int, int, bool, int]] = {}
        if self.py_ts.size:
            py = self._py_innermost
            parent = self._py_parent
            for i in np.nonzero(py >= 0)[0].tolist():
                k = int(py[i])
                got = cache.get(k)
                if got is None:
                    chain: list[str] = []
                    events: list[int] = []
                    j = k
                    while j >= 0 and len(chain) < 256:
                        chain.append(self.names[int(self.py_name[j])])
                        events.append(j)
                        j = int(parent[j])
                    a, b, c, pos = self._judge_frames(chain)
                    got = cache[k] = (a, b, c, events[pos] if pos >= 0 else -1)
                inner[i], user[i], under[i], layer[i] = got
        else:
            stack = _arr(self.raw.op_stack, np.dtype("l").type)
            if stack.size == n and (stack >= 0).any():
                for i in np.nonzero((stack >= 0) & self.op_top)[0].tolist():
                    k = int(stack[i])
                    got = cache.get(k)
                    if got is None:
                        frames = [f.strip() for f in self.names[k].split(";") if f.strip()]
                        got = cache[k] = (*self._judge_frames(frames)[:3], -1)
                    inner[i], user[i], under[i], _ = got
        return inner, user, under, layer

    @property
    def op_frames(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each top-level cpu_op (-1/False elsewhere or when unknown): the name id of its
        innermost Python frame, the name id of the first frame in the user's own code (outside
        site-packages, the standard library and torch), and whether a module call
        (``nn.Module.__call__``) lies between the two: then the op is a layer of a model, called
        once per layer, not the iteration of a loop. From ``python_function`` events
        (with_stack, PyTorch >= 1.10) or the ``Call stack`` argument (PyTorch <= 1.9)."""
        return self._frames[:3]

    @property
    def op_layer_call(self) -> np.ndarray:
        """For each top-level cpu_op whose user frame runs inside a module's forward (a module
        call a few frames out from it): the index of that forward's ``python_function`` event,
        one per call of the module; else -1. The profiler writes library paths relative to
        ``sys.path`` (``transformers/models/...``), so a model's own ``forward`` can look like
        the user's code: its ops repeat once per layer, and only repeats inside one call of it
        are a loop. -1 everywhere without ``python_function`` events."""
        return self._frames[3]

    @property
    def op_user_frame(self) -> np.ndarray:
        """Name id of the first frame in the user's own code around each top-level op (-1)."""
        return self.op_frames[1]

    @property
    def has_stack(self) -> bool:
        """True when the trace has Python frames for its ops (with_stack=True)."""
        return bool((self.op_frames[0] >= 0).any())

    # -- summary ----------------------------------------------------------------------------

    def summary(self, read_seconds: float, analyse_seconds: float) -> TraceSummary:
        """The whole-trace record, with HTA-style GPU fractions over the GPU span."""
        raw = self.raw
        busy_frac = idle_frac = host = kern = other = None
        gpu_span = None
        sel = self.gpu_step >= 0
        if self.has_gpu and sel.any():
            span = busy = 0.0
            for d in self.devices:
                m = sel & (self.gpu_dev == d)
                if not m.any():
                    continue
                s, e = merge_intervals(self.gpu_ts[m], self.gpu_end[m])
                span += float(e[-1] - s[0])
                busy += float(np.sum(e - s))
            gpu_span = span
            if span > 0:
                busy_frac = busy / span
                idle_frac = 1.0 - busy_frac
            g = self.idle_gaps
            waits = np.bincount(g["cat"], weights=g["gap"], minlength=3)
            total = float(waits.sum())
            if total > 0:
                host, kern, other = (float(w / total) for w in waits)
        props = {p.get("id", i): p for i, p in enumerate(raw.device_properties)}
        devices = []
        for d in self.devices or sorted(props):
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
            steps=tuple(s.number for s in self.steps if s.number is not None),
            devices=tuple(devices),
            has_gpu=self.has_gpu,
            with_stack=bool(header.get("with_stack")) or self.py_ts.size > 0,
            record_shapes=bool(header.get("record_shapes")) or bool(raw.shaped),
            profile_memory=bool(header.get("profile_memory")) or raw.memory_events > 0,
            cpu_ops=int(self.op_ts.size),
            gpu_activities=int(self.gpu_ts.size),
            span_us=float(self.step_durations.sum()),
            gpu_span_us=gpu_span,
            gpu_busy_fraction=busy_frac,
            gpu_idle_fraction=idle_frac,
            host_wait_fraction=host,
            kernel_wait_fraction=kern,
            other_wait_fraction=other,
            read_seconds=read_seconds,
            analyse_seconds=analyse_seconds,
        )


def _opt_int(x: object) -> int | None:
    try:
        return int(x)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
