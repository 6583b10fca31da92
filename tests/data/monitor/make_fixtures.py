"""Write the replay fixtures in this folder: GPU sample sequences shaped like E9's runs.

SYNTHETIC: written by this script, not recorded from a card (there was no GPU where gpuprobe's
monitor was built). Each file is a gpuprobe timeline (``timeline.jsonl`` format, version 1) whose
GPU ticks the tests' ReplayNvml feeds through the real sampler, one tick per NVML read. A
timeline recorded with ``gpuprobe run`` on a real GPU can replace any of them as is.

- ``e9_starved.jsonl``: an RTX A5000 at ~7 % utilization (E9's "GPU 7 %, CPU 70 %"), 3 GiB used.
- ``healthy.jsonl``: the same card at ~95 %, 18 GiB used, at its power cap now and then.
- ``throttled.jsonl``: busy at ~97 %, and from tick 8 on ``sw_thermal_slowdown`` at 87-90 °C
  with the SM clock down from 1695 to ~1200 MHz.

The main process's PID in every file is :data:`RECORDED_PID`; ReplayNvml maps it to the PID being
watched. Run ``python tests/data/monitor/make_fixtures.py`` to rewrite them (deterministic).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
RECORDED_PID = 4242
GIB = 2**30
TICKS = 60
HZ = 2.0
START = 1_750_000_000.0

GPU = {
    "index": 0,
    "uuid": "GPU-5a1e0000-0000-4000-8000-00000000a500",
    "pci_bus_id": "0000:17:00.0",
    "name": "NVIDIA RTX A5000",
    "compute_capability": "8.6",
    "memory_total": 24 * GIB,
    "sm_clock_max_mhz": 2100,
    "power_limit_w": 230.0,
}


def _tick(
    i: int, util: int, mem: int, power: float, temp: int, clock: int, reasons: list[str]
) -> dict:
    return {
        "sample": {
            "index": 0,
            "time": START + i / HZ,
            "utilization_gpu": util,
            "utilization_memory": util // 3,
            "memory_used": mem,
            "power_w": power,
            "temperature_c": temp,
            "sm_clock_mhz": clock,
            "mem_clock_mhz": 8001,
            "clock_event_reasons": reasons,
            "pcie_gen": 4,
            "pcie_width": 16,
        },
        "processes": [{"pid": RECORDED_PID, "used_memory": mem - 300 * 2**20, "sm_percent": util}],
    }


def _write(name: str, ticks: list[dict]) -> None:
    header = {
        "type": "header",
        "schema": "gpuprobe.timeline",
        "version": 1,
        "started": START,
        "hz": HZ,
        "host": {"hostname": "fixture", "logical_cores": 8},
        "driver": {"status": "ok", "driver_version": "550.54.15", "cuda_driver_version": "12.4"},
        "gpus": [GPU],
        "command": ["python", "train.py"],
        "pid": RECORDED_PID,
        "source": "synthetic: tests/data/monitor/make_fixtures.py",
    }
    lines = [header]
    for i, tick in enumerate(ticks):
        lines.append(
            {
                "type": "sample",
                "t": START + (i + 1) / HZ,
                "host": {},
                "tree": None,
                "gpus": [tick],
                "sampler_cpu_s": 0.0,
            }
        )
    lines.append({"type": "end", "t": START + (len(ticks) + 1) / HZ, "exit_code": 0})
    with open(HERE / name, "w", encoding="utf-8") as f:
        for obj in lines:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")


def main() -> None:
    rng = random.Random(9)
    _write(
        "e9_starved.jsonl",
        [
            _tick(
                i,
                rng.choice([0, 0, 3, 5, 8, 10, 12, 15, 18]),
                3 * GIB,
                70 + rng.random() * 10,
                48,
                1695,
                ["gpu_idle"] if i % 3 == 0 else [],
            )
            for i in range(TICKS)
        ],
    )
    _write(
        "healthy.jsonl",
        [
            _tick(
                i,
                rng.randint(92, 99),
                18 * GIB,
                215 + rng.random() * 14,
                71,
                1695,
                ["sw_power_cap"] if i % 4 == 0 else [],
            )
            for i in range(TICKS)
        ],
    )
    _write(
        "throttled.jsonl",
        [
            _tick(
                i,
                rng.randint(95, 99),
                20 * GIB,
                225.0,
                78 if i < 8 else 87 + i % 4,
                1695 if i < 8 else 1200 + rng.randint(-30, 30),
                [] if i < 8 else ["sw_thermal_slowdown"],
            )
            for i in range(TICKS)
        ],
    )


if __name__ == "__main__":
    main()
