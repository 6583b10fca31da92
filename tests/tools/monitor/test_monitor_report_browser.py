"""The HTML report opened in a real browser (headless Chromium): it renders, every chart decodes,
and nothing is fetched from a network."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from matplotlib.image import imread
from replay_nvml import ReplayNvml

from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.run import run_command
from gpuprobe.tools.monitor.show.html import write_run_report
from gpuprobe.tools.monitor.timeline import read_timeline

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _report(tmp_path: Path) -> Path:
    replay = ReplayNvml("throttled.jsonl")
    res = run_command(
        [sys.executable, "-c", BUSY],
        tmp_path / "rec",
        hz=10.0,
        nvml=replay,
        on_started=lambda pid: setattr(replay, "live_pid", pid),
    )
    tl = read_timeline(res.timeline)
    html = tmp_path / "rec" / "report.html"
    write_run_report(tl, summarize(tl), html_path=html)
    return html


def test_report_renders_in_chromium(tmp_path: Path, chromium: str) -> None:
    html = _report(tmp_path)
    text = html.read_text()
    # self-contained: no URL to fetch anywhere in src/href, no CDN
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert text.count('src="data:image/png;base64,') == 2

    dom = _chromium(chromium, "--virtual-time-budget=5000", "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None
    assert 'data-images="2"' in body.group(0)
    assert 'data-images-ok="2"' in body.group(0), "a chart did not decode in the browser"
    assert "sw_thermal_slowdown" in dom.stdout

    shot = tmp_path / "shot.png"
    r = _chromium(chromium, "--window-size=1300,1800", f"--screenshot={shot}", html.as_uri())
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = imread(shot)[..., :3]
    assert img.shape[0] == 1800 and img.shape[1] == 1300
    # not a blank page: the WARN badge (#ef6c00) and dark text are on screen
    orange = np.all(np.abs(img - np.array([0xEF, 0x6C, 0x00]) / 255) < 0.06, axis=-1)
    assert orange.sum() > 50
    assert (img.mean(axis=-1) < 0.3).sum() > 5000
