"""gpuprobe.lstsq against numpy.linalg.lstsq on a two-worker Dask cluster shared by the module."""

from __future__ import annotations

import importlib.util
import json
import math
import warnings
from typing import Any

import numpy as np
import pytest

from gpuprobe.core.errors import InputError, UsageError
from gpuprobe.core.findings import Status
from gpuprobe.tools.scale import kernels as K
from gpuprobe.tools.scale import lstsq as L
from gpuprobe.tools.scale import solvers as S
from gpuprobe.tools.scale.lstsq import (
    EPS64,
    NORMAL_MAX_KAPPA2_EPS,
    LstsqReport,
    RankDeficiencyWarning,
    SgdSettings,
    lstsq,
)
from gpuprobe.tools.scale.rules import expected_error_bound

da = pytest.importorskip("dask.array")

# ulps (relative): dpocon's uplo="L" and uplo="U" paths on one factor round apart; 2 ulps
# (18464.33593573234 vs 18464.335935732346) on an H200 host's Xeon, 0 here
KAPPA_ULPS = 8


def rel(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def scaled_cond(a: np.ndarray) -> float:
    """κ₂ of A with its columns scaled to unit norm: the κ gpuprobe.lstsq reports."""
    return float(np.linalg.cond(a / np.linalg.norm(a, axis=0)))


def ids(report: LstsqReport) -> dict[str, Any]:
    return {f.id: f for f in report.findings}


# -- exact methods against numpy ----------------------------------------------------------------


@pytest.mark.parametrize("method", ["normal", "tsqr", "auto"])
def test_well_conditioned_matches_numpy(client, conditioned, rhs, numpy_solution, method):
    a = conditioned(3000, 40, cond=10.0)
    b = rhs(a)
    ref = numpy_solution(a, b)
    x, rep = lstsq(a, b, method, client=client, chunk_rows=400, reference="numpy")
    assert rel(x, ref) <= 1e-12
    assert rep.error_vs_reference == pytest.approx(rel(x, ref))
    assert rep.residual_norm == pytest.approx(np.linalg.norm(b - a @ ref), rel=1e-12)
    # κ of A with unit-norm columns: what the method choice and the rank decision use; tsqr
    # reads it from R's singular values, normal from LAPACK's estimator on the Cholesky factor
    if rep.method == "tsqr":
        assert rep.cond_estimate == pytest.approx(scaled_cond(a), rel=1e-6)
    else:
        assert scaled_cond(a) <= rep.cond_estimate * (1 + 1e-9) <= 2.5 * scaled_cond(a)
    assert rep.method == ("tsqr" if method == "tsqr" else "normal")
    assert rep.exact and rep.rank == 40
    assert rep.row_blocks == 8 and rep.col_blocks == 1
    assert rep.workers_used == 2
    assert rep.cpu_per_worker is not None and rep.cpu_per_worker > 0
    assert rep.wall_s >= rep.compute_s >= 0 and rep.communication_s >= 0
    # the whole call: set-up (wrapping the input here) plus the solve
    assert rep.setup_s + rep.compute_s + rep.communication_s == pytest.approx(rep.wall_s)
    assert rep.solve_s == pytest.approx(rep.wall_s - rep.setup_s)
    assert rep.engine.cluster == "existing" and "client=" in rep.engine_reason
    assert ids(rep)["lstsq-reference-agreement"].status is Status.OK


def test_normal_refines_and_reads_a_once_more_per_pass(client, conditioned, rhs, monkeypatch):
    monkeypatch.setattr(S, "REFINE_CHEAP_ELEMENTS", 0)  # refine as a large A would be
    a = conditioned(2000, 30, cond=1e3)
    b = rhs(a)
    x0, rep0 = lstsq(a, b, "normal", client=client, max_refine=0)
    x2, rep2 = lstsq(a, b, "normal", client=client, max_refine=2)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    assert rep0.passes == 2 and rep0.refinement_steps == 0  # Gram pass + residual pass
    # one correction; the next would be below x's rounding (‖dx‖·κ²·eps), so no third pass: the
    # residual norm of the corrected x is updated from the Gram matrix instead
    assert rep2.passes == 2 and rep2.refinement_steps == 1
    assert rep2.residual_norm == pytest.approx(np.linalg.norm(b - a @ ref), rel=1e-12)
    # refinement never makes it worse, and both sit inside the normal equations' bound
    assert rel(x2, ref) <= rel(x0, ref) * 1.5 + 1e-15
    assert rel(x2, ref) <= expected_error_bound(1e3)
    # a small A is refined until no component changes, in extended precision where there is one
    monkeypatch.undo()
    x3, rep3 = lstsq(a, b, "normal", client=client)
    assert rep3.passes >= 3 and rep3.refinement_steps >= 1
    assert rep3.extended_passes == (rep3.passes - 1 if L.EXTENDED_AVAILABLE else 0)
    assert rel(x3, ref) <= expected_error_bound(1e3)


def test_moderately_ill_conditioned_stays_normal(client, conditioned, rhs):
    kappa = 1e4  # κ²·eps = 2.2e-8: below the switch
    assert kappa**2 * EPS64 < NORMAL_MAX_KAPPA2_EPS
    a = conditioned(3000, 30, cond=kappa)
    b = rhs(a)
    _, rep = lstsq(a, b, "normal", client=client, chunk_rows=500, reference="numpy")
    assert rep.method == "normal" and "lstsq-normal-switched-to-tsqr" not in ids(rep)
    assert scaled_cond(a) <= rep.cond_estimate * (1 + 1e-9) <= 2.5 * scaled_cond(a)
    assert rep.error_vs_reference <= expected_error_bound(kappa)


@pytest.mark.parametrize(("requested", "status"), [("normal", Status.WARN), ("auto", Status.INFO)])
def test_ill_conditioned_switches_to_tsqr(client, conditioned, rhs, requested, status):
    kappa = 1e8
    a = conditioned(3000, 30, cond=kappa)
    b = rhs(a, noise=1e-6)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    x, rep = lstsq(a, b, requested, client=client, chunk_rows=500)
    switched = ids(rep)["lstsq-normal-switched-to-tsqr"]
    assert rep.method == "tsqr" and rep.requested == requested
    assert switched.status is status
    assert rep.passes == 2  # the Gram pass, then one TSQR pass
    # tsqr's κ comes from the singular values of R, not squared
    assert rep.cond_estimate == pytest.approx(scaled_cond(a), rel=1e-2)
    assert rel(x, ref) <= expected_error_bound(kappa)
    assert rep.residual_norm == pytest.approx(np.linalg.norm(b - a @ ref), rel=1e-6)


def test_tsqr_is_more_accurate_than_the_normal_bound(client, conditioned):
    # a consistent system (zero residual): QR's error is κ·eps, the normal equations' κ²·eps
    kappa = 1e6
    a = conditioned(2000, 20, cond=kappa, seed=3)
    x_true = np.random.default_rng(4).standard_normal(20)
    x, rep = lstsq(a, a @ x_true, "tsqr", client=client, chunk_rows=300)
    assert rel(x, x_true) <= 1e3 * kappa * EPS64
    assert rep.residual_norm <= 1e-8 * np.linalg.norm(a @ x_true)


@pytest.mark.parametrize("method", ["tsqr", "normal"])
def test_rank_deficient_gives_minimum_norm_with_warning(client, rhs, method):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1500, 12))
    a[:, 7] = a[:, 2]  # two columns the same
    a[:, 9] = a[:, 0] - a[:, 4]  # one a combination of others
    b = rhs(a)
    ref, _, rank, _ = np.linalg.lstsq(a, b, rcond=None)  # numpy's minimum-norm solution
    assert rank == 10
    with pytest.warns(RankDeficiencyWarning, match="rank 10 < 12"):
        x, rep = lstsq(a, b, method, client=client, chunk_rows=250)
    assert rep.method == "tsqr" and rep.rank == 10
    assert ids(rep)["lstsq-rank-deficient"].status is Status.WARN
    assert rel(x, ref) <= 1e-10
    assert np.isinf(rep.cond_estimate) or rep.cond_estimate > 1e12


