"""What a folder of traces is, told before anything is called a rank: the ranks of one job, one
process's successive profiler cycles, the ranks of a job over several cycles, or a mix.

Each trace is known by who recorded it and when (:class:`TraceIdentity`): its
``distributedInfo.rank`` (and ``world_size``), the pid of the threads that ran its ops, the host
when the file name is ``torch.profiler.tensorboard_trace_handler``'s default
``{hostname}_{pid}.{time}.pt.trace.json``, and its time window (first to last event, µs since the
epoch: Kineto's timestamps, plus the header's ``baseTimeNanoseconds`` when it has one).

Traces of one process (same rank, host and pid, where known) whose windows do not overlap are
that process's **cycles** (what ``schedule(..., repeat=N)`` writes, one file per cycle). Ranks are
different processes that ran **at the same time**: distinct ``distributedInfo`` ranks, or
without them distinct pids or hosts, whose windows overlap (within :data:`CLOCK_SLACK_US`, for
hosts whose clocks differ). :func:`classify` says which of these a folder is, or raises a
one-line :class:`~gpuprobe.core.errors.InputError` naming what it found and what to pass instead.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.columns import TraceColumns
from gpuprobe.tools.diagnose.kineto import RawTrace

__all__ = [
    "CLOCK_SLACK_US",
    "Layout",
    "TraceFacts",
    "TraceIdentity",
    "classify",
    "identify",
    "trace_facts",
]

# µs; two processes whose time windows come this close are taken to have run at the same time:
# NTP keeps hosts' clocks within tens of milliseconds over the public Internet and under 1 ms on
# a LAN (ntp.org, "How does it work?"), and the ranks of one job run in lockstep.
CLOCK_SLACK_US = 100_000.0

# torch.profiler.tensorboard_trace_handler names its files "{worker_name}.{time}.pt.trace.json"
# (".gz" with use_gzip), worker_name "{socket.gethostname()}_{os.getpid()}" unless given
_HANDLER_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")


@dataclass(frozen=True)
class TraceIdentity:
    """Who recorded a trace and when: ``rank``/``world_size`` from ``distributedInfo``, the
    ``pid`` of its ops' threads, the ``host`` from the file name, and its window (µs since the
    epoch). None where the trace does not say."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    pid: int | None = None
    host: str | None = None
    start_us: float | None = None
    end_us: float | None = None

    @property
    def label(self) -> str:
        """``"rank 3"``, ``"pid 25738 on node1"``, ``"pid 25738"`` or the file's name."""
        if self.rank is not None:
            return f"rank {self.rank}"
        if self.pid is not None:
            return f"pid {self.pid}" + (f" on {self.host}" if self.host else "")
        return os.path.basename(self.path)


@dataclass(frozen=True)
class TraceFacts:
    """What a cycle's row needs beyond a rank's: the idle time of its steps by cause (µs, summed
    over steps and devices), its step numbers, and its longest runtime call that is not a sync
    (a one-time cost such as a module load inside a first launch shows there)."""

    idle_cause_us: dict[str, float] = field(default_factory=dict)
    devices: int = 0
    first_step: int | None = None
    last_step: int | None = None
    longest_call_us: float | None = None
    longest_call: str = ""


def _dist_int(info: object, key: str) -> int | None:
    if not isinstance(info, dict):
        return None
    v = info.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        return int(v)
    except ValueError:
        return None


def _pid(raw: RawTrace) -> int | None:
    """The pid of the threads that ran the most ops (else runtime calls, else Python frames)."""
    for tids in (raw.op_tid, raw.rt_tid, raw.py_tid):
        if len(tids):
            count: Counter[int] = Counter()
            for tid, n in zip(
                *np.unique(np.frombuffer(tids, dtype=np.dtype("l").type), return_counts=True),
                strict=True,
            ):
                pid = raw.thread_pids[int(tid)] if int(tid) < len(raw.thread_pids) else None
                if pid is not None:
                    count[pid] += int(n)
            if count:
                return count.most_common(1)[0][0]
    return None


