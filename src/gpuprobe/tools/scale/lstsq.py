"""``gpuprobe.lstsq``: exact data-parallel least squares on Dask, and E6's approximation beside it.

Methods (``A`` is m × n, split into row blocks ``Aᵢ``; every block is reduced on the worker that
holds it, and one tree reduction of fan-in :data:`REDUCE_FAN_IN` combines the pieces):

- ``normal``: each block gives ``AᵢᵀAᵢ`` (a BLAS syrk) and ``Aᵢᵀbᵢ`` in float64; the sums are
  factored by Cholesky on the client and the solution refined with passes that compute
  ``r = b − Ax`` and ``Aᵀr`` blockwise (each pass also gives ‖r‖). When the condition estimate
  makes the normal equations unsafe (:data:`NORMAL_MAX_KAPPA2_EPS`) or Cholesky fails, the solve
  switches to ``tsqr`` and says so in a Finding.
- ``tsqr``: each block gives the R factor of ``[Aᵢ bᵢ]`` (no Q is formed); stacked R factors are
  factored again up the tree. The last row and column of the final R hold ``Qᵀb`` and the residual
  norm, so no further pass is needed. The SVD of the n × n R gives κ(A) without squaring it, the
  rank, and, for a rank-deficient A, the minimum-norm solution (with a
  :class:`RankDeficiencyWarning`).
- ``local-sgd``: E6 (``docs/experiments.md#e6``): the rows in shards, SGD on a sample of each shard,
  the models averaged every epoch. Kept as the baseline and reported as an approximation, with its
  distance from the exact solution (computed by ``auto`` on the same cluster, untimed).
- ``auto``: ``normal``, with its switch to ``tsqr`` reported as information rather than a warning.

The work is split in three: the block kernels that run on the workers
(:mod:`gpuprobe.tools.scale.kernels`), the solvers that drive them (:mod:`gpuprobe.tools.scale.solvers`),
and here the entry point and the report's data; its findings are the rules of
:mod:`gpuprobe.tools.scale.rules`. How a report reads (text, HTML) is
:mod:`gpuprobe.tools.scale.show.lstsq`.

Times in this module are seconds.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from gpuprobe.core import render
from gpuprobe.core.errors import GpuprobeError, InputError, UsageError
from gpuprobe.core.findings import Finding
from gpuprobe.core.records import Record
from gpuprobe.core.rules import apply_rules
from gpuprobe.core.units import MIB, gib
from gpuprobe.platform.cluster import CONNECT_TIMEOUT_S
from gpuprobe.tools.scale import device
from gpuprobe.tools.scale.engine import (
    EngineInfo,
    cluster_reason,
    gpu_memory_bytes,
    in_process_info,
    on_gpu_input,
    open_engine,
    release_memory,
    require_dask,
    workers_cpu_seconds,
)
from gpuprobe.tools.scale.kernels import _aligned, _host, _residual_block, _sum_parts
from gpuprobe.tools.scale.solvers import (
    EPS64,
    EXTENDED_AVAILABLE,
    EXTENDED_REFINE_ERROR,
    NORMAL_MAX_KAPPA2_EPS,
    PASS_TIMEOUT_S,
    RANK_RTOL_FACTOR,
    REDUCE_FAN_IN,
    REFINE_CHEAP_ELEMENTS,
    REFINE_MAX_KAPPA2_EPS,
    REFINE_MAX_STEPS,
    REFINE_RTOL,
    RankDeficiencyWarning,
    SgdSettings,
    _local_sgd,
    _LocalSession,
    _normal,
    _Outcome,
    _Session,
    _split_times,
    _tsqr,
    _Unsafe,
)
from gpuprobe.tools.scale.sources import Problem, as_dask_problem, is_path, local_problem

__all__ = [
    "ENGINES",
    "EPS64",
    "EXTENDED_AVAILABLE",
    "EXTENDED_REFINE_ERROR",
    "LOCAL_BLOCK_BYTES",
    "LOCAL_FILE_MEMORY_FRACTION",
    "METHODS",
    "NORMAL_MAX_KAPPA2_EPS",
    "PASS_TIMEOUT_S",
    "RANK_RTOL_FACTOR",
    "REDUCE_FAN_IN",
    "REFERENCE_MEMORY_FRACTION",
    "REFINE_CHEAP_ELEMENTS",
    "REFINE_MAX_KAPPA2_EPS",
    "REFINE_MAX_STEPS",
    "REFINE_RTOL",
    "LstsqReport",
    "LstsqResult",
    "RankDeficiencyWarning",
    "SgdSettings",
    "lstsq",
]

METHODS = ("auto", "normal", "tsqr", "local-sgd")
ENGINES = ("auto", "in-process", "dask")

# Rows per block for in-process solves: large blocks keep BLAS efficient and the per-block
# n × n work small; a block is the most this process copies at once (float64 conversion, [Aᵢ bᵢ]).
LOCAL_BLOCK_BYTES = 256 * MIB
# A .npy file is solved in this process when it is at most this fraction of the memory available
# now (its blocks are read through the page cache); larger files go to a Dask cluster.
LOCAL_FILE_MEMORY_FRACTION = 0.5
# numpy.linalg.lstsq as a reference needs A gathered plus gelsd's copy: run it only when that fits
# in this fraction of the memory available now.
REFERENCE_MEMORY_FRACTION = 0.5


# -- the report (how it reads: gpuprobe.tools.scale.show.lstsq) ----------------------------------------------


@dataclass(frozen=True, repr=False)
class LstsqReport(Record):
    """How a least-squares solve went: method, accuracy, condition, time and where it ran.

    ``compute_s`` is the busiest worker's task time plus the client's n × n work;
    ``communication_s`` is the rest of ``wall_s``: moving blocks and partial results, waiting in the
    reduction, scheduling and serialization (``transfer_s``, measured, is the part that moved data
    between workers)."""

    method: str  # the method that produced x
    requested: str  # the method asked for
    exact: bool  # False for local-sgd
    rows: int
    cols: int
    row_blocks: int
    col_blocks: int
    source: str  # numpy, cupy, torch, dask, npy, zarr, parquet
    residual_norm: float  # ‖b − Ax‖₂
    cond_estimate: float | None  # κ₂(A)
    cond_source: str  # "eigvalsh(AᵀA)" (normal) or "svd(R)" (tsqr)
    rank: int | None
    wall_s: float
    compute_s: float
    communication_s: float
    transfer_s: float
    communication_share: float  # communication_s / wall_s
    passes: int  # reads of A
    refinement_steps: int
    workers_used: int
    engine: EngineInfo
    setup_s: float = 0.0  # part of wall_s: starting a cluster, reading or sending the input
    reference: str | None = None  # "numpy.linalg.lstsq" or "given"
    error_vs_reference: float | None = None  # ‖x − x_ref‖ / ‖x_ref‖
    reference_residual_norm: float | None = None
    reference_s: float | None = None
    exact_residual_norm: float | None = None  # local-sgd: the exact solution's residual
    distance_from_exact: float | None = None  # local-sgd: ‖x − x_exact‖ / ‖x_exact‖
    findings: tuple[Finding, ...] = ()
    # CPU the workers' processes used during wall_s, in cores per worker (1.0: a full core each;
    # less when they wait, or when other processes take the cores)
    cpu_per_worker: float | None = None
    engine_reason: str = ""  # why this engine: in-process, or a Dask cluster
    solve_s: float = 0.0  # wall_s less setup_s: the passes over A and the n × n work
    extended_passes: int = 0  # refinement passes made in extended precision

    def summary(self) -> list[tuple[str, str]]:
        """(label, value) rows for people (:func:`gpuprobe.tools.scale.show.lstsq.lstsq_summary`)."""
        return render.summary(self)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)


class LstsqResult(NamedTuple):
    """``x, report = gpuprobe.lstsq(A, b)``: the solution (NumPy float64) and its report."""

    x: np.ndarray
    report: LstsqReport

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)


# -- the entry point -------------------------------------------------------------------------------


def _held_by_workers(client: Any, problem: Problem, workers: Sequence[str] | None) -> Problem:
    """In-memory input on a cluster of other processes: send the blocks once, before the solve,
    instead of in the graph of every pass. In-process workers share the arrays as they are."""
    if problem.source not in ("numpy", "cupy", "torch"):
        return problem
    if str(client.scheduler.address).startswith("inproc://"):
        return problem
    a_in = problem.A
    if problem.source != "cupy":
        # blocks unpickled on a worker can sit at addresses BLAS handles 3-4× slower (issue 17):
        # the worker keeps a copy at an aligned address instead
        a_in = a_in.map_blocks(_aligned, dtype=a_in.dtype)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
        a, b = client.persist([a_in, problem.b], workers=list(workers) if workers else None,
                              allow_other_workers=True)  # fmt: skip
    from gpuprobe.tools.scale.waits import wait_for

    wait_for(
        client, [a, b], timeout=PASS_TIMEOUT_S, workers=workers, what="sending A to the workers"
    )
    return Problem(A=a, b=b, source=problem.source, on_gpu=problem.on_gpu)


def _numpy_reference(s: Any) -> tuple[np.ndarray | None, float | None, str]:
    import psutil

    need = 2.5 * s.m * s.n * 8
    avail = psutil.virtual_memory().available
    if need > REFERENCE_MEMORY_FRACTION * avail:
        return (
            None,
            None,
            (
                f"numpy.linalg.lstsq needs about {gib(need, 1)} here, more than "
                f"{REFERENCE_MEMORY_FRACTION:.0%} of the {gib(avail, 1)} free"
            ),
        )
    a, b = s.arrays()
    from gpuprobe.tools.scale.engine import _limit_blas, available_cores

    limiter = _limit_blas(available_cores())
    try:
        t0 = time.perf_counter()
        x_ref = np.linalg.lstsq(a, b, rcond=None)[0]
        took = time.perf_counter() - t0
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    return x_ref, took, ""


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
    max_refine: int = REFINE_MAX_STEPS,
    sgd: SgdSettings | None = None,
    engine: str = "auto",
    timeout: float | None = PASS_TIMEOUT_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> LstsqResult:
    """Solve min ‖b − Ax‖₂ in this process or on a Dask cluster; return ``(x, report)``.

    The engine: in-memory NumPy (or torch CPU) arrays and ``.npy`` files that fit in memory are
    solved in this process (threaded BLAS over row-block views, no cluster, no copy of A). A CuPy
    array or torch CUDA tensor is solved on its GPU in this process, a few cuBLAS products per
    pass over all rows (:mod:`gpuprobe.tools.scale.device`); so is host data with ``devices``
    naming one GPU, copied there once. A Dask cluster is used for dask arrays, several GPUs,
    Zarr/Parquet data or a file larger than memory, ``client``/``scheduler``/``workers``,
    ``local-sgd``, or ``engine="dask"``. The
    report says which ran and why (``engine``, ``engine_reason``); its ``wall_s`` is the whole
    call, ``setup_s`` (starting a cluster, reading or sending the input) shown apart.

    Parameters
    ----------
    A, b
        NumPy, CuPy or torch arrays, dask arrays (any chunks), or paths (``.npy``, Zarr, Parquet):
        with ``b=None`` the file's last column is b; for Parquet ``b`` may name a column.
    method
        ``auto``, ``normal``, ``tsqr`` or ``local-sgd`` (see the module docstring).
    client, scheduler
        An existing cluster. Default: a LocalCluster sized to this machine, closed afterwards.
    devices
        ``"cpu"``, ``"gpu"`` or GPU ids. Default: the GPU that holds the input, if one does.
        One GPU (the input's, the only one, or one id): solved there in this process; several:
        one Dask worker per GPU.
    workers
        Run only on these worker addresses.
    chunk_rows
        Rows per block for in-memory input (a rechunk for dask input).
    reference
        ``"numpy"``: compare with ``numpy.linalg.lstsq`` on the gathered data; or a solution.
    rcond
        Singular values of the column-scaled R below ``rcond × σ_max`` count as zero. Default
        ``n·eps`` (:data:`RANK_RTOL_FACTOR`), which unlike numpy's ``eps·max(m, n)`` does not grow
        with the rows.
    max_refine, sgd
        Most refinement steps; E6's settings for ``local-sgd``.
    engine
        ``auto``, ``in-process`` or ``dask``.
    timeout
        Seconds a cluster pass may take before the solve stops with the workers' state (a paused
        worker, one out of memory) instead of waiting; None waits for ever.
    connect_timeout
        Seconds for ``scheduler`` to answer as a Dask scheduler before a :class:`UsageError`.

    Raises :class:`InputError` for bad input (shapes that disagree, NaN or Inf, an empty A) and
    :class:`UsageError` for a bad argument or a missing Dask.
    """
    if method not in METHODS:
        raise UsageError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if max_refine < 0:
        raise UsageError(f"max_refine={max_refine}: give 0 or more refinement steps")
    if isinstance(reference, str) and reference != "numpy":
        raise UsageError(f"reference={reference!r}: use 'numpy' or an array")
    if engine not in ENGINES:
        raise UsageError(f"engine={engine!r}: use one of {', '.join(ENGINES)}")
    t_start = time.perf_counter()
    opts = _Options(workers, reference, rcond, max_refine, sgd or SgdSettings(), timeout)
    asked = engine == "dask" or client is not None or scheduler is not None or bool(workers)
    on_device = device.route(A, b, method, devices, asked)
    if on_device is not None:
        done = _solve_device(A, b, *on_device, method, opts, chunk_rows, t_start)
        if done is not None:
            return done
    why_cluster = cluster_reason(A, method, client, scheduler, devices, workers, engine)
    if why_cluster is None:
        local = local_problem(A, b, LOCAL_FILE_MEMORY_FRACTION)
        if local is not None:
            a_l, b_l, source, why = local
            return _solve_local(a_l, b_l, source, why, method, opts, chunk_rows, t_start)
        why_cluster = (
            "a dask or GPU array, Zarr or Parquet data, or a .npy file larger than "
            f"{LOCAL_FILE_MEMORY_FRACTION:.0%} of the memory available: solved on a Dask cluster"
        )
    elif on_device is not None:
        why_cluster = (
            f"A does not fit in {device.DEVICE_UPLOAD_FRACTION:.0%} of GPU {on_device[0]}'s free "
            "memory: one Dask worker per GPU, block by block"
        )
    if engine == "in-process":
        raise UsageError(
            f"engine='in-process' cannot solve this here ({why_cluster}); leave engine='auto'"
        )
    require_dask()
    from distributed import KilledWorker

    if (
        devices is None
        and client is None
        and scheduler is None
        and not is_path(A)
        and on_gpu_input(A)
    ):
        devices = "gpu"
    eng = open_engine(
        client=client, scheduler=scheduler, devices=devices, connect_timeout=connect_timeout
    )
    try:
        problem = as_dask_problem(
            A, b, chunk_rows, eng.info.workers, gpu_memory_bytes(eng.info.kind)
        )
        problem = _held_by_workers(eng.client, problem, workers)
        return _solve(
            eng.client,
            eng.info,
            problem,
            method,
            opts,
            time.perf_counter() - t_start,
            why_cluster,
        )
    except KilledWorker as exc:
        release_memory(eng.client)
        raise GpuprobeError(
            f"a Dask worker died repeatedly running {exc.args[0] if exc.args else 'a task'} "
            "(out of memory?): use smaller row blocks (chunk_rows=...) or more memory per worker"
        ) from None
    except BaseException:
        release_memory(eng.client)
        raise
    finally:
        eng.close()


def _solve_local(
    a: Any,
    b: Any,
    source: str,
    why: str,
    method: str,
    opts: _Options,
    chunk_rows: int | None,
    t_start: float,
) -> LstsqResult:
    from gpuprobe.tools.scale.engine import blas_info

    m, n = (int(v) for v in a.shape)
    rows = chunk_rows or max(n + 1, LOCAL_BLOCK_BYTES // (8 * n))
    s = _LocalSession(a, b, min(m, rows), whole=chunk_rows is None)
    blas = blas_info()
    info = in_process_info("cpu", blas["library"], blas["threads"])
    return _solve_here(s, info, source, why, method, opts, t_start)


def _solve_device(
    A: Any,
    b: Any,
    dev: int,
    why: str,
    method: str,
    opts: _Options,
    chunk_rows: int | None,
    t_start: float,
) -> LstsqResult | None:
    """The solve on GPU ``dev`` in this process (:mod:`gpuprobe.tools.scale.device`); None when
    host data does not fit there (the caller goes to Dask workers)."""
    ops = device.make_ops(dev)
    with ops.context():
        opened = device.open_session(A, b, dev, ops, chunk_rows)
        if opened is None:
            return None
        s, info, source = opened
        return _solve_here(s, info, source, why, method, opts, t_start)


def _solve_here(
    s: Any,
    info: EngineInfo,
    source: str,
    why: str,
    method: str,
    opts: _Options,
    t_start: float,
) -> LstsqResult:
    """A solve in this process (on the CPU or on one GPU): every second of it is compute."""
    m, n = s.m, s.n
    unsafe = None
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    setup_s = t0 - t_start
    if method == "tsqr":
        out: _Outcome | _Unsafe = _tsqr(s, opts.rcond, opts.max_refine)
    else:
        out = _normal(s, opts.max_refine)
        if isinstance(out, _Unsafe):
            unsafe = out
            out = _tsqr(s, opts.rcond, opts.max_refine)
    t1 = time.perf_counter()
    cpu = time.process_time() - cpu0
    assert isinstance(out, _Outcome)
    ref, seen = _compare_reference(opts, out, s)
    findings = _judge(requested=method, unsafe=unsafe, deficient=out.deficient, **seen)
    solve_s = t1 - t0
    report = LstsqReport(
        method=out.method,
        requested=method,
        exact=True,
        rows=m,
        cols=n,
        row_blocks=getattr(s, "row_blocks", len(s.starts)),
        col_blocks=1,
        source=source,
        residual_norm=out.residual_norm,
        cond_estimate=out.cond,
        cond_source=out.cond_source,
        rank=out.rank,
        wall_s=t1 - t_start,
        compute_s=solve_s,
        communication_s=0.0,
        transfer_s=0.0,
        communication_share=0.0,
        passes=s.passes,
        refinement_steps=out.refinement_steps,
        workers_used=1,
        engine=info,
        setup_s=setup_s,
        **ref,
        findings=tuple(findings),
        cpu_per_worker=cpu / solve_s if solve_s > 0 else None,
        engine_reason=why,
        solve_s=solve_s,
        extended_passes=out.extended_passes,
    )
    return LstsqResult(out.x, report)


def _judge(**facts: Any) -> list[Finding]:
    """The findings of :data:`~gpuprobe.tools.scale.rules.RULES_LSTSQ` for what a solve saw."""
    from gpuprobe.tools.scale.rules import RULES_LSTSQ, LstsqFacts

    return apply_rules(RULES_LSTSQ, LstsqFacts(**facts))


def _compare_reference(
    opts: _Options, out: _Outcome, s: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report's reference fields against opts.reference (computed untimed), and what the
    comparison found (:class:`~gpuprobe.tools.scale.rules.LstsqFacts`' reference fields)."""
    if opts.reference is None:
        return {}, {}
    ref_s = None
    if isinstance(opts.reference, str):
        from gpuprobe.tools.scale.waits import in_daemon

        x_ref, ref_s, why = in_daemon(_numpy_reference, s)
        ref_name = "numpy.linalg.lstsq"
        if x_ref is None:
            return {"reference": ref_name}, {"reference": ref_name, "reference_skipped": why}
    else:
        x_ref = np.asarray(_host(opts.reference), dtype=np.float64).reshape(-1)
        ref_name = "given"
        if x_ref.shape != out.x.shape:
            raise InputError(f"reference has shape {x_ref.shape}; the solution has {out.x.shape}")
    err = float(np.linalg.norm(out.x - x_ref) / max(np.linalg.norm(x_ref), 1e-300))
    ref_resid = math.sqrt(s.reduce(_residual_block, _sum_parts, x_ref, False)["rr"])
    s.passes -= 1  # the comparison's pass is not the solver's
    seen: dict[str, Any] = {"reference": ref_name}
    if out.method != "local-sgd":
        seen |= {"reference_error": err, "cond": out.cond}
    return {
        "reference": ref_name,
        "error_vs_reference": err,
        "reference_residual_norm": ref_resid,
        "reference_s": ref_s,
    }, seen


