"""Show results: the terminal (:mod:`~gpuprobe.report.terminal`, rich), notebooks
(:mod:`~gpuprobe.report.notebook`, HTML tables), charts (:mod:`~gpuprobe.report.plots`, matplotlib)
and self-contained HTML reports (:mod:`~gpuprobe.report.html`)."""

from __future__ import annotations

__all__: list[str] = []
