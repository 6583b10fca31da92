"""Charts of a recorded timeline (matplotlib, imported lazily; no pyplot: the user's backend is
left alone).

Panels, on one shared time axis in seconds from the start:

- GPU: utilization (%, one line per GPU), memory used (GiB, dashed at capacity), power (W),
  SM clock (MHz) with the spans where a clock event reason held it back shaded;
- CPU: a heatmap of every core's utilization, the command's CPU in % of one core (the whole tree,
  the main process and its busiest thread; the dashed line at 100 % is one core), and memory
  (the command's RSS and the host's used memory, GiB).

Long recordings are reduced to at most :data:`MAX_POINTS` columns (means per bucket; the
utilization panel also shades each bucket's min-max).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuprobe.core import render
from gpuprobe.core.text import plain_text
from gpuprobe.tools.monitor.record import Recording
from gpuprobe.tools.monitor.summary import command_text
from gpuprobe.tools.monitor.timeline import Timeline
from gpuprobe.ui.plot_extra import figure_path

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CPU_PANELS",
    "GPU_PANELS",
    "MAX_POINTS",
    "figure_png",
    "panels_with_data",
    "plot_recording",
    "plot_timeline",
    "timeline_figure",
]

MAX_POINTS = 1500  # columns per chart; more than a 15-inch figure shows at 100 dpi
# The GPU's capacity line is drawn only when the memory used reaches this share of it; below, the
# line would squash the used memory to a flat line at 0, so the capacity is named in the legend.
MEMORY_CAPACITY_SHOWN_FRACTION = 0.05
GPU_PANELS = ("gpu_util", "gpu_memory", "gpu_power", "gpu_clock")
CPU_PANELS = ("cpu_heatmap", "cmd_cpu", "memory")
_PANEL_HEIGHT = 1.9  # inches
_NOTHING = "no samples with GPU, CPU or memory readings in this timeline: nothing to chart"
_WARN_REASONS = (
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_slowdown",
    "hw_power_brake_slowdown",
    "sw_power_cap",
)
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _mpl() -> Any:
    """The figure class (a :class:`~gpuprobe.ui.chart.Chart`); the user's backend and
    pyplot's state are left alone."""
    from gpuprobe.ui.chart import Chart

    return Chart


def _legend(ax: Axes, handles: Any = None, *, twin: bool = False) -> None:
    """The legend beside the panel, off the data (past the right axis' labels with ``twin``)."""
    kw: dict[str, Any] = {
        "loc": "upper left",
        "bbox_to_anchor": (1.075 if twin else 1.01, 1.0),
        "fontsize": 7,
        "frameon": False,
        "borderaxespad": 0.0,
    }
    if handles is not None:
        ax.legend(handles=handles, **kw)
    else:
        ax.legend(**kw)


def _mem_unit(peak_bytes: float) -> tuple[float, str]:
    """(scale, unit) so that a peak of ``peak_bytes`` reads well: MiB below 1 GiB."""
    return (1 / 2**20, "MiB") if peak_bytes < 2**30 else (1 / 2**30, "GiB")


