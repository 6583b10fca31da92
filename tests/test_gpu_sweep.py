"""benchmarks/gpu_sweep.sh --dry-run: everything the GPU sweep does, checked here without a card."""

from __future__ import annotations

import gzip
import json
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


def test_the_import_keeps_what_the_card_recorded_and_says_what_it_did_not(tmp_path: Path) -> None:
    """gpu_sweep_import.py on a sweep folder with a card's snapshot, one trace and a failed and a
    skipped step: the results table, the docs page and the fixtures say exactly that."""
    data = ROOT / "tests" / "data"
    sweep = tmp_path / "gpu-sweep"
    (sweep / "traces").mkdir(parents=True)
    shutil.copy(data / "h200.json", sweep / "info.json")
    trace = data / "diagnose" / "hta_trace_diff_control_step1012.json.gz"
    shutil.copy(trace, sweep / "traces" / "item_every_step.json.gz")
    (sweep / "machine.txt").write_text("2026-11-23T01:00:00Z\nLinux x 6.18\n16\n")
    (sweep / "steps.tsv").write_text(
        "info\t0\t1\ninfo-text\t0\t1\ndoctor\t1\t30\nanchors\tskip\t0\n"
        "trace-item_every_step\t0\t9\ntar\t0\t0\n"
    )
    (sweep / "info.txt").write_text("the card's info view\n")
    root = tmp_path / "checkout"
    for d in ("benchmarks/results", "docs", "tests/data/diagnose", "tests/data/monitor"):
        (root / d).mkdir(parents=True)
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_sweep_import.py"), str(sweep)]
    for _ in range(2):  # twice: the second writes the same bytes
        p = subprocess.run(
            [*argv, "--root", str(root)], capture_output=True, text=True, timeout=300
        )
        assert p.returncode == 0, p.stderr
    assert "wrote tests/data/h200.json" in p.stdout
    md = (root / "benchmarks" / "results" / "gpu_h200.md").read_text()
    assert md.startswith("# GPU figures on NVIDIA H200 (2026-11-23T01:00:00Z)")
    driver = json.loads((data / "h200.json").read_text())["driver"]["driver_version"]
    assert f"Driver {driver}, CUDA 13.0" in md
    assert "Steps not at exit 0: doctor (1), anchors (skip)." in md
    page = (root / "docs" / "gpu-h200.md").read_text()
    assert "```\nthe card's info view\n```" in page
    assert "*not recorded: step doctor exited 1 after 30 s (see sweep.log)*" in page
    assert "*not recorded: step anchors was skipped at the sweep's deadline*" in page
    assert "gpuprobe diagnose traces/item_every_step.json.gz: 0.2 MB" in page  # diagnosed here
    snap = json.loads((root / "tests" / "data" / "h200.json").read_text())
    assert snap["origin"].startswith(f"recorded on NVIDIA H200 (driver {driver}, CUDA 13.0)")
    kept = root / "tests" / "data" / "diagnose" / "gpu_h200" / "item_every_step.json.gz"
    assert gzip.decompress(kept.read_bytes()) == gzip.decompress(trace.read_bytes())
    assert kept.read_bytes()[4:8] == b"\0\0\0\0"  # no timestamp in the gzip header


def test_the_import_refuses_what_is_not_a_sweep_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "sweep.tar.gz"
    bad.write_text("not a tar")
    script = str(ROOT / "benchmarks" / "gpu_sweep_import.py")
    for arg, says in (
        (bad, "is not a readable sweep tar"),
        (tmp_path / "absent", "is neither a sweep folder nor its tar"),
    ):
        p = subprocess.run(
            [sys.executable, script, str(arg), "--root", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 1
        assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
        assert not (tmp_path / "docs").exists()  # nothing half-written
