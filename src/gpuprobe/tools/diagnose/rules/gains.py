"""Every finding's gain from the what-if engine (:mod:`~gpuprobe.tools.diagnose.whatif`): each
cause registers the change its fix makes (:func:`prices`), and :func:`price_findings` replays
the step graph with it, so that a gain is the step time the fix saves on the step's critical
path, not a share a rule estimates on its own. A warning whose replay saves less than
:data:`~gpuprobe.tools.diagnose.rules.MIN_WARN_GAIN` is information (its cause is not on the
critical path: the GPU or another wait would still hold the step). ``gpu-idle`` is the symptom
of the others: it says how much of the idle time they explain and warns only when they do not
explain half of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.columns import LAUNCH_GAP_MAX_US
from gpuprobe.tools.diagnose.idle import CPU_WORK_MIN_US, launching_ops
from gpuprobe.tools.diagnose.intervals import merge_intervals, overlaps
from gpuprobe.tools.diagnose.kineto import GPU_KIND_MEMCPY
from gpuprobe.tools.diagnose.rules.comm import comm_masks, exposed_parts
from gpuprobe.tools.diagnose.rules.copies import PAGEABLE_MIN_BYTES, PINNED_COPY_GB_PER_S
from gpuprobe.tools.diagnose.rules.loops import loop_ops
from gpuprobe.tools.diagnose.rules.precision import slow_gemms
from gpuprobe.tools.diagnose.whatif import Change
from gpuprobe.tools.diagnose.whatif.changes import (
    gpu_durations,
    launch_floor,
    remove_host,
    unblock_waits,
    waits_for,
)

__all__ = [
    "EXPLAINED_FRACTION",
    "KERNEL_FIXED_US",
    "PINNED_GB_PER_S_BY_MAJOR",
    "PRICES",
    "price_findings",
    "price_together",
    "prices",
]

PINNED_GB_PER_S_BY_MAJOR = {7: 12.0, 8: 24.0, 9: 50.0, 10: 50.0, 12: 50.0}  # GB/s host<->device
# from pinned memory on the PCIe generation each compute capability's cards ship with, when the
# trace has no pinned copy of its own: PCIe 3.0/4.0/5.0 x16 as bandwidthTest and nvbandwidth
# measure them (~12/~24/~50 GB/s: V100/T4, A100/RTX 30-40, H100/H200/B200); an unknown card
# takes the slowest (copies.PINNED_COPY_GB_PER_S), so the gain is not overstated
KERNEL_FIXED_US = 2.5  # µs; what a kernel costs however little it does (its launch latency and
# ramp on the GPU: the shortest kernels on the H200 of tests/data/diagnose/gpu_h200 run 1.5-3
# µs; HTA's kernel duration breakdown shows the same floor on A100s); ours
EXPLAINED_FRACTION = 0.5  # of the GPU's idle time the priced causes must explain for gpu-idle
# to be their sum (information) rather than a warning of its own; ours

Pricer = Callable[[TraceContext], tuple[Change, str]]
PRICES: dict[str, Pricer] = {}


def prices(id: str) -> Callable[[Pricer], Pricer]:
    """Register ``f(ctx) -> (change, note)`` as the change that fixing finding ``id`` makes."""

    def add(f: Pricer) -> Pricer:
        PRICES[id] = f
        return f

    return add


def _thread_ops(ctx: TraceContext) -> np.ndarray:
    """Top-level cpu_ops on the launching threads (every thread's without a launch)."""
    g = ctx.whatif.graph
    top = ctx.op_top & (ctx.op_step >= 0)
    if g is None or g.tids.size == 0 or not ctx.has_gpu:
        return top
    return top & np.isin(ctx.op_tid, g.tids)


@prices("input-bound")
def _input(ctx: TraceContext) -> tuple[Change, str]:
    s, e = ctx.dataloader_intervals
    return remove_host(s, e), f"{s.size} DataLoader waits gone"


@prices("untraced-host")
def _untraced(ctx: TraceContext) -> tuple[Change, str]:
    s, e = ctx.untraced_intervals
    return remove_host(s, e), f"{s.size} untraced host stretches gone"


def cpu_work(ctx: TraceContext) -> tuple[np.ndarray, np.ndarray]:
    """The launching threads' top-level ops of at least CPU_WORK_MIN_US that queue no GPU work
    (merged intervals)."""
    idx = np.nonzero(_thread_ops(ctx) & (ctx.op_dur >= CPU_WORK_MIN_US))[0]
    if ctx.has_gpu:
        idx = idx[~launching_ops(ctx, idx)]
    return merge_intervals(ctx.op_ts[idx], ctx.op_ts[idx] + ctx.op_dur[idx])


def idle_intervals(ctx: TraceContext, cause: str) -> tuple[np.ndarray, np.ndarray]:
    """The GPU's idle time given to ``cause`` (:func:`.idle.idle_by_cause`), every device's."""
    parts = [by[cause] for by in ctx.idle_by_cause.values()]
    if not parts:
        return np.zeros(0), np.zeros(0)
    return merge_intervals(
        np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    )


@prices("host-work")
def _host(ctx: TraceContext) -> tuple[Change, str]:
    # the host time during which the GPU idled with nothing queued (the finding's own
    # measure): CPU ops, Python between them, at the step's edges or in long gaps
    s, e = idle_intervals(ctx, "host")
    return remove_host(s, e), f"{s.size} stretches of host work off the step's path"


@prices("launch-bound")
def _launch(ctx: TraceContext) -> tuple[Change, str]:
    # host time that is not dispatch: CPU work, untraced stretches (untraced-host's), and a
    # compiled run's one-time stretches (compiling, a first run's stalls: one-time-start's)
    work = merge_intervals(
        *(
            np.concatenate(p)
            for p in zip(
                cpu_work(ctx),
                ctx.untraced_intervals,
                ctx.one_time_spans.merged(),
                strict=True,
            )
        )
    )
    change, floor = launch_floor(ctx, ctx.whatif.graph, ctx.dataloader_intervals, work)
    return change, f"launch gaps at the trace's fast-launch floor ({floor:.1f} µs)"


def _pageable(ctx: TraceContext) -> np.ndarray:
    copy = (ctx.gpu_kind == GPU_KIND_MEMCPY) & (ctx.gpu_step >= 0)
    return (
        copy & P.PAGEABLE_COPY.mask(ctx.gpu_name, ctx.names) & (ctx.gpu_bytes >= PAGEABLE_MIN_BYTES)
    )


def _top_reads(ctx: TraceContext) -> np.ndarray:
    """The top-level scalar reads (``.item()``: ``aten::item``, ``_local_scalar_dense``) on the
    launching threads, as cpu_op indices: a read the fix takes out of the step altogether (read
    every N steps), with its host time, not only its wait."""
    reads = P.ITEM.mask(ctx.op_name, ctx.names) | P.SCALAR_READ.mask(ctx.op_name, ctx.names)
    return np.nonzero(reads & _thread_ops(ctx))[0]


@prices("sync")
def _sync(ctx: TraceContext) -> tuple[Change, str]:
    g = ctx.whatif.graph
    which = ~waits_for(g, _pageable(ctx))  # the pageable copies' waits are theirs
    reads = _top_reads(ctx)
    change = unblock_waits(g, which)
    if reads.size:  # a read taken out whole: the blocking call inside it goes with it
        a = ctx.op_ts[reads]
        change = remove_host(a, a + ctx.op_dur[reads]) + change
    n = int(which.sum())
    return change, f"{n} blocking calls no longer wait, {reads.size} scalar reads out of the step"


def _link_rate(ctx: TraceContext) -> float:
    """GB/s a pinned copy reaches on this card's link (:data:`PINNED_GB_PER_S_BY_MAJOR`)."""
    props = ctx.raw.device_properties
    majors = [p.get("computeMajor") for p in props if isinstance(p, dict)]
    rates = [
        PINNED_GB_PER_S_BY_MAJOR.get(m, PINNED_COPY_GB_PER_S) for m in majors if isinstance(m, int)
    ]
    return min(rates) if rates else PINNED_COPY_GB_PER_S


@prices("pageable-copies")
def _copies(ctx: TraceContext) -> tuple[Change, str]:
    page = _pageable(ctx)
    copy = (ctx.gpu_kind == GPU_KIND_MEMCPY) & (ctx.gpu_bytes >= PAGEABLE_MIN_BYTES)
    pinned = copy & P.PINNED_COPY.mask(ctx.gpu_name, ctx.names)
    p_dur = float(ctx.gpu_dur[pinned].sum())
    rate = float(ctx.gpu_bytes[pinned].sum()) / p_dur / 1e3 if p_dur > 0 else _link_rate(ctx)
    new = np.minimum(ctx.gpu_bytes[page] / (rate * 1e3), ctx.gpu_dur[page])
    g = ctx.whatif.graph
    change = gpu_durations(page, new) + unblock_waits(g, waits_for(g, page))
    return change, f"{int(page.sum())} copies at {rate:.1f} GB/s, asynchronous"


def _launched_in(ctx: TraceContext, ops: np.ndarray) -> np.ndarray:
    """GPU activities (a mask over the GPU columns) whose launch call ran inside one of the
    cpu_ops ``ops`` on its thread."""
    out = np.zeros(ctx.gpu_ts.size, dtype=bool)
    m = ctx.gpu_rt >= 0
    if not m.any() or ops.size == 0:
        return out
    rt = ctx.gpu_rt[m]
    t, tid = ctx.rt_ts[rt], ctx.rt_tid[rt]
    hit = np.zeros(rt.size, dtype=bool)
    for th in np.unique(ctx.op_tid[ops]).tolist():
        mine = ops[ctx.op_tid[ops] == th]
        s, e = merge_intervals(ctx.op_ts[mine], ctx.op_ts[mine] + ctx.op_dur[mine])
        k = np.searchsorted(s, t, side="right") - 1
        kk = np.maximum(k, 0)
        hit |= (tid == th) & (k >= 0) & (t <= e[kk])
    out[np.nonzero(m)[0][hit]] = True
    return out


def _loop_spans(ctx: TraceContext, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The host time of a loop over ops ``ops``: each op, and the Python between one and the
    next on its thread (the loop's body) when that is shorter than LAUNCH_GAP_MAX_US."""
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for th in np.unique(ctx.op_tid[ops]).tolist():
        mine = ops[ctx.op_tid[ops] == th]
        mine = mine[np.argsort(ctx.op_ts[mine], kind="stable")]
        a = ctx.op_ts[mine]
        b = a + ctx.op_dur[mine]
        nxt = np.append(a[1:], np.inf)
        starts.append(a)
        ends.append(np.where(nxt - b < LAUNCH_GAP_MAX_US, np.maximum(nxt, b), b))
    if not starts:
        return np.zeros(0), np.zeros(0)
    return merge_intervals(np.concatenate(starts), np.concatenate(ends))


@prices("python-loop")
def _loop(ctx: TraceContext) -> tuple[Change, str]:
    # one vectorised op for the loop: the loop's ops' host time out of the step, and in each
    # step its kernels one kernel that does their work: the longest of them, or their time
    # less each one's fixed cost (KERNEL_FIXED_US) if that is longer; a loop of large ops,
    # whose kernels set the pace, saves next to nothing
    ops = loop_ops(ctx)
    change = remove_host(*_loop_spans(ctx, ops))
    gpu = _launched_in(ctx, ops) & (ctx.gpu_step >= 0)
    if gpu.any():
        idx = np.nonzero(gpu)[0]
        first, merged = [], []
        for st in np.unique(ctx.gpu_step[idx]).tolist():
            mine = idx[ctx.gpu_step[idx] == st]
            d = ctx.gpu_dur[mine]
            first.append(int(mine[np.argmin(ctx.gpu_ts[mine])]))
            merged.append(max(float(d.max()), float(np.clip(d - KERNEL_FIXED_US, 0, None).sum())))
        keep = np.zeros(gpu.size, dtype=bool)
        keep[first] = True
        change = change + gpu_durations(keep, np.array(merged)[np.argsort(first)])
        change = change + Change(gone=np.nonzero(gpu & ~keep)[0])
    return change, (
        f"the host time of {ops.size} looped ops gone, their {int(gpu.sum())} GPU "
        "activities one per step"
    )


@prices("no-tensor-cores")
def _tensor_cores(ctx: TraceContext) -> tuple[Change, str]:
    # the FP32 GEMM/conv kernels at the Tensor Core rate: on the step's path only where the
    # GPU sets the pace (a host-bound step keeps its pace, its kernels just idle longer)
    slow, speedup = slow_gemms(ctx)
    change = gpu_durations(slow, ctx.gpu_dur[slow] / speedup)
    typical = float(np.median(speedup)) if speedup.size else 1.0
    return change, f"{int(slow.sum())} FP32 GEMM/conv kernels {typical:.1f}x faster (median)"


@prices("exposed-communication")
def _communication(ctx: TraceContext) -> tuple[Change, str]:
    # each collective kernel keeps only its time behind compute: the rest hidden (overlapped
    # with the compute after it), the bound of what overlapping can give on this rank
    comm, compute = comm_masks(ctx)
    change = gpu_durations(comm, ctx.gpu_dur[comm] - exposed_parts(ctx, comm, compute))
    return change, f"{int(comm.sum())} collective kernels' exposed time hidden behind compute"


def _idle_share(f: Finding) -> float:
    """The share of the step a gpu-idle finding says the GPU idles (steady part when given)."""
    ev = {e.name: e.value for e in f.evidence}
    v = ev.get("gpu_busy_steady_median", ev.get("gpu_busy_median"))
    return 1.0 - float(v) / 100 if isinstance(v, (int, float)) else 0.0


def _explained(idle: Finding, causes: Sequence[Finding]) -> Finding:
    """The gpu-idle warning as the sum of the priced causes: information when they explain
    :data:`EXPLAINED_FRACTION` of its idle time or more, else a warning without a gain."""
    explained = sum(f.gain or 0.0 for f in causes)
    share = _idle_share(idle)
    if share <= 0 or explained < EXPLAINED_FRACTION * share:
        return idle  # idle the priced causes do not explain: the symptom is the lead
    names = ", ".join(f"{f.id} {100 * (f.gain or 0):.1f} %" for f in causes)
    return replace(
        idle,
        status=Status.INFO,
        gain=None,
        evidence=(
            *idle.evidence,
            Evidence("explained_by_findings", round(100 * explained, 1), "%"),
        ),
        details=(f"the symptom of the findings below, which explain it: {names}", *idle.details),
    )


def _host_priced(ctx: TraceContext, f: Finding, pricer: Pricer) -> Finding:
    """On a trace without GPU work the step is the host's time alone: a fix that takes host
    stretches out (the DataLoader's waits, a loop's body) saves exactly them; other fixes
    keep the rule's own figure."""
    if f.gain is None or not len(ctx.steps):
        return f
    change, _ = pricer(ctx)
    a, b, keep = change.host
    if change.gpu[0].size or change.gone.size or a.size == 0:
        return f
    lo, hi = merge_intervals(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    inside = overlaps(lo, hi, np.asarray(ctx.step_starts), np.asarray(ctx.step_ends))
    saved = float(inside.sum()) - float(np.sum(keep))
    total = float(ctx.step_durations.sum())
    return replace(f, gain=min(max(saved, 0.0) / total, 1.0)) if total > 0 else f


def price_findings(ctx: TraceContext, findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with the gain of each priced cause (warning or information) from its replay;
    gpu-idle as the sum its causes explain. A trace without GPU work keeps the rules' own
    figures: no step waits on a GPU there, so the replay has nothing to price."""
    out: list[Finding] = []
    for f in findings:
        pricer = PRICES.get(f.id)
        if pricer is None or f.status not in (Status.WARN, Status.INFO):
            out.append(f)
            continue
        if not ctx.has_gpu:
            out.append(_host_priced(ctx, f, pricer))
            continue
        change, note = pricer(ctx)
        gain = ctx.whatif.price(f.id, change, note)
        if any(e.name == "waits_outside_trace" for e in f.evidence) and f.gain:
            # a wait for work the trace does not show: no replay of the trace moves it, and
            # finding that work (another process, an unprofiled stream) would save the stall
            gain = max(gain, f.gain)
        out.append(replace(f, gain=gain if f.gain is not None or gain > 0 else f.gain))
    causes = [f for f in out if f.id in PRICES and f.status is Status.WARN and f.gain]
    return [
        _explained(f, causes) if f.id == "gpu-idle" and f.status is Status.WARN else f for f in out
    ]


def price_together(ctx: TraceContext, ids: Sequence[str]) -> float | None:
    """The share of the steady pace the fixes of findings ``ids`` save made at once (their
    changes replayed together: a DataLoader wait and the sync after it overlap, two stretches
    of host work add up); None when one of them has no price or the trace no GPU work."""
    if not ctx.has_gpu or not ids or any(i not in PRICES for i in ids):
        return None
    change = Change()
    for i in ids:
        change = change + PRICES[i](ctx)[0]
    return ctx.whatif.share_saved(change)
