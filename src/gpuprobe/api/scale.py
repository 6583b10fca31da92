"""Data-parallel least squares: lstsq and its scaling sweep. Part of :mod:`gpuprobe.api`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from gpuprobe.tools.scale.lstsq import LstsqResult, SgdSettings
    from gpuprobe.tools.scale.model import ScaleResult

__all__ = [
    "available_cores",
    "lstsq",
    "scale_lstsq",
]


def lstsq(
    A: Any,
    b: Any = None,
    method: str = "auto",
    client: Any = None,
    devices: str | Sequence[int] | None = None,
    *,
    scheduler: str | None = None,
    workers: Sequence[str] | None = None,
    chunk_rows: int | None = None,
    reference: Any = None,
    rcond: float | None = None,
    max_refine: int = 3,
    sgd: SgdSettings | None = None,
    engine: str = "auto",
    timeout: float | None = 600.0,
    connect_timeout: float = 10.0,
) -> LstsqResult:
    """Solve min ‖b − Ax‖₂ exactly, in this process or data-parallel on Dask (normal equations or
    TSQR, refined); ``x, report = gpuprobe.lstsq(A, b)``. ``A``/``b``: NumPy, CuPy, torch or dask
    arrays, or paths (``.npy``, Zarr, Parquet); ``connect_timeout``: seconds for ``scheduler`` to
    answer. See :func:`gpuprobe.tools.scale.lstsq.lstsq` for every parameter."""
    from gpuprobe.tools.scale.lstsq import lstsq as _lstsq

    return _lstsq(
        A,
        b,
        method,
        client,
        devices,
        scheduler=scheduler,
        workers=workers,
        chunk_rows=chunk_rows,
        reference=reference,
        rcond=rcond,
        max_refine=max_refine,
        sgd=sgd,
        engine=engine,
        timeout=timeout,
        connect_timeout=connect_timeout,
    )


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one): how many
    local workers :func:`scale_lstsq` can give a core each."""
    from gpuprobe.tools.scale.engine import available_cores as _cores

    return _cores()


def scale_lstsq(
    rows: int = 100_000,
    cols: int = 500,
    *,
    input: str | Path | None = None,
    target: str | None = None,
    workers: Sequence[int] = (1, 2),
    methods: Sequence[str] = ("normal", "tsqr"),
    problem: str = "gaussian",
    cond: float = 1.0,
    seed: int = 0,
    chunk_rows: int | None = None,
    repeats: int = 1,
    scheduler: str | None = None,
    processes: bool = True,
    compare_numpy: bool = True,
    compare_dask: bool = False,
    sgd: SgdSettings | None = None,
    progress: Callable[[str], None] | None = None,
    connect_timeout: float = 10.0,
) -> ScaleResult:
    """How :func:`lstsq` scales: every method on every worker count of a local Dask cluster (or
    ``scheduler``'s), on a generated problem of ``rows`` x ``cols`` or on ``input``, against
    NumPy; the times, speed-ups, accuracy checks and findings. ``connect_timeout``: seconds for
    ``scheduler`` to answer as a Dask scheduler before a :class:`UsageError`."""
    from gpuprobe.tools.scale.sweep import scale_lstsq as _scale

    return _scale(
        rows,
        cols,
        input=input,
        target=target,
        workers=workers,
        methods=methods,
        problem=problem,
        cond=cond,
        seed=seed,
        chunk_rows=chunk_rows,
        repeats=repeats,
        scheduler=scheduler,
        processes=processes,
        compare_numpy=compare_numpy,
        compare_dask=compare_dask,
        sgd=sgd,
        progress=progress,
        connect_timeout=connect_timeout,
    )
