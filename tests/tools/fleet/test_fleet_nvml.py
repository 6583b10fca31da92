"""The cross-node NVML checks through the real nvidia-ml-py over the fake NVML library: each node
is read as doctor reads a live machine (inventory through pynvml), from the recorded H200 changed
the way a fleet's odd node goes wrong; no GPU framework is needed."""

from __future__ import annotations

import copy
from typing import Any

from _support import snapshot_dict
from gpuprobe.core.findings import Status
from gpuprobe.platform.inventory import inventory
from gpuprobe.tools.doctor.engine import judge
from gpuprobe.tools.doctor.model import DoctorReport
from gpuprobe.tools.fleet.config import node_config
from gpuprobe.tools.fleet.model import NodeResult
from gpuprobe.tools.fleet.rules import judge_fleet


def _read(fake_nvml: Any, name: str, snap: dict[str, Any]) -> NodeResult:
    fake_nvml(snap)
    inv = inventory(frameworks="static")
    report = DoctorReport(inventory=inv, findings=tuple(judge(inv, None, None)))
    return NodeResult(name=name, host=name, workers=(f"tcp://{name}:1",), threads=(4,),
                      config=node_config(inv, (4,)), report=report)  # fmt: skip


def test_the_odd_node_read_through_nvml_is_named(fake_nvml: Any, quick_inventory: None) -> None:
    base = snapshot_dict("h200.json")
    odd = copy.deepcopy(base)
    g = odd["gpus"][0]
    g["pcie"]["width_current"] = 8  # a card in a x8 slot
    g["power_limit_w"] = 450.0  # nvidia-smi -pl 450
    g["clock_event_reasons"] = ["hw_slowdown"]
    g["retired_pages"] = 2
    odd["driver"]["driver_version"] = "570.86.15"
    nodes = [_read(fake_nvml, n, base) for n in ("a", "b", "c")] + [_read(fake_nvml, "d", odd)]
    # what NVML gave is what the rules judge
    gpu = nodes[3].report.inventory.gpus[0]  # type: ignore[union-attr]
    assert gpu.pcie.width_current == 8 and gpu.power_limit_w == 450.0
    by: dict[str, list[Any]] = {}
    for f in judge_fleet(nodes):
        by.setdefault(f.id, []).append(f)
    assert {f.subject for fs in by.values() for f in fs if f.subject} == {"d"}
    assert "PCIe width 8 lanes" in by["fleet-pcie-below-peers"][0].title
    assert "power limit 450 W" in by["fleet-limits-below-peers"][0].title
    assert "hw_slowdown" in by["fleet-throttled"][0].title
    assert "retired_pages=2" in by["fleet-memory-errors"][0].title
    drift = by["fleet-versions-drift"][0]
    assert drift.status is Status.WARN and "driver 570.86.15 vs" in drift.title
