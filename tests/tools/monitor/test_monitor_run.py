"""``gpuprobe run``: exit codes kept, signals forwarded, bad input refused, nothing lost on kill."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helper import env, gpuprobe_argv, run_gpuprobe, wait_for

from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME, read_timeline

PY = sys.executable
# Waits for a signal; says it is ready by creating a file.
WAITER = """
import pathlib, signal, sys, time
out, ready = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def on_term(sig, frame):
    out.write_text("TERM")
    sys.exit(7)
signal.signal(signal.SIGTERM, on_term)
ready.write_text("ready")
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    out.write_text(out.read_text() + "INT" if out.exists() else "INT")
    sys.exit(5)
"""


def _events(tl_dir: Path, kind: str) -> list[dict]:
    return [e for e in read_timeline(tl_dir).events if e["kind"] == kind]


@pytest.mark.parametrize(("code", "expected"), [("0", 0), ("3", 3)])
def test_exit_code_is_kept(tmp_path: Path, code: str, expected: int) -> None:
    r = run_gpuprobe(
        "run",
        "--no-report",
        "--out",
        str(tmp_path),
        "--",
        PY,
        "-c",
        f"import sys; sys.exit({code})",
    )
    assert r.returncode == expected, r.stderr
    tl = read_timeline(tmp_path)
    assert tl.exit_code == expected
    assert f"exited with code {expected}" in " ".join(r.stderr.split())  # wrapped at 80


def test_killed_command_gives_128_plus_signal(tmp_path: Path) -> None:
    r = run_gpuprobe(
        "run",
        "--no-report",
        "--out",
        str(tmp_path),
        "--",
        PY,
        "-c",
        "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
    )
    assert r.returncode == 128 + signal.SIGKILL
    assert read_timeline(tmp_path).exit_code == 137
    assert "137 (SIGKILL)" in r.stderr


def test_command_not_found_or_not_executable(tmp_path: Path) -> None:
    r = run_gpuprobe("run", "--out", str(tmp_path / "a"), "--", "no-such-command-gpuprobe")
    assert r.returncode == 127
    assert "gpuprobe: no-such-command-gpuprobe: command not found" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "a" / TIMELINE_NAME).exists()
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    r = run_gpuprobe("run", "--out", str(tmp_path / "b"), "--", str(script))
    assert r.returncode == 127 and "not executable" in r.stderr


def test_unwritable_out_is_refused_before_the_command_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    marker = tmp_path / "ran"
    r = run_gpuprobe(
        "run",
        "--out",
        str(blocker / "sub"),
        "--",
        PY,
        "-c",
        f"open({str(marker)!r}, 'w').write('ran')",
    )
    assert r.returncode == 2
    assert "cannot create --out" in r.stderr and "Traceback" not in r.stderr
    assert not marker.exists()
    r = run_gpuprobe("run", "--out", str(blocker), "--", PY, "-c", "pass")
    assert r.returncode == 2 and "is a file" in r.stderr


def test_no_command_is_a_usage_error(tmp_path: Path) -> None:
    r = run_gpuprobe("run", "--out", str(tmp_path))
    assert r.returncode == 2 and "no command given" in r.stderr


@pytest.mark.parametrize(
    ("sig", "expected_code", "marker_text"),
    [(signal.SIGTERM, 7, "TERM"), (signal.SIGINT, 5, "INT")],
)
def test_signal_is_forwarded_and_waited_for(
    tmp_path: Path, sig: signal.Signals, expected_code: int, marker_text: str
) -> None:
    out, ready, rec = tmp_path / "out", tmp_path / "ready", tmp_path / "rec"
    p = subprocess.Popen(
        gpuprobe_argv(
            "run", "--hz", "10", "--out", str(rec), "--", PY, "-c", WAITER, str(out), str(ready)
        ),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(ready.exists, what="the command to start")
        p.send_signal(sig)
        _, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == expected_code, stderr
    assert out.read_text() == marker_text  # the command got it exactly once
    sigs = _events(rec, "signal")
    assert [(e["signal"], e["forwarded"]) for e in sigs] == [(sig.name, True)]
    tl = read_timeline(rec)
    assert tl.exit_code == expected_code
    assert (rec / "report.html").exists() and (rec / "report.png").exists()


def test_gpuprobe_killed_leaves_a_readable_timeline(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    p = subprocess.Popen(
        gpuprobe_argv(
            "run",
            "--hz",
            "20",
            "--out",
            str(rec),
            "--",
            PY,
            "-c",
            "import time\nwhile True: time.sleep(0.05)",
        ),
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    timeline = rec / TIMELINE_NAME

    def enough_on_disk() -> bool:
        return timeline.exists() and timeline.read_bytes().count(b'"type":"sample"') >= 30

    child = None
    try:
        wait_for(enough_on_disk, what="30 samples on disk")
        child = read_timeline(rec).header.pid
        p.kill()  # SIGKILL: no handler, no flush, no end line
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    tl = read_timeline(rec)
    assert len(tl.samples) >= 30
    assert tl.end is None
    s = summarize(tl)
    assert s.findings[0].id == "monitor-incomplete"
    # and `gpuprobe plot` reads it too
    r = run_gpuprobe("plot", str(rec), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["samples"] == len(tl.samples) and doc["complete"] is False
