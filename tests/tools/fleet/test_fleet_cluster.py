"""``doctor --cluster`` against a real Dask cluster started here: a scheduler and five worker
processes (no mocks of distributed), three of them made odd the way real fleets go wrong: one
with fewer threads and torch hidden from it, one without gpuprobe, one that dies mid-run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from _support import too_wide
from gpuprobe.core.errors import InputError

# `python -m dask`, not the `dask` script: a package installed with `pip --target` has no script
DASK = [sys.executable, "-m", "dask"]
HIDE = """
import sys
class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r} or name.startswith({name!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Hide())
"""
DIE = """
import os
import gpuprobe.tools.fleet.node as node
node.node_doctor = lambda *a, **k: os._exit(3)  # the worker dies while it runs doctor
"""


def _gpuprobe(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, in its own interpreter."""
    return subprocess.run([sys.executable, "-m", "gpuprobe", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def _site(tmp: Path, name: str, code: str) -> str:
    d = tmp / name
    d.mkdir()
    (d / "sitecustomize.py").write_text(textwrap.dedent(code))
    # before the checkout's own path, so that the worker runs this checkout's gpuprobe, not
    # whichever one is installed
    here = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(d), *here])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fleet")
    sched_file = tmp / "scheduler.json"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []

    def start(args: list[str], env: dict[str, str] | None = None) -> None:
        log = open(tmp / f"{len(procs)}.log", "wb")  # noqa: SIM115 (closed below)
        logs.append(log)
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, **(env or {})}))  # fmt: skip

    try:
        start([*DASK, "scheduler", "--scheduler-file", str(sched_file), "--port", "0",
               "--no-dashboard"])  # fmt: skip
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        worker = [*DASK, "worker", "--scheduler-file", str(sched_file),
                  "--no-dashboard"]  # fmt: skip
        start([*worker, "--nthreads", "2", "--name", "a"])
        start([*worker, "--nthreads", "2", "--name", "b"])
        start([*worker, "--nthreads", "1", "--name", "c"],
              {"PYTHONPATH": _site(tmp, "hide-torch", HIDE.format(name="torch"))})  # fmt: skip
        start([*worker, "--nthreads", "2", "--name", "d"],
              {"PYTHONPATH": _site(tmp, "hide-gpuprobe", HIDE.format(name="gpuprobe"))})  # fmt: skip
        start([*worker, "--nthreads", "2", "--name", "e", "--no-nanny"],
              {"PYTHONPATH": _site(tmp, "die", DIE)})  # fmt: skip
        from distributed import Client

        with Client(scheduler_file=str(sched_file), timeout="60s") as client:
            client.wait_for_workers(5, timeout=120)
            names = {w["name"]: a for a, w in client.scheduler_info()["workers"].items()}
        yield {"file": sched_file, "names": names}
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs[::-1]:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def test_the_odd_workers_are_named_and_the_others_kept(cluster: dict[str, Any]) -> None:
    import gpuprobe

    report = gpuprobe.fleet_doctor({"scheduler_file": cluster["file"]}, run_kernels=False,
                                   node_timeout=300)  # fmt: skip
    host = socket.gethostname()
    rows = {n.name: n for n in report.nodes}
    # a and b are alike: one row for the host, with both workers; each odd worker its own row
    assert set(rows) == {host, f"{host}/c", f"{host}/d", f"{host}/e"}, sorted(rows)
    assert sorted(rows[host].workers) == sorted([cluster["names"]["a"], cluster["names"]["b"]])
    assert rows[host].threads == (2, 2) and rows[host].status == "ok"
    assert rows[f"{host}/c"].threads == (1,) and rows[f"{host}/c"].status == "ok"
    assert rows[f"{host}/d"].status == "no-gpuprobe"
    assert rows[f"{host}/e"].status == "lost"
    # two configurations among those that reported, the host's two alike workers the majority
    assert [g.nodes for g in report.groups] == [(host,), (f"{host}/c",)]
    c = report.groups[1].config
    assert c["worker threads"] == "1" and "does not import" in c["torch"]
    assert report.groups[0].config["worker threads"] == "2"
    by_id = {f.id: f for f in report.findings}
    assert by_id["fleet-workers-differ"].subject == f"{host}/c"
    assert "worker threads 1 vs 2" in by_id["fleet-workers-differ"].title
    assert "torch" in by_id["fleet-versions-drift"].title
    assert "torch-import-failed" in by_id["fleet-node-fails"].title
    assert f"{host}/d" in by_id["fleet-no-gpuprobe"].title
    assert f"{host}/e" in by_id["fleet-worker-lost"].title
    assert report.exit_code == 1
    # the whole report round-trips through JSON, and its text fits 80 columns
    assert type(report).from_dict(json.loads(json.dumps(report.to_dict()))) == report
    assert too_wide(str(report)) == []
    assert len(repr(report)) <= 200 and "FleetDoctorReport" in repr(report)


