"""The rows shown for an inventory, shared by the terminal and the notebook renderers, so both show
the same facts with the same units (bytes through :mod:`gpuprobe.units`). ``None`` becomes
``n/a``."""

from __future__ import annotations

from gpuprobe.frameworks.base import FrameworkInfo
from gpuprobe.hardware.types import Gpu, Host
from gpuprobe.machine import Inventory
from gpuprobe.units import NA, gib

__all__ = ["FRAMEWORK_HEADER", "NA", "driver_rows", "framework_row", "gpu_rows", "host_rows", "na"]

FRAMEWORK_HEADER = ("framework", "version", "CUDA", "cuDNN", "compiled for", "GPUs it sees")


def na(value: object, unit: str = "") -> str:
    """``value`` with its unit, or ``n/a``."""
    if value is None or value == "":
        return NA
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        value = f"{value:.4g}"
    return f"{value} {unit}".strip() if unit else str(value)


def host_rows(h: Host) -> list[tuple[str, str]]:
    """Host facts, one (label, value) per row."""
    blas = h.blas
    blas_text = (
        f"{blas.name} {blas.version or ''} ({blas.threads} threads"
        + (f", {blas.architecture} kernels" if blas.architecture else "")
        + ")"
        if blas
        else NA
    )
    return [
        ("CPU", na(h.cpu_model)),
        (
            "cores",
            f"{na(h.physical_cores)} physical, {na(h.logical_cores)} logical, "
            f"{na(h.usable_cores)} usable by this process",
        ),
        ("SIMD", " ".join(h.simd) or NA),
        ("memory", f"{gib(h.memory_total)} ({gib(h.memory_available)} available)"),
        ("OS", na(h.os)),
        ("Python", na(h.python)),
        ("NumPy", f"{na(h.numpy)} with {blas_text}"),
    ]


def driver_rows(inv: Inventory) -> list[tuple[str, str]]:
    """Driver and CUDA rows."""
    d = inv.driver
    rows = [
        (
            "NVIDIA driver",
            na(d.driver_version)
            if d.status in ("ok", "no-gpu")
            else f"{NA} (NVML: {d.status}; {d.error})",
        ),
        ("newest CUDA it supports", na(d.cuda_driver_version)),
        ("NVML", na(d.nvml_version)),
    ]
    if inv.pci_nvidia or d.status != "ok":
        rows.append(
            (
                "NVIDIA devices on PCI",
                ", ".join(
                    f"{p.address} [{p.device_id}] driver={p.driver or 'none'}"
                    for p in inv.pci_nvidia
                )
                or "none",
            )
        )
    if inv.cuda is not None:
        cv = inv.cuda
        rows.append(
            (
                "a new CUDA process sees",
                f"{len(cv.devices)} device(s)" if cv.status == "ok" else f"nothing: {cv.error}",
            )
        )
    for k, v in inv.env.items():
        rows.append((k, v if v else "(set, empty)"))
    return rows


def _peak(g: Gpu, attr: str, unit: str) -> str:
    return na(getattr(g.peaks, attr) if g.peaks else None, unit)


def gpu_rows(g: Gpu) -> list[tuple[str, str]]:
    """Every fact about one GPU."""
    p = g.peaks
    procs = (
        ", ".join(f"{x.name or '?'}[{x.pid}] {gib(x.used_memory)}" for x in g.processes) or "none"
    )
    migs = ", ".join(f"{m.name or '?'} {m.uuid}" for m in g.mig_instances) or "none"
    if g.nvml_error is not None:  # NVML could not open the card: say so, not a page of n/a
        return [("NVML", f"cannot read GPU {g.index}: {g.nvml_error}")]
    reserved = f", {gib(g.memory_reserved)} driver reserve" if g.memory_reserved else ""
    return [
        ("name", na(g.name)),
        ("UUID", na(g.uuid)),
        ("PCI bus id", na(g.pci_bus_id)),
        ("architecture", f"{na(g.architecture)}, compute capability {na(g.compute_capability)}"),
        (
            "memory",
            f"{gib(g.memory_total)} total, {gib(g.memory_used)} used, "
            f"{gib(g.memory_free)} free{reserved}; bus {na(g.memory_bus_width, 'bit')}",
        ),
        (
            "SMs",
            f"{na(g.sm_count)} × {na(g.fp32_cores_per_sm)} FP32 cores = "
            f"{na(g.fp32_cores)} FP32 cores",
        ),
        (
            "clocks",
            f"SM {na(g.sm_clock_mhz)}/{na(g.sm_clock_max_mhz)} MHz, memory "
            f"{na(g.mem_clock_mhz)}/{na(g.mem_clock_max_mhz)} MHz (current/max)",
        ),
        (
            "peak TFLOP/s (dense)",
            f"FP64 {_peak(g, 'fp64', '')}, FP32 {_peak(g, 'fp32', '')}, "
            f"TF32 {_peak(g, 'tf32', '')}, BF16 {_peak(g, 'bf16', '')}, "
            f"FP16 {_peak(g, 'fp16', '')}, FP8 {_peak(g, 'fp8', '')}, "
            f"INT8 {_peak(g, 'int8', 'TOP/s')}",
        ),
        ("peak memory bandwidth", _peak(g, "memory_bandwidth_gbs", "GB/s")),
        ("peaks source", f"{p.product}: {p.source}" if p else NA),
        (
            "PCIe",
            f"gen {na(g.pcie.gen_current)}/{na(g.pcie.gen_max)}, "
            f"x{na(g.pcie.width_current)}/x{na(g.pcie.width_max)} (current/max)",
        ),
        ("power", f"{na(g.power_draw_w, 'W')} of {na(g.power_limit_w, 'W')} limit"),
        ("temperature, utilization", f"{na(g.temperature_c, '°C')}, {na(g.utilization_gpu, '%')}"),
        (
            "clock event reasons",
            ", ".join(g.clock_event_reasons)
            if g.clock_event_reasons
            else ("none" if g.clock_event_reasons is not None else NA),
        ),
        ("persistence mode", na(g.persistence_mode)),
        (
            "ECC",
            f"{na(g.ecc_mode)}; uncorrected (volatile) {na(g.ecc_uncorrected_volatile)}; "
            f"retired pages {na(g.retired_pages)}; remapped rows "
            f"{na(g.remapped_rows_correctable)}+{na(g.remapped_rows_uncorrectable)}, "
            f"failure {na(g.remapped_rows_failure)}",
        ),
        ("MIG", f"{na(g.mig_mode)}; instances: {migs}"),
        ("processes", procs),
    ]


def framework_row(f: FrameworkInfo) -> tuple[str, ...]:
    """One framework as a table row (see FRAMEWORK_HEADER)."""
    if not f.installed:
        return (f.name, "not installed", "", "", "", "")
    if f.importable is False:
        return (f.name, na(f.version), na(f.cuda_version), "", "", f"import fails: {f.error}")
    if f.arch_list is None:
        arch = f.extra.get("kernels", NA)
    else:
        arch = " ".join(f.arch_list) or "none (CPU-only)"
    if f.devices:
        seen = "; ".join(f"{d.index}: {d.name} (cc {d.compute_capability})" for d in f.devices)
    elif f.probe == "static" and f.reason is None:
        seen = "not probed (no GPU on the bus)"
    else:
        seen = f"none: {f.reason}" if f.reason else "none"
    return (f.name, na(f.version), na(f.cuda_version), na(f.cudnn_version), arch, seen)
