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
import errno
import socket
import threading
from collections.abc import Collection, Iterator
from typing import Any

from gpuprobe.core.text import url_host
from gpuprobe.platform.hardware.types import CLOCK_EVENT_REASONS, Gpu, encode_clock_event_reasons
from gpuprobe.tools.monitor.hosts import (
    BAD_REQUEST,
    HOST_REFUSED,
    HostCheck,
    check_listen_host,
    request_host,
)
from gpuprobe.tools.monitor.readers import ProcessNames
from gpuprobe.tools.monitor.records import Sample
from gpuprobe.tools.monitor.sampler import NvmlFactory, Sampler

__all__ = [
    "DCGM_FIELDS",
    "DEFAULT_PORT",
    "GpuprobeCollector",
    "MetricsServer",
    "listen_error",
    "metric_family",
    "registry_of",
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
        self.names = ProcessNames()  # the command label of the per-process series

    def update(self, sample: Sample) -> None:
        """The sampler's sink: keep the newest sample."""
        with self._lock:
            self._latest = sample

    def gpu_errors(self) -> dict[int, str]:
        """GPU index -> the NVML error that makes it unreadable now (``NVMLError_GpuIsLost``
        for a card that fell off the bus), for every GPU the sampler cannot read: one it could
        not open, and one NVML lost after the exporter started."""
        out = {g.index: g.nvml_error for g in self.sampler.gpus if g.nvml_error}
        live = getattr(self.sampler.session, "device_errors", None)
        if isinstance(live, dict):
            out.update({int(k): str(v) for k, v in dict(live).items()})
        return out

    def nvml_status(self) -> str:
        """``gpuprobe_nvml_up``'s status: the driver's (ok, no-library, no-gpu, …), or
        ``gpu-lost`` / ``gpu-unreadable`` when NVML works but a GPU cannot be read."""
        status = self.sampler.driver.status
        if status != "ok":
            return status
        errors = self.gpu_errors()
        if any(e == "NVMLError_GpuIsLost" for e in errors.values()):
            return "gpu-lost"
        return "gpu-unreadable" if errors else "ok"

    def unreadable_notes(self, said: Collection[int] = ()) -> dict[int, str]:
        """For each GPU NVML cannot read now that is not in ``said``: one line for a person
        (what happened, where it shows in /metrics, the fix)."""
        from gpuprobe.platform.hardware.nvml import lost_gpu_fix

        out = {}
        for index, error in sorted(self.gpu_errors().items()):
            if index in said:
                continue
            lost = error == "NVMLError_GpuIsLost"
            out[index] = (
                f"gpuprobe export: GPU {index} {'is lost' if lost else 'cannot be read'} "
                f"({error}): its series are no longer served; gpuprobe_gpu_up is 0 for it, "
                f"gpuprobe_nvml_up status {self.nvml_status()}."
                + (f" {lost_gpu_fix(index)}" if lost else "")
            )
        return out

    def collect(self) -> Iterator[Any]:
        """Build every metric family from the latest sample (called per scrape)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            s = self._latest
            self.scrapes += 1
        gpus = {g.index: g for g in self.sampler.gpus}
        host_l = ["Hostname"]
        errors = self.gpu_errors()
        status = self.nvml_status()
        up = GaugeMetricFamily(
            "gpuprobe_nvml_up",
            "1 when NVML works and every GPU is read; 0 with the reason in status (gpu-lost: "
            "a GPU fell off the bus, see gpuprobe_gpu_up).",
            labels=["Hostname", "status"],
        )
        up.add_metric([self.hostname, status], 1.0 if status == "ok" else 0.0)
        yield up
        if gpus:
            gpu_up = GaugeMetricFamily(
                "gpuprobe_gpu_up",
                "1 when this GPU is read; 0 when NVML cannot read it (the NVML error in error; "
                "its other series are absent then).",
                labels=[*_GPU_LABELS, "error"],
            )
            for index, card in sorted(gpus.items()):
                err = errors.get(index, "")
                gpu_up.add_metric([*_labels(card, index, self.hostname), err], 0.0 if err else 1.0)
            yield gpu_up
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
            labels=[*_GPU_LABELS, "pid", "command"],
        )
        energy = CounterMetricFamily(
            "gpuprobe_gpu_energy_joules",
            "Energy the GPU used since its driver loaded (joules; NVML's total-energy counter, "
            "Volta and newer; absent where the card has none).",
            labels=_GPU_LABELS,
        )
        psm = GaugeMetricFamily(
            "gpuprobe_gpu_process_sm_utilization_percent",
            "SM utilization of a process (%).",
            labels=[*_GPU_LABELS, "pid", "command"],
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
            if gs.energy_mj is not None:
                energy.add_metric(labels, gs.energy_mj / 1000.0)
            if gs.pcie_rx_kbs is not None:
                pcie_rx.add_metric(labels, float(gs.pcie_rx_kbs))
            if gs.pcie_tx_kbs is not None:
                pcie_tx.add_metric(labels, float(gs.pcie_tx_kbs))
            for p in tick.processes:
                who = [*labels, str(p.pid), self.names(p.pid)]
                if p.used_memory is not None:
                    pmem.add_metric(who, float(p.used_memory))
                if p.sm_percent is not None:
                    psm.add_metric(who, float(p.sm_percent))
        if s.gpus:  # a host without GPUs gets no empty GPU families
            yield from fams.values()
            yield from (total, fb_total, reasons, reason_on, pcie_rx, pcie_tx, pmem, psm)
            if energy.samples:  # a card without the counter gets no empty family
                yield energy

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


def metric_family(kind: str, name: str, help_: str, labels: list[str]) -> Any:
    """A prometheus-client metric family (``kind``: counter, gauge or histogram), for the
    collectors beside this one (this module is the door to prometheus-client)."""
    from prometheus_client import core

    cls = {
        "counter": core.CounterMetricFamily,
        "gauge": core.GaugeMetricFamily,
        "histogram": core.HistogramMetricFamily,
    }[kind]
    return cls(name, help_, labels=labels)


def registry_of(*collectors: Any) -> Any:
    """A prometheus-client registry of ``collectors`` (described at scrape time only)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return registry


def listen_error(
    host: str, port: int, exc: OSError, flags: tuple[str, str] = ("--host", "--port")
) -> str:
    """What to do when the server cannot listen: the host is wrong, or the port is taken;
    ``flags``: the options that set the host and the port, as the message names them."""
    import errno
    import socket

    host_flag, port_flag = flags
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
            f"address of this machine with {host_flag} (127.0.0.1, or 0.0.0.0 for every interface)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: {host} is not an address of this machine ({why}); give "
            f"one of its addresses with {host_flag} (127.0.0.1, or 0.0.0.0 for every interface)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"cannot listen on {where}: {why}; ports below 1024 need root: pick a {port_flag} above"
        )
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {where}: the port is in use ({why}); pick another {port_flag}"
    return f"cannot listen on {where}: {why}"


