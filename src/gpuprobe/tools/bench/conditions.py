"""The card's clocks, temperature and power read through NVML while a benchmark runs, so that each
result keeps the conditions it was measured under (a throttled clock explains a low figure).

A background thread samples the card every :data:`SAMPLE_PERIOD_S`; :meth:`Watch.window` sums up
the samples taken between two host times. Without NVML or a GPU, a watch reads nothing and every
window is None.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from typing import Any

from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.tools.bench.model import Conditions

__all__ = ["SAMPLE_PERIOD_S", "Watch", "summarize"]

SAMPLE_PERIOD_S = 0.1  # NVML's clock and power readings refresh about this often
MAX_SAMPLES = 100_000  # about 3 hours at 0.1 s; older samples are dropped beyond this


def summarize(samples: list[GpuSample]) -> Conditions | None:
    """Min/max clocks, the hottest and the most power-hungry reading, every clock-event reason."""
    if not samples:
        return None

    def vals(name: str) -> list[Any]:
        return [getattr(s, name) for s in samples if getattr(s, name) is not None]

    sm, mem, temp, power = (
        vals("sm_clock_mhz"),
        vals("mem_clock_mhz"),
        vals("temperature_c"),
        vals("power_w"),
    )
    reasons = sorted({r for s in samples for r in (s.clock_event_reasons or ()) if r != "gpu_idle"})
    return Conditions(
        samples=len(samples),
        sm_clock_mhz_min=min(sm) if sm else None,
        sm_clock_mhz_max=max(sm) if sm else None,
        mem_clock_mhz_max=max(mem) if mem else None,
        temperature_c_max=max(temp) if temp else None,
        power_w_max=max(power) if power else None,
        clock_event_reasons=tuple(reasons),
    )


class Watch:
    """Sample the GPU with ``uuid`` in the background (a no-op when it cannot be read); close it
    when done."""

    def __init__(self, uuid: str | None) -> None:
        self._samples: list[tuple[float, GpuSample]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stack = ExitStack()
        self._thread: threading.Thread | None = None
        if uuid is None:
            return
        try:
            from gpuprobe.platform.hardware.nvml import nvml_session

            session = self._stack.enter_context(nvml_session())
        except Exception:  # no NVML here: nothing to watch
            return
        index = next(
            (
                i
                for i in range(session.device_count())
                if session.query("nvmlDeviceGetUUID", session.handle(i)) == uuid
            ),
            None,
        )
        if index is None:
            self._stack.close()
            return
        self._thread = threading.Thread(target=self._loop, args=(session, index), daemon=True)
        self._thread.start()

    @property
    def active(self) -> bool:
        """True when the card is being sampled."""
        return self._thread is not None

    def _loop(self, session: Any, index: int) -> None:
        while not self._stop.is_set():
            try:
                s = session.sample(index)
            except Exception:
                return
            with self._lock:
                self._samples.append((time.perf_counter(), s))
                del self._samples[:-MAX_SAMPLES]
            self._stop.wait(SAMPLE_PERIOD_S)

    def window(self, t0: float, t1: float) -> Conditions | None:
        """Conditions between host times ``t0`` and ``t1`` (``perf_counter``); a window shorter
        than the sample period gets the last sample taken before its end."""
        with self._lock:
            inside = [s for t, s in self._samples if t0 <= t <= t1]
            if not inside:
                inside = [s for t, s in self._samples if t <= t1][-1:]
        return summarize(inside)

    def close(self) -> None:
        """Stop sampling and shut NVML down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * SAMPLE_PERIOD_S + 1)
        self._stack.close()
