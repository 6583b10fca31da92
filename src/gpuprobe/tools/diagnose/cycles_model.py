"""What ``gpuprobe diagnose`` says about one process's successive profiler cycles (the files
``torch.profiler.tensorboard_trace_handler`` writes with ``schedule(..., repeat=N)``): a
:class:`CycleRow` per cycle (its steps, GPU busy share and idle split, its phase: warm-up,
steady or unsteady, and why) and the :class:`CycleDiagnosis` that holds them with the full
:class:`~gpuprobe.tools.diagnose.model.Diagnosis` of the steady cycle. Made by
:func:`gpuprobe.tools.diagnose.cycles.diagnose_cycles`. Times in µs; fractions in [0, 1]."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status
from gpuprobe.core.records import Record
from gpuprobe.tools.diagnose.model import Diagnosis

__all__ = ["PHASES", "CycleDiagnosis", "CycleRow", "Phase"]

Phase = Literal["warm-up", "steady", "unsteady"]
PHASES: tuple[Phase, ...] = ("warm-up", "steady", "unsteady")
"""A cycle's phase: before the run settled (warm-up), like the later cycles (steady), or off
from them after the run had settled (unsteady: an evaluation, a checkpoint, a slow input)."""


@dataclass(frozen=True)
class CycleRow(Record):
    """One profiler cycle (one trace file) of the process.

    ``cycle`` counts from 1 in time order; ``start_us``/``end_us`` are the trace's window (µs
    since the epoch). ``gpu_busy_fraction`` is the GPU busy time inside its steps over their
    time (summed over devices); ``idle_cause_us`` the idle time of its steps by cause
    (:data:`~gpuprobe.tools.diagnose.model.IDLE_CAUSES`), summed over steps and devices, so each
    cause's share is ``idle_cause_us[c] / gpu_step_time_us``. ``longest_call_us`` is its
    longest CUDA/HIP runtime call that is not a sync (a module load inside a first launch shows
    there). ``phase`` and ``why`` say how it compares with the steady cycles.
    """

    cycle: int
    path: str
    phase: Phase
    why: str
    pid: int | None = None
    host: str | None = None
    rank: int | None = None
    start_us: float | None = None
    end_us: float | None = None
    steps: int = 0
    first_step: int | None = None
    last_step: int | None = None
    step_median_us: float | None = None
    step_total_us: float = 0.0
    gpu_step_time_us: float = 0.0
    gpu_busy_us: float = 0.0
    gpu_busy_fraction: float | None = None
    idle_cause_us: dict[str, float] = field(default_factory=dict)
    longest_call_us: float | None = None
    longest_call: str = ""
    gap_before_us: float | None = None

    @property
    def step_range(self) -> str:
        """``"5..10"``, ``"16"`` or ``"n/a"`` (a trace without ProfilerStep)."""
        if self.first_step is None or self.last_step is None:
            return "n/a"
        if self.first_step == self.last_step:
            return str(self.first_step)
        return f"{self.first_step}..{self.last_step}"

    def idle_share(self, cause: str) -> float | None:
        """The share of the steps' GPU time left idle for ``cause`` (None without GPU)."""
        if self.gpu_step_time_us <= 0:
            return None
        return self.idle_cause_us.get(cause, 0.0) / self.gpu_step_time_us


@dataclass(frozen=True)
class CycleDiagnosis(Record):
    """The verdict on one process's profiler cycles: a row per cycle, which are warm-up and
    which steady, and the full diagnosis of the steady cycle diagnosed (``diagnosed``, its
    ``cycle`` number; the last steady one). ``reference_step_us``/``reference_busy`` are what
    the cycles were compared with (the median over every cycle but the first)."""

    process: str
    cycles: tuple[CycleRow, ...]
    diagnosed: int
    diagnosis: Diagnosis
    reference_step_us: float | None = None
    reference_busy: float | None = None
    note: str = ""
    seconds: float = 0.0

    @property
    def status(self) -> Status:
        """The worst status among the diagnosed cycle's findings."""
        return self.diagnosis.status

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The diagnosed cycle's findings."""
        return self.diagnosis.findings

    def finding(self, id: str) -> Finding | None:
        """The diagnosed cycle's finding with this id, or None."""
        return self.diagnosis.finding(id)

    def cycle(self, number: int) -> CycleRow | None:
        """The row of cycle ``number`` (from 1), or None."""
        return next((c for c in self.cycles if c.cycle == number), None)

    def phase(self, phase: Phase) -> tuple[CycleRow, ...]:
        """The cycles in ``phase``."""
        return tuple(c for c in self.cycles if c.phase == phase)

    def __str__(self) -> str:
        return render.text(self)

    def __repr__(self) -> str:
        return render.repr_(self)

    def _repr_html_(self) -> str:
        return render.html(self)
