"""What ``gpuprobe scale lstsq`` produces: a :class:`ScaleRow` per method and worker count, a
:class:`Baseline` per single-process solver, and the :class:`ScaleResult` that holds them with
the findings. Made by :func:`gpuprobe.tools.scale.sweep.scale_lstsq`, judged by
:data:`gpuprobe.tools.scale.rules.RULES_SWEEP`, shown by :mod:`gpuprobe.tools.scale.show`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Finding
from gpuprobe.core.records import Record
from gpuprobe.core.wrap import TEXT_WIDTH

__all__ = ["Baseline", "ScaleResult", "ScaleRow"]


@dataclass(frozen=True)
class ScaleRow(Record):
    """One method on one worker count (the best of the repeats)."""

    method: str  # the method that ran (normal may have switched to tsqr)
    requested: str
    workers: int
    wall_s: float
    compute_s: float
    communication_s: float
    communication_share: float
    speedup: float  # wall at the fewest workers / wall here, same method
    # speedup / (workers with a block / fewest workers with a block); None when no count in the
    # sweep gave more workers a block than the fewest did (one row block: nothing to spread)
    efficiency: float | None
    residual_norm: float
    error_vs_numpy: float | None  # ‖x − x_numpy‖ / ‖x_numpy‖
    times_faster_than_numpy: float | None
    exact: bool
    passes: int
    cond_estimate: float | None
    cpu_per_worker: float | None = None  # cores' worth of CPU each worker got during the run


@dataclass(frozen=True)
class Baseline(Record):
    """A solver to compare with: numpy.linalg.lstsq, or dask.array.linalg.lstsq on the same
    chunks."""

    name: str
    wall_s: float | None
    workers: int | None = None  # dask workers; None for numpy
    threads: int | None = None  # BLAS threads of numpy's fastest run
    residual_norm: float | None = None
    error_vs_numpy: float | None = None
    note: str = ""  # why it did not run, when it did not
    # numpy: best time for each BLAS thread count tried ({"1": s, "2": s}); the fastest is wall_s
    seconds_by_threads: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, repr=False)
class ScaleResult(Record):
    """The sweep: the problem, the cluster, one row per (method, workers), the baselines."""

    rows: int
    cols: int
    problem: str  # "gaussian κ=1", "uniform (E6, docs/experiments.md#e6)", or the input file
    row_blocks: int
    chunk_rows: int
    cores: int
    cluster: str
    blas_library: str | None
    blas_threads_per_worker: int | None
    threads_per_worker: int
    repeats: int
    results: tuple[ScaleRow, ...]
    baselines: tuple[Baseline, ...] = ()
    findings: tuple[Finding, ...] = ()

    def baseline(self, name: str) -> Baseline | None:
        """The baseline called ``name`` (a prefix will do), if it ran."""
        return next((b for b in self.baselines if b.name.startswith(name)), None)

    def row(self, method: str, workers: int) -> ScaleRow | None:
        """The row for ``method`` (as asked) on ``workers`` workers."""
        return next(
            (r for r in self.results if r.requested == method and r.workers == workers), None
        )

    def table(self) -> list[list[str]]:
        """Header and rows for people (:func:`gpuprobe.tools.scale.show.lstsq.scale_table`)."""
        return render.table(self)

    def header(self) -> list[str]:
        """The lines above the table."""
        return render.header(self)

    def __str__(self) -> str:
        return self.text(TEXT_WIDTH)

    def text(self, width: int | None = None) -> str:
        """The header, the table and the findings; with ``width``, the table leaves out its least
        useful columns until it fits (and says which), never cutting a number."""
        return render.text(self, width)

    def __repr__(self) -> str:
        return render.repr_(self)

    def _repr_html_(self) -> str:
        return render.html(self)

    def plot(self, path: str | Path | None = None) -> Any:
        """The speedup and error charts as a matplotlib figure (Jupyter shows it inline); with
        ``path``, written there in the format its suffix names (.png, .svg, .pdf, .jpg) and the
        path returned (:mod:`gpuprobe.tools.scale.show.plots`)."""
        return render.plot(self, path)
