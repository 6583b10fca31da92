"""Moved: the statistics and :func:`summarize` are in :mod:`gpuprobe.monitor.summary`, the rules
in :mod:`gpuprobe.monitor.rules` (one module per family)."""

from __future__ import annotations

from gpuprobe.monitor.rules.gpu import GPU_BUSY_OK_PERCENT, GPU_BUSY_WARN_PERCENT
from gpuprobe.monitor.summary import GpuStats, HostStats, RunSummary, command_text, summarize

__all__ = [
    "GPU_BUSY_OK_PERCENT",
    "GPU_BUSY_WARN_PERCENT",
    "GpuStats",
    "HostStats",
    "RunSummary",
    "command_text",
    "summarize",
]
