"""The Dask engine: which cluster a solve runs on, how its BLAS threads are set, and teardown.

- No client and no scheduler: a ``LocalCluster`` sized to this machine: one worker per core, one
  task thread each, BLAS threads = cores / (workers × task threads), so nothing is
  oversubscribed. By default its workers are threads of this process (``processes=False``): the
  solvers' work is BLAS/LAPACK, which releases the GIL, and in-memory inputs are then shared
  without a copy.
- On GPUs (``devices="gpu"`` or a list of device ids, or CuPy inputs): one worker per GPU, with
  dask-cuda's ``LocalCUDACluster`` and its memory settings (dask-cuda's docs and issues #859,
  #986, #1075): a device memory limit below the card, RMM's asynchronous
  pool that gives memory back above a threshold, and CuPy routed through RMM.
- ``client=`` or ``scheduler="tcp://…"``: an existing cluster, left as it was found.

After a failed solve :func:`release_memory` runs on every worker: the garbage collector, CuPy's
memory pools, ``malloc_trim`` (dask-cuda#725 and cudf#9232: a kept traceback holds device buffers).

Times in this module are seconds.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import inspect
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuprobe.core.errors import UsageError
from gpuprobe.core.records import Record
from gpuprobe.core.units import NA, gib
from gpuprobe.platform.cluster import CONNECT_TIMEOUT_S, connect_client
from gpuprobe.platform.install import DASK_INSTALL

__all__ = [
    "DASK_INSTALL_HINT",
    "DEVICE_MEMORY_LIMIT_FRACTION",
    "RMM_RELEASE_THRESHOLD_FRACTION",
    "WORKER_MEMORY_FRACTION",
    "Engine",
    "EngineInfo",
    "available_cores",
    "blas_info",
    "cluster_reason",
    "gpu_memory_bytes",
    "in_process_info",
    "on_gpu_input",
    "open_engine",
    "paused_workers",
    "process_cpu_seconds",
    "release_memory",
    "require_dask",
    "workers_cpu_seconds",
    "workers_state",
]

DASK_INSTALL_HINT = DASK_INSTALL  # the one line every message gives (platform/install.py)

# Fraction of each card's memory a dask-cuda worker may fill before it spills to host memory;
# dask-cuda's own default (LocalCUDACluster device_memory_limit=0.8).
DEVICE_MEMORY_LIMIT_FRACTION = 0.8
# Fraction of each card's memory above which RMM's asynchronous pool returns freed memory to the
# driver, so a failed solve does not keep the card full (rmm_async with rmm_release_threshold;
# rapidsai/dask-cuda#859, #1075).
RMM_RELEASE_THRESHOLD_FRACTION = 0.5
# Fraction of the memory available when a process cluster starts that its workers share equally
# as their memory limits (Dask's default is the machine's total, whatever else runs on it).
WORKER_MEMORY_FRACTION = 0.8


def require_dask() -> None:
    """Raise a :class:`UsageError` naming the install command when Dask is missing."""
    missing = [m for m in ("dask", "distributed") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"data-parallel least squares needs Dask ({', '.join(missing)} is not installed): "
            f"{DASK_INSTALL_HINT}"
        )


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def blas_info() -> dict[str, Any]:
    """NumPy's BLAS library and its thread count in this process (``None`` when unknown)."""
    from gpuprobe.platform.hardware.host import read_blas

    blas = read_blas()
    if blas is None:
        return {"library": None, "threads": None}
    return {
        "library": f"{blas.name} {blas.version or ''}".strip(),
        "threads": blas.threads or None,
    }


def process_cpu_seconds() -> tuple[int, float]:
    """(pid, user + system CPU seconds) of this process; run on workers to see how much CPU they
    got (threads of one process share one entry)."""
    return os.getpid(), time.process_time()


def workers_cpu_seconds(client: Any, workers: Sequence[str] | None = None) -> float:
    """CPU seconds used so far by the processes of ``workers`` (default: all), each process
    counted once; NaN when the workers cannot be asked."""
    try:
        per = client.run(process_cpu_seconds, workers=list(workers) if workers else None)
    except Exception:
        return math.nan
    return float(sum(dict(per.values()).values()))


def paused_workers(client: Any) -> list[dict[str, Any]]:
    """The workers whose status is not ``running`` (paused over their memory limit, closing…),
    with their memory and limit in bytes; empty when the scheduler cannot be asked."""
    try:
        info = client.scheduler_info(n_workers=-1)["workers"]
    except Exception:
        return []
    out = []
    for addr, w in sorted(info.items()):
        status = str(w.get("status", "running")).split(".")[-1].lower()
        if status != "running":
            out.append(
                {
                    "address": addr,
                    "status": status,
                    "memory": (w.get("metrics") or {}).get("memory"),
                    "memory_limit": w.get("memory_limit"),
                }
            )
    return out


