"""Environment checks: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER against the real cards.

CUDA reads both once, when a process initialises CUDA. CUDA_VISIBLE_DEVICES is a comma-separated
list of indices (in CUDA_DEVICE_ORDER's order), GPU-/MIG- UUIDs or unique UUID prefixes; CUDA
stops at the first entry it cannot use and ignores the rest. CUDA's default order is FASTEST_FIRST
while nvidia-smi and NVML number cards by PCI bus, so indices can disagree on mixed machines.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.model import DoctorContext

__all__ = ["VisibleDevices", "check_env", "parse_visible_devices"]

GROUP = "environment"


@dataclass(frozen=True)
class VisibleDevices:
    """How CUDA reads a CUDA_VISIBLE_DEVICES value against the cards in CUDA order."""

    visible: tuple[str, ...]  # UUIDs, in the new CUDA order
    ignored: tuple[str, ...]  # entries from the first bad one on
    problem: str | None  # why the first ignored entry is bad


def parse_visible_devices(value: str, order: list[str]) -> VisibleDevices:
    """Apply CUDA's rules for ``value`` to the cards whose UUIDs are ``order`` (CUDA order).
    MIG UUIDs are kept as given when they are well formed (NVML lists them per GPU)."""
    entries = [e.strip() for e in value.split(",")] if value.strip() else []
    visible: list[str] = []
    for i, entry in enumerate(entries):
        problem = None
        match: str | None = None
        if entry.lstrip("-").isdigit():
            idx = int(entry)
            if idx < 0:
                problem = f"{entry!r} is negative: CUDA hides it and every entry after it"
            elif idx >= len(order):
                problem = f"index {idx} is out of range: CUDA sees {len(order)} GPU(s), 0..{len(order) - 1}"
            else:
                match = order[idx]
        elif entry.upper().startswith("GPU-"):
            hits = [u for u in order if u.lower().startswith(entry.lower())]
            if not hits:
                problem = f"{entry!r} matches no GPU's UUID"
            elif len(hits) > 1:
                problem = f"{entry!r} is a prefix of {len(hits)} GPUs' UUIDs"
            else:
                match = hits[0]
        elif entry.upper().startswith("MIG-"):
            match = entry
        else:
            problem = f"{entry!r} is neither an index nor a GPU-/MIG- UUID"
        if match is not None and match in visible:
            problem, match = f"{entry!r} names a GPU already listed", None
        if problem is not None:
            return VisibleDevices(tuple(visible), tuple(entries[i:]), problem)
        assert match is not None
        visible.append(match)
    return VisibleDevices(tuple(visible), (), None)


def _nvml_index(inv: Inventory) -> dict[str, int]:
    return {g.uuid: g.index for g in inv.gpus if g.uuid}


@rule(
    "cuda-visible-devices-empty",
    "cuda-visible-devices-invalid",
    "cuda-visible-devices",
    "cuda-device-order-differs",
)
def check_env(ctx: DoctorContext) -> list[Finding]:
    """Findings about CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER."""
    inv = ctx.inventory
    if not inv.gpus:
        return []
    out: list[Finding] = []
    nvml_idx = _nvml_index(inv)
    all_view = inv.cuda_all or inv.cuda
    order = [d.uuid for d in all_view.devices if d.uuid] if all_view else []
    if not order:
        order = [g.uuid for g in inv.gpus if g.uuid]
    cvd = inv.env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        parsed = parse_visible_devices(cvd, order)
        seen = len(inv.cuda.devices) if inv.cuda is not None else len(parsed.visible)
        evidence = (
            Evidence("CUDA_VISIBLE_DEVICES", cvd),
            Evidence("gpus_on_machine", len(inv.gpus)),
            Evidence("gpus_cuda_sees", seen),
        )
        if not cvd.strip():
            out.append(
                Finding(
                    "cuda-visible-devices-empty",
                    Status.FAIL,
                    "CUDA_VISIBLE_DEVICES is set but empty, so CUDA sees no GPU "
                    "('RuntimeError: No CUDA GPUs are available')",
                    evidence,
                    fix="unset CUDA_VISIBLE_DEVICES (or list the GPUs to use: "
                    "export CUDA_VISIBLE_DEVICES=0)",
                    group=GROUP,
                )
            )
        elif parsed.problem is not None:
            status = Status.FAIL if not parsed.visible else Status.WARN
            kept = ",".join(cvd.split(",")[: len(parsed.visible)])
            out.append(
                Finding(
                    "cuda-visible-devices-invalid",
                    status,
                    f"CUDA_VISIBLE_DEVICES: {parsed.problem}; CUDA ignores "
                    f"{', '.join(parsed.ignored)} and sees {len(parsed.visible)} GPU(s)",
                    evidence,
                    fix=f"export CUDA_VISIBLE_DEVICES={kept}"
                    if kept
                    else "unset CUDA_VISIBLE_DEVICES, or list indices from 'nvidia-smi -L'",
                    group=GROUP,
                )
            )
        else:
            mapping = ", ".join(
                f"cuda:{i}=GPU {nvml_idx.get(u, '?')}" for i, u in enumerate(parsed.visible)
            )
            out.append(
                Finding(
                    "cuda-visible-devices",
                    Status.INFO,
                    f"CUDA_VISIBLE_DEVICES={cvd}: CUDA sees {len(parsed.visible)} of "
                    f"{len(inv.gpus)} GPU(s) ({mapping})",
                    evidence,
                    group=GROUP,
                )
            )
    if len(order) > 1:
        nvml_order = [g.uuid for g in sorted(inv.gpus, key=lambda g: g.index)]
        if order != nvml_order and inv.env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            pairs = [
                f"cuda:{i} is nvidia-smi's GPU {nvml_idx.get(u, '?')}"
                for i, u in enumerate(order)
                if nvml_idx.get(u) != i
            ]
            out.append(
                Finding(
                    "cuda-device-order-differs",
                    Status.WARN,
                    "CUDA numbers the GPUs differently from nvidia-smi (CUDA_DEVICE_ORDER is "
                    f"{inv.env.get('CUDA_DEVICE_ORDER', 'FASTEST_FIRST, the default')}): "
                    + "; ".join(pairs),
                    (Evidence("CUDA_DEVICE_ORDER", inv.env.get("CUDA_DEVICE_ORDER")),),
                    fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID (before anything initialises CUDA) so "
                    "indices match nvidia-smi",
                    group=GROUP,
                )
            )
    return out
