"""The fleet commands' reports as a real card produced them (tests/data/fleet/ORIGIN.md: two
Dask workers sharing one NVIDIA H200): read back, drawn at 80 columns, and judged again by
today's rules, so CI checks the fleet code against what a real cluster with a GPU returned."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from _support import too_wide
from gpuprobe.tools.fleet.bench_rules import compare, judge_bench
from gpuprobe.tools.fleet.model import FleetBenchReport, FleetDoctorReport
from gpuprobe.tools.fleet.rules import judge_fleet

DATA = Path(__file__).resolve().parents[2] / "data" / "fleet"


def _load(name: str) -> dict[str, Any]:
    return json.loads(gzip.decompress((DATA / name).read_bytes()))


@pytest.fixture(scope="module")
def doctor() -> FleetDoctorReport:
    return FleetDoctorReport.from_dict(_load("h200_fleet_doctor.json.gz"))


@pytest.fixture(scope="module")
def bench() -> FleetBenchReport:
    return FleetBenchReport.from_dict(_load("h200_fleet_bench.json.gz"))


def test_the_recorded_fleet_doctor_reads_back_and_is_judged_the_same(
    doctor: FleetDoctorReport,
) -> None:
    # recorded before a row said where its kernels ran: those fields read back as not given
    recorded = _load("h200_fleet_doctor.json.gz")
    recorded["nodes"] = [
        {**n, "kernels_on": [], "kernels_by": [], "kernels_note": None} for n in recorded["nodes"]
    ]
    # and before a worker said how much memory it could take and whether it ran out
    for n in recorded["nodes"]:
        n["report"]["workers"] = [
            {
                **w,
                "available_memory": None,
                "out_of_memory": False,
                # and before a GPU sample carried the energy counter
                "under_load": [{**u, "energy_mj": None} for u in w["under_load"]],
            }
            for w in n["report"]["workers"]
        ]
    assert doctor.to_dict() == recorded
    assert [n.config["gpus"] for n in doctor.nodes] == ["1 × NVIDIA H200"] * 2
    assert {n.config["driver"] for n in doctor.nodes} == {"580.159.04"}
    assert [f.id for f in judge_fleet(doctor.nodes)] == [f.id for f in doctor.findings]
    assert [f.id for f in doctor.findings] == ["fleet-alike"]
    for node in doctor.nodes:
        assert node.report is not None
        # every framework ran its kernels on the card, timed on the device (JAX has no events:
        # it waits on the result)
        ran = {
            w.framework: w.measurement("matmul-float32")
            for w in node.report.workers
            if w.device.startswith("cuda") and w.error is None
        }
        assert set(ran) >= {"torch", "cupy", "jax"}, set(ran)
        for fw, mm in ran.items():
            assert mm is not None, fw
            assert mm.timer == ("block_until_ready" if fw == "jax" else "cuda-event"), fw
            # an H200's float32 (no TF32) is 67 TFLOP/s at most; the quick problem reaches a part
            assert 1e12 < mm.flops < 67e12, (fw, mm.flops)
    text = str(doctor)
    assert not too_wide(text), text
    assert "1 × NVIDIA H200" in text and "fleet-alike" in text


def test_the_recorded_fleet_bench_compares_and_judges_the_same(bench: FleetBenchReport) -> None:
    again = compare(bench.nodes)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in bench.points]
    assert [f.id for f in judge_bench(bench.nodes, again)] == [f.id for f in bench.findings]
    gpu = {p.case: p for p in bench.points if p.kind == "gpu" and p.workload == "matmul"}
    # float64 is held against the FP64 tensor-core peak (67 TFLOP/s): cuBLAS's DGEMM runs there
    f64 = [f.pct_peak for f in gpu["float64"].figures]
    assert all(pct is not None and 80 < pct < 100 for pct in f64), f64
    assert all(f.value > 300 for f in gpu["bfloat16"].figures)  # TFLOP/s of a 989 peak
    assert not any(f.outlier for p in bench.points for f in p.figures)
    # numpy did not run (--backend torch): the BLAS column is torch's CPU threads, 1 in a Dask
    # worker (its nanny sets OMP_NUM_THREADS=1), which is why the Xeon's float32 GEMM is 0.15
    assert [n.blas_threads for n in bench.nodes] == [1, 1]
    text = str(bench)
    assert not too_wide(text), text
    assert "gpu NVIDIA H200: 2 device(s)" in text
