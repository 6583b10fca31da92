"""How the machine (an :class:`~gpuprobe.platform.inventory.Inventory`) is shown: its rows, shared
by the terminal (rich panels, ``gpuprobe info``) and the notebook (HTML tables), so both show the
same facts with the same units (bytes through :mod:`gpuprobe.core.units`; ``None`` becomes
``n/a``). The Inventory is a platform record, not a tool's result, so its views live here in ui/
and are registered with :mod:`gpuprobe.core.render` when this module is imported (by the API's
``inventory()`` and ``doctor()``, the CLI and every view that shows a machine)."""

from __future__ import annotations

from html import escape
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.units import NA, gib
from gpuprobe.platform.frameworks.base import FrameworkInfo
from gpuprobe.platform.hardware.types import Gpu, Host
from gpuprobe.platform.inventory import Inventory

__all__ = [
    "FRAMEWORK_HEADER",
    "NA",
    "driver_rows",
    "framework_row",
    "gpu_rows",
    "host_rows",
    "inventory_html",
    "inventory_text",
    "na",
    "render_inventory",
]

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


def _kv(rows: list[tuple[str, str]], title: str) -> Any:
    from rich.panel import Panel
    from rich.table import Table

    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(k, v)
    return Panel(t, title=title, title_align="left", expand=True)


def render_inventory(inv: Inventory, console: Any) -> None:
    """Print the inventory: host, driver, each GPU, frameworks."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console.print(_kv(host_rows(inv.host), "Host"))
    console.print(_kv(driver_rows(inv), "Driver and CUDA"))
    if not inv.gpus:
        console.print(
            Panel(
                Text(
                    "none: "
                    + (
                        "no NVIDIA device on the PCI bus and no driver"
                        if not inv.pci_nvidia
                        else "NVIDIA device(s) on the PCI bus, but no working "
                        "driver (run 'gpuprobe doctor')"
                    )
                ),
                title="GPUs",
                title_align="left",
            )
        )
    for g in inv.gpus:
        console.print(_kv(gpu_rows(g), f"GPU {g.index}"))
    t = Table(title="Frameworks", title_justify="left", expand=True)
    for h in FRAMEWORK_HEADER:
        t.add_column(h, overflow="fold")
    for f in inv.frameworks:
        t.add_row(*framework_row(f))
    console.print(t)
    if inv.origin != "live":
        console.print(f"[dim]recorded snapshot: {inv.origin} ({inv.created})[/dim]")


def inventory_text(inv: Inventory) -> str:
    """The inventory as plain text (``str(inventory)``)."""
    from gpuprobe.ui.reprs import capture

    return capture(lambda con: render_inventory(inv, con))


def _kv_table(rows: list[tuple[str, str]], title: str) -> str:
    body = "".join(
        f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:left'>"
        f"{escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<h4>{escape(title)}</h4><table>{body}</table>"


def inventory_html(inv: Inventory) -> str:
    """The inventory as HTML tables."""
    parts = [_kv_table(host_rows(inv.host), "Host"), _kv_table(driver_rows(inv), "Driver and CUDA")]
    parts += [_kv_table(gpu_rows(g), f"GPU {g.index}") for g in inv.gpus]
    head = "".join(f"<th>{escape(h)}</th>" for h in FRAMEWORK_HEADER)
    rows = "".join(
        "<tr>"
        + "".join(f"<td style='text-align:left'>{escape(c)}</td>" for c in framework_row(f))
        + "</tr>"
        for f in inv.frameworks
    )
    parts.append(f"<h4>Frameworks</h4><table><tr>{head}</tr>{rows}</table>")
    return "<div class='gpuprobe-inventory'>" + "".join(parts) + "</div>"


render.text.register(Inventory, inventory_text)
render.html.register(Inventory, inventory_html)
render.terminal.register(Inventory, render_inventory)
