"""Reading a job's ranks on every local core: one process per reader, never more readers at once
than the free memory allows.

Each rank is read by :func:`~gpuprobe.tools.diagnose.rank_part.read_rank` in a process of its own
(``concurrent.futures.ProcessPoolExecutor`` on a ``forkserver`` context where there is one,
``spawn`` elsewhere: never a fork of a process with threads), and comes back as the plain data
of its :class:`~gpuprobe.tools.diagnose.ranks.TracePart` (:func:`part_to_dict`: a few kB, the
same records a Dask worker sends, :mod:`.ranks_cluster`). The parts are put back in the files'
order, so the verdict is the one the sequential reading gives.

Readers at once: at most the usable cores, the files, and ``jobs`` when it is given; and a file
starts only when the expected cost of those being read, with its own, fits the memory free when
the reading began (:func:`expected_cost`: its events, estimated from its size, times the
measured MiB per million events). One file always runs, however large: its own reader then says
whether it fits (``check_memory``), as the sequential reading does.

A rank that cannot be read (corrupt, unreadable, gone, too large for the memory) is named with
why and left out; the others are analysed. A reader process that dies (the kernel's OOM killer)
takes the pool with it: the files it was reading are read again once in a fresh pool, then
named. Ctrl-C or SIGTERM stops the readers at once (they ignore SIGINT; the parent ends them).

Times in seconds, sizes in bytes unless a name says otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import multiprocessing
import os
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.layout import TraceFacts, TraceIdentity
from gpuprobe.tools.diagnose.rank_part import TracePart, _read_rank
from gpuprobe.tools.diagnose.ranks_model import RankRow, ReaderStat, UnreadRank

__all__ = [
    "BYTES_PER_EVENT",
    "PARALLEL_MIN_BYTES",
    "READER_BASE_MIB",
    "READER_MIB_PER_MILLION_EVENTS",
    "can_start",
    "expected_cost",
    "local_readers",
    "part_from_dict",
    "part_to_dict",
    "peak_rss_mib",
    "read_one",
    "read_parallel",
]

# bytes of trace text per event, the fewest measured: the synthetic launch traces of
# benchmarks/results/reader_speed.md ("Memory per million events": 302 MB for 1.5 M events,
# 605 MB for 3.0 M); real Kineto events carry more args, so more bytes each: fewer events than
# this predicts, never more
BYTES_PER_EVENT = 200
# MiB per million events the reader's columns take (46 measured, reader_speed.md) and the
# analysis on top of them (engine.ANALYSIS_MIB_PER_MILLION_EVENTS: 190)
READER_MIB_PER_MILLION_EVENTS = 46
# MiB a reader process takes besides its trace: Python, NumPy and gpuprobe's reader imported
# (measured here: 42-43 MiB peak resident in a forkserver reader of 50 kB ranks), rounded up
READER_BASE_MIB = 60
# share of the free memory the readers may plan on: the rest is the parent's and the machine's
MEMORY_SHARE = 0.8
# bytes of trace below which the ranks are read in this process, unless jobs is given: a reader
# process takes about 0.5 s to start (forkserver, NumPy imported) and the reader does about
# 100 MB/s, so below this a pool costs more than it saves
PARALLEL_MIN_BYTES = 64_000_000
_WAIT_STEP_S = 0.1  # s between two looks at the readers: how soon Ctrl-C or progress is acted on


def _gzip_size(path: str, size: int) -> int:
    """The uncompressed size of a gzip file from its trailer (ISIZE: the size mod 2**32), pushed
    past 2**32 until the ratio is at least 4 (Kineto JSON compresses 8-20×)."""
    try:
        with open(path, "rb") as f:
            f.seek(-4, os.SEEK_END)
            plain = int(struct.unpack("<I", f.read(4))[0])
    except (OSError, struct.error):
        return size * 10
    while plain < 4 * size:
        plain += 1 << 32
    return plain


def expected_cost(path: str) -> int:
    """Bytes a reader process is expected to need for the trace at ``path``: its events (its
    text size over :data:`BYTES_PER_EVENT`) times the reader's and the analysis's MiB per
    million events, plus :data:`READER_BASE_MIB`."""
    from gpuprobe.tools.diagnose.engine import ANALYSIS_MIB_PER_MILLION_EVENTS

    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    text = _gzip_size(path, size) if path.endswith(".gz") and size else size
    events = text / BYTES_PER_EVENT
    per_event = (READER_MIB_PER_MILLION_EVENTS + ANALYSIS_MIB_PER_MILLION_EVENTS) / 1e6
    return int((events * per_event + READER_BASE_MIB) * 2**20)


def part_to_dict(part: TracePart) -> dict[str, Any]:
    """A :class:`TracePart` as plain data (JSON's types): what crosses from a reader."""
    return {
        "row": part.row.to_dict(),
        "coll_key": [list(k) for k in part.coll_key],
        "coll_dur": part.coll_dur.tolist(),
        "first_rank_from_name": part.first_rank_from_name,
        "device_rank": part.device_rank,
        "identity": dataclasses.asdict(part.identity),
        "facts": dataclasses.asdict(part.facts),
    }


def part_from_dict(d: dict[str, Any]) -> TracePart:
    """The :class:`TracePart` that :func:`part_to_dict` wrote."""
    return TracePart(
        row=RankRow.from_dict(d["row"]),
        coll_key=[(k[0], str(k[1]), int(k[2])) for k in d["coll_key"]],
        coll_dur=np.array(d["coll_dur"], dtype=float),
        first_rank_from_name=d["first_rank_from_name"],
        device_rank=d["device_rank"],
        identity=TraceIdentity(**d["identity"]),
        facts=TraceFacts(**d["facts"]),
    )


def peak_rss_mib() -> float | None:
    """This process's peak resident memory (MiB), or None where it cannot be read: Linux's
    ``VmHWM`` (reset by ``exec``, unlike ``ru_maxrss``, which keeps the high-water mark of the
    process that forked and exec'd this one), else ``getrusage``."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes there, kB here


def read_one(
    path: str, steps: tuple[int, int] | None, progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """One rank read here, as plain data: ``{"part": …}`` or ``{"error": one line}``, with the
    reader's ``pid``, ``seconds`` and ``peak_rss_mib``. What a local reader process and a Dask
    worker run; a rank that cannot be read is an answer, not an exception."""
    t0, c0 = time.perf_counter(), time.process_time()
    out: dict[str, Any] = {"pid": os.getpid()}
    try:
        out["part"] = part_to_dict(_read_rank(path, steps, progress))
    except InputError as exc:
        out["error"] = exc.message
    except OSError as exc:  # gone or unreadable since it was listed
        out["error"] = f"{path}: cannot be read ({exc.strerror or exc})"
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        out["error"] = f"{path}: not a readable trace ({type(exc).__name__}: {exc})"
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def local_readers(jobs: int | None, files: int) -> int:
    """Reader processes for ``files`` files: ``jobs`` when given, else the usable cores; never
    more than the files."""
    from gpuprobe.platform.hardware.host import usable_cores

    n = jobs if jobs is not None else (usable_cores() or os.cpu_count() or 1)
    return max(1, min(n, files))


# --- the reader processes -------------------------------------------------------------------

_QUEUE: Any = None  # in a reader process: where its progress goes


def _init_reader(queue: Any) -> None:
    """A reader process's start: Ctrl-C is the parent's to act on (it ends the readers)."""
    import signal

    global _QUEUE
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _QUEUE = queue


def _read_in_reader(index: int, path: str, steps: tuple[int, int] | None) -> dict[str, Any]:
    queue = _QUEUE
    last = [0.0]

    def progress(done: int, _total: int) -> None:
        now = time.monotonic()
        if queue is not None and now - last[0] >= _WAIT_STEP_S:
            last[0] = now
            with contextlib.suppress(Exception):
                queue.put_nowait((index, done))

    return read_one(path, steps, progress if queue is not None else None)


@contextlib.contextmanager
def _main_hidden() -> Any:
    """``__main__`` replaced, while reader processes start, by an empty module: a spawned or
    forkserver process otherwise imports the caller's script again (running a script without
    an ``if __name__ == "__main__"`` guard twice) or fails on ``python -`` (``<stdin>``). The
    readers need nothing of it: what they run is in gpuprobe."""
    import types

    real = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if real is not None:
            sys.modules["__main__"] = real


def can_start(running: int, in_use: int, cost: int, budget: int, readers: int) -> bool:
    """Whether one more reader may start: fewer than ``readers`` run, and its expected ``cost``
    fits the memory ``budget`` beside the ``in_use`` of those running (bytes); the first
    always starts, however large (its own reader says whether it fits)."""
    return running == 0 or (running < readers and in_use + cost <= budget)


def _context() -> Any:
    """A forkserver context whose server has imported the reader once (each reader forked from
    it starts with NumPy and gpuprobe's reader loaded: ~0.05 s, not ~0.7 s); spawn where there
    is no forkserver."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "gpuprobe.tools.diagnose.analysis"])
    return ctx


def _stop(pool: Any) -> None:
    """End a pool's processes now (Ctrl-C, SIGTERM, an error here) and let it go."""
    procs = list(getattr(pool, "_processes", {}).values())
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(1.0)


@dataclasses.dataclass
class _Plan:
    files: Sequence[str]
    steps: tuple[int, int] | None
    sizes: list[int]
    costs: list[int]
    budget: int
    readers: int


def read_parallel(
    files: Sequence[str],
    steps: tuple[int, int] | None,
    progress: ProgressCallback | None,
    jobs: int | None,
) -> tuple[list[TracePart | None], list[UnreadRank], list[ReaderStat], str]:
    """Read ``files`` in reader processes (module docstring): the parts in the files' order
    (None for a file left out), the files left out with why, each reader's figures, and where
    they were read ("N local processes")."""
    from gpuprobe.platform.hardware.host import available_memory

    sizes = [max(0, _file_size(f)) for f in files]
    free = available_memory()
    plan = _Plan(
        files=files,
        steps=steps,
        sizes=sizes,
        costs=[expected_cost(f) for f in files],
        budget=int(free * MEMORY_SHARE) if free else 1 << 62,
        readers=local_readers(jobs, len(files)),
    )
    answers: dict[int, dict[str, Any]] = {}
    todo = sorted(range(len(files)), key=lambda i: -sizes[i])  # largest first: the tail is short
    done_bytes = [0] * len(files)
    total = sum(sizes)
    for attempt in range(2):  # a pool broken by a dead reader: its files once more in a new one
        todo = _run_pool(plan, todo, answers, done_bytes, total, progress)
        if not todo:
            break
        if attempt == 1:
            for i in todo:
                answers[i] = {"error": f"{files[i]}: its reader process died twice (out of "
                              "memory? the kernel's OOM killer ends the largest process)"}  # fmt: skip
    if progress is not None:
        progress(total, total)
    parts: list[TracePart | None] = []
    unread: list[UnreadRank] = []
    stats: dict[str, list[Any]] = {}
    for i, f in enumerate(files):
        got = answers[i]
        if "part" in got:
            parts.append(part_from_dict(got["part"]))
        else:
            parts.append(None)
            unread.append(UnreadRank(path=f, why=_why(got["error"], f)))
        if "pid" in got:
            s = stats.setdefault(f"local pid {got['pid']}", [0, 0, 0.0, None, 0.0])
            s[0] += 1
            s[1] += sizes[i]
            s[2] += float(got.get("seconds") or 0.0)
            s[4] += float(got.get("cpu_seconds") or 0.0)
            peak = got.get("peak_rss_mib")
            s[3] = peak if s[3] is None else max(s[3], peak or 0.0)
    readers = [
        ReaderStat(
            where=k,
            ranks=v[0],
            bytes=v[1],
            seconds=round(v[2], 3),
            peak_rss_mib=v[3],
            cpu_seconds=round(v[4], 3),
        )
        for k, v in sorted(stats.items())
    ]
    return parts, unread, readers, f"{plan.readers} local processes"


def _why(message: str, path: str) -> str:
    """A reader's one line without the path it starts with (the unread rank names its file)."""
    return message.removeprefix(f"{path}: ") or message


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _run_pool(
    plan: _Plan,
    todo: list[int],
    answers: dict[int, dict[str, Any]],
    done_bytes: list[int],
    total: int,
    progress: ProgressCallback | None,
) -> list[int]:
    """Read the files ``todo`` (indices, in the order to start them) in one pool; the indices
    whose reader died (the pool broke) and must be read again."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor

    ctx = _context()
    queue = ctx.Queue()
    pool = ProcessPoolExecutor(
        max_workers=plan.readers, mp_context=ctx, initializer=_init_reader, initargs=(queue,)
    )
    waiting = list(todo)
    running: dict[Any, int] = {}
    broken: list[int] = []
    try:
        while waiting or running:
            in_use = sum(plan.costs[i] for i in running.values())
            while waiting and can_start(
                len(running), in_use, plan.costs[waiting[0]], plan.budget, plan.readers
            ):
                i = waiting.pop(0)
                with _main_hidden():  # a reader may start here: it must not run the caller's main
                    fut = pool.submit(_read_in_reader, i, plan.files[i], plan.steps)
                running[fut] = i
                in_use += plan.costs[i]
            finished, _ = wait(list(running), timeout=_WAIT_STEP_S, return_when=FIRST_COMPLETED)
            for fut in finished:
                i = running.pop(fut)
                try:
                    answers[i] = fut.result(timeout=0)
                    done_bytes[i] = plan.sizes[i]
                except BrokenProcessPool:
                    broken.append(i)
            if broken:  # every reader of this pool is gone with it: read the rest anew
                broken += list(running.values()) + waiting
                running.clear()
                return sorted(set(broken), key=broken.index)
            _drain(queue, done_bytes, plan.sizes)
            if progress is not None:
                progress(min(sum(done_bytes), total), total)
        return []
    finally:
        _stop(pool)
        with contextlib.suppress(Exception):
            queue.close()
            queue.cancel_join_thread()


def _drain(queue: Any, done_bytes: list[int], sizes: list[int]) -> None:
    """The readers' progress so far: the bytes read of each file (never going back)."""
    import queue as queue_mod

    while True:
        try:
            i, done = queue.get_nowait()
        except (queue_mod.Empty, OSError, ValueError, EOFError):
            return
        done_bytes[i] = max(done_bytes[i], min(int(done), sizes[i]))
