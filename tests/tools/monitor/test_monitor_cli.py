"""The command lines: ``run --json``, ``plot``, ``top`` (host alone here, replayed GPUs)."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from pathlib import Path

from cli_helper import run_gpuprobe
from replay_nvml import DATA, ReplayNvml, no_nvml
from rich.console import Console

from gpuprobe.tools.monitor.live import TopView
from gpuprobe.tools.monitor.show.top import bar, run_top, sparkline
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"


def test_run_json_and_files(tmp_path: Path) -> None:
    r = run_gpuprobe(
        "run",
        "--hz",
        "10",
        "--json",
        "--out",
        str(tmp_path),
        "--",
        sys.executable,
        "-c",
        BUSY + "print('hello from CMD')",
    )
    assert r.returncode == 0, r.stderr
    # stdout is the JSON alone; the command's own output went to stderr, untouched
    assert r.stderr.splitlines()[0] == "hello from CMD"
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 0 and doc["complete"] is True and doc["samples"] >= 5
    assert {Path(f).name for f in doc["files"]} == {
        TIMELINE_NAME,
        "report.html",
        "report.png",
        "summary.json",
    }
    ids = [f["id"] for f in doc["findings"]]
    assert "monitor-cpu-usage" in ids and "monitor-sampler-cost" in ids
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["samples"] == doc["samples"]
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_a_saved_timeline(tmp_path: Path) -> None:
    shutil.copy(DATA / "throttled.jsonl", tmp_path / TIMELINE_NAME)
    r = run_gpuprobe("plot", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "report.png").exists() and (tmp_path / "report.html").exists()
    assert "sw_thermal_slowdown" in r.stdout
    for suffix in (".svg", ".pdf", ".html"):
        out = tmp_path / f"again{suffix}"
        r = run_gpuprobe("plot", str(tmp_path / TIMELINE_NAME), "--out", str(out))
        assert r.returncode == 0 and out.stat().st_size > 1000, r.stderr
    r = run_gpuprobe("plot", str(tmp_path), "--out", str(tmp_path / "x.txt"))
    assert r.returncode == 2 and "give a file ending in" in r.stderr


def test_plot_a_truncated_timeline_says_what_was_dropped(tmp_path: Path) -> None:
    data = (DATA / "healthy.jsonl").read_bytes()
    lines = data.split(b"\n")
    (tmp_path / TIMELINE_NAME).write_bytes(b"\n".join(lines[:21]) + b"\n" + lines[21][:50])
    r = run_gpuprobe("plot", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["samples"] == 20 and doc["dropped_lines"] == 1 and doc["dropped_bytes"] == 50
    assert "last line cut short (50 bytes)" in doc["notes"][0]


def test_plot_bad_input(tmp_path: Path) -> None:
    r = run_gpuprobe("plot", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "no timeline at" in r.stderr
    (tmp_path / "x.jsonl").write_text("not json\n")
    r = run_gpuprobe("plot", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and "not a gpuprobe timeline" in r.stderr
    assert "Traceback" not in r.stderr


def test_top_once_host_only() -> None:
    r = run_gpuprobe("top", "--once")
    assert r.returncode == 0, r.stderr
    assert "gpuprobe top" in r.stdout and "Host" in r.stdout
    if "No GPU" in r.stdout:  # this machine and CI
        text = " ".join(r.stdout.split())  # wrapped at 80 columns
        assert "Showing the host and the processes using its CPU" in text
        assert "busiest processes on the CPU" in text and "PID" in text
    r = run_gpuprobe("top", "--json", "--interval", "0.1", "--iterations", "2")
    samples = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(samples) == 2 and samples[1]["t"] > samples[0]["t"]
    assert len(samples[1]["host"]["cpu_percent"]) == os.cpu_count()
    r = run_gpuprobe("top", "--interval", "0")
    assert r.returncode == 2 and "--interval" in r.stderr


def test_top_with_replayed_gpu_shows_bars_and_processes() -> None:
    replay = ReplayNvml("e9_starved.jsonl")
    replay.live_pid = os.getpid()
    buf = io.StringIO()
    view = run_top(
        interval=0.05,
        iterations=3,
        nvml=replay,
        console=Console(file=buf, width=140, color_system=None),
    )
    out = buf.getvalue()
    assert out.count("GPU 0  NVIDIA RTX A5000") == 3
    assert "3.0/24.0 GiB" in out and "PCIe gen4 x16" in out
    assert str(os.getpid()) in out  # this process, on the replayed GPU
    assert len(view.samples) == 3


def test_top_host_alone_without_driver() -> None:
    buf = io.StringIO()
    run_top(
        interval=0.05,
        iterations=1,
        nvml=no_nvml,
        console=Console(file=buf, width=120, color_system=None),
    )
    assert "No GPU: NVML Shared Library Not Found (test: no driver)" in buf.getvalue()


def test_bars_and_sparklines() -> None:
    assert sparkline([0, 50, 100, None]) == "▁▅█ "
    assert bar(50, width=10).plain == "[█████·····]  50.0%"
    assert bar(None, width=4).plain.endswith("n/a")
    assert TopView.__name__ == "TopView"
