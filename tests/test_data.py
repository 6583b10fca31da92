"""Records round-trip through JSON with their types intact."""

from __future__ import annotations

import json

from _support import DATA
from gpuprobe.core.findings import Evidence, Finding, Status, worst, worst_first
from gpuprobe.platform.inventory import Inventory, load
from gpuprobe.platform.measurement import Measurement


def test_inventory_snapshots_round_trip() -> None:
    for name in ("t4.json", "h200.json", "rtx5090_torch_cu124.json"):
        inv = load(DATA / name)
        again = Inventory.from_dict(json.loads(json.dumps(inv.to_dict())))
        assert again == inv
        assert isinstance(again.gpus[0].sm_count, int)
        assert again.gpus[0].pcie.width_max == 16


def test_measurement_statistics_and_types_survive_json() -> None:
    m = Measurement.from_times(
        "x",
        "numpy",
        "cpu",
        [0.5, 0.1, 0.3, 0.2, 0.4],
        work={"flop": 1e9},
        metadata={"n": 10_000, "dtype": "float32"},
    )
    assert (m.min, m.median, m.n) == (0.1, 0.3, 5)
    assert abs(m.p20 - 0.18) < 1e-12 and abs(m.p80 - 0.42) < 1e-12
    assert m.flops == 1e9 / 0.3
    back = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m
    assert type(back.metadata["n"]) is int  # not turned into 10000.0


def test_worst_first_orders_by_severity() -> None:
    fs = [
        Finding(i, s, i)
        for i, s in (
            ("a", Status.OK),
            ("b", Status.FAIL),
            ("c", Status.SKIPPED),
            ("d", Status.WARN),
        )
    ]
    assert [f.id for f in worst_first(fs)] == ["b", "d", "a", "c"]
    assert worst(fs) is Status.FAIL and worst([]) is Status.OK
    assert str(Evidence("gpu_busy", 7.0, "%")) == "gpu_busy=7%"
    assert str(Evidence("t", None, "ms")) == "t=n/a"