def test_tall_skinny(client, rhs, numpy_solution):
    a = np.random.default_rng(6).standard_normal((40_000, 4))
    b = rhs(a)
    for method in ("normal", "tsqr"):
        x, rep = lstsq(a, b, method, client=client, chunk_rows=5000)
        assert rel(x, numpy_solution(a, b)) <= 1e-12
        assert rep.row_blocks == 8


@pytest.mark.parametrize("method", ["normal", "tsqr"])
def test_wide_column_chunks(client, conditioned, rhs, numpy_solution, method):
    a = conditioned(2400, 45, cond=50.0)
    b = rhs(a)
    da_a = da.from_array(a, chunks=(300, 7))  # 8 × 7 blocks: dask's own lstsq refuses this
    da_b = da.from_array(b, chunks=500)  # other row chunks: rechunked to A's
    x, rep = lstsq(da_a, da_b, method, client=client)
    assert (rep.row_blocks, rep.col_blocks) == (8, 7)
    assert rep.source == "dask"
    assert rel(x, numpy_solution(a, b)) <= 1e-11


def test_fewer_rows_than_columns_minimum_norm(client):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((30, 50)), rng.standard_normal(30)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    with pytest.warns(RankDeficiencyWarning):
        x, rep = lstsq(a, b, "auto", client=client, chunk_rows=10)
    assert rep.method == "tsqr" and rep.rank == 30
    assert rel(x, ref) <= 1e-10
    assert rep.residual_norm <= 1e-10 * np.linalg.norm(b)


