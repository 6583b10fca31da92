"""``gpuprobe diagnose``: read a PyTorch profiler trace and say why the GPU waits.

Nothing heavy is imported at module level; the analysis (NumPy) is imported inside :func:`run`.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from gpuprobe.cli._args import add_cluster_flags, int_in
from gpuprobe.cli._common import print_json
from gpuprobe.core.errors import EXIT_OK, EXIT_PARTIAL, UsageError

if TYPE_CHECKING:
    from gpuprobe import Diagnosis, TraceContext

__all__ = ["PROGRESS_MIN_BYTES", "register", "run"]

PROGRESS_MIN_BYTES = 50_000_000  # bytes; show a progress bar for traces at least this big (~1 s)


def register(sub: Any) -> None:
    """Add the ``diagnose`` sub-command."""
    p = sub.add_parser(
        "diagnose",
        help="read a PyTorch profiler trace and say why the GPU waits",
        description="Read a PyTorch profiler (Kineto) trace, .json or .json.gz, and report what "
        "keeps the GPU waiting (launches, input, syncs, copies, Python loops, precision, memory), "
        "with the evidence and the fix. Works on CPU-only traces and without rank metadata.",
    )
    p.add_argument(
        "trace",
        nargs="*",
        metavar="TRACE",
        help="trace file (.json or .json.gz); a folder or several files: one trace per rank "
        "of a job, or one process's successive profiler cycles (checked first)",
    )
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write a page with the findings and one step's zoomable timeline (for a "
        "folder: the ranks' table and the straggler's and median rank's timelines, or the "
        "cycles' table and the diagnosed cycle's; with --compare: the comparison)",
    )
    p.add_argument(
        "--html-step",
        type=int,
        metavar="N",
        help="the step to draw with --html (default: the median-length step)",
    )
    p.add_argument("--steps", metavar="N..M", help="only these profiled steps (ProfilerStep#N)")
    p.add_argument(
        "--compare",
        nargs="+",
        metavar="TRACE",
        help="show what changed between two traces (e.g. before and after a fix): "
        "--compare BEFORE AFTER, or BEFORE --compare AFTER",
    )
    p.add_argument(
        "--kernels",
        action="store_true",
        help="also show GPU time by kernel family, the top kernels and launch statistics "
        "(with --compare: every share, GPU time by family and more of the kernels that "
        "appeared, went, got faster or slower)",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int_in(1, 4096, "reader processes"),
        metavar="N",
        help="for a folder: read at most N ranks at once, each in a process of its own "
        "(default: one per usable core, as many as the free memory allows; 1: one after "
        "the other in this process)",
    )
    fleet = add_cluster_flags(
        p,
        "read of one rank",
        "for a folder: read the ranks on the workers of the Dask cluster whose scheduler is "
        "at ADDRESS (tcp://HOST:8786); the folder's path as the workers see it",
    )
    fleet.add_argument(
        "--worker-glob",
        metavar="PATTERN",
        help="with --cluster: the rank files on each worker's own disk, as a pattern each "
        "worker expands ($VARS and ~ are the worker's), e.g. '/local/$USER/trace/*.json.gz'",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="all details: every step, and evidence of passing checks",
    )
    p.set_defaults(handler=run)


def _diagnose(path: str, args: argparse.Namespace) -> tuple[Diagnosis, TraceContext]:
    from gpuprobe.api import diagnose_with_context
    from gpuprobe.ui.progress import progress

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    shown = size >= PROGRESS_MIN_BYTES and not args.json
    with progress("reading trace", enabled=shown, bar="bytes") as bar:
        return diagnose_with_context(
            path, steps=args.steps, progress=bar.advance if bar.active else None
        )


def run(args: argparse.Namespace) -> int:
    """Diagnose one trace, the ranks of a job (a folder or several traces), or compare two;
    returns the exit code (0; 2 for bad input)."""
    traces = list(args.trace or [])
    on_cluster = bool(args.cluster or args.scheduler_file)
    if args.worker_glob is not None and not on_cluster:
        raise UsageError("--worker-glob is for a Dask cluster: give --cluster ADDRESS with it")
    if on_cluster:
        if args.compare or args.html:
            raise UsageError(
                "--cluster reads a folder of ranks on a Dask cluster; --compare and --html "
                "read traces here: leave --cluster out"
            )
        if args.jobs is not None:
            raise UsageError("--jobs is for this machine's cores; --cluster reads on the workers")
        if not traces and args.worker_glob is None:
            raise UsageError("--cluster needs the folder of ranks (or --worker-glob PATTERN)")
        return _run_ranks(traces, args)
    if args.compare:
        return _run_compare(traces, args)
    if len(traces) > 1 or (len(traces) == 1 and os.path.isdir(traces[0])):
        return _run_ranks(traces, args)
    args.trace = traces[0] if traces else None
    if not args.trace:
        raise UsageError("diagnose needs a TRACE file (or --compare BEFORE AFTER)")
    return _run_one(args)


def _run_one(args: argparse.Namespace) -> int:
    """One trace: its diagnosis (and --html, --kernels)."""
    from gpuprobe import api
    from gpuprobe.core import render
    from gpuprobe.core.findings import Status

    if args.html_step is not None and not args.html:
        raise UsageError("--html-step chooses the step drawn in --html FILE: give --html FILE too")
    diag, ctx = _diagnose(args.trace, args)
    if args.html:
        api.write_diagnosis_html(args.html, diag, ctx, args.html_step)
    kb = None
    if args.kernels:
        kb = api.kernel_breakdown(ctx)
    code = 1 if diag.status is Status.FAIL else EXIT_OK
    if args.json:  # strict JSON: the reader keeps only finite times (no NaN, no Infinity)
        out = diag.to_dict()
        if kb is not None:
            out["kernels"] = kb.to_dict()
        print_json(out, findings=diag.findings, exit_code=code, strict=True)
    else:
        render.terminal(diag, verbose=args.verbose)
        if kb is not None:
            print()
            render.terminal(kb)
        if args.html:
            print(f"timeline written to {args.html}")
    return code


def _run_compare(traces: list[str], args: argparse.Namespace) -> int:
    """``--compare BEFORE AFTER`` or ``BEFORE --compare AFTER``."""
    from gpuprobe import api
    from gpuprobe.core import render

    given = [*traces, *args.compare]
    if len(given) != 2 or (traces and len(args.compare) != 1):
        if traces and len(args.compare) == 2:
            raise UsageError("give either TRACE or --compare BEFORE AFTER, not both")
        raise UsageError(
            "--compare takes two traces: --compare BEFORE AFTER, or BEFORE --compare AFTER"
        )
    if args.html_step is not None:
        raise UsageError("--html-step chooses the step drawn for one trace: not with --compare")
    before, ctx_b = _diagnose(given[0], args)
    after, ctx_a = _diagnose(given[1], args)
    comparison = api.compare(before, after, contexts=(ctx_b, ctx_a))
    if args.html:
        render.report(comparison, args.html)
    if args.json:
        # the verdict is the AFTER trace's: where things stand now
        doc = comparison.to_dict()
        print_json(doc, findings=comparison.after.findings, exit_code=EXIT_OK, strict=True)
    else:
        render.terminal(comparison, verbose=args.verbose or args.kernels)
        if args.html:
            print(f"comparison written to {args.html}")
    return EXIT_OK


def _run_ranks(traces: list[str], args: argparse.Namespace) -> int:
    """A folder or several files: the ranks of one job, or one process's profiler cycles
    (checked first; a mix is refused with one line)."""
    from gpuprobe import CycleDiagnosis, MultiRankDiagnosis
    from gpuprobe.api import diagnose_folder, find_trace_files, write_folder_html
    from gpuprobe.cli._common import say
    from gpuprobe.core import render
    from gpuprobe.core.findings import Status
    from gpuprobe.ui.progress import progress

    if args.html_step is not None and not args.html:
        raise UsageError("--html-step chooses the step drawn in --html FILE: give --html FILE too")
    skipped: list[tuple[str, str]] = []
    on_cluster = bool(args.cluster or args.scheduler_file)
    files = [] if on_cluster else find_trace_files(traces, skipped)
    if skipped:
        whose = "the folder's" if len(traces) == 1 else "the given"
        say(
            f"skipped {len(skipped)} of {whose} files: "
            + "; ".join(f"{os.path.basename(f)} ({why})" for f, why in skipped)
        )
    if (
        len(files) == 1 and not on_cluster
    ):  # one trace (a folder of one, or one file given twice): its own verdict
        say(f"one trace, not the ranks of a job: diagnosing {files[0]} on its own")
        args.trace = files[0]
        return _run_one(args)
    total = sum(os.path.getsize(f) for f in files)
    shown = (on_cluster or total >= PROGRESS_MIN_BYTES) and not args.json
    cluster = args.cluster or ({"scheduler_file": args.scheduler_file} if on_cluster else None)
    with progress("reading ranks", enabled=shown, bar="bytes") as bar:
        result = diagnose_folder(
            traces if on_cluster else traces[0] if len(traces) == 1 else files,
            steps=args.steps,
            progress=bar.advance if bar.active else None,
            jobs=args.jobs,
            cluster=cluster,
            worker_glob=args.worker_glob,
            connect_timeout=args.connect_timeout,
            rank_timeout=args.node_timeout,
        )
    cycles = isinstance(result, CycleDiagnosis)
    if args.html:
        write_folder_html(args.html, result, steps=args.steps, step=args.html_step)
    code = 1 if result.status is Status.FAIL else EXIT_OK
    if isinstance(result, MultiRankDiagnosis) and result.partial:
        code = EXIT_PARTIAL  # some ranks are not in it: said above the findings, and here
        if args.json:  # the text names them above its findings
            for u in result.unread:
                say(f"not read: {u.line}")
    if args.json:
        # "kind" says which record the rest is (from_dict ignores it)
        doc = {"kind": "cycles" if cycles else "ranks", **result.to_dict()}
        print_json(doc, findings=result.findings, exit_code=code, strict=True)
    elif cycles:
        render.terminal(result, verbose=args.verbose)
    else:
        render.terminal(result)
    if args.html and not args.json:
        print(f"page written to {args.html}")
    return code
