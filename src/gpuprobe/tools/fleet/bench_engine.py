"""``gpuprobe bench --cluster``: the same short bench (:data:`~gpuprobe.tools.fleet.node.
FLEET_WORKLOADS` at :data:`~gpuprobe.tools.fleet.node.FLEET_SIZES`) on every worker of a Dask
cluster, through the cluster's own workers as ``doctor --cluster`` does (:mod:`.engine`): hosts
at once, the workers of one host one after the other (they share its CPU, memory, PCIe links
and often its GPUs, and would measure each other), or every worker one after the other
(``one_at_a_time``: hosts that share a network or a PCIe switch); each node's figures set beside
those of the nodes with the same model of device and the outliers named (:mod:`.bench_rules`).

A row per worker, not per host: workers of one host often own one GPU each (dask-cuda)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from gpuprobe.tools.bench.model import BenchReport
from gpuprobe.tools.fleet.bench_rules import compare, judge_bench
from gpuprobe.tools.fleet.engine import (
    CONNECT_TIMEOUT_S,
    NODE_TIMEOUT_S,
    ask_every_worker,
    failure,
    per_worker,
    read_reports,
    worker_label,
)
from gpuprobe.tools.fleet.model import FleetBenchReport, NodeBench
from gpuprobe.tools.fleet.node import FLEET_WORKLOADS, node_bench

__all__ = ["fleet_bench"]

Progress = Callable[[str], None]


def _rows(workers: dict[str, dict[str, Any]], answers: dict[str, Any]) -> list[NodeBench]:
    """One row per worker, named by its host (and the worker, where a host runs several)."""
    answers, reports = read_reports(answers, BenchReport, "bench report")
    facts = per_worker(workers, answers)
    per_ip = Counter(ip for _, ip, _, _, _ in facts)
    rows = []
    for addr, ip, host, threads, got in facts:
        name = host if per_ip[ip] == 1 else f"{host}/{worker_label(addr, workers)}"
        report = reports.get(addr)
        if report is not None:
            devices = got.get("devices")
            rows.append(NodeBench(
                name=name, host=host, workers=(addr,), threads=threads,
                devices={str(k): str(v) for k, v in devices.items()} if isinstance(devices, dict)
                else {},
                report=report, elapsed_s=got.get("elapsed_s"),
            ))  # fmt: skip
        else:
            status, error = failure(got)
            rows.append(NodeBench(name=name, host=host, workers=(addr,), threads=threads,
                                  status=status, error=error))  # fmt: skip
    return sorted(rows, key=lambda r: r.name)


def fleet_bench(
    cluster: Any,
    workloads: Iterable[str] | None = None,
    backends: Iterable[str] | None = None,
    *,
    quick: bool = True,
    one_at_a_time: bool = False,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    node_timeout: float = NODE_TIMEOUT_S,
    progress: Progress | None = None,
) -> FleetBenchReport:
    """The fleet's bench on every worker of ``cluster`` (a ``distributed.Client``, a scheduler
    address, or ``{"scheduler_file": path}``), compared like with like and judged
    (:func:`gpuprobe.fleet_bench`)."""
    from gpuprobe.core.errors import UsageError
    from gpuprobe.tools.bench.runner import ALL_BACKENDS, validate_workloads

    names = validate_workloads(workloads) if workloads else FLEET_WORKLOADS
    asked = tuple(b.strip() for v in backends or () for b in v.split(",") if b.strip()) or None
    for b in asked or ():  # a name wrong everywhere is one line here, not an error per node
        if b not in ALL_BACKENDS:
            raise UsageError(f"unknown backend {b!r}; choose from {', '.join(ALL_BACKENDS)}")
    t0 = time.perf_counter()
    address, workers, answers = ask_every_worker(
        cluster, node_bench, (names, asked, quick), "bench", connect_timeout=connect_timeout,
        node_timeout=node_timeout, order="one-at-a-time" if one_at_a_time else "per-host",
        progress=progress,
    )  # fmt: skip
    rows = _rows(workers, answers)
    points = compare(rows)
    return FleetBenchReport(
        scheduler=address,
        workloads=tuple(names),
        quick=quick,
        one_at_a_time=one_at_a_time,
        nodes=tuple(rows),
        points=tuple(points),
        findings=tuple(judge_bench(rows, points)),
        elapsed_s=round(time.perf_counter() - t0, 3),
        slowest_node_s=max((r.elapsed_s or 0.0 for r in rows), default=None),
    )
