"""The one console every view prints on: a rich ``Console`` whose lines of text wrap with a
hanging indent (a line's continuations go under the text after its lead, as
:func:`gpuprobe.core.wrap.hang` does for plain text), and whose output to a pipe or a file has
no trailing spaces. Tables, panels and other renderables print as rich draws them."""

from __future__ import annotations

import copy
import errno
import re
from typing import Any

from gpuprobe.core.wrap import breaks, lead_width, longest_unbreakable

__all__ = ["MIN_BODY_WIDTH", "Hanging", "HangingLine", "make_console", "wrap_text"]

MIN_BODY_WIDTH = 10  # columns a hanging body keeps however long its lead

_TRAILING = re.compile(r"[ \t]+(?=\n|$)")


def wrap_text(text: Any, width: int, first: int | None = None, *, fold: bool = True) -> list[Any]:
    """Rich ``text`` (one line or several) broken at ``width`` cells (``first``: its first
    line's) as :func:`gpuprobe.core.wrap.breaks` breaks it: words whole unless longer than a
    line (then folded, or with ``fold=False`` kept whole on a line of their own), a unit with its
    number, no blanks at a line's end."""
    from rich.cells import cell_len

    out: list[Any] = []
    for line in text.split("\n", allow_blank=True):
        cuts = breaks(line.plain, width, first=first, fold=fold, cells=cell_len)
        for part in line.divide(cuts):
            part.rstrip()
            out.append(part)
    return out


def _measure(lead: int, body: Any, options: Any) -> Any:
    """How wide a hanging ``body`` after ``lead`` columns can be (in a table's cell): at least
    its lead and longest word, at most all on one line."""
    from rich.cells import cell_len
    from rich.measure import Measurement

    longest = max((cell_len(w) for w in body.plain.split()), default=0)
    widest = max((cell_len(line) for line in body.plain.split("\n")), default=0)
    return Measurement(lead + longest, lead + widest).with_maximum(options.max_width)


class Hanging:
    """A rich renderable: ``lead`` then ``body``, the body's wrapped lines indented under its
    first (a hanging indent), a unit kept with its number, and no trailing spaces (a pipe gets
    the text as the terminal shows it). A word too long for the line is folded there
    (``overflow="fold"``, for a table's cell), or kept whole on a line of its own (``"ignore"``:
    a path stays one word to copy)."""

    def __init__(self, lead: Any, body: Any, overflow: str = "fold") -> None:
        from rich.text import Text

        self.lead = Text(lead) if isinstance(lead, str) else lead
        self.body = Text(body) if isinstance(body, str) else body
        self.overflow = overflow

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        room = max(options.max_width - self.lead.cell_len, MIN_BODY_WIDTH)
        pad = Text(" " * self.lead.cell_len)
        lines = wrap_text(self.body, room, fold=self.overflow != "ignore")
        if lines and lines[0].cell_len > room and self.lead.plain.strip():
            # a word too long even for the room after the lead (a path): the lead on its own
            # line, the word under it, so that only the word passes the width
            head = self.lead.copy()
            head.rstrip()
            yield head
            pad = Text(" " * self.lead.cell_len)
            lines = [pad, *lines][1:]  # every line now under the lead
            for line in lines:
                yield _one_line(Text.assemble(pad, line), self.overflow)
            return
        for i, line in enumerate(lines):
            yield _one_line(Text.assemble(self.lead if i == 0 else pad, line), self.overflow)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        return _measure(self.lead.cell_len, self.body, options)


def _one_line(text: Any, overflow: str) -> Any:
    """A wrapped line, drawn as it is: not wrapped again (a whole word longer than the line
    stays whole where ``overflow`` is ``"ignore"``)."""
    if overflow == "ignore":
        text.no_wrap = True
        text.overflow = "ignore"
    return text


