"""``gpuprobe run --serve [HOST:]PORT``: the run's own ``/metrics`` while it runs.

Everything ``gpuprobe export`` serves (the same :class:`GpuprobeCollector` over the run's own
sampler: no second NVML session, no second sampling thread) and the flight recorder's steps,
each process's series labelled ``pid`` and ``command`` (its script):

- ``gpuprobe_steps_total``: the steps it recorded;
- ``gpuprobe_step_seconds``: a histogram of its step times (:data:`STEP_BUCKETS`), so that
  ``rate(gpuprobe_step_seconds_sum[5m]) / rate(gpuprobe_step_seconds_count[5m])`` is the mean
  step and ``histogram_quantile`` its p95;
- ``gpuprobe_step_last_seconds``: its last step;
- ``gpuprobe_step_joules``: the energy a step cost over the last :data:`JOULES_WINDOW_S` of
  steps, of the GPUs the process is on (their energy counters interpolated at the step ends;
  power × time where a card has none, ``method`` says which); absent for a process on no GPU.

The hook writes the steps to the run's status folder with each status (every few seconds while
the steps go on), so the step series trail the GPU series by up to that much.
"""

from __future__ import annotations

import bisect
import contextlib
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprobe.tools.monitor.exporter import (
    GpuprobeCollector,
    MetricsServer,
    listen_error,
    metric_family,
    registry_of,
)
from gpuprobe.tools.monitor.hosts import check_listen_host
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.run import FORWARDED_SIGNALS
from gpuprobe.tools.monitor.sampler import Sampler
from gpuprobe.tools.monitor.steps import cumulative_joules

__all__ = ["JOULES_WINDOW_S", "STEP_BUCKETS", "RunMetrics", "RunServer", "parse_listen"]

# s: from a millisecond step (a small model's) to a five-minute one (a checkpoint every step)
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                30.0, 60.0, 300.0)  # fmt: skip
JOULES_WINDOW_S = 60.0  # s of the newest steps whose energy gpuprobe_step_joules shares out
HISTORY_S = 300.0  # s of samples kept for it (the steps trail the samples by a few seconds)

StepsReader = Callable[[], Sequence[tuple[int, str, str | None, Sequence[float]]]]


@dataclass
class _Steps:
    """One process's steps as served so far."""

    name: str
    ends_read: int = 0
    last_end: float | None = None
    counts: list[int] = field(default_factory=lambda: [0] * (len(STEP_BUCKETS) + 1))
    total_s: float = 0.0
    last_s: float | None = None
    recent: deque[float] = field(default_factory=deque)  # the ends of the last window

    def add(self, ends: Sequence[float]) -> None:
        """Take the ends past those read before (the file only grows)."""
        new = ends[self.ends_read :]
        self.ends_read = len(ends)
        for end in new:
            if self.last_end is not None:
                seconds = max(0.0, end - self.last_end)
                self.counts[bisect.bisect_left(STEP_BUCKETS, seconds)] += 1
                self.total_s += seconds
                self.last_s = seconds
            self.last_end = end
            self.recent.append(end)
        while self.recent and self.recent[0] < self.recent[-1] - JOULES_WINDOW_S:
            self.recent.popleft()

    @property
    def steps(self) -> int:
        return sum(self.counts)


