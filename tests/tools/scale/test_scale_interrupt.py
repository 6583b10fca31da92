"""Ctrl-C during ``gpuprobe scale lstsq`` on worker processes it started (issue 41 #1: 5-6 Dask
tracebacks from the worker processes, 74-80 lines, up to 4.2 s to stop; then, with the
workers quiet, a hang for ever in OpenBLAS's exit handler when numpy's reference was cut short).
SIGINT goes to the whole process group, as a terminal sends it; the command must stop within
the bound in one line, exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from _support import stop_group

pytest.importorskip("distributed")
pytestmark = pytest.mark.serial  # Ctrl-C timed against worker start-up: alone (Makefile)

SRC = Path(__file__).resolve().parents[3] / "src"
# a hang, not a speed: the old failure was tracebacks (asserted below) or an exit that never came;
# the figure is printed (-s), 0.4-0.9 s on a quiet machine, 11 s once beside the smoke and a suite
STOP_BOUND_S = 30.0


@pytest.mark.parametrize(("phase", "flags", "after_s"), [
    ("numpy's reference", (), 1.5),  # gathering A, then seconds of LAPACK in this process
    ("the solves", ("--no-numpy",), 3.0),  # the workers busy with passes over A
])  # fmt: skip
def test_ctrl_c_stops_the_sweep_in_one_line(
    phase: str, flags: tuple[str, ...], after_s: float
) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuprobe", "scale", "lstsq", "--workers", "1,2", "--rows",
         "400000", "--cols", "200", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    try:
        me = psutil.Process(p.pid)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until both worker processes run
            workers = [c for c in me.children(recursive=True) if "resource_tracker" not in
                       " ".join(c.cmdline())]  # fmt: skip
            if len(workers) >= 2:
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.2)
        time.sleep(after_s)  # into the phase
        assert p.poll() is None, p.communicate()
        err, took = stop_group(p, signal.SIGINT)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    print(f"\nCtrl-C during {phase}: stopped in {took:.2f} s")
    assert p.returncode == 130, err
    assert err == "gpuprobe: interrupted\n", err
    assert took < STOP_BOUND_S
    for c in workers:  # no worker process left behind
        assert not c.is_running() or c.status() == psutil.STATUS_ZOMBIE
