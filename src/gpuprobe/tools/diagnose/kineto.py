"""A streaming reader of PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, and of the
legacy autograd profiler's export (:mod:`.legacy`: a JSON list of uncategorised events).

The file is never loaded whole: the top-level object is walked key by key, and the
``traceEvents`` array is decoded one event at a time with the C JSON scanner over buffered chunks.
Each event is reduced at once to the few numbers the rules need and stored in compact columns
(:class:`array.array`), names interned to integers, so memory grows with the number of *kept*
events, not with the size of the text. No rank metadata (``distributedInfo``) is needed, and
CPU-only traces are fine.

Times are in µs throughout (Kineto's own unit). Damaged input raises :class:`InputError` with a
one-line message; single malformed events are skipped and counted.
"""

from __future__ import annotations

import gzip
import math
import operator
import os
import re
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.core.text import strip_control
from gpuprobe.tools.diagnose.jsonstream import (
    BROKEN,
    UNSET,
    Args,
    Event,
    ProgressCallback,
    Source,
    iter_batches,
    raw_value,
)
from gpuprobe.tools.diagnose.legacy import (
    LEGACY_CPU_PIDS,
    LEGACY_FLOW_PREFIX,
    LEGACY_GPU_PIDS,
    LEGACY_STREAM,
    busy_pieces,
)

__all__ = [
    "GPU_KIND_KERNEL",
    "GPU_KIND_MEMCPY",
    "GPU_KIND_MEMSET",
    "KINETO_CATEGORIES",
    "MAX_TIME_US",
    "READER_MIB_PER_MILLION_EVENTS",
    "ProgressCallback",
    "RawTrace",
    "read_trace",
]

_MAX_DEVICE_ID = 1 << 16  # device ids past this are not a real machine's
READER_MIB_PER_MILLION_EVENTS = 64  # MiB of columns per million kept events, at most: a GPU
# activity is 57 B (8 columns), an op or runtime call 40 B, plus array growth (6 %); measured
# 46-57 by benchmarks/reader_speed.py (the whole diagnose: 205-229, its NumPy work on them)
MAX_TIME_US = 1e16  # µs; a timestamp or duration beyond this is skipped: Kineto writes µs since
# the epoch (1.7e15 in 2024; 1e16 is the year 2286), others µs since the start of profiling

GPU_KIND_KERNEL = 0
GPU_KIND_MEMCPY = 1
GPU_KIND_MEMSET = 2

# Kineto activity categories (libkineto ActivityType.h, plus the older capitalised spellings).
_GPU_CATS = {
    "kernel": GPU_KIND_KERNEL,
    "Kernel": GPU_KIND_KERNEL,
    "gpu_memcpy": GPU_KIND_MEMCPY,
    "Memcpy": GPU_KIND_MEMCPY,
    "gpu_memset": GPU_KIND_MEMSET,
    "Memset": GPU_KIND_MEMSET,
}
# Intel XPU (PTI) writes its SYCL/Unified Runtime and Level Zero calls as xpu_runtime/xpu_driver,
# other out-of-tree backends as privateuse1_*; same correlation ids as CUDA's.
_RUNTIME_CATS = frozenset(
    {
        "cuda_runtime",
        "cuda_driver",
        "Runtime",
        "hip_runtime",
        "hip_driver",
        "xpu_runtime",
        "xpu_driver",
        "privateuse1_runtime",
        "privateuse1_driver",
    }
)
_CPU_OP_CATS = frozenset({"cpu_op", "Operator"})
KINETO_CATEGORIES = frozenset(
    {
        *_GPU_CATS,
        *_RUNTIME_CATS,
        *_CPU_OP_CATS,
        "user_annotation",
        "gpu_user_annotation",
        "python_function",
        "cuda_sync",
        "cpu_instant_event",
        "ac2g",
        "fwdbwd",
        "Trace",
        "overhead",
        "cuda_profiler_range",
    }
)

_STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
# record_function spans that PyTorch <= 1.9 exported with category Operator/cpu_op
_ANNOTATION_OP_RE = re.compile(r"^(ProfilerStep\s*#\s*\d+|enumerate\(DataLoader\)#.*)$")
# Ops whose first input's shape and strides we keep (needs record_shapes=True): the ones that copy
# a non-contiguous tensor into a fresh one.
_SHAPED_OPS = frozenset({"aten::contiguous", "aten::reshape", "aten::flatten", "aten::clone"})
# Matmul-like ops whose input dtype we count (fp32 vs others) for the Tensor Core rule.
_MATMUL_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "aten::conv2d",
        "aten::convolution",
        "aten::_convolution",
        "aten::cudnn_convolution",
        "aten::scaled_dot_product_attention",
    }
)


