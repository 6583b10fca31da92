"""Charts of ``gpuprobe bench --plot FILE`` (PNG, SVG, PDF or JPEG by the suffix) and of
``BenchReport.plot()``, drawn on a figure object (never pyplot, so the user's backend is left
alone), with matplotlib imported only when asked: each workload's curves of time against size
(crossover's elementwise and matmul), its charts of rate against size (transfer's bandwidth), and a
roofline with each workload's points on it, as each workload's ``plot`` declares
(:class:`~gpuprobe.tools.bench.workloads.base.Plot`).

The roofline's roofs are the spec peaks for a GPU (FP32 and memory bandwidth from ``info``) and,
for the CPU, the best rates measured in this run (the best GEMM and the best streaming figure),
labelled as measured.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from gpuprobe.core import render
from gpuprobe.core.text import plain_text
from gpuprobe.tools.bench.model import BenchReport, BenchResult
from gpuprobe.tools.bench.workloads import WORKLOADS, by_name
from gpuprobe.tools.bench.workloads.base import Curve, Roofline, SizeSeries, Workload
from gpuprobe.ui.plot_extra import figure_path

__all__ = ["bench_figure", "plot_bench", "roofline_points"]


def _empty(ax: Any, what: str) -> None:
    ax.text(
        0.5,
        0.5,
        f"no {what} results in this run: nothing to chart",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="gray",
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _curve_data(
    results: list[BenchResult], w: Workload, curve: Curve
) -> tuple[dict[str, list[tuple[int, float]]], set[str]]:
    """``curve``'s (size, seconds) points by series label, and the labels drawn dashed."""
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    dashed: set[str] = set()
    for r in results:
        if (
            r.workload == w.name
            and r.case.startswith(curve.cases)
            and r.ok
            and r.size
            and r.seconds
        ):
            label, dash = curve.series(r)
            series[label].append((r.size, r.seconds))
            if dash:
                dashed.add(label)
    return series, dashed


def _curves(ax: Any, results: list[BenchResult], w: Workload, curve: Curve) -> None:
    series, dashed = _curve_data(results, w, curve)
    if not series:  # not drawn by bench_figure, which leaves the panel out
        _empty(ax, curve.empty)
        return
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.loglog(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            ms=3,
            ls="--" if label in dashed else "-",
            label=label,
        )
    if curve.plain_ticks:  # the sizes run, as plain numbers: no crowded 2×10¹ 3×10¹ minor labels
        from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

        sizes = sorted({p[0] for pts in series.values() for p in pts})
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_major_formatter(lambda v, _pos: f"{v:.0f}")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(curve.xlabel)
    ax.set_ylabel("seconds (median)")
    ax.set_title(curve.title)
    if curve.cpu_only_note and not any(r.device != "cpu" for r in results if r.workload == w.name):
        ax.text(
            0.02,
            0.98,
            curve.cpu_only_note,
            transform=ax.transAxes,
            va="top",
            fontsize=8,
            color="gray",
        )
    ax.legend(fontsize=7, loc="best")
    ax.grid(True, which="both", alpha=0.3)


def _series_data(
    results: list[BenchResult], w: Workload, chart: SizeSeries
) -> dict[str, list[tuple[int, float]]]:
    """``chart``'s (size, value) points by series label."""
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in results:
        if r.workload == w.name and r.ok and r.size and r.values.get(chart.value):
            series[f"{r.case} ({r.framework} {r.device})"].append(
                (r.size, float(r.values[chart.value] or 0))
            )
    return series