def _window(ctx: TraceColumns) -> tuple[float | None, float | None]:
    """First and last instant of any event, µs since the epoch (None without timed events)."""
    starts = [a.min() for a in (ctx.op_ts, ctx.rt_ts, ctx.gpu_ts, ctx.ann_ts, ctx.py_ts) if a.size]
    ends = [
        (a + d).max()
        for a, d in (
            (ctx.op_ts, ctx.op_dur),
            (ctx.rt_ts, ctx.rt_dur),
            (ctx.gpu_ts, ctx.gpu_dur),
            (ctx.ann_ts, ctx.ann_dur),
            (ctx.py_ts, ctx.py_dur),
        )
        if a.size
    ]
    steps = ctx.raw.steps
    if steps:
        starts.append(min(ts for _, ts, _ in steps))
        ends.append(max(ts + dur for _, ts, dur in steps))
    if not starts:
        return None, None
    base = ctx.raw.time_base
    ns = ctx.raw.header.get("baseTimeNanoseconds")
    if isinstance(ns, (int, float)) and not isinstance(ns, bool) and math.isfinite(ns):
        base += float(ns) / 1000.0  # newer Kineto writes ts relative to this base
    return base + float(min(starts)), base + float(max(ends))


def identify(ctx: TraceColumns) -> TraceIdentity:
    """Who recorded the trace of ``ctx`` and when."""
    raw = ctx.raw
    info = raw.header.get("distributedInfo")
    pid = _pid(raw)
    host = None
    name = raw.header.get("traceName")
    for candidate in (os.path.basename(name) if isinstance(name, str) else "", raw.path):
        m = _HANDLER_NAME.match(os.path.basename(candidate))
        if m and pid is not None and int(m.group("pid")) == pid:
            host = m.group("host")
            break
    start, end = _window(ctx)
    return TraceIdentity(
        path=raw.path,
        rank=_dist_int(info, "rank"),
        world_size=_dist_int(info, "world_size"),
        pid=pid,
        host=host,
        start_us=start,
        end_us=end,
    )


def trace_facts(ctx: TraceColumns, breakdowns: Sequence[object]) -> TraceFacts:
    """The idle split of the steps (from their breakdowns), the step numbers and the longest
    runtime call that is not a sync."""
    idle: dict[str, float] = {}
    for b in breakdowns:
        for cause, us in getattr(b, "idle_cause_us", {}).items():
            idle[cause] = idle.get(cause, 0.0) + us
    numbers = [s.number for s in ctx.steps if s.number is not None]
    longest_us, longest = None, ""
    calls = ~ctx.sync_mask
    if calls.any():
        i = int(np.argmax(np.where(calls, ctx.rt_dur, -1.0)))
        longest_us, longest = float(ctx.rt_dur[i]), ctx.names[int(ctx.rt_name[i])]
    return TraceFacts(
        idle_cause_us=idle,
        devices=len(ctx.devices),
        first_step=min(numbers) if numbers else None,
        last_step=max(numbers) if numbers else None,
        longest_call_us=longest_us,
        longest_call=longest,
    )


@dataclass(frozen=True)
class Layout:
    """What a set of traces is. ``kind`` ``"ranks"``: ``indices`` are the traces of one job's
    ranks (with ``note`` when they are the last of several cycles); ``"cycles"``: one process's
    traces in time order."""

    kind: Literal["ranks", "cycles"]
    indices: tuple[int, ...]
    note: str = ""


def _starts(ids: Sequence[TraceIdentity]) -> list[float]:
    return [-math.inf if t.start_us is None else t.start_us for t in ids]


def _ends(ids: Sequence[TraceIdentity]) -> list[float]:
    return [-math.inf if t.end_us is None else t.end_us for t in ids]


def _processes(ids: Sequence[TraceIdentity]) -> list[list[int]]:
    """The traces grouped by process, each group in time order, no two of a group overlapping.

    A process is known by its rank, host and pid; a trace with neither rank nor pid is a process
    of its own. Two traces of one pid (no rank) that overlap in time are two processes (in two
    containers, say); two traces of one rank that overlap are refused."""
    start, end = _starts(ids), _ends(ids)
    lanes: dict[object, list[list[int]]] = {}
    for i in sorted(range(len(ids)), key=lambda k: (start[k], ids[k].path)):
        t = ids[i]
        key: object = (t.rank, t.host, t.pid) if t.rank is not None or t.pid is not None else i
        mine = lanes.setdefault(key, [])
        for lane in mine:
            if end[lane[-1]] <= start[i]:
                lane.append(i)
                break
        else:
            if mine and t.rank is not None:
                other = os.path.basename(ids[mine[0][-1]].path)
                raise InputError(
                    f"{other} and {os.path.basename(t.path)} are both {t.label} over the same "
                    "time: pass one trace per rank (a subfolder per job or cycle)"
                )
            mine.append([i])
    return [lane for mine in lanes.values() for lane in mine]


