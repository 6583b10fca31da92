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
- ``local-sgd``: E6 (``references/README.md``): the rows in shards, SGD on a sample of each shard,
  the models averaged every epoch. Kept as the baseline and reported as an approximation, with its
  distance from the exact solution (computed by ``auto`` on the same cluster, untimed).
- ``auto``: ``normal``, with its switch to ``tsqr`` reported as information rather than a warning.

Times in this module are seconds.
"""

from __future__ import annotations

import functools
import html
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from gpuprobe._data import Record
from gpuprobe.errors import GpuprobeError, InputError, UsageError
from gpuprobe.findings import Evidence, Finding, Status
from gpuprobe.parallel.engine import (
    EngineInfo,
    open_engine,
    release_memory,
    require_dask,
    workers_cpu_seconds,
    workers_state,
)
from gpuprobe.parallel.sources import Problem, as_dask_problem, is_path, local_problem

__all__ = [
    "AGREEMENT_KAPPA2_FACTOR",
    "ENGINES",
    "EPS64",
    "EXACT_ERROR_OK",
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
    "expected_error_bound",
    "lstsq",
]

METHODS = ("auto", "normal", "tsqr", "local-sgd")
ENGINES = ("auto", "in-process", "dask")

EPS64 = float(np.finfo(np.float64).eps)  # 2.22e-16, float64 machine epsilon
# κ(AD)²·eps (columns scaled) above which the normal equations are not used: their first solve is
# off by about κ²·eps (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §20.4;
# Golub & Van Loan, Matrix Computations, 4th ed., §5.3.7), and each refinement pass shrinks that
# by κ²·eps again (Higham §20.5), so at 1e-5 the REFINE_MAX_STEPS passes reach float64's limit.
# κ comes from LAPACK's condition estimator, measured at 1-2× the true κ₂ (tests).
NORMAL_MAX_KAPPA2_EPS = 1e-5
# Refinement steps at most after the first solve; research/benchmarks-and-lstsq.md §4 ("fp64 plus
# 1-2 refinement steps"), one more for the extended-precision passes. Each pass costs 4mn flops
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
# Rows per block for in-process solves: large blocks keep BLAS efficient and the per-block
# n × n work small; a block is the most this process copies at once (float64 conversion, [Aᵢ bᵢ]).
LOCAL_BLOCK_BYTES = 256 * 2**20
# A .npy file is solved in this process when it is at most this fraction of the memory available
# now (its blocks are read through the page cache); larger files go to a Dask cluster.
LOCAL_FILE_MEMORY_FRACTION = 0.5
# Seconds a cluster solve waits for one pass before it reports the workers' state and gives up
# (None: no limit). A pass over 3.2 GB takes 5-15 s on this 2-core machine.
PASS_TIMEOUT_S = 600.0
# A refinement update smaller than this × ‖x‖ is at x's rounding level: stop, and keep x (whose
# residual the pass just measured).
REFINE_RTOL = 64 * EPS64
# Partial results combined per reduction task: dask.array reductions' default split_every
# (dask/array/_reductions_generic.py).
REDUCE_FAN_IN = 4
# Relative error against a reference that counts as agreement for a well-conditioned problem
# (the issue's acceptance bound for 400,000 × 1,000).
EXACT_ERROR_OK = 1e-10
# Any backward-stable least-squares solver is off by O(κ·eps + κ²·eps·‖r‖/(‖A‖‖x‖)) (Higham 2002,
# Theorem 20.1); two of them may differ by this factor × κ²·eps and both be right.
AGREEMENT_KAPPA2_FACTOR = 10.0
# numpy.linalg.lstsq as a reference needs A gathered plus gelsd's copy: run it only when that fits
# in this fraction of the memory available now.
REFERENCE_MEMORY_FRACTION = 0.5

# E6's settings (references/data-parallel-lstsq-and-pycuda-notebook.md): 40 epochs of 500 steps on
# 1000 sampled rows per shard, learning rate 1e-3 / n, starting from uniform [0, 1) values.
SGD_EPOCHS = 40
SGD_ITERS_PER_EPOCH = 500
SGD_BATCH_ROWS = 1000
SGD_LR_TIMES_N = 1e-3


class RankDeficiencyWarning(UserWarning):
    """A is rank-deficient: the minimum-norm least-squares solution was returned."""


def expected_error_bound(kappa: float | None) -> float:
    """The relative difference two correct float64 solvers may show: max(1e-10, 10·κ²·eps)."""
    if kappa is None or not math.isfinite(kappa):
        return math.inf
    return max(EXACT_ERROR_OK, AGREEMENT_KAPPA2_FACTOR * kappa * kappa * EPS64)


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


# -- blockwise work (runs on the workers; module-level so it pickles by reference) ----------------


def _xp(a: Any) -> Any:
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _host(a: Any) -> Any:
    return a.get() if hasattr(a, "get") and _xp(a) is not np else a


def _row_block(to_gpu: bool, cols: Sequence[Any]) -> Any:
    """A row block's column chunks joined, in float64, on the GPU when asked."""
    if to_gpu:
        import cupy

        cols = [cupy.asarray(c) for c in cols]
    xp = _xp(cols[0])
    a = cols[0] if len(cols) == 1 else xp.concatenate(cols, axis=1)
    return a.astype(xp.float64, copy=False)


