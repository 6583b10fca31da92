"""Kernel families, top kernels and launch statistics on real traces, against plain-json sums."""

from __future__ import annotations

import re

import numpy as np
import pytest

from _support import too_wide
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.kernels import (
    FAMILIES,
    LAUNCH_DELAY_CUTOFF_US,
    RUNTIME_CUTOFF_US,
    KernelBreakdown,
    family_of_name,
    kernel_breakdown,
    launch_stats,
)
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.show.ranks import render_kernels_text, short_kernel_name

from .realdata import CPU_ONLY, DIFF_TEST, DLRM_FILES, MI250, gpu_events, load

# Real kernel names: from the corpus traces (V100, RTX 2080 Ti, A100, MI250) and as published by
# the libraries for newer cards (cuBLASLt on H100/B200, FlashAttention, hipBLASLt, CK, NCCL 2.19+).
NAMES = [
    ("volta_sgemm_128x64_nn", "GEMM"),
    ("ampere_sgemm_128x64_nn", "GEMM"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4>(Params)", "GEMM"),
    (
        "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, true, false>",
        "GEMM",
    ),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2>", "GEMM"),
    ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1", "GEMM"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "GEMM"),
    (
        "void cutlass::device_kernel<cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_128x128x128>",
        "GEMM",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_wgmma",
        "GEMM",
    ),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1", "GEMM"),
    ("ck_gemm_xdl_cshuffle_v3_f16_f16_f16_128x128", "GEMM"),
    (
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>",
        "convolution",
    ),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "convolution"),
    ("sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc", "convolution"),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>", "convolution"),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>", "convolution"),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>", "convolution"),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "convolution"),
    ("void fft2d_r2c_32x32<float, false, 0u, false>", "convolution"),
    (
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128>",
        "convolution",
    ),
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>",
        "attention",
    ),
    (
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>",
        "attention",
    ),
    (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
        "attention",
    ),
    ("void cutlass::Kernel<cutlass_80_wmma_tensorop_attention_fwd_64x64>", "attention"),
    ("void efficient_attention_forward_kernel<float>", "attention"),
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "communication",
    ),
    (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "communication",
    ),
    (
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "communication",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
        "elementwise",
    ),
    (
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<add>>(int)",
        "elementwise",
    ),
    (
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2>",
        "elementwise",
    ),
    (
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>",
        "elementwise",
    ),
    ("triton_poi_fused_add_cos_sin_0", "elementwise"),
    (
        "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, sum_functor>>",
        "reduction",
    ),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>", "reduction"),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
        "reduction",
    ),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>", "reduction"),
    ("triton_red_fused__to_copy_mean_pow_0", "reduction"),
    (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>",
        "reduction",
    ),
    ("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>", "reduction"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>", "reduction"),
    ("void at::native::(anonymous namespace)::adaptive_average_pool<float>", "reduction"),
    ("void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long>", "other"),
    # unseen traces (benchmarks/results/diagnose_unseen.md): B200 vLLM, ROCm SD3.5/Qwen
    (
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
        "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
        "communication",
    ),
    ("attn_fwd", "attention"),
    (
        "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams"
        "<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams)",
        "other",
    ),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>", "GEMM"),
    ("void at::native::_to_copy_convert_kernel<float>", "other"),
]


@pytest.mark.parametrize(("name", "family"), NAMES)
def test_family_of_real_kernel_names(name, family):
    assert family_of_name(name) == family


def _breakdown(path) -> tuple[TraceContext, KernelBreakdown]:
    ctx = TraceContext(read_trace(path))
    return ctx, kernel_breakdown(ctx)


@pytest.mark.parametrize("path", [DLRM_FILES[0], DLRM_FILES[3], MI250], ids=lambda p: p.name[:12])
def test_family_totals_are_the_json_sums_and_shares_make_100(path):
    ctx, kb = _breakdown(path)
    events = gpu_events(load(path))
    # every GPU activity of these traces is launched inside a ProfilerStep
    assert int(np.sum(ctx.gpu_step >= 0)) == len(events)
    assert kb.total_us == pytest.approx(sum(e["dur"] for e in events))
    assert sum(f.share for f in kb.families) == pytest.approx(1.0)
    assert sum(f.count for f in kb.families) == len(events)
    by_family: dict[str, float] = {}
    for e in events:
        fam = "memcpy/memset" if e["cat"] != "kernel" else family_of_name(e["name"])
        by_family[fam] = by_family.get(fam, 0.0) + e["dur"]
    assert {f.family: f.total_us for f in kb.families} == pytest.approx(by_family)
    # families come in the fixed order
    order = [FAMILIES.index(f.family) for f in kb.families]
    assert order == sorted(order)
    # per (step, device) totals add up to the whole
    assert sum(s.total_us for s in kb.steps) == pytest.approx(kb.total_us)


def test_dlrm_rank0_is_mostly_nccl_and_its_top_kernels_are_named():
    _, kb = _breakdown(DLRM_FILES[0])
    nccl = sum(e["dur"] for e in gpu_events(load(DLRM_FILES[0])) if "nccl" in e["name"])
    comm = kb.family("communication")
    assert comm is not None and comm.total_us == pytest.approx(nccl) == 5798.0
    assert comm.share == pytest.approx(5798.0 / kb.total_us)
    assert kb.top[0].name.startswith("ncclKernel_SendRecv_RING_SIMPLE")
    assert kb.top[0].count == 5 and kb.top[0].total_us == pytest.approx(3999.0)
    assert [k.total_us for k in kb.top] == sorted((k.total_us for k in kb.top), reverse=True)


