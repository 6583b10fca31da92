"""Reading a job's ranks on the workers of a Dask cluster (``diagnose DIR --cluster ADDRESS``).

The client connects through :mod:`gpuprobe.platform.cluster` (the door ``doctor --cluster``
uses), asks every worker which trace files it can see (``DIR`` on a shared file system, or
``--worker-glob PATTERN`` expanded on each worker's own disk: ``$VARS`` and ``~`` are the
worker's), then hands out the files: each idle worker takes the largest file left that it can
see, one at a time (reading is one core's work). A worker runs
:func:`~gpuprobe.tools.diagnose.ranks_read.read_one` and returns the rank's summary as plain
data (a few kB); the client joins them as the local reading does, so the verdict is the same.

What goes wrong is named and the rest analysed: a rank that cannot be read there (corrupt,
unreadable, gone) is left out with the worker's one line; a worker that dies (or leaves)
while it reads, or whose task fails or is lost there, gives its file to another worker that
can see it, once (a second failure names the file and both); a worker is struck off only when
the scheduler says it left (a lost task can be the client's own connection); a file no live
worker can see any more is named; a worker that does not answer in ``rank_timeout`` s names
its file. A cluster on which no worker sees the path is one line.

Every wait is bounded and short: the loop looks at the work every 0.1 s, so Ctrl-C or SIGTERM
ends it at once, and the client is closed in half a second at most.

Times in seconds.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from gpuprobe.core.errors import InputError
from gpuprobe.core.text import strip_control
from gpuprobe.tools.diagnose.kineto import ProgressCallback
from gpuprobe.tools.diagnose.rank_part import TracePart
from gpuprobe.tools.diagnose.ranks_model import ReaderStat, UnreadRank

__all__ = [
    "ASK_TIMEOUT_S",
    "RANK_TIMEOUT_S",
    "list_traces",
    "read_on_cluster",
    "worker_read",
]

ASK_TIMEOUT_S = 30.0  # s a worker has to list its trace files (a slow shared file system)
RANK_TIMEOUT_S = 3600.0  # s a worker has for one rank (a 1 GB trace reads in ~10 s)
_WAIT_STEP_S = 0.1  # s between two looks at the work: how soon a signal is acted on
# ranks handed to a worker at once: one it reads, two queued behind it (the worker runs them one
# after the other on its one thread), so that it never waits for this loop's next look
_PER_WORKER = 3
_ALIVE_EVERY_S = 0.5  # s between two asks for the scheduler's workers (who left)
_SCHEDULER_TIMEOUT_S = 5.0  # s the scheduler has to say who its workers are


def list_traces(paths: list[str], pattern: str | None) -> dict[str, Any]:
    """On a worker: the trace files it can see (``paths`` as given, or ``pattern`` expanded
    here), with their sizes, and those it cannot read, with why; never raises."""
    from pathlib import Path

    from gpuprobe.tools.diagnose.rank_files import _unreadable, distinct_traces, find_trace_files

    skipped: list[tuple[str, str]] = []
    try:
        if pattern is not None:
            expanded = os.path.expanduser(os.path.expandvars(pattern))
            found = sorted(glob.glob(expanded))
            if not found:
                return {"files": [], "skipped": [], "error": f"nothing matches {expanded}"}
            readable = []
            for f in found:
                why = _unreadable(Path(f))
                if why is None:
                    readable.append(f)
                else:
                    skipped.append((f, why))
            files = distinct_traces(readable, skipped)
        else:
            files = find_trace_files(paths, skipped)
    except (InputError, OSError) as exc:
        return {"files": [], "skipped": [], "error": strip_control(str(exc))}
    sizes = []
    for f in files:
        try:
            sizes.append(os.path.getsize(f))
        except OSError:
            sizes.append(0)
    return {"files": list(zip(files, sizes, strict=True)), "skipped": skipped}


def worker_read(path: str, steps: tuple[int, int] | None) -> dict[str, Any]:
    """On a worker: one rank (:func:`~gpuprobe.tools.diagnose.ranks_read.read_one`)."""
    from gpuprobe.tools.diagnose.ranks_read import read_one

    return read_one(path, steps)


def _bounded(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()`` in a daemon thread, waited for ``timeout`` s in short joins (a signal ends the
    wait at once); what it returned, or the exception that stands for it."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except Exception as exc:
            box.append(exc)

    t = threading.Thread(target=run, name="gpuprobe-ranks-ask", daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    while t.is_alive() and time.monotonic() < deadline:
        t.join(_WAIT_STEP_S)
    return box[0] if box else TimeoutError(f"no answer in {timeout:g} s")


def _alive(client: Any) -> set[str] | None:
    """The scheduler's workers now, or None when it did not say in time."""
    got = _bounded(
        lambda: set(client.scheduler_info(n_workers=-1).get("workers", {})),
        _SCHEDULER_TIMEOUT_S,
    )
    return got if isinstance(got, set) else None


