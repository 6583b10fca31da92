"""On a real NVIDIA GPU (skipped elsewhere): ``gpuprobe top`` reads the card while a process
works on it: the utilization and memory NVML reports move with the work, and the frame names the
card within 80 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.gpu

BUSY = """
import time, torch
x = torch.randn(8192, 8192, device="cuda")
hold = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")  # 2 GiB held
torch.cuda.synchronize()
print("ready", flush=True)
t0 = time.monotonic()
while time.monotonic() - t0 < 60:
    for _ in range(20):
        x = (x @ x) * 1e-4
    torch.cuda.synchronize()
"""


@pytest.fixture
def busy_gpu() -> Iterator[subprocess.Popen[str]]:
    pytest.importorskip("torch")
    p = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield p
    finally:
        p.kill()
        p.wait(10)


def _top(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    return subprocess.run([sys.executable, "-m", "gpuprobe", "top", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False)  # fmt: skip


def test_top_json_follows_the_work_on_the_card(busy_gpu: subprocess.Popen[str]) -> None:
    r = _top("--json", "--iterations", "6", "--interval", "0.5")
    assert r.returncode == 0, r.stderr
    samples = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    gpus = [g["sample"] for s in samples for g in s["gpus"] if g["sample"]["index"] == 0]
    assert len(gpus) >= 5
    util = [g["utilization_gpu"] for g in gpus if g["utilization_gpu"] is not None]
    assert util and max(util) >= 50, util  # a matmul loop keeps the card busy
    assert max(g["memory_used"] or 0 for g in gpus) >= 2 * 2**30  # the 2 GiB held
    assert all(g["sm_clock_mhz"] and g["power_w"] for g in gpus[1:])


def test_top_once_names_the_card_in_80_columns(busy_gpu: subprocess.Popen[str]) -> None:
    from gpuprobe.platform.inventory import inventory

    name = inventory(frameworks="static").gpus[0].name
    r = _top("--once")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert name and any(name.replace("NVIDIA ", "") in line for line in lines), r.stdout
    assert max(len(line) for line in lines) <= 80, r.stdout
