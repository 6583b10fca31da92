"""The steps of a run's PyTorch processes, from the flight recorder: how long each took, which
were slow and when, whether they drifted, and the energy each cost.

``gpuprobe run`` injects a hook in every Python process of the command (no profiler): each
optimizer step (or DataLoader batch, without an optimizer) appends its end time, and the
command's processes leave them in their status folder; ``run`` writes them to the timeline as
``steps`` events (``{"kind": "steps", "pid": ..., "name": ..., "mode": ..., "t0": ...,
"ends": [s after t0, ...]}``, a long run's steps in several events) before its end line.
:func:`step_stats` reads them back into one :class:`StepStats` a process.

A step is the time between two step ends. The first :data:`WARMUP_STEPS` (at most a tenth of
the steps: compilation, autotuning, the first batches) are left out of every figure but the
count. A step is slow past ``k`` × the median, ``k`` = :data:`SLOW_K` or more when the steps
spread more (``SLOW_SPREAD`` × p90 ÷ median): the spread a job has anyway is no slow step.

Energy per step: the energy the GPUs the command used drew between the first and the last step
of the steady state (their energy counters, interpolated at the step ends; power × time where a
card has none), divided by those steps. Steps shorter than the sampling interval share the
energy of the samples around them: said as such.

Times are seconds from the start of the recording (``at_s``) or seconds (durations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuprobe.core.records import Record
from gpuprobe.tools.monitor.timeline import Timeline

__all__ = [
    "SLOW_K",
    "SLOW_LISTED",
    "WARMUP_STEPS",
    "SlowStep",
    "StepStats",
    "cumulative_joules",
    "step_events",
    "step_stats",
]

WARMUP_STEPS = 20  # steps left out at the start (at most a tenth of them): compile, autotune
SLOW_K = 2.0  # × the median: a step this long or longer is slow (issue 43's default)
SLOW_SPREAD = 1.5  # × p90 ÷ median: k grows with the spread the steps have anyway
SLOW_LISTED = 5  # slow steps kept by name (the longest), the rest counted
DRIFT_MIN_STEPS = 40  # steady steps needed to compare the first and the last quarter
REGULAR_SHARE = 0.8  # of the points of a lattice of slow steps slow: they come every N steps
REGULAR_STARTS = 50  # slow steps tried as the first of such a lattice
EVENT_STEPS = 20_000  # step ends per timeline event (a long run's steps in several lines)


@dataclass(frozen=True)
class SlowStep(Record):
    """One slow step: its number (0-based, as the process counted), when it ended, how long."""

    step: int
    at_s: float  # s from the start of the recording, at its end
    seconds: float
    times_median: float


@dataclass(frozen=True)
class StepStats(Record):
    """One process's steps over the run."""

    pid: int
    name: str
    mode: str | None  # "optimizer" | "dataloader"
    steps: int  # step ends recorded
    median_s: float | None = None
    p95_s: float | None = None
    max_s: float | None = None
    per_second: float | None = None  # steps a second over the steady state
    slow_k: float | None = None  # × the median, the slow threshold
    slow_count: int = 0
    slow_extra_s: float = 0.0  # s the slow steps took beyond the median
    slow_share: float | None = None  # of the steady steps' time: slow_extra_s ÷ their sum
    slow: tuple[SlowStep, ...] = ()  # the longest, in step order
    every: int | None = None  # the slow steps recur every this many steps
    first_slow: int | None = None  # the first slow step's number
    drift: float | None = None  # median of the last quarter ÷ the first's
    drift_from_s: float | None = None
    drift_to_s: float | None = None
    joules_per_step: float | None = None
    energy_method: str | None = None  # "counter" | "power × time", "; shared" when interpolated