def _series(ax: Any, results: list[BenchResult], w: Workload, chart: SizeSeries) -> None:
    series = _series_data(results, w, chart)
    if not series:  # not drawn by bench_figure, which leaves the panel out
        _empty(ax, chart.empty)
        return
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.semilogx([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=label)
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(chart.ylabel)
    ax.set_title(chart.title)
    ax.legend(fontsize=7, loc="best")
    ax.grid(True, which="both", alpha=0.3)


def _roofline_of(r: BenchResult) -> Roofline:
    """What ``r``'s workload puts on the roofline (nothing for a workload not here)."""
    w = by_name(r.workload)
    return w.plot.roofline if w is not None else Roofline()


def roofline_points(report: BenchReport) -> list[tuple[str, str, float, float]]:
    """(device, label, arithmetic intensity in FLOP/byte, GFLOP/s) for each case a workload puts
    on the roofline, at its largest size: every matmul dtype, scale, expression, and the
    elementwise op."""
    best: dict[tuple[str, str], BenchResult] = {}
    for r in report.results:
        points = _roofline_of(r).points
        if not r.ok or r.measurement is None or points is None or not points(r.case):
            continue
        key = (f"{r.framework} {r.device}", f"{r.workload} {r.case}")
        if key not in best or (r.size or 0) > (best[key].size or 0):
            best[key] = r
    out = []
    for (dev, label), r in sorted(best.items()):
        w = r.measurement.work if r.measurement else {}
        if w.get("flop") and w.get("bytes") and r.seconds:
            out.append((dev, label, w["flop"] / w["bytes"], w["flop"] / r.seconds / 1e9))
    return out


def _roofs(report: BenchReport, device: str) -> tuple[float | None, float | None, str]:
    """(peak GFLOP/s, bandwidth GB/s, where they come from) for one backend-device label."""
    flops = [
        (r.values.get("peak") or 0) * 1e3
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and r.case == _roofline_of(r).flop_roof
        and r.values.get("peak")
    ]
    bws = [
        r.values.get("peak") or 0.0
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and _roofline_of(r).memory_roof
        and r.values.get("peak")
    ]
    if flops and bws:
        return max(flops), max(bws), "spec"
    mm = [
        (r.values.get("tflops") or 0) * 1e3
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and r.ok
        and r.case in _roofline_of(r).measured_flop_roof
    ]
    bw = [
        r.values.get("gbs") or 0.0
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and r.ok
        and (measured := _roofline_of(r).measured_memory_roof) is not None
        and measured(r)
    ]
    return (max(mm) if mm else None), (max(bw) if bw else None), "measured"


_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d", "8")


def _dtype_roofs(report: BenchReport, device: str) -> dict[str, float]:
    """Spec peaks (GFLOP/s) of each matmul dtype measured on ``device`` other than float32 (and
    float64): the cases of a workload with a compute roof outside its measured roof's cases."""
    out: dict[str, float] = {}
    for r in report.results:
        roof = _roofline_of(r)
        if (
            f"{r.framework} {r.device}" == device
            and roof.flop_roof is not None
            and r.case not in roof.measured_flop_roof
            and r.values.get("peak")
        ):
            out[r.case] = max(out.get(r.case, 0.0), float(r.values["peak"] or 0) * 1e3)
    return out


def _giga_unit(dtype: str) -> str:
    """Integer products are operations, not floating-point ones: GOP/s for int8."""
    return "GOP/s" if dtype == "int8" else "GFLOP/s"


def _roofline(ax: Any, report: BenchReport) -> None:
    """Each device's roof and its points. A point is marked by its workload (the legend below
    says which), not a text label beside it, so labels never overlap; no point sits above the
    roofs drawn (a lower precision's own spec peak gets its own dashed roof, and a measured roof
    is the best rate measured)."""
    import numpy as np
    from matplotlib.lines import Line2D

    pts = roofline_points(report)
    if not pts:  # not drawn by bench_figure, which leaves the panel out
        _empty(ax, "/".join(w.name for w in WORKLOADS if w.plot.roofline.points is not None))
        return
    devices = sorted({p[0] for p in pts})
    colors = {d: f"C{i}" for i, d in enumerate(devices)}
    labels = sorted({p[1] for p in pts})
    markers = {lab: _MARKERS[i % len(_MARKERS)] for i, lab in enumerate(labels)}
    ais = [p[2] for p in pts]
    x = np.logspace(np.log10(min(ais) / 4), np.log10(max(ais) * 4), 100)
    roof_handles = []
    for d in devices:
        peak, bw, source = _roofs(report, d)
        best = max(gf for dev, _, _, gf in pts if dev == d)
        if source == "measured" and peak is not None:
            peak = max(peak, best)  # the best rate measured here is the measured roof
        if peak and bw:
            (h,) = ax.loglog(
                x,
                np.minimum(peak, x * bw),
                color=colors[d],
                alpha=0.5,
                label=f"{d} roof ({source}: {peak:.4g} GFLOP/s, {bw:.4g} GB/s)",
            )
            roof_handles.append(h)
            if source == "spec":
                dtype_roofs = _dtype_roofs(report, d)
                if best > max([peak, *dtype_roofs.values()]):  # past every spec: say so
                    dtype_roofs["measured"] = best
                for dtype, dpeak in sorted(dtype_roofs.items()):
                    if dpeak > peak:
                        (h2,) = ax.loglog(
                            x,
                            np.minimum(dpeak, x * bw),
                            color=colors[d],
                            alpha=0.4,
                            ls="--",
                            label=f"{d} {dtype} roof "
                            + (
                                f"({dpeak:.4g} GFLOP/s, past the spec)"
                                if dtype == "measured"
                                else f"(spec: {dpeak:.4g} {_giga_unit(dtype)})"
                            ),
                        )
                        roof_handles.append(h2)
    for d, label, ai, gf in pts:
        ax.loglog([ai], [gf], markers[label], color=colors[d], ms=5, ls="none")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of least DRAM traffic)")
    ints = any(label.endswith(" int8") for _, label, _, _ in pts)
    ax.set_ylabel("GFLOP/s (GOP/s for int8)" if ints else "GFLOP/s")
    ax.set_title("roofline")
    ax.grid(True, which="both", alpha=0.3)
    point_handles = [
        Line2D([], [], marker=markers[lab], color="black", ls="none", ms=5, label=lab)
        for lab in labels
    ]
    ax.legend(
        handles=roof_handles + point_handles,
        fontsize=6,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        borderaxespad=0.0,
    )


