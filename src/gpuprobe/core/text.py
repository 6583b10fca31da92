"""Untrusted text made safe to show: on a terminal (no control characters) and in a chart (no
mathtext).

Strings that come from the user's machine or from a file (command lines, process names, kernel and
op names in a trace, GPU names) may carry terminal escapes (``\\x1b]0;title\\x07`` retitles the
window, ``\\x1b[31m`` colours what follows) or ``$`` pairs that matplotlib reads as maths (and
fails on). :func:`strip_control` is applied where such a string enters gpuprobe;
:func:`plain_text` where it goes into a chart.
"""

from __future__ import annotations

import re

__all__ = ["plain_text", "strip_control", "url_host"]

# C0 controls but tab, DEL, C1 controls (U+0080-U+009F: 0x9b is a one-byte CSI on some terminals),
# and the bidi overrides/isolates that reorder what a terminal shows (Trojan Source, CVE-2021-42574)
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ESCAPE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks, clipboard
    r"|[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|.)",  # any other two-byte escape
    re.DOTALL,
)


def strip_control(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tab is kept; a newline
    becomes a space, so one name stays one line)."""
    if text.isprintable():  # the common case, fast: no controls at all
        return text
    text = _ESCAPE.sub("", text)
    text = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return _CONTROL.sub("", text)


def plain_text(text: str) -> str:
    """``text`` for a matplotlib label or title, shown as written: ``$`` escaped so that a pair
    of them is not read as maths, and control characters removed."""
    return strip_control(text).replace("$", r"\$")


def url_host(host: str) -> str:
    """``host`` as it goes in a URL: an IPv6 address in brackets (RFC 3986)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
