"""The render hooks: how a result shows itself without importing its view.

A result (a model class in a tool) calls a hook here (``render.text(self)`` in its ``__str__``,
``render.html(self)`` in ``_repr_html_``); the tool's show module registers the function that draws
that type, the way IPython's display formatters take ``for_type(T, f)`` from outside ``T``::

    # tools/<tool>/model.py                     # tools/<tool>/show.py
    def __str__(self) -> str:                   render.text.register(Diagnosis, diagnosis_text)
        return render.text(self)                render.html.register(Diagnosis, diagnosis_html)

Each tool's package ``__init__`` imports its show module, so a view is registered as soon as
anything of that tool is imported: a result can never be held without its views loaded. Each hook
is a :func:`functools.singledispatch` function (subclasses inherit their parent's view).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from html import escape
from typing import Any

__all__ = [
    "MAX_REPR_CHARS",
    "Shown",
    "View",
    "header",
    "html",
    "one_line",
    "plot",
    "renderable",
    "report",
    "repr_",
    "summary",
    "table",
    "terminal",
    "text",
]


class View:
    """One way of showing results (text, HTML, a chart, ...), dispatched on the result's type.

    ``register(cls, fn)`` says how ``cls`` is shown; calling the view with a result calls the
    function registered for its type (or for the nearest parent type). A type with no registered
    function gets ``fallback(obj)`` when there is one, else a :class:`LookupError` that names the
    type and the view.
    """

    def __init__(self, name: str, fallback: Callable[[Any], Any] | None = None) -> None:
        self.name = name
        self._fallback = fallback

        def missing(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if self._fallback is not None:
                return self._fallback(obj)
            raise LookupError(
                f"no {self.name} view is registered for {type(obj).__name__} "
                "(its tool's show module registers it)"
            )

        self._dispatch = functools.singledispatch(missing)

    def register(self, cls: type, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Show ``cls`` (and its subclasses) with ``fn(obj, *args, **kwargs)``; returns ``fn``."""
        self._dispatch.register(cls, fn)
        return fn

    def __call__(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        return self._dispatch(obj, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<View {self.name}>"


MAX_REPR_CHARS = 200  # a repr is one short line (issue 27: a Diagnosis repr was 4.6k characters)


def one_line(type_name: str, text: str) -> str:
    """``<TypeName text>`` on one line of at most :data:`MAX_REPR_CHARS` characters: runs of
    white space become one space, and a text too long is cut with an ellipsis. What every
    registered ``repr_`` view returns."""
    body = " ".join(text.split())
    room = MAX_REPR_CHARS - len(type_name) - 3
    if len(body) > room:
        body = body[: room - 1].rstrip() + "…"
    return f"<{type_name} {body}>"


def _plain_repr(obj: Any) -> str:
    return object.__repr__(obj)


def _pre_html(obj: Any) -> str:
    return f"<pre>{escape(str(obj))}</pre>"


text = View("text", fallback=repr)
"""``str(result)``: the text the command prints (plain, no colour)."""
html = View("html", fallback=_pre_html)
"""``result._repr_html_()``: what Jupyter shows."""
repr_ = View("repr", fallback=_plain_repr)
"""``repr(result)`` where the one line needs a view's formatting."""
terminal = View("terminal")
"""``render.terminal(result, console=None, **options)``: print the result to a rich console (in
colour on a terminal): what the command shows."""
renderable = View("renderable")
"""A rich renderable of the result (a live screen redraws it)."""
plot = View("plot")
"""``result.plot(...)``: a chart (a figure object, or written to a path)."""
report = View("report")
"""``result.report(path)``: a page written to a file; returns its path."""
table = View("table")
"""Header and rows for people (lists of strings)."""
header = View("header")
"""The lines above a result's table."""
summary = View("summary")
"""(label, value) rows for people."""


class Shown:
    """A result's ``repr``, ``str`` and notebook HTML through the hooks above (its tool's show
    module registers the functions). A dataclass that inherits them says ``repr=False``, so that
    the generated ``__repr__`` does not replace this one."""

    def __repr__(self) -> str:
        return str(repr_(self))

    def __str__(self) -> str:
        return str(text(self))

    def _repr_html_(self) -> str:
        return str(html(self))
