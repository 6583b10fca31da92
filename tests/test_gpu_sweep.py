"""benchmarks/gpu_sweep.sh --dry-run: everything the GPU sweep does, checked here without a card."""

from __future__ import annotations

import gzip
import json
import os
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
    had_build = (ROOT / "build").exists()
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
    assert had_build or not (ROOT / "build").exists()  # the wheel is built from a copy


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
    # diagnosed here: the header names the trace, then its facts
    assert "gpuprobe diagnose traces/item_every_step.json.gz\n  0.2 MB" in page
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


# -- several sweeps of one card, merged step by step ---------------------------------------------

DATA = ROOT / "tests" / "data"
IMPORT = ROOT / "benchmarks" / "gpu_sweep_import.py"
OLD, NEW = "2026-11-25T22:29:03Z", "2026-11-26T03:51:33Z"


def _junit(tests: int, failures: int) -> str:
    cases = "".join(
        f'<testcase classname="t" name="c{i}">'
        + ('<failure message="boom"/>' if i < failures else "")
        + "</testcase>"
        for i in range(tests)
    )
    return (
        f'<testsuites><testsuite tests="{tests}" failures="{failures}" errors="0" skipped="0">'
        f"{cases}</testsuite></testsuites>"
    )


def _sweep(path: Path, date: str, rows: list[str], files: dict[str, str | bytes]) -> Path:
    """A sweep's folder as gpu_sweep.sh leaves it: the card's snapshot, the date, steps.tsv (one
    row per "name rc seconds") and the steps' outputs."""
    path.mkdir(parents=True)
    shutil.copy(DATA / "h200.json", path / "info.json")
    (path / "machine.txt").write_text(f"{date}\nLinux x 6.18\n16\n")
    (path / "steps.tsv").write_text("".join("\t".join(r.split()) + "\n" for r in rows))
    for rel, body in files.items():
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            p.write_bytes(body)
        else:
            p.write_text(body)
    return path


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    for d in ("benchmarks/results", "docs", "tests/data/diagnose", "tests/data/monitor"):
        (root / d).mkdir(parents=True)
    return root


