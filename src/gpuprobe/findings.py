"""The one verdict type every judge returns: a :class:`Finding` with a :class:`Status`.

A finding has a stable id (``torch-cpu-only-build``), a status, a one-line title, the evidence as
numbers with units, and the fix: the command to run or the line of code to change.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuprobe._data import Record

__all__ = ["Evidence", "Finding", "Status", "worst", "worst_first"]


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


@dataclass(frozen=True)
class Evidence(Record):
    """One measured or read value behind a finding, with its unit (``""`` for none)."""

    name: str
    value: float | int | str | bool | None
    unit: str = ""

    def __str__(self) -> str:
        if self.value is None:
            shown = "n/a"
        elif isinstance(self.value, float):
            shown = f"{self.value:.4g}"
        else:
            shown = str(self.value)
        unit = (
            ""
            if not self.unit or self.value is None
            else (self.unit if self.unit == "%" else f" {self.unit}")
        )
        return f"{self.name}={shown}{unit}"


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

    @property
    def failed(self) -> bool:
        """True when this finding should make the command exit 1."""
        return self.status is Status.FAIL


def worst(findings: Iterable[Finding]) -> Status:
    """The most severe status among ``findings`` (``ok`` when there are none)."""
    statuses = [f.status for f in findings]
    return max(statuses, key=lambda s: s.rank) if statuses else Status.OK


def worst_first(findings: Iterable[Finding]) -> list[Finding]:
    """Findings sorted fail, warn, info, ok, skipped; stable within a status."""
    return sorted(findings, key=lambda f: -f.status.rank)
