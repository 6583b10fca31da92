"""Out of memory, explained (:func:`explain_oom`): who holds the memory, the largest live tensors,
and what to do.

:func:`explain_oom` classifies the error (:mod:`~gpuprobe.tools.memory.oom.classify`), reads this
process's allocators (torch's caching allocator through :mod:`gpuprobe.platform.frameworks.torch_memory`,
CuPy's pool through :mod:`gpuprobe.platform.frameworks.cupy`), the other processes on the card through
NVML, and the largest live tensors (:mod:`~gpuprobe.tools.memory.oom.state`); then it gives the memory
back (the failed step's frames are cleared, garbage collected, the cache emptied), says how much
came back, and judges it all (:data:`gpuprobe.tools.memory.rules.RULES_OOM`). :func:`install_oom_hook`
(:mod:`~gpuprobe.tools.memory.oom.hook`) prints the report under the traceback of an uncaught
out-of-memory error; :mod:`gpuprobe.tools.memory.show.oom` writes it as text.

The result is an :class:`~gpuprobe.tools.memory.oom.report.OomReport`.

Units: bytes.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from gpuprobe.core.rules import apply_rules
from gpuprobe.tools.memory.oom.classify import classify_oom
from gpuprobe.tools.memory.oom.report import OomReport
from gpuprobe.tools.memory.oom.state import (
    TOP_TENSORS,
    LiveTensor,
    clear_frames,
    host_state,
    nvml_state,
    torch_state,
)

__all__ = ["explain_oom"]

T = TypeVar("T")


def _read(notes: list[str], what: str, fn: Callable[[], T]) -> T | None:
    """``fn()``, or None with a note when it raised: the report never ends on its own error."""
    try:
        return fn()
    except Exception as exc:
        text = str(exc).strip().splitlines()
        notes.append(f"{what} failed: {type(exc).__name__}" + (f": {text[0]}" if text else ""))
        return None


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

    The verdicts on the failure (fragmentation) use the figures in the error's own message
    when it has them (torch's CUDA message does): they describe the moment it failed. This
    process's allocators are read only for an error raised in this process (one with a
    traceback), and only for a GPU it has; an error built from a message (a log, another
    machine) is judged by its message alone, with a note saying so. Nothing read here can end
    the report: what fails to be read becomes a note.
    """
    from gpuprobe.platform.frameworks import cupy as fc
    from gpuprobe.platform.frameworks import torch_memory as tm
    from gpuprobe.platform.frameworks.torch import loaded

    if exc is None:
        exc = sys.exc_info()[1] or getattr(sys, "last_value", None)
    error = classify_oom(exc) if exc is not None else None
    notes: list[str] = []
    if exc is not None and error is None:
        notes.append(f"{type(exc).__name__} is not an out-of-memory error; memory as it stands")
    # This process's allocators describe the error only when it was raised here (it has a
    # traceback): an error built from a message (a log, another machine) is judged by its own
    # figures, and this process's cache, whatever it holds, says nothing about it.
    live = error is None or (exc is not None and exc.__traceback__ is not None)
    if not live:
        notes.append(
            "the error was not raised in this process (it has no traceback): the verdicts use "
            "the figures in its message; this process's allocators are not read"
        )
    state: dict[str, Any] = {}
    torch_mem: dict[str, Any] = {}
    pool = None
    if live:
        torch_mem, t_notes = torch_state(error.device if error else None)
        notes += t_notes
        pool = _read(notes, "CuPy's pool", fc.pool_memory)
    if torch_mem:
        state.update(
            allocated=torch_mem["allocated"],
            reserved=torch_mem["reserved"],
            inactive_split=torch_mem["inactive_split"],
            alloc_retries=torch_mem["alloc_retries"],
            ooms=torch_mem["ooms"],
        )
    if pool:
        state.update(cupy_allocated=pool["allocated"], cupy_reserved=pool["reserved"])
    on_gpu = (error is not None and error.kind == "cuda") or bool(torch_mem) or bool(pool)
    if on_gpu:
        device = error.device if error and error.device is not None else torch_mem.get("device")
        nv, nv_notes = nvml_state(device)
        state.update(nv)
        notes += nv_notes
    state.update(host_state())
    found = _read(notes, "the live tensors", lambda: tm.live_tensors(top)) if live else None
    tensors = tuple(LiveTensor.from_dict(t) for t in found or ())
    if live and loaded() is not None and not tm.cuda_initialized() and on_gpu:
        notes.append("torch has not initialised CUDA in this process: no allocator statistics")
    state["allocator_env"] = tm.allocator_env()
    released = False
    if release and live:
        if exc is not None:
            clear_frames(exc.__traceback__)
        _read(notes, "giving memory back", tm.release_memory)
        fc.release_pool()
        released = True
        if torch_mem:
            after, _ = torch_state(torch_mem.get("device"))
            if after:
                state["reserved_after"] = after["reserved"]
        if on_gpu and state.get("gpu_index") is not None:
            nv_after, _ = nvml_state(device)
            state["gpu_used_after"] = nv_after.get("gpu_used")
    report = OomReport(error=error, tensors=tensors, released=released, notes=tuple(notes), **state)
    from gpuprobe.tools.memory.rules import RULES_OOM

    return dataclasses.replace(report, findings=tuple(apply_rules(RULES_OOM, report)))
