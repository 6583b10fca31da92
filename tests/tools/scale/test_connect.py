"""--scheduler at something that is not a live Dask scheduler (issue 28): a listener that accepts
and never answers, a web server, a server that answers HTTP at once (read by Dask as a 3 EiB
message), ``notaurl::::``, ``http://…``. Each is one line and exit 2 within --connect-timeout,
with no traceback from ``Client.__del__``. Real sockets on 127.0.0.1; a 2 s timeout keeps CI fast.
"""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from gpuprobe.core.errors import UsageError
from gpuprobe.platform.cluster import CONNECT_TIMEOUT_S, connect_client, identify

ARGS = ["scale", "lstsq", "--rows", "200", "--cols", "3", "--workers", "1", "--threads"]


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


@pytest.fixture
def silent() -> Iterator[str]:
    """A listener that accepts and never says a word."""
    s = _listener()
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                held.append(s.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield f"tcp://127.0.0.1:{s.getsockname()[1]}"
    stop.set()
    s.close()
    for c in held:
        c.close()


@pytest.fixture
def talker() -> Iterator[str]:
    """A server that answers every connection with an HTTP error at once: Dask reads its first
    8 bytes, b'HTTP/1.1', as a message of 3.5e18 bytes."""
    s = _listener()

    def serve() -> None:
        while True:
            try:
                c = s.accept()[0]
            except OSError:
                return
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"tcp://127.0.0.1:{s.getsockname()[1]}"
    s.close()


@pytest.fixture
def web() -> Iterator[int]:
    """A tiny HTTP server (the standard library's), its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _cli(address: str, timeout: str = "2") -> str:
    """Run the command in its own interpreter (Client.__del__ speaks at exit); its one line."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuprobe",
            *ARGS,
            "--scheduler",
            address,
            "--connect-timeout",
            timeout,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpuprobe: --scheduler {address}: ")
    return lines[0]


def test_a_listener_that_never_answers(silent: str) -> None:
    line = _cli(silent)
    assert "no answer as a Dask scheduler within 2 s (--connect-timeout)" in line


def test_a_web_server_on_a_tcp_address(web: int) -> None:
    line = _cli(f"tcp://127.0.0.1:{web}")
    # it waits for a request line, or answers 400 to the handshake's bytes: either is one line
    assert "within 2 s" in line or "not in Dask's protocol" in line


def test_a_server_answering_http_at_once_is_not_read_as_3_eib(talker: str) -> None:
    assert _cli(talker).endswith(
        ": something answered, but not in Dask's protocol (its reply read as a larger message "
        "than memory); start one with `dask scheduler` and `dask worker ADDRESS`, or leave "
        "--scheduler out"
    )


def test_not_an_address_and_a_web_address(web: int) -> None:
    line = _cli("notaurl::::")
    assert "not a Dask address (invalid address 'notaurl::::'" in line
    line = _cli(f"http://127.0.0.1:{web}")
    assert "a web address (a Dask dashboard?); give the scheduler's own address" in line


def test_the_default_and_the_flags_range() -> None:
    assert 0 < CONNECT_TIMEOUT_S <= 30  # the bound; Dask's own default is 30 s
    for bad in (0.0, -1.0, float("nan"), float("inf"), 1e20):
        with pytest.raises(UsageError, match="--connect-timeout"):
            identify("tcp://127.0.0.1:1", bad)


def test_a_scheduler_answers_and_a_worker_is_named(client) -> None:  # type: ignore[no-untyped-def]
    addr = client.scheduler.address
    assert identify(addr, 5)["type"] == "Scheduler"
    c = connect_client(addr, 5)
    try:
        assert c.scheduler_info(n_workers=-1)["workers"]
    finally:
        c.close()
    worker = next(iter(client.scheduler_info(n_workers=-1)["workers"]))
    with pytest.raises(UsageError, match="a Dask Worker, not a Dask scheduler"):
        identify(worker, 5)


def test_connect_timeout_needs_a_scheduler(capsys) -> None:  # type: ignore[no-untyped-def]
    import gpuprobe.cli as cli

    assert cli.main([*ARGS, "--connect-timeout", "2"]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "gpuprobe: --connect-timeout is for --scheduler ADDRESS: give --scheduler too"
    )


def test_an_escape_in_the_address_is_not_echoed(capsys) -> None:  # type: ignore[no-untyped-def]
    import gpuprobe.cli as cli

    rc = cli.main(
        [*ARGS, "--scheduler", "tcp://127.0.0.1:1\x1b]0;owned\x07", "--connect-timeout", "2"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "\x1b" not in err and "\x07" not in err
    assert err.startswith("gpuprobe: --scheduler tcp://127.0.0.1:1: not a Dask address (")
