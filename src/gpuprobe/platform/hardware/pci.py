"""NVIDIA devices on the PCI bus, read from sysfs: the truth when the driver is missing or broken.

NVML only sees cards its driver drives. A card with no driver (or nouveau, or vfio-pci) is still on
the bus, and that is what tells "no GPU here" apart from "a GPU the driver cannot reach".
"""

from __future__ import annotations

from pathlib import Path

from gpuprobe.platform.hardware.types import PciDevice

__all__ = ["NVIDIA_VENDOR_ID", "SYSFS_PCI", "nvidia_devices"]

NVIDIA_VENDOR_ID = "0x10de"  # PCI-SIG vendor id of NVIDIA Corporation
SYSFS_PCI = Path("/sys/bus/pci/devices")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def nvidia_devices(root: Path = SYSFS_PCI) -> tuple[PciDevice, ...]:
    """NVIDIA display/3D controllers under ``root`` (audio and USB functions left out)."""
    found = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return ()
    for dev in entries:
        if (_read(dev / "vendor") or "").lower() != NVIDIA_VENDOR_ID:
            continue
        driver_link = dev / "driver"
        driver = driver_link.resolve().name if driver_link.exists() else None
        pci = PciDevice(
            address=dev.name.lower(),
            vendor_id=NVIDIA_VENDOR_ID,
            device_id=(_read(dev / "device") or "").lower(),
            class_code=(_read(dev / "class") or "").lower(),
            driver=driver,
        )
        if pci.is_display:
            found.append(pci)
    return tuple(found)
