"""Every NVML call gpuprobe makes, failing with every error a real driver gives.

For each (C entry point, error) the real pynvml runs over the fake NVML library with that entry
point answering the error (FunctionNotFound: the symbol is absent), and the code behind `info`,
`doctor`, `bench`, `run`, `top` and `export` runs once: each must end in findings or n/a values,
never an exception, and a lost GPU must be a FAIL finding with its fix. The API functions behind
the commands are exercised in-process (fast); a few real CLI subprocesses close the file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from _support import snapshot_dict
from fakes.nvml_lib import DRIVER_ERRORS
from gpuprobe.core.findings import Finding, Status

# The entry points gpuprobe reaches through pynvml (nvml.h names, as the library exports them).
INVENTORY_CALLS = (
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetNumGpuCores",
    "nvmlDeviceGetMemoryBusWidth",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetCurrentClocksEventReasons",
)
SAMPLER_ONLY_CALLS = (
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetTotalEnergyConsumption",
)
# Reached only when the call named first fails: the error goes on the fallback, the first is absent.
FALLBACKS: dict[str, frozenset[str]] = {
    "nvmlSystemGetCudaDriverVersion": frozenset({"nvmlSystemGetCudaDriverVersion_v2"}),
    "nvmlDeviceGetPowerManagementLimit": frozenset({"nvmlDeviceGetEnforcedPowerLimit"}),
    "nvmlDeviceGetMemoryInfo": frozenset({"nvmlDeviceGetMemoryInfo_v2"}),
    "nvmlDeviceGetCurrentClocksThrottleReasons": frozenset(
        {"nvmlDeviceGetCurrentClocksEventReasons"}
    ),
    **{
        f"nvmlDeviceGet{k}RunningProcesses_v2": frozenset({f"nvmlDeviceGet{k}RunningProcesses_v3"})
        for k in ("Compute", "Graphics")
    },
    **{
        f"nvmlDeviceGet{k}RunningProcesses": frozenset(
            {f"nvmlDeviceGet{k}RunningProcesses_v3", f"nvmlDeviceGet{k}RunningProcesses_v2"}
        )
        for k in ("Compute", "Graphics")
    },
}
SESSION_CALLS = ("nvmlInitWithFlags", "nvmlShutdown")
ALL_CALLS = (*SESSION_CALLS, *INVENTORY_CALLS, *SAMPLER_ONLY_CALLS, *FALLBACKS)


def _rich_snapshot() -> dict[str, Any]:
    """h200.json with every path open: MIG on with an instance, processes, retired pages."""
    snap = snapshot_dict("h200.json")
    g = snap["gpus"][0]
    g["mig_mode"] = True
    g["mig_instances"] = [
        {
            "index": 0,
            "uuid": "MIG-5e1f0c3a-1111-2222-3333-444455556666",
            "name": "NVIDIA H200 MIG 1g.18gb",
            "memory_total": 18 * 2**30,
            "gpu_instance_id": 9,
            "compute_instance_id": 0,
        }
    ]
    g["processes"] = [
        {"pid": 4242, "name": None, "used_memory": 2**30, "kind": "compute"},
        {"pid": 4343, "name": None, "used_memory": 2**29, "kind": "graphics"},
    ]
    g["retired_pages"] = 0
    g["retired_pages_pending"] = False
    g["memory_reserved"] = 512 * 2**20
    return snap


def _text(render: Any, *args: Any) -> str:
    buf = io.StringIO()
    render(*args, Console(file=buf, width=160, color_system=None))
    return buf.getvalue()


def exercise(tmp_path: Path) -> dict[str, Any]:
    """The code behind info, doctor, bench, run, top and export, once each."""
    from prometheus_client import CollectorRegistry, generate_latest

    from gpuprobe.platform.inventory import Inventory, inventory
    from gpuprobe.tools.bench.conditions import Watch
    from gpuprobe.tools.doctor.engine import judge
    from gpuprobe.tools.monitor.exporter import GpuprobeCollector
    from gpuprobe.tools.monitor.judge import summarize
    from gpuprobe.tools.monitor.live import TopView
    from gpuprobe.tools.monitor.records import TimelineHeader
    from gpuprobe.tools.monitor.sampler import Sampler
    from gpuprobe.tools.monitor.timeline import TimelineWriter, read_timeline
    from gpuprobe.ui.findings import render_findings
    from gpuprobe.ui.inventory import render_inventory

    out: dict[str, Any] = {}
    # info
    inv = inventory(frameworks="static")
    assert Inventory.from_dict(json.loads(inv.to_json())) == inv
    out["info"] = _text(lambda c: render_inventory(inv, c))
    # doctor
    findings = judge(inv)
    assert findings and all(isinstance(f, Finding) for f in findings)
    out["doctor"] = findings
    out["doctor_text"] = _text(lambda c: render_findings(findings, c, "doctor"))
    # bench: the conditions watch on the card the measurement runs on
    uuid = snapshot_dict("h200.json")["gpus"][0]["uuid"]
    watch = Watch(uuid)
    try:
        deadline = time.monotonic() + 2.0
        while watch.active and not watch._samples and time.monotonic() < deadline:
            time.sleep(0.005)
        out["bench"] = watch.window(0.0, time.perf_counter())
    finally:
        watch.close()
    # doctor's kernel worker finds its card's NVML index by UUID (None when NVML cannot say)
    from gpuprobe.tools.doctor.worker import _nvml_index

    session, index = _nvml_index(uuid)
    out["worker_index"] = index
    if session is not None:  # the worker keeps its session for its life; close this one
        with contextlib.suppress(session.lib.NVMLError):
            session.lib.nvmlShutdown()
    # run, top and export share the sampler
    with Sampler(hz=10, pcie_throughput=True) as sampler:
        samples = [sampler.take(), sampler.take()]
        path = tmp_path / "timeline.jsonl"
        with TimelineWriter(path) as w:
            w.write_header(
                TimelineHeader(
                    command=("train.py",),
                    pid=None,
                    hz=10.0,
                    gpus=sampler.gpus,
                    driver=sampler.driver,
                    started=time.time(),
                )
            )
            for s in samples:
                w.write_sample(s)
            w.write_end(exit_code=0)
        out["run"] = summarize(read_timeline(path))
        view = TopView(sampler)
        for s in samples:
            view.update(s)
        out["top"] = _text(lambda c: c.print(view.render()))
        collector = GpuprobeCollector(sampler)
        collector.update(samples[-1])
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        out["export"] = generate_latest(registry).decode()
    return out


def _case(call: str, error: str) -> dict[str, Any]:
    missing = set(FALLBACKS.get(call, ()))
    errors: dict[str, int] = {}
    if error == "FunctionNotFound":
        missing.add(call)
    else:
        errors[call] = DRIVER_ERRORS[error]
    return {"missing": missing, "errors": errors}


CASES = [(call, error) for call in ALL_CALLS for error in DRIVER_ERRORS]


@pytest.mark.parametrize(("call", "error"), CASES, ids=[f"{c}-{e}" for c, e in CASES])
def test_every_nvml_call_failing_every_way_gives_findings_not_tracebacks(
    fake_nvml: Any, quick_inventory: None, tmp_path: Path, call: str, error: str
) -> None:
    lib = fake_nvml(
        _rich_snapshot(),
        utilization_samples={0: [(4242, 37)]},
        pcie_kbs=(1024, 2048),
        **_case(call, error),
    )
    out = exercise(tmp_path)
    assert call in lib.calls or error == "FunctionNotFound" or call == "nvmlShutdown"
    by_id = {f.id: f for f in out["doctor"]}
    for text in (out["info"], out["doctor_text"], out["top"]):
        assert "Traceback" not in text
    if error != "GpuIsLost" or call in ("nvmlShutdown",):
        assert "gpu-lost" not in by_id
        return
    # A lost GPU: a FAIL finding with the fix, wherever NVML said it.
    if call in SAMPLER_ONLY_CALLS:
        assert "GPU is lost" in out["top"] and "Xid 79" in out["top"]
        return
    if call == "nvmlDeviceGetHandleByIndex_v2":  # nothing else could be read: info says why
        assert "cannot read GPU 0: NVMLError_GpuIsLost" in out["info"]
    lost = by_id.get("gpu-lost")
    assert lost is not None and lost.status is Status.FAIL, sorted(by_id)
    assert "Xid 79" in (lost.fix or "") and "reset" in (lost.fix or "")
    assert "reboot" in (lost.fix or "")
    if call.startswith("nvmlDevice") and call != "nvmlDeviceGetCount_v2":
        run_ids = {f.id for f in out["run"].findings}
        assert "gpu-lost" in run_ids
        assert "GPU is lost" in out["top"]


def test_the_list_is_every_call_the_commands_make(
    fake_nvml: Any, quick_inventory: None, tmp_path: Path
) -> None:
    # Run every command once with nothing failing: each entry point reached is in the list, and
    # each in the list (but the fallbacks) is reached. A new NVML call fails here until listed.
    lib = fake_nvml(_rich_snapshot(), utilization_samples={0: [(4242, 37)]}, pcie_kbs=(1024, 2048))
    out = exercise(tmp_path)
    called = set(lib.calls) - {"nvmlErrorString"}
    assert called - set(ALL_CALLS) == set()
    assert set(ALL_CALLS) - set(FALLBACKS) - called == set()
    # and the values arrived: the top line and the exporter carry the replayed numbers
    assert "rx 2 tx 1 MiB/s" in out["top"]  # RX counter 1: 2048 KiB/s
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{" in out["export"]
    gpu = {f.id for f in out["doctor"]}
    assert "gpu-mig" in gpu and "gpu-lost" not in gpu
    assert out["bench"] is not None and out["bench"].sm_clock_mhz_max == 345
    assert out["worker_index"] == 0


def test_coverage_numbers() -> None:
    # The closing note's numbers: NVML entry points x driver errors covered above.
    assert len(ALL_CALLS) == 50
    assert len(DRIVER_ERRORS) == 7
    assert len(CASES) == 50 * 7


@pytest.mark.parametrize("error", ["GpuIsLost", "NoPermission"])
def test_the_cli_survives_a_failing_gpu(tmp_path: Path, error: str) -> None:
    # Real processes: `gpuprobe info --json` and `doctor --json` with NVML's handle call failing,
    # through the real pynvml over the fake library (installed by a sitecustomize in the child).
    site = tmp_path / "site"
    site.mkdir()
    tests = Path(__file__).resolve().parents[2]
    (site / "sitecustomize.py").write_text(
        "import sys, json\n"
        f"sys.path.insert(0, {str(tests)!r})\n"
        "from fakes import nvml_lib\n"
        "from _support import snapshot_dict\n"
        "mod = nvml_lib.load_pynvml()\n"
        f"lib = nvml_lib.FakeNvmlLibrary(snapshot_dict('h200.json'), "
        f"errors={{'nvmlDeviceGetHandleByIndex_v2': {DRIVER_ERRORS[error]}}})\n"
        "nvml_lib.attach(mod, lib)\n"
        "sys.modules['pynvml'] = mod\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    info = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "info", "--json", "--frameworks", "static"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert info.returncode == 0 and "Traceback" not in info.stderr, info.stderr
    assert json.loads(info.stdout)["gpus"][0]["nvml_error"] == f"NVMLError_{error}"
    snap = tmp_path / "snap.json"
    snap.write_text(info.stdout)
    # the snapshot holds the unreadable card; the doctor judges it (no kernels with --from)
    doc = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "doctor", "--json", "--from", str(snap)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in doc.stderr, doc.stderr
    ids = {f["id"]: f for f in json.loads(doc.stdout)["findings"]}
    if error == "GpuIsLost":
        assert ids["gpu-lost"]["status"] == "fail" and doc.returncode == 1
        assert "Xid 79" in ids["gpu-lost"]["fix"]
    else:
        assert ids["gpu-unreadable"]["status"] == "warn"
