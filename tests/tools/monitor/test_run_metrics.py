"""``gpuprobe run --serve``: the run's own /metrics, its processes' steps and joules a step
(issue 43), scraped over HTTP as Prometheus would."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from cli_helper import env, gpuprobe_argv, run_gpuprobe, scrape, wait_for
from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuprobe.core.errors import UsageError
from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.tools.monitor.records import GpuProcSample, GpuTick, Sample
from gpuprobe.tools.monitor.run_metrics import STEP_BUCKETS, RunMetrics, RunServer, parse_listen

T0 = 1_000.0


def _families(collector) -> dict[str, list]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _sample(i: int, *, energy_mj=None, power_w=None, pids=(7,)) -> Sample:
    t = T0 + 0.5 * i
    g = GpuSample(index=0, time=t, power_w=power_w, energy_mj=energy_mj)
    return Sample(t=t, gpus=(GpuTick(g, tuple(GpuProcSample(pid=p) for p in pids)),))


def test_steps_are_a_histogram_and_joules_a_step_come_from_the_gpus_counter():
    # 300 W on the counter (150 J a sample at 2 Hz); pid 7 on the card steps every 0.125 s,
    # pid 8 (no GPU) every 0.02 s
    ends7 = [T0 + 1.0 + 0.125 * k for k in range(101)]
    ends8 = [T0 + 1.0 + 0.02 * k for k in range(11)]
    steps = [(7, "pid 7 (train.py)", "optimizer", ends7[:51])]
    m = RunMetrics(lambda: steps, hostname="h")
    for i in range(30):
        m.update(_sample(i, energy_mj=7_000_000 + 150_000 * i))
    first = _families(m)
    (count,) = first["gpuprobe_steps_total"]
    assert count.value == 50 and count.labels == {
        "Hostname": "h",
        "pid": "7",
        "command": "pid 7 (train.py)",
    }
    (j,) = first["gpuprobe_step_joules"]
    assert j.value == pytest.approx(37.5) and j.labels["method"] == "counter"  # 300 W × 0.125 s
    # the file grows: only the new ends are added; a second process with no GPU has no joules
    steps[:] = [(7, "pid 7 (train.py)", "optimizer", ends7), (8, "pid 8 (x.py)", None, ends8)]
    m2 = _families(m)
    buckets = {
        (s.labels["pid"], s.labels["le"]): s.value for s in m2["gpuprobe_step_seconds_bucket"]
    }
    assert buckets["7", "0.1"] == 0 and buckets["7", "0.25"] == buckets["7", "+Inf"] == 100
    assert buckets["8", "0.01"] == 0 and buckets["8", "0.025"] == 10
    sums = {s.labels["pid"]: s.value for s in m2["gpuprobe_step_seconds_sum"]}
    assert sums["7"] == pytest.approx(12.5) and sums["8"] == pytest.approx(0.2)
    assert [s.labels["pid"] for s in m2["gpuprobe_step_joules"]] == ["7"]
    last = {s.labels["pid"]: s.value for s in m2["gpuprobe_step_last_seconds"]}
    assert last["8"] == pytest.approx(0.02)
    assert (
        len({s.labels["le"] for s in m2["gpuprobe_step_seconds_bucket"]}) == len(STEP_BUCKETS) + 1
    )


def test_a_counter_that_wraps_is_skipped_and_a_card_without_one_is_power_times_time():
    ends = [T0 + 1.0 + 0.125 * k for k in range(101)]
    steps = [(7, "job", "optimizer", ends)]
    wrapped = RunMetrics(lambda: steps)
    for i in range(30):  # the counter falls to near 0 at sample 10 (a wrap, a driver reload)
        wrapped.update(
            _sample(i, energy_mj=(150_000 * (i - 10) if i >= 10 else 2**32 + 150_000 * i))
        )
    (j,) = _families(wrapped)["gpuprobe_step_joules"]
    # the fall's interval (0.5 s) is skipped: 300 W over 12 of the steps' 12.5 s, 100 steps
    assert j.value == pytest.approx(300.0 * 12.0 / 100)
    plain = RunMetrics(lambda: steps)
    for i in range(30):
        plain.update(_sample(i, power_w=150.0))
    (p,) = _families(plain)["gpuprobe_step_joules"]
    assert p.value == pytest.approx(18.75) and p.labels["method"] == "power × time"


def test_a_reused_pid_starts_its_steps_again():
    steps = [(7, "a", None, [T0, T0 + 1, T0 + 2, T0 + 3])]
    m = RunMetrics(lambda: steps)
    assert _families(m)["gpuprobe_steps_total"][0].value == 3
    steps[:] = [(7, "b", None, [T0 + 10, T0 + 10.5])]
    (count,) = _families(m)["gpuprobe_steps_total"]
    assert count.value == 1 and count.labels["command"] == "b"


@pytest.mark.parametrize(
    ("value", "want"),
    [("9400", ("127.0.0.1", 9400)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:80", ("::1", 80))],
)
def test_listen_addresses(value, want):
    assert parse_listen(value) == want


@pytest.mark.parametrize("value", ["", "x", "1:70000", "host:", "-1"])
def test_bad_listen_addresses_say_what_to_give(value):
    with pytest.raises(ValueError, match="give PORT or HOST:PORT"):
        parse_listen(value)


def test_a_taken_port_is_refused_before_anything_runs():
    first = RunServer("127.0.0.1", 0, list)
    try:
        with pytest.raises(UsageError, match=str(first.server.server_port)):
            RunServer("127.0.0.1", first.server.server_port, list)
    finally:
        first.close()
        first.close()  # idempotent


JOB = """
import os, sys, time, torch
m = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(8, 16)
deadline = time.monotonic() + 90
while not os.path.exists("stop") and time.monotonic() < deadline:
    m(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.01)
