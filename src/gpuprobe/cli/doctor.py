"""``gpuprobe doctor [--json] [--quick] [--from SNAPSHOT | --cluster ADDRESS]``: does this GPU setup
really work, here or on every node of a Dask cluster?"""

from __future__ import annotations

import argparse

from gpuprobe.cli._args import add_cluster_flags
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
    fleet = add_cluster_flags(
        p,
        "doctor",
        "run doctor on every worker of the Dask cluster whose scheduler is at ADDRESS "
        "(tcp://HOST:8786), group the nodes by configuration and name the odd ones",
    )
    fleet.add_argument(
        "--no-kernels",
        action="store_true",
        help="on a cluster: judge what NVML and the frameworks say, without running kernels",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.cluster or args.scheduler_file:
        return _fleet(args)
    from gpuprobe.api import doctor
    from gpuprobe.cli.info import load_snapshot
    from gpuprobe.core import render

    snapshot = load_snapshot(args.snapshot)
    with progress(not args.json, "gpuprobe doctor") as update:
        report = doctor(quick=args.quick, inventory=snapshot, progress=update)
    if args.json:
        print_json(report.to_dict(), findings=report.findings, exit_code=report.exit_code)
    else:
        render.terminal(report, console())
    return report.exit_code


def _fleet(args: argparse.Namespace) -> int:
    from gpuprobe.api import fleet_doctor
    from gpuprobe.cli._common import on_cluster
    from gpuprobe.core.errors import UsageError

    if args.snapshot:
        raise UsageError(
            "--from judges one snapshot; --cluster asks the cluster's workers: give one"
        )
    return on_cluster(args, fleet_doctor, "doctor", quick=args.quick,
                      run_kernels=False if args.no_kernels else None)  # fmt: skip
