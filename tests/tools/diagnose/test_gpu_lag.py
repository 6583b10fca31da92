"""The GPU runs behind the CPU (a GPU-bound loop with no per-step sync): the steps are timed on
the GPU's side.

What the H200 showed (tests/data/diagnose/gpu_h200/fp32_matmul.json.gz, examples/fp32_matmul.py:
4096³ float32 matmuls with prof.step() and no sync): the three ProfilerStep windows on the host
(441, 173, 115 µs) ended before the GPU started their work (a 2.7 ms GEMM each), so the GPU's
numbers taken in those windows said "idle 100 %, host-work" of a GPU busy 99.8 % of the time.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from _support import too_wide
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.lag import GPU_LAG_FRACTION, gpu_step_windows, lag_share
from gpuprobe.tools.diagnose.model import Diagnosis
from gpuprobe.tools.diagnose.show.text import print_diagnosis
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .traces import DATA, GEMM_FP32, SMALL

H200 = DATA / "gpu_h200"


def _problems(d: Diagnosis) -> dict[str, str]:
    return {f.id: f.status.value for f in d.findings if f.status in (Status.WARN, Status.FAIL)}


def test_fp32_matmul_on_h200_is_gpu_bound_and_wants_tensor_cores() -> None:
    d = diagnose(str(H200 / "fp32_matmul.json.gz"))
    s = d.summary
    assert s.steps_timed_on_gpu is True
    assert s.gpu_lag_share == pytest.approx(1.0)  # none of a step's GPU work in its host step
    # the GPU's steps: 2.75 ms each, busy 99.8 % (HTA's whole-trace figure: 99.8 % too)
    assert [round(r.duration_us) for r in d.steps] == [2752, 2753, 2759]
    assert [round(100 * (r.gpu_busy_fraction or 0), 1) for r in d.steps] == [99.8, 99.8, 99.8]
    assert round(100 * (s.gpu_busy_fraction or 0), 1) == 99.8
    # the host's steps and counts stay its own
    assert [round(r.cpu_duration_us or 0) for r in d.steps] == [441, 173, 115]
    assert [(r.cpu_ops, r.kernels, r.syncs) for r in d.steps] == [(5, 3, 0)] * 3
    gpu_idle = d.finding("gpu-idle")
    assert gpu_idle is not None and gpu_idle.status is Status.OK
    assert dict((e.name, e.value) for e in gpu_idle.evidence)["gpu_busy_median"] == 99.8
    # the expert's one finding: float32 GEMMs off the Tensor Cores; its gain is the GEMM's time
    # at the H200's TF32 rate (494.5 vs 67 TFLOPS, scaled for a 2.68 ms kernel), off each step
    assert _problems(d) == {"no-tensor-cores": "warn"}
    assert d.headline is not None and d.headline.id == "no-tensor-cores"
    gemm = 2677.1  # µs, the sm80_xmma_gemm_f32f32 kernel of each step
    speedup = 1 + (494.5 / 67 - 1) * gemm / (gemm + 500.0)
    assert d.headline.gain == pytest.approx(gemm * (1 - 1 / speedup) / 2753, abs=0.01)
    for rule in ("host-work", "launch-bound", "untraced-host", "sync"):
        f = d.finding(rule)
        assert f is not None and f.status is Status.OK, rule


def test_tf32_matmul_on_h200_stays_healthy() -> None:
    d = diagnose(str(H200 / "tf32_matmul.json.gz"))
    assert d.summary.steps_timed_on_gpu is True
    assert _problems(d) == {}
    assert d.headline is None
    assert [round(r.duration_us) for r in d.steps] == [440, 417, 416]
    assert [round(100 * (r.gpu_busy_fraction or 0), 1) for r in d.steps] == [94.6, 98.5, 98.8]
    tc = d.finding("no-tensor-cores")
    assert tc is not None and tc.status is Status.OK


@pytest.mark.parametrize(
    "name",
    [
        "item_every_step",
        "item_fixed",
        "pageable_copies",
        "pinned_copies",
        "python_loop_mask",
        "vectorized_mask",
    ],
)
def test_h200_traces_that_keep_pace_are_timed_on_the_host(name: str) -> None:
    d = diagnose(str(H200 / f"{name}.json.gz"))
    assert d.summary.steps_timed_on_gpu is False
    assert d.summary.gpu_lag_share == 0.0
    assert all(r.cpu_duration_us is None for r in d.steps)


def test_h200_starved_loop_whose_work_spills_past_its_step_is_timed_on_the_host() -> None:
    """examples/loader_single_process.py on the H200 (2026-11-26): each host step is 145 ms of
    DataLoader, then launches ~12 ms of GPU work that runs on past the step's end (58 % of it
    after the host step). The GPU, busy 10 % of the span, is not behind: timed on its side the
    steps read 291.7, 158.7 and 13.6 ms, the last "busy 97.3 %"; on the host's, as they are."""
    d = diagnose(str(H200 / "loader_single_process.json.gz"))
    assert d.summary.gpu_lag_share == pytest.approx(0.584, abs=0.001)
    assert d.summary.steps_timed_on_gpu is False
    assert [round(r.duration_us / 1e3, 1) for r in d.steps] == [147.5, 152.2, 154.8]
    assert all(0.05 < (r.gpu_busy_fraction or 0) < 0.10 for r in d.steps)
    assert d.headline is not None and d.headline.id == "input-bound"