def step_events(
    steps: Sequence[tuple[int, str, str | None, Sequence[float]]],
) -> list[dict[str, Any]]:
    """Timeline events (kind ``steps``) for ``(pid, name, mode, step ends)`` of each process;
    the ends are seconds since the epoch, kept to the microsecond after ``t0``."""
    out: list[dict[str, Any]] = []
    for pid, name, mode, ends in steps:
        for i in range(0, len(ends), EVENT_STEPS):
            chunk = ends[i : i + EVENT_STEPS]
            t0 = float(chunk[0])
            out.append(
                {
                    "t": t0,
                    "kind": "steps",
                    "pid": pid,
                    "name": name,
                    "mode": mode,
                    "first": i,
                    "t0": t0,
                    "ends": [round(float(e) - t0, 6) for e in chunk],
                }
            )
    return out


def _ends(tl: Timeline) -> dict[int, tuple[str, str | None, np.ndarray]]:
    """pid -> (name, mode, the step ends in s since the epoch, sorted), from the events."""
    parts: dict[int, list[tuple[int, np.ndarray]]] = {}
    meta: dict[int, tuple[str, str | None]] = {}
    for e in tl.events:
        if e.get("kind") != "steps":
            continue
        try:
            pid, t0 = int(e["pid"]), float(e["t0"])
            ends = np.asarray(e["ends"], dtype=np.float64) + t0
            first = int(e.get("first") or 0)
        except (KeyError, TypeError, ValueError):
            continue  # a damaged event: the others are read
        if ends.ndim != 1 or not np.isfinite(ends).all():
            continue
        parts.setdefault(pid, []).append((first, ends))
        meta[pid] = (str(e.get("name") or "?"), e.get("mode") if e.get("mode") else None)
    out = {}
    for pid, chunks in parts.items():
        ends = np.concatenate([c for _, c in sorted(chunks, key=lambda x: x[0])])
        out[pid] = (*meta[pid], np.sort(ends))
    return out


