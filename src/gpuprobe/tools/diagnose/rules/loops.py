"""Python loops: one small op repeated many times per step from the same place in the user's own
code, where a single indexed (vectorised) op would do (E10 in docs/experiments.md#e10: 80-class
segmentation map to 80 bit masks). The place is the first frame outside site-packages, the
standard library and torch; ops reached through a module call are the layers of a model, called
once per layer, not a loop. So are the ops of a module's own ``forward`` that looks like the
user's code because the profiler writes library paths relative to ``sys.path``
(``transformers/models/...``): those count per call of that forward, not per step. Ops inside
torch's optimizer spans (``Optimizer.zero_grad#SGD.zero_grad``, ``Optimizer.step#AdamW.step``)
are its per-parameter loop: named so, with the optimizer's fix (``set_to_none``, ``foreach``,
``fused``); the autograd engine's nodes (``AccumulateGrad``, once per parameter) are the backward
graph, a loop only beside one of the user's (a backward per row).
"""

from __future__ import annotations

import re

import numpy as np

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.rules._common import GROUP, step_range
from gpuprobe.tools.diagnose.rules._common import per_step as per

__all__ = ["PYTHON_LOOP_MAX_OP_US", "PYTHON_LOOP_MIN_REPEATS", "loop_ops", "python_loops"]

PYTHON_LOOP_MIN_REPEATS = 100  # calls of one op per step from one frame; ours (gpuprobe issue)
PYTHON_LOOP_MAX_OP_US = 100.0  # µs, median host time of the repeated op: "small"; ours
_SHOW = 3  # how many (frame, op) pairs to name


def _in_dataloader(ctx: TraceContext) -> np.ndarray:
    """cpu_ops inside a DataLoader ``__next__`` (per-sample transforms: the input rule's case)."""
    starts, ends = ctx.dataloader_intervals
    if starts.size == 0:
        return np.zeros(ctx.op_ts.size, dtype=bool)
    k = np.searchsorted(starts, ctx.op_ts, side="right") - 1
    kk = np.maximum(k, 0)
    return (k >= 0) & (ctx.op_ts <= ends[kk])


def _runs(ctx: TraceContext, sel: np.ndarray) -> np.ndarray:
    """For the top-level ops ``sel`` (in time order per thread), the length of the run of the
    same op name, back to back, that each belongs to."""
    out = np.ones(sel.size, dtype=np.int64)
    for tid in np.unique(ctx.op_tid[sel]):
        pos = np.nonzero(ctx.op_tid[sel] == tid)[0]
        pos = pos[np.argsort(ctx.op_ts[sel[pos]], kind="stable")]
        name = ctx.op_name[sel[pos]]
        cut = np.flatnonzero(np.diff(name)) + 1
        bounds = np.concatenate([[0], cut, [name.size]])
        lengths = np.diff(bounds)
        out[pos] = np.repeat(lengths, lengths)
    return out


def _skipped(title: str) -> list[Finding]:
    return [Finding(id="python-loop", status=Status.SKIPPED, title=title, group=GROUP)]


def _generated(ctx: TraceContext, frames: np.ndarray) -> np.ndarray:
    """For frame name ids ``frames`` (-1: none): code a compiler wrote (:data:`~.patterns.
    GENERATED_FRAME`: Inductor's output module, an FX graph), whose ops run once per op of the
    compiled graph, not once per iteration of the user's loop."""
    out = np.zeros(frames.size, dtype=bool)
    ok = frames >= 0
    if ok.any():
        ids, inv = np.unique(frames[ok], return_inverse=True)
        gen = np.array([P.GENERATED_FRAME.matches(ctx.names[int(i)]) for i in ids], dtype=bool)
        out[ok] = gen[inv]
    return out


