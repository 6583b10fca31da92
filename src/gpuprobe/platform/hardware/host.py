"""The host: CPU model and features, cores, memory, OS, Python, and the BLAS NumPy uses.

Read with psutil, ``/proc/cpuinfo`` (Linux) and threadpoolctl; nothing here needs a GPU.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from pathlib import Path

from gpuprobe.platform.hardware.types import Blas, Host

__all__ = ["SIMD_FLAGS", "read_blas", "read_host", "usable_cores"]

# CPU flags worth showing, in /proc/cpuinfo spelling (Linux kernel arch/x86/include/asm/cpufeatures.h;
# arm64: Documentation/arch/arm64/elf_hwcaps.rst). Order is the order shown.
SIMD_FLAGS: tuple[str, ...] = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
)


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str | None, set[str]]:
    """CPU model name and feature flags from /proc/cpuinfo (x86 'flags', arm64 'Features')."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None, set()
    model = None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if model is None and key in ("model name", "hardware", "cpu model"):
            model = value.strip() or None
        elif not flags and key in ("flags", "features"):
            flags = set(value.split())
    return model, flags


def usable_cores() -> int | None:
    """Cores this process may use: the affinity mask, capped by a cgroup v2 CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 0
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return n or None


def read_blas() -> Blas | None:
    """The BLAS library NumPy links and its thread count, via threadpoolctl."""
    try:
        import numpy  # noqa: F401  (load numpy's BLAS so threadpoolctl can see it)
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    # NumPy's own BLAS first: SciPy or torch may load a second one
    pools.sort(key=lambda p: "numpy" not in str(p.get("filepath", "")))
    if not pools:
        return None
    pool = pools[0]
    return Blas(
        name=pool.get("internal_api"),
        version=pool.get("version"),
        threads=pool.get("num_threads"),
        architecture=pool.get("architecture"),
        path=pool.get("filepath"),
    )


def _os_name() -> str:
    try:
        release = platform.freedesktop_os_release()
        name = release.get("PRETTY_NAME") or release.get("NAME", "")
    except (OSError, AttributeError):
        name = ""
    kernel = f"{platform.system()} {platform.release()}"
    return f"{name} ({kernel})" if name else kernel


def available_memory() -> int | None:
    """Bytes of memory this machine can give a process now without swapping (psutil's
    ``available``: free plus reclaimable cache), or None when it cannot be read."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # no /proc, a sandbox: unknown
        return None


def read_host(*, libraries: bool = True) -> Host:
    """Read the host once. ``libraries=False`` leaves out NumPy and its BLAS, so a recorder that
    only needs the machine does not import NumPy into its process."""
    import psutil

    model, flags = _cpuinfo()
    if model is None:
        model = platform.processor() or None
    mem = psutil.virtual_memory()
    numpy_version: str | None = None
    if libraries:
        try:
            import numpy

            numpy_version = numpy.__version__
        except ImportError:
            pass
    return Host(
        hostname=socket.gethostname(),
        cpu_model=re.sub(r"\s+", " ", model) if model else None,
        machine=platform.machine() or None,
        physical_cores=psutil.cpu_count(logical=False),
        logical_cores=psutil.cpu_count(logical=True),
        usable_cores=usable_cores(),
        simd=tuple(f for f in SIMD_FLAGS if f in flags),
        memory_total=int(mem.total),
        memory_available=int(mem.available),
        os=_os_name(),
        python=f"{platform.python_implementation()} {sys.version.split()[0]}",
        numpy=numpy_version,
        blas=read_blas() if libraries else None,
    )
