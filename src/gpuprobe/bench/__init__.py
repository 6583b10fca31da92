"""Measure what this machine can do: one timer, results that carry their own statistics.

``gpuprobe.bench(...)`` (:func:`gpuprobe.bench.runner.run_bench`) runs the workloads of
:mod:`gpuprobe.bench.workloads` on every framework and device asked for, each framework in its own
process, and returns a :class:`~gpuprobe.bench.report.BenchReport`.
"""

from __future__ import annotations

from gpuprobe._callable import callable_package
from gpuprobe.bench.runner import run_bench as bench

__all__ = ["bench"]

callable_package(__name__, "bench")
