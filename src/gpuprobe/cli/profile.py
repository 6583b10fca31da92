"""``gpuprobe profile [OPTIONS] -- CMD ARGS...``: why is my GPU idle? From an unmodified script
to the verdict in one command; ``gpuprobe profile --now DIR|PID``: the same, on demand, in a job
that is running under ``gpuprobe run`` or ``gpuprobe profile --later``.

The report goes to stderr (the command's own stdout stays clean for pipes); ``--json`` prints it
as JSON on stdout, alone: the command's stdout goes to stderr meanwhile. The exit code is the
command's (``--now``: 0, or 2 for bad input).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register", "run"]

MAX_STEPS = 1_000_000  # steps to skip, warm up or record: more is a typo
MAX_S = 7 * 86_400.0  # s: a week, for --seconds, --delay and --timeout


def register(sub: Any) -> None:
    """Add ``gpuprobe profile``."""
    from gpuprobe.cli._args import HZ_HELP, add_command, float_in, int_in, sample_rate

    p = sub.add_parser(
        "profile",
        help="run a PyTorch script unchanged, profile its steady-state steps, say why the GPU "
        "waits",
        description="Run CMD (an argument list, no shell) with nothing changed in it, profile a "
        "window of steady-state training steps in every Python process of it that uses PyTorch "
        "(each optimizer step is a step; without an optimizer, each DataLoader batch), record "
        "its timeline like `gpuprobe run`, and diagnose the traces: the verdict, the evidence "
        "and the fix. DIR gets traces/, diagnosis.html, timeline.jsonl and report.html. The "
        "exit code is CMD's. With --now DIR|PID: profile the next steps of a job already "
        "running under `gpuprobe run` or `gpuprobe profile --later`.",
    )
    p.add_argument("--out", metavar="DIR", help="where to write (default ./gpuprobe-profile-DATE)")
    steps = int_in(0, MAX_STEPS, "steps")
    p.add_argument("--skip", type=steps, default=10, help="steps to run unprofiled first (10)")
    p.add_argument("--warmup", type=steps, default=None, help="profiler warm-up steps (2; --now 1)")
    p.add_argument(
        "--active", type=int_in(1, MAX_STEPS, "steps"), default=5, help="steps to record (5)"
    )
    p.add_argument(
        "--seconds",
        type=float_in(0, MAX_S, "seconds"),
        metavar="S",
        help="record S seconds instead of counted steps (scripts without an optimizer or "
        "DataLoader)",
    )
    p.add_argument(
        "--delay",
        type=float_in(0, MAX_S, "seconds", open_low=False),
        default=5.0,
        metavar="S",
        help="with --seconds: wait S seconds after torch is imported (5)",
    )
    p.add_argument("--with-stack", action="store_true", help="record Python stacks (the line)")
    p.add_argument("--memory", action="store_true", help="record tensor allocations")
    p.add_argument("--record-shapes", action="store_true", help="record operator input shapes")
    p.add_argument("--hz", type=sample_rate, default=2.0, help=f"timeline {HZ_HELP} (2)")
    p.add_argument(
        "--later",
        action="store_true",
        help="no window now: wait for `gpuprobe profile --now DIR` from another terminal",
    )
    p.add_argument(
        "--now",
        metavar="DIR|PID",
        help="profile the next --active steps of a running job (its --out folder or a PID)",
    )
    p.add_argument(
        "--timeout",
        type=float_in(0, MAX_S, "seconds"),
        default=120.0,
        metavar="S",
        help="with --now: how long to wait for the steps (120)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="every step and passing check")
    add_command(p, "print the report as JSON on stdout (the command's own stdout goes to stderr)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Profile the command (or a running job with --now); return the command's exit code."""
    from gpuprobe import api
    from gpuprobe.cli._args import command_of
    from gpuprobe.cli._common import stdout_aside, stdout_back
    from gpuprobe.core.errors import UsageError

    cmd = command_of(args)
    if args.now is not None:
        if cmd:
            raise UsageError("--now profiles a running job: give DIR or PID, not a command")
        report = api.profile_now(
            args.now,
            steps=args.active,
            warmup=1 if args.warmup is None else args.warmup,
            seconds=args.seconds,
            timeout=args.timeout,
        )
        _show(report, args)
        return 0
    if not cmd:
        raise UsageError("no command given: gpuprobe profile [OPTIONS] -- CMD [ARGS...]")
    json_fd = stdout_aside() if args.json else None
    try:
        report = api.profile_command(
            cmd,
            args.out,
            skip=args.skip,
            warmup=2 if args.warmup is None else args.warmup,
            active=args.active,
            seconds=args.seconds,
            delay=args.delay,
            later=args.later,
            with_stack=args.with_stack,
            memory=args.memory,
            record_shapes=args.record_shapes,
            hz=args.hz,
        )
    finally:
        if json_fd is not None:
            stdout_back(json_fd)
    _show(report, args)
    return report.exit_code if report.exit_code is not None else 0


def _show(report: Any, args: argparse.Namespace) -> None:
    from gpuprobe.cli._common import say, stdout_gone
    from gpuprobe.core import render

    try:
        if args.json:
            sys.stdout.write(json.dumps(report.to_dict(), indent=1) + "\n")
            sys.stdout.flush()
        else:
            from gpuprobe.ui.console import make_console

            render.terminal(
                report, make_console(stderr=True, highlight=False), verbose=args.verbose
            )
    except BrokenPipeError:
        stdout_gone()
        say("gpuprobe: broken pipe: the reader of the report went away before it was written")
    except OSError as exc:  # the terminal hung up: the files and the exit code still stand
        say(f"gpuprobe: cannot print the report: {exc.strerror or exc}")
