"""What the machine is and what it can do: the inventory, doctor, bench. Part of :mod:`gpuprobe.api`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    from gpuprobe.platform.inventory import FrameworkMode, Inventory
    from gpuprobe.tools.bench.model import BenchReport
    from gpuprobe.tools.bench.runner import Progress
    from gpuprobe.tools.doctor.model import DoctorReport

__all__ = [
    "bench",
    "doctor",
    "inventory",
    "load_inventory",
]


def inventory(frameworks: FrameworkMode = "auto") -> Inventory:
    """Read this machine once: host (CPU, memory, BLAS), driver, every GPU through NVML, and the
    array frameworks (``frameworks``: ``"static"`` reads versions without importing them,
    ``"runtime"`` imports each in a subprocess to ask it what it sees, ``"auto"`` picks)."""
    import gpuprobe.ui.inventory  # noqa: F401  (registers how an Inventory shows itself)
    from gpuprobe.platform.inventory import inventory as _inventory

    return _inventory(frameworks)


def doctor(
    quick: bool = False,
    *,
    inventory: Inventory | None = None,
    run_kernels: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Check this machine (or a recorded ``inventory``): driver, environment, frameworks, each
    GPU and real kernels; every finding with its evidence and fix. ``quick`` uses smaller
    problems. Kernels run on a live machine; a recorded inventory is judged without them unless
    ``run_kernels`` says otherwise. ``progress`` is called with what runs now."""
    from gpuprobe.tools.doctor.engine import doctor as _doctor

    return _doctor(quick, inventory=inventory, run_kernels=run_kernels, progress=progress)


def bench(
    workloads: Iterable[str] | None = None,
    backends: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    quick: bool = False,
    *,
    budget_s: float | None = None,
    rep_limit_s: float | None = None,
    sizes: dict[str, Sequence[int]] | None = None,
    isolate: bool = True,
    save: bool = True,
    compare: bool = False,
    inventory: Inventory | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Measure what this machine can do: each workload (``gpuprobe bench --list``) on every
    framework and device asked for, each framework in its own process, timed by the one timer
    (CUDA events on GPUs), as a fraction of the card's peak. ``save`` appends to the history;
    ``compare`` judges against the last saved run."""
    from gpuprobe.tools.bench.runner import run_bench

    return run_bench(
        workloads,
        backends,
        devices,
        quick,
        budget_s=budget_s,
        rep_limit_s=rep_limit_s,
        sizes=sizes,
        isolate=isolate,
        save=save,
        compare=compare,
        inventory=inventory,
        progress=progress,
    )


def load_inventory(path: str | Path) -> Inventory:
    """Read an inventory snapshot written by ``gpuprobe info --json`` (on this machine or
    another); a missing or unreadable file raises :class:`~gpuprobe.core.errors.InputError`."""
    import gpuprobe.ui.inventory  # noqa: F401  (registers how an Inventory shows itself)
    from gpuprobe.platform.inventory import load

    return load(path)
