"""The in-process engine: in-memory arrays and .npy files that fit are solved here, without a
cluster and without a copy of A; the hardest tall problems keep QR's accuracy."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

from gpuprobe.core.errors import InputError, UsageError
from gpuprobe.tools.scale import lstsq as L
from gpuprobe.tools.scale.lstsq import lstsq


def rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def test_numpy_input_runs_in_process_without_a_copy_of_a():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((60_000, 100))  # 48 MB
    b = a @ np.ones(100) + rng.standard_normal(60_000)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    tracemalloc.start()
    try:
        x, rep = lstsq(a, b, chunk_rows=10_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rep.engine.cluster == "in-process" and "no copy of A" in rep.engine_reason
    assert rep.source == "numpy" and rep.row_blocks == 6 and rep.workers_used == 1
    # blocks are views; what was allocated is per block (an extended-precision copy of one block
    # in refinement: 16 MB here), never a copy of A (48 MB)
    assert peak < 0.6 * a.nbytes
    assert rel(x, ref) <= 1e-12
    assert rep.residual_norm == pytest.approx(np.linalg.norm(b - a @ ref), rel=1e-12)
    # whole-call times with set-up shown apart
    assert rep.wall_s == pytest.approx(rep.setup_s + rep.solve_s)
    assert rep.communication_s == 0 and rep.compute_s == pytest.approx(rep.solve_s)
    text = str(rep)
    assert "in-process" in text and "set-up" in text


def test_other_layouts_and_dtypes_are_converted_block_by_block():
    rng = np.random.default_rng(1)
    a64 = rng.standard_normal((20_000, 40))
    b = a64 @ np.arange(40.0) + rng.standard_normal(20_000)
    for a in (np.asfortranarray(a64), a64.astype(np.float32), a64[:, ::1][::1]):
        ref = np.linalg.lstsq(a.astype(np.float64), b, rcond=None)[0]
        tracemalloc.start()
        try:
            x, rep = lstsq(a, b, chunk_rows=2_000)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert rel(x, ref) <= 1e-12 and rep.engine.cluster == "in-process"
        assert peak < 0.5 * a64.nbytes  # one converted block at a time, not all of A


def test_npy_that_fits_is_read_here(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5_000, 12))
    b = a @ np.ones(12) + rng.standard_normal(5_000)
    np.save(tmp_path / "Ab.npy", np.column_stack([a, b]))
    x, rep = lstsq(str(tmp_path / "Ab.npy"))
    assert rep.engine.cluster == "in-process" and rep.source == "npy"
    assert ".npy data" in rep.engine_reason
    assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-12


def test_engine_choice_and_reasons(client):
    a = np.random.default_rng(3).standard_normal((500, 3))
    b = a @ np.ones(3)
    _, rep = lstsq(a, b, client=client)
    assert rep.engine.cluster == "existing" and "client=" in rep.engine_reason
    da = pytest.importorskip("dask.array")
    _, rep = lstsq(da.from_array(a, chunks=(100, 3)), b, client=client)
    assert "client=" in rep.engine_reason
    with pytest.raises(UsageError, match="engine='gpu'"):
        lstsq(a, b, engine="gpu")
    with pytest.raises(UsageError, match="engine='in-process' cannot"):
        lstsq(a, b, "local-sgd", engine="in-process")


def test_kappa_1e12_tall_consistent_keeps_qrs_accuracy():
    # 100,000 × 50, κ = 1e12, b = A·x: numpy's rcond (eps·m = 2.2e-11) truncates it; the rank
    # threshold here is n·eps of the scaled R, so the full-rank QR solution is returned
    m, n = 100_000, 50
    rng = np.random.default_rng(4)
    u, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (u * np.geomspace(1.0, 1e-12, n)) @ v.T
    x_true = rng.standard_normal(n)
    b = a @ x_true
    q, r = np.linalg.qr(a)
    qr_err = rel(np.linalg.solve(r, q.T @ b), x_true)
    np_x, _, np_rank, _ = np.linalg.lstsq(a, b, rcond=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RankDeficiencyWarning
        x, rep = lstsq(a, b)
    assert rep.method == "tsqr" and rep.rank == n
    assert "lstsq-normal-switched-to-tsqr" in {f.id for f in rep.findings}
    assert rel(x, x_true) <= max(10 * qr_err, 1e-6)
    assert np_rank < n and rel(np_x, x_true) > 1e-2  # what the old eps·max(m, n) threshold did


def test_rank_threshold_does_not_grow_with_rows():
    # the same columns, 10× more rows: the rank decision is the same
    rng = np.random.default_rng(5)
    n = 20
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.geomspace(1.0, 3e-14, n)
    ranks = []
    for m in (2_000, 50_000):
        u, _ = np.linalg.qr(rng.standard_normal((m, n)))
        a = (u * s) @ v.T
        _, rep = lstsq(a, a @ np.ones(n), "tsqr")
        ranks.append(rep.rank)
    assert ranks == [n, n]
    assert L.RANK_RTOL_FACTOR * n * L.EPS64 < 3e-14 < L.EPS64 * 50_000


def test_bad_input_in_process():
    a = np.random.default_rng(6).standard_normal((1_000, 4))
    a[321, 1] = np.nan
    with pytest.raises(InputError, match=r"1 NaN and 0 Inf.*rows 0-999"):
        lstsq(a, np.ones(1_000))
    with pytest.raises(InputError, match="1000 rows but b has 999"):
        lstsq(np.ones((1_000, 3)), np.ones(999))
    with pytest.raises(InputError, match="empty"):
        lstsq(np.ones((0, 3)), np.ones(0))
    with pytest.raises(InputError, match="no such file"):
        lstsq("missing.npy")


def test_whole_a_passes_still_name_the_bad_rows(monkeypatch):
    monkeypatch.setattr(L, "LOCAL_BLOCK_BYTES", 8 * 4 * 100)  # blocks of 100 rows
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1_000, 4))
    b = a @ np.ones(4) + rng.standard_normal(1_000)
    x, rep = lstsq(a, b)  # C-contiguous float64: Gram and residual in one call each
    assert rep.row_blocks == 10 and rep.passes >= 2
    assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-12
    a[321, 2] = np.inf
    with pytest.raises(InputError, match=r"0 NaN and 1 Inf.*rows 300-399"):
        lstsq(a, b)