def _vector(to_gpu: bool, b: Any, like: Any) -> Any:
    xp = _xp(like)
    return xp.asarray(b).reshape(-1).astype(xp.float64, copy=False)


def _gram_block(start: int, to_gpu: bool, b: Any, *cols: Any) -> dict[str, Any]:
    """AᵢᵀAᵢ, Aᵢᵀbᵢ, bᵢᵀbᵢ. A NaN or Inf in the block makes diag(AᵢᵀAᵢ) or the rest non-finite,
    so the check costs O(n²), not a pass over the block."""
    a = _row_block(to_gpu, cols)
    v = _vector(to_gpu, b, a)
    with np.errstate(over="ignore", invalid="ignore"):  # detected below, reported as InputError
        g = _host(a.T @ a)  # syrk: numpy recognises a.T @ a
        c = _host(a.T @ v)
        bb = float(v @ v)
    ok = bool(np.isfinite(np.diagonal(g)).all() and np.isfinite(c).all() and math.isfinite(bb))
    return {"G": g, "c": c, "bb": bb, "bad": [] if ok else [(start, start + a.shape[0])]}


def _residual_block(
    start: int, to_gpu: bool, x: np.ndarray, extended: bool, b: Any, *cols: Any
) -> dict[str, Any]:
    """Aᵢᵀrᵢ and ‖rᵢ‖² for rᵢ = bᵢ − Aᵢx; with ``extended``, r and Aᵀr are accumulated in
    ``numpy.longdouble`` (64-bit mantissa on x86; the same as float64 where the platform has no
    wider type, and on GPUs), so the refinement is not limited by float64 rounding of r."""
    a = _row_block(to_gpu, cols)
    v = _vector(to_gpu, b, a)
    if extended and _xp(a) is np:
        al = a.astype(np.longdouble)
        r = v.astype(np.longdouble) - al @ np.asarray(x, dtype=np.longdouble)
        # g stays extended: the blocks' parts cancel when summed (a large residual)
        return {"g": al.T @ r, "rr": float(r @ r), "bad": []}
    r = v - a @ _xp(a).asarray(x)
    return {"g": _host(a.T @ r), "rr": float(r @ r), "bad": []}


def _qr_block(start: int, to_gpu: bool, b: Any, *cols: Any) -> dict[str, Any]:
    """The R factor of [Aᵢ bᵢ] (Householder QR, Q never formed)."""
    a = _row_block(to_gpu, cols)
    xp = _xp(a)
    aug = xp.concatenate([a, _vector(to_gpu, b, a)[:, None]], axis=1)
    ok = bool(xp.isfinite(aug).all())
    r = _host(xp.linalg.qr(aug, mode="r")) if ok else np.zeros((0, aug.shape[1]))
    return {"R": r, "bad": [] if ok else [(start, start + a.shape[0])]}


def _merge_r(*parts: dict[str, Any]) -> dict[str, Any]:
    bad = [p for part in parts for p in part["bad"]]
    stacked = np.vstack([p["R"] for p in parts])
    r = np.linalg.qr(stacked, mode="r") if stacked.shape[0] else stacked
    return {"R": r, "bad": bad}


