"""``gpuprobe scale lstsq`` on a LocalCluster: what it prints on stderr is its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

SRC = Path(__file__).resolve().parents[3] / "src"


def test_a_plain_sweep_leaves_stderr_free_of_dasks_tracebacks() -> None:
    # a cancel of the held blocks between worker counts made distributed's scheduler log an
    # `assert ts.who_wants` traceback on every run of this size
    r = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "scale", "lstsq", "--workers", "1", "--rows",
         "400000", "--cols", "200"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "ERROR" not in r.stderr, r.stderr[-2000:]
    assert "speed-up" in r.stdout or "workers" in r.stdout
