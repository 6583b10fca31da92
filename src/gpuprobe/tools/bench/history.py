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

from gpuprobe.core import safejson
from gpuprobe.core.errors import GpuprobeError
from gpuprobe.tools.bench.model import (
    OUTLIER_RATIO,
    BenchComparison,
    BenchReport,
    Change,
    Environment,
)

__all__ = [
    "DB_NAME",
    "NOISE_FRACTION",
    "SCHEMA_VERSION",
    "PastRun",
    "Store",
    "StoreError",
    "check_writable",
    "data_dir",
]

DB_NAME = "history.sqlite"
# A change of the headline figure within this fraction is called noise, neither better nor worse
# (run-to-run spread of a median on a shared machine is a few %).
NOISE_FRACTION = 0.05
# PRAGMA user_version of the history this gpuprobe writes; a later change of the tables bumps it
# and migrates older files in Store._migrate. Version 0 with our tables is the unversioned
# first layout (the same tables), stamped 1 when opened.
SCHEMA_VERSION = 1
_TABLES = {"runs", "results"}
LOCK_TIMEOUT_S = 5.0  # s to wait for another gpuprobe writing the history before giving up

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


class StoreError(GpuprobeError):
    """The history cannot be read or written: one line saying why and what to do."""


def _why(path: Path, exc: BaseException) -> StoreError:
    """A :class:`StoreError` for an error from sqlite3 or the file system."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        return StoreError(
            f"the history {path} is locked by another process ({text}); try again when it is done"
        )
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return StoreError(
            f"the history {path} is damaged ({text}); move it away and a new one is started"
        )
    if isinstance(exc, OSError) or "unable to open" in text or "readonly" in text:
        return StoreError(
            f"cannot write the history at {path} ({getattr(exc, 'strerror', None) or text}); "
            "set GPUPROBE_DATA_DIR to a writable folder"
        )
    return StoreError(f"the history {path} cannot be used ({type(exc).__name__}: {text})")


def check_writable(path: Path | None = None) -> None:
    """Raise :class:`StoreError` when the history's folder cannot be created or written (say it
    before a long measurement rather than after). A damaged, foreign or locked file is not checked
    here: the measured report comes first, and saving says why it could not."""
    folder = (path or data_dir() / DB_NAME).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot open the history at {folder} ({exc.strerror or exc}); run without saving "
            "(gpuprobe bench --no-save) or set GPUPROBE_DATA_DIR to a writable folder"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(
            f"cannot open the history at {folder} (not writable); run without saving "
            "(gpuprobe bench --no-save) or set GPUPROBE_DATA_DIR to a writable folder"
        )


class Store:
    """The history database; close it when done (``with contextlib.closing(Store()) as s``).
    Every failure is a :class:`StoreError` with its reason (a damaged, foreign, newer or locked
    file, or an unwritable folder)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else data_dir() / DB_NAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=LOCK_TIMEOUT_S)
        except (OSError, sqlite3.Error) as exc:
            raise _why(self.path, exc) from None
        try:
            self._migrate()
        except StoreError:
            self._db.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            self._db.close()
            raise _why(self.path, exc) from None

    def _migrate(self) -> None:
        """Create the tables in a new file, stamp and upgrade an older one; refuse a file that
        is another program's or a newer gpuprobe's."""
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            r[0]
            for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(r[0]).startswith("sqlite_")
        }
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the history {self.path} was written by a newer gpuprobe (schema {version}, "
                f"this one knows {SCHEMA_VERSION}); upgrade gpuprobe or set GPUPROBE_DATA_DIR"
            )
        if version == 0 and tables and not tables >= _TABLES:
            raise StoreError(
                f"{self.path} is not a gpuprobe history (it holds the tables "
                f"{', '.join(sorted(tables)[:5])}); move it away or set GPUPROBE_DATA_DIR"
            )
        if version < SCHEMA_VERSION:
            with self._db:
                self._db.executescript(_SCHEMA)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def save(self, report: BenchReport) -> int:
        """Store ``report``; return its run id (:class:`StoreError` when it cannot)."""
        try:
            return self._save(report)
        except sqlite3.Error as exc:
            raise _why(self.path, exc) from None

    def _save(self, report: BenchReport) -> int:
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
        try:
            return self._last_run(machine, before)
        except (sqlite3.Error, ValueError, TypeError, KeyError) as exc:
            raise _why(self.path, exc) from None

    def _last_run(self, machine: str | None, before: int | None) -> PastRun | None:
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
        return PastRun(
            int(run_id), str(created), Environment.from_dict(safejson.loads(env)), figures
        )

    def compare(self, report: BenchReport, previous: PastRun | None) -> BenchComparison:
        """``report`` against ``previous``: each shared result's old and new figure, the ratio
        new/old, whether it got better (None within :data:`NOISE_FRACTION`, and for an outlier
        that moved :data:`~gpuprobe.tools.bench.model.OUTLIER_RATIO`× or more), and what changed in the environment."""
        if previous is None:
            return BenchComparison(note="no earlier run on this machine to compare with")
        changes = []
        for r in report.results:
            head = r.headline()
            old = previous.figures.get(r.key)
            if head is None or old is None or old[0] != head[0] or old[2] <= 0:
                continue
            metric, value, unit, higher = head
            ratio = value / old[2]
            better = None
            outlier = not 1 / OUTLIER_RATIO < ratio < OUTLIER_RATIO
            if abs(ratio - 1) > NOISE_FRACTION and not outlier:
                better = (ratio > 1) == higher
            changes.append(Change(r.key, metric, unit, old[2], value, ratio, better, outlier))
        return BenchComparison(
            previous_run=previous.id,
            previous_created=previous.created,
            environment_changes=report.environment.changes_from(previous.environment),
            changes=tuple(changes),
            note=None if changes else "no result in common with the previous run",
        )
