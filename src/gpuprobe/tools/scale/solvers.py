"""The solvers behind :func:`gpuprobe.tools.scale.lstsq.lstsq`: normal equations with iterative
refinement, TSQR, and E6's local SGD (``docs/experiments.md#e6``) as the baseline.

A solver works on a *session*, one problem in one place: :class:`_Session` builds Dask graphs of
the block kernels (:mod:`gpuprobe.tools.scale.kernels`) over a cluster's row blocks, and
:class:`_LocalSession` runs the same kernels in this process over row-block views of A. Both
reduce a pass's partial results in a tree of fan-in :data:`REDUCE_FAN_IN`, count the passes over
A, refuse non-finite data by its rows, and time the client's n × n work. A solver returns an
:class:`_Outcome` (x, ‖r‖, κ, rank, refinement steps, a rank deficiency), or :class:`_Unsafe` when the
normal equations should not be used here (the caller then runs TSQR).

What each method does, and when ``auto`` switches, is described in
:mod:`gpuprobe.tools.scale.lstsq`. Times in this module are seconds.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.core.records import Record
from gpuprobe.tools.scale.dense import (
    _Cholesky,
    _column_scale,
    _kappa_from_cholesky,
    _kappa_from_gram,
)
from gpuprobe.tools.scale.kernels import (
    _gram_block,
    _host,
    _mean,
    _merge_r,
    _nonfinite_counts,
    _qr_block,
    _residual_block,
    _sgd_shard,
    _sum_parts,
)
from gpuprobe.tools.scale.sources import Problem

__all__ = [
    "EPS64",
    "EXTENDED_AVAILABLE",
    "EXTENDED_REFINE_ERROR",
    "NORMAL_MAX_KAPPA2_EPS",
    "PASS_TIMEOUT_S",
    "RANK_RTOL_FACTOR",
    "REDUCE_FAN_IN",
    "REFINE_CHEAP_ELEMENTS",
    "REFINE_MAX_KAPPA2_EPS",
    "REFINE_MAX_STEPS",
    "REFINE_RTOL",
    "SGD_BATCH_ROWS",
    "SGD_EPOCHS",
    "SGD_ITERS_PER_EPOCH",
    "SGD_LR_TIMES_N",
    "RankDeficiencyWarning",
    "SgdSettings",
    "_Cholesky",
    "_LocalSession",
    "_Outcome",
    "_Session",
    "_Unsafe",
    "_local_sgd",
    "_normal",
    "_split_times",
    "_tsqr",
]

EPS64 = float(np.finfo(np.float64).eps)  # 2.22e-16, float64 machine epsilon
# κ(AD)²·eps (columns scaled) above which the normal equations are not used: their first solve is
# off by about κ²·eps (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §20.4;
# Golub & Van Loan, Matrix Computations, 4th ed., §5.3.7), and each refinement pass shrinks that
# by κ²·eps again (Higham §20.5), so at 1e-5 the REFINE_MAX_STEPS passes reach float64's limit.
# κ comes from LAPACK's condition estimator, measured at 1-2× the true κ₂ (tests).
NORMAL_MAX_KAPPA2_EPS = 1e-5
# Refinement steps at most after the first solve: iterative refinement (r = b - Ax; RᵀR·dx = Aᵀr)
# needs 1-2 steps in fp64 for κ(AᵀA) = κ(A)² (Higham, Accuracy and Stability, ch. 12), one more for the extended-precision passes. Each pass costs 4mn flops
# and one n-vector reduction; a pass that cannot change x is not made (see _refine).
REFINE_MAX_STEPS = 3
# Refinement converges when each step shrinks the error by about κ²·eps (Higham 2002, §20.5);
# above this it is not attempted.
REFINE_MAX_KAPPA2_EPS = 0.1
# Predicted float64 forward error (eps·(κ + κ²‖r‖/(‖A‖‖x‖)), Higham 2002 Thm 20.1) above which the
# refinement passes accumulate r and Aᵀr in extended precision: the bound EXACT_ERROR_OK sets for
# agreement. Measured on NIST StRD (benchmarks/results/lstsq_nist.md): Wampler4/5 gain 3 digits.
EXTENDED_REFINE_ERROR = 1e-10
# numpy.longdouble is wider than float64 here (x86: 80-bit, 64-bit mantissa); where it is not
# (Windows, Apple silicon) extended passes would gain nothing and are not made.
EXTENDED_AVAILABLE = bool(np.finfo(np.longdouble).eps < np.finfo(np.float64).eps)
# Rank: singular values of the column-scaled R (or Gram matrix) below this × n × eps × σ_max count
# as zero. It does not grow with the number of rows, unlike numpy's eps·max(m, n) (LAPACK's
# xGELSD documentation; Golub & Van Loan §5.5.8 use n·eps·‖A‖ for the numerical rank of R).
RANK_RTOL_FACTOR = 1.0
# A with at most this many elements (8 MiB of float64) is "cheap": an extended-precision residual
# pass costs milliseconds (numpy.longdouble has no BLAS: about 10× a float64 pass, measured 2-3 s
# at 10⁷ elements on this loaded machine), so refinement runs until no component of x changes
# (NIST StRD's small coefficients, like Norris's intercept, need that), in extended precision.
REFINE_CHEAP_ELEMENTS = 2**20
# Seconds a cluster solve waits for one pass before it reports the workers' state and gives up
# (None: no limit). A pass over 3.2 GB takes 5-15 s on this 2-core machine.
PASS_TIMEOUT_S = 600.0
# A refinement update smaller than this × ‖x‖ is at x's rounding level: stop, and keep x (whose
# residual the pass just measured).
REFINE_RTOL = 64 * EPS64
# Partial results combined per reduction task: dask.array reductions' default split_every
# (dask/array/_reductions_generic.py).
REDUCE_FAN_IN = 4

# E6's settings (docs/experiments.md#e6): 40 epochs of 500 steps on 1000 sampled rows per shard,
# learning rate 1e-3 / n, starting from uniform [0, 1) values.
SGD_EPOCHS = 40
SGD_ITERS_PER_EPOCH = 500
SGD_BATCH_ROWS = 1000
SGD_LR_TIMES_N = 1e-3


class RankDeficiencyWarning(UserWarning):
    """A is rank-deficient: the minimum-norm least-squares solution was returned."""


@dataclass(frozen=True)
class SgdSettings(Record):
    """E6's local SGD: ``shards`` (default: one per worker used), epochs, steps per epoch, rows
    sampled per shard per epoch, learning rate (default 1e-3 / n) and seed."""

    epochs: int = SGD_EPOCHS
    iters_per_epoch: int = SGD_ITERS_PER_EPOCH
    batch_rows: int = SGD_BATCH_ROWS
    lr: float | None = None
    seed: int = 0
    shards: int | None = None


# -- the client side: sessions (one problem on a cluster, or in this process) and n × n algebra ----


class _Passes:
    """What both sessions share: counting passes over A, refusing non-finite data by the rows of
    its first bad block, and timing the client's n × n work."""

    passes: int
    dense_s: float

    def block_counts(self, start: int) -> dict[str, float]:
        """_nonfinite_counts of the row block starting at ``start``."""
        raise NotImplementedError

    def counted(self, out: dict[str, Any]) -> dict[str, Any]:
        self.passes += 1
        if out["bad"]:
            start, stop = sorted(out["bad"])[0]
            _raise_nonfinite(self.block_counts(start), start, stop, len(out["bad"]))
        return out

    def cholesky(self, g: np.ndarray) -> _Cholesky:
        """G = LLᵀ for the n × n algebra; where A is, when that is faster (a GPU session)."""
        return _Cholesky(g)

    def timed(self, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.dense_s += time.perf_counter() - t0


class _Session(_Passes):
    """One problem on one cluster: builds blockwise graphs, reduces them, counts passes and
    client-side time."""

    warn_level = 4  # _tsqr, _solve, lstsq: a warning points at lstsq's caller

    def __init__(
        self,
        client: Any,
        problem: Problem,
        workers: Sequence[str] | None,
        to_gpu: bool,
        timeout: float | None = PASS_TIMEOUT_S,
    ):
        self.client = client
        self.timeout = timeout
        self.on_gpu = to_gpu or problem.on_gpu
        self.problem = problem
        self.workers = list(workers) if workers else None
        self.to_gpu = to_gpu
        self.m, self.n = (int(s) for s in problem.A.shape)
        self.a_blocks = problem.A.to_delayed()
        self.b_blocks = problem.b.to_delayed()
        sizes = problem.A.chunks[0]
        self.starts = [int(s) for s in np.cumsum([0, *sizes[:-1]])]
        self.passes = 0
        self.dense_s = 0.0

    def blockwise(self, func: Callable[..., Any], *extra: Any) -> list[Any]:
        from dask import delayed

        return [
            delayed(func, pure=True)(
                self.starts[i], self.to_gpu, *extra, self.b_blocks[i], *self.a_blocks[i]
            )
            for i in range(len(self.starts))
        ]

    def compute(self, obj: Any) -> Any:
        with warnings.catch_warnings():
            # in-memory input rides in the graph: free in-process, and sent once (persisted)
            # to other processes before the solve starts
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            if self.workers:  # preferred, not pinned: a worker that dies is replaced
                fut = self.client.compute(obj, workers=self.workers, allow_other_workers=True)
            else:
                fut = self.client.compute(obj)
        from gpuprobe.tools.scale.waits import wait_for

        wait_for(self.client, fut, timeout=self.timeout, workers=self.workers)
        return self.client.gather(fut)

    def reduce(self, func: Callable[..., Any], combine: Callable[..., Any], *extra: Any) -> Any:
        """One pass over the data: ``func`` on every row block, ``combine`` up a tree."""
        from dask import delayed

        items = self.blockwise(func, *extra)
        while len(items) > 1:
            items = [
                delayed(combine, pure=True)(*items[k : k + REDUCE_FAN_IN])
                for k in range(0, len(items), REDUCE_FAN_IN)
            ]
        return self.counted(self.compute(items[0]))

    def block_counts(self, start: int) -> dict[str, float]:
        from dask import delayed

        i = self.starts.index(start)
        return dict(
            self.compute(
                delayed(_nonfinite_counts)(self.to_gpu, self.b_blocks[i], *self.a_blocks[i])
            )
        )

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.compute([self.problem.A, self.problem.b])
        return (
            np.asarray(_host(a), dtype=np.float64),
            np.asarray(_host(b), dtype=np.float64),
        )


class _LocalSession(_Passes):
    """One in-memory (or memory-mapped .npy) problem solved in this process: the same blockwise
    functions as on a cluster, run over row-block views of A (no copy of A: a block is converted
    to float64 or made contiguous only when it is not already), with this process's threaded
    BLAS."""

    warn_level = 4

    def __init__(self, a: Any, b: Any, block_rows: int, whole: bool = True) -> None:
        self.a, self.b = a, b
        self.m, self.n = (int(v) for v in a.shape)
        self.block_rows = max(1, block_rows)
        # A already float64 and C-contiguous: the Gram and float64 residual passes take all of
        # it in one BLAS call, exactly as a hand-written A.T @ A (no copy either way); passes that
        # copy (TSQR's [Aᵢ bᵢ], extended precision, conversions) go block by block
        self.whole = (
            whole
            and isinstance(a, np.ndarray)
            and a.dtype == np.float64
            and a.flags.c_contiguous
            and self.m > self.block_rows
        )
        self.starts = list(range(0, self.m, self.block_rows))
        self.passes = 0
        self.dense_s = 0.0
        self.on_gpu = False

    def block(self, i: int) -> tuple[Any, Any]:
        start = self.starts[i]
        stop = min(self.m, start + self.block_rows)
        a = np.ascontiguousarray(self.a[start:stop], dtype=np.float64)
        return a, np.asarray(self.b[start:stop], dtype=np.float64)

    def reduce(self, func: Callable[..., Any], combine: Callable[..., Any], *extra: Any) -> Any:
        """One pass over A: ``func`` on every row block, ``combine`` in groups of
        :data:`REDUCE_FAN_IN` as they come (at most that many partial results held)."""
        if self.whole and (func is _gram_block or (func is _residual_block and not extra[-1])):
            out = func(0, False, *extra, np.asarray(self.b, dtype=np.float64), self.a)
            if not out["bad"]:
                return self.counted(out)
            # non-finite values: find their rows block by block (raises)
        held: list[Any] = []
        for i, start in enumerate(self.starts):
            a, b = self.block(i)
            held.append(func(start, False, *extra, b, a))
            del a, b
            if len(held) == REDUCE_FAN_IN:
                held = [combine(*held)]
        return self.counted(combine(*held) if len(held) > 1 else held[0])

    def block_counts(self, start: int) -> dict[str, float]:
        a, b = self.block(self.starts.index(start))
        return _nonfinite_counts(False, b, a)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.a, dtype=np.float64), np.asarray(self.b, dtype=np.float64)


