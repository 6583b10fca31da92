"""Which profiled steps are steady: the step times, each less its one-time start-up, against
the **steady median** (the median of the steps that are not slow, found by taking the slow ones
out until none is left: the median of all the steps is itself a warm-up step when most of the
window is warm-up, 1,684, 1,557, 381, 70 and 88 ms in a minGPT run). A step is *slow* when it
takes more than :data:`UNSTEADY_STEP_FACTOR` times the steady median and at least
:data:`UNSTEADY_MIN_EXCESS_US` more. Functions of a trace's
:class:`~gpuprobe.tools.diagnose.columns.TraceColumns`; the leading slow steps
(:func:`leading_slow_steps`) are left out of the analysis by
:class:`~gpuprobe.tools.diagnose.analysis.TraceContext`, as the warm-up steps of
:mod:`.onetime` are, and the ``unsteady-window`` rule names every slow step. Times in µs.

One-time start-up is :mod:`.onetime`'s (the one-time-start finding): a step's time here is its
time less the one-time calls in it (less their GPU idle in the analysed steps), so that no
microsecond is counted by both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprobe.tools.diagnose import onetime
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.onetime import ONE_TIME_MIN_US, WARMUP_STEP_FACTOR

__all__ = [
    "UNSTEADY_MIN_EXCESS_US",
    "UNSTEADY_MIN_STEPS",
    "UNSTEADY_STEP_FACTOR",
    "StepFacts",
    "leading_slow_steps",
    "one_time_call_us",
    "slow_steps",
    "step_facts",
]

UNSTEADY_STEP_FACTOR = WARMUP_STEP_FACTOR  # × the steady median step: a step that takes more
# is not steady; the factor a leading step with one-time calls must reach to be warm-up
# (onetime.WARMUP_STEP_FACTOR), and issue 39's "steps whose times spread more than 2×"; ours
UNSTEADY_MIN_EXCESS_US = ONE_TIME_MIN_US  # µs; and it takes at least this much longer: below
# 1 ms a step's extra time is within what a first pass costs per op (onetime.ONE_TIME_MIN_US:
# an eager launch path is ~5-50 µs, docs/experiments.md#e8); ours
UNSTEADY_MIN_STEPS = 3  # steps a window needs for its spread to be judged: of two, neither is
# known to be the steady one; ours


@dataclass(frozen=True)
class StepFacts:
    """One step as the steadiness check reads it: its ``ProfilerStep`` number, its time (µs,
    on the GPU's side when the GPU lags the CPU) less its one-time start-up, the DataLoader's
    time in it, its CPU ops and its kernel launches (graph replays included)."""

    number: int | None
    us: float
    dataloader_us: float
    ops: int
    launches: int
    untraced_us: float = (
        0.0  # host time in it with no traced event (:func:`.idle.untraced_intervals`)
    )


def slow_steps(times: np.ndarray) -> tuple[np.ndarray, float]:
    """(which of ``times`` are slow, the steady median): the median of the steps not slow,
    taking the slow ones out until none is left (the fastest step is never slow). Nothing is
    slow with fewer than :data:`UNSTEADY_MIN_STEPS` times."""
    t = np.asarray(times, dtype=np.float64)
    slow = np.zeros(t.size, dtype=bool)
    if t.size == 0:
        return slow, 0.0
    ref = float(np.median(t))
    if t.size < UNSTEADY_MIN_STEPS:
        return slow, ref
    for _ in range(t.size):
        new = (t > UNSTEADY_STEP_FACTOR * ref) & (t - ref >= UNSTEADY_MIN_EXCESS_US)
        if (new == slow).all():
            break
        slow = new
        ref = float(np.median(t[~slow]))
    return slow, ref


def one_time_call_us(ctx: TraceColumns, calls: np.ndarray) -> np.ndarray:
    """µs per selected step in the one-time calls ``calls`` (:func:`.onetime.one_time_calls`)
    and the one-time first calls of ops (:func:`.onetime.first_call_spans`) that start in it."""
    in_step = calls[ctx.rt_step[calls] >= 0]
    out = np.bincount(
        ctx.rt_step[in_step], weights=ctx.rt_dur[in_step], minlength=len(ctx.steps)
    ).astype(np.float64)
    a, b = onetime.first_call_spans(ctx)  # and the first calls of ops that are one-time
    st = ctx.step_of(a)
    keep = st >= 0
    return out + np.bincount(st[keep], weights=(b - a)[keep], minlength=len(ctx.steps))


def step_facts(ctx: TraceColumns, startup_us: np.ndarray) -> list[StepFacts]:
    """Each selected step's :class:`StepFacts`, its time less ``startup_us`` (µs per step: its
    one-time start-up, the GPU's idle in one-time calls or the calls' own time)."""
    n = len(ctx.steps)
    if n == 0:
        return []
    us = np.maximum(ctx.timed_durations - startup_us, 0.0)
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, ctx.names) & (ctx.ann_step >= 0)
    dl_us = np.bincount(ctx.ann_step[dl], weights=ctx.ann_dur[dl], minlength=n)
    ops = np.bincount(ctx.op_step[ctx.op_step >= 0], minlength=n)
    launch = ctx.kernel_launch_mask | P.GRAPH_LAUNCH.mask(ctx.rt_name, ctx.names)
    launch &= ctx.rt_step >= 0
    launches = np.bincount(ctx.rt_step[launch], minlength=n)
    untraced = _untraced_per_step(ctx)
    return [
        StepFacts(
            s.number, float(us[i]), float(dl_us[i]), int(ops[i]), int(launches[i]), untraced[i]
        )
        for i, s in enumerate(ctx.steps)
    ]


def _untraced_per_step(ctx: TraceColumns) -> list[float]:
    """µs of each selected step in holes of the host's traced events (no cpu_op, runtime call,
    Python frame or DataLoader span on a launching thread: a checkpoint save, I/O, a sleep)."""
    from gpuprobe.tools.diagnose.idle import untraced_intervals

    hs, he = untraced_intervals(ctx)
    starts, ends = np.asarray(ctx.step_starts), np.asarray(ctx.step_ends)
    if hs.size == 0 or starts.size == 0:
        return [0.0] * len(ctx.steps)
    lo = np.maximum(hs[None, :], starts[:, None])
    hi = np.minimum(he[None, :], ends[:, None])
    return [float(x) for x in np.clip(hi - lo, 0.0, None).sum(axis=1)]


def leading_slow_steps(ctx: TraceColumns, calls: np.ndarray, skip: int = 0) -> list[StepFacts]:
    """The slow steps that open the selection after its first ``skip`` (the warm-up steps of
    :func:`.onetime.warmup_steps`), judged against the steps after those, each less its
    one-time calls (``calls``): warm-up that is not over, up to the first steady step or the
    first that compiles or runs torch.compile'd code (whose slow runs the compiled-regions
    rule judges). Empty without numbered steps; at least one step is always left."""
    facts = step_facts(ctx, one_time_call_us(ctx, calls))[skip:]
    if len(facts) < UNSTEADY_MIN_STEPS or any(f.number is None for f in facts):
        return []
    slow, _ = slow_steps(np.array([f.us for f in facts]))
    # a step that compiles or runs compiled code stays: its slow runs are compiled-regions'
    region = P.COMPILE_WORK.mask(ctx.op_name, ctx.names) | P.COMPILED_REGION.mask(
        ctx.op_name, ctx.names
    )
    compiled = set(ctx.op_step[region & (ctx.op_step >= 0)].tolist())
    work = P.COMPILE_WORK.mask(ctx.ann_name, ctx.names) & (ctx.ann_step >= 0)
    compiled |= set(ctx.ann_step[work].tolist())
    k = 0  # up to the first steady step (one always is)
    while slow[k] and skip + k not in compiled:
        k += 1
    return facts[:k]
