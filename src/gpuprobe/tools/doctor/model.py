"""What ``gpuprobe doctor`` judges and what it returns: the context its rules share
(:class:`DoctorContext`) and the report (:class:`DoctorReport`)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuprobe.core import render
from gpuprobe.core.errors import EXIT_CHECK_FAILED, EXIT_OK
from gpuprobe.core.findings import Finding, Status, status_counts, worst, worst_first
from gpuprobe.core.records import Record
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.worker import WorkerResult

__all__ = ["GROUPS", "DoctorContext", "DoctorReport"]

GROUPS: tuple[str, ...] = ("driver", "environment", "frameworks", "gpu", "performance")


@dataclass(frozen=True)
class DoctorContext:
    """What every doctor rule judges: the inventory and, when the kernel checks ran, their
    results (``None``: not run, as for a recorded snapshot) and the CPU cores other processes
    kept busy meanwhile (``None``: not measured)."""

    inventory: Inventory
    workers: tuple[WorkerResult, ...] | None = None
    others_cores: float | None = None


@dataclass(frozen=True)
class DoctorReport(Record):
    """The inventory judged: every finding, the kernel checks' raw results, and the verdict."""

    inventory: Inventory
    findings: tuple[Finding, ...] = ()
    workers: tuple[WorkerResult, ...] = ()
    elapsed_s: float | None = None
    live: bool = True  # False when judging a recorded snapshot (no kernels were run)
    # CPU cores other processes kept busy while the kernel checks ran (None: not measured)
    others_cores: float | None = None

    @property
    def status(self) -> Status:
        """The worst finding's status."""
        return worst(self.findings)

    @property
    def exit_code(self) -> int:
        """0 when nothing failed, 1 when a check failed."""
        return EXIT_CHECK_FAILED if any(f.failed for f in self.findings) else EXIT_OK

    def by_group(self) -> dict[str, list[Finding]]:
        """Findings per group, in :data:`GROUPS` order, worst first within a group."""
        out: dict[str, list[Finding]] = {g: [] for g in GROUPS}
        for f in worst_first(self.findings):
            out.setdefault(f.group or "other", []).append(f)
        return {g: fs for g, fs in out.items() if fs}

    def finding(self, finding_id: str) -> Finding | None:
        """The first finding with ``finding_id``."""
        return next((f for f in self.findings if f.id == finding_id), None)

    def _repr_html_(self) -> str:
        return render.html(self)

    def __repr__(self) -> str:
        elapsed = f", {self.elapsed_s:.1f} s" if self.elapsed_s is not None else ""
        mode = "" if self.live else ", recorded snapshot"
        return (
            f"<DoctorReport {self.status.value}: {len(self.findings)} findings "
            f"({status_counts(self.findings)}){elapsed}{mode}, exit code {self.exit_code}>"
        )

    def __str__(self) -> str:
        return render.text(self)
