"""``gpuprobe scale TARGET``: how a computation scales over Dask workers.

Targets (sub-commands; more can be added beside ``lstsq``):

- ``lstsq``: data-parallel least squares (E6 done right; docs/experiments.md#e6): for each worker count and method, time,
  speedup, parallel efficiency, communication share, residual and error against
  ``numpy.linalg.lstsq``; optionally a plot of speedup and error against workers.

Nothing heavy is imported until a target runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from gpuprobe.cli._common import print_json
from gpuprobe.core.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE, UsageError

__all__ = ["register", "run_lstsq"]

_ALL_METHODS = ("normal", "tsqr", "local-sgd")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give worker counts of 1 or more, like 1,2,4")
    return values


def _methods(text: str) -> list[str]:
    if text == "all":
        return list(_ALL_METHODS)
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [n for n in names if n not in (*_ALL_METHODS, "auto")]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: methods are normal, tsqr, local-sgd, auto, or 'all'"
        )
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be 1 or more")
    return value


def _seconds(text: str) -> float:
    """Seconds above 0 (the tool refuses more than an hour, with its own line)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds above 0, like 2 or 30")
    return value


def register(sub: Any) -> None:
    """Add ``gpuprobe scale`` and its targets to the command line."""
    p = sub.add_parser(
        "scale",
        help="how a computation scales over Dask workers (least squares)",
        description="Run a computation on 1, 2, 4… Dask workers and report time, speedup, "
        "parallel efficiency, communication share and accuracy.",
    )
    targets = p.add_subparsers(dest="target", metavar="TARGET", parser_class=type(p))
    p.set_defaults(handler=_no_target)

    lp = targets.add_parser(
        "lstsq",
        help="data-parallel least squares: normal equations, TSQR, and the local SGD of E6 "
        "(docs/experiments.md#e6)",
        description="Solve min ||b - Ax|| on each worker count with each method and compare "
        "with numpy.linalg.lstsq. Without --input, a synthetic problem is made on the workers.",
    )
    src = lp.add_argument_group("problem")
    src.add_argument("--rows", type=_positive, help="rows of a synthetic A (default 100000)")
    src.add_argument("--cols", type=_positive, help="columns of a synthetic A (default 500)")
    src.add_argument(
        "--problem",
        choices=("gaussian", "uniform"),
        default="gaussian",
        help="synthetic data: gaussian with --cond, or uniform (E6's rand data)",
    )
    src.add_argument(
        "--cond",
        type=float,
        default=1.0,
        help="condition number of a gaussian A (default 1: well conditioned)",
    )
    src.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    src.add_argument(
        "--input",
        metavar="FILE",
        help=".npy (last column b), Zarr (group with A and b) or Parquet, read lazily",
    )
    src.add_argument(
        "--target", metavar="NAME", help="b: a Parquet column, a Zarr array, or a second .npy file"
    )
    run = lp.add_argument_group("run")
    run.add_argument(
        "--workers",
        type=_int_list,
        metavar="N,N,...",
        help="worker counts (default 1,2,4,… up to the cores here)",
    )
    run.add_argument(
        "--method",
        type=_methods,
        default=["normal", "tsqr"],
        metavar="M,M,...",
        help="normal, tsqr, local-sgd, auto, or 'all' (default normal,tsqr)",
    )
    run.add_argument(
        "--chunk-rows",
        type=_positive,
        metavar="ROWS",
        help="rows per block (default: blocks of ≤128 MiB, a multiple of workers)",
    )
    run.add_argument("--repeats", type=_positive, default=1, help="runs per point; best kept")
    run.add_argument("--epochs", type=_positive, help="local-sgd epochs (default 40, as E6)")
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786",
    )
    run.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long --scheduler may take to answer as a Dask scheduler (default 10)",
    )
    run.add_argument(
        "--threads",
        action="store_true",
        help="workers as threads of this process (default: one process each)",
    )
    run.add_argument(
        "--compare-dask",
        action="store_true",
        help="also time dask.array.linalg.lstsq on the same chunks (needs scipy)",
    )
    run.add_argument(
        "--no-numpy",
        action="store_true",
        help="skip numpy.linalg.lstsq (for data larger than this machine's memory)",
    )
    out = lp.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    out.add_argument(
        "--plot", metavar="FILE", help="speedup and error against workers (.png, .svg, .pdf, .jpg)"
    )
    lp.set_defaults(handler=run_lstsq)


def _no_target(_args: argparse.Namespace) -> int:
    raise UsageError(
        "scale needs a target: gpuprobe scale lstsq [--rows N --cols N --workers 1,2,4] "
        "(see 'gpuprobe scale lstsq --help')"
    )


