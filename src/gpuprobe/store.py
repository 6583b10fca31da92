"""The local history of results, in SQLite (stdlib ``sqlite3``).

The database lives in the user's data directory: ``$GPUPROBE_DATA_DIR`` if set, else
``$XDG_DATA_HOME/gpuprobe``, else ``~/.local/share/gpuprobe``; the file is ``history.sqlite``.
Each run is stored with the machine it ran on (its host name) and its environment (cards, driver,
framework versions, BLAS), and each result with its headline figure, so that
``gpuprobe bench --compare`` can set this run against the last one on the same machine and say
what changed around it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from gpuprobe.bench.report import BenchReport, Change, Comparison, Environment
from gpuprobe.errors import GpuprobeError

__all__ = ["DB_NAME", "NOISE_FRACTION", "PastRun", "Store", "data_dir"]

DB_NAME = "history.sqlite"
# A change of the headline figure within this fraction is called noise, neither better nor worse
# (run-to-run spread of a median on a shared machine is a few %).
NOISE_FRACTION = 0.05

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    machine TEXT,
    environment TEXT NOT NULL,
    workloads TEXT NOT NULL,
    quick INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,
    workload TEXT NOT NULL,
    metric TEXT NOT NULL,
    unit TEXT NOT NULL,
    value REAL NOT NULL,
    higher_is_better INTEGER NOT NULL,
    median_s REAL,
    result TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_machine ON runs(machine, id);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
"""


def data_dir() -> Path:
    """Where gpuprobe keeps its data (see the module docstring)."""
    explicit = os.environ.get("GPUPROBE_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "gpuprobe"


@dataclass(frozen=True)
class PastRun:
    """A stored run: when, on what, and each result's headline (key -> metric, unit, value,
    higher is better)."""

    id: int
    created: str
    environment: Environment
    figures: dict[str, tuple[str, str, float, bool]] = field(default_factory=dict)


class Store:
    """The history database; close it when done (``with contextlib.closing(Store()) as s``)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else data_dir() / DB_NAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path)
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise GpuprobeError(
                f"cannot open the history at {self.path} ({exc}); run without saving "
                "(gpuprobe bench --no-save) or set GPUPROBE_DATA_DIR to a writable folder"
            ) from None

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def save(self, report: BenchReport) -> int:
        """Store ``report``; return its run id."""
        with self._db:
            cur = self._db.execute(
                "INSERT INTO runs (created, machine, environment, workloads, quick) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    report.created,
                    report.environment.hostname,
                    json.dumps(report.environment.to_dict()),
                    ",".join(report.workloads),
                    int(report.quick),
                ),
            )
            run_id = int(cur.lastrowid or 0)
            rows = []
            for r in report.results:
                head = r.headline()
                if head is None:
                    continue
                metric, value, unit, higher = head
                d = r.to_dict()
                if d.get("measurement"):
                    d["measurement"]["times"] = []  # the statistics are kept; raw times are not
                rows.append(
                    (
                        run_id,
                        r.key,
                        r.workload,
                        metric,
                        unit,
                        value,
                        int(higher),
                        r.seconds,
                        json.dumps(d),
                    )
                )
            self._db.executemany(
                "INSERT INTO results (run_id, key, workload, metric, unit, value, "
                "higher_is_better, median_s, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return run_id

    def runs(self, machine: str | None = None) -> list[tuple[int, str, str | None]]:
        """(id, created, machine) of the stored runs, oldest first (on ``machine`` if given)."""
        q = "SELECT id, created, machine FROM runs"
        args: tuple[str, ...] = ()
        if machine is not None:
            q += " WHERE machine = ?"
            args = (machine,)
        return [(int(a), str(b), c) for a, b, c in self._db.execute(q + " ORDER BY id", args)]

    def last_run(self, machine: str | None, before: int | None = None) -> PastRun | None:
        """The newest run on ``machine`` (older than run ``before`` if given), or None."""
        q = "SELECT id, created, environment FROM runs WHERE machine IS ?"
        args: list[object] = [machine]
        if before is not None:
            q += " AND id < ?"
            args.append(before)
        row = self._db.execute(q + " ORDER BY id DESC LIMIT 1", args).fetchone()
        if row is None:
            return None
        run_id, created, env = row
        figures = {
            key: (metric, unit, float(value), bool(higher))
            for key, metric, unit, value, higher in self._db.execute(
                "SELECT key, metric, unit, value, higher_is_better FROM results WHERE run_id = ?",
                (run_id,),
            )
        }
        return PastRun(int(run_id), str(created), Environment.from_dict(json.loads(env)), figures)

    def compare(self, report: BenchReport, previous: PastRun | None) -> Comparison:
        """``report`` against ``previous``: each shared result's old and new figure, the ratio
        new/old, whether it got better (None within :data:`NOISE_FRACTION`), and what changed
        in the environment."""
        if previous is None:
            return Comparison(note="no earlier run on this machine to compare with")
        changes = []
        for r in report.results:
            head = r.headline()
            old = previous.figures.get(r.key)
            if head is None or old is None or old[0] != head[0] or old[2] <= 0:
                continue
            metric, value, unit, higher = head
            ratio = value / old[2]
            better = None
            if abs(ratio - 1) > NOISE_FRACTION:
                better = (ratio > 1) == higher
            changes.append(Change(r.key, metric, unit, old[2], value, ratio, better))
        return Comparison(
            previous_run=previous.id,
            previous_created=previous.created,
            environment_changes=report.environment.changes_from(previous.environment),
            changes=tuple(changes),
            note=None if changes else "no result in common with the previous run",
        )
