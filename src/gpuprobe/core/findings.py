"""The one verdict type every judge returns: a :class:`Finding` with a :class:`Status`.

A finding has a stable id (``torch-cpu-only-build``), a status, a one-line title, the evidence as
numbers with units, and the fix: the command to run or the line of code to change.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuprobe.core import render
from gpuprobe.core.records import Record
from gpuprobe.core.wrap import hang_lines

__all__ = [
    "Evidence",
    "Finding",
    "Status",
    "status_counts",
    "worst",
    "worst_first",
]


class Status(str, enum.Enum):
    """How a check came out. ``skipped`` means it could not run here (and says why)."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"

    @property
    def rank(self) -> int:
        """Severity for sorting: fail 4, warn 3, info 2, ok 1, skipped 0."""
        return _RANK[self]


_RANK = {Status.FAIL: 4, Status.WARN: 3, Status.INFO: 2, Status.OK: 1, Status.SKIPPED: 0}


_TIME_UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def _fitting_unit(
    value: float | int | str | bool | None, unit: str
) -> tuple[float | int | str | bool | None, str]:
    """A time or a byte count in the unit that fits it: 12040 ms -> 12.04 s, 3e9 B -> 2.794 GiB;
    anything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return value, unit
    if unit in _TIME_UNITS and value:
        secs = value * _TIME_UNITS[unit]
        for name, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
            if abs(secs) >= scale:
                return float(secs / scale), name
        return float(secs / 1e-9), "ns"
    if unit == "B" and abs(value) >= 1024:
        v = float(value)
        for name in _BYTE_UNITS:
            if abs(v) < 1024 or name == _BYTE_UNITS[-1]:
                return v, name
            v /= 1024
    return value, unit


@dataclass(frozen=True)
class Evidence(Record):
    """One measured or read value behind a finding, with its unit (``""`` for none)."""

    name: str
    value: float | int | str | bool | None
    unit: str = ""

    def __str__(self) -> str:
        value, unit = _fitting_unit(self.value, self.unit)
        if value is None:
            shown = "n/a"
        elif isinstance(value, float):
            shown = f"{value:.0f}" if 1e4 <= abs(value) < 1e15 else f"{value:.4g}"
        else:
            shown = str(value)
        unit = "" if not unit or value is None else (unit if unit == "%" else f" {unit}")
        return f"{self.name}={shown}{unit}"

    def __repr__(self) -> str:
        return f"<Evidence {self}>"


@dataclass(frozen=True)
class Finding(Record):
    """A verdict: what was checked, how it came out, the evidence and the fix."""

    id: str
    status: Status
    title: str
    evidence: tuple[Evidence, ...] = ()
    fix: str = ""
    group: str = ""
    subject: str = ""
    details: tuple[str, ...] = field(default=())
    gain: float | None = None  # share (0..1) of the analysed time that fixing it would save,
    # estimated from the data it judged; None where not estimated

    @property
    def gain_text(self) -> str:
        """``"fixing it would gain ≈ 23 % of the analysed time"`` (``""`` without an estimate)."""
        if self.gain is None:
            return ""
        g = 100.0 * self.gain
        shown = f"≈ {g:.0f}" if g >= 10 else f"≈ {g:.1f}" if g >= 0.1 else "under 0.1"
        return f"fixing it would gain {shown} % of the analysed time"

    @property
    def failed(self) -> bool:
        """True when this finding should make the command exit 1."""
        return self.status is Status.FAIL

    def __repr__(self) -> str:
        title = self.title if len(self.title) <= 100 else self.title[:99] + "…"
        return f"<Finding {self.status.value} {self.id}: {title}>"

    def __str__(self) -> str:
        lines = [f"[{self.status.value}] {self.id}: {self.title}"]
        if self.evidence:
            lines.append("  evidence: " + ", ".join(str(e) for e in self.evidence))
        lines.extend(f"  - {d}" for d in self.details)
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        if self.gain_text:
            lines.append(f"  gain: {self.gain_text}")
        return "\n".join(hang_lines(lines))

    def _repr_html_(self) -> str:
        return render.html(self)


def worst(findings: Iterable[Finding]) -> Status:
    """The most severe status among ``findings`` (``ok`` when there are none)."""
    statuses = [f.status for f in findings]
    return max(statuses, key=lambda s: s.rank) if statuses else Status.OK


def worst_first(findings: Iterable[Finding]) -> list[Finding]:
    """Findings sorted fail, warn, info, ok, skipped; within a status, those whose fix would gain
    most first (an estimated gain before none); otherwise stable."""
    return sorted(findings, key=lambda f: (-f.status.rank, -(f.gain if f.gain is not None else -1)))


def status_counts(findings: Iterable[Finding]) -> str:
    """``"1 fail, 2 warn, 9 ok"`` (worst first, statuses with none left out): the findings in a
    result's one-line ``repr``."""
    fs = list(findings)
    counts = [(s, sum(f.status is s for f in fs)) for s in sorted(Status, key=lambda s: -s.rank)]
    return ", ".join(f"{n} {s.value}" for s, n in counts if n) or "no findings"
