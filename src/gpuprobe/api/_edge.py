"""The API's edge: every public function checks what it is given against its own annotations, so
that ``gpuprobe.fit(None)`` or ``gpuprobe.diagnose(None)`` is a :class:`UsageError` naming the
parameter (``step=None: give Callable[[int], Any] (got NoneType)``), not a ``TypeError`` from
deep inside. The annotations are the functions' own (strings, under ``from __future__ import
annotations``), read once on the first call; only what a value plainly is not is refused:

- a path (``PathLike``, ``Path``, ``str | os.PathLike[str]``): a ``str`` or an ``os.PathLike``;
- a function (``Callable[...]``): anything callable;
- ``int`` / ``float``: a number (``bool`` is not one); ``str``: not a number, list, tuple,
  dict, set or bytes (a ``torch.device`` stands for ``"cuda:0"``);
- ``Sequence``, ``Iterable``, ``tuple``, ``list``: anything iterable;
- gpuprobe's own types (``Timeline``, ``Diagnosis``, ...) and the rest: anything but ``None``.

``None`` is refused unless the annotation admits it. Defaults are not checked, only what the
caller passed.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

from gpuprobe.core.errors import bad_argument

__all__ = ["checked"]

F = TypeVar("F", bound=Callable[..., Any])
Check = Callable[[Any], bool]

_PATHS = frozenset({"PathLike", "Path", "os.PathLike"})
_ITERABLES = frozenset({"Sequence", "Iterable", "tuple", "list", "set", "frozenset"})


def _top_level(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _check_of(head: str) -> Check | None:
    """What a value must be for one alternative of an annotation (None: anything)."""
    if head in _PATHS:
        return lambda v: isinstance(v, (str, os.PathLike))
    if head == "Callable":
        return callable
    if head == "int":
        return lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if head == "float":
        return lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)
    if head == "str":  # a str, or what stands for one (a torch.device, a Path): not a number
        return lambda v: not isinstance(v, (numbers.Number, list, tuple, dict, set, bytes))
    if head in _ITERABLES:
        return lambda v: hasattr(v, "__iter__")
    return None


def _checks(annotation: str) -> tuple[bool, tuple[Check, ...] | None]:
    """(whether None is admitted, the checks of which one must pass; None: anything but None)."""
    alternatives = _top_level(annotation, "|")
    admits_none = "None" in alternatives or annotation in ("Any", "object")
    checks: list[Check] = []
    for alt in alternatives:
        if alt == "None":
            continue
        check = _check_of(alt.split("[", 1)[0].strip())
        if check is None:  # a type this edge does not know: only None is refused
            return admits_none, None
        checks.append(check)
    return admits_none, tuple(checks)


def checked(fn: F) -> F:
    """``fn`` with its arguments checked against its annotations (see the module docstring)."""
    plan: dict[str, tuple[str, bool, tuple[Check, ...] | None]] = {}
    sig: list[inspect.Signature] = []

    def prepare() -> inspect.Signature:
        if not sig:
            s = inspect.signature(fn)
            for p in s.parameters.values():
                if p.annotation is not p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    text = p.annotation if isinstance(p.annotation, str) else repr(p.annotation)
                    text = re.sub(r"(?<![.\w])PathLike\b", "str | os.PathLike", text)
                    plan[p.name] = (text, *_checks(text))
            sig.append(s)
        return sig[0]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = prepare().bind(*args, **kwargs)
        except TypeError:  # a missing or unknown argument: Python's own TypeError says so
            return fn(*args, **kwargs)
        for name, value in bound.arguments.items():
            if name not in plan:
                continue
            text, admits_none, checks = plan[name]
            fits = checks is None or any(c(value) for c in checks)
            if not (admits_none if value is None else fits):
                got = type(value).__name__
                raise bad_argument(name, _short(value), f"give {text} (got {got})") from None
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


class _Shown:
    """A value shown by a short repr (a long list or array is cut)."""

    def __init__(self, value: Any) -> None:
        text = repr(value)
        self.text = text if len(text) <= 60 else text[:59] + "…"

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def _short(value: Any) -> Any:
    return _Shown(value)
