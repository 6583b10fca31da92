"""gpuprobe.lstsq on one GPU in this process (tools/scale/device.py), tested on the CPU with NumPy
standing in for CuPy: the same session, the same planned cuBLAS calls (run by an emulator that
reads them as cuBLAS does and checks their bounds), counted rather than timed.

What the H200 showed (issue 30): a 1,000,000 × 1024 CuPy array went to a one-worker dask-cuda
cluster, 23.4 s of set-up and 62 Dask tasks per pass, 1.05 TFLOP/s useful. These tests hold the
replacement to a fixed number of products per pass, whatever the number of rows, no cluster, and
numpy.linalg.lstsq's answers. The gpu-marked tests at the end run the same calls through cuBLAS.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from gpuprobe.core.errors import InputError
from gpuprobe.tools.scale import dense
from gpuprobe.tools.scale import device as D
from gpuprobe.tools.scale import lstsq as L
from gpuprobe.tools.scale import solvers as S
from gpuprobe.tools.scale.lstsq import EPS64, NORMAL_MAX_KAPPA2_EPS, RankDeficiencyWarning, lstsq
from gpuprobe.tools.scale.rules import expected_error_bound


def rel(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def gram_from_plan(a: np.ndarray, split: int, panel_cols: int = D.GRAM_PANEL_COLS) -> np.ndarray:
    """AᵀA from the planned calls, run by the emulator, summed and mirrored as the session does."""
    m, n = a.shape
    ld = D.row_stride(a)
    assert ld is not None
    work = np.zeros((split, n, n))
    mem = np.lib.stride_tricks.as_strided(a, shape=((m - 1) * ld + n,), strides=(8,))
    for call in D.gram_plan(m, n, ld, split, panel_cols):
        D.emulate_gemm(call, mem, work.reshape(-1))
    h = work.sum(axis=0)
    return np.tril(h) + np.tril(h, -1).T


@pytest.fixture
def on_device(monkeypatch: pytest.MonkeyPatch) -> list[D.NumpyOps]:
    """NumPy arrays count as held by GPU 0, whose operations are :class:`NumpyOps` (returned, one
    per solve, to count their calls); a Dask cluster may not be started."""
    made: list[D.NumpyOps] = []

    def ops(dev: int) -> D.NumpyOps:
        assert dev == 0
        made.append(D.NumpyOps())
        return made[-1]

    def no_cluster(**kw: Any) -> None:
        raise AssertionError(f"a Dask cluster was started: {kw}")

    monkeypatch.setattr(D, "array_device", lambda a: 0 if isinstance(a, np.ndarray) else None)
    monkeypatch.setattr(D, "make_ops", ops)
    monkeypatch.setattr(L, "open_engine", no_cluster)
    return made


# -- the Gram plan: cuBLAS's arguments, checked by the emulator -----------------------------------


@pytest.mark.parametrize(
    ("m", "n", "ld", "split", "panel"),
    [
        (5000, 300, 300, 1, 256),  # two panels, one piece
        (5000, 300, 310, 7, 256),  # columns sliced from a wider array; 5000 = 7·714 + 2 rows left
        (1000, 64, 64, 4, 16),  # four panels of 16 columns
        (100, 7, 7, 3, 256),
        (3, 5, 5, 7, 2),  # fewer rows than pieces: all rows in the remainder call
    ],
)
def test_gram_plan_computes_ata(m, n, ld, split, panel):
    big = np.random.default_rng(0).standard_normal((m, ld))
    a = big[:, :n]
    g = gram_from_plan(a, split, panel)
    np.testing.assert_allclose(g, a.T @ a, rtol=1e-12, atol=1e-12 * m)
    calls = D.gram_plan(m, n, ld, split, panel)
    panels = -(-n // panel)
    left = m % split
    assert len(calls) == panels * ((m >= split) + (left > 0))
    # the triangle only: each panel from its diagonal block rightwards
    assert sum(c.flops for c in calls) == D.gram_flops(m, n, panel)
    assert D.gram_flops(m, n, panel) == sum(
        2 * min(panel, n - c0) * (n - c0) * m for c0 in range(0, n, panel)
    )


def test_panels_execute_five_eighths_of_a_gemm_at_1024_columns():
    # n = 1024 in panels of 256: (k+1)/(2k) with k = 4 of a full GEMM's 2mn²
    assert D.gram_flops(1_000_000, 1024) == pytest.approx(0.625 * 2 * 1_000_000 * 1024**2)
    assert D.gram_flops(1000, 256) == 2 * 1000 * 256**2  # one panel: a plain GEMM


def test_the_number_of_products_does_not_grow_with_the_rows():
    n, ld = 1024, 1024
    counts = {len(D.gram_plan(m, n, ld, 32)) for m in (64_000, 1_000_000, 50_000_000)}
    assert counts == {4}  # one strided-batched GEMM per panel, rows divisible by 32
    assert len(D.gram_plan(1_000_001, n, ld, 32)) == 8  # and one for the rows left over


def test_emulator_refuses_what_would_leave_the_buffers():
    a = np.zeros(100)
    c = np.zeros(16)
    ok = D.GemmCall("N", "T", 4, 4, 10, 0, 10, 0, 0, 10, 0, 0, 4, 0, 1)
    D.emulate_gemm(ok, a, c)  # 4 × 10 reads of A with ld 10: elements 0..93
    with pytest.raises(IndexError, match="outside a buffer of 100"):
        D.emulate_gemm(D.GemmCall("N", "T", 4, 4, 10, 7, 10, 0, 0, 10, 0, 0, 4, 0, 1), a, c)
    with pytest.raises(IndexError, match="C: elements"):
        D.emulate_gemm(D.GemmCall("N", "T", 4, 4, 10, 0, 10, 0, 0, 10, 0, 1, 4, 0, 1), a, c)
    with pytest.raises(ValueError, match="leading dimension 3 < 4"):
        D.emulate_gemm(D.GemmCall("N", "T", 4, 4, 10, 0, 3, 0, 0, 10, 0, 0, 4, 0, 1), a, c)
    with pytest.raises(ValueError, match="row stride 3 is less than the 4 columns"):
        D.gram_plan(10, 4, 3, 1)


def test_gram_split_by_tiles_rows_and_memory():
    gib = 2**30
    # 1M × 1024: 32 pieces give 2²⁵ output elements; 256 MiB of workspace
    assert D.gram_split(1_000_000, 1024, 30 * gib) == 32
    assert D.gram_split(1_000_000, 1024, 100 * 2**20) == 12  # 100 MiB: 12 n × n workspaces
    assert D.gram_split(10_000, 1024, 30 * gib) == 4  # pieces of at least 2048 rows
    assert D.gram_split(1_000_000, 8192, 30 * gib) == 1  # a wide Gram has tiles enough
    assert D.gram_split(1_000_000, 16, 30 * gib) == D.GRAM_MAX_SPLIT
    assert D.gram_split(100, 4, 0) == 1


def test_row_stride():
    a = np.zeros((10, 4))
    assert D.row_stride(a) == 4
    assert D.row_stride(np.zeros((10, 6))[:, :4]) == 6
    assert D.row_stride(np.asfortranarray(a)) is None
    assert D.row_stride(a.astype(np.float32)) is None
    assert D.row_stride(np.zeros((10, 8))[:, ::2]) is None


# -- the solve: one process, a fixed number of products, numpy's answers ----------------------


def problem(m: int, n: int, cond: float = 10.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (u * np.geomspace(1.0, 1.0 / cond, n)) @ v.T
    return a, a @ rng.standard_normal(n) + 0.1 * rng.standard_normal(m)


@pytest.mark.parametrize("method", ["normal", "tsqr", "auto"])
def test_single_array_matches_numpy_in_this_process(on_device, method):
    a, b = problem(6000, 40)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    x, rep = lstsq(a, b, method, reference="numpy")
    assert rel(x, ref) <= 1e-12
    assert rep.error_vs_reference == pytest.approx(rel(x, ref))
    assert rep.residual_norm == pytest.approx(np.linalg.norm(b - a @ ref), rel=1e-12)
    assert rep.method == ("tsqr" if method == "tsqr" else "normal")
    assert rep.engine.kind == "gpu" and rep.engine.cluster == "in-process"
    assert rep.engine.devices == (0,) and rep.workers_used == 1
    assert "solved there in this process" in rep.engine_reason
    assert rep.row_blocks == 1 and rep.col_blocks == 1  # A in place: one chunk
    # honest times: the whole call, set-up apart, all of the solve compute (no cluster)
    assert rep.wall_s == pytest.approx(rep.setup_s + rep.solve_s)
    assert rep.compute_s == pytest.approx(rep.solve_s) and rep.communication_s == 0
    assert "lstsq-reference-agreement" in {f.id for f in rep.findings}
    text = str(rep)
    assert "GPU 0" in text and "NumPy standing in for CuPy" in text


def test_the_n_by_n_factor_is_made_where_a_is(on_device, monkeypatch):
    """On the H200 (2026-11-26) the host's Cholesky of the 1024 × 1024 Gram took half of a
    77 ms solve: a GPU session factors on the device (here NumPy standing in), never on the host."""
    factored: list[tuple[int, int]] = []
    real = np.linalg.cholesky

    def on_card(g: Any) -> Any:
        factored.append(g.shape)
        return real(g)

    def on_host(g: Any, lapack: Any) -> Any:
        raise AssertionError("the host factored the Gram of a GPU session")

    monkeypatch.setattr(np.linalg, "cholesky", on_card)  # NumpyOps.xp is NumPy
    monkeypatch.setattr(dense, "_factor", on_host)
    a, b = problem(4000, 30, cond=1e3)
    x, rep = lstsq(a, b, "normal", max_refine=1)
    assert factored == [(30, 30)]
    assert rep.method == "normal" and rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-11
    # the condition estimate reads the device's factor: κ₁ of the scaled Gram, within √n of κ₂
    ratio = rep.cond_estimate / np.linalg.cond(a / np.linalg.norm(a, axis=0))
    assert 1 / np.sqrt(30) <= ratio <= np.sqrt(30), ratio


def test_products_per_pass_do_not_grow_with_the_rows(on_device):
    """The Dask path made one task per row block per pass (62 on the H200, a sync and a copy of an
    n × n partial result each); here a pass is a fixed set of products whatever m is."""
    seen = []
    for m in (4_096, 65_536):
        a, b = problem(m, 24, seed=m)
        x, rep = lstsq(a, b, "normal", max_refine=0)
        ops = on_device[-1]
        assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-12
        assert rep.passes == 2  # the Gram pass and one residual pass
        seen.append((len(ops.calls), ops.syncs, rep.row_blocks))
    # the Gram: one batched GEMM (24 columns are one panel; m divisible by the pieces);
    # syncs: Aᵀb, bᵀb and the summed Gram, the Cholesky factor made on the card, then Aᵀr and
    # ‖r‖² of the residual pass
    assert seen == [(1, 6, 1), (1, 6, 1)]
    # more rows: more pieces side by side in the one call (2, then 32 of 2048 rows), not more calls
    assert [ops.calls[0].batch for ops in on_device] == [2, 32]


def test_other_layouts_and_dtypes_are_converted_in_chunks_sized_by_free_memory(on_device):
    a64, b = problem(20_000, 30, seed=1)
    ref = np.linalg.lstsq(a64, b, rcond=None)[0]
    free = int(5000 * 8 * 30 / D.DEVICE_WORK_FRACTION)  # room for chunks of 5000 rows
    for a in (np.asfortranarray(a64), a64.astype(np.float32), np.hstack([a64, a64])[:, :30]):
        ref_a = np.linalg.lstsq(a.astype(np.float64), b, rcond=None)[0]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(D.NumpyOps, "free_bytes", lambda self: free)
            x, rep = lstsq(a, b, "normal", max_refine=0)
        assert rel(x, ref_a) <= 1e-12 and rel(ref_a, ref) <= 1e-5
        assert rep.row_blocks == 4
        # one batched product per chunk: as many products as chunks, not as rows
        assert len(on_device[-1].calls) == 4


def test_chunk_rows_given(on_device):
    a, b = problem(3000, 20, seed=2)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    for method in ("normal", "tsqr"):
        x, rep = lstsq(a, b, method, chunk_rows=500)
        assert rep.row_blocks == 6 and rel(x, ref) <= 1e-12


def test_refinement_as_on_workers(on_device):
    a, b = problem(2000, 30, cond=1e3, seed=3)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "REFINE_CHEAP_ELEMENTS", 0)  # refine as a large A would be
        _, rep0 = lstsq(a, b, "normal", max_refine=0)
        x2, rep2 = lstsq(a, b, "normal", max_refine=2)
    assert rep0.passes == 2 and rep0.refinement_steps == 0
    assert rep2.passes == 2 and rep2.refinement_steps == 1
    assert rep2.residual_norm == pytest.approx(np.linalg.norm(b - a @ ref), rel=1e-12)
    assert rel(x2, ref) <= expected_error_bound(1e3)
    # a small A is refined until no component changes; a GPU has no wider float than float64
    _, rep3 = lstsq(a, b, "normal")
    assert rep3.engine.kind == "gpu" and rep3.passes >= 3 and rep3.extended_passes == 0


def test_no_pass_is_called_extended_on_a_gpu(on_device, monkeypatch):
    """_refine switched to "extended" passes when the predicted float64 error was large, on a GPU
    too, where the passes stay float64: the report counted extended passes never made."""
    monkeypatch.setattr(S, "REFINE_CHEAP_ELEMENTS", 0)
    a, b = problem(3000, 30, cond=1e5, seed=10)  # κ²·eps ≈ 2e-6: normal, predicted error > 1e-10
    x, rep = lstsq(a, b, "normal")
    assert rep.method == "normal" and rep.refinement_steps >= 1
    assert rep.extended_passes == 0
    assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= expected_error_bound(1e5)


@pytest.mark.parametrize(("requested", "switched"), [("normal", "warn"), ("auto", "info")])
def test_ill_conditioned_switches_to_tsqr(on_device, requested, switched):
    kappa = 1e8
    assert kappa**2 * EPS64 > NORMAL_MAX_KAPPA2_EPS
    a, b = problem(3000, 30, cond=kappa, seed=4)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    x, rep = lstsq(a, b, requested)
    found = {f.id: f for f in rep.findings}["lstsq-normal-switched-to-tsqr"]
    assert rep.method == "tsqr" and found.status.value == switched
    assert rep.passes == 2  # the Gram pass, then one TSQR pass
    assert rel(x, ref) <= expected_error_bound(kappa)


def test_rank_deficient_gives_minimum_norm(on_device):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1500, 12))
    a[:, 7] = a[:, 2]
    b = rng.standard_normal(1500)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    with pytest.warns(RankDeficiencyWarning, match="rank 11 < 12"):
        x, rep = lstsq(a, b, "normal")
    assert rep.method == "tsqr" and rep.rank == 11 and rel(x, ref) <= 1e-10


@pytest.mark.parametrize("method", ["normal", "tsqr"])
def test_nan_and_inf_name_their_rows(on_device, method, monkeypatch):
    monkeypatch.setattr(D, "SCAN_BLOCK_BYTES", 1000 * 8 * 5)  # rows searched 1000 at a time
    a, b = problem(5000, 5, seed=6)
    a[2345, 3] = np.nan
    with pytest.raises(InputError, match=r"A has 1 NaN and 0 Inf.*rows 2000-2999"):
        lstsq(a, b, method)
    a[2345, 3] = 1.0
    b[4100] = np.inf
    with pytest.raises(InputError, match=r"b has 0 NaN and 1 Inf in rows 4000-4999"):
        lstsq(a, b, method)
    b[4100] = 1.0
    a[10, 0] = 1e200
    with pytest.raises(InputError, match=r"too large to square.*1e\+200"):
        lstsq(a, b, "normal")


def test_bad_input_is_one_line(on_device):
    with pytest.raises(InputError, match="A has 10 rows but b has 9"):
        lstsq(np.ones((10, 2)), np.ones(9))
    with pytest.raises(InputError, match="b is missing"):
        lstsq(np.ones((10, 2)))


# -- which solves run on one GPU here --------------------------------------------------------------


def test_route(monkeypatch):
    monkeypatch.setattr(D, "array_device", lambda a: 1 if isinstance(a, np.ndarray) else None)
    monkeypatch.setattr(D, "gpu_count", lambda: 2)
    a, b = np.ones((4, 2)), np.ones(4)
    assert D.route(a, b, "auto", None, False)[0] == 1
    assert D.route(a, b, "tsqr", "gpu", False)[0] == 1
    assert D.route(a, b, "normal", [1], False)[0] == 1
    assert D.route(a, b, "normal", [0, 1], False) is None  # several GPUs asked: Dask workers
    assert D.route(a, b, "normal", None, True) is None  # client, scheduler, workers or dask
    assert D.route(a, b, "local-sgd", None, False) is None
    monkeypatch.setattr(D, "array_device", lambda a: None)  # host data
    assert D.route(a, b, "auto", None, False) is None  # stays on the CPU
    assert D.route(a, b, "auto", "gpu", False) is None  # two GPUs: one worker each
    assert D.route(a, b, "auto", [1], False)[0] == 1
    assert D.route(a, b, "auto", [2], False) is None  # no GPU 2: the cluster path says so
    monkeypatch.setattr(D, "gpu_count", lambda: 1)
    got = D.route(a, b, "auto", "gpu", False)
    assert got is not None and got[0] == 0 and "copied to it once" in got[1]
    assert D.route("A.npy", None, "auto", "gpu", False) is None


def test_host_data_copied_once_or_sent_to_workers_when_it_does_not_fit(monkeypatch):
    made: list[D.NumpyOps] = []
    monkeypatch.setattr(D, "gpu_count", lambda: 1)
    monkeypatch.setattr(D, "make_ops", lambda dev: made.append(D.NumpyOps()) or made[-1])
    a, b = problem(2000, 8, seed=7)
    x, rep = lstsq(a, b, "normal", devices="gpu")
    assert rep.engine.cluster == "in-process" and rep.engine.kind == "gpu"
    assert rep.source == "numpy" and rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-12
    assert rep.setup_s >= 0 and "copied to it once" in rep.engine_reason

    class Sent(Exception):
        pass

    def engine(**kw: Any) -> None:
        raise Sent(kw)

    monkeypatch.setattr(L, "open_engine", engine)
    monkeypatch.setattr(D.NumpyOps, "free_bytes", lambda self: a.nbytes)  # 2× A needed free
    with pytest.raises(Sent, match="'devices': 'gpu'"):
        lstsq(a, b, "normal", devices="gpu")


# -- on a card: the same calls through cuBLAS --------------------------------------------------


from test_parallel_lstsq import _gpu  # noqa: E402 (the same check as the Dask GPU tests)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA GPU and CuPy")
@pytest.mark.parametrize(("m", "n", "ld", "split"), [(5000, 300, 300, 7), (4099, 520, 530, 4)])
def test_cublas_calls_compute_ata(m, n, ld, split):
    import cupy

    big = cupy.asarray(np.random.default_rng(8).standard_normal((m, ld)))
    a = big[:, :n]
    ops = D.CupyOps(0)
    work = cupy.zeros((split, n, n))
    for call in D.gram_plan(m, n, ld, split):
        ops.gemm(call, a, work)
    h = cupy.asnumpy(work.sum(axis=0))
    g = np.tril(h) + np.tril(h, -1).T
    ah = cupy.asnumpy(a)
    np.testing.assert_allclose(g, ah.T @ ah, rtol=1e-12, atol=1e-12 * m)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA GPU and CuPy")
@pytest.mark.parametrize("method", ["normal", "tsqr"])
def test_cupy_array_is_solved_on_its_gpu_in_this_process(method):
    import cupy

    a, b = problem(20_000, 64, cond=100.0, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Dask warning: no cluster
        x, rep = lstsq(cupy.asarray(a), cupy.asarray(b), method)
    assert rep.engine.cluster == "in-process" and rep.engine.kind == "gpu"
    assert "cuBLAS" in (rep.engine.blas_library or "") and rep.row_blocks == 1
    assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-11
