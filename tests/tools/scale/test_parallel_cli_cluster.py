"""A real cluster: `dask scheduler` and two `dask worker` processes started with the dask CLI on
127.0.0.1, the data read by the workers from a shared .npy path, a worker killed mid-solve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from gpuprobe.tools.scale.lstsq import lstsq  # noqa: E402

DASK = Path(sys.executable).with_name("dask")
START_TIMEOUT_S = 60
ROWS, COLS, CHUNK = 24_000, 30, 2_000


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=15)


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory):
    """(scheduler address, data dir): a scheduler and two single-thread workers of 1 GB each."""
    if not DASK.exists():
        pytest.skip("the dask command line is not installed next to this Python")
    d = tmp_path_factory.mktemp("cli-cluster")
    sched_file = d / "scheduler.json"
    common = ["--no-dashboard"]
    procs = [
        subprocess.Popen(
            [
                str(DASK),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--scheduler-file",
                str(sched_file),
                *common,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(
                0.2
            )  # waiting for the scheduler to write its address, not standing in for work
        assert sched_file.exists(), "dask scheduler did not start"
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        str(DASK),
                        "worker",
                        "--scheduler-file",
                        str(sched_file),
                        "--nthreads",
                        "1",
                        "--memory-limit",
                        "1GB",
                        "--host",
                        "127.0.0.1",
                        "--name",
                        f"w{i}",
                        *common,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        address = json.loads(sched_file.read_text())["address"]
        with distributed.Client(address, timeout="20s") as c:
            c.wait_for_workers(2, timeout=START_TIMEOUT_S)
        rng = np.random.default_rng(7)
        a = rng.standard_normal((ROWS, COLS))
        b = a @ np.linspace(-1, 1, COLS) + 0.01 * rng.standard_normal(ROWS)
        np.save(d / "A.npy", a)
        np.save(d / "b.npy", b)
        np.save(d / "Ab.npy", np.column_stack([a, b]))
        yield address, d
    finally:
        _stop(procs)


def _ref(d: Path) -> tuple[np.ndarray, float]:
    a, b = np.load(d / "A.npy"), np.load(d / "b.npy")
    x = np.linalg.lstsq(a, b, rcond=None)[0]
    return x, float(np.linalg.norm(b - a @ x))


@pytest.mark.parametrize("method", ["normal", "tsqr"])
def test_api_on_a_cli_started_cluster_reads_the_shared_file(cli_cluster, method):
    address, d = cli_cluster
    ref, resid = _ref(d)
    with distributed.Client(address, timeout="20s") as c:
        x, rep = lstsq(str(d / "A.npy"), str(d / "b.npy"), method, client=c, chunk_rows=CHUNK)
        # the graph named the file, not the data: the workers read their blocks from the path
        assert rep.source == "npy" and rep.engine.cluster == "existing"
        assert rep.workers_used == 2 and rep.row_blocks == ROWS // CHUNK
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 1e-12
    assert rep.residual_norm == pytest.approx(resid, rel=1e-10)


class KillOnce(distributed.WorkerPlugin):
    """Kills its worker process (SIGKILL) when the ``after``-th task of a pass starts on it, once
    across the cluster (a marker file on the shared path)."""

    name = "gpuprobe-test-kill-once"

    def __init__(self, marker: str, prefix: str, after: int) -> None:
        self.marker, self.prefix, self.after = marker, prefix, after
        self.seen = 0

    def transition(self, key, start, finish, **kw):
        name = key[0] if isinstance(key, tuple) else key
        if finish == "executing" and str(name).startswith(self.prefix):
            self.seen += 1
            if self.seen >= self.after:
                try:
                    fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("method", ["normal", "tsqr"])
def test_worker_killed_mid_solve_still_exact(cli_cluster, method):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    address, d = cli_cluster
    ref, resid = _ref(d)
    marker = d / f"killed-{method}"
    prefix = "_gram_block" if method == "normal" else "_qr_block"
    with distributed.Client(address, timeout="20s") as c:
        pids = set(c.run(os.getpid).values())
        c.register_plugin(KillOnce(str(marker), prefix, after=2))
        try:
            x, rep = lstsq(str(d / "Ab.npy"), None, method, client=c, chunk_rows=CHUNK)
        finally:
            c.unregister_worker_plugin(KillOnce.name)
        killed = int(marker.read_text())
        assert killed in pids  # a CLI-started worker process died in the middle of the solve...
        c.wait_for_workers(2, timeout=START_TIMEOUT_S)  # ...and its nanny started a new one
        assert killed not in set(c.run(os.getpid).values())
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 1e-12
    assert rep.residual_norm == pytest.approx(resid, rel=1e-10)


def test_the_one_worker_asked_for_killed_mid_solve_is_not_waited_for(cli_cluster):
    """Issue 40: with ``workers=[one address]`` the passes were pinned to it; killed, its nanny
    started a worker at another address and the solve waited for the dead one (a hang until
    the pass's timeout). Its work now goes to the workers that are left."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    address, d = cli_cluster
    ref, _ = _ref(d)
    marker = d / "killed-the-only-one"
    with distributed.Client(address, timeout="20s") as c:
        c.wait_for_workers(2, timeout=START_TIMEOUT_S)
        only = sorted(c.scheduler_info(n_workers=-1)["workers"])[0]
        c.register_plugin(KillOnce(str(marker), "_gram_block", after=2))
        t0 = time.monotonic()
        try:
            x, rep = lstsq(str(d / "Ab.npy"), None, "normal", client=c, chunk_rows=CHUNK,
                           workers=[only], timeout=120)  # fmt: skip
        finally:
            c.unregister_worker_plugin(KillOnce.name)
        took = time.monotonic() - t0
        assert marker.exists()  # the worker asked for died in the middle of the solve
        c.wait_for_workers(2, timeout=START_TIMEOUT_S)
        assert only not in c.scheduler_info(n_workers=-1)["workers"]
    print(f"\nsolved in {took:.1f} s with the one worker asked for killed")
    assert rep.row_blocks == ROWS // CHUNK
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 1e-12
    assert took < 60


def test_cli_scale_against_the_cli_started_scheduler(cli_cluster):
    address, d = cli_cluster
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuprobe",
            "scale",
            "lstsq",
            "--scheduler",
            address,
            "--input",
            str(d / "Ab.npy"),
            "--workers",
            "1,2",
            "--method",
            "normal",
            "--chunk-rows",
            str(CHUNK),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["rows"] == ROWS and data["cols"] == COLS
    assert [r["workers"] for r in data["results"]] == [1, 2]
    assert all(r["error_vs_numpy"] <= 1e-12 for r in data["results"])
