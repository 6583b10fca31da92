"""The host and the PCI bus, read for real here, and from a built sysfs tree."""

from __future__ import annotations

import os
from pathlib import Path

from gpuprobe.platform.hardware.host import read_host
from gpuprobe.platform.hardware.pci import nvidia_devices


def test_host_reads_this_machine() -> None:
    h = read_host()
    assert h.logical_cores == os.cpu_count()
    assert 1 <= (h.usable_cores or 0) <= (h.logical_cores or 0)
    assert h.memory_total and h.memory_available and h.memory_available <= h.memory_total
    assert h.blas is not None and (h.blas.threads or 0) >= 1 and h.blas.name
    assert h.python and h.python.startswith("CPython")
    if Path("/proc/cpuinfo").exists() and "avx2" in Path("/proc/cpuinfo").read_text():
        assert "avx2" in h.simd


def _dev(root: Path, addr: str, vendor: str, cls: str, driver: str | None) -> None:
    d = root / "devices" / addr
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text("0x2335\n")
    (d / "class").write_text(cls + "\n")
    if driver:
        (root / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        (d / "driver").symlink_to(root / "drivers" / driver)


def test_pci_finds_nvidia_display_devices_and_their_driver(tmp_path: Path) -> None:
    _dev(tmp_path, "0000:18:00.0", "0x10de", "0x030200", "nvidia")
    _dev(tmp_path, "0000:18:00.1", "0x10de", "0x040300", "snd_hda_intel")  # the card's audio
    _dev(tmp_path, "0000:3b:00.0", "0x10de", "0x030000", None)
    _dev(tmp_path, "0000:00:02.0", "0x8086", "0x030000", "i915")
    found = nvidia_devices(tmp_path / "devices")
    assert [(d.address, d.driver) for d in found] == [
        ("0000:18:00.0", "nvidia"),
        ("0000:3b:00.0", None),
    ]
    assert nvidia_devices(tmp_path / "missing") == ()