def _listings(
    client: Any, workers: Sequence[str], paths: list[str], pattern: str | None
) -> dict[str, Any]:
    """Every worker's :func:`list_traces`, asked at once, each bounded."""
    answers: dict[str, Any] = {}

    def ask(addr: str) -> None:
        got = _bounded(
            lambda: client.run(list_traces, paths, pattern, workers=[addr], on_error="return"),
            ASK_TIMEOUT_S,
        )
        answers[addr] = got.get(addr, OSError("left")) if isinstance(got, dict) else got

    threads = [threading.Thread(target=ask, args=(a,), daemon=True) for a in workers]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(_WAIT_STEP_S)
    return answers


def read_on_cluster(
    cluster: Any,
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    steps: tuple[int, int] | None,
    progress: ProgressCallback | None,
    reading: Any,
    *,
    worker_glob: str | None = None,
    connect_timeout: float | None = None,
    rank_timeout: float = RANK_TIMEOUT_S,
) -> list[TracePart]:
    """The parts of the ranks the workers of ``cluster`` read (module docstring), in the
    order of the files' names; ``reading`` (a :class:`~gpuprobe.tools.diagnose.ranks.Reading`)
    gets the ranks left out, each worker's figures and where they were read."""
    from gpuprobe.platform.cluster import (
        CLOSE_INTERRUPTED_S,
        CLOSE_TIMEOUT_S,
        CONNECT_TIMEOUT_S,
        check_connect_timeout,
        close_client,
        connect_cluster,
        quiet_dask,
    )

    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    given = [os.fspath(p) for p in items]
    timeout = check_connect_timeout(connect_timeout or CONNECT_TIMEOUT_S)
    hint = "start one with `dask scheduler` and workers with `dask worker ADDRESS`"
    with quiet_dask() as keep_quiet:
        client, owned = connect_cluster(cluster, timeout, hint)
        limit = CLOSE_INTERRUPTED_S
        try:
            parts = _read(client, given, worker_glob, steps, progress, reading, rank_timeout)
            limit = CLOSE_TIMEOUT_S
            return parts
        finally:  # Ctrl-C, SIGTERM: closed in half a second at most
            if owned and not close_client(client, limit):
                keep_quiet()


