"""What ``gpuprobe profile`` produced: each Python process that imported torch, its windows, the
traces, their verdict and the run's timeline. Records only (no views: ``show`` draws them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status, worst
from gpuprobe.core.records import Record
from gpuprobe.tools.diagnose.model import Diagnosis
from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
from gpuprobe.tools.monitor.summary import RunSummary

__all__ = [
    "ProcessVerdict",
    "ProfileReport",
    "ProfiledCapture",
    "ProfiledProcess",
    "ProfiledWindow",
]


@dataclass(frozen=True)
class ProfiledWindow(Record):
    """One torch.profiler window in one process: the steps it recorded (0-based, as the process
    counted them; ``recorded_from`` is the first after the warm-up) and the trace written."""

    first_step: int
    recorded_from: int
    last_step: int
    state: str  # "done", or "cut short: why"
    trace: str | None = None
    error: str | None = None
    request: str | None = None  # the --now request it answered; None for the automatic window
    seconds: float | None = None  # a time window's length
    cuda: bool = False  # CUDA activity recorded (the script had set CUDA up)
    span_s: float | None = None  # s from the profiler's start to its stop, as the process timed it

    @property
    def recorded_steps(self) -> int:
        """How many steps the trace holds (0 when the window closed during its warm-up)."""
        if self.trace is None:
            return 0
        return max(0, self.last_step - self.recorded_from + 1)


@dataclass(frozen=True)
class ProfiledCapture(Record):
    """A window the flight recorder opened by itself (``run --capture-on slow``): the slow step
    that set it off, and the step it aimed at when the slow steps recur."""

    request: str  # the id its window carries
    step: int  # the slow step (0-based, as the process counted)
    seconds: float
    median_s: float  # the running median step then
    aimed_at: int | None = None  # the next slow step the window was placed on, when they recur
    every: int | None = None  # their period, in steps
    held_slow: bool | None = None  # a slow step was in its window (None: not known yet)
    free: bool = False  # it held none, and did not count against capture_every_s
    why: str = "slow"  # "slow": a slow step; "drift": the running median rose
    from_median_s: float | None = None  # drift: the lowest running median before it


@dataclass(frozen=True)
class ProfiledProcess(Record):
    """One Python process of the command that imported torch (DataLoader workers excluded)."""

    pid: int
    host: str = ""
    argv: tuple[str, ...] = ()
    ppid: int | None = None
    rank: int | None = None
    world_size: int | None = None
    torch: str | None = None
    mode: str | None = None  # what delimited its steps: "optimizer", "dataloader" or None
    steps: int = 0
    windows: tuple[ProfiledWindow, ...] = ()
    requests: dict[str, str] = field(default_factory=dict)  # --now request id -> its fate
    aside: str | None = None  # why gpuprobe stood aside in it
    notes: tuple[str, ...] = ()
    exited: bool = False
    open_window: bool = False  # a window was open when the status was last written
    captures: tuple[ProfiledCapture, ...] = ()  # windows the flight recorder opened itself

    @property
    def name(self) -> str:
        """``rank 1 (pid 42)`` or ``pid 42 (train.py)``."""
        if self.rank is not None:
            return f"rank {self.rank} (pid {self.pid})"
        script = next(
            (a for a in self.argv if a.endswith(".py")), self.argv[0] if self.argv else ""
        )
        return f"pid {self.pid} ({PurePath(script).name})" if script else f"pid {self.pid}"

    @property
    def traces(self) -> tuple[str, ...]:
        return tuple(w.trace for w in self.windows if w.trace)


@dataclass(frozen=True)
class ProcessVerdict(Record):
    """The diagnosis of one process's trace, when the command ran several that were not the
    ranks of one job."""

    pid: int
    trace: str
    diagnosis: Diagnosis


@dataclass(frozen=True)
class ProfileReport(Record):
    """``gpuprobe profile -- CMD`` (:func:`gpuprobe.profile_command`), or one ``--now`` request:
    the command's exit code (None for a request: the job goes on), the processes profiled, the
    traces written and their verdict: ``diagnosis`` for one process, ``ranks`` for a job's
    ranks, ``verdicts`` for several unrelated processes. ``run`` is the timeline's summary."""

    command: tuple[str, ...]
    out_dir: str
    window: str  # the window asked for, in words
    exit_code: int | None = None
    processes: tuple[ProfiledProcess, ...] = ()
    traces: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None
    ranks: MultiRankDiagnosis | None = None
    verdicts: tuple[ProcessVerdict, ...] = ()
    run: RunSummary | None = None
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    request: str | None = None  # the --now request's id

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The verdict's findings (the traces'; the run's when no trace was diagnosed)."""
        if self.diagnosis is not None:
            return self.diagnosis.findings
        if self.ranks is not None:
            return self.ranks.findings
        if self.verdicts:
            return tuple(f for v in self.verdicts for f in v.diagnosis.findings)
        return self.run.findings if self.run is not None else ()

    @property
    def status(self) -> Status:
        """The worst of :attr:`findings` (skipped when there are none)."""
        return worst(self.findings) if self.findings else Status.SKIPPED

    @property
    def profiled(self) -> bool:
        """True when at least one trace was written."""
        return bool(self.traces)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)
