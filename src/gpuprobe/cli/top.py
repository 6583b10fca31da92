"""``gpuprobe top``: a live view of every GPU, the processes on it, and the host's cores."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add ``gpuprobe top``."""
    p = sub.add_parser(
        "top",
        help="live view of every GPU, its processes and the host's cores",
        description="A live terminal view: per-GPU utilization and memory bars with history, "
        "power, clocks and throttling, the processes on each GPU, and every host core. "
        "On a machine with no GPU it shows the host and the busiest processes on the CPU. "
        "q (or Ctrl-C) quits.",
    )
    p.add_argument(
        "--interval", type=float, default=1.0, help="seconds between refreshes (0.05-10, default 1)"
    )
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.add_argument("--iterations", type=int, metavar="N", help="print N frames and exit")
    p.add_argument("--pcie", action="store_true", help="also read PCIe rx/tx (20 ms per GPU)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the samples as JSON lines instead of the view (implies --once "
        "unless --iterations is given)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Show the view; 0 on a normal exit (Ctrl-C included)."""
    from rich.console import Console

    from gpuprobe.api import top
    from gpuprobe.core.errors import UsageError

    if not 0.05 <= args.interval <= 10:
        raise UsageError(f"--interval must be between 0.05 and 10 seconds, not {args.interval}")
    if args.iterations is not None and args.iterations < 1:
        raise UsageError("--iterations must be at least 1")
    iterations = 1 if args.once else args.iterations
    if args.json:
        iterations = iterations or 1
        null = Console(file=open("/dev/null", "w"))  # noqa: SIM115
        top(
            interval=args.interval,
            iterations=iterations,
            console=null,
            sink=lambda s: print(json.dumps({"type": "sample", **s.to_dict()}), flush=True),
            pcie_throughput=args.pcie,
        )
        return 0
    try:
        top(interval=args.interval, iterations=iterations, pcie_throughput=args.pcie)
    except KeyboardInterrupt:
        return 0
    return 0
