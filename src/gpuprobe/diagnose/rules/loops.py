"""Python loops: one small op repeated many times per step from the same Python frame, where a
single indexed (vectorised) op would do (E10: 80-class segmentation map to 80 bit masks).
"""

from __future__ import annotations

import numpy as np

from gpuprobe.diagnose import patterns as P
from gpuprobe.diagnose.analysis import TraceContext, merge_intervals
from gpuprobe.diagnose.rules._common import GROUP, step_range
from gpuprobe.findings import Evidence, Finding, Status

__all__ = ["PYTHON_LOOP_MAX_OP_US", "PYTHON_LOOP_MIN_REPEATS", "python_loops"]

PYTHON_LOOP_MIN_REPEATS = 100  # calls of one op per step from one frame; ours (gpuprobe issue)
PYTHON_LOOP_MAX_OP_US = 100.0  # µs, median host time of the repeated op: "small"; ours
_SHOW = 3  # how many (frame, op) pairs to name
_UNKNOWN = "(unknown frame: no with_stack)"


def _in_dataloader(ctx: TraceContext) -> np.ndarray:
    """cpu_ops inside a DataLoader ``__next__`` (per-sample transforms: the input rule's case)."""
    dl = P.DATALOADER_NEXT.mask(ctx.ann_name, ctx.names)
    if not dl.any():
        return np.zeros(ctx.op_ts.size, dtype=bool)
    starts, ends = merge_intervals(ctx.ann_ts[dl], ctx.ann_ts[dl] + ctx.ann_dur[dl])
    k = np.searchsorted(starts, ctx.op_ts, side="right") - 1
    kk = np.maximum(k, 0)
    return (k >= 0) & (ctx.op_ts <= ends[kk])


def python_loops(ctx: TraceContext) -> list[Finding]:
    """Top-level ops grouped by (step, Python frame, op name); a group of ≥ 100 small calls in the
    median step is a Python loop over tensor elements. Ops inside DataLoader spans are left to
    the input rule (per-sample transforms run there by design)."""
    n = len(ctx.steps)
    sel = np.nonzero(ctx.op_top & (ctx.op_step >= 0) & ~_in_dataloader(ctx))[0]
    if sel.size == 0 or n == 0:
        return [
            Finding(
                id="python-loop",
                status=Status.SKIPPED,
                title="Python loops: skipped: no CPU ops in the profiled steps",
                group=GROUP,
            )
        ]
    frame = ctx.op_frame[sel] + 1  # 0 = unknown frame
    name = ctx.op_name[sel]
    step = ctx.op_step[sel]
    pair = frame.astype(np.int64) * (len(ctx.names) + 1) + name
    pairs, inverse = np.unique(pair, return_inverse=True)
    counts = np.zeros((pairs.size, n), dtype=np.int64)
    np.add.at(counts, (inverse, step), 1)
    per_step = np.median(counts, axis=1)
    found = []
    for p in np.nonzero(per_step >= PYTHON_LOOP_MIN_REPEATS)[0]:
        durs = ctx.op_dur[sel][inverse == p]
        med_us = float(np.median(durs))
        if med_us <= PYTHON_LOOP_MAX_OP_US:
            f = int(pairs[p] // (len(ctx.names) + 1)) - 1
            op = ctx.names[int(pairs[p] % (len(ctx.names) + 1))]
            where = ctx.names[f] if f >= 0 else _UNKNOWN
            found.append((float(per_step[p]), op, where, med_us, float(durs.sum()) / n))
    found.sort(key=lambda x: -x[0])
    if not found:
        return [
            Finding(
                id="python-loop",
                status=Status.OK,
                title=f"No op repeated ≥ {PYTHON_LOOP_MIN_REPEATS} times per step from one "
                f"frame ({step_range(ctx)})",
                evidence=(Evidence("threshold_repeats", PYTHON_LOOP_MIN_REPEATS),),
                group=GROUP,
            )
        ]
    top = found[0]
    frames = {w for _, _, w, _, _ in found}
    in_torch = all(P.LIBRARY_FRAME.matches(w) for w in frames)
    fix = (
        "replace the loop with one indexed op: e.g. masks = (seg[None] == "
        "torch.arange(80, device=seg.device)[:, None, None]) instead of a loop over classes; "
        "x[idx] instead of [x[i] for i in idx]; torch.where / scatter / gather for per-element "
        "updates"
    )
    if in_torch:
        fix = (
            "the loop is inside torch: use the multi-tensor paths, e.g. "
            "torch.optim.AdamW(params, foreach=True) or fused=True on CUDA; " + fix
        )
    evidence = (
        Evidence("repeats_per_step", top[0]),
        Evidence("op", top[1]),
        Evidence("frame", top[2]),
        Evidence("median_op", round(top[3], 2), "µs"),
        Evidence("loop_ops_time_per_step", round(sum(x[4] for x in found), 1), "µs"),
        Evidence("threshold_repeats", PYTHON_LOOP_MIN_REPEATS),
    )
    details = tuple(
        f"{op} ×{cnt:.0f} per step from {where} (median {med:.1f} µs)"
        for cnt, op, where, med, _ in found[:_SHOW]
    )
    known = top[2] != _UNKNOWN
    if not known:
        fix = "profile with with_stack=True to see the Python line; if it is a loop: " + fix
    return [
        Finding(
            id="python-loop",
            # without a stack, ops of a deep model (one per layer) look like a loop: say less
            status=Status.WARN if known else Status.INFO,
            title=f"Python loop: {top[1]} runs {top[0]:.0f} times per step from {top[2]}",
            evidence=evidence,
            fix=fix,
            group=GROUP,
            details=details,
        )
    ]
