"""The machine's energy counters, read as they are: each NVIDIA GPU's total-energy counter (NVML,
millijoules since the driver loaded; Volta and newer, not on MIG instances or many vGPUs) and the
host's RAPL package counters (``/sys/class/powercap/intel-rapl:N/energy_uj``, microjoules, which
wrap at ``max_energy_range_uj``; AMD's CPUs have them under the same name on Linux 5.8+).

NVML's counter updates every 20-100 ms depending on the card, so a window shorter than that reads
0 or one update (the meter in :mod:`gpuprobe.platform.energy` says so). RAPL's ``energy_uj`` is
readable by root only on kernels patched for CVE-2020-8694 (PLATYPUS): where it cannot be read the
reason is given, never a zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ENERGY_CALL",
    "RAPL_ROOT",
    "RaplZone",
    "counter_delta",
    "gpu_energy_mj",
    "rapl_zones",
    "read_zone_uj",
]

ENERGY_CALL = "nvmlDeviceGetTotalEnergyConsumption"
RAPL_ROOT = Path("/sys/class/powercap")
# the packages (intel-rapl:0, intel-rapl:1, ...); their sub-zones (intel-rapl:0:0, the cores,
# the uncore, DRAM on some parts) are counted within a package's and are left out, so that nothing
# is counted twice; psys (the whole platform, on some laptops) would count the packages again
_PACKAGE = re.compile(r"intel-rapl:\d+")


def gpu_energy_mj(session: Any, index: int) -> int | None:
    """GPU ``index``'s total energy since the driver loaded, in millijoules, or ``None`` where
    the card or driver has no counter (``session`` is a
    :class:`~gpuprobe.platform.hardware.nvml.NvmlSession`)."""
    value = session.query(ENERGY_CALL, session.handle(index))
    return int(value) if value is not None else None


@dataclass(frozen=True)
class RaplZone:
    """One RAPL package zone: its name (``package-0``), its folder, and where it wraps."""

    name: str
    path: Path
    max_uj: int | None  # energy_uj wraps to 0 after this many microjoules


def rapl_zones(root: Path = RAPL_ROOT) -> tuple[list[RaplZone], str | None]:
    """The package zones whose counters this process can read, or ``([], why)``."""
    if not root.is_dir():
        return [], f"no RAPL counters ({root} is missing: a VM, a container, or not Linux)"
    found = sorted(p for p in root.iterdir() if _PACKAGE.fullmatch(p.name))
    if not found:
        return [], f"no RAPL package counters under {root} (a VM, or a CPU without RAPL)"
    zones: list[RaplZone] = []
    for p in found:
        try:
            (p / "energy_uj").read_text()
        except PermissionError:
            return [], (
                f"the RAPL counters are readable by root only here ({p / 'energy_uj'}); run as "
                "root, or grant read access to that file, to measure the host's energy"
            )
        except OSError as exc:
            return [], f"{p / 'energy_uj'} cannot be read ({exc.strerror or exc})"
        name = _read_text(p / "name") or p.name
        zones.append(RaplZone(name, p, _read_int(p / "max_energy_range_uj")))
    return zones, None


def read_zone_uj(zone: RaplZone) -> int | None:
    """The zone's counter now, in microjoules (``None`` if it could not be read)."""
    return _read_int(zone.path / "energy_uj")


def counter_delta(start: int, end: int, wrap_at: int | None) -> int | None:
    """``end - start`` of a counter that wraps to 0 after ``wrap_at`` (one wrap at most between
    two readings); ``None`` when it went backwards and cannot have wrapped (a driver reloaded, a
    counter reset)."""
    if end >= start:
        return end - start
    if wrap_at:
        return end + wrap_at - start
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
