"""Doctor's kernel checks on a cluster run so that none measures another: once per host and set
of checks (each framework on each GPU, by UUID, and the CPU baseline), a host's runs one after
the other, hosts at once. On an H200 two LocalCluster workers ran them on the one card at the
same time, each measured the other (``pcie-h2d-slow`` on one, ``doctor-host-busy`` on both) and
the host was split into two rows. The runner choice on real inventories (the H200's, with a
second GPU added for the rotated order dask-cuda gives each worker), then a real LocalCluster of
three workers on this host, each worker's kernel runs recorded where they ran."""

from __future__ import annotations

import copy
import gzip
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import DATA, snapshot_dict, too_wide
from gpuprobe.platform.inventory import Inventory
from gpuprobe.tools.fleet.plan import kernel_checks, kernel_runners, lanes

from . import _spy as spy

H200 = snapshot_dict("h200.json")["cuda"]["devices"][0]["uuid"]  # the card recorded there
OTHER = "GPU-00000000-0000-0000-0000-0000000000b2"


def _inv(
    uuids: list[str | None],
    frameworks: tuple[str, ...] = ("torch", "cupy", "jax"),
    cores: int | None = None,
) -> Inventory:
    """The H200's recorded inventory as a worker sees it whose CUDA_VISIBLE_DEVICES gives
    ``uuids`` in this order (a framework's device i is CUDA's ordinal i), with only
    ``frameworks`` importable (numba is never planned), ``cores`` usable ones if given."""
    d = snapshot_dict("h200.json")
    d["host"]["usable_cores"] = cores or d["host"]["usable_cores"]
    one = d["cuda"]["devices"][0]
    d["cuda"]["devices"] = [{**one, "ordinal": i, "uuid": u} for i, u in enumerate(uuids)]
    for f in d["frameworks"]:
        dev = f["devices"][0] if f["devices"] else {}
        # jax gives no UUID (as on the H200): its device is CUDA's ordinal
        f["devices"] = [{**dev, "index": i, "uuid": None if f["name"] == "jax" else u}
                        for i, u in enumerate(uuids)]  # fmt: skip
        if f["name"] not in frameworks and f["name"] != "numba":
            f["importable"] = False
    return Inventory.from_dict(copy.deepcopy(d))


def test_a_gpu_is_named_by_its_uuid_whatever_its_ordinal() -> None:
    h200 = Inventory.from_dict(snapshot_dict("h200.json"))
    # the H200 box: the CPU baseline on its 16 usable cores, each framework on the card
    assert h200.host.usable_cores == 16
    assert kernel_checks(h200, "w") == {
        "numpy cpu ×16", "torch cpu ×16", f"torch {H200}", f"cupy {H200}", f"jax {H200}",
    }  # fmt: skip
    # dask-cuda's rotated order: the same checks on both workers
    assert kernel_checks(_inv([H200, OTHER]), "w1") == kernel_checks(_inv([OTHER, H200]), "w2")
    assert len(kernel_checks(_inv([H200, OTHER]), "w1")) == 2 + 3 * 2
    # a GPU whose UUID neither the framework nor CUDA gives is that worker's own
    lost = _inv([None])
    assert "jax w cuda:0" in kernel_checks(lost, "w") and "jax v cuda:0" in kernel_checks(lost, "v")


def test_the_two_workers_recorded_on_the_h200_get_one_runner() -> None:
    """The card's own case (tests/data/fleet/ORIGIN.md): two LocalCluster workers sharing one
    H200, JAX giving no UUID; both ran their kernels at once there. Their recorded inventories
    name the same checks: one of them runs them."""
    rec = json.loads(gzip.decompress((DATA / "fleet" / "h200_fleet_doctor.json.gz").read_bytes()))
    invs = {n["workers"][0]: Inventory.from_dict(n["report"]["inventory"]) for n in rec["nodes"]}
    assert len(invs) == 2
    checks = {a: kernel_checks(inv, a) for a, inv in invs.items()}
    first, second = sorted(checks)
    assert checks[first] == checks[second] and len(checks[first]) == 5, checks
    assert kernel_runners({a: ("127.0.0.1", c) for a, c in checks.items()}) == {
        first: first, second: first,
    }  # fmt: skip


