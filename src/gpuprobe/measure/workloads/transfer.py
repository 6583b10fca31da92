"""Copies from 4 KB to 1 GB: host→device and device→host from pageable and from pinned
(page-locked) host memory, and device→device; on a machine without a GPU, a host memory copy
(memcpy), so that the workload still says what memory can move.

GB/s = bytes moved / median time. Host↔device copies count the buffer once. Device→device and
host copies count the read **and** the write (2 × buffer), the convention of CUDA's
bandwidthTest and of STREAM's copy (nvbandwidth reports buffer/time and its maintainer notes the
real traffic is twice that, NVIDIA/nvbandwidth#48). Small copies are repeated between one pair of
events (as nvbandwidth does) so that each timed repetition moves at least 16 MiB.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuprobe.frameworks.base import Backend
from gpuprobe.measure.report import BenchResult
from gpuprobe.measure.workloads._common import Settings, fits, guard, point, skipped, timed

__all__ = ["GPU_KINDS", "SIZES", "run"]

KB = 1024
SIZES = (
    tuple(4 * KB * 4**i for i in range(11)),  # 4 KB … 4 GB; capped by MAX_BYTES below
    (4 * KB, 64 * KB, 1024 * KB, 16 * 1024 * KB, 64 * 1024 * KB),
)
MAX_BYTES = 2**30  # 1 GiB, the top size
GPU_KINDS = ("h2d-pageable", "h2d-pinned", "d2h-pageable", "d2h-pinned", "d2d")
CPU_KINDS = ("host",)
MIN_BYTES_PER_REP = 16 * 2**20  # small copies are repeated until a repetition moves this much
MAX_INNER = 256  # at most this many copies between two events


def moved_bytes(kind: str, nbytes: int) -> int:
    """Bytes of memory traffic one copy of ``nbytes`` makes (read + write within one memory)."""
    return 2 * nbytes if kind in ("d2d", "host") else nbytes


def _one(b: Backend, s: Settings, kind: str, nbytes: int) -> BenchResult:
    copy = b.copier(kind, nbytes)
    if copy is None:
        raise NotImplementedError(f"{b.framework} offers no {kind} copy")
    inner = max(1, min(MAX_INNER, MIN_BYTES_PER_REP // nbytes))
    moved = moved_bytes(kind, nbytes)
    m = timed(
        b,
        f"copy-{kind}",
        copy,
        s,
        min_runs=3,
        inner=inner,
        work={"bytes": float(moved)},
        metadata={"bytes": nbytes, "kind": kind, "copies_per_rep": inner},
    )
    return point(
        b,
        "transfer",
        kind,
        nbytes,
        "bytes",
        m,
        {"gbs": moved / m.median / 1e9},
    )


def run(b: Backend, s: Settings) -> Iterator[BenchResult]:
    """Each kind of copy over the sizes, smallest first."""
    sizes = [n for n in s.pick("transfer", *SIZES) if n <= MAX_BYTES]
    for kind in GPU_KINDS if b.is_gpu else CPU_KINDS:
        if b.copier(kind, 4 * KB) is None:
            yield skipped(
                b, "transfer", kind, None, "bytes", f"skipped: {b.framework} offers no {kind} copy"
            )
            continue
        for nbytes in sizes:
            why = fits(b, 2 * nbytes if kind == "d2d" else nbytes)
            if why:
                yield skipped(b, "transfer", kind, nbytes, "bytes", why)
                continue
            yield guard(b, "transfer", kind, nbytes, "bytes", _one, b, s, kind, nbytes)
        b.release()
