"""``gpuprobe doctor --cluster``: doctor on every worker of a Dask cluster, through the cluster's
own workers (any deployment: LocalCluster, ``dask scheduler`` + ``dask worker`` by hand,
dask-jobqueue, dask-kubernetes; only the scheduler's address is needed), the workers of one
host that report alike collapsed into one row, the nodes grouped by configuration and judged
across the fleet.

Two phases, so that no check measures another (:mod:`.plan`): the environment (frameworks,
versions, the GPUs each worker's frameworks see, its threads) on every worker at once, no
kernels; then the kernel checks on one worker per host and set of checks, a host's one after
the other, hosts at once. Each worker is asked on its own (``Client.run`` for that worker, in
threads), so a worker that dies or hangs is reported lost when its deadline passes and the
others' results are kept."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpuprobe.core.errors import InputError
from gpuprobe.core.records import Record
from gpuprobe.core.text import strip_control
from gpuprobe.tools.doctor.model import DoctorReport
from gpuprobe.tools.fleet.config import node_config
from gpuprobe.tools.fleet.model import ConfigGroup, FleetDoctorReport, NodeResult
from gpuprobe.tools.fleet.node import RAISED, in_thread, node_doctor
from gpuprobe.tools.fleet.plan import host_of, kernel_checks, kernel_runners, lanes
from gpuprobe.tools.fleet.rules import judge_fleet

__all__ = [
    "CONNECT_TIMEOUT_S",
    "NODE_TIMEOUT_S",
    "BadAnswer",
    "WorkerRaised",
    "ask_every_worker",
    "check_scheduler",
    "connect",
    "error_status",
    "failure",
    "fleet_doctor",
    "gather",
    "per_worker",
    "read_reports",
    "session",
    "worker_label",
    "workers_of",
]

CONNECT_TIMEOUT_S = 10.0  # s a scheduler has to answer before the address is called dead
NODE_TIMEOUT_S = 600.0  # s a worker has for its doctor (full doctor on a big node: ~1 min)

Progress = Callable[[str], None]
R = TypeVar("R", bound=Record)


def connect(cluster: Any, timeout: float = CONNECT_TIMEOUT_S) -> tuple[Any, bool]:
    """A ``distributed.Client`` for ``cluster`` (a Client, a scheduler address, or
    ``{"scheduler_file": path}``) and whether this call made it (and must close it). The address
    is asked what it is first (:mod:`gpuprobe.platform.cluster`): anything but a Dask scheduler
    answering within ``timeout`` s is one :class:`~gpuprobe.core.errors.UsageError`."""
    from gpuprobe.platform.cluster import connect_cluster

    return connect_cluster(cluster, timeout, _HINT)


_HINT = "start one with `dask scheduler` and workers with `dask worker ADDRESS`"


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


class BadAnswer(Exception):
    """A worker's answer that is not what it was asked for (a report that does not read back):
    that worker's error, not the fleet's."""


class WorkerRaised(Exception):
    """What a worker's function raised there, as its type's name and message
    (:func:`~gpuprobe.tools.fleet.node.in_thread`)."""


def error_status(err: BaseException | str) -> tuple[str, str]:
    if isinstance(err, BadAnswer | WorkerRaised) and "No module named 'gpuprobe" not in str(err):
        return "error", " ".join(strip_control(str(err)).split())[:500]
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
    got = out[address]
    if isinstance(got, dict) and RAISED in got:
        raise WorkerRaised(f"{got[RAISED]}: {got.get('message')}")
    return got


def gather(
    client: Any,
    lanes: list[list[str]],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    node_timeout: float,
) -> dict[str, Any]:
    """``fn(*args)`` on the workers of ``lanes`` (:func:`~gpuprobe.tools.fleet.plan.lanes`), each
    asked on its own (``Client.run`` for that worker): the lanes at once, the workers of a lane
    one after the other. Each worker's answer, or the exception that stands for it: a worker
    that gives none within ``node_timeout`` s from its own start is a TimeoutError (its lane goes
    on with the next worker), the others' answers are kept.

    Every ask and every lane is a daemon thread, and this thread waits in short joins: Ctrl-C
    or SIGTERM (a KeyboardInterrupt or the CLI's stop, raised here) ends the wait at once, and
    the process exits without waiting for a worker that hangs (a thread pool's threads are
    joined at exit, so a hung worker held the first Ctrl-C, and its lanes ran on for 22 s)."""
    answers: dict[str, Any] = {}

    def ask(addr: str, box: list[Any], done: threading.Event) -> None:
        try:
            box.append(_ask(client, addr, fn, args))
        except Exception as e:  # a worker's failure is its row's, not the fleet's
            box.append(e)
        done.set()

    def run(lane: list[str]) -> None:
        for addr in lane:
            box: list[Any] = []
            done = threading.Event()
            _daemon(ask, addr, box, done)
            if done.wait(node_timeout) and box:
                answers[addr] = box[0]
            else:
                answers[addr] = TimeoutError(f"no answer in {node_timeout:g} s")

    for t in [_daemon(run, lane) for lane in lanes]:
        while t.is_alive():
            t.join(_WAIT_STEP_S)
    return answers


_WAIT_STEP_S = 0.2  # s between two looks at the lanes: how soon a signal is acted on


def _daemon(target: Callable[..., None], *args: Any) -> threading.Thread:
    t = threading.Thread(target=target, args=args, name="gpuprobe-fleet-ask", daemon=True)
    t.start()
    return t


def per_worker(
    workers: dict[str, dict[str, Any]], answers: dict[str, Any]
) -> list[tuple[str, str, str, tuple[int, ...], Any]]:
    """(address, the scheduler's host address, the host's name, threads, answer) for each worker,
    by address: a host is named as a worker on it reported (its hostname), else by its address."""
    names: dict[str, str] = {}
    for addr, info in workers.items():
        got = answers.get(addr)
        if isinstance(got, dict) and got.get("host"):
            names.setdefault(host_of(addr, info), str(got["host"]))
    out = []
    for addr, info in sorted(workers.items()):
        ip = host_of(addr, info)
        threads: tuple[int, ...] = (int(info.get("nthreads") or 0),)
        out.append((addr, ip, names.get(ip, ip), threads, answers.get(addr)))
    return out


def failure(got: Any) -> tuple[str, str]:
    """(status, error) of a worker that gave no report."""
    return error_status(got if isinstance(got, BaseException) else "no answer")


def _answered(got: Any) -> bool:
    return isinstance(got, dict) and "report" in got


def read_reports(
    answers: dict[str, Any], record: type[R], what: str
) -> tuple[dict[str, Any], dict[str, R | None]]:
    """Each worker's answer read once: (the answers, with any that is not ``what`` — a report
    of type ``record`` that reads back, a host name, a time — replaced by a :class:`BadAnswer`
    saying why; the report of each, None for one that gave none). One malformed answer is its
    worker's error; the other workers' reports are kept."""
    checked: dict[str, Any] = {}
    reports: dict[str, R | None] = {}
    for addr, got in answers.items():
        report = None
        if _answered(got):
            try:
                report = record.from_dict(got["report"])
                if not isinstance(got.get("host", ""), str):
                    raise TypeError(f"host: {type(got['host']).__name__}, not a name")
                float(got.get("elapsed_s") or 0.0)
            except Exception as exc:
                report = None
                why = strip_control(f"{type(exc).__name__}: {exc}")[:200]
                got = BadAnswer(f"its answer is not a {what} ({why})")
        elif not isinstance(got, BaseException):
            got = BadAnswer(f"its answer is not a {what} (a {type(got).__name__})")
        checked[addr], reports[addr] = got, report
    return checked, reports


def _findings(report: DoctorReport | None) -> tuple[tuple[str, str], ...]:
    return () if report is None else tuple(sorted((f.id, f.status.value) for f in report.findings))


def _worker_row(
    fact: tuple[str, str, str, tuple[int, ...], Any],
    workers: dict[str, dict[str, Any]],
    reports: tuple[dict[str, DoctorReport | None], dict[str, DoctorReport | None]],
    kernels: dict[str, Any],
    runner: str | None,
) -> tuple[tuple[Any, ...], NodeResult]:
    """One worker's row (``fact`` as :func:`per_worker` gives it; ``reports``: the environment's
    and the kernel runs' reports by worker; ``runner``: the worker whose kernel checks stand for
    it, None when none were asked) and what it must share with another worker of its host to be
    shown in one row: its environment and the kernel checks' findings that stand for it."""
    addr, _ip, host, threads, got = fact
    row: dict[str, Any] = {"name": host, "host": host, "workers": (addr,), "threads": threads}
    env = reports[0].get(addr)
    ran = kernels.get(runner) if runner else None
    full = reports[1].get(runner) if runner else None
    if env is None:
        status, error = failure(got)
        row.update(status=status, error=error)
    else:
        row.update(config=node_config(env.inventory, threads), report=env,
                   elapsed_s=got.get("elapsed_s"))  # fmt: skip
        if runner is None:
            row.update(kernels_note="not run (no kernels asked)")
        elif runner != addr:
            failed = "" if full else f", whose run failed: {failure(ran)[1]}"
            by = worker_label(runner, workers)
            row.update(kernels_by=(by,), kernels_note=f"covered by worker {by}{failed}")
        elif full is not None:  # its time: the environment's here, the kernels' in _collapse
            by = worker_label(addr, workers)
            row.update(report=full, kernels_on=(addr,), kernels_by=(by,),
                       kernels_note=f"ran on worker {by}")  # fmt: skip
        else:
            status, error = failure(ran)
            row.update(status=status, error=f"in the kernel checks: {error}", report=None)
    r = NodeResult(**row)
    # workers that failed alike share a row; each with an error of its own has its own
    key = (r.status, r.error, tuple(sorted(r.config.items())), _findings(env), _findings(full))
    return key, r