def test_one_runner_per_host_and_set_of_checks() -> None:
    ab, ba = kernel_checks(_inv([H200, OTHER]), "x"), kernel_checks(_inv([OTHER, H200]), "y")
    # dask-cuda: two workers, each seeing both GPUs in a rotated order -> one runner
    assert kernel_runners({"tcp://h1:2": ("h1", ba), "tcp://h1:1": ("h1", ab)}) == {
        "tcp://h1:1": "tcp://h1:1", "tcp://h1:2": "tcp://h1:1",
    }  # fmt: skip
    # one GPU each (CUDA_VISIBLE_DEVICES=0 / =1): disjoint GPUs, a runner each
    a, b = kernel_checks(_inv([H200]), "a"), kernel_checks(_inv([OTHER]), "b")
    assert kernel_runners({"tcp://h1:1": ("h1", a), "tcp://h1:2": ("h1", b)}) == {
        "tcp://h1:1": "tcp://h1:1", "tcp://h1:2": "tcp://h1:2",
    }  # fmt: skip
    # two hosts, the same GPU UUIDs reported (as a copied image would): one runner on each
    assert kernel_runners({"tcp://h1:1": ("h1", ab), "tcp://h1:2": ("h1", ba),
                           "tcp://h2:1": ("h2", ab), "tcp://h2:2": ("h2", ba)}) == {
        "tcp://h1:1": "tcp://h1:1", "tcp://h1:2": "tcp://h1:1",
        "tcp://h2:1": "tcp://h2:1", "tcp://h2:2": "tcp://h2:1",
    }  # fmt: skip
    # a worker with fewer frameworks (torch hidden) on the same GPUs is covered, whatever its
    # address; one with a framework the other lacks runs its own
    torch_only = kernel_checks(_inv([H200], ("torch",)), "t")
    assert kernel_runners({"tcp://h1:1": ("h1", torch_only), "tcp://h1:2": ("h1", a)}) == {
        "tcp://h1:1": "tcp://h1:2", "tcp://h1:2": "tcp://h1:2",
    }  # fmt: skip
    # a worker pinned to fewer cores (taskset, another job's share) times its own CPU
    pinned = _inv([H200], cores=4)
    assert kernel_runners({"1": ("h", a), "2": ("h", kernel_checks(pinned, "p"))}) == {
        "1": "1", "2": "2",
    }  # fmt: skip
    cupy_only = kernel_checks(_inv([H200], ("cupy",)), "c")
    assert set(kernel_runners({"1": ("h", torch_only), "2": ("h", cupy_only)}).values()) == {
        "1", "2",
    }  # fmt: skip


def test_lanes() -> None:
    workers = {"tcp://10.0.0.2:1": {"host": "10.0.0.2"}, "tcp://10.0.0.1:2": {"host": "10.0.0.1"},
               "tcp://10.0.0.1:1": {"host": "10.0.0.1"}}  # fmt: skip
    assert lanes(workers, "at-once") == [["tcp://10.0.0.1:1"], ["tcp://10.0.0.1:2"],
                                         ["tcp://10.0.0.2:1"]]  # fmt: skip
    assert lanes(workers, "per-host") == [["tcp://10.0.0.1:1", "tcp://10.0.0.1:2"],
                                          ["tcp://10.0.0.2:1"]]  # fmt: skip
    assert lanes(workers, "one-at-a-time") == [sorted(workers)]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc, Client(lc) as c:  # fmt: skip
        c.wait_for_workers(3, timeout=120)
        yield c


def test_three_workers_of_one_host_run_the_kernels_once(client: Any, tmp_path: Path) -> None:
    from gpuprobe import fleet_doctor

    log = tmp_path / "runs.jsonl"
    pids = spy.install(client, "gpuprobe.tools.doctor.engine", "run_workers", log)
    said: list[str] = []
    off = fleet_doctor(client, run_kernels=False, node_timeout=300)
    assert spy.calls(log) == [] and [n.kernels_note for n in off.nodes] == [
        "not run (no kernels asked)"
    ]
    assert "off" in str(off)

    r = fleet_doctor(client, quick=True, node_timeout=300, progress=said.append)
    assert said == ["environment on 3 worker(s)",
                    "kernels on 1 worker(s), a host's one at a time"]  # fmt: skip
    runs = spy.calls(log)
    # exactly one worker process ran the kernel checks: the one the row names
    assert len(runs) == 1, runs
    (row,) = r.nodes  # the three workers report alike: one row, the host's
    assert row.name == socket.gethostname() and sorted(row.workers) == sorted(pids)
    assert len(row.kernels_on) == 1 and pids[row.kernels_on[0]] == runs[0]["pid"]
    assert row.kernels_note == f"ran on worker {row.kernels_on[0].rsplit(':', 1)[-1]}"
    # the row's report is the runner's: its environment and its kernels (numpy and torch here)
    assert row.report is not None and row.report.others_cores is not None
    assert sorted((w.framework, w.device) for w in row.report.workers) == [
        ("numpy", "cpu"), ("torch", "cpu")]  # fmt: skip
    assert all(w.error is None for w in row.report.workers)
    assert len(r.groups) == 1 and row.status == "ok"
    assert f" on {row.kernels_on[0].rsplit(':', 1)[-1]} " in str(r) and not too_wide(str(r))
    assert type(r).from_dict(json.loads(json.dumps(r.to_dict()))) == r
