"""``gpuprobe export`` on a shared or hostile network (issue 40 group 3): an empty ``--host`` is
refused instead of listening on every interface; a request whose Host header names another
machine (a DNS-rebinding page) is refused; a GPU that NVML loses is said, in the metrics and on
stderr, instead of its series vanishing under ``gpuprobe_nvml_up{status="ok"} 1``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helper import env, gpuprobe_argv, run_gpuprobe
from prometheus_client.parser import text_string_to_metric_families

from gpuprobe.core.errors import UsageError
from gpuprobe.tools.monitor.exporter import serve
from gpuprobe.tools.monitor.hosts import request_host

TESTS = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("host", ["", "   "])
def test_an_empty_host_is_one_line_and_listens_nowhere(host: str) -> None:
    out = run_gpuprobe("export", "--host", host, "--port", "0", timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"gpuprobe: --host {host!r}: an empty address listens on every")
    assert out.stdout == ""  # no "serving http://:19400/metrics"
    with pytest.raises(UsageError, match="empty address"):
        serve(host, 0)


def _get(port: int, headers: list[str]) -> tuple[int, bytes]:
    """(status, body) of a raw GET /metrics with exactly these header lines."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(("GET /metrics HTTP/1.1\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
                   ).encode())  # fmt: skip
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_only_this_machines_names_are_served() -> None:
    from replay_nvml import no_nvml

    server, sampler, _ = serve("127.0.0.1", 0, nvml=no_nvml, allow_hosts=("prom.example",))
    port = server.server_port
    try:
        for ok in ("127.0.0.1", f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST.",
                   f"{socket.gethostname()}:{port}", "prom.example", "[::1]:1"):  # fmt: skip
            status, body = _get(port, [f"Host: {ok}"])
            assert status == 200 and b"gpuprobe_nvml_up" in body, ok
        assert _get(port, [])[0] == 200  # HTTP/1.0 style: no Host at all (no browser sends that)
        # a page at attacker.example whose DNS now points at 127.0.0.1 gets nothing
        for bad in (f"attacker.example:{port}", "127.0.0.1.attacker.example",
                    f"{socket.gethostname()}.attacker.example"):  # fmt: skip
            status, body = _get(port, [f"Host: {bad}"])
            assert status == 403, bad
            assert b"Host header does not name this machine" in body
            assert socket.gethostname().encode() not in body and b"gpuprobe_" not in body
        status, body = _get(port, ["Host: 127.0.0.1", "Host: attacker.example"])
        assert status == 400 and body == b""
        assert server.refused_hosts == 4
    finally:
        server.shutdown()
        sampler.close()


def test_the_host_header_is_read_as_a_browser_sends_it() -> None:
    assert request_host(b"GET / HTTP/1.1\r\nhOsT:  Example.COM.:80\r\n\r\n") == "example.com"
    assert request_host(b"GET / HTTP/1.1\r\nHost: [FE80::1]:9\r\n\r\n") == "fe80::1"
    assert request_host(b"GET / HTTP/1.1\r\nX-Host: a\r\n\r\nHost: b") is None
    assert request_host(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n") is False


def _scrape(port: int) -> dict[str, list[Any]]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list[Any]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_a_gpu_lost_while_serving_is_said(fake_nvml: Any) -> None:
    lib = fake_nvml("h200.json")
    server, sampler, collector = serve("127.0.0.1", 0, hz=20.0)
    try:
        m = _scrape(server.server_port)
        assert [(s.labels["status"], s.value) for s in m["gpuprobe_nvml_up"]] == [("ok", 1.0)]
        assert [(s.labels["error"], s.value) for s in m["gpuprobe_gpu_up"]] == [("", 1.0)]
        assert "DCGM_FI_DEV_GPU_UTIL" in m and collector.unreadable_notes() == {}
        lib.errors["nvmlDeviceGetUtilizationRates"] = 15  # NVML_ERROR_GPU_IS_LOST from now on
        deadline = time.monotonic() + 30
        while not collector.gpu_errors() and time.monotonic() < deadline:
            time.sleep(0.05)  # the sampler's next tick meets the error
        time.sleep(0.2)  # and the tick after it is the one served
        m = _scrape(server.server_port)
        (note,) = collector.unreadable_notes().values()
        assert collector.unreadable_notes(said={0}) == {}
    finally:
        server.shutdown()
        sampler.close()
    assert [(s.labels["status"], s.value) for s in m["gpuprobe_nvml_up"]] == [("gpu-lost", 0.0)]
    (up,) = m["gpuprobe_gpu_up"]
    assert (up.labels["gpu"], up.labels["error"], up.value) == ("0", "NVMLError_GpuIsLost", 0.0)
    assert up.labels["UUID"].startswith("GPU-")  # which card, by the labels dashboards use
    assert "DCGM_FI_DEV_GPU_UTIL" not in m  # the values are gone: now that is said above
    assert note.startswith("gpuprobe export: GPU 0 is lost (NVMLError_GpuIsLost): its series")
    assert "gpuprobe_nvml_up status gpu-lost" in note and "Xid 79" in note


def test_the_command_says_a_lost_gpu_on_stderr(tmp_path: Path) -> None:
    """The real command, NVML answering GPU_IS_LOST for the card (the real pynvml over the fake
    library, installed in the child by a sitecustomize): one line on stderr, the exit code 0
    on SIGTERM."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "from fakes import nvml_lib\n"
        "from _support import snapshot_dict\n"
        "mod = nvml_lib.load_pynvml()\n"
        "lib = nvml_lib.FakeNvmlLibrary(snapshot_dict('h200.json'), "
        "errors={'nvmlDeviceGetHandleByIndex_v2': 15})\n"
        "nvml_lib.attach(mod, lib)\n"
        "sys.modules['pynvml'] = mod\n"
    )
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(site), e["PYTHONPATH"]])
    p = subprocess.Popen(gpuprobe_argv("export", "--port", "0", "--json"), env=e, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert p.stdout is not None and p.stderr is not None
        first = p.stdout.readline()
        assert '"gpus": 1' in first, first
        line = p.stderr.readline()
        p.terminate()
        assert p.wait(timeout=30) == 0
        rest = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert line.startswith("gpuprobe export: GPU 0 is lost (NVMLError_GpuIsLost)"), line
    assert "Traceback" not in rest and "is lost" not in rest, rest  # said once
    assert sys.executable  # the child is this interpreter (gpuprobe_argv)
