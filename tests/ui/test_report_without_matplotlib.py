"""Every way of drawing a chart, on an install without matplotlib (the extra ``gpuprobe[plot]``).

Each command runs in a subprocess whose ``sitecustomize`` puts ``None`` in
``sys.modules["matplotlib"]``, so ``import matplotlib`` fails there (and in any Python it starts)
as it does where the package is not installed. Each picture asked for is one line naming the
extra, never a traceback, and everything else is still written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpuprobe
from _support import pythonpath_env

PACKAGE_ROOT = Path(gpuprobe.__file__).resolve().parents[1]
EXTRA = "pip install 'gpuprobe[plot]'"
MISSING = f"charts need matplotlib: {EXTRA}"
BOOT = "import sys; from gpuprobe.cli import main; sys.argv[0] = 'gpuprobe'; sys.exit(main())"


@pytest.fixture
def no_mpl(tmp_path: Path) -> dict[str, str]:
    """The environment of a Python in which matplotlib cannot be imported."""
    blocker = tmp_path / "no_matplotlib"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    env = pythonpath_env(blocker, PACKAGE_ROOT)  # then the entries this process was given
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # bench's history stays here
    env["COLUMNS"] = "80"
    return env


def _python(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def _gpuprobe(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _python(env, "-c", BOOT, *args, cwd=cwd)


def _extra_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of output that name the extra; and no traceback anywhere."""
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    return [line for line in out.splitlines() if "gpuprobe[plot]" in line]


def test_the_blocker_blocks(no_mpl: dict[str, str], tmp_path: Path) -> None:
    probe = _python(no_mpl, "-c", "import matplotlib", cwd=tmp_path)
    assert probe.returncode == 1
    assert "ModuleNotFoundError" in probe.stderr


def test_run_writes_everything_but_the_charts(no_mpl: dict[str, str], tmp_path: Path) -> None:
    proc = _gpuprobe(
        no_mpl, "run", "--out", "r", "--", sys.executable, "-c", "print('hi')", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert _extra_lines(proc) == [f"gpuprobe: no report.png: {MISSING}"]
    d = tmp_path / "r"
    files = sorted(p.name for p in d.iterdir() if not p.name.startswith("."))  # not the hook's
    assert files == ["report.html", "summary.json", "timeline.jsonl"]
    assert json.loads((d / "summary.json").read_text())["exit_code"] == 0
    page = (d / "report.html").read_text()
    assert "Not drawn: charts need matplotlib" in page
    assert 'data-images="0"' in page
    assert "<h2>Findings</h2>" in page

    # `gpuprobe plot DIR` again: the page again, the same one line, exit 0
    (d / "report.html").unlink()
    proc = _gpuprobe(no_mpl, "plot", "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _extra_lines(proc) == [f"gpuprobe: no report.png: {MISSING}"]
    assert (d / "report.html").is_file()
    assert not (d / "report.png").exists()

    proc = _gpuprobe(no_mpl, "plot", "r", "--json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert doc["files"] == [str(Path("r") / "report.html")]
    assert doc["notes"] == [f"gpuprobe: no report.png: {MISSING}"]

    # a picture and nothing else asked for: its one line, exit 2
    proc = _gpuprobe(no_mpl, "plot", "r", "--out", "c.png", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"gpuprobe: {MISSING}\n"
    assert not (tmp_path / "c.png").exists()

    proc = _gpuprobe(no_mpl, "plot", "r", "--out", "c.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _extra_lines(proc) == [f"gpuprobe: no charts in c.html: {MISSING}"]
    assert "Not drawn" in (tmp_path / "c.html").read_text()


def test_bench_plot_prints_the_report_then_one_line(no_mpl: dict[str, str], tmp_path: Path) -> None:
    proc = _gpuprobe(
        no_mpl,
        *("bench", "matmul", "--backend", "numpy", "--quick", "--no-save", "--plot", "b.png"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "matmul" in proc.stdout  # the measurements are shown all the same
    assert "charts:" not in proc.stdout
    assert _extra_lines(proc) == [f"gpuprobe: no charts: {MISSING}"]
    assert proc.stderr.splitlines()[-1] == f"gpuprobe: no charts: {MISSING}"
    assert not (tmp_path / "b.png").exists()


def test_scale_plot_prints_the_results_then_one_line(
    no_mpl: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("dask")
    proc = _gpuprobe(
        no_mpl,
        *("scale", "lstsq", "--rows", "2000", "--cols", "20", "--workers", "1", "--threads"),
        *("--plot", "s.png"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "numpy.linalg.lstsq" in proc.stdout
    assert "plot:" not in proc.stdout
    assert _extra_lines(proc) == [f"gpuprobe: no plot: {MISSING}"]
    assert not (tmp_path / "s.png").exists()


API_SCRIPT = """
import sys, warnings
import gpuprobe
from gpuprobe.api import plot_timeline

with gpuprobe.record(sys.argv[1], hz=20) as rec:
    sum(range(100_000))
try:
    rec.plot()
except ImportError as exc:
    print("plot:", exc)
try:
    plot_timeline(rec.timeline, sys.argv[1] + "/c.png")
except ImportError as exc:
    print("plot_timeline:", exc)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    page = rec.report()
print("report:", page.name, page.is_file())
for w in caught:
    print("warning:", w.category.__name__, w.filename == __file__, w.message)
"""


def test_the_python_api_raises_import_error_and_writes_the_page(
    no_mpl: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "use_api.py"
    script.write_text(API_SCRIPT)
    proc = _python(no_mpl, str(script), str(tmp_path / "rec"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"plot: {MISSING}",
        f"plot_timeline: {MISSING}",
        "report: report.html True",
        f"warning: UserWarning True {tmp_path / 'rec' / 'report.html'}: written without its "
        f"charts: {MISSING}",
    ]
    assert not (tmp_path / "rec" / "c.png").exists()


def test_a_matplotlib_that_does_not_import_says_why() -> None:
    from gpuprobe.ui.plot_extra import unavailable

    gone = unavailable(ModuleNotFoundError("no", name="matplotlib.figure"))
    assert gone.message == MISSING
    assert isinstance(gone, ImportError)
    assert gone.exit_code == 2
    broken = unavailable(ImportError("libfreetype.so.6: cannot open", name="matplotlib.ft2font"))
    assert broken.message == f"{MISSING} (libfreetype.so.6: cannot open)"
