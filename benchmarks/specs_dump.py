"""Dump every table and lookup result of ``gpuprobe.platform.hardware.specs`` as JSON.

Run it before and after changing how the spec tables are stored; the two dumps must be
byte-identical (``cmp``). JSON keeps ``7`` and ``7.0`` apart, so a number whose type changed
shows up too. Usage: ``PYTHONPATH=src python benchmarks/specs_dump.py > /tmp/specs.json``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from gpuprobe.platform.hardware import specs

__all__ = ["dump"]

CCS = [f"{a}.{b}" for a, b in specs.FP32_CORES_PER_SM] + ["7.1", "13.7", "9", " 8.0 ", "abc", ""]
UNKNOWN_NAMES = [
    "NVIDIA Future GPU", "NVIDIA GeForce RTX 9090", "NVIDIA RTX 9000", "NVIDIA H20",
    "NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 4090 Laptop GPU", None, "",
]  # fmt: skip
NVML_NAMES = [
    "Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe",
    "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA B200",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA GB200", "NVIDIA L40S",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition", "Tesla V100-SXM2-16GB",
]  # fmt: skip
ARCH_LISTS = [
    ("sm_80", "sm_86", "sm_90"), ("compute_70",), ("sm_90a",), ("sm_100f",), ("sm_75", "bad"),
    ("compute_90a",), ("sm_120",), (),
]  # fmt: skip


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def dump() -> dict[str, Any]:
    """Every public table and the result of every lookup over a fixed set of inputs."""
    names = [s.product for s in specs.PRODUCTS] + NVML_NAMES + UNKNOWN_NAMES
    gib = 2**30
    return {
        "ARCHITECTURES": [[list(k), v] for k, v in specs.ARCHITECTURES.items()],
        "FP32_CORES_PER_SM": [[list(k), v] for k, v in specs.FP32_CORES_PER_SM.items()],
        "SM_RATES": [[list(k), _plain(v)] for k, v in specs.SM_RATES.items()],
        "PRODUCTS": [_plain(s) | {"fp32_cores": s.fp32_cores} for s in specs.PRODUCTS],
        "MIG_SMALLEST_PROFILES": [_plain(m) for m in specs.MIG_SMALLEST_PROFILES],
        "PCIE_LANE_GBS": [[k, v] for k, v in specs.PCIE_LANE_GBS.items()],
        "RATE_LIMITED_PARTS": [specs.RATE_LIMITED_PARTS.pattern, specs.RATE_LIMITED_PARTS.flags],
        "MEMORY_TRANSFERS_PER_CLOCK": specs.MEMORY_TRANSFERS_PER_CLOCK,
        "cc": [
            [
                cc,
                specs.parse_compute_capability(cc),
                specs.architecture(cc),
                specs.fp32_cores_per_sm(cc),
            ]
            for cc in CCS
        ],
        "spec_for": [[n, _plain(specs.spec_for(n))] for n in names],
        "peaks": [
            [n, cc, kw, _plain(specs.peaks(n, cc, **kw))]
            for n in names
            for cc in CCS
            for kw in (
                {},
                {"sm_count": 100, "sm_clock_max_mhz": 2000},
                {
                    "sm_count": 100,
                    "sm_clock_max_mhz": 2000,
                    "mem_clock_max_mhz": 1500,
                    "memory_bus_width": 5120,
                    "memory_total": 80 * gib,
                },
                {"mem_clock_max_mhz": 10501, "memory_bus_width": 384},
            )
        ],
        "pcie_link_gbs": [
            [g, w, specs.pcie_link_gbs(g, w)]
            for g in (None, 0, 1, 2, 3, 4, 5, 6, 7)
            for w in (None, 0, 1, 2, 4, 8, 16, 32)
        ],
        "arch_supports": [
            [list(a), list(cc), specs.arch_supports(a, cc)]
            for a in ARCH_LISTS
            for cc in [*specs.FP32_CORES_PER_SM, (13, 0)]
        ],
        "mig_smallest_profile": [
            [n, m, specs.mig_smallest_profile(n, m)]
            for n in names
            for m in (None, 24 * gib, 40 * gib, 80 * gib, 94 * gib, 143771 * 2**20, 179 * gib)
        ],
        "markdown_table": specs.markdown_table(),
    }


if __name__ == "__main__":
    json.dump(dump(), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
