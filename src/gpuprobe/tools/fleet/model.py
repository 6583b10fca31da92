"""What ``gpuprobe doctor --cluster`` returns: a row per node (a host, or one worker of a host
whose workers differ), the nodes grouped by identical configuration, and the cross-node findings.
Records only: the engine (``engine.py``) and the rules (``rules.py``) both use them."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuprobe.core import render
from gpuprobe.core.findings import Finding, Status, worst
from gpuprobe.core.records import Record
from gpuprobe.tools.doctor.model import DoctorReport

__all__ = ["ConfigGroup", "FleetDoctorReport", "NodeResult"]

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
    elapsed_s: float | None = None  # the node's own doctor time

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


@dataclass(frozen=True)
class FleetDoctorReport(Record):
    """Doctor on every worker of a Dask cluster, judged across nodes."""

    scheduler: str
    nodes: tuple[NodeResult, ...] = ()
    groups: tuple[ConfigGroup, ...] = ()  # largest first: groups[0] is the majority
    findings: tuple[Finding, ...] = ()
    quick: bool = True
    elapsed_s: float | None = None
    slowest_node_s: float | None = None  # the slowest node's own doctor time

    @property
    def status(self) -> Status:
        """The worst cross-node finding."""
        return worst(self.findings)

    @property
    def exit_code(self) -> int:
        """0 when nothing failed, 1 when a node failed or was lost."""
        return 1 if any(f.failed for f in self.findings) else 0

    def node(self, name: str) -> NodeResult | None:
        """The row named ``name`` (a host, or ``host (address)``)."""
        return next((n for n in self.nodes if n.name == name), None)

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)

    def _repr_html_(self) -> str:
        return render.html(self)
