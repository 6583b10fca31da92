"""Chunked reading of a JSON trace too large to load whole, plain or gzip, in two gears.

- **Fast**: the ``traceEvents`` array is cut into batches of whole events (at the last ``}, {``
  of the buffer) and each batch is decoded by msgspec straight into :class:`Event` structs that
  hold only the fields the reader uses. A cut that is not between two events (inside a string,
  inside an event's ``args``) cannot decode, so it is never taken: the next cut back is tried.
- **Exact**: the stdlib's C scanner over decoded text, value by value (:class:`Scanner`): the
  top-level object's other keys, a batch msgspec refused (a number out of range, ``NaN``, damage),
  and the array's end. Its errors say where the text is damaged, in one line.

Memory stays bounded by a few chunks: the buffer never holds more than the unread part of a
chunk and one value, and no value over :data:`MAX_VALUE_BYTES` is read (:func:`iter_batches`).
"""

from __future__ import annotations

import codecs
import gzip
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import IO, Any

import msgspec

from gpuprobe.core.errors import InputError
from gpuprobe.core.text import strip_control

__all__ = [
    "CHUNK_BYTES",
    "MAX_VALUE_BYTES",
    "Args",
    "Event",
    "ProgressCallback",
    "Scanner",
    "Source",
    "iter_batches",
]