def workers_state(client: Any) -> str:
    """One line on the cluster's workers: how many, and which are not running and why."""
    try:
        n = len(client.scheduler_info(n_workers=-1)["workers"])
    except Exception as exc:
        return f"the scheduler cannot be asked ({type(exc).__name__}: {exc})"
    bad = paused_workers(client)
    if not bad:
        return f"{n} worker(s), all running"

    parts = [
        f"{w['address']} {w['status']} (memory {gib(w['memory'] or None, 1)} of limit "
        f"{gib(w['memory_limit'] or None, 1)})"
        for w in bad
    ]
    return f"{n} worker(s); " + "; ".join(parts)


def _limit_blas(threads: int) -> Any:
    """Limit this process's BLAS pool to ``threads``; return the limiter (None without
    threadpoolctl, in which case OMP_NUM_THREADS and friends decide)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=threads, user_api="blas")


def _blas_plugin(threads: int) -> Any:
    """A worker plugin that sets the BLAS thread count when a worker starts (restarted ones too:
    the nanny's pre-spawn environment would otherwise put them back to one thread)."""
    from distributed import WorkerPlugin

    class BlasThreads(WorkerPlugin):
        name = "gpuprobe-blas-threads"

        def __init__(self, threads: int) -> None:
            self.threads = threads

        def setup(self, worker: Any) -> None:
            _limit_blas(self.threads)

    return BlasThreads(threads)


def _release_worker_memory() -> int:
    """Run on a worker: free what a failed task may have left behind; return bytes freed by CuPy."""
    gc.collect()
    freed = 0
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        pool = cupy.get_default_memory_pool()
        freed = int(pool.total_bytes() - pool.used_bytes())
        pool.free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
    return freed


def release_memory(client: Any) -> None:
    """Give memory back on every worker of ``client`` (after a failure); never raises."""
    with contextlib.suppress(Exception):
        client.run(_release_worker_memory)
    with contextlib.suppress(Exception):
        _release_worker_memory()


@dataclass(frozen=True)
class EngineInfo(Record):
    """The cluster a solve ran on."""

    kind: str  # "cpu" or "gpu"
    cluster: str  # "LocalCluster", "LocalCUDACluster" or "existing"
    scheduler: str  # the scheduler's address
    workers: int
    threads_per_worker: int
    blas_threads: int | None  # per worker, as read on a worker; None when unknown
    blas_library: str | None
    processes: bool | None  # workers are processes (None: unknown, an existing cluster)
    owned: bool  # this engine started the cluster and closes it
    devices: tuple[int, ...] = ()


def in_process_info(
    kind: str, library: str | None, threads: int | None, devices: tuple[int, ...] = ()
) -> EngineInfo:
    """The engine of a solve in this process: no cluster, one "worker" (this process) on the
    CPU's BLAS or on one GPU (``devices``)."""
    return EngineInfo(
        kind=kind,
        cluster="in-process",
        scheduler="",
        workers=1,
        threads_per_worker=1,
        blas_threads=threads,
        blas_library=library,
        processes=False,
        owned=True,
        devices=devices,
    )


def on_gpu_input(a: Any) -> bool:
    """True for a CuPy array, a torch CUDA tensor or a dask array of CuPy blocks."""
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return True
    if mod == "torch":
        return bool(a.device.type == "cuda")
    meta = getattr(a, "_meta", None)
    return meta is not None and type(meta).__module__.split(".")[0] == "cupy"


def gpu_memory_bytes(kind: str) -> int | None:
    """Bytes of memory of the current GPU for a GPU engine (None on CPU or when unknown)."""
    if kind != "gpu":
        return None
    try:
        import cupy

        return int(cupy.cuda.Device().mem_info[1])
    except Exception:
        return None


def cluster_reason(
    A: Any,
    method: str,
    client: Any,
    scheduler: str | None,
    devices: Any,
    workers: Sequence[str] | None,
    engine: str,
) -> str | None:
    """Why this solve goes to a Dask cluster, or None when it may run in this process."""
    from gpuprobe.tools.scale.sources import is_path

    if engine == "dask":
        return "engine='dask' asked"
    if client is not None:
        return "client= given: solved on that cluster"
    if scheduler is not None:
        return f"scheduler {scheduler} given: solved on that cluster"
    if workers:
        return "workers= given: solved on those Dask workers"
    if devices is not None and devices != "cpu":
        return f"devices={devices!r}: one Dask worker per GPU"
    if method == "local-sgd":
        return "local-sgd is E6's sharded SGD on Dask workers (docs/experiments.md#e6)"
    if type(A).__module__.split(".")[0] == "dask":
        return "A is a dask array: solved on a Dask cluster, block by block"
    if not is_path(A) and on_gpu_input(A):
        return "A is on a GPU: one Dask worker per GPU"
    return None


def _gpu_count() -> int:
    if importlib.util.find_spec("cupy") is None:
        return 0
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def _resolve_devices(devices: str | Sequence[int] | None) -> tuple[str, tuple[int, ...]]:
    if devices is None or devices == "cpu":
        return "cpu", ()
    if devices == "gpu":
        count = _gpu_count()
        if count == 0:
            raise UsageError(
                "devices='gpu' but CuPy sees no GPU here: pip install cupy-cuda12x, "
                "check `nvidia-smi`, or use devices='cpu'"
            )
        return "gpu", tuple(range(count))
    if isinstance(devices, str):
        raise UsageError(f"devices={devices!r}: use 'cpu', 'gpu' or a list of GPU ids like [0, 1]")
    ids = tuple(int(d) for d in devices)
    if not ids:
        raise UsageError("devices=[]: give at least one GPU id, or devices='cpu'")
    count = _gpu_count()
    bad = [d for d in ids if d < 0 or d >= count]
    if bad:
        raise UsageError(f"GPU ids {bad} do not exist here ({count} GPU(s) visible to CuPy)")
    return "gpu", ids


WORKER_PRELOAD = "gpuprobe.platform.cluster_worker"  # imported by each worker process started here
INTERRUPTED_CLOSE_S = 0.5  # s the client and the cluster have to close after Ctrl-C or SIGTERM


def _kill_workers(cluster: Any) -> None:
    """SIGKILL every worker process of a LocalCluster started here (a nanny's child); never
    raises."""
    import os
    import signal

    for nanny in list(getattr(cluster, "workers", {}).values()):
        with contextlib.suppress(Exception):
            nanny.auto_restart = False  # a killed worker is not started again
        pid = getattr(getattr(nanny, "process", None), "pid", None)
        if isinstance(pid, int) and pid > 0:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class Engine:
    """A Dask client plus what it took to get it; close it (or use ``with``) to tear down what it
    started. An existing cluster is never closed."""

    def __init__(
        self,
        client: Any,
        info: EngineInfo,
        cluster: Any = None,
        close_client: bool = False,
        limiter: Any = None,
    ) -> None:
        self.client = client
        self.info = info
        self._cluster = cluster
        self._close_client = close_client
        self._limiter = limiter

    def worker_addresses(self) -> list[str]:
        """The workers' addresses, sorted."""
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def release_memory(self) -> None:
        """See :func:`release_memory`."""
        release_memory(self.client)

    def close(self, interrupted: bool = False) -> None:
        """Close the client and cluster this engine started; restore this process's BLAS.
        ``interrupted`` (Ctrl-C, SIGTERM): the worker processes this engine started are killed
        first, and the rest is given at most :data:`INTERRUPTED_CLOSE_S` (a graceful close of a
        LocalCluster takes 2-4 s, the process is about to exit, and its workers would die with
        it)."""
        if interrupted and self._cluster is not None:
            _kill_workers(self._cluster)
            from gpuprobe.platform.cluster import close_client, quiet_dask

            cluster, self._cluster = self._cluster, None
            with quiet_dask(also=("asyncio",)) as keep_quiet:
                keep_quiet()  # its threads go on a moment: their logs are not the user's
                if self._close_client:
                    close_client(self.client, INTERRUPTED_CLOSE_S)
                close_client(cluster, INTERRUPTED_CLOSE_S)
            # not closed in that time (a loaded machine): distributed's own atexit handler
            # would close it again for 10 s, and its assertion on the killed workers' state
            # printed a traceback after "interrupted"; its workers are dead, its scheduler goes
            # with this process
            with contextlib.suppress(Exception):
                cluster.shutdown_on_close = False
        if self._close_client:
            with contextlib.suppress(Exception):
                self.client.close()
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()
        if self._limiter is not None:
            with contextlib.suppress(Exception):
                self._limiter.restore_original_limits()
        self._cluster = None
        self._limiter = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # KeyboardInterrupt, or the command line's stop on SIGTERM: not an Exception
        self.close(interrupted=kind is not None and not issubclass(kind, Exception))

    def __repr__(self) -> str:
        i = self.info
        return (
            f"Engine({i.cluster} at {i.scheduler}: {i.workers} {i.kind} worker(s) × "
            f"{i.threads_per_worker} thread(s), BLAS threads {i.blas_threads or NA})"
        )


def _worker_blas(client: Any) -> tuple[int | None, str | None]:
    try:
        infos = client.run(blas_info)
    except Exception:
        return None, None
    if not infos:
        return None, None
    first = next(iter(infos.values()))
    return first.get("threads"), first.get("library")


def _cuda_cluster(ids: tuple[int, ...], threads_per_worker: int) -> Any:
    if importlib.util.find_spec("dask_cuda") is None:
        raise UsageError(
            "GPU workers need dask-cuda (one worker per GPU with its memory settings): "
            "pip install dask-cuda, or pass client= for a cluster you started"
        )
    from dask_cuda import LocalCUDACluster

    wanted: dict[str, Any] = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in ids),
        "device_memory_limit": DEVICE_MEMORY_LIMIT_FRACTION,
    }
    if importlib.util.find_spec("rmm") is not None:
        wanted.update(
            rmm_async=True,
            rmm_release_threshold=RMM_RELEASE_THRESHOLD_FRACTION,
            rmm_allocator_external_lib_list=["cupy"],
        )
    # dask-cuda's own options changed between releases: pass only the ones this version names.
    accepted = inspect.signature(LocalCUDACluster.__init__).parameters
    kwargs = {k: v for k, v in wanted.items() if k in accepted}
    kwargs.update(threads_per_worker=threads_per_worker, dashboard_address="127.0.0.1:0")
    return LocalCUDACluster(**kwargs)