@dataclass
class RawTrace:
    """What the reader kept from a trace: compact columns per kind of event. Times in µs.

    Names (ops, kernels, frames, runtime calls) are interned: ``names[i]`` is the string for id
    ``i``. Thread ids are interned too (``threads``), since Kineto writes some as strings.
    """

    path: str
    size_bytes: int
    header: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    thread_pids: list[int | None] = field(default_factory=list)  # each thread's pid, or None
    events: int = 0
    skipped: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    # ProfilerStep#N annotations: (N, ts, dur)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    # cpu_op events
    op_ts: array = field(default_factory=lambda: array("d"))
    op_dur: array = field(default_factory=lambda: array("d"))
    op_name: array = field(default_factory=lambda: array("l"))
    op_tid: array = field(default_factory=lambda: array("l"))
    # the "Call stack" argument of cpu_ops (PyTorch <= 1.9 with_stack), interned; -1 without one
    op_stack: array = field(default_factory=lambda: array("l"))
    # python_function events (with_stack=True)
    py_ts: array = field(default_factory=lambda: array("d"))
    py_dur: array = field(default_factory=lambda: array("d"))
    py_name: array = field(default_factory=lambda: array("l"))
    py_tid: array = field(default_factory=lambda: array("l"))
    # user_annotation events other than ProfilerStep (DataLoader, record_function, optimizer)
    ann_ts: array = field(default_factory=lambda: array("d"))
    ann_dur: array = field(default_factory=lambda: array("d"))
    ann_name: array = field(default_factory=lambda: array("l"))
    # CUDA/HIP runtime and driver calls
    rt_ts: array = field(default_factory=lambda: array("d"))
    rt_dur: array = field(default_factory=lambda: array("d"))
    rt_name: array = field(default_factory=lambda: array("l"))
    rt_corr: array = field(default_factory=lambda: array("q"))
    rt_tid: array = field(default_factory=lambda: array("l"))
    # GPU activities: kernels, memcpy, memset
    gpu_ts: array = field(default_factory=lambda: array("d"))
    gpu_dur: array = field(default_factory=lambda: array("d"))
    gpu_kind: array = field(default_factory=lambda: array("b"))
    gpu_name: array = field(default_factory=lambda: array("l"))
    gpu_dev: array = field(default_factory=lambda: array("l"))
    gpu_stream: array = field(default_factory=lambda: array("q"))
    gpu_corr: array = field(default_factory=lambda: array("q"))
    gpu_bytes: array = field(default_factory=lambda: array("d"))
    # first-input shapes of copying ops: (op index, dims, strides, dtype)
    shaped: list[tuple[int, tuple[int, ...], tuple[int, ...], str]] = field(default_factory=list)
    # matmul-like ops: Counter of first-input dtype
    matmul_dtypes: Counter[str] = field(default_factory=Counter)
    # [memory] instants: (device type, device id) -> peak (total allocated, total reserved) bytes
    memory_peak: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    memory_events: int = 0
    # every time column holds ``ts - time_base`` (µs): Kineto's absolute µs timestamps (~1.7e15)
    # leave float64 a 0.25 µs grid, so ts + dur would round; relative times keep the ns digits
    time_base: float = 0.0
    # old [memory] events carry only the change ("Bytes"): (device type, id) -> (running total,
    # its peak), relative to what was allocated when profiling started (unknown)
    memory_delta_peak: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    # CPU ops that PyTorch <= 1.9 wrote as cpu_op/Operator but are annotations (steps, DataLoader)
    annotations_as_ops: int = 0
    # "kineto", or "legacy": the autograd profiler's own export (:mod:`.legacy`)
    trace_format: str = "kineto"
    legacy_events: int = 0  # its CPU ops and GPU spans read
    # what was wrong with the file that the verdicts must be read with (more data after the
    # trace, events without "ph", events written twice, a step around the others), one line each
    damage: list[str] = field(default_factory=list)
    no_ph: int = 0  # events without "ph", read as complete events
    legacy_launches: int = 0  # its launch flows ("ph": "s", "cat": "cpu_to_cuda")
    legacy_gpu_spans: int = 0  # its GPU spans (read as the busy time they prove: .legacy)

    @property
    def device_properties(self) -> list[dict[str, Any]]:
        """The header's ``deviceProperties``, well-formed entries only (empty in CPU-only traces):
        each a dict whose ``id`` is a whole number (its position when absent), holding only
        strings, booleans, int64 whole numbers and finite floats (a field like ``1e400`` or a
        nested list is dropped; an entry with an ``id`` of ``"x"`` or ``[0]`` is dropped)."""
        props = self.header.get("deviceProperties")
        if not isinstance(props, list):
            return []
        out: list[dict[str, Any]] = []
        for i, p in enumerate(props):
            if not isinstance(p, dict):
                continue
            gid = p.get("id", i)
            if isinstance(gid, bool) or not isinstance(gid, int) or not 0 <= gid < _MAX_DEVICE_ID:
                continue
            clean: dict[str, Any] = {}
            for k, v in p.items():
                if isinstance(v, float) and not math.isfinite(v):
                    continue
                if isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < 1 << 63:
                    continue
                if isinstance(v, str | bool | int | float):
                    clean[k] = v
            clean["id"] = gid
            out.append(clean)
        return out