def _read(
    client: Any,
    given: list[str],
    pattern: str | None,
    steps: tuple[int, int] | None,
    progress: ProgressCallback | None,
    reading: Any,
    rank_timeout: float,
) -> list[TracePart]:
    from gpuprobe.tools.diagnose.ranks_read import part_from_dict

    address = str(client.scheduler.address)
    workers = sorted(_alive(client) or ())
    if not workers:
        raise InputError(
            f"the scheduler at {address} has no workers; start some (dask worker ADDRESS) "
            "and run again"
        )
    shown = pattern or (given[0] if len(given) == 1 else f"these {len(given)} traces")
    listed = _listings(client, workers, given, pattern)
    sizes: dict[str, int] = {}
    seen_by: dict[str, set[str]] = {}
    why_not: list[str] = []
    for addr in workers:
        got = listed.get(addr)
        if not isinstance(got, dict):
            why_not.append(f"{addr}: {strip_control(str(got))[:120]}")
            continue
        if got.get("error"):
            why_not.append(f"{addr}: {strip_control(str(got['error']))[:200]}")
        for f, size in got.get("files", []):
            sizes[f] = max(sizes.get(f, 0), int(size))
            seen_by.setdefault(f, set()).add(addr)
        for f, why in got.get("skipped", []):
            if f not in seen_by:
                reading.unread.append(UnreadRank(path=f, why=str(why), where=addr))
    if not sizes:
        first = why_not[0] if why_not else "no trace files"
        raise InputError(
            f"{shown}: none of the {len(workers)} worker(s) of the cluster at {address} can "
            f"see a trace there ({first}); give a path every worker can read, or "
            "--worker-glob PATTERN for files on each node's own disk"
        )
    files = sorted(sizes)
    answers = _hand_out(client, files, sizes, seen_by, steps, progress, reading, rank_timeout)
    parts = []
    stats: dict[str, list[Any]] = {}
    for f in files:
        addr, got = answers[f]
        if isinstance(got, dict) and "part" in got:
            try:
                parts.append(part_from_dict(got["part"]))
            except Exception as exc:  # an answer that is not a rank's summary
                got = {"error": f"its answer is not a rank's summary ({type(exc).__name__})"}
        if not (isinstance(got, dict) and "part" in got):
            why = str(got.get("error") if isinstance(got, dict) else got)
            reading.unread.append(
                UnreadRank(path=f, why=why.removeprefix(f"{f}: ") or why, where=addr)
            )
        if addr and isinstance(got, dict) and "seconds" in got:
            s = stats.setdefault(addr, [0, 0, 0.0, None, 0.0])
            s[0] += 1
            s[1] += sizes[f]
            s[2] += float(got.get("seconds") or 0.0)
            s[4] += float(got.get("cpu_seconds") or 0.0)
            peak = got.get("peak_rss_mib")
            if isinstance(peak, int | float):
                s[3] = peak if s[3] is None else max(s[3], peak)
    reading.readers += [
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
    reading.read_on = f"the Dask cluster at {address} ({len(stats)} of {len(workers)} workers)"
    return parts


def _hand_out(
    client: Any,
    files: list[str],
    sizes: dict[str, int],
    seen_by: dict[str, set[str]],
    steps: tuple[int, int] | None,
    progress: ProgressCallback | None,
    reading: Any,
    rank_timeout: float,
) -> dict[str, tuple[str, Any]]:
    """Each file's (worker, answer): each worker in turn is given the largest file left that it
    can see, up to :data:`_PER_WORKER` at a time; a file whose worker left goes to another, once."""
    alive = set().union(*seen_by.values())
    waiting = sorted(files, key=lambda f: -sizes[f])
    running: dict[str, tuple[str, Any, float]] = {}  # file -> (worker, future, submitted)
    tried: dict[str, list[str]] = {}  # file -> workers that left or failed while reading it
    hows: dict[str, list[str]] = {}  # file -> what happened on each of them
    answers: dict[str, tuple[str, Any]] = {}
    total = sum(sizes.values())
    done_bytes = 0
    next_alive = time.monotonic() + _ALIVE_EVERY_S
    try:
        while waiting or running:
            load = {a: 0 for a in alive}
            for a, _fut, _t in running.values():
                load[a] = load.get(a, 0) + 1
            # one file a worker a round, so that every worker has work before any has
            # _PER_WORKER (8 files, 4 workers: 2 each, not 3, 3, 2 and 0)
            handing = sorted(alive)
            while handing:
                for addr in list(handing):
                    f = None
                    if load[addr] < _PER_WORKER:
                        f = next((f for f in waiting if addr in seen_by[f] and addr not in tried.get(f, ())), None)  # fmt: skip
                    if f is None:
                        handing.remove(addr)
                        continue
                    waiting.remove(f)
                    fut = client.submit(
                        worker_read, f, steps, key=f"gpuprobe-rank-{uuid.uuid4().hex}",
                        workers=[addr], allow_other_workers=False, pure=False,
                    )  # fmt: skip
                    running[f] = (addr, fut, time.monotonic())
                    load[addr] += 1
            for f in list(waiting):  # no live worker that can see it is left to try
                if not any(a in alive and a not in tried.get(f, ()) for a in seen_by[f]):
                    waiting.remove(f)
                    died = tried.get(f, [])
                    why = "no worker left that can see it" + (
                        f" (tried: {'; '.join(hows[f])})" if died else ""
                    )
                    answers[f] = (died[-1] if died else "", {"error": why})
            time.sleep(_WAIT_STEP_S)
            now = time.monotonic()
            if now >= next_alive:
                next_alive = now + _ALIVE_EVERY_S
                seen = _alive(client)
                if seen is not None:
                    alive &= seen
            for f, (addr, fut, start) in list(running.items()):
                status = fut.status
                if status == "finished":
                    got = _bounded(_result_of(fut), _SCHEDULER_TIMEOUT_S + 1)
                    if isinstance(got, BaseException):
                        got = {"error": f"its answer was lost ({type(got).__name__})"}
                    answers[f] = (addr, got)
                elif status in ("error", "cancelled", "lost") or addr not in alive:
                    # the worker left (the scheduler says so), or its task failed there: the
                    # file once more on another worker; the worker keeps its place unless the
                    # scheduler says it left (a lost task can be the client's connection)
                    how = "left the cluster" if addr not in alive else _failed(fut, status)
                    tried.setdefault(f, []).append(addr)
                    hows.setdefault(f, []).append(f"{addr} {how}")
                    if len(tried[f]) >= 2:
                        answers[f] = (addr, {"error": "tried on 2 workers: "
                                                      + "; ".join(hows[f])})  # fmt: skip
                    else:
                        waiting.insert(0, f)  # once more, on another worker
                    _cancel(client, fut)
                elif now - start > rank_timeout:
                    answers[f] = (
                        addr,
                        {"error": f"no answer from its worker in {rank_timeout:g} s"},
                    )
                    _cancel(client, fut)
                else:
                    continue
                del running[f]
                if f in answers:
                    done_bytes += sizes[f]
                    if progress is not None:
                        progress(min(done_bytes, total), total)
        return answers
    except BaseException:  # Ctrl-C, SIGTERM: what runs on the workers is let go
        for _a, fut, _s in running.values():
            _cancel(client, fut, wait=False)
        raise


def _failed(fut: Any, status: str) -> str:
    """What became of a task that gave no answer, in words."""
    if status == "error":
        exc = _bounded(lambda: fut.exception(timeout=1.0), 2.0)
        if isinstance(exc, BaseException):
            return f"failed there ({type(exc).__name__}: {strip_control(str(exc))[:160]})"
    return f"gave no answer (its task was {status})"


def _result_of(fut: Any) -> Callable[[], Any]:
    return lambda: fut.result(timeout=_SCHEDULER_TIMEOUT_S)


def _cancel(client: Any, fut: Any, wait: bool = True) -> None:
    """Cancel a future, waiting at most a moment for the scheduler."""
    with contextlib.suppress(Exception):
        if wait:
            _bounded(lambda: client.cancel([fut], force=True), 1.0)
        else:
            threading.Thread(target=lambda: client.cancel([fut], force=True), daemon=True).start()
