"""Traces of odd but legal shapes: kernels alone (no ops, no runtime calls, no steps), and steps
recorded out of order."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gpuprobe.core.errors import InputError
from gpuprobe.tools.diagnose.engine import diagnose
from gpuprobe.tools.diagnose.show.text import render_text


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "H100"}]}, f)
    return path


def test_kernels_alone_are_judged_not_a_traceback(tmp_path: Path) -> None:
    # 1000 kernels of 20 µs every 50 µs: busy 40 %, and no host event to blame for the rest
    kernels = [
        {"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7,
         "ts": 1000 + i * 50.0, "dur": 20.0, "args": {"device": 0, "stream": 7}}
        for i in range(1000)
    ]  # fmt: skip
    d = diagnose(_write(tmp_path / "k.json.gz", kernels))
    by = {f.id: f for f in d.findings}
    assert by["untraced-host"].status.value == "ok"  # no gap of 1 ms or more to point at
    assert by["gpu-idle"].status.value == "warn"
    assert abs(d.summary.gpu_busy_fraction - 0.4) < 0.01


def test_steps_out_of_time_order_read_low_to_high(tmp_path: Path) -> None:
    steps = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
         "ts": ts, "dur": 900.0}
        for n, ts in ((2, 1000.0), (1, 2000.0))
    ]  # fmt: skip
    text = render_text(diagnose(_write(tmp_path / "s.json.gz", steps)))
    assert "2 steps (1..2)" in text and "(2..1)" not in text


def test_a_trace_too_big_for_the_free_memory_is_told_before_the_analysis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuprobe.platform.hardware.host as host
    from gpuprobe.tools.diagnose.engine import ANALYSIS_MIB_PER_MILLION_EVENTS

    kernels = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000 + i * 50.0,
         "dur": 20.0, "args": {"device": 0, "stream": 7}}
        for i in range(2000)
    ]  # fmt: skip
    path = _write(tmp_path / "big.json.gz", kernels)
    need = 2000 / 1e6 * ANALYSIS_MIB_PER_MILLION_EVENTS * 2**20  # 389 KB for these 2000 events
    monkeypatch.setattr(host, "available_memory", lambda: int(need / 2))
    with pytest.raises(InputError, match=r"2,000 events; analysing them needs about") as e:
        diagnose(path)
    assert "GiB free" in str(e.value) and "schedule(active=N)" in str(e.value)
    monkeypatch.setattr(host, "available_memory", lambda: int(need * 2))
    assert diagnose(path).summary.events == 2000


def test_header_values_lose_terminal_escapes_and_keep_their_numbers(tmp_path: Path) -> None:
    from gpuprobe.tools.diagnose.kineto import read_trace

    path = tmp_path / "h.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(
            {
                "distributedInfo": {"rank": 3, "pg": list(range(3300))},
                "traceName": "\x1b[31mred\x1b[0m name",
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::add",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1.0,
                        "dur": 2.0,
                    }
                ],
            },
            f,
        )
    header = read_trace(path).header
    assert header["traceName"] == "red name"  # the escape sequences gone, no colour
    assert header["distributedInfo"] == {"rank": 3, "pg": list(range(3300))}