def _raise_nonfinite(counts: dict[str, float], start: int, stop: int, nbad: int) -> None:
    more = f" (and {nbad - 1} more row block(s))" if nbad > 1 else ""
    where = f"rows {start}-{stop - 1}{more}"
    if counts["A_nan"] + counts["A_inf"] + counts["b_nan"] + counts["b_inf"]:
        raise InputError(
            f"A has {counts['A_nan']} NaN and {counts['A_inf']} Inf, b has {counts['b_nan']} "
            f"NaN and {counts['b_inf']} Inf in {where}; drop or fill them before solving"
        )
    raise InputError(
        f"values in {where} are too large to square in float64 (max |a| = "
        f"{counts['max_abs']:.3g}); rescale the columns of A and b"
    )


@dataclass
class _Outcome:
    method: str
    x: np.ndarray
    residual_norm: float
    cond: float | None
    cond_source: str
    rank: int | None
    refinement_steps: int = 0
    # (rank, columns, the scaled σ cutoff, the smallest scaled σ) when A is rank-deficient
    deficient: tuple[int, int, float, float | None] | None = None
    extended_passes: int = 0


@dataclass
class _Unsafe:
    reason: str
    kappa: float | None


def _predicted_error(kappa: float, resid: float, smax: float, znorm: float) -> float:
    """The forward error a backward-stable float64 solve may have (Higham 2002, Thm 20.1):
    eps·(κ + κ²·‖r‖/(‖A‖‖x‖)), in the scaled variables."""
    if not math.isfinite(kappa) or smax <= 0 or znorm <= 0:
        return math.inf
    return EPS64 * (kappa + kappa * kappa * resid / (smax * znorm))


