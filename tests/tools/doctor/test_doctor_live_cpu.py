"""The doctor on this very machine: on CI there is no GPU and a CPU-only torch, so these are the
real verdicts for it, with real numbers."""

from __future__ import annotations

import json

import pytest

from _support import HAS_GPU
from gpuprobe.cli import main
from gpuprobe.core.findings import Status
from gpuprobe.tools.doctor.engine import doctor
from gpuprobe.tools.doctor.rules.kernels import E1_REL_ERR_FAIL, MATMUL_REL_ERR_FAIL

pytestmark = pytest.mark.skipif(HAS_GPU, reason="checks the verdicts of a machine without a GPU")


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    return doctor(quick=True)


def test_no_gpu_verdict_and_exit_code_zero(report) -> None:  # type: ignore[no-untyped-def]
    assert report.exit_code == 0
    assert report.finding("no-gpu").status is Status.INFO
    assert report.inventory.driver.status == "no-library"


def test_torch_cpu_only_build_is_seen_at_run_time(report) -> None:  # type: ignore[no-untyped-def]
    torch = report.inventory.framework("torch")
    assert torch.probe == "runtime" and torch.importable is True
    assert torch.cpu_only_build is True and torch.version.startswith("2.13.0")
    assert report.finding("torch-cpu-only-build").status is Status.INFO


def test_e1_measured_on_the_cpu_with_correct_results(report) -> None:  # type: ignore[no-untyped-def]
    by_fw = {r.framework: r for r in report.workers}
    assert set(by_fw) == {"numpy", "torch"}
    for r in by_fw.values():
        assert r.error is None
        assert 0 <= r.rel_errors["matmul-float32"] < MATMUL_REL_ERR_FAIL
        assert 0 <= r.rel_errors["e1-float32"] < E1_REL_ERR_FAIL
    e1_64 = by_fw["numpy"].measurement("e1-float64")
    e1_32 = by_fw["torch"].measurement("e1-float32")
    assert e1_64.n >= 1 and e1_32.n >= 1
    assert e1_64.metadata["n"] == 4096 and e1_64.timer == "perf_counter"
    # 4096² float64 is 134 MB read: slower than 20 GB/s of effective throughput is impossible
    # on any CPU that runs CI, and faster than 1000 GB/s would mean the work was skipped.
    gbs = e1_64.bytes_per_s / 1e9
    assert 0.01 < gbs < 1000
    finding = report.finding("cpu-e1")
    assert finding.status is Status.INFO and "numpy float64" in finding.title


def test_doctor_cli_json_and_exit_code(capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["doctor", "--quick", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert {f["id"] for f in data["findings"]} >= {"no-gpu", "cpu-e1", "torch-cpu-only-build"}
    assert data["inventory"]["gpus"] == []
