"""The records of the kernel diff (:mod:`.kernel_diff` computes them): each kernel name before
and after, the kernel families, and the diff itself. Records only, so that the comparison's record
(:class:`~.model.TraceComparison`) can hold one without importing the trace analysis."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprobe.core import render
from gpuprobe.core.records import Record

__all__ = [
    "KERNEL_CHANGE_FRACTION",
    "KERNEL_CHANGE_MIN_US",
    "FamilyChange",
    "KernelChange",
    "KernelDiff",
]

KERNEL_CHANGE_FRACTION = 0.10  # relative change of a kernel's GPU time per step that counts as
# faster or slower; gpuprobe's choice, above the few-% run-to-run spread of one kernel's duration
KERNEL_CHANGE_MIN_US = 1.0  # µs; and by at least this much: Kineto's timestamps are whole µs
# in many traces, so a smaller change is below the resolution


@dataclass(frozen=True)
class KernelChange(Record):
    """One kernel name before and after (per step; µs). ``status``: new, gone, faster or slower
    (its GPU time per step), same."""

    name: str
    family: str
    status: str
    count_before: float
    count_after: float
    total_before_us: float
    total_after_us: float
    mean_before_us: float | None
    mean_after_us: float | None

    @property
    def delta_us(self) -> float:
        """Change of GPU time per step (after − before)."""
        return self.total_after_us - self.total_before_us

    @property
    def why(self) -> str:
        """What moved its time: ``"more calls"``, ``"longer calls"``, both, or the opposite
        (``""`` for a kernel new, gone or unchanged)."""
        if self.status not in ("slower", "faster") or not self.mean_before_us:
            return ""
        calls = self.count_after / self.count_before if self.count_before else 1.0
        mean = (self.mean_after_us or 0.0) / self.mean_before_us
        up, down = 1 + KERNEL_CHANGE_FRACTION, 1 - KERNEL_CHANGE_FRACTION
        words = []
        if calls >= up or calls <= down:
            words.append("more calls" if calls > 1 else "fewer calls")
        if mean >= up or mean <= down:
            words.append("longer calls" if mean > 1 else "shorter calls")
        return ", ".join(words)


@dataclass(frozen=True)
class FamilyChange(Record):
    """A kernel family's GPU time per step before and after (µs)."""

    family: str
    before_us: float
    after_us: float


@dataclass(frozen=True)
class KernelDiff(Record):
    """The kernel-level difference of two traces; per-step values."""

    before_path: str
    after_path: str
    steps_before: int
    steps_after: int
    total_before_us: float
    total_after_us: float
    families: tuple[FamilyChange, ...]
    changes: tuple[KernelChange, ...]
    new: int = 0
    gone: int = 0
    faster: int = 0
    slower: int = 0
    same: int = 0
    change_fraction: float = KERNEL_CHANGE_FRACTION

    def kernel(self, name: str) -> KernelChange | None:
        """The change of the kernel called ``name`` (among the rows kept), or None."""
        return next((c for c in self.changes if c.name == name), None)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)
