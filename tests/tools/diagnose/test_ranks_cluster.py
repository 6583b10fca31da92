"""``diagnose DIR --cluster``: the ranks of a job read by the workers of a real Dask cluster
started here (one scheduler, four single-thread worker processes, no mocks of distributed),
started once for the module as the fleet tests do. Each worker has a disk of its own
(``$NODE_DISK``, for ``--worker-glob``); one dies on the first rank it reads, one takes a
minute over the ranks of a folder named ``slowjob``. The verdict is the local one; what goes
wrong is named in one line and the rest analysed; Ctrl-C stops it at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from gpuprobe.tools.diagnose.ranks import diagnose_ranks

from .realdata import DLRM8, DLRM_FILES
from .test_ranks_parallel import comparable

DASK = [sys.executable, "-m", "dask"]
SRC = Path(__file__).resolve().parents[3] / "src"
START_TIMEOUT_S = 120.0
STOP_BOUND_S = 2.0  # s the command has to stop after Ctrl-C (issue 42)

ROLES = {
    "a": "",
    "b": "",
    "dies": """
        import os
        import gpuprobe.tools.diagnose.ranks_cluster as rc
        rc.worker_read = lambda path, steps: os._exit(3)  # dies on the first rank it reads
    """,
    "slow": """
        import os, time
        import gpuprobe.tools.diagnose.ranks_cluster as rc
        real = rc.worker_read
        def slow(path, steps):
            if "slowjob" in path:
                open(os.environ["RANKS_MARK"], "w").close()
                time.sleep(60)
            return real(path, steps)
        rc.worker_read = slow
    """,
}


def _env(tmp: Path, role: str) -> dict[str, str]:
    d = tmp / f"site-{role}"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(textwrap.dedent(ROLES[role]))
    disk = tmp / f"disk-{role}"
    disk.mkdir(exist_ok=True)
    here = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(d), str(SRC), *here]),
            "NODE_DISK": str(disk), "RANKS_MARK": str(tmp / "slow-started")}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ranks-cluster")
    sched_file = tmp / "scheduler.json"
    procs = [subprocess.Popen([*DASK, "scheduler", "--scheduler-file", str(sched_file), "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for role in ROLES:
            procs.append(subprocess.Popen(
                [*DASK, "worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                 "--name", role, "--no-dashboard", "--no-nanny", "--host", "127.0.0.1"],
                env=_env(tmp, role), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))  # fmt: skip
        from distributed import Client

        with Client(scheduler_file=str(sched_file), timeout="60s") as client:
            client.wait_for_workers(len(ROLES), timeout=START_TIMEOUT_S)
            names = {w["name"]: a for a, w in client.scheduler_info()["workers"].items()}
        yield {"file": sched_file, "tmp": tmp, "names": names, "procs": procs}
    finally:
        for p in procs[::-1]:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait(timeout=30)


def _where(cluster: dict[str, Any]) -> dict[str, str]:
    return {"scheduler_file": str(cluster["file"])}


def _gpuprobe(cluster: dict[str, Any], *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuprobe", "diagnose", "--scheduler-file", str(cluster["file"]),
         *args], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SRC)}, **kw)  # fmt: skip


def test_ranks_are_split_over_workers_and_a_dead_workers_rank_read_again(
    cluster: dict[str, Any],
) -> None:
    local = diagnose_ranks(DLRM8, jobs=1)
    d = diagnose_ranks(DLRM8.resolve(), cluster=_where(cluster))
    assert not d.unread, d.unread
    assert comparable(d.to_dict()) == comparable(local.to_dict())
    names = cluster["names"]
    by = {r.where: r.ranks for r in d.readers}
    assert sum(by.values()) == 8
    assert len(by) == 3  # split over every worker but the one that died (2 ranks each first)
    assert names["dies"] not in by  # it died on its first rank: read again elsewhere
    assert cluster["procs"][1 + list(ROLES).index("dies")].poll() == 3
    assert all(r.peak_rss_mib and r.peak_rss_mib > 10 for r in d.readers)
    assert d.read_on.startswith("the Dask cluster at tcp://127.0.0.1:")


def test_files_on_each_workers_disk_missing_and_corrupt_ranks_named(
    cluster: dict[str, Any],
) -> None:
    tmp = cluster["tmp"]
    disks = {role: tmp / f"disk-{role}" for role in ROLES}
    for i, f in enumerate(DLRM_FILES):  # ranks 0-3 on a's disk, 4-5 on b's, 7 on slow's
        if i < 4:
            shutil.copy(f, disks["a"] / f.name)
        elif i in (4, 5):
            shutil.copy(f, disks["b"] / f.name)
        elif i == 7:
            shutil.copy(f, disks["slow"] / f.name)
    # rank 6: a link to a file that is not there on b; rank 7 on slow: corrupt
    (disks["b"] / DLRM_FILES[6].name).symlink_to(tmp / "gone.json.gz")
    (disks["slow"] / DLRM_FILES[7].name).write_bytes(b"\x1f\x8b\x08\x00not a trace")
    p = _gpuprobe(cluster, "--worker-glob", "$NODE_DISK/*.json.gz", "--json")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 3, err
    doc = json.loads(out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3, 4, 5]
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err, err
    assert lines[0].startswith("not read: worker6_step_12") and "dangling link" in lines[0]
    assert lines[1].startswith("not read: worker7_step_12") and "(on tcp://" in lines[1]


def test_a_cluster_that_cannot_see_the_path_is_one_line(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    p = _gpuprobe(cluster, str(tmp_path / "not-on-any-node"))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "worker(s) of the cluster at" in err, err


def test_mixed_jobs_are_said(cluster: dict[str, Any], tmp_path: Path) -> None:
    from .realdata import SAMPLED_FILES

    job = tmp_path / "mixed"
    job.mkdir()
    for f in [*DLRM_FILES[:2], *SAMPLED_FILES]:
        shutil.copy(f, job / f.name)
    p = _gpuprobe(cluster, str(job))
    _out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "rank 0 appears in 2 traces of different processes" in err, err


def test_ctrl_c_stops_it_at_once(cluster: dict[str, Any], tmp_path: Path) -> None:
    job = tmp_path / "slowjob"
    job.mkdir()
    for f in DLRM_FILES:
        shutil.copy(f, job / f.name)
    mark = cluster["tmp"] / "slow-started"
    p = _gpuprobe(cluster, str(job), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), "the slow worker did not start"
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)
        _out, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert took < STOP_BOUND_S, f"stopped in {took:.2f} s"
    assert p.returncode == 130 and err.strip().splitlines() == ["gpuprobe: interrupted"], err
