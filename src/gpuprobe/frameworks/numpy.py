"""NumPy's door: the CPU baseline every GPU number is compared with."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuprobe.frameworks.base import Backend

__all__ = ["NumpyBackend"]


class NumpyBackend(Backend):
    """NumPy on the CPU; durations from ``time.perf_counter`` (NumPy calls are synchronous)."""

    framework = "numpy"
    device = "cpu"

    def __init__(self) -> None:
        import numpy

        self._np = numpy

    @property
    def xp(self) -> Any:
        return self._np

    def asarray(self, a: Any) -> Any:
        return self._np.asarray(a)

    def to_numpy(self, x: Any) -> Any:
        return self._np.asarray(x)

    def synchronize(self) -> None:
        return None

    def time(
        self, fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None
    ) -> list[float]:
        out = []
        for _ in range(n):
            if setup is not None:
                setup()
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out
