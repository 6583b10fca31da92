"""The worker-count sweep behind ``gpuprobe scale lstsq``: E6 (``docs/experiments.md#e6``) done
right.

One cluster with the most workers asked for; for each worker count ``w`` the data is held by the
first ``w`` workers and every method runs on those alone, so each worker is the same size (one task
thread and ``cores / max(workers)`` BLAS threads) at every count. For each method and count: time,
speedup and parallel efficiency against the fewest workers, communication share, residual, and the
error against ``numpy.linalg.lstsq`` run on the gathered data with all cores. Optionally the same
chunks through ``dask.array.linalg.lstsq``.

Synthetic problems are made on the workers, block by block from a seed (untimed, held in memory);
``--input`` files are read lazily, once per worker count.

This module runs the sweep and judges it (findings); how the result reads (text, HTML) is
:mod:`gpuprobe.tools.scale.show.lstsq` and its charts are :mod:`gpuprobe.tools.scale.show.plots`.

Times in this module are seconds.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError, UsageError, bad_argument
from gpuprobe.core.findings import Finding
from gpuprobe.core.rules import apply_rules
from gpuprobe.core.units import gib
from gpuprobe.platform.cluster import CONNECT_TIMEOUT_S
from gpuprobe.tools.scale.engine import (
    Engine,
    _limit_blas,
    available_cores,
    blas_info,
    open_engine,
    require_dask,
)
from gpuprobe.tools.scale.kernels import _orthogonal, _synthetic_block
from gpuprobe.tools.scale.lstsq import (
    METHODS,
    REFERENCE_MEMORY_FRACTION,
    RankDeficiencyWarning,
    SgdSettings,
    lstsq,
)
from gpuprobe.tools.scale.model import Baseline, ScaleResult, ScaleRow
from gpuprobe.tools.scale.rules import RULES_SWEEP, SweepFacts
from gpuprobe.tools.scale.solvers import PASS_TIMEOUT_S
from gpuprobe.tools.scale.sources import default_chunk_rows, read_problem
from gpuprobe.tools.scale.waits import in_daemon, wait_for

__all__ = [
    "PROBLEMS",
    "scale_lstsq",
    "synthetic_problem",
]

# Synthetic problems: "gaussian" (standard normal A, κ set by --cond through a fixed orthogonal
# V and geometric singular values), "uniform" (E6's numpy.random.rand data).
PROBLEMS = ("gaussian", "uniform")


# -- synthetic problems, made on the workers -----------------------------------------------------


def synthetic_problem(
    rows: int,
    cols: int,
    kind: str = "gaussian",
    cond: float = 1.0,
    seed: int = 0,
    chunk_rows: int | None = None,
    workers: int = 1,
    tag: int = 0,
) -> tuple[Any, Any]:
    """``(A, b)`` as lazy dask arrays made block by block from ``seed`` (the same numbers on any
    cluster). ``gaussian``: κ(A) ≈ ``cond`` (times the ≈1 of a tall Gaussian); ``uniform``: E6's
    data, ``A`` and ``b`` uniform on [0, 1). ``tag`` changes the graph's keys, not the numbers (a
    fresh copy to place on other workers)."""
    import dask
    import dask.array as da

    if kind not in PROBLEMS:
        raise UsageError(f"problem {kind!r}: use one of {', '.join(PROBLEMS)}")
    for name, value in (("rows", rows), ("cols", cols)):
        if value < 1:
            raise bad_argument(name, value, "give at least 1")
    if cond < 1:
        raise bad_argument("cond", cond, "a condition number is at least 1")
    step = chunk_rows or default_chunk_rows(rows, cols, 8, workers)
    v = (
        dask.delayed(_orthogonal, pure=True)(cols, seed)
        if kind == "gaussian" and cond > 1
        else None
    )
    a_parts, b_parts = [], []
    for i, start in enumerate(range(0, rows, step)):
        r = min(step, rows - start)
        blk = dask.delayed(_synthetic_block, pure=True, nout=2)(
            i, r, cols, kind, cond, seed, v, tag
        )
        a_parts.append(da.from_delayed(blk[0], (r, cols), np.float64))
        b_parts.append(da.from_delayed(blk[1], (r,), np.float64))
    return da.concatenate(a_parts), da.concatenate(b_parts)


# -- the sweep ---------------------------------------------------------------------------------


def _numpy_baseline(
    a: Any, b: Any, client: Any, repeats: int = 1
) -> tuple[Baseline, np.ndarray | None]:
    import psutil

    need = 2.5 * a.shape[0] * a.shape[1] * 8
    avail = psutil.virtual_memory().available
    if need > REFERENCE_MEMORY_FRACTION * avail:
        note = (
            f"needs about {gib(need, 1)}, more than "
            f"{REFERENCE_MEMORY_FRACTION:.0%} of the {gib(avail, 1)} free"
        )
        return Baseline("numpy.linalg.lstsq", None, note=note), None
    futures = client.compute([a, b])
    wait_for(client, futures, timeout=PASS_TIMEOUT_S, what="gathering A for numpy")
    a_np, b_np = client.gather(futures)
    a_np = np.asarray(a_np, dtype=np.float64)
    b_np = np.asarray(b_np, dtype=np.float64)
    bad_a, bad_b = int((~np.isfinite(a_np)).sum()), int((~np.isfinite(b_np)).sum())
    if bad_a or bad_b:  # LAPACK would fail on them with its own message
        rows = np.flatnonzero(~np.isfinite(a_np).all(axis=1) | ~np.isfinite(b_np))
        raise InputError(
            f"A has {bad_a} and b has {bad_b} NaN or Inf value(s), first in row {int(rows[0])}; "
            "drop or fill them before solving"
        )
    # numpy at its best here: every core, and one thread (on a busy machine a multithreaded
    # gelsd can be several times slower than a single thread), each the best of `repeats` runs
    by_threads: dict[str, float] = {}
    for threads in sorted({available_cores(), 1}, reverse=True):
        limiter = _limit_blas(threads)
        try:
            took = math.inf
            for _ in range(repeats):
                t0 = time.perf_counter()
                x = np.linalg.lstsq(a_np, b_np, rcond=None)[0]
                took = min(took, time.perf_counter() - t0)
            by_threads[str(blas_info()["threads"] or threads)] = took
        finally:
            if limiter is not None:
                limiter.restore_original_limits()
    best = min(by_threads, key=lambda k: by_threads[k])
    resid = float(np.linalg.norm(b_np - a_np @ x))
    del a_np
    base = Baseline(
        "numpy.linalg.lstsq",
        by_threads[best],
        None,
        int(best),
        resid,
        None,
        seconds_by_threads=by_threads,
    )
    return base, x


def _dask_baseline(
    a: Any, b: Any, client: Any, subset: list[str], x_ref: np.ndarray | None
) -> Baseline:
    import dask.array as da

    name = "dask.array.linalg.lstsq"
    if a.numblocks[1] != 1:
        return Baseline(
            name, None, note=f"needs a single column of chunks; this input has {a.numblocks[1]}"
        )
    try:
        x, *_ = da.linalg.lstsq(a, b)
        t0 = time.perf_counter()
        fut = client.compute(x, workers=subset, allow_other_workers=True)
        wait_for(client, fut, timeout=PASS_TIMEOUT_S, workers=subset, what=name)
        x_np = np.asarray(fut.result())
        took = time.perf_counter() - t0
    except ImportError as exc:
        return Baseline(name, None, note=f"needs {exc.name or 'scipy'}: pip install scipy")
    except ValueError as exc:
        return Baseline(name, None, note=f"refused these chunks: {exc}")
    fut = client.compute(da.linalg.norm(b - a @ x_np))
    wait_for(client, fut, timeout=PASS_TIMEOUT_S, what=f"{name}'s residual")
    resid = float(fut.result())
    err = None if x_ref is None else float(np.linalg.norm(x_np - x_ref) / np.linalg.norm(x_ref))
    return Baseline(name, took, len(subset), None, resid, err)


def _parse_sizes(workers: Sequence[int]) -> list[int]:
    sizes = sorted({int(w) for w in workers})
    if not sizes or sizes[0] < 1:
        shown = ",".join(map(str, workers))
        raise bad_argument("workers", tuple(workers), "give worker counts ≥ 1", shown=shown)
    return sizes


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
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> ScaleResult:
    """Run every method on every worker count; see the module docstring. ``connect_timeout``:
    seconds for ``scheduler`` to answer as a Dask scheduler (else a :class:`UsageError`)."""
    require_dask()
    sizes = _parse_sizes(workers)
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        why = f"use one or more of {', '.join(METHODS)}"
        raise bad_argument("methods", tuple(methods), why, flag="--method", shown=",".join(methods))
    if repeats < 1:
        raise bad_argument("repeats", repeats, "run each at least once")
    say = progress or (lambda _msg: None)
    cores = available_cores()
    per_worker = max(1, cores // sizes[-1])
    # The problem first (lazy dask arrays, no cluster needed): a bad input is its one line at
    # once, before any worker starts (and no worker is left to complain while it is torn down).
    if input is not None:
        a, b = read_problem(input, target, chunk_rows, sizes[-1])
        label = str(input)
    else:
        a, b = synthetic_problem(rows, cols, problem, cond, seed, chunk_rows, sizes[-1])
        label = "uniform (E6's data)" if problem == "uniform" else f"gaussian, κ≈{cond:g}"
    from gpuprobe.tools.scale.sources import as_dask_problem

    prob = as_dask_problem(a, b, chunk_rows, sizes[-1])
    a, b = prob.A, prob.b
    m, n = (int(s) for s in a.shape)
    if scheduler is not None:
        engine: Engine = open_engine(scheduler=scheduler, connect_timeout=connect_timeout)
    else:
        engine = open_engine(
            workers=sizes[-1], threads_per_worker=1, blas_threads=per_worker, processes=processes
        )
    with engine:
        client = engine.client
        addrs = engine.worker_addresses()
        if sizes[-1] > len(addrs):
            why = f"the cluster has only {len(addrs)} worker(s)"
            raise bad_argument("workers", tuple(workers), why, shown=str(sizes[-1]))
        baselines: list[Baseline] = []
        x_ref = None
        if compare_numpy:
            say("numpy.linalg.lstsq on the gathered data")
            base, x_ref = in_daemon(_numpy_baseline, a, b, client, repeats)
            baselines.append(base)
        results: list[ScaleRow] = []
        deficient: Finding | None = None  # the first solve's lstsq-rank-deficient finding
        for w in sizes:
            subset = addrs[:w]
            held = input is None  # synthetic data is made once per count and held; files are read
            if held:  # fresh keys per count, so the blocks are spread over these workers only
                a_w, b_w = synthetic_problem(m, n, problem, cond, seed, chunk_rows, sizes[-1], w)
                # preferred, not pinned: a worker that dies is replaced, not waited for
                a_w, b_w = client.persist([a_w, b_w], workers=subset, allow_other_workers=True)
                wait_for(client, [a_w, b_w], timeout=PASS_TIMEOUT_S, workers=subset,
                         what=f"making the problem on {w} worker(s)")  # fmt: skip
            else:
                a_w, b_w = a, b
            for method in methods:
                best = None
                for rep in range(repeats):
                    say(f"{method} on {w} worker(s), run {rep + 1}/{repeats}")
                    with warnings.catch_warnings():  # it is a finding of the sweep instead
                        warnings.simplefilter("ignore", RankDeficiencyWarning)
                        x, report = lstsq(a_w, b_w, method, client=client, workers=subset, sgd=sgd)
                    deficient = deficient or next(
                        (f for f in report.findings if f.id == "lstsq-rank-deficient"), None
                    )
                    if best is None or report.wall_s < best[1].wall_s:
                        best = (x, report)
                assert best is not None
                results.append(_row(method, w, best[0], best[1], x_ref, baselines))
            if compare_dask and w == sizes[-1]:
                say(f"dask.array.linalg.lstsq on {w} worker(s)")
                baselines.append(_dask_baseline(a_w, b_w, client, subset, x_ref))
            if held:  # the last references: the scheduler releases the blocks (a cancel of
                # persisted keys trips distributed's `assert ts.who_wants`, a logged traceback)
                del a_w, b_w
        blocks = len(a.chunks[0])
        results = _with_speedup(results, sizes[0], blocks)
        info = engine.info
        return ScaleResult(
            rows=m,
            cols=n,
            problem=label,
            row_blocks=blocks,
            chunk_rows=int(max(a.chunks[0])),
            cores=cores,
            cluster=f"{info.cluster} ({'processes' if info.processes else 'threads'}) "
            f"{info.scheduler}"
            if info.owned
            else f"existing {info.scheduler}",
            blas_library=info.blas_library,
            blas_threads_per_worker=info.blas_threads,
            threads_per_worker=info.threads_per_worker,
            repeats=repeats,
            results=tuple(results),
            baselines=tuple(baselines),
            findings=tuple(
                apply_rules(RULES_SWEEP, SweepFacts(results, sizes, cores, blocks, deficient))
            ),
        )


def _row(
    method: str,
    w: int,
    x: np.ndarray,
    rep: Any,
    x_ref: np.ndarray | None,
    baselines: list[Baseline],
) -> ScaleRow:
    err = None if x_ref is None else float(np.linalg.norm(x - x_ref) / np.linalg.norm(x_ref))
    numpy_s = baselines[0].wall_s if baselines and baselines[0].name.startswith("numpy") else None
    return ScaleRow(
        method=rep.method,
        requested=method,
        workers=w,
        wall_s=rep.wall_s,
        compute_s=rep.compute_s,
        communication_s=rep.communication_s,
        communication_share=rep.communication_share,
        speedup=1.0,
        efficiency=1.0,
        residual_norm=rep.residual_norm,
        error_vs_numpy=err,
        times_faster_than_numpy=None if numpy_s is None else numpy_s / rep.wall_s,
        exact=rep.exact,
        passes=rep.passes,
        cond_estimate=rep.cond_estimate,
        cpu_per_worker=rep.cpu_per_worker,
    )


def _with_speedup(rows: list[ScaleRow], fewest: int, blocks: int = 0) -> list[ScaleRow]:
    """Each row's speedup against the fewest workers, and its parallel efficiency against the
    workers that had a row block to work on (``min(workers, blocks)``; ``blocks`` 0: unknown, every
    worker counts): a worker without a block
    adds nothing to spread. None where no count had more such workers than the fewest (one row
    block: every run is one worker's, and "74 % efficiency" would be noise)."""
    base = {r.requested: r.wall_s for r in rows if r.workers == fewest}

    def busy(w: int) -> int:
        return min(w, blocks) if blocks > 0 else w

    spread = any(busy(r.workers) > busy(fewest) for r in rows)
    out = []
    for r in rows:
        sp = base[r.requested] / r.wall_s if r.wall_s > 0 else math.nan
        eff = sp / (busy(r.workers) / busy(fewest)) if spread else None
        out.append(dataclasses.replace(r, speedup=sp, efficiency=eff))
    return out
