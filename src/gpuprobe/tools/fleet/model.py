"""What ``gpuprobe doctor --cluster`` returns: a row per node (a host, or one worker of a host
whose workers differ), the nodes grouped by identical configuration, and the cross-node findings;
and what ``gpuprobe bench --cluster`` returns: a row per worker, each comparable figure with every
node's value, and the outliers. Records only: the engines (``engine.py``, ``bench_engine.py``)
and the rules (``rules.py``, ``bench_rules.py``) both use them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status, worst
from gpuprobe.core.records import Record
from gpuprobe.tools.bench.model import BenchReport
from gpuprobe.tools.doctor.model import DoctorReport

__all__ = [
    "BenchPoint",
    "ConfigGroup",
    "Figure",
    "FleetBenchReport",
    "FleetDoctorReport",
    "NodeBench",
    "NodeResult",
    "nodes_and_workers",
]

NodeStatus = str  # "ok" (reported), "lost" (died or timed out), "no-gpuprobe", "error"


@dataclass(frozen=True)
class NodeResult(Record):
    """One node: a host whose workers reported alike (one row however many workers it runs), or
    one worker of a host whose workers differ."""

    name: str  # the host's name, or "host (worker address)" when its workers differ
    host: str
    workers: tuple[str, ...]  # the Dask worker addresses this row stands for
    threads: tuple[int, ...] = ()  # each worker's task threads, as the scheduler reports them
    status: NodeStatus = "ok"
    error: str | None = None  # why there is no report (status other than "ok")
    config: dict[str, str] = field(default_factory=dict)  # what must match across the fleet
    report: DoctorReport | None = None
    elapsed_s: float | None = None  # the node's own doctor time (environment and kernels)
    # the workers whose kernel checks ``report`` holds (one per host and set of GPUs runs them);
    # empty when none of this row's workers ran them, and ``kernels_note`` says why ("covered by
    # worker a": another worker of the host ran them on the same GPUs; "not run": not asked)
    kernels_on: tuple[str, ...] = ()
    # the names of the workers whose kernel checks stand for this row: those of ``kernels_on``,
    # or the worker of the host that covered it
    kernels_by: tuple[str, ...] = ()
    kernels_note: str | None = None

    @property
    def verdict(self) -> Status:
        """The node's own doctor verdict (FAIL for a node with no report)."""
        if self.report is None:
            return Status.FAIL
        return worst(self.report.findings)


@dataclass(frozen=True)
class ConfigGroup(Record):
    """Nodes whose configurations are identical."""

    config: dict[str, str]
    nodes: tuple[str, ...]


def nodes_and_workers(rows: Sequence[NodeResult | NodeBench]) -> str:
    """``1 node(s), 2 worker(s)``: a node is a host, however many workers (and rows: a worker of
    its own when it differs, every worker in bench) it runs, in every fleet report alike."""
    hosts = {r.host for r in rows}
    workers = {w for r in rows for w in r.workers} or {r.name for r in rows}
    return f"{len(hosts)} node(s), {len(workers)} worker(s)"


class _FleetReport(render.Shown, Record):
    """What both fleet reports share: their verdict, their exit code, and their views (core's
    render hooks, which the tool's show module registers; the subclasses are dataclasses with
    ``repr=False`` so that this ``__repr__`` is theirs)."""

    findings: tuple[Finding, ...]

    @property
    def status(self) -> Status:
        """The worst cross-node finding."""
        return worst(self.findings)

    @property
    def exit_code(self) -> int:
        """0 when nothing failed, 1 when a node failed or was lost (a node that differs or an
        outlier is a warning)."""
        return 1 if any(f.failed for f in self.findings) else 0


@dataclass(frozen=True, repr=False)
class FleetDoctorReport(_FleetReport):
    """Doctor on every worker of a Dask cluster, judged across nodes."""

    scheduler: str
    nodes: tuple[NodeResult, ...] = ()
    groups: tuple[ConfigGroup, ...] = ()  # largest first: groups[0] is the majority
    findings: tuple[Finding, ...] = ()
    quick: bool = True
    elapsed_s: float | None = None
    slowest_node_s: float | None = None  # the slowest node's own doctor time

    def node(self, name: str) -> NodeResult | None:
        """The row named ``name`` (a host, or ``host (address)``)."""
        return next((n for n in self.nodes if n.name == name), None)


