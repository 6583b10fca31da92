"""The rules on real traces recorded by others (tests/data/diagnose/ORIGIN.md says where each
comes from). Each expected number is also computed here straight from the JSON, independently of
gpuprobe's reader, so a reader bug cannot hide behind the rule it feeds."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from gpuprobe import cli
from gpuprobe.core.findings import Status
from gpuprobe.tools.diagnose.engine import compare, diagnose

DATA = Path(__file__).parent.parent.parent / "data" / "diagnose"
NW0 = DATA / "kineto_r50_nw0_2021feb.pt.trace.json.gz"
NW4 = DATA / "kineto_r50_nw4_2021feb.pt.trace.json.gz"
DLRM0 = DATA / "param_dlrm_worker0_step_12.1694128201545.pt.trace.json.gz"
AMD = DATA / "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
NO_RUNTIME = DATA / "hta_large_integer_trace__rank-70.pt.trace.json.gz"
CPU_RANK = DATA / "hta_rank_non_gpu__rank_non_gpu.json.gz"
V100 = DATA / "kineto_r50_nw0_a.pt.trace.json.gz"
A100 = DATA / "hta_critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz"


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _ev(d, fid: str, name: str):
    f = d.finding(fid)
    assert f is not None, fid
    return next(e.value for e in f.evidence if e.name == name)


def _loader_share(path: Path) -> float:
    """Median DataLoader share of the ProfilerStep spans, straight from the JSON."""
    evs = [e for e in _events(path) if e.get("ph") == "X"]
    steps = [e for e in evs if re.match(r"ProfilerStep#\d+$", str(e.get("name")))]
    loaders = [e for e in evs if str(e.get("name")).startswith("enumerate(DataLoader)")]
    shares = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        t = sum(e["dur"] for e in loaders if lo <= e["ts"] <= hi)
        shares.append(t / s["dur"])
    shares.sort()
    return shares[len(shares) // 2] if len(shares) % 2 else sum(shares[2:4]) / 2


def test_old_pytorch_steps_and_dataloader_are_found():
    # PyTorch 1.8 wrote ProfilerStep#N and the DataLoader's __next__ as Operator events
    cats = {e.get("cat") for e in _events(NW0) if str(e.get("name")).startswith("ProfilerStep")}
    assert cats == {"Operator"}
    d = diagnose(NW0)
    assert d.summary.steps == (5, 6, 7, 8, 9, 10)
    f = d.finding("input-bound")
    assert f.status is Status.WARN
    assert _ev(d, "input-bound", "num_workers") == 0
    assert _ev(d, "input-bound", "dataloader_share_median") == pytest.approx(
        100 * _loader_share(NW0), abs=0.1
    )
    # per-step counts are per step, not the whole trace's
    kernels = sum(1 for e in _events(NW0) if e.get("cat") == "Kernel")
    assert sum(r.kernels for r in d.steps) <= kernels
    assert max(r.kernels for r in d.steps) < kernels / 4


def test_compare_num_workers_0_then_4_shows_the_loader_fix():
    share0, share4 = _loader_share(NW0), _loader_share(NW4)
    assert share0 > 0.2 and share4 < 0.05  # independent of gpuprobe: the fix worked
    c = compare(NW0, NW4)
    loader = next(m for m in c.metrics if m.name == "DataLoader share of step")
    assert loader.before == pytest.approx(100 * share0, abs=0.5)
    assert loader.after == pytest.approx(100 * share4, abs=0.5)
    assert loader.improved is True
    change = next(f for f in c.findings if f.id == "input-bound")
    assert change.before is Status.WARN and change.after in (Status.OK, Status.INFO)


def test_v100_gets_fp16_autocast_not_tf32_or_bf16():
    d = diagnose(V100)
    f = d.finding("no-tensor-cores")
    # true, but not on the step's path while a single-process DataLoader starves the GPU: the
    # replay with the convolutions on the Tensor Cores saves under 1 % (input-bound leads)
    assert f.status is Status.INFO and f.gain is not None and f.gain < 0.01
    assert d.headline is d.finding("input-bound")
    assert "compute 7.0" in f.title
    assert "float16" in f.fix and "GradScaler" in f.fix
    assert "set_float32_matmul_precision" not in f.fix and "bfloat16" not in f.fix
    # batch norm (cudnn::bn_*) is not a matmul: only convolutions and sgemm count
    evs = [e for e in _events(V100) if e.get("cat") == "Kernel"]
    assert any(e["name"].startswith("void cudnn::bn_") for e in evs)
    assert _ev(d, "no-tensor-cores", "gemm_share_of_kernel_time") < 90


def test_a100_gets_tf32():
    d = diagnose(A100)
    f = d.finding("no-tensor-cores")
    assert "compute 8.0" in f.title
    assert "set_float32_matmul_precision('high')" in f.fix
    # the sgemms are all its kernels, but a sliver of its 20 ms: TF32 would gain under 1 % of
    # the time, so it is information, not a warning
    assert f.status is Status.INFO and f.gain is not None and f.gain < 0.01
    assert f.details[0].startswith("fixing it would gain under 1 %")


def test_layers_of_a_model_are_not_a_python_loop():
    # with_stack (PyTorch 1.8 "Call stack" arguments): torchvision's ResNet calls aten::add_
    # once per block, reached through nn.Module.__call__: layers, not a loop
    d = diagnose(V100)
    f = d.finding("python-loop")
    assert f.status is Status.OK
    assert _ev(d, "python-loop", "with_stack") is True


def test_only_calls_that_wait_are_syncs():
    evs = _events(DLRM0)
    waits = [
        e
        for e in evs
        if e.get("cat") == "cuda_runtime"
        and e["name"] in ("cudaStreamSynchronize", "cudaDeviceSynchronize")
    ]
    reads = [e for e in evs if e.get("name") == "aten::_local_scalar_dense"]
    assert len(reads) > len(waits)  # most scalar reads here ran no waiting call
    d = diagnose(DLRM0)
    step = d.summary.steps[0]
    in_step = [
        e
        for e in waits
        if any(
            s["ts"] <= e["ts"] <= s["ts"] + s["dur"]
            for s in evs
            if s.get("name") == f"ProfilerStep#{step}"
        )
    ]
    # and the copies into pageable host memory that held the host until their copy was done
    # (cudaMemcpyAsync is synchronous into pageable memory): the trace's two, 23 and 880 µs
    copies = {e["args"]["correlation"]: e for e in evs if e.get("cat") == "gpu_memcpy"}
    held = [
        e
        for e in evs
        if e.get("cat") == "cuda_runtime"
        and e["name"] == "cudaMemcpyAsync"
        and (c := copies.get(e["args"].get("correlation"))) is not None
        and "Device -> Pageable" in c["name"]
        and e["ts"] <= c["ts"] + c["dur"] <= e["ts"] + e["dur"] + 5
    ]
    assert sorted(e["dur"] for e in held) == [23, 880]
    assert _ev(d, "sync", "syncs_per_step_median") == len(in_step) + len(held)
    assert d.steps[0].syncs == len(in_step) + len(held)
    # the idle time blamed on syncs is part of the idle time, and DataLoader idle is not in it
    r = d.steps[0]
    assert r.idle_cause_us["sync"] + r.idle_cause_us["input"] <= r.idle_us + 1e-6
    assert sum(r.idle_cause_us.values()) == pytest.approx(r.idle_us, rel=1e-6)


def test_amd_hip_launches_and_tensile_gemm():
    d = diagnose(AMD)
    # hipLaunchKernel and hipExtModuleLaunchKernel are launches: the launch median exists
    assert _ev(d, "launch-bound", "median_launch") is not None
    names = {e["name"] for e in _events(AMD) if e.get("cat") == "cuda_runtime"}
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel"} <= names
    f = d.finding("no-tensor-cores")
    assert "AMD" in (_ev(d, "no-tensor-cores", "device") or "")
    assert "set_float32_matmul_precision" not in f.fix
    # its two hipMemcpyWithStream calls copy to the device: they do not wait for the GPU
    copies = [e for e in _events(AMD) if e.get("cat") == "gpu_memcpy"]
    assert copies and all("HtoD" in e["name"] for e in copies)
    assert sum(r.syncs for r in d.steps) == 0


def test_kernels_without_runtime_events_do_not_crash(capsys):
    assert not any(e.get("cat") == "cuda_runtime" for e in _events(NO_RUNTIME))
    d = diagnose(NO_RUNTIME)
    assert d.summary.gpu_busy_fraction == pytest.approx(1.0)
    assert d.finding("launch-bound").status is Status.SKIPPED
    assert cli.main(["diagnose", str(NO_RUNTIME)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_idle_causes_split_idle_once_per_instant():
    for path in (NW0, NW4, DLRM0, AMD):
        for r in diagnose(path).steps:
            if r.idle_us is None:
                continue
            assert sum(r.idle_cause_us.values()) == pytest.approx(r.idle_us, rel=1e-6, abs=1e-3)
            assert min(r.idle_cause_us.values()) >= 0


def test_single_process_loader_idle_is_input_not_short_gaps():
    d = diagnose(NW0)
    f = d.finding("gpu-idle")
    # the GPU's idle time in these steps is the DataLoader's and the late launches', not
    # "gaps under 30 µs" with a torch.compile fix
    assert _ev(d, "gpu-idle", "idle_input") > 40
    assert _ev(d, "gpu-idle", "idle_short") < 5
    assert "torch.compile" not in f.fix


def test_piped_output_keeps_every_number(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["diagnose", str(NW0)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    d = diagnose(NW0)
    for r in d.steps:
        assert f" {r.duration_us / 1e3:.1f} " in out  # the step table in ms, whole


def test_one_step_gives_the_same_causes_as_the_whole_trace():
    whole = diagnose(NW0)
    for n in whole.summary.steps[1:3]:
        one = diagnose(NW0, steps=f"{n}..{n}")
        assert one.summary.steps == (n,)
        for fid in ("input-bound", "gpu-idle", "sync", "pageable-copies"):
            assert one.finding(fid).status is whole.finding(fid).status, (n, fid)
        top = max(one.steps[0].idle_cause_us, key=one.steps[0].idle_cause_us.get)
        assert top == "input"


def test_times_keep_their_nanoseconds():
    # Kineto's absolute µs timestamps (~1.6e15) leave float64 a 0.25 µs grid: ends computed as
    # ts + dur on absolute times round. Stored relative to the first event, a kernel's end minus
    # its start is its duration to the ns.
    from gpuprobe.tools.diagnose.kineto import read_trace

    raw = read_trace(DLRM0)
    assert raw.time_base > 1e15
    evs = [e for e in _events(DLRM0) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    first = min(evs, key=lambda e: e["ts"])
    assert min(raw.gpu_ts) == pytest.approx(first["ts"] - raw.time_base, abs=0.25)
    last = max(evs, key=lambda e: e["ts"] + e["dur"])
    end = max(t + d for t, d in zip(raw.gpu_ts, raw.gpu_dur, strict=True))
    assert end == pytest.approx(last["ts"] - raw.time_base + last["dur"], abs=0.25)
    d = diagnose(DLRM0)
    assert d.steps[0].start_us > 1e15  # absolute again where a person reads it


def test_html_page_scales_and_shows_only_what_the_step_has(tmp_path):
    out = tmp_path / "r50.html"
    assert cli.main(["diagnose", str(V100), "--html", str(out)]) == 0
    page = out.read_text()
    assert 'width="100%"' in page  # the drawn SVG scales to the window (its viewBox)
    assert "flex-wrap: wrap" in page  # the timeline goes under the findings when narrow
    # the legend lists what the drawn step has, and nothing it lacks (no idle "other" here)
    assert ">idle: input</span>" in page and ">kernel</span>" in page
    assert ">idle: other</span>" not in page
    # the step's data is on the page; the browser test (test_html_timeline) draws it
    assert '"label":"GPU 0 idle, by cause"' in page
    assert "whole trace" in page.lower() and "That is why the two can differ" not in page


def test_tensor_core_names_of_newer_cards_and_amd():
    from gpuprobe.tools.diagnose import patterns as P

    tensor = [
        "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT",
        "cutlass3x_sm100_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x256x128_1x1x1_0_tnn_align16",
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn>",
        "bmm_E4m3E4m3_Fp32_t_n_sm90_128x128",
        "Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN",
    ]
    for name in tensor:
        assert P.GEMM_KERNEL.matches(name), name
        assert P.TENSOR_CORE_KERNEL.matches(name), name
    fp32 = ["volta_sgemm_128x64_nn", "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8"]
    for name in fp32:
        assert P.GEMM_KERNEL.matches(name) and P.FP32_GEMM_KERNEL.matches(name), name
    for name in ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>", "elementwise_kernel<convert>"):
        assert not P.GEMM_KERNEL.matches(name), name


def test_cudnn_convolutions_by_their_own_names_are_gemm_conv_and_fp32_ones_miss_tensor_cores(
    tmp_path,
):
    # cuDNN names its convolutions without "conv": volta_scudnn_* (FP32, "s" for single),
    # _5x_cudnn_volta_scudnn_*, turing_fp16_s1688cudnn_* (FP16 on the Tensor Cores), fft2d_*.
    # Read as "other", they left an FP32 conv net on a T4 or an RTX 2080 Ti at a 4 % GEMM/conv
    # share, under the 30 % that makes it a question
    from gpuprobe.tools.diagnose import patterns as P
    from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

    fp32 = [
        "volta_scudnn_128x128_relu_small_nn_v1",
        "_5x_cudnn_volta_scudnn_128x64_relu_interior_nn_v1",
        "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
        "void fft2d_r2c_32x32<float, false, 1u, false>(float2*, float const*, int)",
    ]
    for name in fp32:
        assert P.GEMM_KERNEL.matches(name) and not P.TENSOR_CORE_KERNEL.matches(name), name
    tc = "turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1"
    assert P.GEMM_KERNEL.matches(tc) and P.TENSOR_CORE_KERNEL.matches(tc)
    b = KinetoBuilder(device_name="Tesla T4", compute_major=7, compute_minor=5)
    for n in range(4):
        with b.step(n):
            for _ in range(6):
                b.launch(fp32[0], kernel_us=300.0, op="aten::cudnn_convolution")
                b.launch("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>", kernel_us=60.0)
                b.launch("void at::native::vectorized_elementwise_kernel<4>", kernel_us=40.0)
            b.sync()
    d = diagnose(b.write(str(tmp_path / "t4.json")))
    f = d.finding("no-tensor-cores")
    assert _ev(d, "no-tensor-cores", "gemm_share_of_kernel_time") == pytest.approx(75.0, abs=0.1)
    assert f.status is Status.WARN and "compute 7.5" in f.title and "float16" in f.fix
    # its gain from the replay: each step waits for its GPU work, so the convolutions' time at
    # the Tensor Cores' rate comes off the step whole: a T4's FP16 65 vs FP32 8.1 TFLOPS
    # (datasheet), scaled for a 300 µs kernel (1 + (peak - 1) * 300 / (300 + 500))
    step = float(np.median([r.duration_us for r in d.steps]))
    speedup = 1 + (65 / 8.1 - 1) * 300.0 / 800.0
    assert f.gain == pytest.approx(6 * 300.0 * (1 - 1 / speedup) / step, rel=0.02)
