"""Plain text wrapped at a terminal's width with a hanging indent: each line's continuation
lines go under the text after its lead (its indent and a marker such as ``[warn]``, ``-`` or
``fix:``), words never broken, and a unit never parted from its number (``3.0/24.0 GiB``,
``1 %``, ``host_cores=2 cores`` move to the next line together). For the ``str()`` of results
and findings, and plain-text reports; :mod:`gpuprobe.ui.console` breaks rich text with
:func:`breaks` too."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable

__all__ = [
    "TEXT_WIDTH",
    "breaks",
    "hang",
    "hang_lines",
    "key_value_lines",
    "lead_width",
    "longest_unbreakable",
]

TEXT_WIDTH = 80  # columns plain text wraps at (a pipe, a file, print(): a terminal's usual)

# a line's lead: its indent, then at most one marker (a finding's [status], a list's "-" or "·",
# a "label:" of a few words, or a short one of signs, as a legend's "#:") and the spaces after
# it; continuation lines go under what follows
_LEAD = re.compile(
    r"^( *)((?:\[[a-z]+\]|[-·•]|[A-Za-z][\w .()/-]{0,24}?:|[^\w\s:\[\]]{1,3}:)(?= ) *)?"
)

# a word: its leading blanks (only at the start of the text), its characters, the blanks after
_WORD = re.compile(r"\s*\S+\s*")
# the words that never start a line without the number before them ("3.0/24.0 GiB", "1 %",
# "host_cores=2 cores", "last_at=3/3 collectives,"): units, as gpuprobe prints them, and the
# things it counts. Named, not any short word after a number: "CUDA 13.0 sees", "the RTX 5090
# datasheet" keep their number with the word before it.
UNIT_WORDS = frozenset(
    {
        *("ns", "µs", "us", "ms", "s", "min", "h"),
        *("B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "bytes"),
        *("%", "pp", "×", "W", "V", "°C", "C", "Hz", "kHz", "MHz", "GHz"),
        *("FLOP", "GFLOP", "TFLOP", "TFLOPS", "TOP", "TOPS", "it", "rate"),
        *("cores", "core", "lanes", "collectives", "steps", "step", "samples", "events"),
        *("ranks", "kernels", "calls", "threads", "thread", "copies", "syncs", "traces"),
        *("cycles", "launches", "GPUs", "GPU", "processes", "ops", "rows", "items"),
        *("elements", "workers", "times", "blocks", "warps", "files", "lines"),
    }
)
_TRAILING_PUNCT = re.compile(r"[,;:.)\]]+$")
_NUMBER_END = re.compile(r"\d$")


def _glued(before: str, word: str) -> bool:
    """Whether ``word`` goes to the next line with ``before``: a number and its unit (a word
    of UNIT_WORDS, with its punctuation, a plural "(s)" or a "/s", "/step" after it)."""
    if not _NUMBER_END.search(before.rstrip()):
        return False
    unit = _TRAILING_PUNCT.sub("", word.strip().replace("(s)", ""))
    return unit.split("/", 1)[0] in UNIT_WORDS


def _groups(text: str) -> list[list[tuple[int, str]]]:
    """``text``'s words (offset, word with its blanks) in the groups that break together: a
    number and its unit."""
    words = [(m.start(), m.group(0)) for m in _WORD.finditer(text)]
    groups: list[list[tuple[int, str]]] = []
    for i, w in enumerate(words):
        if groups and _glued(words[i - 1][1], w[1]):
            groups[-1].append(w)
        else:
            groups.append([w])
    return groups


def longest_unbreakable(text: str, cells: Callable[[str], int] = len) -> int:
    """The columns of the longest run of ``text`` that :func:`breaks` never breaks: a word, or a
    number with its unit (``1.98 GFLOP/s``); the narrowest a line can be with no word cut."""
    longest = 0
    for line in text.split("\n"):
        for group in _groups(line):
            longest = max(longest, cells("".join(w for _, w in group).strip()))
    return longest


def breaks(
    text: str,
    width: int,
    *,
    first: int | None = None,
    fold: bool = False,
    cells: Callable[[str], int] = len,
) -> list[int]:
    """Where ``text`` (one line) breaks to fit ``width`` columns (``first``: the first line's,
    when it differs): the offsets its continuation lines start at, as rich's ``divide_line``
    gives them. Words are kept whole (``fold``: one longer than a line is cut, as rich folds
    it), and a unit word never starts a line: the number before it moves down with it (unless
    the two together are longer than a line). ``cells`` measures a string's columns."""
    groups = _groups(text)
    out: list[int] = []
    room = width if first is None else first
    used = 0
    for group in groups:
        joined = "".join(w for _, w in group)
        if used and cells(joined.rstrip()) > room - used and cells(joined.rstrip()) <= width:
            out.append(group[0][0])  # the whole group on the next line
            room, used = width, 0
        for start, word in group:
            size = cells(word.rstrip())
            if used and size > room - used:
                out.append(start)
                room, used = width, 0
            if size > room and fold:  # longer than a line: cut where the line ends
                for chars, ch in enumerate(word.rstrip()):
                    if used + cells(ch) > room and used:
                        out.append(start + chars)
                        room, used = width, 0
                    used += cells(ch)
                used += cells(word) - cells(word.rstrip())
                continue
            used += cells(word)
    return out