class HangingLine:
    """One line of rich ``Text`` that wraps under its own lead: a marker (``[warn]``, ``-``,
    ``fix:``, a short ``label:``) keeps the text after it in one column, a line without one hangs
    two columns under its indent, so that a continuation never reads as a line of its own. A word
    longer than the room (a path) is kept whole on a line of its own, never cut or folded
    (``overflow="fold"``: folded, in a table's cell). ``marker=False``: the two columns whatever
    the line starts with (a title in a table's narrow cell, where a label's column would leave
    little room)."""

    def __init__(self, text: Any, *, marker: bool = True, overflow: str = "ignore") -> None:
        from rich.text import Text

        self.text = Text(text) if isinstance(text, str) else text
        self.marker = marker
        self.overflow = overflow

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.text import Text

        text: Text = self.text
        width = options.max_width
        if text.cell_len <= width:
            yield text
            return
        plain = text.plain
        lead = lead_width(plain, width) if self.marker else 0
        body = text[len(plain) - len(plain[lead:].lstrip(" ")) :] if lead else text
        head = text[:lead] if lead and plain[:lead].strip() else None
        fold = self.overflow != "ignore"
        if head is None:  # no marker: the indent, and continuations two further in
            indent = len(plain) - len(plain.lstrip(" "))
            first, pad = Text(" " * indent), " " * (indent + 2)
            room = max(width - indent - 2, MIN_BODY_WIDTH)
            if longest_unbreakable(plain[indent:], cell_len) > width - indent:
                # a word longer than the whole line is cut however it is placed: cut it where
                # the line ends and flow the rest after it, as before
                for i, line in enumerate(
                    wrap_text(text[indent:], room, first=width - indent, fold=fold)
                ):
                    yield _one_line(Text.assemble(first if i == 0 else pad, line), self.overflow)
                return
            lines = wrap_text(text[indent:], room, first=width - indent, fold=False)
            for i, line in enumerate(lines):
                if i and line.cell_len > room and line.cell_len <= width - indent:
                    # a word too long for the room after the hang, not for the line: under the
                    # line's start, whole, rather than cut
                    yield _one_line(Text.assemble(first, line), self.overflow)
                elif line.cell_len > (room if i else width - indent) and fold:
                    for part in wrap_text(line, room, fold=True):  # longer than the line: cut
                        yield _one_line(Text.assemble(pad, part), self.overflow)
                else:
                    yield _one_line(Text.assemble(first if i == 0 else pad, line), self.overflow)
            return
        yield from Hanging(head, body, self.overflow).__rich_console__(console, options)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        plain = self.text.plain
        lead = lead_width(plain, options.max_width) if self.marker else 0
        return _measure(lead, self.text[lead:], options)


def _hanging(console: Any, obj: Any, markup: bool | None) -> Any:
    """``obj`` (a str with markup, or Text) as hanging lines; anything else as it is."""
    from rich.console import Group
    from rich.text import Text

    if isinstance(obj, str):
        obj = console.render_str(obj, markup=markup, highlight=False)
    if not isinstance(obj, Text):
        return obj
    return Group(*(HangingLine(line) for line in obj.split("\n", allow_blank=True)))


def _table_cells(console: Any, table: Any) -> Any:
    """``table`` (a copy) whose text in its folding, left-aligned columns wraps two columns in
    and keeps a unit with its number, as a line printed alone does (a name or a sentence over
    several lines of a cell reads as one); numbers, cut and unwrapped columns stay as rich
    draws them."""
    from rich.console import Group
    from rich.text import Text

    out = copy.copy(table)
    out.columns = []
    for column in table.columns:
        column = copy.copy(column)
        wraps = column.overflow == "fold" and not column.no_wrap
        if wraps and column.justify in ("default", "left"):
            cells = []
            for cell in column._cells:
                if isinstance(cell, str):
                    cell = console.render_str(cell, highlight=table.highlight)
                if isinstance(cell, Text):
                    lines = cell.split("\n", allow_blank=True)
                    cell = Group(
                        *(HangingLine(line, marker=False, overflow="fold") for line in lines)
                    )
                cells.append(cell)
            column._cells = cells
        out.columns.append(column)
    _keep_words_whole(console, out)
    return out


def _cell_lines(column: Any) -> list[tuple[str, bool]]:
    """Each line of text in ``column``'s cells, with whether it hangs its continuations two
    columns in (a :class:`HangingLine`, as :func:`_table_cells` makes them)."""
    from rich.console import Group
    from rich.text import Text

    out: list[tuple[str, bool]] = []
    for cell in column._cells:
        parts: list[Any] = list(cell.renderables) if isinstance(cell, Group) else [cell]
        for part in parts:
            hangs = isinstance(part, HangingLine)
            text = part.text if hangs else part
            if not isinstance(text, Text | str):
                raise _NotText
            out.append((text.plain if isinstance(text, Text) else text, hangs))
    return out


class _NotText(Exception):
    """A cell that is not text (a nested table, a chart): its table is left to rich."""


