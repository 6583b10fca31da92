"""``gpuprobe run [--hz N] [--out DIR] -- CMD ARGS...``: record a command, then judge the run.

The summary goes to stderr (the command's own stdout stays clean for pipes); ``--json`` prints
the summary as JSON on stdout, alone: the command's own stdout goes to stderr meanwhile. DIR
gets ``timeline.jsonl``, ``report.html``, ``report.png`` and ``summary.json``. The exit code is
the command's.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add ``gpuprobe run``."""
    from gpuprobe.cli._args import HZ_HELP, add_command, sample_rate

    p = sub.add_parser(
        "run",
        help="run a command and record every GPU and CPU sample of it, then judge the run",
        description="Run CMD (an argument list, no shell), record the GPUs, the host and CMD's "
        "process tree until it exits, print findings and write DIR/timeline.jsonl, "
        "DIR/report.html and DIR/report.png. The exit code is CMD's.",
    )
    p.add_argument("--hz", type=sample_rate, default=2.0, help=f"{HZ_HELP} (default 2)")
    p.add_argument("--out", metavar="DIR", help="where to write (default ./gpuprobe-run-DATE)")
    p.add_argument(
        "--pcie",
        action="store_true",
        help="also read PCIe rx/tx throughput (each reading takes 20 ms per GPU)",
    )
    p.add_argument("--no-report", action="store_true", help="write the timeline only")
    p.add_argument(
        "--no-hook",
        action="store_true",
        help="leave CMD's environment as it is (no `gpuprobe profile --now` in it)",
    )
    p.add_argument(
        "--kill-leftovers",
        action="store_true",
        help="end what CMD left running when it exited (background jobs, setsid): SIGTERM, "
        "then SIGKILL after 10 s; without it they are named in a finding and left alone",
    )
    p.add_argument(
        "--capture-on",
        metavar="WHAT",
        type=lambda v: tuple(x.strip() for x in v.split(",") if x.strip()),
        default=(),
        help="profile a few steps by itself when one goes wrong: 'slow' (a step past 2x the "
        "running median, or more where the steps spread more: the next 5 steps, or the next "
        "slow one when they recur; at most one capture a process in 10 minutes), 'drift' "
        "(the running median 1.5x its lowest: the next 5 steps, once), or 'slow,drift'; "
        "each diagnosed and listed in the summary",
    )
    p.add_argument(
        "--capture-steps",
        type=int,
        default=5,
        metavar="N",
        help="steps each capture records (default 5)",
    )
    p.add_argument(
        "--capture-every",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds between two captures of one process at least (default 600)",
    )
    p.add_argument(
        "--serve",
        metavar="[HOST:]PORT",
        help="serve /metrics for Prometheus while CMD runs (127.0.0.1 without a HOST; 0 picks "
        "a free port): what `gpuprobe export` serves, and each process's steps and joules a "
        "step (gpuprobe_step_seconds, gpuprobe_step_joules)",
    )
    add_command(p, "print the summary as JSON on stdout (the command's own stdout goes to stderr)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Record the command; return its exit code (whatever happens to the report)."""
    from gpuprobe.api import run as run_api
    from gpuprobe.cli._args import command_of
    from gpuprobe.cli._common import (
        EXIT_BROKEN_PIPE,
        say,
        stdout_aside,
        stdout_back,
        stdout_gone,
    )
    from gpuprobe.core import render
    from gpuprobe.core.errors import UsageError

    cmd = command_of(args)
    if not cmd:
        raise UsageError("no command given: gpuprobe run [--hz N] [--out DIR] -- CMD [ARGS...]")
    if args.capture_on and args.no_hook:
        raise UsageError("--capture-on needs the hook: leave out --no-hook")
    if args.serve is not None and args.no_hook:
        raise UsageError("--serve needs the hook for the steps: leave out --no-hook")
    # with --json, stdout is the JSON alone: the command's own stdout goes to stderr meanwhile
    json_fd = stdout_aside() if args.json else None
    try:
        result = run_api(
            cmd,
            args.out,
            hz=args.hz,
            pcie_throughput=args.pcie,
            report=not args.no_report,
            hook=not args.no_hook,
            kill_leftovers=args.kill_leftovers,
            capture_on=args.capture_on,
            capture_steps=args.capture_steps,
            capture_every_s=args.capture_every,
            serve=args.serve,
            on_serving=lambda url: say(f"gpuprobe run: metrics at {url}"),
        )
    finally:
        if json_fd is not None:
            stdout_back(json_fd)
    summary = result.summary
    if summary is None:  # the timeline could not be read back
        for note in result.notes:
            say(note)
        return result.exit_code
    paths = list(result.files)
    notes = list(result.notes)
    if result.write_error and args.json:  # said on stderr when it happened; the JSON keeps it
        notes.insert(0, f"gpuprobe: the timeline stops short: {result.write_error}")
    try:
        if args.json:
            doc = {**summary.to_dict(), "files": [str(p) for p in paths], "notes": notes}
            sys.stdout.write(json.dumps(doc, indent=1) + "\n")
            sys.stdout.flush()
        else:
            from gpuprobe.ui.console import make_console

            make_console(stderr=True, highlight=False).print(
                render.renderable(summary, paths=paths, notes=notes)
            )
    except BrokenPipeError:
        stdout_gone()
        say("gpuprobe: broken pipe: the reader of the summary went away before it was written")
        return result.exit_code or EXIT_BROKEN_PIPE
    except OSError as exc:  # the terminal hung up (EIO): the files and the exit code still stand
        say(f"gpuprobe: cannot print the summary: {exc.strerror or exc}")
    return result.exit_code
