"""What the machine is and what it can do: the inventory, doctor, bench. Part of :mod:`gpuprobe.api`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only; at run time each function imports what it calls
    from collections.abc import Callable, Iterable, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path

    from gpuprobe.platform.energy import EnergyMeter
    from gpuprobe.platform.inventory import FrameworkMode, Inventory
    from gpuprobe.tools.bench.model import BenchReport
    from gpuprobe.tools.bench.runner import Progress
    from gpuprobe.tools.doctor.model import DoctorReport
    from gpuprobe.tools.fleet.model import FleetBenchReport, FleetDoctorReport

__all__ = [
    "bench",
    "doctor",
    "energy",
    "fleet_bench",
    "fleet_doctor",
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


def energy(
    *,
    nvml: Callable[[], AbstractContextManager[Any]] | None = None,
    rapl_root: str | Path = "/sys/class/powercap",
    power_hz: float = 10.0,
) -> EnergyMeter:
    """``with gpuprobe.energy() as e: ...`` measures the energy the machine uses while the block
    runs: ``e.joules`` (GPUs and host), ``e.gpu_joules``, ``e.host_joules``, ``e.seconds``, and
    ``e.reading`` with each GPU's figure, how it was measured (the card's energy counter, or
    power × time where there is none, marked as an estimate) and why a figure is missing (RAPL
    readable by root only, no GPU). ``e.read()`` gives the figures so far inside the block."""
    from pathlib import Path

    import gpuprobe.ui.energy  # noqa: F401  (registers how an EnergyReading shows itself)
    from gpuprobe.platform.energy import EnergyMeter

    return EnergyMeter(nvml=nvml, rapl_root=Path(rapl_root), power_hz=power_hz)


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


def fleet_doctor(
    cluster: Any,
    *,
    quick: bool = True,
    run_kernels: bool | None = None,
    connect_timeout: float = 10.0,
    node_timeout: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> FleetDoctorReport:
    """Doctor on every worker of a Dask cluster (``cluster``: a ``distributed.Client``, a
    scheduler address such as ``"tcp://10.0.0.1:8786"``, or ``{"scheduler_file": path}``), the
    workers of one host that report alike in one row, the nodes grouped by configuration, and
    every node that differs from the majority or fails a check named with the difference and the
    fix. ``quick`` uses smaller kernel problems; the environment is read on every worker at
    once, the kernel checks run on one worker per host and set of GPUs, a host's one after the
    other, so that none measures another; ``run_kernels=False`` judges what NVML and the
    frameworks say without running kernels. A scheduler that does not answer within
    ``connect_timeout`` s is an :class:`~gpuprobe.core.errors.InputError`; a worker that gives no
    answer within ``node_timeout`` s is reported lost, the others kept."""
    from gpuprobe.tools.fleet.engine import fleet_doctor as _fleet_doctor

    return _fleet_doctor(
        cluster,
        quick=quick,
        run_kernels=run_kernels,
        connect_timeout=connect_timeout,
        node_timeout=node_timeout,
        progress=progress,
    )


def fleet_bench(
    cluster: Any,
    workloads: Iterable[str] | None = None,
    backends: Iterable[str] | None = None,
    *,
    quick: bool = True,
    one_at_a_time: bool = False,
    connect_timeout: float = 10.0,
    node_timeout: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> FleetBenchReport:
    """The same short bench on every worker of a Dask cluster (``cluster`` as for
    :func:`fleet_doctor`): ``workloads`` (default matmul and transfer) on every framework there
    (or ``backends``), one size per workload and kind of device, nothing saved to the nodes'
    histories; hosts at once, the workers of one host one after the other (they share its CPU,
    memory and PCIe links, often its GPUs), or every worker one after the other with
    ``one_at_a_time`` (hosts that share a network or a PCIe switch). Each figure is compared
    with those of the same model of CPU or GPU, and an outlier (more than 3 MADs and 10 % from
    its peers' median) is named with its figures. A worker with no answer within ``node_timeout`` s is reported lost,
    the others kept."""
    from gpuprobe.tools.fleet.bench_engine import fleet_bench as _fleet_bench

    return _fleet_bench(
        cluster,
        workloads,
        backends,
        quick=quick,
        one_at_a_time=one_at_a_time,
        connect_timeout=connect_timeout,
        node_timeout=node_timeout,
        progress=progress,
    )


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
