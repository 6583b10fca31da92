"""Chunked reading of a JSON text too large to load whole: a trace file (plain or gzip) walked
value by value with the C JSON scanner over buffered chunks (:func:`open_text`,
:class:`Scanner`, :func:`iter_events`). Damaged input raises :class:`InputError` in one line.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

from gpuprobe.core.errors import InputError
from gpuprobe.core.text import strip_control

__all__ = ["CHUNK_CHARS", "ProgressCallback", "Scanner", "iter_events", "open_text"]

CHUNK_CHARS = 4 << 20  # characters read per chunk; 4 Mi keeps the buffer small and reads few
# What a chunk can cut short: a literal whose start ends the buffer ("fa|lse") is read on
ALL_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_read, bytes_total)`` after each chunk (compressed bytes for gzip)."""


def open_text(path: str) -> tuple[_TextOver, IO[bytes]]:
    """Open ``path`` as UTF-8 text, gunzipping when it starts with the gzip magic number.
    Returns (text stream, the raw byte stream whose position measures progress)."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller through the text stream
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a trace file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        return _TextOver(gz, raw), raw
    return _TextOver(raw, raw), raw


class _TextOver:
    """Minimal text reader over a byte stream (UTF-8, incremental), closing the raw file too."""

    def __init__(self, stream: Any, raw: IO[bytes]) -> None:
        import codecs

        self._stream = stream
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def read(self, n: int) -> str:
        data = self._stream.read(n)
        return self._decoder.decode(data, final=not data)

    def close(self) -> None:
        self._stream.close()
        self._raw.close()


class Scanner:
    """Walk a JSON text in chunks: whitespace skipping, single values, and a top-level object."""

    _WS = re.compile(r"[ \t\n\r]*")

    def __init__(
        self,
        stream: Any,
        raw: IO[bytes],
        path: str,
        total: int,
        progress: ProgressCallback | None,
    ) -> None:
        self._stream = stream
        self._raw = raw
        self.path = path
        self._total = total
        self._progress = progress
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped from the front of buf
        self._scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self._stream.read(CHUNK_CHARS)
        if not chunk:
            self.eof = True
            return False
        if self.pos:
            self.consumed += self.pos
            self.buf = self.buf[self.pos :] + chunk
            self.pos = 0
        else:
            self.buf += chunk
        if self._progress is not None:
            self._progress(self._raw.tell(), self._total)
        return True

    def peek(self) -> str:
        """The next non-whitespace character ('' at the end of the text)."""
        while True:
            m = self._WS.match(self.buf, self.pos)
            self.pos = m.end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            if not c:
                raise InputError(f"{self.path}: the trace is truncated (ends inside {what})")
            raise InputError(
                f"{self.path}: not valid JSON at character {self.consumed + self.pos}: "
                f"expected {' or '.join(repr(x) for x in chars)} in {what}, found {c!r}"
            )
        self.pos += 1
        return c

    def value(self, what: str) -> Any:
        """Decode one JSON value at the current position (reading more text as needed)."""
        self.peek()
        while True:
            try:
                obj, end = self._scan(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # more text can only help a value cut off by the chunk's end; anything else is
                # a structural error, refused here without reading the rest of the file
                cut = (
                    exc.pos >= len(self.buf) - 1
                    or exc.msg.startswith("Unterminated string")
                    or _cut_literal(self.buf[exc.pos :])
                )
                if cut and self._more():
                    continue
                self._fail(what)
            except StopIteration as stop:  # no value starts here
                cut = stop.value >= len(self.buf) - 1 or _cut_literal(self.buf[stop.value :])
                if cut and self._more():
                    continue
                self._fail(what)
            except RecursionError:
                raise InputError(
                    f"{self.path}: {what} is nested too deeply to be a profiler trace"
                ) from None
            if end >= len(self.buf) and self._more():
                continue  # a number at the end of the buffer may go on in the next chunk
            self.pos = end
            return obj

    def _fail(self, what: str) -> Any:
        """At the end of the text a value did not decode: is it cut off, or not JSON at all?"""
        rest = self.buf[self.pos :]
        try:
            json.loads(rest)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(rest.rstrip()) or exc.msg.startswith("Unterminated string"):
                raise InputError(
                    f"{self.path}: the trace is truncated (ends inside {what}); "
                    "was it written or copied completely?"
                ) from None
            raise InputError(
                f"{self.path}: not valid JSON at character {self.consumed + self.pos + exc.pos}: "
                f"{exc.msg} (in {what})"
            ) from None
        except RecursionError:
            raise InputError(f"{self.path}: {what} is nested too deeply") from None
        raise InputError(f"{self.path}: not valid JSON in {what}")

    def string(self, what: str) -> str:
        if self.peek() != '"':
            self.expect('"', what)
        key = self.value(what)
        if not isinstance(key, str):  # pragma: no cover - guarded by the peek above
            raise InputError(f"{self.path}: expected a string in {what}")
        return key


def iter_events(sc: Scanner, header: dict[str, Any]) -> Iterator[Any]:
    """Yield the trace's events; fill ``header`` with the other top-level keys."""
    first = sc.peek()
    if not first:
        raise InputError(f"{sc.path}: the file is empty")
    if first == "[":  # Chrome's JSON-array format: a bare list of events
        yield from _iter_array(sc, "the event array")
        return
    if first != "{":  # refused at the first character: the rest is never read
        if first in '-0123456789"tfn' and first != "\x00":
            raise InputError(
                f"{sc.path}: not a Kineto trace: the top level is a {first!r} value, expected an "
                "object with a 'traceEvents' array"
            )
        raise InputError(
            f"{sc.path}: not JSON (starts with {strip_control(repr(first))}); expected a PyTorch "
            "profiler trace written by export_chrome_trace or tensorboard_trace_handler"
        )
    sc.pos += 1
    seen_events = False
    if sc.peek() == "}":
        sc.pos += 1
    else:
        while True:
            key = sc.string("the top-level object")
            sc.expect(":", "the top-level object")
            if key == "traceEvents" and sc.peek() == "[":
                seen_events = True
                yield from _iter_array(sc, "traceEvents")
            else:
                header[strip_control(key)] = _clean(sc.value(f"the top-level key {key!r}"))
            if sc.expect(",}", "the top-level object") == "}":
                break
    if not seen_events:
        raise InputError(
            f"{sc.path}: not a Kineto trace: no 'traceEvents' array (keys: "
            f"{', '.join(sorted(header)[:8]) or 'none'})"
        )


def _clean(value: Any) -> Any:
    """``value`` with control characters stripped from every string in it (header values)."""
    if isinstance(value, str):
        return strip_control(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {strip_control(str(k)): _clean(v) for k, v in value.items()}
    return value


def _iter_array(sc: Scanner, what: str) -> Iterator[Any]:
    sc.expect("[", what)
    if sc.peek() == "]":
        sc.pos += 1
        return
    while True:
        yield sc.value(f"an event of {what}")
        if sc.expect(",]", what) == "]":
            return


def _cut_literal(tail: str) -> bool:
    """Whether the buffer ends inside a JSON literal (``fa`` of ``false``): more text will
    complete it (the C scanner refuses the literal's first character)."""
    return bool(tail) and any(w.startswith(tail) for w in ALL_LITERALS)
