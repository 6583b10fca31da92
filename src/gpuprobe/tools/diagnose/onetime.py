"""One-time costs: runtime calls far longer than the trace's typical launch that do not recur
(CUDA context creation, module and library loads, cuDNN/cuBLAS handle creation, lazy kernel
loading, autotuning, the caching allocator's first growth), and the leading profiled steps they
make into warm-up. Functions of a trace's
:class:`~gpuprobe.tools.diagnose.columns.TraceColumns`, cached in
:class:`~gpuprobe.tools.diagnose.analysis.TraceContext`. Times in µs.

A call is a candidate when it lasts at least :data:`ONE_TIME_MIN_US` and
:data:`ONE_TIME_FACTOR` times the trace's typical kernel launch (the first quartile of the launch
calls: in a cold trace most launches are slow, and the median with them), and it is not a copy, a memset
or a call that waits for the GPU (those are judged by the copy and sync rules). It is one-time
unless its kind recurs: the same call launching the same kernel (or, for other calls, the same
call) is a candidate in two or more profiled steps, or more than :data:`ONE_TIME_MAX_REPEATS`
times in a trace without steps. A trace without steps that creates the CUDA context (a long
context call among its first :data:`CONTEXT_FIRST_CALLS`) is a cold start as a whole: its long
set-up calls (allocations, releases, creations, loads) are one-time however often they come.
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.intervals import merge_intervals
from gpuprobe.tools.diagnose.steps import Step

__all__ = [
    "COLD_TRACE_FRACTION",
    "CONTEXT_FIRST_CALLS",
    "FIRST_CALL_FACTOR",
    "ONE_TIME_FACTOR",
    "ONE_TIME_MAX_REPEATS",
    "ONE_TIME_MIN_US",
    "TYPICAL_LAUNCH_QUANTILE",
    "WARMUP_STEP_FACTOR",
    "context_calls",
    "first_call_spans",
    "first_calls",
    "one_time_calls",
    "typical_launch_us",
    "warmup_steps",
]

ONE_TIME_MIN_US = 1000.0  # µs; a launch path costs ~5-50 µs (docs/experiments.md#e8, HTA
# launch stats); a call of 1 ms or more is a load, a handle creation or an allocation; ours
ONE_TIME_FACTOR = 100.0  # × the trace's typical kernel launch call; ours
TYPICAL_LAUNCH_QUANTILE = 0.25  # of the launch calls' durations taken as the typical launch; ours
ONE_TIME_MAX_REPEATS = 3  # candidates of one kind in a trace without steps past which the
# kind recurs (a periodic cost of the workload, not a start-up); ours
CONTEXT_FIRST_CALLS = 5  # runtime calls at a trace's start among which a long context call
# means the trace holds the process's CUDA start-up; ours
COLD_TRACE_FRACTION = 0.5  # of a trace without steps in one-time start-up past which it is a cold
# first pass: its steady-state verdicts are shown as information, not warnings; ours
FIRST_CALL_FACTOR = 10.0  # × the op's longest later call (a recurring long call, an input copy
# each step among small ones, is as long as the first and keeps it steady): a first
# call of an op this much slower than every later one, and ONE_TIME_MIN_US or more, did a one-time
# set-up (lazy initialisation, a first dispatch, a kernel's first load) however often the op runs
# afterwards; ours
WARMUP_STEP_FACTOR = 2.0  # × the median duration of the later steps: a leading step with
# one-time calls that is this much longer is a warm-up step; ours


def typical_launch_us(ctx: TraceColumns) -> float:
    """The :data:`TYPICAL_LAUNCH_QUANTILE` of the kernel launch calls' durations (of every
    runtime call's in a trace without launches; 0 without runtime calls)."""
    m = ctx.kernel_launch_mask
    d = ctx.rt_dur[m] if m.any() else ctx.rt_dur
    return float(np.quantile(d, TYPICAL_LAUNCH_QUANTILE)) if d.size else 0.0


def one_time_calls(ctx: TraceColumns) -> np.ndarray:
    """Indices into the runtime columns of the one-time calls (sorted by start), over the whole
    trace (the steps' selection does not change what is one-time)."""
    if ctx.rt_ts.size == 0:
        return np.zeros(0, dtype=np.int64)
    limit = max(ONE_TIME_MIN_US, ONE_TIME_FACTOR * typical_launch_us(ctx))
    excluded = (
        ctx.sync_mask
        | P.NOT_ONE_TIME_CALL.mask(ctx.rt_name, ctx.names)
        | P.GRAPH_CAPTURE_BEGIN.mask(ctx.rt_name, ctx.names)
        | P.GRAPH_CAPTURE_END.mask(ctx.rt_name, ctx.names)
    )
    cand = np.nonzero((ctx.rt_dur >= limit) & ~excluded)[0]
    if cand.size == 0:
        return cand.astype(np.int64)
    # the kind of a call: a launch by the kernel it launched, any other call by its name
    kernel_of = np.full(ctx.rt_ts.size, -1, dtype=np.int64)
    m = ctx.gpu_rt >= 0
    kernel_of[ctx.gpu_rt[m]] = ctx.gpu_name[m]
    cold = context_calls(ctx, cand).size > 0
    setup = P.SETUP_CALL.mask(ctx.rt_name[cand], ctx.names)
    kinds = ctx.rt_name[cand].astype(np.int64) * (len(ctx.names) + 1) + (kernel_of[cand] + 1)
    raw_steps = sorted({(n, ts) for n, ts, _ in ctx.raw.steps})
    starts = np.array([ts for _, ts in raw_steps], dtype=np.float64)
    keep = np.ones(cand.size, dtype=bool)
    for k in np.unique(kinds):
        same = kinds == k
        if starts.size >= 2:
            step = np.searchsorted(starts, ctx.rt_ts[cand[same]], side="right") - 1
            recurs = np.unique(step[step >= 0]).size >= 2
        elif cold and setup[same].all():
            recurs = False
        else:
            recurs = int(same.sum()) > ONE_TIME_MAX_REPEATS
        if recurs:
            keep[same] = False
    out = cand[keep]
    return out[np.argsort(ctx.rt_ts[out], kind="stable")].astype(np.int64)


