"""Least squares on one GPU, in this process: A stays where it is and each pass over it is a few
large cuBLAS products over all its rows, reduced on the device; only n × n and n-long results
come back to the host, where the solvers (:mod:`gpuprobe.tools.scale.solvers`) do the n × n work
as they do for every session.

Why (issue 30): on an H200, a 1,000,000 × 1024 float64 CuPy array went to a one-worker dask-cuda
cluster: 23.4 s of set-up (starting the cluster, sending 7.6 GB from this process to the worker),
then 62 Dask tasks per pass, each a GEMM of 16,129 rows whose 8 MB result was copied to the host
and added there: 1.0 s, 1.05 TFLOP/s useful, where one DGEMM of a block ran at 52.9 TFLOP/s.
Here the same solve is one process, no copy of A, and per pass a fixed number of products that
does not grow with the rows.

- **The Gram matrix AᵀA** is symmetric: only its upper triangle is computed, in column panels of
  :data:`GRAM_PANEL_COLS` (panel j is the GEMM ``G[c0:c1, c0:] = A[:, c0:c1]ᵀ·A[:, c0:]`` over
  all rows), so k panels execute (k+1)/(2k) of a full GEMM's 2mn² flops while running as GEMM,
  the fastest fp64 kernel on the card (the H200 ran DGEMM at 52.9 TFLOP/s, cuBLAS DSYRK at 15.1).
  The rows are split into S pieces, one strided-batched GEMM per panel computing S partial
  triangles side by side (an explicit split-K: the card gets S times the tiles of one n × n
  output, whatever cuBLAS's own heuristics for a long K would pick); one product sums them.
  The panels read A where it is (a row-major array with any row stride), so no column panel is
  copied. ``Aᵀb`` and ``bᵀb`` are one GEMV and one dot.
- **The n × n work** stays the solvers' (on the host: Cholesky, LAPACK's condition estimate,
  triangular solves): 8 MB comes back at n = 1024.
- **A refinement pass** (``r = b − Ax``, ``Aᵀr``, ``‖r‖²``) is two GEMVs and a dot.
- **TSQR**: the R of ``[Aᵢ bᵢ]`` for row chunks that fit, by cuSOLVER, stacked and factored again
  on the device.

A in float64 with contiguous rows (C order, or a column slice of such an array) is used in place,
as one chunk; any other layout or dtype is converted chunk by chunk, a chunk's size set by the
GPU memory free now (:data:`DEVICE_WORK_FRACTION`), never by a CPU cache size.

Testing without a card: every Gram product is first planned as a :class:`GemmCall` (cuBLAS's own
arguments, offsets in elements); :func:`emulate_gemm` runs a call with NumPy exactly as cuBLAS
reads it (column-major operands, leading dimensions, batch strides) after checking that every
element it touches lies inside its buffers, and :class:`NumpyOps` runs the whole session on the
CPU with NumPy standing in for CuPy, making the same calls in the same order.

Times in this module are seconds; sizes bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuprobe.core.units import MIB
from gpuprobe.tools.scale.dense import _Cholesky
from gpuprobe.tools.scale.engine import EngineInfo, in_process_info
from gpuprobe.tools.scale.kernels import _gram_block, _nonfinite_counts, _qr_block, _residual_block
from gpuprobe.tools.scale.solvers import _Passes

__all__ = [
    "DEVICE_UPLOAD_FRACTION",
    "DEVICE_WORK_FRACTION",
    "GRAM_MAX_SPLIT",
    "GRAM_MIN_PIECE_ROWS",
    "GRAM_PANEL_COLS",
    "GRAM_SPLIT_ELEMENTS",
    "QR_CHUNK_COPIES",
    "SCAN_BLOCK_BYTES",
    "CupyOps",
    "DeviceSession",
    "GemmCall",
    "NumpyOps",
    "array_device",
    "device_cholesky",
    "emulate_gemm",
    "gpu_count",
    "gram_flops",
    "gram_plan",
    "gram_split",
    "make_ops",
    "open_session",
    "route",
    "row_stride",
]

# Columns per panel of the Gram's upper triangle. k panels execute (k+1)/(2k) of the 2mn² flops
# of a full GEMM (n = 1024: 4 panels, 62.5 %), each still a GEMM 256 wide over all rows; much
# narrower panels would save little more and run as thin GEMMs.
GRAM_PANEL_COLS = 256
# Output elements the S partial Grams of a product should have together (S·n²), so that the card
# has enough independent tiles: 2²⁵ elements are 2048 tiles of 128 × 128, 15 per SM on a 132-SM
# H100/H200, and the smallest panel at n = 1024 (256 × 256, S = 32) still 128 tiles, a full wave.
GRAM_SPLIT_ELEMENTS = 2**25
# The most row pieces of a Gram product (the workspace is S × n × n float64: 256 MB at n = 1024,
# S = 32) and the fewest rows in a piece (the K of each GEMM: long enough that a tile's k-loop
# dwarfs its prologue and epilogue).
GRAM_MAX_SPLIT = 64
GRAM_MIN_PIECE_ROWS = 2048
# Fraction of the GPU memory free now that a solve may take for its temporary buffers (the Gram
# workspace, a converted chunk of A, TSQR's copies); the rest stays free for the caller and for
# other processes on a shared card (dask-cuda's workers leave 20 %: device_memory_limit 0.8).
DEVICE_WORK_FRACTION = 0.25
# Host data (devices="gpu" or one GPU id) is copied to the GPU once when A and b in float64 take
# at most this fraction of its free memory; larger data goes to Dask workers block by block.
DEVICE_UPLOAD_FRACTION = 0.5
# Copies of a TSQR chunk alive at once: [Aᵢ bᵢ], cuSOLVER's column-major copy, and its R.
QR_CHUNK_COPIES = 3
# Only on the error path: rows searched at a time for the block that holds a NaN or an Inf, as
# large as the in-process engine's blocks (lstsq.LOCAL_BLOCK_BYTES).
SCAN_BLOCK_BYTES = 256 * MIB

_F8 = 8  # bytes of a float64


# -- the Gram matrix as cuBLAS calls ------------------------------------------------------------


@dataclass(frozen=True)
class GemmCall:
    """One cuBLAS DGEMM (``batch`` 1) or DGEMM strided-batched call as cuBLAS reads it: column-major
    ``C = op(A)·op(B) + beta·C`` with op(A) ``m × k`` and op(B) ``k × n``; offsets and strides count
    elements from the first element of A (``a_off``, ``b_off``: both operands are A) and of the
    workspace (``c_off``)."""

    transa: str  # "N" or "T"
    transb: str
    m: int
    n: int
    k: int
    a_off: int
    lda: int
    stride_a: int
    b_off: int
    ldb: int
    stride_b: int
    c_off: int
    ldc: int
    stride_c: int
    batch: int
    beta: float = 1.0

    @property
    def flops(self) -> int:
        """Floating-point operations the call executes (2·m·n·k per product)."""
        return 2 * self.m * self.n * self.k * self.batch


def gram_split(rows: int, n: int, budget_bytes: float) -> int:
    """Row pieces S of a Gram product: enough for :data:`GRAM_SPLIT_ELEMENTS` output elements,
    at most :data:`GRAM_MAX_SPLIT`, pieces of at least :data:`GRAM_MIN_PIECE_ROWS` rows, and an
    S × n × n workspace within ``budget_bytes``."""
    want = math.ceil(GRAM_SPLIT_ELEMENTS / max(1, n * n))
    by_rows = rows // GRAM_MIN_PIECE_ROWS
    by_memory = int(budget_bytes // (_F8 * n * n))
    return max(1, min(want, GRAM_MAX_SPLIT, by_rows, by_memory))


def gram_plan(
    rows: int, n: int, ld: int, split: int, panel_cols: int = GRAM_PANEL_COLS
) -> list[GemmCall]:
    """The calls that add the upper triangle of ``AᵀA`` for a row-major ``rows × n`` A with row
    stride ``ld`` (elements) into a ``split × n × n`` workspace: per column panel, one
    strided-batched GEMM over ``split`` pieces of ``rows // split`` rows, and one plain GEMM for
    the rows left over.

    cuBLAS sees row-major A as the column-major ``n × rows`` matrix Aᵀ with leading dimension
    ``ld``; panel ``[c0, c1)`` is ``C = Aᵀ[c0:c1, piece]·(Aᵀ[c0:, piece])ᵀ`` written at element
    ``(c0, c0)`` of the piece's column-major n × n block, so every column-major entry (i, j) with
    i ≤ j is filled: read back as a C-order array the workspace's sum holds G's lower triangle."""
    if ld < n:
        raise ValueError(f"row stride {ld} is less than the {n} columns")
    piece = rows // split
    rest = rows - piece * split
    calls = []
    for c0 in range(0, n, panel_cols):
        w = min(panel_cols, n - c0)
        cols = n - c0
        at = c0 + c0 * n  # element (c0, c0) of a piece's column-major n × n block
        if piece:
            step = piece * ld
            calls.append(
                GemmCall("N", "T", w, cols, piece, c0, ld, step, c0, ld, step, at, n, n * n, split)
            )
        if rest:
            off = c0 + piece * split * ld
            calls.append(GemmCall("N", "T", w, cols, rest, off, ld, 0, off, ld, 0, at, n, 0, 1))
    return calls


def gram_flops(rows: int, n: int, panel_cols: int = GRAM_PANEL_COLS) -> int:
    """Flops the Gram products of :func:`gram_plan` execute for ``rows × n`` (any split)."""
    return sum(2 * min(panel_cols, n - c0) * (n - c0) * rows for c0 in range(0, n, panel_cols))


def _colmajor(mem: np.ndarray, off: int, rows: int, cols: int, ld: int, what: str) -> np.ndarray:
    """A column-major ``rows × cols`` view with leading dimension ``ld`` at element ``off`` of the
    flat buffer ``mem``, after checking cuBLAS's rule ``ld ≥ rows`` and the buffer's bounds."""
    if ld < max(1, rows):
        raise ValueError(f"{what}: leading dimension {ld} < {rows} rows")
    last = off + (rows - 1) + (cols - 1) * ld
    if off < 0 or last >= mem.shape[0]:
        raise IndexError(f"{what}: elements {off}..{last} outside a buffer of {mem.shape[0]}")
    item = mem.itemsize
    return np.lib.stride_tricks.as_strided(
        mem[off:], shape=(rows, cols), strides=(item, ld * item), writeable=what == "C"
    )


def emulate_gemm(call: GemmCall, a_mem: np.ndarray, c_mem: np.ndarray) -> None:
    """Run ``call`` with NumPy the way cuBLAS reads it: ``a_mem`` is the flat memory from A's
    first element, ``c_mem`` the flat workspace (written in place). Raises IndexError for an
    element outside either buffer (what on a card would read or write someone else's memory)."""
    for i in range(call.batch):
        a_shape = (call.m, call.k) if call.transa == "N" else (call.k, call.m)
        b_shape = (call.k, call.n) if call.transb == "N" else (call.n, call.k)
        a = _colmajor(a_mem, call.a_off + i * call.stride_a, *a_shape, call.lda, "A")
        b = _colmajor(a_mem, call.b_off + i * call.stride_b, *b_shape, call.ldb, "B")
        c = _colmajor(c_mem, call.c_off + i * call.stride_c, call.m, call.n, call.ldc, "C")
        op_a = a if call.transa == "N" else a.T
        op_b = b if call.transb == "N" else b.T
        c[...] = op_a @ op_b + call.beta * c


def row_stride(a: Any) -> int | None:
    """Elements between rows of a float64 matrix whose rows are contiguous (C order, or columns
    sliced from one), the leading dimension cuBLAS needs; None for any other layout or dtype."""
    if a.ndim != 2 or np.dtype(a.dtype) != np.float64:
        return None
    n = int(a.shape[1])
    if a.flags.c_contiguous:
        return max(1, n)
    s0, s1 = (int(v) for v in a.strides)
    if (s1 == _F8 or n == 1) and s0 % _F8 == 0 and s0 // _F8 >= n:
        return s0 // _F8
    return None


def _usable(a: Any) -> bool:
    """A block the products take as it is: float64 in C order (CuPy's GEMV copies any other
    layout whole, so a row-strided block is converted chunk by chunk instead)."""
    return bool(np.dtype(a.dtype) == np.float64 and a.flags.c_contiguous)


# -- where the arrays live: CuPy on a card, NumPy standing in ---------------------------------------


class NumpyOps:
    """The device operations with NumPy standing in for CuPy: the same calls, run on the CPU
    (Gram products through :func:`emulate_gemm`). For tests; ``free`` is the memory it reports
    free. ``calls`` records every Gram product, ``syncs`` every copy back to the host."""

    library = "NumPy standing in for CuPy"

    def __init__(self, free: int = 2**34) -> None:
        self.xp = np
        self.free = free
        self.calls: list[GemmCall] = []
        self.syncs = 0

    def context(self) -> AbstractContextManager[Any]:
        return nullcontext()

    def free_bytes(self) -> int:
        return self.free

    def gemm(self, call: GemmCall, a: np.ndarray, work: np.ndarray) -> None:
        self.calls.append(call)
        ld = row_stride(a)
        assert ld is not None, "gram products need rows in place"
        m, n = a.shape
        span = (m - 1) * ld + n
        mem = np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(_F8,), writeable=False)
        with np.errstate(over="ignore", invalid="ignore"):  # as on a card: found in the sums
            emulate_gemm(call, mem, work.reshape(-1))

    def to_host(self, x: Any) -> np.ndarray:
        self.syncs += 1
        return np.array(x, dtype=np.float64)

    def to_device(self, x: Any) -> np.ndarray:
        return np.asarray(x)


