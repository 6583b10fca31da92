"""``gpuprobe top`` on small screens: the frame fits the terminal's width and height, keeps each
GPU's bars, power and clocks and the host's CPU and memory, and drops process rows first.

Both frames come from the real pynvml over the fake NVML library: an H200 snapshot with
processes on it, or no GPU (no library, no driver, or a driver with no device), whatever card
the machine running the tests has; the host's lines from this machine."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from _support import snapshot_dict


def _frame(view: Any, width: int, height: int | None) -> list[str]:
    buf = io.StringIO()
    con = Console(
        file=buf,
        width=width,
        height=height or 1000,
        force_terminal=height is not None,  # a terminal: its height limits the frame
        color_system=None,
        highlight=False,
    )
    con.print(view.render())
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def _view() -> Any:
    from gpuprobe.tools.monitor.live import TopView
    from gpuprobe.tools.monitor.sampler import Sampler

    sampler = Sampler(hz=10)
    sampler.__enter__()
    view = TopView(sampler)
    for _ in range(3):
        view.update(sampler.take())
    return sampler, view


def _h200(n_procs: int) -> dict[str, Any]:
    snap = snapshot_dict("h200.json")
    snap["gpus"][0]["processes"] = [
        {"pid": 5000 + i, "name": None, "used_memory": 2**30, "kind": "compute"}
        for i in range(n_procs)
    ]
    return snap


@pytest.mark.parametrize(("width", "height"), [(60, 15), (80, 24)])
def test_a_gpu_frame_fits_the_screen_and_keeps_the_essentials(
    fake_nvml: Any, width: int, height: int
) -> None:
    fake_nvml(_h200(30), utilization_samples={0: [(5000, 37)]})
    sampler, view = _view()
    try:
        lines = _frame(view, width, height)
        tall = _frame(view, width, None)  # a pipe: every process listed
    finally:
        sampler.__exit__(None, None, None)
    assert len(lines) <= height, lines
    assert all(len(line) <= width for line in lines), [x for x in lines if len(x) > width]
    assert all(line.strip() for line in lines), lines  # no blank lines
    text = "\n".join(lines)
    for essential in ("GPU 0", "util [", "mem  [", "power ", "Host  cpu [", "GiB"):
        assert essential in text, (essential, lines)
    assert lines[-1].lstrip().startswith(("mem", "load"))  # the host's memory line is there
    # the process table gave way first: all 30 rows in a pipe, fewer (or a count) on the screen
    listed = [x for x in lines if x.strip().startswith("50")]
    assert sum(x.strip().startswith("50") for x in tall) == 30
    assert len(listed) < 30
    if not listed:
        assert "30 processes (a taller screen lists them)" in text


@pytest.mark.parametrize(
    ("init_error", "n_gpus"),
    [(12, 1), (9, 1), (None, 0)],
    ids=["no-library", "driver-not-loaded", "no-device"],
)
def test_a_frame_without_a_gpu_fits_60_by_15(
    fake_nvml: Any, init_error: int | None, n_gpus: int
) -> None:
    # the premise from the fake NVML, not from this machine: a card here must not change it
    snap = _h200(0)
    snap["gpus"] = snap["gpus"][:n_gpus]
    fake_nvml(snap, init_error=init_error)
    sampler, view = _view()
    try:
        lines = _frame(view, 60, 15)
    finally:
        sampler.__exit__(None, None, None)
    assert len(lines) <= 15 and all(len(x) <= 60 for x in lines), lines
    assert all(line.strip() for line in lines), lines
    text = "\n".join(lines)
    assert "No GPU" in text and "Host  cpu [" in text
