"""``result.plot("run.png")``: every public result that draws takes the file as its first
argument and writes it in the format its suffix names, through one helper
(:func:`gpuprobe.ui.chart.save_figure`); ``plot()`` alone returns the figure and leaves the user's
matplotlib state alone; replayed recordings and a numpy-only bench draw no empty panel (issue 27).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _results import BUILDERS

import gpuprobe
from gpuprobe.core.errors import UsageError
from gpuprobe.tools.monitor.show import plots
from gpuprobe.ui.plot_extra import FIGURE_FORMATS, figure_path

DATA = Path(__file__).resolve().parents[1] / "data"
# what each format's file starts with (SVG: an XML declaration, then the <svg element)
MAGIC = {
    ".png": b"\x89PNG\r\n\x1a\n",
    ".pdf": b"%PDF-",
    ".jpg": b"\xff\xd8\xff",
    ".jpeg": b"\xff\xd8\xff",
}
# the public results that draw: every type in gpuprobe._TYPES whose result has a plot()
DRAWN = ["BenchReport", "Recording", "RunResult", "ScaleResult", "Timeline"]


def _check(path: Path) -> None:
    data = path.read_bytes()
    if path.suffix.lower() == ".svg":
        assert data.startswith(b"<?xml") and b"<svg" in data[:2000], data[:200]
        assert data.rstrip().endswith(b"</svg>")
    else:
        assert data.startswith(MAGIC[path.suffix.lower()]), data[:16]
    assert len(data) > 5_000  # a chart, not an empty page


def _built(name: str) -> object:
    return BUILDERS[name]()


def test_these_are_the_results_that_draw() -> None:
    types = {name: getattr(gpuprobe, name) for name in gpuprobe._TYPES}
    assert sorted(n for n, t in types.items() if callable(getattr(t, "plot", None))) == DRAWN


@pytest.mark.parametrize("name", DRAWN)
def test_a_path_first_writes_the_file(name: str, tmp_path: Path) -> None:
    result = _built(name)
    for suffix in (".png", ".svg", ".pdf"):
        out = result.plot(str(tmp_path / f"chart{suffix}"))  # a str, as users type it
        assert out == tmp_path / f"chart{suffix}"
        _check(out)
    _check(result.plot(tmp_path / "chart.JPG"))  # a Path; the suffix in any case


@pytest.mark.parametrize("name", DRAWN)
def test_an_unknown_suffix_is_one_line_naming_the_formats(name: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        _built(name).plot(tmp_path / "chart.gif")
    assert str(err.value) == (
        f"{tmp_path / 'chart.gif'}: give a file ending in .png, .svg, .pdf, .jpg, .jpeg"
    )
    assert not (tmp_path / "chart.gif").exists()


def test_a_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    tl = gpuprobe.read_timeline(DATA / "monitor" / "healthy.jsonl")
    with pytest.raises(UsageError, match=r"^.*nowhere/c\.png: cannot write it \(No such file"):
        tl.plot(tmp_path / "nowhere" / "c.png")


def test_the_check_needs_no_matplotlib_and_names_the_option() -> None:
    assert figure_path("a/b.Pdf") == Path("a/b.Pdf")
    assert FIGURE_FORMATS == (".png", ".svg", ".pdf", ".jpg", ".jpeg")
    with pytest.raises(UsageError, match=r"^--plot x\.gif: give a file ending in \.png, "):
        figure_path("x.gif", "--plot")
    with pytest.raises(UsageError, match=r", \.jpeg, \.html$"):
        figure_path("x", "--out", also=(".html",))
    with pytest.raises(UsageError, match="not tuple"):
        figure_path(("gpu_util",))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", DRAWN)
def test_plot_alone_returns_the_figure_and_leaves_matplotlib_alone(name: str) -> None:
    result = _built(name)
    rc = dict(matplotlib.rcParams)
    figures = plt.get_fignums()
    fig = result.plot()
    assert isinstance(fig, matplotlib.figure.Figure) and fig.axes
    assert fig._repr_png_().startswith(MAGIC[".png"])  # what Jupyter shows inline
    assert plt.get_fignums() == figures
    assert dict(matplotlib.rcParams) == rc


def test_plot_timeline_and_panels_by_name(tmp_path: Path) -> None:
    tl = gpuprobe.read_timeline(DATA / "monitor" / "healthy.jsonl")
    out = gpuprobe.plot_timeline(tl, str(tmp_path / "t.pdf"))
    _check(out)
    fig = tl.plot(panels=("gpu_util",))
    assert [ax.get_ylabel() for ax in fig.axes] == ["GPU util %"]


# --- replays without a GPU, and a GPU replay without host samples: no empty panel ---------


def test_a_recording_without_a_gpu_draws_the_cpu_panels_alone() -> None:
    tl = gpuprobe.read_timeline(DATA / "monitor" / "healthy.jsonl")
    cpu_only = gpuprobe.read_timeline(_host_only(tl))
    assert plots.panels_with_data(cpu_only) == plots.CPU_PANELS
    fig = cpu_only.plot()
    # the heatmap (its colour bar inside it), the command's CPU, memory and its right axis: no
    # GPU panel
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["core", "CPU % of a core", "command RSS MiB", "host used GiB"]
    (bar,) = fig.axes[0].child_axes
    assert bar.get_ylabel() == "busy %"
    assert not [t.get_text() for ax in fig.axes for t in ax.texts]  # no "no samples" panel


def _host_only(tl: gpuprobe.Timeline) -> Path:
    """A copy of a recording made on a machine without a GPU (as ``gpuprobe run`` writes it
    there): host and command samples, no GPU ticks; the command's last sample reads 0 bytes
    resident, as a process that has just exited does."""
    import json
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="gpuprobe-nogpu-"))
    lines = []
    for i, raw in enumerate((tl.path or Path()).read_text().splitlines()):
        obj = json.loads(raw)
        if obj["type"] == "header":
            obj["gpus"] = []
            obj["driver"] = {"status": "no-library", "error": "NVML Shared Library Not Found"}
        elif obj["type"] == "sample":
            obj["gpus"] = []
            obj["host"] = {"cpu_percent": [50.0, 100.0], "memory_used": 2**31}
            obj["tree"] = {"cpu_percent": 100.0, "rss": 40 * 2**20 if i < 60 else 0}
        lines.append(json.dumps(obj))
    (d / "timeline.jsonl").write_text("\n".join(lines) + "\n")
    return d


def test_a_replay_page_shows_no_na_and_no_empty_section(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    (d / "timeline.jsonl").write_bytes((DATA / "monitor" / "healthy.jsonl").read_bytes())
    p = _gpuprobe("plot", "r", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "n/a" not in p.stdout
    assert "host: 8 cores (no host samples)" in p.stdout
    page = (d / "report.html").read_text()
    assert "n/a" not in page
    assert "No host samples in this recording: only the GPUs were recorded." in page
    assert '<h2>GPU</h2><img alt="GPU"' in page and "<h2>CPU and memory</h2>" not in page
    assert 'data-images="1"' in page


def test_a_zombie_reads_no_rss() -> None:
    # the last sample of a run reads 0 bytes resident: it is left out of the chart and the
    # summary instead of a drop to 0
    healthy = gpuprobe.read_timeline(DATA / "monitor" / "healthy.jsonl")
    tl = gpuprobe.read_timeline(_host_only(healthy))
    assert gpuprobe.summarize(tl).host.rss_end == 40 * 2**20
    fig = tl.plot(panels=("memory",))
    (rss,) = fig.axes[0].get_lines()
    assert min(y for y in rss.get_ydata() if y == y) == 40  # MiB; NaN where it read 0


def _empty_panels(fig: matplotlib.figure.Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts if "in this run" in t.get_text()]


def test_bench_draws_only_the_charts_it_has_results_for() -> None:
    report = _built("BenchReport")  # an H200's torch run, cut (tests/data/bench/README.md)
    fig = report.plot()
    # no elementwise crossover in it: three panels, none empty
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["crossover: matmul", "bandwidth vs size", "roofline"]
    assert not _empty_panels(fig)


def test_bench_on_a_numpy_only_machine_draws_no_empty_panel() -> None:
    report = gpuprobe.bench(["crossover"], ["numpy"], quick=True, budget_s=0.005, save=False)
    fig = report.plot()
    # no transfer results: no bandwidth panel; the crossover curves say why they are CPU only
    assert [ax.get_title() for ax in fig.axes] == [
        "crossover: elementwise a + b",
        "crossover: matmul",
        "roofline",
    ]
    assert not _empty_panels(fig)
    notes = [t.get_text() for ax in fig.axes[:2] for t in ax.texts]
    assert notes == ["no GPU here: CPU curves only"] * 2
    # matmul's sizes as plain numbers, no crowded minor labels
    mm = fig.axes[1]
    fig.canvas.draw()
    assert [t.get_text() for t in mm.get_xticklabels(minor=True) if t.get_text()] == []
    assert [t.get_text() for t in mm.get_xticklabels()][:3] == ["16", "32", "64"]
    # nothing measured at all: one panel that says so
    empty = gpuprobe.BenchReport.from_dict({**report.to_dict(), "results": []}).plot()
    assert _empty_panels(empty) == ["no measured results in this run: nothing to chart"]


# --- the command line ------------------------------------------------------------------------


def _gpuprobe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``gpuprobe ARGS`` in ``cwd``, from this checkout whatever the folder."""
    src = str(Path(gpuprobe.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "gpuprobe", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )


def test_plot_out_writes_every_format(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    (d / "timeline.jsonl").write_bytes((DATA / "monitor" / "healthy.jsonl").read_bytes())
    for name in ("c.pdf", "c.svg", "c.jpg"):
        p = _gpuprobe("plot", "r", "--out", name, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        _check(tmp_path / name)
    p = _gpuprobe("plot", "r", "--out", "c.gif", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr == (
        "gpuprobe: --out c.gif: give a file ending in .png, .svg, .pdf, .jpg, .jpeg, .html\n"
    )


def test_bench_plot_pdf_on_a_numpy_only_machine(tmp_path: Path) -> None:
    p = _gpuprobe(
        *("bench", "crossover", "matmul", "--backend", "numpy", "--quick", "--budget", "0.005"),
        *("--no-save", "--plot", "b.pdf"),
        cwd=tmp_path,
    )
    assert p.returncode in (0, 1), p.stderr
    _check(tmp_path / "b.pdf")
    assert "charts: b.pdf" in p.stdout


def test_scale_plot_pdf(tmp_path: Path) -> None:
    pytest.importorskip("dask")
    p = _gpuprobe(
        *("scale", "lstsq", "--rows", "2000", "--cols", "20", "--workers", "1", "--threads"),
        *("--plot", "s.pdf"),
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    _check(tmp_path / "s.pdf")


def test_bench_plot_that_cannot_be_written_keeps_the_report(tmp_path: Path) -> None:
    p = _gpuprobe(
        *("bench", "launch", "--backend", "numpy", "--quick", "--budget", "0.005", "--no-save"),
        *("--plot", "gone/b.png"),
        cwd=tmp_path,
    )
    assert p.returncode == 2
    assert "launch" in p.stdout and "charts:" not in p.stdout  # the measurements all the same
    (line,) = [x for x in p.stderr.splitlines() if "no charts" in x]
    assert line == "gpuprobe: no charts: gone/b.png: cannot write it (No such file or directory)"


def test_scale_without_numpy_has_the_speedup_panel_alone() -> None:
    with_numpy = _built("ScaleResult")
    assert [ax.get_title() for ax in with_numpy.plot().axes] == ["speedup", "error"]
    alone = gpuprobe.scale_lstsq(
        400, 4, workers=(1,), methods=("normal",), chunk_rows=200, compare_numpy=False
    )
    assert [ax.get_title() for ax in alone.plot().axes] == ["speedup"]