def _refine(
    s: Any,
    solve: Callable[[np.ndarray], np.ndarray],
    d: np.ndarray,
    z: np.ndarray,
    kappa: float,
    smax: float,
    max_refine: int,
    gram_s: np.ndarray | None,
    resid0: float | None,
) -> tuple[np.ndarray, float, int, int]:
    """Iterative refinement of x = D·z: each pass reads A once for r = b − Ax and Aᵀr; ``solve``
    applies (DAᵀAD)⁻¹. Returns (z, ‖r‖, steps, extended passes).

    A pass is made only when it can change x: after the first one (the normal equations' own error
    is κ²·eps), another follows only while the next correction, about ‖dz‖·κ²·eps, would be above
    x's rounding level. When the predicted float64 error is above :data:`EXTENDED_REFINE_ERROR`,
    passes accumulate r and Aᵀr in extended precision (:func:`_residual_block`) instead. With
    ``resid0`` (TSQR: the residual is known from R) and a small predicted error, no pass is made.
    ``gram_s`` (DAᵀAD) lets the last residual norm be updated without another pass."""
    k2eps = kappa * kappa * EPS64
    converges = k2eps < REFINE_MAX_KAPPA2_EPS
    # a small A: passes cost milliseconds, so refine (in extended precision where there is one)
    # until no component of x changes
    cheap = s.m * s.n <= REFINE_CHEAP_ELEMENTS
    # a wider float than float64 for r and Aᵀr: numpy.longdouble on a CPU; none on a GPU, whose
    # passes stay float64 (and are not counted as extended)
    wider = EXTENDED_AVAILABLE and not s.on_gpu
    extended = cheap and wider
    steps = ext = 0
    if resid0 is not None:
        pred = _predicted_error(kappa, resid0, smax, float(np.linalg.norm(z)))
        if (pred <= EXTENDED_REFINE_ERROR and not cheap) or not converges or max_refine == 0:
            return z, resid0, 0, 0
        extended = wider
        if not extended:
            return z, resid0, 0, 0
    while True:
        part = s.reduce(_residual_block, _sum_parts, z * d, extended)
        ext += int(extended)
        rr, g = float(part["rr"]), np.asarray(part["g"], dtype=np.float64) * d
        if steps >= max_refine or not converges:
            return z, math.sqrt(max(rr, 0.0)), steps, ext
        dz = s.timed(functools.partial(solve, g))
        zn = float(np.linalg.norm(z))
        dn = float(np.linalg.norm(dz))
        if cheap:
            done = bool(np.all(np.abs(dz) <= REFINE_RTOL * np.abs(z)))
        else:
            done = dn <= REFINE_RTOL * zn
        if done:  # already at x's rounding level: keep x, whose r was measured
            return z, math.sqrt(max(rr, 0.0)), steps, ext
        z = z + dz
        steps += 1
        if cheap:
            continue
        pred = _predicted_error(kappa, math.sqrt(max(rr, 0.0)), smax, zn)
        if not extended and wider and pred > EXTENDED_REFINE_ERROR:
            extended = True
            continue
        if extended or dn * k2eps > REFINE_RTOL * zn or gram_s is None:
            continue
        # the next correction would be below rounding: update ‖r‖ for the new x without a pass,
        # ‖r − ADdz‖² = ‖r‖² − 2dzᵀ(DAᵀr) + dzᵀ(DAᵀAD)dz
        rr_new = rr - 2.0 * float(dz @ g) + float(dz @ (gram_s @ dz))
        return z, math.sqrt(max(rr_new, 0.0)), steps, ext


