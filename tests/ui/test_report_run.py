"""Charts and HTML of a recording: panels, long recordings reduced, text escaped."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpuprobe.platform.hardware.types import GpuSample
from gpuprobe.tools.monitor.judge import summarize
from gpuprobe.tools.monitor.records import GpuTick, HostSample, Sample, TimelineHeader, TreeSample
from gpuprobe.tools.monitor.show import plots
from gpuprobe.tools.monitor.show.html import render_run_html, write_run_report
from gpuprobe.tools.monitor.timeline import Timeline, read_timeline

DATA = Path(__file__).resolve().parents[1] / "data" / "monitor"


def _long(n: int) -> Timeline:
    samples = [
        Sample(
            t=float(i),
            host=HostSample(cpu_percent=(float(i % 100), 50.0)),
            tree=TreeSample(
                cpu_percent=100.0, rss=2**30, main_cpu_percent=100.0, main_thread_max_percent=100.0
            ),
            gpus=(GpuTick(sample=GpuSample(index=0, time=float(i), utilization_gpu=i % 2 * 100)),),
        )
        for i in range(1, n + 1)
    ]
    return Timeline(
        header=TimelineHeader(started=0.0, hz=1.0, command=("<script>x",)), samples=samples
    )


def test_bucketing_keeps_mean_and_envelope() -> None:
    t = np.arange(10_000, dtype=float)
    y = (np.arange(10_000) % 2) * 100.0
    tb, mean, lo, hi = plots._bucket(t, y, 100)
    assert len(tb) == 100
    assert np.allclose(mean, 50.0) and np.all(lo == 0) and np.all(hi == 100)
    short = plots._bucket(t[:10], y[:10], 100)
    assert len(short[0]) == 10


def test_figure_panels() -> None:
    # a GPU recording without host samples: the four GPU panels (power with its temperature
    # axis), no empty CPU panel
    gpu = read_timeline(DATA / "healthy.jsonl")
    assert plots.panels_with_data(gpu) == plots.GPU_PANELS
    fig = plots.timeline_figure(gpu)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["GPU util %", "GPU mem GiB", "power W", "SM clock MHz", "temp °C (dotted)"]
    # panels asked for by name are drawn, each saying in one line why it is empty
    host_only = plots.timeline_figure(gpu, plots.CPU_PANELS)
    assert [ax.get_ylabel() for ax in host_only.axes] == ["core", "CPU % of a core", "memory"]
    assert [t.get_text() for ax in host_only.axes for t in ax.texts] == [
        "no host samples",
        "no process watched",
        "no host samples",
    ]


def test_long_recording_is_drawn_reduced(tmp_path: Path) -> None:
    tl = _long(20_000)
    fig = plots.timeline_figure(tl, ("gpu_util", "cpu_heatmap"))
    line = fig.axes[0].get_lines()[0]
    assert len(line.get_xdata()) == plots.MAX_POINTS
    mesh = fig.axes[1].collections[0]
    assert mesh.get_array().shape[-1] == plots.MAX_POINTS  # columns of the heatmap
    out = write_run_report(tl, summarize(tl), png_path=tmp_path / "r.png")
    assert out[0].read_bytes()[:4] == b"\x89PNG"


def test_html_escapes_and_embeds() -> None:
    tl = _long(10)
    page = render_run_html(tl, summarize(tl), [("GPU", b"\x89PNGfake")])
    assert "<script>x" not in page and "&lt;script&gt;x" in page
    assert page.count("data:image/png;base64,") == 1
    assert "http://" not in page and "https://" not in page
