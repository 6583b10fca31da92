"""What runs on each Dask worker for ``gpuprobe doctor --cluster`` and ``gpuprobe bench
--cluster``: this machine's doctor, or the fleet's short bench, as plain data (a dict that
pickles and round-trips through JSON), with the facts that name the node. Kept small: a worker
unpickles this module by name, so a worker without gpuprobe fails here and is reported as such."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FLEET_SIZES", "FLEET_WORKLOADS", "RAISED", "in_thread", "node_bench", "node_doctor"]

_first_call = [True]
RAISED = "gpuprobe_raised"  # the key of an answer that stands for an exception on the worker


def _start() -> float:
    """When this node's work began: on the first call in this worker, when gpuprobe's fleet
    package began to load (the import is the node's cost, as it would be for a doctor run
    there); else now."""
    from gpuprobe.tools.fleet import LOADED_AT

    if _first_call[0]:
        _first_call[0] = False
        return min(LOADED_AT, time.perf_counter())
    return time.perf_counter()


# The workloads every node runs when none are named: compute (matmul, every dtype) and memory
# (transfer: host memcpy on a CPU, host<->device and device<->device on a GPU).
FLEET_WORKLOADS = ("matmul", "transfer")
MIB = 2**20
# One size per workload and kind of device, the same on every node, so that each figure is the
# same problem everywhere: {kind: (quick sizes, full sizes)}. CPU quick: a 512x512 matmul and a
# 64 MiB copy (past any last-level cache; bench's TRANSFER_JUDGE_MIN_BYTES), about 5 s for numpy
# and torch on a 2-core VM; GPU: sizes where a matmul is bound by compute, not by the launch.
FLEET_SIZES: dict[str, tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]] = {
    "cpu": ({"matmul": (512,), "transfer": (64 * MIB,)},
            {"matmul": (2048,), "transfer": (256 * MIB,)}),
    "gpu": ({"matmul": (4096,), "transfer": (256 * MIB,)},
            {"matmul": (8192,), "transfer": (1024 * MIB,)}),
}  # fmt: skip


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a thread of the worker, awaited: ``Client.run`` runs a plain function on
    the worker's event loop itself, which then stops answering the scheduler (heartbeats), and a
    doctor or bench longer than the scheduler's worker-ttl (5 minutes by default) would have the
    worker removed as dead. A coroutine function is awaited on the loop, which stays free."""
    import asyncio

    try:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
    except Exception as exc:
        # as plain data: the exception itself would cross the wire pickled, and a class only
        # the worker can import (pynvml's, a site package's) reaches the client as bytes
        return {RAISED: type(exc).__name__, "message": str(exc)[:2000]}


def node_doctor(quick: bool, run_kernels: bool | None) -> dict[str, Any]:
    """Doctor on this worker's machine: ``{"host", "pid", "report" (DoctorReport.to_dict()),
    "elapsed_s"}``. Kernels run on the worker's GPUs unless ``run_kernels`` is False."""
    t0 = _start()  # the node's own time counts its imports, as a doctor there would
    from gpuprobe.tools.doctor.engine import doctor

    report = doctor(quick, run_kernels=run_kernels)
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "report": report.to_dict(),
        "elapsed_s": round(time.perf_counter() - t0, 3),
    }


def node_bench(
    workloads: tuple[str, ...], backends: tuple[str, ...] | None, quick: bool
) -> dict[str, Any]:
    """The fleet's bench on this worker's devices, nothing saved to its history: ``{"host",
    "pid", "devices" (device -> model), "report" (BenchReport.to_dict()), "elapsed_s"}``. The
    CPU and the GPUs run with :data:`FLEET_SIZES` of their kind."""
    t0 = _start()  # the node's own time counts its imports, as a bench there would
    from dataclasses import replace

    from gpuprobe.platform.inventory import inventory
    from gpuprobe.tools.bench.runner import environment_of, plan, run_bench

    inv = inventory()
    devices = {"cpu": inv.host.cpu_model or "unknown CPU"}
    devices.update({f"cuda:{g.index}": g.name or "unknown GPU" for g in inv.gpus})
    pairs = plan(inv, backends, None)  # a backend not usable here: one line, this node's error
    reports = []
    for kind, devs in (("cpu", ["cpu"]), ("gpu", ["cuda"])):
        fws = sorted({fw for fw, d in pairs if (d == "cpu") == (kind == "cpu")})
        if fws:
            sizes = FLEET_SIZES[kind][0 if quick else 1]
            reports.append(run_bench(workloads, fws, devs, quick, sizes=dict(sizes), save=False,
                                     inventory=inv))  # fmt: skip
    first = reports[0]
    workers = tuple(w for r in reports for w in r.workers)
    report = replace(
        first,
        results=tuple(x for r in reports for x in r.results),
        findings=tuple(f for r in reports for f in r.findings),
        workers=workers,
        environment=environment_of(inv, workers),
        elapsed_s=sum(r.elapsed_s or 0.0 for r in reports),
    )
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "devices": devices,
        "report": report.to_dict(),
        "elapsed_s": round(time.perf_counter() - t0, 3),
    }
