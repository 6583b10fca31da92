"""The block kernels: the functions that run on one row block of A (on a Dask worker, or in this
process over row-block views of A) and the ones that combine their partial results.

Each is a top-level function of this module, so Dask (cloudpickle) ships it to the workers by
reference (``gpuprobe.tools.scale.kernels._gram_block``), not by value. Their names are also the
prefixes of the task keys a Dask dashboard or task stream shows (``_gram_block-…``,
``_qr_block-…``), so they keep them; they are the solvers' interface
(:mod:`gpuprobe.tools.scale.solvers`), not the user's.

A row-block kernel takes ``start`` (the block's first row), ``to_gpu`` (copy it to the GPU first),
any extra arguments, then ``b``'s block and A's column chunks for those rows; it works in float64
(or wider: extended-precision residuals). ``_sgd_shard`` is one epoch of E6's local SGD
(``docs/experiments.md#e6``) on one shard; ``_synthetic_block`` makes one row block of the
``gpuprobe scale lstsq`` sweep's synthetic problems on the worker that will hold it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "BLOCK_ALIGN_BYTES",
    "NOISE",
    "_aligned",
    "_gram_block",
    "_host",
    "_mean",
    "_merge_r",
    "_nonfinite_counts",
    "_orthogonal",
    "_qr_block",
    "_residual_block",
    "_row_block",
    "_sgd_shard",
    "_sum_parts",
    "_synthetic_block",
    "_vector",
    "_xp",
]

# Byte alignment of the blocks a worker keeps: a cache line, as NumPy's own allocations on Linux
# (glibc's malloc gives 16; OpenBLAS's kernels load 64-byte lines).
BLOCK_ALIGN_BYTES = 64
# Standard deviation of the noise added to b = A·x_true in the sweep's "gaussian" problems.
NOISE = 0.1


def _xp(a: Any) -> Any:
    """The array module of ``a``: CuPy for a CuPy array, NumPy otherwise."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _host(a: Any) -> Any:
    """``a`` in host memory (a CuPy array copied back; anything else as it is)."""
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
    """A block of b as a flat float64 vector, on the same device as ``like``."""
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
    """Stacked R factors factored again: the R of the rows they came from (a TSQR tree step)."""
    bad = [p for part in parts for p in part["bad"]]
    stacked = np.vstack([p["R"] for p in parts])
    r = np.linalg.qr(stacked, mode="r") if stacked.shape[0] else stacked
    return {"R": r, "bad": bad}


def _sum_parts(*parts: dict[str, Any]) -> dict[str, Any]:
    """Partial results added key by key; the bad row ranges are collected."""
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
    """The shards' models averaged (E6's step at the end of every epoch)."""
    return np.mean(np.stack(xs), axis=0)


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


def _orthogonal(n: int, seed: int) -> np.ndarray:
    """A fixed random n × n orthogonal matrix from ``seed`` (the V of a synthetic A = U·S·Vᵀ)."""
    q, r = np.linalg.qr(np.random.default_rng([seed, 1]).standard_normal((n, n)))
    return q * np.sign(np.diagonal(r))


def _synthetic_block(
    i: int, rows: int, n: int, kind: str, cond: float, seed: int, v: np.ndarray | None, tag: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row block ``i`` (``rows`` × ``n``) of a synthetic problem and its b, the same numbers for
    the same ``seed`` on any worker; ``tag`` only changes the task's key."""
    rng = np.random.default_rng([seed, 2, i])
    if kind == "uniform":
        a = rng.random((rows, n))
        b = rng.random(rows)  # E6: b = np.random.rand(m), no model behind it
        return a, b
    a = rng.standard_normal((rows, n))
    if v is not None:
        a = (a * np.geomspace(1.0, 1.0 / cond, n)) @ v.T
    x_true = np.random.default_rng([seed, 3]).standard_normal(n)
    return a, a @ x_true + NOISE * rng.standard_normal(rows)
