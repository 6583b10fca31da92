"""Helpers shared by the command modules: the console, JSON output, progress."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "EXIT_BROKEN_PIPE",
    "console",
    "on_cluster",
    "print_json",
    "progress",
    "say",
    "stdout_gone",
]


def console(stderr: bool = False) -> Any:
    """A rich console (imported lazily to keep --help fast)."""
    from gpuprobe.ui.console import make_console

    return make_console(stderr=stderr, highlight=False, soft_wrap=False)


def print_json(
    data: dict[str, Any],
    *,
    findings: Iterable[Any],
    exit_code: int,
    strict: bool = False,
) -> None:
    """Write a command's ``--json`` document to stdout: ``data`` with, last, the two keys every
    command's document carries, ``verdict`` (the worst status of ``findings``: fail, warn,
    info or ok; ok where there are none) and ``exit_code`` (the command's: 0 ok, 1 a check
    failed, 2 bad usage), so that a script reads the outcome the same way from any command.
    ``strict``: no NaN or Infinity (a trace's reader keeps only finite times)."""
    from gpuprobe.core.findings import worst

    clash = {"verdict", "exit_code"} & set(data)
    if clash:  # a record's own field of that name means something else: rename it first
        raise ValueError(f"the document already has {sorted(clash)}")
    doc = {**data, "verdict": worst(findings).value, "exit_code": int(exit_code)}
    sys.stdout.write(json.dumps(doc, indent=2, allow_nan=not strict) + "\n")


@contextmanager
def progress(enabled: bool, what: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while something runs; yields a function that updates its text."""
    from gpuprobe.ui.progress import progress as status_line

    with status_line(what, enabled=enabled) as line:
        yield line.update


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


def stdout_gone() -> None:
    """Point stdout at /dev/null so that Python's own flush at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def say(line: str) -> None:
    """One line on stderr, if stderr is still there."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def stdout_aside() -> int:
    """Point file descriptor 1 at stderr (a command started now inherits it) and return a
    descriptor of the real stdout, for the JSON; give it back with :func:`stdout_back`."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    return saved


def stdout_back(saved: int) -> None:
    """Undo :func:`stdout_aside`."""
    os.dup2(saved, 1)
    os.close(saved)


def on_cluster(args: Any, fn: Callable[..., Any], what: str, *fn_args: Any, **kwargs: Any) -> int:
    """A fleet command (``doctor --cluster``, ``bench --cluster``): ``fn`` (the API's
    ``fleet_doctor`` or ``fleet_bench``) on the cluster that ``--cluster`` or
    ``--scheduler-file`` names, with the timeouts given and a spinner, then the report as JSON
    or text; its exit code."""
    from gpuprobe.core import render

    where = args.cluster or {"scheduler_file": args.scheduler_file}
    with progress(not args.json, f"gpuprobe {what} --cluster") as update:
        report = fn(where, *fn_args, connect_timeout=args.connect_timeout,
                    node_timeout=args.node_timeout, progress=update, **kwargs)  # fmt: skip
    if args.json:
        print_json(report.to_dict(), findings=report.findings, exit_code=report.exit_code)
    else:
        render.terminal(report, console())
    return int(report.exit_code)
