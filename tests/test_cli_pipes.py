"""A reader that goes away (``gpuprobe doctor | head -1``) is a broken pipe, exit 141 and one line
on stderr, never "a check failed" (exit 1) nor a traceback (issue 41, item 12)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _support import DATA

TRACE = DATA / "diagnose" / "cpu_mlp_slow_loader.json.gz"
SNAPSHOT = DATA / "h200.json"


def _to_a_gone_reader(*args: str) -> subprocess.CompletedProcess[str]:
    """``gpuprobe ARGS`` with stdout a pipe whose reader has already exited."""
    reader = subprocess.Popen(["true"], stdin=subprocess.PIPE)
    reader.wait(timeout=30)
    assert reader.stdin is not None
    try:
        return subprocess.run(
            [sys.executable, "-m", "gpuprobe", *args],
            stdout=reader.stdin,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        reader.stdin.close()


@pytest.mark.parametrize(
    "args",
    [
        ("info", "--frameworks", "static"),  # a rich table
        ("info", "--frameworks", "static", "--json"),  # print_json
        ("doctor", "--from", str(SNAPSHOT)),  # the findings table, exit 0 when whole
        ("doctor", "--from", str(DATA / "rtx5090_torch_cu124.json"), "--json"),  # exit 1 whole
        ("diagnose", str(TRACE)),
        ("top", "--once"),
    ],
    ids=["info", "info-json", "doctor", "doctor-json-failing", "diagnose", "top"],
)
def test_a_reader_that_went_away_is_a_broken_pipe(args: tuple[str, ...]) -> None:
    r = _to_a_gone_reader(*args)
    assert r.returncode == 141, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("gpuprobe: broken pipe"), r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr


@pytest.mark.parametrize(
    "args",
    [("info", "--frameworks", "static", "--json"), ("diagnose", str(TRACE))],
    ids=["info-json", "diagnose"],
)
def test_a_closed_stdout_is_refused_in_one_line(args: tuple[str, ...]) -> None:
    """``gpuprobe ... >&-``: the report has nowhere to go; it was an AttributeError traceback
    (sys.stdout is None) or exit 0 with the report lost (issue 40, group 5)."""
    r = subprocess.run(
        [sys.executable, "-m", "gpuprobe", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        "gpuprobe: standard output is closed, so the report would be lost; send it "
        "somewhere (> FILE, or > /dev/null to drop it)"
    ]
