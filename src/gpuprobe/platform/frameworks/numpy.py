"""NumPy's door: the CPU baseline every GPU number is compared with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuprobe.platform.frameworks.base import Backend, host_times

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

    def matmul_dtypes(self) -> tuple[str, ...]:
        # float16 and int8 products have no BLAS path in NumPy (a slow loop): not benchmarked
        return ("float64", "float32")

    def copier(self, kind: str, nbytes: int) -> Callable[[], Any] | None:
        if kind != "host":
            return None
        src = self._np.ones(nbytes, dtype=self._np.uint8)
        dst = self._np.empty_like(src)
        return lambda: self._np.copyto(dst, src)

    def environment(self) -> dict[str, str | int | float | None]:
        from gpuprobe.platform.hardware.host import read_blas

        blas = read_blas()
        return {
            "framework": "numpy",
            "version": self._np.__version__,
            "device": "cpu",
            "blas": f"{blas.name} {blas.version or ''}".strip() if blas else None,
            "blas_architecture": blas.architecture if blas else None,
            "threads": blas.threads if blas else None,
        }
