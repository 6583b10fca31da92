"""NumPy's door: the CPU baseline every GPU number is compared with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuprobe.frameworks.base import Backend, host_times

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
        return host_times(fn, n, setup)