def _bucket(t: np.ndarray, y: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """(t, mean, min, max) with at most ``n`` points; NaN (n/a) is ignored within a bucket."""
    import numpy as np

    if len(t) <= n:
        return t, y, y, y
    edges = np.linspace(0, len(t), n + 1).astype(int)
    tb, mean, lo, hi = [], [], [], []
    for a, b in itertools.pairwise(edges):
        if b <= a:
            continue
        seg = y[a:b]
        ok = seg[~np.isnan(seg)]
        tb.append(t[a:b].mean())
        mean.append(ok.mean() if ok.size else np.nan)
        lo.append(ok.min() if ok.size else np.nan)
        hi.append(ok.max() if ok.size else np.nan)
    return np.array(tb), np.array(mean), np.array(lo), np.array(hi)


def _series(tl: Timeline, index: int, name: str, scale: float = 1.0) -> tuple[Any, Any]:
    import numpy as np

    ts, ys = [], []
    for rel, tick in tl.gpu_ticks(index):
        v = getattr(tick.sample, name)
        ts.append(rel)
        ys.append(np.nan if v is None else float(v) * scale)
    return np.array(ts, dtype=float), np.array(ys, dtype=float)


def _gpu_label(tl: Timeline, index: int) -> str:
    for g in tl.header.gpus:
        if g.index == index and g.name:
            return plain_text(f"GPU {index} ({g.name})")
    return f"GPU {index}"


def _spans(t: Any, mask: Any) -> list[tuple[float, float]]:
    """Time spans where ``mask`` is true (for shading)."""
    spans: list[tuple[float, float]] = []
    start = None
    for i, m in enumerate(mask):
        if m and start is None:
            start = t[i]
        elif not m and start is not None:
            spans.append((start, t[i]))
            start = None
    if start is not None and len(t):
        spans.append((start, t[-1]))
    return spans


def _draw_gpu(ax: Axes, tl: Timeline, panel: str) -> None:
    import numpy as np

    GiB = 1 / 2**30
    for k, index in enumerate(tl.gpu_indices):
        color = _COLORS[k % len(_COLORS)]
        label = _gpu_label(tl, index)
        if panel == "gpu_util":
            t, y = _series(tl, index, "utilization_gpu")
            tb, mean, lo, hi = _bucket(t, y, MAX_POINTS)
            ax.fill_between(tb, lo, hi, color=color, alpha=0.15, linewidth=0)
            ax.plot(tb, mean, color=color, lw=1.2, label=label)
            ax.set_ylim(-2, 102)
            ax.set_ylabel("GPU util %")
        elif panel == "gpu_memory":
            t_raw, y_raw = _series(tl, index, "memory_used")
            peaks = [
                float(np.nanmax(_series(tl, i, "memory_used")[1]))
                for i in tl.gpu_indices
                if not np.all(np.isnan(_series(tl, i, "memory_used")[1]))
            ]
            scale, unit = _mem_unit(max(peaks, default=0.0))
            tb, mean, _, hi = _bucket(t_raw, y_raw * scale, MAX_POINTS)
            ax.plot(tb, hi, color=color, lw=1.2, label=f"{label} used")
            total = next((g.memory_total for g in tl.header.gpus if g.index == index), None)
            peak = max(peaks, default=0.0)
            # the capacity line only where it does not flatten the used memory to 0
            if total and peak >= MEMORY_CAPACITY_SHOWN_FRACTION * total:
                ax.axhline(
                    total * scale,
                    color=color,
                    ls="--",
                    lw=0.8,
                    label=f"{label} capacity {total * scale:.0f} {unit}",
                )
            elif total:
                ax.plot([], [], " ", label=f"capacity {total * GiB:.0f} GiB (off the scale)")
            ax.set_ylabel(f"GPU mem {unit}")
            ax.set_ylim(bottom=0)
        elif panel == "gpu_power":
            t, y = _series(tl, index, "power_w")
            tb, mean, _, _ = _bucket(t, y, MAX_POINTS)
            ax.plot(tb, mean, color=color, lw=1.2, label=f"{label} W")
            limit = next((g.power_limit_w for g in tl.header.gpus if g.index == index), None)
            if limit:
                ax.axhline(limit, color=color, ls="--", lw=0.8, label=f"{label} power limit")
            ax.set_ylabel("power W")
            t2, temp = _series(tl, index, "temperature_c")
            if not np.all(np.isnan(temp)):
                tw = getattr(ax, "_gpuprobe_twin", None) or ax.twinx()
                ax._gpuprobe_twin = tw  # type: ignore[attr-defined]
                tb2, m2, _, _ = _bucket(t2, temp, MAX_POINTS)
                tw.plot(tb2, m2, color=color, lw=0.8, ls=":")
                tw.set_ylabel("temp °C (dotted)")
        elif panel == "gpu_clock":
            t, y = _series(tl, index, "sm_clock_mhz")
            tb, mean, _, _ = _bucket(t, y, MAX_POINTS)
            ax.plot(tb, mean, color=color, lw=1.2, label=label)
            ax.set_ylabel("SM clock MHz")
            ticks = list(tl.gpu_ticks(index))
            mask = [
                bool(set(tk.sample.clock_event_reasons or ()) & set(_WARN_REASONS))
                for _, tk in ticks
            ]
            times = [rel for rel, _ in ticks]
            for k_span, (a, b) in enumerate(_spans(times, mask)):
                ax.axvspan(
                    a,
                    b,
                    color="#d62728",
                    alpha=0.15,
                    lw=0,
                    label="clocks held back (thermal / power / hw slowdown)"
                    if k_span == 0 and k == 0
                    else None,
                )
    if tl.gpu_indices:
        _legend(ax, twin=panel == "gpu_power")


def _draw_cpu(fig: Figure, ax: Axes, tl: Timeline, panel: str) -> None:
    import numpy as np

    t = np.array([s.t - tl.start for s in tl.samples], dtype=float)
    if panel == "cpu_heatmap":
        cores = max((len(s.host.cpu_percent) for s in tl.samples), default=0)
        ax.set_ylabel("core")
        if not cores or not len(t):
            ax.text(0.5, 0.5, "no host samples", ha="center", transform=ax.transAxes)
            return
        m = np.full((cores, len(t)), np.nan)
        for j, s in enumerate(tl.samples):
            m[: len(s.host.cpu_percent), j] = s.host.cpu_percent
        # each sample's CPU % covers the interval that ends at its time
        first = t[0] - (t[1] - t[0]) if len(t) > 1 else 0.0
        edges = np.concatenate([[max(0.0, first)], t])
        if len(t) > MAX_POINTS:
            cut = np.linspace(0, len(t), MAX_POINTS + 1).astype(int)
            m = np.stack(
                [np.nanmean(m[:, a:b], axis=1) for a, b in itertools.pairwise(cut)], axis=1
            )
            edges = edges[cut]
        im = ax.pcolormesh(
            edges, np.arange(cores + 1) - 0.5, m, cmap="magma", vmin=0, vmax=100, shading="flat"
        )
        ax.set_ylabel("core")
        if cores <= 16:
            ax.set_yticks(range(cores))
        # the colour bar just right of the heatmap, where the other panels have their legends
        # (a colour bar of the figure's layout sits past every legend, far from its panel)
        cb = fig.colorbar(im, cax=ax.inset_axes((1.01, 0.0, 0.012, 1.0)))
        cb.set_label("busy %", fontsize=7)
        cb.ax.tick_params(labelsize=7)
    elif panel == "cmd_cpu":

        def col(f: Any) -> Any:
            return np.array(
                [np.nan if s.tree is None or f(s.tree) is None else f(s.tree) for s in tl.samples],
                dtype=float,
            )

        for y, label, color in (
            (col(lambda tr: tr.cpu_percent), "command tree", "#1f77b4"),
            (col(lambda tr: tr.main_cpu_percent), "main process", "#2ca02c"),
            (col(lambda tr: tr.main_thread_max_percent), "busiest thread", "#d62728"),
            (
                col(lambda tr: tr.main_thread_runnable_percent),
                "busiest thread wants (ran + waited for a core)",
                "#ff9896",
            ),
        ):
            if np.all(np.isnan(y)):
                continue
            tb, mean, _, _ = _bucket(t, y, MAX_POINTS)
            ax.plot(tb, mean, lw=1.1, label=label, color=color, ls=":" if "wants" in label else "-")
        drawn = bool(ax.get_lines())
        ax.axhline(100, color="grey", ls="--", lw=0.8, label="100 % = one core")
        ax.set_ylabel("CPU % of a core")
        ax.set_ylim(bottom=0)
        if drawn:
            _legend(ax)
        else:
            ax.text(0.5, 0.5, "no process watched", ha="center", transform=ax.transAxes)
    elif panel == "memory":
        # the command's RSS on the left axis in a unit that fits it (13 MiB on a GiB axis is a
        # flat line at 0), the host's used memory on the right axis in GiB
        GiB = 1 / 2**30
        rss_b = np.array([_rss(s.tree) for s in tl.samples])
        used = np.array(
            [np.nan if s.host.memory_used is None else s.host.memory_used * GiB for s in tl.samples]
        )
        handles = []
        if np.all(np.isnan(rss_b)) and np.all(np.isnan(used)):
            ax.set_ylabel("memory")
            ax.text(0.5, 0.5, "no host samples", ha="center", transform=ax.transAxes)
            return
        if not np.all(np.isnan(rss_b)):
            scale, unit = _mem_unit(float(np.nanmax(rss_b)))
            tb, mean, _, _ = _bucket(t, rss_b * scale, MAX_POINTS)
            handles += ax.plot(
                tb, mean, lw=1.3, label=f"command RSS ({unit}, left)", color="#9467bd"
            )
            ax.set_ylabel(f"command RSS {unit}")
        else:
            ax.set_ylabel("command RSS")
        ax.set_ylim(bottom=0)
        tw = ax.twinx()
        tb, mean, _, _ = _bucket(t, used, MAX_POINTS)
        handles += tw.plot(tb, mean, lw=1.0, label="host used (GiB, right)", color="grey", ls="-.")
        tw.set_ylabel("host used GiB", fontsize=8)
        tw.tick_params(labelsize=8)
        tw.set_ylim(bottom=0)
        total = tl.header.host.memory_total
        if total:
            tw.set_ylim(0, total * GiB * 1.02)
            handles.append(
                tw.axhline(total * GiB, color="grey", ls=":", lw=0.8, label="host total")
            )
        _legend(ax, handles, twin=True)


# What each GPU panel draws (any one of them read makes the panel worth drawing).
_GPU_FIELDS = {
    "gpu_util": ("utilization_gpu",),
    "gpu_memory": ("memory_used",),
    "gpu_power": ("power_w", "temperature_c"),
    "gpu_clock": ("sm_clock_mhz",),
}


def _rss(tree: Any) -> float:
    """The tree's resident memory in bytes; NaN where unknown. 0 is unknown too: a live process
    is never 0 bytes resident, but the one that has just exited (a zombie) reads 0."""
    return float(tree.rss) if tree is not None and tree.rss else float("nan")


def _has_data(tl: Timeline, panel: str) -> bool:
    if panel in _GPU_FIELDS:
        return any(
            getattr(tick.sample, name) is not None
            for index in tl.gpu_indices
            for _, tick in tl.gpu_ticks(index)
            for name in _GPU_FIELDS[panel]
        )
    if panel == "cpu_heatmap":
        return any(s.host.cpu_percent for s in tl.samples)
    if panel == "cmd_cpu":
        return any(s.tree is not None for s in tl.samples)
    return any(s.host.memory_used is not None or _rss(s.tree) > 0 for s in tl.samples)


def panels_with_data(
    tl: Timeline, panels: tuple[str, ...] = GPU_PANELS + CPU_PANELS
) -> tuple[str, ...]:
    """Those of ``panels`` that ``tl`` has something to draw in: no GPU panel for a run without
    a GPU (or for a field the card does not report), no CPU panel for a timeline without host
    samples, so a replayed recording shows no empty panel."""
    return tuple(p for p in panels if _has_data(tl, p))


def timeline_figure(
    tl: Timeline,
    panels: tuple[str, ...] | None = None,
    *,
    title: str | None = None,
    width: float = 12.0,
) -> Figure:
    """One figure with ``panels`` (default: each panel with data, GPU ones first, see
    :func:`panels_with_data`), sharing the time axis. A timeline with nothing to draw gets one
    panel that says so."""
    Figure = _mpl()
    if panels is None:
        panels = panels_with_data(tl)
    if not panels:
        fig = Figure(figsize=(width, 0.6 + _PANEL_HEIGHT), layout="constrained")
        ax = fig.subplots()
        ax.text(0.5, 0.5, _NOTHING, ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        if title:
            fig.suptitle(plain_text(title), fontsize=10)
        return fig
    fig = Figure(figsize=(width, 0.6 + _PANEL_HEIGHT * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels, strict=True):
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
        if panel.startswith("gpu_"):
            _draw_gpu(ax, tl, panel)
        else:
            _draw_cpu(fig, ax, tl, panel)
    axes[-1].set_xlabel("seconds since start")
    end = max(tl.duration_s, 1e-3)
    axes[-1].set_xlim(0, end)
    if title:
        fig.suptitle(plain_text(title), fontsize=10)  # the command line: shown as written
    return fig


def figure_png(fig: Figure, *, dpi: int = 100) -> bytes:
    """The figure as PNG bytes."""
    from gpuprobe.ui.chart import figure_png as png

    return png(fig, dpi=dpi)


def plot_timeline(
    tl: Timeline, path: str | Path | None = None, *, panels: tuple[str, ...] | None = None
) -> Any:
    """``timeline.plot()``: the charts as a figure; with ``path``, titled with the command and
    written there (its suffix names the format) and the path returned."""
    if path is None:
        return timeline_figure(tl, panels)
    from gpuprobe.ui.chart import save_figure

    out = figure_path(path)  # before drawing: a wrong suffix costs nothing
    fig = timeline_figure(tl, panels, title=f"gpuprobe run: {command_text(tl.header.command)}")
    return save_figure(fig, out, private=True)  # its title is the command line


def plot_recording(
    rec: Recording, path: str | Path | None = None, *, panels: tuple[str, ...] | None = None
) -> Any:
    """``rec.plot()``: the recording's charts as a figure, or written to ``path``."""
    return plot_timeline(rec.timeline, path, panels=panels)


render.plot.register(Timeline, plot_timeline)
render.plot.register(Recording, plot_recording)
