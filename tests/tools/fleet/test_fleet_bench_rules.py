"""The fleet bench's outlier rule on synthetic figures: a pure function (more than 3 MADs from the
median of the peers AND more than 10 % from it), then the figures of whole nodes compared like
with like (same workload, case, framework, size and device model) and judged."""

from __future__ import annotations

import json

import pytest

from _support import too_wide
from gpuprobe.core.findings import Status
from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.bench.model import BenchReport, BenchResult
from gpuprobe.tools.fleet.bench_rules import (
    MIN_PEERS,
    OUTLIER_MADS,
    OUTLIER_MIN_GAP,
    compare,
    judge_bench,
    outliers,
)
from gpuprobe.tools.fleet.model import FleetBenchReport, NodeBench


def test_one_node_thirty_percent_slower_is_named() -> None:
    got = outliers({"n1": 10.0, "n2": 10.2, "n3": 9.9, "n4": 10.1, "n5": 7.0})
    assert list(got) == ["n5"]
    assert got["n5"] == pytest.approx(7.0 / 10.05)  # its ratio to the median of its four peers


def test_noise_within_ten_percent_is_not() -> None:
    # n4 is 8 % under its peers' median: more than 3 MADs (their MAD is 0.5 %) but not 10 %
    assert outliers({"n1": 10.0, "n2": 10.05, "n3": 9.95, "n4": 9.2}) == {}
    assert OUTLIER_MIN_GAP == 0.10 and OUTLIER_MADS == 3.0


def test_a_spread_fleet_makes_twenty_percent_ordinary() -> None:
    # the peers' MAD is 1.5: 20 % away is under 3 MADs, so not named; 50 % away is
    spread = {"n1": 10.0, "n2": 13.0, "n3": 7.0, "n4": 11.5, "n5": 8.5}
    assert outliers({**spread, "n6": 8.0}) == {}
    assert list(outliers({**spread, "n6": 5.0})) == ["n6"]


def test_faster_is_an_outlier_too_and_two_nodes_are_never_judged() -> None:
    assert list(outliers({"n1": 10.0, "n2": 10.0, "n3": 13.0})) == ["n3"]
    assert outliers({"n1": 10.0, "n2": 5.0}) == {}  # one peer each: which one is odd?
    assert MIN_PEERS == 2


def _result(
    workload: str, case: str, device: str, tflops: float, pct: float | None = None
) -> BenchResult:
    m = Measurement(name=workload, framework="torch", device=device, times=(1.0,), median=1.0,
                    p20=1.0, p80=1.0, min=1.0, n=1)  # fmt: skip
    values = {"tflops": tflops, **({"pct_peak": pct} if pct is not None else {})}
    return BenchResult(workload=workload, case=case, framework="torch", device=device, size=512,
                       size_unit="n", measurement=m, values=values)  # fmt: skip


def _node(name: str, cpu: float, gpu_model: str, gpu: float) -> NodeBench:
    results = (_result("matmul", "float32", "cpu", cpu),
               _result("matmul", "float32", "cuda:0", gpu, 100 * gpu / 60))  # fmt: skip
    return NodeBench(name=name, host=name, workers=(f"tcp://{name}:1",), threads=(4,),
                     devices={"cpu": "Xeon 8480", "cuda:0": gpu_model},
                     report=BenchReport(workloads=("matmul",), results=results),
                     elapsed_s=5.0)  # fmt: skip


def test_nodes_are_compared_with_their_own_model_only() -> None:
    nodes = [
        _node("n1", 1.00, "H100", 50.0),
        _node("n2", 1.01, "H100", 49.5),
        _node("n3", 0.99, "H100", 35.0),  # its GPU 30 % slower than its twins'
        _node("n4", 1.02, "A100", 18.0),  # another model: slower, and nobody's twin
    ]
    points = compare(nodes)
    by = {(p.kind, p.model): p for p in points}
    assert set(by) == {("cpu", "Xeon 8480"), ("gpu", "H100"), ("gpu", "A100")}
    h100 = by[("gpu", "H100")]
    assert [f.who for f in h100.figures] == ["n1 cuda:0", "n2 cuda:0", "n3 cuda:0"]
    slow = h100.figure("n3 cuda:0")
    assert slow is not None and slow.outlier and slow.vs_peers == pytest.approx(35.0 / 49.75)
    assert slow.pct_peak == pytest.approx(100 * 35 / 60)
    assert not any(f.outlier for p in points for f in p.figures if f.who != "n3 cuda:0")
    findings = judge_bench(nodes, points)
    by_id = {f.id: f for f in findings}
    out = by_id["fleet-bench-outlier"]
    assert out.status is Status.WARN and out.subject == "n3 cuda:0"
    assert "slower than its peers (H100) on 1 of 1 figures" in out.title
    assert "0.70x" in out.title
    assert "gpu A100" in by_id["fleet-bench-no-peers"].title  # one A100: nothing to compare
    report = FleetBenchReport(scheduler="tcp://x:8786", workloads=("matmul",), nodes=tuple(nodes),
                              points=tuple(points), findings=tuple(findings))  # fmt: skip
    assert report.exit_code == 0 and report.status is Status.WARN
    assert type(report).from_dict(json.loads(json.dumps(report.to_dict()))) == report
    text = str(report)
    assert too_wide(text) == [], text
    assert "35 58%!" in text  # the outlying figure marked (and its % of peak), node beside node
    assert "0.85x (1 !)" in text  # n3: its figures' median against each point's median
    assert "FleetBenchReport" in repr(report) and len(repr(report)) <= 200
    assert "<b>35 58%!</b>" in report._repr_html_()


def test_alike_nodes_are_one_ok() -> None:
    nodes = [_node(f"n{i}", 1.0 + i / 100, "H100", 50.0 - i / 10) for i in range(1, 5)]
    findings = judge_bench(nodes, compare(nodes))
    assert [(f.id, f.status) for f in findings] == [("fleet-bench-alike", Status.OK)]
    assert "2 point(s) on 4 node(s), 4 worker(s)" in findings[0].title


def test_a_node_is_a_host_in_doctor_and_bench_alike() -> None:
    """Issue 41: the same two workers on one host were 1 node, 2 workers in `doctor --cluster`
    and 2 nodes in `bench --cluster`."""
    from dataclasses import replace

    from _support import DATA
    from gpuprobe.platform.inventory import load
    from gpuprobe.tools.doctor.model import DoctorReport
    from gpuprobe.tools.fleet.model import FleetDoctorReport, NodeResult

    a, b = (replace(_node("vm", 1.0, "H100", 50.0), name=f"vm/{w}",
                    workers=(f"tcp://127.0.0.1:{p}",)) for w, p in (("a", 1), ("b", 2)))  # fmt: skip
    bench = FleetBenchReport(scheduler="tcp://s:1", workloads=("matmul",), nodes=(a, b))
    row = NodeResult(name="vm", host="vm", workers=a.workers + b.workers,
                     report=DoctorReport(inventory=load(DATA / "h200.json")))  # fmt: skip
    doctor = FleetDoctorReport(scheduler="tcp://s:1", nodes=(row,))
    for report in (bench, doctor):
        assert "1 node(s), 2 worker(s)" in str(report).splitlines()[0], str(report)
        assert "1 node(s), 2 worker(s)" in repr(report)
    three = [a, b, replace(a, name="vm/c", workers=("tcp://127.0.0.1:3",))]
    (alike,) = judge_bench(three, compare(three))
    assert "on 1 node(s), 3 worker(s)" in alike.title
