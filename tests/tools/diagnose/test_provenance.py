"""Kernel provenance (library, framework, compiler, collective, own) on real kernel names, its
share of kernel time on real traces, and the Tensor Core advice that fits it (own kernel,
cuBLAS, Triton) on traces built to the Kineto schema."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from gpuprobe.core.findings import Status
from gpuprobe.platform.hardware.specs import spec_for
from gpuprobe.tools.diagnose.analysis import TraceContext
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.kernels import PROVENANCES, kernel_breakdown, provenance_of_name
from gpuprobe.tools.diagnose.kineto import read_trace
from gpuprobe.tools.diagnose.rules.precision import TENSOR_CORE_HALF_US
from gpuprobe.tools.diagnose.synthetic import KinetoBuilder

from .realdata import DATA, DLRM_FILES, load

# Kernel names copied literally from real traces: ../shared/traces (HTA, Kineto, PARAM) and
# TraceLens's MI300/B200 inference traces (tests/traces/inference, b200, torch_compile_triton).
REAL_NAMES: dict[str, list[str]] = {
    "library": [
        "ampere_sgemm_128x64_nn",  # cuBLAS, HTA critical_path (A100)
        "volta_sgemm_128x32_nt",  # cuBLAS, PARAM DLRM (V100)
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5"
        "_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",  # cuDNN
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
        "(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, "
        "float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, "
        "float*, float*, float*, float*, float, float)",
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>"
        "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned "
        "long long, int, float, float, int, float const*, float const*, bool, int, int)",
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::"
        "Policy800, false, long, int, int, int>(int*, int*, int*, int const*, long*, long const*,"
        " int*, int const*, int, int, int)",
        "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT",  # cuBLASLt on a B200
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64"
        "_tb1x8x2x1_1x4x1x64",  # MIOpen on an MI300X
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
        "c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_"
        "S4_S4_diiiiiiib",  # AITER on an MI300X (SGLang)
    ],
    "framework": [
        "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::"
        "Tensor const&, long, long, double)::{lambda(float)#1}, at::detail::Array<char*, 2> >"
        "(int, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, long, double)::"
        "{lambda(float)#1}, at::detail::Array<char*, 2>)",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*, "
        "float const*, int, int, int)",
        "void at_cuda_detail::cub::DeviceScanInitKernel<at_cuda_detail::cub::ScanTileState<long, "
        "true> >(at_cuda_detail::cub::ScanTileState<long, true>, int)",
        "void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, float*, float*, "
        "long*, float*, int, int, int, int, long)",
        "void compute_cuda_kernel<long>(long*, long*, long*, long, long)",  # repeat_interleave
        "attn_fwd",  # AOTriton behind scaled_dot_product_attention on ROCm
        "at::cuda::(anonymous namespace)::spin_kernel(long)",
    ],
    "compiler": [
        "triton_poi_fused_add_cos_sin_0",
        "triton__0d1d2d3d",  # Inductor in PyTorch 2.0
        "triton_red_fused_add_mean_mul_pow_rsqrt_0",
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1",  # triton_kernels (vLLM's MoE)
        "create_flashinfer_kv_indices_triton",
        "kernel_unified_attention_2d",
    ],
    "collective": [
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*"
        ", unsigned long, unsigned int**, unsigned long, unsigned long)",
    ],
    "own": [
        "Kernel",  # libkineto's documentation trace
        "void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::"
        "StoreKVCacheParams)",  # SGLang's JIT-built kernel
        "void rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
        "c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
        "sage_fwd",  # SageAttention's Triton kernel: nothing in the name says Triton
    ],
}


@pytest.mark.parametrize(
    ("provenance", "name"), [(p, n) for p, names in REAL_NAMES.items() for n in names]
)
def test_real_kernel_names(provenance: str, name: str) -> None:
    assert provenance_of_name(name) == provenance


def test_aten_types_in_the_arguments_do_not_make_a_kernel_atens() -> None:
    # a CUDA extension's kernel takes ATen accessors (the PyTorch extension tutorial's shape);
    # fbgemm's embedding kernels do too and are a library's
    own = (
        "void (anonymous namespace)::lltm_cuda_forward_kernel<float>(at::GenericPackedTensor"
        "Accessor<float, 2ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float,"
        " 2ul, at::RestrictPtrTraits, int>)"
    )
    assert provenance_of_name(own) == "own"
    assert provenance_of_name("matmul_k") == "own"
    fbgemm = (
        "void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAccessor<long, 1ul,"
        " at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::Restrict"
        "PtrTraits, int>)"
    )
    assert provenance_of_name(fbgemm) == "library"
    # CUTLASS's element types in another kernel's template arguments are not CUTLASS
    assert provenance_of_name("void my_kernel<cutlass::half_t>(cutlass::half_t*)") == "own"


FIXTURES = sorted(DATA.glob("*.json.gz")) + DLRM_FILES


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: Path(p).name)
def test_no_real_fixture_kernel_is_called_own(path: Path) -> None:
    # every kernel in the real traces of tests/data is a library's, PyTorch's, a compiler's or
    # NCCL's: none is custom code
    data = load(path)
    events = data["traceEvents"] if isinstance(data, dict) else data  # a legacy export: a list
    kernels = {
        e["name"]
        for e in events
        if isinstance(e, dict) and e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X"
    }
    assert [n for n in kernels if provenance_of_name(n) == "own"] == []


@pytest.mark.parametrize("path", DLRM_FILES[:2], ids=lambda p: Path(p).name)
def test_provenance_shares_of_a_real_trace(path: Path) -> None:
    # one step (ProfilerStep#12): the shares computed straight from the JSON, kernels only
    # (copies and fills are not kernels)
    data = load(path)
    steps = [e for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    (step,) = steps
    launches = {
        e["args"]["correlation"]: e["ts"]
        for e in data["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    by: dict[str, float] = defaultdict(float)
    for e in data["traceEvents"]:
        if e.get("cat") != "kernel":
            continue
        # a kernel belongs to the step of its launch; one whose launch is not in the trace, to
        # the step it runs in
        t = launches.get(e["args"].get("correlation"), e["ts"])
        if not step["ts"] <= t <= step["ts"] + step["dur"]:
            continue
        by[provenance_of_name(e["name"])] += e["dur"]
    kb = kernel_breakdown(TraceContext(read_trace(path)))
    total = sum(by.values())
    assert {p.provenance for p in kb.provenances} == set(by)
    for p in kb.provenances:
        assert p.total_us == pytest.approx(by[p.provenance])
        assert p.share == pytest.approx(by[p.provenance] / total)
    assert [p.provenance for p in kb.provenances] == [p for p in PROVENANCES if p in by]
    # NCCL's send/recv dominates a DLRM rank; ATen and cuBLAS do the rest
    assert kb.provenance("collective") is not None
    assert kb.provenance("collective").share > 0.5
    assert kb.provenance("own") is None
    assert all(k.provenance in PROVENANCES for k in kb.top)
    assert "Kernel time by provenance" in str(kb)
    assert "<h4>Kernel time by provenance</h4>" in kb._repr_html_()


# -- the Tensor Core advice, by provenance (synthetic traces) ----------------------------------

OWN_GEMM = "matmul_k"  # a hand-written CUDA matmul (the example)
CUBLAS_SGEMM = "ampere_sgemm_128x64_nn"
TRITON_MM = "triton_tem_fused_mm_0"
SMALL = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def _gemm_trace(path: Path, kernel: str, *, amd: bool = False, steps: int = 4) -> str:
    b = KinetoBuilder(
        device_name="AMD Instinct MI300X" if amd else "NVIDIA A100-SXM4-80GB",
        compute_major=9 if amd else 8,
        compute_minor=4 if amd else 0,
    )
    for n in range(steps):
        with b.step(n):
            for _ in range(8):
                b.launch(kernel, kernel_us=900.0)
                b.launch(SMALL, kernel_us=40.0, op="aten::add")
            b.sync()  # the step waits for its GPU work (loss.item()), as a training step does
        b.cpu(20.0)
    return b.write(str(path))


def _expected_gain(path: str, kernel: str) -> float:
    # each step waits for its GPU work, so the GEMM time the Tensor Cores save comes off the
    # step's pace whole: (GEMM time per step) x (1 - 1/speed-up) over the step
    # each kernel at the card's TF32 rate (datasheet TF32 over FP32), less for a short kernel:
    # 1 + (peak - 1) * d / (d + TENSOR_CORE_HALF_US)
    data = load(path)
    steps = [e for e in data["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")]
    spec = spec_for(data["deviceProperties"][0]["name"])
    peak = spec.tf32 / spec.fp32
    saved = sum(
        e["dur"] * (1 - 1 / (1 + (peak - 1) * e["dur"] / (e["dur"] + TENSOR_CORE_HALF_US)))
        for e in data["traceEvents"]
        if e.get("name") == kernel
    ) / len(steps)
    return saved / statistics.median(e["dur"] for e in steps)


def test_own_matmul_kernel_is_not_told_to_use_autocast(tmp_path: Path) -> None:
    path = _gemm_trace(tmp_path / "own.json.gz", OWN_GEMM)
    d = diagnose(path)
    f = d.finding("no-tensor-cores")
    assert f.status is Status.WARN
    assert f.title.startswith(f"your own kernel {OWN_GEMM} ")
    assert "autocast and TF32 cannot reach it" in f.title
    share = float(f.title.split(" takes ")[1].split(" %")[0])
    assert share == pytest.approx(100 * 8 * 900 / (8 * 940), abs=0.1)
    # what would use the Tensor Cores: a library GEMM, WMMA/MMA in the kernel, Triton tl.dot
    assert "torch.matmul" in f.fix and "mma.sync" in f.fix and "wmma" in f.fix
    assert "tl.dot" in f.fix
    assert not f.fix.startswith("torch.set_float32_matmul_precision")
    assert f.details[0].startswith(f"{OWN_GEMM}: ")
    assert f.gain == pytest.approx(_expected_gain(path, OWN_GEMM), rel=0.01)
    assert next(e.value for e in f.evidence if e.name == "own_kernel_gemm_share") > 90


def test_own_matmul_kernel_on_amd_gets_matrix_core_advice(tmp_path: Path) -> None:
    f = diagnose(_gemm_trace(tmp_path / "own_amd.json.gz", OWN_GEMM, amd=True)).finding(
        "no-tensor-cores"
    )
    assert f.status is Status.WARN and "matrix cores" in f.title
    assert "rocWMMA" in f.fix and "mfma" in f.fix and "cuBLAS" not in f.fix


def test_cublas_sgemm_keeps_the_tf32_advice(tmp_path: Path) -> None:
    path = _gemm_trace(tmp_path / "cublas.json.gz", CUBLAS_SGEMM)
    f = diagnose(path).finding("no-tensor-cores")
    assert f.status is Status.WARN
    assert f.title.startswith("FP32 matmuls take")
    assert f.fix.startswith("torch.set_float32_matmul_precision('high')")
    (detail,) = f.details
    assert detail == f"{CUBLAS_SGEMM}: {round(100 * 8 * 900 / (8 * 940), 1)} % of kernel time"
    assert f.gain == pytest.approx(_expected_gain(path, CUBLAS_SGEMM), rel=0.01)


def test_triton_gemm_is_reported_not_warned(tmp_path: Path) -> None:
    # an Inductor template's name does not say its dtype: tl.dot may well run on Tensor Cores
    f = diagnose(_gemm_trace(tmp_path / "triton.json.gz", TRITON_MM)).finding("no-tensor-cores")
    assert f.status is Status.INFO
    assert TRITON_MM in f.title and "does not show" in f.title
    assert "set_float32_matmul_precision('high')" in f.fix and "bfloat16" in f.fix
    assert f.gain is None


def test_inductor_fused_pointwise_kernels_are_not_gemms(tmp_path: Path) -> None:
    # Inductor names a pointwise kernel after the ops fused around an addmm or a convolution
    fused = "triton_poi_fused__unsafe_view_add_addmm_clone_convolution_mul_native_layer_norm_7"
    f = diagnose(_gemm_trace(tmp_path / "fused.json.gz", fused)).finding("no-tensor-cores")
    assert f.status is Status.OK
    assert next(e.value for e in f.evidence if e.name == "gemm_share_of_kernel_time") == 0
