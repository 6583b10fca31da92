"""Orchestration of ``gpuprobe bench``: check what was asked for against this machine, run each
framework on each device in its own child process (:mod:`gpuprobe.tools.bench.worker`), one after
another so they don't compete for the card or the cores, set each figure against the hardware's
peak, judge, save to the local history and compare with the last run.

Times in seconds.
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import replace
from typing import Any

from gpuprobe.core.errors import UsageError
from gpuprobe.platform.frameworks.devices import CudaHere, cuda_refusal
from gpuprobe.platform.frameworks.devices import parse as parse_device
from gpuprobe.platform.hardware.load import HostLoad
from gpuprobe.platform.hardware.types import Gpu
from gpuprobe.platform.inventory import Inventory
from gpuprobe.platform.proc import child_env, python_module
from gpuprobe.tools.bench.model import BenchReport, BenchResult, Environment, WorkerRun
from gpuprobe.tools.bench.workloads import NAMES, Settings, by_name

__all__ = [
    "ALL_BACKENDS",
    "Progress",
    "add_peaks",
    "environment_of",
    "plan",
    "run_bench",
    "validate_workloads",
]

ALL_BACKENDS: tuple[str, ...] = ("numpy", "torch", "cupy", "jax")
WORKER_TIMEOUT_S = (3600.0, 300.0)  # a child process is stopped after this (full, quick)

Progress = Callable[[str, int, int], None]  # (what runs now, steps done, steps in all)
_CHOICES = {
    "--backend": f"choose from {', '.join(ALL_BACKENDS)}, or leave --backend out for all here",
    "--device": "use cpu, cuda:N or cuda, or leave --device out for all here",
}


MAX_BUDGET_S = 60.0  # s of repetitions per measurement: --budget's top (a budget of inf never ends)


def _split(values: Iterable[str] | None, option: str = "") -> list[str]:
    out: list[str] = []
    for v in values or ():
        parts = [p.strip() for p in v.split(",") if p.strip()]
        if not parts and option:  # --backend '' names nothing: not "all of them"
            raise UsageError(f"{option} {v!r} names nothing; {_CHOICES[option]}")
        out.extend(parts)
    return out


def validate_workloads(names: Iterable[str] | None) -> tuple[str, ...]:
    """The workloads to run, in their usual order (all of them when none are named)."""
    asked = _split(names)
    bad = [n for n in asked if n not in NAMES]
    if bad:
        raise UsageError(f"unknown workload {bad[0]!r}; choose from {', '.join(NAMES)}")
    return tuple(w for w in NAMES if not asked or w in asked)


def _framework_devices(inv: Inventory) -> dict[str, list[str]]:
    """Each usable framework and the devices it can run on here."""
    out: dict[str, list[str]] = {"numpy": ["cpu"]}
    for name in ("torch", "cupy", "jax"):
        info = inv.framework(name)
        if info is None or not info.installed or info.importable is False:
            continue
        devices = [] if name == "cupy" else ["cpu"]
        devices.extend(f"cuda:{d.index}" for d in info.devices)
        if devices:
            out[name] = devices
    return out


def _cuda_here(inv: Inventory) -> CudaHere:
    """What the inventory says about CUDA here, for the line that refuses a ``cuda`` device."""
    torch = inv.framework("torch")
    installed = torch is not None and torch.installed
    return CudaHere(
        gpus=len(inv.gpus) or len(inv.pci_nvidia),
        driver_cuda=inv.driver.cuda_driver_version,
        ccs=tuple(cc for g in inv.gpus if (cc := g.cc) is not None),
        torch_version=torch.version if torch is not None and installed else None,
        torch_cuda=None if torch is None or torch.cpu_only_build else torch.cuda_version,
    )


def plan(
    inv: Inventory, backends: Iterable[str] | None, devices: Iterable[str] | None
) -> list[tuple[str, str]]:
    """(framework, device) pairs to run; a clear UsageError for names that are wrong or not
    here."""
    usable = _framework_devices(inv)
    here = sorted({d for ds in usable.values() for d in ds}, key=lambda d: (d != "cpu", d))
    asked_b = _split(backends, "--backend")
    for b in asked_b:
        if b not in ALL_BACKENDS:
            raise UsageError(f"unknown backend {b!r}; choose from {', '.join(ALL_BACKENDS)}")
        if b not in usable:
            raise UsageError(
                f"backend {b!r} is not usable here (not installed, or it sees no device it runs "
                f"on); backends here: {', '.join(usable)}"
            )
    asked_d = _split(devices, "--device")
    gpus = [x for x in here if x.startswith("cuda:")]
    expanded: list[str] = []
    for d in asked_d:
        parse_device(d)  # cpu, cuda or cuda:N, else one line naming them
        if d.startswith("cuda") and not gpus:
            raise UsageError(cuda_refusal(d, _cuda_here(inv)) or f"{d}: no framework sees it")
        if d == "cuda":
            expanded.extend(gpus)
        elif d not in here:
            raise UsageError(
                f"device {d!r} is not on this machine; devices here: {', '.join(here)}"
            )
        else:
            expanded.append(d)
    pairs = [
        (fw, dev)
        for fw in (asked_b or list(usable))
        for dev in usable[fw]
        if not expanded or dev in expanded
    ]
    if not pairs:
        raise UsageError(
            f"none of the backends {', '.join(asked_b or usable)} runs on "
            f"{', '.join(expanded)}; numpy runs on cpu only, cupy on cuda only"
        )
    return pairs


def _peers(inv: Inventory, framework: str, device: str) -> tuple[str, ...]:
    return tuple(
        d
        for d in _framework_devices(inv).get(framework, [])
        if d.startswith("cuda") and d != device
    )


class _Collector:
    """Gathers one worker's events; tells the progress callback when a workload starts."""

    def __init__(self, label: str, on_start: Callable[[str], None]) -> None:
        self.label = label
        self.on_start = on_start
        self.results: list[BenchResult] = []
        self.environment: dict[str, Any] = {}
        self.errors: list[str] = []
        self.done = False

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "result":
            self.results.append(BenchResult.from_dict(event["result"]))
        elif kind == "environment":
            self.environment = dict(event.get("environment") or {})
        elif kind == "start":
            self.on_start(str(event.get("workload")))
        elif kind == "error":
            self.errors.append(str(event.get("error")))
        elif kind == "workload-error":
            self.errors.append(f"{event.get('workload')}: {event.get('error')}")
        elif kind == "done":
            self.done = True


