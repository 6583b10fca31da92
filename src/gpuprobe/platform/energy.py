"""Energy over a window of time: ``with gpuprobe.energy() as e: ...; e.joules``.

Each NVIDIA GPU's from its total-energy counter (the difference over the window), the host's from
RAPL. Where a GPU has no counter (older than Volta, MIG, many vGPUs) its power is sampled by a
thread at :data:`POWER_HZ` and integrated over the window (trapezoids), and the figure is marked as
an estimate; so is a window shorter than the counter's update interval (NVML's counter moves every
20-100 ms, so a shorter window reads 0 or one whole update). What cannot be measured is said with
its reason, never read as 0 J: CodeCarbon's 0 kWh where there is no counter is the defect to avoid.

The meter costs two NVML calls per GPU and one file read per RAPL package at each end; the power
thread, only where it is needed, one call per GPU per sample (about 0.1 ms).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.errors import bad_argument
from gpuprobe.core.records import Record
from gpuprobe.platform.hardware.energy import (
    RAPL_ROOT,
    RaplZone,
    counter_delta,
    gpu_energy_mj,
    rapl_zones,
    read_zone_uj,
)

__all__ = [
    "COUNTER_MIN_S",
    "POWER_HZ",
    "EnergyMeter",
    "EnergyReading",
    "GpuEnergy",
    "HostEnergy",
]

POWER_HZ = 10.0  # power samples per second where a GPU has no energy counter
COUNTER_MIN_S = 0.1  # below this a counter's difference is one update at most: power × time
COUNTER = "counter"
ESTIMATE = "power × time"


@dataclass(frozen=True)
class GpuEnergy(Record):
    """One GPU's energy over the window."""

    index: int
    name: str | None = None
    joules: float | None = None
    method: str | None = None  # "counter", "power × time" (an estimate), or None: not measured
    note: str | None = None  # why an estimate, or why nothing

    @property
    def estimate(self) -> bool:
        """True where the figure is power × time, not the card's own counter."""
        return self.method == ESTIMATE


@dataclass(frozen=True)
class HostEnergy(Record):
    """The host's CPU packages' energy over the window (RAPL), or why it was not measured."""

    joules: float | None = None
    zones: tuple[str, ...] = ()  # package-0, package-1, ...
    note: str | None = None


@dataclass(frozen=True)
class EnergyReading(Record):
    """What the machine used over ``seconds``: each GPU's joules and the host's."""

    seconds: float
    gpus: tuple[GpuEnergy, ...] = ()
    host: HostEnergy = HostEnergy()
    gpu_note: str | None = None  # why no GPU was measured (no NVIDIA GPU, NVML failed)

    @property
    def gpu_joules(self) -> float | None:
        """Every measured GPU's joules together (``None`` when none was measured)."""
        got = [g.joules for g in self.gpus if g.joules is not None]
        return sum(got) if got else None

    @property
    def host_joules(self) -> float | None:
        """The host's CPU packages' joules (``None`` where RAPL cannot be read)."""
        return self.host.joules

    @property
    def joules(self) -> float | None:
        """All that was measured: the GPUs' and the host's (``None`` when nothing could be)."""
        got = [j for j in (self.gpu_joules, self.host_joules) if j is not None]
        return sum(got) if got else None

    @property
    def watts(self) -> float | None:
        """Mean power over the window of what was measured."""
        j = self.joules
        return j / self.seconds if j is not None and self.seconds > 0 else None

    def __repr__(self) -> str:
        return render.repr_(self)

    def __str__(self) -> str:
        return render.text(self)


class _Gpu:
    """One GPU as the meter follows it: the counter at the start, and power samples."""

    def __init__(self, index: int, name: str | None, start_mj: int | None) -> None:
        self.index, self.name, self.start_mj = index, name, start_mj
        self.power: list[tuple[float, float]] = []  # (monotonic s, W)


