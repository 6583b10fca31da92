"""Build PyTorch profiler (Kineto) traces event by event, for tests, benchmarks and demos.

There is no GPU on the machines where gpuprobe is developed, so the GPU rules are tested on traces
built here to the Kineto schema: ``kernel`` events launched by ``cuda_runtime`` calls that share a
``correlation`` id (and an ``ac2g`` flow pair), ``gpu_memcpy`` with Kineto's
``"Memcpy HtoD (Pageable -> Device)"`` names and ``bytes``, ``gpu_memset``, ``device``/``stream``
args, ``ProfilerStep#N`` user annotations, ``[memory]`` instants and ``deviceProperties`` in the
header. A simple clock model makes the GPU side realistic: a kernel starts when both its launch has
returned and its stream is free, and a synchronisation returns when the device is drained.

Times are in µs. Events go to a sink: a list (``events``) by default, or straight to a file with
:meth:`KinetoBuilder.open` for traces of hundreds of megabytes.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["KinetoBuilder"]

LAUNCH_TO_START_US = 2.0  # µs from a launch call's return to its kernel's earliest start (typical)

_DUMPS = json.JSONEncoder(separators=(", ", ": ")).encode


class KinetoBuilder:
    """Emit a Kineto trace from a script of CPU ops, launches, copies and syncs.

    >>> b = KinetoBuilder()
    >>> with b.step(1):
    ...     b.launch("void gemm_kernel", kernel_us=50.0, op="aten::mm")
    ...     b.sync()
    >>> trace = b.to_dict()  # or b.write("trace.json.gz")
    """

    def __init__(
        self,
        *,
        device_name: str | None = "NVIDIA H200",
        compute_major: int = 9,
        compute_minor: int = 0,
        total_memory: int = 150_000_000_000,
        num_sms: int = 132,
        devices: int = 1,
        pid: int = 4242,
        tid: int = 4242,
        start_us: float = 1_000_000.0,
        sink: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self._sink = sink or self.events.append
        self.pid = pid
        self.tid = tid
        self.now = start_us
        self._corr = 0
        self._ext = 0
        self._stream_free: dict[tuple[int, int], float] = {}
        self.header: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [
                {
                    "id": d,
                    "name": device_name,
                    "totalGlobalMem": total_memory,
                    "computeMajor": compute_major,
                    "computeMinor": compute_minor,
                    "maxThreadsPerBlock": 1024,
                    "maxThreadsPerMultiprocessor": 2048,
                    "regsPerBlock": 65536,
                    "warpSize": 32,
                    "sharedMemPerBlock": 49152,
                    "numSms": num_sms,
                }
                for d in range(devices)
            ]
            if device_name
            else [],
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        }
        self._meta()

    # -- output -----------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def open(cls, path: str, **kwargs: Any) -> Iterator[KinetoBuilder]:
        """Stream the trace to ``path`` (gzip when it ends with ``.gz``) as events are made."""
        opener: Any = gzip.open if path.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as fh:
            pending: list[dict[str, Any]] | None = []
            first = True

            def sink(ev: dict[str, Any]) -> None:
                nonlocal first
                if pending is not None:
                    pending.append(ev)
                    return
                fh.write(("\n  " if first else ",\n  ") + _DUMPS(ev))
                first = False

            builder = cls(sink=sink, **kwargs)
            fh.write(json.dumps(builder.header, indent=2)[:-2] + ',\n  "traceEvents": [')
            early: list[dict[str, Any]] = pending or []
            pending = None
            for ev in early:
                sink(ev)
            yield builder
            fh.write('\n  ],\n  "traceName": "synthetic"\n}\n')

    def to_dict(self) -> dict[str, Any]:
        """The whole trace as a dict (the list sink only)."""
        return {**self.header, "traceEvents": list(self.events), "traceName": "synthetic"}

    def write(self, path: str) -> str:
        """Write the collected trace to ``path`` (gzip when it ends with ``.gz``)."""
        text = json.dumps(self.to_dict(), indent=1)
        if path.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return path

    def emit(self, ev: dict[str, Any]) -> None:
        """Add one raw event."""
        self._sink(ev)

    # -- clocks -----------------------------------------------------------------------------

    def _meta(self) -> None:
        for name, value in (("process_name", "python"), ("process_labels", "CPU")):
            self.emit(
                {
                    "ph": "M",
                    "name": name,
                    "ts": self.now,
                    "pid": self.pid,
                    "tid": 0,
                    "args": {"name" if name == "process_name" else "labels": value},
                }
            )

    def _x(self, cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.pid,
            "tid": self.tid,
            "ts": round(ts, 3),
            "dur": round(dur, 3),
        }
        if args:
            ev["args"] = args
        self.emit(ev)
        return ev

    def cpu(self, us: float) -> None:
        """Host time that the trace shows no op for (Python between ops)."""
        self.now += us

    def free_at(self, device: int = 0) -> float:
        """When every stream of ``device`` has finished its queued work."""
        ends = [t for (d, _), t in self._stream_free.items() if d == device]
        return max(ends, default=0.0)

    # -- CPU side ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def annotation(self, name: str, *, cat: str = "user_annotation") -> Iterator[None]:
        """A ``record_function`` span around the block (``ProfilerStep#N``, DataLoader, ...)."""
        start = self.now
        self.now += 0.5
        yield
        self.now += 0.5
        self._ext += 1
        self._x(cat, name, start, self.now - start, **{"External id": self._ext})

    def step(self, n: int) -> contextlib.AbstractContextManager[None]:
        """The ``ProfilerStep#n`` annotation that torch.profiler's ``step()`` writes."""
        return self.annotation(f"ProfilerStep#{n}")

    @contextlib.contextmanager
    def op(self, name: str, *, self_us: float = 2.0, **args: Any) -> Iterator[None]:
        """A ``cpu_op`` around the block; ``self_us`` of host time is spent inside it."""
        start = self.now
        self.now += self_us / 2
        yield
        self.now += self_us / 2
        self._ext += 1
        self._x("cpu_op", name, start, self.now - start, **{"External id": self._ext}, **args)

    def python(self, name: str) -> contextlib.AbstractContextManager[None]:
        """A ``python_function`` frame around the block (``with_stack=True``)."""
        return self.annotation(name, cat="python_function")

    def dataloader(self, us: float, *, single_process: bool = True) -> None:
        """One ``__next__`` of a DataLoader iterator taking ``us`` of host time."""
        kind = (
            "_SingleProcessDataLoaderIter" if single_process else "_MultiProcessingDataLoaderIter"
        )
        with self.annotation(f"enumerate(DataLoader)#{kind}.__next__"):
            self.now += us

    def memory(self, allocated: float, reserved: float, *, device: int = 0) -> None:
        """A ``[memory]`` instant (``profile_memory=True``) for CUDA ``device``."""
        self.emit(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": self.pid,
                "tid": self.tid,
                "ts": round(self.now, 3),
                "args": {
                    "Total Reserved": reserved,
                    "Total Allocated": allocated,
                    "Bytes": 0,
                    "Device Id": device,
                    "Device Type": 1,
                    "Addr": 0,
                },
            }
        )

    # -- GPU side ---------------------------------------------------------------------------

    def _gpu(
        self,
        cat: str,
        name: str,
        runtime: str,
        gpu_us: float,
        launch_us: float,
        stream: int,
        device: int,
        args: dict[str, Any],
        blocking: bool = False,
    ) -> tuple[float, float]:
        self._corr += 1
        corr = self._corr
        rt_start = self.now
        self.now += launch_us
        key = (device, stream)
        start = max(self.now + LAUNCH_TO_START_US, self._stream_free.get(key, 0.0))
        self._stream_free[key] = start + gpu_us
        if blocking:  # the call returns once its work is done, as CUDA's blocking copies do
            self.now = max(self.now, start + gpu_us + 1.0)
        self._x(
            "cuda_runtime",
            runtime,
            rt_start,
            self.now - rt_start,
            cbid=211,
            correlation=corr,
            **{"External id": self._ext + 1},
        )
        self.emit(
            {
                "ph": "s",
                "id": corr,
                "pid": self.pid,
                "tid": self.tid,
                "ts": round(rt_start, 3),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": device,
            "tid": stream,
            "ts": round(start, 3),
            "dur": round(gpu_us, 3),
            "args": {
                "External id": self._ext + 1,
                "device": device,
                "context": 1,
                "stream": stream,
                "correlation": corr,
                **args,
            },
        }
        self.emit(ev)
        self.emit(
            {
                "ph": "f",
                "id": corr,
                "pid": device,
                "tid": stream,
                "ts": round(start, 3),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return start, start + gpu_us

    def launch(
        self,
        kernel: str,
        *,
        kernel_us: float,
        launch_us: float = 5.0,
        stream: int = 7,
        device: int = 0,
        op: str | None = None,
        op_args: dict[str, Any] | None = None,
    ) -> tuple[float, float]:
        """``cudaLaunchKernel`` of ``kernel`` (inside ``cpu_op`` ``op`` when given); returns the
        kernel's (start, end) on the GPU."""
        args = {
            "queued": 0,
            "registers per thread": 32,
            "shared memory": 0,
            "blocks per SM": 1.0,
            "warps per SM": 4.0,
            "grid": [128, 1, 1],
            "block": [128, 1, 1],
            "est. achieved occupancy %": 25,
        }
        if op is None:
            return self._gpu(
                "kernel", kernel, "cudaLaunchKernel", kernel_us, launch_us, stream, device, args
            )
        with self.op(op, **(op_args or {})):
            return self._gpu(
                "kernel", kernel, "cudaLaunchKernel", kernel_us, launch_us, stream, device, args
            )

    def memcpy(
        self,
        kind: str = "HtoD",
        *,
        nbytes: int,
        gpu_us: float,
        pinned: bool = False,
        launch_us: float = 8.0,
        stream: int = 7,
        device: int = 0,
    ) -> tuple[float, float]:
        """``cudaMemcpyAsync`` and its ``gpu_memcpy`` (Kineto's name: ``Memcpy HtoD (Pageable ->
        Device)``); a pageable copy also holds the host until it is done, as CUDA does."""
        host = "Pinned" if pinned else "Pageable"
        src, dst = (host, "Device") if kind == "HtoD" else ("Device", host)
        name = f"Memcpy {kind} ({src} -> {dst})"
        bw = nbytes / gpu_us / 1e3 if gpu_us else 0.0
        span = self._gpu(
            "gpu_memcpy",
            name,
            "cudaMemcpyAsync",
            gpu_us,
            launch_us,
            stream,
            device,
            {"bytes": nbytes, "memory bandwidth (GB/s)": round(bw, 3)},
            blocking=not pinned,
        )
        return span

    def memset(self, *, nbytes: int, gpu_us: float, stream: int = 7, device: int = 0) -> None:
        """``cudaMemsetAsync`` and its ``gpu_memset``."""
        self._gpu(
            "gpu_memset",
            "Memset (Device)",
            "cudaMemsetAsync",
            gpu_us,
            4.0,
            stream,
            device,
            {"bytes": nbytes, "memory bandwidth (GB/s)": 100.0},
        )

    def sync(self, call: str = "cudaStreamSynchronize", *, device: int = 0) -> None:
        """A blocking runtime call that returns when ``device`` has drained its queues."""
        start = self.now
        self.now = max(self.now + 2.0, self.free_at(device) + 3.0)
        self._corr += 1
        self._x("cuda_runtime", call, start, self.now - start, cbid=131, correlation=self._corr)

    def wait_stream(
        self, stream: int, on: int, *, device: int = 0, latency_us: float = 1.5
    ) -> None:
        """``cudaStreamWaitEvent``: work queued on ``stream`` after this starts once the work
        queued so far on stream ``on`` is done (``latency_us`` after it)."""
        key, other = (device, stream), (device, on)
        ready = self._stream_free.get(other, 0.0) + latency_us
        self._stream_free[key] = max(self._stream_free.get(key, 0.0), ready)
        self._corr += 1
        self._x(
            "cuda_runtime", "cudaStreamWaitEvent", self.now, 2.0, cbid=147, correlation=self._corr
        )
        self.now += 2.0

    def item(self, *, device: int = 0) -> None:
        """``tensor.item()`` on a CUDA tensor: a tiny DtoH copy and a stream sync."""
        with self.op("aten::item"), self.op("aten::_local_scalar_dense"):
            self.memcpy("DtoH", nbytes=4, gpu_us=1.5, pinned=True, device=device)
            self.sync(device=device)
