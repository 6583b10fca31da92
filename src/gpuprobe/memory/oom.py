"""Out of memory, explained: who holds the memory, the largest live tensors, and what to do.

:func:`classify_oom` recognises an out-of-memory error from torch (CUDA and CPU), CuPy, JAX and
Python itself by its type and message (named patterns below, never scattered string tests).
:func:`explain_oom` reads this process's allocators (torch's caching allocator through
:mod:`gpuprobe.frameworks.torch_memory`, CuPy's pool through :mod:`gpuprobe.frameworks.cupy`), the other
processes on the card through NVML, and the largest live tensors; then it gives the memory back
(the failed step's frames are cleared, garbage collected, the cache emptied) and says how much
came back. :func:`install_oom_hook` prints the report under the traceback of an uncaught
out-of-memory error.

Units: bytes.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from gpuprobe._data import Record
from gpuprobe.findings import Evidence, Finding, Status

__all__ = [
    "FRAGMENTATION_WARN_FRACTION",
    "OOM_PATTERNS",
    "OTHER_PROCESSES_WARN_FRACTION",
    "GpuHolder",
    "LiveTensor",
    "OomError",
    "OomReport",
    "classify_oom",
    "explain_oom",
    "format_bytes",
    "install_oom_hook",
    "parse_size",
    "uninstall_oom_hook",
]

# Reserved-but-unallocated bytes (the caching allocator's free pieces), as a fraction of
# reserved, above which the failure is called fragmentation. torch's own OOM message says "If
# reserved but unallocated memory is large try setting ...expandable_segments:True"; 0.2 is
# gpuprobe's reading of "large" (one in five cached bytes is unusable for the request).
FRAGMENTATION_WARN_FRACTION = 0.2
# Memory other processes hold on the card, as a fraction of its total, above which they are
# named as a cause. gpuprobe's choice: a tenth of the card is more than a typical batch.
OTHER_PROCESSES_WARN_FRACTION = 0.1
TOP_TENSORS = 10  # how many live tensors the report lists

OomKind = Literal["cuda", "host"]

_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
_UNITS.update({"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 2**10})
_UNITS.update({"M": 2**20, "G": 2**30, "T": 2**40})


def parse_size(text: str) -> int:
    """``"2GiB"`` -> 2147483648, ``"512 MiB"``, ``"1.5G"`` (binary), ``"800MB"`` (decimal),
    ``"1,000 bytes"``. Raises ValueError on anything else."""
    m = re.fullmatch(r"\s*([\d,]*\.?\d+)\s*([a-zA-Z]*)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a size like 2GiB or 512MiB")
    unit = m.group(2).upper().removesuffix("YTES").removesuffix("YTE")
    unit = "B" if unit == "B" else unit
    if unit not in _UNITS:
        raise ValueError(f"{text!r}: unknown unit {m.group(2)!r} (use B, KiB, MiB, GiB, MB, GB)")
    return int(float(m.group(1).replace(",", "")) * _UNITS[unit])


def format_bytes(n: float | None) -> str:
    """1536 -> '1.50 KiB'; None -> 'n/a'."""
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"


@dataclass(frozen=True)
class _Pattern:
    """One way an out-of-memory error shows itself."""

    name: str
    kind: OomKind
    framework: str
    message: re.Pattern[str]


# The messages, from the libraries' sources and real reports (torch CUDACachingAllocator.cpp and
# c10/core/impl/alloc_cpu.cpp, cupy/cuda/memory.pyx, XLA's RESOURCE_EXHAUSTED status).
OOM_PATTERNS: tuple[_Pattern, ...] = (
    _Pattern("torch-cuda", "cuda", "torch", re.compile(r"CUDA out of memory")),
    _Pattern("torch-hip", "cuda", "torch", re.compile(r"HIP out of memory")),
    _Pattern(
        "torch-cpu", "host", "torch", re.compile(r"DefaultCPUAllocator: can't allocate memory")
    ),
    _Pattern("cupy", "cuda", "cupy", re.compile(r"Out of memory allocating [\d,]+ bytes")),
    _Pattern(
        "cuda-driver",
        "cuda",
        "cuda",
        re.compile(r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"),
    ),
    _Pattern("xla", "cuda", "jax", re.compile(r"RESOURCE_EXHAUSTED: Out of memory")),
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


@dataclass(frozen=True)
class LiveTensor(Record):
    """A tensor alive when the report was made (one per storage)."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    bytes: int
    parameter: bool = False
    requires_grad: bool = False

    def __str__(self) -> str:
        kind = "parameter" if self.parameter else ("grad" if self.requires_grad else "tensor")
        shape = "x".join(str(s) for s in self.shape) or "scalar"
        return f"{format_bytes(self.bytes):>10}  {shape} {self.dtype} on {self.device} ({kind})"


