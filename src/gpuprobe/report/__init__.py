"""Show results: charts (:mod:`~gpuprobe.report.plots`, matplotlib) and self-contained HTML
(:mod:`~gpuprobe.report.html`)."""

from __future__ import annotations

__all__: list[str] = []
