"""JSON from a file a user gives: every failure a :class:`json.JSONDecodeError`, never a
``RecursionError``.

``json.loads`` recurses once per level of nesting: 100 000 ``[`` end it with a ``RecursionError``
(not a ``ValueError``, so ``except ValueError`` around it does not catch it and the user sees a
traceback), and a document just under the interpreter's limit loads but leaves too little stack
for whatever walks it next (``from_dict``, ``json.dumps``, a pretty printer). Other failures are
``ValueError`` without a position: a number of more than 4300 digits (CPython's
``sys.get_int_max_str_digits``), bytes that are not UTF-8.

:func:`loads` is ``json.loads`` for such files: a document nested deeper than
:data:`MAX_JSON_DEPTH` and each of those failures raise :class:`json.JSONDecodeError` with a
message for people and where it happened, so a caller's ``except ValueError`` (or ``except
json.JSONDecodeError``) turns any bad file into its one-line error. Everything gpuprobe reads back
(an inventory snapshot, a timeline line, a bench history's environment, the profile hook's control
files) goes through it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "loads"]

# Levels of [ and { a document may nest. gpuprobe's own files nest at most 6 (an inventory's
# gpus → MIG instances); 128 leaves room for users' event fields and stays far below CPython's
# recursion limit (1000, sys.getrecursionlimit), so whatever walks the document next has stack.
MAX_JSON_DEPTH = 128

# A string (whole, escapes included) or one bracket: strings are skipped at the regex engine's
# speed, so brackets inside them are not counted.
_TOKEN = r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]'
_TOKENS = re.compile(_TOKEN, re.DOTALL)
_TOKENS_B = re.compile(_TOKEN.encode(), re.DOTALL)
# More digits in a row than CPython turns into an int (sys.get_int_max_str_digits, 4300 by default)
_LONG = re.compile(r"\d{4301,}")
_LONG_B = re.compile(rb"\d{4301,}")


def _too_deep_at(text: str | bytes, max_depth: int) -> int | None:
    """The offset of the first bracket that opens level ``max_depth + 1``, or None."""
    depth = 0
    tokens = _TOKENS_B.finditer(text) if isinstance(text, bytes) else _TOKENS.finditer(text)
    for m in tokens:
        c = m.group()[:1]
        if c in ("[", "{", b"[", b"{"):
            depth += 1
            if depth > max_depth:
                return m.start()
        elif c in ("]", "}", b"]", b"}"):
            depth -= 1
    return None


def _error(msg: str, text: str | bytes, pos: int) -> json.JSONDecodeError:
    """A JSONDecodeError at ``pos`` (an offset in ``text``, bytes or characters): its line and
    column are counted in the text before it."""
    head = text[:pos]
    doc = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    return json.JSONDecodeError(msg, doc, len(doc))


def _openers(text: str | bytes) -> int:
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{")
    return text.count("[") + text.count("{")


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, but every way the text can be bad raises :class:`json.JSONDecodeError`
    (a ``ValueError``): nesting deeper than ``max_depth`` levels, a number with more digits than
    CPython converts, bytes that are not UTF-8, and what ``json.loads`` itself refuses."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        pos = _too_deep_at(text, max_depth)
        raise _error(f"nested deeper than {max_depth} levels", text, pos or 0) from None
    except UnicodeDecodeError as exc:
        raise _error(f"not UTF-8 text ({exc.reason})", text, exc.start) from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        if "digits" not in str(exc):
            raise _error(str(exc), text, 0) from None
        digits = _LONG_B.search(text) if isinstance(text, bytes) else _LONG.search(text)
        raise _error("a number too long to read", text, digits.start() if digits else 0) from None
    # The count is C-speed and bounds the depth: only a document with many brackets is scanned.
    if _openers(text) > max_depth:
        pos = _too_deep_at(text, max_depth)
        if pos is not None:
            raise _error(f"nested deeper than {max_depth} levels", text, pos)
    return obj
