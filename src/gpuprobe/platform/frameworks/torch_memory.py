"""torch's memory in this process: the caching allocator, live tensors, caps and giving back.

These never import torch on their own behalf: :func:`gpuprobe.platform.frameworks.torch.loaded` returns
the module only when the user's process has imported it already, and the functions that need it
regardless (:func:`cap_cuda_memory`) ask :func:`gpuprobe.platform.frameworks.torch.require`, which says how
to install it. Used by :mod:`gpuprobe.tools.memory` (the out-of-memory report, the batch-size search).

A device may be given as ``cuda`` (torch's current device), ``cuda:N`` or the index ``N``:
:func:`cuda_index` resolves it here, at the door, because several ``torch.cuda`` functions
(``set_per_process_memory_fraction``, ``mem_get_info`` in some releases, ``set_device``) refuse
a device without an index.

Units: bytes.
"""

from __future__ import annotations

import warnings
from typing import Any

from gpuprobe.platform.frameworks.torch import loaded, require

__all__ = [
    "allocator_env",
    "cap_cuda_memory",
    "cuda_device",
    "cuda_device_count",
    "cuda_index",
    "cuda_initialized",
    "cuda_memory",
    "live_tensors",
    "peak_memory",
    "release_memory",
    "reset_peak_memory",
    "warm_up",
]


def cuda_initialized() -> bool:
    """True when this process has initialised CUDA through torch. Asks
    ``torch.cuda.is_initialized()`` only: ``torch.cuda.is_available()`` would itself start the
    CUDA driver (``cuInit`` maps libcuda and reserves address space), which is a side effect a
    question must not have (under a trial's RLIMIT_AS cap on the H200 it took ~75 MiB of 160)."""
    torch = loaded()
    return bool(torch is not None and torch.cuda.is_initialized())


def cuda_device_count() -> int:
    """The CUDA GPUs this process sees (after CUDA_VISIBLE_DEVICES); 0 unless torch has
    initialised CUDA here (counting them otherwise would start the driver)."""
    torch = loaded()
    if torch is None or not cuda_initialized():
        return 0
    return int(torch.cuda.device_count())


def cuda_index(device: str | int | None = None) -> int:
    """The index of a CUDA device given as ``None`` or ``cuda`` (torch's current device: this
    initialises CUDA when it is not yet), ``cuda:N`` or ``N``. ValueError for anything else."""
    if isinstance(device, int):
        return device
    kind, _, index = (device or "cuda").partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"not a CUDA device: {device!r} (cuda, cuda:N or N)")
    if index:
        return int(index)
    torch = require("the current CUDA device")
    return int(torch.cuda.current_device())


def cuda_device(device: str) -> str:
    """``cuda:N`` for a CUDA device given as ``cuda`` or ``cuda:N``; any other device as
    given."""
    if device.partition(":")[0] != "cuda":
        return device
    return f"cuda:{cuda_index(device)}"


def cuda_memory(device: int | None = None) -> dict[str, int] | None:
    """The caching allocator's view of one GPU, in bytes (None unless torch has initialised CUDA
    in this process): ``allocated`` (live tensors), ``reserved`` (held by the cache),
    ``inactive_split`` (free pieces of split blocks: fragmentation), ``peak_allocated``,
    ``alloc_retries`` and ``ooms`` (counts), ``free`` and ``total`` (cudaMemGetInfo). None too
    for an index this process has no GPU at (an error message from another machine, or from
    before CUDA_VISIBLE_DEVICES changed): torch would raise "Invalid device argument"."""
    if not cuda_initialized():
        return None
    torch = loaded()
    assert torch is not None
    dev = cuda_index(device)
    if not 0 <= dev < cuda_device_count():
        return None
    stats = torch.cuda.memory_stats(dev)
    free, total = torch.cuda.mem_get_info(dev)
    return {
        "device": int(dev),
        "allocated": int(stats.get("allocated_bytes.all.current", 0)),
        "reserved": int(stats.get("reserved_bytes.all.current", 0)),
        "inactive_split": int(stats.get("inactive_split_bytes.all.current", 0)),
        "peak_allocated": int(stats.get("allocated_bytes.all.peak", 0)),
        "alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "ooms": int(stats.get("num_ooms", 0)),
        "free": int(free),
        "total": int(total),
    }


def reset_peak_memory(device: str) -> None:
    """Start a new peak for :func:`peak_memory` (CUDA only)."""
    torch = loaded()
    if torch is not None and device.startswith("cuda") and cuda_initialized():
        torch.cuda.reset_peak_memory_stats(cuda_index(device))


def peak_memory(device: str) -> int | None:
    """Bytes at the allocator's peak since :func:`reset_peak_memory` (CUDA only)."""
    torch = loaded()
    if torch is None or not device.startswith("cuda") or not cuda_initialized():
        return None
    return int(torch.cuda.max_memory_allocated(cuda_index(device)))


def live_tensors(limit: int = 10) -> list[dict[str, Any]]:
    """The largest tensors alive in this process (found through the garbage collector), one per
    storage, largest first: shape, dtype, device, bytes, whether it is a parameter or needs grad.
    Tensors held only by C++ (autograd's saved activations) cannot be seen this way."""
    import gc

    torch = loaded()
    if torch is None:
        return []
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    with warnings.catch_warnings():  # isinstance on torch's deprecated lazy aliases warns
        warnings.simplefilter("ignore")
        objects = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    for obj in objects:
        try:
            if obj.is_meta:
                continue
            storage = obj.untyped_storage()
            key = (str(obj.device), int(storage.data_ptr()))
            nbytes = int(storage.nbytes())
        except Exception:  # sparse, fake or otherwise storage-less tensors
            continue
        if nbytes == 0 or (key in seen and seen[key]["bytes"] >= nbytes):
            continue
        seen[key] = {
            "shape": tuple(int(s) for s in obj.shape),
            "dtype": str(obj.dtype).removeprefix("torch."),
            "device": str(obj.device),
            "bytes": nbytes,
            "parameter": isinstance(obj, torch.nn.Parameter),
            "requires_grad": bool(obj.requires_grad),
        }
    return sorted(seen.values(), key=lambda d: -int(d["bytes"]))[:limit]


def release_memory() -> None:
    """Collect garbage and give the caching allocator's unused blocks back to the driver."""
    import gc

    gc.collect()
    torch = loaded()
    if torch is not None and cuda_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def allocator_env() -> dict[str, str]:
    """The allocator settings in the environment (``PYTORCH_CUDA_ALLOC_CONF``, and
    ``PYTORCH_ALLOC_CONF``, its name from torch 2.9)."""
    import os

    names = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    return {n: os.environ[n] for n in names if n in os.environ}


def warm_up() -> None:
    """Run one tiny op so torch's thread pool and allocator exist before a memory cap is set."""
    torch = loaded()
    if torch is not None:
        (torch.ones(64, 64) @ torch.ones(64, 64)).sum().item()


def cap_cuda_memory(limit: int, device: str) -> str:
    """Cap torch's caching allocator on ``device`` at ``limit`` bytes
    (``torch.cuda.set_per_process_memory_fraction``); returns what was capped, in words."""
    torch = require("a CUDA memory cap")
    dev = cuda_index(device)  # set_per_process_memory_fraction refuses a bare "cuda"
    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), dev)
    return f"torch's CUDA allocator on cuda:{dev} (set_per_process_memory_fraction)"
