"""Measure what this machine can do: one timer, results that carry their own statistics.

``gpuprobe.bench(...)`` runs the workloads of :mod:`gpuprobe.bench.workloads` on every framework
and device asked for, each framework in its own process, and returns a
:class:`~gpuprobe.bench.report.BenchReport`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from gpuprobe._callable import callable_package

if TYPE_CHECKING:
    from gpuprobe.bench.report import BenchReport

__all__ = ["bench"]


def bench(
    workloads: Iterable[str] | None = None,
    backends: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    quick: bool = False,
    *,
    budget_s: float | None = None,
    rep_limit_s: float | None = None,
    sizes: dict[str, Sequence[int]] | None = None,
    isolate: bool = True,
    save: bool = True,
    compare: bool = False,
    progress: Any = None,
) -> BenchReport:
    """Benchmark this machine.

    ``workloads``: names from ``expression, scale, matmul, transfer, launch, crossover, sync,
    multi`` (all when None). ``backends``: ``numpy, torch, cupy, jax`` (every one usable here when
    None). ``devices``: ``cpu``, ``cuda:N`` or ``cuda`` (all here when None). ``quick``: small
    sizes and short budgets (under a minute on a laptop).

    ``budget_s``: seconds of repetitions per measurement; ``rep_limit_s``: sizes whose one
    repetition would take longer are skipped; ``sizes``: per workload, the sizes to run instead of
    the defaults (``{"matmul": (64, 256)}``; ``crossover-matmul`` for the crossover's matmul).
    ``isolate``: each framework in its own process (the default; False runs in this one).
    ``save``: store the results in the local history; ``compare``: set them against the previous
    run on this machine. ``progress(label, done, total)`` is called as workloads start.
    """
    from gpuprobe.bench.runner import run_bench

    return run_bench(
        workloads,
        backends,
        devices,
        quick,
        budget_s=budget_s,
        rep_limit_s=rep_limit_s,
        sizes=sizes,
        isolate=isolate,
        save=save,
        compare=compare,
        progress=progress,
    )


callable_package(__name__, "bench")