def _sum_parts(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in parts[0]:
        if key == "bad":
            out[key] = [p for part in parts for p in part["bad"]]
        else:
            total = parts[0][key]
            for part in parts[1:]:
                total = total + part[key]
            out[key] = total
    return out


def _nonfinite_counts(to_gpu: bool, b: Any, *cols: Any) -> dict[str, float]:
    """Only on the error path: what is wrong with a block whose sums came out non-finite."""
    a = _row_block(to_gpu, cols)
    v = _vector(to_gpu, b, a)
    xp = _xp(a)
    finite = a[xp.isfinite(a)]
    return {
        "A_nan": int(xp.isnan(a).sum()),
        "A_inf": int(xp.isinf(a).sum()),
        "b_nan": int(xp.isnan(v).sum()),
        "b_inf": int(xp.isinf(v).sum()),
        "max_abs": float(abs(finite).max()) if finite.size else 0.0,
    }


def _sgd_shard(
    x: np.ndarray,
    seed: int,
    epoch: int,
    shard: int,
    lr: float,
    iters: int,
    batch: int,
    to_gpu: bool,
    ncols: int,
    *arrays: Any,
) -> np.ndarray:
    """One epoch of E6 on one shard: sample ``batch`` rows, ``iters`` gradient steps from ``x``.
    ``arrays`` holds, per row block of the shard, ``b`` then its ``ncols`` column chunks."""
    groups = [arrays[k : k + 1 + ncols] for k in range(0, len(arrays), 1 + ncols)]
    sizes = [int(g[0].shape[0]) for g in groups]
    offsets = np.cumsum([0, *sizes])
    rng = np.random.default_rng([seed, epoch, shard])
    idx = np.sort(rng.choice(int(offsets[-1]), size=batch, replace=True))  # E6: np.random.choice
    rows_a, rows_b = [], []
    for j, g in enumerate(groups):
        sel = idx[(idx >= offsets[j]) & (idx < offsets[j + 1])] - offsets[j]
        if sel.size:
            rows_a.append(_row_block(to_gpu, [c[sel] for c in g[1:]]))
            rows_b.append(_vector(to_gpu, g[0][sel], rows_a[-1]))
    xp = _xp(rows_a[0])
    a, v = xp.concatenate(rows_a), xp.concatenate(rows_b)
    w = xp.asarray(x, dtype=xp.float64)
    for _ in range(iters):
        w = w - lr * (2.0 * (a.T @ (a @ w - v)))
    return np.asarray(_host(w))


def _mean(*xs: np.ndarray) -> np.ndarray:
    return np.mean(np.stack(xs), axis=0)


# -- the client side ---------------------------------------------------------------------------


class _Cholesky:
    """G = LLᵀ; solves with SciPy's triangular solvers when installed, NumPy's solve otherwise."""

    def __init__(self, g: np.ndarray) -> None:
        self.lower = np.linalg.cholesky(g)
        try:
            from scipy.linalg import solve_triangular
        except ImportError:
            solve_triangular = None
        self._tri = solve_triangular

    def solve(self, v: np.ndarray) -> np.ndarray:
        if self._tri is not None:
            y = self._tri(self.lower, v, lower=True, check_finite=False)
            return np.asarray(self._tri(self.lower.T, y, lower=False, check_finite=False))
        return np.linalg.solve(self.lower.T, np.linalg.solve(self.lower, v))


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
            if self.workers:
                fut = self.client.compute(obj, workers=self.workers, allow_other_workers=False)
            else:
                fut = self.client.compute(obj)
        import asyncio

        import distributed

        try:
            with self.client.as_current():  # the client may not be the default one
                distributed.wait(fut, timeout=self.timeout)
        except (TimeoutError, asyncio.TimeoutError):
            self.client.cancel(fut)
            raise GpuprobeError(
                f"a pass over A did not finish in {self.timeout:g} s; the workers: "
                f"{workers_state(self.client)}. A paused worker is over its memory limit: use "
                "smaller row blocks (chunk_rows=...), more workers or more memory per worker"
            ) from None
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
    findings: list[Finding] = field(default_factory=list)
    extended_passes: int = 0


@dataclass
class _Unsafe:
    reason: str
    kappa: float | None


def _kappa_from_gram(g: np.ndarray) -> tuple[float, float]:
    """(κ, σ_max) of A from its Gram matrix AᵀA (κ = inf when AᵀA is not positive definite)."""
    w = np.linalg.eigvalsh(g)
    smax = math.sqrt(max(float(w[-1]), 0.0)) if math.isfinite(w[-1]) else math.inf
    kappa = math.sqrt(w[-1] / w[0]) if w[0] > 0 and math.isfinite(w[-1]) else math.inf
    return kappa, smax


def _column_scale(norms_sq: np.ndarray) -> np.ndarray:
    """D = 1/‖aⱼ‖ (1 for a zero column): the solvers work on A·D, whose columns have unit norm, so
    the condition estimate and the rank decision are not fooled by the columns' units
    (van der Sluis: this D is within √n of the best diagonal scaling)."""
    with np.errstate(divide="ignore"):
        d = 1.0 / np.sqrt(norms_sq)
    d[~np.isfinite(d) | (norms_sq <= 0)] = 1.0
    return d


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
    extended = cheap and EXTENDED_AVAILABLE and not s.on_gpu
    steps = ext = 0
    if resid0 is not None:
        pred = _predicted_error(kappa, resid0, smax, float(np.linalg.norm(z)))
        if (pred <= EXTENDED_REFINE_ERROR and not cheap) or not converges or max_refine == 0:
            return z, resid0, 0, 0
        extended = EXTENDED_AVAILABLE and not s.on_gpu
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
        if not extended and EXTENDED_AVAILABLE and pred > EXTENDED_REFINE_ERROR:
            extended = True
            continue
        if extended or dn * k2eps > REFINE_RTOL * zn or gram_s is None:
            continue
        # the next correction would be below rounding: update ‖r‖ for the new x without a pass,
        # ‖r − ADdz‖² = ‖r‖² − 2dzᵀ(DAᵀr) + dzᵀ(DAᵀAD)dz
        rr_new = rr - 2.0 * float(dz @ g) + float(dz @ (gram_s @ dz))
        return z, math.sqrt(max(rr_new, 0.0)), steps, ext


def _kappa_from_cholesky(lower: np.ndarray, gs: np.ndarray) -> tuple[float, float, str] | None:
    """(κ(AD), a lower bound of σ_max(AD), source) from the Cholesky factor of DAᵀAD with LAPACK's
    condition estimator (xPOCON, O(n²): κ₁(DAᵀAD) ≈ κ₂(AD)², Higham 2002 §15.3); None without
    SciPy."""
    try:
        from scipy.linalg.lapack import dpocon
    except ImportError:
        return None
    anorm = float(np.abs(gs).sum(axis=0).max())
    rcond, info = dpocon(lower, anorm, uplo="L")
    if info != 0 or not rcond > 0:
        return math.inf, math.sqrt(anorm), "dpocon(DAᵀAD)"
    # ‖G‖₂ ≥ ‖G‖₁/√n: a lower bound keeps the predicted error (_predicted_error) on the safe side
    return math.sqrt(1.0 / rcond), math.sqrt(anorm / math.sqrt(len(gs))), "dpocon(DAᵀAD)"


def _normal(s: Any, max_refine: int) -> _Outcome | _Unsafe:
    tot = s.reduce(_gram_block, _sum_parts)
    g, c = tot["G"], tot["c"]

    def prepare() -> tuple[np.ndarray, np.ndarray]:
        d = _column_scale(np.diagonal(g).copy())
        return d, g * d[:, None] * d[None, :]

    d, gs = s.timed(prepare)
    try:
        chol = s.timed(lambda: _Cholesky(gs))
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
    return _Outcome("normal", z * d, resid, kappa, source + ", columns scaled", s.n, steps, [], ext)


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
    findings: list[Finding] = []
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
        findings.append(
            Finding(
                id="lstsq-rank-deficient",
                status=Status.WARN,
                title=f"A has rank {rank} of {n} columns: the minimum-norm solution was "
                "returned; other solutions fit equally well",
                evidence=(
                    Evidence("rank", rank),
                    Evidence("columns", n),
                    Evidence("sigma_cutoff_scaled", float(cut)),
                    Evidence("sigma_min_scaled", float(sv[-1]) if sv.size else None),
                ),
                fix="drop or merge the linearly dependent columns of A, or regularize "
                "(append sqrt(lam)*I rows to A and zeros to b)",
                group="lstsq",
            )
        )
    return _Outcome("tsqr", x, resid, kappa, "svd(RD), columns scaled", rank, steps, findings, ext)


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


# -- the report -----------------------------------------------------------------------------------


def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "n/a" if v is None else format(v, spec)


def _html_table(title: str, rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"


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
        """(label, value) rows for people."""
        e = self.engine
        rows = [
            (
                "method",
                self.method
                + ("" if self.method == self.requested else f" (asked: {self.requested})")
                + ("" if self.exact else " — an approximation"),
            ),
            (
                "problem",
                f"{self.rows} × {self.cols} float64 from {self.source}, "
                f"{self.row_blocks} × {self.col_blocks} blocks",
            ),
            ("residual ‖b−Ax‖", _fmt(self.residual_norm, ".10g")),
            (
                "κ(A) estimate",
                f"{_fmt(self.cond_estimate)}"
                + (f" ({self.cond_source})" if self.cond_source else ""),
            ),
            ("rank", "n/a" if self.rank is None else str(self.rank)),
            (
                "time",
                f"{self.wall_s:.3f} s, the whole call: set-up {self.setup_s:.3f} s, solve "
                f"{self.solve_s:.3f} s"
                if e.cluster == "in-process"
                else f"{self.wall_s:.3f} s, the whole call: set-up {self.setup_s:.3f} s, compute "
                f"{self.compute_s:.3f} s, communication {self.communication_s:.3f} s "
                f"({self.communication_share:.0%}; transfers {self.transfer_s:.3f} s)",
            ),
            (
                "passes over A",
                f"{self.passes} ({self.refinement_steps} refinement step(s)"
                + (
                    f", {self.extended_passes} in extended precision"
                    if self.extended_passes
                    else ""
                )
                + ")",
            ),
            ("engine", f"{e.cluster}: {self.engine_reason}" if self.engine_reason else e.cluster),
        ]
        if e.cluster == "in-process":
            rows.append(
                (
                    "threads",
                    f"{e.blas_threads or 'n/a'} BLAS thread(s) ({e.blas_library or 'BLAS n/a'}); "
                    f"CPU used {_fmt(self.cpu_per_worker, '.2f')} core(s)",
                )
            )
        else:
            rows.append(
                (
                    "workers",
                    f"{self.workers_used} used of {e.workers} {e.kind} worker(s) on "
                    f"{e.cluster} {e.scheduler}; {e.threads_per_worker} task thread(s) and "
                    f"{e.blas_threads or 'n/a'} BLAS thread(s) each; CPU used "
                    f"{_fmt(self.cpu_per_worker, '.2f')} core(s) per worker",
                )
            )
        if self.reference:
            rows.append(
                (
                    f"vs {self.reference}",
                    f"relative error {_fmt(self.error_vs_reference, '.3g')}, residual "
                    f"{_fmt(self.reference_residual_norm, '.10g')}, "
                    f"{_fmt(self.reference_s, '.3f')} s",
                )
            )
        if self.distance_from_exact is not None:
            rows.append(
                (
                    "vs exact",
                    f"off by {self.distance_from_exact:.3g} (relative); exact "
                    f"residual {_fmt(self.exact_residual_norm, '.10g')}",
                )
            )
        for f in self.findings:
            rows.append((f"[{f.status.value}] {f.id}", f.title))
        return rows

    def __repr__(self) -> str:
        err = (
            ""
            if self.error_vs_reference is None
            else f", error {self.error_vs_reference:.2g} vs {self.reference}"
        )
        off = (
            ""
            if self.distance_from_exact is None
            else f", off the exact solution by {self.distance_from_exact:.2g}"
        )
        return (
            f"LstsqReport({self.method}, {self.rows}×{self.cols} "
            + (
                "in process"
                if self.engine.cluster == "in-process"
                else f"on {self.workers_used} worker(s)"
            )
            + f": residual {self.residual_norm:.6g}, κ≈{_fmt(self.cond_estimate, '.3g')}, "
            f"{self.wall_s:.3f} s (compute {self.compute_s:.3f} s, communication "
            f"{self.communication_s:.3f} s){err}{off})"
        )

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.summary())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.summary())

    def _repr_html_(self) -> str:
        return _html_table("gpuprobe.lstsq", self.summary())


