"""Shared test support: the data folder, snapshots, whether a GPU is present, a child Python's
PYTHONPATH, and the command line run in an interpreter of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


def _has_gpu() -> bool:
    try:
        from gpuprobe.platform.hardware.nvml import read_driver

        return bool(read_driver()[1])
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pythonpath_env(*first: str | Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child Python: ``base`` (default: this process's) with ``first`` at
    the head of ``PYTHONPATH`` and the entries it was given kept after them, so the child sees the
    packages this process sees (on a lent card msgspec and Dask come from a ``pip --target``
    folder on ``PYTHONPATH``, not from the venv). Empty entries (the current folder) are dropped."""
    env = dict(os.environ if base is None else base)
    heads = [str(p) for p in first]
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in heads]
    env["PYTHONPATH"] = os.pathsep.join([*heads, *rest])
    return env


def snapshot_dict(name: str) -> dict[str, Any]:
    """A snapshot from tests/data as a dict."""
    return json.loads((DATA / name).read_text())


def run_gpuprobe(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpuprobe ARGS`` in a new interpreter: its exit code, stdout and stderr (what a
    user sees, tracebacks printed at exit included)."""
    return subprocess.run(
        [sys.executable, "-m", "gpuprobe", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def too_wide(text: str, width: int = 80) -> list[str]:
    """The lines of ``text`` wider than ``width`` columns that hold more than one word: a path or
    a name longer than the line is kept whole on a line of its own (to copy), and only that may
    pass the width."""
    return [
        line for line in text.splitlines() if len(line.rstrip()) > width and len(line.split()) > 1
    ]


def stop_group(p: subprocess.Popen[str], sig: int) -> tuple[str, float]:
    """Send ``sig`` to ``p``'s process group (started with ``start_new_session``), as a terminal
    sends Ctrl-C to a job; return its stderr and the seconds it took to exit. A process that has
    not exited within 60 s is killed, with its group, and the test fails."""
    import signal
    import time

    try:
        t0 = time.monotonic()
        os.killpg(p.pid, sig)
        _out, err = p.communicate(timeout=60)
        return err, time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
