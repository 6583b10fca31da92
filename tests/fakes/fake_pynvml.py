"""A stand-in for ``pynvml`` that answers from an inventory snapshot (the ``info --json`` format),
so the real NVML door (:mod:`gpuprobe.hardware.nvml`) is exercised without a GPU, as gpustat's
tests mock pynvml. A field that is ``null`` in the snapshot raises NVMLError_NotSupported, as a
card that lacks it would. ``init_error`` makes nvmlInit fail with that pynvml error class."""

from __future__ import annotations

import types
from typing import Any

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1

REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


class NVMLError_LibRmVersionMismatch(NVMLError):
    pass


class NVMLError_NotFound(NVMLError):
    pass


def build(snapshot: dict[str, Any], init_error: type[NVMLError] | None = None) -> types.ModuleType:
    """A module object with pynvml's API answering from ``snapshot``."""
    gpus = snapshot.get("gpus", [])
    driver = snapshot.get("driver", {})
    mod = types.ModuleType("pynvml")
    for name, value in globals().items():
        if name.startswith(("NVML", "NVMLError")):
            setattr(mod, name, value)

    def need(value: Any) -> Any:
        if value is None:
            raise NVMLError_NotSupported("Not Supported")
        return value

    def g(h: Any) -> dict[str, Any]:
        if h["kind"] != "gpu":
            raise NVMLError_NotSupported("Not Supported")
        return gpus[h["index"]]

    def nvmlInit() -> None:
        if init_error is not None:
            raise init_error("fake: " + init_error.__name__)

    def cuda_version() -> int:
        v = need(driver.get("cuda_driver_version"))
        major, minor = v.split(".")
        return int(major) * 1000 + int(minor) * 10

    api: dict[str, Any] = {
        "nvmlInit": nvmlInit,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: need(driver.get("driver_version")),
        "nvmlSystemGetNVMLVersion": lambda: need(driver.get("nvml_version")),
        "nvmlSystemGetCudaDriverVersion_v2": cuda_version,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: {"kind": "gpu", "index": i},
        "nvmlDeviceGetName": lambda h: need(
            g(h)["name"] if h["kind"] == "gpu" else h["mig"]["name"]
        ),
        "nvmlDeviceGetUUID": lambda h: need(
            g(h)["uuid"] if h["kind"] == "gpu" else h["mig"]["uuid"]
        ),
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(
            busId=("0000" + need(g(h)["pci_bus_id"])).encode()
        ),
        "nvmlDeviceGetCudaComputeCapability": lambda h: tuple(
            int(x) for x in need(g(h)["compute_capability"]).split(".")
        ),
        "nvmlDeviceGetNumGpuCores": lambda h: need(g(h)["fp32_cores"]),
        "nvmlDeviceGetMemoryBusWidth": lambda h: need(g(h)["memory_bus_width"]),
        "nvmlDeviceGetClockInfo": lambda h, t: need(
            g(h)["sm_clock_mhz"] if t == NVML_CLOCK_SM else g(h)["mem_clock_mhz"]
        ),
        "nvmlDeviceGetMaxClockInfo": lambda h, t: need(
            g(h)["sm_clock_max_mhz"] if t == NVML_CLOCK_SM else g(h)["mem_clock_max_mhz"]
        ),
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: need(g(h)["pcie"]["gen_current"]),
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: need(g(h)["pcie"]["gen_max"]),
        "nvmlDeviceGetGpuMaxPcieLinkGeneration": lambda h: need(g(h)["pcie"]["gen_max_gpu"]),
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: need(g(h)["pcie"]["width_current"]),
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: need(g(h)["pcie"]["width_max"]),
        "nvmlDeviceGetPowerUsage": lambda h: round(need(g(h)["power_draw_w"]) * 1000),
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: round(need(g(h)["power_limit_w"]) * 1000),
        "nvmlDeviceGetTemperature": lambda h, _t: need(g(h)["temperature_c"]),
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(
            gpu=need(g(h)["utilization_gpu"]), memory=0
        ),
        "nvmlDeviceGetPersistenceMode": lambda h: int(need(g(h)["persistence_mode"])),
        "nvmlDeviceGetEccMode": lambda h: (int(need(g(h)["ecc_mode"])),) * 2,
        "nvmlDeviceGetTotalEccErrors": lambda h, _a, _b: need(g(h)["ecc_uncorrected_volatile"]),
        "nvmlDeviceGetRetiredPages": lambda h, cause: (
            list(range(need(g(h)["retired_pages"])))
            if cause == 1
            else need([] if g(h)["retired_pages"] is not None else None)
        ),
        "nvmlDeviceGetRetiredPagesPendingStatus": lambda h: int(
            need(g(h)["retired_pages_pending"])
        ),
        "nvmlDeviceGetRemappedRows": lambda h: (
            need(g(h)["remapped_rows_correctable"]),
            g(h)["remapped_rows_uncorrectable"],
            int(g(h)["remapped_rows_pending"]),
            int(g(h)["remapped_rows_failure"]),
        ),
        "nvmlDeviceGetMigMode": lambda h: (int(need(g(h)["mig_mode"])),) * 2,
        "nvmlDeviceGetMaxMigDeviceCount": lambda h: 7,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: sum(
            REASON_BITS[r] for r in need(g(h)["clock_event_reasons"])
        ),
    }

    def memory(h: Any) -> Any:
        if h["kind"] == "mig":
            return types.SimpleNamespace(total=h["mig"]["memory_total"], used=0, free=0)
        x = g(h)
        return types.SimpleNamespace(
            total=need(x["memory_total"]), used=x["memory_used"], free=x["memory_free"]
        )

    def mig_handle(h: Any, i: int) -> Any:
        migs = g(h)["mig_instances"]
        if i >= len(migs):
            raise NVMLError_NotFound("Not Found")
        return {"kind": "mig", "index": h["index"], "mig": migs[i]}

    def procs(kind: str) -> Any:
        return lambda h: [
            types.SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used_memory"])
            for p in g(h)["processes"]
            if p["kind"] == kind
        ]

    api.update(
        {
            "nvmlDeviceGetMemoryInfo": memory,
            "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
            "nvmlDeviceGetGpuInstanceId": lambda h: h["mig"]["gpu_instance_id"],
            "nvmlDeviceGetComputeInstanceId": lambda h: h["mig"]["compute_instance_id"],
            "nvmlDeviceGetComputeRunningProcesses": procs("compute"),
            "nvmlDeviceGetGraphicsRunningProcesses": procs("graphics"),
        }
    )
    for name, fn in api.items():
        setattr(mod, name, fn)
    return mod
