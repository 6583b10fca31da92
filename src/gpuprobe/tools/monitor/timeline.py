"""The timeline on disk: append-only JSON Lines, and a reader that keeps what is whole.

Format (``timeline.jsonl``, UTF-8, one JSON object per line, ``type`` first):

- line 1, ``{"type": "header", "schema": "gpuprobe.timeline", "version": 1, "started": ...,
  "hz": ..., "host": {...}, "driver": {...}, "gpus": [...], "command": [...], "pid": ...}``
  (:class:`~gpuprobe.tools.monitor.records.TimelineHeader`);
- one ``{"type": "sample", "t": ..., "host": {...}, "tree": {...}, "gpus": [...],
  "sampler_cpu_s": ...}`` per tick (:class:`~gpuprobe.tools.monitor.records.Sample`);
- ``{"type": "event", "t": ..., "kind": "start" | "process" | "signal" | "exit" | ..., ...}``
  whenever something happens (a process joins the tree, a signal is forwarded);
- last, when the recording ended cleanly, ``{"type": "end", "t": ..., "exit_code": ...,
  "samples": ..., "missed_ticks": ..., "sampler_cpu_s": ..., "sampler_wall_s": ...,
  "sampler_parts_cpu_s": {"host": ..., "tree": ..., "gpu": ...}, "nvml_call_ms": {ENTRY POINT:
  {"calls": ..., "wall_ms": ..., "cpu_ms": ...}, ...}}`` (where the sampler's CPU went; older
  recordings lack the last two).

The writer flushes to the OS at least every :data:`FLUSH_INTERVAL_S` and ``fsync``\\ s every
:data:`FSYNC_INTERVAL_S`, so a killed gpuprobe leaves every sample up to the last flush. The reader
keeps every whole line and reports what it dropped (a truncated last line, a damaged one).
The file is created 0600, and its folder 0700 when the writer makes it: the header holds the
command line, which may carry a token.
Times are seconds since the epoch.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprobe.core import render, safejson
from gpuprobe.core.errors import InputError
from gpuprobe.core.files import PRIVATE_FILE_MODE, private_dir
from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.tools.monitor.records import (
    TIMELINE_SCHEMA,
    TIMELINE_VERSION,
    GpuProcSample,
    GpuTick,
    HostSample,
    ProcSample,
    Sample,
    TimelineHeader,
    TreeSample,
)

__all__ = [
    "FLUSH_INTERVAL_S",
    "FSYNC_INTERVAL_S",
    "TIMELINE_NAME",
    "Timeline",
    "TimelineWriter",
    "find_timeline",
    "parse_timeline",
    "read_timeline",
    "sample_from_dict",
]

TIMELINE_NAME = "timeline.jsonl"
FLUSH_INTERVAL_S = (
    1.0  # s; the most a killed gpuprobe may lose (the issue: "at least every second")
)
FSYNC_INTERVAL_S = 10.0  # s; a power cut loses at most this much; fsync can take ms on a busy disk


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class TimelineWriter:
    """Appends lines to a new timeline file; safe to call from the sampler thread and the main
    thread at once (one lock).

    A write that fails (a full disk, a quota, a file size limit) never raises: the writer keeps
    every whole line that fitted, cuts off a line it could only half write, stops writing, says so
    once on stderr and keeps the reason in :attr:`error` (the watched command keeps running)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._fd: int | None = os.open(
                self.path,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                PRIVATE_FILE_MODE,  # it holds the command line, which may carry a token
            )
        except FileExistsError:
            raise InputError(
                f"{self.path} already holds a recording; give another --out directory"
            ) from None
        except OSError as exc:
            raise InputError(
                f"cannot write {self.path}: {exc.strerror or exc}; give a writable --out"
            ) from None
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._size = 0  # bytes of whole lines on disk
        self._last_flush = time.monotonic()
        self._last_fsync = self._last_flush
        self.lines = 0
        self.error: str | None = None  # why writing stopped, when it did

    @classmethod
    def create(cls, out_dir: str | Path) -> TimelineWriter:
        """Make ``out_dir`` (and parents) and a new timeline in it; refuse clearly if either is
        not possible, before anything is started."""
        out = Path(out_dir)
        try:
            if out.exists() and not out.is_dir():
                raise InputError(f"--out {out} is a file, not a directory; give a directory")
            private_dir(out)  # 0700 when made here: the run's files hold its command line
        except OSError as exc:
            raise InputError(
                f"cannot create --out {out}: {exc.strerror or exc}; give a writable directory"
            ) from None
        return cls(out / TIMELINE_NAME)

    def _flush_locked(self, *, sync: bool) -> None:
        if self._fd is None or not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        base, done = self._size, 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
            self._size = base + done
            if sync:
                os.fsync(self._fd)
                self._last_fsync = time.monotonic()
        except OSError as exc:
            self._stop_writing(exc, whole=base + data.rfind(b"\n", 0, done) + 1)

    def _stop_writing(self, exc: OSError, *, whole: int) -> None:
        """Keep the whole lines on disk (``whole`` bytes), close, remember and say why."""
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, whole)  # no half line: the reader would count it as damaged
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None
        self._size = whole
        why = exc.strerror or str(exc)
        self.error = f"cannot write {self.path}: {why}"
        hint = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        with contextlib.suppress(OSError, ValueError):  # stderr may be gone too
            sys.stderr.write(
                f"gpuprobe: {self.error}{hint}; recording stopped with {whole} bytes kept, "
                "the command keeps running\n"
            )
            sys.stderr.flush()

    def _write(self, obj: dict[str, Any], *, force_flush: bool = False) -> None:
        line = (_dumps(obj) + "\n").encode("utf-8", "surrogateescape")
        with self._lock:
            if self._fd is None:
                return
            self._pending.append(line)
            self.lines += 1
            now = time.monotonic()
            if force_flush or now - self._last_flush >= FLUSH_INTERVAL_S:
                self._last_flush = now
                self._flush_locked(sync=force_flush or now - self._last_fsync >= FSYNC_INTERVAL_S)

    def write_header(self, header: TimelineHeader) -> None:
        """The first line; flushed and synced at once so that even a run killed at once leaves a
        readable file."""
        self._write({"type": "header", **header.to_dict()}, force_flush=True)

    def write_sample(self, sample: Sample) -> None:
        """One tick (flushed when the last flush is a second old)."""
        self._write({"type": "sample", **sample.to_dict()})

    def write_event(self, kind: str, *, t: float | None = None, **fields: Any) -> None:
        """Something that happened: written and flushed at once."""
        self._write(
            {"type": "event", "t": time.time() if t is None else t, "kind": kind, **fields},
            force_flush=True,
        )

    def write_end(self, **fields: Any) -> None:
        """The last line of a recording that ended cleanly."""
        self._write({"type": "end", "t": time.time(), **fields}, force_flush=True)

    def close(self) -> None:
        """Flush, sync and close."""
        with self._lock:
            if self._fd is None:
                return
            self._flush_locked(sync=True)
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    def __enter__(self) -> TimelineWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- reading ------------------------------------------------------------------------------------