def test_blocks_shorter_than_columns(client, conditioned, rhs, numpy_solution):
    a = conditioned(600, 40, cond=20.0)  # 20 rows per block, 41 columns in [A b]
    b = rhs(a)
    x, rep = lstsq(a, b, "tsqr", client=client, chunk_rows=20)
    assert rep.row_blocks == 30
    assert rel(x, numpy_solution(a, b)) <= 1e-12


def test_float32_and_int_inputs_are_solved_in_float64(client, rhs):
    a = np.random.default_rng(8).standard_normal((1000, 6)).astype(np.float32)
    b = rhs(a.astype(np.float64)).astype(np.float32)
    ref = np.linalg.lstsq(a.astype(np.float64), b.astype(np.float64), rcond=None)[0]
    x, _ = lstsq(a, b, "normal", client=client)
    assert x.dtype == np.float64 and rel(x, ref) <= 1e-12
    ai = np.arange(1, 31, dtype=np.int64).reshape(10, 3) ** np.array([0, 1, 2])
    xi, _ = lstsq(ai, np.ones(10, dtype=np.int64), "tsqr", client=client)
    assert rel(xi, np.linalg.lstsq(ai.astype(float), np.ones(10), rcond=None)[0]) <= 1e-8


def test_torch_tensor_input(client, rhs):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(9).standard_normal((800, 5))
    b = rhs(a)
    x, rep = lstsq(torch.from_numpy(a), torch.from_numpy(b).reshape(-1, 1), client=client)
    assert rep.source == "torch"
    assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-12


def test_reference_array_and_report_round_trip(client, conditioned, rhs):
    a = conditioned(1000, 8, cond=3.0)
    b = rhs(a)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    _, rep = lstsq(a, b, "tsqr", client=client, reference=ref)
    assert rep.reference == "given" and rep.error_vs_reference <= 1e-13
    assert rep.reference_residual_norm == pytest.approx(rep.residual_norm, rel=1e-12)
    again = LstsqReport.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert again == rep
    assert "tsqr" in repr(rep) and "residual" in repr(rep)
    assert "<table>" in rep._repr_html_() and "tsqr" in str(rep)
    assert rep.engine.cluster == "existing" and rep.engine.workers == 2


# -- local-sgd: E6's baseline --------------------------------------------------------------------


