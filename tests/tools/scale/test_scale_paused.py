"""A worker paused over its memory limit (Dask's memory monitor stops it running tasks): the
solve stops with the worker's state in one line instead of waiting in silence until the pass's
timeout (issue 40: 500 s). A real ``dask worker`` paused by Dask itself: its pause threshold
set below what the process already holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from gpuprobe.core.errors import GpuprobeError  # noqa: E402
from gpuprobe.tools.scale import waits  # noqa: E402
from gpuprobe.tools.scale.lstsq import lstsq  # noqa: E402

DASK = [sys.executable, "-m", "dask"]


def test_a_paused_worker_is_said_not_waited_for(tmp_path, monkeypatch):
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([*DASK, "scheduler", "--scheduler-file", str(sched_file), "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # waiting for the scheduler to write its address
        # paused once the process holds 1 % of its 4 GB limit: at once (its RSS is ~100 MB)
        env = {**os.environ, "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE": "0.01"}
        procs.append(subprocess.Popen(
            [*DASK, "worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
             "--memory-limit", "4GB", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        address = json.loads(sched_file.read_text())["address"]
        monkeypatch.setattr(waits, "PAUSED_GIVE_UP_S", 2.0)  # Dask's spill has had its chance
        rng = np.random.default_rng(0)
        a = rng.standard_normal((20_000, 20))
        b = a @ np.ones(20)
        with distributed.Client(address, timeout="20s") as c:
            c.wait_for_workers(1, timeout=60)
            t0 = time.monotonic()
            with pytest.raises(GpuprobeError) as info:
                lstsq(a, b, "normal", client=c, chunk_rows=2_000, timeout=300)
            took = time.monotonic() - t0
    finally:
        for p in procs[::-1]:
            p.kill()
            p.wait(timeout=30)
    message = info.value.message
    print(f"\nsaid in {took:.1f} s: {message}")
    assert "has been paused over its memory limit for" in message
    assert "(memory " in message and "of limit 3.7 GiB" in message  # the worker's state, in numbers
    assert "--chunk-rows" in message and "\n" not in message
    assert took < 60  # the pass's own timeout was 300 s
