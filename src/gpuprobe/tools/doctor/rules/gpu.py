"""Per-GPU health read from NVML: other processes, persistence mode, ECC errors, retired pages and
remapped rows, MIG without instances (DCGM diag level 1's deployment checks, read directly)."""

from __future__ import annotations

import os
import platform

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.core.units import MIB, gib_value
from gpuprobe.platform.hardware.nvml import lost_gpu_finding
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.model import DoctorContext

__all__ = ["check_gpus"]

GROUP = "gpu"

OTHER_PROCESS_MEMORY_WARN_FRACTION = 0.10  # of the card's memory held by other processes;
# below it (a desktop's Xorg, a monitor) it is only information. gpuprobe's own judgement.
RETIRED_PAGES_WARN = 1  # any retired page is worth knowing; NVIDIA's RMA threshold is 60
# (NVIDIA "Dynamic Page Retirement" doc, DA-08347) and DCGM warns on pending retirement.


def _unreadable(g: Gpu) -> list[Finding]:
    if g.lost:
        return [lost_gpu_finding(g.label, g.nvml_error, g.index)]
    return [
        Finding(
            "gpu-unreadable",
            Status.WARN,
            f"{g.label}: NVML could not open this GPU ({g.nvml_error}); its values show as n/a",
            (Evidence("nvml_error", g.nvml_error),),
            fix="run 'nvidia-smi -q -i INDEX' to see the driver's own error (NoPermission: check "
            "/dev/nvidia* access; Timeout or Unknown: check 'sudo dmesg | grep -i xid')".replace(
                "INDEX", str(g.index)
            ),
            group=GROUP,
            subject=g.label,
        )
    ]


def _processes(g: Gpu) -> list[Finding]:
    me = os.getpid()
    others = [p for p in g.processes if p.pid != me]
    if not others:
        return []
    used = sum(p.used_memory or 0 for p in others)
    frac = used / g.memory_total if g.memory_total else 0.0
    who = ", ".join(
        f"{p.name or '?'} (pid {p.pid}, {(p.used_memory or 0) / MIB:.0f} MiB)" for p in others
    )
    status = Status.WARN if frac >= OTHER_PROCESS_MEMORY_WARN_FRACTION else Status.INFO
    return [
        Finding(
            "gpu-other-processes",
            status,
            f"{g.label}: {len(others)} other process(es) hold {used / MIB:.0f} MiB "
            f"({frac:.0%} of its memory): {who}",
            (
                Evidence("processes", len(others)),
                Evidence("memory_held", gib_value(used), "GiB"),
                Evidence("fraction", round(frac * 100, 1), "%"),
            ),
            fix="wait for them or stop them ('nvidia-smi' lists them; 'kill PID' for your own); "
            "they take memory and time-slice compute with your job",
            group=GROUP,
            subject=g.label,
        )
    ]


def _ecc(g: Gpu) -> list[Finding]:
    out: list[Finding] = []
    if g.ecc_uncorrected_volatile:
        out.append(
            Finding(
                "gpu-ecc-uncorrected",
                Status.FAIL,
                f"{g.label}: {g.ecc_uncorrected_volatile} uncorrectable ECC error(s) since the last "
                "driver load: results on this card may be wrong",
                (Evidence("ecc_uncorrected_volatile", g.ecc_uncorrected_volatile),),
                fix="drain jobs from this GPU and reset it ('sudo nvidia-smi -r -i "
                f"{g.index}') or reboot; if errors recur, ask for a replacement",
                group=GROUP,
                subject=g.label,
            )
        )
    if g.remapped_rows_failure:
        out.append(
            Finding(
                "gpu-row-remap-failed",
                Status.FAIL,
                f"{g.label}: a row remapping failed; the card has run out of spare memory rows",
                (Evidence("remapped_rows_uncorrectable", g.remapped_rows_uncorrectable),),
                fix="take the GPU out of service and ask for a replacement (RMA)",
                group=GROUP,
                subject=g.label,
            )
        )
    if g.remapped_rows_pending or g.retired_pages_pending:
        out.append(
            Finding(
                "gpu-memory-repair-pending",
                Status.WARN,
                f"{g.label}: memory rows or pages are waiting to be remapped/retired; "
                "it takes effect at the next GPU reset",
                (
                    Evidence("remapped_rows_pending", g.remapped_rows_pending),
                    Evidence("retired_pages_pending", g.retired_pages_pending),
                ),
                fix=f"reset the GPU when idle ('sudo nvidia-smi -r -i {g.index}') or reboot",
                group=GROUP,
                subject=g.label,
            )
        )
    if g.retired_pages is not None and g.retired_pages >= RETIRED_PAGES_WARN:
        out.append(
            Finding(
                "gpu-retired-pages",
                Status.WARN,
                f"{g.label}: {g.retired_pages} memory page(s) retired after ECC errors",
                (Evidence("retired_pages", g.retired_pages),),
                fix="watch the count; at 60 retired pages NVIDIA considers the card for replacement",
                group=GROUP,
                subject=g.label,
            )
        )
    return out


