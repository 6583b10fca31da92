"""``gpuprobe pack`` as plain text: each level's times, throughput and load, the findings under
them."""

from __future__ import annotations

import shlex

from gpuprobe.core import render
from gpuprobe.core.render import one_line
from gpuprobe.core.units import count
from gpuprobe.core.wrap import hang_lines
from gpuprobe.tools.monitor.pack_model import PackLevel, PackReport
from gpuprobe.ui.findings import findings_lines, result_html

__all__ = ["level_repr", "pack_text"]


def pack_text(r: PackReport) -> str:
    """The report as a plain-text table with the findings under it."""
    load = (
        f", load average {r.load_average[0]:.2f} {r.load_average[1]:.2f} {r.load_average[2]:.2f}"
        if r.load_average
        else ""
    )
    gpus = f"{r.sharing.gpus} GPU" + ("s" if r.sharing.gpus != 1 else "")
    lines = [f"gpuprobe pack: {shlex.join(r.command)}", f"  machine: {r.cores} cores, {gpus}{load}"]
    gpu_col = r.sharing.gpus > 0  # no GPU: no GPU column, so the table fits 80 columns
    lines.append(
        f" {'N':>3}  {'wall':>7}  {'per copy':>8}  {'slowdown':>8}  {'throughput':>10}  "
        f"{'copies CPU':>10}  {'host busy':>9}" + (f"  {'GPU util':>8}" if gpu_col else "")
    )
    for lv in r.levels:
        mark = "*" if lv.n == r.recommended else " "
        failed = f"  ({lv.failed} failed)" if lv.failed else ""
        gpu = f"{lv.gpu_util_percent:.0f} %" if lv.gpu_util_percent is not None else "n/a"
        host = f"{lv.host_busy_percent:.0f} %" if lv.host_busy_percent is not None else "n/a"
        used = f"{lv.cpu_percent:.0f} %" if lv.cpu_percent is not None else "n/a"
        slow = f"{lv.slowdown:.2f}x" if lv.slowdown is not None else "n/a"
        lines.append(
            f"{mark}{lv.n:>3}  {lv.wall_s:>6.2f}s  {lv.mean_copy_s:>7.2f}s  "
            f"{slow:>8}  {count(lv.throughput):>10}  {used:>10}  {host:>9}"
            + (f"  {gpu:>8}" if gpu_col else "")
            + failed
        )
    lines.append(
        f"  * recommended; throughput: {r.unit}"
        + (", the copies' --rate summed; slowdown: of each copy's rate" if r.rate_regex else "")
        + "; copies CPU: their CPU seconds over the wall "
        "time, % of one core; host busy: all cores, whoever used them"
    )
    lines += findings_lines(r.findings)
    return "\n".join(hang_lines(lines))  # prose under its lead at 80 columns


def level_repr(level: PackLevel) -> str:
    """``<PackLevel 2 at once: 1.1 s wall, 6,545 jobs/h, slowdown 1.10×>``."""
    rate = f", {count(level.throughput)} {level.unit}" if level.throughput is not None else ""
    slow = f", slowdown {level.slowdown:.2f}×" if level.slowdown is not None else ""
    failed = f", {level.failed} failed" if level.failed else ""
    return one_line(
        "PackLevel", f"{level.n} at once: {level.wall_s:.3g} s wall{rate}{slow}{failed}"
    )


render.text.register(PackReport, pack_text)
render.repr_.register(PackLevel, level_repr)
render.html.register(PackReport, result_html)
