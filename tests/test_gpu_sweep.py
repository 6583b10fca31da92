"""benchmarks/gpu_sweep.sh --dry-run: everything the GPU sweep does, checked here without a card."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_sweep.sh"


@pytest.mark.slow
def test_the_dry_run_checks_every_step_and_catches_a_bad_line(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    # A copy with one command line gpuprobe's parser must refuse, placed before the tar step.
    text = SCRIPT.read_text()
    marker = "# -- one file to carry back"
    assert marker in text
    bad = 'step bad-line 10 gp -- bench --no-such-flag >/dev/null 2>>"$LOG"\n\n'
    copy = ROOT / "benchmarks" / f".gpu_sweep_test_{tmp_path.name}.sh"
    copy.write_text(text.replace(marker, bad + marker))
    out = tmp_path / "sweep"
    try:
        p = subprocess.run(
            ["bash", str(copy), "--dry-run", "--out", str(out), "--python", sys.executable],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        copy.unlink()
    steps = {}
    for line in (out / "steps.tsv").read_text().splitlines():
        name, rc, _ = line.split("\t")
        steps[name] = int(rc)
    assert p.returncode == 1, p.stdout + p.stderr  # one step failed: the planted one
    assert steps.pop("bad-line") == 2  # argparse's exit code for a bad command line
    assert {k: v for k, v in steps.items() if v} == {}, (out / "sweep.log").read_text()[-3000:]
    want = {"wheel", "gpu-tests", "gpu-tests-collect", "info", "doctor", "bench", "run-train"}
    want |= {"run-starved", "diagnose-starved", "fit", "precision", "pack", "scale", "tar"}
    want |= {f"trace-{e}" for e in ("item_every_step", "pageable_copies", "fp32_matmul")}
    assert want <= set(steps)
    assert "passed" not in (out / "gpu-tests.collect.txt").read_text()
    assert "test_gpu" in (out / "gpu-tests.collect.txt").read_text()  # gpu tests were found
    with tarfile.open(f"{out}.tar.gz") as tar:
        names = tar.getnames()
    assert "sweep/steps.tsv" in names and "sweep/sweep.log" in names
    assert not any(".wheel" in n or ".site" in n for n in names)
