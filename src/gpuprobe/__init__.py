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
from gpuprobe.core.errors import GpuprobeError, InputError, UsageError

if TYPE_CHECKING:
    from gpuprobe.core.findings import Finding, Status
    from gpuprobe.platform.energy import EnergyMeter, EnergyReading
    from gpuprobe.platform.inventory import Inventory
    from gpuprobe.tools.bench.model import BenchReport
    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis
    from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
    from gpuprobe.tools.diagnose.kernels import KernelBreakdown
    from gpuprobe.tools.diagnose.model import Diagnosis, TraceComparison
    from gpuprobe.tools.diagnose.profile import profile
    from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis
    from gpuprobe.tools.doctor.model import DoctorReport
    from gpuprobe.tools.fleet.model import FleetBenchReport, FleetDoctorReport
    from gpuprobe.tools.memory.model import FitResult, FitTrial, PrecisionReport
    from gpuprobe.tools.memory.oom.classify import OomError
    from gpuprobe.tools.memory.oom.report import OomReport
    from gpuprobe.tools.monitor.exporter import GpuprobeCollector, MetricsServer
    from gpuprobe.tools.monitor.live import TopView
    from gpuprobe.tools.monitor.pack_model import PackLevel, PackReport
    from gpuprobe.tools.monitor.record import Recording
    from gpuprobe.tools.monitor.run import RunResult
    from gpuprobe.tools.monitor.sampler import Sampler
    from gpuprobe.tools.monitor.summary import RunSummary
    from gpuprobe.tools.monitor.timeline import Timeline
    from gpuprobe.tools.profile.model import ProfileReport
    from gpuprobe.tools.scale.lstsq import LstsqReport, LstsqResult, SgdSettings
    from gpuprobe.tools.scale.model import ScaleResult

# public type -> "module:attribute", imported on first use (the modules behind them are not cheap)
_TYPES: dict[str, str] = {
    "BenchReport": "gpuprobe.tools.bench.model:BenchReport",
    "CycleDiagnosis": "gpuprobe.tools.diagnose.cycles_model:CycleDiagnosis",
    "Diagnosis": "gpuprobe.tools.diagnose.model:Diagnosis",
    "DoctorReport": "gpuprobe.tools.doctor.model:DoctorReport",
    "EnergyMeter": "gpuprobe.platform.energy:EnergyMeter",
    "EnergyReading": "gpuprobe.platform.energy:EnergyReading",
    "Finding": "gpuprobe.core.findings:Finding",
    "FleetBenchReport": "gpuprobe.tools.fleet.model:FleetBenchReport",
    "FleetDoctorReport": "gpuprobe.tools.fleet.model:FleetDoctorReport",
    "FitResult": "gpuprobe.tools.memory.model:FitResult",
    "FitTrial": "gpuprobe.tools.memory.model:FitTrial",
    "GpuprobeCollector": "gpuprobe.tools.monitor.exporter:GpuprobeCollector",
    "Inventory": "gpuprobe.platform.inventory:Inventory",
    "KernelBreakdown": "gpuprobe.tools.diagnose.kernels:KernelBreakdown",
    "KernelDiff": "gpuprobe.tools.diagnose.kernel_diff_model:KernelDiff",
    "LstsqReport": "gpuprobe.tools.scale.lstsq:LstsqReport",
    "LstsqResult": "gpuprobe.tools.scale.lstsq:LstsqResult",
    "MetricsServer": "gpuprobe.tools.monitor.exporter:MetricsServer",
    "MultiRankDiagnosis": "gpuprobe.tools.diagnose.ranks_model:MultiRankDiagnosis",
    "OomError": "gpuprobe.tools.memory.oom.classify:OomError",
    "OomReport": "gpuprobe.tools.memory.oom.report:OomReport",
    "PackLevel": "gpuprobe.tools.monitor.pack_model:PackLevel",
    "PackReport": "gpuprobe.tools.monitor.pack_model:PackReport",
    "PrecisionReport": "gpuprobe.tools.memory.model:PrecisionReport",
    "ProfileReport": "gpuprobe.tools.profile.model:ProfileReport",
    "Recording": "gpuprobe.tools.monitor.record:Recording",
    "RunResult": "gpuprobe.tools.monitor.run:RunResult",
    "RunSummary": "gpuprobe.tools.monitor.summary:RunSummary",
    "Sampler": "gpuprobe.tools.monitor.sampler:Sampler",
    "ScaleResult": "gpuprobe.tools.scale.model:ScaleResult",
    "SgdSettings": "gpuprobe.tools.scale.lstsq:SgdSettings",
    "Status": "gpuprobe.core.findings:Status",
    "Timeline": "gpuprobe.tools.monitor.timeline:Timeline",
    "TopView": "gpuprobe.tools.monitor.live:TopView",
    "TraceComparison": "gpuprobe.tools.diagnose.model:TraceComparison",
    "TraceContext": "gpuprobe.tools.diagnose.analysis:TraceContext",
    "profile": "gpuprobe.tools.diagnose.profile:profile",
}
# A tool's result loads its views with its tool (the tool's package imports its show package); the
# public types below the tools are shown by ui/, which is loaded with them here.
_VIEWS: dict[str, str] = {
    "EnergyMeter": "gpuprobe.ui.energy",
    "EnergyReading": "gpuprobe.ui.energy",
    "Finding": "gpuprobe.ui.findings",
    "Inventory": "gpuprobe.ui.inventory",
}

__all__ = [
    "BenchReport",
    "CycleDiagnosis",
    "Diagnosis",
    "DoctorReport",
    "EnergyMeter",
    "EnergyReading",
    "Finding",
    "FitResult",
    "FitTrial",
    "FleetBenchReport",
    "FleetDoctorReport",
    "GpuprobeCollector",
    "GpuprobeError",
    "InputError",
    "Inventory",
    "KernelBreakdown",
    "KernelDiff",
    "LstsqReport",
    "LstsqResult",
    "MetricsServer",
    "MultiRankDiagnosis",
    "OomError",
    "OomReport",
    "PackLevel",
    "PackReport",
    "PrecisionReport",
    "ProfileReport",
    "Recording",
    "RunResult",
    "RunSummary",
    "Sampler",
    "ScaleResult",
    "SgdSettings",
    "Status",
    "Timeline",
    "TopView",
    "TraceComparison",
    "TraceContext",
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
    if name in _VIEWS:
        importlib.import_module(_VIEWS[name])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
