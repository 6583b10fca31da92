"""torch's precision switches: TF32, autocast to bf16/fp16, int8 dynamic quantization, and
whether a device runs them; used by :mod:`gpuprobe.tools.memory.precision`.

Each function imports torch through :func:`gpuprobe.platform.frameworks.torch.require`, which says how to
install it when it is missing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from gpuprobe.platform.frameworks.torch import loaded, require

__all__ = [
    "BF16_MIN_CC",
    "autocast",
    "bf16_supported",
    "forward_flops",
    "mha_fastpath",
    "module_device",
    "quantize_dynamic_int8",
    "tf32_matmul",
    "tf32_supported",
]


def module_device(model: Any) -> str:
    """The device of a module's first parameter (``cpu`` for a module without any)."""
    for p in model.parameters():
        return str(p.device)
    return "cpu"


def tf32_matmul(enabled: bool) -> Any:
    """A context manager that sets TF32 for CUDA matmuls and cuDNN convolutions, and restores
    the previous settings on exit."""
    import contextlib

    torch = require("TF32")

    @contextlib.contextmanager
    def ctx() -> Any:
        old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old

    return ctx()


def autocast(device: str, dtype_name: str) -> Any:
    """``torch.autocast`` on ``device``'s type for ``bf16`` or ``fp16``."""
    torch = require("autocast")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    return torch.autocast(device_type=device.partition(":")[0], dtype=dtype)


# bfloat16 tensor-core math starts with Ampere, compute capability 8.0 (CUDA C++ Programming
# Guide, "Arithmetic Instructions"; cuBLAS bf16 GEMM). torch.cuda.is_bf16_supported() also counts
# emulation (True on T4 and V100) and looks at the current device, not the one asked.
BF16_MIN_CC = (8, 0)


def bf16_supported(device: str) -> bool:
    """Whether ``device`` runs bfloat16 natively: for CUDA, the compute capability of that very
    device is 8.0 or newer (emulated bf16 on older cards is not counted); the CPU: yes."""
    torch = require("bf16")
    if device.startswith("cuda"):
        cc = torch.cuda.get_device_capability(torch.device(device))
        return bool(tuple(cc) >= BF16_MIN_CC)
    return True


def tf32_supported(device: str) -> bool:
    """TF32 is an NVIDIA tensor-core mode of compute capability 8.0 and newer."""
    torch = require("tf32")
    if not device.startswith("cuda"):
        return False
    return bool(torch.cuda.get_device_capability(torch.device(device))[0] >= 8)


def quantize_dynamic_int8(model: Any) -> Any:
    """A copy of ``model`` with its ``nn.Linear`` layers quantized to int8 by
    ``torch.ao.quantization.quantize_dynamic`` (weights int8, activations quantized on the fly;
    CPU only). Warnings torch raises (deprecation) are silenced here and left to the caller."""
    import copy

    torch = require("int8 quantization")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)


def mha_fastpath(enabled: bool) -> Any:
    """A context manager that turns the ``nn.TransformerEncoderLayer`` / ``MultiheadAttention``
    inference fast path on or off (it rejects dynamically quantized ``nn.Linear`` layers, whose
    ``weight`` is a method), restoring the setting on exit."""
    import contextlib

    torch = require("the MHA fast path")
    mha = getattr(torch.backends, "mha", None)

    @contextlib.contextmanager
    def ctx() -> Any:
        if mha is None:
            yield
            return
        old = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(enabled)
        try:
            yield
        finally:
            mha.set_fastpath_enabled(old)

    return ctx()


def forward_flops(fn: Callable[[], Any]) -> int | None:
    """Floating-point operations of one call of ``fn`` (a forward pass), counted by torch's
    ``FlopCounterMode`` (matmuls, convolutions, attention), with the fused MHA fast path off
    (its one fused kernel would count as nothing); None when torch cannot count them or
    counts none. Says how much work a pass is, so its time can be read as a rate (FLOP/s)."""
    torch = loaded()
    if torch is None:
        return None
    mha = getattr(torch.backends, "mha", None)
    old = mha.get_fastpath_enabled() if mha is not None else None
    try:
        from torch.utils.flop_counter import FlopCounterMode

        if mha is not None:
            mha.set_fastpath_enabled(False)
        with FlopCounterMode(display=False) as counter:
            fn()
        return int(counter.get_total_flops()) or None
    except Exception:  # an op torch cannot count, out of memory: the rate is not known
        return None
    finally:
        if mha is not None:
            mha.set_fastpath_enabled(old)