class CupyOps:
    """The device operations on GPU ``device_id`` with CuPy: Gram products through cuBLAS's
    ``dgemm`` / ``dgemmStridedBatched`` (CuPy's low-level bindings, whose signature, pointers
    for alpha and beta, has held from CuPy 9 to 14), on the current CuPy stream."""

    def __init__(self, device_id: int) -> None:
        import cupy

        self.xp = cupy
        self.device_id = device_id
        self.calls: list[GemmCall] = []
        self.syncs = 0
        self.library = f"cuBLAS through CuPy {cupy.__version__}"

    def context(self) -> AbstractContextManager[Any]:
        return self.xp.cuda.Device(self.device_id)

    def free_bytes(self) -> int:
        free, _total = self.xp.cuda.Device(self.device_id).mem_info
        return int(free) + int(self.xp.get_default_memory_pool().free_bytes())

    def gemm(self, call: GemmCall, a: Any, work: Any) -> None:
        from cupy.cuda import cublas

        self.calls.append(call)
        handle = self.xp.cuda.device.get_cublas_handle()
        one = np.array(1.0)
        beta = np.array(call.beta)
        op = {"N": cublas.CUBLAS_OP_N, "T": cublas.CUBLAS_OP_T}
        pa, pc = int(a.data.ptr), int(work.data.ptr)
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        try:
            args = (handle, op[call.transa], op[call.transb], call.m, call.n, call.k)
            if call.batch == 1:
                cublas.dgemm(
                    *args, one.ctypes.data, pa + _F8 * call.a_off, call.lda,
                    pa + _F8 * call.b_off, call.ldb, beta.ctypes.data,
                    pc + _F8 * call.c_off, call.ldc,
                )  # fmt: skip
            else:
                cublas.dgemmStridedBatched(
                    *args, one.ctypes.data, pa + _F8 * call.a_off, call.lda, call.stride_a,
                    pa + _F8 * call.b_off, call.ldb, call.stride_b, beta.ctypes.data,
                    pc + _F8 * call.c_off, call.ldc, call.stride_c, call.batch,
                )  # fmt: skip
        finally:
            cublas.setPointerMode(handle, mode)

    def to_host(self, x: Any) -> np.ndarray:
        self.syncs += 1
        return np.asarray(self.xp.asnumpy(x), dtype=np.float64)

    def to_device(self, x: Any) -> Any:
        return self.xp.asarray(x)


