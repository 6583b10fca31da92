"""Measure what this machine can do: one timer, results that carry their own statistics.

``gpuprobe.bench(...)`` (:func:`gpuprobe.tools.bench.runner.run_bench`) runs the workloads of
:mod:`gpuprobe.tools.bench.workloads` on every framework and device asked for, each framework in its own
process, and returns a :class:`~gpuprobe.tools.bench.model.BenchReport`.
"""

from __future__ import annotations

from gpuprobe.tools.bench import show  # registers the views of this tool's results

__all__ = ["show"]
