"""What is on this machine: the hardware (NVML, the CUDA driver, PCI, the host, the spec tables),
the array frameworks (one door each), the timer, and the :class:`~gpuprobe.platform.inventory.Inventory`."""

from __future__ import annotations

__all__: list[str] = []
