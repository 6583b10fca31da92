"""Plain text wrapped at a terminal's width with a hanging indent: each line's continuation
lines go under the text after its lead (its indent and a marker such as ``[warn]``, ``-`` or
``fix:``), words never broken. For the ``str()`` of results and findings, and plain-text reports."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

__all__ = ["TEXT_WIDTH", "hang", "hang_lines"]

TEXT_WIDTH = 80  # columns plain text wraps at (a pipe, a file, print(): a terminal's usual)

# a line's lead: its indent, then at most one marker (a finding's [status], a list's "-" or "·",
# a "label:" of a few words) and the spaces after it; continuation lines go under what follows
_LEAD = re.compile(r"^( *)((?:\[[a-z]+\]|[-·•]|[A-Za-z][\w .()/-]{0,24}?:)(?= ) *)?")


def hang(line: str, width: int = TEXT_WIDTH) -> list[str]:
    """``line`` wrapped at ``width`` columns, its continuation lines indented under the text after
    its lead (indent and marker, see ``_LEAD``); words are never broken, so a path or a number
    longer than the line stays whole. A line that fits is returned as it is."""
    if len(line) <= width:
        return [line]
    m = _LEAD.match(line)
    lead = m.group(0) if m else ""
    if len(lead) > width // 2:  # a long label: hang by two more than the indent
        lead = (m.group(1) if m else "") + "  "
    out = textwrap.wrap(
        line,
        width,
        subsequent_indent=" " * len(lead),
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [line]
    if len(out) > 1 and out[0].strip() == lead.strip():  # the lead alone: its word goes beside it
        out[:2] = [lead + out[1].lstrip()]
    return out


def hang_lines(lines: Iterable[str], width: int | None = TEXT_WIDTH) -> list[str]:
    """Every line through :func:`hang` (``width`` None: as they are)."""
    if width is None:
        return list(lines)
    return [w for line in lines for w in hang(line, width)]
