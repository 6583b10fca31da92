"""CuPy's door: the only module that imports ``cupy``. CuPy compiles its kernels at run time
(NVRTC), so it has no compiled architecture list: any card its CUDA runtime knows works."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.platform.frameworks.base import (
    Backend,
    FrameworkDevice,
    FrameworkInfo,
    event_times,
    first_installed,
    import_failed,
)

__all__ = [
    "CUPY_DISTS",
    "CupyBackend",
    "pool_memory",
    "release_pool",
    "runtime_probe",
    "static_probe",
]

# The hold of event_times: one thread spinning on the SM clock for the given cycles, counted at
# the fastest SM clock of current cards (SPIN_CLOCK_HZ, as for torch.cuda._sleep).
SPIN_KERNEL = r"""
extern "C" __global__ void gpuprobe_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""
SPIN_CLOCK_HZ = 3.0e9

# Wheel names CuPy publishes per CUDA major (docs.cupy.dev install guide), and the source build.
CUPY_DISTS: dict[str, str | None] = {
    "cupy-cuda13x": "13.x",
    "cupy-cuda12x": "12.x",
    "cupy-cuda11x": "11.x",
    "cupy": None,
}


def _rt(code: int | None) -> str | None:
    return f"{code // 1000}.{(code % 1000) // 10}" if code else None


def static_probe() -> FrameworkInfo:
    """The installed CuPy wheel from package metadata, without importing it."""
    found = first_installed(CUPY_DISTS)
    if found is None:
        return FrameworkInfo(name="cupy", installed=False)
    dist, version = found
    return FrameworkInfo(
        name="cupy",
        installed=True,
        version=version,
        distribution=dist,
        cuda_version=CUPY_DISTS[dist],
        cpu_only_build=False,
    )


def runtime_probe() -> FrameworkInfo:
    """Import CuPy and list the devices its runtime sees. Run it in a child process."""
    static = static_probe()
    try:
        import cupy
    except Exception as exc:
        return import_failed(static, exc)
    rt = cupy.cuda.runtime
    cuda = reason = None
    devices = []
    try:
        cuda = _rt(rt.runtimeGetVersion())
        for i in range(rt.getDeviceCount()):
            p = rt.getDeviceProperties(i)
            raw_uuid = p.get("uuid")
            uuid = None
            if isinstance(raw_uuid, (bytes, bytearray)) and len(raw_uuid) == 16:
                h = bytes(raw_uuid).hex()
                uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            name = p.get("name")
            devices.append(
                FrameworkDevice(
                    index=i,
                    name=name.decode() if isinstance(name, bytes) else name,
                    compute_capability=f"{p['major']}.{p['minor']}",
                    uuid=uuid,
                    memory_total=int(p["totalGlobalMem"]),
                )
            )
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    return FrameworkInfo(
        name="cupy",
        installed=True,
        version=cupy.__version__,
        distribution=static.distribution,
        probe="runtime",
        importable=True,
        cuda_version=cuda or static.cuda_version,
        cpu_only_build=False,
        arch_list=None,
        gpu_available=bool(devices),
        devices=tuple(devices),
        reason=reason if not devices else None,
        extra={"kernels": "compiled at run time by NVRTC"},
    )


# Bytes zeroed between repetitions to evict the L2 cache (triton.testing.do_bench's 256 MB).
L2_FLUSH_BYTES = 256 * 2**20


