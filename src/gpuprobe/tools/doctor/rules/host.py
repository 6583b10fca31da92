"""The rule on the host while the kernel checks ran: other processes that kept its cores busy
slow the CPU timings (so, on a machine with a GPU, the GPU's speedup over the CPU looks larger
than it is)."""

from __future__ import annotations

from gpuprobe.core.findings import Finding
from gpuprobe.core.rules import rule
from gpuprobe.platform.hardware.load import host_busy_finding
from gpuprobe.tools.doctor.model import DoctorContext

__all__ = ["host_busy"]


def _others_measured(ctx: DoctorContext) -> bool:
    return ctx.others_cores is not None


@rule("doctor-host-busy", applies=_others_measured)
def host_busy(ctx: DoctorContext) -> list[Finding]:
    """``doctor-host-busy``: other processes kept the host's cores busy while the kernel checks
    ran (measured only when they ran)."""
    host = ctx.inventory.host
    busy = host_busy_finding(
        "doctor-host-busy",
        "the performance checks' timing",
        ctx.others_cores,
        host.usable_cores or host.logical_cores,
        effect="the CPU timings (E1, docs/experiments.md#e1) are slowed and the GPU's speedup over "
        "the CPU looks larger than on an idle machine"
        if ctx.inventory.gpus
        else "the CPU timings (E1, docs/experiments.md#e1) are slower than this machine is when "
        "idle",
        fix="re-run 'gpuprobe doctor' when the machine is idle (see 'gpuprobe top')",
        group="performance",
        subject="host",
    )
    return [] if busy is None else [busy]
