"""The command line: info, doctor --from, and bad input (one line, exit 2, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys

from _support import DATA
from _support import run_gpuprobe as _run
from gpuprobe.cli import main


def test_info_json_is_a_loadable_snapshot(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["host"]["logical_cores"] >= 1
    assert data["host"]["memory_total"] > 2**30
    assert data["host"]["blas"]["threads"] >= 1
    names = [f["name"] for f in data["frameworks"]]
    assert names == ["torch", "cupy", "jax", "numba"]


def test_doctor_from_snapshot_exit_codes(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["doctor", "--from", str(DATA / "h200.json")]) == 0
    capsys.readouterr()
    assert main(["doctor", "--from", str(DATA / "rtx5090_torch_cu124.json"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert any(f["id"] == "torch-arch-missing" and f["status"] == "fail" for f in data["findings"])


def test_bad_input_is_one_line_and_exit_2(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = _run("doctor", "--from", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    r = _run("doctor", "--from", str(junk))
    assert r.returncode == 2 and "not JSON" in r.stderr
    other = tmp_path / "other.json"
    other.write_text('{"traceEvents": []}')
    r = _run("doctor", "--from", str(other))
    assert r.returncode == 2 and "not a gpuprobe inventory snapshot" in r.stderr
    for res in (missing, r):
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    r = _run("info", "--frameworks", "bogus")
    assert r.returncode == 2 and "invalid choice" in r.stderr and "Traceback" not in r.stderr
    r = _run("nonsense")
    assert r.returncode == 2


def test_info_renders_for_people_and_help_is_fast_to_import() -> None:
    r = _run("info", "--frameworks", "static")
    assert r.returncode == 0 and "Host" in r.stdout and "Frameworks" in r.stdout
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, gpuprobe.cli; gpuprobe.cli.build_parser(); "
            "print(sorted(m for m in ('torch','numpy','rich','matplotlib','jax') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "[]"  # --help imports no heavy library
