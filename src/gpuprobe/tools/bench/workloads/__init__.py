"""The workloads of ``gpuprobe bench``, one module each, every one with a
:class:`~gpuprobe.tools.bench.workloads.base.Workload` named ``WORKLOAD`` (its name, title,
``run(backend, settings) -> Iterator[BenchResult]``, peak, rules and charts), listed here in
:data:`WORKLOADS`, the registry the runner, the judge, the table and the charts read:

- ``expression``: E1, ``(sin(x)**2 / cos(x)**2).sum()``, float64 and float32, beside the note's times
- ``scale``: E8, 50 M float32 values times 2, timed right and timed E8's (wrong) way
- ``matmul``: TFLOP/s per dtype and size, and the error against float64 (E4)
- ``transfer``: host↔device (pageable, pinned), device→device; host memcpy on a CPU
- ``launch``: the cost of one tiny operation (queue, launch+wait, CUDA-graph replay)
- ``crossover``: elementwise and matmul over sizes, for finding where the GPU starts to win (E5.1)
- ``sync``: E5.3, a value copied to the host every step vs a log kept on the device
- ``multi``: E5.4, two matmuls on two GPUs at once vs one after the other (two streams on one GPU)

A new workload: a module here with its ``WORKLOAD``, and a line in :data:`WORKLOADS`.
E-codes: docs/experiments.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads import (
    crossover,
    expression,
    launch,
    matmul,
    multi,
    scale,
    sync,
    transfer,
)
from gpuprobe.tools.bench.workloads._common import Settings
from gpuprobe.tools.bench.workloads.base import Workload

__all__ = ["NAMES", "WORKLOADS", "Settings", "Workload", "by_name", "run_workload"]

# In the order they run and print.
WORKLOADS: tuple[Workload, ...] = (
    expression.WORKLOAD,
    scale.WORKLOAD,
    matmul.WORKLOAD,
    transfer.WORKLOAD,
    launch.WORKLOAD,
    crossover.WORKLOAD,
    sync.WORKLOAD,
    multi.WORKLOAD,
)
NAMES: tuple[str, ...] = tuple(w.name for w in WORKLOADS)
_BY_NAME: dict[str, Workload] = {w.name: w for w in WORKLOADS}


def by_name(name: str) -> Workload | None:
    """The workload called ``name`` (None for a name not here, such as one from an older
    history)."""
    return _BY_NAME.get(name)


def run_workload(name: str, backend: Backend, settings: Settings) -> Iterator[BenchResult]:
    """The results of workload ``name`` on ``backend``, one at a time as they are measured."""
    w = by_name(name)
    if w is None:
        raise ValueError(f"unknown workload {name!r}; choose from {', '.join(NAMES)}")
    yield from w.run(backend, settings)
