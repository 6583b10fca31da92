"""Replay the analysed window's dependency graph (:mod:`.graph`) with one cause changed, and
say how long the window would have taken. Times in µs.

A :class:`Change` says what the fix changes: stretches of host time that shrink (a DataLoader
wait gone, a launch path at the trace's own fastest pace, a sync that no longer waits, a
one-time call out) and GPU activities whose duration changes (a pageable copy at the pinned
rate, an FP32 GEMM at the Tensor Core rate, a layout copy gone). The replay walks the host's
clock in order: host time moves by what the change leaves of it; each GPU activity starts when
its launch and the activity before it on its stream allow (plus the lag the trace shows); a
blocking call returns when the activity it waited for ends in the replay. The window's new
length against the unchanged replay's is what the fix would save.

The work is vectorised between blocking calls (a max-plus scan per stream), so a replay costs
one NumPy pass per blocking call and one over the activities.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuprobe.tools.diagnose.whatif.graph import ReplayGraph

__all__ = ["Change", "replay", "replay_steps", "steady_us"]

_EMPTY = np.zeros(0)
_EMPTY_I = np.zeros(0, dtype=np.int64)


@dataclass
class Change:
    """What one fix changes. ``host``: (start, end, new length) of host stretches, µs on the
    trace's clock (new length < end - start); ``gpu``: (indices into the trace's GPU columns,
    their new durations, µs). An empty change replays the trace as it was."""

    host: tuple[np.ndarray, np.ndarray, np.ndarray] = field(
        default_factory=lambda: (_EMPTY, _EMPTY, _EMPTY)
    )
    gpu: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (_EMPTY_I, _EMPTY))
    gone: np.ndarray = field(default_factory=lambda: _EMPTY_I)  # GPU activities (indices into
    # the trace's GPU columns) that no longer run: no duration, no latency of their own (the
    # kernels of a loop one vectorised kernel replaces)

    @property
    def empty(self) -> bool:
        """True when the change moves nothing."""
        return self.host[0].size == 0 and self.gpu[0].size == 0 and self.gone.size == 0

    def __add__(self, other: Change) -> Change:
        """Both changes at once (the host stretches of both; on a GPU activity both name,
        ``other``'s duration)."""
        host = tuple(np.concatenate([a, b]) for a, b in zip(self.host, other.host, strict=True))
        gpu = tuple(np.concatenate([a, b]) for a, b in zip(self.gpu, other.gpu, strict=True))
        gone = np.concatenate([self.gone, other.gone])
        return Change(host=host, gpu=gpu, gone=gone)  # type: ignore[arg-type]


class _Clock:
    """The host clock of a change: a time on the trace's clock less the host time removed
    before it (inside a shortened stretch, in proportion)."""

    def __init__(self, host: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        a, b, r = (np.asarray(x, dtype=np.float64) for x in host)
        r = np.clip(r, 0.0, None)
        keep = (b - a) > r
        a, b, r = a[keep], b[keep], r[keep]
        order = np.argsort(a, kind="stable")
        a, b, r = a[order], b[order], r[order]
        if a.size > 1:  # stretches that overlap one kept before them are dropped
            reach = np.maximum.accumulate(b)
            ok = np.ones(a.size, dtype=bool)
            ok[1:] = a[1:] >= reach[:-1]
            a, b, r = a[ok], b[ok], r[ok]
        self.a, self.b, self.r = a, b, r
        removed = (b - a) - r
        self.incl = np.cumsum(removed)
        self.excl = self.incl - removed
        self.rate = np.where(b > a, removed / np.maximum(b - a, 1e-12), 0.0)

    def shift(self, t: np.ndarray) -> np.ndarray:
        """How much earlier each time comes on the new clock (µs, >= 0)."""
        t = np.asarray(t, dtype=np.float64)
        if self.a.size == 0:
            return np.zeros(t.shape)
        k = np.searchsorted(self.a, t, side="right") - 1
        kk = np.maximum(k, 0)
        inside = (k >= 0) & (t < self.b[kk])
        part = self.excl[kk] + (t - self.a[kk]) * self.rate[kk]
        return np.where(k < 0, 0.0, np.where(inside, part, self.incl[kk]))

    def inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Whether each [lo, hi] lies within one changed stretch (its host time is the
        stretch's, not its own)."""
        if self.a.size == 0:
            return np.zeros(np.shape(lo), dtype=bool)
        k = np.searchsorted(self.a, lo, side="right") - 1
        kk = np.maximum(k, 0)
        return (k >= 0) & (hi <= self.b[kk] + 1e-9)


def _scan(stream: np.ndarray, a: np.ndarray, b: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """The ends of one chunk's activities (sorted by stream, then order on it): each ends at
    max(its earliest start ``a``, the previous end on its stream) + ``b`` (lag and duration);
    ``carry``: each stream's last end before the chunk (-inf), updated in place."""
    n = a.size
    if n <= 16:  # small chunks: plain Python beats NumPy's per-call cost
        out = np.empty(n)
        last_s, last_e = -1, -np.inf
        for i in range(n):
            s = int(stream[i])
            prev = last_e if s == last_s else float(carry[s])
            e = max(float(a[i]), prev) + float(b[i])
            out[i] = e
            carry[s] = e
            last_s, last_e = s, e
        return out
    new = np.ones(n, dtype=bool)
    new[1:] = stream[1:] != stream[:-1]
    seg = np.cumsum(new) - 1
    cs = np.cumsum(b)
    base = (cs - b)[new]
    big_b = cs - base[seg]
    v = a - (big_b - b)
    v[new] = np.maximum(v[new], carry[stream[new]])
    span = float(v.max() - v.min()) + 1.0
    off = seg * span
    e = big_b + (np.maximum.accumulate(v + off) - off)
    last = np.ones(n, dtype=bool)
    last[:-1] = new[1:]
    carry[stream[last]] = e[last]
    return e


XSTREAM_PASSES = 3  # vector scans of one chunk for its waits across streams, each settling
# one more hop of a chain of them; a longer chain (a collective waiting for a kernel waiting for
# the collective before it, one hop per layer) is replayed one activity at a time; ours


def _scan_chunk(
    graph: ReplayGraph,
    p: np.ndarray,
    earliest: np.ndarray,
    b: np.ndarray,
    carry: np.ndarray,
    ends: np.ndarray,
) -> None:
    """Replay the chunk's activities ``p`` into ``ends``: :func:`_scan`, again while a wait on
    another stream (``g_xdep``) moves their starts, and activity by activity in the order they
    started as recorded (an activity waited for ended, so started, before the one waiting) when
    the chain of such waits is longer than :data:`XSTREAM_PASSES`. A wait on an activity not
    replayed yet holds at its recorded end."""
    x = graph.g_xdep[p]
    xm = x >= 0
    if not xm.any():
        ends[p] = _scan(graph.g_stream[p], earliest, b, carry)
        return
    saved = carry.copy()
    dep = x[xm]
    held: np.ndarray | None = None
    for _ in range(XSTREAM_PASSES):
        at = ends[dep]
        new = earliest.copy()
        new[xm] = np.maximum(earliest[xm], np.where(np.isfinite(at), at, graph.g_end[dep]))
        if held is not None and np.array_equal(new, held):
            return
        held = new
        carry[:] = saved
        ends[p] = _scan(graph.g_stream[p], held, b, carry)
    walk = np.argsort(graph.g_end[p] - graph.g_dur[p], kind="stable")
    last = saved.tolist()
    done: dict[int, float] = {}
    for i, a, d, s, w in zip(
        p[walk].tolist(),
        earliest[walk].tolist(),
        b[walk].tolist(),
        graph.g_stream[p][walk].tolist(),
        x[walk].tolist(),
        strict=True,
    ):
        if w >= 0:
            t = done.get(w)
            if t is None:  # replayed in an earlier chunk, or (not yet) at its recorded end
                t = float(ends[w]) if np.isfinite(ends[w]) else float(graph.g_end[w])
            a = max(a, t)
        done[i] = e = max(a, last[s]) + d
        last[s] = e
    carry[:] = last
    ends[p] = [done[i] for i in p.tolist()]


def replay(graph: ReplayGraph, change: Change | None = None) -> float:
    """The analysed window's length (µs) with ``change`` made (as recorded, replayed, without)."""
    return float(replay_steps(graph, change)[-1]) - graph.start if graph.step_end.size else 0.0


def steady_us(graph: ReplayGraph, done: np.ndarray) -> float:
    """The time the steps after the first take, from step completions ``done``
    (:func:`replay_steps`): the pace of the steady state, without the first step's fill (the
    GPU has nothing queued yet) or the drain after the last; the whole window with one step."""
    if done.size >= 2:
        return float(done[-1] - done[0])
    return float(done[-1]) - graph.start if done.size else 0.0


def replay_steps(graph: ReplayGraph, change: Change | None = None) -> np.ndarray:
    """When each analysed step completes (µs, trace clock) with ``change`` made: the later of
    its host end and the end of the last GPU activity launched in it or before it."""
    change = change or Change()
    clock = _Clock(change.host)
    dur = graph.g_dur
    idx, new_dur = change.gpu
    if idx.size:
        pos = np.full(int(graph.g_index.max()) + 1 if graph.g_index.size else 0, -1)
        pos[graph.g_index] = np.arange(graph.g_index.size)
        ok = idx < pos.size
        p = pos[idx[ok]]
        dur = dur.copy()
        dur[p[p >= 0]] = np.asarray(new_dur, dtype=np.float64)[ok][p >= 0]
    lag = graph.g_lag
    if change.gone.size and graph.g_index.size:
        at = np.full(int(graph.g_index.max()) + 1, -1)
        at[graph.g_index] = np.arange(graph.g_index.size)
        g = change.gone[change.gone < at.size]
        g = at[g][at[g] >= 0]
        dur = dur.copy() if dur is graph.g_dur else dur
        lag = lag.copy()
        dur[g] = 0.0
        lag[g] = 0.0
    launch = graph.g_launch - clock.shift(graph.g_launch)
    b = lag + dur
    keep = ~clock.inside(graph.b_start, graph.b_end)
    bs, be = graph.b_start[keep], graph.b_end[keep]
    dep, dep_end = graph.b_dep[keep], graph.b_dep_end[keep]
    eps, floor = graph.b_eps[keep], graph.b_floor[keep]
    bs_new = bs - clock.shift(bs)
    be_clock = be - clock.shift(be)
    n_streams = int(graph.g_stream.max()) + 1 if graph.g_stream.size else 0
    carry = np.full(n_streams, -np.inf)
    ends = np.full(graph.g_stream.size, -np.inf)
    # each activity's chunk: the blocking calls that returned before its launch
    chunk = np.searchsorted(be, graph.g_launch_start, side="right")
    if chunk.size:
        # on a stream an activity is replayed no later than the ones after it (a launch from
        # another thread, or one outside the trace, can come after a later activity's call)
        seg = np.cumsum(graph.g_first) - 1
        top = float(bs.size + 1)
        suffix = -np.maximum.accumulate((-(chunk + seg * (top + 1)))[::-1])[::-1]
        chunk = (suffix - seg * (top + 1)).astype(np.int64)
    order = np.lexsort((np.arange(chunk.size), chunk))
    bounds = np.searchsorted(chunk[order], np.arange(bs.size + 2), side="left")
    wait = 0.0
    waits = np.zeros(bs.size + 1)  # the host's delay after each kept blocking call returned
    for k in range(bs.size + 1):
        p = order[bounds[k] : bounds[k + 1]]
        if p.size:
            earliest = np.maximum(launch[p] + wait, graph.g_prev_fixed[p])
            _scan_chunk(graph, p, earliest, b[p], carry, ends)
        if k == bs.size:
            break
        d = int(dep[k])
        waited = float(ends[d]) if d >= 0 and np.isfinite(ends[d]) else float(dep_end[k])
        ret = max(float(bs_new[k]) + wait + float(floor[k]), waited + float(eps[k]))
        wait = ret - float(be_clock[k])
        waits[k + 1] = wait
    t = graph.step_end
    host = t - clock.shift(t) + waits[np.searchsorted(be, t, side="right")]
    done = host.copy()
    if ends.size:
        np.maximum.at(done, graph.g_step, ends)
    return np.maximum.accumulate(done)