class EnergyMeter:
    """Measures the energy the machine uses while a block runs (see the module's doc).

    ``nvml`` opens an NVML session (:func:`~gpuprobe.platform.hardware.nvml.nvml_session`);
    ``rapl_root`` is the powercap folder. After the block :attr:`reading` holds the result and
    :attr:`joules`, :attr:`gpu_joules`, :attr:`host_joules` and :attr:`seconds` are its figures;
    :meth:`read` gives the figures so far while the block is still running."""

    def __init__(
        self,
        *,
        nvml: Callable[[], AbstractContextManager[Any]] | None = None,
        rapl_root: Path = RAPL_ROOT,
        power_hz: float = POWER_HZ,
    ) -> None:
        if not 0.5 <= power_hz <= 100:
            raise bad_argument("power_hz", power_hz, "give 0.5 to 100 samples per second")
        if nvml is None:
            from gpuprobe.platform.hardware.nvml import nvml_session

            nvml = nvml_session
        self._nvml_factory = nvml
        self._rapl_root = rapl_root
        self._period = 1.0 / power_hz
        self._stack = ExitStack()
        self._session: Any = None
        self._gpus: list[_Gpu] = []
        self._gpu_note: str | None = None
        self._zones: list[RaplZone] = []
        self._zone_start: list[int | None] = []
        self._host_note: str | None = None
        self._t0: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.reading: EnergyReading | None = None

    # -- the window ---------------------------------------------------------------------------
    def __enter__(self) -> EnergyMeter:
        if self._t0 is not None:
            raise RuntimeError("an EnergyMeter measures one window; make a new one")
        self._open_gpus()
        self._zones, self._host_note = rapl_zones(self._rapl_root)
        self._zone_start = [read_zone_uj(z) for z in self._zones]
        self._t0 = time.monotonic()
        for g in self._gpus:
            self._sample_power(g)
        if any(g.start_mj is None for g in self._gpus):
            self._thread = threading.Thread(
                target=self._sample, name="gpuprobe-energy", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self.reading = self.read()
        finally:
            self._stack.close()
            self._session = None

    def read(self) -> EnergyReading:
        """The energy from the start of the block to now (after it: to its end)."""
        if self.reading is not None:
            return self.reading
        if self._t0 is None:
            raise RuntimeError(
                "the meter has not started: use it as `with gpuprobe.energy() as e:`"
            )
        now = time.monotonic()
        gpus = tuple(self._gpu_energy(g, now) for g in self._gpus)
        return EnergyReading(
            seconds=now - self._t0, gpus=gpus, host=self._host_energy(), gpu_note=self._gpu_note
        )

    # -- figures ------------------------------------------------------------------------------
    @property
    def seconds(self) -> float | None:
        """The window's length in seconds (once it has ended)."""
        return None if self.reading is None else self.reading.seconds

    @property
    def joules(self) -> float | None:
        """What was measured over the window, GPUs and host (once it has ended)."""
        return None if self.reading is None else self.reading.joules

    @property
    def gpu_joules(self) -> float | None:
        """The GPUs' joules over the window (once it has ended)."""
        return None if self.reading is None else self.reading.gpu_joules

    @property
    def host_joules(self) -> float | None:
        """The host's joules over the window (once it has ended)."""
        return None if self.reading is None else self.reading.host_joules

    def __repr__(self) -> str:
        if self.reading is not None:
            return repr(self.reading)
        state = "running" if self._t0 is not None else "not started"
        return f"<EnergyMeter {state}>"

    # -- inside -------------------------------------------------------------------------------
    def _open_gpus(self) -> None:
        from gpuprobe.platform.hardware.nvml import NvmlUnavailable

        try:
            self._session = self._stack.enter_context(self._nvml_factory())
        except NvmlUnavailable as exc:
            self._gpu_note = f"no GPU measured: NVML is not available ({exc})"
            return
        s = self._session
        count = s.device_count()
        if not count:
            self._gpu_note = "no GPU measured: NVML sees no NVIDIA GPU"
        for i in range(count):
            name = s.query("nvmlDeviceGetName", s.handle(i))
            self._gpus.append(_Gpu(i, None if name is None else str(name), gpu_energy_mj(s, i)))

    def _sample_power(self, g: _Gpu) -> None:
        mw = self._session.query("nvmlDeviceGetPowerUsage", self._session.handle(g.index))
        if mw is not None:
            with self._lock:
                g.power.append((time.monotonic(), mw / 1000.0))

    def _sample(self) -> None:
        while not self._stop.wait(self._period):
            for g in self._gpus:
                if g.start_mj is None:
                    self._sample_power(g)

    def _gpu_energy(self, g: _Gpu, now: float) -> GpuEnergy:
        assert self._t0 is not None
        end_mj = gpu_energy_mj(self._session, g.index) if g.start_mj is not None else None
        self._sample_power(g)
        span = now - self._t0
        note = None
        if g.start_mj is not None and end_mj is not None:
            delta = counter_delta(g.start_mj, end_mj, None)
            if delta is not None and span >= COUNTER_MIN_S:
                return GpuEnergy(g.index, g.name, delta / 1000.0, COUNTER)
            note = (
                "the energy counter went backwards (the driver reloaded?): from power × time"
                if delta is None
                else f"a window of {1000 * span:.0f} ms is shorter than the energy counter's "
                "update interval (20-100 ms): from power × time"
            )
        else:
            note = "this GPU has no energy counter (older than Volta, MIG or a vGPU): from power × time"
        with self._lock:
            samples = list(g.power)
        joules = _integrate(samples, self._t0, now)
        if joules is None:
            return GpuEnergy(
                g.index, g.name, None, None, "neither an energy counter nor power readings"
            )
        return GpuEnergy(g.index, g.name, joules, ESTIMATE, note)

    def _host_energy(self) -> HostEnergy:
        if not self._zones:
            return HostEnergy(note=self._host_note)
        total = 0
        for zone, start in zip(self._zones, self._zone_start, strict=True):
            end = read_zone_uj(zone)
            delta = None if start is None or end is None else counter_delta(start, end, zone.max_uj)
            if delta is None:
                return HostEnergy(
                    zones=tuple(z.name for z in self._zones),
                    note=f"{zone.name}'s RAPL counter could not be read at both ends",
                )
            total += delta
        return HostEnergy(total / 1e6, tuple(z.name for z in self._zones))


def _integrate(samples: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Joules from (time, W) samples over [t0, t1]: trapezoids between samples, the first and
    last readings held to the window's edges."""
    pts = sorted((min(max(t, t0), t1), w) for t, w in samples)
    if not pts:
        return None
    joules = pts[0][1] * (pts[0][0] - t0) + pts[-1][1] * (t1 - pts[-1][0])
    for (ta, wa), (tb, wb) in itertools.pairwise(pts):
        joules += 0.5 * (wa + wb) * (tb - ta)
    return joules