def _mig_fix(g: Gpu) -> str:
    from gpuprobe.platform.hardware.specs import mig_smallest_profile

    profile = mig_smallest_profile(g.name, g.memory_total)
    off = f"or turn MIG off ('sudo nvidia-smi -i {g.index} -mig 0' and reset the GPU)"
    if profile is None:
        return (
            f"list this card's profiles ('nvidia-smi mig -i {g.index} -lgip') and create "
            f"instances ('sudo nvidia-smi mig -i {g.index} -cgi PROFILE -C'), {off}"
        )
    return (
        f"create instances, e.g. the smallest ('sudo nvidia-smi mig -i {g.index} -cgi {profile} "
        f"-C'; 'nvidia-smi mig -i {g.index} -lgip' lists the others), {off}"
    )


def _mig(g: Gpu, inv: Inventory) -> list[Finding]:
    if not g.mig_mode:
        return []
    if not g.mig_instances:
        return [
            Finding(
                "gpu-mig-no-instances",
                Status.FAIL,
                f"{g.label}: MIG mode is on but no MIG instance exists, so CUDA sees no device on it",
                (Evidence("mig_mode", True), Evidence("mig_instances", 0)),
                fix=_mig_fix(g),
                group=GROUP,
                subject=g.label,
            )
        ]
    uuids = ", ".join(m.uuid or "?" for m in g.mig_instances)
    return [
        Finding(
            "gpu-mig",
            Status.INFO,
            f"{g.label}: MIG on with {len(g.mig_instances)} instance(s); select one with "
            "CUDA_VISIBLE_DEVICES=MIG-<uuid>",
            (Evidence("mig_instances", len(g.mig_instances)), Evidence("uuids", uuids)),
            group=GROUP,
            subject=g.label,
        )
    ]


@rule(
    "gpu-unreadable",
    "gpu-other-processes",
    "gpu-ecc-uncorrected",
    "gpu-row-remap-failed",
    "gpu-memory-repair-pending",
    "gpu-retired-pages",
    "gpu-mig-no-instances",
    "gpu-mig",
    "gpu-persistence-off",
    "gpu-peaks-unknown",
    "gpu-ok",
)
def check_gpus(ctx: DoctorContext) -> list[Finding]:
    """Health findings for every GPU NVML sees."""
    inv = ctx.inventory
    system = platform.system()
    out: list[Finding] = []
    for g in inv.gpus:
        if g.nvml_error is not None:
            out.extend(_unreadable(g))
            continue
        found = [*_processes(g), *_ecc(g), *_mig(g, inv)]
        if g.persistence_mode is False and system == "Linux":
            found.append(
                Finding(
                    "gpu-persistence-off",
                    Status.WARN,
                    f"{g.label}: persistence mode is off, so every CUDA start re-initialises the "
                    "driver (about 1-2 s) and an idle card may drop its state",
                    (Evidence("persistence_mode", False),),
                    fix="sudo systemctl enable --now nvidia-persistenced   (or 'sudo nvidia-smi -pm 1')",
                    group=GROUP,
                    subject=g.label,
                )
            )
        if g.peaks is None:
            found.append(
                Finding(
                    "gpu-peaks-unknown",
                    Status.INFO,
                    f"{g.label}: no peak table for this card; its peaks show as n/a",
                    (
                        Evidence("name", g.name),
                        Evidence("compute_capability", g.compute_capability),
                    ),
                    group=GROUP,
                    subject=g.label,
                )
            )
        if not any(f.status in (Status.FAIL, Status.WARN) for f in found):
            found.append(
                Finding(
                    "gpu-ok",
                    Status.OK,
                    f"{g.label}: {gib_value(g.memory_total)} GiB, {g.temperature_c} °C, "
                    f"{g.power_draw_w} W of {g.power_limit_w} W, no ECC or memory-repair problems",
                    (
                        Evidence("memory_total", gib_value(g.memory_total), "GiB"),
                        Evidence("temperature", g.temperature_c, "°C"),
                        Evidence("ecc_mode", g.ecc_mode),
                    ),
                    group=GROUP,
                    subject=g.label,
                )
            )
        out.extend(found)
    return out
