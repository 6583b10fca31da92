"""What other processes took from the host's cores while gpuprobe measured: one measure and one
finding for every command that measures (bench, doctor, fit, precision, pack, run; scale judges
its workers' own CPU share).

:class:`HostLoad` reads the host's busy CPU time (psutil) and our own (``getrusage`` of this
process, or of its finished children) at the start and the end of a stretch of work; the
difference is the cores other processes kept busy. :func:`host_busy_finding` says so, with the
numbers, when it is enough to change the result.
"""

from __future__ import annotations

import resource
import time

from gpuprobe.core.findings import Evidence, Finding, Status

__all__ = ["HOST_BUSY_WARN_FRACTION", "HostLoad", "host_busy_finding", "others_cores"]

# Other processes using more than this share of the host's cores while gpuprobe measures: its
# figures are slowed, multi-threaded ones (BLAS, OpenMP) by far the most, because a barrier
# waits a whole scheduler slice (4-16 ms, CFS) for a descheduled thread. Seen here: a 64x64 torch
# matmul at 16 ms instead of 8 µs with two other jobs on 2 cores.
HOST_BUSY_WARN_FRACTION = 0.25


def _host_busy_s() -> float | None:
    """CPU seconds all processes have kept the host's cores busy since boot (psutil)."""
    try:
        import psutil

        t = psutil.cpu_times()
    except (ImportError, OSError):
        return None
    return float(sum(t)) - float(t.idle) - float(getattr(t, "iowait", 0.0))


def others_cores(host_busy_cores: float | None, own_cores: float | None) -> float | None:
    """Cores kept busy by other processes: the host's busy cores less our own (never negative)."""
    if host_busy_cores is None or own_cores is None:
        return None
    return max(0.0, host_busy_cores - own_cores)


class HostLoad:
    """How many cores other processes kept busy over a stretch of time: the host's busy CPU time
    (psutil) less our own (``getrusage`` of this process, or of its finished children, or both).

    Start it before the work; read :meth:`others_cores` after it."""

    def __init__(self, *, children: bool, self_too: bool = False) -> None:
        self._who = (
            (resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF)
            if children and self_too
            else (resource.RUSAGE_CHILDREN,)
            if children
            else (resource.RUSAGE_SELF,)
        )
        self._t0 = time.perf_counter()
        self._busy0 = _host_busy_s()
        self._ours0 = self._ours()

    def _ours(self) -> float:
        total = 0.0
        for who in self._who:
            r = resource.getrusage(who)
            total += r.ru_utime + r.ru_stime
        return total

    @property
    def wall_s(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self._t0

    def own_cores(self) -> float | None:
        """Cores our own work used on average since the start."""
        wall = self.wall_s
        return (self._ours() - self._ours0) / wall if wall > 0 else None

    def others_cores(self) -> float | None:
        """Cores used by others since the start, or None where the host cannot say."""
        busy = _host_busy_s()
        wall = self.wall_s
        if busy is None or self._busy0 is None or wall <= 0:
            return None
        return others_cores((busy - self._busy0) / wall, self.own_cores())


def host_busy_finding(
    finding_id: str,
    what: str,
    others: float | None,
    cores: int | None,
    *,
    effect: str,
    fix: str,
    group: str = "",
    subject: str = "",
    extra: tuple[Evidence, ...] = (),
) -> Finding | None:
    """A warning that ``what`` was measured while other processes kept ``others`` of ``cores``
    busy (``effect``: what that does to this command's result), or None below
    :data:`HOST_BUSY_WARN_FRACTION` of the cores."""
    if others is None or not cores or others <= HOST_BUSY_WARN_FRACTION * cores:
        return None
    return Finding(
        finding_id,
        Status.WARN,
        f"{what} was measured while other processes kept {others:.1f} of {cores} cores busy: "
        f"{effect}",
        (
            Evidence("others_cores", round(others, 2), "cores"),
            Evidence("host_cores", cores, "cores"),
            Evidence("threshold", HOST_BUSY_WARN_FRACTION * cores, "cores"),
            *extra,
        ),
        fix=fix,
        group=group,
        subject=subject,
    )
