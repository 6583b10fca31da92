"""Short ``repr``s, readable ``str``s and HTML reprs for the results a user holds in a notebook.

A result's ``repr`` is one line (what it is, the verdict, the few numbers that matter), never a
dump of its fields; ``str`` is the same text the command prints; ``_repr_html_`` is what Jupyter
shows. Rich renders text here with ``force_jupyter=False``: a rich console in a notebook otherwise
displays what it renders as a side output, so the result would show twice.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from html import escape
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.findings import Status
from gpuprobe.core.units import seconds
from gpuprobe.core.wrap import TEXT_WIDTH
from gpuprobe.platform.measurement import Measurement
from gpuprobe.ui.style import STATUS_COLORS

__all__ = [
    "capture",
    "capture_html",
    "code_html",
    "fix_html",
    "measurement_html",
]


def _console(width: int) -> Any:
    from gpuprobe.ui.console import make_console

    return make_console(
        record=True,
        width=width,
        file=io.StringIO(),
        highlight=False,
        force_jupyter=False,
        force_terminal=False,
        color_system=None,
    )


def capture(render: Callable[[Any], None], width: int = TEXT_WIDTH) -> str:
    """What ``render(console)`` prints, as plain text."""
    con = _console(width)
    render(con)
    return "\n".join(line.rstrip() for line in con.export_text().splitlines())


def capture_html(render: Callable[[Any], None], width: int = TEXT_WIDTH) -> str:
    """What ``render(console)`` prints, as HTML (styles inline)."""
    con = _console(width)
    render(con)
    return str(con.export_html(inline_styles=True, code_format="<pre>{code}</pre>"))


_TICKS = re.compile(r"`([^`]+)`")


def code_html(text: str) -> str:
    """Escaped text where Markdown-style `code` spans become <code> elements."""
    return _TICKS.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text))


def fix_html(fix: str) -> str:
    """A fix: prose with `code` spans as <code> when it marks them, else all of it as code."""
    if "`" in fix:
        return code_html(fix)
    return f"<code>{escape(fix)}</code>"


def measurement_html(m: Measurement) -> str:
    """A measurement in one line: median, p20, p80, min, n, timer, its rate, and the spread
    warning when the times vary too much."""
    warning = m.warning
    warn = (
        ""
        if warning is None
        else f"<br><b style='color:{STATUS_COLORS[Status.WARN]}'>warning:</b> {escape(warning)}"
    )
    rate = ""
    if m.flops:
        rate = f", {m.flops / 1e9:.4g} GFLOP/s"
    elif m.bytes_per_s:
        rate = f", {m.bytes_per_s / 1e9:.4g} GB/s"
    return (
        f"<div class='gpuprobe-measurement'><b>{escape(m.name)}</b> "
        f"[{escape(m.framework)} {escape(m.device)}]: median "
        f"{seconds(m.median)} (p20 {seconds(m.p20)}, p80 "
        f"{seconds(m.p80)}, min {seconds(m.min)}; n={m.n}, "
        f"{escape(m.timer)}){rate}{warn}</div>"
    )


render.html.register(Measurement, measurement_html)