DEFAULT_PORT = 19400  # dcgm-exporter has 9400; both run side by side (see docs/export.md)
WORKERS = 4  # threads that build answers; a scrape takes ~1 ms, Prometheus sends one at a time
BACKLOG = 128  # listen backlog (the stdlib server's 5 made 8-16 concurrent scrapers wait 1-2 s)
# s from the connection to the blank line that ends the request's headers. Prometheus sends its
# whole GET in one segment at once; a client still sending after this is closed, however steadily
# it trickles (a per-read timeout let one byte a second hold a thread for ever).
REQUEST_DEADLINE_S = 5.0
WRITE_DEADLINE_S = 10.0  # s for the client to take the whole answer (Prometheus: scrape_timeout)
MAX_REQUEST_BYTES = 16384  # request line and headers; Prometheus's GET is ~300 bytes
MAX_CONNECTIONS = 1024  # held at once (one descriptor each); past it the oldest request is closed
SPARE_FDS = 64  # descriptors kept for everything else under a low RLIMIT_NOFILE (ulimit -n)
SWEEP_S = 0.1  # s between checks of the deadlines
_TOO_LARGE = (
    b"HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)


class _Conn:
    """One client: what it has sent, what is left to send it, and until when."""

    __slots__ = ("addr", "busy", "deadline", "inbox", "outbox", "sock")

    def __init__(self, sock: socket.socket, addr: Any, deadline: float) -> None:
        self.sock = sock
        self.addr = addr
        self.deadline = deadline
        self.inbox = bytearray()
        self.outbox: memoryview | None = None
        self.busy = False  # a worker builds its answer: no deadline meanwhile


def _max_connections() -> int:
    """:data:`MAX_CONNECTIONS`, or fewer where the descriptor limit is lower (it leaves
    :data:`SPARE_FDS` for the sampler, the listener and the process's own files)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, soft - SPARE_FDS))


def _request_complete(buf: bytearray, before: int) -> bool:
    """Whether the headers have ended (a blank line), looking only at the bytes new since
    ``before`` and the three before them (no re-scan of what was searched)."""
    start = max(0, before - 3)
    return buf.find(b"\r\n\r\n", start) >= 0 or buf.find(b"\n\n", start) >= 0


class MetricsServer:
    """``/metrics`` over HTTP: one thread does every socket's I/O, :data:`WORKERS` build answers.

    The I/O thread accepts connections and reads each request, without blocking, into a buffer
    until its headers have ended; only a whole request goes to a worker, which runs
    prometheus-client's ``MetricsHandler`` on those bytes in memory and hands back the answer,
    which the I/O thread sends, again without blocking. So no client holds a thread: one that
    sends slowly, or nothing, or does not read its answer, costs a descriptor and a buffer until
    :data:`REQUEST_DEADLINE_S` (its whole request) or :data:`WRITE_DEADLINE_S` (its whole answer)
    runs out, and a real scrape is answered meanwhile (200 clients sending a byte a second: see
    benchmarks/exporter_load.py). prometheus-client's own server starts a thread per connection,
    with no timeout.
    """

    def __init__(
        self, host: str, port: int, registry: Any, allow_hosts: tuple[str, ...] = ()
    ) -> None:
        import selectors
        from concurrent.futures import ThreadPoolExecutor

        from prometheus_client.exposition import MetricsHandler

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self._sock.setblocking(False)
        self.server_address = self._sock.getsockname()
        self.server_port: int = self.server_address[1]
        self.host_check = HostCheck(host, str(self.server_address[0]), allow_hosts)
        self.refused_hosts = 0  # requests refused for their Host header
        self._handler = _in_memory(MetricsHandler.factory(registry))
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._sock, selectors.EVENT_READ)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._conns: dict[socket.socket, _Conn] = {}  # every open client, reading to writing
        self._max_conns = _max_connections()
        self._done: list[tuple[_Conn, bytes]] = []  # answers the workers built, to send
        self._done_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="gpuprobe-export")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuprobe-accept", daemon=True)
        self._thread.start()

    def _close(self, c: _Conn) -> None:
        self._conns.pop(c.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(c.sock)
        c.sock.close()

    def _close_oldest(self) -> None:
        """Close the connection nearest its deadline (the one that has had longest)."""
        self._close(min(self._conns.values(), key=lambda c: c.deadline))

    def _accept(self) -> None:
        import selectors
        import time

        while True:
            try:
                sock, addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE) and self._conns:
                    self._close_oldest()  # out of descriptors: the newcomer may be a scrape
                    continue
                return  # leave it in the backlog
            if len(self._conns) >= self._max_conns:
                self._close_oldest()
            sock.setblocking(False)
            c = _Conn(sock, addr, time.monotonic() + REQUEST_DEADLINE_S)
            self._conns[sock] = c
            self._sel.register(sock, selectors.EVENT_READ, c)

    def _read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(c)
            return
        if not data:  # the client went away before its request ended
            self._close(c)
            return
        before = len(c.inbox)
        c.inbox += data
        if len(c.inbox) > MAX_REQUEST_BYTES:
            self._sel.unregister(c.sock)
            self._reply(c, _TOO_LARGE)
        elif _request_complete(c.inbox, before):
            self._sel.unregister(c.sock)
            named = request_host(bytes(c.inbox))
            if not self.host_check.allows(named):
                self.refused_hosts += 1
                self._reply(c, BAD_REQUEST if named is False else HOST_REFUSED)
                return
            # a worker has it until its answer is built
            c.busy = True
            self._pool.submit(self._answer, c, bytes(c.inbox))

    def _answer(self, c: _Conn, request: bytes) -> None:
        """In a worker: the answer to one whole request, handed back to the I/O thread."""
        try:
            out = self._handler(request, c.addr, self).wfile.getvalue()
        except Exception as exc:  # a collector that failed: say so rather than hang up
            why = f"{type(exc).__name__}: {exc}".encode(errors="replace")[:200]
            out = (
                b"HTTP/1.0 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                + f"Content-Length: {len(why)}\r\n\r\n".encode()
                + why
            )
        with self._done_lock:
            self._done.append((c, out))
        with contextlib.suppress(OSError):  # full: a wake-up is pending already
            self._wake_w.send(b"\0")

    def _reply(self, c: _Conn, answer: bytes) -> None:
        import selectors
        import time

        c.busy = False
        c.outbox = memoryview(answer)
        c.deadline = time.monotonic() + WRITE_DEADLINE_S
        self._send(c)
        if c.sock in self._conns:  # more to send when the client takes it
            self._sel.register(c.sock, selectors.EVENT_WRITE, c)

    def _send(self, c: _Conn) -> None:
        assert c.outbox is not None
        try:
            while c.outbox:
                c.outbox = c.outbox[c.sock.send(c.outbox) :]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the client went away
            self._close(c)
            return
        with contextlib.suppress(OSError):
            c.sock.shutdown(socket.SHUT_WR)
        self._close(c)

    def _loop(self) -> None:
        import time

        next_sweep = time.monotonic() + SWEEP_S
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=SWEEP_S):
                if key.fileobj is self._sock:
                    self._accept()
                elif key.fileobj is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    with self._done_lock:
                        done, self._done = self._done, []
                    for c, answer in done:
                        if c.sock in self._conns:
                            self._reply(c, answer)
                elif key.data.outbox is not None:
                    self._send(key.data)
                else:
                    self._read(key.data)
            now = time.monotonic()
            if now >= next_sweep:
                next_sweep = now + SWEEP_S
                for c in list(self._conns.values()):
                    if now > c.deadline and not c.busy:
                        self._close(c)

    def shutdown(self) -> None:
        """Stop accepting, finish the answers in flight, close every connection."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        self._thread.join()
        self._pool.shutdown(wait=True)
        for c in list(self._conns.values()):
            self._close(c)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
        self._sock.close()

    def server_close(self) -> None:
        """Close the listening socket (after :meth:`shutdown`; idempotent)."""
        self._sock.close()


def _in_memory(handler: type) -> type:
    """``handler`` (an ``http.server`` request handler) reading a request from bytes and writing
    its answer to memory: the I/O thread does every socket's reading and writing."""
    import io

    class InMemory(handler):
        def setup(self) -> None:
            self.rfile = io.BytesIO(self.request)
            self.wfile = io.BytesIO()

        def finish(self) -> None:  # the answer is read from wfile after handle()
            pass

    return InMemory


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    hz: float = 1.0,
    pcie_throughput: bool = False,
    nvml: NvmlFactory | None = None,
    allow_hosts: tuple[str, ...] = (),
) -> tuple[Any, Sampler, GpuprobeCollector]:
    """Start the sampler and an HTTP server for ``/metrics`` (:class:`MetricsServer`); return
    (server, sampler, collector). ``port=0`` picks a free port (``server.server_port``).
    ``allow_hosts``: more names its requests may give as their Host (:class:`HostCheck`). An
    empty ``host`` is a :class:`~gpuprobe.core.errors.UsageError`. Stop with
    ``server.shutdown(); sampler.close()``."""
    host = check_listen_host(host)

    kwargs: dict[str, Any] = {} if nvml is None else {"nvml": nvml}
    sampler = Sampler(hz=hz, pcie_throughput=pcie_throughput, **kwargs)
    sampler.open()
    collector = GpuprobeCollector(sampler)
    collector.update(sampler.take())  # the first scrape has numbers (CPU since open())
    registry = registry_of(collector)
    try:
        server = MetricsServer(host, port, registry, tuple(allow_hosts))
    except OSError as exc:
        sampler.close()
        from gpuprobe.core.errors import UsageError

        raise UsageError(listen_error(host, port, exc)) from None
    sampler.start(collector.update)
    return server, sampler, collector
