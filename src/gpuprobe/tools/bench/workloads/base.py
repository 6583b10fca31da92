"""The shape of one workload of ``gpuprobe bench``: a :class:`Workload` says everything the rest of
bench needs to know about it (its name, its table's title, how to run it, the peak its figures
are held against, its rules, what it puts on the charts), so that a workload is one module and
nothing else names it.

The rules of a workload judge a :class:`BenchContext` (the run's results, its workers, the
machine); :func:`finding` and :func:`by_pair` are what they share with bench's cross-workload
rules (:mod:`gpuprobe.tools.bench.rules`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import Rule
from gpuprobe.platform.frameworks.base import Backend
from gpuprobe.tools.bench.model import BenchResult, WorkerRun
from gpuprobe.tools.bench.workloads._common import Settings

if TYPE_CHECKING:
    from gpuprobe.platform.hardware.types import Gpu
    from gpuprobe.platform.inventory import Inventory

__all__ = [
    "GROUP",
    "BenchContext",
    "Curve",
    "Plot",
    "Roofline",
    "SizeSeries",
    "Workload",
    "by_pair",
    "finding",
    "no_limit",
]

GROUP = "bench"  # the findings' group


@dataclass(frozen=True)
class BenchContext:
    """What bench's rules judge: the run's results (with their peaks), its workers, and the
    machine (None when not read)."""

    results: Sequence[BenchResult]
    workers: Sequence[WorkerRun] = ()
    inventory: Inventory | None = None


def finding(
    fid: str, status: Status, title: str, ev: Sequence[Evidence], fix: str = "", subject: str = ""
) -> Finding:
    """A finding of bench's group."""
    return Finding(fid, status, title, tuple(ev), fix=fix, group=GROUP, subject=subject)


def by_pair(
    results: Sequence[BenchResult], workload: str
) -> dict[tuple[str, str], list[BenchResult]]:
    """The measured results of ``workload`` by (framework, device), in the order run."""
    out: dict[tuple[str, str], list[BenchResult]] = defaultdict(list)
    for r in results:
        if r.workload == workload and r.ok:
            out[(r.framework, r.device)].append(r)
    return out


def no_limit(case: str) -> float | None:
    """The default error limit: a workload whose results carry no ``rel_error`` to judge."""
    return None


@dataclass(frozen=True)
class Curve:
    """One chart of a workload's time against size: the results whose case starts with
    ``cases``, one line per series (``series(result)`` gives its label and whether the line is
    dashed)."""

    cases: str
    title: str
    xlabel: str
    series: Callable[[BenchResult], tuple[str, bool]]
    empty: str  # what the chart says it lacks: "no {empty} results in this run"
    plain_ticks: bool = False  # the sizes run as plain numbers on the x axis
    cpu_only_note: str = ""  # said on the chart when no GPU took part


@dataclass(frozen=True)
class SizeSeries:
    """One chart of a workload's rate (``value``, e.g. ``gbs``) against size, a line per case and
    device."""

    value: str
    title: str
    xlabel: str
    ylabel: str
    empty: str


@dataclass(frozen=True)
class Roofline:
    """What a workload puts on the roofline.

    ``points``: which of its cases are points (their largest size); ``flop_roof``: the case whose
    spec peak is the GPU's compute roof; ``measured_flop_roof``: the cases whose best measured
    rate is the compute roof where there is no spec; a case of a workload with a ``flop_roof``
    outside ``measured_flop_roof`` with a spec peak gets a dashed roof of its own (a lower
    precision); ``memory_roof``: its spec peak is the memory roof; ``measured_memory_roof``: which
    of its results' rates may set the measured memory roof."""

    points: Callable[[str], bool] | None = None
    flop_roof: str | None = None
    measured_flop_roof: tuple[str, ...] = ()
    memory_roof: bool = False
    measured_memory_roof: Callable[[BenchResult], bool] | None = None


@dataclass(frozen=True)
class Plot:
    """A workload's share of ``gpuprobe bench --plot``: its curves, its rate-against-size charts,
    its share of the roofline."""

    curves: tuple[Curve, ...] = ()
    series: tuple[SizeSeries, ...] = ()
    roofline: Roofline = Roofline()


@dataclass(frozen=True)
class Workload:
    """One workload: its ``name`` (the command line's), the ``title`` of its table (``{size}``
    is replaced by the sizes run), ``run(backend, settings)`` yielding its results, the figure
    held against the hardware's peak (``rate``: ``gbs`` or ``tflops``) and ``peak(result, gpu)``
    (None: no peak), the ``error_limit(case)`` its ``rel_error`` must stay under, its rules
    (``checks``: what is wrong with the figures, judged first; ``advice``: what they say to do),
    and its ``plot``."""

    name: str
    title: str
    run: Callable[[Backend, Settings], Iterator[BenchResult]]
    rate: str = "gbs"
    peak: Callable[[BenchResult, Gpu], float | None] | None = None
    error_limit: Callable[[str], float | None] = no_limit
    checks: tuple[Rule, ...] = ()
    advice: tuple[Rule, ...] = ()
    plot: Plot = Plot()

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule of this workload: its checks, then its advice."""
        return self.checks + self.advice