def _normal(s: Any, max_refine: int) -> _Outcome | _Unsafe:
    tot = s.reduce(_gram_block, _sum_parts)
    g, c = tot["G"], tot["c"]

    def prepare() -> tuple[np.ndarray, np.ndarray]:
        d = _column_scale(np.diagonal(g).copy())
        gs = g * d[:, None]
        gs *= d  # one temporary, not two: this is on the solve's path
        return d, gs

    d, gs = s.timed(prepare)
    try:
        chol = s.timed(lambda: s.cholesky(gs))
    except np.linalg.LinAlgError:
        kappa = s.timed(lambda: _kappa_from_gram(gs)[0])
        return _Unsafe("Cholesky of AᵀA failed (A is rank-deficient or nearly so)", kappa)
    est = s.timed(lambda: _kappa_from_cholesky(chol.lower, gs))
    if est is None:  # no SciPy: the eigenvalues (O(n³), several times a Cholesky)
        kappa, smax = s.timed(lambda: _kappa_from_gram(gs))
        source = "eigvalsh(DAᵀAD)"
    else:
        kappa, smax, source = est
    if kappa * kappa * EPS64 > NORMAL_MAX_KAPPA2_EPS:
        return _Unsafe(
            f"κ(AD) ≈ {kappa:.3g} with columns scaled, so κ²·eps = {kappa * kappa * EPS64:.2g} > "
            f"{NORMAL_MAX_KAPPA2_EPS:g}",
            kappa,
        )
    z = s.timed(lambda: chol.solve(c * d))
    z, resid, steps, ext = _refine(s, chol.solve, d, z, kappa, smax, max_refine, gs, None)
    return _Outcome(
        "normal", z * d, resid, kappa, source + ", columns scaled", s.n, steps, None, ext
    )


