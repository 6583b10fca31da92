"""The published PyTorch CUDA builds, and the one to install for a driver and its cards.

Pure data and lookups: torch is never imported here. :data:`TORCH_BUILDS` lists, per release,
the CUDA version of each Linux wheel and the architectures its kernels are compiled for;
:func:`choose_build` picks the newest build the driver runs and the cards have kernels in, and
:func:`install_command` writes the pip command for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "TORCH_BUILDS",
    "TORCH_CUDA_VARIANTS",
    "TORCH_WHEEL_INDEX",
    "BuildChoice",
    "TorchBuild",
    "choose_build",
    "install_command",
]

# The CUDA builds of each PyTorch release (Linux x86_64 wheels on download.pytorch.org) and the
# architectures each build's kernels are compiled for (torch.cuda.get_arch_list() of that wheel).
# Sources: pytorch.org/get-started/previous-versions (builds per release); the release notes of
# 2.7 (cu128 adds sm_100/sm_120), 2.8 (cu128/cu129 drop Maxwell sm_50 and Pascal sm_60), 2.9
# (cu130: sm_75 and newer only: CUDA 13 dropped Maxwell, Pascal and Volta), 2.11 (cu128 drops
# Volta sm_70), 2.12 (builds cu126, cu130, cu132; no cu128); .ci/manywheel/build_cuda.sh
# (TORCH_CUDA_ARCH_LIST per CUDA version). 2.0 cu117 has no sm_90. A release newer than the table
# is assumed to ship the newest row's builds.
_ARCH_KEPLER_TO_HOPPER = ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86")
_ARCH_MAXWELL_TO_HOPPER = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
_ARCH_MAXWELL_TO_BLACKWELL = (*_ARCH_MAXWELL_TO_HOPPER, "sm_100", "sm_120", "compute_120")
_ARCH_VOLTA_TO_BLACKWELL = (
    "sm_70",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_90",
    "sm_100",
    "sm_120",
    "compute_120",
)
_ARCH_TURING_TO_BLACKWELL = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")
TORCH_BUILDS: dict[str, dict[str, tuple[str, ...]]] = {
    "2.0": {"11.7": _ARCH_KEPLER_TO_HOPPER, "11.8": (*_ARCH_KEPLER_TO_HOPPER, "sm_90")},
    "2.1": {"11.8": _ARCH_MAXWELL_TO_HOPPER, "12.1": _ARCH_MAXWELL_TO_HOPPER},
    "2.2": {"11.8": _ARCH_MAXWELL_TO_HOPPER, "12.1": _ARCH_MAXWELL_TO_HOPPER},
    "2.3": {"11.8": _ARCH_MAXWELL_TO_HOPPER, "12.1": _ARCH_MAXWELL_TO_HOPPER},
    "2.4": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.1": _ARCH_MAXWELL_TO_HOPPER,
        "12.4": _ARCH_MAXWELL_TO_HOPPER,
    },
    "2.5": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.1": _ARCH_MAXWELL_TO_HOPPER,
        "12.4": _ARCH_MAXWELL_TO_HOPPER,
    },
    "2.6": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.4": _ARCH_MAXWELL_TO_HOPPER,
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
    },
    "2.7": {
        "11.8": _ARCH_MAXWELL_TO_HOPPER,
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_MAXWELL_TO_BLACKWELL,
    },
    "2.8": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_VOLTA_TO_BLACKWELL,
        "12.9": _ARCH_VOLTA_TO_BLACKWELL,
    },
    "2.9": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_VOLTA_TO_BLACKWELL,
        "13.0": _ARCH_TURING_TO_BLACKWELL,
    },
    "2.10": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_VOLTA_TO_BLACKWELL,
        "13.0": _ARCH_TURING_TO_BLACKWELL,
    },
    "2.11": {
        "12.6": _ARCH_MAXWELL_TO_HOPPER,
        "12.8": _ARCH_TURING_TO_BLACKWELL,
        "13.0": _ARCH_TURING_TO_BLACKWELL,
    },
    **{
        v: {
            "12.6": _ARCH_MAXWELL_TO_HOPPER,
            "13.0": _ARCH_TURING_TO_BLACKWELL,
            "13.2": _ARCH_TURING_TO_BLACKWELL,
        }
        for v in ("2.12", "2.13", "2.14")
    },
}
# The CUDA versions of each release's builds, oldest first.
TORCH_CUDA_VARIANTS: dict[str, tuple[str, ...]] = {
    v: tuple(sorted(builds, key=lambda c: tuple(int(x) for x in c.split("."))))
    for v, builds in TORCH_BUILDS.items()
}
TORCH_WHEEL_INDEX = "https://download.pytorch.org/whl"


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


@dataclass(frozen=True)
class TorchBuild:
    """One published PyTorch wheel build: release, CUDA version, compiled architectures."""

    torch: str  # "2.9"
    cuda: str  # "12.8"
    archs: tuple[str, ...]

    @property
    def tag(self) -> str:
        """The wheel index's name for it: ``cu128``."""
        return "cu" + self.cuda.replace(".", "")