MAX_CORES = 4096  # host cores one sample may carry (the largest machines have ~2,000 threads)
MAX_CHILDREN = 4096  # processes in the watched tree one sample may carry
MAX_GPUS = 64  # GPUs one sample may carry; a sample past any bound is damaged


def _num(v: Any) -> float:
    """A finite float; ValueError otherwise (NaN, inf, a string, a bool)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{v!r} is not a number")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{v!r} is not a finite number")
    return f


_END_NUMBERS = (
    "exit_code",
    "duration_s",
    "samples",
    "missed_ticks",
    "sampler_cpu_s",
    "sampler_wall_s",
)


def _is_num(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _opt(v: Any) -> Any:
    """``None``, or a finite number (kept as read)."""
    if v is None:
        return None
    _num(v)
    return v


def _seq(v: Any, limit: int, what: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"{what} is not a list")
    if len(v) > limit:
        raise ValueError(f"{what} has {len(v)} entries, more than {limit}")
    return v


def _obj(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ValueError(f"{what} is not an object")
    return v


def _gpu_sample(d: dict[str, Any]) -> GpuSample:
    d = _obj(d, "a GPU sample")
    reasons = d.get("clock_event_reasons")
    return GpuSample(
        index=int(_num(d["index"])),
        time=_num(d.get("time", 0.0)),
        utilization_gpu=_opt(d.get("utilization_gpu")),
        utilization_memory=_opt(d.get("utilization_memory")),
        memory_used=_opt(d.get("memory_used")),
        power_w=_opt(d.get("power_w")),
        temperature_c=_opt(d.get("temperature_c")),
        sm_clock_mhz=_opt(d.get("sm_clock_mhz")),
        mem_clock_mhz=_opt(d.get("mem_clock_mhz")),
        clock_event_reasons=tuple(str(r) for r in _seq(reasons, 64, "clock_event_reasons"))
        if reasons is not None
        else None,
        pcie_gen=_opt(d.get("pcie_gen")),
        pcie_width=_opt(d.get("pcie_width")),
        pcie_rx_kbs=_opt(d.get("pcie_rx_kbs")),
        pcie_tx_kbs=_opt(d.get("pcie_tx_kbs")),
    )


def sample_from_dict(d: dict[str, Any]) -> Sample:
    """A :class:`Sample` from its JSON form (a hand-written decoder: ~10x faster than
    ``Record.from_dict`` on long recordings). A damaged sample (a wrong type, a number that is
    not finite, more than :data:`MAX_CORES` cores...) raises ValueError: the reader skips it."""
    h = _obj(d.get("host") or {}, "host")
    host = HostSample(
        cpu_percent=tuple(_num(x) for x in _seq(h.get("cpu_percent"), MAX_CORES, "cpu_percent")),
        memory_used=_opt(h.get("memory_used")),
        memory_available=_opt(h.get("memory_available")),
        swap_used=_opt(h.get("swap_used")),
    )
    tr = d.get("tree")
    tree = None
    if tr is not None:
        tr = _obj(tr, "tree")
        tree = TreeSample(
            cpu_percent=_num(tr.get("cpu_percent", 0.0)),
            rss=int(_num(tr.get("rss", 0))),
            threads=int(_num(tr.get("threads", 0))),
            processes=int(_num(tr.get("processes", 0))),
            read_bps=_opt(tr.get("read_bps")),
            write_bps=_opt(tr.get("write_bps")),
            main_cpu_percent=_num(tr.get("main_cpu_percent", 0.0)),
            main_thread_max_percent=_opt(tr.get("main_thread_max_percent")),
            main_thread_runnable_percent=_opt(tr.get("main_thread_runnable_percent")),
            children=tuple(
                ProcSample(
                    pid=int(_num(_obj(c, "a child")["pid"])),
                    cpu_percent=_num(c.get("cpu_percent", 0.0)),
                    rss=_opt(c.get("rss")),
                    threads=_opt(c.get("threads")),
                )
                for c in _seq(tr.get("children"), MAX_CHILDREN, "children")
            ),
        )
    gpus = tuple(
        GpuTick(
            sample=_gpu_sample(_obj(g, "a GPU")["sample"]),
            processes=tuple(
                GpuProcSample(
                    pid=int(_num(_obj(p, "a GPU process")["pid"])),
                    used_memory=_opt(p.get("used_memory")),
                    sm_percent=_opt(p.get("sm_percent")),
                )
                for p in _seq(g.get("processes"), MAX_CHILDREN, "GPU processes")
            ),
        )
        for g in _seq(d.get("gpus"), MAX_GPUS, "gpus")
    )
    return Sample(
        t=_num(d["t"]),
        host=host,
        tree=tree,
        gpus=gpus,
        sampler_cpu_s=_num(d.get("sampler_cpu_s", 0.0)),
    )


@dataclass
class Timeline:
    """A recording read back: the header, every whole sample, the events, and the end line if the
    recording ended cleanly. ``dropped_lines``/``dropped_bytes`` say what could not be read."""

    header: TimelineHeader
    samples: list[Sample] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    path: Path | None = None
    dropped_lines: int = 0
    dropped_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def plot(self, path: str | Path | None = None, *, panels: tuple[str, ...] | None = None) -> Any:
        """The charts as a matplotlib Figure (Jupyter shows it inline); with ``path``, written
        there in the format its suffix names (.png, .svg, .pdf, .jpg) and the path returned."""
        return render.plot(self, path, panels=panels)

    @property
    def start(self) -> float:
        """The recording's start, seconds since the epoch."""
        return self.header.started

    @property
    def duration_s(self) -> float:
        """Seconds from the start to the end line (or the last sample)."""
        last = self.end["t"] if self.end else (self.samples[-1].t if self.samples else self.start)
        return max(0.0, float(last) - self.start)

    @property
    def exit_code(self) -> int | None:
        """The watched command's exit code, when the recording ended cleanly with one."""
        code = self.end.get("exit_code") if self.end else None
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    @property
    def gpu_indices(self) -> list[int]:
        """The GPUs in the header (or, failing that, in the samples)."""
        if self.header.gpus:
            return [g.index for g in self.header.gpus]
        return sorted({g.sample.index for s in self.samples for g in s.gpus})

    @property
    def sampler_cpu_s(self) -> float:
        """The sampler's own CPU seconds (from the end line, or the last sample)."""
        if self.end and self.end.get("sampler_cpu_s") is not None:
            return float(self.end["sampler_cpu_s"])
        return self.samples[-1].sampler_cpu_s if self.samples else 0.0

    def gpu_ticks(self, index: int) -> Iterator[tuple[float, GpuTick]]:
        """(seconds since start, tick) for GPU ``index``."""
        for s in self.samples:
            for g in s.gpus:
                if g.sample.index == index:
                    yield s.t - self.start, g

    def tree_pids(self) -> set[int]:
        """Every PID seen in the watched tree: the main one and every child."""
        pids = {self.header.pid} if self.header.pid is not None else set()
        for s in self.samples:
            if s.tree is not None:
                pids.update(c.pid for c in s.tree.children)
        for e in self.events:
            if e.get("kind") == "process" and isinstance(e.get("pid"), int):
                pids.add(e["pid"])
        return pids

    def dropped_note(self) -> str | None:
        """One line on what the reader dropped, or None when every line was whole."""
        if not self.dropped_lines:
            return None
        return (
            f"{self.path or 'timeline'}: dropped {self.dropped_lines} damaged line(s), "
            f"{self.dropped_bytes} bytes ({'; '.join(self.problems)}); "
            f"kept {len(self.samples)} whole samples"
        )


