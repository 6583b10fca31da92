"""The environment of a child Python that a benchmark script starts; stdlib only."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["src_first"]


def src_first(
    src: str | Path, base: Mapping[str, str] | None = None, **extra: str
) -> dict[str, str]:
    """``base`` (default: this process's environment) and ``extra``, with ``src`` first on
    ``PYTHONPATH`` and the entries it had kept after it: the child imports the checkout's
    gpuprobe and sees the same packages as its parent (on a lent card, msgspec and Dask come from
    a ``pip install --target`` folder on ``PYTHONPATH``). Empty entries, which would put the
    child's current folder on its path, are dropped."""
    env = {**(os.environ if base is None else base), **extra}
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(src)]
    env["PYTHONPATH"] = os.pathsep.join([str(src), *kept])
    return env
