"""``gpuprobe plot DIR|TIMELINE [--out FILE]``: the report of a saved recording, again."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpuprobe.cli._common import print_json

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add ``gpuprobe plot``."""
    p = sub.add_parser(
        "plot",
        help="draw the charts and findings of a saved timeline",
        description="Read a timeline written by 'gpuprobe run' (or gpuprobe.record) and draw "
        "its charts. Without --out, writes report.png and report.html beside the timeline. A "
        "damaged timeline is read up to its last whole line.",
    )
    p.add_argument("timeline", metavar="DIR|TIMELINE", help="a run directory or its timeline")
    p.add_argument(
        "--out",
        metavar="FILE",
        help="one file to write: .png, .svg, .pdf, .jpg (the charts) or .html (the report)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Draw; 0 when written."""
    from gpuprobe.api import plot_timeline, read_timeline, summarize, write_run_report
    from gpuprobe.cli._common import console
    from gpuprobe.core import render
    from gpuprobe.ui.plot_extra import ChartsUnavailable, figure_path

    if args.out:  # before reading: a wrong suffix is one line at once
        figure_path(args.out, "--out", also=(".html",))
    tl = read_timeline(args.timeline)
    summary = summarize(tl)
    notes = [f"gpuprobe: {tl.dropped_note()}"] if tl.dropped_note() else []
    assert tl.path is not None
    if args.out:
        out = Path(args.out)
        if out.suffix.lower() == ".html":
            try:
                paths = write_run_report(tl, summary, html_path=out)
            except ChartsUnavailable as exc:  # the page is written, without its charts
                paths = list(exc.written)
                notes.append(f"gpuprobe: no charts in {out.name}: {exc.message}")
        else:  # a chart; without matplotlib: its one line, exit 2
            paths = [plot_timeline(tl, out)]
    else:
        d = tl.path.parent
        try:
            paths = write_run_report(
                tl, summary, html_path=d / "report.html", png_path=d / "report.png"
            )
        except ChartsUnavailable as exc:  # report.html is written, without its charts
            paths = list(exc.written)
            notes.append(f"gpuprobe: no report.png: {exc.message}")
    if args.json:
        doc = {
            **summary.to_dict(),
            "files": [str(p) for p in paths],
            "notes": notes,
            "dropped_lines": tl.dropped_lines,
            "dropped_bytes": tl.dropped_bytes,
        }
        doc["command_exit_code"] = doc.pop("exit_code")  # the recorded command's, not plot's
        print_json(doc, findings=summary.findings, exit_code=0)
    else:
        # wrapped at the terminal's width (80 in a pipe) under each line's indent, as run's;
        # each note whole on one line of its own, on stderr
        console().print(render.renderable(summary, paths=paths))
        for note in notes:
            print(note, file=sys.stderr)
    return 0