_INT_MIN, _INT_MAX = -(1 << 62), 1 << 62  # what the int64 columns take (with room to add)


def _int(x: Any) -> int:
    """An int that fits the int64 columns; raises ValueError otherwise (bool and str included)."""
    v = int(x)
    if not _INT_MIN < v < _INT_MAX:
        raise ValueError("out of range")
    return v


def _num(x: Any) -> float:
    """A finite float from a JSON number (or numeric string); raises ValueError otherwise."""
    v = float(x)
    if not math.isfinite(v):
        raise ValueError("not finite")
    return v


def _time(x: Any) -> float:
    """A timestamp or duration in µs no larger than :data:`MAX_TIME_US`; ValueError otherwise."""
    v = float(x)
    if not -MAX_TIME_US <= v <= MAX_TIME_US:  # NaN fails too
        raise ValueError("not a time")
    return v


def read_trace(path: str | os.PathLike[str], progress: ProgressCallback | None = None) -> RawTrace:
    """Read a Kineto trace (``.json`` or ``.json.gz``) batch by batch into a :class:`RawTrace`.

    Raises :class:`InputError` when the file is missing, not a regular file, not JSON, cut off,
    or not a profiler trace; single malformed events are skipped and counted in
    ``RawTrace.skipped``.
    """
    spath = os.fspath(path)
    src = Source(spath, progress)
    tr = RawTrace(path=spath, size_bytes=src.total)
    try:
        _consume(tr, iter_batches(src, tr.header, tr.damage))
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise InputError(f"{spath}: damaged gzip file ({exc or 'cut off'})") from None
    except OSError as exc:
        raise InputError(f"{spath}: cannot read ({exc.strerror or exc})") from None
    except MemoryError:
        kept = len(tr.op_ts) + len(tr.rt_ts) + len(tr.gpu_ts) + len(tr.py_ts) + len(tr.ann_ts)
        raise InputError(
            f"{spath}: ran out of memory reading the trace"
            + (f" after {kept:,} events" if kept else "")
            + " "
            f"({READER_MIB_PER_MILLION_EVENTS} MiB per million events to read them, more to "
            "analyse them): a memory limit holds this process (ulimit -v, a container's cap) or "
            "the machine is short of it; run it with more memory, or record fewer steps"
        ) from None
    finally:
        src.close()
    if tr.events == 0:
        raise InputError(f"{spath}: the trace has no events (empty 'traceEvents')")
    known = sum(n for c, n in tr.categories.items() if c in KINETO_CATEGORIES)
    if known == 0 and tr.legacy_events == 0:
        raise InputError(
            f"{spath}: not a PyTorch profiler trace: none of its {tr.events} events has "
            "a Kineto category (cpu_op, kernel, cuda_runtime, user_annotation, ...) or is a "
            'legacy autograd-profiler event ("pid": "CPU functions")'
        )
    return tr


_NO_ARGS = Args()
_OP_PLAIN, _OP_ANNOTATION, _OP_INPUTS = 0, 1, 2


