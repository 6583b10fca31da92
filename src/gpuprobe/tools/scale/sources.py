"""Inputs for the solvers, as dask arrays split into row blocks.

In-memory arrays (NumPy, CuPy, torch on CPU or GPU) are wrapped without a copy; dask arrays keep
their chunks (any width: the solvers join a row block's column chunks on the worker). Files are read
lazily, block by block, on the workers, so they may be larger than memory:

- ``.npy``: a read-only memory map opened on the worker (``numpy.load(mmap_mode="r")``); the graph
  holds the path, never the data. Pickled (object) arrays are refused.
- Zarr: a store or group (``dask.array.from_zarr``); a group holds arrays ``A`` and ``b``.
- Parquet (a file or a directory of files): row groups coalesced into blocks of ~128 MiB, read
  with pyarrow, numeric columns only.

For a file holding one 2-D array (``.npy``, a Zarr array), the last column is ``b`` unless a
separate target is given; for Parquet, ``target`` names the column (default: the last one).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.core.units import MIB, gib

__all__ = [
    "CHUNK_TARGET_BYTES",
    "GPU_CHUNK_FRACTION",
    "Problem",
    "as_dask_problem",
    "default_chunk_rows",
    "is_path",
    "local_problem",
    "read_array",
    "read_npy",
    "read_parquet",
    "read_problem",
    "read_zarr",
]

# Bytes per row block: dask.array's default "array.chunk-size" (128 MiB, dask/dask.yaml).
CHUNK_TARGET_BYTES = 128 * MIB
# Largest row block as a fraction of one GPU's memory: 1/16 to 1/8 keeps room for the Gram or QR
# work on the same card (rapidsai/cudf PR #16821).
GPU_CHUNK_FRACTION = 1 / 16


def is_path(x: object) -> bool:
    """True for a str or path-like (a file to read), False for an array."""
    return isinstance(x, (str, os.PathLike))


def default_chunk_rows(
    m: int, n: int, itemsize: int = 8, workers: int = 1, target_bytes: int = CHUNK_TARGET_BYTES
) -> int:
    """Rows per block: blocks of about ``target_bytes``, their count a multiple of ``workers`` so
    every worker gets the same share, and at least ``n + 1`` rows when ``m`` allows (a TSQR block
    shorter than that gains nothing)."""
    workers = max(1, workers)
    total = max(1, m * max(1, n) * itemsize)
    blocks = max(workers, math.ceil(total / target_bytes))
    blocks = math.ceil(blocks / workers) * workers
    rows = math.ceil(m / blocks)
    return max(1, min(m, max(rows, min(m, n + 1))))


# -- torch and CuPy without importing them -----------------------------------------------------


def _module(x: object) -> str:
    return type(x).__module__.split(".")[0]


def _from_torch(t: Any) -> Any:
    """A torch tensor as NumPy (CPU) or CuPy (CUDA), through DLPack, without importing torch."""
    if t.device.type == "cuda":
        import cupy

        return cupy.from_dlpack(t.detach())
    return t.detach().resolve_conj().numpy()


def _in_memory(x: Any, what: str) -> Any:
    if _module(x) == "torch":
        return _from_torch(x)
    if _module(x) == "cupy" or isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception as exc:
        raise InputError(f"{what} is a {type(x).__name__}, not an array: {exc}") from None


# -- files ---------------------------------------------------------------------------------------


def _not_npy(path: str, exc: Exception) -> str:
    """Why ``path`` is not a ``.npy`` array numpy can map, in one line."""
    with contextlib.suppress(OSError):
        if os.path.getsize(path) == 0:
            return f"{path}: an empty file, not a .npy array; write one with numpy.save"
    if "allow_pickle" in str(exc) or "Python objects" in str(exc):
        return (
            f"{path}: not a readable .npy array: it holds Python objects (pickled), which "
            "gpuprobe never loads; save numbers"
        )
    return f"{path}: not a readable .npy array ({type(exc).__name__}: {exc})"


class _NpyFile:
    """A ``.npy`` file as an array-like for ``dask.array.from_array``: each read opens a read-only
    memory map in the reading process and copies the rows out; it pickles as its path."""

    def __init__(self, path: str) -> None:
        self.path = path
        mm = self._open()
        self.shape: tuple[int, ...] = tuple(mm.shape)
        self.dtype = mm.dtype
        self.ndim = mm.ndim

    def _open(self) -> np.ndarray:
        try:
            return np.load(self.path, mmap_mode="r", allow_pickle=False)
        except Exception as exc:  # EOFError, OverflowError, tokenize's TokenError as well
            raise InputError(_not_npy(self.path, exc)) from None

    def __getitem__(self, index: Any) -> np.ndarray:
        return np.array(self._open()[index])

    def __reduce__(self) -> tuple[Any, ...]:
        return (_NpyFile, (self.path,))


def read_npy(path: str | os.PathLike[str], chunk_rows: int | None = None, workers: int = 1) -> Any:
    """A ``.npy`` file as a lazy dask array (rows in blocks of ``chunk_rows``)."""
    import dask.array as da

    src = _NpyFile(os.fspath(path))
    if src.ndim not in (1, 2):
        raise InputError(f"{path}: a {src.ndim}-D array; expected a matrix or a vector")
    rows = chunk_rows or default_chunk_rows(
        src.shape[0], src.shape[1] if src.ndim == 2 else 1, src.dtype.itemsize, workers
    )
    from dask.base import tokenize

    st = os.stat(src.path)
    name = "npy-" + tokenize(os.path.abspath(src.path), st.st_mtime_ns, st.st_size, rows)
    chunks = (rows,) if src.ndim == 1 else (rows, src.shape[1])
    return da.from_array(
        src,
        chunks=chunks,
        name=name,
        asarray=True,
        fancy=False,
        lock=False,
        meta=np.empty((0,) * src.ndim, dtype=src.dtype),
    )


def read_zarr(path: str | os.PathLike[str], component: str | None = None) -> Any:
    """A Zarr array (or ``component`` of a group) as a lazy dask array with the store's chunks."""
    import dask.array as da

    try:
        return da.from_zarr(os.fspath(path), component=component)
    except ImportError:
        raise InputError(f"{path}: reading Zarr needs zarr: pip install zarr") from None
    except Exception as exc:
        where = f"{path}" + (f" (array {component!r})" if component else "")
        raise InputError(
            f"{where}: not a readable Zarr array ({type(exc).__name__}: {exc})"
        ) from None


