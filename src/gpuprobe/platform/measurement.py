"""A timing result that carries its own statistics and metadata, as
``torch.utils.benchmark.Measurement`` does, and judges its own noise from the spread.

Another process can only make a run slower, never faster (a descheduled thread, a stolen cache):
the noise of a benchmark is one-sided, so its fastest runs are the least disturbed (Chen &
Revels, "Robust benchmarking in noisy environments", 2016, the basis of BenchmarkTools.jl's
``minimum`` estimator). :func:`agreement` finds the fastest runs that agree with each other (their
interquartile range within :data:`SPREAD_WARN_FRACTION` of their median, torch's threshold); the
figure (median, p20, p80) comes from them when they are at least :data:`AGREE_SHARE` of the runs
and at least :data:`MIN_AGREEING`. Otherwise the runs never agreed: the measurement is flagged
``trusted=False`` and its figure is the median of all runs, the time under that load, not the
work's."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.records import Record
from gpuprobe.core.units import seconds
from gpuprobe.core.wrap import hang_lines

__all__ = [
    "AGREE_FLOOR_S",
    "AGREE_SHARE",
    "MIN_AGREEING",
    "SPREAD_WARN_FRACTION",
    "UPPER_FENCE_IQR",
    "Agreement",
    "Measurement",
    "agreement",
    "quantile",
    "rel_error",
]

# IQR / median above which runs do not agree: the threshold torch.utils.benchmark.Measurement
# warns at (_IQR_WARN_THRESHOLD = 0.1; adaptive_autorange repeats until below it).
SPREAD_WARN_FRACTION = 0.10
# Runs that must agree before a figure is trusted: torch's adaptive_autorange stops no earlier
# than its 4th block (``len(times) > 3``).
MIN_AGREEING = 4
# Share of all runs that the agreeing ones must be: with more than half of the runs slowed, the
# fast ones are the exception, and their figure is not what the machine gives (gpuprobe's choice;
# torch's IQR test over all runs tolerates a quarter at each end).
AGREE_SHARE = 0.5
# An interquartile range below this many seconds always agrees, whatever the median: the jitter
# of timing one call (a perf_counter pair around a Python call: 0.1-0.3 µs here; CUDA events
# resolve about 0.5 µs, cudaEventElapsedTime's documentation). A 16x16 matmul of 4 µs varies by
# more than 10 % on an idle host.
AGREE_FLOOR_S = 0.5e-6
# Runs above the agreeing group's p75 + this many IQRs are not counted among them: Tukey's inner
# fence, the one criterion.rs classifies outliers by.
UPPER_FENCE_IQR = 1.5


def quantile(sorted_values: Sequence[float], q: float, k: int | None = None) -> float:
    """Linear-interpolated quantile ``q`` in [0, 1] of already sorted values (of the first ``k``
    of them, without copying, when given)."""
    n = len(sorted_values) if k is None else k
    if n <= 0:
        raise ValueError("no values")
    pos = (n - 1) * q
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def rel_error(out: Any, ref: Any) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (``inf`` when it is not finite): how far a result computed
    on a device or in a lower precision is from its float64 reference."""
    import numpy as np

    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    denom = float(np.linalg.norm(ref)) or 1.0
    err = float(np.linalg.norm(out - ref)) / denom
    return err if np.isfinite(err) else float("inf")


@dataclass(frozen=True)
class Agreement:
    """Which runs agree: the ``agreeing`` fastest of ``n`` (sorted) runs, and whether they are
    enough to trust (``trusted``)."""

    agreeing: int
    n: int
    trusted: bool


def _spread(s: Sequence[float], k: int) -> float:
    """IQR / median of the ``k`` fastest of the sorted values ``s``: 0 when the IQR is below
    :data:`AGREE_FLOOR_S`, inf when the median is 0."""
    med = quantile(s, 0.5, k)
    iqr = quantile(s, 0.75, k) - quantile(s, 0.25, k)
    if iqr <= AGREE_FLOOR_S:
        return 0.0
    return iqr / med if med > 0 else float("inf")


def agreement(
    times: Sequence[float],
    *,
    need: int = MIN_AGREEING,
    threshold: float = SPREAD_WARN_FRACTION,
    share: float = AGREE_SHARE,
) -> Agreement:
    """Which runs agree, and whether they are enough to trust.

    The largest group of the fastest runs whose IQR / median is within ``threshold`` (or whose
    IQR is below :data:`AGREE_FLOOR_S`) sets the band; the agreeing runs are every run up to its
    upper fence (p75 + :data:`UPPER_FENCE_IQR` × IQR), so that the quarter of slow runs an IQR
    tolerates is not counted in. They are trusted when there are at least ``need`` of them (or
    every run, where there are fewer) and at least ``share`` of all runs. Stalls (a run slowed
    by another process) only add time, so they fall outside, whatever their size.

    A pure function of the times: the timer asks it when to stop, the measurement what to report.
    """
    s = sorted(times)
    n = len(s)
    if n == 0:
        return Agreement(0, 0, False)
    k = n
    least = max(1, min(need, n))
    while k > least and _spread(s, k) > threshold:
        k -= 1
    agreed = _spread(s, k) <= threshold
    q1, q3 = quantile(s, 0.25, k), quantile(s, 0.75, k)
    fence = q3 + UPPER_FENCE_IQR * max(q3 - q1, AGREE_FLOOR_S)
    agreeing = max(1, bisect.bisect_right(s, fence))
    return Agreement(agreeing, n, agreed and agreeing >= least and agreeing >= share * n)