def _cumulative_energy(tl: Timeline, index: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(times, joules since the first sample, method) of GPU ``index``'s samples in ``tl``."""
    ticks = list(tl.gpu_ticks(index))
    return cumulative_joules(
        [t + tl.start for t, _ in ticks],
        [tick.sample.energy_mj for _, tick in ticks],
        [tick.sample.power_w for _, tick in ticks],
    )


def cumulative_joules(
    times: Sequence[float],
    counter_mj: Sequence[float | None],
    power_w: Sequence[float | None],
) -> tuple[np.ndarray, np.ndarray, str]:
    """(times, joules since the first sample, method) of one GPU's samples: its energy
    counter's rises (a fall, a wrap or a driver reload, skipped), or its power integrated where
    it has no counter (method ``"power × time"``); empty, method ``""``, when it has neither
    or fewer than two samples."""
    if len(times) < 2:
        return np.array([]), np.array([]), ""
    t = np.asarray(times, dtype=np.float64)
    if all(c is not None for c in counter_mj):
        rises = np.maximum(np.diff(np.asarray(counter_mj, dtype=np.float64)), 0.0) / 1000.0
        return t, np.concatenate([[0.0], np.cumsum(rises)]), "counter"
    if all(p is not None for p in power_w):
        w = np.asarray(power_w, dtype=np.float64)
        parts = 0.5 * (w[1:] + w[:-1]) * np.diff(t)
        return t, np.concatenate([[0.0], np.cumsum(parts)]), "power × time"
    return np.array([]), np.array([]), ""


def _every(steps: Sequence[int]) -> tuple[int | None, int | None]:
    """(the period, the first step) at which most of ``steps`` (sorted slow step numbers)
    recur: the commonest gap between them, on the lattice from one of them that holds the most;
    a recurrence needs three or more on it, and :data:`REGULAR_SHARE` of its points slow (a
    stray slow step between them does not hide it). (None, None) otherwise."""
    if len(steps) < 3:
        return None, None
    gaps = np.diff(np.asarray(steps))
    values, counts = np.unique(gaps[gaps > 0], return_counts=True)
    if not len(values):
        return None, None
    period = int(values[int(np.argmax(counts))])
    slow = set(steps)
    hits, start = 0, steps[0]
    for first in steps[:REGULAR_STARTS]:
        n = sum(1 for s in range(first, steps[-1] + 1, period) if s in slow)
        if n > hits:
            hits, start = n, first
    if hits < 3:
        return None, None
    points = (steps[-1] - start) // period + 1
    return (period, start) if hits >= REGULAR_SHARE * points else (None, None)


def _one(
    tl: Timeline, pid: int, name: str, mode: str | None, ends: np.ndarray, gpus: Sequence[int]
) -> StepStats:
    base = StepStats(pid=pid, name=name, mode=mode, steps=len(ends))
    d = np.diff(ends)
    skip = min(WARMUP_STEPS, len(d) // 10)
    steady = d[skip:]
    if len(steady) < 2:
        return base
    median = float(np.median(steady))
    if median <= 0:
        return base
    p90, p95 = (float(x) for x in np.percentile(steady, [90, 95]))
    k = max(SLOW_K, SLOW_SPREAD * p90 / median)
    slow_idx = np.flatnonzero(steady >= k * median)
    numbers = [int(i) + skip + 1 for i in slow_idx]  # step i ends at ends[i]; 0-based
    every, first = _every(numbers)
    extra = float(np.sum(steady[slow_idx] - median)) if len(slow_idx) else 0.0
    longest = sorted(slow_idx, key=lambda i: -steady[i])[:SLOW_LISTED]
    slow = tuple(
        SlowStep(
            step=int(i) + skip + 1,
            at_s=round(float(ends[i + skip + 1]) - tl.start, 3),
            seconds=round(float(steady[i]), 6),
            times_median=round(float(steady[i]) / median, 2),
        )
        for i in sorted(longest)
    )
    span = float(ends[-1] - ends[skip])
    drift = frm = to = None
    if len(steady) >= DRIFT_MIN_STEPS:
        q = len(steady) // 4
        frm, to = float(np.median(steady[:q])), float(np.median(steady[-q:]))
        drift = round(to / frm, 3) if frm > 0 else None
    joules, method = _per_step_energy(tl, ends[skip:], gpus)
    return StepStats(
        pid=pid,
        name=name,
        mode=mode,
        steps=len(ends),
        median_s=round(median, 6),
        p95_s=round(p95, 6),
        max_s=round(float(np.max(steady)), 6),
        per_second=round(len(steady) / span, 3) if span > 0 else None,
        slow_k=round(k, 2),
        slow_count=len(slow_idx),
        slow_extra_s=round(extra, 4),
        slow_share=round(extra / float(np.sum(steady)), 4),
        slow=slow,
        every=every,
        first_slow=first if first is not None else (numbers[0] if numbers else None),
        drift=drift,
        drift_from_s=None if frm is None else round(frm, 6),
        drift_to_s=None if to is None else round(to, 6),
        joules_per_step=joules,
        energy_method=method,
    )


def _per_step_energy(
    tl: Timeline, ends: np.ndarray, gpus: Sequence[int]
) -> tuple[float | None, str | None]:
    """Joules a step over ``ends`` (the steady steps' ends), summed over ``gpus``."""
    if not gpus or len(ends) < 2:
        return None, None
    joules, methods, intervals = 0.0, set(), []
    for index in gpus:
        times, energy, method = _cumulative_energy(tl, index)
        if not method or ends[0] < times[0] or ends[-1] > times[-1]:
            return None, None  # a card without either, or steps outside its samples
        joules += float(np.interp(ends[-1], times, energy) - np.interp(ends[0], times, energy))
        methods.add(method)
        intervals.append(float(np.median(np.diff(times))))
    method = "counter" if methods == {"counter"} else "power × time"
    if float(np.median(np.diff(ends))) < max(intervals):
        method += "; shared out over the steps between samples"
    return round(joules / (len(ends) - 1), 4), method


def step_stats(tl: Timeline, gpus: Sequence[int] = ()) -> tuple[StepStats, ...]:
    """Each process's :class:`StepStats`, by pid; ``gpus``: the GPUs the command used, whose
    energy the steps share."""
    return tuple(_one(tl, pid, *v, gpus) for pid, v in sorted(_ends(tl).items()))