def _not_special(path: Path) -> None:
    """Refuse a FIFO, a device or a socket (or a link to one) at once: opening a FIFO waits for a
    writer for ever, and /dev/zero reads as an endless empty file."""
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise InputError(
                f"{path}: not a regular file (a FIFO, a device or a socket); give a .npy file, "
                "a Zarr store or Parquet data"
            )


def _parquet_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: a directory with no *.parquet files")
    for f in files:
        _not_special(f)
    return files


def _need_pyarrow(path: object) -> None:
    if importlib.util.find_spec("pyarrow") is None:
        raise InputError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow")


def _parquet_file(path: Path) -> Any:
    """``pyarrow.parquet.ParquetFile(path)``, or one line saying why it is not Parquet (a CSV
    named ``.parquet``, an empty or cut file, a folder)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's ArrowInvalid, OSError, ...
        why = str(exc).split("\n")[0]
    with contextlib.suppress(OSError):
        if path.is_file() and path.stat().st_size == 0:
            why = "an empty file"
    raise InputError(f"{path}: not a readable Parquet file ({why}); give Parquet data")


def _read_parquet_rows(path: str, row_group: int, columns: list[str]) -> np.ndarray:
    """Run on a worker: one row group's ``columns`` as a float64 matrix (nulls become NaN)."""
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path).read_row_group(row_group, columns=columns)
    cols = [
        np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
        for c in columns
    ]
    return np.column_stack(cols) if cols else np.empty((table.num_rows, 0))