def test_the_command_prints_one_json_document(cluster: dict[str, Any]) -> None:
    out = _gpuprobe("doctor", "--scheduler-file", str(cluster["file"]), "--no-kernels",
                       "--json", timeout=400)  # fmt: skip
    assert out.returncode == 1, out.stderr[-2000:]  # a node fails (torch hidden), one is lost
    data = json.loads(out.stdout)
    statuses = {n["status"] for n in data["nodes"]}
    # worker e died in the run before (it has no nanny to restart it) unless this test ran first
    assert {"ok", "no-gpuprobe"} <= statuses <= {"ok", "no-gpuprobe", "lost"}
    assert sum(len(n["workers"]) for n in data["nodes"]) == (5 if "lost" in statuses else 4)
    assert [g["nodes"] for g in data["groups"]] == [[socket.gethostname()],
                                                    [f"{socket.gethostname()}/c"]]  # fmt: skip
    assert "Traceback" not in out.stderr


def test_a_listener_that_never_answers_is_one_line_within_the_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)  # accepts (the kernel does), never answers
        port = s.getsockname()[1]
        out = _gpuprobe("doctor", "--cluster", f"tcp://127.0.0.1:{port}",
                           "--connect-timeout", "2", timeout=60)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"--cluster tcp://127.0.0.1:{port}: no answer as a Dask scheduler within 2 s" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr


def test_a_scheduler_file_that_is_not_there(tmp_path: Path) -> None:
    import gpuprobe

    with pytest.raises(InputError, match="No such file"):
        gpuprobe.fleet_doctor({"scheduler_file": tmp_path / "none.json"})
    (tmp_path / "bad.json").write_text('{"type": "Scheduler"}')
    with pytest.raises(InputError, match="no 'address' in it"):
        gpuprobe.fleet_doctor({"scheduler_file": tmp_path / "bad.json"})


def test_kernels_run_on_one_worker_of_the_host_and_cover_the_others(
    cluster: dict[str, Any],
) -> None:
    """The kernel checks run once on this host (a and b alike, c with torch hidden: its numpy
    check is among a's), not on every worker at once measuring each other; c's row says whose
    kernels cover it, and e (lost in the environment phase, or gone) runs none."""
    import gpuprobe

    said: list[str] = []
    report = gpuprobe.fleet_doctor({"scheduler_file": cluster["file"]}, node_timeout=300,
                                   progress=said.append)  # fmt: skip
    host = socket.gethostname()
    rows = {n.name: n for n in report.nodes}
    assert {host, f"{host}/c", f"{host}/d"} <= set(rows) <= {host, f"{host}/c", f"{host}/d",
                                                             f"{host}/e"}  # fmt: skip
    a, b = cluster["names"]["a"], cluster["names"]["b"]
    assert sorted(rows[host].workers) == sorted([a, b])
    # one of a and b ran them (the first by address among the workers with the most checks)
    assert rows[host].kernels_on == (min(a, b),)
    runner = "a" if min(a, b) == a else "b"
    assert rows[host].kernels_note == f"ran on worker {runner}"
    assert {(w.framework, w.device) for w in rows[host].report.workers} == {("numpy", "cpu"),
                                                                          ("torch", "cpu")}  # fmt: skip
    c = rows[f"{host}/c"]
    assert c.kernels_on == () and c.kernels_note == f"covered by worker {runner}"
    assert c.report is not None and c.report.workers == ()
    assert rows[f"{host}/d"].status == "no-gpuprobe" and rows[f"{host}/d"].kernels_on == ()
    assert said[1] == "kernels on 1 worker(s), a host's one at a time", said
    assert [g.nodes for g in report.groups] == [(host,), (f"{host}/c",)]
    assert too_wide(str(report)) == []
