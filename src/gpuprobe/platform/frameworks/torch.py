"""PyTorch's door: this module and its theme modules are the only ones that import ``torch``.
The themes: :mod:`~gpuprobe.platform.frameworks.torch_builds` (the published CUDA builds; pure data),
:mod:`~gpuprobe.platform.frameworks.torch_memory` (the caching allocator) and
:mod:`~gpuprobe.platform.frameworks.torch_precision` (TF32, autocast, int8); the last two get torch from
:func:`loaded` and :func:`require` here.

``static_probe()`` reads the installed build from package files (``torch/version.py`` parsed, never
executed) so that ``gpuprobe info`` stays fast; ``runtime_probe()`` imports torch and asks CUDA,
and is run in a child process so that the user's process never initialises CUDA through gpuprobe.
:class:`TorchBackend` runs the measurements on torch tensors.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.platform.frameworks.base import (
    Backend,
    FrameworkDevice,
    FrameworkInfo,
    dist_version,
    event_times,
    first_installed,
    host_times,
    import_failed,
    module_dir,
    read_constants,
)

__all__ = [
    "TorchBackend",
    "check_device",
    "loaded",
    "preload_modules",
    "profiler_modules",
    "require",
    "runtime_probe",
    "static_probe",
]

# torch._int_mm on CUDA needs m > 16 and k, n multiples of 8 (aten Blas.cpp _int_mm_out_cuda;
# keras-team/keras#19207).
INT_MM_MIN_M = 17
INT_MM_MULTIPLE = 8
# Bytes written between repetitions to evict the L2 cache: at least this, and twice the L2
# (triton.testing.do_bench zeroes a 256 MB buffer before every repetition).
L2_FLUSH_BYTES = 256 * 2**20
# torch.cuda._sleep spins for a number of GPU clock cycles: counted at the fastest SM clock of
# current cards (an RTX 4090 boosts to 2.52 GHz; an H100/H200 to 1.98), a hold lasts at least as
# long as asked (longer at lower clocks, which costs a little untimed waiting).
SPIN_CLOCK_HZ = 3.0e9


def _cudnn_from_dists() -> str | None:
    found = first_installed(("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"))
    return found[1] if found else None


def static_probe() -> FrameworkInfo:
    """The installed torch build from its files, without importing it."""
    version = dist_version("torch")
    if version is None:
        return FrameworkInfo(name="torch", installed=False)
    consts = {}
    pkg = module_dir("torch")
    if pkg is not None:
        consts = read_constants(pkg / "version.py")
    cuda = consts.get("cuda")
    hip = consts.get("hip")
    cpu_only = cuda is None and hip is None
    return FrameworkInfo(
        name="torch",
        installed=True,
        version=str(consts.get("__version__", version)),
        probe="static",
        distribution="torch",
        cuda_version=str(cuda) if cuda else None,
        cudnn_version=_cudnn_from_dists() if cuda else None,
        cpu_only_build=cpu_only,
        arch_list=() if cpu_only else None,
        gpu_available=False if cpu_only else None,
        reason="CPU-only build (torch.version.cuda is None)" if cpu_only else None,
        extra={"hip": str(hip)} if hip else {},
    )


def _cudnn_text(v: int | None) -> str | None:
    """90100 -> "9.1.0"; 8902 -> "8.9.2" (cuDNN 8 encodes major*1000 + minor*100 + patch)."""
    if not v:
        return None
    if v >= 10000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def runtime_probe() -> FrameworkInfo:
    """Import torch and ask it what it sees. Run it in a child process."""
    version = dist_version("torch")
    try:
        import torch
    except Exception as exc:  # a broken install: report it, don't crash
        return import_failed(
            FrameworkInfo(name="torch", installed=version is not None, version=version), exc
        )
    cuda = torch.version.cuda
    hip = getattr(torch.version, "hip", None)
    cpu_only = cuda is None and hip is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arch = tuple(torch.cuda.get_arch_list()) if not cpu_only else ()
        available = bool(torch.cuda.is_available())
    reason = None
    devices: list[FrameworkDevice] = []
    if cpu_only:
        reason = "CPU-only build (torch.version.cuda is None)"
    elif not available:
        try:
            torch.cuda.init()
            reason = "torch.cuda.is_available() is False"
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
    else:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            uuid = getattr(p, "uuid", None)
            devices.append(
                FrameworkDevice(
                    index=i,
                    name=p.name,
                    compute_capability=f"{p.major}.{p.minor}",
                    uuid=f"GPU-{uuid}" if uuid is not None else None,
                    memory_total=int(p.total_memory),
                )
            )
    cudnn = None
    try:
        if not cpu_only and torch.backends.cudnn.is_available():
            cudnn = _cudnn_text(torch.backends.cudnn.version())
    except Exception:
        cudnn = None
    return FrameworkInfo(
        name="torch",
        installed=True,
        version=torch.__version__,
        probe="runtime",
        importable=True,
        distribution="torch",
        cuda_version=cuda,
        cudnn_version=cudnn,
        cpu_only_build=cpu_only,
        arch_list=arch,
        gpu_available=available,
        devices=tuple(devices),
        reason=reason,
        warnings=tuple(str(w.message).strip() for w in caught),
        extra={"hip": str(hip)} if hip else {},
    )


def profiler_modules() -> tuple[Any, Any]:
    """(torch, torch.profiler) for :func:`gpuprobe.profile`, or a UsageError saying how to get
    them."""
    from gpuprobe.core.errors import UsageError

    try:
        import torch
        import torch.profiler
    except ImportError as exc:
        from gpuprobe.platform.install import torch_install

        raise UsageError(
            f"gpuprobe.profile needs PyTorch ({exc}); install it: {torch_install()}"
        ) from None
    return torch, torch.profiler


class TorchBackend(Backend):
    """torch tensors on ``cpu`` or ``cuda:N``; GPU durations from ``torch.cuda.Event``."""

    framework = "torch"

    def __init__(self, device: str = "cpu") -> None:
        import torch

        self._torch = torch
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            # "cuda" is the current device; torch.cuda.set_device and the memory calls of torch
            # 2.11 want its index (the H200 run: "Expected a torch.device with a specified index")
            dev = torch.device("cuda", torch.cuda.current_device())
        self._dev = dev
        self.device = str(dev) if dev.type == "cuda" else device
        self._int8_rhs: tuple[Any, int, Any] | None = None  # (operand, version, column-major)
        if self.is_gpu:
            torch.cuda.set_device(self._dev)

    @property
    def xp(self) -> Any:
        return self._torch

    def asarray(self, a: Any) -> Any:
        return self._torch.from_numpy(a).to(self._dev)

    def to_numpy(self, x: Any) -> Any:
        if isinstance(x, self._torch.Tensor):
            return x.detach().cpu().numpy()
        return x

    def synchronize(self) -> None:
        if self.is_gpu:
            self._torch.cuda.synchronize(self._dev)

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        if not self.is_gpu:
            return host_times(fn, n, setup)
        cuda = self._torch.cuda
        return event_times(
            self,
            fn,
            n,
            setup,
            lambda: cuda.Event(enable_timing=True),
            lambda s, e: s.elapsed_time(e) / 1000.0,
        )

    def hold(self, seconds: float) -> None:
        if self.is_gpu:
            self._torch.cuda._sleep(int(seconds * SPIN_CLOCK_HZ))

    def uuid(self) -> str | None:
        if not self.is_gpu:
            return None
        u = getattr(self._torch.cuda.get_device_properties(self._dev), "uuid", None)
        return f"GPU-{u}" if u is not None else None

    def pinned(self, nbytes: int) -> Any:
        """A page-locked host buffer of ``nbytes`` bytes."""
        return self._torch.empty(nbytes, dtype=self._torch.uint8, pin_memory=True)

    def device_buffer(self, nbytes: int) -> Any:
        """An uninitialised device buffer of ``nbytes`` bytes."""
        return self._torch.empty(nbytes, dtype=self._torch.uint8, device=self._dev)

    def copy_h2d(self, dst: Any, src: Any) -> None:
        """Queue a host-to-device copy of ``src`` into ``dst`` (asynchronous from pinned memory)."""
        dst.copy_(src, non_blocking=True)

    def release(self) -> None:
        if self.is_gpu:
            self._torch.cuda.empty_cache()

    def _dtype(self, name: str) -> Any:
        t = self._torch
        return {
            "float64": t.float64,
            "float32": t.float32,
            "tfloat32": t.float32,
            "bfloat16": t.bfloat16,
            "float16": t.float16,
            "int8": t.int8,
        }[name]

    def random(self, shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> Any:
        g = self._torch.Generator(device=self._dev).manual_seed(seed)
        return self._torch.rand(shape, dtype=self._dtype(dtype), device=self._dev, generator=g)

    def randn(self, shape: tuple[int, ...], seed: int = 0) -> Any:
        g = self._torch.Generator(device=self._dev).manual_seed(seed)
        return self._torch.randn(shape, device=self._dev, generator=g)

    def cast(self, x: Any, dtype: str) -> Any:
        return x.to(self._dtype(dtype))

    def matmul_dtypes(self) -> tuple[str, ...]:
        out = ["float64", "float32"]
        ampere = self.is_gpu and self._torch.cuda.get_device_capability(self._dev) >= (8, 0)
        if ampere:
            out.append("tfloat32")
        if not self.is_gpu or ampere:
            out.append("bfloat16")
        out.append("float16")
        if hasattr(self._torch, "_int_mm") and (not self.is_gpu or ampere):
            out.append("int8")
        return tuple(out)

    @contextlib.contextmanager
    def matmul_precision(self, dtype: str) -> Iterator[None]:
        t = self._torch
        before = t.get_float32_matmul_precision()
        t.set_float32_matmul_precision("high" if dtype == "tfloat32" else "highest")
        try:
            yield
        finally:
            t.set_float32_matmul_precision(before)

    def int8_matmul(self, a: Any, b: Any) -> Any:
        m, k = a.shape
        n = b.shape[1]
        if self.is_gpu and (m < INT_MM_MIN_M or k % INT_MM_MULTIPLE or n % INT_MM_MULTIPLE):
            raise NotImplementedError(
                f"torch._int_mm on CUDA needs m > 16 and k, n multiples of 8 (got {m}x{k}x{n})"
            )
        if self.is_gpu:
            b = self._column_major(b)
        return self._torch._int_mm(a, b)

    def _column_major(self, b: Any) -> Any:
        """``b`` laid out column-major, made once per operand: int8 tensor cores multiply row- by
        column-major, and torch._int_mm falls back to a far slower kernel for a row-major right
        operand (pytorch/pytorch#165230; the H200 ran bench's row-major int8 at 7 % of peak)."""
        if b.stride(0) == 1:
            return b
        kept = self._int8_rhs
        if kept is None or kept[0] is not b or kept[1] != b._version:
            kept = (b, b._version, b.t().contiguous().t())
            self._int8_rhs = kept
        return kept[2]

    def free_memory(self) -> int | None:
        if not self.is_gpu:
            return super().free_memory()
        cuda = self._torch.cuda
        free, _total = cuda.mem_get_info(self._dev)
        return int(free + cuda.memory_reserved(self._dev) - cuda.memory_allocated(self._dev))

    def is_out_of_memory(self, exc: BaseException) -> bool:
        oom = getattr(self._torch.cuda, "OutOfMemoryError", ())
        return (bool(oom) and isinstance(exc, oom)) or super().is_out_of_memory(exc)

    def copier(self, kind: str, nbytes: int) -> Callable[[], Any] | None:
        t = self._torch
        u8 = t.uint8
        if not self.is_gpu:
            if kind != "host":
                return None
            src, dst = t.ones(nbytes, dtype=u8), t.empty(nbytes, dtype=u8)
            return lambda: dst.copy_(src)
        pinned = kind.endswith("-pinned")
        if kind.startswith("h2d"):
            src = t.ones(nbytes, dtype=u8, pin_memory=pinned)
            dst = t.empty(nbytes, dtype=u8, device=self._dev)
        elif kind.startswith("d2h"):
            src = t.ones(nbytes, dtype=u8, device=self._dev)
            dst = t.empty(nbytes, dtype=u8, pin_memory=pinned)
        elif kind == "d2d":
            src = t.ones(nbytes, dtype=u8, device=self._dev)
            dst = t.empty(nbytes, dtype=u8, device=self._dev)
        else:
            return None
        return lambda: dst.copy_(src, non_blocking=pinned)

    def tiny_op(self) -> Callable[[], Any]:
        x = self._torch.ones(1, device=self._dev)
        return lambda: x.add_(1)

    def graph(self, fn: Callable[[], Any], k: int) -> Callable[[], Any] | None:
        if not self.is_gpu:
            return None
        cuda = self._torch.cuda
        side = cuda.Stream(self._dev)
        side.wait_stream(cuda.current_stream(self._dev))
        with cuda.stream(side):
            for _ in range(3):  # warm up on a side stream, as the CUDA-graphs docs ask
                fn()
        cuda.current_stream(self._dev).wait_stream(side)
        g = cuda.CUDAGraph()
        with cuda.graph(g):
            for _ in range(k):
                fn()
        return g.replay

    def streams(self, n: int) -> list[Any] | None:
        if not self.is_gpu:
            return None
        return [self._torch.cuda.Stream(self._dev) for _ in range(n)]

    @contextlib.contextmanager
    def on_stream(self, stream: Any) -> Iterator[None]:
        with self._torch.cuda.stream(stream):
            yield

    def cache_flusher(self) -> Callable[[], Any] | None:
        if not self.is_gpu:
            return None
        props = self._torch.cuda.get_device_properties(self._dev)
        nbytes = max(L2_FLUSH_BYTES, 2 * int(getattr(props, "L2_cache_size", 0)))
        buf = self._torch.empty(nbytes, dtype=self._torch.uint8, device=self._dev)
        return buf.zero_

    def environment(self) -> dict[str, str | int | float | None]:
        t = self._torch
        env: dict[str, str | int | float | None] = {
            "framework": "torch",
            "version": t.__version__,
            "device": self.device,
            "threads": int(t.get_num_threads()),
        }
        if self.is_gpu:
            props = t.cuda.get_device_properties(self._dev)
            env.update(cuda=t.version.cuda, name=props.name, uuid=self.uuid())
        else:
            m = re.search(r"BLAS_INFO=(\w+)", t.__config__.show())
            env["blas"] = m.group(1) if m else None
        return env

    def memory(self) -> dict[str, int] | None:
        if not self.is_gpu:
            return None
        cuda = self._torch.cuda
        return {
            "allocated": int(cuda.memory_allocated(self._dev)),
            "reserved": int(cuda.memory_reserved(self._dev)),
        }


# -- torch for the theme modules and gpuprobe.tools.memory ---------------------------------------------
# ``loaded()`` never imports torch on its own behalf: it returns the module only when the user's
# process has imported it already; ``require()`` imports it for a feature that needs it.


def loaded() -> Any | None:
    """torch, if this process has imported it already (never imports it)."""
    return sys.modules.get("torch")


def require(feature: str) -> Any:
    """Import torch for ``feature`` or raise a UsageError saying how to install it."""
    from gpuprobe.core.errors import UsageError

    try:
        import torch
    except ImportError as exc:
        from gpuprobe.platform.install import torch_install

        raise UsageError(
            f"{feature} needs PyTorch ({exc}); install it: {torch_install()}"
        ) from None
    return torch


def check_device(device: str) -> str:
    """``device`` when torch can run on it here; else a :class:`UsageError` in one line: a name
    that is not cpu, cuda or cuda:N, or a CUDA device on a CPU-only build, a machine with no GPU
    or no GPU N, saying why and what to install (:mod:`~gpuprobe.platform.frameworks.devices`)."""
    from gpuprobe.core.errors import UsageError
    from gpuprobe.platform.frameworks.devices import CudaHere, cuda_refusal, parse

    kind, index = parse(device)
    if kind != "cuda":
        return device
    torch = require(f"device {device!r}")
    sees = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if sees and (index is None or index < sees):
        return device
    # refused: read the machine (its driver and cards) for the why and the install command
    from gpuprobe.platform.hardware.nvml import read_driver
    from gpuprobe.platform.hardware.pci import nvidia_devices

    driver, gpus = read_driver()
    here = CudaHere(
        gpus=len(gpus) or len(nvidia_devices()),
        driver_cuda=driver.cuda_driver_version,
        ccs=tuple(cc for g in gpus if (cc := g.cc) is not None),
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
        torch_sees=sees,
    )
    raise UsageError(cuda_refusal(device, here) or f"{device}: torch cannot use it here")


def preload_modules() -> list[str]:
    """Modules a fork server should import once so that each forked trial starts fast: torch
    when it is installed (importing it does not initialise CUDA)."""
    return ["torch"] if dist_version("torch") is not None else []