def bench_figure(report: BenchReport) -> Any:
    """The charts as one :class:`~gpuprobe.ui.chart.Chart` (Jupyter shows it inline), two a row:
    every workload's curves, then every workload's rate-against-size charts, then the roofline,
    each only where this run has its results (``bench matmul`` has no crossover chart; a run
    that measured nothing gets one panel saying so)."""
    from gpuprobe.ui.chart import new_chart

    results = list(report.results)
    draws: list[Callable[[Any], None]] = [
        *(
            partial(_curves, results=results, w=w, curve=c)
            for w in WORKLOADS
            for c in w.plot.curves
            if _curve_data(results, w, c)[0]
        ),
        *(
            partial(_series, results=results, w=w, chart=c)
            for w in WORKLOADS
            for c in w.plot.series
            if _series_data(results, w, c)
        ),
        *((partial(_roofline, report=report),) if roofline_points(report) else ()),
    ]
    if not draws:
        draws = [partial(_empty, what="measured")]
    rows = (len(draws) + 1) // 2
    cols = 1 if len(draws) == 1 else 2
    fig = new_chart(figsize=(6.5 * cols, 4.5 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, draw in enumerate(draws):
        draw(axes[i // cols][i % cols])
    if len(draws) % cols:
        fig.delaxes(axes[-1][-1])
    title = f"gpuprobe bench on {report.environment.hostname} ({report.created})"
    fig.suptitle(plain_text(title), fontsize=10)
    return fig


def plot_bench(report: BenchReport, path: str | Path | None = None) -> Any:
    """The charts as a figure; with ``path``, written there in the format its suffix names
    (.png, .svg, .pdf, .jpg) and the path returned."""
    if path is None:
        return bench_figure(report)
    from gpuprobe.ui.chart import save_figure

    out = figure_path(path)  # before drawing: a wrong suffix costs nothing
    return save_figure(bench_figure(report), out)


render.plot.register(BenchReport, plot_bench)
