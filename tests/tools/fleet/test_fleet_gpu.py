"""On a real NVIDIA GPU (skipped elsewhere): ``doctor --cluster`` and ``bench --cluster`` over a
real Dask cluster of two worker processes that share the card, as two workers of one GPU box do.
What the fake NVML cannot show: the nodes' kernels run on CUDA inside Dask workers, their GPU
rows name the card NVML names here, and each worker's figures are real."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _support import too_wide

pytestmark = pytest.mark.gpu
pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc, Client(lc) as c:  # fmt: skip
        c.wait_for_workers(2, timeout=120)
        yield c


def _card() -> str:
    from gpuprobe.platform.inventory import inventory

    inv = inventory(frameworks="static")
    assert inv.gpus, "no GPU in the inventory on a GPU machine"
    return inv.gpus[0].name or "unknown"


def test_fleet_doctor_runs_cuda_kernels_on_every_node(client: Any) -> None:
    from gpuprobe import fleet_doctor

    r = fleet_doctor(client, quick=True, node_timeout=300)
    assert sum(len(n.workers) for n in r.nodes) == 2
    assert all(n.status == "ok" for n in r.nodes), [(n.name, n.error) for n in r.nodes]
    card = _card()
    for n in r.nodes:
        assert card in n.config["gpus"], n.config
        assert n.config["driver"] not in ("", "?") and not n.config["driver"].startswith("none")
        assert n.report is not None
        cuda = [w for w in n.report.workers if w.device.startswith("cuda") and w.error is None]
        assert cuda, [(w.framework, w.device, w.error) for w in n.report.workers]
        mm = [w.measurement("matmul-float32") for w in cuda]
        assert any(m is not None and m.timer == "cuda-event" and m.flops > 1e12 for m in mm)
    # one configuration: two workers of one host that report alike are not odd
    assert len(r.groups) == 1
    # and one row: the kernels ran on one of the two workers sharing the card, not on both at
    # once (on an H200 each measured the other: pcie-h2d-slow on one, doctor-host-busy on both,
    # and the host split into two rows)
    (row,) = r.nodes
    assert len(row.workers) == 2 and len(row.kernels_on) == 1, (row.workers, row.kernels_on)
    assert row.report is not None and row.report.finding("doctor-host-busy") is None
    assert not [f for f in r.findings if f.failed], [f.id for f in r.findings if f.failed]
    assert not too_wide(str(r))


def test_fleet_bench_gives_each_worker_a_gpu_figure_against_the_card_peak(client: Any) -> None:
    pytest.importorskip("torch")
    from gpuprobe import fleet_bench

    r = fleet_bench(client, ["matmul"], ["torch"], quick=True, one_at_a_time=True,
                    node_timeout=300)  # fmt: skip
    assert all(n.status == "ok" for n in r.nodes), [(n.name, n.error) for n in r.nodes]
    gpu = [p for p in r.points if p.kind == "gpu"]
    assert gpu, [(p.workload, p.case, p.kind) for p in r.points]
    card = _card()
    for p in gpu:
        assert card in p.model
        assert len(p.figures) == 2
        for f in p.figures:
            assert f.value > 1.0, (p.case, f.value)  # TFLOP/s: a data-centre card's matmul
            assert f.pct_peak is not None and 1 < f.pct_peak < 110, (p.case, f.pct_peak)
    assert not too_wide(str(r))