def _triangular_solver(r: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """v ↦ (RᵀR)⁻¹v, the semi-normal equations' solve, with R upper triangular."""
    try:
        from scipy.linalg import solve_triangular
    except ImportError:
        return lambda v: np.linalg.solve(r, np.linalg.solve(r.T, v))
    return lambda v: np.asarray(
        solve_triangular(
            r, solve_triangular(r, v, trans="T", check_finite=False), check_finite=False
        )
    )


def _back_substitute(r: np.ndarray, z: np.ndarray) -> np.ndarray:
    try:
        from scipy.linalg import solve_triangular
    except ImportError:
        return np.linalg.solve(r, z)  # LU on a triangular R is backward stable too
    return np.asarray(solve_triangular(r, z, check_finite=False))


def _tsqr(s: Any, rcond: float | None, max_refine: int = REFINE_MAX_STEPS) -> _Outcome:
    r_aug = s.reduce(_qr_block, _merge_r)["R"]
    n = s.n

    def finish() -> tuple[Any, ...]:
        k = min(r_aug.shape[0], n)
        r11, z = r_aug[:k, :n], r_aug[:k, n]
        rho = abs(float(r_aug[n, n])) if r_aug.shape[0] > n else 0.0
        d = _column_scale((r11 * r11).sum(axis=0))  # ‖R eⱼ‖ = ‖A eⱼ‖
        rs = r11 * d
        sv = np.linalg.svd(rs, compute_uv=False)
        tol = RANK_RTOL_FACTOR * n * EPS64 if rcond is None else rcond
        cut = tol * (sv[0] if sv.size else 0.0)
        rank = int((sv > cut).sum())
        kappa = float(sv[0] / sv[-1]) if sv.size == n and sv[-1] > 0 else math.inf
        return r11, z, rho, d, rs, sv, cut, rank, kappa

    r11, z, rho, d, rs, sv, cut, rank, kappa = s.timed(finish)
    deficient: tuple[int, int, float, float | None] | None = None
    steps = ext = 0
    if rank == n:
        w = s.timed(lambda: _back_substitute(rs, z))
        resid = math.hypot(rho, float(np.linalg.norm(z - rs @ w)))
        w, resid, steps, ext = _refine(
            s, _triangular_solver(rs), d, w, kappa, float(sv[0]), max_refine, None, resid
        )
        x = w * d
    else:
        # the rank comes from the scaled R; the solution is numpy's: minimum ‖x‖, from the SVD
        # of R truncated to that rank
        def min_norm() -> np.ndarray:
            u, sv_, vt = np.linalg.svd(r11, full_matrices=False)
            return np.asarray(vt[:rank].T @ ((u[:, :rank].T @ z) / sv_[:rank]))

        x = s.timed(min_norm)
        resid = math.hypot(rho, float(np.linalg.norm(z - r11 @ x)))
        warnings.warn(
            f"A ({s.m} × {n}) has rank {rank} < {n}: returning the minimum-norm solution",
            RankDeficiencyWarning,
            stacklevel=s.warn_level,
        )
        deficient = (rank, n, float(cut), float(sv[-1]) if sv.size else None)
    return _Outcome("tsqr", x, resid, kappa, "svd(RD), columns scaled", rank, steps, deficient, ext)


def _local_sgd(s: _Session, cfg: SgdSettings, n_workers: int) -> _Outcome:
    from dask import delayed

    nblocks = len(s.starts)
    shards = max(1, min(cfg.shards or n_workers, nblocks))
    bounds = np.linspace(0, nblocks, shards + 1).round().astype(int)
    lr = cfg.lr if cfg.lr is not None else SGD_LR_TIMES_N / s.n
    ncols = len(s.a_blocks[0])
    x: Any = np.random.default_rng(cfg.seed).random(s.n)  # E6: np.random.rand(n)
    for epoch in range(cfg.epochs):
        parts = []
        for sh in range(shards):
            arrays = [
                a
                for i in range(bounds[sh], bounds[sh + 1])
                for a in (s.b_blocks[i], *s.a_blocks[i])
            ]
            parts.append(
                delayed(_sgd_shard, pure=True)(
                    x,
                    cfg.seed,
                    epoch,
                    sh,
                    lr,
                    cfg.iters_per_epoch,
                    cfg.batch_rows,
                    s.to_gpu,
                    ncols,
                    *arrays,
                )
            )
        x = delayed(_mean, pure=True)(*parts)
    x = np.asarray(s.compute(x))
    s.passes += 1
    part = s.reduce(_residual_block, _sum_parts, x, False)
    return _Outcome("local-sgd", x, math.sqrt(part["rr"]), None, "", None)


# -- timing from the task stream ----------------------------------------------------------------


def _split_times(records: list[dict[str, Any]], wall: float, dense: float) -> dict[str, float]:
    compute: dict[str, float] = {}
    transfer: dict[str, float] = {}
    for rec in records:
        w = str(rec.get("worker", ""))
        for ss in rec.get("startstops", ()):
            d = float(ss["stop"]) - float(ss["start"])
            if ss.get("action") == "compute":
                compute[w] = compute.get(w, 0.0) + d
            elif ss.get("action") == "transfer":
                transfer[w] = transfer.get(w, 0.0) + d
    busiest = max(compute.values(), default=0.0)
    comp = min(wall, busiest + dense)
    return {
        "compute_s": comp,
        "communication_s": max(0.0, wall - comp),
        "transfer_s": max(transfer.values(), default=0.0),
        "workers_used": float(len(compute)),
    }
