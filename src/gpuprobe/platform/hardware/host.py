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
    """Bytes this process can still allocate without swapping or passing a cap: the least of
    the machine's available memory (psutil's ``available``: free plus reclaimable cache), its
    memory cgroup's limit less what the cgroup uses (v2 ``memory.max`` − ``memory.current``,
    v1 ``memory.limit_in_bytes`` − ``memory.usage_in_bytes``: a container's or systemd's
    MemoryMax) and its address-space limit less what it has mapped (``RLIMIT_AS``, as ``ulimit
    -v`` or ``prlimit --as`` set it). None when none of them can be read."""
    room: list[int] = []
    try:
        import psutil

        room.append(int(psutil.virtual_memory().available))
        limit = _address_space_limit()
        if limit is not None:
            room.append(max(0, limit - int(psutil.Process().memory_info().vms)))
    except Exception:  # no /proc, a sandbox: unknown
        pass
    cgroup = _cgroup_room()
    if cgroup is not None:
        room.append(cgroup)
    return min(room) if room else None


def _address_space_limit() -> int | None:
    """This process's RLIMIT_AS in bytes (None: unlimited or unknown)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_room(root: Path = CGROUP_ROOT) -> int | None:
    """Bytes this process's memory cgroup can still take (limit less usage), v2 or v1; None
    where there is no limit or it cannot be read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    v2 = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), "/")
    v1 = next((ln.split(":", 2)[2] for ln in lines if ":memory:" in ln), "/")
    candidates = [
        (root / v2.lstrip("/") / "memory.max", root / v2.lstrip("/") / "memory.current"),
        (root / "memory.max", root / "memory.current"),
        (root / "memory" / v1.lstrip("/") / "memory.limit_in_bytes",
         root / "memory" / v1.lstrip("/") / "memory.usage_in_bytes"),
        (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes"),
    ]  # fmt: skip
    for limit_file, usage_file in candidates:
        try:
            limit_text = limit_file.read_text().strip()
            usage = int(usage_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or int(limit_text) >= 1 << 60:  # v1's "no limit" is ~2**63
            return None
        return max(0, int(limit_text) - usage)
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
