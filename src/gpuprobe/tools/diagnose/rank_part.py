"""One rank's trace read into what is kept of it while the others are read: a
:class:`TracePart` (its :class:`~gpuprobe.tools.diagnose.ranks_model.RankRow`, its collectives
keyed by step, name and occurrence, who recorded it and when). Below :mod:`.ranks` (which joins
the parts) and :mod:`.ranks_read` (which reads them in parallel), so that neither imports the
other."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuprobe.tools.diagnose import patterns as P
from gpuprobe.tools.diagnose.intervals import merge_intervals, overlaps
from gpuprobe.tools.diagnose.kernels import (
    FAMILY_COMM,
    FAMILY_MEMORY,
    family_of_activities,
    kernel_breakdown,
)
from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.layout import TraceFacts, TraceIdentity, identify, trace_facts
from gpuprobe.tools.diagnose.ranks_model import RankRow

__all__ = ["TracePart", "interval_overlap", "rank_from_name", "read_rank"]

# Rank in a file name, most specific first: rank-3 / rank_3 / rank3, worker3, then _3. (as in
# torch.profiler.tensorboard_trace_handler's "{worker_name}.{ts}.pt.trace.json" with a rank).
_RANK_IN_NAME = (
    re.compile(r"(?i)rank[-_]?(\d+)"),
    re.compile(r"(?i)worker[-_]?(\d+)"),
    re.compile(r"_(\d+)\."),
)


def rank_from_name(path: str) -> int | None:
    """The rank written in a trace's file name, or None."""
    base = os.path.basename(path)
    for rx in _RANK_IN_NAME:
        m = rx.search(base)
        if m:
            return int(m.group(1))
    return None


def interval_overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two unions of intervals (sorted, disjoint starts/ends)."""
    (as_, ae), (bs, be) = a, b
    if as_.size == 0 or bs.size == 0:
        return 0.0
    return float(np.sum(overlaps(bs, be, as_, ae)))


def _short(name: str) -> str:
    """A kernel name without its argument list and leading ``void``."""
    return name.split("(", 1)[0].removeprefix("void ").strip() or name


_Key = tuple[int | None, str, int]  # a collective: (step number, short name, occurrence in step)


@dataclass
class TracePart:
    """What is kept of one trace while the others are read: its rank's row and collectives,
    who recorded it and when, and what a cycle's row needs."""

    row: RankRow
    coll_key: list[_Key]
    coll_dur: np.ndarray
    first_rank_from_name: int | None
    device_rank: int | None
    identity: TraceIdentity
    facts: TraceFacts


def _read_rank(
    path: str, steps: tuple[int, int] | None, progress: ProgressCallback | None
) -> TracePart:
    from gpuprobe.tools.diagnose.engine import check_memory, out_of_memory
    from gpuprobe.tools.diagnose.kineto import read_trace

    t0 = time.perf_counter()
    raw = read_trace(path, progress=progress)
    check_memory(raw.events, path)
    try:
        return _rank_part(path, raw, steps, t0)
    except MemoryError:
        raise out_of_memory(path, raw.events) from None


