"""Sizes that cannot fit are skipped as out of memory, the memory is given back, the run goes on."""

from __future__ import annotations

from typing import Any

from gpuprobe.platform.frameworks.numpy import NumpyBackend
from gpuprobe.tools.bench.workloads import Settings, run_workload
from gpuprobe.tools.bench.workloads._common import guard


class SmallBackend(NumpyBackend):
    """NumPy that says only 1 MB is free."""

    def __init__(self) -> None:
        super().__init__()
        self.released = 0

    def free_memory(self) -> int | None:
        return 1_000_000

    def release(self) -> None:
        self.released += 1


def test_sizes_over_free_memory_are_skipped_before_trying() -> None:
    b = SmallBackend()
    rs = list(run_workload("matmul", b, Settings(budget_s=0.002, sizes={"matmul": (16, 1024)})))
    by = {(r.case, r.size): r for r in rs}
    assert by[("float64", 16)].ok
    assert by[("float64", 1024)].status == "out-of-memory"
    assert "needs" in (by[("float64", 1024)].reason or "")
    assert by[("float32", 16)].ok  # the run went on


def test_an_out_of_memory_error_is_caught_and_memory_released() -> None:
    b = SmallBackend()

    def boom() -> Any:
        raise MemoryError("Unable to allocate 80.0 GiB")

    r = guard(b, "matmul", "float64", 100_000, "n", boom)
    assert r.status == "out-of-memory" and b.released == 1
    assert r.reason is not None and r.reason.startswith("out of memory")

    def framework_oom() -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    assert guard(b, "matmul", "float64", 1, "n", framework_oom).status == "out-of-memory"

    def other() -> Any:
        raise ValueError("bad shapes")

    r = guard(b, "matmul", "float64", 1, "n", other)
    assert r.status == "error" and r.reason == "ValueError: bad shapes" and b.released == 2
