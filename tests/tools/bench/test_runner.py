"""Planning against a machine (recorded snapshots), peaks, judgements and the report record."""

from __future__ import annotations

import dataclasses

import pytest

from _support import DATA
from gpuprobe.core.errors import UsageError
from gpuprobe.platform.hardware.types import Driver
from gpuprobe.platform.inventory import Inventory, load
from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.bench.model import BenchReport, BenchResult, WorkerRun
from gpuprobe.tools.bench.rules import judge
from gpuprobe.tools.bench.runner import add_peaks, plan, run_bench, validate_workloads
from gpuprobe.tools.bench.workloads.crossover import crossover_size


@pytest.fixture(scope="module")
def h200() -> Inventory:
    return load(DATA / "h200.json")


def _cpu_only(inv: Inventory) -> Inventory:
    return dataclasses.replace(inv, gpus=(), frameworks=())


def test_plan_every_usable_pair_on_a_gpu_machine(h200: Inventory) -> None:
    pairs = plan(h200, None, None)
    assert ("numpy", "cpu") in pairs and ("torch", "cuda:0") in pairs
    assert ("cupy", "cuda:0") in pairs and ("cupy", "cpu") not in pairs
    assert plan(h200, ["torch"], ["cuda"]) == [("torch", "cuda:0")]
    assert plan(h200, ["numpy,torch"], ["cpu"]) == [("numpy", "cpu"), ("torch", "cpu")]


@pytest.mark.parametrize(
    ("backends", "devices", "message"),
    [
        (["tensorflow"], None, "unknown backend 'tensorflow'; choose from numpy, torch, cupy, jax"),
        (None, ["gpu0"], "device 'gpu0': gpuprobe runs on cpu, cuda or cuda:N"),
        (
            None,
            ["cuda:3"],
            "device 'cuda:3' is not on this machine; devices here: cpu, cuda:0",
        ),
        (["numpy"], ["cuda:0"], "none of the backends numpy runs on cuda:0"),
    ],
)
def test_plan_refuses_what_is_not_here(
    h200: Inventory, backends: list[str] | None, devices: list[str] | None, message: str
) -> None:
    with pytest.raises(UsageError) as err:
        plan(h200, backends, devices)
    assert message in err.value.message and "\n" not in err.value.message


def test_plan_without_a_gpu(h200: Inventory) -> None:
    inv = _cpu_only(h200)
    assert plan(inv, None, None) == [("numpy", "cpu")]
    with pytest.raises(UsageError, match=r"^cuda:0: no NVIDIA GPU here; use cpu$"):
        plan(dataclasses.replace(inv, pci_nvidia=()), None, ["cuda:0"])
    with pytest.raises(UsageError, match=r"^cuda: the NVIDIA GPU here has no working driver"):
        plan(dataclasses.replace(inv, driver=Driver(status="no-library")), None, ["cuda"])
    with pytest.raises(UsageError, match="not usable here"):
        plan(inv, ["cupy"], None)
    with pytest.raises(UsageError, match="unknown workload 'gemm'"):
        validate_workloads(["gemm"])
    assert validate_workloads(["sync,expression"]) == ("expression", "sync")


def _r(
    workload: str,
    case: str,
    seconds: float,
    size: int = 8192,
    device: str = "cuda:0",
    **values: float,
) -> BenchResult:
    m = Measurement.from_times(workload, "torch", device, [seconds] * 3)
    return BenchResult(
        workload, case, "torch", device, size, "n", measurement=m, values=dict(values)
    )


def test_peaks_from_the_inventory(h200: Inventory) -> None:
    env = {("torch", "cuda:0"): {"uuid": h200.gpus[0].uuid}}
    mm, d2d, h2d, cpu = add_peaks(
        [
            _r("matmul", "bfloat16", 0.01, tflops=742.0),
            _r("transfer", "d2d", 0.01, size=2**28, gbs=2400.0),
            _r("transfer", "h2d-pinned", 0.01, size=2**28, gbs=31.5),
            _r("matmul", "float32", 0.01, device="cpu", tflops=0.1),
        ],
        h200,
        env,
    )
    assert mm.values["peak"] == 989.5 and mm.values["pct_peak"] == pytest.approx(75.0, abs=0.1)
    assert d2d.values["pct_peak"] == pytest.approx(50.0)
    assert h2d.values["peak"] == pytest.approx(63.0, abs=0.1)  # PCIe gen 5 x16
    assert "pct_peak" not in cpu.values
    found = {f.id for f in judge([mm, d2d, h2d], [])}
    assert "bench-d2d-slow" in found and "bench-matmul-below-peak" not in found


