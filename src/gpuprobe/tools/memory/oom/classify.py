"""Recognise an out-of-memory error by its type and message, and read what the message says.

:func:`classify_oom` knows torch (CUDA, HIP and CPU), CuPy, the CUDA driver, JAX (XLA) and
Python's own ``MemoryError``, through the named patterns of :data:`OOM_PATTERNS` (never string
tests scattered through the code). torch's CUDA message also gives the request, the device and
the allocator's numbers; those are read into the :class:`OomError` it returns.

Units: bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from gpuprobe.core import render
from gpuprobe.core.records import Record
from gpuprobe.core.units import parse_size

__all__ = ["OOM_PATTERNS", "OomError", "OomKind", "OomPattern", "classify_oom"]

OomKind = Literal["cuda", "host"]


@dataclass(frozen=True)
class OomPattern:
    """One way an out-of-memory error shows itself."""

    name: str
    kind: OomKind
    framework: str
    message: re.Pattern[str]


# The messages, from the libraries' sources and real reports (torch CUDACachingAllocator.cpp and
# c10/core/impl/alloc_cpu.cpp, cupy/cuda/memory.pyx, XLA's RESOURCE_EXHAUSTED status).
OOM_PATTERNS: tuple[OomPattern, ...] = (
    OomPattern("torch-cuda", "cuda", "torch", re.compile(r"CUDA out of memory")),
    OomPattern("torch-hip", "cuda", "torch", re.compile(r"HIP out of memory")),
    OomPattern(
        "torch-cpu", "host", "torch", re.compile(r"DefaultCPUAllocator: can't allocate memory")
    ),
    OomPattern("cupy", "cuda", "cupy", re.compile(r"Out of memory allocating [\d,]+ bytes")),
    OomPattern(
        "cuda-driver",
        "cuda",
        "cuda",
        re.compile(r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"),
    ),
    OomPattern("xla", "cuda", "jax", re.compile(r"RESOURCE_EXHAUSTED: Out of memory")),
)

# What torch's CUDA message says, in its current (2.1+) and older (1.x-2.0) wordings.
# A size as torch prints it (c10 CUDACachingAllocator format_size): "0 bytes" up to 1 KiB, then
# "12.00 KiB", "1.50 GiB"; older messages also wrote "MB"-style units.
_SZ = r"[\d.]+ (?:[KMGT]i?B|bytes|B)"


def _torch_field(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("SIZE", _SZ))


_TORCH_FIELDS: dict[str, re.Pattern[str]] = {
    "requested": _torch_field(r"Tried to allocate (SIZE)"),
    "device": re.compile(r"GPU (\d+)"),
    "total": _torch_field(r"total capacit?y of (SIZE)|\(GPU \d+; (SIZE) total"),
    "free": _torch_field(r"of which (SIZE) is free|(SIZE) free;"),
    "process_in_use": _torch_field(r"this process has (SIZE) memory in use"),
    "allocated": _torch_field(r"(SIZE) is allocated by PyTorch|(SIZE) already allocated"),
    "reserved_unallocated": _torch_field(r"(SIZE) is reserved by PyTorch but unallocated"),
    "reserved": _torch_field(r"(SIZE) reserved in total by PyTorch"),
}
_CPU_REQUEST = re.compile(r"you tried to allocate (\d+) bytes")
_CUPY_REQUEST = re.compile(
    r"Out of memory allocating ([\d,]+) bytes \(allocated so far: ([\d,]+) bytes\)"
)


@dataclass(frozen=True)
class OomError(Record):
    """What an out-of-memory error says about itself."""

    kind: OomKind  # "cuda": a GPU's memory; "host": the machine's RAM
    framework: str  # torch, cupy, jax, cuda, python
    pattern: str  # the OOM_PATTERNS entry (or "type") that matched
    type_name: str
    message: str
    requested: int | None = None  # bytes the failing allocation asked for
    device: int | None = None  # the GPU's index in the process, when the message names it
    # what the message itself reports (torch's CUDA wording), bytes
    total: int | None = None
    free: int | None = None
    process_in_use: int | None = None
    allocated: int | None = None
    reserved: int | None = None

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)


def _type_names(exc: BaseException) -> list[str]:
    return [f"{t.__module__}.{t.__qualname__}" for t in type(exc).__mro__]


def _first(m: re.Match[str] | None) -> str | None:
    if m is None:
        return None
    return next((g for g in m.groups() if g), None)


def _size(text: str | None) -> int | None:
    return parse_size(text) if text else None


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 16:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def classify_oom(exc: BaseException) -> OomError | None:
    """An :class:`OomError` when ``exc`` (or an exception it was raised from) is an
    out-of-memory error, else None. Recognised: ``torch.OutOfMemoryError`` (alias
    ``torch.cuda.OutOfMemoryError``), RuntimeErrors saying "CUDA out of memory" or
    "DefaultCPUAllocator: can't allocate memory", ``cupy.cuda.memory.OutOfMemoryError``, XLA's
    RESOURCE_EXHAUSTED and Python's ``MemoryError``."""
    for e in _chain(exc):
        found = _classify_one(e)
        if found is not None:
            return found
    return None


def _classify_one(exc: BaseException) -> OomError | None:
    message = str(exc)
    names = _type_names(exc)
    pattern = next((p for p in OOM_PATTERNS if p.message.search(message)), None)
    typed = any(n.rsplit(".", 1)[-1] == "OutOfMemoryError" for n in names)
    if pattern is None and not typed and not isinstance(exc, MemoryError):
        return None
    kind: OomKind
    if pattern is not None:
        kind, framework, pname = pattern.kind, pattern.framework, pattern.name
    elif typed:
        module = type(exc).__module__.split(".")[0]
        kind, framework, pname = "cuda", module, "type"
    else:
        kind, framework, pname = "host", "python", "MemoryError"
    out: dict[str, Any] = {}
    if pname == "torch-cuda" or pname == "torch-hip" or (typed and framework == "torch"):
        for key, rx in _TORCH_FIELDS.items():
            value = _first(rx.search(message))
            if value is None:
                continue
            out[key] = int(value) if key == "device" else _size(value)
        if out.get("reserved") is None and out.get("reserved_unallocated") is not None:
            out["reserved"] = (out.get("allocated") or 0) + out["reserved_unallocated"]
        out.pop("reserved_unallocated", None)
    elif pname == "torch-cpu":
        m = _CPU_REQUEST.search(message)
        out["requested"] = int(m.group(1)) if m else None
    elif framework == "cupy":
        m = _CUPY_REQUEST.search(message)
        if m:
            out["requested"] = int(m.group(1).replace(",", ""))
            out["allocated"] = int(m.group(2).replace(",", ""))
    return OomError(
        kind=kind,
        framework=framework,
        pattern=pname,
        type_name=names[0],
        message=message.strip().splitlines()[0][:500] if message.strip() else names[0],
        **out,
    )
