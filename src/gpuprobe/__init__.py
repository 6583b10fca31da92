"""gpuprobe: does my GPU setup really work, what can this machine do, and why doesn't my job use
the GPU well?

::

    import gpuprobe
    inv = gpuprobe.inventory()      # the machine, read once
    report = gpuprobe.doctor()      # verdicts with evidence and fixes
    result = gpuprobe.run(["python", "train.py"])   # record a command, judge the run

The functions are those of :mod:`gpuprobe.api` (typed, each importing its implementation when
called, so ``import gpuprobe`` stays cheap); the result types are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpuprobe import api
from gpuprobe._version import __version__
from gpuprobe.api import *  # noqa: F403  (the functions: api.__all__)
from gpuprobe.errors import GpuprobeError, InputError, UsageError

if TYPE_CHECKING:
    from gpuprobe.checks import DoctorReport
    from gpuprobe.findings import Finding, Status
    from gpuprobe.machine import Inventory
    from gpuprobe.measure.report import BenchReport
    from gpuprobe.monitor.record import Recording
    from gpuprobe.monitor.run import RunResult
    from gpuprobe.parallel.lstsq import LstsqReport
    from gpuprobe.trace.model import Diagnosis
    from gpuprobe.trace.profile import profile

# public type -> "module:attribute", imported on first use (the modules behind them are not cheap)
_TYPES: dict[str, str] = {
    "BenchReport": "gpuprobe.measure.report:BenchReport",
    "Diagnosis": "gpuprobe.trace.model:Diagnosis",
    "DoctorReport": "gpuprobe.checks:DoctorReport",
    "Finding": "gpuprobe.findings:Finding",
    "Inventory": "gpuprobe.machine:Inventory",
    "LstsqReport": "gpuprobe.parallel.lstsq:LstsqReport",
    "Recording": "gpuprobe.monitor.record:Recording",
    "RunResult": "gpuprobe.monitor.run:RunResult",
    "Status": "gpuprobe.findings:Status",
    "profile": "gpuprobe.trace.profile:profile",
}

__all__ = [
    "BenchReport",
    "Diagnosis",
    "DoctorReport",
    "Finding",
    "GpuprobeError",
    "InputError",
    "Inventory",
    "LstsqReport",
    "Recording",
    "RunResult",
    "Status",
    "UsageError",
    "__version__",
    "profile",
]
__all__ += api.__all__


def __getattr__(name: str) -> Any:
    target = _TYPES.get(name)
    if target is None:
        raise AttributeError(f"module 'gpuprobe' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