@dataclass(frozen=True)
class GpuHolder(Record):
    """A process holding memory on the GPU (NVML)."""

    pid: int
    name: str | None = None
    used_memory: int | None = None  # bytes
    this_process: bool = False


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

    def __str__(self) -> str:
        return render_text(self)


# -- reading the state ----------------------------------------------------------------------------


def _torch_state(device: int | None) -> dict[str, Any]:
    from gpuprobe.frameworks import torch_memory as tm

    mem = tm.cuda_memory(device)
    return mem or {}


def _nvml_state(uuid_index: int | None) -> tuple[dict[str, Any], list[str]]:
    """The card's memory and the processes on it, through the NVML door."""
    import os

    from gpuprobe.hardware.nvml import NvmlUnavailable, nvml_session

    notes: list[str] = []
    try:
        with nvml_session() as s:
            count = s.device_count()
            if count == 0:
                return {}, ["NVML sees no GPU"]
            index = _nvml_index_of(s, uuid_index)
            gpu = s.gpu(index)
            procs = s.processes(index)
    except NvmlUnavailable as exc:
        return {}, [f"no NVML ({exc}): other processes on the card are not known"]
    except Exception as exc:  # a card that fell off the bus: the report still goes on
        return {}, [f"NVML failed: {type(exc).__name__}: {exc}"]
    me = os.getpid()
    holders = tuple(
        GpuHolder(pid=p.pid, name=p.name, used_memory=p.used_memory, this_process=p.pid == me)
        for p in sorted(procs, key=lambda p: -(p.used_memory or 0))
    )
    return {
        "gpu_index": gpu.index,
        "gpu_name": gpu.name,
        "gpu_total": gpu.memory_total,
        "gpu_used": gpu.memory_used,
        "holders": holders,
    }, notes


def _nvml_index_of(session: Any, torch_index: int | None) -> int:
    """NVML's index of the card torch calls ``torch_index`` (matched by UUID when torch knows
    it; CUDA_VISIBLE_DEVICES and CUDA's order can differ from NVML's)."""
    from gpuprobe.frameworks import torch as ft
    from gpuprobe.frameworks import torch_memory as tm

    torch = ft.loaded()
    if torch is None or torch_index is None or not tm.cuda_initialized():
        return 0 if torch_index is None else min(torch_index, session.device_count() - 1)
    uuid = getattr(torch.cuda.get_device_properties(torch_index), "uuid", None)
    if uuid is not None:
        for i in range(session.device_count()):
            if session.query("nvmlDeviceGetUUID", session.handle(i)) == f"GPU-{uuid}":
                return i
    return min(torch_index, session.device_count() - 1)


def _host_state() -> dict[str, Any]:
    import psutil

    vm = psutil.virtual_memory()
    return {"host_total": int(vm.total), "host_available": int(vm.available)}


def _clear_frames(tb: TracebackType | None) -> None:
    """Drop the local variables of the frames a traceback holds (the failed step's tensors);
    frames still running are left alone."""
    if tb is not None:
        traceback.clear_frames(tb)


# -- the report -----------------------------------------------------------------------------------


