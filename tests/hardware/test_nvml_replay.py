"""The real NVML door, replayed through a fake pynvml built from recorded snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from _support import DATA, snapshot_dict
from fakes import fake_pynvml
from gpuprobe.hardware.nvml import nvml_session, read_driver
from gpuprobe.inventory import enrich_gpu, load


@pytest.mark.parametrize("name", ["t4.json", "h200.json", "rtx5090_torch_cu124.json"])
def test_nvml_door_reproduces_the_snapshot(fake_nvml, monkeypatch, name: str) -> None:
    fake_nvml(name)
    inv = load(DATA / name)
    # NVML gives PIDs; names come from the host's process table, replayed here from the snapshot.
    names = {p.pid: p.name for g in inv.gpus for p in g.processes}
    monkeypatch.setattr("gpuprobe.hardware.nvml._process_name", names.get)
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
    ("error", "status"),
    [
        (fake_pynvml.NVMLError_LibraryNotFound, "no-library"),
        (fake_pynvml.NVMLError_DriverNotLoaded, "not-loaded"),
        (fake_pynvml.NVMLError_LibRmVersionMismatch, "version-mismatch"),
    ],
)
def test_init_failures_become_a_driver_status(fake_nvml, error, status: str) -> None:
    fake_nvml("t4.json", init_error=error)
    driver, gpus = read_driver()
    assert driver.status == status and gpus == []
    assert error.__name__ in (driver.error or "")


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
