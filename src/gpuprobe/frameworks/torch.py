"""PyTorch's door: the only module that imports ``torch``.

``static_probe()`` reads the installed build from package files (``torch/version.py`` parsed, never
executed) so that ``gpuprobe info`` stays fast; ``runtime_probe()`` imports torch and asks CUDA,
and is run in a child process so that the user's process never initialises CUDA through gpuprobe.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

from gpuprobe.frameworks.base import (
    Backend,
    FrameworkDevice,
    FrameworkInfo,
    dist_version,
    first_installed,
    host_times,
    import_failed,
    module_dir,
    read_constants,
)

__all__ = [
    "TORCH_CUDA_VARIANTS",
    "TorchBackend",
    "install_command",
    "profiler_modules",
    "runtime_probe",
    "static_probe",
]

# CUDA builds published for each PyTorch release, from pytorch.org/get-started/previous-versions
# (and the release notes for 2.9-2.11). A newer release than the table is assumed to offer the
# newest row's builds.
TORCH_CUDA_VARIANTS: dict[str, tuple[str, ...]] = {
    "2.0": ("11.7", "11.8"),
    "2.1": ("11.8", "12.1"),
    "2.2": ("11.8", "12.1"),
    "2.3": ("11.8", "12.1"),
    "2.4": ("11.8", "12.1", "12.4"),
    "2.5": ("11.8", "12.1", "12.4"),
    "2.6": ("11.8", "12.4", "12.6"),
    "2.7": ("11.8", "12.6", "12.8"),
    "2.8": ("12.6", "12.8", "12.9"),
    "2.9": ("12.6", "12.8", "13.0"),
    "2.10": ("12.6", "12.8", "13.0"),
    "2.11": ("12.6", "12.8", "13.0"),
}
TORCH_WHEEL_INDEX = "https://download.pytorch.org/whl"


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


def install_command(
    torch_version: str | None, driver_cuda: str | None, requirement: str | None = None
) -> str:
    """The pip command for a CUDA build of ``torch_version`` that runs on a driver supporting CUDA
    ``driver_cuda`` (the newest build whose CUDA is not newer than the driver's). ``requirement``
    replaces the default ``torch==<version>`` pin (e.g. ``torch>=2.7``)."""
    base = (torch_version or "").split("+")[0]
    mm = ".".join(base.split(".")[:2])
    variants = TORCH_CUDA_VARIANTS.get(mm)
    if variants is None:
        known = sorted(TORCH_CUDA_VARIANTS, key=_vtuple)
        variants = TORCH_CUDA_VARIANTS[known[-1]]
    choice = variants[-1]
    if driver_cuda:
        fitting = [v for v in variants if _vtuple(v) <= _vtuple(driver_cuda)]
        choice = fitting[-1] if fitting else variants[0]
    tag = "cu" + choice.replace(".", "")
    pin = requirement or (f"torch=={base}" if base else "torch")
    return f"pip install --force-reinstall '{pin}' --index-url {TORCH_WHEEL_INDEX}/{tag}"


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
    from gpuprobe.errors import UsageError

    try:
        import torch
        import torch.profiler
    except ImportError as exc:
        raise UsageError(
            f"gpuprobe.profile needs PyTorch ({exc}); install it: pip install torch"
        ) from None
    return torch, torch.profiler


class TorchBackend(Backend):
    """torch tensors on ``cpu`` or ``cuda:N``; GPU durations from ``torch.cuda.Event``."""

    framework = "torch"

    def __init__(self, device: str = "cpu") -> None:
        import torch

        self._torch = torch
        self.device = device
        self._dev = torch.device(device)
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
        pairs = []
        for _ in range(n):
            if setup is not None:
                setup()
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        self.synchronize()
        return [s.elapsed_time(e) / 1000.0 for s, e in pairs]

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

    def memory(self) -> dict[str, int] | None:
        if not self.is_gpu:
            return None
        cuda = self._torch.cuda
        return {
            "allocated": int(cuda.memory_allocated(self._dev)),
            "reserved": int(cuda.memory_reserved(self._dev)),
        }
