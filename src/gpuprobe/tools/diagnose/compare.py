"""Compare two diagnoses: the headline numbers side by side and each finding's status."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.model import Diagnosis, FindingChange, MetricChange, TraceComparison

__all__ = ["compare_diagnoses"]


def _med(d: Diagnosis, get: Callable[..., float | None]) -> float | None:
    vals = [v for v in (get(r) for r in d.steps) if v is not None]
    return float(np.median(vals)) if vals else None


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _share(d: Diagnosis, get: Callable[..., float]) -> float | None:
    vals = [get(r) / r.duration_us for r in d.steps if r.duration_us > 0]
    return 100.0 * float(np.median(vals)) if vals else None


# (name, unit, better, how to read it from a Diagnosis)
_METRICS: tuple[tuple[str, str, str, Callable[[Diagnosis], float | None]], ...] = (
    ("step time (median)", "µs", "lower", lambda d: _med(d, lambda r: r.duration_us)),
    (
        "GPU busy (median step)",
        "%",
        "higher",
        lambda d: _pct(_med(d, lambda r: r.gpu_busy_fraction)),
    ),
    (
        "GPU busy (whole trace, HTA)",
        "%",
        "higher",
        lambda d: (
            None if d.summary.gpu_busy_fraction is None else 100.0 * d.summary.gpu_busy_fraction
        ),
    ),
    (
        "kernels per step",
        "",
        "lower",
        lambda d: _med(d, lambda r: r.kernels if r.device is not None else None),
    ),
    ("median kernel", "µs", "higher", lambda d: _med(d, lambda r: r.median_kernel_us)),
    ("DataLoader share of step", "%", "lower", lambda d: _share(d, lambda r: r.dataloader_us)),
    ("syncs per step", "", "lower", lambda d: _med(d, lambda r: float(r.syncs))),
    ("scalar reads per step", "", "lower", lambda d: _med(d, lambda r: float(r.items))),
    ("CPU ops per step", "", "lower", lambda d: _med(d, lambda r: float(r.cpu_ops))),
)


def compare_diagnoses(before: Diagnosis, after: Diagnosis) -> TraceComparison:
    """Build the :class:`TraceComparison` of ``before`` and ``after``."""
    metrics = tuple(
        MetricChange(name=name, unit=unit, before=get(before), after=get(after), better=better)
        for name, unit, better, get in _METRICS
    )
    ids: list[tuple[str, str]] = []
    for f in (*before.findings, *after.findings):
        key = (f.id, f.subject)
        if key not in ids:
            ids.append(key)

    def status(d: Diagnosis, key: tuple[str, str]) -> tuple[Status | None, str]:
        f = next((f for f in d.findings if (f.id, f.subject) == key), None)
        return (None, "") if f is None else (f.status, f.title)

    changes = []
    for key in ids:
        sb, tb = status(before, key)
        sa, ta = status(after, key)
        label = key[0] + (f" ({key[1]})" if key[1] else "")
        changes.append(FindingChange(id=label, title=ta or tb, before=sb, after=sa))
    changes.sort(
        key=lambda c: -max(c.before.rank if c.before else 0, c.after.rank if c.after else 0)
    )
    return TraceComparison(before=before, after=after, metrics=metrics, findings=tuple(changes))
