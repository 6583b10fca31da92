"""The vocabulary every tool shares: :class:`~gpuprobe.core.findings.Finding` and its status, the errors
with their exit codes, the formatters of units, frozen records and text made safe to show."""

from __future__ import annotations

__all__: list[str] = []