def test_local_sgd_is_reported_as_an_approximation(client):
    rng = np.random.default_rng(10)
    a, b = rng.random((2000, 20)), rng.random(2000)  # E6's uniform data, smaller
    exact = np.linalg.lstsq(a, b, rcond=None)[0]
    cfg = SgdSettings(epochs=5, iters_per_epoch=100, batch_rows=200, lr=1e-3)
    x, rep = lstsq(a, b, "local-sgd", client=client, chunk_rows=250, sgd=cfg)
    assert rep.method == "local-sgd" and not rep.exact
    assert rep.distance_from_exact == pytest.approx(rel(x, exact), rel=1e-6)
    assert rep.distance_from_exact > 1e-3  # averaging local SGD models is not the solution
    assert rep.residual_norm > rep.exact_residual_norm
    assert rep.exact_residual_norm == pytest.approx(np.linalg.norm(b - a @ exact), rel=1e-10)
    f = ids(rep)["lstsq-local-sgd-approximate"]
    assert f.status is Status.WARN and "approximation" in f.title
    # deterministic: the same seed gives the same model
    x2, _ = lstsq(a, b, "local-sgd", client=client, chunk_rows=250, sgd=cfg)
    np.testing.assert_array_equal(x, x2)


# -- bad input ---------------------------------------------------------------------------------


def test_nan_in_a_names_the_rows(client):
    a = np.random.default_rng(11).standard_normal((1000, 4))
    a[613, 2] = np.nan
    for method in ("normal", "tsqr", "auto"):
        with pytest.raises(InputError, match=r"1 NaN and 0 Inf.*rows 600-799"):
            lstsq(a, np.ones(1000), method, client=client, chunk_rows=200)


def test_inf_in_b(client):
    b = np.ones(500)
    b[7] = np.inf
    with pytest.raises(InputError, match=r"b has 0 NaN and 1 Inf in rows 0-99"):
        lstsq(np.eye(500)[:, :3] + 1.0, b, client=client, chunk_rows=100)


def test_values_too_large_to_square(client):
    a = np.ones((100, 2))
    a[3, 0] = 1e200
    with pytest.raises(InputError, match="too large to square"):
        lstsq(a, np.ones(100), "normal", client=client)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (np.ones((10, 3)), np.ones(9), "A has 10 rows but b has 9"),
        (np.ones((0, 3)), np.ones(0), "A is empty"),
        (np.ones((5, 0)), np.ones(5), "A is empty"),
        (np.ones(5), np.ones(5), "A must be a matrix"),
        (np.ones((5, 2)), np.ones((5, 2)), "b must be a vector"),
        (np.ones((5, 2), dtype=complex), np.ones(5), "complex"),
        (np.array([["a", "b"]]), np.ones(1), "dtype"),
        (np.ones((5, 2)), None, "b is missing"),
    ],
)
def test_bad_shapes_and_types(client, a, b, match):
    with pytest.raises(InputError, match=match):
        lstsq(a, b, client=client)


def test_bad_arguments():
    with pytest.raises(UsageError, match="method='qr'"):
        lstsq(np.ones((3, 2)), np.ones(3), "qr")
    with pytest.raises(UsageError, match="reference='scipy'"):
        lstsq(np.ones((3, 2)), np.ones(3), reference="scipy")


