"""The result of explaining an out-of-memory error: who held the memory when it happened, and
the findings (judged by :data:`gpuprobe.tools.memory.rules.RULES_OOM`).

Units: bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuprobe.core import render
from gpuprobe.core.findings import Finding
from gpuprobe.core.records import Record
from gpuprobe.tools.memory.oom.classify import OomError
from gpuprobe.tools.memory.oom.state import GpuHolder, LiveTensor

__all__ = ["OomReport"]


@dataclass(frozen=True)
class OomReport(Record):
    """Who held the memory when an out-of-memory error happened, and what to do about it."""

    error: OomError | None
    # this process's allocators at the time of the report (torch's cache; CuPy's pool), bytes
    allocated: int | None = None
    reserved: int | None = None
    inactive_split: int | None = None  # free pieces of split blocks: fragmentation
    alloc_retries: int | None = None
    ooms: int | None = None  # torch's count of OOMs in this process
    cupy_allocated: int | None = None
    cupy_reserved: int | None = None
    gpu_index: int | None = None  # NVML index of the card
    gpu_name: str | None = None
    gpu_total: int | None = None
    gpu_used: int | None = None
    holders: tuple[GpuHolder, ...] = ()  # every process on the card, this one marked
    host_total: int | None = None
    host_available: int | None = None
    tensors: tuple[LiveTensor, ...] = ()
    allocator_env: dict[str, str] = field(default_factory=dict)
    released: bool = False  # memory was given back after the report was read
    reserved_after: int | None = None  # torch's cache after giving memory back
    gpu_used_after: int | None = None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)
