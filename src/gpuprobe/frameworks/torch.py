"""PyTorch's door: the only module that imports ``torch``.

``static_probe()`` reads the installed build from package files (``torch/version.py`` parsed, never
executed) so that ``gpuprobe info`` stays fast; ``runtime_probe()`` imports torch and asks CUDA,
and is run in a child process so that the user's process never initialises CUDA through gpuprobe.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
    "TORCH_BUILDS",
    "TORCH_CUDA_VARIANTS",
    "BuildChoice",
    "TorchBackend",
    "TorchBuild",
    "allocator_env",
    "autocast",
    "bf16_supported",
    "cap_cuda_memory",
    "choose_build",
    "cuda_initialized",
    "cuda_memory",
    "install_command",
    "live_tensors",
    "loaded",
    "mha_fastpath",
    "module_device",
    "peak_memory",
    "preload_modules",
    "profiler_modules",
    "quantize_dynamic_int8",
    "release_memory",
    "require",
    "reset_peak_memory",
    "runtime_probe",
    "static_probe",
    "tf32_matmul",
    "tf32_supported",
    "warm_up",
]

# The CUDA builds of each PyTorch release (Linux x86_64 wheels on download.pytorch.org) and the
# architectures each build's kernels are compiled for (torch.cuda.get_arch_list() of that wheel).
# Sources: pytorch.org/get-started/previous-versions (builds per release); the release notes of
# 2.7 (cu128 adds sm_100/sm_120), 2.8 (cu128/cu129 drop Maxwell sm_50 and Pascal sm_60), 2.9
# (cu130: sm_75 and newer only: CUDA 13 dropped Maxwell, Pascal and Volta), 2.11 (cu128 drops
# Volta sm_70), 2.12 (builds cu126, cu130, cu132; no cu128); .ci/manywheel/build_cuda.sh
# (TORCH_CUDA_ARCH_LIST per CUDA version). 2.0 cu117 has no sm_90. A release newer than the table
# is assumed to ship the newest row's builds.
_ARCH_KEPLER_TO_HOPPER = ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86")
_ARCH_MAXWELL_TO_HOPPER = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
_ARCH_MAXWELL_TO_BLACKWELL = (*_ARCH_MAXWELL_TO_HOPPER, "sm_100", "sm_120", "compute_120")
_ARCH_VOLTA_TO_BLACKWELL = (
    "sm_70",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_90",
    "sm_100",
    "sm_120",
    "compute_120",
)
_ARCH_TURING_TO_BLACKWELL = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")
TORCH_BUILDS: dict[str, dict[str, tuple[str, ...]]] = {
    "2.0": {"11.7": _ARCH_KEPLER_TO_HOPPER, "11.8": (*_ARCH_KEPLER_TO_HOPPER, "sm_90")},
    "2.1": {"11.8": _ARCH_MAXWELL_TO_HOPPER, "12.1": _ARCH_MAXWELL_TO_HOPPER},
    "2.2": {"11.8": _ARCH_MAXWELL_TO_HOPPER, "12.1": _ARCH_MAXWELL_TO_HOPPER},
    "2.3": {"11.8": _ARCH_MAXWELL_TO_HOPPER, "12.1": _ARCH_MAXWELL_TO_HOPPER},
    "2.4": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.1": _ARCH_MAXWELL_TO_HOPPER,
        "12.4": _ARCH_MAXWELL_TO_HOPPER,
    },
    "2.5": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.1": _ARCH_MAXWELL_TO_HOPPER,
        "12.4": _ARCH_MAXWELL_TO_HOPPER,
    },
    "2.6": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.4": _ARCH_MAXWELL_TO_HOPPER,
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
    },
    "2.7": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_MAXWELL_TO_BLACKWELL,
    },
    "2.8": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_VOLTA_TO_BLACKWELL,
        "12.9": _ARCH_VOLTA_TO_BLACKWELL,
    },
    "2.9": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_VOLTA_TO_BLACKWELL,
        "13.0": _ARCH_TURING_TO_BLACKWELL,
    },
    "2.10": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_VOLTA_TO_BLACKWELL,
        "13.0": _ARCH_TURING_TO_BLACKWELL,
    },
    "2.11": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_TURING_TO_BLACKWELL,
        "13.0": _ARCH_TURING_TO_BLACKWELL,
    },
    **{
        v: {
            "12.6": _ARCH_MAXWELL_TO_HOPPER,
            "13.0": _ARCH_TURING_TO_BLACKWELL,
            "13.2": _ARCH_TURING_TO_BLACKWELL,
        }
        for v in ("2.12", "2.13", "2.14")
    },
}
# The CUDA versions of each release's builds, oldest first.
TORCH_CUDA_VARIANTS: dict[str, tuple[str, ...]] = {
    v: tuple(sorted(builds, key=lambda c: tuple(int(x) for x in c.split("."))))
    for v, builds in TORCH_BUILDS.items()
}
TORCH_WHEEL_INDEX = "https://download.pytorch.org/whl"
# torch._int_mm on CUDA needs m > 16 and k, n multiples of 8 (aten Blas.cpp _int_mm_out_cuda;
# keras-team/keras#19207).
INT_MM_MIN_M = 17
INT_MM_MULTIPLE = 8
# Bytes written between repetitions to evict the L2 cache: at least this, and twice the L2
# (triton.testing.do_bench zeroes a 256 MB buffer before every repetition).
L2_FLUSH_BYTES = 256 * 2**20


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


@dataclass(frozen=True)
class TorchBuild:
    """One published PyTorch wheel build: release, CUDA version, compiled architectures."""

    torch: str  # "2.9"
    cuda: str  # "12.8"
    archs: tuple[str, ...]

    @property
    def tag(self) -> str:
        """The wheel index's name for it: ``cu128``."""
        return "cu" + self.cuda.replace(".", "")


