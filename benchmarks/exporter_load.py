"""The exporter under load, side by side in one run, on loopback only (127.0.0.1): prometheus-
client's start_http_server (a thread per connection, no timeout, backlog 5), gpuprobe's
MetricsServer as it was at commit BEFORE_COMMIT (4 worker threads that each read a request with a
5 s timeout per read), and MetricsServer now (one I/O thread reads every request without
blocking, a whole-request deadline; the 4 workers only build answers).

1. Idle: for each server open IDLE connections that send nothing, then SCRAPERS threads each
   scrape /metrics ROUNDS times; p50/p99/max scrape latency and the server's thread count.
2. Slow clients: for each server and 0, 4 and 200 clients that each send a request one byte a
   second (the issue's attack), SLOW_SCRAPES scrapes one after another while they trickle;
   each scrape's latency, or "stuck" when it got no answer within SCRAPE_CAP_S.

Bounded loops; writes benchmarks/results/exporter_load.md.

    python benchmarks/exporter_load.py [--idle 300] [--scrapers 16] [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuprobe.tools.monitor.exporter import GpuprobeCollector, MetricsServer  # noqa: E402
from gpuprobe.tools.monitor.sampler import Sampler  # noqa: E402

HOST = "127.0.0.1"  # loopback only
BEFORE_COMMIT = "c40af53"  # MetricsServer before the whole-request deadline (issue 28)
SLOW_COUNTS = (0, 4, 200)  # clients trickling a request, as in issue 28
SLOW_BYTE_S = 1.0  # s between two bytes of a slow client (the issue: one byte a second)
SLOW_SCRAPES = 5  # scrapes per configuration, one after another
SCRAPE_CAP_S = 10.0  # s a scrape may wait (Prometheus's default scrape_timeout) before "stuck"


def _registry() -> tuple[Any, Sampler]:
    from prometheus_client import CollectorRegistry

    sampler = Sampler(hz=1.0)
    sampler.open()
    collector = GpuprobeCollector(sampler)
    collector.update(sampler.take())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry, sampler


def _before(registry: Any) -> tuple[Any, int]:
    from prometheus_client import start_http_server

    result = start_http_server(0, addr=HOST, registry=registry)
    server = result[0] if isinstance(result, tuple) else result
    return server, server.server_port


def _after(registry: Any) -> tuple[Any, int]:
    server = MetricsServer(HOST, 0, registry)
    return server, server.server_port


def _previous(registry: Any) -> tuple[Any, int]:
    """MetricsServer as it was at BEFORE_COMMIT, loaded from git."""
    import subprocess
    import types

    path = "src/gpuprobe/tools/monitor/exporter.py"
    src = subprocess.run(
        ["git", "show", f"{BEFORE_COMMIT}:{path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    mod = types.ModuleType("exporter_before")
    exec(compile(src, f"{BEFORE_COMMIT}:{path}", "exec"), mod.__dict__)  # our own file, from git
    server = mod.MetricsServer(HOST, 0, registry)
    return server, server.server_port


def _slow(port: int, clients: int, scrapes: int) -> dict[str, Any]:
    """``clients`` connections each sending a request one byte every SLOW_BYTE_S for as long as
    this runs, and ``scrapes`` real scrapes meanwhile."""
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096  # never ends
    socks = [socket.create_connection((HOST, port), timeout=5) for _ in range(clients)]
    stop = threading.Event()
    cut = 0

    def trickle() -> None:
        nonlocal cut
        i = 0
        live = list(socks)
        while live and not stop.is_set():
            for s in list(live):
                try:
                    s.send(request[i : i + 1])
                except OSError:
                    live.remove(s)
                    cut += 1
            i += 1
            stop.wait(SLOW_BYTE_S)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    time.sleep(0.5)  # every slow client has sent its first byte (not a measurement)
    lat: list[float | None] = []
    for _ in range(scrapes):
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=SCRAPE_CAP_S) as r:
                ok = b"gpuprobe_host_cpu_utilization_percent" in r.read()
            lat.append(time.perf_counter() - t0 if ok else None)
        except OSError:
            lat.append(None)
    stop.set()
    t.join()
    for s in socks:
        s.close()
    done = sorted(x for x in lat if x is not None)
    return {
        "answered": len(done),
        "stuck": len(lat) - len(done),
        "p50_ms": 1000 * statistics.median(done) if done else None,
        "max_ms": 1000 * done[-1] if done else None,
    }


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _load(port: int, idle: int, scrapers: int, rounds: int) -> dict[str, Any]:
    base_threads = threading.active_count()
    socks = []
    refused = 0
    for _ in range(idle):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((HOST, port))
            socks.append(s)
        except OSError:
            refused += 1
            s.close()
    time.sleep(0.5)  # let the server take them in (not a measurement)
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    peak_threads = threading.active_count()

    def scrape() -> None:
        nonlocal errors
        for _ in range(rounds):
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as r:
                    r.read()
                dt = time.perf_counter() - t0
                with lock:
                    lat.append(dt)
            except OSError:
                with lock:
                    errors += 1

    threads = [threading.Thread(target=scrape) for _ in range(scrapers)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak_threads = max(peak_threads, threading.active_count())
        time.sleep(0.05)
    for t in threads:
        t.join()
    server_threads = peak_threads - base_threads - scrapers  # ours: the scraper threads
    for s in socks:
        s.close()
    lat.sort()
    return {
        "scrapes": len(lat),
        "errors": errors,
        "idle_open": len(socks),
        "idle_refused": refused,
        "p50_ms": 1000 * statistics.median(lat),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        "max_ms": 1000 * lat[-1],
        "server_threads": server_threads,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--scrapers", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "exporter_load.md"))
    a = ap.parse_args()
    registry, sampler = _registry()
    servers = (
        ("start_http_server", _before),
        (f"MetricsServer at {BEFORE_COMMIT}", _previous),
        ("MetricsServer now", _after),
    )
    results = {}
    slow: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        for name, start in servers:
            server, port = start(registry)
            try:
                results[name] = _load(port, a.idle, a.scrapers, a.rounds)
            finally:
                server.shutdown()
                server.server_close()
            time.sleep(1.0)  # threads of the first server wind down
        for name, start in servers:
            for n in SLOW_COUNTS:
                server, port = start(registry)
                try:
                    slow[name, n] = _slow(port, n, SLOW_SCRAPES)
                finally:
                    server.shutdown()
                    server.server_close()
                time.sleep(1.0)
    finally:
        sampler.close()
    b, f = results["start_http_server"], results["MetricsServer now"]
    rows = [
        "# Exporter under load: before and after",
        "",
        f"`python benchmarks/exporter_load.py --idle {a.idle} --scrapers {a.scrapers} "
        f"--rounds {a.rounds}`, loopback (127.0.0.1), one process, no GPU (host metrics only), "
        f"{os.cpu_count()} cores shared with other work.",
        "",
        "## Idle connections",
        "",
        f"{a.idle} connections opened and left idle, then {a.scrapers} threads scraping "
        f"/metrics {a.rounds} times each. Server threads: the process's peak thread count minus "
        "the baseline and the scraper threads.",
        "",
        "| server | scrapes | errors | idle open | p50 ms | p99 ms | max ms | server threads |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        rows.append(
            f"| {name} | {r['scrapes']} | {r['errors']} | {r['idle_open']} | {r['p50_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['server_threads']} |"
        )
    rows += [
        "",
        f"p99 now/start_http_server: {f['p99_ms'] / b['p99_ms']:.2f}; server threads now/"
        f"start_http_server: {f['server_threads']}/{b['server_threads']}.",
        "",
        "## Slow clients",
        "",
        f"0, 4 or 200 clients each sending a request one byte every {SLOW_BYTE_S:g} s, never "
        f"finishing it; meanwhile {SLOW_SCRAPES} scrapes one after another. Stuck: no answer "
        f"within {SCRAPE_CAP_S:g} s (Prometheus's default scrape_timeout).",
        "",
        "| server | slow clients | answered | stuck | p50 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for (name, n), r in slow.items():
        rows.append(
            f"| {name} | {n} | {r['answered']} | {r['stuck']} | {_ms(r['p50_ms'])} | "
            f"{_ms(r['max_ms'])} |"
        )
    now0, now200 = slow["MetricsServer now", 0], slow["MetricsServer now", 200]
    if now0["p50_ms"] and now200["max_ms"]:
        rows += [
            "",
            f"MetricsServer now, 200 slow clients against none: slowest scrape "
            f"{now200['max_ms']:.1f} ms against a median {now0['p50_ms']:.1f} ms "
            f"({now200['max_ms'] / now0['p50_ms']:.1f}×); issue 28 allows a delay of 1 s.",
        ]
    text = "\n".join(rows) + "\n"
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
