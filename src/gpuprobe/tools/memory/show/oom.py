"""An out-of-memory report as plain text, for a terminal under a traceback
(``str(explain_oom(...))`` and the exception hook of :mod:`gpuprobe.tools.memory.oom`)."""

from __future__ import annotations

from gpuprobe.core import render
from gpuprobe.core.findings import status_counts
from gpuprobe.core.render import one_line
from gpuprobe.core.units import size
from gpuprobe.core.wrap import hang_lines
from gpuprobe.tools.memory.oom.classify import OomError
from gpuprobe.tools.memory.oom.report import OomReport
from gpuprobe.ui.findings import findings_lines, result_html

__all__ = ["error_repr", "error_text", "render_text", "report_repr"]


def render_text(r: OomReport) -> str:
    """The report as plain text: its findings, then its notes."""
    lines = ["gpuprobe: out of memory, explained"]
    lines += findings_lines(
        r.findings, no_details=("oom-error",), no_fix=("oom-error", "oom-what-to-do")
    )
    for n in r.notes:
        lines.append(f"  note: {n}")
    return "\n".join(hang_lines(lines))  # prose under its lead at 80 columns


def report_repr(r: OomReport) -> str:
    """``<OomReport torch host: asked 4 EiB; 2 fail, 1 info>``: what ran out, the size asked
    for, the findings counted."""
    e = r.error
    what = f"{e.framework} {e.kind}" if e is not None else "no out-of-memory error"
    asked = f": asked {size(e.requested)}" if e is not None and e.requested else ""
    return one_line("OomReport", f"{what}{asked}; findings: {status_counts(r.findings)}")


def error_repr(e: OomError) -> str:
    """``<OomError torch host: asked 4 EiB: "the message…">``."""
    asked = f": asked {size(e.requested)}" if e.requested else ""
    return one_line("OomError", f"{e.framework} {e.kind}{asked}: {e.message!r}")


render.text.register(OomReport, render_text)
render.html.register(OomReport, result_html)
render.repr_.register(OomReport, report_repr)


def error_text(e: OomError) -> str:
    """``print(classified)``: what ran out, then the message, wrapped at 80 columns."""
    asked = f", asked {size(e.requested)}" if e.requested is not None else ""
    where = f" (GPU {e.device})" if e.device is not None else ""
    return "\n".join(
        hang_lines(
            [
                f"out of {'GPU' if e.kind == 'cuda' else 'host'} memory in {e.framework}{where}"
                f"{asked}",
                f"  {e.message}",
            ]
        )
    )


render.repr_.register(OomError, error_repr)
render.text.register(OomError, error_text)
