"""Which traces of a folder the ``--html`` page draws, read again for their timelines (a folder's
diagnosis keeps no trace in memory: HTA's lesson, issue #250). For a job's ranks: the straggler
and the median rank beside it, so the page shows what the straggler does differently (or the
median rank alone when no rank straggles); for one process's profiler cycles: the cycle the
report diagnoses in full."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis
from gpuprobe.tools.diagnose.engine import diagnose_with_context
from gpuprobe.tools.diagnose.model import Diagnosis
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis, RankRow

__all__ = ["DrawnTrace", "median_rank", "traces_to_draw"]


@dataclass(frozen=True)
class DrawnTrace:
    """One trace the page draws: who it is (``"rank 7, the straggler"``), its diagnosis and the
    trace read into memory."""

    who: str
    path: str
    diagnosis: Diagnosis
    ctx: TraceContext


def median_rank(d: MultiRankDiagnosis) -> RankRow | None:
    """The rank whose median step is the median among the ranks other than the straggler
    (ranks without steps last); None when there is no other rank."""
    others = [r for r in d.ranks if r.rank != d.straggler]
    if not others:
        return None
    timed = sorted(
        others, key=lambda r: (r.step_median_us is None, r.step_median_us or 0.0, r.rank)
    )
    return timed[(len(timed) - 1) // 2]


def traces_to_draw(
    result: MultiRankDiagnosis | CycleDiagnosis,
    *,
    steps: str | tuple[int, int] | None = None,
) -> tuple[DrawnTrace, ...]:
    """The traces the page of ``result`` draws, each read again with the same ``steps``."""
    chosen: list[tuple[str, str]] = []
    if isinstance(result, CycleDiagnosis):
        row = result.cycle(result.diagnosed)
        if row is not None:
            chosen.append((f"cycle {row.cycle} ({row.phase}), diagnosed in full", row.path))
    else:
        if result.straggler is not None:
            s = next(r for r in result.ranks if r.rank == result.straggler)
            chosen.append((f"rank {s.rank}, the straggler", s.path))
        m = median_rank(result)
        if m is not None:
            chosen.append((f"rank {m.rank}, the median rank", m.path))
    out = []
    for who, path in chosen:
        diag, ctx = diagnose_with_context(path, steps=steps)
        out.append(DrawnTrace(who, path, diag, ctx))
    return tuple(out)
