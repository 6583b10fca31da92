"""``gpuprobe bench [WORKLOAD...] [--backend B,...] [--device D,...] [--quick] [--json]
[--plot FILE] [--compare]``: what this machine can do, measured correctly, against its peaks.
E-codes: docs/experiments.md."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gpuprobe.cli._args import float_in
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
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
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
    if args.json:
        print_json(report.to_dict())
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
    return EXIT_USAGE if unwritten else report.exit_code
