"""``gpuprobe doctor --cluster``: doctor on every worker of a Dask cluster, through the cluster's
own workers (any deployment: LocalCluster, ``dask scheduler`` + ``dask worker`` by hand,
dask-jobqueue, dask-kubernetes; only the scheduler's address is needed), the workers of one
host that report alike collapsed into one row, the nodes grouped by configuration and judged
across the fleet.

Each worker is asked on its own (``Client.run`` for that worker, all at once in threads), so a
worker that dies or hangs is reported lost when its deadline passes and the others' results are
kept."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import time
from collections.abc import Callable
from typing import Any

from gpuprobe.core.errors import InputError
from gpuprobe.tools.doctor.model import DoctorReport
from gpuprobe.tools.fleet.config import node_config
from gpuprobe.tools.fleet.model import ConfigGroup, FleetDoctorReport, NodeResult
from gpuprobe.tools.fleet.node import in_thread, node_doctor
from gpuprobe.tools.fleet.rules import judge_fleet

__all__ = [
    "CONNECT_TIMEOUT_S",
    "NODE_TIMEOUT_S",
    "ask_every_worker",
    "connect",
    "error_status",
    "failure",
    "fleet_doctor",
    "gather",
    "per_worker",
    "worker_label",
    "workers_of",
]

CONNECT_TIMEOUT_S = 10.0  # s a scheduler has to answer before the address is called dead
NODE_TIMEOUT_S = 600.0  # s a worker has for its doctor (full doctor on a big node: ~1 min)

Progress = Callable[[str], None]


def connect(cluster: Any, timeout: float = CONNECT_TIMEOUT_S) -> tuple[Any, bool]:
    """A ``distributed.Client`` for ``cluster`` (a Client, a scheduler address, or
    ``{"scheduler_file": path}``) and whether this call made it (and must close it). The address
    is asked what it is first (:mod:`gpuprobe.platform.cluster`): anything but a Dask scheduler
    answering within ``timeout`` s is one :class:`~gpuprobe.core.errors.UsageError`."""
    if hasattr(cluster, "scheduler_info") and hasattr(cluster, "run"):  # a Client already
        return cluster, False
    from gpuprobe.platform.cluster import connect_client

    flag = "--cluster"
    if isinstance(cluster, dict) and "scheduler_file" in cluster:
        flag = f"--scheduler-file {cluster['scheduler_file']}: the scheduler at"
        address = _scheduler_file_address(str(cluster["scheduler_file"]))
    else:
        address = str(cluster)
    return connect_client(address, timeout, flag, _HINT), True


_HINT = "start one with `dask scheduler` and workers with `dask worker ADDRESS`"


def _scheduler_file_address(path: str) -> str:
    """The address in a scheduler file (``dask scheduler --scheduler-file``, dask-jobqueue):
    read here, so that a file that is not there is one line at once (Dask's own client waits for
    it to appear)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(
            f"--scheduler-file {path}: {e.strerror or e}; give the file the scheduler wrote "
            "(dask scheduler --scheduler-file FILE)"
        ) from None
    except (ValueError, RecursionError) as e:
        raise InputError(f"--scheduler-file {path}: not a scheduler file ({e})") from None
    address = data.get("address") if isinstance(data, dict) else None
    if not isinstance(address, str) or not address:
        raise InputError(f"--scheduler-file {path}: no 'address' in it; is it a scheduler file?")
    return address


def workers_of(client: Any) -> dict[str, dict[str, Any]]:
    """The scheduler's workers: address -> what it knows of each (host, name, nthreads)."""
    info = client.scheduler_info(n_workers=-1)
    workers = dict(info.get("workers", {}))
    if not workers:
        raise InputError(
            f"the scheduler at {client.scheduler.address} has no workers; start some "
            "(dask worker ADDRESS) and run again"
        )
    return workers


