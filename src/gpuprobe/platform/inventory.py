"""The machine, read once: host, driver, GPUs, what CUDA shows a new process, and the frameworks.

:func:`inventory` is the public entry point; ``gpuprobe info`` prints its result. The same record,
written with ``--json``, is the snapshot format the tests replay and ``doctor --from`` judges.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpuprobe._version import __version__
from gpuprobe.core import render, safejson
from gpuprobe.core.errors import InputError
from gpuprobe.core.records import Record
from gpuprobe.core.units import gib
from gpuprobe.platform.frameworks.base import FrameworkInfo
from gpuprobe.platform.hardware import specs
from gpuprobe.platform.hardware.types import CudaView, Driver, Gpu, Host, PciDevice

__all__ = [
    "CUDA_ENV_VARS",
    "MAX_SNAPSHOT_BYTES",
    "SCHEMA_VERSION",
    "Inventory",
    "enrich_gpu",
    "inventory",
    "load",
]

SCHEMA_VERSION = 1
# Bytes a snapshot may have: an `info --json` snapshot is 6–7 KB (tests/data/*.json, one to eight
# GPUs); 16 MiB is far above any machine's and keeps /dev/zero or a 50 GB file out of memory.
MAX_SNAPSHOT_BYTES = 16 * 2**20
# Environment variables that change what CUDA applications see or load.
CUDA_ENV_VARS: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
    "PYTORCH_CUDA_ALLOC_CONF",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
)

FrameworkMode = Literal["auto", "static", "runtime"]


@dataclass(frozen=True)
class Inventory(Record):
    """Everything gpuprobe read about this machine, at one moment."""

    host: Host = field(default_factory=Host)
    driver: Driver = field(default_factory=Driver)
    gpus: tuple[Gpu, ...] = ()
    pci_nvidia: tuple[PciDevice, ...] = ()
    cuda: CudaView | None = None  # what a new CUDA process sees under `env`
    cuda_all: CudaView | None = None  # the same without CUDA_VISIBLE_DEVICES (CUDA's full order)
    frameworks: tuple[FrameworkInfo, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    created: str = ""
    origin: str = "live"  # "live", or where a recorded snapshot came from
    gpuprobe_version: str = __version__
    schema: int = SCHEMA_VERSION

    @property
    def has_gpu(self) -> bool:
        """True when NVML sees at least one GPU."""
        return bool(self.gpus)

    def framework(self, name: str) -> FrameworkInfo | None:
        """The probe result of framework ``name``, if it was probed."""
        return next((f for f in self.frameworks if f.name == name), None)

    def to_json(self) -> str:
        """The snapshot as indented JSON (the ``info --json`` format)."""
        return json.dumps(self.to_dict(), indent=2)

    def _repr_html_(self) -> str:
        return render.html(self)

    def __repr__(self) -> str:
        h = self.host
        mem = f", {gib(h.memory_total, 0)}" if h.memory_total else ""
        cores = f", {h.logical_cores} cores" if h.logical_cores else ""
        gpus = ", ".join(g.name or f"GPU {g.index}" for g in self.gpus) or "no GPU"
        fws = ", ".join(
            f"{f.name} {f.version or ''}".strip() for f in self.frameworks if f.installed
        )
        origin = "" if self.origin == "live" else f", from {self.origin}"
        return render.one_line(
            "Inventory",
            f"{h.hostname or 'host'}: {h.cpu_model or 'unknown CPU'}{cores}{mem}; "
            f"{gpus}; frameworks: {fws or 'none'}{origin}",
        )

    def __str__(self) -> str:
        return render.text(self)


def _read_small_file(p: Path) -> str:
    """The text of regular file ``p`` of at most :data:`MAX_SNAPSHOT_BYTES`; a FIFO, a device, a
    socket or a larger file is an :class:`InputError` at once (a FIFO is opened without waiting
    for a writer, and /dev/zero is never read)."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(
                f"{p}: not a regular file; give the file written by 'gpuprobe info --json > FILE'"
            )
        data = os.read(fd, MAX_SNAPSHOT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise InputError(
            f"{p}: more than {MAX_SNAPSHOT_BYTES // 2**20} MiB, not a snapshot (one is a few KB); "
            "give the file written by 'gpuprobe info --json > FILE'"
        )
    return data.decode("utf-8")


def load(path: str | Path) -> Inventory:
    """Read a snapshot written by ``gpuprobe info --json``."""
    p = Path(path)
    try:
        data = safejson.loads(_read_small_file(p))
    except FileNotFoundError:
        raise InputError(
            f"{p}: no such file; write one with 'gpuprobe info --json > FILE'"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read it ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{p}: not JSON ({exc.msg} at line {exc.lineno}); expected the output "
            "of 'gpuprobe info --json'"
        ) from None
    if not isinstance(data, dict) or "host" not in data or "driver" not in data:
        raise InputError(
            f"{p}: not a gpuprobe inventory snapshot (no 'host' and 'driver'); "
            "expected the output of 'gpuprobe info --json'"
        )
    try:
        return Inventory.from_dict(data)
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(f"{p}: damaged inventory snapshot ({exc})") from None


def enrich_gpu(gpu: Gpu, cuda: CudaView | None) -> Gpu:
    """Add what NVML lacks: SM count and bus width from the CUDA driver (matched by UUID), the
    architecture, FP32 cores and theoretical peaks from :mod:`gpuprobe.platform.hardware.specs`."""
    dev = None
    if cuda is not None:
        dev = next((d for d in cuda.devices if d.uuid and d.uuid == gpu.uuid), None)
    cc = gpu.compute_capability or (dev.compute_capability if dev else None)
    per_sm = specs.fp32_cores_per_sm(cc)
    sm_count = gpu.sm_count or (dev.sm_count if dev else None)
    if sm_count is None and gpu.fp32_cores and per_sm:
        sm_count = gpu.fp32_cores // per_sm
    if sm_count is None:
        spec = specs.spec_for(gpu.name)
        sm_count = spec.sm_count if spec is not None else None
    bus = gpu.memory_bus_width or (dev.memory_bus_width if dev else None)
    fp32_cores = sm_count * per_sm if sm_count and per_sm else gpu.fp32_cores
    return dataclasses.replace(
        gpu,
        compute_capability=cc,
        architecture=gpu.architecture or specs.architecture(cc),
        sm_count=sm_count,
        fp32_cores_per_sm=per_sm,
        fp32_cores=fp32_cores,
        memory_bus_width=bus,
        peaks=specs.peaks(
            gpu.name,
            cc,
            sm_count=sm_count,
            sm_clock_max_mhz=gpu.sm_clock_max_mhz,
            mem_clock_max_mhz=gpu.mem_clock_max_mhz,
            memory_bus_width=bus,
            memory_total=gpu.memory_total,
        ),
    )


def _cuda_views(env: dict[str, str]) -> tuple[CudaView, CudaView]:
    """What CUDA shows a new process under the user's environment, and the same with
    CUDA_VISIBLE_DEVICES removed: every card, in CUDA's order (to read SM counts of every card and
    to map CUDA indices to nvidia-smi's)."""
    from gpuprobe.platform.hardware.cudadrv import view_in_child

    user = view_in_child(os.environ)
    if "CUDA_VISIBLE_DEVICES" not in env:
        return user, user
    clean = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return user, view_in_child(clean)


def inventory(frameworks: FrameworkMode = "auto") -> Inventory:
    """Read the machine once.

    ``frameworks``: ``"static"`` reads framework builds from package files without importing them
    (fast); ``"runtime"`` imports each in a child process to list the GPUs it sees; ``"auto"``
    (the default) does the runtime probe only when there is an NVIDIA GPU to see.
    """
    from gpuprobe.platform.frameworks.probe import probe_frameworks
    from gpuprobe.platform.hardware.host import read_host
    from gpuprobe.platform.hardware.nvml import read_driver
    from gpuprobe.platform.hardware.pci import nvidia_devices

    env = {k: os.environ[k] for k in CUDA_ENV_VARS if k in os.environ}
    host = read_host()
    driver, gpus = read_driver()
    pci = nvidia_devices()
    cuda = cuda_all = None
    if gpus or pci:
        cuda, cuda_all = _cuda_views(env)
        gpus = [enrich_gpu(g, cuda_all) for g in gpus]
    runtime = frameworks == "runtime" or (frameworks == "auto" and bool(gpus or pci))
    return Inventory(
        host=host,
        driver=driver,
        gpus=tuple(gpus),
        pci_nvidia=pci,
        cuda=cuda,
        cuda_all=cuda_all,
        frameworks=probe_frameworks(runtime),
        env=env,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        origin="live",
    )
