"""The history: where it lives, what it keeps, and the comparison with the last run."""

from __future__ import annotations

import dataclasses
from contextlib import closing
from pathlib import Path

import pytest

from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.bench.history import Store, data_dir
from gpuprobe.tools.bench.model import BenchReport, BenchResult, Environment


def test_data_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPROBE_DATA_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "a"
    monkeypatch.delenv("GPUPROBE_DATA_DIR")
    assert data_dir() == tmp_path / "xdg" / "gpuprobe"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "gpuprobe"


def _report(gbs: float, seconds: float, env: Environment) -> BenchReport:
    m = Measurement.from_times("copy", "numpy", "cpu", [seconds] * 3)
    return BenchReport(
        workloads=("transfer", "launch"),
        results=(
            BenchResult(
                "transfer",
                "host",
                "numpy",
                "cpu",
                4096,
                "bytes",
                measurement=m,
                values={"gbs": gbs},
            ),
            BenchResult("launch", "call", "numpy", "cpu", 1, "elements", measurement=m, values={}),
            BenchResult(
                "matmul", "float16", "numpy", "cpu", 4096, "n", status="skipped", reason="x"
            ),
        ),
        environment=env,
        created="2025-01-01T00:00:00+00:00",
    )


def test_save_and_compare_with_the_last_run_on_this_machine(_data_dir: Path) -> None:
    old_env = Environment(
        hostname="box", gpus=("NVIDIA T4 GPU-1",), driver="550.54", frameworks={"torch": "2.5.0"}
    )
    new_env = Environment(
        hostname="box", gpus=("NVIDIA T4 GPU-1",), driver="560.28", frameworks={"torch": "2.6.0"}
    )
    with closing(Store()) as store:
        assert store.path.parent == _data_dir
        assert store.last_run("box") is None
        first = store.save(_report(10.0, 1e-3, old_env))
        store.save(_report(99.0, 1e-3, Environment(hostname="other")))
        new = _report(12.0, 2e-3, new_env)
        prev = store.last_run("box")
        assert prev is not None and prev.id == first
        c = store.compare(new, prev)
        second = store.save(new)
        assert [r[0] for r in store.runs("box")] == [first, second]
    assert c.previous_run == first
    assert c.environment_changes == ("driver: 550.54 → 560.28", "torch: 2.5.0 → 2.6.0")
    by = {ch.key: ch for ch in c.changes}
    copy = by["transfer/host/numpy/cpu/4096"]
    assert (copy.old, copy.new, copy.better) == (10.0, 12.0, True)
    assert copy.ratio == pytest.approx(1.2)
    call = by["launch/call/numpy/cpu/1"]
    assert call.metric == "seconds" and call.ratio == pytest.approx(2.0) and call.better is False
    assert len(by) == 2  # the skipped point has no figure


def test_compare_without_history() -> None:
    with closing(Store()) as store:
        c = store.compare(_report(1.0, 1.0, Environment(hostname="box")), None)
    assert c.changes == () and c.note == "no earlier run on this machine to compare with"


def test_a_figure_that_moved_90_times_is_an_outlier_not_better(_data_dir: Path) -> None:
    """Issue 27: a transfer that went from 0.1 to 9.29 GB/s was called "92.947 better"; a move
    of OUTLIER_RATIO× or more is a measurement problem, shown as an outlier with a note."""
    from gpuprobe.tools.bench.model import OUTLIER_RATIO
    from gpuprobe.tools.bench.show.table import bench_text, outlier_note

    env = Environment(hostname="box")
    with closing(Store()) as store:
        store.save(_report(0.1, 1e-3, env))
        new = _report(9.2947, 1.06e-3, env)
        c = store.compare(new, store.last_run("box"))
    by = {ch.key: ch for ch in c.changes}
    copy = by["transfer/host/numpy/cpu/4096"]
    assert copy.ratio == pytest.approx(92.947) and copy.outlier and copy.better is None
    call = by["launch/call/numpy/cpu/1"]  # 6 % slower: a real change, not an outlier
    assert not call.outlier and call.better is False
    assert OUTLIER_RATIO == 10.0
    note = outlier_note(c)
    assert note is not None and note.startswith("outlier: 1 result(s) moved 10× or more")
    text = bench_text(dataclasses.replace(new, comparison=c))
    row = next(line for line in text.splitlines() if "transfer/host" in line)
    assert "92.9" in row and "outlier" in row and "better" not in row and "92.947" not in row
    assert "a measurement problem" in " ".join(text.split())  # wrapped at 80 columns
    # a fall by 10× is an outlier too, and the record round-trips
    c2 = dataclasses.replace(c, changes=(dataclasses.replace(copy, ratio=0.1, outlier=True),))
    assert type(c2).from_dict(c2.to_dict()) == c2