def test_crossover_size() -> None:
    cpu = {10: 1.0, 100: 2.0, 1000: 20.0, 10000: 200.0}
    assert crossover_size(cpu, {10: 5.0, 100: 5.0, 1000: 6.0, 10000: 7.0}) == 1000
    assert crossover_size(cpu, {10: 5.0, 100: 5.0, 1000: 60.0, 10000: 700.0}) is None
    assert crossover_size(cpu, {10: 0.5, 100: 5.0, 1000: 6.0, 10000: 7.0}) == 1000


def test_judge_crossover_on_a_gpu_and_without_one() -> None:
    def c(device: str, case: str, size: int, s: float) -> BenchResult:
        return _r("crossover", case, s, size=size, device=device)

    rs = [
        c("cpu", "matmul-resident", 64, 1e-5),
        c("cpu", "matmul-resident", 1024, 1e-2),
        c("cuda:0", "matmul-resident", 64, 2e-5),
        c("cuda:0", "matmul-resident", 1024, 1e-4),
        c("cuda:0", "matmul-copies", 64, 1e-4),
        c("cuda:0", "matmul-copies", 1024, 2e-2),
    ]
    (f,) = [f for f in judge(rs, []) if f.id == "bench-crossover"]
    assert "resident: from 1024" in f.title and "with copies: never" in f.title
    only_cpu = [r for r in rs if r.device == "cpu"]
    assert [f.id for f in judge(only_cpu, [])] == ["bench-no-gpu-to-cross-over"]


def test_wrong_result_and_failed_worker_fail_the_run() -> None:
    bad = _r("matmul", "float32", 0.01, size=512, device="cpu", tflops=0.1, rel_error=0.5)
    fs = judge([bad], [WorkerRun("torch", "cpu", error="the worker died: Killed")])
    assert {f.id for f in fs if f.failed} == {"bench-wrong-result", "bench-worker-failed"}
    report = BenchReport(results=(bad,), findings=tuple(fs))
    assert report.exit_code == 1


def test_in_process_run_round_trips_and_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    report = run_bench(
        ["launch", "sync"],
        ["numpy"],
        ["cpu"],
        quick=True,
        budget_s=0.005,
        sizes={"sync": (10,)},
        isolate=False,
        save=False,
    )
    assert [r.case for r in report.results] == ["call", "host-every-step", "log-on-device"]
    assert BenchReport.from_dict(report.to_dict()) == report
    assert repr(report).startswith("<BenchReport launch, sync on numpy cpu: 3/3 measured")
    text = str(report)
    assert "launch: one tiny op" in text and "µs/op" in text
    assert "<" in report._repr_html_()
    assert report.environment.hostname and report.environment.frameworks["numpy"]


def test_a_busy_host_is_said_for_cpu_figures(h200: Inventory) -> None:
    cores = h200.host.usable_cores or h200.host.logical_cores
    assert cores
    loaded = WorkerRun("torch", "cpu", others_cores=0.5 * cores)
    quiet = WorkerRun("numpy", "cpu", others_cores=0.1 * cores)
    gpu = WorkerRun("torch", "cuda:0", others_cores=0.9 * cores)  # GPU figures: not judged so
    fs = [f for f in judge([], [loaded, quiet, gpu], h200) if f.id == "bench-host-busy"]
    assert [f.subject for f in fs] == ["torch cpu"]
    assert fs[0].evidence[0].value == pytest.approx(0.5 * cores)


def test_host_load_counts_other_processes_not_ours() -> None:
    import subprocess
    import sys
    import time

    import psutil

    from gpuprobe.platform.hardware.load import HostLoad

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 3: pass\n"
    other = subprocess.Popen([sys.executable, "-c", spin])  # not reaped: counts as another's
    try:
        load = HostLoad(children=True)
        time.sleep(0.8)  # the window measured, not a stand-in for work
        busy = load.others_cores()
    finally:
        other.kill()
        other.wait()
    cores = psutil.cpu_count()
    # a runnable spinner keeps at least most of one core busy, and no host exceeds its cores
    assert busy is not None and 0.5 < busy <= cores + 0.2, busy
