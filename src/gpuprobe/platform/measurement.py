"""A timing result that carries its own statistics and metadata, as
``torch.utils.benchmark.Measurement`` does."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.records import Record
from gpuprobe.core.units import seconds

__all__ = ["SPREAD_WARN_FRACTION", "Measurement", "quantile", "rel_error"]

# IQR / median above which a measurement's median is not to be trusted alone: the threshold
# torch.utils.benchmark.Measurement warns at (_IQR_WARN_THRESHOLD = 0.1).
SPREAD_WARN_FRACTION = 0.10


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile ``q`` in [0, 1] of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
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
class Measurement(Record):
    """Repeated timings of one piece of work on one device, in seconds.

    ``work`` holds what one repetition does (``flop``, ``bytes``), so rates follow from the median.
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
        """Build a measurement and its statistics from raw durations."""
        if not times:
            raise ValueError(f"{name}: no timings")
        s = sorted(times)
        return cls(
            name=name,
            framework=framework,
            device=device,
            times=tuple(times),
            median=statistics.median(s),
            p20=quantile(s, 0.2),
            p80=quantile(s, 0.8),
            min=s[0],
            n=len(s),
            timer=timer,
            work=dict(work or {}),
            metadata=dict(metadata or {}),
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
        """Interquartile range of the times (p75 − p25), seconds."""
        s = sorted(self.times) or [self.median]
        return quantile(s, 0.75) - quantile(s, 0.25)

    @property
    def spread(self) -> float | None:
        """IQR / median: how much the repetitions disagree (None when the median is 0)."""
        return self.iqr / self.median if self.median > 0 else None

    @property
    def too_spread(self) -> bool:
        """True when the spread is above :data:`SPREAD_WARN_FRACTION`: something else was
        using the machine, or the work is not the same each time; don't trust the median alone."""
        return self.spread is not None and self.spread > SPREAD_WARN_FRACTION

    @property
    def warning(self) -> str | None:
        """The spread warning, in words, or None."""
        if not self.too_spread or self.spread is None:
            return None
        return (
            f"the interquartile range is {self.spread:.0%} of the median (over "
            f"{SPREAD_WARN_FRACTION:.0%}): the times vary too much to trust the median alone; "
            "other processes may be using the machine (see 'gpuprobe top')"
        )

    def __str__(self) -> str:
        text = (
            f"{self.name} [{self.framework} {self.device}]: median {seconds(self.median)} "
            f"(p20 {seconds(self.p20)}, p80 {seconds(self.p80)}, "
            f"min {seconds(self.min)}, n={self.n}, {self.timer})"
        )
        warning = self.warning
        return text if warning is None else f"{text}\n  WARNING: {warning}"

    def __repr__(self) -> str:
        spread = "" if self.spread is None else f", IQR {self.spread:.0%} of median"
        flag = "; WARNING: too spread to trust" if self.too_spread else ""
        return (
            f"<Measurement {self.name} [{self.framework} {self.device}]: median "
            f"{seconds(self.median)}{spread}, n={self.n}, {self.timer}{flag}>"
        )

    def _repr_html_(self) -> str:
        return render.html(self)