def test_missing_dask_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "distributed" else real(name)
    )
    with pytest.raises(UsageError, match=r"pip install 'gpuprobe\[dask\]'"):
        lstsq(np.ones((3, 2)), np.ones(3), engine="dask")
    # in memory, no cluster is needed
    x, rep = lstsq(np.eye(3, 2), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(x, [1.0, 2.0], rtol=1e-15)
    assert rep.engine.cluster == "in-process"


# -- the engine it starts itself ------------------------------------------------------------------


def test_own_local_cluster_is_sized_and_closed(rhs):
    from gpuprobe.tools.scale.engine import available_cores, blas_info

    before = blas_info()["threads"]
    a = np.random.default_rng(12).standard_normal((600, 5))
    _, rep = lstsq(a, rhs(a), "normal", engine="dask")
    e = rep.engine
    assert e.owned and e.cluster == "LocalCluster" and e.processes is False
    assert rep.engine_reason == "engine='dask' asked"
    assert e.workers == available_cores() and e.threads_per_worker == 1
    if e.blas_threads is not None:
        assert e.blas_threads * e.workers <= max(available_cores(), 1)
        assert blas_info()["threads"] == before  # this process's BLAS put back
    assert rep.setup_s > 0


def test_split_times_busiest_worker():
    recs = [
        {"worker": "w1", "startstops": [{"action": "compute", "start": 0.0, "stop": 2.0}]},
        {
            "worker": "w1",
            "startstops": [
                {"action": "transfer", "start": 2.0, "stop": 2.5},
                {"action": "compute", "start": 2.5, "stop": 3.0},
            ],
        },
        {"worker": "w2", "startstops": [{"action": "compute", "start": 0.0, "stop": 1.0}]},
    ]
    t = S._split_times(recs, wall=4.0, dense=0.25)
    assert t["compute_s"] == pytest.approx(2.75)
    assert t["communication_s"] == pytest.approx(1.25)
    assert t["transfer_s"] == pytest.approx(0.5)
    assert t["workers_used"] == 2
    assert S._split_times([], wall=1.0, dense=5.0)["communication_s"] == 0.0


def test_expected_error_bound():
    assert expected_error_bound(1.0) == 1e-10
    assert expected_error_bound(1e6) == pytest.approx(10 * 1e12 * EPS64)
    assert math.isinf(expected_error_bound(None))


# -- GPU: CuPy chunks, one worker per GPU -------------------------------------------------------


def _gpu() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.parametrize("method", ["normal", "tsqr"])
@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA GPU and CuPy")
def test_cupy_chunks_match_numpy(client, conditioned, rhs, method):
    import cupy

    a = conditioned(4000, 32, cond=100.0)
    b = rhs(a)
    da_a = da.from_array(cupy.asarray(a), chunks=(500, 32), asarray=False)
    da_b = da.from_array(cupy.asarray(b), chunks=500, asarray=False)
    x, rep = lstsq(da_a, da_b, method, client=client, devices="gpu")
    assert rep.engine.kind == "gpu"
    assert rel(x, np.linalg.lstsq(a, b, rcond=None)[0]) <= 1e-11


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA GPU and CuPy")
def test_numpy_blocks_moved_to_gpu_and_cupy_input_alone(conditioned, rhs):
    import cupy

    a = conditioned(3000, 16, cond=10.0)
    b = rhs(a)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    # a CuPy array alone is solved on its GPU in this process: on the H200 a one-worker
    # LocalCUDACluster took 23.4 s to start and receive 7.6 GB (issue 30)
    x, rep = lstsq(cupy.asarray(a), cupy.asarray(b), "normal")
    assert rep.engine.cluster == "in-process" and rep.engine.kind == "gpu"
    assert rel(x, ref) <= 1e-11
    if importlib.util.find_spec("dask_cuda") is None:
        pytest.skip("own GPU cluster needs dask-cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, rep = lstsq(a, b, "normal", devices="gpu", engine="dask")
    assert rep.engine.cluster == "LocalCUDACluster" and rep.engine.kind == "gpu"
    assert rel(x, ref) <= 1e-11


def test_public_api_and_memory_released_after_failure(client, monkeypatch):
    import gpuprobe
    from gpuprobe import api

    assert gpuprobe.lstsq is api.lstsq  # the typed public function, which calls lstsq
    calls = []
    monkeypatch.setattr(L, "release_memory", lambda c: calls.append(c))
    a = np.ones((50, 2))
    a[0, 0] = np.inf
    with pytest.raises(InputError):
        gpuprobe.lstsq(a, np.ones(50), client=client)
    assert calls == [client]


@pytest.mark.parametrize("scipy_present", [True, False])
def test_cholesky_solves_with_or_without_scipy(monkeypatch, conditioned, scipy_present):
    if not scipy_present:
        monkeypatch.setitem(__import__("sys").modules, "scipy.linalg", None)
    elif importlib.util.find_spec("scipy") is None:
        pytest.skip("scipy is not installed")
    a = conditioned(200, 30, cond=100.0)
    g, v = a.T @ a, np.arange(30.0)
    chol = S._Cholesky(g)
    assert (chol._tri is None) is (not scipy_present)
    assert rel(chol.solve(v), np.linalg.solve(g, v)) <= 1e-10


def test_cholesky_lower_in_fortran_order_and_refusals(conditioned):
    """LAPACK's factor of Gᵀ (no copy) equals NumPy's; dpocon gives the same κ from L in C or
    Fortran order; a G that is not positive definite, or not finite, is refused as NumPy does."""
    if importlib.util.find_spec("scipy") is None:
        pytest.skip("scipy is not installed")
    a = conditioned(300, 40, cond=1e4)
    g = a.T @ a
    chol = S._Cholesky(g)
    np.testing.assert_allclose(chol.lower, np.linalg.cholesky(g), rtol=1e-10, atol=1e-12)
    assert chol.lower.flags.f_contiguous and not np.triu(chol.lower, 1).any()
    k_f = S._kappa_from_cholesky(chol.lower, g)
    k_c = S._kappa_from_cholesky(np.ascontiguousarray(chol.lower), g)
    assert k_f is not None and k_c is not None
    # the same factor, read as L or as Uᵀ: the same κ up to rounding
    assert k_f[0] == pytest.approx(k_c[0], rel=KAPPA_ULPS * EPS64, abs=0)
    assert k_f[1:] == k_c[1:]
    # an O(n²) estimate of κ₁(G), whose root is within √n of κ₂(A)
    assert 1 / np.sqrt(40) <= k_f[0] / np.linalg.cond(a) <= np.sqrt(40)
    with pytest.raises(np.linalg.LinAlgError):
        S._Cholesky(g - 2 * np.linalg.eigvalsh(g)[-1] * np.eye(40))
    with pytest.raises(np.linalg.LinAlgError):
        S._Cholesky.of_lower(np.where(np.eye(40) > 0, np.nan, chol.lower))


def test_own_cluster_leaves_the_default_client_alone(client, rhs):
    from distributed import default_client

    a = np.random.default_rng(13).standard_normal((300, 3))
    before = default_client()
    lstsq(a, rhs(a), "tsqr", engine="dask")
    assert default_client() is before


def test_in_process_workers_share_numpy_input(client):
    from gpuprobe.tools.scale.sources import as_dask_problem

    p = as_dask_problem(np.ones((100, 2)), np.ones(100))
    assert L._held_by_workers(client, p, None) is p  # inproc: nothing to send


def test_blocks_held_by_worker_processes_are_aligned():
    raw = np.zeros(800 + 128, dtype=np.uint8)
    start = 8 if raw.ctypes.data % 64 == 0 else (-raw.ctypes.data + 8) % 64
    odd = raw[start : start + 800].view(np.float64).reshape(20, 5)  # 8- but not 64-byte aligned
    odd[...] = np.arange(100.0).reshape(20, 5)
    assert odd.ctypes.data % 64 != 0
    out = K._aligned(odd)
    assert out.ctypes.data % K.BLOCK_ALIGN_BYTES == 0
    np.testing.assert_array_equal(out, odd)
    good = np.ones((64, 8))
    assert good.ctypes.data % 64 != 0 or K._aligned(good) is good


def test_a_gpu_session_makes_no_extended_pass(conditioned, rhs, monkeypatch):
    """A GPU has no float wider than float64: _refine turned to "extended" passes when the
    predicted float64 error was large (κ = 1e5 here) on a GPU session too, and the report counted
    extended passes the GPU made in float64."""
    monkeypatch.setattr(S, "REFINE_CHEAP_ELEMENTS", 0)  # refine as a large A would be
    a = conditioned(3000, 30, cond=1e5, seed=10)
    b = rhs(a)
    s = S._LocalSession(a, b, 500, whole=False)
    s.on_gpu = True  # the same passes, taken for a GPU's
    out = S._normal(s, S.REFINE_MAX_STEPS)
    assert isinstance(out, S._Outcome) and out.refinement_steps >= 1
    assert out.extended_passes == 0
    assert rel(out.x, np.linalg.lstsq(a, b, rcond=None)[0]) <= expected_error_bound(1e5)
