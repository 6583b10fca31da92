"""Charts a person can read: the memory a command used on an axis that fits it, legends off the
data, labelled reference lines, and no pyplot state touched."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "tools" / "monitor"))
from tl_builder import GIB, build

from gpuprobe.tools.monitor.show import plots
from gpuprobe.ui.chart import Chart

MIB = 2**20


def _axis(fig: Chart, label: str) -> object:
    return next(ax for ax in fig.axes if ax.get_ylabel() == label)


def test_a_small_command_memory_is_drawn_in_mib_not_flat_on_a_gib_axis() -> None:
    tl = build(rss=lambda i: 13 * MIB, mem=lambda i: 13 * MIB)
    fig = plots.timeline_figure(tl)
    ax = _axis(fig, "command RSS MiB")
    line = ax.get_lines()[0]  # type: ignore[attr-defined]
    assert np.nanmax(line.get_ydata()) == 13.0
    lo, hi = ax.get_ylim()  # type: ignore[attr-defined]
    assert lo == 0 and 13 < hi < 30  # the line fills the panel, not 1 % of it
    gpu = _axis(fig, "GPU mem MiB")
    assert np.nanmax(gpu.get_lines()[0].get_ydata()) == 13.0  # type: ignore[attr-defined]
    # the 24 GiB capacity would flatten 13 MiB: named in the legend, not drawn
    texts = [t.get_text() for t in gpu.get_legend().get_texts()]  # type: ignore[attr-defined]
    assert "capacity 24 GiB (off the scale)" in texts


def test_legends_sit_beside_the_data_and_reference_lines_are_labelled() -> None:
    fig = plots.timeline_figure(build(rss=lambda i: 2 * GIB))
    fig.canvas.draw()
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        box = leg.get_window_extent()
        assert box.x0 >= ax.get_window_extent().x1, ax.get_ylabel()  # right of the plot area
    cpu = _axis(fig, "CPU % of a core")
    assert "100 % = one core" in [t.get_text() for t in cpu.get_legend().get_texts()]  # type: ignore[attr-defined]
    gpu = _axis(fig, "GPU mem GiB")
    labels = [t.get_text() for t in gpu.get_legend().get_texts()]  # type: ignore[attr-defined]
    assert any("capacity 24 GiB" in t for t in labels)
    power = _axis(fig, "power W")
    assert any("power limit" in t.get_text() for t in power.get_legend().get_texts())  # type: ignore[attr-defined]


def test_charts_leave_pyplot_and_the_backend_alone() -> None:
    before = dict.__getitem__(matplotlib.rcParams, "backend")
    fig = plots.timeline_figure(build())
    assert isinstance(fig, Chart)
    assert dict.__getitem__(matplotlib.rcParams, "backend") == before
    png = fig._repr_png_()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        assert fig.number if hasattr(fig, "number") else True
        assert fig not in [plt.figure(n) for n in plt.get_fignums()]
