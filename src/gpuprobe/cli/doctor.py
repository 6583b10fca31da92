"""``gpuprobe doctor [--json] [--quick] [--from SNAPSHOT]``: does this GPU setup really work?"""

from __future__ import annotations

import argparse

from gpuprobe.cli._common import console, print_json, progress

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check driver, frameworks, each GPU and performance; verdicts with evidence and fix",
        description="Check the driver, CUDA environment variables, every framework's build, "
        "each GPU's health, and run real kernels on every visible GPU (on the CPU when there is "
        "none). Exit code 0 when nothing failed, 1 when a check failed, 2 on bad usage.",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quick", action="store_true", help="smaller problems, shorter budgets")
    p.add_argument(
        "--from",
        dest="snapshot",
        metavar="SNAPSHOT",
        help="judge a snapshot written by 'gpuprobe info --json' (from another machine) "
        "instead of this machine; no kernels are run",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from gpuprobe.api import doctor
    from gpuprobe.cli.info import load_snapshot
    from gpuprobe.core import render

    snapshot = load_snapshot(args.snapshot)
    with progress(not args.json, "gpuprobe doctor") as update:
        report = doctor(quick=args.quick, inventory=snapshot, progress=update)
    if args.json:
        print_json(report.to_dict())
    else:
        render.terminal(report, console())
    return report.exit_code
