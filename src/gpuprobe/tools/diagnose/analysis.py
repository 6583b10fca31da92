"""From the trace's columns to the numbers the rules judge: :class:`TraceContext`, the
:class:`~gpuprobe.tools.diagnose.columns.TraceColumns` of a trace (each event's step, GPU busy time
and HTA's idle gaps per device and stream, launches, syncs and scalar reads) with, cached and
computed in the modules beside it, why the GPU was idle (:mod:`.idle`), op nesting and Python
frames (:mod:`.frames`) and the per-step breakdowns and summary (:mod:`.breakdown`). Those modules
read the columns only (they import :mod:`.columns`, never this module); what one of them computes
and another reads is handed to it here, from the cache. Times in µs.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from gpuprobe.core import render
from gpuprobe.tools.diagnose import breakdown, frames, idle, onetime, phases, steadiness
from gpuprobe.tools.diagnose.columns import TraceColumns, column
from gpuprobe.tools.diagnose.intervals import merge_intervals
from gpuprobe.tools.diagnose.kineto import RawTrace
from gpuprobe.tools.diagnose.model import IDLE_CAUSES, StepBreakdown, TraceSummary
from gpuprobe.tools.diagnose.steps import Step
from gpuprobe.tools.diagnose.whatif.price import WhatIf

__all__ = ["TraceContext"]


class TraceContext(TraceColumns):
    """The trace as NumPy columns with each event's step, plus the per-step breakdowns and
    the causes of idle time, op nesting and Python frames (cached)."""

    def __init__(self, raw: RawTrace, steps: tuple[int, int] | None = None) -> None:
        super().__init__(raw, steps)
        # leading steps made long by one-time calls are warm-up (one-time-start's), and the
        # slow steps after them are warm-up not over (unsteady-window's): unless the steps were
        # chosen, the analysis runs over the steady steps after both
        self.warmup: list[Step] = []
        self.unsteady_lead: list[steadiness.StepFacts] = []
        self.unsteady_lead_calls_us = 0.0  # one-time calls' time in them (one-time-start's)
        if steps is None:
            calls, spans = self.one_time_calls, self.one_time_spans
            warm = onetime.warmup_steps(self, calls, spans)
            lead = steadiness.leading_slow_steps(self, calls, skip=len(warm))
            lead_calls = steadiness.one_time_call_us(self, calls)[len(warm) : len(warm) + len(lead)]
            rest = self.steps[len(warm) + len(lead) :]
            if (warm or lead) and rest[0].number is not None and rest[-1].number is not None:
                self.__dict__.clear()  # the cached columns of the first selection
                super().__init__(raw, (rest[0].number, rest[-1].number))
                self.__dict__["one_time_calls"] = calls
                self.__dict__["one_time_spans"] = spans
                self.warmup = warm
                self.unsteady_lead = lead
                self.unsteady_lead_calls_us = float(lead_calls.sum())
        causes = self.idle_cause_per_step if self.has_gpu else {}
        self.breakdowns: list[StepBreakdown] = breakdown.step_breakdowns(
            self, causes, phases.phase_dicts(*self.host_phases)
        )

    # -- where the step goes on the host ----------------------------------------------------

    @cached_property
    def host_phases(self) -> tuple[np.ndarray, bool]:
        """(µs per step and host phase, steps × :data:`~.model.HOST_PHASES`; whether the trace
        marks its forward pass): :func:`.phases.host_phases`."""
        return phases.host_phases(self, self.op_top)

    @cached_property
    def host_phase_share(self) -> tuple[dict[str, float], dict[str, float]]:
        """(each host phase's share of the steps' time, adding up to 1; its median per step,
        µs), without ``forward`` when the trace does not mark it (:func:`.phases.phase_summary`)."""
        return phases.phase_summary(*self.host_phases)

    def __repr__(self) -> str:
        return render.repr_(self)

    # -- why the GPU was idle -----------------------------------------------------------------

    @cached_property
    def dataloader_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Union of the DataLoader ``__next__`` spans (host time)."""
        return idle.dataloader_intervals(self)

    @cached_property
    def capture_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Union of the stream captures into a CUDA/HIP graph (:func:`.idle.capture_intervals`)."""
        return idle.capture_intervals(self)

    @cached_property
    def capture_share(self) -> float:
        """Share of the selected steps' time spent capturing graphs (0 without captures)."""
        return idle.capture_share(self, self.capture_intervals)

    @cached_property
    def captured_launches(self) -> tuple[int, int]:
        """Kernel launch calls in the selected steps: (made while capturing a graph, all)."""
        return idle.captured_launches(self, self.capture_intervals)

    @cached_property
    def one_time_calls(self) -> np.ndarray:
        """Indices of the runtime calls that are one-time costs (:func:`.onetime.one_time_calls`)."""
        return onetime.one_time_calls(self)

    @cached_property
    def first_calls(self) -> np.ndarray:
        """Indices of the ops whose first call is a one-time cost (:func:`.onetime.first_calls`)."""
        return onetime.first_calls(self)

    @cached_property
    def one_time_spans(self) -> onetime.OneTimeSpans:
        """The one-time host stretches of a compiled run's first pass: compiling, a compiled
        region's far slower run, the untraced time before a first compiled run or launch
        (:func:`.onetime.one_time_spans`)."""
        return onetime.one_time_spans(self, self.one_time_calls)

    @cached_property
    def one_time_share(self) -> tuple[float, float]:
        """(µs lost to one-time start-up: the GPU's idle time in one-time calls inside the
        analysed steps, or the calls' own time without GPU activity, plus the warm-up steps
        and the one-time calls in the slow leading steps left out (:attr:`unsteady_lead`); that
        as a share of the analysed, warm-up and left-out time)."""
        warm = sum(s.end - s.start for s in self.warmup) + self.unsteady_lead_calls_us
        if self.has_gpu:
            lost = float(self.idle_of_cause("startup").sum())
        else:
            calls = self.one_time_calls
            ops = self.first_calls[self.op_step[self.first_calls] >= 0]
            spans = self.one_time_spans
            a, b = merge_intervals(
                np.concatenate([self.rt_ts[calls], self.op_ts[ops], spans.start]),
                np.concatenate(
                    [
                        self.rt_ts[calls] + self.rt_dur[calls],
                        self.op_ts[ops] + self.op_dur[ops],
                        spans.end,
                    ]
                ),
            )
            keep = self.step_of(a) >= 0
            lost = float((b - a)[keep].sum())
        whole = float(self.timed_durations.sum()) + warm + self.unsteady_lead_us
        return lost + warm, ((lost + warm) / whole if whole > 0 else 0.0)

    @property
    def unsteady_lead_us(self) -> float:
        """µs of the slow leading steps left out, less their one-time calls."""
        return float(sum(f.us for f in self.unsteady_lead))

    @property
    def cold(self) -> bool:
        """True when the profile is a cold first pass with no steady part to judge: one-time
        start-up takes :data:`.onetime.COLD_TRACE_FRACTION` or more of a trace without steps,
        or of the median analysed step (the warm-up steps, left out, do not count): a first
        pass profiled whole, such as a single compiled step that compiles."""
        if all(s.number is None for s in self.steps):
            return self.one_time_share[1] >= onetime.COLD_TRACE_FRACTION
        if not self.has_gpu:
            return False
        lost = self.idle_of_cause("startup") / np.maximum(self.timed_durations, 1e-9)
        return float(np.median(lost)) >= onetime.COLD_TRACE_FRACTION

    @cached_property
    def untraced_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Holes in the host's traced events inside the steps (:func:`.idle.untraced_intervals`)."""
        return idle.untraced_intervals(self)

    @cached_property
    def idle_by_cause(self) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
        """Per device, the GPU's idle time inside the selected steps split by cause
        (:data:`IDLE_CAUSES`), each instant given to the first cause that covers it
        (:func:`.idle.idle_by_cause`)."""
        return idle.idle_by_cause(
            self,
            self.dataloader_intervals,
            self.capture_intervals,
            self.one_time_calls,
            (
                self.op_ts[self.first_calls],
                self.op_ts[self.first_calls] + self.op_dur[self.first_calls],
            ),
            self.untraced_intervals,
            idle.cpu_work_intervals(self, self.op_top & self.on_launch_threads),
            self.one_time_spans.merged(),
        )

    @cached_property
    def on_launch_threads(self) -> np.ndarray:
        """cpu_ops on the launching threads (every op when no launch is in the trace): the
        host work that can hold the GPU up."""
        if not self.launches_gpu_work:
            return np.ones(self.op_ts.size, dtype=bool)
        return np.isin(self.op_tid, self.launch_tids)

    @cached_property
    def idle_cause_per_step(self) -> dict[int, np.ndarray]:
        """Per device, an array (steps × causes) of idle µs, causes in :data:`IDLE_CAUSES`."""
        return idle.idle_cause_per_step(self, self.idle_by_cause)

    def idle_of_cause(self, cause: str) -> np.ndarray:
        """Idle µs per step given to ``cause``, on the device where it is largest (zeros
        without GPU activity)."""
        j = IDLE_CAUSES.index(cause)
        out = np.zeros(len(self.steps))
        for table in self.idle_cause_per_step.values():
            out = np.maximum(out, table[:, j])
        return out

    # -- what each fix would save ------------------------------------------------------------

    @cached_property
    def whatif(self) -> WhatIf:
        """The replays of the analysed steps' dependency graph (:mod:`.whatif`), gains as a
        share of the steps' steady time (their time less one-time start-up idle)."""
        steady = np.maximum(self.timed_durations - self.idle_of_cause("startup"), 1e-9)
        return WhatIf(self, float(steady.sum()) if len(self.steps) else 0.0)

    # -- nesting and frames -----------------------------------------------------------------

    @cached_property
    def op_top(self) -> np.ndarray:
        """True for cpu_ops not nested in another cpu_op of the same thread."""
        return frames.op_top(self)

    @cached_property
    def _frames(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:attr:`op_frames` and :attr:`op_layer_call` in one walk over each op's stack."""
        return frames.op_frames(self, self.op_top, column(self.raw.op_stack, np.dtype("l").type))

    @property
    def op_frames(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each top-level cpu_op (-1/False elsewhere or when unknown): the name id of its
        innermost Python frame, the name id of the first frame in the user's own code (outside
        site-packages, the standard library and torch), and whether a module call
        (``nn.Module.__call__``) lies between the two: then the op is a layer of a model, called
        once per layer, not the iteration of a loop. From ``python_function`` events
        (with_stack, PyTorch >= 1.10) or the ``Call stack`` argument (PyTorch <= 1.9)."""
        return self._frames[:3]

    @property
    def op_layer_call(self) -> np.ndarray:
        """For each top-level cpu_op whose user frame runs inside a module's forward (a module
        call a few frames out from it): the index of that forward's ``python_function`` event,
        one per call of the module; else -1. The profiler writes library paths relative to
        ``sys.path`` (``transformers/models/...``), so a model's own ``forward`` can look like
        the user's code: its ops repeat once per layer, and only repeats inside one call of it
        are a loop. -1 everywhere without ``python_function`` events."""
        return self._frames[3]

    @property
    def op_user_frame(self) -> np.ndarray:
        """Name id of the first frame in the user's own code around each top-level op (-1)."""
        return self.op_frames[1]

    @property
    def has_stack(self) -> bool:
        """True when the trace has Python frames for its ops (with_stack=True)."""
        return bool((self.op_frames[0] >= 0).any())

    # -- summary ----------------------------------------------------------------------------

    def summary(self, read_seconds: float, analyse_seconds: float) -> TraceSummary:
        """The whole-trace record, with HTA-style GPU fractions over the GPU span."""
        share, median = self.host_phase_share
        return breakdown.trace_summary(self, read_seconds, analyse_seconds, share, median)