def explain_oom(
    exc: BaseException | None = None,
    *,
    release: bool = True,
    top: int = TOP_TENSORS,
) -> OomReport:
    """Explain an out-of-memory error: ``exc``, or the one being handled (``sys.exc_info()``),
    or the last uncaught one (``sys.last_value``, in a REPL or notebook).

    With ``release`` (the default) the memory is given back after it has been read: the
    failed frames' local variables are cleared, garbage is collected and the caching allocator
    emptied, and the report says how much came back. Without an out-of-memory error (``exc``
    None and none being handled) it reports the memory as it stands now.
    """
    from gpuprobe.frameworks import cupy as fc
    from gpuprobe.frameworks import torch as ft
    from gpuprobe.frameworks import torch_memory as tm

    if exc is None:
        exc = sys.exc_info()[1] or getattr(sys, "last_value", None)
    error = classify_oom(exc) if exc is not None else None
    notes: list[str] = []
    if exc is not None and error is None:
        notes.append(f"{type(exc).__name__} is not an out-of-memory error; memory as it stands")
    state: dict[str, Any] = {}
    torch_mem = _torch_state(error.device if error else None)
    if torch_mem:
        state.update(
            allocated=torch_mem["allocated"],
            reserved=torch_mem["reserved"],
            inactive_split=torch_mem["inactive_split"],
            alloc_retries=torch_mem["alloc_retries"],
            ooms=torch_mem["ooms"],
        )
    pool = fc.pool_memory()
    if pool:
        state.update(cupy_allocated=pool["allocated"], cupy_reserved=pool["reserved"])
    on_gpu = (error is not None and error.kind == "cuda") or bool(torch_mem) or bool(pool)
    if on_gpu:
        device = error.device if error and error.device is not None else torch_mem.get("device")
        nv, nv_notes = _nvml_state(device)
        state.update(nv)
        notes += nv_notes
    state.update(_host_state())
    tensors = tuple(LiveTensor.from_dict(t) for t in tm.live_tensors(top))
    if ft.loaded() is not None and not tm.cuda_initialized() and on_gpu:
        notes.append("torch has not initialised CUDA in this process: no allocator statistics")
    state["allocator_env"] = tm.allocator_env()
    released = False
    if release:
        if exc is not None:
            _clear_frames(exc.__traceback__)
        tm.release_memory()
        fc.release_pool()
        released = True
        after = tm.cuda_memory(torch_mem.get("device")) if torch_mem else None
        if after:
            state["reserved_after"] = after["reserved"]
        if on_gpu and state.get("gpu_index") is not None:
            nv_after, _ = _nvml_state(torch_mem.get("device"))
            state["gpu_used_after"] = nv_after.get("gpu_used")
    report = OomReport(error=error, tensors=tensors, released=released, notes=tuple(notes), **state)
    return _with_findings(report)


def _with_findings(r: OomReport) -> OomReport:
    import dataclasses

    return dataclasses.replace(r, findings=tuple(judge(r)))