def _together(ids: Sequence[TraceIdentity], group: Sequence[int]) -> bool:
    """True when the windows of ``group`` form one span of overlapping windows (with slack)."""
    spans: list[tuple[float, float]] = []
    for i in group:
        s, e = ids[i].start_us, ids[i].end_us
        if s is not None and e is not None:
            spans.append((s, e))
    spans.sort()
    reach = -math.inf
    for k, (s, e) in enumerate(spans):
        if k and s > reach + CLOCK_SLACK_US:
            return False
        reach = max(reach, e)
    return True


def _who(ids: Sequence[TraceIdentity], lanes: Sequence[Sequence[int]], most: int = 3) -> str:
    """The processes of ``lanes``, with their numbers of traces when some have several."""
    several = any(len(lane) > 1 for lane in lanes)

    def one(lane: Sequence[int]) -> str:
        label = ids[lane[0]].label
        if not several:
            return label
        return f"{label}: {len(lane)} trace{'' if len(lane) == 1 else 's'}"

    parts = [one(lane) for lane in lanes[:most]]
    if len(lanes) > most:
        parts.append(f"{len(lanes) - most} more")
    return "; ".join(parts)


def classify(ids: Sequence[TraceIdentity], where: str) -> Layout:
    """What the traces ``ids`` are (``where`` names them in messages): the ranks of one job, one
    process's cycles, or the ranks of one job's last cycle; else a one-line InputError."""
    n = len(ids)
    if n == 1:
        return Layout("ranks", (0,))
    lanes = _processes(ids)
    if len(lanes) == 1:
        return Layout("cycles", tuple(lanes[0]))
    if all(len(lane) == 1 for lane in lanes):
        every = [lane[0] for lane in lanes]
        _check_job(ids, every, where)
        if not _together(ids, every):
            raise InputError(
                f"{where}: {n} traces of {n} processes ({_who(ids, lanes)}) that did not "
                "run at the same time, so not the ranks of one job: pass one job's traces "
                "(a subfolder) or one file"
            )
        return Layout("ranks", tuple(sorted(every)))
    counts = {len(lane) for lane in lanes}
    if len(counts) == 1:
        m = counts.pop()
        groups = [[lane[c] for lane in lanes] for c in range(m)]
        ordered = all(
            max(_ends(ids)[i] for i in groups[c]) <= min(_starts(ids)[i] for i in groups[c + 1])
            for c in range(m - 1)
        )
        if ordered and all(_together(ids, g) for g in groups):
            _check_job(ids, groups[-1], where)
            last = groups[-1]
            return Layout(
                "ranks",
                tuple(sorted(last)),
                note=f"{n} traces: {len(lanes)} ranks × {m} profiler cycles; the ranks of the "
                f"last cycle are diagnosed (pass a cycle's files to see another)",
            )
    raise InputError(
        f"{where}: {len(lanes)} processes' profiler cycles ({_who(ids, lanes)}), "
        "neither one process's cycles nor one job's ranks: pass one process's traces "
        "(a subfolder) or one file"
    )


def _check_job(ids: Sequence[TraceIdentity], group: Sequence[int], where: str) -> None:
    """Refuse ranks that cannot be of one job: the same rank twice, or different world sizes."""
    ranks = [r for i in group if (r := ids[i].rank) is not None]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise InputError(
            f"{where}: rank {twice[0]} appears in {ranks.count(twice[0])} traces of different "
            "processes: pass one job's traces (a subfolder) or one file"
        )
    worlds = sorted({w for i in group if (w := ids[i].world_size) is not None})
    if len(worlds) > 1:
        raise InputError(
            f"{where}: ranks of different jobs (world sizes {', '.join(map(str, worlds))}): "
            "pass one job's traces (a subfolder) or one file"
        )
