"""The devices gpuprobe runs work on (``cpu``, ``cuda``, ``cuda:N``), and the one line that says
why CUDA cannot be had here and what to install: the one place where the device of ``fit``,
``precision`` and ``bench`` (and of ``gpuprobe.fit``, ``precision_sweep``, ``bench``) is checked.

:func:`parse` refuses a name that is none of them; :func:`cuda_refusal` words the refusal of a
``cuda`` device from what is known about the machine (:class:`CudaHere`): the torch door
(:func:`gpuprobe.platform.frameworks.torch.check_device`) fills it from torch itself, the bench
planner from the inventory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprobe.core.errors import UsageError
from gpuprobe.platform.frameworks.torch_builds import install_command

__all__ = ["DEVICE_CHOICES", "DEVICE_RE", "CudaHere", "cuda_refusal", "parse"]

DEVICE_CHOICES = "cpu, cuda or cuda:N"
DEVICE_RE = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


def parse(device: str) -> tuple[str, int | None]:
    """``("cpu", None)``, ``("cuda", None)`` or ``("cuda", N)``; a :class:`UsageError` naming
    the choices for anything else (``mps``, ``cpu:0``, a typo)."""
    m = DEVICE_RE.match(device)
    if m is None or (m.group(1) == "cpu" and m.group(2) is not None):
        raise UsageError(f"device {device!r}: gpuprobe runs on {DEVICE_CHOICES}")
    return m.group(1), int(m.group(2)) if m.group(2) is not None else None


@dataclass(frozen=True)
class CudaHere:
    """What decides whether CUDA can be used here, and what to install when it cannot."""

    gpus: int  # NVIDIA GPUs on the machine (NVML, else the PCI bus: then no driver_cuda)
    driver_cuda: str | None = None  # the newest CUDA the driver supports, e.g. "12.4"
    ccs: tuple[tuple[int, int], ...] = ()  # the cards' compute capabilities
    torch_version: str | None = None  # None: torch is not installed
    torch_cuda: str | None = None  # the CUDA torch was built with; None: a CPU-only build
    torch_sees: int = 0  # the CUDA devices torch sees


def cuda_refusal(device: str, here: CudaHere) -> str | None:
    """The one line that refuses ``device`` (``cuda`` or ``cuda:N``) here, saying why and what
    to install or use instead; ``None`` when torch can run on it."""
    _, index = parse(device)
    v = here.torch_version
    if here.torch_sees and (index is None or index < here.torch_sees):
        return None
    if here.torch_sees:
        last = here.torch_sees - 1
        return f"{device}: torch sees {here.torch_sees} CUDA GPU(s); use cuda:0..cuda:{last}"
    install = install_command(v, here.driver_cuda, ccs=here.ccs)
    if not here.gpus:
        # nothing to install without a card: the line says so, in 80 columns (the pip command
        # of a CUDA build is the fix where a card is; see below)
        build = f" and torch {v} is CPU-only" if v and here.torch_cuda is None else ""
        return f"{device}: no NVIDIA GPU here{build}; use cpu"
    if here.driver_cuda is None:
        return (
            f"{device}: the NVIDIA GPU here has no working driver; install it ('gpuprobe doctor' "
            "says which)"
        )
    if v is None:
        return f"{device}: PyTorch is not installed; install a CUDA build: {install}"
    if here.torch_cuda is None:
        return f"{device}: torch {v} is a CPU-only build; install a CUDA build: {install}"
    return (
        f"{device}: torch {v} (CUDA {here.torch_cuda}) sees none of the {here.gpus} NVIDIA "
        "GPU(s) here; run 'gpuprobe doctor' for the cause and the fix"
    )