def _rows(
    workers: dict[str, dict[str, Any]],
    env: dict[str, Any],
    kernels: dict[str, Any],
    runner_of: dict[str, str],
    env_reports: dict[str, DoctorReport | None],
) -> list[NodeResult]:
    """One row per host whose workers reported alike (:func:`_worker_row`), else one per
    worker. ``env``: each worker's environment answer (``env_reports``: their reports);
    ``kernels``: each kernel runner's full doctor; ``runner_of``: each worker -> the worker
    whose kernels stand for it."""
    kernels, kernel_reports = read_reports(kernels, DoctorReport, "doctor report")
    kernel_s = {a: float(k.get("elapsed_s") or 0.0) for a, k in kernels.items() if _answered(k)}
    reports = (env_reports, kernel_reports)
    per_host = [_worker_row(f, workers, reports, kernels, runner_of.get(f[0]))
                for f in per_worker(workers, env)]  # fmt: skip
    rows: list[NodeResult] = []
    by_host: dict[str, dict[tuple[Any, ...], list[NodeResult]]] = {}
    for key, r in per_host:
        by_host.setdefault(r.host, {}).setdefault(key, []).append(r)
    for host, alike in by_host.items():
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
            rows.append(_collapse(name, host, group, kernel_s))
    return rows


def worker_label(addr: str, workers: dict[str, dict[str, Any]]) -> str:
    """A worker's name as it was started (``dask worker --name``), else its port."""
    name = str(workers.get(addr, {}).get("name", ""))
    return name if name and name != addr and not name.isdigit() else addr.rsplit(":", 1)[-1]


