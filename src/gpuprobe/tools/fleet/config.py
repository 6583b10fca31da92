"""A node's configuration as the fleet compares it: the facts that must be the same on every node
of one job (driver, CUDA, framework builds, GPU models and count, MIG, Python, the worker's
threads), each as a short string, so that two nodes are alike exactly when their dicts are equal
and a difference reads as ``driver 550.54.15 vs 560.35.03``."""

from __future__ import annotations

from collections import Counter

from gpuprobe.platform.frameworks.base import FrameworkInfo
from gpuprobe.platform.inventory import Inventory

__all__ = ["CONFIG_KEYS", "FRAMEWORKS", "node_config"]

FRAMEWORKS = ("torch", "cupy", "jax")  # the builds a GPU job depends on (numba, numpy: host)

# Every key node_config gives, in the order a difference is told; "gpus" and "mig" are the
# hardware, the rest software.
CONFIG_KEYS = (
    "gpus",
    "mig",
    "driver",
    "cuda driver",
    *FRAMEWORKS,
    "python",
    "numpy",
    "cpu",
    "cores",
    "worker threads",
    "gpuprobe",
)
HARDWARE_KEYS = ("gpus", "mig", "cpu", "cores")


def _framework(f: FrameworkInfo | None) -> str:
    if f is None or not f.installed:
        return "not installed"
    build = f.version or "?"
    if f.cpu_only_build:
        build += " (CPU-only build)"
    elif f.cuda_version:
        build += f" (CUDA {f.cuda_version})"
    if f.importable is False:
        build += ": does not import"
    return build


def _gpus(inv: Inventory) -> str:
    if not inv.gpus:
        return "none" if inv.driver.status != "ok" else "0"
    names = Counter(g.name or "unknown" for g in inv.gpus)
    return ", ".join(f"{n} × {name}" for name, n in sorted(names.items()))


def node_config(inv: Inventory, threads: tuple[int, ...]) -> dict[str, str]:
    """The comparable facts of one node (``threads``: its workers' task threads)."""
    mig = sorted({"on" if g.mig_mode else "off" for g in inv.gpus if g.mig_mode is not None})
    cores = inv.host.usable_cores or inv.host.logical_cores
    return {
        "gpus": _gpus(inv),
        "mig": "/".join(mig) or "n/a",
        "driver": inv.driver.driver_version or f"none ({inv.driver.status})",
        "cuda driver": inv.driver.cuda_driver_version or "n/a",
        **{name: _framework(inv.framework(name)) for name in FRAMEWORKS},
        "python": inv.host.python or "?",
        "numpy": inv.host.numpy or "not installed",
        "cpu": inv.host.cpu_model or "?",
        "cores": str(cores) if cores else "?",
        "worker threads": ", ".join(str(t) for t in sorted(threads)) or "?",
        "gpuprobe": inv.gpuprobe_version,
    }