def test_amd_trace_hipblaslt_gemms_and_hip_launches():
    data = load(MI250)
    _, kb = _breakdown(MI250)
    gemm = kb.family("GEMM")
    cijk = [e for e in gpu_events(data) if e["name"].startswith("Cijk_")]
    assert gemm is not None and gemm.count == len(cijk) == 2
    assert gemm.total_us == pytest.approx(sum(e["dur"] for e in cijk))
    # hipLaunchKernel and hipExtModuleLaunchKernel are launches, one per kernel
    launch_names = {"hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyWithStream"}
    corr = {
        e["args"]["correlation"]
        for e in data["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e["name"] in launch_names
    }
    launched = [e for e in gpu_events(data) if e["args"].get("correlation") in corr]
    assert kb.launches is not None and kb.launches.launches == len(launched) == 16


def _direct_launch_rows(data, launch_names):
    """HTA's join, by hand: (cpu dur, gpu dur, delay, kernel name) per launch call."""
    rt = {
        e["args"]["correlation"]: e
        for e in data["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e["name"] in launch_names
    }
    rows = []
    for k in gpu_events(data):
        r = rt.get(k["args"].get("correlation"))
        if r is not None:
            rows.append(
                (r["dur"], k["dur"], max(k["ts"] - (r["ts"] + r["dur"]), 0), k["name"], r["name"])
            )
    return rows


def test_launch_stats_match_a_direct_join_on_correlation():
    data = load(DLRM_FILES[0])
    rows = _direct_launch_rows(data, {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"})
    ls = launch_stats(TraceContext(read_trace(DLRM_FILES[0])))
    cpu = np.array([r[0] for r in rows], dtype=float)
    gpu = np.array([r[1] for r in rows], dtype=float)
    delay = np.array([r[2] for r in rows], dtype=float)
    assert ls.launches == len(rows) == 261 and ls.graph_launches == 0
    assert ls.cpu_us.median == np.median(cpu) and ls.cpu_us.max == cpu.max()
    assert ls.gpu_us.p90 == pytest.approx(np.percentile(gpu, 90))
    assert ls.delay_us.p99 == pytest.approx(np.percentile(delay, 99))
    assert ls.delay_us.mean == pytest.approx(delay.mean())
    # HTA's definitions and default cut-offs
    assert ls.short_kernels == int(np.sum((cpu <= RUNTIME_CUTOFF_US) & (gpu < cpu))) == 179
    assert ls.runtime_outliers == int(np.sum(cpu > RUNTIME_CUTOFF_US)) == 1
    assert ls.launch_delay_outliers == int(np.sum(delay > LAUNCH_DELAY_CUTOFF_US)) == 31
    # outliers are named, worst first, with their step
    worst_delay = max(rows, key=lambda r: r[2])
    delays = [o for o in ls.outliers if o.kind == "launch-delay"]
    assert delays[0].kernel == worst_delay[3] and delays[0].value_us == worst_delay[2] == 1482
    assert delays[0].step == 10
    runtime = [o for o in ls.outliers if o.kind == "runtime"]
    assert runtime[0].call == "cudaMemcpyAsync" and runtime[0].value_us == 880.0


def test_a_cuda_graph_replay_is_one_launch_for_all_its_kernels():
    data = load(DIFF_TEST)
    graphs = [
        e
        for e in data["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"
    ]
    per_graph = []
    for g in graphs:
        ks = [
            k for k in gpu_events(data) if k["args"].get("correlation") == g["args"]["correlation"]
        ]
        if ks:
            per_graph.append(ks)
    assert sorted(len(ks) for ks in per_graph) == [339, 502]
    ls = launch_stats(TraceContext(read_trace(DIFF_TEST)))
    assert ls.graph_launches == 2
    non_graph = _direct_launch_rows(
        data, {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
    )
    assert ls.launches == len(non_graph) + 2
    assert ls.gpu_activities == len(non_graph) + 339 + 502
    # the replay's GPU duration is the span of its kernels; it shows up named as a graph
    graph_out = [o for o in ls.outliers if o.graph_kernels]
    assert {o.graph_kernels for o in graph_out} == {502, 339}
    assert all(o.call == "cudaGraphLaunch" for o in graph_out)
    big = next(g for g in graphs if g["dur"] == max(x["dur"] for x in graphs))
    assert any(o.value_us == big["dur"] for o in graph_out)


def test_breakdown_round_trips_through_json():
    _, kb = _breakdown(DLRM_FILES[3])
    assert KernelBreakdown.from_dict(kb.to_dict()) == kb


def test_text_fits_80_columns_and_keeps_numbers_whole():
    _, kb = _breakdown(DLRM_FILES[0])
    text = render_kernels_text(kb)
    assert too_wide(text) == []
    for number in ("5,798", "84.6", "3,999", "1,482.0", "880.0", "261"):
        assert number in text
    assert not re.search(r"\d…", text)


def test_short_names_keep_the_functor():
    name = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}>(int)"
    )
    short = short_kernel_name(name)
    assert short.startswith("elementwise<sqrt_kernel_cuda")
    # whole: shortened by named rewrites only, never cut, and without the argument list
    assert short.endswith(">") and "…" not in short
    assert short_kernel_name("void volta_sgemm_128x32_nt(int, float*)") == "volta_sgemm_128x32_nt"


def test_cpu_only_trace_has_no_families_and_says_so():
    _, kb = _breakdown(CPU_ONLY)
    assert kb.families == () and kb.top == () and kb.total_us == 0
    assert kb.launches is not None and kb.launches.launches == 0 and kb.launches.cpu_us.n == 0
    assert "no GPU activity" in render_kernels_text(kb)


def test_a_copy_keeps_its_direction_in_its_short_name():
    assert short_kernel_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD (Pinned -> Device)"
    assert short_kernel_name("Memset (Device)") == "Memset (Device)"
    assert short_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == (
        "ncclKernel_AllReduce_RING_LL_Sum_float"
    )