def judge(r: OomReport) -> list[Finding]:
    """The findings a report supports: the failure, fragmentation, other processes, the cache
    held, the largest tensors, and what to do."""
    out: list[Finding] = []
    e = r.error
    env_name = "PYTORCH_CUDA_ALLOC_CONF"
    if e is not None:
        if e.kind == "host":
            where = "host memory (RAM)"
        else:
            where = f"GPU {e.device}" if e.device is not None else "the GPU"
        ev = [Evidence("requested", e.requested, "B")]
        if e.kind == "cuda":
            ev += [Evidence("free", e.free, "B"), Evidence("total", e.total or r.gpu_total, "B")]
        else:
            ev += [Evidence("host_available", r.host_available, "B")]
        out.append(
            Finding(
                id="oom-error",
                status=Status.FAIL,
                title=f"{e.framework} ran out of memory on {where}: tried to allocate "
                f"{format_bytes(e.requested)}",
                evidence=tuple(ev),
                fix="make the step smaller (batch size: gpuprobe.fit(step) finds the largest "
                "that fits), or give memory back before it (see below)",
                group="oom",
                details=(e.message,),
            )
        )
    reserved = r.reserved if r.reserved is not None else (e.reserved if e else None)
    allocated = r.allocated if r.allocated is not None else (e.allocated if e else None)
    if reserved and allocated is not None:
        unused = max(0, reserved - allocated)
        frac = unused / reserved
        requested = e.requested if e else None
        fragmented = frac >= FRAGMENTATION_WARN_FRACTION or (
            requested is not None and unused >= requested
        )
        conf = r.allocator_env.get(env_name, "") + r.allocator_env.get("PYTORCH_ALLOC_CONF", "")
        has_expandable = "expandable_segments:True" in conf
        out.append(
            Finding(
                id="oom-fragmentation",
                status=Status.WARN if fragmented and not has_expandable else Status.OK,
                title=(
                    f"{format_bytes(unused)} of torch's {format_bytes(reserved)} cache is reserved "
                    f"but unallocated ({100 * frac:.0f} %)"
                    + (": fragmentation" if fragmented else "")
                ),
                evidence=(
                    Evidence("allocated", allocated, "B"),
                    Evidence("reserved", reserved, "B"),
                    Evidence("reserved_unallocated", unused, "B"),
                    Evidence("inactive_split", r.inactive_split, "B"),
                    Evidence("fraction", round(100 * frac, 1), "%"),
                ),
                fix=(
                    f"export {env_name}=expandable_segments:True  (before the process starts)"
                    if fragmented and not has_expandable
                    else ""
                ),
                group="oom",
            )
        )
    others = [h for h in r.holders if not h.this_process]
    if r.gpu_total and r.holders is not None:
        other_bytes = sum(h.used_memory or 0 for h in others)
        frac = other_bytes / r.gpu_total
        busy = frac >= OTHER_PROCESSES_WARN_FRACTION
        names = ", ".join(
            f"pid {h.pid} {h.name or '?'} {format_bytes(h.used_memory)}" for h in others[:5]
        )
        out.append(
            Finding(
                id="oom-other-processes",
                status=Status.WARN if busy else Status.OK,
                title=(
                    f"other processes hold {format_bytes(other_bytes)} "
                    f"({100 * frac:.0f} %) of {r.gpu_name or 'the card'}"
                    + (f": {names}" if names else "")
                ),
                evidence=(
                    Evidence("other_processes", len(others)),
                    Evidence("other_bytes", other_bytes, "B"),
                    Evidence("gpu_total", r.gpu_total, "B"),
                ),
                fix=(
                    "stop them or pick a free card: nvidia-smi; CUDA_VISIBLE_DEVICES=<free index>"
                    if busy
                    else ""
                ),
                group="oom",
            )
        )
    if r.cupy_reserved and (r.cupy_reserved - (r.cupy_allocated or 0)) > 0:
        held = r.cupy_reserved - (r.cupy_allocated or 0)
        out.append(
            Finding(
                id="oom-cupy-pool",
                status=Status.INFO,
                title=f"CuPy's pool holds {format_bytes(held)} it is not using",
                evidence=(
                    Evidence("cupy_allocated", r.cupy_allocated, "B"),
                    Evidence("cupy_reserved", r.cupy_reserved, "B"),
                ),
                fix="cupy.get_default_memory_pool().free_all_blocks()",
                group="oom",
            )
        )
    if r.tensors:
        on_card = [t for t in r.tensors if t.device.startswith("cuda")]
        on_gpu = on_card or list(r.tensors)
        total = sum(t.bytes for t in on_gpu)
        params = sum(t.bytes for t in on_gpu if t.parameter)
        out.append(
            Finding(
                id="oom-largest-tensors",
                status=Status.INFO,
                title=f"the {len(on_gpu)} largest live tensors hold {format_bytes(total)} "
                f"({format_bytes(params)} of it parameters)",
                evidence=(
                    Evidence("largest", on_gpu[0].bytes, "B"),
                    Evidence("listed_bytes", total, "B"),
                    Evidence("parameter_bytes", params, "B"),
                ),
                fix="del the tensors you no longer need"
                + (", or move data off the card: x = x.cpu()" if on_card else ""),
                group="oom",
                details=tuple(str(t) for t in on_gpu),
            )
        )
    if r.released:
        before = r.reserved
        after = r.reserved_after
        given = (before - after) if before is not None and after is not None else None
        title = (
            f"memory given back: torch's cache {format_bytes(before)} -> {format_bytes(after)}"
            if given is not None
            else "memory given back: frames cleared, garbage collected, caches emptied"
        )
        if r.gpu_used is not None and r.gpu_used_after is not None:
            title += f"; card {format_bytes(r.gpu_used)} -> {format_bytes(r.gpu_used_after)} used"
        out.append(
            Finding(
                id="oom-released",
                status=Status.OK,
                title=title,
                evidence=(
                    Evidence("reserved_before", before, "B"),
                    Evidence("reserved_after", after, "B"),
                    Evidence("gpu_used_before", r.gpu_used, "B"),
                    Evidence("gpu_used_after", r.gpu_used_after, "B"),
                ),
                group="oom",
            )
        )
    if e is not None:
        out.append(
            Finding(
                id="oom-what-to-do",
                status=Status.INFO,
                title="what to do, cheapest first",
                fix="halve the batch size (gpuprobe.fit(step, batch_sizes=range(1, 4097)) finds "
                "the largest that fits)",
                group="oom",
                details=_remedies(e, r),
            )
        )
    return out


