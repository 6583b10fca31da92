"""GPU rules on traces built to the Kineto schema (or recorded ones: see traces.py)."""

from __future__ import annotations

import gzip
import json

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import diagnose

from .traces import SCENARIOS


def _ev(d, fid: str, name: str):
    f = d.finding(fid)
    assert f is not None, fid
    return next(e.value for e in f.evidence if e.name == name)


def test_healthy_trace_has_no_problems(gpu_trace):
    d = diagnose(gpu_trace("healthy"))
    assert d.problems() == []
    assert d.finding("gpu-idle").status is Status.OK
    assert _ev(d, "gpu-idle", "gpu_busy_median") > 90
    assert d.summary.devices[0].name == "NVIDIA H200"
    assert d.summary.steps == (0, 1, 2, 3, 4)


def test_launch_bound(gpu_trace):
    d = diagnose(gpu_trace("launch_bound"))
    f = d.finding("launch-bound")
    assert f.status is Status.WARN
    assert _ev(d, "launch-bound", "kernels_per_step") == 200
    assert _ev(d, "launch-bound", "median_kernel") == pytest.approx(2.0)
    assert _ev(d, "launch-bound", "median_launch") == pytest.approx(6.0)
    assert "CUDA graph" in f.fix and "torch.compile" in f.fix
    idle = d.finding("gpu-idle")
    assert idle.status is Status.WARN
    # 2 µs of kernel per 8 µs op: busy a quarter. Each launch starts before the previous kernel
    # ends (HTA would call the 6 µs gaps kernel wait), but returns only after it: the GPU waits
    # for the launch call itself, so the idle time is the launches'.
    assert 20 < _ev(d, "gpu-idle", "gpu_busy_median") < 30
    assert _ev(d, "gpu-idle", "idle_launch") > 90
    assert "launch the next kernel" in idle.title
    assert d.steps[0].kernel_wait_us > 0.9 * d.steps[0].idle_us  # HTA's own category kept


def test_sync_every_step_and_idle_after(gpu_trace):
    path = gpu_trace("sync_every_step")
    d = diagnose(path)
    f = d.finding("sync")
    assert f.status is Status.WARN
    assert _ev(d, "sync", "syncs_per_step_median") == 1
    assert _ev(d, "sync", "scalar_reads_per_step_median") == 1
    # after each item() the host works 2 ms before launching again: the GPU idles that long,
    # of which the sync's share is as long as it made the host wait (W): without the wait the
    # same 2 ms of host work would have started W earlier
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as fh:
        events = json.load(fh)["traceEvents"]
    waits = [e["dur"] for e in events if e.get("name") == "cudaStreamSynchronize"]
    assert len(set(waits)) == 1 and waits[0] < 2000
    assert _ev(d, "sync", "gpu_idle_from_syncs_median") == pytest.approx(
        min(2000, waits[0]), abs=15
    )
    assert "every N steps" in f.fix
    for row in d.steps:
        assert row.syncs == 1 and row.items == 1


def test_healthy_has_no_sync(gpu_trace):
    d = diagnose(gpu_trace("healthy"))
    assert d.finding("sync").status is Status.OK


def test_pageable_copies(gpu_trace):
    d = diagnose(gpu_trace("pageable"))
    f = d.finding("pageable-copies")
    assert f.status is Status.WARN
    assert _ev(d, "pageable-copies", "pageable_copies_per_step") == 1
    assert _ev(d, "pageable-copies", "pageable_bytes_per_step") == pytest.approx(50.0)
    assert _ev(d, "pageable-copies", "pageable_bandwidth") == pytest.approx(
        50e6 / 6000 / 1e3, abs=0.01
    )
    assert "pin_memory=True" in f.fix and "non_blocking=True" in f.fix
    assert "Memcpy HtoD (Pageable -> Device)" in f.details


def test_item_copies_are_not_reported_as_pageable(gpu_trace):
    # item() makes a 4-byte DtoH copy; its cost is the sync, not the pageable buffer
    d = diagnose(gpu_trace("sync_every_step"))
    assert d.finding("pageable-copies").status is Status.OK


