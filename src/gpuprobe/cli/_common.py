"""Helpers shared by the command modules: the console, JSON output, progress."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["console", "print_json", "progress"]


def console(stderr: bool = False) -> Any:
    """A rich console (imported lazily to keep --help fast)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to stdout."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


@contextmanager
def progress(enabled: bool, what: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while something runs; yields a function that updates its text."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _msg: None
        return
    from rich.status import Status

    with Status(what, console=console(stderr=True)) as status:
        yield lambda msg: status.update(f"{what}: {msg}")
