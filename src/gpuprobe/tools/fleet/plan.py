"""In what order the fleet's work reaches the workers, so that no two measurements on one host
measure each other.

Workers of one host share its CPU, its memory bus, its PCIe links and often its GPUs (dask-cuda
starts one worker per GPU, each seeing every GPU of the host in a rotated
``CUDA_VISIBLE_DEVICES``; a LocalCluster's workers all see the same card). Checks that only read
(doctor's environment) run on every worker at once; what is timed (doctor's kernels, bench) runs
on one worker of a host at a time, hosts at once, as doctor on one machine runs its kernel
checks one after another. Doctor's kernels run once per host and set of checks: a worker whose
checks (each framework on each GPU, by UUID, and the CPU baseline on the cores it may use) are
all among those of a worker already chosen on its host does not run them again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuprobe.platform.inventory import Inventory

__all__ = ["ORDERS", "host_of", "kernel_checks", "kernel_runners", "lanes"]

# "at-once": every worker at once; "per-host": hosts at once, a host's workers one after the
# other; "one-at-a-time": every worker one after the other.
ORDERS = ("at-once", "per-host", "one-at-a-time")


def host_of(addr: str, info: Mapping[str, Any]) -> str:
    """A worker's host as the scheduler knows it (its address), else the worker's address."""
    return str(info.get("host") or addr)


def lanes(workers: Mapping[str, Mapping[str, Any]], order: str) -> list[list[str]]:
    """``workers`` (address -> the scheduler's facts) in lanes: the lanes run at once, the
    workers of a lane one after the other (``order``, one of :data:`ORDERS`)."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: one of {', '.join(ORDERS)}")
    if order == "at-once":
        return [[a] for a in sorted(workers)]
    if order == "one-at-a-time":
        return [sorted(workers)] if workers else []
    by_host: dict[str, list[str]] = {}
    for addr in sorted(workers):
        by_host.setdefault(host_of(addr, workers[addr]), []).append(addr)
    return [by_host[h] for h in sorted(by_host)]


def kernel_checks(inv: Inventory, worker: str) -> frozenset[str]:
    """The kernel checks doctor would run on a worker whose inventory is ``inv``: ``"numpy cpu
    ×16"`` (the CPU with the cores the worker may use), ``"torch GPU-<uuid>"``, ... (a GPU named
    by its UUID, so that two workers that see one card under different CUDA ordinals name it
    alike; a GPU whose UUID neither the framework nor CUDA gives is named by ``worker`` and its
    ordinal, that worker's own)."""
    from gpuprobe.tools.doctor.engine import plan_workers

    cuda = {d.ordinal: d.uuid for d in (inv.cuda.devices if inv.cuda else ())}
    cores = inv.host.usable_cores or inv.host.logical_cores
    out = set()
    for framework, device, _ in plan_workers(inv):
        if not device.startswith("cuda:"):  # a worker pinned to fewer cores times its own CPU
            out.add(f"{framework} {device} ×{cores}")
            continue
        index = int(device.split(":", 1)[1])
        f = inv.framework(framework)
        dev = next((d for d in (f.devices if f else ()) if d.index == index), None)
        uuid = (dev.uuid if dev else None) or cuda.get(index)
        out.add(f"{framework} {uuid or f'{worker} cuda:{index}'}")
    return frozenset(out)


def kernel_runners(candidates: Mapping[str, tuple[str, frozenset[str]]]) -> dict[str, str]:
    """Which worker runs the kernel checks for each candidate (address -> (host, its
    :func:`kernel_checks`)): per host, the workers with the most checks first (then by address),
    a worker runs its own unless they are all among those of a worker already chosen on its
    host, which then covers it. Every candidate -> its runner (a runner -> itself)."""
    by_host: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for addr, (host, checks) in candidates.items():
        by_host.setdefault(host, []).append((addr, checks))
    runner: dict[str, str] = {}
    for ws in by_host.values():
        chosen: list[tuple[str, frozenset[str]]] = []
        for addr, checks in sorted(ws, key=lambda w: (-len(w[1]), w[0])):
            by = next((c for c, cs in chosen if checks <= cs), None)
            if by is None:
                chosen.append((addr, checks))
            runner[addr] = by or addr
    return runner