def _op_kind(name: Any) -> int:
    """A cpu_op name's kind: an annotation PyTorch <= 1.9 wrote as an op, an op whose inputs
    are kept (:func:`_shapes`), or a plain op."""
    if isinstance(name, str) and _ANNOTATION_OP_RE.match(name):
        return _OP_ANNOTATION
    return _OP_INPUTS if name in _SHAPED_OPS or name in _MATMUL_OPS else _OP_PLAIN


_CAT = operator.attrgetter("cat")
_SKIP = (AttributeError, KeyError, TypeError, ValueError, OverflowError)  # a malformed event


def _args(ev: Event) -> Args:
    """The event's args (defaults when it has none: ``null``, ``{}``, or another falsy value)."""
    a = ev.args
    if type(a) is Args:
        return a
    if a:
        raise TypeError("args is not an object")
    return _NO_ARGS


def _consume(tr: RawTrace, batches: Iterator[list[Any]]) -> None:
    """Reduce each event to the columns in ``tr``. The hot loop: kept flat on purpose."""
    name_ids: dict[str, int] = {}
    tid_ids: dict[Any, int] = {}
    names = tr.names
    threads = tr.threads
    cats = tr.categories

    clean_ids: dict[str, int] = {}
    op_kinds: dict[Any, int] = {}  # cpu_op name -> _op_kind (a regex per name, not per event)

    def nid(name: Any) -> int:
        if name is UNSET:
            raise KeyError("name")
        i = name_ids.get(name)
        if i is None:  # a new name: interned without terminal escapes (names reach the terminal)
            text = strip_control(str(name))
            i = clean_ids.setdefault(text, len(names))
            if i == len(names):
                names.append(text)
            name_ids[name] = i
        return i

    def tid_of(t: Any, pid: Any) -> int:
        if t is UNSET:
            t = None
        i = tid_ids.get(t)
        if i is None:
            i = tid_ids[t] = len(threads)
            threads.append(strip_control(str(t)))
            tr.thread_pids.append(pid if type(pid) is int else None)  # bool is no pid
        return i

    op_ts, op_dur, op_name, op_tid = tr.op_ts, tr.op_dur, tr.op_name, tr.op_tid
    op_stack = tr.op_stack
    py_ts, py_dur, py_name, py_tid = tr.py_ts, tr.py_dur, tr.py_name, tr.py_tid
    rt_ts, rt_dur, rt_name, rt_corr, rt_tid = tr.rt_ts, tr.rt_dur, tr.rt_name, tr.rt_corr, tr.rt_tid
    g_ts, g_dur, g_kind, g_name = tr.gpu_ts, tr.gpu_dur, tr.gpu_kind, tr.gpu_name
    g_dev, g_stream, g_corr, g_bytes = tr.gpu_dev, tr.gpu_stream, tr.gpu_corr, tr.gpu_bytes
    memory_peak = tr.memory_peak
    # the legacy export's GPU spans with the CPU op each follows, until :func:`_legacy_spans`
    lg_ts, lg_dur, lg_name, lg_dev = array("d"), array("d"), array("l"), array("l")
    lg_op_ts, lg_op_end = array("d"), array("d")
    op_s = op_e = math.nan  # the last legacy CPU op read: its span's op (the exporter writes it
    # right before the op's GPU spans)
    flows: dict[Any, bool] = {}  # category -> whether the legacy export's launch flows
    n = 0
    skipped = 0
    base: float | None = None
    for batch in batches:
        n += len(batch)
        # the categories counted a batch at a time (in C); event by event when one is not a
        # string or null (a list, an object) or an event is not an object: skipped, as below
        try:
            counted = Counter(map(_CAT, batch))
        except (TypeError, AttributeError):  # not hashable, or an event that is not an object
            counted = None
        else:
            cats.update(counted)
        for ev in batch:
            try:
                ph = ev.ph
                cat = ev.cat
                if counted is None:
                    cats[cat] += 1
                if ph is None and cat is not None and ev.ts is not None:
                    ph = "X"  # a complete event written without its type: said in damage
                    tr.no_ph += 1
                if ph == "X":
                    # _time inlined for floats (the hot path); ints, strings, others through it
                    ts = ev.ts
                    if type(ts) is not float or not -MAX_TIME_US <= ts <= MAX_TIME_US:
                        ts = _time(ts)
                    dur = ev.dur
                    if type(dur) is not float or not -MAX_TIME_US <= dur <= MAX_TIME_US:
                        dur = _time(dur)
                    if dur < 0:
                        raise ValueError("negative duration")
                    if base is None:
                        base = tr.time_base = float(math.floor(ts))
                    ts -= base
                    if (
                        cat == "cpu_op"
                        or cat == "Operator"
                        or (cat is None and ev.pid in LEGACY_CPU_PIDS)
                    ):
                        if cat is None:
                            tr.legacy_events += 1
                            op_s, op_e = ts, ts + dur
                        name = ev.name
                        kind = op_kinds.get(name)
                        if kind is None:
                            kind = op_kinds[name] = _op_kind(name)
                        if kind == _OP_ANNOTATION:
                            # PyTorch <= 1.9 wrote record_function spans (ProfilerStep#N, the
                            # DataLoader's __next__) as operators: annotations, not ops
                            tr.annotations_as_ops += 1
                            m = _STEP_RE.match(name)
                            if m:
                                tr.steps.append((_int(m.group(1)), ts, dur))
                            else:
                                tr.ann_ts.append(ts)
                                tr.ann_dur.append(dur)
                                tr.ann_name.append(nid(name))
                            continue
                        i = name_ids.get(name)
                        if i is None:
                            i = nid(name)
                        tid = tid_ids.get(ev.tid)
                        if tid is None:
                            tid = tid_of(ev.tid, ev.pid)
                        args = ev.args
                        stack = None
                        if type(args) is Args:
                            if kind == _OP_INPUTS:
                                _shapes(tr, len(op_ts), name, args)
                            stack = args.call_stack
                        op_stack.append(nid(stack) if stack and type(stack) is str else -1)
                        op_ts.append(ts)
                        op_dur.append(dur)
                        op_name.append(i)
                        op_tid.append(tid)
                    elif (py := cat == "python_function") or cat in _RUNTIME_CATS:
                        if py:
                            corr = 0
                        else:
                            args = ev.args
                            corr = (args if type(args) is Args else _args(ev)).correlation
                            if type(corr) is not int or not _INT_MIN < corr < _INT_MAX:
                                corr = _int(corr)
                        i = name_ids.get(ev.name)
                        if i is None:
                            i = nid(ev.name)
                        tid = tid_ids.get(ev.tid)
                        if tid is None:
                            tid = tid_of(ev.tid, ev.pid)
                        if py:
                            py_ts.append(ts)
                            py_dur.append(dur)
                            py_name.append(i)
                            py_tid.append(tid)
                        else:
                            rt_ts.append(ts)
                            rt_dur.append(dur)
                            rt_name.append(i)
                            rt_corr.append(corr)
                            rt_tid.append(tid)
                    elif cat in _GPU_CATS:
                        args = ev.args
                        if type(args) is not Args:
                            args = _args(ev)
                        dev = args.device
                        if dev is UNSET:
                            dev = _int(0 if ev.pid is UNSET else ev.pid)
                        elif type(dev) is not int or not _INT_MIN < dev < _INT_MAX:
                            dev = _int(dev)
                        # XPU kernels name their queue "sycl queue" instead of a stream
                        stream = args.stream
                        if stream is UNSET:
                            stream = args.sycl_queue
                            if stream is UNSET:
                                stream = 0 if ev.tid is UNSET else ev.tid
                        if type(stream) is not int or not _INT_MIN < stream < _INT_MAX:
                            stream = _int(stream)
                        corr = args.correlation
                        if type(corr) is not int or not _INT_MIN < corr < _INT_MAX:
                            corr = _int(corr)
                        nbytes = args.bytes
                        if type(nbytes) is not float or not -math.inf < nbytes < math.inf:
                            nbytes = _num(nbytes)
                        i = name_ids.get(ev.name)
                        if i is None:
                            i = nid(ev.name)
                        g_ts.append(ts)
                        g_dur.append(dur)
                        g_kind.append(_GPU_CATS[cat])
                        g_name.append(i)
                        g_dev.append(dev)
                        g_stream.append(stream)
                        g_corr.append(corr)
                        g_bytes.append(nbytes)
                    elif cat is None and ev.pid in LEGACY_GPU_PIDS:
                        # the legacy export's GPU time of an op: its device is the "tid"
                        dev = _int(ev.tid)
                        if not 0 <= dev < _MAX_DEVICE_ID:
                            raise ValueError("not a device")
                        i = nid(ev.name)
                        lg_ts.append(ts)
                        lg_dur.append(dur)
                        lg_name.append(i)
                        lg_dev.append(dev)
                        lg_op_ts.append(op_s)
                        lg_op_end.append(op_e)
                        tr.legacy_events += 1
                    elif cat == "user_annotation":
                        name = ev.name
                        m = _STEP_RE.match(name) if isinstance(name, str) else None
                        if m:
                            tr.steps.append((_int(m.group(1)), ts, dur))
                        else:
                            i = nid(name)
                            tr.ann_ts.append(ts)
                            tr.ann_dur.append(dur)
                            tr.ann_name.append(i)
                elif (ph == "i" or ph == "I") and ev.name == "[memory]":
                    args = ev.args
                    if type(args) is not Args:
                        raise TypeError("no args")
                    key = (_int(args.device_type), _int(args.device_id))
                    tr.memory_events += 1
                    if args.total_allocated is UNSET and args.total_reserved is UNSET:
                        # PyTorch <= 1.9: only this allocation's size (negative for a free)
                        delta = _num(args.delta_bytes)
                        run, top = tr.memory_delta_peak.get(key, (0.0, 0.0))
                        run += delta
                        tr.memory_delta_peak[key] = (run, max(top, run))
                        continue
                    alloc = _num(0.0 if args.total_allocated is UNSET else args.total_allocated)
                    reserved = _num(0.0 if args.total_reserved is UNSET else args.total_reserved)
                    old = memory_peak.get(key)
                    if old is None:
                        memory_peak[key] = (alloc, reserved)
                    elif alloc > old[0] or reserved > old[1]:
                        memory_peak[key] = (max(alloc, old[0]), max(reserved, old[1]))
                elif ph == "s":
                    flow = flows.get(cat)
                    if flow is None:
                        flow = flows[cat] = isinstance(cat, str) and cat.startswith(
                            LEGACY_FLOW_PREFIX
                        )
                    if flow:
                        tr.legacy_launches += 1  # the legacy export: an op launched GPU work
                elif ph == BROKEN:
                    skipped += 1
            except _SKIP:
                skipped += 1
    tr.events = n
    tr.skipped = skipped
    if tr.no_ph:
        tr.damage.append(
            f'{tr.no_ph:,} events have no "ph" (the Chrome trace event type): read as '
            "complete events from their ts and dur"
        )
    if tr.legacy_events:
        tr.trace_format = "legacy"
        _legacy_spans(tr, (lg_ts, lg_dur, lg_name, lg_dev, lg_op_ts, lg_op_end))


