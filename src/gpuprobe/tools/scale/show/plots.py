"""The charts of ``gpuprobe scale lstsq``: speedup and error against the number of workers, one line
per method, from a :class:`~gpuprobe.tools.scale.sweep.ScaleResult`.

:meth:`ScaleResult.plot() <gpuprobe.tools.scale.sweep.ScaleResult.plot>` delegates here. Figures are
:class:`~gpuprobe.ui.chart.Chart` objects, never pyplot's, so the user's matplotlib backend is
left alone; matplotlib is imported only when a chart is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuprobe.core import render
from gpuprobe.tools.scale.model import ScaleResult
from gpuprobe.tools.scale.rules import EXACT_ERROR_OK
from gpuprobe.ui.plot_extra import figure_path

__all__ = ["ERROR_FLOOR", "plot_scale", "scale_figure"]

# Errors drawn below this are drawn at it: float64's rounding level sits well above, and a log
# axis cannot show an exact 0.
ERROR_FLOOR = 1e-17


def scale_figure(result: ScaleResult) -> Any:
    """Speedup and error against workers, one line per method, on a figure object (never pyplot,
    so the user's matplotlib backend is left alone). A sweep with no error against numpy (run
    with ``--no-numpy``) has the speedup panel alone."""
    from gpuprobe.ui.chart import new_chart

    shown = [r.error_vs_numpy for r in result.results if r.error_vs_numpy is not None]
    fig = new_chart(figsize=(10 if shown else 5.5, 4), layout="constrained")
    ax1, *rest = fig.subplots(1, 2 if shown else 1, squeeze=False)[0]
    sizes = sorted({r.workers for r in result.results})
    ax1.plot(sizes, [w / sizes[0] for w in sizes], "k:", label="ideal")
    for method in dict.fromkeys(r.requested for r in result.results):
        rows = [r for r in result.results if r.requested == method]
        ws = [r.workers for r in rows]
        ax1.plot(ws, [r.speedup for r in rows], "o-", label=method)
        errs = [r.error_vs_numpy for r in rows]
        if rest and all(e is not None for e in errs):
            rest[0].plot(ws, [max(e, ERROR_FLOOR) for e in errs], "o-", label=method)  # type: ignore[type-var]
    ax1.set(
        xlabel="workers", ylabel=f"speedup over {sizes[0]} worker(s)", xticks=sizes, title="speedup"
    )
    ax1.legend()
    if rest:  # whole decades from float64's rounding level up, so 4e-15 does not look large
        (ax2,) = rest
        low = min(ERROR_FLOOR, min(max(e, ERROR_FLOOR) for e in shown) / 10)
        ax2.set_ylim(low, max(1e-8, max(shown) * 10))
        ax2.axhline(EXACT_ERROR_OK, color="grey", ls="--", lw=1, label=f"{EXACT_ERROR_OK:g}")
        ax2.set(
            xlabel="workers",
            ylabel="relative error vs numpy.linalg.lstsq",
            yscale="log",
            xticks=sizes,
            title="error",
        )
        ax2.legend()
    fig.suptitle(f"gpuprobe scale lstsq: {result.rows} × {result.cols} ({result.problem})")
    return fig


def plot_scale(result: ScaleResult, path: str | Path) -> Path:
    """Speedup and error against workers, one line per method, written to ``path`` in the format
    its suffix names (.png, .svg, .pdf, .jpg); returns the path."""
    from gpuprobe.ui.chart import save_figure

    out = figure_path(path)  # before drawing: a wrong suffix costs nothing
    out.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(scale_figure(result), out)


def plot(result: ScaleResult, path: str | Path | None = None) -> Any:
    """``result.plot()``: the figure; with ``path``, written there and the path returned."""
    return scale_figure(result) if path is None else plot_scale(result, path)


render.plot.register(ScaleResult, plot)