def test_h200_loader_with_workers_lags_like_a_gpu_bound_loop() -> None:
    """examples/loader_workers.py as the H200 ran it on 2026-11-26 (4 workers, the GPU fed): all
    of a step's GPU work ran after its host step, so its steps are timed on the GPU's side, busy
    99 % as HTA's whole-trace figure says (99.1 %), with no problem found."""
    d = diagnose(str(H200 / "loader_workers.json.gz"))
    assert d.summary.steps_timed_on_gpu is True
    assert d.summary.gpu_lag_share == pytest.approx(1.0)
    assert [round(r.duration_us) for r in d.steps] == [20139, 13322, 13312]
    assert [round(r.cpu_duration_us or 0) for r in d.steps] == [7330, 4963, 5389]
    assert [round(100 * (r.gpu_busy_fraction or 0), 1) for r in d.steps] == [99.2, 99.0, 99.1]
    assert _problems(d) == {} and d.headline is None


def _matmul_loop(path: str, sync: bool, steps: int = 5) -> str:
    """examples/fp32_matmul.py's loop: a 2.7 ms GEMM, a norm and a division per step; with
    ``sync`` the host waits for each step's GPU work before the next."""
    b = KinetoBuilder()
    for n in range(steps):
        with b.step(n):
            b.launch(GEMM_FP32, kernel_us=2700.0, op="aten::matmul")
            b.launch(SMALL, kernel_us=50.0, op="aten::linalg_vector_norm")
            b.launch(SMALL, kernel_us=40.0, op="aten::div")
            if sync:
                b.sync()
        b.cpu(20.0)
    b.sync("cudaDeviceSynchronize")  # after the profiled steps, as the example does
    return b.write(path)


def test_synthetic_lagging_loop_is_timed_on_the_gpu(tmp_path) -> None:
    d = diagnose(_matmul_loop(str(tmp_path / "lag.json"), sync=False))
    assert d.summary.steps_timed_on_gpu is True
    assert d.summary.gpu_lag_share is not None and d.summary.gpu_lag_share > GPU_LAG_FRACTION
    # GPU windows: first start of a step's work to the next step's (the builder queues a step's
    # kernels back to back: 2700 + 50 + 40 µs); the last one to its work's end
    assert [round(r.duration_us) for r in d.steps] == [2790] * 5
    assert [r.gpu_busy_fraction for r in d.steps] == [1.0] * 5
    # the host's counts stay in the host's steps: 3 ops and 3 kernels each
    assert [(r.cpu_ops, r.kernels) for r in d.steps] == [(3, 3)] * 5
    assert all((r.cpu_duration_us or 0) < 100 for r in d.steps)
    for rule in ("gpu-idle", "host-work", "launch-bound"):
        f = d.finding(rule)
        assert f is not None and f.status is Status.OK, rule


