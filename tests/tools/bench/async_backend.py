"""A fake GPU backend that is honestly asynchronous: each operation is queued onto a worker
thread (the "device") and returns at once; events are markers the thread stamps with the clock
when it reaches them, so ``time()`` reports the device's time as CUDA events would."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gpuprobe.platform.frameworks.base import Backend


class _Mark:
    def __init__(self) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()


class FakeArray:
    """An array whose value is computed on the device thread, later."""

    def __init__(self, backend: AsyncBackend, value: Any = None) -> None:
        self.backend = backend
        self.value = value

    def _lazy(self, f: Callable[[Any], Any]) -> FakeArray:
        out = FakeArray(self.backend)

        def work() -> None:
            out.value = f(self.value)

        self.backend.submit(work)
        return out

    def __mul__(self, k: float) -> FakeArray:
        return self._lazy(lambda v: v * k)

    def __getitem__(self, idx: Any) -> FakeArray:
        return self._lazy(lambda v: v[idx].copy())


class AsyncBackend(Backend):
    """A 'GPU' whose calls return immediately and whose clock is the device thread's."""

    framework = "fake"
    device = "cuda:0"

    def __init__(self) -> None:
        self.q: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.released = 0

    def _run(self) -> None:
        while True:
            job = self.q.get()
            if job is None:
                return
            job()

    def submit(self, job: Callable[[], None]) -> None:
        self.q.put(job)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()

    @property
    def xp(self) -> Any:
        return np

    def asarray(self, a: Any) -> Any:
        return FakeArray(self, np.asarray(a))

    def to_numpy(self, x: Any) -> Any:
        self.synchronize()
        return x.value if isinstance(x, FakeArray) else np.asarray(x)

    def synchronize(self) -> None:
        done = threading.Event()
        self.q.put(done.set)
        done.wait()

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        marks = []
        for _ in range(n):
            if setup is not None:
                setup()
            start, end = _Mark(), _Mark()
            self.submit(start.record)
            fn()
            self.submit(end.record)
            marks.append((start, end))
        self.synchronize()
        return [e.t - s.t for s, e in marks]

    def release(self) -> None:
        self.released += 1
