"""``profile`` and ``run`` are invisible to the job (issue 40, group 1): the script's signal
dispositions, its ``sys.path``, its forked children, its threads and its tracebacks are what they
are without gpuprobe. Real scripts under the CPU build of torch; each test runs the command
through the real CLI with a bound on its time, so that a hang fails instead of blocking."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPTS = Path(__file__).parent / "scripts"
PY = sys.executable
BOUND_S = 120  # s: every command here takes seconds; a hang is a failure, not a wait


def _gpuprobe(*args: str, cwd: Path = SCRIPTS, env: dict | None = None, **kw):
    return subprocess.run(
        [PY, "-m", "gpuprobe", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=BOUND_S,
        **kw,
    )


@pytest.fixture(autouse=True)
def _keep_statuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The statuses are counted after the command: keep them (the folder is removed otherwise)."""
    monkeypatch.setenv("GPUPROBE_KEEP_STATUS", "1")


def _statuses(out: Path) -> list[Path]:
    return sorted((out / ".gpuprobe-profile").glob("proc-*.json"))


def test_a_sigterm_handler_the_script_installs_during_the_window_is_kept(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    monkeypatch.setenv("CKPT", str(ckpt))
    out = tmp_path / "p"
    # the window (steps 10..16) is open when the script installs its handler at step 11
    r = _gpuprobe("profile", "--json", "--out", str(out), "--", PY, "term_handler.py")
    assert r.returncode == 0, r.stderr[-2000:]  # its handler ran: exit 0, not 143
    assert ckpt.read_text() == "saved"
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 0 and len(doc["traces"]) == 1


@pytest.mark.parametrize("fork_at", ["13", "25"], ids=["in-window", "after-window"])
def test_forked_helpers_exit_and_leave_no_status(tmp_path, monkeypatch, fork_at):
    monkeypatch.setenv("FORK_AT", fork_at)
    monkeypatch.setenv("FORKS", "3")
    out = tmp_path / "p"
    r = _gpuprobe("profile", "--json", "--out", str(out), "--", PY, "forker.py")
    assert r.returncode == 0, r.stderr[-2000:]
    took = json.loads(r.stderr.split("children ", 1)[1].splitlines()[0])
    assert len(took) == 3 and max(took) < 30  # each helper exited (it hung for ever before)
    assert len(_statuses(out)) == 1  # the parent's only: the children are inert
    doc = json.loads(r.stdout)
    assert len(doc["traces"]) == 1 and doc["verdicts"] == []  # one trace, diagnosed once
    assert doc["processes"][0]["steps"] == 30


def test_two_hundred_forks_under_a_dormant_run_leave_one_status(tmp_path):
    code = (
        "import atexit, os, torch\n"
        "for _ in range(200):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        # a child's exit handlers run (where a status would be written), then it leaves without
        # the CPU build of torch's finalization: 0.7 s a child, 140 s for 200 (CI timed out)
        "        atexit._run_exitfuncs()\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "print('forked', flush=True)\n"
    )
    out = tmp_path / "r"
    r = _gpuprobe("run", "--no-report", "--out", str(out), "--", PY, "-c", code)
    assert r.returncode == 0 and "forked" in r.stdout, r.stderr[-2000:]
    assert len(_statuses(out)) == 1


def _daemon_trainer(tmp_path: Path, stall: str) -> subprocess.CompletedProcess[str]:
    """``profile --json`` of daemon_trainer.py: the main thread exits mid-window while its
    daemon thread trains (``stall``: "1" when the thread then stalls for a minute)."""
    env = {**os.environ, "STALL": stall}
    out = str(tmp_path / "p")
    plain = subprocess.run([PY, "daemon_trainer.py"], cwd=SCRIPTS, env=env, timeout=BOUND_S)
    assert plain.returncode == 0  # as it ends without gpuprobe
    return _gpuprobe("profile", "--json", "--out", out, "--", PY, "daemon_trainer.py", env=env)


def test_a_daemon_thread_training_when_the_main_thread_exits_closes_its_own_window(tmp_path):
    r = _daemon_trainer(tmp_path, "")
    assert r.returncode == 0, r.stderr[-2000:]  # 139 before: Kineto stopped from the atexit
    doc = json.loads(r.stdout)
    (window,) = doc["processes"][0]["windows"]
    assert window["state"] == "cut short: the process exited"
    (trace,) = doc["traces"]  # written on the thread that trained, at its next step's end
    assert window["trace"] == trace and Path(trace).stat().st_size > 0


def test_a_stalled_daemon_thread_keeps_its_window_and_the_trace_is_said_missing(tmp_path):
    r = _daemon_trainer(tmp_path, "1")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["traces"] == []
    (note,) = [n for n in doc["notes"] if "no trace" in n]
    assert "did not reach the end of a step within 2 s" in note and "warm-up" not in note


def test_a_process_that_only_asks_whether_torch_is_there_has_no_hook(tmp_path):
    code = (
        "import importlib.util, sys, threading\n"
        "assert importlib.util.find_spec('torch') is not None\n"
        "hooked = sys.modules.get('_gpuprobe_profile')\n"
        "print(hooked is not None and hooked._hook is None, threading.active_count())\n"
    )
    out = tmp_path / "r"
    r = _gpuprobe("run", "--no-report", "--out", str(out), "--", PY, "-c", code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "1"]  # no hook, no poller thread
    assert _statuses(out) == []


def test_a_trainer_left_running_by_the_command_is_said_as_not_yet_known(tmp_path):
    import time

    stop = tmp_path / "stop"
    go = tmp_path / "go"  # the trainer steps once profile is over: its window comes after
    env = {**os.environ, "STOP_FILE": str(stop), "GO_FILE": str(go)}
    code = (  # starts its trainer detached, in a session of its own, and exits at once
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, 'long_job.py'], start_new_session=True,\n"
        "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(p.pid))\n"
    )
    out = tmp_path / "p"
    r = _gpuprobe("profile", "--json", "--out", str(out), "--", PY, "-c", code, env=env)
    trainer = int((tmp_path / "pid").read_text())
    try:
        doc = json.loads(r.stdout)
        assert r.returncode == 0 and doc["traces"] == []
        (note,) = doc["notes"]
        assert f"left 1 process(es) running (pid {trainer}; a detached child?)" in note
        assert "is not known" in note and "none imported torch" not in note
        # as the note says: its window is written under traces/ when it ends
        go.write_text("")
        end = time.monotonic() + BOUND_S
        while not list((out / "traces").glob("*.pt.trace.json.gz")):
            assert time.monotonic() < end
            time.sleep(0.2)
    finally:
        go.write_text("")
        stop.write_text("")
        end = time.monotonic() + BOUND_S
        while Path(f"/proc/{trainer}").exists() and time.monotonic() < end:
            time.sleep(0.1)


