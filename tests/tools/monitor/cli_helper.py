"""Run the ``gpuprobe`` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["SRC", "gpuprobe_argv", "run_gpuprobe", "wait_for"]

SRC = Path(__file__).resolve().parents[3] / "src"
_BOOT = "import sys; from gpuprobe.cli import main; sys.argv[0] = 'gpuprobe'; sys.exit(main())"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(SRC), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    e["PYTHONUNBUFFERED"] = "1"
    return e


def gpuprobe_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", _BOOT, *args]


def run_gpuprobe(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gpuprobe_argv(*args),
        capture_output=True,
        text=True,
        env=env(),
        timeout=timeout,
        check=False,
    )


def wait_for(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``cond`` until true (a readiness check, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
