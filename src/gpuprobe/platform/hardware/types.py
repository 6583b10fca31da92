"""The records that describe the machine: :class:`Host`, :class:`Driver`, :class:`Gpu` and parts.

Units are in the field names or their comments: bytes for memory, MHz for clocks, watts, degrees
Celsius, TFLOP/s for peaks and GB/s (10^9 bytes per second) for bandwidth. ``None`` means the value
is unknown or unsupported here and shows as ``n/a``.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import Literal

from gpuprobe.core.records import Record

__all__ = [
    "CLOCK_EVENT_REASONS",
    "Blas",
    "CudaDevice",
    "CudaView",
    "Driver",
    "DriverStatus",
    "Gpu",
    "GpuProcess",
    "GpuSample",
    "Host",
    "MigInstance",
    "PciDevice",
    "Pcie",
    "Peaks",
    "decode_clock_event_reasons",
    "encode_clock_event_reasons",
]

DriverStatus = Literal[
    "ok", "no-library", "not-loaded", "version-mismatch", "no-permission", "no-gpu", "error"
]

# NVML clock event ("throttle") reason bits, nvml.h nvmlClocksEventReason*; DCGM field 112.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    # nvml.h R570+ (go-nvml ClocksEventReasonBoardLimit / ClocksEventReasonReliability)
    0x200: "board_limit",
    0x400: "reliability",
}
_UNKNOWN_BIT_PREFIX = "bit_0x"  # a bit nvml.h did not name when this table was written
_CLOCK_EVENT_BITS = {name: bit for bit, name in CLOCK_EVENT_REASONS.items()}


def decode_clock_event_reasons(mask: int | None) -> tuple[str, ...] | None:
    """Names of the bits set in an NVML clock-event-reasons mask, lowest bit first. A bit with
    no name here is kept as ``bit_0x800`` so that no bit of the mask is lost."""
    if mask is None:
        return None
    out = []
    for i in range(64):
        bit = 1 << i
        if mask & bit:
            out.append(CLOCK_EVENT_REASONS.get(bit, f"{_UNKNOWN_BIT_PREFIX}{bit:x}"))
    return tuple(out)


def encode_clock_event_reasons(names: tuple[str, ...] | list[str]) -> int:
    """The NVML bitmask of reason names (the inverse of :func:`decode_clock_event_reasons`)."""
    mask = 0
    for name in names:
        if name in _CLOCK_EVENT_BITS:
            mask |= _CLOCK_EVENT_BITS[name]
        elif name.startswith(_UNKNOWN_BIT_PREFIX):
            with suppress(ValueError):
                mask |= int(name[len(_UNKNOWN_BIT_PREFIX) :], 16)
    return mask


@dataclass(frozen=True)
class Blas(Record):
    """The BLAS library NumPy calls, as threadpoolctl reports it."""

    name: str | None = None  # openblas, mkl, blis, accelerate
    version: str | None = None
    threads: int | None = None
    architecture: str | None = None  # the kernel set OpenBLAS chose (Haswell, SkylakeX, ...)
    path: str | None = None


@dataclass(frozen=True)
class Host(Record):
    """The CPU, memory, OS and Python of this machine."""

    hostname: str | None = None
    cpu_model: str | None = None
    machine: str | None = None  # x86_64, aarch64
    physical_cores: int | None = None
    logical_cores: int | None = None
    usable_cores: int | None = None  # the affinity mask / cgroup quota this process may use
    simd: tuple[str, ...] = ()  # avx2, avx512f, amx_tile, neon ...
    memory_total: int | None = None  # bytes
    memory_available: int | None = None  # bytes
    os: str | None = None
    python: str | None = None
    numpy: str | None = None
    blas: Blas | None = None


@dataclass(frozen=True)
class Driver(Record):
    """The NVIDIA driver as NVML sees it, or why NVML could not be used."""

    status: DriverStatus = "no-library"
    error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the newest CUDA the driver supports, e.g. "12.4"
    nvml_version: str | None = None


@dataclass(frozen=True)
class Pcie(Record):
    """PCIe link generation and width, current and maximum (device and slot together)."""

    gen_current: int | None = None
    gen_max: int | None = None  # max of this device in this system
    gen_max_gpu: int | None = None  # max of the device alone
    width_current: int | None = None
    width_max: int | None = None


@dataclass(frozen=True)
class Peaks(Record):
    """Theoretical dense peaks in TFLOP/s (TOP/s for int8) and memory bandwidth in GB/s."""

    fp64: float | None = None
    fp32: float | None = None
    tf32: float | None = None
    bf16: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    int8: float | None = None
    memory_bandwidth_gbs: float | None = None
    product: str | None = None  # the table entry matched, e.g. "NVIDIA H200 SXM"
    source: str | None = None  # where the numbers come from


@dataclass(frozen=True)
class GpuProcess(Record):
    """A process holding memory or running work on a GPU."""

    pid: int
    name: str | None = None
    used_memory: int | None = None  # bytes
    kind: Literal["compute", "graphics"] = "compute"


@dataclass(frozen=True)
class MigInstance(Record):
    """One MIG device carved out of a GPU."""

    index: int
    uuid: str | None = None
    name: str | None = None
    memory_total: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class Gpu(Record):
    """One physical GPU as NVML and the CUDA driver describe it (index in NVML's PCI order)."""

    index: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    architecture: str | None = None
    compute_capability: str | None = None  # "9.0"
    memory_total: int | None = None  # bytes
    memory_used: int | None = None  # nvmlMemory_v2 "used" where the driver has it (no reserve)
    memory_free: int | None = None
    memory_reserved: int | None = None  # the driver's reserve (nvmlMemory_v2); None on v1
    sm_count: int | None = None
    fp32_cores_per_sm: int | None = None
    fp32_cores: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    memory_bus_width: int | None = None  # bits
    peaks: Peaks | None = None
    pcie: Pcie = field(default_factory=Pcie)
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: int | None = None
    utilization_gpu: int | None = None  # % of the last sample period with a kernel running
    persistence_mode: bool | None = None
    ecc_mode: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    retired_pages: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    mig_mode: bool | None = None
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    clock_event_reasons: tuple[str, ...] | None = None
    # The NVML error that made this GPU unreadable (e.g. "NVMLError_GpuIsLost"); None when read.
    nvml_error: str | None = None

    @property
    def lost(self) -> bool:
        """True when NVML says the GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)."""
        return self.nvml_error == "NVMLError_GpuIsLost"

    @property
    def cc(self) -> tuple[int, int] | None:
        """The compute capability as a tuple, e.g. ``(9, 0)``."""
        if not self.compute_capability:
            return None
        major, _, minor = self.compute_capability.partition(".")
        try:
            return int(major), int(minor or 0)
        except ValueError:  # not "M.m" (a damaged snapshot): unknown, like an unsupported field
            return None

    @property
    def label(self) -> str:
        """A short name for messages: ``GPU 0 (NVIDIA H200)``."""
        return f"GPU {self.index} ({self.name})" if self.name else f"GPU {self.index}"


@dataclass(frozen=True)
class GpuSample(Record):
    """One reading of a GPU's changing state, cheap enough to take many times a second."""

    index: int
    time: float  # seconds since the epoch
    utilization_gpu: int | None = None  # %
    utilization_memory: int | None = None  # % of time the memory controller was busy
    memory_used: int | None = None  # bytes
    power_w: float | None = None
    temperature_c: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    clock_event_reasons: tuple[str, ...] | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_rx_kbs: int | None = None  # KiB/s (NVML's "KB/s"), only on request: 20 ms a reading
    pcie_tx_kbs: int | None = None
    energy_mj: int | None = None  # the total-energy counter (mJ since the driver loaded; Volta+)


@dataclass(frozen=True)
class PciDevice(Record):
    """A device on the PCI bus, read from sysfs without any driver's help."""

    address: str
    vendor_id: str
    device_id: str
    class_code: str
    driver: str | None = None  # the kernel driver bound to it: nvidia, nouveau, vfio-pci, None

    @property
    def is_display(self) -> bool:
        """Display or 3D controller (PCI class 0x03xxxx): a GPU, not an audio or USB function."""
        return self.class_code.lower().removeprefix("0x").startswith("03")


@dataclass(frozen=True)
class CudaDevice(Record):
    """A device as the CUDA driver API enumerates it, in CUDA's order under the environment."""

    ordinal: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_total: int | None = None
    memory_bus_width: int | None = None  # bits
    l2_cache_bytes: int | None = None


@dataclass(frozen=True)
class CudaView(Record):
    """What the CUDA driver API shows a new process under the current environment."""

    status: Literal["ok", "no-library", "error"] = "no-library"
    error: str | None = None  # e.g. "CUDA_ERROR_NO_DEVICE (100)"
    driver_version: str | None = None  # from cuDriverGetVersion
    devices: tuple[CudaDevice, ...] = ()
