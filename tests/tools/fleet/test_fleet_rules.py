"""The cross-node rules on real snapshots: the H200 of tests/data/h200.json (recorded on a lent
card) copied to several nodes, one of them changed the way real fleets go wrong."""

from __future__ import annotations

import copy
from typing import Any

from _support import snapshot_dict
from gpuprobe.core.findings import Status
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.engine import judge
from gpuprobe.tools.doctor.model import DoctorReport
from gpuprobe.tools.fleet.config import node_config
from gpuprobe.tools.fleet.model import NodeResult
from gpuprobe.tools.fleet.rules import LIMIT_BELOW_PEERS, judge_fleet


def _node(name: str, snap: dict[str, Any], threads: int = 4) -> NodeResult:
    inv = Inventory.from_dict(snap)
    report = DoctorReport(inventory=inv, findings=tuple(judge(inv, None, None)), live=False)
    return NodeResult(
        name=name,
        host=name,
        workers=(f"tcp://{name}:40000",),
        threads=(threads,),
        config=node_config(inv, (threads,)),
        report=report,
    )


def _fleet(change: Any = None, threads: int = 4) -> list[NodeResult]:
    base = snapshot_dict("h200.json")
    odd = copy.deepcopy(base)
    if change is not None:
        change(odd)
    return [_node("node1", base), _node("node2", base), _node("node3", base),
            _node("node4", odd, threads)]  # fmt: skip


def _ids(nodes: list[NodeResult]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for f in judge_fleet(nodes):
        out.setdefault(f.id, []).append(f)
    return out


def test_four_alike_nodes_are_one_configuration() -> None:
    found = _ids(_fleet())
    assert list(found) == ["fleet-alike"]
    (ok,) = found["fleet-alike"]
    assert ok.status is Status.OK and "4 node(s), 4 worker(s), one configuration" in ok.title


def test_a_driver_a_version_behind_is_named_with_the_majoritys_version() -> None:
    def older(s: dict[str, Any]) -> None:
        s["driver"]["driver_version"] = "570.86.15"

    found = _ids(_fleet(older))
    (drift,) = found["fleet-versions-drift"]
    assert drift.subject == "node4" and drift.status is Status.WARN
    want = snapshot_dict("h200.json")["driver"]["driver_version"]
    assert f"driver 570.86.15 vs {want}" in drift.title
    assert f"install driver {want} on node4" in drift.fix


def test_a_gpu_on_a_x8_link_and_a_lower_power_limit() -> None:
    def slot(s: dict[str, Any]) -> None:
        s["gpus"][0]["pcie"]["width_current"] = 8
        s["gpus"][0]["power_limit_w"] = 500.0

    found = _ids(_fleet(slot))
    (link,) = found["fleet-pcie-below-peers"]
    assert (
        link.subject == "node4" and "PCIe width 8 lanes" in link.title and "16 lanes" in link.title
    )
    (power,) = found["fleet-limits-below-peers"]
    assert "power limit 500 W" in power.title and "700 W" in power.title
    assert 1 - LIMIT_BELOW_PEERS > 500 / 700  # the rule's tolerance is what lets it through


def test_a_power_limit_within_the_tolerance_is_not_an_outlier() -> None:
    def close(s: dict[str, Any]) -> None:
        s["gpus"][0]["power_limit_w"] = 700.0 * (1 - LIMIT_BELOW_PEERS / 2)

    assert "fleet-limits-below-peers" not in _ids(_fleet(close))


def test_memory_errors_where_the_twins_have_none_and_a_card_held_down_by_heat() -> None:
    def worn(s: dict[str, Any]) -> None:
        s["gpus"][0]["ecc_uncorrected_volatile"] = 3
        s["gpus"][0]["retired_pages_pending"] = True
        s["gpus"][0]["clock_event_reasons"] = ["hw_thermal_slowdown"]

    found = _ids(_fleet(worn))
    (mem,) = found["fleet-memory-errors"]
    assert mem.status is Status.FAIL  # a pending retirement needs a reset
    assert "ecc_uncorrected_volatile=3" in mem.title and "3 of its 3 twins have none" in mem.title
    (hot,) = found["fleet-throttled"]
    assert hot.subject == "node4" and "hw_thermal_slowdown" in hot.title


def test_a_missing_gpu_is_hardware_and_fewer_threads_is_the_workers() -> None:
    def one_less(s: dict[str, Any]) -> None:
        s["gpus"].append(copy.deepcopy(s["gpus"][0]) | {"index": 1})

    found = _ids(_fleet(one_less, threads=2))
    (hw,) = found["fleet-hardware-differs"]
    assert "gpus 2 × NVIDIA H200 vs 1 × NVIDIA H200" in hw.title
    (thr,) = found["fleet-workers-differ"]
    assert "worker threads 2 vs 4" in thr.title and "--nthreads 4" in thr.fix


def test_two_nodes_two_drivers_have_no_majority() -> None:
    base = snapshot_dict("h200.json")
    other = copy.deepcopy(base)
    other["driver"]["driver_version"] = "570.86.15"
    found = _ids([_node("a", base), _node("b", other)])
    (split,) = found["fleet-no-majority"]
    assert "driver" in split.title and any("b 570.86.15" in d for d in split.details)
    assert "fleet-versions-drift" not in found


def test_a_node_that_is_lost_or_lacks_gpuprobe_is_a_failure_and_the_rest_are_judged() -> None:
    nodes = _fleet()
    nodes.append(NodeResult(name="node5", host="node5", workers=("tcp://node5:1",), status="lost",
                            error="no answer in 600 s"))  # fmt: skip
    nodes.append(NodeResult(name="node6", host="node6", workers=("tcp://node6:1",),
                            status="no-gpuprobe", error="gpuprobe is not importable there"))  # fmt: skip
    found = _ids(nodes)
    assert found["fleet-worker-lost"][0].status is Status.FAIL
    assert "node5: no answer in 600 s" in found["fleet-worker-lost"][0].title
    assert "node6" in found["fleet-no-gpuprobe"][0].title
    assert "fleet-versions-drift" not in found  # the four that reported are alike
