"""``gpuprobe export``: the sampler's metrics for Prometheus (prometheus-client, a custom
Collector).

GPU metrics carry dcgm-exporter's names and labels (``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``Hostname``; NVIDIA/dcgm-exporter ``etc/default-counters.csv``), so
dashboards written for dcgm-exporter work unchanged; what dcgm-exporter has no name for, and the
host, are ``gpuprobe_*``. A sampler thread reads the machine at ``hz``; each scrape serves the
latest sample, so scrapes cost no NVML calls and several scrapers see the same values.

Units follow dcgm-exporter: MiB for framebuffer memory, W, °C, MHz, %.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from gpuprobe.core.text import url_host
from gpuprobe.platform.hardware.types import CLOCK_EVENT_REASONS, Gpu, encode_clock_event_reasons
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.sampler import NvmlFactory, Sampler

__all__ = [
    "DCGM_FIELDS",
    "DEFAULT_PORT",
    "GpuprobeCollector",
    "MetricsServer",
    "listen_error",
    "serve",
]

MiB = 2**20

# dcgm-exporter name -> (GpuSample attribute, scale, help text as dcgm-exporter words it)
DCGM_FIELDS: dict[str, tuple[str, float, str]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_gpu", 1.0, "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("utilization_memory", 1.0, "Memory utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("memory_used", 1 / MiB, "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0, "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0, "GPU temperature (in C)."),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0, "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0, "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_gen", 1.0, "PCIe current link generation."),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_width", 1.0, "PCIe current link width."),
}
_GPU_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]


def _labels(g: Gpu | None, index: int, hostname: str) -> list[str]:
    return [
        str(index),
        (g.uuid if g else None) or "",
        (g.pci_bus_id if g else None) or "",
        f"nvidia{index}",
        (g.name if g else None) or "",
        hostname,
    ]


class GpuprobeCollector:
    """A prometheus-client Collector over a running :class:`Sampler`'s latest sample."""

    def __init__(self, sampler: Sampler, hostname: str | None = None) -> None:
        self.sampler = sampler
        self.hostname = hostname or socket.gethostname()
        self._latest: Sample | None = None
        self._lock = threading.Lock()
        self.scrapes = 0

    def update(self, sample: Sample) -> None:
        """The sampler's sink: keep the newest sample."""
        with self._lock:
            self._latest = sample

    def collect(self) -> Iterator[Any]:
        """Build every metric family from the latest sample (called per scrape)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            s = self._latest
            self.scrapes += 1
        gpus = {g.index: g for g in self.sampler.gpus}
        host_l = ["Hostname"]
        up = GaugeMetricFamily(
            "gpuprobe_nvml_up",
            "1 when NVML works and GPUs are read.",
            labels=["Hostname", "status"],
        )
        up.add_metric(
            [self.hostname, self.sampler.driver.status],
            1.0 if self.sampler.driver.status == "ok" else 0.0,
        )
        yield up
        count = GaugeMetricFamily(
            "DCGM_FI_DEV_COUNT", "Number of Devices on the node.", labels=host_l
        )
        count.add_metric([self.hostname], float(len(gpus)))
        yield count
        if s is None:
            return
        fams = {
            name: GaugeMetricFamily(name, help_, labels=_GPU_LABELS)
            for name, (_, _, help_) in DCGM_FIELDS.items()
        }
        total = GaugeMetricFamily(
            "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=_GPU_LABELS
        )
        reasons = GaugeMetricFamily(
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "Current clock event reasons (bitmask).",
            labels=_GPU_LABELS,
        )
        reason_on = GaugeMetricFamily(
            "gpuprobe_gpu_clock_event_reason",
            "1 when this clock event reason holds the clocks back now.",
            labels=[*_GPU_LABELS, "reason"],
        )
        fb_total = GaugeMetricFamily(
            "gpuprobe_gpu_memory_total_bytes", "GPU memory capacity (bytes).", labels=_GPU_LABELS
        )
        pcie_rx = GaugeMetricFamily(
            "gpuprobe_gpu_pcie_rx_kilobytes_per_second",
            "PCIe receive throughput (KiB/s as NVML counts it; only with --pcie).",
            labels=_GPU_LABELS,
        )
        pcie_tx = GaugeMetricFamily(
            "gpuprobe_gpu_pcie_tx_kilobytes_per_second",
            "PCIe transmit throughput (KiB/s as NVML counts it; only with --pcie).",
            labels=_GPU_LABELS,
        )
        pmem = GaugeMetricFamily(
            "gpuprobe_gpu_process_memory_bytes",
            "GPU memory used by a process (bytes).",
            labels=[*_GPU_LABELS, "pid"],
        )
        psm = GaugeMetricFamily(
            "gpuprobe_gpu_process_sm_utilization_percent",
            "SM utilization of a process (%).",
            labels=[*_GPU_LABELS, "pid"],
        )
        for tick in s.gpus:
            gs = tick.sample
            g = gpus.get(gs.index)
            labels = _labels(g, gs.index, self.hostname)
            for name, (attr, scale, _) in DCGM_FIELDS.items():
                v = getattr(gs, attr)
                if v is not None:
                    fams[name].add_metric(labels, float(v) * scale)
            if g is not None and g.memory_total is not None and gs.memory_used is not None:
                total.add_metric(labels, (g.memory_total - gs.memory_used) / MiB)
                fb_total.add_metric(labels, float(g.memory_total))
            if gs.clock_event_reasons is not None:
                # the whole NVML mask, bits this table does not name included
                reasons.add_metric(
                    labels, float(encode_clock_event_reasons(gs.clock_event_reasons))
                )
                names = dict.fromkeys([*CLOCK_EVENT_REASONS.values(), *gs.clock_event_reasons])
                for name in names:
                    reason_on.add_metric(
                        [*labels, name], 1.0 if name in gs.clock_event_reasons else 0.0
                    )
            if gs.pcie_rx_kbs is not None:
                pcie_rx.add_metric(labels, float(gs.pcie_rx_kbs))
            if gs.pcie_tx_kbs is not None:
                pcie_tx.add_metric(labels, float(gs.pcie_tx_kbs))
            for p in tick.processes:
                if p.used_memory is not None:
                    pmem.add_metric([*labels, str(p.pid)], float(p.used_memory))
                if p.sm_percent is not None:
                    psm.add_metric([*labels, str(p.pid)], float(p.sm_percent))
        if s.gpus:  # a host without GPUs gets no empty GPU families
            yield from fams.values()
            yield from (total, fb_total, reasons, reason_on, pcie_rx, pcie_tx, pmem, psm)

        cpu = GaugeMetricFamily(
            "gpuprobe_host_cpu_utilization_percent",
            "Busy % of each logical core over the last sample interval.",
            labels=["Hostname", "cpu"],
        )
        for i, v in enumerate(s.host.cpu_percent):
            cpu.add_metric([self.hostname, str(i)], float(v))
        yield cpu
        if s.host.cpu_percent:
            avg = GaugeMetricFamily(
                "gpuprobe_host_cpu_utilization_mean_percent",
                "Busy % over all logical cores.",
                labels=host_l,
            )
            avg.add_metric([self.hostname], sum(s.host.cpu_percent) / len(s.host.cpu_percent))
            yield avg
        for name, value, help_ in (
            ("gpuprobe_host_memory_used_bytes", s.host.memory_used, "Host memory used (bytes)."),
            (
                "gpuprobe_host_memory_available_bytes",
                s.host.memory_available,
                "Host memory available (bytes).",
            ),
            ("gpuprobe_host_swap_used_bytes", s.host.swap_used, "Swap used (bytes)."),
        ):
            if value is not None:
                fam = GaugeMetricFamily(name, help_, labels=host_l)
                fam.add_metric([self.hostname], float(value))
                yield fam
        stamp = GaugeMetricFamily(
            "gpuprobe_sample_timestamp_seconds",
            "When the served sample was taken (seconds since the epoch).",
            labels=host_l,
        )
        stamp.add_metric([self.hostname], s.t)
        yield stamp
        cost = CounterMetricFamily(
            "gpuprobe_sampler_cpu_seconds",
            "CPU seconds the gpuprobe sampler thread has used.",
            labels=host_l,
        )
        cost.add_metric([self.hostname], self.sampler.cpu_s)
        yield cost


def listen_error(host: str, port: int, exc: OSError) -> str:
    """What to do when the server cannot listen: the host is wrong, or the port is taken."""
    import errno
    import socket

    where = f"{url_host(host)}:{port}"
    why = exc.strerror or str(exc)
    # socket.create_server re-raises a failed name lookup as a plain OSError with the EAI errno
    lookup = {
        getattr(socket, n)
        for n in ("EAI_NONAME", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA")
        if hasattr(socket, n)
    }
    if isinstance(exc, socket.gaierror) or exc.errno in lookup:
        why = why.split(" (while attempting", 1)[0]
        return (
            f"cannot listen on {where}: {host!r} is not a known name or address ({why}); give an "
            "address of this machine with --host (127.0.0.1, or 0.0.0.0 for every interface)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: {host} is not an address of this machine ({why}); give "
            "one of its addresses with --host (127.0.0.1, or 0.0.0.0 for every interface)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"cannot listen on {where}: {why}; ports below 1024 need root: pick a --port above"
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {where}: the port is in use ({why}); pick another --port"
    return f"cannot listen on {where}: {why}"


DEFAULT_PORT = 19400  # dcgm-exporter has 9400; both run side by side (see docs/export.md)
WORKERS = 4  # threads that answer scrapes; a scrape takes ~1 ms, Prometheus sends one at a time
BACKLOG = 128  # listen backlog (the stdlib server's 5 made 8-16 concurrent scrapers wait 1-2 s)
IDLE_TIMEOUT_S = 10.0  # s a connection may stay open without sending a request
REQUEST_TIMEOUT_S = 5.0  # s a started request may take to arrive whole
MAX_IDLE = 1024  # connections kept waiting for a request; the oldest is closed past this


class MetricsServer:
    """``/metrics`` over HTTP with a bounded number of threads.

    One thread accepts connections and waits, with a selector, until each has sent something;
    only then does one of :data:`WORKERS` threads answer it (prometheus-client's handler). A
    connection that sends nothing is closed after :data:`IDLE_TIMEOUT_S`, one that starts a
    request and stalls after :data:`REQUEST_TIMEOUT_S`; so 300 idle connections cost 300 file
    descriptors and no thread (prometheus-client's own server starts a thread per connection, with
    no timeout).
    """

    def __init__(self, host: str, port: int, registry: Any) -> None:
        import selectors
        from concurrent.futures import ThreadPoolExecutor

        from prometheus_client.exposition import MetricsHandler

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self._sock.setblocking(False)
        self.server_address = self._sock.getsockname()
        self.server_port: int = self.server_address[1]
        self._handler = MetricsHandler.factory(registry)
        self._handler.timeout = REQUEST_TIMEOUT_S  # type: ignore[attr-defined]  # set on the socket
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._sock, selectors.EVENT_READ)
        self._waiting: dict[socket.socket, tuple[float, Any]] = {}
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="gpuprobe-export")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuprobe-accept", daemon=True)
        self._thread.start()

    def _close(self, conn: socket.socket) -> None:
        self._waiting.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn)
        conn.close()

    def _loop(self) -> None:
        import selectors
        import time

        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.5):
                if key.fileobj is self._sock:
                    while True:
                        try:
                            conn, addr = self._sock.accept()
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError:  # out of descriptors: leave it in the backlog
                            break
                        if len(self._waiting) >= MAX_IDLE:
                            self._close(min(self._waiting, key=lambda c: self._waiting[c][0]))
                        conn.setblocking(False)
                        self._waiting[conn] = (time.monotonic(), addr)
                        self._sel.register(conn, selectors.EVENT_READ)
                else:
                    conn = key.fileobj  # type: ignore[assignment]
                    _, addr = self._waiting.pop(conn)
                    self._sel.unregister(conn)
                    conn.setblocking(True)
                    self._pool.submit(self._serve, conn, addr)
            now = time.monotonic()
            for conn, (t0, _) in list(self._waiting.items()):
                if now - t0 > IDLE_TIMEOUT_S:
                    self._close(conn)

    def _serve(self, conn: socket.socket, addr: Any) -> None:
        try:
            self._handler(conn, addr, self)
        except OSError:  # the scraper went away or stalled past the timeout
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)
            conn.close()

    def shutdown(self) -> None:
        """Stop accepting, close waiting connections, finish answers in flight."""
        self._stop.set()
        self._thread.join()
        for conn in list(self._waiting):
            self._close(conn)
        self._pool.shutdown(wait=True)
        self._sel.close()
        self._sock.close()

    def server_close(self) -> None:
        """Close the listening socket (after :meth:`shutdown`; idempotent)."""
        self._sock.close()


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    hz: float = 1.0,
    pcie_throughput: bool = False,
    nvml: NvmlFactory | None = None,
) -> tuple[Any, Sampler, GpuprobeCollector]:
    """Start the sampler and an HTTP server for ``/metrics`` (:class:`MetricsServer`); return
    (server, sampler, collector). ``port=0`` picks a free port (``server.server_port``). Stop
    with ``server.shutdown(); sampler.close()``."""
    from prometheus_client import CollectorRegistry

    kwargs: dict[str, Any] = {} if nvml is None else {"nvml": nvml}
    sampler = Sampler(hz=hz, pcie_throughput=pcie_throughput, **kwargs)
    sampler.open()
    collector = GpuprobeCollector(sampler)
    collector.update(sampler.take())  # the first scrape has numbers (CPU since open())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server = MetricsServer(host, port, registry)
    except OSError as exc:
        sampler.close()
        from gpuprobe.core.errors import UsageError

        raise UsageError(listen_error(host, port, exc)) from None
    sampler.start(collector.update)
    return server, sampler, collector
