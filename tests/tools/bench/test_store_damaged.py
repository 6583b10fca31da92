"""A history that cannot be used (damaged, foreign, newer, locked) never costs the finished bench
report: the report is shown first, then one line says why the history was not saved. The schema
is versioned (PRAGMA user_version)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

import gpuprobe.tools.bench.history as store_mod
from _support import pythonpath_env
from gpuprobe.platform.measurement import Measurement
from gpuprobe.tools.bench.history import SCHEMA_VERSION, Store, StoreError
from gpuprobe.tools.bench.model import BenchReport, BenchResult, Environment

SRC = Path(__file__).resolve().parents[3] / "src"


def _report() -> BenchReport:
    m = Measurement.from_times("copy", "numpy", "cpu", [0.001] * 3)
    r = BenchResult(
        "transfer", "host", "numpy", "cpu", 4096, "bytes", measurement=m, values={"gbs": 5.0}
    )
    return BenchReport(
        workloads=("transfer",),
        results=(r,),
        environment=Environment(),
        created="2025-01-01T00:00:00+00:00",
    )


def _sqlite(path: Path, sql: str) -> Path:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()
    return path


def test_a_new_history_is_versioned(tmp_path: Path) -> None:
    with closing(Store(tmp_path / "h.sqlite")) as s:
        assert s.save(_report()) == 1
    db = sqlite3.connect(tmp_path / "h.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 1


def test_an_unversioned_history_is_stamped_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    db = sqlite3.connect(path)
    db.executescript(store_mod._SCHEMA)  # the first layout, before user_version
    db.execute(
        "INSERT INTO runs (created, machine, environment, workloads, quick) "
        "VALUES ('x', 'm', '{}', 'transfer', 0)"
    )
    db.commit()
    db.close()
    with closing(Store(path)) as s:
        assert s.runs() == [(1, "x", "m")]
        assert s.save(_report()) == 2
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


def test_damaged_foreign_and_newer_files_are_refused_with_the_reason(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    with pytest.raises(StoreError, match="is damaged"):
        Store(damaged).save(_report())
    foreign = _sqlite(tmp_path / "foreign.sqlite", "CREATE TABLE moz_places (id INTEGER)")
    with pytest.raises(StoreError, match=r"not a gpuprobe history .*moz_places"):
        Store(foreign)
    newer = _sqlite(tmp_path / "newer.sqlite", "PRAGMA user_version = 99")
    with pytest.raises(StoreError, match=r"newer gpuprobe \(schema 99"):
        Store(newer)


def test_a_locked_history_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "h.sqlite"
    Store(path).close()
    monkeypatch.setattr(store_mod, "LOCK_TIMEOUT_S", 0.1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with (
            pytest.raises(StoreError, match="is locked by another process"),
            closing(Store(path)) as s,
        ):
            s.save(_report())
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_bench_shows_its_report_then_says_the_history_was_not_saved(tmp_path: Path) -> None:
    (tmp_path / "history.sqlite").write_bytes(os.urandom(5000))
    env = pythonpath_env(SRC, base={**os.environ, "GPUPROBE_DATA_DIR": str(tmp_path)})
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from gpuprobe.cli import main; sys.exit(main())",
            "bench",
            "launch",
            "--backend",
            "numpy",
            "--device",
            "cpu",
            "--quick",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in r.stderr
    import json

    doc = json.loads(r.stdout)  # the whole report
    assert any(x["workload"] == "launch" and x["status"] == "ok" for x in doc["results"])
    assert doc["run_id"] is None
    assert r.stderr.strip().splitlines()[-1] == (
        f"gpuprobe: the history could not be saved: the history {tmp_path / 'history.sqlite'} "
        "is damaged (file is not a database); move it away and a new one is started"
    )
