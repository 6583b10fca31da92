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


# bf16 GEMM against torch's own a @ b, like with like. The H200 (driver 580, torch 2.11) failed
# the first version of this test: gpuprobe's 685.6 TFLOP/s (a median over its 0.25 s budget)
# against 782.3 for torch's BEST of 20 repetitions. Under its power cap the card runs its first
# repetitions fastest, so a minimum is not what it sustains; benchmarks/gpu_anchors.py, comparing
# median with median in alternated rounds, found gpuprobe at 1.028 × torch [0.971..1.040] on the
# same card. Here: the same operands (the matmul workload's float32 standard-normal draws, seeds
# 1 and 2, cast to bfloat16: zeros run ~13 % faster on an H200), the same warm-up (the workload
# makes one product for its error check and its timer one more), the same number of repetitions
# queued back to back between events, medians on both sides, in alternated rounds (ours first,
# then torch first) so that the card's drift as it warms cancels.
GEMM_N = 8192
GEMM_ROUNDS = 5  # as benchmarks/gpu_anchors.py
GEMM_MIN_RATIO = 0.97  # gpuprobe's median over torch's, median of the rounds (issue 14's goal)
GEMM_SEEDS = (1, 2)  # the matmul workload's: Settings.seed + 1 and + 2
GEMM_WARMUP = 2  # untimed products before the timed ones, as the workload makes
GEMM_EVENTS_BATCH = 10  # repetitions queued between synchronizations (platform.timing.CHUNK)


def _ours_bf16(b, monkeypatch: pytest.MonkeyPatch) -> tuple[float, int]:
    """gpuprobe's bfloat16 figure at GEMM_N (TFLOP/s) and how many repetitions its median took."""
    monkeypatch.setattr(b, "matmul_dtypes", lambda: ("bfloat16",))  # only the dtype compared
    rs = list(run_workload("matmul", b, Settings(sizes={"matmul": (GEMM_N,)})))
    ours = next(r for r in rs if r.case == "bfloat16")
    assert ours.ok and ours.measurement is not None, ours.reason
    assert ours.values["rel_error"] is None or ours.values["rel_error"] < 3e-2
    return float(ours.values["tflops"]), ours.measurement.n


def _torch_bf16(reps: int) -> float:
    """torch's a @ b on the workload's operands: 2n³ / the median of ``reps`` event times."""
    import torch

    a, c = (
        torch.randn(
            GEMM_N,
            GEMM_N,
            device="cuda",
            generator=torch.Generator(device="cuda").manual_seed(seed),
        ).to(torch.bfloat16)
        for seed in GEMM_SEEDS
    )
    for _ in range(GEMM_WARMUP):
        a @ c
    torch.cuda.synchronize()
    times: list[float] = []
    while len(times) < reps:
        pairs = []
        for _ in range(min(GEMM_EVENTS_BATCH, reps - len(times))):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ c
            e.record()
            pairs.append((s, e))
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) / 1e3 for s, e in pairs]
    del a, c
    torch.cuda.empty_cache()
    return 2 * GEMM_N**3 / statistics.median(times) / 1e12


def test_bf16_matmul_within_3_percent_of_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuprobe.platform.frameworks.backends import make_backend

    b = make_backend("torch", "cuda:0")
    ratios = []
    for i in range(GEMM_ROUNDS):
        if i % 2 == 0:
            ours, reps = _ours_bf16(b, monkeypatch)
            theirs = _torch_bf16(reps)
        else:
            theirs = _torch_bf16(reps)
            ours, reps = _ours_bf16(b, monkeypatch)
        b.release()
        ratios.append(ours / theirs)
    assert statistics.median(ratios) >= GEMM_MIN_RATIO, ratios


def test_every_gpu_workload_runs_and_judges() -> None:
    import gpuprobe

    report = gpuprobe.bench(backends=["torch"], devices=["cuda:0"], quick=True, save=False)
    assert not [w.error for w in report.workers if w.error]
    cases = {(r.workload, r.case) for r in report.results if r.ok}
    assert {("launch", "queue"), ("launch", "launch+wait"), ("launch", "graph")} <= cases
    assert ("scale", "naive") in cases and ("crossover", "matmul-copies") in cases
    # quick's 5,000,000 elements take ~10 µs on an H200, close to the launch: the rule goes by
    # the ratio it measured (the H200 of 2026-11-26 gave none here), so judge it on its numbers
    right = next(r for r in report.results if r.workload == "scale" and r.case == "events")
    wrong = next(r for r in report.results if r.workload == "scale" and r.case == "naive")
    misled = right.seconds / wrong.seconds >= 2.0
    assert (report.finding("bench-naive-timing-misleading") is not None) == misled
    assert any(r.values.get("pct_peak") for r in report.results)


def test_e8s_host_clock_misleads_at_e8s_size() -> None:
    """E8's 50,000,000 elements (400 MB read and written) take far longer on the device than
    the launch a host clock sees: the finding names it, with both figures."""
    import gpuprobe

    report = gpuprobe.bench(
        ["scale"], backends=["torch"], devices=["cuda:0"], save=False, sizes={"scale": [50_000_000]}
    )
    right = next(r for r in report.results if r.case == "events")
    wrong = next(r for r in report.results if r.case == "naive")
    assert right.seconds > 3 * wrong.seconds, (right.seconds, wrong.seconds)
    f = report.finding("bench-naive-timing-misleading")
    assert f is not None and {e.name for e in f.evidence} == {"naive", "device"}
