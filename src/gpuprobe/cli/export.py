"""``gpuprobe export``: a Prometheus exporter of every GPU (dcgm-exporter's metric names) and
the host."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add ``gpuprobe export``."""
    from gpuprobe.cli._args import HZ_HELP, sample_rate

    p = sub.add_parser(
        "export",
        help="serve GPU and host metrics to Prometheus (dcgm-exporter names)",
        description="Serve /metrics for Prometheus: GPU metrics named as dcgm-exporter names "
        "them (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...) with its labels, plus host "
        "metrics (gpuprobe_host_*). A Grafana dashboard is in contrib/grafana/gpuprobe.json. "
        "Listens on 127.0.0.1 unless told otherwise.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        default=19400,  # monitor.exporter.DEFAULT_PORT (not imported: --help stays fast)
        help="port (default 19400, beside dcgm-exporter's 9400; 0 picks a free one)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header is NAME (a DNS name Prometheus scrapes "
        "this machine by); others than this machine's names and addresses are refused (403)",
    )
    p.add_argument("--hz", type=sample_rate, default=1.0, help=f"{HZ_HELP} (default 1)")
    p.add_argument("--pcie", action="store_true", help="also read PCIe rx/tx (20 ms per GPU)")
    p.add_argument(
        "--json", action="store_true", help="print where it listens as one JSON line, then serve"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM; 0 then."""
    from gpuprobe.api import serve_metrics
    from gpuprobe.core.errors import UsageError
    from gpuprobe.core.text import url_host

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0-65535, not {args.port}")
    server, sampler, collector = serve_metrics(
        args.host, args.port, hz=args.hz, pcie_throughput=args.pcie,
        allow_hosts=tuple(args.allow_host),
    )  # fmt: skip
    host = args.host.strip()
    port = server.server_port
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    if args.json:
        print(
            json.dumps(
                {
                    "url": f"http://{url_host(host)}:{port}/metrics",
                    "port": port,
                    "gpus": len(sampler.gpus),
                    "driver": sampler.driver.status,
                }
            ),
            flush=True,
        )
    else:
        gpus = (
            f"{len(sampler.gpus)} GPU(s)"
            if sampler.gpus
            else (f"no GPU ({sampler.driver.error or sampler.driver.status}); host metrics only")
        )
        from gpuprobe.core.wrap import hang

        banner = (
            f"gpuprobe export: serving http://{url_host(host)}:{port}/metrics, {gpus}, "
            f"sampling at {sampler.hz:g} Hz; Ctrl-C stops"
        )
        print("\n".join(hang(banner)), flush=True)
    said: set[int] = set()
    try:
        while not stop.wait(0.5):
            said |= _say_unreadable(collector, said)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        sampler.close()
    return 0


def _say_unreadable(collector: Any, said: set[int]) -> set[int]:
    """One line on stderr for each GPU that NVML cannot read any more (not in ``said``):
    its series are gone from /metrics. The GPUs said now."""
    from gpuprobe.core.wrap import hang

    new = collector.unreadable_notes(said)
    for note in new.values():
        print("\n".join(hang(note)), file=sys.stderr, flush=True)
    return set(new)
