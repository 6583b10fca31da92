"""Every command's ``--json`` document carries the overall ``verdict`` and the ``exit_code``, the
same two keys, last, one shared way (cli/_common.print_json) (issue 41: only run and profile
carried an exit code). Each command is run for real, in-process, on the fixtures or a short job."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpuprobe.cli import main
from gpuprobe.core.findings import Status

DATA = Path(__file__).resolve().parents[1] / "data"
DIAG = DATA / "diagnose"
SRC = Path(__file__).resolve().parents[2] / "src" / "gpuprobe" / "cli"
RANK = {"ok": 1, "info": 2, "warn": 3, "fail": 4}

COMMANDS = {
    "info": ["info", "--from", str(DATA / "t4.json")],
    "doctor": ["doctor", "--from", str(DATA / "t4.json")],
    "diagnose": ["diagnose", str(DIAG / "kineto_r50_nw0_a.pt.trace.json.gz")],
    "diagnose-ranks": ["diagnose", str(DIAG / "dlrm8")],
    "diagnose-compare": [
        "diagnose",
        "--compare",
        str(DIAG / "hta_trace_diff_control_step1012.json.gz"),
        str(DIAG / "hta_trace_diff_test_step1012.json.gz"),
    ],
    "plot": ["plot", str(DATA / "monitor" / "healthy.jsonl"), "--out", "{tmp}/t.html"],
    "pack": ["pack", "-n", "1", "--", sys.executable, "-c", "pass"],
    "bench": ["bench", "launch", "--backend", "numpy", "--quick", "--no-save"],
}


def _statuses(doc: dict) -> list[str]:
    return [f["status"] for f in doc.get("findings", ()) if isinstance(f, dict) and "status" in f]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_json_document_says_its_verdict_and_exit_code(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[name]]
    rc = main([argv[0], "--json", *argv[1:]])
    doc = json.loads(capsys.readouterr().out)
    assert list(doc)[-2:] == ["verdict", "exit_code"]
    assert doc["exit_code"] == rc
    assert doc["verdict"] in RANK
    statuses = [s for s in _statuses(doc) if s in RANK] if name != "diagnose-compare" else []
    if statuses:
        assert doc["verdict"] == max(statuses, key=RANK.__getitem__)
    assert (doc["verdict"] == Status.FAIL.value) <= (rc == 1) or name == "diagnose-compare"


def test_the_comparisons_verdict_is_the_after_traces(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--json", *COMMANDS["diagnose-compare"][1:]]) == 0
    doc = json.loads(capsys.readouterr().out)
    after = [f["status"] for f in doc["after"]["findings"] if f["status"] in RANK]
    assert doc["verdict"] == max(after, key=RANK.__getitem__)


def test_no_command_writes_its_json_another_way() -> None:
    """The shared way: the command modules print JSON only through print_json (run and profile
    stream a command's own output around theirs; export and top announce or stream lines)."""
    own_way = {"run.py", "profile.py", "export.py", "top.py", "_common.py"}
    offenders = [
        p.name for p in SRC.glob("*.py") if p.name not in own_way and "json.dumps(" in p.read_text()
    ]
    assert offenders == []
