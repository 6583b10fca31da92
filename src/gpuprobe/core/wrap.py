"""Plain text wrapped at a terminal's width with a hanging indent: each line's continuation
lines go under the text after its lead (its indent and a marker such as ``[warn]``, ``-`` or
``fix:``), words never broken. For the ``str()`` of results and findings, and plain-text reports."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

__all__ = ["TEXT_WIDTH", "hang", "hang_lines", "key_value_lines", "lead_width"]

TEXT_WIDTH = 80  # columns plain text wraps at (a pipe, a file, print(): a terminal's usual)

# a line's lead: its indent, then at most one marker (a finding's [status], a list's "-" or "·",
# a "label:" of a few words) and the spaces after it; continuation lines go under what follows
_LEAD = re.compile(r"^( *)((?:\[[a-z]+\]|[-·•]|[A-Za-z][\w .()/-]{0,24}?:)(?= ) *)?")


def lead_width(line: str, width: int = TEXT_WIDTH) -> int:
    """The columns of ``line``'s lead (its indent and marker, see ``_LEAD``) that its wrapped
    continuation lines go under: a lead longer than half the line counts as its indent alone."""
    m = _LEAD.match(line)
    lead = m.group(0) if m else ""
    if len(lead) > width // 2 or not lead.strip():  # a long label, or no marker: the indent
        return len(line) - len(line.lstrip(" ")) if m else 0
    return len(lead)


def hang(line: str, width: int = TEXT_WIDTH) -> list[str]:
    """``line`` wrapped at ``width`` columns, its continuation lines indented under the text after
    its lead (indent and marker, see ``_LEAD``), or two columns under its indent where it has no
    marker; words are never broken, so a path or a number longer than the line stays whole. A
    line that fits is returned as it is."""
    if len(line) <= width:
        return [line]
    lead = line[: lead_width(line, width)]
    if not lead.strip():  # no marker (or one too long): hang two under the indent
        lead = " " * (len(line) - len(line.lstrip(" ")) + 2)
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


def key_value_lines(rows: Iterable[tuple[str, str]], width: int | None = TEXT_WIDTH) -> list[str]:
    """(label, value) rows as aligned text: the labels in a column, each value wrapped at
    ``width`` columns under its first word (``width`` None: one line a row); words are never
    broken. A label column wider than half the line puts a value's continuations two columns in
    instead."""
    rows = list(rows)
    if not rows:
        return []
    key_width = max(len(k) for k, _ in rows)
    out: list[str] = []
    for k, v in rows:
        lead = f"{k:<{key_width}}  "
        line = lead + v
        if width is None or len(line) <= width:
            out.append(line.rstrip())
            continue
        hang_at = len(lead) if len(lead) <= width // 2 else 2
        out.extend(
            textwrap.wrap(
                line,
                width,
                subsequent_indent=" " * hang_at,
                break_long_words=False,
                break_on_hyphens=False,
            )
            or [line]
        )
    return out
