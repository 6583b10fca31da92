"""A worker process killed in the middle of a solve: Dask recomputes its blocks elsewhere and the
answer is still exact."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuprobe.tools.scale.lstsq import lstsq

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

ROWS, COLS, BLOCKS = 400, 8, 10


def _block(i: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 + i)
    a = rng.standard_normal((ROWS, COLS))
    return a, a @ np.arange(1.0, COLS + 1) + rng.standard_normal(ROWS)


def _a_block_killing_once(i: int, marker: str) -> np.ndarray:
    """Block i of A; the first time block 6 is made, its worker process is killed (SIGKILL)."""
    if i == 6 and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return _block(i)[0]


@pytest.fixture(scope="module")
def process_client():
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.mark.parametrize("method", ["normal", "tsqr"])
def test_killed_worker_still_exact(process_client, tmp_path, method):
    from dask import delayed

    marker = str(tmp_path / f"killed-{method}")
    pids_before = set(process_client.run(os.getpid).values())
    a = da.concatenate(
        [
            da.from_delayed(delayed(_a_block_killing_once)(i, marker), (ROWS, COLS), np.float64)
            for i in range(BLOCKS)
        ]
    )
    b = da.concatenate(
        [
            da.from_delayed(delayed(lambda i: _block(i)[1])(i), (ROWS,), np.float64)
            for i in range(BLOCKS)
        ]
    )
    a_np = np.vstack([_block(i)[0] for i in range(BLOCKS)])
    b_np = np.concatenate([_block(i)[1] for i in range(BLOCKS)])
    ref = np.linalg.lstsq(a_np, b_np, rcond=None)[0]

    x, rep = lstsq(a, b, method, client=process_client)

    killed = int(Path(marker).read_text())
    assert killed in pids_before  # a real worker process died mid-solve...
    process_client.wait_for_workers(2, timeout=60)
    assert killed not in set(process_client.run(os.getpid).values())  # ...and was replaced
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 1e-12
    assert rep.residual_norm == pytest.approx(np.linalg.norm(b_np - a_np @ ref), rel=1e-12)


def _always_kill(i: int) -> np.ndarray:
    os.kill(os.getpid(), signal.SIGKILL)
    return np.ones((2, 2))


def test_worker_dying_every_time_is_a_clear_error():
    import cloudpickle
    import dask

    from gpuprobe.core.errors import GpuprobeError

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        from dask import delayed

        a = da.from_delayed(delayed(_always_kill)(0), (2, 2), np.float64)
        with pytest.raises(GpuprobeError, match="worker died repeatedly"):
            lstsq(a, np.ones(2), "normal", client=c)


def test_numpy_input_on_worker_processes_is_sent_once(process_client):
    from gpuprobe.tools.scale import lstsq as L
    from gpuprobe.tools.scale.sources import as_dask_problem

    rng = np.random.default_rng(3)
    a_np = rng.standard_normal((20_000, 80))
    b_np = a_np @ np.ones(80) + rng.standard_normal(20_000)
    # held by the workers before the solve: later passes name the blocks, not the data
    held = L._held_by_workers(process_client, as_dask_problem(a_np, b_np, 2_500), None)
    assert len(distributed.futures_of(held.A)) == 8 and len(distributed.futures_of(held.b)) == 8
    ref = np.linalg.lstsq(a_np, b_np, rcond=None)[0]
    x, rep = lstsq(a_np, b_np, "normal", client=process_client, chunk_rows=2_500)
    assert rep.source == "numpy" and rep.passes == 2 and rep.row_blocks == 8
    assert np.linalg.norm(x - ref) / np.linalg.norm(ref) <= 1e-12
    assert rep.cpu_per_worker is not None and rep.cpu_per_worker > 0
