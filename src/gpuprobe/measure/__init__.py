"""Measure what this machine can do: one timer, results that carry their own statistics.

``gpuprobe.bench(...)`` (:func:`gpuprobe.measure.runner.run_bench`) runs the workloads of
:mod:`gpuprobe.measure.workloads` on every framework and device asked for, each framework in its own
process, and returns a :class:`~gpuprobe.measure.report.BenchReport`.
"""

from __future__ import annotations

from gpuprobe.measure.runner import run_bench as bench

__all__ = ["bench"]
