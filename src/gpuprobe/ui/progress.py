"""The one progress line on stderr, for anything that takes more than a second: a spinner with a
text that updates, or a bar of bytes read or steps done. Quiet (it shows nothing and costs
nothing) when disabled or when stderr is not a terminal, so pipes and ``--json`` stay clean.

::

    with progress("gpuprobe doctor", enabled=not args.json) as p:
        doctor(progress=p.update)                    # "gpuprobe doctor: kernels on cuda:0"

    with progress("reading trace", bar="bytes") as p:
        read(progress=p.advance)                     # (done, total) in bytes
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

__all__ = ["BarKind", "Progress", "progress"]

BarKind = Literal["bytes", "steps"]


class Progress:
    """A status line on stderr; every method is a no-op when it is not shown (``active`` False).

    ``bar=None``: a spinner and ``what`` (``what: text`` after :meth:`update`; only ``text``
    with ``keep_title=False``). ``bar="bytes"``: a bar with bytes done and time left;
    ``bar="steps"``: a bar with ``done/total`` and the time elapsed.
    """

    def __init__(
        self,
        what: str,
        *,
        enabled: bool = True,
        bar: BarKind | None = None,
        keep_title: bool = True,
    ) -> None:
        self.what = what
        self.bar = bar
        self.keep_title = keep_title
        self.active = enabled and sys.stderr.isatty()
        self._live: Any = None
        self._task: Any = None

    def start(self) -> Progress:
        """Show the line (nothing when not ``active``)."""
        if not self.active or self._live is not None:
            return self
        from rich.console import Console

        con = Console(stderr=True, highlight=False, soft_wrap=False)
        if self.bar is None:
            self._live = con.status(self.what)
        else:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            columns: tuple[Any, ...] = (
                (DownloadColumn(), TimeRemainingColumn())
                if self.bar == "bytes"
                else (TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
            )
            self._live = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                *columns,
                console=con,
                transient=True,
            )
            self._task = self._live.add_task(self.what, total=None)
        self._live.start()
        return self

    def stop(self) -> None:
        """Take the line away."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def update(self, text: str) -> None:
        """Say what is running now."""
        if self._live is None:
            return
        line = f"{self.what}: {text}" if self.keep_title else text
        if self._task is None:
            self._live.update(line)
        else:
            self._live.update(self._task, description=line)

    def advance(self, done: float, total: float | None) -> None:
        """Move the bar: ``done`` of ``total`` (bytes or steps; total None: not known yet)."""
        if self._live is not None and self._task is not None:
            self._live.update(self._task, completed=done, total=total)

    def step(self, label: str, done: int, total: int) -> None:
        """Move the bar and replace its text: ``label`` and ``done`` of ``total``."""
        if self._live is not None and self._task is not None:
            self._live.update(self._task, description=label, completed=done, total=total)


@contextmanager
def progress(
    what: str,
    *,
    enabled: bool = True,
    bar: BarKind | None = None,
    keep_title: bool = True,
) -> Iterator[Progress]:
    """A :class:`Progress` shown for the ``with`` block."""
    p = Progress(what, enabled=enabled, bar=bar, keep_title=keep_title)
    with p:
        yield p
