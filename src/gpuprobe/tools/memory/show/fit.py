"""``gpuprobe fit`` as plain text: the trials as a table, the findings under it."""

from __future__ import annotations

from gpuprobe.core import render
from gpuprobe.core.units import count, seconds, size
from gpuprobe.tools.memory.model import FitResult
from gpuprobe.ui.findings import findings_lines, result_html

__all__ = ["fit_text"]


def fit_text(r: FitResult) -> str:
    """The result as a plain-text table with the findings under it."""
    head = f"gpuprobe fit: batch sizes {r.smallest}..{r.largest} ({r.candidates} candidates)"
    lines = [head]
    if r.cap:
        lines.append(f"  memory cap: {r.cap}")
    lines.append(
        f"  search: {r.search_trials} trials (bound ⌈log2 {r.candidates}⌉ + 2 = {r.trial_bound}), "
        f"tolerance {100 * r.tolerance:g} %, timer {r.timer}, "
        + ("each trial in its own process" if r.isolated else "in this process")
    )
    lines.append(f"  {'batch':>8}  {'fits':<4}  {'step':>10}  {'samples/s':>11}  {'peak mem':>10}")
    for t in r.trials:
        mark = "" if t.phase == "search" else " (curve)"
        if t.fits:
            lines.append(
                f"  {t.batch_size:>8}  {'yes':<4}  {seconds(t.median_s):>10}  "
                f"{count(t.throughput):>11}  {size(t.peak_memory):>10}{mark}"
            )
        else:
            lines.append(f"  {t.batch_size:>8}  {'OOM':<4}  {'':>10}  {'':>11}  {'':>10}{mark}")
    lines += findings_lines(r.findings, no_details=("fit-nothing-fits",))
    return "\n".join(lines)


render.text.register(FitResult, fit_text)
render.html.register(FitResult, result_html)
