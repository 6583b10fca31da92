"""What ``gpuprobe diagnose`` says about the ranks of one distributed job: a :class:`RankRow` per
rank, the :class:`CollectiveWait` of each collective matched across ranks, and the
:class:`MultiRankDiagnosis` that holds them with the straggler and the findings. Made by
:func:`gpuprobe.tools.diagnose.ranks.diagnose_ranks`, judged by
:data:`gpuprobe.tools.diagnose.rules.ranks.RULES_RANKS`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status, worst
from gpuprobe.core.records import Record
from gpuprobe.tools.diagnose.kernels import FamilyTime, LaunchStats

__all__ = ["CollectiveWait", "MultiRankDiagnosis", "RankRow", "ReaderStat", "UnreadRank"]


@dataclass(frozen=True)
class RankRow(Record):
    """One rank's numbers (µs; fractions in [0, 1]). Per-step values are means over its steps.

    ``gpu_busy_fraction`` is HTA's temporal breakdown (union of GPU activity over the span from
    the first to the last); ``comm_us``/``compute_us`` are unions of communication and
    computation kernels, ``overlap_fraction`` HTA's ``get_comm_comp_overlap``; ``comm_wait_us``
    the time spent in collectives waiting for later ranks; ``gpu_idle_in_steps_us`` the step
    time with no GPU activity at all.
    """

    rank: int
    rank_source: str
    path: str
    steps: int = 0
    step_median_us: float | None = None
    step_total_us: float = 0.0
    first_step_start_us: float | None = None
    gpu_busy_fraction: float | None = None
    gpu_span_us: float | None = None
    gpu_busy_in_steps_us: float = 0.0
    gpu_idle_in_steps_us: float = 0.0
    compute_us: float = 0.0
    comm_us: float = 0.0
    overlap_us: float = 0.0
    overlap_fraction: float | None = None
    exposed_comm_us: float = 0.0
    comm_kernels: int = 0
    comm_wait_us: float = 0.0
    caused_wait_us: float = 0.0
    last_arrivals: int = 0
    families: tuple[FamilyTime, ...] = ()
    launches: LaunchStats | None = None
    world_size: int | None = None
    read_seconds: float = 0.0
    one_time_us: float = 0.0  # one-time start-up in its steps (context, loads, first launches)
    one_time_share: float = 0.0  # of its profiled time
    one_time_call: str = ""  # the largest one-time call, e.g. "17.6 ms cudaLaunchKernel"

    def per_step(self, value: float) -> float:
        """``value`` divided by this rank's number of steps (1 when it has none)."""
        return value / max(self.steps, 1)


@dataclass(frozen=True)
class CollectiveWait(Record):
    """One collective kernel matched across ranks and the waiting in it.

    ``name`` is the kernel name without arguments, ``occurrence`` its index among the kernels of
    that name in profiled step ``step`` on each rank, ``sequence`` its index among all
    collectives of the first rank;
    ``last_rank`` the rank that arrived last (shortest kernel), ``wait_us`` the other ranks'
    summed wait (duration − shortest), ``durations_us`` per rank in the order of ``ranks``.
    """

    name: str
    occurrence: int
    sequence: int
    step: int | None
    last_rank: int
    wait_us: float
    max_wait_us: float
    ranks: tuple[int, ...]
    durations_us: tuple[float, ...]


@dataclass(frozen=True)
class UnreadRank(Record):
    """A rank that is not in the analysis, and why, in one line: its file could not be read
    (corrupt, unreadable, gone), its reader died twice, or (``path`` empty) its rank was not
    found at all though the others' ``world_size`` counts it. ``where``: the worker or local
    process that tried, when one did."""

    path: str
    why: str
    rank: int | None = None
    where: str = ""

    @property
    def line(self) -> str:
        """The one line that names it."""
        who = os.path.basename(self.path) if self.path else f"rank {self.rank}"
        return f"{who}: {self.why}" + (f" (on {self.where})" if self.where else "")


@dataclass(frozen=True)
class ReaderStat(Record):
    """What one reader did: a local process (``local pid N``) or a Dask worker (its address),
    the ranks and bytes it read, its busy seconds (wall clock and CPU) and its process's peak
    resident memory (MiB; None where it cannot be read)."""

    where: str
    ranks: int
    bytes: int
    seconds: float
    peak_rss_mib: float | None = None
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class MultiRankDiagnosis(Record):
    """The verdict on the ranks of one job: per-rank rows, the straggler and the findings.
    ``note`` says how the traces were grouped when they were more than these ranks (a job's
    ranks over several profiler cycles: the last cycle's ranks). ``unread``: the ranks left
    out, each with why (the analysis is partial); ``read_on`` says where the ranks were read
    ("this process", "4 local processes", "the Dask cluster at ADDRESS") and ``readers`` what
    each reader did."""

    ranks: tuple[RankRow, ...]
    findings: tuple[Finding, ...]
    collectives: tuple[CollectiveWait, ...] = ()
    matched_collectives: int = 0
    straggler: int | None = None
    seconds: float = 0.0
    note: str = ""
    unread: tuple[UnreadRank, ...] = ()
    read_on: str = ""
    readers: tuple[ReaderStat, ...] = ()

    @property
    def partial(self) -> bool:
        """Whether some ranks are not in the analysis (:attr:`unread` says which and why)."""
        return bool(self.unread)

    @property
    def status(self) -> Status:
        """The worst status among the findings."""
        return worst(self.findings)

    def finding(self, id: str) -> Finding | None:
        """The finding with this id, or None."""
        return next((f for f in self.findings if f.id == id), None)

    def rank(self, rank: int) -> RankRow | None:
        """The row of ``rank``, or None."""
        return next((r for r in self.ranks if r.rank == rank), None)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)