@dataclass(frozen=True)
class BuildChoice:
    """The build to install, or None with the reason none fits."""

    build: TorchBuild | None
    reason: str  # why this build, or why none


def _builds(torch_mm: str) -> list[TorchBuild]:
    row = TORCH_BUILDS.get(torch_mm)
    if row is None:
        row = TORCH_BUILDS[max(TORCH_BUILDS, key=_vtuple)]
    return sorted(
        (TorchBuild(torch_mm, cuda, archs) for cuda, archs in row.items()),
        key=lambda b: _vtuple(b.cuda),
    )


def _cc_text(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def choose_build(
    torch_version: str | None,
    driver_cuda: str | None,
    ccs: Sequence[tuple[int, int]] = (),
) -> BuildChoice:
    """The newest build of ``torch_version`` whose CUDA the driver runs (not newer than
    ``driver_cuda``) and whose kernels cover every compute capability in ``ccs``. When no build
    of that release does, the newest release that has one is chosen, or none with the reason:
    the cards need an older torch, or the driver needs an update."""
    from gpuprobe.platform.hardware.specs import arch_supports

    base = (torch_version or "").split("+")[0]
    mm = ".".join(base.split(".")[:2]) or max(TORCH_BUILDS, key=_vtuple)
    drv = _vtuple(driver_cuda) if driver_cuda else None

    def runs(b: TorchBuild, minor_compat: bool = False) -> bool:
        # minor_compat: a newer minor of the driver's CUDA major runs through CUDA's minor-version
        # compatibility (11.1+), short of PTX JIT; taken only when no build is at or below it
        if drv is None or _vtuple(b.cuda) <= drv:
            return True
        return minor_compat and _vtuple(b.cuda)[0] == drv[0]

    def covers(b: TorchBuild) -> bool:
        return all(arch_supports(b.archs, cc) for cc in ccs)

    own = _builds(mm)
    for compat in (False, True):
        fits = [b for b in own if runs(b, compat) and covers(b)]
        if fits:
            how = " (through CUDA minor-version compatibility)" if compat else ""
            return BuildChoice(
                fits[-1] if not compat else fits[0],
                f"newest {mm} build the driver and the card(s) run{how}",
            )
    # Another release: the newest one with a build that fits both.
    releases = sorted(TORCH_BUILDS, key=_vtuple, reverse=True)
    for other in releases:
        both = [b for b in _builds(other) if runs(b) and covers(b)]
        if both:
            cards = ", ".join(_cc_text(c) for c in ccs)
            why = (
                f"no torch {mm} build has kernels for {cards}"
                if not any(covers(b) for b in own)
                else f"every torch {mm} build for {cards} needs a driver newer than CUDA "
                f"{driver_cuda}"
            )
            return BuildChoice(both[-1], f"{why}; torch {other} has one")
    covering = [b for r in releases for b in _builds(r) if covers(b)]
    if not covering:
        cards = ", ".join(_cc_text(c) for c in ccs)
        return BuildChoice(
            None, f"no PyTorch 2.x build has kernels for {cards}: the card needs an older torch"
        )
    need = min(covering, key=lambda b: _vtuple(b.cuda))
    return BuildChoice(
        None,
        f"every build with kernels for these cards needs CUDA {need.cuda} or newer and the "
        f"driver supports {driver_cuda}: update the NVIDIA driver",
    )


def install_command(
    torch_version: str | None,
    driver_cuda: str | None,
    requirement: str | None = None,
    ccs: Sequence[tuple[int, int]] = (),
) -> str:
    """The pip command for the CUDA build :func:`choose_build` picks: the newest build of
    ``torch_version`` that runs on a driver supporting CUDA ``driver_cuda`` and has kernels for
    every card in ``ccs`` (another release when none of this one does). ``requirement``
    replaces the default ``torch==<version>`` pin (e.g. ``torch>=2.7``). When no build fits, the
    reason, not a command."""
    choice = choose_build(torch_version, driver_cuda, ccs)
    b = choice.build
    if b is None:
        return choice.reason
    base = (torch_version or "").split("+")[0]
    same = base and ".".join(base.split(".")[:2]) == b.torch
    pin = requirement or (f"torch=={base}" if same else f"torch=={b.torch}.*" if base else "torch")
    cmd = f"pip install --force-reinstall '{pin}' --index-url {TORCH_WHEEL_INDEX}/{b.tag}"
    return cmd if same or not base else f"{cmd}   ({choice.reason})"