class CupyBackend(Backend):
    """CuPy arrays on ``cuda:N``; durations from CUDA events."""

    framework = "cupy"

    def __init__(self, device: str = "cuda:0") -> None:
        import cupy

        self._cp = cupy
        self.device = device
        self._spin: Any = None  # the hold's kernel, compiled (NVRTC) at its first use
        cupy.cuda.Device(int(device.partition(":")[2] or 0)).use()

    @property
    def xp(self) -> Any:
        return self._cp

    def asarray(self, a: Any) -> Any:
        return self._cp.asarray(a)

    def to_numpy(self, x: Any) -> Any:
        return self._cp.asnumpy(x)

    def synchronize(self) -> None:
        self._cp.cuda.Device().synchronize()

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        cuda = self._cp.cuda
        return event_times(
            self, fn, n, setup, cuda.Event, lambda s, e: cuda.get_elapsed_time(s, e) / 1000.0
        )

    def hold(self, seconds: float) -> None:
        if self._spin is None:
            self._spin = self._cp.RawKernel(SPIN_KERNEL, "gpuprobe_spin")
        cycles = self._cp.int64(int(seconds * SPIN_CLOCK_HZ))
        self._spin((1,), (1,), (cycles,))

    def release(self) -> None:
        self._cp.get_default_memory_pool().free_all_blocks()
        self._cp.get_default_pinned_memory_pool().free_all_blocks()

    def uuid(self) -> str | None:
        index = self._cp.cuda.Device().id
        devices = runtime_probe().devices
        return devices[index].uuid if index < len(devices) else None

    def pinned(self, nbytes: int) -> Any:
        """A page-locked host buffer of ``nbytes`` bytes."""
        import cupyx

        return cupyx.empty_pinned((nbytes,), dtype="uint8")

    def device_buffer(self, nbytes: int) -> Any:
        """An uninitialised device buffer of ``nbytes`` bytes."""
        return self._cp.empty((nbytes,), dtype="uint8")

    def copy_h2d(self, dst: Any, src: Any) -> None:
        """Queue a host-to-device copy of ``src`` into ``dst``."""
        dst.set(src, stream=self._cp.cuda.get_current_stream())

    def memory(self) -> dict[str, int] | None:
        pool = self._cp.get_default_memory_pool()
        return {"allocated": int(pool.used_bytes()), "reserved": int(pool.total_bytes())}

    def random(self, shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> Any:
        return self._cp.random.default_rng(seed).random(shape, dtype=dtype)

    def randn(self, shape: tuple[int, ...], seed: int = 0) -> Any:
        return self._cp.random.default_rng(seed).standard_normal(shape, dtype="float32")

    def matmul_dtypes(self) -> tuple[str, ...]:
        # no bfloat16 dtype in CuPy; TF32 is chosen at import (CUPY_TF32), not per call
        return ("float64", "float32", "float16")

    def free_memory(self) -> int | None:
        free, _total = self._cp.cuda.runtime.memGetInfo()
        return int(free + self._cp.get_default_memory_pool().free_bytes())

    def copier(self, kind: str, nbytes: int) -> Callable[[], Any] | None:
        import cupyx
        import numpy as np

        cp = self._cp
        stream = cp.cuda.get_current_stream()
        if kind.startswith("h2d"):
            dst = cp.empty((nbytes,), dtype="uint8")
            if kind.endswith("pinned"):
                src = cupyx.empty_pinned((nbytes,), dtype="uint8")
                src[...] = 1
                return lambda: dst.set(src, stream=stream)
            host = np.ones(nbytes, dtype=np.uint8)
            return lambda: dst.set(host)
        if kind.startswith("d2h"):
            dev = cp.ones((nbytes,), dtype="uint8")
            if kind.endswith("pinned"):
                out = cupyx.empty_pinned((nbytes,), dtype="uint8")
                return lambda: dev.get(stream=stream, out=out)
            page = np.empty(nbytes, dtype=np.uint8)
            return lambda: dev.get(out=page)
        if kind == "d2d":
            a, b = cp.ones((nbytes,), dtype="uint8"), cp.empty((nbytes,), dtype="uint8")
            return lambda: cp.copyto(b, a)
        return None

    def tiny_op(self) -> Callable[[], Any]:
        x = self._cp.ones(1, dtype="float32")
        return lambda: self._cp.add(x, 1, out=x)

    def graph(self, fn: Callable[[], Any], k: int) -> Callable[[], Any] | None:
        stream = self._cp.cuda.Stream(non_blocking=True)
        with stream:
            fn()
            stream.synchronize()
            stream.begin_capture()
            for _ in range(k):
                fn()
            g = stream.end_capture()
        return lambda: g.launch()

    def streams(self, n: int) -> list[Any] | None:
        return [self._cp.cuda.Stream(non_blocking=True) for _ in range(n)]

    @contextlib.contextmanager
    def on_stream(self, stream: Any) -> Iterator[None]:
        with stream:
            yield

    def cache_flusher(self) -> Callable[[], Any] | None:
        buf = self._cp.empty((L2_FLUSH_BYTES,), dtype="uint8")
        return lambda: buf.fill(0)

    def environment(self) -> dict[str, str | int | float | None]:
        rt = self._cp.cuda.runtime
        return {
            "framework": "cupy",
            "version": self._cp.__version__,
            "device": self.device,
            "cuda": _rt(rt.runtimeGetVersion()),
            "uuid": self.uuid(),
        }


def pool_memory() -> dict[str, int] | None:
    """CuPy's default memory pool, in bytes (None unless this process has imported CuPy):
    ``allocated`` (in use by arrays) and ``reserved`` (held by the pool)."""
    import sys

    cp = sys.modules.get("cupy")
    if cp is None:
        return None
    try:
        pool = cp.get_default_memory_pool()
        return {"allocated": int(pool.used_bytes()), "reserved": int(pool.total_bytes())}
    except Exception:  # no device, broken runtime: nothing to report
        return None


def release_pool() -> None:
    """Give CuPy's cached blocks back (only when CuPy is imported already)."""
    import sys

    cp = sys.modules.get("cupy")
    if cp is None:
        return
    try:
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    except Exception:
        return
