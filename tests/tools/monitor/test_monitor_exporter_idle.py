"""The exporter's server under idle and stalled connections: no thread per connection, idle
connections closed after a timeout, scrapes answered meanwhile; the default port is not
dcgm-exporter's."""

from __future__ import annotations

import socket
import threading
import urllib.request

import pytest
from replay_nvml import no_nvml

import gpuprobe.tools.monitor.exporter as exporter
from gpuprobe.tools.monitor.exporter import WORKERS, serve


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_idle_connections_take_no_thread_and_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exporter, "IDLE_TIMEOUT_S", 1.0)
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
        # the sampler, the accepting thread and at most WORKERS workers: not one per connection
        assert threading.active_count() - before <= 2 + WORKERS
        for s in idle:  # closed by the server after the idle timeout: EOF, not a hang
            s.settimeout(10)
            assert s.recv(1) == b""
        stalled.settimeout(30)
        assert stalled.recv(1) in (b"", b"H")  # timed out (or a 400 answer), never stuck
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        sampler.close()


def test_the_default_port_is_not_dcgm_exporters() -> None:
    import gpuprobe.cli as cli

    parser = cli.build_parser()
    args = parser.parse_args(["export"])
    assert args.port == exporter.DEFAULT_PORT == 19400 != 9400
