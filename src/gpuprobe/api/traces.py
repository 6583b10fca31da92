"""Profiler traces: diagnose one, compare two, a job's ranks, kernels, the HTML page. Part of :mod:`gpuprobe.api`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    import os
    from collections.abc import Iterable, Sequence

    from gpuprobe.tools.diagnose.analysis import TraceContext
    from gpuprobe.tools.diagnose.cycles_model import CycleDiagnosis
    from gpuprobe.tools.diagnose.kernel_diff_model import KernelDiff
    from gpuprobe.tools.diagnose.kernels import KernelBreakdown
    from gpuprobe.tools.diagnose.kineto import ProgressCallback
    from gpuprobe.tools.diagnose.model import Diagnosis, TraceComparison
    from gpuprobe.tools.diagnose.ranks_model import MultiRankDiagnosis

if TYPE_CHECKING:
    PathLike = str | os.PathLike[str]

__all__ = [
    "compare",
    "diagnose",
    "diagnose_folder",
    "diagnose_ranks",
    "diagnose_with_context",
    "find_trace_files",
    "kernel_breakdown",
    "kernel_diff",
    "write_diagnosis_html",
    "write_folder_html",
]


def diagnose(
    path: PathLike,
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> Diagnosis:
    """Read a PyTorch profiler (Kineto) trace (``.json`` or ``.json.gz``) and say why the GPU
    waits, step by step, with the evidence and the fix. ``steps``: only these profiled steps, as
    ``"N..M"`` or an inclusive ``(N, M)``. A file that is not a readable trace raises
    :class:`~gpuprobe.core.errors.InputError`."""
    from gpuprobe.tools.diagnose.engine import diagnose as _diagnose

    return _diagnose(path, steps=steps, progress=progress)


def compare(
    before: PathLike | Diagnosis,
    after: PathLike | Diagnosis,
    *,
    steps: str | tuple[int, int] | None = None,
    contexts: tuple[TraceContext, TraceContext] | None = None,
) -> TraceComparison:
    """What changed between two traces (step time and why, shares of GPU time, kernels, findings);
    for two :class:`Diagnosis`, ``contexts`` from :func:`diagnose_with_context` add the shares."""
    from gpuprobe.tools.diagnose.engine import compare as _compare

    return _compare(before, after, steps=steps, contexts=contexts)


def diagnose_ranks(
    paths: PathLike | Sequence[PathLike],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    cluster: Any = None,
    worker_glob: str | None = None,
    connect_timeout: float | None = None,
    rank_timeout: float | None = None,
) -> MultiRankDiagnosis:
    """The ranks of one job (a folder or several files): per-rank busy, communication and
    overlap, the straggler; traces not of one job's ranks are refused. The ranks are read in
    parallel on this machine's cores (``jobs`` processes at most; ``jobs=1``: one at a time
    here), as many at once as the free memory allows, or on the workers of a Dask ``cluster``
    (a ``distributed.Client``, a scheduler address, or ``{"scheduler_file": path}``): ``paths``
    as the workers see it, or ``worker_glob`` expanded on each worker's own disk. Ranks that
    cannot be read are named in ``unread`` and the rest analysed (``partial``)."""
    from gpuprobe.tools.diagnose.ranks import diagnose_ranks as _diagnose_ranks

    return _diagnose_ranks(
        paths, steps=steps, progress=progress, jobs=jobs, cluster=cluster,
        worker_glob=worker_glob, connect_timeout=connect_timeout, rank_timeout=rank_timeout,
    )  # fmt: skip


def diagnose_folder(
    paths: PathLike | Sequence[PathLike],
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    cluster: Any = None,
    worker_glob: str | None = None,
    connect_timeout: float | None = None,
    rank_timeout: float | None = None,
) -> MultiRankDiagnosis | CycleDiagnosis:
    """``gpuprobe diagnose DIR``: a job's ranks or one process's profiler cycles (a mix: error).
    Read as :func:`diagnose_ranks` reads them (``jobs``, ``cluster``, ``worker_glob``)."""
    from gpuprobe.tools.diagnose.cycles import diagnose_folder as _diagnose_folder

    return _diagnose_folder(
        paths, steps=steps, progress=progress, jobs=jobs, cluster=cluster,
        worker_glob=worker_glob, connect_timeout=connect_timeout, rank_timeout=rank_timeout,
    )  # fmt: skip


def diagnose_with_context(
    path: PathLike,
    *,
    steps: str | tuple[int, int] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Diagnosis, TraceContext]:
    """Like :func:`diagnose`, also returning the trace read into memory (its
    :class:`~gpuprobe.tools.diagnose.analysis.TraceContext`), for :func:`kernel_breakdown`,
    :func:`kernel_diff` and :func:`write_diagnosis_html`."""
    from gpuprobe.tools.diagnose.engine import diagnose_with_context as _diagnose

    return _diagnose(path, steps=steps, progress=progress)


def kernel_breakdown(
    ctx: TraceContext, *, top: int = 10, rank: int | None = None, launches: bool = True
) -> KernelBreakdown:
    """GPU time by kernel family, the ``top`` kernels and the launch statistics of a trace's
    selected steps (``ctx`` from :func:`diagnose_with_context`); microseconds."""
    from gpuprobe.tools.diagnose.kernels import kernel_breakdown as _breakdown

    return _breakdown(ctx, top=top, rank=rank, launches=launches)


def kernel_diff(ctx_before: TraceContext, ctx_after: TraceContext, *, rows: int = 50) -> KernelDiff:
    """Which kernels appeared, went, got faster or slower between two traces (each from
    :func:`diagnose_with_context`); the ``rows`` largest changes are kept."""
    from gpuprobe.tools.diagnose.kernel_diff import compare_kernels

    return compare_kernels(ctx_before, ctx_after, rows=rows)


def write_diagnosis_html(
    path: str | os.PathLike[str], d: Diagnosis, ctx: TraceContext, step: int | None = None
) -> str:
    """Write the page of diagnosis ``d`` to ``path`` with the timeline of one ``step`` of its
    trace ``ctx`` (default: the median-length step); returns the path."""
    import os

    from gpuprobe.tools.diagnose.show.html import write_html

    return write_html(os.fspath(path), d, ctx, step)


def write_folder_html(
    path: str | os.PathLike[str],
    result: MultiRankDiagnosis | CycleDiagnosis,
    *,
    steps: str | tuple[int, int] | None = None,
    step: int | None = None,
) -> str:
    """Write the page of a folder's diagnosis (from :func:`diagnose_folder`) to ``path``: its
    findings and table, with the timelines of the straggler and the median rank (of a job's
    ranks) or of the cycle diagnosed in full (of one process's cycles), read again with the
    same ``steps``; ``step``: the step number to draw (default: the median-length step)."""
    from gpuprobe.tools.diagnose.drawn import traces_to_draw
    from gpuprobe.tools.diagnose.show.pages import write_folder_html as _write

    return _write(path, result, traces_to_draw(result, steps=steps), step)


def find_trace_files(
    paths: PathLike | Iterable[PathLike], skipped: list[tuple[str, str]] | None = None
) -> list[str]:
    """A folder's trace files (``*.json``, ``*.json.gz``, sorted), or the files given; a
    folder's entries that cannot be read as files (a FIFO, a dangling link, no permission) are
    left out and added to ``skipped`` as (path, why)."""
    from gpuprobe.tools.diagnose.ranks import find_trace_files as _find

    return _find(paths, skipped)
