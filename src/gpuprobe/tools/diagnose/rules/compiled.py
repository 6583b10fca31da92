"""torch.compile and CUDA graphs: which of the step's work runs compiled (TorchDynamo's
regions, Triton kernels, graph replays), what a Kineto trace shows going wrong with it, and
what advice fits the run (:func:`compiled_run`, :func:`remedy`: the other rules ask here rather
than saying "torch.compile(model)" to a run that is compiled already).

What goes wrong, as a trace shows it: compiling inside the profiled steps (a recompile, or the
first compile), one run of a region far slower than its others (autotuning, graph recording,
lazy loading on a first run), and graph breaks (a region opening inside another: TorchDynamo
runs the rest of a frame after a break as a frame of its own, with the eager code between
them). A first pass's compiling and slow first runs are one-time costs
(:func:`.onetime.one_time_spans`): reported as such and set apart from the steady-state
verdicts, like one-time-start's calls; compiling that recurs in most steps is a steady cost
and warns.

What a trace cannot show: why a guard failed (``TORCH_LOGS=recompiles`` says), where a break is
in the source (``torch._dynamo.explain``), or a compile that happened before profiling started
(only its compile id, ``F/C`` with C > 0, is left to see).
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.intervals import merge_intervals, overlap
from gpuprobe.tools.diagnose.kernels import PROVENANCE_COMPILER, provenance_of_activities
from gpuprobe.tools.diagnose.kineto import GPU_KIND_KERNEL
from gpuprobe.tools.diagnose.onetime import (
    REGION_SLOW_FACTOR,
    REGION_SLOW_MIN_RUNS,
    REGION_SLOW_MIN_US,
    compile_spans,
    compiling_recurs,
    slow_compiled_runs,
)
from gpuprobe.tools.diagnose.rules._common import GROUP, pct, steady_total

__all__ = [
    "COMPILED_STEP_FRACTION",
    "EAGER_LEFT_FRACTION",
    "REGION_SLOW_FACTOR",
    "REGION_SLOW_MIN_RUNS",
    "REGION_SLOW_MIN_US",
    "REMEDIES",
    "CompiledRun",
    "compiled_regions",
    "compiled_run",
    "one_off_us",
    "remedy",
]

COMPILED_STEP_FRACTION = 0.5  # of the analysed steps' kernels launched by compiled code (inside
# a compiled region or graph call, a compiler's kernel, a CUDA-graph replay) from which the
# step's work is compiled: "torch.compile(model)" is no advice for it any more; ours
EAGER_LEFT_FRACTION = 0.1  # of those kernels launched outside compiled code, from which a
# compiled run is told to compile that eager code too (graph breaks, the loss, the optimizer);
# ours

_RECOMPILE_FIX = (
    "profile after warm-up (torch.profiler.schedule(wait=1, warmup=2, active=3) with the "
    "compiled model already run on every input shape); if compiling recurs in steady state it "
    "is a recompile: TORCH_LOGS=recompiles names the failed guard; mark changing dimensions "
    "dynamic (torch._dynamo.mark_dynamic(x, 0), or torch.compile(dynamic=True)) or pad inputs "
    "to a few fixed shapes"
)
_BREAK_FIX = (
    "find the breaks with torch._dynamo.explain(model)(*inputs) or TORCH_LOGS=graph_breaks, "
    "and remove them (no .item()/.tolist()/print/numpy in forward, no data-dependent Python "
    "branches); torch.compile(model, fullgraph=True) turns a break into an error"
)


# -- what runs compiled, and the advice that fits ------------------------------------------------


@dataclass(frozen=True)
class CompiledRun:
    """How much of the analysed steps' work is compiled: kernels in all, those launched by
    compiled code (inside a TorchDynamo region or a compiled-graph call, an Inductor (Triton)
    kernel, or replayed from a CUDA/HIP graph; a library's own Triton kernels, vLLM's say, are
    not torch.compile's), the graph replays, whether any Inductor kernel ran, and the frames
    compiled more than once."""

    kernels: int
    compiled_kernels: int
    graph_launches: int
    graphs_per_step: float
    graph_share: float  # of the steps' GPU time replayed from graphs
    compiler_kernels: bool
    compiled_calls: int  # region runs and compiled-graph calls
    recompiled: int  # frames with a compile id above 0

    @property
    def share(self) -> float:
        """The share of the steps' kernels launched by compiled code (0 without kernels)."""
        return self.compiled_kernels / self.kernels if self.kernels else 0.0

    @property
    def any(self) -> bool:
        """Any compiled code in the steps."""
        return self.compiled_kernels > 0 or self.compiled_calls > 0 or self.graph_launches > 0

    @property
    def compiled(self) -> bool:
        """The step's work is compiled (:data:`COMPILED_STEP_FRACTION` of its kernels)."""
        return self.share >= COMPILED_STEP_FRACTION

    @property
    def graphs(self) -> bool:
        """The step replays CUDA/HIP graphs."""
        return self.graph_launches > 0

    @property
    def eager_share(self) -> float:
        """The share of the steps' kernels launched outside compiled code."""
        return 1.0 - self.share if self.kernels else 0.0


_RUNS: WeakKeyDictionary[TraceContext, CompiledRun] = WeakKeyDictionary()


def _inside(
    ts: np.ndarray, tid: np.ndarray, spans: dict[int, tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    """Whether each time ``ts`` on thread ``tid`` falls in that thread's merged ``spans``
    (key -1: spans of any thread)."""
    out = np.zeros(ts.size, dtype=bool)
    for key, (s, e) in spans.items():
        if s.size == 0:
            continue
        m = np.ones(ts.size, dtype=bool) if key == -1 else tid == key
        k = np.searchsorted(s, ts[m], side="right") - 1
        out[m] |= (k >= 0) & (ts[m] < e[np.maximum(k, 0)])
    return out


def compiled_run(ctx: TraceContext) -> CompiledRun:
    """What of the analysed steps runs compiled (cached per trace context)."""
    got = _RUNS.get(ctx)
    if got is not None:
        return got
    sel = (ctx.gpu_step >= 0) & (ctx.gpu_kind == GPU_KIND_KERNEL)
    ops = P.COMPILED_REGION.mask(ctx.op_name, ctx.names) | P.COMPILED_CALL.mask(
        ctx.op_name, ctx.names
    )
    fx = P.COMPILED_CALL.mask(ctx.ann_name, ctx.names)
    compiled = sel & ctx.graph_kernel_mask
    compiler = sel & P.INDUCTOR_KERNEL.mask(ctx.gpu_name, ctx.names)
    compiled |= compiler
    if ops.any() or fx.any():
        spans = {
            int(t): merge_intervals(
                ctx.op_ts[ops & (ctx.op_tid == t)],
                (ctx.op_ts + ctx.op_dur)[ops & (ctx.op_tid == t)],
            )
            for t in np.unique(ctx.op_tid[ops]).tolist()
        }
        spans[-1] = merge_intervals(ctx.ann_ts[fx], ctx.ann_ts[fx] + ctx.ann_dur[fx])
        launched = sel & (ctx.gpu_rt >= 0)
        rt = ctx.gpu_rt[launched]
        hit = _inside(ctx.rt_ts[rt], ctx.rt_tid[rt], spans)
        idx = np.nonzero(launched)[0]
        compiled[idx[hit]] = True
    gpu_sel = ctx.gpu_step >= 0
    total = float(ctx.gpu_dur[gpu_sel].sum())
    graph_launches = int((P.GRAPH_LAUNCH.mask(ctx.rt_name, ctx.names) & (ctx.rt_step >= 0)).sum())
    reg = P.COMPILED_REGION.mask(ctx.op_name, ctx.names) & (ctx.op_step >= 0)
    run = CompiledRun(
        kernels=int(sel.sum()),
        compiled_kernels=int(compiled.sum()),
        graph_launches=graph_launches,
        graphs_per_step=graph_launches / max(len(ctx.steps), 1),
        graph_share=float(ctx.gpu_dur[gpu_sel & ctx.graph_kernel_mask].sum()) / total
        if total > 0
        else 0.0,
        compiler_kernels=bool(compiler.any()),
        compiled_calls=int((ops & (ctx.op_step >= 0)).sum())
        + int((fx & (ctx.ann_step >= 0)).sum()),
        recompiled=sum(1 for c in _ids(ctx, reg).values() if max(c) > 0),
    )
    _RUNS[ctx] = run
    return run


# The advice each rule needs, by what the run is: eager (no compiled code), compiled (most of
# its kernels from compiled code, without CUDA graphs), graphs (replaying CUDA/HIP graphs), or
# partly compiled (compiled code, but most kernels launched eagerly). {share}, {eager},
# {graphs}, {graph_share} and {extra} are filled in by remedy().
_FIND_BREAKS = (
    "look for graph breaks and recompiles, which leave eager code and extra launches between "
    "the compiled graphs (TORCH_LOGS=recompiles,graph_breaks; torch._dynamo.explain(model)"
    "(*inputs))"
)
_GRAPHS = "replay it as CUDA graphs: torch.compile(model, mode='reduce-overhead') (or "
_GRAPHS += "mode='max-autotune', which also tunes the kernels)"
REMEDIES: dict[str, dict[str, str]] = {
    "launch": {
        "eager": "give each kernel more work (a larger batch); fuse ops with "
        "torch.compile(model); capture the step in a CUDA graph "
        "(torch.compile(mode='reduce-overhead'))",
        "partly": "only {share} % of the step's kernels come from compiled code: compile the "
        "code that launches the others too (torch.compile on the functions that run eagerly), "
        "and " + _FIND_BREAKS + "; give each kernel more work (a larger batch)",
        "compiled": "the step is compiled already ({share} % of its kernels from compiled "
        "code): " + _GRAPHS + "; " + _FIND_BREAKS + "{extra}; give each kernel more work "
        "(a larger batch)",
        "graphs": "the step already replays CUDA graphs ({graphs} per step, {graph_share} % of "
        "its GPU time): give each kernel more work (a larger batch), take host syncs out of the "
        "step (each one drains the queue the replays keep full), and bring into the graphs what "
        "still launches one kernel at a time ({eager} % of the kernels: graph breaks, or ops "
        "CUDA graphs cannot hold: TORCH_LOGS=graph_breaks,perf_hints names them)",
    },
    "launch-brief": {
        "eager": "larger batches, torch.compile(model), CUDA graphs",
        "partly": "compile the code that runs eagerly ({eager} % of the kernels), larger batches",
        "compiled": "CUDA graphs (mode='reduce-overhead'), fewer graph breaks, larger batches",
        "graphs": "larger batches, fewer host syncs, more of the step in its CUDA graphs",
    },
    "short": {
        "eager": "fuse small kernels: torch.compile(model), or larger tensors per kernel",
        "partly": "fuse small kernels: compile the code that runs eagerly ({eager} % of the "
        "kernels), or larger tensors per kernel",
        "compiled": "the kernels are short though compiled: larger tensors per kernel (a "
        "larger batch), or CUDA graphs (mode='reduce-overhead') to launch them back to back",
        "graphs": "the kernels are short though replayed from CUDA graphs: larger tensors per "
        "kernel (a larger batch)",
    },
    "overhead": {
        "eager": "Give each op more work (a larger batch), cut the ops per step "
        "(torch.compile(model)) or replay the step as a CUDA graph",
        "partly": "Give each op more work (a larger batch), or compile the code that runs "
        "eagerly ({eager} % of the kernels: torch.compile on the functions that launch them)",
        "compiled": "The step is compiled already: "
        + _GRAPHS
        + "; "
        + _FIND_BREAKS
        + "{extra}; give each op more work (a larger batch)",
        "graphs": "The step replays CUDA graphs already ({graphs} per step): what is left on "
        "the host runs outside them; give each op more work (a larger batch), take host syncs "
        "out of the step, and bring the eager part ({eager} % of the kernels) into the graphs",
    },
    "first-call": {
        "eager": "a first TorchScript or torch.compile call does this once: profile after warm-up",
        "compiled": "a compiled run's first calls compile, autotune, record CUDA graphs and "
        "load kernels with nothing traced: profile after warm-up (every input shape run once "
        "first); if it recurs, TORCH_LOGS=recompiles names the guard that fails",
    },
}


def _state(run: CompiledRun) -> str:
    if not run.any:
        return "eager"
    if run.graphs:
        return "graphs"
    return "compiled" if run.compiled else "partly"


def remedy(ctx: TraceContext, need: str) -> str:
    """The advice for ``need`` (a key of :data:`REMEDIES`: ``launch``, ``launch-brief``,
    ``short``, ``overhead``, ``first-call``) that fits this run: eager, partly compiled,
    compiled, or replaying CUDA graphs (:func:`compiled_run`). A compiled run is never told to
    use torch.compile(model)."""
    run = compiled_run(ctx)
    state = _state(run)
    table = REMEDIES[need]
    text = table.get(state) or table["compiled"]
    extra = ""
    if state == "compiled" and run.eager_share >= EAGER_LEFT_FRACTION:
        extra = (
            f"; {pct(run.eager_share)} % of the kernels still launch eagerly, between the "
            "compiled regions: compile that code too"
        )
    if state == "compiled" and not run.compiler_kernels and run.compiled_calls:
        extra += (
            "; no Triton kernel ran: if the backend is not Inductor (aot_eager, a custom "
            "backend), the default backend='inductor' fuses the pointwise ops"
        )
    if run.recompiled and state in ("compiled", "partly"):
        extra += f"; {run.recompiled} frame(s) compiled more than once (TORCH_LOGS=recompiles)"
    return text.format(
        share=pct(run.share),
        eager=pct(run.eager_share),
        graphs=f"{run.graphs_per_step:.0f}",
        graph_share=pct(run.graph_share),
        extra=extra,
    )


def _breaks(
    ctx: TraceContext, reg: np.ndarray, calls: np.ndarray, fx: np.ndarray
) -> tuple[list[tuple[int, int]], int, float]:
    """Graph breaks: (outer region op, inner region op) pairs where a region opens inside
    another on the same thread; and the eager ATen ops run inside an outer region outside its
    compiled-graph calls (``calls`` ops; ``fx`` annotations, which carry no thread) and inner
    regions (count of the outermost ones, their time in µs)."""
    pairs: list[tuple[int, int]] = []
    idx = np.nonzero(reg)[0]
    for tid in np.unique(ctx.op_tid[idx]).tolist():
        on = idx[ctx.op_tid[idx] == tid]
        on = on[np.lexsort((-ctx.op_dur[on], ctx.op_ts[on]))]
        stack: list[int] = []
        for i in on.tolist():
            while stack and ctx.op_ts[stack[-1]] + ctx.op_dur[stack[-1]] <= ctx.op_ts[i]:
                stack.pop()
            if stack:
                pairs.append((stack[-1], i))
            stack.append(i)
    if not pairs:
        return pairs, 0, 0.0
    aten = np.fromiter(
        (n.startswith("aten::") for n in ctx.names), dtype=bool, count=len(ctx.names)
    )[ctx.op_name]
    compiled = calls | reg
    fx_idx = np.nonzero(fx)[0]
    fx_idx = fx_idx[np.argsort(ctx.ann_ts[fx_idx], kind="stable")]
    fx_ts = ctx.ann_ts[fx_idx]
    by_thread: dict[int, np.ndarray] = {}
    eager_n, eager_us = 0, 0.0
    for outer in sorted({o for o, _ in pairs}):
        lo, hi, tid = ctx.op_ts[outer], ctx.op_ts[outer] + ctx.op_dur[outer], int(ctx.op_tid[outer])
        if tid not in by_thread:
            on = np.nonzero(ctx.op_tid == tid)[0]
            by_thread[tid] = on[np.argsort(ctx.op_ts[on], kind="stable")]
        on = by_thread[tid]
        window = on[
            np.searchsorted(ctx.op_ts[on], lo, side="left") : np.searchsorted(
                ctx.op_ts[on], hi, side="right"
            )
        ]
        window = window[(ctx.op_ts[window] + ctx.op_dur[window] <= hi) & (window != outer)]
        # what is compiled inside this region: its graph calls and the regions nested in it
        inner = window[compiled[window]]
        fxw = fx_idx[np.searchsorted(fx_ts, lo, "left") : np.searchsorted(fx_ts, hi, "right")]
        cs, ce = merge_intervals(
            np.concatenate([ctx.op_ts[inner], ctx.ann_ts[fxw]]),
            np.concatenate(
                [ctx.op_ts[inner] + ctx.op_dur[inner], ctx.ann_ts[fxw] + ctx.ann_dur[fxw]]
            ),
        )
        cand = window[aten[window]]
        ts, end = ctx.op_ts[cand], ctx.op_ts[cand] + ctx.op_dur[cand]
        j = np.searchsorted(cs, ts, side="right") - 1
        inside = (j >= 0) & (ts < ce[np.maximum(j, 0)]) if cs.size else np.zeros(ts.size, bool)
        ts, end = ts[~inside], end[~inside]
        order = np.lexsort((-(end - ts), ts))
        last_end = -np.inf
        for k in order.tolist():
            if ts[k] >= last_end:  # outermost: not inside the previous outermost op
                eager_n += 1
                eager_us += float(end[k] - ts[k])
                last_end = end[k]
    return pairs, eager_n, eager_us


def _share(x: float | None) -> str:
    """A share as "12.3 %" ("< 0.1 %" when small but not zero)."""
    if x is None:
        return "n/a"
    return "< 0.1 %" if 0 < x < 0.0005 else f"{pct(x)} %"


def _n(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


def _ids(ctx: TraceContext, reg: np.ndarray) -> dict[int, set[int]]:
    """Frame id -> the compile ids of its regions run in the selected steps."""
    out: dict[int, set[int]] = {}
    for nid in np.unique(ctx.op_name[reg]).tolist():
        m = P.COMPILED_REGION.pattern.match(ctx.names[nid])
        if m and m.group("frame") is not None:
            out.setdefault(int(m.group("frame")), set()).add(int(m.group("compile")))
    return out


def _compile_spans(ctx: TraceContext) -> tuple[np.ndarray, np.ndarray, int]:
    """The union of the compile work inside the selected steps (dynamo_timed spans, compiler
    ops and Python frames), and how many such events there are."""
    starts, ends = [], []
    n = 0
    for ts, dur, name, step in (
        (ctx.ann_ts, ctx.ann_dur, ctx.ann_name, ctx.ann_step),
        (ctx.op_ts, ctx.op_dur, ctx.op_name, ctx.op_step),
        (ctx.py_ts, ctx.py_dur, ctx.py_name, ctx.step_of(ctx.py_ts)),
    ):
        m = P.COMPILE_WORK.mask(name, ctx.names) & (step >= 0)
        n += int(m.sum())
        starts.append(ts[m])
        ends.append(ts[m] + dur[m])
    s, e = merge_intervals(np.concatenate(starts), np.concatenate(ends))
    return s, e, n


@rule("compiled-regions")
def compiled_regions(ctx: TraceContext) -> list[Finding]:
    """torch.compile regions, Triton kernels and CUDA-graph replays in the step; a warning when
    the trace shows compiling in most steps (recompiles) or a graph break; a first pass's
    compiling and slow first runs are one-time costs (information, set apart from the steady
    state: :func:`.onetime.one_time_spans`)."""
    in_op = ctx.op_step >= 0
    reg = P.COMPILED_REGION.mask(ctx.op_name, ctx.names) & in_op
    calls = P.COMPILED_CALL.mask(ctx.op_name, ctx.names) & in_op
    fx = P.COMPILED_CALL.mask(ctx.ann_name, ctx.names) & (ctx.ann_step >= 0)
    fx_calls = int(fx.sum())
    gpu_sel = ctx.gpu_step >= 0
    gpu_total = float(ctx.gpu_dur[gpu_sel].sum())
    prov = provenance_of_activities(ctx)
    triton = gpu_sel & (prov == PROVENANCE_COMPILER)
    replayed = gpu_sel & ctx.graph_kernel_mask
    graph_calls = int((P.GRAPH_LAUNCH.mask(ctx.rt_name, ctx.names) & (ctx.rt_step >= 0)).sum())
    cs, ce, compile_events = _compile_spans(ctx)
    compile_us = float((ce - cs).sum())
    if not (reg.any() or calls.any() or fx_calls or triton.any() or graph_calls or compile_events):
        return [
            Finding(
                id="compiled-regions",
                status=Status.SKIPPED,
                title="Compiled code: skipped: no torch.compile regions, Triton kernels or "
                "CUDA-graph replays in the steps analysed",
                group=GROUP,
            )
        ]
    # a gain is a share of the steady time, as every other; compiling that recurs (the only
    # compiling with a gain) is steady, a first pass's compiling and slow runs are start-up
    analysed = steady_total(ctx)
    timed = float(ctx.timed_durations.sum())
    frames = _ids(ctx, reg)
    recompiled = sorted(f for f, c in frames.items() if max(c) > 0)
    pairs, eager_n, eager_us = _breaks(ctx, reg, calls, fx)
    slow = slow_compiled_runs(ctx, reg | calls)
    recurs = compile_events > 0 and compiling_recurs(ctx, compile_spans(ctx)[0])
    run = compiled_run(ctx)
    triton_share = float(ctx.gpu_dur[triton].sum()) / gpu_total if gpu_total > 0 else None
    graph_share = float(ctx.gpu_dur[replayed].sum()) / gpu_total if gpu_total > 0 else None
    evidence = (
        Evidence("compiled_region_runs", int(reg.sum())),
        Evidence("frames", len(frames)),
        Evidence("compiled_graph_calls", int(calls.sum()) + fx_calls),
        Evidence("compiler_kernel_share", pct(triton_share), "%"),
        Evidence("compiled_kernel_share", pct(run.share), "%"),
        Evidence("graph_replays", graph_calls),
        Evidence("graph_replayed_share", pct(graph_share), "%"),
        Evidence("compiling", round(compile_us, 1), "µs"),
        Evidence("compiling_recurs", recurs),
        Evidence("graph_breaks", len(pairs)),
    )
    details: list[str] = []
    for f in sorted(frames):
        ids = ", ".join(f"{f}/{c}" for c in sorted(frames[f]))
        again = " (compiled more than once: a recompile, before or during the profile)"
        details.append(f"frame {f}: regions {ids}" + (again if max(frames[f]) > 0 else ""))
    problems: list[str] = []  # steady costs: warnings
    once: list[str] = []  # a first pass's one-time costs: information
    fixes: list[str] = []
    gain_us = 0.0
    if compile_events:
        share = compile_us / timed if timed > 0 else 0.0
        what = (
            f"TorchDynamo/Inductor compiled for {compile_us / 1000:,.1f} ms inside the profiled "
            f"steps ({pct(share)} % of them)"
        )
        if recurs:
            problems.append(what + ", in most of the steps: recompiles, a steady cost")
            gain_us += compile_us
        else:
            once.append(
                what + ": a first pass's one-time cost, set apart from the steady-state verdicts"
            )
        fixes.append(_RECOMPILE_FIX)
    for i, rest, runs in slow:
        top, lo = float(ctx.op_dur[i]), float(ctx.op_ts[i])
        name = ctx.op_name[i]
        first = not bool(((reg | calls) & (ctx.op_name == name) & (ctx.op_ts < lo)).any())
        inside = overlap(cs, ce, lo, lo + top)
        once.append(
            f"{'the first' if first else 'one'} run of {ctx.names[int(name)]} took "
            f"{top / 1000:,.1f} ms, its other {runs - 1} {rest / 1000:,.2f} ms (median): a "
            "one-time cost (autotuning, CUDA-graph recording, module loading"
            + (f"; {inside / 1000:,.1f} ms of it compiling" if inside > 0 else "")
            + ")"
        )
        if not fixes:
            fixes.append(_RECOMPILE_FIX)
    if pairs:
        inner = sorted({ctx.names[int(ctx.op_name[i])] for _, i in pairs})
        problems.append(
            f"{len(pairs)} graph break(s): {', '.join(inner[:3])} ran inside another compiled "
            f"region, with {eager_n} eager ATen ops ({eager_us:,.0f} µs on the host) between "
            "the compiled graphs"
        )
        fixes.append(_BREAK_FIX)
    said = problems + once
    if said:
        return [
            Finding(
                id="compiled-regions",
                status=Status.WARN if problems else Status.INFO,
                title=said[0] + (f"; and {len(said) - 1} more (below)" if len(said) > 1 else ""),
                evidence=evidence,
                fix="; ".join(dict.fromkeys(fixes)),
                group=GROUP,
                details=tuple(said[1:] + details),
                gain=min(gain_us / analysed, 1.0) if analysed > 0 and gain_us > 0 else None,
            )
        ]
    parts = []
    if reg.any():
        parts.append(f"{_n(int(reg.sum()), 'run')} of {_n(len(frames) or 1, 'compiled frame')}")
    elif calls.any() or fx_calls:
        parts.append(_n(int(calls.sum()) + fx_calls, "compiled-graph call"))
    if triton.any():
        parts.append(f"compiler-generated (Triton) kernels {_share(triton_share)} of GPU time")
    if graph_calls:
        parts.append(
            f"{_n(graph_calls, 'CUDA-graph replay')} running {_share(graph_share)} of GPU time"
        )
    if run.kernels:
        parts.append(f"{_share(run.share)} of the kernels launched by compiled code")
    if recompiled:
        details.insert(0, "no compiling seen inside the profiled steps")
    return [
        Finding(
            id="compiled-regions",
            status=Status.INFO,
            title="The step runs compiled code: " + "; ".join(parts),
            evidence=evidence,
            group=GROUP,
            details=tuple(details),
        )
    ]


def one_off_us(ctx: TraceContext) -> np.ndarray:
    """µs per analysed step that :func:`compiled_regions` counts as one-off (its gain): the
    compiling inside the step, and a far slower run's time above its region's median less the
    compiling inside that run (for unsteady-window, which leaves it to this rule)."""
    out = np.zeros(len(ctx.steps))
    cs, ce, _ = _compile_spans(ctx)
    for k in range(len(ctx.steps)):
        out[k] = overlap(cs, ce, float(ctx.step_starts[k]), float(ctx.step_ends[k]))
    reg = P.COMPILED_REGION.mask(ctx.op_name, ctx.names) & (ctx.op_step >= 0)
    for i, rest, _ in slow_compiled_runs(ctx, reg):
        top, lo = float(ctx.op_dur[i]), float(ctx.op_ts[i])
        out[ctx.op_step[i]] += max(top - rest - overlap(cs, ce, lo, lo + top), 0.0)
    return out
