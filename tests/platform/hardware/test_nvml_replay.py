"""The real NVML door and the real pynvml, over a fake NVML library replaying the snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from _support import DATA, snapshot_dict
from gpuprobe.platform.hardware.nvml import nvml_session, read_driver
from gpuprobe.platform.inventory import enrich_gpu, load


@pytest.mark.parametrize("name", ["t4.json", "h200.json", "rtx5090_torch_cu124.json"])
def test_nvml_door_reproduces_the_snapshot(fake_nvml, monkeypatch, name: str) -> None:
    fake_nvml(name)
    inv = load(DATA / name)
    # NVML gives PIDs; names come from the host's process table, replayed here from the snapshot.
    names = {p.pid: p.name for g in inv.gpus for p in g.processes}
    monkeypatch.setattr("gpuprobe.platform.hardware.nvml._process_name", names.get)
    driver, gpus = read_driver()
    assert driver == inv.driver
    assert len(gpus) == len(inv.gpus)
    for read, recorded in zip(gpus, inv.gpus, strict=True):
        enriched = enrich_gpu(read, inv.cuda_all)
        assert enriched == recorded


def test_t4_has_2560_fp32_cores_not_5120(fake_nvml) -> None:
    fake_nvml("t4.json")
    inv = load(DATA / "t4.json")
    gpu = enrich_gpu(read_driver()[1][0], inv.cuda_all)
    assert (gpu.sm_count, gpu.fp32_cores_per_sm, gpu.fp32_cores) == (40, 64, 2560)
    assert gpu.architecture == "Turing"
    assert gpu.peaks is not None and abs(gpu.peaks.fp32 - 8.1) < 0.1


def test_unsupported_fields_become_none_and_the_rest_still_reads(fake_nvml) -> None:
    snap = snapshot_dict("h200.json")
    g = snap["gpus"][0]
    g["power_draw_w"] = None
    g["pcie"]["gen_max_gpu"] = None
    g["clock_event_reasons"] = None
    fake_nvml(snap)
    gpu = read_driver()[1][0]
    assert gpu.power_draw_w is None and gpu.pcie.gen_max_gpu is None
    assert gpu.clock_event_reasons is None
    assert gpu.memory_total == 143771 * 2**20 and gpu.pcie.gen_max == 5


@pytest.mark.parametrize(
    ("error", "status", "name"),
    [
        (12, "no-library", "NVMLError_LibraryNotFound"),
        (9, "not-loaded", "NVMLError_DriverNotLoaded"),
        (18, "version-mismatch", "NVMLError_LibRmVersionMismatch"),
        (4, "no-permission", "NVMLError_NoPermission"),
    ],
)
def test_init_failures_become_a_driver_status(fake_nvml, error: int, status: str, name) -> None:
    fake_nvml("t4.json", init_error=error)
    driver, gpus = read_driver()
    assert driver.status == status and gpus == []
    assert name in (driver.error or "")


def test_samples_and_mig_instances(fake_nvml) -> None:
    snap = snapshot_dict("h200.json")
    snap["gpus"][0]["mig_mode"] = True
    snap["gpus"][0]["mig_instances"] = [
        {
            "index": 0,
            "uuid": "MIG-1",
            "name": "NVIDIA H200 MIG 1g.18gb",
            "memory_total": 18 * 2**30,
            "gpu_instance_id": 9,
            "compute_instance_id": 0,
        }
    ]
    snap["gpus"][0]["clock_event_reasons"] = ["sw_power_cap", "hw_thermal_slowdown"]
    snap["gpus"][0]["memory_used"] = 612 * 2**20  # the card recorded 0 used, idle: a value to see
    fake_nvml(snap)
    with nvml_session() as s:
        gpu = s.gpu(0)
        sample = s.sample(0)
    assert [m.uuid for m in gpu.mig_instances] == ["MIG-1"]
    assert gpu.mig_instances[0].gpu_instance_id == 9
    assert sample.clock_event_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert sample.pcie_gen == 5 and sample.memory_used == 612 * 2**20


def test_the_real_library_is_missing_here() -> None:
    # This machine and CI have no NVIDIA driver: the real pynvml must say so, not crash.
    from _support import HAS_GPU

    if HAS_GPU:
        pytest.skip("a GPU is present")
    driver, gpus = read_driver()
    assert driver.status in ("no-library", "not-loaded") and gpus == []
    assert dataclasses.asdict(driver)["driver_version"] is None


def _with_processes(name: str, n: int = 3) -> dict:
    snap = snapshot_dict(name)
    snap["gpus"][0]["processes"] = [
        {"pid": 4000 + i, "name": None, "used_memory": (i + 1) * 2**30, "kind": "compute"}
        for i in range(n)
    ] + [{"pid": 5000, "name": None, "used_memory": None, "kind": "graphics"}]
    return snap


_V3 = {f"nvmlDeviceGet{k}RunningProcesses_v3" for k in ("Compute", "Graphics")}
_V2 = {f"nvmlDeviceGet{k}RunningProcesses_v2" for k in ("Compute", "Graphics")}


@pytest.mark.parametrize(
    ("missing", "entry"),
    [
        (set(), "_v3"),
        (_V3, "_v2"),  # an R450-R470 driver: no _v3 symbol
        (_V3 | _V2, ""),  # older still: v1 only
    ],
)
def test_every_process_is_read_through_v3_v2_and_v1(fake_nvml, monkeypatch, missing, entry) -> None:
    # Several processes: a binding or fallback that uses the wrong struct size reads garbage
    # after the first one (nvidia-ml-py 12.535.77's 32-byte struct against a 24-byte driver:
    # run with GPUPROBE_TEST_PYNVML=<a --target install of 12.535.77> and the _v3 case fails).
    lib = fake_nvml(_with_processes("h200.json"), missing=missing)
    monkeypatch.setattr("gpuprobe.platform.hardware.nvml._process_name", lambda pid: None)
    gpu = read_driver()[1][0]
    got = [(p.pid, p.used_memory, p.kind) for p in gpu.processes]
    assert got == [
        (4000, 2**30, "compute"),
        (4001, 2 * 2**30, "compute"),
        (4002, 3 * 2**30, "compute"),
        (5000, None, "graphics"),  # NVML_VALUE_NOT_AVAILABLE (WDDM) is n/a, not 16 EiB
    ]
    assert f"nvmlDeviceGetComputeRunningProcesses{entry}" in lib.calls


def test_memory_v2_separates_the_driver_reserve_and_v1_includes_it(fake_nvml) -> None:
    snap = snapshot_dict("h200.json")
    g = snap["gpus"][0]
    g["memory_reserved"] = 512 * 2**20
    g["memory_used"] = 100 * 2**20
    g["memory_free"] = g["memory_total"] - g["memory_used"] - g["memory_reserved"]
    lib = fake_nvml(snap)
    gpu = read_driver()[1][0]
    assert (gpu.memory_used, gpu.memory_reserved) == (100 * 2**20, 512 * 2**20)
    assert gpu.memory_used + gpu.memory_reserved + gpu.memory_free == gpu.memory_total
    assert "nvmlDeviceGetMemoryInfo_v2" in lib.calls
    from gpuprobe.ui.inventory import gpu_rows

    memory = dict(gpu_rows(gpu))["memory"]
    assert "0.10 GiB used" in memory and "0.50 GiB driver reserve" in memory, memory
    # a driver without the v2 entry point: v1, whose "used" includes the reserve
    fake_nvml(snap, missing={"nvmlDeviceGetMemoryInfo_v2"})
    gpu = read_driver()[1][0]
    assert (gpu.memory_used, gpu.memory_reserved) == (612 * 2**20, None)


def test_the_fake_library_rejects_what_a_driver_would(fake_nvml) -> None:
    # The checks that make a wrong call fail a test: a struct of the wrong version, a wrong
    # argument type, and an entry point that does not exist.
    import ctypes

    lib = fake_nvml("h200.json")
    pynvml = lib.module
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError) as err:
        pynvml.nvmlDeviceGetMemoryInfo(h, version=0x01000028)  # v1 tag on a v2 struct
    assert err.value.value == 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetClockInfo")
    assert fn(h, 1, ctypes.byref(ctypes.c_uint())) == 2  # a Python int where c_uint is due
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetUtilizationRates")
    assert fn(h, ctypes.byref(ctypes.c_uint())) == 2  # not an nvmlUtilization_t
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml._nvmlGetFunctionPointer("nvmlDeviceGetClockInfoo")
    assert len(lib.violations) == 3
    lib.violations.clear()  # expected here; the fixture fails any other test that has some


def test_clock_event_bits_above_0x100_are_kept(fake_nvml) -> None:
    fake_nvml("h200.json", clock_mask=0x1 | 0x200 | 0x400 | 0x1000)
    gpu = read_driver()[1][0]
    assert gpu.clock_event_reasons == ("gpu_idle", "board_limit", "reliability", "bit_0x1000")
    from gpuprobe.platform.hardware.types import encode_clock_event_reasons

    assert encode_clock_event_reasons(gpu.clock_event_reasons) == 0x1601
