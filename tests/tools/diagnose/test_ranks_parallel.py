"""The ranks of a job read in parallel on this machine's cores (issue 42): the same verdict as
one after the other, on the 8 real DLRM ranks; bounded by the cores and the free memory; a
corrupt rank named and the others analysed; Ctrl-C stopping the readers at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import gpuprobe.cli as cli
from gpuprobe.tools.diagnose import ranks_read
from gpuprobe.tools.diagnose.cycles import diagnose_folder
from gpuprobe.tools.diagnose.ranks import diagnose_ranks

from .realdata import DLRM8, DLRM_FILES

SRC = Path(__file__).resolve().parents[3] / "src"


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A diagnosis's document without what says how long and where it was read."""
    doc = json.loads(json.dumps(doc))
    for key in ("seconds", "read_on", "readers"):
        doc.pop(key, None)
    for r in doc["ranks"]:
        r.pop("read_seconds")
    return doc


@pytest.fixture(scope="module")
def sequential() -> Any:
    return diagnose_ranks(DLRM8, jobs=1)


def test_parallel_reading_is_the_sequential_one(sequential: Any) -> None:
    seen: list[tuple[int, int]] = []
    par = diagnose_ranks(DLRM8, jobs=2, progress=lambda d, t: seen.append((d, t)))
    assert par.read_on == "2 local processes" and sequential.read_on == "this process"
    assert comparable(par.to_dict()) == comparable(sequential.to_dict())
    assert par.straggler == sequential.straggler and par.findings == sequential.findings
    assert sum(r.ranks for r in par.readers) == 8 and len(par.readers) == 2
    total = sum(f.stat().st_size for f in DLRM_FILES)
    assert {t for _, t in seen} == {total} and seen[-1][0] == total
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # bytes over all files, onward


def test_cli_json_is_the_same_with_one_or_two_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    docs = []
    for jobs in ("1", "2"):
        assert cli.main(["diagnose", str(DLRM8), "--json", "--jobs", jobs]) in (0, 1)
        docs.append(comparable(json.loads(capsys.readouterr().out)))
    assert docs[0] == docs[1]


def test_readers_are_bounded_by_cores_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ranks_read.local_readers(None, 1000) >= 1
    assert ranks_read.local_readers(3, 2) == 2 and ranks_read.local_readers(64, 100) == 64
    gib = 2**30
    assert ranks_read.can_start(0, 0, 10 * gib, gib, 4)  # the first always starts
    assert not ranks_read.can_start(1, gib // 2, gib // 2 + 1, gib, 4)  # does not fit beside
    assert ranks_read.can_start(1, gib // 4, gib // 4, gib, 4)
    assert not ranks_read.can_start(4, 0, 0, gib, 4)  # no more than the readers
    # the expected cost grows with the trace: a 50 kB gzip rank is its text's events' worth
    small = ranks_read.expected_cost(str(DLRM_FILES[0]))
    assert 60 * 2**20 < small < 200 * 2**20
    # with room for one reader only, they run one at a time, and the verdict is the same
    monkeypatch.setattr("gpuprobe.platform.hardware.host.available_memory", lambda: 1)
    one = diagnose_ranks(DLRM8, jobs=2)
    assert len(one.ranks) == 8 and not one.unread


def _job_with_a_corrupt_rank(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    for f in DLRM_FILES:
        shutil.copy(f, job / f.name)
    (job / DLRM_FILES[3].name).write_bytes(b"\x1f\x8b\x08\x00garbage, not a trace")
    return job


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_corrupt_rank_is_named_and_the_rest_analysed(
    jobs: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job_with_a_corrupt_rank(tmp_path)
    d = diagnose_folder(job, jobs=jobs)
    assert [r.rank for r in d.ranks] == [0, 1, 2, 4, 5, 6, 7]
    assert d.partial and len(d.unread) == 1  # rank 3 named once: by its file, not again
    assert d.unread[0].path.endswith(DLRM_FILES[3].name)
    assert cli.main(["diagnose", str(job), "--json", "--jobs", str(jobs)]) == 3
    out, err = capsys.readouterr()
    assert len(json.loads(out)["unread"]) == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("not read: worker3_step_12")
    assert cli.main(["diagnose", str(job), "--jobs", str(jobs)]) == 3
    out, err = capsys.readouterr()
    assert "partial: 1 rank(s) not analysed" in out and "Traceback" not in out + err


def test_a_rank_missing_from_the_folder_is_named(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    for f in DLRM_FILES[:5] + DLRM_FILES[6:]:
        shutil.copy(f, job / f.name)
    d = diagnose_folder(job, jobs=2)
    assert [u.line for u in d.unread] == ["rank 5: not found (world size 8), no trace of it read"]
    # files chosen one by one are what the user asked for: none is missing
    assert not diagnose_ranks(sorted(job.iterdir()), jobs=2).unread


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "0"], "--jobs"),
        (["--jobs", "x"], "--jobs"),
        (["--worker-glob", "/x/*.json"], "--worker-glob is for a Dask cluster"),
        (["--cluster", "tcp://127.0.0.1:9", "--jobs", "2"], "--jobs is for this machine"),
        (["--cluster", "tcp://127.0.0.1:9", "--html", "x.html"], "leave --cluster out"),
        (
            ["--cluster", "tcp://127.0.0.1:9", "--connect-timeout", "0.5"],
            "--cluster tcp://127.0.0.1:9: ",
        ),
        (["--scheduler-file", "/nonexistent.json"], "--scheduler-file /nonexistent.json:"),
    ],
)
def test_bad_flags_are_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if argv[1] in ("0", "x") else _nothing():
        assert cli.main(["diagnose", str(DLRM8), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err and len(err.splitlines()) <= 2


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


SLOW_READER = """
    import os, time
    import gpuprobe.tools.diagnose.ranks_read as rr
    def slow(path, steps, progress=None):
        open(os.path.join(os.environ["RANKS_MARK"], str(os.getpid())), "w").close()
        time.sleep(60)  # a rank that takes a minute
    rr.read_one = slow
"""


def test_ctrl_c_stops_the_readers_at_once(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(SLOW_READER))
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(SRC)]),
           "RANKS_MARK": str(marks)}  # fmt: skip
    p = subprocess.Popen([sys.executable, "-m", "gpuprobe", "diagnose", str(DLRM8), "--jobs",
                          "2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(marks)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        readers = [int(n) for n in os.listdir(marks)]
        assert len(readers) == 2, "the readers did not start"
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        _out, err = p.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert took < 2.0, f"stopped in {took:.2f} s"
    assert p.returncode == 130 and err.strip().splitlines() == ["gpuprobe: interrupted"]
    for pid in readers:  # no reader left behind
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"reader {pid} still runs")
