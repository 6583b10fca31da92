"""What each Dask worker did, recorded where it did it: :func:`install` wraps a function in every
worker so that each call appends ``{"pid", "start", "end"}`` (wall clock) to a file, to assert
which workers ran a fleet's measurements and that no two of them ran at the same time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["calls", "install", "overlapping"]


def _wrap(module: str, attr: str, path: str) -> int:
    """In a worker: ``module.attr`` replaced by itself recording each call in ``path``."""
    import importlib
    import os
    import time

    mod = importlib.import_module(module)
    real = getattr(mod, attr)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return real(*args, **kwargs)
        finally:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"pid": os.getpid(), "start": start, "end": time.time()}) + "\n")

    setattr(mod, attr, recorded)
    return os.getpid()


def install(client: Any, module: str, attr: str, path: Path) -> dict[str, int]:
    """Record every call of ``module.attr`` on each worker of ``client`` in ``path``: each
    worker's address -> its pid."""
    import sys

    import cloudpickle

    this = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(this)  # a worker cannot import the tests
    try:
        return dict(client.run(_wrap, module, attr, str(path)))
    finally:
        cloudpickle.unregister_pickle_by_value(this)


def calls(path: Path) -> list[dict[str, Any]]:
    """The calls recorded in ``path``, in the order they ended."""
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def overlapping(runs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The pairs of pids whose calls ran at the same time."""
    runs = sorted(runs, key=lambda r: r["start"])
    return [(a["pid"], b["pid"]) for i, a in enumerate(runs) for b in runs[i + 1 :]
            if b["start"] < a["end"]]  # fmt: skip
