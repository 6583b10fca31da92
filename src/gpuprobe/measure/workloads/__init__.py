"""The workloads of ``gpuprobe bench``, one module each, every one with
``run(backend, settings) -> Iterator[BenchResult]``:

- ``expression``: E1, ``(sin(x)**2 / cos(x)**2).sum()``, float64 and float32, beside the note's times
- ``scale``: E8, 50 M float32 values times 2, timed right and timed E8's (wrong) way
- ``matmul``: TFLOP/s per dtype and size, and the error against float64 (E4)
- ``transfer``: host↔device (pageable, pinned), device→device; host memcpy on a CPU
- ``launch``: the cost of one tiny operation (queue, launch+wait, CUDA-graph replay)
- ``crossover``: elementwise and matmul over sizes, for finding where the GPU starts to win (E5.1)
- ``sync``: E5.3, a value copied to the host every step vs a log kept on the device
- ``multi``: E5.4, two matmuls on two GPUs at once vs one after the other (two streams on one GPU)

E-codes: docs/experiments.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from gpuprobe.frameworks.base import Backend
from gpuprobe.measure.report import BenchResult
from gpuprobe.measure.workloads._common import Settings

__all__ = ["WORKLOADS", "Settings", "run_workload"]

# In the order they run and print.
WORKLOADS: tuple[str, ...] = (
    "expression",
    "scale",
    "matmul",
    "transfer",
    "launch",
    "crossover",
    "sync",
    "multi",
)


def run_workload(name: str, backend: Backend, settings: Settings) -> Iterator[BenchResult]:
    """The results of workload ``name`` on ``backend``, one at a time as they are measured."""
    module = importlib.import_module(f"gpuprobe.measure.workloads.{name}")
    yield from module.run(backend, settings)
