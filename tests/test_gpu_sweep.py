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
    want = {"wheel", "gpu-tests", "gpu-tests-collect", "info", "doctor", "anchors", "run-train"}
    want |= {"run-starved", "fit", "precision", "pack", "scale", "hta", "overhead", "suite", "tar"}
    want |= {f"bench-{fw}" for fw in ("torch", "cupy", "jax", "numpy")}
    slow = ("item_every_step", "pageable_copies", "fp32_matmul", "python_loop_mask")
    fixed = ("item_fixed", "pinned_copies", "tf32_matmul", "vectorized_mask")
    want |= {f"trace-{e}" for e in slow + fixed}
    want |= {f"{v}-{e}" for v in ("diagnose", "compare") for e in (*slow, "loader_single_process")}
    assert want <= set(steps), sorted(want - set(steps))
    assert "passed" not in (out / "gpu-tests.collect.txt").read_text()
    assert "test_gpu" in (out / "gpu-tests.collect.txt").read_text()  # gpu tests were found
    with tarfile.open(f"{out}.tar.gz") as tar:
        names = tar.getnames()
    assert "sweep/steps.tsv" in names and "sweep/sweep.log" in names
    assert not any(".wheel" in n or ".site" in n for n in names)


def test_the_deadline_skips_what_cannot_finish_and_still_writes_the_tar(tmp_path: Path) -> None:
    """A real (not dry) sweep with a deadline too short for any step: every step is recorded as
    skipped, the tar is written where --tar says, and the exit code says the sweep is incomplete.
    --only keeps just the steps named by prefix."""
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    out, tar = tmp_path / "sweep", tmp_path / "carry" / "s.tar.gz"
    tar.parent.mkdir()
    argv = ["bash", str(SCRIPT), "--out", str(out), "--tar", str(tar), "--python", sys.executable]
    p = subprocess.run(
        [*argv, "--deadline", "16", "--only", "info,trace-item"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    assert p.returncode == 3, p.stdout + p.stderr
    assert [r[0] for r in rows] == [
        "info",
        "info-text",
        "trace-item_every_step",
        "trace-item_fixed",
        "tar",
    ]
    assert [r[1] for r in rows] == ["skip"] * 4 + ["0"]
    assert "4 skipped" in p.stdout
    with tarfile.open(tar) as t:
        assert "sweep/steps.tsv" in t.getnames()


def test_a_bad_deadline_is_refused_in_one_line(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    p = subprocess.run(
        ["bash", str(SCRIPT), "--out", str(tmp_path / "s"), "--deadline", "10m"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    assert p.stderr.strip() == "gpu_sweep.sh: --deadline takes whole seconds, not '10m'"
    assert not (tmp_path / "s").exists()
