"""``gpuprobe run`` under fault injection: a `$` pair in the command, a full disk (a file size
limit stands in for it: the same failed write), a hang-up, a process-group SIGINT, a broken pipe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cli_helper import env, gpuprobe_argv, run_gpuprobe, wait_for

from gpuprobe.tools.monitor.timeline import TIMELINE_NAME, read_timeline

PY = sys.executable
# Counts SIGINT and SIGHUP for a while after saying it is ready, then exits with 10 + the count.
COUNTER = """
import pathlib, signal, sys, time
n = 0
def on(sig, frame):
    global n
    n += 1
signal.signal(signal.SIGINT, on)
signal.signal(signal.SIGHUP, on)
pathlib.Path(sys.argv[1]).write_text("ready")
t = time.monotonic()
while time.monotonic() - t < 2.0:
    time.sleep(0.02)
sys.exit(10 + n)
"""
# gpuprobe with a file size limit: writes past LIMIT fail with EFBIG, as with a full disk.
FSIZE_BOOT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
from gpuprobe.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_dollar_pairs_in_the_command_are_drawn_as_text(tmp_path: Path) -> None:
    out = tmp_path / "r"
    r = run_gpuprobe(
        "run", "--out", str(out), "--", "sh", "-c", "echo ${A}_${B} $$ >/dev/null; exit 3"
    )
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    assert (out / "report.png").stat().st_size > 10_000
    assert (out / "report.html").stat().st_size > 10_000
    svg = tmp_path / "x.svg"
    r = run_gpuprobe("plot", str(out), "--out", str(svg))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "<svg" in svg.read_text()


def test_a_full_disk_keeps_every_whole_sample_and_the_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "r"
    limit = 12_000  # bytes: the header and a few samples fit, the charts do not
    r = subprocess.run(
        [
            PY,
            "-c",
            FSIZE_BOOT,
            str(limit),
            "run",
            "--hz",
            "20",
            "--out",
            str(out),
            "--",
            "sh",
            "-c",
            "sleep 1.5; exit 7",
        ],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
        check=False,
    )
    assert r.returncode == 7, r.stderr
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if "recording stopped" in x]
    assert len(lines) == 1 and "File too large" in lines[0]  # said once
    data = (out / TIMELINE_NAME).read_bytes()
    assert 0 < len(data) <= limit and data.endswith(b"\n")  # no half line left
    tl = read_timeline(out)
    assert tl.dropped_lines == 0
    assert len(tl.samples) >= 3
    assert "exit code 7" in r.stderr  # the summary still knows it
    assert "no report" in r.stderr


def _signal_the_counter(rec: Path, ready: Path, send: Callable[[int], None]) -> tuple[int, str]:
    """Run COUNTER under gpuprobe in a new session (its own group, no terminal: as in CI or
    under nohup), call ``send(gpuprobe's pid)`` once it is ready; (exit code, stderr)."""
    p = subprocess.Popen(
        gpuprobe_argv("run", "--hz", "10", "--out", str(rec), "--", PY, "-c", COUNTER, str(ready)),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(ready.exists, what="the command to start")
        send(p.pid)
        _, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, stderr


def test_sighup_is_handled_like_sigterm(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    code, stderr = _signal_the_counter(
        rec, tmp_path / "ready", lambda pid: os.kill(pid, signal.SIGHUP)
    )
    assert code == 11, stderr  # the command saw one SIGHUP and ended on its own
    tl = read_timeline(rec)
    assert tl.exit_code == 11
    sigs = [e for e in tl.events if e["kind"] == "signal"]
    assert [(e["signal"], e["forwarded"]) for e in sigs] == [("SIGHUP", True)]
    assert (rec / "report.html").exists()


def test_sigint_to_the_whole_group_reaches_the_command_once(tmp_path: Path) -> None:
    code, stderr = _signal_the_counter(
        tmp_path / "rec", tmp_path / "ready", lambda pid: os.killpg(pid, signal.SIGINT)
    )
    assert code == 11, stderr  # 10 + one SIGINT, not 12 (kill -INT -PGID)


def test_a_broken_pipe_is_reported(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    reader_gone = subprocess.Popen(["true"], stdin=subprocess.PIPE)
    reader_gone.wait(timeout=30)
    r = subprocess.run(
        gpuprobe_argv("run", "--json", "--no-report", "--out", str(rec), "--", "true"),
        stdout=reader_gone.stdin,  # a pipe whose reader has exited
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        timeout=120,
        check=False,
    )
    assert reader_gone.stdin is not None
    reader_gone.stdin.close()
    assert r.returncode == 141, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("gpuprobe: broken pipe")
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
    assert read_timeline(rec).exit_code == 0  # the recording itself is whole