def _legacy_spans(tr: RawTrace, cols: tuple[array, ...]) -> None:
    """The legacy export's GPU spans as GPU activities: the time each span proves the GPU busy
    (:func:`.legacy.busy_pieces`), as kernels named like its op on one stream per device, with
    no launch call. ``cols``: each span's start, duration, name, device, and its op's start and
    end on the host."""
    ts, dur, name, dev, op_ts, op_end = (np.frombuffer(c, dtype=c.typecode) for c in cols)
    tr.legacy_gpu_spans = ts.size
    if not ts.size:
        return
    which, lo, hi = busy_pieces(ts, ts + dur, dev, op_ts, op_end)
    tr.gpu_ts.extend(lo.tolist())
    tr.gpu_dur.extend((hi - lo).tolist())
    tr.gpu_kind.extend([GPU_KIND_KERNEL] * which.size)
    tr.gpu_name.extend(name[which].tolist())
    tr.gpu_dev.extend(dev[which].tolist())
    tr.gpu_stream.extend([LEGACY_STREAM] * which.size)
    tr.gpu_corr.extend([-1] * which.size)
    tr.gpu_bytes.extend([0.0] * which.size)


def _shapes(tr: RawTrace, index: int, name: str, args: Args) -> None:
    """Keep the first input's dims/strides/dtype of a copying op, or the dtype of a matmul."""
    types = raw_value(args.input_type)
    dtype = types[0] if isinstance(types, list) and types and isinstance(types[0], str) else ""
    if name in _MATMUL_OPS:
        if dtype:
            tr.matmul_dtypes[dtype] += 1
        return
    dims = raw_value(args.input_dims)
    strides = raw_value(args.input_strides)
    if (
        isinstance(dims, list)
        and dims
        and isinstance(dims[0], list)
        and isinstance(strides, list)
        and strides
        and isinstance(strides[0], list)
    ):
        d = tuple(_int(x) for x in dims[0])
        s = tuple(_int(x) for x in strides[0])
        tr.shaped.append((index, d, s, dtype))
