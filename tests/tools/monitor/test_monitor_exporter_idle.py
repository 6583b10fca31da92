"""The exporter's server under idle, stalled and trickling connections: no thread per
connection, each request given :data:`REQUEST_DEADLINE_S` to arrive whole however steadily it
trickles, real scrapes answered meanwhile; the default port is not dcgm-exporter's."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from cli_helper import env
from prometheus_client.parser import text_string_to_metric_families
from replay_nvml import no_nvml

import gpuprobe.tools.monitor.exporter as exporter
from gpuprobe.tools.monitor.exporter import MAX_REQUEST_BYTES, WORKERS, serve

TEST_TIMEOUT_S = 60.0  # a bound on a hang, not a measurement


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=TEST_TIMEOUT_S) as r:
        return r.read().decode()


def _closed_by_server(s: socket.socket) -> bool:
    s.settimeout(TEST_TIMEOUT_S)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_connections_take_no_thread_and_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exporter, "REQUEST_DEADLINE_S", 1.0)
    before = threading.active_count()
    server, sampler, _ = serve("127.0.0.1", 0, nvml=no_nvml)
    idle: list[socket.socket] = []
    try:
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
            idle.append(s)
        stalled = socket.create_connection(("127.0.0.1", server.server_port), timeout=10)
        stalled.sendall(b"GET /metr")  # a request that never ends
        for _ in range(20):
            assert "gpuprobe_host_cpu_utilization_mean_percent" in _scrape(server.server_port)
        # the sampler, the I/O thread and at most WORKERS workers: not one per connection
        assert threading.active_count() - before <= 2 + WORKERS
        for s in idle:  # closed by the server at the deadline: EOF, not a hang
            assert _closed_by_server(s)
        assert _closed_by_server(stalled)
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        sampler.close()


def test_trickling_clients_do_not_delay_a_scrape_and_are_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: WORKERS clients sending a byte at a time held every worker for as long as they
    kept sending (a per-read timeout only), and a real scrape waited for ever."""
    monkeypatch.setattr(exporter, "REQUEST_DEADLINE_S", 3.0)
    server, sampler, _ = serve("127.0.0.1", 0, nvml=no_nvml)
    port = server.server_port
    slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8 * WORKERS)]
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000  # never ends
    cut: set[int] = set()
    stop = threading.Event()

    def trickle() -> None:  # one byte to each client in turn, every 50 ms, until stopped
        i = 0
        while not stop.is_set() and len(cut) < len(slow):
            for k, s in enumerate(slow):
                if k not in cut:
                    try:
                        s.send(request[i : i + 1])
                    except OSError:  # the server closed it
                        cut.add(k)
            i = (i + 1) % len(request)
            stop.wait(0.05)  # the clients' pace, not a stand-in for work

    t = threading.Thread(target=trickle)
    try:
        for s in slow:  # every client has begun its request before the scrape
            s.send(request[:1])
        t.start()
        for _ in range(3):
            text = _scrape(port)  # answered while all of them still trickle
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            (mean,) = fams["gpuprobe_host_cpu_utilization_mean_percent"].samples
            assert 0 <= mean.value <= 100
            assert fams["DCGM_FI_DEV_COUNT"].samples[0].value == 0
        assert len(cut) < len(slow)  # the scrapes came while they were still sending
        deadline = time.monotonic() + TEST_TIMEOUT_S
        while len(cut) < len(slow) and time.monotonic() < deadline:
            stop.wait(0.1)  # waiting for the server's deadline to close them
        assert len(cut) == len(slow)  # each cut off at its deadline, though it kept sending
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        for s in slow:
            s.close()
        server.shutdown()
        sampler.close()


def test_an_oversized_request_is_refused() -> None:
    server, sampler, _ = serve("127.0.0.1", 0, nvml=no_nvml)
    try:
        s = socket.create_connection(("127.0.0.1", server.server_port), timeout=TEST_TIMEOUT_S)
        with s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (MAX_REQUEST_BYTES + 1))
            answer = s.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.0 431 ")
        assert "DCGM_FI_DEV_COUNT" in _scrape(server.server_port)  # still serving
    finally:
        server.shutdown()
        sampler.close()


# `gpuprobe export` with few descriptors (ulimit -n 128) and no deadline to free them
LOW_FD_BOOT = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
import gpuprobe.tools.monitor.exporter as exporter
exporter.REQUEST_DEADLINE_S = 600.0
from gpuprobe.cli import main
sys.exit(main(["export", "--port", "0", "--json"]))
"""


def test_a_scrape_gets_in_when_slow_clients_hold_every_descriptor() -> None:
    """Before: past the descriptor limit accept() failed, the scrape stayed in the backlog
    until a slow client gave up, and the I/O thread spun on the ready listener meanwhile."""
    p = subprocess.Popen(
        [sys.executable, "-c", LOW_FD_BOOT],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    slow: list[socket.socket] = []
    try:
        assert p.stdout is not None
        port = json.loads(p.stdout.readline())["port"]
        for _ in range(200):  # more than the server's 128 descriptors
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.send(b"G")
            slow.append(s)
        text = _scrape(port)
        assert "gpuprobe_host_cpu_utilization_mean_percent" in text
        assert _closed_by_server(slow[0])  # the oldest made room
    finally:
        for s in slow:
            s.close()
        p.terminate()
        try:
            p.wait(timeout=TEST_TIMEOUT_S)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_the_default_port_is_not_dcgm_exporters() -> None:
    import gpuprobe.cli as cli

    parser = cli.build_parser()
    args = parser.parse_args(["export"])
    assert args.port == exporter.DEFAULT_PORT == 19400 != 9400