CHUNK_BYTES = 1 << 20  # bytes (decompressed) read per chunk: ~4k events per msgspec call; 4 MiB
# took 25 % more CPU on a 650 MB trace (benchmarks/reader_throughput.py), the system's part
# 2-3x: each chunk's fresh buffers were new pages to fault in, 1 MiB ones are reused
MAX_VALUE_BYTES = 16 << 20  # bytes; one event or header value longer is refused: a profiler's
# events are under 10 kB (the largest of the 51 real traces in benchmarks/: 1.3 kB), so this is a
# damaged or hostile file, and reading on would need memory and time without bound
SPLIT_TRIES = 4  # cuts tried for one batch before the exact gear reads it
EXACT_BATCH = 1024  # events the exact gear hands on at a time
# What a chunk can cut short: a literal whose start ends the buffer ("fa|lse") is read on
ALL_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_read, bytes_total)`` after each chunk (compressed bytes for gzip)."""

UNSET = msgspec.UNSET
_NO_RAW = msgspec.Raw(b"")


class Args(msgspec.Struct, gc=False):
    """The ``args`` of an event, the keys the reader uses (others are skipped while decoding).
    Defaults are what the reader assumes when a key is absent; the op inputs stay raw JSON,
    decoded only for the few ops that need them (:func:`raw_value`)."""

    correlation: Any = -1
    device: Any = UNSET
    stream: Any = UNSET
    sycl_queue: Any = msgspec.field(default=UNSET, name="sycl queue")
    bytes: Any = 0.0
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_strides: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Strides")
    device_type: Any = msgspec.field(default=0, name="Device Type")
    device_id: Any = msgspec.field(default=-1, name="Device Id")
    total_allocated: Any = msgspec.field(default=UNSET, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=UNSET, name="Total Reserved")
    delta_bytes: Any = msgspec.field(default=0.0, name="Bytes")


AnyJson = None | bool | int | float | str | list[Any]
# a time: JSON numbers decoded as floats (an integer's nearest float, as ``float(int)`` gives),
# so the reader's hot loop never converts one; other JSON values as they are
TimeJson = float | None | bool | str | list[Any] | dict[str, Any]


class Event(msgspec.Struct, gc=False):
    """One trace event, the fields the reader uses; ``name``, ``pid`` and ``tid`` are UNSET
    when absent (``null`` is None), ``args`` is
    whatever JSON value the event has there (an :class:`Args` when an object). ``ts`` and
    ``dur`` hold a JSON number as a float."""

    ph: Any = None
    cat: Any = None
    name: Any = UNSET
    ts: TimeJson = None
    dur: TimeJson = 0.0
    pid: Any = UNSET
    tid: Any = UNSET
    args: Args | AnyJson = None


class LooseEvent(Event, gc=False):
    """An :class:`Event` whose times are any JSON value, as written: for the rare batch whose
    times the fast decoder refuses (an integer past a float's range, skipped as a time but
    kept in the event's other fields)."""

    ts: Any = None
    dur: Any = 0.0


BROKEN = "\x00broken"  # the ``ph`` of an event the exact gear could not express as an Event

_BATCH = msgspec.json.Decoder(list[Event | AnyJson])
_ONE = msgspec.json.Decoder(Event | AnyJson)
_BATCH_LOOSE = msgspec.json.Decoder(list[LooseEvent | AnyJson])
_ONE_LOOSE = msgspec.json.Decoder(LooseEvent | AnyJson)
_ENCODE = msgspec.json.Encoder()  # NaN and ±Infinity become null: values the reader skips
_ERR_BYTE = re.compile(r"\(byte (\d+)\)")
_SEP = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")  # an event's end, a comma, the next's start
_CUT_WINDOW = 1 << 16  # bytes searched back from the buffer's end for a cut, then 4x more


def raw_value(raw: msgspec.Raw) -> Any:
    """The JSON value of a raw field (None when absent); ValueError when it does not decode."""
    if not raw:
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.MsgspecError as exc:
        raise ValueError(str(exc)) from None


def _int_or_inf(text: str) -> int | float:
    """A JSON integer, or ±inf when it has more digits than Python converts (4300): skipped by
    the reader like any out-of-range value, never a ``ValueError`` traceback."""
    try:
        return int(text)
    except ValueError:
        return -math.inf if text.startswith("-") else math.inf


def _to_event(value: Any) -> Any:
    """A value from the exact gear as the fast gear would have decoded it."""
    if not isinstance(value, dict):
        return value
    try:
        data = _ENCODE.encode(value)
        try:
            return _ONE.decode(data)
        except msgspec.ValidationError:  # a time out of a float's range: kept as written
            return _ONE_LOOSE.decode(data)
    except (msgspec.MsgspecError, UnicodeError, OverflowError, TypeError, ValueError):
        cat = value.get("cat")
        return Event(ph=BROKEN, cat=cat if isinstance(cat, str) else None)


class Source:
    """The trace's bytes (gunzipped when it starts with the gzip magic number), a buffer of what
    is read and not yet consumed (``buf[pos:]``) and the progress callback."""

    def __init__(self, path: str, progress: ProgressCallback | None = None) -> None:
        self.path = path
        raw = _open_regular(path)
        try:
            self.total = os.fstat(raw.fileno()).st_size
            magic = raw.read(2)
            raw.seek(0)
        except OSError as exc:
            raw.close()
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        self._raw = raw
        self._stream: Any = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        self._progress = progress
        self.buf = bytearray()
        self.pos = 0
        self.base = 0  # bytes dropped from the front of buf
        self.eof = False

    def fill(self, want: int) -> bool:
        """Read until ``want`` bytes lie past ``pos`` (or the end); False when nothing came."""
        if self.pos:
            del self.buf[: self.pos]
            self.base += self.pos
            self.pos = 0
        got = False
        while not self.eof and len(self.buf) < want:
            chunk = self._stream.read(max(CHUNK_BYTES, want - len(self.buf)))
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
            got = True
            if self._progress is not None:
                self._progress(self._raw.tell(), self.total)
        return got

    def close(self) -> None:
        self._stream.close()
        self._raw.close()


def _open_regular(path: str) -> IO[bytes]:
    """Open ``path`` for reading if it is a regular file; a FIFO, socket or device is refused
    before it is opened (reading one would block or never end)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{path}: is a {file_kind(st.st_mode)}, not a trace file; give a .json or .json.gz file"
        )
    try:
        return open(path, "rb")  # closed by Source.close
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, kind in (
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
    ):
        if test(mode):
            return kind
    return "special file"


class Scanner:
    """The exact gear: a window of decoded text from ``source.pos`` walked value by value with
    the C JSON scanner. The window grows by doubling, so a value cut by the window's end is
    re-scanned O(log n) times, not once per chunk (quadratic), and never past
    :data:`MAX_VALUE_BYTES`."""

    _WS = re.compile(r"[ \t\n\r]*")

    def __init__(self, source: Source) -> None:
        self.src = source
        self.path = source.path
        self.buf = ""
        self.pos = 0
        self._ascii = True
        # C's own integers first; the Python hook (a call per integer: 3 ms for a header of 3,300
        # ranks) only for a value holding an integer past Python's 4,300 digits
        self._fast = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
        self._hooked = json.JSONDecoder(parse_int=_int_or_inf).scan_once  # type: ignore[attr-defined]
        self.escaped = False  # whether the last value() held a backslash escape
        self.rescans = 0  # windows decoded (the test of linear work counts them)
        self.walked = 0  # characters walked since the last reopen
        self._decode()

    def _decode(self) -> None:
        src = self.src
        try:
            self.buf, n = codecs.utf_8_decode(src.buf[src.pos :], "strict", src.eof)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{self.path}: not a text trace (byte {src.base + src.pos + exc.start} is not "
                "UTF-8); expected JSON, or JSON compressed with gzip"
            ) from None
        self._ascii = n == len(self.buf)
        self.pos = 0
        self.rescans += 1

    def _bytes(self, chars: int) -> int:
        return chars if self._ascii else len(self.buf[:chars].encode("utf-8", "surrogatepass"))

    def byte_at(self, chars: int) -> int:
        """The byte offset in the file of character ``chars`` of the window."""
        return self.src.base + self.src.pos + self._bytes(chars)

    def commit(self) -> None:
        """Hand what was walked back to the source: its ``pos`` moves past it, the window empties."""
        self.src.pos += self._bytes(self.pos)
        self.walked += self.pos
        self.buf = self.buf[self.pos :]
        self._ascii = self._ascii or self.buf.isascii()
        self.pos = 0

    def reopen(self) -> None:
        """Start the window again at ``source.pos`` (after the fast gear moved it)."""
        self.walked = 0
        self._decode()

    def _more(self) -> bool:
        self.commit()
        src = self.src
        have = len(src.buf) - src.pos
        if have > MAX_VALUE_BYTES:
            raise InputError(
                f"{self.path}: a value at byte {src.base + src.pos} is longer than "
                f"{MAX_VALUE_BYTES >> 20} MiB (a profiler's events are under 10 kB); the file "
                "is damaged or not a profiler trace"
            )
        if not src.fill(min(have + max(CHUNK_BYTES, have), MAX_VALUE_BYTES + CHUNK_BYTES)):
            return False
        self._decode()
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
                f"{self.path}: not valid JSON at byte {self.byte_at(self.pos)}: "
                f"expected {' or '.join(repr(x) for x in chars)} in {what}, found {c!r}"
            )
        self.pos += 1
        return c

    def _scan(self, buf: str, pos: int) -> tuple[Any, int]:
        try:
            return self._fast(buf, pos)
        except json.JSONDecodeError:
            raise
        except ValueError:  # "Exceeds the limit (4300 digits)": that value, with the hook
            return self._hooked(buf, pos)

    def value(self, what: str) -> Any:
        """Decode one JSON value at the current position (reading more text as needed)."""
        self.peek()
        while True:
            try:
                obj, end = self._scan(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # more text can only help a value cut off by the window's end; anything else is
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
                continue  # a number at the end of the window may go on in the next chunk
            # a control character can only come from an escape (strict JSON has no raw ones)
            self.escaped = self.buf.find("\\", self.pos, end) >= 0
            self.pos = end
            return obj

    def _fail(self, what: str) -> Any:
        """At the end of the text a value did not decode: is it cut off, or not JSON at all?"""
        rest = self.buf[self.pos :]
        try:
            json.loads(rest, parse_int=_int_or_inf)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(rest.rstrip()) or exc.msg.startswith("Unterminated string"):
                raise InputError(
                    f"{self.path}: the trace is truncated (ends inside {what}); "
                    "was it written or copied completely?"
                ) from None
            raise InputError(
                f"{self.path}: not valid JSON at byte {self.byte_at(self.pos + exc.pos)}: "
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


def iter_batches(
    src: Source, header: dict[str, Any], notes: list[str] | None = None
) -> Iterator[list[Any]]:
    """Yield the trace's events in lists (each an :class:`Event`, or the JSON value it was when
    not an object); fill ``header`` with the other top-level keys. What follows the trace's
    end other than whitespace (a second trace written into the file, text appended) is not
    read: it is said in ``notes``."""
    src.fill(CHUNK_BYTES)
    sc = Scanner(src)
    first = sc.peek()
    if not first:
        raise InputError(f"{src.path}: the file is empty")
    if first == "[":  # Chrome's JSON-array format: a bare list of events
        sc.pos += 1
        yield from _array(sc)
        _after_end(sc, notes)
        return
    if first != "{":  # refused at the first character: the rest is never read
        if first in '-0123456789"tfn' and first != "\x00":
            raise InputError(
                f"{src.path}: not a Kineto trace: the top level is a {first!r} value, expected an "
                "object with a 'traceEvents' array"
            )
        raise InputError(
            f"{src.path}: not JSON (starts with {strip_control(repr(first))}); expected a PyTorch "
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
                sc.pos += 1
                yield from _array(sc)
            else:
                value = sc.value(f"the top-level key {key!r}")
                header[strip_control(key)] = _clean(value) if sc.escaped else value
            if sc.expect(",}", "the top-level object") == "}":
                break
    if not seen_events:
        raise InputError(
            f"{src.path}: not a Kineto trace: no 'traceEvents' array (keys: "
            f"{', '.join(sorted(header)[:8]) or 'none'})"
        )
    _after_end(sc, notes)


def _after_end(sc: Scanner, notes: list[str] | None) -> None:
    """Say in ``notes`` what the file holds after the trace's closing bracket, if anything."""
    c = sc.peek()
    if not c or notes is None:
        return
    what = (
        "a second JSON document: two traces written into one file? split them to read both"
        if c in "{["
        else "text that is not part of the trace"
    )
    notes.append(
        f"more data after the trace's end, from byte {sc.byte_at(sc.pos):,} ({what}): not read"
    )


