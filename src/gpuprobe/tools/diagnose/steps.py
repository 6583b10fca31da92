"""The steps of a trace: the ``--steps`` range as typed, and the steps the analysis runs over
(the ``ProfilerStep#N`` annotations, the longest of each number, or the whole trace as one step
when it has none). Times in µs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.damage import enclosing_steps
from gpuprobe.tools.diagnose.kineto import RawTrace

__all__ = ["Step", "parse_step_range", "select_steps"]


def parse_step_range(text: str) -> tuple[int, int]:
    """``"N..M"``, ``"N"``, ``"N.."`` or ``"..M"`` -> inclusive (N, M)."""
    t = text.strip()
    try:
        if ".." in t:
            a, _, b = t.partition("..")
            lo = int(a) if a.strip() else -(1 << 62)
            hi = int(b) if b.strip() else 1 << 62
        else:
            lo = hi = int(t)
    except ValueError:
        raise InputError(f"--steps {text!r}: expected N..M, e.g. --steps 10..19") from None
    if lo > hi:
        raise InputError(f"--steps {text!r}: the first step is after the last")
    return lo, hi


@dataclass(frozen=True)
class Step:
    """One step: its ``ProfilerStep#`` number (None for the whole trace), start and end (µs)."""

    number: int | None
    start: float
    end: float


def select_steps(
    raw: RawTrace, wanted: tuple[int, int] | None, spans: list[tuple[np.ndarray, np.ndarray]]
) -> list[Step]:
    """The steps of ``raw`` in the inclusive range ``wanted`` (all without one), sorted by start;
    without step annotations, one unnumbered step over all ``spans`` (start, duration columns)."""
    seen: dict[int, Step] = {}
    for n, ts, dur in raw.steps:
        if n not in seen or dur > seen[n].end - seen[n].start:
            seen[n] = Step(n, ts, ts + dur)
    steps = sorted(seen.values(), key=lambda s: (s.start, -s.end))
    around = enclosing_steps([(s.number, s.start, s.end) for s in steps])
    if around:
        gone = [steps[i] for i in sorted(around)]
        raw.damage.append(
            f"{'step' if len(gone) == 1 else 'steps'} "
            + ", ".join(f"#{s.number}" for s in gone)
            + (" spans" if len(gone) == 1 else " span")
            + " other steps whole: a span around the steps (a record_function named like "
            "one, or merged profiles), not a step; left out"
        )
        steps = [s for i, s in enumerate(steps) if i not in around]
    if wanted is not None:
        if not steps:
            raise InputError(
                f"{raw.path}: --steps was given but the trace has no ProfilerStep#N "
                "annotations (profile with a schedule and call prof.step() each iteration)"
            )
        lo, hi = wanted
        chosen = [s for s in steps if s.number is not None and lo <= s.number <= hi]
        if not chosen:
            have = ", ".join(str(s.number) for s in steps[:12])
            raise InputError(f"{raw.path}: no profiled step in --steps range; steps: {have}")
        return chosen
    if steps:
        return steps
    first = min((float(a.min()) for a, _ in spans if a.size), default=0.0)
    last = max((float((a + d).max()) for a, d in spans if a.size), default=0.0)
    return [Step(None, first, last)]
