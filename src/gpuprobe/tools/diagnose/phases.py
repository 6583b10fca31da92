"""Where each step goes on the host: the DataLoader's ``__next__``, the forward pass, the
backward pass, the optimizer, other CPU ops and the rest (untraced), per step in µs. A function
of a trace's :class:`~gpuprobe.tools.diagnose.columns.TraceColumns`, cached in
:class:`~gpuprobe.tools.diagnose.analysis.TraceContext`.

Each phase is the union of the spans that mark it (named patterns in :mod:`.patterns`), merged,
so nested spans and spans on several threads count once, as wall time covered:

- DataLoader: ``enumerate(DataLoader)#...__next__``;
- backward: the autograd engine's ``evaluate_function`` spans on any thread (PyTorch <= 1.9: the
  backward functions themselves), the backward call's Python frames (with_stack) and the
  backward spans of TorchRec and Lightning;
- forward: the modules' calls (``nn.Module: ...``, with_stack) and the forward spans of
  TorchRec and Lightning; without any of them the forward cannot be told from other ops, and
  its time is in ``cpu_ops`` (the key ``forward`` is then left out);
- optimizer: ``Optimizer.step#...`` and ``Optimizer.zero_grad#...`` (TorchRec's too); a span
  that holds backward time ran a closure (``optimizer.step(closure)``, as Lightning does: the
  forward, ``zero_grad`` and backward inside the optimizer's span), and only what follows the
  closure's last backward is the optimizer's;
- cpu_ops: the top-level cpu_ops of the loop's thread outside those spans (of every thread,
  merged, in a trace without ``ProfilerStep``: no loop to speak of, a server's threads);
- other: the rest of the step (Python between ops, code the profiler does not record).

Each instant goes to the first phase that covers it in :data:`PRECEDENCE`: backward before
forward and optimizer (activation checkpointing runs forward inside backward; a closure passed
to ``optimizer.step``, as Lightning does, runs forward and backward inside the optimizer's span).
So the phases of a step add up to its duration. Times in µs.
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.intervals import merge_intervals, overlaps, subtract_intervals
from gpuprobe.tools.diagnose.model import HOST_PHASES

__all__ = ["PRECEDENCE", "host_phases", "phase_dicts", "phase_summary"]

PRECEDENCE = ("dataloader", "backward", "forward", "optimizer", "cpu_ops")  # then "other"

Intervals = tuple[np.ndarray, np.ndarray]


def _spans(ctx: TraceColumns, pattern: P.NamePattern, kinds: str = "aop") -> Intervals:
    """The union of the events whose name matches ``pattern``, over annotations (``a``),
    cpu_ops (``o``: PyTorch <= 1.9 wrote record_function spans as ops) and Python frames
    (``p``)."""
    ids = pattern.ids(ctx.names)
    cols = {
        "a": (ctx.ann_name, ctx.ann_ts, ctx.ann_dur),
        "o": (ctx.op_name, ctx.op_ts, ctx.op_dur),
        "p": (ctx.py_name, ctx.py_ts, ctx.py_dur),
    }
    starts, ends = [np.zeros(0)], [np.zeros(0)]
    for k in kinds:
        name, ts, dur = cols[k]
        m = np.isin(name, ids)
        starts.append(ts[m])
        ends.append(ts[m] + dur[m])
    return merge_intervals(np.concatenate(starts), np.concatenate(ends))


def _after_closure(optimizer: Intervals, backward: Intervals) -> Intervals:
    """The optimizer's own part of its spans: one that holds a backward ran a closure, whose
    forward and backward come first; the optimizer's part starts where its last backward ends."""
    s, e = optimizer
    bs, be = backward
    if s.size == 0 or bs.size == 0:
        return optimizer
    last = np.searchsorted(bs, e, side="left") - 1  # the last backward starting before each end
    held = (last >= 0) & (bs[np.maximum(last, 0)] >= s)
    return np.where(held, np.minimum(np.maximum(s, be[np.maximum(last, 0)]), e), s), e