def device_cholesky(ops: Any, g: np.ndarray) -> _Cholesky:
    """G = LLᵀ factored on ``ops``'s device, L brought back for the host's O(n²) work."""
    lower = ops.xp.linalg.cholesky(ops.to_device(g))
    return _Cholesky.of_lower(ops.to_host(lower.T).T)


def make_ops(device_id: int) -> CupyOps:
    """The operations for GPU ``device_id`` (tests replace this with :class:`NumpyOps`)."""
    return CupyOps(device_id)


def array_device(a: Any) -> int | None:
    """The GPU id holding ``a`` (a CuPy array, or a torch CUDA tensor), None for host data."""
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return int(a.device.id)
    if mod == "torch" and a.device.type == "cuda":
        return int(a.device.index or 0)
    return None


def gpu_count() -> int:
    """GPUs CuPy sees here (0 without CuPy or a driver)."""
    from gpuprobe.tools.scale.engine import _gpu_count

    return _gpu_count()


# -- the session -----------------------------------------------------------------------------------


class DeviceSession(_Passes):
    """One problem in one GPU's memory, solved in this process: the solvers' ``reduce`` of the
    Gram, residual and QR kernels becomes a few products over all rows (see the module
    docstring), each pass ending in one copy of its small result to the host."""

    warn_level = 4

    def __init__(self, a: Any, b: Any, ops: Any, chunk_rows: int | None = None) -> None:
        self.ops = ops
        xp = ops.xp
        self.a = a
        self.b = xp.asarray(b).reshape(-1).astype(xp.float64, copy=False)
        self.m, self.n = (int(v) for v in a.shape)
        self.in_place = chunk_rows is None and _usable(a)
        budget = ops.free_bytes() * DEVICE_WORK_FRACTION
        if chunk_rows is None and not self.in_place:
            chunk_rows = int(budget // (_F8 * max(1, self.n)))
        self.block_rows = max(1, min(self.m, chunk_rows or self.m))
        self.starts = list(range(0, self.m, self.block_rows))
        qr_rows = int(budget // (QR_CHUNK_COPIES * _F8 * (self.n + 1)))
        self.qr_rows = max(1, min(self.m, chunk_rows or max(self.n + 1, qr_rows)))
        self.row_blocks = len(self.starts)
        self.passes = 0
        self.dense_s = 0.0
        self.on_gpu = True
        self._bad_stop: dict[int, int] = {}
        self._kinds: dict[Callable[..., Any], Callable[..., dict[str, Any]]] = {
            _gram_block: self._gram,
            _residual_block: self._residual,
            _qr_block: self._qr,
        }

    # chunks of rows: views of A when it is used in place, converted copies otherwise
    def _chunks(self, starts: Sequence[int], rows: int) -> Iterator[tuple[int, Any, Any]]:
        xp = self.ops.xp
        for start in starts:
            stop = min(self.m, start + rows)
            a = self.a[start:stop]
            if not _usable(a):
                a = xp.ascontiguousarray(a, dtype=xp.float64)
            yield start, a, self.b[start:stop]

    def reduce(self, func: Callable[..., Any], combine: Callable[..., Any], *extra: Any) -> Any:
        """One pass over A: the Gram, residual or QR products when ``func`` is that kernel;
        any other kernel chunk by chunk, its results combined on the host."""
        kind = self._kinds.get(func)
        if kind is not None:
            return self.counted(kind(*extra))
        chunks = self._chunks(self.starts, self.block_rows)
        held = [func(start, False, *extra, b, a) for start, a, b in chunks]
        return self.counted(combine(*held) if len(held) > 1 else held[0])

    def _gram(self) -> dict[str, Any]:
        xp, ops, n = self.ops.xp, self.ops, self.n
        split = gram_split(self.block_rows, n, ops.free_bytes() * DEVICE_WORK_FRACTION)
        work = xp.zeros((split, n, n), dtype=xp.float64)
        c = np.zeros(n)
        bb = 0.0
        for _start, a, b in self._chunks(self.starts, self.block_rows):
            ld = row_stride(a)
            assert ld is not None
            for call in gram_plan(int(a.shape[0]), n, ld, split):
                ops.gemm(call, a, work)
            c += ops.to_host(a.T @ b)
            bb += float(ops.to_host(b @ b))
        # the pieces summed by one product (a GEMV with ones), the triangle mirrored here too
        h = (work.reshape(split, n * n).T @ ops.to_device(np.ones(split))).reshape(n, n)
        g = ops.to_host(xp.tril(h) + xp.tril(h, -1).T)
        ok = bool(np.isfinite(np.diagonal(g)).all() and np.isfinite(c).all() and math.isfinite(bb))
        return {"G": g, "c": c, "bb": bb, "bad": [] if ok else self._bad(_gram_block)}

    def cholesky(self, g: np.ndarray) -> _Cholesky:
        """G = LLᵀ on the GPU (cuSOLVER's ``potrf`` through CuPy). At n = 1024 the host's LAPACK
        took 39 ms of a 77 ms solve on the H200 sweep's machine (2026-11-26), the Gram 26 ms;
        the card factors it in about a millisecond, plus 2 · 8n² bytes copied. Lᵀ comes back in
        C order, which is L in the Fortran order LAPACK's condition estimate reads."""
        return device_cholesky(self.ops, g)

    def _residual(self, x: np.ndarray, extended: bool) -> dict[str, Any]:
        # no wider float on a GPU: extended-precision passes are made in float64 (as on workers)
        xd = self.ops.to_device(np.asarray(x, dtype=np.float64))
        g = np.zeros(self.n)
        rr = 0.0
        for _start, a, b in self._chunks(self.starts, self.block_rows):
            r = b - a @ xd
            g += self.ops.to_host(a.T @ r)
            rr += float(self.ops.to_host(r @ r))
        return {"g": g, "rr": rr, "bad": []}

    def _qr(self) -> dict[str, Any]:
        xp = self.ops.xp
        starts = range(0, self.m, self.qr_rows)
        self.row_blocks = max(self.row_blocks, len(starts))
        rs = [
            xp.linalg.qr(xp.concatenate([a, b[:, None]], axis=1), mode="r")
            for _start, a, b in self._chunks(starts, self.qr_rows)
        ]
        r = rs[0] if len(rs) == 1 else xp.linalg.qr(xp.concatenate(rs), mode="r")
        r = self.ops.to_host(r)
        # NaN and Inf propagate through Householder QR into R: checked there, in O(n²)
        if np.isfinite(r).all():
            return {"R": r, "bad": []}
        return {"R": np.zeros((0, self.n + 1)), "bad": self._bad(_qr_block)}

    def _bad(self, kernel: Callable[..., dict[str, Any]]) -> list[tuple[int, int]]:
        """Only on the error path: the row blocks whose own ``kernel`` result is not finite
        (all rows when each block is finite and only their sum overflows)."""
        bad = []
        rows = max(1, min(self.m, SCAN_BLOCK_BYTES // (_F8 * self.n)))
        for start, a, b in self._chunks(range(0, self.m, rows), rows):
            for lo, hi in kernel(start, False, b, a)["bad"]:
                bad.append((lo, hi))
                self._bad_stop[lo] = hi
        if not bad:
            self._bad_stop[0] = self.m
            bad = [(0, self.m)]
        return bad

    def block_counts(self, start: int) -> dict[str, float]:
        stop = self._bad_stop[start]
        return _nonfinite_counts(False, self.b[start:stop], self.a[start:stop])

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.ops.to_host(self.a), self.ops.to_host(self.b)


def open_session(
    A: Any, b: Any, dev: int, ops: Any, chunk_rows: int | None
) -> tuple[DeviceSession, EngineInfo, str] | None:
    """``(session, engine, source)`` for A and b on GPU ``dev`` (inside ``ops.context()``); host
    data is copied there once, or None when A and b would take more than
    :data:`DEVICE_UPLOAD_FRACTION` of its free memory. Bad input raises InputError."""
    from gpuprobe.core.errors import InputError
    from gpuprobe.tools.scale.sources import _check_pair, _in_memory

    source = type(A).__module__.split(".")[0]
    source = source if source in ("cupy", "torch") else "numpy"
    if b is None:
        raise InputError("b is missing: give b, or a file whose last column is b")
    a, vec = _in_memory(A, "A"), _in_memory(b, "b")
    vec = _check_pair(a, vec)
    if array_device(a) is None:
        if _F8 * (int(a.size) + int(vec.size)) > DEVICE_UPLOAD_FRACTION * ops.free_bytes():
            return None
        a = ops.to_device(a)
    if array_device(vec) not in (None, dev):  # b on another GPU: m numbers brought over
        vec = ops.to_host(vec)
    info = in_process_info("gpu", ops.library, None, (dev,))
    return DeviceSession(a, vec, ops, chunk_rows), info, source


# -- which solves run here ------------------------------------------------------------------------


def _device_ids(devices: Any) -> tuple[int, ...] | None:
    if devices is None or isinstance(devices, str):
        return None
    try:
        return tuple(int(d) for d in devices)
    except (TypeError, ValueError):
        return None


def route(
    A: Any,
    b: Any,
    method: str,
    devices: Any,
    asked_cluster: bool,
) -> tuple[int, str] | None:
    """``(GPU id, why)`` when the solve runs on one GPU in this process: A on a GPU (a CuPy
    array, a torch CUDA tensor) with ``devices`` None, ``"gpu"`` or that GPU's id alone; or host
    data with ``devices`` naming one GPU (``"gpu"`` on a machine with one). None otherwise: a
    cluster was asked for (``asked_cluster``: client, scheduler, workers or engine="dask"),
    ``local-sgd``, dask arrays, files, or several GPUs named."""
    from gpuprobe.tools.scale.sources import is_path

    if asked_cluster or method == "local-sgd":
        return None
    for x in (A, b):
        if is_path(x) or type(x).__module__.split(".")[0] == "dask":
            return None
    ids = _device_ids(devices)
    dev = array_device(A)
    if dev is not None:
        if devices is None or devices == "gpu" or ids == (dev,):
            return dev, (
                f"A is on GPU {dev}: solved there in this process, no cluster and no copy of A"
            )
        return None
    if ids is not None and len(ids) == 1 and 0 <= ids[0] < gpu_count():
        return ids[0], f"devices={list(ids)}: A copied to GPU {ids[0]} once, solved in this process"
    if devices == "gpu" and gpu_count() == 1:
        return 0, "devices='gpu', one GPU here: A copied to it once, solved in this process"
    return None
