"""``gpuprobe export``: scraped over HTTP on 127.0.0.1, dcgm-exporter's names and labels."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_helper import env, gpuprobe_argv, scrape
from replay_nvml import ReplayNvml, no_nvml

from gpuprobe.tools.monitor.exporter import serve

GRAFANA = Path(__file__).resolve().parents[3] / "contrib" / "grafana" / "gpuprobe.json"


def test_gpu_metrics_have_dcgm_names_and_labels() -> None:
    replay = ReplayNvml("healthy.jsonl")
    replay.live_pid = os.getpid()
    server, sampler, collector = serve("127.0.0.1", 0, hz=2.0, nvml=replay)
    try:
        m = scrape(server.server_port)
    finally:
        server.shutdown()
        sampler.close()
    (util,) = m["DCGM_FI_DEV_GPU_UTIL"]
    assert util.labels["gpu"] == "0"
    assert util.labels["UUID"] == "GPU-5a1e0000-0000-4000-8000-00000000a500"
    assert util.labels["modelName"] == "NVIDIA RTX A5000"
    assert util.labels["Hostname"] == socket.gethostname()
    assert util.labels["device"] == "nvidia0"
    assert 92 <= util.value <= 99
    (fb,) = m["DCGM_FI_DEV_FB_USED"]
    assert fb.value == 18 * 1024  # MiB, as dcgm-exporter
    assert m["DCGM_FI_DEV_FB_FREE"][0].value == 6 * 1024
    for name in (
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DCGM_FI_DEV_PCIE_LINK_GEN",
        "gpuprobe_gpu_process_memory_bytes",
    ):
        assert name in m, name
    assert m["DCGM_FI_DEV_COUNT"][0].value == 1
    (proc,) = m["gpuprobe_gpu_process_memory_bytes"]
    assert proc.labels["pid"] == str(os.getpid()) and proc.value == 18 * 2**30 - 300 * 2**20
    assert proc.labels["command"] == psutil.Process().name()  # a neighbour is told apart
    cores = m["gpuprobe_host_cpu_utilization_percent"]
    assert len(cores) == len({s.labels["cpu"] for s in cores}) >= 1
    assert m["gpuprobe_host_memory_available_bytes"][0].value > 0
    assert collector.scrapes == 1


def test_host_only_exporter() -> None:
    server, sampler, _ = serve("127.0.0.1", 0, nvml=no_nvml)
    try:
        m = scrape(server.server_port)
    finally:
        server.shutdown()
        sampler.close()
    assert "DCGM_FI_DEV_GPU_UTIL" not in m
    assert m["gpuprobe_nvml_up"][0].value == 0
    assert m["gpuprobe_nvml_up"][0].labels["status"] == "no-library"
    assert m["gpuprobe_host_cpu_utilization_mean_percent"][0].value >= 0


def _exporter(*flags: str) -> Any:
    import subprocess

    argv = gpuprobe_argv("export", "--port", "0", *flags)
    return subprocess.Popen(
        argv, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_cli_serves_until_terminated() -> None:

    p = _exporter("--json")
    try:
        assert p.stdout is not None
        info = json.loads(p.stdout.readline())
        assert info["url"].startswith("http://127.0.0.1:")
        m = scrape(info["port"])
        assert "gpuprobe_host_memory_used_bytes" in m
        p.terminate()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()


def test_the_banner_wraps_at_80_columns() -> None:
    """Issue 41: the exporter's banner was one 173-character line."""

    p = _exporter()
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline().rstrip("\n")]
        while not lines[-1].endswith("Ctrl-C stops"):
            lines.append(p.stdout.readline().rstrip("\n"))
        p.terminate()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert lines[0].startswith("gpuprobe export: serving http://127.0.0.1:")
    assert all(len(line) <= 80 for line in lines), lines


def test_grafana_dashboard_uses_exported_metrics() -> None:
    dash = json.loads(GRAFANA.read_text())
    exprs = [t["expr"] for panel in dash["panels"] for t in panel.get("targets", [])]
    assert exprs
    names = {n for e in exprs for n in re.findall(r"\b(DCGM_FI_\w+|gpuprobe_\w+)\b", e)}
    replay = ReplayNvml("throttled.jsonl")
    replay.live_pid = os.getpid()
    server, sampler, _ = serve("127.0.0.1", 0, nvml=replay)
    try:
        exported = set(scrape(server.server_port))
    finally:
        server.shutdown()
        sampler.close()
    missing = names - exported
    assert not missing, f"the dashboard queries metrics the exporter lacks: {missing}"


@pytest.mark.gpu
def test_real_gpu_is_exported() -> None:
    server, sampler, _ = serve("127.0.0.1", 0)
    try:
        m = scrape(server.server_port)
    finally:
        server.shutdown()
        sampler.close()
    assert len(m["DCGM_FI_DEV_GPU_UTIL"]) == len(sampler.gpus) >= 1
    assert all(s.labels["UUID"].startswith(("GPU-", "MIG-")) for s in m["DCGM_FI_DEV_FB_USED"])


def _scrape_once(nvml: Any) -> dict[str, list]:
    server, sampler, _ = serve("127.0.0.1", 0, hz=2.0, nvml=nvml)
    try:
        return scrape(server.server_port)
    finally:
        server.shutdown()
        sampler.close()


def test_the_gpus_energy_counter_is_served_in_joules(fake_nvml: Any) -> None:
    """``gpuprobe_gpu_energy_joules_total``: NVML's counter (mJ) as a Prometheus counter in J,
    through the real nvidia-ml-py over the fake library; none for a card without it."""
    from gpuprobe.platform.hardware.nvml import nvml_session

    fake_nvml("h200.json", energy_mj={0: [7_250_500]})
    (j,) = _scrape_once(nvml_session)["gpuprobe_gpu_energy_joules_total"]
    assert j.value == 7250.5 and j.labels["modelName"] == "NVIDIA H200"
    fake_nvml("h200.json")  # the same card, no counter
    m = _scrape_once(nvml_session)
    assert "DCGM_FI_DEV_POWER_USAGE" in m and "gpuprobe_gpu_energy_joules_total" not in m
