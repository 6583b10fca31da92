"""Each workload on NumPy and torch on the CPU with small sizes: correct results, sane rates,
ordered statistics."""

from __future__ import annotations

import numpy as np
import pytest

from gpuprobe.platform.frameworks.backends import make_backend
from gpuprobe.tools.bench.model import BenchResult
from gpuprobe.tools.bench.workloads import Settings, run_workload

BACKENDS = [
    "numpy",
    pytest.param(
        "torch",
        marks=pytest.mark.skipif(
            __import__("importlib").util.find_spec("torch") is None, reason="torch not installed"
        ),
    ),
]
# Far above any CPU here: a figure over it means a timing bug (e.g. a clock that missed the work).
PLAUSIBLE_GBS = 2_000.0
PLAUSIBLE_TFLOPS = 50.0
FAST = dict(budget_s=0.005, rep_limit_s=2.0)


def _run(workload: str, fw: str, **sizes: tuple[int, ...]) -> list[BenchResult]:
    b = make_backend(fw, "cpu")
    return list(run_workload(workload, b, Settings(quick=True, sizes=dict(sizes), **FAST)))


def _sane(r: BenchResult) -> None:
    assert r.ok, r.reason
    m = r.measurement
    assert m is not None and m.n >= 3
    assert 0 < m.min <= m.p20 <= m.median <= m.p80 <= max(m.times)
    gbs = r.values.get("gbs")
    assert gbs is None or 0 < gbs < PLAUSIBLE_GBS
    tf = r.values.get("tflops")
    assert tf is None or 0 < tf < PLAUSIBLE_TFLOPS


@pytest.mark.parametrize("fw", BACKENDS)
def test_expression_sum_matches_numpy_float64(fw: str) -> None:
    n = 300
    rs = _run("expression", fw, expression=(n,))
    assert [r.case for r in rs] == ["float64", "float32"]
    for r in rs:
        _sane(r)
    b = make_backend(fw, "cpu")
    x = b.to_numpy(b.random((n, n), "float64", seed=0)).astype(np.float64)
    ref = float((np.sin(x) ** 2 / np.cos(x) ** 2).sum())
    assert rs[0].values["sum"] == pytest.approx(ref, rel=1e-12)
    assert rs[1].values["sum"] == pytest.approx(ref, rel=1e-3)
    assert 0 <= rs[1].values["rel_error"] < 1e-3
    assert "note_s" not in rs[0].values  # the note's figure only beside the note's size


@pytest.mark.parametrize("fw", BACKENDS)
def test_scale_right_and_naive_agree_on_a_synchronous_cpu(fw: str) -> None:
    rs = _run("scale", fw, scale=(200_000,))
    right, naive = rs
    _sane(right)
    assert naive.case == "naive" and naive.measurement is not None
    assert naive.measurement.timer == "host-clock-no-wait"
    assert naive.measurement.n == 5 and naive.measurement.min > 0
    assert naive.values["correct_s"] == right.seconds and right.values["naive_s"] == naive.seconds


@pytest.mark.parametrize("fw", BACKENDS)
def test_matmul_errors_grow_as_precision_drops(fw: str) -> None:
    rs = {r.case: r for r in _run("matmul", fw, matmul=(64,))}
    for r in rs.values():
        _sane(r)
    assert rs["float64"].values["rel_error"] < 1e-13
    assert rs["float32"].values["rel_error"] < 1e-5
    if fw == "torch":
        assert set(rs) >= {"bfloat16", "float16", "int8"}
        assert 1e-4 < rs["bfloat16"].values["rel_error"] < 3e-2
        assert rs["bfloat16"].values["rel_error"] > 10 * rs["float32"].values["rel_error"]
        assert 1e-3 < rs["int8"].values["rel_error"] < 1e-1
        assert rs["float64"].measurement.work["flop"] == 2 * 64**3


def test_matmul_skips_sizes_that_would_take_too_long() -> None:
    b = make_backend("numpy", "cpu")
    s = Settings(budget_s=0.005, rep_limit_s=1e-6, sizes={"matmul": (32, 64, 128)})
    rs = [r for r in run_workload("matmul", b, s) if r.case == "float64"]
    assert [r.status for r in rs] == ["ok", "skipped"]
    assert "would take" in (rs[1].reason or "")


@pytest.mark.parametrize("fw", BACKENDS)
def test_transfer_on_a_cpu_is_a_host_copy_counting_read_and_write(fw: str) -> None:
    rs = _run("transfer", fw, transfer=(4096, 1 << 20))
    assert {r.case for r in rs} == {"host"}
    for r in rs:
        _sane(r)
        assert r.measurement.work["bytes"] == 2 * r.size


@pytest.mark.parametrize("fw", BACKENDS)
def test_launch_overhead_per_call(fw: str) -> None:
    (r,) = _run("launch", fw)
    _sane(r)
    assert r.case == "call" and 0 < r.values["us"] < 10_000


@pytest.mark.parametrize("fw", BACKENDS)
def test_crossover_curves_on_the_cpu(fw: str) -> None:
    rs = _run("crossover", fw, crossover=(1_000, 100_000), **{"crossover-matmul": (16, 64)})
    assert [(r.case, r.size) for r in rs] == [
        ("elementwise-resident", 1_000),
        ("elementwise-resident", 100_000),
        ("matmul-resident", 16),
        ("matmul-resident", 64),
    ]
    for r in rs:
        _sane(r)


@pytest.mark.parametrize("fw", BACKENDS)
def test_sync_both_loops(fw: str) -> None:
    rs = _run("sync", fw, sync=(20,))
    assert [r.case for r in rs] == ["host-every-step", "log-on-device"]
    for r in rs:
        _sane(r)
        assert r.values["us_per_step"] == pytest.approx(r.seconds / 20 * 1e6)


def test_multi_needs_a_gpu() -> None:
    (r,) = _run("multi", "numpy")
    assert r.status == "skipped" and "needs a GPU" in (r.reason or "")