def test_fp32_gemm_without_tensor_cores(gpu_trace):
    d = diagnose(gpu_trace("fp32_gemm"))
    f = d.finding("no-tensor-cores")
    assert f.status is Status.WARN
    assert _ev(d, "no-tensor-cores", "tensor_core_share_of_gemm_time") == 0
    assert _ev(d, "no-tensor-cores", "gemm_share_of_kernel_time") > 90
    assert _ev(d, "no-tensor-cores", "fp32_matmul_ops") >= 40
    assert "set_float32_matmul_precision" in f.fix


def test_fp32_gemm_kernels_without_recorded_dtypes_never_say_no_fp32_ops(tmp_path):
    """Without record_shapes the matmul ops carry no input dtype: the sgemm kernels are the
    evidence, and the finding says the dtypes were not recorded rather than fp32_matmul_ops=0."""
    from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

    from .traces import GEMM_FP32

    b = KinetoBuilder(compute_major=9)
    for n in range(5):
        with b.step(n):
            for _ in range(8):
                b.launch(GEMM_FP32, kernel_us=900.0, op="aten::mm")
    d = diagnose(b.write(str(tmp_path / "t.json")))
    f = d.finding("no-tensor-cores")
    assert f.status is Status.WARN and f.title.startswith("FP32 matmuls take 100.0 %")
    names = {e.name for e in f.evidence}
    assert "fp32_matmul_ops" not in names
    assert _ev(d, "no-tensor-cores", "matmul_input_dtypes").startswith("not recorded")


def test_tf32_gemm_uses_tensor_cores(gpu_trace):
    d = diagnose(gpu_trace("tf32_gemm"))
    assert d.finding("no-tensor-cores").status is Status.OK
    assert _ev(d, "no-tensor-cores", "tensor_core_share_of_gemm_time") == 100


def test_tensor_core_rule_skips_old_cards(tmp_path):
    from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

    b = KinetoBuilder(compute_major=6)
    with b.step(1):
        b.launch("maxwell_sgemm_128x64_nn", kernel_us=500.0)
    d = diagnose(b.write(str(tmp_path / "p100.json")))
    assert d.finding("no-tensor-cores").status is Status.SKIPPED


def test_peak_memory_near_capacity(gpu_trace):
    d = diagnose(gpu_trace("peak_memory"))
    f = d.finding("peak-memory")
    assert f.status is Status.WARN
    assert _ev(d, "peak-memory", "peak_share") == pytest.approx(95.0)
    assert _ev(d, "peak-memory", "capacity") == pytest.approx(80e9 / 2**30, rel=1e-3)


def test_peak_memory_ok_below_threshold(tmp_path):
    path = SCENARIOS["peak_memory"](str(tmp_path / "m.json.gz"), share=0.5)
    assert diagnose(path).finding("peak-memory").status is Status.OK


def test_input_bound_on_gpu(gpu_trace):
    d = diagnose(gpu_trace("input_bound"))
    f = d.finding("input-bound")
    assert f.status is Status.WARN
    assert 55 < _ev(d, "input-bound", "dataloader_share_median") < 65
    assert _ev(d, "input-bound", "num_workers") == 0
    assert "num_workers=" in f.fix


def test_contiguous_copy_after_permute(gpu_trace):
    d = diagnose(gpu_trace("contiguous"))
    f = d.finding("contiguous-copies")
    assert f.status is Status.WARN  # 300 µs of ~1.3 ms steps
    assert _ev(d, "contiguous-copies", "layout_copies_per_step") == 1
    assert _ev(d, "contiguous-copies", "layout_copy_time_per_step") == pytest.approx(300.0)
    assert _ev(d, "contiguous-copies", "layout_copy_bytes_per_step") == pytest.approx(
        64 * 1024 * 256 * 4 / 1e6, abs=1e-3
    )
    assert _ev(d, "contiguous-copies", "measured_on") == "GPU"


