"""Every wait of ``scale`` on remote work has a bound, and none holds Ctrl-C (issue 40 group 4).

- :func:`wait_for`: futures on the cluster, watched every :data:`WATCH_STEP_S`: a worker that
  stays paused over its memory limit for :data:`PAUSED_GIVE_UP_S` ends the wait with its state
  in one line (it waited 500 s in silence before), as does the pass's own timeout; a worker that
  dies is the scheduler's to replace (no task is pinned to one worker: restrictions are loose).
- :func:`in_daemon`: long work in this process (numpy's lstsq for the reference: seconds of
  LAPACK, during which Python runs no signal handler) in a daemon thread, this thread waiting
  in short joins, so that Ctrl-C stops the command at once.

Times in this module are seconds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gpuprobe.core.errors import GpuprobeError

__all__ = ["PAUSED_GIVE_UP_S", "WATCH_STEP_S", "in_daemon", "wait_for"]

T = TypeVar("T")

# s between two looks at the futures and the workers: how soon a stuck pass is seen
WATCH_STEP_S = 0.5
# s a worker may stay paused (Dask's memory monitor: over distributed.worker.memory.pause, 80 %
# of its limit) while work waits on it, before the wait ends with its state. Dask's own spill to
# disk usually frees memory in a second or two; 15 s is gpuprobe's choice, well past that.
PAUSED_GIVE_UP_S = 15.0
_JOIN_STEP_S = 0.1  # s between two joins of a daemon thread (the main thread's signal checks)


def in_daemon(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a daemon thread; its result, or its exception raised here. This thread
    waits in short joins: a KeyboardInterrupt (or SIGTERM's stop) is raised here at once, and
    the daemon thread does not hold the process's exit."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, fn(*args)))
        except BaseException as exc:  # raised again in the caller
            box.append((False, exc))

    t = threading.Thread(target=run, name="gpuprobe-scale-work", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(_JOIN_STEP_S)
    except BaseException:  # stopped: the process exits without waiting for it
        from gpuprobe.platform.proc import abandon

        abandon(t)
        raise
    ok, value = box[0]
    if not ok:
        raise value
    return value


def wait_for(
    client: Any,
    futures: Any,
    *,
    timeout: float | None,
    workers: Sequence[str] | None = None,
    what: str = "a pass over A",
) -> None:
    """Wait for ``futures`` (a future or a list), at most ``timeout`` s (None: no limit but the
    paused check), looking every :data:`WATCH_STEP_S` s at the workers that may run them
    (``workers``, else all): one paused for :data:`PAUSED_GIVE_UP_S` ends the wait. Either end
    cancels the futures and is a :class:`GpuprobeError` with the workers' state."""
    import distributed

    from gpuprobe.tools.scale.engine import paused_workers, workers_state

    t0 = time.monotonic()
    paused_since: dict[str, float] = {}
    while True:
        step = WATCH_STEP_S if timeout is None else min(WATCH_STEP_S, timeout)
        try:
            with client.as_current():  # the client may not be the default one
                distributed.wait(futures, timeout=step)
            return
        except (TimeoutError, asyncio.TimeoutError):
            pass
        now = time.monotonic()
        if timeout is not None and now - t0 >= timeout:
            client.cancel(futures)
            raise GpuprobeError(
                f"{what} did not finish in {timeout:g} s; the workers: {workers_state(client)}. "
                "A paused worker is over its memory limit: use smaller row blocks "
                "(--chunk-rows), more workers or more memory per worker"
            ) from None
        mine = set(workers or ())
        paused = {w["address"]: w for w in paused_workers(client) if w["status"] == "paused"}
        paused = {a: w for a, w in paused.items() if not mine or a in mine}
        paused_since = {a: paused_since.get(a, now) for a in paused}
        stuck = [a for a, since in paused_since.items() if now - since >= PAUSED_GIVE_UP_S]
        if stuck:
            client.cancel(futures)
            raise GpuprobeError(
                f"{what} stopped: worker {stuck[0]} has been paused over its memory limit for "
                f"{now - paused_since[stuck[0]]:.0f} s (the workers: {workers_state(client)}); "
                "use smaller row blocks (--chunk-rows), more workers, or more memory per worker "
                "(dask worker --memory-limit)"
            ) from None