def test_synthetic_synced_loop_is_timed_on_the_host(tmp_path) -> None:
    d = diagnose(_matmul_loop(str(tmp_path / "sync.json"), sync=True))
    assert d.summary.steps_timed_on_gpu is False
    assert d.summary.gpu_lag_share == pytest.approx(0.0)
    assert all(r.cpu_duration_us is None for r in d.steps)
    f = d.finding("gpu-idle")
    assert f is not None and f.status is Status.OK


def test_lag_share_is_the_median_share_outside_the_host_step() -> None:
    starts, ends = np.array([0.0, 100.0]), np.array([100.0, 200.0])
    step = np.array([0, 0, 1])
    dev = np.array([0, 0, 0])
    ts = np.array([50.0, 150.0, 150.0])  # step 0: 50 of 150 µs inside; step 1: all inside
    end = np.array([100.0, 250.0, 160.0])
    assert lag_share(starts, ends, step, dev, ts, end) == pytest.approx((2 / 3 + 0) / 2)
    assert lag_share(starts, ends, np.array([-1, -1, -1]), dev, ts, end) is None


def test_gpu_step_windows_cover_the_gpu_timeline() -> None:
    cpu = np.array([0.0, 10.0, 20.0, 30.0])
    step = np.array([0, 0, 2, -1, 3])  # step 1 launched nothing
    ts = np.array([100.0, 150.0, 300.0, 5.0, 400.0])
    end = np.array([140.0, 290.0, 390.0, 6.0, 450.0])
    s, e = gpu_step_windows(cpu, step, ts, end)
    assert s.tolist() == [100.0, 300.0, 300.0, 400.0]
    assert e.tolist() == [300.0, 300.0, 400.0, 450.0]


def test_text_and_json_say_the_steps_are_timed_on_the_gpu() -> None:
    from rich.console import Console

    d = diagnose(str(H200 / "fp32_matmul.json.gz"))
    buf = io.StringIO()
    print_diagnosis(d, Console(file=buf, width=80, force_terminal=False))
    text = buf.getvalue()
    assert "The GPU runs behind the CPU (steps timed on the GPU's side)" in text
    assert "Biggest gain: no-tensor-cores" in text
    assert too_wide(text) == []
    js = d.to_dict()
    assert js["summary"]["steps_timed_on_gpu"] is True
    assert js["headline"] == "no-tensor-cores"
    back = Diagnosis.from_dict(js)
    assert back.summary.steps_timed_on_gpu is True
    assert back.steps[0].cpu_duration_us == d.steps[0].cpu_duration_us


def test_compare_fp32_with_tf32_times_the_gpu_steps() -> None:
    from gpuprobe.tools.diagnose.engine import compare

    c = compare(str(H200 / "fp32_matmul.json.gz"), str(H200 / "tf32_matmul.json.gz"))
    step = c.metric("step time (median)")
    assert step is not None and step.before is not None and step.after is not None
    # timed in the host's windows this read 173 µs -> 152 µs, "12 % faster, host edges"
    assert (round(step.before), round(step.after)) == (2753, 417)
    assert step.verdict == "faster"
    assert "GEMM" in c.headline


def test_busy_share_merges_overlaps_at_any_time_origin() -> None:
    from gpuprobe.tools.diagnose.lag import busy_share

    ts, end = np.array([-10.0, 20.0, -5.0]), np.array([-2.0, 30.0, 0.0])  # unsorted, overlapping
    assert busy_share(ts, end, -10.0, 30.0) == pytest.approx(0.5)  # [-10, 0] and [20, 30]
    assert busy_share(ts, end, 25.0, 35.0) == pytest.approx(0.5)  # clipped to the span
    assert busy_share(ts[:0], end[:0], 0.0, 1.0) == 0.0
