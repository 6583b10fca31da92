"""``bench --cluster`` against a real Dask cluster started here (a LocalCluster of three worker
processes, one thread each; no mocks of distributed), on one tiny workload: numpy's matmul at
the fleet's one quick CPU size. Which node is fastest on a shared 2-core machine is chance, so
the rows, the grouping and the documents are asserted, not an outlier (the rule has its own
tests on synthetic figures)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from _support import too_wide
from gpuprobe.core.errors import UsageError
from gpuprobe.tools.fleet.node import FLEET_SIZES

from . import _spy as spy


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc, Client(lc) as client:  # fmt: skip
        yield client


def test_every_worker_has_its_row_and_its_figures(cluster: Any) -> None:
    import gpuprobe

    report = gpuprobe.fleet_bench(cluster, ["matmul"], ["numpy"], one_at_a_time=True)
    host = socket.gethostname()
    workers = sorted(cluster.scheduler_info()["workers"])
    assert sorted(a for n in report.nodes for a in n.workers) == workers
    # three workers on one host: a row each, named host/port
    assert sorted(n.name for n in report.nodes) == sorted(f"{host}/{a.rsplit(':', 1)[-1]}"
                                                          for a in workers)  # fmt: skip
    assert all(n.status == "ok" and n.threads == (1,) for n in report.nodes)
    # Dask's nanny starts each worker with OMP_NUM_THREADS=1: numpy's BLAS used one thread
    assert all(n.blas_threads == 1 for n in report.nodes)
    assert all(n.elapsed_s and n.elapsed_s <= report.elapsed_s for n in report.nodes)  # type: ignore[operator]
    assert report.slowest_node_s == max(n.elapsed_s or 0 for n in report.nodes)
    assert report.one_at_a_time and report.workloads == ("matmul",)
    # numpy runs float64 and float32 at the one quick CPU size; each point has every node's figure
    size = FLEET_SIZES["cpu"][0]["matmul"][0]
    assert sorted(p.label for p in report.points) == [f"matmul float32 numpy {size}",
                                                      f"matmul float64 numpy {size}"]  # fmt: skip
    for p in report.points:
        assert p.kind == "cpu" and p.unit == "TFLOP/s" and p.higher_is_better
        assert sorted(f.who for f in p.figures) == sorted(n.name for n in report.nodes)
        assert all(f.value > 0 and f.vs_peers is not None for f in p.figures)
        assert p.median == sorted(f.value for f in p.figures)[1]
    assert {f.id for f in report.findings} <= {"fleet-bench-outlier", "fleet-bench-alike"}
    assert type(report).from_dict(json.loads(json.dumps(report.to_dict()))) == report
    assert too_wide(str(report)) == []
    assert "FleetBenchReport" in repr(report) and len(repr(report)) <= 200


def test_the_command_prints_one_json_document(cluster: Any) -> None:
    address = cluster.scheduler.address
    out = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "bench", "matmul", "--backend", "numpy", "--quick",
         "--cluster", address, "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)  # one document, nothing else on stdout
    assert len(data["nodes"]) == 3 and {n["status"] for n in data["nodes"]} == {"ok"}
    assert len(data["points"]) == 2 and all(len(p["figures"]) == 3 for p in data["points"])
    assert data["slowest_node_s"] > 0 and not data["one_at_a_time"]
    assert "Traceback" not in out.stderr


def test_options_for_one_machine_are_refused_with_cluster(cluster: Any) -> None:
    import gpuprobe

    out = subprocess.run(
        [sys.executable, "-m", "gpuprobe", "bench", "--cluster", cluster.scheduler.address,
         "--device", "cpu"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "--device is for this machine's bench" in out.stderr
    alone = subprocess.run([sys.executable, "-m", "gpuprobe", "bench", "--one-at-a-time"],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert alone.returncode == 2 and "give --cluster ADDRESS with it" in alone.stderr
    with pytest.raises(UsageError, match="unknown backend 'nompy'"):
        gpuprobe.fleet_bench(cluster, ["matmul"], ["nompy"])


def test_the_workers_of_one_host_are_measured_one_after_the_other(
    cluster: Any, tmp_path: Path
) -> None:
    """By default hosts run at once and a host's workers one after the other: three workers of
    this host sharing its two cores, each bench run recorded in its worker, none overlapping
    another (at once, each measured the others)."""
    import gpuprobe

    log = tmp_path / "bench.jsonl"
    pids = spy.install(cluster, "gpuprobe.tools.bench.runner", "run_bench", log)
    said: list[str] = []
    report = gpuprobe.fleet_bench(cluster, ["matmul"], ["numpy"], progress=said.append)
    assert said == ["bench on 3 worker(s), a host's one at a time"]
    runs = spy.calls(log)
    assert sorted(r["pid"] for r in runs) == sorted(pids.values())  # one run in each worker
    assert spy.overlapping(runs) == []
    assert not report.one_at_a_time and "a host's workers in turn" in repr(report)