def open_engine(
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    threads_per_worker: int | None = None,
    blas_threads: int | None = None,
    devices: str | Sequence[int] | None = None,
    processes: bool = False,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> Engine:
    """Connect to (or start) the cluster a solve runs on; see the module docstring.
    ``connect_timeout``: seconds for ``scheduler`` to answer as a Dask scheduler
    (:func:`~gpuprobe.platform.cluster.connect_client`; else a :class:`UsageError`).

    ``workers``, ``threads_per_worker`` and ``processes`` size a cluster this function starts;
    ``blas_threads`` is applied to a started cluster (default: cores / (workers × threads)), and to
    an existing one only when given."""
    require_dask()
    from distributed import Client

    if client is not None or scheduler is not None:
        # The GPUs are the workers', not necessarily this machine's: take devices at its word.
        kind = "cpu" if devices is None or devices == "cpu" else "gpu"
        ids = () if isinstance(devices, str) or devices is None else tuple(int(d) for d in devices)
        owned_client = client is None
        if client is None:
            assert scheduler is not None
            client = connect_client(scheduler, connect_timeout)
        if blas_threads is not None:
            client.register_plugin(_blas_plugin(blas_threads))
        winfo = client.scheduler_info(n_workers=-1)["workers"]
        nthreads = sorted({int(w.get("nthreads", 1)) for w in winfo.values()}) or [1]
        threads, lib = _worker_blas(client)
        info = EngineInfo(
            kind=kind,
            cluster="existing",
            scheduler=str(client.scheduler.address),
            workers=len(winfo),
            threads_per_worker=nthreads[-1],
            blas_threads=threads,
            blas_library=lib,
            processes=None,
            owned=False,
            devices=ids,
        )
        return Engine(client, info, close_client=owned_client)

    kind, ids = _resolve_devices(devices)
    cores = available_cores()
    tpw = max(1, threads_per_worker or 1)
    if kind == "gpu":
        cluster = _cuda_cluster(ids, tpw)
        name = "LocalCUDACluster"
        limiter = None
    else:
        n = max(1, workers or max(1, cores // tpw))
        blas = max(1, blas_threads or cores // (n * tpw))
        import psutil
        from distributed import LocalCluster

        # Threads of this process share its memory, which a per-worker limit would count whole
        # (each worker pausing at its share of what the whole process holds): no limit then.
        # Processes get an equal share of the memory available now, not of the machine's total.
        limit: int | str = (
            int(psutil.virtual_memory().available * WORKER_MEMORY_FRACTION / n) if processes else 0
        )
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=tpw,
            processes=processes,
            memory_limit=limit,
            host="127.0.0.1" if processes else None,
            dashboard_address="127.0.0.1:0",  # a free port, this machine only
            silence_logs=40,  # logging.ERROR: a restarted worker is reported in the result
            # each worker process ignores Ctrl-C: gpuprobe stops them (issue 41 #1)
            **({"preload": [WORKER_PRELOAD]} if processes else {}),
        )
        name = "LocalCluster"
        limiter = None if processes else _limit_blas(blas)
    try:
        client = Client(cluster, set_as_default=False)  # leave the user's default client alone
        if kind == "cpu" and processes:
            client.register_plugin(_blas_plugin(blas))
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        threads, lib = _worker_blas(client)
    except BaseException:
        cluster.close()
        if limiter is not None:
            limiter.restore_original_limits()
        raise
    info = EngineInfo(
        kind=kind,
        cluster=name,
        scheduler=str(cluster.scheduler_address),
        workers=n_workers,
        threads_per_worker=tpw,
        blas_threads=threads,
        blas_library=lib,
        processes=processes if kind == "cpu" else True,
        owned=True,
        devices=ids,
    )
    return Engine(client, info, cluster=cluster, close_client=True, limiter=limiter)
