"""The exporter under load, before (prometheus-client's start_http_server: a thread per
connection, no timeout, backlog 5) and after (gpuprobe's MetricsServer: 4 worker threads, idle
connections timed out, backlog 128), side by side in one run, on loopback only (127.0.0.1).

For each server: open IDLE connections that send nothing, then SCRAPERS threads each scrape
/metrics ROUNDS times; report p50/p99/max scrape latency and the process's thread count while
the idle connections are open. Bounded loops; writes benchmarks/results/exporter_load.md.

    python benchmarks/exporter_load.py [--idle 300] [--scrapers 16] [--rounds 30]
"""

from __future__ import annotations

import argparse
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
    results = {}
    try:
        for name, start in (
            ("before: start_http_server", _before),
            ("after: MetricsServer", _after),
        ):
            server, port = start(registry)
            try:
                results[name] = _load(port, a.idle, a.scrapers, a.rounds)
            finally:
                server.shutdown()
                server.server_close()
            time.sleep(1.0)  # threads of the first server wind down
    finally:
        sampler.close()
    b, f = results["before: start_http_server"], results["after: MetricsServer"]
    rows = [
        "# Exporter under load: before and after",
        "",
        f"`python benchmarks/exporter_load.py --idle {a.idle} --scrapers {a.scrapers} "
        f"--rounds {a.rounds}`, loopback (127.0.0.1), one process, no GPU (host metrics only); "
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
        f"p99 after/before: {f['p99_ms'] / b['p99_ms']:.2f}; server threads after/before: "
        f"{f['server_threads']}/{b['server_threads']}.",
    ]
    text = "\n".join(rows) + "\n"
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
