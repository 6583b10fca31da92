"""No process is left behind when gpuprobe is stopped: ``fit`` (its fork server, the resource
tracker, a trial) and ``bench`` (its worker), stopped by SIGTERM or killed by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
BOOT = "import sys; from gpuprobe.cli import main; sys.exit(main())"
FIT = ["fit", "--device", "cpu", "--min", "4096", "--max", "8192", "--repeats", "1000"]
FIT += ["--memory-limit", "2GiB", "--no-curve"]  # 1000 steps per trial: it runs long
BENCH = ["bench", "matmul", "--backend", "numpy", "--device", "cpu", "--budget", "60"]  # > 20 s
BENCH += ["--no-save"]


def _env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(SRC), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return e


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            continue
    return out


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
@pytest.mark.parametrize(
    ("argv", "helpers", "needed"),
    [(FIT, "a fork server, a resource tracker and a trial", 3), (BENCH, "a bench worker", 1)],
    ids=["fit", "bench"],
)
def test_helpers_end_with_gpuprobe(
    tmp_path: Path, argv: list[str], helpers: str, needed: int, sig: signal.Signals
) -> None:
    p = subprocess.Popen(
        [sys.executable, "-c", BOOT, *argv],
        env=_env(),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    me = psutil.Process(p.pid)
    kids: list[int] = []
    try:

        def started() -> bool:
            kids[:] = [c.pid for c in me.children(recursive=True)]
            return len(kids) >= needed

        _wait(started, 120, helpers)
        time.sleep(0.5)  # let the trial or the worker get into its work (not a timing check)
        kids[:] = sorted(set(kids) | {c.pid for c in me.children(recursive=True)})
        p.send_signal(sig)  # gpuprobe alone, not its group
        _, stderr = p.communicate(timeout=60)
        _wait(lambda: not _alive(kids), 20, f"{helpers} to end ({_alive(kids)} alive)")
    finally:
        if p.poll() is None:
            p.kill()
        for pid in _alive(kids):
            os.kill(pid, signal.SIGKILL)
    assert len(kids) >= needed
    assert p.returncode == (128 + sig if sig == signal.SIGTERM else -sig), stderr
    if sig == signal.SIGTERM:
        assert stderr.strip().splitlines()[-1] == "gpuprobe: stopped by SIGTERM"
        assert "Traceback" not in stderr


PLANTED = """
import os, sys, tempfile
from pathlib import Path
from hypothesis import given, strategies as st

sys.path.insert(0, os.environ["GPUPROBE_TEST_TREE"])
import mylib  # code under test in the checkout: Hypothesis collects its constants


def test_a_helper_folder():
    d = tempfile.mkdtemp(prefix="gpuprobe-rec-")  # as gpuprobe.record() does without out=
    Path(d, "timeline.jsonl").write_text("{}")
    assert os.environ["TMPDIR"] == tempfile.gettempdir()


@given(st.integers())
def test_hypothesis(n):
    assert mylib.same(n) == n


def test_a_plot_in_the_checkout():
    Path(os.environ["GPUPROBE_TEST_TREE"], "out.pdf").write_bytes(b"%PDF-")
"""


def test_the_suite_leaves_nothing_in_tmpdir_or_the_checkout(tmp_path: Path) -> None:
    """A session whose tests leave a folder in $TMPDIR, a Hypothesis database and a plot in the
    checkout: $TMPDIR holds only pytest's own folder afterwards, no .hypothesis/ is written,
    and the plot fails the session by name (tests/_leftovers.py, which conftest.py uses)."""
    tree, tmpdir = tmp_path / "tree", tmp_path / "tmpdir"
    tests = tree / "tests"  # the code under test in the checkout: Hypothesis reads its constants
    for d in (tree, tests, tmpdir):
        d.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tests / "conftest.py").write_text(
        "import _leftovers, pytest\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_configure(config): _leftovers.start(config)\n"
        "def pytest_sessionfinish(session, exitstatus): _leftovers.finish(session)\n"
    )
    (tests / "test_planted.py").write_text(PLANTED)
    (tree / "mylib.py").write_text(
        'LIMITS = (12345, 67890.5, "a constant")\n\ndef same(n):\n    return n if n != 12345 else n\n'
    )
    env = {**_env(), "TMPDIR": str(tmpdir), "GPUPROBE_TEST_TREE": str(tree)}
    env["PYTHONPATH"] += os.pathsep + str(Path(__file__).parent)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "3 passed" in p.stdout, p.stdout + p.stderr
    assert p.returncode == 1, p.stdout
    assert "files left in the checkout" in p.stdout and "\n  out.pdf\n" in p.stdout
    assert [d.name for d in tmpdir.iterdir()] == [f"pytest-of-{psutil.Process().username()}"]
    assert sorted(d.name for d in tree.iterdir() if d.name != "__pycache__") == [
        ".git",
        "mylib.py",
        "out.pdf",
        "tests",
    ]