def _loop_thread(ctx: TraceColumns, top: np.ndarray, backward_op: np.ndarray) -> int | None:
    """The thread that runs the training loop: the one whose top-level cpu_ops outside backward
    take most of the steps' time (autograd may run backward on a thread of its own)."""
    m = top & (ctx.op_step >= 0) & ~backward_op
    if not m.any():
        return None
    return int(np.argmax(np.bincount(ctx.op_tid[m], weights=ctx.op_dur[m])))


def host_phases(ctx: TraceColumns, top: np.ndarray) -> tuple[np.ndarray, bool]:
    """(µs per step and phase: an array steps × :data:`~.model.HOST_PHASES`, whether the trace
    marks its forward pass). ``top``: the top-level cpu_ops (:func:`.frames.op_top`)."""
    n = len(ctx.steps)
    out = np.zeros((n, len(HOST_PHASES)))
    if n == 0:
        return out, False
    evaluate = P.EVALUATE_FUNCTION.mask(ctx.op_name, ctx.names)
    node = evaluate if evaluate.any() else P.AUTOGRAD_NODE.mask(ctx.op_name, ctx.names)
    bs, be = _spans(ctx, P.BACKWARD_SPAN)
    backward = merge_intervals(
        np.concatenate([bs, ctx.op_ts[node]]),
        np.concatenate([be, ctx.op_ts[node] + ctx.op_dur[node]]),
    )
    forward = _spans(ctx, P.FORWARD_SPAN)
    ops = top.copy()
    if any(st.number is not None for st in ctx.steps):  # a loop, stepped on one thread
        loop = _loop_thread(ctx, top, node)
        ops &= ctx.op_tid == loop
    spans: dict[str, Intervals] = {
        "dataloader": _spans(ctx, P.DATALOADER_NEXT, "ao"),
        "backward": backward,
        "forward": forward,
        "optimizer": _after_closure(_spans(ctx, P.OPTIMIZER_SPAN, "ao"), backward),
        "cpu_ops": merge_intervals(ctx.op_ts[ops], ctx.op_ts[ops] + ctx.op_dur[ops]),
    }
    claimed: Intervals = (np.zeros(0), np.zeros(0))
    for phase in PRECEDENCE:
        s, e = subtract_intervals(spans[phase], claimed)
        out[:, HOST_PHASES.index(phase)] = overlaps(s, e, ctx.step_starts, ctx.step_ends)
        claimed = merge_intervals(np.concatenate([claimed[0], s]), np.concatenate([claimed[1], e]))
    rest = ctx.step_durations - out.sum(axis=1)
    out[:, HOST_PHASES.index("other")] = np.maximum(rest, 0.0)
    return out, bool(forward[0].size)


def phase_dicts(per_step: np.ndarray, forward_marked: bool) -> list[dict[str, float]]:
    """Each step's phases as a dict (µs), without ``forward`` when the trace does not mark it
    (its time is then in ``cpu_ops``)."""
    keep = [p for p in HOST_PHASES if forward_marked or p != "forward"]
    cols = [HOST_PHASES.index(p) for p in keep]
    return [dict(zip(keep, (float(x) for x in row[cols]), strict=True)) for row in per_step]


def phase_summary(
    per_step: np.ndarray, forward_marked: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """(each phase's share of all the steps' time, which add up to 1; each phase's median over
    the steps, µs). Empty without steps or time."""
    total = float(per_step.sum())
    if per_step.size == 0 or total <= 0:
        return {}, {}
    keep = [p for p in HOST_PHASES if forward_marked or p != "forward"]
    cols = [HOST_PHASES.index(p) for p in keep]
    share = {p: float(per_step[:, c].sum()) / total for p, c in zip(keep, cols, strict=True)}
    median = {p: float(np.median(per_step[:, c])) for p, c in zip(keep, cols, strict=True)}
    return share, median