def _collapse(name: str, host: str, rs: list[NodeResult], kernel_s: dict[str, float]) -> NodeResult:
    """Workers that reported alike as one row, with the report of a worker of theirs that ran
    the kernel checks, if any did. Its time: its workers' environment (read at once), then its
    kernel runs (``kernel_s``: each runner's, one after the other)."""
    first = next((r for r in rs if r.kernels_on), rs[0])
    ran = [by for r in rs if r.kernels_on for by in r.kernels_by]
    note = f"ran on worker{'s' * (len(ran) > 1)} {', '.join(ran)}" if ran else first.kernels_note
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
        elapsed_s=round(
            max(r.elapsed_s or 0.0 for r in rs)
            + sum(kernel_s.get(a, 0.0) for r in rs for a in r.kernels_on),
            3,
        ),
        kernels_on=tuple(a for r in rs for a in r.kernels_on),
        kernels_by=tuple(ran) or first.kernels_by,
        kernels_note=note,
    )


def _groups(rows: list[NodeResult]) -> tuple[ConfigGroup, ...]:
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for r in rows:
        if r.status == "ok":
            groups.setdefault(tuple(sorted(r.config.items())), []).append(r.name)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1]))
    return tuple(ConfigGroup(config=dict(k), nodes=tuple(v)) for k, v in ordered)


@contextlib.contextmanager
def session(cluster: Any, connect_timeout: float) -> Iterator[tuple[Any, str, dict[str, Any]]]:
    """The client (:func:`connect`), the scheduler's address and its workers
    (:func:`workers_of`); a client opened here is closed on the way out, in at most
    :data:`~gpuprobe.platform.cluster.CLOSE_TIMEOUT_S` (half a second after Ctrl-C or
    SIGTERM). Dask's own loggers are quiet meanwhile (:func:`~gpuprobe.platform.cluster.
    quiet_dask`): what went wrong is said in gpuprobe's words."""
    from gpuprobe.platform.cluster import (
        CLOSE_INTERRUPTED_S,
        CLOSE_TIMEOUT_S,
        close_client,
        quiet_dask,
    )

    with quiet_dask() as keep_quiet:
        client, owned = connect(cluster, connect_timeout)
        limit = CLOSE_INTERRUPTED_S
        try:
            yield client, str(client.scheduler.address), workers_of(client)
            limit = CLOSE_TIMEOUT_S
        except Exception as exc:
            from gpuprobe.platform.cluster import SchedulerLost

            limit = CLOSE_INTERRUPTED_S if isinstance(exc, SchedulerLost) else CLOSE_TIMEOUT_S
            raise
        finally:  # a KeyboardInterrupt or the CLI's stop: closed in half a second at most
            if owned and not close_client(client, limit):
                keep_quiet()  # its thread goes on (reconnecting): its logs are not the user's


