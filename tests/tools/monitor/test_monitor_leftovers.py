"""``gpuprobe run`` and ``gpuprobe pack`` and what a command leaves running when it exits: real
processes started in the background (``sh -c 'sleep 30 &'``), in a session of their own
(``setsid``), or without the run's marker in their environment; named in a finding, ended with
``--kill-leftovers``. Every test ends what it started, whatever happens."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from cli_helper import env, gpuprobe_argv

from gpuprobe.core.findings import Status
from gpuprobe.platform.proc import RUN_ID_ENV, end_processes, find_leftovers
from gpuprobe.tools.monitor.pack import pack
from gpuprobe.tools.monitor.pack_model import PackReport
from gpuprobe.tools.monitor.run import RunResult, finish_run, run_command
from gpuprobe.tools.monitor.timeline import read_timeline

MARK = "GPUPROBE_TEST_LEFTOVER"  # the test's own marker, to end whatever a test started
TEST_TIMEOUT_S = 120  # a bound on a hang, not a measurement


def _marked(token: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if p.environ().get(MARK) == token:
                out.append(p)
    return out


@pytest.fixture
def token() -> Iterator[str]:
    t = secrets.token_hex(8)
    yield t
    procs = _marked(t)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=10)


def _run(tmp_path: Path, token: str, script: str, *, kill: bool = False) -> RunResult:
    result = run_command(
        ["sh", "-c", script],
        tmp_path / "r",
        hz=10,
        env={**os.environ, MARK: token},
        kill_leftovers=kill,
    )
    return finish_run(result)


def _sleeps(token: str) -> dict[int, list[str]]:
    out = {}
    for p in _marked(token):
        with contextlib.suppress(psutil.Error):
            if p.name() == "sleep" and p.status() != psutil.STATUS_ZOMBIE:
                out[p.pid] = p.cmdline()
    return out


def test_a_background_child_is_named(tmp_path: Path, token: str) -> None:
    r = _run(tmp_path, token, "sleep 30 & exit 3")
    assert r.exit_code == 3  # the command's, as before
    alive = _sleeps(token)
    assert list(alive.values()) == [["sleep", "30"]]  # it runs on; gpuprobe only says so
    (pid,) = alive
    assert r.leftovers == (pid,)
    (f,) = [f for f in r.findings if f.id == "monitor-leftover-processes"]
    assert f.status is Status.WARN
    assert "leaving 1 process(es) running" in f.title
    assert f"kill {pid}" in f.fix and "--kill-leftovers" in f.fix
    (line,) = f.details
    assert line.startswith(f"pid {pid}: sleep 30 (found: ") and "process group" in line
    (ev,) = [e for e in read_timeline(r.timeline).events if e["kind"] == "leftovers"]
    assert ev["still_running"] == [pid] and ev["ended"] == [] and ev["kill"] is False


def test_setsid_and_an_unmarked_child_are_found(tmp_path: Path, token: str) -> None:
    # setsid: a session and group of its own, its parent gone: only the marker finds it;
    # env -u: no marker, but still in the command's process group
    script = f"setsid sleep 31 & env -u {RUN_ID_ENV} sleep 32 & exit 0"
    r = _run(tmp_path, token, script)
    alive = {tuple(cmd): pid for pid, cmd in _sleeps(token).items()}
    assert set(alive) == {("sleep", "31"), ("sleep", "32")}
    assert sorted(r.leftovers) == sorted(alive.values())
    (f,) = [f for f in r.findings if f.id == "monitor-leftover-processes"]
    lines = {ln.split(":")[0]: ln for ln in f.details}
    assert "GPUPROBE_RUN_ID" in lines[f"pid {alive['sleep', '31']}"]
    assert "process group" not in lines[f"pid {alive['sleep', '31']}"]
    assert "process group" in lines[f"pid {alive['sleep', '32']}"]
    assert "GPUPROBE_RUN_ID" not in lines[f"pid {alive['sleep', '32']}"]


def test_kill_leftovers_ends_them(tmp_path: Path, token: str) -> None:
    r = _run(tmp_path, token, "sleep 33 & setsid sleep 34 & exit 0", kill=True)
    assert _sleeps(token) == {}  # both ended, the setsid one too
    assert len(r.leftovers) == 2
    (f,) = [f for f in r.findings if f.id == "monitor-leftover-processes"]
    assert f.status is Status.INFO and "ended them" in f.title
    ev = {e["kind"]: e for e in read_timeline(r.timeline).events}["leftovers"]
    assert sorted(ev["ended"]) == sorted(r.leftovers) and ev["still_running"] == []


def test_a_command_that_waits_leaves_nothing_and_others_are_not_counted(
    tmp_path: Path, token: str
) -> None:
    # a sleep of the test's own, started before the run: not the command's to answer for
    mine = subprocess.Popen(["sleep", "35"], env={**os.environ, MARK: token})
    try:
        r = _run(tmp_path, token, "sleep 0.2 & wait")
        assert r.leftovers == ()
        assert "monitor-leftover-processes" not in {f.id for f in r.findings}
        assert mine.poll() is None
    finally:
        mine.kill()
        mine.wait()


def test_the_cli_flag_and_json(tmp_path: Path, token: str) -> None:
    out = tmp_path / "r"
    argv = gpuprobe_argv("run", "--json", "--kill-leftovers", "--out", str(out), "--")
    p = subprocess.run(
        [*argv, "sh", "-c", "setsid sleep 36 & exit 0"],
        env={**env(), MARK: token},
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT_S,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert _sleeps(token) == {}
    doc = json.loads(p.stdout)
    (f,) = [f for f in doc["findings"] if f["id"] == "monitor-leftover-processes"]
    (line,) = f["details"]
    assert f["status"] == "info" and ": sleep 36 (found: " in line and "GPUPROBE_RUN_ID" in line


def _pack(token: str, script: str, *, kill: bool) -> PackReport:
    with _marked_env(token):
        return pack(["sh", "-c", script], "1,2", hz=5, kill_leftovers=kill)


@contextlib.contextmanager
def _marked_env(token: str) -> Iterator[None]:
    """The test's marker in gpuprobe's environment while pack runs (pack passes it on)."""
    os.environ[MARK] = token
    try:
        yield
    finally:
        del os.environ[MARK]


def test_pack_names_what_each_level_left(token: str) -> None:
    r = _pack(token, "setsid sleep 37 & exit 0", kill=False)
    assert [len(lv.leftovers) for lv in r.levels] == [1, 2]  # one per copy, N=1 then N=2
    assert len(_sleeps(token)) == 3  # they run on: pack only says so
    found = [f for f in r.findings if f.id == "pack-leftover-processes"]
    assert [(f.subject, f.status) for f in found] == [("n=1", Status.WARN), ("n=2", Status.WARN)]
    assert all(d.endswith(": sleep 37") for f in found for d in f.details)
    assert {int(d.split()[1].rstrip(":")) for f in found for d in f.details} == set(_sleeps(token))


def test_pack_kill_leftovers_ends_them_before_the_next_level(token: str) -> None:
    r = _pack(token, "sleep 38 & exit 0", kill=True)
    assert _sleeps(token) == {}
    assert [(len(lv.leftovers), lv.leftovers_ended) for lv in r.levels] == [(1, True), (2, True)]
    found = [f for f in r.findings if f.id == "pack-leftover-processes"]
    assert [f.status for f in found] == [Status.INFO, Status.INFO]


def test_one_that_ignores_sigterm_is_killed(token: str) -> None:
    p = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"],
        env={**os.environ, MARK: token, RUN_ID_ENV: "t" + token},
        stdout=subprocess.PIPE,
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        found = [
            lo for lo in find_leftovers("t" + token, command_pid=None, started=0) if lo.pid == p.pid
        ]
        assert [lo.found_by for lo in found] == [("marker",)]
        ended, left = end_processes(found, grace_s=0.5)
        assert (ended, left) == ([p.pid], [])
        # psutil reaped it (our child): SIGKILL after the grace, TERM was ignored
        assert found[0].process is not None and found[0].process.returncode == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