def error_status(err: BaseException | str) -> tuple[str, str]:
    text = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
    if "No module named 'gpuprobe" in text or 'No module named "gpuprobe' in text:
        return "no-gpuprobe", "gpuprobe is not importable there"
    lost = ("CommClosedError", "StreamClosedError", "WorkerLost", "TimeoutError", "KilledWorker")
    if any(k in type(err).__name__ or k in text for k in lost) or isinstance(err, OSError):
        return "lost", text
    return "error", f"{type(err).__name__}: {text}" if isinstance(err, BaseException) else text


def _ask(client: Any, address: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    out = client.run(in_thread, fn, *args, workers=[address], on_error="return")
    if address not in out:
        raise OSError(f"worker {address} left the cluster")
    return out[address]


def gather(
    client: Any,
    workers: dict[str, dict[str, Any]],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    node_timeout: float,
    *,
    at_once: bool = True,
) -> dict[str, Any]:
    """``fn(*args)`` on every worker, each asked on its own (``Client.run`` for that worker):
    all at once in threads, or one after the other (``at_once=False``). Each worker's answer, or
    the exception that stands for it: a worker that gives none within ``node_timeout`` s (from
    the start when at once, from its own start when one at a time) is a TimeoutError, the
    others' answers are kept."""
    answers: dict[str, Any] = {}
    # one at a time: a worker is asked when the one before has answered or run out of time (a
    # hung one keeps its thread, so the pool has one per worker)
    pool = cf.ThreadPoolExecutor(max_workers=min(64, len(workers)))
    try:
        deadline = time.monotonic() + node_timeout
        futures = {a: pool.submit(_ask, client, a, fn, args) for a in workers} if at_once else {}
        for addr in workers:
            if not at_once:
                futures[addr] = pool.submit(_ask, client, addr, fn, args)
                deadline = time.monotonic() + node_timeout
            try:
                answers[addr] = futures[addr].result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                answers[addr] = TimeoutError(f"no answer in {node_timeout:g} s")
            except Exception as e:  # a worker's failure is its row's, not the fleet's
                answers[addr] = e
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return answers


def per_worker(
    workers: dict[str, dict[str, Any]], answers: dict[str, Any]
) -> list[tuple[str, str, str, tuple[int, ...], Any]]:
    """(address, the scheduler's host address, the host's name, threads, answer) for each worker,
    by address: a host is named as a worker on it reported (its hostname), else by its address."""
    names: dict[str, str] = {}
    for addr, info in workers.items():
        got = answers.get(addr)
        if isinstance(got, dict) and got.get("host"):
            names.setdefault(str(info.get("host") or addr), str(got["host"]))
    out = []
    for addr, info in sorted(workers.items()):
        ip = str(info.get("host") or addr)
        threads: tuple[int, ...] = (int(info.get("nthreads") or 0),)
        out.append((addr, ip, names.get(ip, ip), threads, answers.get(addr)))
    return out


def failure(got: Any) -> tuple[str, str]:
    """(status, error) of a worker that gave no report."""
    return error_status(got if isinstance(got, BaseException) else "no answer")


def _rows(workers: dict[str, dict[str, Any]], answers: dict[str, Any]) -> list[NodeResult]:
    """One row per host whose workers reported alike, else one per worker."""
    per_host: list[NodeResult] = []
    for addr, _ip, host, threads, got in per_worker(workers, answers):
        row: dict[str, Any] = {"name": host, "host": host, "workers": (addr,), "threads": threads}
        if isinstance(got, dict) and "report" in got:
            report = DoctorReport.from_dict(got["report"])
            row.update(config=node_config(report.inventory, threads), report=report,
                       elapsed_s=got.get("elapsed_s"))  # fmt: skip
        else:
            status, error = failure(got)
            row.update(status=status, error=error)
        per_host.append(NodeResult(**row))
    rows: list[NodeResult] = []
    by_host: dict[str, list[NodeResult]] = {}
    for r in per_host:
        by_host.setdefault(r.host, []).append(r)
    for host, rs in by_host.items():
        alike: dict[tuple[Any, ...], list[NodeResult]] = {}
        for r in rs:
            alike.setdefault(_same(r), []).append(r)
        # the host's largest set of alike workers is the host; any other set is named by its
        # worker (or its count), so that the odd worker of a host stands out
        ordered = sorted(alike.values(), key=lambda g: (-len(g), g[0].workers))
        for i, group in enumerate(ordered):
            if i == 0:
                name = host
            elif len(group) == 1:
                name = f"{host}/{worker_label(group[0].workers[0], workers)}"
            else:
                name = f"{host}/{len(group)} workers"
            rows.append(_collapse(name, host, group))
    return rows


def worker_label(addr: str, workers: dict[str, dict[str, Any]]) -> str:
    """A worker's name as it was started (``dask worker --name``), else its port."""
    name = str(workers.get(addr, {}).get("name", ""))
    return name if name and name != addr and not name.isdigit() else addr.rsplit(":", 1)[-1]


def _collapse(name: str, host: str, rs: list[NodeResult]) -> NodeResult:
    """Workers that reported alike as one row."""
    first = rs[0]
    threads = tuple(t for r in rs for t in r.threads)
    config = dict(first.config)
    if config:
        config["worker threads"] = ", ".join(str(t) for t in sorted(set(threads)))
    return NodeResult(
        name=name,
        host=host,
        workers=tuple(a for r in rs for a in r.workers),
        threads=threads,
        status=first.status,
        error=first.error,
        config=config,
        report=first.report,
        elapsed_s=max((r.elapsed_s or 0.0 for r in rs), default=None),
    )


def _same(r: NodeResult) -> tuple[Any, ...]:
    """What two workers of one host must share to be shown as one row."""
    findings = (
        () if r.report is None else tuple(sorted((f.id, f.status.value) for f in r.report.findings))
    )
    return (r.status, tuple(sorted(r.config.items())), findings)


def _groups(rows: list[NodeResult]) -> tuple[ConfigGroup, ...]:
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for r in rows:
        if r.status == "ok":
            groups.setdefault(tuple(sorted(r.config.items())), []).append(r.name)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1]))
    return tuple(ConfigGroup(config=dict(k), nodes=tuple(v)) for k, v in ordered)


