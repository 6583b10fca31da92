"""``gpuprobe precision`` as plain text: latency, speed-up and error per dtype, the findings
under them."""

from __future__ import annotations

from gpuprobe.core import render
from gpuprobe.core.units import NA, seconds
from gpuprobe.core.wrap import hang_lines
from gpuprobe.tools.memory.model import PrecisionReport
from gpuprobe.ui.findings import findings_lines, result_html

__all__ = ["precision_text"]


def _num(v: float | None, fmt: str = ".2g") -> str:
    if v is None:
        return NA
    if v == 0:
        return "0"
    return format(v, fmt)


def precision_text(r: PrecisionReport) -> str:
    """The report as a plain-text table with the findings under it."""
    work = f", {r.flops / 1e9:.3g} GFLOP a forward pass" if r.flops else ""
    lines = [f"gpuprobe precision: {r.device}, batch {r.batch}{work}"]
    metric = f"  {r.metric_name or 'metric':>10}" if r.metric_name else ""
    lines.append(
        f"  {'dtype':<6}  {'latency':>10}  {'samples/s':>10}  {'speedup':>7}  "
        f"{'max abs':>8}  {'rel err':>8}{metric}"
    )
    for x in r.results:
        if x.outcome != "ok":
            lines.append(f"  {x.dtype:<6}  {x.outcome}: {x.reason}")
            continue
        m = f"  {_num(x.metric, '.4g'):>10}" if r.metric_name else ""
        tp = f"{x.throughput:,.0f}" if x.throughput else "n/a"
        lines.append(
            f"  {x.dtype:<6}  {seconds(x.median_s):>10}  {tp:>10}  "
            f"{(x.speedup or 0):>6.2f}x  {_num(x.max_abs):>8}  {_num(x.rel_error):>8}{m}"
        )
    lines += findings_lines(r.findings, skip=("precision-skipped",))
    for n in r.notes:
        lines.append(f"  note: {n}")
    return "\n".join(hang_lines(lines))  # prose under its lead at 80 columns


render.text.register(PrecisionReport, precision_text)
render.html.register(PrecisionReport, result_html)