def _array(sc: Scanner) -> Iterator[list[Any]]:
    """The events of an array whose ``[`` was just read; returns with the ``]`` read too."""
    if sc.peek() == "]":
        sc.pos += 1
        return
    src = sc.src
    while True:
        sc.commit()
        sc.buf = ""  # the fast gear reads the bytes; the exact gear decodes them again after it
        limit: int | None = None  # bytes the exact gear reads before the fast gear goes on
        while True:
            batch, limit = _fast(src)
            if batch is None:
                break
            yield batch
        sc.reopen()
        while True:
            out: list[Any] = []
            while True:
                out.append(_to_event(sc.value("an event of traceEvents")))
                end = sc.expect(",]", "traceEvents") == "]"
                done = limit is not None and sc.walked + sc.pos >= limit
                if end or done or len(out) >= EXACT_BATCH:
                    break
            yield out
            if end:
                return
            if done:
                break  # back to the fast gear


def _fast(src: Source) -> tuple[list[Any] | None, int | None]:
    """The next batch of whole events from ``src.pos`` (just after a ``[`` or a ``,``), or
    (None, bytes the exact gear should read): at the array's last event, when no cut
    decodes, or when an event is longer than two chunks."""
    if len(src.buf) - src.pos < CHUNK_BYTES // 2:  # what is left of a chunk: top it up
        src.fill(CHUNK_BYTES)
    lo = src.pos
    cut = _last_cut(src.buf, lo, len(src.buf))
    if cut is None and not src.eof:  # one more chunk: the event in hand may end in it
        src.fill(len(src.buf) - src.pos + CHUNK_BYTES)
        lo = src.pos
        cut = _last_cut(src.buf, lo, len(src.buf))
    if cut is None:  # the array's last event (at the end of the text), or no event boundary
        return None, None if src.eof else len(src.buf) - lo
    hi = cut[0] + 1
    for _ in range(SPLIT_TRIES):
        with memoryview(src.buf) as mv:  # one copy (msgspec's Raw fields may outlive the
            # buffer), into bytes: a join is 2-3x faster than filling a fresh bytearray
            data = b"".join((b"[", mv[lo:hi], b"]"))
        batch: list[Any]
        try:
            try:
                batch = _BATCH.decode(data)
            except msgspec.ValidationError:  # a time out of a float's range: kept as written
                batch = _BATCH_LOOSE.decode(data)
        except (msgspec.ValidationError, RecursionError):  # a number out of range, deep nesting
            return None, hi - lo
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            m = _ERR_BYTE.search(str(exc))
            # a cut inside a string or an event's args: the error lies at or after the cut
            stop = lo - 1 + int(m.group(1)) if m else hi - 1
            cut = _last_cut(src.buf, lo, min(stop, hi - 1))
            if cut is None:
                return None, hi - lo
            hi = cut[0] + 1
            continue
        src.pos = cut[1]
        return batch, None
    return None, hi - lo


def _last_cut(buf: bytearray, lo: int, hi: int) -> tuple[int, int] | None:
    """The last ``}, {`` in ``buf[lo:hi]``: (index of its ``}``, index of its ``{``). Searched
    back from ``hi`` in windows growing 4x, so the usual cut costs one small window."""
    w = _CUT_WINDOW
    while True:
        s = max(lo, hi - w)
        last = None
        for m in _SEP.finditer(buf, s, hi):
            last = m
        if last is not None:
            return last.start(), last.end() - 1
        if s == lo:
            return None
        w *= 4


def _clean(value: Any) -> Any:
    """``value`` with control characters stripped from every string in it (header values)."""
    if isinstance(value, str):
        return strip_control(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {strip_control(str(k)): _clean(v) for k, v in value.items()}
    return value


def _cut_literal(tail: str) -> bool:
    """Whether the buffer ends inside a JSON literal (``fa`` of ``false``): more text will
    complete it (the C scanner refuses the literal's first character)."""
    return bool(tail) and any(w.startswith(tail) for w in ALL_LITERALS)
