"""The legacy autograd-profiler export (``torch.autograd.profiler.profile(...)
.export_chrome_trace()``, PyTorch <= 1.7, and ``use_kineto=False`` / ``profiler_legacy`` since),
read beside Kineto's format by :mod:`.kineto`.

That exporter writes a bare JSON list (torch/autograd/profiler.py, ``EventList.
export_chrome_trace``, PyTorch 1.0-1.8), each CPU op a complete event without a category::

    {"name": "aten::mm", "ph": "X", "ts": 105.7, "dur": 33.2, "tid": 0,
     "pid": "CPU functions", "args": {}}

and with ``use_cuda=True`` (up to 1.8) each op's GPU time as a flow ``s`` (on the op) and ``f``
(category ``cpu_to_cuda``) and a complete event on ``"pid": "CUDA functions"``, ``"tid"`` the
device index. That GPU time is not a kernel: it is
the span between two CUDA events the profiler recorded on the stream when the op began and
ended, named like the op. An event completes when the GPU has done the work queued before it, so
nested ops (``aten::conv2d`` > ``aten::convolution`` > ``aten::cudnn_convolution``) each have a
span, and an op that queues nothing on an idle GPU spans its own CPU time: the spans' union is
not GPU busy time (on a ResNet50 step it covers the whole window). What a span does prove is
the GPU's backlog: its start event completing after the op began means the GPU was busy with
earlier work until then, its end event completing after the op ended means busy until then.
The reader keeps those stretches (:func:`busy_pieces`), each instant once: GPU time the trace
proves, a lower bound (a GPU that keeps up with the host shows little).
PyTorch >= 1.9 writes the ``s`` flows only (``"cat": "cpu_to_cuda"``): the host
launched GPU work whose time is not in the file. Steps (``ProfilerStep#N``) exist only where the
program wrapped its loop in ``record_function`` itself. Times in µs since profiling began.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

__all__ = [
    "LEGACY_CPU_PIDS",
    "LEGACY_FLOW_PREFIX",
    "LEGACY_GPU_PIDS",
    "LEGACY_STREAM",
    "busy_pieces",
    "own_pieces",
]

# the "pid" the exporter gives each kind of event: Python's EventList.export_chrome_trace writes
# "CPU functions" / "CUDA functions", the C++ RecordProfile (torch/csrc/autograd/profiler.cpp)
# "CPU Functions" / "CUDA Functions"
LEGACY_CPU_PIDS = frozenset({"CPU functions", "CPU Functions"})
LEGACY_GPU_PIDS = frozenset({"CUDA functions", "CUDA Functions"})
LEGACY_FLOW_PREFIX = "cpu_to_"  # the category of its launch flows: cpu_to_cuda, cpu_to_xpu, ...
LEGACY_STREAM = 0  # the stream given to its GPU spans: the file names none (the op's current one)


def busy_pieces(
    ts: np.ndarray, end: np.ndarray, dev: np.ndarray, op_ts: np.ndarray, op_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GPU time the spans prove busy, each instant once: (index of the span, start, end)
    per piece. For a span [a, b] of an op that ran [s, e] on the host: [s, a] when a > s (the
    start event waited for earlier work) and [e, b] when b > e (the end event did), as the GPU
    runs its queue without a pause (it had the work before s, resp. e). Spans without their op
    (NaN) prove nothing. Overlaps are given to one span each by :func:`own_pieces`."""
    with np.errstate(invalid="ignore"):
        head = np.nonzero(ts > op_ts)[0]
        tail = np.nonzero(end > op_end)[0]
    which = np.concatenate([head, tail])
    lo = np.concatenate([op_ts[head], op_end[tail]])
    hi = np.concatenate([ts[head], end[tail]])
    k, plo, phi = own_pieces(lo, hi, dev[which])
    return which[k], plo, phi


def own_pieces(
    ts: np.ndarray, end: np.ndarray, dev: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each GPU span's own time, the parts no span nested in it covers: (index of the span,
    start, end) per piece, by device and start. Together the pieces are the union of the spans,
    each instant once, under the innermost op that covers it (as an op's self time is its time
    less its children's).

    Per device, spans are taken by start, end latest first and file order (the exporter writes
    ops by CPU start, so a nested op comes after the op around it: of equal spans the last is
    innermost) with a stack of the spans open at that instant. A span that ends past the one
    around it (ops of two threads on one stream) is cut there and its rest taken again later."""
    idx: list[int] = []
    lo: list[float] = []
    hi: list[float] = []

    def piece(i: int, a: float, b: float) -> None:
        if b > a:
            idx.append(i)
            lo.append(a)
            hi.append(b)

    t_, e_ = ts.tolist(), end.tolist()
    order = np.lexsort((np.arange(ts.size), dev)).tolist()  # by device, file order within
    d_ = dev[order].tolist() if ts.size else []
    start = 0
    while start < len(order):
        stop = start
        while stop < len(order) and d_[stop] == d_[start]:
            stop += 1
        # (start, -end, file position, span): popped innermost-last as described above
        todo = [(t_[i], -e_[i], k, i) for k, i in enumerate(order[start:stop])]
        heapq.heapify(todo)
        stack: list[tuple[float, int]] = []  # (end, span) of the open spans, innermost last
        cursor = 0.0  # where the innermost open span's current piece starts
        while todo or stack:
            s = todo[0][0] if todo else math.inf
            while stack and stack[-1][0] <= s:  # the open spans that end by s
                e, i = stack.pop()
                piece(i, cursor, e)
                cursor = max(cursor, e)
            if not todo:
                break
            s, neg_e, k, i = heapq.heappop(todo)
            e = -neg_e
            if stack:
                piece(stack[-1][1], cursor, s)
                if e > stack[-1][0]:  # ends past the span around it: the rest comes later
                    heapq.heappush(todo, (stack[-1][0], -e, k, i))
                    e = stack[-1][0]
            stack.append((e, i))
            cursor = s
        start = stop
    return np.array(idx, dtype=np.int64), np.array(lo, dtype=np.float64), np.array(hi)