class LstsqResult(NamedTuple):
    """``x, report = gpuprobe.lstsq(A, b)``: the solution (NumPy float64) and its report."""

    x: np.ndarray
    report: LstsqReport


# -- the entry point -------------------------------------------------------------------------------


def _on_gpu_input(a: Any) -> bool:
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return True
    if mod == "torch":
        return bool(a.device.type == "cuda")
    meta = getattr(a, "_meta", None)
    return meta is not None and type(meta).__module__.split(".")[0] == "cupy"


# Byte alignment of the blocks a worker keeps: a cache line, as NumPy's own allocations on Linux
# (glibc's malloc gives 16; OpenBLAS's kernels load 64-byte lines).
BLOCK_ALIGN_BYTES = 64


def _aligned(block: np.ndarray) -> np.ndarray:
    """``block`` itself when its data starts on a BLOCK_ALIGN_BYTES boundary and is C-contiguous,
    else an aligned C-contiguous copy (runs on the worker that holds it)."""
    if block.flags.c_contiguous and block.ctypes.data % BLOCK_ALIGN_BYTES == 0:
        return block
    raw = np.empty(block.nbytes + BLOCK_ALIGN_BYTES, dtype=np.uint8)
    off = (-raw.ctypes.data) % BLOCK_ALIGN_BYTES
    out = raw[off : off + block.nbytes].view(block.dtype).reshape(block.shape)
    out[...] = block
    return out


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
        a, b = client.persist([a_in, problem.b], workers=list(workers) if workers else None)
    import distributed

    with client.as_current():
        distributed.wait([a, b])
    return Problem(A=a, b=b, source=problem.source, on_gpu=problem.on_gpu)