class RunMetrics:
    """A prometheus-client Collector: the run's GPUs and host (once :meth:`attach` gave it the
    sampler) and its processes' steps, read through ``read_steps`` at each scrape."""

    def __init__(self, read_steps: StepsReader, hostname: str | None = None) -> None:
        self._read = read_steps
        self._hostname = hostname
        self._gpu: GpuprobeCollector | None = None
        self._history: deque[Sample] = deque()
        self._steps: dict[int, _Steps] = {}
        self._lock = threading.Lock()  # scrapes come from several worker threads

    def attach(self, sampler: Sampler) -> None:
        """Serve the GPU and host series of ``sampler`` (opened) from now on."""
        self._gpu = GpuprobeCollector(sampler, self._hostname)

    def update(self, sample: Sample) -> None:
        """The sampler's sink: the newest sample, and a few minutes of them for the energy."""
        if self._gpu is not None:
            self._gpu.update(sample)
        with self._lock:
            self._history.append(sample)
            while self._history and self._history[0].t < sample.t - HISTORY_S:
                self._history.popleft()

    def collect(self) -> Iterator[Any]:
        """Every family, per scrape."""
        if self._gpu is not None:
            yield from self._gpu.collect()
        yield from self._step_families()

    def _step_families(self) -> Iterator[Any]:
        labels = ["Hostname", "pid", "command"]
        total = metric_family(
            "counter",
            "gpuprobe_steps",
            "Steps a process recorded (optimizer steps, or batches).",
            labels,
        )
        hist = metric_family(
            "histogram", "gpuprobe_step_seconds", "Time of each step of a process (s).", labels
        )
        last = metric_family(
            "gauge", "gpuprobe_step_last_seconds", "The last step's time of a process (s).", labels
        )
        joules = metric_family(
            "gauge",
            "gpuprobe_step_joules",
            f"Energy a step of a process cost over its last {JOULES_WINDOW_S:g} s of steps, "
            "on the GPUs it is on (J; method: counter, or power × time where a card has none).",
            [*labels, "method"],
        )
        host = self._gpu.hostname if self._gpu is not None else (self._hostname or "")
        with self._lock:
            for pid, name, _mode, ends in self._read():
                s = self._steps.get(pid)
                if s is None or len(ends) < s.ends_read:  # a reused pid starts again
                    s = self._steps[pid] = _Steps(name)
                s.add(ends)
            history = list(self._history)
            for pid, s in sorted(self._steps.items()):
                who = [host, str(pid), s.name]
                total.add_metric(who, float(s.steps))
                cumulative, acc = [], 0
                for le, n in zip([*map(str, STEP_BUCKETS), "+Inf"], s.counts, strict=True):
                    acc += n
                    cumulative.append((le, float(acc)))
                hist.add_metric(who, cumulative, sum_value=s.total_s)
                if s.last_s is not None:
                    last.add_metric(who, s.last_s)
                j = _step_joules(history, pid, list(s.recent))
                if j is not None:
                    joules.add_metric([*who, j[1]], j[0])
        yield from (total, hist, last)
        if joules.samples:
            yield joules


def _step_joules(
    history: Sequence[Sample], pid: int, ends: list[float]
) -> tuple[float, str] | None:
    """(J a step, method) of ``pid``'s steps ``ends`` on the GPUs it was on in ``history``."""
    gpus = sorted(
        {t.sample.index for s in history for t in s.gpus if any(p.pid == pid for p in t.processes)}
    )
    if not gpus or not history:
        return None
    ends = [e for e in ends if history[0].t <= e <= history[-1].t]
    if len(ends) < 2:
        return None
    joules, methods = 0.0, set()
    for index in gpus:
        ticks = [(s.t, t.sample) for s in history for t in s.gpus if t.sample.index == index]
        times, energy, method = cumulative_joules(
            [t for t, _ in ticks], [g.energy_mj for _, g in ticks], [g.power_w for _, g in ticks]
        )
        if not method:
            return None
        joules += float(np.interp(ends[-1], times, energy) - np.interp(ends[0], times, energy))
        methods.add(method)
    return joules / (len(ends) - 1), "counter" if methods == {"counter"} else "power × time"


def parse_listen(value: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` -> (host, port); 127.0.0.1 without a host. A
    :class:`ValueError` with what was wrong otherwise."""
    host, sep, port = value.strip().rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value.strip()
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: give PORT or HOST:PORT, a port of 0-65535 (0 picks one)")
    return host, int(port)


class RunServer:
    """``/metrics`` for one run: listening from construction (so a taken port is refused before
    the command starts), serving :class:`RunMetrics` until :meth:`close`."""

    def __init__(
        self,
        host: str,
        port: int,
        read_steps: StepsReader,
        allow_hosts: tuple[str, ...] = (),
    ) -> None:
        from gpuprobe.core.errors import UsageError
        from gpuprobe.core.text import url_host

        host = check_listen_host(host)
        self.metrics = RunMetrics(read_steps)
        registry = registry_of(self.metrics)
        try:
            with _signals_blocked():  # its threads leave the run's signals to the main thread
                self.server = MetricsServer(host, port, registry, allow_hosts)
        except OSError as exc:
            raise UsageError(listen_error(host, port, exc, ("--serve HOST:", "--serve"))) from None
        self.closed = False
        self.url = f"http://{url_host(host.strip())}:{self.server.server_port}/metrics"

    def attach(self, sampler: Sampler) -> None:
        self.metrics.attach(sampler)

    def update(self, sample: Sample) -> None:
        self.metrics.update(sample)

    def close(self) -> None:
        """Stop serving (idempotent)."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.server.shutdown()


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
