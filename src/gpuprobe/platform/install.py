"""The pip lines gpuprobe prints to install an optional library: one per library, here, so that
every message says the same, and each fitting this machine.

PyTorch from PyPI is a CUDA build on Linux (``pip install torch`` pulls nvidia-cublas, cudnn and
the CUDA runtime, about 3 GB): right beside an NVIDIA GPU, wasted without one, where PyTorch's own
CPU wheel index is the line to give (pytorch.org's "Start Locally": ``--index-url
https://download.pytorch.org/whl/cpu``). Dask is the ``dask`` extra, which adds what
``scale lstsq --compare-dask`` needs too (scipy)."""

from __future__ import annotations

from pathlib import Path

from gpuprobe.platform.frameworks.torch_builds import TORCH_WHEEL_INDEX

__all__ = ["DASK_INSTALL", "TORCH_CPU_INDEX", "has_nvidia_gpu", "torch_install"]

TORCH_CPU_INDEX = f"{TORCH_WHEEL_INDEX}/cpu"
DASK_INSTALL = "pip install 'gpuprobe[dask]'"


def has_nvidia_gpu() -> bool:
    """True when an NVIDIA GPU is on the PCI bus or its driver is loaded (no NVML call)."""
    from gpuprobe.platform.hardware.pci import nvidia_devices

    return bool(nvidia_devices()) or Path("/proc/driver/nvidia").exists()


def torch_install(gpu: bool | None = None) -> str:
    """The line that installs PyTorch for this machine (``gpu``: whether it has an NVIDIA GPU;
    default: look): the default, CUDA, wheels beside a GPU, the CPU wheel without one."""
    if has_nvidia_gpu() if gpu is None else gpu:
        return "pip install 'gpuprobe[torch]'"
    return f"pip install torch --index-url {TORCH_CPU_INDEX}"
