"""The CUDA driver API (``libcuda``) through ctypes: what a new CUDA process sees.

NVML lists every GPU in PCI order and ignores ``CUDA_VISIBLE_DEVICES``; CUDA applies the variable
and ``CUDA_DEVICE_ORDER`` once, at ``cuInit``. To see what the user's frameworks will see without
initialising CUDA in the user's own process (which would freeze the variable there), the reading runs
in a child process: ``python -m gpuprobe.platform.hardware.cudadrv`` prints a :class:`CudaView` as JSON.
The child also gives what NVML lacks: the SM count, bus width and L2 size.
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
from collections.abc import Mapping

from gpuprobe.platform.hardware.types import CudaDevice, CudaView
from gpuprobe.platform.proc import child_env, python_module

__all__ = ["CUDA_ERRORS", "CUDA_ERROR_FIXES", "error_code", "read_cuda_view", "view_in_child"]

CHILD_TIMEOUT_S = 60.0  # cuInit can take seconds without persistence mode (system76-power #492)

# CUresult values gpuprobe names (cuda.h, enum cudaError_enum; checked in tests against the
# header's values).
CUDA_ERRORS: dict[int, str] = {
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

# What a person does when cuInit fails with these (the doctor's fix).
CUDA_ERROR_FIXES: dict[int, str] = {
    34: "the process loaded the CUDA toolkit's stub libcuda.so (lib64/stubs, for linking only) "
    "instead of the driver's: take the stubs folder out of LD_LIBRARY_PATH (and any "
    "/etc/ld.so.conf.d entry); in a container, run it with the NVIDIA container toolkit "
    "('docker run --gpus all', or the nvidia runtime) so the host's libcuda.so.1 is mounted",
    35: "the NVIDIA driver is older than this CUDA needs: update the driver",
    46: "the GPU is busy or unavailable: compute mode EXCLUSIVE_PROCESS with another process on "
    "it, or it is being reset ('nvidia-smi -q -d COMPUTE'; 'sudo nvidia-smi -c DEFAULT')",
    802: "the system is not ready: on NVSwitch systems (HGX) start the fabric manager "
    "('sudo systemctl enable --now nvidia-fabricmanager') with the driver's exact version",
    803: "the CUDA forward-compatibility package (cuda-compat) does not match the kernel driver: "
    "remove it from LD_LIBRARY_PATH or install the one for this driver",
    804: "this GPU does not support CUDA forward compatibility (a consumer card): remove the "
    "cuda-compat libraries from LD_LIBRARY_PATH and update the driver instead",
    999: "run 'nvidia-smi' and 'sudo dmesg | grep -i -e nvrm -e xid' for the driver's own error",
}


def error_code(text: str | None) -> int | None:
    """The CUresult in a :class:`CudaView` error such as ``"CUDA_ERROR_STUB_LIBRARY (34)"``."""
    m = re.search(r"\((\d+)\)\s*$", text or "")
    return int(m.group(1)) if m else None


# CUdevice_attribute values (cuda.h).
_ATTR_SM_COUNT = 16
_ATTR_BUS_WIDTH = 37
_ATTR_L2_BYTES = 38
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76


def _err(code: int) -> str:
    return f"{CUDA_ERRORS.get(code, 'CUDA error')} ({code})"


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def read_cuda_view() -> CudaView:
    """Initialise the CUDA driver in *this* process and list its devices. Call it in a child."""
    lib = None
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return CudaView(status="no-library", error="libcuda (the CUDA driver library) not found")
    rc = lib.cuInit(0)
    version = ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(version))
    drv = f"{version.value // 1000}.{(version.value % 1000) // 10}" if version.value else None
    if rc != 0:
        return CudaView(status="error", error=_err(rc), driver_version=drv)
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        return CudaView(status="error", error=_err(rc), driver_version=drv)
    get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
    devices = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            continue

        def attr(a: int, d: ctypes.c_int = dev) -> int | None:
            v = ctypes.c_int(0)
            return v.value if lib.cuDeviceGetAttribute(ctypes.byref(v), a, d) == 0 else None

        name_buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name_buf, 256, dev)
        uuid_buf = ctypes.create_string_buffer(16)
        uuid = _uuid(uuid_buf.raw) if get_uuid(uuid_buf, dev) == 0 else None
        bus_buf = ctypes.create_string_buffer(32)
        bus = (
            bus_buf.value.decode().lower()
            if lib.cuDeviceGetPCIBusId(bus_buf, 32, dev) == 0
            else None
        )
        mem = ctypes.c_size_t(0)
        total = getattr(lib, "cuDeviceTotalMem_v2", None) or lib.cuDeviceTotalMem
        major, minor = attr(_ATTR_CC_MAJOR), attr(_ATTR_CC_MINOR)
        devices.append(
            CudaDevice(
                ordinal=ordinal,
                uuid=uuid,
                pci_bus_id=bus,
                name=name_buf.value.decode(errors="replace") or None,
                compute_capability=f"{major}.{minor}" if major is not None else None,
                sm_count=attr(_ATTR_SM_COUNT),
                memory_total=mem.value if total(ctypes.byref(mem), dev) == 0 else None,
                memory_bus_width=attr(_ATTR_BUS_WIDTH),
                l2_cache_bytes=attr(_ATTR_L2_BYTES),
            )
        )
    return CudaView(status="ok", driver_version=drv, devices=tuple(devices))


def view_in_child(env: Mapping[str, str] | None = None) -> CudaView:
    """What a new CUDA process sees under ``env`` (default: this process's environment)."""
    try:
        out = subprocess.run(
            python_module("gpuprobe.platform.hardware.cudadrv"),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env=child_env(env),
            check=False,
        )
        return CudaView.from_dict(json.loads(out.stdout))
    except subprocess.TimeoutExpired:
        return CudaView(status="error", error=f"cuInit did not return within {CHILD_TIMEOUT_S} s")
    except (json.JSONDecodeError, ValueError, TypeError) as exc:
        return CudaView(status="error", error=f"CUDA probe failed: {exc}")


if __name__ == "__main__":
    from gpuprobe.platform.proc import die_with_parent

    die_with_parent()  # a helper never outlives gpuprobe
    json.dump(read_cuda_view().to_dict(), sys.stdout)
