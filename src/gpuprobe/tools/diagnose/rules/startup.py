"""One-time start-up: calls far longer than the trace's typical launch that do not recur
(context creation, module and library loads, handle creation, lazy kernel loading, autotuning,
the allocator's first growth), a compiled run's first pass (compiling inside the window, a
compiled region's far slower first run, the untraced time before a compiled kernel's first
launch) and the warm-up steps they make, reported apart and left out of the steady-state
verdicts (:mod:`gpuprobe.tools.diagnose.onetime`)."""

from __future__ import annotations

import re

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.onetime import (
    ONE_TIME_FACTOR,
    ONE_TIME_MIN_US,
    context_calls,
    typical_launch_us,
)
from gpuprobe.tools.diagnose.rules._common import GROUP, pct

__all__ = [
    "ONE_TIME_NEGLIGIBLE_FRACTION",
    "ONE_TIME_WARN_FRACTION",
    "enclosing_op",
    "one_time_start",
]

ONE_TIME_WARN_FRACTION = 0.1  # of the profiled time in one-time costs past which the trace is
# not a picture of the steady state; ours
ONE_TIME_NEGLIGIBLE_FRACTION = 0.01  # of the profiled time below which one-time costs are noise
_DETAILS = 5  # one-time calls listed

_WHAT = (
    (re.compile(r"Launch"), "the first launch of this kernel loads its module"),
    (re.compile(r"Malloc"), "the caching allocator growing"),
    (re.compile(r"Free"), "memory released to the driver, the allocator emptying its cache"),
    (re.compile(r"StreamCreate|EventCreate|Handle|Create"), "library set-up (streams, events)"),
    (re.compile(r"Module|Library|Function|FuncGet"), "module or library load"),
)


def enclosing_op(ctx: TraceContext, i: int) -> str:
    """The innermost cpu_op on the same thread around runtime call ``i`` ("" when none)."""
    t0, t1 = ctx.rt_ts[i], ctx.rt_ts[i] + ctx.rt_dur[i]
    m = (ctx.op_tid == ctx.rt_tid[i]) & (ctx.op_ts <= t0) & (ctx.op_ts + ctx.op_dur >= t1)
    idx = np.nonzero(m)[0]
    if idx.size == 0:
        return ""
    return ctx.names[int(ctx.op_name[idx[np.argmin(ctx.op_dur[idx])]])]


def _what(ctx: TraceContext, i: int, context: np.ndarray) -> str:
    name = ctx.names[int(ctx.rt_name[i])]
    if i in context:
        return "CUDA context creation, among the process's first CUDA calls"
    if ctx.sync_mask[i]:  # one-time only when it waited for nothing (onetime.waits_for_nothing)
        return (
            "a sync before any GPU work was queued: it waits for nothing, so its time is set-up "
            "(CUDA context creation on the process's first CUDA call)"
        )
    return next((w for p, w in _WHAT if p.search(name)), "a one-time runtime call")


def _outermost(ctx: TraceContext, ops: np.ndarray) -> np.ndarray:
    """Those of ``ops`` (first calls) not inside another of them, longest first."""
    ts, end = ctx.op_ts[ops], ctx.op_ts[ops] + ctx.op_dur[ops]
    inner = np.zeros(ops.size, dtype=bool)
    for k in range(ops.size):
        inner[k] = bool(
            (
                (ts <= ts[k])
                & (end >= end[k])
                & (np.arange(ops.size) != k)
                & (ctx.op_tid[ops] == ctx.op_tid[ops[k]])
            ).any()
        )
    top = ops[~inner]
    return top[np.argsort(-ctx.op_dur[top], kind="stable")]


def _first_call(ctx: TraceContext, i: int) -> str:
    """``"the first aten::mul_ 2.7 ms (its later calls 20 µs): a first call's set-up"``."""
    name = ctx.names[int(ctx.op_name[i])]
    same = (ctx.op_name == ctx.op_name[i]) & (ctx.op_tid == ctx.op_tid[i])
    later = float(np.median(ctx.op_dur[same & (ctx.op_ts > ctx.op_ts[i])]))
    typical = f"{later / 1e3:,.1f} ms" if later >= 1000 else f"{later:,.0f} µs"
    return (
        f"the first {name} {ctx.op_dur[i] / 1e3:,.1f} ms (its later calls {typical} median): "
        "a first call's one-time set-up (lazy initialisation, the allocator's first growth, a "
        "first kernel load)"
    )


def _kernel(ctx: TraceContext, i: int) -> str:
    k = np.nonzero(ctx.gpu_rt == i)[0]
    return ctx.names[int(ctx.gpu_name[k[0]])] if k.size else ""


