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

A compiled run (torch.compile) has one-time host stretches of its own, which no runtime call
covers (:func:`one_time_spans`): compiling inside the window (TorchDynamo's and Inductor's
``dynamo_timed`` spans, the compilers' Python frames), unless it recurs in more than
:data:`COMPILE_RECUR_STEP_FRACTION` of the profiled steps (a recompile every step is a steady
cost); the one run of a compiled region or graph call far slower than its others
(:func:`slow_compiled_runs`: autotuning, CUDA-graph recording, lazy loading on a first run); and
the untraced host time of :data:`~.idle.UNTRACED_MIN_GAP_US` or more just before the first run of
a compiled region or the first launch of a compiler's (Triton) kernel, which its later runs do not
have (compiling or loading it on its first call, with nothing traced).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.idle import UNTRACED_MIN_GAP_US
from gpuprobe.tools.diagnose.intervals import group_medians, merge_intervals, overlap
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL
from gpuprobe.tools.diagnose.steps import Step

__all__ = [
    "COLD_TRACE_FRACTION",
    "COMPILE_RECUR_STEP_FRACTION",
    "CONTEXT_FIRST_CALLS",
    "FIRST_CALL_FACTOR",
    "ONE_TIME_FACTOR",
    "ONE_TIME_MAX_REPEATS",
    "ONE_TIME_MIN_US",
    "REGION_SLOW_FACTOR",
    "REGION_SLOW_MIN_RUNS",
    "REGION_SLOW_MIN_US",
    "TYPICAL_LAUNCH_QUANTILE",
    "WARMUP_STEP_FACTOR",
    "OneTimeSpans",
    "compile_spans",
    "compiling_recurs",
    "context_calls",
    "first_call_spans",
    "first_calls",
    "one_time_calls",
    "one_time_spans",
    "slow_compiled_runs",
    "typical_launch_us",
    "waits_for_nothing",
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
COMPILE_RECUR_STEP_FRACTION = 0.5  # of the trace's profiled steps (and at least two) that
# compile, past which compiling recurs (a recompile every step: a steady cost that
# compiled-regions warns of) rather than being a first pass's one-time cost; ours
REGION_SLOW_FACTOR = 5.0  # one run of a compiled region this many times its other runs' median
# is a one-time cost (autotuning, CUDA-graph recording, lazy module loading); ours
REGION_SLOW_MIN_US = 1000.0  # µs; and at least this much longer, so µs-scale jitter is not one
REGION_SLOW_MIN_RUNS = 3  # runs of one region needed to call one of them slow; ours


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
        (ctx.sync_mask & ~waits_for_nothing(ctx))
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


def waits_for_nothing(ctx: TraceColumns) -> np.ndarray:
    """A mask over the runtime calls: the syncs among the process's first
    :data:`CONTEXT_FIRST_CALLS` runtime calls that end before any GPU work was queued (no
    launch or copy call before them, no GPU activity before their end). Such a sync has
    nothing to wait for: its time is set-up (the first CUDA call creates the context), a
    one-time cost, not a wait for the GPU."""
    out = np.zeros(ctx.rt_ts.size, dtype=bool)
    sync = np.nonzero(ctx.sync_mask)[0]
    if sync.size == 0:
        return out
    first = np.argsort(ctx.rt_ts, kind="stable")[:CONTEXT_FIRST_CALLS]
    sync = sync[np.isin(sync, first)]
    queued = ctx.rt_ts[ctx.gpu_rt[ctx.gpu_rt >= 0]]  # the calls that queued GPU work
    first_queued = float(queued.min()) if queued.size else np.inf
    first_gpu = float(ctx.gpu_ts.min()) if ctx.gpu_ts.size else np.inf
    end = ctx.rt_ts[sync] + ctx.rt_dur[sync]
    out[sync[(ctx.rt_ts[sync] < first_queued) & (end <= first_gpu)]] = True
    return out


def first_calls(ctx: TraceColumns) -> np.ndarray:
    """Indices into the op columns (sorted by start) of the first calls that are one-time: an
    op's first call on its thread lasting :data:`ONE_TIME_MIN_US` or more and
    :data:`FIRST_CALL_FACTOR` times its longest later call there (two or more of them), not
    spent for the most part in copies or waits for the GPU, and (an op that moves data, in a
    trace of one step or none) over before the first GPU activity; e.g. a first ``aten::mul_`` of 2.7 ms whose later
    calls take 20 µs."""
    got = ctx.__dict__.get("first_calls")  # TraceContext caches it under that name
    if isinstance(got, np.ndarray):
        return got
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
    # with one step (or none) the step's input copy looks like a first call: there an op
    # that moves data counts only before the trace's first GPU activity (nothing launched yet)
    one_window = sum(st.number is not None for st in ctx.steps) < 2
    moves = P.DATA_MOVEMENT.mask(ctx.op_name, ctx.names)
    first_gpu = float(ctx.gpu_ts.min()) if ctx.gpu_ts.size else np.inf
    for c in cand.tolist():
        later = ctx.op_dur[order[starts[c] + 1 : starts[c] + counts[c]]]
        i = int(heads[c])
        if ctx.op_dur[i] < FIRST_CALL_FACTOR * max(float(later.max()), 1e-3):
            continue
        t0, t1 = ctx.op_ts[i], ctx.op_ts[i] + ctx.op_dur[i]
        if one_window and moves[i] and t1 > first_gpu:
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


def warmup_steps(
    ctx: TraceColumns, calls: np.ndarray, spans: OneTimeSpans | None = None
) -> list[Step]:
    """The leading selected steps that are warm-up: each holds a one-time call (``calls``:
    :func:`one_time_calls`), a one-time first call (:func:`first_calls`) or the start of a
    one-time host stretch (``spans``: :func:`one_time_spans`) and lasts
    :data:`WARMUP_STEP_FACTOR` times the median of the steps after it, which do the same work
    (launch at least half as many kernels each); at least one step stays. Empty without
    numbered steps."""
    steps = [s for s in ctx.steps if s.number is not None]
    starts = spans.start if spans is not None else np.zeros(0)
    ts = np.concatenate([ctx.rt_ts[calls], starts, first_call_spans(ctx)[0]])
    if len(steps) < 2 or ts.size == 0:
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


def _step_starts(ctx: TraceColumns) -> np.ndarray:
    """The starts of the trace's ``ProfilerStep#`` annotations (all of them, not only the
    selected), sorted."""
    return np.array(sorted({ts for _, ts, _ in ctx.raw.steps}), dtype=np.float64)


def compile_spans(ctx: TraceColumns) -> tuple[np.ndarray, np.ndarray]:
    """The union of the compile work in the whole trace (:data:`~.patterns.COMPILE_WORK`:
    ``dynamo_timed`` spans, compiler ops, the compilers' Python frames)."""
    starts, ends = [], []
    for ts, dur, name in (
        (ctx.ann_ts, ctx.ann_dur, ctx.ann_name),
        (ctx.op_ts, ctx.op_dur, ctx.op_name),
        (ctx.py_ts, ctx.py_dur, ctx.py_name),
    ):
        m = P.COMPILE_WORK.mask(name, ctx.names)
        starts.append(ts[m])
        ends.append(ts[m] + dur[m])
    return merge_intervals(np.concatenate(starts), np.concatenate(ends))


def compiling_recurs(ctx: TraceColumns, starts: np.ndarray) -> bool:
    """Whether compile work starting at ``starts`` falls in more than
    :data:`COMPILE_RECUR_STEP_FRACTION` of the trace's profiled steps, and in two at least."""
    steps = _step_starts(ctx)
    if steps.size < 2 or starts.size == 0:
        return False
    k = np.searchsorted(steps, starts, side="right") - 1
    n = int(np.unique(k[k >= 0]).size)
    return n >= 2 and n > COMPILE_RECUR_STEP_FRACTION * steps.size


def slow_compiled_runs(ctx: TraceColumns, runs: np.ndarray) -> list[tuple[int, float, int]]:
    """Among the cpu_ops of mask ``runs`` (compiled regions and graph calls), by name, the one
    run far slower than the others (:data:`REGION_SLOW_FACTOR` times their median and
    :data:`REGION_SLOW_MIN_US` more, with :data:`REGION_SLOW_MIN_RUNS` runs at least): (that
    run's op index, the median of the other runs in µs, runs), the largest excess first."""
    out = []
    idx = np.nonzero(runs)[0]
    for nid in np.unique(ctx.op_name[idx]).tolist():
        mine = idx[ctx.op_name[idx] == nid]
        if mine.size < REGION_SLOW_MIN_RUNS:
            continue
        order = mine[np.argsort(ctx.op_dur[mine], kind="stable")]
        rest = float(np.median(ctx.op_dur[order[:-1]]))
        top = float(ctx.op_dur[order[-1]])
        if top >= REGION_SLOW_FACTOR * rest and top - rest >= REGION_SLOW_MIN_US:
            out.append((int(order[-1]), rest, int(mine.size)))
    return sorted(out, key=lambda r: r[1] - float(ctx.op_dur[r[0]]))


@dataclass(frozen=True)
class OneTimeSpans:
    """Host stretches of a compiled run's first pass (:func:`one_time_spans`), over the whole
    trace: each one's start, end (µs) and what it is, in time order."""

    start: np.ndarray
    end: np.ndarray
    what: tuple[str, ...]

    @property
    def size(self) -> int:
        return int(self.start.size)

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """Their union."""
        return merge_intervals(self.start, self.end)


def _ends_before(ctx: TraceColumns, tid: int, ts: np.ndarray) -> np.ndarray:
    """For times ``ts`` on thread ``tid``: the latest end of a host event (cpu_op, runtime call,
    Python frame) of that thread at or before each (NaN when none). TorchDynamo's cache lookup
    just before a region is the region's own start, not a host event before it."""
    lookup = P.DYNAMO_CACHE_LOOKUP.mask(ctx.op_name, ctx.names)
    ends = np.sort(
        np.concatenate(
            [
                (ctx.op_ts + ctx.op_dur)[(ctx.op_tid == tid) & ~lookup],
                (ctx.rt_ts + ctx.rt_dur)[ctx.rt_tid == tid],
                (ctx.py_ts + ctx.py_dur)[ctx.py_tid == tid],
            ]
        )
    )
    k = np.searchsorted(ends, ts, side="right") - 1
    return np.where(k >= 0, ends[np.maximum(k, 0)] if ends.size else np.nan, np.nan)


def _first_holes(
    ctx: TraceColumns, ts: np.ndarray, tid: np.ndarray, key: np.ndarray, first_pass: bool
) -> list[tuple[float, float, int]]:
    """For events at ``ts`` on threads ``tid``, grouped by ``key`` (a name id): the untraced
    hole before each key's first event, (start, end, key), when it lasts
    :data:`~.idle.UNTRACED_MIN_GAP_US` or more and the holes before the key's later events
    are shorter (their median); a key seen once counts only on a ``first_pass``."""
    if ts.size == 0:
        return []
    hole = np.full(ts.size, np.nan)
    for t in np.unique(tid).tolist():
        m = tid == t
        hole[m] = ts[m] - _ends_before(ctx, int(t), ts[m])
    order = np.lexsort((ts, key))
    k = key[order]
    head = np.ones(order.size, dtype=bool)
    head[1:] = k[1:] != k[:-1]
    group = np.cumsum(head) - 1  # each event's key, numbered 0..
    later = ~head & ~np.isnan(hole[order])
    medians = group_medians(group[later], hole[order][later], int(group[-1]) + 1)
    out = []
    for g, i in enumerate(order[head].tolist()):
        gap = float(hole[i])
        if not gap >= UNTRACED_MIN_GAP_US:  # NaN too: nothing before it on its thread
            continue
        m = medians[g]
        if (m is None and not first_pass) or (m is not None and m >= UNTRACED_MIN_GAP_US):
            continue
        out.append((float(ts[i]) - gap, float(ts[i]), int(key[i])))
    return out


def one_time_spans(ctx: TraceColumns, calls: np.ndarray) -> OneTimeSpans:
    """The one-time host stretches of a compiled run's first pass over the whole trace (see the
    module docstring); ``calls``: :func:`one_time_calls`, which with compiling mark a trace
    that holds a first pass."""
    lo: list[float] = []
    hi: list[float] = []
    what: list[str] = []
    cs, ce = compile_spans(ctx)
    if cs.size and not compiling_recurs(ctx, cs):
        lo += cs.tolist()
        hi += ce.tolist()
        what += ["compiling (TorchDynamo/Inductor)"] * cs.size
    runs = P.COMPILED_REGION.mask(ctx.op_name, ctx.names) | P.COMPILED_CALL.mask(
        ctx.op_name, ctx.names
    )
    for i, rest, n in slow_compiled_runs(ctx, runs):
        a, d = float(ctx.op_ts[i]), float(ctx.op_dur[i])
        name = ctx.names[int(ctx.op_name[i])]
        first = not bool((runs & (ctx.op_name == ctx.op_name[i]) & (ctx.op_ts < a)).any())
        lo.append(a)
        hi.append(a + d)
        what.append(
            f"{'the first' if first else 'one'} run of {name} (its other {n - 1}: "
            f"{rest / 1e3:,.2f} ms median)"
        )
    triton = np.zeros(0, dtype=np.int64)
    if ctx.gpu_name.size:
        k = (
            (ctx.gpu_kind == GPU_KIND_KERNEL)
            & (ctx.gpu_rt >= 0)
            & P.COMPILER_KERNEL.mask(ctx.gpu_name, ctx.names)
        )
        triton = np.nonzero(k)[0]
    if runs.any() or triton.size:
        first_pass = bool(cs.size or calls.size)
        r = np.nonzero(runs)[0]
        for a, b, key in _first_holes(ctx, ctx.op_ts[r], ctx.op_tid[r], ctx.op_name[r], first_pass):
            if overlap(cs, ce, a, b) >= 0.5 * (b - a):
                continue  # the compiling above, with nothing but its annotations traced
            lo.append(a)
            hi.append(b)
            what.append(
                f"untraced host time before the first run of {ctx.names[key]} (compiling or "
                "loading it)"
            )
        rt = ctx.gpu_rt[triton]
        for a, b, key in _first_holes(
            ctx, ctx.rt_ts[rt], ctx.rt_tid[rt], ctx.gpu_name[triton], first_pass
        ):
            if overlap(cs, ce, a, b) >= 0.5 * (b - a):
                continue
            lo.append(a)
            hi.append(b)
            what.append(
                f"untraced host time before the first launch of {ctx.names[key]} (the "
                "compiler's kernel compiled or loaded on its first call)"
            )
    order = np.argsort(np.array(lo, dtype=np.float64), kind="stable")
    return OneTimeSpans(
        np.array(lo, dtype=np.float64)[order],
        np.array(hi, dtype=np.float64)[order],
        tuple(what[i] for i in order.tolist()),
    )
