"""The records a diagnosis is made of: the trace's summary, one breakdown per profiled step, the
findings, and the comparison of two diagnoses. Times in µs; fractions in [0, 1].

All are frozen dataclasses with ``to_dict()``/``from_dict()`` (``--json``), and
:class:`Diagnosis` has ``_repr_html_`` for notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status, worst, worst_first
from gpuprobe.core.records import Record
from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff  # the comparison's kernel rows
from gpuprobe.tools.diagnose.whatif.model import PricedFix  # a diagnosis's priced fixes

__all__ = [
    "HOST_PHASES",
    "IDLE_CAUSES",
    "TIME_UNITS",
    "DeviceInfo",
    "Diagnosis",
    "FindingChange",
    "FixPayoff",
    "MetricChange",
    "ShareChange",
    "StepBreakdown",
    "TraceComparison",
    "TraceSummary",
]


# Why the GPU was idle, one cause per idle instant, in this order of precedence: a one-time call
# (context creation, a module or library load, lazy kernel loading, autotuning) was running or
# the GPU was being refilled after it (startup); the DataLoader's __next__ was running (input); a
# host call was waiting for the GPU, or the GPU was being refilled after it (sync); no host event
# was recorded at all for 1 ms or more (untraced: Python or native code the profiler does not
# see); the host was working on something that queued no GPU work: before the step's first
# activity, after its last, capturing a graph, or in a gap of 1 ms or more between kernels (host);
# the next activity was launched only after the GPU went idle, in a gap under 1 ms (launch: the
# CPU queues ops slower than the GPU runs them); a gap shorter than 30 µs (HTA's kernel-wait gap)
# with the next activity already queued (kernel boundary); and what none of these explains
# (other: no cause recorded in the trace).
IDLE_CAUSES = ("startup", "input", "sync", "untraced", "host", "launch", "short", "other")

# Where a step goes on the host (:mod:`~gpuprobe.tools.diagnose.phases`), each instant counted
# once: the DataLoader's __next__, the forward pass (when the trace marks it: module calls with
# with_stack, or a framework's forward span), the backward pass, the optimizer's step and
# zero_grad, the loop's other top-level CPU ops (with the forward's when it is not marked), and
# the rest of the step (Python between ops, code the profiler does not record).
HOST_PHASES = ("dataloader", "forward", "backward", "optimizer", "cpu_ops", "other")


@dataclass(frozen=True)
class DeviceInfo(Record):
    """One GPU from the trace header's ``deviceProperties``."""

    id: int
    name: str
    compute_major: int | None = None
    compute_minor: int | None = None
    total_memory_bytes: int | None = None
    num_sms: int | None = None


