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
    "BLOCKING_COPY",
    "BUILTIN_FRAME",
    "CLONE",
    "COPYING_RESHAPE",
    "DATALOADER_NEXT",
    "FP32_GEMM_KERNEL",
    "GEMM_KERNEL",
    "ITEM",
    "KERNEL_LAUNCH",
    "LAYOUT_VIEW",
    "LIBRARY_FRAME",
    "PAGEABLE_COPY",
    "SCALAR_READ",
    "SINGLE_PROCESS_LOADER",
    "SYNC_CALL",
    "TENSOR_CORE_KERNEL",
    "TF32_KERNEL",
    "NamePattern",
]


@dataclass(frozen=True)
class NamePattern:
    """A named regex over event names (searched, not anchored, unless the regex anchors)."""

    pattern: re.Pattern[str]
    group_name: str

    def matches(self, name: str) -> bool:
        """True when ``name`` matches."""
        return self.pattern.search(name) is not None

    def ids(self, names: list[str]) -> np.ndarray:
        """The interned ids (indices into ``names``) of the names that match."""
        return np.fromiter(
            (i for i, n in enumerate(names) if self.pattern.search(n)), dtype=np.int64
        )

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
# cuLaunchKernelEx: HTA PR #271; HIP for ROCm).
KERNEL_LAUNCH = NamePattern(
    re.compile(
        r"^(cudaLaunchKernel(ExC)?|cuLaunchKernel(Ex)?|cudaLaunchCooperativeKernel"
        r"|hipLaunchKernel|hipExtLaunchKernel|hipModuleLaunchKernel)(_v\d+)?$"
    ),
    "kernel launch",
)
# Calls that block the host until the device (or a stream, or an event) is done.
SYNC_CALL = NamePattern(
    re.compile(
        r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cuStreamSynchronize"
        r"|cuCtxSynchronize|cuEventSynchronize|hipStreamSynchronize|hipDeviceSynchronize"
        r"|hipEventSynchronize)(_v\d+)?$"
    ),
    "synchronisation",
)
# Copies and sets that are synchronous by API (no Async suffix): Nsight cuda_memcpy_sync.
BLOCKING_COPY = NamePattern(
    re.compile(
        r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|cudaMemset|cuMemcpy|cuMemcpyHtoD|cuMemcpyDtoH"
        r"|hipMemcpy|hipMemset)(_v\d+)?$"
    ),
    "blocking copy",
)
# A device value read on the host: .item(), int(t), a tensor used as a Python index.
SCALAR_READ = NamePattern(re.compile(r"^aten::_local_scalar_dense$"), "scalar read")
ITEM = NamePattern(re.compile(r"^aten::item$"), "item")
# Kineto names a copy "Memcpy {kind} ({src} -> {dst})"; Pageable is unpinned host memory.
PAGEABLE_COPY = NamePattern(re.compile(r"Pageable"), "pageable copy")
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
# Matrix-multiply and convolution kernels (cuBLAS, cuBLASLt, CUTLASS, cuDNN).
GEMM_KERNEL = NamePattern(
    re.compile(r"(?i)gemm|gemv|cutlass|xmma|cublas|matmul|conv|winograd|cudnn"), "GEMM/conv"
)
# Tensor Core kernels: torch-tb-profiler's allowlist (tensor_core.py, after NVIDIA PyProf tc.py)
# plus the Ampere/Hopper names (tensorop, gmma/wgmma, bf16/f16/tf32 tiles).
TENSOR_CORE_KERNEL = NamePattern(
    re.compile(
        r"(?i)h884|s884|h1688|s1688|hmma|i8816|16816|dgrad_1x1_stride_2x2|first_layer_wgrad_kernel"
        r"|conv1x1|conv2d_c1_k1|direct_group|xmma_implicit_gemm|xmma_sparse_conv"
        r"|xmma_warp_specialized|xmma_gemm|xmma_sparse_gemm|c1688|tensorop|gmma|bf16|f16|tf32"
        r"|hgemm|fp16|half"
    ),
    "Tensor Core",
)
# FP32 GEMMs that run on the CUDA cores, not the Tensor Cores (cuBLAS sgemm, and Hopper's
# f32f32 xmma tiles when TF32 is off); a "tf32" in the name means Tensor Cores after all.
FP32_GEMM_KERNEL = NamePattern(re.compile(r"(?i)sgemm|f32f32_f32f32"), "FP32 GEMM")
TF32_KERNEL = NamePattern(re.compile(r"(?i)tf32"), "TF32")
# Python frames that are not source lines (with_stack records C calls as "<built-in ...>").
BUILTIN_FRAME = NamePattern(re.compile(r"^<built-in|^<frozen"), "built-in frame")
# Frames inside torch itself (optimizers without foreach, module hooks).
LIBRARY_FRAME = NamePattern(re.compile(r"(^|/)torch/"), "torch frame")
