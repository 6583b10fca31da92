"""``gpuprobe run [--hz N] [--out DIR] -- CMD ARGS...``: record a command, then judge the run.

The summary goes to stderr (the command's own stdout stays clean for pipes); ``--json`` prints
the summary as JSON on stdout. DIR gets ``timeline.jsonl``, ``report.html``, ``report.png`` and
``summary.json``. The exit code is the command's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add ``gpuprobe run``."""
    p = sub.add_parser(
        "run",
        help="run a command and record every GPU and CPU sample of it, then judge the run",
        description="Run CMD (an argument list, no shell), record the GPUs, the host and CMD's "
        "process tree until it exits, print findings and write DIR/timeline.jsonl, "
        "DIR/report.html and DIR/report.png. The exit code is CMD's.",
    )
    p.add_argument("--hz", type=float, default=2.0, help="samples per second (0.1-20, default 2)")
    p.add_argument("--out", metavar="DIR", help="where to write (default ./gpuprobe-run-DATE)")
    p.add_argument(
        "--pcie",
        action="store_true",
        help="also read PCIe rx/tx throughput (each reading takes 20 ms per GPU)",
    )
    p.add_argument("--no-report", action="store_true", help="write the timeline only")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run"
    )
    p.set_defaults(handler=run)


def write_reports(tl: Any, summary: Any, out_dir: Path) -> tuple[list[Path], list[str]]:
    """report.html, report.png and summary.json into ``out_dir``; notes on what failed (a full
    disk is a note, never an exception: the command's exit code must survive it)."""
    from gpuprobe.errors import GpuprobeError
    from gpuprobe.report.html import write_run_report

    notes: list[str] = []
    paths: list[Path] = []
    summary_path = out_dir / "summary.json"
    try:
        summary_path.write_text(json.dumps(summary.to_dict(), indent=1) + "\n", encoding="utf-8")
        paths.append(summary_path)
    except OSError as exc:
        notes.append(f"gpuprobe: cannot write {summary_path}: {exc.strerror or exc}")
    try:
        paths = [
            *write_run_report(
                tl, summary, html_path=out_dir / "report.html", png_path=out_dir / "report.png"
            ),
            *paths,
        ]
    except GpuprobeError as exc:
        notes.append(f"gpuprobe: no charts: {exc.message}")
    except OSError as exc:
        name = exc.filename or out_dir
        notes.append(f"gpuprobe: no report: cannot write {name}: {exc.strerror or exc}")
    return paths, notes


def run(args: argparse.Namespace) -> int:
    """Record the command; return its exit code (whatever happens to the report)."""
    from gpuprobe.cli._common import EXIT_BROKEN_PIPE, say, stdout_gone
    from gpuprobe.errors import GpuprobeError, UsageError
    from gpuprobe.monitor.run import run_command
    from gpuprobe.monitor.summary import summarize
    from gpuprobe.monitor.timeline import read_timeline
    from gpuprobe.report.run_terminal import render_summary

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given: gpuprobe run [--hz N] [--out DIR] -- CMD [ARGS...]")
    out = Path(args.out) if args.out else Path(time.strftime("gpuprobe-run-%Y%m%d-%H%M%S"))
    result = run_command(cmd, out, hz=args.hz, pcie_throughput=args.pcie)
    paths: list[Path] = [result.timeline]
    notes: list[str] = []
    try:
        tl = read_timeline(result.timeline)
    except GpuprobeError as exc:
        say(f"gpuprobe: no summary: {exc.message}")
        return result.exit_code
    if result.write_error:  # said on stderr when it happened; the JSON keeps it too
        if args.json:
            notes.append(f"gpuprobe: the timeline stops short: {result.write_error}")
        if tl.end is None:  # the end line did not fit, but the exit code is known
            tl.end = {
                "type": "end",
                "t": tl.start + result.duration_s,
                "exit_code": result.exit_code,
                "write_error": result.write_error,
            }
    summary = summarize(tl)
    if not args.no_report:
        more, more_notes = write_reports(tl, summary, result.out_dir)
        paths += more
        notes += more_notes
    try:
        if args.json:
            doc = {**summary.to_dict(), "files": [str(p) for p in paths], "notes": notes}
            sys.stdout.write(json.dumps(doc, indent=1) + "\n")
            sys.stdout.flush()
        else:
            from rich.console import Console

            Console(stderr=True, highlight=False, soft_wrap=True).print(
                render_summary(summary, paths=paths, notes=notes)
            )
    except BrokenPipeError:
        stdout_gone()
        say("gpuprobe: broken pipe: the reader of the summary went away before it was written")
        return result.exit_code or EXIT_BROKEN_PIPE
    except OSError as exc:  # the terminal hung up (EIO): the files and the exit code still stand
        say(f"gpuprobe: cannot print the summary: {exc.strerror or exc}")
    return result.exit_code