def lead_width(line: str, width: int = TEXT_WIDTH) -> int:
    """The columns of ``line``'s lead (its indent and marker, see ``_LEAD``) that its wrapped
    continuation lines go under: a lead longer than half the line counts as its indent alone."""
    m = _LEAD.match(line)
    lead = m.group(0) if m else ""
    if len(lead) > width // 2 or not lead.strip():  # a long label, or no marker: the indent
        return len(line) - len(line.lstrip(" ")) if m else 0
    return len(lead)


def _wrap(body: str, width: int, first: int, pad: str, head: str) -> list[str]:
    """``body`` broken at ``width`` columns (``first`` on its first line, after ``head``), its
    continuations after ``pad``: no blanks at either end of a line."""
    cuts = [0, *breaks(body, width, first=first), len(body)]
    parts = [body[a:b].strip() for a, b in itertools.pairwise(cuts)]
    return [(head if i == 0 else pad) + p for i, p in enumerate(parts)]


def hang(line: str, width: int = TEXT_WIDTH) -> list[str]:
    """``line`` wrapped at ``width`` columns, its continuation lines indented under the text after
    its lead (indent and marker, see ``_LEAD``), or two columns under its indent where it has no
    marker; words are never broken, so a path or a number longer than the line stays whole, and
    a unit stays with its number. A line that fits is returned as it is."""
    if len(line) <= width:
        return [line]
    lead = line[: lead_width(line, width)]
    indent = len(line) - len(line.lstrip(" "))
    if not lead.strip():  # no marker (or one too long): hang two under the indent
        body = line[indent:]
        return _wrap(body, width - indent - 2, width - indent, " " * (indent + 2), " " * indent)
    body = line[len(lead) :]
    room = width - len(lead)
    return _wrap(body, room, room, " " * len(lead), lead)


def hang_lines(lines: Iterable[str], width: int | None = TEXT_WIDTH) -> list[str]:
    """Every line through :func:`hang` (``width`` None: as they are)."""
    if width is None:
        return list(lines)
    return [w for line in lines for w in hang(line, width)]


def key_value_lines(rows: Iterable[tuple[str, str]], width: int | None = TEXT_WIDTH) -> list[str]:
    """(label, value) rows as aligned text: the labels in a column, each value wrapped at
    ``width`` columns under its first word (``width`` None: one line a row); words are never
    broken, nor a number from its unit. A label column wider than half the line puts a value's
    continuations two columns in instead."""
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
        out.extend(_wrap(v, width - hang_at, width - len(lead), " " * hang_at, lead))
    return out
