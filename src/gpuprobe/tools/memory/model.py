"""What the memory tool's searches produce: the trials of ``gpuprobe fit`` and the
:class:`FitResult`, the rows of ``gpuprobe precision`` and the :class:`PrecisionReport`, with the
thresholds their engines (:mod:`.fit`, :mod:`.precision`) and rules (:mod:`.rules`) share. The
out-of-memory report is :class:`~gpuprobe.tools.memory.oom.report.OomReport`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, status_counts
from gpuprobe.core.records import Record
from gpuprobe.core.units import count, seconds, size

__all__ = [
    "DEFAULT_TOLERANCE",
    "KNEE_FRACTION",
    "OOM_REASON",
    "REL_ERROR_OK",
    "SPEEDUP_MIN",
    "FitResult",
    "FitTrial",
    "Outcome",
    "Phase",
    "PrecisionReport",
    "PrecisionResult",
]


DEFAULT_TOLERANCE = 0.05  # the found size is at least (1 - 0.05) x the largest that fits (issue 7)


# Throughput "flattens" at the smallest batch reaching this fraction of the best measured; past
# it a bigger batch buys at most 10 % more samples/s for proportionally more memory.
# gpuprobe's choice, in line with E9 (docs/experiments.md#e9: at batch 1024 a 3060 Ti and a PRO
# 6000 took the same s/epoch; at 10240 the bigger card pulled ahead).
KNEE_FRACTION = 0.9


Phase = Literal["search", "curve"]


@dataclass(frozen=True)
class FitTrial(Record):
    """One batch size tried."""

    batch_size: int
    fits: bool
    phase: Phase = "search"
    error: str | None = None  # the out-of-memory message, or the cap it went over, when not a fit
    median_s: float | None = None  # one step, on the device's clock
    p20_s: float | None = None
    p80_s: float | None = None
    n: int = 0
    throughput: float | None = None  # samples/s at the median
    peak_memory: int | None = None  # bytes: CUDA allocator peak, or the trial process's peak RSS
    memory_kind: str | None = None  # what peak_memory measures
    # it ran, but its peak (with what the trial took of the cap before the step) was above the
    # memory_limit: pages mapped before the cap was set count in the RSS, not in RLIMIT_AS; a
    # batch over the cap is not a fit
    over_cap: bool = False

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        if self.over_cap:
            return f"{self.batch_size}: peak {size(self.peak_memory)}, over the memory cap"
        if not self.fits:
            return f"{self.batch_size}: out of memory"
        return (
            f"{self.batch_size}: {seconds(self.median_s)}/step, "
            f"{count(self.throughput)} samples/s, peak {size(self.peak_memory)}"
        )


@dataclass(frozen=True)
class FitResult(Record):
    """The largest batch that fits, the trials that found it and the throughput curve."""

    best: int | None  # the largest size that fits (None: not even the smallest)
    first_fail: int | None  # the smallest size that failed (None: everything tried fits)
    trials: tuple[FitTrial, ...]
    search_trials: int
    trial_bound: int  # ⌈log2(candidates)⌉ + 2
    candidates: int
    smallest: int
    largest: int
    tolerance: float = DEFAULT_TOLERANCE
    knee: int | None = None  # the smallest size within KNEE_FRACTION of the best throughput
    best_throughput_batch: int | None = None
    device: str = "cpu"
    timer: str = "perf_counter"
    isolated: bool = False
    memory_limit: int | None = None  # bytes, when a cap was set
    cap: str | None = None  # what the cap limits, in words
    # under an address-space cap (RLIMIT_AS, a CPU trial's): bytes each trial process had mapped
    # when its cap was set (interpreter, torch: not counted against the cap), and bytes of the
    # cap taken before the step ran (the trial's own set-up), the most of any trial
    cap_baseline: int | None = None
    cap_overhead: int | None = None
    findings: tuple[Finding, ...] = ()
    others_cores: float | None = None  # cores other processes kept busy during the search

    @property
    def curve(self) -> list[tuple[int, float]]:
        """(batch size, samples/s) for every fitting size timed, smallest first."""
        pts = {t.batch_size: t.throughput for t in self.trials if t.fits and t.throughput}
        return sorted((b, float(v)) for b, v in pts.items() if v is not None)

    def __str__(self) -> str:
        return render.text(self)

    def __repr__(self) -> str:
        best = "nothing fits" if self.best is None else f"largest that fits {self.best}"
        knee = f", knee {self.knee}" if self.knee is not None else ""
        return (
            f"<FitResult {self.device}: {best} of {self.smallest}..{self.largest}{knee}; "
            f"{len(self.trials)} trials; findings: {status_counts(self.findings)}>"
        )

    def _repr_html_(self) -> str:
        return render.html(self)


# Relative output error (‖out − ref‖ / ‖ref‖) up to which a lower precision counts as accurate
# enough to recommend without the user's own metric. bf16 keeps 8 mantissa bits (relative
# rounding 2^-8 ≈ 0.4 %); 2 % allows its accumulation over a few layers. gpuprobe's choice; with
# a task metric, judge by the metric (E4: BERT SQuAD F1 −6.43 % at INT8).
REL_ERROR_OK = 0.02


# A lower precision must be at least this much faster than fp32 to be worth recommending.
SPEEDUP_MIN = 1.1  # x; gpuprobe's choice, above run-to-run noise


Outcome = Literal["ok", "skipped", "error"]


@dataclass(frozen=True)
class PrecisionResult(Record):
    """One dtype."""

    dtype: str
    outcome: Outcome
    reason: str | None = None  # why skipped, or the error
    how: str | None = None  # what was done: autocast, quantize_dynamic, ...
    median_s: float | None = None  # one forward pass
    p20_s: float | None = None
    p80_s: float | None = None
    n: int = 0
    timer: str | None = None
    throughput: float | None = None  # samples/s
    speedup: float | None = None  # fp32 median / this median
    max_abs: float | None = None
    rel_error: float | None = None
    metric: float | None = None  # the user's metric(out, ref)


@dataclass(frozen=True)
class PrecisionReport(Record):
    """Latency, throughput and accuracy per dtype for one model on one device."""

    device: str
    batch: int
    results: tuple[PrecisionResult, ...]
    metric_name: str | None = None
    recommended: str | None = None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    others_cores: float | None = None  # cores other processes kept busy during the sweep
    flops: int | None = None  # floating-point operations of one forward pass (None: not counted)

    def result(self, dtype: str) -> PrecisionResult | None:
        """The row for ``dtype``."""
        return next((r for r in self.results if r.dtype == dtype), None)

    def __str__(self) -> str:
        return render.text(self)

    def __repr__(self) -> str:
        rows = ", ".join(
            f"{r.dtype} {r.speedup:.2f}×" if r.speedup is not None else f"{r.dtype} {r.outcome}"
            for r in self.results
        )
        return (
            f"<PrecisionReport {self.device}, batch {self.batch}: {rows}; recommended "
            f"{self.recommended or 'none'}; findings: {status_counts(self.findings)}>"
        )

    def _repr_html_(self) -> str:
        return render.html(self)


OOM_REASON = "out of memory"  # how a result that ran out of memory starts its reason
