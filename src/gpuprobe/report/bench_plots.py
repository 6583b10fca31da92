"""Charts of ``gpuprobe bench --plot FILE`` (PNG or SVG by the extension), with matplotlib's Agg
backend imported only here and only when asked: the crossover curves (elementwise and matmul),
bandwidth against copy size, and a roofline with each workload's point on it.

The roofline's roofs are the spec peaks for a GPU (FP32 and memory bandwidth from ``info``) and,
for the CPU, the best rates measured in this run (the best GEMM and the best streaming figure),
labelled as measured.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpuprobe._text import plain_text
from gpuprobe.bench.report import BenchReport, BenchResult
from gpuprobe.errors import UsageError

__all__ = ["plot_bench", "roofline_points"]

# Copies at least this large stream from DRAM (past any CPU's last-level cache): only they set the
# measured memory roof.
DRAM_BYTES = 64 * 2**20


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _empty(ax: Any, what: str) -> None:
    ax.text(
        0.5,
        0.5,
        f"no {what} results in this run",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="gray",
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _curves(ax: Any, results: list[BenchResult], kind: str) -> None:
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in results:
        if r.workload == "crossover" and r.case.startswith(kind) and r.ok and r.size and r.seconds:
            mode = r.case.split("-", 1)[1]
            label = f"{r.framework} {r.device}" + (" (with copies)" if mode == "copies" else "")
            series[label].append((r.size, r.seconds))
    if not series:
        _empty(ax, f"crossover {kind}")
        return
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.loglog(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            ms=3,
            ls="--" if "copies" in label else "-",
            label=label,
        )
    ax.set_xlabel("n (n×n matrices)" if kind == "matmul" else "elements")
    ax.set_ylabel("seconds (median)")
    ax.set_title(f"crossover: {'matmul' if kind == 'matmul' else 'elementwise a + b'}")
    if not any(r.device != "cpu" for r in results if r.workload == "crossover"):
        ax.text(
            0.02,
            0.98,
            "no GPU here: CPU curves only",
            transform=ax.transAxes,
            va="top",
            fontsize=8,
            color="gray",
        )
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def _bandwidth(ax: Any, results: list[BenchResult]) -> None:
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in results:
        if r.workload == "transfer" and r.ok and r.size and r.values.get("gbs"):
            series[f"{r.case} ({r.framework} {r.device})"].append(
                (r.size, float(r.values["gbs"] or 0))
            )
    if not series:
        _empty(ax, "transfer")
        return
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.semilogx([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=label)
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GB/s (d2d and host: read + write)")
    ax.set_title("bandwidth vs size")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def roofline_points(report: BenchReport) -> list[tuple[str, str, float, float]]:
    """(device, label, arithmetic intensity in FLOP/byte, GFLOP/s) for each workload's point:
    every matmul dtype at its largest size, scale, expression, and the largest elementwise op."""
    best: dict[tuple[str, str], BenchResult] = {}
    for r in report.results:
        if (
            not r.ok
            or r.measurement is None
            or r.workload not in ("matmul", "scale", "expression", "crossover")
        ):
            continue
        if r.workload == "crossover" and not r.case.startswith("elementwise-resident"):
            continue
        if r.workload == "scale" and r.case == "naive":
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
        and r.workload == "matmul"
        and r.case == "float32"
        and r.values.get("peak")
    ]
    bws = [
        r.values.get("peak") or 0.0
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and r.workload in ("scale", "expression")
        and r.values.get("peak")
    ]
    if flops and bws:
        return max(flops), max(bws), "spec"
    mm = [
        (r.values.get("tflops") or 0) * 1e3
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and r.workload == "matmul"
        and r.ok
        and r.case in ("float32", "float64")
    ]
    bw = [
        r.values.get("gbs") or 0.0
        for r in report.results
        if f"{r.framework} {r.device}" == device
        and r.ok
        and (r.workload == "scale" or (r.workload == "transfer" and (r.size or 0) >= DRAM_BYTES))
    ]
    return (max(mm) if mm else None), (max(bw) if bw else None), "measured"


def _roofline(ax: Any, report: BenchReport) -> None:
    import numpy as np

    pts = roofline_points(report)
    if not pts:
        _empty(ax, "matmul/scale/expression")
        return
    devices = sorted({p[0] for p in pts})
    colors = {d: f"C{i}" for i, d in enumerate(devices)}
    ais = [p[2] for p in pts]
    x = np.logspace(np.log10(min(ais) / 4), np.log10(max(ais) * 4), 100)
    for d in devices:
        peak, bw, source = _roofs(report, d)
        if peak and bw:
            ax.loglog(
                x,
                np.minimum(peak, x * bw),
                color=colors[d],
                alpha=0.5,
                label=f"{d} roof ({source}: {peak:.4g} GFLOP/s, {bw:.4g} GB/s)",
            )
    for d, label, ai, gf in pts:
        ax.loglog([ai], [gf], "o", color=colors[d], ms=4)
        ax.annotate(label, (ai, gf), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of least DRAM traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline")
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)


def plot_bench(report: BenchReport, path: str) -> None:
    """Write the four charts to ``path``; the format follows the extension (.png or .svg)."""
    if not path.lower().endswith((".png", ".svg")):
        raise UsageError(f"--plot {path}: give a .png or .svg file name")
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    results = list(report.results)
    _curves(axes[0][0], results, "elementwise")
    _curves(axes[0][1], results, "matmul")
    _bandwidth(axes[1][0], results)
    _roofline(axes[1][1], report)
    title = f"gpuprobe bench on {report.environment.hostname} ({report.created})"
    fig.suptitle(plain_text(title), fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UsageError(f"--plot {path}: cannot write it ({exc})") from None
    finally:
        plt.close(fig)