# Local workers per core above which a sweep is refused: each worker is a process that wants a
# core of its own, so past this they only time-share the cores (64 workers on 2 cores ran for
# minutes before the first result). gpuprobe's choice: 2 leaves room to see oversubscription.
LOCAL_WORKERS_PER_CORE_MAX = 2


def _check_workers(workers: list[int], scheduler: str | None) -> None:
    """Refuse more local workers than the cores can run at all (above one per core they are
    clamped, with a warning, by :func:`_clamp_workers`)."""
    if scheduler:  # a cluster's own workers: its size is checked against the cluster
        return
    from gpuprobe.api import available_cores

    cores = available_cores()
    most = max(workers)
    if most > LOCAL_WORKERS_PER_CORE_MAX * cores:
        raise UsageError(
            f"--workers {most}: this machine has {cores} core(s), and each local worker is a "
            f"process that wants a core; give at most {LOCAL_WORKERS_PER_CORE_MAX * cores} "
            "(one per core measures scaling), or --scheduler ADDRESS for a cluster's workers"
        )


def _default_workers() -> list[int]:
    from gpuprobe.api import available_cores

    cores = available_cores()
    sizes = [1]
    while sizes[-1] * 2 <= cores:
        sizes.append(sizes[-1] * 2)
    if sizes[-1] != cores:
        sizes.append(cores)
    return sizes


def _clamp_workers(counts: list[int]) -> list[int]:
    """Worker counts above the cores here become the core count, with a warning on stderr: more
    worker processes than cores only wait for each other (an existing --scheduler is not
    clamped: its workers may be on other machines)."""
    from gpuprobe.api import available_cores

    cores = available_cores()
    over = [w for w in counts if w > cores]
    if not over:
        return counts
    print(
        f"gpuprobe: warning: --workers {','.join(map(str, over))} is more than the {cores} "
        f"core(s) here; using {cores} (give --scheduler for a cluster with more)",
        file=sys.stderr,
    )
    return sorted({min(w, cores) for w in counts})


def run_lstsq(args: argparse.Namespace) -> int:
    """``gpuprobe scale lstsq``: run the sweep, print it (or JSON), plot it; exit 1 on a failed
    accuracy check."""
    if args.input and (args.rows or args.cols):
        raise UsageError("--input reads the problem from FILE: leave out --rows and --cols")
    if args.connect_timeout is not None and not args.scheduler:
        raise UsageError("--connect-timeout is for --scheduler ADDRESS: give --scheduler too")
    if args.target and not args.input:
        raise UsageError("--target names b inside --input FILE: give --input too")
    if args.plot:  # before the sweep: a wrong suffix is one line at once
        from gpuprobe.ui.plot_extra import figure_path

        figure_path(args.plot, "--plot")
    from gpuprobe import SgdSettings
    from gpuprobe.api import scale_lstsq

    if args.workers:
        _check_workers(args.workers, args.scheduler)

    sgd = SgdSettings(epochs=args.epochs) if args.epochs else None
    workers = args.workers or _default_workers()
    if args.scheduler is None:
        workers = _clamp_workers(workers)
    from gpuprobe.ui.progress import progress

    with progress("starting the Dask cluster", keep_title=False) as status:
        result = scale_lstsq(
            rows=args.rows or 100_000,
            cols=args.cols or 500,
            input=args.input,
            target=args.target,
            workers=workers,
            methods=args.method,
            problem=args.problem,
            cond=args.cond,
            seed=args.seed,
            chunk_rows=args.chunk_rows,
            repeats=args.repeats,
            scheduler=args.scheduler,
            processes=not args.threads,
            compare_numpy=not args.no_numpy,
            compare_dask=args.compare_dask,
            sgd=sgd,
            progress=status.update if status.active else None,
            **({"connect_timeout": args.connect_timeout} if args.connect_timeout else {}),
        )
    from gpuprobe.ui.plot_extra import ChartsUnavailable

    plot_note = None  # without matplotlib: the results all the same, then one line
    unwritten = False  # a chart's file that could not be written: the results, the line, exit 2
    if args.plot:
        try:
            result.plot(args.plot)
        except ChartsUnavailable as exc:
            plot_note = f"gpuprobe: no plot: {exc.message}"
        except UsageError as exc:
            plot_note, unwritten = f"gpuprobe: no plot: {exc.message}", True
    code = (
        EXIT_USAGE
        if unwritten
        else (EXIT_CHECK_FAILED if any(f.failed for f in result.findings) else EXIT_OK)
    )
    if args.json:
        print_json(result.to_dict(), findings=result.findings, exit_code=code)
    else:
        from gpuprobe.ui.columns import terminal_width

        print(result.text(terminal_width()))
        if args.plot and plot_note is None:
            print(f"\nplot: {args.plot}")
    if plot_note:
        print(plot_note, file=sys.stderr)
    return code
