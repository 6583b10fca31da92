"""The files of a judged run: ``summary.json``, ``report.html`` and ``report.png`` in its folder.

Used by :func:`gpuprobe.run` (and so ``gpuprobe run``) and ``gpuprobe plot``; what cannot be
written (a full disk, a folder gone) is a note, never an exception, so that the recorded command's
exit code survives. Without matplotlib (the extra ``gpuprobe[plot]``) report.png is skipped with
one note naming the extra, and report.html is written without its charts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gpuprobe.core.errors import GpuprobeError
from gpuprobe.core.files import write_atomic

if TYPE_CHECKING:
    from gpuprobe.tools.monitor.summary import RunSummary
    from gpuprobe.tools.monitor.timeline import Timeline

__all__ = ["write_run_files"]


def write_run_files(
    tl: Timeline, summary: RunSummary, out_dir: Path
) -> tuple[list[Path], list[str]]:
    """Write report.html, report.png and summary.json into ``out_dir``; return the paths written
    and a note for each file that could not be."""
    from gpuprobe.tools.monitor.show.html import write_run_report
    from gpuprobe.ui.plot_extra import ChartsUnavailable

    notes: list[str] = []
    paths: list[Path] = []
    summary_path = out_dir / "summary.json"
    try:
        # whole or not at all (never a 0-byte file on a full disk); 0600: it holds the command
        write_atomic(summary_path, json.dumps(summary.to_dict(), indent=1) + "\n", private=True)
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
    except ChartsUnavailable as exc:  # report.html is written, without its charts
        paths = [*exc.written, *paths]
        notes.append(f"gpuprobe: no report.png: {exc.message}")
    except GpuprobeError as exc:
        notes.append(f"gpuprobe: no report: {exc.message}")  # report.png not written
    except OSError as exc:
        name = exc.filename or out_dir
        notes.append(f"gpuprobe: no report: cannot write {name}: {exc.strerror or exc}")
    return paths, notes