def _gpu_memory_bytes(kind: str) -> int | None:
    if kind != "gpu":
        return None
    try:
        import cupy

        return int(cupy.cuda.Device().mem_info[1])
    except Exception:
        return None


def _numpy_reference(s: Any) -> tuple[np.ndarray | None, float | None, str]:
    import psutil

    need = 2.5 * s.m * s.n * 8
    avail = psutil.virtual_memory().available
    if need > REFERENCE_MEMORY_FRACTION * avail:
        return (
            None,
            None,
            (
                f"numpy.linalg.lstsq needs about {need / 2**30:.1f} GiB here, more than "
                f"{REFERENCE_MEMORY_FRACTION:.0%} of the {avail / 2**30:.1f} GiB free"
            ),
        )
    a, b = s.arrays()
    from gpuprobe.parallel.engine import _limit_blas, available_cores

    limiter = _limit_blas(available_cores())
    try:
        t0 = time.perf_counter()
        x_ref = np.linalg.lstsq(a, b, rcond=None)[0]
        took = time.perf_counter() - t0
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    return x_ref, took, ""


def _switch_finding(requested: str, why: _Unsafe) -> Finding:
    kappa = why.kappa
    return Finding(
        id="lstsq-normal-switched-to-tsqr",
        status=Status.WARN if requested == "normal" else Status.INFO,
        title=f"normal equations unsafe here ({why.reason}): solved with tsqr instead",
        evidence=(
            Evidence("cond_estimate", kappa),
            Evidence("kappa2_eps", None if kappa is None else kappa * kappa * EPS64),
            Evidence("threshold_kappa2_eps", NORMAL_MAX_KAPPA2_EPS),
        ),
        fix="method='tsqr' skips the wasted Gram pass; rescaling or dropping nearly dependent "
        "columns of A makes the normal equations safe again",
        group="lstsq",
    )


