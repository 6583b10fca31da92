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

# Levels of [ and { a document may nest. gpuprobe's own files nest at most 5 (every snapshot and
# timeline line in tests/data); 128 leaves room for users' event fields and stays far below
# CPython's recursion limit (1000, sys.getrecursionlimit), so what walks the document next has
# stack to spare.
MAX_JSON_DEPTH = 128

# A JSON string, whole, escapes included: matched at the regex engine's speed, so that brackets
# inside strings are never counted as nesting.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRINGS = re.compile(_STRING, re.DOTALL)
_TOKENS = re.compile(_STRING + r"|[\[\]{}]", re.DOTALL)  # a string or one bracket
# Outside its strings, valid JSON holds only these besides brackets (numbers, true/false/null,
# separators, whitespace; json.loads also takes NaN and Infinity): deleted by str.translate.
_OTHER = str.maketrans("", "", " \t\n\r,:0123456789.+-eEtruflsnNaIiy")
_PAIRS = re.compile(r"\[\]|\{\}")  # an innermost level, once strings and the rest are out
# More digits in a row than CPython turns into an int (sys.get_int_max_str_digits, 4300 by default)
_LONG = re.compile(r"\d{4301,}")


def _text(doc: str | bytes) -> str:
    """``doc`` as text, decoded as ``json.loads`` decodes bytes (UTF-8, -16 or -32)."""
    if isinstance(doc, str):
        return doc
    return doc.decode(json.detect_encoding(doc), "surrogatepass")


def _deeper_than(text: str, max_depth: int) -> bool:
    """Whether valid JSON ``text`` nests more than ``max_depth`` levels, with no Python step per
    bracket: strings out, all but brackets out, then each pass removes the innermost level
    (``[[]]`` → ``[]`` → nothing), at most ``max_depth`` passes."""
    t = _STRINGS.sub("", text).translate(_OTHER)
    for _ in range(max_depth):
        t = _PAIRS.sub("", t)
        if not t:
            return False
    return True


def _too_deep_at(text: str, max_depth: int) -> int:
    """The offset of the first bracket that opens level ``max_depth + 1`` (0 if none does)."""
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif c in "]}":
            depth -= 1
    return 0


def _error(msg: str, text: str, pos: int) -> json.JSONDecodeError:
    """A JSONDecodeError at character ``pos`` of ``text`` (its line and column counted there)."""
    return json.JSONDecodeError(msg, text[:pos], pos)


def _too_deep(text: str, max_depth: int) -> json.JSONDecodeError:
    return _error(f"nested deeper than {max_depth} levels", text, _too_deep_at(text, max_depth))


def loads(doc: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(doc)``, but every way the text can be bad raises :class:`json.JSONDecodeError`
    (a ``ValueError``): nesting deeper than ``max_depth`` levels, a number with more digits than
    CPython converts, bytes that are not UTF-8, and what ``json.loads`` itself refuses."""
    try:
        obj = json.loads(doc)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _too_deep(_text(doc), max_depth) from None
    except UnicodeDecodeError as exc:  # bytes: the position is a byte's, counted in what decodes
        head = doc[: exc.start].decode("utf-8", "replace") if isinstance(doc, bytes) else ""
        raise _error(f"not UTF-8 text ({exc.reason})", head, len(head)) from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        text = _text(doc)
        if "digits" not in str(exc):
            raise _error(str(exc), text, 0) from None
        digits = _LONG.search(text)
        raise _error("a number too long to read", text, digits.start() if digits else 0) from None
    if isinstance(doc, bytes):  # the count bounds the depth, and needs no decoding
        many = doc.count(b"[") + doc.count(b"{") > max_depth
    else:
        many = doc.count("[") + doc.count("{") > max_depth
    if many:  # only a document with many brackets is measured, level by level
        text = _text(doc)
        if _deeper_than(text, max_depth):
            raise _too_deep(text, max_depth)
    return obj
