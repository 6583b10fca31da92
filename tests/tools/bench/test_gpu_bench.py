"""On a real GPU (skipped elsewhere): our figures against the framework's own, in the same run."""

from __future__ import annotations

import statistics

import pytest

from gpuprobe.tools.bench.workloads import Settings, run_workload

pytestmark = pytest.mark.gpu


def _torch_copy_gbs(nbytes: int) -> float:
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return 2 * nbytes / statistics.median(times) / 1e9


def test_d2d_within_10_percent_of_a_plain_torch_copy() -> None:
    from gpuprobe.platform.frameworks.backends import make_backend

    nbytes = 1 << 30
    b = make_backend("torch", "cuda:0")
    rs = list(run_workload("transfer", b, Settings(sizes={"transfer": (nbytes,)})))
    d2d = next(r for r in rs if r.case == "d2d")
    assert d2d.ok and d2d.values["gbs"] >= 0.9 * _torch_copy_gbs(nbytes)
    pinned = next(r for r in rs if r.case == "h2d-pinned")
    pageable = next(r for r in rs if r.case == "h2d-pageable")
    assert pinned.values["gbs"] > pageable.values["gbs"] * 0.8


def test_bf16_matmul_within_3_percent_of_torch() -> None:
    import torch

    from gpuprobe.platform.frameworks.backends import make_backend

    n = 8192
    b = make_backend("torch", "cuda:0")
    b.matmul_dtypes()
    rs = list(run_workload("matmul", b, Settings(sizes={"matmul": (n,)})))
    ours = next(r for r in rs if r.case == "bfloat16")
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ c
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ c
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    theirs = 2 * n**3 / min(times) / 1e12
    assert ours.values["tflops"] >= 0.97 * theirs
    assert ours.values["rel_error"] is None or ours.values["rel_error"] < 3e-2


def test_every_gpu_workload_runs_and_judges() -> None:
    import gpuprobe

    report = gpuprobe.bench(backends=["torch"], devices=["cuda:0"], quick=True, save=False)
    assert not [w.error for w in report.workers if w.error]
    cases = {(r.workload, r.case) for r in report.results if r.ok}
    assert {("launch", "queue"), ("launch", "launch+wait"), ("launch", "graph")} <= cases
    assert ("scale", "naive") in cases and ("crossover", "matmul-copies") in cases
    assert report.finding("bench-naive-timing-misleading") is not None
    assert any(r.values.get("pct_peak") for r in report.results)
