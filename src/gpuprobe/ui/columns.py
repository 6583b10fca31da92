"""Tables that fit the terminal without cutting a number.

Rich shrinks a table that is too wide by cutting cells ("40…"), which loses the very numbers a
person came for. Instead, :func:`columns_that_fit` keeps every column whose cells are numbers
whole: text columns that may wrap are counted at a small width, and when the table still does not
fit, whole columns are left out, the least useful first, and the table says which.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "MIN_WRAP_WIDTH",
    "columns_that_fit",
    "left_out_note",
    "table_width",
    "terminal_width",
]

MIN_WRAP_WIDTH = 18  # columns a wrapping text column needs to stay readable
_BOX = 3  # a column's padding (1 + 1) and its border in rich's default box


def _natural(header: str, cells: Sequence[str]) -> int:
    return max([len(header), *(max((len(x) for x in c.splitlines()), default=0) for c in cells)])


def table_width(widths: Sequence[int]) -> int:
    """Characters a boxed rich table with these column widths takes."""
    return sum(w + _BOX for w in widths) + 1


def columns_that_fit(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    drop_order: Sequence[str] = (),
    wrap: Sequence[str] = (),
    sep: int | None = None,
) -> list[int]:
    """Indices of the columns to show in ``width`` characters: all of them when they fit, else
    leaving out the columns named in ``drop_order``, first to last, until they do. Columns named
    in ``wrap`` may wrap, so they count at most :data:`MIN_WRAP_WIDTH`. ``sep``: the spaces
    between the columns of a plain-text table (default: a boxed rich table)."""
    keep = list(range(len(header)))

    def need(idx: list[int]) -> int:
        ws = []
        for i in idx:
            w = _natural(header[i], [r[i] for r in rows if i < len(r)])
            ws.append(min(w, MIN_WRAP_WIDTH) if header[i] in wrap else w)
        return table_width(ws) if sep is None else sum(ws) + sep * (len(ws) - 1)

    for name in drop_order:
        if need(keep) <= width:
            break
        if name in header and list(header).index(name) in keep:
            keep.remove(list(header).index(name))
    return keep


def left_out_note(header: Sequence[str], keep: Sequence[int]) -> str | None:
    """``"left out to fit: p20–p80, n (a wider terminal shows them; --json has every figure)"``,
    or None when nothing was."""
    gone = [h for i, h in enumerate(header) if i not in keep]
    if not gone:
        return None
    return (
        f"left out to fit the terminal: {', '.join(gone)} (a wider terminal, or COLUMNS=160, "
        "shows them; --json has every figure)"
    )


def terminal_width() -> int | None:
    """Columns to fit: ``COLUMNS`` when set, the terminal's width on a terminal, else None (a
    pipe or a file: no limit, so every number is kept)."""
    import os
    import shutil
    import sys

    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None