def _import(root: Path, *sweeps: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(IMPORT), *map(str, sweeps), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _listing(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*")}


def test_a_partial_rerun_is_merged_over_the_full_sweep_step_by_step(tmp_path: Path) -> None:
    """The newer sweep re-ran info, the anchors and the gpu tests (they win), its lstsq step was
    cut by its timeout with nothing written and its bench had not finished when the card went
    back (the older outputs stand in, and the page says what the newer sweep did), and it ran
    no trace and no suite (the older ones stay, with their dates)."""
    trace = DATA / "diagnose" / "gpu_h200" / "item_every_step.json.gz"
    launch = {
        "unit": "µs per launch (L2 flushed before each, as do_bench)",
        "gpuprobe": [4.0, 4.1, 3.9],
        "triton_do_bench": [4.0, 4.0, 4.0],
        "ratio_median": 1.0,
        "ratio_min": 0.9756,
        "ratio_max": 1.0256,
        "goal": "within 10%",
        "met": True,
        "gpuprobe_warm": [3.1, 3.07, 3.12],
        "warm_vs_flushed": 0.775,
    }
    old = _sweep(
        tmp_path / "old",
        OLD,
        [
            *("info 0 9", "info-text 0 5", "suite 1 134", "gpu-tests 1 174", "anchors 1 66"),
            *("trace-item_every_step 0 9", "scale 0 55"),
        ],
        {
            "info.txt": "the older info view\n",
            "suite.xml": _junit(10, 2),
            "gpu-tests.xml": _junit(4, 1),
            "anchors.json": '{"anchors": {}}',
            "anchors.txt": "the older anchors\n",
            "traces/item_every_step.json.gz": trace.read_bytes(),
            "scale-lstsq.json": "{}",
            "scale.txt": "the older lstsq\n",
            "bench-jax.json": "",  # started, never finished
        },
    )
    new = _sweep(
        tmp_path / "new",
        NEW,
        ["info 0 7", "info-text 0 4", "gpu-tests 0 205", "anchors 1 69", "scale 124 300"],
        {
            "info.txt": "the newer info view\n",
            "gpu-tests.xml": _junit(6, 0),
            "anchors.json": json.dumps({"anchors": {"launch": launch}}),
            "anchors.txt": "the newer anchors\n",
            "scale-lstsq.json": "",
            "bench-torch.json": "",  # started, not finished when the card went back
        },
    )
    before = {d: _listing(d) for d in (old, new)}
    root = _checkout(tmp_path)
    p = _import(root, old, new)
    assert p.returncode == 0, p.stderr
    assert {d: _listing(d) for d in (old, new)} == before  # nothing written into a sweep

    res = json.loads((root / "benchmarks" / "results" / "gpu_h200.json").read_text())
    st = res["steps"]
    assert [s["date"] for s in res["sweeps"]] == [OLD, NEW]
    assert st["info-text"] == {"rc": 0, "s": 4, "sweep_date": NEW}
    assert st["anchors"] == {"rc": 1, "s": 69, "sweep_date": NEW}
    assert st["suite"] == {"rc": 1, "s": 134, "sweep_date": OLD}
    assert st["trace-item_every_step"] == {"rc": 0, "s": 9, "sweep_date": OLD}
    assert st["scale"] == {
        "rc": 0,
        "s": 55,
        "sweep_date": OLD,
        "later": [
            "in the sweep of 2026-11-26 it was cut by its timeout after 300 s with no output"
        ],
    }
    assert res["gpu_tests"] == {"tests": 6, "failures": 0, "errors": 0, "skipped": 0}
    assert res["suite"] == {"tests": 10, "failures": 2, "errors": 0, "skipped": 0}
    assert res["figures"]["anchors"]["launch"]["gpuprobe_warm"] == [3.1, 3.07, 3.12]
    # HTA's rows (none where HTA is not installed) name the sweep of the trace they read
    assert {r["sweep_date"] for r in res["figures"]["hta"]["traces"]} <= {OLD}

    page = (root / "docs" / "gpu-h200.md").read_text()
    assert "```\nthe newer info view\n```" in page and "older info view" not in page
    driver = json.loads((DATA / "h200.json").read_text())["driver"]["driver_version"]
    lstsq = page.split("## gpuprobe lstsq on the card")[1].split("## ")[0]
    assert (
        f"*From the sweep of 2026-11-25 (driver {driver}); in the sweep of 2026-11-26 it was cut "
        "by its timeout after 300 s with no output.*\n\n```\nthe older lstsq\n```"
    ) in lstsq
    assert (
        "*not recorded: step bench-torch: the sweep of 2026-11-26 had started it and not "
        "finished it when the card was given back: its output is empty*"
    ) in page
    assert (
        "*not recorded: step bench-jax: the sweep of 2026-11-25 had started it and not finished "
        "it when the card was given back: its output is empty*"
    ) in page
    assert "*not recorded: step bench-cupy: run in none of the sweeps*" in page
    anchors = page.split("### The anchors")[1].split("## ")[0]
    assert f"*From the sweep of 2026-11-26 (driver {driver}).*" in anchors
    assert (
        "The launch timed warm beside it (no L2 flush: what `gpuprobe bench` reports): median "
        "3.10 µs over 3 rounds [3.07..3.12]; warm / flushed 0.775."
    ) in anchors
    assert (
        "### item_every_step (`sync`) and its fix item_fixed\n\n*From the sweep of 2026-11-25"
        in page
    )
    assert page.rstrip().endswith(
        f"- pytest -m gpu: 6 tests, 0 failed, 0 errors, 0 skipped, from the sweep of 2026-11-26 "
        f"(driver {driver})\n- the whole suite: 10 tests, 2 failed, 0 errors, 0 skipped, from the "
        f"sweep of 2026-11-25 (driver {driver})"
    )

    md = (root / "benchmarks" / "results" / "gpu_h200.md").read_text()
    assert md.startswith(f"# GPU figures on NVIDIA H200 (2 sweeps, the latest {NEW})")
    assert (
        "| launch (µs per launch (L2 flushed before each, as do_bench)) | ratio 1.000 "
        "[0.976..1.026] | within 10% | yes | 2026-11-26 |"
    ) in md
    assert (
        "| launch, warm (no L2 flush; what gpuprobe reports) | median 3.10 µs [3.07..3.12], "
        "0.775 of the flushed | not judged | – | 2026-11-26 |"
    ) in md
    assert "Steps not at exit 0: suite (1, 2026-11-25), anchors (1, 2026-11-26)." in md
    assert (
        "- scale: from the sweep of 2026-11-25; in the sweep of 2026-11-26 it was cut by its "
        "timeout after 300 s with no output."
    ) in md

    snap = json.loads((root / "tests" / "data" / "h200.json").read_text())
    assert snap["origin"].endswith(f"on {NEW} by benchmarks/gpu_sweep.sh (gpuprobe info --json)")
    origin = (root / "tests" / "data" / "diagnose" / "gpu_h200" / "ORIGIN.md").read_text()
    assert origin.startswith(
        f"# Traces recorded on NVIDIA H200 (driver {driver}, CUDA 13.0) on {OLD}"
    )


def test_a_newer_sweep_that_ran_a_step_replaces_the_older_output(tmp_path: Path) -> None:
    """Both sweeps recorded the trace: the newer one is kept as the fixture, with its date."""
    older = DATA / "diagnose" / "gpu_h200" / "item_every_step.json.gz"
    newer = DATA / "diagnose" / "gpu_h200" / "item_fixed.json.gz"
    rows = ["info 0 1", "trace-item_every_step 0 9"]
    old = _sweep(tmp_path / "a", OLD, rows, {"traces/item_every_step.json.gz": older.read_bytes()})
    new = _sweep(tmp_path / "b", NEW, rows, {"traces/item_every_step.json.gz": newer.read_bytes()})
    root = _checkout(tmp_path)
    assert _import(root, old, new).returncode == 0
    kept = root / "tests" / "data" / "diagnose" / "gpu_h200" / "item_every_step.json.gz"
    assert gzip.decompress(kept.read_bytes()) == gzip.decompress(newer.read_bytes())
    res = json.loads((root / "benchmarks" / "results" / "gpu_h200.json").read_text())
    assert res["steps"]["trace-item_every_step"] == {"rc": 0, "s": 9, "sweep_date": NEW}


def test_a_step_that_only_left_out_is_not_called_cut(tmp_path: Path) -> None:
    """A re-run with --only leaves an empty output for each step it passed over (the shell makes
    the file of a line's redirection before the step decides not to run): the H200's re-run of
    2026-11-26 was said to have "started and not finished" eight steps it never ran. Only a step
    named in started.txt, or (in a sweep without it) made after the last row, was cut."""
    older = {"scale-lstsq.json": "{}", "scale.txt": "the older lstsq\n",
             "anchors.json": '{"anchors": {}}', "anchors.txt": "the older anchors\n"}  # fmt: skip
    old = _sweep(tmp_path / "a", OLD, ["info 0 1", "scale 0 55", "anchors 0 66"], older)
    empty = {"scale-lstsq.json": "", "anchors.json": ""}
    new = _sweep(tmp_path / "b", NEW, ["info 0 1"], empty)
    t = (new / "steps.tsv").stat().st_mtime_ns
    # scale's file was made before the last row: passed over; the anchors' after it: cut
    os.utime(new / "scale-lstsq.json", ns=(t - 10**9, t - 10**9))
    os.utime(new / "anchors.json", ns=(t + 10**9, t + 10**9))
    started = _sweep(tmp_path / "c", NEW.replace("03:51", "04:51"), ["info 0 1"],
                     {"started.txt": "info\nanchors\n", **empty})  # fmt: skip
    for latest in (new, started):
        root = _checkout(tmp_path / latest.name)
        p = _import(root, old, latest)
        assert p.returncode == 0, p.stderr
        st = json.loads((root / "benchmarks" / "results" / "gpu_h200.json").read_text())["steps"]
        assert st["scale"] == {"rc": 0, "s": 55, "sweep_date": OLD}  # no "later": never run
        assert st["anchors"]["sweep_date"] == OLD
        assert [w.split(" had ")[1] for w in st["anchors"]["later"]] == [
            "started it and not finished it when the card was given back: its output is empty"
        ]
        page = (root / "docs" / "gpu-h200.md").read_text()
        assert "the older lstsq" in page and "the older anchors" in page


def test_sweeps_out_of_order_or_of_two_cards_are_refused_in_one_line(tmp_path: Path) -> None:
    old = _sweep(tmp_path / "a", OLD, ["info 0 1"], {})
    new = _sweep(tmp_path / "b", NEW, ["info 0 1"], {})
    other = _sweep(tmp_path / "c", NEW, ["info 0 1"], {})
    info = json.loads((other / "info.json").read_text())
    info["gpus"][0]["name"] = "NVIDIA H100 80GB HBM3"
    (other / "info.json").write_text(json.dumps(info))
    root = _checkout(tmp_path)
    for sweeps, says in (
        ((new, old), f"give the sweeps oldest first (their dates: {NEW}, {OLD})"),
        (
            (old, other),
            "the sweeps are of different cards (NVIDIA H100 80GB HBM3, NVIDIA H200): merge only "
            "sweeps of one card",
        ),
    ):
        p = _import(root, *sweeps)
        assert p.returncode == 1
        assert p.stderr.strip() == f"gpu_sweep_import: {says}", p.stderr
    assert list((root / "docs").iterdir()) == []  # nothing written


# -- the profile steps ----------------------------------------------------------------------------

PROFILE_OVERHEAD = {  # benchmarks/profile_overhead.py --quick on the H200, 2026-11-26 (load 4.0)
    "goal": "< 1 % of step time",
    "load_average": [3.951, 2.876, 1.48],
    "load_average_after": [1.741, 2.421, 1.439],
    "step_time": [
        {
            "width": 256,
            "median_step_us": {"none": 685.043, "later": 1023.71, "after-window": 1126.009},
            "per_run_median_step_us": {"none": [682.412, 685.043, 902.666]},
            "ratio_median": {"later": 1.1341, "after-window": 1.2474},
        },
        {
            "width": 4096,
            "median_step_us": {"none": 3971.897, "later": 3899.98, "after-window": 3737.902},
            "per_run_median_step_us": {"none": [3972.344, 3971.897, 2628.4]},
            "ratio_median": {"later": 1.0734, "after-window": 1.318},
        },
    ],
    "per_call": {"unhooked_ns": 31965.5, "hooked_ns": 32960.9, "hook_ns_per_step": 995.34},
    "met": {"256": False, "4096": False},
}


def test_the_profile_steps_are_shown_kept_and_read_honestly(tmp_path: Path) -> None:
    """profile's two runs of examples/train.py (the traces the H200 wrote): profile's own view
    of each report, the two traces compared here and kept as fixtures, their figures; and the
    hook's cost read for what a loaded machine lets it say."""
    import gpuprobe

    card = DATA / "diagnose" / "gpu_h200"
    sweep = tmp_path / "gpu-sweep"
    rows = ["info 0 7", "profile-train 0 18", "profile-workers 0 16", "profile-overhead 0 87"]
    files: dict[str, str | bytes] = {
        "profile-overhead.json": json.dumps(PROFILE_OVERHEAD),
        "profile-overhead.md": "# gpuprobe profile: the hook's cost\n\nthe script's own table\n",
    }
    for step in ("profile-train", "profile-workers"):
        trace = f"{step}/traces/vm_1.pt.trace.json.gz"
        files[trace] = (card / f"{step.replace('-', '_')}.json.gz").read_bytes()
        files[f"{step}.json"] = ""  # written below, from the trace in its place
    _sweep(sweep, NEW, rows, files)
    for step, extra in (("profile-train", ()), ("profile-workers", ("--workers", "4"))):
        trace = sweep / step / "traces" / "vm_1.pt.trace.json.gz"
        report = gpuprobe.ProfileReport(
            command=("python3", "examples/train.py", "--steps", "60", *extra),
            out_dir=str(sweep / step),
            window="skip 10 steps, warm up 2, record 5",
            exit_code=0,
            traces=(str(trace),),
            diagnosis=gpuprobe.diagnose(trace),
        )
        (sweep / f"{step}.json").write_text(json.dumps(report.to_dict()))
    root = _checkout(tmp_path)
    p = _import(root, sweep)
    assert p.returncode == 0, p.stderr

    page = (root / "docs" / "gpu-h200.md").read_text()
    prof = page.split("## gpuprobe profile: examples/train.py, unmodified")[1].split("\n## ")[0]
    assert "gpuprobe profile: python3 examples/train.py --steps 60 → exit code 0" in prof
    assert "gpuprobe diagnose profile-train/traces/vm_1.pt.trace.json.gz" in prof  # the sweep's
    assert str(sweep) not in prof
    assert (
        "before: profile-traces/profile_train.json.gz\n  after:  "
        "profile-traces/profile_workers.json.gz\n\nStep time 54.6 ms → 2.7 ms (median)"
    ) in prof
    res = json.loads((root / "benchmarks" / "results" / "gpu_h200.json").read_text())
    train, workers = (res["figures"]["profile"][s] for s in ("profile-train", "profile-workers"))
    assert (train["headline"], round(train["step_ms_median"], 1)) == ("input-bound", 54.6)
    assert round(train["dataloader_pct"], 1) == 96.1
    # the median step is 2.7 ms, but step #13 waits 29 ms for the DataLoader: unsteady-window
    # (tests/tools/diagnose/test_unsteady_window.py) heads it, launch-bound follows
    assert (workers["headline"], round(workers["step_ms_median"], 1)) == ("unsteady-window", 2.7)
    assert workers["command"][-2:] == ["--workers", "4"]
    assert (
        "| profile examples/train.py --steps 60 --workers 4 | median step 2.7 ms: GPU busy 5.5 %, "
        "DataLoader 2.4 % | a verdict | headline unsteady-window |"
    ) in (root / "benchmarks" / "results" / "gpu_h200.md").read_text()
    kept = root / "tests" / "data" / "diagnose" / "gpu_h200"
    for name in ("profile_train", "profile_workers"):
        got = gzip.decompress((kept / f"{name}.json.gz").read_bytes())
        assert got == gzip.decompress((card / f"{name}.json.gz").read_bytes())
    assert (
        "| `profile_workers.json.gz` | `gpuprobe profile -- python3 examples/train.py --steps 60 "
        "--workers 4` |"
    ) in (kept / "ORIGIN.md").read_text()

    po = res["figures"]["profile_overhead"]
    assert round(po["in_process_pct"]["256"], 4) == round(100 * 995.34 / 685043, 4) == 0.1453
    assert po["noise"] is True and po["met_in_process"] is True
    md = (root / "benchmarks" / "results" / "gpu_h200.md").read_text()
    assert (
        "| profile hook after its window, in process | +995 ns per step: 0.145 % of the "
        "width-256 step, 0.025 % of the width-4096 step | < 1 % of step time | yes |"
    ) in md
    assert (
        "| width 256: 1.247, width 4096: 1.318; load average 4.0 | < 1 % of step time | "
        "noise, not judged |" in md
    )
    assert "the script's own table" in page
    assert "32 % (width 256), 34 % (width 4096) from round to round" in page
    assert "so those ratios are noise here, not the hook's cost" in page