def _read_parquet_pieces(pieces: list[tuple[str, int]], columns: list[str]) -> np.ndarray:
    """Run on a worker: several (file, row group) pieces' ``columns``, one after the other, as
    one float64 matrix (:func:`_read_parquet_rows` each)."""
    parts = [_read_parquet_rows(path, rg, columns) for path, rg in pieces]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def _coalesce(
    pieces: list[tuple[str, int, int]], target_rows: int
) -> list[list[tuple[str, int, int]]]:
    """(file, row group, rows) pieces, in order, grouped into runs of at most ``target_rows``
    rows (a piece larger than that is a run of its own): 10,000 small files are a few blocks,
    not 10,000 (one task each: 7 min 20 s and 916 MB for 4 MB of data, issue 40)."""
    runs: list[list[tuple[str, int, int]]] = []
    rows = 0
    for piece in pieces:
        if runs and rows + piece[2] <= target_rows:
            runs[-1].append(piece)
            rows += piece[2]
        else:
            runs.append([piece])
            rows = piece[2]
    return runs


def read_parquet(path: str | os.PathLike[str], columns: Sequence[str] | None = None) -> Any:
    """Numeric ``columns`` (default: all) of a Parquet file or directory as a lazy float64 dask
    array: its row groups, in order, coalesced into blocks of about
    :data:`CHUNK_TARGET_BYTES` (one block per row group when they are that large already)."""
    _need_pyarrow(path)
    import dask
    import dask.array as da

    files = _parquet_files(Path(path))
    opened = [_parquet_file(f) for f in files]  # every file's footer, before any block is planned
    schema = opened[0].schema_arrow
    names = list(columns) if columns is not None else list(schema.names)
    unknown = [c for c in names if c not in schema.names]
    if unknown:
        raise InputError(f"{path}: no column(s) {unknown}; the file has {list(schema.names)}")
    import pyarrow.types as pat

    bad = [
        c
        for c in names
        if not (
            pat.is_integer(schema.field(c).type)
            or pat.is_floating(schema.field(c).type)
            or pat.is_boolean(schema.field(c).type)
        )
    ]
    if bad:
        raise InputError(f"{path}: column(s) {bad} are not numeric; select numeric columns")
    pieces: list[tuple[str, int, int]] = []
    for f, pf in zip(files, opened, strict=True):
        lacking = [c for c in names if c not in pf.schema_arrow.names]
        if lacking:
            raise InputError(
                f"{f}: no column(s) {lacking}, which {files[0].name} has; give files of one schema"
            )
        meta = pf.metadata
        for rg in range(meta.num_row_groups):
            rows = meta.row_group(rg).num_rows
            if rows > 0:
                pieces.append((os.fspath(f), rg, rows))
    target_rows = max(1, CHUNK_TARGET_BYTES // (8 * max(1, len(names))))
    blocks = []
    for run in _coalesce(pieces, target_rows):
        task = dask.delayed(_read_parquet_pieces, pure=True)([(p, rg) for p, rg, _ in run], names)
        rows = sum(r for _, _, r in run)
        blocks.append(da.from_delayed(task, shape=(rows, len(names)), dtype=np.float64))
    if not blocks:
        raise InputError(f"{path}: the Parquet data has no rows")
    return da.concatenate(blocks, axis=0)


def _kind(path: Path) -> str:
    _not_special(path)
    name = path.name.lower()
    if name.endswith(".npy"):
        return "npy"
    if name.endswith(".zarr") or (
        path.is_dir()
        and (
            (path / "zarr.json").exists()
            or (path / ".zarray").exists()
            or (path / ".zgroup").exists()
        )
    ):
        return "zarr"
    if name.endswith((".parquet", ".pq")) or (path.is_dir() and any(path.glob("*.parquet"))):
        return "parquet"
    raise InputError(f"{path}: unknown format; give a .npy file, a Zarr store or Parquet data")


def read_array(
    path: str | os.PathLike[str], chunk_rows: int | None = None, workers: int = 1
) -> Any:
    """One array from a ``.npy`` file, a Zarr array or Parquet data (all numeric columns)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    kind = _kind(p)
    if kind == "npy":
        return read_npy(p, chunk_rows, workers)
    if kind == "zarr":
        return read_zarr(p)
    return read_parquet(p)


def read_problem(
    path: str | os.PathLike[str],
    target: str | os.PathLike[str] | None = None,
    chunk_rows: int | None = None,
    workers: int = 1,
) -> tuple[Any, Any]:
    """``(A, b)`` as lazy dask arrays from a file; see the module docstring for the layouts.

    ``target``: a second file holding ``b``; for Parquet the name of ``b``'s column; for a Zarr
    group the name of ``b``'s array (``A`` is then the group's ``A``)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    kind = _kind(p)
    if target is not None and Path(target).exists() and kind != "parquet":
        return read_array(p, chunk_rows, workers), read_array(target, chunk_rows, workers)
    if kind == "parquet":
        _need_pyarrow(p)
        names = list(_parquet_file(_parquet_files(p)[0]).schema_arrow.names)
        b_col = os.fspath(target) if target is not None else names[-1]
        if b_col not in names:
            raise InputError(f"{p}: no column {b_col!r} for b; the file has {names}")
        return read_parquet(p, [c for c in names if c != b_col]), read_parquet(p, [b_col])[:, 0]
    if kind == "zarr":
        try:
            import zarr

            node = zarr.open(os.fspath(p), mode="r")
        except Exception as exc:
            raise InputError(f"{p}: not a readable Zarr store ({exc})") from None
        if hasattr(node, "array_keys"):  # a group
            keys = sorted(node.array_keys())
            b_name = os.fspath(target) if target is not None else "b"
            if "A" not in keys or b_name not in keys:
                raise InputError(
                    f"{p}: a Zarr group needs arrays 'A' and {b_name!r}; it has {keys}"
                )
            return read_zarr(p, "A"), read_zarr(p, b_name)
        whole = read_zarr(p)
    else:
        if target is not None:
            raise InputError(f"{target}: no such file for b")
        whole = read_npy(p, chunk_rows, workers)
    if whole.ndim != 2 or whole.shape[1] < 2:
        raise InputError(
            f"{p}: one array of shape {whole.shape}; give a matrix whose last column is b, "
            "or b as a separate file (--target)"
        )
    return whole[:, :-1], whole[:, -1]


