"""``gpuprobe top`` as a person uses it: in a terminal, ``q`` quits (a pty stands in for the
terminal); with no GPU it lists the processes using the CPU."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import psutil
import pytest
from cli_helper import env, gpuprobe_argv

from gpuprobe.tools.monitor.live import TopView
from gpuprobe.tools.monitor.sampler import Sampler


def _read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    out = b""
    end = time.monotonic() + timeout
    while needle not in out and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def _top_in_a_pty(term: str, frames: int) -> tuple[bytes, int]:
    """``gpuprobe top`` on a pty with ``TERM=term``: what it showed by its ``frames``-th frame
    (each read until a "Host" line), then ``q``; returns that output and the exit code."""
    master, slave = pty.openpty()
    e = env()
    e.update(COLUMNS="100", LINES="40", TERM=term)
    proc = subprocess.Popen(
        gpuprobe_argv("top", "--interval", "0.2"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=e,
        close_fds=True,
    )
    os.close(slave)
    try:
        shown = _read_until(master, b"Host", 60)
        for _ in range(frames - 1):
            shown += _read_until(master, b"Host", 10)
        assert b"Host" in shown, shown[-500:]
        os.write(master, b"q")
        code = proc.wait(timeout=20)  # without the key it runs until interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return shown, code


@pytest.mark.skipif(sys.platform != "linux", reason="a pty stands in for the terminal")
def test_q_quits_top_in_a_terminal() -> None:
    _, code = _top_in_a_pty("xterm", 1)
    assert code == 0


def test_no_gpu_lists_the_processes_using_the_cpu() -> None:
    spin = "import time\nt = time.time()\nwhile time.time() - t < 20: pass\n"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        with Sampler(hz=5) as sampler:
            view = TopView(sampler)
            view.cpu_processes()  # the first reading
            time.sleep(1.0)  # the window measured, not a stand-in for work
            rows = view.cpu_processes(n=50)
    finally:
        busy.kill()
        busy.wait()
    by_pid = {r[0]: r for r in rows}
    assert busy.pid in by_pid, rows[:5]
    _pid, name, user, cpu, rss = by_pid[busy.pid]
    # a spinning process keeps most of a core when it gets one; on a loaded 2-core host, a share
    assert cpu > 20, cpu
    assert rss > 1_000_000 and name.startswith("python")
    assert user == psutil.Process(os.getpid()).username()


def test_a_q_typed_during_any_wait_quits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyboard is read once per wait: a ``q`` that arrives in the second read of a refresh
    quits too (it used to be compared with ``Q`` only, and lost)."""
    import contextlib
    import io

    from replay_nvml import no_nvml
    from rich.console import Console

    from gpuprobe.tools.monitor.show import top as top_view

    reads: list[float] = []

    def wait(seconds: float) -> str:
        reads.append(seconds)
        if len(reads) == 2:
            return "q"
        if len(reads) > 2:
            time.sleep(seconds)
        return ""

    monkeypatch.setattr(top_view, "_keys", lambda: contextlib.nullcontext(wait))
    console = Console(file=io.StringIO(), force_terminal=True, width=100, height=40)
    view = top_view.run_top(interval=0.2, iterations=5, console=console, nvml=no_nvml)
    assert len(reads) == 2, reads  # quit at the key, before the first frame was sampled
    assert len(view.samples) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="a pty stands in for the terminal")
def test_top_on_a_dumb_terminal_prints_frames_and_q_quits() -> None:
    """TERM=dumb cannot redraw in place: each frame is printed (it used to be blank until the
    end) and ``q`` quits."""
    shown, code = _top_in_a_pty("dumb", 2)
    assert code == 0
    assert shown.count(b"Host") >= 2, shown[-500:]
    assert b"\x1b[?1049h" not in shown  # no alternate screen on a terminal that has none
