"""Every public result type of gpuprobe, built from the real fixtures in tests/data (or, for the
measuring tools, from a short real run on this machine): what the repr, str, HTML and plot tests
go through, one builder per type in ``gpuprobe._TYPES``. A builder that runs something (a
profile, a run, a cluster, a fit) runs it once a test session; the tests only read what it built."""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).parents[1] / "data"
DIAG = DATA / "diagnose"
TRACE = DIAG / "kineto_r50_nw0_a.pt.trace.json.gz"


@functools.cache
def _ctx() -> Any:
    import gpuprobe

    return gpuprobe.diagnose_with_context(TRACE)


@functools.cache
def _timeline() -> Any:
    import gpuprobe

    return gpuprobe.read_timeline(DATA / "monitor" / "gpu_h200_train.jsonl")


def _inventory() -> Any:
    import gpuprobe

    return gpuprobe.load_inventory(DATA / "t4.json")


def _doctor() -> Any:
    from gpuprobe.tools.doctor.engine import doctor

    return doctor(inventory=_inventory())


def _bench() -> Any:
    from gpuprobe.tools.bench.model import BenchReport

    return BenchReport.from_dict(json.loads((DATA / "bench" / "h200-torch.json").read_text()))


@functools.cache
def _fit() -> Any:
    import gpuprobe
    from gpuprobe.tools.memory.demo import alloc_step

    return gpuprobe.fit(alloc_step, range(1, 65), repeats=1, curve=False)


def _precision() -> Any:
    import torch

    import gpuprobe

    torch.manual_seed(0)
    return gpuprobe.precision_sweep(
        torch.nn.Linear(64, 64), torch.randn(16, 64), ["fp32", "bf16"], budget_s=0.01
    )


@functools.cache
def _oom() -> Any:
    import gpuprobe
    from gpuprobe.tools.memory.demo import oom_past

    try:
        oom_past(2, 1)
    except RuntimeError as exc:
        return exc, gpuprobe.explain_oom(exc)
    raise AssertionError("oom_past did not run out of memory")


def _pack() -> Any:
    from dataclasses import replace

    from gpuprobe.tools.monitor.pack_model import PackCopy, PackLevel, PackReport
    from gpuprobe.tools.monitor.rules.pack import judge

    def level(n: int, copy_s: float) -> PackLevel:
        copies = tuple(
            PackCopy(index=i, wall_s=copy_s, exit_code=0, cpu_s=copy_s) for i in range(n)
        )
        return PackLevel(
            n=n,
            copies=copies,
            wall_s=copy_s,
            mean_copy_s=copy_s,
            throughput=n * 3600 / copy_s,
            slowdown=copy_s / 1.0,
            cpu_percent=100.0 * n,
        )

    pk = PackReport(
        command=("python", "job.py"),
        levels=(level(1, 1.0), level(2, 1.1), level(4, 2.3)),
        unit="jobs/h",
        recommended=2,
        cores=4,
    )
    return replace(pk, findings=tuple(judge(pk)))


@functools.cache
def _lstsq() -> Any:
    import numpy as np

    import gpuprobe

    rng = np.random.default_rng(0)
    a = rng.standard_normal((400, 8))
    return gpuprobe.lstsq(a, a @ np.arange(8.0), reference="numpy")


def _energy() -> Any:
    import gpuprobe
    from gpuprobe.platform.energy import GpuEnergy, HostEnergy

    # through gpuprobe, as a user meets it (the views load with it; alone, the order of the
    # tests decided whether they were there)
    return gpuprobe.EnergyReading(
        seconds=12.5,
        gpus=(GpuEnergy(0, "NVIDIA H200", 3125.0, "counter"),),
        host=HostEnergy(812.5, ("package-0", "package-1")),
    )


@functools.cache
def _recording() -> Any:
    import gpuprobe

    with gpuprobe.record(tempfile.mkdtemp(prefix="gpuprobe-rec-"), hz=20.0) as rec:
        sum(i * i for i in range(200_000))
    return rec