# -- the problem as dask arrays --------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """``A`` and ``b`` as dask arrays with the same row blocks, and where they came from."""

    A: Any
    b: Any
    source: str  # "numpy", "cupy", "torch", "dask", or the file's kind
    on_gpu: bool  # blocks are CuPy arrays already


def _check_dtype(x: Any, what: str) -> None:
    kind = np.dtype(x.dtype).kind
    if kind == "c":
        raise InputError(
            f"{what} is complex ({x.dtype}); least squares here is real: pass the real "
            "part or stack [real, imag]"
        )
    if kind not in "fiub":
        raise InputError(f"{what} has dtype {x.dtype}; give numbers (float64 is used inside)")


def _check_pair(A: Any, b: Any) -> Any:
    """Check dtypes and shapes of A (m × n) and b (m or m × 1); return b as a vector."""
    for x, what in ((A, "A"), (b, "b")):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise InputError(f"{what} is a {type(x).__name__}, not an array")
        _check_dtype(x, what)
    if A.ndim != 2:
        raise InputError(f"A must be a matrix (m × n); it has shape {tuple(A.shape)}")
    if b.ndim == 2 and b.shape[1] == 1:
        b = b[:, 0]
    if b.ndim != 1:
        raise InputError(f"b must be a vector of length m; it has shape {tuple(b.shape)}")
    if any(isinstance(s, float) and math.isnan(s) for s in (*A.shape, *b.shape)):
        raise InputError("A or b has unknown chunk sizes: call .compute_chunk_sizes() on it first")
    m, n = (int(s) for s in A.shape)
    if m == 0 or n == 0:
        raise InputError(f"A is empty ({m} × {n}); give at least one row and one column")
    if int(b.shape[0]) != m:
        raise InputError(f"A has {m} rows but b has {int(b.shape[0])}; they must match")
    return b


def _open_npy(path: str | os.PathLike[str]) -> np.ndarray:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    return _NpyFile(os.fspath(p))._open()