def _ignoring(*names: str):
    import signal

    def ignore() -> None:
        for name in names:
            signal.signal(getattr(signal, name), signal.SIG_IGN)

    return ignore


def test_ignored_sighup_and_sigint_reach_the_job_ignored(tmp_path):
    code = (
        "import os, signal\n"
        "print(signal.getsignal(signal.SIGHUP).name, signal.getsignal(signal.SIGINT).name)\n"
        "os.kill(os.getpid(), signal.SIGHUP)\n"
        "print('survived the hang-up', flush=True)\n"
    )
    # as `nohup gpuprobe run ... &` from a script: SIGHUP and SIGINT ignored from the start
    r = _gpuprobe(
        "run",
        "--no-report",
        "--out",
        str(tmp_path / "r"),
        "--",
        PY,
        "-c",
        code,
        preexec_fn=_ignoring("SIGHUP", "SIGINT"),
    )
    assert r.returncode == 0, r.stderr[-2000:]  # 129 before: the job died at the hang-up
    assert r.stdout.split("\n")[:2] == ["SIG_IGN SIG_IGN", "survived the hang-up"]


@pytest.mark.parametrize("pythonpath", [":{other}", "{other}:"], ids=["leading", "trailing"])
def test_an_empty_pythonpath_entry_still_means_the_working_directory(tmp_path, pythonpath):
    work, other, scripts = tmp_path / "work", tmp_path / "other", tmp_path / "scripts"
    for d in (work, other, scripts):
        d.mkdir()
    (work / "mine.py").write_text("WHERE = 'the working directory'\n")
    (scripts / "job.py").write_text("import mine\nprint(mine.WHERE)\n")
    env = {**os.environ, "PYTHONPATH": pythonpath.format(other=other)}
    r = _gpuprobe(
        "run",
        "--no-report",
        "--out",
        str(tmp_path / "r"),
        "--",
        PY,
        str(scripts / "job.py"),
        cwd=work,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "the working directory"


def test_the_users_sitecustomize_in_a_zip_on_pythonpath_still_runs(tmp_path):
    import os
    import zipfile

    zipped = tmp_path / "site.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("sitecustomize.py", "WHO = 'the user'\n")
    env = {**os.environ, "PYTHONPATH": str(zipped)}
    code = "import sys; print(sys.modules['sitecustomize'].WHO)"
    r = _gpuprobe("run", "--no-report", "--out", str(tmp_path / "r"), "--", PY, "-c", code, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "the user"  # gpuprobe's was the one imported, and no other


def _ends_mid_window(tmp_path: Path, end: str) -> subprocess.CompletedProcess[str]:
    """``profile --json`` of ends_mid_window.py, which ends its window the way ``end`` says."""
    out = str(tmp_path / "p")
    env = {**os.environ, "END": end}
    return _gpuprobe("profile", "--json", "--out", out, "--", PY, "ends_mid_window.py", env=env)


def test_sighup_to_gpuprobe_mid_window_writes_the_window_and_the_job_dies_by_it(tmp_path):
    r = _ends_mid_window(tmp_path, "hup_parent")
    assert r.returncode == 128 + 1 and "not ended" not in r.stderr  # SIGHUP, as before
    doc = json.loads(r.stdout)
    (window,) = doc["processes"][0]["windows"]
    assert window["state"] == "cut short: SIGHUP" and len(doc["traces"]) == 1


def test_os_exit_mid_window_is_said_as_unknown_not_as_sigkill(tmp_path):
    r = _ends_mid_window(tmp_path, "os_exit")
    assert r.returncode == 3
    doc = json.loads(r.stdout)
    assert doc["traces"] == []
    (note,) = [n for n in doc["notes"] if "no trace" in n]
    assert "how is not known" in note and "after at least" in note
    assert "such as SIGKILL" not in note


def test_the_scripts_own_traceback_has_no_gpuprobe_frame(tmp_path):
    (tmp_path / "job.py").write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class D(Dataset):\n"
        "    def __len__(self): return 10\n"
        "    def __getitem__(self, i):\n"
        "        if i == 3: raise ValueError('bad sample 3')\n"
        "        return torch.ones(2)\n"
        "m = torch.nn.Linear(2, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "m(torch.ones(2)).sum().backward(); opt.step()\n"
        "for x in DataLoader(D()):\n"
        "    pass\n"
    )
    plain = subprocess.run([PY, "job.py"], capture_output=True, text=True, cwd=tmp_path)
    hooked = _gpuprobe(
        "run", "--no-report", "--out", str(tmp_path / "r"), "--", PY, "job.py", cwd=tmp_path
    )
    assert plain.returncode == hooked.returncode == 1

    def frames(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip().startswith("File ")]

    assert "ValueError: bad sample 3" in hooked.stderr
    assert frames(hooked.stderr) == frames(plain.stderr) and len(frames(plain.stderr)) >= 3
    assert "_gpuprobe" not in hooked.stderr


def test_profile_later_lists_the_now_trace_among_its_files(tmp_path):
    import os
    import time

    import gpuprobe

    out, stop = tmp_path / "job", tmp_path / "stop"
    env = {**os.environ, "STOP_FILE": str(stop)}
    cmd = [PY, "-m", "gpuprobe", "profile", "--later", "--json", "--out", str(out), "--"]
    job = subprocess.Popen(
        [*cmd, PY, "long_job.py"],
        env=env,
        cwd=SCRIPTS,
        stdout=subprocess.PIPE,
        text=True,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + 60
        while True:
            with __import__("contextlib").suppress(OSError, ValueError):
                if any(json.loads(f.read_text()).get("mode") for f in _statuses(out)):
                    break
            assert time.monotonic() < end and job.poll() is None
            time.sleep(0.1)
        now = gpuprobe.profile_now(out, steps=2)
        (trace,) = now.traces
    finally:
        stop.write_text("")
        stdout, err = job.communicate(timeout=BOUND_S)
    assert job.returncode == 0, err[-2000:]
    files = json.loads(stdout)["files"]
    assert trace in files
    assert str(Path(trace).parent / "diagnosis.html") in files


def test_the_summary_shows_every_timeline_finding_it_counts(tmp_path):
    r = _gpuprobe("profile", "--out", str(tmp_path / "p"), "--", PY, "-c", "print(1)")
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    (head,) = [i for i, line in enumerate(lines) if line.startswith("the run's timeline: ")]
    counted = sum(int(n) for n in re.findall(r"(\d+) \w+", lines[head].split(": ", 1)[1]))
    shown = [
        line for line in lines[head + 1 :] if re.match(r"  (OK|INFO|WARN|FAIL|SKIPPED) ", line)
    ]
    assert counted >= 1 and len(shown) == counted


def test_a_seconds_window_spans_the_seconds_asked_from_the_profilers_start(tmp_path):
    import gzip
    import os

    env = {**os.environ, "RUN_S": "6"}
    r = _gpuprobe(
        "profile",
        "--json",
        "--seconds",
        "2",
        "--delay",
        "0.5",
        "--out",
        str(tmp_path / "p"),
        "--",
        PY,
        "plain_loop.py",
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    (trace,) = doc["traces"]
    with gzip.open(trace, "rt") as f:
        ops = [e for e in json.load(f)["traceEvents"] if e.get("name") == "aten::linear"]
    span_s = (float(ops[-1]["ts"]) - float(ops[0]["ts"])) / 1e6  # the script's own work
    assert 1.8 <= span_s <= 3.0  # 0.65 s of a 2 s window before
    (window,) = doc["processes"][0]["windows"]
    assert 1.9 <= window["span_s"] <= 3.0