@dataclass(frozen=True)
class _Options:
    workers: Sequence[str] | None
    reference: Any
    rcond: float | None
    max_refine: int
    sgd: SgdSettings
    timeout: float | None = PASS_TIMEOUT_S


def _solve(
    client: Any,
    info: EngineInfo,
    problem: Problem,
    method: str,
    opts: _Options,
    setup_s: float,
    why: str = "",
) -> LstsqResult:
    from distributed import get_task_stream

    to_gpu = info.kind == "gpu" and not problem.on_gpu
    s = _Session(client, problem, opts.workers, to_gpu, opts.timeout)
    unsafe = None
    n_workers = len(opts.workers) if opts.workers else info.workers
    cpu0 = workers_cpu_seconds(client, opts.workers)
    t0 = time.perf_counter()
    with get_task_stream(client) as stream:
        if method == "local-sgd":
            out: _Outcome | _Unsafe = _local_sgd(s, opts.sgd, n_workers)
        elif method == "tsqr":
            out = _tsqr(s, opts.rcond, opts.max_refine)
        else:
            out = _normal(s, opts.max_refine)
            if isinstance(out, _Unsafe):
                unsafe = out
                out = _tsqr(s, opts.rcond, opts.max_refine)
    solve = time.perf_counter() - t0
    cpu = workers_cpu_seconds(client, opts.workers) - cpu0
    # a worker restarting (e.g. after a crash) can leave the count at 0 when it was read
    ok = solve > 0 and n_workers > 0 and math.isfinite(cpu)
    cpu_per_worker = cpu / solve / n_workers if ok else None
    assert isinstance(out, _Outcome)
    times = _split_times(list(stream.data), solve, s.dense_s)
    passes = s.passes
    from gpuprobe.tools.scale.engine import paused_workers

    paused = tuple(paused_workers(client))
    sgd = None
    exact_resid = dist = None
    cond, cond_source, rank = out.cond, out.cond_source, out.rank
    if method == "local-sgd":  # the exact solution beside it, untimed
        exact_opts = _Options(
            opts.workers, None, opts.rcond, opts.max_refine, opts.sgd, opts.timeout
        )
        exact_x, exact = _solve(client, info, problem, "auto", exact_opts, 0.0)
        dist = float(np.linalg.norm(out.x - exact_x) / max(np.linalg.norm(exact_x), 1e-300))
        exact_resid = exact.residual_norm
        cond, cond_source, rank = exact.cond_estimate, exact.cond_source, exact.rank
        sgd = (dist, out.residual_norm, exact_resid)
    out_cmp = _Outcome(out.method, out.x, out.residual_norm, cond, "", rank)
    ref, seen = _compare_reference(opts, out_cmp, s)
    findings = _judge(
        requested=method, unsafe=unsafe, deficient=out.deficient, paused=paused, sgd=sgd, **seen
    )
    wall = setup_s + solve
    report = LstsqReport(
        method=out.method,
        requested=method,
        exact=out.method != "local-sgd",
        rows=s.m,
        cols=s.n,
        row_blocks=len(problem.A.chunks[0]),
        col_blocks=len(problem.A.chunks[1]),
        source=problem.source,
        residual_norm=out.residual_norm,
        cond_estimate=cond,
        cond_source=cond_source,
        rank=rank,
        wall_s=wall,
        compute_s=times["compute_s"],
        communication_s=times["communication_s"],
        transfer_s=times["transfer_s"],
        communication_share=times["communication_s"] / wall if wall > 0 else 0.0,
        passes=passes,
        refinement_steps=out.refinement_steps,
        workers_used=int(times["workers_used"]),
        engine=info,
        setup_s=setup_s,
        **ref,
        exact_residual_norm=exact_resid,
        distance_from_exact=dist,
        findings=tuple(findings),
        cpu_per_worker=cpu_per_worker,
        engine_reason=why,
        solve_s=solve,
        extended_passes=out.extended_passes,
    )
    return LstsqResult(out.x, report)
