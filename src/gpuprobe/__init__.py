"""gpuprobe: does my GPU setup really work, what can this machine do, and why doesn't my job use
the GPU well?

The public API is imported lazily, so ``import gpuprobe`` stays cheap::

    import gpuprobe
    inv = gpuprobe.inventory()      # the machine, read once
    report = gpuprobe.doctor()      # verdicts with evidence and fixes
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> "module:attribute"; each stage registers its entry points here.
_API: dict[str, str] = {
    "inventory": "gpuprobe.inventory:inventory",
    "Inventory": "gpuprobe.inventory:Inventory",
    "doctor": "gpuprobe.checks:doctor",
    "DoctorReport": "gpuprobe.checks:DoctorReport",
    "Finding": "gpuprobe.findings:Finding",
    "Status": "gpuprobe.findings:Status",
    "GpuprobeError": "gpuprobe.errors:GpuprobeError",
    "lstsq": "gpuprobe.parallel.lstsq:lstsq",
    "diagnose": "gpuprobe.trace:diagnose",
    "diagnose_ranks": "gpuprobe.trace.ranks:diagnose_ranks",
    "profile": "gpuprobe.trace.profile:profile",
    "record": "gpuprobe.monitor.record:record",
    "bench": "gpuprobe.measure:bench",
    "explain_oom": "gpuprobe.memory.oom:explain_oom",
    "install_oom_hook": "gpuprobe.memory.oom:install_oom_hook",
    "uninstall_oom_hook": "gpuprobe.memory.oom:uninstall_oom_hook",
    "fit": "gpuprobe.memory.fit:fit",
    "pack": "gpuprobe.monitor.pack:pack",
    "precision_sweep": "gpuprobe.memory.precision:precision_sweep",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'gpuprobe' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
