"""An out-of-memory report as plain text, for a terminal under a traceback
(``str(explain_oom(...))`` and the exception hook of :mod:`gpuprobe.tools.memory.oom`)."""

from __future__ import annotations

import textwrap

from gpuprobe.core import render
from gpuprobe.tools.memory.oom.report import OomReport
from gpuprobe.ui.findings import findings_lines

__all__ = ["WIDTH", "render_text"]

WIDTH = 80  # columns of a note (a terminal's usual width)


def render_text(r: OomReport) -> str:
    """The report as plain text: its findings, then its notes."""
    lines = ["gpuprobe: out of memory, explained"]
    lines += findings_lines(
        r.findings, no_details=("oom-error",), no_fix=("oom-error", "oom-what-to-do")
    )
    for n in r.notes:
        lines += textwrap.wrap(n, WIDTH, initial_indent="  note: ", subsequent_indent="        ")
    return "\n".join(lines)


render.text.register(OomReport, render_text)
