"""Run the ``gpuprobe`` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["SRC", "gpuprobe_argv", "run_gpuprobe", "scrape", "wait_for"]

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


def scrape(where: int | str) -> dict[str, list]:
    """``/metrics`` at ``where`` (a port on 127.0.0.1, or a URL), parsed as Prometheus would:
    sample name -> its samples."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    url = where if isinstance(where, str) else f"http://127.0.0.1:{where}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out