def optimizer_span(ctx: TraceContext, ops: np.ndarray) -> str | None:
    """The optimizer span (:data:`~.patterns.OPTIMIZER_SPAN`: ``Optimizer.zero_grad#SGD.
    zero_grad``, ``## optimizer ##``) that holds most of the cpu_ops ``ops``, or None: torch's
    optimizer runs one op per parameter there (a loop in torch, not in the user's code)."""
    ids = P.OPTIMIZER_SPAN.ids(ctx.names)
    starts, ends, names = [], [], []
    for name, ts, dur in (
        (ctx.ann_name, ctx.ann_ts, ctx.ann_dur),
        (ctx.op_name, ctx.op_ts, ctx.op_dur),
    ):
        m = np.isin(name, ids)
        starts.append(ts[m])
        ends.append(ts[m] + dur[m])
        names.append(name[m])
    s, e, n = np.concatenate(starts), np.concatenate(ends), np.concatenate(names)
    if s.size == 0 or ops.size == 0:
        return None
    order = np.argsort(s, kind="stable")
    s, e, n = s[order], e[order], n[order]
    k = np.searchsorted(s, ctx.op_ts[ops], side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (ctx.op_ts[ops] + ctx.op_dur[ops] <= e[kk])
    if inside.sum() * 2 <= ops.size:
        return None
    held, counts = np.unique(n[kk[inside]], return_counts=True)
    return ctx.names[int(held[np.argmax(counts)])]


def _optimizer_fix(span: str, op: str) -> str:
    """The fix for a per-parameter loop inside optimizer ``span``."""
    m = re.match(r"^Optimizer\.\w+#(\w+)\.", span)
    cls = m.group(1) if m else ""
    if "zero_grad" in span:
        return (
            "optimizer.zero_grad(set_to_none=True) (the default since torch 2.0) drops the "
            f"gradients instead of running {op} on each one; with gradient accumulation, "
            "zero them once per update, not per micro-batch"
        )
    if cls and not cls.startswith("Fused"):
        return (
            f"torch.optim.{cls} runs {op} once per parameter: pass foreach=True (multi-tensor "
            "kernels over all the parameters) or fused=True on CUDA (one kernel)"
        )
    who = f"the optimizer ({cls})" if cls else "the optimizer"
    return (
        f"{who} still runs {op} once per parameter: find its per-parameter work (gradient "
        "clipping, loss scaling, weight decay or an EMA written as a loop) and use the "
        "torch._foreach_* forms, or a fused optimizer"
    )


def loop_ops(ctx: TraceContext) -> np.ndarray:
    """The top-level cpu_ops of the loops the rule reports, as indices: what one vectorised op
    would replace (:mod:`.gains` takes their host time out of the step)."""
    return np.asarray(_find(ctx)[1], dtype=np.int64)


def _find(
    ctx: TraceContext,
) -> tuple[list[tuple[float, str, str, float, float, set[str], str | None]], list[int]]:
    """(The loops: repeats per step, op, frame, median µs, µs per step, inner frames, the
    optimizer span holding them (:func:`optimizer_span`), most repeats first; the indices of
    their ops)."""
    n = len(ctx.steps)
    base = ctx.op_top & (ctx.op_step >= 0) & ~_in_dataloader(ctx)
    inner, user, under = ctx.op_frames
    stack = ctx.has_stack
    if stack:
        sel = np.nonzero(base & (user >= 0) & ~under & ~_generated(ctx, user))[0]
        key = user[sel]
    else:
        sel = np.nonzero(base)[0]
        sel = sel[_runs(ctx, sel) >= PYTHON_LOOP_MIN_REPEATS]
        key = np.zeros(sel.size, dtype=np.int64)
    # (frame, op) -> [repeats per step, durations, inner frames]; an op in a module's forward
    # is counted per call of that forward (per layer), the others per step
    loops: dict[tuple[int, int], list] = {}
    if sel.size and n:
        name = ctx.op_name[sel]
        step = ctx.op_step[sel]
        layer = ctx.op_layer_call[sel]
        groups, inverse = np.unique(
            np.stack([layer, key, name], axis=1), axis=0, return_inverse=True
        )
        inverse = inverse.reshape(-1)
        counts = np.zeros((groups.shape[0], n), dtype=np.int64)
        np.add.at(counts, (inverse, step), 1)
        per_step = np.median(counts, axis=1)
        for p in np.nonzero(per_step >= PYTHON_LOOP_MIN_REPEATS)[0]:
            mine = inverse == p
            got = loops.setdefault((int(groups[p, 1]), int(groups[p, 2])), [0.0, [], set(), []])
            got[0] = max(got[0], float(per_step[p]))
            got[1].append(ctx.op_dur[sel][mine])
            got[2] |= {int(i) for i in inner[sel][mine].tolist() if i >= 0}
            got[3].append(sel[mine])
    found = []
    ops: list[int] = []
    # the autograd engine's nodes (AccumulateGrad once per parameter, each backward function)
    # repeat by themselves in every backward: the backward graph, not a loop of the user's;
    # they count only beside a loop of the user's (a backward per row of a Python loop)
    node_ids = {int(i) for p in (P.EVALUATE_FUNCTION, P.AUTOGRAD_NODE) for i in p.ids(ctx.names)}
    spans = {key: optimizer_span(ctx, np.concatenate(v[3])) for key, v in loops.items()}
    users = any(k[1] not in node_ids and spans[k] is None for k in loops)
    for (f, op_id), (count, dur_parts, inner_ids, idx) in loops.items():
        durs = np.concatenate(dur_parts)
        med_us = float(np.median(durs))
        if med_us > PYTHON_LOOP_MAX_OP_US or (op_id in node_ids and not users):
            continue
        where = ctx.names[f] if stack and f >= 0 else "(no with_stack: frame unknown)"
        inner_names = {ctx.names[i] for i in inner_ids}
        mine = np.concatenate(idx)
        found.append(
            (
                count,
                ctx.names[op_id],
                where,
                med_us,
                float(durs.sum()) / n,
                inner_names,
                spans[(f, op_id)],
            )
        )
        ops.extend(mine.tolist())
    nodes = {ctx.names[i] for i in node_ids}
    found.sort(key=lambda x: (x[1] in nodes, -x[0]))  # the user's loop named first
    return found, ops


@rule("python-loop")
def python_loops(ctx: TraceContext) -> list[Finding]:
    """Top-level ops grouped by (step, user frame, op name); a group of ≥ 100 small calls in the
    median step is a Python loop over tensor elements. Without a stack, only back-to-back runs
    of one op (≥ 100 in a row) are reported, as a likely loop. Ops called from code a compiler
    generated (Inductor's output module, an FX graph) are the compiled graph's, not a loop."""
    n = len(ctx.steps)
    base = ctx.op_top & (ctx.op_step >= 0) & ~_in_dataloader(ctx)
    if not base.any() or n == 0:
        return _skipped("Python loops: skipped: no CPU ops in the profiled steps")
    stack = ctx.has_stack
    found, _ = _find(ctx)
    if not found:
        how = (
            "from one place in your code"
            if stack
            else "back to back (no with_stack: layers and loops look alike, so only runs count)"
        )
        return [
            Finding(
                id="python-loop",
                status=Status.OK,
                title=f"No op repeated ≥ {PYTHON_LOOP_MIN_REPEATS} times per step {how} "
                f"({step_range(ctx)})",
                evidence=(
                    Evidence("threshold_repeats", PYTHON_LOOP_MIN_REPEATS),
                    Evidence("with_stack", stack),
                ),
                group=GROUP,
            )
        ]
    top = found[0]
    in_torch = bool(top[5]) and all(P.LIBRARY_FRAME.matches(w) for w in top[5])
    fix = (
        "replace the loop with one indexed op: e.g. masks = (seg[None] == "
        "torch.arange(80, device=seg.device)[:, None, None]) instead of a loop over classes; "
        "x[idx] instead of [x[i] for i in idx]; torch.where / scatter / gather for per-element "
        "updates"
    )
    if in_torch:
        fix = (
            f"the loop runs inside torch ({sorted(top[5])[0]}): use its multi-tensor path, e.g. "
            "torch.optim.AdamW(params, foreach=True) or fused=True on CUDA; otherwise " + fix
        )
    if not stack:
        fix = "profile with with_stack=True to see the Python line; if it is a loop: " + fix
    span = top[6]
    if span is not None:  # torch's optimizer, one op per parameter: its own fix, stack or not
        fix = _optimizer_fix(span, top[1])
    loop_us = float(sum(x[4] for x in found))
    step_us = float(np.median(ctx.step_durations)) if len(ctx.steps) else 0.0
    evidence = (
        Evidence("repeats_per_step", top[0]),
        Evidence("op", top[1]),
        Evidence("frame", top[2]),
        *((Evidence("optimizer_span", span),) if span else ()),
        Evidence("median_op", round(top[3], 2), "µs"),
        Evidence("loop_ops_time_per_step", round(sum(x[4] for x in found), 1), "µs"),
        Evidence("threshold_repeats", PYTHON_LOOP_MIN_REPEATS),
    )
    details = tuple(
        f"{op} ×{cnt:.0f} per step from {where} (median {med:.1f} µs)"
        + (f", inside {sorted(inn)[0]}" if inn and sorted(inn)[0] != where else "")
        + (f", in {sp}" if sp else "")
        for cnt, op, where, med, _, inn, sp in found[:_SHOW]
    )
    title = (
        f"Per-parameter loop in {span}: {top[1]} runs {top[0]:.0f} times {per(ctx)}, once per "
        "parameter"
        if span is not None
        else f"Python loop: {top[1]} runs {top[0]:.0f} times {per(ctx)} from {top[2]}"
        if stack
        else f"Likely Python loop: {top[1]} runs {top[0]:.0f} times {per(ctx)} back to back"
    )
    return [
        Finding(
            id="python-loop",
            status=Status.WARN if stack else Status.INFO,
            title=title,
            evidence=evidence,
            fix=fix,
            group=GROUP,
            details=details,
            # the loop's ops on the host, most of which one vectorised op saves
            gain=min(loop_us / step_us, 1.0) if step_us > 0 else None,
        )
    ]