@dataclass(frozen=True)
class NodeBench(Record):
    """One worker's bench: the same short workloads as every other worker's, with what its
    devices are (``{"cpu": "AMD EPYC 7763 …", "cuda:0": "NVIDIA H100 80GB HBM3"}``), so that
    figures are compared with those of the same model only."""

    name: str  # the host's name, or "host/worker" when the host runs several workers
    host: str
    workers: tuple[str, ...]  # the one Dask worker address this row stands for
    threads: tuple[int, ...] = ()  # the worker's task threads, as the scheduler reports them
    status: NodeStatus = "ok"
    error: str | None = None
    devices: dict[str, str] = field(default_factory=dict)  # device -> model
    report: BenchReport | None = None
    elapsed_s: float | None = None  # the node's own bench time

    @property
    def blas_threads(self) -> int | None:
        """The threads numpy's BLAS used on the node (Dask's nanny sets OMP_NUM_THREADS=1), or,
        where numpy did not run (``--backend torch``), the CPU math threads of the framework
        that ran on the CPU (torch's intra-op threads: 1 in a Dask worker on an H200 host)."""
        if self.report is None:
            return None
        if self.report.environment.threads is not None:
            return self.report.environment.threads
        on_cpu = (w.environment.get("threads") for w in self.report.workers if w.device == "cpu")
        return next((t for t in on_cpu if isinstance(t, int)), None)


@dataclass(frozen=True)
class Figure(Record):
    """One node's figure for one point: ``who`` is the node, or ``node cuda:N`` for a GPU."""

    who: str
    node: str
    device: str
    value: float
    pct_peak: float | None = None  # % of the device's spec peak (GPUs; None for a CPU)
    vs_peers: float | None = None  # value / median of the other figures (None: too few peers)
    outlier: bool = False  # more than OUTLIER_MADS MADs and OUTLIER_MIN_GAP from its peers


@dataclass(frozen=True)
class BenchPoint(Record):
    """One comparable measurement: a workload, case, framework and size on one kind and model of
    device, with every node's figure. Like is compared with like only."""

    workload: str
    case: str
    framework: str
    kind: str  # "cpu" or "gpu"
    model: str  # the CPU's or the GPU's model name
    size: int | None
    size_unit: str
    metric: str  # "tflops", "gbs" or "seconds"
    unit: str
    higher_is_better: bool
    figures: tuple[Figure, ...] = ()
    median: float | None = None

    @property
    def label(self) -> str:
        """``matmul float32 torch 512``, ``transfer host numpy 64 MiB``."""
        size = (
            f"{self.size / 2**20:g} MiB"
            if self.size_unit == "bytes" and self.size and self.size >= 2**20
            else str(self.size)
        )
        return f"{self.workload} {self.case} {self.framework} {size}"

    def figure(self, who: str) -> Figure | None:
        """The figure of ``who`` (a node, or ``node cuda:N``)."""
        return next((f for f in self.figures if f.who == who), None)


@dataclass(frozen=True, repr=False)
class FleetBenchReport(_FleetReport):
    """The same short bench on every worker of a Dask cluster, the figures compared among nodes
    with the same device model, and the outliers named."""

    scheduler: str
    workloads: tuple[str, ...] = ()
    quick: bool = True
    one_at_a_time: bool = False
    nodes: tuple[NodeBench, ...] = ()
    points: tuple[BenchPoint, ...] = ()
    findings: tuple[Finding, ...] = ()
    elapsed_s: float | None = None
    slowest_node_s: float | None = None  # the slowest node's own bench time

    def node(self, name: str) -> NodeBench | None:
        """The row named ``name``."""
        return next((n for n in self.nodes if n.name == name), None)

    def outliers(self) -> list[tuple[BenchPoint, Figure]]:
        """Every figure named an outlier, with its point."""
        return [(p, f) for p in self.points for f in p.figures if f.outlier]