def ask_every_worker(
    cluster: Any,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    what: str,
    *,
    connect_timeout: float,
    node_timeout: float,
    at_once: bool = True,
    progress: Progress | None = None,
) -> tuple[str, dict[str, dict[str, Any]], dict[str, Any]]:
    """Connect to ``cluster`` (:func:`connect`), run ``fn(*args)`` on every worker
    (:func:`gather`) and close what was opened: the scheduler's address, its workers and each
    worker's answer (or the exception that stands for it). ``what`` names the work for
    ``progress``."""
    client, owned = connect(cluster, connect_timeout)
    try:
        workers = workers_of(client)
        if progress:
            how = "" if at_once else ", one at a time"
            progress(f"{what} on {len(workers)} worker(s){how}")
        answers = gather(client, workers, fn, args, node_timeout, at_once=at_once)
        return str(client.scheduler.address), workers, answers
    finally:
        if owned:
            with contextlib.suppress(Exception):
                client.close(timeout=5)


def fleet_doctor(
    cluster: Any,
    *,
    quick: bool = True,
    run_kernels: bool | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    node_timeout: float = NODE_TIMEOUT_S,
    progress: Progress | None = None,
) -> FleetDoctorReport:
    """Doctor on every worker of ``cluster`` (a ``distributed.Client``, a scheduler address, or
    ``{"scheduler_file": path}``), collapsed per host, grouped and judged across nodes."""
    t0 = time.perf_counter()
    address, workers, answers = ask_every_worker(
        cluster, node_doctor, (quick, run_kernels), "doctor", connect_timeout=connect_timeout,
        node_timeout=node_timeout, progress=progress,
    )  # fmt: skip
    rows = _rows(workers, answers)
    return FleetDoctorReport(
        scheduler=address,
        nodes=tuple(rows),
        groups=_groups(rows),
        findings=tuple(judge_fleet(rows)),
        quick=quick,
        elapsed_s=round(time.perf_counter() - t0, 3),
        slowest_node_s=max((r.elapsed_s or 0.0 for r in rows), default=None),
    )
