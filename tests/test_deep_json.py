"""Hostile JSON in the files gpuprobe reads back (issue 28): a snapshot for doctor/info --from, a
timeline for plot, a bench history's environment, the profile hook's control files. 100 000
levels of nesting are one line and exit 2 (or a damaged line dropped and counted), never a
RecursionError; each reader goes through core/safejson."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from _support import DATA, run_gpuprobe
from gpuprobe.core.errors import InputError
from gpuprobe.platform.inventory import load
from gpuprobe.tools.monitor.timeline import read_timeline

DEEP = "[" * 100_000 + "]" * 100_000
HEALTHY = DATA / "monitor" / "healthy.jsonl"


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuprobe: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["doctor", "info"])
def test_from_a_snapshot_nested_100k_deep(tmp_path: Path, command: str) -> None:
    snap = tmp_path / "deep.json"
    snap.write_text('{"host": {}, "driver": ' + DEEP + "}")
    line = _one_line(run_gpuprobe(command, "--from", str(snap)))
    assert line == (
        f"gpuprobe: {snap}: not JSON (nested deeper than 128 levels at line 1); expected the "
        "output of 'gpuprobe info --json'"
    )


def test_load_refuses_a_snapshot_nested_past_the_limit(tmp_path: Path) -> None:
    snap = tmp_path / "s.json"  # 130 levels: json.loads reads it, the depth check refuses it
    snap.write_text('{"host": {}, "driver": {}, "x": ' + "[" * 129 + "]" * 129 + "}")
    with pytest.raises(InputError, match="nested deeper than 128 levels"):
        load(snap)


def test_a_snapshot_that_is_a_fifo_a_device_a_folder_or_too_big(tmp_path: Path) -> None:
    """Read at once or refused at once: a FIFO used to block for a writer for ever, /dev/zero to
    fill the memory until the kernel killed the process."""
    from gpuprobe.platform.inventory import MAX_SNAPSHOT_BYTES

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(InputError, match=r": not a regular file; give the file written by"):
            load(path)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_SNAPSHOT_BYTES + 1)  # sparse: no disk written
    with pytest.raises(InputError, match=r"big.json: more than 16 MiB, not a snapshot"):
        load(big)
    line = _one_line(run_gpuprobe("doctor", "--from", "/dev/zero"))
    assert line.endswith(
        "/dev/zero: not a regular file; give the file written by 'gpuprobe info --json > FILE'"
    )


def test_plot_on_a_timeline_whose_header_is_nested_100k_deep(tmp_path: Path) -> None:
    tl = tmp_path / "timeline.jsonl"
    rest = HEALTHY.read_bytes().split(b"\n", 1)[1]
    tl.write_bytes(b'{"type": "header", "x": ' + DEEP.encode() + b"}\n" + rest)
    line = _one_line(run_gpuprobe("plot", str(tl), "--out", str(tmp_path / "r.html")))
    assert line == (
        f"gpuprobe: {tl} is not a gpuprobe timeline: line 1 is not JSON (nested deeper than "
        "128 levels)"
    )
    assert not (tmp_path / "r.html").exists()


def test_a_sample_nested_100k_deep_is_refused_in_one_line(tmp_path: Path) -> None:
    """A line after the header nested past the limit is not what a killed writer leaves (a line
    cut short, dropped and counted): the file is refused in one line, exit 2 (issue 28)."""
    tl = tmp_path / "timeline.jsonl"
    bad = b'{"type": "sample", "t": 1750000001.0, "gpus": ' + DEEP.encode() + b"}\n"
    tl.write_bytes(HEALTHY.read_bytes() + bad)
    with pytest.raises(InputError, match="line 63 is nested deeper than 128 levels"):
        read_timeline(tl)
    line = _one_line(run_gpuprobe("plot", str(tl), "--out", str(tmp_path / "r.html")))
    assert line.startswith(f"gpuprobe: {tl}: line 63 is nested deeper than 128 levels: not a line")
    assert not (tmp_path / "r.html").exists()
    torn = tmp_path / "torn.jsonl"  # a line cut short is still dropped and counted
    torn.write_bytes(HEALTHY.read_bytes() + b'{"type": "sample", "t": 17\n')
    assert read_timeline(torn).dropped_lines == 1


def test_a_bench_history_with_a_deep_environment_is_a_store_error(tmp_path: Path) -> None:
    from gpuprobe.tools.bench.history import Store, StoreError

    path = tmp_path / "h.sqlite"
    with closing(Store(path)):
        pass  # the schema
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO runs (created, machine, environment, workloads, quick) "
        "VALUES ('x', 'm', ?, 'transfer', 0)",
        ('{"e": ' + DEEP + "}",),
    )
    db.commit()
    db.close()
    with closing(Store(path)) as s, pytest.raises(StoreError, match="nested deeper than 128"):
        s.last_run("m")


def test_the_profile_hooks_control_files_nested_deep_are_left_out(tmp_path: Path) -> None:
    from gpuprobe.tools.profile.hook import REQUEST, control_dir, read_processes
    from gpuprobe.tools.profile.ondemand import _refuse_if_busy

    folder = control_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / "proc-1.json").write_text('{"pid": 1, "windows": ' + DEEP + "}")
    (folder / REQUEST).write_text('{"id": ' + DEEP + "}")
    assert read_processes(tmp_path) == []  # a torn or foreign file is left out
    _refuse_if_busy(tmp_path, [])  # an unreadable last request refuses nothing