def _run_child(
    framework: str,
    device: str,
    workloads: Sequence[str],
    settings: Settings,
    collect: _Collector,
    timeout_s: float,
) -> None:
    cmd = python_module(
        "gpuprobe.tools.bench.worker",
        framework,
        device,
        ",".join(workloads),
        json.dumps(settings.to_dict()),
    )
    env = child_env(XLA_PYTHON_CLIENT_PREALLOCATE="false")
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    collect(json.loads(line))
                except (json.JSONDecodeError, TypeError, ValueError, KeyError):
                    continue  # a library printed to stdout: not ours
            proc.wait()
        finally:
            timer.cancel()
        if not collect.done and not collect.errors:
            err.seek(0)
            tail = (err.read().strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            if not timer.is_alive() and proc.returncode in (-9, 137):
                tail = f"stopped after {timeout_s:.0f} s"
            collect.errors.append(f"the worker died: {tail}")


def _gpu_for(inv: Inventory, env: dict[str, Any], device: str) -> Gpu | None:
    uuid = env.get("uuid")
    g = next((g for g in inv.gpus if uuid and g.uuid == uuid), None)
    if g is None and device.startswith("cuda:"):
        index = int(device.partition(":")[2])
        g = inv.gpus[index] if index < len(inv.gpus) and not uuid else None
    return g


def add_peaks(
    results: Iterable[BenchResult], inv: Inventory, envs: dict[tuple[str, str], dict[str, Any]]
) -> list[BenchResult]:
    """Each GPU figure with ``peak`` (its workload's: the spec's TFLOP/s or GB/s, the PCIe link
    for host↔device copies, the memory for the rest) and ``pct_peak``; CPU figures have no spec
    peak here."""
    out = []
    for r in results:
        g = (
            _gpu_for(inv, envs.get((r.framework, r.device), {}), r.device)
            if r.device != "cpu"
            else None
        )
        w = by_name(r.workload)
        rate = r.values.get(w.rate if w is not None else "gbs")
        peak = (
            w.peak(r, g)
            if w is not None and w.peak is not None and g is not None and r.ok
            else None
        )
        if peak and rate is not None:
            r = replace(r, values={**r.values, "peak": peak, "pct_peak": 100.0 * rate / peak})
        out.append(r)
    return out


def environment_of(inv: Inventory, workers: Sequence[WorkerRun]) -> Environment:
    """The machine and software the run depends on, for the history and its comparisons."""
    frameworks: dict[str, str] = {}
    blas = threads = None
    for w in workers:
        v = w.environment.get("version")
        if v is not None:
            frameworks[w.framework] = str(v)
        if w.framework == "numpy":
            blas = w.environment.get("blas")
            threads = w.environment.get("threads")
    return Environment(
        hostname=inv.host.hostname,
        cpu=inv.host.cpu_model,
        gpus=tuple(f"{g.name} {g.uuid}" for g in inv.gpus),
        driver=inv.driver.driver_version,
        cuda_driver=inv.driver.cuda_driver_version,
        frameworks=frameworks,
        blas=str(blas) if blas is not None else None,
        threads=int(threads) if isinstance(threads, (int, float)) else None,
    )


def run_bench(
    workloads: Iterable[str] | None = None,
    backends: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    quick: bool = False,
    *,
    budget_s: float | None = None,
    rep_limit_s: float | None = None,
    sizes: dict[str, Sequence[int]] | None = None,
    isolate: bool = True,
    save: bool = True,
    compare: bool = False,
    inventory: Inventory | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Benchmark this machine.

    ``workloads``: names from ``expression, scale, matmul, transfer, launch, crossover, sync,
    multi`` (all when None). ``backends``: ``numpy, torch, cupy, jax`` (every one usable here when
    None). ``devices``: ``cpu``, ``cuda:N`` or ``cuda`` (all here when None). ``quick``: small
    sizes and short budgets (under a minute on a laptop).

    ``budget_s``: seconds of repetitions per measurement; ``rep_limit_s``: sizes whose one
    repetition would take longer are skipped; ``sizes``: per workload, the sizes to run instead of
    the defaults (``{"matmul": (64, 256)}``; ``crossover-matmul`` for the crossover's matmul).
    ``isolate``: each framework in its own process (the default; False runs in this one).
    ``save``: store the results in the local history; ``compare``: set them against the previous
    run on this machine. ``progress(label, done, total)`` is called as workloads start.
    ``inventory``: the machine, if already read.
    """
    from gpuprobe.tools.bench.rules import judge

    names = validate_workloads(workloads)
    if budget_s is not None and not 0 < budget_s <= MAX_BUDGET_S:  # refuses inf and nan too
        raise UsageError(f"budget {budget_s} s: give more than 0 and at most {MAX_BUDGET_S:g} s")
    if inventory is None:
        from gpuprobe.platform.inventory import inventory as read_inventory

        inventory = read_inventory()
    pairs = plan(inventory, backends, devices)
    if save or compare:  # a folder the history cannot be written in is said before measuring
        from gpuprobe.tools.bench.history import check_writable

        check_writable()
    t0 = time.perf_counter()
    total = len(pairs) * len(names)
    done = 0
    results: list[BenchResult] = []
    workers: list[WorkerRun] = []
    for framework, device in pairs:
        settings = Settings(
            quick=quick,
            budget_s=budget_s,
            rep_limit_s=rep_limit_s,
            sizes={k: tuple(v) for k, v in (sizes or {}).items()},
            peers=_peers(inventory, framework, device),
        )
        label = f"{framework} {device}"

        def on_start(workload: str, label: str = label) -> None:
            nonlocal done
            if progress is not None:
                progress(f"{label}: {workload}", done, total)
            done += 1

        collect = _Collector(label, on_start)
        started = time.perf_counter()
        load = HostLoad(children=isolate)
        if isolate:
            _run_child(framework, device, names, settings, collect, WORKER_TIMEOUT_S[int(quick)])
        else:
            from gpuprobe.tools.bench.worker import run_worker

            run_worker(framework, device, names, settings, collect)
        done = max(done, (pairs.index((framework, device)) + 1) * len(names))
        results.extend(collect.results)
        workers.append(
            WorkerRun(
                framework,
                device,
                environment=collect.environment,
                error="; ".join(collect.errors) or None,
                elapsed_s=time.perf_counter() - started,
                others_cores=load.others_cores(),
            )
        )
    if progress is not None:
        progress("judging", total, total)
    envs = {(w.framework, w.device): w.environment for w in workers}
    results = add_peaks(results, inventory, envs)
    report = BenchReport(
        workloads=names,
        quick=quick,
        results=tuple(results),
        findings=tuple(judge(results, workers, inventory)),
        workers=tuple(workers),
        environment=environment_of(inventory, workers),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        elapsed_s=time.perf_counter() - t0,
    )
    if save or compare:
        from gpuprobe.tools.bench.history import Store, StoreError

        try:  # the measured report comes first: a history that cannot be used is a note
            with closing(Store()) as store:
                previous = store.last_run(report.environment.hostname) if compare else None
                if save:
                    report = replace(report, run_id=store.save(report))
                if compare:
                    report = replace(report, comparison=store.compare(report, previous))
        except StoreError as exc:
            what = "saved" if save else "read"
            report = replace(report, history_note=f"the history could not be {what}: {exc.message}")
    return report
