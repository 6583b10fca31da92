"""JAX's door: the only module that imports ``jax``. JAX preallocates 75 % of a GPU's memory on
first use, so gpuprobe imports it only in child processes and turns preallocation off there."""

from __future__ import annotations

import contextlib
import os
import time as _time
from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.platform.frameworks.base import (
    Backend,
    FrameworkDevice,
    FrameworkInfo,
    dist_version,
    first_installed,
    import_failed,
)

__all__ = ["JaxBackend", "runtime_probe", "static_probe"]

_PLUGINS = ("jax-cuda13-plugin", "jax-cuda12-plugin", "jax-cuda11-plugin")


def static_probe() -> FrameworkInfo:
    """The installed jax, jaxlib and CUDA plugin from package metadata."""
    version = dist_version("jax")
    if version is None:
        return FrameworkInfo(name="jax", installed=False)
    plugin = first_installed(_PLUGINS)
    cuda = plugin[0].split("-")[1].removeprefix("cuda") + ".x" if plugin else None
    extra = {"jaxlib": dist_version("jaxlib") or "n/a"}
    if plugin:
        extra["plugin"] = f"{plugin[0]} {plugin[1]}"
    return FrameworkInfo(
        name="jax",
        installed=True,
        version=version,
        distribution="jax",
        cuda_version=cuda,
        cpu_only_build=plugin is None,
        gpu_available=False if plugin is None else None,
        reason="no CUDA plugin installed (CPU-only jaxlib)" if plugin is None else None,
        extra=extra,
    )


def runtime_probe() -> FrameworkInfo:
    """Import JAX (preallocation off) and list its GPU devices. Run it in a child process."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    static = static_probe()
    try:
        import jax
    except Exception as exc:
        return import_failed(static, exc)
    devices = []
    reason = None
    try:
        for i, d in enumerate(jax.devices("gpu")):
            cc = getattr(d, "compute_capability", None)
            devices.append(FrameworkDevice(index=i, name=d.device_kind, compute_capability=cc))
    except Exception as exc:  # RuntimeError: Unknown backend 'gpu' / no devices
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return FrameworkInfo(
        name="jax",
        installed=True,
        version=jax.__version__,
        distribution="jax",
        probe="runtime",
        importable=True,
        cuda_version=static.cuda_version,
        cpu_only_build=static.cpu_only_build,
        gpu_available=bool(devices),
        devices=tuple(devices),
        reason=reason if not devices else None,
        extra=dict(static.extra, default_backend=jax.default_backend()),
    )


class JaxBackend(Backend):
    """jax.numpy arrays on one device, operations jitted; durations from the host clock around
    ``block_until_ready`` (JAX exposes no device events)."""

    framework = "jax"

    def __init__(self, device: str = "cpu") -> None:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        self._jax = jax
        self.device = device
        kind, _, idx = device.partition(":")
        self._dev = jax.devices("gpu" if kind == "cuda" else "cpu")[int(idx or 0)]
        self._e1 = jax.jit(lambda x: jax.numpy.sum(jax.numpy.sin(x) ** 2 / jax.numpy.cos(x) ** 2))
        self._mm = jax.jit(lambda a, b: a @ b)

    @property
    def xp(self) -> Any:
        return self._jax.numpy

    def asarray(self, a: Any) -> Any:
        return self._jax.device_put(a, self._dev)

    def to_numpy(self, x: Any) -> Any:
        import numpy

        return numpy.asarray(x)

    def synchronize(self) -> None:
        (self._jax.device_put(0.0, self._dev) + 0).block_until_ready()

    def e1(self, x: Any) -> Any:
        return self._e1(x)

    def matmul(self, a: Any, b: Any) -> Any:
        return self._mm(a, b)

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        out = []
        for _ in range(n):
            if setup is not None:
                setup()
                self.synchronize()
            t0 = _time.perf_counter()
            r = fn()
            if hasattr(r, "block_until_ready"):
                r.block_until_ready()
            else:
                self.synchronize()
            out.append(_time.perf_counter() - t0)
        return out

    def matmul_dtypes(self) -> tuple[str, ...]:
        out = ["float32", "bfloat16", "float16", "int8"]
        if self._jax.config.jax_enable_x64:
            out.insert(0, "float64")
        if self.is_gpu:
            out.insert(-3, "tfloat32")
        return tuple(out)

    @contextlib.contextmanager
    def matmul_precision(self, dtype: str) -> Iterator[None]:
        with self._jax.default_matmul_precision(
            "tensorfloat32" if dtype == "tfloat32" else "highest"
        ):
            yield

    def int8_matmul(self, a: Any, b: Any) -> Any:
        if not hasattr(self, "_imm"):
            jnp = self._jax.numpy
            self._imm = self._jax.jit(
                lambda x, y: self._jax.lax.dot(x, y, preferred_element_type=jnp.int32)
            )
        return self._imm(a, b)

    def copier(self, kind: str, nbytes: int) -> Callable[[], Any] | None:
        if kind != "h2d-pageable" or not self.is_gpu:
            return None  # JAX caches a device array's host copy: d2h would be timed once
        import numpy as np

        host = np.ones(nbytes, dtype=np.uint8)
        return lambda: self._jax.device_put(host, self._dev)

    def environment(self) -> dict[str, str | int | float | None]:
        return {
            "framework": "jax",
            "version": self._jax.__version__,
            "device": self.device,
            "name": getattr(self._dev, "device_kind", None),
        }
