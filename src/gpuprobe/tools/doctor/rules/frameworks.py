"""Framework checks: does each installed framework import, was it built for this driver and these
cards, and does it see them."""

from __future__ import annotations

import re

from gpuprobe.core.catalogue import placeholders
from gpuprobe.core.findings import Evidence, Finding, Status
from gpuprobe.core.rules import rule
from gpuprobe.platform.frameworks import FRAMEWORKS
from gpuprobe.platform.frameworks.base import FrameworkInfo
from gpuprobe.platform.hardware.specs import arch_supports
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.platform.install import torch_install
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.doctor.model import DoctorContext

__all__ = ["arch_supports", "check_frameworks", "cuda_compat"]

GROUP = "frameworks"
# Frameworks whose kernels NVRTC compiles at run time straight to cubin, so a CUDA runtime newer
# (minor) than the driver needs no PTX JIT: CuPy (its default, CUPY_COMPILE_WITH_PTX unset; the
# CUDA C++ Best Practices Guide, "Dynamic code generation"). Seen on an H200 (2026-11-25): CuPy
# 14.2 on CUDA 13.2 ran every bench workload and lstsq on a 13.0 driver.
CUBIN_AT_RUN_TIME = frozenset({"cupy"})


def _v(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    m = re.match(r"(\d+)\.(\d+|x)", text)
    if not m:
        return None
    return int(m.group(1)), 0 if m.group(2) == "x" else int(m.group(2))


def cuda_compat(runtime: str | None, driver: str | None) -> Status | None:
    """Can a CUDA ``runtime`` run on a driver that supports CUDA ``driver``?

    FAIL when the runtime's major is newer ("CUDA driver version is insufficient for CUDA runtime
    version"); WARN when only the minor is newer (CUDA 11.1+ minor-version compatibility runs it,
    but PTX JIT and newer APIs fail: CUDA_ERROR_UNSUPPORTED_PTX_VERSION); OK otherwise; None when
    either is unknown.
    """
    rt, drv = _v(runtime), _v(driver)
    if rt is None or drv is None:
        return None
    if rt[0] > drv[0]:
        return Status.FAIL
    if rt[0] == drv[0] and rt[1] > drv[1]:
        return Status.WARN if rt >= (11, 1) else Status.FAIL
    return Status.OK


def _install_fix(f: FrameworkInfo, inv: Inventory) -> str:
    drv = inv.driver.cuda_driver_version
    if f.name == "torch":
        from gpuprobe.platform.frameworks.torch_builds import install_command

        ccs = [g.cc for g in inv.gpus if g.cc is not None]
        return install_command(f.version, drv, ccs=ccs)
    if f.name == "cupy":
        major = (_v(drv) or (12, 0))[0]
        return f"pip uninstall -y {f.distribution or 'cupy'} && pip install cupy-cuda{major}x"
    if f.name == "jax":
        major = (_v(drv) or (12, 0))[0]
        return f"pip install -U 'jax[cuda{major}]'"
    return f"reinstall {f.name} with a CUDA build for CUDA {drv}"


def _check_one(f: FrameworkInfo, inv: Inventory) -> list[Finding]:
    name = f.name
    subject = f"{name} {f.version}"
    ev_build = (Evidence("version", f.version), Evidence("built_with_cuda", f.cuda_version))
    if f.importable is False:
        return [
            Finding(
                f"{name}-import-failed",
                Status.FAIL,
                f"{name} is installed but fails to import",
                (Evidence("error", f.error),),
                fix=f"pip install --force-reinstall {f.distribution or name}"
                " (or fix the error above)",
                group=GROUP,
                subject=subject,
            )
        ]
    has_gpu = inv.has_gpu
    if f.cpu_only_build:
        if has_gpu:
            msg = (
                "Torch not compiled with CUDA enabled: this is a CPU-only build on a machine with "
                f"{len(inv.gpus)} NVIDIA GPU(s)"
                if name == "torch"
                else f"{name} is a CPU-only build on a machine with {len(inv.gpus)} NVIDIA GPU(s)"
            )
            return [
                Finding(
                    f"{name}-cpu-only-build",
                    Status.FAIL,
                    msg,
                    (*ev_build, Evidence("driver_cuda", inv.driver.cuda_driver_version)),
                    fix=_install_fix(f, inv),
                    group=GROUP,
                    subject=subject,
                )
            ]
        return [
            Finding(
                f"{name}-cpu-only-build",
                Status.INFO,
                f"{name} {f.version} is a CPU-only build (right for this machine: no GPU)",
                ev_build,
                group=GROUP,
                subject=subject,
            )
        ]
    if not has_gpu:
        return [
            Finding(
                f"{name}-ok",
                Status.INFO,
                f"{name} {f.version} (CUDA {f.cuda_version}) "
                "is installed; there is no GPU for it here",
                ev_build,
                group=GROUP,
                subject=subject,
            )
        ]
    out: list[Finding] = []
    compat = cuda_compat(f.cuda_version, inv.driver.cuda_driver_version)
    ev = (
        *ev_build,
        Evidence("driver_supports_cuda", inv.driver.cuda_driver_version),
        Evidence("driver", inv.driver.driver_version),
    )
    if compat is Status.FAIL:
        out.append(
            Finding(
                f"{name}-driver-too-old",
                Status.FAIL,
                f"CUDA driver version is insufficient for CUDA runtime version: {name} was built "
                f"with CUDA {f.cuda_version}, the driver supports up to {inv.driver.cuda_driver_version}",
                ev,
                fix=f"{_install_fix(f, inv)}   (or upgrade the NVIDIA driver to one that supports "
                f"CUDA {f.cuda_version})",
                group=GROUP,
                subject=subject,
            )
        )
    elif compat is Status.WARN and name in CUBIN_AT_RUN_TIME:
        out.append(
            Finding(
                f"{name}-driver-older-minor",
                Status.INFO,
                f"{name} uses CUDA {f.cuda_version}, newer than the driver's "
                f"{inv.driver.cuda_driver_version}: it runs through minor-version compatibility, "
                "and its kernels, compiled at run time by NVRTC to machine code (cubin), need no "
                "PTX JIT",
                ev,
                group=GROUP,
                subject=subject,
            )
        )
    elif compat is Status.WARN:
        out.append(
            Finding(
                f"{name}-driver-older-minor",
                Status.WARN,
                f"{name} uses CUDA {f.cuda_version}, newer than the driver's "
                f"{inv.driver.cuda_driver_version}: it runs through minor-version compatibility, but "
                "PTX JIT and newer CUDA features fail (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)",
                ev,
                fix=f"upgrade the NVIDIA driver, or {_install_fix(f, inv)}",
                group=GROUP,
                subject=subject,
            )
        )
    if f.arch_list:
        for g in inv.gpus:
            if g.cc is not None and not arch_supports(f.arch_list, g.cc):
                out.append(
                    Finding(
                        f"{name}-arch-missing",
                        Status.FAIL,
                        f"{g.label} has compute capability {g.compute_capability} (sm_"
                        f"{g.cc[0]}{g.cc[1]}), which this {name} build has no kernels for: every "
                        "kernel fails with 'no kernel image is available for execution on the device'",
                        (
                            Evidence("compute_capability", g.compute_capability),
                            Evidence("compiled_for", " ".join(f.arch_list)),
                            *ev_build,
                        ),
                        fix=_arch_fix(f, g, inv),
                        group=GROUP,
                        subject=subject,
                    )
                )
    if f.probe == "runtime" and not f.devices and not any(x.status is Status.FAIL for x in out):
        out.append(
            Finding(
                f"{name}-sees-no-gpu",
                Status.FAIL,
                f"{name} sees no GPU although the driver sees {len(inv.gpus)}",
                (Evidence("reason", f.reason), *ev_build),
                fix="see the reason; check "
                "CUDA_VISIBLE_DEVICES and that the driver supports this build's CUDA",
                group=GROUP,
                subject=subject,
            )
        )
    if not any(x.status in (Status.FAIL, Status.WARN) for x in out):
        seen = f"sees {len(f.devices)} GPU(s)" if f.probe == "runtime" else "(not imported)"
        out.append(
            Finding(
                f"{name}-ok",
                Status.OK,
                f"{name} {f.version} built with CUDA {f.cuda_version} {seen}",
                (*ev_build, Evidence("gpus_seen", len(f.devices))),
                group=GROUP,
                subject=subject,
            )
        )
    return out


def _arch_fix(f: FrameworkInfo, g: Gpu, inv: Inventory) -> str:
    if f.name == "torch" and g.cc is not None:
        # The newest build with kernels for this card that the driver runs: the same release's
        # other build (Pascal/Volta on a cu128/cu130 wheel: cu126), or a newer release (a
        # Blackwell B200 sm_100 or RTX 50 sm_120 needs torch >= 2.7 with CUDA >= 12.8).
        from gpuprobe.platform.frameworks.torch_builds import install_command

        ccs = [x.cc for x in inv.gpus if x.cc is not None] or [g.cc]
        return install_command(f.version, inv.driver.cuda_driver_version, ccs=ccs)
    return (
        f"{_install_fix(f, inv)}   (a build whose arch list includes sm_{g.cc[0]}{g.cc[1]})"
        if g.cc
        else _install_fix(f, inv)
    )


@rule(
    "no-gpu-framework",
    *(
        f"{name}-{s}"
        for name in FRAMEWORKS
        for s in (
            "import-failed",
            "cpu-only-build",
            "ok",
            "driver-too-old",
            "driver-older-minor",
            "arch-missing",
            "sees-no-gpu",
        )
    ),
)
def check_frameworks(ctx: DoctorContext) -> list[Finding]:
    """Findings for every installed framework (none installed is itself a finding)."""
    inv = ctx.inventory
    # the frameworks gpuprobe knows: a snapshot naming another (a damaged file, a later
    # gpuprobe's) has nothing here to judge it by, and no finding id to give it
    known = set(placeholders()["framework"])
    installed = [f for f in inv.frameworks if f.installed and f.name in known]
    if not installed:
        return [
            Finding(
                "no-gpu-framework",
                Status.INFO if not inv.has_gpu else Status.WARN,
                "No GPU array framework (torch, cupy, jax, numba) is installed",
                fix=torch_install(inv.has_gpu or bool(inv.pci_nvidia)),
                group=GROUP,
            )
        ]
    out: list[Finding] = []
    for f in installed:
        out.extend(_check_one(f, inv))
    return out