@dataclass(frozen=True)
class Measurement(Record):
    """Repeated timings of one piece of work on one device, in seconds.

    ``times`` are every run, in order, and ``min`` and ``n`` count them all; ``median``, ``p20``
    and ``p80`` are the figure: of the ``agreeing`` fastest runs when ``trusted``, else of all
    runs (see :func:`agreement`). ``work`` holds what one repetition does (``flop``, ``bytes``),
    so rates follow from the median.
    """

    name: str
    framework: str
    device: str
    times: tuple[float, ...]
    median: float
    p20: float
    p80: float
    min: float
    n: int
    timer: str = "perf_counter"  # or "cuda-event", "block_until_ready"
    work: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, str | float | int | bool | None] = field(default_factory=dict)
    # how many of the fastest runs agree (None: a record from before agreement was judged)
    agreeing: int | None = None
    # False when the runs never agreed: the figure is the time under that load, not the work's
    trusted: bool = True

    @classmethod
    def from_times(
        cls,
        name: str,
        framework: str,
        device: str,
        times: Sequence[float],
        *,
        timer: str = "perf_counter",
        work: dict[str, float] | None = None,
        metadata: dict[str, str | float | int | bool | None] | None = None,
    ) -> Measurement:
        """Build a measurement and its statistics from raw durations: the figure from the runs
        that agree, or from all of them, flagged, when they never did (:func:`agreement`)."""
        if not times:
            raise ValueError(f"{name}: no timings")
        s = sorted(times)
        a = agreement(s)
        figure = s[: a.agreeing] if a.trusted else s
        return cls(
            name=name,
            framework=framework,
            device=device,
            times=tuple(times),
            median=statistics.median(figure),
            p20=quantile(figure, 0.2),
            p80=quantile(figure, 0.8),
            min=s[0],
            n=len(s),
            timer=timer,
            work=dict(work or {}),
            metadata=dict(metadata or {}),
            agreeing=a.agreeing,
            trusted=a.trusted,
        )

    @property
    def flops(self) -> float | None:
        """FLOP/s at the median time, when ``work`` says how many FLOP a repetition does."""
        f = self.work.get("flop")
        return f / self.median if f and self.median > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        """Bytes per second at the median time, when ``work`` has ``bytes``."""
        b = self.work.get("bytes")
        return b / self.median if b and self.median > 0 else None

    @property
    def iqr(self) -> float:
        """Interquartile range of all the times (p75 − p25), seconds."""
        s = sorted(self.times) or [self.median]
        return quantile(s, 0.75) - quantile(s, 0.25)

    @property
    def spread(self) -> float | None:
        """IQR / median of all the runs, as torch's Measurement has it: how much they disagree,
        the runs that other processes slowed included (None when the median is 0)."""
        s = sorted(self.times)
        med = quantile(s, 0.5) if s else self.median
        return self.iqr / med if med > 0 else None

    @property
    def slowed(self) -> int:
        """Runs slower than the agreeing ones, left out of the figure (0 when untrusted: then
        every run is in it)."""
        if not self.trusted or self.agreeing is None:
            return 0
        return min(self.n, max(0, self.n - self.agreeing))  # a record read back may not add up

    @property
    def too_spread(self) -> bool:
        """True when the runs never agreed (:func:`agreement`): other processes kept slowing
        them, or the work is not the same each time; the figure is not to be trusted. A record
        from before agreement was judged: when the spread of all runs is above
        :data:`SPREAD_WARN_FRACTION`."""
        if self.agreeing is None:
            return self.spread is not None and self.spread > SPREAD_WARN_FRACTION
        return not self.trusted

    @property
    def warning(self) -> str | None:
        """Why the figure is not to be trusted, in words, or None."""
        if not self.too_spread:
            return None
        spread = f"{self.spread:.0%}" if self.spread is not None else "n/a"
        agreeing = (
            f"only {self.agreeing} of {self.n} runs agree ({MIN_AGREEING} and half are needed); "
            if self.agreeing is not None
            else ""
        )
        return (
            f"not trustworthy: {agreeing}the interquartile range is {spread} of the median "
            f"(over {SPREAD_WARN_FRACTION:.0%}); other processes may be using the machine "
            "(see 'gpuprobe top')"
        )

    def _runs(self) -> str:
        slowed = self.slowed
        return f"n={self.n}, {slowed} slowed left out" if slowed else f"n={self.n}"

    def __str__(self) -> str:
        text = (
            f"{self.name} [{self.framework} {self.device}]: median {seconds(self.median)} "
            f"(p20 {seconds(self.p20)}, p80 {seconds(self.p80)}, "
            f"min {seconds(self.min)}, {self._runs()}, {self.timer})"
        )
        warning = self.warning
        lines = [text] if warning is None else [text, f"  WARNING: {warning}"]
        return "\n".join(hang_lines(lines))

    def __repr__(self) -> str:
        spread = "" if self.spread is None else f", IQR {self.spread:.0%} of median"
        flag = "; WARNING: not trustworthy, the runs never agreed" if self.too_spread else ""
        return (
            f"<Measurement {self.name} [{self.framework} {self.device}]: median "
            f"{seconds(self.median)}{spread}, {self._runs()}, {self.timer}{flag}>"
        )

    def _repr_html_(self) -> str:
        return render.html(self)