def first_calls(ctx: TraceColumns) -> np.ndarray:
    """Indices into the op columns (sorted by start) of the first calls that are one-time: an
    op's first call on its thread lasting :data:`ONE_TIME_MIN_US` or more and
    :data:`FIRST_CALL_FACTOR` times its longest later call there (two or more of them), not
    spent for the most part in copies or waits for the GPU, and (in a trace of one step or
    none) over before the first GPU activity; e.g. a first ``aten::mul_`` of 2.7 ms whose later
    calls take 20 µs."""
    n = ctx.op_ts.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    key = ctx.op_name.astype(np.int64) * (int(ctx.op_tid.max()) + 1) + ctx.op_tid
    order = np.lexsort((ctx.op_ts, key))
    k = key[order]
    first = np.ones(n, dtype=bool)
    first[1:] = k[1:] != k[:-1]
    heads = order[first]
    counts = np.diff(np.append(np.nonzero(first)[0], n))
    # a compiled region's runs and compiling are compiled-regions' to judge
    compiled = P.COMPILED_REGION.mask(ctx.op_name, ctx.names) | P.COMPILE_WORK.mask(
        ctx.op_name, ctx.names
    )
    cand = np.nonzero((ctx.op_dur[heads] >= ONE_TIME_MIN_US) & (counts >= 3) & ~compiled[heads])[0]
    out = []
    starts = np.nonzero(first)[0]
    # a first call spent copying or waiting for the GPU is the copy or sync rules' to judge
    # (one step's input copy looks like a first call when one step is profiled)
    busy = np.nonzero(ctx.sync_mask | P.NOT_ONE_TIME_CALL.mask(ctx.rt_name, ctx.names))[0]
    # with one step (or none) a call of each step looks like a first call: there only the
    # calls before the trace's first GPU activity (nothing launched yet) are start-up
    one_window = sum(st.number is not None for st in ctx.steps) < 2
    first_gpu = float(ctx.gpu_ts.min()) if ctx.gpu_ts.size else np.inf
    for c in cand.tolist():
        later = ctx.op_dur[order[starts[c] + 1 : starts[c] + counts[c]]]
        i = int(heads[c])
        if ctx.op_dur[i] < FIRST_CALL_FACTOR * max(float(later.max()), 1e-3):
            continue
        t0, t1 = ctx.op_ts[i], ctx.op_ts[i] + ctx.op_dur[i]
        if one_window and t1 > first_gpu:
            continue
        inside = busy[(ctx.rt_tid[busy] == ctx.op_tid[i]) & (ctx.rt_ts[busy] >= t0)]
        inside = inside[ctx.rt_ts[inside] + ctx.rt_dur[inside] <= t1]
        if float(ctx.rt_dur[inside].sum()) < 0.5 * (t1 - t0):
            out.append(i)
    idx = np.array(out, dtype=np.int64)
    return idx[np.argsort(ctx.op_ts[idx], kind="stable")]


def first_call_spans(ctx: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """The spans of the one-time first calls (:func:`first_calls`), merged (a first call
    inside another once)."""
    idx = first_calls(ctx)
    return merge_intervals(ctx.op_ts[idx], ctx.op_ts[idx] + ctx.op_dur[idx])


def context_calls(ctx: TraceColumns, calls: np.ndarray) -> np.ndarray:
    """Those of ``calls`` (indices of long runtime calls) that create the CUDA context: a
    context call among the trace's first :data:`CONTEXT_FIRST_CALLS` runtime calls."""
    first = np.argsort(ctx.rt_ts, kind="stable")[:CONTEXT_FIRST_CALLS]
    m = np.isin(calls, first) & P.CONTEXT_CALL.mask(ctx.rt_name[calls], ctx.names)
    return calls[m]


def warmup_steps(ctx: TraceColumns, calls: np.ndarray) -> list[Step]:
    """The leading selected steps that are warm-up: each holds a one-time call (``calls``:
    :func:`one_time_calls`) or first call (:func:`first_calls`) and lasts :data:`WARMUP_STEP_FACTOR` times the median of the steps
    after it, which do the same work (launch at least half as many kernels each); at least one
    step stays. Empty without numbered steps."""
    steps = [s for s in ctx.steps if s.number is not None]
    if len(steps) < 2:
        return []
    ts = np.concatenate([ctx.rt_ts[calls], first_call_spans(ctx)[0]])
    if ts.size == 0:
        return []
    launches = ctx.rt_ts[ctx.kernel_launch_mask | P.GRAPH_LAUNCH.mask(ctx.rt_name, ctx.names)]

    def launched(st: Step) -> int:
        return int(((launches >= st.start) & (launches <= st.end)).sum())

    out: list[Step] = []
    for i, st in enumerate(steps[:-1]):
        rest = steps[i + 1 :]
        holds = bool(((ts >= st.start) & (ts <= st.end)).any())
        long = st.end - st.start >= WARMUP_STEP_FACTOR * float(
            np.median([s.end - s.start for s in rest])
        )
        same_work = float(np.median([launched(s) for s in rest])) >= 0.5 * launched(st)
        if not (holds and long and same_work):
            break
        out.append(st)
    return out