def local_problem(
    A: Any, b: Any, memory_fraction: float = 0.5
) -> tuple[np.ndarray, np.ndarray, str, str] | None:
    """``(A, b, source, why)`` for a solve in this process, or None when the input belongs on a
    Dask cluster: a dask or GPU array, Zarr or Parquet data, or a ``.npy`` file larger than
    ``memory_fraction`` of the memory available now. NumPy input is returned as it is (no copy);
    a ``.npy`` file as a read-only memory map; torch CPU tensors through DLPack."""
    files = [x for x in (A, b) if is_path(x)]
    for f in files:
        if not Path(f).exists():
            raise InputError(f"{f}: no such file or directory")
        if _kind(Path(f)) != "npy":
            return None
    if files:
        import psutil

        size = sum(os.path.getsize(f) for f in files)
        avail = psutil.virtual_memory().available
        if size > memory_fraction * avail:
            return None
        why = (
            f".npy data of {gib(size)}, within {memory_fraction:.0%} of the "
            f"{gib(avail, 1)} available: read block by block in this process"
        )
    else:
        why = "in-memory array: solved in this process with threaded BLAS, no copy of A"
    if is_path(A):
        whole = _open_npy(A)
        if b is None:
            if whole.ndim != 2 or whole.shape[1] < 2:
                raise InputError(
                    f"{A}: one array of shape {whole.shape}; give a matrix whose last column is "
                    "b, or b as a separate file (--target)"
                )
            A, b = whole[:, :-1], whole[:, -1]
        else:
            A = whole
        source = "npy"
    else:
        if _module(A) == "cupy" or (_module(A) == "torch" and A.device.type == "cuda"):
            return None
        if type(A).__module__.split(".")[0] == "dask":
            return None
        source = "torch" if _module(A) == "torch" else "numpy"
        A = _in_memory(A, "A")
    if b is None:
        raise InputError("b is missing: give b, or a file whose last column is b")
    if is_path(b):
        b = _open_npy(b)
    elif type(b).__module__.split(".")[0] == "dask":
        return None
    else:
        if _module(b) == "cupy" or (_module(b) == "torch" and b.device.type == "cuda"):
            return None
        b = _in_memory(b, "b")
    b = _check_pair(A, b)
    return A, b, source, why


def as_dask_problem(
    A: Any,
    b: Any,
    chunk_rows: int | None = None,
    workers: int = 1,
    gpu_memory_bytes: int | None = None,
) -> Problem:
    """Check shapes and dtypes and return ``A`` and ``b`` as dask arrays with equal row blocks.

    Raises :class:`InputError` for shapes that disagree, an empty ``A``, a ``b`` with more than one
    column, or non-numeric data. NaN and Inf are found by the solvers, block by block, at no extra
    pass over the data."""
    import dask.array as da

    source = "dask"
    if is_path(A):
        source = _kind(Path(A)) if Path(A).exists() else "file"
        if b is None or (is_path(b) and not Path(b).exists()):
            A, b = read_problem(A, b, chunk_rows, workers)
        else:
            A = read_array(A, chunk_rows, workers)
    if b is None:
        raise InputError("b is missing: give b, or a file whose last column is b")
    if is_path(b):
        b = read_array(b, chunk_rows, workers)
    if not isinstance(A, da.Array):
        source = _module(A) if _module(A) in ("torch", "cupy") else "numpy"
        A = _in_memory(A, "A")
    if not isinstance(b, da.Array):
        b = _in_memory(b, "b")
    b = _check_pair(A, b)
    m, n = (int(s) for s in A.shape)
    on_gpu = _module(A) == "cupy" or (
        isinstance(A, da.Array) and _module(getattr(A, "_meta", None)) == "cupy"
    )
    if not isinstance(A, da.Array):
        target = CHUNK_TARGET_BYTES
        if gpu_memory_bytes:
            target = min(target, int(gpu_memory_bytes * GPU_CHUNK_FRACTION))
        rows = chunk_rows or default_chunk_rows(m, n, np.dtype(A.dtype).itemsize, workers, target)
        # name=False: a random name instead of a hash of all of A (seconds per GB)
        A = da.from_array(A, chunks=(rows, n), asarray=False, name=False)
    elif chunk_rows is not None:
        A = A.rechunk({0: chunk_rows})
    if not isinstance(b, da.Array):
        b = da.from_array(b, chunks=(A.chunks[0],), asarray=False, name=False)
    elif b.chunks[0] != A.chunks[0]:
        b = b.rechunk({0: A.chunks[0]})
    return Problem(A=A, b=b, source=source, on_gpu=on_gpu)