@functools.cache
def _run() -> Any:
    import gpuprobe

    out = Path(tempfile.mkdtemp(prefix="gpuprobe-run-")) / "run"
    return gpuprobe.run([sys.executable, "-c", "print(sum(range(10**6)))"], out, hz=20.0)


@functools.cache
def _profile() -> Any:
    import os

    import gpuprobe

    script = Path(__file__).parents[1] / "tools" / "profile" / "scripts" / "starved.py"
    out = Path(tempfile.mkdtemp(prefix="gpuprobe-profile-")) / "p"
    os.environ["STEPS"] = "6"
    try:
        return gpuprobe.profile_command(
            [sys.executable, str(script)], out, skip=2, warmup=1, active=2, hz=10.0
        )
    finally:
        del os.environ["STEPS"]


@functools.cache
def _scale() -> Any:
    import gpuprobe

    return gpuprobe.scale_lstsq(400, 4, workers=(1,), methods=("normal",), chunk_rows=200)


@functools.cache
def _fleet_reports() -> tuple[Any, Any]:
    """Both fleet reports from one cluster of two worker processes, started once."""
    from distributed import Client, LocalCluster

    import gpuprobe

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        return (
            gpuprobe.fleet_doctor(client, run_kernels=False),
            gpuprobe.fleet_bench(client, ("matmul",), ("numpy",), quick=True),
        )


def _fleet(what: str) -> Any:
    return _fleet_reports()[0 if what == "doctor" else 1]


# type name in gpuprobe._TYPES -> a builder; the types that are not results (a sampler, a server,
# settings, a status, a live view, a function) are left out on purpose, named in NOT_RESULTS
BUILDERS: dict[str, Callable[[], Any]] = {
    "EnergyReading": _energy,
    "BenchReport": _bench,
    "CycleDiagnosis": lambda: __import__("gpuprobe").diagnose_folder(DIAG / "cycles_r50_nw0"),
    "Diagnosis": lambda: _ctx()[0],
    "DoctorReport": _doctor,
    "Finding": lambda: _doctor().findings[0],
    "FitResult": _fit,
    "FitTrial": lambda: _fit().trials[0],
    "FleetBenchReport": lambda: _fleet("bench"),
    "FleetDoctorReport": lambda: _fleet("doctor"),
    "Inventory": _inventory,
    "KernelBreakdown": lambda: __import__("gpuprobe").kernel_breakdown(_ctx()[1]),
    "KernelDiff": lambda: __import__("gpuprobe").kernel_diff(_ctx()[1], _ctx()[1]),
    "LstsqReport": lambda: _lstsq().report,
    "LstsqResult": _lstsq,
    "MultiRankDiagnosis": lambda: __import__("gpuprobe").diagnose_ranks(DIAG / "dlrm8"),
    "OomError": lambda: __import__("gpuprobe").classify_oom(_oom()[0]),
    "OomReport": lambda: _oom()[1],
    "PackLevel": lambda: _pack().levels[0],
    "PackReport": _pack,
    "PrecisionReport": _precision,
    "ProfileReport": _profile,
    "Recording": _recording,
    "RunResult": _run,
    "ScaleResult": _scale,
    "RunSummary": lambda: __import__("gpuprobe").summarize(_timeline()),
    "Timeline": _timeline,
    "TraceComparison": lambda: __import__("gpuprobe").compare(
        DIAG / "hta_trace_diff_control_step1012.json.gz",
        DIAG / "hta_trace_diff_test_step1012.json.gz",
    ),
    "TraceContext": lambda: _ctx()[1],
}
NOT_RESULTS = frozenset(
    {
        "EnergyMeter",
        "GpuprobeCollector",
        "MetricsServer",
        "Sampler",
        "SgdSettings",
        "Status",
        "TopView",
        "profile",
    }
)
