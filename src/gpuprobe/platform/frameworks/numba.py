"""Numba's door: the only module that imports ``numba`` (its CUDA target is probed, not used)."""

from __future__ import annotations

from gpuprobe.platform.frameworks.base import (
    FrameworkDevice,
    FrameworkInfo,
    dist_version,
    import_failed,
)

__all__ = ["runtime_probe", "static_probe"]


def static_probe() -> FrameworkInfo:
    """The installed numba from package metadata."""
    version = dist_version("numba")
    if version is None:
        return FrameworkInfo(name="numba", installed=False)
    cuda_dist = dist_version("numba-cuda")
    return FrameworkInfo(
        name="numba",
        installed=True,
        version=version,
        distribution="numba",
        extra={"numba-cuda": cuda_dist} if cuda_dist else {},
    )


def runtime_probe() -> FrameworkInfo:
    """Import numba and ask its CUDA target for devices. Run it in a child process."""
    static = static_probe()
    try:
        import numba
        from numba import cuda
    except Exception as exc:
        return import_failed(static, exc)
    devices = []
    reason = None
    try:
        available = bool(cuda.is_available())
        if available:
            for i, d in enumerate(cuda.gpus):
                cc = d.compute_capability
                name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
                devices.append(
                    FrameworkDevice(index=i, name=name, compute_capability=f"{cc[0]}.{cc[1]}")
                )
        else:
            err = cuda.cuda_error() if hasattr(cuda, "cuda_error") else None
            reason = str(err) if err else "numba.cuda.is_available() is False"
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    cuda_version = None
    try:
        rt = cuda.runtime.get_version()
        cuda_version = f"{rt[0]}.{rt[1]}"
    except Exception:
        pass
    return FrameworkInfo(
        name="numba",
        installed=True,
        version=numba.__version__,
        distribution="numba",
        probe="runtime",
        importable=True,
        cuda_version=cuda_version,
        gpu_available=bool(devices),
        devices=tuple(devices),
        reason=reason,
        extra=static.extra,
    )
