"""``gpuprobe bench [WORKLOAD...] [--backend B,...] [--device D,...] [--quick] [--json]
[--plot FILE] [--compare]``: what this machine can do, measured correctly, against its peaks;
with ``--cluster ADDRESS`` (or ``--scheduler-file F``), the same short bench on every node of a
Dask cluster, the odd node named (docs/fleet.md). E-codes: docs/experiments.md."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gpuprobe.cli._args import add_cluster_flags, float_in
from gpuprobe.cli._common import console, print_json

__all__ = ["register", "run"]

WIDE = 150  # columns when writing to a file or a pipe (unless COLUMNS says): one row per result
_WORKLOADS = "expression, scale, matmul, transfer, launch, crossover, sync, multi"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="measure this machine: E1, E8 (docs/experiments.md), matmul by dtype, copies, launch, "
        "crossover, sync",
        description="Run each workload on every backend and device available (numpy on the "
        "CPU; torch on the CPU and CUDA; cupy and jax where installed), each framework in its own "
        "process, timed with device events, and set each figure against the hardware's peak. "
        f"Workloads: {_WORKLOADS} (all when none are named). Results are kept in a local "
        "history ($GPUPROBE_DATA_DIR, else ~/.local/share/gpuprobe).",
    )
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD", help=f"any of: {_WORKLOADS}")
    p.add_argument(
        "--backend",
        action="append",
        metavar="B[,B...]",
        help="numpy, torch, cupy, jax (default: every one usable here)",
    )
    p.add_argument(
        "--device",
        action="append",
        metavar="D[,D...]",
        help="cpu, cuda:N or cuda for every GPU (default: all here)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes and short budgets (< 1 min)")
    p.add_argument(
        "--budget",
        type=float_in(0, 60, "seconds"),
        metavar="SECONDS",
        help="seconds of repetitions per measurement, at most 60 (default 0.25, quick 0.03)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="write charts (crossover, bandwidth vs size, roofline) to FILE "
        "(.png, .svg, .pdf, .jpg)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="show what changed since the last run on this machine",
    )
    p.add_argument("--no-save", action="store_true", help="don't add this run to the history")
    fleet = add_cluster_flags(
        p,
        "bench",
        "run the same short bench (matmul and transfer unless WORKLOADs are named) on every "
        "worker of the Dask cluster whose scheduler is at ADDRESS (tcp://HOST:8786), compare "
        "nodes with the same CPU or GPU model and name the outliers",
    )
    fleet.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="on a cluster: every worker one after the other, for hosts that share a network "
        "or a PCIe switch (default: hosts at once, a host's workers one after the other)",
    )
    p.set_defaults(handler=run)


_LOCAL_ONLY = ("device", "plot", "compare", "budget")  # options that --cluster has no use for


def _fleet(args: argparse.Namespace) -> int:
    from gpuprobe.api import fleet_bench
    from gpuprobe.cli._common import on_cluster
    from gpuprobe.core.errors import UsageError

    given = [f"--{o}" for o in _LOCAL_ONLY if getattr(args, o) not in (None, False)]
    if given:
        raise UsageError(
            f"{given[0]} is for this machine's bench; --cluster runs the fleet's short bench "
            "(WORKLOAD..., --backend, --quick, --one-at-a-time): leave it out"
        )
    return on_cluster(args, fleet_bench, "bench", args.workloads or None, args.backend,
                      quick=args.quick, one_at_a_time=args.one_at_a_time)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.cluster or args.scheduler_file:
        return _fleet(args)
    if args.one_at_a_time:
        from gpuprobe.core.errors import UsageError

        raise UsageError("--one-at-a-time is for a cluster: give --cluster ADDRESS with it")
    from gpuprobe.api import bench
    from gpuprobe.core import render
    from gpuprobe.core.errors import EXIT_USAGE, UsageError
    from gpuprobe.ui.plot_extra import ChartsUnavailable, figure_path
    from gpuprobe.ui.progress import progress

    if args.plot:  # before measuring: a wrong suffix is one line at once
        figure_path(args.plot, "--plot")
    kwargs: dict[str, Any] = {}
    if args.budget is not None:
        kwargs["budget_s"] = args.budget
    with progress("starting", enabled=not args.json, bar="steps") as bar:
        report = bench(
            args.workloads or None,
            args.backend,
            args.device,
            quick=args.quick,
            save=not args.no_save,
            compare=args.compare,
            progress=bar.step if bar.active else None,
            **kwargs,
        )
    plot_note = None  # without matplotlib: the report all the same, then one line
    unwritten = False  # a chart's file that could not be written: the report, the line, exit 2
    if args.plot:
        try:
            report.plot(args.plot)
        except ChartsUnavailable as exc:
            plot_note = f"gpuprobe: no charts: {exc.message}"
        except UsageError as exc:
            plot_note, unwritten = f"gpuprobe: no charts: {exc.message}", True
    code = EXIT_USAGE if unwritten else report.exit_code
    if args.json:
        print_json(report.to_dict(), findings=report.findings, exit_code=code)
    else:
        out = console()
        if not out.is_terminal and not os.environ.get("COLUMNS"):
            out.width = max(out.width, WIDE)
        render.terminal(report, out)
        if args.plot and plot_note is None:
            out.print(f"charts: {args.plot}")
    if plot_note:
        print(plot_note, file=sys.stderr)
    if report.history_note:  # after the report, which is never thrown away for it
        print(f"gpuprobe: {report.history_note}", file=sys.stderr)
    return code