@dataclass(frozen=True)
class BuildChoice:
    """The build to install, or None with the reason none fits."""

    build: TorchBuild | None
    reason: str  # why this build, or why none


def _builds(torch_mm: str) -> list[TorchBuild]:
    row = TORCH_BUILDS.get(torch_mm)
    if row is None:
        row = TORCH_BUILDS[max(TORCH_BUILDS, key=_vtuple)]
    return sorted(
        (TorchBuild(torch_mm, cuda, archs) for cuda, archs in row.items()),
        key=lambda b: _vtuple(b.cuda),
    )


def _cc_text(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def choose_build(
    torch_version: str | None,
    driver_cuda: str | None,
    ccs: Sequence[tuple[int, int]] = (),
) -> BuildChoice:
    """The newest build of ``torch_version`` whose CUDA the driver runs (not newer than
    ``driver_cuda``) and whose kernels cover every compute capability in ``ccs``. When no build
    of that release does, the newest release that has one is chosen, or none with the reason:
    the cards need an older torch, or the driver needs an update."""
    from gpuprobe.hardware.specs import arch_supports

    base = (torch_version or "").split("+")[0]
    mm = ".".join(base.split(".")[:2]) or max(TORCH_BUILDS, key=_vtuple)
    drv = _vtuple(driver_cuda) if driver_cuda else None

    def runs(b: TorchBuild, minor_compat: bool = False) -> bool:
        # minor_compat: a newer minor of the driver's CUDA major runs through CUDA's minor-version
        # compatibility (11.1+), short of PTX JIT; taken only when no build is at or below it
        if drv is None or _vtuple(b.cuda) <= drv:
            return True
        return minor_compat and _vtuple(b.cuda)[0] == drv[0]

    def covers(b: TorchBuild) -> bool:
        return all(arch_supports(b.archs, cc) for cc in ccs)

    own = _builds(mm)
    for compat in (False, True):
        fits = [b for b in own if runs(b, compat) and covers(b)]
        if fits:
            how = " (through CUDA minor-version compatibility)" if compat else ""
            return BuildChoice(
                fits[-1] if not compat else fits[0],
                f"newest {mm} build the driver and the card(s) run{how}",
            )
    # Another release: the newest one with a build that fits both.
    releases = sorted(TORCH_BUILDS, key=_vtuple, reverse=True)
    for other in releases:
        both = [b for b in _builds(other) if runs(b) and covers(b)]
        if both:
            cards = ", ".join(_cc_text(c) for c in ccs)
            why = (
                f"no torch {mm} build has kernels for {cards}"
                if not any(covers(b) for b in own)
                else f"every torch {mm} build for {cards} needs a driver newer than CUDA "
                f"{driver_cuda}"
            )
            return BuildChoice(both[-1], f"{why}; torch {other} has one")
    covering = [b for r in releases for b in _builds(r) if covers(b)]
    if not covering:
        cards = ", ".join(_cc_text(c) for c in ccs)
        return BuildChoice(
            None, f"no PyTorch 2.x build has kernels for {cards}: the card needs an older torch"
        )
    need = min(covering, key=lambda b: _vtuple(b.cuda))
    return BuildChoice(
        None,
        f"every build with kernels for these cards needs CUDA {need.cuda} or newer and the "
        f"driver supports {driver_cuda}: update the NVIDIA driver",
    )


def install_command(
    torch_version: str | None,
    driver_cuda: str | None,
    requirement: str | None = None,
    ccs: Sequence[tuple[int, int]] = (),
) -> str:
    """The pip command for the CUDA build :func:`choose_build` picks: the newest build of
    ``torch_version`` that runs on a driver supporting CUDA ``driver_cuda`` and has kernels for
    every card in ``ccs`` (another release when none of this one does). ``requirement``
    replaces the default ``torch==<version>`` pin (e.g. ``torch>=2.7``). When no build fits, the
    reason, not a command."""
    choice = choose_build(torch_version, driver_cuda, ccs)
    b = choice.build
    if b is None:
        return choice.reason
    base = (torch_version or "").split("+")[0]
    same = base and ".".join(base.split(".")[:2]) == b.torch
    pin = requirement or (f"torch=={base}" if same else f"torch=={b.torch}.*" if base else "torch")
    cmd = f"pip install --force-reinstall '{pin}' --index-url {TORCH_WHEEL_INDEX}/{b.tag}"
    return cmd if same or not base else f"{cmd}   ({choice.reason})"


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
        return self._torch._int_mm(a, b)

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


# -- memory, out-of-memory and precision helpers (gpuprobe.memory) -------------------------------
# These never import torch on their own behalf unless the caller asked for torch: ``loaded()``
# returns the module only when the user's process has imported it already.


def loaded() -> Any | None:
    """torch, if this process has imported it already (never imports it)."""
    import sys

    return sys.modules.get("torch")


def require(feature: str) -> Any:
    """Import torch for ``feature`` or raise a UsageError saying how to install it."""
    from gpuprobe.errors import UsageError

    try:
        import torch
    except ImportError as exc:
        raise UsageError(
            f"{feature} needs PyTorch ({exc}); install it: pip install torch"
        ) from None
    return torch


def preload_modules() -> list[str]:
    """Modules a fork server should import once so that each forked trial starts fast: torch
    when it is installed (importing it does not initialise CUDA)."""
    return ["torch"] if dist_version("torch") is not None else []


def cuda_initialized() -> bool:
    """True when this process has initialised CUDA through torch."""
    torch = loaded()
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def cuda_memory(device: int | None = None) -> dict[str, int] | None:
    """The caching allocator's view of one GPU, in bytes (None unless torch has initialised CUDA
    in this process): ``allocated`` (live tensors), ``reserved`` (held by the cache),
    ``inactive_split`` (free pieces of split blocks: fragmentation), ``peak_allocated``,
    ``alloc_retries`` and ``ooms`` (counts), ``free`` and ``total`` (cudaMemGetInfo)."""
    if not cuda_initialized():
        return None
    torch = loaded()
    assert torch is not None
    dev = torch.cuda.current_device() if device is None else device
    stats = torch.cuda.memory_stats(dev)
    free, total = torch.cuda.mem_get_info(dev)
    return {
        "device": int(dev),
        "allocated": int(stats.get("allocated_bytes.all.current", 0)),
        "reserved": int(stats.get("reserved_bytes.all.current", 0)),
        "inactive_split": int(stats.get("inactive_split_bytes.all.current", 0)),
        "peak_allocated": int(stats.get("allocated_bytes.all.peak", 0)),
        "alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "ooms": int(stats.get("num_ooms", 0)),
        "free": int(free),
        "total": int(total),
    }


def reset_peak_memory(device: str) -> None:
    """Start a new peak for :func:`peak_memory` (CUDA only)."""
    torch = loaded()
    if torch is not None and device.startswith("cuda") and cuda_initialized():
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def peak_memory(device: str) -> int | None:
    """Bytes at the allocator's peak since :func:`reset_peak_memory` (CUDA only)."""
    torch = loaded()
    if torch is None or not device.startswith("cuda") or not cuda_initialized():
        return None
    return int(torch.cuda.max_memory_allocated(torch.device(device)))


def live_tensors(limit: int = 10) -> list[dict[str, Any]]:
    """The largest tensors alive in this process (found through the garbage collector), one per
    storage, largest first: shape, dtype, device, bytes, whether it is a parameter or needs grad.
    Tensors held only by C++ (autograd's saved activations) cannot be seen this way."""
    import gc

    torch = loaded()
    if torch is None:
        return []
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    with warnings.catch_warnings():  # isinstance on torch's deprecated lazy aliases warns
        warnings.simplefilter("ignore")
        objects = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    for obj in objects:
        try:
            if obj.is_meta:
                continue
            storage = obj.untyped_storage()
            key = (str(obj.device), int(storage.data_ptr()))
            nbytes = int(storage.nbytes())
        except Exception:  # sparse, fake or otherwise storage-less tensors
            continue
        if nbytes == 0 or (key in seen and seen[key]["bytes"] >= nbytes):
            continue
        seen[key] = {
            "shape": tuple(int(s) for s in obj.shape),
            "dtype": str(obj.dtype).removeprefix("torch."),
            "device": str(obj.device),
            "bytes": nbytes,
            "parameter": isinstance(obj, torch.nn.Parameter),
            "requires_grad": bool(obj.requires_grad),
        }
    return sorted(seen.values(), key=lambda d: -int(d["bytes"]))[:limit]


def release_memory() -> None:
    """Collect garbage and give the caching allocator's unused blocks back to the driver."""
    import gc

    gc.collect()
    torch = loaded()
    if torch is not None and cuda_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def allocator_env() -> dict[str, str]:
    """The allocator settings in the environment (``PYTORCH_CUDA_ALLOC_CONF``, and
    ``PYTORCH_ALLOC_CONF``, its name from torch 2.9)."""
    import os

    names = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    return {n: os.environ[n] for n in names if n in os.environ}


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


def warm_up() -> None:
    """Run one tiny op so torch's thread pool and allocator exist before a memory cap is set."""
    torch = loaded()
    if torch is not None:
        (torch.ones(64, 64) @ torch.ones(64, 64)).sum().item()


def cap_cuda_memory(limit: int, device: str) -> str:
    """Cap torch's caching allocator on ``device`` at ``limit`` bytes
    (``torch.cuda.set_per_process_memory_fraction``); returns what was capped, in words."""
    torch = require("a CUDA memory cap")
    dev = torch.device(device)
    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), dev)
    return f"torch's CUDA allocator on {device} (set_per_process_memory_fraction)"


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