@dataclass(frozen=True)
class StepBreakdown(Record):
    """Where one profiled step's time went, on the host and on one GPU (µs).

    ``step`` is the N of ``ProfilerStep#N`` (None when the trace has no steps and the whole trace
    is one window). The GPU fields are None in CPU-only traces. ``host_wait_us``,
    ``kernel_wait_us`` and ``other_wait_us`` are HTA's idle categories, summed over the device's
    streams (so with several busy streams they can add up to more than ``idle_us``).
    ``idle_cause_us`` splits ``idle_us`` itself by cause, each idle instant counted once (see
    :data:`IDLE_CAUSES`): startup, input, sync, untraced, host, launch, short, other.

    When the GPU runs behind the CPU (:attr:`TraceSummary.steps_timed_on_gpu`), a GPU row's
    ``start_us`` and ``duration_us`` are the step's window on the GPU's side (from the first
    start of the work it launched to the next step's; :mod:`~gpuprobe.tools.diagnose.lag`), its
    GPU numbers are timed there, and ``cpu_duration_us`` is the host's step (``ProfilerStep#N``);
    the host's counts (ops, syncs, reads, DataLoader time) are always the host step's.

    ``host_phase_us`` splits the host step by :data:`HOST_PHASES` (µs, adding up to the host
    step's duration); it has no ``forward`` key when the trace does not mark the forward pass,
    whose time is then in ``cpu_ops``.
    """

    step: int | None
    start_us: float
    duration_us: float
    device: int | None = None
    gpu_busy_us: float | None = None
    gpu_busy_fraction: float | None = None
    idle_us: float | None = None
    host_wait_us: float | None = None
    kernel_wait_us: float | None = None
    other_wait_us: float | None = None
    kernels: int = 0
    memcpys: int = 0
    memsets: int = 0
    median_kernel_us: float | None = None
    median_launch_us: float | None = None
    dataloader_us: float = 0.0
    syncs: int = 0
    items: int = 0
    cpu_ops: int = 0
    idle_cause_us: dict[str, float] = field(default_factory=dict)
    cpu_duration_us: float | None = None
    host_phase_us: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``"#N"`` or ``"trace"``."""
        return "trace" if self.step is None else f"#{self.step}"


@dataclass(frozen=True)
class TraceSummary(Record):
    """What was read and the whole-trace GPU time split.

    The GPU fractions follow HTA's ``get_temporal_breakdown`` and ``get_idle_time_breakdown``:
    ``gpu_busy_fraction`` (also ``steps_busy_fraction``) is the union of kernels, memcpy and
    memset launched in the analysed steps over their span (``gpu_span_us``: from the first to
    the last of those activities); idle categories are shares of the idle time summed over
    streams. The same union over every GPU activity of the trace, launched in the steps or not,
    is ``trace_gpu_busy_fraction`` of ``trace_gpu_span_us`` (the first GPU activity's start to
    the last one's end); ``gpu_activities_outside_steps`` activities were launched outside the
    analysed steps (before the first, after the last, between them, or with no launch in the
    trace), and ``gpu_busy_outside_steps_us`` is the busy time only they account for (the
    trace's busy time less the steps'). With several devices, the numbers are the sum over
    devices.

    ``host_phase_share`` is each host phase's share of the analysed steps' time
    (:data:`HOST_PHASES`; the shares add up to 1) and ``host_phase_median_us`` its median per
    step; neither has ``forward`` when the trace does not mark the forward pass.
    """

    path: str
    size_bytes: int
    events: int
    skipped_events: int
    steps: tuple[int, ...]
    # what was wrong with the file, repaired where certain, one line each (damage.py)
    damage: tuple[str, ...] = ()
    devices: tuple[DeviceInfo, ...] = ()
    has_gpu: bool = False
    with_stack: bool = False
    record_shapes: bool = False
    profile_memory: bool = False
    cpu_ops: int = 0
    gpu_activities: int = 0
    span_us: float = 0.0
    gpu_span_us: float | None = None
    # the median share of a step's GPU work that ran outside its host step, and whether the
    # steps were timed on the GPU's side for it (the GPU runs behind the CPU: see the lag module)
    gpu_lag_share: float | None = None
    steps_timed_on_gpu: bool = False
    gpu_busy_fraction: float | None = None
    steps_busy_fraction: float | None = None  # = gpu_busy_fraction, named for its span
    trace_gpu_span_us: float | None = None
    trace_gpu_busy_fraction: float | None = None
    gpu_activities_outside_steps: int = 0
    gpu_busy_outside_steps_us: float = 0.0
    gpu_idle_fraction: float | None = None
    host_wait_fraction: float | None = None
    kernel_wait_fraction: float | None = None
    other_wait_fraction: float | None = None
    host_phase_share: dict[str, float] = field(default_factory=dict)
    host_phase_median_us: dict[str, float] = field(default_factory=dict)
    read_seconds: float = 0.0
    analyse_seconds: float = 0.0
    # "kineto", or "legacy": the autograd profiler's own export (gpuprobe.tools.diagnose.legacy:
    # its GPU time is each op's CUDA-event span, not kernels)
    trace_format: str = "kineto"
    # an accelerator that is not a GPU whose events fill the trace ("MTIA"): its device activity
    # is not read, so no GPU activity does not make the trace CPU-only; None otherwise
    accelerator: str | None = None


@dataclass(frozen=True)
class Diagnosis(Record):
    """The verdict on one trace: findings (worst first), the per-step breakdown and the summary."""

    summary: TraceSummary
    steps: tuple[StepBreakdown, ...]
    findings: tuple[Finding, ...]
    cold: bool = False  # a cold first pass: no steady part (see the one-time-start finding)
    whatif: tuple[PricedFix, ...] = ()  # each priced fix's replay, largest gain first

    @property
    def status(self) -> Status:
        """The worst status among the findings."""
        return worst(self.findings)

    def finding(self, id: str) -> Finding | None:
        """The finding with this id, or None."""
        return next((f for f in self.findings if f.id == id), None)

    def problems(self) -> list[Finding]:
        """Findings that say something to change (warn or fail), worst first."""
        return [f for f in worst_first(self.findings) if f.status in (Status.WARN, Status.FAIL)]

    @property
    def headline(self) -> Finding | None:
        """The problem whose fix would gain most (by :attr:`Finding.gain`); the GPU-idle
        summary only when no finding of its cause has a gain; on a cold first pass, the
        one-time start-up, as also when a one-time start-up warns and nothing else has a gain;
        a GPU the run never used (``gpu-unused``, whose gain the trace cannot price) before
        anything else. None without such a problem."""
        start = self.finding("one-time-start")
        if self.cold:
            return start
        unused = self.finding("gpu-unused")
        if unused is not None and unused.status is Status.WARN:
            return unused  # the GPU did none of the work: nothing else on the host comes first
        gains = [f for f in self.problems() if f.gain is not None and f.gain > 0]
        specific = [f for f in gains if f.id != "gpu-idle"] or gains
        best = max(specific, key=lambda f: f.gain or 0.0, default=None)
        if best is None and start is not None and start.status is Status.WARN:
            return start  # a first pass with nothing steady to gain: its start-up is the news
        return best

    def to_dict(self) -> dict[str, Any]:
        """The record, plus ``headline``: the id of :attr:`headline` (None without one)."""
        out = super().to_dict()
        out["headline"] = None if self.headline is None else self.headline.id
        return out

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)


# ---------------------------------------------------------------------------------------------
# The comparison of two diagnoses (``--compare``): numbers, shares, kernels and findings.
# ---------------------------------------------------------------------------------------------

TIME_UNITS = ("µs", "ms", "s")  # a metric in one of these is a duration: more of it is slower


@dataclass(frozen=True)
class MetricChange(Record):
    """One number before and after (None where a trace does not have it). A change of at most
    ``tolerance`` (in the metric's unit) counts as none."""

    name: str
    unit: str
    before: float | None
    after: float | None
    better: str = "lower"  # "lower" or "higher": which direction is an improvement ("" neither)
    tolerance: float = 0.0

    @property
    def change(self) -> float | None:
        """after − before."""
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def improved(self) -> bool | None:
        """True when the change goes the ``better`` way (None when unknown, unchanged, or the
        number has no better way: ``better=""``)."""
        c = self.change
        if c is None or abs(c) <= self.tolerance or c == 0 or not self.better:
            return None
        return (c < 0) == (self.better == "lower")

    @property
    def verdict(self) -> str:
        """``"slower"``/``"faster"`` for a duration (by its direction alone: a duration that
        grows is slower), ``"worse"``/``"better"`` for other numbers, ``""`` when unchanged."""
        c = self.change
        if c is None or abs(c) <= self.tolerance or c == 0 or not self.better:
            return ""
        if self.unit in TIME_UNITS:
            return "slower" if c > 0 else "faster"
        return "better" if self.improved else "worse"


@dataclass(frozen=True)
class ShareChange(Record):
    """A share (a fraction of ``of``) before and after, with the GPU time per step it stands for
    (µs); None where a trace has none of ``of``. ``better``: which way of the share is an
    improvement ("lower", "higher"), or "" where its time is what is judged (a copy kind or a
    kernel family of GPU time: more time is slower). ``flagged``: it moved by at least the
    comparison's threshold; only a flagged share gets a verdict."""

    group: str
    name: str
    of: str
    before: float | None
    after: float | None
    before_us: float = 0.0
    after_us: float = 0.0
    better: str = ""
    flagged: bool = False

    @property
    def change_pp(self) -> float | None:
        """after − before, in percentage points."""
        if self.before is None or self.after is None:
            return None
        return 100.0 * (self.after - self.before)

    @property
    def verdict(self) -> str:
        """``"worse"``/``"better"`` by the share's direction; where the time is judged,
        ``"slower"``/``"faster"`` by its time; ``""`` when it is not flagged."""
        c = self.change_pp
        if c is None or c == 0 or not self.flagged:
            return ""
        if self.better:
            return "better" if (c < 0) == (self.better == "lower") else "worse"
        dt = self.after_us - self.before_us
        return "" if dt == 0 else "slower" if dt > 0 else "faster"

    @property
    def worse(self) -> bool | None:
        """True when the change is for the worse (None when neither)."""
        v = self.verdict
        return None if not v else v in ("worse", "slower")


@dataclass(frozen=True)
class FindingChange(Record):
    """A finding's status in each trace (None: the trace has no such finding)."""

    id: str
    title: str
    before: Status | None
    after: Status | None


@dataclass(frozen=True)
class FixPayoff(Record):
    """What one fix of BEFORE promised and what AFTER paid. ``predicted``: the share of BEFORE's
    analysed time its finding said fixing would save; ``left``: the share it is still worth in
    AFTER (0 when AFTER has no such problem); ``fixed``: the cause is gone from AFTER (see
    :data:`~gpuprobe.tools.diagnose.compare.FIXED_LEFT_SHARE`); ``realised``: the step's gain
    from BEFORE to AFTER (1 − median step after / before), the same for every fix, so it is
    judged against the fixes made ``together`` (their ids, this one included) whose combined
    prediction is ``predicted_together`` (their changes replayed at once); ``verdict``: ``"paid as predicted"``, ``"paid less"``,
    ``"paid more"`` (within the tolerance of the goal or outside it) or ``"not fixed"``."""

    id: str
    title: str
    predicted: float
    left: float
    fixed: bool
    realised: float | None
    together: tuple[str, ...] = ()
    predicted_together: float | None = None
    verdict: str = ""


@dataclass(frozen=True)
class TraceComparison(Record):
    """What changed between two traces, e.g. before and after a fix: the ``headline`` (the step
    time's change and what explains most of it), ``notes`` (traces that differ in kind, such as
    their GPUs), the numbers, the shares of GPU time (``flagged`` those that moved by at least
    ``share_change_pp`` percentage points), the kernel diff, each finding's status, and for
    each fix BEFORE priced, the gain it predicted against the gain AFTER realised
    (``payoffs``; ``realised``: 1 − median step after / median step before)."""

    before: Diagnosis
    after: Diagnosis
    metrics: tuple[MetricChange, ...]
    findings: tuple[FindingChange, ...]
    payoffs: tuple[FixPayoff, ...] = ()
    realised: float | None = None
    shares: tuple[ShareChange, ...] = ()
    kernels: KernelDiff | None = None
    headline: str = ""
    notes: tuple[str, ...] = ()
    share_change_pp: float = 0.0

    def flagged(self) -> list[ShareChange]:
        """The shares that moved by at least ``share_change_pp`` (Tensor Cores, precision,
        copies, kernel families; within each, largest move first)."""
        groups = list(dict.fromkeys(s.group for s in self.shares))
        return sorted(
            (s for s in self.shares if s.flagged),
            key=lambda s: (groups.index(s.group), -abs(s.change_pp or 0.0)),
        )

    def metric(self, name: str) -> MetricChange | None:
        """The metric called ``name``, or None."""
        return next((m for m in self.metrics if m.name == name), None)

    def share(self, name: str, group: str | None = None) -> ShareChange | None:
        """The share called ``name`` (in ``group`` when given), or None."""
        return next((s for s in self.shares if s.name == name and group in (None, s.group)), None)

    def report(self, path: str) -> str:
        """Write the comparison as an HTML page to ``path``; returns the path."""
        return str(render.report(self, path))

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)