def find_timeline(path: str | Path) -> Path:
    """``path`` itself if a file, else ``path/timeline.jsonl``; a clear error if neither."""
    p = Path(path)
    if p.is_dir():
        p = p / TIMELINE_NAME
    if not p.is_file():
        raise InputError(
            f"no timeline at {p}; give a 'gpuprobe run' --out directory or its {TIMELINE_NAME}"
        )
    return p


def read_timeline(path: str | Path) -> Timeline:
    """Read a timeline (a file or a run directory). Whole lines are kept; a truncated last line
    or a damaged line is dropped and counted. A file that is not a gpuprobe timeline is an
    :class:`~gpuprobe.core.errors.InputError`."""
    p = find_timeline(path)
    with open(p, "rb") as f:
        data = f.read()
    return parse_timeline(data, path=p)


def parse_timeline(data: bytes, *, path: Path | None = None) -> Timeline:
    """Parse timeline bytes (see :func:`read_timeline`)."""
    name = str(path) if path else "timeline"
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: empty, or a line cut short by a kill
    header: TimelineHeader | None = None
    tl: Timeline | None = None
    dropped: list[tuple[int, int, str]] = []  # (line number, bytes, why)
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:  # any depth, any number: a bad line is a JSONDecodeError, never a RecursionError
            obj = safejson.loads(raw)
            bad = None if isinstance(obj, dict) else f"line {number} is not a JSON object"
        except json.JSONDecodeError as exc:
            if header is not None and exc.msg.startswith("nested deeper than"):
                # not what a killed writer leaves (a line cut short): refused, not dropped
                raise InputError(
                    f"{name}: line {number} is {exc.msg}: not a line gpuprobe wrote (a "
                    "recording's lines are 5 levels deep); the file is damaged or not a timeline"
                ) from None
            bad = f"line {number} is not JSON ({exc.msg})"
        if bad is not None:
            if header is None:
                raise InputError(f"{name} is not a gpuprobe timeline: {bad}")
            dropped.append((number, len(raw) + 1, bad))
            continue
        kind = obj.get("type")
        if header is None:
            if kind != "header" or obj.get("schema") != TIMELINE_SCHEMA:
                raise InputError(
                    f"{name} is not a gpuprobe timeline (its first line is not a "
                    f"{TIMELINE_SCHEMA} header)"
                )
            version = obj.get("version", 0)
            if isinstance(version, bool) or not isinstance(version, int):
                raise InputError(f"{name}: damaged header: version {version!r} is not a number")
            if version > TIMELINE_VERSION:
                raise InputError(
                    f"{name} is timeline version {obj.get('version')}; this gpuprobe reads up "
                    f"to {TIMELINE_VERSION}: upgrade gpuprobe"
                )
            try:
                header = TimelineHeader.from_dict(obj)
                if not isinstance(header.started, int | float) or not math.isfinite(header.started):
                    raise ValueError(f"started {header.started!r} is not a time")
                if not _num(header.hz) > 0:
                    raise ValueError(f"hz {header.hz!r} is not a rate")
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                raise InputError(f"{name}: damaged header: {exc}") from None
            tl = Timeline(header=header, path=path)
            continue
        assert tl is not None
        try:
            if kind == "sample":
                tl.samples.append(sample_from_dict(obj))
            elif kind == "event":
                _num(obj.get("t"))
                tl.events.append(obj)
            elif kind == "end":
                _num(obj.get("t"))
                for key in _END_NUMBERS:  # a damaged figure is dropped (n/a), the line kept
                    if key in obj and not _is_num(obj[key]):
                        del obj[key]
                tl.end = obj
            # unknown types are skipped: newer writers may add some
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            dropped.append((number, len(raw) + 1, f"line {number}: {exc}"))
    if tail.strip():
        if tl is None:
            raise InputError(f"{name} is not a gpuprobe timeline: no whole header line")
        dropped.append((len(lines) + 1, len(tail), f"last line cut short ({len(tail)} bytes)"))
    if tl is None:
        raise InputError(f"{name} is empty: no header line")
    tl.dropped_lines = len(dropped)
    tl.dropped_bytes = sum(b for _, b, _ in dropped)
    tl.problems = [why for _, _, why in dropped[:5]]
    return tl
