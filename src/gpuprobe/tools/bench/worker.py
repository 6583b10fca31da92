"""One framework on one device, in a child process of its own:
``python -m gpuprobe.tools.bench.worker FRAMEWORK DEVICE WORKLOAD[,WORKLOAD...] [SETTINGS_JSON]``.

It writes one JSON object per line on stdout as it goes, so the parent can show progress and keeps
every result measured before a crash:

- ``{"event": "environment", "environment": {...}}``: versions, threads, BLAS, the card
- ``{"event": "start", "workload": "matmul"}``
- ``{"event": "result", "result": {...}}``: a :class:`~gpuprobe.tools.bench.model.BenchResult`
- ``{"event": "error", "error": "..."}``: the backend could not be set up
- ``{"event": "done"}``

While a workload runs, NVML samples the card (:mod:`gpuprobe.tools.bench.conditions`) and each result
keeps the clocks, temperature and power read during its measurement.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any

from gpuprobe.tools.bench.conditions import Watch
from gpuprobe.tools.bench.workloads import Settings, run_workload

__all__ = ["run_worker"]

Emit = Callable[[dict[str, Any]], None]


def run_worker(
    framework: str,
    device: str,
    workloads: Sequence[str],
    settings: Settings,
    emit: Emit,
    backend: Any = None,
) -> None:
    """Run ``workloads`` on ``framework``/``device`` (or on the given ``backend``), emitting each
    event as it happens. Errors become events, never exceptions."""
    try:
        if backend is None:
            from gpuprobe.platform.frameworks.backends import make_backend

            backend = make_backend(framework, device)
        env = backend.environment()
    except Exception as exc:
        emit({"event": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        return
    emit({"event": "environment", "environment": env})
    uuid = env.get("uuid") if backend.is_gpu else None
    with closing(Watch(uuid if isinstance(uuid, str) else None)) as watch:
        for name in workloads:
            emit({"event": "start", "workload": name})
            results = run_workload(name, backend, settings)
            while True:
                t0 = time.perf_counter()
                try:
                    r = next(results)
                except StopIteration:
                    break
                except Exception as exc:  # a bug in a workload: report it, go on with the next
                    first = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    emit({"event": "workload-error", "workload": name, "error": first})
                    break
                if watch.active and r.ok:
                    r = dataclasses.replace(r, conditions=watch.window(t0, time.perf_counter()))
                emit({"event": "result", "result": r.to_dict()})
            backend.release()
    emit({"event": "done"})


def _print(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str]) -> int:
    """The child process's entry point."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    framework, device, names = argv[0], argv[1], [w for w in argv[2].split(",") if w]
    settings = Settings.from_dict(json.loads(argv[3])) if len(argv) > 3 else Settings()
    run_worker(framework, device, names, settings, _print)
    return 0


if __name__ == "__main__":
    from gpuprobe.platform.proc import die_with_parent

    die_with_parent()  # a helper never outlives gpuprobe
    sys.exit(main(sys.argv[1:]))
