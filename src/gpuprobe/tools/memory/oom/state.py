"""Read who holds the memory: this process's allocators, the card, the host and live tensors.

Every reader goes through a door: torch's caching allocator through
:mod:`gpuprobe.platform.frameworks.torch_memory`, the card and the processes on it through
:mod:`gpuprobe.platform.hardware.nvml`, the host through psutil. A reader that cannot see its part says so
in a note and the report goes on.

Units: bytes.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from gpuprobe.core.records import Record
from gpuprobe.core.units import size

__all__ = [
    "TOP_TENSORS",
    "GpuHolder",
    "LiveTensor",
    "clear_frames",
    "host_state",
    "nvml_state",
    "torch_state",
]

TOP_TENSORS = 10  # how many live tensors the report lists


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
        return f"{size(self.bytes):>10}  {shape} {self.dtype} on {self.device} ({kind})"


@dataclass(frozen=True)
class GpuHolder(Record):
    """A process holding memory on the GPU (NVML)."""

    pid: int
    name: str | None = None
    used_memory: int | None = None  # bytes
    this_process: bool = False


def torch_state(device: int | None) -> tuple[dict[str, Any], list[str]]:
    """torch's caching allocator on ``device`` (empty unless torch has initialised CUDA), and
    notes on what could not be read. An index this process has no GPU at (a message from
    another machine, or from before CUDA_VISIBLE_DEVICES changed) is not read; any error from
    reading is a note, never the report's end."""
    from gpuprobe.platform.frameworks import torch_memory

    try:
        if not torch_memory.cuda_initialized():
            return {}, []
        count = torch_memory.cuda_device_count()
        if device is not None and not 0 <= device < count:
            return {}, [
                f"the error names GPU {device}; this process sees {count} CUDA GPU(s) "
                f"(cuda:0..cuda:{count - 1}): torch's allocator there is not read"
            ]
        return torch_memory.cuda_memory(device) or {}, []
    except Exception as exc:  # a broken context, a driver error: the report goes on
        return {}, [f"torch's allocator could not be read: {_one_line(exc)}"]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def nvml_state(torch_index: int | None) -> tuple[dict[str, Any], list[str]]:
    """The card's memory and the processes on it, through the NVML door, and notes on what
    could not be read. ``torch_index`` is the GPU as the failing process numbered it; a GPU
    this machine does not have is not read (no other card stands in for it)."""
    from gpuprobe.platform.hardware.nvml import NvmlUnavailable, nvml_session

    notes: list[str] = []
    try:
        with nvml_session() as s:
            count = s.device_count()
            if count == 0:
                return {}, ["NVML sees no GPU"]
            index, how = _nvml_index_of(s, torch_index)
            if index is None:
                return {}, [
                    f"the error names GPU {torch_index}; it is not on this machine ({how}): "
                    "the card's state and the processes on it are not read"
                ]
            gpu = s.gpu(index)
            procs = s.processes(index)
    except NvmlUnavailable as exc:
        return {}, [f"no NVML ({exc}): other processes on the card are not known"]
    except Exception as exc:  # a card that fell off the bus: the report still goes on
        return {}, [f"NVML failed: {_one_line(exc)}"]
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


def _nvml_index_of(session: Any, torch_index: int | None) -> tuple[int | None, str]:
    """NVML's index of the card the process calls ``torch_index`` (None: no such card here),
    and how it was found, in words. By UUID when torch has initialised CUDA here; else through
    CUDA_VISIBLE_DEVICES (indices or UUIDs) when it is set; else the index itself (CUDA's
    order and NVML's PCI order agree unless CUDA_DEVICE_ORDER=FASTEST_FIRST reorders a mixed
    machine). NVML ignores CUDA_VISIBLE_DEVICES and lists every card."""
    count = session.device_count()
    if torch_index is None:
        return 0, "the first GPU"
    uuid = _torch_uuid(torch_index)
    if uuid is not None:
        for i in range(count):
            if session.query("nvmlDeviceGetUUID", session.handle(i)) == uuid:
                return i, "by UUID"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if torch_index >= len(entries):
            return None, f"CUDA_VISIBLE_DEVICES={visible} makes {len(entries)} visible"
        entry = entries[torch_index]
        if entry.isdigit():
            i = int(entry)
            if i < count:
                return i, "through CUDA_VISIBLE_DEVICES"
            return None, f"CUDA_VISIBLE_DEVICES names {i}; NVML sees {count} GPU(s)"
        for i in range(count):
            u = session.query("nvmlDeviceGetUUID", session.handle(i)) or ""
            if entry.startswith("GPU-") and u.startswith(entry):
                return i, "through CUDA_VISIBLE_DEVICES"
        return None, f"CUDA_VISIBLE_DEVICES names {entry}, which NVML does not list"
    if torch_index >= count:
        return None, f"NVML sees {count} GPU(s)"
    return torch_index, "by index"


def _torch_uuid(torch_index: int) -> str | None:
    """``GPU-<uuid>`` of torch's GPU ``torch_index`` when torch has initialised CUDA here and
    has that GPU; None otherwise (or when it cannot say)."""
    from gpuprobe.platform.frameworks import torch_memory
    from gpuprobe.platform.frameworks.torch import loaded

    torch = loaded()
    try:
        if torch is None or not 0 <= torch_index < torch_memory.cuda_device_count():
            return None
        uuid = getattr(torch.cuda.get_device_properties(torch_index), "uuid", None)
    except Exception:  # a broken context: fall back to CUDA_VISIBLE_DEVICES or the index
        return None
    return None if uuid is None else f"GPU-{uuid}"


def host_state() -> dict[str, Any]:
    """The machine's RAM: ``host_total`` and ``host_available``."""
    import psutil

    vm = psutil.virtual_memory()
    return {"host_total": int(vm.total), "host_available": int(vm.available)}


def clear_frames(tb: TracebackType | None) -> None:
    """Drop the local variables of the frames a traceback holds (the failed step's tensors);
    frames still running are left alone."""
    if tb is not None:
        traceback.clear_frames(tb)