def _remedies(e: OomError, r: OomReport) -> tuple[str, ...]:
    if e.kind == "host":
        return (
            "smaller batch: the failed allocation asked for "
            f"{format_bytes(e.requested)}, {format_bytes(r.host_available)} is available",
            "load data lazily or in chunks (Dask, memory-mapped arrays) instead of all at once",
            "use a smaller dtype: float32 or bfloat16 instead of float64",
        )
    return (
        "smaller batch size; keep the effective batch with gradient accumulation "
        "(loss / k; optimizer.step() every k steps)",
        "torch.cuda.empty_cache() after a failed step, so other processes and libraries "
        "(CuPy, NCCL) can use what torch's cache holds",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved >> allocated "
        "(fragmentation)",
        "activation checkpointing: torch.utils.checkpoint.checkpoint(block, x, "
        "use_reentrant=False) trades compute for activation memory",
        "mixed precision: with torch.autocast('cuda', dtype=torch.bfloat16): halves activations",
        "move data off the card: keep the dataset on the CPU and copy each batch "
        "(pin_memory=True, .to('cuda', non_blocking=True)); x.cpu() for results you keep",
        "inference: wrap it in torch.inference_mode() so no activations are kept for backward",
    )


def render_text(r: OomReport) -> str:
    """The report as plain text, for a terminal under a traceback."""
    from gpuprobe.report.findings_text import findings_lines

    lines = ["gpuprobe: out of memory, explained"]
    lines += findings_lines(
        r.findings, no_details=("oom-error",), no_fix=("oom-error", "oom-what-to-do")
    )
    for n in r.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


# -- the hook -------------------------------------------------------------------------------------

_previous_hook: Callable[..., Any] | None = None


def _hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    previous = _previous_hook or sys.__excepthook__
    previous(exc_type, exc, tb)
    if classify_oom(exc) is None:
        return
    try:
        report = explain_oom(exc)
    except Exception as inner:  # the report must never hide the user's own error
        print(f"gpuprobe: could not explain the out-of-memory error: {inner!r}", file=sys.stderr)
        return
    print(render_text(report), file=sys.stderr)


def _ipython_handler(shell: Any, etype: Any, evalue: Any, tb: Any, tb_offset: Any = None) -> Any:
    shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
    if classify_oom(evalue) is not None:
        print(render_text(explain_oom(evalue)), file=sys.stderr)


def install_oom_hook() -> None:
    """After the traceback of an uncaught out-of-memory error, print who holds the memory and
    what to do, and give the memory back (``sys.excepthook``; in IPython and Jupyter, a custom
    exception handler). Idempotent; :func:`uninstall_oom_hook` undoes it."""
    global _previous_hook
    shell = _ipython()
    if shell is not None:
        shell.set_custom_exc((BaseException,), _ipython_handler)
        return
    if sys.excepthook is not _hook:
        _previous_hook = sys.excepthook
        sys.excepthook = _hook


def uninstall_oom_hook() -> None:
    """Put back the exception hook that was there before :func:`install_oom_hook`."""
    global _previous_hook
    shell = _ipython()
    if shell is not None:
        shell.set_custom_exc((), None)
    if sys.excepthook is _hook:
        sys.excepthook = _previous_hook or sys.__excepthook__
    _previous_hook = None


def _ipython() -> Any:
    mod = sys.modules.get("IPython")
    if mod is None:
        return None
    try:
        return mod.get_ipython()
    except Exception:
        return None
