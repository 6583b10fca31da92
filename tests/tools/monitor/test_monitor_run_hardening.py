"""``gpuprobe run`` under fault injection: a `$` pair in the command, a full disk (a file size
limit stands in for it: the same failed write; or a writer made to fail midway), a hang-up, a
process-group SIGINT, a broken pipe; and the modes of the files that hold the command line."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from cli_helper import env, gpuprobe_argv, run_gpuprobe, wait_for

import gpuprobe
import gpuprobe.ui.chart as chart
from gpuprobe.core.files import atomic_open
from gpuprobe.tools.monitor.run import finish_run
from gpuprobe.tools.monitor.show import html as html_view
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
# The same limit, set just before summary.json is written: the timeline before it is whole, however
# large a sample is on this machine (a card's header alone can pass 2 kB), and the summary is the
# only file that meets the limit (the report after it meets it too).
SUMMARY_FSIZE_BOOT = """
import resource, signal, sys
from gpuprobe.tools.monitor.show import files
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
real = files.write_atomic
def limited(path, *args, **kwargs):
    if path.name == "summary.json":
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
    return real(path, *args, **kwargs)
files.write_atomic = limited
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


COMMAND = ("--", "sh", "-c", "sleep 1.5; exit 7")


def _run_with_file_limit(
    limit: int, out: Path, boot: str = FSIZE_BOOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-c", boot, str(limit), "run", "--hz", "20", "--out", str(out), *COMMAND],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
        check=False,
    )


def test_a_full_disk_keeps_every_whole_sample_and_the_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "r"
    limit = 12_000  # bytes: the header and a few samples fit, the charts do not
    r = _run_with_file_limit(limit, out)
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
    text = " ".join(r.stderr.split())  # the note as one line (the view wraps it at 80 columns)
    assert text.count("no report") == 1
    assert f"no report: {out / 'report.png'}: cannot write it (File too large)" in text
    # the chart did not fit: no cut report.png (it was 12 000 bytes of a PNG before), no temp
    assert not (out / "report.png").exists()
    left = sorted(p.name for p in out.iterdir() if p.is_file())
    assert left == ["summary.json", TIMELINE_NAME], left
    assert json.loads((out / "summary.json").read_text())["exit_code"] == 7


def test_a_summary_that_does_not_fit_leaves_no_cut_file(tmp_path: Path) -> None:
    out = tmp_path / "r"
    r = _run_with_file_limit(100, out, SUMMARY_FSIZE_BOOT)  # bytes: a summary's first line or two
    assert r.returncode == 7, r.stderr
    assert "Traceback" not in r.stderr
    text = " ".join(r.stderr.split())  # each note is one line (the view wraps at 80 columns)
    assert text.count(f"cannot write {out / 'summary.json'}: File too large") == 1
    # before: a summary.json cut at the limit was left, a JSON document no reader could load
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [TIMELINE_NAME]
    tl = read_timeline(out)  # the premise: the timeline did not meet the limit, whole
    assert tl.dropped_lines == 0 and len(tl.samples) >= 3 and "recording stopped" not in r.stderr


def test_a_failed_summary_write_leaves_no_empty_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuprobe.tools.monitor.show import files as run_files

    out = tmp_path / "r"
    result = gpuprobe.run(["true"], out, hz=10, report=False, hook=False)

    def full(path: object, data: object, *, private: bool = False) -> Path:
        # the real writer, with the disk filling up midway through the bytes
        with atomic_open(path, private=private) as f:  # type: ignore[arg-type]
            f.write(b"{")
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_files, "write_atomic", full)
    monkeypatch.setattr(html_view, "write_atomic", full)
    monkeypatch.setattr(html_view, "charts_unavailable", lambda: None)
    monkeypatch.setattr(chart, "atomic_open", _full_midway)
    done = finish_run(result, run_files.write_run_files)
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [TIMELINE_NAME]
    assert done.files == (out / TIMELINE_NAME,)
    assert len(done.notes) == 2  # summary.json, then the report (the chart first)
    for note in done.notes:
        assert "\n" not in note and "No space left on device" in note
    assert "summary.json" in done.notes[0] and "report.png" in done.notes[1]


@contextlib.contextmanager
def _full_midway(path: Path, *, private: bool = False) -> Iterator[BinaryIO]:
    with atomic_open(path, private=private) as f:
        f.write(b"\x89PNG")
        raise OSError(errno.ENOSPC, "No space left on device")
        yield f


def test_files_holding_the_command_are_private(tmp_path: Path) -> None:
    out = tmp_path / "new" / "r"
    old = os.umask(0o022)
    try:
        r = run_gpuprobe("run", "--out", str(out), "--", "sh", "-c", "exit 0", "TOKEN=s3cret")
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir() if p.is_file()}
    assert set(modes) == {TIMELINE_NAME, "summary.json", "report.html", "report.png"}, modes
    assert set(modes.values()) == {0o600}, modes
    assert "s3cret" in (out / TIMELINE_NAME).read_text()  # what the modes protect


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