"""


@pytest.mark.slow
def test_run_serve_scraped_while_a_real_job_steps(tmp_path: Path):
    pytest.importorskip("torch")
    (tmp_path / "job.py").write_text(JOB)
    out = tmp_path / "r"
    p = subprocess.Popen(
        gpuprobe_argv("run", "--serve", "0", "--json", "--out", str(out), "--", sys.executable, "job.py"),
        cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert p.stderr is not None
        line = p.stderr.readline()
        found = re.search(r"metrics at (http://\S+/metrics)", line)
        assert found, line
        url = found.group(1)
        seen: dict[str, list] = {}

        def stepped() -> bool:
            seen.update(scrape(url))
            return (
                bool(seen.get("gpuprobe_steps_total")) and seen["gpuprobe_steps_total"][0].value > 5
            )

        wait_for(stepped, timeout=60, what="the job's steps in /metrics")
        (count,) = seen["gpuprobe_steps_total"]
        assert count.labels["command"].endswith("(job.py)") and int(count.labels["pid"]) > 0
        (mean,) = seen["gpuprobe_step_seconds_sum"]
        assert 0.008 <= mean.value / count.value < 1.0  # about the 10 ms sleep, and more
        assert "gpuprobe_host_cpu_utilization_mean_percent" in seen  # the sampler's series too
    finally:
        (tmp_path / "stop").touch()
        stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr[-2000:]
    doc = json.loads(stdout)
    (st,) = doc["steps"]
    assert st["steps"] >= count.value  # what was served was recorded, and the rest
    with pytest.raises(OSError):  # the server went with the run
        urllib.request.urlopen(url, timeout=5)


def test_run_serve_refuses_a_bad_address_and_no_hook_in_one_line(tmp_path: Path):
    r = run_gpuprobe("run", "--serve", "nope", "--out", str(tmp_path / "r"), "--", "true")
    assert r.returncode == 2 and "give PORT or HOST:PORT" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
    r = run_gpuprobe("run", "--serve", "0", "--no-hook", "--", "true")
    assert r.returncode == 2 and r.stderr.strip().endswith("leave out --no-hook")
    busy = RunServer("127.0.0.1", 0, list)
    try:
        r = run_gpuprobe(
            "run",
            "--serve",
            str(busy.server.server_port),
            "--out",
            str(tmp_path / "b"),
            "--",
            "true",
        )
    finally:
        busy.close()
    assert r.returncode == 2 and "in use" in r.stderr and not (tmp_path / "b").exists()
