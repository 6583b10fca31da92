"""``gpuprobe pack -n 1,2,3,4 -- CMD ARGS...``: run N copies of a command at once for each N,
record the machine, and say how many to run together (E9: docs/experiments.md#e9)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add ``gpuprobe pack``."""
    from gpuprobe.cli._args import HZ_HELP, sample_rate

    p = sub.add_parser(
        "pack",
        help="how many copies of a job to run at once on one GPU (or CPU)",
        description="For each N, start N copies of CMD (an argument list, no shell) at once, "
        "record the host and GPUs, and report each copy's wall time, the total throughput "
        "(jobs/h, or the rates CMD prints with --rate) and the slowdown per copy; recommend an "
        "N, and say whether MIG or MPS would help.",
    )
    p.add_argument(
        "-n",
        dest="counts",
        default="1,2,3,4",
        metavar="N,N,...",
        help="numbers of copies to run at once (default 1,2,3,4; ranges like 1-4 work)",
    )
    p.add_argument(
        "--rate",
        metavar="REGEX",
        help="read each copy's rate from its output: the first group of the last match, "
        "e.g. '([0-9.]+) samples/s'; the total is their sum",
    )
    p.add_argument("--hz", type=sample_rate, default=2.0, help=f"{HZ_HELP} (default 2)")
    p.add_argument(
        "--kill-leftovers",
        action="store_true",
        help="end what the copies left running (background jobs, setsid) before the next "
        "level: SIGTERM, then SIGKILL after 10 s; without it they are named in a finding",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the levels; exit 1 when a copy failed."""
    from gpuprobe.api import pack, parse_counts
    from gpuprobe.cli._common import print_json, progress
    from gpuprobe.core.errors import UsageError

    counts = parse_counts(args.counts)  # bad -n fails before anything runs
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given: gpuprobe pack -n 1,2,3,4 -- CMD [ARGS...]")
    with progress(not args.json, "gpuprobe pack") as update:
        report = pack(
            cmd,
            counts,
            rate=args.rate,
            hz=args.hz,
            on_level=lambda lv: update(f"N={lv.n}: {lv.mean_copy_s:.2f} s per copy"),
            kill_leftovers=args.kill_leftovers,
        )
    code = 1 if any(lv.failed for lv in report.levels) else 0
    if args.json:
        print_json(report.to_dict(), findings=report.findings, exit_code=code)
    else:
        print(report)
    return code
