"""Lazy file inputs (.npy, Zarr, Parquet) solved on the module's two-worker cluster."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from gpuprobe.core.errors import InputError
from gpuprobe.tools.scale.lstsq import lstsq
from gpuprobe.tools.scale.sources import (
    CHUNK_TARGET_BYTES,
    as_dask_problem,
    default_chunk_rows,
    read_npy,
    read_parquet,
    read_problem,
)

da = pytest.importorskip("dask.array")


@pytest.fixture(scope="module")
def problem() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20)
    a = rng.standard_normal((1200, 6))
    b = a @ rng.standard_normal(6) + 0.01 * rng.standard_normal(1200)
    return a, b, np.linalg.lstsq(a, b, rcond=None)[0]


def close(x: np.ndarray, ref: np.ndarray) -> bool:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref)) <= 1e-12


def test_npy_is_read_lazily_by_path(tmp_path, problem):
    a = problem[0]
    np.save(tmp_path / "A.npy", a)
    arr = read_npy(tmp_path / "A.npy", chunk_rows=100)
    assert arr.chunks[0] == (100,) * 12
    # the graph holds the path, not the data: pickling it is small
    assert len(pickle.dumps(dict(arr.__dask_graph__()))) < 20_000
    np.testing.assert_array_equal(arr[250:260].compute(), a[250:260])


def test_npy_with_b_as_last_column(client, tmp_path, problem):
    a, b, ref = problem
    np.save(tmp_path / "Ab.npy", np.column_stack([a, b]))
    x, rep = lstsq(str(tmp_path / "Ab.npy"), None, "normal", client=client, chunk_rows=300)
    assert close(x, ref) and rep.source == "npy" and rep.row_blocks == 4 and rep.cols == 6


def test_npy_a_and_b_files(client, tmp_path, problem):
    a, b, _ = problem
    np.save(tmp_path / "A.npy", np.asfortranarray(a))
    np.save(tmp_path / "b.npy", b.astype(np.float32))
    x, _ = lstsq(tmp_path / "A.npy", tmp_path / "b.npy", "tsqr", client=client)
    ref32 = np.linalg.lstsq(a, b.astype(np.float32).astype(np.float64), rcond=None)[0]
    assert close(x, ref32)


def test_npy_refuses_pickled_objects(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"not a readable \.npy"):
        read_npy(tmp_path / "obj.npy")


def test_zarr_group(client, tmp_path, problem):
    pytest.importorskip("zarr")
    a, b, ref = problem
    store = tmp_path / "prob.zarr"
    da.from_array(a, chunks=(200, 3)).to_zarr(str(store), component="A")
    da.from_array(b, chunks=400).to_zarr(str(store), component="b")
    x, rep = lstsq(str(store), None, "tsqr", client=client)
    assert close(x, ref)
    assert (rep.row_blocks, rep.col_blocks) == (6, 2) and rep.source == "zarr"


def test_zarr_group_without_b(tmp_path, problem):
    pytest.importorskip("zarr")
    store = tmp_path / "onlyA.zarr"
    da.from_array(problem[0], chunks=(200, 6)).to_zarr(str(store), component="A")
    with pytest.raises(InputError, match="needs arrays 'A' and 'b'"):
        read_problem(store)


def _write_parquet(path, a, b, row_group_size):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cols = {f"x{j}": a[:, j] for j in range(a.shape[1])}
    cols["y"] = b
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)


def test_parquet_row_groups_and_target(client, tmp_path, problem):
    a, b, ref = problem
    path = tmp_path / "data.parquet"
    _write_parquet(path, a, b, row_group_size=250)
    x, rep = lstsq(str(path), "y", "normal", client=client)
    assert close(x, ref)
    # 4 groups of 250 and one of 200, 30 kB in all: coalesced into one block (issue 40)
    assert rep.row_blocks == 1 and rep.source == "parquet"
    x_default, _ = lstsq(str(path), None, "normal", client=client)  # last column is b
    np.testing.assert_allclose(x_default, x, rtol=1e-13)


def test_many_small_parquet_files_are_coalesced(client, tmp_path, problem, monkeypatch):
    """Issue 40: 10,000 small Parquet files were 10,000 blocks (one task each: 7 min 20 s and
    916 MB for 4 MB of data). 600 files of 2 rows here: a few blocks of the target size, in
    order, each file read once."""
    from gpuprobe.tools.scale import sources

    a, b, ref = problem
    parts = tmp_path / "parts"
    parts.mkdir()
    rows = 2
    n_files = len(b) // rows
    for i in range(n_files):
        _write_parquet(parts / f"p{i:05d}.parquet", a[i * rows : (i + 1) * rows],
                       b[i * rows : (i + 1) * rows], rows)  # fmt: skip
    whole = sources.read_parquet(parts)
    assert whole.numblocks[0] == 1  # 600 files, 1,200 rows: one block of far under 128 MiB
    np.testing.assert_array_equal(whole.compute(), np.column_stack([a, b]))
    # the target caps a block: 7 columns of 8 bytes, 400 rows a block at most
    monkeypatch.setattr(sources, "CHUNK_TARGET_BYTES", 400 * 8 * (a.shape[1] + 1))
    capped = sources.read_parquet(parts)
    assert capped.chunks[0] == (400, 400, 400)
    np.testing.assert_array_equal(capped.compute(), np.column_stack([a, b]))
    x, rep = lstsq(str(parts), "y", "normal", client=client)
    assert close(x, ref) and rep.row_blocks == 3


def test_parquet_directory_and_bad_columns(tmp_path, problem):
    a, b, _ = problem
    (tmp_path / "parts").mkdir()
    _write_parquet(tmp_path / "parts" / "p0.parquet", a[:600], b[:600], 300)
    _write_parquet(tmp_path / "parts" / "p1.parquet", a[600:], b[600:], 300)
    arr = read_parquet(tmp_path / "parts")
    assert arr.shape == (1200, 7)
    np.testing.assert_array_equal(arr.compute()[:, :6], a)
    with pytest.raises(InputError, match="no column 'z'"):
        read_problem(tmp_path / "parts", "z")


def test_parquet_nulls_become_nan_and_are_refused(client, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(
        pa.table({"x": [1.0, None, 3.0, 4.0], "y": [1.0, 2.0, 3.0, 4.0]}), tmp_path / "n.parquet"
    )
    with pytest.raises(InputError, match="1 NaN"):
        lstsq(str(tmp_path / "n.parquet"), "y", client=client)


def test_unknown_and_missing_files(tmp_path):
    (tmp_path / "a.csv").write_text("1,2\n")
    with pytest.raises(InputError, match="unknown format"):
        read_problem(tmp_path / "a.csv")
    with pytest.raises(InputError, match="no such file"):
        read_problem(tmp_path / "nope.npy")
    np.save(tmp_path / "v.npy", np.ones(5))
    with pytest.raises(InputError, match="last column is b"):
        read_problem(tmp_path / "v.npy")


def test_default_chunk_rows():
    # 400,000 × 1,000 float64 = 3.2 GB: 26 blocks of ≤ 128 MiB, an even number for 2 workers
    rows = default_chunk_rows(400_000, 1_000, 8, workers=2)
    blocks = -(-400_000 // rows)
    assert rows * 1_000 * 8 <= CHUNK_TARGET_BYTES and blocks % 2 == 0
    assert default_chunk_rows(100, 10, 8, workers=4) == 25
    assert default_chunk_rows(100, 60, 8, workers=4) == 61  # at least n + 1 rows
    assert default_chunk_rows(5, 10, 8, workers=4) == 5


def test_b_rechunked_to_a(problem):
    a, b, _ = problem
    p = as_dask_problem(da.from_array(a, chunks=(300, 6)), da.from_array(b, chunks=700))
    assert p.b.chunks[0] == p.A.chunks[0] == (300,) * 4