@rule("one-time-start")
def one_time_start(ctx: TraceContext) -> list[Finding]:
    """One-time calls and warm-up steps: how long, what share of the profiled time, which call
    in which op; the GPU idle they cause is set apart from the steady-state verdicts."""
    calls = ctx.one_time_calls
    spans = ctx.one_time_spans
    if ctx.rt_ts.size == 0:
        return [
            Finding(
                id="one-time-start",
                status=Status.SKIPPED,
                title="One-time start-up: skipped: no CUDA runtime calls in the trace",
                group=GROUP,
            )
        ]
    warm = ctx.warmup
    warm_us = sum(s.end - s.start for s in warm)
    lost, share = ctx.one_time_share
    # the slow leading steps left out are unsteady-window's, less their one-time calls: ours
    lead_calls = ctx.unsteady_lead_calls_us
    whole = float(ctx.step_durations.sum()) + warm_us + ctx.unsteady_lead_us + lead_calls
    idle = lost - warm_us - lead_calls
    typical = typical_launch_us(ctx)
    evidence = [
        Evidence("one_time_calls", int(calls.size)),
        Evidence("one_time_first_calls", int(ctx.first_calls.size)),
        Evidence("one_time_call_time", round(float(ctx.rt_dur[calls].sum()), 1), "µs"),
        Evidence("one_time_host_stretches", spans.size),
        Evidence("one_time_host_time", round(float((spans.end - spans.start).sum()), 1), "µs"),
        Evidence("gpu_idle_in_one_time_calls", round(idle, 1), "µs"),
        Evidence("warmup_steps", len(warm)),
        Evidence("warmup_step_time", round(warm_us, 1), "µs"),
        Evidence("share_of_profiled_time", pct(share), "%"),
        Evidence("typical_launch", round(typical, 2), "µs"),
        Evidence("threshold_call", max(ONE_TIME_MIN_US, ONE_TIME_FACTOR * float(typical)), "µs"),
    ]
    if share < ONE_TIME_NEGLIGIBLE_FRACTION and not warm:
        return [
            Finding(
                id="one-time-start",
                status=Status.OK,
                title="No one-time start-up cost worth noting in the profiled steps"
                + (f" ({pct(share)} % of the time)" if calls.size else ""),
                evidence=tuple(evidence),
                group=GROUP,
            )
        ]
    first = context_calls(ctx, calls)
    biggest = calls[np.argsort(-ctx.rt_dur[calls], kind="stable")][:_DETAILS]
    long = np.argsort(-(spans.end - spans.start), kind="stable")[:_DETAILS]
    details = [
        f"{spans.what[i]}: {(spans.end[i] - spans.start[i]) / 1e3:,.1f} ms" for i in long.tolist()
    ]
    for i in biggest:
        op = enclosing_op(ctx, int(i))
        kernel = _kernel(ctx, int(i))
        details.append(
            f"{ctx.names[int(ctx.rt_name[i])]} {ctx.rt_dur[i] / 1e3:,.1f} ms"
            + (f" in {op}" if op else "")
            + (f" launching {kernel}" if kernel else "")
            + f": {_what(ctx, int(i), first)}"
        )
    ops = ctx.first_calls  # in the analysed steps or the warm-up ones
    # a compiled region's or graph call's slow first run is a host stretch above, named so
    compiled = P.COMPILED_REGION.mask(ctx.op_name[ops], ctx.names) | P.COMPILED_CALL.mask(
        ctx.op_name[ops], ctx.names
    )
    top_ops = _outermost(ctx, ops[~compiled])
    for i in top_ops[:_DETAILS]:
        details.append(_first_call(ctx, int(i)))
    for s in warm:
        details.append(
            f"step #{s.number}: {(s.end - s.start) / 1e3:,.1f} ms, left out as warm-up "
            f"(steps #{ctx.steps[0].number}..#{ctx.steps[-1].number} analysed)"
        )
    if lead_calls > 0:
        nums = ", ".join(f"#{f.number}" for f in ctx.unsteady_lead)
        details.append(
            f"{lead_calls / 1e3:,.1f} ms of one-time calls in {nums}, left out as warm-up not "
            "over (the rest of their time is unsteady-window's)"
        )
    # the largest one-time cost: a runtime call, a compiled run's host stretch, or a first call
    # that the one-time runtime call inside it does not explain
    largest: list[tuple[float, str]] = []
    if biggest.size:
        i = int(biggest[0])
        op = enclosing_op(ctx, i)
        largest.append(
            (
                float(ctx.rt_dur[i]),
                f"a {ctx.rt_dur[i] / 1e3:,.1f} ms {ctx.names[int(ctx.rt_name[i])]}"
                + (f" in {op}" if op else "")
                + f", {_what(ctx, i, first)}",
            )
        )
    if long.size:
        i = int(long[0])
        span = float(spans.end[i] - spans.start[i])
        largest.append((span, f"{spans.what[i]}, {span / 1e3:,.1f} ms"))
    if top_ops.size and (not biggest.size or ctx.op_dur[top_ops[0]] > 2 * ctx.rt_dur[biggest[0]]):
        largest.append((float(ctx.op_dur[top_ops[0]]), _first_call(ctx, int(top_ops[0]))))
    parts = [f"the largest: {max(largest)[1]}"] if largest else []
    if warm:
        parts.append(
            f"{'step' if len(warm) == 1 else 'steps'} "
            + ", ".join(f"#{s.number}" for s in warm)
            + " left out as warm-up"
        )
    title = (
        f"One-time start-up: {lost / 1e3:,.1f} ms of the {whole / 1e3:,.1f} ms profiled "
        f"({pct(share)} %); " + "; ".join(parts) + ". The steady-state verdicts judge the rest"
    )
    return [
        Finding(
            id="one-time-start",
            status=Status.WARN if share >= ONE_TIME_WARN_FRACTION else Status.INFO,
            title=title,
            evidence=tuple(evidence),
            fix="profile after warm-up: torch.profiler.profile(schedule=torch.profiler."
            "schedule(wait=1, warmup=1, active=3), ...) and prof.step() each iteration, so "
            "context creation, module loads, compiling and autotuning fall before the recorded "
            "steps",
            group=GROUP,
            details=tuple(details),
        )
    ]