def _rank_part(path: str, raw: Any, steps: tuple[int, int] | None, t0: float) -> TracePart:
    """The summary of one rank's trace, read into ``raw``."""
    from gpuprobe.tools.diagnose.analysis import TraceContext

    ctx = TraceContext(raw, steps)
    info = raw.header.get("distributedInfo")
    rank: int | None = None
    world: int | None = None
    if isinstance(info, dict):
        try:
            rank = int(info["rank"])
        except (KeyError, TypeError, ValueError):
            rank = None
        try:
            world = int(info["world_size"])
        except (KeyError, TypeError, ValueError):
            world = None
    summary = ctx.summary(read_seconds=0.0, analyse_seconds=0.0)
    sel = ctx.gpu_step >= 0
    fam = family_of_activities(ctx)
    kern = sel & (fam != FAMILY_MEMORY)
    comm_m = kern & (fam == FAMILY_COMM)
    comp_m = kern & (fam != FAMILY_COMM)
    comm = merge_intervals(ctx.gpu_ts[comm_m], ctx.gpu_end[comm_m])
    comp = merge_intervals(ctx.gpu_ts[comp_m], ctx.gpu_end[comp_m])
    comm_us = float(np.sum(comm[1] - comm[0]))
    compute_us = float(np.sum(comp[1] - comp[0]))
    overlap_us = interval_overlap(comm, comp)
    busy_steps = sum(b.gpu_busy_us or 0.0 for b in ctx.breakdowns)
    durations = ctx.step_durations
    numbered = [s for s in ctx.steps if s.number is not None]
    # collectives in order of GPU start, keyed by (step number, short name, occurrence in step)
    ci = np.nonzero(comm_m)[0]
    ci = ci[np.argsort(ctx.gpu_ts[ci], kind="stable")]
    c_step, c_name, c_dur = ctx.gpu_step[ci], ctx.gpu_name[ci], ctx.gpu_dur[ci]
    if not ctx.has_gpu:  # a CPU job (gloo): its collectives are host spans
        ci = np.nonzero(P.CPU_COLLECTIVE.mask(ctx.ann_name, ctx.names) & (ctx.ann_step >= 0))[0]
        ci = ci[np.argsort(ctx.ann_ts[ci], kind="stable")]
        c_step, c_name, c_dur = ctx.ann_step[ci], ctx.ann_name[ci], ctx.ann_dur[ci]
        comm = merge_intervals(ctx.ann_ts[ci], ctx.ann_ts[ci] + c_dur)
        comm_us = float(np.sum(comm[1] - comm[0]))
    seen: dict[tuple[int | None, str], int] = {}
    keys: list[_Key] = []
    for st, nm in zip(c_step.tolist(), c_name.tolist(), strict=True):
        step = ctx.steps[int(st)].number
        name = _short(ctx.names[int(nm)])
        k = seen.get((step, name), 0)
        seen[(step, name)] = k + 1
        keys.append((step, name, k))
    kb = kernel_breakdown(ctx, top=0)
    row = RankRow(
        rank=-1 if rank is None else rank,
        rank_source="distributedInfo" if rank is not None else "",
        path=path,
        steps=len(numbered) if numbered else len(ctx.steps),
        step_median_us=float(np.median(durations)) if durations.size else None,
        step_total_us=float(durations.sum()),
        first_step_start_us=float(ctx.step_starts[0]) + ctx.raw.time_base if numbered else None,
        gpu_busy_fraction=summary.gpu_busy_fraction,
        gpu_span_us=summary.gpu_span_us,
        gpu_busy_in_steps_us=float(busy_steps),
        gpu_idle_in_steps_us=float(max(durations.sum() * max(len(ctx.devices), 1) - busy_steps, 0))
        if ctx.has_gpu
        else 0.0,
        compute_us=compute_us,
        comm_us=comm_us,
        overlap_us=overlap_us,
        overlap_fraction=overlap_us / comm_us if comm_us > 0 else None,
        exposed_comm_us=comm_us - overlap_us,
        comm_kernels=int(ci.size),
        families=kb.families,
        launches=kb.launches,
        world_size=world,
        read_seconds=time.perf_counter() - t0,
        **_one_time(ctx),
    )
    dev_rank = ctx.devices[0] if len(ctx.devices) == 1 else None
    return TracePart(
        row=row,
        coll_key=keys,
        coll_dur=np.array(c_dur, dtype=float),
        first_rank_from_name=rank_from_name(path),
        device_rank=dev_rank,
        identity=identify(ctx),
        facts=trace_facts(ctx, ctx.breakdowns),
    )


def _one_time(ctx: Any) -> dict[str, Any]:
    """A rank's one-time start-up: µs, share of its profiled time, its largest call."""
    lost, share = ctx.one_time_share
    calls = ctx.one_time_calls
    call = ""
    if calls.size:
        i = int(calls[np.argmax(ctx.rt_dur[calls])])
        call = f"{ctx.rt_dur[i] / 1e3:,.1f} ms {ctx.names[int(ctx.rt_name[i])]}"
    return {"one_time_us": lost, "one_time_share": share, "one_time_call": call}


read_rank = _read_rank  # the public name of the one reader of a rank
