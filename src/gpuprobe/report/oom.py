"""An out-of-memory report as plain text, for a terminal under a traceback
(``str(explain_oom(...))`` and the exception hook of :mod:`gpuprobe.memory.oom`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuprobe.findings import findings_lines

if TYPE_CHECKING:
    from gpuprobe.memory.oom.judge import OomReport

__all__ = ["render_text"]


def render_text(r: OomReport) -> str:
    """The report as plain text: its findings, then its notes."""
    lines = ["gpuprobe: out of memory, explained"]
    lines += findings_lines(
        r.findings, no_details=("oom-error",), no_fix=("oom-error", "oom-what-to-do")
    )
    for n in r.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)