def check_scheduler(address: str, workers: dict[str, Any], answers: dict[str, Any]) -> None:
    """A :class:`~gpuprobe.platform.cluster.SchedulerLost` naming the scheduler when workers'
    answers were lost and the scheduler no longer answers: it died, not they."""
    if not any(isinstance(g, BaseException) and failure(g)[0] == "lost" for g in answers.values()):
        return
    from gpuprobe.platform.cluster import SchedulerLost, scheduler_gone

    why = scheduler_gone(address)
    if why is not None:
        answered = sum(1 for g in answers.values() if not isinstance(g, BaseException))
        raise SchedulerLost(
            f"the scheduler at {address} went away during the run ({why}); "
            f"{answered} of {len(workers)} worker(s) had answered. Start it again "
            "(dask scheduler) and its workers, then run this again"
        )


_HOW = {"at-once": "", "per-host": ", a host's one at a time", "one-at-a-time": ", one at a time"}


def ask_every_worker(
    cluster: Any,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    what: str,
    *,
    connect_timeout: float,
    node_timeout: float,
    order: str = "at-once",
    progress: Progress | None = None,
) -> tuple[str, dict[str, dict[str, Any]], dict[str, Any]]:
    """Connect to ``cluster`` (:func:`session`), run ``fn(*args)`` on every worker in ``order``
    (:data:`~gpuprobe.tools.fleet.plan.ORDERS`, :func:`gather`) and close what was opened: the
    scheduler's address, its workers and each worker's answer (or the exception that stands for
    it). ``what`` names the work for ``progress``."""
    with session(cluster, connect_timeout) as (client, address, workers):
        if progress:
            progress(f"{what} on {len(workers)} worker(s){_HOW[order]}")
        answers = gather(client, lanes(workers, order), fn, args, node_timeout)
        check_scheduler(address, workers, answers)
        return address, workers, answers


def _runners(
    workers: dict[str, dict[str, Any]], reports: dict[str, DoctorReport | None]
) -> dict[str, str]:
    """Each worker that reported its environment -> the worker whose kernel checks stand for
    it (:func:`~gpuprobe.tools.fleet.plan.kernel_runners`)."""
    return kernel_runners({
        addr: (host_of(addr, workers[addr]), kernel_checks(report.inventory, addr))
        for addr, report in reports.items() if report is not None
    })  # fmt: skip


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
    ``{"scheduler_file": path}``): the environment on every worker at once, then (unless
    ``run_kernels`` is False) the kernel checks on one worker per host and set of checks, a
    host's one after the other (:mod:`.plan`); collapsed per host, grouped and judged across
    nodes. ``node_timeout``: the seconds each worker has for each answer."""
    t0 = time.perf_counter()
    with session(cluster, connect_timeout) as (client, address, workers):
        if progress:
            progress(f"environment on {len(workers)} worker(s)")
        env = gather(client, lanes(workers, "at-once"), node_doctor, (quick, False), node_timeout)
        check_scheduler(address, workers, env)
        env, env_reports = read_reports(env, DoctorReport, "doctor report")
        runner_of = {} if run_kernels is False else _runners(workers, env_reports)
        kernels: dict[str, Any] = {}
        if runner_of:
            todo = {a: workers[a] for a in set(runner_of.values())}
            if progress:
                progress(f"kernels on {len(todo)} worker(s){_HOW['per-host']}")
            kernels = gather(client, lanes(todo, "per-host"), node_doctor, (quick, True),
                             node_timeout)  # fmt: skip
            check_scheduler(address, todo, kernels)
    rows = _rows(workers, env, kernels, runner_of, env_reports)
    return FleetDoctorReport(
        scheduler=address,
        nodes=tuple(rows),
        groups=_groups(rows),
        findings=tuple(judge_fleet(rows)),
        quick=quick,
        elapsed_s=round(time.perf_counter() - t0, 3),
        slowest_node_s=max((r.elapsed_s or 0.0 for r in rows), default=None),
    )
