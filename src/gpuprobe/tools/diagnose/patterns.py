"""Named patterns over event names: every heuristic that looks at a name lives here.

Like HTA's ``GroupingPattern(pattern=re.compile(r"^nccl"), group_name="Communicate")``, each
pattern has a name for people and a compiled regex, and gives the interned ids of the names it
matches, so the rules work on integer columns rather than on strings scattered through the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = [
    "AMD_DEVICE",
    "BLOCKING_COPY",
    "BUILTIN_FRAME",
    "CLONE",
    "CONV_OP",
    "COPYING_RESHAPE",
    "COPY_TO_HOST",
    "DATALOADER_NEXT",
    "DATA_MOVEMENT",
    "FP32_GEMM_KERNEL",
    "GEMM_KERNEL",
    "GPU_ONLY_OP",
    "GRAPH_CAPTURE_BEGIN",
    "GRAPH_CAPTURE_END",
    "GRAPH_LAUNCH",
    "HIP_CALL",
    "ITEM",
    "KERNEL_LAUNCH",
    "LAYOUT_VIEW",
    "LIBRARY_FRAME",
    "MODULE_CALL_FRAME",
    "NCCL_BACKEND",
    "OTHER_ACCELERATOR_CATEGORY",
    "PAGEABLE_COPY",
    "SCALAR_READ",
    "SINGLE_PROCESS_LOADER",
    "SYNC_CALL",
    "TENSOR_CORE_KERNEL",
    "TF32_KERNEL",
    "USER_FRAME_EXCLUDE",
    "NamePattern",
]


_IDS: dict[int, list[tuple[list[str], int, np.ndarray]]] = {}  # pattern -> its last tables' ids
_IDS_KEPT = 2  # name tables remembered per pattern (the trace being read, and one before)


@dataclass(frozen=True)
class NamePattern:
    """A named regex over event names (searched, not anchored, unless the regex anchors)."""

    pattern: re.Pattern[str]
    group_name: str

    def matches(self, name: str) -> bool:
        """True when ``name`` matches."""
        return self.pattern.search(name) is not None

    def ids(self, names: list[str]) -> np.ndarray:
        """The interned ids (indices into ``names``) of the names that match (kept for the
        last few name tables: the rules ask the same pattern of one trace's table many times,
        and a table only grows)."""
        memo = _IDS.setdefault(id(self), [])
        for table, n, got in memo:
            if table is names and n == len(names):
                return got
        got = np.fromiter(
            (i for i, n in enumerate(names) if self.pattern.search(n)), dtype=np.int64
        )
        got.flags.writeable = False  # shared by every caller
        memo.insert(0, (names, len(names), got))
        del memo[_IDS_KEPT:]
        return got

    def mask(self, name_ids: np.ndarray, names: list[str]) -> np.ndarray:
        """Boolean mask over a column of name ids."""
        return np.isin(name_ids, self.ids(names))


# ProfilerStep's DataLoader span (torch/utils/data/dataloader.py, _BaseDataLoaderIter.__next__
# under record_function("enumerate(DataLoader)#{cls}.__next__")).
DATALOADER_NEXT = NamePattern(
    re.compile(r"^enumerate\(DataLoader\)#(?P<iter>\w+)\.__next__$"), "DataLoader next"
)
# num_workers=0: the batch is made in the training process itself.
SINGLE_PROCESS_LOADER = NamePattern(
    re.compile(r"_SingleProcessDataLoaderIter"), "single-process DataLoader"
)
# Kernel launches by API and platform (H100 uses cudaLaunchKernelExC: HTA #61; driver API
# cuLaunchKernelEx: HTA PR #271; HIP for ROCm: hipLaunchKernel, and hipExtModuleLaunchKernel /
# hipModuleLaunchKernel for hipBLASLt and Triton kernels, seen in HTA's MI250 test trace; Intel
# XPU: urEnqueueKernelLaunch in xpu_runtime, zeCommandListAppendLaunchKernel in xpu_driver).
_XPU_LAUNCH = r"urEnqueueKernelLaunch(Exp)?|zeCommandListAppendLaunchKernel"
KERNEL_LAUNCH = NamePattern(
    re.compile(
        r"^(cudaLaunchKernel(ExC)?|cuLaunchKernel(Ex)?|cudaLaunchCooperativeKernel"
        r"|cudaLaunchCooperativeKernelMultiDevice"
        r"|hipLaunchKernel(ExC)?|hipExtLaunchKernel|hipModuleLaunchKernel|hipExtModuleLaunchKernel"
        rf"|hipLaunchCooperativeKernel|{_XPU_LAUNCH})(_v\d+|_spt|_ptsz)?$"
    ),
    "kernel launch",
)
# One replay of a captured graph: one launch call for all of the graph's kernels (HTA #290).
GRAPH_LAUNCH = NamePattern(
    re.compile(r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)(_v\d+|_spt|_ptsz)?$"),
    "graph launch",
)
# Stream capture into a CUDA/HIP graph: the kernels launched between these calls on a thread are
# recorded into the graph, not run (no GPU activity follows them).
GRAPH_CAPTURE_BEGIN = NamePattern(
    re.compile(
        r"^(cudaStreamBeginCapture(ToGraph)?|cuStreamBeginCapture|hipStreamBeginCapture)"
        r"(_v\d+|_spt|_ptsz)?$"
    ),
    "graph capture start",
)
GRAPH_CAPTURE_END = NamePattern(
    re.compile(
        r"^(cudaStreamEndCapture|cuStreamEndCapture|hipStreamEndCapture)(_v\d+|_spt|_ptsz)?$"
    ),
    "graph capture end",
)
# Calls that block the host until the device (or a stream, or an event) is done.
SYNC_CALL = NamePattern(
    re.compile(
        r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cuStreamSynchronize"
        r"|cuCtxSynchronize|cuEventSynchronize|hipStreamSynchronize|hipDeviceSynchronize"
        r"|hipEventSynchronize)(_v\d+|_spt|_ptsz)?$"
    ),
    "synchronisation",
)
# Copies that are synchronous by API (no Async suffix; hipMemcpyWithStream is HIP's blocking copy
# on a stream, which torch uses for .item() on ROCm). Only those whose data goes to the host make
# the host wait for the GPU's queued work (CUDA runtime API docs, "API synchronization behavior").
BLOCKING_COPY = NamePattern(
    re.compile(
        r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|cuMemcpy|cuMemcpyDtoH|hipMemcpy|hipMemcpyDtoH"
        r"|hipMemcpyWithStream)(_v\d+|_spt|_ptsz)?$"
    ),
    "blocking copy",
)
# A copy towards host memory: Kineto's "Memcpy DtoH (Device -> Pageable)", or the driver call.
COPY_TO_HOST = NamePattern(
    re.compile(r"DtoH|Device -> (Pageable|Pinned|Host)|MemcpyDtoH"), "copy to host"
)
# Runtime calls never counted as one-time costs however long they take: copies and memsets
# (judged by the copy rules; a pageable copy is slow every step), stream/event waits and queries.
NOT_ONE_TIME_CALL = NamePattern(
    re.compile(r"(?i)memcpy|memset|StreamWaitEvent|EventQuery|EventRecord|StreamQuery"),
    "copy, memset or wait",
)
# The calls that create a CUDA context: the first CUDA calls of a process (torch's first one is
# cudaDeviceGetStreamPriorityRange or cudaGetDeviceCount; cudaFree(0) is the classic idiom).
CONTEXT_CALL = NamePattern(
    re.compile(
        r"StreamPriority|GetDeviceCount|^cu(da)?Free$|^cuInit$|Ctx|SetDevice|DriverGetVersion"
    ),
    "context creation",
)
# Set-up calls: allocations, releases, creations and loads, which the steady state of a cached
# allocator and loaded libraries does not make.
SETUP_CALL = NamePattern(
    re.compile(r"Malloc|Free|Create|Module|Library|Handle|FuncGetAttributes|GetDeviceProperties"),
    "set-up call",
)
# Ops that make new tensors on the host (random, constant or from data): when they run while the
# GPU idles, the step's inputs are being made on the CPU.
HOST_INPUT_OP = NamePattern(
    re.compile(
        r"^aten::(randn|rand|randint|randperm|normal_|uniform_|bernoulli_?|random_|randn_like"
        r"|rand_like|randint_like|zeros|ones|full|empty|arange|linspace|tensor|from_numpy"
        r"|stack|cat|as_tensor|scalar_tensor)$"
    ),
    "host input op",
)
# Ops that copy a tensor between devices (or dtypes): host-side time in them is the copy.
TRANSFER_OP = NamePattern(
    re.compile(r"^aten::(to|_to_copy|copy_|pin_memory|_pin_memory)$"), "copy op"
)

# Convolution ops: with torch.backends.cudnn.benchmark=True their first call for each input shape
# times cuDNN's algorithms with events (cudaEventSynchronize + cudaEventElapsedTime inside them).
CONV_OP = NamePattern(
    re.compile(r"^aten::(cudnn_convolution\w*|miopen_convolution\w*|_convolution|convolution\w*)$"),
    "convolution op",
)
# A device value read on the host: .item(), int(t), a tensor used as a Python index.
# (the legacy export of PyTorch <= 1.5 names ops without their aten:: namespace)
SCALAR_READ = NamePattern(re.compile(r"^(aten::)?_local_scalar_dense$"), "scalar read")
ITEM = NamePattern(re.compile(r"^(aten::)?item$"), "item")
# Kineto names a copy "Memcpy {kind} ({src} -> {dst})"; Pageable is unpinned host memory.
PAGEABLE_COPY = NamePattern(re.compile(r"Pageable"), "pageable copy")
PINNED_COPY = NamePattern(re.compile(r"Pinned"), "pinned copy")
# Views that change the layout, after which a reshape/contiguous must copy.
LAYOUT_VIEW = NamePattern(
    re.compile(
        r"^aten::(permute|transpose|t|swapaxes|swapdims|movedim|moveaxis|numpy_T|mT|mH|adjoint"
        r"|expand|unfold)$"
    ),
    "layout-changing view",
)
COPYING_RESHAPE = NamePattern(re.compile(r"^aten::(contiguous|reshape|flatten)$"), "reshape")
CLONE = NamePattern(re.compile(r"^aten::(clone|copy_)$"), "copy")
# Ops that move a tensor (to a device, a dtype, a layout): in a trace of one step, the step's own
# input copy looks like a first call, so the first-call test holds them to before any GPU work.
DATA_MOVEMENT = NamePattern(
    re.compile(r"^aten::(to|_to_copy|copy_|clone|contiguous|pin_memory|_pin_memory)$"),
    "data movement",
)
# Matrix-multiply and convolution kernels: cuBLAS/cuBLASLt (volta_/ampere_/sm80_/sm90_/sm100_
# xmma and gemm tiles, nvjet on Hopper and Blackwell), CUTLASS (incl. wgmma tiles), cuDNN, and on
# AMD rocBLAS/hipBLASLt (Tensile's Cijk_ kernels) and Composable Kernel (ck_, ck::). cuDNN's
# convolutions by their own names too: volta_scudnn_128x128_relu_small_nn_v1,
# _5x_cudnn_volta_scudnn_*, turing_fp16_s1688cudnn_fp16_*, fft2d_r2c_*. cuDNN's other kernels
# (batch norm: cudnn::bn_fw_tr_1C11...) are not matmuls.
GEMM_KERNEL = NamePattern(
    re.compile(
        r"(?i)gemm|gemv|cutlass|xmma|cublas|matmul|conv(?!ert)|winograd|nvjet|wgmma"
        r"|(^|\W)Cijk_|(^|\W|_)ck_|\bck::|implicit_convolve|fprop|dgrad|wgrad|(^|[^a-z])bmm_"
        r"|scudnn|\d{3,4}cudnn|fft[123]d_"
    ),
    "GEMM/conv",
)
# Tensor Core kernels: torch-tb-profiler's allowlist (tensor_core.py, after NVIDIA PyProf tc.py)
# plus the Ampere/Hopper/Blackwell names (tensorop, gmma/wgmma, nvjet, tcgen05, bf16/f16/tf32 and
# FP8 e4m3/e5m2 tiles), and AMD's matrix-core (MFMA) kernels: Tensile names its tile "MI16x16x1"
# and its types HHS/BBS (half, bfloat16), CK its xdl (MFMA) pipelines.
TENSOR_CORE_KERNEL = NamePattern(
    re.compile(
        r"(?i)h884|s884|h1688|s1688|hmma|i8816|16816|dgrad_1x1_stride_2x2|first_layer_wgrad_kernel"
        r"|conv1x1|conv2d_c1_k1|direct_group|xmma_implicit_gemm|xmma_sparse_conv"
        r"|xmma_warp_specialized|xmma_gemm|xmma_sparse_gemm|c1688|tensorop|gmma|bf16|f16|tf32"
        r"|hgemm|fp16|half|e4m3|e5m2|fp8|f8f6f4|nvjet|tcgen05|umma|_MI\d+x\d+x\d+|_HHS_|_BBS_"
        r"|_HSS_|_BSS_|_I8II_|xdl|mfma"
    ),
    "Tensor Core",
)
# FP32 GEMMs that run on the CUDA cores, not the Tensor Cores (cuBLAS sgemm, and Hopper's
# f32f32 xmma tiles when TF32 is off); a "tf32" in the name means Tensor Cores after all.
FP32_GEMM_KERNEL = NamePattern(re.compile(r"(?i)sgemm|f32f32_f32f32"), "FP32 GEMM")
TF32_KERNEL = NamePattern(re.compile(r"(?i)tf32"), "TF32")
# AMD GPUs (deviceProperties name under ROCm): advice differs (no TF32 switch, bf16 on MI200+).
AMD_DEVICE = NamePattern(re.compile(r"AMD|Radeon|Instinct|\bMI\d{3}"), "AMD GPU")
# ROCm's runtime calls: a trace with them ran on an AMD GPU.
HIP_CALL = NamePattern(re.compile(r"^hip[A-Z]"), "HIP runtime call")
# CPU ops that run only with GPU tensors: NCCL collectives (``nccl:all_to_all``; NCCL takes CUDA
# tensors only), cuDNN and cuBLAS calls, ``aten::_cuda_*``/``*_cuda`` kernels' ops; a trace
# with one used a GPU even when it holds no GPU activity (the profiler did not record it).
GPU_ONLY_OP = NamePattern(re.compile(r"(?i)^nccl:|cudnn|cublas|(^|::|_)cuda(_|$)"), "GPU-only op")
# A torch.distributed backend that runs on CUDA GPUs only (distributedInfo.backend "nccl", or a
# device map such as "cuda:nccl"); gloo, mpi and MTIA's hccl do not need a GPU.
NCCL_BACKEND = NamePattern(re.compile(r"(?i)nccl"), "NCCL backend")
# Event categories of accelerators that are not GPUs (Meta's MTIA: ``mtia_ccp_events`` on the
# device, ``mtia_runtime`` calls on the host): their device activity is not read as GPU work.
OTHER_ACCELERATOR_CATEGORY = NamePattern(re.compile(r"^mtia_"), "MTIA")
# Python frames that are not source lines (with_stack records C calls as "<built-in ...>").
BUILTIN_FRAME = NamePattern(re.compile(r"^<built-in|^<frozen"), "built-in frame")
# Frames inside torch itself (optimizers without foreach, module hooks).
LIBRARY_FRAME = NamePattern(re.compile(r"(^|/)torch/"), "torch frame")
# Frames that are not the user's own code: installed packages, the standard library, torch and
# Python's own markers (``<built-in ...>``, ``nn.Module: Linear_0``). The first frame that matches
# none of these, walking out from the op, is where the user's code called it.
USER_FRAME_EXCLUDE = NamePattern(
    re.compile(
        r"(site-packages|dist-packages)/|/lib/python\d[.\d]*/|^<|^nn\.Module:|^torch/"
        r"|^(threading|runpy|contextlib|functools|abc|typing)\.py\(|^[Ff]unction: |^\w+Backward"
    ),
    "library frame",
)
# Python that a compiler wrote: Inductor's output modules (/tmp/torchinductor_<user>/xx/cxx….py,
# TORCHINDUCTOR_CACHE_DIR's inductor_cache/…), FX GraphModules' generated forward
# (<eval_with_key>.N), AOTAutograd's compiled_fn wrappers. Their ops are the graph's, one call
# per node, however many there are.
GENERATED_FRAME = NamePattern(
    re.compile(r"torchinductor_|inductor_cache|<eval_with_key>|/_inductor/|torch_compile_debug"),
    "generated code",
)
# The frame that calls a module's forward (nn.Module.__call__): each layer of a model is a new
# call, so ops under it are layers, not the iterations of a loop.
MODULE_CALL_FRAME = NamePattern(
    re.compile(r"torch/nn/modules/module\.py\(\d+\): _(wrapped_)?call_impl|^nn\.Module: "),
    "module call",
)


# ---------------------------------------------------------------------------------------------
# Kernel families and launch calls (diagnose/kernels.py, diagnose/ranks.py). Each family is
# tried in the order of KERNEL_FAMILY_PATTERNS; the first that matches names the family. Names
# checked against the kernels of the real traces in the project's corpus (V100, RTX 2080 Ti,
# A100, MI250/MI300: cuDNN, cuBLAS, CUTLASS, NCCL, ATen, fbgemm, Triton) and against the names
# the libraries publish (cuBLASLt nvjet/sm90_xmma, hipBLASLt Cijk_, Composable Kernel ck_).
# ---------------------------------------------------------------------------------------------

# NCCL/RCCL collectives and point-to-point (ncclKernel_AllReduce_RING_LL_Sum_float, NCCL ≥ 2.19
# ncclDevKernel_AllGather_RING_LL), HCCL, MSCCL, the custom all-reduce kernels of vLLM/TRT, and
# PyTorch's symmetric-memory collectives on NVLink SHARP (multimem_all_reduce_kernel, seen on a B200).
COMM_KERNEL = NamePattern(
    re.compile(
        r"(?i)nccl|rccl|^hccl|msccl|cross_device_reduce|custom_?all_?reduce|one_?shot_?all_?reduce"
        r"|two_?shot_?all_?reduce|multimem_"
    ),
    "communication",
)
# HTA's CommunicateKernelGroupingPattern (hta/common/types.py): the kernels its
# get_comm_comp_overlap counts as communication; kept to compare with it number for number.
HTA_COMM_KERNEL = NamePattern(re.compile(r"^(nccl.*|hip|hccl)|.*ncclKernel.*"), "HTA communicate")
# HTA's ComputeKernelGroupingPattern, which is inverse: what it matches is NOT computation.
HTA_NON_COMPUTE_KERNEL = NamePattern(
    re.compile(
        r"^(nccl|.*Memcpy|.*Memset|.*dma|.*Sync|Stream Wait Event|cuda.*LaunchKernel|runFunction"
        r"|hip|job_exe|packet|pe_exe|cpum_exe_subgraph|hccl|collective_subgraph_execution)"
    ),
    "HTA non-compute",
)
# Copies and fills that run as kernels or DMA (HIP names them like CUDA's activities).
MEMORY_KERNEL = NamePattern(re.compile(r"^((hip)?Memcpy|(hip)?Memset|dma)"), "memcpy/memset")
# FlashAttention (flash_fwd_kernel, flash_bwd_dq_dk_dv_loop...), xFormers/PyTorch memory-efficient
# attention (fmha_cutlassF_f32_aligned_64x64_rf_sm80, efficient_attention_forward), cuDNN SDPA,
# CK fmha, paged attention (vLLM), Triton flash attention (_attn_fwd; attn_fwd on ROCm).
ATTENTION_KERNEL = NamePattern(
    re.compile(
        r"(?i)flash_?(fwd|bwd|attn)|fmha|attention|_attn_|(^|::)attn_(fwd|bwd)|sdpa|mha_(fwd|bwd)"
        r"|flash::"
    ),
    "attention",
)
# cuDNN and CUTLASS convolutions: implicit_convolve_sgemm, sm80_xmma_fprop_implicit_gemm...,
# cutlass_tensorop_s1688dgrad_optimized..., wgrad_alg0_engine, winograd, FFT (fft2d_r2c_32x32),
# scudnn tiles (volta_scudnn_128x64_relu_interior_nn_v1), and cuDNN's own helpers (offsets,
# layout transposes, output scaling). Batch norm (cudnn::bn_*) is a reduction, below.
CONV_KERNEL = NamePattern(
    re.compile(
        r"(?i)conv(?!ert)|fprop|dgrad|wgrad|winograd|scudnn|fft[123]d_|im2col|col2im|cask_cudnn"
        r"|cutlass_cudnn|flip_filter|cudnn::(ops|cnn|detail|winograd)|nchwToNhwc|nhwcToNchw"
    ),
    "convolution",
)
# Matrix multiplies: cuBLAS (volta_sgemm_128x64_nn, gemv2T_kernel, splitKreduce_kernel, dot_kernel),
# cuBLASLt (sm90_xmma_gemm_..., nvjet_tst_...), CUTLASS (cutlass_80_tensorop_s1688gemm_...,
# ..._wgmma_...), MAGMA, rocBLAS/hipBLASLt/Tensile (Cijk_Alik_Bljk_...), Composable Kernel
# (ck_..., ck::kernel_gemm_xdl...), Triton matmul templates (triton_tem_fused_mm, triton_mm).
# CUTLASS's element types (cutlass::bfloat16_t, cutlass::half_t) in another kernel's template
# arguments do not make it a GEMM (TensorRT-LLM's moe::dev::finalize kernels on a B200).
GEMM_FAMILY_KERNEL = NamePattern(
    re.compile(
        r"(?i)(?<!fb)gemm|gemv|cublas|cutlass(?!::(b?float|half|tfloat|complex|int\d|uint)\w*)|xmma"
        r"|nvjet|wgmma|gmma|matmul|splitKreduce|dot_kernel"
        r"|magma|^Cijk_|^ck_|ck::|triton_(tem_fused_)?(mm|bmm|addmm)|_mm_|bmm_"
    ),
    "GEMM",
)
# Reductions and normalisations: ATen reduce_kernel (sum, mean, norm, max), softmax, layer/batch/
# RMS/group norm (cudnn::bn_fw_tr_1C11_kernel_NCHW, welford, ATen's layer-norm kernels
# RowwiseMomentsCUDAKernel and GammaBetaBackwardCUDAKernel), pooling, losses, cub scans and
# reductions, Triton reductions (triton_red_*, triton_per_*).
REDUCTION_KERNEL = NamePattern(
    re.compile(
        r"(?i)reduce|softmax|norm(?!al)|welford|bn_fw|bn_bw|batch_?norm|RowwiseMoments|GammaBeta"
        r"|cross_?entropy|nll|criterion|argmax|argmin|topk|(max|avg|average)_?pool"
        r"|cub::Device(Reduce|Scan|SegmentedReduce)|DeviceScan|triton_(red|per)_"
    ),
    "reduction",
)
# Element-wise kernels: ATen's elementwise_kernel / vectorized_elementwise_kernel /
# unrolled_elementwise_kernel, fills and copies, cat, index/scatter/gather, optimizer
# multi_tensor_apply, Triton pointwise (triton_poi_*).
ELEMENTWISE_KERNEL = NamePattern(
    re.compile(
        r"(?i)elementwise|pointwise|triton_poi_|multi_tensor_apply|CatArrayBatchedCopy|Fill"
        r"|copy_kernel|scatter_gather|fused_dropout|_foreach_"
    ),
    "elementwise",
)
# Host calls that launch work on the GPU, one each (HTA's kernel launch ids plus the HIP names and
# the async copies HTA counts with include_memory_events=True).
LAUNCH_CALL = NamePattern(
    re.compile(
        r"^(cudaLaunchKernel(ExC)?|cuLaunchKernel(Ex)?|cudaLaunchCooperativeKernel"
        r"|hipLaunchKernel|hipExtLaunchKernel|hipModuleLaunchKernel|hipExtModuleLaunchKernel"
        r"|cudaMemcpyAsync|cudaMemsetAsync|hipMemcpyAsync|hipMemsetAsync|hipMemcpyWithStream"
        rf"|cudaGraphLaunch|hipGraphLaunch|cuGraphLaunch|{_XPU_LAUNCH})(_v\d+|_ptsz|_spt)?$"
    ),
    "launch",
)

__all__ += [
    "ATTENTION_KERNEL",
    "COMM_KERNEL",
    "CONTEXT_CALL",
    "CONV_KERNEL",
    "ELEMENTWISE_KERNEL",
    "GEMM_FAMILY_KERNEL",
    "GENERATED_FRAME",
    "GRAPH_LAUNCH",
    "HOST_INPUT_OP",
    "HTA_COMM_KERNEL",
    "HTA_NON_COMPUTE_KERNEL",
    "LAUNCH_CALL",
    "MEMORY_KERNEL",
    "NOT_ONE_TIME_CALL",
    "PINNED_COPY",
    "REDUCTION_KERNEL",
    "SETUP_CALL",
    "TRANSFER_OP",
]


# ---------------------------------------------------------------------------------------------
# Kernel provenance (diagnose/kernels.py PROVENANCES, provenance_of_name): where a kernel's code
# comes from, which decides what can change it. Tried in this order: collective (COMM_KERNEL,
# above), compiler, framework by the kernel's own name, library anywhere in the name (a cuBLAS
# kernel names its cublasGemvParams only in its arguments), framework anywhere; what matches
# none is the user's own (a CUDA extension, a CuPy RawKernel, a Numba kernel). A kernel's own
# name is what follows its return type ("void ", "std::enable_if<...>::type "): a custom kernel
# may take ATen's accessor types as arguments and stay the user's own. Checked against every
# distinct kernel name of the 51 real traces in ../shared/traces and of TraceLens's torch.compile,
# vLLM, SGLang and xDiT traces (MI300, B200).
# ---------------------------------------------------------------------------------------------

_RETURNS = r"^(?:(?:void|std::enable_if<.*?>::type)\s+)?"
# Kernels a compiler generated: Inductor's Triton kernels (triton_poi_/red_/per_/for_ fused
# kernels, triton_tem_ templates such as triton_tem_fused_mm_0; PyTorch 2.0 named them
# triton__0d1d2d), Triton kernels named so by their authors (create_..._triton), the Triton
# kernels of OpenAI's triton_kernels library (_matmul_ogs_..., _topk_forward: vLLM's MoE) and of
# vLLM's unified attention (kernel_unified_attention_2d) and FlashInfer backend
# (_copy_page_indices_kernel), XLA fusions (fusion_12,
# loop_add_fusion), nvFuser (nvfuser_pointwise_f0_c1_r0_g0; kernel1 in older versions), TVM
# (tvmgen_..., fused_..._kernel0) and TensorRT's Myelin (__myl_...).
COMPILER_KERNEL = NamePattern(
    re.compile(
        _RETURNS + r"(?:triton_|\w*_triton(?:_\w*)?\b|_?p?_matmul_ogs_|_topk_(?:forward|backward)\b"
        r"|_sum_bitmatrix_rows\b|_combined_routing_(?:memset|compute)\b|_finalize_matmul"
        r"|kernel_unified_attention_[23]d\b|_copy_page_indices_kernel\b"
        r"|(?:\w+_)?fusion(?:[._]\d+)*$|nvfuser_"
        r"|(?:CudaCodeGen::)?kernel\d+$|tvmgen_|fused_\w+_kernel\d+$|__myl_)"
    ),
    "compiler",
)
# The kernels Inductor (torch.compile) writes: all named triton_... (fused kernels, templates,
# PyTorch 2.0's triton__0d1d2d), unlike a library's own Triton kernels (vLLM's, triton_kernels'):
# what rules/compiled.py counts as compiled code.
INDUCTOR_KERNEL = NamePattern(re.compile(r"^triton_"), "Inductor kernel")
# Inductor's fused pointwise and reduction kernels: their names list the ATen ops fused into
# them (triton_poi_fused_addmm_gelu_view_15, ..._convolution_native_layer_norm_...), so a GEMM or
# convolution named there ran elsewhere (an extern cuBLAS/cuDNN call or a template).
INDUCTOR_FUSED_KERNEL = NamePattern(re.compile(r"^triton_(?:poi|red|per|for)_"), "Inductor fused")
# Inductor's matmul and convolution templates (triton_tem_fused_mm_0, triton_tem_fused_addmm_relu_0)
# and the Triton matmuls named so (triton_mm, triton_bmm): GEMMs whose dtype the name does not say.
TRITON_GEMM_KERNEL = NamePattern(
    re.compile(r"^triton_(?:tem_\w*?_)?(?:mm|bmm|addmm|baddbmm|convolution)(?:_|\d|$)"),
    "Triton GEMM",
)
# PyTorch's own kernels by their own name: ATen (at::native::..., at::cuda::..., ATen's copy of
# CUB as at_cuda_detail::cub), c10, its bundled FlashAttention (pytorch_flash::) and
# memory-efficient attention (PyTorchMemEffAttention), the ATen kernels that live outside a
# namespace (softmax_warp_forward, indexing_backward_kernel, elementwise_kernel_with_index,
# repeat_interleave's compute_cuda_kernel, the legacy THC/THCUNN kernels cunn_*,
# kernelPointwiseApply*), jiterator's run-time compiled kernels (<op>_vectorized4_kernel) and,
# on ROCm, AOTriton's attention kernels behind scaled_dot_product_attention (attn_fwd,
# bwd_kernel_dk_dv, bwd_kernel_dq, bwd_preprocess).
FRAMEWORK_KERNEL = NamePattern(
    re.compile(
        _RETURNS + r"(?:(?:at|at_cuda_detail|c10|caffe2|torch|pytorch_flash)::"
        r"|(?:\(anonymous namespace\)::)?(?:softmax_warp_(?:forward|backward)|cunn_\w+"
        r"|indexing_backward_kernel|elementwise_kernel_with_index|compute_cuda_kernel\b"
        r"|kernelPointwiseApply\d|kernelReduce(?:All|Contig|Noncontig)\w*|THC\w+"
        r"|\w+_vectorized[1248]_kernel\b)"
        r"|(?:attn_fwd|bwd_kernel_dk_dv|bwd_kernel_dq|bwd_preprocess(?:_varlen)?)$)"
    ),
    "framework",
)
# ATen anywhere in the name: an ATen functor instantiated inside another namespace's kernel
# template (void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::...>).
FRAMEWORK_ANYWHERE = NamePattern(
    re.compile(r"\bat::native::|PyTorchMemEffAttention::"), "framework (in arguments)"
)
# Library kernels, anywhere in the name. NVIDIA: cuBLAS/cuBLASLt (sgemm/gemv/gemmSN/gemmk1/
# splitKreduce/dot/scal kernels, cublas*Params, nvjet), tiles by architecture (volta_sgemm_...,
# ampere_..., sm80_xmma_..., sm90_...), CUTLASS (not its element types in another kernel's
# template arguments), cuDNN (cudnn*, cask_*, scudnn, implicit/explicit_convolve_sgemm,
# wgrad_alg*/dgrad engines, FFT convolutions fft2d_r2c_..., flip_filter, nchwToNhwcKernel,
# pointwise_mult_and_sum_complex), cuFFT, cuSPARSE, cuSOLVER, cuRAND, CUB and Thrust, MAGMA.
# AMD: Tensile (Cijk_...), Composable Kernel (ck::, ck_tile, mangled _ZN2ck/_ZN7ck_tile),
# rocBLAS, hipBLASLt, MIOpen (igemm_fwd_gtcx..., Im2d2Col, SubTensorOpWith...,
# batched_transpose_...), rocPRIM/hipCUB, rocRAND. Third-party kernel libraries: FBGEMM-GPU
# (fbgemm_gpu::, its table-batched embeddings split_embedding_*, bounds_check_indices_kernel,
# ...), apex (multi_tensor_apply with adamMode_t, cuApplyLayerNorm), FlashAttention (flash::,
# flash_fwd_kernel), xFormers/CUTLASS fmha, FlashInfer, Transformer Engine, TensorRT-LLM
# (tensorrt_llm::, trtllm-gen bmm_*/fmhaSm100* and moe::dev:: kernels), vLLM (vllm::), SGLang
# (sgl_kernel, sgl_hip), AITER (aiter; its group norm, groupnorm_kernel_dispatch_up/down, in an
# anonymous namespace), DeepGEMM, bitsandbytes, Marlin.
LIBRARY_KERNEL = NamePattern(
    re.compile(
        r"(?i:cublas|cudnn|cufft|cusparse|cusolver|curand|rocblas|hipblas|miopen|rocrand|rocfft"
        r"|magma|tensile|nvjet|xmma|scudnn|winograd)"
        r"|cutlass(?!::(?:b?float|half|tfloat|complex|int\d|uint)\w*)"
        r"|" + _RETURNS + r"(?:volta|turing|ampere|ada|hopper|blackwell|maxwell|pascal|kepler"
        r"|sm\d{2,3}a?)_"
        r"|" + _RETURNS + r"(?:gemv\w*_kernel|gemvx::|gemmSN_|gemmk1_kernel|splitKreduce_kernel"
        r"|dot_kernel|scal_kernel|nrm2_kernel|axpy_kernel|asum_kernel|sgemm_largek|sgemm_\d"
        r"|transpose_readWrite|reduce_1Block_kernel|epilogue::impl::|internal::gemvx"
        r"|(?:implicit|explicit)_convolve_sgemm|wgrad_alg\d|dgrad\w*_alg|dgrad_engine"
        r"|fft[123]d_[rc]2[rc]|regular_fft|vector_fft|flip_filter|pointwise_mult_and_sum_complex"
        r"|nchwToNhwcKernel|nhwcToNchwKernel|computeOffsetsKernel|cask_)"
        r"|(?:^|\W)Cijk_|\bck::|\bck_tile\b|_ZN(?:2ck|7ck_tile)\d|(?:^|\W)ck_"
        r"|" + _RETURNS + r"(?:igemm_(?:fwd|bwd|wrw)_|Im2d2Col|SubTensorOpWith"
        r"|batched_transpose_\d+x\d+_|naive_conv_)"
        r"|\b(?:cub|thrust|rocprim|hipcub)::|\bfbgemm|" + _RETURNS + r"(?:split_embedding_"
        r"|dense_embedding_|bounds_check_indices_kernel|linearize_index_kernel"
        r"|permute_pooled_embs_kernel|recat_copy_async_kernel)"
        r"|adamMode_t|\bapex::|cuApplyLayerNorm|cuComputeGradInput"
        r"|\bflash::|flash_(?:fwd|bwd)_\w*kernel|fmha_cutlass|xformers|flashinfer"
        r"|transformer_engine|\bnvte_|tensorrt_llm|trtllm|\bmoe::dev::|"
        + _RETURNS
        + r"(?:bmm_(?:Bfloat16|Fp16|Fp8|E[245]m\d|MxE)|fmhaSm\d+)"
        r"|\bvllm::|sgl_kernel|sgl_hip|_ZN\d+sgl_|\baiter\b|_ZN5aiter|deep_gemm|deep_ep"
        r"|groupnorm_kernel_dispatch_(?:up|down)\b"
        r"|\bk(?:Quantize|Dequantize)Blockwise|kOptimizer\w*State|kgemm_4bit|\bmarlin"
    ),
    "library",
)

__all__ += [
    "COMPILER_KERNEL",
    "FRAMEWORK_ANYWHERE",
    "FRAMEWORK_KERNEL",
    "INDUCTOR_FUSED_KERNEL",
    "INDUCTOR_KERNEL",
    "LIBRARY_KERNEL",
    "TRITON_GEMM_KERNEL",
]

# torch.compile in a trace (diagnose/rules/compiled.py). TorchDynamo wraps each run of a frame's
# compiled code in a cpu_op "Torch-Compiled Region: F/C" (frame F, its C-th compilation:
# C > 0 means the frame was compiled again, a recompile; a graph break runs the rest of the
# frame as a new frame, whose region opens inside the first: PyTorch's
# test_profiler_dynamo_compiled_region), after a "TorchDynamo Cache Lookup" cpu_op; PyTorch 2.0
# shows no region, only AOTAutograd's "CompiledFunction" (and "CompiledFunctionBackward") ops;
# Inductor marks each call of its compiled graph "## Call CompiledFxGraph <hash> ##".
COMPILED_REGION = NamePattern(
    re.compile(r"^Torch-Compiled Region(?::\s*(?:!\d+/)?(?P<frame>\d+)/(?P<compile>\d+))?"),
    "compiled region",
)
COMPILED_CALL = NamePattern(
    re.compile(r"^(?:CompiledFunction(?:Backward)?|## Call CompiledFxGraph \w+ ##)$"),
    "compiled graph call",
)
DYNAMO_CACHE_LOOKUP = NamePattern(re.compile(r"^TorchDynamo Cache Lookup$"), "dynamo cache lookup")
# Compiling inside the profile: dynamo_timed's record_function spans ("_compile.compile_inner
# (dynamo_timed)", "OutputGraph.call_user_compiler (dynamo_timed)", "compile_fx_inner
# (dynamo_timed)", "CachingAutotuner.benchmark_all_configs (dynamo_timed)": torch/_dynamo/
# utils.py, PyTorch 2.1 to 2.8), their later names without the suffix (entire_frame_compile,
# backend_compile), and with with_stack=True the Python frames of dynamo's and Inductor's
# compilers (torch/_dynamo/convert_frame.py _compile, output_graph.py call_user_compiler,
# torch/_inductor/compile_fx.py compile_fx). Running compiled code (output_code.py __call__)
# and Inductor's idle compile workers are not compiling.
COMPILE_WORK = NamePattern(
    re.compile(
        r"\(dynamo_timed\)$|^(?:entire_frame_compile|backend_compile|_compile\.compile_inner"
        r"|compile_inner|OutputGraph\.call_user_compiler|compile_fx_inner|fx_codegen_and_compile"
        r"|GraphLowering\.compile_to_module|CachingAutotuner\.benchmark_all_configs"
        r"|create_aot_dispatcher_function|inductor_compile)$"
        r"|torch/_dynamo/convert_frame\.py\(\d+\): (?:_compile|compile_inner)$"
        r"|torch/_dynamo/output_graph\.py\(\d+\): call_user_compiler$"
        r"|torch/_inductor/compile_fx\.py\(\d+\): (?:compile_fx|compile_fx_inner)$"
    ),
    "compiling",
)

__all__ += ["COMPILED_CALL", "COMPILED_REGION", "COMPILE_WORK", "DYNAMO_CACHE_LOOKUP"]

# Collectives run on the host by a CPU backend, as torch.distributed's gloo records them
# (record_function "gloo:all_reduce", "gloo:broadcast", ... on its work thread, spanning the
# wait for the other ranks): the ranks' collectives when their traces have no GPU.
CPU_COLLECTIVE = NamePattern(re.compile(r"^gloo:\w+$"), "CPU collective")

__all__ += ["CPU_COLLECTIVE"]


# ---------------------------------------------------------------------------------------------
# The phases of a training step on the host (diagnose/phases.py): the spans that mark each
# phase, from the PyTorch profiler's own record_function names, its Python frames (with_stack)
# and the record_function names of training frameworks. Checked against the real CPU-only
# traces of ../shared/traces (TorchRec's train pipeline, MTIA) and a loop recorded with
# torch 2.13 on the CPU (tests/data/diagnose/cpu_mlp_slow_loader*.json.gz).
# ---------------------------------------------------------------------------------------------

# Optimizer.step and Optimizer.zero_grad: torch/optim/optimizer.py profiles each as
# record_function("Optimizer.step#{cls}.step") and ("Optimizer.zero_grad#{cls}.zero_grad");
# Hugging Face's and Lightning's optimizer wrappers call them. TorchRec's train pipelines mark
# theirs "## optimizer ##" and "## zero_grad ##".
OPTIMIZER_SPAN = NamePattern(
    re.compile(
        r"^Optimizer\.(step|zero_grad)#\w+\.(step|zero_grad)$|^## (optimizer|zero_grad) ##$"
    ),
    "optimizer",
)
# The autograd engine's span around each backward function it runs (torch >= 1.10:
# "autograd::engine::evaluate_function: AddmmBackward0"), on whichever thread runs backward.
EVALUATE_FUNCTION = NamePattern(
    re.compile(r"^autograd::engine::evaluate_function: "), "autograd backward function"
)
# The backward functions themselves, which PyTorch <= 1.9 recorded without that span
# (CudnnConvolutionBackward, torch::autograd::AccumulateGrad): backward when the trace has no
# evaluate_function span.
AUTOGRAD_NODE = NamePattern(
    re.compile(r"^(\w+Backward\d*|torch::autograd::(AccumulateGrad|CopyBackwards|GraphRoot))$"),
    "autograd node",
)
# The whole backward call: its Python frames (with_stack: torch/_tensor.py backward,
# torch/autograd/__init__.py backward), TorchRec's "## backward ##" and Lightning's
# "[Strategy]SingleDeviceStrategy.backward" (lightning/pytorch/trainer/call.py,
# _call_strategy_hook: trainer.profiler.profile(f"[Strategy]{cls}.{hook_name}")).
BACKWARD_SPAN = NamePattern(
    re.compile(
        r"^torch/(_tensor|autograd/__init__)\.py\(\d+\): backward$|^## backward ##$"
        r"|^\[Strategy\]\w+\.backward$"
    ),
    "backward",
)
# The forward pass: each module's call (with_stack: "nn.Module: Linear_0" python_function
# events), TorchRec's "## forward ##" and Lightning's "[Strategy]...training_step" spans (the
# forward and the loss).
FORWARD_SPAN = NamePattern(
    re.compile(r"^nn\.Module: |^## forward ##$|^\[Strategy\]\w+\.training_step$"), "forward"
)

__all__ += ["AUTOGRAD_NODE", "BACKWARD_SPAN", "EVALUATE_FUNCTION", "FORWARD_SPAN", "OPTIMIZER_SPAN"]
