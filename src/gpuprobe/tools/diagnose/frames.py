"""Op nesting and Python frames: which cpu_ops are top-level on their thread, and for each the
innermost Python frame, the first frame in the user's own code, whether a module call lies
between, and the module forward it runs in. Functions of a trace's
:class:`~gpuprobe.tools.diagnose.columns.TraceColumns`, cached in
:class:`~gpuprobe.tools.diagnose.analysis.TraceContext`.
"""

from __future__ import annotations

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.columns import TraceColumns

__all__ = ["op_frames", "op_top"]

_LAYER_CALL_DEPTH = 4  # frames out from the user's frame searched for a module call; ours


def op_top(ctx: TraceColumns) -> np.ndarray:
    """True for cpu_ops not nested in another cpu_op of the same thread."""
    top = np.zeros(ctx.op_ts.size, dtype=bool)
    end = ctx.op_ts + ctx.op_dur
    for tid in np.unique(ctx.op_tid):
        idx = np.nonzero(ctx.op_tid == tid)[0]
        order = idx[np.lexsort((-ctx.op_dur[idx], ctx.op_ts[idx]))]
        run = np.maximum.accumulate(end[order])
        t = np.ones(order.size, dtype=bool)
        t[1:] = ctx.op_ts[order][1:] >= run[:-1]
        top[order] = t
    return top


def _py_innermost(ctx: TraceColumns, top: np.ndarray) -> np.ndarray:
    """Index of the innermost source-line ``python_function`` event around each top-level
    cpu_op (``top``: :func:`op_top`; -1 when unknown)."""
    frame = np.full(ctx.op_ts.size, -1, dtype=np.int64)
    if ctx.py_ts.size == 0:
        return frame
    builtin = P.BUILTIN_FRAME.mask(ctx.py_name, ctx.names)
    for tid in np.unique(ctx.op_tid[top]):
        fi = np.nonzero((ctx.py_tid == tid) & ~builtin)[0]
        if fi.size == 0:
            continue
        oi = np.nonzero(top & (ctx.op_tid == tid))[0]
        ts = np.concatenate([ctx.py_ts[fi], ctx.op_ts[oi]])
        end = np.concatenate([ctx.py_ts[fi] + ctx.py_dur[fi], ctx.op_ts[oi] + ctx.op_dur[oi]])
        kind = np.concatenate([np.zeros(fi.size, np.int8), np.ones(oi.size, np.int8)])
        ref = np.concatenate([fi, oi])
        order = np.lexsort((kind, -end, ts))
        stack_end: list[float] = []
        stack_ref: list[int] = []
        for t, e, k, r in zip(
            ts[order].tolist(),
            end[order].tolist(),
            kind[order].tolist(),
            ref[order].tolist(),
            strict=True,
        ):
            while stack_end and stack_end[-1] <= t:
                stack_end.pop()
                stack_ref.pop()
            if k == 0:
                stack_end.append(e)
                stack_ref.append(r)
            elif stack_ref:
                frame[r] = stack_ref[-1]
    return frame


def _py_parent(ctx: TraceColumns) -> np.ndarray:
    """For each ``python_function`` event, the index of the one enclosing it on its thread
    (-1 at the outermost level)."""
    parent = np.full(ctx.py_ts.size, -1, dtype=np.int64)
    end = ctx.py_ts + ctx.py_dur
    for tid in np.unique(ctx.py_tid):
        idx = np.nonzero(ctx.py_tid == tid)[0]
        order = idx[np.lexsort((-end[idx], ctx.py_ts[idx]))]
        stack_end: list[float] = []
        stack_ref: list[int] = []
        for i, t, e in zip(
            order.tolist(), ctx.py_ts[order].tolist(), end[order].tolist(), strict=True
        ):
            while stack_end and stack_end[-1] <= t:
                stack_end.pop()
                stack_ref.pop()
            if stack_ref:
                parent[i] = stack_ref[-1]
            stack_end.append(e)
            stack_ref.append(i)
    return parent


class _Names:
    """Name ids of ``names``, adding the frames split out of a call stack as they come."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.ids = {n: i for i, n in enumerate(names)}

    def intern(self, name: str) -> int:
        """The id of ``name`` in ``names``, appended when new."""
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(name)
        return i


def _judge_frames(names: _Names, frames: list[str]) -> tuple[int, int, bool, int]:
    """From a stack, innermost first: (innermost frame id, the user's first frame id or -1,
    whether a module call lies between the op and the user's frame, and the position in
    ``frames`` of the module's forward the user's frame runs in, or -1: the frame just
    inside a module call at most :data:`_LAYER_CALL_DEPTH` frames out from the user's)."""
    user = -1
    under_module = False
    pos = -1
    for p, f in enumerate(frames):
        if P.MODULE_CALL_FRAME.matches(f):
            under_module = True
        if not P.USER_FRAME_EXCLUDE.matches(f) and not P.BUILTIN_FRAME.matches(f):
            user = names.intern(f)
            pos = p
            break
    inner = names.intern(frames[0]) if frames else -1
    layer = -1
    if pos >= 0:
        for q in range(pos, min(pos + _LAYER_CALL_DEPTH, len(frames) - 1)):
            if P.MODULE_CALL_FRAME.matches(frames[q + 1]):
                layer = q
                break
    return inner, user, under_module, layer


def op_frames(
    ctx: TraceColumns, top: np.ndarray, op_stack: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:attr:`~TraceContext.op_frames` and :attr:`~TraceContext.op_layer_call` in one walk over
    each op's stack: from the ``python_function`` events when the trace has them, else from
    ``op_stack`` (each op's ``Call stack`` name id, -1 without one); ``top``: :func:`op_top`."""
    names = _Names(ctx.names)
    n = ctx.op_ts.size
    inner = np.full(n, -1, dtype=np.int64)
    user = np.full(n, -1, dtype=np.int64)
    under = np.zeros(n, dtype=bool)
    layer = np.full(n, -1, dtype=np.int64)
    cache: dict[int, tuple[int, int, bool, int]] = {}
    if ctx.py_ts.size:
        py = _py_innermost(ctx, top)
        parent = _py_parent(ctx)
        for i in np.nonzero(py >= 0)[0].tolist():
            k = int(py[i])
            got = cache.get(k)
            if got is None:
                chain: list[str] = []
                events: list[int] = []
                j = k
                while j >= 0 and len(chain) < 256:
                    chain.append(ctx.names[int(ctx.py_name[j])])
                    events.append(j)
                    j = int(parent[j])
                a, b, c, pos = _judge_frames(names, chain)
                got = cache[k] = (a, b, c, events[pos] if pos >= 0 else -1)
            inner[i], user[i], under[i], layer[i] = got
    else:
        stack = op_stack
        if stack.size == n and (stack >= 0).any():
            for i in np.nonzero((stack >= 0) & top)[0].tolist():
                k = int(stack[i])
                got = cache.get(k)
                if got is None:
                    frames = [f.strip() for f in ctx.names[k].split(";") if f.strip()]
                    got = cache[k] = (*_judge_frames(names, frames)[:3], -1)
                inner[i], user[i], under[i], _ = got
    return inner, user, under, layer
