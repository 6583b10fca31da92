"""``gpuprobe plot DIR|TIMELINE [--out FILE]``: the report of a saved recording, again."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]

_FORMATS = (".png", ".svg", ".pdf", ".html")


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
        help="one file to write: .png, .svg, .pdf (the charts) or .html (the report)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Draw; 0 when written."""
    from rich.console import Console

    from gpuprobe.api import plot_timeline, read_timeline, summarize, write_run_report
    from gpuprobe.core import render
    from gpuprobe.core.errors import UsageError
    from gpuprobe.ui.plot_extra import ChartsUnavailable

    tl = read_timeline(args.timeline)
    summary = summarize(tl)
    notes = [f"gpuprobe: {tl.dropped_note()}"] if tl.dropped_note() else []
    assert tl.path is not None
    if args.out:
        out = Path(args.out)
        if out.suffix.lower() not in _FORMATS:
            raise UsageError(f"--out {out}: give a file ending in {', '.join(_FORMATS)}")
        if out.suffix.lower() == ".html":
            try:
                paths = write_run_report(tl, summary, html_path=out)
            except ChartsUnavailable as exc:  # the page is written, without its charts
                paths = list(exc.written)
                notes.append(f"gpuprobe: no charts in {out.name}: {exc.message}")
        else:  # without matplotlib: its one line, exit 2
            try:
                plot_timeline(tl, out)
            except OSError as exc:
                raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
            paths = [out]
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
        print(json.dumps(doc, indent=1))
    else:
        Console(highlight=False, soft_wrap=True).print(
            render.renderable(summary, paths=paths, notes=notes)
        )
    return 0