def _floor(column: Any, hang: bool = True) -> int:
    """The narrowest ``column`` can be with no word cut: its longest word (or number with its
    unit), and (``hang``) two more where a cell of several words hangs its continuations two in
    (without them, such a word goes under its cell's start instead)."""
    from rich.cells import cell_len

    floor = longest_unbreakable(str(column.header), cell_len) if column.header else 0
    for plain, hangs in _cell_lines(column):
        longest = longest_unbreakable(plain, cell_len)
        several = hang and hangs and cell_len(plain.strip()) > longest
        floor = max(floor, longest + (2 if several else 0))
    return max(floor, 1)


def _prose(column: Any) -> bool:
    """Whether a cell of ``column`` holds several words (a sentence, not a name)."""
    return any(len(plain.split()) > 1 for plain, _ in _cell_lines(column))


def _keep_words_whole(console: Any, table: Any) -> None:
    """Give ``table``'s columns widths at which no word is cut, where the table is too wide for
    the console and such widths exist: rich's own narrowing (``Table._collapse_widths``) takes
    the widest columns down to the same width whatever they hold, so that a column of single
    words (``elementwise-resident``) was folded mid-word (``elementwise-reside``/``nt``) while
    a column of sentences beside it kept room to spare. Here the widest column that can wrap
    gives up a column at a time, never narrower than its longest word. Where the words cannot
    all stay whole, the columns of prose (several words in a cell) give up more, to
    :data:`MIN_BODY_WIDTH`, and a long word is folded there, never in a column of names; where
    even that does not fit, rich's way is left as it is."""
    if table.width is not None:
        return
    options = console.options
    room = options.max_width - table._extra_width
    columns = table.columns
    widths = [table._measure_column(console, options, c).maximum or 1 for c in columns]
    if sum(widths) <= room:
        return
    pads = [table._get_padding_width(i) for i in range(len(columns))]
    shrinks = [c.width is None and not c.no_wrap for c in columns]
    try:
        floors = [_floor(c) + pads[i] for i, c in enumerate(columns)]
        unhung = [_floor(c, hang=False) + pads[i] for i, c in enumerate(columns)]
        prose = [ok and _prose(c) for ok, c in zip(shrinks, columns, strict=True)]
    except _NotText:
        return
    last = [MIN_BODY_WIDTH + pads[i] if prose[i] else floors[i] for i in range(len(columns))]
    excess = sum(widths) - room
    while excess > 0:  # whole words hung under their cell; then whole words; then cut prose
        can = [i for i, ok in enumerate(shrinks) if ok and widths[i] > floors[i]]
        can = can or [i for i, ok in enumerate(shrinks) if ok and widths[i] > unhung[i]]
        can = can or [i for i, ok in enumerate(prose) if ok and widths[i] > last[i]]
        if not can:
            return
        widest = max(can, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    for index, (column, width) in enumerate(zip(columns, widths, strict=True)):
        column.width = max(width - table._get_padding_width(index), 1)


def make_console(**kwargs: Any) -> Any:
    """A rich console (``kwargs`` as ``rich.console.Console`` takes them) whose ``print`` of a
    string or ``Text`` wraps each line with a hanging indent, and that writes no trailing spaces
    where the output is not a terminal."""
    from rich.console import Console
    from rich.table import Table

    class _Console(Console):
        def print(self, *objects: Any, **kw: Any) -> None:
            # a line longer than the console (a path kept whole) is printed whole, as print()
            # would, and the terminal wraps it: never cut at the width (rich's default)
            kw.setdefault("crop", False)
            plain = not any(kw.get(k) for k in ("width", "no_wrap", "soft_wrap", "justify"))
            if plain and len(objects) == 1 and not self.soft_wrap:
                obj = objects[0]
                if isinstance(obj, Table) and obj.title:
                    # a title wraps under its own lead above the table, not at the table's
                    # width from the margin
                    title = obj.title
                    if isinstance(title, str):
                        title = self.render_str(title, style=obj.title_style or "table.title")
                    super().print(_hanging(self, title, None), **kw)
                    obj = copy.copy(obj)
                    obj.title = None
                if isinstance(obj, Table):
                    obj = _table_cells(self, obj)
                objects = (_hanging(self, obj, kw.get("markup")),)
            super().print(*objects, **kw)

        def on_broken_pipe(self) -> None:
            # rich's own exits with code 1, which reads as "a check failed": the reader of
            # the output went away, which the command line reports as a broken pipe (141)
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        def _render_buffer(self, buffer: Any) -> str:
            out = super()._render_buffer(buffer)
            return out if self.is_terminal else _TRAILING.sub("", out)

    return _Console(**kwargs)
