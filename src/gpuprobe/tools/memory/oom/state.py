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


def torch_state(device: int | None) -> dict[str, Any]:
    """torch's caching allocator on ``device`` (empty unless torch has initialised CUDA)."""
    from gpuprobe.platform.frameworks import torch_memory

    return torch_memory.cuda_memory(device) or {}


def nvml_state(torch_index: int | None) -> tuple[dict[str, Any], list[str]]:
    """The card's memory and the processes on it, through the NVML door, and notes on what
    could not be read."""
    from gpuprobe.platform.hardware.nvml import NvmlUnavailable, nvml_session

    notes: list[str] = []
    try:
        with nvml_session() as s:
            count = s.device_count()
            if count == 0:
                return {}, ["NVML sees no GPU"]
            index = _nvml_index_of(s, torch_index)
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
    from gpuprobe.platform.frameworks import torch_memory
    from gpuprobe.platform.frameworks.torch import loaded

    torch = loaded()
    if torch is None or torch_index is None or not torch_memory.cuda_initialized():
        return 0 if torch_index is None else min(torch_index, session.device_count() - 1)
    uuid = getattr(torch.cuda.get_device_properties(torch_index), "uuid", None)
    if uuid is not None:
        for i in range(session.device_count()):
            if session.query("nvmlDeviceGetUUID", session.handle(i)) == f"GPU-{uuid}":
                return i
    return min(torch_index, session.device_count() - 1)


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
