"""Driver checks: is there an NVIDIA GPU, does its driver answer, and does NVML match it."""

from __future__ import annotations

from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.model import DoctorContext

__all__ = ["check_cuda_init", "check_driver"]

GROUP = "driver"

_DRIVER_FIX = (
    "install the NVIDIA driver for this card (Ubuntu: 'sudo ubuntu-drivers install'; other "
    "systems: the distribution's nvidia-driver package or NVIDIA's installer), then reboot"
)


def _pci_evidence(inv: Inventory) -> tuple[Evidence, ...]:
    return tuple(
        Evidence(f"pci {d.address}", f"{d.device_id} driver={d.driver or 'none'}")
        for d in inv.pci_nvidia
    )


@rule(
    "gpu-lost",
    "driver-ok",
    "driver-library-mismatch",
    "driver-no-permission",
    "no-gpu",
    "gpu-without-driver",
    "driver-error",
)
def check_driver(ctx: DoctorContext) -> list[Finding]:
    """Findings about the driver, NVML and the cards on the PCI bus."""
    inv = ctx.inventory
    d = inv.driver
    cards = inv.pci_nvidia
    lost: list[Finding] = []
    if d.error and "GpuIsLost" in d.error:
        from gpuprobe.platform.hardware.nvml import lost_gpu_finding

        lost = [lost_gpu_finding("a GPU", d.error)]
        if d.status != "ok":
            return lost
    if d.status == "ok":
        return [
            *lost,
            Finding(
                "driver-ok",
                Status.OK,
                f"NVIDIA driver {d.driver_version} (supports CUDA up to {d.cuda_driver_version}) "
                f"sees {len(inv.gpus)} GPU(s)",
                (
                    Evidence("driver", d.driver_version),
                    Evidence("cuda_driver_version", d.cuda_driver_version),
                    Evidence("nvml", d.nvml_version),
                    Evidence("gpus", len(inv.gpus)),
                ),
                group=GROUP,
            ),
        ]
    if d.status == "version-mismatch":
        return [
            Finding(
                "driver-library-mismatch",
                Status.FAIL,
                "Failed to initialize NVML: Driver/library version mismatch (the kernel module "
                "and the user-space driver library differ, usually after a driver upgrade)",
                (Evidence("nvml_error", d.error), *_pci_evidence(inv)),
                fix="reboot so the new kernel module loads (or unload and reload the nvidia "
                "modules: 'sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia' then "
                "'sudo modprobe nvidia')",
                group=GROUP,
            )
        ]
    if d.status == "no-permission":
        return [
            Finding(
                "driver-no-permission",
                Status.FAIL,
                "NVML refused access: this user may not open the GPU device files",
                (Evidence("nvml_error", d.error),),
                fix="check /dev/nvidia* permissions (add the user to the 'video' group) or, in a "
                "container, run it with --gpus all / the NVIDIA container toolkit",
                group=GROUP,
            )
        ]
    if not cards and d.status in ("no-library", "not-loaded", "no-gpu"):
        return [
            Finding(
                "no-gpu",
                Status.INFO,
                "No NVIDIA GPU on this machine: nothing on the PCI bus and no driver. "
                "gpuprobe measures the CPU instead",
                (Evidence("nvml", d.status), Evidence("pci_nvidia_devices", 0)),
                fix="nothing to fix; for GPU work, run on a machine with an NVIDIA GPU",
                group=GROUP,
            )
        ]
    if cards and d.status in ("no-library", "not-loaded", "no-gpu", "error"):
        drivers = {c.driver for c in cards}
        if "nouveau" in drivers:
            why = "the open-source nouveau driver holds it, and CUDA cannot use nouveau"
            fix = "blacklist nouveau and " + _DRIVER_FIX
        elif "vfio-pci" in drivers:
            why = "it is bound to vfio-pci (passed through to a virtual machine)"
            fix = "unbind it from vfio-pci or use it inside the VM it is passed to"
        elif "nvidia" in drivers:
            why = f"the nvidia kernel module is bound, but NVML fails: {d.error or d.status}"
            fix = "reinstall the NVIDIA driver so the library matches the module, then reboot"
        else:
            why = f"no driver is bound to it ({d.error or d.status})"
            fix = _DRIVER_FIX
        return [
            Finding(
                "gpu-without-driver",
                Status.FAIL,
                f"{len(cards)} NVIDIA GPU(s) on the PCI bus, but {why}",
                (Evidence("nvml", d.status), *_pci_evidence(inv)),
                fix=fix,
                group=GROUP,
            )
        ]
    return [
        Finding(
            "driver-error",
            Status.FAIL,
            f"NVML could not be used: {d.error or d.status}",
            (Evidence("nvml", d.status),),
            fix="run 'nvidia-smi' to see the driver's own error; reinstall the driver if it fails",
            group=GROUP,
        )
    ]


@rule("cuda-stub-library", "cuda-init-failed")
def check_cuda_init(ctx: DoctorContext) -> list[Finding]:
    """A FAIL with its fix when the CUDA driver API failed to start for a reason gpuprobe knows
    (the stub libcuda, a busy GPU, a fabric manager not running, a cuda-compat mismatch)."""
    inv = ctx.inventory
    from gpuprobe.platform.hardware.cudadrv import CUDA_ERROR_FIXES, CUDA_ERRORS, error_code

    view = inv.cuda_all or inv.cuda
    if view is None or view.status != "error":
        return []
    code = error_code(view.error)
    if code not in CUDA_ERROR_FIXES:
        return []
    name = CUDA_ERRORS.get(code, f"CUDA error {code}")
    return [
        Finding(
            "cuda-stub-library" if code == 34 else "cuda-init-failed",
            Status.FAIL,
            f"cuInit failed with {name} ({code}): no CUDA program can use the GPU",
            (
                Evidence("cuInit", view.error),
                Evidence("libcuda_driver_version", view.driver_version),
            ),
            fix=CUDA_ERROR_FIXES[code],
            group=GROUP,
        )
    ]