def _ev(**values: float | int | None) -> tuple[Evidence, ...]:
    """Evidence without units (ratios, counts, norms), in the order given."""
    return tuple(Evidence(k, v) for k, v in values.items())


def _agreement_finding(err: float, kappa: float | None, ref: str) -> Finding:
    bound = expected_error_bound(kappa)
    ok = err <= bound
    return Finding(
        id="lstsq-reference-agreement",
        status=Status.OK if ok else Status.WARN,
        title=f"solution {'agrees' if ok else 'disagrees'} with {ref}: relative error "
        f"{err:.2g} ({'≤' if ok else '>'} {bound:.2g} expected at this κ)",
        evidence=_ev(relative_error=err, expected_bound=bound, cond_estimate=kappa),
        fix="" if ok else "method='tsqr' (stable at any κ); check the reference's rcond",
        group="lstsq",
    )


def _sgd_finding(dist: float, resid: float, exact_resid: float) -> Finding:
    return Finding(
        id="lstsq-local-sgd-approximate",
        status=Status.WARN if dist > EXACT_ERROR_OK else Status.INFO,
        title=f"local-sgd is an approximation: off the exact solution by {dist:.3g} (relative); "
        f"residual {resid:.6g} vs exact {exact_resid:.6g}",
        evidence=_ev(
            distance_from_exact=dist, residual_norm=resid, exact_residual_norm=exact_resid
        ),
        fix="method='normal' gives the exact solution in one pass plus refinement",
        group="lstsq",
    )


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
) -> LstsqResult:
    """Solve min ‖b − Ax‖₂ in this process or on a Dask cluster; return ``(x, report)``.

    The engine: in-memory NumPy (or torch CPU) arrays and ``.npy`` files that fit in memory are
    solved in this process (threaded BLAS over row-block views, no cluster, no copy of A). A Dask
    cluster is used for dask arrays, GPU input or ``devices``, Zarr/Parquet data or a file larger
    than memory, ``client``/``scheduler``/``workers``, ``local-sgd``, or ``engine="dask"``. The
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
        ``"cpu"``, ``"gpu"`` or GPU ids. Default: GPU when the input is on a GPU.
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
    why_cluster = _cluster_reason(A, method, client, scheduler, devices, workers, engine)
    if why_cluster is None:
        local = local_problem(A, b, LOCAL_FILE_MEMORY_FRACTION)
        if local is not None:
            a_l, b_l, source, why = local
            opts = _Options(workers, reference, rcond, max_refine, sgd or SgdSettings())
            return _solve_local(a_l, b_l, source, why, method, opts, chunk_rows, t_start)
        why_cluster = (
            "a dask or GPU array, Zarr or Parquet data, or a .npy file larger than "
            f"{LOCAL_FILE_MEMORY_FRACTION:.0%} of the memory available: solved on a Dask cluster"
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
        and _on_gpu_input(A)
    ):
        devices = "gpu"
    eng = open_engine(client=client, scheduler=scheduler, devices=devices)
    try:
        problem = as_dask_problem(
            A, b, chunk_rows, eng.info.workers, _gpu_memory_bytes(eng.info.kind)
        )
        problem = _held_by_workers(eng.client, problem, workers)
        opts = _Options(workers, reference, rcond, max_refine, sgd or SgdSettings(), timeout)
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


def _cluster_reason(
    A: Any,
    method: str,
    client: Any,
    scheduler: str | None,
    devices: Any,
    workers: Sequence[str] | None,
    engine: str,
) -> str | None:
    """Why this solve goes to a Dask cluster, or None when it may run in this process."""
    if engine == "dask":
        return "engine='dask' asked"
    if client is not None:
        return "client= given: solved on that cluster"
    if scheduler is not None:
        return f"scheduler {scheduler} given: solved on that cluster"
    if workers:
        return "workers= given: solved on those Dask workers"
    if devices is not None and devices != "cpu":
        return f"devices={devices!r}: one Dask worker per GPU"
    if method == "local-sgd":
        return "local-sgd is E6's sharded SGD on Dask workers"
    if type(A).__module__.split(".")[0] == "dask":
        return "A is a dask array: solved on a Dask cluster, block by block"
    if not is_path(A) and _on_gpu_input(A):
        return "A is on a GPU: one Dask worker per GPU"
    return None


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
    from gpuprobe.parallel.engine import blas_info

    m, n = (int(v) for v in a.shape)
    rows = chunk_rows or max(n + 1, LOCAL_BLOCK_BYTES // (8 * n))
    s = _LocalSession(a, b, min(m, rows), whole=chunk_rows is None)
    blas = blas_info()
    info = EngineInfo(
        kind="cpu",
        cluster="in-process",
        scheduler="",
        workers=1,
        threads_per_worker=1,
        blas_threads=blas["threads"],
        blas_library=blas["library"],
        processes=False,
        owned=True,
    )
    findings: list[Finding] = []
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    setup_s = t0 - t_start
    if method == "tsqr":
        out: _Outcome | _Unsafe = _tsqr(s, opts.rcond, opts.max_refine)
    else:
        out = _normal(s, opts.max_refine)
        if isinstance(out, _Unsafe):
            findings.append(_switch_finding(method, out))
            out = _tsqr(s, opts.rcond, opts.max_refine)
    t1 = time.perf_counter()
    cpu = time.process_time() - cpu0
    assert isinstance(out, _Outcome)
    findings.extend(out.findings)
    ref = _compare_reference(opts, out, s, findings)
    solve_s = t1 - t0
    report = LstsqReport(
        method=out.method,
        requested=method,
        exact=True,
        rows=m,
        cols=n,
        row_blocks=len(s.starts),
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


def _compare_reference(
    opts: _Options, out: _Outcome, s: Any, findings: list[Finding]
) -> dict[str, Any]:
    """The report's reference fields against opts.reference (computed untimed)."""
    if opts.reference is None:
        return {}
    ref_s = None
    if isinstance(opts.reference, str):
        x_ref, ref_s, why = _numpy_reference(s)
        ref_name = "numpy.linalg.lstsq"
        if x_ref is None:
            findings.append(
                Finding(
                    id="lstsq-reference-skipped",
                    status=Status.SKIPPED,
                    title=f"no comparison with numpy.linalg.lstsq: {why}",
                    fix="pass reference=<a known solution> instead",
                    group="lstsq",
                )
            )
            return {"reference": ref_name}
    else:
        x_ref = np.asarray(_host(opts.reference), dtype=np.float64).reshape(-1)
        ref_name = "given"
        if x_ref.shape != out.x.shape:
            raise InputError(f"reference has shape {x_ref.shape}; the solution has {out.x.shape}")
    err = float(np.linalg.norm(out.x - x_ref) / max(np.linalg.norm(x_ref), 1e-300))
    ref_resid = math.sqrt(s.reduce(_residual_block, _sum_parts, x_ref, False)["rr"])
    s.passes -= 1  # the comparison's pass is not the solver's
    if out.method != "local-sgd":
        findings.append(_agreement_finding(err, out.cond, ref_name))
    return {
        "reference": ref_name,
        "error_vs_reference": err,
        "reference_residual_norm": ref_resid,
        "reference_s": ref_s,
    }


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
    findings: list[Finding] = []
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
                findings.append(_switch_finding(method, out))
                out = _tsqr(s, opts.rcond, opts.max_refine)
    solve = time.perf_counter() - t0
    cpu = workers_cpu_seconds(client, opts.workers) - cpu0
    # a worker restarting (e.g. after a crash) can leave the count at 0 when it was read
    ok = solve > 0 and n_workers > 0 and math.isfinite(cpu)
    cpu_per_worker = cpu / solve / n_workers if ok else None
    assert isinstance(out, _Outcome)
    times = _split_times(list(stream.data), solve, s.dense_s)
    passes = s.passes
    findings.extend(out.findings)
    findings.extend(_paused_findings(client))

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
        findings.append(_sgd_finding(dist, out.residual_norm, exact_resid))
    out_cmp = _Outcome(out.method, out.x, out.residual_norm, cond, "", rank)
    ref = _compare_reference(opts, out_cmp, s, findings)
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


def _paused_findings(client: Any) -> list[Finding]:
    from gpuprobe.parallel.engine import paused_workers

    bad = paused_workers(client)
    if not bad:
        return []
    w = bad[0]
    mem, limit = w["memory"], w["memory_limit"]
    return [
        Finding(
            id="lstsq-worker-paused",
            status=Status.WARN,
            title=f"{len(bad)} Dask worker(s) not running after the solve ({w['address']} "
            f"{w['status']}): a paused worker is over its memory limit and takes no work",
            evidence=(
                Evidence("workers_not_running", len(bad)),
                Evidence("memory", mem, "B"),
                Evidence("memory_limit", limit, "B"),
            ),
            fix="smaller row blocks (chunk_rows=...), more workers, or a larger "
            "--memory-limit for `dask worker`",
            group="lstsq",
        )
    ]