def test_steps_range_selects_steps(gpu_trace):
    d = diagnose(gpu_trace("launch_bound"), steps="1..2")
    assert d.summary.steps == (1, 2)
    assert [r.step for r in d.steps] == [1, 2]


def test_two_devices_get_one_row_each(gpu_trace, tmp_path):
    path = SCENARIOS["multi_stream"](str(tmp_path / "two.json.gz"), devices=2)
    d = diagnose(path)
    assert {r.device for r in d.steps} == {0, 1}
    assert len(d.steps) == 2 * len(d.summary.steps)
    subjects = {f.subject for f in d.findings if f.id == "gpu-idle"}
    assert subjects == {"GPU 0", "GPU 1"}


def test_trace_without_steps_is_one_window(tmp_path):
    from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

    b = KinetoBuilder()
    for _ in range(10):
        b.launch(SCENARIOS and "k", kernel_us=10.0)
    d = diagnose(b.write(str(tmp_path / "nosteps.json")))
    assert d.summary.steps == ()
    assert len(d.steps) == 1 and d.steps[0].step is None and d.steps[0].kernels == 10


def test_no_rank_metadata_needed(gpu_trace):
    # Kineto writes distributedInfo only for distributed runs; the builder never does
    path = gpu_trace("launch_bound")
    with gzip.open(path, "rt") as fh:
        assert "distributedInfo" not in json.load(fh)
    assert diagnose(path).summary.has_gpu


def test_sync_without_cpu_ops_says_what_it_cannot_see(tmp_path):
    """A trace of runtime calls and kernels but no cpu_ops (HTA's trace_file_list ranks):
    syncs are runtime calls, so their absence is seen; .item()-style reads are cpu_ops, so
    theirs is not, and the finding says so instead of counting 0 of them."""
    from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

    b = KinetoBuilder(compute_major=9)
    for n in range(3):
        with b.step(n):
            for _ in range(4):
                b.launch("k", kernel_us=50.0)
    d = diagnose(b.write(str(tmp_path / "noops.json")))
    f = d.finding("sync")
    assert f.status is Status.OK and "no CPU ops recorded" in f.title
    names = {e.name for e in f.evidence}
    assert "scalar_reads_per_step_median" not in names
    assert _ev(d, "sync", "scalar_reads").startswith("not recorded")
    # the same with one sync per step: still seen from the runtime calls alone
    b = KinetoBuilder(compute_major=9)
    for n in range(3):
        with b.step(n):
            b.launch("k", kernel_us=500.0)
            b.sync()
    assert _ev(diagnose(b.write(str(tmp_path / "s.json"))), "sync", "syncs_per_step_median") == 1
    # nothing on the host at all (a GPU-only export): skipped, not OK
    b = KinetoBuilder(compute_major=9)
    with b.step(0):
        b.launch("k", kernel_us=50.0)
    data = b.to_dict()
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "cuda_runtime"]
    path = tmp_path / "gpu_only.json"
    path.write_text(json.dumps(data))
    assert diagnose(str(path)).finding("sync").status is Status.SKIPPED


def test_a_toy_trace_of_sub_microsecond_steps_shows_its_figures(tmp_path):
    """Steps of a few µs with 0.02 µs kernels: no nonzero time printed as 0 µs or 0.0 µs,
    no empty "()" of idle causes."""
    from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

    b = KinetoBuilder(compute_major=9)
    for n in range(3):
        with b.step(n):
            b.launch("k", kernel_us=0.02, launch_us=0.03, op="aten::add")
    d = diagnose(b.write(str(tmp_path / "toy.json")))
    launch = d.finding("launch-bound")
    assert "(0.02 µs)" in launch.title and "(0.03 µs)" in launch.title
    assert all("median kernel 0.02 µs, median launch 0.03 µs" in x for x in launch.details)
    idle = [x for x in d.finding("gpu-idle").details if x.startswith("#")]
    assert len(idle) == 3 and not any("()" in x for x in idle)
    text = str(d)
    assert " 0.0 µs" not in text and "of 0 µs" not in text
