"""The timeline on disk: round trip, flushes, damaged files read up to what is whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_nvml import DATA

from gpuprobe.core.errors import InputError
from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.tools.monitor.records import (
    GpuProcSample,
    GpuTick,
    HostSample,
    Sample,
    TimelineHeader,
    TreeSample,
)
from gpuprobe.tools.monitor.timeline import TIMELINE_NAME, TimelineWriter, read_timeline


def _sample(i: int) -> Sample:
    return Sample(
        t=100.0 + i,
        host=HostSample(cpu_percent=(10.0 * i, 5.5), memory_used=2**30, memory_available=2**31),
        tree=TreeSample(
            cpu_percent=99.5,
            rss=123,
            threads=3,
            processes=1,
            main_cpu_percent=99.5,
            main_thread_max_percent=98.0,
        ),
        gpus=(
            GpuTick(
                sample=GpuSample(
                    index=0,
                    time=100.0 + i,
                    utilization_gpu=i,
                    clock_event_reasons=("sw_power_cap",),
                ),
                processes=(GpuProcSample(pid=7, used_memory=5, sm_percent=i),),
            ),
        ),
        sampler_cpu_s=0.01 * i,
    )


def _write(tmp_path: Path, n: int = 5) -> Path:
    with TimelineWriter.create(tmp_path) as w:
        w.write_header(TimelineHeader(started=100.0, hz=1.0, command=("x",), pid=7))
        for i in range(n):
            w.write_sample(_sample(i))
        w.write_event("signal", signal="SIGTERM", forwarded=True)
        w.write_end(exit_code=0, sampler_cpu_s=0.5)
    return tmp_path / TIMELINE_NAME


def test_round_trip(tmp_path: Path) -> None:
    path = _write(tmp_path)
    tl = read_timeline(tmp_path)  # a directory finds its timeline
    assert tl.samples == [_sample(i) for i in range(5)]
    assert tl.header.command == ("x",) and tl.exit_code == 0
    assert [e["kind"] for e in tl.events] == ["signal"]
    assert tl.dropped_lines == 0 and tl.dropped_note() is None
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header"
    assert json.loads(lines[0])["schema"] == "gpuprobe.timeline"
    assert json.loads(lines[-1])["type"] == "end"
    assert tl.sampler_cpu_s == 0.5


def test_truncated_last_line_is_dropped_and_counted(tmp_path: Path) -> None:
    path = _write(tmp_path)
    whole = path.read_bytes()
    lines = whole.split(b"\n")
    # a gpuprobe killed mid-write: 4 samples whole, the 5th cut in the middle
    cut = b"\n".join(lines[:5]) + b"\n" + lines[5][:30]
    path.write_bytes(cut)
    tl = read_timeline(path)
    assert len(tl.samples) == 4
    assert tl.end is None
    assert tl.dropped_lines == 1 and tl.dropped_bytes == 30
    assert "last line cut short (30 bytes)" in (tl.dropped_note() or "")


def test_damaged_middle_line_is_skipped(tmp_path: Path) -> None:
    path = _write(tmp_path)
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"type":"sample","t":'  # not JSON
    path.write_bytes(b"\n".join(lines))
    tl = read_timeline(path)
    assert len(tl.samples) == 4 and tl.end is not None
    assert tl.dropped_lines == 1 and "line 3 is not JSON" in tl.problems[0]


def test_not_a_timeline(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"type": "sample"}\n')
    with pytest.raises(InputError, match="not a gpuprobe timeline"):
        read_timeline(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text("hello\n")
    with pytest.raises(InputError, match="line 1 is not JSON"):
        read_timeline(tmp_path / "b.jsonl")
    (tmp_path / "c.jsonl").write_text("")
    with pytest.raises(InputError, match="empty"):
        read_timeline(tmp_path / "c.jsonl")
    with pytest.raises(InputError, match="no timeline at"):
        read_timeline(tmp_path / "missing")


def test_newer_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        json.dumps({"type": "header", "schema": "gpuprobe.timeline", "version": 99}) + "\n"
    )
    with pytest.raises(InputError, match="upgrade gpuprobe"):
        read_timeline(tmp_path / "t.jsonl")


def test_existing_recording_and_unwritable_out_are_refused(tmp_path: Path) -> None:
    _write(tmp_path)
    with pytest.raises(InputError, match="already holds a recording"):
        TimelineWriter.create(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="is a file"):
        TimelineWriter.create(blocker)
    with pytest.raises(InputError, match="cannot create"):
        TimelineWriter.create(blocker / "sub")


def test_events_are_on_disk_before_close(tmp_path: Path) -> None:
    w = TimelineWriter.create(tmp_path)
    w.write_header(TimelineHeader(started=1.0))
    w.write_event("start", pid=1)
    # another reader sees both lines while the writer is still open: flushed at once
    tl = read_timeline(tmp_path)
    assert [e["kind"] for e in tl.events] == ["start"]
    w.close()


def test_fixtures_are_timelines() -> None:
    for name in ("e9_starved.jsonl", "healthy.jsonl", "throttled.jsonl"):
        tl = read_timeline(DATA / name)
        assert len(tl.samples) == 60 and tl.header.gpus[0].name == "NVIDIA RTX A5000"
