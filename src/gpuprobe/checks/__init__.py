"""``gpuprobe doctor``: does this GPU setup really work? Verdicts with evidence and the fix.

Checks come in groups (driver, environment, frameworks, each GPU, performance). The first four
judge the :class:`~gpuprobe.machine.Inventory`; performance runs real kernels.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuprobe._data import Record
from gpuprobe.checks.worker import WorkerResult
from gpuprobe.errors import EXIT_CHECK_FAILED, EXIT_OK
from gpuprobe.findings import Finding, Status, status_counts, worst, worst_first
from gpuprobe.hardware.load import HostLoad, host_busy_finding
from gpuprobe.machine import Inventory

__all__ = ["GROUPS", "DoctorReport", "doctor", "judge"]

GROUPS: tuple[str, ...] = ("driver", "environment", "frameworks", "gpu", "performance")


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
        from gpuprobe.report.notebook import doctor_html

        return doctor_html(self)

    def __repr__(self) -> str:
        elapsed = f", {self.elapsed_s:.1f} s" if self.elapsed_s is not None else ""
        mode = "" if self.live else ", recorded snapshot"
        return (
            f"<DoctorReport {self.status.value}: {len(self.findings)} findings "
            f"({status_counts(self.findings)}){elapsed}{mode}, exit code {self.exit_code}>"
        )

    def __str__(self) -> str:
        from gpuprobe.report.terminal import doctor_text

        return doctor_text(self)


def judge(inv: Inventory, workers: list[WorkerResult] | None = None) -> list[Finding]:
    """Every finding for ``inv`` and, when given, the kernel checks' results. Pure: no I/O."""
    from gpuprobe.checks.driver import check_cuda_init, check_driver
    from gpuprobe.checks.env import check_env
    from gpuprobe.checks.frameworks import check_frameworks
    from gpuprobe.checks.gpu import check_gpus
    from gpuprobe.checks.kernels import judge_cpu, judge_gpu

    findings = [
        *check_driver(inv),
        *check_cuda_init(inv),
        *check_env(inv),
        *check_frameworks(inv),
        *check_gpus(inv),
    ]
    if workers is not None:
        findings.extend(judge_cpu(workers))
        for r in workers:
            if r.device != "cpu":
                findings.extend(judge_gpu(r, workers, inv))
    seen: set[tuple[str, str]] = set()
    unique = []
    for f in findings:  # the same link or throttle seen through two frameworks is one finding
        key = (f.id, f.subject)
        if key in seen and f.group == "performance" and f.id.startswith(("pcie-link", "gpu-")):
            continue
        seen.add(key)
        unique.append(f)
    return unique


def doctor(
    quick: bool = False,
    *,
    inventory: Inventory | None = None,
    run_kernels: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Check this machine (or a recorded ``inventory``) and return the report.

    ``quick`` uses smaller problems. Kernels run on a live machine; a recorded inventory is judged
    without them unless ``run_kernels`` says otherwise.
    """
    from gpuprobe.checks.kernels import plan_workers, run_workers
    from gpuprobe.machine import inventory as read_inventory

    t0 = time.perf_counter()
    live = inventory is None
    if progress:
        progress("reading the machine")
    inv = read_inventory(frameworks="runtime") if inventory is None else inventory
    if run_kernels is None:
        run_kernels = live
    others = None
    if run_kernels:
        load = HostLoad(children=True)
        workers = run_workers(plan_workers(inv), quick, progress)
        others = load.others_cores()
    else:
        workers = None
    findings = judge(inv, workers)
    busy = host_busy_finding(
        "doctor-host-busy",
        "the performance checks' timing",
        others,
        inv.host.usable_cores or inv.host.logical_cores,
        effect="the CPU timings (E1, docs/experiments.md#e1) are slowed and the GPU's speedup over "
        "the CPU looks larger than on an idle machine",
        fix="re-run 'gpuprobe doctor' when the machine is idle (see 'gpuprobe top')",
        group="performance",
        subject="host",
    )
    if busy is not None:
        findings.append(busy)
    return DoctorReport(
        inventory=inv,
        findings=tuple(findings),
        workers=tuple(workers or ()),
        elapsed_s=round(time.perf_counter() - t0, 3),
        live=live,
        others_cores=None if others is None else round(others, 3),
    )
